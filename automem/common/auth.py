"""Principals, roles and scope resolution.

A request's principal is set by the gRPC auth interceptor (automem/common/grpc_server.py)
in a context variable; servicers call :func:`resolve_scope` and :func:`require_role`.
AutoMem's single ``AUTOMEM_API_TOKEN`` maps to one writer principal on the default scope
(admin when it equals the admin token). With no token configured the service is open and
the anonymous principal is an admin on the default scope (AutoMem's behaviour without a
token). API keys from ``automem keys`` are looked up in the key store.
"""

from __future__ import annotations

import contextvars
import fnmatch
import hashlib
import hmac
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from automem.common.errors import InvalidArgument, PermissionDenied, Unauthenticated

ROLES = ("reader", "writer", "admin")
#: A scope name, e.g. "acme/web-app": no wildcards, no empty or dot-only segments.
SCOPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*")
MAX_SCOPE_LENGTH = 200
#: A key's scope pattern, e.g. "acme/*" or "*": a scope name whose segments may hold ``*``.
SCOPE_PATTERN_RE = re.compile(r"[A-Za-z0-9*][A-Za-z0-9._*-]*(/[A-Za-z0-9*][A-Za-z0-9._*-]*)*")
_RANK = {name: i for i, name in enumerate(ROLES)}


@dataclass(frozen=True)
class Principal:
    """Who is calling: a name (key id), a role, the scope patterns it may use and its
    default scope."""

    name: str
    role: str
    scopes: tuple[str, ...] = ("*",)
    default_scope: str = "default"
    extra: dict[str, str] = field(default_factory=dict)

    def allows(self, scope: str) -> bool:
        """True when ``scope`` matches one of the principal's patterns (fnmatch, ``*`` wildcards)."""
        return any(fnmatch.fnmatchcase(scope, pattern) for pattern in self.scopes)

    def allows_all(self) -> bool:
        """True when the principal may use every scope (a bare ``*`` pattern)."""
        return "*" in self.scopes


_current: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("automem_principal", default=None)
#: Scope named by the request's ``x-automem-scope`` metadata/header.
header_scope: contextvars.ContextVar[str] = contextvars.ContextVar("automem_header_scope", default="")


def set_principal(principal: Principal | None) -> contextvars.Token:
    """Bind the request's principal (interceptor use)."""
    return _current.set(principal)


#: The call's credential check: authenticates the call's credentials again (raises
#: Unauthenticated once its key was revoked). Bound by the gRPC interceptor for each call
#: (automem/common/grpc_server.py); a long-lived stream runs it as it goes (:func:`still_authorized`).
_recheck: contextvars.ContextVar[Callable[[], Awaitable[Any]] | None] = contextvars.ContextVar(
    "automem_credential_check", default=None)


def bind_credential_check(check: Callable[[], Awaitable[Any]] | None) -> contextvars.Token:
    """Bind the call's credential check (interceptor use; see :func:`still_authorized`)."""
    return _recheck.set(check)


async def still_authorized() -> None:
    """Raise Unauthenticated when the call's key was revoked since the call began (no-op
    outside a call). A streaming call checks before each item it sends and while it waits:
    a revoked key's open ``/stream`` went on receiving its scope's events for good. The key
    store answers from its cache (automem/common/keys.py ``KeyStore.CACHE_SECONDS``)."""
    check = _recheck.get()
    if check is not None:
        await check()


def bound_principal() -> Principal | None:
    """The request's principal, or None outside a request (background work)."""
    return _current.get()


def current_principal() -> Principal:
    """The request's principal. Raises Unauthenticated when none is bound."""
    principal = _current.get()
    if principal is None:
        raise Unauthenticated("missing or invalid API key")
    return principal


def require_role(role: str) -> Principal:
    """The current principal when its role is at least ``role``; else PermissionDenied."""
    principal = current_principal()
    if _RANK[principal.role] < _RANK[role]:
        raise PermissionDenied(f"role {principal.role!r} may not do this; needs {role!r}")
    return principal


def resolve_scope(requested: str | None) -> str:
    """The scope a request acts on: the requested one, or the principal's default.

    Raises PermissionDenied when the principal's key does not allow it.
    """
    principal = current_principal()
    scope = (requested or "").strip() or header_scope.get().strip() or principal.default_scope
    if not SCOPE_RE.fullmatch(scope) or len(scope) > MAX_SCOPE_LENGTH:
        raise InvalidArgument(
            f"scope: {scope[:80]!r} is not a scope name: '/'-separated segments of letters, digits, "
            f"'.', '_' or '-', each starting with a letter or digit, at most {MAX_SCOPE_LENGTH} characters",
            field="scope")
    if not principal.allows(scope):
        raise PermissionDenied(f"scope {scope!r} is not allowed for this key")
    return scope


def hash_key(secret: str) -> str:
    """sha256 hex of an API key secret (keys are stored hashed)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def tokens_equal(a: str, b: str) -> bool:
    """Constant-time comparison of two tokens."""
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
