"""How often /health says something is wrong with a healthy service under load.

Polls ``GET /health`` every 0.5 s while 8 clients recall (``GET /recall``, limit 20) and 2
store batches of 50 (``POST /memory/batch``) as fast as they can, for SECONDS; prints how many
answers had each (status code, status, falkordb, qdrant, nats, memory_count present) and the
slowest answer in seconds. Start the service first (e.g. ``automem up`` on a copy of a store
bench/latency.py built: the batches are stored)::

    python bench/health_under_load.py http://127.0.0.1:8001 40
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import time

import httpx

QUERIES = ["what did we decide about the database", "camping trip", "who likes tea", "deploy friday",
           "pottery class", "career change", "adoption agency", "running shoes", "book recommendations",
           "music festival"]


async def recaller(url: str, stop: float) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        while time.time() < stop:
            await client.get("/recall", params={"query": random.choice(QUERIES), "limit": 20})


async def storer(url: str, stop: float) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        batch = 0
        while time.time() < stop:
            await client.post("/memory/batch", json={"memories": [
                {"content": f"load note {time.time()} {batch} {i}"} for i in range(50)]})
            batch += 1


async def poller(url: str, stop: float, out: list[tuple]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        while time.time() < stop:
            start = time.time()
            answer = await client.get("/health")
            took = time.time() - start
            body = answer.json()
            out.append((answer.status_code, body.get("status"), body.get("falkordb"), body.get("qdrant"),
                        body.get("nats"), "memory_count" in body, round(took, 3)))
            await asyncio.sleep(0.5)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("seconds", type=float)
    args = parser.parse_args()
    stop = time.time() + args.seconds
    out: list[tuple] = []
    await asyncio.gather(*[recaller(args.url, stop) for _ in range(8)],
                         *[storer(args.url, stop) for _ in range(2)], poller(args.url, stop, out))
    for answer, count in collections.Counter(row[:6] for row in out).most_common():
        print(count, answer)
    print("slowest s", max(row[6] for row in out), "answers", len(out))


if __name__ == "__main__":
    asyncio.run(main())
