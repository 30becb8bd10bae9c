"""The shared ``grpc.aio`` server: tracing, auth and error-mapping interceptors, health, reflection.

One server per process; each service module adds its servicer and sets its own health
status. Domain errors (automem/common/errors.py) become status codes here, in one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2
from opentelemetry import trace

from automem.common.auth import (
    Principal,
    _current,
    _recheck,
    bind_credential_check,
    header_scope,
    set_principal,
    still_authorized,
    tokens_equal,
)
from automem.common.errors import (
    AutomemError,
    InvalidArgument,
    ListenError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from automem.common.grpc_tls import server_credentials
from automem.common.logs import access
from automem.common.metrics import rpc_server_duration
from automem.common.model import check_id, check_ids
from automem.common.settings import Settings
from automem.common.telemetry import SERVER_ERROR_CODES, grpc_server_interceptor, rpc_attributes

log = logging.getLogger(__name__)

KeyLookup = Callable[[str], Awaitable[Principal | None]]
AnyKeys = Callable[[], Awaitable[bool]]

#: Methods neither authenticated nor measured: health checks (probes call them every few
#: seconds) and reflection.
_UNMEASURED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
#: Methods that need no key (health checks, reflection and the status reads).
_OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.", "/automem.v1.RecallService/GetStats",
                  "/automem.v1.EnrichService/GetEnrichmentStatus", "/automem.v1.ConsolidateService/GetSyncStatus")


#: Seconds an open method's call waits for its caller's key check (:meth:`AutomemInterceptor.
#: _enter_open`; remembered answers come at once, automem/common/keys.py): a FalkorDB that does
#: not answer held GetStats and GetEnrichmentStatus for the whole store bound before they read
#: anything, past the gateway's health bound (automem/gateway/usecases.py ``HEALTH_TIMEOUT``).
#: Past it the call answers as to a caller without a key.
OPEN_PRINCIPAL_SECONDS = 1.0
#: Call metadata that must come once: the credentials and the scope.
_SINGLE_METADATA = ("authorization", "x-api-key", "x-admin-token", "x-admin-api-key", "x-automem-scope")


def call_metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    """The call's text metadata by lower-case key. InvalidArgument naming the key when a
    credential or the scope comes more than once, or when ``authorization`` and ``x-api-key``
    (``x-admin-token`` and ``x-admin-api-key``) carry different keys: the last copy was
    served, a key or scope the caller may not have meant — the REST gateway refuses the same
    (automem/gateway/deps.py ``single_header``, ``_same_key``; break-it review)."""
    metadata: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if not isinstance(value, str):
            continue
        key = key.lower()
        if key in metadata and key in _SINGLE_METADATA:
            raise InvalidArgument(f"{key}: given more than once; send it once", field=key)
        metadata[key] = value
    auth = metadata.get("authorization", "")
    bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else auth.strip()
    if auth and metadata.get("x-api-key") and bearer != metadata["x-api-key"].strip():
        raise InvalidArgument("authorization: authorization and x-api-key carry different keys; send one",
                              field="authorization")
    admin, alias = metadata.get("x-admin-token", "").strip(), metadata.get("x-admin-api-key", "").strip()
    if admin and alias and admin != alias:
        raise InvalidArgument("x-admin-token: x-admin-token and x-admin-api-key carry different tokens; send one",
                              field="x-admin-token")
    return metadata


#: The request fields that list memory ids: SearchMemories' ``priority_ids``,
#: DeleteMemoriesByTag's ``memory_ids``, ReprocessMemories' ``ids`` (any request's field of
#: these names that is a repeated string).
ID_LISTS = ("priority_ids", "memory_ids", "ids")


def _require_id(request: Any) -> None:
    """INVALID_ARGUMENT naming ``id`` for a request whose ``id`` (the memory, review item,
    tombstone, merge or key it acts on; every request message with an ``id`` field needs one)
    is no id (automem/common/model.py :func:`check_id`): empty or blank, it answered NOT_FOUND
    ("memory  not found") naming no field, and ListMemoryEvents listed every memory's events
    (break-it review); over-long or holding a control character, it was NOT_FOUND too, where
    REST answered 400. An item of an id list (:data:`ID_LISTS`) over-long or holding a
    control character is INVALID_ARGUMENT naming ``<list>[<index>]`` (:func:`check_ids`;
    they were looked up and matched nothing)."""
    field = request.DESCRIPTOR.fields_by_name.get("id")
    if field is not None and field.type == field.TYPE_STRING and not field.is_repeated:
        check_id(request.id, "id")
    for name in ID_LISTS:
        field = request.DESCRIPTOR.fields_by_name.get(name)
        if field is not None and field.type == field.TYPE_STRING and field.is_repeated:
            check_ids(getattr(request, name), name)


def bearer_from_metadata(metadata: dict[str, str]) -> str:
    """The API key of a request: ``authorization: Bearer <key>`` or ``x-api-key``."""
    auth = metadata.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return metadata.get("x-api-key", "").strip()


class Authenticator:
    """Turns request credentials into a Principal.

    Order: the AutoMem token (``AUTOMEM_API_TOKEN``) → an API key from the key store →
    Unauthenticated. With no token and no keys configured the service is open and the
    caller is an anonymous admin on the default scope.
    """

    def __init__(self, settings: Settings, key_lookup: KeyLookup | None = None,
                 any_keys: AnyKeys | None = None) -> None:
        self.settings = settings
        self.key_lookup = key_lookup
        self.any_keys = any_keys

    async def authenticate(self, key: str, admin_token: str = "") -> Principal:
        """Principal for ``key``. Raises Unauthenticated."""
        s = self.settings
        is_admin = bool(s.admin_token) and bool(admin_token) and tokens_equal(admin_token, s.admin_token)
        if key and s.api_token and tokens_equal(key, s.api_token):
            role = "admin" if (is_admin or not s.admin_token) else "writer"
            return Principal("automem-token", role, ("*",), s.default_scope)
        if key and self.key_lookup is not None:
            principal = await self.key_lookup(key)
            if principal is not None:
                return principal
        if not s.api_token and not (self.any_keys is not None and await self.any_keys()):
            return Principal("anonymous", "admin", ("*",), s.default_scope)
        raise Unauthenticated("missing or invalid API key")


class RateLimiter:
    """Per-principal request budget (``AUTOMEM_RATE_LIMIT``, e.g. ``"600/minute"``; several
    limits separated by ``;``), a moving window from the ``limits`` library kept in memory
    per process. Off when the setting is empty."""

    def __init__(self, spec: str) -> None:
        from limits import parse_many
        from limits.aio.storage import MemoryStorage
        from limits.aio.strategies import MovingWindowRateLimiter

        self.spec = spec.strip()
        try:
            self.items = parse_many(self.spec) if self.spec else []
        except ValueError as exc:
            raise InvalidArgument(f"AUTOMEM_RATE_LIMIT: cannot parse {spec!r}: {exc}") from None
        self._limiter = MovingWindowRateLimiter(MemoryStorage()) if self.items else None

    async def check(self, principal: Principal) -> None:
        """Count one request of ``principal``; ResourceExhausted naming the limit when over."""
        if self._limiter is None:
            return
        for item in self.items:
            if not await self._limiter.hit(item, principal.name):
                raise ResourceExhausted(
                    f"rate limit exceeded: {item.amount} requests per {item.multiples} "
                    f"{item.GRANULARITY.name}(s) per key (AUTOMEM_RATE_LIMIT={self.spec})")


class InFlightLimit:
    """Admission limit of one process: at most ``limit`` authenticated unary calls run at
    once (``AUTOMEM_MAX_IN_FLIGHT``; 0 = no limit). A call past it is refused at once with
    UNAVAILABLE (HTTP 503 with ``Retry-After``, automem/gateway/errors.py) instead of
    queueing behind the others: an overloaded service answered its callers after minutes
    (docs/benchmarks.md, "The shard's calls queue in its own thread"). Streams, uploads,
    health checks and the open status reads are not counted: a stream holds its call for
    as long as the caller reads, and a probe must see an overloaded process as alive."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0

    @contextlib.contextmanager
    def admitted(self) -> Iterator[None]:
        """Hold one place for the call's duration; Unavailable naming the setting when none is free."""
        if self.limit and self.running >= self.limit:
            raise Unavailable(f"overloaded: {self.running} requests are running here, at most {self.limit} "
                              "(AUTOMEM_MAX_IN_FLIGHT); retry shortly")
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1


def _short(message: str, limit: int = 1000) -> str:
    """An error message cut to ``limit`` characters (it travels as gRPC trailing metadata,
    which has a size cap; a 10 kB id echoed back would turn a 404 into RESOURCE_EXHAUSTED)."""
    return message if len(message) <= limit else message[:limit] + "…"


def _status_name(context: grpc.aio.ServicerContext, exc: BaseException | None) -> str:
    """The gRPC status code name a call ended with, for its access line."""
    if isinstance(exc, AutomemError):
        return exc.code.name
    code = None
    with contextlib.suppress(Exception):  # older grpcio: no code() on the server context
        code = context.code()
    if code is not None:
        return code.name if isinstance(code, grpc.StatusCode) else str(code)
    if exc is None:
        return "OK"
    return "CANCELLED" if isinstance(exc, BaseException) and not isinstance(exc, Exception) else "UNKNOWN"


class _CallLog:
    """One call as it ends: its ``rpc.server.call.duration`` sample and span status
    (automem/common/metrics.py, telemetry.py) and, when ``access_log``, its access line
    (start time, principal and requested scope)."""

    __slots__ = ("access_log", "method", "principal", "scope", "start")

    def __init__(self, method: str, access_log: bool = True) -> None:
        self.method, self.start, self.principal, self.scope = method, time.perf_counter(), "", ""
        self.access_log = access_log

    def done(self, context: grpc.aio.ServicerContext, exc: BaseException | None) -> None:
        elapsed = time.perf_counter() - self.start
        status = _status_name(context, exc)
        attributes = {**rpc_attributes(self.method), "rpc.response.status_code": status}
        rpc_server_duration.record(elapsed, attributes)
        span = trace.get_current_span()  # the call's SERVER span (its interceptor runs first)
        span.set_attribute("rpc.response.status_code", status)
        if status in SERVER_ERROR_CODES:
            span.set_status(trace.Status(trace.StatusCode.ERROR, status))
        if self.access_log:
            access("grpc", self.method, "", status, elapsed, self.principal or "unauthenticated", self.scope)


class _Undecodable:
    """Stands in for a request message its deserializer refused (:func:`_tolerant`)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def error(self) -> InvalidArgument:
        return InvalidArgument(f"request: not a valid message of this method ({self.reason})", field="request")


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserializer`` returning an :class:`_Undecodable` instead of raising: grpcio answers a
    request it cannot parse (e.g. invalid UTF-8 in a string field) with UNKNOWN and logs a
    traceback at ERROR for each — which any client, authenticated or not, could repeat. The
    interceptor answers INVALID_ARGUMENT instead, after authentication, like any bad input."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, or a bad payload of any kind
            return _Undecodable(_short(str(exc) or type(exc).__name__))

    return parse


async def _refuse_undecodable(context: grpc.aio.ServicerContext, request: Any) -> None:
    """Abort the call with INVALID_ARGUMENT when ``request`` did not parse; else nothing."""
    if isinstance(request, _Undecodable):
        error = request.error()
        await context.abort(error.code, error.message)


async def _checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    """The messages of a client stream; the call aborts at the first one that did not parse."""
    async for request in requests:
        await _refuse_undecodable(context, request)
        yield request


def _parsed_or_refused(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` (health, reflection: served as they are) answering INVALID_ARGUMENT for a
    request message that does not parse (:func:`_tolerant`), instead of grpcio's UNKNOWN and
    its logged traceback."""
    deserializer = _tolerant(handler.request_deserializer)
    if handler.unary_unary is not None:
        unary = handler.unary_unary

        async def checked_unary(request, context):
            await _refuse_undecodable(context, request)
            return await unary(request, context)

        return grpc.unary_unary_rpc_method_handler(checked_unary, request_deserializer=deserializer,
                                                   response_serializer=handler.response_serializer)
    if handler.unary_stream is not None:
        stream = handler.unary_stream
        if inspect.isasyncgenfunction(stream):
            async def checked_stream(request, context):
                await _refuse_undecodable(context, request)
                async for item in stream(request, context):
                    yield item
        else:  # a coroutine writing through context.write (grpcio-health's Watch)
            async def checked_stream(request, context):
                await _refuse_undecodable(context, request)
                return await stream(request, context)

        return grpc.unary_stream_rpc_method_handler(checked_stream, request_deserializer=deserializer,
                                                    response_serializer=handler.response_serializer)
    if handler.stream_stream is not None:  # reflection
        bidi = handler.stream_stream

        if inspect.isasyncgenfunction(bidi):
            async def checked_bidi(request_iterator, context):
                async for item in bidi(_checked(request_iterator, context), context):
                    yield item
        else:
            async def checked_bidi(request_iterator, context):
                return await bidi(_checked(request_iterator, context), context)

        return grpc.stream_stream_rpc_method_handler(checked_bidi, request_deserializer=deserializer,
                                                     response_serializer=handler.response_serializer)
    return handler


class AutomemInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates every call (except health/reflection), applies the per-key rate limit
    and the process's admission limit (:class:`InFlightLimit`), binds the principal, maps AutomemError to its status code, records each call's
    ``rpc.server.call.duration`` and ``rpc.response.status_code`` (the open status reads
    too; automem/common/metrics.py), and writes each call's access line
    (automem/common/logs.py :func:`access`; health, reflection and the open status reads are
    not logged: probes call them every few seconds)."""

    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator
        self.limiter = RateLimiter(authenticator.settings.rate_limit)
        self.in_flight = InFlightLimit(authenticator.settings.max_in_flight)
        self.access_log = authenticator.settings.access_log

    async def _enter(self, context: grpc.aio.ServicerContext,
                     call: _CallLog | None = None) -> tuple[contextvars.Token, ...]:
        """Authenticate the call, count it against the key's rate limit and bind the
        principal, the requested scope (noted on ``call``) and the call's credential check
        (automem/common/auth.py ``still_authorized``: a stream checks its key as it goes).
        Raises AutomemError."""
        metadata = call_metadata(context)
        if call is not None:
            call.scope = metadata.get("x-automem-scope", "")[:200]
        key = bearer_from_metadata(metadata)
        admin = metadata.get("x-admin-token", "") or metadata.get("x-admin-api-key", "")
        principal = await self.authenticator.authenticate(key, admin)
        if call is not None:
            call.principal = principal.name
        await self.limiter.check(principal)

        async def recheck() -> None:
            await self.authenticator.authenticate(key, admin)
        return (set_principal(principal), header_scope.set(metadata.get("x-automem-scope", "")),
                bind_credential_check(recheck))

    @staticmethod
    def _leave(tokens: tuple[contextvars.Token, ...]) -> None:
        with contextlib.suppress(ValueError):  # a stream closed from another context
            for var, token in zip((_current, header_scope, _recheck), tokens, strict=False):
                var.reset(token)

    @contextlib.asynccontextmanager
    async def _bound(self, context: grpc.aio.ServicerContext, method: str) -> AsyncIterator[None]:
        """Around one call: authenticate and bind (:meth:`_enter`), unbind after, turn an
        AutomemError into its status (abort) and write the access line."""
        call = _CallLog(method, self.access_log)
        failure: BaseException | None = None
        try:
            tokens = await self._enter(context, call)
            try:
                yield
            finally:
                self._leave(tokens)
        except AutomemError as exc:
            failure = exc
            await context.abort(exc.code, _short(exc.message))
        except BaseException as exc:
            failure = failure or exc
            raise
        finally:
            call.done(context, failure)

    async def _enter_open(self, context: grpc.aio.ServicerContext) -> tuple[contextvars.Token, contextvars.Token]:
        """Bind the principal of an open method's call when its credentials are valid (None
        bound otherwise; never refused, no rate limit): the method answers everyone, and
        leaves out what only a key that sees every scope may read (automem/enrich/servicer.py
        ``GetEnrichmentStatus``). A key check that takes longer than
        :data:`OPEN_PRINCIPAL_SECONDS` (its store does not answer) binds None too."""
        try:
            metadata = call_metadata(context)
        except InvalidArgument:  # an open method answers everyone: credentials it cannot read are none
            metadata = {}
        try:
            principal = await asyncio.wait_for(self.authenticator.authenticate(
                bearer_from_metadata(metadata),
                metadata.get("x-admin-token", "") or metadata.get("x-admin-api-key", "")), OPEN_PRINCIPAL_SECONDS)
        except (AutomemError, TimeoutError):
            principal = None
        return set_principal(principal), header_scope.set(metadata.get("x-automem-scope", ""))

    @contextlib.asynccontextmanager
    async def _measured(self, context: grpc.aio.ServicerContext, method: str) -> AsyncIterator[None]:
        """Around a call of an open method (a key is not needed; no access line): the
        caller's principal bound when its key is valid (:meth:`_enter_open`), its duration
        sample and span status."""
        call = _CallLog(method, access_log=False)
        failure: BaseException | None = None
        tokens = None
        try:
            tokens = await self._enter_open(context)
            yield
        except AutomemError as exc:  # e.g. a request that did not parse: its status, no traceback
            failure = exc
            await context.abort(exc.code, _short(exc.message))
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if tokens is not None:
                self._leave(tokens)
            call.done(context, failure)

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[override]
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None:
            return handler
        if method.startswith(_UNMEASURED_PREFIXES):
            return _parsed_or_refused(handler)
        bound = self._measured if method.startswith(_OPEN_PREFIXES) else self._bound
        if handler.unary_unary is not None:
            inner = handler.unary_unary
            admission = None if method.startswith(_OPEN_PREFIXES) else self.in_flight

            async def wrapped(request, context: grpc.aio.ServicerContext):
                async with bound(context, method):
                    if isinstance(request, _Undecodable):
                        raise request.error()
                    _require_id(request)
                    if admission is None:
                        return await inner(request, context)
                    with admission.admitted():
                        return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(
                wrapped, request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def wrapped_stream(request, context: grpc.aio.ServicerContext):
                async with bound(context, method):
                    if isinstance(request, _Undecodable):
                        raise request.error()
                    async for item in inner_stream(request, context):
                        await still_authorized()  # a key revoked mid-stream gets nothing more
                        yield item

            return grpc.unary_stream_rpc_method_handler(
                wrapped_stream, request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer)

        if handler.stream_unary is not None:  # AdminService.RestoreBackup
            inner_upload = handler.stream_unary

            async def wrapped_upload(request_iterator, context: grpc.aio.ServicerContext):
                async with bound(context, method):
                    return await inner_upload(_checked(request_iterator, context), context)

            return grpc.stream_unary_rpc_method_handler(
                wrapped_upload, request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer)

        # Bidirectional streaming methods: none exist; refuse rather than run them unauthenticated.

        async def refuse_stream(request_iterator, context: grpc.aio.ServicerContext):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "bidirectional streaming methods are not served")
            yield None  # pragma: no cover - makes this an async generator

        return grpc.stream_stream_rpc_method_handler(
            refuse_stream, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def _bind(add_port: Callable[[], int], setting: str, address: str) -> int:
    """Run ``add_port`` (a server's ``add_*_port``) and return the bound port; raise
    :class:`ListenError` naming ``setting`` and ``address`` when it fails (grpcio returns 0
    or raises RuntimeError, by version)."""
    try:
        port = add_port()
    except RuntimeError:
        port = 0
    if port == 0:
        raise ListenError(f"{setting}: cannot listen on {address}: address already in use (or not allowed)")
    return port


class GrpcServer:
    """The process's one gRPC server with health and reflection (v1 and v1alpha).

    Args:
        settings: uses ``grpc_port``, ``host``, ``grpc_max_connection_age_seconds``, the
            ``grpc_tls*`` settings (automem/common/grpc_tls.py) and ``grpc_health_port``.
        authenticator: checks keys on every call.

    With ``grpc_health_port`` set, a second server on that port answers
    ``grpc.health.v1.Health`` alone, in plaintext, from the same health servicer (the
    kubelet's grpc probes cannot do TLS; the services themselves stay behind TLS).
    """

    def __init__(self, settings: Settings, authenticator: Authenticator) -> None:
        self.settings = settings
        # grpcio binds with SO_REUSEPORT by default: a second service started on a port in use
        # would share it, the kernel splitting the callers between the two. Off: a port in use
        # fails the start, as the HTTP port does.
        options: list[tuple[str, int]] = [("grpc.so_reuseport", 0)]
        if settings.grpc_max_connection_age_seconds > 0:  # clients reconnect and re-resolve: load re-balances
            options += [("grpc.max_connection_age_ms", int(settings.grpc_max_connection_age_seconds * 1000)),
                        ("grpc.max_connection_age_grace_ms", 5000)]
        self.server = grpc.aio.server(interceptors=[grpc_server_interceptor(), AutomemInterceptor(authenticator)],
                                      options=options)
        self.health = health.aio.HealthServicer() if hasattr(health, "aio") else health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.service_names: list[str] = [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name]
        self.port = 0
        self.health_server: grpc.aio.Server | None = None
        self.health_port = 0
        self._forward_channels: list[grpc.aio.Channel] = []

    def forward(self, services: Sequence[Any], channel: grpc.aio.Channel) -> list[str]:
        """Answer the unary methods of ``services`` (protobuf ServiceDescriptors) by passing
        each call on to ``channel`` (the process serving them; closed by :meth:`stop`): the
        request's bytes, its metadata (the caller's key and scope, checked again there) and
        its remaining deadline go on, and the answer or the status, details and trailing
        metadata come back as they are, but for an UNAVAILABLE of the channel itself (the child
        does not answer): its details named the child's loopback address, and name the
        service now (:func:`unavailable_details`). ``automem up`` serves its children's services this
        way on its own port, so a gRPC client given that one address reaches all of them.
        Streaming methods are not passed on. Returns the paths of the methods forwarded."""
        self._forward_channels.append(channel)
        paths = []
        for service in services:
            handlers = {}
            for method in service.methods:
                if method.client_streaming or method.server_streaming:
                    continue
                path = f"/{service.full_name}/{method.name}"
                # Messages, not bytes: the interceptors read the request (its id, its scope).
                request, response = GetMessageClass(method.input_type), GetMessageClass(method.output_type)
                call = channel.unary_unary(path, request_serializer=request.SerializeToString,
                                           response_deserializer=response.FromString)
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                    _forwarder(call, channel, service.full_name), request_deserializer=request.FromString,
                    response_serializer=response.SerializeToString)
                paths.append(path)
            self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
        return paths

    def add(self, add_fn: Callable, servicer: object, full_name: str) -> None:
        """Register a servicer (``add_XServicer_to_server``) under its full service name."""
        add_fn(servicer, self.server)
        self.service_names.append(full_name)

    async def set_serving(self, full_name: str, serving: bool) -> None:
        """Set one service's health status (and the overall "" status)."""
        await self.set_status(full_name, serving)
        await self.set_status("", serving)

    async def set_status(self, full_name: str, serving: bool) -> None:
        """Set the health status of ``full_name`` alone ("" = the whole server; automem/common/readiness.py)."""
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        await _maybe_await(self.health.set(full_name, status))

    async def start(self) -> int:
        """Enable reflection (v1 and v1alpha), bind ``host:grpc_port`` (0 = free port; TLS
        when ``grpc_tls`` is on, automem/common/grpc_tls.py), start; returns the port. Raises
        TlsSettingsError (a ValueError) naming the setting of a missing or unreadable file, and
        :class:`ListenError` naming ``AUTOMEM_GRPC_PORT`` (or ``AUTOMEM_GRPC_HEALTH_PORT``) and the address
        when the port is in use (no SO_REUSEPORT: another process's port is never shared)."""
        servicer = reflection.aio.ReflectionServicer([*self.service_names, reflection.SERVICE_NAME,
                                                      REFLECTION_V1_SERVICE], pool=None)
        add_reflection_v1alpha(servicer, self.server)
        add_reflection_v1(servicer, self.server)
        address = f"{self.settings.host}:{self.settings.grpc_port}"
        credentials = server_credentials(self.settings)  # TlsSettingsError naming the variable
        if credentials is None:
            self.port = _bind(lambda: self.server.add_insecure_port(address), "AUTOMEM_GRPC_PORT", address)
        else:
            self.port = _bind(lambda: self.server.add_secure_port(address, credentials), "AUTOMEM_GRPC_PORT", address)
        if self.settings.grpc_health_port:
            self.health_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self.health_server)
            health_address = f"{self.settings.host}:{self.settings.grpc_health_port}"
            self.health_port = _bind(lambda: self.health_server.add_insecure_port(health_address),
                                     "AUTOMEM_GRPC_HEALTH_PORT", health_address)
            await self.health_server.start()
        await self.server.start()
        return self.port

    async def stop(self, grace: float) -> None:
        """Mark everything NOT_SERVING, then stop with ``grace`` seconds for in-flight calls."""
        for name in self.service_names:
            await _maybe_await(self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING))
        await self.server.stop(grace)
        if self.health_server is not None:
            await self.health_server.stop(0)
        for channel in self._forward_channels:
            await channel.close()


#: How gRPC core names a peer in its transport errors ("ipv4:127.0.0.1:40123", "unix:/...").
_PEER_ADDRESS = re.compile(r"\b(?:ipv4|ipv6|unix|unix-abstract|vsock):|\b(?:127\.\d+\.\d+\.\d+|localhost|\[::1?\]):\d+")


def unavailable_details(exc: grpc.aio.AioRpcError, channel: grpc.aio.Channel, service: str) -> str:
    """The details to pass on for a forwarded call's error ``exc``: its own, unless it is an
    UNAVAILABLE of the channel to the child rather than one the child answered (the channel
    is not READY, or the details name a peer address as gRPC core's transport errors do):
    then ``"<service>: unavailable (the process serving it does not answer); retry shortly"``,
    with no internal address (they carried the child's, e.g. ``ipv4:127.0.0.1:40123``)."""
    details = exc.details() or ""
    if exc.code() != grpc.StatusCode.UNAVAILABLE:
        return details
    state = channel.get_state(try_to_connect=False)
    if state == grpc.ChannelConnectivity.READY and not _PEER_ADDRESS.search(details):
        return details  # the child answered UNAVAILABLE itself (a store of its own is down)
    log.warning("forwarded call failed: the child serving it does not answer", extra={
        "service": service, "details": details, "channel_state": state.name})
    return f"{service}: unavailable (the process serving it does not answer); retry shortly"


def _forwarder(call: grpc.aio.UnaryUnaryMultiCallable, channel: grpc.aio.Channel,
               service: str) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    """The handler of one forwarded method of ``service`` (:meth:`GrpcServer.forward`): the
    request message on, the answer message back; errors as :func:`unavailable_details` words them."""
    async def handler(request: Any, context: grpc.aio.ServicerContext) -> Any:
        # Pseudo-headers and the transport's own (user-agent, grpc-*) are the channel's to set.
        metadata = tuple((k, v) for k, v in context.invocation_metadata() or ()
                         if not k.startswith((":", "grpc-")) and k != "user-agent")
        try:
            return await call(request, metadata=metadata, timeout=context.time_remaining())
        except grpc.aio.AioRpcError as exc:
            await context.abort(exc.code(), unavailable_details(exc, channel, service),
                                trailing_metadata=exc.trailing_metadata() or ())
            raise  # abort raises; not reached
    return handler


#: Server reflection v1 (grpc/reflection/v1/reflection.proto). grpcio-reflection 1.85 serves
#: only v1alpha; the v1 protocol has the same messages under another package, so its
#: descriptor is the v1alpha one renamed, registered in the default pool (reflection can
#: describe it), and both services share one servicer.
REFLECTION_V1_SERVICE = "grpc.reflection.v1.ServerReflection"
_REFLECTION_V1_FILE = "grpc/reflection/v1/reflection.proto"


def _register_reflection_v1() -> None:
    """Add grpc/reflection/v1/reflection.proto to the default pool (once): the v1alpha file
    renamed, so reflection can describe the v1 service it serves."""
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_REFLECTION_V1_FILE)
        return
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    proto.name, proto.package = _REFLECTION_V1_FILE, "grpc.reflection.v1"
    proto.options.Clear()
    for message in proto.message_type:
        for field in message.field:
            if field.type_name:  # set only where set: a proto2 field has presence
                field.type_name = field.type_name.replace(old, new)
    for service in proto.service:
        for method in service.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    pool.AddSerializedFile(proto.SerializeToString())


def add_reflection_v1alpha(servicer: object, server: grpc.aio.Server) -> None:
    """Serve ``servicer`` as grpc.reflection.v1alpha.ServerReflection."""
    from grpc_reflection.v1alpha import reflection_pb2_grpc

    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)


def add_reflection_v1(servicer: object, server: grpc.aio.Server) -> None:
    """Serve ``servicer`` (the v1alpha reflection servicer) as grpc.reflection.v1.ServerReflection
    too. The two protocols' messages have the same fields and numbers, so the v1alpha
    classes read and write the v1 wire format as they are."""
    _register_reflection_v1()
    handler = grpc.method_handlers_generic_handler(REFLECTION_V1_SERVICE, {
        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
            servicer.ServerReflectionInfo,  # type: ignore[attr-defined]
            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString)})
    server.add_generic_rpc_handlers((handler,))


async def _maybe_await(value: object) -> None:
    if hasattr(value, "__await__"):
        await value  # type: ignore[misc]
