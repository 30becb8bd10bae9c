"""Logging: one line per record on stderr, as JSON objects (python-json-logger) or as text,
with the current trace and span ids; and the access line of every request.

Format and level are settings (``AUTOMEM_LOG_FORMAT`` json|text, ``AUTOMEM_LOG_LEVEL``; the
``--log-format`` / ``--log-level`` options of every ``automem`` command override them,
automem/cli/main.py). Libraries that log every connection or request (:data:`NOISY`) are held at
WARNING unless the level is DEBUG. nats-py's errors go through the bus's own callback (one
WARNING per NATS outage, not a traceback per reconnect attempt: automem/common/bus.py
``Bus._on_error``).

Access lines (``automem.access`` logger, INFO, on unless ``AUTOMEM_ACCESS_LOG=false``): the
gateway writes one per HTTP request (automem/gateway/metrics.py) and every gRPC server one per
call (automem/common/grpc_server.py), with the fields of :func:`access`.
"""

from __future__ import annotations

import logging
import sys

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter

#: Loggers kept at WARNING below DEBUG: their INFO lines are per connection or per request.
NOISY = ("httpx", "httpcore", "uvicorn.access", "uvicorn.error", "nats", "grpc", "asyncio", "mcp", "sse_starlette",
         "opentelemetry", "urllib3", "filelock", "huggingface_hub")

FORMATS = ("json", "text")

access_log = logging.getLogger("automem.access")


class _TraceFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        record.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else ""
        record.span_id = format(ctx.span_id, "016x") if ctx.is_valid else ""
        return True


class _TextFormatter(logging.Formatter):
    """``time level logger message key=value ...`` with the record's extra fields."""

    _STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "trace_id",
                                                                          "span_id", "taskName"}

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in self._STANDARD)
        trace_id = getattr(record, "trace_id", "")
        return " ".join(part for part in (line, extra, f"trace_id={trace_id}" if trace_id else "") if part)


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``fmt`` (``json`` or ``text``). ValueError names the choices."""
    if fmt == "json":
        return JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s %(trace_id)s %(span_id)s",
                             rename_fields={"levelname": "level", "asctime": "time"})
    if fmt == "text":
        return _TextFormatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Send every log record to stderr, one line each, in ``fmt`` (:func:`formatter`), with
    trace_id/span_id; hold the :data:`NOISY` libraries at WARNING unless ``level`` is DEBUG."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(_TraceFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    quiet = logging.getLevelName(level.upper()) != logging.DEBUG
    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING if quiet else logging.NOTSET)


def access(kind: str, route: str, method: str, status: int | str, duration_s: float, principal: str,
           scope: str) -> None:
    """Write one access line at INFO (``automem.access``): ``kind`` http|grpc, ``route`` (the
    route template, or the gRPC full method), ``method`` (HTTP method; "" for gRPC),
    ``status`` (HTTP status, or the gRPC status code name), ``duration_ms`` (3 decimals),
    ``principal`` (an id, never a secret), ``scope`` (as requested; "" = the key's default)
    and the trace id (added by the handler's filter)."""
    if access_log.isEnabledFor(logging.INFO):
        access_log.info("request", extra={"kind": kind, "route": route, "method": method, "status": status,
                                          "duration_ms": round(duration_s * 1000, 3), "principal": principal,
                                          "scope": scope})
