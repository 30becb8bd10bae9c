"""``/v1`` truth-model routes: the review queue, tombstones, per-memory history, backup.

* ``GET /v1/review-items?status=pending&kind=&page_size=50&page_token=`` — review queue.
* ``POST /v1/review-items/{id}:approve`` ``{reason?}`` / ``POST /v1/review-items/{id}:reject``
  ``{reason}`` (admin). An approval's ``conflicts`` / ``warning`` name the memories it leaves
  current next to the approved one (its supersede proposal was rejected before).
* ``GET /v1/tombstones?include_lifted=false`` / ``POST /v1/tombstones/{id}:lift`` (admin).
* ``GET /v1/memories/{id}/history?page_size=100&page_token=`` — MemoryEvents, oldest first.
* ``GET /v1/memories/{id}/versions?page_size=20&page_token=`` — versions, oldest first
  (record time, actor, changed fields, the memory as it stood).
* ``GET /v1/memories/{id}/versions:diff?from=A&to=B`` — the fields that differ.
* ``POST /v1/memories/{id}:purge`` ``{reason?, dry_run?}``, ``POST /v1/scope:purge``
  ``{confirm_scope, reason?, dry_run?}``, ``GET /v1/purges`` (admin) — purges and their
  content-free records (automem/ingest/purge.py, docs/purge.md).
* ``GET /backup`` (admin) — the full export as JSON lines (``application/x-ndjson``).
* ``GET /v1/apiKeys?page_size=100&page_token=``, ``POST /v1/apiKeys`` ``{role, scopes,
  default_scope?, display_name?, require_review?}`` (the secret in the answer only),
  ``POST /v1/apiKeys/{id}:revoke``, ``GET /v1/apiKeyEvents?key_id=`` (admin) — API keys and
  their audit record (automem/ingest/admin.py).
* ``POST /v1/backup:restore?force=false`` (admin on every scope) — the body is a backup file
  (JSON lines, as ``GET /backup`` writes it), restored into this running service.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from automem.common.model import iso
from automem.gateway import presenters, usecases
from automem.gateway.deps import CallerDep
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import ApiKeyBody, DecisionBody, JsonBodyRoute, PurgeBody, PurgeScopeBody
from automem.gateway.usecases import MAX_VERSION

router = APIRouter(route_class=JsonBodyRoute)


@router.get("/v1/review-items", tags=["v1"])
async def list_review_items(call: CallerDep, status: str = "pending", kind: str = "", page_size: int = 50,
                            page_token: str = "") -> dict[str, Any]:
    """The review queue of the caller's scope, oldest first, paged."""
    page = await usecases.review_items(call, status=status, kind=kind, page_size=page_size, page_token=page_token)
    items = [presenters.review_item_json(i) for i in page.items]
    return {"status": "success", "items": items, "count": len(items), "next_page_token": page.next_page_token or None}


@router.post("/v1/review-items/{item_id}:approve", tags=["v1"])
async def approve(item_id: str, call: CallerDep, body: DecisionBody | None = None) -> dict[str, Any]:
    """Approve a pending memory or supersede proposal (admin)."""
    decided = await usecases.approve(call, item_id, body.reason if body else "")
    return {"status": "success", "item": presenters.review_item_json(decided.item),
            "memory": presenters.optional_memory(decided, "memory"),
            "superseded": presenters.optional_memory(decided, "superseded"),
            "conflicts": [presenters.review_conflict_json(c) for c in decided.conflicts],
            "warning": decided.warning or None}


@router.post("/v1/review-items/{item_id}:reject", tags=["v1"])
async def reject(item_id: str, body: DecisionBody, call: CallerDep) -> dict[str, Any]:
    """Reject with a reason (admin); a rejected memory's content is tombstoned."""
    decided = await usecases.reject(call, item_id, body.reason)
    return {"status": "success", "item": presenters.review_item_json(decided.item),
            "memory": presenters.optional_memory(decided, "memory"),
            "tombstone": presenters.tombstone_json(decided.tombstone) if decided.HasField("tombstone") else None}


@router.get("/v1/tombstones", tags=["v1"])
async def list_tombstones(call: CallerDep, include_lifted: bool = False, page_size: int = 50,
                          page_token: str = "") -> dict[str, Any]:
    """Tombstones of the caller's scope (admin)."""
    page = await usecases.tombstones(call, include_lifted=include_lifted, page_size=page_size, page_token=page_token)
    return {"status": "success", "tombstones": [presenters.tombstone_json(t) for t in page.tombstones],
            "next_page_token": page.next_page_token or None}


@router.post("/v1/tombstones/{tombstone_id}:lift", tags=["v1"])
async def lift(tombstone_id: str, call: CallerDep) -> dict[str, Any]:
    """Lift a tombstone (admin): the content may be stored again."""
    return {"status": "success", "tombstone": presenters.tombstone_json((await usecases.lift(call, tombstone_id)).tombstone)}


@router.get("/v1/memories/{memory_id}/history", tags=["v1"])
async def history(memory_id: str, call: CallerDep, page_size: int = 100, page_token: str = "") -> dict[str, Any]:
    """Every MemoryEvent of the memory, oldest first (actor, time, before/after).
    ``truncated``: the events before the stream's retention (``retained_since``) are
    gone, so the history does not start with the memory's creation (docs/retention.md).
    ``after.state`` is the state a plain ``GET /memory/{id}`` gives the memory now, and
    ``after.stored_state`` the state the event recorded: a memory superseded by a
    replacement valid from a later time is still the fact in force, so an event's
    SUPERSEDED ``after`` reads ``MEMORY_STATE_ACTIVE`` with ``stored_state``
    ``MEMORY_STATE_SUPERSEDED`` until then (automem/common/state.py ``as_read``)."""
    page = await usecases.history(call, memory_id, page_size=page_size, page_token=page_token)
    events = [presenters.event_json(e, page.after_stored_states.get(e.event_id)) for e in page.events]
    return {"status": "success", "memory_id": memory_id, "count": len(events), "events": events,
            "next_page_token": page.next_page_token or None, "truncated": page.truncated,
            "retained_since": iso(page, "retained_since_time")}


@router.get("/v1/memories/{memory_id}/versions", tags=["v1"])
async def versions(memory_id: str, call: CallerDep, page_size: int = Query(0, ge=0, le=100),
                   page_token: str = "") -> dict[str, Any]:
    """The memory's versions, oldest first, paged (AIP-158: ``page_size`` 1..100, 0 = 20;
    ``page_token`` from ``next_page_token``): each with ``recorded_at``, ``actor``,
    ``changed_fields`` and the memory as it stood (automem/graph/versions.py). 404 when
    absent; 400 naming ``page_token`` for a token not of this listing.

    ``memory.state`` is the state a plain ``GET /memory/{id}`` gives the memory now, and
    ``stored_state`` the state the version stores: a memory superseded by a replacement
    valid from a later time is still the fact in force, so its SUPERSEDED versions read
    ``ACTIVE`` with ``stored_state: "SUPERSEDED"`` until then (automem/common/state.py
    ``as_read``)."""
    page = await usecases.memory_versions(call, memory_id, page_size=page_size, page_token=page_token)
    items = [presenters.version_json(v) for v in page.versions]
    return {"status": "success", "memory_id": memory_id, "count": len(items), "versions": items,
            "next_page_token": page.next_page_token or None}


@router.get("/v1/memories/{memory_id}/versions:diff", tags=["v1"])
async def diff(memory_id: str, call: CallerDep, from_version: int = Query(alias="from", ge=1, le=MAX_VERSION),
               to_version: int = Query(alias="to", ge=1, le=MAX_VERSION)) -> dict[str, Any]:
    """The fields that differ between versions ``from`` and ``to`` (AIP-136 custom method on
    the versions collection): ``changes`` [{field, before, after}], AutoMem's field names.
    404 naming ``from`` / ``to`` when the memory has no such version."""
    found = await usecases.diff_versions(call, memory_id, from_version, to_version)
    return {"status": "success", "memory_id": memory_id, **presenters.diff_json(found)}


@router.post("/v1/memories/{memory_id}:purge", tags=["v1"])
async def purge_memory(memory_id: str, call: CallerDep, request: Request,
                       body: PurgeBody | None = None) -> dict[str, Any]:
    """Purge one memory everywhere (admin): node, versions, edges, review items, tombstones,
    idempotency keys, event content and vector point; a content-free purge record stays.
    ``dry_run`` counts and removes nothing. 404 for an unknown id; 503 when a step failed
    (the purge stays pending: repeat the call to resume). ``If-Match`` is refused (400): the
    purge has no version check, and a header it would ignore is refused, never dropped (a
    purge cannot be undone); ``DELETE /memory/{id}?purge=true`` takes one."""
    if "if-match" in request.headers:
        raise GatewayError(400, "If-Match: not taken by :purge (no version check); use DELETE "
                                "/memory/{id}?purge=true with If-Match to purge only an unchanged memory")
    body = body or PurgeBody()
    done = await usecases.purge_memory(call, memory_id, reason=body.reason, dry_run=body.dry_run)
    return {"status": "success", "purge": presenters.purge_json(done.purge)}


@router.post("/v1/scope:purge", tags=["v1"])
async def purge_scope(body: PurgeScopeBody, call: CallerDep) -> dict[str, Any]:
    """Purge every memory of the caller's scope and the scope's entities, review items,
    tombstones, idempotency keys and activity events (admin; a tenant's right to erasure).
    ``confirm_scope`` must repeat the scope (400 naming it otherwise)."""
    done = await usecases.purge_scope(call, confirm_scope=body.confirm_scope, reason=body.reason,
                                      dry_run=body.dry_run)
    return {"status": "success", "purge": presenters.purge_json(done.purge)}


@router.get("/v1/purges", tags=["v1"])
async def list_purges(call: CallerDep, page_size: int = 50, page_token: str = "") -> dict[str, Any]:
    """The scope's purge records, newest first (admin)."""
    page = await usecases.purges(call, page_size=page_size, page_token=page_token)
    return {"status": "success", "purges": [presenters.purge_json(p) for p in page.purges],
            "next_page_token": page.next_page_token or None}


@router.get("/backup", tags=["ops"], response_class=StreamingResponse, responses={
    200: {"description": "JSON lines", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
async def backup(call: CallerDep, events: bool = True, known_at: str | None = None) -> StreamingResponse:
    """The full export as JSON lines (admin): nodes, edges, events. ``known_at`` (ISO 8601)
    earlier than now: the records as the service believed them then, a snapshot for reading
    that restore refuses (automem/common/backup.py); 400 naming ``known_at`` if malformed."""
    lines = await usecases.export_backup(call, events=events, known_at=known_at)
    return StreamingResponse(lines, media_type="application/x-ndjson",
                             headers={"Content-Disposition": "attachment; filename=automem-backup.jsonl"})


@router.post("/v1/backup:restore", tags=["v1"], openapi_extra={"requestBody": {
    "required": True, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}})
async def restore_backup(request: Request, call: CallerDep, force: bool = False) -> dict[str, Any]:
    """Restore a backup (the body: JSON lines as ``GET /backup`` writes them) into this running
    service (admin on every scope). 409 (FAILED_PRECONDITION) when it holds memories or events
    and ``force`` is false; ``force`` replaces them (never merges). The service's API keys
    stay. The vector index is not restored: ``POST /admin/sync`` rebuilds it. 400 naming
    ``data`` for a body that is not a backup."""
    done = await usecases.restore_backup(call, request.stream(), force=force)
    return {"status": "success", "nodes": done.nodes, "edges": done.edges, "events": done.events,
            "events_dropped": done.events_dropped, "live_memories": done.live_memories}


#: Page size bounds of the key listings (automem/ingest/admin.py).
MAX_KEY_PAGE = 1000


@router.get("/v1/apiKeys", tags=["v1"])
async def list_api_keys(call: CallerDep, page_size: int = Query(100, ge=1, le=MAX_KEY_PAGE),
                        page_token: str = Query("", max_length=200)) -> dict[str, Any]:
    """The API keys within the caller's scope patterns, oldest first, revoked ones included
    (admin; 403 otherwise). Never a secret."""
    page = await usecases.list_api_keys(call, page_size=page_size, page_token=page_token)
    return {"status": "success", "api_keys": [presenters.api_key_json(k) for k in page.api_keys],
            "next_page_token": page.next_page_token or None}


@router.post("/v1/apiKeys", tags=["v1"], status_code=201)
async def create_api_key(body: ApiKeyBody, call: CallerDep) -> dict[str, Any]:
    """Mint an API key (admin): ``secret`` is in this answer only (store it now). Each scope
    pattern must lie within the caller's own (403 otherwise); 400 naming ``role``,
    ``scopes``, ``default_scope`` or ``display_name`` for bad input. Audited."""
    made = await usecases.create_api_key(call, role=body.role, scopes=body.scopes, default_scope=body.default_scope,
                                         display_name=body.display_name, require_review=body.require_review)
    return {"status": "success", "api_key": presenters.api_key_json(made.api_key), "secret": made.secret}


@router.post("/v1/apiKeys/{key_id}:revoke", tags=["v1"])
async def revoke_api_key(key_id: str, call: CallerDep) -> dict[str, Any]:
    """Revoke an API key (admin; AIP-136 custom method): refused from now on. 404 when absent
    or outside the caller's scope patterns. Audited."""
    done = await usecases.revoke_api_key(call, key_id)
    return {"status": "success", "api_key": presenters.api_key_json(done.api_key)}


@router.get("/v1/apiKeyEvents", tags=["v1"])
async def list_api_key_events(call: CallerDep, key_id: str = Query("", max_length=100),
                              page_size: int = Query(100, ge=1, le=MAX_KEY_PAGE),
                              page_token: str = Query("", max_length=200)) -> dict[str, Any]:
    """The audit record of key changes (create, revoke: actor, key id, role, scopes, time),
    newest first (admin)."""
    page = await usecases.api_key_events(call, key_id=key_id, page_size=page_size, page_token=page_token)
    return {"status": "success", "events": [presenters.api_key_event_json(e) for e in page.events],
            "next_page_token": page.next_page_token or None}
