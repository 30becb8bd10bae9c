"""The ``automem`` command.

* ``automem up`` — embedded NATS + FalkorDB (+ the in-process Qdrant shard) and every target;
  those of ``AUTOMEM_CHILD_TARGETS`` that can leave this process run as child processes
  (automem/children.py; by default the gateway).
* ``automem serve --target ingest,recall`` — chosen targets against external servers.
* ``automem keys create|list|revoke`` — API keys (printed once).
* ``automem mcp --grpc HOST:PORT`` — the MCP tools over stdio, against a running service.
* ``automem backup [--out FILE]`` — full export (nodes, edges, events) as JSON lines.
* ``automem restore FILE [--force] [--reindex]`` — recreate an export in an empty data dir /
  graph; ``--reindex`` then rebuilds the vector index, otherwise it says when one is needed.
* ``automem reindex`` — rebuild every vector point from the graph.
* ``automem import FILE --format native|automem|mem0`` / ``automem export [--out FILE]`` —
  memories in and out of a *running* service as JSON Lines (automem/cli/transfer.py).

backup/restore/reindex start the embedded servers for ``AUTOMEM_DATA_DIR`` unless external
ones are configured; run them while ``automem up`` is stopped (the data dir is locked).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from automem.children import ChildProcess, address_setting, local_host, report_ready
from automem.common.embedded import EmbeddedRuntime
from automem.common.settings import Settings, get_settings
from automem.runner import Runner, child_targets

log = logging.getLogger("automem")


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


async def _run(settings: Settings, targets: list[str], embedded: bool, ready_fd: int | None = None) -> int:
    """Run ``targets`` until SIGINT/SIGTERM; returns the exit code.

    ``embedded`` (``automem up``): start the embedded servers first, and run the targets of
    ``settings.child_targets`` that may leave this process as child processes
    (automem/children.py). ``ready_fd``: a pipe to report the bound ports on once up (a
    child of ``automem up``).
    """
    runtime = EmbeddedRuntime(settings) if embedded else None
    if runtime is not None:
        settings = await runtime.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    code = 0
    children: list[ChildProcess] = []
    runner: Runner | None = None
    try:
        in_process, child_names = targets, []
        if embedded:
            in_process, child_names, kept = child_targets(settings, targets, _names(settings.child_targets))
            for name, reason in kept.items():
                log.info("target stays in this process", extra={"target": name, "reason": reason})
        children = [ChildProcess(settings, name) for name in child_names]
        # Where each child's services are, known before any process starts.
        addresses = {c.target: c.grpc_address for c in children if address_setting(c.target)}
        runner = Runner(settings.model_copy(update={address_setting(t): a for t, a in addresses.items()}),
                        in_process)
        if runtime is not None:
            runner.ctx.server_restarts = runtime.restarts
        ctx = await runner.start()
        if runtime is not None and settings.supervise_embedded:
            ctx.tasks.append(asyncio.create_task(runtime.supervise(), name="embedded-supervisor"))
        env_addresses = {f"AUTOMEM_{t.upper()}_ADDR": a for t, a in addresses.items()}
        parent = f"{local_host(settings)}:{ctx.grpc_port}" if ctx.grpc_port else ""
        for child in children:
            await child.start(child.environment(env_addresses, parent))
            ctx.http_port = ctx.http_port or child.report.get("http_port", 0)
            ctx.tasks.append(asyncio.create_task(child.supervise(), name=f"{child.target}-supervisor"))
        if ready_fd is not None:
            report_ready(ready_fd, ctx.grpc_port, ctx.http_port)
        metrics_ports = {"parent": ctx.metrics_port, **{c.target: c.metrics_port for c in children}}
        log.info("automem is up", extra={"targets": targets, "children": child_names, "http_port": ctx.http_port,
                                         "grpc_port": ctx.grpc_port, "metrics_ports": metrics_ports,
                                         "data_dir": str(settings.data_dir)})
        failed = asyncio.create_task(_watch(ctx.tasks))
        done, _ = await asyncio.wait([asyncio.create_task(stop.wait()), failed], return_when=asyncio.FIRST_COMPLETED)
        if failed in done and failed.result():
            code = 1
    except Exception:
        log.exception("start failed")
        code = 1
    finally:
        log.info("shutting down")
        for child in reversed(children):
            await child.stop()
        if runner is not None:
            await runner.stop()
        if runtime is not None:
            await runtime.stop()
    return code


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
            secret, info = await store.create(args.role, args.scope, args.default_scope, args.name or "")
            print(secret)
            print(f"# key {info.id}: role={info.role} scopes={','.join(info.scopes)} "
                  f"default_scope={info.default_scope} (shown once)", file=sys.stderr)
        elif args.keys_cmd == "list":
            for k in await store.list():
                print(f"{k.id}\t{k.role}\t{','.join(k.scopes)}\t{k.default_scope}\t"
                      f"{'revoked' if k.revoked else 'active'}\t{k.name}")
        elif args.keys_cmd == "revoke":
            await store.revoke(args.key_id)
            print(f"revoked {args.key_id}")
    finally:
        await graph.close()
        if runtime is not None:
            await runtime.stop()
    return 0


async def _connect_bus(bus: Any, timeout: float = 15.0) -> None:
    """Connect the bus or fail in ``timeout`` seconds naming the URL (a CLI must not hang)."""
    from automem.common.errors import Unavailable

    try:
        await asyncio.wait_for(bus.connect(), timeout)
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
        return await backup.reindex(graph, vectors, provider)
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
            to_file = bool(args.out and args.out != "-")
            out = await asyncio.to_thread(open, args.out, "w", encoding="utf-8") if to_file else sys.stdout
            try:
                count = events = 0
                truncated_since = None
                async for line in backup.export_lines(graph, None if args.no_events else bus):
                    out.write(line + "\n")
                    if count == 0 and '"events_truncated": true' in line:
                        truncated_since = json.loads(line).get("events_retained_since")
                    count += 1
                    events += '"kind": "event"' in line
            finally:
                if out is not sys.stdout:
                    out.close()
            print(f"# {count} records written ({events} events)", file=sys.stderr)
            if truncated_since is not None:
                print("note: the event stream's retention removed older events; the exported history starts at "
                      f"{datetime.fromtimestamp(truncated_since, UTC).isoformat()}", file=sys.stderr)
            if not args.no_events and events == 0 and count > 0:
                print(f"warning: stream {settings.stream_name!r} at {settings.nats_url} holds no events, so this "
                      "backup has no history; point NATS_URL at the service's NATS", file=sys.stderr)
        elif args.cmd == "restore":
            await _connect_bus(bus)
            from pathlib import Path

            text = await asyncio.to_thread(Path(args.file).read_text, encoding="utf-8")
            records = backup.read_lines(text.splitlines())
            counts = await backup.restore_records(graph, records, bus, force=args.force)
            print(f"restored {counts['nodes']} nodes, {counts['edges']} edges, {counts['events']} events")
            if counts.get("events_dropped"):
                print(f"warning: the stream's retention (AUTOMEM_EVENT_RETENTION_BYTES) removed the oldest "
                      f"{counts['events_dropped']} restored events at once; their history is gone", file=sys.stderr)
            if args.reindex:
                done = await _reindex_vectors(settings, graph)
                if done is not None:
                    print(f"reindexed {done['reindexed']} memories, removed {done['removed']} orphaned points")
            else:
                await _say_if_reindex_needed(settings, counts["live_memories"])
        elif args.cmd == "reindex" and getattr(args, "provider", ""):
            from automem.enrich.reindex import reindex_with_provider

            result = await reindex_with_provider(settings, args.provider, graph)
            print(f"reindexed {result['reindexed']} memories with {result['provider']} ({result['dimension']} "
                  f"dimensions) into {result['collection']}"
                  + (f"; previous collection kept as {result['previous']}" if result.get("previous") else ""))
            print(f"start the service with AUTOMEM_EMBEDDING_PROVIDER={args.provider}" if result["switched"] else
                  f"set QDRANT_COLLECTION={result['collection']} and AUTOMEM_EMBEDDING_PROVIDER={args.provider}")
        elif args.cmd == "reindex":
            counts = await _reindex_vectors(settings, graph)
            if counts is None:
                return 1
            print(f"reindexed {counts['reindexed']} memories, removed {counts['removed']} orphaned points")
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

    command("up", help="run everything with embedded NATS, FalkorDB and Qdrant")
    serve = command("serve", help="run chosen targets against external servers")
    serve.add_argument("--target", default="all", help="comma-separated: all, gateway, ingest, recall, enrich, "
                                                        "consolidate")
    serve.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    keys = command("keys", help="manage API keys")
    ksub = keys.add_subparsers(dest="keys_cmd", required=True)
    create = ksub.add_parser("create", parents=[logging_options])
    create.add_argument("--role", required=True, choices=["reader", "writer", "admin"])
    create.add_argument("--scope", required=True, action="append", help="scope pattern, e.g. 'acme/*' (repeatable)")
    create.add_argument("--default-scope", default=None)
    create.add_argument("--name", default="")
    ksub.add_parser("list", parents=[logging_options])
    revoke = ksub.add_parser("revoke", parents=[logging_options])
    revoke.add_argument("key_id")
    mcp = command("mcp", help="serve the MCP tools over stdio against a running service")
    mcp.add_argument("--grpc", default=None, help="gRPC address of the service (default: AUTOMEM_GRPC_TARGET, "
                                                  "else 127.0.0.1:50051)")
    mcp.add_argument("--api-key", default=None, help="API key (default: AUTOMEM_API_KEY)")
    mcp.add_argument("--scope", default="", help="scope to act on (default: the key's default scope)")
    backup_cmd = command("backup", help="write a full export (nodes, edges, events) as JSON lines")
    backup_cmd.add_argument("--out", default="-", help="output file (default: stdout)")
    backup_cmd.add_argument("--no-events", action="store_true", help="leave the event stream (history) out")
    restore_cmd = command("restore", help="restore a backup into an empty data dir")
    restore_cmd.add_argument("file")
    restore_cmd.add_argument("--force", action="store_true", help="restore even if the graph is not empty")
    restore_cmd.add_argument("--reindex", action="store_true", help="then rebuild the vector index from the "
                             "restored graph (without it, restore says when a reindex is needed)")
    reindex_cmd = command("reindex", help="rebuild every vector point from the graph")
    reindex_cmd.add_argument("--provider", default="", help="re-embed with this embedding provider (minilm, "
                             "wordllama, openai) into a new collection and switch over when complete")
    from automem.cli import transfer

    transfer.add_commands(command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``automem`` command; returns the exit code."""
    args = build_parser().parse_args(argv)

    try:
        settings = get_settings()
    except ValidationError as exc:
        # A bad setting in the environment: one line per bad variable, no traceback, exit 2 (as argparse).
        for error in exc.errors():
            names = "/".join(str(part) for part in error.get("loc", ())) or "settings"
            print(f"automem: setting {names}: {error.get('msg')} (got {error.get('input')!r})", file=sys.stderr)
        return 2
    from automem.common.logs import configure_logging

    level, fmt = getattr(args, "log_level", settings.log_level), getattr(args, "log_format", settings.log_format)
    configure_logging(level, fmt)
    # Child processes (automem/children.py) read the settings from the environment: pass the options on.
    os.environ["AUTOMEM_LOG_LEVEL"], os.environ["AUTOMEM_LOG_FORMAT"] = level, fmt
    if args.cmd == "up":
        return asyncio.run(_run(settings, ["all"], embedded=True))
    if args.cmd == "serve":
        return asyncio.run(_run(settings, _names(args.target), embedded=False, ready_fd=args.ready_fd))
    if args.cmd == "mcp":
        from automem.gateway.mcp_server import run_stdio

        return run_stdio(settings, args.grpc, args.api_key, args.scope)
    if args.cmd in ("import", "export"):
        from automem.cli import transfer

        return transfer.main(settings, args)
    from automem.common.embedded import EmbeddedServerError
    from automem.common.errors import AutomemError

    try:
        if args.cmd in ("backup", "restore", "reindex"):
            from automem.common.timeouts import job_bound

            # Whole-store jobs: their store calls get the job bound, not the request bound.
            with job_bound(settings.store_job_timeout_seconds):
                return asyncio.run(_recovery(settings, args))
        if args.cmd == "keys":
            with contextlib.suppress(KeyboardInterrupt):
                return asyncio.run(_keys(settings, args))
    except (AutomemError, EmbeddedServerError) as exc:
        # A user error (bad argument, unknown key, a data dir in use): one line, no traceback.
        print(f"automem {args.cmd}: {exc}", file=sys.stderr)
        return 1
    return 2

