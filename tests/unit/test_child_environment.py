"""The environment ``automem up`` gives its child processes (automem/children.py)."""

from __future__ import annotations

from automem.children import ChildProcess
from automem.common.settings import Settings


def test_the_enrich_child_runs_ner_in_a_thread_unless_told_otherwise(monkeypatch) -> None:
    monkeypatch.delenv("AUTOMEM_ENTITIES_PROCESS", raising=False)
    settings = Settings(port=0, metrics_port=0)
    assert settings.entities_process is True  # the setting's own default (one process)
    assert ChildProcess(settings, "enrich").environment({}, "")["AUTOMEM_ENTITIES_PROCESS"] == "false"
    assert "AUTOMEM_ENTITIES_PROCESS" not in ChildProcess(settings, "gateway").environment({}, "")


def test_an_explicit_entities_process_setting_reaches_the_enrich_child(monkeypatch) -> None:
    monkeypatch.setenv("AUTOMEM_ENTITIES_PROCESS", "true")
    settings = Settings(port=0, metrics_port=0)
    assert ChildProcess(settings, "enrich").environment({}, "")["AUTOMEM_ENTITIES_PROCESS"] == "true"


def test_a_child_that_keeps_exiting_is_restarted_later_each_time() -> None:
    """A child that could not start (its port taken) was restarted every half second for
    good; one that worked for a while and then exited is restarted at once."""
    from automem.children import RESTART_MAX_DELAY, RESTART_MIN_DELAY, RESTART_SETTLE_SECONDS, restart_delay

    delays, delay = [], RESTART_MIN_DELAY
    for _ in range(8):
        delay = restart_delay(delay, uptime=0.2)
        delays.append(delay)
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0] and delays[-1] == RESTART_MAX_DELAY
    assert restart_delay(30.0, uptime=RESTART_SETTLE_SECONDS) == RESTART_MIN_DELAY


def test_free_ports_come_from_below_the_kernels_ephemeral_range(tmp_path) -> None:
    """A port the kernel handed out itself (bind to 0) could be taken again by any outgoing
    connection before the server meant for it bound it (a CI run lost a child process so:
    "address already in use"). free_port picks below the ephemeral range, never the same port
    twice in a row, and falls back to the kernel's choice when the range is unknown."""
    import socket

    from automem.common.embedded import _below_ephemeral, free_port

    span = _below_ephemeral()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    if span is not None:
        assert all(span[0] <= p <= span[1] for p in ports), (span, ports)
    for port in ports[:3]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: bindable
    (tmp_path / "range").write_text("32768\t60999\n")
    assert _below_ephemeral(str(tmp_path / "range")) == (22768, 32767)
    (tmp_path / "range").write_text("1024 65535\n")
    assert _below_ephemeral(str(tmp_path / "range")) is None
    assert _below_ephemeral(str(tmp_path / "missing")) is None


def test_each_child_names_itself_to_telemetry_unless_told_otherwise(monkeypatch) -> None:
    """Every process of ``automem up`` reported service.name "automem": a child is
    ``automem-<targets>`` with ``automem.component=<targets>`` (as the Helm chart names its
    components), unless OTEL_SERVICE_NAME was given; other resource attributes are kept."""
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=dev")
    settings = Settings(port=0, metrics_port=0)
    env = ChildProcess(settings, "enrich").environment({}, "")
    assert env["OTEL_SERVICE_NAME"] == "automem-enrich"
    assert env["OTEL_RESOURCE_ATTRIBUTES"] == "deployment.environment=dev,automem.component=enrich"
    assert ChildProcess(settings, "gateway+recall").environment({}, "")["OTEL_SERVICE_NAME"] == "automem-gateway-recall"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memory-prod")
    assert ChildProcess(Settings(port=0, metrics_port=0), "enrich").environment({}, "")["OTEL_SERVICE_NAME"] == "memory-prod"


def test_the_parent_of_children_names_its_own_targets_to_telemetry(monkeypatch) -> None:
    """The children were ``automem-<targets>`` while the parent of ``automem up`` kept
    service.name "automem", which reads as the whole service."""
    from automem.children import parent_service_name

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    settings = Settings(port=0, metrics_port=0)
    assert parent_service_name(settings, ["ingest", "recall", "consolidate"], ["gateway", "enrich"]) == \
        "automem-ingest-recall-consolidate"
    assert parent_service_name(settings, ["ingest", "recall", "consolidate", "enrich", "gateway"], []) == "automem"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memory-prod")
    assert parent_service_name(Settings(port=0, metrics_port=0), ["ingest"], ["gateway"]) == "memory-prod"
