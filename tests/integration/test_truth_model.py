"""The truth model end to end on real NATS, FalkorDB and the embedded Qdrant shard:
atomic supersede, bitemporal reads, trust states, the review queue and tombstones,
delete, the audit log (history, outbox) and recovery (backup, restore, reindex)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
import uuid
from datetime import UTC, datetime

import pytest

from automem.common import backup
from automem.common.bus import Bus
from automem.common.jsontext import json_lines
from automem.common.lifecycle import close_for_supersede
from automem.common.model import Relation, epoch, memory_to_node, now, ts
from automem.common.payload import build_payload
from automem.graph import GraphStore
from automem.ingest.logic import build_memory
from automem.v1 import events_pb2, ingest_service_pb2, memory_pb2, recall_service_pb2, review_service_pb2
from tests.conftest import eventually, start_service


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).isoformat()


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _node(service, mid: str) -> dict | None:
    rows = await service.ctx.graph.ro_query("MATCH (m:Memory {id: $id}) RETURN properties(m)", {"id": mid})
    return rows[0][0] if rows else None


async def _edges(service) -> list:
    """Supersession edges of the test's scope (enrichment adds SIMILAR_TO / PRECEDED_BY edges
    of its own)."""
    return await service.ctx.graph.ro_query("MATCH (a:Memory)-[r:INVALIDATED_BY|EVOLVED_INTO]->(b:Memory) "
                                               "WHERE a.scope = $scope RETURN a.id, type(r), b.id",
                                               {"scope": service.scope})


async def _by_tag(http, tag: str, **params) -> list[dict]:
    r = await http.get("/memory/by-tag", params={"tags": tag, **params})
    assert r.status_code == 200, r.text
    return r.json()["memories"]


async def _history(http, mid: str) -> list[dict]:
    r = await http.get(f"/v1/memories/{mid}/history")
    assert r.status_code == 200, r.text
    return r.json()["events"]


# --- 1. supersede ----------------------------------------------------------------------


async def test_supersede_failing_between_steps_changes_nothing(service) -> None:
    async with service.http() as http:
        old_id = await _store(http, "Deploys run on Fridays", tags=["deploy"])

    async def enriched() -> bool:  # enrichment writes the node too: let it finish before the snapshot
        node = await _node(service, old_id)
        return (node["embedding_status"], node["enrichment_status"]) == (
            "EMBEDDING_STATUS_DONE", "ENRICHMENT_STATUS_DONE")

    await eventually(enriched, timeout=60)
    ingest = service.ctx.ingest
    graph = service.ctx.graph
    before = await _node(service, old_id)
    old = await graph.memories.get(old_id, service.scope)
    stamp = now()
    new = build_memory(ingest_service_pb2.MemoryInput(content="Deploys run on Tuesdays"), scope=service.scope,
                       settings=service.settings, created=stamp, source="test")
    closed = close_for_supersede(old, new.id, epoch(new, "valid_from"), stamp, "moved")
    rel = Relation(source_id=old.id, target_id=new.id, type=8, strength=0.9, scope=service.scope, reason="moved")
    rel.create_time.CopyFrom(ts(stamp))
    with pytest.raises(Exception):  # noqa: B017 - any failure of the one query
        await ingest.supersede_in_graph(old, closed, new, rel, _fail_after_create=True)
    # The query created the replacement and updated the old node before failing: FalkorDB
    # rolled all of it back.
    assert await _node(service, old_id) == before
    assert before["state"] == "ACTIVE" and before["version"] == 1
    assert await _node(service, new.id) is None
    assert await graph.ro_query("MATCH (m:Memory) WHERE m.scope = $scope RETURN m.id",
                                {"scope": service.scope}) == [[old_id]]  # no (empty) new node
    assert await _edges(service) == []
    # The same write without the injected failure applies all of it.
    await ingest.supersede_in_graph(old, closed, new, rel)
    after = await _node(service, old_id)
    assert after["state"] == "SUPERSEDED" and after["superseded_by"] == new.id and after["version"] == 2
    assert await _edges(service) == [[old_id, "INVALIDATED_BY", new.id]]


async def test_automem_four_call_supersede_is_a_supersession(service) -> None:
    async with service.http() as http:
        old_id = await _store(http, "The API lives on port 8000", tags=["api"])
        assert (await http.get(f"/memory/{old_id}")).status_code == 200
        new_id = await _store(http, "The API lives on port 8001", tags=["api"])
        r = await http.patch(f"/memory/{old_id}", json={
            "t_invalid": datetime.now(UTC).isoformat(), "metadata": {"superseded_by": new_id, "deprecated": True}})
        assert r.status_code == 200, r.text
        r = await http.post("/associate", json={"memory1_id": old_id, "memory2_id": new_id,
                                                "type": "INVALIDATED_BY", "strength": 0.9})
        assert r.status_code == 201, r.text
        got = (await http.get(f"/memory/{old_id}")).json()["memory"]
        assert got["state"] == "SUPERSEDED" and got["superseded_by"] == new_id
        assert got["is_current"] is False and got["current_id"] == new_id and got["superseded_at"]
        assert [m["id"] for m in await _by_tag(http, "api")] == [new_id]
        hits = (await http.get("/recall", params={"query": "API port"})).json()["results"]
        assert [h["id"] for h in hits] == [new_id]


@pytest.mark.parametrize("removal", ["delete", "purge"])
async def test_a_linked_replacement_removed_later_leaves_no_stale_fact_current(service, removal) -> None:
    """An INVALIDATED_BY link made the old fact SUPERSEDED but left its window open, so once
    the replacement was deleted or purged the old fact read as current again (state
    SUPERSEDED, ``is_current`` true) in recall, by-tag and get — while the same chain made by
    an atomic supersede showed nothing current. The link now closes the window as a supersede
    does, and both paths agree."""
    tag = f"office-{removal}-{uuid.uuid4().hex[:6]}"
    async with service.http() as http:
        old_id = await _store(http, f"Liam's office is in Building 7 ({tag})", tags=[tag])
        new_id = await _store(http, f"Liam's office is in Building 9 ({tag})", tags=[tag])
        r = await http.post("/associate", json={"memory1_id": old_id, "memory2_id": new_id,
                                                "type": "INVALIDATED_BY", "strength": 0.9})
        assert r.status_code == 201, r.text
        old = (await http.get(f"/memory/{old_id}")).json()["memory"]
        new = (await http.get(f"/memory/{new_id}")).json()["memory"]
        assert old["state"] == "SUPERSEDED" and old["current_id"] == new_id
        atomic_old = await _store(http, f"Liam's desk is by the window ({tag})", tags=[tag])
        r = await http.post(f"/v1/memories/{atomic_old}:supersede",
                            json={"content": f"Liam's desk is by the door ({tag})", "tags": [tag]})
        assert r.status_code in (200, 201), r.text
        atomic_new = r.json()["replacement"]["id"] if "replacement" in r.json() else r.json()["memory_id"]
        for gone in (new_id, atomic_new):
            if removal == "delete":
                r = await http.delete(f"/memory/{gone}")
            else:
                r = await http.post(f"/v1/memories/{gone}:purge", json={"reason": "test"}, timeout=60)
            assert r.status_code == 200, r.text
        assert await _by_tag(http, tag) == []
        hits = (await http.get("/recall", params={"query": "Liam office desk", "tags": tag})).json()["results"]
        assert hits == []
        for mid in (old_id, atomic_old):
            got = (await http.get(f"/memory/{mid}")).json()["memory"]
            assert got["is_current"] is False, got
        # closed where the replacement began
        assert (await http.get(f"/memory/{old_id}")).json()["memory"]["t_invalid"] == new["t_valid"]


# --- 2. bitemporal ---------------------------------------------------------------------


async def test_correction_recorded_after_the_fact_reads_bitemporally(service) -> None:
    """Alice lived in Paris from 1 Jan; on a later day the service learns she moved to Berlin
    on 1 Feb. "Where did she live on 1 March, as known before the correction?" -> Paris;
    "as known now" -> Berlin; "on 15 Jan, as known now" -> Paris."""
    async with service.http() as http:
        paris = await _store(http, "Alice lives in Paris", tags=["alice"], t_valid="2024-01-01T00:00:00Z")
        before_paris = epoch((await service.ctx.graph.memories.get(paris, service.scope)), "record_time") - 1
        before_correction = time.time()
        await asyncio.sleep(0.01)
        r = await http.post(f"/v1/memories/{paris}:supersede", json={
            "content": "Alice lives in Berlin", "tags": ["alice"], "t_valid": "2024-02-01T00:00:00Z",
            "supersede_reason": "she moved"})
        assert r.status_code == 201, r.text
        berlin = r.json()["memory_id"]
        march, january = "2024-03-01T00:00:00Z", "2024-01-15T00:00:00Z"
        known_then = _iso(before_correction)

        # What was true on 1 March, as the service knew it before the correction: Paris, ACTIVE,
        # open-ended (the window the correction closed later).
        then = await _by_tag(http, "alice", as_of=march, known_at=known_then)
        assert [m["id"] for m in then] == [paris]
        assert then[0]["state"] == "ACTIVE" and then[0]["t_invalid"] is None and then[0]["superseded_by"] is None
        # ... and as known now: Berlin.
        assert [m["id"] for m in await _by_tag(http, "alice", as_of=march)] == [berlin]
        # What was true on 15 January, as known now: Paris (its window is closed at 1 Feb).
        jan = await _by_tag(http, "alice", as_of=january)
        assert [m["id"] for m in jan] == [paris] and jan[0]["t_invalid"].startswith("2024-02-01")
        # Before Paris was recorded the service knew nothing.
        assert await _by_tag(http, "alice", as_of=march, known_at=_iso(before_paris)) == []

        # Get by id gives the same answers, with the state.
        got = (await http.get(f"/memory/{paris}", params={"as_of": march, "known_at": known_then})).json()["memory"]
        assert got["is_current"] is True and got["state"] == "ACTIVE" and got["current_id"] is None
        got = (await http.get(f"/memory/{paris}", params={"as_of": march})).json()["memory"]
        assert got["is_current"] is False and got["state"] == "SUPERSEDED" and got["current_id"] == berlin
        assert got["prior_t_invalid"] is None and got["t_invalid"].startswith("2024-02-01")
        got = (await http.get(f"/memory/{paris}", params={"as_of": january})).json()["memory"]
        assert got["is_current"] is True

        # Ranked recall too.
        hits = (await http.get("/recall", params={"query": "where does Alice live", "as_of": march,
                                                  "known_at": known_then})).json()["results"]
        assert [h["id"] for h in hits] == [paris]
        hits = (await http.get("/recall", params={"query": "where does Alice live", "as_of": march})).json()["results"]
        assert [h["id"] for h in hits] == [berlin]


async def _replaced_next_year(http, content: str, tag: str) -> tuple[str, str, str]:
    """Store ``content`` under ``tag`` and supersede it by "The platform team lead is Bob"
    valid from January 15 next year: ``(old id, replacement id, its t_valid)``."""
    old = await _store(http, content, tags=[tag])
    start = f"{datetime.now(UTC).year + 1}-01-15T00:00:00Z"
    r = await http.post("/memory", json={"content": "The platform team lead is Bob", "tags": [tag],
                                         "supersedes_memory_id": old, "t_valid": start})
    assert r.status_code == 201, r.text
    return old, r.json()["memory_id"], start


async def test_a_fact_replaced_from_a_future_date_reads_active_until_then(service) -> None:
    """A supersede whose replacement is valid from next year leaves the old fact in force
    until then. Every read returned it as current but labelled SUPERSEDED, which an agent
    reads as stale. It now reads ACTIVE (with ``superseded_by`` and the window end saying
    what replaces it, and when) until the replacement's window begins; ``state_mode=history``
    shows the stored SUPERSEDED, and reads at a later ``as_of`` show the replacement."""
    async with service.http() as http:
        lead, bob, start = await _replaced_next_year(http, "The platform team lead is Alice", "futurelead")
        got = (await http.get(f"/memory/{lead}")).json()["memory"]
        assert (got["is_current"], got["state"], got["superseded_by"]) == (True, "ACTIVE", bob), got
        assert got["t_invalid"].startswith(start[:10]), got
        listed = await _by_tag(http, "futurelead")
        assert [(m["id"], m["state"]) for m in listed] == [(lead, "ACTIVE")], listed
        hits = (await http.get("/recall", params={"query": "platform team lead"})).json()["results"]
        assert [(h["id"], h["memory"]["state"]) for h in hits] == [(lead, "ACTIVE")], hits
        # The state counts say what the reads say (they counted the stored SUPERSEDED).
        stats = (await http.get("/graph/stats")).json()
        assert stats["by_state"] == {"ACTIVE": 2}, stats  # the fact in force and its replacement-to-be
        analysis = (await http.get("/analyze")).json()
        assert analysis["state_counts"] == {"ACTIVE": 2}, analysis
        # The other aggregates count the same memories (memory_count and the type counts left
        # the fact in force out: they read the stored state; break-it review).
        assert analysis["memory_count"] == 2 and sum(analysis["type_counts"].values()) == 2, analysis
        # The record as stored, and the replacement once its window has begun.
        got = (await http.get(f"/memory/{lead}", params={"state_mode": "history"})).json()["memory"]
        assert got["state"] == "SUPERSEDED", got
        later = f"{datetime.now(UTC).year + 1}-02-01T00:00:00Z"
        got = (await http.get(f"/memory/{lead}", params={"as_of": later})).json()["memory"]
        assert (got["is_current"], got["state"], got["current_id"]) == (False, "SUPERSEDED", bob), got
        hits = (await http.get("/recall", params={"query": "platform team lead", "as_of": later})).json()["results"]
        assert [(h["id"], h["memory"]["state"]) for h in hits] == [(bob, "ACTIVE")], hits



async def test_versions_and_history_of_a_fact_replaced_from_a_future_date_agree_with_the_read(service) -> None:
    """The versions listing and the history said SUPERSEDED for a memory the plain read
    returns ACTIVE (a supersede whose replacement is valid from next year). They now give
    the state the read gives (ACTIVE), the stored SUPERSEDED in ``stored_state``, over REST
    and gRPC; at an ``as_of`` past the replacement's start the read says SUPERSEDED again."""
    async with service.http() as http:
        lead, bob, _start = await _replaced_next_year(http, "The release manager is Carol", "futurerm")
        got = (await http.get(f"/memory/{lead}")).json()["memory"]
        assert got["state"] == "ACTIVE", got
        listed = (await http.get(f"/v1/memories/{lead}/versions")).json()["versions"]
        last = listed[-1]
        assert (last["memory"]["state"], last["stored_state"]) == ("ACTIVE", "SUPERSEDED"), last
        assert listed[0]["stored_state"] == "ACTIVE", listed[0]
        events = (await http.get(f"/v1/memories/{lead}/history")).json()["events"]
        superseded = [e for e in events if e["after"].get("superseded_by") == bob]
        assert superseded, events
        for event in superseded:
            assert (event["after"]["state"], event["after"]["stored_state"]) == (
                "MEMORY_STATE_ACTIVE", "MEMORY_STATE_SUPERSEDED"), event
        # The replacement itself is unaffected.
        listed = (await http.get(f"/v1/memories/{bob}/versions")).json()["versions"]
        assert [(v["memory"]["state"], v["stored_state"]) for v in listed] == [("ACTIVE", "ACTIVE")], listed
    client = service.client()
    try:
        answer = await client.recall.ListMemoryVersions(recall_service_pb2.ListMemoryVersionsRequest(id=lead))
        last = answer.versions[-1]
        assert (last.memory.state, last.stored_state) == (memory_pb2.MEMORY_STATE_ACTIVE,
                                                          memory_pb2.MEMORY_STATE_SUPERSEDED), last
        history = await client.review.ListMemoryEvents(review_service_pb2.ListMemoryEventsRequest(id=lead))
        mine = [e for e in history.events if e.after.superseded_by == bob]
        assert mine and all(e.after.state == memory_pb2.MEMORY_STATE_ACTIVE for e in mine), history
        assert all(history.after_stored_states[e.event_id] == memory_pb2.MEMORY_STATE_SUPERSEDED for e in mine)
    finally:
        await client.close()


async def test_the_fact_in_force_until_a_future_replacement_can_be_corrected_until_then(service) -> None:
    """A memory replaced from a later date reads ACTIVE until then, but a correction of its
    content was refused (409: SUPERSEDED), so the fact in force could not be corrected at all.
    Its content can be corrected now, with a new version; its window stays tied to the
    successor's start, and a memory whose replacement is in force is history as before."""
    async with service.http() as http:
        lead, bob, start = await _replaced_next_year(http, "The platform team lead is Alcie", "fixlead")
        r = await http.patch(f"/memory/{lead}", json={"content": "The platform team lead is Alice"})
        assert r.status_code == 200, r.text
        got = (await http.get(f"/memory/{lead}")).json()["memory"]
        assert (got["content"], got["state"], got["superseded_by"]) == (
            "The platform team lead is Alice", "ACTIVE", bob), got
        assert got["t_invalid"].startswith(start[:10]), got
        r = await http.patch(f"/memory/{lead}", json={"t_invalid": f"{datetime.now(UTC).year + 2}-01-01T00:00:00Z"})
        assert r.status_code == 409 and "t_invalid" in r.json()["error"], r.text

        old = await _store(http, "The office is on floor two")
        r = await http.post("/memory", json={"content": "The office is on floor three", "supersedes_memory_id": old})
        assert r.status_code == 201, r.text
        r = await http.patch(f"/memory/{old}", json={"content": "The office was on floor two"})
        assert r.status_code == 409 and "content" in r.json()["error"], r.text


async def test_a_chain_whose_replacement_was_deleted_says_to_store_anew(service) -> None:
    """With the replacement in force deleted, nothing in the chain is current, and a supersede
    or an edit of the old memory was refused telling the caller to act on "the current
    memory", naming the deleted one (break-it review). The refusal says so and what to do."""
    async with service.http() as http:
        old = await _store(http, "The deploy window is Tuesday")
        r = await http.post("/memory", json={"content": "The deploy window is Wednesday", "supersedes_memory_id": old})
        assert r.status_code == 201, r.text
        new = r.json()["memory_id"]
        assert (await http.delete(f"/memory/{new}")).status_code == 200
        r = await http.post("/memory", json={"content": "The deploy window is Thursday", "supersedes_memory_id": old})
        assert r.status_code == 409 and f"successor {new} is DELETED" in r.text and "store a new memory" in r.text, r.text
        r = await http.patch(f"/memory/{old}", json={"content": "The deploy window was Tuesday"})
        assert r.status_code == 409 and "store a new memory" in r.json()["error"], r.text
        kept = await _store(http, "The release train leaves Monday")
        r = await http.post("/memory", json={"content": "The release train leaves Friday", "supersedes_memory_id": kept})
        assert r.status_code == 201, r.text
        r = await http.post("/memory", json={"content": "The release train leaves Sunday", "supersedes_memory_id": kept})
        assert r.status_code == 409 and "supersede the current memory instead" in r.text, r.text

# --- 3. trust states -------------------------------------------------------------------


async def test_forbidden_transitions_are_refused_and_reads_show_the_state(service) -> None:
    async with service.http() as http:
        a = await _store(http, "state one", tags=["st"])
        b = await _store(http, "state two", tags=["st"])
        r = await http.post(f"/v1/review-items/{a}:approve")
        assert r.status_code == 409 and "ACTIVE" in r.json()["error"]  # not pending review
        assert (await http.delete(f"/memory/{b}")).status_code == 200
        r = await http.patch(f"/memory/{b}", json={"content": "edited"})
        assert r.status_code == 409 and "DELETED" in r.json()["error"]
        r = await http.post(f"/v1/memories/{b}:supersede", json={"content": "new"})
        assert r.status_code == 409 and "DELETED" in r.json()["error"]
        r = await http.post(f"/v1/memories/{a}:supersede", json={"content": "state one, revised", "tags": ["st"]})
        new = r.json()["memory_id"]
        r = await http.post(f"/v1/memories/{a}:supersede", json={"content": "again"})
        assert r.status_code == 409 and "SUPERSEDED" in r.json()["error"]
        listed = await _by_tag(http, "st", state_mode="history")
        assert {m["id"]: m["state"] for m in listed} == {a: "SUPERSEDED", new: "ACTIVE"}
        assert all(m["state"] == "ACTIVE" for m in await _by_tag(http, "st"))


# --- 4. review queue and tombstones ----------------------------------------------------


async def test_review_queue_approve_reject_tombstone_and_lift(service) -> None:
    async with service.http() as http:
        ids = [await _store(http, f"needs review {i}", tags=["rv"], require_review=True) for i in range(3)]
        assert await _by_tag(http, "rv") == []  # pending memories are withheld
        r = await http.get("/v1/review-items", params={"page_size": 2, "kind": "memory"})
        page1 = r.json()
        assert [i["id"] for i in page1["items"]] == ids[:2] and page1["next_page_token"]
        assert page1["items"][0]["kind"] == "memory" and page1["items"][0]["memory"]["state"] == "PENDING_REVIEW"
        page2 = (await http.get("/v1/review-items", params={"page_size": 2, "kind": "memory",
                                                            "page_token": page1["next_page_token"]})).json()
        assert [i["id"] for i in page2["items"]] == ids[2:] and page2["next_page_token"] is None

        r = await http.post(f"/v1/review-items/{ids[0]}:approve", json={"reason": "fine"})
        assert r.status_code == 200, r.text
        assert r.json()["memory"]["state"] == "ACTIVE" and r.json()["item"]["status"] == "approved"
        assert [m["id"] for m in await _by_tag(http, "rv")] == [ids[0]]

        r = await http.post(f"/v1/review-items/{ids[1]}:reject", json={"reason": ""})
        assert r.status_code == 400 and "reason" in r.json()["error"]
        r = await http.post(f"/v1/review-items/{ids[1]}:reject", json={"reason": "wrong fact"})
        assert r.status_code == 200, r.text
        tomb = r.json()["tombstone"]
        assert r.json()["memory"]["state"] == "REJECTED" and tomb["memory_id"] == ids[1]
        assert (await http.get(f"/memory/{ids[1]}")).status_code == 404
        r = await http.post(f"/v1/review-items/{ids[1]}:approve")
        assert r.status_code == 409  # already decided

        # Same content (any spacing/case) in the same scope is refused, naming the tombstone.
        r = await http.post("/memory", json={"content": "Needs  review 1"})
        assert r.status_code == 409 and tomb["id"] in r.json()["error"] and "wrong fact" in r.json()["error"]
        # Another scope is not blocked.
        r = await http.post("/memory", json={"content": "needs review 1", "scope": "other/scope"})
        assert r.status_code == 201
        listed = (await http.get("/v1/tombstones")).json()["tombstones"]
        assert [t["id"] for t in listed] == [tomb["id"]]
        r = await http.post(f"/v1/tombstones/{tomb['id']}:lift")
        assert r.status_code == 200 and r.json()["tombstone"]["lifted"] is True
        assert (await http.post("/memory", json={"content": "needs review 1"})).status_code == 201

        decided = (await http.get("/v1/review-items", params={"status": "all", "kind": "memory"})).json()["items"]
        assert {i["id"]: i["status"] for i in decided} == {ids[0]: "approved", ids[1]: "rejected", ids[2]: "pending"}
        events = [e["type"] for e in await _history(http, ids[1])]
        assert events[:1] == ["EVENT_TYPE_MEMORY_CREATED"] and "EVENT_TYPE_REVIEW_REJECTED" in events


async def test_key_that_requires_review_lands_writes_as_pending(own_service) -> None:
    from automem.common.keys import KeyStore

    store = KeyStore(own_service.ctx.graph)
    admin, _ = await store.create("admin", ["*"], "default")
    writer, _ = await store.create("writer", ["*"], "default", require_review=True)
    async with own_service.http(authorization=f"Bearer {writer}") as http:
        r = await http.post("/memory", json={"content": "from a reviewed key"})
        assert r.status_code == 201 and r.json()["state"] == "PENDING_REVIEW"
        mid = r.json()["memory_id"]
        r = await http.post(f"/v1/review-items/{mid}:approve")
        assert r.status_code == 403  # a writer cannot approve its own writes
    async with own_service.http(authorization=f"Bearer {admin}") as http:
        r = await http.post(f"/v1/review-items/{mid}:approve")
        assert r.status_code == 200 and r.json()["memory"]["state"] == "ACTIVE"


async def _proposal(service, memory_id: str, target_id: str) -> str:
    item_id = str(uuid.uuid4())
    await service.ctx.graph.query(
        "CREATE (:ReviewItem {id: $id, kind: 'supersede_proposal', memory_id: $m, target_id: $t, "
        "reason: 'contradiction found by enrichment', create_time: $now, status: 'pending', scope: $scope})",
        {"id": item_id, "m": memory_id, "t": target_id, "now": time.time(), "scope": service.scope})
    return item_id


async def test_supersede_proposal_approve_supersedes_atomically_and_reject_just_closes(service) -> None:
    async with service.http() as http:
        old = await _store(http, "The cache TTL is 60 seconds", tags=["cache"])
        new = await _store(http, "The cache TTL is 300 seconds", tags=["cache"])
        other = await _store(http, "The cache lives in Redis", tags=["cache"])
        keep = await _proposal(service, other, new)
        item = await _proposal(service, new, old)
        items = (await http.get("/v1/review-items", params={"kind": "supersede_proposal"})).json()["items"]
        assert [i["id"] for i in items] == [keep, item]
        assert items[1]["target"]["id"] == old and items[1]["memory"]["id"] == new

        r = await http.post(f"/v1/review-items/{keep}:reject", json={"reason": "not a contradiction"})
        assert r.status_code == 200 and r.json()["item"]["status"] == "rejected" and r.json()["tombstone"] is None
        assert (await _node(service, other))["state"] == "ACTIVE" and (await _node(service, new))["state"] == "ACTIVE"

        r = await http.post(f"/v1/review-items/{item}:approve")
        assert r.status_code == 200, r.text
        assert r.json()["superseded"]["state"] == "SUPERSEDED" and r.json()["superseded"]["superseded_by"] == new
        assert sorted(await _edges(service)) == [[old, "INVALIDATED_BY", new]]
        got = (await http.get(f"/memory/{old}")).json()["memory"]
        assert got["current_id"] == new and got["t_invalid"] is not None
        assert {m["id"] for m in await _by_tag(http, "cache")} == {new, other}
        types = [e["type"] for e in await _history(http, old)]
        assert "EVENT_TYPE_MEMORY_SUPERSEDED" in types
        r = await http.post(f"/v1/review-items/{item}:approve")
        assert r.status_code == 409


# --- 5. delete -------------------------------------------------------------------------


async def test_deleted_memory_is_gone_from_every_read(service) -> None:
    async with service.http() as http:
        gone = await _store(http, "Never force-push to main", tags=["critical", "git"], importance=0.9)
        stays = await _store(http, "Rebase feature branches before merging", tags=["critical", "git"])
        await http.post("/associate", json={"memory1_id": stays, "memory2_id": gone, "type": "RELATES_TO"})
        await eventually(lambda: service.ctx.vectors.retrieve([gone]))
        r = await http.delete("/memory/by-tag", params={"tags": "git", "dry_run": "true"})
        assert r.json()["dry_run"] is True and sorted(r.json()["memory_ids"]) == sorted([gone, stays])
        assert r.json()["deleted_count"] == 0 and r.json()["would_delete_count"] == 2
        assert (await _node(service, gone))["state"] == "ACTIVE"

        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        assert (await http.get(f"/memory/{gone}")).status_code == 404
        assert [m["id"] for m in await _by_tag(http, "git")] == [stays]
        assert [m["id"] for m in await _by_tag(http, "git", state_mode="history")] == [stays]
        hits = (await http.get("/recall", params={"query": "force-push main"})).json()["results"]
        assert gone not in [h["id"] for h in hits]
        startup = (await http.get("/startup-recall")).json()
        assert [m["id"] for m in startup["critical_lessons"]] == [stays]
        related = (await http.get(f"/memories/{stays}/related")).json()["related_memories"]
        assert related == []
        assert (await http.get(f"/memories/{gone}/related")).status_code == 404
        await eventually(lambda: _gone(service, gone))
        # History is kept; purge (admin) removes the node and the history's content
        # (automem/ingest/purge.py): only the content-free purge notice stays.
        assert (await _node(service, gone))["state"] == "DELETED"
        types = [e["type"] for e in await _history(http, gone)]
        assert types[0] == "EVENT_TYPE_MEMORY_CREATED" and types[-1] == "EVENT_TYPE_MEMORY_DELETED"
        assert (await http.delete(f"/memory/{gone}", params={"purge": "true"})).status_code == 200
        assert await _node(service, gone) is None
        history = await _history(http, gone)
        assert [e["type"] for e in history] == ["EVENT_TYPE_MEMORY_PURGED"] and "before" not in history[0]


async def test_a_history_read_by_id_shows_a_deleted_or_rejected_memory_with_its_state_until_a_purge(
        service) -> None:
    """``GET /memory/{id}?state_mode=history`` answered a REJECTED memory but 404 for a
    DELETED one, whose content a delete keeps for audit until a purge and whose versions
    ``?version=N`` reads. A history read by id now returns both with their state (not
    current, no access recorded) over REST and gRPC GetMemory; a default read stays 404,
    listings withhold them in both modes, and after a purge every read is 404."""
    import grpc

    from automem.v1 import memory_pb2, recall_service_pb2

    history = recall_service_pb2.ReadOptions(state_mode=recall_service_pb2.STATE_MODE_HISTORY)
    async with service.http() as http:
        gone = await _store(http, "The deploy key lives in the team vault", tags=["hist-read"])
        rejected = await _store(http, "The deploy key lives on a sticky note", tags=["hist-read"],
                                require_review=True)
        assert (await http.post(f"/v1/review-items/{rejected}:reject", json={"reason": "no"})).status_code == 200
        before = (await http.get(f"/memory/{gone}")).json()["memory"]
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        for mid, state, content in ((gone, "DELETED", "team vault"), (rejected, "REJECTED", "sticky note")):
            assert (await http.get(f"/memory/{mid}")).status_code == 404, mid
            r = await http.get(f"/memory/{mid}", params={"state_mode": "history"})
            assert r.status_code == 200, (state, r.text)
            got = r.json()["memory"]
            assert got["id"] == mid and got["state"] == state and content in got["content"], got
            assert got["is_current"] is False, got
        assert _last_accessed(await http.get(f"/memory/{gone}", params={"state_mode": "history"})) == \
            before["last_accessed"]
        r = await http.get(f"/memory/{gone}", params={"version": 1})
        assert r.status_code == 200 and "team vault" in r.json()["memory"]["content"], r.text
        assert await _by_tag(http, "hist-read", state_mode="history") == []
        async with service.client() as client:
            for mid, state in ((gone, memory_pb2.MEMORY_STATE_DELETED), (rejected, memory_pb2.MEMORY_STATE_REJECTED)):
                got = await client.recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=mid, read=history))
                assert got.memory.id == mid and got.memory.state == state and not got.is_current, mid
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await client.recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=mid))
                assert caught.value.code() == grpc.StatusCode.NOT_FOUND, mid
            assert (await http.delete(f"/memory/{gone}", params={"purge": "true"})).status_code == 200
            assert (await http.get(f"/memory/{gone}", params={"state_mode": "history"})).status_code == 404
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await client.recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=gone, read=history))
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def _last_accessed(response) -> str | None:
    assert response.status_code == 200, response.text
    return response.json()["memory"]["last_accessed"]


async def _gone(service, mid: str) -> bool:
    return await service.ctx.vectors.retrieve([mid]) == []


# --- 6. audit log ----------------------------------------------------------------------


async def test_history_lists_every_mutation_in_order_with_actor_and_before_after(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "Use ruff for linting", tags=["lint"])
        other = await _store(http, "Use black for formatting", tags=["lint"])
        await http.patch(f"/memory/{mid}", json={"importance": 0.9})
        await http.post("/associate", json={"memory1_id": mid, "memory2_id": other, "type": "RELATES_TO"})
        r = await http.post(f"/v1/memories/{mid}:supersede", json={"content": "Use ruff for linting and formatting"})
        new = r.json()["memory_id"]

        async def enriched():
            events = await _history(http, mid)
            return events if "EVENT_TYPE_MEMORY_ENRICHED" in [e["type"] for e in events] else None

        events = await eventually(enriched)
        types = [e["type"] for e in events if e["type"] != "EVENT_TYPE_MEMORY_ENRICHED"]
        assert types == ["EVENT_TYPE_MEMORY_CREATED", "EVENT_TYPE_MEMORY_UPDATED", "EVENT_TYPE_RELATION_CREATED",
                         "EVENT_TYPE_MEMORY_SUPERSEDED"]
        # RFC 3339 times: compare as times (a whole second is written without a fraction, "…09Z",
        # which sorts after "…09.054Z" as a string)
        times = [datetime.fromisoformat(e["event_time"]) for e in events]
        assert times == sorted(times)
        assert all(e["actor"] for e in events)
        update = events[[e["type"] for e in events].index("EVENT_TYPE_MEMORY_UPDATED")]
        assert update["before"]["importance"] == 0.5 and update["after"]["importance"] == 0.9
        sup = next(e for e in events if e["type"] == "EVENT_TYPE_MEMORY_SUPERSEDED")
        assert sup["before"]["state"] == "MEMORY_STATE_ACTIVE" and sup["after"]["superseded_by"] == new
        enriched_events = [e for e in events if e["type"] == "EVENT_TYPE_MEMORY_ENRICHED"]
        assert enriched_events[0]["actor"] == "system:enrich"
        # DONE, or PAYLOAD_PENDING when the enrichment ran after the PATCH and the supersede
        # (a busy machine: the vectors are current, the payload is rewritten after it, without
        # an event of its own); either way the memory ends embedded.
        assert enriched_events[0]["after"]["embedding_status"] in ("EMBEDDING_STATUS_DONE",
                                                                   "EMBEDDING_STATUS_PAYLOAD_PENDING")

        async def embedded() -> bool:
            got = (await http.get(f"/memory/{mid}", params={"state_mode": "history"})).json()["memory"]
            return got["embedding_status"] == "done"

        await eventually(embedded)
        # The consumer ignores its own MEMORY_ENRICHED events: one per embedding, no loop.
        await eventually(lambda: _queue_empty(service))
        counts = [e["type"] for e in await _history(http, mid)].count("EVENT_TYPE_MEMORY_ENRICHED")
        assert counts == 1
    async with service.http() as http:
        assert (await http.get("/v1/memories/nope/history")).status_code == 404


async def _queue_empty(service) -> bool:
    return await service.ctx.enrich_consumer.queue_depth() == 0


async def test_grpc_list_memory_events_pages_in_order(service) -> None:
    async with service.client() as client:
        memory = await client.create_memory("paged history")
        for i in range(3):
            await client.update_memory(memory.id, importance=0.1 * (i + 1))
        first = await client.review.ListMemoryEvents(review_service_pb2.ListMemoryEventsRequest(id=memory.id,
                                                                                                page_size=2))
        rest = await client.review.ListMemoryEvents(review_service_pb2.ListMemoryEventsRequest(
            id=memory.id, page_size=100, page_token=first.next_page_token))
        events = [e for e in [*first.events, *rest.events] if e.type != events_pb2.EVENT_TYPE_MEMORY_ENRICHED]
        assert [e.type for e in events] == [events_pb2.EVENT_TYPE_MEMORY_CREATED] + [
            events_pb2.EVENT_TYPE_MEMORY_UPDATED] * 3
        assert [e.version for e in events] == [1, 2, 3, 4]


async def test_event_published_while_nats_is_down_reaches_the_stream_once_it_is_back(own_nats) -> None:
    running = own_nats.service
    async with running.http() as http:
        await own_nats.stop()  # the graph write succeeds, the publish fails
        r = await http.post("/memory", json={"content": "stored while NATS was down"})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]
        publisher = running.ctx.publisher
        assert await publisher.backlog() == 1
        assert (await http.get(f"/memory/{mid}")).status_code == 200
        await own_nats.start()

        async def on_stream():
            if await publisher.backlog():
                return None
            return [e for e in await running.ctx.bus.events_for(mid)
                    if e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED]

        created = await eventually(on_stream, timeout=30)
        assert len(created) == 1 and created[0].after.content == "stored while NATS was down"



async def test_a_write_while_nats_is_stopped_goes_to_the_outbox_without_trying_the_bus(own_nats, caplog) -> None:
    """With nats-server stopped the client reconnects (not connected), yet the first write of
    the outage still published and waited the store bound (5 s) for an acknowledgement that
    could not come, and logged "event publish failed". The event goes to the outbox at once
    now; the drain tries nothing until the bus is back, then publishes it."""
    running = own_nats.service
    bus, publisher = running.ctx.bus, running.ctx.publisher
    async with running.http() as http:
        await own_nats.stop()
        async def reconnecting() -> bool:
            return not bus.connected
        await eventually(reconnecting, timeout=30)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="automem.common.outbox"):
            r = await http.post("/memory", json={"content": "stored while the bus reconnects"})
            assert r.status_code == 201, r.text
            r = await http.post("/memory/batch", json={"memories": [{"content": "batch while the bus reconnects"}]})
            assert r.status_code in (200, 201), r.text
        assert await publisher.backlog() == 2
        assert await publisher.drain_once() == 0 and await publisher.backlog() == 2
        assert not [rec for rec in caplog.records if "publish failed" in rec.getMessage()], caplog.records
        await own_nats.start()

        async def outbox_empty() -> bool:
            return await publisher.backlog() == 0
        await eventually(outbox_empty, timeout=30)

# --- 7. recovery -----------------------------------------------------------------------


async def _build_history(http, service) -> dict[str, str]:
    a = await _store(http, "Postgres is the primary store", tags=["db"], t_valid="2024-01-01T00:00:00Z",
                     t_invalid="2030-01-01T00:00:00Z", metadata={"k": [1, "x"]})
    b = await _store(http, "Redis caches sessions", tags=["db", "cache"])
    await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO", "strength": 0.7})
    r = await http.post(f"/v1/memories/{a}:supersede", json={"content": "CockroachDB is the primary store",
                                                              "tags": ["db"], "t_valid": "2025-01-01T00:00:00Z"})
    c = r.json()["memory_id"]
    rejected = await _store(http, "The moon is cheese", require_review=True)
    await http.post(f"/v1/review-items/{rejected}:reject", json={"reason": "false"})
    gone = await _store(http, "temporary note")
    await http.delete(f"/memory/{gone}")
    await eventually(lambda: service.ctx.vectors.retrieve([c]))
    return {"a": a, "b": b, "c": c, "rejected": rejected, "gone": gone}


async def _snapshot(graph: GraphStore) -> tuple[list, list]:
    """Every node (labels, properties) and edge (ends, type, properties), as sorted JSON."""
    nodes = await graph.ro_query("MATCH (n) RETURN labels(n), properties(n)")
    edges = await graph.ro_query("MATCH (a)-[r]->(b) RETURN properties(a), type(r), properties(b), properties(r)")
    return (sorted(json.dumps([list(lb), dict(p)], sort_keys=True) for lb, p in nodes),
            sorted(json.dumps([dict(a), t, dict(b), dict(p)], sort_keys=True) for a, t, b, p in edges))


async def test_backup_then_restore_into_an_empty_store_reproduces_everything(own_service, settings, tmp_path) -> None:
    async with own_service.http() as http:
        ids = await _build_history(http, own_service)
        await eventually(lambda: _queue_empty(own_service))  # enrichment done: the graph holds still
        r = await http.get("/backup")
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        lines = json_lines(r.text)
    records = backup.read_lines(lines)
    kinds = {r["kind"] for r in records}
    assert {"header", "memory", "edge", "tombstone", "review_item", "event"} <= kinds
    graph = own_service.ctx.graph
    before = await _snapshot(graph)
    events_before = [e.SerializeToString() for e in await own_service.ctx.bus.events_for(None)]

    suffix = uuid.uuid4().hex[:10]
    fresh = settings.model_copy(update={"graph_name": f"restored_{suffix}", "stream_name": f"RESTORED_{suffix.upper()}",
                                        "subject_prefix": f"restored.{suffix}", "data_dir": tmp_path / "restored"})
    new_graph, new_bus = GraphStore(fresh), Bus(fresh)
    await new_bus.connect()
    try:
        counts = await backup.restore_records(new_graph, records, new_bus)
        assert counts["events"] == len(events_before)
        assert await _snapshot(new_graph) == before  # every node, property, edge and edge property
        assert [e.SerializeToString() for e in await new_bus.events_for(None)] == events_before
        with pytest.raises(RuntimeError, match="not empty"):
            await backup.restore_records(new_graph, records, new_bus)
    finally:
        await new_bus.close()
        await new_graph.close()

    restored = await start_service(fresh)
    try:
        async with restored.http() as http:
            got = (await http.get(f"/memory/{ids['a']}")).json()["memory"]
            assert got["state"] == "SUPERSEDED" and got["current_id"] == ids["c"]
            assert got["t_valid"].startswith("2024-01-01") and got["t_invalid"].startswith("2025-01-01")
            assert got["prior_t_invalid"].startswith("2030-01-01")
            assert {m["id"] for m in await _by_tag(http, "db")} == {ids["b"], ids["c"]}
            related = (await http.get(f"/memories/{ids['b']}/related")).json()["related_memories"]
            assert {x["id"] for x in related} == {ids["c"]}  # enrichment links c to b too (PRECEDED_BY)
            related = (await http.get(f"/memories/{ids['b']}/related",
                                      params={"relationship_types": "RELATES_TO"})).json()["related_memories"]
            # a's edge, its end shown as the head of its chain, which says whom it replaces.
            assert [(x["id"], x["relation_type"], x["strength"], x.get("replaces_id")) for x in related] == [
                (ids["c"], "RELATES_TO", 0.7, ids["a"])], related
            assert (await http.post("/memory", json={"content": "The moon is cheese"})).status_code == 409
            original = [e["event_id"] for e in await _history_of(own_service, ids["a"])]
            assert [e["event_id"] for e in await _history(http, ids["a"])][:len(original)] == original
    finally:
        await restored.runner.stop()


async def _history_of(service, mid: str) -> list[dict]:
    async with service.http() as http:
        return await _history(http, mid)


async def test_reindex_rebuilds_every_vector_point_from_the_graph(own_service) -> None:
    async with own_service.http() as http:
        ids = await _build_history(http, own_service)
    vectors, graph = own_service.ctx.vectors, own_service.ctx.graph
    await eventually(lambda: _queue_empty(own_service))
    own_service.ctx.enrich_consumer.stop()  # no concurrent writer while we wreck the store
    live = [ids["a"], ids["b"], ids["c"]]
    await vectors.delete(live[:2])
    await vectors.set_payload(ids["c"], {"memory_id": ids["c"], "scope": "default"})  # a payload missing windows
    orphan = str(uuid.uuid4())
    await vectors.upsert(orphan, [0.1] * own_service.ctx.embedder.dimension, {"memory_id": orphan})
    counts = await backup.reindex(graph, vectors, own_service.ctx.embedder)
    assert counts == {"reindexed": 3, "removed": 1}
    points = {p.id: p for p in await vectors.retrieve(live + [ids["rejected"], ids["gone"], orphan])}
    assert sorted(points) == sorted(live)
    for mid in live:
        memory = await graph.memories.get(mid, "default")
        assert points[mid].payload == build_payload(memory)
        assert memory_to_node(memory)["embedding_status"] == "EMBEDDING_STATUS_DONE"
    assert points[ids["a"]].payload["valid_to"] == epoch(await graph.memories.get(ids["a"], "default"), "valid_to")


async def test_cli_backup_and_restore_round_trip(service, tmp_path, monkeypatch) -> None:
    from automem import cli

    settings = service.settings
    async with service.http() as http:
        a = await _store(http, "cli backup memory", tags=["cli"])
    out = tmp_path / "backup.jsonl"
    env = {"AUTOMEM_DATA_DIR": str(tmp_path / "cli"), "AUTOMEM_NATS_URL": settings.nats_url,
           "FALKORDB_HOST": settings.falkordb_host, "FALKORDB_PORT": str(settings.falkordb_port),
           "FALKORDB_GRAPH": settings.graph_name, "AUTOMEM_GRAPH_NAME": settings.graph_name,
           "AUTOMEM_STREAM_NAME": settings.stream_name, "AUTOMEM_SUBJECT_PREFIX": settings.subject_prefix}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    from automem.common import settings as settings_module

    settings_module.get_settings.cache_clear()
    try:
        code = await asyncio.to_thread(cli.main, ["backup", "--out", str(out)])
    finally:
        settings_module.get_settings.cache_clear()
    assert code == 0
    lines = json_lines(out.read_text())  # another test's content may hold U+2028 (one line)
    assert any(f'"id": "{a}"' in line for line in lines)
    restored = [r for r in backup.read_lines(lines) if r["kind"] == "event"]
    assert base64.b64decode(restored[0]["data"])


async def test_a_supersede_waiting_for_review_leaves_the_old_fact_current_until_approved(own_service) -> None:
    """A replacement that waits for review (the caller's key requires review, or it asks
    for review) superseded the old memory at once: recall lost the fact while the
    replacement was pending, and rejecting the replacement left the old memory SUPERSEDED
    by a REJECTED one, current nowhere and beyond repair. A key that requires review also
    superseded, edited and deleted reviewed memories directly. Now the old memory stays the
    current fact until a reviewer approves; approving supersedes it, rejecting leaves it."""
    from automem.common.keys import KeyStore

    keys = KeyStore(own_service.ctx.graph)
    admin, _ = await keys.create("admin", ["*"], "default")
    untrusted, _ = await keys.create("writer", ["*"], "default", require_review=True)

    async def current(http, query: str) -> list[str]:
        r = await http.get("/recall", params={"query": query, "limit": 5})
        assert r.status_code == 200, r.text
        return [hit["memory"]["content"] for hit in r.json()["results"]]

    async with own_service.http(authorization=f"Bearer {admin}") as trusted, \
            own_service.http(authorization=f"Bearer {untrusted}") as other:
        fact = await _store(trusted, "Backups are kept for 30 days", tags=["backups"])
        # 1. The untrusted key's supersede waits for review; the fact stays current.
        for how in ("memory", "v1"):
            if how == "memory":
                r = await other.post("/memory", json={"content": "Backups are kept for 1 day", "tags": ["backups"],
                                                      "supersedes_memory_id": fact})
            else:
                r = await other.post(f"/v1/memories/{fact}:supersede", json={"content": "Backups are kept for 2 days"})
            assert r.status_code == 201 and r.json()["state"] == "PENDING_REVIEW", r.text
            assert r.json()["superseded"]["state"] == "ACTIVE", r.text
        assert (await _node(own_service, fact))["state"] == "ACTIVE"
        assert (await current(trusted, "how long are backups kept"))[:1] == ["Backups are kept for 30 days"]
        # ... and it may not edit, delete or supersede the reviewed fact by other routes.
        r = await other.patch(f"/memory/{fact}", json={"content": "Backups are kept for 3 days"})
        assert r.status_code == 403 and "review" in r.json()["error"], r.text
        assert (await other.delete(f"/memory/{fact}")).status_code == 403
        assert (await other.request("DELETE", "/memory/by-tag", params={"tags": "backups"})).status_code == 403
        lure = await _store(other, "Backups are kept for 4 days")  # pending: linking it only proposes
        r = await other.post("/associate", json={"memory1_id": fact, "memory2_id": lure, "type": "INVALIDATED_BY"})
        assert r.status_code == 202 and r.json()["pending_review"] is True, r.text
        assert (await _node(own_service, fact))["state"] == "ACTIVE"
        assert (await _node(own_service, fact))["version"] == 1

        # 2. Rejecting every waiting replacement leaves the fact as it was.
        items = (await trusted.get("/v1/review-items")).json()["items"]
        assert {i["kind"] for i in items} == {"memory", "supersede_proposal"}, items
        # Each waiting replacement's own item names the fact approving it would replace.
        for item in items:
            assert item["target_id"] == fact and item["target"]["content"] == "Backups are kept for 30 days", item
        for item in items:
            if item["kind"] == "memory":
                r = await trusted.post(f"/v1/review-items/{item['id']}:reject", json={"reason": "wrong"})
                assert r.status_code == 200, r.text
        assert (await trusted.get("/v1/review-items")).json()["items"] == []
        node = await _node(own_service, fact)
        assert node["state"] == "ACTIVE" and not node.get("superseded_by"), node
        assert (await current(trusted, "how long are backups kept"))[:1] == ["Backups are kept for 30 days"]

        # A waiting replacement its key deletes takes its proposal with it (the queue kept an
        # item nobody could approve).
        r = await other.post(f"/v1/memories/{fact}:supersede", json={"content": "Backups are kept for 5 days"})
        assert (await other.delete(f"/memory/{r.json()['memory_id']}")).status_code == 200
        assert (await trusted.get("/v1/review-items")).json()["items"] == []

        # 3. Approving a waiting replacement supersedes the fact, in either item's name.
        for approve_via in ("memory", "supersede_proposal"):
            r = await other.post(f"/v1/memories/{fact}:supersede", json={"content": f"Backups are kept for 14 days ({approve_via})"})
            assert r.status_code == 201, r.text
            new = r.json()["memory_id"]
            item = next(i for i in (await trusted.get("/v1/review-items")).json()["items"] if i["kind"] == approve_via)
            r = await trusted.post(f"/v1/review-items/{item['id']}:approve")
            assert r.status_code == 200 and r.json()["memory"]["state"] == "ACTIVE", r.text
            assert r.json()["superseded"]["id"] == fact, r.text
            assert (r.json()["item"]["id"], r.json()["item"]["kind"]) == (item["id"], approve_via), r.json()["item"]
            node = await _node(own_service, fact)
            assert node["state"] == "SUPERSEDED" and node["superseded_by"] == new, node
            assert (await trusted.get("/v1/review-items")).json()["items"] == []
            assert (await current(trusted, "how long are backups kept"))[:1] == [f"Backups are kept for 14 days ({approve_via})"]
            fact = new

        # 4. A pending memory cannot be named superseded (approving it made it current and
        # superseded at once); its approval is refused while the memory it replaces moved on.
        waiting = await _store(trusted, "The cafeteria serves pizza on Friday", require_review=True)
        later = await _store(trusted, "The cafeteria serves pasta on Friday")
        r = await trusted.post("/associate", json={"memory1_id": waiting, "memory2_id": later, "type": "INVALIDATED_BY"})
        assert r.status_code == 409 and r.json()["error"].startswith("memory1_id: "), r.text
        r = await other.post(f"/v1/memories/{later}:supersede", json={"content": "The cafeteria serves soup on Friday"})
        proposed = r.json()["memory_id"]
        await _store(trusted, "The cafeteria serves salad on Friday", supersedes_memory_id=later)
        r = await trusted.post(f"/v1/review-items/{proposed}:approve")
        assert r.status_code == 409 and "reject it" in r.json()["error"], r.text
        assert (await _node(own_service, proposed))["state"] == "PENDING_REVIEW"


async def test_approving_a_replacement_whose_supersede_was_rejected_names_the_fact_left_current(own_service) -> None:
    """Break-it review: a reviewer rejected a waiting replacement's supersede proposal, then
    approved the replacement's own item: two contradictory facts were current and the
    approval said nothing. The approval still makes the replacement current (the reviewer
    kept the old fact on purpose), but its answer names the fact left current and the
    rejected proposal (``conflicts``, ``warning``), the decided item records it
    (``conflicts_with``) and the REVIEW_APPROVED event's reason carries the warning."""
    from automem.common.keys import KeyStore

    keys = KeyStore(own_service.ctx.graph)
    admin, _ = await keys.create("admin", ["*"], "default")
    untrusted, _ = await keys.create("writer", ["*"], "default", require_review=True)
    async with own_service.http(authorization=f"Bearer {admin}") as trusted, \
            own_service.http(authorization=f"Bearer {untrusted}") as other:
        async def rejected_replacement(old: str, content: str, reason: str) -> tuple[str, str]:
            """(the pending replacement, its supersede proposal, rejected) of ``old``."""
            r = await other.post(f"/v1/memories/{old}:supersede", json={"content": content})
            assert r.status_code == 201 and r.json()["state"] == "PENDING_REVIEW", r.text
            new = r.json()["memory_id"]
            items = (await trusted.get("/v1/review-items")).json()["items"]
            proposal = next(i["id"] for i in items if i["kind"] == "supersede_proposal" and i["memory_id"] == new)
            r = await trusted.post(f"/v1/review-items/{proposal}:reject", json={"reason": reason})
            assert r.status_code == 200, r.text
            return new, proposal

        fact = await _store(trusted, "The on-call rotation changes every Monday")
        new, proposal = await rejected_replacement(fact, "The on-call rotation changes every Friday",
                                                   "Monday is still right")
        r = await trusted.post(f"/v1/review-items/{new}:approve", json={"reason": "the Friday fact is true too"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["memory"]["state"] == "ACTIVE" and body["superseded"] is None, body
        assert [(c["memory_id"], c["proposal_id"], c["rejection_reason"], c["memory"]["id"], c["memory"]["state"])
                for c in body["conflicts"]] == [(fact, proposal, "Monday is still right", fact, "ACTIVE")], body
        assert fact in body["warning"] and proposal in body["warning"] and new in body["warning"], body
        assert body["item"]["conflicts_with"] == [fact], body["item"]
        assert (await _node(own_service, fact))["state"] == "ACTIVE"
        # audited: the decided item and the approval event say it too
        decided = (await trusted.get("/v1/review-items", params={"status": "approved", "kind": "memory"})).json()
        assert [i["conflicts_with"] for i in decided["items"] if i["memory_id"] == new] == [[fact]], decided
        events = (await trusted.get(f"/v1/memories/{new}/history")).json()["events"]
        approved = [e for e in events if e["type"] == "EVENT_TYPE_REVIEW_APPROVED"]
        assert len(approved) == 1 and fact in approved[0]["reason"], events
        assert approved[0]["reason"].startswith("the Friday fact is true too; "), approved[0]

        # an approval that leaves nothing conflicting says nothing
        r = await other.post(f"/v1/memories/{fact}:supersede", json={"content": "The on-call rotation changes every Sunday"})
        r = await trusted.post(f"/v1/review-items/{r.json()['memory_id']}:approve")
        assert r.status_code == 200 and r.json()["superseded"]["id"] == fact, r.text
        assert (r.json()["conflicts"], r.json()["warning"], r.json()["item"]["conflicts_with"]) == ([], None, []), r.text

        # the old fact replaced since the rejection: the conflict is the fact in force now,
        # the head of its chain (re-check round G: vpn2 and vpn3 both current, nothing said)
        vpn1 = await _store(trusted, "The VPN gateway is vpn1")
        vpn2, proposal = await rejected_replacement(vpn1, "The VPN gateway is vpn2", "vpn1 stays")
        r = await trusted.post(f"/v1/memories/{vpn1}:supersede", json={"content": "The VPN gateway is vpn3"})
        assert r.status_code == 201, r.text
        vpn3 = r.json()["memory_id"]
        r = await trusted.post(f"/v1/review-items/{vpn2}:approve")
        assert r.status_code == 200, r.text
        assert [(c["memory_id"], c["proposal_id"]) for c in r.json()["conflicts"]] == [(vpn3, proposal)], r.text
        assert vpn3 in r.json()["warning"] and r.json()["item"]["conflicts_with"] == [vpn3], r.text


async def test_the_automem_client_supersede_by_a_reviewed_key_waits_and_approval_checks_the_version(own_service) -> None:
    """AutoMem's clients supersede in steps: store the new memory, then link old -> new with
    INVALIDATED_BY. From a key that requires review the new memory is pending and the link
    was refused (409): a pending memory with nothing tying it to the fact it replaces, and two
    current facts once approved. The link now becomes the pending memory's supersede proposal.
    A proposal approved after the old memory changed superseded a version its proposer never
    saw; it is refused now. A proposal's strength 0 came back 0.9."""
    from automem.common.keys import KeyStore
    from automem.v1 import memory_pb2

    keys = KeyStore(own_service.ctx.graph)
    admin, _ = await keys.create("admin", ["*"], "default")
    untrusted, _ = await keys.create("writer", ["*"], "default", require_review=True)
    async with own_service.http(authorization=f"Bearer {admin}") as trusted, \
            own_service.http(authorization=f"Bearer {untrusted}") as other:
        fact = await _store(trusted, "The release train leaves every second Tuesday")
        new = await _store(other, "The release train leaves every Tuesday")
        r = await other.post("/associate", json={"memory1_id": fact, "memory2_id": new, "type": "INVALIDATED_BY",
                                                 "strength": 0.0, "reason": "weekly now"})
        assert r.status_code == 202 and r.json()["pending_review"] is True, r.text
        assert (await _node(own_service, fact))["state"] == "ACTIVE"
        kinds = sorted(i["kind"] for i in (await trusted.get("/v1/review-items")).json()["items"])
        assert kinds == ["memory", "supersede_proposal"]
        r = await trusted.post(f"/v1/review-items/{new}:approve")
        assert r.status_code == 200 and r.json()["superseded"]["id"] == fact, r.text
        assert (await _node(own_service, fact))["superseded_by"] == new
        edges = await own_service.ctx.graph.ro_query(
            "MATCH (a:Memory {id: $a})-[r:INVALIDATED_BY]->(b:Memory {id: $b}) RETURN r.strength, r.reason",
            {"a": fact, "b": new})
        assert edges == [[0.0, "weekly now"]], edges

        # Approval after the old memory changed is refused; the fact is left as edited.
        fact = await _store(trusted, "Standups start at 09:30")
        r = await other.post(f"/v1/memories/{fact}:supersede", json={"content": "Standups start at 10:00"},
                             headers={"If-Match": '"1"'})
        assert r.status_code == 201, r.text
        waiting = r.json()["memory_id"]
        r = await trusted.patch(f"/memory/{fact}", json={"content": "Standups start at 09:15 (team vote)"})
        assert r.status_code == 200 and r.json()["memory"]["version"] == 2, r.text
        r = await trusted.post(f"/v1/review-items/{waiting}:approve")
        assert r.status_code == 409 and "changed since the supersede was proposed" in r.json()["error"], r.text
        node = await _node(own_service, fact)
        assert node["state"] == "ACTIVE" and node["content"] == "Standups start at 09:15 (team vote)"

    # gRPC: a pending supersede's strength 0 is kept through approval.
    async with own_service.client(api_key=admin) as client:
        md = client.metadata()
        fact = (await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
            memory=ingest_service_pb2.MemoryInput(content="Lunch is at noon")), metadata=md)).memory
        pending = (await client.ingest.SupersedeMemory(ingest_service_pb2.SupersedeMemoryRequest(
            id=fact.id, replacement=ingest_service_pb2.MemoryInput(content="Lunch is at one", require_review=True),
            relation_type=memory_pb2.RELATION_TYPE_EVOLVED_INTO, strength=0.0), metadata=md)).replacement
        approved = await client.review.ApproveReviewItem(review_service_pb2.ApproveReviewItemRequest(id=pending.id),
                                                         metadata=md)
        assert approved.superseded.id == fact.id
    edges = await own_service.ctx.graph.ro_query(
        "MATCH (:Memory {id: $a})-[r:EVOLVED_INTO]->(:Memory {id: $b}) RETURN r.strength", {"a": fact.id, "b": pending.id})
    assert edges == [[0.0]], edges


async def test_the_first_instant_of_1970_is_a_time_like_any_other(service) -> None:
    """Times were read ``epoch(a) or epoch(b)``, so 1970-01-01T00:00:00Z (epoch 0) counted as
    unset: a window ending then stayed open (an expired fact read as current), one starting
    then started at its store time (a fact true in 1985 never read as true), a supersede
    from then closed the old window at the store time, and an event then fell out of time
    windows. A common default date of old records."""
    epoch0 = "1970-01-01T00:00:00Z"
    async with service.http() as http:
        ended = await _store(http, "Epoch probe: the office was in Building 7", tags=["epoch0a"],
                             t_valid="1960-01-01T00:00:00Z", t_invalid=epoch0)
        got = (await http.get(f"/memory/{ended}")).json()["memory"]
        assert got["is_current"] is False and got["t_invalid"].startswith("1970-01-01T00:00:00"), got
        assert await _by_tag(http, "epoch0a") == []
        assert (await http.get("/recall", params={"tags": "epoch0a"})).json()["results"] == []
        assert [m["id"] for m in await _by_tag(http, "epoch0a", as_of="1965-01-01T00:00:00Z")] == [ended]

        began = await _store(http, "Epoch probe: the office was in Building 9", tags=["epoch0b"],
                             t_valid=epoch0, t_invalid="2000-01-01T00:00:00Z")
        got = (await http.get(f"/memory/{began}", params={"as_of": "1985-01-01T00:00:00Z"})).json()["memory"]
        assert got["is_current"] is True and got["t_valid"].startswith("1970-01-01T00:00:00"), got
        hits = (await http.get("/recall", params={"tags": "epoch0b", "as_of": "1985-01-01T00:00:00Z"})).json()
        assert [h["id"] for h in hits["results"]] == [began], hits

        old = await _store(http, "Epoch probe: the founder is Ada", tags=["epoch0c"], t_valid="1960-01-01T00:00:00Z")
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "Epoch probe: the founder is Grace",
                                                                   "tags": ["epoch0c"], "t_valid": epoch0})
        assert r.status_code == 201, r.text
        new = r.json()["memory_id"]
        got = (await http.get(f"/memory/{old}", params={"state_mode": "history"})).json()["memory"]
        assert got["t_invalid"].startswith("1970-01-01T00:00:00"), got
        assert [m["id"] for m in await _by_tag(http, "epoch0c", as_of="1980-01-01T00:00:00Z")] == [new]
        assert [m["id"] for m in await _by_tag(http, "epoch0c", as_of="1965-01-01T00:00:00Z")] == [old]

        event = await _store(http, "Epoch probe: the clock started", tags=["epoch0d"], timestamp=epoch0)
        for params in ({"start": "1969-12-31", "end": "1970-01-02"}, {"start": epoch0, "end": epoch0}):
            hits = (await http.get("/recall", params={"tags": "epoch0d", **params})).json()
            assert [h["id"] for h in hits["results"]] == [event], (params, hits)


async def test_moving_a_replacements_t_valid_moves_the_end_of_the_fact_it_replaced(service) -> None:
    """Superseded from 2025, then the replacement's t_valid moved to 2030: the replaced fact
    stayed closed at 2025 and nothing was current until 2030 (its window cannot be edited,
    being history). Its window now follows, as a supersede from 2030 would have closed it,
    and back again when the start moves earlier."""
    async with service.http() as http:
        old = await _store(http, "Window probe: the rate limit is 100 rps", tags=["movedstart"],
                           t_valid="2020-01-01T00:00:00Z")
        r = await http.post(f"/v1/memories/{old}:supersede", json={
            "content": "Window probe: the rate limit is 200 rps", "tags": ["movedstart"],
            "t_valid": "2025-01-01T00:00:00Z"})
        assert r.status_code == 201, r.text
        new = r.json()["memory_id"]

        async def current_at(day: str) -> list[str]:
            return [m["id"] for m in await _by_tag(http, "movedstart", as_of=day)]

        for start, expect in (("2030-01-01T00:00:00Z", {"2027-06-01": old, "2031-01-01": new}),
                              ("2023-01-01T00:00:00Z", {"2022-06-01": old, "2024-01-01": new, "2027-06-01": new})):
            r = await http.patch(f"/memory/{new}", json={"t_valid": start})
            assert r.status_code == 200, r.text
            got = (await http.get(f"/memory/{old}", params={"state_mode": "history"})).json()["memory"]
            assert got["t_invalid"].startswith(start[:10]) and got["state"] == "SUPERSEDED", got
            for day, mid in expect.items():
                assert await current_at(f"{day}T00:00:00Z") == [mid], (start, day)
        assert await current_at("2019-06-01T00:00:00Z") == []
        actions = [e.get("event_type") or e.get("action") for e in await _history(http, old)]
        assert len(actions) >= 4, actions  # created, superseded, and one window change per move


@pytest.mark.parametrize("removal", ["delete", "by-tag", "purge"])
async def test_removing_a_replacement_before_its_window_begins_cancels_the_supersede(service, removal) -> None:
    """A replacement valid from a date to come, deleted (or purged) before that date, left
    the old fact SUPERSEDED by a deleted memory: once the date passed nothing was current,
    and the fact could be neither edited nor superseded again. The supersede never took
    effect, so the fact gets its state and window back."""
    tag = f"sched-{removal}-{uuid.uuid4().hex[:6]}"
    async with service.http() as http:
        old = await _store(http, f"Schedule probe: parking is on level two ({tag})", tags=[tag],
                           t_invalid="2090-01-01T00:00:00Z")
        start = f"{datetime.now(UTC).year + 1}-03-01T00:00:00Z"
        r = await http.post(f"/v1/memories/{old}:supersede", json={
            "content": f"Schedule probe: parking is on level five ({tag})", "tags": [f"{tag}-new"], "t_valid": start})
        assert r.status_code == 201, r.text
        new = r.json()["memory_id"]
        if removal == "delete":
            r = await http.delete(f"/memory/{new}")
        elif removal == "by-tag":
            r = await http.delete("/memory/by-tag", params={"tags": f"{tag}-new"})
        else:
            r = await http.post(f"/v1/memories/{new}:purge", json={"reason": "test"}, timeout=60)
        assert r.status_code == 200, r.text
        got = (await http.get(f"/memory/{old}", params={"state_mode": "history"})).json()["memory"]
        assert (got["state"], got["superseded_by"], got["t_invalid"][:10]) == ("ACTIVE", None, "2090-01-01"), got
        later = f"{datetime.now(UTC).year + 2}-01-01T00:00:00Z"
        assert [m["id"] for m in await _by_tag(http, tag, as_of=later)] == [old]
        r = await http.patch(f"/memory/{old}", json={"content": f"Schedule probe: parking is on level three ({tag})"})
        assert r.status_code == 200, r.text
        # A replacement already in force, removed, still leaves nothing current (no stale fact).
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": f"Schedule probe: level four ({tag})"})
        gone = r.json()["memory_id"]
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        assert await _by_tag(http, tag) == []


async def test_the_automem_client_supersede_follows_a_replacement_moved_later(service) -> None:
    """AutoMem's client supersedes in four calls (store the new fact, PATCH the old one's
    t_invalid to meet it, link INVALIDATED_BY): moving the new fact's t_valid later left the
    old one ending at the first date, nothing current in between."""
    async with service.http() as http:
        old = await _store(http, "Four-call probe: the build tool is make", tags=["fourcall"],
                           t_valid="2020-01-01T00:00:00Z")
        new = await _store(http, "Four-call probe: the build tool is bazel", tags=["fourcall"],
                           t_valid="2021-01-01T00:00:00Z")
        r = await http.patch(f"/memory/{old}", json={"t_invalid": "2021-01-01T00:00:00Z",
                                                      "metadata": {"superseded_by": new, "deprecated": True}})
        assert r.status_code == 200, r.text
        r = await http.post("/associate", json={"memory1_id": old, "memory2_id": new, "type": "INVALIDATED_BY",
                                                "strength": 0.9})
        assert r.status_code == 201, r.text
        assert (await http.patch(f"/memory/{new}", json={"t_valid": "2022-01-01T00:00:00Z"})).status_code == 200
        for day, mid in (("2020-06-01", old), ("2021-06-01", old), ("2022-06-01", new)):
            assert [m["id"] for m in await _by_tag(http, "fourcall", as_of=f"{day}T00:00:00Z")] == [mid], day


async def test_an_expired_fact_cannot_replace_a_current_one(service) -> None:
    """Break-it review: a memory whose window had ended could supersede a current fact —
    through ``/associate``, a supersede store, or enrichment's proposal approved — and that
    closed the current fact's window: nothing was current, every read withheld both. Each
    write path refuses it now (409 / 400 naming the field, nothing changed), and enrichment
    proposes nothing from an expired memory."""
    day = 86400
    async with service.http() as http:
        current = await _store(http, "Xerus service uses Python 3.13", tags=["xerus"])
        expired = await _store(http, "Xerus service uses Python 2.7", tags=["xerus"],
                               t_valid=_iso(time.time() - 3 * day), t_invalid=_iso(time.time() - 2 * day))
        r = await http.post("/associate", json={"memory1_id": current, "memory2_id": expired,
                                                "type": "INVALIDATED_BY"})
        assert r.status_code == 409 and "memory2_id" in r.text and "before" in r.text, r.text
        r = await http.post("/memory", json={"content": "Xerus service used Python 3.11", "supersedes_memory_id": current,
                                              "t_valid": _iso(time.time() - 3 * day),
                                              "t_invalid": _iso(time.time() - day)})
        assert r.status_code == 400 and "t_invalid" in r.text, r.text
        # As enrichment's contradiction check would propose it.
        item = str(uuid.uuid4())
        await service.ctx.graph.review.propose_supersede(item, expired, current, service.scope,
                                                         "different value: 3.13 -> 2.7", time.time())
        r = await http.post(f"/v1/review-items/{item}:approve", json={"reason": "looks right"})
        assert r.status_code == 409 and "before" in r.text, r.text
        got = (await http.get(f"/memory/{current}")).json()["memory"]
        assert (got["state"], got["t_invalid"], got["is_current"]) == ("ACTIVE", None, True), got
        assert [h["id"] for h in (await http.get("/recall", params={"tags": "xerus"})).json()["results"]] == [current]
        assert await service.ctx.graph.memories.count(service.scope) == 2
        # History as it was stays writable (the re-check found the first rule refused it): a
        # fact replaced by one that ended later — an export's chain, a back-filled one.
        old = await _store(http, "Xerus ran on Python 2.5", t_valid="2010-01-01T00:00:00Z",
                           t_invalid="2015-01-01T00:00:00Z")
        newer = await _store(http, "Xerus ran on Python 2.6", t_valid="2015-01-01T00:00:00Z",
                             t_invalid="2020-01-01T00:00:00Z")
        r = await http.post("/associate", json={"memory1_id": old, "memory2_id": newer, "type": "INVALIDATED_BY"})
        assert r.status_code == 201, r.text
        lead = await _store(http, "The xerus office is in Berlin", t_valid=_iso(time.time() - 10 * day))
        r = await http.post("/memory", json={"content": "The xerus office is in Munich", "supersedes_memory_id": lead,
                                              "t_valid": _iso(time.time() - 5 * day), "t_invalid": _iso(time.time() - day)})
        assert r.status_code == 201, r.text
        got = (await http.get(f"/memory/{lead}")).json()["memory"]
        assert (got["state"], got["is_current"]) == ("SUPERSEDED", False), got
        # Enrichment proposed the expired fact as the current one's replacement; no longer.
        older = await _store(http, "Xerus service uses Python 2.6", tags=["xerus"],
                             t_valid=_iso(time.time() - 5 * day), t_invalid=_iso(time.time() - 4 * day))

        async def enriched() -> bool:
            body = (await http.get(f"/memory/{older}")).json()["memory"]
            return body["enrichment_status"] == "done"
        await eventually(enriched, timeout=60)
        assert await service.ctx.graph.review.pending_proposals_of(older, service.scope) == []


async def test_the_fact_in_force_at_as_of_reads_active_also_as_a_replacement(service) -> None:
    """Break-it review: with a chain v1 -> v2 -> v3 (valid from 10 days ago, 5 days ago, now),
    a recall at ``as_of`` 3 days ago returned v2 — the fact in force then — labelled
    SUPERSEDED when it came as v1's replacement, and ACTIVE when it was a hit itself. It reads
    ACTIVE both ways (automem/common/state.py ``resolve``)."""
    day = 86400
    async with service.http() as http:
        v1 = await _store(http, "The vole api is at version 1", tags=["vole"], t_valid=_iso(time.time() - 10 * day))
        r = await http.post("/memory", json={"content": "The vole api is at version 2", "tags": ["vole"],
                                             "supersedes_memory_id": v1, "t_valid": _iso(time.time() - 5 * day)})
        assert r.status_code == 201, r.text
        v2 = r.json()["memory_id"]
        r = await http.post("/memory", json={"content": "The vole api is at version 3", "tags": ["vole"],
                                             "supersedes_memory_id": v2})
        assert r.status_code == 201, r.text
        then = _iso(time.time() - 3 * day)
        for params in ({"tags": "vole"}, {"tags": "vole", "query": "vole api version"}):
            hits = (await http.get("/recall", params={**params, "as_of": then})).json()["results"]
            assert [(h["id"], h["memory"]["state"]) for h in hits] == [(v2, "ACTIVE")], (params, hits)
        got = (await http.get(f"/memory/{v2}", params={"as_of": then})).json()["memory"]
        assert (got["state"], got["is_current"]) == ("ACTIVE", True), got
