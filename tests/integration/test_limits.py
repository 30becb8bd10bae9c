"""Limits (issue 5): request body size (413), batch size (400 naming 500), recall limit cap
(clamped and reported since issue 13; 0 refused naming ``limit``), and the per-key rate limit (429 over REST, RESOURCE_EXHAUSTED over
gRPC; ``AUTOMEM_RATE_LIMIT``, off by default), each naming the limit."""

from __future__ import annotations

from typing import Any

import grpc

from automem.common.client import AutomemClient
from automem.common.settings import Settings
from automem.v1 import recall_service_pb2
from tests.conftest import start_service


async def test_body_batch_and_recall_limits(settings) -> None:
    running = await start_service(settings.model_copy(update={"max_body_bytes": 64 * 1024}))
    try:
        async with running.http() as http:
            r = await http.post("/memory", json={"content": "x" * (70 * 1024)})
            assert r.status_code == 413 and "65536 bytes" in r.json()["error"], r.text
            r = await http.post("/memory/batch", json={"memories": [{"content": f"m{i}"} for i in range(501)]})
            assert r.status_code == 400 and "500" in r.json()["error"], r.text
            r = await http.post("/associate", json={"associations": [
                {"memory1_id": "a", "memory2_id": "b"} for _ in range(501)]})
            assert r.status_code == 400 and "500" in r.json()["error"], r.text
            # Above the cap a limit is clamped and reported, as AutoMem does (issue 13 item 2;
            # tests/integration/test_automem_parity.py covers it on every door).
            r = await http.get("/recall", params={"query": "x", "limit": 101})
            assert r.status_code == 200 and r.json()["limit"] == 100, r.text
            r = await http.get("/memory/by-tag", params={"tags": "a", "limit": 201})
            assert r.status_code == 200 and r.json()["limit"] == 200, r.text
            r = await http.post("/memory", json={"content": "y" * 2001})
            assert r.status_code == 400 and "2000" in r.json()["error"], r.text
        async with AutomemClient.connect(running.grpc) as client:
            found = await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(query="x", limit=1000))
            assert found.limit == 100
            try:
                await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(query="x", limit=0))
                raise AssertionError("limit 0 accepted")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit" in exc.details()
    finally:
        await running.runner.stop()


def test_rate_limit_off_by_default() -> None:
    assert Settings(_env_file=None).rate_limit == ""


async def test_rate_limit_per_key(settings) -> None:
    running = await start_service(settings.model_copy(update={"rate_limit": "5/minute", "api_token": "root"}))
    try:
        keys = running.ctx.keystore
        key_a, _ = await keys.create("writer", ["a/*"], "a/x")
        key_b, _ = await keys.create("writer", ["b/*"], "b/x")
        async with running.http(Authorization=f"Bearer {key_a}") as http:
            statuses = [(await http.get("/recall")).status_code for _ in range(5)]
            assert statuses == [200] * 5
            r = await http.get("/recall")
            assert r.status_code == 429, r.text
            assert "5 requests per 1 minute" in r.json()["error"] and "AUTOMEM_RATE_LIMIT" in r.json()["error"]
            assert (await http.post("/memory", json={"content": "over the limit"})).status_code == 429
        async with AutomemClient.connect(running.grpc, api_key=key_a) as client:
            try:
                await client.search("x")
                raise AssertionError("rate limit not applied over gRPC")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "5 requests per 1 minute" in exc.details()
        # Another key has its own budget; /health is not counted.
        async with running.http(Authorization=f"Bearer {key_b}") as http:
            assert (await http.get("/recall")).status_code == 200
            assert [(await http.get("/health")).status_code for _ in range(8)] == [200] * 8
    finally:
        await running.runner.stop()


def test_rate_limit_setting_is_parsed() -> None:
    from automem.common.errors import InvalidArgument
    from automem.common.grpc_server import RateLimiter

    assert RateLimiter("").items == []
    assert [i.amount for i in RateLimiter("50/second;1000/hour").items] == [50, 1000]
    try:
        RateLimiter("lots")
        raise AssertionError("bad spec accepted")
    except InvalidArgument as exc:
        assert "AUTOMEM_RATE_LIMIT" in exc.message


async def test_reasons_longer_than_the_limit_are_refused_naming_the_field(service) -> None:
    """Every request that takes a free-text reason refuses one over MAX_REASON characters
    with INVALID_ARGUMENT / 400 naming ``reason``, and changes nothing."""
    from automem.ingest.logic import MAX_REASON
    from automem.v1 import ingest_service_pb2, memory_pb2, review_service_pb2

    long = "r" * (MAX_REASON + 1)
    client = service.client()
    try:
        created = await client.create_memory("A memory whose reasons are checked", tags=["reason-limit"])
        mid = created.id
        other = (await client.create_memory("Another memory to relate", tags=["reason-limit"])).id
        calls = {
            "DeleteMemory": client.ingest.DeleteMemory(ingest_service_pb2.DeleteMemoryRequest(id=mid, reason=long)),
            "SupersedeMemory": client.ingest.SupersedeMemory(ingest_service_pb2.SupersedeMemoryRequest(
                id=mid, replacement=ingest_service_pb2.MemoryInput(content="Its replacement"), reason=long)),
            "CreateRelation": client.ingest.CreateRelation(ingest_service_pb2.CreateRelationRequest(
                relation=memory_pb2.Relation(source_id=mid, target_id=other, reason=long))),
            "ApproveReviewItem": client.review.ApproveReviewItem(
                review_service_pb2.ApproveReviewItemRequest(id=mid, reason=long)),
            "RejectReviewItem": client.review.RejectReviewItem(
                review_service_pb2.RejectReviewItemRequest(id=mid, reason=long)),
            "MergeEntities": client.review.MergeEntities(
                review_service_pb2.MergeEntitiesRequest(slug="a", merge_into="b", reason=long)),
            "PurgeMemory": client.review.PurgeMemory(review_service_pb2.PurgeMemoryRequest(id=mid, reason=long)),
        }
        for name, call in calls.items():
            try:
                await call
                raise AssertionError(f"{name} accepted a {len(long)}-character reason")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, exc.code(), exc.details())
                field = "relation.reason" if name == "CreateRelation" else "reason"  # the request's proto path
                assert exc.details().startswith(f"{field}:") and str(MAX_REASON) in exc.details(), (name, exc.details())
        async with service.http() as http:
            r = await http.delete(f"/memory/{mid}", params={"reason": long})
            assert r.status_code == 400 and "reason" in r.json()["error"], r.text
            r = await http.post("/associate", json={"memory1_id": mid, "memory2_id": other, "reason": long})
            assert r.status_code == 400 and "reason" in r.json()["error"], r.text
            # nothing changed: the memory is still active, unrelated, and a reason at the limit is taken
            r = await http.get(f"/memory/{mid}")
            assert r.status_code == 200 and r.json()["memory"]["state"] == "ACTIVE", r.text
            r = await http.get(f"/memories/{mid}/related")
            authored = {m["id"] for m in r.json().get("related_memories", []) if m["relation_type"] == "RELATES_TO"}
            assert other not in authored, r.text  # (enrichment may link them by PRECEDED_BY)
            r = await http.delete(f"/memory/{mid}", params={"reason": "r" * MAX_REASON})
            assert r.status_code == 200, r.text
    finally:
        await client.close()


def test_in_flight_limit_admits_up_to_its_size_and_frees_each_place() -> None:
    """``InFlightLimit`` holds at most ``limit`` places; one more is refused with UNAVAILABLE
    naming AUTOMEM_MAX_IN_FLIGHT; a place freed (also by a call that failed) is taken again;
    0 never refuses. The default is 128 (README.md, docs/kubernetes.md)."""
    import contextlib

    from automem.common.errors import Unavailable
    from automem.common.grpc_server import InFlightLimit

    assert Settings(_env_file=None).max_in_flight == 128
    limit = InFlightLimit(2)
    with contextlib.ExitStack() as held:
        held.enter_context(limit.admitted())
        held.enter_context(limit.admitted())
        try:
            with limit.admitted():
                raise AssertionError("a third call was admitted past a limit of 2")
        except Unavailable as exc:
            assert exc.code == grpc.StatusCode.UNAVAILABLE and "AUTOMEM_MAX_IN_FLIGHT" in exc.message
        assert limit.running == 2
    with contextlib.suppress(ValueError), limit.admitted():
        raise ValueError("the call failed")
    assert limit.running == 0
    unlimited = InFlightLimit(0)
    with contextlib.ExitStack() as held:
        for _ in range(1000):
            held.enter_context(unlimited.admitted())


async def test_requests_past_the_in_flight_limit_get_a_quick_503_and_the_rest_are_served(settings) -> None:
    """With ``AUTOMEM_MAX_IN_FLIGHT=1`` requests one at a time are all served (no REST route
    here holds two calls at once), 24 recalls at once over REST and gRPC are partly refused —
    503 with Retry-After / UNAVAILABLE naming the setting, nothing else — while /health
    answers 200 throughout, and the service serves again once they are done."""
    import asyncio

    running = await start_service(settings.model_copy(update={"max_in_flight": 1}))
    try:
        async with running.http() as http:
            for i in range(3):
                r = await http.post("/memory", json={"content": f"Admission test memory {i} about gardens",
                                                     "tags": ["admission"]})
                assert r.status_code == 201, r.text
                r = await http.get("/recall", params={"query": "gardens", "tags": "admission"})
                assert r.status_code == 200, r.text

            async def recall() -> Any:
                return await http.get("/recall", params={"query": "which garden memories exist", "limit": 20})

            answers = await asyncio.gather(*(recall() for _ in range(24)), http.get("/health"))
            health, answers = answers[-1], answers[:-1]
            assert health.status_code == 200, health.text
            statuses = sorted({r.status_code for r in answers})
            assert statuses == [200, 503], statuses
            refused = next(r for r in answers if r.status_code == 503)
            assert "AUTOMEM_MAX_IN_FLIGHT" in refused.json()["error"] and refused.headers.get("Retry-After")
            assert (await http.get("/recall", params={"query": "gardens"})).status_code == 200
        async with running.client() as client:
            outcomes = await asyncio.gather(*(client.search("gardens", limit=20) for _ in range(24)),
                                            return_exceptions=True)
            failures = [o for o in outcomes if isinstance(o, BaseException)]
            assert failures and len(failures) < len(outcomes), outcomes
            for failure in failures:
                assert isinstance(failure, grpc.aio.AioRpcError), failure
                assert failure.code() == grpc.StatusCode.UNAVAILABLE and "AUTOMEM_MAX_IN_FLIGHT" in failure.details()
            assert len((await client.search("gardens", limit=20)).results) == 3
    finally:
        await running.runner.stop()


async def test_a_gateway_run_apart_says_which_services_it_will_not_find(settings) -> None:
    """Break-it review: ``automem serve --target gateway`` without AUTOMEM_*_ADDR sent every
    call to its own port and said nothing at start (each call then answered 503). It now
    warns once per service it does not serve and has no address for, naming the setting; a
    service given an address, or served in the same process, gets no warning."""
    import logging

    from tests.conftest import LogCapture

    capture, logger = LogCapture(), logging.getLogger("automem.targets")
    logger.addHandler(capture)
    try:
        running = await start_service(settings.model_copy(update={"recall_addr": "127.0.0.1:1"}),
                                      targets=["gateway", "ingest"])
        await running.runner.stop()
    finally:
        logger.removeHandler(capture)
    named = sorted(r.service for r in capture.records if r.levelno == logging.WARNING and hasattr(r, "service"))
    assert named == ["consolidate", "enrich"], [r.getMessage() for r in capture.records]
    assert any("AUTOMEM_ENRICH_ADDR is empty" in r.getMessage() for r in capture.records)


async def test_health_names_the_services_and_does_not_call_stores_down_it_could_not_ask(settings, service) -> None:
    """Break-it review: with the ingest service down /health said "healthy" while every write
    failed, and with the recall service down it said both stores were "disconnected" (they
    were up; only recall, which reads them, did not answer). /health now carries
    ``services`` (as /readyz) and is degraded when one is not serving; stores it could not
    ask read "unknown"."""
    async with service.http() as http:
        body = (await http.get("/health")).json()
        assert body["services"] == {"automem.v1.IngestService": True, "automem.v1.RecallService": True}, body
        assert body["status"] == "healthy" and body["falkordb"] == "connected", body
    nowhere = "127.0.0.1:1"
    running = await start_service(settings.model_copy(update={
        "ingest_addr": nowhere, "recall_addr": nowhere, "enrich_addr": nowhere, "consolidate_addr": nowhere}),
        targets=["gateway"])
    try:
        async with running.http() as http:
            r = await http.get("/health")
            body = r.json()
            assert r.status_code == 503 and body["status"] == "degraded", body
            assert body["services"] == {"automem.v1.IngestService": False, "automem.v1.RecallService": False}, body
            assert (body["falkordb"], body["qdrant"]) == ("unknown", "unknown"), body
    finally:
        await running.runner.stop()
