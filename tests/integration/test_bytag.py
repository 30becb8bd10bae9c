"""By-tag listing: keyset pages through the state pass (automem/recall/bytag.py), on the real
service (NATS, FalkorDB with its tag indexes, qdrant-edge, the models)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from automem_client import AsyncClient

from automem.graph.memories import ENTITY_TAG_PREFIX
from automem.recall import bytag
from tests.conftest import eventually, start_service


async def _store(http, content: str, **fields) -> dict:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory"]


async def _page(http, **params) -> dict:
    r = await http.get("/memory/by-tag", params=params)
    assert r.status_code == 200, r.text
    return r.json()


async def _all_pages(http, **params) -> tuple[list[dict], list[dict]]:
    """Every memory of the listing by following next_page_token; also the pages."""
    pages = [await _page(http, **params)]
    while pages[-1]["next_page_token"]:
        assert pages[-1]["has_more"] is True
        pages.append(await _page(http, **params, page_token=pages[-1]["next_page_token"]))
        assert len(pages) < 500, "the token never ran out"
    assert pages[-1]["has_more"] is False
    return [m for p in pages for m in p["memories"]], pages


def _order(memories: list[dict]) -> list[str]:
    """Ids in the documented order: event time, then importance descending, then id."""
    def key(m: dict):
        return (-datetime.fromisoformat(m["timestamp"]).timestamp(), -m["importance"], m["id"])
    return [m["id"] for m in sorted(memories, key=key)]


async def _fill_tag(http, tag: str) -> tuple[list[dict], set[str]]:
    """Memories under ``tag`` with ties (one batch: one time), spread and future dates,
    supersessions (replacement with and without the tag) and deletions. Returns the current
    memories (as last read) and the ids that must never be listed."""
    r = await http.post("/memory/batch", json={"memories": [
        {"content": f"batch note {i} about the {tag} listing", "tags": [tag, "batch"],
         "importance": [0.3, 0.5, 0.5, 0.9][i % 4]} for i in range(12)]})
    assert r.status_code == 201, r.text
    batch_ids = r.json()["memory_ids"]
    dated = []
    for i, year in enumerate([2001, 2005, 2005, 2005, 2012, 2019, 2024, 2030, 2090, 1970]):
        dated.append(await _store(http, f"dated note {i} from {year} ({tag})", tags=[tag.upper()],
                                  timestamp=f"{year}-03-01T12:00:00Z", importance=0.1 * (i % 5)))
    singles = [await _store(http, f"single note {i} ({tag})", tags=[tag, "single"]) for i in range(5)]
    for i in range(3):
        await _store(http, f"other tag note {i}", tags=["other-" + tag])
    withheld: set[str] = set()
    replaced_keep = await _store(http, f"replacement keeping the tag ({tag})", tags=[tag],
                                 supersedes_memory_id=batch_ids[0])
    replaced_keep2 = await _store(http, f"second replacement keeping the tag ({tag})", tags=[tag, "v2"],
                                  supersedes_memory_id=dated[2]["id"])
    await _store(http, f"replacement without the tag ({tag})", tags=["moved"], supersedes_memory_id=singles[0]["id"])
    # A replacement dated before the memory it replaces: listed at its own (older) place.
    older = await _store(http, f"replacement dated earlier ({tag})", tags=[tag], timestamp="2003-01-01T00:00:00Z",
                         supersedes_memory_id=dated[4]["id"])
    withheld |= {batch_ids[0], dated[2]["id"], singles[0]["id"], dated[4]["id"]}
    for mid in (batch_ids[5], dated[6]["id"]):
        assert (await http.delete(f"/memory/{mid}")).status_code == 200
        withheld.add(mid)
    expected_ids = (set(batch_ids) | {d["id"] for d in dated} | {s["id"] for s in singles}
                    | {replaced_keep["id"], replaced_keep2["id"], older["id"]}) - withheld
    current = []
    for mid in expected_ids:
        r = await http.get(f"/memory/{mid}")
        assert r.status_code == 200, r.text
        current.append(r.json()["memory"])
    return current, withheld


@pytest.mark.parametrize("caps", [(bytag.PROBE_CAP, bytag.TIES_CAP), (3, 4)])
async def test_by_tag_pages_list_every_current_memory_exactly_once(service, monkeypatch, caps) -> None:
    """Caps 3/4 make windows overflow: narrowing, the bisection towards the data, the
    one-millisecond ORDER BY fallback and the paged ties (12 memories of one batch share a
    time) all run."""
    monkeypatch.setattr(bytag, "PROBE_CAP", caps[0])
    monkeypatch.setattr(bytag, "TIES_CAP", caps[1])
    async with service.http() as http:
        current, withheld = await _fill_tag(http, "paged")
        expected = _order(current)
        listed, pages = await _all_pages(http, tags="paged", limit=4)
        ids = [m["id"] for m in listed]
        assert len(ids) == len(set(ids)), "a memory was listed twice"
        assert ids == expected
        assert not set(ids) & withheld
        assert all(p["total"] is None for p in pages[:-1]) and len(pages) == -(-len(expected) // 4)
        # Offset paging gives the same sequence.
        by_offset = []
        for offset in range(0, len(expected) + 4, 4):
            by_offset += [m["id"] for m in (await _page(http, tags="paged", limit=4, offset=offset))["memories"]]
        assert by_offset == expected
        whole = await _page(http, tags="paged", limit=200)
        assert [m["id"] for m in whole["memories"]] == expected
        assert whole["total"] == len(expected) and whole["has_more"] is False and whole["next_page_token"] is None
        first = await _page(http, tags="paged", limit=5, include_total="true")
        assert first["total"] == len(expected) and first["has_more"] is True


async def test_by_tag_history_mode_pages_superseded_memories_too(service) -> None:
    async with service.http() as http:
        current, withheld = await _fill_tag(http, "hist")
        listed, _ = await _all_pages(http, tags="hist", limit=6, state_mode="history")
        ids = [m["id"] for m in listed]
        assert len(ids) == len(set(ids))
        # Superseded memories are listed in history mode; deleted ones never are.
        assert {m["id"] for m in current} < set(ids)
        superseded = {m["id"] for m in listed if m["state"] == "SUPERSEDED"}
        assert len(superseded) == 4 and superseded < withheld  # all four replaced ones carried the tag
        assert not any(m["state"] == "DELETED" for m in listed)
        assert ids == _order(listed)


async def test_by_tag_pages_read_the_first_pages_snapshot(service) -> None:
    async with service.http() as http:
        memories = [await _store(http, f"snapshot note {i}", tags=["snap"], timestamp=f"20{10 + i}-01-01T00:00:00Z")
                    for i in range(6)]
        first = await _page(http, tags="snap", limit=3)
        assert [m["id"] for m in first["memories"]] == [m["id"] for m in memories[::-1][:3]]
        # Between pages, an older memory is superseded by a new one under the same tag.
        new = await _store(http, "snapshot note 1, corrected", tags=["snap"], supersedes_memory_id=memories[1]["id"])
        second = await _page(http, tags="snap", limit=3, page_token=first["next_page_token"])
        assert [m["id"] for m in second["memories"]] == [m["id"] for m in memories[::-1][3:]]
        assert second["memories"][1]["state"] == "ACTIVE"  # as it was known at the first page
        fresh, _ = await _all_pages(http, tags="snap", limit=3)
        assert [m["id"] for m in fresh] == [new["id"]] + [m["id"] for m in memories[::-1] if m is not memories[1]]


async def test_by_tag_page_token_is_checked(service) -> None:
    async with service.http() as http:
        for i in range(3):
            await _store(http, f"token note {i}", tags=["tok", "tok2"])
        token = (await _page(http, tags="tok", limit=1))["next_page_token"]
        assert token
        for params in ({"tags": "tok2", "page_token": token},  # another listing
                       {"tags": "tok", "page_token": token, "state_mode": "history"},
                       {"tags": "tok", "page_token": "not-a-token"},
                       {"tags": "tok", "page_token": token[:-4]},
                       {"tags": "tok", "page_token": token, "offset": 1},
                       {"tags": "tok", "page_token": token, "as_of": "2001-01-01T00:00:00Z"}):
            r = await http.get("/memory/by-tag", params={"limit": 1, **params})
            assert r.status_code == 400, (params, r.text)
            assert "page_token" in r.text or "offset" in r.text


async def test_by_tag_page_stops_at_the_scan_bound_and_the_token_continues(settings) -> None:
    """Ten deleted memories are the newest under the tag: with by_tag_scan_max 4 the first
    pages read only withheld rows, come back empty with has_more, and the tokens still reach
    every current memory."""
    running = await start_service(settings.model_copy(update={"by_tag_scan_max": 4}))
    try:
        async with running.http() as http:
            keep = [await _store(http, f"kept {i}", tags=["crowd"], timestamp=f"2000-01-0{i + 1}T00:00:00Z")
                    for i in range(3)]
            for i in range(10):
                gone = await _store(http, f"withheld {i}", tags=["crowd"], timestamp=f"2020-01-{i + 10}T00:00:00Z")
                assert (await http.delete(f"/memory/{gone['id']}")).status_code == 200
            first = await _page(http, tags="crowd", limit=2)
            assert first["memories"] == [] and first["has_more"] is True and first["next_page_token"]
            listed, pages = await _all_pages(http, tags="crowd", limit=2)
            assert [m["id"] for m in listed] == [m["id"] for m in keep[::-1]]
            assert len(pages) >= 4
    finally:
        await running.runner.stop()


async def test_by_tag_prefix_all_mode_and_entity_tags(service) -> None:
    """Exact entity tags use the entity_tags index, prefixes and mixed all-mode are checked
    on the rows the windows read; all against what enrichment (spaCy) wrote."""
    async with service.http() as http:
        met = await _store(http, "Alice Johnson met the team in Berlin to plan the trip.", tags=["trip-2024", "Team"])
        other = await _store(http, "The budget for the trip was approved.", tags=["trip-2025"])
        await _store(http, "Unrelated grocery list", tags=["home"])

        async def entity_tags():
            r = await http.get(f"/memory/{met['id']}")
            return [e["tag"] for e in r.json()["memory"]["entities"] if e["kind"] == "person"]
        person = (await eventually(entity_tags, timeout=60))[0]
        assert person.startswith(ENTITY_TAG_PREFIX)

        async def ids(**params) -> set[str]:
            listed, _ = await _all_pages(http, limit=1, **params)
            return {m["id"] for m in listed}
        assert await ids(tags=person) == {met["id"]}
        assert await ids(tags=person.upper()) == {met["id"]}
        assert await ids(tags="trip-", tag_match="prefix") == {met["id"], other["id"]}
        assert await ids(tags="entity:person:", tag_match="prefix") >= {met["id"]}
        assert other["id"] not in await ids(tags="entity:person:", tag_match="prefix")
        assert await ids(tags=["trip-2024", person], tag_mode="all") == {met["id"]}
        assert await ids(tags=["trip-2025", person], tag_mode="all") == set()
        assert await ids(tags=["team", "trip-2024"], tag_mode="all") == {met["id"]}
        assert await ids(tags=["team", "home"], tag_mode="any") == {met["id"]} | await ids(tags="home")


async def test_a_tag_with_one_current_fact_always_lists_it_while_it_is_superseded(service) -> None:
    """A listing read while the fact under a tag was being superseded answered ``count: 0``
    (1–2 reads in 40 supersedes, every run; break-it review): the walk had begun before the
    replacement existed, and the old memory it then met resolved to that replacement. Every
    read lists exactly one current fact now."""
    import asyncio

    tag = "racing-fact"
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Race probe: version 0", "tags": [tag]})
        head = r.json()["memory_id"]
        done = asyncio.Event()
        counts: list[int] = []

        async def read() -> None:
            while not done.is_set():
                r = await http.get("/memory/by-tag", params={"tags": tag})
                assert r.status_code == 200, r.text
                counts.append(len(r.json()["memories"]))

        readers = [asyncio.create_task(read()) for _ in range(4)]
        try:
            for i in range(1, 41):
                r = await http.post(f"/v1/memories/{head}:supersede",
                                    json={"content": f"Race probe: version {i}", "tags": [tag]})
                assert r.status_code == 201, r.text
                head = r.json()["memory_id"]
        finally:
            done.set()
            await asyncio.gather(*readers)
        assert counts and set(counts) == {1}, {n: counts.count(n) for n in set(counts)}


async def test_a_delete_by_tag_given_the_previews_ids_leaves_a_later_memory_alone(service) -> None:
    """IngestService.DeleteMemoriesByTag with ``memory_ids`` (a dry run's answer) deletes
    those of them still under the tags, not a memory stored under the tags since the
    preview; ``reason`` is recorded on each deletion (the MCP tool's confirmation)."""
    from automem.v1 import ingest_service_pb2, memory_pb2

    async with service.http() as http:
        ids = [(await http.post("/memory", json={"content": f"Kept by the preview {i}", "tags": ["previewed"]}))
               .json()["memory_id"] for i in range(2)]
        async with service.client() as client:
            preview = await client.ingest.DeleteMemoriesByTag(
                ingest_service_pb2.DeleteMemoriesByTagRequest(tags=["previewed"], dry_run=True),
                metadata=client.metadata())
            assert sorted(preview.memory_ids) == sorted(ids)
            late = (await http.post("/memory", json={"content": "Stored after the preview",
                                                     "tags": ["previewed"]})).json()["memory_id"]
            done = await client.ingest.DeleteMemoriesByTag(ingest_service_pb2.DeleteMemoriesByTagRequest(
                tags=["previewed"], memory_ids=list(preview.memory_ids), reason="as previewed"),
                metadata=client.metadata())
        assert sorted(done.memory_ids) == sorted(ids)
        left = (await http.get("/memory/by-tag", params={"tags": "previewed"})).json()["memories"]
        assert [m["id"] for m in left] == [late]
    for mid in ids:
        memory = await service.ctx.graph.memories.get(mid, service.scope)
        assert memory.state == memory_pb2.MEMORY_STATE_DELETED and memory.state_reason == "as previewed"


async def _change_between_pages(http, rows: list[dict], tag: str) -> None:
    """Edits after a first page: row 2 moved to now, row 5 to 2020, row 3's content changed
    and the tag taken off it, row 1 deleted, a new memory stored under the tag."""
    now = datetime.now(UTC).isoformat()
    for mid, body in ((rows[1]["id"], {"timestamp": now}), (rows[4]["id"], {"timestamp": "2020-01-01T00:00:00Z"}),
                      (rows[2]["id"], {"content": f"row 3 rewritten ({tag})", "tags": ["edited"]})):
        r = await http.patch(f"/memory/{mid}", json=body)
        assert r.status_code == 200, r.text
    assert (await http.delete(f"/memory/{rows[0]['id']}")).status_code == 200
    await _store(http, f"row 7 ({tag})", tags=[tag])


async def test_by_tag_later_pages_read_the_first_pages_snapshot_after_edits_and_deletes(service) -> None:
    """A first page at the current time pins its snapshot too (break-it: later pages read the
    live graph, so a memory moved between pages was listed twice or never, and a delete or
    an edit after page 1 showed on page 2)."""
    async with service.http() as http:
        rows = [await _store(http, f"row {i} (pg)", tags=["pg"]) for i in range(1, 7)]
        first = await _page(http, tags="pg", limit=3)
        assert [m["content"] for m in first["memories"]] == ["row 6 (pg)", "row 5 (pg)", "row 4 (pg)"]
        await _change_between_pages(http, rows, "pg")
        second = await _page(http, tags="pg", limit=3, page_token=first["next_page_token"])
        assert [m["content"] for m in second["memories"]] == ["row 3 (pg)", "row 2 (pg)", "row 1 (pg)"]
        assert [m["timestamp"] for m in second["memories"]] == [r["timestamp"] for r in rows[2::-1]]
        assert second["next_page_token"] is None and second["has_more"] is False
        # A fresh listing reads the graph as it is now.
        fresh, _ = await _all_pages(http, tags="pg", limit=3)
        assert [m["content"] for m in fresh] == ["row 7 (pg)", "row 2 (pg)", "row 6 (pg)", "row 4 (pg)",
                                                 "row 5 (pg)"]


async def test_the_sdks_iter_by_tag_reads_one_snapshot(service) -> None:
    """``iter_by_tag`` follows the listing's tokens: a change made while it is iterated (after
    its first page) does not move, repeat or drop memories."""
    async with service.http() as http:
        sdk_rows = [await _store(http, f"row {i} (sdk)", tags=["sdk-pg"]) for i in range(1, 7)]
    async with AsyncClient.grpc(service.grpc, scope=service.scope) as client:
        walked = []
        async for memory in client.iter_by_tag(["sdk-pg"], page_size=3):
            walked.append(memory.content)
            if len(walked) == 3:  # the first page is read: change the listing before the second
                async with service.http() as http:
                    await _change_between_pages(http, sdk_rows, "sdk-pg")
    assert walked == [f"row {i} (sdk)" for i in range(6, 0, -1)]


async def test_entity_tag_later_pages_list_every_memory_once_with_its_entities(service) -> None:
    """Later pages of an ``entity:`` tag listing match on the entity tags enrichment wrote
    and return the memories with their entities, also for a memory edited between pages
    (break-it: the pages read the version snapshots, which hold no enrichment, so every page
    after the first came back empty and plain-tag pages showed ``entities: []``)."""
    async with service.http() as http:
        rows = [await _store(http, f"Zebedee Quixley met the team in Oslo on day {i}.", tags=["zq-trip"],
                             timestamp=f"2026-01-{i:02d}T12:00:00Z") for i in range(1, 9)]

        async def people() -> list[str] | None:
            found = []
            for row in rows:
                memory = (await http.get(f"/memory/{row['id']}")).json()["memory"]
                tags = [e["tag"] for e in memory["entities"] if e["kind"] == "person"]
                if not tags:
                    return None
                found.append(tags[0])
            return found
        (person,) = set(await eventually(people, timeout=90))
        assert person == "entity:person:zebedee-quixley"
        newest_first = [r["id"] for r in reversed(rows)]

        def check(listed: list[dict]) -> None:
            assert [m["id"] for m in listed] == newest_first
            for m in listed:
                assert person in [e["tag"] for e in m["entities"]], m
        for tags in (person, "zq-trip"):
            listed, pages = await _all_pages(http, tags=tags, limit=3)
            assert [len(p["memories"]) for p in pages] == [3, 3, 2]
            check(listed)

        # Edited between pages: day 5 (second page) moved to now, day 2 (third page) rewritten.
        for tags in (person, "zq-trip"):
            first = await _page(http, tags=tags, limit=3)
            r = await http.patch(f"/memory/{rows[4]['id']}", json={"timestamp": datetime.now(UTC).isoformat()})
            assert r.status_code == 200, r.text
            r = await http.patch(f"/memory/{rows[1]['id']}",
                                 json={"content": f"Zebedee Quixley met the team in Bergen ({tags})."})
            assert r.status_code == 200, r.text
            second = await _page(http, tags=tags, limit=3, page_token=first["next_page_token"])
            third = await _page(http, tags=tags, limit=3, page_token=second["next_page_token"])
            assert third["has_more"] is False
            check(first["memories"] + second["memories"] + third["memories"])
            assert third["memories"][0]["content"] == "Zebedee Quixley met the team in Oslo on day 2."
            for i, row in ((4, rows[4]), (1, rows[1])):  # back as they were for the next round
                r = await http.patch(f"/memory/{row['id']}", json={
                    "timestamp": row["timestamp"], "content": f"Zebedee Quixley met the team in Oslo on day {i + 1}."})
                assert r.status_code == 200, r.text
            await eventually(people, timeout=90)


async def test_later_pages_past_the_scan_bound_of_writes_keep_entities(settings) -> None:
    """More memories written since the first page than ``by_tag_scan_max`` (5 here): a
    later page of a plain tag reads the scope's versions, with the entities from the live
    nodes, and one of an ``entity:`` tag reads the live graph (the versions hold no entity
    tags: break-it, those pages came back empty or with ``entities: []``)."""
    running = await start_service(settings.model_copy(update={"by_tag_scan_max": 5}))
    try:
        async with running.http() as http:
            rows = [await _store(http, f"Zebedee Quixley met the team in Oslo on day {i}.", tags=["zq-bound"],
                                 timestamp=f"2026-02-{i:02d}T12:00:00Z") for i in range(1, 7)]
            person = "entity:person:zebedee-quixley"

            async def enriched() -> bool:
                for row in rows:
                    memory = (await http.get(f"/memory/{row['id']}")).json()["memory"]
                    if person not in [e["tag"] for e in memory["entities"]]:
                        return False
                return True
            await eventually(enriched, timeout=90)
            for tags in (person, "zq-bound"):
                first = await _page(http, tags=tags, limit=2)
                for i in range(7):
                    await _store(http, f"unrelated note {i} ({tags})", tags=["elsewhere"])
                listed = list(first["memories"])
                token = first["next_page_token"]
                while token:
                    page = await _page(http, tags=tags, limit=2, page_token=token)
                    listed += page["memories"]
                    token = page["next_page_token"]
                assert [m["id"] for m in listed] == [r["id"] for r in reversed(rows)], tags
                for m in listed:
                    assert person in [e["tag"] for e in m["entities"]], (tags, m)
    finally:
        await running.runner.stop()
