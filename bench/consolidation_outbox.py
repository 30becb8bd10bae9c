"""Cluster run time with consolidation's events written in the graph write (the outbox batch,
automem/graph/outbox.py) against an older build that published them one by one.

Builds a data dir of ``--memories`` similar memories (``POST /memory/batch``, 500 per call;
waits until each has its vector), stops the service, then for each build given with
``--automem`` (label=command) runs ``POST /consolidate {"mode": "cluster"}`` on a fresh copy
of that data dir and prints the run's wall time, its counts, the PART_OF edges written and
the seconds until the outbox was empty. Nothing is asserted.

Usage:
    git archive <old commit> | tar -x -C /tmp/automem-old
    python bench/consolidation_outbox.py --data-dir /tmp/d3k --memories 3000 \\
        --automem "old=env PYTHONPATH=/tmp/automem-old .venv/bin/python -m automem.cli" \\
        --automem "new=env PYTHONPATH=. .venv/bin/python -m automem.cli"
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

TOPICS = ["espresso machine on floor two", "coffee beans from the corner roaster", "morning coffee queue",
          "the office kitchen coffee grinder"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(command: str, data: Path, port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(data), "PORT": str(port), "AUTOMEM_GRPC_PORT": "0",
           "AUTOMEM_METRICS_PORT": "0", "AUTOMEM_CLUSTER_THRESHOLD": "0.3",
           "AUTOMEM_CONSOLIDATION_CLUSTER_INTERVAL_SECONDS": "86400",
           "AUTOMEM_CONSOLIDATION_CREATIVE_INTERVAL_SECONDS": "86400",
           "AUTOMEM_CONSOLIDATION_DECAY_INTERVAL_SECONDS": "86400"}
    out = open(log, "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([*shlex.split(command), "up"], env=env, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"automem exited with {proc.returncode}; see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit("automem did not become healthy")


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)


def _build(command: str, data: Path, count: int) -> None:
    data.mkdir(parents=True)
    port = _free_port()
    proc = _start(command, data, port, data.parent / "build.log")
    try:
        for start in range(0, count, 500):
            items = [{"content": f"Note {i} about the {TOPICS[i % len(TOPICS)]}: it makes great coffee."}
                     for i in range(start, min(start + 500, count))]
            r = httpx.post(f"http://127.0.0.1:{port}/memory/batch", json={"memories": items}, timeout=120)
            r.raise_for_status()
        deadline = time.monotonic() + 1800
        while httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json().get("vector_count") != count:
            if time.monotonic() > deadline:
                raise SystemExit("vectors never caught up")
            time.sleep(2)
    finally:
        _stop(proc)


def _run(label: str, command: str, source: Path) -> None:
    data = source.parent / f"{source.name}-{label}"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(source, data, ignore=shutil.ignore_patterns("*.lock", "run"))
    port = _free_port()
    proc = _start(command, data, port, source.parent / f"{label}.log")
    try:
        started = time.perf_counter()
        r = httpx.post(f"http://127.0.0.1:{port}/consolidate", json={"mode": "cluster", "dry_run": False},
                       timeout=1800)
        took = time.perf_counter() - started
        stats = httpx.get(f"http://127.0.0.1:{port}/graph/stats", timeout=30).json()
        while (httpx.get(f"http://127.0.0.1:{port}/enrichment/status", timeout=30).json().get("outbox_backlog")
               or 0) > 0:
            time.sleep(0.2)
        drained = time.perf_counter() - started
        print(f"{label}: status {r.status_code}, run {took:.2f} s, outbox empty after {drained:.2f} s, "
              f"counts {r.json().get('results')}, edges {stats.get('by_relationship')}")
    finally:
        _stop(proc)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--automem", action="append", required=True, help="label=command (repeatable)")
    args = parser.parse_args()
    builds = [spec.split("=", 1) for spec in args.automem]
    if not args.data_dir.exists():
        _build(builds[0][1], args.data_dir, args.memories)
    for label, command in builds:
        _run(label, command, args.data_dir)


if __name__ == "__main__":
    main()
