"""The graph store: FalkorDB, the record of truth.

Every value goes in as a Cypher parameter; the only interpolated identifiers are relation
type names, which are checked against the RelationType enum first. Every memory query binds
the scope. Node properties come from :func:`services.common.model.memory_to_node`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from falkordb.asyncio import FalkorDB

from services.common.errors import InvalidArgument, Unavailable
from services.common.model import (
    AUTHORABLE_RELATIONS,
    SYSTEM_RELATIONS,
    Memory,
    Relation,
    memory_to_node,
    node_to_memory,
    relation_type_name,
)
from services.common.settings import Settings
from services.common.telemetry import graph_span

log = logging.getLogger(__name__)

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

    async def ping(self) -> bool:
        """True when FalkorDB answers PING."""
        try:
            return bool(await self._db.connection.ping())
        except Exception:  # noqa: BLE001 - health probe
            return False

    async def ensure_schema(self) -> None:
        """Create the indexes (idempotent): range on Memory(id, scope, content_hash,
        event_time, tags_lower, entity_tags), full-text on Memory(content), range on Tombstone
        and IdempotencyKey. The two tag indexes are on array properties (FalkorDB indexes each
        element; ``$tag IN m.tags_lower`` uses it) and drive the by-tag listing
        (services/recall/bytag.py)."""
        statements = [
            "CREATE INDEX FOR (m:Memory) ON (m.id)",
            "CREATE INDEX FOR (m:Memory) ON (m.scope)",
            "CREATE INDEX FOR (m:Memory) ON (m.content_hash)",
            "CREATE INDEX FOR (m:Memory) ON (m.event_time)",
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
        then record order) of the same scope that shares a tag with it (any memory when it
        has no tags) — write ``(m)-[:PRECEDED_BY]->(prev)``, and return ``{id: prev content}``."""
        if not ids:
            return {}
        rows = await self.query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) "
            "OPTIONAL MATCH (n:Memory) WHERE n.scope = m.scope AND n.id <> m.id "
            "AND n.state IN ['ACTIVE', 'SUPERSEDED'] "
            "AND (n.event_time < m.event_time OR (n.event_time = m.event_time AND n.create_time < m.create_time)) "
            "AND (size(m.tags_lower) = 0 OR any(t IN n.tags_lower WHERE t IN m.tags_lower)) "
            "WITH m, n ORDER BY n.event_time DESC, n.create_time DESC "
            "WITH m, collect(n)[0] AS prev "
            "FOREACH (p IN CASE WHEN prev IS NULL THEN [] ELSE [prev] END | "
            "  MERGE (m)-[r:PRECEDED_BY]->(p) ON CREATE SET r.create_time = $created, r.strength = 1.0, "
            "  r.scope = m.scope) "
            "RETURN m.id, prev.content",
            {"ids": list(ids), "created": created},
        )
        return {r[0]: r[1] for r in rows if r[1] is not None}

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
