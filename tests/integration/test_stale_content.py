"""Stale content between a write and its enrichment.

* An edit's new content is what recall matches from the moment the PATCH is acknowledged:
  until enrichment has embedded it again, the memory's vector point (dense and sparse) still
  holds the old text, and neither arm may score the memory on it; its current text is scored
  directly, as a memory not yet embedded is (automem/recall/servicer.py ``_lexical``,
  ``_Tiers._rank``).
* A memory deleted while its enrichment runs gets no MEMORY_ENRICHED event and keeps no vector
  point (automem/enrich/consumer.py ``_apply``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from automem.recall.servicer import UNEMBEDDED_SCAN_MAX
from automem.v1 import memory_pb2
from automem.vectors import VectorFilter
from tests.conftest import eventually, rest_store

OLD = "The release checklist lives in Confluence and Priya signs off every deploy."
NEW = "The release checklist lives in Notion and Tomasz signs off every deploy."
HELD_TEXT = "Priya Raman of Acme Corporation rotates the staging database password in Berlin every Tuesday."


async def _hits(http: Any, query: str) -> dict[str, dict]:
    r = await http.get("/recall", params={"query": query, "limit": 10})
    assert r.status_code == 200, r.text
    return {h["id"]: h for h in r.json()["results"]}


async def _stop_enrichment(running: Any) -> None:
    running.ctx.enrich_consumer.stop()
    await asyncio.wait_for(running.ctx.enrich_task, timeout=30)


async def _edit_while_enrichment_is_stopped(own_service, backlog: int) -> None:
    """Store and embed OLD (plus two other memories), stop enrichment, queue ``backlog``
    memories waiting for their embedding, edit OLD into NEW; then recall matches NEW only, and
    still after enrichment resumes and embeds NEW."""
    graph, vectors, consumer = own_service.ctx.graph, own_service.ctx.vectors, own_service.ctx.enrich_consumer
    async with own_service.http() as http:
        mid = await rest_store(http, OLD)
        other = await rest_store(http, "Our Confluence space holds the onboarding guide for new hires.")
        await rest_store(http, "Lunch on Fridays is pizza with the whole team.")

        async def embedded() -> bool:
            rows = await graph.ro_query("MATCH (m:Memory) WHERE m.embedding_status = 'EMBEDDING_STATUS_DONE' "
                                        "RETURN count(m)")
            return rows[0][0] == 3 and await vectors.count(VectorFilter(scope="default")) == 3
        await eventually(embedded, timeout=60)
        before = await _hits(http, "Confluence Priya")
        assert before[mid]["score_components"].get("keyword", 0) > 0
        assert before[mid]["score_components"].get("vector", 0) > 0

        await _stop_enrichment(own_service)
        filler = [{"content": f"routine standup note number {i} about the weekly sync"} for i in range(backlog)]
        for start in range(0, len(filler), 100):
            r = await http.post("/memory/batch", json={"memories": filler[start:start + 100]})
            assert r.status_code in (200, 201), r.text
        r = await http.patch(f"/memory/{mid}", json={"content": NEW})
        assert r.status_code == 200, r.text

        # The old text's words no longer find the memory, through either arm; another memory
        # holding them still is found.
        stale = await _hits(http, "Confluence Priya")
        assert mid not in stale, (stale[mid]["match_type"], stale[mid]["score_components"])
        assert other in stale
        # The new text's words find it at once, scored on its current text by the keyword arm;
        # the dense arm leaves it out until its new vector exists.
        fresh = await _hits(http, "Notion Tomasz")
        assert list(fresh)[:1] == [mid], {k: h["score_components"] for k, h in fresh.items()}
        components = fresh[mid]["score_components"]
        assert components.get("keyword", 0) > 0 and not components.get("vector"), components

        consumer._stop.clear()
        task = asyncio.create_task(consumer.run())
        try:
            async def reembedded() -> dict | None:
                hit = (await _hits(http, "Notion Tomasz")).get(mid)
                return hit if hit is not None and hit["score_components"].get("vector", 0) > 0 else None
            hit = await eventually(reembedded, timeout=120)
            assert hit["score_components"].get("keyword", 0) > 0
            # Its new vectors: the dense arm may still list it (it lists the nearest memories,
            # however far), the keyword arm does not.
            again = (await _hits(http, "Confluence Priya")).get(mid)
            assert again is None or not again["score_components"].get("keyword"), again["score_components"]
        finally:
            consumer.stop()
            await asyncio.wait([task], timeout=30)


async def test_edited_content_is_what_recall_matches_before_it_is_embedded_again(own_service) -> None:
    await _edit_while_enrichment_is_stopped(own_service, backlog=0)


async def test_edited_content_is_what_recall_matches_behind_a_large_backlog(own_service) -> None:
    """More than UNEMBEDDED_SCAN_MAX memories wait for their embedding: the lexical arm finds
    the waiting ones through FalkorDB's full-text index, and the edited one still is matched on
    its new text only."""
    await _edit_while_enrichment_is_stopped(own_service, backlog=UNEMBEDDED_SCAN_MAX + 5)


async def test_memory_deleted_during_its_enrichment_gets_no_event_and_no_vector(service, monkeypatch) -> None:
    """The enrichment of a new memory is held after it read the memory from the graph; the
    memory is deleted meanwhile; then the enrichment goes on. The batch ends with no vector
    point for the memory (checked before the delete's own event is processed, as when another
    enrich replica handled that event first), no MEMORY_ENRICHED event is ever published for
    it, its node's embedding status is not DONE and no entity is written onto it."""
    consumer, vectors = service.ctx.enrich_consumer, service.ctx.vectors
    target: dict[str, str] = {}
    reached, release = asyncio.Event(), asyncio.Event()
    after_batch: list[list] = []
    prepare, process_batch = consumer.enricher.prepare, consumer.process_batch

    async def held_prepare(memories, known=None):
        # Matched on its text, not its id: an idle consumer may fetch the memory's event
        # before the store's HTTP reply (and so the id) reaches the test.
        mine = [m.id for m in memories if m.content == HELD_TEXT]
        if mine and not reached.is_set():
            target["id"] = mine[0]
            reached.set()
            await release.wait()
        return await prepare(memories, known)

    async def observed_batch(msgs, looked=None, models_done=None):
        await process_batch(msgs, looked, models_done)
        if reached.is_set() and not after_batch:
            after_batch.append(await vectors.retrieve([target["id"]]))

    monkeypatch.setattr(consumer.enricher, "prepare", held_prepare)
    monkeypatch.setattr(consumer, "process_batch", observed_batch)
    async with service.http() as http:
        mid = await rest_store(http, HELD_TEXT)
        try:  # the shared service's consumer may first work through other tests' events
            await asyncio.wait_for(reached.wait(), timeout=120)
        except TimeoutError:
            node = await service.ctx.graph.memories.get(mid, service.scope)
            raise AssertionError(
                f"the enrichment never reached the memory: queue depth {await consumer.queue_depth()}, "
                f"counters {consumer.counters}, task {service.ctx.enrich_task}, "
                f"embedding status {node.embedding_status if node else None}") from None
        assert target["id"] == mid
        r = await http.delete(f"/memory/{mid}")
        assert r.status_code == 200, r.text
        release.set()

        async def batch_done() -> bool:
            return bool(after_batch)
        await eventually(batch_done, timeout=60)
        assert after_batch == [[]], "the deleted memory's vector point was written by its late enrichment"

        async def history() -> list[str] | None:
            r = await http.get(f"/v1/memories/{mid}/history")
            assert r.status_code == 200, r.text
            types = [e["type"] for e in r.json()["events"]]
            return types if "EVENT_TYPE_MEMORY_DELETED" in types else None
        await eventually(history)
        await eventually(lambda: _drained(consumer), timeout=60)
        types = await history()
        assert "EVENT_TYPE_MEMORY_ENRICHED" not in types, types
        assert await vectors.retrieve([mid]) == []
        node = await service.ctx.graph.memories.get(mid, service.scope)
        assert node.state == memory_pb2.MEMORY_STATE_DELETED
        assert node.embedding_status != memory_pb2.EMBEDDING_STATUS_DONE
        # Nor are its entities written: no entity data on the tombstone, no MENTIONS edge.
        assert list(node.entities) == [], node.entities
        assert await service.ctx.graph.ro_query(
            "MATCH (m:Memory {id: $id})-[:MENTIONS]->(e) RETURN e.key", {"id": mid}) == []


async def _drained(consumer) -> bool:
    return await consumer.queue_depth() == 0 and not consumer.counters.inflight


# --- an edit of what the vector pre-filter reads: tags, event time, state ---------------

PAYLOAD_TEXT = "The quarterly invoices for Globex are exported to the finance share every Monday."


async def _embedded(own_service, *ids: str) -> None:
    async def done() -> bool:
        points = await own_service.ctx.vectors.retrieve(list(ids))
        nodes = [await own_service.ctx.graph.memories.get(i, own_service.scope) for i in ids]
        return len(points) == len(ids) and all(
            n.embedding_status == memory_pb2.EMBEDDING_STATUS_DONE for n in nodes)
    await eventually(done, timeout=60)


async def _recall(http: Any, **params: Any) -> dict[str, dict]:
    r = await http.get("/recall", params={"limit": 10, **params})
    assert r.status_code == 200, r.text
    return {h["id"]: h for h in r.json()["results"]}


async def _resume(own_service):
    consumer = own_service.ctx.enrich_consumer
    consumer._stop.clear()
    return asyncio.create_task(consumer.run())


async def test_a_memory_an_edit_brings_into_a_filter_is_recalled_before_enrichment_catches_up(own_service) -> None:
    """The vector payload (tags, event time, state) is rewritten by enrichment after an edit;
    until then a recall whose filter the edit made the memory match still finds it (through
    the graph, which holds the edit), and a filter it no longer matches leaves it out. After
    enrichment the memory is scored by both arms again and its status is DONE."""
    async with own_service.http() as http:
        mid = await rest_store(http, PAYLOAD_TEXT, tags=["finance"], timestamp="2024-01-10T09:00:00Z")
        other = await rest_store(http, "Globex invoices are checked by the billing team before export.",
                                 tags=["billing"], timestamp="2025-06-02T09:00:00Z")
        await _embedded(own_service, mid, other)
        await _stop_enrichment(own_service)

        r = await http.patch(f"/memory/{mid}", json={"tags": ["billing"], "timestamp": "2025-06-01T09:00:00Z"})
        assert r.status_code == 200, r.text
        assert r.json()["memory"]["embedding_status"] == "payload_pending", r.json()["memory"]

        query = "Globex invoices export"
        tagged = await _recall(http, query=query, tags="billing")
        assert set(tagged) == {mid, other}, {k: h["memory"]["tags"] for k, h in tagged.items()}
        assert tagged[mid]["score_components"].get("keyword", 0) > 0, tagged[mid]["score_components"]
        assert mid not in await _recall(http, query=query, tags="finance")
        window = await _recall(http, query=query, start="2025-05-01T00:00:00Z", end="2025-07-01T00:00:00Z")
        assert set(window) == {mid, other}
        assert mid not in await _recall(http, query=query, start="2024-01-01T00:00:00Z", end="2024-02-01T00:00:00Z")
        # Without a filter its vector (the content did not change) still scores it.
        plain = await _recall(http, query=query)
        assert plain[mid]["score_components"].get("vector", 0) > 0, plain[mid]["score_components"]

        task = await _resume(own_service)
        try:
            async def caught_up() -> dict | None:
                hit = (await _recall(http, query=query, tags="billing")).get(mid)
                return hit if hit is not None and hit["score_components"].get("vector", 0) > 0 else None
            await eventually(caught_up, timeout=60)
            node = await own_service.ctx.graph.memories.get(mid, own_service.scope)
            assert node.embedding_status == memory_pb2.EMBEDDING_STATUS_DONE
            point = (await own_service.ctx.vectors.retrieve([mid]))[0]
            assert point.payload["tags"] == ["billing"]
        finally:
            own_service.ctx.enrich_consumer.stop()
            await asyncio.wait([task], timeout=30)


async def test_an_approved_memory_is_recalled_before_enrichment_rewrites_its_state(own_service) -> None:
    """A memory embedded while it waited for review is found by recall as soon as it is
    approved, although its vector payload still says PENDING_REVIEW until enrichment."""
    async with own_service.http() as http:
        mid = await rest_store(http, PAYLOAD_TEXT, require_review=True)
        await _embedded(own_service, mid)
        query = "Globex invoices export"
        assert mid not in await _recall(http, query=query)  # pending memories are withheld
        await _stop_enrichment(own_service)
        r = await http.post(f"/v1/review-items/{mid}:approve", json={"reason": "checked"})
        assert r.status_code == 200, r.text
        point = (await own_service.ctx.vectors.retrieve([mid]))[0]
        assert point.payload["state"] == "PENDING_REVIEW"  # enrichment has not caught up
        hits = await _recall(http, query=query)
        assert mid in hits, hits
        task = await _resume(own_service)
        try:
            async def caught_up() -> bool:
                return (await own_service.ctx.vectors.retrieve([mid]))[0].payload["state"] == "ACTIVE"
            await eventually(caught_up, timeout=60)
            node = await own_service.ctx.graph.memories.get(mid, own_service.scope)
            assert node.embedding_status == memory_pb2.EMBEDDING_STATUS_DONE
        finally:
            own_service.ctx.enrich_consumer.stop()
            await asyncio.wait([task], timeout=30)


async def test_memories_deleted_before_their_embedding_leave_the_backlog_recall_reads(own_service) -> None:
    """Memories deleted (or rejected) before enrichment embedded them never get a vector, so
    their status stays PENDING; recall's backlog read leaves them out, or a bulk store deleted
    at once would keep every later recall on the slow full-text path (more than
    UNEMBEDDED_SCAN_MAX waiting) for good."""
    graph = own_service.ctx.graph
    async with own_service.http() as http:
        await _stop_enrichment(own_service)
        filler = [{"content": f"scratch note number {i} from the import", "tags": ["scratch"]}
                  for i in range(UNEMBEDDED_SCAN_MAX + 5)]
        for start in range(0, len(filler), 100):
            r = await http.post("/memory/batch", json={"memories": filler[start:start + 100]})
            assert r.status_code in (200, 201), r.text
        review = await rest_store(http, "A scratch proposal to be rejected.", require_review=True)
        assert len(await graph.memories.unembedded("default", UNEMBEDDED_SCAN_MAX + 10)) == UNEMBEDDED_SCAN_MAX + 6
        r = await http.delete("/memory/by-tag", params={"tags": "scratch"})
        assert r.status_code == 200, r.text
        r = await http.post(f"/v1/review-items/{review}:reject", json={"reason": "not needed"})
        assert r.status_code == 200, r.text
        kept = await rest_store(http, "Zanzibar gateway credentials rotate monthly")
        waiting = await graph.memories.unembedded("default", UNEMBEDDED_SCAN_MAX + 10)
        assert [w[0] for w in waiting] == [kept], len(waiting)
        hits = await _recall(http, query="zanzibar credentials")
        assert list(hits)[:1] == [kept]


async def test_a_second_tag_edit_racing_the_first_ones_enrichment_stays_payload_pending(own_service,
                                                                                       monkeypatch) -> None:
    """Edit B reads the memory while edit A's payload is pending; A's enrichment rewrites the
    payload and settles DONE before B's write lands. B's write decides the status on the node
    (PAYLOAD_PENDING again): not DONE over a payload that lacks B's tags."""
    from automem.common.lifecycle import make_event
    from automem.v1 import events_pb2

    graph, consumer = own_service.ctx.graph, own_service.ctx.enrich_consumer
    async with own_service.http() as http:
        mid = await rest_store(http, PAYLOAD_TEXT, tags=["finance"])
        await _embedded(own_service, mid)
        await _stop_enrichment(own_service)
        r = await http.patch(f"/memory/{mid}", json={"tags": ["billing"]})
        assert r.json()["memory"]["embedding_status"] == "payload_pending"
        replace, raced = graph.memories.replace, []

        async def replace_after_enrichment(memory, expected, **kwargs):
            if not raced:
                raced.append(mid)
                first = await graph.memories.get(mid, own_service.scope)
                await consumer._apply({mid: (first, make_event(events_pb2.EVENT_TYPE_MEMORY_UPDATED,
                                                               before=first, after=first))}, set())
                settled = await graph.memories.get(mid, own_service.scope)
                assert settled.embedding_status == memory_pb2.EMBEDDING_STATUS_DONE
            return await replace(memory, expected, **kwargs)
        monkeypatch.setattr(graph.memories, "replace", replace_after_enrichment)
        r = await http.patch(f"/memory/{mid}", json={"tags": ["ops"]})
        assert r.status_code == 200 and raced, r.text
        node = await graph.memories.get(mid, own_service.scope)
        assert node.embedding_status == memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING
        assert (await own_service.ctx.vectors.retrieve([mid]))[0].payload["tags"] == ["billing"]
        assert mid in await _recall(http, query="Globex invoices export", tags="ops")


async def test_a_tag_edit_during_the_first_embedding_is_not_settled_over(own_service, monkeypatch) -> None:
    """A tag edit lands while enrichment embeds the memory's first version (between the vector
    write and the status write): the status write finds the version moved and leaves
    PAYLOAD_PENDING, so a recall filtered on the new tag finds the memory before the edit's
    own event is applied."""
    graph, vectors = own_service.ctx.graph, own_service.ctx.vectors
    async with own_service.http() as http:
        await _stop_enrichment(own_service)
        mid = await rest_store(http, PAYLOAD_TEXT, tags=["finance"])
        upsert, settle = vectors.upsert_many, graph.memories.set_enrichment_many
        edited: list[str] = []
        seen: list[tuple] = []

        async def upsert_then_edit(points, *args, **kwargs):
            out = await upsert(points, *args, **kwargs)
            if not edited and any(p[0] == mid for p in points):
                r = await http.patch(f"/memory/{mid}", json={"tags": ["billing"]})
                assert r.status_code == 200, r.text
                edited.append(r.json()["memory"]["embedding_status"])
            return out

        async def settle_then_look(rows, **kwargs):
            out = await settle(rows, **kwargs)
            if edited and not seen and kwargs.get("return_nodes"):
                node = await graph.memories.get(mid, own_service.scope)
                seen.append((node.version, node.embedding_status, (await vectors.retrieve([mid]))[0].payload["tags"],
                             mid in await _recall(http, query="Globex invoices export", tags="billing")))
            return out
        monkeypatch.setattr(vectors, "upsert_many", upsert_then_edit)
        monkeypatch.setattr(graph.memories, "set_enrichment_many", settle_then_look)
        task = await _resume(own_service)
        try:
            await eventually(lambda: asyncio.sleep(0, bool(seen)), timeout=60)
        finally:
            own_service.ctx.enrich_consumer.stop()
            await asyncio.wait([task], timeout=30)
        assert edited == ["pending"]  # read before the first embedding's status write
        assert seen == [(2, memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING, ["finance"], True)], seen
