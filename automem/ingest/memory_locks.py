"""Per-memory write locks of the ingest path: the order of one memory's events.

A change to an existing memory is a graph write (which moves its ``version``) followed by
the publish of its MemoryEvent(s). Two changes of one memory running at once could
publish in the other order than they wrote — a memory's history (read from the stream by
position, automem/ingest/review.py ``ListMemoryEvents``) would then list, say, DELETED v3
before SUPERSEDED v2. :class:`MemoryLocks` serialises "graph write + publish" per memory
id, so the stream order of a memory's events is its version order.

Every writer of a memory's state in the ingest process takes them, from one shared
instance: IngestService (automem/ingest/servicer.py), the review decisions and the purges
of ReviewService (automem/ingest/review.py, automem/ingest/purge.py; automem/targets.py
hands the ReviewServicer the IngestServicer's instance). Deadlock freedom: a task holds one
lock, or several taken at once in sorted id order (:meth:`MemoryLocks.hold_all`); no task
waits for a lock while holding one otherwise.

A second instance, keyed by scope and content hash instead of memory id, holds a store's
repeat check and create together (IngestServicer ``_checking_repeats``), so two identical
stores at once cannot both create.

Scope: the locks order the events of ONE ingest process. Several ingest replicas behind a
load balancer each hold their own locks; ordering across them would need the graph's
version order (readers ordering a memory's events by their ``version``; consumers already
ignore an event older than the version they applied — DESIGN.md "Writes"), not these
locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class MemoryLocks:
    """A registry of asyncio locks keyed by memory id; a lock exists only while some task
    holds or waits for it (the registry does not grow with the number of memories).

    Use one id per operation (``async with locks.hold(memory_id): ...``), or for an
    operation writing several memories take them all at once with :meth:`hold_all`: the
    locks are not reentrant, and taking a second while holding one could deadlock against
    a task taking them in the other order."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    @asynccontextmanager
    async def hold(self, memory_id: str) -> AsyncIterator[None]:
        """Hold the lock of ``memory_id`` for the body of the ``async with``; waits while
        another task holds it (FIFO). Cancellation while waiting releases nothing it did
        not take."""
        entry = self._entries.get(memory_id)
        if entry is None:
            entry = self._entries[memory_id] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[memory_id]

    @asynccontextmanager
    async def hold_all(self, memory_ids: Iterable[str]) -> AsyncIterator[None]:
        """Hold the locks of every id of ``memory_ids`` (duplicates and empty ids ignored)
        for the body of the ``async with``, taken in sorted id order, so two operations on
        overlapping sets of memories cannot each wait for a lock the other holds."""
        async with AsyncExitStack() as stack:
            for memory_id in sorted({m for m in memory_ids if m}):
                await stack.enter_async_context(self.hold(memory_id))
            yield

    async def settle(self, memory_ids: Iterable[str]) -> None:
        """Return once every write that held the lock of one of ``memory_ids`` when this was
        called has let it go (each lock is taken and released in turn; none is kept).
        A purge calls it once the memories are gone from the graph: a write that wrote the
        graph before has published its events by then, and a later write finds no node."""
        for memory_id in dict.fromkeys(memory_ids):
            async with self.hold(memory_id):
                pass

    def __len__(self) -> int:
        """How many memory ids have a lock held or waited for (tests)."""
        return len(self._entries)
