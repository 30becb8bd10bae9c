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
