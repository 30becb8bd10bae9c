"""Operations routes: ``/health`` (no auth), ``/analyze``, enrichment status, consolidation,
sync.

Each route reads its parameters, calls one use case (automem/gateway/usecases.py) and
presents the answer (automem/gateway/presenters.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from automem.common.client import AutomemClient
from automem.gateway import presenters, usecases
from automem.gateway.deps import CallerDep, auth_error, grpc_client
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import ConsolidateBody, JsonBodyRoute, ReembedBody, ReprocessBody, SyncBody

router = APIRouter(route_class=JsonBodyRoute)

#: ``POST /admin/reembed``'s largest ``batch_size``: larger ones are capped to it, as
#: AutoMem's route (automem/api/admin.py); EnrichService.ReembedMemories takes 1..100.
REEMBED_REST_MAX_BATCH = 100


@router.get("/health", tags=["ops"])
async def health(request: Request, client: Annotated[AutomemClient, Depends(grpc_client)]) -> JSONResponse:
    """AutoMem's health body: status healthy|degraded, falkordb/qdrant connected|disconnected
    (unknown when the recall service, which reads them, does not answer),
    memory_count, vector_count, sync_status, vector_dimensions, enrichment, timestamp,
    graph; plus nats (connected: the server answered a round trip just now, within
    2 s; disconnected: it did not; unknown: the enrichment service, which
    asks it, did not answer), ``services`` (each service the API needs: serving or not, as
    ``/readyz``; one that is not makes the status degraded) and ``restore_incomplete`` (with ``restore_started_at`` and
    ``restore_warning``): a restore that did not finish left part of a backup in the graph,
    so the status is degraded until a restore with force finishes
    (automem/gateway/presenters.py ``stores_json``). No auth. 503 when the graph is
    unreachable. Every part is asked at once
    under one bound (automem/gateway/usecases.py ``HEALTH_TIMEOUT``, 3.5 s), so a stalled store
    or service is named (disconnected, or unknown when the service that reads it did not
    answer) within it and the others as they are."""
    settings = request.app.state.settings
    body: dict[str, Any] = {"status": "healthy", "timestamp": datetime.now(UTC).isoformat(),
                            "graph": settings.graph_name, "collection": settings.collection_name}
    found, services = await asyncio.gather(usecases.health(client, with_sync=True),
                                           usecases.readiness(client, usecases.HEALTH_TIMEOUT))
    # Whether each service the API needs serves (grpc.health.v1, as /readyz): with ingest
    # down every write failed while /health said healthy (break-it review).
    body["services"] = services
    if not all(services.values()):
        body["status"] = "degraded"
    if found.stats is not None:
        body.update(presenters.stores_json(found.stats))
        if presenters.stores_degraded(found.stats):
            body["status"] = "degraded"
        if not found.stats.vectors_enabled:
            body["degraded_arms"] = ["vector"]
    else:
        # The recall service, which reads the stores' state, did not answer: the stores'
        # state is unknown, not "disconnected" (they may well be up).
        body.update({"status": "degraded", "falkordb": "unknown", "qdrant": "unknown",
                     "error": found.stats_error})
    if found.enrichment is not None:
        status = found.enrichment
        body["enrichment"] = {"queue_depth": status.queue_depth, "pending": presenters.pending_count(status),
                              "processed": status.processed, "failed": status.failed,
                              "dead_lettered": status.dead_lettered, "model": status.embedding_model}
        body["nats"] = "connected"
    else:
        body["enrichment"] = None
        # The enrichment service asks NATS for a round trip: "disconnected" when it answered
        # that NATS did not answer, "unknown" when it did not answer itself.
        body["nats"] = "disconnected" if found.nats_down else "unknown"
        body["status"] = "degraded"  # enrichment unreachable: stores queue up unenriched
    if body.get("falkordb") == "connected" and body.get("qdrant") == "connected":
        # counts plus the last full drift check (consolidate service) when it answered; not
        # from a count the down store could not give (0 memories read as orphaned vectors)
        body["sync_status"] = (found.sync.sync_status if found.sync is not None else
                               presenters.count_sync_status(body["memory_count"], body["vector_count"]))
    return JSONResponse(body, status_code=200 if body.get("falkordb") == "connected" else 503)


@router.get("/livez", tags=["ops"])
async def livez() -> dict[str, str]:
    """Liveness (no auth): answered by this process alone, whatever its stores do — a
    FalkorDB outage must not restart the gateway (automem/common/readiness.py)."""
    return {"status": "alive"}


@router.get("/readyz", tags=["ops"])
async def readyz(client: Annotated[AutomemClient, Depends(grpc_client)]) -> JSONResponse:
    """Readiness (no auth): 200 when every service the gateway calls reports SERVING on
    grpc.health.v1 (each sets that from its own stores: FalkorDB, NATS, vectors), else 503;
    ``services`` lists each one's answer."""
    services = await usecases.readiness(client)
    ready = all(services.values())
    return JSONResponse({"status": "ready" if ready else "not_ready", "services": services},
                        status_code=200 if ready else 503)


@router.get("/analyze", tags=["ops"])
async def analyze(call: CallerDep, top: int = 20) -> dict[str, Any]:
    """What the caller's scope holds (AutoMem): type counts, average confidence, entity
    frequency; plus state counts, average importance and tag frequency."""
    return presenters.analysis_json(await usecases.analyze(call, top))


@router.get("/enrichment/status", tags=["ops"])
async def enrichment_status(request: Request, call: CallerDep) -> Any:
    """Queue depth and counters of the enrichment consumer, with AutoMem's fields
    (automem/gateway/presenters.py ``enrichment_json``)."""
    if denied := await auth_error(request):  # the RPC is open (it feeds /health); this route is not
        return denied
    return presenters.enrichment_json(await usecases.enrichment_status(call), await usecases.reembed_status(call))


@router.post("/enrichment/reprocess", tags=["ops"])
async def reprocess(body: ReprocessBody, call: CallerDep) -> dict[str, Any]:
    """Re-enrich the given memories (admin): ``ids`` a list or, as AutoMem's
    automem/api/enrichment.py also reads it, one comma-separated string. (AutoMem reads
    ``?ids=`` as well; here that is a 400 saying the ids go in the body.)"""
    return {"status": "success", "queued": (await usecases.reprocess(call, body.id_list())).queued}


@router.post("/admin/reembed", tags=["ops"], status_code=202)
async def admin_reembed(body: ReembedBody, call: CallerDep) -> dict[str, Any]:
    """Re-embed the caller's scope through the enrichment path (admin; AutoMem's route, see
    automem/enrich/servicer.py ``ReembedMemories``). Answers 202 at once with ``total`` and
    ``job_id``; progress under ``reembed`` in ``GET /enrichment/status``. ``batch_size``
    above 100 is capped at 100, as AutoMem's route does (``min(batch_size, 100)``, which its
    clients send): the answer's ``batch_size`` is the size applied. The gRPC
    ReembedMemories refuses it instead (docs/automem-compat.md)."""
    batch_size = min(body.batch_size, REEMBED_REST_MAX_BATCH)
    response = await usecases.reembed(call, batch_size, body.limit or 0, body.force)
    return {"status": "queued", "job_id": response.job_id, "total": response.total,
            "batch_size": response.batch_size, "force": body.force, "metadata_preserved": True}


@router.post("/consolidate", tags=["ops"])
async def consolidate(call: CallerDep, body: ConsolidateBody | None = None) -> dict[str, Any]:
    """Run a consolidation task now (AutoMem); dry_run by default. No body is a full dry run,
    as AutoMem reads it (automem/api/consolidation.py: ``request.get_json(silent=True) or {}``)."""
    body = body or ConsolidateBody()
    return presenters.consolidation_json(await usecases.consolidate(call, body.mode, body.dry_run))


@router.get("/consolidate/status", tags=["ops"])
async def consolidate_status(call: CallerDep) -> dict[str, Any]:
    """Recent consolidation runs."""
    return presenters.consolidation_status_json(await usecases.consolidation_status(call))


@router.post("/admin/sync", tags=["ops"])
async def admin_sync(call: CallerDep, body: SyncBody | None = None, dry_run: bool | None = None) -> dict[str, Any]:
    """Check graph/vector drift and repair it (admin). ``dry_run`` (report, repair nothing) in
    the query or, as AutoMem's clients send it, in the JSON body (automem/gateway/schemas.py
    ``SyncBody``); 400 naming ``dry_run`` when the two disagree."""
    in_body = body.dry_run if body is not None else None
    if dry_run is not None and in_body is not None and dry_run != in_body:
        raise GatewayError(400, f"dry_run: the query says {str(dry_run).lower()} and the body "
                                f"{str(in_body).lower()}; send one")
    dry = in_body if in_body is not None else bool(dry_run)
    return presenters.sync_json(await usecases.check_sync(call, repair=not dry))
