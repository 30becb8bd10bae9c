"""Purges (``:Purge``): the graph side of an admin purge (automem/ingest/purge.py) — what a
purge would remove, the removal itself, and the content-free record it leaves.

A purge names its memories by id (``ids``) in one ``scope``; a whole-scope purge
(``whole_scope``) also removes the scope's entities, entity merges, review items,
tombstones and idempotency keys. Memory versions are ``(:MemoryVersion {memory_id, scope,
version, ...})`` nodes (the version store of issue 14 item 1): they go with their memory.
Every removal statement is idempotent (a resumed purge runs it again) and binds the scope.

The ``:Purge`` node holds no content: ``{id, kind, scope, memory_ids, actor, purge_time,
reason, status, pending_steps, counts (one property per count: ``count_<name>``)}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from automem.graph.idempotency import node_key
from automem.graph.memories import VECTOR_CURRENT
from automem.graph.repository import Repository

#: The counts of a purge, in the order of ``automem.v1.PurgeCounts``.
COUNT_NAMES = ("memories", "versions", "relations", "review_items", "tombstones", "idempotency_keys",
               "entities", "entity_merges", "stream_messages", "outbox_events", "vector_points")

# Each selection binds $scope; $ids are the purged memory ids; $all = whole scope.
_VERSIONS = ("MATCH (v:MemoryVersion) WHERE v.scope = $scope AND ($all OR v.memory_id IN $ids) ")
_REVIEW = ("MATCH (i:ReviewItem) WHERE i.scope = $scope AND ($all OR i.id IN $ids OR i.memory_id IN $ids "
           "OR i.target_id IN $ids) ")
_TOMBSTONES = "MATCH (t:Tombstone) WHERE t.scope = $scope AND ($all OR t.memory_id IN $ids) "
_KEYS = ("MATCH (k:IdempotencyKey) WHERE ($all AND k.key STARTS WITH $prefix) "
         "OR (k.key STARTS WITH $prefix AND size([x IN k.memory_ids WHERE x IN $ids]) > 0) ")
_SCOPE_ENTITIES = "MATCH (e:Entity) WHERE $all AND e.scope = $scope "
#: Entity merges the purge removes: every one of the scope, or those whose moved memories (the
#: ones that named the merged entity, so its slug is their text) are all purged by now (a
#: purge strips its ids from the others: :data:`_MERGES_STRIP`) and that no other memory
#: still names through the merged entity (enrichment links a later mention of the merged
#: name to it: the merge stays, or that memory would drop out of the kept entity's).
_MERGES = ("MATCH (x:EntityMerge) WHERE x.scope = $scope AND ($all OR (size(x.memory_ids) > 0 "
           "AND all(i IN x.memory_ids WHERE i IN $ids))) "
           "OPTIONAL MATCH (:Entity {key: x.alias_key})<-[:MENTIONS]-(o:Memory) WHERE NOT o.id IN $ids "
           "WITH x, count(o) AS others WHERE $all OR others = 0 ")
#: Before those merges go (a memory purge's only): the aliases and merged keys each added to
#: its canonical entity, and its merged entity when no memory mentions it (a slug from the
#: purged text would stay behind, and ``GET /entity/<slug>`` would still answer).
_MERGES_UNDO_ALIASES = (
    _MERGES + "WITH x WHERE NOT $all MATCH (c:Entity {key: x.canonical_key}) WHERE c.scope = $scope "
    "SET c.aliases = [s IN coalesce(c.aliases, []) WHERE NOT s IN "
    "[t IN coalesce(x.aliases, []) WHERE NOT t IN coalesce(x.prior_aliases, [])]], "
    "c.merged_keys = [k IN coalesce(c.merged_keys, []) WHERE NOT k IN "
    "[t IN coalesce(x.merged_keys, []) WHERE NOT t IN coalesce(x.prior_merged_keys, [])]]")
_MERGES_ALIAS_ENTITY = (_MERGES + "WITH x WHERE NOT $all MATCH (a:Entity {key: x.alias_key}) WHERE a.scope = $scope "
                        "AND NOT (a)<-[:MENTIONS]-(:Memory) DETACH DELETE a")
_MERGES_STRIP = ("MATCH (x:EntityMerge) WHERE x.scope = $scope AND NOT $all "
                 "AND any(i IN x.memory_ids WHERE i IN $ids) "
                 "SET x.memory_ids = [i IN x.memory_ids WHERE NOT i IN $ids], "
                 "x.shared = [i IN coalesce(x.shared, []) WHERE NOT i IN $ids]")
_PLAN_MEMORIES = ("UNWIND $ids AS mid MATCH (m:Memory {id: mid}) WHERE m.scope = $scope "
                  f"RETURN count(m), sum(CASE WHEN m.embedding_status IN {list(VECTOR_CURRENT)} THEN 1 ELSE 0 END)")
_PLAN_RELATIONS = ("UNWIND $ids AS mid MATCH (m:Memory {id: mid})-[r]-(o) WHERE m.scope = $scope "
                   "RETURN count(DISTINCT id(r))")
#: Entities the purge removes: every one of the scope, or those only the purged memories mention.
_PLAN_ENTITIES = ("MATCH (e:Entity) WHERE $all AND e.scope = $scope RETURN e.key UNION "
                  "UNWIND $ids AS mid MATCH (m:Memory {id: mid})-[:MENTIONS]->(e:Entity) WHERE m.scope = $scope "
                  "AND NOT $all WITH DISTINCT e OPTIONAL MATCH (o:Memory)-[:MENTIONS]->(e) WHERE NOT o.id IN $ids "
                  "WITH e, count(o) AS others WHERE others = 0 RETURN e.key")


def _params(ids: Sequence[str], scope: str, whole_scope: bool) -> dict[str, Any]:
    return {"ids": list(ids), "scope": scope, "all": bool(whole_scope), "prefix": node_key(scope, "")}


class Purges(Repository):
    """Statements of a purge and over ``:Purge`` nodes."""

    async def memory_ids(self, scope: str) -> list[str]:
        """Ids of every memory of ``scope`` (any state), in id order."""
        rows = await self.store.ro_query("MATCH (m:Memory) WHERE m.scope = $scope RETURN m.id ORDER BY m.id",
                                         {"scope": scope})
        return [r[0] for r in rows]

    async def plan(self, ids: Sequence[str], scope: str, whole_scope: bool) -> tuple[dict[str, int], list[str]]:
        """What removing ``ids`` of ``scope`` (and, with ``whole_scope``, the scope's other
        nodes) would remove: ``(counts, entity keys)`` — counts by :data:`COUNT_NAMES` (the
        graph's only; stream and outbox are counted by their owners), entity keys of the
        entities that would be left unmentioned (every entity of the scope when
        ``whole_scope``). One round trip."""
        p = _params(ids, scope, whole_scope)
        memories, relations, versions, review, tombstones, keys, orphans, merges = await self.store.ro_query_many(
            [(_PLAN_MEMORIES, p), (_PLAN_RELATIONS, p), (_VERSIONS + "RETURN count(v)", p),
             (_REVIEW + "RETURN count(i)", p), (_TOMBSTONES + "RETURN count(t)", p), (_KEYS + "RETURN count(k)", p),
             (_PLAN_ENTITIES, p), (_MERGES + "RETURN count(x)", p)])
        entity_keys = sorted({r[0] for r in orphans})
        counts = dict.fromkeys(COUNT_NAMES, 0)
        counts.update(memories=int(memories[0][0] or 0), vector_points=int(memories[0][1] or 0),
                      relations=int(relations[0][0] or 0), versions=int(versions[0][0] or 0),
                      review_items=int(review[0][0] or 0), tombstones=int(tombstones[0][0] or 0),
                      idempotency_keys=int(keys[0][0] or 0), entities=len(entity_keys),
                      entity_merges=int(merges[0][0] or 0))
        return counts, entity_keys

    async def remove(self, ids: Sequence[str], scope: str, whole_scope: bool, entity_keys: Sequence[str]) -> None:
        """Remove the memories ``ids`` of ``scope`` with their edges, their versions, review
        items, tombstones and idempotency keys; the entities ``entity_keys`` (of ``scope``)
        that no memory mentions any more; the entity merges all of whose moved memories are
        purged, with the aliases they added and their merged entity (:data:`_MERGES`), and
        the purged ids from the other merges' records; with ``whole_scope`` also every review item,
        tombstone, idempotency key, entity and entity merge of ``scope``. Idempotent (a
        resumed purge runs it again); each statement binds the scope."""
        p = _params(ids, scope, whole_scope)
        await self.store.query("UNWIND $ids AS mid MATCH (m:Memory {id: mid}) WHERE m.scope = $scope "
                               "DETACH DELETE m", p)
        await self.store.query(_MERGES_UNDO_ALIASES, p)
        await self.store.query(_MERGES_ALIAS_ENTITY, p)
        for selection, name in ((_VERSIONS, "v"), (_REVIEW, "i"), (_TOMBSTONES, "t"), (_KEYS, "k"),
                                (_SCOPE_ENTITIES, "e"), (_MERGES, "x")):
            await self.store.query(selection + f"DETACH DELETE {name}", p)
        await self.store.query(_MERGES_STRIP, p)
        if entity_keys:
            await self.store.query(
                "UNWIND $keys AS key MATCH (e:Entity {key: key}) WHERE e.scope = $scope "
                "AND NOT (e)<-[:MENTIONS]-(:Memory) DETACH DELETE e", {"keys": list(entity_keys), "scope": scope})

    # --- the record ----------------------------------------------------------------------

    async def record(self, props: dict[str, Any]) -> None:
        """Create the ``:Purge`` node ``props`` (its ``id`` is new)."""
        await self.store.query("CREATE (p:Purge) SET p = $props", {"props": props})

    async def update(self, purge_id: str, props: dict[str, Any]) -> None:
        """Set ``props`` on the ``:Purge`` node ``purge_id``."""
        await self.store.query("MATCH (p:Purge {id: $id}) SET p += $props", {"id": purge_id, "props": props})

    async def pending(self, scope: str, kind: str, memory_id: str = "") -> dict[str, Any] | None:
        """The oldest pending purge of ``kind`` in ``scope`` (of ``memory_id`` when given),
        as node properties, or None."""
        rows = await self.store.ro_query(
            "MATCH (p:Purge) WHERE p.scope = $scope AND p.kind = $kind AND p.status = 'pending' "
            "AND ($mid = '' OR $mid IN p.memory_ids) RETURN properties(p) ORDER BY p.purge_time LIMIT 1",
            {"scope": scope, "kind": kind, "mid": memory_id})
        return rows[0][0] if rows else None

    async def all_pending(self, started_before: float) -> list[dict[str, Any]]:
        """Properties of the pending ``:Purge`` nodes of every scope whose ``purge_time``
        (epoch seconds) is before ``started_before``, oldest first (the background
        resumption, a job over every scope)."""
        rows = await self.store.ro_query(
            "MATCH (p:Purge) WHERE p.status = 'pending' AND p.purge_time <= $before RETURN properties(p) "
            "ORDER BY p.purge_time", {"before": float(started_before)})
        return [r[0] for r in rows]

    async def page(self, scope: str, skip: int, limit: int) -> list[dict[str, Any]]:
        """Properties of the ``:Purge`` nodes of ``scope``, newest first, then by id."""
        rows = await self.store.ro_query(
            "MATCH (p:Purge) WHERE p.scope = $scope RETURN properties(p) ORDER BY p.purge_time DESC, p.id "
            "SKIP $skip LIMIT $limit", {"scope": scope, "skip": skip, "limit": limit})
        return [r[0] for r in rows]
