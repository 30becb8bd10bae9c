"""Recall pagination with a query is stable (issue 12, item 7): pages at offset 0, 20, 40... of
the same request return every match exactly once, and each answer says whether more follow
(``has_more``) and, once the ranking was read to its end, how many there are (``total``).
Over REST, gRPC and MCP."""

from __future__ import annotations

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from automem.vectors import VectorFilter
from tests.conftest import eventually, start_service

COUNT = 150
PAGE = 20
COLOURS = ["red", "blue", "green", "grey", "white"]
CARGO = ["cod", "herring", "crab", "mackerel", "salmon", "rope", "nets"]


async def _stored(service) -> set[str]:
    """COUNT memories that all match the query, with varied content (scores differ, some tie)."""
    async with service.http() as http:
        r = await http.post("/memory/batch", json={"memories": [
            {"content": f"Harbour log {i % 40}: the {COLOURS[i % 5]} boat brought {CARGO[i % 7]} "
                        f"to the lighthouse pier", "tags": ["harbour"]}
            for i in range(COUNT)]})
        assert r.status_code in (200, 201), r.text
        ids = set(r.json()["memory_ids"])

    async def embedded():
        return await service.ctx.vectors.count(VectorFilter(scope=service.scope)) >= COUNT
    await eventually(embedded, timeout=120)
    return ids


def _check_pages(pages: list[tuple[list[str], bool, int | None]], ids: set[str]) -> None:
    seen = [mid for page, _, _ in pages for mid in page]
    assert len(seen) == len(set(seen)), "a memory came back on two pages"
    assert set(seen) == ids
    assert [len(p) for p, _, _ in pages] == [PAGE] * (COUNT // PAGE) + [COUNT % PAGE]
    assert [more for _, more, _ in pages] == [True] * (len(pages) - 1) + [False]
    assert pages[-1][2] == COUNT
    assert all(total in (None, COUNT) for _, _, total in pages)


async def test_recall_pages_return_every_match_once_over_rest_grpc_and_mcp(service) -> None:
    ids = await _stored(service)
    query = "boat brought cargo to the lighthouse"

    async with service.http() as http:
        for params in ({}, {"tags": "harbour"}, {"sort": "time_desc"}):
            pages = []
            for offset in range(0, COUNT + PAGE, PAGE):
                r = await http.get("/recall", params={"query": query, "limit": PAGE, "offset": offset, **params})
                assert r.status_code == 200, r.text
                body = r.json()
                pages.append(([h["id"] for h in body["results"]], body["has_more"], body["total"]))
                if not body["has_more"]:
                    break
            _check_pages(pages, ids)
        # Past the end: an empty page, nothing more.
        r = await http.get("/recall", params={"query": query, "limit": PAGE, "offset": COUNT + PAGE})
        assert r.json()["results"] == [] and r.json()["has_more"] is False

    async with service.client() as client:
        pages = []
        for offset in range(0, COUNT + PAGE, PAGE):
            found = await client.search(query, limit=PAGE, offset=offset)
            pages.append(([r.memory.id for r in found.results], found.has_more,
                          found.total if found.HasField("total") else None))
            if not found.has_more:
                break
        _check_pages(pages, ids)

    mcp = Client(streamable_http_client(service.url + "/mcp", http_client=create_mcp_http_client(
        headers={"X-Automem-Scope": service.scope})))
    async with mcp:
        pages = []
        for offset in range(0, COUNT + PAGE, PAGE):
            result = await mcp.call_tool("recall_memory", {"query": query, "limit": PAGE, "offset": offset})
            assert not result.is_error, result.content[0].text
            body = result.structured_content
            pages.append(([m["id"] for m in body["results"]], body["has_more"], body["total"]))
            if not body["has_more"]:
                break
        _check_pages(pages, ids)


async def test_pages_return_every_match_once_when_a_tier_ranks_part_of_its_pool(settings) -> None:
    """Tier 0 reads and ranks only the best of its pool by arm score (``max(3 * limit,
    search_rank_candidates)``, automem/recall/servicer.py ``_Tiers._prune``); the rest come in
    the tier after it, also when the arms returned every match (pools of 200 for 150 matches,
    so no arm asks for a larger pool): in pages of 40, the first page reads the ranking fields
    of 120 memories only, and every match comes back once, in the same pages at every read; a
    priority id is read and ranked in the first tier wherever its arm scores put it."""
    running = await start_service(settings.model_copy(update={"search_rank_candidates": 5,
                                                              "search_author_requery": "off"}))
    try:
        ids = await _stored(running)
        query = "boat brought cargo to the lighthouse"
        memories = running.ctx.graph.memories
        read, reads = memories.recall_candidates, []

        async def counted(candidates, scope):
            reads.append(len(candidates))
            return await read(candidates, scope)
        memories.recall_candidates = counted
        async with running.http() as http:
            r = await http.get("/recall", params={"query": query, "limit": 40})
            assert r.status_code == 200 and len(r.json()["results"]) == 40, r.text
            assert reads == [120], reads  # of the 150 both arms returned
            runs = []
            for _ in range(2):
                pages = []
                for offset in range(0, COUNT + 40, 40):
                    r = await http.get("/recall", params={"query": query, "limit": 40, "offset": offset})
                    assert r.status_code == 200, r.text
                    pages.append([h["id"] for h in r.json()["results"]])
                    if not r.json()["has_more"]:
                        break
                runs.append(pages)
        seen = [mid for page in runs[0] for mid in page]
        assert len(seen) == len(set(seen)), "a memory came back on two pages"
        assert set(seen) == ids
        assert [len(p) for p in runs[0]] == [40, 40, 40, 30]
        assert runs[0] == runs[1]
        # A priority id leads the ranking whatever its arm scores: the last-ranked memory, named
        # one, is read in the first tier and leads the first page.
        last = runs[0][-1][-1]
        async with running.http() as http:
            r = await http.get("/recall", params={"query": query, "limit": 40, "priority_ids": [last]})
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["id"] == last
    finally:
        await running.runner.stop()
