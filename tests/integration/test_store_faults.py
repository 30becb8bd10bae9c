"""Stores that stall or die (issue 12, items 10-12), on the real processes.

* A FalkorDB stopped with SIGSTOP: store, recall and get answer 503 with ``Retry-After``
  after the store bound (automem/common/timeouts.py), not after a minute; the write the
  server only runs after it resumes changes nothing (the write guard, automem/graph/store.py).
* ``/health`` with that FalkorDB stopped reports FalkorDB down and the vector store and NATS
  up (each store checked concurrently within a short bound), with the default store bound too.
* A memory written to the graph whose event never went out is published again by the
  pending sweep (automem/enrich/pending.py) and enriched, with vectors disabled too.

"Within the bound" is never a timed assert: the HTTP client waits far longer than the bound
(``CLIENT_TIMEOUT``), so a hang shows as a client timeout, and the answer must be the 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from automem.common.embedded import EmbeddedFalkorDB, EmbeddedNats
from automem.common.errors import Unavailable
from automem.common.keys import KeyStore
from automem.common.settings import Settings
from automem.common.timeouts import StoreTimeout
from automem.graph import GraphStore
from automem.ingest.logic import build_memory
from automem.v1 import enrich_service_pb2, events_pb2, ingest_service_pb2, memory_pb2
from tests.conftest import LogCapture, eventually, start_service

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


@contextlib.asynccontextmanager
async def _on_own_falkordb(settings: Settings, tmp_path: Path, **update) -> AsyncIterator[StoppableFalkorDB]:
    """A service (``settings`` with ``update``) on a FalkorDB of its own."""
    server = EmbeddedFalkorDB(tmp_path / "own-falkordb")
    await server.start()
    holder = StoppableFalkorDB(server, settings.model_copy(update={
        "falkordb_host": server.host, "falkordb_port": server.port, **update}))
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


@pytest_asyncio.fixture(loop_scope="session")
async def stoppable(settings: Settings, tmp_path: Path):
    """The service with the store bound :data:`BOUND`."""
    async with _on_own_falkordb(settings, tmp_path, store_timeout_seconds=BOUND) as holder:
        yield holder


@pytest_asyncio.fixture(loop_scope="session", params=[BOUND, None], ids=["short-bound", "default-bound"])
async def stoppable_either_bound(settings: Settings, tmp_path: Path, request: pytest.FixtureRequest):
    """The service with the store bound :data:`BOUND`, then with the default one
    (``AUTOMEM_STORE_TIMEOUT_S``, 5 s: far past the gateway's health bound,
    automem/gateway/usecases.py ``HEALTH_TIMEOUT``)."""
    update = {} if request.param is None else {"store_timeout_seconds": request.param}
    async with _on_own_falkordb(settings, tmp_path, **update) as holder:
        yield holder


def _memory(content: str, scope: str, settings: Settings, created: datetime | None = None):
    return build_memory(ingest_service_pb2.MemoryInput(content=content), scope=scope, settings=settings,
                        created=created or datetime.now(UTC), source="test")


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


async def test_health_with_stopped_falkordb_reports_it_down_and_the_other_stores_up(stoppable_either_bound) -> None:
    """/health took ~10 s with FalkorDB stopped and reported the vector store (default bound:
    the stats answer came after the gateway's deadline) and NATS (the enrichment status read
    the outbox backlog from FalkorDB) as down too. Each store is now asked concurrently within
    a short bound: the answer names FalkorDB alone."""
    stoppable = stoppable_either_bound
    service = stoppable.service
    async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT) as http:
        stored = await http.post("/memory", json={"content": "the billing service uses Postgres"})
        assert stored.status_code in (200, 201), stored.text
        healthy = (await http.get("/health")).json()
        assert (healthy["falkordb"], healthy["qdrant"], healthy["nats"]) == ("connected", "connected", "connected")
        stoppable.stop()
        try:
            answer = await http.get("/health")
            async with service.client() as client:  # the open RPC /health reads (no key check)
                (status,) = await asyncio.gather(client.enrich.GetEnrichmentStatus(
                    enrich_service_pb2.GetEnrichmentStatusRequest(), timeout=CLIENT_TIMEOUT), return_exceptions=True)
        finally:
            stoppable.resume()
        body = answer.json()
        assert answer.status_code == 503, body
        assert body["status"] == "degraded"
        assert (body["falkordb"], body["qdrant"], body["nats"]) == ("disconnected", "connected", "connected"), body
        assert body["enrichment"] is not None and "error" not in body, body
        assert "sync_status" not in body, body  # not from a count the stopped graph could not give
        assert body["memory_count"] is None, body  # unknown, not 0: the graph did not answer
        assert isinstance(body["vector_count"], int), body
        # The enrichment status answers without the outbox backlog FalkorDB holds (unknown).
        assert isinstance(status, enrich_service_pb2.GetEnrichmentStatusResponse), status
        assert not status.HasField("outbox_backlog") and not status.HasField("memories_pending")
        await eventually(lambda: service.ctx.graph.ping())
        again = (await http.get("/health")).json()
        assert (again["falkordb"], again["qdrant"], again["nats"]) == ("connected", "connected", "connected")
        assert isinstance(again["memory_count"], int) and again["memory_count"] >= 1, again
        assert (await http.get("/enrichment/status")).json()["outbox_backlog"] == 0


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


async def test_consolidation_scheduler_outlives_a_graph_that_does_not_answer_at_start(stoppable) -> None:
    """The scheduler reads the run history when it starts. With FalkorDB not answering then
    (stalled under load), the read's StoreTimeout ended its task, and ``automem up`` exits 1
    when a module's background task dies (automem/cli/main.py ``_watch``): a whole service
    went down seconds after start. It now reads again until the graph answers."""
    from automem.consolidate.scheduler import Scheduler

    ctx = stoppable.service.ctx
    settings = stoppable.settings.model_copy(update={"sync_check_interval_seconds": 3600.0})
    scheduler = Scheduler(settings, ctx.consolidate_scheduler.servicer)
    stoppable.stop()
    try:
        task = asyncio.create_task(scheduler.run())
        # Past the store bound twice over: the first read has failed (StoreTimeout) by now.
        await asyncio.wait([task], timeout=BOUND * 3)
        assert not task.done(), task.exception()
        assert scheduler.next_run_times() == {}
    finally:
        stoppable.resume()
    async def scheduled() -> bool:
        return "sync" in scheduler.next_run_times()

    try:
        await eventually(scheduled, timeout=60)
        assert not task.done()
    finally:
        scheduler.stop()
        await asyncio.wait_for(task, timeout=30)


async def _enriched(graph, memory_id: str, scope: str) -> bool:
    memory = await graph.memories.get(memory_id, scope)
    return memory is not None and memory.embedding_status == memory_pb2.EMBEDDING_STATUS_DONE


async def _write_orphan(settings: Settings, text: str) -> memory_pb2.Memory:
    """Writes one memory to the graph through the repository and publishes no event: the
    crash point between the graph write and the publish. Returns the memory written."""
    graph = GraphStore(settings)
    try:
        await graph.ensure_schema()
        orphan = _memory(text, "default", settings)
        await graph.memories.create_many([orphan])
        assert (await graph.memories.get(orphan.id, "default")).embedding_status == memory_pb2.EMBEDDING_STATUS_PENDING
    finally:
        await graph.close()
    return orphan


async def test_memory_written_without_its_event_is_enriched_after_a_start(settings: Settings) -> None:
    """The crash point between the graph write and the publish: the node is written through
    the repository and no event is published; a service started afterwards enriches it."""
    settings = settings.model_copy(update={"pending_sweep_min_age_seconds": 0.0,
                                           "pending_sweep_interval_seconds": 3600.0})
    orphan = await _write_orphan(settings, "written to the graph by a process that died before publishing")
    service = await start_service(settings)
    try:
        # Only the sweep at start can find it (the next round is an hour away).
        await eventually(lambda: _enriched(service.ctx.graph, orphan.id, "default"), timeout=60)
        async with service.http() as http:
            async def counts_match():
                body = (await http.get("/health")).json()
                return body["memory_count"] == body["vector_count"] == 1 and body
            await eventually(counts_match, timeout=60)
        history = await service.ctx.bus.events_for(orphan.id)
        created = [e for e in history if e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED]
        assert [e.actor for e in created] == ["system:pending-sweep"]
    finally:
        await service.runner.stop()


async def test_memory_written_without_its_event_is_enriched_after_a_start_with_vectors_disabled(
        settings: Settings) -> None:
    """The sweep ran only with vectors: with ``QDRANT_URL=disabled`` an orphan stayed pending
    for good. It runs without them too, finds the orphan by its ``enrichment_status`` (its
    ``embedding_status`` stays PENDING without vectors), and does not republish it once
    enriched."""
    from automem.enrich.pending import PendingSweep

    settings = settings.model_copy(update={"qdrant_url": "disabled", "pending_sweep_min_age_seconds": 0.0,
                                           "pending_sweep_interval_seconds": 3600.0})
    orphan = await _write_orphan(settings, "written without vectors by a process that died before publishing")
    service = await start_service(settings)
    try:
        ctx = service.ctx

        async def enriched():  # only the sweep at start can find it (the next round is an hour away)
            memory = await ctx.graph.memories.get(orphan.id, "default")
            return memory.enrichment_status == memory_pb2.ENRICHMENT_STATUS_DONE
        await eventually(enriched, timeout=60)
        assert [e.actor for e in await ctx.bus.events_for(orphan.id)
                if e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED] == ["system:pending-sweep"]
        sweep = PendingSweep(settings, ctx.bus, ctx.graph, ctx.publisher, ctx.enrich_consumer.sub)
        assert await sweep.sweep_once() == 0
    finally:
        await service.runner.stop()


async def test_running_service_republishes_an_orphan_but_not_a_queued_memory(own_service) -> None:
    """A round while the service runs: an orphan last written a minute ago is republished
    even while other events wait; a memory whose event waits in the stream is not (the
    consumer is stopped, so that event stays unprocessed and the cutoff stays before it)."""
    from automem.enrich.pending import PendingSweep

    ctx = own_service.ctx
    settings = own_service.settings.model_copy(update={"pending_sweep_min_age_seconds": 5.0})
    ctx.enrich_consumer.stop()
    await asyncio.wait([ctx.enrich_task], timeout=15)
    sweep = PendingSweep(settings, ctx.bus, ctx.graph, ctx.publisher, ctx.enrich_consumer.sub)
    orphan = _memory("written without an event a minute ago", "default", settings,
                     created=datetime.now(UTC) - timedelta(minutes=1))
    await ctx.graph.memories.create_many([orphan])
    async with own_service.http() as http:
        queued = (await http.post("/memory", json={"content": "stored normally, its event is queued"})).json()
    assert await sweep.sweep_once() == 1
    assert await sweep.sweep_once() == 0  # sent already: not again while its event waits
    ctx.enrich_consumer._stop.clear()
    ctx.tasks.append(asyncio.create_task(ctx.enrich_consumer.run()))
    for mid in (queued["memory_id"], orphan.id):
        await eventually(lambda mid=mid: _enriched(ctx.graph, mid, "default"), timeout=60)
    assert [e.actor for e in await ctx.bus.events_for(orphan.id)
            if e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED] == ["system:pending-sweep"]
    # The queued memory was never republished: its only CREATED event is the store's own.
    assert [e.actor for e in await ctx.bus.events_for(queued["memory_id"])
            if e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED] == ["anonymous"]


async def test_nats_outage_logs_one_warning_not_a_traceback_per_reconnect(own_nats) -> None:
    """nats-py's default error callback logged ERROR with a traceback at every reconnect
    attempt (twice a second per process); now the outage is one WARNING line, the attempts
    after it DEBUG, and its end one INFO line."""
    bus_log, nats_log = logging.getLogger("automem.common.bus"), logging.getLogger("nats")
    ours, theirs = LogCapture(), LogCapture()
    level = bus_log.level
    bus_log.setLevel(logging.DEBUG)
    bus_log.addHandler(ours)
    nats_log.addHandler(theirs)
    try:
        await own_nats.stop()

        async def attempts():  # a few reconnection attempts failed
            return len([r for r in ours.records if r.getMessage().startswith("NATS unreachable")]) >= 4
        await eventually(attempts, timeout=30)
        await own_nats.start()

        async def back():
            return any(r.getMessage() == "NATS reachable again" for r in ours.records)
        await eventually(back, timeout=30)
    finally:
        bus_log.removeHandler(ours)
        nats_log.removeHandler(theirs)
        bus_log.setLevel(level)
    unreachable = [r for r in ours.records if r.getMessage().startswith("NATS unreachable")]
    assert [r.levelno for r in unreachable[:2]] == [logging.WARNING, logging.DEBUG]
    assert {r.levelno for r in unreachable[1:]} == {logging.DEBUG}
    assert not [r for r in ours.records if r.exc_info] and not [r for r in theirs.records if r.levelno >= logging.ERROR]


async def test_health_reports_a_stopped_nats_server_unreachable(own_nats) -> None:
    """``/health`` said ``nats: connected`` while the nats-server was stopped (SIGSTOP): it
    took the enrichment service's answer, not the bus itself. It now asks the bus (a round
    trip within a short bound) and reports ``disconnected`` (status degraded) within its
    bound, then ``connected`` again once the server resumes."""
    pid = own_nats.nats.pid
    assert pid is not None
    async with httpx.AsyncClient(base_url=own_nats.service.url, timeout=CLIENT_TIMEOUT) as http:
        body = (await http.get("/health")).json()
        assert body["nats"] == "connected", body
        os.kill(pid, signal.SIGSTOP)
        try:
            body = (await http.get("/health")).json()
        finally:
            os.kill(pid, signal.SIGCONT)
        assert (body["nats"], body["status"]) == ("disconnected", "degraded"), body

        async def connected():
            found = (await http.get("/health")).json()
            return found if found["nats"] == "connected" else None

        await eventually(connected, timeout=30)


#: Seconds the client below waits for /health: the gateway's bound (automem/gateway/usecases.py
#: ``HEALTH_TIMEOUT``, 3.5 s) and one for the HTTP exchange — less than the 5 s the check took
#: before.
PROBE_TIMEOUT = 4.5


@pytest.mark.parametrize("stalled", ["falkordb", "nats"])
async def test_health_answers_a_probe_in_time_naming_the_stalled_process(settings: Settings, tmp_path: Path,
                                                                         stalled: str) -> None:
    """With FalkorDB or NATS stopped (SIGSTOP) and the default store bound, /health answered
    after 2 s (each service's store bound) and, once the key check the services remember for
    2 s had to ask the stopped FalkorDB again, after 5 s (the gateway's deadline) with every
    store ``unknown``. Every part is now asked at once under one bound, the services' store
    parts and key check under it, so each answer comes within it and names the stopped
    process alone."""
    falkordb, nats = EmbeddedFalkorDB(tmp_path / "own-falkordb"), EmbeddedNats(tmp_path / "own-nats")
    await falkordb.start()
    await nats.start()
    pid = {"falkordb": falkordb.pid, "nats": nats.pid}[stalled]
    service = await start_service(settings.model_copy(update={
        "falkordb_host": falkordb.host, "falkordb_port": falkordb.port, "nats_url": nats.url}))
    stopped = False
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=PROBE_TIMEOUT) as http:
            await eventually(lambda: _healthy(http))
            os.kill(pid, signal.SIGSTOP)
            stopped = True
            bodies = []
            for _ in range(3):
                answer = await http.get("/health")
                bodies.append((answer.status_code, answer.json()))
                await asyncio.sleep(KeyStore.CACHE_SECONDS)  # the remembered key check runs out
            os.kill(pid, signal.SIGCONT)
            stopped = False
            await eventually(lambda: _healthy(http), timeout=30)
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        await service.runner.stop()
        await nats.stop()
        await falkordb.stop()
    expected = {"falkordb": (503, "disconnected", "connected"), "nats": (200, "connected", "disconnected")}[stalled]
    for status, body in bodies:
        assert body["status"] == "degraded", body
        assert (status, body["falkordb"], body["nats"]) == expected, body
        assert body["qdrant"] == "connected", body


async def _healthy(http: httpx.AsyncClient) -> dict | None:
    """The /health body when it says healthy (a probe's timeout passing counts as not)."""
    try:
        body = (await http.get("/health")).json()
    except httpx.TimeoutException:
        return None
    return body if body["status"] == "healthy" else None
