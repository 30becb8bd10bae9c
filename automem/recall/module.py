"""Registers the ``recall`` target: the RecallService on the shared gRPC server."""

from __future__ import annotations

from automem.common.modules import Context, Module, register
from automem.v1 import recall_service_pb2, recall_service_pb2_grpc


async def _start(ctx: Context) -> None:
    from automem.recall.servicer import RecallServicer

    servicer = RecallServicer(ctx.settings, ctx["graph"], ctx.get("vectors"), ctx.get("embedder"))
    ctx.objects["recall"] = servicer
    ctx["grpc_server"].add(recall_service_pb2_grpc.add_RecallServiceServicer_to_server, servicer,
                           recall_service_pb2.DESCRIPTOR.services_by_name["RecallService"].full_name)


register(Module("recall", deps=("graph", "embedder", "vectors", "grpc-server"), start=_start))
