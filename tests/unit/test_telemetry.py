"""Telemetry settings and NATS trace-context propagation (no servers needed)."""

from __future__ import annotations

from opentelemetry import propagate
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from automem.common.settings import Settings
from automem.common.telemetry import (
    _otlp_exporter,
    configure_tracing,
    detach_exporter,
    otlp_enabled,
    producer_span,
    start_batch_span,
)


def test_otlp_exporter_is_off_by_default_and_on_with_an_endpoint_or_otlp():
    assert not otlp_enabled(Settings(otel_exporter_otlp_endpoint="", otel_traces_exporter=""))
    assert otlp_enabled(Settings(otel_exporter_otlp_endpoint="http://collector:4317", otel_traces_exporter=""))
    assert otlp_enabled(Settings(otel_exporter_otlp_endpoint="", otel_traces_exporter="otlp"))
    assert not otlp_enabled(Settings(otel_exporter_otlp_endpoint="http://collector:4317", otel_traces_exporter="none"))
    assert not otlp_enabled(Settings(otel_exporter_otlp_endpoint="", otel_traces_exporter="console"))


def test_otlp_protocol_picks_the_grpc_or_http_exporter():
    assert isinstance(_otlp_exporter(Settings(otel_exporter_otlp_protocol="grpc")), GrpcExporter)
    assert isinstance(_otlp_exporter(Settings(otel_exporter_otlp_protocol="http/protobuf")), HttpExporter)


def test_batch_span_links_to_each_producer_and_is_a_child_only_of_a_lone_message():
    exporter = InMemorySpanExporter()
    configure_tracing(Settings(), exporter=exporter)
    subject = "automem.v1.memory.created"
    try:
        producers, headers = [], []
        for n in range(3):
            with producer_span(subject, f"event-{n}") as producer:
                carrier = {"Nats-Msg-Id": f"event-{n}"}
                propagate.inject(carrier)
            producers.append(producer.get_span_context())
            headers.append(carrier)
        assert headers[0]["traceparent"].split("-")[2] == format(producers[0].span_id, "016x")
        lone = start_batch_span([(subject, headers[0], "event-0")], "automem.v1.memory.>", "enrich")
        lone.end()
        batch = start_batch_span([(subject, h, f"event-{n}") for n, h in enumerate(headers)],
                                 "automem.v1.memory.>", "enrich")
        batch.end()
        mixed = start_batch_span([(subject, headers[1], "event-1"), ("automem.v1.memory.updated", None, "x")],
                                 "automem.v1.memory.>", "enrich")
        mixed.end()
    finally:
        detach_exporter(exporter)
    consumers = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    one, three, two = consumers
    # One message: a child of its producer (one trace), and linked to it.
    assert one.parent.span_id == producers[0].span_id and one.parent.is_remote
    assert one.context.trace_id == producers[0].trace_id
    assert [link.context.span_id for link in one.links] == [producers[0].span_id]
    assert one.attributes["messaging.message.id"] == "event-0"
    # Several: a root span of a trace of its own, one link per producer with its message id.
    assert three.parent is None and three.context.trace_id not in {p.trace_id for p in producers}
    assert [link.context.span_id for link in three.links] == [p.span_id for p in producers]
    assert [link.attributes["messaging.message.id"] for link in three.links] == ["event-0", "event-1", "event-2"]
    assert three.name == f"process {subject}"
    assert three.attributes["messaging.batch.message_count"] == 3
    assert three.attributes["messaging.consumer.group.name"] == "enrich"
    assert three.attributes["messaging.operation.type"] == "process"
    assert three.attributes["messaging.system"] == "nats"
    assert "messaging.message.id" not in three.attributes
    # Subjects differ: named after the subscription; a message without traceparent has no link.
    assert two.name == "process automem.v1.memory.>" and len(two.links) == 1

