"""Recall: hybrid search, filters, the state pass on every read mode (issue 3 cases)."""

from __future__ import annotations

import uuid

import pytest

from automem.v1 import recall_service_pb2
from automem.vectors import VectorFilter
from tests.conftest import ScopedService, eventually, fresh_scope

NASTY_QUERIES = ["`add_episode`", "the of and", "?!", "a/b|c\\d", "_", "-foo", "status: done", '"unbalanced']


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _supersede(http, old: str, content: str, **fields) -> str:
    """Store ``content`` as the replacement of ``old`` (``supersedes_memory_id``); its id."""
    r = await http.post("/memory", json={"content": content, "supersedes_memory_id": old, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _ids(http, **params) -> list[str]:
    r = await http.get("/recall", params=params)
    assert r.status_code == 200, r.text
    return [h["id"] for h in r.json()["results"]]


async def _embedded(service, n: int) -> None:
    """Wait until ``n`` memories of the test's scope have their vector points."""
    async def check():
        return await service.ctx.vectors.count(VectorFilter(scope=service.scope)) >= n
    await eventually(check)


@pytest.mark.parametrize("query", NASTY_QUERIES)
async def test_queries_from_public_bug_reports_never_fail(service, query: str) -> None:
    async with service.http() as http:
        await _store(http, "add_episode is the function that stores an episode; status done", tags=["support"])
        r = await http.get("/recall", params={"query": query, "limit": 5})
        assert r.status_code == 200, r.text
        assert isinstance(r.json()["results"], list)


async def test_tag_only_empty_and_unknown_tag_and_bare_recall(service) -> None:
    async with service.http() as http:
        a = await _store(http, "Customer asked about refunds", tags=["support"])
        b = await _store(http, "Ticket escalated to tier 2", tags=["support"])
        await _store(http, "Unrelated roadmap note", tags=["roadmap"])
        assert set(await _ids(http, tags="support", limit=10)) == {a, b}
        assert set(await _ids(http, tags="support", query="", limit=10)) == {a, b}
        assert await _ids(http, tags="no-such-tag", limit=10) == []
        r = await http.get("/recall")
        assert r.status_code == 200 and r.json()["count"] == 3  # documented default: recent memories


async def test_tag_modes_and_matching(service) -> None:
    async with service.http() as http:
        m1 = await _store(http, "one", tags=["alpha"])
        m2 = await _store(http, "two", tags=["beta"])
        m3 = await _store(http, "three", tags=["alpha", "beta"])
        m4 = await _store(http, "four", tags=["alphabet"])
        m5 = await _store(http, "five", tags=["Alpha"])
        assert (await http.delete(f"/memory/{m3}")).status_code == 200
        m6 = await _store(http, "six", tags=["alpha", "beta"])

        async def q(**p):
            return set(await _ids(http, limit=50, **p))
        assert await q(tags=["alpha", "beta"], tag_mode="all", tag_match="exact") == {m6}
        # Documented case rule: tags match case-insensitively, so m5 [Alpha] counts as alpha.
        assert await q(tags=["alpha", "beta"], tag_mode="any", tag_match="exact") == {m1, m2, m5, m6}
        assert await q(tags="alpha", tag_match="exact") == {m1, m5, m6}
        assert await q(tags="alp", tag_match="prefix") == {m1, m4, m5, m6}
        for result in (await q(tags="alpha"), await q(tags="beta")):
            assert m3 not in result
        r = await http.get("/memory/by-tag", params={"tags": "alpha"})
        assert {m["id"] for m in r.json()["memories"]} == {m1, m5, m6}
        assert await q(tags="alpha", exclude_tags="beta", tag_match="exact") == {m1, m5}


async def test_validity_window_at_as_of_with_query_without_and_with_tag(service) -> None:
    async with service.http() as http:
        a = await _store(http, "The office is in Berlin", tags=["office"], t_valid="2024-01-01T00:00:00Z")
        await _store(http, "The office is in Paris", tags=["office"], t_valid="2030-01-01T00:00:00Z")
        await _store(http, "The office is in Madrid", tags=["office"], t_valid="2020-01-01T00:00:00Z",
                     t_invalid="2023-01-01T00:00:00Z")
        await _embedded(service, 3)
        as_of = "2025-01-01T00:00:00Z"
        assert await _ids(http, query="where is the office", as_of=as_of, limit=10) == [a]
        assert await _ids(http, as_of=as_of, limit=10) == [a]
        assert await _ids(http, tags="office", as_of=as_of, limit=10) == [a]


async def test_memory_stored_already_expired_is_withheld_including_vector_arm(service) -> None:
    async with service.http() as http:
        old = await _store(http, "Deploy freeze is in effect for payments", t_valid="2020-01-01T00:00:00Z",
                           t_invalid="2021-01-01T00:00:00Z")
        live = await _store(http, "Payments deploys need two reviewers")
        await _embedded(service, 2)
        point = (await service.ctx.vectors.retrieve([old]))[0]
        assert point.payload["valid_to"] == 1609459200.0  # the window is on the vector payload too
        r = await http.get("/recall", params={"query": "deploy freeze payments", "limit": 10})
        assert [h["id"] for h in r.json()["results"]] == [live]
        assert "vector" in r.json()["arms"]
        hist = await _ids(http, query="deploy freeze payments", limit=10, state_mode="history")
        assert old in hist


async def test_superseded_memory_is_replaced_by_chain_head_on_every_read(service) -> None:
    async with service.http() as http:
        v1 = await _store(http, "The API rate limit is 100 requests per minute", tags=["limits", "critical"])
        r = await http.post("/memory", json={"content": "The API rate limit is 200 requests per minute",
                                             "tags": ["limits", "critical"], "supersedes_memory_id": v1})
        assert r.status_code == 201, r.text
        v2 = r.json()["memory_id"]
        r = await http.post(f"/v1/memories/{v2}:supersede", json={"content": "The API rate limit is 500 per minute",
                                                                  "tags": ["limits", "critical"],
                                                                  "supersede_relation": "EVOLVED_INTO"})
        v3 = r.json()["memory_id"]
        await _embedded(service, 3)
        r = await http.get("/recall", params={"query": "API rate limit 100 requests", "limit": 5})
        results = r.json()["results"]
        assert [h["id"] for h in results] == [v3]
        got = (await http.get(f"/memory/{v1}")).json()["memory"]
        assert got["state"] == "SUPERSEDED" and got["is_current"] is False and got["current_id"] == v3
        assert got["t_invalid"] is not None
        listed = (await http.get("/memory/by-tag", params={"tags": "limits"})).json()["memories"]
        assert [m["id"] for m in listed] == [v3]
        startup = (await http.get("/startup-recall")).json()
        assert [m["id"] for m in startup["critical_lessons"]] == [v3]
        history = await _ids(http, query="API rate limit", limit=10, state_mode="history")
        assert set(history) == {v1, v2, v3}


async def test_state_replacement_match_type_names_the_replaced_id(service) -> None:
    async with service.http() as http:
        old = await _store(http, "Staging database host is db-old.internal")
        new = await _store(http, "Staging database host moved to a new cluster")
        # mcp-automem's four-call supersede ends with an INVALIDATED_BY association.
        await http.patch(f"/memory/{old}", json={"t_invalid": "2099-01-01T00:00:00Z"})
        r = await http.post("/associate", json={"memory1_id": old, "memory2_id": new, "type": "INVALIDATED_BY",
                                                "strength": 0.9})
        assert r.status_code == 201
        r = await http.get("/recall", params={"query": "db-old.internal staging host", "limit": 5})
        hits = r.json()["results"]
        assert hits[0]["id"] == new
        replaced = [h for h in hits if h.get("replaces_id") == old]
        assert replaced and replaced[0]["match_type"] == "state_replacement"


async def test_recall_ranks_relevant_memory_first_with_score_components(service) -> None:
    async with service.http() as http:
        target = await _store(http, "Alice prefers dark roast coffee in the morning")
        await _store(http, "The CI pipeline runs on every pull request")
        await _store(http, "Bob's favourite tea is green tea")
        await _embedded(service, 3)
        r = await http.get("/recall", params={"query": "what coffee does Alice like", "limit": 3})
        top = r.json()["results"][0]
        assert top["id"] == target
        assert top["score_components"]["vector"] > 0 and top["score_components"]["keyword"] > 0
        assert top["match_type"] in ("vector", "keyword")


async def test_memory_is_recallable_before_its_embedding_exists(own_service) -> None:
    own_service.ctx.enrich_consumer.stop()  # no enrichment: only the graph arms can find it
    async with own_service.http() as http:
        mid = await _store(http, "Zanzibar gateway credentials rotate monthly")
        r = await http.get("/recall", params={"query": "zanzibar credentials", "limit": 5})
        assert [h["id"] for h in r.json()["results"]] == [mid]


async def test_memory_is_recallable_behind_a_backlog_larger_than_the_direct_scan(own_service) -> None:
    """More than UNEMBEDDED_SCAN_MAX memories await their embedding (enrichment stopped): the
    lexical arm narrows them through FalkorDB's full-text index instead of scoring them all,
    and the one asked for is still found, the first in the list."""
    from automem.recall.servicer import UNEMBEDDED_SCAN_MAX

    own_service.ctx.enrich_consumer.stop()
    async with own_service.http() as http:
        filler = [{"content": f"routine standup note number {i} about the weekly sync"}
                  for i in range(UNEMBEDDED_SCAN_MAX + 5)]
        for start in range(0, len(filler), 100):
            r = await http.post("/memory/batch", json={"memories": filler[start:start + 100]})
            assert r.status_code in (200, 201), r.text
        mid = await _store(http, "Zanzibar gateway credentials rotate monthly")
        pending = await own_service.ctx.graph.memories.unembedded("default", UNEMBEDDED_SCAN_MAX + 1)
        assert len(pending) > UNEMBEDDED_SCAN_MAX
        r = await http.get("/recall", params={"query": "zanzibar credentials", "limit": 5})
        assert [h["id"] for h in r.json()["results"]][:1] == [mid]


async def test_time_filters_and_natural_language_time_query(service) -> None:
    async with service.http() as http:
        old = await _store(http, "Quarterly planning happened", timestamp="2023-01-10T10:00:00Z")
        new = await _store(http, "Retro happened")
        assert await _ids(http, start="2023-01-01T00:00:00Z", end="2023-02-01T00:00:00Z", limit=10) == [old]
        assert await _ids(http, time_query="this week", limit=10) == [new]  # "last week": the week before
        r = await http.get("/recall", params={"time_query": "qwertyuiop zzz"})  # ignored, with a warning
        assert r.status_code == 200 and "time_query" in r.json()["time_window_warning"]
        r = await http.get("/recall", params={"limit": 1000})  # clamped, as AutoMem (issue 13 item 2)
        assert r.status_code == 200 and r.json()["limit"] == 100
        r = await http.get("/recall", params={"sort": "sideways"})
        assert r.status_code == 400 and "sort" in r.json()["error"]


async def test_related_and_expand_relations_skip_non_current(service) -> None:
    async with service.http() as http:
        a = await _store(http, "Service A calls service B")
        b = await _store(http, "Service B owns the ledger")
        c = await _store(http, "Service C is retired", t_valid="2020-01-01T00:00:00Z", t_invalid="2021-01-01T00:00:00Z")
        for other in (b, c):
            await http.post("/associate", json={"memory1_id": a, "memory2_id": other, "type": "RELATES_TO"})
        related = (await http.get(f"/memories/{a}/related")).json()["related_memories"]
        assert [m["id"] for m in related] == [b]
        r = await http.get("/recall", params={"query": "service A calls", "limit": 1, "expand_relations": "true"})
        ids = [h["id"] for h in r.json()["results"]]
        assert ids[0] == a and b in ids and c not in ids


async def test_related_reports_the_edge_that_exists_and_marks_a_replaced_neighbour(service) -> None:
    """Break-it review: a1 superseded by a2, a2 by a3. a1's related listing gave a3 under a1's
    INVALIDATED_BY edge (strength 0.9, depth 1) though that edge reaches a2, with nothing
    saying a3 stands in for it; and with an edge of its own from a1 to a3, a3 was listed once,
    under that edge, and a1's INVALIDATED_BY edge vanished. Each neighbour is its own entry
    with its edge's type and strength; one shown as its chain's head names the neighbour the
    edge reaches in ``replaces_id``."""
    async with service.http() as http:
        a1 = await _store(http, "The ferret queue is RabbitMQ")
        r = await http.post(f"/v1/memories/{a1}:supersede", json={"content": "The ferret queue is Kafka"})
        assert r.status_code == 201, r.text
        a2 = r.json()["memory_id"]
        r = await http.post(f"/v1/memories/{a2}:supersede", json={"content": "The ferret queue is NATS"})
        assert r.status_code == 201, r.text
        a3 = r.json()["memory_id"]

        async def related(types: str) -> list[tuple]:
            r = await http.get(f"/memories/{a1}/related", params={"relationship_types": types})
            assert r.status_code == 200, r.text
            return [(x["id"], x["relation_type"], x["strength"], x["depth"], x.get("replaces_id"))
                    for x in r.json()["related_memories"]]
        assert await related("INVALIDATED_BY") == [(a3, "INVALIDATED_BY", 0.9, 1, a2)]
        r = await http.post("/associate", json={"memory1_id": a1, "memory2_id": a3, "type": "RELATES_TO",
                                                "strength": 1.0})
        assert r.status_code == 201, r.text
        assert await related("INVALIDATED_BY,RELATES_TO") == [(a3, "RELATES_TO", 1.0, 1, None),
                                                               (a3, "INVALIDATED_BY", 0.9, 1, a2)]
        async with service.client() as client:
            answer = await client.recall.ListRelatedMemories(recall_service_pb2.ListRelatedMemoriesRequest(
                id=a1, relationship_types=["INVALIDATED_BY"]), metadata=client.metadata())
            assert [(x.memory.id, x.replaces_id) for x in answer.related] == [(a3, a2)]


async def test_analyze_reports_the_callers_scope_only(service) -> None:
    async with service.http() as http:
        await _store(http, "Alice moved the billing service to Postgres", tags=["db"], type="Decision",
                     importance=0.8)
        await _store(http, "Alice prefers short standups", tags=["team", "db"], type="Preference", importance=0.4)
        r = await http.post("/memory", json={"content": "Elsewhere: Bob visited Paris", "tags": ["db"]},
                            headers={"X-Automem-Scope": "other/project"})
        assert r.status_code == 201

        async def enriched():
            body = (await http.get("/analyze")).json()
            return body if body["entity_frequency"] else None
        body = await eventually(enriched, timeout=30)
        assert body["memory_count"] == 2
        assert body["type_counts"] == {"Decision": 1, "Preference": 1}
        assert body["average_importance"] == 0.6 and body["average_confidence"] == 0.9
        assert body["tag_frequency"] == {"db": 2, "team": 1}
        assert all(name.startswith("entity:") for name in body["entity_frequency"])
        assert not any("bob" in name or "paris" in name for name in body["entity_frequency"])
        for top in (0, -1, 201):
            assert (await http.get("/analyze", params={"top": top})).status_code == 400


async def test_newest_first_listing_is_exact_inside_and_beyond_the_time_windows(service) -> None:
    from datetime import UTC, datetime, timedelta

    base = (datetime.now(UTC) - timedelta(hours=1)).replace(microsecond=0)  # stored to the millisecond
    recent = [base - timedelta(minutes=5 * i) for i in range(110)]
    old = [base - timedelta(days=800 + 10 * i) for i in range(20)]
    stamps = recent + old
    async with service.http() as http:
        r = await http.post("/memory/batch", json={"memories": [
            {"content": f"listing note {i}", "timestamp": t.isoformat(), "tags": ["listing", f"n{i % 2}"]}
            for i, t in enumerate(stamps)]})
        assert r.status_code in (200, 201), r.text
        await _embedded(service, len(stamps))
        want = sorted(stamps, reverse=True)

        async def page(**params) -> list[datetime]:
            r = await http.get("/recall", params={"sort": "time_desc", **params})
            assert r.status_code == 200, r.text
            return [datetime.fromisoformat(h["memory"]["timestamp"]) for h in r.json()["results"]]

        # limit 20 -> 100 candidates: the 1-day window below the newest memory holds them.
        assert await page(limit=20) == want[:20]
        assert await page(limit=20, tags="n1", tag_match="exact") == [t for i, t in sorted(
            enumerate(stamps), key=lambda p: p[1], reverse=True) if i % 2][:20]
        # offset 100 -> 600 candidates: no window holds them, the whole scope is sorted.
        assert await page(limit=20, offset=100) == want[100:120]


async def test_context_hints_boost_by_type_and_label_and_refuse_an_unknown_type(service) -> None:
    """AutoMem's context hints: ``context_types`` boosts memories of those types (its 0.25
    type bonus), ``context`` (a label) boosts memories with that tag, as ``context_tags``
    does; list values may be comma-separated. Both were accepted and ignored, so an agent
    asking for its Preferences got the same page as without; an unknown type was ignored too,
    and is now a 400 / INVALID_ARGUMENT naming ``context_types``."""
    import grpc

    async with service.http() as http:
        decision = await _store(http, "The deploy window for the billing service is Tuesday morning.",
                                type="Decision", importance=0.5)
        preference = await _store(http, "The deploy window for the billing service is Tuesday evening.",
                                  type="Preference", importance=0.5, tags=["ops"])
        await _embedded(service, 2)  # both scored by both arms: the boost alone tells them apart
        plain = await http.get("/recall", params={"query": "billing deploy window", "limit": 2})
        assert plain.status_code == 200
        assert all("type" not in h["score_components"] for h in plain.json()["results"])
        for params in ({"context_types": "Preference"}, {"context_types": "Style,preference"},
                       {"context_types": ["Style", "Preference"]}):
            r = await http.get("/recall", params={"query": "billing deploy window", "limit": 2, **params})
            assert r.status_code == 200, (params, r.text)
            hits = {h["id"]: h for h in r.json()["results"]}
            assert hits[preference]["score_components"]["type"] == 0.25, params
            assert "type" not in hits[decision]["score_components"], params
            assert r.json()["results"][0]["id"] == preference, params
        # AutoMem's context_priority block, which its clients read, answers the hints given.
        r = await http.get("/recall", params={"query": "billing deploy window", "context": " Ops ",
                                              "context_tags": "Infra,db", "context_types": "preference"})
        assert r.json()["context_priority"] == {"language": None, "context": "Ops", "priority_tags": ["db", "infra", "ops"],
                                                "priority_types": ["Preference"], "injected": False}
        assert "context_priority" not in plain.json()
        labelled = await http.get("/recall", params={"query": "billing deploy window", "limit": 2, "context": "ops"})
        hits = {h["id"]: h for h in labelled.json()["results"]}
        assert hits[preference]["score_components"]["tag"] > 0 == hits[decision]["score_components"].get("tag", 0)
        bad = await http.get("/recall", params={"query": "billing", "context_types": "Preference,Bogus"})
        assert bad.status_code == 400 and "context_types" in bad.text and "Bogus" in bad.text, bad.text
    async with service.client() as client:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await client.search(query="billing", context_types=["Bogus"])
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "context_types" in raised.value.details()


async def test_priority_ids_no_search_found_are_added_to_the_ranking(service) -> None:
    """AutoMem injects the memories named in ``priority_ids`` that its searches did not find
    (``_inject_priority_memories``) and says so in ``context_priority.injected``; here they
    were boosted only when an arm happened to find them, so a named memory whose text shares
    nothing with the query never came back and ``injected`` was always false. Now tier 0 ranks
    them too: first (the priority component), ``match_type`` ``priority_id``, within the
    caller's scope, filters and current state; not in a time-ordered listing."""
    pier = [f"Harbour log {i}: the {c} boat brought {k} to the lighthouse pier"
            for i, (c, k) in enumerate((c, k) for c in ("red", "blue", "green", "grey", "white", "black", "tan")
                                       for k in ("cod", "herring", "crab", "mackerel", "salmon", "rope",
                                                 "nets", "oil", "salt", "ice", "coal", "wool", "tar", "lime",
                                                 "kelp", "oak"))]
    other = ScopedService(service.shared, fresh_scope())
    async with other.http() as http:
        elsewhere = await _store(http, "The other team's lemon cake recipe uses four eggs.")
    async with service.http() as http:
        r = await http.post("/memory/batch", json={"memories": [{"content": c, "tags": ["pier"]} for c in pier]})
        assert r.status_code in (200, 201), r.text
        cake = await _store(http, "Grandma's lemon cake recipe uses three eggs and a cup of sugar.", tags=["pier"])
        untagged = await _store(http, "The attic window latch sticks in cold weather.")
        gone = await _store(http, "The garden shed key hangs by the back door.", tags=["pier"])
        old = await _store(http, "The spare tyre is in the garage.", tags=["pier"])
        await _embedded(service, len(pier) + 4)
        new = await _store(http, "The spare tyre is in the boot of the car now.", tags=["pier"],
                           supersedes_memory_id=old)
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        query = {"query": "which boat brought cargo to the lighthouse pier", "limit": 5}
        plain = await _ids(http, **query)
        assert len(plain) == 5 and not {cake, untagged, gone, old, new, elsewhere} & set(plain)
        r = await http.get("/recall", params={**query, "priority_ids": f"{cake},{elsewhere},{gone}"})
        assert r.status_code == 200, r.text
        body = r.json()
        first = body["results"][0]
        assert (first["id"], first["match_type"]) == (cake, "priority_id"), body["results"]
        assert first["score_components"]["priority"] == 1.0
        assert len(body["results"]) == 5 and all(h["match_type"] != "priority_id" for h in body["results"][1:])
        assert body["context_priority"]["injected"] is True
        ids = {h["id"] for h in body["results"]}
        assert elsewhere not in ids and gone not in ids  # another scope's, and a deleted one
        # The request's filters hold for a named memory too; a superseded one gives way to its head.
        r = await http.get("/recall", params={**query, "tags": "pier", "priority_ids": [untagged, old]})
        tagged = [h["id"] for h in r.json()["results"]]
        assert untagged not in tagged and old not in tagged and tagged[0] == new, tagged
        first = r.json()["results"][0]  # still said to be the named one's (it was "state_replacement")
        assert (first["match_type"], first["replaces_id"], r.json()["context_priority"]["injected"]) == (
            "priority_id", old, True), first
        # Named memories a search found are boosted, not injected.
        found = await http.get("/recall", params={**query, "priority_ids": plain[4]})
        assert found.json()["results"][0]["id"] == plain[4]
        assert found.json()["results"][0]["match_type"] != "priority_id"
        assert found.json()["context_priority"]["injected"] is False
        # A time-ordered listing has nothing to boost: nothing is added.
        listed = await _ids(http, **query, sort="time_desc", priority_ids=cake)
        assert cake not in listed and listed == await _ids(http, **query, sort="time_desc")
    async with service.client() as client:
        response = await client.search(query=query["query"], limit=5, priority_ids=[cake])
        assert (response.results[0].memory.id, response.results[0].match_type) == (cake, "priority_id")


async def test_a_replacement_keeps_to_the_exclusions_and_the_window(service) -> None:
    """Break-it review: a superseded hit gave way to its replacement whatever the request's
    ``exclude_tags`` and time window said: a memory tagged ``secret`` came back under
    ``exclude_tags=secret``, and one stored now under a window 40 days back. A replacement keeps
    to both now, as expansions do (not to the tag filter: the current fact of a tagged hit may
    carry other tags); the superseded hit stays withheld."""
    async with service.http() as http:
        old = await _store(http, "Narwhal api key rotation happens monthly", tags=["narwhal", "public"])
        new = await _supersede(http, old, "Narwhal api key rotation happens weekly", tags=["narwhal", "secret"])
        then = await _store(http, "Walrus deploys go out on Mondays", tags=["walrus"],
                            timestamp="2026-01-10T12:00:00Z")
        now = await _supersede(http, then, "Walrus deploys go out on Tuesdays", tags=["walrus"])
        await _embedded(service, 4)
        assert await _ids(http, query="narwhal key rotation", tags="narwhal") == [new]
        for params in ({"exclude_tags": "secret"}, {"tags": "narwhal", "exclude_tags": "secret"}):
            r = await http.get("/recall", params={"query": "narwhal key rotation", "state_debug": "true", **params})
            assert r.status_code == 200, r.text
            assert not {old, new} & {h["id"] for h in r.json()["results"]}, (params, r.json()["results"])
            suppressed = r.json()["state_filter"]["suppressed"]
            assert (old, new) in {(s["id"], s["replacement_id"]) for s in suppressed}, suppressed
        # The tag filter does not bind a replacement: the current fact of a "public" hit.
        assert await _ids(http, query="narwhal key rotation", tags="public") == [new]
        window = {"start": "2026-01-01T00:00:00Z", "end": "2026-01-31T00:00:00Z"}
        assert not {then, now} & set(await _ids(http, query="walrus deploys", **window))
        assert await _ids(http, query="walrus deploys", tags="walrus") == [now]


async def test_expansions_keep_to_the_window_and_exclusions_and_never_repeat_across_pages(service) -> None:
    """Break-it review: relation/entity expansions ignored ``exclude_tags`` and the time
    window (an excluded or out-of-window memory came back as ``match_type: relation``);
    ``relation_limit=0`` / ``expansion_limit=0`` were echoed yet read as 5 / 25; and paging
    with expansions repeated memories (page 1 expanded page 0's results and re-showed page
    0's expansions). AutoMem applies the window and exclusions to expansions, not the tag
    filter (its expand_respect_tags is off by default)."""
    tag = f"exp-{uuid.uuid4().hex[:8]}"

    async def link(a: str, b: str) -> None:
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO",
                                                "strength": 0.8})
        assert r.status_code in (200, 201), r.text

    async with service.http() as http:
        seed = await _store(http, "The seed note of the expansion test.", tags=[tag], timestamp="2026-07-05T12:00:00Z")
        excluded = await _store(http, "A related note tagged to be left out.", tags=["leave-out"],
                                timestamp="2026-07-06T12:00:00Z")
        outside = await _store(http, "A related note from long before the window.", timestamp="2025-01-01T00:00:00Z")
        kept = await _store(http, "A related note inside the window.", timestamp="2026-07-06T12:00:00Z")
        for other in (excluded, outside, kept):
            await link(seed, other)
        base = {"tags": tag, "expand_relations": "true", "limit": 5}
        everything = await http.get("/recall", params=base)
        assert {h["id"] for h in everything.json()["results"] if h["match_type"] == "relation"} == {
            excluded, outside, kept}
        narrowed = await http.get("/recall", params={**base, "exclude_tags": "leave-out", "start": "2026-07-01",
                                                     "end": "2026-07-10"})
        assert narrowed.status_code == 200, narrowed.text
        assert [h["id"] for h in narrowed.json()["results"]] == [seed, kept]
        for name in ("relation_limit", "expansion_limit"):
            refused = await http.get("/recall", params={**base, name: 0})
            assert refused.status_code == 400 and name in refused.text, refused.text

        # Two pages of one result each; both results are linked to one shared memory.
        paged = f"{tag}-pages"
        first = await _store(http, "The first page's note.", tags=[paged], timestamp="2026-08-02T00:00:00Z")
        second = await _store(http, "The second page's note.", tags=[paged], timestamp="2026-08-01T00:00:00Z")
        shared = await _store(http, "A note linked to both pages' notes.", timestamp="2026-08-01T12:00:00Z")
        await link(first, shared)
        await link(second, shared)
        await link(second, first)
        pages = [(await http.get("/recall", params={"tags": paged, "tag_match": "exact", "expand_relations": "true",
                                                    "limit": 1, "offset": offset})).json()["results"]
                 for offset in (0, 1)]
        assert pages[0][0]["id"] == first and {h["id"] for h in pages[0][1:]} == {shared, second}
        # Neither the first page's note nor its expansion again (the second page's own note,
        # expanded on the first page, comes as its ranked result: documented).
        assert [h["id"] for h in pages[1]] == [second]

        # A memory no page showed still comes: linked to a result of the first page that was no
        # seed (relation_limit 1) and to the second page's seed, it was hidden on both pages.
        quiet = f"{tag}-quiet"
        alpha, beta, gamma, delta = [await _store(http, f"The {w} report.", tags=[quiet],
                                                  timestamp=f"2026-01-0{i + 1}T00:00:00Z")
                                     for i, w in enumerate(("alpha", "beta", "gamma", "delta"))]
        lemur = await _store(http, "A shared note about lemurs.")
        await link(beta, lemur)
        await link(gamma, lemur)
        pages = [(await http.get("/recall", params={"tags": quiet, "sort": "time_asc", "limit": 2, "offset": offset,
                                                    "relation_limit": 1, "expand_relations": "true"})).json()["results"]
                 for offset in (0, 2)]
        assert [h["id"] for h in pages[0]] == [alpha, beta]
        assert [h["id"] for h in pages[1]] == [gamma, delta, lemur]
        # expansion_limit counts what passes the filters: an excluded neighbour takes no place.
        await link(seed, await _store(http, "Another related note, kept.", timestamp="2026-07-07T12:00:00Z"))
        r = await http.get("/recall", params={**base, "exclude_tags": "leave-out", "start": "2026-07-01",
                                              "end": "2026-07-10", "expansion_limit": 2})
        assert len([h for h in r.json()["results"] if h["match_type"] == "relation"]) == 2, r.text


async def test_recall_refuses_a_parameter_it_does_not_know_and_reads_automems_other_names(service) -> None:
    """A typo (``exclude_tag``) on /recall or /memory/by-tag was ignored and the answer looked
    right; it is a 400 naming it. The parameters of AutoMem features this service has not
    (mcp-automem sends ``scope_fallback``, ``auto_decompose``, ``language``...) are accepted;
    AutoMem's other names ``expand`` / ``entity_expansion`` / ``relation_expansion_limit`` are
    read, and ``expand_respect_tags`` keeps expansions to the tag filter."""
    tag = f"strict-{uuid.uuid4().hex[:8]}"
    async with service.http() as http:
        seed = await _store(http, "The strict parameter seed note.", tags=[tag])
        other = await _store(http, "A related note without the tag.")
        r = await http.post("/associate", json={"memory1_id": seed, "memory2_id": other, "type": "RELATES_TO",
                                                "strength": 0.9})
        assert r.status_code in (200, 201), r.text
        for path, params in (("/recall", {"tags": tag, "exclude_tag": "x"}),
                             ("/memory/by-tag", {"tags": tag, "tag_modes": "all"})):
            r = await http.get(path, params=params)
            assert r.status_code == 400 and r.json()["error"].startswith(
                next(k for k in params if k != "tags") + ": not a parameter"), r.text
        # One value each (the last was read; AutoMem reads the first); lists repeat.
        for path in ("/recall", "/memory/by-tag"):
            r = await http.get(f"{path}?tags={tag}&tags=other&limit=5&limit=7")
            assert r.status_code == 400 and r.json()["error"].startswith("limit: given 2 times"), r.text
        r = await http.delete(f"/memory/{seed}?purge=false&purge=true")
        assert r.status_code == 400 and r.json()["error"].startswith("purge: given 2 times"), r.text
        r = await http.get("/recall", params={"tags": tag, "scope_fallback": "true", "auto_decompose": "false",
                                              "per_query_limit": "5", "adaptive_floor": "true", "language": "python",
                                              "active_path": "src/app.py", "format": "json", "api_key": ""})
        assert r.status_code == 200, r.text
        for alias in ("expand", "expand_associations"):
            r = await http.get("/recall", params={"tags": tag, alias: "true"})
            assert [h["id"] for h in r.json()["results"]] == [seed, other], (alias, r.text)
        r = await http.get("/recall", params={"tags": tag, "expand": "true", "relation_expansion_limit": 1})
        assert r.json()["expansion"]["expansion_limit"] == 1
        # As AutoMem: the first name given is read, an explicit false included.
        r = await http.get("/recall", params={"tags": tag, "expand_relations": "false", "expand": "true"})
        assert [h["id"] for h in r.json()["results"]] == [seed]
        r = await http.get("/recall", params={"tags": tag, "expand": "true", "expansion_limit": 25,
                                              "relation_expansion_limit": 1})
        assert r.json()["expansion"]["expansion_limit"] == 25
        r = await http.get("/recall", params={"tags": tag, "expand_relations": "true", "expand_respect_tags": "true"})
        assert [h["id"] for h in r.json()["results"]] == [seed]  # the related note lacks the tag
