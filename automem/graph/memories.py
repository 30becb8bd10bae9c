"""Memory nodes (``:Memory``): every Cypher statement that reads or writes them.

Node properties come from the one node builder (:func:`automem.common.model.memory_to_node`;
partial writes from :func:`automem.common.model.node_fields`) and are read back with
:func:`automem.common.model.node_to_memory`. Every query of a memory binds its scope, except
the maintenance reads that span every scope (decay, sync, export) and writes by id of nodes
read in the same scope just before.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from automem.common.model import (
    NODE_READ_KEYS,
    OPEN_END,
    CandidateFields,
    Memory,
    Relation,
    epoch,
    memory_to_node,
    node_columns,
    node_fields,
    node_to_memory,
    relation_type_name,
    ts,
)
from automem.graph import outbox, versions
from automem.graph.outbox import Batch
from automem.graph.relations import relation_label, relation_labels
from automem.graph.repository import Repository

#: Node properties only enrichment writes (ingest leaves them alone unless content changed).
ENRICHMENT_FIELDS = ("embedding_status", "enrichment_status", "entities", "entity_tags", "summary",
                     "embedding_model")
#: Entity tags (automem/enrich/entities.py, ``entity:<kind>:<slug>``) are matched in the
#: ``entity_tags`` property as well; other tags only in ``tags_lower``. Both properties hold
#: comparison keys (automem/common/text.py ``text_key``), not the spellings.
ENTITY_TAG_PREFIX = "entity:"
#: ``embedding_status`` values of a memory whose vector point holds its current content:
#: DONE, and PAYLOAD_PENDING (an edit of a filtered field waits for enrichment to rewrite the
#: payload, automem/ingest/logic.py ``mark_payload_behind``).
VECTOR_CURRENT = ("EMBEDDING_STATUS_DONE", "EMBEDDING_STATUS_PAYLOAD_PENDING")
#: Cypher (a SET on node ``m``) for a write that changed a field the vector search filters on:
#: a point that holds the current content now has a payload behind (PAYLOAD_PENDING). Decided
#: in the write itself, on the status the node holds then, so an enrichment that settled DONE
#: between the caller's read and this write does not leave DONE over the old payload.
PAYLOAD_BEHIND = (f"SET m.embedding_status = CASE WHEN m.embedding_status IN {list(VECTOR_CURRENT)} "
                  "THEN 'EMBEDDING_STATUS_PAYLOAD_PENDING' ELSE m.embedding_status END ")
#: ``embedding_status`` values of a memory recall cannot trust the vector point of in full:
#: its content is not embedded (yet), or its payload lags an edit.
NOT_DONE = ("EMBEDDING_STATUS_UNSPECIFIED", "EMBEDDING_STATUS_PENDING", "EMBEDDING_STATUS_FAILED",
            "EMBEDDING_STATUS_PROVIDED", "EMBEDDING_STATUS_PAYLOAD_PENDING")
#: ``embedding_status`` values of a memory enrichment has still to process: its embedding is
#: to be made (not FAILED, which enrichment parked), or its payload to be rewritten.
_TO_ENRICH = ("EMBEDDING_STATUS_UNSPECIFIED", "EMBEDDING_STATUS_PENDING", "EMBEDDING_STATUS_PROVIDED",
              "EMBEDDING_STATUS_PAYLOAD_PENDING")
#: Node states of memories a sync check compares with the vector points.
#: ``RETURN`` items of a whole memory node ``m`` (automem/common/model.py ``node_columns``).
_NODE_COLUMNS = node_columns("m")
_LIVE_STATES = "['ACTIVE', 'SUPERSEDED', 'PENDING_REVIEW', 'ARCHIVED']"


class MemoryFilter(Protocol):
    """The recall filters a graph listing applies (automem/recall/filters.py ``Filters``):
    ``tags`` as comparison keys (automem/common/text.py ``text_key``) matched ``tag_match`` (exact | prefix) with ``tag_mode`` (any |
    all) in the user and entity tags, none of ``exclude_tags``, ``event_time`` within
    ``start``..``end`` (epoch seconds, inclusive, None = open)."""

    scope: str
    tags: list[str]
    tag_mode: str
    tag_match: str
    exclude_tags: list[str]
    start: float | None
    end: float | None


def filter_where(flt: MemoryFilter, var: str = "m") -> tuple[str, dict[str, Any]]:
    """A WHERE fragment (without WHERE) over node ``var`` for ``flt``, and its parameters
    (``f_``-prefixed, plus ``bt0``... from :func:`indexed_tags`).

    Exact tags are matched through :func:`indexed_tags` (FalkorDB's array indexes on
    ``tags_lower`` / ``entity_tags``), with the full list predicate added only where the
    index fragment alone is not the filter. Measured at 100,000 memories on a tag of 1,451:
    the list predicate ``any(x IN $tags WHERE x IN (m.tags_lower + m.entity_tags))`` made
    FalkorDB read the whole scope (72-135 ms); the indexed fragment reads the tag's
    memories (0.3-1.2 ms), docs/benchmarks.md ("tag-only listing at 100k")."""
    parts = [f"{var}.scope = $f_scope"]
    params: dict[str, Any] = {"f_scope": flt.scope}
    # User tags plus entity tags (automem/enrich/entities.py).
    all_tags = f"({var}.tags_lower + coalesce({var}.entity_tags, []))"
    if flt.tags:
        indexed, extra, check = indexed_tags(flt, var)
        if indexed:
            parts.append(indexed)
            params.update(extra)
        if check:
            params["f_tags"] = flt.tags
            # Names no caller's MATCH binds: the versions listing (automem/graph/versions.py
            # ``list_ids_at``) reads ``x`` nodes, and with ``x`` here the prefix form matched
            # nothing at a past known_at.
            if flt.tag_match == "exact":
                one = f"f_want IN {all_tags}"
            else:
                one = f"any(f_tag IN {all_tags} WHERE f_tag STARTS WITH f_want)"
            quant = "all" if flt.tag_mode == "all" else "any"
            parts.append(f"{quant}(f_want IN $f_tags WHERE {one})")
    if flt.exclude_tags:
        params["f_excl"] = flt.exclude_tags
        parts.append(f"NOT any(f_tag IN {all_tags} WHERE f_tag IN $f_excl)")
    if flt.start is not None:
        params["f_start"] = flt.start
        parts.append(f"{var}.event_time >= $f_start")
    if flt.end is not None:
        params["f_end"] = flt.end
        parts.append(f"{var}.event_time <= $f_end")
    return " AND ".join(parts), params


def indexed_tags(flt: MemoryFilter, var: str = "m") -> tuple[str, dict[str, Any], bool]:
    """The index-backed tag predicate over node ``var``: (Cypher fragment or "", its
    parameters ``$bt0``..., whether rows must still be checked against the full tag filter).
    The one rule for both :func:`filter_where` (recall listings) and :class:`TagIndex` (the
    by-tag listing).

    A FalkorDB array index answers membership (``$t IN m.tags_lower``) only, so prefix
    matching has no fragment. Entity tags (``entity:<kind>:<slug>``,
    automem/enrich/entities.py) are looked up in ``entity_tags`` as well; plain tags never
    appear there. FalkorDB does not intersect an OR of two array indexes with a range
    inside an AND, so ``tag_mode=all`` with an entity tag is driven by the plain tags (or
    the first tag) and the rest is checked."""
    if not flt.tags:
        return "", {}, False
    if flt.tag_match != "exact":
        return "", {}, True
    params: dict[str, Any] = {}
    terms: list[tuple[str, bool]] = []
    for i, tag in enumerate(flt.tags):
        params[f"bt{i}"] = tag
        if tag.startswith(ENTITY_TAG_PREFIX):
            terms.append((f"($bt{i} IN {var}.tags_lower OR $bt{i} IN {var}.entity_tags)", False))
        else:
            terms.append((f"$bt{i} IN {var}.tags_lower", True))
    if flt.tag_mode == "any":
        return "(" + " OR ".join(t for t, _ in terms) + ")", params, False
    plain = [t for t, simple in terms if simple]
    if len(plain) == len(terms):
        return " AND ".join(plain), params, False
    return (" AND ".join(plain) if plain else terms[0][0]), params, True


@dataclass
class ScopeAnalysis:
    """The rows of :meth:`Memories.analyze`: ``states`` [(state, count)] over the scope;
    over its ACTIVE memories that are not MetaPatterns: ``types`` [(type, count)],
    ``averages`` [(count, average confidence, average importance)], ``entities`` and
    ``tags`` [(tag, count)], most frequent first, then by tag; ``type_confidence``
    [(type, average confidence)]; ``patterns`` [(id, content, confidence, PART_OF members
    that read ACTIVE now)] of the scope's ACTIVE MetaPatterns, most confident first; ``preferences`` [(preferred
    content, other content, reason, strength)] of PREFERS_OVER edges between ACTIVE memories,
    strongest first; ``hours`` [(UTC hour of ``event_time``, count, average importance)];
    ``confidence`` [(low, medium, high)] counts (bands of AutoMem's automem/api/recall.py
    ``/analyze``: < 0.4, < 0.7, else)."""

    states: list[list[Any]]
    types: list[list[Any]]
    averages: list[list[Any]]
    entities: list[list[Any]]
    tags: list[list[Any]]
    type_confidence: list[list[Any]] = field(default_factory=list)
    patterns: list[list[Any]] = field(default_factory=list)
    preferences: list[list[Any]] = field(default_factory=list)
    hours: list[list[Any]] = field(default_factory=list)
    confidence: list[list[Any]] = field(default_factory=list)


@dataclass
class GraphCounts:
    """The rows of :meth:`Memories.graph_counts`: ``types`` and ``states`` [(name, count)],
    ``importance`` (high >= 0.8, medium 0.5..0.8, low < 0.5) and ``days`` [(UTC day number
    since the epoch, memories created that day)], newest day first."""

    types: list[tuple[str, int]]
    states: list[tuple[str, int]]
    importance: tuple[int, ...]
    days: list[tuple[int, int]]


class Memories(Repository):
    """Statements over ``:Memory`` nodes."""

    # --- create, read -------------------------------------------------------------------

    async def create_many(self, memories: Sequence[Memory]) -> None:
        """Create nodes for ``memories`` and their first versions (automem/graph/versions.py)
        in one atomic query."""
        rows = [memory_to_node(m) for m in memories]
        await self.store.query("UNWIND $rows AS row CREATE (m:Memory) SET m = row " + versions.record_row("row"),
                               versions.params({"rows": rows}))

    async def create_proposed(self, new: Memory, item: dict[str, Any], claim: str | None = None,
                              fingerprint: str = "") -> bool:
        """One query: create ``new`` (a PENDING_REVIEW replacement) with its first version and
        the ReviewItem ``item`` proposing that it supersedes another memory (the proposal a
        reviewer decides, automem/ingest/review.py); nothing is written to the memory it would
        replace. With ``claim`` (an ``:IdempotencyKey`` node key) the same query first claims
        it for ``new`` as :meth:`supersede` does. False (nothing written) when the key is
        claimed already."""
        claiming = ("MERGE (k:IdempotencyKey {key: $claim}) "
                    "ON CREATE SET k.memory_ids = [$row.id], k.create_time = $item.create_time, "
                    "k.request = $fingerprint WITH k WHERE k.memory_ids = [$row.id] ") if claim else ""
        rows = await self.store.query(
            f"{claiming}CREATE (m:Memory {{id: $row.id}}) SET m += $row " + versions.record("m", created=True)
            + "CREATE (i:ReviewItem) SET i = $item RETURN m.id",
            versions.params({"row": memory_to_node(new), "item": item, "claim": claim,
                             "fingerprint": fingerprint or None}))
        return bool(rows)

    async def get(self, memory_id: str, scope: str | None) -> Memory | None:
        """The memory with ``memory_id`` in ``scope`` (any scope when None), or None."""
        found = await self.hydrate([memory_id], scope)
        return found.get(memory_id)

    async def hydrate(self, ids: Iterable[str], scope: str | None) -> dict[str, Memory]:
        """Memories by id in one round trip (missing ids are absent from the result)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = await self.store.ro_query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) "
            f"WHERE $scope IS NULL OR m.scope = $scope RETURN {_NODE_COLUMNS}",
            {"ids": ids, "scope": scope},
        )
        return {row[0]: node_to_memory(dict(zip(NODE_READ_KEYS, row, strict=True))) for row in rows}

    async def hydrate_with_successors(
        self, ids: Iterable[str], scope: str, types: Sequence[str]
    ) -> tuple[dict[str, Memory], list[tuple[str, str, str, float, float]]]:
        """:meth:`hydrate` and :meth:`automem.graph.relations.Relations.outgoing` (edges of
        ``types`` leaving ``ids`` to memories of ``scope``) in one round trip, for the state
        pass of a recall page."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}, []
        labels = relation_labels(types)
        # One row per (memory, edge); the far end's scope is compared here, not in Cypher: a
        # filter on the far node (or an aggregation over the rows) made FalkorDB's plan cost
        # 10-1,000x more (measured in docs/benchmarks.md, issue 10). ``m.id IN $ids AND
        # m.scope = $scope`` is one index scan over both (``UNWIND`` + ``{id: mid}`` looked up
        # each id, then filtered the scope: 0.52 against 0.40 ms for 31 ids at 10k).
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.id IN $ids AND m.scope = $scope "
            f"OPTIONAL MATCH (m)-[r:{labels}]->(b:Memory) "
            f"RETURN type(r), b.id, b.scope, r.strength, r.create_time, {_NODE_COLUMNS}",
            {"ids": ids, "scope": scope},
        )
        memories: dict[str, Memory] = {}
        found: dict[str, list[tuple[str, str, str, float, float]]] = {}
        for rel, target, target_scope, strength, created, *node in rows:
            mid = node[0]
            if mid not in memories:
                memories[mid] = node_to_memory(dict(zip(NODE_READ_KEYS, node, strict=True)))
                found[mid] = []
            if target is not None and target_scope == scope:
                found[mid].append((mid, rel, target, float(strength or 0.0), float(created or 0.0)))
        # In the order of ``ids`` (the index scan returns its own order).
        return ({i: memories[i] for i in ids if i in memories},
                [edge for i in ids for edge in found.get(i, ())])

    async def recall_candidates(self, ids: Sequence[str], scope: str
                                ) -> list[tuple[CandidateFields, list[str], bool]]:
        """The fields recall ranks on, for many candidates in one round trip: ``[(fields,
        predecessor ids, embedded)]`` where ``fields`` holds id, scope, content, tags, entity
        tags, importance, confidence, event_time, create_time and type as the node stores them
        (:class:`automem.common.model.CandidateFields`), the ids are those its PRECEDED_BY
        edges point to in the same scope, and ``embedded`` is whether its vector point holds
        its current content (``embedding_status`` in :data:`VECTOR_CURRENT`; an edit of the
        content sets it back to PENDING until enrichment has embedded the new text,
        automem/ingest/logic.py ``apply_update``). Ids absent from ``scope`` are left out, the rest come in the order
        of ``ids``.

        Bodies are not read here: recall hydrates only the page (:meth:`hydrate`). The
        predecessor ids come back unfiltered; a ``p.id IN $ids`` test made FalkorDB look up each
        row and cost 100-347 ms for 200 ids (issue 10)."""
        if not ids:
            return []
        # One row per (memory, PRECEDED_BY edge), grouped here; see hydrate_with_successors
        # for why the far end's scope is not filtered in Cypher, and for the index scan of
        # ``m.id IN $ids AND m.scope = $scope`` (200 ids at 10k: 1.46 ms of FalkorDB's time
        # with ``UNWIND`` + ``{id: mid}``, 0.88 ms so).
        ids = list(dict.fromkeys(ids))
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.id IN $ids AND m.scope = $scope "
            "OPTIONAL MATCH (m)-[:PRECEDED_BY]->(p:Memory) "
            "RETURN m.id, m.content, m.tags, m.entity_tags, m.importance, m.confidence, "
            "m.event_time, m.create_time, m.embedding_status, m.type, p.id, p.scope",
            {"ids": ids, "scope": scope},
        )
        out: dict[str, tuple[CandidateFields, list[str], bool]] = {}
        for (mid, content, tags, entity_tags, importance, confidence, event_time, create_time,
             embedding_status, mtype, prev, prev_scope) in rows:
            if mid not in out:
                fields = CandidateFields(
                    id=mid, scope=scope, content=content or "", tags=tags or [], entity_tags=entity_tags or [],
                    importance=float(importance or 0.0), confidence=float(confidence or 0.0),
                    event_time=float(event_time) if event_time is not None else None,
                    create_time=float(create_time) if create_time is not None else None,
                    type=mtype or "")
                out[mid] = (fields, [], embedding_status in VECTOR_CURRENT)
            if prev is not None and prev_scope == scope:
                out[mid][1].append(prev)
        return [out[i] for i in ids if i in out]  # in the order of ``ids``

    async def count(self, scope: str | None = None, states: Sequence[str] | None = None, *,
                    patterns: bool = True) -> int:
        """Number of Memory nodes (optionally in one scope and states; ``patterns`` False
        leaves consolidation's MetaPatterns out, as a graph snapshot's nodes do)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE ($scope IS NULL OR m.scope = $scope) "
            "AND ($states IS NULL OR m.state IN $states) AND ($patterns OR m.type <> 'MetaPattern') "
            "RETURN count(m)",
            {"scope": scope, "states": list(states) if states else None, "patterns": patterns},
        )
        return int(rows[0][0]) if rows else 0

    async def recent_with_hash(self, memories: Sequence[Memory], window_seconds: float,
                               same: Sequence[str] = ()) -> list[Memory]:
        """The ACTIVE and PENDING_REVIEW memories sharing a scope and content hash with any of
        ``memories``, created at most ``window_seconds`` (epoch seconds) before it and equal
        to it in the node properties ``same`` (names of automem/common/model.py's node
        builder; KeyError for others), oldest first: the memories a store of ``memories``
        may repeat (the dedupe rule itself is automem/ingest/logic.py ``repeats``). One round
        trip on the content_hash index."""
        items = [{"h": m.content_hash, "scope": m.scope, "since": (epoch(m, "create_time") or 0.0) - window_seconds,
                  "p": node_fields(m, same)} for m in memories]
        equal = "".join(f" AND m.{name} = it.p.{name}" for name in same)
        rows = await self.store.ro_query(
            "UNWIND $items AS it MATCH (m:Memory {content_hash: it.h}) WHERE m.scope = it.scope "
            f"AND m.state IN ['ACTIVE', 'PENDING_REVIEW'] AND m.create_time >= it.since{equal} "
            "RETURN DISTINCT properties(m) AS p, m.create_time AS t ORDER BY t",
            {"items": items},
        )
        return [node_to_memory(row[0]) for row in rows]

    async def pending_review(self, scope: str) -> list[Memory]:
        """The PENDING_REVIEW memories of ``scope``."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.scope = $scope AND m.state = 'PENDING_REVIEW' RETURN properties(m)",
            {"scope": scope})
        return [node_to_memory(r[0]) for r in rows]

    async def with_any_tag(self, scope: str, tags: Sequence[str], states: Sequence[str]) -> list[Memory]:
        """Memories of ``scope`` in one of ``states`` carrying any of ``tags`` (comparison keys,
        automem/common/text.py ``text_key``; an ``entity:`` tag also in ``entity_tags``, as the
        by-tag listing's exact match: plain tags never appear there), in the listing's order:
        event time newest first, then importance, then id (automem/recall/bytag.py)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.scope = $scope AND m.state IN $states "
            "AND any(t IN $tags WHERE t IN m.tags_lower OR t IN coalesce(m.entity_tags, [])) "
            "RETURN properties(m) ORDER BY m.event_time DESC, m.importance DESC, m.id ASC",
            {"scope": scope, "tags": list(tags), "states": list(states)},
        )
        return [node_to_memory(r[0]) for r in rows]

    # --- search and listings ----------------------------------------------------------

    async def fulltext(self, query: str, scope: str, limit: int) -> list[tuple[str, float]]:
        """Full-text arm: (id, score) of Memory nodes in ``scope`` matching a sanitised
        RediSearch query, best first. An empty query returns []."""
        if not query.strip():
            return []
        rows = await self.store.ro_query(
            "CALL db.idx.fulltext.queryNodes('Memory', $q) YIELD node, score "
            "WHERE node.scope = $scope RETURN node.id, score ORDER BY score DESC LIMIT $limit",
            {"q": query, "scope": scope, "limit": int(limit)},
        )
        return [(r[0], float(r[1])) for r in rows]

    async def deleted_since(self, scope: str, since: float, limit: int) -> list[str]:
        """Ids of up to ``limit`` memories of ``scope`` created by ``since`` (epoch seconds)
        and deleted (state DELETED) after it, the latest deleted first: what a read at
        ``known_at = since`` believed and the vector store no longer holds (their points go
        with the delete; automem/recall/servicer.py ``_lexical``)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.scope = $scope AND m.state = 'DELETED' AND m.retract_time > $t "
            "AND m.create_time <= $t RETURN m.id ORDER BY m.retract_time DESC LIMIT $limit",
            {"scope": scope, "t": float(since), "limit": int(limit)})
        return [r[0] for r in rows]

    async def unembedded(self, scope: str, limit: int) -> list[tuple[str, str, bool]]:
        """(id, content, content embedded) of up to ``limit`` memories of ``scope`` whose
        vector point is missing or behind (``embedding_status`` in :data:`NOT_DONE`; the
        flag is True for PAYLOAD_PENDING: the point holds the current content, its payload
        lags an edit), through the ``embedding_status`` index: the cost grows with the
        backlog, not with the scope. DELETED and REJECTED memories are left out: one removed
        before its embedding keeps its status for good (it never gets a vector), and a bulk
        store deleted at once kept every later recall past ``UNEMBEDDED_SCAN_MAX`` on the
        full-text path (automem/recall/servicer.py ``_lexical``)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.embedding_status IN $statuses AND m.scope = $scope "
            "AND NOT m.state IN ['DELETED', 'REJECTED'] "
            "RETURN m.id, m.content, m.embedding_status LIMIT $limit",
            {"statuses": list(NOT_DONE), "scope": scope, "limit": int(limit)},
        )
        return [(r[0], r[1], r[2] in VECTOR_CURRENT) for r in rows]

    async def unembedded_among(self, ids: Sequence[str], scope: str) -> list[tuple[str, str, bool]]:
        """(id, content, content embedded) of the memories among ``ids`` in ``scope`` whose
        embedding is not DONE — not embedded yet, their vector point still holding the
        content before an edit, or (flag True) its payload lagging an edit — in no particular
        order: the lexical arm's full-text and sparse hits when the
        backlog is large (automem/recall/servicer.py ``_lexical``). One index scan over the
        ids and the scope, as :meth:`recall_candidates`."""
        if not ids:
            return []
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.id IN $ids AND m.scope = $scope "
            "AND m.embedding_status <> 'EMBEDDING_STATUS_DONE' AND NOT m.state IN ['DELETED', 'REJECTED'] "
            "RETURN m.id, m.content, m.embedding_status", {"ids": list(dict.fromkeys(ids)), "scope": scope})
        return [(r[0], r[1], r[2] in VECTOR_CURRENT) for r in rows]

    async def list_ids(self, flt: MemoryFilter, states: Sequence[str], limit: int, *, order: str = "event_time",
                       descending: bool = True, since: float | None = None) -> list[str]:
        """Ids of up to ``limit`` memories matching ``flt`` in ``states``, ordered by
        ``order`` (``event_time`` or ``update_time``; then importance, highest first; then id),
        newest first when ``descending``; only ``event_time >= since`` when ``since`` is
        given (epoch seconds: a newest-first window, automem/recall/servicer.py)."""
        if order not in ("event_time", "update_time"):
            raise ValueError(f"list order must be event_time or update_time, got {order!r}")
        where, params = filter_where(flt, "m")
        params.update({"states": list(states), "limit": int(limit)})
        match = f"MATCH (m:Memory) WHERE {where} AND m.state IN $states"
        # The id makes the order total, so a longer listing extends a shorter one (recall pages).
        tail = (f" RETURN m.id ORDER BY m.{order} {'DESC' if descending else 'ASC'}, m.importance DESC, m.id "
                "LIMIT $limit")
        if since is not None:
            params["w_lo"] = since
            match += " AND m.event_time >= $w_lo"
        rows = await self.store.ro_query(match + tail, params)
        return [r[0] for r in rows]

    async def most_important(self, flt: MemoryFilter, states: Sequence[str], limit: int = 200) -> list[Memory]:
        """Up to ``limit`` memories matching ``flt`` in ``states``, most important first,
        then newest (AutoMem's startup recall)."""
        where, params = filter_where(flt, "m")
        params["states"] = list(states)
        rows = await self.store.ro_query(
            f"MATCH (m:Memory) WHERE {where} AND m.state IN $states RETURN properties(m) "
            f"ORDER BY m.importance DESC, m.event_time DESC LIMIT {int(limit)}", params)
        return [node_to_memory(r[0]) for r in rows]

    @staticmethod
    def _state_as_read(now: float) -> tuple[str, dict[str, float]]:
        """A Cypher expression of ``m``'s state as reads show it now, and its parameters: a
        SUPERSEDED memory whose window has not ended (its replacement's begins later) is the
        fact in force and reads ACTIVE (automem/common/state.py ``as_current``); counting its
        stored state said SUPERSEDED of a fact every read shows as ACTIVE."""
        expression = ("CASE WHEN m.state = 'SUPERSEDED' AND m.valid_to > $now AND m.valid_to < $open_end "
                      "THEN 'ACTIVE' ELSE m.state END")
        return expression, {"now": now, "open_end": OPEN_END}

    def tag_index(self, flt: MemoryFilter) -> TagIndex:
        """The by-tag listing's index reads for ``flt`` (automem/recall/bytag.py)."""
        return TagIndex(self, flt)

    async def analyze(self, scope: str, top: int) -> ScopeAnalysis:
        """Counts of ``scope`` for AutoMem's GET /analyze (:class:`ScopeAnalysis`);
        ``top`` rows at most per frequency list."""
        state, read_params = self._state_as_read(time.time())
        params = {"scope": scope, "top": top, **read_params}
        states = await self.store.ro_query(
            f"MATCH (m:Memory) WHERE m.scope = $scope RETURN {state} AS s, count(m)", params)
        # The aggregates count the memories the state counts call ACTIVE (a fact superseded
        # from a date still to come is one): memory_count was 45 beside state_counts' ACTIVE 47
        # (break-it review).
        active = (f"MATCH (m:Memory) WHERE m.scope = $scope AND {state} = 'ACTIVE' "
                  "AND m.type <> 'MetaPattern' ")
        types = await self.store.ro_query(active + "RETURN m.type, count(m)", params)
        averages = await self.store.ro_query(active + "RETURN count(m), avg(m.confidence), avg(m.importance)",
                                             params)
        entities = await self.store.ro_query(
            active + "UNWIND coalesce(m.entity_tags, []) AS t RETURN t, count(*) AS n ORDER BY n DESC, t LIMIT $top",
            params)
        tags = await self.store.ro_query(
            active + "UNWIND m.tags_lower AS t RETURN t, count(*) AS n ORDER BY n DESC, t LIMIT $top", params)
        type_confidence = await self.store.ro_query(active + "RETURN m.type, avg(m.confidence)", params)
        # A pattern's observations are its members that read ACTIVE now: a member deleted,
        # rejected, archived or superseded since the cluster run was counted still.
        patterns = await self.store.ro_query(
            "MATCH (p:Memory) WHERE p.scope = $scope AND p.state = 'ACTIVE' AND p.type = 'MetaPattern' "
            f"OPTIONAL MATCH (m:Memory)-[:PART_OF]->(p) WHERE {state} = 'ACTIVE' "
            "RETURN p.id, p.content, p.confidence, count(m) AS n ORDER BY p.confidence DESC, n DESC, p.id LIMIT 10",
            params)
        preferences = await self.store.ro_query(
            "MATCH (a:Memory)-[r:PREFERS_OVER]->(b:Memory) WHERE a.scope = $scope AND a.state = 'ACTIVE' "
            "AND b.state = 'ACTIVE' RETURN a.content, b.content, r.reason, r.strength "
            "ORDER BY r.strength DESC, a.id, b.id LIMIT 10", params)
        hours = await self.store.ro_query(
            active + "WITH toInteger(floor(m.event_time / 3600.0)) % 24 AS h, m "
            "RETURN h, count(m), avg(m.importance) ORDER BY h", params)
        confidence = await self.store.ro_query(
            active + "RETURN sum(CASE WHEN m.confidence < 0.4 THEN 1 ELSE 0 END), "
            "sum(CASE WHEN m.confidence >= 0.4 AND m.confidence < 0.7 THEN 1 ELSE 0 END), "
            "sum(CASE WHEN m.confidence >= 0.7 THEN 1 ELSE 0 END)", params)
        return ScopeAnalysis(states, types, averages, entities, tags, type_confidence, patterns, preferences,
                             hours, confidence)

    async def reembed_ids(self, scope: str, model: str, force: bool, limit: int) -> list[str]:
        """Ids of the memories of ``scope`` a re-embedding job queues, newest first (AutoMem's
        automem/api/admin.py ``/admin/reembed`` orders by timestamp, newest first): with
        ``force`` every memory that is not DELETED or REJECTED; otherwise only those whose
        vector is missing (``embedding_status`` not in :data:`VECTOR_CURRENT`) or made by another model than
        ``model``. Memories embedded by their caller (``embedding_model`` "caller") are never
        selected: the service cannot remake that vector. ``limit`` 0 = all."""
        where = ("m.scope = $scope AND NOT m.state IN ['DELETED', 'REJECTED'] "
                 "AND coalesce(m.embedding_model, '') <> 'caller'")
        if not force:
            where += (" AND (NOT m.embedding_status IN $current OR m.embedding_model IS NULL "
                      "OR m.embedding_model <> $model)")
        query = f"MATCH (m:Memory) WHERE {where} RETURN m.id ORDER BY m.event_time DESC, m.id"
        if limit > 0:
            query += f" LIMIT {int(limit)}"
        rows = await self.store.ro_query(query, {"scope": scope, "model": model, "current": list(VECTOR_CURRENT)})
        return [r[0] for r in rows]

    # --- graph views (automem/recall/graph_views.py) -------------------------------------------

    async def graph_nodes(self, scope: str, states: Sequence[str], *, min_importance: float,
                          types: Sequence[str] | None, since: float | None, limit: int) -> list[Memory]:
        """Up to ``limit`` memories of ``scope`` in ``states`` with importance >= ``min_importance``,
        of ``types`` (canonical type names; None = any, MetaPatterns only when named) and event
        time >= ``since`` (epoch seconds; None = any), most important first, then newest, then
        id: the nodes of a graph snapshot (AutoMem's automem/api/graph.py ``snapshot`` order)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.scope = $scope AND m.state IN $states AND m.importance >= $min "
            "AND ($types IS NULL OR m.type IN $types) AND ($types IS NOT NULL OR m.type <> 'MetaPattern') "
            "AND ($since IS NULL OR m.event_time >= $since) "
            "RETURN properties(m) AS p ORDER BY m.importance DESC, m.event_time DESC, m.id LIMIT $limit",
            {"scope": scope, "states": list(states), "min": float(min_importance),
             "types": list(types) if types else None, "since": since, "limit": int(limit)})
        return [node_to_memory(r[0]) for r in rows]

    async def graph_counts(self, scope: str, states: Sequence[str], since: float) -> GraphCounts:
        """Counts of ``scope``'s memories in ``states`` for AutoMem's GET /graph/stats
        (:class:`GraphCounts`); ``since`` (epoch seconds) starts the activity window."""
        params = {"scope": scope, "states": list(states), "since": since}
        base = "MATCH (m:Memory) WHERE m.scope = $scope AND m.state IN $states "
        state, read_params = self._state_as_read(time.time())
        [types, states_rows, importance, days] = await self.store.ro_query_many([
            (base + "RETURN m.type, count(m)", params),
            (base + f"RETURN {state} AS s, count(m)", {**params, **read_params}),
            (base + "RETURN sum(CASE WHEN m.importance >= 0.8 THEN 1 ELSE 0 END), "
                    "sum(CASE WHEN m.importance >= 0.5 AND m.importance < 0.8 THEN 1 ELSE 0 END), "
                    "sum(CASE WHEN m.importance < 0.5 THEN 1 ELSE 0 END)", params),
            (base + "AND m.create_time >= $since "
                    "RETURN toInteger(floor(m.create_time / 86400.0)) AS d, count(m) ORDER BY d DESC", params),
        ])
        return GraphCounts(types=[(r[0] or "", int(r[1])) for r in types],
                           states=[(r[0] or "", int(r[1])) for r in states_rows],
                           importance=tuple(int(v or 0) for v in importance[0]) if importance else (0, 0, 0),
                           days=[(int(r[0]), int(r[1])) for r in days])

    # --- writes ---------------------------------------------------------------------------

    async def replace(self, memory: Memory, expected_version: int | None, *,
                      include_enrichment: bool = False, payload_behind: bool = False) -> bool:
        """Write ``memory``'s properties onto its node when the stored version equals
        ``expected_version`` (no check when None). Enrichment-owned properties
        (:data:`ENRICHMENT_FIELDS`) are left alone unless ``include_enrichment`` (a content
        change resets them); with ``payload_behind`` (an edit of a field the vector search
        filters on, automem/ingest/logic.py ``mark_payload_behind``) the status becomes
        PAYLOAD_PENDING when the node's point holds its content (:data:`PAYLOAD_BEHIND`).
        Returns False on a version mismatch or a missing node; one atomic query, which
        records the new version (automem/graph/versions.py)."""
        props = memory_to_node(memory)
        if not include_enrichment:
            for name in ENRICHMENT_FIELDS:
                props.pop(name, None)
        rows = await self.store.query(
            "MATCH (m:Memory {id: $id}) WHERE m.scope = $scope "
            "AND ($expected IS NULL OR m.version = $expected) "
            + versions.before("m") + "SET m += $props " + (PAYLOAD_BEHIND if payload_behind else "")
            + versions.record("m") + "RETURN m.id",
            versions.params({"id": memory.id, "scope": memory.scope, "expected": expected_version, "props": props}),
        )
        return bool(rows)

    async def supersede(self, old: Memory, old_props: dict[str, Any], new: Memory, relation: Relation,
                        _fail_after_create: bool = False, claim: str | None = None, fingerprint: str = "") -> bool:
        """The atomic graph write of a supersede, in ONE query (FalkorDB applies all of it or
        none): while ``old`` still has its version, create ``new``, write ``old_props`` onto
        ``old`` and create the edge ``relation`` (old -> new). With ``claim`` (an
        ``:IdempotencyKey`` node key, automem/graph/idempotency.py ``node_key``) the same query
        first claims that key for ``new``, with the request's ``fingerprint`` ("" = none), and
        writes nothing when it is claimed already, so two concurrent supersedes with one key
        cannot both create. False (nothing written)
        when the version check or the claim fails. ``_fail_after_create`` (tests only) makes
        the query fail after the writes, to show the rollback."""
        label = relation_label(relation_type_name(relation.type))
        # A runtime error (division by zero) after the writes: FalkorDB undoes the whole query.
        # (A WHERE that only filters rows out would leave the writes applied.)
        failure = "WITH old, new, r WHERE 1 / (size(new.id) - size(new.id)) = 0 " if _fail_after_create else ""
        claiming = ("MERGE (k:IdempotencyKey {key: $claim}) "
                    "ON CREATE SET k.memory_ids = [$new_props.id], k.create_time = $created, k.request = $fingerprint "
                    "WITH old, k WHERE k.memory_ids = [$new_props.id] ") if claim else ""
        rows = await self.store.query(
            "MATCH (old:Memory {id: $old_id}) WHERE old.scope = $scope AND old.version = $version "
            f"{claiming}"
            # CREATE with the id inline, then +=: on a failure FalkorDB then undoes the create
            # too (CREATE (n) SET n = $map left an empty node behind when the query failed).
            "CREATE (new:Memory {id: $new_props.id}) SET new += $new_props "
            + versions.before("old", ["new"]) + "SET old += $old_props " + versions.record("old", ["new"])
            + versions.record("new", ["old"], created=True) +
            f"CREATE (old)-[r:{label}]->(new) "
            "SET r.strength = $strength, r.create_time = $created, r.reason = $reason, r.scope = $scope "
            f"{failure}RETURN new.id",
            versions.params({"old_id": old.id, "scope": old.scope, "version": old.version,
                      "new_props": memory_to_node(new), "old_props": old_props,
                      "strength": relation.strength, "created": epoch(relation, "create_time"),
                      "reason": relation.reason, "claim": claim, "fingerprint": fingerprint or None}),
        )
        return bool(rows)

    async def touch(self, memory_id: str, scope: str, when: float) -> None:
        """Set ``last_access_time`` (epoch seconds ``when``, as the node builder stores it) of
        the memory in ``scope``; nothing when it is absent."""
        props = node_fields(Memory(last_access_time=ts(when)), ("last_access_time",))
        await self.store.query("MATCH (m:Memory {id: $id}) WHERE m.scope = $scope SET m += $props",
                               {"id": memory_id, "scope": scope, "props": props})

    async def set_relevance(self, scores: Sequence[tuple[str, float]]) -> None:
        """Set ``relevance_score`` of each ``(memory id, score in 0..1)`` in one query (decay,
        automem/consolidate/tasks.py; the ids were read in their scope just before), except on
        a memory deleted or rejected since it was read: decay wrote scores onto memories
        deleted while it ran (break-it review)."""
        rows = [{"id": mid, "props": node_fields(Memory(relevance_score=score), ("relevance_score",))}
                for mid, score in scores]
        if rows:
            await self.store.query("UNWIND $rows AS row MATCH (m:Memory {id: row.id}) "
                                   "WHERE NOT m.state IN ['DELETED', 'REJECTED'] SET m += row.props",
                                   {"rows": rows})

    async def set_classified_type(self, memory: Memory, old_type: str, classified: Memory) -> bool:
        """The LLM's type and confidence (``classified.type`` / ``.confidence``, through the
        node builder) onto ``memory``'s node, only while it still holds ``memory``'s content
        hash and version and the rule-based type ``old_type``. False when it does not."""
        rows = await self.store.query(
            "MATCH (m:Memory {id: $id}) WHERE m.content_hash = $hash AND m.version = $version "
            "AND m.type = $old_type SET m += $props " + versions.amend("m", "$props") + "RETURN m.id",
            {"id": memory.id, "hash": memory.content_hash, "version": int(memory.version), "old_type": old_type,
             "props": node_fields(classified, ("type", "confidence"))})
        return bool(rows)

    async def set_enrichment(self, memory_id: str, content_hash: str, fields: dict[str, Any]) -> bool:
        """Enrichment's write: set enrichment-owned ``fields`` only while the node still holds
        the content that was enriched (``content_hash``), so it never overwrites an edit that
        landed meanwhile. Returns False when the content changed or the node is gone."""
        unknown = set(fields) - set(ENRICHMENT_FIELDS)
        if unknown:
            raise ValueError(f"not enrichment fields: {sorted(unknown)}")
        rows = await self.store.query(
            "MATCH (m:Memory {id: $id}) WHERE m.content_hash = $hash SET m += $fields "
            + versions.amend("m", "$fields") + "RETURN m.id",
            {"id": memory_id, "hash": content_hash, "fields": fields},
        )
        return bool(rows)

    async def set_enrichment_many(self, rows: Sequence[tuple[str, str, dict[str, Any]]], *,
                                  return_nodes: bool = False,
                                  built_from: dict[str, Memory] | None = None) -> dict[str, dict[str, Any] | None]:
        """:meth:`set_enrichment` for many memories in ONE query: ``rows`` are
        ``(memory_id, content_hash, fields)``; each row is written only while its node still
        holds ``content_hash`` and is not DELETED or REJECTED (a tombstone keeps its content,
        so the hash alone let enrichment that was late for a delete mark the deleted memory
        embedded, and the consumer publish MEMORY_ENRICHED for it). ``built_from`` gives the
        memory each row's vector payload was built from: a node whose tags, event time or
        state differ from it now (an edit landed meanwhile, which the payload does not hold)
        gets PAYLOAD_PENDING where the row says DONE, so it is not reported as current over
        an old payload; its own event settles it. Returns ``{memory_id:
        properties}`` for the rows that landed — the node's properties as they stand right
        after the write when ``return_nodes`` (so an edit that landed before shows), else
        None. Raises ValueError for a field that is not enrichment-owned
        (:data:`ENRICHMENT_FIELDS`)."""
        if not rows:
            return {}
        for _, _, fields in rows:
            unknown = set(fields) - set(ENRICHMENT_FIELDS)
            if unknown:
                raise ValueError(f"not enrichment fields: {sorted(unknown)}")
        found = await self.store.query(
            "UNWIND $rows AS row MATCH (m:Memory {id: row.id}) WHERE m.content_hash = row.hash "
            "AND NOT m.state IN ['DELETED', 'REJECTED'] "
            "SET m += row.fields SET m.embedding_status = CASE WHEN row.built IS NOT NULL "
            "AND m.embedding_status = 'EMBEDDING_STATUS_DONE' AND (coalesce(m.tags, []) <> row.built.tags "
            "OR m.state <> row.built.state OR abs(coalesce(m.event_time, -1.0) - row.built.event_time) > 0.0005) "
            "THEN 'EMBEDDING_STATUS_PAYLOAD_PENDING' ELSE m.embedding_status END "
            + versions.amend("m", "row.fields", ["row"])
            + "RETURN m.id, " + ("properties(m)" if return_nodes else "null"),
            {"rows": [{"id": mid, "hash": h, "fields": fields, "built": _filtered((built_from or {}).get(mid))}
                      for mid, h, fields in rows]},
        )
        return {r[0]: r[1] for r in found}

    async def pending_before(self, cutoff: float, limit: int, vectors: bool = True) -> list[Memory]:
        """Up to ``limit`` memories of every scope, oldest write first, whose embedding is
        still to be made (``embedding_status`` PENDING, UNSPECIFIED or PROVIDED; not FAILED,
        which enrichment parked), or whose payload is still to be rewritten (PAYLOAD_PENDING), and whose last write (``update_time``, epoch seconds) is
        before ``cutoff``; DELETED and REJECTED ones are left out (they get no vector).
        Read through the ``embedding_status`` index: the cost grows with the backlog only.
        With ``vectors`` False (vectors disabled: ``embedding_status`` stays PENDING for good),
        those whose ``enrichment_status`` is still PENDING instead (enrichment sets DONE or
        FAILED). The pending sweep's query (automem/enrich/pending.py)."""
        enrichment = "" if vectors else "AND m.enrichment_status = 'ENRICHMENT_STATUS_PENDING' "
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.embedding_status IN $statuses AND m.update_time < $cutoff "
            f"{enrichment}AND NOT m.state IN $gone RETURN properties(m) ORDER BY m.update_time LIMIT $limit",
            {"statuses": list(_TO_ENRICH), "cutoff": float(cutoff), "gone": ["DELETED", "REJECTED"],
             "limit": int(limit)})
        return [node_to_memory(r[0]) for r in rows]

    async def count_to_enrich(self, vectors: bool = True) -> int:
        """How many memories of every scope :meth:`pending_before` would find with no cutoff:
        their enrichment is still to be done, whether their event waits on the stream or is
        gone (the retention removed it before enrichment took it; the pending sweep and the
        sync check re-queue those). Counted through the ``embedding_status`` index: the cost
        grows with the backlog only. GetEnrichmentStatus's ``memories_pending``."""
        enrichment = "" if vectors else "AND m.enrichment_status = 'ENRICHMENT_STATUS_PENDING' "
        rows = await self.store.ro_query(
            f"MATCH (m:Memory) WHERE m.embedding_status IN $statuses {enrichment}AND NOT m.state IN $gone "
            "RETURN count(m)", {"statuses": list(_TO_ENRICH), "gone": ["DELETED", "REJECTED"]})
        return int(rows[0][0]) if rows else 0

    # --- consolidation and maintenance reads ----------------------------------------------

    async def decay_inputs(self, scope: str | None) -> list[tuple[str, float, float | None, float | None]]:
        """``(id, importance, event_time, last_access_time)`` of the ACTIVE and ARCHIVED
        memories of ``scope`` (every scope when None)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE ($scope IS NULL OR m.scope = $scope) AND m.state IN ['ACTIVE', 'ARCHIVED'] "
            "RETURN m.id, m.importance, m.event_time, m.last_access_time", {"scope": scope})
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    async def embedded(self, scope: str | None, limit: int, *, sample: bool = False) -> list[tuple[str, str]]:
        """``(id, scope)`` of up to ``limit`` embedded current memories — ACTIVE and valid now
        (an ACTIVE memory whose valid window closed is an expired fact, not one to summarise or
        link; one valid from a later time is not true yet); no MetaPatterns;
        ``embedding_status`` in :data:`VECTOR_CURRENT` — of ``scope`` (every scope when None):
        a random sample when ``sample``, else the most important first, then newest."""
        order = "rand()" if sample else "m.importance DESC, m.event_time DESC"
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE ($scope IS NULL OR m.scope = $scope) AND m.state = 'ACTIVE' "
            "AND m.type <> 'MetaPattern' AND m.embedding_status IN $current "
            "AND m.valid_from <= $now AND m.valid_to > $now "
            f"RETURN m.id, m.scope ORDER BY {order} LIMIT $limit",
            {"scope": scope, "limit": limit, "current": list(VECTOR_CURRENT), "now": time.time()})
        return [(r[0], r[1]) for r in rows]

    async def active_scopes(self) -> list[str]:
        """Every scope holding an ACTIVE memory."""
        rows = await self.store.ro_query("MATCH (m:Memory) WHERE m.state = 'ACTIVE' RETURN DISTINCT m.scope")
        return [r[0] for r in rows]

    async def create_meta_pattern(self, meta: Memory, cluster_key: str, entry: str, batch: Batch) -> bool:
        """Create the MetaPattern ``meta`` (with its first version) unless an ACTIVE one of
        its scope carries ``cluster_key`` already, in ONE query: two cluster runs at once
        each checked, found none and created one (break-it review). False when it existed.
        ``entry`` (the outbox entry of its MEMORY_CREATED event) is kept in ``batch`` by the
        same query when it created the pattern (automem/graph/outbox.py)."""
        rows = outbox.split(await self.store.query(
            "OPTIONAL MATCH (p:Memory) WHERE p.scope = $scope AND p.type = 'MetaPattern' AND p.state = 'ACTIVE' "
            "AND p.metadata CONTAINS $key WITH count(p) AS n, $row AS row WHERE n = 0 "
            "CREATE (m:Memory) SET m = row " + versions.record_row("row")
            + outbox.tail("m.id", "$entry", "m"),
            batch.params(versions.params({"scope": meta.scope, "key": cluster_key, "row": memory_to_node(meta),
                                          "entry": entry}))), batch)
        return bool(rows)

    async def replace_many(self, items: Sequence[tuple[Memory, int, str]], batch: Batch) -> set[str]:
        """:meth:`replace` (enrichment fields left alone) of many memories in ONE query:
        ``items`` of ``(memory, expected version, outbox entry of its event)``; each is
        written while its node (of its scope) still has the expected version, with its
        version recorded, and the entries of the written ones are kept in ``batch`` by the
        same query (automem/graph/outbox.py). Returns the ids written."""
        rows = []
        for memory, expected, entry in items:
            props = memory_to_node(memory)
            for name in ENRICHMENT_FIELDS:
                props.pop(name, None)
            rows.append({"id": memory.id, "scope": memory.scope, "expected": expected, "props": props, "ev": entry})
        if not rows:
            return set()
        written = outbox.split(await self.store.query(
            "UNWIND $rows AS row MATCH (m:Memory {id: row.id}) WHERE m.scope = row.scope "
            "AND m.version = row.expected "
            + versions.before("m", ["row"]) + "SET m += row.props " + versions.record("m", ["row"])
            + outbox.tail("m.id", "row.ev", "m, row"),
            batch.params(versions.params({"rows": rows}))), batch)
        return {r[0] for r in written}

    async def meta_pattern_exists(self, scope: str, cluster_key: str) -> bool:
        """True when an ACTIVE MetaPattern of ``scope`` carries ``cluster_key`` in its
        metadata (the cluster is summarised already)."""
        rows = await self.store.ro_query(
            "MATCH (p:Memory) WHERE p.scope = $scope AND p.type = 'MetaPattern' AND p.state = 'ACTIVE' "
            "AND p.metadata CONTAINS $key RETURN p.id LIMIT 1", {"scope": scope, "key": cluster_key})
        return bool(rows)

    async def meta_patterns(self, scope: str) -> dict[str, tuple[int, set[str]]]:
        """Every ACTIVE MetaPattern of ``scope`` by id: ``(version, ids of its PART_OF members
        that are ACTIVE)`` (a pattern whose members are all gone maps to an empty set). One
        row per edge, filtered here: a ``WHERE`` on the far node of an expansion can turn
        FalkorDB's lookup into a scan (docs/benchmarks.md, "Where a recall's time went")."""
        rows = await self.store.ro_query(
            "MATCH (p:Memory) WHERE p.scope = $scope AND p.type = 'MetaPattern' AND p.state = 'ACTIVE' "
            "OPTIONAL MATCH (m:Memory)-[:PART_OF]->(p) RETURN p.id, p.version, m.id, m.state", {"scope": scope})
        patterns: dict[str, tuple[int, set[str]]] = {}
        for pid, version, mid, state in rows:
            members = patterns.setdefault(pid, (int(version or 0), set()))[1]
            if mid is not None and state == "ACTIVE":
                members.add(mid)
        return patterns

    async def forget_candidates(self, scope: str | None, protected_types: Sequence[str], protected_importance: float,
                                reason_prefix: str, delete_below: float | None, archive_below: float | None,
                                archived_before: float) -> tuple[list[Memory], list[Memory]]:
        """``(to delete, to archive)`` for forget, over memories of ``scope`` (every scope
        when None) not of ``protected_types`` and under ``protected_importance``: ARCHIVED
        ones whose ``state_reason`` starts with ``reason_prefix``, archived (``update_time``,
        the time of forget's archiving write) before ``archived_before`` (epoch seconds) and
        with stored relevance under ``delete_below``; ACTIVE ones with stored relevance under
        ``archive_below`` (a bound of None: every such memory, whatever its stored relevance).
        The stored relevance is decay's, as of its last run: the caller judges the candidates
        again by their relevance now (automem/consolidate/tasks.py ``Tasks.forget``)."""
        params = {"scope": scope, "types": list(protected_types), "imp": protected_importance}
        base = ("MATCH (m:Memory) WHERE ($scope IS NULL OR m.scope = $scope) AND NOT m.type IN $types "
                "AND m.importance < $imp ")
        to_delete = await self.store.ro_query(
            base + "AND m.state = 'ARCHIVED' AND m.state_reason STARTS WITH $why AND m.update_time < $before "
            "AND ($t IS NULL OR m.relevance_score < $t) RETURN properties(m)",
            {**params, "why": reason_prefix, "t": delete_below, "before": archived_before})
        to_archive = await self.store.ro_query(
            base + "AND m.state = 'ACTIVE' AND ($t IS NULL OR m.relevance_score < $t) RETURN properties(m)",
            {**params, "t": archive_below})
        return [node_to_memory(r[0]) for r in to_delete], [node_to_memory(r[0]) for r in to_archive]

    async def live(self) -> dict[str, Memory]:
        """Every ACTIVE, SUPERSEDED, PENDING_REVIEW or ARCHIVED memory of every scope, by id
        (the sync check)."""
        rows = await self.store.ro_query(f"MATCH (m:Memory) WHERE m.state IN {_LIVE_STATES} RETURN properties(m)")
        return {r[0]["id"]: node_to_memory(r[0]) for r in rows}

    async def pending_enrichment_before(self, since: float) -> list[Memory]:
        """Live memories (as :meth:`live`) whose enrichment is PENDING and that were last
        written (update, else create time) before ``since`` (epoch seconds)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.enrichment_status = 'ENRICHMENT_STATUS_PENDING' "
            f"AND m.state IN {_LIVE_STATES} "
            "AND coalesce(m.update_time, m.create_time) < $since RETURN properties(m)",
            {"since": since})
        return [node_to_memory(r[0]) for r in rows]

    async def reindex_page(self, skip: int, limit: int) -> list[tuple[Memory, str]]:
        """One page (``skip``/``limit``, in id order) of memories not DELETED or REJECTED,
        each with its PRECEDED_BY predecessor's content ("" when none): the vector reindex
        (automem/common/backup.py)."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE NOT m.state IN ['DELETED', 'REJECTED'] "
            "OPTIONAL MATCH (m)-[:PRECEDED_BY]->(p:Memory) "
            "RETURN properties(m), p.content ORDER BY m.id SKIP $skip LIMIT $limit",
            {"skip": skip, "limit": limit})
        return [(node_to_memory(r[0]), r[1] or "") for r in rows]

    # --- comparison-key migration (automem/enrich/textkeys.py) -------------------------

    async def migration_version(self, name: str) -> int:
        """The version recorded for migration ``name`` (0 when none ran)."""
        rows = await self.store.ro_query("MATCH (s:SchemaMigration {name: $name}) RETURN s.version", {"name": name})
        return int(rows[0][0] or 0) if rows else 0

    async def set_migration_version(self, name: str, version: int) -> None:
        """Record that migration ``name`` reached ``version``."""
        await self.store.query("MERGE (s:SchemaMigration {name: $name}) SET s.version = $version",
                               {"name": name, "version": version})

    async def key_page(self, after: str, limit: int) -> list[tuple[dict[str, Any], str]]:
        """Up to ``limit`` memories (every state) with id greater than ``after``, in id order:
        ``[(node properties, PRECEDED_BY predecessor's content or "")]``."""
        rows = await self.store.ro_query(
            "MATCH (m:Memory) WHERE m.id > $after WITH m ORDER BY m.id LIMIT $limit "
            "OPTIONAL MATCH (m)-[:PRECEDED_BY]->(p:Memory) RETURN properties(m), p.content",
            {"after": after, "limit": limit})
        return [(r[0], r[1] or "") for r in rows]

    async def set_tag_keys(self, rows: Sequence[dict[str, Any]]) -> int:
        """Write ``tags_lower`` / ``entity_tags`` of ``rows`` (``{id, version, tags_lower,
        entity_tags}``) where the node still has that ``version`` (a write in between built
        its keys already). Returns how many nodes were written."""
        if not rows:
            return 0
        done = await self.store.query(
            "UNWIND $rows AS r MATCH (m:Memory {id: r.id}) WHERE m.version = r.version "
            "SET m.tags_lower = r.tags_lower, m.entity_tags = r.entity_tags "
            + versions.amend("m", "{tags_lower: r.tags_lower, entity_tags: r.entity_tags}", ["r"]) + "RETURN count(m)",
            {"rows": list(rows)})
        return int(done[0][0]) if done else 0


class TagIndex:
    """The index reads of the by-tag listing (automem/recall/bytag.py) for one scope and tag
    filter: memories under the tags through the ``tags_lower`` / ``entity_tags`` array
    indexes, the ``scope`` index and a window of the ``event_time`` index.

    Rows are ``[id, event_time, importance, state]`` plus ``tags_lower, entity_tags`` when
    :attr:`check` is true (the index cannot decide the tag filter alone: a prefix match, or
    ``all`` with an entity tag; the caller checks those rows itself).
    """

    def __init__(self, memories: Memories, flt: MemoryFilter) -> None:
        self.store = memories.store
        drive, self._params, self.check = indexed_tags(flt)
        self._where = "m.scope = $scope" + (f" AND {drive}" if drive else "")
        self._params["scope"] = flt.scope
        self._returns = "m.id, m.event_time, m.importance, m.state" + (
            ", m.tags_lower, m.entity_tags" if self.check else "")

    async def window(self, lo: float | None, hi: float | None, cap: int) -> list[list[Any]]:
        """At most ``cap`` rows with lo <= event_time < hi (None = unbounded), unordered
        (FalkorDB stops scanning at the LIMIT; an ORDER BY would sort the whole window)."""
        where, params = self._where, dict(self._params, cap=cap)
        if lo is not None:
            where += " AND m.event_time >= $lo"
            params["lo"] = lo
        if hi is not None:
            where += " AND m.event_time < $hi"
            params["hi"] = hi
        return await self.store.ro_query(f"MATCH (m:Memory) WHERE {where} RETURN {self._returns} LIMIT $cap", params)

    async def newest(self, lo: float, hi: float) -> float:
        """The newest event_time in [lo, hi) (an ORDER BY over the window)."""
        params = dict(self._params, hi=hi, lo=lo)
        rows = await self.store.ro_query(
            f"MATCH (m:Memory) WHERE {self._where} AND m.event_time >= $lo AND m.event_time < $hi "
            "RETURN m.event_time ORDER BY m.event_time DESC LIMIT 1", params)
        return float(rows[0][0])

    async def at(self, t: float, cap: int) -> list[list[Any]]:
        """At most ``cap`` rows at exactly event_time ``t``, unordered."""
        params = dict(self._params, t=t, cap=cap)
        return await self.store.ro_query(
            f"MATCH (m:Memory) WHERE {self._where} AND m.event_time = $t RETURN {self._returns} LIMIT $cap", params)

    async def at_after(self, t: float, importance: float, last_id: str, cap: int) -> list[list[Any]]:
        """At most ``cap`` rows at exactly event_time ``t`` after (``importance``,
        ``last_id``) in listing order (importance descending, then id), in that order."""
        params = dict(self._params, t=t, cap=cap, imp=importance, last=last_id)
        return await self.store.ro_query(
            f"MATCH (m:Memory) WHERE {self._where} AND m.event_time = $t "
            "AND (m.importance < $imp OR (m.importance = $imp AND m.id > $last)) "
            f"RETURN {self._returns} ORDER BY m.importance DESC, m.id LIMIT $cap", params)


def _filtered(memory: Memory | None) -> dict[str, Any] | None:
    """The node values of ``memory``'s fields the vector search filters on (tags, state,
    event time; automem/common/payload.py ``FILTERED_KEYS``), for
    :meth:`Memories.set_enrichment_many`'s ``built_from``; None for None. The event time
    (epoch seconds) is compared within half a millisecond (times are kept to the
    millisecond): a float read back through a Timestamp may differ in its last digits."""
    if memory is None:
        return None
    props = memory_to_node(memory)
    event_time = props.get("event_time")
    return {"tags": props.get("tags") or [], "state": props.get("state"),
            "event_time": -1.0 if event_time is None else float(event_time)}
