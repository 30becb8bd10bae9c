"""The write path end to end on real NATS, FalkorDB and the embedded Qdrant shard:
REST and gRPC round trips, validation, tricky inputs, vector points and their payloads."""

from __future__ import annotations

import json

import grpc
import pytest

from automem.common.payload import build_payload
from automem.v1 import ingest_service_pb2
from tests.conftest import eventually

TRICKY = [
    "line1\nline2",
    "cr\r\nand\ttab",
    'json {"rows":5} C:\\p\\',
    "tpl ${name} $id",
    "quotes \"double\" 'single' back\\slash and emoji 🧠🚀 ünïcödé",
]
METADATA = {"@type": "note", "0be6ffd7-3844-46a3-a699-bf3b77c573cd": "x", "a.b": 1, "sp ace": True,
            "nested": {"k-1": None, "list": [1, None, "z"]}, "empty": {}}


async def _count_nodes(service) -> int:
    return await service.ctx.graph.memories.count(service.scope)


async def test_rest_store_and_get_round_trip(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Use Postgres for storage", "tags": ["db"],
                                             "importance": 0.8, "type": "decision", "metadata": {"k": "v"}})
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["type"] == "Decision" and body["confidence"] == 0.9
        assert body["embedding_status"] == "pending" and body["qdrant"] == "queued"
        mid = body["memory_id"]
        r = await http.get(f"/memory/{mid}")
        assert r.status_code == 200
        memory = r.json()["memory"]
        assert memory["id"] == mid and memory["content"] == "Use Postgres for storage"
        assert memory["tags"] == ["db"] and memory["importance"] == 0.8 and memory["metadata"] == {"k": "v"}
        assert memory["state"] == "ACTIVE" and memory["last_accessed"] is not None
        r = await http.get("/memory/00000000-0000-0000-0000-000000000000")
        assert r.status_code == 404 and r.json()["status"] == "error"


async def test_grpc_create_and_get_round_trip(service) -> None:
    async with service.client() as client:
        memory = await client.create_memory("gRPC memory", tags=["a", "b"], importance=0.3,
                                            metadata={"n": 1}, timestamp="2024-05-01T10:00:00")
        got = await client.get_memory(memory.id)
        assert got.memory.content == "gRPC memory" and list(got.memory.tags) == ["a", "b"]
        assert got.is_current
        assert got.memory.event_time.ToJsonString() == "2024-05-01T10:00:00Z"  # naive = UTC
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.create_memory("   ")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "content" in err.value.details()


@pytest.mark.parametrize("content", TRICKY)
async def test_tricky_content_reads_back_byte_for_byte(service, content: str) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": content})
        assert r.status_code == 201, r.text
        got = (await http.get(f"/memory/{r.json()['memory_id']}")).json()["memory"]
        assert got["content"] == content


async def test_nul_byte_is_rejected_not_altered(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "a\x00b"})
        assert r.status_code == 400 and "content" in r.json()["error"]
    assert await _count_nodes(service) == 0


async def test_a_nul_in_a_path_id_is_400_naming_the_parameter(service) -> None:
    """``GET /memory/%00`` answered "a text value contains a NUL character" (the graph's
    check), naming no field."""
    async with service.http() as http:
        for method, path in (("GET", "/memory/a%00b"), ("PATCH", "/memory/%00"), ("DELETE", "/memory/x%00"),
                             ("GET", "/v1/memories/%00/versions")):
            r = await http.request(method, path, json={"content": "x"} if method == "PATCH" else None)
            assert r.status_code == 400 and r.json()["error"].startswith("memory_id: "), (method, path, r.text)


async def test_metadata_reads_back_identical_and_type_key_updates(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "meta", "metadata": METADATA})
        mid = r.json()["memory_id"]
        got = (await http.get(f"/memory/{mid}")).json()["memory"]["metadata"]
        assert json.dumps(got, sort_keys=True) == json.dumps(METADATA, sort_keys=True)
        r = await http.patch(f"/memory/{mid}", json={"metadata": {"@type": "decision"}})
        assert r.status_code == 200, r.text
        got = (await http.get(f"/memory/{mid}")).json()["memory"]["metadata"]
        assert got["@type"] == "decision" and got["nested"] == METADATA["nested"]


@pytest.mark.parametrize(("body", "field"), [
    ({"content": ""}, "content"),
    ({"content": " \n\t "}, "content"),
    ({"content": "x" * 60_000}, "2000"),
    ({"content": "x", "importance": 1.5}, "importance"),
    ({"content": "x", "importance": -0.1}, "importance"),
    ({"content": "x", "confidence": 2}, "confidence"),
    ({"content": "x", "type": "Opinion"}, "type"),
    ({"content": "x", "metadata": [1, 2]}, "metadata"),
    ({"content": "x", "metadata": "text"}, "metadata"),
    ({"content": "x", "timestamp": "yesterday-ish"}, "timestamp"),
    ({"content": "x", "t_valid": "2024-13-45"}, "t_valid"),
    ({"content": "x", "t_invalid": "not a time"}, "t_invalid"),
    ({"tags": ["no content"]}, "content"),
    ({"content": "x", "importance": True}, "importance"),
    ({"content": "x", "confidence": False}, "confidence"),
    ({"content": "x", "supersede_relation": "BOGUS"}, "supersede_relation: must be INVALIDATED_BY or EVOLVED_INTO"),
    ({"content": "x", "supersede_relation": "EVOLVED_INTO"}, "supersede_relation: needs supersedes_memory_id"),
    ({"content": "x", "supersede_reason": "outdated"}, "supersede_reason: needs supersedes_memory_id"),
])
async def test_invalid_input_is_rejected_naming_the_field_and_stores_nothing(service, body, field) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json=body)
        assert r.status_code == 400, r.text
        assert field in r.json()["error"]
    assert await _count_nodes(service) == 0


async def test_lower_case_type_alias_is_accepted(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "I prefer tabs", "type": "preference"})
        assert r.status_code == 201 and r.json()["type"] == "Preference"


async def test_batch_with_one_long_item_is_rejected_whole_naming_the_index(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory/batch", json={"memories": [
            {"content": "first"}, {"content": "x" * 60_000}, {"content": "third"}]})
        assert r.status_code == 400
        assert "memories[1].content" in r.json()["error"] and "2000" in r.json()["error"]
        assert await _count_nodes(service) == 0
        r = await http.post("/memory/batch", json={"memories": [{"content": f"m{i}"} for i in range(3)]})
        assert r.status_code == 201 and r.json()["stored"] == 3 and len(r.json()["memory_ids"]) == 3
        r = await http.post("/memory/batch", json={"memories": [{"content": f"m{i}"} for i in range(501)]})
        assert r.status_code == 400 and "500" in r.json()["error"]
        # An item repeating another (or a stored memory) is acknowledged, not created again.
        r = await http.post("/memory/batch", json={"memories": [{"content": "m0"}, {"content": "m9"},
                                                                {"content": "m9"}]})
        assert r.status_code == 201 and (r.json()["stored"], r.json()["created"]) == (3, 1), r.text
        assert r.json()["deduplicated"] == [True, False, True], r.text
    assert await _count_nodes(service) == 4


async def test_a_batch_item_that_would_supersede_or_change_scope_is_refused_and_nothing_is_stored(service) -> None:
    """A batch supersedes nothing and is stored in one scope: an item's supersede fields or a
    scope of its own were silently ignored (the old fact stayed current, the item landed in
    the batch's scope); now the whole batch is refused naming the item's field."""
    async with service.http() as http:
        old = (await http.post("/memory", json={"content": "The VPN endpoint is vpn1.example.com"})).json()["memory_id"]
        for item, field in (({"supersedes_memory_id": old}, "memories[1].supersedes_memory_id"),
                            ({"supersedes_memory_id": "no-such-id"}, "memories[1].supersedes_memory_id"),
                            ({"supersede_relation": "EVOLVED_INTO"}, "memories[1].supersede_relation"),
                            ({"supersede_relation": "BOGUS"}, "memories[1].supersede_relation"),
                            ({"supersede_reason": "moved"}, "memories[1].supersede_reason"),
                            ({"scope": "elsewhere"}, "memories[1].scope")):
            r = await http.post("/memory/batch", json={"memories": [
                {"content": "first of the batch"}, {"content": "The VPN endpoint is vpn2.example.com", **item}]})
            assert r.status_code == 400, (item, r.text)
            assert field in r.json()["error"], (item, r.text)
        assert await _count_nodes(service) == 1
        got = (await http.get(f"/memory/{old}")).json()["memory"]
        assert got["is_current"] is True
        r = await http.post("/memory/batch", json={"memories": [{"content": "no supersede", "scope": None,
                                                                  "supersedes_memory_id": None}]})
        assert r.status_code == 201, r.text
        # Empty strings are "unset", as on a single store.
        r = await http.post("/memory/batch", json={"memories": [{"content": "empty supersede fields", "scope": "",
                                                                  "supersedes_memory_id": "", "supersede_reason": ""}]})
        assert r.status_code == 201, r.text
        r = await http.post("/memory/batch", json={"memories": [{"content": "x", "supersede_relation": "UPDATES"}]})
        assert r.status_code == 400 and "a batch does not supersede" in r.json()["error"], r.text
        r = await http.post("/memory/batch", json={"memories": [{"content": "empty relation", "supersede_relation": ""}]})
        assert r.status_code == 201, r.text
    assert await _count_nodes(service) == 4


async def test_the_supersede_route_refuses_a_body_id_and_stores_in_the_body_scope(service) -> None:
    """``:supersede`` replaces the path's memory: a ``supersedes_memory_id`` in the body was
    silently ignored (400 now); the body's ``scope`` was ignored too (it now applies, as on
    ``POST /memory``: a scope the memory is not in answers 404)."""
    async with service.http() as http:
        old = (await http.post("/memory", json={"content": "Deploys run on Fridays"})).json()["memory_id"]
        other = (await http.post("/memory", json={"content": "Reviews take a day"})).json()["memory_id"]
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "Deploys run on Tuesdays",
                                                                   "supersedes_memory_id": other})
        assert r.status_code == 400 and "supersedes_memory_id" in r.json()["error"], r.text
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "Deploys run on Tuesdays",
                                                                   "scope": "elsewhere"})
        assert r.status_code == 404, r.text
        for mid in (old, other):
            assert (await http.get(f"/memory/{mid}")).json()["memory"]["is_current"] is True
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "Deploys run on Tuesdays",
                                                                   "supersede_relation": ""})
        assert r.status_code == 201, r.text
        r2 = await http.post("/memory", json={"content": "Reviews take two days", "supersedes_memory_id": other,
                                              "supersede_relation": ""})
        assert r2.status_code == 201, r2.text
        assert (await http.get(f"/memory/{old}")).json()["memory"]["is_current"] is False


async def test_booleans_are_not_numbers_in_an_update_or_an_association(service) -> None:
    """JSON true / false were read as 1 / 0 (``etag: true`` matched version 1); refused now."""
    async with service.http() as http:
        a = (await http.post("/memory", json={"content": "Alpha fact"})).json()["memory_id"]
        b = (await http.post("/memory", json={"content": "Beta fact"})).json()["memory_id"]
        for body, field in (({"content": "Alpha fact, edited", "etag": True}, "etag"),
                            ({"importance": True}, "importance"), ({"confidence": False}, "confidence")):
            r = await http.patch(f"/memory/{a}", json=body)
            assert r.status_code == 400 and field in r.json()["error"], (body, r.text)
        got = (await http.get(f"/memory/{a}")).json()["memory"]
        assert got["content"] == "Alpha fact" and got["version"] == 1
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "strength": True})
        assert r.status_code == 400 and r.json()["error"] == "strength: must be a number, not a boolean", r.text
        r = await http.post("/memory/batch", json={"memories": [{"content": "ok"}, {"content": "x", "importance": True}]})
        assert r.status_code == 400 and r.json()["error"] == "memories[1].importance: must be a number, not a boolean"
        r = await http.post("/associate", json={"associations": [{"memory1_id": a, "memory2_id": b, "strength": False}]})
        assert r.status_code == 400 and r.json()["error"].startswith("associations[0].strength: "), r.text


async def test_bad_input_found_by_a_break_it_pass_is_refused_naming_what_is_wrong(service) -> None:
    """Each of these was accepted, or refused without naming the part at fault."""
    async with service.http() as http:
        mid = (await http.post("/memory", json={"content": "Gamma fact"})).json()["memory_id"]
        checks = [
            (await http.post("/memory", content=b'{"content": "x",', headers={"content-type": "application/json"}),
             "body: not valid JSON (at character"),
            (await http.post("/memory", content=b'{"content": "\xff\xfe"}', headers={"content-type": "application/json"}),
             "body:"),
            (await http.get("/recall", params={"query": "gamma", "min_score": "NaN"}), "min_score"),
            (await http.get("/recall", params={"query": "gamma", "expand_min_strength": "inf"}),
             "expand_min_strength"),
            (await http.post("/memory", json={"content": "keyed"}, headers={"Idempotency-Key": "k" * 256}),
             "idempotency-key"),
            (await http.patch(f"/memory/{mid}", json={"content": "Gamma fact, edited", "etag": -1}), "etag"),
        ]
        for r, named in checks:
            assert r.status_code == 400, (named, r.text)
            assert named in r.json()["error"], (named, r.text)
        r = await http.get(f"/v1/memories/{mid}/versions:diff", params={"from": 1, "to": 50})
        assert r.status_code == 404 and r.json()["error"].startswith("to: "), r.text
        got = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert got["content"] == "Gamma fact" and got["version"] == 1
    assert await _count_nodes(service) == 1


async def test_last_accessed_has_millisecond_precision_as_every_time(service) -> None:
    """A get stamped ``last_accessed`` with microseconds, while recall read it back from the
    graph at another precision (README: times have millisecond precision)."""
    from datetime import datetime

    async with service.http() as http:
        mid = (await http.post("/memory", json={"content": "Delta fact"})).json()["memory_id"]
        for _ in range(3):
            first = (await http.get(f"/memory/{mid}")).json()["memory"]["last_accessed"]
            assert datetime.fromisoformat(first).microsecond % 1000 == 0, first


async def test_an_edit_of_a_deleted_memory_and_a_second_supersede_say_so_plainly(service) -> None:
    """PATCH of a deleted memory answered 409 "is MEMORY_STATE_DELETED" (the proto's enum name);
    superseding a superseded memory answered "state: cannot move from SUPERSEDED to SUPERSEDED"."""
    async with service.http() as http:
        gone = (await http.post("/memory", json={"content": "Epsilon fact"})).json()["memory_id"]
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        r = await http.patch(f"/memory/{gone}", json={"importance": 0.9})
        assert r.status_code == 409 and r.json()["error"] == f"id: memory {gone} is DELETED", r.text
        old = (await http.post("/memory", json={"content": "Zeta runs on v1"})).json()["memory_id"]
        r = await http.post("/memory", json={"content": "Zeta runs on v2", "supersedes_memory_id": old})
        assert r.status_code == 201, r.text
        new = r.json()["memory_id"]
        r = await http.post("/memory", json={"content": "Zeta runs on v3", "supersedes_memory_id": old})
        assert r.status_code == 409, r.text
        assert f"already SUPERSEDED by {new}" in r.json()["error"], r.text


async def test_a_delete_refuses_a_body_or_a_query_parameter_it_would_not_read(service) -> None:
    """``DELETE /memory/{id}`` with ``{"purge": true, "reason": ..., "etag": 99}`` deleted
    (not purged), dropped the reason and checked no etag; ``DELETE /memory/by-tag?...&scope=``
    deleted in the caller's default scope. Both are refused now."""
    async with service.http() as http:
        mid = (await http.post("/memory", json={"content": "Eta fact"})).json()["memory_id"]
        r = await http.request("DELETE", f"/memory/{mid}", json={"purge": True, "reason": "erase", "etag": 99})
        assert r.status_code == 400 and r.json()["error"].startswith("body: "), r.text
        assert (await http.get(f"/memory/{mid}")).status_code == 200
        r = await http.request("DELETE", f"/memory/{mid}", content=b"not json", headers={"content-type": "text/plain"})
        assert r.status_code == 400 and r.json()["error"].startswith("body: "), r.text
        r = await http.request("DELETE", f"/memory/{mid}", params={"scope": "proj1"})
        assert r.status_code == 400 and r.json()["error"].startswith("scope: "), r.text
        r = await http.request("DELETE", "/memory/by-tag", params={"tags": "eta", "scope": "proj1"})
        assert r.status_code == 400 and r.json()["error"].startswith("scope: "), r.text
        assert (await http.get(f"/memory/{mid}")).status_code == 200
        r = await http.request("DELETE", f"/memory/{mid}", content=b"{ \n }", headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text


async def test_a_scope_query_parameter_is_refused_on_every_route(service) -> None:
    """``?scope=`` ran the call in the caller's default scope on every route but the DELETEs
    (the scope is the X-Automem-Scope header): a recall or a store the caller believed ran in
    another scope. Other unknown parameters stay accepted and ignored, as AutoMem's clients
    send some (``format``, ../shared/AUTOMEM_API.md)."""
    async with service.http() as http:
        before = (await http.get("/memory/by-tag", params={"tags": "zeta"})).json()["count"]
        r = await http.post("/memory", params={"scope": "proj1"}, json={"content": "Zeta fact", "tags": ["zeta"]})
        assert r.status_code == 400 and r.json()["error"].startswith("scope: "), r.text
        assert (await http.get("/memory/by-tag", params={"tags": "zeta"})).json()["count"] == before
        for path, params in (("/recall", {"query": "zeta", "scope": "proj1"}),
                             ("/memory/by-tag", {"tags": "zeta", "scope": "proj1"})):
            r = await http.get(path, params=params)
            assert r.status_code == 400 and r.json()["error"].startswith("scope: "), (path, r.text)
        r = await http.get("/recall", params={"query": "zeta", "format": "text"})
        assert r.status_code == 200, r.text
        # Spellings a client library or a typo produce (found by a break-it pass: each stored
        # in the default scope), and /mcp, which ignored it too.
        for name in ("Scope", "SCOPE", "scope ", " scope", "scope[]", "scope\x00"):
            r = await http.post("/memory", params={name: "proj1"}, json={"content": "Zeta fact", "tags": ["zeta"]})
            assert r.status_code == 400 and r.json()["error"].startswith("scope: "), (name, r.text)
        assert (await http.get("/memory/by-tag", params={"tags": "zeta"})).json()["count"] == before
        r = await http.post("/mcp", params={"scope": "proj1"}, json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                            headers={"accept": "application/json, text/event-stream"})
        assert r.status_code == 400 and r.json()["error"].startswith("scope: "), r.text
    # The public probes take no key and no scope: a scope parameter changes nothing there
    # (it answered 401 "missing or invalid API key").
    async with service.shared.http() as anonymous:
        for path in ("/health", "/livez", "/readyz"):
            r = await anonymous.get(path, params={"scope": "proj1"})
            assert r.status_code in (200, 503) and "error" not in r.json(), (path, r.text)


async def _point(service, mid: str):
    points = await service.ctx.vectors.retrieve([mid])
    return points[0] if points else None


async def test_store_creates_vector_point_with_full_payload(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Vectors carry windows", "tags": ["Alpha", "beta"],
                                             "t_valid": "2024-01-01T00:00:00Z", "t_invalid": "2030-01-01T00:00:00Z"})
        mid = r.json()["memory_id"]
    point = await eventually(lambda: _point(service, mid))
    payload = point.payload
    assert payload["memory_id"] == mid and payload["scope"] == service.scope
    assert payload["valid_from"] == 1704067200.0 and payload["valid_to"] == 1893456000.0
    assert payload["tags"] == ["Alpha", "beta"] and "alp" in payload["tag_prefixes"]
    assert {"alpha", "beta"} <= set(payload["tags_lower"])  # plus any entity:<kind>:<slug> tags
    assert payload["state"] == "ACTIVE"
    memory = await service.ctx.graph.memories.get(mid, service.scope)
    memory.embedding_model = payload["embedding_model"]
    assert payload == build_payload(memory)  # the one builder, from the graph record

    async def done():
        async with service.http() as http:
            m = (await http.get(f"/memory/{mid}")).json()["memory"]
            return m["embedding_status"] == "done"
    await eventually(done)


async def test_update_of_t_invalid_and_tags_rewrites_payload_and_content_reembeds(service) -> None:
    async with service.http() as http:
        mid = (await http.post("/memory", json={"content": "the cat sat", "tags": ["x"]})).json()["memory_id"]
        first = await eventually(lambda: _point(service, mid))
        before = await service.ctx.vectors.retrieve([mid], with_vectors=True)
        r = await http.patch(f"/memory/{mid}", json={"t_invalid": "2099-01-01T00:00:00Z", "tags": ["y"]})
        assert r.status_code == 200
        assert r.json()["memory"]["updated_at"] > (await http.get(f"/memory/{mid}")).json()["memory"]["created_at"]

        async def rewritten():
            p = await _point(service, mid)
            return p if p and p.payload["valid_to"] == 4070908800.0 and p.payload["tags"] == ["y"] else None
        await eventually(rewritten)
        r = await http.patch(f"/memory/{mid}", json={"content": "quantum chromodynamics lecture notes"})
        assert r.status_code == 200

        async def reembedded():
            p = (await service.ctx.vectors.retrieve([mid], with_vectors=True))[0]
            return p if p.payload["content"].startswith("quantum") else None
        after = await eventually(reembedded)
        assert after.vector != before[0].vector
        assert first.payload["version"] < after.payload["version"]


async def test_delete_tombstones_node_and_removes_point(service) -> None:
    async with service.http() as http:
        mid = (await http.post("/memory", json={"content": "to be deleted"})).json()["memory_id"]
        await eventually(lambda: _point(service, mid))
        r = await http.delete(f"/memory/{mid}")
        assert r.status_code == 200 and r.json()["state"] == "DELETED"
        assert (await http.get(f"/memory/{mid}")).status_code == 404

        async def gone():
            return await _point(service, mid) is None
        await eventually(gone)
        node = await service.ctx.graph.memories.get(mid, service.scope)
        assert node is not None and node.content == "to be deleted"  # history kept
        r = await http.delete(f"/memory/{mid}?purge=true")
        assert r.status_code == 200
        assert await service.ctx.graph.memories.get(mid, service.scope) is None


async def test_associate_validates_and_creates_edges(service) -> None:
    async with service.http() as http:
        a = (await http.post("/memory", json={"content": "alpha"})).json()["memory_id"]
        b = (await http.post("/memory", json={"content": "beta"})).json()["memory_id"]
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "LEADS_TO", "strength": 0.7})
        assert r.status_code == 201 and r.json()["type"] == "LEADS_TO"
        assert (await http.post("/associate", json={"memory1_id": a, "memory2_id": a})).status_code == 400
        assert (await http.post("/associate", json={"memory1_id": a, "memory2_id": b,
                                                    "type": "SIMILAR_TO"})).status_code == 400
        r = await http.post("/associate", json={"associations": [
            {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO"},
            {"memory1_id": a, "memory2_id": "00000000-0000-0000-0000-000000000000"}]})
        assert r.status_code == 207 and r.json()["created_count"] == 1 and r.json()["failed_count"] == 1
        related = (await http.get(f"/memories/{a}/related")).json()
        assert {m["id"] for m in related["related_memories"]} == {b}


async def test_update_time_moves_and_version_increments(service) -> None:
    async with service.client() as client:
        m = await client.create_memory("versioned")
        u = await client.update_memory(m.id, importance=0.9)
        assert u.version == m.version + 1
        assert u.update_time.ToNanoseconds() > m.update_time.ToNanoseconds()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.update_memory(m.id, etag=m.version, importance=0.1)
        assert err.value.code() == grpc.StatusCode.ABORTED


async def test_health_reports_counts_and_connections(own_service) -> None:
    async with own_service.http() as http:
        await http.post("/memory", json={"content": "counted"})

        async def synced():
            body = (await http.get("/health")).json()
            return body if body["vector_count"] == 1 else None
        body = await eventually(synced)
        assert body["status"] == "healthy" and body["falkordb"] == "connected" and body["qdrant"] == "connected"
        assert body["memory_count"] == 1 and body["nats"] == "connected" and body["sync_status"] == "synced"
        assert body["vector_dimensions"] == 384


async def test_poison_event_is_parked_on_dead_letter_subject(service) -> None:
    from nats.js.api import DeliverPolicy

    bus = service.ctx.bus
    # The session's service shares its stream with every test: read only what arrives from now on.
    sub = await bus.js.subscribe(bus.subjects.dlq("enrich"), stream=bus.settings.stream_name,
                                 deliver_policy=DeliverPolicy.NEW)
    await bus.js.publish(bus.subjects.prefix + ".memory.created", b"\xff\xfenot a protobuf",
                         headers={"Nats-Msg-Id": "poison-1"})
    msg = await sub.next_msg(timeout=15)
    assert msg.data == b"\xff\xfenot a protobuf" and "undecodable" in msg.headers["Automem-Dlq-Reason"]
    await sub.unsubscribe()


async def test_ingest_request_without_update_mask_is_invalid(service) -> None:
    async with service.client() as client:
        m = await client.create_memory("mask")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.ingest.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(id=m.id))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "update_mask" in err.value.details()


class _BrokenProvider:
    """An embedding provider whose model always fails (a stand-in for a corrupt model file)."""

    name = "broken"
    dimension = 384

    def embed(self, texts):
        raise RuntimeError("model file is corrupt")


async def test_failing_embedding_is_retried_boundedly_then_parked_and_marked_failed(settings) -> None:
    from tests.conftest import start_service

    running = await start_service(settings.model_copy(update={"max_deliver": 2}))
    try:
        running.ctx.enrich_consumer.provider = _BrokenProvider()
        bus = running.ctx.bus
        dlq = await bus.js.subscribe(bus.subjects.dlq("enrich"), stream=bus.settings.stream_name)
        async with running.http() as http:
            mid = (await http.post("/memory", json={"content": "cannot be embedded"})).json()["memory_id"]
            msg = await dlq.next_msg(timeout=30)
            assert "model file is corrupt" in msg.headers["Automem-Dlq-Reason"]

            async def failed():
                m = (await http.get(f"/memory/{mid}")).json()["memory"]
                return m["embedding_status"] == "failed"
            await eventually(failed)
            # Still recallable through the graph arms.
            r = await http.get("/recall", params={"query": "cannot be embedded"})
            assert [h["id"] for h in r.json()["results"]] == [mid]
        await dlq.unsubscribe()
    finally:
        await running.runner.stop()
