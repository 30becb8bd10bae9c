"""The settings reference, docs/settings.md, made from :class:`automem.common.settings.Settings`.

Every setting's environment variable names, default and description: the description is the
``#:`` comment above the field in automem/common/settings.py, grouped under that file's
``# --- <group> ---`` lines. An operator found a score of settings documented nowhere but in
that file (break-it review); tests/unit/test_settings_reference.py keeps docs/settings.md
equal to what this module renders, so a new setting cannot go undocumented.

Write the file with ``.venv/bin/python -m automem.common.settings_reference > docs/settings.md``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import AliasChoices
from pydantic_core import PydanticUndefined

from automem.common.settings import Settings

SOURCE = Path(__file__).with_name("settings.py")
_GROUP = re.compile(r"^    # --- (.+?) -*$")
_DOC = re.compile(r"^    #: ?(.*)$")
_FIELD = re.compile(r"^    (\w+): ")

HEADER = """# Settings

Every setting automem reads, by environment variable (the first name is the one to use; the
others are read too: AutoMem's names, older spellings). Made from the `#:` comments of
`automem/common/settings.py` by `automem/common/settings_reference.py`; a test keeps the two
equal. A bad value stops the start with one line naming the variable.
"""


def _groups() -> list[tuple[str, list[tuple[str, str]]]]:
    """``[(group, [(field name, description)])]`` in the order of settings.py."""
    groups: list[tuple[str, list[tuple[str, str]]]] = [("general", [])]
    doc: list[str] = []
    for line in SOURCE.read_text(encoding="utf-8").splitlines():
        if match := _GROUP.match(line):
            groups.append((match[1], []))
            doc = []
        elif match := _DOC.match(line):
            doc.append(match[1])
        elif (match := _FIELD.match(line)) and match[1] in Settings.model_fields:
            groups[-1][1].append((match[1], " ".join(doc)))
            doc = []
        elif not line.strip().startswith("#"):
            doc = []
    return [(name, fields) for name, fields in groups if fields]


def _names(field: Any) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [str(alias)] if alias else []


def _default(field: Any) -> str:
    value = field.default if field.default is not PydanticUndefined else field.default_factory()
    if isinstance(value, bool):
        return "true" if value else "false"
    if value == "" or value is None:
        return "(empty)"
    return str(value)


def _cell(text: str) -> str:
    """``text`` for a table cell: a setting named by its field (````name````) by its first
    variable, other reStructuredText literals as Markdown code, ``|`` escaped."""
    def literal(match: re.Match) -> str:
        field = Settings.model_fields.get(match[1])
        return f"`{_names(field)[0]}`" if field is not None and _names(field) else f"`{match[1]}`"
    return re.sub(r"``(.+?)``", literal, text).replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """docs/settings.md: :data:`HEADER`, then one table per group of settings.py."""
    out = [HEADER]
    for group, fields in _groups():
        out += [f"## {group[:1].upper()}{group[1:]}", "", "| variable | default | meaning |", "|---|---|---|"]
        for name, doc in fields:
            field = Settings.model_fields[name]
            names = _names(field)
            variable = " / ".join(f"`{n}`" for n in names) or f"`{name}`"
            out.append(f"| {variable} | `{_cell(_default(field))}` | {_cell(doc) or '—'} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
