"""The gRPC surface every server offers: reflection and health (per service, NOT_SERVING once
shutdown begins), the typed client (automem/common/client.py) over a real server, and the
domain shapes of the protos (enums, Timestamps, paging, batch relations)."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from automem.common.client import AutomemClient
from automem.common.settings import Settings
from automem.v1 import events_pb2, ingest_service_pb2, memory_pb2, recall_service_pb2, review_service_pb2
from tests.conftest import eventually, start_service

AUTOMEM_SERVICES = ["automem.v1.AdminService", "automem.v1.ConsolidateService", "automem.v1.EnrichService",
                    "automem.v1.IngestService", "automem.v1.RecallService", "automem.v1.ReviewService"]
#: Services a target serves besides the one it is named after (automem/targets.py).
ALSO_SERVED = {"ingest": ["automem.v1.AdminService", "automem.v1.ReviewService"]}
HEALTH = "grpc.health.v1.Health"
#: Reflection is served under both protocol versions (automem/common/grpc_server.py).
REFLECTION = ("grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection")


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
        assert names == sorted([*AUTOMEM_SERVICES, HEALTH, *REFLECTION])
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
        assert names == sorted([*served, HEALTH, *REFLECTION]) and methods
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


async def test_domain_protos_relations_batch_pages_enums_and_times(settings: Settings) -> None:
    """Issue 11 item 6 over gRPC: BatchCreateRelations answers per item and owns the batch
    limit; related memories page with page_size / page_token; sort and tag modes are enums;
    times are Timestamps; a tag listing needs a tag and an explicit page_size 0 is refused."""
    running = await start_service(settings.model_copy(update={"qdrant_url": "disabled", "batch_max": 3}),
                                  ["ingest", "recall"])
    try:
        async with AutomemClient.connect(running.grpc) as client:
            hub = await client.create_memory("hub of the relation batch", tags=["batch"],
                                             timestamp="2024-01-02T03:04:05.678Z", t_invalid="2090-01-01T00:00:00")
            assert hub.event_time.ToJsonString() == "2024-01-02T03:04:05.678Z"
            assert hub.valid_to.ToJsonString() == "2090-01-01T00:00:00Z"
            spokes = [await client.create_memory(f"spoke {i} of the batch", tags=["batch"],
                                                 timestamp=f"2024-02-0{i + 1}T00:00:00Z") for i in range(2)]

            def link(target: str, type_name: str = "RELATES_TO") -> ingest_service_pb2.CreateRelationRequest:
                return ingest_service_pb2.CreateRelationRequest(
                    relation=memory_pb2.Relation(source_id=hub.id, target_id=target, strength=0.5),
                    type_name=type_name)

            batch = await client.ingest.BatchCreateRelations(ingest_service_pb2.BatchCreateRelationsRequest(
                requests=[link(spokes[0].id), link(spokes[0].id, "NOT_A_TYPE"), link(spokes[1].id, "leads_to")]),
                metadata=client.metadata())
            assert list(batch.indexes) == [0, 2]
            assert [r.type for r in batch.relations] == [memory_pb2.RELATION_TYPE_RELATES_TO,
                                                         memory_pb2.RELATION_TYPE_LEADS_TO]
            assert [(f.index, f.code, f.field) for f in batch.failures] == [
                (1, grpc.StatusCode.INVALID_ARGUMENT.value[0], "type_name")]
            assert batch.failures[0].message.startswith("type_name: unknown relation type 'NOT_A_TYPE'")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.ingest.BatchCreateRelations(ingest_service_pb2.BatchCreateRelationsRequest(
                    requests=[link(spokes[0].id)] * 4), metadata=client.metadata())
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "3" in err.value.details()

            first = await client.recall.ListRelatedMemories(recall_service_pb2.ListRelatedMemoriesRequest(
                id=hub.id, page_size=1), metadata=client.metadata())
            assert len(first.related) == 1 and first.next_page_token
            second = await client.recall.ListRelatedMemories(recall_service_pb2.ListRelatedMemoriesRequest(
                id=hub.id, page_size=1, page_token=first.next_page_token), metadata=client.metadata())
            assert len(second.related) == 1 and not second.next_page_token
            assert {first.related[0].memory.id, second.related[0].memory.id} == {s.id for s in spokes}
            with pytest.raises(grpc.aio.AioRpcError) as err:  # a token of another listing
                await client.recall.ListRelatedMemories(recall_service_pb2.ListRelatedMemoriesRequest(
                    id=spokes[0].id, page_token=first.next_page_token), metadata=client.metadata())
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in err.value.details()

            oldest = await client.search(tags=["batch"], tag_match="exact", sort="time_asc", limit=3)
            assert [h.memory.id for h in oldest.results] == [hub.id, spokes[0].id, spokes[1].id]
            window = await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(
                tags=["batch"], tag_match=recall_service_pb2.TAG_MATCH_EXACT,
                start_time=spokes[0].event_time), metadata=client.metadata())
            assert {h.memory.id for h in window.results} == {s.id for s in spokes}
            assert window.start_time == spokes[0].event_time and not window.HasField("end_time")

            for request, field in ((recall_service_pb2.ListMemoriesByTagRequest(), "tags"),
                                   (recall_service_pb2.ListMemoriesByTagRequest(tags=["batch"], page_size=0),
                                    "page_size")):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await client.recall.ListMemoriesByTag(request, metadata=client.metadata())
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert err.value.details().startswith(field + ":"), err.value.details()
            listed = await client.recall.ListMemoriesByTag(recall_service_pb2.ListMemoriesByTagRequest(
                tags=["batch"]), metadata=client.metadata())
            assert len(listed.memories) == 3  # page_size unset: the default page
    finally:
        await running.runner.stop()


async def test_scoped_client_names_the_test_scope_on_review_and_whoami(service) -> None:
    """The ``service`` fixture's client (tests/conftest.py ``ScopedService.client``) carries the
    test's scope on raw stubs too: WhoAmI answers it, and the ReviewService finds a memory of
    that scope from a request that names no scope (the default scope would answer NOT_FOUND)."""
    async with service.client() as client:
        me = await client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest())
        assert me.scope == service.scope != "default"
        memory = await client.create_memory("a memory for the scoped review stub")
        request = review_service_pb2.ListMemoryEventsRequest(id=memory.id)

        async def created_event_listed() -> bool:
            return bool((await client.review.ListMemoryEvents(request)).events)
        await eventually(created_event_listed)
        history = await client.review.ListMemoryEvents(request)
        assert [e.memory_id for e in history.events][:1] == [memory.id]
        assert history.events[0].type == events_pb2.EVENT_TYPE_MEMORY_CREATED and not history.truncated


async def test_history_needs_a_memory_id_and_its_page_token_is_that_memorys(service) -> None:
    """Break-it review: ListMemoryEvents with an empty ``id`` answered the events of every
    memory of the scope (an event that is not a relation's has empty relation ends, which
    matched the empty id), and a page token of one memory's history read another memory's
    from that offset. An empty id is INVALID_ARGUMENT naming ``id`` now, and a token is
    bound to its memory (automem/common/paging.py)."""
    async with service.client() as client:
        memories = [await client.create_memory(f"history probe {n}") for n in range(2)]
        for m in memories:
            await client.ingest.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(id=m.id, add_tags=["probe"]))
        request = review_service_pb2.ListMemoryEventsRequest(id=memories[0].id, page_size=1)

        async def listed_two() -> bool:
            return bool((await client.review.ListMemoryEvents(request)).next_page_token)
        await eventually(listed_two)
        page = await client.review.ListMemoryEvents(request)
        assert {e.memory_id for e in page.events} == {memories[0].id}
        for bad, field in ((review_service_pb2.ListMemoryEventsRequest(id=""), "id"),
                           (review_service_pb2.ListMemoryEventsRequest(id="  "), "id"),
                           (review_service_pb2.ListMemoryEventsRequest(id=memories[1].id,
                                                                       page_token=page.next_page_token), "page_token")):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await client.review.ListMemoryEvents(bad)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.details().startswith(f"{field}:"), refused.value.details()
        following = await client.review.ListMemoryEvents(review_service_pb2.ListMemoryEventsRequest(
            id=memories[0].id, page_size=1, page_token=page.next_page_token))
        assert [e.memory_id for e in following.events] == [memories[0].id]


async def test_every_request_with_an_id_refuses_an_empty_one_naming_it(service) -> None:
    """Break-it review: an empty or blank ``id`` answered NOT_FOUND ("memory  not found")
    naming no field, from every RPC that acts on one thing. INVALID_ARGUMENT naming ``id``
    now (the interceptor, automem/common/grpc_server.py ``_require_id``), for each such RPC."""
    from automem.v1 import admin_service_pb2

    async with service.client() as client:
        stubs = {"RecallService": client.recall, "IngestService": client.ingest, "ReviewService": client.review,
                 "AdminService": client.admin}
        checked = []
        for module, name in ((recall_service_pb2, "RecallService"), (ingest_service_pb2, "IngestService"),
                             (review_service_pb2, "ReviewService"), (admin_service_pb2, "AdminService")):
            for rpc in module.DESCRIPTOR.services_by_name[name].methods:
                if "id" not in rpc.input_type.fields_by_name or rpc.server_streaming or rpc.client_streaming:
                    continue
                request_class = getattr(module, rpc.input_type.name)
                for blank in ("", "  "):
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await getattr(stubs[name], rpc.name)(request_class(id=blank))
                    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (rpc.name, refused.value)
                    assert refused.value.details().startswith("id:"), (rpc.name, refused.value.details())
                checked.append(rpc.name)
    assert {"GetMemory", "UpdateMemory", "DeleteMemory", "SupersedeMemory", "ListMemoryEvents",
            "RevokeApiKey"} <= set(checked), checked


async def test_a_request_that_does_not_parse_is_invalid_argument_after_authentication(
        settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    """grpcio answered a message it could not parse (invalid UTF-8 in a string field) with
    UNKNOWN and logged a traceback at ERROR for every one, for any client, key or not; now
    the call is authenticated first, then refused as INVALID_ARGUMENT naming the request."""
    service = await start_service(settings.model_copy(update={"api_token": "grpc-surface-token"}))
    # CreateMemoryRequest{memory: MemoryInput{content: b"\xff\xfe"}}: field 1 holding field 1, bad UTF-8.
    bad = b"\x0a\x04\x0a\x02\xff\xfe"
    try:
        async with grpc.aio.insecure_channel(service.grpc) as channel:
            call = channel.unary_unary("/automem.v1.IngestService/CreateMemory")
            with caplog.at_level("ERROR"):
                with pytest.raises(grpc.aio.AioRpcError) as no_key:
                    await call(bad, timeout=10)
                with pytest.raises(grpc.aio.AioRpcError) as keyed:
                    await call(bad, timeout=10, metadata=(("authorization", "Bearer grpc-surface-token"),))
                with pytest.raises(grpc.aio.AioRpcError) as garbage:
                    await call(b"\xff\xff\xff\xff", timeout=10,
                               metadata=(("authorization", "Bearer grpc-surface-token"),))
                # Methods that take no key: an open status read, health, reflection (a stream).
                open_calls = []
                for method in ("/automem.v1.RecallService/GetStats", "/grpc.health.v1.Health/Check"):
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await channel.unary_unary(method)(b"\xff\xff\xff", timeout=10)
                    open_calls.append(refused)
                with pytest.raises(grpc.aio.AioRpcError) as watched:
                    async for _ in channel.unary_stream("/grpc.health.v1.Health/Watch")(b"\xff\xff\xff", timeout=10):
                        pass
                open_calls.append(watched)
                with pytest.raises(grpc.aio.AioRpcError) as reflected:
                    async for _ in channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")(
                            iter([b"\xff\xff\xff"]), timeout=10):
                        pass
                open_calls.append(reflected)
                assert await _health(service.grpc, "") == health_pb2.HealthCheckResponse.SERVING
        assert no_key.value.code() == grpc.StatusCode.UNAUTHENTICATED
        for refused in (keyed, garbage, *open_calls):
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value
            assert refused.value.details().startswith("request: not a valid message"), refused.value.details()
        assert not [r for r in caplog.records if r.levelname == "ERROR" and "grpc" in r.name], caplog.records
        async with AutomemClient(service.grpc, api_key="grpc-surface-token") as client:
            assert (await client.search("anything", limit=1)) is not None  # the server still serves
    finally:
        await service.runner.stop()


async def test_grpc_refuses_what_rest_refuses_non_finite_thresholds_and_long_idempotency_keys(service) -> None:
    """REST refused min_score=NaN and an Idempotency-Key over 255 characters before the
    service saw them; over gRPC both went through (NaN filtered nothing, inf everything; a
    200,000-character key was stored). The services check them now."""
    async with service.client() as client:
        for name, value in (("min_score", float("nan")), ("min_score", float("inf")),
                            ("expand_min_strength", float("-inf")), ("expand_min_importance", float("nan"))):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(
                    query="fact", **{name: value}))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.details().startswith(f"{name}:"), refused.value.details()
        for key, ok in (("k" * 255, True), ("k" * 256, False)):
            call = client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content=f"keyed {len(key)}"), idempotency_key=key))
            if ok:
                assert (await call).memory.id
            else:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert refused.value.details().startswith("idempotency_key:")





async def test_shutdown_finishes_calls_within_its_grace_and_answers_503_after_it(settings: Settings) -> None:
    """The stop on SIGTERM (automem/common/grpc_server.py GrpcServer.stop): a call in flight
    when the shutdown begins finishes if it can within the grace; a call sent after the
    shutdown began, and one still waiting when the grace ends, get a retryable 503
    (``Retry-After``) from the gateway, never a 500."""
    running = await start_service(settings.model_copy(update={"qdrant_url": "disabled"}))
    try:
        async with running.http() as http:
            ids = [(await http.post("/memory", json={"content": f"edited while stopping {n}"})).json()["memory_id"]
                   for n in (1, 2)]
            locks = running.ctx.ingest.locks

            def in_flight(mid: str):  # the PATCH has reached the server and waits for the lock
                async def check() -> bool:
                    entry = locks._entries.get(mid)
                    return entry is not None and entry.users == 2
                return check

            async with locks.hold(ids[1]):
                async with locks.hold(ids[0]):
                    within, past = [asyncio.create_task(http.patch(f"/memory/{mid}", json={"importance": 0.9}))
                                    for mid in ids]
                    for mid in ids:
                        await eventually(in_flight(mid))
                    stopping = asyncio.create_task(running.ctx.grpc_server.stop(3.0))
                    refused = await http.post("/memory", json={"content": "sent after the shutdown began"})
                assert (await within).status_code == 200
                await stopping  # the grace ends with the second PATCH still waiting
            running.ctx.grpc_port = 0
            assert refused.status_code == 503 and refused.headers["Retry-After"], refused.text
            answer = await past
            assert answer.status_code == 503 and answer.headers["Retry-After"], answer.text
    finally:
        await running.runner.stop()
