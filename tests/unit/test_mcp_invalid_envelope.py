"""The JSON-RPC envelope of an MCP message, refused alike over both transports (re-check
round): a request whose ``jsonrpc`` is not ``"2.0"`` or whose ``method`` is no string was
answered over ``/mcp`` -32602 with pydantic's validation dump (``4 validation errors for
union[JSONRPCRequest,...``) and id null, while ``automem mcp`` answered -32600 with the id;
both answer a short -32600 naming the member now, with the id. And the 413 of ``/mcp`` for
an over-long ``content`` answered id null although the request's id came before the cut; it
echoes an id read whole now."""

from __future__ import annotations

import json

import httpx
import pytest

from automem.common.client import AutomemClient
from automem.common.settings import Settings
from automem.gateway.app import create_app
from automem.gateway.jsonrpc import oversized_content

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
#: (body, id answered, the message's start)
ENVELOPES = [
    (b'{"jsonrpc":"2.0","id":7,"method":5}', 7, "method: must be a string, got a number"),
    (b'{"jsonrpc":"1.0","id":7,"method":"tools/list"}', 7, 'jsonrpc: must be "2.0", got "1.0"'),
    (b'{"id":"a","method":"tools/list"}', "a", 'jsonrpc: missing, must be "2.0"'),
    (b'{"jsonrpc":2,"method":"notifications/initialized"}', None, 'jsonrpc: must be "2.0", got a number'),
    (b'{"jsonrpc":"2.0","id":8,"method":"tools/list","params":[1]}', 8, "params: must be an object"),
]


def assert_named(answer: dict, given_id, says: str) -> None:
    assert answer["id"] == given_id and answer["error"]["code"] == -32600, answer
    message = answer["error"]["message"]
    assert message.startswith(says) and "Invalid Request" in message, answer
    assert "validation error" not in message.lower() and len(message) < 200, answer


async def test_http_and_stdio_name_the_envelope_member_that_is_wrong() -> None:
    from automem.gateway.mcp_server import _strict_lines

    app = create_app(Settings(api_token=""), AutomemClient("127.0.0.1:9"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8001") as http:
            for body, given_id, says in ENVELOPES:
                r = await http.post("/mcp", content=body, headers=HEADERS)
                assert r.status_code == 400, (body, r.status_code, r.text)
                assert_named(r.json(), given_id, says)
            r = await http.post("/mcp", headers=HEADERS, content=json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}}))
            assert r.status_code == 200 and r.json()["id"] == 1, r.text

    async def source():
        for body, _, _ in ENVELOPES:
            yield body + b"\n"
        yield b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":null}\n'

    answers: list[dict] = []

    async def answer(body: dict) -> None:
        answers.append(body)

    passed = [json.loads(text) async for text in _strict_lines(source(), answer)]
    assert [m["id"] for m in passed] == [9]
    assert len(answers) == len(ENVELOPES), answers
    for got, (_, given_id, says) in zip(answers, ENVELOPES, strict=True):
        assert_named(got, given_id, says)


def _call(given_id, content: str, id_first: bool = True) -> bytes:
    params = {"name": "store_memory", "arguments": {"content": content}}
    if id_first:
        return json.dumps({"jsonrpc": "2.0", "id": given_id, "method": "tools/call", "params": params}).encode()
    return json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": params, "id": given_id}).encode()


@pytest.mark.parametrize(("prefix", "given_id"), [
    (_call(3, "a" * 5000)[:4000], 3),
    (_call("req-3", "a" * 5000)[:4000], "req-3"),
    (_call(None, "a" * 5000)[:4000], None),
    (_call(1.5, "a" * 5000)[:4000], None),
    # The id after the text: not read.
    (_call(3, "a" * 5000, id_first=False)[:4000], None),
    # The id read but the cut inside it (123456 read as 1234, "abcdef" as "abcd"): not read whole.
    (_call(123456, "a" * 3000, id_first=False)[:-3], None),
    (_call("abcdef", "a" * 3000, id_first=False)[:-4], None),
    # Read whole after the text: echoed.
    (_call(123456, "a" * 3000, id_first=False) + b"   ", 123456),
])
def test_the_content_413_echoes_an_id_read_whole(prefix: bytes, given_id) -> None:
    answer = oversized_content(prefix, 2000, len(prefix) - 1)
    assert answer is not None and answer["error"]["message"].startswith("content: "), answer
    assert answer["id"] == given_id, answer


async def test_http_mcp_content_413_carries_the_request_id() -> None:
    app = create_app(Settings(api_token=""), AutomemClient("127.0.0.1:9"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8001") as http:
            r = await http.post("/mcp", content=_call(3, "a" * 5_000_000), headers=HEADERS)
    assert r.status_code == 413, r.text[:300]
    assert r.json()["id"] == 3 and r.json()["error"]["message"].startswith("content: "), r.text[:300]
