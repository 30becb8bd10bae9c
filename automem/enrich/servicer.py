"""EnrichService: status of the enrichment consumer, re-queueing and re-embedding."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from automem.common.auth import bound_principal, require_role, resolve_scope
from automem.common.errors import FailedPrecondition, InvalidArgument, Unavailable
from automem.common.lifecycle import make_event
from automem.common.model import Memory
from automem.common.outbox import EventPublisher
from automem.common.settings import Settings
from automem.common.timeouts import long_running
from automem.enrich.consumer import REEMBED_ACTOR, EnrichConsumer
from automem.v1 import enrich_service_pb2, enrich_service_pb2_grpc, events_pb2, memory_pb2

log = logging.getLogger(__name__)

#: ``batch_size`` of a re-embedding job: default and largest (ReembedMemoriesRequest: 1..100,
#: 0 = 32; AutoMem's REST route automem/api/admin.py ``/admin/reembed`` caps at 100, which the
#: gateway keeps: automem/gateway/routes_ops.py ``admin_reembed``).
REEMBED_DEFAULT_BATCH = 32
REEMBED_MAX_BATCH = 100
#: Seconds GetEnrichmentStatus waits for each store it reads (NATS for the queue depth,
#: FalkorDB for the outbox backlog; milliseconds when healthy, up to a second on a saturated
#: 2-core machine): under the gateway's health bound (automem/gateway/usecases.py
#: ``HEALTH_TIMEOUT``, 3.5 s) after the open call's key check (automem/common/grpc_server.py
#: ``OPEN_PRINCIPAL_SECONDS``).
STATUS_STORE_SECONDS = 2.0


async def _zero() -> int:
    """The outbox backlog of a process without an outbox."""
    return 0


@dataclass
class ReembedJob:
    """The latest re-embedding job of this process; ``done`` is measured against the
    consumer's ``reembedded`` counter at the job's start (``baseline``)."""

    job_id: str
    scope: str
    force: bool
    total: int
    start_time: float
    baseline: int
    queued: int = 0


def requeueable(found: dict[str, Memory]) -> list[Memory]:
    """The memories of ``found`` that enrichment still keeps a point for: all but DELETED and
    REJECTED ones (a re-queued event of those would only delete their point again, and put
    an update event in the history of a memory that is gone)."""
    gone = (memory_pb2.MEMORY_STATE_DELETED, memory_pb2.MEMORY_STATE_REJECTED)
    return [m for m in found.values() if m.state not in gone]


def _timestamp(epoch: float) -> Timestamp | None:
    if not epoch:
        return None
    out = Timestamp()
    out.FromNanoseconds(int(epoch * 1e9))
    return out


class EnrichServicer(enrich_service_pb2_grpc.EnrichServiceServicer):
    """gRPC EnrichService over the running consumer (and the outbox, for its backlog).

    ``task`` is the asyncio task running the consumer loop (automem/targets.py): its liveness
    is the ``consumer_running`` of the status (AutoMem's ``thread_alive``)."""

    def __init__(self, settings: Settings, consumer: EnrichConsumer, publisher: EventPublisher | None = None,
                 task: asyncio.Task | None = None) -> None:
        self.settings = settings
        self.consumer = consumer
        self.publisher = publisher
        self.task = task
        #: The latest re-embedding job of each scope, and the task publishing it.
        self.reembeds: dict[str, ReembedJob] = {}
        self._reembed_tasks: dict[str, asyncio.Task] = {}

    async def GetEnrichmentStatus(self, request, context):
        """Queue depth (undelivered + unacknowledged messages), counters, the outbox backlog,
        AutoMem's ``stats`` / ``classification`` / ``inflight`` / ``max_attempts`` (no key
        needed: it feeds /health and /metrics). ``stats.last_success_id`` and
        ``stats.last_error`` name a memory of some scope, so they are answered only to a key
        that sees every scope (``*``; an open service's anonymous caller is one), empty
        otherwise: a key of one scope read another scope's memory ids here (break-it review).

        ``memories_pending``: memories whose enrichment is still to be done, counted in the
        graph (automem/graph/memories.py ``count_to_enrich``) — the queue depth misses those
        whose events the retention removed before enrichment took them.

        The queue depth (NATS), the outbox backlog and ``memories_pending`` (FalkorDB) are read
        concurrently, each within :data:`STATUS_STORE_SECONDS`, with a round trip to NATS
        (PING/PONG, automem/common/bus.py ``reachable``): the queue depth alone did not ask the
        server when the consumer had no subscription. UNAVAILABLE with a message starting
        ``nats:`` when NATS does not answer (/health then reports NATS disconnected); a FalkorDB that does not answer leaves
        ``outbox_backlog`` and ``memories_pending`` unset (unknown) and the rest answered — a stalled FalkorDB made this call fail, so
        /health reported NATS down too (break-it review)."""
        c = self.consumer.counters
        caller = bound_principal()
        every_scope = caller is not None and caller.allows_all()
        provider = self.consumer.provider
        llm = self.consumer.enricher.llm
        reachable, depth, backlog, waiting = await asyncio.gather(
            self.consumer.bus.reachable(STATUS_STORE_SECONDS),
            asyncio.wait_for(self.consumer.queue_depth(), STATUS_STORE_SECONDS),
            asyncio.wait_for(self.publisher.backlog(), STATUS_STORE_SECONDS) if self.publisher is not None
            else _zero(),
            asyncio.wait_for(self.consumer.graph.memories.count_to_enrich(self.settings.vectors_enabled),
                             STATUS_STORE_SECONDS), return_exceptions=True)
        if reachable is not True:
            raise Unavailable(f"nats: the server did not answer a round trip within {STATUS_STORE_SECONDS:g}s",
                              field="nats")
        if isinstance(depth, BaseException):
            raise Unavailable(f"nats: the server did not report the enrichment queue depth within "
                              f"{STATUS_STORE_SECONDS:g}s: {depth!r}", field="nats")
        out = enrich_service_pb2.GetEnrichmentStatusResponse(
            queue_depth=depth, pending=c.pending, processed=c.processed,
            failed=c.failed, dead_lettered=c.dead_lettered,
            embedding_model=provider.name if provider else "", vector_dimensions=provider.dimension if provider else 0,
            outbox_backlog=None if isinstance(backlog, BaseException) else backlog,
            memories_pending=None if isinstance(waiting, BaseException) else waiting,
            inflight=c.inflight, consumer_running=self.task is not None and not self.task.done(),
            max_attempts=self.settings.max_deliver,
            stats=enrich_service_pb2.EnrichmentStats(
                processed_total=c.successes + c.failures, successes=c.successes, failures=c.failures,
                last_success_id=c.last_success_id if every_scope else "",
                last_success_time=_timestamp(c.last_success_at),
                last_error=c.last_error if every_scope else "", last_error_time=_timestamp(c.last_error_at)),
            classification=enrich_service_pb2.ClassificationStats(
                llm_attempts=llm.calls if llm else 0, llm_successes=llm.successes if llm else 0,
                fallbacks=llm.failures if llm else 0),
        )
        return out

    async def GetReembedStatus(self, request, context):
        """The latest re-embedding job of the caller's scope (reader), unset when none ran
        there: a job and its counts belong to one scope, so the open GetEnrichmentStatus does
        not carry them."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        out = enrich_service_pb2.GetReembedStatusResponse()
        job = self.reembeds.get(scope)
        if job is not None:
            done = self.consumer.counters.reembedded.get(scope, 0) - job.baseline
            out.reembed.CopyFrom(enrich_service_pb2.ReembedProgress(
                job_id=job.job_id, total=job.total, queued=job.queued, done=min(done, job.total),
                start_time=_timestamp(job.start_time), force=job.force, scope=job.scope))
        return out

    @long_running
    async def ReprocessMemories(self, request, context):
        """Queue the given memories of the caller's scope for enrichment again (admin): one
        MEMORY_UPDATED event each with ``before`` = ``after`` (nothing changed; the history
        leaves such re-queue events out, automem/ingest/review.py ``ListMemoryEvents``),
        actor ``system:reprocess``. ``queued`` counts the memories queued: ids of no memory
        of the scope, and of DELETED or REJECTED ones (:func:`requeueable`), are not queued
        nor counted (AutoMem's answer, ``{"status": "success", "queued": n}``, stays)."""
        require_role("admin")
        scope = resolve_scope(request.scope)
        found = requeueable(await self.consumer.graph.memories.hydrate(list(request.ids), scope))
        for memory in found:
            event = make_event(events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=memory, after=memory,
                               content_changed=True, actor="system:reprocess")
            await self.consumer.bus.publish_event(event)
        return enrich_service_pb2.ReprocessMemoriesResponse(queued=len(found))

    @long_running
    async def ReembedMemories(self, request, context):
        """Re-embed the scope's memories through the enrichment path (admin; AutoMem's
        ``POST /admin/reembed``, automem/api/admin.py): selects the memories
        (automem/graph/memories.py ``Memories.reembed_ids``: with ``force`` all, otherwise those
        without a vector of the current model; newest first; at most ``limit``, 0 = all) and
        publishes an update event with a content change for each (actor ``system:reembed``),
        ``batch_size`` at a time, in the background; the consumer embeds them with the same
        payload builder as any store (the consumer re-embeds a point of a re-embedding event
        even when it is current; caller-supplied embeddings are never replaced). Returns at once with ``total`` and the job id; progress
        is :meth:`GetReembedStatus` of the same scope.

        ``batch_size``: 1..100, 0 = 32; negative or above 100 is INVALID_ARGUMENT naming
        ``batch_size`` (it was capped at 100 quietly), as is a negative ``limit``.
        FAILED_PRECONDITION while the scope's previous job is still publishing."""
        require_role("admin")
        scope = resolve_scope(request.scope)
        if not 0 <= request.batch_size <= REEMBED_MAX_BATCH:
            raise InvalidArgument(f"batch_size: must be 1..{REEMBED_MAX_BATCH} (0 = {REEMBED_DEFAULT_BATCH}), "
                                  f"got {request.batch_size}", field="batch_size")
        if request.limit < 0:
            raise InvalidArgument("limit: must be 0 (all) or more", field="limit")
        running = self._reembed_tasks.get(scope)
        if running is not None and not running.done():
            raise FailedPrecondition("a re-embedding job of this scope is still queueing; see /enrichment/status")
        batch = request.batch_size or REEMBED_DEFAULT_BATCH
        model = self.consumer.provider.name if self.consumer.provider else ""
        ids = await self.consumer.graph.memories.reembed_ids(scope, model, request.force, request.limit)
        job = self.reembeds[scope] = ReembedJob(
            job_id=uuid.uuid4().hex, scope=scope, force=request.force, total=len(ids), start_time=time.time(),
            baseline=self.consumer.counters.reembedded.get(scope, 0))
        self._reembed_tasks[scope] = asyncio.create_task(self._queue(job, ids, batch), name="reembed")
        return enrich_service_pb2.ReembedMemoriesResponse(total=len(ids), batch_size=batch, job_id=job.job_id)

    async def _queue(self, job: ReembedJob, ids: list[str], batch: int) -> None:
        """Publish the job's events ``batch`` memories at a time (a memory deleted or rejected
        meanwhile, :func:`requeueable`, is skipped and counted as done by lowering the total)."""
        try:
            for start in range(0, len(ids), batch):
                chunk = ids[start:start + batch]
                found = requeueable(await self.consumer.graph.memories.hydrate(chunk, job.scope))
                job.total -= len(chunk) - len(found)
                await asyncio.gather(*(self.consumer.bus.publish_event(make_event(
                    events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=m, after=m, content_changed=True,
                    actor=REEMBED_ACTOR)) for m in found))
                job.queued += len(found)
        except Exception:  # reported in the log; the status shows how far it got
            log.exception("re-embedding job stopped", extra={"job_id": job.job_id, "queued": job.queued})
