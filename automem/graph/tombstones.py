"""Tombstones (``:Tombstone``): content hashes a rejection blocks from being stored again in
a scope, until an admin lifts them (automem/ingest/review.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from automem.graph.repository import Repository


class Tombstones(Repository):
    """Statements over ``:Tombstone`` nodes."""

    async def blocking(self, items: Sequence[tuple[str, str]]) -> list[list[Any]]:
        """Live (not lifted) tombstones of ``(content_hash, scope)`` pairs, in one query:
        rows ``[content_hash, scope, tombstone id, memory_id, reason]``."""
        return await self.store.ro_query(
            "UNWIND $items AS item MATCH (t:Tombstone {content_hash: item.h}) "
            "WHERE t.scope = item.scope AND t.lifted = false "
            "RETURN item.h, item.scope, t.id, t.memory_id, t.reason",
            {"items": [{"h": h, "scope": scope} for h, scope in dict.fromkeys(items)]},
        )

    async def page(self, scope: str, include_lifted: bool, skip: int, limit: int) -> list[dict[str, Any]]:
        """Properties of the tombstones of ``scope`` (lifted ones only with
        ``include_lifted``), newest first, then by id; ``skip``/``limit`` paged."""
        rows = await self.store.ro_query(
            "MATCH (t:Tombstone) WHERE t.scope = $scope AND ($all OR t.lifted = false) RETURN properties(t) "
            "ORDER BY t.create_time DESC, t.id SKIP $skip LIMIT $limit",
            {"scope": scope, "all": include_lifted, "skip": skip, "limit": limit})
        return [r[0] for r in rows]

    async def lift(self, tombstone_id: str, scope: str, when: float, by: str) -> dict[str, Any] | None:
        """Lift the tombstone (the first lift's time, epoch seconds, and actor are kept);
        its properties afterwards, or None when there is no such tombstone in ``scope``."""
        rows = await self.store.query(
            "MATCH (t:Tombstone {id: $id}) WHERE t.scope = $scope "
            "SET t.lifted = true, t.lift_time = coalesce(t.lift_time, $t), t.lifted_by = coalesce(t.lifted_by, $by) "
            "RETURN properties(t)", {"id": tombstone_id, "scope": scope, "t": when, "by": by})
        return rows[0][0] if rows else None
