"""ConsolidateService: decay and graph-vector drift check/repair.

Decay (AutoMem's consolidation): relevance = exp(-age_days / half_life_days · ln 2)
weighted by importance: ``relevance = importance_floor + (1 - importance_floor) · 2^(-age/half_life)``
with ``importance_floor = 0.5 · importance`` — an exponential forgetting curve (Ebbinghaus)
whose floor keeps important memories relevant; half-life 30 days.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from automem.v1 import consolidate_service_pb2, consolidate_service_pb2_grpc, events_pb2

from services.common.auth import header_scope, require_role, resolve_scope
from services.common.errors import InvalidArgument, PermissionDenied
from services.common.graph import GraphStore
from services.common.model import node_to_memory, ts
from services.common.outbox import EventPublisher
from services.common.settings import Settings
from services.common.vectors import VectorFilter, VectorStore
from services.ingest.servicer import make_event

MODES = ("full", "decay", "creative", "cluster", "forget")
#: Half-life of relevance in days.
HALF_LIFE_DAYS = 30.0


def relevance(importance: float, age_days: float, half_life_days: float = HALF_LIFE_DAYS) -> float:
    """Decayed relevance in 0..1 (see the module docstring for the formula)."""
    floor = 0.5 * importance
    return floor + (1.0 - floor) * 2.0 ** (-max(age_days, 0.0) / half_life_days)


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

    async def RunConsolidation(self, request, context):
        """Run one task now (``decay`` and ``full`` are implemented; the others report
        nothing to do). ``dry_run`` computes without writing. Run saved to history."""
        principal = require_role("admin")
        # Every scope only for a key that may use every scope; else the one it names or its default.
        everything = not request.scope and not header_scope.get() and principal.allows_all()
        scope = None if everything else resolve_scope(request.scope)
        mode = (request.mode or "full").lower()
        if mode not in MODES:
            raise InvalidArgument(f"mode: one of {', '.join(MODES)}", field="mode")
        run = consolidate_service_pb2.ConsolidationRun(run_id=str(uuid.uuid4()), mode=mode, dry_run=request.dry_run)
        run.start_time.CopyFrom(ts(time.time()))
        if mode in ("decay", "full"):
            run.counts["decayed"] = await self._decay(scope, request.dry_run)
        run.end_time.CopyFrom(ts(time.time()))
        await self.graph.query(
            "CREATE (r:ConsolidationRun {run_id: $id, mode: $mode, dry_run: $dry, start_time: $s, end_time: $e, "
            "counts: $counts, scope: $scope})",
            {"scope": scope or "*", "id": run.run_id, "mode": mode, "dry": request.dry_run, "s": run.start_time.seconds,
             "e": run.end_time.seconds, "counts": [f"{k}={v}" for k, v in run.counts.items()]})
        return consolidate_service_pb2.RunConsolidationResponse(run=run)

    async def _decay(self, scope: str | None, dry_run: bool) -> int:
        rows = await self.graph.ro_query(
            "MATCH (m:Memory) WHERE ($scope IS NULL OR m.scope = $scope) AND m.state = 'ACTIVE' "
            "RETURN m.id, m.importance, m.event_time, m.last_access_time", {"scope": scope})
        now = time.time()
        updates = []
        for mid, importance, event_time, last_access in rows:
            ref = max(float(event_time or 0.0), float(last_access or 0.0))
            updates.append({"id": mid, "r": relevance(float(importance or 0.0), (now - ref) / 86400.0)})
        if not dry_run and updates:
            await self.graph.query("UNWIND $rows AS row MATCH (m:Memory {id: row.id}) SET m.relevance_score = row.r",
                                   {"rows": updates})
        return len(updates)

    async def GetConsolidationStatus(self, request, context):
        """Past runs, newest first, paged."""
        principal = require_role("reader")
        # Runs of the caller's scope only, unless its key may use every scope.
        scope = None if principal.allows_all() and not header_scope.get() else resolve_scope(None)
        size = request.page_size or 20
        try:
            offset = int(request.page_token or 0)
        except ValueError:
            raise InvalidArgument("page_token: not a token this service returned", field="page_token") from None
        rows = await self.graph.ro_query(
            "MATCH (r:ConsolidationRun) WHERE $scope IS NULL OR r.scope = $scope "
            "RETURN r.run_id, r.mode, r.dry_run, r.start_time, r.end_time, r.counts "
            "ORDER BY r.start_time DESC SKIP $skip LIMIT $limit",
            {"skip": max(offset, 0), "limit": size + 1, "scope": scope})
        runs = []
        for r in rows[:size]:
            run = consolidate_service_pb2.ConsolidationRun(run_id=r[0], mode=r[1], dry_run=bool(r[2]))
            run.start_time.CopyFrom(ts(float(r[3])))
            run.end_time.CopyFrom(ts(float(r[4])))
            for item in r[5] or []:
                k, _, v = item.partition("=")
                run.counts[k] = int(v)
            runs.append(run)
        return consolidate_service_pb2.GetConsolidationStatusResponse(
            runs=runs, next_page_token=str(offset + size) if len(rows) > size else "")

    async def CheckSync(self, request, context):
        """Compare current memories with vector points: missing points, orphan points and
        payloads that differ from the builder's. ``repair`` (admin) re-queues missing and
        stale memories for enrichment (the only writer of points) and deletes orphans."""
        principal = require_role("admin" if request.repair else "reader")
        if not principal.allows_all():
            raise PermissionDenied("sync spans every scope: it needs a key allowed on all scopes ('*')")
        if self.vectors is None:
            return consolidate_service_pb2.CheckSyncResponse(sync_status="vectors_disabled")
        from services.common.payload import build_payload

        rows = await self.graph.ro_query(
            "MATCH (m:Memory) WHERE m.state IN ['ACTIVE', 'SUPERSEDED', 'PENDING_REVIEW', 'ARCHIVED'] "
            "RETURN properties(m)")
        memories = {r[0]["id"]: node_to_memory(r[0]) for r in rows}
        points = {}
        offset = None
        while True:
            page, offset = await self.vectors.scroll(VectorFilter(), limit=512, offset=offset)
            points.update({p.id: p for p in page})
            if offset is None:
                break
        missing = [mid for mid in memories if mid not in points]
        orphans = [pid for pid in points if pid not in memories]
        stale = []
        for mid, point in points.items():
            memory = memories.get(mid)
            if memory is None:
                continue
            memory.embedding_model = point.payload.get("embedding_model", "")
            if build_payload(memory) != point.payload:
                stale.append(mid)
        repaired = 0
        if request.repair:
            if orphans:
                await self.vectors.delete(orphans)
                repaired += len(orphans)
            for mid in missing + stale:
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
        return consolidate_service_pb2.CheckSyncResponse(
            sync_status=status, missing_vectors=len(missing), orphaned_vectors=len(orphans),
            stale_payloads=len(stale), repaired=repaired)
