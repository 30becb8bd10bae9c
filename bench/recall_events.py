"""What publishing a ``memory.recall`` event per recall costs (AUTOMEM_STREAM_RECALL_EVENTS,
automem/recall/activity.py): recall latency over REST with the setting on and off.

Starts ``automem up`` (bench/latency.py ``Service``) on a fresh data dir per run, stores
``--memories`` synthetic memories through ``POST /memory/batch``, waits for enrichment, then
sends ``--recalls`` sequential ``GET /recall`` (a query and a tag filter, ``limit=10``) after
20 warm-up recalls. Runs alternate on/off ``--rounds`` times (on first in even rounds, off
first in odd ones) so drift on a shared machine hits both. Prints p50/p95/p99 in ms per run and the median of each setting.

Usage::

    python bench/recall_events.py --memories 500 --recalls 400 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.latency import Service, build, pct, wait_enriched

WORDS = ["deploy", "friday", "database", "migration", "review", "budget", "design", "release", "incident",
         "customer", "roadmap", "meeting", "python", "latency", "cache", "schema", "backup", "search"]


def bodies(n: int) -> list[dict]:
    """``n`` distinct memories, tagged ``t0``..``t9``."""
    return [{"content": f"note {i}: " + " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9)),
             "tags": [f"t{i % 10}"]} for i in range(n)]


def run(on: bool, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="am-recall-events-") as tmp:
        svc = Service(Path(tmp) / "data", {"AUTOMEM_STREAM_RECALL_EVENTS": "true" if on else "false",
                                           "AUTOMEM_CONSOLIDATION_ENABLED": "false"})
        svc.start()
        try:
            with httpx.Client(base_url=svc.url, timeout=60) as client:
                build(client, bodies(args.memories))
                wait_enriched(client, args.memories, timeout=1800)
                times = []
                for i in range(20 + args.recalls):
                    params = {"query": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]}",
                              "tags": f"t{i % 10}", "limit": 10}
                    t0 = time.perf_counter()
                    client.get("/recall", params=params).raise_for_status()
                    if i >= 20:
                        times.append((time.perf_counter() - t0) * 1000)
        finally:
            svc.stop()
    return {"p50": statistics.median(times), "p95": pct(times, 0.95), "p99": pct(times, 0.99)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=500)
    parser.add_argument("--recalls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for k in range(args.rounds):
        for on in ((True, False) if k % 2 == 0 else (False, True)):
            row = run(on, args)
            results[on].append(row)
            print(f"recall events {'on ' if on else 'off'}: p50 {row['p50']:.2f} ms  p95 {row['p95']:.2f} ms  "
                  f"p99 {row['p99']:.2f} ms", flush=True)
    for on in (True, False):
        rows = results[on]
        print(f"median over runs, events {'on ' if on else 'off'}: "
              f"p50 {statistics.median(r['p50'] for r in rows):.2f} ms  "
              f"p95 {statistics.median(r['p95'] for r in rows):.2f} ms  "
              f"p99 {statistics.median(r['p99'] for r in rows):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
