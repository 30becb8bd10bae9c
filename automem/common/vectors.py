"""The vector store: one small async interface, two backends.

The store holds **one point per current memory**:

* point id: the memory's UUID, as a canonical lower-case string
  (``"6f0c…-…"``); any UUID spelling is accepted on input and normalised, a string that is
  not a UUID raises :class:`ValueError`;
* named dense vector ``"dense"``: cosine distance, size fixed when the collection is created;
* named sparse vector ``"bm25"`` (optional per point): indices/values with the server-side
  IDF modifier, so BM25 works with client-side term weights (e.g. term frequency with
  k1/b saturation for documents, 1.0 per query term);
* payload: a dict built elsewhere (the payload builder). The keys this module indexes and
  filters on are listed in :data:`PAYLOAD_INDEXES`; times are float epoch seconds and an
  open-ended ``valid_to`` is ``253402300799.0`` (:data:`OPEN_ENDED`).

Backends:

* :class:`EdgeVectorStore`: an in-process qdrant-edge shard on disk (``qdrant_edge``,
  single process; a second opener of the same directory fails with a WAL ``WouldBlock``).
* :class:`ServerVectorStore`: a Qdrant server through ``qdrant_client.AsyncQdrantClient``
  (or its pure-Python local mode, for small tests only).

:func:`make_vector_store` picks one from :class:`automem.common.settings.Settings`.
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from automem.common.telemetry import traced_methods

if TYPE_CHECKING:  # pragma: no cover
    from automem.common.settings import Settings

__all__ = [
    "DENSE",
    "OPEN_ENDED",
    "PAYLOAD_INDEXES",
    "SPARSE",
    "CollectionMissingError",
    "DimensionMismatchError",
    "EdgeVectorStore",
    "ServerVectorStore",
    "VectorFilter",
    "VectorPoint",
    "VectorStore",
    "make_vector_store",
]

#: Store calls that get a ``vectors.<operation>`` span (automem/common/telemetry.py); the
#: batch forms are traced as their operation, with ``db.operation.batch.size``.
_TRACED = {name: name for name in ("ensure_collection", "upsert", "set_payload", "delete", "retrieve", "search",
                                   "search_sparse", "count", "scroll", "newest_event_time", "flush")} | {
    "upsert_many": "upsert", "search_many": "search"}


def _span_attributes(store: Any) -> dict[str, str]:
    return {"db.system": "qdrant", "db.system.name": "qdrant", "db.collection.name": store.collection,
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
    * ``tags_any`` / ``tags_all``: any / all of these (lower-cased here) in ``tags_lower``.
    * ``prefixes_any`` / ``prefixes_all``: any / all of these (lower-cased) in ``tag_prefixes``.
    * ``exclude_tags``: none of these (lower-cased) in ``tags_lower``.
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


# --------------------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------------------


def _pid(point_id: str | uuid.UUID) -> str:
    """Canonical lower-case UUID string; ``ValueError`` if ``point_id`` is not a UUID."""
    if isinstance(point_id, uuid.UUID):
        return str(point_id)
    try:
        return str(uuid.UUID(str(point_id)))
    except ValueError:
        raise ValueError(f"vector point id must be a UUID string, got {point_id!r}") from None


def _lower(values: Sequence[str]) -> list[str]:
    return [v.lower() for v in values]


# A neutral form of a filter, translated by each backend:
#   ("value", key, v) | ("any", key, [v...]) | ("range", key, {"gte":..,"lt":..}) | ("ids", [id...])
_Cond = tuple


def _conditions(flt: VectorFilter) -> tuple[list[_Cond], list[_Cond]]:
    """``(must, must_not)`` in neutral form for ``flt``."""
    must: list[_Cond] = []
    must_not: list[_Cond] = []
    if flt.scope is not None:
        must.append(("value", "scope", flt.scope))
    if flt.states is not None:
        must.append(("any", "state", list(flt.states)))
    if flt.tags_any:
        must.append(("any", "tags_lower", _lower(flt.tags_any)))
    for tag in dict.fromkeys(_lower(flt.tags_all)):
        must.append(("value", "tags_lower", tag))
    if flt.prefixes_any:
        must.append(("any", "tag_prefixes", _lower(flt.prefixes_any)))
    for prefix in dict.fromkeys(_lower(flt.prefixes_all)):
        must.append(("value", "tag_prefixes", prefix))
    if flt.exclude_tags:
        must_not.append(("any", "tags_lower", _lower(flt.exclude_tags)))
    if flt.valid_at is not None:
        t = float(flt.valid_at)
        must.append(("range", "valid_from", {"lte": t}))
        must.append(("range", "valid_to", {"gt": t}))
    if flt.event_time_gte is not None or flt.event_time_lte is not None:
        rng: dict[str, float] = {}
        if flt.event_time_gte is not None:
            rng["gte"] = float(flt.event_time_gte)
        if flt.event_time_lte is not None:
            rng["lte"] = float(flt.event_time_lte)
        must.append(("range", "event_time", rng))
    if flt.ids is not None:
        must.append(("ids", [_pid(i) for i in flt.ids]))
    if flt.exclude_ids:
        must_not.append(("ids", [_pid(i) for i in flt.exclude_ids]))
    return must, must_not


def _check_dim(collection: str, expected: int | None, got: int) -> None:
    if expected is not None and expected != got:
        raise DimensionMismatchError(collection, expected, got)


def _dense(vector: Sequence[float]) -> list[float]:
    """``vector`` as floats, L2-normalised (cosine ignores length; a zero vector is kept)."""
    vec = [float(x) for x in vector]
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm > 0.0 else vec


def _sparse_pair(indices: Sequence[int], values: Sequence[float]) -> tuple[list[int], list[float]]:
    idx = [int(i) for i in indices]
    val = [float(v) for v in values]
    if len(idx) != len(val):
        raise ValueError(f"sparse vector has {len(idx)} indices but {len(val)} values")
    return idx, val


# --------------------------------------------------------------------------------------
# edge backend
# --------------------------------------------------------------------------------------

T = TypeVar("T")


@traced_methods("vectors", _TRACED, _span_attributes)
class EdgeVectorStore:
    """Vector store on an in-process qdrant-edge shard (``qdrant_edge.EdgeShard``).

    ``path`` is the shard directory itself (``Settings.qdrant_path``, which already ends in
    the collection name); ``collection`` only names the store in errors. The shard is created
    by :meth:`ensure_collection` (``EdgeShard.create``) and otherwise opened lazily with
    ``EdgeShard.load`` on first use. Every blocking shard call runs in ``asyncio.to_thread``
    under one ``asyncio.Lock``, so calls are serialised. Only one process may open a shard
    directory. Before the shard exists, data calls raise :class:`CollectionMissingError`;
    after :meth:`close`, every call raises ``RuntimeError``.
    """

    backend = "edge"

    def __init__(self, path: Path | str, collection: str = "memories") -> None:
        self.path = Path(path)
        self.collection = collection
        self._shard: Any = None
        self._dim: int | None = None
        self._closed = False
        self._lock = asyncio.Lock()

    # -- plumbing -------------------------------------------------------------------------

    def _exists(self) -> bool:
        """Whether the directory holds a shard (its config file or any segment)."""
        if (self.path / "edge_config.json").is_file():
            return True
        seg = self.path / "segments"
        return seg.is_dir() and any(seg.iterdir())

    def _config_dim(self) -> int | None:
        """Dense size from ``edge_config.json`` (qdrant-edge persists its config there)."""
        try:
            cfg = json.loads((self.path / "edge_config.json").read_text())
            return int(cfg["vectors"][DENSE]["size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _open_sync(self) -> Any:
        """Open (load) the shard if it exists; ``None`` if there is none. Lock held."""
        if self._closed:
            raise RuntimeError(f"vector store {self.collection!r} is closed")
        if self._shard is None and self._exists():
            import qdrant_edge as qe

            self._shard = qe.EdgeShard.load(str(self.path))
            self._dim = self._config_dim()
            if self._dim is None:  # config file unreadable: infer from one stored point
                recs, _ = self._shard.scroll(
                    qe.ScrollRequest(limit=1, with_payload=False, with_vector=[DENSE])
                )
                for rec in recs:
                    vec = (rec.vector or {}).get(DENSE)
                    if vec is not None:
                        self._dim = len(vec)
        return self._shard

    def _require_sync(self) -> Any:
        shard = self._open_sync()
        if shard is None:
            raise CollectionMissingError(
                f"vector collection {self.collection!r} does not exist at {self.path}; "
                "call ensure_collection(dimension) first"
            )
        return shard

    async def _run(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a worker thread, one at a time.

        If the caller is cancelled, the lock is still held until the thread has finished,
        so a cancelled call never overlaps the next one on the shard.
        """
        async with self._lock:
            fut = asyncio.ensure_future(asyncio.to_thread(fn))
            try:
                return await asyncio.shield(fut)
            except asyncio.CancelledError:
                while not fut.done():
                    try:
                        await asyncio.wait({fut})  # never raises the thread's own error
                    except asyncio.CancelledError:
                        continue
                if not fut.cancelled():
                    fut.exception()  # mark retrieved: the caller is gone
                raise

    @staticmethod
    def _filter(flt: VectorFilter | None) -> Any:
        if flt is None:
            return None
        import qdrant_edge as qe

        def cond(c: _Cond) -> Any:
            if c[0] == "value":
                return qe.FieldCondition(c[1], match=qe.MatchValue(c[2]))
            if c[0] == "any":
                return qe.FieldCondition(c[1], match=qe.MatchAny(list(c[2])))
            if c[0] == "range":
                return qe.FieldCondition(c[1], range=qe.RangeFloat(**c[2]))
            return qe.HasIdCondition(set(c[1]))

        must, must_not = _conditions(flt)
        if not must and not must_not:
            return None
        return qe.Filter(must=[cond(c) for c in must] or None, must_not=[cond(c) for c in must_not] or None)

    @staticmethod
    def _point(rec: Any) -> VectorPoint:
        vec = rec.vector if isinstance(rec.vector, dict) else {}
        dense = vec.get(DENSE)
        sp = vec.get(SPARSE)
        return VectorPoint(
            id=str(rec.id),
            payload=dict(rec.payload or {}),
            vector=[float(x) for x in dense] if dense is not None else None,
            sparse=(list(sp.indices), [float(v) for v in sp.values]) if sp is not None else None,
        )

    # -- interface ------------------------------------------------------------------------

    async def ensure_collection(self, dimension: int) -> None:
        if dimension <= 0:
            raise ValueError(f"vector dimension must be positive, got {dimension}")
        import qdrant_edge as qe

        kinds = {
            "keyword": qe.PayloadSchemaType.Keyword,
            "float": qe.PayloadSchemaType.Float,
            "integer": qe.PayloadSchemaType.Integer,
        }

        def work() -> None:
            shard = self._open_sync()
            if shard is None:
                self.path.mkdir(parents=True, exist_ok=True)
                config = qe.EdgeConfig(
                    vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine)},
                    sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
                )
                shard = self._shard = qe.EdgeShard.create(str(self.path), config)
                self._dim = dimension
            elif self._dim is not None and self._dim != dimension:
                raise DimensionMismatchError(self.collection, self._dim, dimension)
            elif self._dim is None:  # an empty shard whose config we could not read
                self._dim = dimension
            present = set(shard.info().payload_schema)
            for key, kind in PAYLOAD_INDEXES.items():
                if key not in present:
                    shard.update(qe.UpdateOperation.create_field_index(key, kinds[kind]))

        await self._run(work)

    async def upsert(
        self,
        point_id: str,
        vector: Sequence[float],
        payload: dict,
        sparse: tuple[list[int], list[float]] | None = None,
    ) -> None:
        await self._write_points([(point_id, vector, payload, sparse)])

    async def upsert_many(self, points: Sequence[PointWrite]) -> None:
        await self._write_points(points)

    async def _write_points(self, points: Sequence[PointWrite]) -> None:
        import qdrant_edge as qe

        built = []
        sizes = set()
        for point_id, vector, payload, sparse in points:
            vectors: dict[str, Any] = {DENSE: _dense(vector)}
            sizes.add(len(vectors[DENSE]))
            if sparse is not None:
                idx, val = _sparse_pair(*sparse)
                if idx:
                    vectors[SPARSE] = qe.SparseVector(idx, val)
            built.append(qe.Point(_pid(point_id), vectors, dict(payload)))
        if not built:
            return

        def work() -> None:
            shard = self._require_sync()
            for size in sizes:
                _check_dim(self.collection, self._dim, size)
            shard.update(qe.UpdateOperation.upsert_points(built))

        await self._run(work)

    async def set_payload(self, point_id: str, payload: dict) -> None:
        import qdrant_edge as qe

        pid = _pid(point_id)
        # overwrite_payload by id raises "No point with id" for a missing point; by filter
        # is a no-op then, which is the contract.
        op = qe.UpdateOperation.overwrite_payload_by_filter(
            qe.Filter(must=[qe.HasIdCondition({pid})]), dict(payload)
        )
        await self._run(lambda: self._require_sync().update(op))

    async def delete(self, point_ids: Sequence[str]) -> None:
        ids = [_pid(p) for p in point_ids]
        if not ids:
            return
        import qdrant_edge as qe

        await self._run(lambda: self._require_sync().update(qe.UpdateOperation.delete_points(ids)))

    async def retrieve(self, point_ids: Sequence[str], with_vectors: bool = False) -> list[VectorPoint]:
        ids = list(dict.fromkeys(_pid(p) for p in point_ids))
        if not ids:
            return []
        # retrieve() needs both flags positionally, despite the stub's defaults.
        recs = await self._run(lambda: self._require_sync().retrieve(ids, True, bool(with_vectors)))
        by_id = {str(r.id): self._point(r) for r in recs}
        return [by_id[i] for i in ids if i in by_id]

    async def _query(self, query: Any, limit: int, flt: VectorFilter | None, dim: int | None) -> list:
        import qdrant_edge as qe

        if limit <= 0 or (flt is not None and flt.matches_nothing):
            # still surface a missing collection
            await self._run(self._require_sync)
            return []
        req = qe.QueryRequest(
            limit=int(limit), query=query, filter=self._filter(flt), with_payload=False, with_vector=False
        )

        def work() -> list:
            shard = self._require_sync()
            if dim is not None:
                _check_dim(self.collection, self._dim, dim)
            return shard.query(req)

        res = await self._run(work)
        return [(str(p.id), float(p.score)) for p in res]

    async def search(
        self, vector: Sequence[float], limit: int, flt: VectorFilter | None = None
    ) -> list[tuple[str, float]]:
        import qdrant_edge as qe

        vec = [float(x) for x in vector]
        return await self._query(qe.Query.Nearest(vec, using=DENSE), limit, flt, len(vec))

    async def search_many(self, requests: Sequence[SearchRequest],
                          payload_keys: Sequence[str] | None = None) -> list[list[ScoredPayload]]:
        import qdrant_edge as qe

        with_payload = list(payload_keys) if payload_keys is not None else True

        out: list[list[ScoredPayload]] = [[] for _ in requests]
        asks: list[tuple[int, Any]] = []
        sizes = {len(vector) for vector, _, _ in requests}
        for i, (vector, limit, flt) in enumerate(requests):
            if limit > 0 and not (flt is not None and flt.matches_nothing):
                query = qe.Query.Nearest([float(x) for x in vector], using=DENSE)
                asks.append((i, qe.QueryRequest(limit=int(limit), query=query, filter=self._filter(flt),
                                                with_payload=with_payload, with_vector=False)))

        def work() -> list:
            shard = self._require_sync()
            for size in sizes:
                _check_dim(self.collection, self._dim, size)
            return shard.query_batch(qe.QueryBatchRequest([req for _, req in asks])) if asks else []

        results = await self._run(work)
        for (i, _), hits in zip(asks, results, strict=True):
            out[i] = [(str(p.id), float(p.score), dict(p.payload or {})) for p in hits]
        return out

    async def search_sparse(
        self,
        indices: Sequence[int],
        values: Sequence[float],
        limit: int,
        flt: VectorFilter | None = None,
    ) -> list[tuple[str, float]]:
        import qdrant_edge as qe

        idx, val = _sparse_pair(indices, values)
        if not idx:
            limit = 0
        return await self._query(qe.Query.Nearest(qe.SparseVector(idx, val), using=SPARSE), limit, flt, None)

    async def count(self, flt: VectorFilter | None = None) -> int:
        import qdrant_edge as qe

        if flt is not None and flt.matches_nothing:
            await self._run(self._require_sync)
            return 0
        req = qe.CountRequest(exact=True, filter=self._filter(flt))
        return int(await self._run(lambda: self._require_sync().count(req)))

    async def scroll(
        self, flt: VectorFilter | None = None, limit: int = 256, offset: str | None = None
    ) -> tuple[list[VectorPoint], str | None]:
        import qdrant_edge as qe

        if limit <= 0 or (flt is not None and flt.matches_nothing):
            await self._run(self._require_sync)
            return [], None
        req = qe.ScrollRequest(
            offset=_pid(offset) if offset is not None else None,
            limit=int(limit),
            filter=self._filter(flt),
            with_payload=True,
            with_vector=False,
        )
        recs, nxt = await self._run(lambda: self._require_sync().scroll(req))
        return [self._point(r) for r in recs], (str(nxt) if nxt is not None else None)

    async def newest_event_time(self, flt: VectorFilter | None = None) -> float | None:
        import qdrant_edge as qe

        if flt is not None and flt.matches_nothing:
            return None
        req = qe.ScrollRequest(limit=1, filter=self._filter(flt), with_payload=True, with_vector=False,
                               order_by=qe.OrderBy("event_time", qe.Direction.Desc))
        recs, _ = await self._run(lambda: self._require_sync().scroll(req))
        for rec in recs:
            value = (rec.payload or {}).get("event_time")
            return float(value) if value is not None else None
        return None

    async def dimension(self) -> int | None:
        def work() -> int | None:
            self._open_sync()
            return self._dim

        return await self._run(work)

    async def flush(self) -> None:
        def work() -> None:
            shard = self._open_sync()
            if shard is not None:
                shard.flush()

        await self._run(work)

    async def close(self) -> None:
        def work() -> None:
            if self._shard is not None:
                try:
                    self._shard.flush()
                finally:
                    self._shard.close()
                    self._shard = None
            self._closed = True

        if not self._closed:
            await self._run(work)


# --------------------------------------------------------------------------------------
# server backend
# --------------------------------------------------------------------------------------


@traced_methods("vectors", _TRACED, _span_attributes)
class ServerVectorStore:
    """Vector store on a Qdrant server through ``qdrant_client.AsyncQdrantClient``.

    ``url``: the server URL (``http://host:6333``); ``api_key``: ``""`` for none;
    ``collection``: the collection name (``Settings.collection_name``). For tests pass a
    ready ``client`` (e.g. ``AsyncQdrantClient(location=":memory:")``, qdrant-client's
    pure-Python local mode: filters, sparse vectors and the IDF modifier work there, payload
    indexes are accepted but have no effect). Data calls against a missing collection raise
    qdrant-client's own error (``UnexpectedResponse`` 404 remotely, ``ValueError`` locally).
    """

    backend = "server"

    def __init__(
        self,
        url: str = "",
        api_key: str = "",
        collection: str = "memories",
        *,
        client: Any = None,
        timeout: float | None = 30.0,
    ) -> None:
        if client is None:
            from qdrant_client import AsyncQdrantClient

            # check_compatibility=False: the version probe is a blocking HTTP call made in the
            # constructor; connectivity problems surface at ensure_collection instead.
            client = AsyncQdrantClient(
                url=url,
                api_key=api_key or None,
                timeout=int(timeout) if timeout else None,
                check_compatibility=False,
            )
        self.client = client
        self.collection = collection
        self._dim: int | None = None

    @staticmethod
    def _filter(flt: VectorFilter | None) -> Any:
        if flt is None:
            return None
        from qdrant_client import models as m

        def cond(c: _Cond) -> Any:
            if c[0] == "value":
                return m.FieldCondition(key=c[1], match=m.MatchValue(value=c[2]))
            if c[0] == "any":
                return m.FieldCondition(key=c[1], match=m.MatchAny(any=list(c[2])))
            if c[0] == "range":
                return m.FieldCondition(key=c[1], range=m.Range(**c[2]))
            return m.HasIdCondition(has_id=list(c[1]))

        must, must_not = _conditions(flt)
        if not must and not must_not:
            return None
        return m.Filter(must=[cond(c) for c in must] or None, must_not=[cond(c) for c in must_not] or None)

    @staticmethod
    def _point(rec: Any) -> VectorPoint:
        vec = rec.vector if isinstance(rec.vector, dict) else {}
        dense = vec.get(DENSE)
        sp = vec.get(SPARSE)
        return VectorPoint(
            id=_pid(rec.id),
            payload=dict(rec.payload or {}),
            vector=[float(x) for x in dense] if dense is not None else None,
            sparse=(list(sp.indices), [float(v) for v in sp.values]) if sp is not None else None,
        )

    async def _collection_dim(self) -> int | None:
        if not await self.client.collection_exists(self.collection):
            return None
        info = await self.client.get_collection(self.collection)
        vectors = info.config.params.vectors
        if isinstance(vectors, dict):
            params = vectors.get(DENSE)
            if params is None:
                raise RuntimeError(
                    f"vector collection {self.collection!r} has no {DENSE!r} vector "
                    f"(named vectors: {sorted(vectors)}); it was not created by automem"
                )
            return int(params.size)
        if vectors is not None:
            raise RuntimeError(
                f"vector collection {self.collection!r} has one unnamed vector of size {vectors.size}, "
                f"automem needs a named {DENSE!r} vector; reindex into a new collection"
            )
        return None

    async def ensure_collection(self, dimension: int) -> None:
        if dimension <= 0:
            raise ValueError(f"vector dimension must be positive, got {dimension}")
        from qdrant_client import models as m

        existing = await self._collection_dim()
        if existing is None:
            await self.client.create_collection(
                self.collection,
                vectors_config={DENSE: m.VectorParams(size=dimension, distance=m.Distance.COSINE)},
                sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
            )
            present: set[str] = set()
        elif existing != dimension:
            raise DimensionMismatchError(self.collection, existing, dimension)
        else:
            info = await self.client.get_collection(self.collection)
            present = set(info.payload_schema or {})
        self._dim = dimension
        kinds = {
            "keyword": m.PayloadSchemaType.KEYWORD,
            "float": m.PayloadSchemaType.FLOAT,
            "integer": m.PayloadSchemaType.INTEGER,
        }
        with warnings.catch_warnings():
            # local mode warns that payload indexes have no effect there
            warnings.filterwarnings("ignore", message="Payload indexes have no effect")
            for key, kind in PAYLOAD_INDEXES.items():
                if key not in present:
                    await self.client.create_payload_index(self.collection, key, kinds[kind], wait=True)

    async def upsert(
        self,
        point_id: str,
        vector: Sequence[float],
        payload: dict,
        sparse: tuple[list[int], list[float]] | None = None,
    ) -> None:
        await self._write_points([(point_id, vector, payload, sparse)])

    async def upsert_many(self, points: Sequence[PointWrite]) -> None:
        await self._write_points(points)

    async def _write_points(self, points: Sequence[PointWrite]) -> None:
        from qdrant_client import models as m

        built = []
        for point_id, vector, payload, sparse in points:
            vec = _dense(vector)
            _check_dim(self.collection, self._dim, len(vec))
            vectors: dict[str, Any] = {DENSE: vec}
            if sparse is not None:
                idx, val = _sparse_pair(*sparse)
                if idx:
                    vectors[SPARSE] = m.SparseVector(indices=idx, values=val)
            built.append(m.PointStruct(id=_pid(point_id), vector=vectors, payload=dict(payload)))
        if built:
            await self.client.upsert(self.collection, points=built, wait=True)

    async def set_payload(self, point_id: str, payload: dict) -> None:
        from qdrant_client import models as m

        # By filter, so a missing point is a no-op (by id, local mode raises KeyError).
        await self.client.overwrite_payload(
            self.collection,
            payload=dict(payload),
            points=m.FilterSelector(filter=m.Filter(must=[m.HasIdCondition(has_id=[_pid(point_id)])])),
            wait=True,
        )

    async def delete(self, point_ids: Sequence[str]) -> None:
        from qdrant_client import models as m

        ids = [_pid(p) for p in point_ids]
        if ids:
            await self.client.delete(self.collection, points_selector=m.PointIdsList(points=ids), wait=True)

    async def retrieve(self, point_ids: Sequence[str], with_vectors: bool = False) -> list[VectorPoint]:
        ids = list(dict.fromkeys(_pid(p) for p in point_ids))
        if not ids:
            return []
        recs = await self.client.retrieve(
            self.collection, ids=ids, with_payload=True, with_vectors=bool(with_vectors)
        )
        by_id = {_pid(r.id): self._point(r) for r in recs}
        return [by_id[i] for i in ids if i in by_id]

    async def _query(self, query: Any, using: str, limit: int, flt: VectorFilter | None) -> list:
        if limit <= 0 or (flt is not None and flt.matches_nothing):
            return []
        res = await self.client.query_points(
            self.collection,
            query=query,
            using=using,
            limit=int(limit),
            query_filter=self._filter(flt),
            with_payload=False,
            with_vectors=False,
        )
        return [(_pid(p.id), float(p.score)) for p in res.points]

    async def search(
        self, vector: Sequence[float], limit: int, flt: VectorFilter | None = None
    ) -> list[tuple[str, float]]:
        vec = [float(x) for x in vector]
        _check_dim(self.collection, self._dim, len(vec))
        return await self._query(vec, DENSE, limit, flt)

    async def search_many(self, requests: Sequence[SearchRequest],
                          payload_keys: Sequence[str] | None = None) -> list[list[ScoredPayload]]:
        from qdrant_client import models as m

        with_payload = list(payload_keys) if payload_keys is not None else True

        out: list[list[ScoredPayload]] = [[] for _ in requests]
        asks: list[tuple[int, Any]] = []
        for i, (vector, limit, flt) in enumerate(requests):
            vec = [float(x) for x in vector]
            _check_dim(self.collection, self._dim, len(vec))
            if limit > 0 and not (flt is not None and flt.matches_nothing):
                asks.append((i, m.QueryRequest(query=vec, using=DENSE, limit=int(limit), filter=self._filter(flt),
                                               with_payload=with_payload, with_vector=False)))
        if asks:
            results = await self.client.query_batch_points(self.collection, requests=[r for _, r in asks])
            for (i, _), res in zip(asks, results, strict=True):
                out[i] = [(_pid(p.id), float(p.score), dict(p.payload or {})) for p in res.points]
        return out

    async def search_sparse(
        self,
        indices: Sequence[int],
        values: Sequence[float],
        limit: int,
        flt: VectorFilter | None = None,
    ) -> list[tuple[str, float]]:
        from qdrant_client import models as m

        idx, val = _sparse_pair(indices, values)
        if not idx:
            return []
        return await self._query(m.SparseVector(indices=idx, values=val), SPARSE, limit, flt)

    async def count(self, flt: VectorFilter | None = None) -> int:
        if flt is not None and flt.matches_nothing:
            return 0
        res = await self.client.count(self.collection, count_filter=self._filter(flt), exact=True)
        return int(res.count)

    async def scroll(
        self, flt: VectorFilter | None = None, limit: int = 256, offset: str | None = None
    ) -> tuple[list[VectorPoint], str | None]:
        if limit <= 0 or (flt is not None and flt.matches_nothing):
            return [], None
        recs, nxt = await self.client.scroll(
            self.collection,
            scroll_filter=self._filter(flt),
            limit=int(limit),
            offset=_pid(offset) if offset is not None else None,
            with_payload=True,
            with_vectors=False,
        )
        return [self._point(r) for r in recs], (_pid(nxt) if nxt is not None else None)

    async def newest_event_time(self, flt: VectorFilter | None = None) -> float | None:
        from qdrant_client import models

        if flt is not None and flt.matches_nothing:
            return None
        recs, _ = await self.client.scroll(
            self.collection, scroll_filter=self._filter(flt), limit=1, with_payload=["event_time"],
            with_vectors=False, order_by=models.OrderBy(key="event_time", direction=models.Direction.DESC))
        for rec in recs:
            value = (rec.payload or {}).get("event_time")
            return float(value) if value is not None else None
        return None

    async def dimension(self) -> int | None:
        return await self._collection_dim()

    async def flush(self) -> None:
        """No-op: every write above waits for the server (``wait=True``)."""

    async def close(self) -> None:
        await self.client.close()


# --------------------------------------------------------------------------------------


def make_vector_store(settings: Settings) -> VectorStore | None:
    """The vector store the settings ask for.

    ``qdrant_url == ""``: :class:`EdgeVectorStore` at ``settings.qdrant_path``;
    ``"disabled"`` (any case): ``None`` (recall runs on the graph arms only);
    ``":memory:"`` or ``"local:<dir>"`` (tests and development only): a
    :class:`ServerVectorStore` over qdrant-client's pure-Python local mode, in memory or in
    ``<dir>`` (one process per directory) — the server backend's code path without a server;
    anything else: :class:`ServerVectorStore` at that URL with ``settings.qdrant_api_key``.
    The collection is ``settings.collection_name``. Nothing is opened or created here.
    """
    url = settings.qdrant_url.strip()
    if not settings.vectors_enabled:
        return None
    if url == "":
        return EdgeVectorStore(settings.qdrant_path, settings.collection_name)
    if url == ":memory:" or url.startswith("local:"):
        from qdrant_client import AsyncQdrantClient

        client = AsyncQdrantClient(location=":memory:") if url == ":memory:" else AsyncQdrantClient(
            path=url.removeprefix("local:"))
        return ServerVectorStore(collection=settings.collection_name, client=client)
    return ServerVectorStore(url, settings.qdrant_api_key, settings.collection_name)
