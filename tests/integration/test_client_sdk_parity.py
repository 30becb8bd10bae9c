"""The client (clients/python, ``automem_client``) answering alike over gRPC and REST where a
break-it round found them apart: a request over the size limit, a too-long idempotency key,
a supersede's relation; and the REST event stream on a stalled gateway.

Against the real service (and, for the stalled stream, a loopback server that answers the
SSE headers and then nothing: no store, no bus is stood in for).
"""

from __future__ import annotations

from typing import Any

import pytest
from automem_client import AsyncClient, InvalidArgument, MemoryInput, ResourceExhausted

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
