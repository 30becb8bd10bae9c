"""Restart at scale: how long `automem up` takes to serve again on a large data directory.

Given a data dir (or building one of ``--build N`` memories through ``POST /memory/batch``,
500 per call, and waiting until every memory has its vector), it stops the service with
SIGTERM (``--crash``: SIGKILL), starts ``automem up`` again and prints, for each restart, the
seconds from the process start until

* ``falkordb``: FalkorDB answers and has finished loading (``INFO persistence`` ``loading:0``),
  polled on the FalkorDB port the bench hands the service (``FALKORDB_PORT``);
* ``health``: ``GET /health`` answers 200 with the expected ``memory_count``;
* ``recall``: ``GET /recall?query=…`` answers 200 with results;

plus the FalkorDB load time as redis-server measured it itself (its "DB loaded from append
only file: X seconds" line in the service's log; the launcher before restart-at-scale logged
it only at DEBUG, so it is absent for that code) and the AOF sizes before the start.

Usage:
    python bench/restart.py --build 10000 --data-dir /tmp/d10k      # build, then restart 3x
    python bench/restart.py --build 100000 --fast --data-dir /tmp/d100k --runs 0
    python bench/restart.py --data-dir /tmp/d10k --copy              # restart a copy of it
    python bench/restart.py --data-dir /tmp/d10k --copy --crash --write 500 --runs 4
    python bench/restart.py --data-dir /tmp/d10k --copy \\
        --automem "env PYTHONPATH=/tmp/automem-old .venv/bin/python -m automem.cli"

``--fast`` builds without the per-memory enrichment (see :func:`fast_build`); ``--write N``
stores N more memories before each stop (so a crash leaves commands to replay);
``--automem`` runs another build of automem (an A/B against an older checkout exported with
``git archive``); ``--env KEY=VALUE`` passes settings to the service (e.g. a fast build with
``AUTOMEM_EMBEDDING_PROVIDER=wordllama``). Results are also written as JSON (``--json-out``).
The memories built or written are LoCoMo turns (``--data``; bench/locomo_files.py says where
to get the file). Numbers and commands: docs/benchmarks.md, "Restart at scale".
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shlex
import shutil
import signal
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

_LOADED_RE = re.compile(r"DB loaded from (?:append only file|disk): ([\d.]+) seconds")
_NAMES = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun"]


def texts(n: int, data: Path) -> list[dict]:
    """``n`` memories from the LoCoMo turns: copy k of a turn has its speakers renamed and a
    ``take k`` marker (so no two contents are equal), tags ``[conversation, copy-k]``."""
    turns: list[tuple[str, str, str]] = []
    for conv in json.loads(locomo_files.require_data(data).read_text()):
        c = conv["conversation"]
        for key, value in c.items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [(conv["sample_id"], t["speaker"], t["text"]) for t in value]
    out = []
    for i in range(n):
        k, (sample, speaker, text) = divmod(i, len(turns))[0], turns[i % len(turns)]
        who = speaker if k == 0 else _NAMES[(k + len(speaker)) % len(_NAMES)]
        out.append({"content": f"{who}: {text} (take {k})", "tags": [sample, f"copy-{k}"]})
    return out


class Service:
    """``automem up`` as a subprocess on ``data_dir``, output appended to ``log``."""

    def __init__(self, automem: list[str], data_dir: Path, log: Path, env: dict[str, str]) -> None:
        from automem.common.embedded import free_port, new_secret

        self.port = free_port()
        self.falkordb_port = free_port()
        #: The embedded FalkorDB requires a password; the bench chooses it to poll the server.
        self.falkordb_password = new_secret()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = {**os.environ, "AUTOMEM_DATA_DIR": str(data_dir), "PORT": str(self.port),
                    "AUTOMEM_GRPC_PORT": "0", "FALKORDB_PORT": str(self.falkordb_port),
                    "FALKORDB_PASSWORD": self.falkordb_password, **env}
        self.log_path = log
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.log_offset = log.stat().st_size
        self.started = time.monotonic()
        # Not the checkout as cwd: `python -m` would import this checkout ahead of PYTHONPATH.
        self.proc = subprocess.Popen([*automem, "up"], env=full_env, stdout=self._log, stderr=self._log,
                                     cwd=str(data_dir.parent))

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                lines = f.read().decode(errors="replace").splitlines()
            errors = [ln for ln in lines if "Error:" in ln]
            raise SystemExit(f"automem exited with {self.proc.returncode}: "
                             f"{(errors or lines or [''])[0][:400]}")

    def stop(self, timeout: float = 600, sig: int = signal.SIGTERM) -> float:
        """Send ``sig`` (SIGKILL: a crash; the servers get SIGTERM from the kernel through
        PR_SET_PDEATHSIG, so nothing is rewritten or flushed beyond what they do themselves)
        and wait; returns seconds the stop took."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return time.monotonic() - t0


def _falkordb_loaded(port: int, password: str) -> bool:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    try:
        r = redis.Redis(port=port, password=password, socket_connect_timeout=0.5, socket_timeout=2, retry=Retry(NoBackoff(), 0))
        try:
            return int(r.info("persistence").get("loading", 1)) == 0
        finally:
            r.close()
    except (redis.RedisError, OSError):
        return False


def measure_start(svc: Service, expected: int | None, query: str, timeout: float) -> dict:
    """Poll FalkorDB, /health and /recall; returns seconds since the start for each."""
    out: dict = {}
    deadline = svc.started + timeout
    with httpx.Client(base_url=svc.url, timeout=10) as http:
        while time.monotonic() < deadline:
            svc.check_alive()
            if "falkordb" not in out and _falkordb_loaded(svc.falkordb_port, svc.falkordb_password):
                out["falkordb"] = time.monotonic() - svc.started
            if "health" not in out:
                try:
                    r = http.get("/health")
                    body = r.json() if r.status_code == 200 else {}
                    if r.status_code == 200 and (expected is None or body.get("memory_count") == expected):
                        out["health"] = time.monotonic() - svc.started
                        out["memory_count"] = body.get("memory_count")
                        out["vector_count"] = body.get("vector_count")
                except httpx.HTTPError:
                    pass
            if "health" in out and "recall" not in out:
                try:
                    r = http.get("/recall", params={"query": query, "limit": 10})
                    if r.status_code == 200 and r.json().get("results"):
                        out["recall"] = time.monotonic() - svc.started
                except httpx.HTTPError:
                    pass
            if "recall" in out and "falkordb" in out:
                return out
            time.sleep(0.1)
    out["timeout"] = True
    return out


def _load_seconds(svc: Service) -> float | None:
    with open(svc.log_path, "rb") as f:
        f.seek(svc.log_offset)
        text = f.read().decode(errors="replace")
    found = [float(m.group(1)) for m in _LOADED_RE.finditer(text)]
    return sum(found) if found else None


def aof_sizes(data_dir: Path) -> dict[str, int]:
    """Bytes of the base and incr parts of FalkorDB's multi-part AOF."""
    sizes = {"base": 0, "incr": 0}
    for p in (data_dir / "falkordb" / "appendonlydir").glob("*"):
        if ".base." in p.name:
            sizes["base"] += p.stat().st_size
        elif ".incr." in p.name:
            sizes["incr"] += p.stat().st_size
    return sizes


def build(automem: list[str], data_dir: Path, n: int, env: dict[str, str], log: Path, data: Path) -> float:
    """Start the service on an empty ``data_dir``, store ``n`` memories, wait until each has a
    vector and the enrichment queue is empty, stop. Returns seconds."""
    t0 = time.monotonic()
    svc = Service(automem, data_dir, log, env)
    try:
        _wait_health(svc)
        memories = texts(n, data)
        with httpx.Client(base_url=svc.url, timeout=300) as http:
            for i in range(0, n, 500):
                r = http.post("/memory/batch", json={"memories": memories[i: i + 500]})
                r.raise_for_status()
            print(f"stored {n} in {time.monotonic() - t0:.0f}s; waiting for enrichment", flush=True)
            last = time.monotonic()
            while True:
                svc.check_alive()
                body = http.get("/health").json()
                queue = (body.get("enrichment") or {}).get("queue_depth", 1)
                if body.get("vector_count", 0) >= n and queue == 0:
                    break
                if time.monotonic() - last > 60:
                    print(f"  vectors {body.get('vector_count')} / {n}, queue {queue}", flush=True)
                    last = time.monotonic()
                time.sleep(1)
    finally:
        svc.stop()
    return time.monotonic() - t0


async def write_vectors(graph, vectors, provider, batch: int = 500) -> None:
    """Every memory's vector point as the service writes it (the one payload builder, the
    configured embedding provider, the BM25 sparse vector of its content; automem/common/
    backup.py ``reindex`` does the same but pages with ORDER BY/SKIP, which takes seconds per
    page at 100k), then the memory marked embedded and enriched."""
    import asyncio

    from automem.common.payload import build_payload
    from automem.common.text import analyze, bm25_doc_weights
    from automem.v1 import memory_pb2

    ids = [row[0] for row in await graph.ro_query("MATCH (m:Memory) RETURN m.id")]
    for i in range(0, len(ids), batch):
        memories = list((await graph.memories.hydrate(ids[i: i + batch], None)).values())
        matrix = await asyncio.to_thread(provider.embed, [m.content for m in memories])
        for memory, vector in zip(memories, matrix, strict=True):
            memory.embedding_model = provider.name
            memory.embedding_status = memory_pb2.EMBEDDING_STATUS_DONE
            weights = bm25_doc_weights(analyze(memory.content), analyze(""))
            keys = sorted(weights)
            await vectors.upsert(memory.id, vector.tolist(), build_payload(memory),
                                 sparse=(keys, [weights[k] for k in keys]) if keys else None)
        await graph.query(
            "UNWIND $ids AS mid MATCH (m:Memory {id: mid}) SET m.embedding_status = 'EMBEDDING_STATUS_DONE', "
            "m.embedding_model = $model, m.enrichment_status = 'ENRICHMENT_STATUS_DONE'",
            {"ids": [m.id for m in memories], "model": provider.name})
        if (i // batch) % 20 == 19:
            print(f"  vectors {i + batch}", flush=True)
    await vectors.flush()


async def consume_enrich_backlog(bus) -> int:
    """Acknowledge every stored event on the ``enrich`` durable consumer (services/enrich/
    consumer.py ``DURABLE``), as a finished enrichment leaves it; returns how many."""
    import nats.errors

    from automem.enrich.consumer import DURABLE

    sub = await bus.pull_subscribe(DURABLE)
    count = 0
    try:
        while True:
            try:
                msgs = await sub.fetch(1000, timeout=2)
            except (TimeoutError, nats.errors.TimeoutError):
                return count
            for msg in msgs[:-1]:
                await msg.ack()
            await msgs[-1].ack_sync()  # the server has every ack of the batch before this one's reply
            count += len(msgs)
    finally:
        await sub.unsubscribe()


async def fast_build(data_dir: Path, n: int, env: dict[str, str], data: Path) -> float:
    """A quicker build for large N: the service (without its ``enrich`` target) in this
    process stores the memories through ``POST /memory/batch``, then writes every vector point
    as :func:`write_vectors` does, and acknowledges the stored events for the ``enrich``
    consumer (:func:`consume_enrich_backlog`), as a finished enrichment would leave them.
    No entities, SIMILAR_TO or PRECEDED_BY edges are made (a smaller graph than a full
    enrichment's). Returns seconds."""
    from automem.common.embedded import EmbeddedRuntime
    from automem.common.settings import Settings
    from automem.runner import Runner

    t0 = time.monotonic()
    os.environ.update(env)
    runtime = EmbeddedRuntime(Settings(data_dir=data_dir, port=0, grpc_port=0))
    settings = await runtime.start()
    runner = Runner(settings, ["ingest", "recall", "gateway"])
    try:
        ctx = await runner.start()
        memories = texts(n, data)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ctx.http_port}", timeout=600) as http:
            for i in range(0, n, 500):
                r = await http.post("/memory/batch", json={"memories": memories[i: i + 500]})
                r.raise_for_status()
                if (i // 500) % 20 == 19:
                    print(f"  stored {i + 500} in {time.monotonic() - t0:.0f}s", flush=True)
        await write_vectors(ctx.graph, ctx.vectors, ctx.embedder)
        print(f"  vectors written at {time.monotonic() - t0:.0f}s", flush=True)
        acked = await consume_enrich_backlog(ctx.bus)
        print(f"  {acked} stored events acknowledged for enrich at {time.monotonic() - t0:.0f}s", flush=True)
    finally:
        await runner.stop()
        await runtime.stop()
    return time.monotonic() - t0


def write_more(svc: Service, have: int, n: int, data: Path, timeout: float = 600) -> int:
    """Store ``n`` more memories and wait until each has its vector; returns ``n``."""
    memories = texts(have + n, data)[have:]
    with httpx.Client(base_url=svc.url, timeout=300) as http:
        for i in range(0, n, 500):
            http.post("/memory/batch", json={"memories": memories[i: i + 500]}).raise_for_status()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if http.get("/health").json().get("vector_count", 0) >= have + n:
                return n
            time.sleep(1)
    raise SystemExit(f"the {n} new memories did not all get vectors within {timeout:.0f}s")


def _wait_health(svc: Service, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        svc.check_alive()
        try:
            if httpx.get(svc.url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("automem did not become healthy")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", required=True, help="data dir to restart (built first with --build)")
    parser.add_argument("--build", type=int, default=0, help="store this many memories into an empty --data-dir")
    parser.add_argument("--fast", action="store_true", help="with --build: nodes through the write path, vectors "
                        "through reindex, no enrichment edges (see fast_build)")
    parser.add_argument("--copy", action="store_true", help="restart a copy of --data-dir (left untouched)")
    parser.add_argument("--runs", type=int, default=3, help="restarts to measure")
    parser.add_argument("--crash", action="store_true", help="stop each run with SIGKILL instead of SIGTERM")
    parser.add_argument("--write", type=int, default=0, help="store this many more memories (POST /memory/batch) "
                        "before each stop, so there is something to replay")
    parser.add_argument("--automem", default=str(Path(sys.executable).parent / "automem"),
                        help="the automem command (split like a shell)")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the service")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for one start")
    parser.add_argument("--query", default="what did they talk about at the support group")
    parser.add_argument("--json-out", default="")
    locomo_files.add_arguments(parser, referee=False)
    args = parser.parse_args()
    if args.build or args.write:
        locomo_files.require_data(args.data)

    logging.getLogger("httpx").setLevel(logging.WARNING)
    automem = shlex.split(args.automem)
    env = dict(kv.split("=", 1) for kv in args.env)
    data_dir = Path(args.data_dir).resolve()
    if args.build:
        if data_dir.exists() and any(data_dir.iterdir()):
            raise SystemExit(f"{data_dir} is not empty")
        data_dir.mkdir(parents=True, exist_ok=True)
        if args.fast:
            import asyncio

            took = asyncio.run(fast_build(data_dir, args.build, env, args.data))
        else:
            took = build(automem, data_dir, args.build, env, data_dir.parent / f"{data_dir.name}-build.log",
                         args.data)
        print(f"built {args.build} memories in {took:.0f}s", flush=True)
    tmp = None
    if args.copy:
        tmp = tempfile.mkdtemp(prefix="automem-restart-", dir=str(data_dir.parent))
        target = Path(tmp) / "data"
        shutil.copytree(data_dir, target, ignore=shutil.ignore_patterns("*.sock", "automem.lock"))
        data_dir = target
    source = Path(args.data_dir).resolve()
    log = source.parent / f"{source.name}-restart-{time.strftime('%Y%m%dT%H%M%S')}.log"
    print(f"service log: {log}", flush=True)
    results = []
    try:
        expected = None
        for run in range(1, args.runs + 1):
            sizes = aof_sizes(data_dir)
            svc = Service(automem, data_dir, log, env)
            got: dict = {}
            try:
                got = measure_start(svc, expected, args.query, args.timeout)
                if args.write and "recall" in got:
                    got["written"] = write_more(svc, got["memory_count"], args.write, args.data)
            except SystemExit as exc:
                reason = [ln for ln in str(exc).splitlines() if "Error" in ln or "within" in ln or "progress" in ln]
                got.update({"failed": (reason or str(exc).splitlines())[-1][:300],
                            "failed_after": time.monotonic() - svc.started})
            finally:
                stop_s = svc.stop(sig=signal.SIGKILL if args.crash else signal.SIGTERM)
            if args.crash:  # the servers exit on their own after SIGTERM; let them finish
                time.sleep(3)
            got.update({"run": run, "aof_base_bytes": sizes["base"], "aof_incr_bytes": sizes["incr"],
                        "redis_load_seconds": _load_seconds(svc), "stop": stop_s})
            results.append(got)
            if got.get("memory_count") is not None:
                expected = got["memory_count"] + got.get("written", 0)
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in got.items()}), flush=True)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    ok = [r for r in results if "recall" in r]
    if ok:
        print(f"median over {len(ok)} restarts: falkordb {statistics.median(r['falkordb'] for r in ok):.2f}s, "
              f"health {statistics.median(r['health'] for r in ok):.2f}s, "
              f"recall {statistics.median(r['recall'] for r in ok):.2f}s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1))
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
