"""Event publishing with an outbox: nothing acknowledged is lost.

A graph write is acknowledged only after its event is either on the JetStream stream or in
the outbox, a Redis list in the same FalkorDB server (so it shares the graph's append-only
file). :meth:`EventPublisher.drain_forever` republishes outbox entries in order when NATS is
back (and creates the stream again when NATS came back without it: a lost store); the event id is the ``Nats-Msg-Id``, so a republish after an unclear failure is
de-duplicated by the server.

Writes that must not lose their events even to a crash between the graph write and the
publish (consolidation's: automem/consolidate/tasks.py) record them in the graph write itself
(automem/graph/outbox.py ``:OutboxBatch``) and hand the batch to :meth:`EventPublisher.commit`;
a batch left by a process that died is moved to the outbox by the next drain of any process.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError
from nats.errors import MaxPayloadError
from nats.js.errors import NoStreamResponseError
from opentelemetry.trace import Span

from automem.common.bus import Bus
from automem.common.timeouts import job_bound
from automem.v1 import events_pb2

if TYPE_CHECKING:
    from automem.graph import GraphStore

log = logging.getLogger(__name__)

#: Redis script: replace every element of list KEYS[1] equal to ARGV[1] by ARGV[2], in place.
_REPLACE = """
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for i, item in ipairs(items) do
  if item == ARGV[1] then redis.call('LSET', KEYS[1], i - 1, ARGV[2]) end
end
return 1
"""


#: Redis script: for each ARGV in order, pop the head of list KEYS[1] when it is that entry
#: (the entries just published, in order); returns how many were popped. Every process that
#: publishes (ingest, enrich, consolidate, and their replicas) drains the one outbox: a plain
#: LPOP after another drainer's removed the next entry, which nobody had published (break-it
#: review: 9 of 100 acknowledged events lost). This never pops an entry this drainer did not
#: publish.
_POP_PUBLISHED = """
local n = 0
for i = 1, #ARGV do
  if redis.call('LINDEX', KEYS[1], 0) == ARGV[i] then redis.call('LPOP', KEYS[1]) n = n + 1 end
end
return n
"""

#: Outbox entries published per pipelined round of :meth:`EventPublisher.drain_once`.
DRAIN_BATCH = 256


def entry(event: events_pb2.MemoryEvent) -> str:
    """The outbox entry of ``event``: its serialized bytes in base64 (what the outbox list and
    an ``:OutboxBatch`` hold)."""
    return base64.b64encode(event.SerializeToString()).decode()


class EventPublisher:
    """Publishes MemoryEvents, falling back to the outbox.

    Args:
        bus: the connected bus.
        graph: the graph store whose Redis holds the outbox list ``automem:outbox:<graph>``.
    """

    def __init__(self, bus: Bus, graph: GraphStore) -> None:
        self.bus = bus
        self.graph = graph
        self.key = f"automem:outbox:{graph.name}"
        #: Events the bus refused for good (too large); kept for an operator, never retried.
        self.dead_key = f"automem:outbox-dead:{graph.name}"
        self._wake = asyncio.Event()
        #: One drain at a time in this process (the drain task and :meth:`commit`).
        self._draining = asyncio.Lock()

    async def commit(self, batch: object) -> int:
        """Publish the events a graph write recorded with itself (``batch``: an
        automem/graph/outbox.py ``Batch``): move them to the outbox list (atomically with the
        batch node's removal) and drain it now — unless the outbox held a backlog already
        (NATS refused or did not answer earlier events): then the drain task publishes them
        in order when NATS is back, and the caller does not wait the store bound once more
        per batch, as :meth:`publish`. Returns how many entries were moved (0 when the batch
        is empty or another process's drain moved it)."""
        entries = getattr(batch, "entries", [])
        if not entries:
            return 0
        ahead = await self.backlog()
        moved = await self.graph.outbox.move(batch, self.key)
        if ahead == 0 and self.bus.connected:
            # The request bound, also inside a job (a consolidation run's is minutes): a
            # stalled NATS holds the writer that long once, its events then wait in the outbox.
            with job_bound(self.bus.timeout):
                await self.drain_once()
        else:
            self._wake.set()
        return len(entries) if moved else 0

    async def recover(self) -> int:
        """Move the ``:OutboxBatch`` nodes left by writers that died between their graph write
        and :meth:`commit` to the outbox list, oldest first. Returns how many entries."""
        moved = 0
        for batch in await self.graph.outbox.pending():
            if await self.graph.outbox.move(batch, self.key):
                moved += len(batch.entries)
        if moved:
            log.warning("events of an interrupted write moved to the outbox", extra={"events": moved})
        return moved

    async def publish(self, event: events_pb2.MemoryEvent) -> bool:
        """Publish now; on failure append to the outbox. Returns True when published.

        Events queue behind any outbox backlog so per-memory order is kept. While the bus is
        not connected (NATS stopped: the client is reconnecting) the event goes to the outbox
        at once: a publish then waited the whole store bound (5 s) for an acknowledgement that
        could not come.
        """
        if self.bus.connected and await self.backlog() == 0:
            try:
                await self.bus.publish_event(event)
                return True
            except Exception as exc:  # noqa: BLE001 - any failure goes to the outbox
                log.warning("event publish failed, kept in outbox", extra={"event_id": event.event_id,
                                                                              "error": str(exc)})
        async with self.graph.bounded():
            await self.graph.redis.rpush(self.key, base64.b64encode(event.SerializeToString()).decode())
        self._wake.set()
        return False

    async def publish_many(self, events: Sequence[events_pb2.MemoryEvent],
                           parents: Sequence[Span | None] | None = None) -> int:
        """:meth:`publish` for many events at once: pipelined on the bus
        (:meth:`Bus.publish_events`, one round trip; ``parents``: the span each event's
        PRODUCER span belongs under), the ones that fail appended to the outbox in their order
        (one RPUSH). Returns how many were published now. Like :meth:`publish`, events queue
        behind an outbox backlog, so per-memory order is kept, and go to the outbox at once
        while the bus is not connected."""
        if not events:
            return 0
        failed = list(events)
        if self.bus.connected and await self.backlog() == 0:
            try:
                results = await self.bus.publish_events(events, parents=parents)
                failed = [event for event, error in zip(events, results, strict=True) if error is not None]
            except Exception as exc:  # noqa: BLE001 - any failure goes to the outbox
                log.warning("batch publish failed, kept in outbox", extra={"events": len(events), "error": str(exc)})
            if failed:
                log.warning("events not acknowledged, kept in outbox", extra={"events": len(failed)})
        if failed:
            async with self.graph.bounded():
                await self.graph.redis.rpush(self.key,
                                             *[base64.b64encode(e.SerializeToString()).decode() for e in failed])
            self._wake.set()
        return len(events) - len(failed)

    async def backlog(self) -> int:
        """Number of events waiting in the outbox."""
        async with self.graph.bounded():
            return int(await self.graph.redis.llen(self.key))

    async def scrub(self, rewrite: Callable[[events_pb2.MemoryEvent], events_pb2.MemoryEvent | None],
                    dry_run: bool = False) -> int:
        """Rewrite in place every outbox entry (pending and dead) for which ``rewrite(event)``
        returns a new event (None = keep as it is); returns how many (with ``dry_run``, how
        many would be; nothing written). The purge's outbox step (automem/ingest/purge.py):
        an event of a purged memory stays queued (order and the drain's head are kept, so
        :meth:`drain_once` never pops the wrong entry) but without its content. Each
        replacement is one atomic Redis script over the list (element equal to the old
        entry → the new one), so a concurrent drain or append loses nothing."""
        changed = 0
        for key in (self.key, self.dead_key):
            async with self.graph.bounded():
                entries = await self.graph.redis.lrange(key, 0, -1)
            for raw in entries:
                try:
                    event = events_pb2.MemoryEvent.FromString(base64.b64decode(raw))
                except (DecodeError, binascii.Error):
                    continue
                new = rewrite(event)
                if new is None:
                    continue
                changed += 1
                if not dry_run:
                    async with self.graph.bounded():
                        await self.graph.redis.eval(_REPLACE, 1, key, raw,
                                                    base64.b64encode(new.SerializeToString()).decode())
        return changed

    async def drain_once(self) -> int:
        """Publish outbox entries in order until empty or a publish fails; returns how many
        this call removed. Up to :data:`DRAIN_BATCH` head entries are published pipelined
        (one round trip; an entry that can never be published, :meth:`_set_aside`) and the
        acknowledged prefix leaves the list by :data:`_POP_PUBLISHED` (an entry goes only
        while it is the head), so drainers in
        several processes at once may publish an entry twice — the server drops the second
        by its ``Nats-Msg-Id`` — but never drop one unpublished. Nothing is tried while the
        bus is not connected."""
        async with self._draining:
            return await self._drain()

    async def _drain(self) -> int:
        sent = 0
        while self.bus.connected:
            async with self.graph.bounded():
                raws = await self.graph.redis.lrange(self.key, 0, DRAIN_BATCH - 1)
            if not raws:
                return sent
            events, good = [], []
            bad: BaseException | None = None
            for raw in raws:
                try:
                    event = events_pb2.MemoryEvent.FromString(base64.b64decode(raw))
                    self.bus.subjects.memory(event.type)  # KeyError: no subject
                except (DecodeError, binascii.Error, KeyError) as exc:
                    bad = exc
                    break
                events.append(event)
                good.append(raw)
            published: list[bytes] = []
            failed = False
            if events:
                try:
                    results = await self.bus.publish_events(events)
                except NoStreamResponseError:
                    await self.bus.ensure_stream()
                    return sent
                except Exception:  # noqa: BLE001 - retry later
                    return sent
                for raw, event, error in zip(good, events, results, strict=True):
                    if error is None:
                        published.append(raw)
                        continue
                    if isinstance(error, NoStreamResponseError):
                        await self.bus.ensure_stream()
                    elif isinstance(error, (MaxPayloadError, KeyError)):
                        published.append(await self._set_aside(raw, error))
                        continue
                    failed = True
                    break
            else:  # the head cannot be decoded or has no subject
                published.append(await self._set_aside(raws[0], bad or DecodeError("undecodable outbox entry")))
            if not published:
                return sent
            async with self.graph.bounded():
                sent += int(await self.graph.redis.eval(_POP_PUBLISHED, 1, self.key, *published))
            if failed:  # the rest waits for the next round
                return sent
        return sent

    async def _set_aside(self, raw: bytes, exc: BaseException) -> bytes:
        """Copy an entry that can never be published (too large for the bus, undecodable, no
        subject) to the dead outbox, so it does not stall every later event; returns it, for
        the caller to pop while it is still the head (a second drainer may have set it aside
        too: the dead list then holds it twice)."""
        async with self.graph.bounded():
            await self.graph.redis.rpush(self.dead_key, raw)
        log.error("unpublishable event moved to the dead outbox", extra={"key": self.dead_key, "error": repr(exc)})
        return raw

    async def drain_forever(self, interval: float = 1.0) -> None:
        """Background task: drain the outbox every ``interval`` seconds or when woken, after
        moving the batches of interrupted writes to it (:meth:`recover`; at start too)."""
        while True:
            try:
                await self.recover()
                sent = await self.drain_once()
                if sent:
                    log.info("outbox drained", extra={"events": sent})
            except Exception as exc:  # noqa: BLE001 - keep the loop alive
                log.warning("outbox drain failed", extra={"error": str(exc)})
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=interval)
            except TimeoutError:
                pass
            self._wake.clear()
