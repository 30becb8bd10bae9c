"""A JSON-RPC request whose ``id`` is null, an object or an array is an invalid request
(JSON-RPC 2.0 section 5; MCP: a string or an integer, never null): the MCP SDK read it as a
notification and answered nothing (``POST /mcp`` 202, stdio silent), so the client waited for
its own timeout. Both transports answer -32600 with ``id: null`` now, naming ``id``; a message
without an ``id`` member stays a notification."""

from __future__ import annotations

import json

import httpx

from automem.common.client import AutomemClient
from automem.common.settings import Settings
from automem.gateway.app import create_app

INITIALIZE = {"jsonrpc": "2.0", "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}
INVALID_IDS = (None, {"a": 1}, [1], True, 1.5)


def assert_invalid_request(answer: dict) -> None:
    assert answer["id"] is None, answer
    assert answer["error"]["code"] == -32600, answer
    assert answer["error"]["message"].startswith("id: "), answer
    assert "Invalid Request" in answer["error"]["message"], answer


async def test_http_mcp_answers_a_request_with_an_invalid_id() -> None:
    app = create_app(Settings(api_token=""), AutomemClient("127.0.0.1:9"))
    headers = {"Accept": "application/json, text/event-stream"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8001") as http:
            for invalid in INVALID_IDS:
                r = await http.post("/mcp", json={**INITIALIZE, "id": invalid}, headers=headers)
                assert r.status_code == 400, (invalid, r.status_code, r.text)
                assert_invalid_request(r.json())
            # Valid messages are answered as before: a request, and a notification (no id).
            r = await http.post("/mcp", json={**INITIALIZE, "id": "init-1"}, headers=headers)
            assert r.status_code == 200 and r.json()["id"] == "init-1", r.text
            r = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                headers=headers)
            assert r.status_code == 202, r.text


async def test_stdio_answers_a_request_with_an_invalid_id() -> None:
    from automem.gateway.mcp_server import _strict_lines

    lines = [json.dumps({**INITIALIZE, "id": invalid}).encode() for invalid in INVALID_IDS]
    lines += [json.dumps({**INITIALIZE, "id": 7}).encode(),
              json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()]

    async def source():
        for line in lines:
            yield line + b"\n"

    answers: list[dict] = []

    async def answer(body: dict) -> None:
        answers.append(body)

    passed = [json.loads(text) async for text in _strict_lines(source(), answer)]
    assert len(answers) == len(INVALID_IDS), answers
    for body in answers:
        assert_invalid_request(body)
    # The valid request and the notification go on to the SDK unchanged.
    assert [m.get("id") for m in passed] == [7, None] and "id" not in passed[1]
