"""Tracing: one OpenTelemetry TracerProvider per process, and the spans automem adds itself.

:func:`configure_tracing` (run by the internal ``telemetry`` module, which the gRPC server and
the gateway depend on) installs a global TracerProvider named ``settings.otel_service_name``.
Spans are exported over OTLP only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set or ``OTEL_TRACES_EXPORTER=otlp``; off by
default. The SDK reads the other standard variables itself (``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``...).

With no exporter attached, spans are *not recording* (the sampler drops them) but still carry
valid trace and span ids, so log lines keep their ``trace_id`` and ``traceparent`` still
propagates over gRPC and NATS at almost no cost. Tests attach an exporter with
``configure_tracing(settings, exporter=InMemorySpanExporter())`` and take it off again with
:func:`detach_exporter`.

Where spans come from:

* gateway: FastAPI server spans (:func:`instrument_fastapi`), gRPC client spans
  (:func:`grpc_client_interceptors` on the gateway's channels);
* services: gRPC server spans (:func:`grpc_server_interceptor` on the one ``grpc.aio`` server);
* stores: ``graph.query`` / ``graph.ro_query`` (:func:`graph_span`), ``vectors.<method>``
  and ``embedding.embed`` (:func:`traced_methods`);
* NATS: a PRODUCER span around each publish (:func:`producer_span`; ``traceparent`` is injected
  inside it) and a CONSUMER span per delivered message, child of the context extracted from
  its headers (:func:`start_consumer_span`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult, StaticSampler
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags

from automem.common.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Instrumentation scope of automem's own spans.
TRACER_NAME = "automem"
_tracer = trace.get_tracer(TRACER_NAME)

#: Longest ``db.query.text`` recorded (Cypher is parameterised: no values in it).
MAX_QUERY_TEXT = 2000


class _Processors(SpanProcessor):
    """A span processor whose list of processors can change at run time (add and remove)."""

    def __init__(self) -> None:
        self.processors: tuple[SpanProcessor, ...] = ()
        self._lock = threading.Lock()

    def add(self, processor: SpanProcessor) -> None:
        with self._lock:
            self.processors = (*self.processors, processor)

    def remove(self, processor: SpanProcessor) -> None:
        with self._lock:
            self.processors = tuple(p for p in self.processors if p is not processor)

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        for processor in self.processors:
            processor.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for processor in self.processors:
            processor.on_end(span)

    def shutdown(self) -> None:
        for processor in self.processors:
            processor.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(processor.force_flush(timeout_millis) for processor in self.processors)


class _RecordWhenExporting(Sampler):
    """Drops every span while no processor is attached (ids stay valid, nothing is
    recorded); otherwise defers to the configured sampler (``OTEL_TRACES_SAMPLER``, default
    parent-based always-on)."""

    def __init__(self, processors: _Processors, delegate: Sampler) -> None:
        self._processors = processors
        self._delegate = delegate

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:  # type: ignore[override]
        if not self._processors.processors:
            parent = trace.get_current_span(parent_context).get_span_context()
            return SamplingResult(Decision.DROP, None, parent.trace_state if parent.is_valid else None)
        return self._delegate.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return f"RecordWhenExporting{{{self._delegate.get_description()}}}"


class _State:
    def __init__(self) -> None:
        self.provider: TracerProvider | None = None
        self.processors = _Processors()
        self.otlp: SpanProcessor | None = None
        self.attached: dict[int, SpanProcessor] = {}  # id(exporter) -> its processor


_state = _State()
_configure_lock = threading.Lock()


def _env_sampler() -> Sampler:
    try:  # the SDK's own reading of OTEL_TRACES_SAMPLER / _ARG
        from opentelemetry.sdk.trace.sampling import _get_from_env_or_default

        return _get_from_env_or_default()
    except Exception:  # noqa: BLE001 - private helper moved: fall back to the default
        return ParentBased(StaticSampler(Decision.RECORD_AND_SAMPLE))


def otlp_enabled(settings: Settings) -> bool:
    """True when the OTLP trace exporter should run: ``OTEL_TRACES_EXPORTER`` names ``otlp``,
    or an OTLP endpoint is set and ``OTEL_TRACES_EXPORTER`` is not ``none``."""
    exporters = {e.strip().lower() for e in settings.otel_traces_exporter.split(",") if e.strip()}
    if "otlp" in exporters:
        return True
    return bool(settings.otel_exporter_otlp_endpoint.strip()) and "none" not in exporters


def _otlp_exporter(settings: Settings) -> SpanExporter:
    # The exporters read endpoint, headers, timeout, TLS... from the OTEL_* variables.
    if settings.otel_exporter_otlp_protocol.strip().lower().startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    return GrpcExporter()


def configure_tracing(settings: Settings, exporter: SpanExporter | None = None) -> TracerProvider:
    """Install the process's TracerProvider (once; later calls reuse it) and return it.

    Args:
        settings: ``otel_service_name`` names the service (the first call wins);
            ``otel_exporter_otlp_endpoint`` / ``otel_traces_exporter`` /
            ``otel_exporter_otlp_protocol`` decide the OTLP exporter (batched).
        exporter: an extra exporter (e.g. ``InMemorySpanExporter`` in tests), attached with a
            synchronous processor until :func:`detach_exporter`.

    If another TracerProvider from the SDK is already global (e.g. ``opentelemetry-instrument``
    set one up), automem's processors are added to it instead of replacing it.
    """
    with _configure_lock:
        if _state.provider is None:
            current = trace.get_tracer_provider()
            if isinstance(current, TracerProvider):
                current.add_span_processor(_state.processors)
                _state.provider = current
                log.info("tracing: using the TracerProvider already installed")
            else:
                resource = Resource.create({SERVICE_NAME: settings.otel_service_name})
                provider = TracerProvider(resource=resource, sampler=_RecordWhenExporting(_state.processors,
                                                                                          _env_sampler()))
                provider.add_span_processor(_state.processors)
                trace.set_tracer_provider(provider)
                _state.provider = trace.get_tracer_provider()  # type: ignore[assignment]
        if _state.otlp is None and otlp_enabled(settings):
            _state.otlp = BatchSpanProcessor(_otlp_exporter(settings))
            _state.processors.add(_state.otlp)
            log.info("tracing: OTLP exporter on", extra={"protocol": settings.otel_exporter_otlp_protocol,
                                                         "endpoint": settings.otel_exporter_otlp_endpoint})
        if exporter is not None and id(exporter) not in _state.attached:
            processor = SimpleSpanProcessor(exporter)
            _state.attached[id(exporter)] = processor
            _state.processors.add(processor)
        assert _state.provider is not None
        return _state.provider


def detach_exporter(exporter: SpanExporter) -> None:
    """Stop sending spans to an exporter attached by :func:`configure_tracing` (tests)."""
    with _configure_lock:
        processor = _state.attached.pop(id(exporter), None)
        if processor is not None:
            _state.processors.remove(processor)


def flush_tracing(timeout_millis: int = 5000) -> bool:
    """Export buffered spans now (called at shutdown). True when everything was flushed."""
    return _state.processors.force_flush(timeout_millis)


# --- instrumentation of the frameworks -----------------------------------------------------


def grpc_server_interceptor() -> Any:
    """The ``grpc.aio`` server interceptor making a SERVER span per call (health checks
    excluded); put it first so the auth interceptor runs inside the span."""
    from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

    return aio_server_interceptor(filter_=filters.negate(filters.health_check()))


def grpc_client_interceptors() -> list[Any]:
    """``grpc.aio`` client interceptors: a CLIENT span per call, ``traceparent`` in metadata."""
    from opentelemetry.instrumentation.grpc import aio_client_interceptors

    return list(aio_client_interceptors())


def instrument_fastapi(app: Any) -> None:
    """SERVER spans for every route of a FastAPI app except ``/metrics`` (scrapes would be
    one trace each). The per-message ASGI send/receive spans are left out."""
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, excluded_urls=r"/metrics(\?.*)?$", exclude_spans=["receive", "send"])


@contextmanager
def unsampled() -> Iterator[None]:
    """Run the block in a fresh trace whose sampled flag is off: with the (default)
    parent-based sampler nothing inside is recorded, here or in the services it calls, since
    the flag travels in ``traceparent`` (e.g. the gRPC call of a ``/metrics`` scrape)."""
    ids = RandomIdGenerator()
    context = SpanContext(ids.generate_trace_id(), ids.generate_span_id(), is_remote=False,
                          trace_flags=TraceFlags(TraceFlags.DEFAULT))
    with trace.use_span(NonRecordingSpan(context)):
        yield


# --- spans of automem's own calls ------------------------------------------------------------


def graph_span(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for ``GraphStore`` query methods ``(self, cypher, params)``: a CLIENT span
    ``name`` with ``db.system=falkordb``, the graph name and the (parameterised) Cypher. For
    a batch method ``(self, [(cypher, params), ...])`` the first query's text and the batch
    size (``db.operation.batch.size``)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def wrapper(self: Any, cypher: Any, *args: Any, **kwargs: Any) -> Any:
            text = cypher if isinstance(cypher, str) else (cypher[0][0] if cypher else "")
            words = text.split(maxsplit=1)
            attributes = {"db.system": "falkordb", "db.system.name": "falkordb",
                          "db.namespace": str(getattr(self, "name", "")),
                          "db.operation.name": words[0].upper() if words else "",
                          "db.query.text": text[:MAX_QUERY_TEXT]}
            if not isinstance(cypher, str):
                attributes["db.operation.batch.size"] = len(cypher)
            with _tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attributes):
                return await fn(self, cypher, *args, **kwargs)

        return wrapper

    return decorate


def traced_methods(prefix: str, methods: Iterable[str] | Mapping[str, str],
                   attributes: Callable[[Any], Mapping[str, Any]] | None = None,
                   kind: SpanKind = SpanKind.CLIENT,
                   batch_attribute: str = "db.operation.batch.size") -> Callable[[type[T]], type[T]]:
    """Class decorator: a span ``<prefix>.<method>`` around each named method (sync or async)
    defined on the class; ``methods`` may map a method to the operation its span is named
    after instead (a batch method traced as its operation: ``{"upsert_many": "upsert"}``).
    ``attributes(self)`` adds attributes; a first positional argument that is a list or tuple
    adds ``batch_attribute`` (its length). Exceptions are recorded on the span and re-raised."""

    def attrs(self: Any, args: tuple[Any, ...]) -> dict[str, Any]:
        out = dict(attributes(self)) if attributes else {}
        if args and isinstance(args[0], list | tuple):
            out[batch_attribute] = len(args[0])
        return out

    def wrap(fn: Callable[..., Any], span_name: str) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                with _tracer.start_as_current_span(span_name, kind=kind, attributes=attrs(self, args)):
                    return await fn(self, *args, **kwargs)

            return async_wrapper

        @functools.wraps(fn)
        def sync_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            with _tracer.start_as_current_span(span_name, kind=kind, attributes=attrs(self, args)):
                return fn(self, *args, **kwargs)

        return sync_wrapper

    def decorate(cls: type[T]) -> type[T]:
        names = methods if isinstance(methods, Mapping) else {method: method for method in methods}
        for method, operation in names.items():
            fn = cls.__dict__.get(method)
            if callable(fn):
                setattr(cls, method, wrap(fn, f"{prefix}.{operation}"))
        return cls

    return decorate


def _messaging_attributes(subject: str, operation: str, message_id: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"messaging.system": "nats", "messaging.destination.name": subject,
                           "messaging.operation.type": operation, "messaging.operation.name": operation}
    if message_id:
        out["messaging.message.id"] = message_id
    return out


@contextmanager
def producer_span(subject: str, message_id: str = "") -> Iterator[Span]:
    """A PRODUCER span ``publish <subject>``, current inside the block: inject the trace
    context into the message headers within it so consumers become its children."""
    with _tracer.start_as_current_span(f"publish {subject}", kind=SpanKind.PRODUCER,
                                       attributes=_messaging_attributes(subject, "publish", message_id)) as span:
        yield span


def start_consumer_span(subject: str, headers: Mapping[str, str] | None, message_id: str = "",
                        attributes: Mapping[str, Any] | None = None) -> Span:
    """Start (not activate) a CONSUMER span ``process <subject>`` whose parent is the trace
    context in the message ``headers`` (W3C ``traceparent``); a message without one starts a
    new trace. End it with ``span.end()``; activate it with ``trace.use_span(span)``."""
    parent = propagate.extract(dict(headers or {}))
    span_attributes = _messaging_attributes(subject, "process", message_id)
    span_attributes.update(attributes or {})
    return _tracer.start_span(f"process {subject}", context=parent, kind=SpanKind.CONSUMER,
                              attributes=span_attributes)


def record_error(spans: Sequence[Span], exc: BaseException | str) -> None:
    """Mark spans failed with an exception (recorded as an event) or a reason."""
    for span in spans:
        if isinstance(exc, BaseException):
            span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)[:500]))
