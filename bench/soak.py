"""Soak: agents mixing every kind of write and read at a fixed rate, then an integrity check.

``--agents`` agents (default 4) share an open-loop schedule of ``--stores`` stores/s and
``--recalls`` recalls/s (defaults 40 + 40, the performance issue's target), plus by-tag
listings, edits, supersedes and deletes at ``--other`` operations/s in total, for
``--minutes`` minutes. The text is LoCoMo turns (``../shared/data/locomo``), each agent in its
own project tag. Every minute it prints, for the operations scheduled in that minute, the
throughput per kind of those finished by then, their recall and store latency p50/p95 (from
each operation's scheduled start: the wait for one of an agent's ``IN_FLIGHT`` request slots
counts), errors, and those still waiting (``unfinished``: when the service falls behind by
more than a minute, a line's ``per_s`` and latencies cover only the operations that finished;
the totals at the end count them all), the enrichment backlog (``/health``
``queue_depth``), the RSS of the service's process tree and this generator's own CPU share
(``generator_cpu_pct``: it runs on the same two cores as the service).

At the end it waits for the backlog to drain and checks integrity: every acknowledged memory
is readable as last written (content of the last acknowledged store or edit; a deleted one
answers 404; a superseded one names its replacement as ``current_id``).

Usage::

    python bench/soak.py                          # starts `automem up` on a temp data dir, 20 min
    python bench/soak.py --minutes 2 --stores 10 --recalls 10
    python bench/soak.py --url http://127.0.0.1:8001 --json-out bench/out/soak.json

Exit status 1 when an operation failed or the integrity check found a difference.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files
from bench.latency import Service, locomo_export, pct

#: Requests in flight per agent (each its own connection), and idle connections kept open.
IN_FLIGHT, KEEP_ALIVE = 64, 8


@dataclass
class Ledger:
    """What the service acknowledged: id -> expected content (None = deleted) and successor."""

    content: dict[str, str | None] = field(default_factory=dict)
    replaced_by: dict[str, str] = field(default_factory=dict)
    by_agent: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    locked: set[str] = field(default_factory=set)  # ids with a write in flight


@dataclass
class Minute:
    started: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))


def report(row: dict, minute: Minute) -> dict:
    """``row`` with the recall and store latency p50/p95 of ``minute``, printed as one JSON line."""
    for kind in ("recall", "store"):
        lat = minute.latency.get(kind) or [0.0]
        row[f"{kind}_p50_ms"] = round(statistics.median(lat), 1)
        row[f"{kind}_p95_ms"] = round(pct(lat, 0.95), 1)
    print(json.dumps(row), flush=True)
    return row


class Soak:
    def __init__(self, url: str, turns: list[dict], questions: list[dict], args: argparse.Namespace) -> None:
        self.url = url
        self.turns = turns
        self.questions = questions
        self.args = args
        self.ledger = Ledger()
        self.minutes: list[Minute] = [Minute()]
        self.rng = random.Random(5)
        self.seq = 0
        self.error_samples: list[str] = []

    def text(self) -> str:
        self.seq += 1
        t = self.turns[self.seq % len(self.turns)]
        return f"{t['content']} [soak {self.seq}]"

    async def op(self, client: httpx.AsyncClient, kind: str, agent: int, slots: asyncio.Semaphore) -> None:
        """One operation; its latency runs from its scheduled start, waiting for a slot included."""
        minute = self.minutes[-1]
        minute.started[kind] += 1
        t0 = time.perf_counter()
        try:
            async with slots:
                await getattr(self, f"_{kind}")(client, agent)
        except Exception as exc:  # noqa: BLE001 - counted and reported
            minute.errors[kind] += 1
            if len(self.error_samples) < 20:
                self.error_samples.append(f"{kind}: {exc!r}"[:300])
            return
        minute.counts[kind] += 1
        minute.latency[kind].append((time.perf_counter() - t0) * 1000)

    def pick(self, agent: int) -> str | None:
        ids = [i for i in self.ledger.by_agent[agent][-200:]
               if self.ledger.content.get(i) is not None and i not in self.ledger.replaced_by
               and i not in self.ledger.locked]
        return self.rng.choice(ids) if ids else None

    async def _store(self, client: httpx.AsyncClient, agent: int) -> None:
        content = self.text()
        r = await client.post("/memory", json={"content": content, "tags": [f"agent-{agent}", "soak"],
                                                "importance": 0.5})
        r.raise_for_status()
        mid = r.json()["memory_id"]
        self.ledger.content[mid] = content
        self.ledger.by_agent[agent].append(mid)

    async def _recall(self, client: httpx.AsyncClient, agent: int) -> None:
        q = self.questions[self.rng.randrange(len(self.questions))]
        params: dict[str, Any] = {"query": q["question"], "limit": 10}
        if self.rng.random() < 0.5:
            params.update({"tags": f"agent-{agent}", "tag_match": "exact"})
        (await client.get("/recall", params=params)).raise_for_status()

    async def _by_tag(self, client: httpx.AsyncClient, agent: int) -> None:
        (await client.get("/memory/by-tag", params={"tags": f"agent-{agent}", "limit": 20})).raise_for_status()

    @contextlib.asynccontextmanager
    async def _claim(self, agent: int):
        """One of the agent's live memories (or None), kept from the other writers meanwhile."""
        mid = self.pick(agent)
        if mid is not None:
            self.ledger.locked.add(mid)
        try:
            yield mid
        finally:
            self.ledger.locked.discard(mid)

    async def _edit(self, client: httpx.AsyncClient, agent: int) -> None:
        async with self._claim(agent) as mid:
            if mid is None:
                return
            content = self.text()
            (await client.patch(f"/memory/{mid}", json={"content": content})).raise_for_status()
            self.ledger.content[mid] = content

    async def _supersede(self, client: httpx.AsyncClient, agent: int) -> None:
        async with self._claim(agent) as mid:
            if mid is None:
                return
            content = self.text()
            r = await client.post("/memory", json={"content": content, "tags": [f"agent-{agent}", "soak"],
                                                    "supersedes_memory_id": mid})
            r.raise_for_status()
            new = r.json()["memory_id"]
            self.ledger.content[new] = content
            self.ledger.replaced_by[mid] = new
            self.ledger.by_agent[agent].append(new)

    async def _delete(self, client: httpx.AsyncClient, agent: int) -> None:
        async with self._claim(agent) as mid:
            if mid is None:
                return
            (await client.delete(f"/memory/{mid}")).raise_for_status()
            self.ledger.content[mid] = None

    async def agent(self, agent: int, deadline: float) -> None:
        """Open loop: operations start on schedule whether or not earlier ones finished."""
        a = self.args
        n = a.agents
        kinds = [("store", a.stores / n), ("recall", a.recalls / n), ("by_tag", a.other * 0.4 / n),
                 ("edit", a.other * 0.25 / n), ("supersede", a.other * 0.2 / n), ("delete", a.other * 0.15 / n)]
        rate = sum(r for _, r in kinds)
        # Operations past IN_FLIGHT wait for a slot here, not in httpx's pool: the pool scans
        # its queued requests against its connections on every request (py-spy: 64 % of this
        # process's CPU once the service fell behind, ~35 % of a core taken from the service).
        slots = asyncio.Semaphore(IN_FLIGHT)
        async with httpx.AsyncClient(base_url=self.url, timeout=60,
                                     limits=httpx.Limits(max_connections=IN_FLIGHT,
                                                         max_keepalive_connections=KEEP_ALIVE)) as client:
            pending: set[asyncio.Task] = set()
            next_at = time.monotonic()
            while next_at < deadline:
                kind = self.rng.choices([k for k, _ in kinds], weights=[r for _, r in kinds])[0]
                task = asyncio.create_task(self.op(client, kind, agent, slots))
                pending.add(task)
                task.add_done_callback(pending.discard)
                next_at += self.rng.expovariate(rate)
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            if pending:
                await asyncio.wait(pending)

    async def monitor(self, service: Service | None, deadline: float, rows: list[dict]) -> None:
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as client:
            start = time.monotonic()
            minute_no = 0
            cpu = time.process_time()
            while time.monotonic() < deadline:
                await asyncio.sleep(min(60.0, max(0.0, deadline - time.monotonic())))
                minute = self.minutes[-1]
                self.minutes.append(Minute())
                minute_no += 1
                health = (await client.get("/health")).json()
                elapsed = time.monotonic() - start - 60.0 * (minute_no - 1)
                row = {"minute": minute_no, "backlog": (health.get("enrichment") or {}).get("queue_depth"),
                       "memories": health.get("memory_count"), "vectors": health.get("vector_count"),
                       "rss_mib": round(service.rss_mib()) if service else None,
                       "per_s": {k: round(v / elapsed, 1) for k, v in minute.counts.items()},
                       "errors": dict(minute.errors),
                       # scheduled in this minute, still waiting: not in per_s, nor in the p50/p95
                       "unfinished": {k: n - minute.counts[k] - minute.errors[k] for k, n in minute.started.items()
                                      if n - minute.counts[k] - minute.errors[k]},
                       # this load generator's own CPU, taken from the same two cores
                       "generator_cpu_pct": round(100 * (time.process_time() - cpu) / elapsed, 1)}
                cpu = time.process_time()
                rows.append(report(row, minute))

    async def check(self) -> list[str]:
        """Differences between the ledger and what the service returns."""
        problems: list[str] = []
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as client:
            sem = asyncio.Semaphore(16)

            async def one(mid: str, expected: str | None) -> None:
                async with sem:
                    r = await client.get(f"/memory/{mid}", params={"state_mode": "history"})
                if expected is None:
                    if r.status_code != 404:
                        problems.append(f"{mid}: deleted but answered {r.status_code}")
                    return
                if r.status_code != 200:
                    problems.append(f"{mid}: answered {r.status_code}")
                    return
                memory = r.json()["memory"]
                if memory["content"] != expected:
                    problems.append(f"{mid}: content differs from the last acknowledged write")
                successor = self.ledger.replaced_by.get(mid)
                if successor and memory.get("superseded_by") != successor:
                    problems.append(f"{mid}: superseded_by {memory.get('superseded_by')} != {successor}")

            await asyncio.gather(*(one(mid, c) for mid, c in self.ledger.content.items()))
        return problems


async def wait_drained(url: str, timeout: float) -> float:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            health = (await client.get("/health")).json()
            if (health.get("enrichment") or {}).get("queue_depth", 1) == 0:
                return time.monotonic() - t0
            await asyncio.sleep(1.0)
    return -1.0


async def run(args: argparse.Namespace, url: str, service: Service | None) -> int:
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    turns, questions = locomo_export(args.data, out, args.referee)
    soak = Soak(url, turns, questions, args)
    deadline = time.monotonic() + args.minutes * 60
    rows: list[dict] = []
    print(f"soak: {args.agents} agents, {args.stores} stores/s + {args.recalls} recalls/s + {args.other} other/s "
          f"for {args.minutes} min against {url}", flush=True)
    await asyncio.gather(soak.monitor(service, deadline, rows), *(soak.agent(a, deadline) for a in range(args.agents)))
    # Operations that finished after the last minute's line (the slowest, when the service fell
    # behind) get a line of their own.
    tail = soak.minutes[-1]
    if tail.counts or tail.errors:
        rows.append(report({"minute": "after the end", "count": dict(tail.counts), "errors": dict(tail.errors)}, tail))
    drained = await wait_drained(url, 600)
    problems = await soak.check()
    totals: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    for m in soak.minutes:
        for k, v in m.counts.items():
            totals[k] += v
        for k, v in m.errors.items():
            errors[k] += v
    summary = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
               "minutes": args.minutes, "totals": dict(totals), "errors": dict(errors),
               "stores_per_s": round(totals["store"] / (args.minutes * 60), 1),
               "recalls_per_s": round(totals["recall"] / (args.minutes * 60), 1),
               "drained_after_s": round(drained, 1), "acknowledged": len(soak.ledger.content),
               "integrity_problems": len(problems), "error_samples": soak.error_samples, "per_minute": rows}
    print(json.dumps({k: v for k, v in summary.items() if k != "per_minute"}, indent=1))
    for p in problems[:20]:
        print("integrity:", p)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))
    return 1 if problems or any(errors.values()) or drained < 0 else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="", help="a running automem; default: start one on a temp data dir")
    locomo_files.add_arguments(parser)
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--stores", type=float, default=40, help="stores per second, all agents together")
    parser.add_argument("--recalls", type=float, default=40, help="recalls per second")
    parser.add_argument("--other", type=float, default=8, help="by-tag listings, edits, supersedes, deletes per second")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the started service")
    parser.add_argument("--json-out", default="")
    args = parser.parse_args()
    if args.url:
        return asyncio.run(run(args, args.url, None))
    with tempfile.TemporaryDirectory(prefix="automem-soak-") as tmp:
        service = Service(Path(tmp) / "data", dict(kv.split("=", 1) for kv in args.env))
        service.start()
        try:
            return asyncio.run(run(args, service.url, service))
        finally:
            service.stop()


if __name__ == "__main__":
    sys.exit(main())
