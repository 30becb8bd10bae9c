"""Recovery that loses nothing: full export, restore into an empty store, vector reindex.

AutoMem rebuilt its graph from the vector payload and lost validity windows and edges
(docs/architecture.md, "What the design fixes in AutoMem", item 4). Here the graph is the
record of truth and is exported whole:

* :func:`export_records` — JSON-serialisable records, one per line in a backup file:

  - ``{"kind": "header", "format": "automem-backup/1", "graph": ..., "export_time": ...}``,
    with the events ``events_retained_since`` (stream time of the oldest event the stream
    still held, epoch seconds) and ``events_truncated`` (older events were removed by the
    stream's retention, so the exported history is partial; docs/retention.md), and (a full
    export) ``"counts": {"nodes", "edges"}`` counted as the export starts (a progress total)
  - ``{"kind": "memory"|"tombstone"|"review_item"|"node", "ref": <int>, "labels": [...],
    "properties": {...}}`` — every node with every property as stored (times are float
    epoch seconds, open ends 253402300799.0), ``ref`` its id within the export;
  - ``{"kind": "edge", "source": <ref>, "target": <ref>, "type": "INVALIDATED_BY",
    "properties": {...}}`` — every edge with its properties (create_time, strength, reason);
  - ``{"kind": "event", "data": <base64 MemoryEvent>}`` — the event stream (the audit
    log / history), oldest first;
  - ``{"kind": "end", "nodes": N, "edges": M, "events": K}`` — last, the records written;
    the header says ``"end": "end"``, so a restore knows a file cut short (a backup
    interrupted, a copy truncated at a line boundary) and refuses it (:func:`check_records`).

  Writes go on during an export. Nodes are read by windows of internal ids, one label list
  after the other, and edges with their source's window (automem/graph/dump.py), so no node
  or edge that existed when the export began is read twice or missed. The file agrees with
  itself: a ``MemoryVersion`` past the version of its memory's node in the file, or of a
  memory the file does not hold, and the events of such a memory or version (``version`` /
  ``after.version`` past the node's) were recorded after that node was read and are left
  out (versions are full snapshots: the node's own version is in the file).

* A past export (``known_at`` earlier than now; docs/architecture.md, "Versions and
  known_at"): the records as the service believed them at that system time. The header
  carries ``"known_at": <epoch seconds>``; each memory node is its version current at T
  (automem/graph/versions.py ``Versions.nodes_at``), memories first recorded after T, versions
  recorded after T, edges whose ``create_time`` is after T and events after T are left out;
  other nodes (tombstones, review items, entities) are written as they stand now. It is a
  snapshot for reading, not a backup: restore refuses it (it lacks the later history).

* :func:`restore_records` — recreates nodes (labels and properties exactly), edges and the
  event stream in an *empty* graph/stream (refuses a non-empty one unless ``force``).
  Events keep their ids, times and payloads, so history reads the same; they are published
  with a ``Nats-Msg-Id`` of the restore's own (the stream's 120 s de-duplication window
  outlives a purge: with the event ids a forced restore right after another would store
  nothing), and a restore the stream did not store every event of fails
  (:class:`RestoreIncomplete`). They are history only (enrichment starts after them). Nodes
  and edges are created in file order and export numbers nodes 0, 1, 2… (``ref``), so
  backup → restore → backup gives the same lines but for the header's ``export_time`` and
  ``events_retained_since``. Every record is checked first (:func:`check_records`: memories
  too, field by field), so a file the graph cannot take changes nothing.
* :func:`reindex` — rebuilds every vector point from the graph: payload from the one
  builder (:func:`automem.common.payload.build_payload`), dense vector from the embedding
  provider, BM25 sparse vector with the PRECEDED_BY context as enrichment builds it; points
  of memories that are gone, DELETED or REJECTED are removed.
"""

from __future__ import annotations

import asyncio
import base64
import heapq
import itertools
import json
import math
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

import grpc
from google.protobuf.message import DecodeError

from automem.common import jsontext
from automem.common.bus import ENRICH_DURABLE
from automem.common.errors import AutomemError
from automem.common.lifecycle import SUPERSEDING_RELATIONS
from automem.common.model import OPEN_END, STATE_NAMES, Memory, memory_to_node, node_to_memory, parse_type
from automem.common.payload import build_payload
from automem.common.text import analyze, bm25_doc_weights
from automem.v1 import events_pb2, memory_pb2

if TYPE_CHECKING:
    from automem.graph import GraphStore

FORMAT = "automem-backup/1"
#: The last record's kind; a header with ``"end": END`` promises it (files written before it
#: have neither and restore as before).
END = "end"
#: The label of the node a restore keeps in the graph while it runs (automem/graph/dump.py
#: ``mark_restore``): found at start, the graph is a restore's half.
RESTORE_MARK = "RestoreInProgress"
#: FalkorDB's integers are signed 64-bit.
_INT64 = 2**63
PAGE = 500
#: Edges an export sorts in memory at most: more are sorted in runs of this many, each
#: written to a temporary file, and the runs merged (:class:`_EdgeSort`).
EDGE_RUN = 2000
#: Runs merged into one when that many of one size are waiting (a merge of runs holds one
#: line of each), so the open runs stay at ``EDGE_RUNS_MERGED`` per size: logarithmic in the
#: edges, and so is the rewriting.
EDGE_RUNS_MERGED = 16
_KIND = {"Memory": "memory", "Tombstone": "tombstone", "ReviewItem": "review_item"}
#: Memory states without a vector point (automem/enrich/consumer.py deletes their points).
_GONE_STATES = ("DELETED", "REJECTED")


async def export_records(graph: GraphStore, bus: Any = None,
                         known_at: float | None = None) -> AsyncIterator[dict[str, Any]]:
    """Every node, edge and (when ``bus`` is given) stream event, as backup records (see the
    module docstring for the shapes). Nodes are read in windows of about ``PAGE`` nodes
    (:func:`_windows`), the edges leaving a window's nodes right after it in keyset pages of
    ``PAGE`` edges (automem/graph/dump.py ``edges_page``); the edges are written after the
    nodes, sorted as a restore creates them, through :class:`_EdgeSort`: at most
    ``EDGE_RUN`` of them in memory, so an export's memory does not grow with the graph's
    edges (docs/benchmarks.md, "Export edges in bounded memory").
    ``known_at`` (epoch seconds) earlier than now: the past export (module docstring); None
    or not earlier than now: the full export."""
    now = time.time()
    past = known_at is not None and known_at < now
    header: dict[str, Any] = {"kind": "header", "format": FORMAT, "graph": graph.name, "export_time": now}
    if not past:
        # What follows, counted as the export starts (writes meanwhile may change it): a
        # reader's progress total. The events are not counted (the stream also holds others).
        header["counts"] = {"nodes": await graph.dump.count_nodes_safe(), "edges": await graph.dump.count_edges()}
    if past:
        header["known_at"] = known_at
    if bus is not None:
        # The stream holds events for its retention only: say where the exported history begins.
        retention = await bus.retention()
        header["events_retained_since"] = retention.first_time
        header["events_truncated"] = retention.trimmed
    # The file ends with an "end" record (END): a restore refuses a file cut short.
    header["end"] = END
    yield header
    # refs number the nodes 0, 1, 2… in file order (not the internal ids themselves, which
    # have gaps and reuse after deletions): a restore creates the nodes and edges in file
    # order into an empty graph, so its export numbers and orders them the same way.
    refs: dict[int, int] = {}
    # The version of each memory node written (by id): its versions and events past it, or of
    # a memory the file does not hold, were recorded after its node was read (writes go on
    # during an export) and are left out, so the file agrees with itself. Memory sorts before
    # MemoryVersion (label lists in Cypher's order), so every memory is read before versions.
    versions: dict[str, int] = {}
    edges = _EdgeSort()
    try:
        async for labels, low, high, rows in _windows(graph):
            believed = await _believed(graph, rows, known_at) if past else {}
            for internal, _, props in rows:
                kind = next((_KIND[label] for label in labels if label in _KIND), "node")
                if past:
                    props = _at(kind, labels, props, believed, known_at)
                    if props is None:
                        continue
                if kind == "memory" and isinstance(props.get("id"), str):
                    versions[props["id"]] = int(props.get("version") or 0)
                elif VERSION_LABEL in labels and not _version_held(props, versions):
                    continue
                refs[int(internal)] = len(refs)
                yield {"kind": kind, "ref": refs[int(internal)], "labels": labels, "properties": dict(props)}
            # The edges leaving this window's nodes, read after them: each edge once (its source's).
            async for edge_rows in _edge_pages(graph, labels, low, high):
                await edges.extend([rel_type, labels, list(target_labels), int(rid), int(source), int(target), props]
                                   for source, target, rel_type, props, rid, target_labels in edge_rows
                                   if int(source) in refs)
        # In the order a restore creates them (runs of one type between the same labels), then by
        # edge id: the restored graph's edge ids follow the file, so its export orders them alike.
        edges_written = 0
        async for rel_type, _, _, _, source, target, props in edges.ordered():
            if target not in refs:
                continue  # a node created after its window was read (a write during the export)
            if past and float(props.get("create_time") or 0.0) > known_at:
                continue  # an edge the service did not know at known_at
            edges_written += 1
            yield {"kind": "edge", "source": refs[source], "target": refs[target], "type": rel_type,
                   "properties": dict(props)}
    finally:
        edges.close()
    written = {"nodes": len(refs), "edges": 0, "events": 0}
    if bus is not None:
        async for event in bus.stream_events():
            if past and event.event_time.seconds + event.event_time.nanos / 1e9 > known_at:
                continue
            if not _event_held(event, versions):
                continue
            written["events"] += 1
            yield {"kind": "event", "data": base64.b64encode(event.SerializeToString()).decode("ascii")}
    written["edges"] = edges_written
    yield {"kind": "end", **written}


async def _windows(graph: GraphStore) -> AsyncIterator[tuple[list[str], int, int, list[list[Any]]]]:
    """``(labels, low, high, node rows)`` of every node (automem/graph/dump.py
    ``nodes_window``: the nodes whose labels are ``labels`` and internal id in ``[low,
    high)``), one label list after the other (in Cypher's order of lists), each by internal id
    in windows of ids of about ``PAGE`` nodes; windows without nodes are not yielded. Windows
    of ids, not SKIP/LIMIT pages: a node created or deleted during the export does not shift
    later windows, so no node that existed when the export began is read twice or missed. A
    window's span follows the nodes' density (halved after a window of more than ``PAGE``
    nodes, doubled after one of fewer than half)."""
    for labels in await graph.dump.label_sets():
        count, highest = await graph.dump.id_span(labels)
        if not count:
            continue
        span = max(PAGE, PAGE * (highest + 1) // count)
        low = 0
        while low <= highest:
            rows = await graph.dump.nodes_window(labels, low, low + span)
            if rows:
                yield labels, low, low + span, rows
            low += span
            if len(rows) > PAGE:
                span = max(PAGE, span // 2)
            elif len(rows) < PAGE // 2:
                span *= 2


async def _edge_pages(graph: GraphStore, labels: list[str], low: int, high: int) -> AsyncIterator[list[list[Any]]]:
    """The edges leaving the nodes of the window ``(labels, low, high)`` (:func:`_windows`),
    in keyset pages of up to ``PAGE`` rows (automem/graph/dump.py ``edges_page``)."""
    after: tuple[int, int] | None = None
    while True:
        rows = await graph.dump.edges_page(labels, low, high, after, PAGE)
        if rows:
            yield rows
        if len(rows) < PAGE:
            return
        after = (int(rows[-1][0]), int(rows[-1][4]))


class _EdgeSort:
    """The export's edges (lists ``[type, source labels, target labels, edge id, source id,
    target id, properties]``), given in any order and read back by their first four items
    (:meth:`ordered`) in bounded memory: an external merge sort. Up to ``EDGE_RUN`` edges are
    kept in memory; beyond, each ``EDGE_RUN`` are sorted into a run written to an anonymous
    temporary file as JSON lines (properties are JSON, as the export writes them), and
    ``EDGE_RUNS_MERGED`` runs of one size are merged into one of the next (``heapq.merge``,
    one line of each in memory). Files are written and read in a worker thread, a page at a
    time, off the event loop; :meth:`close` removes them."""

    def __init__(self) -> None:
        self.buffer: list[list[Any]] = []
        #: Runs waiting by size: ``levels[k]`` holds runs of about ``EDGE_RUN * EDGE_RUNS_MERGED**k`` edges.
        self.levels: list[list[IO[str]]] = []

    async def extend(self, edges: Iterable[list[Any]]) -> None:
        """Add ``edges``; a full buffer is written as a run."""
        self.buffer.extend(edges)
        if len(self.buffer) >= EDGE_RUN:
            buffer, self.buffer = self.buffer, []
            await asyncio.to_thread(self._spill, buffer)

    def _spill(self, buffer: list[list[Any]]) -> None:
        buffer.sort(key=_edge_key)
        run, level = self._write(buffer), 0
        while True:
            if len(self.levels) == level:
                self.levels.append([])
            self.levels[level].append(run)
            if len(self.levels[level]) < EDGE_RUNS_MERGED:
                return
            merged, self.levels[level] = self.levels[level], []
            try:
                run = self._write(heapq.merge(*(self._read(f) for f in merged), key=_edge_key))
            finally:
                for f in merged:
                    f.close()
            level += 1

    @staticmethod
    def _write(edges: Iterable[list[Any]]) -> IO[str]:
        out = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115 - closed by close()
        for edge in edges:
            out.write(json.dumps(edge) + "\n")
        out.flush()
        return out

    @staticmethod
    def _read(run: IO[str]) -> Iterator[list[Any]]:
        run.seek(0)
        for line in run:
            yield json.loads(line)

    async def ordered(self) -> AsyncIterator[list[Any]]:
        """Every edge added, by ``(type, source labels, target labels, edge id)``."""
        self.buffer.sort(key=_edge_key)
        runs = [run for level in self.levels for run in level]
        if not runs:
            for edge in self.buffer:
                yield edge
            return
        merged = heapq.merge(self.buffer, *(self._read(run) for run in runs), key=_edge_key)
        while page := await asyncio.to_thread(lambda: list(itertools.islice(merged, PAGE))):
            for edge in page:
                yield edge

    def close(self) -> None:
        """Remove the runs' files."""
        for level in self.levels:
            for run in level:
                run.close()
        self.levels, self.buffer = [], []


def _edge_key(edge: list[Any]) -> tuple[Any, ...]:
    return edge[0], edge[1], edge[2], edge[3]


def _version_held(props: Mapping[str, Any], versions: Mapping[str, int]) -> bool:
    """Whether a ``MemoryVersion`` node agrees with the memory nodes written (``versions``:
    their version by id): its memory is in the file, at this version or a later one."""
    held = versions.get(props.get("memory_id"))
    version = props.get("version")
    return held is not None and (not isinstance(version, int) or version <= held)


def _event_held(event: events_pb2.MemoryEvent, versions: Mapping[str, int]) -> bool:
    """Whether a stream event agrees with the memory nodes written (``versions``): events of
    no memory and purge records are kept; a memory's others only while its node is in the
    file and the event's version (``version``, ``after.version``) is not past the node's."""
    if not event.memory_id or event.type == events_pb2.EVENT_TYPE_MEMORY_PURGED:
        return True
    held = versions.get(event.memory_id)
    return held is not None and max(event.version, event.after.version) <= held


async def _believed(graph: GraphStore, rows: list[list[Any]], known_at: float) -> dict[str, dict[str, Any]]:
    """The memory nodes of a page of ``rows`` as believed at ``known_at``, by id."""
    ids = [props.get("id") for _, labels, props in rows if "Memory" in labels and props.get("id")]
    return await graph.versions.nodes_at(ids, known_at)


def _at(kind: str, labels: list[str], props: dict[str, Any], believed: dict[str, dict[str, Any]],
        known_at: float) -> dict[str, Any] | None:
    """A node's properties in the past export, or None when it is left out."""
    if kind == "memory":
        return believed.get(props.get("id"))
    if "MemoryVersion" in labels and float(props.get("recorded_at") or 0.0) > known_at:
        return None
    return dict(props)


async def export_lines(graph: GraphStore, bus: Any = None, known_at: float | None = None) -> AsyncIterator[str]:
    """:func:`export_records` as JSON text lines (no trailing newline)."""
    async for record in export_records(graph, bus, known_at):
        yield json.dumps(record, ensure_ascii=False, sort_keys=True)


class Line(dict):
    """A record read from a backup file (a dict, as every record), remembering its 1-based
    line number ``line`` so that :func:`check_records` names the line (blank lines count)."""

    line: int = 0


def read_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Parse backup lines (blank ones skipped) into records (:class:`Line`: dicts that know
    their line number). ValueError naming the line on bad JSON, a line that is not an
    object, or a header of an unknown format."""
    out: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = jsontext.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"backup line {number}: not JSON ({exc.msg})") from None
        except jsontext.NestedTooDeeply as exc:
            raise ValueError(f"backup line {number}: {exc}") from None
        if not isinstance(record, dict):
            raise ValueError(f"backup line {number}: not a JSON object")  # noqa: TRY004 - a bad file is a ValueError to every caller
        if record.get("kind") == "header" and record.get("format") != FORMAT:
            raise ValueError(f"backup line {number}: unknown format {record.get('format')!r}")
        parsed = Line(record)
        parsed.line = number
        out.append(parsed)
    return out


def _where(number: int, record: dict[str, Any]) -> str:
    """How an error names a record: its line in the file when it was read from one
    (:class:`Line`), else its 1-based position."""
    line = getattr(record, "line", 0)
    return f"backup line {line}" if line else f"backup record {number}"


class RestoreIncomplete(AutomemError):
    """A restore after which the stream does not hold every event of the file (it stored
    fewer than it was given: de-duplicated, or refused). The graph is restored, the history
    is not: the restore marker stays (:data:`RESTORE_MARK`), so the service warns at start
    and the next restore needs ``force``. gRPC DATA_LOSS, HTTP 500, with the message."""

    code = grpc.StatusCode.DATA_LOSS


async def restore_records(graph: GraphStore, records: list[dict[str, Any]], bus: Any = None,
                          force: bool = False, keep_labels: Mapping[str, str] | None = None,
                          progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Recreate the export in ``graph`` (and the events on ``bus``'s stream).

    Refuses (ValueError naming ``known_at``) a past export (header ``known_at``), and
    (ValueError, :func:`check_records`) a file cut short or holding a record the graph cannot
    take, before anything changes. Refuses (RuntimeError) when the graph already holds nodes or the stream messages,
    unless ``force``, which first empties both (replace, never merge). While it writes, a
    ``RestoreInProgress`` node (:data:`RESTORE_MARK`) stays in the graph: a restore killed
    half-way leaves it, the service logs an error at start (:func:`interrupted_restore`) and a
    restore without ``force`` is refused (RuntimeError) until one with ``force`` finishes. Nodes and edges are
    created in file order, so a backup of the restored graph is the same file (but for the
    header's times). The enrichment consumer is (re)created to start after the restored
    events: restored memories keep their enrichment and are not enriched again. The vector
    index is not restored: rebuild it with :func:`reindex` (``automem restore --reindex``).
    ``keep_labels`` (a restore into a running service: its API keys, their audit record and
    the schema markers, ``{label: key property}``): nodes with these labels do not make the
    graph count as non-empty, ``force`` keeps them, and the backup's nodes of these labels
    whose key property the graph already holds are left out. ``progress(done, total)`` is
    called as records are written (``total``: the nodes, edges and events to write).
    Events are published with a ``Nats-Msg-Id`` unique to this restore and record (never the
    event id: the stream's de-duplication window survives the purge of ``force``), and each
    acknowledgement is checked.
    Returns counts ``{"nodes", "edges", "events", "events_dropped", "live_memories"}``
    (``events``: the events the stream stored, each acknowledged as new: all of the file's;
    ``events_dropped``: those of them the target stream's retention removed at once, its
    ``event_retention_bytes`` being smaller than the backup's events; ``live_memories``:
    restored memories that are neither DELETED nor REJECTED, i.e. that need a vector point).
    Raises :class:`RestoreIncomplete` (an AutomemError, DATA_LOSS) naming the shortfall when
    the stream stored fewer events than the file holds; the enrichment consumer is moved
    after them first and the restore marker stays. Errors of the stores propagate.
    """
    check_records(records, graph.dump.identifier)
    header = next((r for r in records if r.get("kind") == "header"), {})
    if header.get("known_at") is not None:
        raise ValueError(f"restore: this export was made at known_at={header['known_at']} (a snapshot of what "
                         "the service believed then, for reading; it lacks the later history): "
                         "restore needs a full export made without known_at")
    interrupted = await graph.dump.restore_started()
    if interrupted is not None and not force:
        raise RuntimeError(f"restore: a restore started at {_iso(interrupted)} did not finish (the graph is partial); "
                           "restore again with --force")
    started = time.time()
    if force and keep_labels:
        # The marker first, kept by the wipe: a restore killed from here on leaves it.
        await graph.dump.mark_restore(started)
        await graph.dump.delete_except({**keep_labels, RESTORE_MARK: ""})
        if bus is not None and bus.js is not None:
            await bus.js.purge_stream(bus.settings.stream_name)
    elif force:
        # Replace, never merge: the target's graph and event stream are emptied first.
        await graph.dump.drop()
        await graph.dump.mark_restore(started)
        await graph.ensure_schema()
        if bus is not None and bus.js is not None:
            await bus.js.purge_stream(bus.settings.stream_name)
    else:
        try:
            existing = await (graph.dump.count_nodes_except(keep_labels) if keep_labels
                              else graph.dump.count_nodes())
        except Exception as exc:  # FalkorDB: a graph never written is an "empty key"
            if "empty key" not in str(exc):
                raise
            existing = 0
        if existing:
            raise RuntimeError(f"restore: graph {graph.name!r} is not empty ({existing} nodes); "
                               "restore into an empty data dir or pass --force")
        if bus is not None and bus.js is not None:
            info = await bus.js.stream_info(bus.settings.stream_name)
            if info.state.messages:
                raise RuntimeError(f"restore: stream {bus.settings.stream_name!r} is not empty")
        await graph.dump.mark_restore(started)
    nodes = [r for r in records if r.get("kind") in _NODE_KINDS]
    edges = [r for r in records if r.get("kind") == "edge"]
    for label, key in (keep_labels or {}).items():
        present = await graph.dump.keys_of(label, key)
        nodes = [r for r in nodes if not (label in (r.get("labels") or [])
                                          and (r.get("properties") or {}).get(key) in present)]
    events = [r for r in records if r.get("kind") == "event"]
    # Nodes and edges are created in file order (runs of the same labels / type, PAGE at a
    # time), so the restored graph's internal ids follow the file and its export is the same.
    node_labels: list[tuple[str, ...]] = []
    label_of: dict[int, str] = {}
    for record in nodes:
        labels = tuple(graph.dump.identifier(label) for label in record.get("labels") or [])
        node_labels.append(labels)
        label_of[int(record["ref"])] = labels[0] if labels else ""
    first_labels = {labels[0] for labels in node_labels if labels}
    for label in first_labels:
        await graph.dump.index_refs(label)
    total, done = len(nodes) + len(edges) + len(events), 0

    def advance(amount: int) -> None:
        nonlocal done
        done += amount
        if progress is not None:
            progress(done, total)

    for labels, group in _runs(nodes, node_labels):
        rows = [{"ref": int(r["ref"]), "props": r.get("properties") or {}} for r in group]
        await graph.dump.create_nodes(labels, rows)
        advance(len(rows))
    edge_keys = [(graph.dump.identifier(r["type"]), label_of.get(int(r["source"]), ""),
                  label_of.get(int(r["target"]), "")) for r in edges]
    for (rel_type, a_label, b_label), group in _runs(edges, edge_keys):
        rows = [{"s": int(r["source"]), "t": int(r["target"]), "props": r.get("properties") or {}} for r in group]
        await graph.dump.create_edges(rel_type, a_label, b_label, rows)
        advance(len(rows))
    await graph.dump.clear_refs()
    for label in first_labels:
        await graph.dump.unindex_refs(label)
    await graph.ensure_schema()
    # A backup made before versions existed: its memories get their first version.
    await graph.versions.migrate()
    published = dropped = 0
    if bus is not None and bus.js is not None:
        # Not the event ids: the server de-duplicates a Nats-Msg-Id it saw within its window
        # (120 s), a purge does not forget them, and a forced restore right after another (or
        # after the service published these events) would store nothing. One id per restore
        # and record: every record of the file is stored once.
        run = uuid.uuid4().hex
        stored: list[int] = []  # stream sequences of the events the stream stored
        # Enrichment must not see the restored events: a service running enrichment (its child
        # process) fetched them as they were published and enriched the restored memories
        # again (hundreds of MEMORY_ENRICHED events, edges remade), before the consumer moved.
        await bus.stop_consumer(ENRICH_DURABLE)
        for position, record in enumerate(events):
            event = events_pb2.MemoryEvent.FromString(base64.b64decode(record["data"]))
            ack = await bus.publish_restored(event, f"restore-{run}-{position}")
            if not ack.duplicate:
                stored.append(int(ack.seq))
            advance(1)
        published = len(stored)
        after = await bus.js.stream_info(bus.settings.stream_name)
        # Republished events start a fresh retention period; a smaller event_retention_bytes
        # than the backup's events removes the oldest of them at once.
        dropped = sum(1 for seq in stored if seq < after.state.first_seq)
        # The restored events are history: the graph already holds their effects (entities,
        # SIMILAR_TO and PRECEDED_BY edges, statuses). Enrichment starts after them, or it
        # would enrich every restored memory again (new edges, new create_times, new events).
        await bus.start_consumer_after(ENRICH_DURABLE, after.state.last_seq)
        # The purge of a forced restore leaves the sequence where it was: say where the
        # restored history begins, so a backup of it does not read as truncated.
        # A backup without its events (``--no-events``, or made with no stream) says nothing
        # of them: the history it restores is not whole.
        await bus.mark_history(stored[0] if stored else after.state.last_seq + 1,
                               truncated=header.get("events_truncated") is not False)
        if published < len(events):
            raise RestoreIncomplete(
                f"restore: the stream {bus.settings.stream_name!r} stored {published} of the file's {len(events)} "
                f"events ({len(events) - published} missing: the server acknowledged them as duplicates); the graph "
                "is restored but its history is not: restore again with force")
    await graph.dump.unmark_restore()
    live = sum(1 for r in nodes if r.get("kind") == "memory"
               and (r.get("properties") or {}).get("state") not in _GONE_STATES)
    return {"nodes": len(nodes), "edges": len(edges), "events": published, "events_dropped": dropped,
            "live_memories": live}


_NODE_KINDS = ("memory", "tombstone", "review_item", "node")
#: The fields each record kind needs, with their types (the module docstring's shapes).
_SHAPES: dict[str, dict[str, type | tuple[type, ...]]] = {
    **{kind: {"ref": int, "labels": list, "properties": dict} for kind in ("memory", "tombstone", "review_item", "node")},
    "edge": {"source": int, "target": int, "type": str, "properties": dict},
    "event": {"data": str},
}


def _check_shapes(records: list[dict[str, Any]]) -> None:
    """ValueError naming the first record (its line, :func:`_where`) that lacks a field of its
    kind or holds it with another type: checked before a restore changes anything."""
    for number, record in enumerate(records, 1):
        for name, kind in _SHAPES.get(record.get("kind"), {}).items():
            value = record.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(  # noqa: TRY004 - a bad file is a ValueError to every caller
                    f"{_where(number, record)} ({record.get('kind')}): {name!r} missing or not "
                    f"{getattr(kind, '__name__', kind)}")


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


async def interrupted_restore(graph: GraphStore) -> str | None:
    """A sentence for the operator when a restore into ``graph`` started and never finished
    (the process was killed half-way: the graph holds part of the backup), else None."""
    started = await graph.dump.restore_started()
    return None if started is None else restore_warning(started)


def restore_warning(started: float) -> str:
    """The operator's sentence about a restore that started at ``started`` (epoch seconds)
    and did not finish: logged at start (:func:`interrupted_restore`) and answered by
    /health (automem/gateway/presenters.py ``stores_json``)."""
    return (f"a restore started at {_iso(started)} did not finish: the graph holds part of a backup; run "
            "`automem restore FILE --force` again")


def check_records(records: list[dict[str, Any]], identifier: Callable[[str], str]) -> None:
    """Everything a restore could trip on, checked before it changes anything (with
    ``force`` it empties the graph first, so a record refused half-way would leave a
    half-restored graph). ``records``: as :func:`read_lines` returns them (or
    :func:`export_records` yields them). ValueError naming the first bad record — its line
    (``backup line N``) when read by :func:`read_lines`, else its 1-based position
    (``backup record N``) — and, for a property, the field (``properties.importance``):

    * a field missing or of another type (:data:`_SHAPES`);
    * a file cut short: the header promises an ``end`` record (``"end": "end"``) that is
      missing, not last, or counts other numbers of nodes, edges and events than the file's;
    * a node ``ref`` given twice; an edge naming a ``ref`` no node of the file has;
    * two memories with one ``id`` (a delete of one would remove both); two edges of one
      type between the same nodes (the service MERGEs them: one per pair and type), the
      superseding types (``INVALIDATED_BY``, ``EVOLVED_INTO``) too: supersede and review
      approval CREATE theirs to a memory superseded once, so the service never writes one
      twice, and a restore accepted the second;
    * a label or relation type that is not a safe name (``identifier``, the graph's check);
    * a property value FalkorDB cannot store (a map, an integer beyond 64 bits; a value is
      null, a boolean, a number, a string or a list of those);
    * a memory (and a ``MemoryVersion`` snapshot) whose properties the service could not read
      back (:func:`_check_memory`: a field of another type, a state, type or status no memory
      has, a window that ends before it starts), an edge whose ``strength``, ``create_time``,
      ``reason`` or ``scope`` is of another type (:func:`_check_edge`);
    * an event whose ``data`` is not base64 of a ``MemoryEvent``.
    """
    _check_shapes(records)
    header = next((r for r in records if r.get("kind") == "header"), {})
    ends = [n for n, r in enumerate(records, 1) if r.get("kind") == END]
    if header.get("end") == END or ends:
        if not ends:
            raise ValueError("backup: the file is cut short (its end record is missing): restore a whole backup")
        if ends[0] != len(records):
            raise ValueError(f"{_where(ends[0], records[ends[0] - 1])}: the end record is not the last one")
        end = records[-1]
        found = {"nodes": sum(1 for r in records if r.get("kind") in _NODE_KINDS),
                 "edges": sum(1 for r in records if r.get("kind") == "edge"),
                 "events": sum(1 for r in records if r.get("kind") == "event")}
        claimed = {name: end.get(name) for name in found}
        if claimed != found:
            raise ValueError(f"backup: the end record counts {claimed} but the file holds {found}: records are "
                             "missing or were added (restore a whole backup)")
    refs: set[int] = set()
    memory_ids: dict[str, str] = {}
    for number, record in enumerate(records, 1):
        kind = record.get("kind")
        try:
            if kind in _NODE_KINDS:
                if record["ref"] in refs:
                    raise ValueError(f"ref {record['ref']} given twice")
                refs.add(record["ref"])
                memory_id = record["properties"].get("id") if kind == "memory" else None
                if isinstance(memory_id, str):
                    # Two nodes of one memory: every read and write by id would take both.
                    if memory_id in memory_ids:
                        raise ValueError(f"properties.id: {memory_id!r} was given already ({memory_ids[memory_id]})")
                    memory_ids[memory_id] = _where(number, record)
                for label in record["labels"]:
                    if not isinstance(label, str):
                        raise ValueError(f"labels: {label!r} is not text")  # noqa: TRY004 - a bad file is a ValueError to every caller
                    identifier(label)
                _check_properties(record["properties"])
                if kind == "memory":
                    _check_memory(record["properties"])
                elif VERSION_LABEL in record["labels"]:
                    _check_version(record["properties"])
            elif kind == "edge":
                identifier(record["type"])
                _check_properties(record["properties"])
                _check_edge(record["properties"])
            elif kind == "event":
                try:
                    events_pb2.MemoryEvent.FromString(base64.b64decode(record["data"], validate=True))
                except (ValueError, DecodeError) as exc:
                    raise ValueError(f"data: not a base64 MemoryEvent ({exc})") from None
        except ValueError as exc:
            raise ValueError(f"{_where(number, record)} ({kind}): {exc}") from None
    edges: dict[tuple[int, int, str], str] = {}
    for number, record in enumerate(records, 1):
        if record.get("kind") == "edge":
            for end_name in ("source", "target"):
                if record[end_name] not in refs:
                    raise ValueError(f"{_where(number, record)} (edge): {end_name} {record[end_name]} is the "
                                     "ref of no node of the file")
            key = (record["source"], record["target"], record["type"])
            if key in edges:
                why = ("a memory is superseded by another once: the service writes one such edge per pair"
                       if record["type"] in SUPERSEDING_RELATIONS else "the service keeps one edge per pair and type")
                raise ValueError(f"{_where(number, record)} (edge): {record['type']} from ref {record['source']} to "
                                 f"ref {record['target']} was given already ({edges[key]}); {why}")
            edges.setdefault(key, _where(number, record))


def _check_properties(props: dict[str, Any]) -> None:
    """ValueError naming the first property FalkorDB cannot store (see :func:`check_records`)."""
    for name, value in props.items():
        if not _storable(value):
            raise ValueError(f"properties.{name}: {str(value)[:80]!r} cannot be stored (a property is null, a "
                             "boolean, a number, text or a list of those)")


#: The label of a memory's versions (automem/graph/versions.py ``LABEL``) and the properties a
#: version holds besides the snapshot of the memory node (its ``KEYS``).
VERSION_LABEL = "MemoryVersion"
_VERSION_KEYS = ("memory_id", "version", "recorded_at", "actor", "changed_fields")
#: A memory node's properties as the one builder writes them (automem/common/model.py
#: ``memory_to_node``), of an empty memory: each value's type is the property's (text, a list
#: of text, a float, an integer; None: a time; the open end: a time that may be open).
_MEMORY_NODE = memory_to_node(Memory())
#: Epoch seconds of 0001-01-01T00:00:00Z, the earliest time a Timestamp holds.
_FIRST_TIME = -62135596800.0
#: Epoch seconds of 10000-01-01T00:00:00Z: the last time a Timestamp holds, at the stored
#: millisecond precision, is 9999-12-31T23:59:59.999 (the open end, OPEN_END, is before it).
_PAST_LAST_TIME = 253402300800.0
_STATUS_NAMES = {"embedding_status": set(memory_pb2.EmbeddingStatus.keys()),
                 "enrichment_status": set(memory_pb2.EnrichmentStatus.keys())}
_ENTITY_KEYS = {"name", "kind", "tag"}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_memory(props: dict[str, Any]) -> None:
    """Refuse a memory node's properties the service could not read back (every read of the
    memory would answer 500), before a restore changes anything: ValueError naming the
    first bad property (``properties.<name>: <why>``).

    ``props`` is a memory node as :func:`automem.common.model.memory_to_node` writes it; each
    of its properties present and not null must have the builder's type: text; a list of
    text (``tags``, ``tags_lower``, ``entity_tags``); a finite number (``importance`` and
    ``confidence`` in [0, 1]); a non-negative integer (``version``); a time in epoch seconds
    within the years 1–9999 (``valid_to`` / ``retract_time`` may be later: open). Besides,
    ``id`` is non-empty text, ``state`` a state name (``ACTIVE``…), ``type`` a memory type,
    the statuses their enum names, ``metadata`` the JSON text of an object, ``entities`` of a
    list of ``{name, kind, tag}`` objects, and ``valid_to`` after ``valid_from``. Last, the
    read path's converter (:func:`automem.common.model.node_to_memory`) must take it.
    Properties the builder does not write are left as they are (any storable value).
    """
    if not isinstance(props.get("id"), str) or not props["id"]:
        raise ValueError(f"properties.id: {props.get('id')!r} is not the memory's id (non-empty text)")
    for name, model in _MEMORY_NODE.items():
        value = props.get(name)
        if value is None:
            continue
        where = f"properties.{name}"
        if isinstance(model, str):
            if not isinstance(value, str):
                raise ValueError(f"{where}: {value!r} is not text")  # noqa: TRY004 - a bad file is a ValueError
        elif isinstance(model, list):
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise ValueError(f"{where}: {value!r} is not a list of text")
        elif isinstance(model, int) and not isinstance(model, bool):  # version
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{where}: {value!r} is not a non-negative integer")
        elif model is None or model == OPEN_END:  # a time
            if not _number(value) or value < _FIRST_TIME or value >= _PAST_LAST_TIME:
                raise ValueError(f"{where}: {value!r} is not a time (epoch seconds within the years 1–9999)")
        elif not _number(value):
            raise ValueError(f"{where}: {value!r} is not a number")
        elif name in ("importance", "confidence") and not 0.0 <= value <= 1.0:
            raise ValueError(f"{where}: {value!r} is not between 0 and 1")
    _check_memory_values(props)
    try:
        node_to_memory(props)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, AutomemError) as exc:
        raise ValueError(f"properties: not readable as a memory ({exc})") from None


def _check_memory_values(props: dict[str, Any]) -> None:
    """The value checks of :func:`_check_memory` (its types are checked): names, JSON texts,
    the window."""
    state = props.get("state")
    if state is not None and state not in STATE_NAMES.values():
        raise ValueError(f"properties.state: {state!r} is not a memory state ({', '.join(STATE_NAMES.values())})")
    kind = props.get("type")
    if kind and kind != "MetaPattern":
        try:
            parse_type(kind, field="properties.type")
        except AutomemError as exc:
            raise ValueError(exc.message) from None
    for name, allowed in _STATUS_NAMES.items():
        if props.get(name) and props[name] not in allowed:
            raise ValueError(f"properties.{name}: {props[name]!r} is not one of {', '.join(sorted(allowed))}")
    for name, shape in (("metadata", dict), ("entities", list)):
        if not props.get(name):
            continue
        try:
            value = json.loads(props[name])
        except ValueError as exc:
            raise ValueError(f"properties.{name}: not JSON text ({exc})") from None
        if not isinstance(value, shape):
            raise ValueError(f"properties.{name}: the JSON text of a {type(value).__name__}, not of "  # noqa: TRY004
                             f"{'an object' if shape is dict else 'a list'}")
        if name == "entities":
            for entity in value:
                if not isinstance(entity, dict) or not set(entity) <= _ENTITY_KEYS or not all(
                        isinstance(v, str) for v in entity.values()):
                    raise ValueError(f"properties.entities: {entity!r} is not an entity (name, kind and tag, "
                                     "each text)")
    start, end = props.get("valid_from"), props.get("valid_to")
    if start is not None and end is not None and end < OPEN_END and end <= start:
        raise ValueError(f"properties.valid_to: {end!r} is not after valid_from {start!r} (the window ends "
                         "before it starts)")


def _check_version(props: dict[str, Any]) -> None:
    """A ``MemoryVersion`` node's properties (automem/graph/versions.py): ``memory_id`` text,
    ``version`` a non-negative integer, ``recorded_at`` a number, ``actor`` text,
    ``changed_fields`` a list of text, and the rest a snapshot :func:`_check_memory` takes
    (read back by ``snapshot_memory``, as a memory node). ValueError naming the property."""
    if not isinstance(props.get("memory_id"), str) or not props["memory_id"]:
        raise ValueError(f"properties.memory_id: {props.get('memory_id')!r} is not a memory id (non-empty text)")
    recorded = props.get("recorded_at")
    if recorded is not None and not _number(recorded):
        raise ValueError(f"properties.recorded_at: {recorded!r} is not a time (epoch seconds)")
    if props.get("actor") is not None and not isinstance(props["actor"], str):
        raise ValueError(f"properties.actor: {props['actor']!r} is not text")
    changed = props.get("changed_fields")
    if changed is not None and (not isinstance(changed, list) or not all(isinstance(c, str) for c in changed)):
        raise ValueError(f"properties.changed_fields: {changed!r} is not a list of text")
    snapshot = {k: v for k, v in props.items() if k not in _VERSION_KEYS}
    snapshot["id"] = props["memory_id"]
    snapshot["version"] = props.get("version")
    _check_memory(snapshot)


def _check_edge(props: dict[str, Any]) -> None:
    """An edge's properties as the service writes them (automem/graph/relations.py):
    ``strength`` a finite number, ``create_time`` a time in epoch seconds, ``reason`` and
    ``scope`` text, each when present and not null. ValueError naming the property."""
    for name in ("strength", "create_time"):
        value = props.get(name)
        if value is not None and not _number(value):
            raise ValueError(f"properties.{name}: {value!r} is not a number")
    for name in ("reason", "scope"):
        value = props.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"properties.{name}: {value!r} is not text")


def _storable(value: Any) -> bool:
    if isinstance(value, list):
        return all(_storable(item) for item in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -_INT64 <= value < _INT64
    return value is None or isinstance(value, bool | float | str)


def _runs(records: list[dict[str, Any]], keys: list[Any]) -> Iterable[tuple[Any, list[dict[str, Any]]]]:
    """``(key, records)`` for each run of consecutive records with the same key, at most
    ``PAGE`` records each, in order."""
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or keys[i] != keys[start] or i - start == PAGE:
            yield keys[start], records[start:i]
            start = i


async def reindex(graph: GraphStore, vectors: Any, provider: Any, batch: int = 64,
                  progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Rebuild every vector point from the graph. Returns ``{"reindexed", "removed"}``.
    ``progress(done, total)`` is called after each batch (``total``: the memories to
    reindex, counted at the start).

    Every memory that is not DELETED or REJECTED is embedded again with ``provider`` (a
    caller-supplied embedding is replaced by the provider's), its payload built by
    :func:`build_payload`, its sparse BM25 vector from its content plus its PRECEDED_BY
    predecessor's; its ``embedding_status``/``embedding_model`` are recorded on the node.
    Points without a live memory are deleted.
    """
    live: set[str] = set()
    skip = 0
    count = 0
    total = await graph.memories.count() - await graph.memories.count(states=_GONE_STATES) if progress else 0
    while True:
        rows = await graph.memories.reindex_page(skip, batch)
        if not rows:
            break
        memories = [memory for memory, _ in rows]
        previous = [prev for _, prev in rows]
        matrix = await asyncio.to_thread(provider.embed, [m.content for m in memories])
        for i, memory in enumerate(memories):
            memory.embedding_model = provider.name
            memory.embedding_status = memory_pb2.EMBEDDING_STATUS_DONE
            weights = bm25_doc_weights(analyze(memory.content), analyze(previous[i]))
            keys = sorted(weights)
            sparse = (keys, [weights[k] for k in keys]) if keys else None
            await vectors.upsert(memory.id, matrix[i].tolist(), build_payload(memory), sparse=sparse)
            await graph.memories.set_enrichment(memory.id, memory.content_hash, {
                "embedding_status": "EMBEDDING_STATUS_DONE", "embedding_model": provider.name})
            live.add(memory.id)
            count += 1
        skip += batch
        if progress is not None:
            progress(count, max(total, count))
    orphans: list[str] = []
    offset = None
    while True:
        points, offset = await vectors.scroll(limit=256, offset=offset)
        orphans.extend(p.id for p in points if str(p.id) not in live)
        if offset is None:
            break
    if orphans:
        await vectors.delete(orphans)
    await vectors.flush()
    return {"reindexed": count, "removed": len(orphans)}
