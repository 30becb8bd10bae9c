"""The one translator of the vector pre-filter.

:class:`automem.vectors.protocol.VectorFilter` says what a query may match;
:func:`translate` turns it into the filter object of a client library. Both backends share the translation: a backend only
supplies its :class:`Dialect` (how its library spells a value match, an any-of match, a
range, an id set and the must / must-not filter), so a filter means the same on the
embedded shard (``automem/vectors/edge.py``) and on a Qdrant server
(``automem/vectors/server.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from automem.common.text import text_key
from automem.vectors.points import canonical_id
from automem.vectors.protocol import VectorFilter

__all__ = ["Condition", "Dialect", "conditions", "translate"]


#: A condition in neutral form, before a dialect spells it:
#: ``("value", key, v)`` | ``("any", key, [v...])`` | ``("range", key, {"gte": .., "lt": ..})``
#: | ``("ids", [id...])``.
Condition = tuple


@dataclass(frozen=True)
class Dialect:
    """How one client library spells the conditions of a filter.

    ``value(key, v)``: the payload value at ``key`` equals ``v``; ``any(key, values)``: it is
    one of ``values``; ``range(key, bounds)``: it lies within ``bounds`` (keys ``gt``,
    ``gte``, ``lt``, ``lte``; float epoch seconds or numbers); ``has_id(ids)``: the point id is
    one of the canonical UUID strings ``ids``; ``filter(must, must_not)``: the filter of the
    two condition lists (each ``None`` when empty).
    """

    value: Callable[[str, Any], Any]
    any: Callable[[str, list[Any]], Any]
    range: Callable[[str, dict[str, float]], Any]
    has_id: Callable[[list[str]], Any]
    filter: Callable[[list[Any] | None, list[Any] | None], Any]


def _lower(values: Sequence[str]) -> list[str]:
    # The payload's tags_lower / tag_prefixes hold comparison keys (automem/common/payload.py).
    return [text_key(v) for v in values]


def conditions(flt: VectorFilter) -> tuple[list[Condition], list[Condition]]:
    """``(must, must_not)`` of ``flt`` in neutral form (:data:`Condition`). Tags and prefixes
    are turned into comparison keys (:func:`automem.common.text.text_key`), ids normalised (:func:`automem.vectors.points.canonical_id`, ValueError for a
    non-UUID)."""
    must: list[Condition] = []
    must_not: list[Condition] = []
    if flt.scope is not None:
        must.append(("value", "scope", flt.scope))
    if flt.states is not None:
        must.append(("any", "state", list(flt.states)))
    if flt.tags_any:
        must.append(("any", "tags_lower", _lower(flt.tags_any)))
    for tag in dict.fromkeys(_lower(flt.tags_all)):
        must.append(("value", "tags_lower", tag))
    if flt.prefixes_any:
        must.append(("any", "tag_prefixes", _lower(flt.prefixes_any)))
    for prefix in dict.fromkeys(_lower(flt.prefixes_all)):
        must.append(("value", "tag_prefixes", prefix))
    if flt.exclude_tags:
        must_not.append(("any", "tags_lower", _lower(flt.exclude_tags)))
    if flt.valid_at is not None:
        t = float(flt.valid_at)
        must.append(("range", "valid_from", {"lte": t}))
        must.append(("range", "valid_to", {"gt": t}))
    if flt.event_time_gte is not None or flt.event_time_lte is not None:
        rng: dict[str, float] = {}
        if flt.event_time_gte is not None:
            rng["gte"] = float(flt.event_time_gte)
        if flt.event_time_lte is not None:
            rng["lte"] = float(flt.event_time_lte)
        must.append(("range", "event_time", rng))
    if flt.ids is not None:
        must.append(("ids", [canonical_id(i) for i in flt.ids]))
    if flt.exclude_ids:
        must_not.append(("ids", [canonical_id(i) for i in flt.exclude_ids]))
    return must, must_not


def translate(flt: VectorFilter | None, dialect: Dialect) -> Any:
    """The library filter of ``flt`` spelled in ``dialect``; ``None`` when ``flt`` is
    ``None`` or sets nothing (no filter: every point matches)."""
    if flt is None:
        return None

    def spell(c: Condition) -> Any:
        if c[0] == "value":
            return dialect.value(c[1], c[2])
        if c[0] == "any":
            return dialect.any(c[1], list(c[2]))
        if c[0] == "range":
            return dialect.range(c[1], c[2])
        return dialect.has_id(list(c[1]))

    must, must_not = conditions(flt)
    if not must and not must_not:
        return None
    return dialect.filter([spell(c) for c in must] or None, [spell(c) for c in must_not] or None)
