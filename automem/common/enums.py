"""Request enums as words: ``SortOrder.SORT_ORDER_TIME_DESC`` <-> ``"time_desc"``.

The REST and MCP doors take AutoMem's lower-case words (sort, tag_mode, tag_match,
state_mode, recency_bias); the protos carry enums whose values are the enum's name prefix
plus the upper-cased word, with a ``*_UNSPECIFIED`` zero value meaning "the service's
default" (Buf's enum rules). The words are read from the enum descriptors, so adding a
value to a proto adds its word.
"""

from __future__ import annotations

from typing import Any

from automem.common.errors import InvalidArgument


def _prefix(enum: Any) -> str:
    return enum.DESCRIPTOR.values[0].name.removesuffix("UNSPECIFIED")


def enum_words(enum: Any) -> list[str]:
    """The words of ``enum`` (a generated EnumTypeWrapper), zero value excluded."""
    prefix = _prefix(enum)
    return [v.name.removeprefix(prefix).lower() for v in enum.DESCRIPTOR.values if v.number]


def enum_value(enum: Any, word: str | None, field: str) -> int:
    """The value of ``word`` (any case, surrounding blanks ignored) in ``enum``; 0 for an
    empty word. InvalidArgument naming ``field`` and the allowed words otherwise — also for
    ``unspecified``, the enum's zero, which no route lists (``tag_mode=unspecified`` was read
    as the default)."""
    if not word or not word.strip():
        return 0
    try:
        if word.strip().upper() == "UNSPECIFIED":
            raise ValueError(word)
        return enum.Value(_prefix(enum) + word.strip().upper())
    except ValueError:
        raise InvalidArgument(f"{field}: must be one of {', '.join(enum_words(enum))}, got {word!r}",
                              field=field) from None


def enum_word(enum: Any, value: int, field: str, default: str) -> str:
    """The word of ``value`` in ``enum``; ``default`` for 0 (unspecified). InvalidArgument
    naming ``field`` for a number the enum does not define (proto3 keeps unknown values)."""
    if value == 0:
        return default
    try:
        return enum.Name(value).removeprefix(_prefix(enum)).lower()
    except ValueError:
        raise InvalidArgument(f"{field}: unknown value {value}", field=field) from None
