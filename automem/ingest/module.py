"""Registers the ``ingest`` target: the IngestService on the shared gRPC server."""

from __future__ import annotations

from automem.common.modules import Context, Module, register
from automem.v1 import ingest_service_pb2, ingest_service_pb2_grpc


async def _start(ctx: Context) -> None:
    from automem.ingest.servicer import IngestServicer

    servicer = IngestServicer(ctx.settings, ctx["graph"], ctx["publisher"])
    ctx.objects["ingest"] = servicer
    ctx["grpc_server"].add(ingest_service_pb2_grpc.add_IngestServiceServicer_to_server, servicer,
                           ingest_service_pb2.DESCRIPTOR.services_by_name["IngestService"].full_name)


register(Module("ingest", deps=("graph", "publisher", "grpc-server"), start=_start))
