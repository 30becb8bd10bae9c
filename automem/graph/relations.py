"""Edges between memories: every Cypher statement that writes or walks them.

The only interpolated identifiers are relation type names, checked against the relation
types of automem/common/model.py first (:func:`relation_label`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from automem.common.lifecycle import GONE_STATE_NAMES, SUPERSEDING_RELATIONS
from automem.common.model import AUTHORABLE_RELATIONS, SYSTEM_RELATIONS, Relation, relation_type_name, ts
from automem.graph import outbox, versions
from automem.graph.outbox import Batch
from automem.graph.repository import Repository
from automem.v1.memory_pb2 import RELATION_TYPE_DISCOVERED, RELATION_TYPE_PART_OF

ALL_RELATIONS = AUTHORABLE_RELATIONS + SYSTEM_RELATIONS
#: Widths (seconds) of the event-time windows :meth:`Relations.link_predecessors` searches
#: back from a memory, narrowest first: 1 ms growing 16-fold to ~35 years, then unbounded
#: (None). A window holds at most ~16 times the memories between a memory and its
#: predecessor (for evenly spread times), so a lookup costs the same at 1k or 1M memories;
#: 1 ms is the time precision of stored times (automem/ingest/servicer.py stamps a batch's
#: items 1 ms apart), so a bulk import finds its predecessor in the first window or two.
PREDECESSOR_WINDOWS: tuple[float | None, ...] = (*(0.001 * 16.0 ** k for k in range(11)), None)


def relation_label(name: str) -> str:
    """``name`` when it is a known relation type (or MENTIONS); ValueError otherwise."""
    if name not in ALL_RELATIONS and name not in ("MENTIONS",):
        raise ValueError(f"unknown relation type {name!r}")
    return name


def relation_labels(names: Sequence[str]) -> str:
    """The checked relation types ``names`` as a Cypher type alternation (``A|B``)."""
    return "|".join(relation_label(t) for t in names)


#: ``reason`` of the PART_OF edge of a cluster member (:meth:`Relations.link_members`).
MEMBER_REASON = "cluster member"


def _created_here(kind: int, source: str, target: str, strength: float, scope: str, reason: str,
                  now: float) -> Relation:
    """The :class:`Relation` of an edge a consolidation write created at ``now``. The write
    tells its own new edges by ``create_time = now`` (set ON CREATE only): FalkorDB runs
    write queries one at a time, so of two runs at once only the one that created an edge
    finds its own time on it, and only that one reports it."""
    return Relation(source_id=source, target_id=target, type=kind, strength=float(strength), scope=scope,
                    reason=reason, create_time=ts(now))


def _created(relation: Relation) -> float:
    return relation.create_time.seconds + relation.create_time.nanos / 1e9


#: Cypher over an edge ``r``: it was known at ``$known_at`` (epoch seconds; null: now), i.e.
#: created by then. An edge without ``create_time`` counts as always known. Edges deleted
#: since are gone from the graph, so a past read does not show them (docs/architecture.md,
#: "Versions and known_at").
KNOWN_THEN = "($known_at IS NULL OR r.create_time IS NULL OR r.create_time <= $known_at)"


class Relations(Repository):
    """Statements over memory-to-memory edges."""

    # --- authored edges ------------------------------------------------------------------

    async def create(self, relation: Relation) -> bool:
        """MERGE a typed edge between two memories of ``relation.scope``; sets strength,
        create_time (first write only), reason and properties. False (nothing written) when
        either end is missing in the scope or gone (DELETED or REJECTED,
        automem/common/lifecycle.py ``GONE_STATES``)."""
        label = relation_label(relation_type_name(relation.type))
        rows = await self.store.query(
            "MATCH (a:Memory {id: $a}), (b:Memory {id: $b}) "
            "WHERE a.scope = $scope AND b.scope = $scope AND NOT a.state IN $gone AND NOT b.state IN $gone "
            f"MERGE (a)-[r:{label}]->(b) "
            "ON CREATE SET r.create_time = $created "
            "SET r.strength = $strength, r.reason = $reason, r.scope = $scope RETURN r.create_time",
            {"a": relation.source_id, "b": relation.target_id, "scope": relation.scope, "gone": list(GONE_STATE_NAMES),
             "created": _created(relation), "strength": float(relation.strength), "reason": relation.reason},
        )
        return bool(rows)

    async def create_superseding(self, relation: Relation, source_props: dict[str, Any],
                                 expected_version: int | None) -> bool:
        """Write an INVALIDATED_BY / EVOLVED_INTO edge and the source's new state in ONE query,
        only while the target is ACTIVE, the source is not gone (DELETED or REJECTED) and still
        has ``expected_version`` (no check when None). Two concurrent opposite supersessions can't both land, so no cycle forms.
        Returns False when the check fails or an end is missing."""
        label = relation_label(relation_type_name(relation.type))
        rows = await self.store.query(
            "MATCH (a:Memory {id: $a}), (b:Memory {id: $b}) "
            "WHERE a.scope = $scope AND b.scope = $scope AND b.state = 'ACTIVE' AND NOT a.state IN $gone "
            "AND ($expected IS NULL OR a.version = $expected) "
            f"MERGE (a)-[r:{label}]->(b) "
            "ON CREATE SET r.create_time = $created "
            "SET r.strength = $strength, r.reason = $reason, r.scope = $scope "
            + (versions.before("a", ["r"]) + "SET a += $props " + versions.record("a", ["r"]) if source_props else "")
            + "RETURN r.create_time",
            versions.params() | {"a": relation.source_id, "b": relation.target_id, "scope": relation.scope, "created": _created(relation),
             "strength": float(relation.strength), "reason": relation.reason, "expected": expected_version,
             "props": source_props, "gone": list(GONE_STATE_NAMES)},
        )
        return bool(rows)

    # --- walks ---------------------------------------------------------------------------

    async def outgoing(
        self, ids: Sequence[str], types: Sequence[str], scope: str
    ) -> list[tuple[str, str, str, float, float]]:
        """Edges of the given types leaving ``ids``: (source, type, target, strength,
        create_time)."""
        if not ids:
            return []
        rows = await self.store.ro_query(
            f"UNWIND $ids AS mid MATCH (a:Memory {{id: mid}})-[r:{relation_labels(types)}]->(b:Memory) "
            "WHERE a.scope = $scope AND b.scope = $scope "
            "RETURN a.id, type(r), b.id, r.strength, r.create_time",
            {"ids": list(ids), "scope": scope},
        )
        return [(r[0], r[1], r[2], float(r[3] or 0.0), float(r[4] or 0.0)) for r in rows]

    async def replaced_by(self, memory_id: str, scope: str) -> list[str]:
        """Ids of the memories ``memory_id`` supersedes: the sources of its incoming
        INVALIDATED_BY / EVOLVED_INTO edges whose ``superseded_by`` names it (one row per
        edge from the indexed node, filtered here: a WHERE on the far node can scan)."""
        rows = await self.store.ro_query(
            f"MATCH (a:Memory)-[r:{relation_labels(SUPERSEDING_RELATIONS)}]->(b:Memory {{id: $id}}) "
            "WHERE b.scope = $scope RETURN a.id, a.superseded_by, a.scope",
            {"id": memory_id, "scope": scope})
        return sorted({r[0] for r in rows if r[1] == memory_id and r[2] == scope})

    async def neighbours(
        self, ids: Sequence[str], types: Sequence[str], scope: str, known_at: float | None = None
    ) -> list[tuple[str, str, str, float]]:
        """Edges of the given types touching ``ids`` in either direction:
        (seed id, type, other id, strength); with ``known_at`` (epoch seconds) only those
        known then (:data:`KNOWN_THEN`)."""
        if not ids:
            return []
        rows = await self.store.ro_query(
            f"UNWIND $ids AS mid MATCH (a:Memory {{id: mid}})-[r:{relation_labels(types)}]-(b:Memory) "
            f"WHERE a.scope = $scope AND b.scope = $scope AND {KNOWN_THEN} "
            "RETURN a.id, type(r), b.id, r.strength",
            {"ids": list(ids), "scope": scope, "known_at": known_at},
        )
        return [(r[0], r[1], r[2], float(r[3] or 0.0)) for r in rows]

    async def linked_pairs(self, pairs: Sequence[Sequence[str]]) -> set[tuple[str, str]]:
        """The pairs among ``pairs`` (``[id, id]``) joined by an edge of any type, in either
        direction, each as a sorted tuple."""
        rows = await self.store.ro_query(
            "UNWIND $pairs AS p MATCH (a:Memory {id: p[0]})-[r]-(b:Memory {id: p[1]}) RETURN DISTINCT a.id, b.id",
            {"pairs": [list(p) for p in pairs]})
        return {tuple(sorted((r[0], r[1]))) for r in rows}

    # --- graph views (automem/recall/graph_views.py) ---------------------------------------

    async def among(self, ids: Sequence[str], scope: str,
                    known_at: float | None = None) -> list[tuple[str, str, str, float]]:
        """Edges (any memory-to-memory type) whose two ends are both in ``ids``, as stored:
        (source, type, target, strength), ordered by source, type, target; with ``known_at``
        (epoch seconds) only those known then (:data:`KNOWN_THEN`)."""
        if not ids:
            return []
        # The far end is checked here, against a set: ``b.id IN $ids`` in the query scanned
        # the list for every edge, and a snapshot of 1,000 memories and their ~23,000 edges
        # ran past the store bound (break-it review).
        rows = await self.store.ro_query(
            "UNWIND $ids AS mid MATCH (a:Memory {id: mid})-[r]->(b:Memory) "
            f"WHERE a.scope = $scope AND b.scope = $scope AND {KNOWN_THEN} "
            "RETURN a.id, type(r), b.id, r.strength",
            {"ids": list(ids), "scope": scope, "known_at": known_at})
        wanted = set(ids)
        return sorted((r[0], r[1], r[2], float(r[3] or 0.0)) for r in rows if r[2] in wanted)

    async def touching(self, ids: Sequence[str], scope: str,
                       known_at: float | None = None) -> list[tuple[str, str, str, str, str, float]]:
        """Edges (any memory-to-memory type) touching ``ids`` in either direction:
        (seed id, other id, source, type, target, strength) with source/target as stored;
        with ``known_at`` (epoch seconds) only those known then (:data:`KNOWN_THEN`)."""
        if not ids:
            return []
        rows = await self.store.ro_query(
            "UNWIND $ids AS mid MATCH (a:Memory {id: mid})-[r]->(b:Memory) "
            f"WHERE a.scope = $scope AND b.scope = $scope AND {KNOWN_THEN} "
            "RETURN a.id AS seed, b.id AS other, a.id AS source, type(r) AS type, b.id AS target, r.strength AS s "
            "UNION ALL UNWIND $ids AS mid MATCH (a:Memory {id: mid})<-[r]-(b:Memory) "
            f"WHERE a.scope = $scope AND b.scope = $scope AND {KNOWN_THEN} "
            "RETURN a.id AS seed, b.id AS other, b.id AS source, type(r) AS type, a.id AS target, r.strength AS s",
            {"ids": list(ids), "scope": scope, "known_at": known_at})
        return [(r[0], r[1], r[2], r[3], r[4], float(r[5] or 0.0)) for r in rows]

    async def ends(self, scope: str, known_at: float | None = None) -> list[tuple[str, str]]:
        """(source id, target id) of every memory-to-memory edge of ``scope``; with
        ``known_at`` (epoch seconds) only those known then (:data:`KNOWN_THEN`): the past
        snapshot's totals count those among the memories believed then."""
        rows = await self.store.ro_query(
            "MATCH (a:Memory)-[r]->(b:Memory) WHERE a.scope = $scope AND b.scope = $scope "
            f"AND {KNOWN_THEN} RETURN a.id, b.id", {"scope": scope, "known_at": known_at})
        return [(r[0], r[1]) for r in rows]

    async def counts(self, scope: str, states: Sequence[str], *, patterns: bool = True) -> list[tuple[str, int]]:
        """Edges between memories of ``scope`` whose both ends are in ``states``, by type
        (``patterns`` False: not those touching a MetaPattern, as a graph snapshot's edges)."""
        rows = await self.store.ro_query(
            "MATCH (a:Memory)-[r]->(b:Memory) WHERE a.scope = $scope AND b.scope = $scope "
            "AND a.state IN $states AND b.state IN $states "
            "AND ($patterns OR (a.type <> 'MetaPattern' AND b.type <> 'MetaPattern')) RETURN type(r), count(r)",
            {"scope": scope, "states": list(states), "patterns": patterns})
        return [(r[0], int(r[1])) for r in rows]

    # --- system edges ----------------------------------------------------------------------

    async def create_discovered(self, rows: Sequence[dict[str, Any]], now: float,
                                announce: Callable[[Relation], str], batch: Batch) -> list[Relation]:
        """DISCOVERED edges (consolidation's creative associations) in one query: ``rows``
        of ``{"a", "b", "s" (strength), "scope", "reason"}``, each written only when both
        ends are in ``scope`` and not gone (DELETED or REJECTED, as :meth:`create`: a memory
        deleted while the run read its vectors got an edge); a new edge gets
        ``create_time = now``. Returns the edges this call created (:func:`_created_here`);
        an edge that existed (another run's) only gets its strength and reason set again.
        ``announce(edge)`` is the outbox entry of an edge's RELATION_CREATED event: the
        entries of the created edges are kept in ``batch`` by the same query
        (automem/graph/outbox.py), ``batch.entries`` receives them."""
        rels = [_created_here(RELATION_TYPE_DISCOVERED, r["a"], r["b"], r["s"], r["scope"], r["reason"], now)
                for r in rows]
        rows = outbox.split(await self.store.query(
            "UNWIND $rows AS row MATCH (a:Memory {id: row.a}), (b:Memory {id: row.b}) "
            "WHERE a.scope = row.scope AND b.scope = row.scope AND NOT a.state IN $gone AND NOT b.state IN $gone "
            "MERGE (a)-[r:DISCOVERED]->(b) ON CREATE SET r.create_time = $now "
            "SET r.strength = row.s, r.scope = row.scope, r.reason = row.reason "
            "WITH a, b, r, row WHERE r.create_time = $now "
            + outbox.tail("row.i", "row.ev", "row"),
            batch.params({"now": now, "gone": list(GONE_STATE_NAMES),
                          "rows": [{**r, "i": i, "ev": announce(rel)}
                                   for i, (r, rel) in enumerate(zip(rows, rels, strict=True))]})), batch)
        return [rels[int(i)] for (i,) in rows]

    async def link_members(self, pattern_id: str, member_ids: Sequence[str], scope: str, now: float,
                           announce: Callable[[Relation], str], batch: Batch) -> list[Relation]:
        """PART_OF edges from each member of the pattern's scope ``scope`` that is not gone
        (DELETED or REJECTED) to the MetaPattern ``pattern_id`` (new ones get
        ``create_time = now``, strength 1.0). Returns the edges this call created
        (:func:`_created_here`); their events' outbox entries (``announce(edge)``) are kept in
        ``batch`` by the same query (automem/graph/outbox.py), ``batch.entries`` receives them."""
        rels = [_created_here(RELATION_TYPE_PART_OF, mid, pattern_id, 1.0, scope, MEMBER_REASON, now)
                for mid in member_ids]
        rows = outbox.split(await self.store.query(
            "MATCH (p:Memory {id: $pid}) UNWIND $rows AS row MATCH (m:Memory {id: row.id}) "
            "WHERE m.scope = p.scope AND NOT m.state IN $gone "
            "MERGE (m)-[r:PART_OF]->(p) ON CREATE SET r.create_time = $now, r.strength = 1.0, r.scope = p.scope, "
            "r.reason = $why WITH m, p, r, row WHERE r.create_time = $now "
            + outbox.tail("row.i", "row.ev", "row"),
            batch.params({"pid": pattern_id, "now": now, "gone": list(GONE_STATE_NAMES), "why": MEMBER_REASON,
                          "rows": [{"id": rel.source_id, "i": i, "ev": announce(rel)} for i, rel in enumerate(rels)]})),
            batch)
        return [rels[int(i)] for (i,) in rows]

    async def replace_similar(self, items: Sequence[dict[str, Any]], now: float) -> set[str]:
        """Replace the SIMILAR_TO edges of many memories in ONE query: ``items`` of ``{"id",
        "hash", "scope", "rows": [{"id", "score"}]}``; each memory's old SIMILAR_TO edges go
        and one per row (to a memory of its scope) is written, only while the node holds
        ``hash``. Returns the ids written."""
        rows = await self.store.query(
            "UNWIND $items AS item MATCH (m:Memory {id: item.id}) WHERE m.content_hash = item.hash "
            "AND m.scope = item.scope "
            "OPTIONAL MATCH (m)-[old:SIMILAR_TO]->(:Memory) DELETE old "
            "WITH DISTINCT m, item "
            "UNWIND (CASE WHEN size(item.rows) = 0 THEN [null] ELSE item.rows END) AS row "
            "OPTIONAL MATCH (n:Memory {id: row.id}) WHERE n.scope = item.scope "
            "FOREACH (x IN CASE WHEN n IS NULL THEN [] ELSE [n] END | "
            "  MERGE (m)-[r:SIMILAR_TO]->(x) SET r.strength = row.score, r.create_time = $now, r.scope = item.scope) "
            "RETURN DISTINCT m.id",
            {"now": now, "items": list(items)})
        return {r[0] for r in rows}

    async def link_predecessors(self, ids: Sequence[str], created: float) -> dict[str, str]:
        """For each memory, find its predecessor — the latest earlier memory (by event_time,
        then create_time) of the same scope, ACTIVE or SUPERSEDED, that shares a tag with it
        (any memory when it has no tags) and is not a MetaPattern (consolidation's cluster
        summaries are no step of the agent's timeline: an untagged note got one as its
        predecessor, and its text in the note's lexical context; break-it review) — write
        ``(m)-[:PRECEDED_BY]->(prev)`` (MERGE; a new edge gets ``create_time = created``,
        strength 1.0 and the scope; an edge of ``m`` to another predecessor goes), and return
        ``{id: prev content}`` for the memories that have one.

        Indexed, never a scan of the scope: for each (memory, tag) it asks for the best
        candidate in event-time windows of growing width (:data:`PREDECESSOR_WINDOWS`) back
        from the memory's event time, each a range-index lookup on ``event_time`` and the
        array index on ``tags_lower``; the first window holding a candidate holds the latest
        one. The queries of a step go out as one pipeline (``GraphStore.ro_query_many``), the
        edges in one write. Cost: about 0.3 ms of FalkorDB time per (memory, tag, window
        tried); ``bench/enrich_throughput.py --predecessor-bench`` measures it at 10k and 100k.
        """
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = await self.store.ro_query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) "
            "RETURN m.id, m.scope, m.event_time, m.create_time, m.tags_lower, m.type",
            {"ids": ids})
        # (memory id, scope, event time, create time, [tags] or [None] = any tag)
        todo = [(r[0], r[1], float(r[2]), r[3], list(r[4] or []) or [None]) for r in rows
                if r[2] is not None and r[5] != "MetaPattern"]
        best: dict[str, tuple[str, float, float | None]] = {}
        for width in PREDECESSOR_WINDOWS:
            if not todo:
                break
            asks = [(mid, scope, t, ct, tag) for mid, scope, t, ct, tags in todo for tag in tags]
            found = await self.store.ro_query_many([_predecessor_query(mid, scope, t, ct, tag, width)
                                                    for mid, scope, t, ct, tag in asks])
            for (mid, *_), hit in zip(asks, found, strict=True):
                if hit and (mid not in best or _newer(hit[0][1:], best[mid][1:])):
                    best[mid] = (hit[0][0], float(hit[0][1]), hit[0][2])
            todo = [item for item in todo if item[0] not in best]
        if not best:
            return {}
        # One predecessor per memory: an edge to another (one deleted since, then the memory
        # re-enriched) goes (break-it review: 422 memories kept two).
        linked = await self.store.query(
            "UNWIND $pairs AS pair MATCH (m:Memory {id: pair.id}), (p:Memory {id: pair.prev}) "
            "OPTIONAL MATCH (m)-[old:PRECEDED_BY]->(x:Memory) WHERE x.id <> pair.prev DELETE old "
            "WITH DISTINCT m, p "
            "MERGE (m)-[r:PRECEDED_BY]->(p) ON CREATE SET r.create_time = $created, r.strength = 1.0, "
            "r.scope = m.scope RETURN m.id, p.content",
            {"pairs": [{"id": mid, "prev": prev[0]} for mid, prev in best.items()], "created": created})
        return {r[0]: r[1] for r in linked if r[1] is not None}


def _predecessor_query(mid: str, scope: str, t: float, ct: float | None, tag: str | None,
                       width: float | None) -> tuple[str, dict[str, Any]]:
    """The best predecessor candidate of memory ``mid`` (event time ``t``, create time ``ct``)
    sharing ``tag`` (None: any) with event time in ``[t - width, t]`` (``width`` None: no lower
    bound): ``[[id, event_time, create_time]]`` or no row."""
    where = ["n.event_time <= $t"]
    if width is not None:
        where.append("n.event_time >= $lo")
    if tag is not None:
        where.append("$tag IN n.tags_lower")
    cypher = (
        "MATCH (n:Memory) WHERE " + " AND ".join(where) + " AND n.scope = $scope AND n.id <> $id "
        "AND n.state IN ['ACTIVE', 'SUPERSEDED'] AND n.type <> 'MetaPattern' "
        "AND (n.event_time < $t OR n.create_time < $ct) "
        "RETURN n.id, n.event_time, n.create_time ORDER BY n.event_time DESC, n.create_time DESC LIMIT 1")
    return cypher, {"id": mid, "scope": scope, "t": t, "ct": ct, "tag": tag,
                    "lo": t - width if width is not None else None}


def _newer(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """True when candidate ``a`` = (event_time, create_time) sorts before ``b`` under
    ``ORDER BY event_time DESC, create_time DESC`` (Cypher sorts null create times first
    there)."""
    ka = (float(a[0]), a[1] is None, a[1] if a[1] is not None else 0.0)
    kb = (float(b[0]), b[1] is None, b[1] if b[1] is not None else 0.0)
    return ka > kb
