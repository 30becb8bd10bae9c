"""The enrichment consumer: a durable JetStream pull consumer that keeps vector points in
step with the graph.

For each MemoryEvent it reads the memory's *current* record from the graph (the record of
truth), so redelivered or reordered events never roll a point back:

* gone, DELETED or REJECTED → the point is deleted;
* content new or changed, no point yet, or another embedding model → embed (or take the
  caller's embedding) and upsert the point with the payload from the one builder;
* otherwise → the payload is rewritten (tags, validity window, state).

Then it records ``embedding_status`` on the memory (only while the content is unchanged).
With vectors disabled (``QDRANT_URL=disabled``) there is no point to write: entities,
classification, summary and PRECEDED_BY links still run and set ``enrichment_status`` DONE,
while ``embedding_status`` stays PENDING (no vector exists; recall's full-text fallback
covers exactly the memories that are not embedded), and every event is still acknowledged.
Explicit acks; a message that fails ``max_deliver`` times is parked on the dead-letter
subject with a log line and acknowledged.

Tracing: each message is processed in a CONSUMER span, child of the trace context in its
headers, so a store request and its asynchronous enrichment are one trace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import nats.errors
from automem.v1 import events_pb2, memory_pb2
from opentelemetry import trace
from opentelemetry.trace import Span

from services.common.bus import Bus
from services.common.embedding import EmbeddingProvider
from services.common.graph import GraphStore
from services.common.model import Memory
from services.common.payload import build_payload
from services.common.settings import Settings
from services.common.telemetry import record_error, start_consumer_span
from services.common.text import analyze, bm25_doc_weights
from services.common.vectors import VectorStore
from services.enrich.pipeline import Enricher

log = logging.getLogger(__name__)

DURABLE = "enrich"
_GONE_STATES = (memory_pb2.MEMORY_STATE_DELETED, memory_pb2.MEMORY_STATE_REJECTED)


@dataclass
class EnrichCounters:
    """Counters reported by GetEnrichmentStatus and /health."""

    processed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    pending: int = 0


def embedding_text(memory: Memory) -> str:
    """The text embedded for a memory: its content."""
    return memory.content


class EnrichConsumer:
    """Runs the enrichment loop.

    Args:
        settings: ``max_deliver``, ``embedding_provider``...
        bus, graph, vectors: connected stores (vectors None = vectors disabled: the consumer
            only records status).
        provider: the embedding provider.
    """

    def __init__(self, settings: Settings, bus: Bus, graph: GraphStore, vectors: VectorStore | None,
                 provider: EmbeddingProvider | None) -> None:
        self.settings = settings
        self.bus = bus
        self.graph = graph
        self.vectors = vectors
        self.provider = provider
        self.counters = EnrichCounters()
        self._stop = asyncio.Event()
        self.sub: Any = None
        #: Hooks run after the vector write (entities, links); each gets (memory, event).
        self.after_embed: list[Any] = []
        #: Entities, classification, summary and links (services/enrich/pipeline.py).
        self.enricher = Enricher(settings, graph, vectors)
        #: EventPublisher for MEMORY_ENRICHED audit events (set by the module; None = bus only).
        self.publisher: Any = None

    async def start(self) -> None:
        """Create the durable consumer."""
        self.sub = await self.bus.pull_subscribe(DURABLE)

    async def queue_depth(self) -> int:
        """Messages not yet delivered plus delivered but unacknowledged."""
        if self.sub is None:
            return 0
        info = await self.sub.consumer_info()
        return int(info.num_pending + info.num_ack_pending)

    async def run(self, batch: int = 64) -> None:
        """Fetch and process until :meth:`stop`."""
        while not self._stop.is_set():
            try:
                msgs = await self.sub.fetch(batch, timeout=1.0)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except Exception as exc:  # noqa: BLE001 - NATS hiccup: back off, keep going
                if self._stop.is_set():
                    break
                log.warning("enrich fetch failed", extra={"error": str(exc)})
                await asyncio.sleep(0.5)
                continue
            await self.process_batch(msgs)

    def stop(self) -> None:
        """Ask the loop to end after the current batch."""
        self._stop.set()

    async def close(self) -> None:
        """After the loop ended: drop the pull subscription (the durable consumer stays) — a
        drained pull subscription otherwise stalls the connection's drain — and the LLM client."""
        if self.sub is not None:
            try:
                await self.sub.unsubscribe()
            except Exception as exc:  # noqa: BLE001 - closing anyway
                log.debug("unsubscribe failed", extra={"error": str(exc)})
            self.sub = None
        await self.enricher.close()

    async def process_batch(self, msgs: list[Any]) -> None:
        """Process fetched messages: one embedding call for all texts that need one.

        Each message gets a CONSUMER span (child of the context in its headers) that holds
        its per-memory work (vector upsert, status write, hooks). Work shared by the batch
        (graph read, vector lookup, the embedding call) runs in the first message's span;
        the other spans link to it.
        """
        spans = {id(msg): self._message_span(msg) for msg in msgs}
        first = next(iter(spans.values()), None)
        for span in list(spans.values())[1:]:
            span.add_link(first.get_span_context(), {"automem.link": "batch_shared_work"})
        try:
            with trace.use_span(first, end_on_exit=False) if first is not None else nullcontext():
                await self._process(msgs, spans)
        finally:
            for span in spans.values():
                span.end()

    def _message_span(self, msg: Any) -> Span:
        headers = msg.headers or {}
        metadata = getattr(msg, "metadata", None)
        attributes = {"messaging.consumer.group.name": DURABLE}
        if metadata is not None:
            attributes["messaging.nats.num_delivered"] = int(metadata.num_delivered or 1)
        return start_consumer_span(msg.subject, headers, headers.get("Nats-Msg-Id", ""), attributes)

    async def _process(self, msgs: list[Any], spans: dict[int, Span]) -> None:
        events: list[tuple[Any, events_pb2.MemoryEvent]] = []
        for msg in msgs:
            try:
                events.append((msg, events_pb2.MemoryEvent.FromString(msg.data)))
                spans[id(msg)].set_attribute("automem.memory_id", events[-1][1].memory_id)
            except Exception as exc:  # noqa: BLE001 - undecodable: park at once
                record_error([spans[id(msg)]], exc)
                await self._park(msg, f"undecodable event: {exc}")
        ids = [e.memory_id for _, e in events if e.memory_id]
        try:
            current = await self.graph.get_memories(ids, None)
        except Exception as exc:  # noqa: BLE001 - graph down: retry the whole batch later
            record_error([spans[id(msg)] for msg, _ in events], exc)
            for msg, _ in events:
                await self._retry_or_park(msg, f"graph read failed: {exc}")
            return
        todo: dict[str, tuple[Memory, events_pb2.MemoryEvent]] = {}
        span_of: dict[str, Span] = {}
        for msg, event in events:
            memory = current.get(event.memory_id)
            if event.type == events_pb2.EVENT_TYPE_RELATION_CREATED and not event.memory_id:
                continue
            if event.type == events_pb2.EVENT_TYPE_MEMORY_ENRICHED:
                continue  # our own audit events: never re-enrich (no loop)
            if memory is not None:
                todo[memory.id] = (memory, event)
                span_of[memory.id] = spans[id(msg)]
        try:
            await self._apply(todo, {e.memory_id for _, e in events if e.memory_id not in current}, span_of)
        except Exception as exc:
            log.exception("enrichment batch failed")
            record_error([spans[id(msg)] for msg, _ in events], exc)
            for msg, _ in events:
                await self._retry_or_park(msg, f"enrichment failed: {exc}")
            return
        for msg, _ in events:
            await msg.ack()
            self.counters.processed += 1

    async def _apply(self, todo: dict[str, tuple[Memory, events_pb2.MemoryEvent]], gone: set[str],
                     span_of: dict[str, Span] | None = None) -> None:
        """Bring the vector points of ``todo`` and ``gone`` in step with the graph; the work on
        one memory runs inside ``span_of[memory_id]`` when given (its message's span)."""
        if self.vectors is None:
            await self._enrich_without_vectors(todo, span_of or {})
            return
        to_delete = list(gone) + [mid for mid, (m, _) in todo.items() if m.state in _GONE_STATES]
        if to_delete:
            await self.vectors.delete(to_delete)
        live = {mid: pair for mid, pair in todo.items() if pair[0].state not in _GONE_STATES}
        if not live:
            return
        existing = {p.id: p for p in await self.vectors.retrieve(list(live))}
        current_of: dict[str, Memory] = {}  # before the enrichment write, for the audit event
        for mid, (memory, _event) in live.items():
            current_of[mid] = Memory()
            current_of[mid].CopyFrom(memory)
        model = self.provider.name if self.provider else ""
        need_embed: list[Memory] = []
        supplied: dict[str, list[float]] = {}
        for mid, (memory, event) in live.items():
            point = existing.get(mid)
            stale = point is None or point.payload.get("content_hash") != memory.content_hash or (
                point.payload.get("embedding_model") not in (model, "caller"))
            if not stale:
                continue
            if len(event.embedding) and memory.embedding_status != memory_pb2.EMBEDDING_STATUS_DONE:
                supplied[mid] = list(event.embedding)
            else:
                need_embed.append(memory)
        # Entities and LLM classification/summary run while the batch is embedded; they must
        # be done before the upsert (the payload carries the type and entity tags).
        embed_ids = {m.id for m in need_embed} | set(supplied)
        enrich_now = [m for m, e in live.values() if e.content_changed or m.id in embed_ids
                      or m.enrichment_status != memory_pb2.ENRICHMENT_STATUS_DONE]
        preparing = asyncio.ensure_future(self.enricher.prepare(enrich_now))
        vectors: dict[str, Any] = {}
        if need_embed and self.provider is not None:
            matrix = await asyncio.to_thread(self.provider.embed, [embedding_text(m) for m in need_embed])
            vectors = {m.id: matrix[i].tolist() for i, m in enumerate(need_embed)}
        dimension = self.provider.dimension if self.provider else None
        for mid, values in supplied.items():
            memory = live[mid][0]
            if dimension is not None and len(values) != dimension:
                log.warning("caller embedding has the wrong size; embedding locally",
                            extra={"memory_id": mid, "size": len(values), "expected": dimension})
                if self.provider is not None:
                    vectors[mid] = (await asyncio.to_thread(self.provider.embed, [embedding_text(memory)]))[0].tolist()
                continue
            vectors[mid] = values
        sparse = await self._sparse_vectors([live[mid][0] for mid in vectors])
        prepared = await preparing
        unembedded = [m.id for m in enrich_now if m.id not in vectors and m.id in existing]
        old_vectors = {p.id: p.vector for p in await self.vectors.retrieve(unembedded, with_vectors=True)} \
            if unembedded else {}
        for mid, (memory, _event) in live.items():
            span = (span_of or {}).get(mid)
            with trace.use_span(span, end_on_exit=False) if span is not None else nullcontext():
                if mid in vectors:
                    memory.embedding_model = "caller" if mid in supplied and vectors[mid] is supplied[mid] else model
                    memory.embedding_status = memory_pb2.EMBEDDING_STATUS_DONE
                    await self.vectors.upsert(mid, vectors[mid], build_payload(memory), sparse=sparse.get(mid))
                    if await self.graph.set_enrichment(mid, memory.content_hash, {
                            "embedding_status": "EMBEDDING_STATUS_DONE", "embedding_model": memory.embedding_model}):
                        await self._publish_enriched(current_of.get(mid), memory)
                elif mid in existing:
                    memory.embedding_model = existing[mid].payload.get("embedding_model", model)
                    await self.vectors.set_payload(mid, build_payload(memory))
                for hook in self.after_embed:
                    await hook(memory, _event)
                if mid in prepared:
                    await self.enricher.finish(memory, prepared[mid], vectors.get(mid) or old_vectors.get(mid))

    async def _enrich_without_vectors(self, todo: dict[str, tuple[Memory, events_pb2.MemoryEvent]],
                                      span_of: dict[str, Span]) -> None:
        """Vectors disabled: the graph-only part of enrichment (entities, classification,
        summary, PRECEDED_BY links) for new or changed memories; ``embedding_status`` is left
        as it is (PENDING: no vector was written)."""
        enrich_now = [m for m, e in todo.values() if m.state not in _GONE_STATES and (
            e.content_changed or m.enrichment_status != memory_pb2.ENRICHMENT_STATUS_DONE)]
        if not enrich_now:
            return
        prepared = await self.enricher.prepare(enrich_now)
        await self.graph.link_predecessors([m.id for m in enrich_now], time.time())
        for memory in enrich_now:
            span = span_of.get(memory.id)
            with trace.use_span(span, end_on_exit=False) if span is not None else nullcontext():
                await self.enricher.finish(memory, prepared[memory.id], None)

    async def _publish_enriched(self, before: Memory | None, after: Memory) -> None:
        """Append the MEMORY_ENRICHED audit event: ``after`` is the record as it stands once the
        enrichment write landed (re-read, so edits made meanwhile show), ``before`` the same
        record with the enrichment fields as they were."""
        from services.ingest.servicer import make_event

        fresh = await self.graph.get_memory(after.id, None)
        if fresh is not None:
            after = fresh
            previous = Memory()
            previous.CopyFrom(fresh)
            if before is not None:
                previous.embedding_status = before.embedding_status
                previous.embedding_model = before.embedding_model
            before = previous

        event = make_event(events_pb2.EVENT_TYPE_MEMORY_ENRICHED, before=before, after=after, actor="system:enrich")
        try:
            if self.publisher is not None:
                await self.publisher.publish(event)
            else:
                await self.bus.publish_event(event)
        except Exception as exc:  # noqa: BLE001 - the audit event must not fail enrichment
            log.warning("could not publish MEMORY_ENRICHED", extra={"memory_id": after.id, "error": str(exc)})

    async def _sparse_vectors(self, memories: list[Memory]) -> dict[str, tuple[list[int], list[float]]]:
        """BM25 document weights of each memory's content plus its PRECEDED_BY predecessor's
        content at ``text.CONTEXT_WEIGHT`` (measured on LoCoMo: recall@10 0.629 -> 0.713;
        docs/benchmarks.md). Writes the PRECEDED_BY edges on the way."""
        if not memories:
            return {}
        prev = await self.graph.link_predecessors([m.id for m in memories], time.time())
        out = {}
        for memory in memories:
            weights = bm25_doc_weights(analyze(memory.content), analyze(prev.get(memory.id, "")))
            if weights:
                keys = sorted(weights)
                out[memory.id] = (keys, [weights[k] for k in keys])
        return out

    async def _retry_or_park(self, msg: Any, reason: str) -> None:
        delivered = msg.metadata.num_delivered if msg.metadata else 1
        if delivered >= self.settings.max_deliver:
            await self._park(msg, reason)
        else:
            await msg.nak(delay=min(2.0 ** delivered * 0.1, 5.0))

    async def _park(self, msg: Any, reason: str) -> None:
        log.error("event parked on the dead-letter subject",
                  extra={"subject": self.bus.subjects.dlq(DURABLE), "reason": reason})
        try:
            await self.bus.park(DURABLE, msg.data, msg.headers, reason)
            self.counters.dead_lettered += 1
            await msg.ack()
        except Exception:
            log.exception("could not park message")
        self.counters.failed += 1
        await self._mark_failed(msg.data)

    async def _mark_failed(self, data: bytes) -> None:
        """Record EMBEDDING_STATUS_FAILED on the memory of a parked event (when it decodes
        and the memory still holds the same content)."""
        try:
            event = events_pb2.MemoryEvent.FromString(data)
        except Exception:  # noqa: BLE001 - undecodable: no memory to mark
            return
        memory = await self.graph.get_memory(event.memory_id, None) if event.memory_id else None
        if memory is not None and memory.embedding_status != memory_pb2.EMBEDDING_STATUS_DONE:
            await self.graph.set_enrichment(memory.id, memory.content_hash,
                                            {"embedding_status": "EMBEDDING_STATUS_FAILED"})
