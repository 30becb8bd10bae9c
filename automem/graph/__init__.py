"""The graph store (FalkorDB, the record of truth) and its repositories.

:class:`GraphStore` (automem/graph/store.py) is the connection; the Cypher statements live
in one repository per node kind, reached as its attributes:

* ``memories`` — :class:`~automem.graph.memories.Memories` (``:Memory`` nodes: create,
  hydrate, recall candidates, listings, partial writes through the node builder);
* ``relations`` — :class:`~automem.graph.relations.Relations` (edges between memories,
  predecessor links);
* ``entities`` — :class:`~automem.graph.entities.Entities` (``:Entity`` nodes, MENTIONS);
* ``review`` — :class:`~automem.graph.review.Review` (``:ReviewItem`` nodes);
* ``tombstones`` — :class:`~automem.graph.tombstones.Tombstones` (``:Tombstone`` nodes);
* ``keys`` — :class:`~automem.graph.keys.ApiKeys` (``:ApiKey`` nodes);
* ``idempotency`` — :class:`~automem.graph.idempotency.IdempotencyKeys`;
* ``runs`` — :class:`~automem.graph.runs.ConsolidationRuns`;
* ``dump`` — :class:`~automem.graph.dump.Dump` (whole-graph export and restore);
* ``purges`` — :class:`~automem.graph.purges.Purges` (admin purges, ``:Purge`` records).
"""

from __future__ import annotations

from automem.graph.memories import ENRICHMENT_FIELDS
from automem.graph.relations import ALL_RELATIONS, PREDECESSOR_WINDOWS
from automem.graph.store import GraphStore

__all__ = ["ALL_RELATIONS", "ENRICHMENT_FIELDS", "PREDECESSOR_WINDOWS", "GraphStore"]
