"""The server backend: the vector store on a Qdrant server through qdrant-client.

The interface and its contract: :mod:`automem.vectors.protocol`; filters are spelled by
:func:`dialect` through the shared translator (:mod:`automem.vectors.filters`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any

from automem.common.telemetry import vector_store_methods
from automem.vectors.filters import Dialect, translate
from automem.vectors.points import canonical_id, check_dim, dense, point_vectors, read_point, sparse_pair
from automem.vectors.protocol import (
    DENSE,
    PAYLOAD_INDEXES,
    SPARSE,
    TRACED,
    DimensionMismatchError,
    PointWrite,
    ScoredPayload,
    SearchRequest,
    VectorFilter,
    VectorPoint,
    span_attributes,
)

__all__ = ["ServerVectorStore", "dialect"]


@functools.cache
def dialect() -> Dialect:
    """qdrant-client's spelling of filter conditions (imported on first use)."""
    from qdrant_client import models as m

    return Dialect(
        value=lambda key, v: m.FieldCondition(key=key, match=m.MatchValue(value=v)),
        any=lambda key, values: m.FieldCondition(key=key, match=m.MatchAny(any=values)),
        range=lambda key, bounds: m.FieldCondition(key=key, range=m.Range(**bounds)),
        has_id=lambda ids: m.HasIdCondition(has_id=ids),
        filter=lambda must, must_not: m.Filter(must=must, must_not=must_not),
    )


@vector_store_methods(TRACED, span_attributes)
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
        return translate(flt, dialect())

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
        for pid, vector, payload, sparse in points:
            vec = dense(vector)
            check_dim(self.collection, self._dim, len(vec))
            vectors = point_vectors(vec, sparse, lambda i, v: m.SparseVector(indices=i, values=v))
            built.append(m.PointStruct(id=canonical_id(pid), vector=vectors, payload=dict(payload)))
        if built:
            await self.client.upsert(self.collection, points=built, wait=True)

    async def set_payload(self, point_id: str, payload: dict) -> None:
        from qdrant_client import models as m

        # By filter, so a missing point is a no-op (by id, local mode raises KeyError).
        await self.client.overwrite_payload(
            self.collection,
            payload=dict(payload),
            points=m.FilterSelector(filter=m.Filter(must=[m.HasIdCondition(has_id=[canonical_id(point_id)])])),
            wait=True,
        )

    async def delete(self, point_ids: Sequence[str]) -> None:
        from qdrant_client import models as m

        ids = [canonical_id(p) for p in point_ids]
        if ids:
            await self.client.delete(self.collection, points_selector=m.PointIdsList(points=ids), wait=True)

    async def retrieve(self, point_ids: Sequence[str], with_vectors: bool = False) -> list[VectorPoint]:
        ids = list(dict.fromkeys(canonical_id(p) for p in point_ids))
        if not ids:
            return []
        recs = await self.client.retrieve(
            self.collection, ids=ids, with_payload=True, with_vectors=bool(with_vectors)
        )
        by_id = {canonical_id(r.id): read_point(r, canonical_id) for r in recs}
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
        return [(canonical_id(p.id), float(p.score)) for p in res.points]

    async def search(
        self, vector: Sequence[float], limit: int, flt: VectorFilter | None = None
    ) -> list[tuple[str, float]]:
        vec = [float(x) for x in vector]
        check_dim(self.collection, self._dim, len(vec))
        return await self._query(vec, DENSE, limit, flt)

    async def search_many(self, requests: Sequence[SearchRequest],
                          payload_keys: Sequence[str] | None = None) -> list[list[ScoredPayload]]:
        from qdrant_client import models as m

        with_payload = list(payload_keys) if payload_keys is not None else True

        out: list[list[ScoredPayload]] = [[] for _ in requests]
        asks: list[tuple[int, Any]] = []
        for i, (vector, limit, flt) in enumerate(requests):
            vec = [float(x) for x in vector]
            check_dim(self.collection, self._dim, len(vec))
            if limit > 0 and not (flt is not None and flt.matches_nothing):
                asks.append((i, m.QueryRequest(query=vec, using=DENSE, limit=int(limit), filter=self._filter(flt),
                                               with_payload=with_payload, with_vector=False)))
        if asks:
            results = await self.client.query_batch_points(self.collection, requests=[r for _, r in asks])
            for (i, _), res in zip(asks, results, strict=True):
                out[i] = [(canonical_id(p.id), float(p.score), dict(p.payload or {})) for p in res.points]
        return out

    async def search_sparse(
        self,
        indices: Sequence[int],
        values: Sequence[float],
        limit: int,
        flt: VectorFilter | None = None,
    ) -> list[tuple[str, float]]:
        from qdrant_client import models as m

        idx, val = sparse_pair(indices, values)
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
            offset=canonical_id(offset) if offset is not None else None,
            with_payload=True,
            with_vectors=False,
        )
        return [read_point(r, canonical_id) for r in recs], (canonical_id(nxt) if nxt is not None else None)

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
