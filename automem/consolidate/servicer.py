"""ConsolidateService: decay, creative associations, clustering, forget (tasks in
:mod:`automem.consolidate.tasks`; decay's formula in :func:`tasks.relevance`), run history
(``:ConsolidationRun`` nodes), graph-vector drift check/repair, and the scheduler
(:mod:`automem.consolidate.scheduler`) that runs them periodically.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from automem.common.auth import header_scope, require_role, resolve_scope
from automem.common.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from automem.common.lifecycle import make_activity, make_event
from automem.common.model import Memory, ts
from automem.common.outbox import EventPublisher
from automem.common.settings import Settings
from automem.common.timeouts import long_running
from automem.consolidate.tasks import HALF_LIFE_DAYS, Tasks, relevance
from automem.graph import GraphStore
from automem.v1 import consolidate_service_pb2, consolidate_service_pb2_grpc, events_pb2
from automem.vectors import VectorFilter, VectorStore

log = logging.getLogger(__name__)

MODES = ("full", "decay", "creative", "cluster", "forget")
#: Runs per page of GetConsolidationStatus: ``page_size`` 0 (unset) is the default, a larger
#: one than the maximum is read as the maximum (AIP-158).
STATUS_PAGE_DEFAULT = 20
STATUS_PAGE_MAX = 100
#: Largest offset a status page token holds (int32; the tokens are the decimal offsets
#: this service hands out in ``next_page_token``).
STATUS_OFFSET_MAX = 2**31 - 1
__all__ = ["HALF_LIFE_DAYS", "MODES", "ConsolidateServicer", "relevance"]


def status_page_size(page_size: int) -> int:
    """The runs a GetConsolidationStatus page holds for ``page_size``: 0 (unset) is
    :data:`STATUS_PAGE_DEFAULT`, above :data:`STATUS_PAGE_MAX` is the maximum (AIP-158: the
    API coerces a size larger than its maximum).

    Raises:
        InvalidArgument: naming ``page_size`` when it is negative.
    """
    if page_size < 0:
        raise InvalidArgument(f"page_size: must not be negative (0 = {STATUS_PAGE_DEFAULT}, at most "
                              f"{STATUS_PAGE_MAX})", field="page_size")
    return min(page_size or STATUS_PAGE_DEFAULT, STATUS_PAGE_MAX)


def status_offset(page_token: str) -> int:
    """The offset a GetConsolidationStatus ``page_token`` continues at ("" = 0): the
    decimal digits of a ``next_page_token``, at most :data:`STATUS_OFFSET_MAX`.

    Raises:
        InvalidArgument: naming ``page_token`` for anything else ("-1", "1e3", " 5", a number
        past FalkorDB's integers).
    """
    if not page_token:
        return 0
    if not (page_token.isascii() and page_token.isdigit()) or len(page_token) > 10 \
            or int(page_token) > STATUS_OFFSET_MAX:
        raise InvalidArgument("page_token: not a token this service returned", field="page_token")
    return int(page_token)


#: ``error`` of a run recorded at its start: it stays so when the process stopped during it.
UNFINISHED = "not finished: still running, or the process stopped during the run"


@dataclass
class RunHistory:
    """Persisted run history lives in the graph (``:ConsolidationRun`` nodes)."""

    runs: list[consolidate_service_pb2.ConsolidationRun] = field(default_factory=list)


class ConsolidateServicer(consolidate_service_pb2_grpc.ConsolidateServiceServicer):
    """gRPC ConsolidateService over the graph and vector store."""

    def __init__(self, settings: Settings, graph: GraphStore, vectors: VectorStore | None,
                 publisher: EventPublisher) -> None:
        self.settings = settings
        self.graph = graph
        self.vectors = vectors
        self.publisher = publisher
        self.tasks = Tasks(settings, graph, vectors, publisher)
        #: Set by the module: the running scheduler (next run times for the status).
        self.scheduler = None
        #: The last full sync check: (time, status).
        self.last_check: tuple[float, str] | None = None

    async def RunConsolidation(self, request, context):
        """Run one task now: decay, creative, cluster, forget, or full (decay, creative,
        cluster, and forget when enabled). ``dry_run`` computes and counts without writing;
        forget without dry run needs ``AUTOMEM_FORGET_ENABLED``. Run saved to history."""
        principal = require_role("admin")
        # Every scope only for a key that may use every scope; else the one it names or its default.
        everything = not request.scope and not header_scope.get() and principal.allows_all()
        scope = None if everything else resolve_scope(request.scope)
        mode = (request.mode or "full").lower()
        if mode not in MODES:
            raise InvalidArgument(f"mode: one of {', '.join(MODES)}", field="mode")
        if mode == "forget" and not request.dry_run and not self.settings.forget_enabled:
            raise FailedPrecondition("forget is off (AUTOMEM_FORGET_ENABLED=false); a dry run shows what it would do")
        run = await self.run_task(mode, scope, request.dry_run, "manual")
        return consolidate_service_pb2.RunConsolidationResponse(run=run)

    @long_running
    async def run_task(self, mode: str, scope: str | None, dry_run: bool,
                       trigger: str) -> consolidate_service_pb2.ConsolidationRun:
        """Run ``mode`` (``sync`` too: the drift check with repair) and persist the run."""
        run = consolidate_service_pb2.ConsolidationRun(run_id=str(uuid.uuid4()), mode=mode, dry_run=dry_run,
                                                       trigger=trigger, scope=scope or "*")
        run.start_time.CopyFrom(ts(time.time()))
        steps = {"full": ["decay", "creative", "cluster"] + (["forget"] if self.settings.forget_enabled else []),
                 "sync": []}.get(mode, [mode])
        decayed: dict[str, float] = {}  # a dry run's decay, for its forget (Tasks.forget)
        # Recorded first as not finished: a process killed during the run leaves it so in the
        # history (it was missing from /consolidate/status); the end replaces it.
        # Inside the try: a run cancelled while this record is written is still recorded as
        # cancelled by the end's record (the start's could land and be the last word).
        start = run.start_time.seconds + run.start_time.nanos / 1e9
        try:
            await self.graph.runs.record(run.run_id, mode, dry_run, start, start, [], scope or "*", trigger,
                                         UNFINISHED)
            for step in steps:
                if step == "decay" and dry_run:
                    run.counts.update(await self.tasks.decay(scope, dry_run, decayed))
                elif step == "forget" and dry_run and "decay" in steps:
                    run.counts.update(await self.tasks.forget(scope, dry_run, decayed))
                else:
                    run.counts.update(await getattr(self.tasks, step)(scope, dry_run))
            if mode == "sync":
                result = await self.check_sync(repair=not dry_run)
                run.counts.update({"missing_vectors": result.missing_vectors, "repaired": result.repaired,
                                   "orphaned_vectors": result.orphaned_vectors,
                                   "stale_payloads": result.stale_payloads,
                                   "unenriched_past_retention": result.unenriched_past_retention})
        except Exception as exc:
            run.error = f"{type(exc).__name__}: {exc}"
            if trigger == "manual":
                raise
        except asyncio.CancelledError:
            # The caller's deadline passed or the service is stopping: the counts are those
            # of the steps done so far; recorded as a failed run, not a finished one.
            run.error = "cancelled before it finished (the caller's deadline passed or the service stopped)"
            raise
        finally:
            run.end_time.CopyFrom(ts(time.time()))
            await self.graph.runs.record(
                run.run_id, mode, dry_run, run.start_time.seconds + run.start_time.nanos / 1e9,
                run.end_time.seconds + run.end_time.nanos / 1e9, [f"{k}={v}" for k, v in run.counts.items()],
                scope or "*", trigger, run.error)
            await self._publish_run(run, steps)
        return run

    async def _publish_run(self, run: consolidate_service_pb2.ConsolidationRun, steps: list[str]) -> None:
        """The ``consolidation.run`` activity event of a finished run, for ``GET /stream``,
        with AutoMem's payload (task_type, affected_count, elapsed_ms, success,
        next_scheduled, steps: automem/consolidation/runtime_scheduler.py in
        verygoodplugins/automem) plus run_id, dry_run and trigger; in the run's scope ("*" =
        every scope). Best effort: a failed publish is logged (the run is in the history)."""
        bus = getattr(self.publisher, "bus", None)
        if bus is None or not bus.connected:
            return
        upcoming = self.scheduler.next_run_times().get(run.mode) if self.scheduler is not None else None
        elapsed = (run.end_time.seconds - run.start_time.seconds) * 1000 + (
            run.end_time.nanos - run.start_time.nanos) / 1e6
        event = make_activity("consolidation.run", run.scope, {
            "task_type": run.mode, "affected_count": int(sum(run.counts.values())), "elapsed_ms": round(elapsed),
            "success": not run.error, "next_scheduled": datetime.fromtimestamp(upcoming, UTC).isoformat() if upcoming else "unknown",
            "steps": steps or [run.mode], "run_id": run.run_id, "dry_run": run.dry_run, "trigger": run.trigger},
            actor=None if run.trigger == "manual" else "system:consolidate")
        try:
            await bus.publish_activity(event)
        except Exception as exc:  # noqa: BLE001 - the run is recorded anyway
            log.warning("consolidation event not published", extra={"error": repr(exc)})

    async def _decay(self, scope: str | None, dry_run: bool) -> int:
        return (await self.tasks.decay(scope, dry_run))["decayed"]

    async def GetConsolidationStatus(self, request, context):
        """Past runs, newest first, paged as AIP-158: ``page_size`` 0 = 20
        (:data:`STATUS_PAGE_DEFAULT`), above :data:`STATUS_PAGE_MAX` (100) read as 100;
        ``page_token`` from ``next_page_token`` (empty = the first page; an empty
        ``next_page_token``: the last). INVALID_ARGUMENT naming ``page_size`` when negative,
        ``page_token`` when it is not one this service hands out (:func:`status_offset`)."""
        principal = require_role("reader")
        # Runs of the caller's scope only, unless its key may use every scope.
        scope = None if principal.allows_all() and not header_scope.get() else resolve_scope(None)
        size = status_page_size(request.page_size)
        offset = status_offset(request.page_token)
        rows = await self.graph.runs.page(scope, offset, size + 1)
        runs = []
        for r in rows[:size]:
            run = consolidate_service_pb2.ConsolidationRun(run_id=r[0], mode=r[1], dry_run=bool(r[2]),
                                                           trigger=r[6] or "manual", scope=r[7] or "*", error=r[8] or "")
            run.start_time.CopyFrom(ts(float(r[3])))
            run.end_time.CopyFrom(ts(float(r[4])))
            for item in r[5] or []:
                k, _, v = item.partition("=")
                run.counts[k] = int(v)
            runs.append(run)
        response = consolidate_service_pb2.GetConsolidationStatusResponse(
            runs=runs, next_page_token=str(offset + size) if len(rows) > size else "")
        response.tick_seconds = self.settings.consolidation_tick_seconds
        if self.scheduler is not None:
            response.scheduler_running = self.scheduler.running
            for task, when in self.scheduler.next_run_times().items():
                response.next_run_time[task] = datetime.fromtimestamp(when, UTC).isoformat()
        return response

    async def CheckSync(self, request, context):
        """Compare current memories with vector points: missing points, orphan points and
        payloads that differ from the builder's. ``repair`` (admin) re-queues missing and
        stale memories for enrichment (the only writer of points) and deletes orphans."""
        principal = require_role("admin" if request.repair else "reader")
        if not principal.allows_all():
            raise PermissionDenied("sync spans every scope: it needs a key allowed on all scopes ('*')")
        return await self.check_sync(request.repair)

    @long_running
    async def check_sync(self, repair: bool) -> consolidate_service_pb2.CheckSyncResponse:
        """The drift check (and repair): every current memory has exactly its point with the
        builder's payload, and no point lacks a memory. Repair re-queues missing/stale memories
        and orphans as events: the enrichment consumer (the only writer of points) rewrites or
        deletes their points. The result is remembered for :meth:`GetSyncStatus`.

        Also (vectors enabled or not) memories whose enrichment is still PENDING although the
        stream no longer holds their last event (removed by ``event_retention_days`` /
        ``_bytes`` before the enrichment consumer took it) are counted and, with ``repair``,
        re-queued as MEMORY_UPDATED events."""
        unenriched = await self._unenriched_past_retention()
        if repair:
            for memory in unenriched:
                await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=memory,
                                                        after=memory, content_changed=True, actor="system:sync"))
        if self.vectors is None:
            return consolidate_service_pb2.CheckSyncResponse(sync_status="vectors_disabled",
                                                             unenriched_past_retention=len(unenriched),
                                                             repaired=len(unenriched) if repair else 0)
        from automem.common.payload import build_payload

        memories = await self.graph.memories.live()
        points = {}
        offset = None
        while True:
            page, offset = await self.vectors.scroll(VectorFilter(), limit=512, offset=offset)
            points.update({p.id: p for p in page})
            if offset is None:
                break
        requeued = {m.id for m in unenriched} if repair else set()
        missing = [mid for mid in memories if mid not in points and mid not in requeued]
        orphans = [pid for pid in points if pid not in memories]
        stale = []
        for mid, point in points.items():
            memory = memories.get(mid)
            if memory is None:
                continue
            memory.embedding_model = point.payload.get("embedding_model", "")
            if build_payload(memory) != point.payload:
                stale.append(mid)
        repaired = len(requeued)
        if repair:
            for pid in orphans:
                gone = Memory(id=pid)
                await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_DELETED, before=gone,
                                                        after=None, actor="system:sync"))
                repaired += 1
            for mid in [m for m in missing + stale if m not in requeued]:
                memory = memories[mid]
                await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=memory,
                                                        after=memory, content_changed=mid in missing,
                                                        actor="system:sync"))
                repaired += 1
        status = "synced"
        if orphans:
            status = "orphaned_vectors"
        if missing or stale:
            status = "drift_detected"
        self.last_check = (time.time(), "synced" if repair else status)
        return consolidate_service_pb2.CheckSyncResponse(
            sync_status=status, missing_vectors=len(missing), orphaned_vectors=len(orphans),
            stale_payloads=len(stale), repaired=repaired, unenriched_past_retention=len(unenriched))

    async def _unenriched_past_retention(self) -> list[Memory]:
        """Current-ish memories with enrichment PENDING last written before the oldest event
        the stream still holds: their event is gone, so the consumer will never see it."""
        bus = getattr(self.publisher, "bus", None)
        if bus is None or bus.js is None:
            return []
        retention = await bus.retention()
        if not retention.trimmed or retention.first_time is None:
            return []
        found = await self.graph.memories.pending_enrichment_before(retention.first_time)
        if found:
            log.warning("memories waiting for enrichment lost their events to the stream's retention",
                        extra={"count": len(found), "retained_since": retention.first_time})
        return found

    async def GetSyncStatus(self, request, context):
        """Cheap sync status for /health (no key): from the point and memory counts — fewer
        points than memories is ``drift_detected``, more is ``orphaned_vectors`` — and, when
        the counts agree, the last full check's finding (drift that leaves the counts equal)."""
        response = consolidate_service_pb2.GetSyncStatusResponse()
        if self.vectors is None:
            response.sync_status = "vectors_disabled"
            return response
        response.memory_count = await self.graph.memories.count(
            states=["ACTIVE", "SUPERSEDED", "PENDING_REVIEW", "ARCHIVED"])
        response.vector_count = await self.vectors.count()
        if response.vector_count < response.memory_count:
            response.sync_status = "drift_detected"
        elif response.vector_count > response.memory_count:
            response.sync_status = "orphaned_vectors"
        else:
            response.sync_status = self.last_check[1] if self.last_check else "synced"
        if self.last_check:
            response.last_check_time.CopyFrom(ts(self.last_check[0]))
            response.last_check_status = self.last_check[1]
        return response
