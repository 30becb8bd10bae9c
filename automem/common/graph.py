"""The graph store: FalkorDB, the record of truth.

Every value goes in as a Cypher parameter; the only interpolated identifiers are relation
type names, which are checked against the RelationType enum first. Every memory query binds
the scope. Node properties come from :func:`automem.common.model.memory_to_node`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from falkordb.asyncio import FalkorDB

from automem.common.errors import InvalidArgument, Unavailable
from automem.common.model import (
    AUTHORABLE_RELATIONS,
    SYSTEM_RELATIONS,
    Memory,
    Relation,
    memory_to_node,
    node_to_memory,
    relation_type_name,
    ts,
)
from automem.common.settings import Settings
from automem.common.telemetry import graph_span

log = logging.getLogger(__name__)

#: Queries per Redis pipeline in :meth:`GraphStore.ro_query_many`.
_PIPELINE_CHUNK = 256
#: Widths (seconds) of the event-time windows :meth:`GraphStore.link_predecessors` searches
#: back from a memory, narrowest first: 1 ms growing 16-fold to ~35 years, then unbounded
#: (None). A window holds at most ~16 times the memories between a memory and its
#: predecessor (for evenly spread times), so a lookup costs the same at 1k or 1M memories;
#: 1 ms is the time precision of stored times (automem/ingest/servicer.py stamps a batch's
#: items 1 ms apart), so a bulk import finds its predecessor in the first window or two.
PREDECESSOR_WINDOWS: tuple[float | None, ...] = (*(0.001 * 16.0 ** k for k in range(11)), None)

ALL_RELATIONS = AUTHORABLE_RELATIONS + SYSTEM_RELATIONS
#: Node properties only enrichment writes (ingest leaves them alone unless content changed).
ENRICHMENT_FIELDS = ("embedding_status", "enrichment_status", "entities", "entity_tags", "summary",
                     "embedding_model")


def _rel_label(name: str) -> str:
    if name not in ALL_RELATIONS and name not in ("MENTIONS",):
        raise ValueError(f"unknown relation type {name!r}")
    return name


class GraphStore:
    """Async access to the memory graph in FalkorDB.

    Args:
        settings: uses ``falkordb_host``, ``falkordb_port``, ``falkordb_password``, ``graph_name``.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._db = FalkorDB(
            host=settings.falkordb_host or "127.0.0.1",
            port=settings.falkordb_port or 6379,
            password=settings.falkordb_password or None,
        )
        self.graph = self._db.select_graph(settings.graph_name)
        self.name = settings.graph_name

    @property
    def redis(self) -> Any:
        """The underlying redis.asyncio connection (for the outbox list)."""
        return self._db.connection

    @staticmethod
    def _check_params(value: Any) -> None:
        """InvalidArgument for a string FalkorDB cannot take as a parameter: a NUL character
        (its parser stops there) or a lone surrogate (not UTF-8)."""
        if isinstance(value, str):
            if "\x00" in value:
                raise InvalidArgument("a text value contains a NUL character")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidArgument("a text value is not valid Unicode (lone surrogate)") from None
        elif isinstance(value, dict):
            for k, v in value.items():
                GraphStore._check_params(k)
                GraphStore._check_params(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                GraphStore._check_params(v)

    @graph_span("graph.query")
    async def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Run a Cypher query with parameters; returns the result rows.

        Raises Unavailable when FalkorDB cannot be reached.
        """
        self._check_params(params)
        try:
            result = await self.graph.query(cypher, params or {})
        except (ConnectionError, OSError) as exc:
            raise Unavailable(f"graph store unreachable: {exc}") from exc
        return result.result_set

    @graph_span("graph.ro_query")
    async def ro_query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Read-only query (GRAPH.RO_QUERY)."""
        self._check_params(params)
        try:
            result = await self.graph.ro_query(cypher, params or {})
        except (ConnectionError, OSError) as exc:
            raise Unavailable(f"graph store unreachable: {exc}") from exc
        return result.result_set

    @graph_span("graph.ro_query_many")
    async def ro_query_many(self, queries: Sequence[tuple[str, dict[str, Any]]]) -> list[list[list[Any]]]:
        """Several read-only queries in one round trip (a Redis pipeline of GRAPH.RO_QUERY);
        returns each query's rows, in order. Each query is planned with its own parameters,
        so FalkorDB can combine every indexed condition in one index scan (it does not when the
        values come from an ``UNWIND`` row). Raises Unavailable when FalkorDB cannot be
        reached and redis' ``ResponseError`` when a query fails."""
        from falkordb.asyncio.query_result import QueryResult

        out: list[list[list[Any]]] = []
        for start in range(0, len(queries), _PIPELINE_CHUNK):
            chunk = queries[start:start + _PIPELINE_CHUNK]
            pipe = self.redis.pipeline(transaction=False)
            for cypher, params in chunk:
                self._check_params(params)
                # The client's own parameter header (the form graph.ro_query sends).
                pipe.execute_command("GRAPH.RO_QUERY", self.name,
                                     self.graph._build_params_header(params) + cypher, "--compact")
            try:
                replies = await pipe.execute()
            except (ConnectionError, OSError) as exc:
                raise Unavailable(f"graph store unreachable: {exc}") from exc
            for reply in replies:
                result = QueryResult(self.graph)
                await result.parse(reply)
                out.append(result.result_set)
        return out

    async def ping(self) -> bool:
        """True when FalkorDB answers PING."""
        try:
            return bool(await self._db.connection.ping())
        except Exception:  # noqa: BLE001 - health probe
            return False

    async def ensure_schema(self) -> None:
        """Create the indexes (idempotent): range on Memory(id, scope, content_hash,
        event_time, embedding_status, tags_lower, entity_tags), full-text on Memory(content),
        range on Tombstone and IdempotencyKey. The two tag indexes are on array properties
        (FalkorDB indexes each element; ``$tag IN m.tags_lower`` uses it) and drive the by-tag
        listing (automem/recall/bytag.py)."""
        statements = [
            "CREATE INDEX FOR (m:Memory) ON (m.id)",
            "CREATE INDEX FOR (m:Memory) ON (m.scope)",
            "CREATE INDEX FOR (m:Memory) ON (m.content_hash)",
            "CREATE INDEX FOR (m:Memory) ON (m.event_time)",
            "CREATE INDEX FOR (m:Memory) ON (m.embedding_status)",
            "CREATE INDEX FOR (m:Memory) ON (m.tags_lower)",
            "CREATE INDEX FOR (m:Memory) ON (m.entity_tags)",
            "CREATE INDEX FOR (t:Tombstone) ON (t.content_hash)",
            "CREATE INDEX FOR (k:IdempotencyKey) ON (k.key)",
            "CREATE INDEX FOR (e:Entity) ON (e.key)",
            "CALL db.idx.fulltext.createNodeIndex('Memory', 'content')",
        ]
        for statement in statements:
            try:
                await self.graph.query(statement)
            except Exception as exc:
                if "already" not in str(exc).lower():
                    raise

    async def close(self) -> None:
        """Close the connection pool."""
        await self._db.aclose()

    # --- memories ----------------------------------------------------------------------

    async def create_memories(self, memories: Sequence[Memory]) -> None:
        """Create nodes for ``memories`` in one atomic query."""
        rows = [memory_to_node(m) for m in memories]
        await self.query("UNWIND $rows AS row CREATE (m:Memory) SET m = row", {"rows": rows})

    async def get_memory(self, memory_id: str, scope: str | None) -> Memory | None:
        """The memory with ``memory_id`` in ``scope`` (any scope when None), or None."""
        found = await self.get_memories([memory_id], scope)
        return found.get(memory_id)

    async def get_memories(self, ids: Iterable[str], scope: str | None) -> dict[str, Memory]:
        """Memories by id (missing ids are absent from the result)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = await self.ro_query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) "
            "WHERE $scope IS NULL OR m.scope = $scope RETURN properties(m)",
            {"ids": ids, "scope": scope},
        )
        return {row[0]["id"]: node_to_memory(row[0]) for row in rows}

    async def get_memories_with_successors(
        self, ids: Iterable[str], scope: str, types: Sequence[str]
    ) -> tuple[dict[str, Memory], list[tuple[str, str, str, float, float]]]:
        """:meth:`get_memories` and :meth:`outgoing` (edges of ``types`` leaving ``ids`` to
        memories of ``scope``) in one round trip, for the state pass of a recall page."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}, []
        labels = "|".join(_rel_label(t) for t in types)
        # One row per (memory, edge); the far end's scope is compared here, not in Cypher: a
        # filter on the far node (or an aggregation over the rows) made FalkorDB's plan cost
        # 10-1,000x more (measured in docs/benchmarks.md, issue 10).
        rows = await self.ro_query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) WHERE m.scope = $scope "
            f"OPTIONAL MATCH (m)-[r:{labels}]->(b:Memory) "
            "RETURN properties(m), type(r), b.id, b.scope, r.strength, r.create_time",
            {"ids": ids, "scope": scope},
        )
        memories: dict[str, Memory] = {}
        edges: list[tuple[str, str, str, float, float]] = []
        for props, rel, target, target_scope, strength, created in rows:
            if props["id"] not in memories:
                memories[props["id"]] = node_to_memory(props)
            if target is not None and target_scope == scope:
                edges.append((props["id"], rel, target, float(strength or 0.0), float(created or 0.0)))
        return memories, edges

    async def recall_candidates(self, ids: Sequence[str], scope: str) -> list[tuple[Memory, list[str]]]:
        """The fields recall ranks on, for many candidates in one round trip: ``[(memory,
        predecessor ids)]`` where ``memory`` has only id, scope, content, tags, importance,
        confidence, event_time and create_time set (as :func:`node_to_memory` would set them)
        and one entity per entity tag (``tag`` only, lower-cased), and the ids are those its
        PRECEDED_BY edges point to in the same scope. Ids absent from ``scope`` are left out.

        Bodies are not read here: recall hydrates only the page (:meth:`get_memories`). The
        predecessor ids come back unfiltered; a ``p.id IN $ids`` test made FalkorDB look up each
        row and cost 100-347 ms for 200 ids (issue 10)."""
        if not ids:
            return []
        # One row per (memory, PRECEDED_BY edge), grouped here; see get_memories_with_successors
        # for why the far end's scope is not filtered in Cypher.
        rows = await self.ro_query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) WHERE m.scope = $scope "
            "OPTIONAL MATCH (m)-[:PRECEDED_BY]->(p:Memory) "
            "RETURN m.id, m.content, m.tags, m.entity_tags, m.importance, m.confidence, "
            "m.event_time, m.create_time, p.id, p.scope",
            {"ids": list(dict.fromkeys(ids)), "scope": scope},
        )
        out: dict[str, tuple[Memory, list[str]]] = {}
        for (mid, content, tags, entity_tags, importance, confidence, event_time, create_time,
             prev, prev_scope) in rows:
            if mid not in out:
                memory = Memory(id=mid, scope=scope, content=content or "", tags=list(tags or []),
                                importance=float(importance or 0.0), confidence=float(confidence or 0.0))
                for tag in entity_tags or ():  # the entities' tags, lower-cased (memory_to_node)
                    memory.entities.add(tag=tag)
                if event_time is not None:
                    memory.event_time.CopyFrom(ts(float(event_time)))
                if create_time is not None:
                    memory.create_time.CopyFrom(ts(float(create_time)))
                out[mid] = (memory, [])
            if prev is not None and prev_scope == scope:
                out[mid][1].append(prev)
        return list(out.values())

    async def unembedded(self, scope: str, limit: int) -> list[tuple[str, str]]:
        """(id, content) of up to ``limit`` memories of ``scope`` whose embedding does not
        exist yet (``embedding_status`` other than DONE), through the ``embedding_status``
        index: the cost grows with the backlog, not with the scope."""
        rows = await self.ro_query(
            "MATCH (m:Memory) WHERE m.embedding_status IN $statuses AND m.scope = $scope "
            "RETURN m.id, m.content LIMIT $limit",
            {"statuses": ["EMBEDDING_STATUS_UNSPECIFIED", "EMBEDDING_STATUS_PENDING", "EMBEDDING_STATUS_FAILED",
                          "EMBEDDING_STATUS_PROVIDED"], "scope": scope, "limit": int(limit)},
        )
        return [(r[0], r[1]) for r in rows]

    async def replace_memory(
        self, memory: Memory, expected_version: int | None, *, include_enrichment: bool = False
    ) -> bool:
        """Write ``memory``'s properties onto its node when the stored version equals
        ``expected_version`` (no check when None). Enrichment-owned properties
        (:data:`ENRICHMENT_FIELDS`) are left alone unless ``include_enrichment`` (a content
        change resets them). Returns False on a version mismatch or a missing node; one
        atomic query."""
        props = memory_to_node(memory)
        if not include_enrichment:
            for name in ENRICHMENT_FIELDS:
                props.pop(name, None)
        rows = await self.query(
            "MATCH (m:Memory {id: $id}) WHERE m.scope = $scope "
            "AND ($expected IS NULL OR m.version = $expected) "
            "SET m += $props RETURN m.id",
            {"id": memory.id, "scope": memory.scope, "expected": expected_version, "props": props},
        )
        return bool(rows)

    async def set_enrichment(self, memory_id: str, content_hash: str, fields: dict[str, Any]) -> bool:
        """Enrichment's write: set enrichment-owned ``fields`` only while the node still holds
        the content that was enriched (``content_hash``), so it never overwrites an edit that
        landed meanwhile. Returns False when the content changed or the node is gone."""
        unknown = set(fields) - set(ENRICHMENT_FIELDS)
        if unknown:
            raise ValueError(f"not enrichment fields: {sorted(unknown)}")
        rows = await self.query(
            "MATCH (m:Memory {id: $id}) WHERE m.content_hash = $hash SET m += $fields RETURN m.id",
            {"id": memory_id, "hash": content_hash, "fields": fields},
        )
        return bool(rows)

    async def set_enrichment_many(self, rows: Sequence[tuple[str, str, dict[str, Any]]], *,
                                  return_nodes: bool = False) -> dict[str, dict[str, Any] | None]:
        """:meth:`set_enrichment` for many memories in ONE query: ``rows`` are
        ``(memory_id, content_hash, fields)``; each row is written only while its node still
        holds ``content_hash``. Returns ``{memory_id: properties}`` for the rows that landed —
        the node's properties as they stand right after the write when ``return_nodes`` (so
        an edit that landed before shows), else None. Raises ValueError for a field that is
        not enrichment-owned (:data:`ENRICHMENT_FIELDS`)."""
        if not rows:
            return {}
        for _, _, fields in rows:
            unknown = set(fields) - set(ENRICHMENT_FIELDS)
            if unknown:
                raise ValueError(f"not enrichment fields: {sorted(unknown)}")
        found = await self.query(
            "UNWIND $rows AS row MATCH (m:Memory {id: row.id}) WHERE m.content_hash = row.hash "
            "SET m += row.fields RETURN m.id, " + ("properties(m)" if return_nodes else "null"),
            {"rows": [{"id": mid, "hash": h, "fields": fields} for mid, h, fields in rows]},
        )
        return {r[0]: r[1] for r in found}

    async def purge_memory(self, memory_id: str, scope: str) -> bool:
        """Remove the node and its edges. Returns False when absent."""
        rows = await self.query(
            "MATCH (m:Memory {id: $id}) WHERE m.scope = $scope DETACH DELETE m RETURN 1",
            {"id": memory_id, "scope": scope},
        )
        return bool(rows)

    async def count_memories(self, scope: str | None = None, states: Sequence[str] | None = None) -> int:
        """Number of Memory nodes (optionally in one scope and states)."""
        rows = await self.ro_query(
            "MATCH (m:Memory) WHERE ($scope IS NULL OR m.scope = $scope) "
            "AND ($states IS NULL OR m.state IN $states) RETURN count(m)",
            {"scope": scope, "states": list(states) if states else None},
        )
        return int(rows[0][0]) if rows else 0

    # --- relations ---------------------------------------------------------------------

    async def create_relation(self, relation: Relation) -> bool:
        """MERGE a typed edge between two memories of ``relation.scope``; sets strength,
        create_time (first write only), reason and properties. False when either end is
        missing in the scope."""
        label = _rel_label(relation_type_name(relation.type))
        created = relation.create_time.seconds + relation.create_time.nanos / 1e9
        rows = await self.query(
            "MATCH (a:Memory {id: $a}), (b:Memory {id: $b}) "
            "WHERE a.scope = $scope AND b.scope = $scope "
            f"MERGE (a)-[r:{label}]->(b) "
            "ON CREATE SET r.create_time = $created "
            "SET r.strength = $strength, r.reason = $reason, r.scope = $scope RETURN r.create_time",
            {"a": relation.source_id, "b": relation.target_id, "scope": relation.scope,
             "created": created, "strength": float(relation.strength), "reason": relation.reason},
        )
        return bool(rows)

    async def create_superseding_relation(self, relation: Relation, source_props: dict[str, Any],
                                          expected_version: int | None) -> bool:
        """Write an INVALIDATED_BY / EVOLVED_INTO edge and the source's new state in ONE query,
        only while the target is ACTIVE and the source still has ``expected_version`` (no check
        when None). Two concurrent opposite supersessions can't both land, so no cycle forms.
        Returns False when the check fails or an end is missing."""
        label = _rel_label(relation_type_name(relation.type))
        created = relation.create_time.seconds + relation.create_time.nanos / 1e9
        rows = await self.query(
            "MATCH (a:Memory {id: $a}), (b:Memory {id: $b}) "
            "WHERE a.scope = $scope AND b.scope = $scope AND b.state = 'ACTIVE' "
            "AND ($expected IS NULL OR a.version = $expected) "
            f"MERGE (a)-[r:{label}]->(b) "
            "ON CREATE SET r.create_time = $created "
            "SET r.strength = $strength, r.reason = $reason, r.scope = $scope "
            "SET a += $props RETURN r.create_time",
            {"a": relation.source_id, "b": relation.target_id, "scope": relation.scope, "created": created,
             "strength": float(relation.strength), "reason": relation.reason, "expected": expected_version,
             "props": source_props},
        )
        return bool(rows)

    async def outgoing(
        self, ids: Sequence[str], types: Sequence[str], scope: str
    ) -> list[tuple[str, str, str, float, float]]:
        """Edges of the given types leaving ``ids``: (source, type, target, strength,
        create_time)."""
        if not ids:
            return []
        labels = "|".join(_rel_label(t) for t in types)
        rows = await self.ro_query(
            f"UNWIND $ids AS mid MATCH (a:Memory {{id: mid}})-[r:{labels}]->(b:Memory) "
            "WHERE a.scope = $scope AND b.scope = $scope "
            "RETURN a.id, type(r), b.id, r.strength, r.create_time",
            {"ids": list(ids), "scope": scope},
        )
        return [(r[0], r[1], r[2], float(r[3] or 0.0), float(r[4] or 0.0)) for r in rows]

    async def neighbours(
        self, ids: Sequence[str], types: Sequence[str], scope: str
    ) -> list[tuple[str, str, str, float]]:
        """Edges of the given types touching ``ids`` in either direction:
        (seed id, type, other id, strength)."""
        if not ids:
            return []
        labels = "|".join(_rel_label(t) for t in types)
        rows = await self.ro_query(
            f"UNWIND $ids AS mid MATCH (a:Memory {{id: mid}})-[r:{labels}]-(b:Memory) "
            "WHERE a.scope = $scope AND b.scope = $scope "
            "RETURN a.id, type(r), b.id, r.strength",
            {"ids": list(ids), "scope": scope},
        )
        return [(r[0], r[1], r[2], float(r[3] or 0.0)) for r in rows]

    async def all_relations(self) -> list[dict[str, Any]]:
        """Every memory-to-memory edge with its properties (for export)."""
        rows = await self.ro_query(
            "MATCH (a:Memory)-[r]->(b:Memory) RETURN a.id, type(r), b.id, properties(r)"
        )
        return [{"source_id": r[0], "type": r[1], "target_id": r[2], "properties": r[3]} for r in rows]

    async def link_predecessors(self, ids: Sequence[str], created: float) -> dict[str, str]:
        """For each memory, find its predecessor — the latest earlier memory (by event_time,
        then create_time) of the same scope, ACTIVE or SUPERSEDED, that shares a tag with it
        (any memory when it has no tags) — write ``(m)-[:PRECEDED_BY]->(prev)`` (MERGE; a new
        edge gets ``create_time = created``, strength 1.0 and the scope), and return
        ``{id: prev content}`` for the memories that have one.

        Indexed, never a scan of the scope: for each (memory, tag) it asks for the best
        candidate in event-time windows of growing width (:data:`PREDECESSOR_WINDOWS`) back
        from the memory's event time, each a range-index lookup on ``event_time`` and the
        array index on ``tags_lower``; the first window holding a candidate holds the latest
        one. The queries of a step go out as one pipeline (:meth:`ro_query_many`), the edges
        in one write. Cost: about 0.3 ms of FalkorDB time per (memory, tag, window tried);
        ``bench/enrich_throughput.py --predecessor-bench`` measures it at 10k and 100k.
        """
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = await self.ro_query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) "
            "RETURN m.id, m.scope, m.event_time, m.create_time, m.tags_lower",
            {"ids": ids})
        # (memory id, scope, event time, create time, [tags] or [None] = any tag)
        todo = [(r[0], r[1], float(r[2]), r[3], list(r[4] or []) or [None]) for r in rows if r[2] is not None]
        best: dict[str, tuple[str, float, float | None]] = {}
        for width in PREDECESSOR_WINDOWS:
            if not todo:
                break
            asks = [(mid, scope, t, ct, tag) for mid, scope, t, ct, tags in todo for tag in tags]
            found = await self.ro_query_many([_predecessor_query(mid, scope, t, ct, tag, width)
                                              for mid, scope, t, ct, tag in asks])
            for (mid, *_), hit in zip(asks, found, strict=True):
                if hit and (mid not in best or _newer(hit[0][1:], best[mid][1:])):
                    best[mid] = (hit[0][0], float(hit[0][1]), hit[0][2])
            todo = [item for item in todo if item[0] not in best]
        if not best:
            return {}
        linked = await self.query(
            "UNWIND $pairs AS pair MATCH (m:Memory {id: pair.id}), (p:Memory {id: pair.prev}) "
            "MERGE (m)-[r:PRECEDED_BY]->(p) ON CREATE SET r.create_time = $created, r.strength = 1.0, "
            "r.scope = m.scope RETURN m.id, p.content",
            {"pairs": [{"id": mid, "prev": prev[0]} for mid, prev in best.items()], "created": created})
        return {r[0]: r[1] for r in linked if r[1] is not None}

    # --- search arms -------------------------------------------------------------------

    async def fulltext(self, query: str, scope: str, limit: int) -> list[tuple[str, float]]:
        """Full-text arm: (id, score) of Memory nodes in ``scope`` matching a sanitised
        RediSearch query, best first. An empty query returns []."""
        if not query.strip():
            return []
        rows = await self.ro_query(
            "CALL db.idx.fulltext.queryNodes('Memory', $q) YIELD node, score "
            "WHERE node.scope = $scope RETURN node.id, score ORDER BY score DESC LIMIT $limit",
            {"q": query, "scope": scope, "limit": int(limit)},
        )
        return [(r[0], float(r[1])) for r in rows]


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
        "AND n.state IN ['ACTIVE', 'SUPERSEDED'] AND (n.event_time < $t OR n.create_time < $ct) "
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
