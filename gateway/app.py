"""The REST gateway: AutoMem-compatible routes (../shared/AUTOMEM_API.md) plus ``/v1``.

No business logic: every route calls a service over gRPC with the caller's credentials
(``Authorization: Bearer`` / ``X-API-Key`` / ``X-Admin-Token`` / ``X-Automem-Scope``
forwarded as metadata), so the services check keys and scopes themselves. gRPC status codes
map to HTTP statuses in one place (services/common/errors.py); every response, errors
included, is JSON.
"""

from __future__ import annotations

import logging
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.common.client import AutomemClient
from services.common.errors import HTTP_STATUS
from services.common.settings import Settings

log = logging.getLogger(__name__)


class GatewayError(Exception):
    """An HTTP error with a JSON body ``{"status": "error", "error": msg, "code": status}``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def _error_response(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"status": "error", "error": message, "message": message, "code": status, **extra},
                        status_code=status)


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
    return md


async def call(method: Any, message: Any, request: Request) -> Any:
    """Call a gRPC method with the request's credentials; gRPC errors become GatewayError."""
    settings: Settings = request.app.state.settings
    try:
        return await method(message, metadata=credentials(request, settings), timeout=60)
    except grpc.aio.AioRpcError as exc:
        status = HTTP_STATUS.get(exc.code(), 500)
        if exc.code() == grpc.StatusCode.UNAVAILABLE and "failed to connect" in (exc.details() or "").lower():
            status = 503
        raise GatewayError(status, exc.details() or exc.code().name) from None


def create_app(settings: Settings, client: AutomemClient) -> FastAPI:
    """The FastAPI app. ``client`` reaches the services over gRPC. Every request gets an
    OpenTelemetry server span and a latency observation; ``GET /metrics`` serves Prometheus."""
    app = FastAPI(
        title="automem",
        version="0.1.0",
        description="Long-term memory for AI agents. AutoMem-compatible REST routes plus /v1.",
    )
    app.state.settings = settings
    app.state.client = client

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> JSONResponse:
        return _error_response(exc.status, exc.message, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
            problems.append(f"{'.'.join(loc) or 'body'}: {err.get('msg')}")
        return _error_response(400, "; ".join(problems) or "invalid request", fields=problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled gateway error")
        return _error_response(500, f"internal error: {type(exc).__name__}")

    @app.middleware("http")
    async def _limit_body(request: Request, call_next: Any) -> Any:
        length = request.headers.get("content-length")
        if length and length.isdigit() and int(length) > settings.max_body_bytes:
            return _error_response(413, f"request body exceeds the limit of {settings.max_body_bytes} bytes")
        return await call_next(request)

    from gateway import metrics, routes_memory, routes_ops, routes_recall
    from services.common.telemetry import instrument_fastapi

    metrics.install(app)  # outermost of our middlewares: times 413s too
    instrument_fastapi(app)
    routes_memory.install(app)
    routes_recall.install(app)
    routes_ops.install(app)

    # --- MCP: streamable HTTP at /mcp (gateway/mcp_server.py; wraps the app's lifespan) ---
    from gateway import mcp_server

    mcp_server.mount(app, settings, client)
    # --- end MCP ---
    return app

