"""AutoMem parity (issue 13 items 2, 3, 5, 6, 7): what an AutoMem client sends is read as
AutoMem reads it, over REST, gRPC and MCP, on the real service (NATS, FalkorDB, qdrant-edge,
the embedding model). AutoMem's rules are cited from verygoodplugins/automem in the code
under test; docs/automem-compat.md lists where this service deliberately differs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from automem.common.embedding import configured_dimension
from automem.common.model import LEGACY_TYPE_ALIASES, parse_type, type_name
from automem.v1 import ingest_service_pb2, memory_pb2, recall_service_pb2, review_service_pb2
from tests.conftest import start_service

# AutoMem's TYPE_ALIASES (automem/config.py of verygoodplugins/automem), legacy entries, as
# read there on 2026-12-02: the table in automem/common/model.py must be exactly this.
AUTOMEM_LEGACY_TYPES = {
    "memory": "Context", "milestone": "Context", "analysis": "Insight", "observation": "Insight",
    "document": "Context", "meeting_notes": "Context", "template": "Pattern", "project": "Context",
    "issue": "Insight", "timeline": "Context", "organization": "Context", "person": "Context",
    "interests": "Preference", "personality": "Preference", "emotional_patterns": "Preference",
    "relationship_dynamics": "Preference", "personal_situation": "Context", "health_habits": "Habit",
    "practical_info": "Context", "communication": "Preference", "legal_analysis": "Insight",
}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _call_tool(client: Client, tool: str, **arguments) -> tuple[dict, str]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content, result.content[0].text


# --- item 2: limits cap ----------------------------------------------------------------


async def test_limit_above_the_maximum_is_capped_and_reported_zero_and_negative_refused(service) -> None:
    async with service.http() as http:
        for i in range(3):
            await _store(http, f"Capped listing memory {i}", tags=["capped"])
        r = await http.get("/recall", params={"tags": "capped", "limit": 500})
        assert r.status_code == 200, r.text
        assert r.json()["limit"] == 100 and r.json()["requested_limit"] == 500 and r.json()["count"] == 3
        r = await http.get("/memory/by-tag", params={"tags": "capped", "limit": 5000})
        assert r.status_code == 200, r.text
        assert r.json()["limit"] == 200 and r.json()["requested_limit"] == 5000 and r.json()["count"] == 3
        r = await http.get("/recall", params={"tags": "capped", "limit": 2})
        assert r.json()["limit"] == 2 and r.json()["count"] == 2
        for path in ("/recall", "/memory/by-tag"):
            for bad in (0, -3):
                r = await http.get(path, params={"tags": "capped", "limit": bad})
                assert r.status_code == 400 and "limit" in r.json()["error"], (path, bad, r.text)

    async with service.client() as client:
        found = await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(tags=["capped"], limit=101))
        assert found.limit == 100 and len(found.results) == 3
        listed = await client.recall.ListMemoriesByTag(
            recall_service_pb2.ListMemoriesByTagRequest(tags=["capped"], page_size=201))
        assert listed.page_size == 200 and len(listed.memories) == 3
        for call, field in (
                (client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(tags=["capped"], limit=0)),
                 "limit"),
                (client.recall.ListMemoriesByTag(recall_service_pb2.ListMemoriesByTagRequest(tags=["capped"],
                                                                                           page_size=-1)),
                 "page_size")):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.details().startswith(field + ":"), refused.value.details()

    url = service.url + "/mcp"
    async with Client(streamable_http_client(url, http_client=_mcp_http(service))) as mcp:
        body, _ = await _call_tool(mcp, "recall_memory", tags=["capped"], limit=1000, format="json")
        assert body["limit"] == 100 and body["count"] == 3
        body, _ = await _call_tool(mcp, "recall_memory", tags=["capped"], exhaustive=True, limit=1000, format="json")
        assert body["limit"] == 200 and body["count"] == 3
        result = await mcp.call_tool("recall_memory", {"tags": ["capped"], "limit": 0})
        assert result.is_error and "limit" in result.content[0].text
        result = await mcp.call_tool("recall_memory", {"tags": ["capped"], "exhaustive": True, "limit": 0})
        text = result.content[0].text
        assert result.is_error and "limit: must be at least 1" in text and "page_size" not in text, text


def _mcp_http(service):
    from mcp.shared._httpx_utils import create_mcp_http_client

    return create_mcp_http_client(headers={"X-Automem-Scope": service.scope})


# --- item 3: aliases -------------------------------------------------------------------


async def test_order_by_is_read_as_sort(service) -> None:
    async with service.http() as http:
        old = await _store(http, "The older memory of the order_by test", tags=["orderby"],
                           timestamp="2024-01-01T00:00:00Z")
        new = await _store(http, "The newer memory of the order_by test", tags=["orderby"],
                           timestamp="2025-01-01T00:00:00Z")
        for order, first in (("time_asc", old), ("time_desc", new)):
            r = await http.get("/recall", params={"tags": "orderby", "order_by": order})
            assert r.status_code == 200, r.text
            assert r.json()["sort"] == order and r.json()["results"][0]["id"] == first, r.text
        # sort wins when both are given, as in AutoMem.
        r = await http.get("/recall", params={"tags": "orderby", "sort": "time_asc", "order_by": "time_desc"})
        assert r.json()["sort"] == "time_asc" and r.json()["results"][0]["id"] == old
    async with Client(streamable_http_client(service.url + "/mcp", http_client=_mcp_http(service))) as mcp:
        body, _ = await _call_tool(mcp, "recall_memory", tags=["orderby"], order_by="time_asc", format="json")
        assert body["sort"] == "time_asc" and body["results"][0]["id"] == old


def test_legacy_type_table_is_automems() -> None:
    assert LEGACY_TYPE_ALIASES == AUTOMEM_LEGACY_TYPES
    for legacy, canonical in AUTOMEM_LEGACY_TYPES.items():
        assert type_name(parse_type(legacy)) == canonical
        assert type_name(parse_type(canonical.lower())) == canonical
    with pytest.raises(Exception, match="type"):
        parse_type("no-such-type")


async def test_legacy_and_lower_case_type_names_store_as_automem_maps_them(service) -> None:
    async with service.http() as http:
        cases = {"analysis": "Insight", "meeting_notes": "Context", "template": "Pattern", "health_habits": "Habit",
                 "decision": "Decision", "Analysis": "Insight"}
        for given, expected in cases.items():
            mid = await _store(http, f"A memory stored with type {given} ({uuid.uuid4().hex[:6]})", type=given)
            r = await http.get(f"/memory/{mid}")
            assert r.json()["memory"]["type"] == expected, (given, r.text)
        r = await http.post("/memory/batch", json={"memories": [{"content": "batch legacy", "type": "observation"}]})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_ids"][0]
        assert (await http.get(f"/memory/{mid}")).json()["memory"]["type"] == "Insight"
        r = await http.patch(f"/memory/{mid}", json={"type": "interests"})
        assert r.status_code == 200 and r.json()["memory"]["type"] == "Preference", r.text
        r = await http.post("/memory", json={"content": "unknown type", "type": "gossip"})
        assert r.status_code == 400 and "type" in r.json()["error"]


async def test_x_admin_api_key_is_an_admin_token_and_query_token_is_off_by_default(settings) -> None:
    assert settings.allow_query_token is False
    running = await start_service(settings.model_copy(update={"api_token": "root-key", "admin_token": "admin-key"}))
    try:
        bearer = {"Authorization": "Bearer root-key"}
        async with running.http(**bearer) as http:
            assert (await http.get("/v1/tombstones")).status_code == 403
        async with running.http(**bearer, **{"X-Admin-Token": "admin-key"}) as http:
            assert (await http.get("/v1/tombstones")).status_code == 200
        async with running.http(**bearer, **{"X-Admin-Api-Key": "admin-key"}) as http:
            assert (await http.get("/v1/tombstones")).status_code == 200
        async with running.http(**bearer, **{"X-Admin-Api-Key": "wrong"}) as http:
            assert (await http.get("/v1/tombstones")).status_code == 403
        async with running.http() as http:
            r = await http.get("/recall", params={"api_key": "root-key"})
            assert r.status_code == 401 and "api_key" in r.json()["error"], r.text
        async with running.client(api_key="root-key") as client:
            request = review_service_pb2.ListTombstonesRequest()
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await client.review.ListTombstones(request, metadata=client.metadata())
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            await client.review.ListTombstones(request, metadata=[*client.metadata(), ("x-admin-api-key", "admin-key")])
    finally:
        await running.runner.stop()


# --- item 5: backdated stores ----------------------------------------------------------


async def test_backdated_store_is_valid_from_its_timestamp(service) -> None:
    past = datetime(2023, 3, 14, 15, 9, 26, tzinfo=UTC)
    async with service.http() as http:
        mid = await _store(http, "Imported with its original date", timestamp=_iso(past), tags=["backdated"])
        memory = (await http.get(f"/memory/{mid}")).json()["memory"]
        assert memory["timestamp"].startswith("2023-03-14T15:09:26") and memory["t_valid"].startswith(
            "2023-03-14T15:09:26"), memory
        # Valid from that date: a read as of a later past time sees it.
        r = await http.get("/memory/by-tag", params={"tags": "backdated", "as_of": "2024-01-01T00:00:00Z"})
        assert [m["id"] for m in r.json()["memories"]] == [mid]
        # An explicit t_valid wins; a future timestamp does not hide the memory until then.
        given = await _store(http, "Explicit window", timestamp=_iso(past), t_valid="2023-06-01T00:00:00Z")
        assert (await http.get(f"/memory/{given}")).json()["memory"]["t_valid"].startswith("2023-06-01")
        future = datetime.now(UTC) + timedelta(days=30)
        ahead = await _store(http, "Planned for next month", timestamp=_iso(future), tags=["backdated-future"])
        got = (await http.get(f"/memory/{ahead}")).json()["memory"]
        assert got["timestamp"][:10] == _iso(future)[:10] and got["t_valid"][:10] == _iso(datetime.now(UTC))[:10], got
        r = await http.get("/memory/by-tag", params={"tags": "backdated-future"})
        assert [m["id"] for m in r.json()["memories"]] == [ahead]
        # Batches follow the same rule.
        r = await http.post("/memory/batch", json={"memories": [{"content": "batch import", "timestamp": _iso(past)}]})
        bid = r.json()["memory_ids"][0]
        assert (await http.get(f"/memory/{bid}")).json()["memory"]["t_valid"].startswith("2023-03-14T15:09:26")


# --- item 6: caller embeddings of the wrong size ---------------------------------------


async def test_caller_embedding_of_the_wrong_size_is_refused_naming_both_sizes(service) -> None:
    size = configured_dimension(service.settings)
    assert size == service.ctx.embedder.dimension
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "wrong-size vector", "embedding": [0.1] * 7})
        assert r.status_code == 400, r.text
        assert "embedding" in r.json()["error"] and "7" in r.json()["error"] and str(size) in r.json()["error"]
        r = await http.post("/memory/batch", json={"memories": [{"content": "ok"},
                                                                {"content": "bad", "embedding": [0.2] * 3}]})
        assert r.status_code == 400 and "memories[1].embedding" in r.json()["error"], r.text
        assert "3" in r.json()["error"] and str(size) in r.json()["error"]
        r = await http.get("/memory/by-tag", params={"tags": "never-stored-wrong-size"})
        assert r.json()["count"] == 0
        # The right size is kept as given.
        vector = [0.0] * size
        vector[0] = 1.0
        mid = await _store(http, "right-size vector", embedding=vector, tags=["right-size"])
        assert mid
        r = await http.get("/recall", params={"embedding": ",".join(["0.5"] * 5)})
        assert r.status_code == 400, r.text
        assert "embedding" in r.json()["error"] and "5" in r.json()["error"] and str(size) in r.json()["error"]
    async with service.client() as client:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.ingest.CreateMemory(ingest_service_pb2.CreateMemoryRequest(
                memory=ingest_service_pb2.MemoryInput(content="grpc wrong size", embedding=[0.1] * 9)))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "embedding" in refused.value.details() and "9" in refused.value.details()
        assert str(size) in refused.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(embedding=[0.1] * 9))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and str(size) in refused.value.details()


# --- item 7: listing and deleting by tag agree -----------------------------------------


async def _tagged_world(http) -> dict[str, str]:
    """Under tag ``agree``: an active memory, a superseded one (its replacement carries the
    tag too), an expired one, and one with another tag only."""
    ids = {"active": await _store(http, "Agree: the active one", tags=["agree"])}
    ids["old"] = await _store(http, "Agree: the first version", tags=["agree"])
    r = await http.post(f"/v1/memories/{ids['old']}:supersede", json={"content": "Agree: the second version",
                                                                        "tags": ["agree"]})
    assert r.status_code == 201, r.text
    ids["new"] = r.json()["memory_id"]
    ids["expired"] = await _store(http, "Agree: expired yesterday", tags=["Agree"],
                                  t_invalid=_iso(datetime.now(UTC) - timedelta(days=1)))
    ids["other"] = await _store(http, "Another tag altogether", tags=["disagree"])
    return ids


async def test_delete_by_tag_preview_lists_what_history_listing_shows_and_delete_removes_exactly_that(
        service) -> None:
    async with service.http() as http:
        ids = await _tagged_world(http)
        current = (await http.get("/memory/by-tag", params={"tags": "agree"})).json()["memories"]
        assert sorted(m["id"] for m in current) == sorted([ids["active"], ids["new"]])
        history = (await http.get("/memory/by-tag", params={"tags": "agree", "state_mode": "history"})).json()
        listed = [m["id"] for m in history["memories"]]
        assert sorted(listed) == sorted([ids["active"], ids["old"], ids["new"], ids["expired"]])

        preview = (await http.delete("/memory/by-tag", params={"tags": "agree", "dry_run": "true"})).json()
        assert preview["dry_run"] is True and preview["deleted_count"] == 0
        assert preview["memory_ids"] == listed  # the same memories, in the listing's order
        assert preview["would_delete_count"] == 4
        states = {m["id"]: m["state"] for m in preview["memories"]}
        assert states == {ids["active"]: "ACTIVE", ids["old"]: "SUPERSEDED", ids["new"]: "ACTIVE",
                          ids["expired"]: "ACTIVE"}
        assert preview["states"] == {"ACTIVE": 3, "SUPERSEDED": 1}
        expired = next(m for m in preview["memories"] if m["id"] == ids["expired"])
        assert expired["t_invalid"]  # the window shows why the current listing hides it

        deleted = (await http.delete("/memory/by-tag", params={"tags": "agree"})).json()
        assert deleted["deleted_count"] == 4 and deleted["memory_ids"] == preview["memory_ids"]
        assert {m["id"]: m["state"] for m in deleted["memories"]} == states
        for mid in preview["memory_ids"]:
            assert (await http.get(f"/memory/{mid}")).status_code == 404
            # A history read by id shows the tombstone (content kept until a purge).
            r = await http.get(f"/memory/{mid}", params={"state_mode": "history"})
            assert r.status_code == 200 and r.json()["memory"]["state"] == "DELETED", r.text
        assert (await http.get(f"/memory/{ids['other']}")).json()["memory"]["state"] == "ACTIVE"
        history = (await http.get("/memory/by-tag", params={"tags": "agree", "state_mode": "history"})).json()
        assert history["memories"] == []
        again = (await http.delete("/memory/by-tag", params={"tags": "agree", "dry_run": "true"})).json()
        assert again["memory_ids"] == [] and again["would_delete_count"] == 0


async def test_delete_by_tag_splits_comma_separated_tags_as_the_listing_does(service) -> None:
    # AutoMem clients send ``tags=a,b``; the listing reads two tags, so the delete must too
    # (a tag may not hold a comma, so "a,b" can name no single tag).
    async with service.http() as http:
        first = await _store(http, "Comma one", tags=["comma-a"])
        second = await _store(http, "Comma two", tags=["comma-b"])
        other = await _store(http, "Comma none", tags=["comma-c"])
        listed = (await http.get("/memory/by-tag", params={"tags": "comma-a,comma-b",
                                                             "state_mode": "history"})).json()
        assert sorted(m["id"] for m in listed["memories"]) == sorted([first, second])
        preview = (await http.delete("/memory/by-tag", params={"tags": "comma-a,comma-b", "dry_run": "true"})).json()
        assert preview["tags"] == ["comma-a", "comma-b"]
        assert preview["memory_ids"] == [m["id"] for m in listed["memories"]]
        deleted = (await http.delete("/memory/by-tag", params={"tags": "comma-a,comma-b"})).json()
        assert deleted["deleted_count"] == 2
        assert (await http.get(f"/memory/{other}")).json()["memory"]["state"] == "ACTIVE"


async def test_delete_by_tag_preview_over_grpc_and_mcp_shows_each_state(service) -> None:
    async with service.http() as http:
        ids = await _tagged_world(http)
    async with service.client() as client:
        preview = await client.ingest.DeleteMemoriesByTag(
            ingest_service_pb2.DeleteMemoriesByTagRequest(tags=["agree"], dry_run=True))
        assert preview.deleted_count == 0 and len(preview.memories) == 4
        assert list(preview.memory_ids) == [m.id for m in preview.memories]
        states = {m.id: m.state for m in preview.memories}
        assert states[ids["old"]] == memory_pb2.MEMORY_STATE_SUPERSEDED
        assert states[ids["active"]] == states[ids["expired"]] == memory_pb2.MEMORY_STATE_ACTIVE
    async with Client(streamable_http_client(service.url + "/mcp", http_client=_mcp_http(service))) as mcp:
        body, text = await _call_tool(mcp, "delete_memory", tags=["agree"])
        assert body["dry_run"] is True and body["would_delete_count"] == 4
        assert {m["id"]: m["state"] for m in body["memories"]}[ids["old"]] == "SUPERSEDED"
        assert "SUPERSEDED" in text and ids["expired"] in text
        body, _ = await _call_tool(mcp, "delete_memory", tags=["agree"], confirm=True,
                                   preview_token=body["preview_token"])
        assert body["deleted_count"] == 4 and sorted(body["memory_ids"]) == sorted(m["id"] for m in body["memories"])
    async with service.http() as http:
        r = await http.get("/memory/by-tag", params={"tags": "agree", "state_mode": "history"})
        assert r.json()["memories"] == []


# --- item 4: the response fields AutoMem's clients read --------------------------------

# ../shared/AUTOMEM_API.md, "Response fields the real client reads from GET /recall" (as
# observed from mcp-automem v0.15), copied here so the test runs on a fresh clone.
RECALL_RESULT_FIELDS = ("id", "final_score", "score", "match_type", "match_score", "relation_score",
                        "score_components", "source", "relations", "related_to", "deduped_from",
                        "expanded_from_entity", "outside_tag_scope", "jit_enriched", "state_replaces")
RECALL_MEMORY_FIELDS = ("content", "summary", "tags", "importance", "timestamp", "created_at", "updated_at",
                        "metadata", "type", "confidence", "last_accessed")
RECALL_TOP_FIELDS = ("count", "dedup_removed", "query", "sort", "keywords", "time_window", "tags", "exclude_tags",
                     "tag_mode", "tag_match", "state_mode", "tag_scope", "scope_fallback", "recency_bias",
                     "score_filter", "queries", "vector_search", "jit_enriched_count", "query_time_ms", "entities",
                     "expansion", "entity_expansion", "context_priority", "state_filter")
#: Fields AutoMem only sends for features this service does not have, and why (the client
#: reads each as optional). docs/automem-compat.md lists them too.
NOT_APPLICABLE = {
    "deduped_from": "hits of several queries are merged by id before ranking; no per-source record",
    "expanded_from_entity": "entity expansion hits carry match_type 'entity' and their seed in relations",
    "outside_tag_scope": "no scope_fallback: a tag filter is a hard filter",
    "scope_fallback": "no scope_fallback: a tag filter is a hard filter",
    "jit_enriched": "no just-in-time enrichment: an unembedded memory is recallable through the lexical arm",
    "jit_enriched_count": "no just-in-time enrichment",
    "entities": "entity identity records (AutoMem's identity synthesis) are not kept",
    "context_priority": "context hints boost scores; no language/context profile is detected",
}


async def test_recall_answers_every_field_automem_clients_read(service) -> None:
    async with service.http() as http:
        ledger = await _store(http, "The ledger service keeps every invoice", tags=["contract"])
        nightly = await _store(http, "Nightly reconciliation job compares bank exports")
        r = await http.post("/associate", json={"memory1_id": ledger, "memory2_id": nightly, "type": "RELATES_TO",
                                                "strength": 0.8})
        assert r.status_code == 201, r.text
        old = await _store(http, "Billing runs on MySQL five seven", tags=["contract"])
        r = await http.post(f"/v1/memories/{old}:supersede", json={"content": "Billing moved to managed Postgres",
                                                                     "tags": ["later"]})
        new = r.json()["memory_id"]
        await _store(http, "The ledger secret rotation schedule", tags=["contract", "secret"])
        r = await http.get("/recall", params={
            "query": "mysql ledger", "tags": "contract", "exclude_tags": "secret", "expand_relations": "true",
            "expand_entities": "true", "min_score": "0.000001", "state_debug": "true", "limit": 10})
        assert r.status_code == 200, r.text
        body = r.json()
    by_id = {x["id"]: x for x in body["results"]}
    assert set(by_id) == {ledger, nightly, new}, body["results"]

    for name in RECALL_TOP_FIELDS:
        assert name in body or name in NOT_APPLICABLE, name
    assert body["state_filter"]["suppressed_count"] >= 1 and body["state_filter"]["replacement_count"] == 1
    assert body["state_filter"]["current_only"] is True
    assert {"id": old, "reason": "superseded", "replacement_id": new} in body["state_filter"]["suppressed"]
    assert body["state_filter"]["replacements"][0]["replaces_id"] == old
    assert body["state_filter"]["suppressed_count"] == len(body["state_filter"]["suppressed"])
    assert new not in [s["id"] for s in body["state_filter"]["suppressed"]]  # shown, so not suppressed
    assert body["exclude_tags"] == ["secret"] and body["queries"] == ["mysql ledger"]
    assert body["score_filter"]["min_score"] == 0.000001 and "filtered_count" in body["score_filter"]
    assert body["expansion"]["enabled"] and body["expansion"]["expanded_count"] == 1
    assert body["expansion"]["seed_count"] >= 1 and body["expansion"]["relation_limit"] == 5
    assert body["entity_expansion"]["enabled"] and "entities_found" in body["entity_expansion"]
    assert body["keywords"] == ["mysql", "ledger"] and body["tag_scope"]["filtered"] is True
    assert body["count"] == 3 and body["vector_search"]["enabled"] in (True, False)

    for result in body["results"]:
        for name in ("id", "final_score", "score", "match_type", "match_score", "score_components", "source"):
            assert name in result, (name, result)
        for name in RECALL_MEMORY_FIELDS:
            assert name in result["memory"], (name, result["memory"])
    expanded = by_id[nightly]
    assert expanded["match_type"] == "relation" and expanded["source"] == "graph"
    assert expanded["relations"] == expanded["related_to"] == [{"type": "RELATES_TO", "strength": 0.8,
                                                                 "from": ledger}]
    assert expanded["relation_score"] == expanded["score"]
    replacement = by_id[new]
    assert replacement["match_type"] == "state_replacement"
    assert replacement["state_replaces"] == replacement["replaces_id"] == old
    assert replacement["relations"][0]["from"] == old and replacement["relations"][0]["type"] == "INVALIDATED_BY"
    covered = {"relation_score", "relations", "related_to", "state_replaces"}
    for name in RECALL_RESULT_FIELDS:
        assert name in covered or name in NOT_APPLICABLE or all(name in x for x in body["results"]), name
