"""The gateway's HTTP metrics and ``GET /metrics`` (no auth, like ``/health``).

* ``http.server.request.duration`` (Prometheus: ``http_server_request_duration_seconds``)
  — histogram of request latency with ``http.request.method``, ``http.response.status_code``
  and ``http.route``: the route *template* (``/memory/{memory_id}``, never the raw path;
  ``/mcp``, ``/console/static/{path}`` for the mounted apps; unmatched paths are
  ``<unmatched>``), measured until the last body byte is sent (automem/common/metrics.py).
  A method other than the nine of RFC 9110 and RFC 5789 is recorded as ``_OTHER`` (the
  OpenTelemetry HTTP semantic conventions): any client could otherwise add a series per
  made-up method until the SDK's cardinality limit folded every new series, real routes'
  included, into one overflow series.
* ``GET /metrics`` renders the process's registry (automem/common/metrics.py: every
  metric of every target in this process, ``process_*`` / ``python_*`` included) — the same
  page the process's metrics port (``AUTOMEM_METRICS_PORT``) serves. The enrichment and
  outbox metrics come from the processes that own them (each enrich replica its own); the
  gateway no longer relays one replica's status.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import cookie_parser

from automem.common import metrics
from automem.common.logs import access
from automem.gateway import console

log = logging.getLogger(__name__)

UNMATCHED = "<unmatched>"

#: The methods ``http.request.method`` names (OpenTelemetry HTTP semantic conventions: RFC 9110's
#: and PATCH, case-sensitive); any other is ``_OTHER``.
KNOWN_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"})


def method_attribute(method: str) -> str:
    """``method`` as ``http.request.method``: itself when known, else ``_OTHER``."""
    return method if method in KNOWN_METHODS else "_OTHER"


def _route_template(scope: dict[str, Any]) -> str:
    """The matched route's template: a FastAPI route's path format; an ASGI endpoint's
    ``route_template`` (the MCP endpoint, automem/gateway/mcp_mount.py); a mounted app's
    prefix plus ``/{path}`` (Starlette's Mount sets ``root_path``); a plain Starlette route
    without path parameters (``/openapi.json``), its path; else :data:`UNMATCHED`. A HEAD is
    routed as a GET (automem/gateway/app.py ``HeadAsGet`` copies what routing found back)."""
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    if path:
        return path
    endpoint = scope.get("endpoint")
    template = getattr(endpoint, "route_template", None)
    if template:
        return template
    if endpoint is not None and scope.get("root_path"):
        return f"{scope['root_path']}/{{path}}"
    if endpoint is not None and not scope.get("path_params"):  # a plain route (/openapi.json): no parameter in it
        return scope.get("path") or UNMATCHED
    return UNMATCHED


def caller_id(headers: list[tuple[bytes, bytes]], path: str = "",
              session_key: Callable[[str], str] | None = None) -> tuple[str, str]:
    """(principal id, requested scope) of a request for its access line, from the raw
    headers, never echoing a secret: ``key:<id>`` for an API key (``am_<id>_<secret>``,
    automem/common/keys.py), ``token`` for another bearer / ``X-API-Key`` value, ``anonymous``
    without one; the scope is ``X-Automem-Scope`` ("" = the key's default).

    A console page (``path`` under ``/console``) without those headers is named by its
    session cookies (automem/gateway/console: the key ``session_key`` opens from the session
    cookie's value, "" for none, and the scope the session acts with), as the same key's REST
    requests are."""
    credential, scope, cookies = "", "", []
    for name, value in headers:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            credential = credential or value[7:].decode("latin-1").strip()
        elif name == b"x-api-key":
            credential = credential or value.decode("latin-1").strip()
        elif name == b"x-automem-scope":
            scope = value.decode("latin-1")[:200]
        elif name == b"cookie":
            cookies.append(value.decode("latin-1"))
    if not credential and cookies and (path == "/console" or path.startswith("/console/")):
        session = cookie_parser("; ".join(cookies))
        sealed = session.get(console.SESSION_COOKIE, "")
        credential = session_key(sealed) if session_key and sealed else ""
        scope = scope or session.get(console.SCOPE_COOKIE, "")[:200]
    if not credential:
        return "anonymous", scope
    parts = credential.split("_")
    if len(parts) >= 3 and parts[0] == "am" and parts[1].isalnum() and len(parts[1]) <= 32:
        return f"key:{parts[1]}", scope
    return "token", scope


def _console_key(app: Any, sealed: str) -> str:
    """The API key of the console session cookie value ``sealed`` on ``app`` ("" for none)."""
    opened = console.open_session(app, sealed)
    return opened.key if opened else ""


class MetricsMiddleware:
    """ASGI middleware: observes every HTTP request in ``http.server.request.duration`` and,
    when ``access_log``, writes its INFO access line (automem/common/logs.py :func:`access`,
    with the request's trace id via the log filter)."""

    def __init__(self, app: Any, access_log: bool = True) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            elapsed = time.perf_counter() - start
            route = _route_template(scope)
            method = method_attribute(scope.get("method", ""))
            metrics.http_server_duration.record(elapsed, {"http.request.method": method, "http.route": route,
                                                          "http.response.status_code": status})
            if self.access_log:
                access("http", route, method, status, elapsed,
                       *caller_id(scope.get("headers") or [], scope.get("path", ""),
                                  functools.partial(_console_key, scope.get("app"))))


def install(app: FastAPI, access_log: bool = True) -> None:
    """Add the latency middleware (with access lines when ``access_log``) and ``GET /metrics``
    to ``app``."""
    app.add_middleware(MetricsMiddleware, access_log=access_log)

    @app.get("/metrics", tags=["ops"], include_in_schema=False)
    async def prometheus_metrics() -> Response:
        """Prometheus text exposition of the process's registry; no auth. Rendered in a
        thread: scrape-time gauges wait for this event loop (automem/common/metrics.py)."""
        return Response(await asyncio.to_thread(metrics.render), media_type=CONTENT_TYPE_LATEST)
