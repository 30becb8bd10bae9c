"""Idempotency keys (``:IdempotencyKey``): a client's retry key and the memories its first
request created, per scope (automem/ingest/servicer.py), and the fingerprint of that request
(automem/ingest/logic.py ``request_fingerprint``) in the node's ``request`` property.

The claim (which memories a key names) and its fingerprint are written in the same query as
the memories (:meth:`IdempotencyKeys.create_claimed`; a supersede's in
automem/graph/memories.py ``supersede``): the first request wins both, and no claim is ever
seen without the fingerprint of the request that made it. A claim without one — made before
fingerprints existed — is compared by content, as before.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from automem.common.model import Memory, epoch, memory_to_node
from automem.graph import versions
from automem.graph.repository import Repository


def node_key(scope: str, key: str) -> str:
    """The ``key`` property of the ``:IdempotencyKey`` node of ``key`` in ``scope`` (a unit
    separator keeps the two apart: neither contains one)."""
    return f"{scope}\x1f{key}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A used idempotency key: the memory ids it names and the fingerprint of the request
    that claimed it ("" when unknown)."""

    memory_ids: list[str]
    fingerprint: str


class IdempotencyKeys(Repository):
    """Statements over ``:IdempotencyKey`` nodes."""

    async def claim(self, scope: str, key: str) -> Claim | None:
        """The claim of ``key`` in ``scope``, or None when the key is unused."""
        rows = await self.store.ro_query(
            "MATCH (k:IdempotencyKey {key: $key}) RETURN k.memory_ids, k.request", {"key": node_key(scope, key)})
        if not rows:
            return None
        return Claim(list(rows[0][0] or []), rows[0][1] or "")

    async def memory_ids(self, scope: str, key: str) -> list[str] | None:
        """The memory ids claimed by ``key`` in ``scope``, or None when it is unclaimed."""
        rows = await self.store.ro_query(
            "MATCH (k:IdempotencyKey {key: $key}) RETURN k.memory_ids", {"key": node_key(scope, key)}
        )
        return list(rows[0][0]) if rows else None

    async def create_claimed(self, scope: str, key: str, memories: Sequence[Memory],
                             ids: Sequence[str] | None = None, fingerprint: str = "") -> bool:
        """Create ``memories`` and claim ``key`` for ``ids`` (default: their ids; a batch
        whose items repeat earlier memories names those too), with the request's
        ``fingerprint`` ("" = none), in ONE query, so two concurrent retries with the same key
        cannot both create and the claim is never without its fingerprint. False (nothing
        written) when the key was already claimed for other ids. The claim's time is the first
        memory's ``create_time`` (now when ``memories`` is empty)."""
        ids = [m.id for m in memories] if ids is None else list(ids)
        rows = await self.store.query(
            "MERGE (k:IdempotencyKey {key: $key}) "
            "ON CREATE SET k.memory_ids = $ids, k.create_time = $t, k.request = $fingerprint "
            "WITH k WHERE k.memory_ids = $ids "
            "FOREACH (row IN $rows | CREATE (m:Memory) SET m = row " + versions.record_row("row") + ") "
            "RETURN count(k)",
            versions.params() | {"key": node_key(scope, key), "ids": ids, "rows": [memory_to_node(m) for m in memories],
             "t": epoch(memories[0], "create_time") if memories else time.time(), "fingerprint": fingerprint or None},
        )
        return bool(rows and rows[0][0])
