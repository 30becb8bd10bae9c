"""Bad input to the read side (RecallService, ConsolidateService) is refused as
INVALID_ARGUMENT naming the field, over gRPC and REST (break-it review C): out-of-range
Timestamps, a read time in the last second of 9999, GetConsolidationStatus paging, the size
of a search's text, the window echo's precision, NULs in request text and the related page size."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import timestamp_pb2

from automem.v1 import consolidate_service_pb2, recall_service_pb2

#: Timestamps no protobuf Timestamp may hold: seconds past the year 9999, negative nanos.
BAD_TIMES = {"seconds": timestamp_pb2.Timestamp(seconds=10**15),
             "nanos": timestamp_pb2.Timestamp(seconds=0, nanos=-1)}
#: The documented bounds of a search's text (automem/recall/servicer.py QUERY_MAX_LENGTH,
#: QUERIES_MAX): a query (and each of queries) of at most 4,000 characters, or the content
#: limit when larger; at most 32 queries.
QUERY_MAX_LENGTH = 4000
QUERIES_MAX = 32
#: The documented bound of each filter list of a search and of a by-tag listing or delete
#: (automem/common/model.py LIST_ITEMS_MAX).
LIST_ITEMS_MAX = 1000
#: 9999-12-31T23:59:59.999999999Z: the last instant a Timestamp holds.
LAST_INSTANT = timestamp_pb2.Timestamp(seconds=253_402_300_799, nanos=999_999_999)


async def _refused(call, request) -> str:
    """The details of ``call(request)``'s INVALID_ARGUMENT (fails on any other outcome)."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.value.code(), err.value.details())
    return err.value.details()


@pytest.mark.parametrize("bad", sorted(BAD_TIMES))
async def test_out_of_range_timestamps_are_invalid_argument_naming_the_field(service, bad: str) -> None:
    """SearchMemories answered UNKNOWN ("ValueError: Timestamp is not valid") for such an
    end_time; ReadOptions took the same value silently on every read."""
    value = BAD_TIMES[bad]

    def read(name: str) -> recall_service_pb2.ReadOptions:
        return recall_service_pb2.ReadOptions(**{name: value})

    async with service.client() as client:
        memory = await client.create_memory("a memory to read at a bad time", tags=["bad-time"])
        rec = client.recall
        cases = [
            ("start_time", rec.SearchMemories, recall_service_pb2.SearchMemoriesRequest(query="x", start_time=value)),
            ("end_time", rec.SearchMemories, recall_service_pb2.SearchMemoriesRequest(query="x", end_time=value)),
            ("as_of", rec.SearchMemories, recall_service_pb2.SearchMemoriesRequest(query="x", read=read("as_of"))),
            ("known_at", rec.SearchMemories,
             recall_service_pb2.SearchMemoriesRequest(query="x", read=read("known_at"))),
            ("as_of", rec.GetMemory, recall_service_pb2.GetMemoryRequest(id=memory.id, read=read("as_of"))),
            ("known_at", rec.GetMemory, recall_service_pb2.GetMemoryRequest(id=memory.id, read=read("known_at"))),
            ("as_of", rec.ListMemoriesByTag,
             recall_service_pb2.ListMemoriesByTagRequest(tags=["bad-time"], read=read("as_of"))),
            ("known_at", rec.ListRelatedMemories,
             recall_service_pb2.ListRelatedMemoriesRequest(id=memory.id, read=read("known_at"))),
            ("as_of", rec.StartupRecall, recall_service_pb2.StartupRecallRequest(read=read("as_of"))),
            ("since", rec.GetGraphSnapshot, recall_service_pb2.GetGraphSnapshotRequest(since=value)),
            ("known_at", rec.ListGraphNeighbors,
             recall_service_pb2.ListGraphNeighborsRequest(id=memory.id, read=read("known_at"))),
        ]
        for field, call, request in cases:
            details = await _refused(call, request)
            assert details.startswith(f"{field}: "), (field, details)
            assert ("1–9999" if bad == "seconds" else "nanos") in details, details


async def test_a_read_time_in_the_last_second_of_9999_still_finds_current_memories(service) -> None:
    """known_at (or as_of) of 9999-12-31T23:59:59.999999999Z hid every memory (GetMemory
    NOT_FOUND, search and listing empty) while 23:59:58.999 found them: open windows and
    memories never retracted end at 9999-12-31T23:59:59Z, and a read time past that end fell
    outside them. Such a read time is now read at the last millisecond before it."""
    async with service.client() as client:
        memory = await client.create_memory("the last second of the year 9999", tags=["end-of-time"])
        for name in ("known_at", "as_of"):
            read = recall_service_pb2.ReadOptions(**{name: LAST_INSTANT})
            got = await client.recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=memory.id, read=read))
            assert got.memory.id == memory.id and got.is_current, name
            found = await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(
                tags=["end-of-time"], tag_match=recall_service_pb2.TAG_MATCH_EXACT, read=read))
            assert [h.memory.id for h in found.results] == [memory.id], name
            listed = await client.recall.ListMemoriesByTag(recall_service_pb2.ListMemoriesByTagRequest(
                tags=["end-of-time"], read=read))
            assert [m.id for m in listed.memories] == [memory.id], name
    async with service.http() as http:
        r = await http.get(f"/memory/{memory.id}", params={"known_at": "9999-12-31T23:59:59.999Z"})
        assert r.status_code == 200, r.text


async def test_consolidation_status_page_size_is_checked_and_clamped_and_its_token_checked(service) -> None:
    """page_size -1 answered OK with next_page_token "-1", -100 UNKNOWN (a Redis error), 10**9
    read up to a billion runs; a page_token "-1" was taken as 0."""
    async with service.client() as client:
        status = client.consolidate.GetConsolidationStatus
        for size in (-1, -100):
            details = await _refused(status, consolidate_service_pb2.GetConsolidationStatusRequest(page_size=size))
            assert details.startswith("page_size: "), details
        for token in ("-1", "abc", " 5", "1e3", "99999999999"):
            details = await _refused(status, consolidate_service_pb2.GetConsolidationStatusRequest(page_token=token))
            assert details.startswith("page_token: "), (token, details)
        for i in range(101):  # more runs than a page holds, in the test's scope
            await service.ctx.graph.runs.record(f"run-{i}", "decay", True, 1_000_000.0 + i, 1_000_001.0 + i,
                                                ["decayed=0"], service.scope, "manual", "")
        page = await status(consolidate_service_pb2.GetConsolidationStatusRequest(page_size=10**9))
        assert len(page.runs) == 100 and page.runs[0].run_id == "run-100"
        rest = await status(consolidate_service_pb2.GetConsolidationStatusRequest(
            page_size=10**9, page_token=page.next_page_token))
        assert [r.run_id for r in rest.runs] == ["run-0"] and not rest.next_page_token
        default = await status(consolidate_service_pb2.GetConsolidationStatusRequest())
        assert len(default.runs) == 20 and default.next_page_token


async def test_search_text_is_bounded_naming_query_and_queries_over_grpc_rest_and_the_schema(service) -> None:
    """A 1 MB query took 6.7 s of the server's work and 3,000 queries 30 s: neither had a
    bound. The bound is the same over gRPC, REST and in the OpenAPI schema."""
    most = max(QUERY_MAX_LENGTH, service.settings.content_max_length)  # a memory's content fits as a query
    async with service.client() as client:
        search = client.recall.SearchMemories
        ok = await search(recall_service_pb2.SearchMemoriesRequest(query="word " * (most // 5)))
        assert ok.limit
        ok = await search(recall_service_pb2.SearchMemoriesRequest(queries=[f"topic {i}" for i in range(QUERIES_MAX)]))
        assert ok.limit
        for field, request in (
                ("query", recall_service_pb2.SearchMemoriesRequest(query="q" * (most + 1))),
                ("queries", recall_service_pb2.SearchMemoriesRequest(queries=["a"] * (QUERIES_MAX + 1))),
                ("queries", recall_service_pb2.SearchMemoriesRequest(queries=["short", "q" * (most + 1)]))):
            details = await _refused(search, request)
            assert details.startswith(f"{field}: at most"), details
    async with service.http() as http:
        r = await http.get("/recall", params={"query": "q" * (most + 1)})
        assert r.status_code == 400 and r.json()["error"].startswith("query: "), r.text
        r = await http.get("/recall", params={"queries": ["a"] * (QUERIES_MAX + 1)})
        assert r.status_code == 400 and r.json()["error"].startswith("queries: "), r.text
        parameters = {p["name"]: p["schema"] for p in
                      (await http.get("/openapi.json")).json()["paths"]["/recall"]["get"]["parameters"]}
        assert parameters["query"]["maxLength"] == most
        assert parameters["queries"]["maxItems"] == QUERIES_MAX
        assert parameters["queries"]["items"]["maxLength"] == most


async def test_search_filter_lists_are_bounded_naming_the_field(service) -> None:
    """tags, exclude_tags, context_tags, context_types and priority_ids of a search had no
    bound on their number of items; at LIST_ITEMS_MAX they are served, one more is refused
    naming the field, over gRPC and REST."""
    async with service.client() as client:
        search = client.recall.SearchMemories
        types = ["Decision", "Pattern", "Preference", "Style", "Habit", "Insight", "Context"]
        for name in ("tags", "exclude_tags", "context_tags", "context_types", "priority_ids"):
            # context_types items must name types (a type may repeat).
            items = [types[i % len(types)] if name == "context_types" else f"item{i}" for i in range(LIST_ITEMS_MAX + 1)]
            ok = await search(recall_service_pb2.SearchMemoriesRequest(query="lists", **{name: items[:-1]}))
            assert ok.limit, name
            details = await _refused(search, recall_service_pb2.SearchMemoriesRequest(query="lists", **{name: items}))
            assert details.startswith(f"{name}: at most {LIST_ITEMS_MAX} items"), (name, details)
    async with service.http() as http:
        r = await http.get("/recall", params={"query": "lists",
                                              "exclude_tags": ",".join(f"t{i}" for i in range(LIST_ITEMS_MAX + 1))})
        assert r.status_code == 400 and r.json()["error"].startswith("exclude_tags: "), r.text


async def test_time_query_window_is_echoed_at_millisecond_precision_over_grpc(service) -> None:
    """time_query=2025 echoed end_time 2025-12-31T23:59:59.999500Z over gRPC (the inclusive
    bound applied, half a millisecond before 2026) while REST showed ...59.999."""
    async with service.client() as client:
        found = await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(time_query="2025"))
    assert found.start_time.ToJsonString() == "2025-01-01T00:00:00Z"
    assert found.end_time.ToJsonString() == "2025-12-31T23:59:59.999Z"
    async with service.http() as http:
        body = (await http.get("/recall", params={"time_query": "2025"})).json()
    assert "23:59:59.999" in str(body["time_window"]), body["time_window"]


async def test_a_nul_in_read_request_text_is_invalid_argument_naming_the_field(service) -> None:
    """A NUL in by-tag ``tags`` (and any text of a read) answered "a text value contains a
    NUL character", naming no field (the graph's check); REST then named none either."""
    async with service.client() as client:
        memory = await client.create_memory("nul checks", tags=["nul"])
        rec = client.recall
        for field, call, request in (
                ("tags", rec.ListMemoriesByTag, recall_service_pb2.ListMemoriesByTagRequest(tags=["nul", "a\x00"])),
                ("tags", rec.SearchMemories, recall_service_pb2.SearchMemoriesRequest(tags=["a\x00b"])),
                ("exclude_tags", rec.SearchMemories,
                 recall_service_pb2.SearchMemoriesRequest(query="nul", exclude_tags=["x\x00"])),
                ("id", rec.GetMemory, recall_service_pb2.GetMemoryRequest(id=memory.id + "\x00")),
                ("id", rec.ListRelatedMemories, recall_service_pb2.ListRelatedMemoriesRequest(id="a\x00"))):
            details = await _refused(call, request)
            assert details.startswith(f"{field}: contains a NUL character"), (field, details)
    async with service.http() as http:
        r = await http.get("/memory/by-tag", params={"tags": "a\x00b"})
        assert r.status_code == 400 and r.json()["error"].startswith("tags: "), r.text


async def test_related_memories_page_size_out_of_range_names_page_size(service) -> None:
    """ListRelatedMemories refused ``page_size`` 201 or -1 naming ``limit``, a field its
    request does not have (REST's ``/memories/{id}/related`` checks its own ``limit``)."""
    async with service.client() as client:
        memory = await client.create_memory("a memory whose neighbours are paged", tags=["related-page"])
        for size in (201, -1):
            details = await _refused(client.recall.ListRelatedMemories,
                                     recall_service_pb2.ListRelatedMemoriesRequest(id=memory.id, page_size=size))
            assert details.startswith("page_size: must be between 1 and 200"), (size, details)


async def test_by_tag_lists_are_bounded_as_search_lists_are(service) -> None:
    """ListMemoriesByTag and DeleteMemoriesByTag took 5,000 tags and 50,000 memory_ids while a
    search's lists stop at LIST_ITEMS_MAX: one more than that is INVALID_ARGUMENT naming
    ``tags`` / ``memory_ids`` now (REST: 400 naming ``tags``), nothing deleted; at the bound
    they are served. MCP's confirmed delete of a preview listing more ids than one call takes
    deletes them in parts."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from automem.v1 import ingest_service_pb2 as ingest

    tags = [f"tag{i}" for i in range(LIST_ITEMS_MAX + 1)]
    async with service.client() as client:
        for start in range(0, LIST_ITEMS_MAX + 1, 500):  # the batch limit is 500
            await client.ingest.BatchCreateMemories(ingest.BatchCreateMemoriesRequest(memories=[
                ingest.MemoryInput(content=f"bulk memory number {i}", tags=["bulk"])
                for i in range(start, min(start + 500, LIST_ITEMS_MAX + 1))]))
        listed = await client.recall.ListMemoriesByTag(recall_service_pb2.ListMemoriesByTagRequest(
            tags=["bulk", *tags[:LIST_ITEMS_MAX - 1]]))
        assert listed.has_more and len(listed.memories) == 20
        details = await _refused(client.recall.ListMemoriesByTag,
                                 recall_service_pb2.ListMemoriesByTagRequest(tags=["bulk", *tags[:-1]]))
        assert details == f"tags: at most {LIST_ITEMS_MAX} items (got {LIST_ITEMS_MAX + 1})", details
        preview = await client.ingest.DeleteMemoriesByTag(ingest.DeleteMemoriesByTagRequest(
            tags=["bulk"], dry_run=True))
        assert len(preview.memory_ids) == LIST_ITEMS_MAX + 1
        details = await _refused(client.ingest.DeleteMemoriesByTag, ingest.DeleteMemoriesByTagRequest(
            tags=["bulk", *tags[:-1]]))
        assert details.startswith(f"tags: at most {LIST_ITEMS_MAX} items"), details
        details = await _refused(client.ingest.DeleteMemoriesByTag, ingest.DeleteMemoriesByTagRequest(
            tags=["bulk"], memory_ids=preview.memory_ids))
        assert details.startswith(f"memory_ids: at most {LIST_ITEMS_MAX} items"), details
    async with service.http() as http:
        for method in ("GET", "DELETE"):
            r = await http.request(method, "/memory/by-tag", params={"tags": ",".join(["bulk", *tags[:-1]])})
            assert r.status_code == 400 and r.json()["error"].startswith("tags: at most"), (method, r.text)
    assert await service.ctx.graph.memories.count(service.scope) == LIST_ITEMS_MAX + 1  # nothing deleted
    async with Client(streamable_http_client(service.url + "/mcp", http_client=create_mcp_http_client(
            headers={"X-Automem-Scope": service.scope}))) as mcp:
        shown = await mcp.call_tool("delete_memory", {"tags": ["bulk"]})
        assert not shown.is_error, shown.content[0].text
        done = await mcp.call_tool("delete_memory", {"tags": ["bulk"], "confirm": True,
                                                     "preview_token": shown.structured_content["preview_token"]})
        assert not done.is_error, done.content[0].text
        assert done.structured_content["deleted_count"] == LIST_ITEMS_MAX + 1, done.structured_content
        assert len(set(done.structured_content["memory_ids"])) == LIST_ITEMS_MAX + 1


async def test_startup_recall_at_a_past_time_is_grpcs_and_rest_says_so(service) -> None:
    """``GET /startup-recall?known_at=...`` is refused (AutoMem's route takes no read time:
    /work/shared/AUTOMEM_API.md) while gRPC StartupRecall reads ``read.known_at``; the 400
    named only what the route does not take, not where the caller gets it: it says so now."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "Always run the tests before a release",
                                             "tags": ["critical", "lesson"], "importance": 0.9})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]
        async with service.client() as client:
            before = (await client.recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=mid))).memory.update_time
        r = await http.patch(f"/memory/{mid}", json={"content": "Always run the whole suite before a release"})
        assert r.status_code == 200, r.text
        for name in ("known_at", "as_of"):
            r = await http.get("/startup-recall", params={name: before.ToJsonString()})
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert error.startswith(f"{name}: this route reads the memories as they are now"), error
            assert "RecallService.StartupRecall" in error and f"read.{name}" in error, error
    async with service.client() as client:
        then = await client.recall.StartupRecall(recall_service_pb2.StartupRecallRequest(
            read=recall_service_pb2.ReadOptions(known_at=before)))
        assert [m.content for m in then.critical_lessons] == ["Always run the tests before a release"]
