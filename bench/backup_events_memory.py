"""Memory a backup's read of the event stream takes as the stream grows: the whole list
(``Bus.events_for(None)``, as automem/common/backup.py read it before) against the read that
holds one fetched batch (``Bus.stream_events``, what it reads now).

For each count of ``--events``: a fresh embedded nats-server and stream, that many
MEMORY_UPDATED events of realistic size (a memory's ``before`` and ``after`` with ~600
characters of content each) published in batches, then in a fresh process for each mode the
read of every event, each event serialised and dropped as the backup's writer does. Prints the
process's resident memory growth during the read (its peak, sampled every 5 ms by a thread,
less the resident memory before the read; protobuf's messages live outside Python's
allocator, so tracemalloc would not see them), in MiB.

    .venv/bin/python bench/backup_events_memory.py --events 5000 20000
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from automem.common.bus import Bus
from automem.common.embedded import EmbeddedNats
from automem.common.settings import Settings
from automem.v1 import events_pb2, memory_pb2

CONTENT = ("We decided to keep the staging cluster on the older node pool until the load tests pass; "
           "the on-call rota moves to the new tool next sprint and alerts go to the shared channel. ") * 3


def event(i: int) -> events_pb2.MemoryEvent:
    """A MEMORY_UPDATED event of memory ``m<i>`` with its before and after."""
    before = memory_pb2.Memory(id=f"m{i}", content=CONTENT, tags=["team", "ops"], importance=0.5)
    after = memory_pb2.Memory(id=f"m{i}", content=CONTENT + " (edited)", tags=["team", "ops"], importance=0.7)
    return events_pb2.MemoryEvent(event_id=str(uuid.uuid4()), type=events_pb2.EVENT_TYPE_MEMORY_UPDATED,
                                  memory_id=f"m{i}", scope="bench", before=before, after=after)


async def publish(url: str, stream: str, count: int) -> None:
    bus = Bus(Settings(nats_url=url, stream_name=stream))
    await bus.connect()
    try:
        for start in range(0, count, 500):
            await bus.publish_events([event(i) for i in range(start, min(count, start + 500))])
    finally:
        await bus.close()


async def read(url: str, stream: str, mode: str) -> tuple[int, float]:
    """Read every event in ``mode``; returns (events, MiB of resident growth at the peak)."""
    bus = Bus(Settings(nats_url=url, stream_name=stream))
    await bus.connect()
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    count = 0
    try:
        if mode == "list":
            for ev in await bus.events_for(None, limit=10**9):
                ev.SerializeToString()
                count += 1
        else:
            async for ev in bus.stream_events():
                ev.SerializeToString()
                count += 1
    finally:
        done.set()
        sampler.join()
        await bus.close()
    return count, (peak[0] - base) / 2**20


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--read", nargs=3, metavar=("URL", "STREAM", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        count, grew = await read(*args.read)
        print(count, f"{grew:.1f}")
        return
    for count in args.events:
        with tempfile.TemporaryDirectory() as tmp:
            server = EmbeddedNats(Path(tmp))
            await server.start()
            try:
                stream = "BENCH_EVENTS"
                await publish(server.url, stream, count)
                for mode in ("list", "stream", "list", "stream"):
                    out = (await asyncio.to_thread(
                        subprocess.run, [sys.executable, __file__, "--read", server.url, stream, mode],
                        capture_output=True, text=True, check=True)).stdout.split()
                    print(f"events {count:>7}  {mode:<6}  read {out[0]:>7}  resident growth {out[1]:>7} MiB",
                          flush=True)
            finally:
                await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
