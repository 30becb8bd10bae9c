"""REST recall A/B: two versions of the code serving the same kept data dir, interleaved.

Starts ``automem up`` on ``DATA_DIR`` (a dir bench/latency.py built and kept, e.g.
``/var/tmp/am100k/n100000``) from this checkout or ``--a`` (A) and from ``--b`` (B; another
checkout is put first on ``PYTHONPATH``), one at a time, alternating A B / B A per round, and measures each the
way bench/latency.py does: sequential REST recalls with the LoCoMo questions (``limit=20``)
with a ``set-k`` tag filter and without, then ``--clients`` concurrent clients. Besides the
wall-time percentiles it reports the CPU time per recall of the whole process tree
(``automem up``, its gateway child, FalkorDB, NATS; psutil), which a loaded machine disturbs
less than wall time, and of ``automem up``, the gateway and FalkorDB each (``cpu_up_ms``,
``cpu_gateway_ms``, ``cpu_redis_ms``; the processes are told apart as bench/recall_profile.py
does).

Usage::

    git archive main | tar -x -C /tmp/base
    python bench/recall_ab.py /var/tmp/am100k/n100000 --b /tmp/base --rounds 3 --requests 200
    python bench/recall_ab.py /var/tmp/am100k/n100000 --env-b AUTOMEM_EMBEDDING_QUANTIZATION=dynamic

Prints one line per run and a table of medians; ``--json-out`` writes every run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files
from bench.latency import Service, locomo_export, pct, run_concurrent, run_rest
from bench.recall_profile import cpu, processes


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants."""
    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def one_run(data_dir: Path, code: Path | None, questions: list[dict], copies: int, requests: int,
            clients: int, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start the service from ``code`` (None: this checkout) with ``extra_env``, measure, stop."""
    env: dict[str, str] = dict(extra_env or {})
    if code is not None:
        env["PYTHONPATH"] = str(code)
        where = subprocess.run([sys.executable, "-c", "import automem; print(automem.__file__)"],
                               env={**os.environ, **env}, capture_output=True, text=True, check=True,
                               cwd="/").stdout
        assert Path(where.strip()).resolve().is_relative_to(code.resolve()), where
    svc = Service(data_dir, env)
    rng = random.Random(11)
    sets = [rng.randrange(copies) for _ in range(requests)]

    def tag_of(i: int) -> str:
        return f"set-{sets[i % len(sets)]}"

    out: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    try:
        svc.start()
        svc.wait_index_settled()
        assert svc.proc is not None
        with httpx.Client(base_url=svc.url, timeout=60) as client:
            run_rest(client, questions, tag_of, True, 20)  # warm-up
        procs = processes(svc.proc.pid)

        def split(c0: dict[str, float], n: int) -> dict[str, float]:
            c1 = cpu(procs)
            return {f"cpu_{role}_ms": 1000 * (c1[role] - c0[role]) / n for role in ("up", "gateway", "redis")
                    if role in c1}

        with httpx.Client(base_url=svc.url, timeout=60) as client:
            for name, tag in (("query_tag", tag_of), ("query", None)):
                c0, p0 = tree_cpu(svc.proc.pid), cpu(procs)
                lat = run_rest(client, questions, tag, True, requests)
                out[name] = {"p50_ms": statistics.median(lat), "p95_ms": pct(lat, 0.95),
                             "cpu_ms": 1000 * (tree_cpu(svc.proc.pid) - c0) / requests, **split(p0, requests)}
        for name, tag in ((f"query_tag_x{clients}", tag_of), (f"query_x{clients}", None)):
            c0, p0 = tree_cpu(svc.proc.pid), cpu(procs)
            lat, wall = asyncio.run(run_concurrent(svc.url, questions, tag, clients, max(requests // clients, 10)))
            out[name] = {"p50_ms": statistics.median(lat), "p95_ms": pct(lat, 0.95), "per_s": len(lat) / wall,
                         "cpu_ms": 1000 * (tree_cpu(svc.proc.pid) - c0) / len(lat), **split(p0, len(lat))}
    finally:
        svc.stop()
    out["load_end"] = os.getloadavg()[0]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", help="a data dir bench/latency.py built (the service must not be running on it)")
    parser.add_argument("--b", default="", help="the other checkout (B; default: this one, with --env-b)")
    parser.add_argument("--a", default="", help="the checkout A (default: this one)")
    parser.add_argument("--env-a", action="append", default=[], metavar="K=V",
                        help="environment of A's service (repeatable), e.g. a setting to compare")
    parser.add_argument("--env-b", action="append", default=[], metavar="K=V", help="environment of B's service")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200, help="recalls per sequential configuration")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--json-out", default="")
    locomo_files.add_arguments(parser)
    args = parser.parse_args()
    data_dir = Path(args.data_dir).resolve()
    turns, questions = locomo_export(args.data, ROOT / "bench" / "out", args.referee)
    # ``python -m`` children (the gateway of ``automem up``) import from their working
    # directory first: not from this checkout's.
    os.chdir("/")
    # bench/latency.py names the dir n<N> and tags copy k of the LoCoMo turns set-k.
    count = int(data_dir.name.lstrip("n")) if data_dir.name.lstrip("n").isdigit() else len(turns)
    copies = max(1, -(-count // len(turns)))
    runs: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for rnd in range(args.rounds):
        for name in (("A", "B") if rnd % 2 == 0 else ("B", "A")):
            path = args.a if name == "A" else args.b
            extra = dict(kv.split("=", 1) for kv in (args.env_a if name == "A" else args.env_b))
            r = one_run(data_dir, Path(path) if path else None, questions, copies, args.requests, args.clients,
                        extra)
            runs[name].append(r)
            print(f"round {rnd} {name}: " + ", ".join(
                f"{k} p50 {v['p50_ms']:.1f} p95 {v['p95_ms']:.1f} CPU {v['cpu_ms']:.1f}"
                + (f" {v['per_s']:.0f}/s" if "per_s" in v else "")
                for k, v in r.items() if isinstance(v, dict)) + f"; load {r['load_start']:.1f}-{r['load_end']:.1f}",
                flush=True)
    print("\n| configuration | version | p50 ms | p95 ms | CPU ms/recall (tree) | of which up / gateway / redis"
          " | recalls/s |")
    print("|---|---|---|---|---|---|---|")
    for key in [k for k, v in runs["A"][0].items() if isinstance(v, dict)]:
        for name in ("A", "B"):
            vals = [r[key] for r in runs[name]]
            med = {m: statistics.median(v[m] for v in vals) for m in vals[0]}
            rate = f"{med['per_s']:.0f}" if "per_s" in med else ""
            parts = " / ".join(f"{med[k]:.1f}" for k in ("cpu_up_ms", "cpu_gateway_ms", "cpu_redis_ms") if k in med)
            print(f"| {key} | {name} | {med['p50_ms']:.1f} | {med['p95_ms']:.1f} | {med['cpu_ms']:.1f} | {parts} | {rate} |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                                   "command": " ".join(sys.argv), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
