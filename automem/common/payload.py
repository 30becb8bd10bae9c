"""The one vector-payload builder.

Every writer of vector points (enrichment, drift repair, reindex) builds the payload with
:func:`build_payload` from the ``Memory`` message, so no point can hold a partial copy
(AutoMem weakness 1: its default write path left the validity window out). The payload is a
pre-filter only: recall hydrates bodies from the graph by id.
"""

from __future__ import annotations

from typing import Any

from automem.common.model import OPEN_END, Memory, first_epoch, state_name, type_name
from automem.common.text import text_key

#: Longest tag prefix indexed for ``tag_match=prefix``.
MAX_PREFIX = 64


def tag_prefixes(tags: list[str]) -> list[str]:
    """Every prefix (1..64 chars) of every tag's comparison key
    (:func:`automem.common.text.text_key`), sorted, de-duplicated."""
    out: set[str] = set()
    for tag in tags:
        low = text_key(tag)
        out.update(low[:i] for i in range(1, min(len(low), MAX_PREFIX) + 1))
    return sorted(out)


def build_payload(memory: Memory) -> dict[str, Any]:
    """Vector payload of ``memory``.

    Keys: memory_id, scope, tags, tags_lower and tag_prefixes (comparison keys,
    :func:`automem.common.text.text_key`, of the user tags plus entity tags), type, state, importance,
    confidence, valid_from / valid_to (epoch seconds; open end = 253402300799.0),
    event_time, update_time (epoch seconds), version, content_hash, embedding_model,
    content (informative only; never returned as the body).
    """
    tags = list(memory.tags)
    # Entity tags (enrichment-owned, automem/enrich/entities.py) match tag filters too.
    entity_tags = [e.tag for e in memory.entities if e.tag]
    valid_from = first_epoch(memory, "valid_from", "create_time", default=0.0)
    return {
        "memory_id": memory.id,
        "scope": memory.scope,
        "tags": tags,
        "tags_lower": sorted({text_key(t) for t in tags + entity_tags}),
        "tag_prefixes": tag_prefixes(tags + entity_tags),
        "type": type_name(memory.type),
        "state": state_name(memory.state),
        "importance": float(memory.importance),
        "confidence": float(memory.confidence),
        "valid_from": float(valid_from),
        "valid_to": float(first_epoch(memory, "valid_to", default=OPEN_END)),
        "event_time": float(first_epoch(memory, "event_time", "create_time", default=0.0)),
        "update_time": float(first_epoch(memory, "update_time", default=0.0)),
        "version": int(memory.version),
        "content_hash": memory.content_hash,
        "embedding_model": memory.embedding_model,
        "content": memory.content,
    }


#: Payload keys the vector search filters on (automem/recall/filters.py ``vector_filter``;
#: ``tag_prefixes`` follows ``tags_lower``). The other keys are informative or read back
#: from the graph.
FILTERED_KEYS = ("scope", "tags_lower", "state", "event_time")


def filtered_fields_changed(before: Memory, after: Memory) -> bool:
    """Whether ``after`` (a new version of ``before``) would put other values than
    ``before`` in a payload key the vector search filters on (:data:`FILTERED_KEYS`): a
    point written for ``before`` then answers those filters wrongly until its payload is
    rewritten (automem/ingest/logic.py ``mark_payload_behind``)."""
    old, new = build_payload(before), build_payload(after)
    return any(old[key] != new[key] for key in FILTERED_KEYS)
