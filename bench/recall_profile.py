"""Where a recall's CPU goes, per process: CPU ms per recall of each process of ``automem up``
and py-spy profiles of the Python ones, while one client recalls over REST or gRPC.

Starts ``automem up`` on ``DATA_DIR`` (a dir bench/latency.py built and kept), warms it up,
then for each transport (``--transports rest,grpc``) runs ``--requests`` sequential recalls
(the LoCoMo questions, ``limit=20``, with the ``set-k`` tag filter unless ``--no-tag``) while
``py-spy record --format raw`` samples the gateway child and the ``automem up`` process
(the recall service). Prints, per transport: CPU ms per recall of every process of the tree
(psutil, user + system), and per profiled process the functions with the most samples, by
self samples (the leaf frame) and by inclusive samples (anywhere on the stack), as shares
of that process's samples (idle threads are not sampled).

Usage::

    python bench/recall_profile.py /var/tmp/perf-10k/n10000 --requests 400 --out /tmp/prof

``--code DIR`` serves from another checkout (B of an A/B; run A and B alternately).
``--no-py-spy`` measures the CPU split alone (py-spy's sampling costs the sampled process
some CPU). ``--out`` keeps the raw folded stacks (``<transport>-<process>.txt``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files
from bench.latency import Service, locomo_export, run_grpc, run_rest


def processes(pid: int) -> dict[str, psutil.Process]:
    """The tree of ``pid`` by role: ``up`` (the root), ``gateway``, ``ner``, ``redis``, ``nats``,
    other children by name."""
    root = psutil.Process(pid)
    out = {"up": root}
    for p in root.children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "--target gateway" in cmd or "--target=gateway" in cmd:
            role = "gateway"
        elif "redis" in cmd:
            role = "redis"
        elif "nats" in cmd:
            role = "nats"
        elif "python" in cmd or "automem" in cmd:
            role = "worker"
        else:
            role = p.name()
        while role in out:
            role += "+"
        out[role] = p
    return out


def cpu(procs: dict[str, psutil.Process]) -> dict[str, float]:
    out = {}
    for role, p in procs.items():
        try:
            t = p.cpu_times()
            out[role] = t.user + t.system
        except psutil.Error:
            out[role] = 0.0
    return out


def fold(raw: Path, top: int) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """(samples, top self frames, top inclusive frames) of a py-spy raw (collapsed) file."""
    self_counts: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [f for f in stack.split(";") if f and not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        total += n
        self_counts[_short(frames[-1])] += n
        for f in {_short(f) for f in frames}:
            incl[f] += n
    return total, self_counts.most_common(top), incl.most_common(top * 2)


def _short(frame: str) -> str:
    # "func (path/to/module.py:123)" -> "func (module.py)"
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    parts = path.split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 else path
    return f"{name} ({short})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--transports", default="rest,grpc")
    parser.add_argument("--no-tag", action="store_true", help="recall without the tag filter")
    parser.add_argument("--no-py-spy", action="store_true")
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--out", default="", help="keep the raw profiles here")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the started service")
    parser.add_argument("--code", default="", help="serve from this checkout (put first on PYTHONPATH), e.g. a "
                        "`git archive` of the commit before a change")
    locomo_files.add_arguments(parser)
    args = parser.parse_args()
    data_dir = Path(args.data_dir).resolve()
    turns, questions = locomo_export(args.data, ROOT / "bench" / "out", args.referee)
    os.chdir("/")
    count = int(data_dir.name.lstrip("n")) if data_dir.name.lstrip("n").isdigit() else len(turns)
    copies = max(1, -(-count // len(turns)))
    rng = random.Random(11)
    sets = [rng.randrange(copies) for _ in range(args.requests)]

    def tag_of(i: int) -> str:
        return f"set-{sets[i % len(sets)]}"

    tag = None if args.no_tag else tag_of
    out_dir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="recall-profile-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    py_spy = str(Path(sys.executable).parent / "py-spy")
    env = dict(kv.split("=", 1) for kv in args.env)
    if args.code:
        env["PYTHONPATH"] = str(Path(args.code).resolve())
    svc = Service(data_dir, env)
    svc.start()
    svc.wait_index_settled()
    assert svc.proc is not None
    try:
        with httpx.Client(base_url=svc.url, timeout=60) as client:
            run_rest(client, questions, tag, True, 30)
        address = f"127.0.0.1:{svc.grpc_port}"
        asyncio.run(run_grpc(address, questions, tag, True, 30))
        procs = processes(svc.proc.pid)
        for transport in args.transports.split(","):
            spies: list[tuple[str, subprocess.Popen, Path]] = []
            if not args.no_py_spy:
                for role in ("gateway", "up") if transport == "rest" else ("up",):
                    raw = out_dir / f"{transport}-{role}.txt"
                    spies.append((role, subprocess.Popen(
                        [py_spy, "record", "--pid", str(procs[role].pid), "--rate", str(args.rate), "--format", "raw",
                         "--nonblocking", "--output", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                        raw))
                time.sleep(1.0)
            c0 = cpu(procs)
            t0 = time.perf_counter()
            if transport == "rest":
                with httpx.Client(base_url=svc.url, timeout=60) as client:
                    lat = run_rest(client, questions, tag, True, args.requests)
            else:
                lat = asyncio.run(run_grpc(address, questions, tag, True, args.requests))
            wall = time.perf_counter() - t0
            c1 = cpu(procs)
            for _, spy, _ in spies:
                spy.send_signal(2)  # SIGINT: py-spy writes its output
            for _, spy, _ in spies:
                spy.wait(timeout=60)
            lat.sort()
            per = {role: 1000 * (c1[role] - c0[role]) / args.requests for role in procs}
            print(f"\n## {transport}: {args.requests} recalls, p50 {lat[len(lat) // 2]:.1f} ms, "
                  f"{args.requests / wall:.1f}/s, load {os.getloadavg()[0]:.1f}")
            print("CPU ms per recall: " + ", ".join(f"{r} {v:.2f}" for r, v in per.items())
                  + f"; tree {sum(per.values()):.2f}")
            for role, _, raw in spies:
                if not raw.exists():
                    print(f"(no profile of {role})")
                    continue
                total, self_top, incl_top = fold(raw, args.top)
                print(f"\n### {transport}, {role}: {total} samples\n\nself:")
                for name, n in self_top:
                    print(f"  {100 * n / total:5.1f} %  {name}")
                print("inclusive:")
                for name, n in incl_top:
                    print(f"  {100 * n / total:5.1f} %  {name}")
    finally:
        svc.stop()
    print(f"\nraw profiles: {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
