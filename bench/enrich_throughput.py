"""Enrichment throughput: memories/s through the enrichment consumer with NER, embedding and
links, and with parts switched off.

Starts the embedded servers and every target in this process on a temp data dir (one per
configuration), stores ``--n`` LoCoMo turns through ``POST /memory/batch`` (500 per call), and
measures from the first store until every memory has ``enrichment_status`` DONE.

Usage:
    python bench/enrich_throughput.py                 # n=1000, all configurations
    python bench/enrich_throughput.py --n 300 --only full
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = {
    "full": {},
    "no_links": {"links_enabled": False},
    "no_entities": {"entities_enabled": False},
    "embed_only": {"links_enabled": False, "entities_enabled": False},
}


def _texts(n: int) -> list[str]:
    path = ROOT / "bench" / "out" / "export" / "memories.jsonl"
    if path.exists():
        rows = [json.loads(line)["content"] for line in path.open()][:n]
    else:
        rows = []
    while len(rows) < n:
        rows.append(f"Synthetic memory {len(rows)}: Alice met Bob in Berlin to discuss Postgres and Redis.")
    return rows


async def _one(name: str, update: dict, texts: list[str]) -> float:
    import httpx

    from services.common.embedded import EmbeddedRuntime
    from services.common.modules import Runner
    from services.common.settings import Settings

    with tempfile.TemporaryDirectory(prefix="automem-enrich-bench-") as tmp:
        settings = Settings(data_dir=Path(tmp), port=0, grpc_port=0, **update)
        runtime = EmbeddedRuntime(settings)
        settings = await runtime.start()
        runner = Runner(settings.model_copy(update={"port": 0, "grpc_port": 0}), ["all"])
        try:
            ctx = await runner.start()
            graph = ctx["graph"]
            # warm the models outside the measurement
            await asyncio.to_thread(ctx["embedder"].embed, ["warm up"])
            if ctx["enrich_consumer"].enricher.extractor is not None:
                await ctx["enrich_consumer"].enricher.extractor.warm()
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ctx['http_port']}", timeout=120) as http:
                started = time.perf_counter()
                for i in range(0, len(texts), 500):
                    r = await http.post("/memory/batch", json={"memories": [
                        {"content": t, "tags": ["bench"]} for t in texts[i: i + 500]]})
                    r.raise_for_status()
                while True:
                    rows = await graph.ro_query(
                        "MATCH (m:Memory) WHERE m.enrichment_status = 'ENRICHMENT_STATUS_DONE' RETURN count(m)")
                    if rows[0][0] >= len(texts):
                        break
                    await asyncio.sleep(0.2)
                elapsed = time.perf_counter() - started
            stats = ctx["enrich_consumer"].enricher.stats
            print(f"{name:12s} {len(texts) / elapsed:7.1f} memories/s  ({len(texts)} in {elapsed:.1f}s; "
                  f"SIMILAR_TO edges {stats.similar_edges}, proposals {stats.proposals})", flush=True)
            return len(texts) / elapsed
        finally:
            await runner.stop()
            await runtime.stop()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--only", default="", help="comma-separated configurations: " + ", ".join(CONFIGS))
    args = parser.parse_args()
    texts = _texts(args.n)
    chosen = [c.strip() for c in args.only.split(",") if c.strip()] or list(CONFIGS)
    for name in chosen:
        await _one(name, CONFIGS[name], texts)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
