"""Registers the ``enrich`` target: the JetStream consumer and the EnrichService."""

from __future__ import annotations

import asyncio

from automem.common.modules import Context, Module, register
from automem.v1 import enrich_service_pb2, enrich_service_pb2_grpc


async def _start(ctx: Context) -> None:
    from automem.enrich.consumer import EnrichConsumer
    from automem.enrich.servicer import EnrichServicer

    consumer = EnrichConsumer(ctx.settings, ctx["bus"], ctx["graph"], ctx.get("vectors"), ctx.get("embedder"))
    consumer.publisher = ctx.get("publisher")
    await consumer.start()
    ctx.objects["enrich_consumer"] = consumer
    task = asyncio.create_task(consumer.run(), name="enrich-consumer")
    ctx.objects["enrich_task"] = task
    ctx.tasks.append(task)
    servicer = EnrichServicer(ctx.settings, consumer, ctx.get("publisher"))
    ctx["grpc_server"].add(enrich_service_pb2_grpc.add_EnrichServiceServicer_to_server, servicer,
                           enrich_service_pb2.DESCRIPTOR.services_by_name["EnrichService"].full_name)


async def _stop(ctx: Context) -> None:
    consumer = ctx.get("enrich_consumer")
    if consumer is not None:
        consumer.stop()
        # Let the loop finish its fetch and batch (fetch timeout 1 s) rather than cancelling it
        # mid-fetch, which leaves messages in the subscription and stalls the bus drain.
        task = ctx.get("enrich_task")
        if task is not None:
            await asyncio.wait([task], timeout=10)
        await consumer.close()


register(Module("enrich", deps=("graph", "bus", "publisher", "embedder", "vectors", "grpc-server"),
                start=_start, stop=_stop))
