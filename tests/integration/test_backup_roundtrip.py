"""Backup → restore → backup on real NATS, FalkorDB, the embedded Qdrant shard and the models
(issue 12 item 13): the second backup equals the first, the restored service adds no events
and no edges (restored memories are not enriched again), and ``automem restore`` says when
the vector index must be rebuilt and rebuilds it with ``--reindex``."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from typing import Any

import pytest

from automem.common import backup
from automem.common.bus import Bus
from automem.graph import GraphStore
from automem.v1 import events_pb2
from tests.conftest import console_login, eventually, start_service

#: The largest integers metadata keeps exactly (larger ones are refused: test_exact_values.py).
BIG = {"big": 9007199254740991, "neg": -9007199254740991, "nested": {"list": [1, 2.5, "x", None, True, 2**53 - 2]}}


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _build(http) -> dict[str, str]:
    """Memories with entities (enrichment writes Entity nodes and MENTIONS edges), a manual
    relation, a supersession (INVALIDATED_BY, closed window), big-int metadata, a rejected
    one and a deleted one (tombstone)."""
    a = await _store(http, "Alice Johnson runs the Postgres backups of billing every night.", tags=["ops"],
                     metadata=BIG, t_valid="2024-01-01T00:00:00Z")
    b = await _store(http, "Bob Smith moved the billing service from Berlin to Paris.", tags=["ops", "billing"])
    # Characters str.splitlines() splits at (U+2028, U+2029, U+0085, \x1c): a backup holding
    # one could not be restored (break-it review).
    d = await _store(http, "Grafana dashboards watch the billing latency in Paris.\u2028Alerts: "
                           "\u2029p99\u0085 over 2 s\x1c page on-call.", tags=["billing"])
    r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO", "strength": 0.7})
    assert r.status_code in (200, 201), r.text
    r = await http.post(f"/v1/memories/{a}:supersede", json={
        "content": "Alice Johnson runs the CockroachDB backups of billing every night.", "tags": ["ops"],
        "t_valid": "2025-01-01T00:00:00Z", "metadata": BIG})
    assert r.status_code in (200, 201), r.text
    c = r.json()["memory_id"]
    rejected = await _store(http, "The moon is cheese", require_review=True)
    await http.post(f"/v1/review-items/{rejected}:reject", json={"reason": "false"})
    # SIMILAR_TO: x is enriched before y exists, so only y -> x is written; enriching x
    # again (a replay of its event after a restore) would add x -> y.
    x = await _store(http, "The billing service is deployed in the Paris data centre.", tags=["deploy"])
    await eventually(lambda: _settled_ids(http, [x]))
    y = await _store(http, "The billing service is deployed to the Paris data centre.", tags=["deploy"])
    gone = await _store(http, "temporary note about Paris")
    assert (await http.delete(f"/memory/{gone}")).status_code == 200
    return {"a": a, "b": b, "c": c, "d": d, "x": x, "y": y}


async def _settled_ids(http, ids: list[str]) -> bool:
    for mid in ids:
        r = await http.get(f"/memory/{mid}")
        if r.json()["memory"].get("enrichment_status") != "done":
            return False
    return True


async def _settled(service, ids: list[str]) -> bool:
    """Enrichment is over: no queued event and every live memory has its point and DONE status."""
    if await service.ctx.enrich_consumer.queue_depth():
        return False
    if len(await service.ctx.vectors.retrieve(ids)) != len(ids):
        return False
    rows = await service.ctx.graph.ro_query(
        "MATCH (m:Memory) WHERE m.id IN $ids RETURN m.embedding_status, m.enrichment_status", {"ids": ids})
    return all(e == "EMBEDDING_STATUS_DONE" and s == "ENRICHMENT_STATUS_DONE" for e, s in rows)


async def _counts(service) -> tuple[int, int, int]:
    """(events on the stream, edges, nodes)."""
    info = await service.ctx.bus.js.stream_info(service.settings.stream_name)
    edges = (await service.ctx.graph.ro_query("MATCH ()-[r]->() RETURN count(r)"))[0][0]
    nodes = (await service.ctx.graph.ro_query("MATCH (n) RETURN count(n)"))[0][0]
    return info.state.messages, edges, nodes


def _fresh(settings, tmp_path, name: str):
    """``settings`` for a second service of its own: graph, stream, subjects and data dir."""
    suffix = uuid.uuid4().hex[:10]
    return settings.model_copy(update={"graph_name": f"{name}_{suffix}", "stream_name": f"{name.upper()}_{suffix.upper()}",
                                       "subject_prefix": f"{name}.{suffix}", "data_dir": tmp_path / name})


async def _backup_lines(service) -> list[str]:
    return [line async for line in backup.export_lines(service.ctx.graph, service.ctx.bus)]


def _canonical(lines: list[str], *also: str) -> list[str]:
    """The lines with the header's times removed (``export_time``, and the stream's own time
    of its oldest message, ``events_retained_since``, which a restore necessarily renews),
    its graph name (this test restores under another name) and the header fields ``also``;
    every other line is compared byte for byte."""
    header = json.loads(lines[0])
    assert header["kind"] == "header"
    header.pop("export_time")
    header.pop("graph")
    header.pop("events_retained_since", None)
    for name in also:
        header.pop(name, None)
    return [json.dumps(header, sort_keys=True), *lines[1:]]


def _content(lines: list[str]) -> tuple[Any, ...]:
    """What a backup holds whatever the order of its nodes: the header (as :func:`_canonical`
    leaves it, without ``events_truncated``), the nodes and the edges (their ends by node)
    sorted, the events in order, the end record."""
    records = [json.loads(line) for line in _canonical(lines, "events_truncated")]
    nodes = {r["ref"]: json.dumps({k: v for k, v in r.items() if k != "ref"}, sort_keys=True)
             for r in records if "ref" in r}
    edges = sorted(json.dumps([nodes[r["source"]], r["type"], nodes[r["target"]], r["properties"]], sort_keys=True)
                   for r in records if r["kind"] == "edge")
    return (records[0], sorted(nodes.values()), edges, [r for r in records if r["kind"] == "event"], records[-1])


async def test_backup_restore_backup_is_identical_and_restore_enriches_nothing(own_service, settings, tmp_path,
                                                                                 monkeypatch) -> None:
    from automem import cli
    from automem.common import settings as settings_module

    async with own_service.http() as http:
        ids = await _build(http)
    live = list(ids.values())
    await eventually(lambda: _settled(own_service, live), timeout=60)
    first = await _backup_lines(own_service)
    records = backup.read_lines(first)
    assert any(r["kind"] == "edge" and r["type"] == "MENTIONS" for r in records)  # enrichment wrote entities
    assert any(r["kind"] == "edge" and r["type"] == "INVALIDATED_BY" for r in records)
    assert any(r["kind"] == "edge" and r["type"] == "SIMILAR_TO" for r in records)
    original_edges = sorted(json.dumps(r["properties"], sort_keys=True) for r in records if r["kind"] == "edge")
    # Versions (automem/graph/versions.py) travel as nodes: the superseded memory has two.
    version_nodes = [r for r in records if "MemoryVersion" in (r.get("labels") or [])]
    assert {(r["properties"]["memory_id"], r["properties"]["version"]) for r in version_nodes
            if r["properties"]["memory_id"] == ids["a"]} == {(ids["a"], 1), (ids["a"], 2)}
    scope = (await own_service.ctx.graph.memories.get(ids["a"], None)).scope
    original_versions = {mid: await own_service.ctx.graph.versions.page(mid, scope, 0, 100) for mid in live}
    events_before, edges_before, nodes_before = await _counts(own_service)
    out = tmp_path / "first.jsonl"
    out.write_text("\n".join(first) + "\n", encoding="utf-8")

    # Restore into a fresh data dir, graph and stream through the CLI, with --reindex.
    suffix = uuid.uuid4().hex[:10]
    fresh = settings.model_copy(update={"graph_name": f"restored_{suffix}", "stream_name": f"RESTORED_{suffix.upper()}",
                                        "subject_prefix": f"restored.{suffix}", "data_dir": tmp_path / "restored"})
    env = {"AUTOMEM_DATA_DIR": str(fresh.data_dir), "AUTOMEM_NATS_URL": fresh.nats_url,
           "FALKORDB_HOST": fresh.falkordb_host, "FALKORDB_PORT": str(fresh.falkordb_port),
           "FALKORDB_GRAPH": fresh.graph_name, "AUTOMEM_GRAPH_NAME": fresh.graph_name,
           "AUTOMEM_STREAM_NAME": fresh.stream_name, "AUTOMEM_SUBJECT_PREFIX": fresh.subject_prefix,
           "AUTOMEM_EVENT_RETENTION_BYTES": "0"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings_module.get_settings.cache_clear()
    try:
        code = await asyncio.to_thread(cli.main, ["restore", str(out), "--reindex"])
    finally:
        settings_module.get_settings.cache_clear()
    assert code == 0

    restored = await start_service(fresh)
    try:
        # The restored service has every point (the reindex) and nothing left to enrich.
        await eventually(lambda: _settled(restored, live), timeout=60)
        sync = await restored.ctx.consolidate.check_sync(repair=False)
        assert (sync.sync_status, sync.missing_vectors, sync.stale_payloads) == ("synced", 0, 0)
        await asyncio.sleep(1.0)  # let an (unwanted) replay of the restored events start
        await eventually(lambda: _settled(restored, live), timeout=60)
        assert await _counts(restored) == (events_before, edges_before, nodes_before)
        for mid, versions in original_versions.items():
            assert await restored.ctx.graph.versions.page(mid, scope, 0, 100) == versions
        second = await _backup_lines(restored)
    finally:
        await restored.runner.stop()
    assert _canonical(second) == _canonical(first)
    again = backup.read_lines(second)
    assert sorted(json.dumps(r["properties"], sort_keys=True) for r in again if r["kind"] == "edge") == original_edges
    metadata = [json.loads(r["properties"]["metadata"]) if isinstance(r["properties"].get("metadata"), str)
                else r["properties"].get("metadata") for r in again if r["kind"] == "memory"
                and r["properties"]["id"] in (ids["a"], ids["c"])]
    assert metadata and all(m is not None for m in metadata)


async def test_restore_without_reindex_says_a_reindex_is_needed(own_service, settings, tmp_path, capsys,
                                                               monkeypatch) -> None:
    from automem import cli
    from automem.common import settings as settings_module

    async with own_service.http() as http:
        mid = await _store(http, "Carol Diaz rotates the TLS certificates.")
    await eventually(lambda: _settled(own_service, [mid]), timeout=60)
    out = tmp_path / "b.jsonl"
    out.write_text("\n".join(await _backup_lines(own_service)) + "\n", encoding="utf-8")
    suffix = uuid.uuid4().hex[:10]
    env = {"AUTOMEM_DATA_DIR": str(tmp_path / "r"), "AUTOMEM_NATS_URL": settings.nats_url,
           "FALKORDB_HOST": settings.falkordb_host, "FALKORDB_PORT": str(settings.falkordb_port),
           "FALKORDB_GRAPH": f"r_{suffix}", "AUTOMEM_GRAPH_NAME": f"r_{suffix}",
           "AUTOMEM_STREAM_NAME": f"R_{suffix.upper()}", "AUTOMEM_SUBJECT_PREFIX": f"r.{suffix}",
           "AUTOMEM_EVENT_RETENTION_BYTES": "0"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings_module.get_settings.cache_clear()
    try:
        code = await asyncio.to_thread(cli.main, ["restore", str(out)])
    finally:
        settings_module.get_settings.cache_clear()
    assert code == 0
    err = capsys.readouterr().err
    assert "reindex needed" in err and "1 memories" in err and "--reindex" in err
    graph = GraphStore(settings.model_copy(update={"graph_name": f"r_{suffix}"}))
    bus = Bus(settings.model_copy(update={"stream_name": f"R_{suffix.upper()}", "subject_prefix": f"r.{suffix}"}))
    await bus.connect()
    try:
        # The restored events are history only: the enrichment consumer starts after them.
        info = await bus.js.consumer_info(f"R_{suffix.upper()}", "enrich")
        assert info.num_pending == 0
    finally:
        await bus.close()
        await graph.close()


async def test_a_forced_restore_right_after_a_restore_stores_every_event(own_service, settings, tmp_path) -> None:
    """A forced restore within the stream's 120 s de-duplication window of a previous one
    (which had published the same event ids) answered "events": N but stored none: the
    window survives the purge and the server dropped every republished event as a
    duplicate. Every event must be back, and the answer must count what the stream stored."""
    async with own_service.http() as http:
        a = await _store(http, "Dana Lee renews the billing TLS certificates every March.", tags=["ops"])
        b = await _store(http, "The billing certificates are issued by the internal CA.", tags=["ops"])
        r = await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO",
                                                "strength": 0.6})
        assert r.status_code in (200, 201), r.text
    await eventually(lambda: _settled(own_service, [a, b]), timeout=60)
    first = await _backup_lines(own_service)
    events = sum(1 for r in backup.read_lines(first) if r["kind"] == "event")
    assert events >= 3
    body = ("\n".join(first) + "\n").encode("utf-8")

    fresh = _fresh(settings, tmp_path, "again")
    restored = await start_service(fresh)
    try:
        async with restored.http() as http:
            done = await http.post("/v1/backup:restore", content=body)
            assert done.status_code == 200, done.text
            assert done.json()["events"] == events
            # Again within seconds, forced: the same event ids were published moments ago.
            again = await http.post("/v1/backup:restore", params={"force": "true"}, content=body)
            assert again.status_code == 200, again.text
            info = await restored.ctx.bus.js.stream_info(fresh.stream_name)
            assert (again.json()["events"], info.state.messages) == (events, events)
            history = (await http.get(f"/v1/memories/{a}/history")).json()
            assert history["count"] >= 2, history  # created, enriched, related
        second = await _backup_lines(restored)
        # A backup without its events restored: the history is not whole (it said false before).
        bare = [line async for line in backup.export_lines(own_service.ctx.graph, None)]
        async with restored.http() as http:
            done = await http.post("/v1/backup:restore", params={"force": "true"},
                                   content=("\n".join(bare) + "\n").encode())
            assert done.status_code == 200 and done.json()["events"] == 0, done.text
        assert json.loads((await _backup_lines(restored))[0])["events_truncated"] is True
    finally:
        await restored.runner.stop()
    assert [line for line in second if '"kind": "event"' in line] == [line for line in first
                                                                      if '"kind": "event"' in line]
    # The same records but for the header's times and the order of nodes (refs): a restore
    # into a running service reuses the internal ids its wipe freed, in another order.
    assert _content(second) == _content(first)
    # The forced restore purged the stream, so its sequences go on after the purged ones; the
    # history is whole all the same, and the header said events_truncated before (first_seq > 1).
    assert json.loads(first[0])["events_truncated"] is False
    assert json.loads(second[0])["events_truncated"] is False


@pytest.mark.parametrize(("field", "value"), [("importance", "high"), ("state", "BOGUS"), ("tags", "notalist"),
                                              ("valid_to", 1.0)])
async def test_restore_refuses_a_memory_with_a_wrong_typed_field_before_changing_anything(own_service, field,
                                                                                          value) -> None:
    """A memory line with ``importance: "high"`` (a state no memory has, tags that are not a
    list, a window that ends before it starts) restored with 200, and every read of the
    memory then answered 500 ("could not convert string to float: 'high'"). The restore must
    answer 400 naming the line and the field, and change nothing."""
    async with own_service.http() as http:
        mid = await _store(http, "Erin Park owns the billing on-call rota.", tags=["ops"])
        await eventually(lambda: _settled(own_service, [mid]), timeout=60)
        before = await _backup_lines(own_service)
        number, line = next((n, x) for n, x in enumerate(before, 1)
                            if json.loads(x)["kind"] == "memory" and json.loads(x)["properties"]["id"] == mid)
        record = json.loads(line)
        record["properties"][field] = value
        body = [*before[:number - 1], json.dumps(record, sort_keys=True), *before[number:]]
        r = await http.post("/v1/backup:restore", params={"force": "true"}, content="\n".join(body) + "\n")
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert f"line {number}" in error and f"properties.{field}" in error, error
        assert _canonical(await _backup_lines(own_service)) == _canonical(before)  # nothing half-restored
        got = await http.get(f"/memory/{mid}")
        assert got.status_code == 200 and got.json()["memory"]["content"] == "Erin Park owns the billing on-call rota."


async def test_a_restore_into_a_running_service_does_not_enrich_the_restored_memories_again(
        own_service, settings, tmp_path) -> None:
    """The running service's enrichment consumer fetched the restored events as the restore
    published them, before the restore moved the consumer past them: the restored memories
    (whose vectors a backup does not hold) were embedded and enriched again (a review found
    603 new MEMORY_ENRICHED events and remade edges)."""
    async with own_service.http() as http:
        ids = [await _store(http, f"Team {n} deploys the billing service to region {n} every Tuesday.",
                            tags=["ops"]) for n in range(40)]
    await eventually(lambda: _settled(own_service, ids), timeout=120)
    first = await _backup_lines(own_service)

    def enriched(lines: list[str]) -> int:
        return sum(1 for r in backup.read_lines(lines) if r["kind"] == "event" and events_pb2.MemoryEvent.FromString(
            base64.b64decode(r["data"])).type == events_pb2.EVENT_TYPE_MEMORY_ENRICHED)

    restored = await start_service(_fresh(settings, tmp_path, "reen"))
    try:
        async with restored.http() as http:
            done = await http.post("/v1/backup:restore", content=("\n".join(first) + "\n").encode())
            assert done.status_code == 200, done.text
            # A memory stored after the restore is enriched: the consumer has gone past the restored events.
            after = await _store(http, "The restore finished before lunch.", tags=["ops"])
        await eventually(lambda: _settled(restored, [after]), timeout=120)
        second = await _backup_lines(restored)
    finally:
        await restored.runner.stop()
    assert enriched(second) == enriched(first) + 1


async def test_health_is_degraded_while_a_restore_that_did_not_finish_left_its_marker(own_service) -> None:
    """A restore killed half-way leaves its RestoreInProgress node (the start-up log names it),
    yet /health said healthy, as did the MCP health tool and the console's Operations page.
    /health is now degraded (200, every field kept) with ``restore_incomplete``,
    ``restore_started_at`` and the log's sentence; the MCP tool and the console say it too;
    a restore with force that finishes makes the service healthy again."""
    import re
    import time
    from datetime import datetime

    import httpx
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from automem.v1 import admin_service_pb2

    async with own_service.http() as http:
        await _store(http, "The nightly backup of billing runs at two.", tags=["ops"])
    lines = await _backup_lines(own_service)
    async with own_service.client() as anonymous:  # the open service's caller: admin on every scope
        key = (await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="admin", scopes=["*"]))).secret
    bearer = {"Authorization": f"Bearer {key}"}

    async def mcp_health() -> tuple[dict[str, Any], str]:
        url = own_service.url + "/mcp"
        async with Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=bearer))) as client:
            result = await client.call_tool("check_database_health", {})
        assert not result.is_error and result.structured_content is not None, result
        return result.structured_content, result.content[0].text

    async def ops_page() -> str:
        async with httpx.AsyncClient(base_url=own_service.url, timeout=30) as console:
            login = await console_login(console, key)
            assert login.status_code == 303, login.text
            page = await console.get("/console/ops")
            assert page.status_code == 200, page.text
            return page.text

    async with own_service.http(**bearer) as http:
        body = (await http.get("/health")).json()
        assert body["status"] == "healthy" and body["restore_incomplete"] is False, body
        assert body["restore_started_at"] is None and "restore_warning" not in body, body
        mcp_body, _ = await mcp_health()
        assert mcp_body["status"] == "healthy" and mcp_body["restore_incomplete"] is False, mcp_body
        assert 'data-testid="restore"' not in await ops_page()

        started = time.time()
        await own_service.ctx.graph.dump.mark_restore(started)  # what a restore killed after its wipe leaves
        r = await http.get("/health")
        body = r.json()
        assert r.status_code == 200 and body["status"] == "degraded", body
        assert body["restore_incomplete"] is True, body
        assert abs(datetime.fromisoformat(body["restore_started_at"]).timestamp() - started) < 0.01, body
        assert "did not finish" in body["restore_warning"] and "--force" in body["restore_warning"], body
        # AutoMem's fields stay as they were.
        assert body["falkordb"] == "connected" and body["memory_count"] == 1 and "enrichment" in body, body
        assert body["restore_warning"] == await backup.interrupted_restore(own_service.ctx.graph), body
        mcp_body, text = await mcp_health()
        assert mcp_body["status"] == "degraded" and mcp_body["restore_incomplete"] is True, mcp_body
        assert "did not finish" in mcp_body["restore_warning"] and "restore incomplete" in text, text
        page = await ops_page()
        restore_row = re.search(r'data-testid="restore">(.*?)</dd>', page, re.DOTALL)
        assert restore_row is not None and "incomplete" in restore_row.group(1), page
        assert "did not finish" in restore_row.group(1), restore_row.group(1)

        done = await http.post("/v1/backup:restore", params={"force": "true"},
                               content=("\n".join(lines) + "\n").encode())
        assert done.status_code == 200, done.text
        body = (await http.get("/health")).json()
        assert body["status"] == "healthy" and body["restore_incomplete"] is False, body
        assert (await mcp_health())[0]["status"] == "healthy"
        assert 'data-testid="restore"' not in await ops_page()
