"""API key nodes (``:ApiKey``): stored hashed, never the secret (automem/common/keys.py
mints and checks them)."""

from __future__ import annotations

from typing import Any

from automem.graph.repository import Repository


class ApiKeys(Repository):
    """Statements over ``:ApiKey`` nodes."""

    async def create(self, key_id: str, key_hash: str, role: str, scopes: list[str], default_scope: str,
                     create_time: float, name: str, require_review: bool) -> None:
        """Create a key node (not revoked) with the secret's hash ``key_hash``."""
        await self.store.query(
            "CREATE (k:ApiKey {id: $id, hash: $hash, role: $role, scopes: $scopes, default_scope: $default, "
            "revoked: false, create_time: $t, name: $name, require_review: $review})",
            {"id": key_id, "hash": key_hash, "role": role, "scopes": scopes, "default": default_scope,
             "t": create_time, "name": name, "review": bool(require_review)},
        )

    async def all(self) -> list[list[Any]]:
        """Every key, oldest first: rows ``[id, role, scopes, default_scope, revoked,
        create_time, name]``."""
        return await self.store.ro_query(
            "MATCH (k:ApiKey) RETURN k.id, k.role, k.scopes, k.default_scope, k.revoked, k.create_time, k.name "
            "ORDER BY k.create_time"
        )

    async def revoke(self, key_id: str) -> bool:
        """Mark the key revoked; False when there is no such key."""
        rows = await self.store.query("MATCH (k:ApiKey {id: $id}) SET k.revoked = true RETURN k.id", {"id": key_id})
        return bool(rows)

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
