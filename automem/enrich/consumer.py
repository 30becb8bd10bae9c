"""The enrichment consumer: a durable JetStream pull consumer that keeps vector points in
step with the graph.

For each MemoryEvent it reads the memory's *current* record from the graph (the record of
truth), so redelivered or reordered events never roll a point back:

* gone, DELETED or REJECTED → the point is deleted;
* content new or changed, no point yet, or another embedding model → embed (or take the
  caller's embedding) and upsert the point with the payload from the one builder;
* otherwise → the payload is rewritten (tags, validity window, state).

Then it records ``embedding_status`` on the memory (only while the content is unchanged and
the memory is not DELETED or REJECTED); a point written for a memory deleted while the batch
ran is deleted again, with no MEMORY_ENRICHED event and no further enrichment writes.
Everything works per fetched batch, not per memory: one embedding call, NER of the batch
and the indexed PRECEDED_BY lookup at the same time, one vector upsert, one guarded graph
write per kind of field, the MEMORY_ENRICHED events pipelined, one ack per message at the
end. A batch is ``enrich_batch_size`` events, or ``enrich_bulk_batch_size`` while a large
backlog waits (the bulk path of a big batch store, an import or a restore).
With vectors disabled (``QDRANT_URL=disabled``) there is no point to write: entities,
classification, summary and PRECEDED_BY links still run and set ``enrichment_status`` DONE,
while ``embedding_status`` stays PENDING (no vector exists; recall's full-text fallback
covers exactly the memories that are not embedded), and every event is still acknowledged.
Explicit acks; a message that fails ``max_deliver`` times is parked on the dead-letter
subject with a log line and acknowledged.

Tracing: each fetched batch is processed in one CONSUMER span that links to the producer
span of every message in it (a child of it when the batch holds a single message, so a lone
store and its enrichment are one trace); see :meth:`EnrichConsumer.process_batch`. Metrics:
each replica counts its own messages (automem/common/metrics.py; the queue depth gauge is
registered by the enrich target, automem/targets.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import nats.errors
from google.protobuf.message import DecodeError
from opentelemetry import trace
from opentelemetry.trace import Span

from automem.common import metrics
from automem.common.bus import ENRICH_DURABLE, Bus
from automem.common.embedding import EmbeddingProvider
from automem.common.lifecycle import make_event
from automem.common.model import Memory, node_to_memory
from automem.common.payload import build_payload
from automem.common.settings import Settings
from automem.common.telemetry import record_error, start_batch_span
from automem.common.text import analyze, bm25_doc_weights
from automem.common.timeouts import job_bound
from automem.enrich.pipeline import Enricher
from automem.graph import GraphStore
from automem.v1 import events_pb2, memory_pb2
from automem.vectors import VectorStore

log = logging.getLogger(__name__)

DURABLE = ENRICH_DURABLE
#: Actor of the events a re-embedding job publishes (automem/enrich/servicer.py), counted apart.
REEMBED_ACTOR = "system:reembed"
_GONE_STATES = (memory_pb2.MEMORY_STATE_DELETED, memory_pb2.MEMORY_STATE_REJECTED)


@dataclass
class EnrichCounters:
    """Counters reported by GetEnrichmentStatus and /health."""

    processed: int = 0
    #: Fetched batches processed (processed / batches = the mean batch size).
    batches: int = 0
    failed: int = 0
    dead_lettered: int = 0
    pending: int = 0
    #: Messages of the batch being processed now.
    inflight: int = 0
    #: Events acknowledged after a successful pass, and failed attempts (a retry or a park).
    successes: int = 0
    failures: int = 0
    last_success_id: str = ""
    last_success_at: float = 0.0
    last_error: str = ""
    last_error_at: float = 0.0
    #: Events of re-embedding jobs (actor ``system:reembed``) processed, by scope.
    reembedded: dict[str, int] = field(default_factory=dict)


@dataclass
class LookAhead:
    """What the look-ahead computed for a fetched batch: embeddings and entities by text."""

    vectors: dict[str, list[float]] = field(default_factory=dict)
    entities: dict[str, list[memory_pb2.Entity]] = field(default_factory=dict)


async def _none() -> None:
    return None


def _decode(data: bytes) -> events_pb2.MemoryEvent | None:
    """The event in ``data``, or None when it does not decode (the batch parks it)."""
    try:
        return events_pb2.MemoryEvent.FromString(data)
    except DecodeError:
        return None


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
        #: Entities, classification, summary and links (automem/enrich/pipeline.py).
        self.enricher = Enricher(settings, graph, vectors)
        #: EventPublisher for MEMORY_ENRICHED audit events (set by the module; None = bus only).
        self.publisher: Any = None
        #: False while fetches fail (the consumer or the stream gone, JetStream not answering):
        #: EnrichService then reports NOT_SERVING (automem/common/readiness.py).
        self.fetching = True

    async def start(self) -> None:
        """Create the durable consumer, and this replica's enrichment counters at 0: a counter
        series that first appears at 1 reads as no increase in Prometheus's ``increase()`` /
        ``rate()``, so the suggested alerts (docs/observability.md) missed the first dead
        letter after every start, and "stalled" could not fire before a first success."""
        self.sub = await self.bus.pull_subscribe(DURABLE)
        attributes = self.metric_attributes
        for counter in (metrics.consumed_messages, metrics.enrichment_processed, metrics.enrichment_failures,
                        metrics.enrichment_dead_lettered, metrics.enrichment_redeliveries):
            counter.add(0, attributes)

    async def queue_depth(self) -> int:
        """Messages not yet delivered plus delivered but unacknowledged."""
        if self.sub is None:
            return 0
        info = await self.sub.consumer_info()
        return int(info.num_pending + info.num_ack_pending)

    async def run(self, batch: int | None = None) -> None:
        """Fetch and process until :meth:`stop`. A fetch asks for ``batch`` events (default
        ``settings.enrich_batch_size``), or for ``settings.enrich_bulk_batch_size`` while more
        than ``settings.enrich_bulk_threshold`` events wait behind the last batch (the bulk
        path: a large batch store, an import or a restore is enriched in large batches).

        Look-ahead: once a batch's embedding and NER are done (its own look-ahead is over, or
        the batch computed them itself) and it moves on to its reads and writes, the next batch
        is fetched and its texts embedded and NER'd meanwhile (:meth:`_look_ahead`), so the
        models keep working while the graph and vector reads and writes run. The look-ahead
        only computes what depends on nothing but the text; the batch itself still reads the
        graph when its turn comes and decides from that."""
        size = batch or self.settings.enrich_batch_size
        ahead: tuple[list[Any], asyncio.Task] | None = None
        while not self._stop.is_set() or ahead is not None:
            if ahead is not None:
                msgs, looked = ahead
                ahead = None
            else:
                msgs, looked = await self._fetch(size, 1.0), None
                if not msgs:
                    continue
            models_done = asyncio.Event()
            processing = asyncio.create_task(self.process_batch(msgs, looked, models_done))
            size = self.fetch_size(msgs, batch)
            waiting = asyncio.create_task(models_done.wait())
            # The models are free once this batch's look-ahead is over (it usually covers the
            # whole batch), so the next look-ahead starts then, without waiting for this
            # batch's graph reads; what the look-ahead missed shares the same ONNX runs.
            await asyncio.wait([processing, waiting, *([looked] if looked is not None else [])],
                               return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if not processing.done() and not self._stop.is_set():
                following = await self._fetch(size, 0.05)
                if following:
                    ahead = (following, asyncio.create_task(self._look_ahead(following)))
            await processing

    async def _fetch(self, size: int, timeout: float) -> list[Any]:
        """Up to ``size`` messages, waiting at most ``timeout`` seconds; [] on a timeout or a
        failure. A failure sets :attr:`fetching` False until a fetch works again (logged once),
        makes the consumer again when NATS lost it (:meth:`_recreate`), then backs off 0.5 s."""
        try:
            msgs = await self.sub.fetch(size, timeout=timeout)
        except (TimeoutError, nats.errors.TimeoutError):
            msgs = []
        except Exception as exc:  # noqa: BLE001 - NATS hiccup or a lost consumer: back off, keep going
            if not self._stop.is_set():
                (log.warning if self.fetching else log.debug)("enrich fetch failed", extra={"error": str(exc)})
                self.fetching = False
                await self._recreate()
                await asyncio.sleep(0.5)
            return []
        if not self.fetching:
            log.info("enrich fetches again")
            self.fetching = True
        return msgs

    async def _recreate(self) -> None:
        """Make the stream and the durable consumer again when NATS has lost them (a NATS
        restarted without its store: every fetch failed for good), with the configuration of
        the start (automem/common/bus.py ``Bus.ensure_consumer``). Not while a restore is under
        way: it removes the consumer on purpose (automem/common/backup.py ``restore_records``).
        Never raises (NATS or FalkorDB down: the next failed fetch tries again)."""
        try:
            if await self.graph.dump.restore_started() is None:
                await self.bus.ensure_consumer(DURABLE)
        except Exception as exc:  # noqa: BLE001 - a store down: try again after the next failed fetch
            log.debug("enrich consumer not recreated", extra={"error": repr(exc)})

    async def _look_ahead(self, msgs: list[Any]) -> LookAhead:
        """Embeddings and entities of the texts a fetched batch will most likely need (memories
        created, or whose content changed, without a caller embedding), keyed by text. The
        texts come from the events' ``after`` records (a graph read only for events without
        one): the batch looks results up by its current text, so a text edited or deleted
        meanwhile only costs work that goes unused. Never raises: a failure only means the
        batch computes them itself."""
        out = LookAhead()
        try:
            events = [e for e in (_decode(msg.data) for msg in msgs) if e is not None]
            wanted = [e for e in events if e.memory_id and not len(e.embedding) and (
                e.type == events_pb2.EVENT_TYPE_MEMORY_CREATED or e.content_changed)]
            carried = [e.after for e in wanted if e.HasField("after") and e.after.id == e.memory_id]
            ids = [e.memory_id for e in wanted if not (e.HasField("after") and e.after.id == e.memory_id)]
            found = list((await self.graph.memories.hydrate(ids, None)).values()) if ids else []
            texts = list(dict.fromkeys(m.content for m in [*carried, *found] if m.state not in _GONE_STATES))
            if not texts:
                return out
            extractor = self.enricher.extractor
            jobs = [asyncio.to_thread(self.provider.embed, texts) if self.provider and self.vectors else None,
                    extractor.extract(texts) if extractor is not None else None]
            matrix, entities = await asyncio.gather(*(j if j is not None else _none() for j in jobs))
            if matrix is not None:
                out.vectors = {text: matrix[i].tolist() for i, text in enumerate(texts)}
            if entities is not None:
                out.entities = dict(zip(texts, entities, strict=True))
        except Exception as exc:  # noqa: BLE001 - only an optimisation
            log.warning("enrichment look-ahead failed", extra={"error": str(exc)})
        return out

    def fetch_size(self, msgs: list[Any], batch: int | None = None) -> int:
        """How many events to fetch after ``msgs``: the bulk batch size while the backlog the
        server reported with the last of them exceeds ``enrich_bulk_threshold``, else ``batch``
        (default ``enrich_batch_size``)."""
        metadata = getattr(msgs[-1], "metadata", None) if msgs else None
        backlog = int(getattr(metadata, "num_pending", 0) or 0)
        if backlog > self.settings.enrich_bulk_threshold:
            return max(self.settings.enrich_bulk_batch_size, batch or 0)
        return batch or self.settings.enrich_batch_size

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

    @property
    def metric_attributes(self) -> dict[str, str]:
        """Attributes of this consumer's metrics: ``messaging.system``, the durable consumer
        (``messaging.consumer.group.name``) and the subjects it reads
        (``messaging.destination.name``, the filter ``<prefix>.memory.>``)."""
        return {"messaging.system": "nats", "messaging.consumer.group.name": DURABLE,
                "messaging.destination.name": self.bus.subjects.memory_all}

    async def process_batch(self, msgs: list[Any], looked: asyncio.Future | None = None,
                            models_done: asyncio.Event | None = None) -> None:
        """Process fetched messages: one embedding call for all texts that need one.

        ``looked``: the batch's :meth:`_look_ahead` (texts already embedded / NER'd);
        ``models_done`` is set once the batch no longer needs the models (its writes follow).
        The batch runs in ONE CONSUMER span (automem/common/telemetry.py
        :func:`~automem.common.telemetry.start_batch_span`) that links to every message's
        producer span — a child of it when the batch holds one message — so a 500-memory
        batch is one trace of its own linked to the 500 stores, not part of each. Records
        ``messaging.client.consumed.messages``, ``automem.enrichment.redeliveries`` and
        ``messaging.process.duration`` (automem/common/metrics.py).
        """
        span = start_batch_span([(m.subject, m.headers, (m.headers or {}).get("Nats-Msg-Id", "")) for m in msgs],
                                self.bus.subjects.memory_all, DURABLE)
        attributes = self.metric_attributes
        metrics.consumed_messages.add(len(msgs), attributes)
        redelivered = sum(1 for m in msgs if int(getattr(getattr(m, "metadata", None), "num_delivered", 1) or 1) > 1)
        if redelivered:
            metrics.enrichment_redeliveries.add(redelivered, attributes)
        self.counters.batches += 1
        self.counters.inflight = len(msgs)
        keep_alive = asyncio.create_task(self._keep_alive(msgs))
        start = time.perf_counter()
        try:
            # A background job: its store calls get the enrichment bound, not a request's.
            with trace.use_span(span, end_on_exit=False), job_bound(self.settings.enrich_store_timeout_seconds):
                await self._process(msgs, span, await looked if looked is not None else None, models_done)
        finally:
            if models_done is not None:
                models_done.set()
            keep_alive.cancel()
            self.counters.inflight = 0
            span.end()
            metrics.messaging_process_duration.record(time.perf_counter() - start, attributes)

    async def _keep_alive(self, msgs: list[Any]) -> None:
        """While a batch is being processed, tell the server every third of ``ack_wait`` that
        its messages are in progress (a large bulk batch on a busy machine can take longer
        than ``ack_wait``; they would be redelivered meanwhile)."""
        interval = max(self.settings.ack_wait_seconds / 3.0, 0.5)
        while True:
            await asyncio.sleep(interval)
            for msg in msgs:
                if getattr(msg, "_ackd", False):
                    continue
                try:
                    await msg.in_progress()
                except Exception as exc:  # noqa: BLE001 - best effort; redelivery is safe
                    log.debug("in-progress signal failed", extra={"error": str(exc)})

    async def _process(self, msgs: list[Any], span: Span, looked: LookAhead | None = None,
                       models_done: asyncio.Event | None = None) -> None:
        events: list[tuple[Any, events_pb2.MemoryEvent]] = []
        for msg in msgs:
            try:
                events.append((msg, events_pb2.MemoryEvent.FromString(msg.data)))
            except Exception as exc:  # noqa: BLE001 - undecodable: park at once
                record_error([span], exc)
                await self._park(msg, f"undecodable event: {exc}")
        ids = [e.memory_id for _, e in events if e.memory_id]
        try:
            current = await self.graph.memories.hydrate(ids, None)
        except Exception as exc:  # noqa: BLE001 - graph down: retry the whole batch later
            record_error([span], exc)
            for msg, _ in events:
                await self._retry_or_park(msg, f"graph read failed: {exc}")
            return
        todo: dict[str, tuple[Memory, events_pb2.MemoryEvent]] = {}
        for msg, event in events:
            memory = current.get(event.memory_id)
            if event.type == events_pb2.EVENT_TYPE_RELATION_CREATED and not event.memory_id:
                continue
            if event.type == events_pb2.EVENT_TYPE_MEMORY_ENRICHED:
                continue  # our own audit events: never re-enrich (no loop)
            if memory is not None:
                todo[memory.id] = (memory, event)
        try:
            await self._apply(todo, {e.memory_id for _, e in events if e.memory_id not in current}, None,
                              looked, models_done)
        except Exception as exc:
            log.exception("enrichment batch failed")
            record_error([span], exc)
            for msg, _ in events:
                await self._retry_or_park(msg, f"enrichment failed: {exc}")
            return
        metrics.enrichment_processed.add(len(events), self.metric_attributes)
        for msg, event in events:
            await msg.ack()
            self.counters.processed += 1
            self.counters.successes += 1
            if event.memory_id:
                self.counters.last_success_id = event.memory_id
            if event.actor == REEMBED_ACTOR:
                self.counters.reembedded[event.scope] = self.counters.reembedded.get(event.scope, 0) + 1
        self.counters.last_success_at = time.time()

    async def _apply(self, todo: dict[str, tuple[Memory, events_pb2.MemoryEvent]], gone: set[str],
                     span_of: dict[str, Span] | None = None, looked: LookAhead | None = None,
                     models_done: asyncio.Event | None = None) -> None:
        """Bring the vector points of ``todo`` and ``gone`` in step with the graph, batched end to
        end: one embedding call, NER of the batch, the predecessor lookup (all three at the same
        time), one vector upsert, ONE guarded graph write of the embedding status (which also
        returns the records for the MEMORY_ENRICHED events, published pipelined), then the
        batched entity, link and status writes (:meth:`Enricher.finish_many`). A memory deleted
        (or rejected, or purged) after the batch read it loses the point just written and gets
        no event, hooks or later writes (:meth:`_drop_points_of_gone`). Hooks and the
        per-memory events run inside ``span_of[memory_id]`` when given (its message's span).
        Texts ``looked`` (the look-ahead) already embedded or NER'd are not done again;
        ``models_done`` is set when embedding and NER are over."""
        log.debug("enrichment batch", extra={"memories": len(todo), "gone": len(gone)})
        span_of = span_of or {}
        if self.vectors is None:
            await self._enrich_without_vectors(todo, span_of, looked)
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
                point.payload.get("embedding_model") not in (model, "caller")) or (
                event.actor == REEMBED_ACTOR and point.payload.get("embedding_model") != "caller")
            if not stale:
                continue
            if len(event.embedding) and memory.embedding_status != memory_pb2.EMBEDDING_STATUS_DONE:
                supplied[mid] = list(event.embedding)
            else:
                need_embed.append(memory)
        # Entities and LLM classification/summary must be done before the upsert (the payload
        # carries the type and entity tags).
        embed_ids = {m.id for m in need_embed} | set(supplied)
        enrich_now = [m for m, e in live.values() if e.content_changed or m.id in embed_ids
                      or m.enrichment_status != memory_pb2.ENRICHMENT_STATUS_DONE]
        dimension = self.provider.dimension if self.provider else None
        for mid, values in list(supplied.items()):
            if dimension is not None and len(values) != dimension:
                log.warning("caller embedding has the wrong size; embedding locally",
                            extra={"memory_id": mid, "size": len(values), "expected": dimension})
                del supplied[mid]
                need_embed.append(live[mid][0])
        if self.provider is None:
            need_embed = []
        # NER (and the LLM), the embedding and the predecessor lookup run at the same time:
        # spaCy and onnxruntime work in their own threads, the lookup is graph I/O.
        looked = looked or LookAhead()
        preparing = asyncio.ensure_future(self.enricher.prepare(enrich_now, looked.entities))
        embedding = {m.id for m in need_embed}
        getting = [mid for mid in live if mid in supplied or mid in embedding]
        linking = asyncio.ensure_future(
            self.graph.relations.link_predecessors(getting, time.time())) if getting else None
        try:
            vectors: dict[str, Any] = dict(supplied)
            ready = {m.id: looked.vectors[embedding_text(m)] for m in need_embed if embedding_text(m) in looked.vectors}
            vectors.update(ready)
            rest = [m for m in need_embed if m.id not in ready]
            if rest:
                matrix = await asyncio.to_thread(self.provider.embed, [embedding_text(m) for m in rest])
                vectors.update({m.id: matrix[i].tolist() for i, m in enumerate(rest)})
            prepared = await preparing
            if models_done is not None:
                models_done.set()
            previous = await linking if linking is not None else {}
        except BaseException:
            for task in (preparing, linking):
                if task is not None:
                    task.cancel()
            raise
        sparse = _sparse_vectors([live[mid][0] for mid in getting], previous)
        unembedded = [m.id for m in enrich_now if m.id not in vectors and m.id in existing]
        old_vectors = {p.id: p.vector for p in await self.vectors.retrieve(unembedded, with_vectors=True)} \
            if unembedded else {}
        points = []
        settle: list[tuple[str, str, dict[str, Any]]] = []
        for mid, (memory, _event) in live.items():
            if mid in vectors:
                memory.embedding_model = "caller" if mid in supplied else model
                memory.embedding_status = memory_pb2.EMBEDDING_STATUS_DONE
                points.append((mid, vectors[mid], build_payload(memory), sparse.get(mid)))
            elif mid in existing:
                memory.embedding_model = existing[mid].payload.get("embedding_model", model)
                await self.vectors.set_payload(mid, build_payload(memory))
                if memory.embedding_status != memory_pb2.EMBEDDING_STATUS_DONE:
                    # The point is current and its payload now is (PAYLOAD_PENDING: an edit of
                    # its tags, event time or state), or the status write was lost (a crash
                    # after the upsert): record it, or the pending sweep would resend this
                    # memory. A node edited since the payload was built gets PAYLOAD_PENDING
                    # (``built_from``) until that edit's event is applied.
                    settle.append((mid, memory.content_hash, {"embedding_status": "EMBEDDING_STATUS_DONE",
                                                              "embedding_model": memory.embedding_model}))
        if settle:
            await self.graph.memories.set_enrichment_many(
                settle, built_from={mid: live[mid][0] for mid, _, _ in settle})
        gone_since: set[str] = set()
        if points:
            await self.vectors.upsert_many(points)
            landed = await self.graph.memories.set_enrichment_many([
                (mid, live[mid][0].content_hash, {"embedding_status": "EMBEDDING_STATUS_DONE",
                                                   "embedding_model": live[mid][0].embedding_model})
                for mid, _, _, _ in points], return_nodes=True,
                built_from={mid: live[mid][0] for mid, _, _, _ in points})
            gone_since = await self._drop_points_of_gone([mid for mid, _, _, _ in points if mid not in landed])
            await self._publish_enriched([(current_of[mid], landed[mid]) for mid, _, _, _ in points if mid in landed],
                                         span_of)
        for mid, (memory, event) in live.items():
            if mid in gone_since:
                continue
            span = span_of.get(mid)
            with trace.use_span(span, end_on_exit=False) if span is not None else nullcontext():
                for hook in self.after_embed:
                    await hook(memory, event)
        order = {mid: position for position, mid in enumerate(live)}
        await self.enricher.finish_many(
            [(memory, prepared[memory.id], vectors.get(memory.id) or old_vectors.get(memory.id), order[memory.id])
             for memory, _ in live.values() if memory.id in prepared and memory.id not in gone_since],
            {mid: order[mid] for mid in vectors if mid not in gone_since})

    async def _drop_points_of_gone(self, ids: list[str]) -> set[str]:
        """Of ``ids`` — memories whose point this batch wrote but whose guarded status write
        did not land — those deleted, rejected or purged since the batch read them: their
        points are deleted again (one read and one delete, only when some write did not land)
        and their ids returned, so the batch writes nothing more for them. The delete's own
        event removes the point too, but only when it is processed after this upsert: another
        replica, or a purge, may have handled it before, and the point of a deleted memory
        then stayed. The others (an edit landed: the content hash moved) keep their point
        until the edit's own event embeds the new content."""
        if not ids:
            return set()
        current = await self.graph.memories.hydrate(ids, None)
        gone = {mid for mid in ids if mid not in current or current[mid].state in _GONE_STATES}
        if gone:
            await self.vectors.delete(sorted(gone))
            log.info("enrichment result dropped: the memory was deleted meanwhile",
                     extra={"memories": len(gone)})
        return gone

    async def _enrich_without_vectors(self, todo: dict[str, tuple[Memory, events_pb2.MemoryEvent]],
                                      span_of: dict[str, Span], looked: LookAhead | None = None) -> None:
        """Vectors disabled: the graph-only part of enrichment (entities, classification,
        summary, PRECEDED_BY links) for new or changed memories; ``embedding_status`` is left
        as it is (PENDING: no vector was written)."""
        enrich_now = [m for m, e in todo.values() if m.state not in _GONE_STATES and (
            e.content_changed or m.enrichment_status != memory_pb2.ENRICHMENT_STATUS_DONE)]
        if not enrich_now:
            return
        prepared, _ = await asyncio.gather(
            self.enricher.prepare(enrich_now, looked.entities if looked else None),
            self.graph.relations.link_predecessors([m.id for m in enrich_now], time.time()))
        await self.enricher.finish_many([(m, prepared[m.id], None, i) for i, m in enumerate(enrich_now)])

    async def _publish_enriched(self, written: list[tuple[Memory, dict[str, Any]]],
                                span_of: dict[str, Span]) -> None:
        """Append the MEMORY_ENRICHED audit event of each ``(record before, node properties
        right after the enrichment write)``: ``after`` is the record as it stands once the
        write landed (returned by that write, so edits made before it show), ``before`` the
        same record with the enrichment fields as they were. Published pipelined, each event's
        PRODUCER span under its memory's message span; failures go to the outbox (or are
        logged without a publisher: the audit event must not fail enrichment)."""
        events = []
        for before, props in written:
            after = node_to_memory(props)
            previous = Memory()
            previous.CopyFrom(after)
            previous.embedding_status = before.embedding_status
            previous.embedding_model = before.embedding_model
            events.append(make_event(events_pb2.EVENT_TYPE_MEMORY_ENRICHED, before=previous, after=after,
                                     actor="system:enrich"))
        if not events:
            return
        parents = [span_of.get(event.memory_id) for event in events]
        try:
            if self.publisher is not None:
                await self.publisher.publish_many(events, parents)
            else:
                failed = [e for e, error in zip(events, await self.bus.publish_events(events, parents=parents),
                                                strict=True) if error is not None]
                if failed:
                    raise RuntimeError(f"{len(failed)} events not acknowledged")
        except Exception as exc:  # noqa: BLE001 - the audit event must not fail enrichment
            log.warning("could not publish MEMORY_ENRICHED", extra={"events": len(events), "error": str(exc)})

    async def _retry_or_park(self, msg: Any, reason: str) -> None:
        self.counters.failures += 1
        metrics.enrichment_failures.add(1, self.metric_attributes)
        self.counters.last_error, self.counters.last_error_at = reason, time.time()
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
            metrics.enrichment_dead_lettered.add(1, self.metric_attributes)
            await msg.ack()
        except Exception:
            log.exception("could not park message")
        self.counters.failed += 1
        await self._mark_failed(msg.data)

    async def _mark_failed(self, data: bytes) -> None:
        """Record EMBEDDING_STATUS_FAILED on the memory of a parked event (when it decodes
        and the memory still holds the same content) whose vector point does not hold that
        content; a point that does (DONE, or PAYLOAD_PENDING: the pending sweep resends it)
        is kept as it is."""
        try:
            event = events_pb2.MemoryEvent.FromString(data)
        except Exception:  # noqa: BLE001 - undecodable: no memory to mark
            return
        memory = await self.graph.memories.get(event.memory_id, None) if event.memory_id else None
        if memory is not None and memory.embedding_status not in (memory_pb2.EMBEDDING_STATUS_DONE,
                                                                  memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING):
            await self.graph.memories.set_enrichment(memory.id, memory.content_hash,
                                            {"embedding_status": "EMBEDDING_STATUS_FAILED"})


def _sparse_vectors(memories: list[Memory], previous: dict[str, str]) -> dict[str, tuple[list[int], list[float]]]:
    """BM25 document weights of each memory's content plus its PRECEDED_BY predecessor's
    content (``previous``: id -> content) at ``text.CONTEXT_WEIGHT`` (measured on LoCoMo:
    recall@10 0.629 -> 0.713; docs/benchmarks.md)."""
    out = {}
    for memory in memories:
        weights = bm25_doc_weights(analyze(memory.content), analyze(previous.get(memory.id, "")))
        if weights:
            keys = sorted(weights)
            out[memory.id] = (keys, [weights[k] for k in keys])
    return out
