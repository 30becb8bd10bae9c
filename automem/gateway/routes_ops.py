"""Operations routes: ``/health`` (no auth), enrichment status, consolidation, sync."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from automem.gateway.app import GatewayError, auth_error, call
from automem.v1 import consolidate_service_pb2, enrich_service_pb2, recall_service_pb2


class ConsolidateBody(BaseModel):
    """``POST /consolidate``: mode full|decay|creative|cluster|forget, dry_run."""

    mode: str = "full"
    dry_run: bool = True


class ReprocessBody(BaseModel):
    """``POST /enrichment/reprocess``: memory ids."""

    ids: list[str]


def install(app: FastAPI) -> None:
    """Add the operations routes to ``app``."""

    @app.get("/health", tags=["ops"])
    async def health(request: Request) -> JSONResponse:
        """AutoMem's health body: status healthy|degraded, falkordb/qdrant connected|disconnected,
        memory_count, vector_count, sync_status, vector_dimensions, enrichment, timestamp,
        graph; plus nats. No auth. 503 when the graph is unreachable."""
        client = request.app.state.client
        settings = request.app.state.settings
        md: list[tuple[str, str]] = []
        body: dict[str, Any] = {"status": "healthy", "timestamp": datetime.now(UTC).isoformat(),
                                "graph": settings.graph_name, "collection": settings.collection_name}
        try:
            stats = await client.recall.GetStats(recall_service_pb2.GetStatsRequest(), metadata=md, timeout=5)
            body.update({
                "falkordb": "connected" if stats.graph_connected else "disconnected",
                "qdrant": ("connected" if stats.vectors_connected else "disconnected") if stats.vectors_enabled
                else "disabled",
                "memory_count": stats.memory_count, "vector_count": stats.vector_count,
                "vector_dimensions": stats.vector_dimensions,
            })
            if not stats.graph_connected:
                body["status"] = "degraded"
            if stats.vectors_enabled and not stats.vectors_connected:
                body["status"] = "degraded"
            if not stats.vectors_enabled:
                body["degraded_arms"] = ["vector"]
        except grpc.aio.AioRpcError as exc:
            body.update({"status": "degraded", "falkordb": "disconnected", "qdrant": "disconnected",
                         "error": exc.details()})
        try:
            status = await client.enrich.GetEnrichmentStatus(enrich_service_pb2.GetEnrichmentStatusRequest(),
                                                             metadata=md, timeout=5)
            body["enrichment"] = {"queue_depth": status.queue_depth, "pending": status.queue_depth,
                                  "processed": status.processed, "failed": status.failed,
                                  "dead_lettered": status.dead_lettered, "model": status.embedding_model}
            body["nats"] = "connected"
        except grpc.aio.AioRpcError:
            body["enrichment"] = None
            body["nats"] = "unknown"
            body["status"] = "degraded"  # enrichment unreachable: stores queue up unenriched
        if "memory_count" in body and body.get("qdrant") == "connected":
            memories, points = body["memory_count"], body["vector_count"]
            body["sync_status"] = ("synced" if memories == points else
                                   "orphaned_vectors" if points > memories else "drift_detected")
            try:  # counts plus the last full drift check (consolidate service)
                sync = await client.consolidate.GetSyncStatus(consolidate_service_pb2.GetSyncStatusRequest(),
                                                              metadata=md, timeout=5)
                body["sync_status"] = sync.sync_status
            except grpc.aio.AioRpcError:
                pass
        return JSONResponse(body, status_code=200 if body.get("falkordb") == "connected" else 503)

    @app.get("/analyze", tags=["ops"])
    async def analyze(request: Request, top: int = 20) -> dict[str, Any]:
        """What the caller's scope holds (AutoMem): type counts, average confidence, entity
        frequency; plus state counts, average importance and tag frequency."""
        if top < 1:
            raise GatewayError(400, "top: must be between 1 and 200")
        response = await call(request.app.state.client.recall.AnalyzeMemories,
                              recall_service_pb2.AnalyzeMemoriesRequest(top=top), request)
        return {
            "status": "success", "memory_count": response.memory_count,
            "type_counts": dict(response.type_counts), "state_counts": dict(response.state_counts),
            "average_confidence": round(response.average_confidence, 4),
            "average_importance": round(response.average_importance, 4),
            "entity_frequency": {e.name: e.count for e in response.top_entities},
            "tag_frequency": {t.name: t.count for t in response.top_tags},
        }

    @app.get("/enrichment/status", tags=["ops"])
    async def enrichment_status(request: Request) -> Any:
        """Queue depth and counters of the enrichment consumer."""
        if denied := await auth_error(request):  # the RPC is open (it feeds /health); this route is not
            return denied
        status = await call(request.app.state.client.enrich.GetEnrichmentStatus,
                            enrich_service_pb2.GetEnrichmentStatusRequest(), request)
        return {"status": "success", "queue_depth": status.queue_depth, "pending": status.queue_depth,
                "processed": status.processed, "failed": status.failed, "dead_lettered": status.dead_lettered,
                "embedding_model": status.embedding_model, "vector_dimensions": status.vector_dimensions}

    @app.post("/enrichment/reprocess", tags=["ops"])
    async def reprocess(body: ReprocessBody, request: Request) -> dict[str, Any]:
        """Re-enrich the given memories (admin)."""
        response = await call(request.app.state.client.enrich.ReprocessMemories,
                              enrich_service_pb2.ReprocessMemoriesRequest(ids=body.ids), request)
        return {"status": "success", "queued": response.queued}

    @app.post("/consolidate", tags=["ops"])
    async def consolidate(body: ConsolidateBody, request: Request) -> dict[str, Any]:
        """Run a consolidation task now (AutoMem); dry_run by default."""
        response = await call(request.app.state.client.consolidate.RunConsolidation,
                              consolidate_service_pb2.RunConsolidationRequest(mode=body.mode, dry_run=body.dry_run),
                              request)
        run = response.run
        return {"status": "success", "run_id": run.run_id, "mode": run.mode, "dry_run": run.dry_run,
                "results": dict(run.counts)}

    @app.get("/consolidate/status", tags=["ops"])
    async def consolidate_status(request: Request) -> dict[str, Any]:
        """Recent consolidation runs."""
        response = await call(request.app.state.client.consolidate.GetConsolidationStatus,
                              consolidate_service_pb2.GetConsolidationStatusRequest(), request)
        return {"status": "success", "next_runs": dict(response.next_run_time), "history": [
            {"run_id": r.run_id, "mode": r.mode, "dry_run": r.dry_run, "results": dict(r.counts),
             "trigger": r.trigger, "error": r.error or None,
             "started_at": datetime.fromtimestamp(r.start_time.seconds, UTC).isoformat()} for r in response.runs]}

    @app.post("/admin/sync", tags=["ops"])
    async def admin_sync(request: Request, dry_run: bool = False) -> dict[str, Any]:
        """Check graph/vector drift and repair it (admin)."""
        response = await call(request.app.state.client.consolidate.CheckSync,
                              consolidate_service_pb2.CheckSyncRequest(repair=not dry_run), request)
        return {"status": "success", "sync_status": response.sync_status,
                "missing_vectors": response.missing_vectors, "orphaned_vectors": response.orphaned_vectors,
                "stale_payloads": response.stale_payloads, "repaired": response.repaired,
                "unenriched_past_retention": response.unenriched_past_retention}
