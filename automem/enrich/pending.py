"""The pending sweep (issue 12, item 12): a memory written to the graph whose event never
reached the stream (the process died between the graph write and the publish, or the write
landed after its caller had given up) stays ``embedding_status: PENDING`` with no event to
enrich it. The sweep finds such memories and publishes their event again.

A pending memory is *orphaned*, not merely queued, when its last write is older than
``settings.pending_sweep_min_age_seconds`` (longer than a write takes to publish its event)
and older than every event still waiting for enrichment: the event of a write is published
right after it, so an event that exists was published before the first unprocessed message
on the stream and has been processed. So the cutoff is ``min(now, time of the first
unacknowledged message of the enrichment consumer) - min_age``, and nothing is swept while
the outbox holds events (they are published in order by automem/common/outbox.py).

The same holds for a memory whose vector payload waits to be rewritten after an edit of its
tags, event time or state (``embedding_status: PAYLOAD_PENDING``, automem/ingest/logic.py
``mark_payload_behind``).

The republished event is MEMORY_CREATED (MEMORY_UPDATED for a memory past version 1) with
the memory as it stands, ``content_changed`` (not for PAYLOAD_PENDING), actor ``system:pending-sweep``; its id is
derived from the memory id and version, so two sweepers within the stream's de-duplication
window publish it once. An event the retention removed before enrichment took it is sent
again at the next round (with a new id), not after :data:`RESEND_AFTER_SECONDS`. A memory last written before the oldest event the stream still holds
(when the retention removed events) may have had its event removed by the retention rather
than never published: it gets a re-queue instead (MEMORY_UPDATED with ``before`` =
``after``, automem/common/lifecycle.py ``is_requeue``), which its history leaves out, so the
sweep is not shown as its creator (its history says ``truncated``). The enrichment consumer reads the current record anyway
(automem/enrich/consumer.py). Runs at start and every ``pending_sweep_interval_seconds``.

With vectors disabled (``QDRANT_URL=disabled``) enrichment still runs entities,
classification, summary and links but leaves ``embedding_status`` PENDING for good, so the
sweep looks for ``enrichment_status`` PENDING instead (automem/graph/memories.py
``pending_before``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from nats.js.errors import NotFoundError

from automem.common.bus import Bus, _stream_time
from automem.common.lifecycle import PENDING_SWEEP_ACTOR, make_event
from automem.common.model import first_epoch
from automem.common.outbox import EventPublisher
from automem.common.settings import Settings
from automem.graph import GraphStore
from automem.v1 import events_pb2, memory_pb2

log = logging.getLogger(__name__)

#: Memories republished per sweep round (the next round takes the rest).
SWEEP_BATCH = 500
#: Seconds before the same memory version is republished again by this process (its event
#: may still be waiting behind a long backlog; the stream de-duplicates only 120 s).
RESEND_AFTER_SECONDS = 600.0
#: Namespace of the republished events' ids (uuid5 of ``<memory id>:<version>``).
_EVENT_NAMESPACE = uuid.UUID("5b0c1d7e-7f0e-4c55-9a57-2f3d1f6c0a12")


class PendingSweep:
    """Republishes the events of orphaned pending memories.

    Args:
        settings: ``pending_sweep_interval_seconds``, ``pending_sweep_min_age_seconds``,
            ``stream_name``, ``vectors_enabled``.
        bus, graph, publisher: the connected stores and the outbox publisher.
        subscription: the enrichment consumer's pull subscription (its consumer info tells
            which events are still to be processed).
    """

    def __init__(self, settings: Settings, bus: Bus, graph: GraphStore, publisher: EventPublisher,
                 subscription: Any) -> None:
        self.settings = settings
        self.bus = bus
        self.graph = graph
        self.publisher = publisher
        self.subscription = subscription
        #: Events republished since start (reported in the logs).
        self.republished = 0
        self._stop = asyncio.Event()
        #: (memory id, version) -> when this process last republished it (monotonic, epoch seconds).
        self._sent: dict[tuple[str, int], tuple[float, float]] = {}
        #: (memory id, version) -> how often its event was sent again after the retention
        #: removed the one sent before (a part of the event id).
        self._resends: dict[tuple[str, int], int] = {}

    async def cutoff(self) -> float | None:
        """Epoch seconds: pending memories last written before it are orphaned; None when
        no sweep may run now (outbox backlog, or the first waiting event is unreadable)."""
        if await self.publisher.backlog() > 0:
            return None
        cutoff = time.time()
        async with self.bus.bounded():
            info = await self.subscription.consumer_info()
            if info.num_pending or info.num_ack_pending:
                try:
                    first = await self.bus.js.get_msg(self.settings.stream_name, info.ack_floor.stream_seq + 1)
                    first_time = _stream_time(first.time)
                except NotFoundError:
                    # The retention removed it before enrichment took it: the first event still
                    # waiting is the first the stream holds. (No sweep ran while the consumer's
                    # next event was gone, so memories whose events were trimmed stayed pending.)
                    first_time = (await self.bus.retention()).first_time
                if first_time is None:
                    return None
                cutoff = min(cutoff, first_time)
        return cutoff - self.settings.pending_sweep_min_age_seconds

    async def sweep_once(self) -> int:
        """One round: republish the events of up to :data:`SWEEP_BATCH` orphaned memories.
        Returns how many."""
        cutoff = await self.cutoff()
        if cutoff is None:
            return 0
        now = time.monotonic()
        retention = await self.bus.retention()
        # An event this process published before the oldest one the stream holds was removed by
        # the retention before enrichment took it: its memory may be sent again at once (it
        # waited RESEND_AFTER_SECONDS, pending all the while).
        held_since = retention.first_time if retention.trimmed and retention.first_time is not None else None
        for key, (_, wall) in self._sent.items():
            if held_since is not None and wall < held_since:
                # A new event id: the stream would drop one with the removed event's id as a
                # duplicate for its de-duplication window.
                self._resends[key] = self._resends.get(key, 0) + 1
        self._sent = {k: (t, wall) for k, (t, wall) in self._sent.items()
                      if now - t < RESEND_AFTER_SECONDS and (held_since is None or wall >= held_since)}
        memories = [m for m in await self.graph.memories.pending_before(cutoff, SWEEP_BATCH + len(self._sent),
                                                                       vectors=self.settings.vectors_enabled)
                    if (m.id, m.version) not in self._sent][:SWEEP_BATCH]
        if not memories:
            return 0
        # Written before the oldest event the stream holds: the write's event may be one the
        # retention removed, not one never published (its history is then truncated).
        trimmed_before = held_since
        events = []
        for memory in memories:
            # A payload to rewrite only (PAYLOAD_PENDING) needs no NER or links again.
            changed = memory.embedding_status != memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING
            written = first_epoch(memory, "update_time", "create_time", default=0.0)
            if trimmed_before is not None and written < trimmed_before:
                event = make_event(events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=memory, after=memory,
                                   actor=PENDING_SWEEP_ACTOR, content_changed=changed)
            else:
                kind = (events_pb2.EVENT_TYPE_MEMORY_CREATED if memory.version <= 1
                        else events_pb2.EVENT_TYPE_MEMORY_UPDATED)
                event = make_event(kind, before=None, after=memory, actor=PENDING_SWEEP_ACTOR, content_changed=changed)
            resends = self._resends.get((memory.id, memory.version), 0)
            event.event_id = str(uuid.uuid5(_EVENT_NAMESPACE, f"{memory.id}:{memory.version}"
                                            + (f":{resends}" if resends else "")))
            events.append(event)
        await self.publisher.publish_many(events)
        sent_at = time.time()
        self._sent.update({(m.id, m.version): (now, sent_at) for m in memories})
        self._resends = {k: n for k, n in self._resends.items() if k in self._sent}
        self.republished += len(events)
        log.warning("pending memories had no event; published again for enrichment",
                    extra={"memories": len(events), "oldest_id": memories[0].id})
        return len(events)

    async def run(self) -> None:
        """At start, then every ``pending_sweep_interval_seconds``, until :meth:`stop`;
        a failed round (a store down) is logged and retried at the next."""
        while not self._stop.is_set():
            try:
                await self.sweep_once()
            except Exception as exc:  # noqa: BLE001 - keep sweeping
                log.warning("pending sweep failed", extra={"error": repr(exc)})
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=self.settings.pending_sweep_interval_seconds)
            except TimeoutError:
                pass

    def stop(self) -> None:
        """End :meth:`run` after its current round."""
        self._stop.set()
