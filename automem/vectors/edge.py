"""The embedded backend: the vector store on an in-process qdrant-edge shard.

The interface and its contract: :mod:`automem.vectors.protocol`; filters are spelled by
:func:`dialect` through the shared translator (:mod:`automem.vectors.filters`).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from automem.common.telemetry import traced_methods
from automem.vectors.filters import Dialect, translate
from automem.vectors.points import canonical_id, check_dim, dense, point_vectors, read_point, sparse_pair
from automem.vectors.protocol import (
    DENSE,
    PAYLOAD_INDEXES,
    SPARSE,
    TRACED,
    CollectionMissingError,
    DimensionMismatchError,
    PointWrite,
    ScoredPayload,
    SearchRequest,
    VectorFilter,
    VectorPoint,
    span_attributes,
)

__all__ = ["EdgeVectorStore", "dialect"]


@functools.cache
def dialect() -> Dialect:
    """qdrant-edge's spelling of filter conditions (imported on first use)."""
    import qdrant_edge as qe

    return Dialect(
        value=lambda key, v: qe.FieldCondition(key, match=qe.MatchValue(v)),
        any=lambda key, values: qe.FieldCondition(key, match=qe.MatchAny(values)),
        range=lambda key, bounds: qe.FieldCondition(key, range=qe.RangeFloat(**bounds)),
        has_id=lambda ids: qe.HasIdCondition(set(ids)),
        filter=lambda must, must_not: qe.Filter(must=must, must_not=must_not),
    )


T = TypeVar("T")


@traced_methods("vectors", TRACED, span_attributes)
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

        A caller that is cancelled (e.g. by the store bound, automem/vectors/bounded.py)
        returns at once; the lock stays held until the thread has finished, so a cancelled
        call never overlaps the next one on the shard.
        """
        await self._lock.acquire()
        try:
            fut = asyncio.ensure_future(asyncio.to_thread(fn))
        except BaseException:
            self._lock.release()
            raise

        def finished(done: asyncio.Future) -> None:
            self._lock.release()
            if not done.cancelled():
                done.exception()  # mark retrieved: the caller may be gone

        fut.add_done_callback(finished)
        return await asyncio.shield(fut)

    @staticmethod
    def _filter(flt: VectorFilter | None) -> Any:
        return translate(flt, dialect())

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
        for pid, vector, payload, sparse in points:
            vec = dense(vector)
            sizes.add(len(vec))
            built.append(qe.Point(canonical_id(pid), point_vectors(vec, sparse, qe.SparseVector), dict(payload)))
        if not built:
            return

        def work() -> None:
            shard = self._require_sync()
            for size in sizes:
                check_dim(self.collection, self._dim, size)
            shard.update(qe.UpdateOperation.upsert_points(built))

        await self._run(work)

    async def set_payload(self, point_id: str, payload: dict) -> None:
        import qdrant_edge as qe

        pid = canonical_id(point_id)
        # overwrite_payload by id raises "No point with id" for a missing point; by filter
        # is a no-op then, which is the contract.
        op = qe.UpdateOperation.overwrite_payload_by_filter(
            qe.Filter(must=[qe.HasIdCondition({pid})]), dict(payload)
        )
        await self._run(lambda: self._require_sync().update(op))

    async def delete(self, point_ids: Sequence[str]) -> None:
        ids = [canonical_id(p) for p in point_ids]
        if not ids:
            return
        import qdrant_edge as qe

        await self._run(lambda: self._require_sync().update(qe.UpdateOperation.delete_points(ids)))

    async def retrieve(self, point_ids: Sequence[str], with_vectors: bool = False) -> list[VectorPoint]:
        ids = list(dict.fromkeys(canonical_id(p) for p in point_ids))
        if not ids:
            return []
        # retrieve() needs both flags positionally, despite the stub's defaults.
        recs = await self._run(lambda: self._require_sync().retrieve(ids, True, bool(with_vectors)))
        by_id = {str(r.id): read_point(r) for r in recs}
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
                check_dim(self.collection, self._dim, dim)
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
                check_dim(self.collection, self._dim, size)
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

        idx, val = sparse_pair(indices, values)
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
            offset=canonical_id(offset) if offset is not None else None,
            limit=int(limit),
            filter=self._filter(flt),
            with_payload=True,
            with_vector=False,
        )
        recs, nxt = await self._run(lambda: self._require_sync().scroll(req))
        return [read_point(r) for r in recs], (str(nxt) if nxt is not None else None)

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
