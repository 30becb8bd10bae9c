"""Bitemporal reads for every field and the version history (issue 14 items 1 and 2), on
the real service: one memory edited five times (content, tags, window, importance, state)
and read at each point in system time through REST, gRPC and MCP; the versions listing
(paging), ``GET /memory/{id}?version=N``, the diff, and bad input."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from datetime import UTC, datetime

import grpc
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from automem.common import backup
from automem.common.jsontext import json_lines
from automem.common.model import ts
from automem.v1 import events_pb2, recall_service_pb2
from tests.conftest import eventually


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


async def _mark() -> float:
    """A system time strictly between two writes."""
    await asyncio.sleep(0.02)
    t = time.time()
    await asyncio.sleep(0.02)
    return t


async def _edited(http, tag: str) -> tuple[str, list[float]]:
    """A memory under ``tag`` edited five times; the system times before the first write
    and after each write (six points)."""
    points = [await _mark()]
    r = await http.post("/memory", json={"content": "The deploy runs on Fridays", "tags": [tag],
                                         "importance": 0.3, "t_valid": _iso(time.time() - 2 * 86400)})
    assert r.status_code == 201, r.text
    mid = r.json()["memory_id"]
    points.append(await _mark())
    edits = [{"content": "The deploy runs on Mondays"},
             {"tags": [tag, f"{tag}-later"]},
             {"t_invalid": _iso(time.time() - 86400)},
             {"importance": 0.9}]
    for body in edits:
        r = await http.patch(f"/memory/{mid}", json=body)
        assert r.status_code == 200, r.text
        points.append(await _mark())
    r = await http.delete(f"/memory/{mid}")
    assert r.status_code == 200, r.text
    points.append(await _mark())
    return mid, points


#: What the service believed at each point: (readable by id, content, importance, has the
#: later tag, window closed, listed under the tags at as_of now).
EXPECTED = [
    (False, None, None, False, False, False),                          # before the create
    (True, "The deploy runs on Fridays", 0.3, False, False, True),     # created
    (True, "The deploy runs on Mondays", 0.3, False, False, True),     # content
    (True, "The deploy runs on Mondays", 0.3, True, False, True),      # tags
    (True, "The deploy runs on Mondays", 0.3, True, True, False),      # window closed
    (True, "The deploy runs on Mondays", 0.9, True, True, False),      # importance
    (False, None, None, None, None, False),                            # deleted
]


async def test_known_at_every_field_rest_grpc_mcp(service):
    tag = f"kn-{uuid.uuid4().hex[:8]}"
    later = f"{tag}-later"
    async with service.http() as http:
        mid, points = await _edited(http, tag)
        client = service.client()
        mcp = Client(streamable_http_client(
            service.url + "/mcp/", http_client=create_mcp_http_client(headers={"X-Automem-Scope": service.scope})))
        async with mcp:
            for i, (point, (readable, content, importance, has_later, closed, listed)) in enumerate(
                    zip(points, EXPECTED, strict=True)):
                known = _iso(point)
                # REST, get by id
                r = await http.get(f"/memory/{mid}", params={"known_at": known})
                if not readable:
                    assert r.status_code == 404, (i, r.text)
                else:
                    assert r.status_code == 200, (i, r.text)
                    m = r.json()["memory"]
                    assert (m["content"], m["importance"], later in m["tags"]) == (content, importance, has_later), i
                    assert (m["t_invalid"] is not None) == closed, i
                    assert m["state"] == "ACTIVE", i
                # REST, by tag and recall listing: the tag added later does not match earlier,
                # the window closed later is open earlier
                for want_tag, expect in ((tag, listed), (later, listed and has_later)):
                    r = await http.get("/memory/by-tag", params={"tags": want_tag, "known_at": known})
                    assert r.status_code == 200, r.text
                    assert ([x["id"] for x in r.json()["memories"]] == [mid]) == bool(expect), (i, want_tag)
                    # Prefix matching (recall's default) found nothing at a past known_at.
                    for match in ("exact", "prefix"):
                        r = await http.get("/recall", params={"tags": want_tag, "tag_match": match, "known_at": known})
                        assert r.status_code == 200, r.text
                        ids = [x.get("id") or x["memory"]["id"] for x in r.json()["results"]]
                        assert (ids == [mid]) == bool(expect), (i, want_tag, match, ids)
                    r = await http.get("/memory/by-tag", params={"tags": want_tag, "tag_match": "prefix",
                                                                 "known_at": known})
                    assert ([x["id"] for x in r.json()["memories"]] == [mid]) == bool(expect), (i, want_tag, r.text)
                # gRPC
                request = recall_service_pb2.GetMemoryRequest(id=mid)
                request.read.known_at.CopyFrom(ts(point))
                if not readable:
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await client.recall.GetMemory(request)
                    assert err.value.code() == grpc.StatusCode.NOT_FOUND
                else:
                    got = (await client.recall.GetMemory(request)).memory
                    assert (got.content, got.importance, later in got.tags) == (content, importance, has_later), i
                search = recall_service_pb2.SearchMemoriesRequest(tags=[later], tag_match=recall_service_pb2.TAG_MATCH_EXACT)
                search.read.known_at.CopyFrom(ts(point))
                found = await client.recall.SearchMemories(search)
                assert ([h.memory.id for h in found.results] == [mid]) == bool(listed and has_later), i
                # MCP
                result = await mcp.call_tool("recall_memory", {"memory_id": mid, "known_at": known, "format": "json"})
                if not readable:
                    assert result.is_error, i
                else:
                    assert not result.is_error, result.content[0].text
                    m = result.structured_content["memory"]
                    assert (m["content"], m["importance"], later in m["tags"]) == (content, importance, has_later), i
                result = await mcp.call_tool("recall_memory", {"tags": [later], "tag_match": "exact",
                                                               "known_at": known, "format": "json"})
                assert not result.is_error, result.content[0].text
                ids = [x.get("id") or x.get("memory_id") for x in result.structured_content["results"]]
                assert (ids == [mid]) == bool(listed and has_later), (i, ids)
        await client.close()
        # The deleted memory's history stays readable: one version per write.
        r = await http.get(f"/v1/memories/{mid}/versions")
        assert r.status_code == 200, r.text
        versions = r.json()["versions"]
        assert [v["version"] for v in versions] == [1, 2, 3, 4, 5, 6]
        # (enrichment may land in between and reset or set its own fields: only the
        # caller's fields are compared)
        user = {"content", "tags", "t_invalid", "t_valid", "importance", "state", "retracted_at", "type",
                "confidence", "metadata", "timestamp"}
        assert [sorted(set(v["changed_fields"]) & user) for v in versions[1:]] == [
            ["content"], ["tags"], ["t_invalid"], ["importance"], ["retracted_at", "state"]]
        assert "id" not in versions[0]["changed_fields"] and "content" in versions[0]["changed_fields"]
        assert versions[-1]["memory"]["state"] == "DELETED"
        assert (await http.get(f"/memory/{mid}", params={"version": 2})).json()["memory"]["content"] == \
            "The deploy runs on Mondays"


async def test_versions_listing_paging_version_and_diff(service):
    tag = f"vl-{uuid.uuid4().hex[:8]}"
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Version one", "tags": [tag], "importance": 0.2})
        mid = r.json()["memory_id"]
        assert (await http.patch(f"/memory/{mid}", json={"content": "Version two"})).status_code == 200

        async def embedded():
            return (await http.get(f"/memory/{mid}")).json()["memory"]["embedding_status"] == "done" or None
        # enrichment writes no version, so a snapshot taken before it finished differs from one
        # taken after in embedding_status: versions 3 and 4 are both taken after it
        await eventually(embedded, timeout=60)
        for body in ({"tags": [tag, "extra"]}, {"importance": 0.7}):
            assert (await http.patch(f"/memory/{mid}", json=body)).status_code == 200
        # paging: 4 versions, 3 pages of at most 2 ... pages of 3
        seen, token = [], None
        while True:
            params = {"page_size": 3, **({"page_token": token} if token else {})}
            r = await http.get(f"/v1/memories/{mid}/versions", params=params)
            assert r.status_code == 200, r.text
            body = r.json()
            seen.extend(body["versions"])
            token = body["next_page_token"]
            if not token:
                break
        assert [v["version"] for v in seen] == [1, 2, 3, 4]
        assert [v["memory"]["content"] for v in seen] == ["Version one", "Version two", "Version two", "Version two"]
        assert "content" in seen[1]["changed_fields"] and "tags" in seen[2]["changed_fields"]
        assert seen[3]["changed_fields"] == ["importance"]
        assert all(v["actor"] and v["recorded_at"] for v in seen)
        assert [v["recorded_at"] for v in seen] == sorted(v["recorded_at"] for v in seen)
        # version=N
        r = await http.get(f"/memory/{mid}", params={"version": 2})
        assert r.status_code == 200 and r.json()["memory"]["content"] == "Version two"
        assert r.json()["memory"]["tags"] == [tag]
        # diff
        r = await http.get(f"/v1/memories/{mid}/versions:diff", params={"from": 1, "to": 4})
        assert r.status_code == 200, r.text
        changes = {c["field"]: (c["before"], c["after"]) for c in r.json()["changes"]}
        assert changes["content"] == ("Version one", "Version two")
        assert changes["importance"] == (0.2, 0.7)
        assert changes["tags"] == ([tag], [tag, "extra"])
        assert "version" not in changes
        # Enum values as the memory itself words them (they read "MEMORY_STATE_ACTIVE" here).
        gone = (await http.post("/memory", json={"content": "Version probe: deleted at once", "type": "Habit"})).json()
        assert (await http.delete(f"/memory/{gone['memory_id']}")).status_code == 200
        r = await http.get(f"/v1/memories/{gone['memory_id']}/versions:diff", params={"from": 1, "to": 2})
        changes = {c["field"]: (c["before"], c["after"]) for c in r.json()["changes"]}
        assert changes["state"] == ("ACTIVE", "DELETED"), changes
        deleted = (await http.get(f"/memory/{gone['memory_id']}", params={"version": 2})).json()["memory"]
        assert changes["retracted_at"] == (None, deleted["retracted_at"]), changes  # "+00:00" as memories, not "Z"
        # bad input: version 0, unknown version, bad token, page size out of range
        r = await http.get(f"/memory/{mid}", params={"version": 0})
        assert r.status_code == 400 and "version" in r.text
        r = await http.get(f"/memory/{mid}", params={"version": 99})
        assert r.status_code == 404 and "version" in r.text
        r = await http.get(f"/v1/memories/{mid}/versions:diff", params={"from": 1, "to": 99})
        assert r.status_code == 404 and "to" in r.text
        r = await http.get(f"/v1/memories/{mid}/versions", params={"page_token": "nonsense"})
        assert r.status_code == 400 and "page_token" in r.text
        r = await http.get(f"/v1/memories/{mid}/versions", params={"page_size": 101})
        assert r.status_code == 400 and "page_size" in r.text
        r = await http.get(f"/v1/memories/{uuid.uuid4()}/versions")
        assert r.status_code == 404
    # gRPC listing and diff
    client = service.client()
    page = await client.recall.ListMemoryVersions(recall_service_pb2.ListMemoryVersionsRequest(id=mid, page_size=2))
    assert [v.version for v in page.versions] == [1, 2] and page.next_page_token
    rest = await client.recall.ListMemoryVersions(recall_service_pb2.ListMemoryVersionsRequest(
        id=mid, page_size=2, page_token=page.next_page_token))
    assert [v.version for v in rest.versions] == [3, 4] and not rest.next_page_token
    diff = await client.recall.DiffMemoryVersions(recall_service_pb2.DiffMemoryVersionsRequest(
        id=mid, from_version=3, to_version=4))
    assert [c.field for c in diff.changes] == ["importance"]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await client.recall.ListMemoryVersions(recall_service_pb2.ListMemoryVersionsRequest(id=mid, page_token="x"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in err.value.details()
    await client.close()


async def test_every_write_records_its_version_atomically(service):
    """Supersede records the old memory's closed version and the replacement's first one;
    enrichment amends the version it enriched, without a new version."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Ada Lovelace wrote the first program in London"})
        old = r.json()["memory_id"]
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "Ada Lovelace published notes in 1843"})
        assert r.status_code in (200, 201), r.text
        new = r.json()["memory_id"]
        versions = (await http.get(f"/v1/memories/{old}/versions")).json()["versions"]
        assert [v["memory"]["state"] for v in versions] == ["ACTIVE", "SUPERSEDED"]
        assert "state" in versions[1]["changed_fields"]
        assert [v["version"] for v in (await http.get(f"/v1/memories/{new}/versions")).json()["versions"]] == [1]
    graph = service.ctx.graph
    assert await graph.versions.count(new) == 1


async def test_memories_without_versions_get_one_at_start(settings):
    """A memory stored before versions existed (no MemoryVersion, no migration marker) gets
    one version from its node when the service starts: read at its record time and listed."""
    from automem.graph.versions import MIGRATION
    from tests.conftest import start_service

    running = await start_service(settings)
    try:
        async with running.http() as http:
            r = await http.post("/memory", json={"content": "Stored before versions", "tags": ["old"]})
            mid = r.json()["memory_id"]
            assert (await http.patch(f"/memory/{mid}", json={"importance": 0.8})).status_code == 200
            recorded = r.json()["memory"]["recorded_at"]
        graph = running.ctx.graph
        await graph.query("MATCH (v:MemoryVersion) DELETE v")
        await graph.query("MATCH (s:SchemaMigration {name: $n}) DELETE s", {"n": MIGRATION})
        async with running.http() as http:
            assert (await http.get(f"/memory/{mid}", params={"known_at": recorded})).status_code == 404
    finally:
        await running.runner.stop()
    running = await start_service(settings)
    try:
        async with running.http() as http:
            r = await http.get(f"/memory/{mid}", params={"known_at": recorded})
            assert r.status_code == 200, r.text
            assert r.json()["memory"]["importance"] == 0.8  # the node as it stood: nothing older is known
            versions = (await http.get(f"/v1/memories/{mid}/versions")).json()["versions"]
            assert [(v["version"], v["actor"], v["recorded_at"]) for v in versions] == [(2, "system", recorded)]
        assert await running.ctx.graph.versions.migrate() == 0  # once per store
    finally:
        await running.runner.stop()


async def test_purge_removes_every_version(service):
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Purge me with my history"})
        mid = r.json()["memory_id"]
        assert (await http.patch(f"/memory/{mid}", json={"importance": 0.9})).status_code == 200
        assert await service.ctx.graph.versions.count(mid) == 2
        assert (await http.delete(f"/memory/{mid}", params={"purge": "true"})).status_code == 200
    assert await service.ctx.graph.versions.count(mid) == 0


async def test_related_and_graph_api_read_the_versions_at_known_at(service):
    async with service.http() as http:
        a = (await http.post("/memory", json={"content": "The API gateway is nginx"})).json()["memory_id"]
        b = (await http.post("/memory", json={"content": "Rate limits are 100 per minute"})).json()["memory_id"]
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO",
                                                "strength": 0.8})
        assert r.status_code in (200, 201), r.text
        then = _iso(await _mark())
        assert (await http.patch(f"/memory/{b}", json={"content": "Rate limits are 500 per minute",
                                                        "importance": 0.95})).status_code == 200
        for known, content in ((then, "Rate limits are 100 per minute"), (None, "Rate limits are 500 per minute")):
            params = {"known_at": known} if known else {}
            r = await http.get(f"/memories/{a}/related", params=params)
            assert r.status_code == 200, r.text
            assert [x["memory"]["content"] for x in r.json()["related_memories"]] == [content]
            r = await http.get(f"/graph/neighbors/{a}", params={**params, "include_semantic": "false"})
            assert r.status_code == 200, r.text
            assert [n["content"] for n in r.json()["graph_neighbors"]] == [content]
            r = await http.get("/graph/snapshot", params=params)
            assert r.status_code == 200, r.text
            assert {n["id"]: n["content"] for n in r.json()["nodes"]}[b] == content


async def test_backup_at_known_at_writes_the_records_believed_then(service):
    """``GET /backup?known_at=T``: each memory as its version current at T, memories,
    versions, edges and events after T left out; restore refuses it; no ``known_at`` (or one
    in the future) is the full export (automem/common/backup.py)."""
    tag = f"kx-{uuid.uuid4().hex[:8]}"
    async with service.http() as http:
        a = (await http.post("/memory", json={"content": "The cache is redis", "tags": [tag]})).json()["memory_id"]
        then = await _mark()
        assert (await http.patch(f"/memory/{a}", json={"content": "The cache is valkey",
                                                        "tags": [tag, f"{tag}-new"]})).status_code == 200
        b = (await http.post("/memory", json={"content": "Queues are NATS", "tags": [tag]})).json()["memory_id"]
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO",
                                                "strength": 0.8})
        assert r.status_code in (200, 201), r.text

        async def export(**params) -> list[dict]:
            r = await http.get("/backup", params=params)
            assert r.status_code == 200, r.text
            return backup.read_lines(json_lines(r.text))

        def memories(records: list[dict]) -> dict[str, dict]:
            return {r["properties"]["id"]: r["properties"] for r in records if r["kind"] == "memory"}

        def versions(records: list[dict], mid: str) -> list[int]:
            return sorted(r["properties"]["version"] for r in records
                          if "MemoryVersion" in r.get("labels", ()) and r["properties"]["memory_id"] == mid)

        def event_ids(records: list[dict]) -> set[str]:
            return {events_pb2.MemoryEvent.FromString(base64.b64decode(r["data"])).memory_id
                    for r in records if r["kind"] == "event"}

        past = await export(known_at=_iso(then))
        assert past[0]["known_at"] == pytest.approx(then, abs=1e-3)
        got = memories(past)
        assert b not in got
        assert (got[a]["content"], got[a]["tags"]) == ("The cache is redis", [tag])
        assert versions(past, a) == [1] and versions(past, b) == []
        refs = {r["ref"] for r in past if r["kind"] != "header" and "ref" in r}
        assert all(e["source"] in refs and e["target"] in refs for e in past if e["kind"] == "edge")
        assert not any(e["type"] == "RELATES_TO" and e["properties"].get("create_time", 0) > then
                       for e in past if e["kind"] == "edge")
        assert a in event_ids(past) and b not in event_ids(past)
        with pytest.raises(ValueError, match="known_at"):
            await backup.restore_records(service.ctx.graph, past)

        for full in (await export(), await export(known_at=_iso(time.time() + 3600))):
            assert "known_at" not in full[0]
            got = memories(full)
            assert (got[a]["content"], sorted(got[a]["tags"])) == ("The cache is valkey", [tag, f"{tag}-new"])
            assert got[b]["content"] == "Queues are NATS"
            assert versions(full, a) == [1, 2] and versions(full, b) == [1]
            assert {a, b} <= event_ids(full)
            assert any(e["type"] == "RELATES_TO" for e in full if e["kind"] == "edge")

        r = await http.get("/backup", params={"known_at": "yesterday-ish"})
        assert r.status_code == 400 and "known_at" in r.text, r.text


async def test_a_creation_version_stores_no_field_list_and_reports_every_field(service, settings):
    """The version that creates a memory (one ``POST /memory`` and the ``POST /memory/batch``
    path) is stored without ``changed_fields`` (it was ~50 MB of FalkorDB at 100,000 memories)
    and read back with every field it set; an edit's version keeps its own list."""
    from automem.graph.store import GraphStore

    async with service.http() as http:
        one = (await http.post("/memory", json={"content": "Standups move to 9:30", "tags": ["team"],
                                                "importance": 0.7})).json()["memory_id"]
        r = await http.post("/memory/batch", json={"memories": [{"content": "Retro every other Friday",
                                                                 "metadata": {"source": "notes"}}]})
        assert r.status_code in (200, 201), r.text
        batch = (r.json().get("memory_ids") or [m.get("memory_id") or m.get("id") for m in r.json()["memories"]])[0]
        assert (await http.patch(f"/memory/{one}", json={"importance": 0.9})).status_code == 200
        graph = GraphStore(settings.model_copy(update={"graph_name": service.settings.graph_name}))
        try:
            rows = await graph.query("MATCH (v:MemoryVersion) WHERE v.memory_id IN $ids "
                                     "RETURN v.memory_id, v.version, v.changed_fields", {"ids": [one, batch]})
        finally:
            await graph.close()
        stored = {(r[0], int(r[1])): r[2] for r in rows}
        assert stored[(one, 1)] is None and stored[(batch, 1)] is None, stored
        assert stored[(one, 2)] is not None and "importance" in stored[(one, 2)], stored
        for mid, wanted in ((one, {"content", "tags", "importance", "type", "confidence", "created_at"}),
                            (batch, {"content", "metadata", "type", "importance"})):
            versions = (await http.get(f"/v1/memories/{mid}/versions")).json()["versions"]
            first = set(versions[0]["changed_fields"])
            assert wanted <= first and not first & {"id", "version", "memory_id", "changed_fields", "actor"}, first
        versions = (await http.get(f"/v1/memories/{one}/versions")).json()["versions"]
        assert "importance" in versions[1]["changed_fields"] and "content" not in versions[1]["changed_fields"]


async def test_a_diff_gives_the_metadatas_whole_numbers_as_integers(service):
    """``{"n": 5}`` read back as ``{"n": 5}`` on the memory and its versions, but as
    ``{"n": 5.0}`` in a diff (the Struct's doubles went out as they were)."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "a counter", "metadata": {"n": 5, "ratio": 0.5}})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]
        r = await http.patch(f"/memory/{mid}", json={"metadata": {"n": 6, "ratio": 0.5}})
        assert r.status_code == 200, r.text
        r = await http.get(f"/v1/memories/{mid}/versions:diff", params={"from": 1, "to": 2})
        assert r.status_code == 200, r.text
        changes = {c["field"]: (c["before"], c["after"]) for c in r.json()["changes"]}
        before, after = changes["metadata"]
        assert before == {"n": 5, "ratio": 0.5} and after == {"n": 6, "ratio": 0.5}
        assert type(before["n"]) is int and type(after["n"]) is int


async def test_a_patch_that_changes_nothing_makes_no_version(service):
    """The same values sent again made version 2, identical to version 1 but for its times,
    moved update_time and the ETag (so a client's If-Match failed for nothing) and published
    an update event. A change still makes its version."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Ship on Thursdays", "tags": ["ops"], "importance": 0.6,
                                             "metadata": {"owner": "dana", "n": 2}})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]
        first = await http.get(f"/memory/{mid}")
        for body in ({"content": "Ship on Thursdays"}, {"tags": ["ops"], "importance": 0.6},
                     {"metadata": {"n": 2}}, {"metadata": {}}):
            r = await http.patch(f"/memory/{mid}", json=body)
            assert r.status_code == 200, (body, r.text)
            assert r.json()["memory"]["version"] == first.json()["memory"]["version"], body
        again = await http.get(f"/memory/{mid}")
        assert again.headers["etag"] == first.headers["etag"]
        assert again.json()["memory"]["updated_at"] == first.json()["memory"]["updated_at"]
        versions = (await http.get(f"/v1/memories/{mid}/versions")).json()
        assert [v["version"] for v in versions["versions"]] == [1], versions
        r = await http.patch(f"/memory/{mid}", json={"metadata": {"n": 3}})
        assert r.status_code == 200 and r.json()["memory"]["version"] == 2, r.text



async def test_version_and_known_at_together_are_refused_naming_both(service):
    """``GET /memory/{id}?version=N&known_at=T`` answered version N and dropped ``known_at``
    without a word: the two contradict each other (one record of the history, or the one
    believed at a time), so the pair is a 400 naming both — for a memory that exists and one
    that does not — and /openapi.json says so (``x-exclusive-parameters`` and the 400's
    description), which the fuzz test reads (tests/integration/test_openapi_fuzz.py)."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Version one of the rota"})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]
        known = _iso(await _mark())
        assert (await http.patch(f"/memory/{mid}", json={"content": "Version two of the rota"})).status_code == 200
        for memory_id in (mid, str(uuid.uuid4())):
            for version in (1, 2):
                r = await http.get(f"/memory/{memory_id}", params={"version": version, "known_at": known})
                assert r.status_code == 400, r.text
                error = r.json()["error"]
                assert error.startswith("version, known_at: ") and "not both" in error, error
        # Each alone still reads what it names.
        r = await http.get(f"/memory/{mid}", params={"version": 1})
        assert r.status_code == 200 and r.json()["memory"]["content"] == "Version one of the rota"
        r = await http.get(f"/memory/{mid}", params={"known_at": known})
        assert r.status_code == 200 and r.json()["memory"]["content"] == "Version one of the rota"
        operation = (await http.get("/openapi.json")).json()["paths"]["/memory/{memory_id}"]["get"]
        assert operation["x-exclusive-parameters"] == [["version", "known_at"]]
        assert "version and known_at" in operation["responses"]["400"]["description"]
        described = {p["name"]: p.get("description", "") for p in operation["parameters"]}
        assert "known_at" in described["version"] and "version" in described["known_at"], described
    # gRPC refuses the pair as well (the check is the recall service's, which REST reaches)
    client = service.client()
    request = recall_service_pb2.GetMemoryRequest(id=mid, version=1)
    request.read.known_at.GetCurrentTime()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await client.recall.GetMemory(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
    assert err.value.details().startswith("version, known_at: "), err.value.details()
    await client.close()


async def test_every_version_of_a_superseded_memory_names_the_current_head(service):
    """``GET /memory/{id}?version=1`` of a superseded memory answered ``current_id: null``
    where its last version named the head: every version names it now."""
    async with service.http() as http:
        old = (await http.post("/memory", json={"content": "Head probe: lunch is at noon"})).json()["memory_id"]
        assert (await http.patch(f"/memory/{old}", json={"importance": 0.8})).status_code == 200
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "Head probe: lunch is at one"})
        new = r.json()["memory_id"]
        for version in (1, 2, 3):
            got = (await http.get(f"/memory/{old}", params={"version": version})).json()["memory"]
            assert (got["version"], got["is_current"], got["current_id"]) == (version, False, new), got
        got = (await http.get(f"/memory/{new}", params={"version": 1})).json()["memory"]
        assert (got["is_current"], got["current_id"]) == (True, None), got


async def test_a_ranked_recall_at_known_at_finds_a_memory_deleted_since(service):
    """Break-it review: a memory deleted after ``known_at`` was absent from a ranked recall
    at ``known_at`` (its vector points go with the delete, so neither arm found it), though
    a tag listing at that time showed it. Such memories are scored by the text believed then
    (as memories not yet embedded are)."""
    tag = f"kd-{uuid.uuid4().hex[:8]}"
    query = "pangolin ledger reconciles nightly"
    async with service.http() as http:
        gone = (await http.post("/memory", json={"content": "The pangolin ledger reconciles nightly at two.",
                                                 "tags": [tag]})).json()["memory_id"]
        kept = (await http.post("/memory", json={"content": "The otter ledger is closed on Fridays.",
                                                 "tags": [tag]})).json()["memory_id"]

        async def embedded() -> bool:
            got = [(await http.get(f"/memory/{m}")).json()["memory"]["embedding_status"] for m in (gone, kept)]
            return got == ["done", "done"]

        await eventually(embedded)
        believed = await _mark()
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        await _mark()
        now = (await http.get("/recall", params={"query": query, "tags": tag})).json()["results"]
        assert gone not in [h["id"] for h in now]
        for params in ({"query": query}, {"query": query, "tags": tag}):
            then = (await http.get("/recall", params={**params, "known_at": _iso(believed)})).json()["results"]
            # Found (scored by its text alone, as a memory not yet embedded), as it was then.
            hits = {h["id"]: h for h in then}
            assert gone in hits and hits[gone]["memory"]["state"] == "ACTIVE", (params, then)
        listed = (await http.get("/memory/by-tag", params={"tags": tag, "known_at": _iso(believed)})).json()
        assert gone in [m["id"] for m in listed["memories"]]


async def test_a_ranked_recall_at_known_at_scores_the_text_believed_then(service):
    """Break-it review: a recall at a past ``known_at`` scored a memory edited since by its
    text of today: after "Confluence" became "Notion", ``query=Notion`` at the earlier time
    returned the Confluence version with a keyword score (that text never held the word),
    and ``query=Confluence`` gave it none (only the dense arm, on today's vector, found it).
    A memory whose content changed after ``known_at`` is scored by the text believed then,
    and its dense hit (today's vector) is dropped."""
    async with service.http() as http:
        mid = (await http.post("/memory", json={"content": "The wiki lives on Confluence"})).json()["memory_id"]

        async def embedded() -> bool:
            return (await http.get(f"/memory/{mid}")).json()["memory"]["embedding_status"] == "done"

        await eventually(embedded)
        k0 = await _mark()
        r = await http.patch(f"/memory/{mid}", json={"content": "The wiki lives on Notion"})
        assert r.status_code == 200, r.text
        await eventually(embedded)
        now = {h["id"]: h for h in (await http.get("/recall", params={"query": "Notion"})).json()["results"]}
        assert now[mid]["score_components"]["keyword"] > 0, now  # today's text holds the word

        async def at_k0(query: str) -> dict:
            r = await http.get("/recall", params={"query": query, "known_at": _iso(k0)})
            assert r.status_code == 200, r.text
            return {h["id"]: h for h in r.json()["results"]}

        then = await at_k0("Notion")
        # No match: the text believed at k0 never held the word (and today's vector, which
        # holds it, is not the text ranked then).
        assert mid not in then, then[mid]
        then = await at_k0("Confluence")
        assert mid in then, then
        assert then[mid]["memory"]["content"] == "The wiki lives on Confluence"
        assert then[mid]["score_components"].get("keyword", 0) > 0, then[mid]["score_components"]


async def test_page_tokens_and_restore_lines_nested_too_deeply_are_bad_input(own_service) -> None:
    """A page token (base64 JSON) or a backup line nested thousands deep made ``json.loads``
    raise RecursionError, which the readers did not catch: every listing answered 500, and a
    restore 500 UNKNOWN. They answer 400 naming ``page_token`` (the console: its page's
    ``after``), and the restore refuses naming the line, restoring nothing."""
    import httpx

    from automem.v1 import admin_service_pb2
    from tests.conftest import console_login

    deep = base64.urlsafe_b64encode(("[" * 3000 + "]" * 3000).encode()).decode()
    async with own_service.http() as http:
        r = await http.post("/memory", json={"content": "deep token target", "tags": ["db"]})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]
        for path, params in (("/memory/by-tag", {"tags": "db"}), (f"/v1/memories/{mid}/versions", {}),
                             (f"/v1/memories/{mid}/history", {}), ("/v1/review-items", {})):
            r = await http.get(path, params={**params, "page_token": deep})
            assert r.status_code == 400 and "page_token" in r.text, (path, r.status_code, r.text)
        lines = [json.dumps({"kind": "header", "format": backup.FORMAT}), '{"memory":' * 2000 + "1" + "}" * 2000]
        r = await http.post("/v1/backup:restore", params={"force": "true"}, content="\n".join(lines).encode())
        assert r.status_code == 400 and "backup line 2: arrays and objects nested too deeply" in r.text, r.text
        assert (await http.get(f"/memory/{mid}")).status_code == 200  # nothing was restored over it
    async with own_service.client() as anonymous:
        key = (await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="admin", scopes=["*"]))).secret
    async with httpx.AsyncClient(base_url=own_service.url, timeout=30) as console:
        assert (await console_login(console, key)).status_code == 303
        for path, param in ((f"/console/memories/{mid}/history", "after"), ("/console/review", "after"),
                            ("/console/review", "tombstones_after"), ("/console/", "after")):
            page = await console.get(path, params={param: deep, **({"tags": "db"} if path == "/console/" else {})})
            assert page.status_code == 400 and f">{param}: not a token of this listing</p>" in page.text, (path, page.status_code, page.text[page.text.find("<h1>"):][:200])
