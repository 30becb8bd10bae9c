"""Where a recall's time goes, phase by phase, on a kept data dir (e.g. one built by
``bench/latency.py --data-dir``).

Starts the data dir's own nats-server and FalkorDB, runs the recall target in this process
(no gateway), wraps the graph, vector and embedding calls with wall-clock timers, asks the
LoCoMo questions over gRPC and prints ms per recall for each phase (a line includes the
calls nested in it: ``graph.ro_query`` also counts the candidate and hydration reads).

Usage::

    python bench/recall_phases.py /var/tmp/am100q/n100000 --mode query --n 100
    python bench/recall_phases.py /var/tmp/am100q/n100000 --mode tag --n 100

``--known-at-ago S`` reads at ``known_at`` = now - S seconds (the versions path).
``--gc-threshold A,B,C`` runs with ``gc.set_threshold(A, B, C)`` (default: Python's). The
line ``gc`` is the collector's own time during the timed recalls (``gc.callbacks``), with the
collections per generation. ``--searches-alone`` then times the recalls' vector searches again,
one at a time with nothing else running (same queries, filters and pool size; medians).

Modes: ``query`` (no filter), ``query_tag`` (query + the ``set-k`` tag bench/latency.py
gives each copy), ``tag`` (listing by tag), ``none`` (newest first). The service must not be
running on the data dir (qdrant-edge opens a shard in one process only).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from latency import locomo_export

from bench.locomo_files import DATA


class Timers:
    """Wall time and call counts per label."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = collections.defaultdict(float)
        self.calls: collections.Counter[str] = collections.Counter()

    def wrap(self, obj: Any, name: str, label: str) -> None:
        fn = getattr(obj, name)
        if asyncio.iscoroutinefunction(fn):
            async def timed(*a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await fn(*a, **k)
                finally:
                    self.wall[label] += time.perf_counter() - t0
                    self.calls[label] += 1
        else:
            def timed(*a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    self.wall[label] += time.perf_counter() - t0
                    self.calls[label] += 1
        setattr(obj, name, timed)

    def clear(self) -> None:
        self.wall.clear()
        self.calls.clear()


class GcTimer:
    """The cyclic collector's wall time and collections per generation, while ``on``."""

    def __init__(self) -> None:
        self.on = False
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start
            self.collections[info["generation"]] += 1


async def searches_alone(plain: dict[str, Any], calls: list[tuple[str, tuple, dict]]) -> dict[str, float]:
    """Median ms per call of the recorded vector searches, replayed one at a time through the
    store's own (untimed) methods ``plain``."""
    times: dict[str, list[float]] = collections.defaultdict(list)
    for name, args, kwargs in calls:
        t0 = time.perf_counter()
        await plain[name](*args, **kwargs)
        times[name].append(time.perf_counter() - t0)
    return {name: 1000 * statistics.median(v) for name, v in times.items()}


async def run(data_dir: Path, mode: str, n: int, questions: list[str], turns: int, known_at_ago: float = 0.0,
              alone: bool = False) -> None:
    from automem.common.client import AutomemClient
    from automem.common.embedded import EmbeddedFalkorDB, EmbeddedNats
    from automem.common.settings import Settings
    from automem.runner import Runner

    nats = EmbeddedNats(data_dir)
    await nats.start()
    fdb = EmbeddedFalkorDB(data_dir)
    await fdb.start()
    settings = Settings(data_dir=data_dir, nats_url=nats.url, falkordb_host=fdb.host, falkordb_port=fdb.port,
                        port=0, grpc_port=0)
    runner = Runner(settings, ["recall"])
    ctx = await runner.start()
    timers = Timers()
    try:
        count = await ctx.graph.memories.count()
        sets = max(1, -(-count // turns))  # bench/latency.py: copy k is tagged set-k
        for name in ("recall_candidates", "hydrate_with_successors", "unembedded"):
            timers.wrap(ctx.graph.memories, name, "graph.memories." + name)
        timers.wrap(ctx.graph, "ro_query", "graph.ro_query")
        plain = {name: getattr(ctx.vectors, name) for name in ("search", "search_sparse")} if ctx.vectors else {}
        if ctx.vectors is not None:
            for name in ("search", "search_sparse", "newest_event_time"):
                timers.wrap(ctx.vectors, name, "vectors." + name)
        if ctx.embedder is not None:
            timers.wrap(ctx.embedder, "embed", "embed")
        import automem.recall.servicer as recall_servicer
        timers.wrap(recall_servicer, "rank", "rank")
        recorded: list[tuple[str, tuple, dict]] = []
        if alone and ctx.vectors is not None:
            def recording(name: str, fn: Any) -> Any:
                def record(*a: Any, **k: Any) -> Any:
                    recorded.append((name, a, k))
                    return fn(*a, **k)
                return record
            for name in ("search", "search_sparse"):
                setattr(ctx.vectors, name, recording(name, getattr(ctx.vectors, name)))
        gc_timer = GcTimer()
        rng = random.Random(1)
        async with AutomemClient.connect(f"127.0.0.1:{ctx.grpc_port}") as client:
            async def one(i: int) -> int:
                kw: dict[str, Any] = {}
                if "tag" in mode:
                    kw = {"tags": [f"set-{rng.randrange(sets)}"], "tag_match": "exact"}
                if known_at_ago > 0:  # the past path: versions believed then (automem/graph/versions.py)
                    from automem.common.model import ts
                    from automem.v1 import recall_service_pb2

                    kw["read"] = recall_service_pb2.ReadOptions(known_at=ts(time.time() - known_at_ago))
                r = await client.search(questions[i % len(questions)] if "query" in mode else "", limit=20, **kw)
                return len(r.results)
            got = [await one(i) for i in range(10)]  # warm-up
            timers.clear()
            recorded.clear()
            gc_timer.on = True
            t0, c0 = time.perf_counter(), time.process_time()
            for i in range(n):
                await one(i)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            gc_timer.on = False
        alone_ms = await searches_alone(plain, recorded) if recorded else {}
    finally:
        await runner.stop()
        await fdb.stop()
        await nats.stop()
    print(f"{mode}: {n} recalls (warm-up answers had {min(got)}-{max(got)} results), "
          f"wall {1000 * wall / n:.1f} ms/recall, process CPU {1000 * cpu / n:.1f} ms/recall")
    for label, total in sorted(timers.wall.items(), key=lambda kv: -kv[1]):
        print(f"  {label:38s} {1000 * total / n:7.2f} ms/recall  ({timers.calls[label] / n:.1f} calls)")
    print(f"  {'gc':38s} {1000 * gc_timer.seconds / n:7.2f} ms/recall  (collections per generation "
          f"{gc_timer.collections}, threshold {gc.get_threshold()})")
    for name, ms in alone_ms.items():
        print(f"  {'vectors.' + name + ' alone':38s} {ms:7.2f} ms/call (median, one at a time)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", help="a data dir the service built (not running)")
    parser.add_argument("--mode", default="query", choices=("query", "query_tag", "tag", "none"))
    parser.add_argument("--n", type=int, default=100, help="recalls to time")
    parser.add_argument("--data", default=str(DATA), help="LoCoMo conversations (locomo_public.json)")
    parser.add_argument("--known-at-ago", type=float, default=0.0,
                        help="seconds: read at known_at = now minus this (0 = no known_at, the default path)")
    parser.add_argument("--gc-threshold", default="", metavar="A,B,C",
                        help="gc.set_threshold(A, B, C) before the run (default: Python's, 700,10,10)")
    parser.add_argument("--searches-alone", action="store_true",
                        help="then replay the recalls' vector searches one at a time")
    args = parser.parse_args()
    if args.gc_threshold:
        gc.set_threshold(*(int(x) for x in args.gc_threshold.split(",")))
    data_dir = Path(args.data_dir)
    if not (data_dir / "falkordb").is_dir():
        parser.error(f"{data_dir} holds no falkordb/ directory: not a data dir the service built")
    turns, questions = locomo_export(Path(args.data), ROOT / "bench" / "out")
    asyncio.run(run(data_dir, args.mode, args.n, [q["question"] for q in questions], len(turns),
                    args.known_at_ago, args.searches_alone))
    return 0


if __name__ == "__main__":
    sys.exit(main())
