"""Memory write routes: AutoMem's ``/memory``, ``/memory/batch``, ``/memory/{id}``,
``/associate``, ``DELETE /memory/by-tag``, and ``/v1/memories/{id}:supersede``.

Each route reads its parameters, calls one use case (automem/gateway/usecases.py) and
presents the answer (automem/gateway/presenters.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from automem.common.model import IDEMPOTENCY_KEY_MAX_LENGTH, iso
from automem.gateway import presenters, usecases
from automem.gateway.deps import Caller, CallerDep, split_values
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import (
    AssociateRequest,
    BatchMemoryRequest,
    JsonBodyRoute,
    MemoryRequest,
    SupersedeBody,
    UpdateMemoryBody,
)
from automem.gateway.usecases import MAX_VERSION
from automem.v1 import memory_pb2

router = APIRouter(route_class=JsonBodyRoute)

#: At most IDEMPOTENCY_KEY_MAX_LENGTH characters (automem/common/model.py; the service checks it too).
IdempotencyKey = Annotated[str, Header(alias="idempotency-key", include_in_schema=False,
                                       max_length=IDEMPOTENCY_KEY_MAX_LENGTH)]


async def if_match_header(request: Request) -> str | None:
    """The request's ``If-Match``, its lines joined into one list (RFC 9110 section 5.3: a
    field sent on several lines is one comma-separated list; Starlette's ``Header`` reads the
    first line only); None when absent. Lines that are empty are left out, so ``""`` is
    returned only when every line was empty (refused by :func:`_if_match_version`). A
    coroutine: FastAPI runs a plain function dependency in its thread pool."""
    lines = request.headers.getlist("if-match")
    if not lines:
        return None
    return ", ".join(line for line in lines if line.strip())


#: None when the request has no ``If-Match`` (an empty one is refused: :func:`_if_match_version`).
IfMatch = Annotated[str | None, Depends(if_match_header)]
IfNoneMatch = Annotated[str, Header(alias="if-none-match", include_in_schema=False)]


@contextlib.asynccontextmanager
async def conditional(header: str | None, field: str) -> AsyncIterator[None]:
    """Around a call made under a conditional request header (RFC 9110 section 13.1): when
    ``header`` was sent and the service refused the condition — a stale version (ABORTED
    naming ``etag``) or a used idempotency key (FAILED_PRECONDITION naming it) — answer
    412 Precondition Failed instead of 409 (AIP-154's status for a stale etag in the body)."""
    try:
        yield
    except GatewayError as exc:
        if header and exc.code in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION) and (
                exc.message.startswith(field)):
            raise GatewayError(412, exc.message, code=exc.code) from exc
        raise


def _is_entity_tag(tag: str) -> bool:
    """A strong entity tag's syntax: ``"..."`` with no quote inside (RFC 9110 section 8.8.3)."""
    return len(tag) >= 2 and tag[0] == tag[-1] == '"' and '"' not in tag[1:-1]


def _tag_version(tag: str) -> int:
    """The version a strong entity tag names, or 0 when it names none: a memory's ETag is its
    version in canonical decimal (``"3"``; presenters.py), compared as text (the strong
    comparison, RFC 9110 section 8.8.3.2), so ``"03"``, ``"abc"``, ``"0"`` and a number past
    int64 can never match."""
    inner = tag[1:-1]
    # Length first: int() refuses more than 4,300 digits (sys.get_int_max_str_digits).
    if not (inner.isascii() and inner.isdigit()) or len(inner) > len(str(MAX_VERSION)):
        return 0
    return int(inner) if str(int(inner)) == inner and int(inner) <= MAX_VERSION else 0


def _if_match(tag: str) -> int:
    """The version an ``If-Match`` of one entity tag asks for: 0 (no check) for ``*``. A weak
    tag (``W/"3"``) never matches (the strong comparison, RFC 9110 section 13.1.1): 412. A tag
    that names no version (:func:`_tag_version`: ``"0"``, ``""``, ``"abc"``, ``"03"``) can
    never match: 412; passed on, the service would read a 0 as "no check" and write. A bare
    number (``3``, no quotes) is read as its version (usecases.parse_etag: 400 naming ``etag``
    when it is none, 412 for 0); anything else that is no entity tag (``abc``, ``"3``): 400."""
    if tag == "*":
        return 0
    if tag.upper().startswith("W/"):
        # If-Match uses the strong comparison: a weak tag never matches (RFC 9110 section 8.8.3.2).
        raise GatewayError(412, f"etag: If-Match {tag} is a weak tag, which never matches (RFC 9110); "
                                f"send the ETag as given, e.g. {tag[2:].strip() or chr(34) * 2}")
    if not _is_entity_tag(tag):
        if '"' in tag:
            raise GatewayError(400, f"etag: If-Match {tag} is not a quoted entity tag (RFC 9110 section 8.8.3)")
        version = usecases.parse_etag(tag)  # a bare version number, as some clients send it
    elif not (version := _tag_version(tag)):
        raise GatewayError(412, f"etag: If-Match {tag} names no version of the memory (ETags are \"<version>\")")
    if version == 0:
        raise GatewayError(412, f"etag: If-Match {tag} names no version of the memory (versions start at 1)")
    return version


async def _if_match_version(call: Caller, memory_id: str, value: str | None) -> int:
    """The version to pass on as ``etag`` for an ``If-Match`` header, which may be a list
    (``"2", "3"``: the condition holds when any tag matches, RFC 9110 section 13.1.1). One tag
    is read by :func:`_if_match`. For a list, ``*`` anywhere means no check; weak tags and tags
    naming no version never match and are dropped (412 when none is left); otherwise the
    memory's current version is read and passed on when the list names it — the service then
    checks it atomically with the write, so a change in between still answers 412. When the
    list does not name it, the highest version listed is passed on, and the service answers
    the stale etag (412 through :func:`conditional`) after replaying an ``Idempotency-Key``
    used before — so a retried conditional supersede gets its first answer, as with one tag —
    and a listed version the memory reaches in between is a match, as the list allows. 404
    when the memory is absent; 400 naming ``etag`` for an entry that is not an entity tag and
    for an empty header (absent: None, no check). Empty list items are ignored (RFC 9110
    section 5.6.1)."""
    if value is None:
        return 0
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    if not entries:
        raise GatewayError(400, "etag: If-Match is empty; omit the header for no version check, or send the ETag")
    if len(entries) == 1:
        return _if_match(entries[0])
    if "*" in entries:
        return 0
    versions = set()
    for entry in entries:
        if entry.upper().startswith("W/"):
            continue
        if not _is_entity_tag(entry):
            raise GatewayError(400, f"etag: If-Match entry {entry} is not a quoted entity tag (RFC 9110 section 8.8.3)")
        if version := _tag_version(entry):
            versions.add(version)
    if not versions:
        raise GatewayError(412, f"etag: If-Match {value.strip()} names no version of the memory "
                                "(weak tags never match; ETags are \"<version>\", from 1)")
    read = usecases.read_options(state_mode="history", include_archived=True, include_pending=True)
    got = (await usecases.get_memory(call, memory_id, read, touch=False)).memory
    if got.state == memory_pb2.MEMORY_STATE_DELETED:  # the history read returns it until a purge
        raise GatewayError(404, f"memory {memory_id} not found", code=grpc.StatusCode.NOT_FOUND)
    return got.version if got.version in versions else max(versions)


def _if_none_match(value: str) -> bool:
    """True for ``If-None-Match: *``; absent is False; any other value is a 400 (a POST
    creates, so only ``*`` has a meaning here)."""
    if not value:
        return False
    if value.strip() != "*":
        raise GatewayError(400, "If-None-Match: only * is supported on a create")
    return True


@router.post("/memory", status_code=201, tags=["memory"])
async def store_memory(body: MemoryRequest, call: CallerDep, idempotency_key: IdempotencyKey = "",
                       if_none_match: IfNoneMatch = "", if_match: IfMatch = None) -> JSONResponse:
    """Store one memory (AutoMem). With ``supersedes_memory_id`` it atomically replaces
    that memory; ``If-Match`` then names the replaced memory's ETag (412 when stale, as on
    ``POST /v1/memories/{id}:supersede``). ``Idempotency-Key`` makes retries return the first
    memory; with ``If-None-Match: *`` a key used before answers 412 instead. 400 for
    ``If-Match`` without ``supersedes_memory_id`` (a new memory has no version to match) and
    for ``If-None-Match`` with it (a supersede's key is answered, never refused): a header the
    service would ignore is refused, never dropped."""
    started = time.perf_counter()
    fresh = _if_none_match(if_none_match)
    if fresh and not idempotency_key:
        raise GatewayError(400, "If-None-Match: * needs an Idempotency-Key (the resource it refers to)")
    usecases.check_supersede_fields(body)
    if body.supersedes_memory_id:
        if fresh:
            raise GatewayError(400, "If-None-Match: not with supersedes_memory_id (a supersede's Idempotency-Key "
                                    "answers the first replacement); use If-Match for the replaced memory")
        etag = await _if_match_version(call, body.supersedes_memory_id, if_match)
        async with conditional(if_match, "etag"):
            replaced = await usecases.supersede_memory(
                call, body.supersedes_memory_id, body, relation=body.supersede_relation,
                reason=body.supersede_reason or "", scope=body.scope or "", idempotency_key=idempotency_key,
                etag=etag, id_field="supersedes_memory_id")
        return JSONResponse(presenters.superseded_json(replaced, started, with_relation=False), status_code=201)
    if if_match is not None:
        raise GatewayError(400, "If-Match: only with supersedes_memory_id (it names the replaced memory's ETag); "
                                "a new memory has none")
    async with conditional(if_none_match, "idempotency_key"):
        created = await usecases.create_memory(call, body, scope=body.scope or "", idempotency_key=idempotency_key,
                                               require_unused_key=fresh)
    # 201 either way (AutoMem's contract); ``deduplicated`` tells a retry from a new store.
    return JSONResponse(presenters.stored_json(created.memory, started, deduplicated=created.deduplicated),
                        status_code=201)


@router.post("/memory/batch", status_code=201, tags=["memory"])
async def store_batch(body: BatchMemoryRequest, call: CallerDep,
                      idempotency_key: IdempotencyKey = "") -> JSONResponse:
    """Store up to 500 memories, all or nothing (AutoMem). A bad item is named by index."""
    started = time.perf_counter()
    stored = await usecases.create_memories(call, body.memories, scope=body.scope or "",
                                            idempotency_key=idempotency_key)
    return JSONResponse(presenters.batch_stored_json(stored, started), status_code=201)


@router.delete("/memory/by-tag", tags=["memory"])
async def delete_by_tag(call: CallerDep, tags: list[str] = Query(default=[]),
                        dry_run: bool = False) -> dict[str, Any]:
    """Delete (tombstone) every memory of the caller's scope with any of ``tags`` (repeated
    or comma-separated, as ``GET /memory/by-tag`` reads them) that
    ``GET /memory/by-tag?state_mode=history`` lists (current, superseded, expired, archived,
    pending); ``dry_run=true`` returns what would be deleted. Both answers list the memories
    with their state (``memories``, ``states``; presenters.deleted_by_tag_json)."""
    tags = split_values(tags)  # ``tags=a,b`` as GET /memory/by-tag reads it
    return presenters.deleted_by_tag_json(tags, dry_run, await usecases.delete_by_tag(call, tags, dry_run=dry_run))


@router.get("/memory/{memory_id}", tags=["memory"])
async def get_memory(memory_id: str, call: CallerDep, response: Response, as_of: str | None = None,
                     known_at: str | None = Query(None, description=(
                         "ISO 8601: every field as the service believed it then. Not with version "
                         "(400 naming both).")),
                     state_mode: str = "current",
                     version: int | None = Query(None, ge=1, le=MAX_VERSION, description=(
                         "Version N of the memory (GET /v1/memories/{id}/versions). Not with known_at "
                         "(400 naming both)."))) -> dict[str, Any]:
    """One memory with its state and validity window; a non-current memory carries the
    current head's id (``current_id``). Bumps ``last_accessed``. 404 when absent; 404 too
    for a DELETED or REJECTED memory unless ``state_mode=history``, which returns it with
    that state (``is_current`` false, ``last_accessed`` not bumped) until a purge removes
    it, as ``version=N`` reads its versions (README "Current truth"). The
    ``ETag`` header is the version, for ``If-Match`` on PATCH, DELETE and supersede.
    ``known_at`` earlier than now: every field as the service believed it then;
    ``version=N``: version N (``GET /v1/memories/{id}/versions``), 404 naming ``version``
    when it has none. Both ``version`` and ``known_at``: 400 naming both (the operation's
    ``x-exclusive-parameters`` in /openapi.json)."""
    got = await usecases.get_memory(call, memory_id, usecases.read_options(as_of, known_at, state_mode),
                                  version=version)
    response.headers["ETag"] = f'"{got.memory.version}"'
    return {"status": "success", "memory": presenters.got_memory_json(got)}


@router.patch("/memory/{memory_id}", tags=["memory"])
async def update_memory(memory_id: str, body: UpdateMemoryBody, call: CallerDep, if_match: IfMatch = None
                        ) -> dict[str, Any]:
    """Update any subset of content, tags, importance, type, confidence, timestamp,
    t_valid, t_invalid, metadata (merged). ``If-Match`` (header) stale: 412 (RFC 9110);
    ``etag`` (body) stale: 409. Re-embeds when content changed."""
    fields = {name: getattr(body, name) for name in body.model_fields_set - {"etag", "add_tags"}}
    if body.etag is not None and if_match is not None:
        # Reading one would drop the other's condition (break-it review: a stale If-Match
        # went through beside a current body etag).
        raise GatewayError(400, "etag: send the version in If-Match or in the body's etag, not both")
    etag = usecases.body_etag(body.etag) if body.etag is not None else await _if_match_version(call, memory_id, if_match)
    async with conditional(if_match, "etag"):
        updated = await usecases.update_memory(call, memory_id, fields, add_tags=body.add_tags or [], etag=etag)
    return {"status": "success", "memory_id": memory_id, "memory": presenters.memory_json(updated.memory),
            "updated_at": iso(updated.memory, "update_time"), "etag": str(updated.memory.version)}


@router.delete("/memory/{memory_id}", tags=["memory"])
async def delete_memory(memory_id: str, call: CallerDep, purge: bool = False, reason: str = "",
                        if_match: IfMatch = None) -> dict[str, Any]:
    """Tombstone a memory (state DELETED; its vector point goes at once). ``purge=true``
    (admin) purges it everywhere, as ``POST /v1/memories/{id}:purge`` (docs/purge.md).
    ``If-Match`` with a stale ETag: 412, nothing deleted."""
    etag = await _if_match_version(call, memory_id, if_match)
    async with conditional(if_match, "etag"):
        deleted = await usecases.delete_memory(call, memory_id, purge=purge, reason=reason, etag=etag)
    return {"status": "success", "memory_id": memory_id, "message": "Memory deleted",
            "state": "PURGED" if purge else "DELETED", "memory": presenters.memory_json(deleted.memory)}


@router.post("/v1/memories/{memory_id}:supersede", status_code=201, tags=["v1"])
async def supersede(memory_id: str, body: SupersedeBody, call: CallerDep,
                    idempotency_key: IdempotencyKey = "", if_match: IfMatch = None) -> JSONResponse:
    """Replace a memory atomically: creates the replacement, closes the old window,
    marks it SUPERSEDED and writes the edge — all or nothing. ``If-Match`` with a stale
    ETag of the replaced memory: 412. Two calls with one ``Idempotency-Key`` create one
    replacement and both answer it. The body's ``scope`` is the scope of both (as on
    ``POST /memory``); a ``supersedes_memory_id`` in the body is refused (400): the path names
    the memory replaced."""
    started = time.perf_counter()
    if body.supersedes_memory_id:
        raise GatewayError(400, f"supersedes_memory_id: the memory replaced is the path's ({memory_id}); "
                                "leave it out of the body")
    etag = await _if_match_version(call, memory_id, if_match)
    async with conditional(if_match, "etag"):
        replaced = await usecases.supersede_memory(call, memory_id, body, relation=body.supersede_relation,
                                                   reason=body.supersede_reason or "", scope=body.scope or "",
                                                   idempotency_key=idempotency_key, etag=etag)
    return JSONResponse(presenters.superseded_json(replaced, started, with_relation=True), status_code=201)


@router.post("/associate", status_code=201, tags=["memory"], responses={
    202: {"description": "A superseding association to a memory pending review: a supersede proposal waits "
                         "with it (no edge yet)"}})
async def associate(body: AssociateRequest, call: CallerDep) -> JSONResponse:
    """Create one association or a batch (``associations``, at most 500: 201 all
    succeeded, 207 partial)."""
    if body.associations is not None:
        single = sorted(body.model_fields_set & {"memory1_id", "memory2_id", "type", "strength", "reason"})
        if single:  # AutoMem's route reads the batch and drops these; refused, not dropped
            raise GatewayError(400, f"{single[0]}: send one association's fields or associations, not both; "
                                    "nothing was done")
        if not body.associations:  # answered 201 with nothing created (the MCP tool refused it)
            raise GatewayError(400, "associations: must hold at least one association")
        outcome = await usecases.associate_many(call, [usecases.Association(
            a.memory1_id, a.memory2_id, a.type, a.strength, a.reason) for a in body.associations])
        status, answer = presenters.associated_json(outcome)
        return JSONResponse(answer, status_code=status)
    created = await usecases.associate(call, usecases.Association(
        body.memory1_id, body.memory2_id, body.type, body.strength, body.reason))
    relation = presenters.relation_json(created.relation)
    if created.pending_review:  # a supersede proposal waits with the pending memory
        return JSONResponse({"status": "success", "message": (
            f"Association pending review: approving memory {body.memory2_id} supersedes {body.memory1_id}"),
            **relation, "relation_type": relation["type"], "pending_review": True}, status_code=202)
    return JSONResponse({"status": "success", "message": "Association created", **relation,
                         "relation_type": relation["type"]}, status_code=201)
