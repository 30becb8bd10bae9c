"""API keys: stored hashed in the graph (automem/graph/keys.py), each with a role, scope patterns
and a default scope.

``automem keys create --role writer --scope 'acme/*'`` prints a new key once; only its
sha256 is stored. Key format: ``am_<id>_<secret>``. Every create and revoke names its actor
and leaves an ``ApiKeyEvent`` audit record (automem/graph/keys.py); AdminService
(automem/ingest/admin.py) is the online way in.

Scope rule for keys minted by a key (:func:`within`): each pattern of the new key, read as a
name, must match one of the creator's patterns — ``acme/*`` may mint ``acme/web`` or
``acme/web/*`` but not ``*`` or ``globex/app``.
"""

from __future__ import annotations

import fnmatch
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from automem.common.auth import MAX_SCOPE_LENGTH, ROLES, SCOPE_PATTERN_RE, SCOPE_RE, Principal, hash_key
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
    created_by: str = ""
    revoked_by: str = ""
    revoke_time: float | None = None
    require_review: bool = False


def within(scopes: list[str] | tuple[str, ...], allowed: tuple[str, ...]) -> bool:
    """True when every pattern of ``scopes``, read as a scope name, matches one of the
    ``allowed`` patterns (fnmatch; ``*`` allows everything). The rule for which keys an admin
    key may mint, list and revoke."""
    return "*" in allowed or all(any(fnmatch.fnmatchcase(s, a) for a in allowed) for s in scopes)


class KeyStore:
    """Create, list, revoke and look up API keys in the graph (``:ApiKey`` nodes).

    Every gRPC call is authenticated (automem/common/grpc_server.py), which cost one graph
    query per request (issue 10). :meth:`lookup` and :meth:`any_keys` therefore remember their
    answers for :attr:`CACHE_SECONDS` in this process: a key revoked through this store
    (:meth:`revoke`) is refused at once, one revoked by another process (``automem keys
    revoke``) at most :attr:`CACHE_SECONDS` later, and the first key created by another
    process closes an open service at most :attr:`CACHE_SECONDS` later.

    Args:
        graph: the graph store holding the keys.
        clock: monotonic seconds (tests pass their own).
    """

    #: Seconds a key check (:meth:`lookup`, :meth:`any_keys`) is remembered.
    CACHE_SECONDS = 2.0
    #: Presented keys remembered at most; the cache is emptied when it grows past this.
    CACHE_MAX = 10_000

    def __init__(self, graph: GraphStore, clock: Callable[[], float] = time.monotonic) -> None:
        self.graph = graph
        self._clock = clock
        self._any: tuple[float, bool] | None = None
        #: sha256 of a presented secret -> (expiry, its principal or None).
        self._found: dict[str, tuple[float, Principal | None]] = {}
        #: Bumped by every change through this store: an answer read before it is not kept.
        self._epoch = 0

    async def create(self, role: str, scopes: list[str], default_scope: str | None = None,
                     name: str = "", require_review: bool = False,
                     actor: str = "cli:offline") -> tuple[str, ApiKeyInfo]:
        """Mint a key; returns (the secret key, shown once; its info). InvalidArgument for an
        unknown role, no scopes, a pattern given twice, or a default scope outside the patterns. With
        ``require_review`` every memory the key writes lands as PENDING_REVIEW. ``actor``:
        who asks (the audit record's actor)."""
        if role not in ROLES:
            raise InvalidArgument(f"role: one of {', '.join(ROLES)}", field="role")
        scopes = [s.strip() for s in scopes if s.strip()]
        if not scopes:
            raise InvalidArgument("scope: at least one scope pattern is required", field="scope")
        for pattern in scopes:
            if not SCOPE_PATTERN_RE.fullmatch(pattern) or len(pattern) > MAX_SCOPE_LENGTH:
                raise InvalidArgument(f"scope: {pattern[:80]!r} is not a scope pattern: '/'-separated segments of "
                                      "letters, digits, '.', '_', '-' and '*', each starting with a letter, digit "
                                      f"or '*', at most {MAX_SCOPE_LENGTH} characters", field="scope")
        if len(set(scopes)) < len(scopes):  # stored twice, listed twice (break-it review)
            twice = next(p for p in scopes if scopes.count(p) > 1)
            raise InvalidArgument(f"scope: {twice!r} given more than once", field="scope")
        if default_scope and (not SCOPE_RE.fullmatch(default_scope) or len(default_scope) > MAX_SCOPE_LENGTH):
            raise InvalidArgument(f"default_scope: {default_scope[:80]!r} is not a scope name", field="default_scope")
        # Each run of '*' stands for one name: 'acme/**' defaults to acme/default (was acme/defaultdefault).
        default = default_scope or re.sub(r"\*+", "default", scopes[0])
        principal = Principal("check", role, tuple(scopes), default)
        if not principal.allows(default):
            raise InvalidArgument(f"default_scope: {default!r} is outside {scopes}", field="default_scope")
        key_id = secrets.token_hex(6)
        secret = f"am_{key_id}_{secrets.token_urlsafe(24)}"
        info = ApiKeyInfo(key_id, role, scopes, default, False, time.time(), name or key_id, actor,
                          require_review=bool(require_review))
        await self.graph.keys.create(key_id, hash_key(secret), role, scopes, default, info.create_time, info.name,
                                     require_review, actor, uuid.uuid4().hex)
        self._any = None
        self._forget()
        return secret, info

    async def list(self) -> list[ApiKeyInfo]:
        """Every key (revoked ones included), oldest first."""
        rows = await self.graph.keys.all()
        return [ApiKeyInfo(r[0], r[1], list(r[2]), r[3], bool(r[4]), float(r[5]), r[6] or r[0], r[7], r[8],
                           None if r[9] is None else float(r[9]), bool(r[10])) for r in rows]

    async def revoke(self, key_id: str, actor: str = "cli:offline") -> None:
        """Revoke a key by id (``actor``: who asks, for the audit record). NotFound when absent."""
        self._forget()
        revoked = await self.graph.keys.revoke(key_id, actor, time.time(), uuid.uuid4().hex)
        self._forget()  # a check that read the key before the write must not keep it either
        if not revoked:
            raise NotFound(f"key {key_id} not found", field="id")

    async def lookup(self, secret: str) -> Principal | None:
        """The principal of a presented key, or None (unknown or revoked); the answer is
        remembered for :attr:`CACHE_SECONDS` (see the class)."""
        digest = hash_key(secret)
        now = self._clock()
        hit = self._found.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        epoch = self._epoch
        row = await self.graph.keys.find_live(digest)
        principal = None
        if row is not None:
            key_id, role, scopes, default, review = row
            principal = Principal(f"key:{key_id}", role, tuple(scopes), default,
                                  extra={"require_review": "true"} if review else {})
        if len(self._found) >= self.CACHE_MAX:
            self._found.clear()
        if epoch == self._epoch:
            self._found[digest] = (now + self.CACHE_SECONDS, principal)
        return principal

    def forget(self) -> None:
        """Drop every remembered key check (after the keys changed behind this store: a
        restore)."""
        self._forget()
        self._any = None

    def _forget(self) -> None:
        """Drop every remembered key check (after a change made through this store)."""
        self._found.clear()
        self._epoch += 1

    async def any_keys(self) -> bool:
        """True when a key was ever created; the answer is remembered for
        :attr:`CACHE_SECONDS` (see the class). Revoked keys count: revoking the last key must
        not turn the service back into an open one."""
        now = self._clock()
        if self._any is not None and now - self._any[0] < self.CACHE_SECONDS:
            return self._any[1]
        value = await self.graph.keys.count() > 0
        self._any = (now, value)
        return value
