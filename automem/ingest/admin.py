"""AdminService: operating a running service — API keys and restoring a backup — so the
operator CLI (automem/cli/main.py) needs no downtime. Served by the ingest target next to
IngestService (whose ExportBackup writes the backups RestoreBackup reads).

Keys (automem/common/keys.py; every RPC needs the admin role):
  * ``CreateApiKey`` mints a key; each of its scope patterns must lie within the caller's
    own (:func:`automem.common.keys.within`), so an admin of ``acme/*`` cannot mint a key for
    ``globex/*`` or ``*``. The secret is in the response only.
  * ``ListApiKeys`` / ``RevokeApiKey`` see only the keys within the caller's patterns (a key
    outside them answers NOT_FOUND, as an absent one).
  * Every create and revoke writes an ``ApiKeyEvent`` (action, key id, actor, role, scopes,
    time; never the secret) in the same graph query as the change (automem/graph/keys.py),
    listed by ``ListApiKeyEvents``, and logs one ``api key`` line with the same fields.

Restore: ``RestoreBackup`` takes the backup's bytes as a client stream and runs
:func:`automem.common.backup.restore_records` on this service's graph and stream, keeping the
service's API keys (``keep_labels``), so the caller's key still works afterwards.
"""

from __future__ import annotations

import logging
from typing import Any

from automem.common import backup
from automem.common.auth import Principal, require_role
from automem.common.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied
from automem.common.jsontext import json_lines
from automem.common.keys import ApiKeyInfo, KeyStore, within
from automem.common.model import ts
from automem.common.outbox import EventPublisher
from automem.common.paging import decode_offset_token, encode_offset_token
from automem.common.settings import Settings
from automem.common.text import UNPRINTABLE_NAME
from automem.common.timeouts import long_running
from automem.graph import GraphStore
from automem.v1 import admin_service_pb2, admin_service_pb2_grpc

log = logging.getLogger(__name__)

#: Page sizes of ListApiKeys / ListApiKeyEvents: default and maximum.
DEFAULT_KEY_PAGE = 100
MAX_KEY_PAGE = 1000
#: What a restore into a running service keeps (its keys, their audit record, its schema
#: markers), each label with the property that identifies a node.
KEPT_LABELS = {"ApiKey": "id", "ApiKeyEvent": "id", "SchemaMigration": "name"}
MAX_NAME = 200


def _key(info: ApiKeyInfo) -> admin_service_pb2.ApiKey:
    out = admin_service_pb2.ApiKey(id=info.id, role=info.role, scopes=info.scopes, default_scope=info.default_scope,
                                   display_name=info.name, revoked=info.revoked, created_by=info.created_by,
                                   revoked_by=info.revoked_by, require_review=info.require_review)
    out.create_time.CopyFrom(ts(info.create_time))
    if info.revoke_time is not None:
        out.revoke_time.CopyFrom(ts(info.revoke_time))
    return out


def _page_size(value: int) -> int:
    if value < 0 or value > MAX_KEY_PAGE:
        raise InvalidArgument(f"page_size: must be 0..{MAX_KEY_PAGE} (0 = {DEFAULT_KEY_PAGE})", field="page_size")
    return value or DEFAULT_KEY_PAGE


def _audit(action: str, info: ApiKeyInfo, actor: str) -> None:
    log.info("api key", extra={"action": action, "key_id": info.id, "actor": actor, "role": info.role,
                               "scopes": list(info.scopes)})



class AdminServicer(admin_service_pb2_grpc.AdminServiceServicer):
    """gRPC AdminService over the key store (the one the process authenticates with, so a
    revocation here is refused at once), the graph and the publisher's bus."""

    def __init__(self, settings: Settings, graph: GraphStore, publisher: EventPublisher,
                 keys: KeyStore | None = None) -> None:
        self.settings = settings
        self.graph = graph
        self.publisher = publisher
        self.keys = keys or KeyStore(graph)

    async def _managed(self, principal: Principal) -> list[ApiKeyInfo]:
        return [k for k in await self.keys.list() if within(k.scopes, principal.scopes)]

    async def CreateApiKey(self, request, context):
        """Mint a key (admin). INVALID_ARGUMENT naming ``role``, ``scopes``,
        ``default_scope`` or ``display_name`` (at most 200 characters, none of automem/common/text.py ``UNPRINTABLE_CLASS``); PERMISSION_DENIED
        when a pattern lies outside the caller's (``scopes``)."""
        principal = require_role("admin")
        if len(request.display_name) > MAX_NAME:
            raise InvalidArgument(f"display_name: at most {MAX_NAME} characters", field="display_name")
        if UNPRINTABLE_NAME.search(request.display_name):
            # `automem keys list` prints it in a tab-separated line: a newline, tab or escape
            # sequence (C0 or C1), a line separator or a bidi override in it forged, erased or
            # reordered rows of the operator's key audit.
            raise InvalidArgument("display_name: must not contain control, format or line-separator characters",
                                  field="display_name")
        scopes = [s.strip() for s in request.scopes if s.strip()]
        if not scopes:
            raise InvalidArgument("scopes: at least one scope pattern is required", field="scopes")
        if not within(scopes, principal.scopes):
            raise PermissionDenied(f"scopes: {scopes} reach beyond this key's own {list(principal.scopes)}")
        try:
            secret, info = await self.keys.create(request.role, scopes, request.default_scope or None,
                                                  request.display_name, request.require_review, actor=principal.name)
        except InvalidArgument as exc:
            if exc.field != "scope":
                raise
            raise InvalidArgument("scopes" + exc.message.removeprefix("scope"), field="scopes") from None
        _audit("create", info, principal.name)
        return admin_service_pb2.CreateApiKeyResponse(api_key=_key(info), secret=secret)

    async def ListApiKeys(self, request, context):
        """The keys within the caller's patterns, oldest first (admin), revoked ones included."""
        principal = require_role("admin")
        size, offset = _page_size(request.page_size), decode_offset_token(request.page_token, "api_keys")
        keys = await self._managed(principal)
        page = keys[offset:offset + size]
        more = offset + size < len(keys)
        return admin_service_pb2.ListApiKeysResponse(api_keys=[_key(k) for k in page],
                                                     next_page_token=encode_offset_token(offset + size, "api_keys")
                                                     if more else "")

    async def RevokeApiKey(self, request, context):
        """Revoke a key (admin). INVALID_ARGUMENT without ``id``; NOT_FOUND when absent or
        outside the caller's patterns. Revoking a revoked key answers it unchanged."""
        principal = require_role("admin")
        if not request.id.strip():
            raise InvalidArgument("id: the key id is required", field="id")
        found = next((k for k in await self._managed(principal) if k.id == request.id), None)
        if found is None:
            raise NotFound(f"key {request.id} not found", field="id")
        await self.keys.revoke(found.id, actor=principal.name)
        info = next(k for k in await self.keys.list() if k.id == found.id)
        if not found.revoked:
            _audit("revoke", info, principal.name)
        return admin_service_pb2.RevokeApiKeyResponse(api_key=_key(info))

    async def ListApiKeyEvents(self, request, context):
        """The audit record of key changes within the caller's patterns, newest first (admin)."""
        principal = require_role("admin")
        bound = f"api_key_events:{request.key_id.strip()}"
        size, offset = _page_size(request.page_size), decode_offset_token(request.page_token, bound)
        rows = [r for r in await self.graph.keys.events(request.key_id.strip())
                if within(list(r[5] or []), principal.scopes)]
        page = rows[offset:offset + size]
        events = []
        for r in page:
            event = admin_service_pb2.ApiKeyEvent(id=r[0] or "", action=r[1] or "", key_id=r[2] or "",
                                                  actor=r[3] or "", role=r[4] or "", scopes=list(r[5] or []))
            event.event_time.CopyFrom(ts(float(r[6] or 0)))
            events.append(event)
        return admin_service_pb2.ListApiKeyEventsResponse(
            events=events,
            next_page_token=encode_offset_token(offset + size, bound) if offset + size < len(rows) else "")

    async def RestoreBackup(self, request_iterator, context):
        """Restore a streamed backup into this service (admin on every scope). INVALID_ARGUMENT
        naming the line for a file that is not a backup; FAILED_PRECONDITION when the graph
        holds memories or the stream events and ``force`` is not set in the first message."""
        principal = require_role("admin")
        if not principal.allows_all():
            raise PermissionDenied("restore replaces every scope: it needs a key allowed on all scopes ('*')")
        chunks: list[bytes] = []
        force: bool | None = None
        async for message in request_iterator:
            if force is None:
                force = message.force
            chunks.append(message.data)
        return await self._restore(b"".join(chunks), bool(force))

    @long_running
    async def _restore(self, data: bytes, force: bool) -> Any:
        if data[:2] == b"\x1f\x8b":
            raise InvalidArgument("data: a gzip file; decompress it first (gunzip), then restore the .jsonl",
                                  field="data")
        try:
            records = backup.read_lines(json_lines(data.decode("utf-8-sig")))
        except UnicodeDecodeError as exc:
            raise InvalidArgument(f"data: not UTF-8 text ({exc.reason} at byte {exc.start})", field="data") from None
        except ValueError as exc:
            raise InvalidArgument(f"data: {exc}", field="data") from None
        if not any(r.get("kind") == "header" for r in records):
            raise InvalidArgument("data: no backup header line (not a file written by automem backup)", field="data")
        try:
            counts = await backup.restore_records(self.graph, records, self.publisher.bus, force=force,
                                                  keep_labels=KEPT_LABELS)
        except RuntimeError as exc:
            raise FailedPrecondition(str(exc).replace("pass --force", "restore with force")) from None
        except ValueError as exc:
            raise InvalidArgument(f"data: {exc}", field="data") from None
        finally:
            self.keys.forget()
        log.info("backup restored", extra={**counts, "force": force})
        return admin_service_pb2.RestoreBackupResponse(**counts)
