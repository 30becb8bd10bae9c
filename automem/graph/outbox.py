"""Outbox batches (``:OutboxBatch``): events recorded in the SAME graph query as the change
they announce, so a crash at any point leaves every change with its event.

A consolidation write (automem/consolidate/tasks.py) passes each row's outbox entry (a
base64 MemoryEvent, automem/common/outbox.py ``entry``) as a parameter and ends with
:func:`tail`: the entries of the rows the query really wrote are collected into ONE
``(:OutboxBatch {id, create_time, entries})`` node (none when it wrote nothing). Right after,
the writer moves the batch to the Redis outbox list (:meth:`OutboxBatches.move`), from which
the drain publishes it; a batch whose writer died first is moved by any process's drain
(:meth:`OutboxBatches.pending`, automem/common/outbox.py ``EventPublisher.drain_once``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from automem.graph.repository import Repository

LABEL = "OutboxBatch"
#: Seconds a mover's claim on a batch lasts (then another process may move it).
CLAIM_SECONDS = 60


@dataclass
class Batch:
    """One write's outbox batch: ``id``, ``create_time`` (epoch seconds) and, once the write
    returned, ``entries`` (the outbox entries the write recorded, in row order)."""

    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    create_time: float = field(default_factory=time.time)
    entries: list[str] = field(default_factory=list)

    def params(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """The parameters :func:`tail` needs (``ob_id``, ``ob_time``), plus ``extra``."""
        return {"ob_id": self.id, "ob_time": self.create_time, **(extra or {})}


def tail(columns: str, entry: str, carry: str) -> str:
    """Cypher ending a write whose rows carry ``carry`` (the variables still bound): keeps
    ``entry`` (an expression: the row's outbox entry) of every row that got here in one
    ``:OutboxBatch`` node, and returns one row per written row: ``[columns..., entry]`` as a
    list (``columns``: a comma-separated list of expressions). Read it with :func:`split`."""
    return (f"WITH {carry} WITH collect([{columns}, {entry}]) AS _ob_rows "
            f"FOREACH (_x IN CASE WHEN size(_ob_rows) = 0 THEN [] ELSE [1] END | "
            f"CREATE (:{LABEL} {{id: $ob_id, create_time: $ob_time, entries: [_r IN _ob_rows | _r[-1]]}})) "
            "WITH _ob_rows UNWIND _ob_rows AS _ob_row RETURN _ob_row")


def split(rows: list[list[Any]], batch: Batch) -> list[list[Any]]:
    """The rows of a query ending with :func:`tail`, without their entry; ``batch.entries``
    receives the entries."""
    batch.entries = [r[0][-1] for r in rows]
    return [list(r[0][:-1]) for r in rows]


class OutboxBatches(Repository):
    """Statements over ``:OutboxBatch`` nodes."""

    async def pending(self, limit: int = 16) -> list[Batch]:
        """Batches still in the graph, oldest first (at most ``limit``)."""
        rows = await self.store.ro_query(
            f"MATCH (b:{LABEL}) RETURN b.id, b.create_time, b.entries ORDER BY b.create_time LIMIT $limit",
            {"limit": limit})
        return [Batch(id=r[0], create_time=float(r[1] or 0.0), entries=list(r[2] or [])) for r in rows]

    async def move(self, batch: Batch, key: str) -> bool:
        """Append ``batch.entries`` to the Redis list ``key`` and delete the batch node, in one
        MULTI/EXEC (both or neither). A claim (``SET NX`` for :data:`CLAIM_SECONDS`) first, so
        two processes do not both append it; False when another holds it. Raises
        Unavailable when FalkorDB cannot be reached or does not answer in time."""
        store: Any = self.store
        async with store.bounded():
            if not await store.redis.set(f"automem:outbox-batch:{batch.id}", "1", nx=True, ex=CLAIM_SECONDS):
                return False
            pipe = store.redis.pipeline(transaction=True)
            if batch.entries:
                pipe.rpush(key, *batch.entries)
            pipe.execute_command("GRAPH.QUERY", store.name,
                                 store.graph._build_params_header({"id": batch.id})
                                 + f"MATCH (b:{LABEL} {{id: $id}}) DELETE b", "--compact")
            await pipe.execute()
        return True
