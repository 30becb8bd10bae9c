"""Review items (``:ReviewItem``): supersede proposals and decided memories of the review
queue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from automem.common.model import Memory, Relation, epoch, relation_type_name
from automem.graph import versions
from automem.graph.memories import PAYLOAD_BEHIND
from automem.graph.relations import relation_label
from automem.graph.repository import Repository


class Review(Repository):
    """Statements over ``:ReviewItem`` nodes."""

    async def propose_supersede(self, item_id: str, memory_id: str, target_id: str, scope: str, reason: str,
                                create_time: float, extra: dict[str, Any] | None = None) -> None:
        """Create (once per memory and target) the pending proposal that ``memory_id``
        supersedes ``target_id``, with ``extra`` properties (``relation_type``, ``strength``,
        ``target_version``, ``proposed_by``); a proposal that exists already is left as it is."""
        await self.store.query(
            "MERGE (r:ReviewItem {kind: 'supersede_proposal', memory_id: $mid, target_id: $tid}) "
            "ON CREATE SET r.id = $rid, r.reason = $reason, r.create_time = $now, r.status = 'pending', "
            "r.scope = $scope, r += $extra",
            {"mid": memory_id, "tid": target_id, "rid": item_id, "reason": reason, "now": create_time,
             "scope": scope, "extra": dict(extra or {})})

    async def pending_proposals_of(self, memory_id: str, scope: str) -> list[dict[str, Any]]:
        """Properties of the pending supersede proposals whose replacement is ``memory_id``."""
        return [p for p in await self.proposals_of(memory_id, scope) if p.get("status") == "pending"]

    async def proposals_of(self, memory_id: str, scope: str) -> list[dict[str, Any]]:
        """Properties of the supersede proposals whose replacement is ``memory_id``, whatever
        their status (pending, approved, rejected)."""
        rows = await self.store.ro_query(
            "MATCH (i:ReviewItem {kind: 'supersede_proposal', memory_id: $mid}) "
            "WHERE i.scope = $scope RETURN properties(i)",
            {"mid": memory_id, "scope": scope})
        return [r[0] for r in rows]

    async def items(self, scope: str, status: str, kind: str) -> list[dict[str, Any]]:
        """Properties of the ReviewItem nodes of ``scope`` with ``status`` (``all``: any)
        and ``kind`` (``""``: any)."""
        rows = await self.store.ro_query(
            "MATCH (i:ReviewItem) WHERE i.scope = $scope AND ($status = 'all' OR i.status = $status) "
            "AND ($kind = '' OR i.kind = $kind) RETURN properties(i)",
            {"scope": scope, "status": status, "kind": kind})
        return [r[0] for r in rows]

    async def get(self, item_id: str, scope: str) -> dict[str, Any] | None:
        """Properties of the ReviewItem ``item_id`` of ``scope``, or None."""
        rows = await self.store.ro_query(
            "MATCH (i:ReviewItem {id: $id}) WHERE i.scope = $scope RETURN properties(i)",
            {"id": item_id, "scope": scope})
        return rows[0][0] if rows else None

    async def decide_memory(self, before: Memory, props: dict[str, Any], item_id: str, item: dict[str, Any],
                            tombstones: Sequence[dict[str, Any]], *, payload_behind: bool = False) -> bool:
        """One query: the pending memory ``before`` gets node properties ``props`` while it
        still has ``before.version``, the ReviewItem ``item_id`` is created or updated with
        ``item``, and each of ``tombstones`` (properties) is created; with
        ``payload_behind`` the status becomes PAYLOAD_PENDING where the point holds the
        content (automem/graph/memories.py ``PAYLOAD_BEHIND``). False (nothing written) on a
        version mismatch or a missing memory."""
        rows = await self.store.query(
            "MATCH (m:Memory {id: $id}) WHERE m.scope = $scope AND m.version = $version "
            + versions.before("m") + "SET m += $props " + (PAYLOAD_BEHIND if payload_behind else "")
            + versions.record("m")
            + "MERGE (i:ReviewItem {id: $item_id}) SET i += $item "
            "FOREACH (t IN $tombstones | CREATE (x:Tombstone) SET x = t) RETURN m.id",
            versions.params() | {"id": before.id, "scope": before.scope, "version": before.version, "props": props,
             "item_id": item_id, "item": item, "tombstones": list(tombstones)})
        return bool(rows)

    async def approve_proposal(self, item_id: str, scope: str, item: dict[str, Any], old: Memory,
                               old_props: dict[str, Any], new_id: str, relation: Relation) -> bool:
        """One query: while the proposal ``item_id`` is pending, ``old`` still has its
        version and ``new_id`` is ACTIVE — update the item with ``item``, write ``old_props``
        onto ``old`` and create the superseding edge ``relation`` (old -> new). False
        (nothing written) when a check fails."""
        rows = await self.store.query(
            "MATCH (i:ReviewItem {id: $item_id}) WHERE i.scope = $scope AND i.status = 'pending' "
            "MATCH (old:Memory {id: $old_id}) WHERE old.scope = $scope AND old.version = $old_version "
            "MATCH (new:Memory {id: $new_id}) WHERE new.scope = $scope AND new.state = 'ACTIVE' "
            "SET i += $item " + versions.before("old", ["new"]) + "SET old += $old_props "
            + versions.record("old", ["new"]) +
            f"CREATE (old)-[r:{relation_label(relation_type_name(relation.type))}]->(new) "
            "SET r.strength = $strength, r.create_time = $created, r.reason = $reason, r.scope = $scope "
            "RETURN new.id",
            versions.params() | {"item_id": item_id, "scope": scope, "old_id": old.id, "old_version": old.version,
             "new_id": new_id, "old_props": old_props, "item": item, "strength": relation.strength,
             "created": epoch(relation, "create_time"), "reason": relation.reason})
        return bool(rows)

    async def close_pending(self, item_id: str, scope: str, item: dict[str, Any]) -> bool:
        """Update the pending ReviewItem ``item_id`` of ``scope`` with ``item``; False when it
        is absent or no longer pending."""
        rows = await self.store.query(
            "MATCH (i:ReviewItem {id: $id}) WHERE i.scope = $scope AND i.status = 'pending' SET i += $item RETURN i.id",
            {"id": item_id, "scope": scope, "item": item})
        return bool(rows)
