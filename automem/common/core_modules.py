"""Internal modules shared by the services: telemetry, stores, bus, embedder, gRPC server.

None of them is a target; the service modules depend on them.
"""

from __future__ import annotations

import asyncio
import logging

from automem.common.modules import Context, Module, register

log = logging.getLogger(__name__)


async def _start_telemetry(ctx: Context) -> None:
    from automem.common.telemetry import configure_tracing

    configure_tracing(ctx.settings)


async def _stop_telemetry(ctx: Context) -> None:
    from automem.common.telemetry import flush_tracing

    await asyncio.to_thread(flush_tracing)


async def _start_graph(ctx: Context) -> None:
    from automem.graph import GraphStore

    graph = GraphStore(ctx.settings)
    await graph.ensure_schema()
    ctx.objects["graph"] = graph


async def _stop_graph(ctx: Context) -> None:
    await ctx["graph"].close()


async def _start_bus(ctx: Context) -> None:
    from automem.common.bus import Bus

    bus = Bus(ctx.settings)
    await bus.connect()
    ctx.objects["bus"] = bus


async def _stop_bus(ctx: Context) -> None:
    await ctx["bus"].close()


async def _start_publisher(ctx: Context) -> None:
    from automem.common.outbox import EventPublisher

    publisher = EventPublisher(ctx["bus"], ctx["graph"])
    ctx.objects["publisher"] = publisher
    ctx.tasks.append(asyncio.create_task(publisher.drain_forever(), name="outbox"))


async def _start_embedder(ctx: Context) -> None:
    """The embedding provider; None with vectors disabled (nothing would use the model, and
    loading it is the slowest part of a start)."""
    from automem.common.embedding import make_provider

    if not ctx.settings.vectors_enabled:
        ctx.objects["embedder"] = None
        return
    ctx.objects["embedder"] = await asyncio.to_thread(make_provider, ctx.settings)


async def _start_vectors(ctx: Context) -> None:
    from automem.vectors import make_vector_store

    store = make_vector_store(ctx.settings)
    if store is not None:
        try:
            await store.ensure_collection(ctx["embedder"].dimension)
        except BaseException:
            await store.close()  # e.g. a dimension mismatch: release the shard, change nothing
            raise
    ctx.objects["vectors"] = store


async def _stop_vectors(ctx: Context) -> None:
    store = ctx.get("vectors")
    if store is not None:
        await store.close()


async def _start_grpc(ctx: Context) -> None:
    from automem.common.grpc_server import Authenticator, GrpcServer
    from automem.common.keys import KeyStore

    keys = KeyStore(ctx["graph"]) if ctx.get("graph") is not None else None
    ctx.objects["keystore"] = keys
    ctx.objects["grpc_server"] = GrpcServer(ctx.settings, Authenticator(
        ctx.settings, keys.lookup if keys else None, keys.any_keys if keys else None))


register(Module("telemetry", start=_start_telemetry, stop=_stop_telemetry, target=False))
register(Module("graph", start=_start_graph, stop=_stop_graph, target=False))
register(Module("bus", start=_start_bus, stop=_stop_bus, target=False))
register(Module("publisher", deps=("graph", "bus"), start=_start_publisher, target=False))
register(Module("embedder", start=_start_embedder, target=False))
register(Module("vectors", deps=("embedder",), start=_start_vectors, stop=_stop_vectors, target=False))
register(Module("grpc-server", deps=("telemetry", "graph"), start=_start_grpc, target=False))
register(Module("all", deps=("ingest", "recall", "enrich", "consolidate", "gateway")))
