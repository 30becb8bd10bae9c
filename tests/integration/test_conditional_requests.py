"""Conditional requests by the book (issue 14, items 3 and 4), on the real running service:
``If-Match`` with a stale ETag answers 412 Precondition Failed and changes nothing on PATCH,
DELETE and supersede (RFC 9110 section 13.1.1); ``If-None-Match: *`` on a create with an
``Idempotency-Key`` answers 412 when the key was used (section 13.1.2); gRPC answers a stale
``etag`` with ABORTED everywhere (AIP-154); two concurrent supersedes with one
``Idempotency-Key`` create one replacement and both answer it."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from automem.v1 import ingest_service_pb2


async def _store(http, content: str, **fields) -> dict:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()


async def _etag(http, memory_id: str) -> str:
    r = await http.get(f"/memory/{memory_id}")
    assert r.status_code == 200
    return r.headers["ETag"]


async def test_stale_if_match_is_412_on_patch_delete_and_supersede_and_changes_nothing(service) -> None:
    async with service.http() as http:
        mid = (await _store(http, "The deploy window is Tuesday"))["memory_id"]
        stale = await _etag(http, mid)
        assert (await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": stale})
                ).status_code == 200
        fresh = await _etag(http, mid)
        assert fresh != stale

        r = await http.patch(f"/memory/{mid}", json={"importance": 0.1}, headers={"If-Match": stale})
        assert r.status_code == 412 and "etag" in r.json()["error"]
        r = await http.delete(f"/memory/{mid}", headers={"If-Match": stale})
        assert r.status_code == 412 and "etag" in r.json()["error"]
        r = await http.post(f"/v1/memories/{mid}:supersede", json={"content": "The deploy window is Thursday"},
                            headers={"If-Match": stale})
        assert r.status_code == 412 and "etag" in r.json()["error"]
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert memory["importance"] == 0.9 and memory["state"] == "ACTIVE"
        assert await _etag(http, mid) == fresh
        listed = (await http.get("/recall", params={"query": "deploy window", "limit": 10})).json()["results"]
        assert [hit["id"] for hit in listed] == [mid]  # no replacement was created

        # With the current ETag each goes through.
        r = await http.post(f"/v1/memories/{mid}:supersede", json={"content": "The deploy window is Thursday"},
                            headers={"If-Match": fresh})
        assert r.status_code == 201, r.text
        new_id = r.json()["memory_id"]
        r = await http.delete(f"/memory/{new_id}", headers={"If-Match": await _etag(http, new_id)})
        assert r.status_code == 200


async def test_post_memory_superseding_honours_if_match_and_refuses_headers_it_would_ignore(service) -> None:
    """``POST /memory`` with ``supersedes_memory_id`` dropped ``If-Match``: a stale ETag
    superseded the memory anyway (201) where the same tag is a 412 on PATCH, DELETE and
    ``:supersede`` (break-it review). It is now a 412 changing nothing; the current ETag goes
    through; ``If-Match`` on a plain store and ``If-None-Match`` on a supersede are refused
    (400) instead of ignored."""
    async with service.http() as http:
        mid = (await _store(http, "The office closes at six"))["memory_id"]
        stale = await _etag(http, mid)
        assert (await http.patch(f"/memory/{mid}", json={"importance": 0.9})).status_code == 200
        r = await http.post("/memory", json={"content": "The office closes at seven", "supersedes_memory_id": mid},
                            headers={"If-Match": stale})
        assert r.status_code == 412 and "etag" in r.json()["error"], r.text
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert memory["state"] == "ACTIVE" and memory["content"] == "The office closes at six"
        r = await http.post("/memory", json={"content": "The office closes at seven", "supersedes_memory_id": mid},
                            headers={"If-None-Match": "*", "Idempotency-Key": "office-hours-1"})
        assert r.status_code == 400 and r.json()["error"].startswith("If-None-Match: "), r.text
        r = await http.post("/memory", json={"content": "The office opens at eight"}, headers={"If-Match": stale})
        assert r.status_code == 400 and r.json()["error"].startswith("If-Match: "), r.text
        r = await http.post("/memory", json={"content": "The office closes at seven", "supersedes_memory_id": mid},
                            headers={"If-Match": await _etag(http, mid)})
        assert r.status_code == 201, r.text
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["state"] == "SUPERSEDED"


async def test_if_match_naming_no_version_is_412_and_changes_nothing(service) -> None:
    # Versions start at 1, so ``"0"`` (or an empty tag) can never match; the gRPC ``etag``
    # field reads 0 as "no check", so the gateway must not pass such a tag on as 0.
    async with service.http() as http:
        mid = (await _store(http, "The standup is at nine"))["memory_id"]
        current = await _etag(http, mid)
        for tag in ('"0"', '""'):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": tag})
            assert r.status_code == 412 and "etag" in r.json()["error"], (tag, r.text)
            r = await http.post(f"/v1/memories/{mid}:supersede", json={"content": "The standup is at ten"},
                                headers={"If-Match": tag})
            assert r.status_code == 412 and "etag" in r.json()["error"], (tag, r.text)
            r = await http.delete(f"/memory/{mid}", headers={"If-Match": tag})
            assert r.status_code == 412 and "etag" in r.json()["error"], (tag, r.text)
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert memory["state"] == "ACTIVE" and memory["importance"] == 0.5
        assert await _etag(http, mid) == current
        listed = (await http.get("/recall", params={"query": "standup", "limit": 10})).json()["results"]
        assert [hit["id"] for hit in listed] == [mid]  # no replacement was created
        # ``*`` still means "any version" (RFC 9110 section 13.1.1).
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.7}, headers={"If-Match": "*"})
        assert r.status_code == 200, r.text


async def test_body_etag_naming_no_version_is_409_and_changes_nothing(service) -> None:
    """A PATCH body's ``etag`` of 0 went through as "no check" (200, version bumped; break-it
    review) while ``If-Match: "0"`` is a 412: versions start at 1, so it is now a 409 naming
    ``etag`` (a stale body etag's status); an empty string is a 400 naming it; null and
    ``*`` still mean no check."""
    async with service.http() as http:
        mid = (await _store(http, "The retro is on Fridays"))["memory_id"]
        current = await _etag(http, mid)
        for etag in (0, "0", '"0"'):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.9, "etag": etag})
            assert r.status_code == 409 and r.json()["error"].startswith("etag: "), (etag, r.text)
            assert r.json()["grpc_code"] == "ABORTED"
        # A weak tag never passes a version check (RFC 9110), as If-Match and MCP's
        # update_memory answer; the body's etag read W/"1" as version 1 and wrote.
        for etag in ('W/"0"', f"W/{current}", f"w/{current.strip(chr(34))}"):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.9, "etag": etag})
            assert r.status_code == 400 and r.json()["error"].startswith("etag: "), (etag, r.text)
            assert "weak" in r.json()["error"], r.text
        for etag in ("", "  ", "\u0661", "+1", 2**64, str(2**63), True):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.9, "etag": etag})
            assert r.status_code == 400 and r.json()["error"].startswith("etag: "), (etag, r.text)
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert memory["importance"] == 0.5 and await _etag(http, mid) == current
        for etag in (None, "*"):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.6, "etag": etag})
            assert r.status_code == 200, (etag, r.text)
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.7, "etag": r.json()["etag"]})
        assert r.status_code == 200 and r.json()["memory"]["importance"] == 0.7, r.text


async def test_if_none_match_star_refuses_a_used_idempotency_key(service) -> None:
    async with service.http() as http:
        first = await http.post("/memory", json={"content": "Only once"},
                                headers={"Idempotency-Key": "once-1", "If-None-Match": "*"})
        assert first.status_code == 201
        again = await http.post("/memory", json={"content": "Only once"},
                                headers={"Idempotency-Key": "once-1", "If-None-Match": "*"})
        assert again.status_code == 412 and "idempotency_key" in again.json()["error"]
        # Without the header the same retry is answered with the first memory, as before.
        replay = await http.post("/memory", json={"content": "Only once"}, headers={"Idempotency-Key": "once-1"})
        assert replay.status_code == 201 and replay.json()["memory_id"] == first.json()["memory_id"]
        assert (await http.post("/memory", json={"content": "x"}, headers={"If-None-Match": "*"})).status_code == 400
        assert (await http.post("/memory", json={"content": "x"},
                                headers={"Idempotency-Key": "k2", "If-None-Match": '"3"'})).status_code == 400


async def test_grpc_stale_etag_is_aborted_on_update_delete_and_supersede(service) -> None:
    async with service.client() as client:
        created = (await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
            memory=ingest_service_pb2.MemoryInput(content="gRPC etag target")))).memory
        await client.update_memory(created.id, etag=created.version, importance=0.8)
        calls = [
            client.ingest.DeleteMemory(ingest_service_pb2.DeleteMemoryRequest(id=created.id, etag=created.version)),
            client.ingest.SupersedeMemory(ingest_service_pb2.SupersedeMemoryRequest(
                id=created.id, etag=created.version,
                replacement=ingest_service_pb2.MemoryInput(content="gRPC etag replacement"))),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == grpc.StatusCode.ABORTED and "etag" in err.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="keyed"), idempotency_key="g1"))
            await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="keyed"), idempotency_key="g1",
                require_unused_key=True))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "idempotency_key" in err.value.details()


@pytest.mark.parametrize("attempt", range(3))
async def test_concurrent_supersedes_with_one_key_create_one_replacement(service, attempt: int) -> None:
    async with service.http() as http:
        mid = (await _store(http, f"Standup is at 9:30 ({attempt})"))["memory_id"]
        answers = await asyncio.gather(*[
            http.post(f"/v1/memories/{mid}:supersede", json={"content": f"Standup is at 10:00 ({attempt})"},
                      headers={"Idempotency-Key": f"move-standup-{attempt}"}) for _ in range(4)])
        assert all(r.status_code == 201 for r in answers), [r.text for r in answers]
        ids = {r.json()["memory_id"] for r in answers}
        assert len(ids) == 1
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["superseded_by"] == next(iter(ids))
        assert await service.ctx.graph.memories.count(service.scope) == 2  # the old one and ONE replacement


async def test_if_match_list_holds_when_any_tag_is_current(service) -> None:
    # RFC 9110 section 13.1.1: If-Match is a list; the condition holds when any listed strong
    # tag matches. A list naming only stale or weak tags is 412 and changes nothing.
    async with service.http() as http:
        mid = (await _store(http, "The retro is on Friday"))["memory_id"]
        first = await _etag(http, mid)  # "1"
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.6}, headers={"If-Match": first})
        assert r.status_code == 200, r.text
        current = await _etag(http, mid)  # "2"
        for listed in (f'{first}, W/{current}', f'"7", {first}', f'W/{current}, "0"'):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": listed})
            assert r.status_code == 412 and "etag" in r.json()["error"], (listed, r.text)
            r = await http.delete(f"/memory/{mid}", headers={"If-Match": listed})
            assert r.status_code == 412, (listed, r.text)
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["importance"] == 0.6
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": "3"})
        assert r.status_code in (400, 412)
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.8}, headers={"If-Match": f'{first}, 3'})
        assert r.status_code == 400 and "etag" in r.json()["error"], r.text
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.8}, headers={"If-Match": f'{first}, {current}'})
        assert r.status_code == 200, r.text
        newest = await _etag(http, mid)
        r = await http.post(f"/v1/memories/{mid}:supersede", json={"content": "The retro is on Thursday"},
                            headers={"If-Match": f'"99", {newest}'})
        assert r.status_code == 201, r.text
        r = await http.delete(f"/memory/{r.json()['memory_id']}", headers={"If-Match": '"5", *'})
        assert r.status_code == 200, r.text
        r = await http.delete("/memory/no-such-memory", headers={"If-Match": '"1", "2"'})
        assert r.status_code == 404, r.text


async def test_if_match_empty_or_naming_no_version_is_refused_not_ignored(service) -> None:
    """An empty ``If-Match:`` went through as no header at all (break-it review): now a 400
    naming ``etag``. A quoted tag that is no version (``"abc"``) is a valid entity tag that
    never matches: 412 as RFC 9110 section 13.1.1 asks (it was a 400), alone or in a list;
    a weak tag's 412 shows the strong tag to send."""
    async with service.http() as http:
        mid = (await _store(http, "The freeze starts on the 20th"))["memory_id"]
        current = await _etag(http, mid)
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": ""})
        assert r.status_code == 400 and r.json()["error"].startswith("etag: "), r.text
        r = await http.delete(f"/memory/{mid}", headers={"If-Match": ""})
        assert r.status_code == 400 and r.json()["error"].startswith("etag: "), r.text
        for header in ('"abc"', '"1.5"', '"abc", "def"'):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": header})
            assert r.status_code == 412 and r.json()["error"].startswith("etag: "), (header, r.text)
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": f"W/{current}"})
        assert r.status_code == 412 and r.json()["error"].endswith(f"e.g. {current}"), r.text
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": "abc"})
        assert r.status_code == 400 and r.json()["error"].startswith("etag: "), r.text
        r = await http.post("/memory", json={"content": "The freeze ends on the 3rd"}, headers={"If-Match": ""})
        assert r.status_code == 400 and r.json()["error"].startswith("If-Match: "), r.text
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert memory["importance"] == 0.5 and memory["state"] == "ACTIVE" and await _etag(http, mid) == current
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": f'"abc", {current}'})
        assert r.status_code == 200, r.text


async def test_if_match_is_never_dropped_beside_a_body_etag_on_purge_or_on_extra_lines(service) -> None:
    """Break-it review of the If-Match changes: PATCH read only the body's etag when both were
    sent (a stale If-Match went through); ``:purge`` ignored If-Match and purged; a second
    ``If-Match`` line was dropped (RFC 9110 section 5.3 makes the lines one list); a quoted
    tag past int64 or with a leading zero was a 400 or matched, instead of a 412; a list
    naming a stale version made a retried supersede with its Idempotency-Key a 412 where one
    tag replays the first answer."""
    async with service.http() as http:
        mid = (await _store(http, "The on-call rota changes on Mondays"))["memory_id"]
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.6, "etag": 1}, headers={"If-Match": '"9"'})
        assert r.status_code == 400 and r.json()["error"].startswith("etag: "), r.text
        for tag in ('"01"', '"99999999999999999999"', '"1', '"' + "9" * 5000 + '"'):
            r = await http.patch(f"/memory/{mid}", json={"importance": 0.6}, headers={"If-Match": tag})
            assert r.status_code == (400 if tag == '"1' else 412), (tag, r.text)
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.6},
                             headers={"If-Match": '"1", "99999999999999999999"'})
        assert r.status_code == 200, r.text  # "1" is current; the other entry names nothing
        lines = [("If-Match", '"1"'), ("If-Match", '"2"')]  # now at version 2
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.7}, headers=lines)
        assert r.status_code == 200, r.text
        lines = [("If-Match", '"3"'), ("If-Match", '"1"')]
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.8}, headers=lines)
        assert r.status_code == 200, r.text  # the second line names the current version
        r = await http.patch(f"/memory/{mid}", json={"importance": 0.9}, headers={"If-Match": '"4",'})
        assert r.status_code == 200, r.text  # an empty list item is ignored
        assert (await _etag(http, mid)) == '"5"'

        args = {"json": {"content": "The on-call rota changes on Tuesdays"},
                "headers": {"If-Match": '"5", "77"', "Idempotency-Key": "rota-1"}}
        first = await http.post(f"/v1/memories/{mid}:supersede", **args)
        assert first.status_code == 201, first.text
        again = await http.post(f"/v1/memories/{mid}:supersede", **args)
        assert again.status_code == 201 and again.json()["memory_id"] == first.json()["memory_id"], again.text
        r = await http.post(f"/v1/memories/{mid}:supersede", json={"content": "Wednesdays"},
                            headers={"If-Match": '"5", "77"'})
        assert r.status_code == 412 and r.json()["error"].startswith("etag: "), r.text

        other = (await _store(http, "The pager number is 555-0100"))["memory_id"]
        for tag in ('"1"', '"2"', ""):
            r = await http.post(f"/v1/memories/{other}:purge", json={}, headers={"If-Match": tag})
            assert r.status_code == 400 and r.json()["error"].startswith("If-Match: "), (tag, r.text)
        assert (await http.get(f"/memory/{other}")).status_code == 200
