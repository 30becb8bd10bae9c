"""Latency and scale benchmark: recall p50/p95/p99 at N memories, over REST and gRPC.

For each size N it builds a store of N memories *through the service's own write path*
(``POST /memory/batch``, 500 per call) from the LoCoMo turns, perturbed so every copy is a
distinct memory (another speaker name, one word dropped, two words swapped, the date moved
by whole days); copy ``k`` of the conversations carries the tag ``set-k`` besides the
conversation id and session, so a tag filter selects ~1,451 memories whatever N is. It waits
until enrichment finished (every memory has its vector point), then measures:

* recall latency over REST and gRPC, with and without a tag filter, with and without a query
  (the LoCoMo questions, ``limit=20``), sequential: p50/p95/p99 in ms;
* throughput at ``--clients`` concurrent REST clients (recalls/s, p50/p95);
* ingest accepted/s (the batch stores) and enrichment memories/s (first store until every
  vector exists);
* restart time: SIGTERM, then ``automem up`` on the same data dir until ``/health`` answers
  and a recall answers;
* RSS of the whole process tree (``automem up`` and its children: nats-server, redis-server).

Usage::

    python bench/latency.py --n 1000,10000            # temp data dirs, removed afterwards
    python bench/latency.py --n 100000 --data-dir /var/tmp/am100k   # kept; a rerun reuses it
    python bench/latency.py --n 10000 --json-out bench/out/latency.json

Prints one table row per size and configuration and writes JSON (``--json-out``).
Needs the LoCoMo conversations and the referee that exports them (``--data``, ``--referee``;
defaults and where to get them: bench/locomo_files.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files

NAMES = ["Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Harper", "Jordan", "Kendall", "Logan",
         "Morgan", "Parker", "Quinn", "Riley", "Rowan", "Sawyer", "Skyler", "Taylor", "Reese", "Hayden"]


# --- data --------------------------------------------------------------------------------

def locomo_export(data: Path, out: Path, referee: Path = locomo_files.REFEREE) -> tuple[list[dict], list[dict]]:
    """(turns, questions) of the referee's export of ``data`` (written once into ``out``).
    SystemExit naming the file when ``data`` or (for a first export) ``referee`` is missing."""
    locomo_files.require_data(data)
    export = out / "export"
    if not (export / "memories.jsonl").exists():
        subprocess.run([sys.executable, str(locomo_files.require_referee(referee)), str(data), "--export", str(export), "--quiet"], check=True,
                       stdout=subprocess.DEVNULL)
    turns = [json.loads(line) for line in (export / "memories.jsonl").open()]
    questions = [json.loads(line) for line in (export / "queries.jsonl").open()]
    return turns, questions


def perturbed(turns: list[dict], n: int, seed: int = 7) -> list[dict]:
    """``n`` store bodies: copy 0 is the turns as they are, copy k > 0 has the speaker renamed,
    one word dropped, two neighbouring words swapped and the date moved k days back."""
    rng = random.Random(seed)
    out: list[dict] = []
    k = 0
    while len(out) < n:
        for t in turns:
            if len(out) >= n:
                break
            content = t["content"]
            ts = t["timestamp"]
            if k:
                words = content.split()
                speaker = t.get("speaker") or ""
                if speaker:
                    words = [NAMES[(k + i) % len(NAMES)] if w.strip(":,.") == speaker else w
                             for i, w in enumerate(words)]
                if len(words) > 4:
                    del words[rng.randrange(1, len(words))]
                    i = rng.randrange(1, len(words) - 1)
                    words[i], words[i + 1] = words[i + 1], words[i]
                content = " ".join(words) + f" ({k})"
                ts = _shift_days(ts, -k)
            out.append({"content": content, "timestamp": ts, "tags": [*t["tags"], f"set-{k}"],
                        "metadata": {"eval_id": t["id"], "copy": k}})
        k += 1
    return out


def _shift_days(stamp: str, days: int) -> str:
    from datetime import datetime, timedelta

    dt = datetime.fromisoformat(stamp)
    return (dt + timedelta(days=days)).isoformat()


# --- the service -------------------------------------------------------------------------

class Service:
    """``automem up`` as a child process on ``data_dir`` with free HTTP and gRPC ports."""

    def __init__(self, data_dir: Path, env_extra: dict[str, str]) -> None:
        from automem.common.embedded import free_port

        self.data_dir = data_dir
        self.port = free_port()
        self.grpc_port = free_port()
        self.env = {**os.environ, "AUTOMEM_DATA_DIR": str(data_dir.resolve()), "PORT": str(self.port),
                    "AUTOMEM_GRPC_PORT": str(self.grpc_port), **env_extra}
        # ``automem up`` starts its children as ``python -m automem.cli``, which puts the working
        # directory first on sys.path: run the service from the checkout on PYTHONPATH (another
        # version's, bench/recall_ab.py --b) so the children import that one too, not ours.
        self.cwd = env_extra.get("PYTHONPATH") or None
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 900) -> float:
        """Start and wait for ``/health`` 200; returns seconds."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir.parent / f"{self.data_dir.name}.log", "ab")  # noqa: SIM115 - process lifetime
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([str(Path(sys.executable).parent / "automem"), "up"], env=self.env,
                                     stdout=log, stderr=log, cwd=self.cwd)
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(f"automem exited early (code {self.proc.returncode}); see {log.name}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return time.perf_counter() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise SystemExit("automem did not become healthy")

    def wait_index_settled(self, timeout: float = 900) -> float:
        """Seconds until no vector index build runs on the data dir (no ``qdrant/*.indexing``;
        automem/vectors/edge.py ``build_index``). A start on a shard with many points written
        since its last build starts one, which takes a core for ~100 s at 100k: measured
        meanwhile, a recall costs ~20 ms more CPU over the tree (docs/benchmarks.md, "uvloop
        and httptools"), so the benchmarks measure after it."""
        t0 = time.perf_counter()
        qdrant = self.data_dir / "qdrant"
        time.sleep(1.0)  # a build starts right after the shard opens
        while time.perf_counter() - t0 < timeout:
            if not any(qdrant.glob("*.indexing")):
                waited = time.perf_counter() - t0
                if waited > 1.5:
                    print(f"  waited {waited:.0f}s for the vector index build", flush=True)
                return waited
            time.sleep(1.0)
        raise SystemExit(f"the vector index build did not finish in {timeout:.0f}s")

    def stop(self) -> None:
        """SIGTERM and wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)
        self.proc = None

    def rss_mib(self) -> float:
        """Resident set size of the process tree in MiB."""
        if self.proc is None:
            return 0.0
        root = psutil.Process(self.proc.pid)
        procs = [root, *root.children(recursive=True)]
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total / 2**20


def build(client: httpx.Client, bodies: list[dict]) -> float:
    """Store ``bodies`` through POST /memory/batch (500 per call); returns memories/s accepted."""
    t0 = time.perf_counter()
    for i in range(0, len(bodies), 500):
        r = client.post("/memory/batch", json={"memories": bodies[i: i + 500]})
        r.raise_for_status()
    return len(bodies) / (time.perf_counter() - t0)


def wait_enriched(client: httpx.Client, count: int, timeout: float) -> float:
    """Seconds until ``vector_count >= count`` and the enrichment queue is empty."""
    t0 = time.perf_counter()
    last = -1
    while time.perf_counter() - t0 < timeout:
        health = client.get("/health").json()
        vc = health.get("vector_count", 0)
        if vc >= count and (health.get("enrichment") or {}).get("queue_depth", 1) == 0:
            return time.perf_counter() - t0
        if vc // 5000 != last // 5000:
            print(f"  enrichment: {vc}/{count} vectors after {time.perf_counter() - t0:.0f}s", flush=True)
        last = vc
        time.sleep(1.0)
    raise SystemExit(f"enrichment did not finish in {timeout:.0f}s")


# --- measuring ---------------------------------------------------------------------------

def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by the nearest-rank method."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, round(q * len(s)) - 1))]


def summary(latencies: list[float], wall: float | None = None) -> dict[str, float]:
    out = {"n": len(latencies), "p50_ms": statistics.median(latencies), "p95_ms": pct(latencies, 0.95),
           "p99_ms": pct(latencies, 0.99)}
    if wall:
        out["per_s"] = len(latencies) / wall
    return out


def rest_params(q: dict | None, tag: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": 20}
    if q is not None:
        params["query"] = q["question"]
    if tag:
        params.update({"tags": tag, "tag_match": "exact"})
    return params


def run_rest(client: httpx.Client, questions: list[dict], tag_of, with_query: bool, count: int) -> list[float]:
    out = []
    for i in range(count):
        q = questions[i % len(questions)]
        params = rest_params(q if with_query else None, tag_of(i) if tag_of else None)
        t0 = time.perf_counter()
        r = client.get("/recall", params=params)
        out.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
    return out


async def run_grpc(address: str, questions: list[dict], tag_of, with_query: bool, count: int) -> list[float]:
    from automem.common.client import AutomemClient

    out = []
    async with AutomemClient.connect(address) as client:
        for i in range(count):
            q = questions[i % len(questions)]
            t0 = time.perf_counter()
            await client.search(q["question"] if with_query else "", limit=20,
                                tags=[tag_of(i)] if tag_of else [], tag_match="exact" if tag_of else "")
            out.append((time.perf_counter() - t0) * 1000)
    return out


async def run_concurrent(url: str, questions: list[dict], tag_of, clients: int, per_client: int
                         ) -> tuple[list[float], float]:
    latencies: list[float] = []

    async def one(c: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            for i in range(per_client):
                j = c * per_client + i
                q = questions[j % len(questions)]
                t0 = time.perf_counter()
                r = await client.get("/recall", params=rest_params(q, tag_of(j) if tag_of else None))
                latencies.append((time.perf_counter() - t0) * 1000)
                r.raise_for_status()

    t0 = time.perf_counter()
    await asyncio.gather(*(one(c) for c in range(clients)))
    return latencies, time.perf_counter() - t0


def measure(svc: Service, questions: list[dict], copies: int, requests: int, clients: int) -> dict[str, Any]:
    """Every recall configuration on a warm service."""
    rng = random.Random(11)
    sets = [rng.randrange(copies) for _ in range(requests)]

    def tag_of(i: int) -> str:  # the set of the question's own conversation copy
        return f"set-{sets[i % len(sets)]}"

    results: dict[str, Any] = {}
    with httpx.Client(base_url=svc.url, timeout=60) as client:
        run_rest(client, questions, tag_of, True, 30)  # warm-up
        for name, tag, with_query in (("rest_query_tag", tag_of, True), ("rest_query", None, True),
                                      ("rest_tag_only", tag_of, False), ("rest_no_query", None, False)):
            results[name] = summary(run_rest(client, questions, tag, with_query, requests))
    address = f"127.0.0.1:{svc.grpc_port}"
    asyncio.run(run_grpc(address, questions, tag_of, True, 30))
    for name, tag, with_query in (("grpc_query_tag", tag_of, True), ("grpc_query", None, True)):
        results[name] = summary(asyncio.run(run_grpc(address, questions, tag, with_query, requests)))
    for name, tag in ((f"rest_query_tag_x{clients}", tag_of), (f"rest_query_x{clients}", None)):
        lat, wall = asyncio.run(run_concurrent(svc.url, questions, tag, clients, max(requests // clients, 10)))
        results[name] = summary(lat, wall)
    return results


def bench_size(n: int, args: argparse.Namespace, turns: list[dict], questions: list[dict]) -> dict[str, Any]:
    env = dict(kv.split("=", 1) for kv in args.env)
    tmp = None
    if args.data_dir:
        data_dir = Path(args.data_dir) / f"n{n}"
    else:
        tmp = tempfile.TemporaryDirectory(prefix=f"automem-latency-{n}-")
        data_dir = Path(tmp.name) / "data"
    svc = Service(data_dir, env)
    row: dict[str, Any] = {"n": n}
    try:
        svc.start()
        with httpx.Client(base_url=svc.url, timeout=300) as client:
            have = client.get("/health").json().get("memory_count", 0)
            if have < n:
                bodies = perturbed(turns, n)[have:]
                print(f"n={n}: storing {len(bodies)} memories", flush=True)
                t0 = time.perf_counter()
                row["ingest_per_s"] = build(client, bodies)
                row["enrich_wait_s"] = wait_enriched(client, n, args.enrich_timeout)
                row["enrich_per_s"] = len(bodies) / (time.perf_counter() - t0)
            else:
                wait_enriched(client, n, args.enrich_timeout)
            row["memory_count"] = client.get("/health").json().get("memory_count", 0)
        row["index_wait_s"] = svc.wait_index_settled()
        copies = max(1, -(-n // len(turns)))
        row["recall"] = measure(svc, questions, copies, args.requests, args.clients)
        row["rss_mib"] = svc.rss_mib()
        print_row(row)
        svc.stop()
        t0 = time.perf_counter()
        try:
            row["restart_health_s"] = svc.start()
            with httpx.Client(base_url=svc.url, timeout=300) as client:
                client.get("/recall", params={"query": questions[0]["question"], "limit": 20}).raise_for_status()
            row["restart_recall_s"] = time.perf_counter() - t0
        except (SystemExit, httpx.HTTPError) as exc:
            row["restart_error"] = f"{exc} after {time.perf_counter() - t0:.0f}s"
        print(f"restart: {row.get('restart_error') or ''}healthy after {row.get('restart_health_s', 0):.1f}s, "
              f"recall after {row.get('restart_recall_s', 0):.1f}s", flush=True)
    finally:
        svc.stop()
        if tmp is not None:
            tmp.cleanup()
    return row


def print_row(row: dict[str, Any]) -> None:
    n = row["n"]
    extras = []
    for key, label in (("ingest_per_s", "ingest {:.0f}/s"), ("enrich_per_s", "enrichment {:.0f}/s"),
                       ("rss_mib", "RSS {:.0f} MiB")):
        if key in row:
            extras.append(label.format(row[key]))
    print(f"\nN = {n:,} ({row.get('memory_count', '?')} stored): " + ", ".join(extras))
    print(f"| {'configuration':<22} | {'p50 ms':>7} | {'p95 ms':>7} | {'p99 ms':>7} | {'recalls/s':>9} |")
    print(f"|{'-' * 24}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 11}|")
    for name, s in row["recall"].items():
        rate = f"{s['per_s']:.0f}" if "per_s" in s else ""
        print(f"| {name:<22} | {s['p50_ms']:7.1f} | {s['p95_ms']:7.1f} | {s['p99_ms']:7.1f} | {rate:>9} |")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="1000,10000", help="comma-separated store sizes")
    locomo_files.add_arguments(parser)
    parser.add_argument("--data-dir", default="", help="keep each size's data dir under here and reuse it")
    parser.add_argument("--requests", type=int, default=300, help="recalls per sequential configuration")
    parser.add_argument("--clients", type=int, default=8, help="concurrent REST clients")
    parser.add_argument("--enrich-timeout", type=float, default=3600)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the started service")
    parser.add_argument("--json-out", default="")
    args = parser.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    turns, questions = locomo_export(args.data, out, args.referee)
    rows = []
    for n in (int(x) for x in args.n.split(",")):
        rows.append(bench_size(n, args, turns, questions))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                   "command": " ".join(sys.argv), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
