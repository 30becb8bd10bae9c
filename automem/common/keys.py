"""API keys: stored hashed in the graph (automem/graph/keys.py), each with a role, scope patterns
and a default scope.

``automem keys create --role writer --scope 'acme/*'`` prints a new key once; only its
sha256 is stored. Key format: ``am_<id>_<secret>``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from automem.common.auth import ROLES, Principal, hash_key
from automem.common.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from automem.graph import GraphStore


@dataclass
class ApiKeyInfo:
    """A stored key, without its secret."""

    id: str
    role: str
    scopes: list[str]
    default_scope: str
    revoked: bool
    create_time: float
    name: str


class KeyStore:
    """Create, list, revoke and look up API keys in the graph (``:ApiKey`` nodes)."""

    #: Seconds a "no keys exist" answer is cached by :meth:`any_keys`.
    CACHE_SECONDS = 2.0

    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph
        self._any: tuple[float, bool] | None = None

    async def create(self, role: str, scopes: list[str], default_scope: str | None = None,
                     name: str = "", require_review: bool = False) -> tuple[str, ApiKeyInfo]:
        """Mint a key; returns (the secret key, shown once; its info). InvalidArgument for an
        unknown role, no scopes, or a default scope outside the patterns. With
        ``require_review`` every memory the key writes lands as PENDING_REVIEW."""
        if role not in ROLES:
            raise InvalidArgument(f"role: one of {', '.join(ROLES)}", field="role")
        scopes = [s.strip() for s in scopes if s.strip()]
        if not scopes:
            raise InvalidArgument("scope: at least one scope pattern is required", field="scope")
        default = default_scope or scopes[0].replace("*", "default").rstrip("/")
        principal = Principal("check", role, tuple(scopes), default)
        if not principal.allows(default):
            raise InvalidArgument(f"default_scope: {default!r} is outside {scopes}", field="default_scope")
        key_id = secrets.token_hex(6)
        secret = f"am_{key_id}_{secrets.token_urlsafe(24)}"
        info = ApiKeyInfo(key_id, role, scopes, default, False, time.time(), name or key_id)
        await self.graph.keys.create(key_id, hash_key(secret), role, scopes, default, info.create_time, info.name,
                                     require_review)
        self._any = None
        return secret, info

    async def list(self) -> list[ApiKeyInfo]:
        """Every key (revoked ones included), oldest first."""
        rows = await self.graph.keys.all()
        return [ApiKeyInfo(r[0], r[1], list(r[2]), r[3], bool(r[4]), float(r[5]), r[6] or r[0]) for r in rows]

    async def revoke(self, key_id: str) -> None:
        """Revoke a key by id. NotFound when absent."""
        if not await self.graph.keys.revoke(key_id):
            raise NotFound(f"key {key_id} not found", field="id")

    async def lookup(self, secret: str) -> Principal | None:
        """The principal of a presented key, or None (unknown or revoked)."""
        row = await self.graph.keys.find_live(hash_key(secret))
        if row is None:
            return None
        key_id, role, scopes, default, review = row
        return Principal(f"key:{key_id}", role, tuple(scopes), default,
                         extra={"require_review": "true"} if review else {})

    async def any_keys(self) -> bool:
        """True when a key was ever created (cached for a moment). Revoked keys count: revoking
        the last key must not turn the service back into an open one."""
        if self._any is not None and time.monotonic() - self._any[0] < self.CACHE_SECONDS and self._any[1]:
            return True
        value = await self.graph.keys.count() > 0
        self._any = (time.monotonic(), value)
        return value
