"""Consolidation end to end: decay, creative associations, clustering (MetaPatterns withheld
from recall), forget (off by default, archive before delete, protected memories), dry runs
and run history, the scheduler, and drift check/repair reflected in /health."""

from __future__ import annotations

import time
import uuid

import pytest_asyncio

from automem.common.payload import build_payload
from automem.v1 import events_pb2
from tests.conftest import eventually, start_service

#: Three memories that cluster (with the ``tuned`` fixture's thresholds) and one that does not.
CLUSTERED = ["The espresso machine on floor two makes great coffee.",
             "Coffee from the floor two espresso machine is the best in the office.",
             "Everyone queues for the espresso machine coffee on floor two each morning.",
             "Quarterly tax filings are due to the accountant in April."]


async def _store(http, content: str, **extra) -> str:
    r = await http.post("/memory", json={"content": content, **extra})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _enriched(http, mid: str) -> dict | None:
    r = await http.get(f"/memory/{mid}")
    memory = r.json()["memory"]
    return memory if memory["enrichment_status"] == "done" else None


async def _stored_enriched(http, texts: list[str]) -> list[str]:
    """Store ``texts`` and wait until each is enriched; their ids."""
    ids = [await _store(http, t) for t in texts]
    for mid in ids:
        await eventually(lambda mid=mid: _enriched(http, mid))
    return ids


async def _consolidate(http, mode: str, dry_run: bool) -> dict:
    r = await http.post("/consolidate", json={"mode": mode, "dry_run": dry_run})
    assert r.status_code == 200, r.text
    return r.json()


@pytest_asyncio.fixture(loop_scope="session")
async def tuned(settings):
    """A service with low link thresholds so small test corpora cluster and associate, and
    forget enabled (off by default)."""
    running = await start_service(settings.model_copy(update={
        "creative_threshold": 0.3, "cluster_threshold": 0.6, "similar_threshold": 0.95, "links_enabled": True,
        "forget_enabled": True}))
    try:
        yield running
    finally:
        await running.runner.stop()


async def test_decay_dry_run_writes_nothing_and_runs_are_persisted(service) -> None:
    graph = service.ctx.graph
    async with service.http() as http:
        mid = await _store(http, "An old note about the office plants.", importance=0.2,
                           timestamp="2020-01-01T00:00:00Z")
        body = await _consolidate(http, "decay", True)
        assert body["dry_run"] is True and body["results"]["decayed"] >= 1
        rows = await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.relevance_score", {"id": mid})
        assert rows[0][0] == 1.0  # untouched by the dry run
        body = await _consolidate(http, "decay", False)
        rows = await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.relevance_score", {"id": mid})
        assert rows[0][0] < 0.2  # years old, low importance: floor 0.1
        r = await http.get("/consolidate/status")
        history = r.json()["history"]
        assert [(h["mode"], h["dry_run"], h["trigger"]) for h in history[:2]] == [
            ("decay", False, "manual"), ("decay", True, "manual")]
        assert "decay" in r.json()["next_runs"]  # the scheduler's plan


async def test_forget_is_off_by_default(service) -> None:
    async with service.http() as http:
        r = await http.post("/consolidate", json={"mode": "forget", "dry_run": False})
        assert r.status_code == 409 and "AUTOMEM_FORGET_ENABLED" in r.text
        assert (await _consolidate(http, "forget", True))["results"] == {"archived": 0, "deleted": 0}


async def test_creative_and_cluster(tuned) -> None:
    graph = tuned.ctx.graph
    texts = CLUSTERED
    async with tuned.http() as http:
        ids = await _stored_enriched(http, texts)
        # dry runs count, write nothing
        dry = await _consolidate(http, "cluster", True)
        assert dry["results"]["meta_patterns"] == 1
        assert not await graph.ro_query("MATCH (m:Memory {type: 'MetaPattern'}) RETURN m.id")
        dry = await _consolidate(http, "creative", True)
        assert dry["results"]["discovered"] >= 1
        assert not await graph.ro_query("MATCH ()-[r:DISCOVERED]->() RETURN r")

        body = await _consolidate(http, "creative", False)
        edges = await graph.ro_query("MATCH (a:Memory)-[r:DISCOVERED]->(b:Memory) RETURN a.id, b.id, r.strength")
        assert len(edges) == body["results"]["discovered"] >= 1
        assert all(e[2] >= 0.3 for e in edges)

        body = await _consolidate(http, "cluster", False)
        assert body["results"] == {"clusters": 1, "meta_patterns": 1, "meta_patterns_archived": 0}
        metas = await graph.ro_query("MATCH (m:Memory {type: 'MetaPattern'}) RETURN m.id, m.content")
        assert len(metas) == 1 and "Pattern across 3 memories" in metas[0][1]
        members = await graph.ro_query("MATCH (m:Memory)-[:PART_OF]->(p:Memory {id: $id}) RETURN m.id",
                                       {"id": metas[0][0]})
        assert sorted(r[0] for r in members) == sorted(ids[:3])
        await eventually(lambda: _enriched(http, metas[0][0]))  # embedded like any memory
        # excluded from recall, and not summarised twice
        r = await http.get("/recall", params={"query": "espresso machine coffee floor two", "limit": 10})
        assert metas[0][0] not in {h["id"] for h in r.json()["results"]}
        again = await _consolidate(http, "cluster", False)
        assert again["results"]["meta_patterns"] == 0


async def _embedded_untouched(graph, mid: str) -> bool:
    """The memory is embedded, read from the graph: a GET /memory would count as an access
    (``last_access_time``), which makes a memory relevant again."""
    rows = await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.embedding_status", {"id": mid})
    return bool(rows) and rows[0][0] == "EMBEDDING_STATUS_DONE"


async def test_forget_archives_before_deleting_and_spares_protected(tuned) -> None:
    """Archive before delete; an archived memory stays ARCHIVED for
    ``forget_archive_grace_days`` (7) from its archive before a forget run may delete it: two
    runs back to back archived and deleted it within a second."""
    graph = tuned.ctx.graph
    old = "2019-01-01T00:00:00Z"
    async with tuned.http() as http:
        weak = await _store(http, "A throwaway note about a parking spot.", importance=0.05, timestamp=old)
        decision = await _store(http, "We decided on quarterly planning.", type="Decision", importance=0.05,
                                timestamp=old)
        important = await _store(http, "The production database password rotates monthly.", importance=0.9,
                                 timestamp=old)
        for mid in (weak, decision, important):
            await eventually(lambda mid=mid: _embedded_untouched(graph, mid))
        assert (await _consolidate(http, "decay", False))["results"]["decayed"] == 3
        dry = await _consolidate(http, "forget", True)
        assert dry["results"] == {"archived": 1, "deleted": 0}
        first = await _consolidate(http, "forget", False)
        assert first["results"] == {"archived": 1, "deleted": 0}  # archived, not yet deleted
        state = {r[0]: r[1] for r in await graph.ro_query("MATCH (m:Memory) RETURN m.id, m.state")}
        assert state == {weak: "ARCHIVED", decision: "ACTIVE", important: "ACTIVE"}
        second = await _consolidate(http, "forget", False)
        assert second["results"] == {"archived": 0, "deleted": 0}  # within its grace
        # The archive as if it was 8 days ago: past the grace, the next run deletes it.
        await graph.query("MATCH (m:Memory {id: $id}) SET m.update_time = m.update_time - 8 * 86400.0",
                          {"id": weak})
        assert (await _consolidate(http, "forget", True))["results"] == {"archived": 0, "deleted": 1}
        third = await _consolidate(http, "forget", False)
        assert third["results"] == {"archived": 0, "deleted": 1}
        rows = await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.state", {"id": weak})
        assert rows[0][0] == "DELETED"

        async def point_gone():
            return not await tuned.ctx.vectors.retrieve([weak])
        await eventually(point_gone)


async def test_consolidations_versions_name_the_actor_its_events_name(tuned) -> None:
    """A memory forget archived got a version naming the caller of ``POST /consolidate`` (the
    request's principal; ``system`` for a scheduled run) while its MEMORY_ARCHIVED event named
    ``system:consolidate``: the history and the versions disagreed about who archived it. A
    MetaPattern's first version likewise named the caller, its MEMORY_CREATED event
    ``system:consolidate``. Both name ``system:consolidate`` now."""
    graph = tuned.ctx.graph
    async with tuned.http() as http:

        async def last_version_and_event(mid: str, kind: str) -> tuple[dict, list[dict]]:
            versions = (await http.get(f"/v1/memories/{mid}/versions")).json()["versions"]
            events = (await http.get(f"/v1/memories/{mid}/history")).json()["events"]
            return versions[-1], [e for e in events if e["type"] == kind]

        weak = await _store(http, "A throwaway note about the old coat rack.", importance=0.05,
                            timestamp="2019-01-01T00:00:00Z")
        await eventually(lambda: _embedded_untouched(graph, weak))
        await _consolidate(http, "decay", False)
        assert (await _consolidate(http, "forget", False))["results"] == {"archived": 1, "deleted": 0}
        version, [event] = await last_version_and_event(weak, "EVENT_TYPE_MEMORY_ARCHIVED")
        assert version["memory"]["state"] == "ARCHIVED" and "state" in version["changed_fields"], version
        assert version["actor"] == event["actor"] == "system:consolidate", (version["actor"], event["actor"])

        await _stored_enriched(http, CLUSTERED)
        assert (await _consolidate(http, "cluster", False))["results"]["meta_patterns"] == 1
        [[pattern]] = await graph.ro_query("MATCH (p:Memory {type: 'MetaPattern'}) RETURN p.id")
        version, [event] = await last_version_and_event(pattern, "EVENT_TYPE_MEMORY_CREATED")
        assert version["version"] == 1
        assert version["actor"] == event["actor"] == "system:consolidate", (version["actor"], event["actor"])


async def test_forget_spares_a_memory_read_since_the_last_decay(tuned) -> None:
    """Relevance counts from the later of event time and last access
    (automem/consolidate/tasks.py ``relevance``), but forget read the score the last decay
    stored: a memory read seconds ago was archived ("relevance 0.000"), and after another read
    deleted. Forget judges each candidate by its relevance now."""
    graph = tuned.ctx.graph
    async with tuned.http() as http:
        mid = await _store(http, "A note about the 2023 offsite parking.", importance=0.0,
                           timestamp="2023-01-01T00:00:00Z")
        await _consolidate(http, "decay", False)
        rows = await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.relevance_score", {"id": mid})
        assert rows[0][0] < 0.05, rows  # stale enough to be deleted, by the stored score
        assert (await http.get(f"/memory/{mid}")).status_code == 200  # read now
        assert (await _consolidate(http, "forget", True))["results"] == {"archived": 0, "deleted": 0}
        assert (await _consolidate(http, "forget", False))["results"] == {"archived": 0, "deleted": 0}
        rows = await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.state", {"id": mid})
        assert rows[0][0] == "ACTIVE"


async def _health(http) -> str:
    return (await http.get("/health")).json()["sync_status"]


async def test_drift_detected_and_repaired(own_service) -> None:
    vectors = own_service.ctx.vectors
    async with own_service.http() as http:
        ids = [await _store(http, f"Drift test memory number {i} about sailing.") for i in range(3)]
        for mid in ids:
            await eventually(lambda mid=mid: _enriched(http, mid))
        assert await _health(http) == "synced"
        await vectors.delete([ids[0]])  # behind the own_service's back
        assert await _health(http) == "drift_detected"
        # AutoMem's clients send dry_run in the JSON body (automem/api/admin.py sync_missing):
        # the body was ignored and the repair ran.
        r = await http.post("/admin/sync", json={"dry_run": True, "batch_size": 50})
        assert r.status_code == 200 and r.json()["missing_vectors"] == 1 and r.json()["repaired"] == 0, r.text
        r = await http.post("/admin/sync", params={"dry_run": "false"}, json={"dry_run": True})
        assert r.status_code == 400 and r.json()["error"].startswith("dry_run: "), r.text
        r = await http.post("/admin/sync", json={"dryRun": True})
        assert r.status_code == 400 and r.json()["error"].startswith("dryRun: "), r.text
        assert not await vectors.retrieve([ids[0]])
        r = await http.post("/admin/sync")
        assert r.json()["missing_vectors"] == 1 and r.json()["repaired"] == 1
        await eventually(lambda: vectors.retrieve([ids[0]]))
        assert await eventually(lambda: _is(http, "synced"))

        orphan = str(uuid.uuid4())
        point = (await vectors.retrieve([ids[1]], with_vectors=True))[0]
        await vectors.upsert(orphan, point.vector, {**point.payload, "memory_id": orphan})
        assert await _health(http) == "orphaned_vectors"
        r = await http.post("/admin/sync")
        assert r.json()["orphaned_vectors"] == 1
        await eventually(lambda: _is(http, "synced"))
        assert not await vectors.retrieve([orphan])

        # a stale payload leaves the counts equal: only the full check sees it
        stale = (await vectors.retrieve([ids[2]]))[0]
        await vectors.set_payload(ids[2], {**stale.payload, "tags": ["tampered"]})
        r = await http.post("/admin/sync?dry_run=true")
        assert r.json()["sync_status"] == "drift_detected" and r.json()["stale_payloads"] == 1
        assert await _health(http) == "drift_detected"
        await http.post("/admin/sync")
        memory = (await own_service.ctx.graph.memories.hydrate([ids[2]], None))[ids[2]]

        async def payload_fixed():
            got = (await vectors.retrieve([ids[2]]))[0].payload
            memory.embedding_model = got.get("embedding_model", "")
            return got == build_payload(memory)
        await eventually(payload_fixed)


async def _is(http, status: str) -> bool:
    return await _health(http) == status


async def test_scheduler_repairs_drift_periodically(settings) -> None:
    running = await start_service(settings.model_copy(update={"sync_check_interval_seconds": 0.5}))
    try:
        vectors = running.ctx.vectors
        async with running.http() as http:
            mid = await _store(http, "Scheduled repair should bring this point back.")
            await eventually(lambda: _enriched(http, mid))
            await vectors.delete([mid])
            started = time.monotonic()
            await eventually(lambda: vectors.retrieve([mid]))
            assert time.monotonic() - started < 10
            await eventually(lambda: _is(http, "synced"))
            history = (await http.get("/consolidate/status")).json()["history"]
            assert any(h["mode"] == "sync" and h["trigger"] == "scheduled" and h["results"].get("repaired")
                       for h in history)
    finally:
        await running.runner.stop()


async def test_a_full_dry_run_counts_what_the_full_run_then_forgets(tuned) -> None:
    """A full run decays, then forgets by the decayed relevance. Its dry run wrote no
    relevance, so its forget step read the stored (undecayed) values and reported nothing to
    forget — and the real run then archived memories. The dry run now forgets by the
    relevance its own decay computed."""
    graph = tuned.ctx.graph
    async with tuned.http() as http:
        old = [await _store(http, f"A stale note number {i} about a long gone parking spot.", importance=0.05,
                            timestamp="2019-03-01T00:00:00Z") for i in range(3)]
        await _store(http, "The on-call rotation changes every Monday.", importance=0.9)
        dry = await _consolidate(http, "full", True)
        rows = await graph.ro_query("MATCH (m:Memory) WHERE m.id IN $ids RETURN m.state, m.relevance_score",
                                    {"ids": old})
        assert rows and all(state == "ACTIVE" and score == 1.0 for state, score in rows), rows  # nothing written
        real = await _consolidate(http, "full", False)
        assert real["results"]["archived"] == len(old), real
        assert dry["results"]["archived"] == real["results"]["archived"], (dry, real)
        assert dry["results"]["deleted"] == real["results"]["deleted"] == 0
        # The next pair may delete what that run archived: the dry run counts the same.
        dry = await _consolidate(http, "full", True)
        real = await _consolidate(http, "full", False)
        assert dry["results"]["deleted"] == real["results"]["deleted"], (dry, real)


async def test_clusters_and_creative_links_leave_out_facts_that_are_not_valid_now(tuned) -> None:
    """An ACTIVE memory whose valid window closed (an expired fact) or opens later was
    summarised into a MetaPattern with current ones (a pattern built partly of facts no
    longer true), and creative links were drawn to it. Both read current memories only."""
    graph = tuned.ctx.graph
    async with tuned.http() as http:
        current = [await _store(http, t) for t in (
            "The espresso machine on floor two makes great coffee.",
            "Coffee from the floor two espresso machine is the best in the office.",
            "Everyone queues for the espresso machine coffee on floor two each morning.")]
        expired = await _store(http, "The floor two espresso machine coffee is the best in the building.",
                               t_valid="2023-01-01T00:00:00Z", t_invalid="2024-01-01T00:00:00Z")
        future = await _store(http, "The floor two espresso machine will make the office's coffee each morning.",
                              t_valid="2099-01-01T00:00:00Z")
        for mid in [*current, expired, future]:
            await eventually(lambda mid=mid: _enriched(http, mid))
        body = await _consolidate(http, "cluster", False)
        assert body["results"]["meta_patterns"] == 1, body
        [(meta,)] = await graph.ro_query("MATCH (m:Memory {type: 'MetaPattern'}) RETURN m.id")
        members = await graph.ro_query("MATCH (m:Memory)-[:PART_OF]->(p:Memory {id: $id}) RETURN m.id", {"id": meta})
        assert sorted(r[0] for r in members) == sorted(current)
        await _consolidate(http, "creative", False)
        linked = await graph.ro_query("MATCH (a:Memory)-[:DISCOVERED]-(b:Memory) WHERE a.id IN $ids RETURN b.id",
                                      {"ids": [expired, future]})
        assert linked == [], linked


async def test_cluster_runs_at_once_write_one_pattern_links_need_live_ends_and_a_cancelled_run_says_so(tuned) -> None:
    """Break-it review of consolidation:

    * four ``cluster`` runs at once each checked for the cluster's MetaPattern, found none and
      wrote one: three copies of one pattern. The check and the write are one query now;
    * ``creative`` / ``cluster`` matched their edges' ends by id and scope only: a memory
      deleted while a run read its vectors got a DISCOVERED or PART_OF edge ("edges need
      live ends", README);
    * a run cancelled by its caller's deadline was recorded as a success with partial counts."""
    import asyncio

    graph = tuned.ctx.graph
    texts = ["The espresso machine on floor three brews the strongest coffee.",
             "Coffee from the floor three espresso machine is the strongest in the building.",
             "Everyone lines up at the floor three espresso machine for strong coffee."]
    async with tuned.http() as http:
        ids = await _stored_enriched(http, texts)
        runs = await asyncio.gather(*(_consolidate(http, "cluster", False) for _ in range(4)))
        metas = await graph.ro_query(
            "MATCH (p:Memory)<-[:PART_OF]-(m:Memory) WHERE p.type = 'MetaPattern' AND m.id IN $ids "
            "RETURN DISTINCT p.id", {"ids": ids})
        assert len(metas) == 1, metas
        assert sum(r["results"]["meta_patterns"] for r in runs) == 1, runs

        gone = await _store(http, "A note about the floor three espresso machine, deleted soon.")
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
    from automem.graph.outbox import Batch

    batch = Batch()
    assert not await graph.relations.create_discovered(
        [{"a": gone, "b": ids[0], "s": 0.9, "scope": "default", "reason": "test"}], time.time(), str, batch)
    assert not await graph.relations.link_members(metas[0][0], [gone], "default", time.time(), str, batch)
    assert not batch.entries and not await graph.outbox.pending()
    assert not await graph.ro_query("MATCH (m:Memory {id: $id})-[r:DISCOVERED|PART_OF]-() RETURN type(r)",
                                    {"id": gone})

    servicer = tuned.ctx.consolidate_scheduler.servicer
    for bound in (0.001, 0.005, 0.02, 0.1):  # cancelled while a step's store call is in flight
        try:
            await asyncio.wait_for(servicer.run_task("full", None, True, "manual"), timeout=bound)
        except TimeoutError:
            break
    else:
        raise AssertionError("every run finished before its deadline")
    async with tuned.http() as http:
        latest = (await http.get("/consolidate/status")).json()["history"][0]
    assert latest["mode"] == "full" and latest["error"] and "cancelled" in latest["error"], latest


async def test_metapatterns_are_nobodys_predecessor_and_decay_leaves_deleted_memories_alone(tuned) -> None:
    """Break-it review: an untagged memory stored after a cluster run got the MetaPattern (the
    newest untagged node) as its PRECEDED_BY predecessor, and the pattern's text in its
    lexical context; and decay's relevance write reached memories deleted while it ran. A
    MetaPattern is no one's predecessor and has none; relevance is not written to a deleted
    memory."""
    graph = tuned.ctx.graph
    texts = CLUSTERED
    async with tuned.http() as http:
        ids = await _stored_enriched(http, texts)
        assert (await _consolidate(http, "cluster", False))["results"]["meta_patterns"] == 1
        [(pattern,)] = await graph.ro_query("MATCH (m:Memory {type: 'MetaPattern'}) RETURN m.id")
        await eventually(lambda: _enriched(http, pattern))
        [note] = await _stored_enriched(http, ["Untagged note: lunch is at noon."])
        rows = await graph.ro_query("MATCH (m:Memory {id: $id})-[:PRECEDED_BY]->(p:Memory) RETURN p.id", {"id": note})
        assert [r[0] for r in rows] == [ids[3]], rows
        assert not await graph.ro_query("MATCH (m:Memory {id: $id})-[:PRECEDED_BY]->() RETURN m.id", {"id": pattern})

        gone = ids[3]
        before = (await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.relevance_score", {"id": gone}))[0][0]
        assert (await http.delete(f"/memory/{gone}")).status_code == 200
        await graph.memories.set_relevance([(gone, 0.123), (ids[0], 0.456)])
        scores = dict(await graph.ro_query("MATCH (m:Memory) WHERE m.id IN $ids RETURN m.id, m.relevance_score",
                                           {"ids": [gone, ids[0]]}))
        assert scores == {gone: before, ids[0]: 0.456}, scores


async def _patterns(graph) -> dict[str, tuple[str, str]]:
    """Every MetaPattern: id -> (state, state_reason)."""
    rows = await graph.ro_query("MATCH (m:Memory {type: 'MetaPattern'}) RETURN m.id, m.state, m.state_reason")
    return {r[0]: (r[1], r[2] or "") for r in rows}


async def test_a_cluster_that_changed_replaces_its_pattern_and_one_whose_members_are_gone_is_archived(tuned) -> None:
    """Break-it review: a cluster keyed by its member ids alone was summarised once, so an
    edited member left the pattern's text as it was (frozen), and a cluster that grew by one
    memory got a second pattern beside the first (overlapping summaries, both current). The key
    holds the members' content hashes now, and a new pattern that takes at least half of an
    older one's live members archives it, as does losing members below the cluster size; each
    archive is a versioned write with a MEMORY_ARCHIVED event by ``system:consolidate``."""
    graph = tuned.ctx.graph
    async with tuned.http() as http:
        ids = await _stored_enriched(http, CLUSTERED)
        assert (await _consolidate(http, "cluster", False))["results"]["meta_patterns"] == 1
        [first] = await _patterns(graph)

        # An edited member: a new summary with the new text; the first one gives way.
        edited = "The espresso machine on floor two makes great coffee, and oat milk is next to it now."
        r = await http.patch(f"/memory/{ids[0]}", json={"content": edited})
        assert r.status_code == 200, r.text
        await eventually(lambda: _enriched(http, ids[0]))
        dry = (await _consolidate(http, "cluster", True))["results"]
        assert dry == {"clusters": 1, "meta_patterns": 1, "meta_patterns_archived": 1}, dry
        assert set(await _patterns(graph)) == {first}  # the dry run wrote nothing
        body = (await _consolidate(http, "cluster", False))["results"]
        assert body == {"clusters": 1, "meta_patterns": 1, "meta_patterns_archived": 1}, body
        patterns = await _patterns(graph)
        [second] = [p for p in patterns if p != first]
        assert patterns == {first: ("ARCHIVED", f"consolidate: re-clustered into {second}"),
                            second: ("ACTIVE", "")}, patterns
        [(text,)] = await graph.ro_query("MATCH (m:Memory {id: $id}) RETURN m.content", {"id": second})
        assert "oat milk" in text
        history = await tuned.ctx.bus.events_for(first)
        archived = [e for e in history if e.type == events_pb2.EVENT_TYPE_MEMORY_ARCHIVED]
        assert [(e.actor, e.after.version) for e in archived] == [("system:consolidate", 2)], archived
        versions = (await http.get(f"/v1/memories/{first}/versions")).json()["versions"]
        assert [(v["version"], v["actor"]) for v in versions][-1] == (2, "system:consolidate"), versions
        # Unchanged since: nothing new, nothing archived.
        again = (await _consolidate(http, "cluster", False))["results"]
        assert again == {"clusters": 1, "meta_patterns": 0, "meta_patterns_archived": 0}, again

        # A grown cluster: one current pattern of four members, not a second one beside it.
        await _stored_enriched(http, ["Floor two's espresso machine makes the coffee everyone wants."])
        body = (await _consolidate(http, "cluster", False))["results"]
        assert body["meta_patterns"] == 1 and body["meta_patterns_archived"] == 1, body
        active = [p for p, (state, _) in (await _patterns(graph)).items() if state == "ACTIVE"]
        assert len(active) == 1 and active[0] not in (first, second), active
        members = await graph.ro_query("MATCH (m:Memory)-[:PART_OF]->(p:Memory {id: $id}) RETURN m.id",
                                       {"id": active[0]})
        assert len(members) == 4, members

        # Members gone: below the cluster size, the pattern is archived and none replaces it.
        for member in [r[0] for r in members][:3]:
            assert (await http.delete(f"/memory/{member}")).status_code == 200
        body = (await _consolidate(http, "cluster", False))["results"]
        assert body == {"clusters": 0, "meta_patterns": 0, "meta_patterns_archived": 1}, body
        assert (await _patterns(graph))[active[0]] == ("ARCHIVED", "consolidate: members gone")


async def test_a_scoped_or_failed_run_does_not_postpone_the_every_scope_schedule(own_service) -> None:
    """The scheduler's first run of a task is due one interval after its last run
    (automem/consolidate/scheduler.py ``_initial``). That last run was any non-dry run: a
    manual cluster of one scope, or a failed run, moved every scope's next cluster to 30 days
    after it. Only runs over every scope that ended without error count now."""
    from automem.consolidate.scheduler import Scheduler

    ctx = own_service.ctx
    runs = ctx.graph.runs
    every_scope_end = float(int(time.time()) - 20 * 86400)  # a scheduled cluster 20 days ago (whole seconds: exact in the graph)
    await runs.record("earlier", "cluster", False, every_scope_end - 5, every_scope_end, [], "*", "scheduled", "")
    async with own_service.http(**{"X-Automem-Scope": "team/one"}) as http:
        await _consolidate(http, "cluster", False)
    rows = await ctx.graph.ro_query("MATCH (r:ConsolidationRun) WHERE r.mode = 'cluster' RETURN r.scope")
    assert sorted(r[0] for r in rows) == ["*", "team/one"], rows
    await runs.record("failed", "cluster", False, time.time() - 1, time.time(), [], "*", "scheduled",
                      "StoreTimeout: the graph did not answer")
    assert (await runs.last_end_times())["cluster"] == every_scope_end
    scheduler = Scheduler(own_service.settings, ctx.consolidate_scheduler.servicer)
    await scheduler._initial()
    assert scheduler.next_run_times()["cluster"] == every_scope_end + scheduler.every["cluster"]


async def test_analyze_counts_a_patterns_live_members_only(tuned) -> None:
    """``GET /analyze`` ``patterns[].observations`` counted every PART_OF member of a
    MetaPattern, also those deleted or superseded since the cluster run. It counts the members
    that read ACTIVE now (automem/graph/memories.py ``Memories.analyze``)."""
    texts = CLUSTERED
    async with tuned.http() as http:
        ids = await _stored_enriched(http, texts)
        assert (await _consolidate(http, "cluster", False))["results"]["meta_patterns"] == 1

        async def observations() -> list[int]:
            r = await http.get("/analyze")
            assert r.status_code == 200, r.text
            return [p["observations"] for p in r.json()["analytics"]["patterns"]]
        assert await observations() == [3]
        assert (await http.delete(f"/memory/{ids[0]}")).status_code == 200
        await _store(http, "The floor two espresso machine was replaced by a drip brewer.",
                     supersedes_memory_id=ids[1])
        assert await observations() == [1]


async def test_consolidation_edges_are_audited_once(tuned) -> None:
    """DISCOVERED (creative) and PART_OF (cluster) edges left no RELATION_CREATED event: no
    history entry, no ``memory.associate`` on /stream, where ``POST /associate`` leaves both.
    Each edge a run creates gets one now; two creative runs at once each counted (and would
    have announced) the same edges. Only edges a run created are counted and announced."""
    import asyncio

    from automem.v1 import events_pb2, memory_pb2

    graph, bus = tuned.ctx.graph, tuned.ctx.bus
    texts = CLUSTERED
    async with tuned.http() as http:
        await _stored_enriched(http, texts)
        runs = await asyncio.gather(*(_consolidate(http, "creative", False) for _ in range(2)))
        edges = await graph.ro_query("MATCH (a:Memory)-[r:DISCOVERED]->(b:Memory) RETURN a.id, b.id")
        assert edges and sum(r["results"]["discovered"] for r in runs) == len(edges), ([r["results"] for r in runs], edges)
        assert (await _consolidate(http, "cluster", False))["results"]["meta_patterns"] == 1
        members = await graph.ro_query("MATCH (m:Memory)-[:PART_OF]->(p:Memory) RETURN m.id, p.id")
        assert len(members) == 3, members

        def announced(kind: int) -> list[tuple[str, str]]:
            return sorted((e.relation.source_id, e.relation.target_id) for e in events
                          if e.type == events_pb2.EVENT_TYPE_RELATION_CREATED and e.relation.type == kind
                          and e.actor == "system:consolidate")
        events = await bus.events_for(None)
        assert announced(memory_pb2.RELATION_TYPE_DISCOVERED) == sorted(map(tuple, edges))
        assert announced(memory_pb2.RELATION_TYPE_PART_OF) == sorted(map(tuple, members))
        history = (await http.get(f"/v1/memories/{members[0][0]}/history")).json()["events"]
        assert any(e["type"] == "EVENT_TYPE_RELATION_CREATED" and e["relation"]["target_id"] == members[0][1]
                   for e in history), history


async def test_snapshot_totals_count_what_the_snapshot_may_show(tuned) -> None:
    """Break-it review: in a clustered scope the snapshot's totals counted the MetaPattern and
    its PART_OF edges, which it never returns as nodes (total_nodes 6 against 5 returned,
    unsampled). The totals leave them out, now and at a past known_at."""
    from datetime import UTC, datetime

    texts = CLUSTERED
    async with tuned.http() as http:
        await _stored_enriched(http, texts)
        assert (await _consolidate(http, "cluster", False))["results"]["meta_patterns"] == 1
        after = datetime.now(UTC).isoformat()
        for params in ({}, {"known_at": after}):
            body = (await http.get("/graph/snapshot", params=params)).json()
            stats = body["stats"]
            assert stats["sampled"] is False and stats["total_nodes"] == stats["returned_nodes"] == 4, (params, stats)
            assert stats["total_edges"] == stats["returned_edges"], (params, stats)


async def test_a_run_is_in_the_history_from_its_start(tuned) -> None:
    """A run was recorded only when it ended, so a process killed during it left no trace in
    ``/consolidate/status`` (break-it review). It is recorded as not finished when it starts
    and replaced by its outcome at the end. Held here inside its step (another creative
    run's turn: ``Tasks.linking``) as a killed process would leave it."""
    import asyncio

    servicer = tuned.ctx.consolidate_scheduler.servicer
    async with tuned.http() as http:
        await _stored_enriched(http, CLUSTERED)

        async def status() -> list[dict]:
            r = await http.get("/consolidate/status")
            return [h for h in r.json()["history"] if h["mode"] == "creative" and h["trigger"] == "held"]

        async with servicer.tasks.linking:
            run = asyncio.ensure_future(servicer.run_task("creative", None, False, "held"))
            held = await eventually(status)
            assert len(held) == 1 and held[0]["error"].startswith("not finished"), held
            assert not run.done()
        done = await run
        after = await status()
        assert [(h["run_id"], h["error"]) for h in after] == [(done.run_id, None)], after


async def test_the_events_a_write_kept_are_published_when_its_process_died_before_it_could(tuned) -> None:
    """A consolidation write keeps its events in its own graph query (automem/graph/outbox.py);
    here nobody commits the batch, as when the process was killed right after the write: the
    drain of a running process moves it to the outbox and publishes it, once."""
    from automem.consolidate.tasks import Tasks
    from automem.graph.outbox import Batch
    from automem.v1 import events_pb2

    graph, bus = tuned.ctx.graph, tuned.ctx.bus
    async with tuned.http() as http:
        ids = await _stored_enriched(http, CLUSTERED[:3])
    batch = Batch()
    created = await graph.relations.link_members(ids[0], ids[1:], "default", time.time(), Tasks._relation_event, batch)
    assert len(created) == 2 and len(batch.entries) == 2

    async def published() -> list[tuple[str, str]]:
        edges = sorted((e.relation.source_id, e.relation.target_id) for e in await bus.events_for(None)
                       if e.type == events_pb2.EVENT_TYPE_RELATION_CREATED and e.relation.target_id == ids[0])
        return edges if len(edges) >= 2 and not await graph.outbox.pending() else []
    assert await eventually(published) == sorted((mid, ids[0]) for mid in ids[1:])
