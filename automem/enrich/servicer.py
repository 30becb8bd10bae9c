"""EnrichService: status of the enrichment consumer and re-queueing."""

from __future__ import annotations

from automem.common.auth import require_role, resolve_scope
from automem.common.lifecycle import make_event
from automem.common.outbox import EventPublisher
from automem.common.settings import Settings
from automem.common.timeouts import long_running
from automem.enrich.consumer import EnrichConsumer
from automem.v1 import enrich_service_pb2, enrich_service_pb2_grpc, events_pb2


class EnrichServicer(enrich_service_pb2_grpc.EnrichServiceServicer):
    """gRPC EnrichService over the running consumer (and the outbox, for its backlog)."""

    def __init__(self, settings: Settings, consumer: EnrichConsumer, publisher: EventPublisher | None = None) -> None:
        self.settings = settings
        self.consumer = consumer
        self.publisher = publisher

    async def GetEnrichmentStatus(self, request, context):
        """Queue depth (undelivered + unacknowledged messages), counters and the outbox
        backlog (no key needed: it feeds /health and /metrics)."""
        c = self.consumer.counters
        provider = self.consumer.provider
        return enrich_service_pb2.GetEnrichmentStatusResponse(
            queue_depth=await self.consumer.queue_depth(), pending=c.pending, processed=c.processed,
            failed=c.failed, dead_lettered=c.dead_lettered,
            embedding_model=provider.name if provider else "", vector_dimensions=provider.dimension if provider else 0,
            outbox_backlog=await self.publisher.backlog() if self.publisher is not None else 0,
        )

    @long_running
    async def ReprocessMemories(self, request, context):
        """Queue the given memories for enrichment again (admin)."""
        require_role("admin")
        scope = resolve_scope(request.scope)
        found = await self.consumer.graph.memories.hydrate(list(request.ids), scope)
        for memory in found.values():
            event = make_event(events_pb2.EVENT_TYPE_MEMORY_UPDATED, before=memory, after=memory,
                               content_changed=True, actor="system:reprocess")
            await self.consumer.bus.publish_event(event)
        return enrich_service_pb2.ReprocessMemoriesResponse(queued=len(found))
