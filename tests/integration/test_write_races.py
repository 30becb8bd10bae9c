"""Writes that change an existing memory, against each other (automem/ingest/servicer.py).

* A superseding edge (INVALIDATED_BY / EVOLVED_INTO) from a memory already SUPERSEDED by
  another is refused as a second supersede is; the same edge as its supersession is a
  no-op MERGE.
* One memory's events are published in version order when a supersede races a delete
  (automem/ingest/memory_locks.py): its history, read from the stream oldest first, lists
  its versions in order.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from automem.v1 import ingest_service_pb2, memory_pb2
from tests.conftest import rest_memory, rest_store

#: Rounds of the supersede/delete race; before the per-memory locks about a third of the
#: rounds in which both landed listed DELETED before SUPERSEDED.
ROUNDS = 40




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
