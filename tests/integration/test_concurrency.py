"""No lost updates (issue 5).

Tags on PATCH: AutoMem's ``tags`` field replaces the list (kept for compatibility); the
``add_tags`` field merges (adds without touching the others). ``metadata`` merges key by key.
Without an etag the service re-reads and retries until its write lands on an unchanged
version, so concurrent merges never lose a key or a tag. With an etag (body ``etag`` or
``If-Match``) an update based on a stale version gets 409 (412 for If-Match) and changes nothing.
"""

from __future__ import annotations

import asyncio
import random

from google.protobuf import field_mask_pb2

from automem.v1 import ingest_service_pb2
from tests.conftest import eventually

N = 20


async def _other_traffic(http, stop: asyncio.Event) -> int:
    """Stores and recalls while the updates run."""
    done = 0
    while not stop.is_set():
        i = random.randint(0, 10**6)
        r = await http.post("/memory", json={"content": f"Background traffic {i}", "tags": ["noise"]})
        assert r.status_code in (200, 201), r.text
        r = await http.get("/recall", params={"query": "traffic", "limit": 3})
        assert r.status_code == 200, r.text
        done += 1
    return done


async def _store(http, content: str) -> dict:
    r = await http.post("/memory", json={"content": content, "tags": ["base"], "metadata": {"base": True}})
    assert r.status_code == 201, r.text
    return r.json()


async def test_concurrent_merges_without_etag_lose_nothing(service) -> None:
    async with service.http() as http:
        stored = await _store(http, "Target of 20 concurrent merges")
        mid, version = stored["memory_id"], stored["memory"]["version"]
        stop = asyncio.Event()
        background = [asyncio.create_task(_other_traffic(http, stop)) for _ in range(2)]
        results = await asyncio.gather(*[
            http.patch(f"/memory/{mid}", json={"metadata": {f"k{i}": i}, "add_tags": [f"t{i}"]}) for i in range(N)])
        stop.set()
        assert sum(await asyncio.gather(*background)) >= 1
        assert [r.status_code for r in results] == [200] * N, [r.text for r in results if r.status_code != 200]
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
    assert memory["metadata"] == {"base": True, **{f"k{i}": i for i in range(N)}}
    assert sorted(memory["tags"]) == sorted(["base", *[f"t{i}" for i in range(N)]])
    assert memory["version"] == version + N


async def test_concurrent_updates_with_etag_land_or_conflict(service) -> None:
    async with service.http() as http:
        stored = await _store(http, "Target of 20 etag updates")
        mid = stored["memory_id"]
        etag = stored["memory"]["etag"]
        stop = asyncio.Event()
        background = asyncio.create_task(_other_traffic(http, stop))
        # Half send the etag in the body, half in If-Match; all based on the same version.
        results = await asyncio.gather(*[
            http.patch(f"/memory/{mid}", json={"metadata": {f"k{i}": i}, "add_tags": [f"t{i}"], "etag": etag})
            if i % 2 else
            http.patch(f"/memory/{mid}", json={"metadata": {f"k{i}": i}, "add_tags": [f"t{i}"]},
                       headers={"If-Match": f'"{etag}"'})
            for i in range(N)])
        stop.set()
        await background
        landed = [i for i, r in enumerate(results) if r.status_code == 200]
        conflicts = [i for i, r in enumerate(results) if r.status_code in (409, 412)]
        assert len(landed) + len(conflicts) == N, [r.text for r in results]
        # A stale etag in the body is AIP-154's 409; a failed If-Match is RFC 9110's 412.
        assert all(results[i].status_code == (409 if i % 2 else 412) for i in conflicts)
        assert len(landed) == 1  # all were based on the same version: exactly one wins
        assert all("etag" in results[i].json()["error"] for i in conflicts)
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert memory["metadata"] == {"base": True, **{f"k{i}": i for i in landed}}
        assert sorted(memory["tags"]) == sorted(["base", *[f"t{i}" for i in landed]])
        # Read-modify-write loops with etags: every update lands eventually, none lost.
        async def careful(i: int) -> int:
            conflicts = 0
            while True:
                current = (await http.get(f"/memory/{mid}")).json()["memory"]
                r = await http.patch(f"/memory/{mid}", json={"metadata": {f"c{i}": i}, "etag": current["etag"]})
                if r.status_code == 200:
                    return conflicts
                assert r.status_code == 409, r.text
                conflicts += 1
        await asyncio.gather(*[careful(i) for i in range(10)])
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert {f"c{i}" for i in range(10)} <= set(memory["metadata"])
        assert memory["version"] == stored["memory"]["version"] + len(landed) + 10


async def test_grpc_concurrent_updates(service) -> None:
    async with service.client() as client:
        memory = await client.create_memory("gRPC merge target", tags=["base"])

        async def add(i: int, etag: int = 0):
            return await client.ingest.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(
                id=memory.id, etag=etag, add_tags=[f"g{i}"],
                memory=ingest_service_pb2.MemoryInput(metadata_json=f'{{"g{i}": {i}}}', metadata_set=True),
                update_mask=field_mask_pb2.FieldMask(paths=["metadata"])))
        await asyncio.gather(*[add(i) for i in range(N)])
        got = (await client.get_memory(memory.id)).memory
        assert set(got.tags) == {"base", *[f"g{i}" for i in range(N)]}
        import grpc

        outcomes = await asyncio.gather(*[add(100 + i, etag=got.version) for i in range(5)], return_exceptions=True)
        ok = [o for o in outcomes if not isinstance(o, Exception)]
        aborted = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError) and o.code() == grpc.StatusCode.ABORTED]
        assert len(ok) == 1 and len(aborted) == 4


async def test_enrichment_never_clobbers_an_edit(service) -> None:
    """Enrichment writes only its own fields, and only while the node holds the content it
    enriched (GraphStore.set_enrichment, guarded by the content hash)."""
    graph = service.ctx.graph
    async with service.http() as http:
        stored = await _store(http, "Content as first stored, about Kubernetes")
        mid = stored["memory_id"]
        old_hash = stored["memory"]["content_hash"]
        # An edit races the enrichment of the first content.
        r = await http.patch(f"/memory/{mid}", json={"content": "Edited content, about Postgres",
                                                    "metadata": {"edited": True}})
        assert r.status_code == 200
        # A late enrichment write for the old content changes nothing.
        assert await graph.memories.set_enrichment(mid, old_hash, {"summary": "stale summary"}) is False

        async def settled():
            memory = (await http.get(f"/memory/{mid}")).json()["memory"]
            return memory if memory["embedding_status"] == "done" else None
        memory = await eventually(settled, timeout=30)
    assert memory["content"] == "Edited content, about Postgres"
    assert memory["metadata"] == {"base": True, "edited": True}
    assert memory["summary"] != "stale summary"
    point = (await service.ctx.vectors.retrieve([mid]))[0]
    assert point.payload.get("content_hash", memory["content_hash"]) == memory["content_hash"]
