"""``/v1`` truth-model routes: the review queue, tombstones, per-memory history, backup.

* ``GET /v1/review-items?status=pending&kind=&page_size=50&page_token=`` — review queue.
* ``POST /v1/review-items/{id}:approve`` ``{reason?}`` / ``POST /v1/review-items/{id}:reject``
  ``{reason}`` (admin).
* ``GET /v1/tombstones?include_lifted=false`` / ``POST /v1/tombstones/{id}:lift`` (admin).
* ``GET /v1/memories/{id}/history?page_size=100&page_token=`` — MemoryEvents, oldest first.
* ``GET /backup`` (admin) — the full export as JSON lines (``application/x-ndjson``).
"""

from __future__ import annotations

from typing import Any

import grpc
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from google.protobuf import json_format
from pydantic import BaseModel

from automem.common.errors import HTTP_STATUS
from automem.common.model import iso, memory_to_json
from automem.gateway.app import GatewayError, call, credentials
from automem.v1 import ingest_service_pb2, review_service_pb2


class DecisionBody(BaseModel):
    """Body of approve / reject: the reason (required to reject)."""

    reason: str = ""


def review_item_json(item: review_service_pb2.ReviewItem) -> dict[str, Any]:
    """REST form of a review item (memories as ``memory_to_json``)."""
    return {
        "id": item.id, "kind": item.kind, "status": item.status, "scope": item.scope,
        "memory_id": item.memory_id or None, "target_id": item.target_id or None, "reason": item.reason or None,
        "created_at": iso(item, "create_time"), "decided_by": item.decided_by or None,
        "decided_at": iso(item, "decision_time"), "decision_reason": item.decision_reason or None,
        "memory": memory_to_json(item.memory) if item.HasField("memory") else None,
        "target": memory_to_json(item.target) if item.HasField("target") else None,
    }


def tombstone_json(t: review_service_pb2.Tombstone) -> dict[str, Any]:
    """REST form of a tombstone."""
    return {"id": t.id, "content_hash": t.content_hash, "scope": t.scope, "memory_id": t.memory_id or None,
            "reason": t.reason or None, "lifted": t.lifted, "created_at": iso(t, "create_time"),
            "lifted_at": iso(t, "lift_time"), "created_by": t.created_by or None, "lifted_by": t.lifted_by or None}


def event_json(event: Any) -> dict[str, Any]:
    """REST form of a MemoryEvent (proto JSON names, enums by name)."""
    return json_format.MessageToDict(event, preserving_proto_field_name=True)


def install(app: FastAPI) -> None:
    """Add the ``/v1`` truth-model routes and ``GET /backup`` to ``app``."""

    @app.get("/v1/review-items", tags=["v1"])
    async def list_review_items(request: Request, status: str = "pending", kind: str = "", page_size: int = 50,
                                page_token: str = "") -> dict[str, Any]:
        """The review queue of the caller's scope, oldest first, paged."""
        response = await call(request.app.state.client.review.ListReviewItems, review_service_pb2.ListReviewItemsRequest(
            status=status, kind=kind, page_size=page_size, page_token=page_token), request)
        items = [review_item_json(i) for i in response.items]
        return {"status": "success", "items": items, "count": len(items),
                "next_page_token": response.next_page_token or None}

    @app.post("/v1/review-items/{item_id}:approve", tags=["v1"])
    async def approve(item_id: str, request: Request, body: DecisionBody | None = None) -> dict[str, Any]:
        """Approve a pending memory or supersede proposal (admin)."""
        response = await call(request.app.state.client.review.ApproveReviewItem, review_service_pb2.ApproveReviewItemRequest(
            id=item_id, reason=(body.reason if body else "")), request)
        return {"status": "success", "item": review_item_json(response.item),
                "memory": memory_to_json(response.memory) if response.HasField("memory") else None,
                "superseded": memory_to_json(response.superseded) if response.HasField("superseded") else None}

    @app.post("/v1/review-items/{item_id}:reject", tags=["v1"])
    async def reject(item_id: str, body: DecisionBody, request: Request) -> dict[str, Any]:
        """Reject with a reason (admin); a rejected memory's content is tombstoned."""
        response = await call(request.app.state.client.review.RejectReviewItem, review_service_pb2.RejectReviewItemRequest(
            id=item_id, reason=body.reason), request)
        return {"status": "success", "item": review_item_json(response.item),
                "memory": memory_to_json(response.memory) if response.HasField("memory") else None,
                "tombstone": tombstone_json(response.tombstone) if response.HasField("tombstone") else None}

    @app.get("/v1/tombstones", tags=["v1"])
    async def list_tombstones(request: Request, include_lifted: bool = False, page_size: int = 50,
                              page_token: str = "") -> dict[str, Any]:
        """Tombstones of the caller's scope (admin)."""
        response = await call(request.app.state.client.review.ListTombstones, review_service_pb2.ListTombstonesRequest(
            include_lifted=include_lifted, page_size=page_size, page_token=page_token), request)
        return {"status": "success", "tombstones": [tombstone_json(t) for t in response.tombstones],
                "next_page_token": response.next_page_token or None}

    @app.post("/v1/tombstones/{tombstone_id}:lift", tags=["v1"])
    async def lift(tombstone_id: str, request: Request) -> dict[str, Any]:
        """Lift a tombstone (admin): the content may be stored again."""
        response = await call(request.app.state.client.review.LiftTombstone,
                              review_service_pb2.LiftTombstoneRequest(id=tombstone_id), request)
        return {"status": "success", "tombstone": tombstone_json(response.tombstone)}

    @app.get("/v1/memories/{memory_id}/history", tags=["v1"])
    async def history(memory_id: str, request: Request, page_size: int = 100, page_token: str = "") -> dict[str, Any]:
        """Every MemoryEvent of the memory, oldest first (actor, time, before/after).
        ``truncated``: the events before the stream's retention (``retained_since``) are
        gone, so the history does not start with the memory's creation (docs/retention.md)."""
        response = await call(request.app.state.client.review.ListMemoryEvents, review_service_pb2.ListMemoryEventsRequest(
            id=memory_id, page_size=page_size, page_token=page_token), request)
        events = [event_json(e) for e in response.events]
        return {"status": "success", "memory_id": memory_id, "count": len(events), "events": events,
                "next_page_token": response.next_page_token or None, "truncated": response.truncated,
                "retained_since": iso(response, "retained_since_time")}

    @app.get("/backup", tags=["ops"], response_class=StreamingResponse, responses={
        200: {"description": "JSON lines", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
    async def backup(request: Request, events: bool = True) -> StreamingResponse:
        """The full export as JSON lines (admin): nodes, edges, events."""
        settings = request.app.state.settings
        stream = request.app.state.client.ingest.ExportBackup(
            ingest_service_pb2.ExportBackupRequest(skip_events=not events),
            metadata=credentials(request, settings), timeout=3600)
        try:  # the first chunk carries auth errors as a status, before the 200 is sent
            first = await stream.read()
        except grpc.aio.AioRpcError as exc:
            raise GatewayError(HTTP_STATUS.get(exc.code(), 500), exc.details() or exc.code().name) from None

        async def lines():
            chunk = first
            while chunk is not grpc.aio.EOF:  # read() only: grpc.aio forbids mixing it with iteration
                yield chunk.json_line + "\n"
                chunk = await stream.read()

        return StreamingResponse(lines(), media_type="application/x-ndjson",
                                 headers={"Content-Disposition": "attachment; filename=automem-backup.jsonl"})
