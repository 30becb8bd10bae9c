"""Peak Python memory of a full graph export (automem/common/backup.py ``export_records``, no
event stream) as the graph's edges grow and its nodes do not: ``--memories`` memories and,
for each count of ``--edges``, that many RELATES_TO edges among them (random pairs, a
strength, a reason and a create_time each). Every record is read and dropped, as a writer
of the file does; the peak is :mod:`tracemalloc`'s (Python allocations of this process,
FalkorDB's own memory aside). Prints one line per edge count, and with ``--json`` one JSON
object ``{"<edges>": <peak bytes>, ...}`` last.

    .venv/bin/python bench/export_edges_memory.py [--memories 1000] [--edges 2000 8000]

``--falkordb HOST:PORT`` uses a running FalkorDB (a fresh graph, dropped after) instead of
starting an embedded one. ``--page``, ``--edge-run`` and ``--runs-merged`` set the export's
``PAGE``, ``EDGE_RUN`` and ``EDGE_RUNS_MERGED`` (where the tree has them) to see the bound at
a small scale.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from automem.common import backup
from automem.common.embedded import EmbeddedFalkorDB
from automem.common.settings import Settings
from automem.graph import GraphStore

BATCH = 1000


async def build(graph: GraphStore, memories: int, edges: int, seed: int = 7) -> None:
    """``memories`` Memory nodes (``id`` m0, m1…) and ``edges`` RELATES_TO edges among them."""
    await graph.query("UNWIND range(0, $n - 1) AS i CREATE (:Memory {id: 'm' + toString(i), scope: 'bench', "
                      "content: 'bench memory ' + toString(i), version: 1})", {"n": memories})
    rng = random.Random(seed)
    pairs = [(rng.randrange(memories), rng.randrange(memories)) for _ in range(edges)]
    for start in range(0, edges, BATCH):
        await graph.query("UNWIND $rows AS row MATCH (a:Memory {id: row.a}), (b:Memory {id: row.b}) "
                          "CREATE (a)-[:RELATES_TO {strength: row.s, reason: row.r, create_time: row.t}]->(b)",
                          {"rows": [{"a": f"m{a}", "b": f"m{b}", "s": round(rng.random(), 3),
                                     "r": f"bench link {start + i}", "t": 1.7e9 + start + i}
                                    for i, (a, b) in enumerate(pairs[start:start + BATCH])]})


async def peak(graph: GraphStore) -> tuple[int, int]:
    """``(records, peak bytes)`` of one export of ``graph``, records dropped as read."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    records = 0
    async for _ in backup.export_records(graph):
        records += 1
    _, high = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return records, high


async def measure(settings: Settings, memories: int, edge_counts: list[int]) -> dict[int, int]:
    """Peak bytes of an export by edge count, each on a fresh graph of ``memories`` memories."""
    peaks: dict[int, int] = {}
    for edges in edge_counts:
        graph = GraphStore(settings.model_copy(update={"graph_name": f"bench_edges_{uuid.uuid4().hex[:8]}"}))
        try:
            await graph.ensure_schema()
            await build(graph, memories, edges)
            await peak(graph)  # a first run: the lazily made client objects are not the export's
            records, peaks[edges] = await peak(graph)
            print(f"{memories} memories, {edges} edges: {records} records, peak {peaks[edges] / 1024:.0f} KiB")
        finally:
            await graph.dump.drop()
            await graph.close()
    return peaks


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--edges", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--falkordb", default="", help="HOST:PORT of a running FalkorDB")
    parser.add_argument("--page", type=int, default=0)
    parser.add_argument("--edge-run", type=int, default=0)
    parser.add_argument("--runs-merged", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    for name, value in (("PAGE", args.page), ("EDGE_RUN", args.edge_run), ("EDGE_RUNS_MERGED", args.runs_merged)):
        if value and hasattr(backup, name):
            setattr(backup, name, value)
    server: Any = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.falkordb:
            host, _, port = args.falkordb.rpartition(":")
        else:
            server = EmbeddedFalkorDB(Path(tmp))
            await server.start()
            host, port = server.host, str(server.port)
        try:
            peaks = await measure(Settings(falkordb_host=host, falkordb_port=int(port)), args.memories, args.edges)
        finally:
            if server is not None:
                await server.stop()
    if args.json:
        print(json.dumps({str(k): v for k, v in peaks.items()}))


if __name__ == "__main__":
    asyncio.run(main())
