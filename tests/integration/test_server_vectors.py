"""The enrich + recall path on the Qdrant *server* backend (ServerVectorStore over
qdrant-client's local mode, ``QDRANT_URL=:memory:`` / ``local:<dir>``): store → vector point
with the one payload → recall through the vector arm. The backend itself is covered by the
shared suite in test_vector_store.py."""

from __future__ import annotations

from pathlib import Path

from automem.common.payload import build_payload
from automem.common.settings import Settings
from automem.vectors import ServerVectorStore, make_vector_store
from tests.conftest import eventually, start_service


async def test_make_vector_store_local_modes_are_server_backends(tmp_path: Path) -> None:
    for url in (":memory:", f"local:{tmp_path / 'qlocal'}"):
        store = make_vector_store(Settings(qdrant_url=url, data_dir=tmp_path, collection_name="mem"))
        assert isinstance(store, ServerVectorStore) and store.collection == "mem"
        await store.ensure_collection(4)
        await store.upsert("00000000-0000-0000-0000-000000000001", [0.1, 0.2, 0.3, 0.4], {"scope": "s"})
        assert await store.count() == 1
        await store.close()
    reopened = make_vector_store(Settings(qdrant_url=f"local:{tmp_path / 'qlocal'}", collection_name="mem"))
    await reopened.ensure_collection(4)
    assert await reopened.count() == 1  # local:<dir> persists
    await reopened.close()


async def test_store_enrich_recall_on_the_server_backend(settings: Settings) -> None:
    running = await start_service(settings.model_copy(update={"qdrant_url": ":memory:"}))
    try:
        vectors = running.ctx.vectors.inner  # under the BoundedVectorStore wrapper
        assert isinstance(vectors, ServerVectorStore)
        async with running.http() as http:
            ids = []
            for content, tags in [("We chose PostgreSQL as the primary database for billing", ["db"]),
                                  ("The team prefers dark mode in every editor", ["ui"])]:
                r = await http.post("/memory", json={"content": content, "tags": tags})
                assert r.status_code == 201, r.text
                ids.append(r.json()["memory_id"])

            async def embedded() -> dict | None:
                body = (await http.get(f"/memory/{ids[0]}")).json()["memory"]
                return body if body["embedding_status"] == "done" else None

            memory = await eventually(embedded, timeout=30)
            await eventually(lambda: _all(vectors, ids), timeout=30)
            points = {p.id: p for p in await vectors.retrieve(ids, with_vectors=True)}
            graph_memory = await running.ctx.graph.memories.get(ids[0], running.settings.default_scope)
            assert points[ids[0]].payload == build_payload(graph_memory)
            assert len(points[ids[0]].vector) == running.ctx.embedder.dimension
            assert memory["id"] == ids[0]

            health = (await http.get("/health")).json()
            assert health["qdrant"] == "connected" and health["vector_count"] == 2
            assert health["sync_status"] == "synced" and "degraded_arms" not in health

            r = (await http.get("/recall", params={"query": "which relational database do we use",
                                                   "limit": 2})).json()
            assert r["degraded"] == [] and "vector" in r["arms"]
            assert r["results"][0]["id"] == ids[0]
            assert r["results"][0]["score_components"]["vector"] > 0

            assert (await http.delete(f"/memory/{ids[1]}")).status_code == 200
            await eventually(lambda: _count_is(vectors, 1), timeout=30)
    finally:
        await running.runner.stop()


async def _all(vectors: ServerVectorStore, ids: list[str]) -> bool:
    return len(await vectors.retrieve(ids)) == len(ids)


async def _count_is(vectors: ServerVectorStore, n: int) -> bool:
    return await vectors.count() == n
