"""Settings that made the service unusable or a start end in a traceback are refused as
settings, naming the variable (automem/common/settings.py): each was accepted before and
showed only at run time (every POST 413 at AUTOMEM_MAX_BODY_BYTES=-1, every store 400 at
AUTOMEM_CONTENT_MAX_LENGTH=-1, recall answering nothing at AUTOMEM_RECALL_MAX_LIMIT=0, scores
null with SEARCH_WEIGHT_VECTOR=nan, a ValueError traceback for AUTOMEM_LOG_LEVEL=LOUD, an API token
no header can carry, a default scope no request may name, a rate limit of 0 or one that
ended the start in a traceback), and ``automem serve --target ''`` ran on serving nothing
(``--target bogus`` ended in a traceback). Durations and counts below their meaning were
accepted too (AUTOMEM_MAX_DELIVER=0 parked a failed event at its first failure while JetStream
reads 0 as no limit; a negative ack wait, stall, LLM timeout or recency window;
CONSOLIDATION_TICK_SECONDS=0 turned the scheduler into a loop polling every 50 ms), a rate
limit over a period of 0 ('10/0 minute') was read as '10/minute', and ``--target
gateway,gateway`` was accepted. So were similarity and relevance thresholds outside 0..1 (a
SIMILAR_TO threshold of 1.5 silently turned linking off) and a forget delete threshold above
the archive one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from automem.cli.main import main
from automem.common.settings import Settings


@pytest.mark.parametrize(("variable", "value"), [
    ("AUTOMEM_MAX_BODY_BYTES", "-1"), ("AUTOMEM_CONTENT_MAX_LENGTH", "-1"), ("AUTOMEM_RECALL_MAX_LIMIT", "0"),
    ("AUTOMEM_BATCH_MAX", "-1"), ("AUTOMEM_BY_TAG_MAX_LIMIT", "0"), ("SEARCH_WEIGHT_VECTOR", "nan"),
    ("SEARCH_WEIGHT_KEYWORD", "-0.5"), ("AUTOMEM_DEDUP_WINDOW_SECONDS", "inf"), ("AUTOMEM_LOG_LEVEL", "LOUD"),
    # A token no header can carry locked every client out; a scope no request may name; a
    # limit of 0 refused every request, an unparsable one ended the start in a traceback.
    ("AUTOMEM_API_TOKEN", "tok\n"), ("AUTOMEM_API_TOKEN", " tok"), ("AUTOMEM_API_TOKEN", "t\u00f8k"),
    ("ADMIN_API_TOKEN", "ad min"), ("AUTOMEM_DEFAULT_SCOPE", "a b/*"), ("AUTOMEM_DEFAULT_SCOPE", ""),
    ("AUTOMEM_RATE_LIMIT", "0/minute"), ("AUTOMEM_RATE_LIMIT", "abc"), ("VECTOR_SIZE", "-1"),
    ("AUTOMEM_DATA_DIR", "/etc/hostname"), ("AUTOMEM_DATA_DIR", "/etc/hostname/data"),
    # Durations and counts below what they mean (0 where 0 has no meaning of its own).
    ("AUTOMEM_MAX_DELIVER", "0"), ("AUTOMEM_MAX_DELIVER", "-1"), ("AUTOMEM_ACK_WAIT_SECONDS", "-1"),
    ("AUTOMEM_ACK_WAIT_SECONDS", "0"), ("AUTOMEM_SHUTDOWN_GRACE_SECONDS", "-1"), ("AUTOMEM_START_STALL_SECONDS", "-1"),
    ("AUTOMEM_START_STALL_SECONDS", "0"), ("AUTOMEM_FALKORDB_STOP_REWRITE_SECONDS", "-1"),
    ("AUTOMEM_LLM_TIMEOUT_SECONDS", "-1"), ("AUTOMEM_LLM_TIMEOUT_SECONDS", "0"), ("AUTOMEM_LLM_MAX_RETRIES", "-1"),
    ("AUTOMEM_RECALL_LLM_TIMEOUT_SECONDS", "-1"), ("AUTOMEM_CONTENT_SUMMARY_LENGTH", "-1"),
    ("AUTOMEM_SUMMARY_MAX_LENGTH", "0"), ("SEARCH_RECENCY_WINDOW_DAYS", "-1"), ("SEARCH_RECENCY_WINDOW_DAYS", "0"),
    ("AUTOMEM_DEDUP_WINDOW_SECONDS", "-1"), ("AUTOMEM_SIMILAR_TOP_K", "-1"), ("CONSOLIDATION_TICK_SECONDS", "0"),
    ("CONSOLIDATION_DECAY_INTERVAL_SECONDS", "-1"), ("CONSOLIDATION_CREATIVE_INTERVAL_SECONDS", "-1"),
    ("CONSOLIDATION_CLUSTER_INTERVAL_SECONDS", "-1"), ("CONSOLIDATION_FORGET_INTERVAL_SECONDS", "-1"),
    ("AUTOMEM_SYNC_CHECK_INTERVAL_SECONDS", "-1"), ("AUTOMEM_CREATIVE_MAX_LINKS", "-1"),
    ("AUTOMEM_CLUSTER_MIN_SIZE", "1"), ("AUTOMEM_RATE_LIMIT", "10/0 minute"),
    ("AUTOMEM_RATE_LIMIT", "600/minute;20 per 0 second"),
    # Cosine and relevance thresholds outside 0..1 (no pair, or every pair, would qualify); a
    # delete threshold above the archive one.
    ("AUTOMEM_SIMILAR_THRESHOLD", "1.5"), ("AUTOMEM_SIMILAR_THRESHOLD", "-0.1"),
    ("AUTOMEM_CONTRADICTION_THRESHOLD", "2"), ("AUTOMEM_CREATIVE_THRESHOLD", "-1"), ("AUTOMEM_CLUSTER_THRESHOLD", "1.01"),
    ("CONSOLIDATION_ARCHIVE_THRESHOLD", "-0.2"),
    ("CONSOLIDATION_DELETE_THRESHOLD", "1.5"), ("CONSOLIDATION_DELETE_THRESHOLD", "0.3"),
    ("AUTOMEM_FORGET_PROTECTED_IMPORTANCE", "7"), ("AUTOMEM_FORGET_ARCHIVE_GRACE_DAYS", "-1"),
    # Refused where they were used, as a traceback (break-it review): a provider that does not
    # exist, a vector store URL that is none of its forms, a gRPC address without a port.
    ("AUTOMEM_EMBEDDING_PROVIDER", "nonsense"), ("QDRANT_URL", "notaurl"), ("QDRANT_URL", "ftp://q:6333"),
    ("AUTOMEM_RECALL_ADDR", "::::bad"), ("AUTOMEM_INGEST_ADDR", "ingest"), ("AUTOMEM_ENRICH_ADDR", "host:99999"),
    ("AUTOMEM_RECALL_ADDR", "localhost:abc"), ("AUTOMEM_RECALL_ADDR", "recall:"), ("AUTOMEM_RECALL_ADDR", "a:b:c"),
    ("AUTOMEM_RECALL_ADDR", "http://recall:50051"), ("QDRANT_URL", "http://q:notaport"), ("QDRANT_URL", "http://q:99999"),
    # nats-py read it as a host name and retried it for ever at start.
    ("NATS_URL", "not-a-url"), ("NATS_URL", "nats://127.0.0.1:99999"), ("NATS_URL", "http://nats:4222"),
    # uvicorn kept what is no address as a name no client address equals: nobody trusted, silently.
    ("AUTOMEM_FORWARDED_ALLOW_IPS", "garbage"), ("AUTOMEM_FORWARDED_ALLOW_IPS", "10.0.0.1, proxy"),
    ("AUTOMEM_FORWARDED_ALLOW_IPS", "10.0.0.1/8"), ("AUTOMEM_FORWARDED_ALLOW_IPS", "*, 10.0.0.1"),
    ("AUTOMEM_FORWARDED_ALLOW_IPS", "300.1.1.1"),
])
def test_an_unusable_setting_is_refused_naming_it(monkeypatch, variable, value) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert variable in str(caught.value) or any(
        variable in str(e.get("loc", "")) or variable.lower().removeprefix("automem_") in str(e.get("loc", ""))
        for e in caught.value.errors())


@pytest.mark.parametrize(("given", "level"), [("warning", "WARNING"), (" info ", "INFO"), ("WARN", "WARNING"),
                                             ("warn", "WARNING"), ("fatal", "CRITICAL")])
def test_a_log_level_is_read_in_any_case_and_in_logging_s_other_names(monkeypatch, given, level) -> None:
    monkeypatch.setenv("AUTOMEM_LOG_LEVEL", given)
    assert Settings().log_level == level


def test_usable_providers_vector_urls_and_grpc_addresses_are_kept(monkeypatch) -> None:
    """The forms the service reads (automem/vectors/__init__.py make_vector_store, the Helm
    chart's AUTOMEM_*_ADDR: deploy/helm/automem/templates/lib/_env.tpl) stay accepted."""
    for provider in ("minilm", "WordLlama", "openai", ""):  # empty: the default, MiniLM
        monkeypatch.setenv("AUTOMEM_EMBEDDING_PROVIDER", provider)
        assert Settings().embedding_provider == provider
    for url in ("", "disabled", "DISABLED", ":memory:", "local:/tmp/q", "unix:/tmp/v.sock", "http://qdrant:6333",
                "https://q.example.com"):
        monkeypatch.setenv("QDRANT_URL", url)
        assert Settings().qdrant_url == url
    for address in ("", "recall:50051", "127.0.0.1:50051", "[::1]:50051",
                    "dns:///automem-recall-headless.ns.svc.cluster.local:50051", "unix:/tmp/recall.sock"):
        monkeypatch.setenv("AUTOMEM_RECALL_ADDR", address)
        assert Settings().recall_addr == address


def test_forwarded_allow_ips_keeps_the_forms_uvicorn_reads(monkeypatch) -> None:
    for value in ("127.0.0.1", "*", "", "10.0.0.1, 192.168.0.0/16,::1", "fd00::/8", " 10.1.2.3 "):
        monkeypatch.setenv("AUTOMEM_FORWARDED_ALLOW_IPS", value)
        assert Settings().forwarded_allow_ips == value


def test_usable_tokens_scopes_and_limits_are_kept(monkeypatch) -> None:
    for variable, value in [("AUTOMEM_API_TOKEN", "s3cr3t-Tok_en.~+/="), ("AUTOMEM_DEFAULT_SCOPE", "acme/team-1"),
                            ("AUTOMEM_RATE_LIMIT", "600/minute;20/second")]:
        monkeypatch.setenv(variable, value)
    settings = Settings()
    assert (settings.api_token, settings.default_scope, settings.rate_limit) == (
        "s3cr3t-Tok_en.~+/=", "acme/team-1", "600/minute;20/second")


def test_zero_where_it_means_none_and_a_period_of_several_units_are_kept(monkeypatch) -> None:
    for variable, value in [("AUTOMEM_DEDUP_WINDOW_SECONDS", "0"), ("AUTOMEM_SHUTDOWN_GRACE_SECONDS", "0"),
                            ("AUTOMEM_SYNC_CHECK_INTERVAL_SECONDS", "0"), ("AUTOMEM_SIMILAR_TOP_K", "0"),
                            ("AUTOMEM_LLM_MAX_RETRIES", "0"), ("AUTOMEM_FALKORDB_STOP_REWRITE_SECONDS", "0"),
                            ("AUTOMEM_MAX_DELIVER", "1"), ("AUTOMEM_CLUSTER_MIN_SIZE", "2"),
                            ("AUTOMEM_RATE_LIMIT", "10/2 minute;1 per second"),
                            ("AUTOMEM_SIMILAR_THRESHOLD", "0"), ("AUTOMEM_CLUSTER_THRESHOLD", "1"),
                            ("CONSOLIDATION_ARCHIVE_THRESHOLD", "0.3"), ("CONSOLIDATION_DELETE_THRESHOLD", "0.3")]:
        monkeypatch.setenv(variable, value)
    settings = Settings()
    assert (settings.dedup_window_seconds, settings.shutdown_grace_seconds, settings.sync_check_interval_seconds,
            settings.similar_top_k, settings.llm_max_retries, settings.falkordb_stop_rewrite_seconds,
            settings.max_deliver, settings.cluster_min_size, settings.rate_limit, settings.similar_threshold,
            settings.cluster_threshold, settings.forget_archive_threshold, settings.forget_delete_threshold) == (
        0, 0, 0, 0, 0, 0, 1, 2, "10/2 minute;1 per second", 0, 1, 0.3, 0.3)


@pytest.mark.parametrize("target", ["", " , ", "bogus", "ingest,bogus"])
def test_serve_without_a_target_is_a_usage_error(target, capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--target", target])
    assert caught.value.code == 2 and "--target" in capsys.readouterr().err


@pytest.mark.parametrize(("target", "twice"), [("gateway,gateway", "gateway"),
                                               ("ingest, recall,ingest,recall", "ingest, recall")])
def test_serve_naming_a_target_twice_is_a_usage_error(target, twice, capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--target", target])
    assert caught.value.code == 2
    assert f"--target: target(s) {twice} named more than once" in capsys.readouterr().err


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("AUTOMEM_CHILD_TARGETS", "bogus", "unknown target(s) bogus"),
    ("AUTOMEM_CHILD_TARGETS", "gateway,gateway", "named in more than one child process"),
    ("AUTOMEM_HOST", "bogus.invalid", "cannot resolve 'bogus.invalid'"),
    ("AUTOMEM_MAX_DELIVER", "0", "greater than or equal to 1"),
    ("AUTOMEM_RATE_LIMIT", "10/0 minute", "'10/0 minute': a period of 0 has no length"),
    ("NATS_URL", "not-a-url", "write it as nats://host:4222"),
    ("AUTOMEM_FORWARDED_ALLOW_IPS", "garbage", "'garbage' is not an IP address, a network (10.0.0.0/8) or '*'"),
])
def test_a_start_with_an_unusable_setting_is_one_line_and_exit_2(tmp_path, variable, value, says) -> None:
    """Each ended ``automem up`` in a "start failed" traceback after the embedded servers had started."""
    env = {**os.environ, variable: value, "AUTOMEM_DATA_DIR": str(tmp_path / "data"), "AUTOMEM_METRICS_PORT": "0"}
    result = subprocess.run([str(Path(sys.executable).parent / "automem"), "up"], env=env, capture_output=True,
                            text=True, check=False, timeout=60)
    assert result.returncode == 2, result
    assert result.stderr.strip().splitlines() == [line for line in result.stderr.strip().splitlines()
                                                  if line.startswith(f"automem: setting {variable}: ")], result.stderr
    assert says in result.stderr and not (tmp_path / "data").exists()


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_data_dir_is_the_default_not_the_working_directory(monkeypatch, value) -> None:
    """``Path("")`` is ``.``: ``AUTOMEM_DATA_DIR=`` (an ``.env`` line left empty) made ``automem
    up`` write nats/, falkordb/ and qdrant/ into the working directory (break-it round G)."""
    from automem.common.settings import DEFAULT_DATA_DIR

    monkeypatch.setenv("AUTOMEM_DATA_DIR", value)
    assert Settings().data_dir == DEFAULT_DATA_DIR == Path(".automem")
