"""Ingest and enrichment throughput at N memories, through the service's own write path.

Each run starts the embedded servers and every target in a fresh process on a temp data dir,
stores N memories through ``POST /memory/batch`` (500 per call, one client, one request
after the other) and waits until every memory has ``enrichment_status`` DONE (MiniLM
embedding, BM25 sparse vector with the PRECEDED_BY predecessor, spaCy NER, SIMILAR_TO links
and proposals: the default configuration). It prints, per run:

* ingest accepted/s: N / the time from the first store request to the last response;
* enrichment memories/s: N / the time from the first store to the last memory enriched;
* after ingest: the enrichment rate once every store was accepted (enriched after that
  moment / the time it took), i.e. the sustained rate with the whole backlog waiting;
* CPU time of the process tree (this process, FalkorDB, NATS) per memory over the whole
  measurement: what the work costs whatever else runs on the machine (2 free cores at
  C ms/memory bound the rate at 2000/C memories/s);
* cores: that CPU time over the wall time (how many cores the tree got on average), and the
  time its threads were runnable but waited for a core (schedstat), per memory: a tree that
  waits for cores is held back by the machine's other work, not by its own pipeline (on
  the shared machine every session's processes share the cores as one group: the kernel's
  autogroup scheduling), and the 1-minute load average at the end;
* mean batch size (events per fetched batch) and the RSS of the process.

Texts: the LoCoMo turns (``../shared/data/locomo``, exported by the referee into
``bench/out/export``), perturbed for copies past the first 1,451 (speaker names replaced,
conversation tag suffixed with the copy number, times shifted by a week per copy);
synthetic sentences when the data or the referee is missing (named on stderr; the paths come
from ``AUTOMEM_LOCOMO_DATA`` / ``AUTOMEM_LOCOMO_REFEREE``, see bench/locomo_files.py, so the
children of an ``--ab`` run see them too).

``--ab TREE`` runs the same measurement against another source tree (e.g. an export of the
commit before a change: ``git archive <rev> | tar -x -C /tmp/base``), A and B interleaved,
and prints the median of each. ``--predecessors`` measures only the PRECEDED_BY lookup: the
indexed lookup versus the scan of the whole scope it replaced, on a graph of N memories.
``--models`` measures only the two models on N texts in calls of 256 (as a bulk batch):
MiniLM with each ``threads x workers`` layout (texts/s, CPU ms per text, and whether the
vectors equal the first layout's bit for bit) and spaCy NER with each ``nlp.pipe`` batch size
(CPU ms per text, entities equal to the first's).

Usage:
    python bench/enrich_throughput.py --n 10000
    python bench/enrich_throughput.py --n 3000 --ab /tmp/automem-base --repeat 3
    python bench/enrich_throughput.py --n 1000 --config no_links --config embed_only
    python bench/enrich_throughput.py --predecessors --n 100000
    python bench/enrich_throughput.py --models --n 1500
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files

CONFIGS: dict[str, dict] = {
    "full": {},
    "no_links": {"links_enabled": False},
    "no_entities": {"entities_enabled": False},
    "embed_only": {"links_enabled": False, "entities_enabled": False},
}
NAMES = ["Alice", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Gustav", "Hana", "Ivan", "Jonas", "Keiko", "Lars",
         "Mira", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yara", "Zoe"]
EXPORT = ROOT / "bench" / "out" / "export" / "memories.jsonl"


def memories(n: int) -> list[dict]:
    """``n`` store requests' items (content, tags, timestamp): LoCoMo turns, perturbed."""
    referee, data = locomo_files.REFEREE, locomo_files.DATA
    if not EXPORT.exists():
        missing = [str(p) for p in (data, referee) if not p.is_file()]
        if missing:
            print(f"LoCoMo file(s) not found: {', '.join(missing)}; using synthetic sentences "
                  f"(set AUTOMEM_LOCOMO_DATA / AUTOMEM_LOCOMO_REFEREE; bench/locomo_files.py)", file=sys.stderr)
        else:
            subprocess.run([sys.executable, str(referee), str(data), "--export", str(EXPORT.parent), "--quiet"],
                           check=True, stdout=subprocess.DEVNULL)
    base = [json.loads(line) for line in EXPORT.open()] if EXPORT.exists() else []
    if not base:
        base = [{"content": f"Synthetic memory {i}: Alice met Bob in Berlin to discuss Postgres and Redis.",
                 "speaker": "Alice", "tags": ["synthetic", f"session_{i // 20}"], "timestamp": "2024-01-01T00:00:00"}
                for i in range(1000)]
    speakers = sorted({b["speaker"] for b in base})
    out = []
    for i in range(n):
        copy, turn = divmod(i, len(base))
        item = base[turn]
        content, tags, when = item["content"], list(item["tags"]), item["timestamp"]
        if copy:
            rng = random.Random(copy)
            for speaker in speakers:
                content = content.replace(speaker, f"{rng.choice(NAMES)}{copy}")
            tags[0] = f"{tags[0]}-{copy}"
            stamp = time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%S")) + copy * 7 * 86400
            when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(stamp))
        out.append({"content": content, "tags": tags, "timestamp": when})
    return out


async def measure(n: int, config: str, settle: float = 0.0) -> dict:
    """One run in this process (the source tree is whatever ``services`` imports from).
    ``settle``: seconds to wait after the last memory is enriched before the resident set of
    the process tree is read (``rss_end_mib``)."""
    import httpx

    from automem.common.embedded import EmbeddedRuntime
    from automem.common.settings import Settings
    from automem.runner import Runner

    items = memories(n)
    with tempfile.TemporaryDirectory(prefix="automem-enrich-bench-") as tmp:
        settings = Settings(data_dir=Path(tmp), port=0, grpc_port=0, **CONFIGS[config])
        runtime = EmbeddedRuntime(settings)
        settings = await runtime.start()
        runner = Runner(settings.model_copy(update={"port": 0, "grpc_port": 0}), ["all"])
        try:
            ctx = await runner.start()
            consumer = ctx.enrich_consumer
            stats = consumer.enricher.stats
            # warm the models outside the measurement
            await asyncio.to_thread(ctx.embedder.embed, ["warm up"])
            if consumer.enricher.extractor is not None:
                await consumer.enricher.extractor.warm()
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ctx.http_port}", timeout=600) as http:
                cpu_started, waited_started = _tree_cpu(), _tree_runqueue_wait()
                started = time.perf_counter()
                for i in range(0, n, 500):
                    r = await http.post("/memory/batch", json={"memories": items[i: i + 500]})
                    r.raise_for_status()
                ingested = time.perf_counter()
                done_at_ingest = stats.enriched + stats.refused
                while stats.enriched + stats.refused < n or await consumer.queue_depth() > 0:
                    await asyncio.sleep(0.25)
                finished = time.perf_counter()
                cpu = _tree_cpu() - cpu_started
                waited = _tree_runqueue_wait() - waited_started
            rows = await ctx.graph.ro_query(
                "MATCH (m:Memory) WHERE m.enrichment_status = 'ENRICHMENT_STATUS_DONE' RETURN count(m)")
            batches = getattr(consumer.counters, "batches", 0)
            return {
                "n": n, "config": config, "ingest_per_s": n / (ingested - started),
                "ingest_s": ingested - started, "enrich_per_s": n / (finished - started),
                "enrich_s": finished - started,
                "after_ingest_per_s": (n - done_at_ingest) / max(finished - ingested, 1e-9),
                "enriched_done": int(rows[0][0]), "similar_edges": stats.similar_edges, "proposals": stats.proposals,
                "mean_batch": consumer.counters.processed / batches if batches else None,
                "cpu_ms_per_memory": cpu * 1000 / n,
                "cores": cpu / (finished - started),
                "waited_ms_per_memory": waited * 1000 / n,
                "load_average": os.getloadavg()[0],
                "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "rss_end_mib": await _tree_rss_after(settle),
            }
        finally:
            await runner.stop()
            await runtime.stop()


async def _tree_rss_after(settle: float) -> float:
    """Resident set (MiB) of this process and its children (FalkorDB, NATS, worker processes)
    after ``settle`` seconds of idleness."""
    import psutil

    await asyncio.sleep(settle)
    me = psutil.Process()
    total = 0
    for proc in (me, *me.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total / 2**20


def _tree_runqueue_wait() -> float:
    """Seconds the threads of this process and its children (FalkorDB, NATS, the NER worker)
    have spent runnable but waiting for a core so far (``/proc/<pid>/task/<tid>/schedstat``,
    second field; 0 where the kernel has no schedstat). Threads that ended are not counted."""
    import psutil

    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error, OSError):
            for tid in os.listdir(f"/proc/{proc.pid}/task"):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    total += int(Path(f"/proc/{proc.pid}/task/{tid}/schedstat").read_text().split()[1])
    return total / 1e9


def _tree_cpu() -> float:
    """User + system CPU seconds of this process and its children (FalkorDB, NATS) so far."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


async def predecessors(n: int, sample: int = 200) -> dict:
    """ms per memory of the PRECEDED_BY lookup on a graph of ``n`` memories: the indexed
    lookup (Relations.link_predecessors, automem/graph/relations.py) and the scan of the scope it replaced."""
    from automem.common.embedded import EmbeddedFalkorDB
    from automem.common.model import Memory, content_hash, ts
    from automem.common.settings import Settings
    from automem.graph import GraphStore
    from automem.v1 import memory_pb2

    scan = ("UNWIND $ids AS mid MATCH (m:Memory {id: mid}) "
            "OPTIONAL MATCH (n:Memory) WHERE n.scope = m.scope AND n.id <> m.id "
            "AND n.state IN ['ACTIVE', 'SUPERSEDED'] "
            "AND (n.event_time < m.event_time OR (n.event_time = m.event_time AND n.create_time < m.create_time)) "
            "AND (size(m.tags_lower) = 0 OR any(t IN n.tags_lower WHERE t IN m.tags_lower)) "
            "WITH m, n ORDER BY n.event_time DESC, n.create_time DESC "
            "WITH m, collect(n)[0] AS prev RETURN m.id, prev.id")
    with tempfile.TemporaryDirectory(prefix="automem-pred-bench-") as tmp:
        server = EmbeddedFalkorDB(Path(tmp))
        await server.start()
        graph = GraphStore(Settings(falkordb_host=server.host, falkordb_port=server.port, graph_name="bench"))
        try:
            await graph.ensure_schema()
            items = memories(n)
            rows = []
            for i, item in enumerate(items):
                memory = Memory(id=f"{i:08d}-0000-4000-8000-000000000000", scope="default", content=item["content"],
                                content_hash=content_hash(item["content"]), tags=item["tags"], version=1)
                memory.state = memory_pb2.MEMORY_STATE_ACTIVE
                memory.event_time.CopyFrom(ts(time.mktime(time.strptime(item["timestamp"], "%Y-%m-%dT%H:%M:%S"))))
                memory.create_time.CopyFrom(ts(1.7e9 + i * 0.001))
                rows.append(memory)
            for i in range(0, n, 2000):
                await graph.memories.create_many(rows[i:i + 2000])
            ids = [m.id for m in rows[-sample:]]
            t = time.perf_counter()
            await graph.relations.link_predecessors(ids, time.time())
            indexed = (time.perf_counter() - t) * 1000 / len(ids)
            scan_ids = ids[: max(10, sample // 10)]
            t = time.perf_counter()
            expected = {r[0]: r[1] for r in await graph.ro_query(scan, {"ids": scan_ids})}
            scanned = (time.perf_counter() - t) * 1000 / len(scan_ids)
            got = {r[0]: r[1] for r in await graph.ro_query(
                "UNWIND $ids AS mid MATCH (m:Memory {id: mid})-[:PRECEDED_BY]->(p) RETURN m.id, p.id",
                {"ids": scan_ids})}
            same = all(got.get(mid) == prev for mid, prev in expected.items())
            return {"n": n, "indexed_ms_per_memory": indexed, "scan_ms_per_memory": scanned, "same_predecessors": same}
        finally:
            await graph.close()
            await server.stop()


def models(n: int, layouts: tuple[tuple[int, int], ...] = ((2, 1), (1, 1), (1, 2)),
           ner_batches: tuple[int, ...] = (64, 16, 256)) -> list[str]:
    """Lines of the ``--models`` report: MiniLM per ``(threads, workers)`` layout (and the wall
    ms of one-text calls, as a recall's query embedding) and spaCy NER per ``nlp.pipe`` batch
    size on the first ``n`` texts of :func:`memories`, in calls of 256."""
    import numpy as np

    from automem.common.embedding import MiniLMProvider
    from automem.enrich.entities import EntityExtractor

    texts = [m["content"] for m in memories(n)]
    calls = [texts[i:i + 256] for i in range(0, n, 256)]
    lines, first_vectors, first_entities = [], None, None
    for threads, workers in layouts:
        provider = MiniLMProvider(threads=threads, workers=workers)
        provider.embed(["warm up"])
        cpu, wall = time.process_time(), time.perf_counter()
        vectors = np.vstack([provider.embed(call) for call in calls])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        first_vectors = vectors if first_vectors is None else first_vectors
        one = []
        for text in texts[:100]:  # one text per call, as a recall's query
            started = time.perf_counter()
            provider.embed([text])
            one.append((time.perf_counter() - started) * 1000)
        lines.append(f"MiniLM threads={threads} workers={workers}: {n / wall:6.1f} texts/s  cpu {cpu * 1000 / n:5.2f} "
                     f"ms/text  one text p50 {statistics.median(one):5.2f} ms  "
                     f"same vectors as the first: {np.array_equal(vectors, first_vectors)}")
    for batch in ner_batches:
        extractor = EntityExtractor(batch_size=batch)
        extractor.extract_sync(["Alice met Bob in Berlin."])
        cpu = time.process_time()
        found = [[e.SerializeToString() for e in ents] for call in calls for ents in extractor.extract_sync(call)]
        cpu = time.process_time() - cpu
        first_entities = found if first_entities is None else first_entities
        lines.append(f"spaCy NER nlp.pipe batch_size={batch}: cpu {cpu * 1000 / n:5.2f} ms/text  "
                     f"same entities as the first: {found == first_entities}")
    lines.append(f"load average {os.getloadavg()[0]:.1f} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    return lines


def run_child(tree: str, n: int, config: str, py_spy: str = "", settle: float = 0.0) -> dict:
    """One measurement in a fresh process importing ``services`` from ``tree``."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = out.name
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--tree", tree, "--n", str(n),
           "--config", config, "--json-out", path, "--settle", str(settle)]
    if py_spy:
        cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "-r", "25", "--threads", "-f", "raw",
               "-o", py_spy,
               "--", *cmd]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    result = json.loads(Path(path).read_text())
    os.unlink(path)
    return result


def _line(label: str, r: dict) -> str:
    mean = f"{r['mean_batch']:.0f}" if r.get("mean_batch") else "-"
    return (f"{label:10s} {r['config']:11s} n={r['n']:<7d} ingest {r['ingest_per_s']:7.0f}/s  "
            f"enrichment {r['enrich_per_s']:6.1f}/s (after ingest {r['after_ingest_per_s']:6.1f}/s, "
            f"{r['enrich_s']:.0f} s)  cpu {r['cpu_ms_per_memory']:.1f} ms/memory  "
            f"cores {r.get('cores', 0):.2f}  waited for a core {r.get('waited_ms_per_memory', 0):.1f} ms/memory  "
            f"load {r.get('load_average', 0):.1f}  batch {mean}  "
            f"done {r['enriched_done']}  rss {r['rss_mib']:.0f} MiB (peak), "
            f"tree {r.get('rss_end_mib', 0):.0f} MiB (end)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--config", action="append", default=[], help="one of: " + ", ".join(CONFIGS))
    parser.add_argument("--ab", default="", help="another source tree to compare with (B)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per variant (A/B interleaved)")
    parser.add_argument("--predecessors", action="store_true", help="only the PRECEDED_BY lookup cost")
    parser.add_argument("--models", action="store_true", help="only the models: MiniLM layouts and NER batch sizes")
    parser.add_argument("--py-spy", default="", help="record the (first A) run with py-spy into this raw file")
    parser.add_argument("--json-out", default="")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds idle after the last enrichment before the process tree's RSS is read")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        sys.path.insert(0, args.tree)
        os.chdir(args.tree)
        result = asyncio.run(measure(args.n, (args.config or ["full"])[0], args.settle))
        Path(args.json_out).write_text(json.dumps(result))
        return 0
    if args.models:
        for line in models(args.n):
            print(line, flush=True)
        return 0
    if args.predecessors:
        sys.path.insert(0, str(ROOT))
        result = asyncio.run(predecessors(args.n))
        print(f"PRECEDED_BY lookup at n={result['n']}: indexed {result['indexed_ms_per_memory']:.2f} ms/memory, "
              f"scope scan {result['scan_ms_per_memory']:.2f} ms/memory, same predecessors: "
              f"{result['same_predecessors']}", flush=True)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(result))
        return 0
    variants = [("A", str(ROOT))] + ([("B", str(Path(args.ab).resolve()))] if args.ab else [])
    results: dict[tuple[str, str], list[dict]] = {}
    for config in args.config or ["full"]:
        for rep in range(args.repeat):
            for label, tree in variants:
                spy = args.py_spy if (args.py_spy and rep == 0 and label == "A") else ""
                r = run_child(tree, args.n, config, spy, args.settle)
                results.setdefault((label, config), []).append(r)
                print(_line(f"{label} run {rep + 1}", r), flush=True)
    print(f"\nmedians ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; A = {ROOT}"
          + (f", B = {args.ab}" if args.ab else "") + ")")
    summary = []
    for (label, config), runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("ingest_per_s", "enrich_per_s",
                                                                   "after_ingest_per_s", "enrich_s", "rss_mib",
                                                                   "rss_end_mib", "cpu_ms_per_memory")}
        med.update({k: statistics.median(r.get(k, 0.0) for r in runs)
                    for k in ("cores", "waited_ms_per_memory", "load_average")})
        med.update(n=args.n, config=config, enriched_done=min(r["enriched_done"] for r in runs),
                   mean_batch=statistics.median(r["mean_batch"] or 0 for r in runs))
        summary.append({"variant": label, **med, "runs": runs})
        print(_line(f"{label} median", med))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
