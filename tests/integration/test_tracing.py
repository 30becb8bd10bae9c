"""Tracing against the real running service (NATS, FalkorDB, qdrant-edge).

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
    # The stable HTTP conventions, not the old names.
    assert gateway.attributes["http.route"] == "/memory"
    assert gateway.attributes["http.request.method"] == "POST"
    assert gateway.attributes["http.response.status_code"] == 201
    assert "http.method" not in gateway.attributes and "http.status_code" not in gateway.attributes
    method = "automem.v1.IngestService/CreateMemory"
    client = _one(spans, SpanKind.CLIENT, method, parent=gateway)
    server = _one(spans, SpanKind.SERVER, method, parent=client)
    for span in (client, server):  # the current RPC conventions: fully qualified rpc.method, no rpc.service
        assert span.attributes["rpc.system.name"] == "grpc"
        assert span.attributes["rpc.method"] == method
        assert "rpc.service" not in span.attributes and "rpc.system" not in span.attributes
    assert server.attributes["rpc.response.status_code"] == "OK"
    assert client.attributes["rpc.response.status_code"] == "OK"

    graph = service.settings.graph_name
    writes = _children(spans, server, f"GRAPH.QUERY {graph}")
    assert writes and all(s.kind == SpanKind.CLIENT and s.attributes["db.system.name"] == "falkordb" for s in writes)
    assert all(s.attributes["db.operation.name"] == "GRAPH.QUERY" and "db.system" not in s.attributes for s in writes)
    assert any("CREATE (m:Memory)" in s.attributes["db.query.text"] for s in writes)
    assert all(s.attributes["db.namespace"] == graph for s in writes)

    subject = f"{service.settings.subject_prefix}.memory.created"
    publish = _one(spans, SpanKind.PRODUCER, f"publish {subject}", parent=server)
    assert publish.attributes["messaging.system"] == "nats"
    assert publish.attributes["messaging.destination.name"] == subject
    assert publish.attributes["messaging.operation.type"] == "send"
    assert publish.attributes["messaging.operation.name"] == "publish"

    # A batch of one message: its process span is the publish's child, and links to it.
    consumer = _one(spans, SpanKind.CONSUMER, f"process {subject}", parent=publish)
    assert consumer.attributes["messaging.batch.message_count"] == 1
    assert consumer.attributes["messaging.consumer.group.name"] == "enrich"
    assert consumer.attributes["messaging.operation.type"] == "process"
    assert consumer.attributes["messaging.message.id"] == publish.attributes["messaging.message.id"]
    assert [link.context.span_id for link in consumer.links] == [publish.context.span_id]
    assert consumer.links[0].attributes["messaging.message.id"] == publish.attributes["messaging.message.id"]
    assert consumer.status.is_ok
    model = service.ctx.embedder.name
    embed = _children(spans, consumer, f"embeddings {model}")
    assert len(embed) == 1 and embed[0].attributes["automem.embedding.texts"] == 1
    assert embed[0].attributes["gen_ai.operation.name"] == "embeddings"
    assert embed[0].attributes["gen_ai.request.model"] == model
    collection = service.settings.collection_name
    upsert = _children(spans, consumer, f"upsert {collection}")
    assert len(upsert) == 1 and upsert[0].attributes["db.system.name"] == "qdrant"
    assert upsert[0].attributes["db.collection.name"] == collection
    assert upsert[0].attributes["db.operation.name"] == "upsert"
    assert _children(spans, consumer, f"GRAPH.QUERY {graph}")  # the embedding status write
    assert memory_id
    # Timing is causal: the enrichment starts after the publish that caused it.
    assert consumer.start_time >= publish.start_time


async def test_a_batch_of_stores_is_enriched_in_one_span_linked_to_each_producer(
        traced: tuple[RunningService, InMemorySpanExporter]):
    """Several messages in one fetched batch: one CONSUMER span in a trace of its own, with a
    link to each store's PRODUCER span (the messaging conventions for batch processing),
    instead of the batch's work joining every store's trace."""
    service, exporter = traced
    consumer = service.ctx.enrich_consumer
    consumer.stop()
    await asyncio.wait_for(service.ctx.enrich_task, timeout=10)
    callers = [f"{n:032x}" for n in range(0xA1, 0xA4)]
    subject = f"{service.settings.subject_prefix}.memory.created"
    async with service.http() as http:
        for n, trace_hex in enumerate(callers):
            response = await http.post("/memory", json={"content": f"Batch memory number {n}"},
                                       headers={"traceparent": f"00-{trace_hex}-{CALLER_SPAN_ID}-01"})
            assert response.status_code == 201
    publishes = [_one(_in_trace(exporter, int(t, 16)), SpanKind.PRODUCER, f"publish {subject}") for t in callers]

    msgs = await consumer.sub.fetch(len(callers), timeout=5)
    assert len(msgs) == len(callers)
    await consumer.process_batch(msgs)

    batch = _one(exporter.get_finished_spans(), SpanKind.CONSUMER, f"process {subject}")
    assert batch.parent is None  # a trace of its own...
    assert batch.context.trace_id not in {int(t, 16) for t in callers}
    # ...linked to each producer span, with the message id on each link.
    assert sorted(link.context.span_id for link in batch.links) == sorted(p.context.span_id for p in publishes)
    assert {link.context.trace_id for link in batch.links} == {int(t, 16) for t in callers}
    assert sorted(link.attributes["messaging.message.id"] for link in batch.links) == sorted(
        p.attributes["messaging.message.id"] for p in publishes)
    assert batch.attributes["messaging.batch.message_count"] == len(callers)
    # The batch's work is under the batch span: one embedding call for the three texts.
    embed = _children(exporter.get_finished_spans(), batch, f"embeddings {service.ctx.embedder.name}")
    assert len(embed) == 1 and embed[0].attributes["automem.embedding.texts"] == len(callers)
    # Nothing of the enrichment joined the stores' traces (only the publish and what led to it).
    for trace_hex in callers:
        assert not [s for s in _in_trace(exporter, int(trace_hex, 16)) if s.kind == SpanKind.CONSUMER]


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
    client = _one(spans, SpanKind.CLIENT, "automem.v1.RecallService/SearchMemories", parent=gateways[0])
    server = _one(spans, SpanKind.SERVER, "automem.v1.RecallService/SearchMemories", parent=client)
    reads = [s for s in spans if s.parent is not None and s.parent.span_id == server.context.span_id
             and s.attributes.get("db.system.name") == "falkordb"]
    assert reads and all(s.attributes["db.operation.name"] in ("GRAPH.RO_QUERY", "BATCH GRAPH.RO_QUERY")
                         for s in reads)
    search = _children(spans, server, f"search {service.settings.collection_name}")
    assert len(search) == 1 and search[0].kind == SpanKind.CLIENT
    assert len(_children(spans, server, f"embeddings {service.ctx.embedder.name}")) == 1
    assert gateways[0].parent is None  # no traceparent sent: the gateway starts the trace


async def test_client_spans_carry_the_status_of_unary_and_streamed_calls(
        traced: tuple[RunningService, InMemorySpanExporter]):
    service, exporter = traced
    async with service.http() as http:
        exporter.clear()
        assert (await http.get("/memory/no-such-memory")).status_code == 404
        (gateway,) = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER and s.name.startswith("GET /memory")]
        client = _one(_in_trace(exporter, gateway.context.trace_id), SpanKind.CLIENT,
                      "automem.v1.RecallService/GetMemory", parent=gateway)
        assert client.attributes["rpc.response.status_code"] == "NOT_FOUND"
        # A streamed response (the backup export) ends OK once read to its end.
        exporter.clear()
        assert (await http.get("/backup")).status_code == 200
        (gateway,) = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER and s.name.startswith("GET /backup")]
        client = _one(_in_trace(exporter, gateway.context.trace_id), SpanKind.CLIENT,
                      "automem.v1.IngestService/ExportBackup", parent=gateway)
        assert client.attributes["rpc.response.status_code"] == "OK"


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
