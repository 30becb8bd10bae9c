"""The MCP server (automem/gateway/mcp_server.py) against a real running automem, with the mcp SDK's
client: streamable HTTP at ``/mcp`` of the gateway, and ``automem mcp`` over stdio."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from pathlib import Path

import httpx
import pytest_asyncio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from automem.v1 import memory_pb2
from tests.conftest import eventually, settings_for, start_service

TOKEN = "mcp-test-token"
TOOLS = {"store_memory", "recall_memory", "associate_memories", "update_memory", "delete_memory",
         "check_database_health", "graph_snapshot", "graph_neighbors", "graph_stats", "list_entities", "get_entity",
         "merge_entities"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def secured(nats_server, falkordb_server, tmp_path_factory):
    """The whole service with an API token, so credential forwarding is exercised; one for the
    module (each test's memories carry tags or ids of their own)."""
    settings = settings_for(nats_server, falkordb_server, tmp_path_factory.mktemp("mcp-secured") / "data")
    running = await start_service(settings.model_copy(update={"api_token": TOKEN}))
    try:
        yield running
    finally:
        await running.runner.stop()


def http_client(url: str, **headers: str) -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers)))


async def call(client: Client, tool: str, **arguments):
    """Call a tool; returns the structured result; fails on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content, result.content[0].text


async def call_error(client: Client, tool: str, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    return result.content[0].text


async def stdio_answers(secured, lines: list[str], count: int) -> dict:
    """Write ``lines`` to a fresh ``automem mcp`` (this checkout's code, not the venv's) and
    read ``count`` answers, by id; a line left unanswered fails here instead of blocking the
    suite."""
    return {answer["id"]: answer for answer in await stdio_read(secured, lines, count)}


async def stdio_read(secured, lines: list[str], count: int) -> list[dict]:
    """As :func:`stdio_answers`, the ``count`` answers in the order they came."""
    import asyncio
    import json

    root = Path(__file__).resolve().parents[2]
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "automem"), "mcp", "--grpc", secured.grpc, "--api-key", TOKEN,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        cwd=str(root), env={**os.environ, "PYTHONPATH": str(root)}, limit=64 * 1024 * 1024)
    answers: list = []
    try:
        process.stdin.write("".join(line + "\n" for line in lines).encode())
        await process.stdin.drain()
        while len(answers) < count:
            answers.append(json.loads(await asyncio.wait_for(process.stdout.readline(), 120)))
    finally:
        process.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    return answers


def assert_window(memory: dict) -> None:
    assert memory["state"] in ("ACTIVE", "SUPERSEDED", "DELETED", "PENDING_REVIEW", "ARCHIVED")
    assert "t_valid" in memory and "t_invalid" in memory
    assert memory["t_valid"]


async def test_tools_and_annotations(secured):
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["recall_memory"].annotations.read_only_hint is True
    assert tools["check_database_health"].annotations.read_only_hint is True
    assert tools["delete_memory"].annotations.destructive_hint is True
    assert tools["update_memory"].annotations.destructive_hint is True
    assert tools["store_memory"].annotations.read_only_hint is False
    assert tools["store_memory"].annotations.destructive_hint is False
    schema = tools["store_memory"].input_schema["properties"]
    for name in ("content", "memories", "supersedes_memory_id", "supersede_relation", "supersede_reason"):
        assert name in schema
    assert set(tools["recall_memory"].input_schema["properties"]["format"]["enum"]) == {
        "text", "items", "detailed", "json"}
    assert all(tool.input_schema.get("additionalProperties") is False for tool in tools.values())


async def test_http_credentials_are_forwarded(secured):
    # No key or a wrong one: 401 over HTTP, before any MCP message is handled (issue 5).
    import httpx

    for headers in ({}, {"X-API-Key": "wrong"}):
        async with httpx.AsyncClient(headers=headers) as raw:
            r = await raw.post(secured.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                               headers={"Accept": "application/json, text/event-stream"})
        assert r.status_code == 401 and "API key" in r.json()["error"]
    async with http_client(secured.url + "/mcp", **{"X-API-Key": TOKEN}) as client:
        body, _ = await call(client, "store_memory", content="Keys travel in X-API-Key too", tags=["auth"])
    assert body["memory"]["state"] == "ACTIVE"


async def test_http_end_to_end(secured):
    tag = f"mcp-{uuid.uuid4().hex[:8]}"
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        # store
        stored, text = await call(client, "store_memory", content="Chose PostgreSQL for the billing service",
                                  tags=[tag, "database"], importance=0.8, type="Decision",
                                  metadata={"ticket": 42})
        first = stored["memory_id"]
        assert stored["memory"]["type"] == "Decision"
        assert stored["memory"]["metadata"] == {"ticket": 42}
        assert_window(stored["memory"])
        assert stored["memory"]["t_invalid"] is None
        assert first in text and "ACTIVE" in text

        # field errors name the field
        assert "type" in await call_error(client, "store_memory", content="x", type="Nonsense")
        # An argument a tool does not take is refused, not dropped (a dry run deleted for real,
        # a scope argument stored in the caller's scope).
        text = await call_error(client, "delete_memory", memory_id=first, dry_run=True)
        assert "dry_run" in text and "Extra inputs are not permitted" in text, text
        assert "scope" in await call_error(client, "store_memory", content="Stored elsewhere?", scope="other")
        got, _ = await call(client, "recall_memory", memory_id=first)
        assert got["count"] == 1, got
        assert "content" in await call_error(client, "store_memory")
        assert "supersede_relation" in await call_error(client, "store_memory", content="x",
                                                        supersedes_memory_id=first,
                                                        supersede_relation="RELATES_TO")
        # booleans are not numbers, as over REST (they were stored as 1.0)
        assert "importance" in await call_error(client, "store_memory", content="x", importance=True)
        assert "strength" in await call_error(client, "associate_memories", memory1_id=first,
                                              memory2_id=first + "x", strength=True)

        # batch
        batch, _ = await call(client, "store_memory", memories=[
            {"content": "Billing runs nightly at 02:00 UTC", "tags": [tag]},
            {"content": "Invoices are rendered with WeasyPrint", "tags": [tag], "importance": 0.4}])
        assert batch["stored"] == 2
        second, third = batch["memory_ids"]

        # recall by id
        got, text = await call(client, "recall_memory", memory_id=first)
        assert got["mode"] == "id_fetch"
        assert got["memory"]["content"] == "Chose PostgreSQL for the billing service"
        assert got["memory"]["is_current"] is True
        assert "state=ACTIVE" in text and "valid=" in text
        _, text = await call(client, "recall_memory", memory_id=first, format="items")
        assert "state: ACTIVE" in text and "t_valid:" in text and "t_invalid: None" in text

        # ranked recall
        async def ranked_has_first():
            body, _ = await call(client, "recall_memory", query="PostgreSQL billing", tags=[tag], limit=5)
            return body if first in [r["memory_id"] for r in body["results"]] else None

        ranked = await eventually(ranked_has_first)
        assert ranked["mode"] == "ranked" and ranked["state_mode"] == "current"
        for item in ranked["results"]:
            assert_window(item)
            assert "final_score" in item

        # update
        updated, _ = await call(client, "update_memory", memory_id=second, importance=0.9, add_tags=["ops"])
        assert updated["memory"]["importance"] == 0.9
        assert set(updated["memory"]["tags"]) == {tag, "ops"}
        assert "memory_id" in await call_error(client, "update_memory", memory_id=second)
        # etag 0 names no version (they start at 1): refused, not read as "no check" (break-it review).
        assert "etag" in await call_error(client, "update_memory", memory_id=second, importance=0.1, etag=0)
        # On a memory at version 1, etag true was read as 1 and wrote; 2**64 failed without
        # naming etag (break-it review).
        fresh, _ = await call(client, "store_memory", content="The etag probe memory")
        for etag in (True, 2**64):
            assert "etag" in await call_error(client, "update_memory", memory_id=fresh["memory_id"],
                                              importance=0.1, etag=etag)
        probe, _ = await call(client, "recall_memory", memory_id=fresh["memory_id"])
        assert probe["memory"]["version"] == 1 and probe["memory"]["importance"] != 0.1
        assert "etag" in await call_error(client, "update_memory", memory_id=second, importance=0.1,
                                          etag=updated["memory"]["version"] - 1)
        unchanged, _ = await call(client, "update_memory", memory_id=second, importance=0.8,
                                  etag=updated["memory"]["version"])
        assert unchanged["memory"]["importance"] == 0.8
        # The etag text a tool answer gives is taken back as is (StrictInt alone refused it).
        again, _ = await call(client, "update_memory", memory_id=second, importance=0.7,
                              etag=unchanged["memory"]["etag"])
        assert again["memory"]["importance"] == 0.7

        # associate: one and a batch
        assoc, _ = await call(client, "associate_memories", memory1_id=first, memory2_id=second,
                              type="RELATES_TO", strength=0.7)
        assert assoc["type"] == "RELATES_TO" and assoc["memory1_id"] == first
        batch_assoc, _ = await call(client, "associate_memories", associations=[
            {"memory1_id": second, "memory2_id": third, "type": "LEADS_TO", "strength": 0.6},
            {"memory1_id": second, "memory2_id": third, "type": "NOT_A_TYPE"}])
        assert batch_assoc["created_count"] == 1 and batch_assoc["failed_count"] == 1
        assert "associations[1].type" in batch_assoc["failed"][0]["error"]

        # supersede: atomic, the old one is no longer current
        sup, text = await call(client, "store_memory", content="Moved billing from PostgreSQL to CockroachDB",
                               tags=[tag, "database"], supersedes_memory_id=first,
                               supersede_relation="EVOLVED_INTO", supersede_reason="multi-region")
        replacement = sup["memory_id"]
        assert sup["superseded_memory_id"] == first
        assert sup["relation"]["type"] == "EVOLVED_INTO"
        assert sup["superseded"]["state"] == "SUPERSEDED"
        assert sup["superseded"]["t_invalid"] is not None
        assert sup["memory"]["state"] == "ACTIVE" and sup["memory"]["t_invalid"] is None
        assert "SUPERSEDED" in text

        old, text = await call(client, "recall_memory", memory_id=first, state_mode="history", format="detailed")
        assert old["memory"]["state"] == "SUPERSEDED"
        assert old["memory"]["t_invalid"] is not None
        assert old["memory"]["superseded_by"] == replacement
        assert "state: SUPERSEDED" in text

        async def ranked_replaced():
            body, text = await call(client, "recall_memory", query="PostgreSQL billing", tags=[tag], limit=5)
            ids = [r["memory_id"] for r in body["results"]]
            return (body, text) if replacement in ids and first not in ids else None

        ranked, text = await eventually(ranked_replaced)
        hit = next(r for r in ranked["results"] if r["memory_id"] == replacement)
        assert hit["state"] == "ACTIVE" and hit["t_valid"] and hit["t_invalid"] is None
        assert "state=ACTIVE" in text and "valid=" in text
        for fmt in ("items", "detailed", "json"):
            _, text = await call(client, "recall_memory", query="PostgreSQL billing", tags=[tag], format=fmt)
            assert '"state"' in text if fmt == "json" else "state: " in text
            assert "t_valid" in text and "t_invalid" in text

        # history shows the superseded one too
        history, _ = await call(client, "recall_memory", query="PostgreSQL billing", tags=[tag],
                                state_mode="history", limit=10)
        assert first in [r["memory_id"] for r in history["results"]]

        # exhaustive listing by tag
        listing, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True, limit=2)
        assert listing["mode"] == "enumeration" and listing["count"] == 2 and listing["has_more"] is True
        for item in listing["results"]:
            assert_window(item)

        # delete by tags: preview, then confirm
        preview, text = await call(client, "delete_memory", tags=[tag])
        assert preview["dry_run"] is True
        # the superseded memory carries the tag too, so it goes with its chain
        assert set(preview["memory_ids"]) == {first, second, third, replacement}
        assert "confirm" in text and preview["preview_token"] in text
        still, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True)
        assert still["count"] == 3
        # The confirmation deletes what the preview showed: with no token, or once a memory
        # was stored under the tag since (it deleted that one too, unseen), it is refused and
        # nothing is deleted; the reason is recorded (it was dropped).
        assert "preview_token" in await call_error(client, "delete_memory", tags=[tag], confirm=True)
        late, _ = await call(client, "store_memory", content=f"Stored under {tag} after the preview", tags=[tag])
        assert "changed since the preview" in await call_error(client, "delete_memory", tags=[tag], confirm=True,
                                                               preview_token=preview["preview_token"])
        still, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True)
        assert still["count"] == 4
        await call(client, "delete_memory", memory_id=late["memory_id"])
        done, _ = await call(client, "delete_memory", tags=[tag], confirm=True, reason="project closed",
                             preview_token=preview["preview_token"])
        assert done["deleted_count"] == 4
        after = await secured.ctx.graph.memories.get(first, "default")
        assert after.state_reason == "project closed" and after.state == memory_pb2.MEMORY_STATE_DELETED
        gone, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True)
        assert gone["count"] == 0

        # single delete
        other, _ = await call(client, "store_memory", content="A memory to delete by id")
        deleted, _ = await call(client, "delete_memory", memory_id=other["memory_id"])
        assert deleted["state"] == "DELETED"
        assert "NOT_FOUND" in await call_error(client, "recall_memory", memory_id=other["memory_id"])
        # ... but a history read by id shows it with its state until a purge, as GET
        # /memory/{id}?state_mode=history does (automem/gateway/routes_memory.py get_memory)
        kept, text = await call(client, "recall_memory", memory_id=other["memory_id"], state_mode="history",
                                format="detailed")
        assert kept["memory"]["state"] == "DELETED" and kept["memory"]["content"] == "A memory to delete by id"
        assert kept["memory"]["is_current"] is False and "not current" in text and "state: DELETED" in text

        # health
        health, text = await call(client, "check_database_health")
        assert health["status"] in ("healthy", "degraded")
        assert health["falkordb"] == "connected"
        assert isinstance(health["memory_count"], int)
        assert text.startswith("status: ")


async def test_stdio(secured):
    command = str(Path(sys.executable).parent / "automem")
    params = StdioServerParameters(command=command, args=["mcp", "--grpc", secured.grpc, "--api-key", TOKEN],
                                   cwd=str(Path(__file__).resolve().parents[2]))
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == TOOLS
        stored, _ = await call(client, "store_memory", content="stdio stores go over gRPC", tags=["stdio"])
        memory_id = stored["memory_id"]
        got, _ = await call(client, "recall_memory", memory_id=memory_id)
        assert got["memory"]["content"] == "stdio stores go over gRPC"
        assert got["memory"]["state"] == "ACTIVE" and got["memory"]["t_valid"]

        async def ranked():
            body, _ = await call(client, "recall_memory", query="stdio gRPC stores", tags=["stdio"])
            return body if memory_id in [r["memory_id"] for r in body["results"]] else None

        await eventually(ranked)


async def test_stdio_without_key_is_refused(secured):
    command = str(Path(sys.executable).parent / "automem")
    params = StdioServerParameters(command=command, args=["mcp", "--grpc", secured.grpc, "--api-key", ""],
                                   cwd=str(Path(__file__).resolve().parents[2]))
    async with Client(params) as client:
        assert "API key" in await call_error(client, "store_memory", content="refused")


async def test_stdio_answers_every_line_and_reads_json_as_http_does(secured):
    # A lone surrogate, a key given twice, malformed JSON and JSON that is no JSON-RPC message
    # were read by the SDK's transport and answered with nothing: the client waited for its
    # own timeout (break-it review). Each gets an answer now, a refusal naming the argument
    # as over HTTP /mcp; the duplicated key was stored as its last value.
    import json

    tag = f"stdio-strict-{uuid.uuid4().hex[:8]}"

    def call_line(request_id: int, tool: str, arguments: str) -> str:
        return (f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
                f'"params": {{"name": "{tool}", "arguments": {arguments}}}}}')

    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call_line(3, "store_memory", '{"content": "a\\ud800b"}'),
        call_line(7, "recall_memory", '{"query": "\\udfff"}'),
        call_line(8, "store_memory", f'{{"content": "x", "content": "y", "tags": ["{tag}"]}}'),
        "{not json",
        '{"id": 9, "hello": 1}',
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
    ]
    answers = await stdio_answers(secured, lines, 7)
    assert set(answers) == {1, 3, 7, 8, None, 9, 6}
    assert answers[3]["error"]["code"] == -32602 and answers[3]["error"]["message"].startswith("content:")
    assert "surrogate" in answers[3]["error"]["message"]
    assert answers[7]["error"]["code"] == -32602 and answers[7]["error"]["message"].startswith("query:")
    assert answers[8]["error"]["code"] == -32602 and answers[8]["error"]["message"].startswith("content:")
    assert answers[None]["error"]["code"] == -32700
    assert answers[9]["error"]["code"] == -32600
    assert "store_memory" in {t["name"] for t in answers[6]["result"]["tools"]}
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        listed, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True)
    assert listed["count"] == 0  # nothing stored from the key given twice


async def test_batches_and_responses_are_invalid_requests_saying_which(secured):
    # A JSON-RPC batch sent to /mcp was answered -32602 holding pydantic's validation dump (over
    # stdio -32600 saying only "not a JSON-RPC 2.0 request, notification or response"), and a
    # response object (the server sends no requests) was taken in silence: 202 over HTTP,
    # nothing over stdio. Each is a short -32600 now, id null, saying what is wrong.
    import json

    request = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}
    wrong = [([request], "batch requests are not supported"), ([], "batch requests are not supported"),
             ({"jsonrpc": "2.0", "id": 5, "result": {}}, "unexpected JSON-RPC response"),
             ({"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "no"}}, "unexpected JSON-RPC response")]

    def assert_invalid(answer: dict, says: str) -> None:
        assert answer["id"] is None and answer["error"]["code"] == -32600, answer
        message = answer["error"]["message"]
        assert message.startswith(says) and "Invalid Request" in message, answer
        assert "validation error" not in message.lower() and len(message) < 300, answer

    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=secured.url, headers=headers, timeout=60) as http:
        for body, says in wrong:
            r = await http.post("/mcp", json=body)
            assert r.status_code == 400, (body, r.status_code, r.text)
            assert_invalid(r.json(), says)
            assert "2025-06-18" in r.json()["error"]["message"] or "response" in says
        r = await http.post("/mcp", json=request)  # the request alone is answered
        assert r.status_code == 200 and "store_memory" in r.text, r.text
    answers = await stdio_read(secured, [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        *(json.dumps(body) for body, _ in wrong),
        json.dumps(request),
    ], 2 + len(wrong))
    by_id = {answer["id"]: answer for answer in answers if answer["id"] is not None}
    assert set(by_id) == {1, 5} and "store_memory" in {t["name"] for t in by_id[5]["result"]["tools"]}, answers
    # The refusals come in the order of their lines (the SDK's answers may come between).
    for answer, (_, says) in zip([a for a in answers if a["id"] is None], wrong, strict=True):
        assert_invalid(answer, says)


async def test_http_legacy_handshake_open_service(service):
    # A handshake-era client (initialize), on "/mcp/" too; an open service needs no key.
    url = service.url + "/mcp/"
    async with Client(streamable_http_client(url), mode="legacy") as client:
        stored, _ = await call(client, "store_memory", content="Legacy clients work too", tags=["legacy"])
        got, _ = await call(client, "recall_memory", memory_id=stored["memory_id"], format="json")
        assert got["memory"]["state"] == "ACTIVE"
        health, _ = await call(client, "check_database_health")
        assert health["status"] == "healthy"


async def test_recall_limits_match_rest(secured):
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        for arguments in ({"query": "x", "limit": 0}, {"query": "x", "limit": 10**12}, {"query": "x", "offset": -1},
                          {"query": "x", "offset": 10**12}):
            message = await call_error(client, "recall_memory", **arguments)
            assert next(iter(k for k in arguments if k != "query")) in message


async def test_batch_modes_refuse_what_they_would_drop_and_arguments_read_as_rest_reads_them(secured):
    """Break-it review of the MCP surface:

    * a batch item's ``scope``, ``supersedes_memory_id``, a misspelt field, and a top-level
      single-memory field beside ``memories`` were dropped (the item stored in the caller's
      scope, nothing superseded, the batch's ``tags`` lost); an association batch dropped the
      top-level ``type``/``strength`` and an item's ``strenght``. Refused now, nothing stored;
    * the graph tools' integers past int32 were an unnamed internal error, ``depth: 0`` read
      as 1; booleans read as numbers (``limit: true`` as 1);
    * list arguments were not split on commas (``tags: ["a,b"]`` matched nothing, /recall
      reads it as two tags); an exhaustive listing paged by 5 (the ranked default), not 20;
      the "more from offset" hint used the requested limit, not the clamped one."""
    tag = f"mcpb-{uuid.uuid4().hex[:8]}"
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        target, _ = await call(client, "store_memory", content=f"The {tag} target is kept as it is.", tags=[tag])
        for arguments, named in (
                ({"memories": [{"content": f"{tag} item with a scope", "scope": "other"}]}, "scope"),
                ({"memories": [{"content": f"{tag} item", "supersedes_memory_id": target["memory_id"]}]},
                 "supersedes_memory_id"),
                ({"memories": [{"content": f"{tag} item", "tagz": ["x"]}]}, "tagz"),
                ({"memories": [{"content": f"{tag} item"}], "tags": [tag]}, "tags"),
                ({"memories": [{"content": f"{tag} item"}], "type": "Decision"}, "type")):
            message = await call_error(client, "store_memory", **arguments)
            assert named in message, (arguments, message)
        listed, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True)
        assert [m["memory_id"] for m in listed["results"]] == [target["memory_id"]]  # nothing was stored
        got, _ = await call(client, "recall_memory", memory_id=target["memory_id"], format="json")
        assert got["memory"]["state"] == "ACTIVE"

        other, _ = await call(client, "store_memory", content=f"The {tag} other end of the link.", tags=[tag])
        ends = {"memory1_id": target["memory_id"], "memory2_id": other["memory_id"]}
        for arguments, named in (({"associations": [{**ends, "type": "PART_OF"}], "type": "CONTRADICTS"}, "type"),
                                 ({"associations": [ends], "strength": 0.1}, "strength"),
                                 ({"associations": [{**ends, "strenght": 0.99}]}, "strenght")):
            message = await call_error(client, "associate_memories", **arguments)
            assert named in message, (arguments, message)
        related, _ = await call(client, "graph_neighbors", memory_id=target["memory_id"], include_semantic=False)
        # No edge was created (enrichment may have linked the two by similarity or time).
        assert not {e["type"] for e in related["edges"]} & {"PART_OF", "CONTRADICTS", "RELATES_TO"}, related["edges"]

        for tool, arguments, named in (("graph_snapshot", {"limit": 10**12}, "limit"),
                                       ("graph_neighbors", {"memory_id": target["memory_id"], "depth": 0}, "depth"),
                                       ("graph_neighbors", {"memory_id": target["memory_id"],
                                                            "semantic_limit": 10**10}, "semantic_limit"),
                                       ("list_entities", {"limit": 10**12}, "limit"),
                                       ("get_entity", {"slug": "x", "memory_limit": 10**12}, "memory_limit"),
                                       ("recall_memory", {"query": tag, "limit": True}, "limit"),
                                       ("recall_memory", {"query": tag, "min_score": True}, "min_score"),
                                       ("graph_snapshot", {"min_importance": True}, "min_importance")):
            message = await call_error(client, tool, **arguments)
            assert named in message, (tool, arguments, message)

        second = f"{tag}-b"
        both, _ = await call(client, "store_memory", content=f"The {tag} memory under a second tag.", tags=[second])
        found, _ = await call(client, "recall_memory", tags=[f"{tag},{second}"], tag_match="exact", limit=10)
        assert {m["memory_id"] for m in found["results"]} == {target["memory_id"], other["memory_id"],
                                                              both["memory_id"]}
        listing, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True)
        assert listing["limit"] == 20
        # A list argument given as one string is its comma-separated items (docs/mcp.md); it was
        # "Input should be a valid list". The answer echoes the tags as split.
        as_text, _ = await call(client, "recall_memory", tags=f"{tag},{second}", exhaustive=True)
        assert as_text["tags"] == [tag, second] and len(as_text["results"]) == 3, as_text
        ranked_text, _ = await call(client, "recall_memory", tags=f"{tag}, {second}", tag_match="exact", limit=10)
        assert {m["memory_id"] for m in ranked_text["results"]} == {m["memory_id"] for m in found["results"]}
        # So do the writing tools' (store_memory refused "a,b" for its comma once read as one tag).
        split, _ = await call(client, "store_memory", content=f"The {tag} memory stored with a tag string.",
                              tags=f"{tag}-c, {tag}-d")
        got, _ = await call(client, "recall_memory", memory_id=split["memory_id"], format="json")
        assert got["memory"]["tags"] == [f"{tag}-c", f"{tag}-d"], got["memory"]
        await call(client, "update_memory", memory_id=split["memory_id"], add_tags=f"{tag}-e,{tag}-f")
        got, _ = await call(client, "recall_memory", memory_id=split["memory_id"], format="json")
        assert got["memory"]["tags"] == [f"{tag}-c", f"{tag}-d", f"{tag}-e", f"{tag}-f"], got["memory"]
        # A priority id after ", " is read (split_values strips the pieces; it was ignored).
        led, _ = await call(client, "recall_memory", query=f"{tag} second tag", limit=3,
                            priority_ids=f"{target['memory_id']}, {other['memory_id']}")
        assert [m["memory_id"] for m in led["results"]][:2] == [target["memory_id"], other["memory_id"]], led
        # An integer written 2.0 (as some tool-call writers do) is an integer, not a boolean.
        two, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True, limit=2.0)
        assert two["limit"] == 2
        # A mode's options are refused in the other mode, not dropped; an empty id is no id.
        for arguments, named in (({"tags": [tag], "exhaustive": True, "query": "paging"}, "query"),
                                 ({"tags": [tag], "exhaustive": True, "min_score": 0.5}, "min_score"),
                                 ({"tags": [tag], "exhaustive": True, "recency_bias": "on"}, "recency_bias"),
                                 ({"tags": [tag], "exhaustive": True, "relation_limit": 3}, "relation_limit"),
                                 ({"tags": [tag], "exhaustive": True, "expand_min_importance": 0.9},
                                  "expand_min_importance"),
                                 ({"query": tag, "page_token": "garbage"}, "page_token"),
                                 ({"memory_id": ""}, "memory_id")):
            assert named in await call_error(client, "recall_memory", **arguments), arguments
        many = [{"content": f"{tag} bulk memory number {i} about paging"} for i in range(105)]
        await call(client, "store_memory", memories=many)
        ranked, text = await call(client, "recall_memory", query=f"{tag} bulk memory paging", limit=500)
        assert ranked["limit"] == 100 and ranked["has_more"] is True
        assert "more from offset 100" in text, text.split("\n")[0]


async def test_tool_errors_name_the_tools_argument(secured):
    # Break-it review: errors named the services' fields ("ids: ...", "props: ...", "id: ...",
    # "tags: ..." for add_tags), "memory X not found" named no argument, and a value of the
    # wrong type came back as pydantic's text with a link to its docs.
    missing = "00000000-0000-0000-0000-000000000000"
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        stored, _ = await call(client, "store_memory", content="A memory whose tool errors are probed")
        mid = stored["memory_id"]
        for tool, arguments, named in (
                ("store_memory", {"content": "x", "supersedes_memory_id": "a\x00b"}, "supersedes_memory_id: "),
                ("associate_memories", {"memory1_id": "a\x00b", "memory2_id": mid}, "memory1_id: "),
                ("associate_memories", {"memory1_id": mid, "memory2_id": "a\x00b"}, "memory2_id: "),
                ("associate_memories", {"memory1_id": mid, "memory2_id": missing}, f"memory2_id: memory {missing}"),
                ("associate_memories", {"memory1_id": missing, "memory2_id": mid}, f"memory1_id: memory {missing}"),
                ("delete_memory", {"memory_id": mid, "reason": "a\x00b"}, "reason: "),
                ("graph_neighbors", {"memory_id": "a\x00b"}, "memory_id: "),
                ("update_memory", {"memory_id": mid, "add_tags": ["a\x00b"]}, "add_tags[0]: "),
                ("update_memory", {"memory_id": mid, "add_tags": ["a\x01b"]}, "add_tags: "),
                ("update_memory", {"memory_id": mid, "importance": "high"}, "importance: expected a number, got a string"),
                ("recall_memory", {"limit": "many"}, "limit: expected an integer, got a string"),
                ("store_memory", {"content": "x", "metadata": [1]}, "metadata: expected an object, got a list"),
                ("update_memory", {"memory_id": mid, "content": "y", "etag": 1.5},
                 "etag: expected an integer or a string, got a number"),
                ("store_memory", {"memories": [{"content": 5}]}, "memories[0].content: expected a string")):
            text = await call_error(client, tool, **arguments)
            assert named in text, (tool, arguments, text)
            assert not any(internal in text for internal in ("ids:", "props:", " id:", " tags:", "pydantic",
                                                             "validation error")), text


async def test_update_memory_refuses_a_weak_etag_as_if_match_does(secured):
    # Break-it review: update_memory read W/"1" as version 1 and wrote, while REST's If-Match
    # refuses a weak tag (a version check is a strong comparison, RFC 9110).
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        stored, _ = await call(client, "store_memory", content="The weak etag probe memory", importance=0.3)
        version = stored["memory"]["version"]
        for weak in (f'W/"{version}"', f"w/{version}"):
            text = await call_error(client, "update_memory", memory_id=stored["memory_id"], importance=0.9, etag=weak)
            assert "etag:" in text and "weak" in text, text
        got, _ = await call(client, "recall_memory", memory_id=stored["memory_id"], format="json")
        assert got["memory"]["importance"] == 0.3 and got["memory"]["version"] == version
        # The strong tag passes.
        await call(client, "update_memory", memory_id=stored["memory_id"], importance=0.9, etag=f'"{version}"')


async def test_stdio_refuses_megabytes_of_content_naming_the_argument(secured):
    # A store_memory of 5 MB over stdio came back as gRPC's "received message larger than
    # max", naming no argument: the text is refused before it is sent now, as the ingest
    # service refuses an over-long one (content_max_length), and nothing is stored.
    import json

    from automem.common.settings import Settings

    limit = Settings().content_max_length
    huge = "x" * (5 * 1024 * 1024)
    tag = f"stdio-huge-{uuid.uuid4().hex[:8]}"
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        stored, _ = await call(client, "store_memory", content="A memory the huge update probes", tags=[tag])

    def call_line(request_id: int, tool: str, arguments: dict) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}})

    answers = await stdio_answers(secured, [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        call_line(2, "store_memory", {"content": huge, "tags": [tag]}),
        call_line(3, "store_memory", {"memories": [{"content": "fits", "tags": [tag]},
                                                   {"content": huge, "tags": [tag]}]}),
        call_line(4, "update_memory", {"memory_id": stored["memory_id"], "content": huge}),
    ], 4)
    for request_id, named in ((2, "content: "), (3, "memories[1].content: "), (4, "content: ")):
        result = answers[request_id]["result"]
        text = result["content"][0]["text"]
        assert result["isError"] is True, (request_id, text)
        assert f": {named}" in text and f"limit of {limit} characters" in text, (request_id, text)
        assert "larger than max" not in text, text
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        listed, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True, format="json")
    assert [m["content"] for m in listed["results"]] == ["A memory the huge update probes"], listed



async def test_http_names_megabytes_of_content_in_its_413(secured):
    # A store_memory of 5 MB over /mcp was answered 413 "request body exceeds the limit of
    # 4194304 bytes", naming no argument (automem mcp names content): the 413 names the text
    # over content_max_length now, with or without Content-Length; a body over the limit for
    # another reason keeps the plain 413, and nothing is stored.
    import json

    from automem.common.settings import Settings

    settings = Settings()
    huge = "x" * (5 * 1024 * 1024)
    tag = f"http-huge-{uuid.uuid4().hex[:8]}"

    def call_body(tool: str, arguments: dict) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}}).encode()

    async def chunked(body: bytes):
        for start in range(0, len(body), 64 * 1024):
            yield body[start:start + 64 * 1024]

    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    cases = [(call_body("store_memory", {"content": huge, "tags": [tag]}), "content: "),
             (call_body("store_memory", {"memories": [{"content": "fits", "tags": [tag]},
                                                      {"content": huge, "tags": [tag]}]}), "memories[1].content: "),
             (call_body("update_memory", {"memory_id": str(uuid.uuid4()), "content": huge}), "content: ")]
    async with httpx.AsyncClient(base_url=secured.url, headers=headers, timeout=120) as http:
        for body, named in cases:
            for sent in (body, chunked(body)):
                r = await http.post("/mcp", content=sent)
                assert r.status_code == 413, (named, r.status_code, r.text[:300])
                answer = r.json()  # a JSON-RPC error, as /mcp's other refusals (the SDK client shows its message)
                assert answer["id"] == 2 and answer["error"]["code"] == -32602, answer  # the id came before the text
                error = answer["error"]["message"]
                assert error.startswith(named), error
                assert f"limit of {settings.content_max_length} characters" in error, error
                assert f"{settings.max_body_bytes} bytes" in error, error
        # Over the byte limit with a text that fits: the plain 413.
        plain = call_body("store_memory", {"content": "fits", "tags": [tag], "metadata": {"x": huge}})
        for sent in (plain, chunked(plain)):
            r = await http.post("/mcp", content=sent)
            assert r.status_code == 413, r.text[:300]
            assert r.json()["error"] == f"request body exceeds the limit of {settings.max_body_bytes} bytes", r.text
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        listed, _ = await call(client, "recall_memory", tags=[tag], exhaustive=True, format="json")
    assert listed["count"] == 0, listed
    async with http_client(secured.url + "/mcp", Authorization=f"Bearer {TOKEN}") as client:
        try:
            await client.call_tool("store_memory", {"content": huge, "tags": [tag]})
            raise AssertionError("a store of 5 MB was answered")
        except MCPError as exc:  # the SDK client's error carries the message
            assert str(exc).startswith("content: "), str(exc)


async def test_mcp_event_streams_are_capped(settings):
    # Open GET /mcp event streams were counted but not capped: one more than
    # AUTOMEM_MCP_MAX_STREAMS is a 503 with Retry-After now, and a closed one frees its place.
    import httpx

    running = await start_service(settings.model_copy(update={"mcp_max_streams": 1}))
    try:
        async with httpx.AsyncClient(base_url=running.url, timeout=60,
                                     headers={"Accept": "text/event-stream"}) as http:

            async def opened():
                response = await http.send(http.build_request("GET", "/mcp"), stream=True)
                if response.status_code == 200:
                    return response
                await response.aclose()
                return None

            async with contextlib.aclosing(await eventually(opened)):
                refused = await http.send(http.build_request("GET", "/mcp"), stream=True)
                async with contextlib.aclosing(refused):
                    assert refused.status_code == 503, refused.headers
                    await refused.aread()
                    assert "AUTOMEM_MCP_MAX_STREAMS" in refused.json()["error"], refused.text
                    assert int(refused.headers["retry-after"]) > 0
            # The closed stream's place is free again (once the gateway has seen it go).
            await (await eventually(opened)).aclose()
    finally:
        await running.runner.stop()


async def test_mcp_event_streams_end_when_the_gateway_stops(settings):
    # A stopping gateway waited out its timeout on an open GET /mcp event stream and left it
    # hanging; the stop ends it now, with a comment saying why.
    import asyncio

    import httpx

    running = await start_service(settings)
    stopped = False
    try:
        async with (httpx.AsyncClient(base_url=running.url, timeout=60,
                                      headers={"Accept": "text/event-stream"}) as http,
                    http.stream("GET", "/mcp") as opened):
            assert opened.status_code == 200, await opened.aread()
            stop = asyncio.create_task(running.runner.stop())
            received = b""
            # Ends: a stream left open fails here instead of blocking the suite.
            async with asyncio.timeout(60):
                async for chunk in opened.aiter_bytes():
                    received += chunk
            await stop
            stopped = True
        assert b"the gateway is stopping" in received, received
    finally:
        if not stopped:
            await running.runner.stop()
