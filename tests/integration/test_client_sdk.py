"""The client distribution (clients/python, ``automem_client``; issue 16 items 2, 4, 5)
against the real service: the whole surface over gRPC and REST, blocking and asyncio; errors
as typed exceptions naming the field; TLS with a certificate made here; a retried store that
stores once; a 1,000-memory listing walked page by page; the example script; the wheel
installed alone into an empty virtualenv.

The blocking client runs in a worker thread (``asyncio.to_thread``): the service runs on
this test's event loop, which must keep turning while the client waits.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
import pytest_asyncio
from automem_client import (
    Aborted,
    AsyncClient,
    Client,
    ClientClosed,
    DeadlineExceeded,
    InvalidArgument,
    MemoryInput,
    NotFound,
    Unavailable,
)

from tests.conftest import eventually, start_service
from tests.tls import TestCA

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "python"

pytestmark = pytest.mark.asyncio(loop_scope="session")


class Blocking:
    """A blocking :class:`Client` seen through the async interface: each call runs in a
    worker thread; an iterator's items are fetched there one by one."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        if name in ("iter_by_tag", "iter_history", "iter_versions", "events"):
            def iterate(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                return _thread_iter(method, args, kwargs)

            return iterate

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call

    async def close(self) -> None:
        await asyncio.to_thread(self.client.close)


async def _thread_iter(method: Any, args: tuple, kwargs: dict) -> AsyncIterator[Any]:
    iterator = await asyncio.to_thread(method, *args, **kwargs)
    done = object()
    try:
        while (item := await asyncio.to_thread(next, iterator, done)) is not done:
            yield item
    finally:
        await asyncio.to_thread(iterator.close)


async def make_client(service: Any, transport: str, mode: str, **kwargs: Any) -> Any:
    """An AsyncClient, or a blocking Client wrapped in :class:`Blocking`, on ``service``'s
    gRPC server or REST gateway, acting in the service's scope."""
    kwargs.setdefault("scope", service.scope)
    if mode == "async":
        return AsyncClient.grpc(service.grpc, **kwargs) if transport == "grpc" else AsyncClient.rest(
            service.url, **kwargs)
    make = Client.grpc if transport == "grpc" else Client.rest
    target = service.grpc if transport == "grpc" else service.url
    return Blocking(await asyncio.to_thread(make, target, **kwargs))


VARIANTS = [("grpc", "async"), ("grpc", "sync"), ("rest", "async"), ("rest", "sync")]


@pytest.fixture(params=VARIANTS, ids=[f"{t}-{m}" for t, m in VARIANTS])
def variant(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


@pytest.mark.parametrize("transport", ["grpc", "rest"])
async def test_a_client_built_outside_an_event_loop_works_in_asyncio_run(service, transport: str) -> None:
    """``AsyncClient.grpc(...)`` made its ``grpc.aio`` channel in the constructor, in no loop
    (or another one): built at module level and used in ``asyncio.run``, every call raised
    "attached to a different loop". The channel is made on the first call now, in the loop
    that runs it; a second ``asyncio.run`` (the first loop closed) works too, and ``close``.
    ``AsyncClient.rest`` failed the second ``asyncio.run`` ("Event loop is closed": its pooled
    connections belonged to the first loop); its HTTP client is made per loop the same way."""

    def outside() -> tuple[str, str, str, bool]:  # a thread with no event loop, as a script's top level
        client = (AsyncClient.grpc(service.grpc, scope=service.scope, timeout=30) if transport == "grpc"
                  else AsyncClient.rest(service.url, scope=service.scope, timeout=30))

        async def first() -> tuple[str, str]:
            stored = await client.store("Built outside the loop: the nightly export runs at two")
            return stored.id, (await client.get(stored.id)).content

        async def second(memory_id: str) -> str:
            try:
                return (await client.get(memory_id)).content
            finally:
                await client.close()

        memory_id, content = asyncio.run(first())
        return memory_id, content, asyncio.run(second(memory_id)), client.closed

    memory_id, content, again, closed = await asyncio.to_thread(outside)
    assert content == again == "Built outside the loop: the nightly export runs at two" and closed
    assert (await service.ctx.graph.memories.get(memory_id, service.scope)).id == memory_id


async def test_the_whole_surface(service, variant: tuple[str, str]) -> None:
    transport, mode = variant
    client = await make_client(service, transport, mode)
    try:
        # store: every input field comes back as given
        stored = await client.store("We chose Postgres for the billing service", tags=["db", "billing"],
                                    type="decision", importance=0.8, confidence=0.7, metadata={"team": "pay", "n": 3},
                                    timestamp="2026-03-01T10:00:00Z")
        memory = stored.memory
        assert not stored.deduplicated
        assert (memory.content, memory.type, memory.tags, memory.importance, memory.confidence) == (
            "We chose Postgres for the billing service", "Decision", ["db", "billing"], 0.8, 0.7)
        assert memory.metadata == {"team": "pay", "n": 3} and memory.scope == service.scope
        assert memory.timestamp == dt.datetime(2026, 3, 1, 10, tzinfo=dt.UTC) and memory.version >= 1
        key = "k-" + memory.id
        first = await client.store("Billing runs nightly", idempotency_key=key)
        repeated = await client.store("Billing runs nightly", idempotency_key=key)
        assert not first.deduplicated and repeated.deduplicated and repeated.id == first.id
        with pytest.raises(InvalidArgument) as reused:
            await client.store("other text", idempotency_key=key)
        assert reused.value.field == "idempotency_key"

        # get, update with etag (stale etag refused, nothing changed), get again
        assert memory.last_accessed is None
        got = await client.get(memory.id)
        assert got.id == memory.id and got.is_current is True and got.state == "ACTIVE"
        # A get bumps the last access over both transports, as REST's GET does (gRPC did not).
        assert (await client.get(memory.id)).last_accessed is not None
        updated = await client.update(memory.id, etag=got.version, importance=0.9, add_tags=["pg"],
                                      metadata={"extra": True})
        assert updated.importance == 0.9 and "pg" in updated.tags and updated.version > got.version
        assert updated.metadata == {"team": "pay", "n": 3, "extra": True}
        with pytest.raises(Aborted) as stale:
            await client.update(memory.id, etag=got.version, content="lost update")
        assert stale.value.code == grpc.StatusCode.ABORTED
        assert (await client.get(memory.id)).content == memory.content

        # errors name the field
        with pytest.raises(InvalidArgument) as bad:
            await client.store("x", importance=2)
        assert bad.value.field == "importance" and bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(NotFound):
            await client.get(str(uuid.uuid4()))

        # batch store, all or nothing; a bad item is named by its index
        batch = await client.store_batch(["MySQL was considered for billing", MemoryInput("Redis caches sessions",
                                                                                          tags=["cache"])])
        assert len(batch.memory_ids) == 2 and batch.deduplicated == [False, False]
        with pytest.raises(InvalidArgument) as bad_item:
            await client.store_batch(["fine", MemoryInput("also fine", importance=5)])
        assert bad_item.value.field == "memories[1].importance"

        # recall with filters
        found = await client.recall("billing database", tags=["db"], tag_mode="any", tag_match="exact", limit=3,
                                    start="2026-03-01", end="2026-03-02T00:00:00Z", sort="score",
                                    recency_bias="off", min_score=0.0, state_mode="current")
        assert [h.memory.id for h in found.results] == [memory.id] and found.limit == 3
        assert found.time_start == dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
        now = dt.datetime.now(dt.UTC)
        every = await client.recall(
            "Postgres", queries=["billing service"], embedding=[0.05] * 384, limit=10, offset=0, sort="time_desc",
            start=dt.datetime(2026, 1, 1), end="2026-12-31T00:00:00+02:00", tz="UTC", tags=["d"], tag_mode="all",
            tag_match="prefix", exclude_tags=["cache"], as_of=now, known_at=now, state_mode="history",
            include_archived=True, include_pending=True, expand_relations=True, expand_entities=True,
            relation_limit=3, expansion_limit=10, expand_min_importance=0.1, expand_min_strength=0.1,
            min_score=0.0, context="payments", context_tags=["billing"], context_types=["Decision"],
            priority_ids=[memory.id], recency_bias="on", state_debug=True)
        assert memory.id in [h.memory.id for h in every.results]
        windowed = await client.recall(time_query="last 7 days", tz="Europe/Berlin", exclude_tags=["cache"])
        assert memory.id not in [h.memory.id for h in windowed.results]  # its event time is older
        with pytest.raises(InvalidArgument) as bad_tz:
            await client.recall("x", tz="Mars/Olympus")
        assert bad_tz.value.field == "tz"

        # by-tag listing and its iterator
        page = await client.list_by_tag(["db", "cache"], page_size=1, include_total=True)
        assert len(page.memories) == 1 and page.next_page_token and page.total == 2
        listed = [m.id async for m in client.iter_by_tag(["db", "cache"], page_size=1)]
        assert sorted(listed) == sorted([memory.id, batch.memory_ids[1]])
        with pytest.raises(InvalidArgument) as bad_size:  # named as the caller named it, not REST's "limit"
            await client.list_by_tag(["db"], page_size=0)
        assert bad_size.value.field == "page_size"

        # associate and related
        relation = await client.associate(memory.id, batch.memory_ids[0], type="relates_to", strength=0.6,
                                          reason="alternatives")
        assert (relation.memory1_id, relation.memory2_id, relation.type) == (memory.id, batch.memory_ids[0],
                                                                             "RELATES_TO")
        related = await client.related(memory.id, relationship_types=["RELATES_TO"], max_depth=2, limit=10)
        assert [r.memory.id for r in related] == [batch.memory_ids[0]] and related[0].relation_type == "RELATES_TO"
        with pytest.raises(InvalidArgument) as bad_type:
            await client.associate(memory.id, batch.memory_ids[0], type="LIKES")
        assert bad_type.value.field == "type"
        with pytest.raises(InvalidArgument) as self_link:  # the service names relation.target_id
            await client.associate(memory.id, memory.id)
        assert self_link.value.field == "memory2_id" and self_link.value.message.startswith("memory2_id: "), self_link

        # supersede: the old one is no longer current and names its head
        current = await client.get(memory.id)
        replaced = await client.supersede(memory.id, "We moved billing to CockroachDB", etag=current.version,
                                          tags=["db"], reason="scale")
        assert replaced.superseded.id == memory.id and replaced.superseded.state == "SUPERSEDED"
        old = await client.get(memory.id)
        assert old.is_current is False and old.current_id == replaced.replacement.id
        with pytest.raises(Aborted):
            await client.supersede(replaced.replacement.id, "stale", etag=99)

        # history, oldest first
        events = [e async for e in client.iter_history(memory.id, page_size=2)]
        types = [e.type for e in events]  # enrichment's MEMORY_ENRICHED may come in between
        assert types[0] == "MEMORY_CREATED" and {"MEMORY_UPDATED", "MEMORY_SUPERSEDED"} <= set(types)
        assert types.index("MEMORY_UPDATED") < types.index("MEMORY_SUPERSEDED")
        assert events[0].after is not None and events[0].after.content == memory.content

        # versions: edit twice, page through them (one a page), read version 1, diff 1 -> the first edit
        edited = await client.store("Versioned: the queue is RabbitMQ", tags=["versions"])
        first = await client.update(edited.id, content="Versioned: the queue is Kafka")
        await client.update(edited.id, etag=first.version, content="Versioned: the queue is NATS")
        page = await client.versions(edited.id, page_size=1)
        assert len(page.versions) == 1 and page.versions[0].version == 1 and page.next_page_token
        listed = [v async for v in client.iter_versions(edited.id, page_size=1)]
        numbers = [v.version for v in listed]  # enrichment's versions may come in between
        assert numbers == sorted(numbers) and numbers[0] == 1 and len(numbers) >= 3
        contents = [v.memory.content for v in listed]
        assert contents[0] == "Versioned: the queue is RabbitMQ" and contents[-1] == "Versioned: the queue is NATS"
        kafka = next(v for v in listed if v.memory.content == "Versioned: the queue is Kafka")
        assert "content" in kafka.changed_fields and kafka.recorded_at is not None and kafka.actor
        old_one = await client.get(edited.id, version=1)
        assert old_one.content == "Versioned: the queue is RabbitMQ" and old_one.version == 1
        diff = await client.diff_versions(edited.id, 1, kafka.version)
        assert (diff.from_version, diff.to_version) == (1, kafka.version)
        change = next(c for c in diff.changes if c.field == "content")
        assert (change.before, change.after) == ("Versioned: the queue is RabbitMQ", "Versioned: the queue is Kafka")
        with pytest.raises(NotFound) as no_version:
            await client.get(edited.id, version=999)
        assert no_version.value.field == "version"
        with pytest.raises(NotFound) as no_diff:
            await client.diff_versions(edited.id, 1, 999)
        assert no_diff.value.field in ("to", "to_version")

        # delete with etag, then it is gone
        victim = batch.memory_ids[1]
        with pytest.raises(Aborted):
            await client.delete(victim, etag=99)
        deleted = await client.delete(victim, etag=(await client.get(victim)).version, reason="cleanup")
        assert deleted.state == "DELETED"
        with pytest.raises(NotFound):
            await client.get(victim)

        health = await client.health()
        assert health.status == "healthy" and health.graph_connected
    finally:
        await client.close()


async def _silent_server() -> tuple[asyncio.AbstractServer, int]:
    """A TCP server on 127.0.0.1 that accepts, reads and never answers: any call to it ends
    at its deadline (no race with a fast answer, unlike a microsecond deadline on the real
    service). Returns the server and its port."""

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.read(65536):
                pass
        finally:
            writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_deadline_the_call_cannot_meet_is_deadline_exceeded(variant: tuple[str, str]) -> None:
    transport, mode = variant
    server, port = await _silent_server()
    target = f"127.0.0.1:{port}" if transport == "grpc" else f"http://127.0.0.1:{port}"
    client = await make_client(SimpleNamespace(grpc=target, url=target, scope="deadline"), transport, mode,
                               max_attempts=1)
    try:
        with pytest.raises(DeadlineExceeded):
            await client.recall("billing", timeout=0.5)
    finally:
        await client.close()
        server.close()


async def test_event_stream_as_an_iterator(service, variant: tuple[str, str]) -> None:
    transport, mode = variant
    client = await make_client(service, transport, mode)
    writer = await make_client(service, "grpc", "async")
    stored_ids: list[str] = []
    seen: list[Any] = []
    try:
        stream = client.events()  # from now on: store until two events came, one our store's
        pending = asyncio.ensure_future(anext(stream))

        async def store_and_collect() -> bool:
            nonlocal pending
            stored_ids.append((await writer.store(f"event probe {uuid.uuid4()}")).id)
            await asyncio.wait([pending], timeout=0.5)
            while pending.done():
                seen.append(pending.result())
                if len(seen) >= 2 and any(e.kind == "memory.store" and e.memory_id in stored_ids for e in seen):
                    return True
                pending = asyncio.ensure_future(anext(stream))
                await asyncio.wait([pending], timeout=0.2)
            return False

        await eventually(store_and_collect, timeout=60)
        await stream.aclose()
        assert all(e.scope == service.scope and e.sequence for e in seen)
        # resume after a sequence: the next event follows, none skipped
        resumed = client.events(after_sequence=seen[0].sequence)
        again = await anext(resumed)
        assert (again.sequence, again.event_id, again.kind) == (seen[1].sequence, seen[1].event_id, seen[1].kind)
        await resumed.aclose()
    finally:
        await writer.close()
        await client.close()


async def test_closing_the_client_ends_its_open_event_stream_and_refuses_later_calls(
        service, variant: tuple[str, str]) -> None:
    """close() while ``events()`` is being iterated ends that iteration cleanly (the loop
    just stops: no CancelledError nobody asked for, no raw transport error), and every call
    after close() raises ClientClosed, over both transports, blocking and asyncio."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    writer = await make_client(service, "grpc", "async")
    seen: list[Any] = []
    try:
        async def consume() -> str:
            async for event in client.events():
                seen.append(event)
            return "ended"

        consumer = asyncio.ensure_future(consume())

        async def stream_is_open() -> bool:
            await writer.store(f"close probe {uuid.uuid4()}")
            await asyncio.wait([consumer], timeout=0.3)
            return bool(seen) or consumer.done()

        await eventually(stream_is_open, timeout=60)
        assert not consumer.done(), consumer
        await client.close()
        done, _ = await asyncio.wait([consumer], timeout=15)
        assert consumer in done, "the event stream stayed open after close()"
        assert not consumer.cancelled(), "the consumer got a CancelledError nobody asked for"
        assert consumer.result() == "ended"  # raises what the iteration raised, if anything

        missing = str(uuid.uuid4())
        calls = {"store": lambda: client.store("stored after close"), "get": lambda: client.get(missing),
                 "update": lambda: client.update(missing, importance=None),
                 "recall": lambda: client.recall("anything", sort="no-such-order"),
                 "health": lambda: client.health()}
        for name, call in calls.items():
            with pytest.raises(ClientClosed) as closed:
                await call()
            assert closed.value.code == grpc.StatusCode.FAILED_PRECONDITION, name
        for name, iterator in (("events", client.events()), ("iter_by_tag", client.iter_by_tag(["x"]))):
            with pytest.raises(ClientClosed):
                await anext(iterator)
        await client.close()  # a second close does nothing
    finally:
        await writer.close()
        await client.close()


async def test_update_refuses_none_for_a_field_that_cannot_be_null(service, variant: tuple[str, str]) -> None:
    """``update(id, importance=None)`` (or tags, confidence, type, timestamp, t_valid,
    metadata) is InvalidArgument naming the field over both transports (the gateway's PATCH
    answers a JSON null so; over gRPC the client refuses it before sending, where the update
    mask would have set the field to its zero value); the memory is unchanged. A field not
    given stays as it is; ``t_invalid=None`` opens the validity window."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    try:
        stored = (await client.store("Nulls are refused, never zeroed", tags=["nulls"], type="Decision",
                                     importance=0.3, confidence=0.6, metadata={"keep": 1},
                                     timestamp="2026-02-01T00:00:00Z", t_valid="2026-02-01T00:00:00Z")).memory

        def kept(m: Any) -> tuple:
            return (m.tags, m.importance, m.confidence, m.type, m.metadata, m.timestamp, m.t_valid)

        before = await client.get(stored.id)
        for name in ("tags", "importance", "confidence", "type", "timestamp", "t_valid", "metadata"):
            with pytest.raises(InvalidArgument) as refused:
                await client.update(stored.id, **{name: None})
            assert refused.value.field == name, refused.value
        after = await client.get(stored.id)
        assert after.version == before.version and kept(after) == kept(before)
        assert kept(after) == (["nulls"], 0.3, 0.6, "Decision", {"keep": 1},
                               dt.datetime(2026, 2, 1, tzinfo=dt.UTC), dt.datetime(2026, 2, 1, tzinfo=dt.UTC))

        edited = await client.update(stored.id, content="Nulls are refused, never zeroed (edited)")
        assert edited.content.endswith("(edited)") and kept(edited) == kept(before)
        closed = await client.update(stored.id, t_invalid="2030-01-01T00:00:00Z")
        assert closed.t_invalid == dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
        reopened = await client.update(stored.id, t_invalid=None)
        assert reopened.t_invalid is None and kept(reopened) == kept(before)
    finally:
        await client.close()
    if transport == "grpc":  # refused before sending: a server that never answers is not asked
        server, port = await _silent_server()
        target = f"127.0.0.1:{port}"
        offline = await make_client(SimpleNamespace(grpc=target, url=target, scope="nulls"), "grpc", mode,
                                    max_attempts=1, timeout=2)
        try:
            with pytest.raises(InvalidArgument) as local:
                await offline.update(str(uuid.uuid4()), importance=None)
            assert local.value.field == "importance"
        finally:
            await offline.close()
            server.close()


async def test_arguments_of_the_wrong_type_are_invalid_argument_naming_them(service, variant: tuple[str, str]) -> None:
    """A string for ``tags`` was stored as one-letter tags; ``store(123)``, ``importance="high"``,
    an epoch number or a ``date`` for a time were TypeError / AttributeError over gRPC and
    400s (or ValueError) over REST; ``related(limit=0)`` was the default over gRPC and a 400
    over REST. Each is InvalidArgument naming the argument over both now, and nothing is
    stored. Over REST an id is one path segment: ``x/../<id>`` reached (and deleted) that
    other memory."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    try:
        mid = (await client.store("Argument probe: the invoices go out on Fridays", tags=["argprobe"])).id
        refused = [
            ("store", ("x",), {"tags": "billing"}, "tags"),
            ("store", (123,), {}, "content"),
            ("store", ("x",), {"importance": "high"}, "importance"),
            ("store", ("x",), {"importance": float("nan")}, "importance"),
            ("store", ("x",), {"t_valid": 1767225600}, "t_valid"),
            ("store", ("x",), {"t_valid": dt.date(2026, 1, 1)}, "t_valid"),
            ("store", ("x",), {"metadata": ["not", "an", "object"]}, "metadata"),
            ("store_batch", (["fine", 5],), {}, "memories[1]"),
            ("store_batch", ([MemoryInput("x", tags="billing")],), {}, "memories[0].tags"),
            ("update", (mid,), {"etag": "1"}, "etag"),
            ("update", (mid,), {"etag": -1}, "etag"),
            ("update", (mid,), {"importance": "0.9"}, "importance"),
            ("delete", (mid,), {"etag": 1.5}, "etag"),
            ("get", (123,), {}, "memory_id"),
            ("get", (mid,), {"as_of": 1767225600}, "as_of"),
            ("recall", ("invoices",), {"limit": "5"}, "limit"),
            ("recall", ("invoices",), {"tags": "argprobe"}, "tags"),
            ("recall", ("invoices",), {"include_pending": "yes"}, "include_pending"),
            ("related", (mid,), {"limit": 0}, "limit"),
            ("associate", (mid, mid), {"strength": "strong"}, "strength"),
            ("list_by_tag", ("argprobe",), {}, "tags"),
            # The service's refusal naming two fields ("version, known_at: ..."): the first.
            ("get", (mid,), {"version": 1, "known_at": "2026-01-01T00:00:00Z"}, "version"),
            # Break-it review: a bare ValueError / OverflowError / TypeError on one transport,
            # InvalidArgument on the other; a page size of 0 read as the default; an empty id
            # read every memory's history over gRPC.
            ("recall", ("invoices",), {"limit": 2**40}, "limit"),
            ("list_by_tag", (["argprobe"],), {"page_size": 2**40}, "page_size"),
            ("get", (mid,), {"version": 2**70}, "version"),
            ("update", (mid,), {"etag": 2**63}, "etag"),
            ("store", ("x",), {"timestamp": "0001-01-01T00:00:00+05:00"}, "timestamp"),
            ("store", ("x",), {"metadata": {"a": float("nan")}}, "metadata.a"),
            ("store", ("x",), {"metadata": {"a": {"b": [float("inf")]}}}, "metadata.a.b[0]"),
            ("store", ("x",), {"metadata": {"when": dt.datetime(2026, 1, 1)}}, "metadata.when"),
            ("history", ("",), {}, "memory_id"),
            ("history", (mid,), {"page_size": 0}, "page_size"),
            ("versions", (mid,), {"page_size": 0}, "page_size"),
            ("recall", ("invoices",), {"sort": "sort_order_time_desc"}, "sort"),
            ("recall", ("invoices",), {"tag_mode": "unspecified"}, "tag_mode"),
            # The service's refusal naming its proto field (valid_to, start_time): the argument.
            ("store", ("x",), {"t_valid": "2026-02-01T00:00:00Z", "t_invalid": "2026-01-01T00:00:00Z"}, "t_invalid"),
            ("recall", ("invoices",), {"start": "2026-02-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "start"),
        ]
        for name, args, kwargs, field in refused:
            with pytest.raises(InvalidArgument) as error:
                await getattr(client, name)(*args, **kwargs)
            assert error.value.field == field, (name, kwargs, error.value)
        assert await service.ctx.graph.memories.count(service.scope) == 1
        for other in (f"no-such-memory/../{mid}", "..", "../health", f"{mid}?x=1", f"{mid}#frag"):
            with pytest.raises(NotFound):
                await client.get(other)
            with pytest.raises(NotFound):
                await client.delete(other)
        assert (await client.get(mid)).state == "ACTIVE"
    finally:
        await client.close()


async def test_a_bad_timeout_or_base_url_is_invalid_argument_naming_it(service) -> None:
    """Break-it review: ``timeout=inf`` was an immediate DeadlineExceeded over gRPC, ``nan`` a
    bare ValueError over REST, ``"5"`` a TypeError over both; ``Client.rest("localhost:8001")``
    (no scheme) was retried and reported Unavailable. InvalidArgument naming the argument now,
    when the client is built and on a call."""
    for bad in (float("inf"), float("nan"), 0, -1, "5", True):
        for make in (AsyncClient.grpc, AsyncClient.rest):
            with pytest.raises(InvalidArgument) as error:
                make(service.grpc if make is AsyncClient.grpc else service.url, timeout=bad)
            assert error.value.field == "timeout", (make, bad)
    for bad in ("localhost:8001", "not a url", "ftp://example.org", "http://"):
        with pytest.raises(InvalidArgument) as error:
            AsyncClient.rest(bad)
        assert error.value.field == "base_url", bad
    for transport in ("grpc", "rest"):
        client = await make_client(service, transport, "async")
        try:
            mid = (await client.store("Timeout probe")).id
            for bad in (float("inf"), float("nan"), -1, "5"):
                with pytest.raises(InvalidArgument) as error:
                    await client.get(mid, timeout=bad)
                assert error.value.field == "timeout", (transport, bad)
            assert (await client.get(mid, timeout=5)).id == mid
        finally:
            await client.close()


class LoopbackServer:
    """A TCP server on 127.0.0.1 of a test's own; :meth:`_handle` serves each connection.
    ``prefix`` goes before the address :meth:`start` answers (``http://`` for a REST one)."""

    prefix = ""
    server: asyncio.AbstractServer | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"{self.prefix}127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class CannedHttpServer(LoopbackServer):
    """A loopback HTTP/1.1 server answering every request with the next of ``answers``
    (status, content type, body), the last one again once they run out: a proxy or a
    captive portal in front of the gateway, whose answers the service never gives. Counts
    the requests it was sent."""

    prefix = "http://"

    def __init__(self, answers: list[tuple[int, str, bytes]]) -> None:
        self.answers = answers
        self.requests = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                status, kind, body = self.answers[min(self.requests, len(self.answers) - 1)]
                self.requests += 1
                reason = {200: "OK", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}[status]
                kind_header = f"Content-Type: {kind}\r\n" if kind else ""
                writer.write(f"HTTP/1.1 {status} {reason}\r\n{kind_header}Content-Length: {len(body)}\r\n\r\n"
                             .encode() + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


PORTAL_PAGE = (b"<!DOCTYPE html><html><head><title>Welcome to the hotel wifi</title></head><body>"
               + b"<p>Please accept the terms.</p>" * 200 + b"</body></html>")


@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_a_rest_answer_that_is_not_the_gateways_is_unavailable(mode: str) -> None:
    """Break-it review: an HTML 200 (a captive portal, a proxy's page), an empty 200 or a
    JSON list made ``store()`` / ``get()`` raise KeyError 'memory', ``recall()`` answer an
    empty result as if no memory matched and ``health()`` answer "degraded", though the
    service was never reached. Each is Unavailable naming the status and content type now."""
    answers = [(200, "text/html; charset=utf-8", PORTAL_PAGE), (200, "", b""),
               (200, "application/json", b"[1, 2]"), (200, "application/json", b'{"other": 1}')]
    shown = ["text/html", "empty body", "JSON list", "without memory"]
    for answer, words in zip(answers, shown, strict=True):
        canned = CannedHttpServer([answer])
        url = await canned.start()
        client = await make_client(SimpleNamespace(grpc=url, url=url, scope="portal"), "rest", mode,
                                   max_attempts=2)
        try:
            calls = [("store", ("The portal ate this",), {}), ("get", (str(uuid.uuid4()),), {}),
                     ("recall", ("portal",), {}), ("health", (), {})]
            if answer[2].startswith(b"{"):  # a JSON object: health's and recall's fields are missing too
                words = "without"
            for name, args, kwargs in calls:
                with pytest.raises(Unavailable) as error:
                    await getattr(client, name)(*args, **kwargs)
                message = error.value.message
                assert "HTTP 200" in message and words in message, (name, message)
                assert "<p>" not in message and len(message) < 300, message
            assert canned.requests == len(calls)  # a 200 is not retried
        finally:
            await client.close()
            await canned.stop()


@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_a_proxys_502_is_retried_and_504_is_deadline_exceeded(mode: str) -> None:
    """Break-it review: a proxy's 502 and 504 were INTERNAL errors whose message was the
    proxy's HTML page, and a 502 was not retried (only 503 was). A 502 is Unavailable now,
    retried as a 503 is; a 504 is DeadlineExceeded, not retried (as a deadline passed over
    gRPC or REST is not); the message is the status and reason, not the page."""
    ok = (200, "application/json", b'{"status": "healthy", "falkordb": "connected", "qdrant": "connected"}')
    bad_gateway = (502, "text/html", b"<html><body><h1>502 Bad Gateway</h1>" + b"<p>nginx</p>" * 100 + b"</body></html>")
    gateway_timeout = (504, "text/html", b"<html><body><h1>504 Gateway Time-out</h1>" + b"<p>x</p>" * 100 + b"</body></html>")

    canned = CannedHttpServer([bad_gateway, ok])
    url = await canned.start()
    client = await make_client(SimpleNamespace(grpc=url, url=url, scope="proxy"), "rest", mode, max_attempts=3)
    try:
        assert (await client.health()).status == "healthy"
        assert canned.requests == 2
    finally:
        await client.close()
        await canned.stop()

    for answer, error_class, tries in ((bad_gateway, Unavailable, 3), (gateway_timeout, DeadlineExceeded, 1)):
        canned = CannedHttpServer([answer])
        url = await canned.start()
        client = await make_client(SimpleNamespace(grpc=url, url=url, scope="proxy"), "rest", mode, max_attempts=3)
        try:
            with pytest.raises(error_class) as error:
                await client.recall("proxied")
            assert canned.requests == tries, answer[0]
            assert error.value.http_status == answer[0]
            assert error.value.message.startswith(f"HTTP {answer[0]} ") and "<" not in error.value.message, error.value
            assert len(error.value.message) < 120, error.value.message
        finally:
            await client.close()
            await canned.stop()


async def test_bad_keys_scopes_targets_and_attempts_are_invalid_argument(service, variant: tuple[str, str]) -> None:
    """Break-it review: a non-ASCII or newline key or scope was a bare ExecuteBatchError over
    gRPC and a UnicodeEncodeError over REST (the newline key retried as an outage);
    ``max_attempts="a"`` a TypeError and 0 or -3 taken silently; ``Client.grpc("")``
    accepted. Each is InvalidArgument naming the argument now, when the client is built."""
    transport, _mode = variant
    target = service.grpc if transport == "grpc" else service.url
    make = {("grpc", "async"): AsyncClient.grpc, ("grpc", "sync"): Client.grpc,
            ("rest", "async"): AsyncClient.rest, ("rest", "sync"): Client.rest}[variant]
    refused = [({"api_key": "ключ"}, "api_key"), ({"api_key": "x\ny"}, "api_key"), ({"scope": "é"}, "scope"),
               ({"scope": "a\rb"}, "scope"), ({"max_attempts": "a"}, "max_attempts"),
               ({"max_attempts": 0}, "max_attempts"), ({"max_attempts": -3}, "max_attempts")]
    loops = sum(t.name == "automem-client" for t in threading.enumerate())
    for kwargs, field in refused:
        with pytest.raises(InvalidArgument) as error:
            await asyncio.to_thread(make, target, **kwargs)
        assert error.value.field == field, (kwargs, error.value)
        assert "ключ" not in error.value.message  # a key is never echoed
    # A blocking client refused at construction leaves no loop thread behind.
    assert sum(t.name == "automem-client" for t in threading.enumerate()) == loops
    if transport == "grpc":
        with pytest.raises(InvalidArgument) as error:
            await asyncio.to_thread(make, "")
        assert error.value.field == "target"


async def test_text_that_cannot_be_sent_is_invalid_argument_naming_it(service, variant: tuple[str, str]) -> None:
    """Break-it review: a lone surrogate in content (or a tag, a metadata value, the query)
    was a bare UnicodeEncodeError over both transports, a non-ASCII idempotency key one over
    REST; over REST a 100,000-character id or a 1,000,000-character query was an
    httpx.InvalidURL (gRPC answered InvalidArgument naming ``query``). Each is
    InvalidArgument naming the argument now; nothing is stored."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    try:
        calls = [("store", ("bad \ud800",), {}, "content"), ("store", ("x",), {"tags": ["ok", "\udfff"]}, "tags[1]"),
                 ("store", ("x",), {"metadata": {"k": "\ud800"}}, "metadata.k"),
                 ("store", ("x",), {"idempotency_key": "ключ"}, "idempotency_key"),
                 ("recall", ("q" * 1_000_000,), {}, "query"), ("recall", ("\ud800",), {}, "query"),
                 ("get", ("a" * 100_000,), {}, "memory_id")]  # over gRPC too (it was NotFound)
        for name, args, kwargs, field in calls:
            with pytest.raises(InvalidArgument) as error:
                await getattr(client, name)(*args, **kwargs)
            assert error.value.field == field, (name, error.value)
        assert await service.ctx.graph.memories.count(service.scope) == 0
    finally:
        await client.close()


async def _refused_alike(client: Any, calls: list[tuple[str, tuple, dict, str, str | None]]) -> None:
    """Each ``(method, args, kwargs, field, message)`` of ``calls`` raises InvalidArgument
    naming ``field`` (with exactly ``message`` when one is given)."""
    for name, args, kwargs, field, message in calls:
        with pytest.raises(InvalidArgument) as error:
            await getattr(client, name)(*args, **kwargs)
        assert error.value.field == field, (name, kwargs, error.value)
        if message is not None:
            assert error.value.message == message, (name, kwargs, error.value.message)


async def test_a_malformed_memory_id_is_invalid_argument_naming_it_over_both_transports(
        service, variant: tuple[str, str]) -> None:
    """Break-it review: an over-long memory id (or one holding a control character) was
    NotFound over gRPC, and over REST NotFound too unless too long for a URL. Every call
    taking a memory id refuses one now as InvalidArgument naming the argument, with the
    same message over both transports (the service's words, automem/common/model.py
    ``check_id``), before anything is sent; nothing changes."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    try:
        memory = await client.store("a memory beside malformed ids", importance=0.7)
        long_id, control_id = "a" * 300, "a\nb"
        await _refused_alike(client, [
            ("get", (long_id,), {}, "memory_id", "memory_id: too long (300 characters; an id has at most 128)"),
            ("update", (long_id,), {"importance": 0.1}, "memory_id", None),
            ("delete", (control_id,), {}, "memory_id",
             "memory_id: contains a control character (U+000A at character 1); an id has none"),
            ("supersede", ("a\x00b", "new"), {}, "memory_id", "memory_id: contains a NUL character"),
            ("history", (long_id,), {}, "memory_id", None), ("versions", (control_id,), {}, "memory_id", None),
            ("diff_versions", (long_id, 1, 2), {}, "memory_id", None),
            ("related", (control_id,), {}, "memory_id", None),
            ("associate", (long_id, memory.id), {}, "memory1_id", None),
            ("associate", (memory.id, control_id), {}, "memory2_id", None)])
        got = await client.get(memory.id)
        assert got.importance == 0.7 and got.version == memory.memory.version
    finally:
        await client.close()


async def test_a_malformed_id_in_priority_ids_is_invalid_argument_naming_its_index_over_both_transports(
        service, variant: tuple[str, str]) -> None:
    """``recall(priority_ids=...)`` took any string for an id, while every single memory id
    argument is checked as the service checks it: an over-long item, or one holding a
    control character, is InvalidArgument naming ``priority_ids[<index>]`` now, with the
    service's words, over both transports (blank items are skipped, as the service skips
    them)."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    try:
        memory = await client.store("a memory a priority list names", importance=0.7)
        await _refused_alike(client, [
            ("recall", ("priority",), {"priority_ids": [memory.id, "", "a" * 300]}, "priority_ids[2]",
             "priority_ids[2]: too long (300 characters; an id has at most 128)"),
            ("recall", ("priority",), {"priority_ids": ["a\nb"]}, "priority_ids[0]",
             "priority_ids[0]: contains a control character (U+000A at character 1); an id has none")])
        assert (await client.recall("priority", priority_ids=[memory.id, " "])).results is not None
    finally:
        await client.close()


async def test_an_unknown_relation_end_is_not_found_naming_the_argument_over_both_transports(
        service, variant: tuple[str, str]) -> None:
    """``associate`` with an unknown end was NotFound "memory X not found", naming no
    argument over either transport (field None). It names the end's argument now
    (``memory2_id: memory X not found``), as the service's other refusals of an end do."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    missing = "00000000-0000-4000-8000-000000000000"
    try:
        memory = await client.store("a memory whose partner does not exist")
        for args, field in (((memory.id, missing), "memory2_id"), ((missing, memory.id), "memory1_id")):
            with pytest.raises(NotFound) as error:
                await client.associate(*args)
            assert error.value.field == field, error.value
            assert error.value.message == f"{field}: memory {missing} not found", error.value.message
    finally:
        await client.close()


async def test_related_and_associate_options_are_refused_alike_over_both_transports(
        service, variant: tuple[str, str]) -> None:
    """Break-it review: the client checked ``related``, ``associate``, ``history`` and
    ``versions`` less than the other calls: ``associate`` took any string for its ids, so an
    empty ``memory2_id`` was refused by the service naming ``memory1_id``;
    ``related(limit=201)`` was refused naming ``page_size`` over gRPC (``limit`` over REST);
    ``max_depth=4``, ``history(page_size=1001)`` and ``versions(page_size=101)`` were worded
    differently by each transport. Each is InvalidArgument naming the argument now, with the
    same message over both, before anything is sent (as ``page_size=0`` of list_by_tag);
    nothing is created."""
    transport, mode = variant
    client = await make_client(service, transport, mode)
    try:
        memory = await client.store("a memory the bad calls name")
        await _refused_alike(client, [
            ("associate", (memory.id, ""), {}, "memory2_id", "memory2_id: required (not empty)"),
            ("associate", ("", memory.id), {}, "memory1_id", "memory1_id: required (not empty)"),
            ("related", (memory.id,), {"limit": 201}, "limit", "limit: must be between 1 and 200"),
            ("related", (memory.id,), {"max_depth": 4}, "max_depth", "max_depth: must be between 1 and 3"),
            ("history", (memory.id,), {"page_size": 1001}, "page_size", "page_size: must be between 1 and 1000"),
            ("versions", (memory.id,), {"page_size": 101}, "page_size", "page_size: must be between 1 and 100")])
        # No edge was authored (enrichment may link memories by time: PRECEDED_BY).
        assert [r for r in await client.related(memory.id) if r.relation_type == "RELATES_TO"] == []
    finally:
        await client.close()


async def test_a_version_diff_is_the_same_over_both_transports(service) -> None:
    """Break-it review: over gRPC a diff's enum values came as the proto's names
    (``ENRICHMENT_STATUS_PENDING``), its metadata integers as floats (``1.0``) and its times
    with ``Z``; over REST as the memory's words (``pending``), ints and ``+00:00``. The
    client documents one :class:`VersionDiff` for both."""
    clients = [await make_client(service, transport, "async") for transport in ("grpc", "rest")]
    try:
        stored = (await clients[0].store("Diff probe: the cache is Redis", metadata={"n": 1, "ns": [1, 2]},
                                         timestamp="2026-03-01T10:00:00Z")).memory

        async def enriched() -> bool:
            return (await clients[0].get(stored.id)).enrichment_status == "done"
        await eventually(enriched, timeout=60)
        latest = await clients[0].update(stored.id, content="Diff probe: the cache is Valkey",
                                         metadata={"n": 2, "ns": [2, 3]}, timestamp="2026-03-02T10:00:00.5Z")
        grpc_diff, rest_diff = [await c.diff_versions(stored.id, 1, latest.version) for c in clients]
    finally:
        for c in clients:
            await c.close()
    assert grpc_diff == rest_diff
    changes = {c.field: c for c in rest_diff.changes}
    assert changes["metadata"].after == {"n": 2, "ns": [2, 3]} and isinstance(changes["metadata"].after["n"], int)
    assert changes["timestamp"].after == "2026-03-02T10:00:00.500000+00:00"
    assert all(c.before in (None, "pending", "done", "failed", "unspecified")
               for c in rest_diff.changes if c.field.endswith("_status"))


async def test_recall_time_arguments_mean_the_same_over_both_transports(service) -> None:
    """Break-it review: the gRPC transport read naive ISO text (``2026-03-01T10:00:00``) as
    UTC whatever the recall's ``tz``, and a date-only ``end`` (``2026-03-01``) as midnight UTC
    at the start of that day, while REST's ``/recall`` (AutoMem's meaning) reads naive text in
    ``tz`` and a date-only ``end`` as the end of that day in ``tz``. The same arguments
    returned other memories. The gRPC transport now converts with REST's meaning."""
    tag = f"tz-{uuid.uuid4().hex[:8]}"
    events = {"d": "2026-02-28T23:30:00Z",  # 00:30 on March 1 in Berlin (UTC+1)
              "a": "2026-03-01T09:30:00Z",  # 10:30 in Berlin
              "b": "2026-03-01T22:30:00Z",  # 23:30 in Berlin
              "c": "2026-03-01T23:30:00Z"}  # 00:30 on March 2 in Berlin
    clients = [await make_client(service, transport, "async") for transport in ("grpc", "rest")]
    try:
        ids = {name: (await clients[0].store(f"Time probe {name}: the deploy window moved", tags=[tag],
                                             timestamp=when)).id for name, when in events.items()}
        names = {memory_id: name for name, memory_id in ids.items()}
        cases = {  # arguments -> the memories AutoMem's /recall returns, oldest first
            "dates in Berlin": ({"start": "2026-03-01", "end": "2026-03-01", "tz": "Europe/Berlin"}, "dab"),
            "dates in UTC": ({"start": "2026-03-01", "end": "2026-03-01"}, "abc"),
            "naive text in Berlin": ({"start": "2026-03-01T10:00:00", "end": "2026-03-01T23:45:00",
                                      "tz": "Europe/Berlin"}, "ab"),
            "naive text in UTC": ({"start": "2026-03-01T10:00:00", "end": "2026-03-01T23:45:00"}, "bc"),
            "offset text": ({"start": "2026-03-01T10:00:00+01:00", "end": "2026-03-02T00:00:00+01:00",
                             "tz": "America/New_York"}, "ab"),
            "naive datetime": ({"start": dt.datetime(2026, 3, 1, 10), "end": "2026-03-01",
                                "tz": "Europe/Berlin"}, "b"),
        }
        got = {}
        for case, (arguments, _) in cases.items():
            for transport, client in zip(("grpc", "rest"), clients, strict=True):
                try:
                    found = await client.recall(tags=[tag], sort="time_asc", limit=10, **arguments)
                except InvalidArgument as exc:  # the old gRPC end of a date-only day came before its start
                    got[case, transport] = f"refused: {exc}"
                else:
                    got[case, transport] = "".join(names[h.memory.id] for h in found.results)
    finally:
        for c in clients:
            await c.close()
    assert got == {(case, transport): expected for case, (_, expected) in cases.items()
                   for transport in ("grpc", "rest")}


async def test_a_thousand_memory_listing_iterates_page_by_page(service) -> None:
    tag = f"bulk-{uuid.uuid4().hex[:8]}"
    async with AsyncClient.grpc(service.grpc, scope=service.scope) as client:
        ids: list[str] = []
        for start in (0, 500):
            batch = await client.store_batch([MemoryInput(f"bulk memory number {i}", tags=[tag])
                                              for i in range(start, start + 500)])
            ids.extend(batch.memory_ids)
        assert len(set(ids)) == 1000
        walked = [m.id async for m in client.iter_by_tag([tag], page_size=150)]
    assert len(walked) == 1000 and set(walked) == set(ids)
    rest = await asyncio.to_thread(Client.rest, service.url, scope=service.scope)
    try:
        walked_rest = await asyncio.to_thread(lambda: [m.id for m in rest.iter_by_tag([tag], page_size=200)])
    finally:
        await asyncio.to_thread(rest.close)
    assert walked_rest == walked  # same order, newest first


# --- TLS ---------------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def tls_service(settings, tmp_path: Path):
    """A whole service whose gRPC server speaks TLS only (AUTOMEM_GRPC_TLS with
    _CERT_FILE/_KEY_FILE/_CA_FILE, automem/common/grpc_tls.py), its certificate signed by a CA
    made here (tests/tls.py) for 127.0.0.1 and localhost."""
    files = TestCA().issue(tmp_path / "tls", ["127.0.0.1", "localhost"])
    running = await start_service(settings.model_copy(update={
        "grpc_tls": True, "grpc_tls_cert_file": str(files.cert), "grpc_tls_key_file": str(files.key),
        "grpc_tls_ca_file": str(files.ca)}))
    running.ca = files.ca
    try:
        yield running
    finally:
        await running.runner.stop()


async def test_tls_with_a_certificate_made_at_test_time(tls_service) -> None:
    ca = tls_service.ca
    async with AsyncClient.grpc(tls_service.grpc, root_certificates=str(ca), scope="tls") as client:
        stored = await client.store("Transport security is on for gRPC", tags=["tls"])
        listed = await client.list_by_tag(["tls"])
        assert [m.id for m in listed.memories] == [stored.id]
    # the blocking client, with the certificate's other name
    port = tls_service.grpc.rsplit(":", 1)[1]
    sync = await asyncio.to_thread(Client.grpc, f"localhost:{port}", root_certificates=ca.read_bytes(), scope="tls")
    try:
        assert (await asyncio.to_thread(sync.get, stored.id)).content == "Transport security is on for gRPC"
    finally:
        await asyncio.to_thread(sync.close)
    # the gateway in the same process dials its gRPC server with TLS too
    async with AsyncClient.rest(tls_service.url, scope="tls") as rest:
        assert (await rest.get(stored.id)).id == stored.id
    # a plaintext client, or one that does not trust the certificate, gets nowhere
    async with AsyncClient.grpc(tls_service.grpc, scope="tls", timeout=5, max_attempts=1) as plain:
        with pytest.raises(Unavailable):
            await plain.get(stored.id)
    async with AsyncClient.grpc(tls_service.grpc, tls=True, scope="tls", timeout=5, max_attempts=1) as untrusting:
        with pytest.raises(Unavailable):
            await untrusting.get(stored.id)


# --- retries -------------------------------------------------------------------------------


class DropFirstResponseProxy(LoopbackServer):
    """A TCP proxy in front of a gRPC server that, on its first connection, forwards the
    request but cuts the connection when the server's answer starts (its first HTTP/2
    HEADERS frame on a stream, RFC 9113 section 4.1): the call was served, the client never
    hears of it and sees UNAVAILABLE. Later connections pass untouched."""

    def __init__(self, upstream: str) -> None:
        self.host, port = upstream.rsplit(":", 1)
        self.upstream_port = int(port)
        self.dropped = 0
        self.connections = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        armed = self.connections == 1
        up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        async def answers() -> None:  # server -> client, frame by frame while armed
            try:
                while armed:
                    header = await up_reader.readexactly(9)
                    length, kind = int.from_bytes(header[:3], "big"), header[3]
                    stream_id = int.from_bytes(header[5:9], "big") & 0x7FFFFFFF
                    payload = await up_reader.readexactly(length)
                    if kind == 0x1 and stream_id != 0:  # HEADERS of an answer: drop it all
                        self.dropped += 1
                        writer.transport.abort()
                        up_writer.transport.abort()
                        return
                    writer.write(header + payload)
                    await writer.drain()
            except (ConnectionError, asyncio.IncompleteReadError):
                writer.close()
                return
            await pipe(up_reader, writer)

        await asyncio.gather(pipe(reader, up_writer), answers(), return_exceptions=True)


class DropFirstHttpAnswerProxy(LoopbackServer):
    """A TCP proxy in front of the REST gateway that, on its first connection, forwards the
    request and cuts the connection when the first byte of the answer arrives (HTTP/1.1: the
    request was served, the client sees the connection end). Later connections pass untouched."""

    prefix = "http://"

    def __init__(self, upstream_url: str) -> None:
        host_port = upstream_url.split("://", 1)[1]
        self.host, port = host_port.rsplit(":", 1)
        self.upstream_port = int(port)
        self.dropped = 0
        self.connections = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        armed = self.connections == 1
        up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, cut: bool) -> None:
            try:
                while data := await src.read(65536):
                    if cut:
                        self.dropped += 1
                        writer.transport.abort()
                        up_writer.transport.abort()
                        return
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, False), pipe(up_reader, writer, armed), return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session")
async def undeduplicated_service(settings):
    """A whole service that never de-duplicates equal stores (AUTOMEM_DEDUP_WINDOW_SECONDS=0):
    only the idempotency key can make a repeated store answer the first memory."""
    running = await start_service(settings.model_copy(update={"dedup_window_seconds": 0}))
    try:
        yield running
    finally:
        await running.runner.stop()


async def test_a_store_retried_after_a_lost_answer_is_stored_once(undeduplicated_service) -> None:
    service = undeduplicated_service
    proxy = DropFirstResponseProxy(service.grpc)
    address = await proxy.start()
    try:
        async with AsyncClient.grpc(address, scope="retry") as client:
            stored = await client.store("Stored once although its answer was lost", tags=["retry"])
        assert proxy.dropped == 1 and proxy.connections >= 2  # the first answer never arrived
        assert stored.deduplicated  # the retry was answered with the first attempt's memory
        async with AsyncClient.grpc(service.grpc, scope="retry") as direct:
            listed = await direct.list_by_tag(["retry"], include_total=True)
        assert [m.id for m in listed.memories] == [stored.id] and listed.total == 1
        # without a retry policy the lost answer is the caller's error
        proxy2 = DropFirstResponseProxy(service.grpc)
        address2 = await proxy2.start()
        try:
            async with AsyncClient.grpc(address2, scope="retry-off", max_attempts=1) as once:
                with pytest.raises(Unavailable):
                    await once.store("Lost answer, no retry", tags=["retry"])
        finally:
            await proxy2.stop()
    finally:
        await proxy.stop()


async def test_a_rest_store_retried_after_a_lost_answer_is_stored_once(undeduplicated_service) -> None:
    """The REST transport retries a store whose answer was lost with the same Idempotency-Key
    (automem_client/_rest.py), so the service stores it once; with ``max_attempts=1`` the lost
    answer is the caller's Unavailable; an update (no key) is never retried."""
    service = undeduplicated_service
    proxy = DropFirstHttpAnswerProxy(service.url)
    url = await proxy.start()
    try:
        async with AsyncClient.rest(url, scope="rest-retry") as client:
            stored = await client.store("Stored once over REST although its answer was lost", tags=["rest-retry"])
        assert proxy.dropped == 1 and proxy.connections >= 2
        assert stored.deduplicated  # the retry was answered with the first attempt's memory
        async with AsyncClient.rest(service.url, scope="rest-retry") as direct:
            listed = await direct.list_by_tag(["rest-retry"], include_total=True)
        assert [m.id for m in listed.memories] == [stored.id] and listed.total == 1
        for attempts, call in ((1, "store"), (4, "update")):
            once = DropFirstHttpAnswerProxy(service.url)
            url2 = await once.start()
            try:
                async with AsyncClient.rest(url2, scope="rest-retry", max_attempts=attempts) as client:
                    with pytest.raises(Unavailable):
                        if call == "store":
                            await client.store("Lost answer, no retry", tags=["rest-retry"])
                        else:
                            await client.update(stored.id, importance=0.9)
                assert once.dropped == 1 and once.connections == 1, call  # no second attempt
            finally:
                await once.stop()
    finally:
        await proxy.stop()


# --- reflection v1 -----------------------------------------------------------------------


async def test_reflection_v1_lists_and_describes_the_services(service) -> None:
    from google.protobuf import descriptor_pb2
    from grpc_reflection.v1alpha import reflection_pb2  # v1's messages have the same wire format

    async with grpc.aio.insecure_channel(service.grpc) as channel:
        info = channel.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                     request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                     response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
        requests = [reflection_pb2.ServerReflectionRequest(list_services=""),
                    reflection_pb2.ServerReflectionRequest(file_containing_symbol="automem.v1.IngestService"),
                    reflection_pb2.ServerReflectionRequest(
                        file_containing_symbol="grpc.reflection.v1.ServerReflection")]
        answers = [a async for a in info(iter(requests))]
    names = {s.name for s in answers[0].list_services_response.service}
    assert {"automem.v1.IngestService", "automem.v1.RecallService", "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection"} <= names
    files = [descriptor_pb2.FileDescriptorProto.FromString(b)
             for b in answers[1].file_descriptor_response.file_descriptor_proto]
    assert any(f.name == "automem/v1/ingest_service.proto" for f in files)
    v1 = [descriptor_pb2.FileDescriptorProto.FromString(b)
          for b in answers[2].file_descriptor_response.file_descriptor_proto]
    assert v1[0].package == "grpc.reflection.v1" and v1[0].service[0].name == "ServerReflection"


# --- the example script and the wheel ----------------------------------------------------------


async def _run(*argv: str, env: dict[str, str] | None = None, cwd: str | None = None) -> str:
    process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE, env=env, cwd=cwd)
    out, err = await process.communicate()
    assert process.returncode == 0, f"{argv}: {out.decode()[-2000:]}\n{err.decode()[-4000:]}"
    return out.decode()


@pytest.mark.parametrize("transport", ["grpc", "rest"])
async def test_the_example_script_runs_against_the_service(service, transport: str) -> None:
    env = {**os.environ, "AUTOMEM_SCOPE": service.scope}
    target = service.grpc if transport == "grpc" else service.url
    out = await _run(sys.executable, str(ROOT / "examples" / "quickstart.py"), f"--{transport}", target, env=env)
    assert "recalled: We chose Postgres" in out, out


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the client wheel and nothing but its declared dependencies."""
    work = tmp_path_factory.mktemp("client-wheel")
    run = lambda *argv: subprocess.run(argv, check=True, capture_output=True, text=True, timeout=900)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"),
        str(CLIENT_DIR))
    (wheel,) = (work / "dist").glob("automem_client-*.whl")
    run(sys.executable, "-m", "venv", str(work / "venv"))
    run(str(work / "venv" / "bin" / "pip"), "install", "-q", str(wheel))
    return work / "venv"


async def test_the_client_wheel_alone_stores_and_recalls(client_venv: Path, service) -> None:
    python = str(client_venv / "bin" / "python")
    listed = await _run(str(client_venv / "bin" / "pip"), "list", "--format=freeze")
    names = {line.split("==")[0].lower() for line in listed.split()}
    assert {"automem-client", "grpcio", "protobuf", "httpx"} <= names
    assert not names & {"automem", "grpcio-tools", "grpcio-health-checking", "fastapi", "pydantic"}, names
    script = (
        "import sys, importlib.util\n"
        "assert importlib.util.find_spec('automem') is None\n"
        "from automem_client import Client\n"
        "with Client.grpc(sys.argv[1], scope=sys.argv[3]) as c:\n"
        "    m = c.store('The wheel client stores', tags=['wheel']).memory\n"
        "    print('grpc', [h.memory.id for h in c.recall(tags=['wheel']).results] == [m.id])\n"
        "with Client.rest(sys.argv[2], scope=sys.argv[3]) as c:\n"
        "    print('rest', [x.id for x in c.iter_by_tag(['wheel'])] == [m.id])\n")
    out = await _run(python, "-c", script, service.grpc, service.url, service.scope, cwd=str(client_venv))
    assert out.split() == ["grpc", "True", "rest", "True"], out
