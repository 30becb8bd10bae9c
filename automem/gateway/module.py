"""Registers the ``gateway`` target: the FastAPI app served by uvicorn.

It reaches the services over gRPC: per-service addresses from settings
(``AUTOMEM_INGEST_ADDR``...), else ``AUTOMEM_GRPC_TARGET``, else this process's own server.
"""

from __future__ import annotations

import asyncio
import logging

import uvicorn

from automem.common.modules import Context, Module, register

log = logging.getLogger(__name__)


def _addresses(ctx: Context) -> dict[str, str]:
    s = ctx.settings
    local = f"127.0.0.1:{ctx.get('grpc_port') or s.grpc_port}"
    default = s.grpc_target or local
    return {"ingest": s.ingest_addr or default, "recall": s.recall_addr or default,
            "enrich": s.enrich_addr or default, "consolidate": s.consolidate_addr or default}


async def _serve(ctx: Context) -> None:
    from automem.common.client import AutomemClient
    from automem.common.telemetry import grpc_client_interceptors
    from automem.gateway.app import create_app

    addrs = _addresses(ctx)
    client = AutomemClient(addrs["ingest"], addrs["recall"], addrs["enrich"], addrs["consolidate"],
                           interceptors=grpc_client_interceptors())
    app = create_app(ctx.settings, client)
    config = uvicorn.Config(app, host=ctx.settings.host, port=ctx.settings.port, log_config=None,
                            lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # the runner owns signals
    ctx.objects["gateway_server"] = server
    ctx.objects["gateway_client"] = client
    ctx.tasks.append(asyncio.create_task(server.serve(), name="gateway"))
    for _ in range(200):
        if server.started:
            break
        if ctx.tasks[-1].done():
            ctx.tasks[-1].result()  # raises the bind error
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1] if server.servers else ctx.settings.port
    ctx.objects["http_port"] = port
    log.info("gateway listening", extra={"port": port})


async def _start(ctx: Context) -> None:
    ctx.objects.setdefault("after_start", []).append(_serve)


async def _stop(ctx: Context) -> None:
    server = ctx.get("gateway_server")
    if server is not None:
        server.should_exit = True
        for task in ctx.tasks:
            if task.get_name() == "gateway":
                await asyncio.wait([task], timeout=5)
    client = ctx.get("gateway_client")
    if client is not None:
        await client.close()


register(Module("gateway", deps=("telemetry",), start=_start, stop=_stop))
