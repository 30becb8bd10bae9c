"""Costs that must not grow with the data (issue 10, item 8): by-tag page latency at 100,
2,000 and 20,000 memories under one tag, before/after, and RSS growth per 1,000 memories
stored.

``pages``: starts the embedded servers and the ingest, recall, consolidate and gateway
targets in this process on a temp data dir (enrichment off: the listing reads the graph
only, and 22k embeddings would only add noise), stores the memories through
``POST /memory/batch`` — tags ``t100``, ``t2k``, ``t20k`` with those counts plus
``--others`` under 50 other tags, explicit timestamps spread over two years — then deletes
2% and supersedes 2% (replacement under the same tag) of each tag through the API.
Measured, interleaved A/B/A/B on the same graph:

* ``before``: the by-tag body of main before this change (every memory under the tag read,
  ordered, through the state pass, then sliced) — :func:`before_page`, kept here verbatim;
* ``after``: :func:`automem.recall.bytag.list_by_tag`, first page (the listing's newest time
  remembered from the previous first page), ``cold`` the same with nothing remembered, and
  ``deep`` a page reached by following ``next_page_token`` (page 3 for t100, 11 otherwise);
* ``rest``: ``GET /memory/by-tag?tags=<tag>&limit=20`` end to end (after only).

``rss``: a fresh service with every target (enrichment on, default models); stores
``--batches`` batches of 1,000 LoCoMo turns (``--data``, see bench/locomo_files.py; each with a unique
suffix so new tokens keep arriving, as real text does), waits for enrichment, and prints the
RSS of this process and the event stream's bytes after each batch, then the growth per 1,000
memories after ``--warmup`` batches. ``--no-vectors`` runs it with ``QDRANT_URL=disabled`` to
separate the embedded qdrant-edge shard's (native) share.

``arena``: MiniLM embedding time per text with onnxruntime's CPU arena on (before) and off
(after), interleaved (the memory-growth fix must not cost speed).

Usage:
    python bench/bytag.py pages [--rounds 30] [--json-out F]
    python bench/bytag.py rss [--batches 8] [--warmup 2] [--no-vectors]
    python bench/bytag.py arena [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files

SIZES = {"t100": 100, "t2k": 2_000, "t20k": 20_000}
PAGE_TARGETS = ["ingest", "recall", "consolidate", "gateway"]


def rss_mb() -> float:
    """Resident set size of this process (MiB), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def before_page(graph: Any, filters: Any, read: Any, states: list[str], limit: int, offset: int) -> list[Any]:
    """main's ListMemoriesByTag body before this change (commit 37924cf), for the A/B."""
    from automem.common.model import node_to_memory
    from automem.common.state import resolve
    from automem.graph.memories import filter_where

    where, params = filter_where(filters, "m")
    params["states"] = states
    rows = await graph.ro_query(
        f"MATCH (m:Memory) WHERE {where} AND m.state IN $states RETURN properties(m) "
        "ORDER BY m.event_time DESC, m.importance DESC", params)
    memories = [node_to_memory(r[0]) for r in rows]
    resolved = [r.memory for r in await resolve(graph, memories, filters.scope, read) if r is not None]
    resolved = [m for m in resolved if filters.matches(m)] if not read.history else resolved
    return resolved[offset: offset + limit]


async def _start(tmp: Path, targets: list[str], **update: Any) -> tuple[Any, Any, Any]:
    from automem.common.embedded import EmbeddedRuntime
    from automem.common.settings import Settings
    from automem.runner import Runner

    settings = Settings(data_dir=tmp, port=0, grpc_port=0, **update)
    runtime = EmbeddedRuntime(settings)
    settings = await runtime.start()
    runner = Runner(settings.model_copy(update={"port": 0, "grpc_port": 0}), targets)
    ctx = await runner.start()
    return runtime, runner, ctx


async def _build(http: Any, others: int) -> None:
    rnd = random.Random(10)
    start = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    span = 2 * 365 * 86400
    rows = [(tag, i) for tag, n in SIZES.items() for i in range(n)]
    rows += [(f"other{i % 50}", i) for i in range(others)]
    rnd.shuffle(rows)
    t0 = time.perf_counter()
    for i in range(0, len(rows), 500):
        body = {"memories": [{
            "content": f"Note {n} under {tag}: the team discussed item {rnd.randrange(10**6)} at length.",
            "tags": [tag, f"bucket{n % 7}"], "importance": round(rnd.random(), 2),
            "timestamp": datetime.fromtimestamp(start + rnd.random() * span, UTC).isoformat(timespec="milliseconds"),
        } for tag, n in rows[i: i + 500]]}
        r = await http.post("/memory/batch", json=body)
        r.raise_for_status()
    print(f"# stored {len(rows)} memories in {time.perf_counter() - t0:.1f} s", flush=True)
    # Withhold 2% of each tag (deleted) and replace 2% (superseded, replacement keeps the tag).
    sem = asyncio.Semaphore(8)

    async def one(method: str, url: str, **kw: Any) -> None:
        async with sem:
            r = await http.request(method, url, **kw)
            r.raise_for_status()
    for tag, n in SIZES.items():
        listed = (await http.get("/memory/by-tag", params={"tags": tag, "limit": 200})).json()["memories"]
        ids = [m["id"] for m in listed]
        k = max(1, n // 50)
        await asyncio.gather(*[one("DELETE", f"/memory/{mid}") for mid in ids[:k]])
        await asyncio.gather(*[one("POST", "/memory", json={"content": f"Replacement {j} under {tag}",
                                                            "tags": [tag], "supersedes_memory_id": mid})
                               for j, mid in enumerate(ids[k: 2 * k])])


async def pages(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from automem.common.state import ReadAt
    from automem.recall import bytag
    from automem.recall.bytag import list_by_tag
    from automem.recall.filters import Filters

    out: dict[str, Any] = {"command": " ".join(sys.argv), "date": datetime.now(UTC).isoformat(timespec="seconds"),
                           "sizes": SIZES, "rounds": args.rounds, "results": {}}
    with tempfile.TemporaryDirectory(prefix="automem-bytag-bench-") as tmp:
        runtime, runner, ctx = await _start(Path(tmp), PAGE_TARGETS)
        graph = ctx.graph
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ctx.http_port}", timeout=300) as http:
                await _build(http, args.others)
                states = ["ACTIVE", "SUPERSEDED"]
                variants = ["before", "cold", "after", "deep", "rest"]
                samples: dict[str, dict[str, list[float]]] = {t: {v: [] for v in variants} for t in SIZES}
                deep_tokens: dict[str, str] = {}
                for tag, n in SIZES.items():  # a token up to 10 pages in, for the "deep" variant
                    filters = Filters.build("default", [tag], "any", "exact", [], None, None)
                    token = ""
                    for _ in range(min(10, n // 40)):
                        _page, token = await list_by_tag(graph, filters, ReadAt(), states, limit=20, offset=0,
                                                        page_token=token, include_total=False, scan_max=2000)
                        if not token:
                            break
                    deep_tokens[tag] = token
                for _round in range(args.rounds):
                    for tag in SIZES:
                        filters = Filters.build("default", [tag], "any", "exact", [], None, None)
                        for variant in variants if _round % 2 == 0 else variants[::-1]:
                            read = ReadAt()
                            if variant == "cold":
                                bytag._NEWEST._data.clear()  # no remembered start: a first page ever
                            t0 = time.perf_counter()
                            if variant == "before":
                                got = await before_page(graph, filters, read, states, 20, 0)
                            elif variant == "rest":
                                r = await http.get("/memory/by-tag", params={"tags": tag, "limit": 20})
                                r.raise_for_status()
                                got = r.json()["memories"]
                            else:
                                got, _ = await list_by_tag(
                                    graph, filters, read, states, limit=20, offset=0,
                                    page_token=deep_tokens[tag] if variant == "deep" else "",
                                    include_total=False, scan_max=2000)
                                got = got.memories
                            samples[tag][variant].append((time.perf_counter() - t0) * 1000)
                            assert len(got) == 20, (tag, variant, len(got))
                print(f"{'tag':6} {'memories':>8}  {'variant':7} {'p50 ms':>8} {'p95 ms':>8}")
                for tag, n in SIZES.items():
                    out["results"][tag] = {}
                    for variant, values in samples[tag].items():
                        p50, p95 = statistics.median(values), pct(values, 0.95)
                        out["results"][tag][variant] = {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2)}
                        print(f"{tag:6} {n:8d}  {variant:7} {p50:8.2f} {p95:8.2f}", flush=True)
        finally:
            await runner.stop()
            await runtime.stop()
    return out


def _turns(path: Path) -> list[str]:
    """The dialogue turns' texts of the LoCoMo conversations at ``path`` (SystemExit when missing)."""
    data = json.loads(locomo_files.require_data(path).read_text())
    turns = []
    for conv in data:
        for value in conv["conversation"].values():
            if isinstance(value, list):
                turns += [t["text"] for t in value if isinstance(t, dict) and t.get("text")]
    return turns


async def rss(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    turns = _turns(args.data)
    rnd = random.Random(7)
    names = ["Alex", "Jordan", "Maria", "Chen", "Priya", "Tom", "Lena", "Omar"]
    update = {"qdrant_url": "disabled"} if args.no_vectors else {}
    out: dict[str, Any] = {"command": " ".join(sys.argv), "date": datetime.now(UTC).isoformat(timespec="seconds"),
                           "vectors": not args.no_vectors, "batches": []}
    with tempfile.TemporaryDirectory(prefix="automem-rss-bench-") as tmp:
        runtime, runner, ctx = await _start(Path(tmp), ["all"], **update)
        graph, bus = ctx.graph, ctx.bus
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ctx.http_port}", timeout=300) as http:
                stored = 0
                print(f"{'stored':>7} {'rss MiB':>8} {'stream MB':>9}", flush=True)
                for _batch in range(args.batches):
                    for _ in range(4):
                        body = {"memories": [{
                            "content": f"{rnd.choice(turns)} ({rnd.choice(names)}, note {stored + k}, "
                                       f"ref {rnd.randrange(10**6):06d})",
                            "tags": [f"conv-{(stored + k) % 10}", "bench"]} for k in range(250)]}
                        r = await http.post("/memory/batch", json=body)
                        r.raise_for_status()
                        stored += 250
                    while True:
                        rows = await graph.ro_query("MATCH (m:Memory) WHERE m.enrichment_status = "
                                                    "'ENRICHMENT_STATUS_DONE' RETURN count(m)")
                        if rows[0][0] >= stored:
                            break
                        await asyncio.sleep(0.3)
                    gc.collect()
                    info = await bus.js.stream_info(bus.settings.stream_name)
                    row = {"stored": stored, "rss_mib": round(rss_mb(), 1), "stream_mb": round(info.state.bytes / 1e6, 2)}
                    out["batches"].append(row)
                    print(f"{stored:7d} {row['rss_mib']:8.1f} {row['stream_mb']:9.2f}", flush=True)
        finally:
            await runner.stop()
            await runtime.stop()
    rows = out["batches"][args.warmup:]
    if len(rows) >= 2:
        per = 1000 / (rows[-1]["stored"] - rows[0]["stored"])
        out["rss_mib_per_1000_after_warmup"] = round((rows[-1]["rss_mib"] - rows[0]["rss_mib"]) * per, 2)
        out["stream_mb_per_1000"] = round((rows[-1]["stream_mb"] - rows[0]["stream_mb"]) * per, 2)
        print(f"RSS growth after {args.warmup} warm-up batches: {out['rss_mib_per_1000_after_warmup']} MiB per 1,000 "
              f"memories; event stream {out['stream_mb_per_1000']} MB per 1,000", flush=True)
    return out


def arena(args: argparse.Namespace) -> dict[str, Any]:
    """MiniLM embedding time with onnxruntime's CPU arena and memory patterns on (before)
    and off (after), interleaved on the same batches (LoCoMo turns, 1..64 texts, varied
    lengths: the shapes enrichment sends)."""
    import onnxruntime as ort

    from automem.common.embedding import MiniLMProvider

    after = MiniLMProvider()
    before = MiniLMProvider()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = after._session.get_session_options().intra_op_num_threads
    opts.inter_op_num_threads = 1
    before._session = ort.InferenceSession(after._session._model_path, sess_options=opts,
                                           providers=["CPUExecutionProvider"])
    turns = _turns(args.data)
    rnd = random.Random(5)
    batches = [[rnd.choice(turns) for _ in range(rnd.randint(1, 64))] for _ in range(args.calls)]
    times: dict[str, list[float]] = {"before": [], "after": []}
    for i, batch in enumerate(batches):
        for name in (("before", "after") if i % 2 == 0 else ("after", "before")):
            provider = before if name == "before" else after
            t0 = time.perf_counter()
            provider.embed(batch)
            times[name].append((time.perf_counter() - t0) * 1000 / len(batch))
    out = {"command": " ".join(sys.argv), "date": datetime.now(UTC).isoformat(timespec="seconds"), "calls": args.calls}
    for name, values in times.items():
        out[name] = {"ms_per_text_p50": round(statistics.median(values), 3)}
        print(f"{name:6} (arena {'on' if name == 'before' else 'off'}): {statistics.median(values):.3f} ms per text "
              f"(median of {len(values)} calls)", flush=True)
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("pages", help="by-tag page latency before/after at 100, 2k, 20k memories under a tag")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--others", type=int, default=3000, help="memories under other tags")
    p.add_argument("--json-out", default="")
    r = sub.add_parser("rss", help="RSS growth per 1,000 memories stored")
    r.add_argument("--batches", type=int, default=8)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--no-vectors", action="store_true")
    locomo_files.add_arguments(r, referee=False)
    r.add_argument("--json-out", default="")
    a = sub.add_parser("arena", help="MiniLM embedding time, onnxruntime arena on vs off")
    a.add_argument("--calls", type=int, default=200)
    locomo_files.add_arguments(a, referee=False)
    a.add_argument("--json-out", default="")
    args = parser.parse_args()
    if args.mode == "arena":
        result = arena(args)
    else:
        result = await (pages(args) if args.mode == "pages" else rss(args))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
