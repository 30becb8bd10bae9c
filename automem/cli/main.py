"""The ``automem`` command.

* ``automem up`` — embedded NATS + FalkorDB (+ the in-process Qdrant shard) and every target;
  those of ``AUTOMEM_CHILD_TARGETS`` that can leave this process run as child processes
  (automem/children.py; by default the gateway).
* ``automem serve --target ingest,recall`` — chosen targets against external servers.
* ``automem keys create|list|revoke|events`` — API keys (printed once) and their audit record.
* ``automem mcp --grpc HOST:PORT`` — the MCP tools over stdio, against a running service.
* ``automem backup [--out FILE]`` — full export (nodes, edges, events) as JSON lines.
* ``automem restore FILE [--force] [--reindex]`` — recreate an export in an empty graph;
  ``--reindex`` then rebuilds the vector index, otherwise it says when one is needed.
* ``automem reindex`` — rebuild the vector points from the graph.
* ``automem sync [--repair]`` — the graph/vector drift check of a running service.
* ``automem import FILE --format native|automem|mem0`` / ``automem export [--out FILE]`` —
  memories in and out of a *running* service as JSON Lines (automem/cli/transfer.py).

Online or offline (automem/cli/connect.py): keys/backup/restore/reindex talk to a running
service over gRPC (automem/cli/operate.py) when one is found — ``--grpc``,
``AUTOMEM_GRPC_TARGET``, or the ``automem.endpoints.json`` that ``automem up`` keeps in its
data dir — with an admin key; otherwise, or with ``--offline``, they start the embedded
servers for ``AUTOMEM_DATA_DIR`` (unless external ones are configured) and work on the stores
directly, which needs the data dir free (``automem up`` stopped) and, without ``--offline``,
existing (a missing one is an error, not a new empty store). Every operator command
takes ``--json``, shows progress bars on a terminal (automem/cli/output.py) and reports a
failure as one line ``automem <command>: <message>`` with exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from automem.children import ChildProcess, address_setting, local_host, parent_service_name, report_ready
from automem.cli import operate, rest
from automem.cli.connect import (
    add_connection_options,
    discover,
    grpc_address,
    is_online,
    remove_endpoints,
    write_endpoints,
)
from automem.cli.output import (
    add_json_option,
    backup_done,
    backup_events,
    backup_out,
    emit,
    error_line,
    event_line,
    fail,
    progress,
    stdout_closed,
    wants_json,
    whole_file,
)
from automem.common.embedded import EmbeddedRuntime, EmbeddedServerError
from automem.common.errors import ListenError, UnreachableError
from automem.common.jsontext import json_lines
from automem.common.settings import Settings, get_settings
from automem.runner import Runner, child_targets, closure, split_shard_warning, targets
from automem.vectors.shared import ShardServer, socket_path

if TYPE_CHECKING:
    from automem.runtime import Runtime

log = logging.getLogger("automem")


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


async def _run(settings: Settings, targets: list[str], embedded: bool, ready_fd: int | None = None) -> int:
    """Run ``targets`` until SIGINT/SIGTERM/SIGHUP; returns the exit code.

    ``embedded`` (``automem up``): start the embedded servers first, and run the targets of
    ``settings.child_targets`` that may leave this process as child processes
    (automem/children.py). ``ready_fd``: a pipe to report the bound ports on once up (a
    child of ``automem up``). A signal during start-up (a long AOF load, a store that does not
    answer) stops what started so far and returns 0.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    up = _Started(EmbeddedRuntime(settings) if embedded else None)

    def request_stop() -> None:
        # The supervisors stop restarting at once: a stop that reaches every process together
        # (systemd's control-group SIGTERM) must not look like children that died.
        up.stopping()
        stop.set()

    # SIGHUP (the terminal or SSH session gone) stops in order too, as SIGINT and SIGTERM do.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, request_stop)
    code = 0
    try:
        starting = asyncio.create_task(_start(up, settings, targets, embedded, ready_fd))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([starting, stopped], return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stop requested during start-up")
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            return 0
        ctx = starting.result()
        failed = asyncio.create_task(_watch(ctx.tasks))
        done, _ = await asyncio.wait([stopped, failed], return_when=asyncio.FIRST_COMPLETED)
        if failed in done and failed.result():
            code = 1
    except (EmbeddedServerError, ListenError, UnreachableError):
        raise  # main() prints it as one line (the data dir, a port in use, a server not reached), after the clean-up below
    except Exception as exc:
        # One line on stderr (main() prints it after the clean-up below); the traceback at DEBUG.
        log.debug("start failed", exc_info=True)
        raise _start_failure(exc, up.settings or settings) from exc
    finally:
        log.info("shutting down")
        if embedded and up.settings is not None:
            remove_endpoints(up.settings)
        for child in reversed(up.children):
            await child.stop()
        if up.shard_server is not None:
            await up.shard_server.close()
        if up.runner is not None:
            await up.runner.stop()
        if up.runtime is not None:
            await up.runtime.stop()
    return code


class StartFailure(Exception):
    """A start that failed, said in one line (:func:`_start_failure`): ``line`` for stderr and
    the exit ``code``, 2 when it names a setting (bad configuration), else 1."""

    def __init__(self, line: str, code: int) -> None:
        super().__init__(line)
        self.line = line
        self.code = code


def _start_failure(exc: BaseException, settings: Settings) -> StartFailure:
    """The :class:`StartFailure` for ``exc``, raised while starting under ``settings``: an
    OSError (itself or one it was raised from) on a path inside ``AUTOMEM_DATA_DIR`` — a store's
    directory that cannot be made or written there (a file in its place, a read-only or full
    volume) — names that setting and the path, code 2; anything else is ``start failed: <its
    text>``, code 1."""
    data_dir = Path(settings.data_dir).resolve()
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.filename:
            path = Path(os.fsdecode(seen.filename))
            if path.resolve().is_relative_to(data_dir):
                why = ("it exists and is not a directory" if isinstance(seen, FileExistsError | NotADirectoryError)
                       else seen.strerror or str(seen))
                return StartFailure(f"setting AUTOMEM_DATA_DIR: cannot create or write {str(path)!r}: {why} "
                                    f"(AUTOMEM_DATA_DIR is {str(settings.data_dir)!r})", 2)
        seen = seen.__cause__ or seen.__context__
    return StartFailure(f"start failed: {error_line(exc)}", 1)


class _Started:
    """What :func:`_start` started so far (for :func:`_run` to stop, also mid-start)."""

    def __init__(self, runtime: EmbeddedRuntime | None) -> None:
        self.runtime = runtime
        #: The effective settings, once the embedded servers are up.
        self.settings: Settings | None = None
        self.runner: Runner | None = None
        self.children: list[ChildProcess] = []
        self.shard_server: ShardServer | None = None

    def stopping(self) -> None:
        """Tell the supervisors (servers and children) that the process is stopping: an exit
        seen from now on is not restarted."""
        if self.runtime is not None:
            self.runtime.stopping()
        for child in self.children:
            child.stopping()


async def _start(up: _Started, settings: Settings, targets: list[str], embedded: bool,
                 ready_fd: int | None) -> Runtime:
    """Start the embedded servers, this process's targets and the child processes, recording
    each in ``up`` as it starts; returns the runtime context. Raises what a start raises."""
    runtime = up.runtime
    if runtime is not None:
        settings = await runtime.start()
    up.settings = settings
    in_process, child_names = targets, []
    if not embedded and (warning := split_shard_warning(settings, targets)):
        log.warning(warning)
    if embedded:
        in_process, child_names, kept = child_targets(settings, targets, _names(settings.child_targets))
        for name, reason in kept.items():
            log.info("target stays in this process", extra={"target": name, "reason": reason})
    children = up.children = [ChildProcess(settings, name) for name in child_names]
    # This process's traces and metrics say which part it is, as the children's do.
    settings = settings.model_copy(update={"otel_service_name": parent_service_name(settings, in_process, child_names)})
    # Where each child's services are, known before any process starts.
    addresses = {t: c.grpc_address for c in children for t in c.targets if address_setting(t)}
    runner = up.runner = Runner(settings.model_copy(update={address_setting(t): a for t, a in addresses.items()}),
                                in_process)
    if runtime is not None:
        runner.ctx.server_restarts = runtime.restarts
    # This process's gRPC port answers the children's services too: a client given the one
    # address of `automem up` (the CLI's --grpc, the SDK) got UNIMPLEMENTED for enrich's.
    runner.ctx.forwarded = dict(addresses)
    ctx = await runner.start()
    if runtime is not None and settings.supervise_embedded:
        ctx.tasks.append(asyncio.create_task(runtime.supervise(), name="embedded-supervisor"))
    env_addresses = {f"AUTOMEM_{t.upper()}_ADDR": a for t, a in addresses.items()}
    # The embedded shard stays here; children needing vectors reach it through its socket.
    if embedded and settings.vector_share and settings.qdrant_url.strip() == "" and ctx.vectors is not None \
            and any("vectors" in closure(c.targets) for c in children):
        up.shard_server = ShardServer(ctx.vectors.inner, socket_path(settings.data_dir))
        await up.shard_server.start()
        env_addresses["QDRANT_URL"] = f"unix:{up.shard_server.path}"
    parent = f"{local_host(settings)}:{ctx.grpc_port}" if ctx.grpc_port else ""
    for child in children:
        await child.start(child.environment(env_addresses, parent))
        ctx.http_port = ctx.http_port or child.report.get("http_port", 0)
        counts = runtime.restarts if runtime is not None else None  # /health server_restarts
        ctx.tasks.append(asyncio.create_task(child.supervise(counts), name=f"{child.target}-supervisor"))
    if ready_fd is not None:
        report_ready(ready_fd, ctx.grpc_port, ctx.http_port)
    if embedded:
        # Where the operator CLI finds this service (automem/cli/connect.py), until it stops.
        host = local_host(settings)
        write_endpoints(settings, f"{host}:{ctx.grpc_port}" if ctx.grpc_port else "",
                        f"http://{host}:{ctx.http_port}" if ctx.http_port else "", addresses)
    # A child names its own port by its targets ("gateway": it was "parent", read as automem
    # up's port).
    own = "parent" if ready_fd is None else "+".join(targets)
    metrics_ports = {own: ctx.metrics_port, **{c.target: c.metrics_port for c in children}}
    # A child of `automem up` (it reports to ready_fd) says so: its own "automem is up" line,
    # with grpc_port 0 for the gateway child, read as the service's answer to an operator.
    log.info("child process is up" if ready_fd is not None else "automem is up",
             extra={"targets": targets, "children": child_names, "http_port": ctx.http_port,
                    "grpc_port": ctx.grpc_port, "metrics_ports": metrics_ports, "data_dir": str(settings.data_dir)})
    return ctx


async def _watch(tasks: list[asyncio.Task]) -> bool:
    """Returns True when a module's background task dies."""
    while True:
        for task in list(tasks):
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("module task failed", extra={"task": task.get_name(), "error": repr(task.exception())})
                return True
        await asyncio.sleep(0.5)


async def _keys(settings: Settings, args: argparse.Namespace) -> int:
    from automem.common.keys import KeyStore
    from automem.graph import GraphStore

    runtime = EmbeddedRuntime(settings) if not settings.falkordb_host else None
    if runtime is not None:
        settings = await runtime.start()
    graph = GraphStore(settings)
    try:
        store = KeyStore(graph)
        if args.keys_cmd == "create":
            secret, info = await store.create(args.role, args.scopes, args.default_scope, args.name or "",
                                              args.require_review)
            emit(args, {"secret": secret, "api_key": _key_dict(info)}, secret)
            if not wants_json(args):
                print(f"# key {info.id}: role={info.role} scopes={','.join(info.scopes)} "
                      f"default_scope={info.default_scope} (shown once)", file=sys.stderr)
        elif args.keys_cmd == "list":
            for k in await store.list():
                emit(args, _key_dict(k), f"{k.id}\t{k.role}\t{','.join(k.scopes)}\t{k.default_scope}\t"
                                         f"{'revoked' if k.revoked else 'active'}\t{k.name}")
        elif args.keys_cmd == "revoke":
            await store.revoke(args.key_id)
            emit(args, {"id": args.key_id, "revoked": True}, f"revoked {args.key_id}")
        elif args.keys_cmd == "events":
            for r in await graph.keys.events(args.key_id or ""):
                emit(args, {"id": r[0], "action": r[1], "key_id": r[2], "actor": r[3], "role": r[4],
                            "scopes": list(r[5] or []), "event_time": datetime.fromtimestamp(r[6], UTC).isoformat()},
                     f"{datetime.fromtimestamp(r[6], UTC).isoformat()}\t{r[1]}\t{r[2]}\t{r[3]}\t{r[4]}\t"
                     f"{','.join(r[5] or [])}")
    finally:
        await graph.close()
        if runtime is not None:
            await runtime.stop()
    return 0


def _key_dict(info: Any) -> dict[str, Any]:
    """An offline key's fields as ``--json`` prints them (the online ApiKey's names)."""
    return {"id": info.id, "role": info.role, "scopes": list(info.scopes), "default_scope": info.default_scope,
            "display_name": info.name, "revoked": info.revoked, "created_by": info.created_by,
            "revoked_by": info.revoked_by, "require_review": info.require_review,
            "create_time": datetime.fromtimestamp(info.create_time, UTC).isoformat()}


async def _connect_bus(bus: Any, timeout: float = 15.0) -> None:
    """Connect the bus or fail in ``timeout`` seconds naming the URL (a CLI must not hang)."""
    from automem.common.errors import Unavailable

    try:
        await asyncio.wait_for(bus.connect(), timeout)
    except Unavailable as exc:  # the bus's own bound (store_timeout_seconds) passed first
        raise Unavailable(f"cannot reach NATS: {exc.message}; set NATS_URL to the service's NATS") from None
    except (TimeoutError, OSError) as exc:
        raise Unavailable(f"cannot reach NATS at {bus.settings.nats_url} within {timeout:.0f}s ({exc!r}); "
                          "set NATS_URL to the service's NATS") from None


async def _reindex_vectors(settings: Settings, graph: Any) -> dict[str, int] | None:
    """Rebuild every vector point from ``graph`` (automem/common/backup.py ``reindex``) with
    the configured embedding provider. Returns ``{"reindexed", "removed"}``, or None (after
    saying so on stderr) when vectors are disabled."""
    from automem.common import backup
    from automem.common.embedding import make_provider
    from automem.vectors import make_vector_store

    vectors = make_vector_store(settings)
    if vectors is None:
        print("vectors are disabled; nothing to reindex", file=sys.stderr)
        return None
    try:
        provider = await asyncio.to_thread(make_provider, settings)
        await vectors.ensure_collection(provider.dimension)
        with progress("reindex", None, unit="memories") as bar:
            return await backup.reindex(graph, vectors, provider,
                                        progress=lambda done, total: bar.update(completed=done, total=total))
    finally:
        await vectors.close()


async def _say_if_reindex_needed(settings: Settings, live_memories: int) -> None:
    """After a restore without ``--reindex``: say on stderr when the vector index does not hold
    one point per restored live memory (a restore never writes vectors; enrichment does not
    replay the restored events), naming the command that rebuilds it."""
    from automem.vectors import make_vector_store

    vectors = make_vector_store(settings)
    if vectors is None:
        return
    try:
        points = await vectors.count() if await vectors.dimension() is not None else 0
    finally:
        await vectors.close()
    if points != live_memories:
        print(f"reindex needed: {live_memories} memories restored, the vector index {settings.collection_name!r} "
              f"holds {points} points; recall by meaning misses them until you run `automem reindex` "
              "(or restore with --reindex)", file=sys.stderr)


async def _recovery(settings: Settings, args: argparse.Namespace) -> int:
    """backup / restore / reindex (automem/common/backup.py) against the configured stores."""
    from automem.common import backup
    from automem.common.bus import Bus
    from automem.graph import GraphStore

    runtime = EmbeddedRuntime(settings) if not (settings.falkordb_host and settings.nats_url) else None
    if runtime is not None:
        settings = await runtime.start()
    graph = GraphStore(settings)
    bus = Bus(settings)
    try:
        await graph.ensure_schema()
        if args.cmd == "backup":
            await _connect_bus(bus)
            to_file = backup_out(args)
            with whole_file(to_file) as out:
                count = events = 0
                last = ""
                truncated_since = None
                with progress("backup", None) as bar:
                    async for line in backup.export_lines(graph, None if args.no_events else bus):
                        out.write(line + "\n")
                        if count == 0:
                            header = json.loads(line)
                            truncated_since = header.get("events_retained_since") if header.get(
                                "events_truncated") else None
                            totals = header.get("counts") or {}
                            bar.update(total=1 + int(totals.get("nodes", 0)) + int(totals.get("edges", 0)))
                        count += 1
                        if event_line(line):
                            events += 1
                            bar.update(total=count)
                        bar.advance()
                        last = line
            events = backup_events(last, events)
            backup_done(args, count, events)
            if truncated_since is not None:
                print("note: the event stream's retention removed older events; the exported history starts at "
                      f"{datetime.fromtimestamp(truncated_since, UTC).isoformat()}", file=sys.stderr)
            if not args.no_events and events == 0 and count > 0:
                print(f"warning: stream {settings.stream_name!r} at {settings.nats_url} holds no events, so this "
                      "backup has no history; point NATS_URL at the service's NATS", file=sys.stderr)
        elif args.cmd == "restore":
            await _connect_bus(bus)
            from pathlib import Path

            text = await asyncio.to_thread(Path(args.file).read_text, encoding="utf-8-sig")
            records = backup.read_lines(json_lines(text))
            with progress("restore", None) as bar:
                counts = await backup.restore_records(
                    graph, records, bus, force=args.force,
                    progress=lambda done, total: bar.update(completed=done, total=total))
            if not wants_json(args):
                print(f"restored {counts['nodes']} nodes, {counts['edges']} edges, {counts['events']} events")
            if counts.get("events_dropped"):
                print(f"warning: the stream's retention (AUTOMEM_EVENT_RETENTION_BYTES) removed the oldest "
                      f"{counts['events_dropped']} restored events at once; their history is gone", file=sys.stderr)
            if args.reindex:
                done = await _reindex_vectors(settings, graph)
                if done is not None:
                    counts["reindex"] = done
                    if not wants_json(args):
                        print(f"reindexed {done['reindexed']} memories, removed {done['removed']} orphaned points")
            else:
                await _say_if_reindex_needed(settings, counts["live_memories"])
            emit(args, counts)
        elif args.cmd == "reindex" and getattr(args, "provider", ""):
            from automem.enrich.reindex import reindex_with_provider

            with progress("re-embed", None, unit="memories") as bar:
                result = await reindex_with_provider(
                    settings, args.provider, graph, progress=lambda done, total: bar.update(completed=done, total=total))
            emit(args, result)
            print(f"reindexed {result['reindexed']} memories with {result['provider']} ({result['dimension']} "
                  f"dimensions) into {result['collection']}"
                  + (f"; previous collection kept as {result['previous']}" if result.get("previous") else ""),
                  file=sys.stderr if wants_json(args) else sys.stdout)
            print(f"start the service with AUTOMEM_EMBEDDING_PROVIDER={args.provider}" if result["switched"] else
                  f"set QDRANT_COLLECTION={result['collection']} and AUTOMEM_EMBEDDING_PROVIDER={args.provider}",
                  file=sys.stderr if wants_json(args) else sys.stdout)
        elif args.cmd == "reindex":
            counts = await _reindex_vectors(settings, graph)
            if counts is None:
                return 1
            emit(args, counts, f"reindexed {counts['reindexed']} memories, removed {counts['removed']} orphaned points")
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"automem {args.cmd}: {exc}", file=sys.stderr)
        return 1
    finally:
        await bus.close()
        await graph.close()
        if runtime is not None:
            await runtime.stop()
    return 0


def _version() -> str:
    """The installed distribution's version (pyproject.toml ``version``, the one place it is set)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("automem")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


#: Commands that run servers (their log lines are their output); the others are operator commands.
SERVER_COMMANDS = ("up", "serve", "mcp")


def build_parser() -> argparse.ArgumentParser:
    """The ``automem`` argument parser. Every command takes ``--log-format json|text`` and
    ``--log-level`` (overriding ``AUTOMEM_LOG_FORMAT`` / ``AUTOMEM_LOG_LEVEL``,
    automem/common/logs.py), before or after the command name."""
    from automem.common.logs import FORMATS

    logging_options = argparse.ArgumentParser(add_help=False)
    logging_options.add_argument("--log-format", choices=FORMATS, default=argparse.SUPPRESS,
                                 help="log line format (default: AUTOMEM_LOG_FORMAT, else json)")
    logging_options.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
                                 type=str.upper, default=argparse.SUPPRESS,
                                 help="log level (default: AUTOMEM_LOG_LEVEL, else INFO)")
    parser = argparse.ArgumentParser(prog="automem", description="Long-term memory service for AI agents",
                                     parents=[logging_options])
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="cmd", required=True)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[logging_options], **kwargs)

    command("up", help="run everything with embedded NATS, FalkorDB and Qdrant",
            description="Run every target with embedded NATS, FalkorDB and Qdrant in AUTOMEM_DATA_DIR; the "
                        "addresses served go to <data dir>/automem.endpoints.json for the operator commands.")
    serve = command("serve", help="run chosen targets against external servers",
                    description="Run the targets of --target in this process against the NATS of NATS_URL and "
                                "the FalkorDB of FALKORDB_HOST (no embedded servers: `automem up` starts those); "
                                "vectors in the Qdrant of QDRANT_URL, else the embedded shard in AUTOMEM_DATA_DIR.")
    serve.add_argument("--target", default="all", help="comma-separated: all, gateway, ingest, recall, enrich, "
                                                        "consolidate")
    serve.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)

    def operator(parent: Any, name: str, help_text: str, offline: bool = True, scope: bool = False,
                 **kwargs: Any) -> argparse.ArgumentParser:
        """An operator subcommand: online options, --offline where it works on a stopped data
        dir, --json."""
        made = parent.add_parser(name, parents=[logging_options], help=help_text, description=help_text, **kwargs)
        add_connection_options(made, offline=offline, scope=scope, rest=True)
        add_json_option(made)
        return made

    keys = command("keys", help="manage API keys (online through a running service, else offline)",
                   description="Create, list and revoke API keys. Online (a running service found, or --grpc) "
                               "through the AdminService with an admin key, audited; offline on a stopped data dir.")
    ksub = keys.add_subparsers(dest="keys_cmd", required=True, metavar="{create,list,revoke,events}")
    create = operator(ksub, "create", "mint a key; prints its secret once on stdout")
    create.add_argument("--role", required=True, choices=["reader", "writer", "admin"],
                        help="what the key may do: reader (read), writer (read and write), admin (everything)")
    create.add_argument("--scope", dest="scopes", metavar="PATTERN", required=True, action="append",
                        help="scope pattern the key may use, e.g. 'acme/*' (repeatable; online: within your key's)")
    create.add_argument("--default-scope", default=None,
                        help="scope of requests that name none (default: the first pattern, '*' read as 'default')")
    create.add_argument("--name", default="", help="a name to recognise the key by (default: its id)")
    create.add_argument("--require-review", action="store_true",
                        help="memories written with this key land as pending review")
    operator(ksub, "list", "list the keys (revoked ones too); never shows a secret")
    revoke = operator(ksub, "revoke", "revoke a key: refused from now on")
    revoke.add_argument("key_id", help="the key's id (the part after am_ in the key; `automem keys list`)")
    events = operator(ksub, "events", "the audit record of key changes (who created or revoked which key, when)")
    events.add_argument("--key-id", default="", help="only this key's events")
    mcp = command("mcp", help="serve the MCP tools over stdio against a running service",
                  description="Serve the MCP tools over stdio (for an MCP client that starts this process), "
                              "calling a running automem over gRPC with one key and scope.")
    mcp.add_argument("--grpc", default=None, help="gRPC address of the service (default: AUTOMEM_GRPC_TARGET, "
                                                  "else the `automem up` of AUTOMEM_DATA_DIR, else 127.0.0.1 on "
                                                  "AUTOMEM_GRPC_PORT, 50051 by default)")
    mcp.add_argument("--api-key", default=None, help="API key (default: AUTOMEM_API_KEY, else AUTOMEM_API_TOKEN)")
    mcp.add_argument("--scope", default="", help="scope to act on (default: the key's default scope)")
    backup_cmd = operator(sub, "backup", "write a full export (nodes, edges, events) as JSON lines")
    backup_cmd.add_argument("--out", default="-", help="output file (default: stdout)")
    backup_cmd.add_argument("--no-events", action="store_true", help="leave the event stream (history) out")
    restore_cmd = operator(sub, "restore", "restore a backup into an empty graph (online: the service keeps "
                                            "running and keeps its API keys)")
    restore_cmd.add_argument("file", help="a file written by `automem backup`")
    restore_cmd.add_argument("--force", action="store_true",
                             help="replace the memories and events that are there (never merges)")
    restore_cmd.add_argument("--reindex", action="store_true", help="then rebuild the vector index from the "
                             "restored graph (without it, restore says when a reindex is needed)")
    reindex_cmd = operator(sub, "reindex", "rebuild the vector points from the graph (online: re-embed the "
                                           "memories of one scope through enrichment)", scope=True)
    reindex_cmd.add_argument("--provider", default="", help="offline only: re-embed with this embedding provider "
                             "(minilm, wordllama, openai) into a new collection and switch over when complete")
    sync_cmd = operator(sub, "sync", "check that every memory has its vector point and no point is orphaned "
                                     "(a running service; every scope, needs a key allowed on '*')", offline=False)
    sync_cmd.add_argument("--repair", action="store_true",
                          help="re-queue missing and stale points for enrichment and delete orphans")
    sync_cmd.add_argument("--wait", action="store_true",
                          help="with --repair: wait (with a progress bar) until the index holds a point per memory")
    from automem.cli import transfer

    transfer.add_commands(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``automem`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        try:
            closure(_names(args.target) or [""])
        except ValueError as exc:
            parser.error(f"--target: {exc}" if _names(args.target) else "--target: names no target; "
                         f"choose from {', '.join(targets())} (comma-separated)")
        named = _names(args.target)
        twice = sorted({t for t in named if named.count(t) > 1})
        if twice:  # as AUTOMEM_CHILD_TARGETS refuses a target named in two children
            parser.error(f"--target: target(s) {', '.join(twice)} named more than once")

    try:
        settings = get_settings()
    except ValidationError as exc:
        # A bad setting in the environment: one line per bad variable, no traceback, exit 2 (as argparse).
        for error in exc.errors():
            names = "/".join(str(part) for part in error.get("loc", ())) or "settings"
            message = str(error.get("msg", "")).removeprefix("Value error, ")
            # A credential is never echoed; another value at most in its first 80 characters.
            secret = any(word in names.upper() for word in ("PASSWORD", "TOKEN", "KEY", "SECRET"))
            got = "" if secret else f" (got {str(error.get('input'))[:80]!r})"
            print(f"automem: setting {names}: {message}{got}", file=sys.stderr)
        return 2
    from automem.common.logs import configure_logging

    level, fmt = getattr(args, "log_level", settings.log_level), getattr(args, "log_format", settings.log_format)
    configure_logging(level, fmt)
    if args.cmd not in SERVER_COMMANDS and not hasattr(args, "log_level") and "AUTOMEM_LOG_LEVEL" not in os.environ:
        # An operator command prints its result; the embedded servers' start-up lines of the
        # offline path are noise there unless asked for (--log-level / AUTOMEM_LOG_LEVEL).
        logging.getLogger("automem.common.embedded").setLevel(logging.WARNING)
    if args.cmd in SERVER_COMMANDS:
        # Child processes (automem/children.py) read the settings from the environment: pass the
        # options on. Operator commands start none, and their quieter default must not leak into
        # the environment of a process that calls main() in-process and starts servers later.
        os.environ["AUTOMEM_LOG_LEVEL"], os.environ["AUTOMEM_LOG_FORMAT"] = level, fmt
    if args.cmd == "up":
        try:  # a child process naming no target ended the start in a traceback
            child_targets(settings, ["all"], _names(settings.child_targets))
        except ValueError as exc:
            print(f"automem: setting AUTOMEM_CHILD_TARGETS: {exc} (got {settings.child_targets[:80]!r})",
                  file=sys.stderr)
            return 2
    if args.cmd in ("up", "serve"):
        try:  # an unknown host name ended the start in a traceback from the first bind
            socket.getaddrinfo(settings.host or None, 0)
        except (socket.gaierror, UnicodeError) as exc:
            print(f"automem: setting AUTOMEM_HOST: cannot resolve {settings.host[:80]!r} ({exc})", file=sys.stderr)
            return 2
        serving_grpc = args.cmd == "up" or "grpc-server" in closure(_names(args.target))
        if problem := _server_setting_problem(settings, serving_grpc, data_dir=args.cmd == "up"):
            print(f"automem: setting {problem}", file=sys.stderr)
            return 2
        from automem.common.embedded import PARENT_PID_ENV, die_with_parent

        if args.cmd == "serve" and os.environ.get(PARENT_PID_ENV, "").isdigit():
            die_with_parent(int(os.environ.pop(PARENT_PID_ENV)))  # a child of `automem up`

        try:
            if args.cmd == "up":
                return run_loop(settings, _run(settings, ["all"], embedded=True))
            return run_loop(settings, _run(settings, _names(args.target), embedded=False, ready_fd=args.ready_fd))
        except (EmbeddedServerError, ListenError, UnreachableError) as exc:  # the data dir, a port, a server: one line
            return fail(args.cmd, exc)
        except StartFailure as exc:  # any other start failure: one line, the traceback at DEBUG
            if exc.code == 2:
                print(f"automem: {exc.line}", file=sys.stderr)
                return 2
            return fail(args.cmd, exc.line)
    if args.cmd == "mcp":
        from automem.gateway.mcp_server import run_stdio

        # Without --grpc: AUTOMEM_GRPC_TARGET, else the `automem up` of the data dir, else the default.
        return run_stdio(settings, args.grpc or settings.grpc_target or (discover(settings) or {}).get("grpc"),
                         args.api_key, args.scope)
    if args.cmd in ("import", "export"):
        from automem.cli import transfer

        return transfer.main(settings, args)
    return _operate(settings, args)


def _server_setting_problem(settings: Settings, serving_grpc: bool, data_dir: bool) -> str | None:
    """What the settings check of a server command finds before anything starts, as
    ``"VARIABLE: reason"``, or None. ``serving_grpc``: the TLS files (a missing cert failed
    the start once NATS and FalkorDB were up). ``data_dir`` (``automem up``):
    ``AUTOMEM_DATA_DIR`` is created (0700) when missing and its lock file opened, as the
    start does (a path under /proc or a read-only one ended in a traceback)."""
    if serving_grpc:
        from automem.common.grpc_tls import TlsSettingsError, channel_credentials, server_credentials

        try:
            server_credentials(settings)
            channel_credentials(settings)  # the gateway's and the forwarding channels'
        except TlsSettingsError as exc:
            return f"{exc.variable}: {exc.reason}"
    if data_dir:
        path = Path(settings.data_dir)
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(path.resolve() / "automem.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
        except OSError as exc:
            return (f"AUTOMEM_DATA_DIR: cannot create or write {str(path)!r}: {exc.strerror or exc}"
                    + (f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""))
    return None


def run_loop(settings: Settings, main_coro: Coroutine[Any, Any, int]) -> int:
    """Run a server's ``main_coro`` to its exit code on the event loop ``settings.event_loop``
    names (``AUTOMEM_EVENT_LOOP``): uvloop's (libuv) where installed and not turned off, else
    asyncio's. Raises ImportError when ``uvloop`` is asked for and not installed. uvloop took
    CPU off every request of the gateway and the servers (docs/benchmarks.md, "uvloop and
    httptools")."""
    choice = settings.event_loop
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(main_coro)
    return asyncio.run(main_coro)


def _operate(settings: Settings, args: argparse.Namespace) -> int:
    """Run an operator command online (automem/cli/operate.py) or offline; any failure is one
    line ``automem <command>: <message>`` and exit code 1 (a traceback only at --log-level DEBUG)."""
    from automem.common.timeouts import job_bound

    command = args.cmd if args.cmd != "keys" else f"keys {args.keys_cmd}"
    online = args.cmd == "sync" or is_online(settings, args)
    target = (getattr(args, "url", None) or grpc_address(settings, args)) if online else ""
    embedded = not settings.falkordb_host if args.cmd == "keys" else not (settings.falkordb_host and settings.nats_url)
    if not online and embedded and not getattr(args, "offline", False) and not Path(settings.data_dir).exists():
        # Run from another directory, the relative default (./.automem) named a new, empty
        # store: `keys create` printed a key the running service never knew.
        where = "AUTOMEM_DATA_DIR" + ("" if Path(settings.data_dir).is_absolute() else ", relative to the current directory")
        return fail(command, f"no running service found and no data directory at {Path(settings.data_dir).resolve()} "
                             f"({where}): run it where `automem up` "
                             "runs, set AUTOMEM_DATA_DIR, give --grpc or --url, or --offline to start a new data "
                             "directory there")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            if online:
                way = rest if getattr(args, "url", None) else operate
                return asyncio.run(getattr(way, args.cmd)(settings, args))
            if args.cmd == "keys":
                return asyncio.run(_keys(settings, args))
            # Whole-store jobs: their store calls get the job bound, not the request bound.
            with job_bound(settings.store_job_timeout_seconds):
                return asyncio.run(_recovery(settings, args))
        return 130
    except BrokenPipeError:
        return stdout_closed()  # `automem keys list | head`: not an error of ours
    except Exception as exc:
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            log.exception("command failed")
        return fail(command, exc, target)
