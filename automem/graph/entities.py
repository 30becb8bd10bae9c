"""Entity nodes (``:Entity``) and the MENTIONS edges from memories to them.

Entities are per scope (their ``key`` starts with the scope: automem/enrich/entities.py
``entity_key``), so scopes never meet in the graph.
"""

from __future__ import annotations

from collections.abc import Sequence

from automem.common.model import Memory, node_fields
from automem.graph.repository import Repository
from automem.v1 import memory_pb2


class Entities(Repository):
    """Statements over ``:Entity`` nodes and MENTIONS edges."""

    async def write_many(self, rows: Sequence[tuple[str, str, str, list[memory_pb2.Entity], list[str]]]) -> set[str]:
        """Replace the ``entities``, ``entity_tags`` (through the node builder) and MENTIONS
        edges of many memories in ONE query: ``rows`` are ``(memory_id, scope, content_hash,
        entities, entity keys)`` (one key per entity). Each row is written (all of its entity
        data) only while its node still holds ``content_hash`` in ``scope``; an Entity node is
        created on first mention with the entity's name, kind and scope. Returns the ids
        written."""
        if not rows:
            return set()
        found = await self.store.query(
            "UNWIND $rows AS row MATCH (m:Memory {id: row.id}) WHERE m.content_hash = row.hash AND m.scope = row.scope "
            "SET m += row.props "
            "WITH m, row OPTIONAL MATCH (m)-[old:MENTIONS]->(:Entity) DELETE old "
            "WITH DISTINCT m, row "
            "FOREACH (ent IN row.ents | MERGE (e:Entity {key: ent.key}) "
            "  ON CREATE SET e.name = ent.name, e.kind = ent.kind, e.scope = row.scope "
            "  MERGE (m)-[:MENTIONS]->(e)) "
            "RETURN m.id",
            {"rows": [{"id": memory_id, "hash": content_hash, "scope": scope,
                       "props": node_fields(Memory(entities=entities), ("entities", "entity_tags")),
                       "ents": [{"key": key, "name": e.name, "kind": e.kind}
                                for e, key in zip(entities, keys, strict=True)]}
                      for memory_id, scope, content_hash, entities, keys in rows]},
        )
        return {r[0] for r in found}

    async def co_mentioned(self, ids: Sequence[str], scope: str) -> list[tuple[str, str, int]]:
        """``(seed id, other memory id, shared entities)`` for memories of ``scope`` that
        mention an entity one of ``ids`` mentions, most shared entities first."""
        rows = await self.store.ro_query(
            "UNWIND $ids AS mid MATCH (a:Memory {id: mid})-[:MENTIONS]->(e:Entity)<-[:MENTIONS]-(b:Memory) "
            "WHERE a.scope = $scope AND b.scope = $scope AND e.scope = $scope AND b.id <> a.id "
            "RETURN a.id, b.id, count(e) ORDER BY count(e) DESC", {"ids": list(ids), "scope": scope})
        return [(r[0], r[1], int(r[2])) for r in rows]
