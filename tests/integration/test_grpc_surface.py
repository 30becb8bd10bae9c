"""The gRPC surface every server offers: reflection and health (per service, NOT_SERVING once
shutdown begins), and the typed client (automem/common/client.py) over a real server."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from automem.common.client import AutomemClient
from automem.common.settings import Settings
from automem.v1 import memory_pb2
from tests.conftest import eventually, start_service

AUTOMEM_SERVICES = ["automem.v1.ConsolidateService", "automem.v1.EnrichService", "automem.v1.IngestService",
                    "automem.v1.RecallService", "automem.v1.ReviewService"]
#: Services a target serves besides the one it is named after (automem/targets.py).
ALSO_SERVED = {"ingest": ["automem.v1.ReviewService"]}
HEALTH = "grpc.health.v1.Health"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"


def _reflect(address: str, service: str) -> tuple[list[str], list[str]]:
    """Service names the server lists through reflection, and the methods of ``service``
    resolved through it (grpcio-reflection's descriptor database; blocking)."""
    with grpc.insecure_channel(address) as channel:
        db = ProtoReflectionDescriptorDatabase(channel)
        names = sorted(db.get_services())
        methods = [m.name for m in DescriptorPool(db).FindServiceByName(service).methods]
    return names, methods


async def _health(address: str, service: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        response = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5)
        return response.status


async def test_reflection_lists_every_service_and_health_serves_each(settings: Settings) -> None:
    running = await start_service(settings.model_copy(update={"qdrant_url": "disabled"}))
    try:
        names, methods = await asyncio.to_thread(_reflect, running.grpc, "automem.v1.IngestService")
        assert names == sorted([*AUTOMEM_SERVICES, HEALTH, REFLECTION])
        assert {"CreateMemory", "UpdateMemory", "DeleteMemory", "SupersedeMemory"} <= set(methods)
        for service in ["", *AUTOMEM_SERVICES]:
            assert await _health(running.grpc, service) == health_pb2.HealthCheckResponse.SERVING, service
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _health(running.grpc, "automem.v1.NoSuchService")
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await running.runner.stop()


@pytest.mark.parametrize("target,service", [("ingest", "automem.v1.IngestService"),
                                            ("recall", "automem.v1.RecallService"),
                                            ("enrich", "automem.v1.EnrichService"),
                                            ("consolidate", "automem.v1.ConsolidateService")])
async def test_single_target_server_reflects_and_serves_only_its_service(
        settings: Settings, target: str, service: str) -> None:
    running = await start_service(settings.model_copy(update={"qdrant_url": "disabled"}), [target])
    try:
        names, methods = await asyncio.to_thread(_reflect, running.grpc, service)
        served = [service, *ALSO_SERVED.get(target, [])]
        assert names == sorted([*served, HEALTH, REFLECTION]) and methods
        for name in served:
            assert await _health(running.grpc, name) == health_pb2.HealthCheckResponse.SERVING
        assert await _health(running.grpc, "") == health_pb2.HealthCheckResponse.SERVING
        other = next(s for s in AUTOMEM_SERVICES if s not in served)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _health(running.grpc, other)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await running.runner.stop()


async def test_health_watch_sees_not_serving_when_shutdown_begins(settings: Settings) -> None:
    running = await start_service(settings.model_copy(update={"qdrant_url": "disabled",
                                                              "shutdown_grace_seconds": 2.0}), ["ingest"])
    stopped = False
    try:
        async with grpc.aio.insecure_channel(running.grpc) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service="automem.v1.IngestService"))
            first = await watch.read()
            assert first.status == health_pb2.HealthCheckResponse.SERVING
            stopping = asyncio.create_task(running.runner.stop())
            second = await asyncio.wait_for(watch.read(), timeout=10)
            assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
            watch.cancel()
            await stopping
            stopped = True
    finally:
        if not stopped:
            await running.runner.stop()


async def test_typed_client_create_get_update_conflict_search_delete(settings: Settings) -> None:
    running = await start_service(settings.model_copy(update={"qdrant_url": "disabled"}),
                                  ["ingest", "recall"])
    try:
        async with AutomemClient.connect(running.grpc) as client:
            created = await client.create_memory("Prefer tabs over spaces in Go code", tags=["style", "go"],
                                                 importance=0.7, type="Preference", metadata={"lang": "go"})
            assert created.id and created.version >= 1 and list(created.tags) == ["style", "go"]
            assert created.type == memory_pb2.MEMORY_TYPE_PREFERENCE
            assert created.state == memory_pb2.MEMORY_STATE_ACTIVE

            got = await client.get_memory(created.id)
            assert got.is_current and got.memory.content == created.content
            assert got.memory.version == created.version

            updated = await client.update_memory(created.id, etag=created.version, content="Prefer gofmt's tabs",
                                                 importance=0.9)
            assert updated.version > created.version and updated.content == "Prefer gofmt's tabs"
            assert updated.importance == pytest.approx(0.9) and list(updated.tags) == ["style", "go"]
            with pytest.raises(grpc.aio.AioRpcError) as err:  # based on the version before the update
                await client.update_memory(created.id, etag=created.version, content="lost update")
            assert err.value.code() == grpc.StatusCode.ABORTED and "etag" in err.value.details()
            assert (await client.get_memory(created.id)).memory.content == "Prefer gofmt's tabs"

            other = await client.create_memory("Deploy on Fridays is forbidden", tags=["ops"])
            hits = await client.search("gofmt tabs", limit=5)
            assert [h.memory.id for h in hits.results][:1] == [created.id]
            assert list(hits.degraded) == ["vector"] and "keyword" in hits.arms
            tagged = await client.search(tags=["ops"], limit=5)
            assert [h.memory.id for h in tagged.results] == [other.id]

            deleted = await client.delete_memory(created.id)
            assert deleted.id == created.id and deleted.state == memory_pb2.MEMORY_STATE_DELETED
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.get_memory(created.id)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND

            async def gone() -> bool:
                return created.id not in {h.memory.id for h in (await client.search("gofmt tabs")).results}

            await eventually(gone)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.create_memory("   ")
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        await running.runner.stop()
