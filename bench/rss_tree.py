"""Memory of a working service: RSS of every process of ``automem up`` on a kept data dir.

The performance issue's item 6 bounds the RSS of the whole process tree at 100,000 memories.
A tree measured right after a restart holds less than one at work: the enrich child loads
spaCy's NER with the first memory it enriches, recall's caches fill with the first queries.
So this script starts ``automem up`` on ``DATA_DIR`` (a store ``bench/latency.py --data-dir``
built and kept), stores ``--stores`` probe memories (so enrichment runs), runs ``--recalls``
REST recalls (the LoCoMo questions, ``limit=20``, every other one with the ``set-k`` tag
filter of bench/latency.py's stores), waits ``--settle`` seconds (longer than the 30-s
``malloc_trim`` period, automem/common/malloc.py) and prints the RSS of each process of the
tree and their total, in MiB; ``--rounds`` repeats recalls + settle + print. JSON with
``--json-out``. The service is stopped at the end.

Usage::

    python bench/rss_tree.py /var/tmp/am100f/n100000
    python bench/rss_tree.py /var/tmp/am100f/n100000 --rounds 2 --json-out bench/out/rss_100k.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import locomo_files
from latency import Service, locomo_export, rest_params


def tree_rss(root_pid: int) -> list[tuple[str, float]]:
    """(name, RSS MiB) of ``root_pid`` and every descendant, largest first. A process is named
    by its executable and, for ``automem`` children, its ``--target``."""
    root = psutil.Process(root_pid)
    rows = []
    for p in [root, *root.children(recursive=True)]:
        try:
            cmd = p.cmdline()
            rss = p.memory_info().rss / 2**20
        except psutil.Error:
            continue
        name = Path(cmd[0]).name if cmd else p.name()
        if "--target" in cmd:
            name = f"automem child ({cmd[cmd.index('--target') + 1]})"
        elif any(part.endswith("automem") for part in cmd[:2]) and "up" in cmd:
            name = "automem up"
        rows.append((name, rss))
    return sorted(rows, key=lambda r: -r[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path, help="a data dir built by bench/latency.py (kept with --data-dir)")
    locomo_files.add_arguments(parser)
    parser.add_argument("--stores", type=int, default=20, help="probe memories stored first")
    parser.add_argument("--recalls", type=int, default=300, help="REST recalls per round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--settle", type=float, default=35.0, help="seconds to wait before each reading")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the started service")
    parser.add_argument("--json-out", default="")
    args = parser.parse_args()
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    _, questions = locomo_export(args.data, out, args.referee)
    svc = Service(args.data_dir, dict(kv.split("=", 1) for kv in args.env))
    readings = []
    try:
        healthy = svc.start()
        print(f"healthy after {healthy:.1f} s")
        svc.wait_index_settled()
        with httpx.Client(base_url=svc.url, timeout=60) as client:
            run = uuid.uuid4().hex[:8]  # a stored text is deduplicated: new ones, so NER runs
            for i in range(args.stores):
                client.post("/memory", json={"content": f"Probe {i} of run {run}: Caroline painted a sunrise "
                                                        f"in Boston with Melanie on Tuesday", "tags": ["rss-probe"]}
                            ).raise_for_status()
            time.sleep(5)  # enriched before the recalls start
            done = 0
            for round_no in range(1, args.rounds + 1):
                for _ in range(args.recalls):
                    q = questions[done % len(questions)]
                    params = rest_params(q, f"set-{done % 5}" if done % 2 else None)
                    client.get("/recall", params=params).raise_for_status()
                    done += 1
                time.sleep(args.settle)
                rows = tree_rss(svc.proc.pid)
                total = sum(r for _, r in rows)
                print(f"round {round_no}: {done} recalls")
                for name, rss in rows:
                    print(f"  {rss:7.0f} MiB  {name}")
                print(f"  {total:7.0f} MiB  whole tree")
                readings.append({"round": round_no, "recalls": done, "total_mib": round(total, 1),
                                 "processes": [{"name": n, "rss_mib": round(r, 1)} for n, r in rows]})
    finally:
        svc.stop()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "bench/rss_tree.py " + " ".join(sys.argv[1:]), "readings": readings}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
