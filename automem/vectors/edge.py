"""The embedded backend: the vector store on an in-process qdrant-edge shard.

The interface and its contract: :mod:`automem.vectors.protocol`; filters are spelled by
:func:`dialect` through the shared translator (:mod:`automem.vectors.filters`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import json
import logging
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from automem.common.errors import HeldElsewhereError
from automem.common.telemetry import vector_store_methods
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

log = logging.getLogger(__name__)


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

#: ``Settings.vector_datatype`` -> qdrant-edge's ``VectorStorageDatatype`` member (the dense
#: vector's storage; the spelling in ``edge_config.json`` is the key).
DATATYPES = {"float16": "Float16", "float32": "Float32"}


async def _copy_sparse(src: Path, dst: Path) -> None:
    """Copy the directory ``src`` to ``dst`` keeping holes: qdrant-edge preallocates its WAL
    and mmap files sparsely (a 5,000-point shard is 20 MB on disk and 267 MB apparent), and
    ``shutil.copytree`` would write every hole out as zeros. GNU ``cp -a --sparse=always``.

    Raises:
        RuntimeError: ``cp`` failed (its stderr in the message).
    """
    proc = await asyncio.create_subprocess_exec("cp", "-a", "--sparse=always", str(src), str(dst),
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"copy of {src} to {dst} failed: {err.decode(errors='replace').strip()}")


async def _to_the_end(step: Awaitable[T]) -> T:
    """Await ``step`` (work running in a thread); when the caller is cancelled meanwhile,
    wait until the step has ended before the cancellation goes on.

    A thread cannot be stopped: a build cancelled by :meth:`EdgeVectorStore.close` while its
    thread renamed ``<dir>.indexing`` into place or wrote into the new shard would otherwise
    run its clean-up (deleting ``<dir>.indexing``, closing the new shard) under that work.
    A step not started yet still runs (the swap then completes: the store stays one whole
    shard either way, see the class docstring)."""
    future = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([future])
        if not future.cancelled():
            future.exception()  # retrieved: the cancellation is what the caller gets
        raise


@vector_store_methods(TRACED, span_attributes)
class EdgeVectorStore:
    """Vector store on an in-process qdrant-edge shard (``qdrant_edge.EdgeShard``).

    ``path`` is the shard directory itself (``Settings.qdrant_path``, which already ends in
    the collection name); ``collection`` only names the store in errors; ``datatype``
    (``float16`` or ``float32``, else ValueError) is the dense vectors' storage in a shard
    this store creates (``Settings.vector_datatype``; an existing shard keeps its own). The shard is created
    by :meth:`ensure_collection` (``EdgeShard.create``) and otherwise opened lazily with
    ``EdgeShard.load`` on first use. Every blocking shard call runs in the store's own worker
    thread, one at a time in the order made (:meth:`_run`). Only one process may open a shard
    directory. Before the shard exists, data calls raise :class:`CollectionMissingError`;
    after :meth:`close`, every call raises ``RuntimeError``.

    **HNSW in the background** (``index_threshold`` > 0): points land in a flat (unindexed)
    segment, whose search cost grows linearly (15 ms at 100,000 × 384 on the project machine)
    and whose HNSW build, ``EdgeShard.optimize()``, holds the GIL for minutes. Once
    ``index_threshold`` points have been written since the last build, :meth:`build_index`
    (or a quarter of the shard's points at the last build, when more) copies the shard (writes
    wait during the copy; reads go on), builds the index of the copy
    in a child process (automem/vectors/indexer.py), replays onto it every write made in the
    meantime and swaps it in, in the shard's thread (writes and reads wait for about a second). The
    swap is crash-safe: the copy is complete (replayed and flushed) before ``<dir>`` is renamed
    to ``<dir>.old`` and ``<dir>.indexing`` to ``<dir>``; on open, a leftover ``<dir>.old``
    is restored when ``<dir>`` is missing and deleted otherwise, and a leftover
    ``<dir>.indexing`` is deleted. The number of points at the last build is kept in
    ``<dir>.index.json``, so a restart on a large unindexed shard starts a build.
    """

    backend = "edge"

    def __init__(self, path: Path | str, collection: str = "memories", *, index_threshold: int = 0,
                 datatype: str = "float16") -> None:
        if datatype not in DATATYPES:
            raise ValueError(f"datatype must be one of {sorted(DATATYPES)}, got {datatype!r}")
        self.path = Path(path)
        self.collection = collection
        self.index_threshold = max(0, int(index_threshold))
        self.datatype = datatype
        self._shard: Any = None
        self._dim: int | None = None
        self._closed = False
        #: The one thread every shard call runs in, in the order made (:meth:`_run`).
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="qdrant-edge")
        # Writes take the gate first (then the shard's thread), so a copy of the shard sees no write
        # while reads carry on; ops applied during a build are logged for the replay.
        self._write_gate = asyncio.Lock()
        self._replay: list[Any] | None = None
        self._build_task: asyncio.Task | None = None
        self._since_build: int | None = None  # points written since the last build (None: unknown yet)
        self._built_points = 0  # points in the shard when the last build copied it
        self.index_builds = 0
        self.last_build: dict[str, float] = {}

    # -- paths of the background index build ------------------------------------------------

    @property
    def _building_path(self) -> Path:
        return self.path.with_name(self.path.name + ".indexing")

    @property
    def _old_path(self) -> Path:
        return self.path.with_name(self.path.name + ".old")

    @property
    def _marker_path(self) -> Path:
        return self.path.with_name(self.path.name + ".index.json")

    def _recover_swap(self) -> None:
        """Finish or undo a swap interrupted by a crash (see the class docstring)."""
        if self._old_path.exists():
            if self.path.exists():
                shutil.rmtree(self._old_path, ignore_errors=True)
            else:
                self._old_path.rename(self.path)
                log.warning("vector index swap was interrupted; restored %s", self.path)
        if self._building_path.exists():
            shutil.rmtree(self._building_path, ignore_errors=True)

    def _points_at_last_build(self) -> int:
        try:
            return int(json.loads(self._marker_path.read_text())["points"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

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
        """Open (load) the shard if it exists; ``None`` if there is none. In the shard's thread."""
        if self._closed:
            raise RuntimeError(f"vector store {self.collection!r} is closed")
        if self._shard is None:
            self._recover_swap()
        if self._shard is None and self._exists():
            import qdrant_edge as qe

            try:
                self._shard = qe.EdgeShard.load(str(self.path))
            except Exception as exc:
                if "WouldBlock" in str(exc):  # its WAL is locked: another process has it open
                    raise HeldElsewhereError(
                        f"the embedded vector shard {self.path} is open in another process (one process "
                        "per shard): give each process its own AUTOMEM_DATA_DIR, or set QDRANT_URL to a "
                        f"Qdrant server both use (or 'disabled'); {exc}") from None
                raise
            if self._since_build is None:
                self._built_points = self._points_at_last_build()
                self._since_build = max(0, self._shard.info().points_count - self._built_points)
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
        """Run ``fn`` in the store's worker thread, after the calls made before it.

        The calls queue in the thread's executor, not on the event loop: a call that
        finishes starts the next at once. Behind an ``asyncio.Lock`` each hand-over waited
        for a turn of the event loop, so under load the shard served one call per turn
        and its callers queued past the store bound (docs/benchmarks.md, "The shard's
        calls queue in its own thread"). A caller that is cancelled (e.g. by the store
        bound, automem/vectors/bounded.py) returns at once: a call not started yet is
        dropped, one running finishes in the thread before the next starts.

        Raises:
            RuntimeError: the store is closed (its thread has stopped).
        """
        try:
            # In the caller's context, as asyncio.to_thread runs it (the span, for logs).
            future = self._executor.submit(contextvars.copy_context().run, fn)
        except RuntimeError as exc:  # submit after shutdown
            if self._closed:
                raise RuntimeError(f"vector store {self.collection!r} is closed") from exc
            raise
        return await asyncio.wrap_future(future)

    @staticmethod
    def _filter(flt: VectorFilter | None) -> Any:
        return translate(flt, dialect())

    async def _update(self, op: Any, check: Callable[[], None] | None = None, points: int = 0) -> None:
        """Apply one ``UpdateOperation`` (after ``check``, in the worker thread); log it for
        the replay when a build is running; count ``points`` towards the next build."""

        def work() -> None:
            shard = self._require_sync()
            if check is not None:
                check()
            shard.update(op)
            # logged here, in the shard's thread, so a write whose caller gave up
            # (cancelled while the thread ran) is still replayed onto a shard being built
            if self._replay is not None:
                self._replay.append(op)

        async with self._write_gate:
            await self._run(work)
        if points:
            self._since_build = (self._since_build or 0) + points
            self._maybe_build()

    def _maybe_build(self) -> None:
        """Start :meth:`build_index` in the background when ``index_threshold`` points were
        written since the last build and none is running."""
        if (self.index_threshold <= 0 or self._closed or self._since_build is None
                or self._since_build < self._next_build_at()
                or (self._build_task is not None and not self._build_task.done())):
            return
        self._build_task = asyncio.get_running_loop().create_task(self._build_logged(), name="vector-index-build")

    def _next_build_at(self) -> int:
        """Writes since the last build that start the next one: ``index_threshold``, or a
        quarter of the points at the last build when that is more — each build re-indexes the
        whole shard (a copy of 120,000 points took 102 s in the child, measured with
        automem/vectors/indexer.py), so builds grow geometrically apart and the flat part
        stays under a fifth of the shard."""
        return max(self.index_threshold, self._built_points // 4)

    async def _build_logged(self) -> None:
        try:
            await self.build_index()
        except asyncio.CancelledError:
            raise
        except Exception:  # the old shard keeps serving; a later write starts the next try
            log.exception("vector index build failed; the shard keeps its flat segments")

    async def build_index(self) -> dict[str, float]:
        """Build the HNSW index of the whole shard without stopping reads; see the class
        docstring for the steps and their crash safety.

        Returns:
            the child's report (automem/vectors/indexer.py) plus ``replayed`` (writes made
            during the build and applied to the new shard), ``seconds`` (wall time of the
            whole build) and the wall seconds of its steps: ``copy_seconds`` (writes wait),
            ``child_seconds``, ``load_replay_seconds`` (nothing waits), ``finish_seconds``
            (the last writes applied to the new shard and flushed: writes wait) and
            ``swap_seconds`` (the old shard closed, the directories renamed, the new one
            loaded: reads and writes wait).

        Raises:
            CollectionMissingError: there is no shard yet.
            RuntimeError: the child failed (the current shard is kept, the copy deleted).
        """
        import qdrant_edge as qe

        started = time.perf_counter()
        building = self._building_path
        async with self._write_gate:
            await self._run(lambda: self._require_sync().flush())
            points_at_copy = (await self._run(lambda: self._require_sync().info())).points_count
            await asyncio.to_thread(shutil.rmtree, building, True)
            await _copy_sparse(self.path, building)
            self._replay = []
            self._since_build = 0
        steps = {"copy_seconds": time.perf_counter() - started}
        new_shard: Any = None
        proc: asyncio.subprocess.Process | None = None
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "automem.vectors.indexer", str(building),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"index build of {building} failed: {err.decode(errors='replace').strip()}")
            report = json.loads(out.decode().strip().splitlines()[-1])
            steps["child_seconds"] = time.perf_counter() - started - steps["copy_seconds"]
            mark = time.perf_counter()
            new_shard = await _to_the_end(asyncio.to_thread(qe.EdgeShard.load, str(building)))
            done = 0
            while len(self._replay) - done > 64:  # most of the replay without blocking writes
                batch = self._replay[done:]
                await _to_the_end(asyncio.to_thread(lambda b=batch: [new_shard.update(op) for op in b]))
                done += len(batch)
            steps["load_replay_seconds"] = time.perf_counter() - mark
            async with self._write_gate:
                mark = time.perf_counter()

                def take_rest() -> list[Any]:
                    rest = self._replay[done:]  # in the shard's thread: no write is running
                    self._replay = None
                    return rest

                rest = await _to_the_end(self._run(take_rest))

                def finish_new() -> None:
                    # Writes wait at the gate; reads go on against the current shard.
                    nonlocal new_shard
                    shard, new_shard = new_shard, None  # closed here, whatever happens
                    try:
                        for op in rest:
                            shard.update(op)
                        shard.flush()
                    finally:
                        shard.close()

                await _to_the_end(asyncio.to_thread(finish_new))
                steps["finish_seconds"] = time.perf_counter() - mark
                mark = time.perf_counter()

                def swap() -> None:
                    old = self._shard
                    self._shard = None
                    if old is not None:
                        old.flush()
                        old.close()
                    self.path.rename(self._old_path)
                    building.rename(self.path)
                    # Not _open_sync: its recovery would delete <dir>.old (the
                    # same dimension and counters; a crash from here on: _recover_swap deletes it).
                    self._shard = qe.EdgeShard.load(str(self.path))

                await _to_the_end(self._run(swap))
                replayed = done + len(rest)
                steps["swap_seconds"] = time.perf_counter() - mark
            await asyncio.to_thread(shutil.rmtree, self._old_path, True)  # nothing waits for this
            self._marker_path.write_text(json.dumps({"points": points_at_copy}))
            self._built_points = points_at_copy
        finally:
            self._replay = None
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            if new_shard is not None:
                with contextlib.suppress(Exception):
                    new_shard.close()
            if building.exists():
                await asyncio.to_thread(shutil.rmtree, building, True)
        self.index_builds += 1
        self.last_build = {**report, "replayed": replayed, "seconds": round(time.perf_counter() - started, 3),
                           **{k: round(v, 3) for k, v in steps.items()}}
        log.info("vector index built: %s", self.last_build)
        return self.last_build

    def index_status(self) -> dict[str, Any]:
        """``{"threshold", "building", "builds", "points_since_build", "last_build"}`` for
        ``/health`` and the benchmarks."""
        return {"threshold": self.index_threshold, "next_build_at": self._next_build_at(),
                "building": self._build_task is not None and not self._build_task.done(),
                "builds": self.index_builds, "points_since_build": self._since_build,
                "last_build": dict(self.last_build)}

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
                    vectors={DENSE: qe.EdgeVectorParams(size=dimension, distance=qe.Distance.Cosine,
                                                        datatype=getattr(qe.VectorStorageDatatype,
                                                                         DATATYPES[self.datatype]))},
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

        async with self._write_gate:
            await self._run(work)
        self._maybe_build()

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

        def check() -> None:
            for size in sizes:
                check_dim(self.collection, self._dim, size)

        await self._update(qe.UpdateOperation.upsert_points(built), check, points=len(built))

    async def set_payload(self, point_id: str, payload: dict) -> None:
        import qdrant_edge as qe

        pid = canonical_id(point_id)
        # overwrite_payload by id raises "No point with id" for a missing point; by filter
        # is a no-op then, which is the contract.
        op = qe.UpdateOperation.overwrite_payload_by_filter(
            qe.Filter(must=[qe.HasIdCondition({pid})]), dict(payload)
        )
        await self._update(op)

    async def delete(self, point_ids: Sequence[str]) -> None:
        ids = [canonical_id(p) for p in point_ids]
        if not ids:
            return
        import qdrant_edge as qe

        await self._update(qe.UpdateOperation.delete_points(ids))

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

        task, self._build_task = self._build_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if not self._closed:
            try:
                await self._run(work)
            finally:  # also when this close is cancelled: the thread ends after its last call
                self._executor.shutdown(wait=False)
