"""Build the HNSW index of a copy of the embedded shard, in a process of its own.

``python -m automem.vectors.indexer DIR`` loads the qdrant-edge shard at ``DIR`` (a copy the
serving process made, automem/vectors/edge.py :meth:`EdgeVectorStore.build_index`), runs its
segment optimizers until none is planned — which builds the dense HNSW graph of every
segment — flushes and closes it, then prints one JSON line::

    {"points": 100000, "indexed_vectors": 200000, "segments": 2, "seconds": 118.4}

and exits 0 (1 with the error on stderr when the shard cannot be loaded or optimized).

Why a process: ``EdgeShard.optimize()`` holds the GIL for the whole build (measured: a
spinning Python thread got 31,285 iterations in 317 s of optimize at 100,000 × 384, against
~5 M per second otherwise; docs/benchmarks.md), so in the serving process it would stop every
request for minutes. The child runs at a lower CPU priority (``nice`` +10) so recall keeps
its share of the two cores.

``indexing_threshold`` is set to 1 KB on the copy: qdrant-edge's default (about 10 MB of
vectors) leaves segments smaller than that as flat scans, and the serving process only asks
for a build once enough unindexed points have accumulated to be worth one
(``Settings.vector_index_threshold``).
"""

from __future__ import annotations

import json
import os
import sys
import time

__all__ = ["main", "optimize_copy"]


def optimize_copy(path: str) -> dict[str, float]:
    """Load the shard at ``path``, optimize it (HNSW for every segment), flush and close it.

    Returns:
        ``{"points", "indexed_vectors", "segments", "seconds"}`` after the build; seconds is
        the wall time of ``optimize()``.

    Raises:
        whatever qdrant-edge raises for a directory that holds no loadable shard.
    """
    import qdrant_edge as qe

    shard = qe.EdgeShard.load(path)
    try:
        cfg = json.loads(open(os.path.join(path, "edge_config.json")).read())  # noqa: SIM115
        cfg_obj = _config_with_low_threshold(qe, cfg)
        if cfg_obj is not None:
            shard.close()
            shard = qe.EdgeShard.load(path, cfg_obj)
        start = time.perf_counter()
        shard.optimize()
        seconds = time.perf_counter() - start
        shard.flush()
        info = shard.info()
        return {"points": info.points_count, "indexed_vectors": info.indexed_vectors_count,
                "segments": info.segments_count, "seconds": round(seconds, 3)}
    finally:
        shard.close()


def _config_with_low_threshold(qe, cfg: dict):
    """The shard's own config with ``indexing_threshold`` 1 KB, or None if it cannot be rebuilt
    from ``edge_config.json`` (then the shard's config is used as it is)."""
    try:
        vectors = {name: qe.EdgeVectorParams(size=int(v["size"]), distance=getattr(qe.Distance, v["distance"]),
                                             datatype=_datatype(qe, v.get("datatype")))
                   for name, v in cfg.get("vectors", {}).items()}
        sparse = {}
        for name, v in cfg.get("sparse_vectors", {}).items():
            modifier = v.get("modifier")
            sparse[name] = qe.EdgeSparseVectorParams(
                modifier=qe.Modifier.Idf if str(modifier).lower() == "idf" else None)
        return qe.EdgeConfig(vectors=vectors, sparse_vectors=sparse or None,
                             optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _datatype(qe, spelled: str | None):
    """qdrant-edge's ``VectorStorageDatatype`` for its ``edge_config.json`` spelling
    (``"float16"``, ``"uint8"``, ...; absent = float32, the default). The copy must be loaded
    with the type its segments were written with: qdrant-edge refuses any other."""
    if not spelled:
        return None
    members = {name.lower(): getattr(qe.VectorStorageDatatype, name)
               for name in dir(qe.VectorStorageDatatype) if not name.startswith("_")}
    return members[str(spelled).lower()]


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m automem.vectors.indexer DIR``; see the module docstring."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m automem.vectors.indexer SHARD_DIR", file=sys.stderr)
        return 2
    try:
        os.nice(10)
    except OSError:
        pass
    try:
        report = optimize_copy(args[0])
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which keeps the old shard
        print(f"index build failed: {exc!r}", file=sys.stderr)
        return 1
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
