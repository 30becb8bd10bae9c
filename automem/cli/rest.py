"""The operator commands over REST (``--url http://host:port``): for a service whose gateway
is all that is reachable. The same commands as automem/cli/operate.py over the gateway's
routes — ``/v1/apiKeys`` and ``/v1/apiKeyEvents`` (keys), ``GET /backup``,
``POST /v1/backup:restore``, ``POST /admin/reembed`` with ``GET /enrichment/status``
(reindex), ``POST /admin/sync`` and ``GET /health`` (sync). ``--json`` prints the routes'
JSON answers.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from automem.cli import output
from automem.cli.connect import admin_token, api_key
from automem.cli.output import Stall, backup_done, backup_out, emit, note, progress, wants_json, whole_file
from automem.common.settings import Settings

#: Bytes read from a backup file at a time while it is sent.
CHUNK = 1024 * 1024
#: Seconds between two status polls.
POLL_SECONDS = 0.5


class RestError(Exception):
    """A route answered an error: ``status`` (HTTP) and the service's one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _not_automem(response: httpx.Response) -> str:
    return (f"{response.request.url} answered {response.headers.get('content-type') or 'no content type'}, not "
            "automem's JSON: is --url the automem gateway?")


def _check(response: httpx.Response, *fields: str) -> Any:
    """The JSON object answered, or RestError: the service's message for an error status; for
    an answer that is not a JSON object (or lacks one of ``fields``), one saying that ``--url``
    does not look like the automem gateway (another server answered)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.is_success:
        if not isinstance(body, dict) or any(name not in body for name in fields):
            raise RestError(response.status_code, _not_automem(response))
        return body
    if isinstance(body, dict):
        message = body.get("error") or body.get("message") or body.get("detail") or response.reason_phrase
    else:
        message = f"{response.reason_phrase} ({_not_automem(response)})"
    raise RestError(response.status_code, " ".join(str(message).split()))


@asynccontextmanager
async def rest_client(settings: Settings, args: argparse.Namespace) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on ``--url`` with the key (``Authorization: Bearer``) and ``--scope``
    (``X-Automem-Scope``)."""
    headers = {}
    if key := api_key(settings, args):
        headers["Authorization"] = f"Bearer {key}"
    if admin := admin_token(settings, args):
        headers["X-Admin-Token"] = admin
    if scope := getattr(args, "scope", ""):
        headers["X-Automem-Scope"] = scope
    async with httpx.AsyncClient(base_url=args.url.rstrip("/"), headers=headers,
                                 timeout=httpx.Timeout(60.0, read=3600.0)) as http:
        yield http


async def keys(settings: Settings, args: argparse.Namespace) -> int:
    """``automem keys --url``."""
    async with rest_client(settings, args) as http:
        if args.keys_cmd == "create":
            made = _check(await http.post("/v1/apiKeys", json={
                "role": args.role, "scopes": args.scopes, "default_scope": args.default_scope or "",
                "display_name": args.name or "", "require_review": args.require_review}), "secret", "api_key")
            emit(args, made, made["secret"])
            if not wants_json(args):
                key = made["api_key"]
                note(args, f"# key {key['id']}: role={key['role']} scopes={','.join(key['scopes'])} "
                           f"default_scope={key['default_scope']} (shown once)")
        elif args.keys_cmd == "revoke":
            done = _check(await http.post(f"/v1/apiKeys/{args.key_id}:revoke"), "api_key")
            emit(args, done["api_key"], f"revoked {args.key_id}")
        else:
            path, field = ("/v1/apiKeys", "api_keys") if args.keys_cmd == "list" else ("/v1/apiKeyEvents", "events")
            params = {"key_id": args.key_id} if args.keys_cmd == "events" and args.key_id else {}
            token = ""
            while True:
                page = _check(await http.get(path, params={**params, **({"page_token": token} if token else {})}),
                              field)
                for item in page[field]:
                    emit(args, item, _key_line(item) if field == "api_keys" else _event_line(item))
                token = page.get("next_page_token") or ""
                if not token:
                    break
    return 0


def _key_line(key: dict[str, Any]) -> str:
    """A key as ``automem keys list`` prints it over gRPC (automem/cli/operate.py): id, role,
    scopes, default scope, active/revoked, display name, tab-separated."""
    return "\t".join((str(key.get("id", "")), str(key.get("role", "")), ",".join(key.get("scopes") or []),
                      str(key.get("default_scope", "")), "revoked" if key.get("revoked") else "active",
                      str(key.get("display_name", ""))))


def _event_line(event: dict[str, Any]) -> str:
    """An audit record as ``automem keys events`` prints it over gRPC: time, action, key id,
    actor, role, scopes."""
    return "\t".join((str(event.get("event_time") or event.get("at") or ""), str(event.get("action", "")),
                      str(event.get("key_id", "")), str(event.get("actor", "")), str(event.get("role", "")),
                      ",".join(event.get("scopes") or [])))


async def backup(settings: Settings, args: argparse.Namespace) -> int:
    """``automem backup --url``: ``GET /backup`` into ``--out`` (or stdout)."""
    to_file = backup_out(args)
    count = events = 0
    last = ""
    async with rest_client(settings, args) as http, http.stream(
            "GET", "/backup", params={"events": str(not args.no_events).lower()}) as response:
        if not response.is_success:
            await response.aread()
            _check(response)
        with whole_file(to_file) as out, progress("backup", None) as bar:
            async for line in response.aiter_lines():
                if not line:
                    continue
                out.write(line + "\n")
                count += 1
                events += output.event_line(line)
                last = line
                bar.advance()
    backup_done(args, count, output.backup_events(last, events))
    return 0


async def restore(settings: Settings, args: argparse.Namespace) -> int:
    """``automem restore --url``: the file streamed to ``POST /v1/backup:restore``."""
    path = Path(args.file)
    if path.is_dir():
        raise ValueError(f"{args.file}: is a directory; name a backup file")
    if not path.is_file():
        raise ValueError(f"{args.file}: no such file")

    async def body(bar: Any) -> AsyncIterator[bytes]:
        handle = await asyncio.to_thread(path.open, "rb")
        try:
            while data := await asyncio.to_thread(handle.read, CHUNK):
                bar.advance(len(data))
                yield data
        finally:
            handle.close()

    async with rest_client(settings, args) as http:
        with progress("restore", path.stat().st_size, bytes_=True) as bar:
            done = _check(await http.post("/v1/backup:restore", params={"force": str(args.force).lower()},
                                          content=body(bar), headers={"Content-Type": "application/x-ndjson"}))
        if not wants_json(args):
            print(f"restored {done['nodes']} nodes, {done['edges']} edges, {done['events']} events")
        if args.reindex:
            try:
                _check(await http.post("/admin/sync"))
            except RestError as exc:
                if exc.status not in (401, 403):
                    raise
                emit(args, done)
                raise RestError(exc.status, output.reindex_refused(exc.message)) from None
            done["sync"] = await _wait_for_index(http, "reindex")
        elif done.get("live_memories"):
            note(args, f"reindex needed: {done['live_memories']} memories restored without vector points; run "
                       "`automem sync --repair` (or restore with --reindex)")
    emit(args, done)
    return 0


async def _wait_for_index(http: httpx.AsyncClient, label: str) -> dict[str, Any]:
    """Poll ``GET /health`` until the vector index holds a point per memory (a progress bar
    of points); returns ``{"vector_count", "memory_count"}`` of the last answer."""
    stall = Stall(f"waiting for the vector index ({label})")
    with progress(label, None, unit="points") as bar:
        while True:
            health = _check(await http.get("/health"))
            bar.update(completed=health.get("vector_count") or 0, total=health.get("memory_count") or 0)
            stall.check(health.get("vector_count"), health.get("memory_count"))
            if health.get("vector_count") == health.get("memory_count"):
                return {"vector_count": health.get("vector_count"), "memory_count": health.get("memory_count")}
            await asyncio.sleep(POLL_SECONDS)


async def reindex(settings: Settings, args: argparse.Namespace) -> int:
    """``automem reindex --url``: ``POST /admin/reembed`` (force), then the job's progress
    from ``GET /enrichment/status``."""
    if getattr(args, "provider", ""):
        raise ValueError("--provider switches the embedding model and needs the service stopped: "
                         "stop `automem up`, then run `automem reindex --provider ... --offline`")
    async with rest_client(settings, args) as http:
        started = _check(await http.post("/admin/reembed", json={"force": True}))
        stall = Stall("waiting for the re-embedding")
        with progress("reindex", started["total"], unit="memories") as bar:
            while True:
                job = _check(await http.get("/enrichment/status")).get("reembed") or {}
                total, done = int(job.get("total") or 0), int(job.get("done") or 0)
                bar.update(completed=min(done, total), total=total)
                stall.check(done, total)
                if job.get("job_id") == started["job_id"] and done >= total:
                    break
                await asyncio.sleep(POLL_SECONDS)
    scope = getattr(args, "scope", "") or "the key's default scope"
    emit(args, {"job_id": started["job_id"], "scope": getattr(args, "scope", "") or None, "reindexed": total},
         f"reindexed {total} memories of {scope}")
    return 0


async def sync(settings: Settings, args: argparse.Namespace) -> int:
    """``automem sync --url``: ``POST /admin/sync`` (``dry_run`` unless ``--repair``); with
    ``--repair --wait``, then waits until the index holds a point per memory (its counts in
    ``sync``), as over gRPC."""
    async with rest_client(settings, args) as http:
        checked = _check(await http.post("/admin/sync", params={"dry_run": str(not args.repair).lower()}))
        if args.repair and args.wait:
            checked["sync"] = await _wait_for_index(http, "sync")
    emit(args, checked, " ".join(f"{k}={v}" for k, v in sorted(checked.items()) if not isinstance(v, dict | list)))
    return 0
