"""docs/settings.md is the settings reference automem/common/settings_reference.py renders
from automem/common/settings.py: every setting, with its variables, default and meaning
(break-it review: a score of settings were documented nowhere but in settings.py)."""

from __future__ import annotations

import re
from pathlib import Path

from automem.common.settings import Settings
from automem.common.settings_reference import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def test_docs_settings_md_is_the_rendered_reference() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/settings.md is out of date: .venv/bin/python -m automem.common.settings_reference > docs/settings.md")


def test_every_setting_is_in_the_reference_with_its_variables_and_a_meaning() -> None:
    text = render()
    rows = {line.split(" | ")[0].removeprefix("| ") for line in text.splitlines() if line.startswith("| `")}
    assert len(rows) == len(Settings.model_fields), (len(rows), len(Settings.model_fields))
    for name, field in Settings.model_fields.items():
        first = field.validation_alias.choices[0]
        assert any(row.startswith(f"`{first}`") for row in rows), name
    undocumented = [line.split(" | ")[0] for line in text.splitlines() if line.startswith("| `") and line.endswith("| — |")]
    assert undocumented == [], undocumented


def test_every_setting_is_read_by_the_code() -> None:
    """A setting nothing reads does nothing when set (AUTOMEM_ENRICHMENT_ENABLED, which the
    Helm chart offered as ``config.enrichmentEnabled``, and AUTOMEM_GATEWAY_ENABLED were such):
    each field is named outside settings.py (as an attribute, or an ``<name>_addr`` family
    read with getattr)."""
    root = Path(__file__).resolve().parents[2] / "automem"
    code = "\n".join(p.read_text(encoding="utf-8") for p in root.rglob("*.py")
                     if p.name not in ("settings.py", "settings_reference.py") and "v1" not in p.parts)
    unread = [name for name in Settings.model_fields
              if not re.search(rf"\b{name}\b", code) and not (name.endswith("_addr") and '_addr")' in code)]
    assert unread == [], unread
