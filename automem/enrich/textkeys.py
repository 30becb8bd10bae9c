"""Start-up migration of the stored comparison keys to :func:`automem.common.text.text_key`
(issue 12, item 5).

Existing data stays findable by **migrating at start**, not by computing keys on read: the
graph's tag filters are answered by FalkorDB's array indexes on ``tags_lower`` /
``entity_tags`` and the vector filters by Qdrant's keyword indexes on the payload, and neither
can normalise a stored value while it reads it. Memories written before the rule (version 0:
``str.lower()`` without Unicode normalisation) therefore get their keys rewritten once:

* graph: ``tags_lower`` and ``entity_tags`` rebuilt by the one node builder
  (:func:`automem.common.model.node_fields`), written only where the node's ``version`` is
  still the one read;
* vectors: for every memory whose tags, entity tags, content or predecessor's content hold a
  non-ASCII character (for ASCII text the new key equals ``lower()``, so nothing else
  changed), the point is written again with its own dense vector, the payload of
  :func:`automem.common.payload.build_payload` and the BM25 vector of the new terms.

The migration is versioned and idempotent: a ``:SchemaMigration {name: "text_keys"}`` node
records :data:`automem.common.text.TEXT_KEY_VERSION` once every memory was visited, and a run
that sees that version does nothing; an interrupted run starts again and rewrites the same
values. It runs before the enrichment consumer starts (automem/targets.py), so no enrichment
writes a point while it does.
"""

from __future__ import annotations

import logging
from typing import Any

from automem.common.model import node_fields, node_to_memory
from automem.common.payload import build_payload
from automem.common.text import TEXT_KEY_VERSION, analyze, bm25_doc_weights
from automem.graph import GraphStore

log = logging.getLogger(__name__)

#: Name of the migration's ``:SchemaMigration`` node.
MIGRATION = "text_keys"
#: Memories read per round trip.
BATCH = 500


def _non_ascii(*texts: Any) -> bool:
    return any(isinstance(t, str) and not t.isascii() for t in texts)


async def migrate_text_keys(graph: GraphStore, vectors: Any | None, batch: int = BATCH) -> dict[str, int]:
    """Rewrite keys built under an older :func:`text_key` rule (see the module docstring).

    Args:
        graph: the connected graph store.
        vectors: the vector store, or None when vectors are disabled (graph keys only).
        batch: memories per page.
    Returns ``{"visited", "graph_rewritten", "points_rewritten"}`` (all 0 when the recorded
    version is current). Store errors (Unavailable) propagate; nothing is recorded then.
    """
    counts = {"visited": 0, "graph_rewritten": 0, "points_rewritten": 0}
    if await graph.memories.migration_version(MIGRATION) >= TEXT_KEY_VERSION:
        return counts
    after = ""
    while True:
        page = await graph.memories.key_page(after, batch)
        if not page:
            break
        after = page[-1][0]["id"]
        counts["visited"] += len(page)
        rows = []
        repoint: dict[str, tuple[Any, str]] = {}
        for props, previous in page:
            memory = node_to_memory(props)
            keys = node_fields(memory, ["tags_lower", "entity_tags"])
            if (list(props.get("tags_lower") or []) != keys["tags_lower"]
                    or list(props.get("entity_tags") or []) != keys["entity_tags"]):
                rows.append({"id": memory.id, "version": int(memory.version), **keys})
            if _non_ascii(memory.content, previous, *memory.tags, *(e.tag for e in memory.entities)):
                repoint[memory.id] = (memory, previous)
        counts["graph_rewritten"] += await graph.memories.set_tag_keys(rows)
        if vectors is not None and repoint:
            counts["points_rewritten"] += await _rewrite_points(vectors, repoint)
    await graph.memories.set_migration_version(MIGRATION, TEXT_KEY_VERSION)
    if counts["graph_rewritten"] or counts["points_rewritten"]:
        log.warning("comparison keys rewritten to the current text_key rule", extra=counts)
    return counts


async def _rewrite_points(vectors: Any, memories: dict[str, tuple[Any, str]]) -> int:
    """Write the points of ``memories`` (id -> (memory, predecessor content)) again with their
    own dense vector, the current payload and BM25 terms. Points that do not exist (not
    embedded yet: enrichment builds them with the current rule) or whose payload holds
    another version (rewritten since) are left alone. Returns how many were written."""
    done = 0
    for point in await vectors.retrieve(list(memories), with_vectors=True):
        memory, previous = memories.get(str(point.id), (None, ""))
        if memory is None or point.vector is None or point.payload.get("version") != int(memory.version):
            continue
        memory.embedding_model = point.payload.get("embedding_model", memory.embedding_model)
        weights = bm25_doc_weights(analyze(memory.content), analyze(previous))
        keys = sorted(weights)
        await vectors.upsert(memory.id, point.vector, build_payload(memory),
                             sparse=(keys, [weights[k] for k in keys]) if keys else None)
        done += 1
    return done
