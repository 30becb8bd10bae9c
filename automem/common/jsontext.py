"""Reading JSON text without altering it silently: the two checks every reader of a client's
JSON shares — the REST gateway's bodies (automem/gateway/schemas.py ``parse_json_body``), the
ingest service's ``metadata_json`` (automem/ingest/logic.py ``parse_metadata``) and the import
files (automem/cli/transfer_formats.py ``read_records``).

* A decimal number no 64-bit float holds as written (``1e-400`` reads back 0.0, ``1e400``
  infinite, ``0.1000000000000000000001`` as 0.1): :func:`inexact_number` says why;
  :func:`exact_float`, a ``parse_float`` hook, keeps such a number as :class:`InexactNumber`.
* An object giving one key twice (``{"x": 1, "x": 2}``): Python's ``json`` keeps the last
  value, other readers the first or both (RFC 8259 §4 leaves it open), so which one the
  sender meant is unknown. :func:`object_pairs` marks such objects, :func:`repeated_key_paths`
  names their keys by path.
* Arrays and objects nested thousands deep: ``json.loads`` raises RecursionError, which no
  reader expected (answered 500, or a traceback). :func:`loads` raises
  :class:`NestedTooDeeply` (a ValueError) instead.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from typing import Any

#: The reason given for a key sent twice in one object (every reader above uses it).
REPEATED_KEY = ("the key is given more than once in one object (JSON readers differ on which value counts); "
                "send each key once")


class NestedTooDeeply(ValueError):
    """JSON whose arrays and objects are nested deeper than the parser can read. The message:
    "arrays and objects nested too deeply to read (more than about N levels)"."""

    def __init__(self) -> None:
        super().__init__("arrays and objects nested too deeply to read "
                         f"(more than about {sys.getrecursionlimit()} levels)")


def loads(text: str | bytes, **hooks: Any) -> Any:
    """``json.loads(text, **hooks)``, raising :class:`NestedTooDeeply` (a ValueError) where it
    raises RecursionError; otherwise as ``json.loads`` (JSONDecodeError, ValueError)."""
    try:
        return json.loads(text, **hooks)
    except RecursionError:
        raise NestedTooDeeply from None


def inexact_number(text: str) -> str | None:
    """None when the double of the JSON number ``text`` is the same decimal (its shortest
    text, ``repr``, equals ``text`` or the same value: ``1.50``, ``1E5``, ``-0.0`` pass), else
    the reason it is refused: ``<text> cannot be held exactly by a 64-bit float (it would read
    back as <value>); ...``. ``text`` is what ``json`` hands a ``parse_float`` hook."""
    value = float(text)
    if repr(value) == text or (math.isfinite(value) and Decimal(text) == Decimal(repr(value))):
        return None
    return (f"{text} cannot be held exactly by a 64-bit float (it would read back as {value!r}); "
            "send at most 17 significant digits within ±1.7e308")


def key_path(path: str, key: str) -> str:
    """The path of ``key`` inside the value at ``path`` (``""`` = the top): ``metadata.x``;
    a key that is empty, has surrounding spaces or holds ``.``, ``[``, ``]`` or ``"`` is
    written as a JSON string in brackets (``metadata[""]``, ``metadata["a.b"]``), so it
    cannot be read as nesting."""
    if key and key.strip() == key and not any(c in key for c in '.[]"'):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


class InexactNumber(str):
    """The text of a JSON number no double holds as written (:func:`exact_float`), kept apart
    from the value so the reader can refuse it by path."""


def exact_float(text: str) -> float | InexactNumber:
    """``parse_float`` hook for ``json.loads``: the double of ``text`` when it holds the number
    exactly, else the text as :class:`InexactNumber` (:func:`inexact_number`)."""
    return float(text) if inexact_number(text) is None else InexactNumber(text)


class RepeatedKeys(dict):
    """A JSON object that gave keys more than once (:func:`object_pairs`): it holds each key's
    last value, as ``dict`` would; ``repeated`` names those keys in the order first repeated."""

    repeated: list[str]


def object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads``: the object as a dict, or a :class:`RepeatedKeys`
    when a key was given twice."""
    value = dict(pairs)
    if len(value) == len(pairs):
        return value
    marked = RepeatedKeys(value)
    seen: set[str] = set()
    repeated: dict[str, None] = {}  # ordered, O(1) membership: linear in the pairs
    for key, _ in pairs:
        if key in seen:
            repeated[key] = None
        else:
            seen.add(key)
    marked.repeated = list(repeated)
    return marked


def refusals(value: Any, path: str = "") -> list[tuple[str, str]]:
    """``(path, reason)`` of every key given twice (:func:`object_pairs`) and every number no
    double holds (:func:`exact_float`) in ``value``, in document order; ``path`` is ``value``'s
    own (``""`` at the top). Keys join as :func:`key_path` joins them, list positions as
    ``[i]``: ``metadata.x``, ``results[0].memory``. A number's reason is :func:`inexact_number`'s, a key's
    :data:`REPEATED_KEY`."""
    found: list[tuple[str, str]] = []
    if isinstance(value, InexactNumber):
        found.append((path, inexact_number(value) or ""))
    elif isinstance(value, dict):
        found.extend((key_path(path, key), REPEATED_KEY) for key in getattr(value, "repeated", ()))
        for key, item in value.items():
            found.extend(refusals(item, key_path(path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(refusals(item, f"{path}[{index}]"))
    return found


def lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a UTF-16 surrogate code point (U+D800–U+DFFF) of its own: what
    ``json.loads`` makes of an unpaired ``\\ud800`` escape, which has no UTF-8 form (no store
    holds it; encoding it raises UnicodeEncodeError)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_lines(text: str) -> list[str]:
    """The lines of a JSON Lines file: split at ``\\n`` only (a ``\\r`` before it dropped), as
    the format defines them (https://jsonlines.org: "the line separator is '\\n'").
    ``str.splitlines`` also splits at U+2028, U+2029, U+0085 and ``\\x1c``–``\\x1e``, which a
    JSON string may hold raw: a memory holding one made its export and backup unreadable,
    every later line numbered wrong (break-it review). The last line's missing ``\\n`` is fine."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
