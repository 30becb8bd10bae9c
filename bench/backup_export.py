"""Time of a full graph export (automem/common/backup.py ``export_records``, the nodes and
edges; no event stream) on an embedded FalkorDB holding ``--memories`` memories, one version
each, an entity per 10 memories, a MENTIONS edge per memory and ``--links`` RELATES_TO edges
per memory. Prints the build time, the export's records and its seconds (median of
``--repeat``).

    .venv/bin/python bench/backup_export.py [--memories 20000] [--links 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from automem.common import backup
from automem.common.embedded import EmbeddedFalkorDB
from automem.common.model import Memory, memory_to_node
from automem.common.settings import Settings
from automem.graph import GraphStore

BATCH = 2000


async def _build(graph: GraphStore, memories: int, links: int) -> None:
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(memories)]
    for start in range(0, memories, BATCH):
        rows = []
        for mid in ids[start:start + BATCH]:
            node = memory_to_node(Memory(id=mid, scope="bench", content=f"bench memory {mid} " * 8, version=1))
            rows.append({"m": node, "v": {**{k: v for k, v in node.items() if k != "id"}, "memory_id": mid,
                                          "recorded_at": time.time(), "actor": "bench"}})
        await graph.query("UNWIND $rows AS row CREATE (m:Memory) SET m = row.m "
                          "CREATE (v:MemoryVersion) SET v = row.v", {"rows": rows})
    await graph.query("UNWIND range(0, $n) AS i CREATE (:Entity {key: 'e' + toString(i), scope: 'bench'})",
                      {"n": memories // 10})
    for start in range(0, memories, BATCH):
        await graph.query("UNWIND $rows AS row MATCH (m:Memory {id: row.id}), (e:Entity {key: row.e}) "
                          "CREATE (m)-[:MENTIONS {create_time: 1.0}]->(e)",
                          {"rows": [{"id": ids[i], "e": f"e{i // 10}"} for i in range(start, min(memories, start + BATCH))]})
    rng = random.Random(7)
    pairs = [(ids[i], ids[rng.randrange(memories)]) for i in range(memories) for _ in range(links)]
    for start in range(0, len(pairs), BATCH):
        await graph.query("UNWIND $rows AS row MATCH (a:Memory {id: row.a}), (b:Memory {id: row.b}) "
                          "CREATE (a)-[:RELATES_TO {strength: 0.5, create_time: 1.0}]->(b)",
                          {"rows": [{"a": a, "b": b} for a, b in pairs[start:start + BATCH]]})


async def _export(graph: GraphStore) -> int:
    return sum([1 async for _ in backup.export_records(graph)])


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=20000)
    parser.add_argument("--links", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedFalkorDB(Path(tmp))
        await server.start()
        try:
            settings = Settings(falkordb_host=server.host, falkordb_port=server.port, graph_name="bench_export")
            graph = GraphStore(settings)
            await graph.ensure_schema()
            began = time.perf_counter()
            await _build(graph, args.memories, args.links)
            print(f"built {args.memories} memories in {time.perf_counter() - began:.1f} s")
            times = []
            for _ in range(args.repeat):
                began = time.perf_counter()
                records = await _export(graph)
                times.append(time.perf_counter() - began)
            print(f"export: {records} records, median {statistics.median(times):.2f} s "
                  f"(runs {', '.join(f'{t:.2f}' for t in times)})")
            await graph.close()
        finally:
            await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
