"""The client (clients/python, ``automem_client``) answering alike over gRPC and REST where a
break-it round found them apart: a request over the size limit, a too-long idempotency key,
a supersede's relation; and the REST event stream on a stalled gateway.

Against the real service (and, for the stalled stream, a loopback server that answers the
SSE headers and then nothing: no store, no bus is stood in for).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from automem_client import AsyncClient, InvalidArgument, MemoryInput, ResourceExhausted, Unavailable

from tests.conftest import start_service

pytestmark = pytest.mark.asyncio(loop_scope="session")

TRANSPORTS = ("grpc", "rest")


def _client(service: Any, transport: str, **kwargs: Any) -> AsyncClient:
    kwargs.setdefault("scope", service.scope)
    return AsyncClient.grpc(service.grpc, **kwargs) if transport == "grpc" else AsyncClient.rest(service.url, **kwargs)


async def test_a_batch_over_the_size_limit_names_the_limit_and_no_field_over_both_transports(service) -> None:
    """Break-it review: 100 memories of 60 KiB metadata each (6 MB) raised ResourceExhausted
    with ``field='SERVER'`` over gRPC ("SERVER: Received message larger than max (6146728 vs.
    4194304)": gRPC's words, whose first word was read as a field) and a 413 naming the
    body limit over REST. Both name no field now and say the same: the 4 MiB limit and to
    send smaller batches."""
    items = [MemoryInput(f"m{i}", metadata={"blob": "x" * 61440}) for i in range(100)]
    messages = {}
    for transport in TRANSPORTS:
        async with _client(service, transport) as client:
            with pytest.raises(ResourceExhausted) as error:
                await client.store_batch(items)
        assert error.value.field is None, (transport, error.value)
        message = error.value.message
        assert "4194304 bytes (4 MiB)" in message and "smaller batches" in message, (transport, message)
        assert "SERVER" not in message, message
        messages[transport] = message.split(" is larger than ", 1)[1]
    assert messages["grpc"] == messages["rest"], messages
    assert await service.ctx.graph.memories.count(service.scope) == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_too_long_idempotency_key_is_refused_naming_it_over_both_transports(service, transport: str) -> None:
    """Break-it review: ``store("x", idempotency_key="k" * 5000)`` was refused naming the
    header over REST (``idempotency-key: ...``, field None) and ``idempotency_key`` over
    gRPC. The client refuses a key over 255 characters before sending now, in the service's
    words, for every keyed write; a key of 255 is taken."""
    message = "idempotency_key: at most 255 characters (got 5000)"
    async with _client(service, transport) as client:
        memory = await client.store("the memory a too-long key would replace", idempotency_key="k" * 255)
        for name, args in (("store", ("x",)), ("store_batch", (["x", "y"],)), ("supersede", (memory.id, "y"))):
            with pytest.raises(InvalidArgument) as error:
                await getattr(client, name)(*args, idempotency_key="k" * 5000)
            assert (error.value.field, error.value.message) == ("idempotency_key", message), (name, error.value)
        assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_a_rest_refusal_of_the_idempotency_key_header_names_the_argument(service) -> None:
    """The gateway names the header (``idempotency-key: String should have at most 255
    characters``); the client reads it as the argument ``idempotency_key``, as over gRPC.
    The gateway's answer is read here as the client reads any answer."""
    from automem_client.errors import from_http

    async with service.http() as http:
        r = await http.post("/memory", json={"content": "x"}, headers={"Idempotency-Key": "k" * 5000})
    assert r.status_code == 400, r.text
    error = from_http(r.status_code, r.json())
    assert error.field == "idempotency_key" and error.message.startswith("idempotency_key: "), error


@pytest.mark.parametrize("relation", ["REPLACES", "", "RELATES_TO"])
async def test_a_supersede_relation_that_is_not_allowed_is_refused_alike_over_both_transports(
        service, relation: str) -> None:
    """Break-it review: ``supersede(relation="REPLACES")`` was refused naming ``relation``
    over gRPC and ``supersede_relation`` over REST, both listing all 14 relation types, and
    ``relation=""`` refused over gRPC but taken as INVALIDATED_BY over REST. The client
    refuses each before sending now, naming ``relation`` and the two a supersede may use,
    with the same message over both; nothing is superseded."""
    messages = set()
    for transport in TRANSPORTS:
        async with _client(service, transport) as client:
            memory = await client.store(f"the memory a bad relation would replace over {transport}")
            with pytest.raises(InvalidArgument) as error:
                await client.supersede(memory.id, "the replacement", relation=relation)
            assert error.value.field == "relation", (transport, error.value)
            assert (await client.get(memory.id)).state.upper() == "ACTIVE"
            messages.add(error.value.message)
    assert messages == {f"relation: must be INVALIDATED_BY or EVOLVED_INTO (got {relation!r})"}, messages
    async with _client(service, "rest") as client:  # any case, and the proto's prefix, are taken
        memory = await client.store("the memory evolved into another")
        replaced = await client.supersede(memory.id, "the evolved memory", relation="relation_type_evolved_into")
        assert replaced.relation is not None and replaced.relation.type.upper().endswith("EVOLVED_INTO")


async def test_the_services_supersede_refusal_lists_only_the_relations_a_supersede_may_use(service) -> None:
    """``POST /v1/memories/{id}:supersede`` with ``supersede_relation: "REPLACES"`` was
    refused listing every relation type (RELATES_TO, LEADS_TO, ...), though a supersede
    takes two: it lists INVALIDATED_BY and EVOLVED_INTO now (as ``POST /memory`` does)."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "the memory a REPLACES supersede targets"})
        assert r.status_code == 201, r.text
        memory_id = r.json()["memory_id"]
        for path, body in ((f"/v1/memories/{memory_id}:supersede", {"content": "new", "supersede_relation": "REPLACES"}),
                           ("/memory", {"content": "new", "supersedes_memory_id": memory_id,
                                        "supersede_relation": "REPLACES"})):
            r = await http.post(path, json=body)
            assert r.status_code == 400, r.text
            assert r.json()["message"] == "supersede_relation: must be INVALIDATED_BY or EVOLVED_INTO (got 'REPLACES')", (
                path, r.text)


# --- the REST event stream on a stalled gateway -----------------------------------------------


class SilentStream:
    """A loopback HTTP server answering every request with the headers of an event stream
    and then nothing (a gateway stopped after it answered). Counts the requests."""

    def __init__(self) -> None:
        self.requests = 0
        self.server: asyncio.AbstractServer | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            await writer.drain()
            await reader.read()  # until the client goes away; nothing more is sent
        except (asyncio.IncompleteReadError, ConnectionError):
            pass


async def _first_event(client: AsyncClient) -> Any:
    async for event in client.events():
        return event
    return None


async def test_a_rest_event_stream_on_a_stalled_gateway_is_unavailable_after_its_idle_timeout() -> None:
    """Break-it review: the REST ``events()`` read with no read timeout, so a gateway that
    stalled after answering (SIGSTOP; here a server that sends the stream's headers and then
    nothing) held the iteration for ever. With nothing — no event, no keepalive — for the
    client's ``stream_idle_timeout`` it raises Unavailable now. (The test gives up after 30 s:
    the old client never returned.)"""
    server = SilentStream()
    url = await server.start()
    client = AsyncClient.rest(url, scope="stalled", stream_idle_timeout=0.5, max_attempts=1)
    try:
        with pytest.raises(Unavailable) as error:
            await asyncio.wait_for(_first_event(client), 30)
        assert "nothing came for 0.5 s" in error.value.message and "keepalive" in error.value.message, error.value
        assert server.requests == 1
    finally:
        await client.close()
        await server.stop()


async def test_the_default_stream_idle_timeout_is_longer_than_the_gateways_keepalive() -> None:
    """The client's default wait for the next line outlasts the gateway's keepalive interval
    (its default, AUTOMEM_STREAM_KEEPALIVE_SECONDS), so an idle but live stream is never
    given up."""
    from automem_client._rest import STREAM_IDLE_TIMEOUT

    from automem.common.settings import Settings

    keepalive = Settings.model_fields["stream_keepalive_seconds"].default
    assert STREAM_IDLE_TIMEOUT > keepalive, (STREAM_IDLE_TIMEOUT, keepalive)
    assert AsyncClient.rest("http://127.0.0.1:1").transport.stream_idle_timeout == STREAM_IDLE_TIMEOUT
    with pytest.raises(InvalidArgument) as error:
        AsyncClient.rest("http://127.0.0.1:1", stream_idle_timeout=0)
    assert error.value.field == "stream_idle_timeout"


async def test_an_idle_rest_event_stream_is_kept_open_by_the_gateways_keepalive(settings) -> None:
    """With the gateway's keepalive (AUTOMEM_STREAM_KEEPALIVE_SECONDS, 0.2 s here) shorter
    than the client's idle timeout (1 s), a stream on which no event comes for 3 s stays
    open, and the next event arrives on it."""
    service = await start_service(settings.model_copy(update={"stream_keepalive_seconds": 0.2}))
    try:
        await _idle_then_event(service)
    finally:
        await service.runner.stop()


async def _idle_then_event(service: Any) -> None:
    token = service.settings.api_token
    headers = {"api_key": token} if token else {}
    client = AsyncClient.rest(service.url, scope="keepalive/t", stream_idle_timeout=1.0, **headers)
    writer = AsyncClient.rest(service.url, scope="keepalive/t", **headers)
    got: asyncio.Queue = asyncio.Queue()

    async def read() -> None:
        try:
            async for event in client.events():
                await got.put(event)
        except Exception as exc:  # noqa: BLE001 - the test reads it
            await got.put(exc)

    reader = asyncio.create_task(read())
    try:
        async with httpx.AsyncClient(base_url=service.url, timeout=10) as http:  # the stream's subscriber is up
            for _ in range(100):
                if (await http.get("/stream/status")).json().get("subscribers", 0) >= 1:
                    break
                await asyncio.sleep(0.1)
        await asyncio.sleep(3)  # idle: only keepalives come
        assert got.empty(), got.get_nowait()
        stored = await writer.store("an event after a quiet stream")
        event = await asyncio.wait_for(got.get(), 30)
        assert not isinstance(event, Exception), event
        assert event.memory_id == stored.id, event
    finally:
        reader.cancel()
        await client.close()
        await writer.close()
