"""The request an idempotency key was first used for: its fingerprint
(automem/ingest/logic.py ``request_fingerprint``) on the key's ``:IdempotencyKey`` node.

The claim itself (which memories a key names) is automem/graph/idempotency.py's, written in
the same query as the memories; the fingerprint is written just after, on the claim that
holds the same memory ids and has none yet (first request wins). A claim without one — made
before fingerprints existed, or whose fingerprint write did not land — is compared by
content, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from automem.graph.idempotency import node_key
from automem.graph.repository import Repository


@dataclass(frozen=True, slots=True)
class Claim:
    """A used idempotency key: the memory ids it names and the fingerprint of the request
    that claimed it ("" when unknown)."""

    memory_ids: list[str]
    fingerprint: str


class RequestFingerprints(Repository):
    """Statements over the ``request`` property of ``:IdempotencyKey`` nodes."""

    async def claim(self, scope: str, key: str) -> Claim | None:
        """The claim of ``key`` in ``scope``, or None when the key is unused."""
        rows = await self.store.ro_query(
            "MATCH (k:IdempotencyKey {key: $key}) RETURN k.memory_ids, k.request", {"key": node_key(scope, key)})
        if not rows:
            return None
        return Claim(list(rows[0][0] or []), rows[0][1] or "")

    async def record(self, scope: str, key: str, ids: Sequence[str], fingerprint: str) -> None:
        """Store ``fingerprint`` on the claim of ``key`` in ``scope`` when it names ``ids``
        and holds no fingerprint yet; nothing otherwise."""
        await self.store.query(
            "MATCH (k:IdempotencyKey {key: $key}) WHERE k.memory_ids = $ids AND k.request IS NULL "
            "SET k.request = $fingerprint",
            {"key": node_key(scope, key), "ids": list(ids), "fingerprint": fingerprint})
