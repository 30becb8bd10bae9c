"""Tracing and metrics against the real running service (NATS, FalkorDB, qdrant-edge).

Spans go to an ``InMemorySpanExporter`` attached for the test only (``traced`` fixture);
relationships are checked by span and trace ids, not by names alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest_asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from automem.common.logs import _TraceFilter
from automem.common.settings import Settings
from automem.common.telemetry import configure_tracing, detach_exporter
from tests.conftest import RunningService, eventually, start_service

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN_ID = "00f067aa0ba902b7"


@pytest_asyncio.fixture(loop_scope="session")
async def traced(settings: Settings):
    """The whole service with an in-memory span exporter attached (detached afterwards, so
    other tests run with non-recording spans)."""
    exporter = InMemorySpanExporter()
    configure_tracing(settings, exporter=exporter)
    running = await start_service(settings)
    try:
        exporter.clear()
        yield running, exporter
    finally:
        await running.runner.stop()
        detach_exporter(exporter)


def _in_trace(exporter: InMemorySpanExporter, trace_id: int) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]


def _one(spans: Sequence[ReadableSpan], kind: SpanKind, name: str, parent: ReadableSpan | None = None) -> ReadableSpan:
    found = [s for s in spans if s.kind == kind and s.name == name
             and (parent is None or (s.parent is not None and s.parent.span_id == parent.context.span_id))]
    assert len(found) == 1, f"expected one {kind.name} span {name!r} under {parent.name if parent else '-'}: " \
                            f"{[(s.name, s.kind.name) for s in spans]}"
    return found[0]


def _children(spans: Sequence[ReadableSpan], parent: ReadableSpan, name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name and s.parent is not None
            and s.parent.span_id == parent.context.span_id]


async def test_rest_store_is_one_trace_through_grpc_nats_and_enrichment(traced: tuple[RunningService, InMemorySpanExporter]):
    service, exporter = traced
    async with service.http(traceparent=f"00-{TRACE_ID}-{CALLER_SPAN_ID}-01") as http:
        response = await http.post("/memory", json={"content": "We chose Postgres for the ledger", "tags": ["db"]})
    assert response.status_code == 201
    memory_id = response.json()["memory_id"]
    trace_id = int(TRACE_ID, 16)

    async def enriched() -> list[ReadableSpan] | None:
        spans = _in_trace(exporter, trace_id)
        return spans if any(s.kind == SpanKind.CONSUMER for s in spans) else None

    spans = await eventually(enriched)
    assert {s.resource.attributes["service.name"] for s in spans} == {"automem"}

    gateway = _one(spans, SpanKind.SERVER, "POST /memory")
    assert gateway.parent is not None and gateway.parent.span_id == int(CALLER_SPAN_ID, 16)  # continues the caller
    assert gateway.parent.is_remote
    assert gateway.attributes["http.route"] == "/memory"
    client = _one(spans, SpanKind.CLIENT, "/automem.v1.IngestService/CreateMemory", parent=gateway)
    server = _one(spans, SpanKind.SERVER, "/automem.v1.IngestService/CreateMemory", parent=client)
    assert server.attributes["rpc.service"] == "automem.v1.IngestService"
    assert server.attributes["rpc.method"] == "CreateMemory"

    writes = _children(spans, server, "graph.query")
    assert writes and all(s.kind == SpanKind.CLIENT and s.attributes["db.system"] == "falkordb" for s in writes)
    assert any(s.attributes["db.operation.name"] in ("CREATE", "UNWIND") and "CREATE (m:Memory)"
               in s.attributes["db.query.text"] for s in writes)
    assert all(s.attributes["db.namespace"] == service.settings.graph_name for s in writes)

    subject = f"{service.settings.subject_prefix}.memory.created"
    publish = _one(spans, SpanKind.PRODUCER, f"publish {subject}", parent=server)
    assert publish.attributes["messaging.system"] == "nats"
    assert publish.attributes["messaging.destination.name"] == subject

    consumer = _one(spans, SpanKind.CONSUMER, f"process {subject}", parent=publish)
    assert consumer.attributes["automem.memory_id"] == memory_id
    assert consumer.attributes["messaging.message.id"] == publish.attributes["messaging.message.id"]
    assert consumer.status.is_ok
    embed = _children(spans, consumer, "embedding.embed")
    assert len(embed) == 1 and embed[0].attributes["automem.embedding.texts"] == 1
    upsert = _children(spans, consumer, "vectors.upsert")
    assert len(upsert) == 1 and upsert[0].attributes["db.system"] == "qdrant"
    assert upsert[0].attributes["db.collection.name"] == service.settings.collection_name
    assert _children(spans, consumer, "graph.query")  # the embedding status write
    # No part of the enrichment of this memory ran in another trace.
    assert {s.context.trace_id for s in exporter.get_finished_spans()
            if s.attributes.get("automem.memory_id") == memory_id} == {trace_id}
    # Timing is causal: the enrichment starts after the publish that caused it.
    assert consumer.start_time >= publish.start_time


async def test_recall_trace_reaches_graph_and_vector_store(traced: tuple[RunningService, InMemorySpanExporter]):
    service, exporter = traced
    async with service.http() as http:
        stored = await http.post("/memory", json={"content": "Deploys go out on Tuesdays", "tags": ["ops"]})
        assert stored.status_code == 201
        await eventually(lambda: _processed(service))
        exporter.clear()
        response = await http.get("/recall", params={"query": "when do deploys go out"})
    assert response.status_code == 200
    gateways = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER and s.name == "GET /recall"]
    assert len(gateways) == 1
    spans = _in_trace(exporter, gateways[0].context.trace_id)
    client = _one(spans, SpanKind.CLIENT, "/automem.v1.RecallService/SearchMemories", parent=gateways[0])
    server = _one(spans, SpanKind.SERVER, "/automem.v1.RecallService/SearchMemories", parent=client)
    reads = _children(spans, server, "graph.ro_query")
    assert reads and all(s.attributes["db.system"] == "falkordb" for s in reads)
    search = _children(spans, server, "vectors.search")
    assert len(search) == 1 and search[0].kind == SpanKind.CLIENT
    assert len(_children(spans, server, "embedding.embed")) == 1
    assert gateways[0].parent is None  # no traceparent sent: the gateway starts the trace


async def _processed(service: RunningService) -> bool:
    consumer = service.ctx.enrich_consumer
    return consumer.counters.processed >= 1 and await consumer.queue_depth() == 0


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(_TraceFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_logs_inside_a_request_and_its_enrichment_carry_the_trace_id(
        traced: tuple[RunningService, InMemorySpanExporter]):
    service, exporter = traced
    capture = _Capture()
    root, access = logging.getLogger(), logging.getLogger("automem.access")
    consumer = logging.getLogger("automem.enrich.consumer")
    old_level, old_consumer_level = access.level, consumer.level
    root.addHandler(capture)
    access.setLevel(logging.INFO)
    consumer.setLevel(logging.DEBUG)  # enrichment logs each batch at DEBUG
    try:
        async with service.http(traceparent=f"00-{TRACE_ID}-{CALLER_SPAN_ID}-01") as http:
            response = await http.post("/memory", json={"content": "Prefer small PRs"})
        assert response.status_code == 201

        def lines() -> tuple[list[logging.LogRecord], list[logging.LogRecord]]:
            return ([r for r in capture.records if r.name == "automem.access" and r.kind == "http"
                     and r.route == "/memory"],
                    [r for r in capture.records if r.name == "automem.enrich.consumer"
                     and r.getMessage() == "enrichment batch"])

        async def both_logged() -> bool:
            # The access line is written once the response is sent, possibly after enrichment.
            return all(lines())

        await eventually(both_logged)
        request_lines, warnings = lines()
    finally:
        root.removeHandler(capture)
        access.setLevel(old_level)
        consumer.setLevel(old_consumer_level)
    assert len(request_lines) == 1
    assert request_lines[0].trace_id == TRACE_ID
    gateway = _one(_in_trace(exporter, int(TRACE_ID, 16)), SpanKind.SERVER, "POST /memory")
    assert request_lines[0].span_id == format(gateway.context.span_id, "016x")
    # The asynchronous enrichment, in another task after a NATS hop, logs in the same trace.
    assert warnings[0].trace_id == TRACE_ID


def _samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def _value(samples: dict[str, list], name: str, **labels: str) -> float:
    matches = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matches) == 1, f"{name}{labels}: {matches}"
    return matches[0]


async def test_metrics_expose_latency_histogram_and_enrichment_queue(traced: tuple[RunningService, InMemorySpanExporter]):
    service, exporter = traced
    async with service.http() as http:
        stored = await http.post("/memory", json={"content": "The staging DB is Postgres 16"})
        memory_id = stored.json()["memory_id"]
        assert (await http.get(f"/memory/{memory_id}")).status_code == 200
        assert (await http.get("/no/such/route")).status_code == 404
        await eventually(lambda: _processed(service))
        response = await http.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        samples = _samples(response.text)

        hist = "automem_http_request_duration_seconds"
        assert _value(samples, f"{hist}_count", route="/memory", method="POST", status="201") == 1
        assert 0 < _value(samples, f"{hist}_sum", route="/memory", method="POST", status="201") < 30
        assert _value(samples, f"{hist}_bucket", route="/memory", method="POST", status="201", le="+Inf") == 1
        # Route templates, never raw paths (bounded label values).
        assert _value(samples, f"{hist}_count", route="/memory/{memory_id}", method="GET", status="200") == 1
        assert _value(samples, f"{hist}_count", route="<unmatched>", method="GET", status="404") == 1
        assert not any(memory_id in str(s.labels) for s in samples[f"{hist}_count"])

        assert _value(samples, "automem_enrichment_up") == 1
        assert _value(samples, "automem_enrichment_queue_depth") == 0
        assert _value(samples, "automem_outbox_backlog") == 0
        assert _value(samples, "automem_enrichment_processed_total") >= 1
        assert _value(samples, "automem_enrichment_failures_total") == 0
        assert _value(samples, "automem_sync_up") == 1
        assert _value(samples, "automem_sync_memories") == _value(samples, "automem_sync_vectors") >= 1
        assert "process_cpu_seconds_total" in samples or "python_info" in samples
        # A scrape is not traced, nor is the status call it makes.
        assert not [s for s in exporter.get_finished_spans()
                    if s.name.startswith("GET /metrics") or "GetEnrichmentStatus" in s.name
                    or "GetSyncStatus" in s.name]

        # With the consumer stopped, a store waits in the queue and the gauge shows it.
        consumer = service.ctx.enrich_consumer
        consumer.stop()
        task = next(t for t in service.ctx.tasks if t.get_name() == "enrich-consumer")
        await asyncio.wait_for(task, timeout=10)
        assert (await http.post("/memory", json={"content": "Queued while enrichment is paused"})).status_code == 201

        async def queued() -> bool:
            return _value(_samples((await http.get("/metrics")).text), "automem_enrichment_queue_depth") == 1

        await eventually(queued)


async def test_without_an_exporter_spans_are_not_recorded_but_ids_propagate(settings: Settings):
    provider = configure_tracing(settings)  # what every service start does; no exporter attached
    tracer = provider.get_tracer("test")
    parent = trace.SpanContext(int(TRACE_ID, 16), int(CALLER_SPAN_ID, 16), is_remote=True,
                               trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
    with tracer.start_as_current_span("work", context=trace.set_span_in_context(trace.NonRecordingSpan(parent))) as span:
        assert not span.is_recording()
        assert span.get_span_context().trace_id == int(TRACE_ID, 16)
        assert span.get_span_context().is_valid
    exporter = InMemorySpanExporter()
    configure_tracing(settings, exporter=exporter)
    try:
        with tracer.start_as_current_span("recorded") as span:
            assert span.is_recording()
    finally:
        detach_exporter(exporter)
    assert [s.name for s in exporter.get_finished_spans()] == ["recorded"]
