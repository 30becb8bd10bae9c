"""Scopes and keys (issue 5): one project cannot see or touch another's memories, on REST,
gRPC and MCP; no request without a valid key gets anything but 401; a reader cannot write.

Keys are minted with the key store of the running service (and, in one test, with the
``automem keys`` command as a subprocess). Scope A is ``acme/web``, scope B ``globex/app``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
import pytest_asyncio
from google.protobuf import field_mask_pb2

from automem.common.client import AutomemClient
from automem.v1 import ingest_service_pb2, memory_pb2, recall_service_pb2, review_service_pb2
from tests.conftest import RunningService, eventually, start_service

REPO = Path(__file__).resolve().parents[2]
TOKEN = "scopes-root-token"
SCOPE_A = "acme/web"
SCOPE_B = "globex/app"

#: Routes that answer without a key: AutoMem's /health and the probes (automem/gateway/routes_ops.py).
OPEN_ROUTES = ("/health", "/livez", "/readyz")


@dataclass
class World:
    """A secured service, keys, and memories of scope B that scope A must never reach."""

    service: RunningService
    key_a: str
    key_b: str
    reader_a: str
    admin_a: str
    b_ids: list[str]  # b_ids[0] -RELATES_TO-> b_ids[1]; both tagged shared + critical
    a_id: str  # scope A memory, tagged shared

    def http(self, key: str | None, **headers: str) -> httpx.AsyncClient:
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return self.service.http(**headers)


async def _mint(service: RunningService, role: str, scopes: list[str], default: str) -> str:
    secret, _info = await service.ctx.keystore.create(role, scopes, default)
    return secret


@pytest_asyncio.fixture(loop_scope="session")
async def world(settings):
    running = await start_service(settings.model_copy(update={"api_token": TOKEN}))
    try:
        key_a = await _mint(running, "writer", ["acme/*"], SCOPE_A)
        key_b = await _mint(running, "writer", ["globex/*"], SCOPE_B)
        reader_a = await _mint(running, "reader", ["acme/*"], SCOPE_A)
        admin_a = await _mint(running, "admin", ["acme/*"], SCOPE_A)
        b_ids = []
        async with running.http(Authorization=f"Bearer {key_b}") as http:
            for text in ("Globex ships the quarterly zephyr report", "Globex zephyr report has a second part"):
                r = await http.post("/memory", json={"content": text, "tags": ["shared", "critical"],
                                                     "importance": 0.9})
                assert r.status_code == 201, r.text
                assert r.json()["scope"] == SCOPE_B
                b_ids.append(r.json()["memory_id"])
            r = await http.post("/associate", json={"memory1_id": b_ids[0], "memory2_id": b_ids[1]})
            assert r.status_code == 201, r.text
        async with running.http(Authorization=f"Bearer {key_a}") as http:
            r = await http.post("/memory", json={"content": "Acme prefers tabs", "tags": ["shared"]})
            assert r.status_code == 201, r.text
            assert r.json()["scope"] == SCOPE_A
            a_id = r.json()["memory_id"]
        yield World(running, key_a, key_b, reader_a, admin_a, b_ids, a_id)
    finally:
        await running.runner.stop()


async def _b_untouched(world: World) -> None:
    """Scope B's memories are as they were stored (version 0 or 1, ACTIVE, content kept)."""
    async with world.http(world.key_b) as http:
        for mid in world.b_ids:
            r = await http.get(f"/memory/{mid}")
            assert r.status_code == 200, r.text
            memory = r.json()["memory"]
            assert memory["state"] == "ACTIVE" and memory["scope"] == SCOPE_B
            assert memory["content"].startswith("Globex") and memory["superseded_by"] is None
            assert memory["metadata"] == {}
        r = await http.get(f"/memories/{world.b_ids[0]}/related")
        assert [m["id"] for m in r.json()["related_memories"]] == [world.b_ids[1]]


def _ids(items: list[dict]) -> set[str]:
    return {m.get("id") or m.get("memory_id") for m in items}


async def _routes(http: httpx.AsyncClient) -> set[tuple[str, str]]:
    schema = (await http.get("/openapi.json")).json()
    return {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}


# --- REST ------------------------------------------------------------------------------


async def test_rest_other_scope_answers_as_absent(world: World) -> None:
    b0, b1 = world.b_ids
    async with world.http(world.key_a) as http:
        routes = await _routes(http)
        for mid in world.b_ids:
            r = await http.get(f"/memory/{mid}")
            assert r.status_code == 404 and r.json()["status"] == "error", r.text
        r = await http.patch(f"/memory/{b0}", json={"content": "hijacked", "metadata": {"x": 1}})
        assert r.status_code == 404, r.text
        r = await http.patch(f"/memory/{b0}", json={"add_tags": ["x"]})
        assert r.status_code == 404, r.text
        r = await http.delete(f"/memory/{b0}")
        assert r.status_code == 404, r.text
        r = await http.post(f"/v1/memories/{b0}:supersede", json={"content": "replacement from A"})
        assert r.status_code == 404, r.text
        r = await http.post("/memory", json={"content": "replacement via /memory", "supersedes_memory_id": b0})
        assert r.status_code == 404, r.text
        # Relations across scopes are refused as if the other end did not exist, either way round.
        for pair in ((world.a_id, b0), (b0, world.a_id), (b0, b1)):
            r = await http.post("/associate", json={"memory1_id": pair[0], "memory2_id": pair[1]})
            assert r.status_code == 404, r.text
        r = await http.post("/associate", json={"associations": [{"memory1_id": world.a_id, "memory2_id": b0}]})
        assert r.status_code == 404 and r.json()["failed_count"] == 1 and r.json()["created_count"] == 0
        r = await http.get(f"/memories/{b0}/related")
        assert r.status_code == 404, r.text
        r = await http.get(f"/memories/{world.a_id}/related")
        assert r.status_code == 200 and r.json()["related_memories"] == []
        # Reads that list: only scope A.
        for params in ({"query": "Globex zephyr quarterly report"}, {}, {"tags": "shared"},
                       {"query": "zephyr", "state_mode": "history"}, {"query": "zephyr", "expand_relations": "true"}):
            r = await http.get("/recall", params=params)
            assert r.status_code == 200, r.text
            assert not (_ids([x["memory"] for x in r.json()["results"]]) & set(world.b_ids)), params
        r = await http.get("/memory/by-tag", params={"tags": ["shared", "critical"]})
        assert r.status_code == 200 and _ids(r.json()["memories"]) == {world.a_id}
        r = await http.get("/startup-recall")
        assert r.status_code == 200 and r.json()["critical_lessons"] == [] and r.json()["has_critical"] is False
        # History and export, where the routes exist.
        for method, path in routes:
            if "history" in path and "{" in path and method == "GET":
                r = await http.get(path.replace("{memory_id}", b0).replace("{id}", b0))
                assert r.status_code == 404 or not r.json().get("events"), (path, r.text)
        if ("GET", "/backup") in routes:
            async with world.http(world.admin_a) as admin:
                r = await admin.get("/backup")
            assert r.status_code in (200, 403), r.text
            if r.status_code == 200:
                assert "Globex" not in r.text and world.b_ids[0] not in r.text
        # Delete by tag touches only the caller's scope.
        r = await http.delete("/memory/by-tag", params={"tags": ["shared"]})
        assert r.status_code == 200 and r.json()["memory_ids"] == [world.a_id], r.text
    await _b_untouched(world)


async def test_rest_scope_header_outside_key_is_403(world: World) -> None:
    async with world.http(world.key_a, **{"X-Automem-Scope": SCOPE_B}) as http:
        assert (await http.get(f"/memory/{world.b_ids[0]}")).status_code == 403
        assert (await http.get("/recall", params={"query": "zephyr"})).status_code == 403
        assert (await http.post("/memory", json={"content": "into B"})).status_code == 403
        # Even an invalid request: the scope is refused before the body is judged.
        assert (await http.post("/memory", json={"nope": 1})).status_code == 403
    async with world.http(world.key_a) as http:
        r = await http.post("/memory", json={"content": "into B by body", "scope": SCOPE_B})
        assert r.status_code == 403 and "scope" in r.json()["error"]
        # Another scope inside the key's patterns is fine.
        r = await http.post("/memory", json={"content": "Acme mobile note"}, headers={"X-Automem-Scope": "acme/mobile"})
        assert r.status_code == 201 and r.json()["scope"] == "acme/mobile"
        assert (await http.get(f"/memory/{r.json()['memory_id']}")).status_code == 404  # default scope acme/web
    await _b_untouched(world)


async def _each_refused(world: World, cases: list[tuple[str, list[tuple[str, str]]]]) -> None:
    """Each ``(message, headers)``: a read, a recall, a store, an invalid store and an /mcp call
    with those headers answer 400 with ``message``, and nothing is written in either scope."""
    graph = world.service.ctx.graph
    before = [await graph.memories.count(scope) for scope in (SCOPE_A, SCOPE_B)]
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        for message, headers in cases:
            answers = {
                "get": await http.get(f"/memory/{world.a_id}", headers=headers),
                "recall": await http.get("/recall", params={"query": "Acme tabs"}, headers=headers),
                "store": await http.post("/memory", json={"content": f"stored despite {message}"}, headers=headers),
                "invalid store": await http.post("/memory", json={"nope": 1}, headers=headers),
                "mcp": await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                       headers=[*headers, ("Accept", "application/json, text/event-stream")]),
            }
            for what, r in answers.items():
                assert r.status_code == 400, (message, headers, what, r.text)
                assert r.json() == {"status": "error", "error": message, "message": message, "code": 400}, what
    assert [await graph.memories.count(scope) for scope in (SCOPE_A, SCOPE_B)] == before


async def test_rest_and_mcp_refuse_a_key_or_scope_header_sent_twice(world: World) -> None:
    """A request carrying ``X-Automem-Scope``, ``Authorization`` or ``X-API-Key`` twice was
    served with the first copy, silently: which one the caller meant is a guess, so it is
    refused with 400 naming the header (equal copies too), and nothing is read or written."""
    a, b = f"Bearer {world.key_a}", f"Bearer {world.key_b}"
    cases = [
        ("X-Automem-Scope", [("Authorization", a), ("X-Automem-Scope", SCOPE_A), ("X-Automem-Scope", SCOPE_B)]),
        ("X-Automem-Scope", [("Authorization", a), ("X-Automem-Scope", SCOPE_A), ("X-Automem-Scope", SCOPE_A)]),
        ("Authorization", [("Authorization", a), ("Authorization", b)]),
        ("X-API-Key", [("X-API-Key", world.key_a), ("X-API-Key", world.key_b)]),
    ]
    await _each_refused(world, [(f"{name}: given 2 times; send it once", headers) for name, headers in cases])
    # Sent once, each is served as before.
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        for headers in ([("Authorization", a), ("X-Automem-Scope", SCOPE_A)], [("X-API-Key", world.key_a)]):
            r = await http.get(f"/memory/{world.a_id}", headers=headers)
            assert r.status_code == 200 and r.json()["memory"]["content"] == "Acme prefers tabs", r.text


async def test_rest_and_mcp_refuse_a_key_and_its_alias_header_carrying_different_keys(world: World) -> None:
    """``Authorization: Bearer X`` with ``X-API-Key: Y`` (and ``X-Admin-Token`` with
    ``X-Admin-Api-Key``) was served with the first header, silently: refused with 400 naming
    both, and nothing is read or written. Equal values stay accepted: some clients send both."""
    a = f"Bearer {world.key_a}"
    key_message = "Authorization and X-API-Key carry different keys; send one"
    admin_message = "X-Admin-Token and X-Admin-Api-Key carry different keys; send one"
    cases = [
        (key_message, [("Authorization", a), ("X-API-Key", world.key_b)]),
        (key_message, [("Authorization", f"Bearer {world.key_b}"), ("X-API-Key", world.key_a)]),
        (admin_message, [("Authorization", a), ("X-Admin-Token", TOKEN), ("X-Admin-Api-Key", TOKEN + "x")]),
    ]
    await _each_refused(world, cases)
    # The same key in both headers is served as before.
    async with httpx.AsyncClient(base_url=world.service.url, timeout=30) as http:
        for headers in ([("Authorization", a), ("X-API-Key", world.key_a)],
                        [("Authorization", a), ("X-Admin-Token", TOKEN), ("X-Admin-Api-Key", TOKEN)]):
            r = await http.get(f"/memory/{world.a_id}", headers=headers)
            assert r.status_code == 200 and r.json()["memory"]["content"] == "Acme prefers tabs", r.text


async def test_rest_reader_cannot_write(world: World) -> None:
    async with world.http(world.reader_a) as http:
        assert (await http.get(f"/memory/{world.a_id}")).status_code == 200
        assert (await http.get("/recall", params={"query": "tabs"})).status_code == 200
        writes = [
            http.post("/memory", json={"content": "reader write"}),
            http.post("/memory/batch", json={"memories": [{"content": "reader batch"}]}),
            http.patch(f"/memory/{world.a_id}", json={"importance": 0.1}),
            http.delete(f"/memory/{world.a_id}"),
            http.delete("/memory/by-tag", params={"tags": ["shared"]}),
            http.post(f"/v1/memories/{world.a_id}:supersede", json={"content": "reader supersede"}),
            http.post("/associate", json={"memory1_id": world.a_id, "memory2_id": world.a_id + "x"}),
            http.post("/consolidate", json={"mode": "decay", "dry_run": False}),
        ]
        for pending in writes:
            r = await pending
            assert r.status_code == 403, (r.request.method, r.request.url, r.text)
            assert r.json()["status"] == "error"
    async with world.http(world.key_a) as http:  # nothing changed
        r = await http.get(f"/memory/{world.a_id}")
        assert r.json()["memory"]["importance"] == 0.5 and r.json()["memory"]["state"] == "ACTIVE"


async def test_rest_purge_stays_in_the_callers_scope(world: World) -> None:
    """An admin of acme/* cannot purge (or preview a purge of) a globex memory, nor purge
    globex/app; purging its own scope leaves scope B as it was (docs/purge.md)."""
    b0 = world.b_ids[0]
    async with world.http(world.admin_a) as http:
        for body in ({"dry_run": True}, {}):
            assert (await http.post(f"/v1/memories/{b0}:purge", json=body)).status_code == 404
        r = await http.post("/v1/scope:purge", json={"confirm_scope": SCOPE_B}, headers={"X-Automem-Scope": SCOPE_B})
        assert r.status_code == 403, r.text
        r = await http.post("/v1/scope:purge", json={"confirm_scope": SCOPE_B})
        assert r.status_code == 400 and "confirm_scope" in r.text
        r = await http.post("/v1/scope:purge", json={"confirm_scope": SCOPE_A, "reason": "tenant left"})
        assert r.status_code == 200 and r.json()["purge"]["counts"]["memories"] == 1, r.text
        assert (await http.get(f"/memory/{world.a_id}")).status_code == 404
        assert (await http.get("/v1/purges", headers={"X-Automem-Scope": SCOPE_B})).status_code == 403
    async with world.http(world.key_b) as http:
        assert (await http.get(f"/v1/memories/{b0}/history")).json()["events"][0]["type"] == "EVENT_TYPE_MEMORY_CREATED"
    await _b_untouched(world)


async def test_rest_every_route_needs_a_valid_key(world: World) -> None:
    """Sweep every route of the OpenAPI schema (plus an unknown route, an oversized body and
    a malformed body) with no key, a wrong key, a revoked key and a query-string key: 401."""
    revoked = await _mint(world.service, "admin", ["*"], "default")
    key_id = revoked.split("_")[1]
    await world.service.ctx.keystore.revoke(key_id)
    async with world.http(None) as http:
        routes = await _routes(http)
    assert len(routes) >= 15
    bad_credentials = [{}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"},
                       {"Authorization": f"Bearer {revoked}"}, {"Authorization": "Basic Zm9vOmJhcg=="}]
    checked = 0
    for headers in bad_credentials:
        async with world.service.http(**headers) as http:
            for method, path in sorted(routes):
                if path in OPEN_ROUTES:
                    continue
                url = path.replace("{memory_id}", world.a_id).replace("{id}", world.a_id)
                for body in (None, {}, {"content": "x"}, "not json"):
                    kwargs = {"content": body} if isinstance(body, str) else ({"json": body} if body is not None else {})
                    r = await http.request(method, url, **kwargs)
                    assert r.status_code == 401, (headers, method, path, body, r.status_code, r.text)
                    assert r.json()["status"] == "error"
                    checked += 1
            for method, url in (("GET", "/no/such/route"), ("PUT", "/memory"), ("GET", "/memory/by-tag")):
                r = await http.request(method, url)
                assert r.status_code == 401, (headers, method, url, r.status_code, r.text)
            r = await http.post("/memory", content=b"x" * (world.service.settings.max_body_bytes + 1),
                                headers={"Content-Type": "application/json"})
            assert r.status_code == 401, r.text
    assert checked > 100
    # A valid key in the query string is refused (AUTOMEM_ALLOW_QUERY_TOKEN is off).
    async with world.http(None) as http:
        r = await http.get(f"/memory/{world.a_id}", params={"api_key": world.key_a})
        assert r.status_code == 401 and "query string" in r.json()["error"]
        r = await http.post("/memory", params={"api_key": world.key_a}, json={"content": "via query"})
        assert r.status_code == 401
    # Also beside a key header (break-it review: it was ignored there, the secret left in the URL).
    async with world.http(world.key_a) as http:
        r = await http.get(f"/memory/{world.a_id}", params={"api_key": world.key_b})
        assert r.status_code == 401 and "query string" in r.json()["error"], r.text
    # So is AutoMem's ?admin_token= (it was ignored: the call ran without the admin token).
    async with world.http(TOKEN) as http:
        r = await http.post("/admin/sync", params={"admin_token": "anything", "dry_run": "true"})
        assert r.status_code == 401 and "admin_token in the query string" in r.json()["error"], r.text
    # /health and the probes need no key and tell nothing scope-specific.
    async with world.http(None) as http:
        for path in OPEN_ROUTES:
            r = await http.get(path)
            assert r.status_code == 200, (path, r.text)
            assert world.a_id not in r.text and "secret" not in r.text


async def test_the_public_probes_answer_bad_input_with_400_without_a_key(world: World) -> None:
    """The probes answer without a key, but bytes that are not UTF-8 in their query got 401
    "missing or invalid API key" instead of the 400 naming the parameter; a route that
    needs a key still answers 401 first."""
    async with world.http(None) as http:
        for path in OPEN_ROUTES:
            r = await http.get(f"{path}?probe=%ff")
            assert r.status_code == 400 and r.json()["error"].startswith("probe: "), (path, r.text)
            assert (await http.get(path)).status_code in (200, 503), path
        assert (await http.get("/recall?query=%ff")).status_code == 401


async def test_rest_automem_token_is_one_principal_on_the_default_scope(world: World) -> None:
    async with world.http(TOKEN) as http:
        r = await http.post("/memory", json={"content": "Stored with the AutoMem token", "tags": ["token"]})
        assert r.status_code == 201 and r.json()["scope"] == "default"
        token_id = r.json()["memory_id"]
        assert (await http.get(f"/memory/{world.b_ids[0]}")).status_code == 404
        r = await http.get("/memory/by-tag", params={"tags": "shared"})
        assert r.json()["memories"] == []
    async with world.http(world.key_a) as http:
        assert (await http.get(f"/memory/{token_id}")).status_code == 404
    async with world.http(None, **{"X-API-Key": TOKEN}) as http:
        assert (await http.get(f"/memory/{token_id}")).status_code == 200


async def test_query_token_accepted_when_enabled(settings) -> None:
    admin = "admin-" + TOKEN
    running = await start_service(settings.model_copy(update={"api_token": TOKEN, "allow_query_token": True,
                                                              "admin_token": admin}))
    try:
        async with running.http() as http:
            r = await http.post("/memory", params={"api_key": TOKEN}, json={"content": "query token ok"})
            assert r.status_code == 201, r.text
            assert (await http.get(f"/memory/{r.json()['memory_id']}", params={"api_key": "wrong"})).status_code == 401
            assert (await http.get("/recall")).status_code == 401
            # AutoMem's admin routes take the admin token as ?admin_token= too (auth_helpers.py).
            r = await http.get("/v1/apiKeys", params={"api_key": TOKEN})
            assert r.status_code == 403, r.text
            r = await http.get("/v1/apiKeys", params={"api_key": TOKEN, "admin_token": admin})
            assert r.status_code == 200, r.text
            # Beside a header, a query token must be the header's key.
            r = await http.get("/v1/apiKeys", params={"api_key": TOKEN, "admin_token": admin},
                               headers={"Authorization": f"Bearer {TOKEN}", "X-Admin-Token": admin})
            assert r.status_code == 200, r.text
            r = await http.get("/recall", params={"api_key": "other"}, headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 400 and "api_key" in r.text, r.text
            r = await http.get("/v1/apiKeys", params={"admin_token": "other"},
                               headers={"Authorization": f"Bearer {TOKEN}", "X-Admin-Token": admin})
            assert r.status_code == 400 and "admin_token" in r.text, r.text
    finally:
        await running.runner.stop()


# --- gRPC ------------------------------------------------------------------------------


def _md(key: str | None, scope: str = "") -> list[tuple[str, str]]:
    md = [("authorization", f"Bearer {key}")] if key else []
    if scope:
        md.append(("x-automem-scope", scope))
    return md


async def _code(awaitable) -> grpc.StatusCode:
    try:
        await awaitable
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def test_grpc_other_scope_answers_as_absent(world: World) -> None:
    b0, b1 = world.b_ids
    nf = grpc.StatusCode.NOT_FOUND
    async with AutomemClient.connect(world.service.grpc) as client:
        ing, rec = client.ingest, client.recall
        md = _md(world.key_a)
        item = ingest_service_pb2.MemoryInput(content="hijack", metadata_json='{"x": 1}', metadata_set=True)
        history = recall_service_pb2.ReadOptions(state_mode=recall_service_pb2.STATE_MODE_HISTORY)
        assert await _code(rec.GetMemory(recall_service_pb2.GetMemoryRequest(id=b0, read=history), metadata=md)) == nf
        assert await _code(rec.GetMemory(recall_service_pb2.GetMemoryRequest(id=b0), metadata=md)) == nf
        assert await _code(ing.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(
            id=b0, memory=item, update_mask=field_mask_pb2.FieldMask(paths=["content", "metadata"])),
            metadata=md)) == nf
        assert await _code(ing.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(id=b0, add_tags=["x"]),
                                            metadata=md)) == nf
        assert await _code(ing.DeleteMemory(ingest_service_pb2.DeleteMemoryRequest(id=b0), metadata=md)) == nf
        assert await _code(ing.SupersedeMemory(ingest_service_pb2.SupersedeMemoryRequest(
            id=b0, replacement=ingest_service_pb2.MemoryInput(content="replacement")), metadata=md)) == nf
        for a, b in ((world.a_id, b0), (b0, world.a_id), (b0, b1)):
            assert await _code(ing.CreateRelation(ingest_service_pb2.CreateRelationRequest(
                relation=memory_pb2.Relation(source_id=a, target_id=b, strength=0.5)), metadata=md)) == nf
        assert await _code(rec.ListRelatedMemories(recall_service_pb2.ListRelatedMemoriesRequest(id=b0),
                                                   metadata=md)) == nf
        found = await rec.SearchMemories(recall_service_pb2.SearchMemoriesRequest(
            query="Globex zephyr quarterly report", limit=20), metadata=md)
        assert not {r.memory.id for r in found.results} & set(world.b_ids)
        listed = await rec.ListMemoriesByTag(recall_service_pb2.ListMemoriesByTagRequest(tags=["critical"]),
                                             metadata=md)
        assert list(listed.memories) == []
        startup = await rec.StartupRecall(recall_service_pb2.StartupRecallRequest(), metadata=md)
        assert list(startup.critical_lessons) == [] and list(startup.system_rules) == []
        code = await _code(client.review.ListMemoryEvents(review_service_pb2.ListMemoryEventsRequest(id=b0),
                                                          metadata=md))
        assert code in (nf, grpc.StatusCode.OK, grpc.StatusCode.UNIMPLEMENTED)
        # Naming scope B, in the request field or in metadata, is refused.
        for request_md, scope_field in ((_md(world.key_a, SCOPE_B), ""), (md, SCOPE_B)):
            code = await _code(rec.GetMemory(recall_service_pb2.GetMemoryRequest(id=b0, scope=scope_field),
                                             metadata=request_md))
            assert code == grpc.StatusCode.PERMISSION_DENIED
            code = await _code(ing.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="into B"), scope=scope_field), metadata=request_md))
            assert code == grpc.StatusCode.PERMISSION_DENIED
            code = await _code(ing.DeleteMemoriesByTag(ingest_service_pb2.DeleteMemoriesByTagRequest(
                tags=["shared"], scope=scope_field), metadata=request_md))
            assert code == grpc.StatusCode.PERMISSION_DENIED
        # Delete by tag in A touches only A.
        gone = await ing.DeleteMemoriesByTag(ingest_service_pb2.DeleteMemoriesByTagRequest(tags=["critical", "shared"]),
                                             metadata=md)
        assert set(gone.memory_ids) <= {world.a_id}
    await _b_untouched(world)


async def test_grpc_keys_and_roles_are_checked_by_the_services(world: World) -> None:
    """The interceptor itself checks the key: no gateway in between."""
    async with AutomemClient.connect(world.service.grpc) as client:
        get = recall_service_pb2.GetMemoryRequest(id=world.a_id)
        for md in ([], _md("wrong"), [("x-api-key", "wrong")], _md(TOKEN + "x")):
            assert await _code(client.recall.GetMemory(get, metadata=md)) == grpc.StatusCode.UNAUTHENTICATED
            assert await _code(client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(query="x"),
                                                            metadata=md)) == grpc.StatusCode.UNAUTHENTICATED
        assert await _code(client.recall.GetMemory(get, metadata=[("x-api-key", world.key_a)])) == grpc.StatusCode.OK
        reader = _md(world.reader_a)
        assert await _code(client.recall.GetMemory(get, metadata=reader)) == grpc.StatusCode.OK
        denied = grpc.StatusCode.PERMISSION_DENIED
        assert await _code(client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
            memory=ingest_service_pb2.MemoryInput(content="reader")), metadata=reader)) == denied
        assert await _code(client.ingest.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(
            id=world.a_id, add_tags=["r"]), metadata=reader)) == denied
        assert await _code(client.ingest.DeleteMemory(ingest_service_pb2.DeleteMemoryRequest(id=world.a_id),
                                                      metadata=reader)) == denied
        # A writer cannot purge (admin); an admin limited to acme/* cannot check sync of every scope.
        assert await _code(client.ingest.DeleteMemory(ingest_service_pb2.DeleteMemoryRequest(
            id=world.a_id, purge=True), metadata=_md(world.key_a))) == denied
        from automem.v1 import consolidate_service_pb2

        assert await _code(client.consolidate.CheckSync(consolidate_service_pb2.CheckSyncRequest(),
                                                        metadata=_md(world.admin_a))) == denied
        # A revoked key stops working at once.
        secret = await _mint(world.service, "writer", ["acme/*"], SCOPE_A)
        assert await _code(client.recall.GetMemory(get, metadata=_md(secret))) == grpc.StatusCode.OK
        await world.service.ctx.keystore.revoke(secret.split("_")[1])
        assert await _code(client.recall.GetMemory(get, metadata=_md(secret))) == grpc.StatusCode.UNAUTHENTICATED


async def test_enrichment_status_names_memories_only_to_a_key_of_every_scope(world: World) -> None:
    """``/enrichment/status`` (and the open GetEnrichmentStatus RPC) answered the id of the
    memory enriched last, of any scope: a reader of acme/* read globex's memory ids there.
    The id and the last error are answered only to a key that sees every scope now."""
    from automem.v1 import enrich_service_pb2

    async def last_id(key: str) -> str | None:
        async with world.http(key) as http:
            r = await http.get("/enrichment/status")
            assert r.status_code == 200, r.text
            return r.json()["stats"]["last_success_id"]

    async with world.http(world.key_b) as http:
        r = await http.post("/memory", json={"content": "Globex enrichment probe: the zephyr report moved"})
        assert r.status_code == 201, r.text
    await eventually(lambda: last_id(TOKEN), timeout=30)
    for key in (world.reader_a, world.admin_a, world.key_b):
        assert await last_id(key) is None, key
    async with AutomemClient.connect(world.service.grpc) as client:
        request = enrich_service_pb2.GetEnrichmentStatusRequest()
        for md in ([], _md("wrong"), _md(world.admin_a)):
            stats = (await client.enrich.GetEnrichmentStatus(request, metadata=md)).stats
            assert stats.successes >= 1 and stats.last_success_id == "" and stats.HasField("last_success_time")
        assert (await client.enrich.GetEnrichmentStatus(request, metadata=_md(TOKEN))).stats.last_success_id


async def test_whoami_names_the_caller_and_checks_the_scope_it_asks_for(world: World) -> None:
    """The gateway's credentials check (RecallService.WhoAmI): the key's principal, role and
    scopes, the scope a request would act on, and the same refusals every RPC gives."""
    async with AutomemClient.connect(world.service.grpc) as client:
        me = await client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(), metadata=_md(world.reader_a))
        assert me.role == "reader" and list(me.scopes) == ["acme/*"] and me.scope == SCOPE_A and me.principal
        asked = await client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(),
                                           metadata=_md(world.key_a, "acme/other"))
        assert asked.role == "writer" and asked.scope == "acme/other"
        assert await _code(client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(scope=SCOPE_B),
                                                metadata=_md(world.key_a))) == grpc.StatusCode.PERMISSION_DENIED
        assert await _code(client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(),
                                                metadata=_md(world.key_a, SCOPE_B))) == grpc.StatusCode.PERMISSION_DENIED
        for md in ([], _md("wrong")):
            assert await _code(client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(),
                                                    metadata=md)) == grpc.StatusCode.UNAUTHENTICATED
    # The gateway asks it before answering an error of its own: a 404 route, a 400 body.
    async with world.http(world.key_a, **{"X-Automem-Scope": SCOPE_B}) as http:
        assert (await http.get("/no/such/route")).status_code == 403
        assert (await http.post("/memory", json={"tags": ["no content"]})).status_code == 403
    async with world.http(world.key_a) as http:
        assert (await http.get("/no/such/route")).status_code == 404
        assert (await http.post("/memory", json={"tags": ["no content"]})).status_code == 400


# --- MCP -------------------------------------------------------------------------------


async def test_mcp_other_scope_answers_as_absent(world: World) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = world.service.url + "/mcp"
    headers = {"Authorization": f"Bearer {world.key_a}"}
    async with Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))) as client:
        b0 = world.b_ids[0]
        for tool, args in (("recall_memory", {"memory_id": b0}),
                           ("update_memory", {"memory_id": b0, "content": "hijack"}),
                           ("delete_memory", {"memory_id": b0}),
                           ("store_memory", {"content": "replacement", "supersedes_memory_id": b0}),
                           ("associate_memories", {"memory1_id": world.a_id, "memory2_id": b0})):
            result = await client.call_tool(tool, args)
            assert result.is_error and "not found" in result.content[0].text.lower(), (tool, result.content)
        result = await client.call_tool("recall_memory", {"query": "Globex zephyr quarterly report",
                                                          "format": "json"})
        assert not result.is_error
        assert b0 not in json.dumps(result.structured_content), result.structured_content
        result = await client.call_tool("recall_memory", {"tags": ["critical"], "exhaustive": True, "format": "json"})
        assert b0 not in json.dumps(result.structured_content)
    # Without a valid key the MCP endpoint answers 401 over HTTP.
    for bad in ({}, {"Authorization": "Bearer wrong"}):
        async with world.service.http(**bad) as http:
            r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                headers={"Accept": "application/json, text/event-stream"})
            assert r.status_code == 401, r.text
    await _b_untouched(world)


# --- the CLI ---------------------------------------------------------------------------


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "automem.cli", "keys", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


async def test_cli_keys_create_list_revoke(settings) -> None:
    env = {**os.environ, "FALKORDB_HOST": settings.falkordb_host, "FALKORDB_PORT": str(settings.falkordb_port),
           "FALKORDB_GRAPH": settings.graph_name, "AUTOMEM_LOG_LEVEL": "WARNING"}
    env.pop("AUTOMEM_API_TOKEN", None)
    created = _cli(env, "create", "--role", "writer", "--scope", "acme/*")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()
    assert secret.startswith("am_") and len(secret.splitlines()) == 1
    assert "shown once" in created.stderr and secret not in created.stderr
    key_id = secret.split("_")[1]
    bad = _cli(env, "create", "--role", "writer", "--scope", "acme/*", "--default-scope", "globex/app")
    assert bad.returncode != 0
    listed = _cli(env, "list")
    assert listed.returncode == 0 and secret not in listed.stdout
    row = next(line.split("\t") for line in listed.stdout.splitlines() if line.startswith(key_id))
    assert row[1:5] == ["writer", "acme/*", "acme/default", "active"]
    # Only the hash is stored.
    running = await start_service(settings)
    try:
        rows = await running.ctx.graph.ro_query("MATCH (k:ApiKey) RETURN properties(k)")
        assert secret not in json.dumps(rows) and len(rows) == 1
        async with running.http(Authorization=f"Bearer {secret}") as http:
            r = await http.post("/memory", json={"content": "stored with a CLI key"})
            assert r.status_code == 201 and r.json()["scope"] == "acme/default"
            assert (await http.post("/memory", json={"content": "x"},
                                    headers={"X-Automem-Scope": "globex/app"})).status_code == 403
        async with running.http() as http:  # keys exist: the service is no longer open
            assert (await http.get("/recall")).status_code == 401
        revoked = _cli(env, "revoke", key_id)
        assert revoked.returncode == 0 and key_id in revoked.stdout
        assert _cli(env, "revoke", "nosuchkey").returncode != 0
        assert "revoked" in _cli(env, "list").stdout

        async def refused() -> bool:
            async with running.http(Authorization=f"Bearer {secret}") as http:
                return (await http.get("/recall")).status_code == 401
        await eventually(refused, timeout=10)
    finally:
        await running.runner.stop()


@pytest.mark.parametrize("pattern,scope,allowed", [
    ("acme/*", "acme/web", True), ("acme/*", "acme", False), ("acme/*", "acmex/web", False),
    ("acme/web", "acme/web", True), ("acme/web", "acme/web2", False), ("*", "anything/at/all", True),
])
def test_scope_patterns(pattern: str, scope: str, allowed: bool) -> None:
    from automem.common.auth import Principal

    assert Principal("k", "writer", (pattern,), "acme/web").allows(scope) is allowed


async def test_key_checks_are_remembered_briefly_and_revocation_still_takes_effect(settings) -> None:
    """Issue 10: each gRPC call's key check was one graph query. The key store remembers a
    check for ``CACHE_SECONDS`` (a clock of the test's own, no waiting): a repeated check reads
    no graph; a key revoked through the same store is refused at once, one revoked by another
    process (here another store on the same graph, as ``automem keys revoke`` does) once the
    remembered answer expires; the first key created elsewhere closes an open service the same way."""
    from automem.common.keys import KeyStore
    from automem.graph import GraphStore

    graph = GraphStore(settings)
    await graph.ensure_schema()
    now = [1000.0]
    store = KeyStore(graph, clock=lambda: now[0])
    other = KeyStore(graph)  # another process's store (the CLI's)
    reads: list[str] = []
    find_live, count = graph.keys.find_live, graph.keys.count

    async def counted_find(digest):
        reads.append("find_live")
        return await find_live(digest)

    async def counted_count():
        reads.append("count")
        return await count()

    graph.keys.find_live, graph.keys.count = counted_find, counted_count
    try:
        assert await store.any_keys() is False
        secret, _ = await other.create("writer", ["acme/*"], "acme/web")
        assert await store.any_keys() is False  # remembered: the open answer holds until it expires
        now[0] += KeyStore.CACHE_SECONDS + 0.01
        assert await store.any_keys() is True
        reads.clear()
        first = await store.lookup(secret)
        assert first is not None and first.role == "writer"
        for _ in range(5):
            assert await store.lookup(secret) == first
            assert await store.any_keys() is True
        assert reads == ["find_live"], reads  # one graph read for six checks
        # Revoked by another process: refused once the remembered answer expires.
        await other.revoke(secret.split("_")[1])
        now[0] += KeyStore.CACHE_SECONDS + 0.01
        assert await store.lookup(secret) is None
        # Revoked through this store: refused at once, cached answer or not.
        second, _ = await store.create("reader", ["acme/*"], "acme/web")
        assert await store.lookup(second) is not None
        assert await store.lookup(second) is not None
        await store.revoke(second.split("_")[1])
        assert await store.lookup(second) is None
        assert await store.any_keys() is True  # revoked keys still count: the service stays closed
    finally:
        await graph.close()


async def test_a_key_revoked_mid_stream_gets_no_more_events_and_the_stream_ends(world: World) -> None:
    """Break-it review: a key's open ``/stream`` (ReviewService.StreamMemoryEvents under it)
    was authenticated once, when it opened, and went on receiving its scope's events after the
    key was revoked — content previews, for good — while every other call refused the key.
    The stream now checks the key before each event and every second while idle: it ends
    with a final ``stream.unauthorized`` event, and the gRPC stream with UNAUTHENTICATED."""
    from httpx_sse import aconnect_sse

    from automem.v1 import event_stream_pb2

    reader = await _mint(world.service, "reader", ["acme/*"], SCOPE_A)
    async with world.http(reader) as http, world.http(world.key_a) as writer, \
            aconnect_sse(http, "GET", "/stream") as source:
        events = source.aiter_sse()
        r = await writer.post("/memory", json={"content": "Acme stream probe before the revoke"})
        assert r.status_code == 201, r.text
        before = r.json()["memory_id"]
        while (first := json.loads((await asyncio.wait_for(anext(events), 30)).data))["data"].get("id") != before:
            pass
        await world.service.ctx.keystore.revoke(reader.split("_")[1])
        r = await writer.post("/memory", json={"content": "Acme secret written after the revoke"})
        assert r.status_code == 201, r.text
        rest = []
        async for sse in events:  # ends: the service ends the stream
            rest.append((sse.event, json.loads(sse.data)))
    assert first["type"] == "memory.store"
    assert rest and rest[-1][1]["type"] == "stream.unauthorized", rest
    assert "after the revoke" not in json.dumps(rest) and r.json()["memory_id"] not in json.dumps(rest)
    # Over gRPC: idle, the stream ends within its next check.
    secret = await _mint(world.service, "reader", ["acme/*"], SCOPE_A)
    async with AutomemClient.connect(world.service.grpc) as client:
        call = client.review.StreamMemoryEvents(event_stream_pb2.StreamMemoryEventsRequest(), metadata=_md(secret))
        await call.initial_metadata()
        await world.service.ctx.keystore.revoke(secret.split("_")[1])
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            async for _ in call:
                pass
        assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_mcp_refuses_a_revoked_key_after_the_gateways_short_memory_of_it(world: World) -> None:
    """Break-it review: ``/mcp`` remembered a successful key check for 5 s, so a revoked key
    opened MCP sessions for 5 s against the README's 2 s. The gateway remembers it for
    ``AUTH_CACHE_SECONDS`` (1 s) now; past it the key gets 401."""
    from automem.gateway.deps import AUTH_CACHE_SECONDS

    secret = await _mint(world.service, "writer", ["acme/*"], SCOPE_A)
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "revoke-probe", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with world.http(secret, **headers) as http:
        assert (await http.post("/mcp", json=body)).status_code == 200
        await world.service.ctx.keystore.revoke(secret.split("_")[1])
        await asyncio.sleep(AUTH_CACHE_SECONDS + 0.1)
        assert (await http.post("/mcp", json=body)).status_code == 401
    assert AUTH_CACHE_SECONDS <= 2.0


async def test_a_revoked_keys_open_mcp_event_stream_ends(world: World) -> None:
    """Break-it review: a key's open ``GET /mcp`` (streamable HTTP's server-to-client event
    stream) stayed open indefinitely after the key was revoked, while ``/stream`` ends at
    once. The gateway checks its key every second now and ends it, saying why."""
    secret = await _mint(world.service, "reader", ["acme/*"], SCOPE_A)
    async with world.http(secret, Accept="text/event-stream") as http, http.stream("GET", "/mcp") as response:
        assert response.status_code == 200, await response.aread()
        await world.service.ctx.keystore.revoke(secret.split("_")[1])
        received = b""
        chunks = response.aiter_bytes()
        # Ends: a stream left open (it sends keep-alive pings) fails here instead of blocking the suite.
        async with asyncio.timeout(30):
            async for chunk in chunks:
                received += chunk
    assert b"the key was revoked" in received


async def test_grpc_refuses_credentials_or_a_scope_given_twice(world: World) -> None:
    """Break-it review: over gRPC a second ``authorization`` (or ``x-automem-scope``) value was
    served in place of the first, and ``authorization`` with a different ``x-api-key`` served
    the first: a key or scope the caller may not have meant, where REST refuses both (400).
    INVALID_ARGUMENT naming the metadata key now; equal keys in both headers pass."""
    get = recall_service_pb2.GetMemoryRequest(id=world.a_id)
    async with AutomemClient.connect(world.service.grpc) as client:
        for metadata, key in (
                ([("authorization", f"Bearer {world.key_b}"), ("authorization", f"Bearer {world.key_a}")],
                 "authorization"),
                ([*_md(world.key_a, SCOPE_A), ("x-automem-scope", "acme/other")], "x-automem-scope"),
                ([("authorization", f"Bearer {world.key_a}"), ("x-api-key", world.key_b)], "authorization")):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await client.recall.GetMemory(get, metadata=metadata)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
            assert refused.value.details().startswith(f"{key}:"), refused.value.details()
        same = [("authorization", f"Bearer {world.key_a}"), ("x-api-key", world.key_a)]
        assert (await client.recall.GetMemory(get, metadata=same)).memory.id == world.a_id
