"""The REST gateway: AutoMem-compatible routes (/work/shared/AUTOMEM_API.md) plus ``/v1``.

The gateway only translates. The routers (``routes_memory``, ``routes_recall``,
``routes_ops``, ``routes_v1``: FastAPI ``APIRouter``s) read parameters, call a use case
(automem/gateway/usecases.py) with the request's :class:`~automem.gateway.deps.Caller` —
the caller's credentials (``Authorization: Bearer`` / ``X-API-Key`` / ``X-Admin-Token`` /
``X-Automem-Scope``) forwarded as gRPC metadata, so the services check keys, scopes and
limits themselves — and present the answer (automem/gateway/presenters.py). The MCP tools
(automem/gateway/mcp_server.py) call the same use cases. gRPC status codes map to HTTP
statuses in one place (automem/common/errors.py); every response, errors included, is JSON.
This module builds the app: error handlers, the HEAD, body-size and no-store middlewares, the
routers, ``/mcp``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from automem.common.client import AutomemClient
from automem.common.errors import HTTP_STATUS, AutomemError
from automem.common.settings import Settings
from automem.gateway import jsonrpc
from automem.gateway.deps import auth_error, utf8_request_target
from automem.gateway.errors import GatewayError, error_response
from automem.gateway.schemas import body_model_fields, public_route

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


class StreamedBodyLimit:
    """ASGI middleware for request bodies and ``/mcp`` credentials.

    A body with a Content-Length above ``limit`` bytes gets 413 naming the limit before it is
    read; a body sent without Content-Length (chunked) is counted as it arrives, and past
    ``limit`` bytes the rest is not read and the answer is 413, whatever the app made of the
    truncated body. Both 413s go to callers with valid credentials only (401 otherwise), and
    ``/mcp`` answers 401 over HTTP as REST does. A ``POST /mcp`` over the limit is read up to
    ``limit`` bytes, and when those show a ``store_memory`` or ``update_memory`` text over
    ``content_max`` characters the 413's body is a JSON-RPC error naming it (``content:
    ...``, ``memories[1].content: ...``; automem/gateway/jsonrpc.py
    :func:`~automem.gateway.jsonrpc.oversized_content`), as ``automem mcp`` names it: it
    named only the byte limit. Plain ASGI rather than Starlette's
    ``BaseHTTPMiddleware``, which costs a task and a stream per request (issue 10).
    ``unlimited``: paths whose body is a file streamed on rather than held (``POST
    /v1/backup:restore``: a backup is megabytes to gigabytes), without the limit."""

    def __init__(self, app: Any, limit: int, unlimited: tuple[str, ...] = (), content_max: int = 0) -> None:
        self.app = app
        self.limit = limit
        self.unlimited = unlimited
        self.content_max = content_max

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path", "") in self.unlimited:
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        path = scope.get("path", "")
        mcp = path == "/mcp" or path.startswith("/mcp/")
        too_long = length is not None and length.isascii() and length.isdigit() and int(length) > self.limit
        if too_long or mcp:
            denied = await auth_error(Request(scope, receive))
            if denied is None and too_long:
                denied = self._too_large(await _first_bytes(receive, self.limit) if mcp else b"")
            if denied is not None:
                await denied(scope, receive, send)
                return
        if length is not None:
            await self.app(scope, receive, send)
            return
        seen = 0
        over = False
        first = bytearray()  # of an /mcp body, up to the limit: what the 413 reads

        async def capped() -> Any:
            nonlocal seen, over
            if over:
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if mcp:
                    first.extend(message.get("body", b"")[:self.limit - len(first)])
                if seen > self.limit:
                    over = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Any) -> None:
            if not over:
                await send(message)
            elif message["type"] == "http.response.start":
                response = self._too_large(bytes(first))
                await send({"type": "http.response.start", "status": 413, "headers": response.raw_headers})
                await send({"type": "http.response.body", "body": response.body})

        await self.app(scope, capped, guarded_send)

    def _too_large(self, first: bytes) -> JSONResponse:
        """The 413 answering a body over the limit whose first bytes are ``first`` (empty
        unless it was sent to ``/mcp``): a JSON-RPC error naming the memory text when that is
        over its limit (the MCP SDK client shows the message of a JSON-RPC error body only),
        else the error naming the byte limit."""
        if first and self.content_max and (refused := jsonrpc.oversized_content(first, self.content_max, self.limit)):
            return JSONResponse(refused, status_code=413)
        return error_response(413, f"request body exceeds the limit of {self.limit} bytes")


async def _first_bytes(receive: Any, limit: int) -> bytes:
    """Up to ``limit`` bytes from the start of the request body; the rest is left unread."""
    chunks = bytearray()
    while len(chunks) < limit:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunks.extend(message.get("body", b"")[:limit - len(chunks)])
        if not message.get("more_body", False):
            break
    return bytes(chunks)


class NoStore:
    """ASGI middleware: ``Cache-Control: no-store`` on every response that sets no
    Cache-Control of its own, except the static assets under ``cacheable`` (path prefixes).

    The console's pages and fragments and the REST answers show memory content to one key:
    without it a browser keeps them in its cache, and after a console logout its Back button
    showed a memory page again (break-it review). One place, so a new page or route cannot
    forget it; ``/stream`` keeps its own ``no-cache``."""

    def __init__(self, app: Any, cacheable: tuple[str, ...] = ()) -> None:
        self.app = app
        self.cacheable = cacheable

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path", "").startswith(self.cacheable):
            await self.app(scope, receive, send)
            return

        async def send_no_store(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                if not any(name.lower() == b"cache-control" for name, _ in headers):
                    message = {**message, "headers": [*headers, (b"cache-control", b"no-store")]}
            await send(message)

        await self.app(scope, receive, send_no_store)


class HeadAsGet:
    """ASGI middleware: ``HEAD`` is answered as ``GET`` without the body (RFC 9110 §9.3.2),
    as AutoMem's Flask app does for each of its GET routes (Flask adds HEAD itself;
    FastAPI's routes do not, so every HEAD was a 405).

    The app sees a GET; the status and headers (Content-Length among them) go out as it
    sends them, and the first body message ends the response empty, so a streamed answer
    (``/stream``) ends at once: the server then reports the client gone and the stream's
    task stops. A route without GET answers 405 as before."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return
        ended = False

        async def send_headers_only(message: Any) -> None:
            nonlocal ended
            if message["type"] == "http.response.start":
                await send(message)
            elif message["type"] == "http.response.body" and not ended:
                ended = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})

        inner = {**scope, "method": "GET"}
        try:
            await self.app(inner, receive, send_headers_only)
        finally:
            # What routing found (the metrics middleware outside reads the route template).
            for key in ("route", "endpoint", "root_path", "path_params"):
                if key in inner:
                    scope[key] = inner[key]


def _parameter_holding(request: Request, value: str) -> str:
    """The name of the query parameter (or ``etag`` for an ``If-Match`` header) whose value
    is ``value`` — the number a protobuf field could not hold — so its 400 names the field
    like every other; "" when none does (the number came in a JSON body)."""
    for name, raw in request.query_params.multi_items():
        if value in (piece.strip() for piece in raw.split(",")):
            return name
    if request.headers.get("if-match", "").removeprefix("W/").strip().strip('"') == value:
        return "etag"
    return ""


def _allowed_methods(request: Request) -> list[str]:
    """The methods some route of the app answers at the request's path, HEAD with GET
    (:class:`HeadAsGet`). Starlette's 405 named the methods of the first route matching the
    path only (``Allow: GET`` on ``/memory/{id}``, which takes PATCH and DELETE too)."""
    found = []
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
            found.append(method)
    return [*found[:1], "HEAD", *found[1:]] if "GET" in found else found


def create_app(settings: Settings, client: AutomemClient) -> FastAPI:
    """The FastAPI app. ``client`` reaches the services over gRPC. Every request gets an
    OpenTelemetry server span and a latency observation; ``GET /metrics`` serves Prometheus."""
    from automem.gateway import console  # its error answers are used by the handlers below

    app = FastAPI(
        title="automem",
        version="0.1.0",
        description="Long-term memory for AI agents. AutoMem-compatible REST routes plus /v1.",
        responses=ERROR_RESPONSES,
        # No 307 from /memory/<id>/ to /memory/<id>: a path no route matches (an id holding
        # "/", a trailing slash) is a 404 with the JSON error body, like any unknown path.
        redirect_slashes=False,
        # A query or path of percent-encoded bytes that are not UTF-8 is a 400 naming it.
        dependencies=[Depends(utf8_request_target)],
        # /docs with local assets (automem/gateway/apidocs.py), not FastAPI's CDN pages; no /redoc.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.client = client

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> Response:
        if console.is_console(request):
            # Raised before a console page ran (a query string that is not UTF-8 text,
            # deps.py ``utf8_request_target``): the console's own answer, not the REST JSON.
            return console.error_answer(request, exc.status, exc.message)
        if not exc.from_service and exc.status != 401 and not public_route(request) and (
                denied := await auth_error(request)):
            return denied
        # ``grpc_code``: the status the service answered, so a client tells a stale etag
        # (ABORTED) from a tombstone (ALREADY_EXISTS) behind one 409 (clients/python).
        extra = {"grpc_code": exc.code.name, **exc.extra} if exc.code is not None else exc.extra
        return error_response(exc.status, exc.message, **extra)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        if not console.is_console(request) and not public_route(request) and (denied := await auth_error(request)):
            return denied
        problems = []
        for err in exc.errors():
            if err.get("type") == "json_invalid":  # loc is ("body", <character offset>)
                at = err.get("loc", ("body", "?"))[-1]
                reason = (err.get("ctx") or {}).get("error", "")
                problems.append(f"body: not valid JSON (at character {at}{': ' + str(reason) if reason else ''})")
                continue
            where = ""
            for part in err.get("loc", ()):
                if part in ("body", "query", "path", "header"):
                    continue
                where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
            # ``memories[1].importance`` as the service names fields; pydantic's "Value error, "
            # is the kind of error, not part of the message.
            message = str(err.get("msg", "")).removeprefix("Value error, ")
            if err.get("type") == "extra_forbidden":  # automem/gateway/schemas.py StrictBody
                takes = body_model_fields(request.scope.get("route")) if len(err.get("loc", ())) == 2 else []
                message = "not a field of this body" + (f" (it takes {', '.join(takes)})" if takes else "") + \
                    "; nothing was done"
            problems.append(f"{where or 'body'}: {message}")
        if console.is_console(request):
            return console.error_answer(request, 400, "; ".join(problems) or "invalid request")
        return error_response(400, "; ".join(problems) or "invalid request", fields=problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if console.is_console(request):
            # A console page the router does not know, or its static file: the console's own
            # answer (the JSON 401 "missing or invalid API key" told a logged-in user their
            # key was wrong; the console sends it in a cookie, not a header).
            return console.error_answer(request, exc.status_code, str(exc.detail))
        if not public_route(request) and (denied := await auth_error(request)):
            return denied
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":  # fastapi's words
            return error_response(400, "body: cannot be read as JSON (not UTF-8 text, or not JSON)")
        response = error_response(exc.status_code, str(exc.detail))
        if exc.status_code == 405:  # RFC 9110 §15.5.6: a 405 names the methods the resource takes
            response.headers["Allow"] = ", ".join(_allowed_methods(request))
        return response

    # Handlers for specific classes run in Starlette's ExceptionMiddleware, which answers and
    # stops there; only the catch-all below is re-raised to the server (and logged by it).
    @app.exception_handler(AutomemError)
    async def _domain_error(request: Request, exc: AutomemError) -> JSONResponse:
        # A domain check in the gateway (parsing a relation type...).
        if denied := await auth_error(request):
            return denied
        return error_response(HTTP_STATUS.get(exc.code, 500), exc.message)

    @app.exception_handler(ValueError)
    async def _value_error(request: Request, exc: ValueError) -> JSONResponse:
        if isinstance(exc, UnicodeError):
            # JSON may carry lone surrogates (\ud800) that no UTF-8 text can hold.
            if denied := await auth_error(request):
                return denied
            return error_response(400, "text fields must be valid Unicode: a lone surrogate (e.g. \\ud800) "
                                        "is not allowed")
        if str(exc).startswith("Value out of range"):
            # A number that fits the JSON/query type but not the protobuf field (int32 limits).
            if denied := await auth_error(request):
                return denied
            value = str(exc).split(":")[-1].strip()
            name = _parameter_holding(request, value)
            return error_response(400, f"{name}: out of range: {value}" if name
                                  else f"a numeric parameter is out of range: {value}")
        log.exception("unhandled gateway error")
        return error_response(500, f"internal error: {type(exc).__name__}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled gateway error")
        return error_response(500, f"internal error: {type(exc).__name__}")

    from automem.common.telemetry import instrument_fastapi
    from automem.gateway import (
        apidocs,
        mcp_mount,
        metrics,
        routes_graph,
        routes_memory,
        routes_ops,
        routes_recall,
        routes_stream,
        routes_v1,
    )

    app.add_middleware(HeadAsGet)  # innermost of ours: the others see the HEAD as it came
    app.add_middleware(StreamedBodyLimit, limit=settings.max_body_bytes, unlimited=("/v1/backup:restore",),
                       content_max=settings.content_max_length)
    # Outside the body limit, so its 401 / 413 answers carry no-store too.
    app.add_middleware(NoStore, cacheable=("/console/static/", f"{apidocs.PREFIX}/"))
    metrics.install(app, settings.access_log)  # outermost of our middlewares: times 413s too
    instrument_fastapi(app, settings.otel_semconv_stability_opt_in)
    app.include_router(routes_recall.router)  # before routes_memory: /memory/by-tag must win over /memory/{id}
    app.include_router(routes_memory.router)
    app.include_router(routes_ops.router)
    app.include_router(routes_stream.router)  # /stream, /stream/status (server-sent events)
    app.include_router(routes_v1.router)  # review queue, tombstones, history, backup
    app.include_router(routes_graph.router)  # /graph/*, /entities, /entity/{slug}
    apidocs.mount(app)  # /docs: Swagger UI from local files
    console.mount(app)  # /console: the browser console (HTML, not in the schema)
    mcp_mount.mount(app, settings, client)  # streamable HTTP at /mcp, built on first use; wraps the lifespan
    _declare_limits_in_openapi(app, settings)
    return app


def _declare_limits_in_openapi(app: FastAPI, settings: Settings) -> None:
    """``/openapi.json`` carries the limits, enums and auth schemes the services enforce
    (automem/gateway/schemas.py ``declare_limits``), built once."""
    from automem.gateway.schemas import declare_limits

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = declare_limits(generate(), settings, anonymous=not settings.api_token)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

