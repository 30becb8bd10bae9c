"""Log format and level (issue 15, item 8): every command takes ``--log-format json|text`` and
``--log-level``; the two formats write one line per record with the extra fields and the
trace id; the noisy libraries stay at WARNING below DEBUG."""

from __future__ import annotations

import io
import json
import logging

import pytest

from automem.cli import build_parser
from automem.common import logs

COMMANDS = [["up"], ["serve", "--target", "recall"], ["keys", "list"], ["mcp"], ["backup"], ["restore", "f.jsonl"],
            ["reindex"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_takes_log_format_and_level_before_or_after_its_name(command: list[str]) -> None:
    parser = build_parser()
    after = parser.parse_args([*command, "--log-format=text", "--log-level", "debug"])
    assert (after.log_format, after.log_level) == ("text", "DEBUG")
    before = parser.parse_args(["--log-format", "json", *command])
    assert before.log_format == "json" and not hasattr(before, "log_level")


def test_an_unknown_log_format_is_refused_naming_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["serve", "--log-format=xml"])
    assert exc.value.code == 2
    assert "--log-format" in capsys.readouterr().err
    with pytest.raises(ValueError, match="json, text"):
        logs.formatter("xml")


def _emit(fmt: str) -> str:
    stream = io.StringIO()
    logs.configure_logging("INFO", fmt)
    handler = logging.getLogger().handlers[0]
    handler.setStream(stream)
    logs.access("http", "/memory/{memory_id}", "GET", 200, 0.0123456, "key:abc123", "acme/app")
    return stream.getvalue()


@pytest.fixture(autouse=True)
def _restore_root():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name in logs.NOISY:
        logging.getLogger(name).setLevel(logging.NOTSET)


def test_json_lines_carry_the_access_fields() -> None:
    line = json.loads(_emit("json").strip())
    assert line["name"] == "automem.access" and line["level"] == "INFO" and line["message"] == "request"
    assert {k: line[k] for k in ("kind", "route", "method", "status", "duration_ms", "principal", "scope")} == {
        "kind": "http", "route": "/memory/{memory_id}", "method": "GET", "status": 200, "duration_ms": 12.346,
        "principal": "key:abc123", "scope": "acme/app"}
    assert "trace_id" in line


def test_text_lines_carry_the_access_fields() -> None:
    line = _emit("text").strip()
    assert "\n" not in line
    assert " INFO automem.access request " in line
    for part in ("kind=http", "route=/memory/{memory_id}", "status=200", "duration_ms=12.346", "principal=key:abc123",
                 "scope=acme/app"):
        assert part in line


def test_noisy_libraries_are_quiet_below_debug() -> None:
    logs.configure_logging("INFO", "json")
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    logs.configure_logging("DEBUG", "json")
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.DEBUG


def test_caller_id_never_echoes_a_secret() -> None:
    from automem.gateway.metrics import caller_id

    assert caller_id([(b"authorization", b"Bearer am_0a1b2c_s3cr3t")]) == ("key:0a1b2c", "")
    assert caller_id([(b"x-api-key", b"plain-token"), (b"x-automem-scope", b"acme/app")]) == ("token", "acme/app")
    assert caller_id([]) == ("anonymous", "")
