"""Registers the ``consolidate`` target: the ConsolidateService and its scheduler."""

from __future__ import annotations

import asyncio

from automem.common.modules import Context, Module, register
from automem.v1 import consolidate_service_pb2, consolidate_service_pb2_grpc


async def _start(ctx: Context) -> None:
    from automem.consolidate.scheduler import Scheduler
    from automem.consolidate.servicer import ConsolidateServicer

    servicer = ConsolidateServicer(ctx.settings, ctx["graph"], ctx.get("vectors"), ctx["publisher"])
    ctx["grpc_server"].add(consolidate_service_pb2_grpc.add_ConsolidateServiceServicer_to_server, servicer,
                           consolidate_service_pb2.DESCRIPTOR.services_by_name["ConsolidateService"].full_name)
    ctx.objects["consolidate_servicer"] = servicer
    if ctx.settings.consolidation_enabled:
        scheduler = Scheduler(ctx.settings, servicer)
        servicer.scheduler = scheduler
        ctx.objects["consolidate_scheduler"] = scheduler
        ctx.tasks.append(asyncio.create_task(scheduler.run(), name="consolidate-scheduler"))


async def _stop(ctx: Context) -> None:
    scheduler = ctx.get("consolidate_scheduler")
    if scheduler is not None:
        scheduler.stop()


register(Module("consolidate", deps=("graph", "publisher", "vectors", "grpc-server"), start=_start, stop=_stop))
