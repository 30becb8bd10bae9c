"""Prometheus metrics of the gateway at ``GET /metrics`` (no auth, like ``/health``).

* ``automem_http_request_duration_seconds{route,method,status}`` — histogram of request
  latency by route *template* (``/memory/{memory_id}``, never the raw path; unmatched paths
  are ``<unmatched>``), measured until the last body byte is sent.
* ``automem_enrichment_queue_depth`` — enrichment messages not yet delivered plus delivered
  but unacknowledged (the consumer lag); ``automem_outbox_backlog`` — events waiting in the
  publish outbox; ``automem_enrichment_processed_total`` / ``_failures_total`` /
  ``_dead_lettered_total`` — the consumer's counters since it started;
  ``automem_enrichment_up`` — 1 when the scrape could read them. All read at scrape time
  from ``EnrichService.GetEnrichmentStatus`` (over gRPC, so it works in-process and when
  the enrich target runs elsewhere); absent (``up`` 0) when that call fails.
* ``automem_sync_memories`` / ``automem_sync_vectors`` — memories in the graph that should
  have a vector point, and the points in the vector store (``ConsolidateService.GetSyncStatus``:
  two counts, cheap); ``automem_sync_up`` — 1 when they could be read and vectors are on. The
  chart's ``AutomemGraphVectorDrift`` alert compares them while the enrichment queue is empty
  (deploy/helm/automem/templates/prometheusrule.yaml).
* the standard ``process_*`` / ``python_*`` collectors.

Each app has its own registry, so several apps in one process (tests) never clash.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from automem.common.logs import access
from automem.common.telemetry import unsampled
from automem.v1 import consolidate_service_pb2, enrich_service_pb2

log = logging.getLogger(__name__)

UNMATCHED = "<unmatched>"
#: Longest wait for the enrichment status during a scrape (seconds).
STATUS_TIMEOUT = 2.0


class _EnrichmentCollector(Collector):
    """Exposes the last GetEnrichmentStatus answer (set just before each scrape)."""

    def __init__(self) -> None:
        self.status: enrich_service_pb2.GetEnrichmentStatusResponse | None = None

    def collect(self) -> Iterator[Metric]:
        status = self.status
        yield GaugeMetricFamily("automem_enrichment_up", "1 when the enrichment status could be read",
                                value=1 if status is not None else 0)
        if status is None:
            return
        yield GaugeMetricFamily("automem_enrichment_queue_depth",
                                "Enrichment messages undelivered or unacknowledged (consumer lag)",
                                value=status.queue_depth)
        yield GaugeMetricFamily("automem_outbox_backlog", "Events waiting in the publish outbox",
                                value=status.outbox_backlog)
        yield CounterMetricFamily("automem_enrichment_processed", "Enrichment messages processed",
                                  value=status.processed)
        yield CounterMetricFamily("automem_enrichment_failures", "Enrichment message failures (retried or parked)",
                                  value=status.failed)
        yield CounterMetricFamily("automem_enrichment_dead_lettered",
                                  "Enrichment messages parked on the dead-letter subject", value=status.dead_lettered)


class _SyncCollector(Collector):
    """Exposes the last GetSyncStatus answer (set just before each scrape)."""

    def __init__(self) -> None:
        self.status: consolidate_service_pb2.GetSyncStatusResponse | None = None

    def collect(self) -> Iterator[Metric]:
        status = self.status
        readable = status is not None and status.sync_status != "vectors_disabled"
        yield GaugeMetricFamily("automem_sync_up", "1 when the graph and vector counts could be read",
                                value=1 if readable else 0)
        if not readable:
            return
        yield GaugeMetricFamily("automem_sync_memories", "Memories in the graph that should have a vector point",
                                value=status.memory_count)
        yield GaugeMetricFamily("automem_sync_vectors", "Points in the vector store", value=status.vector_count)


class GatewayMetrics:
    """The gateway's metrics registry and instruments."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.request_duration = Histogram(
            "automem_http_request_duration_seconds", "HTTP request latency by route template",
            ("route", "method", "status"), registry=self.registry)
        self.enrichment = _EnrichmentCollector()
        self.registry.register(self.enrichment)
        self.sync = _SyncCollector()
        self.registry.register(self.sync)
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


def _route_template(scope: dict[str, Any]) -> str:
    route = scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return path or UNMATCHED


def caller_id(headers: list[tuple[bytes, bytes]]) -> tuple[str, str]:
    """(principal id, requested scope) of a request for its access line, from the raw
    headers, never echoing a secret: ``key:<id>`` for an API key (``am_<id>_<secret>``,
    automem/common/keys.py), ``token`` for another bearer / ``X-API-Key`` value, ``anonymous``
    without one; the scope is ``X-Automem-Scope`` ("" = the key's default)."""
    credential, scope = "", ""
    for name, value in headers:
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            credential = credential or value[7:].decode("latin-1").strip()
        elif name == b"x-api-key":
            credential = credential or value.decode("latin-1").strip()
        elif name == b"x-automem-scope":
            scope = value.decode("latin-1")[:200]
    if not credential:
        return "anonymous", scope
    parts = credential.split("_")
    if len(parts) >= 3 and parts[0] == "am" and parts[1].isalnum() and len(parts[1]) <= 32:
        return f"key:{parts[1]}", scope
    return "token", scope


class MetricsMiddleware:
    """ASGI middleware: observes every HTTP request in the latency histogram and, when
    ``access_log``, writes its INFO access line (automem/common/logs.py :func:`access`, with
    the request's trace id via the log filter)."""

    def __init__(self, app: Any, metrics: GatewayMetrics, access_log: bool = True) -> None:
        self.app = app
        self.metrics = metrics
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
            method = scope.get("method", "")
            self.metrics.request_duration.labels(route, method, str(status)).observe(elapsed)
            if self.access_log:
                access("http", route, method, status, elapsed, *caller_id(scope.get("headers") or []))


async def _status(call: Callable[[], Awaitable[Any]], what: str) -> Any:
    """The answer of one status RPC (``call()`` starts it) for a scrape, untraced; None
    (logged at DEBUG) when it fails."""
    try:
        with unsampled():
            return await call()
    except grpc.aio.AioRpcError as exc:
        log.debug("%s status unavailable for /metrics", what, extra={"error": exc.details()})
        return None


def install(app: FastAPI, access_log: bool = True) -> GatewayMetrics:
    """Add the latency middleware (with access lines when ``access_log``) and ``GET /metrics``
    to ``app``; returns the metrics."""
    metrics = GatewayMetrics()
    app.state.metrics = metrics
    app.add_middleware(MetricsMiddleware, metrics=metrics, access_log=access_log)

    @app.get("/metrics", tags=["ops"], include_in_schema=False)
    async def prometheus_metrics(request: Request) -> Response:
        """Prometheus text exposition; no auth. Reads the enrichment and sync status first."""
        client = request.app.state.client
        metrics.enrichment.status, metrics.sync.status = await asyncio.gather(
            _status(lambda: client.enrich.GetEnrichmentStatus(enrich_service_pb2.GetEnrichmentStatusRequest(),
                                                              timeout=STATUS_TIMEOUT), "enrichment"),
            _status(lambda: client.consolidate.GetSyncStatus(consolidate_service_pb2.GetSyncStatusRequest(),
                                                             timeout=STATUS_TIMEOUT), "sync"))
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return metrics
