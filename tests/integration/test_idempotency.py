"""Idempotent writes (issue 5): ``Idempotency-Key`` (REST header / gRPC field) returns the
first memory, creates no second node and enriches once; dedup (on by default) returns the
existing memory with ``deduplicated: true``; mcp-automem's retry of a POST after a 5xx is
harmless."""

from __future__ import annotations

import asyncio
from datetime import datetime

import grpc
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.conftest import eventually, start_service


async def _nodes(service, scope: str | None = None) -> int:
    """Memory nodes of ``scope`` (None: the whole store)."""
    return await service.ctx.graph.memories.count(scope)


async def _enriched(service, n: int) -> int:
    async def done():
        count = await service.ctx.vectors.count()
        return count if count >= n and service.ctx.enrich_consumer.counters.pending == 0 else 0
    return await eventually(done, timeout=30)


def _count_created(service) -> list[str]:
    """Record the ids of the MEMORY_CREATED events ingest publishes (what triggers enrichment)."""
    from automem.v1 import events_pb2

    ingest = service.ctx.ingest
    real, real_many = ingest.publisher.publish, ingest.publisher.publish_many
    created: list[str] = []

    async def counting(event):
        if event.type == events_pb2.EVENT_TYPE_MEMORY_CREATED:
            created.append(event.memory_id)
        return await real(event)

    async def counting_many(events, *args):  # a batch store publishes its events together
        created.extend(e.memory_id for e in events if e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED)
        return await real_many(events, *args)

    ingest.publisher.publish = counting
    ingest.publisher.publish_many = counting_many
    return created


async def test_idempotency_key_rest(own_service) -> None:
    created = _count_created(own_service)
    async with own_service.http(**{"Idempotency-Key": "store-1"}) as http:
        bodies = [{"content": "Idempotent store", "tags": ["idem"], "timestamp": "2024-01-01T00:00:00Z"}
                  for _ in range(3)]  # a retry repeats the request (another request under the key is refused)
        first = await http.post("/memory", json=bodies[0])
        assert first.status_code == 201 and first.json()["deduplicated"] is False, first.text
        mid = first.json()["memory_id"]
        for body in bodies[1:]:
            again = await http.post("/memory", json=body)
            assert again.status_code == 201 and again.json()["memory_id"] == mid
            assert again.json()["deduplicated"] is True
        # Concurrent retries with a fresh key: one node.
        results = await asyncio.gather(*[
            http.post("/memory", json={"content": "Concurrent idempotent store"},
                      headers={"Idempotency-Key": "store-2"}) for _ in range(8)])
        assert all(r.status_code == 201 for r in results), [r.text for r in results]
        assert len({r.json()["memory_id"] for r in results}) == 1
        assert sum(r.json()["deduplicated"] is False for r in results) == 1
        # Batch with a key.
        batch = {"memories": [{"content": "Batch idem A"}, {"content": "Batch idem B"}]}
        b1 = await http.post("/memory/batch", json=batch, headers={"Idempotency-Key": "batch-1"})
        b2 = await http.post("/memory/batch", json=batch, headers={"Idempotency-Key": "batch-1"})
        assert b1.status_code == b2.status_code == 201
        assert b1.json()["memory_ids"] == b2.json()["memory_ids"]
        # The key used for other contents (another batch, a longer one, a single store's key)
        # is refused, as on a single store: a 201 with the claimed ids acknowledged contents
        # that were never stored.
        for other_batch, key in (({"memories": [{"content": "Batch idem C"}, {"content": "Batch idem D"}]}, "batch-1"),
                                 ({"memories": [*batch["memories"], {"content": "Batch idem E"}]}, "batch-1"),
                                 ({"memories": [{"content": "Batch idem F"}]}, "store-2")):
            r = await http.post("/memory/batch", json=other_batch, headers={"Idempotency-Key": key})
            assert r.status_code == 400 and "idempotency_key" in r.json()["error"], r.text
        # The same key in another scope is another store.
        other = await http.post("/memory", json=bodies[0], headers={"X-Automem-Scope": "other"})
        assert other.status_code == 201 and other.json()["memory_id"] != mid
    assert await _nodes(own_service) == 5
    assert await _enriched(own_service, 5) == 5
    await asyncio.sleep(0.5)
    assert len(created) == len(set(created)) == 5  # each memory queued for enrichment once
    assert await own_service.ctx.vectors.count() == 5


async def test_idempotency_key_grpc(own_service) -> None:
    created = _count_created(own_service)
    async with own_service.client() as client:
        first = await client.create_memory("gRPC idempotent", idempotency_key="k-1")
        again = await client.create_memory("gRPC idempotent", idempotency_key="k-1")
        assert again.id == first.id
        with pytest.raises(grpc.aio.AioRpcError) as err:  # the key names one store, not any content
            await client.create_memory("other content", idempotency_key="k-1")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "idempotency_key" in err.value.details()
        results = await asyncio.gather(*[client.create_memory("parallel", idempotency_key="k-2")
                                         for _ in range(6)])
        assert len({m.id for m in results}) == 1
    assert await _nodes(own_service) == 2
    assert await _enriched(own_service, 2) == 2
    assert len(created) == 2


async def test_dedup_on_by_default(own_service) -> None:
    async with own_service.http() as http:
        body = {"content": "Deduplicated content", "tags": ["b", "a"]}
        first = await http.post("/memory", json=body)
        again = await http.post("/memory", json=body)
        assert first.status_code == 201 and first.json()["deduplicated"] is False
        assert again.status_code == 201 and again.json()["deduplicated"] is True
        assert again.json()["memory_id"] == first.json()["memory_id"]
        # Tags spelled otherwise, different tags, an explicit different event time, or another
        # scope: a new memory.
        assert (await http.post("/memory", json={**body, "tags": ["A", "b"]})).json()["deduplicated"] is False
        assert (await http.post("/memory", json={**body, "tags": ["c"]})).status_code == 201
        timed = {**body, "timestamp": "2024-03-01T00:00:00Z"}
        assert (await http.post("/memory", json=timed)).status_code == 201
        assert (await http.post("/memory", json=timed)).json()["deduplicated"] is True
        timed2 = {**body, "timestamp": "2024-03-02T00:00:00Z"}
        assert (await http.post("/memory", json=timed2)).status_code == 201
        assert (await http.post("/memory", json=body, headers={"X-Automem-Scope": "elsewhere"})).status_code == 201
    assert await _nodes(own_service) == 6


async def test_dedup_can_be_turned_off(settings) -> None:
    running = await start_service(settings.model_copy(update={"dedup_enabled": False}))
    try:
        async with running.http() as http:
            ids = {(await http.post("/memory", json={"content": "twice"})).json()["memory_id"] for _ in range(2)}
        assert len(ids) == 2
    finally:
        await running.runner.stop()


async def test_retry_after_5xx_is_harmless(service) -> None:
    """mcp-automem retries a POST three times after a 5xx, with no Idempotency-Key: a store
    that wrote and then failed must not leave a duplicate."""
    ingest = service.ctx.ingest
    real = ingest.publisher.publish
    failures = {"left": 1}

    async def flaky(event):
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("simulated failure after the graph write")
        return await real(event)

    ingest.publisher.publish = flaky
    try:
        async with service.http(Authorization="Bearer x") as http:
            body = {"content": "Stored once despite the retry", "tags": ["retry"], "importance": 0.7}
            statuses = []
            for _attempt in range(4):  # the client's loop: first try + 3 retries on 5xx
                r = await http.post("/memory", json=body)
                statuses.append(r.status_code)
                if r.status_code < 500:
                    break
            assert statuses[0] == 500 and statuses[-1] == 201, statuses
            assert r.json()["deduplicated"] is True and r.json()["status"] == "success"
    finally:
        ingest.publisher.publish = real
    assert await _nodes(service, service.scope) == 1


async def test_grpc_dedup_flag(service) -> None:
    async with service.client() as client:
        from automem.v1 import ingest_service_pb2

        request = ingest_service_pb2.CreateMemoryRequest(memory=ingest_service_pb2.MemoryInput(content="flagged"))
        first = await client.ingest.CreateMemory(request)
        second = await client.ingest.CreateMemory(request)
        assert not first.deduplicated and second.deduplicated and first.memory.id == second.memory.id
        try:
            await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="")))
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT


#: A store, and one change to each field it decides: each change must make a new memory.
_BASE = {"content": "Deploys go out on Tuesdays", "tags": ["ops", "Deploy"], "type": "Decision", "importance": 0.7,
         "confidence": 0.8, "metadata": {"team": "web", "n": 1}, "timestamp": "2026-01-05T10:00:00Z",
         "t_valid": "2026-01-05T10:00:00Z", "t_invalid": "2099-01-01T00:00:00Z"}
_CHANGES = {"content": "Deploys go out on tuesdays", "tags": ["ops", "deploy"], "type": "Habit", "importance": 0.71,
            "confidence": 0.9, "metadata": {"team": "web", "n": 2}, "timestamp": "2026-01-05T10:00:00.001Z",
            "t_valid": "2026-01-04T10:00:00Z", "t_invalid": "2098-01-01T00:00:00Z", "require_review": True}


async def test_dedupe_only_when_every_stored_field_matches(service) -> None:
    """The dedupe rule (README "Rules worth knowing"): the same store again returns the first
    memory; a store that differs in any field it decides is a new memory with that field."""
    async with service.http() as http:
        first = await http.post("/memory", json=_BASE)
        assert first.status_code == 201 and first.json()["deduplicated"] is False
        again = await http.post("/memory", json=dict(reversed(list(_BASE.items()))))
        assert again.json()["deduplicated"] is True and again.json()["memory_id"] == first.json()["memory_id"]
        for name, value in _CHANGES.items():
            r = await http.post("/memory", json={**_BASE, name: value})
            assert r.status_code == 201 and r.json()["deduplicated"] is False, name
            stored = (await http.get(f"/memory/{r.json()['memory_id']}",
                                     params={"state_mode": "history"})).json()["memory"]
            if name == "require_review":
                assert stored["state"] == "PENDING_REVIEW"
            elif name in ("timestamp", "t_valid", "t_invalid"):
                assert datetime.fromisoformat(stored[name]) == datetime.fromisoformat(value), name
            else:
                assert stored[name] == value, name
        # Without explicit times a retry still repeats the first store (its times were the
        # store time, as the retry's are).
        plain = {"content": "A store with default times", "metadata": {"k": 1}}
        ids = {(await http.post("/memory", json=plain)).json()["memory_id"] for _ in range(3)}
        assert len(ids) == 1
    assert await service.ctx.graph.memories.count(service.scope) == 1 + len(_CHANGES) + 1


async def test_batch_and_mcp_stores_follow_the_same_dedupe_rule(service) -> None:
    async with service.http() as http:
        first = (await http.post("/memory", json=_BASE)).json()["memory_id"]
        r = await http.post("/memory/batch", json={"memories": [
            _BASE, {**_BASE, "importance": 0.2}, {**_BASE, "importance": 0.2}, {**_BASE, "metadata": {}}]})
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["deduplicated"] == [True, False, True, False]
        ids = body["memory_ids"]
        assert ids[0] == first and ids[1] == ids[2] and len({ids[0], ids[1], ids[3]}) == 3
        assert (await http.get(f"/memory/{ids[1]}")).json()["memory"]["importance"] == 0.2
        assert (await http.get(f"/memory/{ids[3]}")).json()["memory"]["metadata"] == {}
    mcp = Client(streamable_http_client(service.url + "/mcp", http_client=create_mcp_http_client(
        headers={"X-Automem-Scope": service.scope})))
    async with mcp as client:
        stored = await client.call_tool("store_memory", _BASE)
        assert stored.structured_content["deduplicated"] is True and stored.structured_content["memory_id"] == first
        stored = await client.call_tool("store_memory", {**_BASE, "type": "Insight"})
        assert stored.structured_content["deduplicated"] is False
        batch = await client.call_tool("store_memory", {"memories": [_BASE, {**_BASE, "confidence": 0.1}]})
        assert batch.structured_content["deduplicated"] == [True, False]
        assert batch.structured_content["memory_ids"][0] == first
    assert await service.ctx.graph.memories.count(service.scope) == 5


@pytest.mark.parametrize("operation", ["create", "batch", "supersede"])
async def test_a_claim_is_never_stored_without_its_request_fingerprint(service, monkeypatch, operation) -> None:
    """A keyed write's claim and the fingerprint of its request are one graph write
    (automem/graph/idempotency.py): a store fault after the claim (here every graph write
    after it fails) cannot leave a claim that takes a different request with the same content
    for a retry of the first. (The fingerprint was written by a second query; when that failed
    only a warning was logged, and the key answered a retry with other tags with the first
    memory, ``deduplicated``.)"""
    from automem.common.errors import Unavailable
    from automem.v1 import ingest_service_pb2

    store = service.ctx.graph.idempotency.store
    query = store.query
    claimed = {"done": False}

    async def failing_after_the_claim(cypher, *args, **kwargs):
        if claimed["done"]:
            raise Unavailable("FalkorDB: simulated fault after the claim")
        rows = await query(cypher, *args, **kwargs)
        claimed["done"] = "IdempotencyKey" in cypher
        return rows

    key, content = f"claim-{operation}", f"Deploys freeze on Fridays ({operation})"
    async with service.client() as client:
        ingest = client.ingest
        old = (await ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
            memory=ingest_service_pb2.MemoryInput(content=f"Deploys freeze on Thursdays ({operation})")))).memory

        def request(tags: list[str]):
            item = ingest_service_pb2.MemoryInput(content=content, tags=tags)
            if operation == "create":
                return ingest.CreateMemory, ingest_service_pb2.CreateMemoryRequest(memory=item, idempotency_key=key)
            if operation == "batch":
                return ingest.BatchCreateMemories, ingest_service_pb2.BatchCreateMemoriesRequest(
                    memories=[item], idempotency_key=key)
            return ingest.SupersedeMemory, ingest_service_pb2.SupersedeMemoryRequest(
                id=old.id, replacement=item, reason="moved", idempotency_key=key)

        monkeypatch.setattr(store, "query", failing_after_the_claim)
        call, first = request(["ops"])
        try:
            await call(first)
        except grpc.aio.AioRpcError:
            pass  # the write may fail after the claim: the claim must still be whole
        monkeypatch.setattr(store, "query", query)
        call, other = request(["ops", "billing"])
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(other)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
        assert refused.value.details().startswith(f"idempotency_key: '{key}' was used for a different request")


async def test_a_store_with_a_key_is_never_a_repeat_of_another_memory(service) -> None:
    """The five-minute dedupe is for stores without a key (README "Retries are safe"): a
    keyed store, single or batch, that holds every field of a recent memory is a memory of
    its own (an import's two records with equal fields came back as one, the second
    ``deduplicated`` under its own key); its key still answers its retry. Without a key the
    same store is still a repeat."""
    body = {"content": "Standup is at 9:30", "tags": ["team"], "timestamp": "2026-11-01T09:00:00Z", "type": "Habit"}
    async with service.http() as http:
        first = (await http.post("/memory", json=body)).json()
        keyed = [(await http.post("/memory", json=body, headers={"Idempotency-Key": f"twin-{i}"})).json()
                 for i in range(2)]
        assert [k["deduplicated"] for k in keyed] == [False, False]
        assert len({first["memory_id"], *(k["memory_id"] for k in keyed)}) == 3
        retried = (await http.post("/memory", json=body, headers={"Idempotency-Key": "twin-1"})).json()
        assert retried["deduplicated"] is True and retried["memory_id"] == keyed[1]["memory_id"]
        batch = (await http.post("/memory/batch", json={"memories": [body, body]},
                                 headers={"Idempotency-Key": "twin-batch"})).json()
        assert batch["deduplicated"] == [False, False] and len(set(batch["memory_ids"]) | {first["memory_id"]}) == 3
        plain = (await http.post("/memory", json=body)).json()
        assert plain["deduplicated"] is True and plain["memory_id"] == first["memory_id"]
    assert await service.ctx.graph.memories.count(service.scope) == 5


async def test_concurrent_identical_stores_without_a_key_create_one_memory(service) -> None:
    """Eight identical ``POST /memory`` at once, no Idempotency-Key, created two memories in 2
    of 5 trials (break-it review): the repeat check and the create were separate graph round
    trips. Now one memory and seven ``deduplicated`` answers, for single stores, for batches
    (overlapping items) and for both mixed; every trial runs on new content."""
    async with service.http() as http:
        for trial in range(5):
            body = {"content": f"Concurrent repeat {trial}: the cache TTL is 300 s", "tags": ["race"]}
            answers = await asyncio.gather(*(http.post("/memory", json=body) for _ in range(8)))
            assert all(r.status_code == 201 for r in answers), [r.text for r in answers]
            assert len({r.json()["memory_id"] for r in answers}) == 1, [r.json()["memory_id"] for r in answers]
            assert sorted(r.json()["deduplicated"] for r in answers) == [False] + [True] * 7

            items = [{"content": f"Batch repeat {trial}.{i}", "tags": ["race"]} for i in range(3)]
            batches = [{"memories": items[i % 2:]} for i in range(4)]  # items 0-2 or 1-2
            singles = [{**items[2]}] * 4
            answers = await asyncio.gather(*(http.post("/memory/batch", json=b) for b in batches),
                                           *(http.post("/memory", json=b) for b in singles))
            assert all(r.status_code == 201 for r in answers), [r.text for r in answers]
            ids: dict[str, set[str]] = {}
            for sent, r in zip([b["memories"] for b in batches] + [[b] for b in singles], answers, strict=True):
                got = r.json().get("memory_ids") or [r.json()["memory_id"]]
                for item, memory_id in zip(sent, got, strict=True):
                    ids.setdefault(item["content"], set()).add(memory_id)
            assert all(len(found) == 1 for found in ids.values()), ids
    assert await service.ctx.graph.memories.count(service.scope) == 5 * 4


async def test_a_supersede_retried_after_its_replacement_was_rejected_answers_the_first_request(service) -> None:
    """A supersede waiting for review, retried under its Idempotency-Key after a reviewer
    rejected it, answered 409 "was used for another request" — it was the same request. The
    retry answers the replacement it made (now REJECTED), stores nothing, and the old fact
    stays current."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Retry probe: the standup is at 9"})
        old = r.json()["memory_id"]
        body = {"content": "Retry probe: the standup is at 10", "require_review": True}
        key = {"Idempotency-Key": "supersede-after-rejection"}
        first = await http.post(f"/v1/memories/{old}:supersede", json=body, headers=key)
        assert first.status_code == 201 and first.json()["state"] == "PENDING_REVIEW", first.text
        new = first.json()["memory_id"]
        r = await http.post(f"/v1/review-items/{new}:reject", json={"reason": "no"})
        assert r.status_code == 200, r.text
        again = await http.post(f"/v1/memories/{old}:supersede", json=body, headers=key)
        assert again.status_code == 201 and again.json()["memory_id"] == new, again.text
        assert again.json()["state"] == "REJECTED" and again.json()["superseded"]["state"] == "ACTIVE", again.text
        other = await http.post(f"/v1/memories/{old}:supersede", json={**body, "content": "Retry probe: at 11"},
                                headers=key)
        assert other.status_code == 400 and other.json()["error"].startswith("idempotency_key: "), other.text
        assert await _nodes(service, service.scope) == 2
