"""``automem import FILE`` and ``automem export``: memories in and out of a running service as
JSON Lines, over gRPC (automem/cli/connect.py), with no downtime.

* ``import FILE --format native|automem|mem0`` — reads the whole file, maps and checks every
  record (automem/cli/transfer_formats.py; the write path's own rules) and writes nothing
  when any is bad: each bad one is reported as ``line N: <field>: <reason>`` and the exit
  code is 1. Then stores each memory with ``CreateMemory`` and an idempotency key derived
  from the record (so importing the same file again stores nothing new), then the relations
  (``BatchCreateRelations``, supersessions oldest first so chains are rebuilt). Counts:
  created / already present / failed, for memories and for relations; records left out on
  purpose are counted by reason.
* ``export [--out FILE] --format native|automem|mem0`` — every live memory of the scope
  (ACTIVE, SUPERSEDED, ARCHIVED, PENDING_REVIEW) and the relations among them, read from the
  ``ExportBackup`` stream (admin key allowed on every scope); written to a temporary file
  renamed into place at the end, so a failed export leaves no partial file.

Progress bars (rich) go to stderr when it is a terminal; ``--json`` prints one JSON object
(the counts) instead of the text summary.

Exit codes, the same in every format (automem/cli/main.py's for every command):

* 0 — done: every memory and relation of the file stored or already present (records left
  out on purpose do not count), the export written; ``--dry-run``: the file is valid.
* 1 — failed: the file was refused (each bad record listed; nothing written), the service
  refused some records (the others stored; each failure listed), or the command could not
  run (file unreadable, service unreachable, key refused: one line on stderr).
* 2 — usage: an option value not allowed (``--concurrency 0``, ``--timeout 0``, an unknown
  ``--format``), as argparse, or a bad ``AUTOMEM_*`` setting.
* 130 — interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from automem.cli import transfer_formats as formats
from automem.cli.connect import add_connection_options, grpc_address, online_client
from automem.cli.output import error_line, stdout_closed, whole_file
from automem.common.lifecycle import SUPERSEDING_RELATIONS
from automem.common.model import (
    AUTHORABLE_RELATIONS,
    SYSTEM_RELATIONS,
    node_to_memory,
    parse_relation_type,
    ts,
)
from automem.common.settings import Settings
from automem.v1 import ingest_service_pb2, memory_pb2, recall_service_pb2, review_service_pb2

if TYPE_CHECKING:
    from rich.progress import Progress

#: Memories stored at once (CreateMemory calls in flight).
DEFAULT_CONCURRENCY = 8
#: Relations per BatchCreateRelations call (the service's batch_max default).
RELATION_BATCH = 500
#: Statuses that fail one record; any other status (UNAVAILABLE, UNAUTHENTICATED,
#: PERMISSION_DENIED, ...) stops the command.
ITEM_CODES = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS,
              grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)
#: Graph neighbours ListGraphNeighbors lists at most (automem/recall/graph_views.py
#: MAX_NEIGHBOURS): an answer this full may leave out a stored edge.
GRAPH_NEIGHBOURS_MAX = 100
#: Errors listed on stderr before "... and N more".
MAX_LISTED_ERRORS = 50
_LIVE_STATES = ("ACTIVE", "SUPERSEDED", "ARCHIVED", "PENDING_REVIEW")


def add_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``import`` and ``export`` with ``command(name, help=...)`` (main.py's subparser maker)."""
    formats_help = ("native: this service's JSON Lines (round-trips exactly); automem: AutoMem's FalkorDB backup "
                    "(the falkordb_*.json[.gz] document or one node/relationship per line; Qdrant backup points "
                    "too); mem0: mem0's get_all output ({\"results\": [...]}, a list, or one item per line)")
    imp = command("import", help="import memories from a JSON Lines file into a running service",
                  description="Validate every record first (nothing is written if any is bad), then store them "
                              "over gRPC. Importing the same file again stores nothing new.")
    imp.add_argument("file", help="file to read ('-' = stdin); gzip is recognised")
    imp.add_argument("--format", required=True, choices=formats.FORMATS, help=formats_help)
    imp.add_argument("--dry-run", action="store_true", help="validate the file and print the counts; write nothing")
    imp.add_argument("--concurrency", type=_at_least_one, default=DEFAULT_CONCURRENCY,
                     help=f"memories stored at once (default: {DEFAULT_CONCURRENCY})")
    _common(imp)
    exp = command("export", help="export the scope's memories and relations from a running service as JSON Lines",
                  description="Needs an admin key allowed on every scope ('*'): the export reads the service's "
                              "ExportBackup stream and keeps the scope's live memories and their relations.")
    exp.add_argument("--out", default="-", help="file to write (default: stdout); written whole or not at all")
    exp.add_argument("--format", default="native", choices=formats.FORMATS,
                     help="native (default): this service's own format, for import here; automem: AutoMem "
                          "backup nodes and relationships; mem0: mem0 MemoryItems (no relations)")
    _common(exp)


def _common(parser: argparse.ArgumentParser) -> None:
    add_connection_options(parser)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    parser.add_argument("--timeout", type=_seconds, default=60.0,
                        help="deadline of each call to the service, seconds (default: 60)")


def _at_least_one(text: str) -> int:
    """``--concurrency``: a whole number of at least 1. Refused as a usage error (exit 2, as
    any bad option value); 0 was refused later, as a failure (exit 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def _seconds(text: str) -> float:
    """``--timeout``: a finite number of seconds above 0 (0 or less made every call fail at
    once, reported as "cannot reach the service")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0 (got {text})")
    return value


def main(settings: Settings, args: argparse.Namespace) -> int:
    """Run ``automem import`` / ``automem export``; returns the exit code. Every failure is
    one line on stderr (``automem <cmd>: <reason>``), never a traceback."""
    # The address is named as found now: the running service's endpoints file goes with it
    # (read after it died, a failure would name the default address instead).
    target = grpc_address(settings, args)
    try:
        if args.cmd == "import":
            return asyncio.run(_import(settings, args))
        return asyncio.run(_export(settings, args))
    except BrokenPipeError:
        return stdout_closed()  # `automem export | head`: not an error of ours
    except grpc.aio.AioRpcError as exc:
        print(f"automem {args.cmd}: {_rpc_error(target, exc)}", file=sys.stderr)
    except OSError as exc:
        print(f"automem {args.cmd}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
    except KeyboardInterrupt:
        print(f"automem {args.cmd}: interrupted", file=sys.stderr)
        return 130
    return 1


def _rpc_error(target: str, exc: grpc.aio.AioRpcError) -> str:
    code = exc.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return f"cannot reach the service at {target} ({code.name}: {exc.details()})"
    return error_line(exc, target)  # as every operator command says it: "permission denied: ..."


def _progress(args: argparse.Namespace) -> Progress:
    """A rich progress display on stderr (description, bar, done/total, rate, ETA), shown only
    when stderr is a terminal and without --json. rich loads here, not with every `automem` command."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Records per second (rich's own rate column counts bytes)."""

        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:,.0f}/s" if task.speed else "", style="progress.data.speed")

    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), RateColumn(),
                    TimeRemainingColumn(), console=console, disable=args.json or not console.is_terminal,
                    transient=True)


def _emit(args: argparse.Namespace, result: dict[str, Any], text: list[str], stream: Any = None) -> None:
    """The result: one JSON object with --json, else the text lines; on ``stream`` (stdout)."""
    stream = stream or sys.stdout
    if args.json:
        print(json.dumps(result, ensure_ascii=False, sort_keys=True), file=stream)
    else:
        for line in text:
            print(line, file=stream)


# --- import ----------------------------------------------------------------------------


async def _read(path: str) -> bytes:
    if path == "-":
        return await asyncio.to_thread(sys.stdin.buffer.read)
    return await asyncio.to_thread(Path(path).read_bytes)


def _line_of(error: str) -> int | None:
    """The file line an error names (``line 3: ...``), None for one about the whole file."""
    found = re.match(r"line (\d+):", error)
    return int(found.group(1)) if found else None


def _report_errors(args: argparse.Namespace, errors: list[str], scope: str) -> int:
    """Print the refusals of a file, in line order (the reading errors came first, then the
    mapping ones: line 3 before line 2), and a summary counting the records refused, not the
    problems (a record with two problems counted twice: "4 bad records" of a 3-line file)."""
    errors = sorted(errors, key=lambda e: (_line_of(e) is not None, _line_of(e) or 0))
    if args.json:
        print(json.dumps({"ok": False, "file": args.file, "format": args.format, "scope": scope,
                          "errors": errors, "written": 0}, ensure_ascii=False, sort_keys=True))
    for line in errors[:MAX_LISTED_ERRORS]:
        print(line, file=sys.stderr)
    more = len(errors) - MAX_LISTED_ERRORS
    records = len({line for e in errors if (line := _line_of(e)) is not None})
    what = ("the file was refused" if not records else
            f"{records} bad record{'s' if records != 1 else ''}" +
            (f" ({len(errors)} problems)" if len(errors) > records else ""))
    print(f"automem import: {args.file} ({args.format}): {what}"
          f"{f' ({more} more not listed)' if more > 0 else ''}; nothing was imported", file=sys.stderr)
    return 1


async def _import(settings: Settings, args: argparse.Namespace) -> int:
    parsed = formats.parse(args.format, await _read(args.file))
    formats.validate(parsed, settings)
    if parsed.errors:
        return _report_errors(args, parsed.errors, args.scope)
    counts: dict[str, Any] = {
        "ok": True, "file": args.file, "format": args.format, "scope": args.scope, "dry_run": args.dry_run,
        "memories": {"created": 0, "already_present": 0, "failed": 0, "total": len(parsed.memories)},
        "relations": {"created": 0, "already_present": 0, "failed": 0, "total": len(parsed.relations)},
        "skipped": dict(parsed.skipped), "failures": [],
        "archived_imported_as_active": sum(r.state == "ARCHIVED" for r in parsed.memories),
    }
    if args.dry_run:
        _emit(args, counts, [(f"{args.file}: {len(parsed.memories)} memories and {len(parsed.relations)} relations "
                             "are valid (dry run: nothing written)"), *_skipped_lines(counts)])
        return 0
    async with online_client(settings, args, call_timeout=args.timeout) as client:
        who = await client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(scope=args.scope),
                                         metadata=client.metadata(), timeout=args.timeout)
        counts["scope"] = who.scope
        with _progress(args) as progress:
            task = progress.add_task("memories", total=len(parsed.memories))
            replacements = {r.target for r in parsed.relations if r.via_supersede}
            stored = await _store_memories(client, args, [m for m in parsed.memories if m.ref not in replacements],
                                           counts, progress, task, parsed.file_message)
            await _supersede(client, args, parsed, stored, counts, progress, task)
            await _store_relations(client, args, parsed, stored, counts, progress)
    failed = counts["memories"]["failed"] + counts["relations"]["failed"]
    counts["ok"] = failed == 0
    m, r = counts["memories"], counts["relations"]
    text = [(f"imported {args.file} ({args.format}) into scope {who.scope!r}: memories {m['created']} created, "
            f"{m['already_present']} already present, {m['failed']} failed; relations {r['created']} created, "
            f"{r['already_present']} already present, {r['failed']} failed"), *_skipped_lines(counts)]
    _emit(args, counts, text)
    for failure in counts["failures"][:MAX_LISTED_ERRORS]:
        print(failure, file=sys.stderr)
    return 0 if failed == 0 else 1


def _skipped_lines(counts: dict[str, Any]) -> Iterator[str]:
    for reason, number in sorted(counts["skipped"].items()):
        yield f"  left out: {number} {reason}"
    if counts["archived_imported_as_active"]:
        yield (f"  note: {counts['archived_imported_as_active']} archived memories were imported as ACTIVE "
               "(consolidation archives; no call does)")


async def _item_call(call: Any) -> tuple[Any, str]:
    """``(response, "")``, or ``(None, <the service's message>)`` when it refused the record
    (:data:`ITEM_CODES`); any other error is raised (it stops the command)."""
    try:
        return await call, ""
    except grpc.aio.AioRpcError as exc:
        if exc.code() not in ITEM_CODES:
            raise
        return None, exc.details() or exc.code().name


def _failed(counts: dict[str, Any], kinds: tuple[str, ...], where: str, reason: str) -> None:
    for kind in kinds:
        counts[kind]["failed"] += 1
    counts["failures"].append(f"{where}: {reason}")


async def _store_memories(client: Any, args: argparse.Namespace, records: list[formats.MemoryRecord],
                          counts: dict[str, Any], progress: Progress, task: Any,
                          named: Callable[[str], str]) -> dict[str, tuple[memory_pb2.Memory, bool]]:
    """CreateMemory for each of ``records``, ``args.concurrency`` at a time; returns ref →
    (stored memory, already present). A record the service refuses is a failure, its
    message naming the file's field (``named``: formats.Parsed.file_message); an error
    that is not about one record (unreachable, not allowed) stops the import."""
    stored: dict[str, tuple[memory_pb2.Memory, bool]] = {}
    gate = asyncio.Semaphore(args.concurrency)

    async def one(record: formats.MemoryRecord) -> None:
        async with gate:
            response, refused = await _item_call(client.ingest.CreateMemory(
                ingest_service_pb2.CreateMemoryRequest(memory=record.item, scope=args.scope,
                                                       idempotency_key=record.key),
                metadata=client.metadata(), timeout=args.timeout))
            if response is None:
                _failed(counts, ("memories",), record.where, named(refused))
            else:
                stored[record.ref] = (response.memory, response.deduplicated)
                counts["memories"]["already_present" if response.deduplicated else "created"] += 1
            progress.advance(task)

    await _each(records, one)
    return stored


async def _each(items: Iterable[Any], one: Callable[[Any], Awaitable[None]]) -> None:
    """Run ``one(item)`` for every item concurrently (each call bounds itself, e.g. with a
    semaphore) and wait for all; the first gRPC error that is not an item's own (one that
    ``one`` let through: the service unreachable, a key not allowed) is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            for item in items:
                group.create_task(one(item))
    except* grpc.aio.AioRpcError as group_error:
        raise group_error.exceptions[0] from None


async def _supersede(client: Any, args: argparse.Namespace, parsed: formats.Parsed,
                     stored: dict[str, tuple[memory_pb2.Memory, bool]], counts: dict[str, Any], progress: Progress,
                     task: Any) -> None:
    """Redo the supersessions marked ``via_supersede``, oldest first: SupersedeMemory creates
    the target as the source's replacement (with the target's idempotency key, so a second
    import answers the replacement it made) and closes the source's window as the first
    supersede did. Adds the targets to ``stored``."""
    records = {record.ref: record for record in parsed.memories}
    for relation in formats.supersession_order([r for r in parsed.relations if r.via_supersede]):
        target = records[relation.target]
        source = stored.get(relation.source)
        progress.advance(task)
        if source is None:
            _failed(counts, ("memories", "relations"), target.where,
                    f"not created: the memory it replaces ({relation.where}) failed")
            continue
        response, refused = await _item_call(client.ingest.SupersedeMemory(
            ingest_service_pb2.SupersedeMemoryRequest(
                id=source[0].id, scope=args.scope, replacement=target.item,
                relation_type=parse_relation_type(relation.type), reason=relation.reason,
                idempotency_key=target.key,
                # The edge's own strength (a supersede writes 0.9 by default); an implied edge
                # (the file had none) gets the default.
                **({} if relation.implied else {"strength": relation.strength})),
            metadata=client.metadata(), timeout=args.timeout))
        if response is None:  # about the replacement: the file's field (replacement.content -> properties.content)
            _failed(counts, ("memories", "relations"), target.where, parsed.file_message(refused))
            continue
        # A replay (the key's first supersede) answers as the first call did; the source was
        # then found already present and already superseded by that replacement.
        again = (source[0].state == memory_pb2.MEMORY_STATE_SUPERSEDED
                 and source[0].superseded_by == response.replacement.id)
        stored[target.ref] = (response.replacement, again)
        counts["memories"]["already_present" if again else "created"] += 1
        counts["relations"]["already_present" if again else "created"] += 1


async def _store_relations(client: Any, args: argparse.Namespace, parsed: formats.Parsed,
                           stored: dict[str, tuple[memory_pb2.Memory, bool]], counts: dict[str, Any],
                           progress: Progress) -> None:
    """BatchCreateRelations for the relations whose two memories are stored, in
    :func:`formats.supersession_order` (the service runs a batch in order). A supersession
    already in place (the source is superseded by the target) is not sent again. For a
    relation both of whose memories were already present (a second import) the stored
    edges are read first (:func:`_stored_edges`): the same edge with the same strength is
    already present and not sent again (the service would MERGE it and announce it anew);
    one stored with another strength is a failure naming both strengths and is left as
    stored (sending it would silently overwrite what is stored); one not stored is created
    and counted so. A relation with a memory created by this import is created. A failure
    the service reports for one relation is counted and named by its line."""
    ordered = formats.supersession_order([r for r in parsed.relations if not r.via_supersede])
    if not ordered:
        return
    task = progress.add_task("relations", total=len(ordered))
    existing = await _stored_edges(client, args, {stored[r.source][0].id for r in ordered
                                                  if r.source in stored and r.target in stored
                                                  and stored[r.source][1] and stored[r.target][1]})
    proposed = await _pending_proposals(client, args, any(
        r.type in SUPERSEDING_RELATIONS and r.source in stored and r.target in stored
        and stored[r.source][1] and stored[r.target][1]
        and stored[r.target][0].state == memory_pb2.MEMORY_STATE_PENDING_REVIEW for r in ordered))
    pending: list[tuple[formats.RelationRecord, ingest_service_pb2.CreateRelationRequest, bool]] = []
    for relation in ordered:
        source, target = stored.get(relation.source), stored.get(relation.target)
        if source is None or target is None:
            _failed(counts, ("relations",), relation.where,
                    f"relation not created: its {'source' if source is None else 'target'} memory failed")
            progress.advance(task)
            continue
        if relation.type in SUPERSEDING_RELATIONS and source[0].superseded_by == target[0].id:
            counts["relations"]["already_present"] += 1
            progress.advance(task)
            continue
        both_present = source[1] and target[1]
        if both_present and (target[0].id, source[0].id) in proposed:
            # The supersede proposal this relation stands for waits already (a second import).
            counts["relations"]["already_present"] += 1
            progress.advance(task)
            continue
        edges = existing.get(source[0].id) if both_present else {}
        strength = None if edges is None else edges.get((relation.type, target[0].id))
        # Not known (the source has more neighbours than one read lists): sent, and counted as
        # already present, its two memories being so.
        present = both_present and edges is None
        if strength is not None and abs(strength - relation.strength) <= 1e-9:
            counts["relations"]["already_present"] += 1
            progress.advance(task)
            continue
        if strength is not None:
            label = "relation" if args.format == "native" else "relationship"
            _failed(counts, ("relations",), relation.where,
                    f"{label}: {relation.type} {relation.source!r} → {relation.target!r} is stored with strength "
                    f"{strength}, this file has {relation.strength}: left as stored (an import does not change "
                    "a stored relation)")
            progress.advance(task)
            continue
        request = ingest_service_pb2.CreateRelationRequest(
            relation=memory_pb2.Relation(source_id=source[0].id, target_id=target[0].id,
                                         type=parse_relation_type(relation.type), strength=relation.strength,
                                         reason=relation.reason),
            scope=args.scope)
        pending.append((relation, request, present))
    for start in range(0, len(pending), RELATION_BATCH):
        chunk = pending[start:start + RELATION_BATCH]
        response = await client.ingest.BatchCreateRelations(
            ingest_service_pb2.BatchCreateRelationsRequest(requests=[r for _, r, _ in chunk], scope=args.scope),
            metadata=client.metadata(), timeout=args.timeout)
        failed = {f.index: f for f in response.failures}
        for index, (relation, _, present) in enumerate(chunk):
            if index in failed:
                _failed(counts, ("relations",), relation.where, failed[index].message)
            else:
                counts["relations"]["already_present" if present else "created"] += 1
        progress.advance(task, len(chunk))


async def _pending_proposals(client: Any, args: argparse.Namespace, wanted: bool) -> set[tuple[str, str]]:
    """The pending supersede proposals of the scope as (replacement id, superseded id)
    pairs, read with ListReviewItems page by page; an empty set without a read when not
    ``wanted`` (no relation of the file points at a memory pending review that was stored
    before the import)."""
    found: set[tuple[str, str]] = set()
    token = ""
    while wanted:
        page = await client.review.ListReviewItems(
            review_service_pb2.ListReviewItemsRequest(scope=args.scope, kind="supersede_proposal", status="pending",
                                                      page_size=200, page_token=token),
            metadata=client.metadata(), timeout=args.timeout)
        found.update((item.memory_id, item.target_id) for item in page.items)
        token = page.next_page_token
        if not token:
            break
    return found


async def _stored_edges(client: Any, args: argparse.Namespace,
                        ids: set[str]) -> dict[str, dict[tuple[str, str], float] | None]:
    """The authored edges stored out of each memory of ``ids``: id → {(type, target id):
    strength}, read with ListGraphNeighbors (one hop, no semantic neighbours, every live
    state), ``args.concurrency`` calls at a time. ``None`` for a memory whose neighbours
    fill the answer (:data:`GRAPH_NEIGHBOURS_MAX`): an edge missing from it may be stored. A
    memory the service no longer finds maps to ``{}`` (its relations then fail on create,
    naming it)."""
    gate = asyncio.Semaphore(args.concurrency)
    read = recall_service_pb2.ReadOptions(state_mode=recall_service_pb2.STATE_MODE_HISTORY, include_archived=True,
                                          include_pending=True)
    found: dict[str, dict[tuple[str, str], float] | None] = {}

    async def one(memory_id: str) -> None:
        async with gate:
            response, _ = await _item_call(client.recall.ListGraphNeighbors(
                recall_service_pb2.ListGraphNeighborsRequest(id=memory_id, scope=args.scope, depth=1,
                                                             include_semantic=False, read=read),
                metadata=client.metadata(), timeout=args.timeout))
        if response is not None and len(response.graph_neighbors) >= GRAPH_NEIGHBOURS_MAX:
            found[memory_id] = None
            return
        found[memory_id] = {} if response is None else {
            (edge.type, edge.target_id): edge.strength for edge in response.edges
            if edge.source_id == memory_id and edge.type in AUTHORABLE_RELATIONS}

    await _each(ids, one)
    return found


# --- export ----------------------------------------------------------------------------


async def _export(settings: Settings, args: argparse.Namespace) -> int:
    counts = {"memories": 0, "relations": 0, "relations_left_out": 0, "pending_left_out": 0, "proposals_left_out": 0}
    async with online_client(settings, args) as client:
        who = await client.recall.WhoAmI(recall_service_pb2.WhoAmIRequest(scope=args.scope),
                                         metadata=client.metadata(), timeout=args.timeout)
        scope = who.scope
        stream = client.ingest.ExportBackup(ingest_service_pb2.ExportBackupRequest(skip_events=True),
                                            metadata=client.metadata())
        with whole_file(args.out) as out, _progress(args) as progress:
            task = progress.add_task("records", total=None)
            ids: dict[int, str] = {}
            numbers: dict[str, int] = {}
            #: Memories written that wait for review (PENDING_REVIEW).
            pending: set[str] = set()
            proposals: list[dict[str, Any]] = []
            started = False
            async for chunk in stream:
                if not started and args.format == "native":
                    # Written once the service answered: a key it refuses prints nothing to stdout.
                    out.write(formats.native_header_line(scope, datetime.now(UTC)) + "\n")
                started = True
                record = json.loads(chunk.json_line)
                progress.advance(task)
                kind = record.get("kind")
                if kind == "memory":
                    props = record.get("properties") or {}
                    if props.get("scope") != scope or props.get("state", "ACTIVE") not in _LIVE_STATES:
                        continue
                    memory = node_to_memory(props)
                    if args.format != "native" and memory.state == memory_pb2.MEMORY_STATE_PENDING_REVIEW:
                        # AutoMem's and mem0's formats have no review state: written, it would be
                        # read back (anywhere) as a current fact no reviewer approved.
                        counts["pending_left_out"] += 1
                        continue
                    ids[record["ref"]] = memory.id
                    numbers[memory.id] = len(numbers)
                    if memory.state == memory_pb2.MEMORY_STATE_PENDING_REVIEW:
                        pending.add(memory.id)
                    out.write(_memory_line(args.format, numbers[memory.id], memory) + "\n")
                    counts["memories"] += 1
                elif kind == "review_item":
                    props = record.get("properties") or {}
                    if (props.get("kind") == "supersede_proposal" and props.get("status") == "pending"
                            and props.get("scope") == scope):
                        proposals.append(props)
                elif kind == "edge":
                    source, target = ids.get(record.get("source")), ids.get(record.get("target"))
                    name = record.get("type")
                    if source is None or target is None or name not in AUTHORABLE_RELATIONS + SYSTEM_RELATIONS:
                        continue
                    if args.format == "mem0":
                        counts["relations_left_out"] += 1
                        continue
                    relation = _relation(source, target, name, record.get("properties") or {}, scope)
                    line = (formats.native_relation_line(relation) if args.format == "native" else
                            formats.automem_relationship_line(numbers[source], numbers[target], relation))
                    out.write(line + "\n")
                    counts["relations"] += 1
            if args.format == "native":
                # A replacement pending review waits with its proposal: written as the superseding
                # relation it proposes (from a current memory to a pending one), which an import
                # turns back into a proposal (CreateRelation), not into a supersession. A proposal
                # between two current memories (enrichment's contradiction check) is a review item
                # only: written as that relation, an import superseded the older one for real
                # (break-it review); it is left out and counted.
                for props in proposals:
                    old, new = props.get("target_id"), props.get("memory_id")
                    if old in numbers and new in numbers and new not in pending:
                        counts["proposals_left_out"] += 1
                    elif old in numbers and new in numbers:
                        name = props.get("relation_type") or "INVALIDATED_BY"
                        out.write(formats.native_relation_line(_relation(
                            old, new, name if name in ("INVALIDATED_BY", "EVOLVED_INTO") else "INVALIDATED_BY",
                            {"strength": props.get("strength", 0.9), "reason": props.get("reason") or ""},
                            scope)) + "\n")
                        counts["relations"] += 1
            if started and args.format == "native":
                out.write(formats.native_end_line(counts["memories"], counts["relations"]) + "\n")
    result = {"ok": True, "format": args.format, "scope": scope, "out": args.out, **counts}
    text = [f"exported {counts['memories']} memories and {counts['relations']} relations of scope {scope!r} "
            f"({args.format})" + (f" to {args.out}" if args.out != "-" else "")]
    if counts["relations_left_out"]:
        text.append(f"  left out: {counts['relations_left_out']} relations (mem0's format has none)")
    if counts["proposals_left_out"]:
        text.append(f"  left out: {counts['proposals_left_out']} supersede proposals between two current "
                    "memories (review items awaiting a reviewer here; both memories are exported as current)")
    if counts["pending_left_out"]:
        text.append(f"  left out: {counts['pending_left_out']} memories pending review ({args.format}'s format "
                    "has no review state; the native format keeps them)")
    # Exported to stdout: the summary goes to stderr, apart from the records.
    _emit(args, result, text, sys.stderr if args.out == "-" else sys.stdout)
    return 0


def _memory_line(fmt: str, number: int, memory: memory_pb2.Memory) -> str:
    if fmt == "native":
        return formats.native_memory_line(memory)
    if fmt == "automem":
        return formats.automem_node_line(number, memory)
    return formats.mem0_line(memory)


def _relation(source: str, target: str, name: str, props: dict[str, Any], scope: str) -> memory_pb2.Relation:
    relation = memory_pb2.Relation(source_id=source, target_id=target,
                                   type=memory_pb2.RelationType.Value("RELATION_TYPE_" + name),
                                   strength=float(props.get("strength") or 0.0), reason=props.get("reason") or "",
                                   scope=scope)
    if props.get("create_time") is not None:
        relation.create_time.CopyFrom(ts(float(props["create_time"])))
    return relation
