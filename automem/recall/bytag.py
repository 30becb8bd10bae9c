"""The by-tag listing (AutoMem's ``GET /memory/by-tag``): indexed, keyset-paged, and every
memory through the one state pass.

Order: ``event_time`` descending, then ``importance`` descending, then ``id`` ascending (the
id makes the order total, so a cursor is exact). A memory is listed at its own position when
the state pass (:func:`automem.common.state.resolve`) finds it is its own current head; a
superseded memory is never listed in its successor's place (the successor, when it carries
the tags, is listed at its own position), so each memory appears at most once across pages.

Cost of a page: FalkorDB range indexes on ``Memory.tags_lower`` and ``Memory.entity_tags``
(array properties; :meth:`automem.graph.store.GraphStore.ensure_schema`; the index reads are
:class:`automem.graph.memories.TagIndex`) intersected with
the ``scope`` index and a *window* of the ``event_time`` index. The walk reads windows from
the cursor backwards; each window query returns at most :data:`PROBE_CAP` rows, unordered
(FalkorDB stops scanning at the LIMIT; an ORDER BY would sort the whole window first), and
the rows are ordered here. A window that fills the cap was too wide: it is narrowed and read
again, and later windows close in on it by bisection; a window with too few rows is followed
by a wider one, sized from the density just seen. So a page reads a few windows of at most
:data:`PROBE_CAP` rows whether 100 or 100,000 memories carry the tag (measured in
bench/bytag.py, docs/benchmarks.md). The width that fit travels in the page token, so the
next page starts with the right window; a first page starts from the newest time the last
first page of the same tags saw (a bounded in-process map, only a starting point: everything
after it is read first).

Limits of the index (cost then grows with what the windows hold, bounded per page by
``Settings.by_tag_scan_max`` rows read):

* ``tag_match=prefix`` has no index (a FalkorDB array index answers membership only; an index
  of every tag prefix measured +170 MB per 100k memories): the windows read the scope's
  memories and the prefix is checked here, so a rare prefix reads more windows per page;
* ``tag_mode=all`` with an entity tag (``entity:...``, matched in ``entity_tags`` too) is
  driven by the plain tags of the request (or the first tag) and the rest checked here;
* memories sharing one ``event_time`` (a batch stores its memories at one time; imports
  may give one date) are read together, up to :data:`TIES_CAP` in one query, beyond that
  with an ORDER BY over that one time.

A page whose reads hit ``by_tag_scan_max`` before ``limit`` current memories were found
(many withheld candidates, or a rare prefix) is returned short with ``has_more`` and a
token that continues after the last row read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from automem.common.errors import InvalidArgument
from automem.common.model import OPEN_END, Memory, first_epoch
from automem.common.state import ReadAt, hydrate_at, resolve
from automem.graph import GraphStore
from automem.graph.memories import ENRICHMENT_FIELDS, ENTITY_TAG_PREFIX, filter_where
from automem.recall.filters import Filters
from automem.v1 import memory_pb2

#: Most rows one window query returns (its cost bound); a full window is read again narrower.
PROBE_CAP = 128
#: Most rows read at once at one exact time (a batch stores up to 500 memories at one time).
TIES_CAP = 512
#: Width of the first window (seconds) when the token brings none.
FIRST_WIDTH = 60.0
#: Times are stored at millisecond precision (automem/common/model.py ``parse_time``): a
#: window narrower than this holds a single time, ordered with ORDER BY instead.
MIN_WIDTH = 1e-3
#: 0001-01-01T00:00:00Z, the earliest time the service accepts; below it the walk ends.
FLOOR = -62135596800.0
#: Window growth per probe, at most (and the factor used after an empty window).
MAX_GROWTH = 8.0
TOKEN_VERSION = 1
#: Fields of a memory a later page takes from its live node when it reads the memory's
#: version (:func:`with_live_fields`): what enrichment writes without a version
#: (automem/graph/memories.py ``ENRICHMENT_FIELDS``; ``entities``, whose ``entity_tags`` the
#: node derives, automem/graph/entities.py ``write_many``) and the access bookkeeping no
#: version records (automem/graph/versions.py ``UNTRACKED``).
LIVE_FIELDS = tuple(n for n in ENRICHMENT_FIELDS if n != "entity_tags") + ("last_access_time", "relevance_score")


@dataclass(frozen=True)
class Key:
    """A memory's position in the listing order."""

    t: float
    importance: float
    id: str

    def order(self) -> tuple[float, float, str]:
        """Sort key: ascending order of this tuple is the listing order."""
        return (-self.t, -self.importance, self.id)


@dataclass
class Row:
    """One index row: position, state and (when the predicate is checked here) tags."""

    key: Key
    state: str
    tags: list[str] = field(default_factory=list)


@dataclass
class Page:
    """One page: ``memories`` in order, ``has_more``, ``next_key`` (None = end), the window
    width for the next page (seconds), and ``total`` when known exactly."""

    memories: list[Memory]
    has_more: bool
    next_key: Key | None
    width: float
    total: int | None = None
    scanned: int = 0


@dataclass(frozen=True)
class Cursor:
    """A decoded page token: where to continue, the window width, and the pinned read
    times of the first page (so every page reads the same snapshot)."""

    key: Key
    width: float
    as_of: float
    known_at: float
    fingerprint: str
    #: The first page read the versions believed at ``known_at`` (automem/common/state.py ``ReadAt.past``).
    past: bool = False


def fingerprint_filters(filters: Filters) -> str:
    """Scope, tags and their matching, as a short hash."""
    body = json.dumps([filters.scope, filters.tags, filters.tag_mode, filters.tag_match], separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def fingerprint(filters: Filters, read: ReadAt) -> str:
    """What a token is bound to: scope, tags and their matching, and the read mode."""
    body = json.dumps([fingerprint_filters(filters), read.mode, read.include_archived, read.include_pending],
                      separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def encode_token(cursor: Cursor) -> str:
    """The opaque ``page_token`` of ``cursor`` (URL-safe base64 of compact JSON)."""
    body = {"v": TOKEN_VERSION, "t": cursor.key.t, "i": cursor.key.importance, "id": cursor.key.id,
            "w": cursor.width, "a": cursor.as_of, "k": cursor.known_at, "f": cursor.fingerprint}
    if cursor.past:
        body["p"] = True
    return base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_token(token: str) -> Cursor:
    """The cursor of a ``page_token``. InvalidArgument (field ``page_token``) when it is not
    one this service issued: not its JSON, another version, a value of the wrong type, a
    number that is not finite, or a time (``t``, ``a``, ``k``) outside :data:`FLOOR` ..
    ``OPEN_END`` + 1 s (automem/common/model.py), the times the graph stores."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
        if body.get("v") != TOKEN_VERSION:
            raise ValueError("version")
        values = [float(body[k]) for k in ("t", "i", "w", "a", "k")]
        if not isinstance(body["id"], str) or not isinstance(body["f"], str):
            raise TypeError("types")
        if not all(math.isfinite(v) for v in values):
            raise ValueError("not finite")
        # A time outside what the graph stores: at t = 1e17, t - width rounds back to t and
        # the window walk never moved (16 s of FalkorDB reads until the deadline; break-it).
        if not all(FLOOR <= values[k] <= OPEN_END + 1.0 for k in (0, 3, 4)):
            raise ValueError("time out of range")
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError, RecursionError):  # crafted deep JSON
        raise InvalidArgument("page_token: not a token of this listing", field="page_token") from None
    t, importance, width, as_of, known_at = values
    return Cursor(Key(t, importance, body["id"]), max(width, MIN_WIDTH), as_of, known_at, body["f"],
                  body.get("p") is True)


class TagWalk:
    """Index rows under the tags in listing order, after a key, read window by window.

    Args:
        graph: the graph store.
        filters: scope and tags (``Filters.build``).
        width: first window width in seconds (from the token, or :data:`FIRST_WIDTH`).
        target: rows the caller expects to need; windows are sized to hold about this many.
        now: the read time; a first page reads the memories dated after it first.
    """

    def __init__(self, graph: GraphStore, filters: Filters, width: float, target: int, now: float) -> None:
        self.graph = graph
        self.filters = filters
        self.width = min(max(width, MIN_WIDTH), OPEN_END - FLOOR)
        self.target = max(target, 1)
        self.now = now
        self.queries = 0
        self._hint = self.width
        #: Newest event_time at or before ``now`` seen by a first page (for :data:`_NEWEST`).
        self.newest_past: float | None = None
        self._index = graph.memories.tag_index(filters)
        #: Whether rows must still be checked with :meth:`Filters.tags_match`.
        self.check = self._index.check

    def _row(self, r: list[Any]) -> Row:
        tags = list(r[4] or []) + list(r[5] or []) if self.check else []
        return Row(Key(float(r[1]), float(r[2] or 0.0), r[0]), r[3] or "", tags)

    async def _window(self, lo: float | None, hi: float | None, cap: int = 0) -> list[Row]:
        """Rows with lo <= event_time < hi (None = unbounded), at most ``cap`` (default
        :data:`PROBE_CAP`), unordered."""
        self.queries += 1
        return [self._row(r) for r in await self._index.window(lo, hi, cap or PROBE_CAP)]

    async def _newest(self, lo: float | None, hi: float) -> float:
        """The newest event_time in [lo, hi) (an ORDER BY over the window: only for a window
        of one millisecond holding more than :data:`PROBE_CAP` rows)."""
        self.queries += 1
        return await self._index.newest(FLOOR if lo is None else lo, hi)

    async def _ties(self, after: Key) -> AsyncIterator[Row]:
        """Rows at exactly ``after.t`` that come after ``after`` in order."""
        self.queries += 1
        rows = [self._row(r) for r in await self._index.at(after.t, TIES_CAP)]
        if len(rows) < TIES_CAP:
            for row in sorted(rows, key=lambda r: r.key.order()):
                if row.key.order() > after.order():
                    yield row
            return
        # More than TIES_CAP memories at one time: page through them with ORDER BY.
        imp, last = after.importance, after.id
        while True:
            self.queries += 1
            batch = [self._row(r) for r in await self._index.at_after(after.t, imp, last, TIES_CAP)]
            for row in batch:
                yield row
            if len(batch) < TIES_CAP:
                return
            imp, last = batch[-1].key.importance, batch[-1].key.id

    def _resize(self, found: int) -> float:
        """Width of a window that would hold about ``target`` rows (at most half the cap),
        from the ``found`` rows of the window just read; ×8 at most either way."""
        desired = min(self.target, PROBE_CAP // 2)
        factor = MAX_GROWTH if found == 0 else min(MAX_GROWTH, max(1 / MAX_GROWTH, desired / found))
        return min(max(self.width * factor, MIN_WIDTH), OPEN_END - FLOOR)

    async def rows(self, after: Key | None) -> AsyncIterator[Row]:
        """Every row after ``after`` (None = from the newest), in listing order.

        Windows [lo, hi) move from ``hi`` down. A window that fills the cap is read again
        narrower (÷8), and its lower end is remembered as ``dense``: the rows there are
        below, so later windows grow by at most half the distance to it (a bisection
        towards the data instead of overshooting it again)."""
        if after is not None:
            async for row in self._ties(after):
                yield row
            hi: float = after.t
        else:
            # Memories dated after the split first: the newest time an earlier first page saw
            # (when before now) or now; then windows downwards from the split.
            split = _NEWEST.get(self._cache_key())
            split = split if split is not None and split < self.now else self.now
            future = await self._window(split, None)
            if len(future) < PROBE_CAP:
                past = [r.key.t for r in future if r.key.t <= self.now]
                if past:
                    self._note(max(past))
                for row in sorted(future, key=lambda r: r.key.order()):
                    yield row
                hi = split
            else:
                hi = OPEN_END + 1.0
        dense: float | None = None
        while True:
            lo: float | None = hi - self.width
            if lo <= FLOOR:
                lo = None
            rows = await self._window(lo, hi)
            if len(rows) >= PROBE_CAP:
                if self.width > MIN_WIDTH:
                    dense = FLOOR if lo is None else lo
                    self.width = max(self.width / MAX_GROWTH, MIN_WIDTH / 2)
                    continue
                # One millisecond holds more than PROBE_CAP rows: its newest time, in order.
                newest = await self._newest(lo, hi)
                self._note(newest)
                async for row in self._ties(Key(newest, 2.0, "")):  # 2.0: above every importance
                    yield row
                hi = newest
                continue
            if rows:
                self._note(max(r.key.t for r in rows))
            self._hint = self._resize(len(rows))
            self.width = self._hint
            for row in sorted(rows, key=lambda r: r.key.order()):
                yield row
            if lo is None:
                return
            hi = lo
            if dense is not None:
                if hi <= dense:
                    dense = None
                else:
                    self.width = min(self.width, max((hi - dense) / 2, MIN_WIDTH))

    def _cache_key(self) -> str:
        return fingerprint_filters(self.filters)

    def _note(self, t: float) -> None:
        """Remember the newest time at or before ``now`` a first page reached."""
        if self.newest_past is None and t <= self.now:
            self.newest_past = t

    def remember(self) -> None:
        """Keep this walk's newest time for the next first page of the same tags."""
        if self.newest_past is not None:
            _NEWEST.put(self._cache_key(), self.newest_past)

    def hint(self) -> float:
        """Window width to start the next page with (sized on the last window read)."""
        return self._hint


class _Newest:
    """A bounded LRU map: listing (scope and tags) -> newest event_time a first page saw.

    Only a starting point: a first page reads everything after it before going down, so a
    stale entry costs a window, never a memory. At most :data:`NEWEST_ENTRIES` entries."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict[str, float] = OrderedDict()

    def get(self, key: str) -> float | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: str, value: float) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)


#: Listings remembered for the first-page start (a few hundred bytes each).
NEWEST_ENTRIES = 1024
_NEWEST = _Newest(NEWEST_ENTRIES)


class TagListing:
    """Pages of current memories under the tags (see the module docstring).

    Args:
        graph: the graph store.
        filters: scope and tags.
        read: the state-pass settings of the request.
        states: node states that can be listed (``automem/recall/servicer.py`` ``_states``).
        scan_max: most index rows one page reads when it does not skip an offset
            (``Settings.by_tag_scan_max``).
        snapshot: a later page of a listing whose first page read the live graph at
            ``read.known_at``: the memories written since then are read as their versions
            believed then, with their enrichment from the live node (:meth:`_changed_rows`,
            :meth:`_hydrate`); the others, unchanged since, are read live.
    """

    def __init__(self, graph: GraphStore, filters: Filters, read: ReadAt, states: list[str], scan_max: int,
                 *, snapshot: bool = False) -> None:
        self.graph = graph
        self.filters = filters
        self.read = read
        self.states = set(states)
        self.scan_max = scan_max
        self.snapshot = snapshot
        #: With ``snapshot``: the memories written since ``read.known_at`` (:meth:`_changed_rows`).
        self.changed: dict[str, Row | None] = {}

    async def _hydrate(self, ids: list[str]) -> dict[str, Memory]:
        """Memories by id as this page reads them (``{id: Memory}``; absent = not readable):
        :func:`automem.common.state.hydrate_at`, except on a ``snapshot`` page, where the
        memories of ``changed`` (every one when ``read.past``: more changed than a page reads)
        are their versions believed at ``read.known_at`` with :data:`LIVE_FIELDS` from the
        live node (:func:`with_live_fields`), and the others their live nodes. One or two
        round trips (the second only when a changed memory is among ``ids``)."""
        if not self.snapshot:
            return await hydrate_at(self.graph, ids, self.filters.scope, self.read)
        live = await self.graph.memories.hydrate(ids, self.filters.scope)
        past = set(ids) if self.read.past else {i for i in ids if i in self.changed}
        if not past:
            return live
        out = {mid: m for mid, m in live.items() if mid not in past}
        for mid, snapshot in (await self.graph.versions.at(past, self.filters.scope, self.read.known_at)).items():
            out[mid] = with_live_fields(snapshot, live.get(mid))
        return out

    async def _current(self, rows: list[Row], seen: set[str] | None = None,
                       after: Key | None = None) -> list[tuple[Memory, Key]]:
        """The rows whose memory is its own current head (the state pass), in order.

        With ``seen`` (the ids a page listed so far, added to here; ``after``: the page's
        cursor): a row whose memory resolves to a replacement that sorts before the row and
        after ``after`` but was not listed lists that replacement in the row's place, once.
        The walk passed its place before it existed: a supersede committed while the page
        was read left the page without the fact (break-it review: ``count: 0`` under a tag
        holding one current fact, 1–2 reads in 40 supersedes). A replacement sorting after
        the row is listed where the walk meets it; one before ``after`` belongs to an
        earlier page."""
        found = await self._hydrate([r.key.id for r in rows])
        present = [r for r in rows if r.key.id in found]
        memories = [found[r.key.id] for r in present]
        resolved = await resolve(self.graph, memories, self.filters.scope, self.read, dedupe=False,
                                 hydrate=self._hydrate if self.snapshot else None)
        out: list[tuple[Memory, Key]] = []
        for row, memory, res in zip(present, memories, resolved, strict=True):
            if res is None:
                continue
            head = res.memory
            if res.replaces_id or head.id != memory.id:
                if seen is None or head.id in seen:
                    continue
                place = Key(first_epoch(head, "event_time", "create_time", default=0.0), head.importance,
                            head.id).order()
                if not place < row.key.order() or (after is not None and not after.order() < place):
                    continue
            elif seen is not None and head.id in seen:
                continue
            if self.read.history or self.filters.matches(head):
                if seen is not None:
                    seen.add(head.id)
                out.append((head, row.key))
        return out

    async def page(self, after: Key | None, width: float, limit: int, skip: int = 0) -> Page:
        """``limit`` current memories after ``after`` (None = from the start), skipping the
        first ``skip`` (offset paging: reads every row up to offset + limit, no scan bound).

        ``width``: first window in seconds. The page stops after ``scan_max`` index rows when
        ``skip`` is 0 (returned short, ``has_more`` true, continuing after the last row read).
        """
        if self.snapshot and not self.read.past:
            found = await self._changed_rows()
            if found is None and not self._matches_entity_tags():
                # More writes since the first page than a page reads: the versions of the scope.
                self.read = replace(self.read, past=True)
            self.changed = found or {}
        if self.read.past:
            return await self._past_page(after, width, limit, skip)
        want = skip + limit + 1
        walk = TagWalk(self.graph, self.filters, width, limit + 1, time.time())
        seen: set[str] = set()
        rows = _merged(walk.rows(after), self.changed, after) if self.changed else walk.rows(after)
        rows_iter = rows.__aiter__()
        out: list[tuple[Memory, Key]] = []
        scanned = 0
        last: Key | None = after
        exhausted = bounded = False
        try:
            while len(out) < want and not exhausted and not bounded:
                batch: list[Row] = []
                while len(batch) < want - len(out):
                    if skip == 0 and scanned >= self.scan_max:
                        bounded = True
                        break
                    try:
                        row = await rows_iter.__anext__()
                    except StopAsyncIteration:
                        exhausted = True
                        break
                    scanned += 1
                    last = row.key
                    if row.state in self.states and (not walk.check or row.key.id in self.changed
                                                     or self.filters.tags_match(row.tags)):
                        batch.append(row)
                if batch:
                    out.extend(await self._current(batch, seen, after))
        finally:
            await rows_iter.aclose()
        if after is None:
            walk.remember()
        memories = [m for m, _ in out[skip: skip + limit]]
        if len(out) >= want:
            return Page(memories, True, out[skip + limit - 1][1], walk.hint(), scanned=scanned)
        if exhausted:
            return Page(memories, False, None, walk.hint(), total=len(out) if after is None else None,
                        scanned=scanned)
        return Page(memories, True, last, walk.hint(), scanned=scanned)

    async def _changed_rows(self) -> dict[str, Row | None] | None:
        """The memories of the scope written since ``read.known_at`` (the first page's
        snapshot; :meth:`automem.graph.versions.Versions.changed_since`), each as its row
        believed then: its position, state and tags at ``known_at`` with the live node's
        entity tags (:meth:`automem.graph.versions.Versions.rows_at`), or None when it is not
        listed in the snapshot (not stored yet, in another state, without the tags). The
        index walk skips these ids and lists the rows here in their place (:func:`_merged`).
        None when more than ``scan_max`` memories changed."""
        ids = await self.graph.versions.changed_since(self.filters.scope, self.read.known_at, self.scan_max)
        if ids is None:
            return None
        out: dict[str, Row | None] = dict.fromkeys(ids)
        for mid, t, importance, state, tags, entity_tags in await self.graph.versions.rows_at(
                ids, self.filters.scope, self.read.known_at):
            keys = list(tags or []) + list(entity_tags or [])
            if (state or "") in self.states and self.filters.tags_match(keys):
                out[mid] = Row(Key(float(t), float(importance or 0.0), mid), state, keys)
        return out

    def _matches_entity_tags(self) -> bool:
        """True when the tag filter (or its exclusions) can match an entity tag, which the
        versions do not hold (so a page cannot be read from the versions of the scope alone:
        :meth:`page` reads it live instead)."""
        def entity(tag: str) -> bool:
            if self.filters.tag_match == "exact":
                return tag.startswith(ENTITY_TAG_PREFIX)
            return tag.startswith(ENTITY_TAG_PREFIX) or ENTITY_TAG_PREFIX.startswith(tag)
        return any(entity(t) for t in self.filters.tags) or any(
            t.startswith(ENTITY_TAG_PREFIX) for t in self.filters.exclude_tags)

    async def _past_rows(self) -> list[Row]:
        """Every memory whose version believed at ``known_at`` carries the tags and is in a
        listed state, in listing order (automem/graph/versions.py ``list_ids_at``: the
        versions of the scope, no index window; the past path only)."""
        where, params = filter_where(self.filters, "v")
        ids = await self.graph.versions.list_ids_at(where, params, sorted(self.states), self.read.known_at,
                                                    limit=2**31 - 1)
        found = await self._hydrate(ids)
        rows = [Row(Key(first_epoch(m, "event_time", default=0.0), m.importance, m.id), memory_pb2.MemoryState.Name(m.state)
                    .removeprefix("MEMORY_STATE_")) for m in (found[i] for i in ids if i in found)]
        return sorted(rows, key=lambda r: r.key.order())

    async def _past_page(self, after: Key | None, width: float, limit: int, skip: int) -> Page:
        """:meth:`page` when ``read.past``: the same order and token, over the versions
        believed at ``known_at``."""
        rows = [r for r in await self._past_rows() if after is None or r.key.order() > after.order()]
        out = await self._current(rows)
        memories = [m for m, _ in out[skip: skip + limit]]
        if len(out) > skip + limit:
            return Page(memories, True, out[skip + limit - 1][1], width, scanned=len(rows))
        return Page(memories, False, None, width, total=len(out) if after is None else None, scanned=len(rows))

    async def count(self) -> int:
        """Every current memory under the tags (reads them all; for ``include_total``)."""
        if self.read.past:
            return len(await self._current(await self._past_rows()))
        walk = TagWalk(self.graph, self.filters, FIRST_WIDTH, PROBE_CAP // 2, time.time())
        total = 0
        batch: list[Row] = []
        rows = _merged(walk.rows(None), self.changed, None) if self.changed else walk.rows(None)
        async for row in rows:
            if row.state in self.states and (not walk.check or row.key.id in self.changed
                                             or self.filters.tags_match(row.tags)):
                batch.append(row)
            if len(batch) >= 500:
                total += len(await self._current(batch))
                batch = []
        if batch:
            total += len(await self._current(batch))
        return total


def with_live_fields(snapshot: Memory, live: Memory | None) -> Memory:
    """A copy of ``snapshot`` (a version of a memory) with :data:`LIVE_FIELDS` as ``live``
    (its current node) holds them; ``snapshot`` itself when ``live`` is None (purged)."""
    if live is None:
        return snapshot
    out = Memory()
    out.CopyFrom(snapshot)
    for name in LIVE_FIELDS:
        kind = Memory.DESCRIPTOR.fields_by_name[name]
        if kind.is_repeated:
            out.ClearField(name)
            getattr(out, name).extend(getattr(live, name))
        elif kind.message_type is not None:
            out.ClearField(name)
            if live.HasField(name):
                getattr(out, name).CopyFrom(getattr(live, name))
        else:
            setattr(out, name, getattr(live, name))
    return out


async def _merged(rows: AsyncIterator[Row], changed: dict[str, Row | None], after: Key | None) -> AsyncIterator[Row]:
    """``rows`` (an index walk after ``after``, in listing order) without the ids of
    ``changed``, and the rows of ``changed`` after ``after`` in their places: the listing as
    it stood when ``changed`` was read against (:meth:`TagListing._changed_rows`)."""
    extra = sorted((r for r in changed.values() if r is not None and (after is None or r.key.order() > after.order())),
                   key=lambda r: r.key.order())
    i = 0
    async for row in rows:
        if row.key.id in changed:
            continue
        while i < len(extra) and extra[i].key.order() < row.key.order():
            yield extra[i]
            i += 1
        yield row
    for row in extra[i:]:
        yield row


def pinned(read: ReadAt, as_of: float, known_at: float, past: bool = False) -> ReadAt:
    """``read`` at a token's pinned times (``past``: the first page read versions)."""
    return ReadAt(as_of=as_of, known_at=known_at, mode=read.mode, include_archived=read.include_archived,
                  include_pending=read.include_pending, past=past)


async def list_by_tag(graph: GraphStore, filters: Filters, read: ReadAt, states: list[str], *, limit: int,
                      offset: int, page_token: str, include_total: bool, scan_max: int,
                      explicit_as_of: float | None = None, explicit_known_at: float | None = None,
                      ) -> tuple[Page, str]:
    """One page of the by-tag listing and its ``next_page_token`` ("" at the end).

    With a token the page is read at the first page's ``as_of``/``known_at`` (pinned in the
    token), so pages are one snapshot: a memory edited, moved, deleted or stored after the
    first page is listed on later pages as it stood then (with its enrichment, ``entities``
    and ``summary``, as it is now: :data:`LIVE_FIELDS`). After a first page read live, a
    later page walks the index as a first page does, reading the memories unchanged since
    live, and puts the memories written since in their places then
    (:meth:`TagListing._changed_rows`: its cost follows the writes since the first page;
    beyond ``scan_max`` of them the page reads the scope's versions, as a listing at a past
    ``known_at`` does, or the live graph when the tags can match entity tags, which the
    versions do not hold); an explicit ``as_of``/``known_at`` (epoch seconds)
    must then equal the pinned one. InvalidArgument names ``page_token`` (not issued here, or
    for other tags, scope or read mode; or other read times) and ``offset`` (with a token).
    """
    print_ = fingerprint(filters, read)
    after: Key | None = None
    width = FIRST_WIDTH
    if page_token:
        if offset:
            raise InvalidArgument("offset: must be 0 with page_token", field="offset")
        cursor = decode_token(page_token)
        if cursor.fingerprint != print_:
            raise InvalidArgument("page_token: belongs to another listing (tags, scope or read mode differ)",
                                  field="page_token")
        for given, kept, name in ((explicit_as_of, cursor.as_of, "as_of"),
                                  (explicit_known_at, cursor.known_at, "known_at")):
            if given is not None and abs(given - kept) > 1e-6:
                raise InvalidArgument(f"page_token: was issued for another {name}", field="page_token")
        read = pinned(read, cursor.as_of, cursor.known_at, cursor.past)
        after, width = cursor.key, cursor.width
    snapshot = bool(page_token) and not read.past
    listing = TagListing(graph, filters, read, states, scan_max, snapshot=snapshot)
    page = await listing.page(after, width, limit, skip=offset)
    if include_total and page.total is None:
        page.total = await listing.count()
    token = ""
    if page.has_more and page.next_key is not None:
        token = encode_token(Cursor(page.next_key, page.width, read.as_of, read.known_at, print_,
                                    read.past and not snapshot))
    return page, token
