"""Cost of the repeat locks a store takes (automem/ingest/servicer.py ``_checking_repeats``,
automem/ingest/memory_locks.py): one lock per (scope, content hash), held from the repeat
check to the create, so identical stores at once make one memory. The locks run on the
ingest process's event loop; this prints what taking and releasing them costs for a single
store (1 key) and a full batch (``--batch`` keys, default 500: settings ``batch_max``),
medians of ``--repeat`` rounds, uncontended (the common case: different contents).

    .venv/bin/python bench/repeat_locks.py [--batch 500] [--repeat 300]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import time

from automem.ingest.memory_locks import MemoryLocks


async def _median_seconds(locks: MemoryLocks, keys: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        async with locks.hold_all(keys):
            pass
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    locks = MemoryLocks()
    keys = [f"scope\n{hashlib.sha256(str(i).encode()).hexdigest()}" for i in range(args.batch)]
    single = await _median_seconds(locks, keys[:1], args.repeat * 10)
    batch = await _median_seconds(locks, keys, args.repeat)
    print(f"single store (1 key): {single * 1e6:.1f} us")
    print(f"batch of {args.batch}: {batch * 1e3:.2f} ms ({batch / args.batch * 1e6:.1f} us per item)")
    assert len(locks) == 0  # nothing kept after release


if __name__ == "__main__":
    asyncio.run(main())
