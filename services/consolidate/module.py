"""Registers the ``consolidate`` target: the ConsolidateService."""

from __future__ import annotations

from automem.v1 import consolidate_service_pb2, consolidate_service_pb2_grpc

from services.common.modules import Context, Module, register


async def _start(ctx: Context) -> None:
    from services.consolidate.servicer import ConsolidateServicer

    servicer = ConsolidateServicer(ctx.settings, ctx["graph"], ctx.get("vectors"), ctx["publisher"])
    ctx["grpc_server"].add(consolidate_service_pb2_grpc.add_ConsolidateServiceServicer_to_server, servicer,
                           consolidate_service_pb2.DESCRIPTOR.services_by_name["ConsolidateService"].full_name)


register(Module("consolidate", deps=("graph", "publisher", "vectors", "grpc-server"), start=_start))
