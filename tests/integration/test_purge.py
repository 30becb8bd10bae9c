"""Admin purge (issue 14 item 5): the only way history disappears, on the real NATS,
FalkorDB, qdrant-edge shard and models.

A purge by id removes the memory's node, versions, edges, idempotency key, vector point and
the content of its events (stream and outbox), and leaves a content-free audit record that
the history, the purge listing and a backup → restore show; a purge by scope removes a
tenant's memories and entities and leaves every other scope as it was; only an admin may
purge; a purge that fails half-way stays pending and the same call resumes it.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import grpc
import pytest

from automem.common import backup
from automem.common.bus import Bus
from automem.graph import GraphStore
from automem.v1 import review_service_pb2
from tests.conftest import eventually, fresh_scope, start_service

MARKER = "quokkaZ7731"
#: Seconds a purge call may take: it reads the whole event stream once (a shared service's
#: stream holds every earlier test's events; the machine may be loaded).
PURGE_WAIT = 300.0


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _stream_holding(service, needle: str) -> int:
    """Messages on the service's stream (every subject) whose bytes contain ``needle``."""
    raw = needle.encode()
    return await service.ctx.bus.scrub(lambda _subject, data: raw in data, dry_run=True)


async def _vector_gone(service, memory_id: str) -> bool:
    return await service.ctx.vectors.retrieve([memory_id]) == []


async def _settled(service, ids: list[str]) -> bool:
    """Enrichment is over for ``ids``: nothing queued, each has its point and DONE statuses."""
    if await service.ctx.enrich_consumer.queue_depth():
        return False
    if len(await service.ctx.vectors.retrieve(ids)) != len(ids):
        return False
    return await _count(service, "MATCH (m:Memory) WHERE m.id IN $ids AND m.embedding_status = "
                        "'EMBEDDING_STATUS_DONE' AND m.enrichment_status = 'ENRICHMENT_STATUS_DONE' RETURN count(m)",
                        ids=ids) == len(ids)


async def _count(service, cypher: str, **params) -> int:
    return int((await service.ctx.graph.ro_query(cypher, params))[0][0])


async def test_purge_by_id_removes_every_trace_and_leaves_a_content_free_record(own_service, settings,
                                                                                  tmp_path) -> None:
    scope = own_service.scope
    async with own_service.http(**{"Idempotency-Key": f"purge-{uuid.uuid4().hex}"}) as http:
        gone = await _store(http, f"Ada keeps a pet {MARKER} on Rottnest island", tags=["pets", MARKER])
    async with own_service.http() as http:
        stays = await _store(http, "Ada prefers tea over coffee in the morning", tags=["pets"])
        r = await http.post("/associate", json={"memory1_id": stays, "memory2_id": gone, "type": "RELATES_TO"})
        assert r.status_code == 201, r.text
        r = await http.patch(f"/memory/{gone}", json={"content": f"Ada keeps two pets {MARKER} on Rottnest island"})
        assert r.status_code == 200, r.text
        await eventually(lambda: _settled(own_service, [gone, stays]), timeout=60)
        # The version store (automem/graph/versions.py) holds two versions of each: created, then edited.
        r = await http.patch(f"/memory/{stays}", json={"importance": 0.7})
        assert r.status_code == 200, r.text
        for memory_id in (gone, stays):
            assert await _count(own_service, "MATCH (v:MemoryVersion {memory_id: $id}) RETURN count(v)",
                                id=memory_id) == 2
        assert await _stream_holding(own_service, MARKER) >= 2

        preview = await http.post(f"/v1/memories/{gone}:purge", json={"dry_run": True, "reason": "erasure request"}, timeout=PURGE_WAIT)
        assert preview.status_code == 200, preview.text
        counts = preview.json()["purge"]["counts"]
        assert preview.json()["purge"]["dry_run"] is True and preview.json()["purge"]["id"] is None
        assert preview.json()["purge"]["status"] == "dry_run" and preview.json()["purge"]["pending_steps"] == []
        assert (counts["memories"], counts["versions"], counts["idempotency_keys"], counts["vector_points"]) == (
            1, 2, 1, 1)
        assert counts["relations"] >= 1 and counts["stream_messages"] >= 2
        assert (await http.get(f"/memory/{gone}")).status_code == 200  # a dry run removes nothing

        r = await http.post(f"/v1/memories/{gone}:purge", json={"reason": "erasure request"}, timeout=PURGE_WAIT)
        assert r.status_code == 200, r.text
        record = r.json()["purge"]
        assert record["status"] == "done" and record["pending_steps"] == [] and record["memory_ids"] == [gone]
        assert record["counts"]["versions"] == 2 and record["counts"]["stream_messages"] >= 2

        # Gone from every read, store and the stream.
        assert (await http.get(f"/memory/{gone}")).status_code == 404
        # (a recall's query goes on the stream as an activity event: no marker in it)
        hits = (await http.get("/recall", params={"query": "pet on Rottnest island"})).json()["results"]
        assert gone not in [h["id"] for h in hits]
        assert await _count(own_service, "MATCH (m:Memory {id: $id}) RETURN count(m)", id=gone) == 0
        assert await _count(own_service, "MATCH (v:MemoryVersion {memory_id: $id}) RETURN count(v)", id=gone) == 0
        assert await _count(own_service, "MATCH (k:IdempotencyKey) WHERE $id IN k.memory_ids RETURN count(k)",
                            id=gone) == 0
        assert await _count(own_service, "MATCH (:Memory {id: $id})-[r]-(:Memory) RETURN count(r)", id=stays) == 0
        assert (await http.get(f"/memory/{stays}")).status_code == 200
        await eventually(lambda: _vector_gone(own_service, gone), timeout=60)
        assert await _stream_holding(own_service, MARKER) == 0

        # History: only the content-free purge notice.
        events = (await http.get(f"/v1/memories/{gone}/history")).json()["events"]
        assert [e["type"] for e in events] == ["EVENT_TYPE_MEMORY_PURGED"]
        assert "before" not in events[0] and "after" not in events[0] and MARKER not in json.dumps(events)
        assert events[0]["actor"] == record["actor"]
        listed = (await http.get("/v1/purges")).json()["purges"]
        assert [p["id"] for p in listed] == [record["id"]] and listed[0]["reason"] == "erasure request"
        assert (await http.post(f"/v1/memories/{gone}:purge", json={}, timeout=PURGE_WAIT)).status_code == 404

    # A backup holds nothing of it but the record; a restore carries the record.
    lines = [line async for line in backup.export_lines(own_service.ctx.graph, own_service.ctx.bus)]
    assert not any(MARKER in line for line in lines)
    assert any('"Purge"' in line and record["id"] in line for line in lines)
    suffix = uuid.uuid4().hex[:10]
    fresh = settings.model_copy(update={"graph_name": f"purged_{suffix}", "stream_name": f"PURGED_{suffix.upper()}",
                                        "subject_prefix": f"purged.{suffix}", "data_dir": tmp_path / "restored"})
    graph, bus = GraphStore(fresh), Bus(fresh)
    await bus.connect()
    try:
        await backup.restore_records(graph, backup.read_lines(lines), bus)
        versions = ("MATCH (v:MemoryVersion) WHERE v.memory_id IN $ids RETURN properties(v) ORDER BY v.memory_id, "
                    "v.version")
        kept = [dict(r[0]) for r in await own_service.ctx.graph.ro_query(versions, {"ids": [gone, stays]})]
        carried = [dict(r[0]) for r in await graph.ro_query(versions, {"ids": [gone, stays]})]
        assert len(kept) == 2 and carried == kept  # the kept memory's versions, exactly
        [restored] = await graph.purges.page(scope, 0, 10)
        assert (restored["id"], restored["status"], list(restored["memory_ids"])) == (record["id"], "done", [gone])
        history = await bus.events_for(gone)
        assert [e.type for e in history] == [9] and not history[0].HasField("before")  # MEMORY_PURGED
    finally:
        await bus.close()
        await graph.close()


async def test_purge_by_scope_leaves_other_scopes_untouched(service) -> None:
    other = fresh_scope()
    async with service.http() as http, service.http(**{"X-Automem-Scope": other}) as http_other:
        mine = [await _store(http, "Bob Smith moved the billing service from Berlin to Paris.", tags=["ops"]),
                await _store(http, "Alice Johnson runs the nightly Postgres backups.", tags=["ops"])]
        theirs = await _store(http_other, "Bob Smith moved the billing service from Berlin to Paris.", tags=["ops"])
        await eventually(lambda: service.ctx.vectors.retrieve([*mine, theirs]), timeout=60)

        async def entities_written() -> bool:
            return await _count(service, "MATCH (e:Entity) WHERE e.scope IN $s RETURN count(DISTINCT e.scope)",
                                s=[service.scope, other]) == 2
        await eventually(entities_written, timeout=60)
        their_events = len((await http_other.get(f"/v1/memories/{theirs}/history")).json()["events"])

        r = await http.post("/v1/scope:purge", json={"confirm_scope": other}, timeout=PURGE_WAIT)
        assert r.status_code == 400 and "confirm_scope" in r.text
        r = await http.post("/v1/scope:purge", json={"confirm_scope": service.scope, "reason": "tenant left"}, timeout=PURGE_WAIT)
        assert r.status_code == 200, r.text
        record = r.json()["purge"]
        assert record["kind"] == "scope" and record["status"] == "done" and record["counts"]["memories"] == 2
        assert record["counts"]["entities"] >= 1 and record["memory_ids"] == []

        for mid in mine:
            assert (await http.get(f"/memory/{mid}")).status_code == 404
            await eventually(lambda mid=mid: _vector_gone(service, mid), timeout=60)
        assert (await http.get("/recall", params={"query": "billing Berlin Paris"})).json()["results"] == []
        assert await _count(service, "MATCH (n) WHERE n.scope = $s AND NOT n:Purge RETURN count(n)",
                            s=service.scope) == 0
        # The other scope: its memory, point, entities and history as they were.
        assert (await http_other.get(f"/memory/{theirs}")).status_code == 200
        assert await service.ctx.vectors.retrieve([theirs])
        assert await _count(service, "MATCH (e:Entity) WHERE e.scope = $s RETURN count(e)", s=other) >= 1
        assert len((await http_other.get(f"/v1/memories/{theirs}/history")).json()["events"]) == their_events
        hits = (await http_other.get("/recall", params={"query": "billing Berlin Paris"})).json()["results"]
        assert [h["id"] for h in hits] == [theirs]


async def test_purging_a_rejected_memory_removes_its_review_item_and_tombstone(service) -> None:
    content = f"The moon is made of {MARKER} cheese"
    async with service.http() as http:
        mid = await _store(http, content, require_review=True)
        r = await http.post(f"/v1/review-items/{mid}:reject", json={"reason": "false"})
        assert r.status_code == 200, r.text
        assert (await http.post("/memory", json={"content": content})).status_code == 409  # tombstoned
        r = await http.post(f"/v1/memories/{mid}:purge", json={"reason": "erasure"}, timeout=PURGE_WAIT)
        assert r.status_code == 200, r.text
        counts = r.json()["purge"]["counts"]
        assert (counts["memories"], counts["review_items"], counts["tombstones"]) == (1, 1, 1)
        assert (await http.get("/v1/tombstones", params={"include_lifted": "true"})).json()["tombstones"] == []
        items = (await http.get("/v1/review-items", params={"status": "all"})).json()["items"]
        assert mid not in [i["id"] for i in items]
        assert (await http.post("/memory", json={"content": content})).status_code == 201  # no tombstone left


async def test_purge_needs_an_admin_key_and_a_known_id(settings) -> None:
    running = await start_service(settings.model_copy(update={"api_token": "purge-root-token"}))
    try:
        writer, _ = await running.ctx.keystore.create("writer", ["acme/*"], "acme/web")
        admin, _ = await running.ctx.keystore.create("admin", ["acme/*"], "acme/web")
        async with running.http(Authorization=f"Bearer {writer}") as http:
            mid = await _store(http, "Acme keeps its secrets in the vault")
            assert (await http.post(f"/v1/memories/{mid}:purge", json={}, timeout=PURGE_WAIT)).status_code == 403
            assert (await http.post("/v1/scope:purge", json={"confirm_scope": "acme/web"}, timeout=PURGE_WAIT)).status_code == 403
            assert (await http.delete(f"/memory/{mid}", params={"purge": "true"})).status_code == 403
        client = running.client(api_key=writer)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.review.PurgeMemory(review_service_pb2.PurgeMemoryRequest(id=mid), metadata=client.metadata())
            assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        finally:
            await client.close()
        client = running.client(api_key=admin)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.review.PurgeMemory(review_service_pb2.PurgeMemoryRequest(id=str(uuid.uuid4())),
                                                metadata=client.metadata())
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.review.PurgeMemory(review_service_pb2.PurgeMemoryRequest(id=""), metadata=client.metadata())
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "id" in err.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.review.PurgeScope(review_service_pb2.PurgeScopeRequest(confirm_scope="globex/app"), metadata=client.metadata())
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "confirm_scope" in err.value.details()
            done = await client.review.PurgeMemory(review_service_pb2.PurgeMemoryRequest(id=mid, reason="vault"), metadata=client.metadata())
            assert done.purge.status == "done" and done.purge.memory_ids == [mid]
        finally:
            await client.close()
        async with running.http(Authorization=f"Bearer {admin}") as http:
            assert (await http.get(f"/memory/{mid}")).status_code == 404
            assert [p["id"] for p in (await http.get("/v1/purges")).json()["purges"]] == [done.purge.id]
        async with running.http(Authorization=f"Bearer {writer}") as http:
            assert (await http.get("/v1/purges")).status_code == 403
    finally:
        await running.runner.stop()


@pytest.mark.parametrize("resume", ["call", "background"])
async def test_purge_that_fails_half_way_stays_pending_and_is_resumed(own_nats, resume: str) -> None:
    """The same call resumes a pending purge (here AutoMem's delete route with ``purge``, as
    ``:purge`` would); without a caller, the ingest target's background pass does."""
    service = own_nats.service
    async with service.http() as http:
        mid = await _store(http, f"Temporary {MARKER} note about the Paris office")
        await eventually(lambda: service.ctx.vectors.retrieve([mid]), timeout=60)
        await own_nats.stop()
        try:
            r = await http.post(f"/v1/memories/{mid}:purge", json={"reason": "half way"}, timeout=PURGE_WAIT)
            assert r.status_code == 503, r.text
            assert "stream" in r.text and "resume" in r.text
            assert (await http.get(f"/memory/{mid}")).status_code == 404  # the graph step is done
            [pending] = await service.ctx.graph.purges.page(service.scope, 0, 10)
            assert pending["status"] == "pending" and list(pending["pending_steps"]) == ["events", "stream"]
        finally:
            await own_nats.start()

        async def resumed():
            if resume == "call":
                return (await http.delete(f"/memory/{mid}", params={"purge": "true"})).status_code == 200
            return (await http.get("/v1/purges")).json()["purges"][0]["status"] == "done"
        service.ctx.review.purger.resume_interval = 0.5 if resume == "background" else 3600.0
        await eventually(resumed, timeout=60)
        [record] = (await http.get("/v1/purges")).json()["purges"]
        assert record["id"] == pending["id"] and record["status"] == "done" and record["pending_steps"] == []
        assert await _stream_holding(service, MARKER) == 0
        await eventually(lambda: _vector_gone(service, mid), timeout=60)
        assert (await http.post(f"/v1/memories/{mid}:purge", json={}, timeout=PURGE_WAIT)).status_code == 404


async def test_a_resumption_pass_leaves_a_scope_purge_under_way_to_its_run(service, monkeypatch) -> None:
    """A scope purge of many memories can take minutes, longer than the background
    resumption's minimum age (30 s): the pass took the purge its caller was still running and
    ran its steps a second time beside it (break-it review: the stream step failed in the
    second run). Now a pass skips a purge this process is running."""
    purger = service.ctx.review.purger
    purges = service.ctx.graph.purges
    remove = purges.remove
    removing, release = asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    async def slow_remove(ids, scope, *args, **kwargs):
        if scope == service.scope:
            runs.append(scope)
            removing.set()
            await release.wait()
        return await remove(ids, scope, *args, **kwargs)

    monkeypatch.setattr(purges, "remove", slow_remove)
    async with service.http() as http:
        await _store(http, "Carol keeps the release calendar.", tags=["ops"])
        purge = asyncio.create_task(http.post("/v1/scope:purge", json={"confirm_scope": service.scope,
                                                                       "reason": "tenant left"}, timeout=PURGE_WAIT))
        await asyncio.wait_for(removing.wait(), 30)
        resumed = asyncio.create_task(purger.resume_pending(min_age=0.0))
        await asyncio.sleep(0.5)  # a second run would have reached the graph step by now
        release.set()
        r = await purge
        assert r.status_code == 200 and r.json()["purge"]["status"] == "done", r.text
        assert [record.scope for record in await resumed if record.scope == service.scope] == []
    assert runs == [service.scope], runs


async def test_purging_the_memories_behind_an_entity_merge_takes_the_merged_name_with_them(service) -> None:
    """After "l.-torvalds" was merged into "linus-torvalds", purging the only memory that said
    "L. Torvalds" left the slug in the canonical entity's aliases, the merged entity and the
    merge record: ``GET /entity/l.-torvalds`` still answered 200, a name from the erased text."""
    async with service.http() as http:
        kept = await _store(http, "Linus Torvalds maintains the Linux kernel.")
        erased = await _store(http, "L. Torvalds lives at 12 Secret Lane.")

        async def both_named() -> bool:
            slugs = {e["slug"] for e in (await http.get("/entities")).json()["entities"]}
            return {"linus-torvalds", "l.-torvalds"} <= slugs
        await eventually(both_named, timeout=60)
        r = await http.post("/entity/l.-torvalds/merge", json={"merge_into": "linus-torvalds"})
        assert r.status_code == 200, r.text
        assert (await http.get("/entity/l.-torvalds")).status_code == 200

        r = await http.post(f"/v1/memories/{erased}:purge", json={"reason": "erasure request"}, timeout=PURGE_WAIT)
        assert r.status_code == 200 and r.json()["purge"]["counts"]["entity_merges"] == 1, r.text
        assert (await http.get("/entity/l.-torvalds")).status_code == 404
        canonical = (await http.get("/entity/linus-torvalds")).json()["entity"]
        assert "l.-torvalds" not in (canonical.get("aliases") or []), canonical
        assert (await http.get("/entities/merges")).json()["merges"] == []
        assert await _count(service, "MATCH (e:Entity) WHERE e.scope = $s AND e.key CONTAINS 'l.-torvalds' "
                            "RETURN count(e)", s=service.scope) == 0
        assert (await http.get(f"/memory/{kept}")).status_code == 200


async def test_a_merge_that_a_later_memory_names_through_stays_when_its_moved_memories_are_purged(service) -> None:
    """A memory stored after a merge that names the merged entity is linked to it (and read
    under the kept one). Purging the merge's moved memories removed the merge anyway, and that
    memory dropped out of the kept entity: the merge stays while a memory names through it."""
    async with service.http() as http:
        kept = await _store(http, "Robert Smith signed the vendor contract.")
        erased = await _store(http, "Bob Smith called about the invoice.")

        async def named(*slugs: str) -> bool:
            return set(slugs) <= {e["slug"] for e in (await http.get("/entities")).json()["entities"]}
        await eventually(lambda: named("robert-smith", "bob-smith"), timeout=60)
        assert (await http.post("/entity/bob-smith/merge", json={"merge_into": "robert-smith"})).status_code == 200
        later = await _store(http, "Bob Smith approved the invoice.")

        async def listed() -> bool:
            memories = (await http.get("/entity/robert-smith")).json()["memories"]
            return later in {m["id"] for m in memories}
        await eventually(listed, timeout=60)
        r = await http.post(f"/v1/memories/{erased}:purge", json={"reason": "erasure request"}, timeout=PURGE_WAIT)
        assert r.status_code == 200 and r.json()["purge"]["counts"]["entity_merges"] == 0, r.text
        r = await http.get("/entity/robert-smith")
        assert {m["id"] for m in r.json()["memories"]} == {kept, later}, r.json()
        assert (await http.get("/entity/bob-smith")).json()["entity"]["id"] == "person:robert-smith"
        [merge] = (await http.get("/entities/merges")).json()["merges"]
        assert merge["memory_ids"] == []  # the purged id is gone from the record
