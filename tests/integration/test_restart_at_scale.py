"""Restart at scale (issue 10): the embedded service holding 20,000 memories stops and starts
again with every memory and every vector back, and recall answers.

The service runs as ``automem up`` does (EmbeddedRuntime, then the targets; automem/common/
cli/main.py ``_run``), in this process so the test reads the stores through the service's own
modules. Memories go in through ``POST /memory/batch`` (500 per call); their vector points are
written by the service's reindex path (automem/common/backup.py ``reindex``: the payload
builder, WordLlama vectors, BM25 sparse vectors), which takes about a minute where the
per-memory enrichment consumer would take ten on 2 cores. So both runs leave the ``enrich``
target out: its consumer would otherwise re-enrich the 20,000 stored events after the restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

import httpx
import pytest

from automem.common.backup import reindex
from automem.common.embedded import EmbeddedRuntime
from automem.common.settings import Settings
from automem.runner import Runner

N_MEMORIES = 20_000
BATCH = 500
TARGETS = ["ingest", "recall", "consolidate", "gateway"]


def _settings(data_dir: Path) -> Settings:
    # Explicit values so AUTOMEM_*/NATS_URL/FALKORDB_HOST in the environment don't leak in.
    return Settings(
        data_dir=data_dir, nats_url="", falkordb_host="", nats_port=0, falkordb_port=0, falkordb_password="",
        port=0, grpc_port=0, api_token="", admin_token="", qdrant_url="",
        embedding_provider="wordllama", consolidation_enabled=False,
    )


class _Up:
    """``automem up`` in this process: the embedded servers, then :data:`TARGETS`."""

    def __init__(self, settings: Settings) -> None:
        self.runtime = EmbeddedRuntime(settings)
        self.runner: Runner | None = None
        self.ctx = None

    async def __aenter__(self) -> Self:
        effective = await self.runtime.start()
        try:
            self.runner = Runner(effective, TARGETS)
            self.ctx = await self.runner.start()
        except BaseException:
            await self.runtime.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.runner.stop()
        finally:
            await self.runtime.stop()

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.ctx.http_port}", timeout=300)

    async def graph_ids(self) -> list[str]:
        rows = await self.ctx.graph.ro_query("MATCH (m:Memory) RETURN m.id")
        return [row[0] for row in rows]

    async def vector_ids(self) -> list[str]:
        vectors, ids, offset = self.ctx.vectors, [], None
        while True:
            points, offset = await vectors.scroll(limit=2048, offset=offset)
            ids += [p.id for p in points]
            if offset is None:
                return ids


def _contents() -> list[str]:
    topics = ["the garden", "a trip to Lisbon", "the new database", "piano lessons", "a budget review",
              "the support group", "marathon training", "a job interview"]
    return [f"Memory {i}: talked with person {i % 97} about {topics[i % len(topics)]} on day {i // 50}"
            for i in range(N_MEMORIES)]


@pytest.mark.timeout(900)  # ~2 minutes here; the suite's 300 s default is tight on a busy machine
async def test_restart_with_20k_memories_brings_back_every_memory_and_vector(tmp_path: Path):
    settings = _settings(tmp_path / "data")
    stored: list[str] = []
    async with _Up(settings) as up:
        async with up.http() as http:
            contents = _contents()
            for i in range(0, N_MEMORIES, BATCH):
                r = await http.post("/memory/batch", json={"memories": [
                    {"content": c, "tags": ["scale", f"day-{(i + k) // 50}"]}
                    for k, c in enumerate(contents[i: i + BATCH])]})
                assert r.status_code == 201, r.text
                stored += r.json()["memory_ids"]
        assert len(set(stored)) == N_MEMORIES
        counts = await reindex(up.ctx.graph, up.ctx.vectors, up.ctx.embedder, batch=500)
        assert counts == {"reindexed": N_MEMORIES, "removed": 0}
        graph_before = await up.graph_ids()
        vectors_before = await up.vector_ids()
    assert set(graph_before) == set(stored) and len(graph_before) == N_MEMORIES
    assert set(vectors_before) == set(stored) and len(vectors_before) == N_MEMORIES

    async with _Up(settings) as up:
        graph_after = await up.graph_ids()
        vectors_after = await up.vector_ids()
        async with up.http() as http:
            health = (await http.get("/health")).json()
            recall = await http.get("/recall", params={"query": "piano lessons", "tags": "day-7",
                                                           "tag_match": "exact", "limit": 10})
            one = await http.get(f"/memory/{stored[12_345]}")
    assert len(graph_after) == N_MEMORIES and set(graph_after) == set(graph_before)
    assert len(vectors_after) == N_MEMORIES and set(vectors_after) == set(vectors_before)
    assert health["memory_count"] == N_MEMORIES and health["vector_count"] == N_MEMORIES
    assert recall.status_code == 200
    hits = recall.json()["results"]
    assert hits and all("day-7" in h["memory"]["tags"] for h in hits)
    assert "piano lessons" in hits[0]["memory"]["content"]
    assert "vector" in recall.json()["arms"]
    assert one.status_code == 200 and one.json()["memory"]["content"] == _contents()[12_345]
