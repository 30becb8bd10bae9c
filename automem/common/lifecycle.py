"""The lifecycle rules of a memory, read by every service that changes one.

* :data:`TRANSITIONS` / :func:`check_transition` — which trust-state moves are allowed
  (ingest's deletes and supersedes, the review queue's decisions, consolidation).
* :data:`GONE_STATES` — the states no relation may be written to or from.
* :data:`SUPERSEDING_RELATIONS` — the relation types that make their source SUPERSEDED
  (the state pass in automem/common/state.py follows exactly these edges).
* :func:`close_for_supersede` — the superseded copy of a memory (state, window, version);
  :func:`before_supersede` — the copy as it was before.
* :func:`review_required` — whether a principal's writes land as PENDING_REVIEW.
* :func:`make_event` — the one constructor of a :class:`MemoryEvent` (fresh id, actor,
  time), used by every publisher of events (ingest, review, enrich, consolidate).
* :func:`make_activity` — the one constructor of an ``ActivityEvent`` (a recall, a
  consolidation run: events of the event stream that change no memory).

Nothing here touches a store; the callers write what these functions build.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from automem.common.auth import Principal, current_principal
from automem.common.errors import AutomemError, FailedPrecondition
from automem.common.model import OPEN_END, Memory, Relation, first_epoch, now, state_name, ts
from automem.v1 import event_stream_pb2, events_pb2, memory_pb2

#: Allowed trust-state transitions (from -> to).
TRANSITIONS: dict[int, set[int]] = {
    memory_pb2.MEMORY_STATE_ACTIVE: {memory_pb2.MEMORY_STATE_SUPERSEDED, memory_pb2.MEMORY_STATE_ARCHIVED,
                                     memory_pb2.MEMORY_STATE_DELETED},
    memory_pb2.MEMORY_STATE_PENDING_REVIEW: {memory_pb2.MEMORY_STATE_ACTIVE, memory_pb2.MEMORY_STATE_REJECTED,
                                             memory_pb2.MEMORY_STATE_DELETED},
    memory_pb2.MEMORY_STATE_SUPERSEDED: {memory_pb2.MEMORY_STATE_ACTIVE, memory_pb2.MEMORY_STATE_ARCHIVED,
                                         memory_pb2.MEMORY_STATE_DELETED},
    memory_pb2.MEMORY_STATE_ARCHIVED: {memory_pb2.MEMORY_STATE_ACTIVE, memory_pb2.MEMORY_STATE_DELETED},
    memory_pb2.MEMORY_STATE_REJECTED: {memory_pb2.MEMORY_STATE_DELETED},
    memory_pb2.MEMORY_STATE_DELETED: set(),
}

#: States of a memory that is gone for its callers: every read withholds it
#: (automem/common/state.py) and no relation may be written to or from it, so an association
#: with it is NOT_FOUND like one with a memory of another scope (automem/ingest/servicer.py
#: CreateRelation; automem/graph/relations.py checks it again inside the write).
GONE_STATES = (memory_pb2.MEMORY_STATE_DELETED, memory_pb2.MEMORY_STATE_REJECTED)
#: :data:`GONE_STATES` by the names the graph stores.
GONE_STATE_NAMES = tuple(state_name(s) for s in GONE_STATES)

#: Relation types whose source is SUPERSEDED by their target (AutoMem's supersede relations).
SUPERSEDING_RELATIONS = ("INVALIDATED_BY", "EVOLVED_INTO")


def check_transition(current: int, target: int) -> None:
    """Raise FailedPrecondition (field ``state``) unless ``current -> target`` is in
    :data:`TRANSITIONS`; both are ``MemoryState`` values."""
    if target not in TRANSITIONS.get(current, set()):
        raise FailedPrecondition(
            f"state: cannot move from {state_name(current)} to {state_name(target)}", field="state"
        )


def review_required(principal: Principal) -> bool:
    """True when the principal's key makes every write land as PENDING_REVIEW (the key's
    ``require_review`` extra is 1/true/yes; automem/common/keys.py)."""
    return str(principal.extra.get("require_review", "")).lower() in ("1", "true", "yes")


def close_for_supersede(old: Memory, new_id: str, new_start: float | None, stamp: Any, reason: str) -> Memory:
    """The superseded copy of ``old``: state SUPERSEDED, ``superseded_by`` = ``new_id``,
    version + 1, ``superseded_time`` = ``stamp`` (a datetime, system time),
    ``prior_valid_to`` = the window end before (unset when open), and the valid window closed
    at ``new_start`` (epoch seconds) when that lies inside it (at least 1 ms after
    ``valid_from``). ``old`` is not changed."""
    closed = Memory()
    closed.CopyFrom(old)
    closed.state = memory_pb2.MEMORY_STATE_SUPERSEDED
    closed.superseded_by = new_id
    closed.state_reason = reason
    closed.version = old.version + 1
    closed.update_time.CopyFrom(ts(stamp))
    closed.superseded_time.CopyFrom(ts(stamp))
    closed.ClearField("prior_valid_to")
    if old.HasField("valid_to"):
        closed.prior_valid_to.CopyFrom(old.valid_to)
    end = superseded_end(old, first_epoch(old, "valid_to", default=OPEN_END), new_start)
    if end < OPEN_END:
        closed.valid_to.CopyFrom(ts(end))
    return closed


def check_replacement_valid(replacement: Memory, old: Memory, field: str,
                            error: type[AutomemError] = FailedPrecondition) -> None:
    """``error`` naming ``field`` when ``replacement``'s validity window ends at or before
    ``old``'s begins: the supersede closes ``old`` where ``replacement`` starts, before ``old``
    was ever valid, so ``old`` is never valid and the replacement has ended too — a current
    fact vanished with nothing in its place (break-it review: enrichment proposed an expired
    "Python 2.7" for a current "Python 3.13"). A replacement that ended after ``old`` began is
    history as it was (a fact replaced, then expired: an export's chain, a back-filled one)."""
    end = first_epoch(replacement, "valid_to", default=OPEN_END)
    begins = first_epoch(old, "valid_from", "create_time", default=0.0)
    if end <= begins:
        ended = datetime.fromtimestamp(end, UTC).isoformat()
        started = datetime.fromtimestamp(begins, UTC).isoformat()
        raise error(f"{field}: memory {replacement.id or '(the replacement)'} stopped being valid ({ended}) before "
                    f"memory {old.id} became valid ({started}); a fact cannot be replaced by one that ended before "
                    "it began (neither would ever be current)", field=field)


def superseded_end(old: Memory, end_before: float, new_start: float | None) -> float:
    """The window end (epoch seconds; :data:`OPEN_END` = open) of ``old`` superseded by a
    memory valid from ``new_start``: that start when it lies before ``end_before`` (the end
    ``old`` had before), at least 1 ms after ``old``'s start; else ``end_before``. The one
    rule of :func:`close_for_supersede` and of a replacement whose ``t_valid`` moves
    (automem/ingest/schedules.py ``following_windows``)."""
    if new_start is not None and new_start < end_before:
        return max(new_start, first_epoch(old, "valid_from", "create_time", default=0.0) + 1e-3)
    return end_before


def before_supersede(memory: Memory) -> Memory:
    """A copy of a SUPERSEDED ``memory`` as it was before its supersede: ACTIVE, no
    successor, reason or supersede time, its window ending at ``prior_valid_to`` (open when
    unset). The inverse of :func:`close_for_supersede` but for the version; ``memory`` is not
    changed."""
    out = Memory()
    out.CopyFrom(memory)
    out.state = memory_pb2.MEMORY_STATE_ACTIVE
    out.superseded_by = ""
    out.state_reason = ""
    out.ClearField("superseded_time")
    out.ClearField("valid_to")
    if memory.HasField("prior_valid_to"):
        out.valid_to.CopyFrom(memory.prior_valid_to)
    out.ClearField("prior_valid_to")
    return out


def make_event(
    event_type: int, *, before: Memory | None, after: Memory | None, reason: str = "",
    relation: Relation | None = None, content_changed: bool = False, actor: str | None = None,
    embedding: Any = (),
) -> events_pb2.MemoryEvent:
    """A MemoryEvent of ``event_type`` (an ``EventType`` value) with a fresh UUID4 id, the
    time now, and ``actor`` or else the current principal's name ("system" without one).
    The subject (memory id, scope, version) is ``after``, else ``before``, else the
    relation's source; ``embedding`` (floats) travels with MEMORY_CREATED."""
    subject = after if after is not None else before
    event = events_pb2.MemoryEvent(
        event_id=str(uuid.uuid4()), type=event_type, actor=actor or _actor(),
        memory_id=subject.id if subject is not None else (relation.source_id if relation else ""),
        scope=subject.scope if subject is not None else (relation.scope if relation else ""),
        version=subject.version if subject is not None else 0, reason=reason, content_changed=content_changed,
    )
    event.event_time.CopyFrom(ts(now()))
    if before is not None:
        event.before.CopyFrom(before)
    if after is not None:
        event.after.CopyFrom(after)
    if relation is not None:
        event.relation.CopyFrom(relation)
    event.embedding.extend(embedding)
    return event


#: Actor of the events the pending sweep publishes again (automem/enrich/pending.py).
PENDING_SWEEP_ACTOR = "system:pending-sweep"


def is_republished_creation(event: events_pb2.MemoryEvent) -> bool:
    """True for a MEMORY_CREATED event the pending sweep published for a memory it found
    without one (:data:`PENDING_SWEEP_ACTOR`): the memory was created earlier, at its
    ``after.create_time``, not by the sweep at the event's time. A memory's history counts it
    as its creation only when the retention cannot have removed the original
    (automem/ingest/review.py ``ListMemoryEvents``)."""
    return event.type == events_pb2.EVENT_TYPE_MEMORY_CREATED and event.actor == PENDING_SWEEP_ACTOR


def is_requeue(event: events_pb2.MemoryEvent) -> bool:
    """True for a MEMORY_UPDATED event that changed nothing (``before`` equal to ``after``):
    the re-queue signals that ask enrichment to process a memory again (reprocess,
    automem/enrich/servicer.py; re-embed; the sync repair, automem/consolidate/servicer.py).
    They stay on the stream (the enrichment consumer's input) but are no mutation, so a
    memory's history leaves them out (automem/ingest/review.py ``ListMemoryEvents``)."""
    return (event.type == events_pb2.EVENT_TYPE_MEMORY_UPDATED and event.HasField("before")
            and event.before == event.after)


def make_activity(kind: str, scope: str, data: dict[str, Any],
                  actor: str | None = None) -> event_stream_pb2.ActivityEvent:
    """An ActivityEvent of ``kind`` (AutoMem's event name, e.g. ``memory.recall``) in
    ``scope`` ("" or "*" = every scope) with a fresh UUID4 id, the time now, ``actor`` or
    else the current principal's name, and ``data`` (JSON values) as its payload."""
    event = event_stream_pb2.ActivityEvent(event_id=str(uuid.uuid4()), kind=kind, scope=scope,
                                           actor=actor or _actor())
    event.data.update(data)
    event.event_time.CopyFrom(ts(now()))
    return event


def _actor() -> str:
    try:
        return current_principal().name
    except Exception:  # noqa: BLE001 - system writes have no principal
        return "system"
