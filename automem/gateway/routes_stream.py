"""The event stream: ``GET /stream`` (server-sent events) and ``GET /stream/status``.

AutoMem's routes (automem/api/stream.py in verygoodplugins/automem) send each event as one
unnamed SSE message whose data is ``{"type", "timestamp", "data"}``, with AutoMem's event
names (``memory.store``, ``memory.recall``, ``enrichment.complete``, ``consolidation.run``, …)
and a ``: keepalive`` comment every 30 s; they feed it from an in-process queue per client
that silently drops events when the client is slow. Here the feed is the durable JetStream
event log, read through ReviewService.StreamMemoryEvents (automem/ingest/review.py), so:

* only the caller's scope is seen (the service resolves it from the key, as for every call);
* each message has ``id: <stream sequence>``; a reconnect with ``Last-Event-ID: N`` (or
  ``?last_event_id=N``) gets every event after N — across a reconnect or a gateway restart —
  and a first ``stream.trimmed`` event when the retention removed some of them; an open
  stream whose events the retention removes before it read them (a reader behind the byte
  limit) gets a ``stream.trimmed`` event where they were, never a silent gap;
* keep-alive comments every ``AUTOMEM_STREAM_KEEPALIVE_SECONDS`` (default 30);
* a client more than ``AUTOMEM_STREAM_BUFFER_EVENTS`` events behind gets a final
  ``stream.overflow`` event (naming the last id it was sent) and is disconnected; a stream
  the service ends with an error gets a final ``stream.error`` event, and one the stopping
  gateway ends a final ``stream.shutdown`` event. Either way it resumes with
  ``Last-Event-ID`` and loses nothing;
* a stream whose key is revoked ends with a final ``stream.unauthorized`` event within about
  2 s (the service checks the key before each event and every second while idle).

The messages are written by sse-starlette's ``EventSourceResponse``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Header, Query, Request
from google.protobuf import json_format
from sse_starlette import EventSourceResponse, ServerSentEvent

from automem.common.errors import HTTP_STATUS
from automem.common.model import iso, type_name
from automem.gateway.deps import CallerDep, auth_error
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import JsonBodyRoute
from automem.v1 import event_stream_pb2, events_pb2

router = APIRouter(route_class=JsonBodyRoute)

#: Characters of the content shown in an event (AutoMem's ``content_preview``: 100 and "...").
PREVIEW_CHARS = 100
#: Tags shown in an event (AutoMem shows the first 5).
EVENT_TAGS = 5

_E = events_pb2
#: AutoMem's event name of each MemoryEvent type (automem/api/stream.py lists
#: memory.store/update/delete/associate and enrichment.complete; the rest are this service's
#: own transitions, named the same way).
EVENT_NAMES: dict[int, str] = {
    _E.EVENT_TYPE_MEMORY_CREATED: "memory.store",
    _E.EVENT_TYPE_MEMORY_UPDATED: "memory.update",
    _E.EVENT_TYPE_MEMORY_DELETED: "memory.delete",
    _E.EVENT_TYPE_MEMORY_PURGED: "memory.delete",
    _E.EVENT_TYPE_MEMORY_SUPERSEDED: "memory.supersede",
    _E.EVENT_TYPE_MEMORY_ARCHIVED: "memory.archive",
    _E.EVENT_TYPE_RELATION_CREATED: "memory.associate",
    _E.EVENT_TYPE_REVIEW_APPROVED: "review.approve",
    _E.EVENT_TYPE_REVIEW_REJECTED: "review.reject",
    _E.EVENT_TYPE_MEMORY_ENRICHED: "enrichment.complete",
}


def _preview(text: str) -> str:
    return text[:PREVIEW_CHARS] + "..." if len(text) > PREVIEW_CHARS else text


def memory_event_data(event: events_pb2.MemoryEvent) -> dict[str, Any]:
    """AutoMem's ``data`` of a MemoryEvent. ``memory.store`` carries AutoMem's fields (id,
    content_preview, type, importance, tags (first 5), size_bytes: automem/api/
    runtime_memory_routes.py; its ``elapsed_ms`` is a property of the HTTP call, not of the
    event, and is left out); ``memory.update`` the same plus version and content_changed;
    ``enrichment.complete`` AutoMem's memory_id, success, skipped
    (automem/enrichment/runtime_worker.py); the others the memory id, reason and what
    each transition names. Every payload has ``scope`` and ``actor``."""
    memory = event.after if event.HasField("after") else event.before
    data: dict[str, Any] = {"scope": event.scope or event.relation.scope, "actor": event.actor}
    kind = event.type
    if kind == _E.EVENT_TYPE_RELATION_CREATED:
        rel = event.relation
        data.update({"id": rel.source_id, "source_id": rel.source_id, "target_id": rel.target_id,
                     "type": rel.type, "strength": rel.strength})
        return data
    if kind == _E.EVENT_TYPE_MEMORY_ENRICHED:
        data.update({"memory_id": event.memory_id, "success": True, "skipped": False, "version": event.version})
        return data
    data["id"] = event.memory_id
    if kind in (_E.EVENT_TYPE_MEMORY_CREATED, _E.EVENT_TYPE_MEMORY_UPDATED):
        data.update({"content_preview": _preview(memory.content), "type": type_name(memory.type),
                     "importance": memory.importance, "tags": list(memory.tags[:EVENT_TAGS]),
                     "size_bytes": len(memory.content.encode())})
        if kind == _E.EVENT_TYPE_MEMORY_UPDATED:
            data.update({"version": event.version, "content_changed": event.content_changed})
        return data
    if kind == _E.EVENT_TYPE_MEMORY_SUPERSEDED:
        data["superseded_by"] = event.after.superseded_by or None
    if kind == _E.EVENT_TYPE_MEMORY_PURGED:
        data["purged"] = True
    data["reason"] = event.reason or None
    return data


def stream_message(item: event_stream_pb2.StreamMemoryEventsResponse) -> ServerSentEvent:
    """One SSE message: ``id`` = stream sequence, data = AutoMem's ``{"type", "timestamp",
    "data"}`` JSON (plus ``event_id``). A ``trimmed`` item (first on a resume, or mid-stream)
    becomes ``stream.trimmed`` (``requested_after``, ``first_retained_id``,
    ``retained_since``) without an id."""
    which = item.WhichOneof("item")
    if which == "trimmed":
        t = item.trimmed
        return _sse({"type": "stream.trimmed", "timestamp": _now(), "data": {
            "requested_after": t.requested_after_sequence, "first_retained_id": t.first_retained_sequence,
            "retained_since": iso(t, "retained_since_time"),
            "message": "events after requested_after are no longer held (event retention); "
                       "the stream goes on from first_retained_id"}})
    if which == "activity_event":
        act = item.activity_event
        body = {"type": act.kind, "timestamp": iso(act, "event_time"), "event_id": act.event_id,
                "data": {**_whole(json_format.MessageToDict(act.data)), "scope": act.scope, "actor": act.actor}}
    else:
        event = item.memory_event
        body = {"type": EVENT_NAMES.get(event.type, "memory.event"), "timestamp": iso(event, "event_time"),
                "event_id": event.event_id, "data": memory_event_data(event)}
    return _sse(body, id=str(item.sequence))


def _whole(value: Any) -> Any:
    """``value`` with the integral numbers of a protobuf Struct (all doubles) as ints again:
    AutoMem's counts, limits and milliseconds are JSON integers."""
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _sse(body: dict[str, Any], id: str | None = None) -> ServerSentEvent:
    # One ``data:`` line of JSON, as AutoMem writes it (json.dumps of the envelope).
    return ServerSentEvent(json.dumps(body), id=id)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _final(kind: str, last_id: int, message: str) -> ServerSentEvent:
    return _sse({"type": kind, "timestamp": _now(), "data": {
        "last_event_id": last_id or None, "message": message}})


def _last_event_id(header: str | None, query: str | None) -> int:
    name = "Last-Event-ID" if header is not None else "last_event_id"
    if header is not None:  # header text arrives as Latin-1 (HTTP); show what the client sent
        header = header.encode("latin-1").decode("utf-8", "replace")
    raw = (header if header is not None else query or "").strip()
    if not raw:
        return 0
    # ASCII digits only: str.isdigit() also takes "²" (which int() refuses: a 500) and other
    # scripts' digits ("٣" read as 3); a stream sequence fits an int64.
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise GatewayError(400, f"{name}: {raw[:40]!r} is not an id this stream sent (a stream sequence)")
    return int(raw)


_END = object()
_SHUTDOWN = object()


# Not in the OpenAPI schema: an endless text/event-stream answer is no JSON operation (and a
# schema-driven client or fuzzer would wait on it forever); this docstring and
# docs/automem-compat.md describe it.
@router.get("/stream", tags=["stream"], include_in_schema=False)
async def stream(request: Request, call: CallerDep,
                 last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
                 last_event_id_query: Annotated[str | None, Query(alias="last_event_id")] = None) -> EventSourceResponse:
    """Server-sent events of the caller's scope (see the module docstring). ``Last-Event-ID``
    (header; ``?last_event_id=`` for clients that cannot set it) resumes after that id.
    400 for an id that is not a number or is past the newest event; 401/403 as every route;
    503 when the service cannot be reached."""
    settings = request.app.state.settings
    after = _last_event_id(last_event_id, last_event_id_query)
    rpc = call.stream(call.client.review.StreamMemoryEvents,
                      event_stream_pb2.StreamMemoryEventsRequest(after_sequence=after), timeout=None)
    await _started(rpc)
    state = request.app.state.__dict__.setdefault("stream_subscribers", {"count": 0, "slow_disconnects": 0})
    bound = settings.stream_buffer_events
    queues: set[asyncio.Queue] = request.app.state.__dict__.setdefault("stream_queues", set())

    async def messages():
        queue: asyncio.Queue = asyncio.Queue()
        outcome: dict[str, Any] = {}

        async def pump() -> None:
            try:
                async for item in rpc:
                    if queue.qsize() >= bound:
                        outcome["overflow"] = True
                        state["slow_disconnects"] += 1
                        break
                    queue.put_nowait(item)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.UNAUTHENTICATED:  # the key was revoked mid-stream
                    outcome["unauthenticated"] = exc.details() or "missing or invalid API key"
                elif exc.code() != grpc.StatusCode.CANCELLED:
                    outcome["error"] = exc.details() or exc.code().name
            finally:
                rpc.cancel()
                queue.put_nowait(_END)

        state["count"] += 1
        queues.add(queue)
        task = asyncio.create_task(pump(), name="stream-pump")
        last = after
        try:
            while (item := await queue.get()) is not _END:
                if item is _SHUTDOWN:
                    yield _final("stream.shutdown", last, "the gateway is stopping; reconnect with Last-Event-ID "
                                                          "to resume")
                    return
                if item.WhichOneof("item") != "trimmed":
                    last = item.sequence
                yield stream_message(item)
            if outcome.get("overflow"):
                yield _final("stream.overflow", last, f"client too slow: more than {bound} events waiting; "
                                                      "reconnect with Last-Event-ID to resume")
            elif "unauthenticated" in outcome:
                yield _final("stream.unauthorized", last, f"{outcome['unauthenticated']}: the key was revoked "
                                                          "or is no longer valid; the stream ends")
            elif "error" in outcome:
                yield _final("stream.error", last, f"{outcome['error']}; reconnect with Last-Event-ID to resume")
        finally:
            state["count"] -= 1
            queues.discard(queue)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return EventSourceResponse(
        messages(), ping=settings.stream_keepalive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment="keepalive"),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def close_streams(app: Any) -> None:
    """End every open ``/stream`` response of ``app`` with a final ``stream.shutdown`` event
    (the gateway is stopping: uvicorn waits for open responses, and an event stream never
    ends by itself). Its clients reconnect with ``Last-Event-ID``. Called by the gateway
    target's stop (automem/targets.py)."""
    for queue in app.state.__dict__.get("stream_queues", ()):
        queue.put_nowait(_SHUTDOWN)


async def _started(rpc: Any) -> None:
    """Wait until the service accepted the stream (it sends its headers after its checks),
    so a refused one answers its HTTP error instead of an empty event stream."""
    try:
        await rpc.initial_metadata()
        if rpc.done():
            code = await rpc.code()
            if code != grpc.StatusCode.OK:
                raise GatewayError(HTTP_STATUS.get(code, 500), await rpc.details() or code.name, code=code)
    except grpc.aio.AioRpcError as exc:
        raise GatewayError.from_rpc(exc) from None


@router.get("/stream/status", tags=["stream"])
async def stream_status(request: Request) -> Any:
    """AutoMem's ``{"subscribers": n}`` (clients of ``/stream`` on this gateway process),
    plus ``slow_disconnects`` (clients cut off with ``stream.overflow`` since the start), where the events come from (``source``: ``jetstream``, durable and resumable), the
    keep-alive interval (seconds), the per-client buffer (events) and whether recalls are
    published (``recall_events``). Authenticated like ``/stream``."""
    if (refused := await auth_error(request)) is not None:
        return refused
    settings = request.app.state.settings
    state = request.app.state.__dict__.get("stream_subscribers", {"count": 0, "slow_disconnects": 0})
    return {"subscribers": state["count"], "slow_disconnects": state["slow_disconnects"], "source": "jetstream", "resumable": True, "keepalive_seconds": settings.stream_keepalive_seconds,
            "buffer_events": settings.stream_buffer_events, "recall_events": settings.stream_recall_events}
