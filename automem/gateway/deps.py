"""Who calls and through what: the caller's credentials as gRPC metadata, and the
:class:`Caller` every use case calls the services with.

The FastAPI dependencies (:func:`grpc_client`, :func:`principal`, :func:`scope`,
:func:`caller`) read them from the HTTP request; the MCP tools build a :class:`Caller` from
the MCP request's HTTP headers, or from the stdio client's own key.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from dataclasses import dataclass
from typing import Annotated, Any

import grpc
from fastapi import Depends, Request
from fastapi.responses import JSONResponse

from automem.common.client import AutomemClient
from automem.common.errors import HTTP_STATUS
from automem.common.settings import Settings
from automem.gateway.errors import GatewayError, error_response
from automem.v1 import recall_service_pb2

#: Deadline (seconds) of a service call when neither the call nor the client names one, and
#: of the maintenance calls (consolidation, sync, reprocess, delete by tag, analyze,
#: history), whose stores run under the job bound (automem/common/timeouts.py).
CALL_TIMEOUT = 60.0

_PRINTABLE = re.compile(r"[\x20-\x7e]*")


def refuse_non_utf8_target(request: Request) -> None:
    """Refuse a path or query string whose percent-encoded bytes are not UTF-8 (RFC 3986
    section 2.5): Starlette decodes them with replacement, so ``tags=%ff`` read as the tag
    "\ufffd" and ``query=%ff%fe`` searched for two replacement characters. GatewayError
    400 naming the query parameter (or ``path``); the app's handler answers 401 first to a
    caller without valid credentials. Run by the app-wide dependency
    :func:`utf8_request_target`; costs one ``in`` test on a target without ``%``."""
    raw_path = request.scope.get("raw_path") or b""
    if b"%" in raw_path and not _utf8(raw_path):
        raise GatewayError(400, "path: percent-encoded bytes that are not UTF-8 text")
    query = request.scope.get("query_string") or b""
    if b"%" not in query:
        return
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if not (_utf8(name) and _utf8(value)):
            shown = urllib.parse.unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8", "backslashreplace")
            raise GatewayError(400, f"{shown}: percent-encoded bytes that are not UTF-8 text")


async def utf8_request_target(request: Request) -> None:
    """The app-wide dependency (app.py) running :func:`refuse_non_utf8_target` on every
    request. A coroutine because FastAPI runs a plain function dependency in its thread pool:
    a thread hand-over per request (4.6 % of the gateway's samples under sequential recalls;
    py-spy, docs/benchmarks.md "The gateway's thread hop")."""
    refuse_non_utf8_target(request)


def _utf8(encoded: bytes) -> bool:
    try:
        urllib.parse.unquote_to_bytes(encoded.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _checked(name: str, value: str) -> tuple[str, str]:
    # gRPC metadata takes printable ASCII only; anything else can't be a valid key or scope.
    if not _PRINTABLE.fullmatch(value):
        raise GatewayError(400 if name == "x-automem-scope" else 401,
                           f"{name}: header holds characters no key or scope can contain")
    return name, value


def single_header(request: Request, name: str) -> str:
    """The value of the request's header ``name`` (case-insensitive), "" when absent.

    GatewayError 400 ``"<name>: given <n> times; send it once"`` when the request carries it
    more than once, equal values included: which copy a proxy or client meant is a guess, and
    serving the first one silently acted with a key or scope the caller may not have meant."""
    values = request.headers.getlist(name)
    if len(values) > 1:
        raise GatewayError(400, f"{name}: given {len(values)} times; send it once")
    return values[0] if values else ""


def _same_key(name: str, value: str, other: str, other_value: str) -> None:
    """GatewayError 400 naming both headers unless they carry the same key."""
    if value.strip() != other_value.strip():
        raise GatewayError(400, f"{name} and {other} carry different keys; send one")


def principal_metadata(request: Request, settings: Settings) -> list[tuple[str, str]]:
    """The caller's key (``Authorization`` or ``X-API-Key``; ``?api_key=`` only when
    ``AUTOMEM_ALLOW_QUERY_TOKEN`` is set, else 401: a key in a URL ends up in logs) and the
    admin token (``X-Admin-Token``, or ``X-Admin-Api-Key`` as AutoMem's
    automem/api/auth_helpers.py also accepts; ``?admin_token=`` as ``?api_key=``), as gRPC
    metadata (``x-admin-token``). A query token is refused (401) whenever the setting is off,
    also beside a header; with it on, one beside a header must carry the same key (400).
    GatewayError 401 for a header no key can hold, 400 for one of them sent more than once
    (:func:`single_header`), 400 for ``Authorization`` and ``X-API-Key`` (or ``X-Admin-Token``
    and ``X-Admin-Api-Key``) carrying different keys: serving one silently acted with a key
    the caller may not have meant (equal values are accepted: some clients send both)."""
    md: list[tuple[str, str]] = []
    auth = single_header(request, "Authorization")
    key = single_header(request, "X-API-Key")
    if auth and key:
        bearer = auth[7:] if auth[:7].lower() == "bearer " else auth
        _same_key("Authorization", bearer, "X-API-Key", key)
    query_key = request.query_params.get("api_key", "")
    if query_key:
        # Refused also beside a key header (it was ignored there, and the URL carrying a
        # secret went on into proxy and access logs); allowed, it must be the header's key.
        if not settings.allow_query_token:
            raise GatewayError(401, "api_key in the query string is refused; send Authorization: Bearer")
        if auth or key:
            given = key or (auth[7:] if auth[:7].lower() == "bearer " else auth)
            _same_key("X-API-Key" if key else "Authorization", given, "api_key", query_key)
        else:
            key = query_key
    if auth:
        md.append(_checked("authorization", auth))
    elif key:
        md.append(_checked("x-api-key", key))
    admin, admin_alias = single_header(request, "X-Admin-Token"), single_header(request, "X-Admin-Api-Key")
    if admin and admin_alias:
        _same_key("X-Admin-Token", admin, "X-Admin-Api-Key", admin_alias)
    admin = admin or admin_alias
    query_admin = request.query_params.get("admin_token", "")
    if query_admin:  # AutoMem's automem/api/auth_helpers.py reads it too
        if not settings.allow_query_token:
            raise GatewayError(401, "admin_token in the query string is refused; send X-Admin-Token")
        if admin:
            _same_key("X-Admin-Token", admin, "admin_token", query_admin)
        admin = admin or query_admin
    if admin:
        md.append(_checked("x-admin-token", admin))
    return md


def scope_metadata(request: Request) -> list[tuple[str, str]]:
    """The requested ``X-Automem-Scope`` as gRPC metadata ([] when absent). GatewayError 400
    for a header no scope can hold or sent more than once; the service checks the key may use it."""
    value = single_header(request, "X-Automem-Scope")
    return [_checked("x-automem-scope", value)] if value else []


def credentials(request: Request, settings: Settings) -> list[tuple[str, str]]:
    """gRPC metadata carrying the caller's credentials and requested scope."""
    return principal_metadata(request, settings) + scope_metadata(request)


@dataclass
class Caller:
    """The services as one caller sees them: ``client``'s stubs called with ``metadata``."""

    client: AutomemClient
    metadata: list[tuple[str, str]]

    async def __call__(self, method: Any, message: Any, timeout: float | None = None, *,
                       names: dict[str, str] | None = None) -> Any:
        """``method(message)`` with the caller's metadata and a deadline: ``timeout``, else the
        client's ``call_timeout`` (``Settings.call_deadline_seconds``: derived from the store
        bound, so a stalled store answers 503 in seconds), else :data:`CALL_TIMEOUT`.
        GatewayError for a failed call (DEADLINE_EXCEEDED and UNAVAILABLE are 503), its
        message naming a proto field of ``names`` by the route's name for it
        (:meth:`GatewayError.from_rpc`)."""
        timeout = timeout or getattr(self.client, "call_timeout", None) or CALL_TIMEOUT
        try:
            return await method(message, metadata=self.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise GatewayError.from_rpc(exc, names) from None

    def stream(self, method: Any, message: Any, timeout: float) -> Any:
        """The response stream of a server-streaming ``method`` (errors arrive on reading)."""
        return method(message, metadata=self.metadata, timeout=timeout)


#: Seconds a successful credentials check is remembered by :func:`auth_error`: 1, so that a
#: revoked key is refused on ``/mcp`` within the 2 s the README promises when it was revoked
#: through the service (the service's own check then refuses it at once); 5 let it in for 5 s.
AUTH_CACHE_SECONDS = 1.0
#: Seconds the WhoAmI call of a credentials check may take.
AUTH_TIMEOUT = 10.0
#: Credentials remembered at most; the cache is emptied when it grows past this.
AUTH_CACHE_MAX = 10_000


async def auth_error(request: Request) -> JSONResponse | None:
    """None when the request's credentials are valid and its ``X-Automem-Scope`` allowed;
    else the 401 / 403 response (400 for a header no key or scope can hold).

    The services check credentials on every call; the gateway asks (RecallService.WhoAmI)
    only before answering an error of its own (a 400 from validation, 413, 404 of an unknown
    route) and for ``/mcp`` and open RPCs, so that a request without a valid key never gets
    anything but 401. Successes are cached for :data:`AUTH_CACHE_SECONDS`; when the service
    cannot answer, the original answer stands (None)."""
    app = request.app
    try:
        md = credentials(request, app.state.settings)
    except GatewayError as exc:
        return error_response(exc.status, exc.message)
    cache: dict[tuple, float] = app.state.__dict__.setdefault("_auth_ok", {})
    key = tuple(md)
    now = time.monotonic()
    if cache.get(key, 0.0) > now:
        return None
    try:
        await app.state.client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(), metadata=md, timeout=AUTH_TIMEOUT)
    except grpc.aio.AioRpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return error_response(HTTP_STATUS[exc.code()], exc.details() or exc.code().name)
        return None  # down, busy, or a malformed scope name: let the original answer stand
    if len(cache) > AUTH_CACHE_MAX:
        cache.clear()
    cache[key] = now + AUTH_CACHE_SECONDS
    return None


# --- FastAPI dependencies --------------------------------------------------------------
# Coroutines, not plain functions: FastAPI runs a plain-function dependency in its thread
# pool (a thread hand-off per dependency and request); these never block.


async def grpc_client(request: Request) -> AutomemClient:
    """The app's gRPC client (one per app, ``app.state.client``)."""
    return request.app.state.client


async def principal(request: Request) -> list[tuple[str, str]]:
    """The request's key and admin token as gRPC metadata (:func:`principal_metadata`)."""
    return principal_metadata(request, request.app.state.settings)


async def scope(request: Request) -> list[tuple[str, str]]:
    """The request's ``X-Automem-Scope`` as gRPC metadata (:func:`scope_metadata`)."""
    return scope_metadata(request)


async def caller(client: Annotated[AutomemClient, Depends(grpc_client)],
           key: Annotated[list[tuple[str, str]], Depends(principal)],
           requested: Annotated[list[tuple[str, str]], Depends(scope)]) -> Caller:
    """The :class:`Caller` of a REST request."""
    return Caller(client, key + requested)


#: Route parameter type: ``call: CallerDep``.
CallerDep = Annotated[Caller, Depends(caller)]


def split_values(values: list[str]) -> list[str]:
    """Repeated and comma-separated query values as one list (AutoMem accepts both):
    ``["a, b", "c"]`` -> ``["a", "b", "c"]``; pieces are stripped, empty ones dropped. Used by
    ``GET``/``DELETE /memory/by-tag`` and ``/recall`` so both read ``tags=a,b`` alike."""
    return [v.strip() for raw in values for v in raw.split(",") if v.strip()]
