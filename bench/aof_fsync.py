"""Cost of FalkorDB's ``appendfsync`` policy on the embedded launcher: ``everysec`` against
``always`` (automem/common/embedded.py, AOF_FSYNC), interleaved A/B, medians printed.

Each round starts a fresh EmbeddedFalkorDB, creates 3000 Memory nodes in batches of 50 and
updates 1000 of them one query at a time (the shapes of tests/integration/test_persistence.py).

    .venv/bin/python bench/aof_fsync.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from test_persistence import _store, _update_one_by_one

from automem.common import embedded


async def _round(policy: str, root: Path) -> tuple[float, float]:
    embedded.AOF_FSYNC = policy
    data = Path(tempfile.mkdtemp(dir=root))
    server = embedded.EmbeddedFalkorDB(data)
    await server.start()
    try:
        t = time.perf_counter()
        ids = await _store(server, 3000, batch=50)
        batches = time.perf_counter() - t
        t = time.perf_counter()
        await _update_one_by_one(server, ids[:1000])
        singles = time.perf_counter() - t
    finally:
        await server.stop()
        shutil.rmtree(data, ignore_errors=True)
    return batches, singles


async def main(rounds: int) -> None:
    results: dict[str, list[tuple[float, float]]] = {"everysec": [], "always": []}
    root = Path(tempfile.mkdtemp(prefix="aof_fsync_"))
    try:
        for i in range(rounds):
            for policy in ("everysec", "always") if i % 2 == 0 else ("always", "everysec"):
                results[policy].append(await _round(policy, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for policy, rows in results.items():
        batches = statistics.median(r[0] for r in rows)
        singles = statistics.median(r[1] for r in rows)
        print(f"{policy:9s} 3000 nodes in 60 batches: {batches:.3f} s   1000 single updates: {singles:.3f} s"
              f" ({singles:.2f} ms each)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    asyncio.run(main(parser.parse_args().rounds))
