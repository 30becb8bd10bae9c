"""Negative evaluations: one test per AutoMem fault listed in docs/architecture.md ("What
the design fixes in AutoMem"). Each asserts the correct behaviour here; the comment in each
says how the faulty behaviour would make it fail."""

from __future__ import annotations

import uuid

from automem.common import backup
from automem.common.bus import Bus
from automem.common.payload import build_payload
from automem.graph import GraphStore
from tests.conftest import eventually


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _point(service, mid: str):
    points = await service.ctx.vectors.retrieve([mid])
    return points[0] if points else None


async def test_fault_1_vector_payload_carries_the_window_set_at_store_time(service) -> None:
    """AutoMem's default store path wrote the vector payload without t_valid/t_invalid, so the
    vector arm returned an expired memory as current. Faulty behaviour fails here twice: the
    payload would lack ``valid_from``/``valid_to`` (first asserts), and the expired memory would
    come back from a vector-arm recall at the default as_of (now)."""
    async with service.http() as http:
        expired = await _store(http, "The office wifi password is hunter2", tags=["wifi"],
                               t_valid="2020-01-01T00:00:00Z", t_invalid="2021-01-01T00:00:00Z")
        point = await eventually(lambda: _point(service, expired))
        assert point.payload["valid_from"] == 1577836800.0 and point.payload["valid_to"] == 1609459200.0

        async def payload_matches_graph() -> bool:
            # Enrichment writes the point, then the node's enrichment fields (status, entities)
            # and the payload again: the two agree once it has finished with the memory.
            memory = await service.ctx.graph.memories.get(expired, service.scope)
            point = await _point(service, expired)
            return point is not None and point.payload == build_payload(memory)
        await eventually(payload_matches_graph)
        r = await http.get("/recall", params={"query": "office wifi password"})
        assert "vector" in r.json()["arms"]
        assert expired not in [h["id"] for h in r.json()["results"]]
        r = await http.get("/recall", params={"query": "office wifi password", "as_of": "2020-06-01T00:00:00Z"})
        assert [h["id"] for h in r.json()["results"]] == [expired]


async def test_fault_2_id_fetch_tag_listing_and_startup_recall_apply_the_state_pass(service) -> None:
    """AutoMem's GET /memory/{id}, by-tag listing and startup recall skipped the current-state
    pass. Faulty behaviour: the superseded lesson would read as current (``is_current`` true,
    no ``current_id``), and both it and the expired rule would be listed by tag and in
    startup recall next to their replacement."""
    async with service.http() as http:
        old = await _store(http, "Always run migrations by hand", tags=["critical", "lesson"], importance=0.9)
        r = await http.post(f"/v1/memories/{old}:supersede", json={
            "content": "Run migrations through the deploy pipeline", "tags": ["critical", "lesson"],
            "importance": 0.9})
        new = r.json()["memory_id"]
        expired = await _store(http, "Freeze deploys during the 2020 audit", tags=["critical", "system"],
                               t_valid="2020-01-01T00:00:00Z", t_invalid="2020-12-31T00:00:00Z")
        got = (await http.get(f"/memory/{old}")).json()["memory"]
        assert got["is_current"] is False and got["state"] == "SUPERSEDED" and got["current_id"] == new
        got = (await http.get(f"/memory/{expired}")).json()["memory"]
        assert got["is_current"] is False
        listed = (await http.get("/memory/by-tag", params={"tags": "critical"})).json()["memories"]
        assert [m["id"] for m in listed] == [new]
        startup = (await http.get("/startup-recall")).json()
        assert [m["id"] for m in startup["critical_lessons"]] == [new]
        assert startup["system_rules"] == []


async def test_fault_3_recovery_keeps_validity_windows_and_edges(own_service, settings, tmp_path) -> None:
    """AutoMem rebuilt its graph from the vector payload, losing validity windows and every
    edge. Faulty behaviour: the restored memory would have an open window and no
    INVALIDATED_BY/RELATES_TO edges, so the superseded memory would read as current again."""
    async with own_service.http() as http:
        a = await _store(http, "Staging runs on k3s", tags=["infra"], t_valid="2023-01-01T00:00:00Z",
                         t_invalid="2030-01-01T00:00:00Z")
        b = await _store(http, "Staging DNS is staging.example.com", tags=["infra"])
        await http.post("/associate", json={"memory1_id": a, "memory2_id": b, "type": "RELATES_TO", "strength": 0.6})
        r = await http.post(f"/v1/memories/{a}:supersede", json={"content": "Staging runs on EKS", "tags": ["infra"],
                                                                  "t_valid": "2024-06-01T00:00:00Z"})
        c = r.json()["memory_id"]
    records = [r async for r in backup.export_records(own_service.ctx.graph, own_service.ctx.bus)]
    suffix = uuid.uuid4().hex[:10]
    fresh = settings.model_copy(update={"graph_name": f"fault3_{suffix}", "stream_name": f"FAULT3_{suffix.upper()}",
                                        "subject_prefix": f"fault3.{suffix}"})
    graph, bus = GraphStore(fresh), Bus(fresh)
    await bus.connect()
    try:
        await backup.restore_records(graph, records, bus)
        restored = await graph.memories.get(a, "default")
        original = await own_service.ctx.graph.memories.get(a, "default")
        assert restored == original  # every field: windows, state, superseded_by, prior window
        assert restored.valid_to.ToJsonString() == "2024-06-01T00:00:00Z"
        assert restored.prior_valid_to.ToJsonString() == "2030-01-01T00:00:00Z"
        edges = await graph.ro_query("MATCH (x:Memory)-[r:INVALIDATED_BY|RELATES_TO]->(y:Memory) "
                                     "RETURN x.id, type(r), y.id, r.strength ORDER BY type(r)")
        assert [list(e) for e in edges] == [[a, "INVALIDATED_BY", c, 0.9], [a, "RELATES_TO", b, 0.6]]
    finally:
        await bus.close()
        await graph.close()


async def test_fault_4_supersede_is_never_half_applied(service) -> None:
    """AutoMem's supersede was three client calls; a failure between them left a new memory
    next to an old one still current (or a closed old memory without the edge). Faulty
    behaviour: after the failed supersede a second memory would exist and/or the old one
    would be closed or SUPERSEDED without the edge, and recall would not return exactly the
    old memory."""
    async with service.http() as http:
        old = await _store(http, "Backups run nightly at 02:00", tags=["backup"])
        ingest = service.ctx.ingest
        original = ingest.supersede_in_graph

        async def failing(*args, **kwargs):
            return await original(*args, _fail_after_create=True)

        ingest.supersede_in_graph = failing
        try:
            r = await http.post("/memory", json={"content": "Backups run hourly", "tags": ["backup"],
                                                 "supersedes_memory_id": old})
            assert r.status_code >= 400
        finally:
            ingest.supersede_in_graph = original
        graph = service.ctx.graph
        scope = {"scope": service.scope}
        assert [r[0] for r in await graph.ro_query("MATCH (m:Memory) WHERE m.scope = $scope RETURN m.id",
                                                   scope)] == [old]
        node = await graph.memories.get(old, service.scope)
        assert node.state == 1 and node.version == 1 and not node.HasField("valid_to") and not node.superseded_by
        assert await graph.ro_query("MATCH (m:Memory)-[r:INVALIDATED_BY|EVOLVED_INTO]->() WHERE m.scope = $scope "
                                    "RETURN r", scope) == []
        listed = (await http.get("/memory/by-tag", params={"tags": "backup"})).json()["memories"]
        assert [m["id"] for m in listed] == [old] and listed[0]["state"] == "ACTIVE"
        # The retry (the client retries 5xx) then applies all of it once.
        r = await http.post("/memory", json={"content": "Backups run hourly", "tags": ["backup"],
                                             "supersedes_memory_id": old})
        assert r.status_code == 201, r.text
        listed = (await http.get("/memory/by-tag", params={"tags": "backup"})).json()["memories"]
        assert [m["id"] for m in listed] == [r.json()["memory_id"]]
