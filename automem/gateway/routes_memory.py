"""Memory write routes: AutoMem's ``/memory``, ``/memory/batch``, ``/memory/{id}``,
``/associate``, ``DELETE /memory/by-tag``, and ``/v1/memories/{id}:supersede``."""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse
from google.protobuf import field_mask_pb2

from automem.common.errors import InvalidArgument
from automem.common.model import iso, memory_to_json, parse_relation_type, relation_to_json
from automem.gateway.app import GatewayError, call
from automem.gateway.schemas import (
    AssociateRequest,
    BatchMemoryRequest,
    MemoryRequest,
    UpdateMemoryBody,
    to_memory_input,
)
from automem.v1 import ingest_service_pb2, memory_pb2, recall_service_pb2


def _store_body(memory: memory_pb2.Memory, started: float, **extra: Any) -> dict[str, Any]:
    body = memory_to_json(memory)
    return {
        "status": "success",
        "memory_id": memory.id,
        "stored_at": iso(memory, "create_time"),
        "type": body["type"],
        "confidence": memory.confidence,
        "qdrant": "queued",
        "embedding_status": body["embedding_status"],
        "enrichment": "queued",
        "metadata": body["metadata"],
        "timestamp": body["timestamp"],
        "updated_at": body["updated_at"],
        "last_accessed": body["last_accessed"],
        "state": body["state"],
        "scope": memory.scope,
        "memory": body,
        "query_time_ms": round((time.perf_counter() - started) * 1000, 2),
        **extra,
    }


def install(app: FastAPI) -> None:
    """Add the memory write routes to ``app``."""

    @app.post("/memory", status_code=201, tags=["memory"])
    async def store_memory(body: MemoryRequest, request: Request) -> JSONResponse:
        """Store one memory (AutoMem). With ``supersedes_memory_id`` it atomically replaces
        that memory. ``Idempotency-Key`` makes retries return the first memory."""
        started = time.perf_counter()
        client = request.app.state.client
        key = request.headers.get("idempotency-key", "")
        if body.supersedes_memory_id:
            rel = parse_relation_type(body.supersede_relation or "INVALIDATED_BY", field="supersede_relation") \
                if _is_supersede_relation(body.supersede_relation) else _bad_relation(body.supersede_relation)
            response = await call(client.ingest.SupersedeMemory, ingest_service_pb2.SupersedeMemoryRequest(
                id=body.supersedes_memory_id, scope=body.scope or "", replacement=to_memory_input(body),
                relation_type=rel, reason=body.supersede_reason or "", idempotency_key=key), request)
            return JSONResponse(_store_body(response.replacement, started,
                                            superseded_memory_id=response.superseded.id,
                                            superseded=memory_to_json(response.superseded)), status_code=201)
        response = await call(client.ingest.CreateMemory, ingest_service_pb2.CreateMemoryRequest(
            memory=to_memory_input(body), scope=body.scope or "", idempotency_key=key), request)
        # 201 either way (AutoMem's contract); ``deduplicated`` tells a retry from a new store.
        return JSONResponse(_store_body(response.memory, started, deduplicated=response.deduplicated),
                            status_code=201)

    @app.post("/memory/batch", status_code=201, tags=["memory"])
    async def store_batch(body: BatchMemoryRequest, request: Request) -> JSONResponse:
        """Store up to 500 memories, all or nothing (AutoMem). A bad item is named by index."""
        started = time.perf_counter()
        settings = request.app.state.settings
        if len(body.memories) > settings.batch_max:
            raise GatewayError(400, f"memories: {len(body.memories)} items exceeds the batch limit of "
                                    f"{settings.batch_max}")
        response = await call(request.app.state.client.ingest.BatchCreateMemories,
                              ingest_service_pb2.BatchCreateMemoriesRequest(
                                  memories=[to_memory_input(m) for m in body.memories], scope=body.scope or "",
                                  idempotency_key=request.headers.get("idempotency-key", "")), request)
        return JSONResponse({
            "status": "success", "stored": len(response.memories),
            "memory_ids": [m.id for m in response.memories], "qdrant": "queued", "enrichment": "queued",
            "query_time_ms": round((time.perf_counter() - started) * 1000, 2),
        }, status_code=201)

    @app.delete("/memory/by-tag", tags=["memory"])
    async def delete_by_tag(request: Request, tags: list[str] = Query(default=[]),
                            dry_run: bool = False) -> dict[str, Any]:
        """Delete (tombstone) every memory of the caller's scope with any of ``tags``;
        ``dry_run=true`` returns what would be deleted."""
        response = await call(request.app.state.client.ingest.DeleteMemoriesByTag,
                              ingest_service_pb2.DeleteMemoriesByTagRequest(tags=tags, dry_run=dry_run), request)
        body: dict[str, Any] = {"status": "success", "tags": tags, "dry_run": dry_run,
                                "deleted_count": response.deleted_count, "memory_ids": list(response.memory_ids)}
        if dry_run:
            body["would_delete_count"] = len(response.memory_ids)
        return body

    @app.get("/memory/{memory_id}", tags=["memory"])
    async def get_memory(memory_id: str, request: Request, response: Response, as_of: str | None = None,
                         known_at: str | None = None, state_mode: str = "current") -> dict[str, Any]:
        """One memory with its state and validity window; a non-current memory carries the
        current head's id (``current_id``). Bumps ``last_accessed``. 404 when absent. The
        ``ETag`` header is the version, for ``If-Match`` on PATCH."""
        from automem.gateway.routes_recall import read_options

        got = await call(request.app.state.client.recall.GetMemory, recall_service_pb2.RecallGetMemoryRequest(
            id=memory_id, touch=True, read=read_options(as_of, known_at, state_mode)), request)
        memory = memory_to_json(got.memory, is_current=got.is_current, current_id=got.current_id or None)
        response.headers["ETag"] = f'"{got.memory.version}"'
        return {"status": "success", "memory": memory}

    @app.patch("/memory/{memory_id}", tags=["memory"])
    async def update_memory(memory_id: str, body: UpdateMemoryBody, request: Request) -> dict[str, Any]:
        """Update any subset of content, tags, importance, type, confidence, timestamp,
        t_valid, t_invalid, metadata (merged). ``etag`` (body) or ``If-Match`` (header):
        409 when stale. Re-embeds when content changed."""
        fields = body.model_fields_set - {"etag", "add_tags"}
        item = ingest_service_pb2.MemoryInput()
        for name in fields:
            value = getattr(body, name)
            if name == "metadata":
                import json

                item.metadata_json = json.dumps(value, ensure_ascii=False)
                item.metadata_set = True
            elif name == "tags":
                if value is None:
                    raise GatewayError(400, "tags: must be a list of strings (use [] to clear)")
                item.tags.extend(value)
            elif value is None and name in ("importance", "confidence"):
                raise GatewayError(400, f"{name}: must be a number between 0 and 1")
            elif value is None and name in ("type", "timestamp", "t_valid"):
                raise GatewayError(400, f"{name}: must not be null")
            elif value is not None:
                setattr(item, name, value)
            elif name == "content":
                raise GatewayError(400, "content: must not be empty")
        etag_raw = body.etag if body.etag is not None else request.headers.get("if-match", "").removeprefix("W/").strip('"')
        if etag_raw == "*":
            etag_raw = 0  # any version
        try:
            etag = int(etag_raw or 0)
        except (TypeError, ValueError):
            raise GatewayError(400, "etag: must be the memory's version number") from None
        response = await call(request.app.state.client.ingest.UpdateMemory, ingest_service_pb2.UpdateMemoryRequest(
            id=memory_id, memory=item, update_mask=field_mask_pb2.FieldMask(paths=sorted(fields)), etag=etag,
            add_tags=body.add_tags or []), request)
        return {"status": "success", "memory_id": memory_id, "memory": memory_to_json(response.memory),
                "updated_at": iso(response.memory, "update_time"), "etag": str(response.memory.version)}

    @app.delete("/memory/{memory_id}", tags=["memory"])
    async def delete_memory(memory_id: str, request: Request, purge: bool = False,
                            reason: str = "") -> dict[str, Any]:
        """Tombstone a memory (state DELETED; its vector point goes at once). ``purge=true``
        (admin) removes the node."""
        response = await call(request.app.state.client.ingest.DeleteMemory, ingest_service_pb2.DeleteMemoryRequest(
            id=memory_id, purge=purge, reason=reason), request)
        return {"status": "success", "memory_id": memory_id, "message": "Memory deleted",
                "state": "PURGED" if purge else "DELETED", "memory": memory_to_json(response.memory)}

    @app.post("/v1/memories/{memory_id}:supersede", status_code=201, tags=["v1"])
    async def supersede(memory_id: str, body: MemoryRequest, request: Request) -> JSONResponse:
        """Replace a memory atomically: creates the replacement, closes the old window,
        marks it SUPERSEDED and writes the edge — all or nothing."""
        started = time.perf_counter()
        rel = parse_relation_type(body.supersede_relation or "INVALIDATED_BY", field="supersede_relation")
        response = await call(request.app.state.client.ingest.SupersedeMemory, ingest_service_pb2.SupersedeMemoryRequest(
            id=memory_id, replacement=to_memory_input(body), relation_type=rel,
            reason=body.supersede_reason or "", idempotency_key=request.headers.get("idempotency-key", "")), request)
        return JSONResponse(_store_body(response.replacement, started, superseded_memory_id=response.superseded.id,
                                        superseded=memory_to_json(response.superseded),
                                        relation=relation_to_json(response.relation)), status_code=201)

    @app.post("/associate", status_code=201, tags=["memory"])
    async def associate(body: AssociateRequest, request: Request) -> JSONResponse:
        """Create one association or a batch (``associations``, at most 500: 201 all
        succeeded, 207 partial)."""
        client = request.app.state.client
        if body.associations is not None:
            if len(body.associations) > request.app.state.settings.batch_max:
                raise GatewayError(400, f"associations: more than {request.app.state.settings.batch_max} items")
            succeeded, failed = [], []
            for i, assoc in enumerate(body.associations):
                try:
                    rel = await _associate(client, request, assoc.memory1_id, assoc.memory2_id, assoc.type,
                                           assoc.strength, assoc.reason)
                    succeeded.append(relation_to_json(rel))
                except GatewayError as exc:
                    failed.append({"index": i, "error": exc.message, "code": exc.status})
            status = 201 if not failed else (207 if succeeded else 400)
            body: dict[str, Any] = {"status": "success" if not failed else "partial", "created_count": len(succeeded),
                                    "failed_count": len(failed), "succeeded": succeeded, "failed": failed}
            if status == 400:  # nothing created: also an error body
                message = f"no association was created ({len(failed)} failed); see failed"
                body.update({"status": "error", "error": message, "message": message, "code": 400})
            return JSONResponse(body, status_code=status)
        if not body.memory1_id or not body.memory2_id:
            raise GatewayError(400, "memory1_id and memory2_id are required")
        rel = await _associate(client, request, body.memory1_id, body.memory2_id, body.type, body.strength,
                               body.reason)
        return JSONResponse({"status": "success", "message": "Association created",
                             **relation_to_json(rel), "relation_type": relation_to_json(rel)["type"]},
                            status_code=201)


async def _associate(client: Any, request: Request, a: str, b: str, rel_type: str, strength: float,
                     reason: str | None) -> memory_pb2.Relation:
    try:
        type_value = parse_relation_type(rel_type)
    except InvalidArgument as exc:
        raise GatewayError(400, str(exc)) from None
    response = await call(client.ingest.CreateRelation, ingest_service_pb2.CreateRelationRequest(
        relation=memory_pb2.Relation(source_id=a, target_id=b, type=type_value, strength=strength,
                                     reason=reason or "")), request)
    return response.relation


def _is_supersede_relation(name: str | None) -> bool:
    return (name or "INVALIDATED_BY").strip().upper() in ("INVALIDATED_BY", "EVOLVED_INTO")


def _bad_relation(name: str | None) -> int:
    raise GatewayError(400, f"supersede_relation: must be INVALIDATED_BY or EVOLVED_INTO, got {name!r}")
