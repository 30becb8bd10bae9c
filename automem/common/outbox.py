"""Event publishing with an outbox: nothing acknowledged is lost.

A graph write is acknowledged only after its event is either on the JetStream stream or in
the outbox, a Redis list in the same FalkorDB server (so it shares the graph's append-only
file). :meth:`EventPublisher.drain_forever` republishes outbox entries in order when NATS is
back (and creates the stream again when NATS came back without it: a lost store); the event id is the ``Nats-Msg-Id``, so a republish after an unclear failure is
de-duplicated by the server.
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


#: Redis script: pop the head of list KEYS[1] only while it is ARGV[1] (the entry just
#: published). Every process that publishes (ingest, enrich, consolidate, and their replicas)
#: drains the one outbox: a plain LPOP after another drainer's removed the next entry, which
#: nobody had published (break-it review: 9 of 100 acknowledged events lost).
_POP_IF_HEAD = """
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then redis.call('LPOP', KEYS[1]) return 1 end
return 0
"""


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
        this call removed. Each entry leaves the list only while it is still the head
        (:data:`_POP_IF_HEAD`, one atomic script), so drainers in several processes at once
        may publish an entry twice — the server drops the second by its ``Nats-Msg-Id`` —
        but never drop one unpublished. Nothing is tried while the bus is not connected."""
        sent = 0
        while self.bus.connected:
            async with self.graph.bounded():
                raw = await self.graph.redis.lindex(self.key, 0)
            if raw is None:
                return sent
            try:
                event = events_pb2.MemoryEvent.FromString(base64.b64decode(raw))
                await self.bus.publish_event(event)
            except (MaxPayloadError, DecodeError, binascii.Error, KeyError) as exc:
                # Can never be published (too large for the bus, undecodable, no subject): set
                # it aside so it does not stall every later event.
                async with self.graph.bounded():
                    await self.graph.redis.rpush(self.dead_key, raw)
                log.error("unpublishable event moved to the dead outbox",
                          extra={"key": self.dead_key, "error": repr(exc)})
                # Its copy is in the dead list; popped only while still the head, as below (a
                # second drainer may have set it aside too: the dead list then holds it twice).
            except NoStreamResponseError:
                # NATS answers but holds no stream (it lost its store): make it again; the
                # next round publishes.
                await self.bus.ensure_stream()
                return sent
            except Exception:  # noqa: BLE001 - retry later
                return sent
            async with self.graph.bounded():
                sent += int(await self.graph.redis.eval(_POP_IF_HEAD, 1, self.key, raw))
        return sent

    async def drain_forever(self, interval: float = 1.0) -> None:
        """Background task: drain the outbox every ``interval`` seconds or when woken."""
        while True:
            try:
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
