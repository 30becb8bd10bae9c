"""The REST gateway: AutoMem-compatible routes (../shared/AUTOMEM_API.md) plus ``/v1``.

No business logic: every route calls a service over gRPC with the caller's credentials
(``Authorization: Bearer`` / ``X-API-Key`` / ``X-Admin-Token`` / ``X-Automem-Scope``
forwarded as metadata), so the services check keys and scopes themselves. gRPC status codes
map to HTTP statuses in one place (automem/common/errors.py); every response, errors
included, is JSON.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from automem.common.client import AutomemClient
from automem.common.errors import HTTP_STATUS, AutomemError
from automem.common.settings import Settings

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    """Every error answer: ``{"status": "error", "error": msg, "message": msg, "code": status}``."""

    model_config = ConfigDict(extra="allow")

    status: str
    error: str
    message: str
    code: int


#: Error statuses any route may answer, documented on every operation of the OpenAPI schema.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text} for status, text in (
        (400, "Invalid request; the message names the field"), (401, "Missing or invalid API key"),
        (403, "The key's role or scopes do not allow this"), (404, "Not found in the caller's scope"),
        (409, "Stale etag, tombstoned content or a disallowed state change"),
        (413, "Request body over the size limit"), (429, "Rate limit of the key exceeded"),
        (503, "A backing store is unavailable"))
}


class GatewayError(Exception):
    """An HTTP error with a JSON body ``{"status": "error", "error": msg, "code": status}``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


#: Seconds a client is asked to wait after a 429 (the rate limiter's smallest window).
RETRY_AFTER_SECONDS = 1


def _error_response(status: int, message: str, **extra: Any) -> JSONResponse:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 429 else None
    return JSONResponse({"status": "error", "error": message, "message": message, "code": status, **extra},
                        status_code=status, headers=headers)


def credentials(request: Request, settings: Settings) -> list[tuple[str, str]]:
    """gRPC metadata carrying the caller's credentials and requested scope.

    A token in the query string (``?api_key=``) is refused with 401 unless
    ``AUTOMEM_ALLOW_QUERY_TOKEN`` is set.
    """
    md: list[tuple[str, str]] = []
    auth = request.headers.get("authorization", "")
    key = request.headers.get("x-api-key", "")
    query_key = request.query_params.get("api_key", "")
    if query_key and not (auth or key):
        if not settings.allow_query_token:
            raise GatewayError(401, "api_key in the query string is refused; send Authorization: Bearer")
        key = query_key
    if auth:
        md.append(("authorization", auth))
    elif key:
        md.append(("x-api-key", key))
    for header in ("x-admin-token", "x-automem-scope"):
        if request.headers.get(header):
            md.append((header, request.headers[header]))
    for name, value in md:
        # gRPC metadata takes printable ASCII only; anything else can't be a valid key or scope.
        if not _PRINTABLE.fullmatch(value):
            status = 400 if name == "x-automem-scope" else 401
            raise GatewayError(status, f"{name}: header holds characters no key or scope can contain")
    return md


_PRINTABLE = re.compile(r"[\x20-\x7e]*")


async def call(method: Any, message: Any, request: Request) -> Any:
    """Call a gRPC method with the request's credentials; gRPC errors become GatewayError."""
    settings: Settings = request.app.state.settings
    try:
        return await method(message, metadata=credentials(request, settings), timeout=60)
    except grpc.aio.AioRpcError as exc:
        status = HTTP_STATUS.get(exc.code(), 500)
        if exc.code() == grpc.StatusCode.UNAVAILABLE and "failed to connect" in (exc.details() or "").lower():
            status = 503
        error = GatewayError(status, exc.details() or exc.code().name)
        error.from_service = True  # the service has checked the credentials
        raise error from None


#: Seconds a successful credentials check is remembered by :func:`auth_error`.
AUTH_CACHE_SECONDS = 5.0


async def auth_error(request: Request) -> JSONResponse | None:
    """None when the request's credentials are valid and its ``X-Automem-Scope`` allowed;
    else the 401 / 403 response. The services do the check (a NOT_FOUND lookup of an empty
    id); the gateway asks only before answering an error of its own (a 400 from validation,
    413, 404 of an unknown route) and for ``/mcp``, so that a request without a valid key
    never gets anything but 401. Successes are cached for :data:`AUTH_CACHE_SECONDS`."""
    from automem.v1 import recall_service_pb2

    app = request.app
    try:
        md = credentials(request, app.state.settings)
    except GatewayError as exc:
        return _error_response(exc.status, exc.message)
    cache: dict[tuple, float] = app.state.__dict__.setdefault("_auth_ok", {})
    key = tuple(md)
    now = time.monotonic()
    if cache.get(key, 0.0) > now:
        return None
    try:
        await app.state.client.recall.GetMemory(recall_service_pb2.RecallGetMemoryRequest(id=""), metadata=md,
                                                timeout=10)
    except grpc.aio.AioRpcError as exc:
        if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return _error_response(HTTP_STATUS[exc.code()], exc.details() or exc.code().name)
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            return None  # the services are down or busy: let the original answer stand
    if len(cache) > 10_000:
        cache.clear()
    cache[key] = now + AUTH_CACHE_SECONDS
    return None


class StreamedBodyLimit:
    """ASGI middleware for request bodies and ``/mcp`` credentials.

    A body with a Content-Length above ``limit`` bytes gets 413 naming the limit before it is
    read; a body sent without Content-Length (chunked) is counted as it arrives, and past
    ``limit`` bytes the rest is not read and the answer is 413, whatever the app made of the
    truncated body. Both 413s go to callers with valid credentials only (401 otherwise), and
    ``/mcp`` answers 401 over HTTP as REST does. Plain ASGI rather than Starlette's
    ``BaseHTTPMiddleware``, which costs a task and a stream per request (issue 10)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        path = scope.get("path", "")
        mcp = path == "/mcp" or path.startswith("/mcp/")
        too_long = length is not None and length.isdigit() and int(length) > self.limit
        if too_long or mcp:
            denied = await auth_error(Request(scope, receive))
            if denied is None and too_long:
                denied = _error_response(413, f"request body exceeds the limit of {self.limit} bytes")
            if denied is not None:
                await denied(scope, receive, send)
                return
        if length is not None:
            await self.app(scope, receive, send)
            return
        seen = 0
        over = False

        async def capped() -> Any:
            nonlocal seen, over
            if over:
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    over = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Any) -> None:
            if not over:
                await send(message)
            elif message["type"] == "http.response.start":
                response = _error_response(413, f"request body exceeds the limit of {self.limit} bytes")
                await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
                await send({"type": "http.response.body", "body": response.body})

        await self.app(scope, capped, guarded_send)


def create_app(settings: Settings, client: AutomemClient) -> FastAPI:
    """The FastAPI app. ``client`` reaches the services over gRPC. Every request gets an
    OpenTelemetry server span and a latency observation; ``GET /metrics`` serves Prometheus."""
    app = FastAPI(
        title="automem",
        version="0.1.0",
        description="Long-term memory for AI agents. AutoMem-compatible REST routes plus /v1.",
        responses=ERROR_RESPONSES,
    )
    app.state.settings = settings
    app.state.client = client

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> JSONResponse:
        if not getattr(exc, "from_service", False) and exc.status != 401 and (denied := await auth_error(request)):
            return denied
        return _error_response(exc.status, exc.message, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        if denied := await auth_error(request):
            return denied
        problems = []
        for err in exc.errors():
            loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
            problems.append(f"{'.'.join(loc) or 'body'}: {err.get('msg')}")
        return _error_response(400, "; ".join(problems) or "invalid request", fields=problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if denied := await auth_error(request):
            return denied
        return _error_response(exc.status_code, str(exc.detail))

    # Handlers for specific classes run in Starlette's ExceptionMiddleware, which answers and
    # stops there; only the catch-all below is re-raised to the server (and logged by it).
    @app.exception_handler(AutomemError)
    async def _domain_error(request: Request, exc: AutomemError) -> JSONResponse:
        # A domain check in the gateway (parsing a relation type...).
        if denied := await auth_error(request):
            return denied
        return _error_response(HTTP_STATUS.get(exc.code, 500), exc.message)

    @app.exception_handler(ValueError)
    async def _value_error(request: Request, exc: ValueError) -> JSONResponse:
        if isinstance(exc, UnicodeError):
            # JSON may carry lone surrogates (\ud800) that no UTF-8 text can hold.
            if denied := await auth_error(request):
                return denied
            return _error_response(400, "text fields must be valid Unicode: a lone surrogate (e.g. \\ud800) "
                                        "is not allowed")
        if str(exc).startswith("Value out of range"):
            # A number that fits the JSON/query type but not the protobuf field (int32 limits).
            if denied := await auth_error(request):
                return denied
            return _error_response(400, f"a numeric parameter is out of range: {str(exc).split(':')[-1].strip()}")
        log.exception("unhandled gateway error")
        return _error_response(500, f"internal error: {type(exc).__name__}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled gateway error")
        return _error_response(500, f"internal error: {type(exc).__name__}")

    from automem.common.telemetry import instrument_fastapi
    from automem.gateway import metrics, routes_memory, routes_ops, routes_recall

    app.add_middleware(StreamedBodyLimit, limit=settings.max_body_bytes)
    metrics.install(app)  # outermost of our middlewares: times 413s too
    instrument_fastapi(app)
    routes_recall.install(app)  # before routes_memory: /memory/by-tag must win over /memory/{id}
    routes_memory.install(app)
    routes_ops.install(app)
    from automem.gateway import routes_v1  # review queue, tombstones, history, backup

    routes_v1.install(app)

    # --- MCP: streamable HTTP at /mcp (automem/gateway/mcp_server.py; wraps the app's lifespan) ---
    from automem.gateway import mcp_server

    mcp_server.mount(app, settings, client)
    # --- end MCP ---
    return app

