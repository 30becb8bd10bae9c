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
    start_consumer_span,
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


def test_consumer_span_is_a_child_of_the_producer_span_through_message_headers():
    exporter = InMemorySpanExporter()
    configure_tracing(Settings(), exporter=exporter)
    try:
        with producer_span("automem.v1.memory.created", "event-1") as producer:
            headers = {"Nats-Msg-Id": "event-1"}
            propagate.inject(headers)
        assert headers["traceparent"].split("-")[2] == format(producer.get_span_context().span_id, "016x")
        consumer = start_consumer_span("automem.v1.memory.created", headers, "event-1")
        consumer.end()
        orphan = start_consumer_span("automem.v1.memory.created", None)
        orphan.end()
    finally:
        detach_exporter(exporter)
    spans = {s.name + ("/orphan" if s.parent is None and s.kind == SpanKind.CONSUMER else ""): s
             for s in exporter.get_finished_spans()}
    done = spans["process automem.v1.memory.created"]
    assert done.kind == SpanKind.CONSUMER
    assert done.parent.span_id == producer.get_span_context().span_id and done.parent.is_remote
    assert done.context.trace_id == producer.get_span_context().trace_id
    assert done.attributes["messaging.message.id"] == "event-1"
    assert spans["publish automem.v1.memory.created"].kind == SpanKind.PRODUCER
    # A message without a traceparent starts its own trace.
    assert spans["process automem.v1.memory.created/orphan"].context.trace_id != done.context.trace_id
