"""Per-memory write locks of the ingest path: the order of one memory's events.

A change to an existing memory is a graph write (which moves its ``version``) followed by
the publish of its MemoryEvent(s). Two changes of one memory running at once could
publish in the other order than they wrote — a memory's history (read from the stream by
position, automem/ingest/review.py ``ListMemoryEvents``) would then list, say, DELETED v3
before SUPERSEDED v2. :class:`MemoryLocks` serialises "graph write + publish" per memory
id, so the stream order of a memory's events is its version order.

Scope: the locks order the events of ONE ingest process. Several ingest replicas behind a
load balancer each hold their own locks; ordering across them would need the graph's
version order (readers ordering a memory's events by their ``version``; consumers already
ignore an event older than the version they applied — DESIGN.md "Writes"), not these
locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class MemoryLocks:
    """A registry of asyncio locks keyed by memory id; a lock exists only while some task
    holds or waits for it (the registry does not grow with the number of memories).

    Use one id per operation (``async with locks.hold(memory_id): ...``): the locks are not
    reentrant, and holding two at once could deadlock against a task taking them in the
    other order."""

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

    def __len__(self) -> int:
        """How many memory ids have a lock held or waited for (tests)."""
        return len(self._entries)
