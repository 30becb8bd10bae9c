"""Stores that stall or die (issue 12, items 10-12), on the real processes.

* A FalkorDB stopped with SIGSTOP: store, recall and get answer 503 with ``Retry-After``
  after the store bound (automem/common/timeouts.py), not after a minute; the write the
  server only runs after it resumes changes nothing (the write guard, automem/graph/store.py).
* A memory written to the graph whose event never went out is published again by the
  pending sweep (automem/enrich/pending.py) and enriched.

"Within the bound" is never a timed assert: the HTTP client waits far longer than the bound
(``CLIENT_TIMEOUT``), so a hang shows as a client timeout, and the answer must be the 503.
"""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from automem.common.embedded import EmbeddedFalkorDB
from automem.common.errors import Unavailable
from automem.common.settings import Settings
from automem.common.timeouts import StoreTimeout
from automem.ingest.logic import build_memory
from automem.v1 import ingest_service_pb2
from tests.conftest import eventually, start_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: The store bound these tests configure (seconds).
BOUND = 1.0
#: The HTTP client's own timeout: many times the bound, so a request that ignored the bound
#: would fail with a client timeout instead of an answer.
CLIENT_TIMEOUT = 30.0


class StoppableFalkorDB:
    """A service on a FalkorDB of its own, which the test stops (SIGSTOP) and resumes."""

    def __init__(self, server: EmbeddedFalkorDB, settings: Settings) -> None:
        self.server = server
        self.settings = settings
        self.service = None
        self.stopped = False

    def stop(self) -> None:
        os.kill(self.server.pid, signal.SIGSTOP)
        self.stopped = True

    def resume(self) -> None:
        if self.stopped:
            os.kill(self.server.pid, signal.SIGCONT)
            self.stopped = False


@pytest_asyncio.fixture(loop_scope="session")
async def stoppable(settings: Settings, tmp_path: Path):
    server = EmbeddedFalkorDB(tmp_path / "own-falkordb")
    await server.start()
    holder = StoppableFalkorDB(server, settings.model_copy(update={
        "falkordb_host": server.host, "falkordb_port": server.port, "store_timeout_seconds": BOUND}))
    try:
        holder.service = await start_service(holder.settings)
        try:
            yield holder
        finally:
            holder.resume()
            await holder.service.runner.stop()
    finally:
        holder.resume()
        await server.stop()


def _memory(content: str, scope: str, settings: Settings):
    return build_memory(ingest_service_pb2.MemoryInput(content=content), scope=scope, settings=settings,
                        created=datetime.now(UTC), source="test")


async def test_stopped_falkordb_answers_503_with_retry_after_and_recovers(stoppable) -> None:
    service = stoppable.service
    async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT) as http:
        stored = await http.post("/memory", json={"content": "the billing service uses Postgres"})
        assert stored.status_code in (200, 201), stored.text
        mid = stored.json()["memory_id"]
        stoppable.stop()
        try:
            answers = {
                "store": await http.post("/memory", json={"content": "written while the graph is stopped"}),
                "recall": await http.get("/recall", params={"query": "billing Postgres"}),
                "get": await http.get(f"/memory/{mid}"),
            }
        finally:
            stoppable.resume()
        for name, answer in answers.items():
            assert answer.status_code == 503, (name, answer.status_code, answer.text)
            assert int(answer.headers["Retry-After"]) > 0, name
            assert answer.json()["status"] == "error", name
        # Resumed: the same requests work again on the same connections' pool.
        again = await http.post("/memory", json={"content": "written after the graph resumed"})
        assert again.status_code in (200, 201), again.text
        assert (await http.get(f"/memory/{mid}")).status_code == 200
        graph = service.ctx.graph
        assert await graph.memories.count("default") == 2  # the stalled store left nothing


async def test_write_the_server_runs_after_its_caller_gave_up_changes_nothing(stoppable) -> None:
    graph = stoppable.service.ctx.graph
    memory = _memory("a write that waits in the socket while FalkorDB is stopped", "t/guard", stoppable.settings)
    stoppable.stop()
    try:
        with pytest.raises(StoreTimeout) as raised:
            await graph.memories.create_many([memory])
        assert isinstance(raised.value, Unavailable)
        # Let the bound pass for the command FalkorDB holds unread in its socket.
        await asyncio.sleep(BOUND + 0.5)
    finally:
        stoppable.resume()
    # FalkorDB now runs the buffered CREATE: past its deadline, it must write nothing.
    await eventually(graph.ping)
    assert await graph.memories.get(memory.id, "t/guard") is None
    assert await graph.memories.count("t/guard") == 0


async def test_grpc_call_with_stopped_falkordb_is_unavailable(stoppable) -> None:
    import grpc

    async with stoppable.service.client() as client:
        stoppable.stop()
        try:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await client.create_memory("stored over gRPC while the graph is stopped")
        finally:
            stoppable.resume()
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "did not answer within" in raised.value.details()
