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
