"""The event stream (issue 13 items 8 and 12): ``GET /stream`` server-sent events and
ReviewService.StreamMemoryEvents on the real service, fed from the durable JetStream log.

Pins: store/update/delete arrive in order under AutoMem's names and payload shape
(automem/api/stream.py, automem/api/runtime_memory_routes.py in verygoodplugins/automem);
another scope's events never appear; ``Last-Event-ID`` resumes with exactly the missed
events, through the same gateway or a new one; an id older than the retention gets a first
``stream.trimmed`` event; keep-alive comments come at the configured interval; a client that
does not read is cut off with a final ``stream.overflow`` event and loses nothing when it
resumes; the gRPC stream carries the same events."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from automem.common.bus import Bus
from automem.v1 import event_stream_pb2, events_pb2
from tests.conftest import ScopedService, eventually, fresh_scope, start_service

#: Every target but enrich (no enrichment events).
NO_ENRICH = ["ingest", "recall", "consolidate", "gateway"]
#: Guard against a hang (the stream never ends by itself); no assert depends on it.
READ_GUARD = 60.0


class Reader:
    """The parsed messages of one open ``/stream`` (comments skipped by httpx-sse)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.it = source.aiter_sse()

    async def next(self) -> tuple[int | None, dict[str, Any]]:
        sse = await asyncio.wait_for(anext(self.it), READ_GUARD)
        return (int(sse.id) if sse.id else None), json.loads(sse.data)

    async def until(self, stop) -> list[tuple[int | None, dict[str, Any]]]:
        """Messages up to and including the first for which ``stop(id, body)`` holds."""
        out = []
        while True:
            item = await self.next()
            out.append(item)
            if stop(*item):
                return out


def _is(kind: str, memory_id: str):
    return lambda _id, body: body["type"] == kind and body["data"].get("id") == memory_id


async def _store(http: httpx.AsyncClient, content: str, **extra: Any) -> str:
    r = await http.post("/memory", json={"content": content, **extra})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def test_store_update_delete_arrive_in_order_with_automems_names_and_fields(service: ScopedService) -> None:
    async with service.http() as http, aconnect_sse(http, "GET", "/stream") as source:
        assert source.response.status_code == 200
        assert source.response.headers["content-type"].startswith("text/event-stream")
        reader = Reader(source)
        mid = await _store(http, "The deploy runs on Fridays " + "x" * 120, tags=["ops", "deploy"], importance=0.7)
        assert (await http.patch(f"/memory/{mid}", json={"content": "The deploy runs on Thursdays"})).status_code == 200
        assert (await http.delete(f"/memory/{mid}")).status_code == 200
        got = await reader.until(_is("memory.delete", mid))
    mine = [(i, b) for i, b in got if b["data"].get("id") == mid and b["type"].startswith("memory.")]
    assert [b["type"] for _, b in mine] == ["memory.store", "memory.update", "memory.delete"]
    ids = [i for i, _ in got]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(set(ids))
    store = mine[0][1]
    # AutoMem's envelope and memory.store payload.
    assert set(store) >= {"type", "timestamp", "data"}
    assert store["data"]["content_preview"] == ("The deploy runs on Fridays " + "x" * 120)[:100] + "..."
    assert store["data"]["tags"] == ["ops", "deploy"]
    assert store["data"]["importance"] == pytest.approx(0.7)
    assert store["data"]["type"] == "Context" or store["data"]["type"]
    assert store["data"]["size_bytes"] == len("The deploy runs on Fridays " + "x" * 120)
    assert store["data"]["scope"] == service.scope
    update = mine[1][1]["data"]
    assert update["content_preview"] == "The deploy runs on Thursdays" and update["content_changed"] is True


async def test_another_scopes_events_never_appear(shared_service) -> None:
    mine, other = ScopedService(shared_service, fresh_scope()), ScopedService(shared_service, fresh_scope())
    async with mine.http() as http, other.http() as other_http, aconnect_sse(http, "GET", "/stream") as source:
        reader = Reader(source)
        foreign = await _store(other_http, "a secret of the other scope")
        await other_http.post("/memory", json={"content": "another secret of the other scope"})
        assert (await other_http.get("/recall", params={"query": "secret"})).status_code == 200
        marker = await _store(http, "my own memory")
        got = await reader.until(_is("memory.store", marker))
    assert all(b["data"]["scope"] == mine.scope for _, b in got)
    assert foreign not in json.dumps(got) and "secret" not in json.dumps(got)


async def test_last_event_id_resumes_with_exactly_the_missed_events(service: ScopedService) -> None:
    async with service.http() as http:
        async with aconnect_sse(http, "GET", "/stream") as source:
            first = await _store(http, "before the disconnect")
            (seen, _), = [m for m in await Reader(source).until(_is("memory.store", first))
                          if m[1]["data"].get("id") == first]
        missed = [await _store(http, f"while away {n}") for n in range(3)]
        async with aconnect_sse(http, "GET", "/stream", headers={"Last-Event-ID": str(seen)}) as source:
            got = await Reader(source).until(_is("memory.store", missed[-1]))
    assert all(i > seen for i, _ in got)
    assert [b["data"]["id"] for _, b in got if b["type"] == "memory.store"] == missed
    ids = [i for i, _ in got]
    assert ids == sorted(set(ids))


async def test_resume_through_a_restarted_gateway_loses_nothing(service: ScopedService, settings) -> None:
    gateway_settings = settings.model_copy(update={"grpc_target": service.grpc})
    gateway = await start_service(gateway_settings, ["gateway"])
    headers = {"X-Automem-Scope": service.scope}
    try:
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as http, \
                aconnect_sse(http, "GET", "/stream") as source:
            reader = Reader(source)
            first = await _store(http, "through the first gateway")
            (seen, _), = [m for m in await reader.until(_is("memory.store", first))
                          if m[1]["data"].get("id") == first]
            # Stopped with the client connected: its stream ends with a final event (and does
            # not hold the stop).
            await gateway.runner.stop()
            rest = await reader.until(lambda _i, b: b["type"] == "stream.shutdown")
            seen = max([seen] + [i for i, _ in rest if i is not None])  # e.g. its enrichment.complete
            assert rest[-1][1]["data"]["last_event_id"] == seen
            with pytest.raises(StopAsyncIteration):
                await reader.next()
    finally:
        await gateway.runner.stop()
    # Written while no gateway runs (straight to the gRPC service).
    async with service.client() as client:
        missed = [(await client.create_memory(f"while the gateway is down {n}")).id for n in range(2)]
    gateway = await start_service(gateway_settings, ["gateway"])
    try:
        async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as http, \
                aconnect_sse(http, "GET", "/stream", headers={"Last-Event-ID": str(seen)}) as source:
            got = await Reader(source).until(_is("memory.store", missed[-1]))
    finally:
        await gateway.runner.stop()
    assert [b["data"]["id"] for _, b in got if b["type"] == "memory.store"] == missed
    assert all(i > seen for i, _ in got)


async def test_an_id_older_than_the_retention_gets_a_first_trimmed_event(own_service) -> None:
    async with own_service.http() as http:
        first = await _store(http, "soon trimmed")
        await _store(http, "also trimmed")
        kept = await _store(http, "kept")
        bus = Bus(own_service.settings)
        await bus.connect()
        try:
            retention = await bus.retention()
            await bus.js.purge_stream(own_service.settings.stream_name, seq=retention.last_seq)  # keep the last
            first_kept = (await bus.retention()).first_seq
        finally:
            await bus.close()
        async with aconnect_sse(http, "GET", "/stream", headers={"Last-Event-ID": "1"}) as source:
            reader = Reader(source)
            notice_id, notice = await reader.next()
            assert notice["type"] == "stream.trimmed" and notice_id is None
            assert notice["data"]["requested_after"] == 1 and notice["data"]["first_retained_id"] == first_kept
            nxt, _ = await reader.next()
            assert nxt == first_kept
    assert first and kept


async def test_bad_last_event_ids_answer_400_naming_the_header(service: ScopedService) -> None:
    async with service.http() as http:
        for value in ("abc", "-3", "1.5", "99999999999", "9" * 30):
            r = await http.get("/stream", headers={"Last-Event-ID": value})
            assert r.status_code == 400, (value, r.text)
            assert "Last-Event-ID" in r.json()["message"] or "after_sequence" in r.json()["message"]
        # Digits str.isdigit() takes and int() does not ("²": a 500), or reads as another
        # script's number ("٣" resumed after event 3), in the header and in the query.
        r = await http.get("/stream", headers={"Last-Event-ID": b"\xb2"})
        assert r.status_code == 400 and "Last-Event-ID" in r.json()["message"], r.text
        r = await http.get("/stream", headers={"Last-Event-ID": "\u0663".encode()})
        assert r.status_code == 400 and "'\u0663'" in r.json()["message"], r.text  # as sent, not Latin-1 text
        for value in ("\u00b2", "\u0663", "1\u00b9"):
            r = await http.get("/stream", params={"last_event_id": value})
            assert r.status_code == 400 and r.json()["message"].startswith("last_event_id: "), (value, r.text)


async def test_keepalive_comments_come_at_the_configured_interval(service: ScopedService, settings) -> None:
    gateway = await start_service(settings.model_copy(update={"grpc_target": service.grpc,
                                                              "stream_keepalive_seconds": 0.2}), ["gateway"])
    try:
        async with httpx.AsyncClient(base_url=gateway.url, headers={"X-Automem-Scope": service.scope},
                                     timeout=30) as http, http.stream("GET", "/stream") as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            comments = 0
            while comments < 3:
                # 50 intervals of slack: what this tells apart is 0.2 s from the library's
                # default (15 s) or AutoMem's 30 s, not a speed.
                line = await asyncio.wait_for(anext(lines), 10.0)
                comments += line == ": keepalive"
            status = (await http.get("/stream/status")).json()
            assert status["subscribers"] == 1 and status["keepalive_seconds"] == pytest.approx(0.2)
    finally:
        await gateway.runner.stop()


def _open_raw_stream(port: int, scope: str) -> socket.socket:
    """A /stream request on a socket with a tiny receive buffer, which the test then does
    not read (a slow client)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET /stream HTTP/1.1\r\nHost: x\r\nX-Automem-Scope: {scope}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n"
                 .encode())
    return sock


async def test_a_slow_client_gets_a_final_overflow_event_and_resumes_without_loss(settings) -> None:
    # A service of its own without enrichment (only the stores' events), a buffer of 1 event.
    running = await start_service(settings.model_copy(update={"stream_buffer_events": 1}), NO_ENRICH)
    port = int(running.url.rsplit(":", 1)[1])
    sock = await asyncio.to_thread(_open_raw_stream, port, running.scope)
    # ~1.6 KB per event: the kernel's socket buffers (loopback autotuning: up to 4 MiB) and the
    # server's transport buffer fill after a few MiB, then the gateway's 1 waiting event.
    tags = [c * 250 for c in "abcde"]
    stored: list[str] = []
    try:
        async with running.http() as http:
            await eventually(lambda: _subscribers(http))
            for _ in range(8):
                r = await http.post("/memory/batch", json={"memories": [
                    {"content": f"slow client memory {len(stored) + i}", "tags": tags} for i in range(500)]})
                assert r.status_code == 201, r.text
                stored += r.json()["memory_ids"]
            # The gateway, which shares this process's event loop with ingest, catches up with
            # the stream and finds the client too slow; its last event waits in the socket.
            await eventually(lambda: _slow_disconnects(http), timeout=READ_GUARD)
            # The gateway ends the response after the final event (Connection: close: then EOF).
            raw = await asyncio.wait_for(asyncio.to_thread(_read_all, sock), READ_GUARD)
            body = raw.split(b"\r\n\r\n", 1)[1].decode(errors="replace")
            events = _parse_chunked_sse(body)
            assert events[-1][1]["type"] == "stream.overflow"
            last = events[-1][1]["data"]["last_event_id"]
            delivered = [b["data"]["id"] for _, b in events if b["type"] == "memory.store"]
            assert last == [i for i, _ in events if i is not None][-1]
            assert len(delivered) < len(stored)
            async with aconnect_sse(http, "GET", "/stream", headers={"Last-Event-ID": str(last)}) as source:
                rest = await Reader(source).until(_is("memory.store", stored[-1]))
            resumed = [b["data"]["id"] for _, b in rest if b["type"] == "memory.store"]
            assert delivered + resumed == stored
    finally:
        sock.close()
        await running.runner.stop()


async def _slow_disconnects(http: httpx.AsyncClient) -> bool:
    return (await http.get("/stream/status")).json()["slow_disconnects"] == 1


async def _subscribers(http: httpx.AsyncClient) -> bool:
    return (await http.get("/stream/status")).json()["subscribers"] == 1


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while data := sock.recv(65536):
        chunks.append(data)
    return b"".join(chunks)


def _parse_chunked_sse(body: str) -> list[tuple[int | None, dict[str, Any]]]:
    """SSE messages of a chunked HTTP body (chunk-size lines dropped)."""
    out = []
    text = _dechunk(body)
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [ln[5:].strip() for ln in block.split("\n") if ln.startswith("data:")]
        ids = [ln[3:].strip() for ln in block.split("\n") if ln.startswith("id:")]
        if data:
            out.append((int(ids[0]) if ids else None, json.loads("\n".join(data))))
    return out


def _dechunk(body: str) -> str:
    out, rest = [], body
    while rest:
        size_line, _, rest = rest.partition("\r\n")
        size = int(size_line.strip() or "0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        rest = rest[size + 2:]
    return "".join(out)


async def test_grpc_stream_memory_events_carries_the_scopes_events(service: ScopedService) -> None:
    async with service.client() as client:
        call = client.review.StreamMemoryEvents(event_stream_pb2.StreamMemoryEventsRequest(scope=service.scope))
        await call.initial_metadata()
        created = await client.create_memory("seen over gRPC")
        try:
            while True:
                item = await asyncio.wait_for(call.read(), READ_GUARD)
                if item.WhichOneof("item") == "memory_event" and item.memory_event.memory_id == created.id:
                    break
        finally:
            call.cancel()
    assert item.sequence > 0
    assert item.memory_event.type == events_pb2.EVENT_TYPE_MEMORY_CREATED
    assert item.memory_event.scope == service.scope


async def test_recalls_and_consolidation_runs_arrive_with_automems_fields(service: ScopedService) -> None:
    async with service.http() as http, aconnect_sse(http, "GET", "/stream") as source:
        reader = Reader(source)
        await _store(http, "the recall target", tags=["alpha"])
        r = await http.get("/recall", params={"query": "the recall target", "limit": 7, "tags": "alpha"})
        assert r.status_code == 200, r.text
        recall = (await reader.until(lambda _i, b: b["type"] == "memory.recall"))[-1]
        r = await http.post("/consolidate", json={"mode": "decay", "dry_run": True})
        assert r.status_code == 200, r.text
        run = (await reader.until(lambda _i, b: b["type"] == "consolidation.run"))[-1]
    rid, body = recall
    assert rid is not None
    data = body["data"]
    assert data["query"] == "the recall target" and data["limit"] == 7 and data["tags"] == ["alpha"]
    assert data["result_count"] >= 0 and data["elapsed_ms"] >= 0 and data["scope"] == service.scope
    assert all(type(data[k]) is int for k in ("limit", "result_count", "elapsed_ms"))  # JSON integers, as AutoMem
    data = run[1]["data"]
    assert data["task_type"] == "decay" and data["success"] is True and data["steps"] == ["decay"]
    assert {"affected_count", "elapsed_ms", "next_scheduled"} <= set(data) and data["scope"] == service.scope
    assert type(data["affected_count"]) is int and type(data["elapsed_ms"]) is int


def _event(kind: int, memory_id: str) -> events_pb2.MemoryEvent:
    return events_pb2.MemoryEvent(event_id=f"{memory_id}-{kind}", type=kind, memory_id=memory_id, scope="default")


async def test_the_enrich_consumer_reads_no_enriched_events_and_an_old_one_is_narrowed_in_place(settings) -> None:
    """Enrichment skipped its own MEMORY_ENRICHED audit events after fetching them (half of
    every batch); its durable consumer now reads every memory event but those. A consumer an
    older version created (every memory event) is narrowed on start and keeps its position."""
    from automem.common.bus import ENRICH_DURABLE

    created, enriched = events_pb2.EVENT_TYPE_MEMORY_CREATED, events_pb2.EVENT_TYPE_MEMORY_ENRICHED
    bus = Bus(settings)
    await bus.connect()
    try:
        # An older version's consumer: every memory event; it has read the first two already.
        await bus.js.add_consumer(settings.stream_name, config=bus.consumer_config(
            ENRICH_DURABLE, filter_subject=bus.subjects.memory_all))
        await bus.publish_events([_event(created, "a"), _event(enriched, "a")])
        old = await bus.js.pull_subscribe_bind(durable=ENRICH_DURABLE, stream=settings.stream_name)
        for msg in await old.fetch(2, timeout=5):
            await msg.ack()
        await old.unsubscribe()
        await bus.publish_events([_event(created, "b"), _event(enriched, "b"), _event(created, "c"),
                                  events_pb2.MemoryEvent(event_id="d-del", type=events_pb2.EVENT_TYPE_MEMORY_DELETED,
                                                         memory_id="d", scope="default")])

        sub = await bus.pull_subscribe(ENRICH_DURABLE)
        info = await sub.consumer_info()
        assert sorted(info.config.filter_subjects) == bus.subjects.enrich_inputs
        assert bus.subjects.memory(enriched) not in info.config.filter_subjects
        assert info.num_pending == 3  # b and c created, d deleted: not b's enriched, not a's again
        got = [events_pb2.MemoryEvent.FromString(m.data) for m in await sub.fetch(10, timeout=5)]
        assert [(e.memory_id, e.type) for e in got] == [("b", created), ("c", created),
                                                       ("d", events_pb2.EVENT_TYPE_MEMORY_DELETED)]
        await sub.unsubscribe()

        # Binding again changes nothing; a restore recreates it with the same subjects.
        again = await bus.pull_subscribe(ENRICH_DURABLE)
        assert sorted((await again.consumer_info()).config.filter_subjects) == bus.subjects.enrich_inputs
        await again.unsubscribe()
        await bus.start_consumer_after(ENRICH_DURABLE, 1)
        restored = (await bus.js.consumer_info(settings.stream_name, ENRICH_DURABLE)).config
        assert sorted(restored.filter_subjects) == bus.subjects.enrich_inputs and restored.opt_start_seq == 2
    finally:
        await bus.close()


def _record_deliveries(bus: Bus, record: Callable[[Any], None]) -> None:
    """Make every read subscription of ``bus`` call ``record(msg)`` for each message it gets."""
    bind = bus.js.pull_subscribe_bind

    async def recording_bind(*args: Any, **kwargs: Any) -> Any:
        sub = await bind(*args, **kwargs)
        fetch = sub.fetch

        async def recording_fetch(*a: Any, **k: Any) -> Any:
            msgs = await fetch(*a, **k)
            for msg in msgs:
                record(msg)
            return msgs
        sub.fetch = recording_fetch
        return sub
    bus.js.pull_subscribe_bind = recording_bind


async def test_a_history_read_whose_nats_stops_delivering_is_an_error_not_a_short_history(settings, tmp_path) -> None:
    """A history read that NATS stops answering half-way (its server stopped with SIGSTOP
    right after the read's consumer was made) ended after 2 s without a message and returned
    what it had — here nothing — as if that were the memory's whole history. It is a
    StoreTimeout (HTTP 503) now. A message removed between the consumer's creation and the
    read (as a purge does) ends the read without one: the consumer then holds nothing more."""
    import os
    import signal

    from automem.common.embedded import EmbeddedNats
    from automem.common.timeouts import StoreTimeout

    server = EmbeddedNats(tmp_path / "own-nats")
    await server.start()
    # The default store bound (a shorter one made the consumer's creation time out on a loaded machine).
    bus = Bus(settings.model_copy(update={"nats_url": server.url}))
    await bus.connect()
    created, updated = events_pb2.EVENT_TYPE_MEMORY_CREATED, events_pb2.EVENT_TYPE_MEMORY_UPDATED
    stopped = False
    try:
        await bus.publish_events([_event(created, "a"), _event(updated, "a"), _event(created, "b")])
        bind = bus.js.pull_subscribe_bind

        async def bind_then_remove_a_message(*args: Any, **kwargs: Any) -> Any:
            sub = await bind(*args, **kwargs)
            info = await bus.js.stream_info(bus.settings.stream_name)
            await bus.js.delete_msg(bus.settings.stream_name, info.state.first_seq)  # a's creation
            return sub
        bus.js.pull_subscribe_bind = bind_then_remove_a_message
        assert [e.event_id for e in await bus.events_for("a")] == [f"a-{updated}"]

        async def bind_then_stop_nats(*args: Any, **kwargs: Any) -> Any:
            nonlocal stopped
            sub = await bind(*args, **kwargs)
            os.kill(server.pid, signal.SIGSTOP)
            stopped = True
            # SIGSTOP returns before every thread of the server has stopped: on a loaded
            # machine one still answered the read's first fetch.
            await eventually(lambda: _every_thread_stopped(server.pid), timeout=5.0)
            return sub
        bus.js.pull_subscribe_bind = bind_then_stop_nats
        with pytest.raises(StoreTimeout):
            await bus.events_for("a")
    finally:
        if stopped:
            os.kill(server.pid, signal.SIGCONT)
        await bus.close()
        await server.stop()


async def _every_thread_stopped(pid: int) -> bool:
    """True when every thread of process ``pid`` is stopped (state ``T`` in /proc)."""
    from pathlib import Path

    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("T", "t"):
            return False
    return True


async def test_a_backups_event_read_holds_one_batch_not_the_stream(settings) -> None:
    """A backup read every event of the stream into one list before writing the first
    (105 MiB resident for 20,000 events, bench/backup_events_memory.py). ``stream_events``
    yields each batch as it is fetched: when the first event comes, its consumer still holds
    the rest of the stream; all come in order, once; the consumer is gone after the read."""
    from automem.common.bus import READ_BATCH

    created = events_pb2.EVENT_TYPE_MEMORY_CREATED
    count = 3 * READ_BATCH + 7
    bus = Bus(settings)
    await bus.connect()
    try:
        for start in range(0, count, 500):
            await bus.publish_events([_event(created, f"m{i}") for i in range(start, min(count, start + 500))])
        stream = bus.settings.stream_name
        read = bus.stream_events()
        first = await anext(read)
        consumers = [c for c in await bus.js.consumers_info(stream) if c.name.startswith("read-")]
        assert len(consumers) == 1 and consumers[0].num_pending >= count - READ_BATCH
        rest = [e async for e in read]
        assert [e.memory_id for e in [first, *rest]] == [f"m{i}" for i in range(count)]
        assert not [c for c in await bus.js.consumers_info(stream) if c.name.startswith("read-")]
    finally:
        await bus.close()


async def test_a_cancelled_history_read_leaves_no_consumer(settings) -> None:
    """History reads cut off by a gRPC deadline left their consumers on the stream for 60 s
    (break-it round M: 56 after two rounds of 60 reads): a read cancelled when its consumer
    was made but its reply not yet read, or while it reads, now removes its consumer."""
    created, updated = events_pb2.EVENT_TYPE_MEMORY_CREATED, events_pb2.EVENT_TYPE_MEMORY_UPDATED
    bus = Bus(settings)
    await bus.connect()
    stream = bus.settings.stream_name

    async def reads() -> list[str]:
        return [c.name for c in await bus.js.consumers_info(stream) if c.name.startswith("read-")]
    try:
        await bus.publish_events([_event(created, "a"), _event(updated, "a")])
        add = bus.js.add_consumer

        async def made_then_cancelled(*args: Any, **kwargs: Any) -> Any:
            await add(*args, **kwargs)
            raise asyncio.CancelledError  # as a deadline arriving while the reply was on its way
        bus.js.add_consumer = made_then_cancelled
        with pytest.raises(asyncio.CancelledError):
            await bus.events_for("a")
        bus.js.add_consumer = add
        assert await reads() == []

        bind = bus.js.pull_subscribe_bind
        cancelled = asyncio.Event()

        async def bind_then_wait(*args: Any, **kwargs: Any) -> Any:
            sub = await bind(*args, **kwargs)
            cancelled.set()
            await asyncio.sleep(30)  # the caller's deadline comes first
            return sub
        bus.js.pull_subscribe_bind = bind_then_wait
        read = asyncio.ensure_future(bus.events_for("a"))
        await cancelled.wait()
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        assert await eventually(lambda: _no_reads(reads)) is True
    finally:
        await bus.close()


async def _no_reads(reads) -> bool:
    return await reads() == []


async def test_a_live_stream_tells_of_the_events_the_retention_removed_before_it_read_them(settings) -> None:
    """An open stream whose reader falls behind while the retention trims the stream past
    where it is: the tail jumps over the removed messages, and the stream says so with a
    ``trimmed`` item (as a resume after a trimmed id does) before it goes on, never a silent
    gap. The reader does not read while the events are written; its channel has a fixed
    HTTP/2 window (no BDP probing), so the service holds at most a batch and a window of
    them (~100 of the ~1 KB events) when the retention (30 KB) removes the rest of the 400."""
    running = await start_service(settings.model_copy(update={"event_retention_bytes": 30_000}), NO_ENRICH)
    try:
        async with running.client(channel_options=[("grpc.http2.bdp_probe", 0)]) as client, \
                running.http() as http:
            call = client.review.StreamMemoryEvents(event_stream_pb2.StreamMemoryEventsRequest())
            await call.initial_metadata()
            begin = (await running.ctx.bus.retention()).last_seq
            for batch in range(4):
                r = await http.post("/memory/batch", json={"memories": [
                    {"content": f"flood {batch}-{i} " + "x" * 800} for i in range(100)]})
                assert r.status_code == 201, r.text
            retention = await running.ctx.bus.retention()
            assert retention.first_seq > begin + 300  # the retention removed most of them
            items = []
            try:
                while not items or items[-1].WhichOneof("item") == "trimmed" or items[-1].sequence < retention.last_seq:
                    items.append(await asyncio.wait_for(call.read(), READ_GUARD))
            finally:
                call.cancel()
    finally:
        await running.runner.stop()
    events = [it for it in items if it.WhichOneof("item") != "trimmed"]
    assert events[-1].sequence == retention.last_seq
    previous, jumps = begin, 0
    for before, it in zip([None, *items], items, strict=False):
        if it.WhichOneof("item") == "trimmed":
            continue
        if it.sequence != previous + 1:  # a gap: the item before says what is gone
            jumps += 1
            assert before is not None and before.WhichOneof("item") == "trimmed", (previous, it.sequence)
            assert before.trimmed.requested_after_sequence == previous == before.sequence
            assert previous < before.trimmed.first_retained_sequence <= it.sequence
            assert before.trimmed.HasField("retained_since_time")
        previous = it.sequence
    assert jumps >= 1  # the reader was behind the retention: what it missed was said


async def test_events_for_ends_with_the_last_memory_event_not_the_streams_last_message(settings) -> None:
    """A memory's history (and a backup) read the memory subjects until the stream's last
    sequence; after a recall that is an activity message the reader never gets, so every
    read waited out its 2 s idle timeout. It now ends with its consumer's last pending
    message: every event comes back and no read ever waits for a message that does not come."""
    from automem.common.lifecycle import make_activity

    created, updated = events_pb2.EVENT_TYPE_MEMORY_CREATED, events_pb2.EVENT_TYPE_MEMORY_UPDATED
    bus = Bus(settings)
    await bus.connect()
    idle = []  # each wait of a read's subscription that ended without a message
    subscribe = bus.js.subscribe

    async def counted_subscribe(*args: Any, **kwargs: Any) -> Any:
        sub = await subscribe(*args, **kwargs)
        next_msg = sub.next_msg

        async def counted_next_msg(*a: Any, **k: Any) -> Any:
            try:
                return await next_msg(*a, **k)
            except Exception as exc:
                idle.append(repr(exc))
                raise
        sub.next_msg = counted_next_msg
        return sub
    bus.js.subscribe = counted_subscribe
    try:
        await bus.publish_activity(make_activity("memory.recall", "default", {"query": "x"}))
        assert await bus.events_for(None) == []  # activity only: nothing to read
        await bus.publish_events([_event(created, "a"), _event(created, "b"), _event(updated, "a")])
        await bus.publish_activity(make_activity("memory.recall", "default", {"query": "y"}))
        await bus.publish_activity(make_activity("consolidation.run", "default", {"task_type": "decay"}))
        assert [e.event_id for e in await bus.events_for("a")] == [f"a-{created}", f"a-{updated}"]
        assert [e.event_id for e in await bus.events_for(None)] == [f"a-{created}", f"b-{created}", f"a-{updated}"]
        assert [e.event_id for e in await bus.events_for("a", limit=1)] == [f"a-{created}"]
        assert idle == []
    finally:
        await bus.close()


async def test_a_memorys_history_starts_at_its_creation_not_the_streams_first_message(settings) -> None:
    """A memory's history read every memory message the stream held (~1 s per read at
    10,000 memories, growing with the store): ``events_for(..., since=)`` lets the server
    start at a time, and the history starts at the memory's ``create_time`` less a margin
    (automem/ingest/review.py ``HISTORY_CLOCK_SKEW_SECONDS``). Every event of the memory
    comes back — its own and a relation's that names it as the target — and the messages
    stored before ``since`` are never delivered."""
    import time

    created, updated, related = (events_pb2.EVENT_TYPE_MEMORY_CREATED, events_pb2.EVENT_TYPE_MEMORY_UPDATED,
                                 events_pb2.EVENT_TYPE_RELATION_CREATED)
    bus = Bus(settings)
    await bus.connect()
    delivered: list[str] = []  # the memory ids of every message a read received
    _record_deliveries(bus, lambda msg: delivered.append(events_pb2.MemoryEvent.FromString(msg.data).memory_id))
    try:
        await bus.publish_events([_event(created, f"older-{i}") for i in range(20)])
        await asyncio.sleep(1.0)
        since = time.time() - 0.3
        link = events_pb2.MemoryEvent(event_id="link", type=related, memory_id="other", scope="default")
        link.relation.source_id, link.relation.target_id = "other", "late"
        await bus.publish_events([_event(created, "late"), _event(created, "other"), link, _event(updated, "late")])
        want = [f"late-{created}", "link", f"late-{updated}"]

        delivered.clear()
        assert [e.event_id for e in await bus.events_for("late", since=since)] == want
        assert sorted(set(delivered) - {"other"}) == ["late"]  # none of the 20 older messages

        delivered.clear()
        assert [e.event_id for e in await bus.events_for("late")] == want  # from the first: the same events
    finally:
        await bus.close()


async def test_the_retention_time_is_read_when_the_first_message_goes_between_the_reads(settings) -> None:
    """Where the stream begins is two reads (the stream's first sequence, then that message's
    time); when the retention removed that message between them the time was left out, and a
    live stream's ``trimmed`` notice came without ``retained_since_time`` (CI, under load).
    The first message is taken away once here, as the retention does: the time is still read."""
    from nats.js.errors import NotFoundError

    bus = Bus(settings)
    await bus.connect()
    get_msg = bus.js.get_msg
    removed: list[int] = []

    async def retention_removes_it_once(stream: str, seq: int, *args: Any, **kwargs: Any) -> Any:
        if not removed:
            removed.append(seq)
            await bus.js.delete_msg(stream, seq)
            raise NotFoundError()
        return await get_msg(stream, seq, *args, **kwargs)
    try:
        await bus.publish_events([_event(events_pb2.EVENT_TYPE_MEMORY_CREATED, f"r-{i}") for i in range(3)])
        bus.js.get_msg = retention_removes_it_once
        retention = await bus.retention()
        assert removed and retention.first_time is not None
        assert retention.first_seq == removed[0] + 1
    finally:
        await bus.close()
