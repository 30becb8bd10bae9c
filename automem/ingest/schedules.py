"""Supersedes that have not taken effect yet, and what removing their replacement does.

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
"""

from __future__ import annotations

import logging

from automem.common.lifecycle import before_supersede, make_event
from automem.common.model import Memory, first_epoch, now, ts
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
    its window end ``prior_valid_to`` (open when unset), version + 1, with a MEMORY_UPDATED
    event. A memory changed meanwhile (another version) is left as it is, and logged."""
    for old in replaced:
        restored = before_supersede(old)
        restored.version = old.version + 1
        restored.update_time.CopyFrom(ts(now()))
        async with locks.hold(old.id):
            if await graph.memories.replace(restored, old.version,
                                            payload_behind=mark_payload_behind(old, restored)):
                await publisher.publish(make_event(
                    events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=old, after=restored,
                    reason=f"its replacement {removed.id} was removed before its window began"))
            else:
                log.warning("a supersede whose replacement was removed before its window began was not undone",
                            extra={"memory_id": old.id, "replacement": removed.id})
