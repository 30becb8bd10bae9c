"""Writes that change an existing memory, against each other (automem/ingest/servicer.py).

* A superseding edge (INVALIDATED_BY / EVOLVED_INTO) from a memory already SUPERSEDED by
  another is refused as a second supersede is; the same edge as its supersession is a
  no-op MERGE.
* One memory's events are published in version order when a supersede races a delete
  (automem/ingest/memory_locks.py): its history, read from the stream oldest first, lists
  its versions in order.
* So do a review decision (approve, reject, a supersede proposal's approval) and an update
  of the same memory (automem/ingest/review.py takes the same locks); each publish is made
  slow (a random 0-50 ms) to widen the window between a graph write and its event.
* A purge (by id, or of the scope) while an update of the memory is publishing waits for
  that event and scrubs it: no content of the purged memory stays on the stream.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid

import grpc
import httpx
import pytest

from automem.v1 import events_pb2, ingest_service_pb2, memory_pb2
from tests.conftest import rest_memory, rest_store

#: Rounds of the supersede/delete race; before the per-memory locks about a third of the
#: rounds in which both landed listed DELETED before SUPERSEDED.
ROUNDS = 40
#: Rounds of the review decision/update races; before the review paths took the memory
#: locks, 17-21 of 100 approve rounds and 3-5 of 100 reject rounds listed the memory's
#: versions out of order (three runs each).
REVIEW_ROUNDS = 100
#: Rounds of the supersede proposal race; 75-78 of 100 were out of order before.
PROPOSAL_ROUNDS = 20
#: Seconds a held-back update event waits for the purge racing it to finish; a purge that
#: waits for the update's lock instead lets it go after this long.
PURGE_OVERTAKE_SECONDS = 3.0
#: Seconds a purge call may take: it reads the shared service's whole event stream once.
PURGE_WAIT = 300.0


async def _versions(http, mid: str) -> list[int]:
    r = await http.get(f"/v1/memories/{mid}/versions", params={"page_size": 100})
    assert r.status_code == 200, r.text
    return [int(v["version"]) for v in r.json()["versions"]]


async def _history(http, mid: str) -> list[dict]:
    r = await http.get(f"/v1/memories/{mid}/history", params={"page_size": 100})
    assert r.status_code == 200, r.text
    return r.json()["events"]


async def test_superseding_edge_from_a_memory_superseded_by_another_is_refused(service) -> None:
    async with service.http() as http:
        a = await rest_store(http, "The office is in Berlin", tags=["office"])
        b = await rest_store(http, "The office is in Munich", tags=["office"])
        r = await http.post("/memory", json={"content": "The office is in Hamburg", "tags": ["office"],
                                             "supersedes_memory_id": a})
        assert r.status_code == 201, r.text
        x = r.json()["memory_id"]
        before = await rest_memory(http, a)
        assert (before["state"], before["superseded_by"], before["current_id"]) == ("SUPERSEDED", x, x)
        versions = await _versions(http, a)

        for kind in ("INVALIDATED_BY", "EVOLVED_INTO"):
            r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": kind})
            assert r.status_code == 409, (kind, r.status_code, r.text)
            assert f"memory {a} is already SUPERSEDED by {x}" in r.text, r.text
            assert "memory1_id" in r.text, r.text
        async with service.client() as client:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await client.ingest.CreateRelation(ingest_service_pb2.CreateRelationRequest(
                    relation=memory_pb2.Relation(source_id=a, target_id=b,
                                                 type=memory_pb2.RELATION_TYPE_INVALIDATED_BY)))
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert f"already SUPERSEDED by {x}" in refused.value.details()
        r = await http.post("/associate", json={"associations": [  # the batch takes the same path
            {"memory1_id": a, "memory2_id": x, "type": "RELATES_TO"},
            {"memory1_id": a, "memory2_id": b, "type": "EVOLVED_INTO"}]})
        assert r.status_code == 207, r.text
        assert [(f["index"], f["code"]) for f in r.json()["failed"]] == [(1, 409)], r.text
        assert f"already SUPERSEDED by {x}" in r.json()["failed"][0]["error"]

        after = await rest_memory(http, a)
        assert (after["state"], after["superseded_by"], after["current_id"]) == ("SUPERSEDED", x, x)
        assert after["version"] == before["version"]
        assert await _versions(http, a) == versions
        assert (await rest_memory(http, b))["state"] == "ACTIVE"

        # The same edge as the supersession in place is accepted and changes nothing.
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": x, "type": "INVALIDATED_BY"})
        assert r.status_code == 201, r.text
        again = await rest_memory(http, a)
        assert (again["superseded_by"], again["current_id"], again["version"]) == (x, x, before["version"])
        assert await _versions(http, a) == versions


async def test_superseding_edge_racing_a_supersede_lands_at_most_one(service) -> None:
    """A supersede and a superseding edge from the same ACTIVE memory at once: one lands,
    the other is refused; the memory names the one that landed."""
    async with service.http() as http:
        for i in range(5):
            a = await rest_store(http, f"race source {i}", tags=["race"])
            b = await rest_store(http, f"race other {i}", tags=["race"])
            sr, ar = await asyncio.gather(
                http.post("/memory", json={"content": f"race replacement {i}", "tags": ["race"],
                                           "supersedes_memory_id": a}),
                http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "INVALIDATED_BY"}))
            assert sorted([sr.status_code, ar.status_code]) == [201, 409], (sr.text, ar.text)
            memory = await rest_memory(http, a)
            winner = sr.json()["memory_id"] if sr.status_code == 201 else b
            assert (memory["superseded_by"], memory["current_id"]) == (winner, winner)


async def test_history_of_a_memory_superseded_and_deleted_at_once_is_in_version_order(service) -> None:
    both = 0
    async with service.http() as http:
        for i in range(ROUNDS):
            mid = await rest_store(http, f"supersede versus delete {i}", tags=["sd"])
            sr, dr = await asyncio.gather(
                http.post("/memory", json={"content": f"replacement {i}", "tags": ["sd"], "supersedes_memory_id": mid}),
                http.delete(f"/memory/{mid}"))
            assert sr.status_code in (201, 409) and dr.status_code in (200, 409), (sr.text, dr.text)
            if (sr.status_code, dr.status_code) != (201, 200):
                continue
            both += 1
            events = [e for e in await _history(http, mid) if e["type"] != "EVENT_TYPE_MEMORY_ENRICHED"]
            order = [(e["type"].removeprefix("EVENT_TYPE_"), int(e["version"])) for e in events]
            assert [v for _, v in order] == sorted(v for _, v in order), (mid, order)
            assert [t for t, _ in order] == ["MEMORY_CREATED", "MEMORY_SUPERSEDED", "MEMORY_DELETED"], order
    assert len(service.ctx.ingest.locks) == 0  # no lock outlives its writes
    assert both >= ROUNDS // 4, f"only {both} of {ROUNDS} rounds had both the supersede and the delete land"


# --- review decisions and purges against ingest writes ------------------------------------------


def _order(events: list[dict], memory_id: str) -> list[tuple[str, int]]:
    """(type, version) of ``memory_id``'s own events in history order (enrichment's left out)."""
    return [(e["type"].removeprefix("EVENT_TYPE_"), int(e["version"])) for e in events
            if e["memory_id"] == memory_id and e["type"] != "EVENT_TYPE_MEMORY_ENRICHED"]


@pytest.fixture
def slow_publishes(service, monkeypatch):
    """Every event publish of the service waits a random 0-50 ms first (a slow NATS): the
    gap between a write's graph write and its publish, where another write of the same
    memory could land and publish first, is that much wider."""
    publisher = service.ctx.publisher
    publish, rng = publisher.publish, random.Random(1931)

    async def slow(event, *args, **kwargs):
        await asyncio.sleep(rng.uniform(0.0, 0.05))
        return await publish(event, *args, **kwargs)

    monkeypatch.setattr(publisher, "publish", slow)


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_history_of_a_pending_memory_decided_and_updated_at_once_is_in_version_order(
        service, slow_publishes, decision) -> None:
    """A review decision (automem/ingest/review.py) and an update of the same pending memory
    at once: the memory's history lists its versions in order and ends at the version the
    memory has. (Before the review paths took the memory's lock, about half the rounds in
    which both landed listed the update's version before the decision's.)"""
    both = 0
    async with service.http() as http:

        async def decide(mid: str):
            # ABORTED (the update moved the version first) is retried, as a client would.
            for _ in range(3):
                r = await http.post(f"/v1/review-items/{mid}:{decision}", json={"reason": "checked"})
                if not (r.status_code == 409 and "changed concurrently" in r.text):
                    break
            return r

        for i in range(REVIEW_ROUNDS):
            mid = await rest_store(http, f"{decision} versus update {i}", tags=["du"], require_review=True)
            dr, ur = await asyncio.gather(decide(mid), http.patch(f"/memory/{mid}", json={"importance": 0.9}))
            assert dr.status_code in (200, 409) and ur.status_code in (200, 409), (dr.text, ur.text)
            order = _order(await _history(http, mid), mid)
            assert [v for _, v in order] == sorted(v for _, v in order), (mid, order)
            memory = (await http.get(f"/memory/{mid}", params={"state_mode": "history"})).json()["memory"]
            assert int(memory["version"]) == order[-1][1], (mid, memory["version"], order)
            both += (dr.status_code, ur.status_code) == (200, 200)
    assert len(service.ctx.ingest.locks) == 0  # no lock outlives its writes
    assert both >= REVIEW_ROUNDS // 8, f"only {both} of {REVIEW_ROUNDS} rounds had both the decision and the update land"


async def test_history_of_memories_in_an_approved_supersede_proposal_updated_at_once_is_in_version_order(
        service, slow_publishes) -> None:
    """Approving a supersede proposal (enrichment's contradiction proposal) while both of its
    memories are updated: each memory's history lists its versions in order."""
    both = 0
    async with service.http() as http:
        for i in range(PROPOSAL_ROUNDS):
            old = await rest_store(http, f"proposal target {i}", tags=["pu"])
            new = await rest_store(http, f"proposal replacement {i}", tags=["pu"])
            item = f"proposal-{uuid.uuid4().hex}"
            await service.ctx.graph.review.propose_supersede(item, new, old, service.scope, "contradicts", time.time())
            ar, ur, nr = await asyncio.gather(
                http.post(f"/v1/review-items/{item}:approve", json={"reason": "right"}),
                http.patch(f"/memory/{old}", json={"importance": 0.9}),
                http.patch(f"/memory/{new}", json={"importance": 0.8}))
            assert {ar.status_code, ur.status_code, nr.status_code} <= {200, 409}, (ar.text, ur.text, nr.text)
            for mid in (old, new):
                order = _order(await _history(http, mid), mid)
                assert [v for _, v in order] == sorted(v for _, v in order), (mid, order)
            both += (ar.status_code, ur.status_code, nr.status_code) == (200, 200, 200)
    assert len(service.ctx.ingest.locks) == 0
    assert both >= PROPOSAL_ROUNDS // 8, f"only {both} of {PROPOSAL_ROUNDS} rounds had the approval and both updates land"


class _HeldBack:
    """Holds back the first event ``matches`` picks on its way to NATS (the write's graph
    write is done, its publish not) until :meth:`purge` has answered, or for
    :data:`PURGE_OVERTAKE_SECONDS` — how long a purge that waits for the write's lock (the
    fix) lets it go after."""

    def __init__(self, service, monkeypatch, matches) -> None:
        self.service, self.publishing, self.purged = service, asyncio.Event(), asyncio.Event()
        publish = service.ctx.publisher.publish

        async def held_back(event, *args, **kwargs):
            if matches(event):
                self.publishing.set()
                try:
                    await asyncio.wait_for(self.purged.wait(), PURGE_OVERTAKE_SECONDS)
                except TimeoutError:
                    pass  # the purge waits for this write: publish now
            return await publish(event, *args, **kwargs)

        monkeypatch.setattr(service.ctx.publisher, "publish", held_back)

    async def purge(self, http, purge: str, memory_id: str) -> None:
        """Once the held event is waiting, purge ``memory_id`` (``purge`` = "memory") or the
        scope, and check the purge is done."""
        await asyncio.wait_for(self.publishing.wait(), 30)
        if purge == "memory":
            r = await http.post(f"/v1/memories/{memory_id}:purge", json={"reason": "erasure"})
        else:
            r = await http.post("/v1/scope:purge", json={"confirm_scope": self.service.scope, "reason": "erasure"})
        self.purged.set()
        assert r.status_code == 200, r.text
        assert r.json()["purge"]["status"] == "done", r.text

    async def assert_no_trace(self, marker: str) -> None:
        """Neither the stream nor the outbox holds ``marker``."""
        raw = marker.encode()
        assert await self.service.ctx.bus.scrub(lambda _subject, data: raw in data, dry_run=True) == 0
        assert await self.service.ctx.publisher.scrub(lambda e: e if raw in e.SerializeToString() else None,
                                                      dry_run=True) == 0


@pytest.mark.parametrize("purge", ["memory", "scope"])
async def test_an_update_publishing_while_its_memory_is_purged_leaves_no_content_behind(
        service, monkeypatch, purge) -> None:
    """An update whose graph write is done and whose event is still on its way to NATS, and a
    purge of that memory (by id, or of its scope) meanwhile: the purge waits for the update's
    event and then removes it, so the stream holds no content of the memory, its history is
    the purge notice alone and the memory stays gone. (Before the purges took the memory's
    lock, the update's event, with the content, landed after the purge.)"""
    marker = f"wombat{uuid.uuid4().hex[:10]}"
    held = _HeldBack(service, monkeypatch, lambda event: event.type == events_pb2.EVENT_TYPE_MEMORY_UPDATED
                     and marker in event.after.content)
    async with service.http() as http:
        http.timeout = httpx.Timeout(PURGE_WAIT)
        mid = await rest_store(http, f"Ada keeps a pet {marker}", tags=["pp"])
        update = asyncio.create_task(http.patch(f"/memory/{mid}", json={"content": f"Ada keeps two pets {marker}"}))
        await held.purge(http, purge, mid)
        assert (await update).status_code == 200
        assert (await http.get(f"/memory/{mid}")).status_code == 404
        await held.assert_no_trace(marker)
        assert [e["type"] for e in await _history(http, mid)] == ["EVENT_TYPE_MEMORY_PURGED"]
    assert len(service.ctx.ingest.locks) == 0


@pytest.mark.parametrize("purge", ["memory", "scope"])
async def test_a_relation_publishing_while_its_memory_is_purged_leaves_no_reason_behind(
        service, monkeypatch, purge) -> None:
    """A non-superseding relation (RELATES_TO) whose graph write is done and whose event — with
    its reason — is still on its way to NATS, and a purge of its source memory (by id, or of
    the scope) meanwhile: the purge waits for the relation's event and then removes it, so the
    stream holds no trace of the reason. (Only superseding relations took the memory locks;
    this one's event landed after the purge had scrubbed the stream.)"""
    marker = f"okapi{uuid.uuid4().hex[:10]}"
    held = _HeldBack(service, monkeypatch, lambda event: event.type == events_pb2.EVENT_TYPE_RELATION_CREATED
                     and event.relation.reason == marker)
    async with service.http() as http, service.client() as client:
        http.timeout = httpx.Timeout(PURGE_WAIT)
        a = await rest_store(http, "Ada keeps a ledger", tags=["rp"])
        b = await rest_store(http, "The ledger lives in the blue binder", tags=["rp"])
        relate = asyncio.ensure_future(client.ingest.CreateRelation(ingest_service_pb2.CreateRelationRequest(
            relation=memory_pb2.Relation(source_id=a, target_id=b, strength=0.5, reason=marker),
            type_name="RELATES_TO")))
        await held.purge(http, purge, a)
        await relate
        await held.assert_no_trace(marker)
    assert len(service.ctx.ingest.locks) == 0
