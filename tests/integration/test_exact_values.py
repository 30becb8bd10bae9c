"""Values read back exactly or are refused (issue 12, items 1, 2, 4, 8, 9), on the real
running service: what a caller stores is what a read gives back, and input no store could
hold as sent — integers past 2^53-1, NaN and Infinity, blank content, control characters in
keys, edges to memories that are gone — answers 4xx naming the field, storing nothing."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from google.protobuf import field_mask_pb2, struct_pb2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from automem.common.model import metadata_dict
from automem.v1 import ingest_service_pb2, memory_pb2
from tests.conftest import struct_of

#: Every kind of JSON value metadata must give back unchanged, at the edges of the range.
EXACT = {"max": 2**53 - 1, "min": -(2**53 - 1), "zero": 0, "half": 0.5, "tiny": 5e-324, "huge": 1.7976931348623157e308,
         "third": 0.30000000000000004, "text": "naïve ☃", "flag": True, "nothing": None,
         "nested": {"list": [1, 2.25, "x", [False]], "deep": {"n": -42}}}
TOO_BIG = {"big": 9007199254740993, "x2": 123456789012345678901234567890}


def _mcp(service) -> Client:
    return Client(streamable_http_client(service.url + "/mcp", http_client=create_mcp_http_client(
        headers={"X-Automem-Scope": service.scope})))


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


def _assert_same_json(got, want) -> None:
    # Equal and of the same JSON types (an int stays an int, a float a float).
    assert got == want
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


# --- 1. metadata numbers --------------------------------------------------------------------


async def test_metadata_reads_back_exactly_and_big_integers_are_refused_naming_the_key(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "metadata at the edges of the number range", metadata=EXACT)
        _assert_same_json((await http.get(f"/memory/{mid}")).json()["memory"]["metadata"], EXACT)
        for key, value in TOO_BIG.items():
            r = await http.post("/memory", json={"content": f"too big {key}", "metadata": {key: value}})
            assert r.status_code == 400, r.text
            assert r.json()["error"].startswith(f"metadata.{key}: integer {value} is outside")
            r = await http.post("/memory", json={"content": "nested", "metadata": {"a": {"b": [1, -value]}}})
            assert r.status_code == 400 and r.json()["error"].startswith("metadata.a.b[1]: integer"), r.text
        r = await http.post("/memory/batch", json={"memories": [{"content": "fine"},
                                                                {"content": "not fine", "metadata": TOO_BIG}]})
        assert r.status_code == 400 and r.json()["error"].startswith("memories[1].metadata.big:"), r.text
    assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_metadata_patch_merges_exactly_and_refuses_big_integers(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "patched metadata", metadata={"keep": 2**53 - 1})
        r = await http.patch(f"/memory/{mid}", json={"metadata": {"big": 2**53 + 1}})
        assert r.status_code == 400 and r.json()["error"].startswith("metadata.big: integer"), r.text
        r = await http.patch(f"/memory/{mid}", json={"metadata": {"added": -(2**53 - 1), "f": 2.5}})
        assert r.status_code == 200, r.text
        want = {"keep": 2**53 - 1, "added": -(2**53 - 1), "f": 2.5}
        _assert_same_json(r.json()["memory"]["metadata"], want)
        _assert_same_json((await http.get(f"/memory/{mid}")).json()["memory"]["metadata"], want)


async def test_metadata_through_grpc_reads_back_exactly_or_is_invalid_argument(service) -> None:
    async with service.client() as client:
        memory = await client.create_memory("grpc metadata", metadata=EXACT)
        _assert_same_json(metadata_dict((await client.get_memory(memory.id)).memory), EXACT)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.create_memory("grpc too big", metadata=TOO_BIG)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details().startswith("metadata.big: integer")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.update_memory(memory.id, metadata={"x2": TOO_BIG["x2"]})
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details().startswith("metadata.x2: integer")
        # A Struct (doubles) holding NaN: named, not a 500.
        struct = struct_pb2.Struct()
        struct.update({"ok": 1, "score": float("nan")})
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="struct nan", metadata=struct)))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details().startswith("metadata.score: NaN")
    assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_metadata_through_mcp_reads_back_exactly_or_names_the_key(service) -> None:
    async with _mcp(service) as client:
        stored = await client.call_tool("store_memory", {"content": "mcp metadata", "metadata": EXACT})
        assert not stored.is_error, stored.content[0].text
        _assert_same_json(stored.structured_content["memory"]["metadata"], EXACT)
        mid = stored.structured_content["memory_id"]
        refused = await client.call_tool("store_memory", {"content": "mcp too big", "metadata": TOO_BIG})
        assert refused.is_error and "metadata.big: integer" in refused.content[0].text
        refused = await client.call_tool("update_memory", {"memory_id": mid, "metadata": {"x2": TOO_BIG["x2"]}})
        assert refused.is_error and "metadata.x2: integer" in refused.content[0].text
    async with service.http() as http:
        _assert_same_json((await http.get(f"/memory/{mid}")).json()["memory"]["metadata"], EXACT)


async def test_metadata_survives_backup_and_restore_exactly(own_service) -> None:
    from automem.common import backup
    from automem.graph import GraphStore

    async with own_service.http() as http:
        mid = await _store(http, "backed up metadata", metadata=EXACT)
    records = [r async for r in backup.export_records(own_service.ctx.graph, None)]
    target = GraphStore(own_service.settings.model_copy(update={"graph_name": own_service.settings.graph_name + "_r"}))
    try:
        await backup.restore_records(target, records)
        restored = await target.memories.get(mid, None)
        _assert_same_json(metadata_dict(restored), EXACT)
    finally:
        await target.close()


# --- 2. NaN / Infinity anywhere in a body ---------------------------------------------------


async def test_non_finite_and_inexact_numbers_anywhere_in_a_body_are_400_naming_the_field(service) -> None:
    cases = [
        ("POST", "/memory", '{"content": "nan meta", "metadata": {"score": NaN}}', "metadata.score: NaN"),
        ("POST", "/memory", '{"content": "inf importance", "importance": Infinity}', "importance: Infinity"),
        ("POST", "/memory/batch", '{"memories": [{"content": "a"}, {"content": "b", "metadata": {"l": [1, -Infinity]}}]}',
         "memories[1].metadata.l[1]: -Infinity"),
        ("POST", "/memory", '{"content": "overflow", "metadata": {"x": 1e400}}', "metadata.x: 1e400 cannot be held"),
        ("POST", "/memory", '{"content": "digits", "metadata": {"x": 0.1000000000000000000001}}',
         "metadata.x: 0.1000000000000000000001 cannot be held"),
        ("POST", "/associate", '{"memory1_id": "a", "memory2_id": "b", "strength": NaN}', "strength: NaN"),
        ("POST", "/memory", 'NaN', "body: NaN"),
        ("POST", "/memory", '{"content": "long int", "metadata": {"n": [1, ' + "9" * 5000 + ']}}',
         "metadata.n[1]: an integer of 5000 digits"),
    ]
    async with service.http() as http:
        mid = await _store(http, "target of a NaN patch")
        cases.append(("PATCH", f"/memory/{mid}", '{"metadata": {"deep": {"v": -Infinity}}}', "metadata.deep.v: -Infinity"))
        for method, path, body, error in cases:
            r = await http.request(method, path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (path, body, r.status_code, r.text)
            assert r.json()["error"].startswith(error), (body, r.json()["error"])
        # Exact decimals pass: 1.50 and 1E5 are the doubles 1.5 and 100000.0.
        r = await http.post("/memory", content='{"content": "exact decimals", "metadata": {"a": 1.50, "b": 1E5}}',
                            headers={"Content-Type": "application/json"})
        assert r.status_code == 201, r.text
        assert r.json()["memory"]["metadata"] == {"a": 1.5, "b": 100000}
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["metadata"] == {}
    assert await service.ctx.graph.memories.count(service.scope) == 2


# --- 2b. keys given twice, inexact numbers in metadata_json, negative zero ------------------

#: Why a repeated key is refused (the gateway's and the ingest service's words).
TWICE = "the key is given more than once in one object"
#: Metadata holding -0.0 wherever a number can be (-0.0 == 0, so compare it as JSON text).
NEGATIVE_ZERO = {"z": -0.0, "list": [-0.0, 0], "nested": {"z": -0.0}}


async def _mcp_raw_call(http, tool: str, arguments: str):
    """``tools/call`` of ``tool`` with ``arguments``, JSON text sent as written (a client
    library would merge a repeated key or round a number before sending), in a session of
    its own. The HTTP response."""
    accept = {"Accept": "application/json, text/event-stream"}
    init = await http.post("/mcp", headers=accept, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    assert init.status_code == 200, init.text
    if session := init.headers.get("mcp-session-id"):
        accept["mcp-session-id"] = session
    await http.post("/mcp", headers=accept, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    body = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "%s", "arguments": %s}}'
    return await http.post("/mcp", content=body % (tool, arguments),
                           headers={**accept, "Content-Type": "application/json"})


async def test_a_key_given_twice_anywhere_is_refused_naming_it_not_last_one_kept(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "metadata a repeated key would have overwritten", metadata={"keep": 1})
        cases = [
            ("POST", "/memory", '{"content": "dup", "metadata": {"x": 1, "x": 2}}', "metadata.x"),
            ("POST", "/memory", '{"content": "first", "content": "second"}', "content"),
            ("POST", "/memory", '{"content": "deep", "metadata": {"a": [{"y": 1}, {"y": 1, "y": 2}]}}', "metadata.a[1].y"),
            ("POST", "/memory/batch", '{"memories": [{"content": "a"}, {"content": "b", "metadata": {"k": 1, "k": 2}}]}',
             "memories[1].metadata.k"),
            ("PATCH", f"/memory/{mid}", '{"metadata": {"keep": 2, "keep": 3}}', "metadata.keep"),
            # Keys a dotted path would misread are named as JSON strings in brackets.
            ("POST", "/memory", '{"content": "empty key", "metadata": {"": 1, "": 2}}', 'metadata[""]'),
            ("POST", "/memory", '{"content": "dotted", "metadata": {"a.b": 1, "a.b": 2}}', 'metadata["a.b"]'),
            ("POST", "/memory", '{"": 1, "": 2, "content": "top"}', '[""]'),
        ]
        for method, path, body, field in cases:
            r = await http.request(method, path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (body, r.status_code, r.text)
            assert r.json()["error"].startswith(f"{field}: {TWICE}"), (body, r.json()["error"])
        r = await _mcp_raw_call(http, "store_memory", '{"content": "mcp dup", "metadata": {"n": {"v": 1, "v": 2}}}')
        assert r.status_code == 400 and r.json()["error"]["message"].startswith(f"metadata.n.v: {TWICE}"), r.text
        assert r.json()["id"] == 2, r.text  # the refused request's id, as the SDK answers
        async with service.client() as client:
            for text, field in (('{"x": 1, "x": 2}', "metadata.x"), ('{"a": [{"y": 1, "y": 2}]}', "metadata.a[0].y"),
                                ('{"": 1, "": 2}', 'metadata[""]')):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                        memory=ingest_service_pb2.MemoryInput(content="grpc dup", metadata_json=text, metadata_set=True)))
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert err.value.details().startswith(f"{field}: {TWICE}"), err.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.ingest.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(
                    id=mid, memory=ingest_service_pb2.MemoryInput(metadata_json='{"keep": 2, "keep": 3}', metadata_set=True),
                    update_mask=field_mask_pb2.FieldMask(paths=["metadata"])))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details().startswith(f"metadata.keep: {TWICE}"), err.value.details()
            # Past the size limit, the text is refused for its size before it is read: a large
            # object repeating every key is not walked key by key.
            keys = ", ".join(f'"k{i}": 1' for i in range(5000))
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                    memory=ingest_service_pb2.MemoryInput(content="grpc big dup", metadata_json=f"{{{keys}, {keys}}}",
                                                          metadata_set=True)))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details().startswith("metadata: ") and "exceeds the limit" in err.value.details()
        _assert_same_json((await http.get(f"/memory/{mid}")).json()["memory"]["metadata"], {"keep": 1})
    assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_inexact_numbers_in_grpc_metadata_json_and_mcp_are_refused_not_rounded(service) -> None:
    cases = [("1e-400", "0.0"), ("-1e-400", "-0.0"), ("0.1000000000000000000001", "0.1"), ("1e400", "inf")]
    async with service.client() as client:
        memory = await client.create_memory("target of inexact updates", metadata={"keep": 0.5})
        for number, read_back in cases:
            want = f"metadata.x: {number} cannot be held exactly by a 64-bit float (it would read back as {read_back})"
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                    memory=ingest_service_pb2.MemoryInput(content=f"grpc {number}", metadata_json=f'{{"x": {number}}}',
                                                          metadata_set=True)))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details().startswith(want), err.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.ingest.UpdateMemory(ingest_service_pb2.UpdateMemoryRequest(
                    id=memory.id, memory=ingest_service_pb2.MemoryInput(metadata_json=f'{{"x": {number}}}',
                                                                        metadata_set=True),
                    update_mask=field_mask_pb2.FieldMask(paths=["metadata"])))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert err.value.details().startswith(want), err.value.details()
        _assert_same_json(metadata_dict((await client.get_memory(memory.id)).memory), {"keep": 0.5})
    async with service.http() as http:
        r = await _mcp_raw_call(http, "store_memory", '{"content": "mcp tiny", "metadata": {"l": [1, 1e-400]}}')
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"].startswith("metadata.l[1]: 1e-400 cannot be held exactly"), r.text
        r = await _mcp_raw_call(http, "update_memory", f'{{"memory_id": "{memory.id}", "metadata": {{"x": 1e-400}}}}')
        assert r.status_code == 400 and r.json()["error"]["message"].startswith("metadata.x: 1e-400"), r.text
    assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_negative_zero_in_metadata_reads_back_as_negative_zero_everywhere(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "negative zero over REST", metadata=NEGATIVE_ZERO)
        _assert_same_json((await http.get(f"/memory/{mid}")).json()["memory"]["metadata"], NEGATIVE_ZERO)
        r = await http.patch(f"/memory/{mid}", content='{"metadata": {"patched": -0.0}}',
                             headers={"Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        _assert_same_json((await http.get(f"/memory/{mid}")).json()["memory"]["metadata"],
                          {**NEGATIVE_ZERO, "patched": -0.0})
        r = await http.post("/memory/batch", json={"memories": [{"content": "negative zero in a batch",
                                                                 "metadata": NEGATIVE_ZERO}]})
        assert r.status_code == 201, r.text
        batched = r.json()["memory_ids"][0]
        _assert_same_json((await http.get(f"/memory/{batched}")).json()["memory"]["metadata"], NEGATIVE_ZERO)
        async with service.client() as client:
            stored = await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="negative zero in a Struct", metadata=struct_of(NEGATIVE_ZERO))))
            _assert_same_json(metadata_dict((await client.get_memory(stored.memory.id)).memory), NEGATIVE_ZERO)
            from_json = await client.create_memory("negative zero in metadata_json", metadata=NEGATIVE_ZERO)
            await client.update_memory(from_json.id, metadata={"patched": -0.0})
            _assert_same_json(metadata_dict((await client.get_memory(from_json.id)).memory),
                              {**NEGATIVE_ZERO, "patched": -0.0})
        async with _mcp(service) as client:
            result = await client.call_tool("store_memory", {"content": "negative zero over MCP", "metadata": NEGATIVE_ZERO})
            assert not result.is_error, result.content[0].text
            _assert_same_json(result.structured_content["memory"]["metadata"], NEGATIVE_ZERO)
            over_mcp = result.structured_content["memory_id"]
        _assert_same_json((await http.get(f"/memory/{over_mcp}")).json()["memory"]["metadata"], NEGATIVE_ZERO)
        # 0 stays the integer 0.
        _assert_same_json((await http.get(f"/memory/{mid}")).json()["memory"]["metadata"]["list"], [-0.0, 0])


# --- 4. blank content, control characters in keys ------------------------------------------


# "\u3164\u2800" (a Hangul filler and the braille blank) was stored as a memory (re-check round).
@pytest.mark.parametrize("content", ["\u200b", "\u2060\ufeff", " \u200b\n\u00ad\t", "\u3164\u2800"])
async def test_content_of_only_invisible_characters_is_400(service, content: str) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": content})
        assert r.status_code == 400 and r.json()["error"].startswith("content: must not be empty"), r.text
        r = await http.post("/memory/batch", json={"memories": [{"content": "ok"}, {"content": content}]})
        assert r.status_code == 400 and r.json()["error"].startswith("memories[1].content: must not be empty")
        mid = await _store(http, "visible")
        r = await http.patch(f"/memory/{mid}", json={"content": content})
        assert r.status_code == 400 and r.json()["error"].startswith("content: must not be empty")
    async with _mcp(service) as client:
        refused = await client.call_tool("store_memory", {"content": content})
        assert refused.is_error and "content: must not be empty" in refused.content[0].text
    assert await service.ctx.graph.memories.count(service.scope) == 1


# "\u3164" (Hangul filler) was stored as a tag that looks empty (re-check round).
@pytest.mark.parametrize("blank", ["", " ", "\u200b", "\u202e", " \u2060\ufeff\t", "\u3164"])
async def test_a_tag_of_only_whitespace_or_invisible_characters_is_refused_naming_it(service, blank: str) -> None:
    """Break-it review: ``tags: ["", " "]`` answered 201 with ``tags: []`` (dropped without a
    word) and ``["\u200b"]`` / ``["\u202e"]`` were stored as tags that look empty, while
    content of only invisible characters is refused; gRPC dropped ``tags=[""]`` the same way.
    Such a tag is refused now, 400 / INVALID_ARGUMENT naming ``tags[i]``, on every write
    path (store, batch, PATCH tags and add_tags, supersede, gRPC, MCP), nothing written."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "blank tag probe", "tags": ["ok", blank]})
        assert r.status_code == 400 and r.json()["error"].startswith("tags[1]: must not be empty"), r.text
        r = await http.post("/memory/batch", json={"memories": [
            {"content": "fine", "tags": ["ok"]}, {"content": "blank tag probe", "tags": [blank]}]})
        assert r.status_code == 400 and r.json()["error"].startswith("memories[1].tags[0]: must not be empty")
        mid = await _store(http, "the memory whose tags are probed", tags=["kept"])
        r = await http.patch(f"/memory/{mid}", json={"tags": [blank, "x"]})
        assert r.status_code == 400 and r.json()["error"].startswith("tags[0]: must not be empty"), r.text
        r = await http.patch(f"/memory/{mid}", json={"add_tags": ["x", blank]})
        assert r.status_code == 400 and r.json()["error"].startswith("add_tags[1]: must not be empty"), r.text
        r = await http.post("/memory", json={"content": "its replacement", "tags": [blank],
                                             "supersedes_memory_id": mid})
        assert r.status_code == 400 and r.json()["error"].startswith("tags[0]: must not be empty"), r.text
        r = await http.post(f"/v1/memories/{mid}:supersede", json={"content": "its replacement", "tags": [blank]})
        assert r.status_code == 400 and r.json()["error"].startswith("tags[0]: must not be empty"), r.text
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert (memory["tags"], memory["state"]) == (["kept"], "ACTIVE"), memory
    async with service.client() as client:
        for call, request, field in (
                (client.ingest.CreateMemory, ingest_service_pb2.CreateMemoryRequest(
                    memory=ingest_service_pb2.MemoryInput(content="blank tag probe", tags=[blank])), "tags[0]"),
                (client.ingest.BatchCreateMemories, ingest_service_pb2.BatchCreateMemoriesRequest(memories=[
                    ingest_service_pb2.MemoryInput(content="blank tag probe", tags=["a", "b", blank])]),
                 "memories[0].tags[2]"),
                (client.ingest.UpdateMemory, ingest_service_pb2.UpdateMemoryRequest(id=mid, add_tags=[blank]),
                 "add_tags[0]"),
                (client.ingest.SupersedeMemory, ingest_service_pb2.SupersedeMemoryRequest(
                    id=mid, replacement=ingest_service_pb2.MemoryInput(content="its replacement", tags=[blank])),
                 "replacement.tags[0]")):  # the request's proto path (REST names the body's tags[0])
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(request)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
            assert f"{field}: must not be empty" in err.value.details(), err.value.details()
    async with _mcp(service) as mcp:
        refused = await mcp.call_tool("store_memory", {"content": "blank tag probe", "tags": ["ok", blank]})
        assert refused.is_error and "tags[1]: must not be empty" in refused.content[0].text, refused
    assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_text_that_shows_something_is_stored_as_sent_though_it_holds_invisible_characters(service) -> None:
    """Korean with a Hangul filler, emoji ZWJ sequences, right-to-left text between bidi marks
    and braille words are content and tags, read back as sent: only text that shows nothing
    at all is blank."""
    texts = ["\u3164안녕하세요 세계", "👩\u200d💻 and 🏳️\u200d🌈", "\u200fשלום עולם\u200f", "⠓⠑⠇⠇⠕\u2800⠺⠕⠗⠇⠙"]
    async with service.http() as http:
        for text in texts:
            mid = await _store(http, text, tags=[text])
            memory = (await http.get(f"/memory/{mid}")).json()["memory"]
            assert (memory["content"], memory["tags"]) == (text, [text]), memory


# A rejection's reason and a merge's slug of only invisible characters ("\u3164", "\u200b")
# passed the blank check (str.strip kept them), while content and tags of them are refused.
@pytest.mark.parametrize("blank", ["\u3164", "\u200b", " \u2060\ufeff", "\u2800"])
async def test_a_required_reason_or_slug_of_only_invisible_characters_is_refused_naming_it(
        service, blank: str) -> None:
    """A review rejection whose ``reason`` shows nothing was accepted (the memory REJECTED and
    its content tombstoned for a reason no one can read), and an entity merge whose ``slug``
    shows nothing was looked up (404): both fields are required not blank, and blank is
    judged as for content and tags now (automem/common/text.py ``is_blank``): 400 /
    INVALID_ARGUMENT / a tool error naming the field, nothing changed."""
    from urllib.parse import quote

    from automem.v1 import review_service_pb2

    async with service.http() as http:
        pending = await _store(http, "a memory waiting for review", require_review=True)
        r = await http.post(f"/v1/review-items/{pending}:reject", json={"reason": blank})
        assert r.status_code == 400 and r.json()["error"].startswith("reason: a rejection needs a reason"), r.text
        r = await http.post(f"/entity/{quote(blank, safe='')}/merge", json={"merge_into": "postgresql"})
        assert r.status_code == 400 and r.json()["error"].startswith("slug: an entity slug is required"), r.text
        assert (await http.get(f"/memory/{pending}")).json()["memory"]["state"] == "PENDING_REVIEW"
    async with service.client() as client:
        for call, request, field in (
                (client.review.RejectReviewItem, review_service_pb2.RejectReviewItemRequest(id=pending, reason=blank),
                 "reason"),
                (client.review.MergeEntities, review_service_pb2.MergeEntitiesRequest(
                    slug=blank, merge_into="postgresql"), "slug")):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(request)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value
            assert err.value.details().startswith(f"{field}: "), err.value.details()
    async with _mcp(service) as mcp:
        refused = await mcp.call_tool("merge_entities", {"slug": blank, "merge_into": "postgresql"})
        assert refused.is_error and "slug: an entity slug is required" in refused.content[0].text, refused
    async with service.http() as http:
        assert (await http.get(f"/memory/{pending}")).json()["memory"]["state"] == "PENDING_REVIEW"


async def test_control_characters_in_metadata_keys_and_tags_are_400(service) -> None:
    async with service.http() as http:
        for key in ("a\x00b", "\x1f", "line\nbreak", "del\x7f"):
            r = await http.post("/memory", json={"content": "bad key", "metadata": {"ok": {key: 1}}})
            assert r.status_code == 400 and r.json()["error"].startswith("metadata.ok: key"), r.text
            assert "control character" in r.json()["error"]
        mid = await _store(http, "patched keys", metadata={"fine\u00e9": 1})
        r = await http.patch(f"/memory/{mid}", json={"metadata": {"\x00": 1}})
        assert r.status_code == 400 and r.json()["error"].startswith("metadata: key"), r.text
        r = await http.post("/memory", json={"content": "bad tag", "tags": ["ok", "bell\x07"]})
        assert r.status_code == 400 and r.json()["error"].startswith("tags:"), r.text
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["metadata"] == {"fine\u00e9": 1}
    assert await service.ctx.graph.memories.count(service.scope) == 1


# --- 8. no edge to a memory that is gone ----------------------------------------------------


async def _edges(service, a: str, b: str) -> int:
    rows = await service.ctx.graph.ro_query(
        "MATCH (x:Memory {id: $a})-[r:RELATES_TO|LEADS_TO|INVALIDATED_BY]-(y:Memory {id: $b}) RETURN count(r)",
        {"a": a, "b": b})
    return rows[0][0]


async def test_associations_with_deleted_rejected_or_other_scope_memories_are_404(service) -> None:
    other = f"t/{uuid.uuid4().hex[:12]}"
    async with service.http() as http, service.http(**{"X-Automem-Scope": other}) as elsewhere:
        live = await _store(http, "a live memory to link from")
        deleted = await _store(http, "a memory deleted before the link")
        assert (await http.delete(f"/memory/{deleted}")).status_code == 200
        rejected = await _store(http, "a memory rejected in review", require_review=True)
        r = await http.post(f"/v1/review-items/{rejected}:reject", json={"reason": "wrong"})
        assert r.status_code == 200, r.text
        foreign = await _store(elsewhere, "a memory of another scope")
        for gone, label in ((deleted, "deleted"), (rejected, "rejected"), (foreign, "other scope")):
            for kind in ("RELATES_TO", "INVALIDATED_BY"):
                r = await http.post("/associate", json={"memory1_id": live, "memory2_id": gone, "type": kind})
                assert r.status_code == 404 and r.json()["error"].startswith(f"memory2_id: memory {gone} not found"), (label, r.text)
                r = await http.post("/associate", json={"memory1_id": gone, "memory2_id": live, "type": kind})
                assert r.status_code == 404, (label, kind, r.text)
            r = await http.post("/associate", json={"associations": [
                {"memory1_id": live, "memory2_id": gone}, {"memory1_id": gone, "memory2_id": live}]})
            # Nothing created and every item absent: 404, as a single association answers.
            assert r.status_code == 404 and [f["code"] for f in r.json()["failed"]] == [404, 404], r.text
        async with service.client() as client:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.ingest.CreateRelation(ingest_service_pb2.CreateRelationRequest(
                    relation=memory_pb2.Relation(source_id=live, target_id=deleted, strength=0.5)))
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
            assert err.value.details().startswith(f"relation.target_id: memory {deleted} not found")
        async with _mcp(service) as client:
            refused = await client.call_tool("associate_memories", {"memory1_id": rejected, "memory2_id": live})
            assert refused.is_error and "not found" in refused.content[0].text
        for gone in (deleted, rejected, foreign):
            assert await _edges(service, live, gone) == 0
        # The live memory was not superseded by a failed INVALIDATED_BY from it.
        assert (await http.get(f"/memory/{live}")).json()["memory"]["state"] == "ACTIVE"
        # A live pair still links.
        other_live = await _store(http, "another live memory")
        r = await http.post("/associate", json={"memory1_id": live, "memory2_id": other_live})
        assert r.status_code == 201 and await _edges(service, live, other_live) == 1


# --- 9. no redirects for ids holding "/" ----------------------------------------------------


async def test_trailing_slash_and_slash_in_id_are_404_json_without_redirect(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "reachable only at its own path")
        for method, path in (("GET", f"/memory/{mid}/"), ("PATCH", f"/memory/{mid}/"), ("DELETE", f"/memory/{mid}/"),
                             ("GET", f"/memory/{mid}/extra"), ("GET", f"/memory/{mid}%2Fextra"),
                             ("GET", f"/memories/{mid}/x/related"), ("GET", "/recall/"), ("POST", "/memory/")):
            r = await http.request(method, path, json={"content": "x"} if method != "GET" else None)
            assert r.status_code == 404, (method, path, r.status_code, r.headers.get("location"))
            assert r.json()["status"] == "error" and r.json()["code"] == 404
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["state"] == "ACTIVE"
