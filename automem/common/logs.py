"""Logging: JSON lines (python-json-logger) with the current trace and span ids."""

from __future__ import annotations

import logging
import sys

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter


class _TraceFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        record.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else ""
        record.span_id = format(ctx.span_id, "016x") if ctx.is_valid else ""
        return True


def configure_logging(level: str = "INFO") -> None:
    """Send every log record to stderr as one JSON object per line, with trace_id/span_id."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s %(trace_id)s %(span_id)s",
                                       rename_fields={"levelname": "level", "asctime": "time"}))
    handler.addFilter(_TraceFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
