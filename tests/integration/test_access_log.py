"""Access lines (issue 15, item 8) on the real running service: one INFO line on
``automem.access`` per REST request (gateway) and per gRPC call (the gRPC server), with the
route, status, duration, principal id and requested scope — never the key itself."""

from __future__ import annotations

import logging

import grpc
import pytest

from tests.conftest import LogCapture, eventually


@pytest.fixture
def access_lines():
    capture, access = LogCapture(), logging.getLogger("automem.access")
    old = access.level
    access.setLevel(logging.INFO)
    access.addHandler(capture)
    try:
        yield capture.records
    finally:
        access.removeHandler(capture)
        access.setLevel(old)


async def test_rest_and_grpc_calls_each_write_one_access_line(service, access_lines) -> None:
    async with service.http() as http:
        r = await http.get("/recall", params={"query": "access line probe", "limit": 3})
        assert r.status_code == 200
        assert (await http.get("/memory/no-such-id")).status_code == 404
    async with service.client() as client:
        await client.search("access line probe", limit=3)
        with pytest.raises(grpc.aio.AioRpcError):
            await client.get_memory("no-such-id")

    def mine(kind: str) -> list[logging.LogRecord]:
        return [r for r in access_lines if r.kind == kind and r.scope == service.scope]

    async def logged() -> bool:  # the gateway writes its line once the response is sent
        return len(mine("http")) >= 2 and len(mine("grpc")) >= 2
    await eventually(logged)
    http_lines = {(r.route, r.method, r.status) for r in mine("http")}
    assert ("/recall", "GET", 200) in http_lines and ("/memory/{memory_id}", "GET", 404) in http_lines
    grpc_lines = {(r.route, r.status) for r in mine("grpc")}
    assert ("/automem.v1.RecallService/SearchMemories", "OK") in grpc_lines
    assert ("/automem.v1.RecallService/GetMemory", "NOT_FOUND") in grpc_lines
    for record in mine("http") + mine("grpc"):
        assert record.levelno == logging.INFO and record.duration_ms >= 0
        assert record.principal == "anonymous"
    # The gateway's own gRPC calls are logged by the server too: one line per REST request.
    assert {r.route for r in mine("grpc")} >= {"/automem.v1.RecallService/SearchMemories"}
