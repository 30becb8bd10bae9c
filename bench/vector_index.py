"""Dense search on the embedded shard before, during and after its background HNSW build.

Fills an :class:`automem.vectors.EdgeVectorStore` with N random unit vectors (384-d, the
MiniLM size) and recall-shaped payloads, then measures the dense search recall issues (limit
100, filter on scope, state and event-time window: automem/recall/filters.py) three times:

* ``flat``: before any build — a scan of every point;
* ``during``: while :meth:`EdgeVectorStore.build_index` runs (copy, the child process of
  automem/vectors/indexer.py, replay, swap), with a writer upserting 50 points/s, so the
  numbers show reads and writes going on while the index is built;
* ``hnsw``: after the swap.

Prints one line per phase (median / p95 / max ms, searches) and the build report, and writes
JSON with ``--json-out``. Usage::

    python bench/vector_index.py --n 100000 --json-out bench/out/vector_index.json
    python bench/vector_index.py --n 20000 --datatype float32   # full-precision storage
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from automem.vectors import EdgeVectorStore, VectorFilter

DIM = 384


def _payload(i: int) -> dict:
    return {"scope": "bench", "state": "active", "event_time": 1.7e9 + i, "valid_from": 0.0,
            "valid_to": 4.0e9, "tags_lower": [f"set-{i % 10}"], "tag_prefixes": [f"set-{i % 10}"]}


def _stats(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ms = sorted(s * 1000 for s in samples)
    return {"n": len(ms), "p50": round(statistics.median(ms), 2),
            "p95": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2), "max": round(ms[-1], 2)}


async def _searches(store: EdgeVectorStore, queries: np.ndarray, flt: VectorFilter, count: int | None,
                    until: asyncio.Task | None = None) -> list[float]:
    out, i = [], 0
    while (count is not None and i < count) or (until is not None and not until.done()):
        q = queries[i % len(queries)]
        t = time.perf_counter()
        await store.search(q.tolist(), 100, flt)
        out.append(time.perf_counter() - t)
        i += 1
        if until is not None:
            await asyncio.sleep(0.02)
    return out


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="points in the shard")
    ap.add_argument("--searches", type=int, default=200, help="searches before and after the build")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a temp dir, removed)")
    ap.add_argument("--datatype", default="float16", choices=["float16", "float32"],
                    help="storage of the dense vectors (Settings.vector_datatype)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args()

    work = args.dir or Path(tempfile.mkdtemp(prefix="vector-index-"))
    rng = np.random.default_rng(0)
    store = EdgeVectorStore(work / "shard", "memories", datatype=args.datatype)  # builds only when asked
    try:
        await store.ensure_collection(DIM)
        t0 = time.perf_counter()
        for s in range(0, args.n, 2000):
            block = rng.standard_normal((min(2000, args.n - s), DIM)).astype(np.float32)
            await store.upsert_many([(str(uuid.UUID(int=s + k + 1)), v.tolist(), _payload(s + k), None)
                                     for k, v in enumerate(block)])
        fill = time.perf_counter() - t0
        queries = rng.standard_normal((64, DIM)).astype(np.float32)
        flt = VectorFilter(scope="bench", states=["active"], event_time_gte=1.7e9, event_time_lte=1.7e9 + args.n)
        flat = await _searches(store, queries, flt, args.searches)

        build = asyncio.create_task(store.build_index())

        async def writer() -> int:
            n = 0
            while not build.done():
                i = args.n + n
                await store.upsert(str(uuid.UUID(int=i + 1)), rng.standard_normal(DIM).tolist(), _payload(i))
                n += 1
                await asyncio.sleep(0.02)
            return n

        during, written = await asyncio.gather(_searches(store, queries, flt, None, until=build), writer())
        report = await build
        hnsw = await _searches(store, queries, flt, args.searches)
        count = await store.count()
        result = {"n": args.n, "datatype": args.datatype, "fill_seconds": round(fill, 1), "flat": _stats(flat),
                  "during": _stats(during), "hnsw": _stats(hnsw), "build": report, "written_during_build": written,
                  "points_after": count, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    finally:
        await store.close()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    for phase in ("flat", "during", "hnsw"):
        print(f"{phase:7s} {result[phase]}")
    print("build  ", result["build"], "| written during it:", result["written_during_build"],
          "| points after:", result["points_after"])
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
