"""The graph and entity API (issue 13 items 9, 10, 12): AutoMem's ``/graph/*``, ``/entities``,
``/entity/{slug}`` and merge routes (verygoodplugins/automem automem/api/graph.py,
automem/api/entity.py), their gRPC reads and MCP tools, against a real running automem.

One contract test per route: the fields AutoMem's clients read are present; another scope's
memories and entities never appear; a superseded memory is a node styled as superseded with
its head; bounds answer 400 naming the field; a merge is audited and undone exactly."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import grpc
import pytest

from automem.v1 import recall_service_pb2, review_service_pb2
from tests.conftest import eventually, fresh_scope

NODE_FIELDS = {"id", "content", "type", "importance", "confidence", "tags", "timestamp", "updated_at", "metadata",
               "color", "radius", "opacity", "state", "is_current", "current_id", "style"}
EDGE_FIELDS = {"id", "source", "target", "type", "strength", "color"}
ENTITY_FIELDS = {"id", "slug", "category", "name", "aliases", "reference_count", "merged_into", "tag"}


async def _store(http, content: str, **extra) -> str:
    r = await http.post("/memory", json={"content": content, **extra})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _associate(http, a: str, b: str, kind: str = "RELATES_TO") -> None:
    r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": kind, "strength": 0.7})
    assert r.status_code in (200, 201), r.text


def _bad(r, name: str) -> None:
    assert r.status_code == 400, r.text
    assert name in r.text, r.text


async def _graph_with_history(service, http) -> dict[str, str]:
    """a -RELATES_TO-> b -LEADS_TO-> c; old superseded by new (EVOLVED_INTO); another scope's
    memory with the same words."""
    ids = {"a": await _store(http, "Graph view anchor: the billing service owns invoices.", importance=0.9,
                             type="Decision"),
           "b": await _store(http, "Graph view neighbour: invoices are rendered by the PDF worker.", importance=0.6),
           "c": await _store(http, "Graph view second hop: the PDF worker runs on the batch queue.", importance=0.3),
           "old": await _store(http, "Graph view old rule: invoices are emailed on Fridays.", importance=0.8)}
    await _associate(http, ids["a"], ids["b"])
    await _associate(http, ids["b"], ids["c"], "LEADS_TO")
    await _associate(http, ids["a"], ids["old"])
    r = await http.post("/memory", json={"content": "Graph view new rule: invoices are emailed on Mondays.",
                                         "importance": 0.8, "supersedes_memory_id": ids["old"],
                                         "supersede_relation": "EVOLVED_INTO"})
    assert r.status_code == 201, r.text
    ids["new"] = r.json()["memory_id"]
    other = fresh_scope()
    async with service.http(**{"X-Automem-Scope": other}) as foreign:
        ids["foreign"] = await _store(foreign, "Graph view anchor: the billing service owns invoices.",
                                      importance=1.0)
    return ids


async def test_graph_snapshot_contract(service) -> None:
    async with service.http() as http:
        ids = await _graph_with_history(service, http)
        r = await http.get("/graph/snapshot")
        assert r.status_code == 200, r.text
        body = r.json()
        nodes = {n["id"]: n for n in body["nodes"]}
        assert set(nodes) == {ids[k] for k in ("a", "b", "c", "old", "new")}  # never the other scope's
        for node in nodes.values():
            assert NODE_FIELDS <= set(node), set(NODE_FIELDS) - set(node)
        # most important first
        assert body["nodes"][0]["id"] == ids["a"]
        old = nodes[ids["old"]]
        assert old["style"] == "superseded" and old["is_current"] is False and old["current_id"] == ids["new"]
        assert old["state"] == "SUPERSEDED" and old["opacity"] < nodes[ids["new"]]["opacity"]
        assert nodes[ids["new"]]["style"] == "current" and nodes[ids["new"]]["is_current"] is True
        edges = {(e["source"], e["type"], e["target"]) for e in body["edges"]}
        assert (ids["a"], "RELATES_TO", ids["b"]) in edges and (ids["old"], "EVOLVED_INTO", ids["new"]) in edges
        for edge in body["edges"]:
            assert EDGE_FIELDS <= set(edge)
        assert body["stats"]["total_nodes"] == 5 and body["stats"]["returned_nodes"] == 5
        assert body["stats"]["sampled"] is False and body["stats"]["total_edges"] >= 4
        assert {"type_colors", "relation_colors", "query_time_ms"} <= set(body["meta"])
        # filters: limit, min_importance, types
        r = await http.get("/graph/snapshot", params={"limit": 2})
        assert [n["id"] for n in r.json()["nodes"]][:1] == [ids["a"]] and r.json()["stats"]["sampled"] is True
        r = await http.get("/graph/snapshot", params={"min_importance": 0.7})
        assert {n["id"] for n in r.json()["nodes"]} == {ids["a"], ids["old"], ids["new"]}
        # A filter leaves memories out, the limit did not: not sampled (it said true, ratio 0.6).
        assert r.json()["stats"]["sampled"] is False, r.json()["stats"]
        r = await http.get("/graph/snapshot", params={"limit": 5})
        assert r.json()["stats"]["sampled"] is False and r.json()["stats"]["returned_nodes"] == 5
        r = await http.get("/graph/snapshot", params={"types": "Decision"})
        assert [n["id"] for n in r.json()["nodes"]] == [ids["a"]]
        r = await http.get("/graph/snapshot", params={"since": "2999-01-01T00:00:00Z"})
        assert r.json()["nodes"] == []
        # bounds: 400 naming the field
        _bad(await http.get("/graph/snapshot", params={"limit": 0}), "limit")
        _bad(await http.get("/graph/snapshot", params={"limit": 5001}), "limit")
        _bad(await http.get("/graph/snapshot", params={"min_importance": 2}), "min_importance")
        _bad(await http.get("/graph/snapshot", params={"types": "NoSuchType"}), "types")
        _bad(await http.get("/graph/snapshot", params={"since": "not a time"}), "since")


async def test_graph_neighbors_contract(service) -> None:
    async with service.http() as http:
        ids = await _graph_with_history(service, http)
        r = await http.get(f"/graph/neighbors/{ids['a']}", params={"include_semantic": "false"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["center"]["id"] == ids["a"] and NODE_FIELDS <= set(body["center"])
        # Enrichment may add PRECEDED_BY / SIMILAR_TO edges at any moment: the authored ones
        # must be there, and nothing of another scope ever is.
        near = {n["id"]: n for n in body["graph_neighbors"]}
        assert {ids["b"], ids["old"]} <= set(near) and all(n["depth"] == 1 for n in near.values())
        assert ids["foreign"] not in near
        assert near[ids["old"]]["style"] == "superseded" and near[ids["old"]]["current_id"] == ids["new"]
        assert near[ids["b"]]["style"] == "current"
        assert body["semantic_neighbors"] == [] and body["meta"]["depth"] == 1
        # A neighbour that expired, or is not valid yet, is not current; it was drawn "superseded".
        for when in ({"t_valid": "2020-01-01T00:00:00Z", "t_invalid": "2021-01-01T00:00:00Z"},
                     {"t_valid": "2999-01-01T00:00:00Z"}):
            other = await _store(http, f"Graph view neighbour outside its window {when}.", **when)
            await _associate(http, ids["a"], other)
            r = await http.get(f"/graph/neighbors/{ids['a']}", params={"include_semantic": "false",
                                                                        "state_mode": "history"})
            node = {n["id"]: n for n in r.json()["graph_neighbors"]}[other]
            assert node["style"] == "not_current" and node["is_current"] is False, node
        edges = {(e["source"], e["type"], e["target"]) for e in body["edges"]}
        assert {(ids["a"], "RELATES_TO", ids["b"]), (ids["a"], "RELATES_TO", ids["old"])} <= edges
        assert all(e["source"] == ids["a"] or e["target"] == ids["a"] for e in body["edges"])
        for edge in body["edges"]:
            assert EDGE_FIELDS <= set(edge)
        r = await http.get(f"/graph/neighbors/{ids['a']}", params={"depth": 2, "include_semantic": "false"})
        deep = {n["id"]: n["depth"] for n in r.json()["graph_neighbors"]}
        assert deep[ids["b"]] == 1 and deep[ids["old"]] == 1 and deep[ids["c"]] <= 2 and deep[ids["new"]] <= 2
        assert ids["foreign"] not in deep and max(deep.values()) <= 2

        async def embedded():
            r = await http.get(f"/memory/{ids['c']}")
            return r.json()["memory"]["embedding_status"] == "done" or None
        await eventually(embedded, timeout=60)
        r = await http.get(f"/graph/neighbors/{ids['a']}", params={"semantic_limit": 3})
        semantic = r.json()["semantic_neighbors"]
        assert semantic and all("similarity" in n for n in semantic)
        assert ids["foreign"] not in {n["id"] for n in semantic}  # same words, other scope
        assert not {n["id"] for n in semantic} & {ids["b"], ids["old"], ids["a"]}
        _bad(await http.get(f"/graph/neighbors/{ids['a']}", params={"depth": 4}), "depth")
        _bad(await http.get(f"/graph/neighbors/{ids['a']}", params={"semantic_limit": 21}), "semantic_limit")
        r = await http.get(f"/graph/neighbors/{ids['foreign']}")
        assert r.status_code == 404, r.text  # another scope's memory does not exist here


async def test_graph_stats_types_relations_contract(service) -> None:
    async with service.http() as http:
        ids = await _graph_with_history(service, http)
        r = await http.get("/graph/stats")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["totals"] == {"nodes": 5, "edges": body["totals"]["edges"]} and body["totals"]["edges"] >= 4
        assert body["by_type"]["Decision"] == 1 and body["by_state"] == {"ACTIVE": 4, "SUPERSEDED": 1}
        assert body["by_relationship"]["RELATES_TO"] == 2 and body["by_relationship"]["EVOLVED_INTO"] == 1
        assert body["importance_distribution"] == {"high": 3, "medium": 1, "low": 1}
        assert sum(d["count"] for d in body["recent_activity"]) == 5 and ids
        assert {"date", "count"} <= set(body["recent_activity"][0])
        r = await http.get("/graph/types")
        assert r.status_code == 200 and "Decision" in r.json()["types"] and "Decision" in r.json()["colors"]
        r = await http.get("/graph/relations")
        assert "RELATES_TO" in r.json()["relations"] and "SIMILAR_TO" in r.json()["colors"]


async def _entities_ready(http, mids: list[str]) -> bool:
    for mid in mids:
        r = await http.get(f"/memory/{mid}")
        if r.json()["memory"]["enrichment_status"] != "done":
            return False
    return True


async def test_entities_list_get_candidates_merge_and_undo(service) -> None:
    graph = service.ctx.graph
    async with service.http() as http:
        both = await _store(http, "We moved from Postgres 15 to PostgreSQL 16 on the billing cluster.")
        long_only = await _store(http, "PostgreSQL replication lag is watched by the on-call engineer.")
        short_only = await _store(http, "Postgres backups run nightly at two o'clock.")
        async with service.http(**{"X-Automem-Scope": fresh_scope()}) as foreign:
            other = await _store(foreign, "Postgres in another team's scope, and PostgreSQL too.")
            await eventually(lambda: _entities_ready(foreign, [other]), timeout=60)
        await eventually(lambda: _entities_ready(http, [both, long_only, short_only]), timeout=60)

        r = await http.get("/entities")
        assert r.status_code == 200, r.text
        entities = {e["id"]: e for e in r.json()["entities"]}
        assert r.json()["count"] == len(entities)
        for entity in entities.values():
            assert ENTITY_FIELDS <= set(entity)
        # scoped: the other scope's mentions are not counted
        assert entities["tool:postgres"]["reference_count"] == 2
        assert entities["tool:postgresql"]["reference_count"] == 2
        r = await http.get("/entities", params={"category": "tool"})
        assert {e["category"] for e in r.json()["entities"]} == {"tool"}
        _bad(await http.get("/entities", params={"limit": 501}), "limit")
        _bad(await http.get("/entities", params={"limit": 0}), "limit")
        # A category that is no kind is refused naming it: it listed nothing (200), and a
        # merge naming it answered 404 on the slug.
        assert (await http.get("/entities", params={"category": " TOOL "})).json()["entities"]
        _bad(await http.get("/entities", params={"category": "tools"}), "category")
        _bad(await http.get("/entity/postgres", params={"category": "tools"}), "category")
        _bad(await http.post("/entity/postgres/merge", json={"merge_into": "postgresql", "category": "tools"}),
             "category")

        r = await http.get("/entity/postgres")
        assert r.status_code == 200, r.text
        assert r.json()["entity"]["id"] == "tool:postgres"
        assert {m["id"] for m in r.json()["memories"]} == {both, short_only}
        assert (await http.get("/entity/tool:postgresql")).json()["entity"]["slug"] == "postgresql"
        # The tag form /entities answers (``entity:<kind>:<slug>``) names it too.
        assert (await http.get("/entity/entity:tool:postgresql")).json()["entity"]["slug"] == "postgresql"
        assert (await http.get("/entity/no-such-entity")).status_code == 404
        # Compared as enrichment writes slugs (NFKC, lower-case): full-width or decomposed
        # letters name the same entity (they were 404).
        r = await http.get("/entity/TOOL:\uff30\uff4f\uff53\uff54\uff47\uff52\uff45\uff33\uff31\uff2c")
        assert r.status_code == 200 and r.json()["entity"]["slug"] == "postgresql", r.text

        r = await http.get("/entities/merge-candidates")
        assert r.status_code == 200, r.text
        [pair] = [c for c in r.json()["candidates"] if {c["entity_a"], c["entity_b"]} == {"tool:postgres",
                                                                                         "tool:postgresql"}]
        assert pair["canonical"] == "tool:postgresql" and pair["alias"] == "tool:postgres"
        assert {"confidence", "reason", "auto_merge"} <= set(pair)

        _bad(await http.post("/entity/postgres/merge", json={}), "merge_into")
        r = await http.post("/entity/postgres/merge", json={"merge_into": "postgresql", "reason": "same database"})
        assert r.status_code == 200, r.text
        merge = r.json()["merge"]
        assert merge["canonical"] == "tool:postgresql" and merge["alias"] == "tool:postgres"
        assert merge["edges_moved"] == 2 and merge["actor"] and merge["undone"] is False
        r = await http.get("/entity/postgresql")
        assert {m["id"] for m in r.json()["memories"]} == {both, long_only, short_only}
        assert "postgres" in r.json()["entity"]["aliases"] and r.json()["entity"]["reference_count"] == 3
        r = await http.get("/entity/postgres")  # the merged slug answers as the entity it went into
        assert r.json()["entity"]["id"] == "tool:postgresql"
        assert "tool:postgres" not in {e["id"] for e in (await http.get("/entities")).json()["entities"]}
        assert (await http.post("/entity/postgres/merge", json={"merge_into": "postgresql"})).status_code == 409
        # a mention enrichment writes after the merge (to the merged entity) counts for the kept one
        late = await _store(http, "Postgres vacuum settings were tuned for the ledger tables.")
        await eventually(lambda: _entities_ready(http, [late]), timeout=60)
        r = await http.get("/entity/postgresql")
        assert {m["id"] for m in r.json()["memories"]} == {both, long_only, short_only, late}
        assert r.json()["entity"]["reference_count"] == 4

        # audited: the record names who, when, why and what moved
        r = await http.get("/entities/merges")
        [record] = r.json()["merges"]
        assert record["id"] == merge["id"] and record["reason"] == "same database" and record["created_at"]
        assert sorted(record["memory_ids"]) == sorted([both, short_only])

        # undone from the record: edges and aliases exactly as before
        r = await http.post(f"/entities/merges/{merge['id']}/undo")
        assert r.status_code == 200, r.text
        assert r.json()["merge"]["undone"] is True and r.json()["merge"]["undone_at"]
        r = await http.get("/entity/postgres")
        assert r.json()["entity"]["id"] == "tool:postgres"
        assert {m["id"] for m in r.json()["memories"]} == {both, short_only, late}
        r = await http.get("/entity/postgresql")
        assert {m["id"] for m in r.json()["memories"]} == {both, long_only} and r.json()["entity"]["aliases"] == []
        rows = await graph.ro_query(
            "MATCH (m:Memory)-[:MENTIONS]->(e:Entity) WHERE m.scope = $scope AND e.name STARTS WITH 'postgres' "
            "RETURN m.id, e.name ORDER BY m.id, e.name", {"scope": service.scope})
        assert sorted((r[0], r[1]) for r in rows) == sorted(
            [(both, "postgres"), (both, "postgresql"), (long_only, "postgresql"), (short_only, "postgres"),
             (late, "postgres")])
        assert (await http.post(f"/entities/merges/{merge['id']}/undo")).status_code == 409


async def test_graph_and_entity_reads_on_grpc(service) -> None:
    async with service.http() as http:
        ids = await _graph_with_history(service, http)
    client = service.client()
    try:
        snap = await client.recall.GetGraphSnapshot(recall_service_pb2.GetGraphSnapshotRequest())
        old = {n.memory.id: n for n in snap.nodes}[ids["old"]]
        assert not old.is_current and old.current_id == ids["new"] and ids["foreign"] not in {
            n.memory.id for n in snap.nodes}
        near = await client.recall.ListGraphNeighbors(recall_service_pb2.ListGraphNeighborsRequest(
            id=ids["a"], depth=3, include_semantic=False))
        assert {n.memory.id for n in near.graph_neighbors} == {ids[k] for k in ("b", "c", "old", "new")}
        assert {n.memory.id: n.is_current for n in near.graph_neighbors}[ids["old"]] is False
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.recall.ListGraphNeighbors(recall_service_pb2.ListGraphNeighborsRequest(id=ids["a"], depth=4))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "depth" in err.value.details()
        stats = await client.recall.GetGraphStats(recall_service_pb2.GetGraphStatsRequest())
        assert stats.total_nodes == 5
        listed = await client.recall.ListEntities(recall_service_pb2.ListEntitiesRequest())
        assert list(listed.entities) == [] or all(e.id for e in listed.entities)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.recall.ListEntities(recall_service_pb2.ListEntitiesRequest(limit=501))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit" in err.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.review.MergeEntities(review_service_pb2.MergeEntitiesRequest(slug="x", merge_into="y"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND and "slug" in err.value.details()
        # Mentions have no history: a past known_at is refused, not answered with the mentions
        # of now (break-it review); now, or no known_at, reads as before.
        from google.protobuf import timestamp_pb2

        past = timestamp_pb2.Timestamp(seconds=int(time.time()) - 3600)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.recall.GetEntity(recall_service_pb2.GetEntityRequest(
                slug="anything", read=recall_service_pb2.ReadOptions(known_at=past)))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "read.known_at" in err.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.recall.GetEntity(recall_service_pb2.GetEntityRequest(slug="anything"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await client.close()


async def test_entity_merge_needs_admin(own_service) -> None:
    from automem.common.keys import KeyStore

    store = KeyStore(own_service.ctx.graph)
    writer, _ = await store.create("writer", ["*"], "default")
    async with own_service.http(authorization=f"Bearer {writer}") as http:
        r = await http.post("/entity/postgres/merge", json={"merge_into": "postgresql"})
        assert r.status_code == 403, r.text
        assert (await http.get("/entities/merges")).status_code == 403
        assert (await http.get("/entities")).status_code == 200
        assert (await http.get("/graph/types")).status_code == 200
    async with own_service.http() as anonymous:  # keys exist: no key, no answer, even without a store read
        for path in ("/graph/types", "/graph/relations", "/graph/snapshot", "/entities"):
            assert (await anonymous.get(path)).status_code == 401, path


async def test_graph_and_entity_mcp_tools(service) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with service.http() as http:
        ids = await _graph_with_history(service, http)
        tool_mid = await _store(http, "Our deploys use Kubernetes and Terraform for the billing cluster.")
        await eventually(lambda: _entities_ready(http, [tool_mid]), timeout=60)
    headers = {"X-Automem-Scope": service.scope}
    async with Client(streamable_http_client(service.url + "/mcp",
                                             http_client=create_mcp_http_client(headers=headers))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["graph_snapshot"].annotations.read_only_hint is True
        assert tools["merge_entities"].annotations.destructive_hint is True

        async def call(tool: str, **arguments):
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content[0].text
            return result.structured_content

        snap = await call("graph_snapshot")
        nodes = {n["id"]: n for n in snap["nodes"]}
        assert nodes[ids["old"]]["style"] == "superseded" and ids["foreign"] not in nodes
        near = await call("graph_neighbors", memory_id=ids["a"], depth=2, include_semantic=False)
        assert ids["c"] in {n["id"] for n in near["graph_neighbors"]}
        assert (await call("graph_stats"))["totals"]["nodes"] == 6
        entities = await call("list_entities", category="tool")
        assert {"tool:kubernetes", "tool:terraform"} <= {e["id"] for e in entities["entities"]}
        got = await call("get_entity", slug="kubernetes")
        assert [m["id"] for m in got["memories"]] == [tool_mid]
        merged = await call("merge_entities", slug="terraform", merge_into="kubernetes", reason="test")
        assert merged["merge"]["edges_moved"] == 1
        undone = await call("merge_entities", undo_merge_id=merged["merge"]["id"])
        assert undone["merge"]["undone"] is True
        result = await client.call_tool("graph_neighbors", {"memory_id": ids["a"], "depth": 4})
        assert result.is_error and "depth" in result.content[0].text


async def test_graph_views_never_show_or_walk_through_deleted_memories(service) -> None:
    async with service.http() as http:
        x = await _store(http, "Kestrel firmware ships on the third Tuesday.", tags=["walk-x"])
        y = await _store(http, "The cafeteria serves lentil soup on rainy days.", tags=["walk-y"])
        z = await _store(http, "Quarterly tax filings go to the accountant in Lyon.", tags=["walk-z"])
        await _associate(http, x, y)
        await _associate(http, y, z)
        r = await http.get(f"/graph/neighbors/{x}", params={"depth": 2, "include_semantic": "false"})
        assert {y, z} <= {n["id"] for n in r.json()["graph_neighbors"]}
        assert (await http.delete(f"/memory/{y}")).status_code == 200
        r = await http.get(f"/graph/neighbors/{x}", params={"depth": 2, "include_semantic": "false"})
        reached = {n["id"] for n in r.json()["graph_neighbors"]}
        assert y not in reached and z not in reached, reached
        assert all(y not in (e["source"], e["target"]) for e in r.json()["edges"])
        r = await http.get("/graph/snapshot")
        assert y not in {n["id"] for n in r.json()["nodes"]}
        assert all(y not in (e["source"], e["target"]) for e in r.json()["edges"])
        assert (await http.get(f"/graph/neighbors/{y}")).status_code == 404


async def test_undoing_merges_keeps_the_other_merges_and_edits_and_goes_in_reverse_order(service) -> None:
    """An undo restored the canonical entity's alias list as it was at its merge, so undoing
    the first of two merges into one entity dropped the second's alias; it moved back a
    memory edited since to name the canonical entity; and undoing a merge whose canonical
    entity was merged on since put the moved memories on both entities."""
    graph = service.ctx.graph

    async def mentions(mid: str) -> set[str]:
        rows = await graph.ro_query("MATCH (m:Memory {id: $id})-[:MENTIONS]->(e:Entity) RETURN e.name", {"id": mid})
        return {r[0] for r in rows}

    async def enriched(http, *texts: str) -> list[str]:
        ids = [await _store(http, text) for text in texts]
        await eventually(lambda: _entities_ready(http, ids), timeout=60)
        return ids

    async def merged(http, alias: str, canonical: str) -> dict:
        return (await http.post(f"/entity/{alias}/merge", json={"merge_into": canonical})).json()["merge"]

    async with service.http() as http:
        lab, hub, _git = await enriched(http, "GitLab runs our CI pipelines.", "GitHub hosts the public mirror.",
                                        "Git is our version control system.")
        first, second = await merged(http, "gitlab", "git"), await merged(http, "github", "git")
        assert {"gitlab", "github"} <= set((await http.get("/entity/git")).json()["entity"]["aliases"])
        # The GitLab memory is edited to name Git; enrichment links it to git again.
        r = await http.patch(f"/memory/{lab}", json={"content": "Git and nothing else runs our CI pipelines."})
        assert r.status_code == 200, r.text

        async def relinked() -> bool:
            memory = (await http.get(f"/memory/{lab}")).json()["memory"]
            return memory["enrichment_status"] == "done" and "gitlab" not in json.dumps(memory["entities"]).lower()
        await eventually(relinked, timeout=60)

        assert (await http.post(f"/entities/merges/{first['id']}/undo")).status_code == 200
        entity = (await http.get("/entity/git")).json()["entity"]
        assert "github" in entity["aliases"] and "gitlab" not in entity["aliases"], entity
        assert "git" in await mentions(lab) and "gitlab" not in await mentions(lab)
        assert "git" in await mentions(hub) and "github" not in await mentions(hub)  # still merged by the second
        assert (await http.post(f"/entities/merges/{second['id']}/undo")).status_code == 200
        assert "github" in await mentions(hub) and "git" not in await mentions(hub)
        assert (await http.get("/entity/git")).json()["entity"]["aliases"] == []

        # A chain: jenkins -> circleci, then circleci -> bazel; the first is undone last.
        jen, cci, baz = await enriched(http, "Jenkins builds the nightly release.", "CircleCI builds every push.",
                                       "Bazel builds the monorepo.")
        inner, outer = await merged(http, "jenkins", "circleci"), await merged(http, "circleci", "bazel")
        r = await http.post(f"/entities/merges/{inner['id']}/undo")
        assert r.status_code == 409 and outer["id"] in r.json()["error"], r.text
        assert (await http.post(f"/entities/merges/{outer['id']}/undo")).status_code == 200
        assert (await http.post(f"/entities/merges/{inner['id']}/undo")).status_code == 200
        names = {"jenkins", "circleci", "bazel"}
        assert [await mentions(m) & names for m in (jen, cci, baz)] == [{"jenkins"}, {"circleci"}, {"bazel"}]


async def test_a_snapshot_at_known_at_shows_a_memory_deleted_since(service) -> None:
    """Break-it review: ``/graph/snapshot?known_at=T`` picked nodes by their state now, so a
    memory deleted after T was missing, while recall, by-tag, get and neighbours at T showed
    it. The snapshot reads the memories deleted since T too."""
    import asyncio

    async with service.http() as http:
        kept = await _store(http, "The zebu herd grazes on the east field")
        gone = await _store(http, "The zebu herd moves to the west field in May")
        await asyncio.sleep(0.05)
        then = datetime.now(UTC).isoformat()
        await asyncio.sleep(0.05)
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        late = await _store(http, "The zebu herd was sold in June")
        now_ids = {n["id"] for n in (await http.get("/graph/snapshot")).json()["nodes"]}
        assert now_ids == {kept, late}, now_ids
        r = await http.get("/graph/snapshot", params={"known_at": then})
        assert r.status_code == 200, r.text
        assert {n["id"] for n in r.json()["nodes"]} == {kept, gone}, r.json()["nodes"]


async def test_reads_at_known_at_leave_out_edges_created_after_it(service) -> None:
    """Break-it review: at ``known_at=T`` the graph snapshot, neighbours, related memories and
    recall's relation expansions walked edges created after T (an association made later
    showed up at T), and the snapshot's totals counted the memories and edges of now. An
    edge is known from its ``create_time``; the totals at T count the memories believed then
    (one deleted since included, later ones not) and the edges known then among them."""
    import asyncio

    async with service.http() as http:
        heron = await _store(http, "The heron nests by the old mill pond")
        invoices = await _store(http, "Quarterly invoices are due on the fifth working day")
        dropped = await _store(http, "A rowing club meets on Thursdays")
        await asyncio.sleep(0.05)
        then = datetime.now(UTC).isoformat()
        await asyncio.sleep(0.05)
        await _associate(http, heron, invoices)
        assert (await http.delete(f"/memory/{dropped}")).status_code == 200
        await _store(http, "The bakery opens at six")
        await _store(http, "The ferry timetable changed in spring")

        def relates(edges: list[dict]) -> list[dict]:
            return [e for e in edges if e["type"] == "RELATES_TO"]

        now = (await http.get("/graph/snapshot")).json()
        assert relates(now["edges"]) and now["stats"]["total_nodes"] == 4, now["stats"]
        r = await http.get("/graph/snapshot", params={"known_at": then})
        assert r.status_code == 200, r.text
        past = r.json()
        assert {n["id"] for n in past["nodes"]} == {heron, invoices, dropped}, past["nodes"]
        assert relates(past["edges"]) == [], past["edges"]
        assert past["stats"]["total_nodes"] == 3, past["stats"]
        assert past["stats"]["total_edges"] == len(past["edges"]), past["stats"]

        params = {"include_semantic": "false"}
        now = (await http.get(f"/graph/neighbors/{heron}", params=params)).json()
        assert relates(now["edges"]), now
        past = (await http.get(f"/graph/neighbors/{heron}", params={**params, "known_at": then})).json()
        assert relates(past["edges"]) == [], past

        def related_by(body: dict) -> set[str]:
            return {m["id"] for m in body["related_memories"]}

        types = {"relationship_types": "RELATES_TO"}
        assert related_by((await http.get(f"/memories/{heron}/related", params=types)).json()) == {invoices}
        r = await http.get(f"/memories/{heron}/related", params={**types, "known_at": then})
        assert r.status_code == 200 and related_by(r.json()) == set(), r.text

        query = {"query": "heron mill pond", "limit": 1, "expand_relations": "true", "expand_entities": "false"}
        expanded = (await http.get("/recall", params=query)).json()["results"]
        assert invoices in {m["id"] for m in expanded}, expanded
        expanded = (await http.get("/recall", params={**query, "known_at": then})).json()["results"]
        assert invoices not in {m["id"] for m in expanded}, expanded


async def test_read_routes_refuse_a_time_they_do_not_read(service) -> None:
    """Break-it review: ``/entity/{slug}?known_at=T`` answered with the mentions of now, as
    if of T: a lenient AutoMem read route ignored the service's own read options. Such a
    route refuses known_at, as_of, version, include_archived and include_pending when it
    does not read them (400 naming the parameter), still ignores other names as AutoMem
    does, and the routes that read them answer as before."""

    then = datetime.now(UTC).isoformat()
    async with service.http() as http:
        mid = await _store(http, "Ravens visit the orchard every morning")
        for path, name, value in (("/entity/orchard", "known_at", then), ("/graph/stats", "as_of", then),
                                  ("/entities", "include_archived", "true"), ("/analyze", "version", "2"),
                                  ("/graph/types", "include_pending", "true")):
            r = await http.get(path, params={name: value})
            assert r.status_code == 400 and r.json()["error"].startswith(f"{name}:"), (path, r.text)
            r = await http.get(path, params={"format": "json"})  # other names: ignored, as AutoMem does
            assert r.status_code in (200, 404), (path, r.text)
        assert (await http.get(f"/memory/{mid}", params={"known_at": then})).status_code == 404
        # Given twice it was read as its last value; refused now, as on the strict routes.
        r = await http.get(f"/memory/{mid}", params=[("known_at", then), ("known_at", "2030-01-01T00:00:00Z")])
        assert r.status_code == 400 and r.json()["error"].startswith("known_at: given more than once"), r.text
        assert (await http.get(f"/memory/{mid}", params={"version": 1})).status_code == 200
        later = datetime.now(UTC).isoformat()
        r = await http.get(f"/memories/{mid}/related", params={"known_at": later})
        assert r.status_code == 200, r.text
        r = await http.get("/graph/snapshot", params={"as_of": then, "include_archived": "true"})
        assert r.status_code == 200, r.text


async def test_entities_no_live_memory_mentions_are_not_listed(service) -> None:
    """Break-it review: /entities listed entities with reference_count 0 once the memories that
    mentioned them were deleted. Such an entity is no longer listed; one still mentioned is."""
    async with service.http() as http:
        kept = await _store(http, "Grace Hopper reviewed the compiler design in Boston.")
        gone = await _store(http, "Ada Lovelace wrote notes on the analytical engine in London.")
        await eventually(lambda: _entities_ready(http, [kept, gone]), timeout=60)

        async def listed() -> dict[str, int]:
            return {e["name"].lower(): e["reference_count"] for e in (await http.get("/entities")).json()["entities"]}

        before = await listed()
        assert before.get("ada lovelace") == 1 and before.get("grace hopper") == 1, before
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        after = await listed()
        assert "ada lovelace" not in after and "london" not in after and after.get("grace hopper") == 1, after
        assert 0 not in after.values(), after


async def test_entities_count_only_the_current_mentions_entity_shows(service) -> None:
    """/entities counted every memory in a live state mentioning an entity (superseded, not
    yet valid, ...) while /entity/{slug} marks those not current or leaves them out: a
    superseded fact kept its entity listed with a count /entity/{slug} never showed as
    current. A reference is now a memory the state pass calls current, as /entity/{slug}
    does; a fact replaced from a later date is current until then and still counts."""
    day = 86400.0
    async with service.http() as http:
        replaced = await _store(http, "Ada Lovelace wrote notes on the analytical engine.")
        replaced_later = await _store(http, "Grace Hopper leads the compiler team.")
        not_yet = await _store(http, "Alan Turing joins the codebreaking team.",
                               t_valid=datetime.fromtimestamp(time.time() + 3 * day, UTC).isoformat())
        kept = await _store(http, "Margaret Hamilton wrote the flight software.")
        await eventually(lambda: _entities_ready(http, [replaced, replaced_later, not_yet, kept]), timeout=60)
        r = await http.post("/memory", json={"content": "the notes on the engine were lost in a fire.",
                                             "supersedes_memory_id": replaced})
        assert r.status_code == 201, r.text
        r = await http.post("/memory", json={
            "content": "the compiler team will be led by someone else.", "supersedes_memory_id": replaced_later,
            "t_valid": datetime.fromtimestamp(time.time() + 3 * day, UTC).isoformat()})
        assert r.status_code == 201, r.text

        listed = {e["name"].lower(): e for e in (await http.get("/entities")).json()["entities"]}
        assert "ada lovelace" not in listed and "alan turing" not in listed, listed
        assert listed["grace hopper"]["reference_count"] == 1 and listed["margaret hamilton"]["reference_count"] == 1
        for name, entity in listed.items():  # each count is what /entity/{slug} shows as current
            shown = (await http.get(f"/entity/{entity['id']}")).json()
            current = [m["id"] for m in shown["memories"] if m["is_current"]]
            assert entity["reference_count"] == len(current) == shown["entity"]["reference_count"], (name, shown)
        shown = (await http.get("/entity/person:ada-lovelace")).json()
        assert [(m["id"], m["is_current"]) for m in shown["memories"]] == [(replaced, False)], shown
        assert shown["entity"]["reference_count"] == 0, shown


async def test_a_memory_re_enriched_after_its_predecessor_went_keeps_one_predecessor(service) -> None:
    """Break-it review: a memory enriched again (its text edited) after its PRECEDED_BY predecessor was deleted got
    its new predecessor and kept the edge to the deleted one (422 memories had two). It keeps
    one: the new."""
    graph = service.ctx.graph
    async with service.http() as http:
        first = await _store(http, "Sprint one started on Monday", tags=["sprints"])
        second = await _store(http, "Sprint two started a fortnight later", tags=["sprints"])
        third = await _store(http, "Sprint three started after the holidays", tags=["sprints"])
        await eventually(lambda: _entities_ready(http, [first, second, third]), timeout=60)

        async def predecessors() -> list[str]:
            rows = await graph.ro_query("MATCH (m:Memory {id: $id})-[:PRECEDED_BY]->(p:Memory) RETURN p.id",
                                        {"id": third})
            return sorted(r[0] for r in rows)

        assert await predecessors() == [second]
        assert (await http.delete(f"/memory/{second}")).status_code == 200
        r = await http.patch(f"/memory/{third}", json={"content": "Sprint three started after the winter holidays"})
        assert r.status_code == 200, r.text  # a new text: embedded and linked again

        async def moved() -> bool:
            return await predecessors() == [first]

        await eventually(moved, timeout=60)
