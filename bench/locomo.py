"""LoCoMo evidence-recall benchmark through the REST API, as an agent would use it.

Loads the LoCoMo conversations (``--data``, default ../shared/data/locomo/locomo_public.json)
into a running automem (one memory per dialogue turn, timestamped with its session date,
tagged with its conversation id and session, the turn id in metadata), asks every question
through ``GET /recall`` (limit 20, restricted to its conversation by tag), writes the rankings
file and scores it with the referee (``--referee``, default ../shared/bench/eval_locomo.py,
run with ``--rankings``; never re-implemented here). Neither file ships with the repository:
bench/locomo_files.py says where to get them.

Usage:
    python bench/locomo.py                       # starts `automem up` on a temp data dir
    python bench/locomo.py --data locomo_public.json --referee eval_locomo.py   # from a clone
    python bench/locomo.py --url http://127.0.0.1:8001 --token $AUTOMEM_API_TOKEN
    python bench/locomo.py --json-out bench/out/locomo.json

Prints the referee's per-category table plus load and recall latency.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files


def _start_service(workdir: Path, env_extra: dict[str, str]) -> tuple[subprocess.Popen, str]:
    from automem.common.embedded import free_port

    port = free_port()
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(workdir / "data"), "PORT": str(port), "AUTOMEM_GRPC_PORT": "0",
           **env_extra}
    log = open(workdir / "automem.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen([str(Path(sys.executable).parent / "automem"), "up"], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"automem exited early; see {workdir / 'automem.log'}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit("automem did not become healthy")


def load(client: httpx.Client, memories: list[dict]) -> float:
    """Store every turn through POST /memory/batch (≤ 500 per call); returns seconds."""
    started = time.perf_counter()
    for i in range(0, len(memories), 500):
        chunk = memories[i: i + 500]
        body = {"memories": [{"content": m["content"], "timestamp": m["timestamp"], "tags": m["tags"],
                              "metadata": {"eval_id": m["id"], "speaker": m["speaker"]}} for m in chunk]}
        r = client.post("/memory/batch", json=body)
        r.raise_for_status()
    return time.perf_counter() - started


def wait_enriched(client: httpx.Client, count: int, timeout: float = 600) -> float:
    """Wait until every memory has its vector point; returns seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        health = client.get("/health").json()
        if health.get("vector_count", 0) >= count and (health.get("enrichment") or {}).get("queue_depth", 1) == 0:
            return time.perf_counter() - started
        time.sleep(0.5)
    raise SystemExit("enrichment did not finish")


def rank_all(client: httpx.Client, queries: list[dict], depth: int,
             extra: dict[str, str] | None = None) -> tuple[list[dict], list[float]]:
    """Ask every question; returns the rankings rows and per-query latencies (ms)."""
    rows, latencies = [], []
    for q in queries:
        t0 = time.perf_counter()
        r = client.get("/recall", params={"query": q["question"], "tags": q["conversation_id"], "tag_match": "exact",
                                          "limit": depth, **(extra or {})})
        latencies.append((time.perf_counter() - t0) * 1000)
        r.raise_for_status()
        ranked = [h["memory"]["metadata"].get("eval_id") for h in r.json()["results"]]
        rows.append({"qid": q["qid"], "ranked_ids": [x for x in ranked if x]})
    return rows, latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="", help="a running automem; default: start one on a temp data dir")
    parser.add_argument("--token", default=os.environ.get("AUTOMEM_API_TOKEN", ""))
    locomo_files.add_arguments(parser)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"))
    parser.add_argument("--json-out", default="")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the started service")
    parser.add_argument("--param", action="append", default=[],
                        help="KEY=VALUE added to every /recall, e.g. expand_entities=true")
    args = parser.parse_args()
    data, referee = locomo_files.require_data(args.data), locomo_files.require_referee(args.referee)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(referee), str(data), "--export", str(out / "export"), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    memories = [json.loads(line) for line in (out / "export" / "memories.jsonl").open()]
    queries = [json.loads(line) for line in (out / "export" / "queries.jsonl").open()]

    proc = None
    tmp = tempfile.TemporaryDirectory(prefix="automem-locomo-")
    url = args.url
    if not url:
        proc, url = _start_service(Path(tmp.name), dict(kv.split("=", 1) for kv in args.env))
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
            load_s = load(client, memories)
            enrich_s = wait_enriched(client, len(memories))
            rows, latencies = rank_all(client, queries, args.depth, dict(kv.split("=", 1) for kv in args.param))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
        tmp.cleanup()
    rankings = out / "rankings.jsonl"
    rankings.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, str(referee), str(data), "--rankings", str(rankings), "--quiet"]
    if args.json_out:
        cmd += ["--json-out", args.json_out]
    print(f"loaded {len(memories)} memories in {load_s:.1f}s; enrichment finished {enrich_s:.1f}s later")
    lat = sorted(latencies)
    print(f"recall latency over {len(lat)} queries: p50 {statistics.median(lat):.0f} ms, "
          f"p95 {lat[int(len(lat) * 0.95) - 1]:.0f} ms")
    sys.stdout.flush()
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
