"""API key nodes (``:ApiKey``): stored hashed, never the secret (automem/common/keys.py
mints and checks them), and their audit record: one ``(:ApiKeyEvent {id, action, key_id,
actor, role, scopes, time})`` per create or revoke, written in the same query as the change
(so a change and its record land together or not at all)."""

from __future__ import annotations

from typing import Any

from automem.graph.repository import Repository


class ApiKeys(Repository):
    """Statements over ``:ApiKey`` nodes."""

    async def create(self, key_id: str, key_hash: str, role: str, scopes: list[str], default_scope: str,
                     create_time: float, name: str, require_review: bool, actor: str = "",
                     event_id: str = "") -> None:
        """Create a key node (not revoked) with the secret's hash ``key_hash``, and its
        ``create`` audit event (id ``event_id``, by ``actor``) in the same query."""
        await self.store.query(
            "CREATE (k:ApiKey {id: $id, hash: $hash, role: $role, scopes: $scopes, default_scope: $default, "
            "revoked: false, create_time: $t, name: $name, require_review: $review, created_by: $actor}) "
            "CREATE (:ApiKeyEvent {id: $event, action: 'create', key_id: $id, actor: $actor, role: $role, "
            "scopes: $scopes, time: $t})",
            {"id": key_id, "hash": key_hash, "role": role, "scopes": scopes, "default": default_scope,
             "t": create_time, "name": name, "review": bool(require_review), "actor": actor, "event": event_id},
        )

    async def all(self) -> list[list[Any]]:
        """Every key, oldest first: rows ``[id, role, scopes, default_scope, revoked,
        create_time, name, created_by, revoked_by, revoke_time, require_review]``."""
        return await self.store.ro_query(
            "MATCH (k:ApiKey) RETURN k.id, k.role, k.scopes, k.default_scope, k.revoked, k.create_time, k.name, "
            "coalesce(k.created_by, ''), coalesce(k.revoked_by, ''), k.revoke_time, "
            "coalesce(k.require_review, false) ORDER BY k.create_time"
        )

    async def revoke(self, key_id: str, actor: str = "", when: float = 0.0, event_id: str = "") -> bool:
        """Mark the key revoked (by ``actor`` at ``when``, epoch seconds) with its ``revoke``
        audit event in the same query; False when there is no such key. Revoking a revoked
        key changes nothing and records nothing."""
        rows = await self.store.query(
            "MATCH (k:ApiKey {id: $id}) WHERE k.revoked = false "
            "SET k.revoked = true, k.revoked_by = $actor, k.revoke_time = $t "
            "CREATE (:ApiKeyEvent {id: $event, action: 'revoke', key_id: k.id, actor: $actor, role: k.role, "
            "scopes: k.scopes, time: $t}) RETURN k.id",
            {"id": key_id, "actor": actor, "t": when, "event": event_id})
        if rows:
            return True
        return bool(await self.store.ro_query("MATCH (k:ApiKey {id: $id}) RETURN k.id", {"id": key_id}))

    async def events(self, key_id: str = "") -> list[list[Any]]:
        """The audit events, newest first (of ``key_id`` only when given): rows ``[id,
        action, key_id, actor, role, scopes, time]``."""
        return await self.store.ro_query(
            "MATCH (e:ApiKeyEvent) WHERE $key = '' OR e.key_id = $key "
            "RETURN e.id, e.action, e.key_id, e.actor, e.role, e.scopes, e.time ORDER BY e.time DESC",
            {"key": key_id})

    async def find_live(self, key_hash: str) -> list[Any] | None:
        """``[id, role, scopes, default_scope, require_review]`` of the unrevoked key whose
        secret hashes to ``key_hash``, or None."""
        rows = await self.store.ro_query(
            "MATCH (k:ApiKey {hash: $hash}) WHERE k.revoked = false "
            "RETURN k.id, k.role, k.scopes, k.default_scope, coalesce(k.require_review, false)",
            {"hash": key_hash},
        )
        return rows[0] if rows else None

    async def count(self) -> int:
        """Number of keys ever created (revoked ones included)."""
        rows = await self.store.ro_query("MATCH (k:ApiKey) RETURN count(k)")
        return int(rows[0][0]) if rows and rows[0][0] else 0
