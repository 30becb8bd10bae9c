"""The embedded shard builds its HNSW index in a child process and swaps it in
(automem/vectors/edge.py ``EdgeVectorStore.build_index``, automem/vectors/indexer.py):
no write made during the build is lost, searches answer the same, and a crash at any
step of the swap leaves one complete shard."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import uuid

import pytest

from automem.common.settings import Settings
from automem.vectors import EdgeVectorStore, VectorFilter
from tests.conftest import start_service

DIM = 16


def vec(rng: random.Random) -> list[float]:
    return [rng.uniform(-1.0, 1.0) for _ in range(DIM)]


def pid(i: int) -> str:
    return str(uuid.UUID(int=i + 1))


async def test_writes_during_a_build_survive_the_swap(tmp_path):
    rng = random.Random(7)
    store = EdgeVectorStore(tmp_path / "shard", "memories", index_threshold=400)
    await store.ensure_collection(DIM)
    vectors = {pid(i): vec(rng) for i in range(399)}
    await store.upsert_many([(p, v, {"scope": "s", "n": 0}, ([1, 2], [1.0, 0.5])) for p, v in vectors.items()])
    assert store.index_status()["building"] is False
    indexed_before = store._shard.info().indexed_vectors_count  # the sparse vectors only
    # the 400th point starts the build in the background
    vectors[pid(399)] = vec(rng)
    await store.upsert(pid(399), vectors[pid(399)], {"scope": "s", "n": 0})
    task = store._build_task
    assert task is not None
    # keep writing while the child builds: new points, payload changes, deletes
    deleted, relabelled, i = set(), set(), 400
    while not task.done():
        vectors[pid(i)] = vec(rng)
        await store.upsert(pid(i), vectors[pid(i)], {"scope": "s", "n": 0})
        victim = pid(rng.randrange(0, 400))
        if victim not in deleted:
            if rng.random() < 0.5:
                await store.delete([victim])
                deleted.add(victim)
            else:
                await store.set_payload(victim, {"scope": "s", "n": 1})
                relabelled.add(victim)
        i += 1
        await asyncio.sleep(0.005)
    await task
    first = dict(store.last_build)
    while not store._build_task.done():  # the writes during the build may have started another
        await store._build_task
    status = store.index_status()
    assert status["builds"] >= 1 and first["replayed"] > 0, (first, status)
    info = store._shard.info()
    # the dense vectors of the 400 points copied are indexed now (sparse ones always were)
    assert info.indexed_vectors_count >= indexed_before + 400
    alive = {p for p in vectors if p not in deleted}
    assert await store.count() == len(alive)
    assert await store.count(VectorFilter(scope="s")) == len(alive)
    points = {p.id: p for p in await store.retrieve(sorted(vectors), with_vectors=True)}
    assert set(points) == alive
    for p in relabelled - deleted:
        assert points[p].payload["n"] == 1
    for p in sorted(alive)[:50]:  # each point is its own nearest neighbour
        hits = await store.search(vectors[p], limit=1)
        assert hits[0][0] == p
    assert not (tmp_path / "shard.indexing").exists() and not (tmp_path / "shard.old").exists()
    at_build = json.loads((tmp_path / "shard.index.json").read_text())["points"]
    assert at_build >= 400
    await store.close()
    # the swapped shard is the one on disk, and it knows how many points came since its build
    again = EdgeVectorStore(tmp_path / "shard", "memories", index_threshold=10**6)
    assert await again.count() == len(alive)
    assert again.index_status()["points_since_build"] == max(0, len(alive) - at_build)
    await again.close()


async def _shard_with(tmp_path, n: int) -> EdgeVectorStore:
    rng = random.Random(1)
    store = EdgeVectorStore(tmp_path / "shard", "memories")
    await store.ensure_collection(DIM)
    await store.upsert_many([(pid(i), vec(rng), {"scope": "s"}, None) for i in range(n)])
    await store.close()
    return EdgeVectorStore(tmp_path / "shard", "memories")


@pytest.mark.parametrize("crash_point", ["copied", "renamed_old", "swapped"])
async def test_an_interrupted_swap_leaves_one_complete_shard(tmp_path, crash_point):
    store = await _shard_with(tmp_path, 30)
    shard, old, building = tmp_path / "shard", tmp_path / "shard.old", tmp_path / "shard.indexing"
    if crash_point == "copied":          # crashed during the build: the copy is garbage
        shutil.copytree(shard, building)
    elif crash_point == "renamed_old":   # crashed between the two renames
        shutil.copytree(shard, building)
        shard.rename(old)
    else:                                # crashed after the swap, before deleting the old shard
        shutil.copytree(shard, old)
    assert await store.count() == 30
    assert shard.is_dir() and not old.exists() and not building.exists()
    await store.close()


async def test_a_close_during_the_swap_waits_for_it_and_leaves_one_whole_shard(tmp_path, monkeypatch):
    """close() cancels a running build; when that happens while the shard's thread renames
    the built copy into place, the build's clean-up waits for the rename instead of deleting
    the copy under it, and the store reopens with every point."""
    import pathlib
    import threading

    store = await _shard_with(tmp_path, 40)
    assert await store.count() == 40
    entered, go = threading.Event(), threading.Event()
    present_when_renamed: list[bool] = []
    rename = pathlib.Path.rename

    def held_rename(self, target):
        if self.name.endswith(".indexing"):  # the swap's second rename: the copy goes live
            entered.set()
            go.wait(60)
            present_when_renamed.append(self.exists())
        return rename(self, target)

    monkeypatch.setattr(pathlib.Path, "rename", held_rename)
    build = store._build_task = asyncio.create_task(store.build_index())  # as a background build runs
    assert await asyncio.to_thread(entered.wait, 120)
    closing = asyncio.create_task(store.close())
    await asyncio.sleep(1.0)  # time for a clean-up that did not wait to delete the copy
    go.set()
    await asyncio.wait_for(closing, timeout=60)
    with contextlib.suppress(asyncio.CancelledError):
        await build
    assert present_when_renamed == [True], "the build's clean-up deleted the copy while the swap renamed it"
    monkeypatch.undo()
    again = EdgeVectorStore(tmp_path / "shard", "memories")
    assert await again.count() == 40
    assert len(await again.retrieve([pid(i) for i in range(40)])) == 40
    assert not (tmp_path / "shard.indexing").exists()
    await again.close()


async def test_a_failed_build_keeps_the_shard(tmp_path):
    store = await _shard_with(tmp_path, 20)
    assert await store.count() == 20
    # a copy the child cannot load: the build fails, the serving shard is untouched
    (tmp_path / "shard" / "edge_config.json").write_text("{not json")
    with pytest.raises(RuntimeError, match="index build"):
        await store.build_index()
    assert await store.count() == 20
    assert not (tmp_path / "shard.indexing").exists()
    await store.close()


@pytest.mark.parametrize("datatype", ["float16", "float32"])
async def test_the_dense_vectors_are_stored_as_asked_and_indexed_by_the_build(tmp_path, datatype):
    """Settings.vector_datatype reaches the shard a store creates, the HNSW build in the child
    loads that shard with its own type (qdrant-edge refuses another), and a vector comes
    back rounded to that type's precision only."""
    rng = random.Random(3)
    store = EdgeVectorStore(tmp_path / "shard", "memories", datatype=datatype)
    await store.ensure_collection(DIM)
    vectors = {pid(i): vec(rng) for i in range(300)}
    await store.upsert_many([(p, v, {"scope": "s"}, None) for p, v in vectors.items()])
    stored = json.loads((tmp_path / "shard" / "edge_config.json").read_text())["vectors"]["dense"]
    assert stored.get("datatype", "float32") == datatype
    dense_indexed = store._shard.info().indexed_vectors_count
    report = await store.build_index()
    assert report["points"] == 300
    assert store._shard.info().indexed_vectors_count >= dense_indexed + 300
    worst = 0.0
    for point in await store.retrieve(sorted(vectors), with_vectors=True):
        norm = sum(x * x for x in vectors[point.id]) ** 0.5  # cosine vectors are stored normalised
        worst = max(worst, max(abs(a - b / norm) for a, b in zip(point.vector, vectors[point.id], strict=True)))
    assert worst < (1e-3 if datatype == "float16" else 1e-6), worst
    if datatype == "float16":
        assert worst > 1e-6  # rounded, so half precision is really in use
    for p in sorted(vectors)[:30]:
        assert (await store.search(vectors[p], limit=1))[0][0] == p
    await store.close()


async def test_an_existing_shard_keeps_its_datatype(tmp_path):
    """A data directory made before half precision (float32) opens, serves and builds its
    index under a store configured for float16; only a new shard takes the setting."""
    rng = random.Random(4)
    old = EdgeVectorStore(tmp_path / "shard", "memories", datatype="float32")
    await old.ensure_collection(DIM)
    vectors = {pid(i): vec(rng) for i in range(50)}
    await old.upsert_many([(p, v, {"scope": "s"}, None) for p, v in vectors.items()])
    await old.close()
    store = EdgeVectorStore(tmp_path / "shard", "memories", datatype="float16")
    await store.ensure_collection(DIM)
    assert await store.count() == 50
    await store.build_index()
    assert (await store.search(vectors[pid(7)], limit=1))[0][0] == pid(7)
    stored = json.loads((tmp_path / "shard" / "edge_config.json").read_text())["vectors"]["dense"]
    assert stored.get("datatype", "float32") == "float32"
    await store.close()
    with pytest.raises(ValueError, match="datatype"):
        EdgeVectorStore(tmp_path / "other", "memories", datatype="float8")


async def test_a_process_that_embeds_nothing_opens_the_shard_without_the_model(settings: Settings) -> None:
    """``automem up``'s parent with recall and enrich in children runs ingest and consolidate
    over the shard: the collection gets the configured dimension and no model is loaded
    (automem/targets.py ``_start_vectors``; the model is ~92 MiB of RSS)."""
    running = await start_service(settings, ["ingest", "consolidate"])
    try:
        assert running.ctx.embedder is None
        assert running.ctx.vectors is not None and await running.ctx.vectors.dimension() == 384
    finally:
        await running.runner.stop()
