"""``memory.recall`` activity events: one per recall on the durable event stream, for
``GET /stream`` (automem/gateway/routes_stream.py).

AutoMem emits ``memory.recall`` after each ``GET /recall`` with ``query`` (first 50
characters, ``"(no query)"`` without one), ``limit``, ``result_count``, ``elapsed_ms`` and the
first 3 ``tags`` (automem/api/runtime_recall_routes.py in verygoodplugins/automem). Here it
is an ``ActivityEvent`` of the caller's scope on ``<prefix>.activity.memory_recall``
(automem/common/bus.py), published after the answer in a background task, so the recall
does not wait for NATS; a publish that fails is logged and dropped (a recall changes
nothing, so no outbox). On by default, off with ``AUTOMEM_STREAM_RECALL_EVENTS=false``; the
cost is in docs/benchmarks.md ("Recall events").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from automem.common.auth import current_principal, resolve_scope
from automem.common.bus import Bus
from automem.common.lifecycle import make_activity
from automem.v1 import event_stream_pb2

log = logging.getLogger(__name__)

#: Characters of the query and tags in the event (AutoMem's).
QUERY_CHARS = 50
EVENT_TAGS = 3


def recall_event(request: Any, response: Any, elapsed_ms: float, scope: str,
                 actor: str) -> event_stream_pb2.ActivityEvent:
    """The ``memory.recall`` ActivityEvent of a SearchMemories ``request`` and its
    ``response`` (``elapsed_ms``: milliseconds the servicer took)."""
    query = request.query or next((q for q in request.queries if q), "")
    return make_activity("memory.recall", scope, {
        "query": query[:QUERY_CHARS] if query else "(no query)",
        "limit": request.limit if request.HasField("limit") else None,
        "result_count": len(response.results), "elapsed_ms": round(elapsed_ms),
        "tags": list(request.tags[:EVENT_TAGS])}, actor=actor)


def publish_recalls(servicer: Any, bus_of: Callable[[], Bus | None]) -> None:
    """Make ``servicer.SearchMemories`` (automem/recall/servicer.py) publish a
    ``memory.recall`` event after each successful answer, on the bus ``bus_of()`` returns
    (none published while it returns None or a disconnected bus). Wired by the recall target
    (automem/targets.py) when ``stream_recall_events`` is on."""
    inner = servicer.SearchMemories
    pending: set[asyncio.Task] = set()

    async def SearchMemories(request, context):
        started = time.perf_counter()
        response = await inner(request, context)
        bus = bus_of()
        if bus is not None and bus.connected:
            try:
                event = recall_event(request, response, (time.perf_counter() - started) * 1000,
                                     resolve_scope(request.scope), current_principal().name)
            except Exception as exc:  # noqa: BLE001 - the answer stands
                log.debug("recall event not built", extra={"error": repr(exc)})
                return response
            task = asyncio.create_task(_publish(bus, event), name="recall-event")
            pending.add(task)
            task.add_done_callback(pending.discard)
        return response

    SearchMemories.__doc__ = inner.__doc__
    servicer.SearchMemories = SearchMemories


async def _publish(bus: Bus, event: event_stream_pb2.ActivityEvent) -> None:
    try:
        await bus.publish_activity(event)
    except Exception as exc:  # noqa: BLE001 - a lost recall notice is not a lost write
        log.warning("recall event not published", extra={"error": repr(exc)})
