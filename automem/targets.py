"""The target table: every module a process can run, with its dependencies (the Loki/dskit
"targets" pattern; the runner in automem/runner.py resolves and starts them).

Internal modules (not targets): ``telemetry``, ``graph``, ``bus``, ``publisher`` (the outbox),
``embedder``, ``vectors``, ``grpc-server``. Targets: ``ingest`` (IngestService and
ReviewService), ``recall``, ``enrich``, ``consolidate``, ``gateway`` (REST + MCP over
uvicorn) and ``all``, which has no body.

Each start imports its component's code when it runs, so a process loads only what its own
targets need (the gateway process never imports spaCy or ONNX Runtime; measured
``python -X importtime``: 0.35–0.5 s and 20–30 MB per service's import tree).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from automem.common.settings import Settings
from automem.runtime import Module, Runtime, Stop

log = logging.getLogger(__name__)


# --- internal modules ---------------------------------------------------------------------


async def _start_telemetry(rt: Runtime) -> Stop:
    """Tracing and metrics of the process; the metrics port (``AUTOMEM_METRICS_PORT``, 0 =
    none) serves every metric of every target in this process."""
    from automem.common.metrics import configure_metrics, serve_metrics
    from automem.common.telemetry import configure_tracing, flush_tracing

    configure_tracing(rt.settings)
    configure_metrics(rt.settings)
    stop_metrics = serve_metrics(rt.settings.host, rt.settings.metrics_port)
    rt.metrics_port = rt.settings.metrics_port

    async def stop() -> None:
        if stop_metrics is not None:
            stop_metrics()
        await asyncio.to_thread(flush_tracing)

    return stop


async def _start_graph(rt: Runtime) -> Stop:
    from automem.common.errors import Unavailable, UnreachableError
    from automem.graph import GraphStore

    try:
        graph = await GraphStore.open(rt.settings)
    except Unavailable as exc:
        host, port = rt.settings.falkordb_host or "127.0.0.1", rt.settings.falkordb_port or 6379
        # The client's own error says why (refused, unknown host); a timeout says its bound.
        cause = exc.__cause__ if type(exc) is Unavailable and exc.__cause__ is not None else exc
        raise UnreachableError(f"cannot reach FalkorDB (FALKORDB_HOST={host}, FALKORDB_PORT={port}): "
                               f"{_reason(cause)}") from exc
    await graph.ensure_schema()
    # Memories stored before versions existed get their first version (automem/graph/versions.py).
    await graph.versions.migrate()
    from automem.common.backup import interrupted_restore

    if warning := await interrupted_restore(graph):
        log.error(warning)
    rt.graph = graph
    return graph.close


async def _start_bus(rt: Runtime) -> Stop:
    from automem.common.bus import Bus, without_credentials
    from automem.common.errors import Unavailable, UnreachableError
    from automem.common.timeouts import effective_bound

    bus = Bus(rt.settings)
    try:
        await bus.connect()
    except Unavailable as exc:
        if type(exc) is not Unavailable:  # the stream's creation timed out: NATS was reached
            raise
        bound = effective_bound(rt.settings.store_timeout_seconds) or 5.0
        raise UnreachableError(f"cannot reach NATS (NATS_URL={without_credentials(rt.settings.nats_url)}) within "
                               f"{bound:g}s: {_reason(exc.__cause__ or exc)}") from exc
    rt.bus = bus
    return bus.close


async def _start_publisher(rt: Runtime) -> Stop:
    """The outbox publisher and its drain task; the process reports the outbox backlog
    (``automem.outbox.backlog``, read at scrape time; automem/common/metrics.py)."""
    from automem.common.metrics import outbox_backlog
    from automem.common.outbox import EventPublisher

    rt.publisher = EventPublisher(rt.bus, rt.graph)
    rt.tasks.append(asyncio.create_task(rt.publisher.drain_forever(), name="outbox"))
    unwatch = outbox_backlog.watch(rt.publisher.backlog, {"db.namespace": rt.graph.name})

    async def stop() -> None:
        unwatch()

    return stop


async def _start_embedder(rt: Runtime) -> None:
    """The embedding provider; None with vectors disabled (nothing would use the model, and
    loading it is the slowest part of a start)."""
    from automem.common.embedding import make_provider

    if rt.settings.vectors_enabled:
        rt.embedder = await asyncio.to_thread(make_provider, rt.settings)


async def _start_vectors(rt: Runtime) -> Stop | None:
    """The vector store, its collection created with the configured provider's dimension.
    The model is not loaded for it: a process whose targets embed nothing (``automem up``'s
    parent when recall and enrich run as children) serves the shard without it."""
    from automem.common.embedding import vector_dimension
    from automem.vectors import make_vector_store
    from automem.vectors.bounded import BoundedVectorStore

    store = make_vector_store(rt.settings)
    if store is None:
        return None
    try:
        await store.ensure_collection(vector_dimension(rt.settings))
    except BaseException as exc:
        await store.close()  # e.g. a dimension mismatch: release the shard, change nothing
        if _qdrant_unreachable(store, exc):
            from automem.common.errors import UnreachableError

            raise UnreachableError(f"cannot reach Qdrant (QDRANT_URL={_without_userinfo(rt.settings.qdrant_url)}): "
                                   f"{_reason(exc)}") from exc
        raise
    rt.vectors = BoundedVectorStore(store, rt.settings.store_timeout_seconds)
    return store.close


def _qdrant_unreachable(store: Any, exc: BaseException) -> bool:
    """Whether ``exc`` (from the start of ``store``) says a Qdrant server cannot be reached:
    no connection (refused, unknown host, timed out), not an answer the server gave."""
    from automem.vectors.server import ServerVectorStore

    if not isinstance(store, ServerVectorStore):
        return False
    import httpx
    from qdrant_client.http.exceptions import ResponseHandlingException

    return isinstance(exc, (ResponseHandlingException, httpx.TransportError, OSError))


def _reason(exc: BaseException) -> str:
    """The first non-empty text of ``exc`` and its causes (qdrant-client's wrapper says
    "All connection attempts failed"; httpx's cause may name the address)."""
    texts = [str(e) for e in (exc, exc.__cause__, exc.__context__) if e is not None and str(e)]
    return texts[0] if texts else type(exc).__name__


def _without_userinfo(url: str) -> str:
    """``url`` without the ``user:password@`` of its authority, if any."""
    scheme, sep, rest = url.strip().partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}" if sep else url.strip()


def _vectors_in_process(settings: Settings) -> bool:
    """True when the vector store lives in this process's files or memory: the embedded
    qdrant-edge shard (``QDRANT_URL`` empty; one opener per directory, a second fails with
    a WAL ``WouldBlock``; automem/vectors/edge.py) or qdrant-client's local mode
    (``:memory:`` / ``local:<dir>``). A Qdrant server (any other URL) is shared by all, and
    so is the embedded shard with ``settings.vector_share`` (``automem up`` serves it to its
    children: automem/vectors/shared.py)."""
    url = settings.qdrant_url.strip()
    embedded_only_here = url == "" and not settings.vector_share
    return settings.vectors_enabled and (embedded_only_here or url == ":memory:" or url.startswith("local:"))


async def _start_grpc(rt: Runtime) -> None:
    from automem.common.grpc_server import Authenticator, GrpcServer
    from automem.common.keys import KeyStore

    keys = KeyStore(rt.graph) if rt.graph is not None else None
    rt.keystore = keys
    rt.grpc_server = GrpcServer(rt.settings, Authenticator(
        rt.settings, keys.lookup if keys else None, keys.any_keys if keys else None))
    if rt.forwarded:
        import grpc

        from automem.common.grpc_tls import channel_credentials, channel_options

        credentials = channel_credentials(rt.settings)
        # A child (re)starting is reachable again within seconds (as automem/common/client.py's channels).
        options = [*channel_options(rt.settings), ("grpc.initial_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 2000)]
        for target, address in rt.forwarded.items():
            channel = (grpc.aio.insecure_channel(address, options=options) if credentials is None
                       else grpc.aio.secure_channel(address, credentials, options=options))
            paths = rt.grpc_server.forward(target_services(target), channel)
            log.info("gRPC calls passed on", extra={"target": target, "address": address, "methods": len(paths)})


def target_services(target: str) -> list[Any]:
    """The gRPC ServiceDescriptors a target serves ([] for one serving none, e.g. gateway)."""
    from automem.v1 import (
        admin_service_pb2,
        consolidate_service_pb2,
        enrich_service_pb2,
        ingest_service_pb2,
        recall_service_pb2,
        review_service_pb2,
    )

    services = {"ingest": [(ingest_service_pb2, "IngestService"), (review_service_pb2, "ReviewService"),
                           (admin_service_pb2, "AdminService")],
                "recall": [(recall_service_pb2, "RecallService")], "enrich": [(enrich_service_pb2, "EnrichService")],
                "consolidate": [(consolidate_service_pb2, "ConsolidateService")]}
    return [module.DESCRIPTOR.services_by_name[name] for module, name in services.get(target, [])]


# --- targets ------------------------------------------------------------------------------


async def _start_ingest(rt: Runtime) -> None:
    from automem.ingest.admin import AdminServicer
    from automem.ingest.review import ReviewServicer
    from automem.ingest.servicer import IngestServicer
    from automem.v1 import (
        admin_service_pb2,
        admin_service_pb2_grpc,
        ingest_service_pb2,
        ingest_service_pb2_grpc,
        review_service_pb2,
        review_service_pb2_grpc,
    )

    rt.ingest = IngestServicer(rt.settings, rt.graph, rt.publisher)
    rt.grpc_server.add(ingest_service_pb2_grpc.add_IngestServiceServicer_to_server, rt.ingest,
                       ingest_service_pb2.DESCRIPTOR.services_by_name["IngestService"].full_name)
    # One set of per-memory locks for both: review decisions and purges write the same
    # memories as IngestService (automem/ingest/memory_locks.py).
    rt.review = ReviewServicer(rt.settings, rt.graph, rt.publisher, locks=rt.ingest.locks)
    rt.grpc_server.add(review_service_pb2_grpc.add_ReviewServiceServicer_to_server, rt.review,
                       review_service_pb2.DESCRIPTOR.services_by_name["ReviewService"].full_name)
    rt.admin = AdminServicer(rt.settings, rt.graph, rt.publisher, rt.keystore)
    rt.grpc_server.add(admin_service_pb2_grpc.add_AdminServiceServicer_to_server, rt.admin,
                       admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name)
    # Purges a failed step left pending finish without their caller (automem/ingest/purge.py).
    rt.tasks.append(asyncio.create_task(rt.review.purger.resume_forever(), name="purge-resume"))


async def _start_recall(rt: Runtime) -> None:
    from automem.recall.servicer import RecallServicer
    from automem.v1 import recall_service_pb2, recall_service_pb2_grpc

    rt.recall = RecallServicer(rt.settings, rt.graph, rt.vectors, rt.embedder)
    rt.recall.server_restarts = rt.server_restarts
    if rt.settings.stream_recall_events:  # memory.recall events for /stream, when this process has the bus
        from automem.recall.activity import publish_recalls

        publish_recalls(rt.recall, lambda: rt.bus)
    rt.grpc_server.add(recall_service_pb2_grpc.add_RecallServiceServicer_to_server, rt.recall,
                       recall_service_pb2.DESCRIPTOR.services_by_name["RecallService"].full_name)


async def _start_enrich(rt: Runtime) -> Stop:
    from automem.enrich.consumer import EnrichConsumer
    from automem.enrich.servicer import EnrichServicer
    from automem.enrich.textkeys import migrate_text_keys
    from automem.v1 import enrich_service_pb2, enrich_service_pb2_grpc

    # Keys written under an older text_key rule, before any enrichment writes (issue 12 item 5).
    await migrate_text_keys(rt.graph, rt.vectors)
    consumer = EnrichConsumer(rt.settings, rt.bus, rt.graph, rt.vectors, rt.embedder)
    consumer.publisher = rt.publisher
    await consumer.start()
    rt.enrich_consumer = consumer
    task = rt.enrich_task = asyncio.create_task(consumer.run(), name="enrich-consumer")
    rt.tasks.append(task)
    sweep = None
    if rt.settings.pending_sweep_interval_seconds > 0:  # vectors or not: automem/enrich/pending.py
        from automem.enrich.pending import PendingSweep

        sweep = PendingSweep(rt.settings, rt.bus, rt.graph, rt.publisher, consumer.sub)
        rt.tasks.append(asyncio.create_task(sweep.run(), name="pending-sweep"))
    from automem.common.metrics import enrichment_queue_depth, enrichment_up

    async def up() -> float:  # 0 once the loop ended, or while its fetches fail
        return 0.0 if task.done() or not consumer.fetching else 1.0

    unwatches = [enrichment_queue_depth.watch(consumer.queue_depth, consumer.metric_attributes),
                 enrichment_up.watch(up, consumer.metric_attributes)]
    servicer = EnrichServicer(rt.settings, consumer, rt.publisher, task)
    rt.grpc_server.add(enrich_service_pb2_grpc.add_EnrichServiceServicer_to_server, servicer,
                       enrich_service_pb2.DESCRIPTOR.services_by_name["EnrichService"].full_name)

    async def stop() -> None:
        for unwatch in unwatches:
            unwatch()
        if sweep is not None:
            sweep.stop()
        consumer.stop()
        # Let the loop finish its fetch and batch (fetch timeout 1 s) rather than cancelling it
        # mid-fetch, which leaves messages in the subscription and stalls the bus drain.
        await asyncio.wait([task], timeout=10)
        await consumer.close()

    return stop


async def _start_consolidate(rt: Runtime) -> Stop:
    """ConsolidateService, its scheduler (when enabled) and, vectors enabled, the
    ``automem.sync.memories`` / ``automem.sync.vectors`` gauges (GetSyncStatus's count check
    at scrape time, once for both; automem/common/metrics.py)."""
    import time

    from automem.common.metrics import sync_memories, sync_vectors
    from automem.consolidate.scheduler import Scheduler
    from automem.consolidate.servicer import ConsolidateServicer
    from automem.v1 import consolidate_service_pb2, consolidate_service_pb2_grpc

    servicer = rt.consolidate = ConsolidateServicer(rt.settings, rt.graph, rt.vectors, rt.publisher)
    rt.grpc_server.add(consolidate_service_pb2_grpc.add_ConsolidateServiceServicer_to_server, servicer,
                       consolidate_service_pb2.DESCRIPTOR.services_by_name["ConsolidateService"].full_name)

    last: dict[str, Any] = {"at": 0.0, "call": None}

    async def counts() -> Any:
        # One GetSyncStatus per scrape for both gauges, whose reads a scrape starts together
        # (automem/common/metrics.py): the second one awaits the call the first one started.
        if last["call"] is None or time.monotonic() - last["at"] > 1.0:
            last["call"], last["at"] = asyncio.ensure_future(servicer.GetSyncStatus(None, None)), time.monotonic()
        return await asyncio.shield(last["call"])

    async def memories() -> float:
        return float((await counts()).memory_count)

    async def vectors() -> float:
        return float((await counts()).vector_count)

    unwatches = []
    if rt.vectors is not None:
        attributes = {"db.namespace": rt.graph.name, "db.collection.name": rt.settings.collection_name}
        unwatches = [sync_memories.watch(memories, attributes), sync_vectors.watch(vectors, attributes)]
    scheduler = None
    if rt.settings.consolidation_enabled:
        scheduler = rt.consolidate_scheduler = Scheduler(rt.settings, servicer)
        servicer.scheduler = scheduler
        scheduler.task = asyncio.create_task(scheduler.run(), name="consolidate-scheduler")
        rt.tasks.append(scheduler.task)

    async def stop() -> None:
        if scheduler is not None:
            scheduler.stop()
        for unwatch in unwatches:
            unwatch()

    return stop


def _service_addresses(rt: Runtime) -> dict[str, str]:
    """Where the gateway reaches each service: ``AUTOMEM_<SERVICE>_ADDR``, else
    ``AUTOMEM_GRPC_TARGET``, else this process's own gRPC server."""
    s = rt.settings
    local = f"127.0.0.1:{rt.grpc_port or s.grpc_port}"
    default = s.grpc_target or local
    return {"ingest": s.ingest_addr or default, "recall": s.recall_addr or default,
            "enrich": s.enrich_addr or default, "consolidate": s.consolidate_addr or default}


async def _start_gateway(rt: Runtime) -> Stop:
    """The FastAPI app on uvicorn, started once the process's gRPC server listens (it may be
    the gateway's own backend); ``rt.http_port`` is the bound port."""
    import uvicorn

    from automem.common.client import AutomemClient
    from automem.common.grpc_tls import channel_credentials, channel_options
    from automem.common.telemetry import grpc_client_interceptors
    from automem.gateway.app import create_app

    running: dict[str, object] = {}

    async def serve(rt: Runtime) -> None:
        addrs = _service_addresses(rt)
        here = {"ingest": rt.ingest, "recall": rt.recall, "enrich": rt.enrich_consumer, "consolidate": rt.consolidate}
        for name, servicer in here.items():
            if servicer is None and not getattr(rt.settings, f"{name}_addr") and not rt.settings.grpc_target:
                # A gateway run apart answered every call with a 503 naming 127.0.0.1 and
                # logged nothing at start (break-it review).
                log.warning("gateway: this process does not serve %s and AUTOMEM_%s_ADDR is empty, so its "
                            "calls go to this process's own port %s", name, name.upper(), addrs[name],
                            extra={"service": name, "address": addrs[name]})
        client = running["client"] = AutomemClient(addrs["ingest"], addrs["recall"], addrs["enrich"],
                                                   addrs["consolidate"], interceptors=grpc_client_interceptors(),
                                                   call_timeout=rt.settings.call_deadline_seconds,
                                                   lb_policy=rt.settings.grpc_lb_policy,
                                                   credentials=channel_credentials(rt.settings),
                                                   channel_options=channel_options(rt.settings))
        app = running["app"] = create_app(rt.settings, client)
        # h11 whatever else is installed: httptools answers a header value with a control
        # character with a bare "Invalid HTTP request received." before the app can name the
        # header (tests/integration/test_hardening.py).
        config = uvicorn.Config(app, host=rt.settings.host, port=rt.settings.port,
                                log_config=None, lifespan="on", access_log=False, http="h11",
                                proxy_headers=True, forwarded_allow_ips=rt.settings.forwarded_allow_ips)
        server = running["server"] = uvicorn.Server(config)
        server.install_signal_handlers = lambda: None  # the runner's owner handles signals
        task = running["task"] = asyncio.create_task(server.serve(), name="gateway")
        rt.tasks.append(task)
        for _ in range(200):
            if server.started:
                break
            if task.done():
                task.result()  # raises the bind error
            await asyncio.sleep(0.05)
        rt.http_port = server.servers[0].sockets[0].getsockname()[1] if server.servers else rt.settings.port
        log.info("gateway listening", extra={"port": rt.http_port})

    rt.after_start.append(serve)

    async def stop() -> None:
        server, task, client = running.get("server"), running.get("task"), running.get("client")
        if server is not None:
            from automem.gateway.routes_stream import close_streams

            close_streams(running["app"])  # open /stream and GET /mcp responses would hold the shutdown
            running["app"].state.mcp_endpoint.end_streams()
            server.should_exit = True
            await asyncio.wait([task], timeout=5)
        if client is not None:
            await client.close()
        rt.http_port = 0

    return stop


#: Every module by name.
MODULES: dict[str, Module] = {m.name: m for m in (
    Module("telemetry", start=_start_telemetry, target=False),
    Module("graph", start=_start_graph, target=False),
    Module("bus", start=_start_bus, target=False),
    Module("publisher", deps=("graph", "bus"), start=_start_publisher, target=False),
    Module("embedder", start=_start_embedder, target=False),
    Module("vectors", start=_start_vectors, target=False, single_process=_vectors_in_process),
    Module("grpc-server", deps=("telemetry", "graph"), start=_start_grpc, target=False),
    Module("ingest", deps=("graph", "publisher", "grpc-server"), start=_start_ingest),
    Module("recall", deps=("graph", "embedder", "vectors", "grpc-server"), start=_start_recall),
    Module("enrich", deps=("graph", "bus", "publisher", "embedder", "vectors", "grpc-server"), start=_start_enrich),
    Module("consolidate", deps=("graph", "publisher", "vectors", "grpc-server"), start=_start_consolidate),
    Module("gateway", deps=("telemetry",), start=_start_gateway),
    Module("all", deps=("ingest", "recall", "enrich", "consolidate", "gateway")),
)}
