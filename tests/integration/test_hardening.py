"""Regressions for what a hostile client found: each case answers a clear 4xx (never a 500,
a dropped connection or a stalled pipeline) and stores nothing it shouldn't."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from automem.common.outbox import EventPublisher
from automem.v1 import events_pb2
from tests.conftest import eventually, start_service


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def test_oversized_metadata_is_rejected_naming_the_limit(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "big", "metadata": {"blob": "z" * 70_000}})
        assert r.status_code == 400 and "metadata" in r.json()["error"] and "65536" in r.json()["error"]
    assert await service.ctx.graph.memories.count(service.scope) == 0


async def test_event_too_large_for_the_bus_is_set_aside_and_later_events_flow(own_service) -> None:
    publisher: EventPublisher = own_service.ctx.publisher
    huge = events_pb2.MemoryEvent(event_id="too-big", type=events_pb2.EVENT_TYPE_MEMORY_UPDATED, memory_id="x",
                                  reason="z" * 2_000_000)
    import base64

    await publisher.graph.redis.rpush(publisher.key, base64.b64encode(huge.SerializeToString()).decode())
    async with own_service.http() as http:
        mid = await _store(http, "stored behind a poison event")

        async def embedded():
            return (await http.get(f"/memory/{mid}")).json()["memory"]["embedding_status"] == "done"
        await eventually(embedded, timeout=30)
    assert await publisher.backlog() == 0
    assert await publisher.graph.redis.llen(publisher.dead_key) == 1


async def test_drainers_in_several_processes_never_drop_an_unpublished_event(own_service) -> None:
    """Break-it review (distributed mode): ingest, enrich and consolidate each drain the one
    outbox, and a drain read the head, published it, then popped whatever the head was by
    then: with two drainers one popped an entry the other had not published (9 of 100 events
    of acknowledged writes never reached the stream). Three drainers here (the service's own
    and two more) empty an outbox of 200 events at once: every event is on the stream, once."""
    import asyncio
    import base64

    publisher: EventPublisher = own_service.ctx.publisher
    ids = [f"outbox-race-{i}" for i in range(200)]
    entries = [base64.b64encode(events_pb2.MemoryEvent(
        event_id=eid, type=events_pb2.EVENT_TYPE_MEMORY_UPDATED, memory_id=f"race-{i}", scope="race",
        actor="test").SerializeToString()).decode() for i, eid in enumerate(ids)]
    await publisher.graph.redis.rpush(publisher.key, *entries)
    others = [EventPublisher(publisher.bus, publisher.graph) for _ in range(2)]
    await asyncio.gather(*(p.drain_once() for p in others))
    await eventually(lambda: _empty(publisher), timeout=30)
    on_stream = [e.event_id for e in await publisher.bus.events_for(None, limit=100_000) if e.event_id in set(ids)]
    assert sorted(on_stream) == sorted(ids), (len(on_stream), sorted(set(ids) - set(on_stream))[:5])


async def _empty(publisher: EventPublisher) -> bool:
    return await publisher.backlog() == 0


async def test_out_of_range_numbers_answer_400_and_keep_the_connection(service) -> None:
    async with service.http() as http:
        for params in ({"tags": "x", "offset": 10**12}, {"query": "x", "relation_limit": 10**12}):
            path = "/memory/by-tag" if "tags" in params else "/recall"
            r = await http.get(path, params=params)
            name = next(k for k in params if k not in ("tags", "query"))
            assert r.status_code == 400 and r.json()["error"].startswith(f"{name}: "), r.text
            assert (await http.get("/health")).status_code == 200  # same connection still works
        # The answer names the parameter (query or If-Match), as every other 400 does.
        for path, name in (("/recall?limit=99999999999999999999", "limit"), ("/analyze?top=99999999999999999999", "top"),
                           ("/graph/snapshot?limit=99999999999999999999", "limit"),
                           ("/memory/by-tag?tags=x&offset=1000000000000", "offset")):
            r = await http.get(path)
            assert r.status_code == 400 and r.json()["error"].startswith(f"{name}: "), r.text
        mid = await _store(http, "numbers beyond int64 in a header")
        # A valid entity tag no version can have: it never matches, so 412 (RFC 9110 section
        # 13.1.1), naming etag; a body etag past int64 is a 400 naming it.
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9},
                             headers={"If-Match": '"99999999999999999999999"'})
        assert r.status_code == 412 and r.json()["error"].startswith("etag: "), r.text
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9, "etag": 99999999999999999999999})
        assert r.status_code == 400 and r.json()["error"].startswith("etag: "), r.text


async def test_query_embedding_of_the_wrong_size_names_the_field(service) -> None:
    async with service.http() as http:
        r = await http.get("/recall", params={"embedding": "1,2,3"})
        assert r.status_code == 400 and "embedding" in r.json()["error"] and "384" in r.json()["error"]
        # float() read these as numbers (break-it review); each value must be a JSON number.
        for bad in ("1_0", "\u0661", "nan", "inf", "0x1", "+1", ".5"):
            r = await http.get("/recall", params={"embedding": ",".join([bad] + ["0.1"] * 383)})
            assert r.status_code == 400 and r.json()["error"] == "embedding: must be a comma-separated list of numbers", \
                (bad, r.text)
        r = await http.get("/recall", params={"embedding": "[" + ",".join(["-1.5e-3", "0", "2E+2"] * 128) + "]"})
        assert r.status_code == 200, r.text


async def test_chunked_body_over_the_limit_gets_413(service) -> None:
    settings = service.settings

    async def chunks():
        yield b'{"content": "'
        for _ in range(settings.max_body_bytes // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    async with service.http() as http:
        r = await http.post("/memory", content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and str(settings.max_body_bytes) in r.json()["error"]
    assert await service.ctx.graph.memories.count(service.scope) == 0


async def test_supersession_cycles_and_edits_of_history_are_refused(service) -> None:
    async with service.http() as http:
        a = await _store(http, "llamas eat grass")
        b = await _store(http, "llamas eat hay")
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "INVALIDATED_BY"})
        assert r.status_code == 201
        r = await http.post("/associate", json={"memory1_id": b, "memory2_id": a, "type": "INVALIDATED_BY"})
        assert r.status_code == 409 and "ACTIVE" in r.json()["error"]
        for patch in ({"t_invalid": None}, {"content": "llamas eat everything"}):
            r = await http.patch(f"/memory/{a}", json=patch)
            assert r.status_code == 409 and "SUPERSEDED" in r.json()["error"]
        hits = (await http.get("/recall", params={"query": "llamas"})).json()["results"]
        assert [h["id"] for h in hits] == [b] and hits[0]["memory"]["state"] == "ACTIVE"


async def test_get_before_the_memory_was_recorded_is_404(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "recorded today")
        r = await http.get(f"/memory/{mid}", params={"known_at": "2020-01-01T00:00:00Z"})
        assert r.status_code == 404
        r = await http.get(f"/memory/{mid}")
        assert r.status_code == 200 and r.headers["ETag"] == '"1"'
        # A weak tag never matches on If-Match (RFC 9110's strong comparison); the strong one does.
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.7}, headers={"If-Match": 'W/"1"'})
        assert r.status_code == 412 and "weak" in r.json()["error"]
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.7}, headers={"If-Match": '"1"'})
        assert r.status_code == 200
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.8}, headers={"If-Match": '"1"'})
        assert r.status_code == 412


async def test_null_tags_are_rejected_not_taken_as_empty(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "tagged", tags=["keep"])
        r = await http.patch(f"/memory/{mid}", json={"tags": None})
        assert r.status_code == 400 and "tags" in r.json()["error"]
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["tags"] == ["keep"]


async def test_null_metadata_in_a_patch_is_refused_naming_it_as_other_nulls_are(service) -> None:
    """``PATCH {"metadata": null}`` answered 200 and changed nothing, while null for tags,
    importance, type... is a 400 naming the field: now a 400 naming ``metadata`` too, with
    nothing changed, and the OpenAPI schema's PATCH body takes no null metadata."""
    async with service.http() as http:
        mid = await _store(http, "metadata kept", metadata={"owner": "dana"})
        before = await http.get(f"/memory/{mid}")
        for body in ({"metadata": None}, {"metadata": None, "importance": 0.9}):
            r = await http.patch(f"/memory/{mid}", json=body)
            assert r.status_code == 400, (body, r.text)
            assert r.json()["error"].startswith("metadata: "), r.text
            assert r.json()["code"] == 400
        after = await http.get(f"/memory/{mid}")
        assert after.json()["memory"]["metadata"] == {"owner": "dana"}
        assert after.json()["memory"]["importance"] == before.json()["memory"]["importance"]
        assert after.headers["etag"] == before.headers["etag"]
        # The same refusal as a null tags (the wording of the other fields).
        r = await http.patch(f"/memory/{mid}", json={"tags": None})
        assert r.status_code == 400 and r.json()["error"].startswith("tags: ")
        schema = (await http.get("/openapi.json")).json()["components"]["schemas"]["UpdateMemoryBody"]
        metadata = schema["properties"]["metadata"]
        assert metadata["$ref"] == "#/components/schemas/MetadataObject" and "anyOf" not in metadata, metadata


async def test_scope_names_are_validated(own_service) -> None:
    async with own_service.http() as http:
        for scope in ("acme/*", "acme/", "acme/web/../../other/x", "/root", "a b"):
            r = await http.post("/memory", json={"content": "x"}, headers={"X-Automem-Scope": scope})
            assert r.status_code == 400 and "scope" in r.json()["error"], scope
        r = await http.post("/memory", json={"content": "x"}, headers={"X-Automem-Scope": "acme/web-app_2.0"})
        assert r.status_code == 201 and r.json()["scope"] == "acme/web-app_2.0"
    assert await own_service.ctx.graph.memories.count() == 1


def test_cli_user_errors_are_one_line_without_traceback(falkordb_server, tmp_path: Path) -> None:
    env = {**os.environ, "FALKORDB_HOST": falkordb_server.host, "FALKORDB_PORT": str(falkordb_server.port),
           "FALKORDB_GRAPH": "cli_errors", "AUTOMEM_DATA_DIR": str(tmp_path)}
    automem = str(Path(sys.executable).parent / "automem")
    for args in (["keys", "revoke", "nonexistent"], ["keys", "create", "--role", "writer", "--scope", ""]):
        result = subprocess.run([automem, *args], env=env, capture_output=True, text=True, check=False, timeout=60)
        assert result.returncode == 1, result
        assert "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith(f"automem {args[0]} {args[1]}:")
    # A directory to restore from, a URL of another scheme: said so (they read "no such file"
    # and "cannot reach the service").
    result = subprocess.run([automem, "restore", str(tmp_path), "--grpc", "127.0.0.1:1"], env=env,
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 1 and result.stderr.strip().endswith(": is a directory; name a backup file"), result
    result = subprocess.run([automem, "keys", "list", "--url", "ftp://x"], env=env, capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 2 and "'ftp://x' is not an http:// or https:// URL" in result.stderr, result
    # A bad setting in the environment: one line naming it, exit 2, no traceback.
    result = subprocess.run([automem, "serve", "--target", "recall"], env={**env, "AUTOMEM_LOG_FORMAT": "xml"},
                            capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result
    assert result.stderr.strip().splitlines() == [line for line in result.stderr.strip().splitlines()
                                                  if line.startswith("automem: setting ")]
    assert "AUTOMEM_LOG_FORMAT" in result.stderr and "'xml'" in result.stderr


async def test_deeply_nested_metadata_is_rejected_and_nothing_stored(service) -> None:
    nested: object = "leaf"
    for _ in range(50):
        nested = [nested]
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "nest", "metadata": {"d": nested}})
        assert r.status_code == 400 and "metadata" in r.json()["error"] and "20" in r.json()["error"]
        # Past the JSON reader's recursion limit the answer said "not UTF-8 text, or not JSON"
        # (break-it review); it now names the nesting.
        deep = b'{"content": "nest", "metadata": {"d": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
        r = await http.post("/memory", content=deep, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["error"].startswith("body: ") and "nested" in r.json()["error"]
        # 1e308 is finite, but not as the 32-bit float an embedding is stored as: the answer says so.
        r = await http.post("/memory", json={"content": "big", "embedding": [1e308] * 384})
        assert r.status_code == 400 and r.json()["error"].startswith("embedding: ") and "32-bit" in r.json()["error"]
    assert await service.ctx.graph.memories.count(service.scope) == 0


async def test_lone_surrogate_is_400_naming_the_field_and_the_connection_survives(service) -> None:
    async with service.http() as http:
        for raw, field in ((b'{"content": "bad \\ud800 text"}', "content:"),
                           (b'{"content": "ok", "metadata": {"notes": ["fine", "\\udfff"]}}', "metadata.notes[1]:"),
                           (b'{"content": "ok", "metadata": {"\\ud800": 1}}', "metadata (a key):"),
                           (b'{"memories": [{"content": "ok"}, {"content": "x\\udbff"}]}', "memories[1].content:")):
            path = "/memory/batch" if b"memories" in raw else "/memory"
            r = await http.post(path, content=raw, headers={"Content-Type": "application/json"})
            assert r.status_code == 400 and "surrogate" in r.json()["error"], r.text
            assert r.json()["error"].startswith(field), r.text
        r = await http.post("/memory", content=b'{"content": "a pair \\ud83d\\ude00 is fine"}',
                            headers={"Content-Type": "application/json"})
        assert r.status_code == 201 and r.json()["memory_id"]
        assert (await http.get("/health")).status_code == 200
    assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_query_and_path_bytes_that_are_not_utf8_are_400_naming_the_parameter(service) -> None:
    """Starlette decodes percent-encoded bytes with replacement: ``tags=%ff`` listed and
    deleted by the tag "\ufffd", ``query=%ff%fe`` searched for two replacement characters
    (break-it review). Now a 400 naming the parameter, nothing deleted; valid UTF-8 still
    reads as before."""
    async with service.http() as http:
        mid = (await _store(http, "Tagged with a replacement character", tags=["\ufffd", "utf8-check"]))
        for target, name in (("/recall?query=%ff%fe", "query"), ("/recall?query=ok&tags=%ff", "tags"),
                             ("/memory/by-tag?tags=%c3", "tags"), ("/recall?lim%ffit=3", "lim\\xffit"),
                             ("/memory/%ff%fe", "path")):
            r = await http.get(target)
            assert r.status_code == 400 and r.json()["error"].startswith(f"{name}: "), (target, r.text)
        r = await http.delete("/memory/by-tag?tags=%ff")
        assert r.status_code == 400 and r.json()["error"].startswith("tags: "), r.text
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["state"] == "ACTIVE"
        r = await http.get("/memory/by-tag?tags=%ef%bf%bd")  # the replacement character itself, as UTF-8
        assert r.status_code == 200 and [m["id"] for m in r.json()["memories"]] == [mid], r.text
        r = await http.get("/recall", params={"query": "caf\u00e9 \u2603", "tags": "utf8-check"})
        assert r.status_code == 200, r.text


async def test_already_expired_memory_can_be_stored_without_t_valid(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "The old VPN endpoint is vpn1", t_invalid="2020-01-01T00:00:00Z")
        got = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert got["t_invalid"] == "2020-01-01T00:00:00+00:00" and got["t_valid"] < got["t_invalid"]
        assert (await http.get("/recall", params={"query": "VPN endpoint"})).json()["results"] == []


async def test_times_read_back_exactly_at_millisecond_precision(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "precise", "timestamp": "2024-05-01T12:00:00.123Z"})
        stored = r.json()
        got = (await http.get(f"/memory/{stored['memory_id']}")).json()["memory"]
        assert got["timestamp"] == "2024-05-01T12:00:00.123000+00:00"
        assert got["created_at"] == stored["stored_at"] and got["t_valid"] == stored["memory"]["t_valid"]
        # Far from 1970 a float of epoch seconds keeps ~30 us: the last digits read back as
        # noise (...59.998993) before times were rounded to the millisecond on the way out.
        for sent in ("9999-12-31T23:59:59.999", "3000-01-01T00:00:00.001", "5000-06-15T12:00:00.007",
                     "0500-01-01T00:00:00.123"):
            r = await http.post("/memory", json={"content": f"precise {sent}", "timestamp": sent + "Z"})
            assert r.status_code == 201, r.text
            got = (await http.get(f"/memory/{r.json()['memory_id']}")).json()["memory"]
            assert got["timestamp"] == sent + "000+00:00", sent
        # An end in the last second of 9999 read back as none (the stored open end): refused.
        for sent in ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59.5Z"):
            r = await http.post("/memory", json={"content": "open end probe", "t_invalid": sent})
            assert r.status_code == 400 and r.json()["error"].startswith("t_invalid: must be before 9999"), r.text
            r = await http.patch(f"/memory/{stored['memory_id']}", json={"t_invalid": sent})
            assert r.status_code == 400 and r.json()["error"].startswith("t_invalid: must be before 9999"), r.text
        # A start there: a window that is empty, a supersede that never takes effect.
        r = await http.post(f"/v1/memories/{stored['memory_id']}:supersede",
                            json={"content": "open end probe: replaced", "t_valid": "9999-12-31T23:59:59.250Z"})
        assert r.status_code == 400 and r.json()["error"].startswith("t_valid: must be before 9999"), r.text
        r = await http.post("/memory", json={"content": "open end probe", "t_invalid": "9999-12-31T23:59:58.999Z"})
        got = (await http.get(f"/memory/{r.json()['memory_id']}")).json()["memory"]
        assert got["t_invalid"] == "9999-12-31T23:59:58.999000+00:00", got


async def test_chain_longer_than_five_hops_never_returns_a_superseded_memory_as_current(service) -> None:
    async with service.http() as http:
        chain = [await _store(http, f"release train version {i} of the mobile app", tags=["train"]) for i in range(8)]
        for old, new in itertools.pairwise(chain):
            r = await http.post("/associate", json={"memory1_id": old, "memory2_id": new, "type": "EVOLVED_INTO"})
            assert r.status_code == 201
        hits = (await http.get("/recall", params={"query": "release train version", "limit": 20})).json()["results"]
        assert [h["id"] for h in hits] == [chain[-1]]
        listed = (await http.get("/memory/by-tag", params={"tags": "train"})).json()["memories"]
        assert [m["id"] for m in listed] == [chain[-1]]
        # Every earlier memory names the head, seven hops away at most (the first two named
        # none while the walk stopped after five hops).
        for mid in chain[:-1]:
            got = (await http.get(f"/memory/{mid}")).json()["memory"]
            assert got["is_current"] is False and got["current_id"] == chain[-1], chain.index(mid)


async def test_commas_in_tags_and_bad_recall_parameters_are_400(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "x", "tags": ["a,b"]})
        assert r.status_code == 400 and "comma" in r.json()["error"]
        for params, field in (({"limit": 0}, "limit"), ({"recency_bias": "bogus"}, "recency_bias"),
                              ({"relation_limit": -1}, "relation_limit"),
                              ({"expansion_limit": 10**6}, "expansion_limit"),
                              # Importance and strength are 0..1, scores not negative: a bound
                              # outside kept or dropped every expansion without a word.
                              ({"expand_min_importance": 5}, "expand_min_importance"),
                              ({"expand_min_strength": -1}, "expand_min_strength"),
                              ({"min_score": -1}, "min_score")):
            r = await http.get("/recall", params=params)
            assert r.status_code == 400 and r.json()["error"].startswith(f"{field}: "), (params, r.text)
        r = await http.get("/memory/by-tag", params={"tags": "x", "limit": 0})
        assert r.status_code == 400 and "limit" in r.json()["error"]
        r = await http.get("/graph/snapshot", params={"min_importance": "nan"})
        assert r.status_code == 400 and r.json()["error"].startswith("min_importance: ") and "finite" in r.text, r.text
    from automem.v1 import recall_service_pb2

    async with service.client() as client:
        for name, value in (("expand_min_importance", 1.5), ("expand_min_strength", -0.1), ("min_score", -2.0)):
            try:
                await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(query="x", **{name: value}))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT and exc.details().startswith(f"{name}: "), exc
            else:
                raise AssertionError(f"{name}={value} was accepted")


async def test_restore_with_force_replaces_instead_of_duplicating(own_service) -> None:
    from automem.common import backup
    from automem.graph import GraphStore

    async with own_service.http() as http:
        for i in range(2):
            await _store(http, f"restorable {i}")
    records = [r async for r in backup.export_records(own_service.ctx.graph, None)]
    target = GraphStore(own_service.settings.model_copy(update={"graph_name": own_service.settings.graph_name + "_copy"}))
    try:
        await backup.restore_records(target, records)
        assert await target.memories.count() == 2
        await backup.restore_records(target, records, force=True)
        assert await target.memories.count() == 2
    finally:
        await target.close()


async def test_idempotency_key_reused_for_other_content_is_refused(service) -> None:
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "first"}, headers={"Idempotency-Key": "k-1"})
        assert r.status_code == 201
        r = await http.post("/memory", json={"content": "something else"}, headers={"Idempotency-Key": "k-1"})
        assert r.status_code == 400 and "idempotency_key" in r.json()["error"]
    assert await service.ctx.graph.memories.count(service.scope) == 1


async def test_enrichment_audit_event_shows_the_record_as_it_stands(own_service) -> None:
    import asyncio

    consumer = own_service.ctx.enrich_consumer
    consumer.stop()
    await asyncio.sleep(1.2)  # the loop notices within one fetch timeout
    async with own_service.http() as http:
        mid = await _store(http, "audited while enrichment was paused", importance=0.4)
        assert (await http.patch(f"/memory/{mid}", json={"importance": 0.9})).status_code == 200
        consumer._stop.clear()
        task = asyncio.create_task(consumer.run())
        try:
            async def enriched_event():
                events = (await http.get(f"/v1/memories/{mid}/history")).json()["events"]
                return [e for e in events if e["type"] == "EVENT_TYPE_MEMORY_ENRICHED"]
            [event] = await eventually(enriched_event, timeout=30)
            assert event["after"]["version"] == "2" and event["after"]["importance"] == 0.9
            assert event["after"]["embedding_status"] == "EMBEDDING_STATUS_DONE"
            assert event["before"]["embedding_status"] == "EMBEDDING_STATUS_PENDING"
        finally:
            consumer.stop()
            await asyncio.wait([task], timeout=5)


async def test_header_values_no_key_can_hold_answer_instead_of_hanging(service) -> None:
    import asyncio

    async with service.http() as http:
        for headers, status in (({"Authorization": "Bearer tok\tx"}, 401), ({"X-API-Key": "k\x7f"}, 401),
                                ({"X-Automem-Scope": "acme\tx"}, 400)):
            r = await asyncio.wait_for(http.get("/recall", params={"query": "x"}, headers=headers), timeout=10)
            assert r.status_code == status, (headers, r.text)
        r = await asyncio.wait_for(http.get("/recall", headers=[(b"authorization", "Bearer ü".encode())]), 10)
        assert r.status_code == 401


async def test_concurrent_opposite_supersessions_cannot_form_a_cycle(service) -> None:
    import asyncio

    async with service.http() as http:
        for attempt in range(6):
            x = await _store(http, f"cycle candidate x {attempt}", tags=[f"cyc{attempt}"])
            y = await _store(http, f"cycle candidate y {attempt}", tags=[f"cyc{attempt}"])
            results = await asyncio.gather(
                http.post("/associate", json={"memory1_id": x, "memory2_id": y, "type": "INVALIDATED_BY"}),
                http.post("/associate", json={"memory1_id": y, "memory2_id": x, "type": "INVALIDATED_BY"}))
            assert sorted(r.status_code for r in results) == [201, 409], [r.text for r in results]
            listed = (await http.get("/memory/by-tag", params={"tags": f"cyc{attempt}"})).json()["memories"]
            assert len(listed) == 1 and listed[0]["state"] == "ACTIVE"


async def test_edge_of_calendar_times_are_400_not_500(service) -> None:
    async with service.http() as http:
        for body in ({"t_invalid": "0001-01-01T00:00:00+01:00"}, {"timestamp": "9999-12-31T23:59:59-01:00"},
                     {"t_valid": "0001-01-01T00:30:00+01:00"}):
            r = await http.post("/memory", json={"content": "edge", **body})
            assert r.status_code == 400 and next(iter(body)) in r.json()["error"], r.text
        for params in ({"as_of": "0001-01-01T00:00:00+01:00"}, {"known_at": "9999-12-31T23:59:59-01:00"},
                       {"start": "0001-01-01T00:00:00+01:00"}):
            r = await http.get("/recall", params=params)
            assert r.status_code == 400, r.text
            assert (await http.get("/health")).status_code == 200
    assert await service.ctx.graph.memories.count(service.scope) == 0


async def test_metadata_cannot_grow_past_the_limit_through_patches(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "growing")
        assert (await http.patch(f"/memory/{mid}", json={"metadata": {"a": "x" * 40_000}})).status_code == 200
        r = await http.patch(f"/memory/{mid}", json={"metadata": {"b": "x" * 40_000}})
        assert r.status_code == 400 and "metadata" in r.json()["error"]


async def test_huge_ids_and_non_finite_query_embeddings_are_clear_errors(service) -> None:
    async with service.http() as http:
        a = await _store(http, "anchor")
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": "x" * 10_000})
        assert r.status_code == 400 and r.json()["error"].startswith("memory2_id: too long"), r.text
        r = await http.get("/recall", params={"embedding": ",".join(["nan"] * 384)})
        assert r.status_code == 400 and "embedding" in r.json()["error"]



async def test_an_embedding_without_a_direction_is_refused_not_stored_unfindable(service) -> None:
    """A caller vector of zeros, or of values under 32-bit floats' smallest (1e-300, which the
    proto field rounds to 0), was stored as a zero vector: no cosine ranks it, so the memory
    never surfaced by meaning, and a recall by it ranked everything 0. Both are refused
    naming the field; nothing is stored."""
    from automem.common.embedding import configured_dimension
    from automem.v1 import ingest_service_pb2, recall_service_pb2

    size = configured_dimension(service.settings)
    async with service.http() as http:
        for vector in ([0.0] * size, [1e-300] * size):
            r = await http.post("/memory", json={"content": "no direction", "embedding": vector, "tags": ["nodir"]})
            assert r.status_code == 400 and r.json()["error"].startswith("embedding: every value is 0"), r.text
            r = await http.post("/memory/batch", json={"memories": [{"content": "fine", "tags": ["nodir"]},
                                                                    {"content": "no direction", "embedding": vector}]})
            assert r.status_code == 400 and "memories[1].embedding" in r.json()["error"], r.text
            r = await http.get("/recall", params={"embedding": ",".join(str(v) for v in vector)})
            assert r.status_code == 400 and r.json()["error"].startswith("embedding: every value is 0"), r.text
        assert (await http.get("/memory/by-tag", params={"tags": "nodir"})).json()["count"] == 0
        tiny = [0.0] * size
        tiny[3] = 1e-30  # tiny, but a direction: kept
        assert await _store(http, "a tiny but real direction", embedding=tiny)
    async with service.client() as client:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="no direction", embedding=[0.0] * size)))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "embedding" in refused.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(embedding=[0.0] * size))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "embedding" in refused.value.details()

def test_backup_with_unreachable_nats_fails_in_one_line(falkordb_server, tmp_path: Path) -> None:
    env = {**os.environ, "FALKORDB_HOST": falkordb_server.host, "FALKORDB_PORT": str(falkordb_server.port),
           "FALKORDB_GRAPH": "cli_backup", "NATS_URL": "nats://127.0.0.1:1", "AUTOMEM_DATA_DIR": str(tmp_path)}
    automem = str(Path(sys.executable).parent / "automem")
    result = subprocess.run([automem, "backup", "--out", str(tmp_path / "b.jsonl")], env=env, capture_output=True,
                            text=True, check=False, timeout=90)
    assert result.returncode == 1, result
    assert result.stderr.strip().splitlines()[-1].startswith("automem backup: cannot reach NATS")


def test_serve_with_unreachable_nats_fails_naming_nats_url(falkordb_server, tmp_path: Path) -> None:
    """It waited at "starting module bus" for ever; now it fails after the store bound, as an
    unreachable FalkorDB does, with one line naming NATS_URL (a "start failed" traceback
    before: tests/integration/test_runtime.py has the unreachable-server cases)."""
    env = {**os.environ, "FALKORDB_HOST": falkordb_server.host, "FALKORDB_PORT": str(falkordb_server.port),
           "FALKORDB_GRAPH": "serve_unreachable_nats", "NATS_URL": "nats://127.0.0.1:1",
           "AUTOMEM_STORE_TIMEOUT_S": "1", "AUTOMEM_DATA_DIR": str(tmp_path), "QDRANT_URL": "disabled",
           "AUTOMEM_PORT": "0", "AUTOMEM_GRPC_PORT": "0", "AUTOMEM_LOG_FORMAT": "json"}
    automem = str(Path(sys.executable).parent / "automem")
    result = subprocess.run([automem, "serve", "--target", "ingest"], env=env, capture_output=True, text=True,
                            check=False, timeout=60)
    assert result.returncode == 1, result
    assert result.stderr.strip().splitlines()[-1].startswith(
        "automem serve: cannot reach NATS (NATS_URL=nats://127.0.0.1:1) within 1s: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


@contextlib.asynccontextmanager
async def holding_shard(edge: Any) -> AsyncIterator[None]:
    """Hold the embedded shard's thread (automem/vectors/edge.py ``_run``) as an index swap
    does: the shard calls made meanwhile wait behind a call that runs until the block ends."""
    release, running = threading.Event(), threading.Event()

    def hold() -> None:
        running.set()
        release.wait(60)

    held = asyncio.wrap_future(edge._executor.submit(hold))
    await asyncio.to_thread(running.wait, 10)
    try:
        yield
    finally:
        release.set()
        await held


async def test_health_answers_for_the_graph_while_the_vector_store_holds_its_reads(own_service) -> None:
    """An index swap holds the embedded shard's reads for seconds (automem/vectors/edge.py
    ``build_index``); /health must still say FalkorDB is connected, not time out as a whole."""

    edge = own_service.ctx.vectors.inner  # under the BoundedVectorStore wrapper
    async with own_service.http() as http:
        assert (await http.get("/health")).json()["qdrant"] == "connected"
        async with holding_shard(edge):  # what a swap holds
            r = await http.get("/health")
        body = r.json()
        assert r.status_code == 200, body
        assert (body["falkordb"], body["qdrant"], body["status"]) == ("connected", "disconnected", "degraded")
        await asyncio.sleep(0)
        assert (await http.get("/health")).json()["qdrant"] == "connected"


async def test_recall_answers_from_the_other_arms_while_the_vector_store_holds_its_reads(settings) -> None:
    """An index swap can hold the shard past the store bound (automem/vectors/edge.py
    ``build_index``): recall then answers from the keyword arm and names the vector arm in
    ``degraded`` (automem/recall/servicer.py) instead of failing with 503."""
    running = await start_service(settings.model_copy(update={"store_timeout_seconds": 0.5}))
    try:
        edge = running.ctx.vectors.inner  # under the BoundedVectorStore wrapper
        async with running.http() as http:
            r = await http.post("/memory", json={"content": "The billing service moved to PostgreSQL 16",
                                                 "tags": ["billing"]})
            mid = r.json()["memory_id"]

            async def embedded() -> bool:
                return (await http.get(f"/memory/{mid}")).json()["memory"]["embedding_status"] == "done"

            await eventually(embedded, timeout=30)
            params = {"query": "billing PostgreSQL", "limit": 5}
            async with holding_shard(edge):  # what a swap holds
                held = await http.get("/recall", params=params)
            body = held.json()
            assert held.status_code == 200, body
            assert (body["arms"], body["degraded"]) == (["keyword"], ["vector"])
            assert [h["id"] for h in body["results"]] == [mid]
            async with holding_shard(edge):
                listed = await http.get("/memory/by-tag", params={"tags": "billing"})
                newest = await http.get("/recall", params={"limit": 5})  # a listing, newest first
            assert newest.status_code == 200, newest.text
            assert [h["id"] for h in newest.json()["results"]] == [mid]
            assert listed.status_code == 200, listed.text
            assert [m["id"] for m in listed.json()["memories"]] == [mid]
            after = (await http.get("/recall", params=params)).json()
            assert "vector" in after["arms"] and after["degraded"] == []
    finally:
        await running.runner.stop()


async def test_an_idempotency_key_reused_on_supersede_with_other_content_is_refused(service) -> None:
    """The second supersede under one key but with other content answered 201 with the first
    replacement, dropping the new content without a word (``POST /memory`` refused it)."""
    async with service.http() as http:
        old = await _store(http, "The stand-up is at nine", tags=["standup"])
        key = {"Idempotency-Key": f"sup-{os.urandom(4).hex()}"}
        first = await http.post(f"/v1/memories/{old}:supersede", json={"content": "The stand-up is at ten"},
                                headers=key)
        assert first.status_code == 201, first.text
        again = await http.post(f"/v1/memories/{old}:supersede", json={"content": "The stand-up is at ten"},
                                headers=key)
        assert again.status_code in (200, 201), again.text  # the same request replays its answer
        assert again.json()["memory_id"] == first.json()["memory_id"]
        other = await http.post(f"/v1/memories/{old}:supersede",
                                json={"content": "The stand-up is at eleven", "importance": 0.9}, headers=key)
        assert other.status_code == 400 and "idempotency_key" in other.json()["error"], other.text
        other_memory = await _store(http, "Lunch is at noon")
        moved = await http.post(f"/v1/memories/{other_memory}:supersede", json={"content": "Lunch is at one"},
                                headers=key)
        assert moved.status_code in (400, 409) and "idempotency_key" in moved.json()["error"], moved.text


async def test_options_a_writing_route_does_not_read_are_refused_and_nothing_is_done(service) -> None:
    """An option sent where a route does not read it was dropped and the route acted without
    it: ``?dry_run=true`` or ``{"dryRun": true}`` on ``:purge`` purged for real, on
    ``DELETE /memory/by-tag`` deleted, and ``"dry_run": "false"`` ran a consolidation for real
    that AutoMem (``bool("false")``) runs dry. Each is a 400 naming the option now, and the
    memory is still there. AutoMem's read routes still ignore what they do not know."""
    async with service.http() as http:
        mid = await _store(http, "Options probe: the deploy window is Tuesday", tags=["optprobe"])
        refused = [
            ("POST", f"/v1/memories/{mid}:purge", {"dry_run": "true"}, None, "dry_run: a field of the JSON body"),
            ("POST", f"/v1/memories/{mid}:purge", None, {"dryRun": True}, "dryRun: not a field of this body (it takes dry_run, reason)"),
            ("POST", f"/v1/memories/{mid}:purge", None, {"dry_run": True, "force": True}, "force: not a field"),
            ("POST", "/v1/scope:purge", None, {"confirm_scope": service.scope, "dryRun": True}, "dryRun: "),
            ("POST", "/v1/scope:purge", {"dry_run": "true"}, {"confirm_scope": service.scope}, "dry_run: "),
            ("DELETE", "/memory/by-tag", {"tags": "optprobe", "dryRun": "true"}, None, "dryRun: not a parameter of this route (it takes dry_run, tags)"),
            ("DELETE", f"/memory/{mid}", {"dry_run": "true"}, None, "dry_run: not a parameter"),
            ("PATCH", f"/memory/{mid}", {"dry_run": "true"}, {"content": "changed"}, "dry_run: not a parameter"),
            ("POST", "/memory", {"dry_run": "true"}, {"content": "not stored"}, "dry_run: not a parameter"),
            ("POST", "/consolidate", None, {"mode": "forget", "dry_run": "false"}, "dry_run: "),
            ("POST", "/consolidate", None, {"mode": "forget", "dryrun": False}, "dryrun: not a field of this body (it takes dry_run, mode)"),
            ("POST", "/v1/apiKeys", None, {"name": "bot", "role": "reader", "scopes": [service.scope]}, "name: not a field"),
            ("POST", "/entity/someone/merge", None, {"mergeInto": "other"}, "mergeInto: not a field"),
            ("POST", f"/v1/memories/{mid}:supersede", None, {"content": "Options probe: replaced", "dry_run": True},
             "dry_run: not a field"),
            ("POST", "/memory/batch", None, {"memories": [{"content": "Options probe: batch"}], "dry_run": True},
             "dry_run: not a field"),
        ]
        # Routes without a body refuse one: {"dry_run": true} on a revoke revoked for real.
        refused += [("POST", f"/v1/apiKeys/{key}:revoke", None, {"dry_run": True}, "body: this route takes no body")
                    for key in ("0123456789ab",)]
        refused += [("POST", "/entities/merges/no-such-merge/undo", None, {"dry_run": True},
                     "body: this route takes no body"),
                    ("POST", "/v1/tombstones/no-such-tombstone:lift", None, {"dry_run": True},
                     "body: this route takes no body"),
                    ("DELETE", f"/memory/{mid}", None, {"dry_run": True}, "body: this route takes no body")]
        for method, path, params, body, error in refused:
            r = await http.request(method, path, params=params, json=body)
            assert r.status_code == 400 and r.json()["error"].startswith(error), (method, path, params, body, r.text)
            assert "nothing was done" in r.json()["error"] or "boolean" in r.json()["error"], r.text
        r = await http.get(f"/memory/{mid}")
        assert r.status_code == 200 and r.json()["memory"]["content"].startswith("Options probe"), r.text
        assert r.json()["memory"]["version"] == 1
        assert (await http.get("/memory/by-tag", params={"tags": "optprobe"})).json()["count"] == 1
        assert await service.ctx.graph.memories.count(service.scope) == 1
        assert (await http.get("/v1/purges")).json()["purges"] == []
        # The service's own listings refuse unknown parameters too; AutoMem's read routes do not.
        r = await http.get("/v1/purges", params={"pageSize": "1"})
        assert r.status_code == 400 and r.json()["error"].startswith("pageSize: not a parameter"), r.text
        assert (await http.get("/recall", params={"query": "deploy window", "format": "text"})).status_code == 200
        # AutoMem's reprocess reads a comma-separated string too (automem/api/enrichment.py).
        r = await http.post("/enrichment/reprocess", json={"ids": f"{mid}, "})
        assert r.status_code == 200 and r.json()["queued"] == 1, r.text
        r = await http.post("/enrichment/reprocess", params={"ids": mid}, json={"ids": [mid]})
        assert r.status_code == 400 and r.json()["error"].startswith("ids: a field of the JSON body"), r.text
        r = await http.post("/consolidate", json={"mode": "", "dry_run": True})
        assert r.status_code == 400 and r.json()["error"].startswith("mode: name a mode"), r.text
        # No body is a full dry run, as AutoMem reads it (it was a 400 "body: Field required").
        r = await http.post("/consolidate")
        assert r.status_code == 200 and r.json()["dry_run"] is True and r.json()["mode"] == "full", r.text
        # The dry run asked the right way still counts and removes nothing.
        r = await http.post(f"/v1/memories/{mid}:purge", json={"dry_run": True})
        assert r.status_code == 200 and r.json()["purge"]["dry_run"] is True, r.text
        assert (await http.get(f"/memory/{mid}")).status_code == 200


async def test_a_strength_of_nan_is_400_naming_strength_not_a_500(service) -> None:
    """``"strength": "NaN"`` (a string pydantic reads as a float) passed every range check and
    failed in the graph's query: a 500 whose message quoted the Cypher. The gRPC check let a
    NaN through too (``NaN < 0`` and ``NaN > 1`` are both false)."""
    from automem.v1 import ingest_service_pb2, memory_pb2

    async with service.http() as http:
        a = await _store(http, "Strength probe: the first memory")
        b = await _store(http, "Strength probe: the second memory")
        for strength in ("NaN", "nan", "-Infinity"):
            r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "strength": strength})
            assert r.status_code == 400 and r.json()["error"].startswith("strength: "), (strength, r.text)
            r = await http.post("/associate", json={"associations": [
                {"memory1_id": a, "memory2_id": b, "type": "RELATES_TO", "strength": strength}]})
            assert r.status_code == 400 and "strength" in r.text and "CYPHER" not in r.text, (strength, r.text)
        # One association's fields beside a batch were dropped (AutoMem reads the batch only).
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "CONTRADICTS",
                                                "associations": [{"memory1_id": b, "memory2_id": a}]})
        assert r.status_code == 400 and r.json()["error"].startswith("memory1_id: send one"), r.text
        # No authored edge was written (enrichment may link the two on its own: PRECEDED_BY).
        edges = await service.ctx.graph.ro_query(
            "MATCH (:Memory {id: $a})-[r]-(:Memory {id: $b}) WHERE type(r) IN ['RELATES_TO', 'CONTRADICTS'] "
            "RETURN count(r)", {"a": a, "b": b})
        assert edges[0][0] == 0, edges
    async with service.client() as client:
        try:
            await client.ingest.CreateRelation(ingest_service_pb2.CreateRelationRequest(relation=memory_pb2.Relation(
                source_id=a, target_id=b, strength=float("nan"))))
        except grpc.aio.AioRpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT and "strength" in (exc.details() or ""), exc
        else:
            raise AssertionError("a NaN strength was stored")
        for strength in (float("nan"), 1.5, -0.1):  # a supersede's edge (an import sets it)
            try:
                await client.ingest.SupersedeMemory(ingest_service_pb2.SupersedeMemoryRequest(
                    id=a, replacement=ingest_service_pb2.MemoryInput(content="Strength probe: replaced"),
                    strength=strength))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT and "strength" in (exc.details() or ""), exc
            else:
                raise AssertionError(f"a supersede with strength {strength} went through")


async def test_head_answers_as_get_without_the_body(service) -> None:
    """AutoMem (Flask) answers HEAD on every GET route; here each was a 405. HEAD now gets
    GET's status and headers with no body, a streamed route ends at once, and a route
    without GET still answers 405."""
    async with service.http() as http:
        mid = await _store(http, "Head probe: the office moves in March")

        async def enriched() -> bool:  # else enrichment may change the memory between GET and HEAD
            return (await http.get(f"/memory/{mid}")).json()["memory"]["enrichment_status"] == "done"

        await eventually(enriched)
        for path, params in ((f"/memory/{mid}", None), ("/health", None),
                             ("/recall", {"query": "office move", "limit": "3"}),
                             ("/memory/by-tag", {"tags": "nothing-here"})):
            got = await http.get(path, params=params)
            head = await http.head(path, params=params)
            assert head.status_code == got.status_code == 200, (path, head.status_code, got.text)
            assert head.content == b"", path
            assert head.headers["content-type"] == got.headers["content-type"], path
            if path.startswith("/memory/"):
                assert head.headers["content-length"] == got.headers["content-length"], path
        r = await http.head("/memory/00000000-0000-4000-8000-000000000000")
        assert r.status_code == 404 and r.content == b""
        r = await http.head("/memory")
        assert r.status_code == 405 and r.headers["allow"] == "POST", r.headers
        # Allow names every method of the resource (it named the first route's only).
        r = await http.put(f"/memory/{mid}", json={})
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, PATCH, DELETE", r.headers
        r = await asyncio.wait_for(http.head("/stream"), 10)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), r.headers


async def test_a_store_that_supersedes_names_supersedes_memory_id_in_its_errors(service) -> None:
    """A store naming a missing or already replaced memory in ``supersedes_memory_id``
    answered "memory X not found" (no field) or "id: memory X is already SUPERSEDED" (the
    service's field, not the caller's), over REST and MCP."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with service.http() as http:
        old = await _store(http, "The release train leaves on Mondays.")
        r = await http.post("/memory", json={"content": "It leaves on Tuesdays.", "supersedes_memory_id": old})
        assert r.status_code == 201, r.text
        for target in (old, "00000000-0000-4000-8000-000000000000"):
            r = await http.post("/memory", json={"content": "It leaves on Fridays.", "supersedes_memory_id": target})
            assert r.status_code in (404, 409) and r.json()["error"].startswith("supersedes_memory_id: "), r.text
        # The path's form keeps the service's name: the id is the path's.
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "It leaves on Fridays."})
        assert r.status_code == 409 and r.json()["error"].startswith("id: "), r.text
    headers = {"X-Automem-Scope": service.scope}
    async with Client(streamable_http_client(service.url + "/mcp",
                                             http_client=create_mcp_http_client(headers=headers))) as mcp:
        result = await mcp.call_tool("store_memory", {"content": "It leaves on Fridays.", "supersedes_memory_id": old})
        assert result.is_error and "supersedes_memory_id: " in result.content[0].text, result.content[0].text


#: Ids no memory can have (automem/common/model.py ``check_id``): longer than 128
#: characters, or holding a control character (a NUL, a newline, DEL).
MALFORMED_IDS = {"over-long": "a" * 300, "NUL": "a\x00b", "newline": "a\nb", "DEL": "a\x7fb"}


async def _refused_naming(cases: list[tuple[str, Any, Any]]) -> None:
    """Each ``(field, call, request)`` of ``cases`` is INVALID_ARGUMENT naming ``field``
    first, without echoing a long id."""
    for field, call, request in cases:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(request)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (type(request).__name__, err.value.details())
        assert err.value.details().startswith(f"{field}: "), (type(request).__name__, err.value.details())
        assert "a" * 200 not in err.value.details()  # the id is not echoed


@pytest.mark.parametrize("kind", sorted(MALFORMED_IDS))
async def test_a_malformed_memory_id_is_invalid_argument_naming_the_field_on_every_surface(service, kind: str) -> None:
    """An over-long memory id (or one holding a control character) was NOT_FOUND over gRPC
    on every call that names a memory (its whole text echoed back), and REST answered 404
    too, except for a NUL, refused over REST as 400 while gRPC named the graph's parameter
    (``ids``, ``mid``). Each is INVALID_ARGUMENT naming the proto field (``id``; the two ends
    of CreateRelation ``relation.source_id`` / ``relation.target_id``) over gRPC and 400 naming the path
    parameter (``memory_id``) or body field over REST, and nothing changes. An unknown id of
    a memory id's shape is still NOT_FOUND / 404."""
    from urllib.parse import quote

    from automem.v1 import ingest_service_pb2, memory_pb2, recall_service_pb2, review_service_pb2

    bad = MALFORMED_IDS[kind]
    async with service.client() as client:
        memory = await client.create_memory("a memory beside malformed ids", tags=["malformed-id"], importance=0.7)
        rec, ing, rev = client.recall, client.ingest, client.review
        cases = [
            ("id", rec.GetMemory, recall_service_pb2.GetMemoryRequest(id=bad)),
            ("id", rec.ListRelatedMemories, recall_service_pb2.ListRelatedMemoriesRequest(id=bad)),
            ("id", rec.ListGraphNeighbors, recall_service_pb2.ListGraphNeighborsRequest(id=bad)),
            ("id", rec.ListMemoryVersions, recall_service_pb2.ListMemoryVersionsRequest(id=bad)),
            ("id", rec.DiffMemoryVersions,
             recall_service_pb2.DiffMemoryVersionsRequest(id=bad, from_version=1, to_version=2)),
            ("id", ing.UpdateMemory, ingest_service_pb2.UpdateMemoryRequest(
                id=bad, memory=ingest_service_pb2.MemoryInput(importance=0.5),
                update_mask={"paths": ["importance"]})),
            ("id", ing.DeleteMemory, ingest_service_pb2.DeleteMemoryRequest(id=bad)),
            ("id", ing.SupersedeMemory, ingest_service_pb2.SupersedeMemoryRequest(
                id=bad, replacement=ingest_service_pb2.MemoryInput(content="replacement"))),
            ("relation.target_id", ing.CreateRelation, ingest_service_pb2.CreateRelationRequest(
                relation=memory_pb2.Relation(source_id=memory.id, target_id=bad))),
            ("relation.source_id", ing.CreateRelation, ingest_service_pb2.CreateRelationRequest(
                relation=memory_pb2.Relation(source_id=bad, target_id=memory.id))),
            ("id", rev.ListMemoryEvents, review_service_pb2.ListMemoryEventsRequest(id=bad)),
            ("id", rev.PurgeMemory, review_service_pb2.PurgeMemoryRequest(id=bad)),
        ]
        await _refused_naming(cases)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await rec.GetMemory(recall_service_pb2.GetMemoryRequest(id="00000000-0000-4000-8000-000000000000"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    segment = quote(bad, safe="")
    async with service.http() as http:
        requests = [("GET", f"/memory/{segment}", None), ("PATCH", f"/memory/{segment}", {"importance": 0.5}),
                    ("DELETE", f"/memory/{segment}", None), ("GET", f"/v1/memories/{segment}/history", None),
                    ("GET", f"/v1/memories/{segment}/versions", None),
                    ("GET", f"/v1/memories/{segment}/versions:diff?from=1&to=2", None),
                    ("GET", f"/memories/{segment}/related", None), ("GET", f"/graph/neighbors/{segment}", None),
                    ("POST", f"/v1/memories/{segment}:supersede", {"content": "replacement"}),
                    ("POST", f"/v1/memories/{segment}:purge", {})]
        for method, path, body in requests:
            r = await http.request(method, path, json=body)
            assert r.status_code == 400 and r.json()["error"].startswith("memory_id: "), (method, path, r.text)
        r = await http.post("/associate", json={"memory1_id": memory.id, "memory2_id": bad})
        assert r.status_code == 400 and r.json()["error"].startswith("memory2_id: "), r.text
        assert (await http.get("/memory/00000000-0000-4000-8000-000000000000")).status_code == 404
        got = (await http.get(f"/memory/{memory.id}")).json()["memory"]
        assert got["importance"] == 0.7 and got["state"] == "ACTIVE", got
    assert await service.ctx.graph.memories.count(service.scope) == 1


@pytest.mark.parametrize("kind", sorted(MALFORMED_IDS))
async def test_a_malformed_id_in_an_id_list_is_invalid_argument_naming_its_index_on_every_surface(
        service, kind: str) -> None:
    """The id lists were not checked as single ids are (check_id): a search's
    ``priority_ids``, a by-tag delete's ``memory_ids`` and a reprocess's ``ids`` took an
    over-long id or one holding a control character, looked it up and matched nothing. Each
    is INVALID_ARGUMENT naming the list and the index (``priority_ids[2]``) over gRPC, 400
    the same over REST and a tool error the same over MCP, and nothing is deleted."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from automem.v1 import enrich_service_pb2, ingest_service_pb2, recall_service_pb2

    bad = MALFORMED_IDS[kind]
    async with service.client() as client:
        memory = await client.create_memory("a memory beside malformed id lists", tags=["malformed-ids"])
        ok = memory.id
        cases = [
            ("priority_ids[2]", client.recall.SearchMemories,
             recall_service_pb2.SearchMemoriesRequest(query="malformed", priority_ids=[ok, "", bad])),
            ("memory_ids[1]", client.ingest.DeleteMemoriesByTag,
             ingest_service_pb2.DeleteMemoriesByTagRequest(tags=["malformed-ids"], memory_ids=[ok, bad])),
            ("ids[1]", client.enrich.ReprocessMemories, enrich_service_pb2.ReprocessMemoriesRequest(ids=[ok, bad])),
        ]
        await _refused_naming(cases)
    async with service.http() as http:
        r = await http.get("/recall", params={"query": "malformed", "priority_ids": [ok, bad]})
        assert r.status_code == 400 and r.json()["error"].startswith("priority_ids[1]: "), r.text
        r = await http.post("/enrichment/reprocess", json={"ids": [ok, bad]})
        assert r.status_code == 400 and r.json()["error"].startswith("ids[1]: "), r.text
        got = (await http.get(f"/memory/{ok}")).json()["memory"]
        assert got["state"] == "ACTIVE", got
    headers = {"X-Automem-Scope": service.scope}
    async with Client(streamable_http_client(service.url + "/mcp",
                                             http_client=create_mcp_http_client(headers=headers))) as mcp:
        result = await mcp.call_tool("recall_memory", {"query": "malformed", "priority_ids": [ok, bad]})
        assert result.is_error and ": priority_ids[1]: " in result.content[0].text, result.content[0].text
