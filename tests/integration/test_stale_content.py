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
        if any(m.id == target.get("id") for m in memories):
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
        target["id"] = mid = await rest_store(http, "Priya Raman of Acme Corporation rotates the staging database "
                                                    "password in Berlin every Tuesday.")
        await asyncio.wait_for(reached.wait(), timeout=30)
        r = await http.delete(f"/memory/{mid}")
        assert r.status_code == 200, r.text
        release.set()

        async def batch_done() -> bool:
            return bool(after_batch)
        await eventually(batch_done, timeout=30)
        assert after_batch == [[]], "the deleted memory's vector point was written by its late enrichment"

        async def history() -> list[str] | None:
            r = await http.get(f"/v1/memories/{mid}/history")
            assert r.status_code == 200, r.text
            types = [e["type"] for e in r.json()["events"]]
            return types if "EVENT_TYPE_MEMORY_DELETED" in types else None
        await eventually(history)
        await eventually(lambda: _drained(consumer), timeout=30)
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
