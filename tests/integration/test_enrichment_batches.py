"""Batched enrichment (issue 10): a batch writes exactly what enriching its memories one at a
time writes; the guarded batch writes never overwrite an edit that landed meanwhile; the
indexed PRECEDED_BY lookup picks the predecessor the scan of the whole scope picked."""

from __future__ import annotations

import asyncio
import random
import shutil
import uuid

import pytest

from automem.common.bus import ENRICH_DURABLE
from automem.common.model import Memory, content_hash, ts
from automem.enrich import links
from automem.enrich.entities import write_entities_many
from automem.graph import GraphStore
from automem.v1 import events_pb2, memory_pb2
from tests.conftest import eventually, rest_memory, rest_store, start_service

# The PRECEDED_BY rule as the scan of the scope wrote it before the lookup was indexed (the
# specification the indexed lookup must keep): the latest earlier memory (event_time, then
# create_time) of the same scope, ACTIVE or SUPERSEDED, sharing a tag (any memory when the
# memory has no tags).
SCAN = (
    "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) "
    "OPTIONAL MATCH (n:Memory) WHERE n.scope = m.scope AND n.id <> m.id "
    "AND n.state IN ['ACTIVE', 'SUPERSEDED'] "
    "AND (n.event_time < m.event_time OR (n.event_time = m.event_time AND n.create_time < m.create_time)) "
    "AND (size(m.tags_lower) = 0 OR any(t IN n.tags_lower WHERE t IN m.tags_lower)) "
    "WITH m, n ORDER BY n.event_time DESC, n.create_time DESC "
    "WITH m, collect(n)[0] AS prev RETURN m.id, prev.id")

YEAR = 365 * 86400.0
T0 = 1_700_000_000.0


def _memory(content: str, *, event: float, created: float, tags: list[str] = (), scope: str = "default",
            state: int = memory_pb2.MEMORY_STATE_ACTIVE) -> Memory:
    memory = Memory(id=str(uuid.uuid4()), scope=scope, content=content, content_hash=content_hash(content),
                    tags=list(tags), state=state, version=1)
    memory.event_time.CopyFrom(ts(event))
    memory.create_time.CopyFrom(ts(created))
    memory.valid_from.CopyFrom(ts(event))
    return memory


async def _predecessors(graph: GraphStore, ids: list[str]) -> dict[str, str | None]:
    rows = await graph.ro_query(
        "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) OPTIONAL MATCH (m)-[:PRECEDED_BY]->(p:Memory) "
        "RETURN m.id, p.id", {"ids": ids})
    return {r[0]: r[1] for r in rows}


async def test_predecessor_lookup_picks_what_the_scope_scan_picked(settings) -> None:
    graph = GraphStore(settings)
    await graph.ensure_schema()
    try:
        named = {
            "old": _memory("old, tagged a", event=T0 - 3 * YEAR, created=T0, tags=["a"]),
            "a1": _memory("a one", event=T0, created=T0 + 1, tags=["a"]),
            "b1": _memory("b one", event=T0 + 10, created=T0 + 2, tags=["B"]),
            # same event time as a1: the earlier create time comes first
            "a2_same_time": _memory("a two, same time", event=T0, created=T0 + 3, tags=["A", "c"]),
            "gone": _memory("deleted, tagged a", event=T0 + 20, created=T0 + 4, tags=["a"],
                            state=memory_pb2.MEMORY_STATE_DELETED),
            "review": _memory("pending, tagged a", event=T0 + 21, created=T0 + 5, tags=["a"],
                              state=memory_pb2.MEMORY_STATE_PENDING_REVIEW),
            "other_scope": _memory("elsewhere, tagged a", event=T0 + 22, created=T0 + 6, tags=["a"], scope="acme"),
            "a3": _memory("a three, skips deleted and pending", event=T0 + 30, created=T0 + 7, tags=["a"]),
            "untagged": _memory("no tags: any earlier memory", event=T0 + 15, created=T0 + 8),
            "new_tag": _memory("a new tag: no predecessor", event=T0 + 40, created=T0 + 9, tags=["fresh"]),
            "backfill": _memory("backfilled long before the rest", event=T0 - 9 * YEAR, created=T0 + 10, tags=["a"]),
            "far": _memory("years after the last b", event=T0 + 2 * YEAR, created=T0 + 11, tags=["b"]),
            "superseded_ok": _memory("superseded still counts", event=T0 + 50, created=T0 + 12, tags=["z"],
                                     state=memory_pb2.MEMORY_STATE_SUPERSEDED),
            "z2": _memory("after a superseded one", event=T0 + 51, created=T0 + 13, tags=["z"]),
        }
        # plus a random crowd: bursts of equal times, spreads over years, shared and unshared tags
        rng = random.Random(7)
        crowd = []
        for i in range(240):
            event = T0 + rng.choice([0.0, 0.001, 5.0, 3600.0, 86400.0, 40 * 86400.0, YEAR]) * rng.randint(0, 40)
            tags = rng.sample(["a", "b", "c", "d", "e", "f"], rng.randint(0, 2))
            state = rng.choice([memory_pb2.MEMORY_STATE_ACTIVE] * 8 + [memory_pb2.MEMORY_STATE_ARCHIVED,
                                                                      memory_pb2.MEMORY_STATE_SUPERSEDED])
            crowd.append(_memory(f"crowd {i}", event=event, created=T0 + 100 + i * 0.001, tags=tags, state=state))
        memories = list(named.values()) + crowd
        await graph.memories.create_many(memories)
        ids = [m.id for m in memories]
        expected = {r[0]: r[1] for r in await graph.ro_query(SCAN, {"ids": ids})}

        contents = await graph.relations.link_predecessors(ids, T0)

        assert await _predecessors(graph, ids) == expected
        by_id = {m.id: m for m in memories}
        assert contents == {mid: by_id[prev].content for mid, prev in expected.items() if prev is not None}
        # the named cases, spelled out
        pred = {name: expected[m.id] for name, m in named.items()}
        name_of = {m.id: name for name, m in named.items()}
        assert name_of[pred["a1"]] == "old"
        assert name_of[pred["a2_same_time"]] == "a1"
        assert pred["new_tag"] is None and pred["backfill"] is None
        assert pred["z2"] == named["superseded_ok"].id
        assert pred["a3"] not in (named["gone"].id, named["review"].id, named["other_scope"].id)
        assert pred["untagged"] is not None
        # a second pass (re-enrichment) finds the same and adds no edge
        await graph.relations.link_predecessors(ids, T0 + 1)
        rows = await graph.ro_query("MATCH (:Memory)-[r:PRECEDED_BY]->(:Memory) RETURN count(r), min(r.create_time)")
        assert rows[0] == [sum(p is not None for p in expected.values()), T0]
    finally:
        await graph.close()


async def test_predecessor_lookup_in_a_sole_scope_crowd_without_tags(settings) -> None:
    """Untagged memories only, many at identical times: the scan's tie-break on create time."""
    graph = GraphStore(settings)
    await graph.ensure_schema()
    try:
        memories = [_memory(f"turn {i}", event=T0 + (i // 10) * 86400.0, created=T0 + i) for i in range(60)]
        await graph.memories.create_many(list(reversed(memories)))
        ids = [m.id for m in memories]
        expected = {r[0]: r[1] for r in await graph.ro_query(SCAN, {"ids": ids})}
        await graph.relations.link_predecessors(ids, T0)
        assert await _predecessors(graph, ids) == expected
        assert expected == {m.id: (memories[i - 1].id if i else None) for i, m in enumerate(memories)}
    finally:
        await graph.close()


async def test_guarded_batch_writes_skip_memories_edited_meanwhile(settings) -> None:
    graph = GraphStore(settings)
    await graph.ensure_schema()
    try:
        kept, edited = _memory("Alice runs Postgres", event=T0, created=T0), _memory("Bob runs Redis", event=T0,
                                                                                        created=T0 + 1)
        await graph.memories.create_many([kept, edited])
        await graph.query("MATCH (m:Memory {id: $id}) SET m.content = 'edited', m.content_hash = 'new'",
                          {"id": edited.id})
        fields = {"embedding_status": "EMBEDDING_STATUS_DONE", "embedding_model": "m"}
        landed = await graph.memories.set_enrichment_many([(kept.id, kept.content_hash, fields),
                                                  (edited.id, edited.content_hash, fields)], return_nodes=True)
        assert set(landed) == {kept.id}
        assert landed[kept.id]["embedding_status"] == "EMBEDDING_STATUS_DONE" and landed[kept.id]["content"] == \
            "Alice runs Postgres"
        entity = memory_pb2.Entity(name="redis", kind="tool", tag="entity:tool:redis")
        written = await write_entities_many(graph, [(kept.id, "default", kept.content_hash, []),
                                                    (edited.id, "default", edited.content_hash, [entity])])
        assert written == {kept.id}
        rows = await graph.ro_query("MATCH (m:Memory {id: $id}) OPTIONAL MATCH (m)-[:MENTIONS]->(e) "
                                    "RETURN m.embedding_status, m.entity_tags, count(e)", {"id": edited.id})
        assert rows == [["EMBEDDING_STATUS_UNSPECIFIED", [], 0]]  # untouched
    finally:
        await graph.close()


async def test_a_status_write_at_a_version_marks_a_memory_edited_since_payload_pending(settings) -> None:
    """``built_from``: a node whose tags were edited since its payload was built is not marked
    DONE over that payload: it gets PAYLOAD_PENDING, which its own event settles."""
    kept = _memory("Carol runs Kafka", event=T0, created=T0)
    edited = _memory("Dan runs Mongo", event=T0, created=T0 + 1)
    graph = GraphStore(settings)
    try:
        await graph.ensure_schema()
        await graph.memories.create_many([kept, edited])
        await graph.query("MATCH (m:Memory {id: $id}) SET m.version = m.version + 1, m.tags = ['ops'], "
                          "m.embedding_status = 'EMBEDDING_STATUS_PAYLOAD_PENDING'", {"id": edited.id})
        fields = {"embedding_status": "EMBEDDING_STATUS_DONE"}
        landed = await graph.memories.set_enrichment_many(
            [(kept.id, kept.content_hash, fields), (edited.id, edited.content_hash, fields)],
            built_from={kept.id: kept, edited.id: edited})
        assert set(landed) == {kept.id, edited.id}
        rows = await graph.ro_query("UNWIND $ids AS i MATCH (m:Memory {id: i}) RETURN m.embedding_status",
                                    {"ids": [kept.id, edited.id]})
        assert rows == [["EMBEDDING_STATUS_DONE"], ["EMBEDDING_STATUS_PAYLOAD_PENDING"]]
    finally:
        await graph.close()


# --- batch versus one at a time, end to end ---------------------------------------------------

TEXTS = [
    ("The billing service uses Postgres 14 as its database.", ["billing"], "2024-01-01T00:00:00Z"),
    ("Lunch on Fridays is pizza with the whole team in Berlin.", ["team"], "2024-01-01T00:00:00Z"),
    ("The billing service uses Postgres 16 as its database.", ["billing"], "2024-06-01T00:00:00Z"),
    ("Alice Johnson takes the nightly Postgres backups of billing.", ["billing", "ops"], "2024-06-01T00:00:00Z"),
    ("Deploys go through Jenkins in Frankfurt every Tuesday.", ["ops"], "2024-02-01T00:00:00Z"),
    ("Deploys go through Jenkins in Frankfurt every Thursday.", ["ops"], "2024-03-01T00:00:00Z"),
    ("Bob Stone prefers Kubernetes over plain Docker for staging.", [], "2024-03-02T00:00:00Z"),
    ("Bob Stone prefers Kubernetes over plain Docker for production.", [], "2024-03-03T00:00:00Z"),
    ("Our cache is Redis, run by Carol King in London.", ["infra"], "2024-03-03T00:00:00Z"),
    ("Our cache is Redis, run by Carol King in Paris.", ["infra"], "2024-03-04T00:00:00Z"),
    ("The migration plan moves every service to Kubernetes. " * 4 + "Budget approved by finance. "
     + "Rollout starts in spring with the billing service first. " * 5, ["billing", "plan"], "2024-04-01T00:00:00Z"),
    ("Grafana dashboards watch the billing latency.", ["billing", "ops"], "2024-06-01T00:00:00Z"),
    ("We never deploy on Fridays.", ["ops"], "2024-06-02T00:00:00Z"),
    ("We deploy on Fridays.", ["ops"], "2024-06-03T00:00:00Z"),
    ("The team meets in Berlin every quarter.", ["team"], "2024-06-03T00:00:00Z"),
    ("The team meets in Berlin every month.", ["team"], "2024-06-04T00:00:00Z"),
]


async def _snapshot(service) -> dict:
    """What enrichment wrote, keyed by content (ids differ between services)."""
    graph = service.ctx.graph
    nodes = await graph.ro_query("MATCH (m:Memory) RETURN m.id, m.content, m.entities, m.entity_tags, m.summary, "
                                 "m.type, m.confidence, m.enrichment_status, m.embedding_status, m.embedding_model")
    content = {r[0]: r[1] for r in nodes}
    similar = await graph.ro_query("MATCH (a:Memory)-[r:SIMILAR_TO]->(b:Memory) RETURN a.id, b.id, r.strength")
    preceded = await graph.ro_query("MATCH (a:Memory)-[:PRECEDED_BY]->(b:Memory) RETURN a.id, b.id")
    mentions = await graph.ro_query("MATCH (a:Memory)-[:MENTIONS]->(e:Entity) RETURN a.id, e.key, e.name, e.kind")
    reviews = await graph.ro_query("MATCH (r:ReviewItem) RETURN r.memory_id, r.target_id, r.kind, r.status, r.reason")
    points = {p.id: p for p in await service.ctx.vectors.retrieve(list(content), with_vectors=True)}
    events = [e for e in await service.ctx.bus.events_for() if e.type == events_pb2.EVENT_TYPE_MEMORY_ENRICHED]
    skip = {"memory_id", "update_time", "valid_from"}  # differ with the store time
    return {
        "nodes": {r[1]: r[2:] for r in nodes},
        "similar": {(content[a], content[b]): round(s, 4) for a, b, s in similar},
        "preceded": {(content[a], content[b]) for a, b in preceded},
        "mentions": {(content[a], *rest) for a, *rest in mentions},
        "reviews": {(content[a], content[b], *rest) for a, b, *rest in reviews},
        "payloads": {content[mid]: {k: v for k, v in p.payload.items() if k not in skip} for mid, p in points.items()},
        "sparse": {content[mid]: (p.sparse[0], [round(v, 6) for v in p.sparse[1]]) for mid, p in points.items()},
        "dense": {content[mid]: p.vector for mid, p in points.items()},
        "enriched_events": sorted((content[e.memory_id], e.before.embedding_status, e.after.embedding_status,
                                   e.after.content) for e in events),
    }


async def _enrich_all(service, *, paused: bool) -> dict:
    consumer = service.ctx.enrich_consumer
    task = None
    if paused:  # let the whole batch queue up, then enrich it in one fetch
        consumer.stop()
        await asyncio.wait([service.ctx.enrich_task], timeout=5)
    async with service.http() as http:
        r = await http.post("/memory/batch", json={"memories": [
            {"content": c, "tags": t, "timestamp": when} for c, t, when in TEXTS]})
        assert r.status_code == 201, r.text
        if paused:
            consumer._stop.clear()
            task = asyncio.create_task(consumer.run())
        try:
            async def done() -> bool:
                rows = await service.ctx.graph.ro_query(
                    "MATCH (m:Memory) WHERE m.enrichment_status = 'ENRICHMENT_STATUS_DONE' RETURN count(m)")
                return rows[0][0] == len(TEXTS) and await consumer.queue_depth() == 0
            await eventually(done, timeout=120)
            return await _snapshot(service)
        finally:
            if task is not None:
                consumer.stop()
                await asyncio.wait([task], timeout=5)


@pytest.mark.parametrize("spare", [16, 0], ids=["spare-hits", "re-search"])
async def test_a_batch_writes_what_one_memory_at_a_time_writes(settings, tmp_path, monkeypatch, spare) -> None:
    # spare 0: every memory that meets a point written later in the batch is searched again
    monkeypatch.setattr(links, "_SPARE", spare)
    one_by_one = await start_service(settings.model_copy(update={"enrich_batch_size": 1}))
    try:
        expected = await _enrich_all(one_by_one, paused=False)
    finally:
        await one_by_one.runner.stop()
    batched_settings = settings.model_copy(update={
        "data_dir": tmp_path / "batched", "graph_name": settings.graph_name + "_b",
        "stream_name": settings.stream_name + "_B", "subject_prefix": settings.subject_prefix + ".b",
        "enrich_batch_size": 64})
    batched = await start_service(batched_settings)
    try:
        consumer = batched.ctx.enrich_consumer
        store, searched_again = batched.ctx.vectors, []
        search_many = store.search_many

        async def counting(requests, *args, **kwargs):
            searched_again.extend(r for r in requests if r[2] is not None and r[2].exclude_ids)
            return await search_many(requests, *args, **kwargs)

        store.search_many = counting
        got = await _enrich_all(batched, paused=True)
        assert bool(searched_again) == (spare == 0)
        # one fetch took the whole batch; the audit events are not delivered to the consumer
        assert consumer.counters.processed == len(TEXTS) and consumer.counters.batches == 1
    finally:
        await batched.runner.stop()
    # the fixture really makes links, proposals, entities, summaries and predecessors
    assert expected["similar"] and expected["reviews"] and expected["mentions"] and expected["preceded"]
    assert any(n[2] for n in expected["nodes"].values())  # a summary
    assert len(expected["enriched_events"]) == len(TEXTS)
    for key in ("nodes", "preceded", "mentions", "payloads", "sparse", "enriched_events"):
        assert got[key] == expected[key], key
    assert got["similar"].keys() == expected["similar"].keys()
    for pair, strength in expected["similar"].items():
        assert abs(got["similar"][pair] - strength) < 1e-3, pair
    assert {r[:4] for r in got["reviews"]} == {r[:4] for r in expected["reviews"]}
    for text, vector in expected["dense"].items():
        assert max(abs(a - b) for a, b in zip(vector, got["dense"][text], strict=True)) < 1e-3, text


async def test_edit_landing_mid_batch_is_never_overwritten_and_the_rest_is_enriched(own_service) -> None:
    consumer = own_service.ctx.enrich_consumer
    consumer.stop()
    await asyncio.wait([own_service.ctx.enrich_task], timeout=5)
    refused_before = consumer.enricher.stats.refused
    new = "Our cache is Memcached, run by Bob Stone in Paris."
    texts = ["Deploys go through Jenkins in Frankfurt.", "Our cache is Redis, run by Carol King in London.",
             "Grafana dashboards watch the billing latency.", "Alice Johnson takes the nightly Postgres backups."]
    edited = asyncio.Event()
    async with own_service.http() as http:
        r = await http.post("/memory/batch", json={"memories": [{"content": t} for t in texts]})
        assert r.status_code == 201, r.text
        ids = r.json()["memory_ids"]

        async def land_edit(memory, event) -> None:
            # The batch's vectors and embedding status are written; entities, links, summary
            # and enrichment status are not yet: the edit lands now.
            if memory.id == ids[1] and not edited.is_set():
                edited.set()
                r = await http.patch(f"/memory/{memory.id}", json={"content": new})
                assert r.status_code == 200, r.text

        consumer.after_embed.append(land_edit)
        consumer._stop.clear()
        task = asyncio.create_task(consumer.run())
        try:
            async def all_done() -> list[dict] | None:
                out = []
                for mid, text in zip(ids, [texts[0], new, *texts[2:]], strict=True):
                    memory = (await http.get(f"/memory/{mid}")).json()["memory"]
                    if memory["enrichment_status"] != "done" or memory["content"] != text:
                        return None
                    out.append(memory)
                return out
            memories = await eventually(all_done, timeout=60)
        finally:
            consumer.after_embed.remove(land_edit)
            consumer.stop()
            await asyncio.wait([task], timeout=5)
    assert edited.is_set()
    tags = {e["tag"] for e in memories[1]["entities"]}
    assert "entity:tool:memcached" in tags and "entity:place:paris" in tags
    assert not tags & {"entity:tool:redis", "entity:place:london", "entity:person:carol-king"}
    assert "entity:tool:jenkins" in {e["tag"] for e in memories[0]["entities"]}
    assert "entity:tool:grafana" in {e["tag"] for e in memories[2]["entities"]}
    assert consumer.enricher.stats.refused == refused_before + 1  # only the edited memory's stale pass
    point = (await own_service.ctx.vectors.retrieve([ids[1]]))[0]
    assert point.payload["content"] == new and point.payload["embedding_model"] != ""


async def test_batch_stored_while_nats_is_down_reaches_the_stream_once_it_is_back(own_nats) -> None:
    running = own_nats.service
    async with running.http() as http:
        await own_nats.stop()  # the graph write succeeds, the pipelined publish fails
        texts = [f"batch item {i} stored while NATS was down" for i in range(3)]
        r = await http.post("/memory/batch", json={"memories": [{"content": t} for t in texts]})
        assert r.status_code == 201, r.text
        ids = r.json()["memory_ids"]
        publisher = running.ctx.publisher
        assert await publisher.backlog() == 3
        await own_nats.start()

        async def on_stream():
            if await publisher.backlog():
                return None
            events = [e for e in await running.ctx.bus.events_for()
                      if e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED]
            return events if len(events) >= 3 else None

        created = await eventually(on_stream, timeout=30)
        assert sorted(e.memory_id for e in created) == sorted(ids)  # each once, in the stream
        assert [e.after.content for e in sorted(created, key=lambda e: ids.index(e.memory_id))] == texts

        async def enriched():
            memories = [(await http.get(f"/memory/{mid}")).json()["memory"] for mid in ids]
            return all(m["enrichment_status"] == "done" for m in memories)
        await eventually(enriched, timeout=60)


async def test_nats_back_without_its_store_gets_stream_and_consumer_again_and_enrichment_resumes(own_nats) -> None:
    """A NATS restarted with an empty store (a pod without its volume): the outbox drain
    makes the stream again and the enrichment consumer its durable consumer, with the
    configuration of the start; what was stored since is enriched."""
    running = own_nats.service
    async with running.http() as http:
        await own_nats.stop()
        shutil.rmtree(own_nats.nats.store_dir)
        await own_nats.start()
        ids = [await rest_store(http, f"stored after NATS lost its store {i}") for i in range(5)]

        async def enriched():
            memories = [await rest_memory(http, mid) for mid in ids]
            return all(m["enrichment_status"] == "done" for m in memories)
        await eventually(enriched, timeout=60)
        bus = running.ctx.bus
        info = await bus.js.consumer_info(running.settings.stream_name, ENRICH_DURABLE)
        assert info.config.filter_subjects == bus.consumer_config(ENRICH_DURABLE).filter_subjects
        assert await running.ctx.publisher.backlog() == 0


async def test_batch_with_rejected_content_is_refused_whole_naming_the_first_blocked_item(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "a rejected fact", "require_review": True})
        mid = r.json()["memory_id"]
        r = await http.post(f"/v1/review-items/{mid}:reject", json={"reason": "wrong fact"})
        assert r.status_code == 200, r.text
        tomb = r.json()["tombstone"]
        before = await service.ctx.graph.memories.count(service.scope)
        r = await http.post("/memory/batch", json={"memories": [
            {"content": "fine one"}, {"content": "fine two"}, {"content": "A  rejected FACT"},
            {"content": "a rejected fact"}]})
        assert r.status_code == 409, r.text
        error = r.json()["error"]
        assert "memories[2].content" in error and tomb["id"] in error and "wrong fact" in error
        assert await service.ctx.graph.memories.count(service.scope) == before  # all or nothing
        r = await http.post("/memory/batch", json={"memories": [{"content": "a rejected fact"}],
                                                   "scope": "other/scope"})
        assert r.status_code == 201  # another scope is not blocked


async def test_look_ahead_takes_texts_from_the_events_and_reads_the_graph_only_for_the_rest(service) -> None:
    from types import SimpleNamespace

    from automem.common.lifecycle import make_event

    consumer = service.ctx.enrich_consumer
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Dana Whitfield keeps the Postgres backups in Oslo."})
        assert r.status_code == 201, r.text
        stored = r.json()["memory_id"]
    # an event carrying its record (the memory is not in the graph: only the event knows the text)
    carried = Memory(id=str(uuid.uuid4()), content="Priya Raman moved the Kafka cluster to Lisbon.")
    with_after = make_event(events_pb2.EVENT_TYPE_MEMORY_CREATED, before=None, after=carried, actor="test")
    # an event without one: its text is read from the graph
    bare = events_pb2.MemoryEvent(type=events_pb2.EVENT_TYPE_MEMORY_CREATED, memory_id=stored)
    reads = []
    hydrate = consumer.graph.memories.hydrate

    async def counting(ids, *args, **kwargs):
        reads.append(list(ids))
        return await hydrate(ids, *args, **kwargs)

    consumer.graph.memories.hydrate = counting
    try:
        out = await consumer._look_ahead([SimpleNamespace(data=e.SerializeToString()) for e in (with_after, bare)])
    finally:
        consumer.graph.memories.hydrate = hydrate
    texts = {carried.content, "Dana Whitfield keeps the Postgres backups in Oslo."}
    assert set(out.vectors) == texts and set(out.entities) == texts
    # (the service's own consumer may read the stored memory at the same time: look for the ids)
    assert [stored] in reads and not any(carried.id in ids for ids in reads)
    assert "entity:tool:kafka" in {e.tag for e in out.entities[carried.content]}
    assert out.vectors[carried.content] == consumer.provider.embed([carried.content])[0].tolist()


async def test_next_look_ahead_starts_when_this_batch_look_ahead_is_over_not_after_its_reads(own_service) -> None:
    """The models do not wait for a batch's graph reads: once the look-ahead of batch k is
    over, the look-ahead of batch k+1 starts while batch k reads the graph. Batch 2's first
    graph read is held until another look-ahead starts; it is released by that look-ahead
    (before the change it only started after the read, so the hold ran out), and every
    memory is still enriched."""
    import contextvars

    consumer = own_service.ctx.enrich_consumer
    consumer.stop()
    await asyncio.wait([own_service.ctx.enrich_task], timeout=5)
    texts = [f"Batch look-ahead test {i}: Nadia Rahman ships the Kafka upgrade in Vienna." for i in range(6)]
    batch_of: contextvars.ContextVar[int] = contextvars.ContextVar("batch_of", default=0)
    batches, looked, held = [0], [0], []
    started_again = asyncio.Event()
    process_batch, look_ahead, hydrate = consumer.process_batch, consumer._look_ahead, consumer.graph.memories.hydrate

    async def counting_batches(*args, **kwargs):
        batches[0] += 1
        batch_of.set(batches[0])
        return await process_batch(*args, **kwargs)

    async def counting_look_aheads(msgs):
        looked[0] += 1
        if looked[0] >= 2:
            started_again.set()
        return await look_ahead(msgs)

    async def holding(ids, *args, **kwargs):
        if batch_of.get() == 2 and not held:
            held.append(None)
            try:  # a hold, not a timed assert: what released it is recorded
                await asyncio.wait_for(started_again.wait(), timeout=30)
                held[0] = "look-ahead"
            except TimeoutError:
                held[0] = "ran out"
        return await hydrate(ids, *args, **kwargs)

    consumer.process_batch, consumer._look_ahead, consumer.graph.memories.hydrate = (
        counting_batches, counting_look_aheads, holding)
    try:
        async with own_service.http() as http:
            r = await http.post("/memory/batch", json={"memories": [{"content": t} for t in texts]})
            assert r.status_code == 201, r.text
            ids = r.json()["memory_ids"]
            consumer._stop.clear()
            task = asyncio.create_task(consumer.run(batch=2))
            try:
                async def all_done() -> bool:
                    statuses = [(await http.get(f"/memory/{mid}")).json()["memory"]["enrichment_status"] for mid in ids]
                    return statuses == ["done"] * len(ids)
                await eventually(all_done, timeout=120)
            finally:
                consumer.stop()
                await asyncio.wait([task], timeout=10)
    finally:
        del consumer.process_batch, consumer._look_ahead
        consumer.graph.memories.hydrate = hydrate
    assert held == ["look-ahead"]
    assert batches[0] >= 3 and looked[0] >= 2


async def test_batch_store_calls_get_the_enrichment_bound_not_the_request_bound(shared_service) -> None:
    """An enrichment batch is a background job: its graph and vector calls are bounded by
    ``enrich_store_timeout_seconds``, not by the request bound, so a store slowed by a loaded
    machine does not make the batch give up and embed everything again."""
    from automem.common.timeouts import effective_bound

    settings = shared_service.ctx.settings
    request_bound, enrich_bound = settings.store_timeout_seconds, settings.enrich_store_timeout_seconds
    assert request_bound != enrich_bound
    consumer = shared_service.ctx.enrich_consumer
    seen: list[float | None] = []

    async def record_bound(memory, event) -> None:
        seen.append(effective_bound(request_bound))

    consumer.after_embed.append(record_bound)
    try:
        async with shared_service.http() as http:
            r = await http.post("/memory", json={"content": "Bounds of a background job, not of a request."})
            assert r.status_code == 201, r.text
            mid = r.json()["memory_id"]

            async def done() -> bool:
                return (await http.get(f"/memory/{mid}")).json()["memory"]["enrichment_status"] == "done"
            await eventually(done, timeout=120)
    finally:
        consumer.after_embed.remove(record_bound)
    assert seen and set(seen) == {enrich_bound}
    assert effective_bound(request_bound) == request_bound  # outside a batch
