"""IngestService: the write path.

Each write is one atomic FalkorDB query, then its MemoryEvent goes to JetStream (or the
outbox when NATS is down). Errors are AutomemError subclasses, mapped to status codes by
the interceptor.

A write that changes an existing memory (update, delete, delete by tag, supersede) holds
that memory's lock (automem/ingest/memory_locks.py) from before its graph write until its
events are published, so this process publishes one memory's events in version order; a
purge waits for it (automem/ingest/purge.py). CreateRelation holds both memories' locks,
taken together in sorted order (``MemoryLocks.hold_all``): a superseding edge changes the
source's version, and every edge's event names both memories. Other operations lock one
memory id (for a supersede, the replaced memory). Across several ingest replicas the locks
do not order anything: there the events' ``version`` is the order.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from datetime import UTC, timedelta
from typing import Any

from automem.common.auth import require_role, resolve_scope
from automem.common.backup import export_lines
from automem.common.errors import (
    Aborted,
    AlreadyExists,
    AutomemError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
)
from automem.common.lifecycle import (
    GONE_STATES,
    SUPERSEDING_RELATIONS,
    check_replacement_valid,
    check_transition,
    close_for_supersede,
    make_event,
    review_required,
)
from automem.common.model import (
    AUTHORABLE_RELATIONS,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    Memory,
    Relation,
    check_id,
    check_list_length,
    content_hash,
    epoch,
    first_epoch,
    memory_to_node,
    now,
    parse_relation_type,
    relation_type_name,
    state_name,
    ts,
)
from automem.common.outbox import EventPublisher
from automem.common.settings import Settings
from automem.common.text import text_key
from automem.common.timeouts import long_running
from automem.graph import ENRICHMENT_FIELDS, GraphStore
from automem.graph.idempotency import Claim, node_key
from automem.ingest import schedules
from automem.ingest.logic import (
    TIMELESS_INPUT_PROPERTIES,
    apply_update,
    build_memory,
    check_reason,
    fingerprint_operation,
    mark_payload_behind,
    repeats,
    request_fingerprint,
)
from automem.ingest.memory_locks import MemoryLocks
from automem.ingest.purge import Purger
from automem.v1 import events_pb2, ingest_service_pb2, ingest_service_pb2_grpc, memory_pb2

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 50
#: States of the memories a delete by tag removes: those the by-tag listing shows with
#: ``state_mode=history`` (automem/recall/servicer.py ``_states``).
BY_TAG_DELETABLE_STATES = ("ACTIVE", "SUPERSEDED", "ARCHIVED", "PENDING_REVIEW")


#: Strength of a superseding edge a supersede writes when the request names none.
SUPERSEDE_STRENGTH = 0.9
#: The proto paths CreateRelation's errors name for a relation's ends (the gateway answers
#: them as AutoMem's memory1_id / memory2_id: automem/gateway/usecases.py ASSOCIATION_NAMES).
SOURCE, TARGET = "relation.source_id", "relation.target_id"
#: The prefix of SupersedeMemory's errors about its replacement's fields (the request's proto
#: path, ``replacement.tags[0]``; the gateway and SDK drop it: their callers send the fields
#: at the top level).
REPLACEMENT = "replacement."


def _check_reviewed_write(principal: Any, memory: Memory, what: str) -> None:
    """PERMISSION_DENIED when ``principal``'s key requires review (automem/common/lifecycle.py
    ``review_required``) and ``memory`` is past review: such a key's writes wait for a
    reviewer, so it may not change what is current truth by an edit, a delete or a
    superseding edge (its own pending memories it may). Its supersede waits for review
    (:meth:`IngestServicer._propose_supersede`)."""
    if review_required(principal) and memory.state != memory_pb2.MEMORY_STATE_PENDING_REVIEW:
        raise PermissionDenied(
            f"id: this key's writes wait for review, so it cannot {what} memory {memory.id} "
            f"({state_name(memory.state)}); store a replacement with supersedes_memory_id instead "
            "(it waits for review, and the memory stays current until a reviewer approves)", field="id")


def check_etag(etag: int) -> None:
    """INVALID_ARGUMENT naming ``etag`` for a negative one: 0 means "no check" and a version
    is 1 or more (protos/automem/v1/ingest_service.proto); a negative one was ABORTED ("at
    version 2, not -1") over gRPC while REST refused it as bad input (break-it review)."""
    if etag < 0:
        raise InvalidArgument("etag: must be the memory's version number (not negative)", field="etag")


class IngestServicer(ingest_service_pb2_grpc.IngestServiceServicer):
    """gRPC IngestService over the graph store and the event publisher."""

    def __init__(self, settings: Settings, graph: GraphStore, publisher: EventPublisher) -> None:
        self.settings = settings
        self.graph = graph
        self.publisher = publisher
        #: Per-memory locks ordering one memory's graph writes and events (module docstring);
        #: the ReviewServicer of the process shares them (automem/targets.py).
        self.locks = MemoryLocks()
        #: Locks keyed by scope and content hash, held from the repeat check of a store to its
        #: create (:meth:`_checking_repeats`).
        self.repeat_locks = MemoryLocks()
        self.purger = Purger(graph, publisher, self.locks)

    # --- helpers -------------------------------------------------------------------

    async def _check_tombstone(self, memory: Memory, field: str = "content") -> None:
        await self._check_tombstones([memory], [field])

    async def _check_tombstones(self, memories: list[Memory], fields: list[str]) -> None:
        """ALREADY_EXISTS naming ``fields[i]`` for the first of ``memories`` whose content a
        live tombstone of its scope blocks; one query for all of them."""
        rows = await self.graph.tombstones.blocking([(m.content_hash, m.scope) for m in memories])
        blocked: dict[tuple[str, str], list] = {}
        for h, scope, *tombstone in rows:
            blocked.setdefault((h, scope), tombstone)
        for memory, field in zip(memories, fields, strict=True):
            tombstone = blocked.get((memory.content_hash, memory.scope))
            if tombstone is not None:
                raise AlreadyExists(
                    f"{field}: this content was rejected in scope {memory.scope!r} "
                    f"(tombstone {tombstone[0]}, memory {tombstone[1]}: {tombstone[2] or 'no reason'}); "
                    "an admin can lift the tombstone",
                    field=field,
                )

    async def _idempotent(self, scope: str, key: str) -> Claim | None:
        """The claim of ``key`` in ``scope`` (the memory ids and the fingerprint of the request
        it was first used for), or None. Every keyed write asks this first: a key over
        :data:`IDEMPOTENCY_KEY_MAX_LENGTH` is INVALID_ARGUMENT here."""
        if not key:
            return None
        if len(key) > IDEMPOTENCY_KEY_MAX_LENGTH:
            raise InvalidArgument(f"idempotency_key: at most {IDEMPOTENCY_KEY_MAX_LENGTH} characters "
                                  f"(got {len(key)})", field="idempotency_key")
        return await self.graph.idempotency.claim(scope, key)

    @staticmethod
    def _check_same_request(key: str, claim: Claim, fingerprint: str, same_content: bool, first: str) -> None:
        """INVALID_ARGUMENT naming ``idempotency_key`` unless this request is the one ``claim``
        was made for: the same fingerprint (automem/ingest/logic.py ``request_fingerprint``:
        same operation, every stored field equal); for a claim stored without one, the same
        content (``same_content``) as before. ``first`` names what the key holds (a memory id...)."""
        if claim.fingerprint:
            if claim.fingerprint == fingerprint:
                return
            was, now_op = fingerprint_operation(claim.fingerprint), fingerprint_operation(fingerprint)
            what = f"a {_OPERATION_NAMES.get(was, was)}" if was != now_op else "a different request"
            raise InvalidArgument(
                f"idempotency_key: {key!r} was used for {what} ({first}); a key names one request — send it "
                "again unchanged to get its answer, or use a new key", field="idempotency_key")
        if not same_content:
            raise InvalidArgument(
                f"idempotency_key: {key!r} was used for a different memory ({first}); use a new key for new "
                "content", field="idempotency_key")

    async def _create_claimed(self, scope: str, key: str, memories: list[Memory], fingerprint: str) -> bool:
        """Create ``memories`` and claim idempotency ``key`` for them, with the request's
        ``fingerprint``, in ONE query, so two concurrent retries with the same key cannot both
        create. False (nothing written) when the key was already claimed."""
        return await self.graph.idempotency.create_claimed(scope, key, memories, fingerprint=fingerprint)

    async def _repeats_of(self, memories: list[Memory], items: list[Any], source: str,
                          key: str) -> list[Memory | None]:
        """For each new memory (built from ``items[i]``), the memory it repeats, or None.

        The dedupe rule, the same for single, batch and MCP stores: a store without an
        idempotency ``key`` repeats a memory of its scope with its content hash, ACTIVE or
        PENDING_REVIEW, created within ``dedup_window_seconds`` — or an earlier item of the
        same batch — only when every property the input decides is equal
        (automem/ingest/logic.py ``repeats``). All None for a keyed store (the key is what
        names a retry — README "Retries are safe" — so two keys are two memories, as an
        import's records that hold the same fields are: docs/import-export.md) and when
        ``dedup_enabled`` is off. One graph round trip for the batch."""
        if key or not self.settings.dedup_enabled:
            return [None] * len(memories)
        earlier = await self.graph.memories.recent_with_hash(memories, self.settings.dedup_window_seconds,
                                                             TIMELESS_INPUT_PROPERTIES)
        out: list[Memory | None] = []
        for memory, item in zip(memories, items, strict=True):
            pool = [m for m in earlier if m.scope == memory.scope and m.content_hash == memory.content_hash]
            found = next((m for m in pool if repeats(m, item, self.settings, source)), None)
            out.append(found)
            if found is None:
                earlier.append(memory)
        return out

    def _checking_repeats(self, memories: list[Memory], key: str) -> contextlib.AbstractAsyncContextManager[Any]:
        """Hold, for the body of an ``async with``, the locks of the (scope, content hash) of
        every memory about to be stored: the repeat check (:meth:`_repeats_of`) and the
        create are two graph round trips, and two identical stores running between them both
        created (8 concurrent identical POSTs made 2 memories; break-it review). Taken in
        sorted order (MemoryLocks.hold_all), so batches with overlapping contents cannot
        deadlock. No locks for a keyed store (no repeat check: :meth:`_repeats_of`; its key's
        claim orders it) nor when ``dedup_enabled`` is off. Like the memory locks, they order
        ONE ingest process: replicas behind a load balancer can still each create a repeat
        (an ``Idempotency-Key`` is the guarantee there, automem/graph/idempotency.py)."""
        if key or not self.settings.dedup_enabled:
            return contextlib.nullcontext()
        return self.repeat_locks.hold_all(f"{m.scope}\n{m.content_hash}" for m in memories)

    async def _load(self, memory_id: str, scope: str) -> Memory:
        memory = await self.graph.memories.get(memory_id, scope)
        if memory is None:
            raise NotFound(f"memory {memory_id} not found", field="id")
        return memory

    # --- RPCs ----------------------------------------------------------------------

    async def CreateMemory(self, request, context):
        """Validate and store one memory; publish MEMORY_CREATED.

        Raises INVALID_ARGUMENT naming the field, ALREADY_EXISTS for tombstoned content.
        A used idempotency key, or without a key the dedupe rule (:meth:`_repeats_of`), return
        the existing memory with ``deduplicated`` — unless ``require_unused_key``: then a used
        key is FAILED_PRECONDITION naming ``idempotency_key``.
        A key answers only the request it was first used for (:meth:`_check_same_request`):
        reused with any stored field different, or first used by a batch or a supersede, it is
        INVALID_ARGUMENT naming ``idempotency_key``.
        """
        principal = require_role("writer")
        scope = resolve_scope(request.scope)
        key = request.idempotency_key
        existing = await self._idempotent(scope, key)
        if existing and request.require_unused_key:
            raise FailedPrecondition(f"idempotency_key: {key!r} was used already "
                                     f"(memory {', '.join(existing.memory_ids)})", field="idempotency_key")
        fingerprint = request_fingerprint("create", [request.memory]) if key else ""
        if existing:
            memory = await self.graph.memories.get(existing.memory_ids[0], scope) if existing.memory_ids else None
            if memory is not None:
                self._check_same_request(key, existing, fingerprint,
                                         memory.content_hash == content_hash(request.memory.content),
                                         f"memory {memory.id}")
                return ingest_service_pb2.CreateMemoryResponse(memory=memory, deduplicated=True)
        if review_required(principal):
            request.memory.require_review = True
        memory = build_memory(request.memory, scope=scope, settings=self.settings, created=now(),
                              source=principal.name)
        await self._check_tombstone(memory)
        async with self._checking_repeats([memory], key):
            [duplicate] = await self._repeats_of([memory], [request.memory], principal.name, key)
            if duplicate is not None:
                return ingest_service_pb2.CreateMemoryResponse(memory=duplicate, deduplicated=True)
            if key:
                if not await self._create_claimed(scope, key, [memory], fingerprint):
                    if request.require_unused_key:
                        raise FailedPrecondition(f"idempotency_key: {key!r} was used already",
                                                 field="idempotency_key")
                    return await self._replay(scope, key, fingerprint, request.memory.content)
            else:
                await self.graph.memories.create_many([memory])
        await self.publisher.publish(make_event(
            events_pb2.EVENT_TYPE_MEMORY_CREATED, before=None, after=memory, content_changed=True,
            embedding=request.memory.embedding))
        return ingest_service_pb2.CreateMemoryResponse(memory=memory)

    async def _replay(self, scope: str, key: str, fingerprint: str,
                      content: str) -> ingest_service_pb2.CreateMemoryResponse:
        """The answer to a retry whose key a concurrent request claimed first: that request's
        memory when it was the same request (:meth:`_check_same_request`)."""
        existing = await self._idempotent(scope, key)
        memory = (await self.graph.memories.get(existing.memory_ids[0], scope)
                  if existing and existing.memory_ids else None)
        if existing is None or memory is None:
            raise Aborted(f"idempotency key {key!r} is being used by a concurrent request; retry", field="idempotency_key")
        self._check_same_request(key, existing, fingerprint, memory.content_hash == content_hash(content),
                                 f"memory {memory.id}")
        return ingest_service_pb2.CreateMemoryResponse(memory=memory, deduplicated=True)

    async def BatchCreateMemories(self, request, context):
        """Store up to ``batch_max`` (500) memories in one atomic query; all or nothing. One
        tombstone check for the batch, and the MEMORY_CREATED events published pipelined (one
        round trip; any that fail go to the outbox). Without an idempotency key, an item that
        repeats a memory (the dedupe rule of :meth:`_repeats_of`) is answered with that memory,
        ``deduplicated[i]`` set.

        Raises INVALID_ARGUMENT naming ``memories[i].<field>`` of the first bad item.
        """
        principal = require_role("writer")
        scope = resolve_scope(request.scope)
        count = len(request.memories)
        if count == 0:
            raise InvalidArgument("memories: must hold at least one memory", field="memories")
        if count > self.settings.batch_max:
            raise InvalidArgument(f"memories: {count} items exceeds the batch limit of {self.settings.batch_max}",
                                  field="memories")
        key = request.idempotency_key
        existing = await self._idempotent(scope, key)
        fingerprint = request_fingerprint("batch", list(request.memories),
                                          [f"memories[{i}]." for i in range(count)]) if key else ""
        if existing:
            return await self._batch_replay(scope, existing, request, fingerprint)
        created = now()
        for item in request.memories if review_required(principal) else ():
            item.require_review = True
        # One millisecond apart (the time precision), ending now, so the batch's order is kept
        # as record order and no item is recorded in the future.
        last = len(request.memories) - 1
        memories = [
            build_memory(item, scope=scope, settings=self.settings,
                         created=created - timedelta(milliseconds=last - i),
                         source=principal.name, field_prefix=f"memories[{i}].")
            for i, item in enumerate(request.memories)
        ]
        await self._check_tombstones(memories, [f"memories[{i}].content" for i in range(len(memories))])
        async with self._checking_repeats(memories, key):
            repeated = await self._repeats_of(memories, list(request.memories), principal.name, key)
            answer = [earlier or memory for memory, earlier in zip(memories, repeated, strict=True)]
            new = [(memory, item) for memory, item, earlier
                   in zip(memories, request.memories, repeated, strict=True) if earlier is None]
            if key:
                if not await self.graph.idempotency.create_claimed(scope, key, [m for m, _ in new],
                                                                   ids=[m.id for m in answer], fingerprint=fingerprint):
                    return await self._batch_replay(scope, await self._idempotent(scope, key) or Claim([], ""),
                                                    request, fingerprint)
            elif new:
                await self.graph.memories.create_many([m for m, _ in new])
        await self.publisher.publish_many([
            make_event(events_pb2.EVENT_TYPE_MEMORY_CREATED, before=None, after=memory, content_changed=True,
                       embedding=item.embedding)
            for memory, item in new])
        return ingest_service_pb2.BatchCreateMemoriesResponse(
            memories=answer, deduplicated=[earlier is not None for earlier in repeated])

    async def _batch_replay(self, scope: str, claim: Claim, request: Any,
                            fingerprint: str) -> ingest_service_pb2.BatchCreateMemoriesResponse:
        """The answer to a batch retried with a claimed idempotency key: the memories claimed —
        when the retry is the same request (:meth:`_check_same_request`: every stored field of
        every item equal, in the same order; for a claim stored without a fingerprint, the
        same contents in the same order). A key used for another request (another batch, a
        single store, a supersede) is INVALID_ARGUMENT naming ``idempotency_key``, as on
        CreateMemory: answering with the claimed memories acknowledged values that were never
        stored."""
        ids = claim.memory_ids
        found = await self.graph.memories.hydrate(ids, scope)
        memories = [found[i] for i in ids if i in found]
        if claim.fingerprint:
            self._check_same_request(request.idempotency_key, claim, fingerprint, True, f"{len(ids)} memories")
        else:
            wanted = [content_hash(item.content) for item in request.memories]
            if len(ids) != len(wanted) or any(i in found and found[i].content_hash != h
                                              for i, h in zip(ids, wanted, strict=True)):
                raise InvalidArgument(
                    f"idempotency_key: {request.idempotency_key!r} was used for other contents "
                    f"({len(ids)} memories); use a new key for a new batch", field="idempotency_key")
        return ingest_service_pb2.BatchCreateMemoriesResponse(memories=memories, deduplicated=[True] * len(memories))

    async def UpdateMemory(self, request, context):
        """Apply the fields in ``update_mask``; metadata merges, ``add_tags`` merge.

        With ``etag`` (the version the caller read) a concurrent change gives ABORTED; without,
        the read-modify-write is retried until it lands on an unchanged version, so concurrent
        merges never lose a key. Publishes MEMORY_UPDATED with before/after.
        """
        principal = require_role("writer")
        scope = resolve_scope(request.scope)
        check_etag(request.etag)
        paths = list(request.update_mask.paths)
        if not paths and not request.add_tags:
            raise InvalidArgument("update_mask: name at least one field to update", field="update_mask")
        async with self.locks.hold(request.id):
            return await self._update(request, scope, paths, principal)

    async def _update(self, request, scope: str, paths: list[str],
                      principal: Any) -> ingest_service_pb2.UpdateMemoryResponse:
        """:meth:`UpdateMemory` under the memory's lock."""
        for _attempt in range(MAX_UPDATE_RETRIES):
            current = await self._load(request.id, scope)
            if current.state in GONE_STATES:
                raise FailedPrecondition(f"id: memory {request.id} is {state_name(current.state)}", field="id")
            _check_reviewed_write(principal, current, "edit")
            if request.etag and current.version != request.etag:
                raise Aborted(f"etag: memory {request.id} is at version {current.version}, not {request.etag}",
                              field="etag")
            frozen = {"content", "valid_from", "valid_to"} & set(paths)
            if current.state == memory_pb2.MEMORY_STATE_SUPERSEDED and frozen:
                # Replaced from a later date (a supersede with a future t_valid), the memory is
                # the fact in force until its window closes, and reads call it ACTIVE: its
                # content can be corrected until then (it was refused, and nothing else could
                # correct the fact in force). Its window stays: it ends where the successor's begins.
                in_force = first_epoch(current, "valid_to", default=0.0) > now().timestamp()
                if not in_force or frozen != {"content"}:
                    raise FailedPrecondition(
                        f"{min(frozen - {'content'} if in_force else frozen)}: memory {request.id} is SUPERSEDED "
                        f"by {current.superseded_by or 'another'}"
                        + ("; its window ends where its successor's begins" if in_force else
                           "; its content and window are history — "
                           + await self._instead(current, scope, "update the current memory instead")),
                        field=min(frozen - {"content"} if in_force else frozen))
            updated, content_changed = apply_update(current, request.memory, paths, self.settings, now(),
                                                    list(request.add_tags))
            if _same_but_for_the_version(updated, current):
                # Nothing the caller decides changed (the same values sent again): no new
                # version, no event, the ETag stays (as a Kubernetes no-op patch keeps its
                # resourceVersion). It made an empty version and moved update_time before.
                return ingest_service_pb2.UpdateMemoryResponse(memory=current)
            if "content" in paths and content_changed:
                await self._check_tombstone(updated)
            behind = mark_payload_behind(current, updated)
            followers = await schedules.following_windows(self.graph, current, updated) \
                if "valid_from" in paths else []
            later = first_epoch(updated, "valid_from", default=0.0) > first_epoch(current, "valid_from", default=0.0)
            if later:  # the replaced memories' windows first: no moment is left without a fact
                await schedules.move_windows(self.graph, self.locks, self.publisher, followers, updated)
            if await self.graph.memories.replace(updated, current.version, include_enrichment=content_changed,
                                                 payload_behind=behind):
                await self.publisher.publish(make_event(
                    events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=current, after=updated,
                    content_changed=content_changed))
                if not later:
                    await schedules.move_windows(self.graph, self.locks, self.publisher, followers, updated)
                return ingest_service_pb2.UpdateMemoryResponse(memory=updated)
            if request.etag:
                raise Aborted(f"etag: memory {request.id} changed concurrently", field="etag")
        raise Aborted(f"memory {request.id}: too many concurrent updates, retry")

    async def DeleteMemory(self, request, context):
        """Tombstone (state DELETED, retract_time now; the vector point goes at once through
        the event), or with ``purge`` (admin) purge it everywhere (automem/ingest/purge.py:
        node, versions, edges, event content, vector). NOT_FOUND when absent; ABORTED
        naming ``etag`` when ``etag`` is set and not the memory's version."""
        principal = require_role("admin" if request.purge else "writer")
        scope = resolve_scope(request.scope)
        check_etag(request.etag)
        check_reason(request.reason)
        async with self.locks.hold(request.id):
            return await self._delete(request, scope, principal)

    async def _delete(self, request, scope: str, principal: Any) -> ingest_service_pb2.DeleteMemoryResponse:
        """:meth:`DeleteMemory` under the memory's lock."""
        actor = principal.name
        if request.purge:  # a purge left pending resumes, though the memory reads as gone
            found = await self.graph.memories.get(request.id, scope)
            if found is not None and request.etag and found.version != request.etag:
                raise Aborted(f"etag: memory {request.id} is at version {found.version}, not {request.etag}",
                              field="etag")
            await self.purger.purge_memory(request.id, scope, actor, request.reason)
            return ingest_service_pb2.DeleteMemoryResponse(memory=found or Memory(id=request.id, scope=scope))
        current = await self._load(request.id, scope)
        if request.etag and current.version != request.etag:
            raise Aborted(f"etag: memory {request.id} is at version {current.version}, not {request.etag}",
                          field="etag")
        if current.state == memory_pb2.MEMORY_STATE_DELETED:
            raise NotFound(f"memory {request.id} not found", field="id")
        _check_reviewed_write(principal, current, "delete")
        replaced = await schedules.not_yet_replaced(self.graph, current)
        updated = await self._set_state(current, memory_pb2.MEMORY_STATE_DELETED, request.reason)
        await self._close_proposals_of(current, actor)
        await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_DELETED, before=current, after=updated,
                                                reason=request.reason))
        await schedules.cancel_supersedes(self.graph, self.locks, self.publisher, current, replaced)
        return ingest_service_pb2.DeleteMemoryResponse(memory=updated)

    async def _close_proposals_of(self, memory: Memory, actor: str) -> None:
        """Close the pending supersede proposals a deleted pending memory waited with (they
        named a memory no reviewer can approve any more; the one they would replace stays)."""
        if memory.state != memory_pb2.MEMORY_STATE_PENDING_REVIEW:
            return
        for proposal in await self.graph.review.pending_proposals_of(memory.id, memory.scope):
            await self.graph.review.close_pending(proposal["id"], memory.scope, {
                "status": "rejected", "decided_by": actor, "decision_time": now().timestamp(),
                "decision_reason": f"memory {memory.id} was deleted"})

    async def _set_state(self, current: Memory, state: int, reason: str) -> Memory:
        check_transition(current.state, state)
        updated = Memory()
        updated.CopyFrom(current)
        updated.state = state
        updated.state_reason = reason
        updated.version = current.version + 1
        stamp = now()
        updated.update_time.CopyFrom(ts(stamp))
        if state in (memory_pb2.MEMORY_STATE_DELETED, memory_pb2.MEMORY_STATE_REJECTED):
            updated.retract_time.CopyFrom(ts(stamp))
        if not await self.graph.memories.replace(updated, current.version):
            raise Aborted(f"memory {current.id} changed concurrently, retry")
        return updated

    async def CreateRelation(self, request, context):
        """MERGE a typed edge; only AutoMem's 11 authorable types; self-links refused
        (INVALID_ARGUMENT), as is an end that is no id (blank, over-long, a control character:
        automem/common/model.py ``check_id``); an end that is missing, of another scope, DELETED
        or REJECTED (``GONE_STATES``) is NOT_FOUND; both name relation.source_id /
        relation.target_id (the gateway: memory1_id / memory2_id), and no edge is
        written. An INVALIDATED_BY or EVOLVED_INTO edge marks an ACTIVE source SUPERSEDED and
        closes its valid window at the target's start, as :meth:`SupersedeMemory` does
        (automem/common/lifecycle.py ``close_for_supersede``; mcp-automem's four-call supersede).
        Such an edge needs an ACTIVE target (FAILED_PRECONDITION naming relation.target_id), and a
        source SUPERSEDED by another memory than the target is FAILED_PRECONDITION naming
        relation.source_id, as SupersedeMemory refuses it — the same edge as the source's existing
        supersession is MERGEd (accepted, nothing changes). The edge is written only while
        the source is at the version read (a concurrent change: ABORTED, or the precondition
        it now fails), under the source's lock (module docstring)."""
        principal = require_role("writer")
        scope = resolve_scope(request.scope)
        rel = Relation()
        rel.CopyFrom(request.relation)
        check_reason(rel.reason, "relation.reason")
        if not rel.type:
            rel.type = parse_relation_type(request.type_name or "RELATES_TO", field="type_name")
        elif relation_type_name(rel.type, "relation.type") not in AUTHORABLE_RELATIONS:
            raise InvalidArgument("relation.type: system relation types cannot be authored", field="relation.type")
        for end, which in ((SOURCE, "starts from"), (TARGET, "points to")):
            if not getattr(rel, end.removeprefix("relation.")):
                raise InvalidArgument(f"{end}: required (the memory the relation {which})", field=end)
            check_id(getattr(rel, end.removeprefix("relation.")), end)
        if rel.source_id == rel.target_id:
            raise InvalidArgument(f"{TARGET}: cannot associate a memory with itself", field=TARGET)
        if not 0 <= rel.strength <= 1:  # NaN too: it failed in the graph's query (a 500)
            raise InvalidArgument("relation.strength: must be a number between 0 and 1", field="relation.strength")
        rel.scope = scope
        # Both memories' locks (sorted: MemoryLocks.hold_all): a superseding edge changes the
        # source's version, and any edge's event names both memories and carries the reason,
        # which a purge of either must find published when it scrubs the stream.
        async with self.locks.hold_all([rel.source_id, rel.target_id]):
            return await self._create_relation(rel, scope, principal)

    async def _create_relation(self, rel: Relation, scope: str,
                               principal: Any) -> ingest_service_pb2.CreateRelationResponse:
        """:meth:`CreateRelation` once ``rel`` is validated, under both memories' locks."""
        stamp = now()
        rel.create_time.CopyFrom(ts(stamp))
        found = await self.graph.memories.hydrate([rel.source_id, rel.target_id], scope)
        source, target = found.get(rel.source_id), found.get(rel.target_id)
        # Another scope's, deleted and rejected memories are all "not found" to the caller.
        if source is None or source.state in GONE_STATES:
            raise NotFound(f"{SOURCE}: memory {rel.source_id} not found", field=SOURCE)
        if target is None or target.state in GONE_STATES:
            raise NotFound(f"{TARGET}: memory {rel.target_id} not found", field=TARGET)
        if (relation_type_name(rel.type) in SUPERSEDING_RELATIONS
                and target.state == memory_pb2.MEMORY_STATE_PENDING_REVIEW
                and source.state == memory_pb2.MEMORY_STATE_ACTIVE):
            # A replacement stored for review, then linked (AutoMem's clients supersede so:
            # ../shared/AUTOMEM_API.md): it waits with that memory, as SupersedeMemory's does.
            return await self._propose_by_relation(source, target, rel, principal)
        if relation_type_name(rel.type) in SUPERSEDING_RELATIONS and target.state != memory_pb2.MEMORY_STATE_ACTIVE:
            # A supersession must point at a current memory; this also refuses cycles.
            raise FailedPrecondition(
                f"{TARGET}: {target.id} is {memory_pb2.MemoryState.Name(target.state).removeprefix('MEMORY_STATE_')}"
                "; a memory can only be superseded by an ACTIVE one", field=TARGET)
        superseding = relation_type_name(rel.type) in SUPERSEDING_RELATIONS
        if superseding:
            check_replacement_valid(target, source, TARGET)
        if superseding and source.state == memory_pb2.MEMORY_STATE_PENDING_REVIEW:
            # Its review decides whether it becomes current; approving it made a memory ACTIVE
            # whose successor was named already (current and superseded at once).
            raise FailedPrecondition(f"{SOURCE}: {source.id} is PENDING_REVIEW; only a reviewed memory can be "
                                     "superseded (approve or reject it first)", field=SOURCE)
        if superseding:
            _check_reviewed_write(principal, source, "supersede")
        if not superseding:
            if not await self.graph.relations.create(rel):
                raise NotFound(f"{SOURCE}: memory {rel.source_id} or {rel.target_id} not found", field=SOURCE)
            await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_RELATION_CREATED, before=None,
                                                    after=None, relation=rel))
            return ingest_service_pb2.CreateRelationResponse(relation=rel)
        self._check_not_superseded_elsewhere(source, target.id)
        updated = None
        if source.state == memory_pb2.MEMORY_STATE_ACTIVE:
            # As an atomic supersede closes it (SupersedeMemory): the source's window ends where
            # the target's begins, so a replacement deleted later leaves no stale fact current.
            updated = close_for_supersede(source, target.id,
                                          first_epoch(target, "valid_from", "create_time"), stamp,
                                          rel.reason)
        props = _without_enrichment(memory_to_node(updated)) if updated is not None else {}
        if not await self.graph.relations.create_superseding(rel, props, source.version):
            now_source = await self.graph.memories.get(rel.source_id, scope)
            if now_source is None or now_source.state in GONE_STATES:
                raise NotFound(f"{SOURCE}: memory {rel.source_id} not found", field=SOURCE)
            self._check_not_superseded_elsewhere(now_source, rel.target_id)
            now_target = await self.graph.memories.get(rel.target_id, scope)
            if now_target is None or now_target.state in GONE_STATES:
                raise NotFound(f"{TARGET}: memory {rel.target_id} not found", field=TARGET)
            if now_target.state != memory_pb2.MEMORY_STATE_ACTIVE:
                raise FailedPrecondition(f"{TARGET}: {rel.target_id} is no longer ACTIVE; a memory can only be "
                                         "superseded by an ACTIVE one", field=TARGET)
            raise Aborted(f"{SOURCE}: memory {rel.source_id} changed concurrently, retry", field=SOURCE)
        await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_RELATION_CREATED, before=None, after=None,
                                                relation=rel))
        if updated is not None:
            await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_SUPERSEDED, before=source,
                                                    after=updated, reason=rel.reason))
        return ingest_service_pb2.CreateRelationResponse(relation=rel)

    async def _propose_by_relation(self, source: Memory, target: Memory, rel: Relation,
                                   principal: Any) -> ingest_service_pb2.CreateRelationResponse:
        """A superseding edge from ``source`` (ACTIVE) to ``target`` (PENDING_REVIEW): no edge
        is written; a supersede proposal (automem/ingest/review.py) waits with ``target``, and
        approving it supersedes ``source`` at the version it has now. ``pending_review`` in the
        answer says so."""
        await self.graph.review.propose_supersede(
            str(uuid.uuid4()), target.id, source.id, source.scope, rel.reason, epoch(rel, "create_time"),
            {"relation_type": relation_type_name(rel.type), "strength": rel.strength,
             "target_version": int(source.version), "proposed_by": principal.name})
        return ingest_service_pb2.CreateRelationResponse(relation=rel, pending_review=True)

    @staticmethod
    def _check_not_superseded_elsewhere(source: Memory, target_id: str) -> None:
        """FAILED_PRECONDITION naming relation.source_id when ``source`` is SUPERSEDED by another
        memory than ``target_id``: a second superseding edge would silently override the
        acknowledged supersession (the wording of :meth:`_supersede`'s refusal)."""
        if source.state == memory_pb2.MEMORY_STATE_SUPERSEDED and source.superseded_by != target_id:
            raise FailedPrecondition(
                f"{SOURCE}: memory {source.id} is already SUPERSEDED by {source.superseded_by or 'another'}; "
                "supersede the current memory instead", field=SOURCE)

    async def BatchCreateRelations(self, request, context):
        """Create each relation as :meth:`CreateRelation` would, one after the other; a
        failure does not stop the others. Answers the created ones with their request
        indexes and each failure's index, status code and message (the REST 207 partial
        answer; a failure's ``field`` is the proto path in its CreateRelationRequest). INVALID_ARGUMENT
        naming ``requests`` when it is empty (as :meth:`BatchCreateMemories` refuses an empty
        batch, and REST's ``/associate`` and MCP's ``associate_memories`` an empty
        ``associations``) or over ``batch_max`` (500, AutoMem's batch limit)."""
        require_role("writer")
        resolve_scope(request.scope)
        count = len(request.requests)
        if count == 0:
            raise InvalidArgument("requests: must hold at least one relation", field="requests")
        if count > self.settings.batch_max:
            raise InvalidArgument(f"requests: {count} items exceeds the batch limit of {self.settings.batch_max}",
                                  field="requests")
        response = ingest_service_pb2.BatchCreateRelationsResponse()
        for index, item in enumerate(request.requests):
            if not item.scope:
                item.scope = request.scope
            try:
                created = await self.CreateRelation(item, context)
            except AutomemError as exc:
                response.failures.add(index=index, code=exc.code.value[0], message=exc.message, field=exc.field or "")
                continue
            response.relations.append(created.relation)
            response.indexes.append(index)
        return response

    async def SupersedeMemory(self, request, context):
        """Replace memory ``id`` by a new memory in ONE atomic graph query: create the
        replacement, close the old valid window at the replacement's start, set the old state
        SUPERSEDED with ``superseded_by``, and write the INVALIDATED_BY/EVOLVED_INTO edge.
        A replacement that waits for review (the key requires review, or it sets
        ``require_review``) is stored PENDING_REVIEW with a supersede proposal instead, and the
        old memory stays ACTIVE until a reviewer approves (:meth:`_propose_supersede`).
        NOT_FOUND when the old memory is absent; FAILED_PRECONDITION unless it is ACTIVE.
        An error about the replacement names its proto path (``replacement.content``,
        ``replacement.tags[0]``, ``replacement.valid_to``: :data:`REPLACEMENT`)."""
        principal = require_role("writer")
        scope = resolve_scope(request.scope)
        check_etag(request.etag)
        check_reason(request.reason)
        if request.HasField("strength") and not 0 <= request.strength <= 1:
            raise InvalidArgument("strength: must be a number between 0 and 1", field="strength")
        fingerprint = request_fingerprint(
            "supersede", [request.replacement], [REPLACEMENT], id=request.id, reason=request.reason,
            relation_type=int(request.relation_type or memory_pb2.RELATION_TYPE_INVALIDATED_BY),
            # Only when given: keys claimed before the field existed keep their fingerprints.
            **({"strength": request.strength} if request.HasField("strength") else {}),
        ) if request.idempotency_key else ""
        replayed = await self._supersede_replay(scope, request, fingerprint)
        if replayed is not None:
            return replayed
        try:
            return await self._supersede(principal, scope, request, fingerprint)
        except (Aborted, FailedPrecondition):
            # A concurrent call with the same key may have won (the old memory is then
            # SUPERSEDED, or its version moved on): answer that call's replacement.
            replayed = await self._supersede_replay(scope, request, fingerprint)
            if replayed is not None:
                return replayed
            raise

    async def _supersede(self, principal, scope: str, request,
                         fingerprint: str) -> ingest_service_pb2.SupersedeMemoryResponse:
        """:meth:`SupersedeMemory` once its idempotency key was found unused; the key's claim
        gets the request's ``fingerprint``. Holds the replaced memory's lock from its read
        until its events are published."""
        async with self.locks.hold(request.id):
            return await self._supersede_locked(principal, scope, request, fingerprint)

    async def _supersede_locked(self, principal, scope: str, request,
                                fingerprint: str) -> ingest_service_pb2.SupersedeMemoryResponse:
        old = await self._load(request.id, scope)
        if request.etag and old.version != request.etag:
            raise Aborted(f"etag: memory {request.id} is at version {old.version}, not {request.etag}", field="etag")
        if old.state == memory_pb2.MEMORY_STATE_SUPERSEDED:
            raise FailedPrecondition(
                f"id: memory {request.id} is already SUPERSEDED by {old.superseded_by or 'another'}; "
                + await self._instead(old, scope, "supersede the current memory instead"), field="id")
        if old.state != memory_pb2.MEMORY_STATE_ACTIVE:  # deleted, rejected, pending review, archived
            raise FailedPrecondition(f"id: memory {request.id} is {state_name(old.state)}; only an ACTIVE memory "
                                     "can be superseded", field="id")
        check_transition(old.state, memory_pb2.MEMORY_STATE_SUPERSEDED)
        rel_type = request.relation_type or memory_pb2.RELATION_TYPE_INVALIDATED_BY
        if relation_type_name(rel_type, "relation_type") not in SUPERSEDING_RELATIONS:
            raise InvalidArgument("relation_type: must be INVALIDATED_BY or EVOLVED_INTO", field="relation_type")
        review = review_required(principal) or request.replacement.require_review
        if review:
            request.replacement.require_review = True
        stamp = now()
        new = build_memory(request.replacement, scope=scope, settings=self.settings, created=stamp,
                           source=principal.name, field_prefix=REPLACEMENT)
        check_replacement_valid(new, old, f"{REPLACEMENT}valid_to", InvalidArgument)
        await self._check_tombstone(new, f"{REPLACEMENT}content")
        if review:
            return await self._propose_supersede(old, new, rel_type, request, fingerprint, principal.name)
        closed = close_for_supersede(old, new.id, first_epoch(new, "valid_from", "create_time"), stamp,
                                     request.reason)
        rel = Relation(source_id=old.id, target_id=new.id, type=rel_type,
                       strength=request.strength if request.HasField("strength") else SUPERSEDE_STRENGTH, scope=scope,
                       reason=request.reason)
        rel.create_time.CopyFrom(ts(stamp))
        await self.supersede_in_graph(old, closed, new, rel, claim=request.idempotency_key, fingerprint=fingerprint)
        await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_CREATED, before=None, after=new,
                                                content_changed=True, embedding=request.replacement.embedding))
        await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_SUPERSEDED, before=old, after=closed,
                                                relation=rel, reason=request.reason))
        return ingest_service_pb2.SupersedeMemoryResponse(replacement=new, superseded=closed, relation=rel)

    async def _propose_supersede(self, old: Memory, new: Memory, rel_type: int, request, fingerprint: str,
                                 actor: str) -> ingest_service_pb2.SupersedeMemoryResponse:
        """A supersede whose replacement waits for review (the caller's key requires review, or
        the replacement asks for it): ``new`` is stored PENDING_REVIEW with a supersede
        proposal (automem/ingest/review.py) in one query, and ``old`` stays ACTIVE, the current
        fact, until a reviewer approves (then it is superseded as :meth:`_supersede_locked`
        does) — rejecting leaves it untouched. The answer has no ``relation``: none exists yet."""
        item = {"id": str(uuid.uuid4()), "kind": "supersede_proposal", "memory_id": new.id, "target_id": old.id,
                "reason": request.reason, "relation_type": relation_type_name(rel_type),
                "create_time": epoch(new, "create_time"), "status": "pending", "scope": old.scope,
                "proposed_by": actor, "target_version": int(old.version),
                "strength": request.strength if request.HasField("strength") else SUPERSEDE_STRENGTH}
        claim = node_key(old.scope, request.idempotency_key) if request.idempotency_key else None
        if not await self.graph.memories.create_proposed(new, item, claim, fingerprint):
            raise Aborted(f"idempotency_key: {request.idempotency_key!r} was claimed by a concurrent request; retry",
                          field="idempotency_key")
        await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_CREATED, before=None, after=new,
                                                content_changed=True, embedding=request.replacement.embedding))
        return ingest_service_pb2.SupersedeMemoryResponse(replacement=new, superseded=old)

    async def _supersede_replay(self, scope: str, request,
                                fingerprint: str) -> ingest_service_pb2.SupersedeMemoryResponse | None:
        """The answer to a supersede whose idempotency key is claimed already: the replacement
        that key created, the memory it replaced and the relation between them, as the first
        call answered (None when the key is unused). INVALID_ARGUMENT naming
        ``idempotency_key`` when the key was used for another request (:meth:`_check_same_request`:
        another operation, another target, or any stored field, relation or reason different;
        for a claim stored without a fingerprint, other content); ABORTED naming it when the
        key's memory is not the replacement of ``id`` — never the first answer for a second,
        different request."""
        key = request.idempotency_key
        existing = await self._idempotent(scope, key)
        if not existing:
            return None
        if existing.fingerprint:
            self._check_same_request(key, existing, fingerprint, True, f"memory {', '.join(existing.memory_ids)}")
        replacement = await self.graph.memories.get(existing.memory_ids[0], scope) if existing.memory_ids else None
        old = await self.graph.memories.get(request.id, scope)
        if (replacement is not None and old is not None and old.superseded_by != replacement.id
                and any(p.get("target_id") == old.id
                        for p in await self.graph.review.proposals_of(replacement.id, scope))):
            # Its replacement waits for review (:meth:`_propose_supersede`), or waited and was
            # decided: the same answer, the replacement as it stands now (REJECTED after a
            # rejection; a retry read "was used for another request" then).
            if not existing.fingerprint and replacement.content_hash != content_hash(request.replacement.content):
                raise InvalidArgument(f"idempotency_key: {key!r} was used for a different replacement "
                                      f"({replacement.id}); use a new key for new content", field="idempotency_key")
            return ingest_service_pb2.SupersedeMemoryResponse(replacement=replacement, superseded=old)
        if replacement is None or old is None or old.superseded_by != replacement.id:
            raise Aborted(f"idempotency_key: {key!r} was used for another request", field="idempotency_key")
        if not existing.fingerprint and replacement.content_hash != content_hash(request.replacement.content):
            raise InvalidArgument(
                f"idempotency_key: {key!r} was used for a different replacement "
                f"({replacement.id}); use a new key for new content", field="idempotency_key")
        relation = await self._superseding_relation(old, replacement, request.reason)
        return ingest_service_pb2.SupersedeMemoryResponse(replacement=replacement, superseded=old, relation=relation)

    async def _superseding_relation(self, old: Memory, new: Memory, reason: str) -> Relation | None:
        """The INVALIDATED_BY / EVOLVED_INTO edge from ``old`` to ``new`` as a Relation, as
        :meth:`_supersede` answered it (``reason``: the request's, which a replay repeats);
        None when there is none."""
        for source, type_, target, strength, created in await self.graph.relations.outgoing(
                [old.id], SUPERSEDING_RELATIONS, old.scope):
            if source == old.id and target == new.id:
                rel = Relation(source_id=old.id, target_id=new.id, strength=strength, scope=old.scope, reason=reason,
                               type=parse_relation_type(type_, authorable_only=False))
                rel.create_time.CopyFrom(ts(created))
                return rel
        return None

    async def _instead(self, superseded: Memory, scope: str, advice: str) -> str:
        """What to do instead of writing the SUPERSEDED memory ``superseded``: ``advice`` (act
        on the current memory), unless its successor is gone (DELETED or REJECTED, nothing in
        the chain current): then to store a new memory. The refusal named only the deleted
        successor as the one to act on (break-it review)."""
        successor = await self.graph.memories.get(superseded.superseded_by, scope) if superseded.superseded_by else None
        if successor is not None and successor.state in GONE_STATES:
            return (f"its successor {successor.id} is {state_name(successor.state)}, so nothing in its chain is "
                    "current: store a new memory instead")
        return advice

    async def supersede_in_graph(self, old: Memory, closed: Memory, new: Memory, rel: Relation,
                                 _fail_after_create: bool = False, claim: str = "", fingerprint: str = "") -> None:
        """The atomic graph write of a supersede: one query, so FalkorDB applies all of it or
        none; with ``claim`` (an idempotency key) the same query claims it for ``new``, with the
        request's ``fingerprint``.
        ``_fail_after_create`` (tests only) makes the query fail after the create and the old
        node's update, to show the rollback. Raises Aborted on a concurrent change (or a key
        claimed meanwhile)."""
        key = node_key(old.scope, claim) if claim else None
        if not await self.graph.memories.supersede(old, _without_enrichment(memory_to_node(closed)), new, rel,
                                                   _fail_after_create, claim=key, fingerprint=fingerprint):
            raise Aborted(f"memory {old.id} changed concurrently, retry")

    @long_running
    async def DeleteMemoriesByTag(self, request, context):
        """Tombstone (state DELETED) every memory of the caller's scope carrying any of
        ``tags`` (case-insensitive exact match, ``entity:`` tags in the entity tags too) in a
        state the by-tag listing shows with ``state_mode=history``
        (:data:`BY_TAG_DELETABLE_STATES`): current, superseded, expired, archived and pending
        memories, so that listing shows every memory this deletes (issue 13 item 7; AutoMem's
        automem/api/memory.py deletes whatever carries the tags, its listing hides nothing).
        ``dry_run`` deletes nothing. The answer lists the memories as they were (with their
        state), in listing order; a real delete lists those it deleted (a memory changed
        concurrently is skipped, and not listed). REJECTED memories, already retracted and
        in no listing, stay as they are. ``memory_ids`` (a dry run's answer) keeps the delete
        to those of them still under the tags: a memory stored under the tags after the
        preview is left alone. ``reason`` (default "delete by tag") is recorded on each
        deletion. INVALID_ARGUMENT naming tags (none), tags or memory_ids (more than
        :data:`~automem.common.model.LIST_ITEMS_MAX` items, as a search's lists: a preview
        listing more ids is confirmed in parts of at most that many, each with the tags) or
        reason (too long)."""
        principal = require_role("writer")
        scope = resolve_scope(request.scope)
        check_list_length(request.tags, "tags")
        check_list_length(request.memory_ids, "memory_ids")
        tags = sorted({text_key(t.strip()) for t in request.tags if t.strip()})
        if not tags:
            raise InvalidArgument("tags: at least one tag is required", field="tags")
        reason = check_reason(request.reason) or "delete by tag"
        memories = await self.graph.memories.with_any_tag(scope, tags, BY_TAG_DELETABLE_STATES)
        if len(request.memory_ids):
            chosen = set(request.memory_ids)
            memories = [m for m in memories if m.id in chosen]
        if not request.dry_run:
            for memory in memories:  # nothing is deleted when one of them is past review
                _check_reviewed_write(principal, memory, "delete")
        if request.dry_run:
            return ingest_service_pb2.DeleteMemoriesByTagResponse(memory_ids=[m.id for m in memories],
                                                                  deleted_count=0, memories=memories)
        deleted: list[Memory] = []
        scheduled: list[tuple[Memory, list[Memory]]] = []
        for memory in memories:
            async with self.locks.hold(memory.id):
                replaced = await schedules.not_yet_replaced(self.graph, memory)
                try:
                    updated = await self._set_state(memory, memory_pb2.MEMORY_STATE_DELETED, reason)
                except (FailedPrecondition, Aborted):
                    continue
                await self._close_proposals_of(memory, principal.name)
                await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_DELETED, before=memory,
                                                        after=updated, reason=reason))
            deleted.append(memory)
            scheduled.append((memory, replaced))
        gone = {m.id for m in deleted}  # a replaced memory deleted by the same call stays deleted
        for memory, replaced in scheduled:
            await schedules.cancel_supersedes(self.graph, self.locks, self.publisher, memory,
                                              [m for m in replaced if m.id not in gone])
        return ingest_service_pb2.DeleteMemoriesByTagResponse(
            memory_ids=[m.id for m in deleted], deleted_count=len(deleted), memories=deleted)

    @long_running
    async def ExportBackup(self, request, context):
        """Stream the full export (admin): one JSON record per chunk (automem/common/backup.py).
        INVALID_ARGUMENT naming ``known_at`` outside the years 1–9999 (it was ignored: the
        whole export came back, as if none was given)."""
        principal = require_role("admin")
        if not principal.allows_all():  # the export spans every scope
            raise PermissionDenied("backup exports every scope: it needs a key allowed on all scopes ('*')")
        known_at = None
        if request.HasField("known_at"):
            try:
                known_at = request.known_at.ToDatetime(tzinfo=UTC).timestamp()
            except (ValueError, OverflowError):
                raise InvalidArgument("known_at: outside the years 1–9999", field="known_at") from None
        async for line in export_lines(self.graph, None if request.skip_events else self.publisher.bus, known_at):
            yield ingest_service_pb2.ExportBackupResponse(json_line=line)



#: How errors name the operations of :func:`automem.ingest.logic.request_fingerprint`.
_OPERATION_NAMES = {"create": "single store (CreateMemory)", "batch": "batch store (BatchCreateMemories)",
                    "supersede": "supersede (SupersedeMemory)"}


def _without_enrichment(props: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k not in ENRICHMENT_FIELDS}


def _same_but_for_the_version(updated: Memory, current: Memory) -> bool:
    """Whether ``updated`` (:func:`automem.ingest.logic.apply_update` of ``current``) differs
    from ``current`` only in what every update moves (``version``, ``update_time``)."""
    probe = Memory()
    probe.CopyFrom(updated)
    probe.version = current.version
    if current.HasField("update_time"):
        probe.update_time.CopyFrom(current.update_time)
    else:
        probe.ClearField("update_time")
    return probe == current
