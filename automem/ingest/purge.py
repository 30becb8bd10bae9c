"""Admin purge: the only way history disappears (issue 14 item 5).

A delete is a tombstone that keeps content for audit (../shared/DESIGN.md, "Writes"); a
purge removes it everywhere this service keeps it, for one memory (``PurgeMemory``,
``DeleteMemory`` with ``purge``) or for every memory of a scope (``PurgeScope``: a tenant's
right to erasure). What goes, and where it lives:

* the graph (automem/graph/purges.py): the Memory nodes with every edge (relations,
  supersession, MENTIONS), their ``MemoryVersion`` nodes, the review items, tombstones and
  idempotency keys naming them, the entities no remaining memory mentions, and the entity
  merges all of whose moved memories are purged (with the aliases they added: a merged
  slug is a name from the purged text); a scope purge
  also removes every entity, entity merge, review item, tombstone and idempotency key of
  the scope;
* the outbox (automem/common/outbox.py): queued events of those memories are rewritten
  without content (they still tell enrichment the memory is gone);
* the event stream (automem/common/bus.py): every message about those memories — memory
  events naming them (as subject, in before/after, or at either end of a relation) and
  dead letters of such events; a scope purge also removes the scope's activity events
  (recall queries). Messages are deleted by sequence (the server erases them);
* the vector point: the content-free ``MEMORY_PURGED`` event each purged memory gets makes
  the enrichment consumer (the only writer of vector points, automem/enrich/consumer.py)
  delete it, since the memory no longer exists in the graph.

What stays: a ``:Purge`` node — the content-free audit record (id, kind, scope, the purged
ids, actor, time, reason, counts of what was removed), listed by ``ListPurges`` and carried
by backups — and the ``MEMORY_PURGED`` events (memory id, scope, actor, time, reason; no
before/after), which are all a purged memory's history shows afterwards. API keys, scope
settings and consolidation run records stay (no memory content). Backup files written
before a purge are outside the service: they still hold the memory (docs/purge.md).

Steps and resumption: ``graph`` (one pending ``:Purge`` node is written first, holding the
ids, then the graph removal), ``outbox``, ``events`` (the MEMORY_PURGED events, ids derived
from the purge id so a retry is de-duplicated by NATS), ``stream``. The node's
``pending_steps`` names what remains; when a step fails (a store down) the call fails with
UNAVAILABLE naming the purge and its remaining steps, and repeating the same call (same
memory id, or the same scope) resumes that purge instead of starting another; the ingest
target also resumes pending purges in the background every 30 s (:meth:`Purger.resume_forever`).

Against concurrent writes (automem/ingest/memory_locks.py, the IngestServicer's locks): a
purge by id runs under its memory's lock (``PurgeMemory`` and ``DeleteMemory`` with
``purge`` take it), so an update, delete or review decision of that memory is either done,
events published, before the purge reads it, or finds it gone. A scope purge takes no lock
for its whole run (it would stop every write of the scope meanwhile): once its graph step has
removed the memories it waits for each one's lock in turn (:meth:`MemoryLocks.settle`), so a
write that wrote the graph before has published its events before the outbox and stream
steps scrub them, and a later write finds no memory. The background resumption settles the
same way.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from automem.common.auth import require_role, resolve_scope
from automem.common.errors import AutomemError, InvalidArgument, NotFound, Unavailable
from automem.common.lifecycle import make_event
from automem.common.model import ts
from automem.common.outbox import EventPublisher
from automem.common.timeouts import long_running
from automem.graph import GraphStore
from automem.graph.purges import COUNT_NAMES
from automem.ingest import schedules
from automem.ingest.logic import check_reason
from automem.ingest.memory_locks import MemoryLocks
from automem.v1 import event_stream_pb2, events_pb2, review_service_pb2

log = logging.getLogger(__name__)

#: Purge ids running in this process (:attr:`Purger.running`).
_RUNNING: set[str] = set()

STEPS = ("graph", "outbox", "events", "stream")
#: Namespace of the MEMORY_PURGED event ids (uuid5 of ``<purge id>/<memory id>``).
_EVENT_NAMESPACE = uuid.UUID("6b1d5c1e-6a53-4a8e-9d0f-2f1f0b7e5a11")
#: Seconds between two passes of the background resumption (:meth:`Purger.resume_forever`).
RESUME_INTERVAL_SECONDS = 30.0
#: Records one ListPurges page holds at most (default 50).
MAX_PURGE_PAGE = 200


def _mentions(event: events_pb2.MemoryEvent, ids: set[str]) -> bool:
    return bool({event.memory_id, event.before.id, event.after.id, event.relation.source_id,
                 event.relation.target_id} & ids)


def is_purge_notice(event: events_pb2.MemoryEvent) -> bool:
    """True for a content-free MEMORY_PURGED event (no before/after, no relation): what a
    purge leaves on the stream."""
    return (event.type == events_pb2.EVENT_TYPE_MEMORY_PURGED and not event.HasField("before")
            and not event.HasField("after") and not event.HasField("relation"))


class Selection:
    """What a purge covers: the memory ids ``ids`` of ``scope``, and with ``whole_scope``
    everything of the scope (its events by scope, activity events included)."""

    def __init__(self, ids: Sequence[str], scope: str, whole_scope: bool) -> None:
        self.ids = set(ids)
        self.scope = scope
        self.whole_scope = whole_scope

    def event(self, event: events_pb2.MemoryEvent) -> bool:
        """True when ``event`` is about the selection (a content-free purge notice is not)."""
        if is_purge_notice(event):
            return False
        if self.whole_scope and (event.scope or event.relation.scope) == self.scope:
            return True
        return _mentions(event, self.ids)

    def message(self, subject: str, data: bytes, is_activity: bool) -> bool:
        """True when the stream message ``subject``/``data`` must go."""
        try:
            if is_activity:
                return self.whole_scope and event_stream_pb2.ActivityEvent.FromString(data).scope == self.scope
            return self.event(events_pb2.MemoryEvent.FromString(data))
        except Exception:  # noqa: BLE001 - undecodable: not ours to judge, kept
            return False

    def strip(self, event: events_pb2.MemoryEvent) -> events_pb2.MemoryEvent | None:
        """The content-free copy of a queued event of the selection (ids, type, scope,
        actor, time and version kept), or None when it is not of the selection."""
        if not self.event(event):
            return None
        out = events_pb2.MemoryEvent(event_id=event.event_id, type=event.type, memory_id=event.memory_id,
                                     scope=event.scope, actor=event.actor, version=event.version,
                                     reason="content removed by a purge")
        out.event_time.CopyFrom(event.event_time)
        return out


class Purger:
    """Runs purges over the graph store and the event publisher (whose bus holds the stream).

    Args:
        graph: the connected graph store.
        publisher: the event publisher (outbox and bus).
        locks: the per-memory write locks of the process (the IngestServicer's); a new set
            when omitted.
    """

    def __init__(self, graph: GraphStore, publisher: EventPublisher, locks: MemoryLocks | None = None) -> None:
        self.graph = graph
        self.publisher = publisher
        self.locks = locks if locks is not None else MemoryLocks()
        #: Seconds between two passes of :meth:`resume_forever`, and the age a pending purge
        #: must have before a pass takes it (a caller may be resuming it right now).
        self.resume_interval = RESUME_INTERVAL_SECONDS
        #: Ids of the purges this process is running now (shared by its Purgers: the ingest
        #: servicer's and the review servicer's): a resumption pass leaves them to the run
        #: under way (a scope purge can take minutes, longer than the pass's minimum age).
        self.running = _RUNNING

    async def resume_pending(self, min_age: float = 0.0) -> list[review_service_pb2.PurgeRecord]:
        """Resume every pending purge (of every scope) started at least ``min_age`` seconds
        ago, oldest first; returns the records of those that finished. A purge whose step
        fails again stays pending (logged) for the next pass; one this process is running
        already (:attr:`running`) is left to that run."""
        done = []
        for props in await self.graph.purges.all_pending(time.time() - min_age):
            if props["id"] in self.running:
                continue  # its caller (or an earlier pass) is running it
            try:
                done.append(await self._run(props, [], settle=True))
            except Unavailable:
                continue  # logged by _run; the next pass tries again
        return done

    async def resume_forever(self) -> None:
        """Background task of the ingest target (automem/targets.py): every
        :attr:`resume_interval` seconds, :meth:`resume_pending` the purges pending for at
        least that long, so a purge whose caller never repeats the call still finishes."""
        last = time.monotonic()
        while True:
            await asyncio.sleep(min(self.resume_interval, 1.0))
            if time.monotonic() - last < self.resume_interval:
                continue
            last = time.monotonic()
            try:
                finished = await self.resume_pending(self.resume_interval)
                if finished:
                    log.info("pending purges resumed", extra={"purges": [r.id for r in finished]})
            except Exception as exc:  # noqa: BLE001 - keep the loop alive; the graph may be down
                log.warning("pending purges not resumed", extra={"error": repr(exc)})

    async def purge_memory(self, memory_id: str, scope: str, actor: str, reason: str,
                           dry_run: bool = False) -> review_service_pb2.PurgeRecord:
        """Purge memory ``memory_id`` of ``scope`` (see the module docstring), or resume its
        pending purge. Returns the record (``dry_run``: the counts, nothing removed). The
        caller holds the memory's lock (:attr:`locks`), so no write of it is under way.

        Raises NotFound (field ``id``) when the memory is not in ``scope`` and no purge of it
        is pending; InvalidArgument naming ``id`` / ``reason``; Unavailable when a step
        fails (the purge stays pending; the same call resumes it)."""
        if not memory_id.strip():
            raise InvalidArgument("id: the memory id is required", field="id")
        check_reason(reason)
        pending = await self.graph.purges.pending(scope, "memory", memory_id)
        if pending is not None and not dry_run:
            return await self._run(pending, [])
        memory = await self.graph.memories.get(memory_id, scope)
        if memory is None:
            if pending is not None:  # a dry run of a purge under way: what remains of it
                return _record(pending)
            raise NotFound(f"memory {memory_id} not found", field="id")
        # Read before the purge removes the edges (automem/ingest/schedules.py).
        replaced = [] if dry_run else await schedules.not_yet_replaced(self.graph, memory)
        record = await self._start("memory", [memory_id], scope, actor, reason, dry_run)
        await schedules.cancel_supersedes(self.graph, self.locks, self.publisher, memory, replaced)
        return record

    async def purge_scope(self, scope: str, confirm_scope: str, actor: str, reason: str,
                          dry_run: bool = False) -> review_service_pb2.PurgeRecord:
        """Purge every memory of ``scope`` and the scope's entities, entity merges, review
        items, tombstones, idempotency keys and activity events, or resume its pending
        purge. ``confirm_scope`` must equal ``scope`` (InvalidArgument naming
        ``confirm_scope``). Memories stored while it runs are not purged (purge again).
        Raises Unavailable as :meth:`purge_memory`."""
        if confirm_scope != scope:
            raise InvalidArgument(f"confirm_scope: must repeat the scope being purged ({scope!r})",
                                  field="confirm_scope")
        check_reason(reason)
        pending = await self.graph.purges.pending(scope, "scope")
        if pending is not None and not dry_run:
            return await self._run(pending, [], settle=True)
        ids = await self.graph.purges.memory_ids(scope)
        return await self._start("scope", ids, scope, actor, reason, dry_run)

    async def _start(self, kind: str, ids: list[str], scope: str, actor: str, reason: str,
                     dry_run: bool) -> review_service_pb2.PurgeRecord:
        whole = kind == "scope"
        counts, entity_keys = await self.graph.purges.plan(ids, scope, whole)
        selection = Selection(ids, scope, whole)
        props: dict[str, Any] = {
            "id": "" if dry_run else str(uuid.uuid4()), "kind": kind, "scope": scope, "memory_ids": ids,
            "entity_keys": entity_keys, "actor": actor, "purge_time": time.time(), "reason": reason,
            "status": "pending", "pending_steps": list(STEPS),
            **{f"count_{name}": value for name, value in counts.items()}}
        if dry_run:
            bus = self.publisher.bus
            props["count_outbox_events"] = await self.publisher.scrub(selection.strip, dry_run=True)
            props["count_stream_messages"] = await bus.scrub(
                lambda subject, data: selection.message(subject, data, bus.subjects.is_activity(subject)),
                dry_run=True)
            record = _record(props)
            record.dry_run = True
            record.status = "dry_run"
            del record.pending_steps[:]
            return record
        await self.graph.purges.record(props)
        return await self._run(props, entity_keys, settle=whole)

    async def _run(self, props: dict[str, Any], entity_keys: Sequence[str],
                   settle: bool = False) -> review_service_pb2.PurgeRecord:
        """Do the pending steps of the purge ``props`` in order, recording each on its node.
        With ``settle`` (a caller holding none of the memories' locks) the graph step is
        followed by :meth:`MemoryLocks.settle` of the purged ids (module docstring). The
        purge's id is in :attr:`running` meanwhile."""
        self.running.add(props["id"])
        try:
            return await self._steps(props, entity_keys, settle)
        finally:
            self.running.discard(props["id"])

    async def _steps(self, props: dict[str, Any], entity_keys: Sequence[str],
                     settle: bool) -> review_service_pb2.PurgeRecord:
        ids = list(props.get("memory_ids") or [])
        scope = props["scope"]
        selection = Selection(ids, scope, props.get("kind") == "scope")
        steps = [s for s in STEPS if s in (props.get("pending_steps") or [])]
        bus = self.publisher.bus
        for step in list(steps):
            try:
                if step == "graph":
                    await self.graph.purges.remove(ids, scope, selection.whole_scope,
                                                   entity_keys or props.get("entity_keys") or [])
                    if settle:
                        await self.locks.settle(ids)
                elif step == "outbox":
                    # Events still in a write's graph batch (its process died before it moved
                    # them, automem/graph/outbox.py) join the outbox first, to be scrubbed too.
                    await self.publisher.recover()
                    props["count_outbox_events"] = int(props.get("count_outbox_events") or 0) + \
                        await self.publisher.scrub(selection.strip)
                elif not bus.connected:  # fail fast: under a job bound a call would wait minutes
                    raise Unavailable("NATS is not connected")
                elif step == "events":
                    await self.publisher.publish_many([self._notice(props, mid) for mid in ids])
                elif step == "stream":
                    removed = await bus.scrub(
                        lambda subject, data: selection.message(subject, data, bus.subjects.is_activity(subject)))
                    props["count_stream_messages"] = int(props.get("count_stream_messages") or 0) + removed
            except AutomemError as exc:
                log.warning("purge step failed; the purge stays pending", extra={
                    "purge_id": props["id"], "step": step, "error": str(exc)})
                raise Unavailable(f"purge {props['id']} stopped at step {step} ({exc.message}); pending steps: "
                                  f"{', '.join(steps)}; repeat the call to resume") from exc
            except Exception as exc:  # NATS/Redis errors: the same answer
                log.warning("purge step failed; the purge stays pending", extra={
                    "purge_id": props["id"], "step": step, "error": repr(exc)})
                raise Unavailable(f"purge {props['id']} stopped at step {step} ({exc!r}); pending steps: "
                                  f"{', '.join(steps)}; repeat the call to resume") from exc
            steps.remove(step)
            props["pending_steps"] = list(steps)
            done: dict[str, Any] = {"pending_steps": list(steps),
                                    "count_outbox_events": props.get("count_outbox_events") or 0,
                                    "count_stream_messages": props.get("count_stream_messages") or 0}
            if not steps:
                done["status"] = props["status"] = "done"
                done["entity_keys"] = props["entity_keys"] = []  # keys hold entity names: content
                if props.get("kind") == "scope":  # the ids were needed to resume only
                    done["memory_ids"] = props["memory_ids"] = []
            await self.graph.purges.update(props["id"], done)
        log.info("purge done", extra={"purge_id": props["id"], "scope": scope, "memories": len(ids)})
        return _record(props)

    @staticmethod
    def _notice(props: dict[str, Any], memory_id: str) -> events_pb2.MemoryEvent:
        """The content-free MEMORY_PURGED event of ``memory_id`` in the purge ``props``."""
        event = make_event(events_pb2.EVENT_TYPE_MEMORY_PURGED, before=None, after=None, actor=props["actor"],
                           reason=f"purge {props['id']}" + (f": {props['reason']}" if props.get("reason") else ""))
        event.event_id = str(uuid.uuid5(_EVENT_NAMESPACE, f"{props['id']}/{memory_id}"))
        event.memory_id = memory_id
        event.scope = props["scope"]
        return event

    async def page(self, scope: str, skip: int, limit: int) -> list[review_service_pb2.PurgeRecord]:
        """The purge records of ``scope``, newest first."""
        return [_record(p) for p in await self.graph.purges.page(scope, skip, limit)]


def _record(props: dict[str, Any]) -> review_service_pb2.PurgeRecord:
    """The PurgeRecord message of ``:Purge`` node properties."""
    record = review_service_pb2.PurgeRecord(
        id=props.get("id") or "", kind=props.get("kind") or "", scope=props.get("scope") or "",
        memory_ids=list(props.get("memory_ids") or []), actor=props.get("actor") or "",
        reason=props.get("reason") or "", status=props.get("status") or "",
        pending_steps=list(props.get("pending_steps") or []))
    if props.get("purge_time") is not None:
        record.purge_time.CopyFrom(ts(float(props["purge_time"])))
    for name in COUNT_NAMES:
        setattr(record.counts, name, int(props.get(f"count_{name}") or 0))
    return record


class PurgeRpcs:
    """The purge RPCs of ReviewService (automem/ingest/review.py mixes them in; it provides
    ``purger``, a :class:`Purger` over the process's memory locks, and ``settings``). Admin
    only; the scope is the caller's resolved scope. A scope purge is a maintenance job: its store calls take the job bound
    (``store_job_timeout_seconds``, automem/common/timeouts.py); a purge by id keeps the
    request bound. Either stops at once when NATS is not connected (the purge stays
    pending)."""

    purger: Purger

    async def PurgeMemory(self, request, context):
        """Purge one memory (:meth:`Purger.purge_memory`): NOT_FOUND (``id``) for an unknown
        id, INVALID_ARGUMENT naming ``id``/``reason``, UNAVAILABLE when a step fails (repeat
        to resume), PERMISSION_DENIED below admin."""
        principal = require_role("admin")
        scope = resolve_scope(request.scope)
        async with self.purger.locks.hold(request.id):  # as DeleteMemory with purge (module docstring)
            record = await self.purger.purge_memory(request.id, scope, principal.name, request.reason,
                                                    request.dry_run)
        return review_service_pb2.PurgeMemoryResponse(purge=record)

    @long_running
    async def PurgeScope(self, request, context):
        """Purge every memory of the caller's scope (:meth:`Purger.purge_scope`);
        ``confirm_scope`` must repeat it (INVALID_ARGUMENT naming ``confirm_scope``)."""
        principal = require_role("admin")
        scope = resolve_scope(request.scope)
        record = await self.purger.purge_scope(scope, request.confirm_scope, principal.name, request.reason,
                                               request.dry_run)
        return review_service_pb2.PurgeScopeResponse(purge=record)

    async def ListPurges(self, request, context):
        """The scope's purge records, newest first (admin). Paged: ``page_size`` 1..200
        (0 = 50), opaque ``page_token``; empty ``next_page_token`` = last page."""
        require_role("admin")
        scope = resolve_scope(request.scope)
        size = request.page_size or 50
        if size < 1 or size > MAX_PURGE_PAGE:
            raise InvalidArgument(f"page_size: must be between 1 and {MAX_PURGE_PAGE}", field="page_size")
        offset = _offset(request.page_token)
        records = await self.purger.page(scope, offset, size + 1)
        return review_service_pb2.ListPurgesResponse(
            purges=records[:size], next_page_token=_token(offset + size) if len(records) > size else "")


def _offset(token: str) -> int:
    if not token:
        return 0
    try:
        return max(int(base64.urlsafe_b64decode(token.encode()).decode().removeprefix("p:")), 0)
    except Exception:  # noqa: BLE001 - any garbage
        raise InvalidArgument("page_token: not a token from a previous page", field="page_token") from None


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"p:{offset}".encode()).decode()
