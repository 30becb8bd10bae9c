"""Event-stream retention (automem/common/bus.py): the limits are applied to the stream on
the real NATS server, and every reader of the stream says when history older than the
retention is gone (history, backup) or stops depending on it (enrichment via the sync check)."""

from __future__ import annotations

import asyncio
import json

import pytest
from nats.js.api import DiscardPolicy
from pydantic import ValidationError

from automem.common import backup
from automem.common.bus import Bus
from automem.common.settings import Settings
from tests.conftest import eventually, start_service

#: Every target but enrich: events wait on the stream untaken.
NO_ENRICH = ["ingest", "recall", "consolidate", "gateway"]


async def _stream_config(settings: Settings):
    bus = Bus(settings)
    await bus.connect()
    try:
        return (await bus.js.stream_info(settings.stream_name)).config
    finally:
        await bus.close()


async def test_stream_is_created_and_updated_with_the_retention_settings(settings) -> None:
    config = await _stream_config(settings.model_copy(update={"event_retention_days": 2.5,
                                                              "event_retention_bytes": 5_000_000}))
    assert config.max_age == pytest.approx(2.5 * 86400)
    assert config.max_bytes == 5_000_000
    assert config.discard == DiscardPolicy.OLD
    assert config.duplicate_window == pytest.approx(120.0)
    # A later start with other settings updates the existing stream; 0 = unlimited.
    config = await _stream_config(settings.model_copy(update={"event_retention_days": 0, "event_retention_bytes": 0}))
    assert not config.max_age and config.max_bytes == -1
    # The documented defaults: 90 days, 1 GiB.
    # (The settings fixture turns the byte limit off for the shared test server: tests/conftest.py.)
    config = await _stream_config(settings.model_copy(update={
        "event_retention_bytes": type(settings).model_fields["event_retention_bytes"].default}))
    assert config.max_age == pytest.approx(90 * 86400) and config.max_bytes == 1 << 30


def test_retention_shorter_than_the_dedup_window_is_refused() -> None:
    with pytest.raises(ValidationError, match="de-duplication window"):
        Settings(event_retention_days=60 / 86400)
    with pytest.raises(ValidationError):
        Settings(event_retention_bytes=-1)


async def _store(http, content: str, **fields) -> str:
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _first_seq(running) -> int:
    return (await running.ctx.bus.js.stream_info(running.settings.stream_name)).state.first_seq


async def test_history_and_backup_say_when_retention_removed_older_events(settings) -> None:
    running = await start_service(settings.model_copy(update={"event_retention_bytes": 30_000,
                                                              "sync_check_interval_seconds": 0}), NO_ENRICH)
    try:
        async with running.http() as http:
            trimmed_id = await _store(http, "The first note, its creation event will be trimmed", tags=["old"])
            edited = await _store(http, "A note edited later", tags=["old"])
            filler = 0
            while await _first_seq(running) < 4:  # both creations gone by size
                await _store(http, f"filler note number {filler} " + "padding " * 40, tags=["filler"])
                filler += 1
                assert filler < 500, "the stream never trimmed: max_bytes not applied"
            r = await http.patch(f"/memory/{edited}", json={"content": "A note edited later, now changed"})
            assert r.status_code == 200, r.text
            kept = await _store(http, "A note stored after the trimming", tags=["new"])

            h = (await http.get(f"/v1/memories/{edited}/history")).json()
            assert h["truncated"] is True and [e["type"] for e in h["events"]] == ["EVENT_TYPE_MEMORY_UPDATED"]
            assert h["retained_since"] is not None
            gone = await http.get(f"/v1/memories/{trimmed_id}/history")
            assert gone.status_code == 200, gone.text  # the memory exists: empty, truncated history
            assert gone.json()["events"] == [] and gone.json()["truncated"] is True
            h = (await http.get(f"/v1/memories/{kept}/history")).json()
            assert h["truncated"] is False and h["events"][0]["type"] == "EVENT_TYPE_MEMORY_CREATED"
            assert (await http.get("/v1/memories/no-such-memory/history")).status_code == 404

        records = [r async for r in backup.export_records(running.ctx.graph, running.ctx.bus)]
        header = records[0]
        assert header["events_truncated"] is True and header["events_retained_since"] > 0
        events = [r for r in records if r["kind"] == "event"]
        assert len(events) == (await running.ctx.bus.js.stream_info(settings.stream_name)).state.messages
        # Restored (forced), the history is still the partial one the backup held; and a forced
        # restore's own purge is not counted as a loss (tests/integration/test_backup_roundtrip.py).
        async with running.http() as http:
            body = "".join(json.dumps(r) + "\n" for r in records).encode()
            done = await http.post("/v1/backup:restore", params={"force": "true"}, content=body)
            assert done.status_code == 200, done.text
        again = [r async for r in backup.export_records(running.ctx.graph, running.ctx.bus)]
        assert again[0]["events_truncated"] is True
    finally:
        await running.runner.stop()


async def test_sync_requeues_enrichment_whose_events_retention_removed(settings) -> None:
    """A memory stored while enrichment was down, whose event the retention removed before
    the consumer took it, is found by the sync check and enriched after all. Vectors are off,
    so the drift part of the check (missing points) cannot be what re-queues it."""
    small = settings.model_copy(update={"event_retention_bytes": 30_000, "sync_check_interval_seconds": 0,
                                        "qdrant_url": "disabled"})
    running = await start_service(small, NO_ENRICH)
    try:
        async with running.http() as http:
            lost = await _store(http, "Alice Johnson moved the meeting to Berlin", tags=["lost"])
            filler = 0
            while await _first_seq(running) < 2:
                await _store(http, f"filler {filler} " + "padding " * 40, tags=["filler"])
                filler += 1
                assert filler < 500
            r = await http.post("/admin/sync", params={"dry_run": "true"})
            assert r.status_code == 200, r.text
            assert r.json()["unenriched_past_retention"] >= 1
    finally:
        await running.runner.stop()
    running = await start_service(small)  # now with the enrich target
    try:
        graph = running.ctx.graph

        async def status():
            return (await graph.memories.get(lost, "default")).enrichment_status
        async with running.http() as http:
            r = await http.post("/admin/sync")
            assert r.status_code == 200, r.text
            assert r.json()["unenriched_past_retention"] >= 1

            async def enriched():
                return await status() == 2  # ENRICHMENT_STATUS_DONE
            await eventually(enriched, timeout=90)
    finally:
        await running.runner.stop()


async def test_history_of_a_memory_whose_creation_the_retention_removed_stays_truncated_after_the_sweep(
        settings) -> None:
    """The pending sweep found a memory still pending whose creation event the retention had
    removed and published a MEMORY_CREATED as ``system:pending-sweep``: its history then
    showed that one event, the sweep as creator at the sweep's time, ``truncated: false``.
    The sweep now re-queues such a memory (no history event), and a history that begins with
    a sweep's CREATED for a memory older than the oldest held event (as an older version's
    sweep published) says ``truncated`` too. A memory stored after the trimming keeps a
    complete history."""
    from automem.common.lifecycle import make_event
    from automem.enrich.pending import PendingSweep
    from automem.v1 import events_pb2

    sweep_actor = "system:pending-sweep"
    running = await start_service(settings.model_copy(update={"event_retention_bytes": 30_000,
                                                              "pending_sweep_min_age_seconds": 0.0}), NO_ENRICH)
    try:
        ctx = running.ctx
        async with running.http() as http:
            swept = await _store(http, "Its creation event will be trimmed, then the sweep finds it", tags=["old"])
            stand_in = await _store(http, "An older sweep published a creation for this one", tags=["old"])
            fillers: list[str] = []
            while await _first_seq(running) < 3:  # both creations gone by size
                fillers.append(await _store(http, f"filler note number {len(fillers)} " + "padding " * 40))
                assert len(fillers) < 500, "the stream never trimmed: max_bytes not applied"
            for filler in fillers:  # not pending any more: the sweep's events would trim the stream again
                assert (await http.delete(f"/memory/{filler}")).status_code == 200
            # The sweep's cutoff comes from the enrichment consumer (not running here): one that
            # has taken everything, so every pending memory is an orphan to it.
            last = (await ctx.bus.retention()).last_seq
            await ctx.bus.start_consumer_after("sweep-probe", last)
            probe = await ctx.bus.pull_subscribe("sweep-probe", filter_subject=ctx.bus.subjects.memory_all)
            sweep = PendingSweep(running.settings.model_copy(update={"pending_sweep_min_age_seconds": 0.0}),
                                 ctx.bus, ctx.graph, ctx.publisher, probe)
            assert await sweep.sweep_once() == 2
            republished = [e for e in await ctx.bus.events_for(swept) if e.actor == sweep_actor]
            assert len(republished) == 1 and republished[0].type == events_pb2.EVENT_TYPE_MEMORY_UPDATED
            assert republished[0].before == republished[0].after  # a re-queue: enrichment takes it
            h = (await http.get(f"/v1/memories/{swept}/history")).json()
            assert h["truncated"] is True and h["retained_since"] is not None, h
            assert all(e["actor"] != sweep_actor for e in h["events"]), h

            # As an older version's sweep published it: a creation by the sweep, now.
            memory = await ctx.graph.memories.get(stand_in, "default")
            await ctx.bus.publish_event(make_event(events_pb2.EVENT_TYPE_MEMORY_CREATED, before=None,
                                                   after=memory, actor=sweep_actor, content_changed=True))
            h = (await http.get(f"/v1/memories/{stand_in}/history")).json()
            assert h["events"][0]["actor"] == sweep_actor
            assert h["truncated"] is True, h

            kept = await _store(http, "Stored after the trimming", tags=["new"])
            h = (await http.get(f"/v1/memories/{kept}/history")).json()
            assert h["truncated"] is False and h["events"][0]["type"] == "EVENT_TYPE_MEMORY_CREATED"
            await probe.unsubscribe()
    finally:
        await running.runner.stop()


async def test_enrichment_status_counts_memories_whose_events_the_retention_removed_as_pending(settings) -> None:
    """``/enrichment/status`` and ``/health`` answered ``pending`` = the queue depth (events
    waiting): memories whose events the retention removed before enrichment took them were
    not counted, so 0 pending while hundreds waited. ``pending`` now counts the memories
    still to enrich in the graph. The consumer is stopped and the sweep off: none is enriched
    meanwhile."""
    running = await start_service(settings.model_copy(update={"event_retention_bytes": 30_000,
                                                              "pending_sweep_interval_seconds": 0}))
    try:
        ctx = running.ctx
        ctx.enrich_consumer.stop()
        await asyncio.wait([ctx.enrich_task], timeout=15)
        async with running.http() as http:
            stored = [await _store(http, "Stored while enrichment is stopped")]
            while await _first_seq(running) < 3:
                stored.append(await _store(http, f"filler note number {len(stored)} " + "padding " * 40))
                assert len(stored) < 500, "the stream never trimmed: max_bytes not applied"
            body = (await http.get("/enrichment/status")).json()
            assert body["queue_depth"] < len(stored)  # the removed events are not queued
            assert body["pending"] == len(stored), body
            health = (await http.get("/health")).json()
            assert health["enrichment"]["pending"] == len(stored), health
    finally:
        await running.runner.stop()


async def test_the_sweep_sends_again_what_the_retention_removed_before_enrichment_took_it(settings) -> None:
    """Break-it re-check: with a small retention, memories stayed pending for ten minutes. No
    sweep ran while the consumer's next event was one the retention had removed (its read
    failed), and a memory whose re-queue the retention removed in turn waited out
    RESEND_AFTER_SECONDS. The sweep now takes the stream's first held event as the first
    waiting one, and sends a removed re-queue again at its next round, under a new event id
    (the stream would drop the old id as a duplicate)."""
    from automem.enrich.pending import PendingSweep

    running = await start_service(settings.model_copy(update={"event_retention_bytes": 30_000,
                                                              "pending_sweep_min_age_seconds": 0.0}), NO_ENRICH)
    try:
        ctx = running.ctx
        # A consumer that never acknowledges, as enrichment that fell behind: its next event is
        # the first one ever published.
        await ctx.bus.start_consumer_after("sweep-behind", 0)
        behind = await ctx.bus.pull_subscribe("sweep-behind", filter_subject=ctx.bus.subjects.memory_all)
        sweep = PendingSweep(running.settings, ctx.bus, ctx.graph, ctx.publisher, behind)
        async with running.http() as http:
            pending = [await _store(http, "Waiting for enrichment while the stream trims", tags=["behind"])]
            while await _first_seq(running) < 3:
                pending.append(await _store(http, f"behind note {len(pending)} " + "padding " * 40))
                assert len(pending) < 500, "the stream never trimmed: max_bytes not applied"
            assert await sweep.cutoff() is not None
            first = await sweep.sweep_once()
            assert first >= 1, first
            # Trim the sweep's re-queues away in turn, then sweep again at once.
            last = (await ctx.bus.retention()).last_seq  # the re-queues are at most this
            later = 0
            while (await ctx.bus.retention()).first_seq <= last:
                later += 1
                await _store(http, f"later note number {later} " + "padding " * 60)
            again = await sweep.sweep_once()
            assert again >= 1, again
            ids = [e.event_id for e in await ctx.bus.events_for(pending[-1]) if e.actor == "system:pending-sweep"]
            assert len(ids) == 1, ids  # the second sending, under an id of its own, is held
        await behind.unsubscribe()
    finally:
        await running.runner.stop()
