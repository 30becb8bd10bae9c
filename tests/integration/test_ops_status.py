"""AutoMem's operations routes (issue 13, item 11) on the real running service:
``POST /admin/reembed`` re-embeds through the enrichment path with its progress in
``/enrichment/status``; ``/enrichment/status`` and ``/consolidate/status`` carry AutoMem's
fields; ``/analyze`` adds AutoMem's analytics block."""

from __future__ import annotations

import grpc
import pytest

from automem.v1 import enrich_service_pb2, memory_pb2
from automem.vectors import VectorFilter
from tests.conftest import eventually

STATS_KEYS = {"processed_total", "successes", "failures", "last_success_id", "last_success_at", "last_error",
              "last_error_at"}


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _all_embedded(service, ids: list[str], model: str | None = None) -> bool:
    found = await service.ctx.graph.memories.hydrate(ids, service.scope)
    return len(found) == len(ids) and all(
        m.embedding_status == memory_pb2.EMBEDDING_STATUS_DONE and (model is None or m.embedding_model == model) for m in found.values())


async def test_enrichment_status_carries_automems_fields_and_counts_successes(service) -> None:
    async with service.http() as http:
        before = (await http.get("/enrichment/status")).json()
        assert before["status"] == "running" and before["thread_alive"] is True
        for key in ("queue_size", "pending", "inflight", "max_attempts", "stats", "classification", "reembed"):
            assert key in before, key
        assert set(before["stats"]) == STATS_KEYS
        assert set(before["classification"]) == {"llm_attempts", "llm_successes", "fallbacks"}
        assert before["max_attempts"] == service.settings.max_deliver
        mid = await _store(http, "The status page counts this memory once it is enriched")

        async def counted():
            body = (await http.get("/enrichment/status")).json()
            return body if body["stats"]["successes"] > before["stats"]["successes"] else None
        after = await eventually(counted, timeout=30)
        assert after["stats"]["processed_total"] >= after["stats"]["successes"] >= 1
        assert after["stats"]["last_success_id"] and after["stats"]["last_success_at"]
        await eventually(lambda: _all_embedded(service, [mid]), timeout=30)


async def test_admin_reembed_goes_through_enrichment_and_reports_progress(service) -> None:
    async with service.http() as http:
        ids = [await _store(http, f"Reembed candidate number {i} about the deploy pipeline") for i in range(5)]
        await eventually(lambda: _all_embedded(service, ids), timeout=60)
        model = (await http.get("/enrichment/status")).json()["embedding_model"]
        assert model

        # Without force only memories lacking a vector of the current model are queued.
        r = await http.post("/admin/reembed", json={})
        assert r.status_code == 202, r.text
        assert r.json()["total"] == 0
        await service.ctx.graph.query(
            "MATCH (m:Memory) WHERE m.id IN $ids SET m.embedding_model = 'an-older-model'", {"ids": ids[:2]})
        r = await http.post("/admin/reembed", json={"batch_size": 1})
        assert r.status_code == 202 and r.json()["total"] == 2 and r.json()["batch_size"] == 1

        async def finished(total: int):
            job = (await http.get("/enrichment/status")).json()["reembed"]
            return job if job and job["total"] == total and job["done"] == total and job["complete"] else None
        await eventually(lambda: finished(2), timeout=60)
        # The enrichment path recorded the current model on the re-embedded memories again.
        await eventually(lambda: _all_embedded(service, ids, model), timeout=30)

        # force: every memory; limit caps the newest first; batch_size above 100 is capped.
        r = await http.post("/admin/reembed", json={"force": True, "limit": 3, "batch_size": 500})
        assert r.status_code == 202 and r.json()["total"] == 3 and r.json()["batch_size"] == 100
        job = await eventually(lambda: finished(3), timeout=60)
        assert job["force"] is True and job["job_id"] == r.json()["job_id"]
        assert await service.ctx.vectors.count(VectorFilter(scope=service.scope)) == 5


@pytest.mark.parametrize("body, field", [({"batch_size": -1}, "batch_size"), ({"limit": -1}, "limit"),
                                         ({"force": "maybe"}, "force"), ({"force": "yes"}, "force"),
                                         ({"batch_size": True}, "batch_size"), ({"limit": "5"}, "limit")])
async def test_admin_reembed_refuses_bad_values_naming_the_field(service, body, field) -> None:
    async with service.http() as http:
        r = await http.post("/admin/reembed", json=body)
        assert r.status_code in (400, 422), r.text
        assert field in r.text


async def test_reembed_over_grpc_refuses_a_batch_size_above_100(service) -> None:
    """ReembedMemories capped a ``batch_size`` above its documented 1..100 at 100 quietly; it
    is refused now, naming the field (REST's /admin/reembed keeps AutoMem's cap, and says
    the size it applied: test_admin_reembed_goes_through_enrichment_and_reports_progress)."""
    async with service.client() as client:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.enrich.ReembedMemories(enrich_service_pb2.ReembedMemoriesRequest(batch_size=101))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
        assert err.value.details().startswith("batch_size: "), err.value.details()
        ok = await client.enrich.ReembedMemories(enrich_service_pb2.ReembedMemoriesRequest(batch_size=100))
        assert ok.batch_size == 100


async def test_reembed_over_grpc_refuses_a_negative_batch_size(service) -> None:
    async with service.client() as client:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.enrich.ReembedMemories(enrich_service_pb2.ReembedMemoriesRequest(batch_size=-1))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "batch_size" in err.value.details()
        ok = await client.enrich.ReembedMemories(enrich_service_pb2.ReembedMemoriesRequest())
        assert ok.total == 0 and ok.batch_size == 32


async def test_consolidate_status_has_thread_alive_and_tick_seconds(service) -> None:
    async with service.http() as http:
        body = (await http.get("/consolidate/status")).json()
        assert body["tick_seconds"] == service.settings.consolidation_tick_seconds
        assert body["thread_alive"] is bool(service.ctx.consolidate_scheduler is not None
                                            and service.ctx.consolidate_scheduler.running)


async def test_analyze_has_automems_analytics_block(service) -> None:
    async with service.http() as http:
        a = await _store(http, "We prefer Postgres for the billing data", type="Preference", confidence=0.9,
                         importance=0.8, timestamp="2026-03-15T09:30:00Z")
        b = await _store(http, "MySQL for the billing data", type="Preference", confidence=0.5, importance=0.4,
                         timestamp="2026-03-15T09:45:00Z")
        await _store(http, "A guess about the cache size", type="Context", confidence=0.2, importance=0.2,
                     timestamp="2026-03-15T17:00:00Z")
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "PREFERS_OVER",
                                                "strength": 0.7, "reason": "cheaper to run"})
        assert r.status_code in (200, 201), r.text
        analytics = (await http.get("/analyze")).json()["analytics"]
        assert analytics["memory_types"] == {"Preference": {"count": 2, "average_confidence": 0.7},
                                             "Context": {"count": 1, "average_confidence": 0.2}}
        assert analytics["confidence_distribution"] == {"low": 1, "medium": 1, "high": 1}
        assert analytics["temporal_insights"] == {"hour_09": {"count": 2, "avg_importance": 0.6},
                                                  "hour_17": {"count": 1, "avg_importance": 0.2}}
        assert analytics["preferences"] == [{"prefers": "We prefer Postgres for the billing data",
                                             "over": "MySQL for the billing data", "context": "cheaper to run",
                                             "strength": 0.7}]
        assert analytics["patterns"] == []


async def test_a_reembed_job_is_seen_only_from_its_own_scope(service) -> None:
    other = f"{service.scope}-other"
    async with service.http() as http, service.http(**{"X-Automem-Scope": other}) as elsewhere:
        await _store(http, "A memory of the scope that re-embeds")
        r = await http.post("/admin/reembed", json={"force": True})
        assert r.status_code == 202 and r.json()["total"] == 1
        mine = (await http.get("/enrichment/status")).json()["reembed"]
        assert mine is not None and mine["job_id"] == r.json()["job_id"]
        assert (await elsewhere.get("/enrichment/status")).json()["reembed"] is None
        # Each scope runs its own job at the same time.
        assert (await elsewhere.post("/admin/reembed", json={"force": True})).status_code == 202
