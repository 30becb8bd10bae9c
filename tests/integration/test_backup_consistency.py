"""A backup taken while writers run (break-it review of backup/restore): the file agrees
with itself and holds each row once.

* A memory node exported at version v had versions v+1… in the file (read in later pages,
  MemoryVersion sorting after Memory), and memories created during the export left their
  versions and events without their node (GET 404, ``?known_at=`` 200): every version and
  event in the file must agree with the memory node the file holds.
* SKIP/LIMIT paging read an edge twice when a write shifted the pages (a restore then
  loaded both): no edge twice.

The writes are interleaved with the export's own reads (a write after each page the export
reads, through the service's REST API, on the real stores), so the race happens every time.
"""

from __future__ import annotations

import base64
import itertools
import json
import uuid
from collections import Counter
from typing import Any

import pytest

from automem.common import backup
from automem.graph import GraphStore
from automem.v1 import events_pb2


async def _store(http, content: str) -> str:
    r = await http.post("/memory", json={"content": content, "tags": ["race"]})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


def _interleave(graph: GraphStore, write: Any) -> None:
    """After each page of nodes or edges ``graph`` reads, await ``write()``: a write lands
    between two pages of the export, as a concurrent writer's would."""
    read = graph.ro_query

    async def ro_query(cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        rows = await read(cypher, params)
        if "properties(n)" in cypher or "properties(r)" in cypher:
            await write()
        return rows

    graph.ro_query = ro_query  # type: ignore[method-assign]


def _records(lines: list[str]) -> list[dict[str, Any]]:
    return backup.read_lines(lines)


def _check_agrees(records: list[dict[str, Any]]) -> None:
    """Every version and memory event of the file belongs to a memory node of the file and
    is not past its version; each memory's newest version is its node's."""
    nodes = {r["properties"]["id"]: r["properties"]["version"] for r in records if r["kind"] == "memory"}
    newest: dict[str, int] = {}
    for r in records:
        if "MemoryVersion" in (r.get("labels") or []):
            mid, version = r["properties"]["memory_id"], r["properties"]["version"]
            assert mid in nodes, f"version {version} of memory {mid}, which the file does not hold"
            assert version <= nodes[mid], f"version {version} of {mid} past its node's {nodes[mid]}"
            newest[mid] = max(newest.get(mid, 0), version)
    assert newest == nodes
    for r in records:
        if r["kind"] != "event":
            continue
        event = events_pb2.MemoryEvent.FromString(base64.b64decode(r["data"]))
        if not event.memory_id or event.type == events_pb2.EVENT_TYPE_MEMORY_PURGED:
            continue
        assert event.memory_id in nodes, f"event {event.type} of memory {event.memory_id} not in the file"
        assert max(event.version, event.after.version) <= nodes[event.memory_id], (
            f"event of {event.memory_id} at version {event.version}, its node at {nodes[event.memory_id]}")


async def test_a_backup_while_writers_patch_and_create_agrees_with_itself(own_service, settings,
                                                                         monkeypatch) -> None:
    monkeypatch.setattr(backup, "PAGE", 5)
    async with own_service.http() as http:
        ids = [await _store(http, f"race memory {i} about the billing service") for i in range(12)]
        turn = itertools.count()

        async def write() -> None:
            i = next(turn)
            mid = ids[i % len(ids)]
            r = await http.patch(f"/memory/{mid}", json={"content": f"race memory edited {i}"})
            assert r.status_code == 200, r.text
            ids.append(await _store(http, f"race memory created during the backup {i}"))

        graph = GraphStore(settings)
        try:
            _interleave(graph, write)
            lines = [line async for line in backup.export_lines(graph, own_service.ctx.bus)]
        finally:
            await graph.close()
    records = _records(lines)
    _check_agrees(records)
    # Restored, the memories read as the file holds them: node version = newest version.
    target = GraphStore(settings.model_copy(update={"graph_name": f"race_{uuid.uuid4().hex[:8]}"}))
    try:
        await backup.restore_records(target, records)
        rows = await target.ro_query("MATCH (m:Memory) OPTIONAL MATCH (v:MemoryVersion {memory_id: m.id}) "
                                     "RETURN m.id, m.version, max(v.version)")
        assert rows and all(version == newest for _, version, newest in rows), rows
        ghosts = await target.ro_query("MATCH (v:MemoryVersion) OPTIONAL MATCH (m:Memory {id: v.memory_id}) "
                                       "WITH v, m WHERE m IS NULL RETURN v.memory_id, v.version")
        assert ghosts == []
    finally:
        await target.dump.drop()
        await target.close()


async def test_a_backup_while_links_are_written_holds_each_edge_once(own_service, settings, monkeypatch) -> None:
    monkeypatch.setattr(backup, "PAGE", 5)
    async with own_service.http() as http:
        ids = [await _store(http, f"linked memory {i}") for i in range(8)]
        pairs = [(a, b) for a in ids for b in ids if a != b]
        r = await http.post("/associate", json={"associations": [
            {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO", "strength": 0.5} for a, b in pairs[:30]]})
        assert r.status_code in (200, 201), r.text
        later = iter(pairs[30:])

        async def write() -> None:
            # A type that sorts before RELATES_TO: every later page of the old paging moved on by one.
            a, b = next(later)
            r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "CONTRADICTS",
                                                    "strength": 0.5})
            assert r.status_code in (200, 201), r.text

        graph = GraphStore(settings)
        try:
            _interleave(graph, write)
            lines = [line async for line in backup.export_lines(graph)]
        finally:
            await graph.close()
    records = _records(lines)
    edges = Counter((r["source"], r["target"], r["type"]) for r in records if r["kind"] == "edge")
    assert [edge for edge, n in edges.items() if n > 1] == []
    relates = sum(n for (_, _, kind), n in edges.items() if kind == "RELATES_TO")
    assert relates == 30  # every edge that existed when the backup began, once
    target = GraphStore(settings.model_copy(update={"graph_name": f"links_{uuid.uuid4().hex[:8]}"}))
    try:
        counts = await backup.restore_records(target, records)
        assert counts["edges"] == sum(edges.values())
    finally:
        await target.dump.drop()
        await target.close()


@pytest.mark.parametrize("edge_type", ["INVALIDATED_BY", "EVOLVED_INTO"])
async def test_restore_refuses_a_superseding_edge_given_twice_naming_it(own_service, edge_type) -> None:
    """Two INVALIDATED_BY (or EVOLVED_INTO) edges between the same memories were restored as
    two, where the service writes one per pair (a memory is superseded by another once):
    refused now, as other edges given twice are, naming the edge and the earlier line."""
    async with own_service.http() as http:
        old = await _store(http, "The on-call rota changes on Mondays.")
        new = await _store(http, "The on-call rota changes on Tuesdays.")
        r = await http.post("/associate", json={"memory1_id": old, "memory2_id": new, "type": edge_type,
                                                "strength": 0.9})
        assert r.status_code in (200, 201), r.text
    records = [json.loads(line) for line in await _backup_records(own_service)]
    first = next(i for i, r in enumerate(records) if r["kind"] == "edge" and r["type"] == edge_type)
    records.insert(first + 1, dict(records[first]))
    records[-1]["edges"] += 1
    text = [json.dumps(r, sort_keys=True) for r in records]
    before = await own_service.ctx.graph.dump.count_nodes()
    with pytest.raises(ValueError) as refused:
        await backup.restore_records(own_service.ctx.graph, backup.read_lines(text), force=True)
    assert f"backup line {first + 2} (edge): {edge_type} from ref" in str(refused.value), refused.value
    assert f"given already (backup line {first + 1})" in str(refused.value), refused.value
    assert await own_service.ctx.graph.dump.count_nodes() == before  # nothing changed


async def _backup_records(own_service) -> list[str]:
    return [line async for line in backup.export_lines(own_service.ctx.graph, own_service.ctx.bus)]


@pytest.mark.parametrize("what", ["memory", "edge"])
async def test_restore_refuses_a_memory_id_or_an_edge_given_twice_naming_the_line(own_service, what) -> None:
    """Two memory records with one id restored as two nodes (one DELETE removed both); two
    edges of one type between the same nodes as two edges (the service keeps one)."""
    async with own_service.http() as http:
        a = await _store(http, "Erin runs the billing database.")
        b = await _store(http, "The billing database is Postgres.")
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO",
                                                "strength": 0.5})
        assert r.status_code in (200, 201), r.text
    lines = await _backup_records(own_service)
    records = [json.loads(line) for line in lines]
    if what == "memory":
        first = next(i for i, r in enumerate(records) if r["kind"] == "memory")
        copy = {**records[first], "ref": max(r.get("ref", -1) for r in records) + 1}
        records.insert(first + 1, copy)
        expected = (f"backup line {first + 2} (memory): properties.id: {copy['properties']['id']!r} was given "
                    f"already (backup line {first + 1})")
    else:
        first = next(i for i, r in enumerate(records) if r["kind"] == "edge" and r["type"] == "RELATES_TO")
        records.insert(first + 1, {**records[first], "properties": {**records[first]["properties"], "strength": 0.9}})
        expected = f"backup line {first + 2} (edge): RELATES_TO from ref"
    end = records[-1]
    end["nodes" if what == "memory" else "edges"] += 1
    text = [json.dumps(r, sort_keys=True) for r in records]
    before = await own_service.ctx.graph.dump.count_nodes()
    with pytest.raises(ValueError) as refused:
        await backup.restore_records(own_service.ctx.graph, backup.read_lines(text), force=True)
    assert expected in str(refused.value)
    if what == "edge":
        assert f"given already (backup line {first + 1})" in str(refused.value)
    assert await own_service.ctx.graph.dump.count_nodes() == before  # nothing changed
