"""Registers the ``enrich`` target: the JetStream consumer and the EnrichService."""

from __future__ import annotations

import asyncio

from automem.v1 import enrich_service_pb2, enrich_service_pb2_grpc

from services.common.modules import Context, Module, register


async def _start(ctx: Context) -> None:
    from services.enrich.consumer import EnrichConsumer
    from services.enrich.servicer import EnrichServicer

    consumer = EnrichConsumer(ctx.settings, ctx["bus"], ctx["graph"], ctx.get("vectors"), ctx.get("embedder"))
    consumer.publisher = ctx.get("publisher")
    await consumer.start()
    ctx.objects["enrich_consumer"] = consumer
    ctx.tasks.append(asyncio.create_task(consumer.run(), name="enrich-consumer"))
    servicer = EnrichServicer(ctx.settings, consumer, ctx.get("publisher"))
    ctx["grpc_server"].add(enrich_service_pb2_grpc.add_EnrichServiceServicer_to_server, servicer,
                           enrich_service_pb2.DESCRIPTOR.services_by_name["EnrichService"].full_name)


async def _stop(ctx: Context) -> None:
    consumer = ctx.get("enrich_consumer")
    if consumer is not None:
        consumer.stop()
        await consumer.enricher.close()


register(Module("enrich", deps=("graph", "bus", "publisher", "embedder", "vectors", "grpc-server"),
                start=_start, stop=_stop))
