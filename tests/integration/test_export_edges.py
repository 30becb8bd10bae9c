"""The export's edges in bounded memory (automem/common/backup.py ``export_records``, which
``automem backup`` and ExportBackup, so ``automem export``, write): it held every edge of
the graph in a list until the nodes were written, then sorted them; its peak memory grew
with the edges (1,000 memories: 4.4 MB at 2,000 edges, 14.7 MB at 8,000, 55.6 MB at 32,000;
docs/benchmarks.md). The edges are read in keyset pages and sorted through runs on disk now:
the same records in the same order, at a peak that stays flat as the edges grow."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from automem.common import backup
from automem.graph import GraphStore

ROOT = Path(__file__).resolve().parents[2]


async def _graph(settings) -> GraphStore:
    graph = GraphStore(settings.model_copy(update={"graph_name": f"edges_{uuid.uuid4().hex[:8]}"}))
    await graph.ensure_schema()
    rng = random.Random(11)
    await graph.query("UNWIND range(0, 39) AS i CREATE (:Memory {id: 'm' + toString(i), version: 1})")
    await graph.query("UNWIND range(0, 9) AS i CREATE (:Entity {key: 'e' + toString(i)})")
    await graph.query("UNWIND range(0, 4) AS i CREATE (:Entity:Person {key: 'p' + toString(i)})")
    nodes = [f"m{i}" for i in range(40)] + [f"e{i}" for i in range(10)] + [f"p{i}" for i in range(5)]

    async def link(count: int, start: int) -> None:
        rows = [{"a": rng.choice(nodes[:40]), "b": rng.choice(nodes), "t": rng.choice(["RELATES_TO", "MENTIONS",
                                                                                      "SIMILAR_TO"]),
                 "s": round(rng.random(), 3), "n": start + i} for i in range(count)]
        for kind in ("RELATES_TO", "MENTIONS", "SIMILAR_TO"):
            await graph.query(
                "UNWIND $rows AS row MATCH (a {id: row.a}), (b) WHERE b.id = row.b OR b.key = row.b "
                f"CREATE (a)-[:{kind} {{strength: row.s, reason: 'link ' + toString(row.n), "
                "create_time: 1.7e9 + row.n}]->(b)", {"rows": [r for r in rows if r["t"] == kind]})

    await link(300, 0)
    # Deleted edges leave ids that later edges reuse: edge ids do not follow creation.
    await graph.query("MATCH ()-[r]->() WHERE id(r) % 7 = 3 DELETE r")
    await link(60, 1000)
    return graph


async def _expected_edges(graph: GraphStore, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The edge records the export writes, worked out from one query of every edge: sorted by
    (type, source labels, target labels, edge id), ends named by the nodes' refs."""
    refs = {r["properties"].get("id") or r["properties"].get("key"): r["ref"]
            for r in records if r["kind"] in ("memory", "node")}
    rows = await graph.ro_query("MATCH (a)-[r]->(b) RETURN type(r), labels(a), labels(b), id(r), "
                                "coalesce(a.id, a.key), coalesce(b.id, b.key), properties(r)")
    rows.sort(key=lambda row: (row[0], list(row[1]), list(row[2]), row[3]))
    return [{"kind": "edge", "source": refs[a], "target": refs[b], "type": kind, "properties": props}
            for kind, _, _, _, a, b, props in rows]


async def test_export_edges_are_the_same_in_order_and_content_when_sorted_through_runs_on_disk(
        settings, monkeypatch) -> None:
    """With runs too long to fill the edges are sorted in memory; with pages of 3 rows, runs of 5
    edges and 2 runs merged at a time, every window's edges come in several keyset pages and
    are sorted through many runs merged over several levels. Both exports are the same
    records in the same order, and their edges the ones a single query sorted gives; the
    tree before the change (all edges in a list, sorted) passes this test too."""
    graph = await _graph(settings)
    try:
        exports = []
        for page, run, merged in ((backup.PAGE, 10**9, 16), (3, 5, 2)):
            monkeypatch.setattr(backup, "PAGE", page)
            # raising=False: the same test runs on the tree before them (same records, same order)
            monkeypatch.setattr(backup, "EDGE_RUN", run, raising=False)
            monkeypatch.setattr(backup, "EDGE_RUNS_MERGED", merged, raising=False)
            records = [r async for r in backup.export_records(graph)]
            del records[0]["export_time"]
            exports.append(records)
        expected = await _expected_edges(graph, exports[0])
    finally:
        await graph.dump.drop()
        await graph.close()
    assert exports[1] == exports[0]
    edges = [r for r in exports[0] if r["kind"] == "edge"]
    assert len(edges) > 300 and edges == expected
    assert exports[0][-1] == {"kind": "end", "nodes": 55, "edges": len(expected), "events": 0}


@pytest.mark.parametrize("edges", [(600, 2400)])
def test_export_peak_memory_does_not_grow_with_the_edges(settings, edges: tuple[int, int]) -> None:
    """bench/export_edges_memory.py in a process of its own (tracemalloc's peak of an export,
    nothing else running), on the session's FalkorDB: 300 memories with 600, then 2,400
    edges, windows and pages of 50, runs of 100 edges. The old export's peak grew with the
    edges (858 KiB, then 2,861 KiB); it stays within a quarter now (475, then 481 KiB)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "export_edges_memory.py"), "--json", "--memories", "300",
         "--edges", *map(str, edges), "--page", "50", "--edge-run", "100", "--runs-merged", "4",
         "--falkordb", f"{settings.falkordb_host}:{settings.falkordb_port}"],
        capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    peaks = {int(k): v for k, v in json.loads(done.stdout.splitlines()[-1]).items()}
    few, many = edges
    assert peaks[many] < peaks[few] * 1.25, f"peak bytes by edge count: {peaks}"
