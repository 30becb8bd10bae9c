"""The vector store interface: one small async protocol, its shared types and errors.

The store holds **one point per current memory**:

* point id: the memory's UUID, as a canonical lower-case string
  (``"6f0c…-…"``); any UUID spelling is accepted on input and normalised, a string that is
  not a UUID raises :class:`ValueError` (:func:`automem.vectors.points.canonical_id`);
* named dense vector ``"dense"``: cosine distance, size fixed when the collection is created;
* named sparse vector ``"bm25"`` (optional per point): indices/values with the server-side
  IDF modifier, so BM25 works with client-side term weights (e.g. term frequency with
  k1/b saturation for documents, 1.0 per query term);
* payload: a dict built elsewhere (the payload builder). The keys this module indexes and
  filters on are listed in :data:`PAYLOAD_INDEXES`; times are float epoch seconds and an
  open-ended ``valid_to`` is ``253402300799.0`` (:data:`OPEN_ENDED`).

Backends (same behaviour, one test suite: tests/integration/test_vector_store.py):

* :class:`automem.vectors.edge.EdgeVectorStore`: an in-process qdrant-edge shard on disk
  (``qdrant_edge``, single process; a second opener of the same directory fails with a WAL
  ``WouldBlock``).
* :class:`automem.vectors.server.ServerVectorStore`: a Qdrant server through
  ``qdrant_client.AsyncQdrantClient`` (or its pure-Python local mode, for small tests only).

Filters (:class:`VectorFilter`) are translated once for both (:mod:`automem.vectors.filters`);
:func:`automem.vectors.make_vector_store` picks a backend from the settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DENSE",
    "OPEN_ENDED",
    "PAYLOAD_INDEXES",
    "SPARSE",
    "TRACED",
    "CollectionMissingError",
    "DimensionMismatchError",
    "PointWrite",
    "ScoredPayload",
    "SearchRequest",
    "VectorFilter",
    "VectorPoint",
    "VectorStore",
    "span_attributes",
]

#: Store calls that get a ``<operation> <collection>`` span and a store-latency sample
#: (automem/common/telemetry.py ``vector_store_methods``); the
#: batch forms are traced as their operation, with ``db.operation.batch.size``.
TRACED = {name: name for name in ("ensure_collection", "upsert", "set_payload", "delete", "retrieve", "search",
                                  "search_sparse", "count", "scroll", "newest_event_time", "flush")} | {
    "upsert_many": "upsert", "search_many": "search"}


def span_attributes(store: Any) -> dict[str, str]:
    """The attributes of a store call's span: the store's ``collection`` and ``backend``
    (OpenTelemetry database semantic conventions, automem/common/telemetry.py)."""
    return {"db.system.name": "qdrant", "db.collection.name": store.collection,
            "automem.vector.backend": store.backend}


#: Name of the dense vector of every point.
DENSE = "dense"
#: Name of the sparse (BM25) vector.
SPARSE = "bm25"
#: ``valid_to`` of a memory whose validity window is open-ended (9999-12-31T23:59:59Z).
OPEN_ENDED = 253402300799.0

#: Payload indexes created with the collection: key -> kind (``keyword``, ``float``,
#: ``integer``). ``content`` is informative only and is not indexed.
PAYLOAD_INDEXES: dict[str, str] = {
    "memory_id": "keyword",
    "scope": "keyword",
    "tags": "keyword",
    "tags_lower": "keyword",
    "tag_prefixes": "keyword",
    "type": "keyword",
    "state": "keyword",
    "content_hash": "keyword",
    "embedding_model": "keyword",
    "importance": "float",
    "confidence": "float",
    "valid_from": "float",
    "valid_to": "float",
    "event_time": "float",
    "update_time": "float",
    "version": "integer",
}


class DimensionMismatchError(RuntimeError):
    """The collection's dense size differs from the one asked for.

    Raised by ``ensure_collection`` (nothing is changed: no points are touched, no index is
    created) and by ``upsert``/``search`` when a vector of the wrong length is passed.
    ``existing`` is the collection's size, ``requested`` the size asked for.
    """

    def __init__(self, collection: str, existing: int, requested: int) -> None:
        self.collection = collection
        self.existing = existing
        self.requested = requested
        super().__init__(
            f"vector collection {collection!r} has dimension {existing}, but {requested} was "
            f"requested (embedding model output); refusing to continue, nothing was changed. "
            f"Use an embedding model of dimension {existing}, or reindex into a new collection."
        )

    def __reduce__(self) -> tuple:
        # pickled by the shared store (automem/vectors/shared.py) with its three arguments
        return (type(self), (self.collection, self.existing, self.requested))


class CollectionMissingError(RuntimeError):
    """A data call was made before the collection exists (call ``ensure_collection``)."""


@dataclass
class VectorPoint:
    """One stored point.

    ``id``: canonical UUID string. ``payload``: the stored payload dict (``{}`` if none).
    ``vector``: the dense vector (list of floats, length = dimension, L2-normalised as stored)
    when asked for and present, else ``None``. ``sparse``: ``(indices, values)`` of the BM25 vector when vectors
    were asked for and the point has one, else ``None``.
    """

    id: str
    payload: dict[str, Any]
    vector: list[float] | None = None
    sparse: tuple[list[int], list[float]] | None = None



@dataclass
class VectorFilter:
    """A payload pre-filter; all set fields are ANDed.

    * ``scope``: exact match on ``scope``.
    * ``states``: ``state`` is any of these. ``[]`` matches nothing; ``None`` = no filter.
    * ``tags_any`` / ``tags_all``: any / all of these in ``tags_lower`` (both as comparison
      keys, :func:`automem.common.text.text_key`: NFKC and case folding, applied here).
    * ``prefixes_any`` / ``prefixes_all``: any / all of these (as keys) in ``tag_prefixes``.
    * ``exclude_tags``: none of these (as keys) in ``tags_lower``.
    * ``valid_at``: epoch seconds t with ``valid_from <= t < valid_to``; points without both
      fields do not match.
    * ``event_time_gte`` / ``event_time_lte``: inclusive bounds on ``event_time`` (epoch s).
    * ``ids``: restrict to these point ids. ``[]`` matches nothing; ``None`` = no filter.
    * ``exclude_ids``: none of these point ids.
    """

    scope: str | None = None
    states: list[str] | None = None
    tags_any: list[str] = field(default_factory=list)
    tags_all: list[str] = field(default_factory=list)
    prefixes_any: list[str] = field(default_factory=list)
    prefixes_all: list[str] = field(default_factory=list)
    exclude_tags: list[str] = field(default_factory=list)
    valid_at: float | None = None
    event_time_gte: float | None = None
    event_time_lte: float | None = None
    ids: list[str] | None = None
    exclude_ids: list[str] = field(default_factory=list)

    @property
    def matches_nothing(self) -> bool:
        """True when an explicit empty ``states`` or ``ids`` list rules out every point."""
        return (self.states is not None and not self.states) or (self.ids is not None and not self.ids)


#: One point to write: ``(id, dense vector, payload, sparse (indices, values) or None)``.
PointWrite = tuple[str, Sequence[float], dict, "tuple[list[int], list[float]] | None"]
#: One dense search: ``(vector, limit, filter or None)``.
SearchRequest = tuple[Sequence[float], int, "VectorFilter | None"]
#: One hit with its payload: ``(id, score, payload)``.
ScoredPayload = tuple[str, float, dict]


@runtime_checkable
class VectorStore(Protocol):
    """The async vector store interface (every method is a coroutine).

    Results are lists of canonical UUID strings (with scores) or :class:`VectorPoint`.
    Scores: ``search`` returns cosine similarity in [-1, 1]; ``search_sparse`` returns the
    IDF-weighted dot product (>= 0 for non-negative weights). Both best first.
    """

    backend: str  # "edge" | "server"

    async def ensure_collection(self, dimension: int) -> None:
        """Create the collection (dense ``dimension``, sparse BM25, payload indexes) if missing.

        If present with the same size, add any missing payload index. If present with another
        size raise :class:`DimensionMismatchError` naming both sizes and change nothing.
        """
        ...

    async def upsert(
        self,
        point_id: str,
        vector: Sequence[float],
        payload: dict,
        sparse: tuple[list[int], list[float]] | None = None,
    ) -> None:
        """Insert or replace the point (vectors and payload).

        ``vector``: length = the collection's dimension (else :class:`DimensionMismatchError`);
        it is stored L2-normalised. ``sparse``: ``(indices, values)`` of the BM25 document
        vector (term ids and client-side term weights; IDF is applied by Qdrant at query time);
        ``None`` or empty stores no sparse vector. ``payload``: JSON-serialisable dict.
        """
        ...

    async def upsert_many(self, points: Sequence[PointWrite]) -> None:
        """:meth:`upsert` of many points in one store call (one update operation)."""
        ...

    async def set_payload(self, point_id: str, payload: dict) -> None:
        """Replace the whole payload (overwrite, not merge); no-op if the point is missing."""
        ...

    async def delete(self, point_ids: Sequence[str]) -> None:
        """Delete these points; missing ids are ignored."""
        ...

    async def retrieve(self, point_ids: Sequence[str], with_vectors: bool = False) -> list[VectorPoint]:
        """The existing points among ``point_ids``, in request order, missing ones skipped."""
        ...

    async def search(
        self, vector: Sequence[float], limit: int, flt: VectorFilter | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` ``(id, cosine similarity)`` pairs, best first (exact search)."""
        ...

    async def search_many(self, requests: Sequence[SearchRequest],
                          payload_keys: Sequence[str] | None = None) -> list[list[ScoredPayload]]:
        """:meth:`search` of many ``(vector, limit, filter)`` requests in one store call; per
        request its ``(id, cosine similarity, payload)`` hits, best first, in request order.
        ``payload_keys``: only these payload keys (None: the whole payload)."""
        ...

    async def search_sparse(
        self,
        indices: Sequence[int],
        values: Sequence[float],
        limit: int,
        flt: VectorFilter | None = None,
    ) -> list[tuple[str, float]]:
        """Up to ``limit`` ``(id, IDF-weighted dot product)`` pairs over ``bm25``, best first."""
        ...

    async def count(self, flt: VectorFilter | None = None) -> int:
        """Exact number of points matching ``flt`` (all points if ``None``)."""
        ...

    async def scroll(
        self, flt: VectorFilter | None = None, limit: int = 256, offset: str | None = None
    ) -> tuple[list[VectorPoint], str | None]:
        """One page of points (payload, no vectors) in id order from ``offset`` (inclusive).

        Returns ``(points, next_offset)``; ``next_offset`` is ``None`` on the last page.
        """
        ...

    async def newest_event_time(self, flt: VectorFilter | None = None) -> float | None:
        """The largest ``event_time`` (epoch seconds) among the points matching ``flt``, read
        through the payload index in order (no scan); ``None`` when none match."""
        ...

    async def dimension(self) -> int | None:
        """The dense size of the existing collection, ``None`` if there is no collection."""
        ...

    async def flush(self) -> None:
        """Persist pending writes."""
        ...

    async def close(self) -> None:
        """Flush and release resources; the store is unusable afterwards."""
        ...

