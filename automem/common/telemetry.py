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

Where spans come from (names and attributes per the current OpenTelemetry semantic
conventions; the full list is in docs/observability.md):

* gateway: FastAPI server spans ``<METHOD> <route>`` (:func:`instrument_fastapi`, stable HTTP
  attributes), gRPC client spans (:func:`grpc_client_interceptors` on the gateway's channels);
* services: gRPC server spans ``automem.v1.<Service>/<Method>`` (:func:`grpc_server_interceptor`
  on the one ``grpc.aio`` server; ``rpc.system.name``, ``rpc.method``,
  ``rpc.response.status_code``);
* stores: ``GRAPH.QUERY <graph>`` / ``GRAPH.RO_QUERY <graph>`` (:func:`graph_span`,
  ``db.system.name`` = ``falkordb``), ``<operation> <collection>`` (:func:`vector_store_methods`,
  ``db.system.name`` = ``qdrant``) and ``embeddings <model>`` (:func:`embedding_methods`);
  the same wrappers record the store-latency and embedding metrics (automem/common/metrics.py);
* NATS: a PRODUCER span ``publish <subject>`` around each publish (:func:`producer_span`;
  ``traceparent`` is injected inside it) and one CONSUMER span ``process <subject>`` per
  fetched batch, linked to every message's producer span (:func:`start_batch_span`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
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
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags

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


#: gRPC server status codes that mark a server span failed (the RPC semantic conventions for
#: gRPC: the others are the caller's errors, not the server's).
SERVER_ERROR_CODES = frozenset({"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE",
                                "DATA_LOSS"})


def rpc_attributes(full_method: str) -> dict[str, Any]:
    """The RPC semantic-convention attributes of a gRPC call to ``/package.Service/Method``:
    ``rpc.system.name`` = ``grpc`` and ``rpc.method`` = ``package.Service/Method`` (fully
    qualified, which is also the span name)."""
    return {"rpc.system.name": "grpc", "rpc.method": full_method.lstrip("/")}


def _rpc_span(tracer: Any, kind: SpanKind, method: str | bytes, **kwargs: Any) -> Any:
    """The span of one gRPC call per the current RPC conventions (in place of the
    instrumentation's older ``rpc.system`` / ``rpc.service`` / short ``rpc.method`` and
    the ``/``-prefixed name)."""
    if isinstance(method, bytes):
        method = method.decode()
    attributes = rpc_attributes(method)
    return tracer.start_as_current_span(name=attributes["rpc.method"], kind=kind, attributes=attributes, **kwargs)


def grpc_server_interceptor() -> Any:
    """The ``grpc.aio`` server interceptor making a SERVER span per call (health checks
    excluded; opentelemetry-instrumentation-grpc: context extraction, streaming), named and
    attributed per the current RPC conventions (:func:`rpc_attributes`);
    ``rpc.response.status_code`` is set by automem's interceptor when the call ends
    (automem/common/grpc_server.py). Put it first so the auth interceptor runs inside the span."""
    from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

    interceptor = aio_server_interceptor(filter_=filters.negate(filters.health_check()))

    def start_span(handler_call_details: Any, context: Any, set_status_on_exception: bool = False) -> Any:
        return _rpc_span(interceptor._tracer, SpanKind.SERVER, handler_call_details.method,
                         set_status_on_exception=set_status_on_exception)

    interceptor._start_span = start_span
    return interceptor


def grpc_client_interceptors() -> list[Any]:
    """``grpc.aio`` client interceptors: a CLIENT span per call named and attributed per the
    current RPC conventions, ``traceparent`` in metadata, and ``rpc.response.status_code``
    (the status name, e.g. ``OK``, ``NOT_FOUND``) when the call ends (:func:`_status_interceptors`,
    innermost, so it runs inside the span)."""
    from opentelemetry.instrumentation.grpc import aio_client_interceptors

    interceptors = list(aio_client_interceptors())
    for interceptor in interceptors:
        def start_span(method: str | bytes, _interceptor: Any = interceptor, **kwargs: Any) -> Any:
            return _rpc_span(_interceptor._tracer, SpanKind.CLIENT, method, **kwargs)

        interceptor._start_span = start_span
    return interceptors + _status_interceptors()


def _status_interceptors() -> list[Any]:
    """Client interceptors that put ``rpc.response.status_code`` on the CLIENT span around
    them (the current RPC conventions; opentelemetry-instrumentation-grpc sets only the older
    integer ``rpc.grpc.status_code``). Unary responses: once the call's status is known.
    Streamed responses: when the stream ends, with the status that ended it (``CANCELLED``
    when the caller stops reading)."""
    import grpc

    def record(span: Span, code: Any) -> None:
        if span.is_recording() and code is not None:
            span.set_attribute("rpc.response.status_code", code.name)

    async def unary(continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        span = trace.get_current_span()
        call = await continuation(details, request)
        record(span, await call.code())
        return call

    def streamed(span: Span, call: Any) -> Any:
        async def responses() -> Any:
            code = grpc.StatusCode.OK
            try:
                async for response in call:
                    yield response
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                raise
            except BaseException:
                code = grpc.StatusCode.CANCELLED
                raise
            finally:
                record(span, code)

        return responses()

    class UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
        async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            return await unary(continuation, details, request)

    class StreamUnary(grpc.aio.StreamUnaryClientInterceptor):
        async def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
            return await unary(continuation, details, requests)

    class UnaryStream(grpc.aio.UnaryStreamClientInterceptor):
        async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
            span = trace.get_current_span()
            call = await continuation(details, request)
            return streamed(span, call) if span.is_recording() else call

    class StreamStream(grpc.aio.StreamStreamClientInterceptor):
        async def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
            span = trace.get_current_span()
            call = await continuation(details, requests)
            return streamed(span, call) if span.is_recording() else call

    return [UnaryUnary(), StreamUnary(), UnaryStream(), StreamStream()]


def instrument_fastapi(app: Any, semconv_opt_in: str = "http") -> None:
    """SERVER spans for every route of a FastAPI app except ``/metrics`` (scrapes would be
    one trace each), with the stable HTTP conventions (``http.request.method``,
    ``http.response.status_code``, ``url.path``...: ``OTEL_SEMCONV_STABILITY_OPT_IN``, which
    the instrumentation reads from the environment, is set to ``semconv_opt_in`` — the
    setting of the same name — before its first use). The per-message ASGI send/receive
    spans are left out, and so are the instrumentation's metrics: the gateway records
    ``http.server.request.duration`` itself, with the route template of unmatched paths too
    (automem/gateway/metrics.py)."""
    import os

    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    from opentelemetry.metrics import NoOpMeterProvider

    if semconv_opt_in:
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = semconv_opt_in
    FastAPIInstrumentor.instrument_app(app, excluded_urls=r"/metrics(\?.*)?$", exclude_spans=["receive", "send"],
                                       meter_provider=NoOpMeterProvider())


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


def _error_type(exc: BaseException) -> str:
    """``error.type`` of a failed call: the exception's class name (low cardinality)."""
    return type(exc).__name__


def graph_span(operation: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator for ``GraphStore`` query methods ``(self, cypher, params)``: a CLIENT span
    ``"<operation> <graph>"`` following the OpenTelemetry database conventions
    (``db.system.name`` = ``falkordb``, ``db.operation.name`` = the FalkorDB command,
    ``GRAPH.QUERY`` / ``GRAPH.RO_QUERY``, ``db.namespace`` = the graph, ``db.query.text`` =
    the parameterised Cypher), and one ``db.client.operation.duration`` sample (with
    ``error.type`` when it raised; automem/common/metrics.py). For a batch method
    ``(self, [(cypher, params), ...])`` the operation is ``BATCH <operation>``, with the
    first query's text and ``db.operation.batch.size``."""
    from automem.common import metrics

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        async def wrapper(self: Any, cypher: Any, *args: Any, **kwargs: Any) -> Any:
            batch = not isinstance(cypher, str)
            text = cypher[0][0] if batch and cypher else ("" if batch else cypher)
            name = f"BATCH {operation}" if batch else operation
            namespace = str(getattr(self, "name", ""))
            common = {"db.system.name": "falkordb", "db.operation.name": name, "db.namespace": namespace}
            attributes: dict[str, Any] = {**common, "db.query.text": text[:MAX_QUERY_TEXT]}
            if batch:
                attributes["db.operation.batch.size"] = len(cypher)
            start = time.perf_counter()
            try:
                with _tracer.start_as_current_span(f"{name} {namespace}", kind=SpanKind.CLIENT, attributes=attributes):
                    result = await fn(self, cypher, *args, **kwargs)
            except BaseException as exc:
                metrics.db_client_duration.record(time.perf_counter() - start,
                                                  {**common, "error.type": _error_type(exc)})
                raise
            metrics.db_client_duration.record(time.perf_counter() - start, common)
            return result

        return wrapper

    return decorate


def _instrument(cls: type[T], methods: Mapping[str, str],
                start: Callable[[Any, str, tuple[Any, ...]], tuple[str, SpanKind, dict[str, Any], dict[str, Any]]],
                done: Callable[[dict[str, Any], float, tuple[Any, ...]], None]) -> type[T]:
    """Wrap each method of ``methods`` (method -> operation) defined on ``cls`` (sync or
    async): ``start(self, operation, args)`` gives (span name, kind, span attributes,
    metric attributes); the span is current during the call, exceptions are recorded on it
    and re-raised; ``done(metric attributes, seconds, args)`` records the metrics (with
    ``error.type`` added when the call raised)."""

    def wrap(fn: Callable[..., Any], operation: str) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                name, kind, attributes, measured = start(self, operation, args)
                began = time.perf_counter()
                try:
                    with _tracer.start_as_current_span(name, kind=kind, attributes=attributes):
                        result = await fn(self, *args, **kwargs)
                except BaseException as exc:
                    done({**measured, "error.type": _error_type(exc)}, time.perf_counter() - began, args)
                    raise
                done(measured, time.perf_counter() - began, args)
                return result

            return async_wrapper

        @functools.wraps(fn)
        def sync_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            name, kind, attributes, measured = start(self, operation, args)
            began = time.perf_counter()
            try:
                with _tracer.start_as_current_span(name, kind=kind, attributes=attributes):
                    result = fn(self, *args, **kwargs)
            except BaseException as exc:
                done({**measured, "error.type": _error_type(exc)}, time.perf_counter() - began, args)
                raise
            done(measured, time.perf_counter() - began, args)
            return result

        return sync_wrapper

    for method, operation in methods.items():
        fn = cls.__dict__.get(method)
        if callable(fn):
            setattr(cls, method, wrap(fn, operation))
    return cls


def vector_store_methods(methods: Mapping[str, str],
                         attributes: Callable[[Any], Mapping[str, Any]]) -> Callable[[type[T]], type[T]]:
    """Class decorator of the vector stores: each named method (method -> the operation it
    is traced as, ``{"upsert_many": "upsert"}``) gets a CLIENT span ``"<operation>
    <collection>"`` per the database conventions (``db.operation.name``, plus
    ``attributes(self)``: ``db.system.name``, ``db.collection.name``...; a first
    positional list or tuple adds ``db.operation.batch.size``) and a
    ``db.client.operation.duration`` sample (automem/common/metrics.py)."""
    from automem.common import metrics

    def start(self: Any, operation: str, args: tuple[Any, ...]) -> tuple[str, SpanKind, dict[str, Any],
                                                                            dict[str, Any]]:
        base = dict(attributes(self))
        measured = {"db.system.name": base.get("db.system.name", ""), "db.operation.name": operation,
                    "db.collection.name": base.get("db.collection.name", "")}
        span_attributes = {**base, "db.operation.name": operation}
        if args and isinstance(args[0], list | tuple):
            span_attributes["db.operation.batch.size"] = len(args[0])
        return f"{operation} {measured['db.collection.name']}", SpanKind.CLIENT, span_attributes, measured

    def done(measured: dict[str, Any], seconds: float, args: tuple[Any, ...]) -> None:
        metrics.db_client_duration.record(seconds, measured)

    return lambda cls: _instrument(cls, dict(methods), start, done)


def embedding_methods(methods: Iterable[str]) -> Callable[[type[T]], type[T]]:
    """Class decorator of the embedding providers: each named method ``(self, texts)`` gets
    a span ``"embeddings <model>"`` per the GenAI conventions (``gen_ai.operation.name`` =
    ``embeddings``, ``gen_ai.request.model`` = the provider's ``name``,
    ``automem.embedding.texts`` = the batch size; INTERNAL for a local model, CLIENT for a
    remote one: a provider with ``remote = True``), and the metrics
    ``gen_ai.client.operation.duration`` and ``automem.embedding.batch.size``."""
    from automem.common import metrics

    def start(self: Any, operation: str, args: tuple[Any, ...]) -> tuple[str, SpanKind, dict[str, Any],
                                                                            dict[str, Any]]:
        model = str(getattr(self, "name", ""))
        measured = {"gen_ai.operation.name": "embeddings", "gen_ai.request.model": model}
        span_attributes: dict[str, Any] = dict(measured)
        if args and isinstance(args[0], list | tuple):
            span_attributes["automem.embedding.texts"] = len(args[0])
        kind = SpanKind.CLIENT if getattr(self, "remote", False) else SpanKind.INTERNAL
        return f"embeddings {model}", kind, span_attributes, measured

    def done(measured: dict[str, Any], seconds: float, args: tuple[Any, ...]) -> None:
        metrics.embedding_duration.record(seconds, measured)
        if args and isinstance(args[0], list | tuple):
            metrics.embedding_batch_size.record(len(args[0]), {"gen_ai.request.model": measured["gen_ai.request.model"]})

    return lambda cls: _instrument(cls, dict.fromkeys(methods, "embeddings"), start, done)


def _messaging_attributes(destination: str, operation: str, operation_type: str,
                          message_id: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"messaging.system": "nats", "messaging.destination.name": destination,
                           "messaging.operation.type": operation_type, "messaging.operation.name": operation}
    if message_id:
        out["messaging.message.id"] = message_id
    return out


@contextmanager
def producer_span(subject: str, message_id: str = "") -> Iterator[Span]:
    """A PRODUCER span ``publish <subject>`` (``messaging.operation.type`` = ``send``,
    ``messaging.operation.name`` = ``publish``), current inside the block: inject the trace
    context into the message headers within it; it is the message's creation context, which
    the consumer links to (:func:`start_batch_span`)."""
    with _tracer.start_as_current_span(f"publish {subject}", kind=SpanKind.PRODUCER,
                                       attributes=_messaging_attributes(subject, "publish", "send",
                                                                        message_id)) as span:
        yield span


def record_publish(subject: str, seconds: float, error: BaseException | None = None) -> None:
    """One ``messaging.client.operation.duration`` sample of a publish to ``subject``
    (``error.type`` when it failed; automem/common/metrics.py)."""
    from automem.common import metrics

    attributes = {"messaging.system": "nats", "messaging.operation.name": "publish",
                  "messaging.operation.type": "send", "messaging.destination.name": subject}
    if error is not None:
        attributes["error.type"] = _error_type(error)
    metrics.messaging_client_duration.record(seconds, attributes)


def start_batch_span(messages: Sequence[tuple[str, Mapping[str, str] | None, str]], subscription: str,
                     group: str) -> Span:
    """Start (not activate) the CONSUMER span ``process <destination>`` of one fetched batch
    of ``messages`` — ``(subject, headers, message id)`` each — as the OpenTelemetry
    messaging conventions say for batch processing: one span for the batch, with a LINK to
    each message's creation context (its ``traceparent``; link attribute
    ``messaging.message.id``) and ``messaging.batch.message_count``. A batch of one message
    is also a child of that message's context (the conventions allow it), so a single store
    and its enrichment stay one trace; a larger batch starts a trace of its own instead of
    joining hundreds of producers' traces. ``destination``: the subject the messages share,
    else ``subscription`` (the consumer's filter). End it with ``span.end()``."""
    contexts = []
    for subject, headers, message_id in messages:
        context = trace.get_current_span(propagate.extract(dict(headers or {}))).get_span_context()
        if context.is_valid:
            contexts.append((context, {"messaging.message.id": message_id} if message_id else {}))
    subjects = {subject for subject, _, _ in messages}
    destination = next(iter(subjects)) if len(subjects) == 1 else subscription
    attributes = _messaging_attributes(destination, "process", "process")
    attributes.update({"messaging.consumer.group.name": group, "messaging.destination.subscription.name": group,
                       "messaging.batch.message_count": len(messages)})
    if len(messages) == 1 and messages[0][2]:
        attributes["messaging.message.id"] = messages[0][2]
    parent = (trace.set_span_in_context(NonRecordingSpan(contexts[0][0]))
              if len(messages) == 1 and contexts else otel_context.Context())
    return _tracer.start_span(f"process {destination}", context=parent, kind=SpanKind.CONSUMER,
                              attributes=attributes, links=[Link(c, a) for c, a in contexts])


def record_error(spans: Sequence[Span], exc: BaseException | str) -> None:
    """Mark spans failed with an exception (recorded as an event) or a reason."""
    for span in spans:
        if isinstance(exc, BaseException):
            span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)[:500]))
