"""The operator commands against a running service (no downtime): ``keys``, ``backup``,
``restore``, ``reindex`` and ``sync`` over gRPC (automem/cli/connect.py finds the service
and the key; automem/cli/output.py shows progress, ``--json`` and one-line errors).

* ``keys create|list|revoke|events`` — AdminService (automem/ingest/admin.py).
* ``backup`` — IngestService.ExportBackup, streamed into the file.
* ``restore`` — AdminService.RestoreBackup, the file streamed in :data:`CHUNK` byte chunks;
  ``--reindex`` then runs ConsolidateService.CheckSync with repair (every scope) and waits
  until the vector index holds a point per memory.
* ``reindex`` — EnrichService.ReembedMemories (force) of the scope, following
  GetReembedStatus until every memory is re-embedded.
* ``sync`` — ConsolidateService.CheckSync (``--repair`` to repair; ``--wait`` then follows
  GetSyncStatus).

``--json`` prints what the same command prints over REST (automem/cli/rest.py): the REST
routes' answers (automem/gateway/presenters.py), so a script reads one shape whichever way
the command went.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from automem.cli.connect import online_client
from automem.cli.output import (
    Stall,
    as_dict,
    backup_done,
    backup_events,
    backup_out,
    emit,
    event_line,
    note,
    progress,
    reindex_refused,
    wants_json,
    whole_file,
)
from automem.common.settings import Settings
from automem.gateway.presenters import api_key_event_json, api_key_json, sync_json
from automem.v1 import admin_service_pb2, consolidate_service_pb2, enrich_service_pb2, ingest_service_pb2

#: Bytes a RestoreBackup message carries (gRPC's default message limit is 4 MiB).
CHUNK = 1024 * 1024
#: Seconds between two status polls while waiting for enrichment.
POLL_SECONDS = 0.5


async def _paged(method: Any, request: Any, field: str, metadata: Any) -> AsyncIterator[Any]:
    """Every item of a paged listing (AIP-158: ``page_token`` / ``next_page_token``)."""
    while True:
        page = await method(request, metadata=metadata)
        for item in getattr(page, field):
            yield item
        if not page.next_page_token:
            return
        request.page_token = page.next_page_token


async def keys(settings: Settings, args: argparse.Namespace) -> int:
    """``automem keys`` online."""
    async with online_client(settings, args) as client:
        md = client.metadata()
        if args.keys_cmd == "create":
            made = await client.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
                role=args.role, scopes=args.scopes, default_scope=args.default_scope or "",
                display_name=args.name or "", require_review=args.require_review), metadata=md)
            key = made.api_key
            emit(args, {"status": "success", "api_key": api_key_json(key), "secret": made.secret}, made.secret)
            if not wants_json(args):
                note(args, f"# key {key.id}: role={key.role} scopes={','.join(key.scopes)} "
                           f"default_scope={key.default_scope} (shown once)")
        elif args.keys_cmd == "list":
            async for k in _paged(client.admin.ListApiKeys, admin_service_pb2.ListApiKeysRequest(), "api_keys", md):
                emit(args, api_key_json(k), f"{k.id}\t{k.role}\t{','.join(k.scopes)}\t{k.default_scope}\t"
                                       f"{'revoked' if k.revoked else 'active'}\t{k.display_name}")
        elif args.keys_cmd == "revoke":
            done = await client.admin.RevokeApiKey(admin_service_pb2.RevokeApiKeyRequest(id=args.key_id), metadata=md)
            emit(args, api_key_json(done.api_key), f"revoked {args.key_id}")
        elif args.keys_cmd == "events":
            request = admin_service_pb2.ListApiKeyEventsRequest(key_id=args.key_id or "")
            async for e in _paged(client.admin.ListApiKeyEvents, request, "events", md):
                emit(args, api_key_event_json(e), f"{e.event_time.ToJsonString()}\t{e.action}\t{e.key_id}\t{e.actor}\t"
                                       f"{e.role}\t{','.join(e.scopes)}")
    return 0


async def backup(settings: Settings, args: argparse.Namespace) -> int:
    """``automem backup`` online: the export streamed into ``--out`` (or stdout)."""
    to_file = backup_out(args)
    count = events = 0
    header: dict[str, Any] = {}
    line = ""
    async with online_client(settings, args) as client:
        stream = client.ingest.ExportBackup(ingest_service_pb2.ExportBackupRequest(skip_events=args.no_events),
                                            metadata=client.metadata())
        with whole_file(to_file) as out, progress("backup", None) as bar:
            async for chunk in stream:
                line = chunk.json_line
                out.write(line + "\n")
                if count == 0:
                    header = json.loads(line)
                    totals = header.get("counts") or {}
                    bar.update(total=1 + int(totals.get("nodes", 0)) + int(totals.get("edges", 0)))
                elif event_line(line):
                    events += 1
                    bar.update(total=count + 1)
                count += 1
                bar.advance()
    backup_done(args, count, backup_events(line, events))
    if header.get("events_truncated"):
        note(args, "note: the event stream's retention removed older events; the exported history is partial")
    return 0


async def _chunks(path: Path, force: bool, bar: Any) -> AsyncIterator[admin_service_pb2.RestoreBackupRequest]:
    first = True
    with path.open("rb") as handle:
        while True:
            data = await asyncio.to_thread(handle.read, CHUNK)
            if not data and not first:
                return
            yield admin_service_pb2.RestoreBackupRequest(data=data, force=force and first)
            bar.advance(len(data))
            first = False
            if not data:
                return


async def restore(settings: Settings, args: argparse.Namespace) -> int:
    """``automem restore FILE`` online (the service keeps running and keeps its API keys)."""
    path = Path(args.file)
    if path.is_dir():
        raise ValueError(f"{args.file}: is a directory; name a backup file")
    if not path.is_file():
        raise ValueError(f"{args.file}: no such file")
    async with online_client(settings, args) as client:
        with progress("restore", path.stat().st_size, bytes_=True) as bar:
            done = await client.admin.RestoreBackup(_chunks(path, args.force, bar), metadata=client.metadata())
        result: dict[str, Any] = {"status": "success", **as_dict(done)}  # POST /v1/backup:restore's answer
        if not wants_json(args):
            print(f"restored {done.nodes} nodes, {done.edges} edges, {done.events} events")
        if done.events_dropped:
            note(args, f"warning: the stream's retention removed the oldest {done.events_dropped} restored events "
                       "at once; their history is gone")
        if args.reindex:
            try:
                result["sync"] = await _repair_and_wait(client, "reindex")
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    raise
                emit(args, result)
                raise ValueError(reindex_refused(exc.details() or exc.code().name)) from None
            if not wants_json(args):
                print(f"rebuilt the vector index: {result['sync']['vector_count']} points")
        elif done.live_memories:
            note(args, f"reindex needed: {done.live_memories} memories restored without vector points; recall by "
                       "meaning misses them until you run `automem sync --repair` (or restore with --reindex)")
    emit(args, result)
    return 0


async def _repair_and_wait(client: Any, label: str) -> dict[str, Any]:
    """CheckSync with repair, then poll GetSyncStatus until the vector index holds a point
    per memory (a progress bar of points); returns ``{"vector_count", "memory_count"}`` of
    the last status (what automem/cli/rest.py reads from ``GET /health``)."""
    md = client.metadata()
    await client.consolidate.CheckSync(consolidate_service_pb2.CheckSyncRequest(repair=True), metadata=md)
    stall = Stall(f"waiting for the vector index ({label})")
    with progress(label, None, unit="points") as bar:
        while True:
            status = await client.consolidate.GetSyncStatus(consolidate_service_pb2.GetSyncStatusRequest(),
                                                            metadata=md)
            bar.update(completed=status.vector_count, total=status.memory_count)
            stall.check(status.vector_count, status.memory_count)
            if status.sync_status in ("synced", "vectors_disabled") and status.vector_count == status.memory_count:
                return {"vector_count": status.vector_count, "memory_count": status.memory_count}
            await asyncio.sleep(POLL_SECONDS)


async def reindex(settings: Settings, args: argparse.Namespace) -> int:
    """``automem reindex`` online: re-embed every memory of the scope through enrichment."""
    if getattr(args, "provider", ""):
        raise ValueError("--provider switches the embedding model and needs the service stopped: "
                         "stop `automem up`, then run `automem reindex --provider ... --offline`")
    async with online_client(settings, args) as client:
        md = client.metadata()
        started = await client.enrich.ReembedMemories(enrich_service_pb2.ReembedMemoriesRequest(
            force=True, scope=args.scope or ""), metadata=md)
        stall = Stall("waiting for the re-embedding")
        with progress("reindex", started.total, unit="memories") as bar:
            while True:
                status = await client.enrich.GetReembedStatus(enrich_service_pb2.GetReembedStatusRequest(
                    scope=args.scope or ""), metadata=md)
                job = status.reembed
                bar.update(completed=min(job.done, job.total), total=job.total)
                stall.check(job.done, job.total)
                if job.job_id == started.job_id and job.done >= job.total:
                    break
                await asyncio.sleep(POLL_SECONDS)
    emit(args, {"job_id": started.job_id, "scope": args.scope or None, "reindexed": job.total},
         f"reindexed {job.total} memories of scope {job.scope}")
    return 0


async def sync(settings: Settings, args: argparse.Namespace) -> int:
    """``automem sync``: the graph/vector drift check (``--repair`` repairs and, with
    ``--wait``, waits until the index holds a point per memory: its counts then in ``sync``)."""
    async with online_client(settings, args) as client:
        md = client.metadata()
        checked = await client.consolidate.CheckSync(consolidate_service_pb2.CheckSyncRequest(repair=args.repair),
                                                     metadata=md)
        result = sync_json(checked)  # POST /admin/sync's answer
        if args.repair and args.wait:
            result["sync"] = await _repair_and_wait(client, "sync")
    emit(args, result, f"{checked.sync_status}: {checked.missing_vectors} missing, {checked.orphaned_vectors} "
                       f"orphaned, {checked.stale_payloads} stale vectors"
                       + (f"; {checked.repaired} repaired" if args.repair else ""))
    return 0
