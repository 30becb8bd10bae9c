"""Metrics: one OpenTelemetry MeterProvider per process, exported in the Prometheus text
format on the process's metrics port (``AUTOMEM_METRICS_PORT``) and, in the gateway, at
``GET /metrics`` too.

:func:`configure_metrics` (run by the internal ``telemetry`` module, which every target
depends on) installs the MeterProvider with a ``PrometheusMetricReader``
(opentelemetry-exporter-prometheus) on prometheus_client's process registry, next to its
``process_*`` / ``python_*`` collectors: one registry per process. :func:`serve_metrics`
serves that registry on a port (prometheus_client's own HTTP server, in a thread).

Instrument names follow the OpenTelemetry semantic conventions where one exists; the
Prometheus exporter turns ``.`` into ``_`` and appends the unit (``_seconds``) and
``_total`` for counters. Every instrument of automem is defined here (one table, listed
in docs/observability.md):

* ``rpc.server.call.duration`` (s; ``rpc.system.name``, ``rpc.method``,
  ``rpc.response.status_code``) — each gRPC call a service answers
  (automem/common/grpc_server.py);
* ``http.server.request.duration`` (s; ``http.request.method``, ``http.route``,
  ``http.response.status_code``) — each REST request of the gateway
  (automem/gateway/metrics.py);
* ``db.client.operation.duration`` (s; ``db.system.name`` = ``falkordb`` | ``qdrant``,
  ``db.operation.name``, ``db.namespace`` / ``db.collection.name``, ``error.type`` on
  failure) — each graph and vector store call (automem/common/telemetry.py);
* ``messaging.client.operation.duration`` (s; ``messaging.system`` = ``nats``,
  ``messaging.operation.name`` = ``publish``, ``messaging.destination.name``,
  ``error.type``) — each event publish (automem/common/bus.py);
* ``messaging.process.duration`` (s) and ``messaging.client.consumed.messages`` — each
  enrichment batch and its messages (``messaging.consumer.group.name``; automem/enrich/consumer.py);
* ``automem.enrichment.processed`` / ``.failures`` / ``.dead_lettered`` /
  ``.redeliveries`` (counters) and ``automem.enrichment.queue_depth`` (gauge: the durable
  consumer's undelivered plus unacknowledged messages, the consumer lag);
* ``automem.outbox.backlog`` (gauge: events waiting in the publish outbox);
* ``automem.enrichment.up`` (gauge: 1 while the process's consumer loop runs and its fetches work);
* ``automem.sync.memories`` / ``automem.sync.vectors`` (gauges: current memories and vector
  points, GetSyncStatus's count check; the consolidate process, vectors enabled — their
  difference is the graph-vector drift);
* ``gen_ai.client.operation.duration`` (s; ``gen_ai.operation.name`` = ``embeddings``,
  ``gen_ai.request.model``) and ``automem.embedding.batch.size`` — each embedding call
  (automem/common/embedding.py via telemetry's ``traced_methods``).

Gauges that need a store call (queue depth, outbox backlog) are read at scrape time:
:class:`_AsyncGauge` runs the registered coroutines on their event loops from the scrape
thread — every source of every such gauge at once, so a scrape waits at most
:data:`GAUGE_TIMEOUT` however many sources a stalled store holds up; a source that does
not answer in that time is left out of that scrape.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from automem.common.errors import ListenError
from automem.common.settings import Settings

log = logging.getLogger(__name__)

#: Instrumentation scope of automem's instruments.
METER_NAME = "automem"
_meter = metrics.get_meter(METER_NAME)

#: Bucket bounds of the duration histograms, seconds (the semantic conventions' advice for
#: ``http.server.request.duration`` and ``rpc.server.call.duration``, plus 1 ms and 2.5 ms
#: for the store calls).
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                    10.0)
#: Bucket bounds of the batch-size histograms (texts per embedding call).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: Longest wait for the scrape-time gauge sources of one scrape (seconds; they are read
#: concurrently, :func:`_read_sources`).
GAUGE_TIMEOUT = 2.0
#: Seconds the values read for the other gauges of a scrape wait for their callbacks (which
#: the SDK calls one after another, right after the first one).
BATCH_SECONDS = 1.0


def _histogram(name: str, unit: str, description: str, buckets: tuple[float, ...] = DURATION_BUCKETS) -> Any:
    return _meter.create_histogram(name, unit=unit, description=description,
                                   explicit_bucket_boundaries_advisory=buckets)


rpc_server_duration = _histogram("rpc.server.call.duration", "s", "Duration of the gRPC calls this process answered")
http_server_duration = _histogram("http.server.request.duration", "s", "Duration of the gateway's HTTP requests")
db_client_duration = _histogram("db.client.operation.duration", "s",
                                "Duration of graph (FalkorDB) and vector store (Qdrant) calls")
messaging_client_duration = _histogram("messaging.client.operation.duration", "s",
                                       "Duration of NATS JetStream publishes (until the stream acknowledged)")
messaging_process_duration = _histogram("messaging.process.duration", "s",
                                        "Duration of processing one fetched batch of enrichment messages")
consumed_messages = _meter.create_counter("messaging.client.consumed.messages", unit="{message}",
                                          description="Messages delivered to the enrichment consumer")
embedding_duration = _histogram("gen_ai.client.operation.duration", "s", "Duration of embedding calls")
embedding_batch_size = _histogram("automem.embedding.batch.size", "{text}", "Texts per embedding call",
                                  BATCH_BUCKETS)
enrichment_processed = _meter.create_counter("automem.enrichment.processed", unit="{message}",
                                             description="Enrichment messages processed and acknowledged")
enrichment_failures = _meter.create_counter("automem.enrichment.failures", unit="{message}",
                                            description="Failed enrichment attempts (retried or parked)")
enrichment_dead_lettered = _meter.create_counter("automem.enrichment.dead_lettered", unit="{message}",
                                                 description="Enrichment messages parked on the dead-letter subject")
enrichment_redeliveries = _meter.create_counter("automem.enrichment.redeliveries", unit="{message}",
                                                description="Enrichment messages delivered more than once")


class _AsyncGauge:
    """An observable gauge whose values come from coroutines (a store call each), read at
    scrape time. Sources are registered with :meth:`watch` from inside their event loop."""

    def __init__(self, name: str, unit: str, description: str) -> None:
        self._sources: dict[int, tuple[asyncio.AbstractEventLoop, Callable[[], Awaitable[float]],
                                       dict[str, str]]] = {}
        self._lock = threading.Lock()
        with _batch_lock:
            _gauges.append(self)
        _meter.create_observable_gauge(name, callbacks=[self._observe], unit=unit, description=description)

    def watch(self, read: Callable[[], Awaitable[float]], attributes: Mapping[str, str]) -> Callable[[], None]:
        """Report ``await read()`` with ``attributes`` on every scrape until the returned
        function is called. Must be called inside the running loop ``read`` belongs to."""
        loop = asyncio.get_running_loop()
        key = id(read)
        with self._lock:
            self._sources[key] = (loop, read, dict(attributes))

        def unwatch() -> None:
            with self._lock:
                self._sources.pop(key, None)

        return unwatch

    def sources(self) -> list[tuple[asyncio.AbstractEventLoop, Callable[[], Awaitable[float]], dict[str, str]]]:
        """The registered (loop, read, attributes) triples, a copy."""
        with self._lock:
            return list(self._sources.values())

    def _observe(self, options: CallbackOptions) -> Iterator[Observation]:
        """This gauge's observations of the current scrape: from the values read for it with
        every other gauge's when the first gauge of the scrape was observed (within
        :data:`BATCH_SECONDS`), else from a new concurrent read of all sources."""
        with _batch_lock:
            ready = _batch.pop(id(self), None)
            if ready is None or time.monotonic() - ready[0] > BATCH_SECONDS:
                read = _read_sources(list(_gauges))
                ready = read.pop(id(self), (0.0, []))
                _batch.clear()
                _batch.update(read)
        yield from ready[1]


#: Every :class:`_AsyncGauge`, and the observations read for those whose callback has not
#: run yet in the current scrape (id of the gauge -> (monotonic time read, observations)).
_gauges: list[_AsyncGauge] = []
_batch: dict[int, tuple[float, list[Observation]]] = {}
_batch_lock = threading.Lock()


def _read_sources(gauges: list[_AsyncGauge]) -> dict[int, tuple[float, list[Observation]]]:
    """Read every source of ``gauges`` concurrently, each on its own event loop, waiting at
    most :data:`GAUGE_TIMEOUT` for all of them together; returns id of the gauge ->
    (monotonic time, observations). A source that fails or is late is left out (and its
    read cancelled); sources of a closed loop, or of the calling thread's own loop (a scrape
    there cannot wait for it), are skipped."""
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:
        here = None
    started: list[tuple[int, concurrent.futures.Future, dict[str, str]]] = []
    for gauge in gauges:
        for loop, read, attributes in gauge.sources():
            if loop.is_closed() or loop is here:
                continue
            try:
                started.append((id(gauge), asyncio.run_coroutine_threadsafe(read(), loop), attributes))
            except RuntimeError:  # the loop closed meanwhile
                continue
    concurrent.futures.wait([future for _, future, _ in started], timeout=GAUGE_TIMEOUT)
    now = time.monotonic()
    out: dict[int, tuple[float, list[Observation]]] = {id(gauge): (now, []) for gauge in gauges}
    for key, future, attributes in started:
        if not future.done() or future.cancelled():
            future.cancel()
            log.debug("gauge source failed", extra={"attributes": attributes, "error": "no answer in time"})
            continue
        try:
            value = future.result()
        except Exception as exc:  # noqa: BLE001 - a store that does not answer: no sample
            log.debug("gauge source failed", extra={"attributes": attributes, "error": repr(exc)})
            continue
        out[key][1].append(Observation(value, attributes))
    return out


enrichment_queue_depth = _AsyncGauge("automem.enrichment.queue_depth", "{message}",
                                     "Enrichment messages not yet delivered plus delivered but unacknowledged "
                                     "(consumer lag; the same for every replica of one durable consumer)")
enrichment_up = _AsyncGauge("automem.enrichment.up", "",
                            "1 while this process's enrichment consumer loop runs and fetches, 0 otherwise")
sync_memories = _AsyncGauge("automem.sync.memories", "{memory}",
                            "Current memories (GetSyncStatus's count check, from the consolidate process)")
sync_vectors = _AsyncGauge("automem.sync.vectors", "{point}",
                           "Vector points (GetSyncStatus's count check, from the consolidate process); "
                           "memories minus points is the graph-vector drift")
outbox_backlog = _AsyncGauge("automem.outbox.backlog", "{event}",
                             "Events waiting in the publish outbox (one list per graph, shared by all processes)")


class _State:
    def __init__(self) -> None:
        self.provider: Any = None
        self.servers: dict[tuple[str, int], list[Any]] = {}  # (host, port) -> [httpd, thread, users]


_state = _State()
_lock = threading.Lock()


def configure_metrics(settings: Settings) -> None:
    """Install the process's MeterProvider with the Prometheus reader (once; later calls
    keep it). ``settings.otel_service_name`` names the resource (``target_info``). A
    MeterProvider of the SDK already installed (``opentelemetry-instrument``) is kept; its
    metrics then go where its readers send them."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    with _lock:
        if _state.provider is not None:
            return
        current = metrics.get_meter_provider()
        if isinstance(current, MeterProvider):
            _state.provider = current
            return
        reader = PrometheusMetricReader(scope_info_enabled=False)
        provider = MeterProvider(resource=Resource.create({SERVICE_NAME: settings.otel_service_name}),
                                 metric_readers=[reader])
        metrics.set_meter_provider(provider)
        _state.provider = provider


def render() -> bytes:
    """The process registry in the Prometheus text format (call it off the event loop:
    scrape-time gauges wait for it)."""
    from prometheus_client import REGISTRY, generate_latest

    return generate_latest(REGISTRY)


def serve_metrics(host: str, port: int) -> Callable[[], None] | None:
    """Serve the process registry at ``http://host:port/metrics`` (any path answers; one
    server per address, shared by the runners of one process). Returns the function that
    stops it (after its last user), or None when ``port`` is 0 (off).

    Raises:
        ListenError (an OSError): the port cannot be bound (the message names ``AUTOMEM_METRICS_PORT``).
    """
    from prometheus_client import REGISTRY, start_http_server

    if port == 0:
        return None
    key = (host, port)
    with _lock:
        entry = _state.servers.get(key)
        if entry is None:
            try:
                httpd, thread = start_http_server(port, addr=host, registry=REGISTRY)
            except OSError as exc:
                raise ListenError(f"AUTOMEM_METRICS_PORT: cannot serve metrics on {host}:{port}: {exc}") from None
            entry = _state.servers[key] = [httpd, thread, 0]
            log.info("metrics listening", extra={"host": host, "port": port})
        entry[2] += 1

    def stop() -> None:
        with _lock:
            current = _state.servers.get(key)
            if current is None:
                return
            current[2] -= 1
            if current[2] > 0:
                return
            del _state.servers[key]
        current[0].shutdown()
        current[0].server_close()

    return stop
