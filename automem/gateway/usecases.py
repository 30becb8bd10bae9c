"""What the gateway does, once for both doors: the use cases the REST routes
(automem/gateway/routes_*.py) and the MCP tools (automem/gateway/mcp_server.py) call.

Each use case translates caller input into a service request — times parsed into
``google.protobuf.Timestamp``, mode words into enums, AutoMem field names into proto fields
— makes the one gRPC call the operation needs through a :class:`Caller`, and returns the
service's answer (a proto); the doors present it (automem/gateway/presenters.py). Rules and
limits (batch sizes, page sizes, relation types a supersede may use, state transitions)
are the services' own: a use case checks only what it must to build the request (a time
that is not ISO 8601, a word that names no enum value, a JSON null where the proto has no
null). Errors: GatewayError (automem/gateway/errors.py) for service answers, InvalidArgument
naming the field for untranslatable input.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import field_mask_pb2

from automem.common import timewindow
from automem.common.client import TIME_FIELDS, AutomemClient, set_input_times
from automem.common.enums import enum_value, enum_word
from automem.common.errors import HTTP_STATUS, InvalidArgument, rest_field
from automem.common.lifecycle import SUPERSEDING_RELATIONS
from automem.common.model import LIST_ITEMS_MAX, parse_relation_type, parse_time, ts
from automem.gateway.deps import CALL_TIMEOUT, Caller
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import MAX_VERSION, MemoryRequest
from automem.v1 import (
    admin_service_pb2,
    consolidate_service_pb2,
    enrich_service_pb2,
    ingest_service_pb2,
    memory_pb2,
    recall_service_pb2,
    review_service_pb2,
)

# --- translation of caller input --------------------------------------------------------


def read_options(as_of: str | None = None, known_at: str | None = None, state_mode: str | None = None,
                 current_only: bool | None = None, include_archived: bool = False,
                 include_pending: bool = False, tz: str = "") -> recall_service_pb2.ReadOptions:
    """The state-pass options of a read. ``state_mode`` current|history wins over the legacy
    ``current_only`` (false = history); ``as_of`` / ``known_at`` are ISO 8601, a naive time
    in ``tz`` (an IANA zone: a recall's ``tz``, which reads its naive ``start``/``end`` the
    same way, automem/common/timewindow.py; "" = UTC). InvalidArgument naming ``state_mode``,
    ``as_of``, ``known_at`` or ``tz``."""
    mode = state_mode or ("current" if current_only in (None, True) else "history")
    options = recall_service_pb2.ReadOptions(
        state_mode=enum_value(recall_service_pb2.StateMode, mode, "state_mode"),
        include_archived=include_archived, include_pending=include_pending)
    zone = timewindow.zone(tz)
    if as_of:
        options.as_of.CopyFrom(ts(parse_time(as_of, field="as_of", tz=zone)))
    if known_at:
        options.known_at.CopyFrom(ts(parse_time(known_at, field="known_at", tz=zone)))
    return options


def state_mode_word(options: recall_service_pb2.ReadOptions) -> str:
    """current | history of read options built by :func:`read_options`."""
    return enum_word(recall_service_pb2.StateMode, options.state_mode, "state_mode", "current")


def memory_input(body: MemoryRequest, field_prefix: str = "") -> ingest_service_pb2.MemoryInput:
    """The MemoryInput of a memory body (``POST /memory`` fields). Times become Timestamps
    (InvalidArgument naming ``field_prefix`` + timestamp / t_valid / t_invalid); metadata
    travels as JSON text so the service can name a non-object."""
    item = ingest_service_pb2.MemoryInput(
        content=body.content, tags=body.tags, type=body.type or "", embedding=body.embedding or [],
        require_review=body.require_review)
    set_input_times(item, {"timestamp": body.timestamp, "t_valid": body.t_valid, "t_invalid": body.t_invalid},
                    field_prefix)
    if body.importance is not None:
        item.importance = body.importance
    if body.confidence is not None:
        item.confidence = body.confidence
    if "metadata" in body.model_fields_set:
        item.metadata_set = True
        item.metadata_json = json.dumps(body.metadata, ensure_ascii=False)
    return item


#: Fields whose JSON null has no proto form: the message each answers it with.
_NOT_NULL = {"tags": "tags: must be a list of strings (use [] to clear)",
             "importance": "importance: must be a number between 0 and 1",
             "confidence": "confidence: must be a number between 0 and 1",
             "type": "type: must not be null", "timestamp": "timestamp: must not be null",
             "t_valid": "t_valid: must not be null",
             "metadata": "metadata: must be an object, not null (its keys are merged into the memory's metadata)"}


def update_input(fields: dict[str, Any]) -> tuple[ingest_service_pb2.MemoryInput, list[str]]:
    """The MemoryInput and update-mask paths of a PATCH (``fields``: AutoMem names -> the
    values given, None for a JSON null). ``t_invalid`` null or "" opens the window; null
    content is empty content (the service refuses it). InvalidArgument naming the field for
    a null with no proto form or an unparseable time."""
    item = ingest_service_pb2.MemoryInput()
    for name, value in fields.items():
        if value is None and name in _NOT_NULL:
            raise InvalidArgument(_NOT_NULL[name], field=name)
        if name == "metadata":
            item.metadata_json = json.dumps(value, ensure_ascii=False)
            item.metadata_set = True
        elif name == "tags":
            item.tags.extend(value)
        elif name in TIME_FIELDS:
            set_input_times(item, {name: value})
        elif value is not None:
            setattr(item, name, value)
    return item, sorted(TIME_FIELDS.get(name, name) for name in fields)


def parse_etag(raw: int | str | None) -> int:
    """The version number of an etag (body ``etag`` or ``If-Match``, whitespace, quotes and
    ``W/`` dropped): ASCII digits only (``int()`` would also read ``+1``, ``1_0`` and other
    scripts' digits); 0 (no check) for none or ``*``. InvalidArgument naming ``etag``
    otherwise, also for a boolean, a negative number or one past int64."""
    if isinstance(raw, bool):
        raise InvalidArgument("etag: must be the memory's version number, not a boolean", field="etag")
    if isinstance(raw, str):
        raw = raw.strip().removeprefix("W/").strip('"')
        if raw == "*":
            return 0
        if raw and not (raw.isascii() and raw.isdigit()):
            raise InvalidArgument("etag: must be the memory's version number (digits 0-9)", field="etag")
    try:
        version = int(raw or 0)
    except (TypeError, ValueError):
        raise InvalidArgument("etag: must be the memory's version number", field="etag") from None
    if version < 0:
        raise InvalidArgument("etag: must be the memory's version number (not negative)", field="etag")
    if version > MAX_VERSION:
        raise InvalidArgument(f"etag: must be at most {MAX_VERSION} (versions are 64-bit)", field="etag")
    return version


def body_etag(raw: int | str | None) -> int:
    """The version a body's ``etag`` (``PATCH /memory/{id}``, the MCP tool ``update_memory``)
    asks the write to check, by :func:`parse_etag`: 0 (no check) when absent, null or ``*``.
    A value naming no version — ``0``, ``"0"``: versions start at 1 — can never match, so it
    is a GatewayError 409 naming ``etag``, as a stale one; passed on, the service would read
    its 0 as "no check" and write. An empty string is InvalidArgument naming ``etag`` (omit
    the field or send null for no check), and so is a weak tag (``W/"3"``): a version check
    is a strong comparison, which a weak tag never passes (RFC 9110 section 8.8.3.2), as
    ``If-Match`` answers (automem/gateway/routes_memory.py ``_if_match``); it was read as
    its version."""
    if raw is None:
        return 0
    if isinstance(raw, str) and not raw.strip():
        raise InvalidArgument("etag: empty; omit it (or send null) for no version check, "
                              "or send the memory's ETag", field="etag")
    if isinstance(raw, str) and raw.strip().upper().startswith("W/"):
        raise InvalidArgument(f"etag: {raw.strip()} is a weak tag, which never matches (RFC 9110); send the "
                              f"memory's version or its ETag as given, e.g. {raw.strip()[2:].strip() or chr(34) * 2}",
                              field="etag")
    version = parse_etag(raw)
    if version == 0 and not (isinstance(raw, str) and raw.strip().removeprefix("W/").strip('"') == "*"):
        raise GatewayError(409, f"etag: {raw} names no version of the memory (versions start at 1); "
                                "send the ETag read, or omit it for no version check",
                           grpc_code=grpc.StatusCode.ABORTED.name)  # as the service's stale etag (app.py)
    return version


def relation_type(name: str | None, field: str = "type", default: str = "RELATES_TO") -> int:
    """The RelationType of a name (any case; ``default`` when empty). InvalidArgument naming
    ``field`` for a name that is no relation type; which types an operation accepts is the
    ingest service's rule."""
    return parse_relation_type(name or default, authorable_only=False, field=field)


def supersede_relation_type(name: str | None, field: str = "supersede_relation") -> int:
    """The RelationType a supersede writes (any case, with or without ``RELATION_TYPE_``;
    INVALIDATED_BY when empty): InvalidArgument naming ``field`` and listing the two a
    supersede may use (:data:`~automem.common.lifecycle.SUPERSEDING_RELATIONS`) for any
    other word, a relation type or not (``REPLACES`` was refused listing all 14 types)."""
    word = (name or "").strip().upper().removeprefix("RELATION_TYPE_") or "INVALIDATED_BY"
    if word not in SUPERSEDING_RELATIONS:
        raise InvalidArgument(f"{field}: must be {' or '.join(SUPERSEDING_RELATIONS)} (got {name!r})", field=field)
    return parse_relation_type(word, authorable_only=False, field=field)


# --- writes -----------------------------------------------------------------------------


#: The supersede fields of a memory body, in the order a refusal names them.
_SUPERSEDE_FIELDS = ("supersedes_memory_id", "supersede_relation", "supersede_reason")


def check_supersede_fields(body: MemoryRequest, prefix: str = "", *, batch: bool = False) -> None:
    """Refuse supersede fields the service would otherwise ignore (a word it drops is refused,
    not silently dropped; InvalidArgument naming ``<prefix><field>``):

    * ``supersede_relation``, when given, must be INVALIDATED_BY or EVOLVED_INTO (any case);
    * ``supersede_relation`` / ``supersede_reason`` need ``supersedes_memory_id``;
    * a batch item (``batch``) supersedes nothing: any of the three fields is refused — a
      replacement is stored alone, atomically (``POST /memory`` with ``supersedes_memory_id``).

    An empty string is "unset" in each of the three fields (``supersede_relation`` "": the
    default INVALIDATED_BY).
    """
    if batch:  # "" is unset here as everywhere: no supersede
        for name in _SUPERSEDE_FIELDS:
            if getattr(body, name):
                raise InvalidArgument(f"{prefix}{name}: a batch does not supersede; store the replacement alone "
                                      "(POST /memory with supersedes_memory_id)", field=f"{prefix}{name}")
    if body.supersede_relation:
        supersede_relation_type(body.supersede_relation, f"{prefix}supersede_relation")
    if not batch and not body.supersedes_memory_id:
        for name in _SUPERSEDE_FIELDS[1:]:
            if getattr(body, name):
                raise InvalidArgument(f"{prefix}{name}: needs supersedes_memory_id (the memory it replaces)",
                                      field=f"{prefix}{name}")


async def create_memory(call: Caller, body: MemoryRequest, *, scope: str = "", idempotency_key: str = "",
                        require_unused_key: bool = False) -> ingest_service_pb2.CreateMemoryResponse:
    """Store one memory (IngestService.CreateMemory); ``deduplicated`` on a retry, or with
    ``require_unused_key`` a refusal when the key was used (``If-None-Match: *``)."""
    return await call(call.client.ingest.CreateMemory, ingest_service_pb2.CreateMemoryRequest(
        memory=memory_input(body), scope=scope, idempotency_key=idempotency_key,
        require_unused_key=require_unused_key))


async def create_memories(call: Caller, bodies: Sequence[MemoryRequest], *, scope: str = "",
                          idempotency_key: str = "") -> ingest_service_pb2.BatchCreateMemoriesResponse:
    """Store a batch, all or nothing (IngestService.BatchCreateMemories: it owns the limit).
    A bad item is named ``memories[i].<field>``: an item supersedes nothing
    (:func:`check_supersede_fields`) and has no ``scope`` of its own (the batch is stored in
    one scope: ``scope``, the body's or the caller's)."""
    for i, b in enumerate(bodies):
        check_supersede_fields(b, f"memories[{i}].", batch=True)
        if b.scope:  # "" is the caller's default scope, as the batch's own "" is
            raise InvalidArgument(f"memories[{i}].scope: a batch is stored in one scope; set it on the batch "
                                  "(scope, or the X-Automem-Scope header), not per memory",
                                  field=f"memories[{i}].scope")
    items = [memory_input(b, f"memories[{i}].") for i, b in enumerate(bodies)]
    return await call(call.client.ingest.BatchCreateMemories, ingest_service_pb2.BatchCreateMemoriesRequest(
        memories=items, scope=scope, idempotency_key=idempotency_key))


#: SupersedeMemoryRequest's ``replacement`` holds the fields a supersede's body (REST, MCP)
#: sends at its top level: its errors name them without the prefix.
REPLACEMENT_NAMES = {"replacement": ""}


async def supersede_memory(call: Caller, memory_id: str, body: MemoryRequest, *, relation: str | None = None,
                           reason: str = "", scope: str = "", idempotency_key: str = "", etag: int = 0,
                           id_field: str = "id") -> ingest_service_pb2.SupersedeMemoryResponse:
    """Replace ``memory_id`` by ``body`` atomically (IngestService.SupersedeMemory, which
    decides the relation types a supersede may use; INVALIDATED_BY when none is given);
    ``etag`` 0 = no version check. ``id_field``: the caller's name of ``memory_id``
    (``supersedes_memory_id`` in a store's body): an error about the replaced memory names it,
    not the service's ``id``; one about the replacement names the body's field (the
    service's ``replacement.tags[0]`` is ``tags[0]``: :data:`REPLACEMENT_NAMES`)."""
    try:
        return await call(call.client.ingest.SupersedeMemory, ingest_service_pb2.SupersedeMemoryRequest(
            id=memory_id, scope=scope, replacement=memory_input(body),
            relation_type=supersede_relation_type(relation), reason=reason,
            idempotency_key=idempotency_key, etag=etag), names=REPLACEMENT_NAMES)
    except GatewayError as exc:
        if id_field == "id":
            raise
        message = exc.message
        if message.startswith("id: "):
            message = f"{id_field}: {message[4:]}"
        elif exc.status == 404 and ":" not in message.split(" ", 1)[0]:
            message = f"{id_field}: {message}"
        raise GatewayError(exc.status, message, code=exc.code, **exc.extra) from None


async def update_memory(call: Caller, memory_id: str, fields: dict[str, Any], *, add_tags: Sequence[str] = (),
                        etag: int = 0) -> ingest_service_pb2.UpdateMemoryResponse:
    """Update the given fields (AutoMem names, see :func:`update_input`) in place; ``etag``
    0 = no version check (IngestService.UpdateMemory)."""
    item, paths = update_input(fields)
    return await call(call.client.ingest.UpdateMemory, ingest_service_pb2.UpdateMemoryRequest(
        id=memory_id, memory=item, update_mask=field_mask_pb2.FieldMask(paths=paths), etag=etag,
        add_tags=list(add_tags)))


async def delete_memory(call: Caller, memory_id: str, *, purge: bool = False, reason: str = "",
                        etag: int = 0) -> ingest_service_pb2.DeleteMemoryResponse:
    """Tombstone a memory (``purge``: remove it, admin); ``etag`` 0 = no version check."""
    return await call(call.client.ingest.DeleteMemory,
                      ingest_service_pb2.DeleteMemoryRequest(id=memory_id, purge=purge, reason=reason, etag=etag))


async def delete_by_tag(call: Caller, tags: Sequence[str], *, dry_run: bool, memory_ids: Sequence[str] = (),
                        reason: str = "") -> ingest_service_pb2.DeleteMemoriesByTagResponse:
    """Tombstone every memory with any of ``tags`` (only those of ``memory_ids`` when given:
    a preview's); ``dry_run`` previews the ids; ``reason`` is recorded on each deletion
    (IngestService.DeleteMemoriesByTag). A preview of more than
    :data:`~automem.common.model.LIST_ITEMS_MAX` ids (the most one call takes) is deleted in
    parts of that many, one answer for all."""
    ids = list(memory_ids)
    answer = ingest_service_pb2.DeleteMemoriesByTagResponse()
    for start in range(0, max(len(ids), 1), LIST_ITEMS_MAX):
        part = await call(call.client.ingest.DeleteMemoriesByTag, ingest_service_pb2.DeleteMemoriesByTagRequest(
            tags=list(tags), dry_run=dry_run, memory_ids=ids[start:start + LIST_ITEMS_MAX], reason=reason),
            CALL_TIMEOUT)
        answer.memory_ids.extend(part.memory_ids)
        answer.memories.extend(part.memories)
        answer.deleted_count += part.deleted_count
    return answer


#: CreateRelationRequest's proto fields by the names ``/associate`` and ``associate_memories``
#: take them under (AutoMem's): the service names the former, their callers read the latter.
ASSOCIATION_NAMES = {"relation.source_id": "memory1_id", "relation.target_id": "memory2_id",
                     "relation.type": "type", "type_name": "type", "relation.strength": "strength",
                     "relation.reason": "reason"}


@dataclass
class Association:
    """One association as a caller gives it (AutoMem's ``/associate`` fields)."""

    memory1_id: str | None
    memory2_id: str | None
    type: str | None = "RELATES_TO"
    strength: float = 0.5
    reason: str | None = None

    def request(self) -> ingest_service_pb2.CreateRelationRequest:
        """The CreateRelation request; the type goes by name, the service resolves it."""
        return ingest_service_pb2.CreateRelationRequest(
            relation=memory_pb2.Relation(source_id=self.memory1_id or "", target_id=self.memory2_id or "",
                                         strength=self.strength, reason=self.reason or ""),
            type_name=self.type or "")


@dataclass
class Associated:
    """A batch's outcome: ``created`` (index, relation) and ``failed`` (index, error), each in
    request order."""

    created: list[tuple[int, memory_pb2.Relation]] = field(default_factory=list)
    failed: list[tuple[int, GatewayError]] = field(default_factory=list)


async def associate(call: Caller, association: Association) -> ingest_service_pb2.CreateRelationResponse:
    """Create one typed edge (IngestService.CreateRelation, which owns the relation types
    and the checks); ``pending_review`` in the answer when the edge supersedes by a memory
    pending review (a proposal waits with it instead)."""
    return await call(call.client.ingest.CreateRelation, association.request(), names=ASSOCIATION_NAMES)


_CODES = {code.value[0]: code for code in grpc.StatusCode}


async def associate_many(call: Caller, associations: Sequence[Association],
                         item_field: Callable[[int, str], str] = lambda i, name: name) -> Associated:
    """Create a batch of edges, each on its own (IngestService.BatchCreateRelations, which
    owns the batch limit). A failed item's message names its field as
    ``item_field(index, field)`` (REST: the field alone; MCP: ``associations[<i>].<field>``),
    ``field`` by its AutoMem name (:data:`ASSOCIATION_NAMES`); the service's ``requests`` is
    ``associations``."""
    response = await call(call.client.ingest.BatchCreateRelations, ingest_service_pb2.BatchCreateRelationsRequest(
        requests=[a.request() for a in associations]), names={"requests": "associations"})
    outcome = Associated(created=list(zip(response.indexes, response.relations, strict=True)))
    for failure in response.failures:
        code = _CODES.get(failure.code, grpc.StatusCode.UNKNOWN)
        message = failure.message
        if failure.field and message.startswith(failure.field + ":"):
            named = rest_field(failure.field, ASSOCIATION_NAMES)
            message = item_field(failure.index, named) + message[len(failure.field):]
        outcome.failed.append((failure.index, GatewayError(HTTP_STATUS.get(code, 500), message, code=code)))
    return outcome


# --- reads ------------------------------------------------------------------------------


async def get_memory(call: Caller, memory_id: str, read: recall_service_pb2.ReadOptions,
                     touch: bool = True, version: int | None = None) -> recall_service_pb2.GetMemoryResponse:
    """One memory through the state pass; bumps its ``last_accessed`` unless ``touch`` is False.
    With ``version`` that version of it (automem/graph/versions.py), without a bump;
    InvalidArgument naming ``version`` and ``known_at`` when ``read`` has ``known_at`` too
    (automem/recall/servicer.py ``_get_version``)."""
    request = recall_service_pb2.GetMemoryRequest(id=memory_id, touch=touch and version is None, read=read)
    if version is not None:
        request.version = version
    return await call(call.client.recall.GetMemory, request)


async def memory_versions(call: Caller, memory_id: str, *, page_size: int,
                          page_token: str) -> recall_service_pb2.ListMemoryVersionsResponse:
    """A page of a memory's versions, oldest first."""
    return await call(call.client.recall.ListMemoryVersions, recall_service_pb2.ListMemoryVersionsRequest(
        id=memory_id, page_size=page_size, page_token=page_token))


async def diff_versions(call: Caller, memory_id: str, from_version: int,
                        to_version: int) -> recall_service_pb2.DiffMemoryVersionsResponse:
    """The fields that differ between two versions of a memory. An error naming the proto's
    ``from_version`` / ``to_version`` is answered naming the REST parameters ``from`` / ``to``."""
    try:
        return await call(call.client.recall.DiffMemoryVersions, recall_service_pb2.DiffMemoryVersionsRequest(
            id=memory_id, from_version=from_version, to_version=to_version))
    except GatewayError as exc:
        for proto, rest in (("from_version:", "from:"), ("to_version:", "to:")):
            if exc.message.startswith(proto):
                exc.message = rest + exc.message.removeprefix(proto)
        raise


async def search(call: Caller, *, read: recall_service_pb2.ReadOptions, query: str = "",
                 queries: Sequence[str] = (), embedding: Sequence[float] = (), limit: int | None = None,
                 offset: int = 0, sort: str = "", time_query: str = "", start: str = "", end: str = "",
                 tags: Sequence[str] = (), tag_mode: str = "", tag_match: str = "",
                 exclude_tags: Sequence[str] = (), expand_relations: bool = False, expand_entities: bool = False,
                 relation_limit: int = 5, expansion_limit: int = 25, expand_min_importance: float = 0.0,
                 expand_min_strength: float = 0.0, min_score: float = 0.0, context: str = "",
                 context_tags: Sequence[str] = (), context_types: Sequence[str] = (),
                 priority_ids: Sequence[str] = (), recency_bias: str = "",
                 tz: str = "", state_debug: bool = False, rerank: bool | None = None,
                 expand_respect_tags: bool = False) -> recall_service_pb2.SearchMemoriesResponse:
    """Ranked hybrid recall (RecallService.SearchMemories) with AutoMem's ``/recall``
    parameters; ``limit`` None = the service's default, the service checks its range.
    ``start``/``end`` and ``tz`` are read by automem/common/timewindow.py (a date-only bound
    covers its whole day in ``tz``). InvalidArgument naming sort, tag_mode, tag_match,
    recency_bias, tz, start or end when they cannot be translated."""
    message = recall_service_pb2.SearchMemoriesRequest(
        query=query, queries=list(queries), embedding=list(embedding), offset=offset,
        sort=enum_value(recall_service_pb2.SortOrder, sort, "sort"), time_query=time_query, tags=list(tags),
        tag_mode=enum_value(recall_service_pb2.TagMode, tag_mode, "tag_mode"),
        tag_match=enum_value(recall_service_pb2.TagMatch, tag_match, "tag_match"),
        exclude_tags=list(exclude_tags), read=read, expand_relations=expand_relations,
        expand_entities=expand_entities, relation_limit=relation_limit, expansion_limit=expansion_limit,
        expand_min_importance=expand_min_importance, expand_min_strength=expand_min_strength,
        min_score=min_score, context=context, context_tags=list(context_tags), context_types=list(context_types),
        priority_ids=list(priority_ids), recency_bias=enum_value(recall_service_pb2.RecencyBias, recency_bias,
                                                                 "recency_bias"), state_debug=state_debug,
        expand_respect_tags=expand_respect_tags)
    if rerank is not None:  # unset: the service's setting decides
        message.rerank = rerank
    if limit is not None:
        message.limit = limit
    zone = timewindow.zone(tz)
    message.tz = (tz or "").strip()
    if start and start.strip():
        message.start_time.CopyFrom(ts(timewindow.parse_bound(start, field="start", tz=zone)))
    if end and end.strip():
        message.end_time.CopyFrom(ts(timewindow.parse_bound(end, field="end", tz=zone, upper=True)))
    return await call(call.client.recall.SearchMemories, message)


async def list_by_tag(call: Caller, tags: Sequence[str], *, read: recall_service_pb2.ReadOptions,
                      limit: int | None = None, offset: int = 0, tag_mode: str = "", tag_match: str = "",
                      page_token: str = "", include_total: bool = False) -> recall_service_pb2.ListMemoriesByTagResponse:
    """A page of the memories under ``tags``, newest first (RecallService.ListMemoriesByTag;
    ``limit`` None = its default page size; the service's ``page_size`` errors name ``limit``)."""
    message = recall_service_pb2.ListMemoriesByTagRequest(
        tags=list(tags), offset=offset, read=read, page_token=page_token, include_total=include_total,
        tag_mode=enum_value(recall_service_pb2.TagMode, tag_mode, "tag_mode"),
        tag_match=enum_value(recall_service_pb2.TagMatch, tag_match, "tag_match"))
    if limit is not None:
        message.page_size = limit
    return await call(call.client.recall.ListMemoriesByTag, message, names={"page_size": "limit"})


async def startup_recall(call: Caller) -> recall_service_pb2.StartupRecallResponse:
    """Critical lessons and system rules, current memories only."""
    return await call(call.client.recall.StartupRecall,
                      recall_service_pb2.StartupRecallRequest(read=read_options()))


async def related(call: Caller, memory_id: str, *, types: Sequence[str], max_depth: int, limit: int,
                  read: recall_service_pb2.ReadOptions) -> recall_service_pb2.ListRelatedMemoriesResponse:
    """The first page of ``memory_id``'s graph neighbours (``limit`` 0 = the service's default)."""
    return await call(call.client.recall.ListRelatedMemories, recall_service_pb2.ListRelatedMemoriesRequest(
        id=memory_id, relationship_types=list(types), max_depth=max_depth, page_size=limit, read=read))


async def analyze(call: Caller, top: int) -> recall_service_pb2.AnalyzeMemoriesResponse:
    """Counts, averages and frequencies of the caller's scope (``top`` checked by the service)."""
    return await call(call.client.recall.AnalyzeMemories, recall_service_pb2.AnalyzeMemoriesRequest(top=top), CALL_TIMEOUT)


# --- graph and entities ---------------------------------------------------------------


async def graph_snapshot(call: Caller, *, limit: int | None, min_importance: float, types: Sequence[str],
                         since: str | None, read: recall_service_pb2.ReadOptions,
                         ) -> recall_service_pb2.GetGraphSnapshotResponse:
    """The scope's graph (``limit`` None = the service's default; ``since`` ISO 8601,
    InvalidArgument naming ``since``); bounds are checked by the service."""
    request = recall_service_pb2.GetGraphSnapshotRequest(min_importance=min_importance, types=list(types), read=read)
    if limit is not None:
        request.limit = limit
    if since:
        request.since.CopyFrom(ts(parse_time(since, field="since")))
    return await call(call.client.recall.GetGraphSnapshot, request, CALL_TIMEOUT)


async def graph_neighbors(call: Caller, memory_id: str, *, depth: int, include_semantic: bool,
                          semantic_limit: int, read: recall_service_pb2.ReadOptions,
                          ) -> recall_service_pb2.ListGraphNeighborsResponse:
    """A memory's graph and semantic neighbours (bounds checked by the service)."""
    return await call(call.client.recall.ListGraphNeighbors, recall_service_pb2.ListGraphNeighborsRequest(
        id=memory_id, depth=depth, include_semantic=include_semantic, semantic_limit=semantic_limit, read=read),
        CALL_TIMEOUT)


async def graph_stats(call: Caller) -> recall_service_pb2.GetGraphStatsResponse:
    """Counts of the scope's graph."""
    return await call(call.client.recall.GetGraphStats, recall_service_pb2.GetGraphStatsRequest(), CALL_TIMEOUT)


async def entities(call: Caller, *, category: str, limit: int | None) -> recall_service_pb2.ListEntitiesResponse:
    """The scope's entities (``limit`` None = the service's default)."""
    request = recall_service_pb2.ListEntitiesRequest(category=category)
    if limit is not None:
        request.limit = limit
    return await call(call.client.recall.ListEntities, request)


async def entity(call: Caller, slug: str, *, category: str, memory_limit: int | None,
                 read: recall_service_pb2.ReadOptions) -> recall_service_pb2.GetEntityResponse:
    """One entity with the memories that mention it."""
    request = recall_service_pb2.GetEntityRequest(slug=slug, category=category, read=read)
    if memory_limit is not None:
        request.memory_limit = memory_limit
    return await call(call.client.recall.GetEntity, request)


async def merge_candidates(call: Caller, *, limit: int | None) -> recall_service_pb2.ListEntityMergeCandidatesResponse:
    """Entity pairs that may name the same thing."""
    request = recall_service_pb2.ListEntityMergeCandidatesRequest()
    if limit is not None:
        request.limit = limit
    return await call(call.client.recall.ListEntityMergeCandidates, request, CALL_TIMEOUT)


async def merge_entities(call: Caller, slug: str, *, merge_into: str, category: str,
                         reason: str) -> review_service_pb2.MergeEntitiesResponse:
    """Merge the entity ``slug`` into ``merge_into`` (admin)."""
    return await call(call.client.review.MergeEntities, review_service_pb2.MergeEntitiesRequest(
        slug=slug, merge_into=merge_into, category=category, reason=reason))


async def entity_merges(call: Caller, *, page_size: int) -> review_service_pb2.ListEntityMergesResponse:
    """The scope's entity merges, newest first (admin)."""
    return await call(call.client.review.ListEntityMerges,
                      review_service_pb2.ListEntityMergesRequest(page_size=page_size))


async def undo_entity_merge(call: Caller, merge_id: str) -> review_service_pb2.UndoEntityMergeResponse:
    """Undo an entity merge (admin)."""
    return await call(call.client.review.UndoEntityMerge, review_service_pb2.UndoEntityMergeRequest(id=merge_id))


# --- operations -------------------------------------------------------------------------

#: Seconds a health check (/health, MCP's ``check_database_health``) may take, all its calls
#: made at once under this one bound. The services bound their own store reads shorter
#: (automem/recall/servicer.py ``STATS_STORE_SECONDS``, automem/enrich/servicer.py
#: ``STATUS_STORE_SECONDS``, 2 s, after at most 1 s for the caller's key check,
#: automem/common/grpc_server.py ``OPEN_PRINCIPAL_SECONDS``), so a stalled store is named as
#: such within ~3 s instead of every store ``unknown`` after 5 s. A healthy check takes about
#: 10 ms. Not shorter: under a saturated 2-core machine (8 recall clients and 2 batch writers)
#: a 0.8-s bound with 0.4-s store parts answered 2 of 45 checks 503 with FalkorDB ``unknown``
#: (docs/benchmarks.md, "/health under load"). The Helm chart probes /livez and /readyz, not
#: /health.
HEALTH_TIMEOUT = 3.5
#: Seconds /readyz waits for each service's grpc.health.v1 answer: under the Helm chart's
#: readinessProbe timeout (deploy/helm/automem/values.yaml ``probes.readiness.timeoutSeconds``,
#: 3 s), so a hung service is answered 503 with its name, not a probe timeout (break-it review).
READINESS_TIMEOUT = 2.0


@dataclass
class Health:
    """What the services answered to a health check; None (with ``stats_error``) where a
    call failed."""

    stats: recall_service_pb2.GetStatsResponse | None = None
    stats_error: str | None = None
    enrichment: enrich_service_pb2.GetEnrichmentStatusResponse | None = None
    #: The enrichment service answered that NATS did not answer it (its error names ``nats``).
    nats_down: bool = False
    sync: consolidate_service_pb2.GetSyncStatusResponse | None = None


async def health(client: AutomemClient, *, with_sync: bool) -> Health:
    """Store stats, the enrichment status and (``with_sync``, when both stores answer) the
    last sync check: the three open RPCs, no credentials, asked at once within
    :data:`HEALTH_TIMEOUT` (each service bounds its own store reads well under it:
    RecallService.GetStats, EnrichService.GetEnrichmentStatus), so a stalled store or service
    costs one bound, not one per call. The sync check counts both stores: it is dropped
    (cancelled) as soon as the stats say one of them did not answer."""
    call = Caller(client, [])
    out = Health()
    sync = asyncio.ensure_future(call(client.consolidate.GetSyncStatus, consolidate_service_pb2.GetSyncStatusRequest(),
                                      HEALTH_TIMEOUT)) if with_sync else None
    try:
        stats, enrichment = await asyncio.gather(
            call(client.recall.GetStats, recall_service_pb2.GetStatsRequest(), HEALTH_TIMEOUT),
            call(client.enrich.GetEnrichmentStatus, enrich_service_pb2.GetEnrichmentStatusRequest(), HEALTH_TIMEOUT),
            return_exceptions=True)
        for answer in (stats, enrichment):
            if isinstance(answer, BaseException) and not isinstance(answer, GatewayError):
                raise answer
        if isinstance(stats, GatewayError):
            out.stats_error = stats.message
        else:
            out.stats = stats
        if not isinstance(enrichment, GatewayError):
            out.enrichment = enrichment
        else:
            out.nats_down = enrichment.code == grpc.StatusCode.UNAVAILABLE and enrichment.message.startswith("nats:")
        if (sync is not None and out.stats is not None and out.stats.graph_connected and out.stats.vectors_enabled
                and out.stats.vectors_connected):
            with contextlib.suppress(GatewayError):
                out.sync = await sync
    finally:
        if sync is not None and not sync.done():
            sync.cancel()
        elif sync is not None and not sync.cancelled():
            sync.exception()  # read, so that a failed check unused is not logged as unretrieved
    return out


#: The services the gateway's REST and MCP calls need, by client stub, with their health names.
GATEWAY_NEEDS = {"ingest": "automem.v1.IngestService", "recall": "automem.v1.RecallService"}


async def readiness(client: AutomemClient, timeout: float = READINESS_TIMEOUT) -> dict[str, bool]:
    """Whether each service the gateway needs (:data:`GATEWAY_NEEDS`) reports SERVING on
    grpc.health.v1 — which the service sets from its own stores (automem/common/readiness.py).
    Unreachable or slower than ``timeout`` seconds (default :data:`READINESS_TIMEOUT`) counts
    as not serving."""
    from grpc_health.v1 import health_pb2

    async def one(stub: str, service: str) -> bool:
        try:
            answer = await client.health[stub].Check(health_pb2.HealthCheckRequest(service=service),
                                                     timeout=timeout)
        except grpc.aio.AioRpcError:
            return False
        return answer.status == health_pb2.HealthCheckResponse.SERVING

    names = list(GATEWAY_NEEDS.items())
    results = await asyncio.gather(*(one(stub, service) for stub, service in names))
    return {service: ok for (_, service), ok in zip(names, results, strict=True)}


async def enrichment_status(call: Caller) -> enrich_service_pb2.GetEnrichmentStatusResponse:
    """Queue depth and counters of enrichment."""
    return await call(call.client.enrich.GetEnrichmentStatus, enrich_service_pb2.GetEnrichmentStatusRequest())


async def reembed_status(call: Caller) -> enrich_service_pb2.ReembedProgress | None:
    """The latest re-embedding job of the caller's scope, None when none ran there."""
    found = await call(call.client.enrich.GetReembedStatus, enrich_service_pb2.GetReembedStatusRequest())
    return found.reembed if found.HasField("reembed") else None


async def reprocess(call: Caller, ids: Sequence[str]) -> enrich_service_pb2.ReprocessMemoriesResponse:
    """Re-enrich the given memories (admin)."""
    return await call(call.client.enrich.ReprocessMemories, enrich_service_pb2.ReprocessMemoriesRequest(ids=ids), CALL_TIMEOUT)


async def reembed(call: Caller, batch_size: int, limit: int, force: bool) -> enrich_service_pb2.ReembedMemoriesResponse:
    """Start re-embedding the caller's scope (admin); progress in :func:`enrichment_status`."""
    return await call(call.client.enrich.ReembedMemories, enrich_service_pb2.ReembedMemoriesRequest(
        batch_size=batch_size, limit=limit, force=force), CALL_TIMEOUT)


async def consolidate(call: Caller, mode: str, dry_run: bool) -> consolidate_service_pb2.ConsolidationRun:
    """Run one consolidation task now."""
    response = await call(call.client.consolidate.RunConsolidation,
                          consolidate_service_pb2.RunConsolidationRequest(mode=mode, dry_run=dry_run), CALL_TIMEOUT)
    return response.run


async def consolidation_status(call: Caller) -> consolidate_service_pb2.GetConsolidationStatusResponse:
    """Recent consolidation runs and the schedule."""
    return await call(call.client.consolidate.GetConsolidationStatus,
                      consolidate_service_pb2.GetConsolidationStatusRequest())


async def check_sync(call: Caller, *, repair: bool) -> consolidate_service_pb2.CheckSyncResponse:
    """Compare graph and vectors; repair with ``repair`` (admin)."""
    return await call(call.client.consolidate.CheckSync, consolidate_service_pb2.CheckSyncRequest(repair=repair), CALL_TIMEOUT)


# --- truth model ------------------------------------------------------------------------


async def review_items(call: Caller, *, status: str, kind: str, page_size: int,
                       page_token: str) -> review_service_pb2.ListReviewItemsResponse:
    """A page of the review queue."""
    return await call(call.client.review.ListReviewItems, review_service_pb2.ListReviewItemsRequest(
        status=status, kind=kind, page_size=page_size, page_token=page_token))


async def approve(call: Caller, item_id: str, reason: str) -> review_service_pb2.ApproveReviewItemResponse:
    """Approve a pending review item (admin)."""
    return await call(call.client.review.ApproveReviewItem,
                      review_service_pb2.ApproveReviewItemRequest(id=item_id, reason=reason))


async def reject(call: Caller, item_id: str, reason: str) -> review_service_pb2.RejectReviewItemResponse:
    """Reject a pending review item with a reason (admin)."""
    return await call(call.client.review.RejectReviewItem,
                      review_service_pb2.RejectReviewItemRequest(id=item_id, reason=reason))


async def tombstones(call: Caller, *, include_lifted: bool, page_size: int,
                     page_token: str) -> review_service_pb2.ListTombstonesResponse:
    """A page of the scope's tombstones (admin)."""
    return await call(call.client.review.ListTombstones, review_service_pb2.ListTombstonesRequest(
        include_lifted=include_lifted, page_size=page_size, page_token=page_token))


async def lift(call: Caller, tombstone_id: str) -> review_service_pb2.LiftTombstoneResponse:
    """Lift a tombstone (admin)."""
    return await call(call.client.review.LiftTombstone, review_service_pb2.LiftTombstoneRequest(id=tombstone_id))


async def history(call: Caller, memory_id: str, *, page_size: int,
                  page_token: str) -> review_service_pb2.ListMemoryEventsResponse:
    """A page of a memory's events, oldest first."""
    return await call(call.client.review.ListMemoryEvents, review_service_pb2.ListMemoryEventsRequest(
        id=memory_id, page_size=page_size, page_token=page_token), CALL_TIMEOUT)


async def purge_memory(call: Caller, memory_id: str, *, reason: str,
                       dry_run: bool) -> review_service_pb2.PurgeMemoryResponse:
    """Purge one memory everywhere (admin; automem/ingest/purge.py); ``dry_run`` counts."""
    return await call(call.client.review.PurgeMemory, review_service_pb2.PurgeMemoryRequest(
        id=memory_id, reason=reason, dry_run=dry_run), PURGE_TIMEOUT)


async def purge_scope(call: Caller, *, confirm_scope: str, reason: str,
                      dry_run: bool) -> review_service_pb2.PurgeScopeResponse:
    """Purge every memory of the caller's scope (admin); ``confirm_scope`` repeats it."""
    return await call(call.client.review.PurgeScope, review_service_pb2.PurgeScopeRequest(
        confirm_scope=confirm_scope, reason=reason, dry_run=dry_run), PURGE_TIMEOUT)


async def purges(call: Caller, *, page_size: int, page_token: str) -> review_service_pb2.ListPurgesResponse:
    """A page of the scope's purge records, newest first (admin)."""
    return await call(call.client.review.ListPurges, review_service_pb2.ListPurgesRequest(
        page_size=page_size, page_token=page_token))


#: Seconds a full export may stream.
BACKUP_TIMEOUT = 3600.0
#: Seconds a purge may take (it reads the whole event stream once: automem/ingest/purge.py).
PURGE_TIMEOUT = 3600.0


async def export_backup(call: Caller, *, events: bool, known_at: str | None = None) -> AsyncIterator[str]:
    """The full export as JSON lines (admin); ``known_at`` (ISO 8601, InvalidArgument naming
    it) earlier than now: the records as believed then (automem/common/backup.py). The first
    record is read before this returns, so a refused call raises GatewayError here rather
    than mid-stream."""
    request = ingest_service_pb2.ExportBackupRequest(skip_events=not events)
    if known_at:
        request.known_at.CopyFrom(ts(parse_time(known_at, field="known_at")))
    stream = call.stream(call.client.ingest.ExportBackup, request, BACKUP_TIMEOUT)
    try:
        first = await stream.read()
    except grpc.aio.AioRpcError as exc:
        raise GatewayError.from_rpc(exc) from None

    async def lines() -> AsyncIterator[str]:
        chunk = first
        while chunk is not grpc.aio.EOF:  # read() only: grpc.aio forbids mixing it with iteration
            yield chunk.json_line + "\n"
            chunk = await stream.read()

    return lines()


async def create_api_key(call: Caller, *, role: str, scopes: Sequence[str], default_scope: str, display_name: str,
                         require_review: bool) -> admin_service_pb2.CreateApiKeyResponse:
    """Mint an API key (admin; automem/ingest/admin.py): the secret is in the answer only."""
    return await call(call.client.admin.CreateApiKey, admin_service_pb2.CreateApiKeyRequest(
        role=role, scopes=list(scopes), default_scope=default_scope, display_name=display_name,
        require_review=require_review))


async def list_api_keys(call: Caller, *, page_size: int, page_token: str) -> admin_service_pb2.ListApiKeysResponse:
    """The keys within the caller's scope patterns, oldest first (admin)."""
    return await call(call.client.admin.ListApiKeys, admin_service_pb2.ListApiKeysRequest(
        page_size=page_size, page_token=page_token))


async def revoke_api_key(call: Caller, key_id: str) -> admin_service_pb2.RevokeApiKeyResponse:
    """Revoke a key (admin)."""
    return await call(call.client.admin.RevokeApiKey, admin_service_pb2.RevokeApiKeyRequest(id=key_id))


async def api_key_events(call: Caller, *, key_id: str, page_size: int,
                         page_token: str) -> admin_service_pb2.ListApiKeyEventsResponse:
    """The audit record of key changes, newest first (admin)."""
    return await call(call.client.admin.ListApiKeyEvents, admin_service_pb2.ListApiKeyEventsRequest(
        key_id=key_id, page_size=page_size, page_token=page_token))


async def restore_backup(call: Caller, chunks: AsyncIterator[bytes], *,
                         force: bool) -> admin_service_pb2.RestoreBackupResponse:
    """Restore a backup whose bytes arrive as ``chunks`` (admin on every scope;
    automem/ingest/admin.py ``RestoreBackup``): streamed on to the service as they come."""

    async def requests() -> AsyncIterator[admin_service_pb2.RestoreBackupRequest]:
        first = True
        async for data in chunks:
            if data or first:
                yield admin_service_pb2.RestoreBackupRequest(data=data, force=force and first)
                first = False
        if first:
            yield admin_service_pb2.RestoreBackupRequest(force=force)

    return await call(call.client.admin.RestoreBackup, requests(), BACKUP_TIMEOUT)
