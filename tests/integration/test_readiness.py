"""Probes that mean the right thing (issue 15, item 2), on the real processes: while the
service's own FalkorDB is stopped (SIGSTOP), each gRPC service that needs it reports
NOT_SERVING on grpc.health.v1 and the gateway's ``/readyz`` answers 503, while liveness (the
gRPC ``liveness`` service, ``/livez``) stays SERVING / 200; after SIGCONT everything is back."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from nats.js.errors import NotFoundError

from automem.common.bus import ENRICH_DURABLE
from automem.common.embedded import EmbeddedFalkorDB, EmbeddedNats
from automem.common.readiness import LIVENESS_SERVICE, NEEDS
from automem.common.settings import Settings
from tests.conftest import eventually, start_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


@contextlib.asynccontextmanager
async def _on_own_server(server: EmbeddedFalkorDB | EmbeddedNats, settings: Settings,
                         pointing: Callable[[Any], dict[str, Any]]):
    """Start ``server`` and a service on it (``settings`` updated with ``pointing(server)``, a
    1-s store bound and readiness checks every 0.2 s); yields ``(service, stop, resume)``:
    SIGSTOP / SIGCONT of the server's process. Resumed and stopped at the end."""
    await server.start()
    stopped = False
    try:
        service = await start_service(settings.model_copy(update={
            **pointing(server), "store_timeout_seconds": 1.0,
            "health_check_interval_seconds": 0.2}))
        try:
            def stop() -> None:
                nonlocal stopped
                os.kill(server.pid, signal.SIGSTOP)
                stopped = True

            def resume() -> None:
                nonlocal stopped
                if stopped:
                    os.kill(server.pid, signal.SIGCONT)
                    stopped = False
            yield service, stop, resume
            resume()
        finally:
            if stopped:
                os.kill(server.pid, signal.SIGCONT)
            await service.runner.stop()
    finally:
        await server.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def on_own_falkordb(settings: Settings, tmp_path: Path):
    server = EmbeddedFalkorDB(tmp_path / "own-falkordb")
    async with _on_own_server(server, settings, lambda s: {"falkordb_host": s.host, "falkordb_port": s.port}) as running:
        yield running


async def _statuses(channel: grpc.aio.Channel) -> dict[str, int]:
    stub = health_pb2_grpc.HealthStub(channel)
    out = {}
    for name in [LIVENESS_SERVICE, "", *NEEDS]:
        out[name] = (await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)).status
    return out


def _service_is(channel: grpc.aio.Channel, service: str, status: int):
    """A check for :func:`eventually`: every status (:func:`_statuses`) once ``service`` is ``status``."""
    async def check():
        statuses = await _statuses(channel)
        return statuses if statuses[service] == status else None
    return check


async def test_readiness_follows_falkordb_and_liveness_does_not(on_own_falkordb) -> None:
    service, stop, resume = on_own_falkordb
    async with grpc.aio.insecure_channel(service.grpc) as channel, httpx.AsyncClient(
            base_url=service.url, timeout=30) as http:
        first = await _statuses(channel)
        assert set(first.values()) == {SERVING}, (first, service.ctx.readiness.stores)
        assert (await http.get("/readyz")).status_code == 200
        assert (await http.get("/livez")).json() == {"status": "alive"}

        stop()

        async def not_ready():
            statuses = await _statuses(channel)
            return statuses if all(statuses[name] == NOT_SERVING for name in ["", *NEEDS]) else None
        statuses = await eventually(not_ready, timeout=30)
        assert statuses[LIVENESS_SERVICE] == SERVING
        r = await http.get("/readyz")
        assert r.status_code == 503 and r.json()["status"] == "not_ready"
        assert r.json()["services"] == {"automem.v1.IngestService": False, "automem.v1.RecallService": False}
        assert (await http.get("/livez")).status_code == 200

        resume()

        async def ready():
            return set((await _statuses(channel)).values()) == {SERVING}
        await eventually(ready, timeout=30)
        assert (await http.get("/readyz")).status_code == 200


async def test_nats_outage_leaves_ingest_and_the_gateway_ready_and_enrich_not(settings: Settings,
                                                                                tmp_path: Path) -> None:
    """Writes survive a bus outage through the outbox, so ingest (and with it ``/readyz``)
    stays ready while NATS is down; enrichment, which cannot fetch, does not."""
    nats = EmbeddedNats(tmp_path / "own-nats")
    await nats.start()
    try:
        service = await start_service(settings.model_copy(update={
            "nats_url": nats.url, "store_timeout_seconds": 1.0, "health_check_interval_seconds": 0.2}))
        try:
            async with grpc.aio.insecure_channel(service.grpc) as channel, httpx.AsyncClient(
                    base_url=service.url, timeout=30) as http:
                assert set((await _statuses(channel)).values()) == {SERVING}
                await nats.stop()

                async def enrich_not_ready():
                    statuses = await _statuses(channel)
                    return statuses if statuses["automem.v1.EnrichService"] == NOT_SERVING else None
                statuses = await eventually(enrich_not_ready, timeout=30)
                assert statuses["automem.v1.IngestService"] == SERVING, statuses
                assert statuses["automem.v1.RecallService"] == SERVING, statuses
                r = await http.get("/readyz")
                assert r.status_code == 200, r.text
                assert (await http.post("/memory", json={"content": "stored while NATS is down"})).status_code == 201
        finally:
            await service.runner.stop()
    finally:
        await nats.stop()


async def test_enrich_is_not_ready_while_it_cannot_fetch_and_its_consumer_comes_back(settings: Settings) -> None:
    """With its durable consumer gone, every fetch fails: EnrichService reports NOT_SERVING
    (it stayed SERVING while enrichment stalled). A restore under way removes the consumer
    on purpose (automem/common/backup.py), so it is not made again then; once the restore is
    over the consumer makes it again and EnrichService is SERVING."""
    service = await start_service(settings.model_copy(update={"health_check_interval_seconds": 0.2}))
    try:
        bus, graph = service.ctx.bus, service.ctx.graph
        async with grpc.aio.insecure_channel(service.grpc) as channel:
            await graph.dump.mark_restore(time.time())
            await bus.stop_consumer(ENRICH_DURABLE)

            def enrich_is(status: int):
                return _service_is(channel, "automem.v1.EnrichService", status)
            statuses = await eventually(enrich_is(NOT_SERVING), timeout=30)
            assert statuses["automem.v1.IngestService"] == SERVING, statuses
            with pytest.raises(NotFoundError):
                await bus.js.consumer_info(service.settings.stream_name, ENRICH_DURABLE)

            await graph.dump.unmark_restore()
            await eventually(enrich_is(SERVING), timeout=30)
            info = await bus.js.consumer_info(service.settings.stream_name, ENRICH_DURABLE)
            assert info.config.filter_subjects == bus.consumer_config(ENRICH_DURABLE).filter_subjects
    finally:
        await service.runner.stop()


async def test_a_stalled_nats_makes_the_services_that_need_it_not_ready(settings: Settings, tmp_path: Path) -> None:
    """The bus check read nats-py's connection flag, which stays up for minutes after the
    server stops answering on an open connection (SIGSTOP: its pings come every 2 min), so
    AdminService (FalkorDB and NATS) stayed SERVING. It now asks for a round trip within a
    bound: NOT_SERVING while the server is stopped, SERVING again after it resumes; services
    that need FalkorDB only, and liveness, stay SERVING."""
    nats = EmbeddedNats(tmp_path / "own-nats")
    async with (_on_own_server(nats, settings, lambda s: {"nats_url": s.url}) as (service, stop, resume),
                grpc.aio.insecure_channel(service.grpc) as channel):
        assert set((await _statuses(channel)).values()) == {SERVING}
        stop()
        statuses = await eventually(_service_is(channel, "automem.v1.AdminService", NOT_SERVING), timeout=30)
        assert service.ctx.readiness.stores["bus"] is False, service.ctx.readiness.stores
        assert statuses[LIVENESS_SERVICE] == SERVING, statuses
        assert statuses["automem.v1.IngestService"] == SERVING, statuses
        assert statuses["automem.v1.RecallService"] == SERVING, statuses
        resume()
        await eventually(_service_is(channel, "automem.v1.AdminService", SERVING), timeout=30)
        assert service.ctx.readiness.stores["bus"] is True
