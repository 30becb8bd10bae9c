"""One suite for both vector-store backends.

``edge``: a qdrant-edge shard in a tmp dir. ``server``: ``ServerVectorStore`` over
qdrant-client's local mode (``:memory:``, or ``path=`` where persistence is tested).
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from automem.common.settings import Settings
from automem.vectors import (
    OPEN_ENDED,
    CollectionMissingError,
    DimensionMismatchError,
    EdgeVectorStore,
    ServerVectorStore,
    VectorFilter,
    VectorStore,
    make_vector_store,
)
from automem.vectors.shared import ShardServer, SharedVectorStore

DIM = 4
#: "shared": an edge shard served by ShardServer and used through SharedVectorStore, as
#: `automem up`'s children use the parent's shard (automem/vectors/shared.py).
BACKENDS = ["edge", "server", "shared"]
#: The contract compares vectors and cosine scores to 1e-6 across backends, so the edge shards
#: here store full precision; half precision (the default, Settings.vector_datatype) is
#: tested in tests/integration/test_vector_index_build.py.
CONTRACT_DATATYPE = "float32"


class SharedOverEdge(SharedVectorStore):
    """The client of a ShardServer over an edge shard, all three in this process; the server
    starts on the first call and :meth:`close` closes the three."""

    def __init__(self, where: Path) -> None:
        super().__init__(where / "run" / "vectors.sock", "memories")
        self.edge = EdgeVectorStore(where / "shard", "memories", datatype=CONTRACT_DATATYPE)
        self.server = ShardServer(self.edge, self.path)

    async def _call(self, method, *args, **kwargs):
        if self.server._server is None:
            await self.server.start()
        return await super()._call(method, *args, **kwargs)

    async def close(self) -> None:
        await super().close()
        await self.server.close()
        await self.edge.close()


def open_store(backend: str, where: Path, *, persistent: bool = False) -> VectorStore:
    if backend == "edge":
        return EdgeVectorStore(where / "shard", "memories", datatype=CONTRACT_DATATYPE)
    if backend == "shared":
        return SharedOverEdge(where)
    client = (
        AsyncQdrantClient(path=str(where / "qlocal"))
        if persistent
        else AsyncQdrantClient(location=":memory:")
    )
    return ServerVectorStore(collection="memories", client=client)


def prefixes(tags: list[str]) -> list[str]:
    """Hierarchical prefixes of the lower-cased tags ("a:b" -> "a", "a:b")."""
    out: list[str] = []
    for tag in tags:
        parts = tag.lower().split(":")
        for i in range(1, len(parts) + 1):
            p = ":".join(parts[:i])
            if p not in out:
                out.append(p)
    return out


def payload(
    mid: str,
    *,
    scope: str,
    tags: list[str],
    state: str,
    valid_from: float,
    valid_to: float,
    event_time: float,
    content: str = "",
    type_: str = "Context",
    version: int = 1,
) -> dict:
    return {
        "memory_id": mid,
        "scope": scope,
        "content": content or f"memory {mid[:8]}",
        "tags": tags,
        "tags_lower": [t.lower() for t in tags],
        "tag_prefixes": prefixes(tags),
        "type": type_,
        "state": state,
        "importance": 0.75,
        "confidence": 0.5,
        "valid_from": valid_from,
        "valid_to": valid_to,
        "event_time": event_time,
        "update_time": event_time + 1.0,
        "version": version,
        "content_hash": f"sha256:{mid[:12]}",
        "embedding_model": "test-4d",
    }


# name -> (vector, sparse, payload kwargs)
SPECS: dict[str, tuple[list[float], tuple[list[int], list[float]] | None, dict]] = {
    "A": (
        [1.0, 0.0, 0.0, 0.0],
        ([1, 2], [1.0, 1.0]),
        {
            "scope": "s1",
            "tags": ["Project:Web", "Urgent"],
            "state": "ACTIVE",
            "valid_from": 1000.0,
            "valid_to": OPEN_ENDED,
            "event_time": 1500.0,
            "type_": "Decision",
        },
    ),
    "B": (
        [0.9, 0.1, 0.0, 0.0],
        ([4], [1.0]),
        {
            "scope": "s1",
            "tags": ["project:api"],
            "state": "ACTIVE",
            "valid_from": 1000.0,
            "valid_to": 2000.0,
            "event_time": 2500.0,
        },
    ),
    "C": (
        [0.0, 1.0, 0.0, 0.0],
        ([2, 3], [1.0, 1.0]),
        {
            "scope": "s1",
            "tags": ["Personal"],
            "state": "SUPERSEDED",
            "valid_from": 2000.0,
            "valid_to": OPEN_ENDED,
            "event_time": 3000.0,
        },
    ),
    "D": (
        [0.5, 0.5, 0.5, 0.5],
        None,
        {
            "scope": "s2",
            "tags": ["project:web"],
            "state": "ACTIVE",
            "valid_from": 0.0,
            "valid_to": OPEN_ENDED,
            "event_time": 4000.0,
        },
    ),
    "E": (
        [-1.0, 0.0, 0.0, 0.0],
        None,
        {
            "scope": "s1",
            "tags": [],
            "state": "PENDING_REVIEW",
            "valid_from": 500.0,
            "valid_to": 1000.0,
            "event_time": 1000.0,
        },
    ),
}


class World:
    """A store loaded with SPECS; ``ids[name]`` is each point's UUID string."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store
        self.ids = {name: str(uuid.uuid4()) for name in SPECS}
        self.name_of = {v: k for k, v in self.ids.items()}
        self.payloads = {name: payload(self.ids[name], **kw) for name, (_, _, kw) in SPECS.items()}

    async def load(self) -> None:
        await self.store.ensure_collection(DIM)
        for name, (vec, sparse, _) in SPECS.items():
            await self.store.upsert(self.ids[name], vec, self.payloads[name], sparse=sparse)

    def names(self, ids) -> list[str]:
        return [self.name_of[i] for i in ids]

    async def matching(self, flt: VectorFilter) -> set[str]:
        """Names matching ``flt``, checked to agree across scroll, count and search."""
        pts, nxt = await self.store.scroll(flt, limit=100)
        assert nxt is None
        by_scroll = set(self.names(p.id for p in pts))
        assert await self.store.count(flt) == len(by_scroll)
        hits = await self.store.search([0.1, 0.2, 0.3, 0.4], limit=100, flt=flt)
        assert set(self.names(i for i, _ in hits)) == by_scroll
        return by_scroll


@pytest.fixture(params=BACKENDS)
async def world(request, tmp_path):
    store = open_store(request.param, tmp_path)
    w = World(store)
    await w.load()
    yield w
    await store.close()


def unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(unit(a), unit(b), strict=True))


# --------------------------------------------------------------------------------------


async def test_backend_name(world: World):
    assert world.store.backend in ("edge", "server")
    assert isinstance(world.store, VectorStore)
    assert await world.store.dimension() == DIM


async def test_round_trip_full_payload(world: World):
    pts = await world.store.retrieve([world.ids["B"], world.ids["A"], str(uuid.uuid4())], with_vectors=True)
    assert [p.id for p in pts] == [world.ids["B"], world.ids["A"]]  # request order, missing skipped
    b, a = pts
    assert b.payload == world.payloads["B"]
    assert a.payload == world.payloads["A"]
    assert a.payload["valid_to"] == OPEN_ENDED and isinstance(a.payload["valid_to"], float)
    assert a.payload["version"] == 1 and isinstance(a.payload["version"], int)
    assert a.payload["tags"] == ["Project:Web", "Urgent"]
    assert a.payload["tag_prefixes"] == ["project", "project:web", "urgent"]
    # cosine collections store normalised vectors
    assert b.vector == pytest.approx(unit(SPECS["B"][0]), abs=1e-6)
    assert a.vector == pytest.approx([1.0, 0.0, 0.0, 0.0], abs=1e-6)
    assert a.sparse is not None and a.sparse[0] == [1, 2] and a.sparse[1] == pytest.approx([1.0, 1.0])
    # without vectors
    (plain,) = await world.store.retrieve([world.ids["D"]])
    assert plain.vector is None and plain.payload == world.payloads["D"]
    assert await world.store.retrieve([]) == []


async def test_ids_are_normalised(world: World):
    upper = world.ids["A"].upper()
    (p,) = await world.store.retrieve([upper])
    assert p.id == world.ids["A"]
    with pytest.raises(ValueError):
        await world.store.retrieve(["not-a-uuid"])


async def test_upsert_replaces_point(world: World):
    new = payload(
        world.ids["A"],
        scope="s9",
        tags=["New"],
        state="ACTIVE",
        valid_from=1.0,
        valid_to=OPEN_ENDED,
        event_time=2.0,
        version=2,
    )
    await world.store.upsert(world.ids["A"], [0.0, 0.0, 1.0, 0.0], new)
    (p,) = await world.store.retrieve([world.ids["A"]], with_vectors=True)
    assert p.payload == new
    assert p.vector == pytest.approx([0.0, 0.0, 1.0, 0.0], abs=1e-6)
    assert p.sparse is None
    assert await world.store.count() == 5


async def test_set_payload_overwrites(world: World):
    await world.store.set_payload(world.ids["A"], {"scope": "s1", "note": "replaced"})
    (p,) = await world.store.retrieve([world.ids["A"]], with_vectors=True)
    assert p.payload == {"scope": "s1", "note": "replaced"}
    assert p.vector == pytest.approx([1.0, 0.0, 0.0, 0.0], abs=1e-6)  # vector untouched
    assert await world.matching(VectorFilter(tags_any=["urgent"])) == set()
    # missing point: no-op, no error, nothing created
    missing = str(uuid.uuid4())
    await world.store.set_payload(missing, {"scope": "s1"})
    assert await world.store.retrieve([missing]) == []
    assert await world.store.count() == 5


async def test_filter_scope(world: World):
    assert await world.matching(VectorFilter(scope="s1")) == {"A", "B", "C", "E"}
    assert await world.matching(VectorFilter(scope="s2")) == {"D"}
    assert await world.matching(VectorFilter(scope="nope")) == set()
    assert await world.matching(VectorFilter()) == set(SPECS)


async def test_filter_states(world: World):
    assert await world.matching(VectorFilter(states=["ACTIVE"])) == {"A", "B", "D"}
    assert await world.matching(VectorFilter(states=["SUPERSEDED", "PENDING_REVIEW"])) == {"C", "E"}
    assert await world.matching(VectorFilter(states=[])) == set()


async def test_filter_tags_any_all(world: World):
    assert await world.matching(VectorFilter(tags_any=["URGENT", "personal"])) == {"A", "C"}
    assert await world.matching(VectorFilter(tags_any=["project:web"])) == {"A", "D"}
    assert await world.matching(VectorFilter(tags_all=["project:web", "urgent"])) == {"A"}
    assert await world.matching(VectorFilter(tags_all=["project:web", "personal"])) == set()
    # "project" is a prefix, not a tag
    assert await world.matching(VectorFilter(tags_any=["project"])) == set()


async def test_filter_prefixes(world: World):
    assert await world.matching(VectorFilter(prefixes_any=["Project"])) == {"A", "B", "D"}
    assert await world.matching(VectorFilter(prefixes_any=["project:api", "personal"])) == {"B", "C"}
    assert await world.matching(VectorFilter(prefixes_all=["project", "urgent"])) == {"A"}
    assert await world.matching(VectorFilter(prefixes_all=["project", "project:web"])) == {"A", "D"}


async def test_filter_exclude_tags(world: World):
    assert await world.matching(VectorFilter(exclude_tags=["Urgent"])) == {"B", "C", "D", "E"}
    assert await world.matching(VectorFilter(scope="s1", exclude_tags=["urgent", "personal"])) == {"B", "E"}
    assert await world.matching(VectorFilter(prefixes_any=["project"], exclude_tags=["project:web"])) == {"B"}


async def test_filter_valid_at(world: World):
    # A [1000, open), B [1000, 2000), C [2000, open), D [0, open), E [500, 1000)
    assert await world.matching(VectorFilter(valid_at=999.0)) == {"D", "E"}
    assert await world.matching(VectorFilter(valid_at=1000.0)) == {"A", "B", "D"}  # to is exclusive
    assert await world.matching(VectorFilter(valid_at=1999.5)) == {"A", "B", "D"}
    assert await world.matching(VectorFilter(valid_at=2000.0)) == {"A", "C", "D"}
    assert await world.matching(VectorFilter(valid_at=4.0e9)) == {"A", "C", "D"}  # open-ended
    assert await world.matching(VectorFilter(valid_at=-1.0)) == set()


async def test_filter_event_time(world: World):
    # event times: A 1500, B 2500, C 3000, D 4000, E 1000
    assert await world.matching(VectorFilter(event_time_gte=2500.0)) == {"B", "C", "D"}
    assert await world.matching(VectorFilter(event_time_lte=1500.0)) == {"A", "E"}
    assert await world.matching(VectorFilter(event_time_gte=1500.0, event_time_lte=3000.0)) == {"A", "B", "C"}
    assert await world.matching(VectorFilter(event_time_gte=5000.0)) == set()


async def test_newest_event_time_follows_the_filter(world: World):
    # event times: A 1500, B 2500, C 3000, D 4000, E 1000
    assert await world.store.newest_event_time() == 4000.0
    assert await world.store.newest_event_time(VectorFilter(event_time_lte=3500.0)) == 3000.0
    assert await world.store.newest_event_time(VectorFilter(ids=[world.ids["A"], world.ids["E"]])) == 1500.0
    assert await world.store.newest_event_time(VectorFilter(ids=[])) is None
    assert await world.store.newest_event_time(VectorFilter(event_time_gte=5000.0)) is None


async def test_filter_ids(world: World):
    ids = [world.ids["B"], world.ids["D"], str(uuid.uuid4())]
    assert await world.matching(VectorFilter(ids=ids)) == {"B", "D"}
    assert await world.matching(VectorFilter(ids=ids, scope="s1")) == {"B"}
    assert await world.matching(VectorFilter(ids=[])) == set()


async def test_filters_combined(world: World):
    flt = VectorFilter(scope="s1", states=["ACTIVE", "SUPERSEDED"], valid_at=2500.0, event_time_lte=3500.0)
    assert await world.matching(flt) == {"A", "C"}


async def test_search_orders_by_cosine(world: World):
    q = [1.0, 0.0, 0.0, 0.0]
    hits = await world.store.search(q, limit=10)
    assert world.names(i for i, _ in hits) == ["A", "B", "D", "C", "E"]
    for i, score in hits:
        assert score == pytest.approx(cos(q, SPECS[world.name_of[i]][0]), abs=1e-5)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    top2 = await world.store.search(q, limit=2)
    assert world.names(i for i, _ in top2) == ["A", "B"]
    filtered = await world.store.search(q, limit=10, flt=VectorFilter(states=["ACTIVE"], scope="s1"))
    assert world.names(i for i, _ in filtered) == ["A", "B"]
    assert await world.store.search(q, limit=0) == []


async def test_filter_exclude_ids(world: World):
    assert await world.matching(VectorFilter(exclude_ids=[world.ids["A"], world.ids["C"]])) == {"B", "D", "E"}
    assert await world.matching(VectorFilter(scope="s1", exclude_ids=[world.ids["B"]])) == {"A", "C", "E"}


async def test_search_many_equals_one_search_per_request_with_payloads(world: World):
    requests = [([1.0, 0.0, 0.0, 0.0], 10, None),
                ([0.0, 1.0, 0.0, 0.0], 2, VectorFilter(scope="s1")),
                ([1.0, 0.0, 0.0, 0.0], 10, VectorFilter(states=["ACTIVE"], exclude_ids=[world.ids["A"]])),
                ([1.0, 0.0, 0.0, 0.0], 0, None),
                ([1.0, 0.0, 0.0, 0.0], 5, VectorFilter(ids=[]))]
    many = await world.store.search_many(requests)
    assert len(many) == len(requests)
    for (vector, limit, flt), hits in zip(requests, many, strict=True):
        single = await world.store.search(vector, limit=limit, flt=flt)
        assert [(i, pytest.approx(s, abs=1e-6)) for i, s in single] == [(i, s) for i, s, _ in hits]
        assert all(p == world.payloads[world.name_of[i]] for i, _, p in hits)
    assert "A" not in world.names(i for i, _, _ in many[2]) and many[2]
    assert many[3] == [] and many[4] == []
    assert await world.store.search_many([]) == []
    (some,) = await world.store.search_many(requests[:1], payload_keys=["scope", "version"])
    assert [p for _, _, p in some] == [{"scope": world.payloads[world.name_of[i]]["scope"],
                                        "version": world.payloads[world.name_of[i]]["version"]} for i, _, _ in some]
    with pytest.raises(DimensionMismatchError):
        await world.store.search_many([([1.0, 0.0], 3, None)])


async def test_upsert_many_writes_every_point_like_upsert(world: World):
    new = {name: str(uuid.uuid4()) for name in ("X", "Y")}
    await world.store.upsert_many([
        (new["X"], [0.0, 0.0, 3.0, 0.0], {"scope": "s1", "n": 1}, ([7], [2.0])),
        (new["Y"], [0.0, 1.0, 0.0, 0.0], {"scope": "s2", "n": 2}, None),
        (world.ids["A"], [0.0, 0.0, 0.0, 1.0], {"scope": "s9"}, ([], [])),
    ])
    x, y, a = await world.store.retrieve([new["X"], new["Y"], world.ids["A"]], with_vectors=True)
    assert x.payload == {"scope": "s1", "n": 1} and x.vector == pytest.approx([0.0, 0.0, 1.0, 0.0], abs=1e-6)
    assert x.sparse == ([7], [pytest.approx(2.0)])
    assert y.payload == {"scope": "s2", "n": 2} and y.sparse is None
    assert a.payload == {"scope": "s9"} and a.sparse is None  # replaced, sparse dropped
    assert await world.store.count() == 7
    await world.store.upsert_many([])
    with pytest.raises(DimensionMismatchError):
        await world.store.upsert_many([(str(uuid.uuid4()), [1.0, 0.0], {"scope": "s1"}, None)])
    assert await world.store.count() == 7


async def test_search_wrong_dimension(world: World):
    with pytest.raises(DimensionMismatchError) as err:
        await world.store.search([1.0, 0.0, 0.0], limit=3)
    assert "4" in str(err.value) and "3" in str(err.value)
    with pytest.raises(DimensionMismatchError):
        await world.store.upsert(str(uuid.uuid4()), [1.0, 0.0], {"scope": "s1"})
    assert await world.store.count() == 5


async def test_sparse_search_idf(world: World):
    # documents with a bm25 vector: A {1,2}, B {4}, C {2,3}  -> N = 3
    def idf(n: int, total: int = 3) -> float:
        return math.log(1.0 + (total - n + 0.5) / (n + 0.5))

    hits = await world.store.search_sparse([2, 3], [1.0, 1.0], limit=10)
    assert world.names(i for i, _ in hits) == ["C", "A"]
    assert hits[0][1] == pytest.approx(idf(2) + idf(1), rel=1e-4)
    assert hits[1][1] == pytest.approx(idf(2), rel=1e-4)
    only_a = await world.store.search_sparse([1], [2.0], limit=10)
    assert world.names(i for i, _ in only_a) == ["A"]
    assert only_a[0][1] == pytest.approx(2.0 * idf(1), rel=1e-4)
    filtered = await world.store.search_sparse(
        [2, 3], [1.0, 1.0], limit=10, flt=VectorFilter(states=["ACTIVE"])
    )
    assert world.names(i for i, _ in filtered) == ["A"]
    assert await world.store.search_sparse([99], [1.0], limit=10) == []
    assert await world.store.search_sparse([], [], limit=10) == []


async def test_count(world: World):
    assert await world.store.count() == 5
    assert await world.store.count(VectorFilter(scope="s1", states=["ACTIVE"])) == 2


async def test_scroll_paging(world: World):
    seen: list[str] = []
    pages = 0
    offset = None
    while True:
        pts, offset = await world.store.scroll(limit=2, offset=offset)
        pages += 1
        assert len(pts) <= 2
        for p in pts:
            assert p.vector is None
            assert p.payload == world.payloads[world.name_of[p.id]]
        seen += [p.id for p in pts]
        if offset is None:
            break
    assert pages == 3
    assert sorted(seen) == sorted(world.ids.values()) and len(seen) == 5
    pts, nxt = await world.store.scroll(VectorFilter(scope="s1"), limit=3)
    assert len(pts) == 3 and nxt is not None
    rest, end = await world.store.scroll(VectorFilter(scope="s1"), limit=3, offset=nxt)
    assert end is None
    assert set(world.names(p.id for p in pts + rest)) == {"A", "B", "C", "E"}


async def test_delete(world: World):
    await world.store.delete([world.ids["A"], str(uuid.uuid4())])
    assert await world.store.count() == 4
    assert await world.store.retrieve([world.ids["A"]]) == []
    hits = await world.store.search([1.0, 0.0, 0.0, 0.0], limit=10)
    assert "A" not in world.names(i for i, _ in hits)
    sparse = await world.store.search_sparse([1], [1.0], limit=10)
    assert sparse == []
    await world.store.delete([])
    assert await world.store.count() == 4


async def test_dimension_mismatch_keeps_points(world: World):
    with pytest.raises(DimensionMismatchError) as err:
        await world.store.ensure_collection(8)
    msg = str(err.value)
    assert "4" in msg and "8" in msg
    assert err.value.existing == 4 and err.value.requested == 8
    assert await world.store.dimension() == 4
    assert await world.store.count() == 5
    (a,) = await world.store.retrieve([world.ids["A"]])
    assert a.payload == world.payloads["A"]
    await world.store.ensure_collection(DIM)  # same size: idempotent
    assert await world.store.count() == 5


@pytest.mark.parametrize("backend", BACKENDS)
async def test_no_collection_yet(backend, tmp_path):
    store = open_store(backend, tmp_path)
    try:
        assert await store.dimension() is None
        if backend in ("edge", "shared"):
            with pytest.raises(CollectionMissingError):
                await store.count()
    finally:
        await store.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_reopen_after_close_keeps_everything(backend, tmp_path):
    store = open_store(backend, tmp_path, persistent=True)
    w = World(store)
    await w.load()
    await store.set_payload(w.ids["E"], {"scope": "s1", "state": "ARCHIVED"})
    await store.delete([w.ids["D"]])
    await store.close()

    again = open_store(backend, tmp_path, persistent=True)
    try:
        assert await again.dimension() == DIM
        with pytest.raises(DimensionMismatchError):
            await again.ensure_collection(16)
        await again.ensure_collection(DIM)
        assert await again.count() == 4
        pts = await again.retrieve(list(w.ids.values()), with_vectors=True)
        got = {w.name_of[p.id]: p for p in pts}
        assert set(got) == {"A", "B", "C", "E"}
        for name in ("A", "B", "C"):
            assert got[name].payload == w.payloads[name]
            assert got[name].vector == pytest.approx(unit(SPECS[name][0]), abs=1e-6)
        assert got["E"].payload == {"scope": "s1", "state": "ARCHIVED"}
        hits = await again.search([1.0, 0.0, 0.0, 0.0], limit=10, flt=VectorFilter(states=["ACTIVE"]))
        assert [w.name_of[i] for i, _ in hits] == ["A", "B"]
        sparse = await again.search_sparse([2, 3], [1.0, 1.0], limit=10)
        assert [w.name_of[i] for i, _ in sparse] == ["C", "A"]
        await again.upsert(str(uuid.uuid4()), [0.0, 0.0, 0.0, 1.0], {"scope": "s3"})
        assert await again.count(VectorFilter(scope="s3")) == 1
    finally:
        await again.close()


async def test_edge_is_single_process(tmp_path):
    """A second opener of one shard is refused with an error naming the settings that give
    each process its own store (a bare "Can't init WAL: WouldBlock" traceback ended the start
    of a second process on one data dir: break-it review)."""
    from automem.common.errors import HeldElsewhereError, ListenError

    first = EdgeVectorStore(tmp_path / "shard", "memories")
    await first.ensure_collection(DIM)
    second = EdgeVectorStore(tmp_path / "shard", "memories")
    try:
        with pytest.raises(HeldElsewhereError, match="AUTOMEM_DATA_DIR.*QDRANT_URL.*WouldBlock") as caught:
            await second.count()
        assert isinstance(caught.value, ListenError)  # printed as one line by automem up / serve
    finally:
        await second.close()
        await first.close()


async def test_closed_edge_store_refuses(tmp_path):
    store = EdgeVectorStore(tmp_path / "shard", "memories")
    await store.ensure_collection(DIM)
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.count()
    await store.close()  # idempotent


async def test_edge_calls_made_before_the_event_loop_is_busy_all_run_while_it_is(tmp_path):
    """The shard's calls queue in the store's own thread (automem/vectors/edge.py ``_run``):
    calls made before the event loop went busy all run while it stays busy. Handed over
    through the loop (an ``asyncio.Lock``), the next call started only on a turn of the loop
    (none of these ran here), and under load callers queued past the store bound."""
    store = EdgeVectorStore(tmp_path / "shard", "memories")
    await store.ensure_collection(DIM)
    try:
        ran: list[int] = []
        calls = [asyncio.ensure_future(store._run(lambda n=n: ran.append(n))) for n in range(20)]
        await asyncio.sleep(0)  # every call is made
        deadline = time.monotonic() + 10
        while len(ran) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)  # noqa: ASYNC251 (the point: the event loop thread is busy, not turning)
        assert ran == list(range(20))
        await asyncio.gather(*calls)
    finally:
        await store.close()


async def test_edge_call_cancelled_before_it_started_never_runs_and_the_rest_keep_their_order(tmp_path):
    """A caller that gives up (the store bound, automem/vectors/bounded.py) before its call
    started drops the call; a call running finishes before the next starts."""
    store = EdgeVectorStore(tmp_path / "shard", "memories")
    await store.ensure_collection(DIM)
    try:
        ran: list[str] = []
        release, running = threading.Event(), threading.Event()

        def hold() -> None:
            running.set()
            release.wait(10)
            ran.append("held")

        held = asyncio.ensure_future(store._run(hold))
        a, b, c = (asyncio.ensure_future(store._run(lambda x=x: ran.append(x))) for x in "abc")
        await asyncio.to_thread(running.wait, 10)
        held.cancel()  # running: finishes in the thread all the same
        b.cancel()  # not started: dropped
        for _ in range(3):
            await asyncio.sleep(0)  # the cancellations reach the thread's queue
        release.set()
        await asyncio.gather(a, c)
        for cancelled in (held, b):
            with pytest.raises(asyncio.CancelledError):
                await cancelled
        assert ran == ["held", "a", "c"]
    finally:
        await store.close()


async def test_make_vector_store(tmp_path):
    edge = make_vector_store(Settings(qdrant_url="", data_dir=tmp_path, collection_name="mem"))
    assert isinstance(edge, EdgeVectorStore)
    assert edge.backend == "edge" and edge.path == tmp_path / "qdrant" / "mem"
    await edge.close()
    assert make_vector_store(Settings(qdrant_url="disabled", data_dir=tmp_path)) is None
    assert make_vector_store(Settings(qdrant_url="DISABLED", data_dir=tmp_path)) is None
    server = make_vector_store(
        Settings(qdrant_url="http://127.0.0.1:6333", qdrant_api_key="", data_dir=tmp_path)
    )
    assert isinstance(server, ServerVectorStore)
    assert server.backend == "server" and server.collection == "memories"
    await server.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_concurrent_calls(backend, tmp_path):
    store = open_store(backend, tmp_path)
    try:
        await store.ensure_collection(DIM)
        ids = [str(uuid.uuid4()) for _ in range(40)]
        await asyncio.gather(
            *(store.upsert(i, [1.0, float(n), 0.0, 0.0], {"scope": "c", "n": n}) for n, i in enumerate(ids)),
            *(store.count() for _ in range(10)),
        )
        assert await store.count(VectorFilter(scope="c")) == 40
        pts = await store.retrieve(ids)
        assert [p.payload["n"] for p in pts] == list(range(40))
    finally:
        await store.close()


_CRASH_WRITER = """
import asyncio, os, sys, uuid
from automem.vectors import EdgeVectorStore

async def main():
    store = EdgeVectorStore(sys.argv[1], "memories")
    await store.ensure_collection(4)
    for n in range(25):
        await store.upsert(str(uuid.uuid4()), [1.0, float(n), 0.0, 0.0], {"scope": "crash", "n": n})
    os._exit(0)  # no flush, no close

asyncio.run(main())
"""


async def test_edge_acknowledged_writes_survive_a_hard_exit(tmp_path):
    root = Path(__file__).resolve().parents[2]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CRASH_WRITER, str(tmp_path / "shard"), cwd=str(root)
    )
    assert await proc.wait() == 0
    store = EdgeVectorStore(tmp_path / "shard", "memories")
    try:
        assert await store.dimension() == DIM
        assert await store.count(VectorFilter(scope="crash")) == 25
    finally:
        await store.close()
