"""Supersedes whose timing changes after the fact: a replacement removed before its window
begins, and a replacement whose ``t_valid`` moves.

A supersede whose replacement is valid from a time still to come (``t_valid`` in the future)
marks the old memory SUPERSEDED with its window closed at that time; until then the old
memory is the fact in force (automem/common/state.py ``as_current``). When the replacement
is deleted or purged before its window begins, the supersede never took effect: the old
memory gets back its state and window (:func:`cancel_supersedes`). A replacement removed
after its window began leaves the old memory superseded, so nothing stale reads as current
(tests/integration/test_truth_model.py
``test_a_linked_replacement_removed_later_leaves_no_stale_fact_current``).

Before, the old memory stayed SUPERSEDED by a deleted memory: nothing was current once the
date passed, and it could not be edited or superseded again (break-it review).

A replacement whose ``t_valid`` is edited takes the replaced memory's window end with it
(:func:`following_windows`, :func:`move_windows`), as a supersede from the new start would
have closed it.
"""

from __future__ import annotations

import logging

from automem.common.lifecycle import before_supersede, make_event, superseded_end
from automem.common.model import OPEN_END, Memory, first_epoch, iso, now, ts
from automem.common.outbox import EventPublisher
from automem.graph import GraphStore
from automem.ingest.logic import mark_payload_behind
from automem.ingest.memory_locks import MemoryLocks
from automem.v1 import events_pb2, memory_pb2

log = logging.getLogger(__name__)


async def not_yet_replaced(graph: GraphStore, replacement: Memory) -> list[Memory]:
    """The memories ``replacement`` supersedes while its window has not begun (its
    ``t_valid`` is later than now): SUPERSEDED, ``superseded_by`` naming it. Empty for a
    replacement already in force. Read before the replacement is removed (a purge removes
    its edges)."""
    if first_epoch(replacement, "valid_from", "create_time", default=0.0) <= now().timestamp():
        return []
    ids = await graph.relations.replaced_by(replacement.id, replacement.scope)
    return [m for m in (await graph.memories.hydrate(ids, replacement.scope)).values()
            if m.state == memory_pb2.MEMORY_STATE_SUPERSEDED and m.superseded_by == replacement.id]


async def cancel_supersedes(graph: GraphStore, locks: MemoryLocks, publisher: EventPublisher,
                            removed: Memory, replaced: list[Memory]) -> None:
    """Give each of ``replaced`` (:func:`not_yet_replaced` of ``removed``, read before its
    removal) back the state and window it had before the supersede: ACTIVE, no successor,
    its window end ``prior_valid_to`` (open when unset), as :func:`_write`s."""
    pairs = []
    for old in replaced:
        restored = before_supersede(old)
        restored.version = old.version + 1
        restored.update_time.CopyFrom(ts(now()))
        pairs.append((old, restored))
    await _write(graph, locks, publisher, pairs, f"its replacement {removed.id} was removed before its window began")


async def following_windows(graph: GraphStore, current: Memory, updated: Memory) -> list[tuple[Memory, Memory]]:
    """The memories ``current`` supersedes, each with the window end a supersede from
    ``updated``'s ``t_valid`` would have given it (automem/common/lifecycle.py
    ``superseded_end`` from the end it had before, ``prior_valid_to``) where that differs:
    (as stored, as it must become). An end that met ``current``'s old start was set for it
    (AutoMem's client PATCHes ``t_invalid``, then links INVALIDATED_BY) and follows it.
    Moving a replacement's ``t_valid`` later left the replaced fact closed at the old start
    and no fact current in between (break-it review)."""
    start = first_epoch(updated, "valid_from", "create_time", default=0.0)
    old_start = first_epoch(current, "valid_from", "create_time", default=0.0)
    out = []
    for replaced in (await graph.memories.hydrate(
            await graph.relations.replaced_by(current.id, current.scope), current.scope)).values():
        if replaced.state != memory_pb2.MEMORY_STATE_SUPERSEDED or replaced.superseded_by != current.id:
            continue
        end_before = first_epoch(replaced, "prior_valid_to", default=OPEN_END)
        end = superseded_end(replaced, OPEN_END if abs(end_before - old_start) < 1e-6 else end_before, start)
        if end == first_epoch(replaced, "valid_to", default=OPEN_END):
            continue
        moved = Memory()
        moved.CopyFrom(replaced)
        moved.version = replaced.version + 1
        moved.update_time.CopyFrom(ts(now()))
        moved.ClearField("valid_to")
        if end < OPEN_END:
            moved.valid_to.CopyFrom(ts(end))
        out.append((replaced, moved))
    return out


async def move_windows(graph: GraphStore, locks: MemoryLocks, publisher: EventPublisher,
                       followers: list[tuple[Memory, Memory]], replacement: Memory) -> None:
    """Write the pairs of :func:`following_windows` as :func:`_write`s."""
    await _write(graph, locks, publisher, followers,
                 f"its replacement {replacement.id} starts at {iso(replacement, 'valid_from')}")


async def _write(graph: GraphStore, locks: MemoryLocks, publisher: EventPublisher,
                 pairs: list[tuple[Memory, Memory]], reason: str) -> None:
    """Each (as stored, new version) pair under the memory's lock, when it is still at the
    stored version, with a MEMORY_UPDATED event giving ``reason``; one changed meanwhile is
    left as it is, and logged."""
    for before, after in pairs:
        async with locks.hold(before.id):
            if await graph.memories.replace(after, before.version, payload_behind=mark_payload_behind(before, after)):
                await publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=before, after=after,
                                                   reason=reason))
            else:
                log.warning("a memory changed meanwhile was left as it is", extra={"memory_id": before.id,
                                                                                    "reason": reason})
