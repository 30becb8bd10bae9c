"""What the metrics cost on a recall (issue 15, item 6): ``SearchMemories`` over gRPC with every
metric instrument recording (A: ``rpc.server.call.duration`` in the interceptor,
``db.client.operation.duration`` around each FalkorDB and vector call,
``gen_ai.client.operation.duration`` and the batch size around the query's embedding) and
with the same instruments swapped for no-op ones (B), interleaved in one process.

One service (every target, in this process, like tests/conftest.py ``start_service``) on
embedded NATS and FalkorDB under a temporary directory; ``--memories`` synthetic memories
stored and enriched; then ``--rounds`` rounds of ``--recalls`` sequential recalls per side (A
first in even rounds, B first in odd ones). Prints, per side, the median wall time and the
process CPU time per recall (client and server share the process; CPU time is less
sensitive to other load on the machine than wall time), and the cost of one histogram
``record`` call alone.

Usage::

    .venv/bin/python bench/metrics_overhead.py --memories 300 --recalls 300 --rounds 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opentelemetry.metrics import NoOpHistogram

from automem.common import grpc_server, metrics
from automem.common.embedded import EmbeddedFalkorDB, EmbeddedNats
from automem.common.settings import Settings
from automem.runner import Runner
from automem.v1 import recall_service_pb2

WORDS = ["deploy", "friday", "database", "migration", "review", "budget", "design", "release", "incident",
         "customer", "roadmap", "meeting", "python", "latency", "cache", "schema", "backup", "search"]
#: Module attributes holding the instruments a recall records into.
PATCHED = [(grpc_server, "rpc_server_duration"), (metrics, "db_client_duration"), (metrics, "embedding_duration"),
           (metrics, "embedding_batch_size")]


def swap(on: bool, real: dict[tuple[object, str], object]) -> None:
    """Real instruments (``on``) or no-op ones."""
    for module, name in PATCHED:
        setattr(module, name, real[(module, name)] if on else NoOpHistogram(name))


async def recalls(client, n: int, offset: int) -> tuple[float, float]:
    """Wall and CPU seconds per recall over ``n`` sequential recalls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(offset, offset + n):
        await client.recall.SearchMemories(recall_service_pb2.SearchMemoriesRequest(
            query=f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]}", limit=10))
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


async def main_async(args: argparse.Namespace) -> None:
    from automem.common.client import AutomemClient
    from automem.common.metrics import configure_metrics

    with tempfile.TemporaryDirectory(prefix="observe-bench-") as tmp:
        nats, falkordb = EmbeddedNats(Path(tmp) / "nats"), EmbeddedFalkorDB(Path(tmp) / "falkordb")
        await nats.start()
        await falkordb.start()
        settings = Settings(data_dir=Path(tmp) / "data", nats_url=nats.url, falkordb_host=falkordb.host,
                            falkordb_port=falkordb.port, port=0, grpc_port=0, metrics_port=0,
                            consolidation_enabled=False, access_log=False)
        configure_metrics(settings)
        runner = Runner(settings, ["all"])
        ctx = await runner.start()
        try:
            client = AutomemClient.connect(f"127.0.0.1:{ctx.grpc_port}")
            from automem.v1 import ingest_service_pb2

            for start in range(0, args.memories, 100):
                await client.ingest.BatchCreateMemories(ingest_service_pb2.BatchCreateMemoriesRequest(memories=[
                    ingest_service_pb2.MemoryInput(content=f"note {i}: " + " ".join(
                        WORDS[(i * k) % len(WORDS)] for k in range(1, 9)), tags=[f"t{i % 10}"])
                    for i in range(start, min(start + 100, args.memories))]))
            while ctx.enrich_consumer.counters.processed < args.memories or await ctx.enrich_consumer.queue_depth():
                await asyncio.sleep(0.5)
            real = {(module, name): getattr(module, name) for module, name in PATCHED}
            await recalls(client, 30, 0)  # warm-up
            results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
            for k in range(args.rounds):
                for on in ((True, False) if k % 2 == 0 else (False, True)):
                    swap(on, real)
                    row = await recalls(client, args.recalls, k * args.recalls)
                    results[on].append(row)
                    print(f"round {k} metrics {'on ' if on else 'off'}: {row[0] * 1000:.2f} ms wall, "
                          f"{row[1] * 1000:.2f} ms CPU per recall", flush=True)
            swap(True, real)
            for on in (True, False):
                rows = results[on]
                print(f"median, metrics {'on ' if on else 'off'}: {statistics.median(r[0] for r in rows) * 1000:.2f} ms "
                      f"wall, {statistics.median(r[1] for r in rows) * 1000:.2f} ms CPU per recall")
            attributes = {"rpc.system.name": "grpc", "rpc.method": "automem.v1.RecallService/SearchMemories",
                          "rpc.response.status_code": "OK"}
            n = 100_000
            start = time.perf_counter()
            for _ in range(n):
                metrics.rpc_server_duration.record(0.0123, attributes)
            print(f"one histogram record: {(time.perf_counter() - start) / n * 1e6:.2f} us")
            await client.close()
        finally:
            await runner.stop()
            await nats.stop()
            await falkordb.stop()
    print(f"load average: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--recalls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
