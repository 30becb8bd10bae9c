"""The event bus: NATS JetStream subjects, publishing and durable pull consumers.

Subjects (one place): ``<prefix>.memory.<event>`` for memory events, ``<prefix>.activity.<kind>``
for activity events (recalls, consolidation runs: ``automem.v1.ActivityEvent``, read only by the
event stream, :class:`EventTail`), ``<prefix>.dlq.<consumer>`` for poison messages. One durable
stream (``settings.stream_name``) holds all three; it is the
audit log and the feed for enrichment, kept for ``event_retention_days`` and up to
``event_retention_bytes`` (oldest removed first; readers say when history before the
retention is gone, see :class:`StreamRetention`). Payloads are ``automem.v1.MemoryEvent`` bytes.
``Nats-Msg-Id`` is the event id, so a republished event is de-duplicated by the server
(within ``DUPLICATE_WINDOW_SECONDS``; the window outlives a purge of the stream, so a restore
republishes with ids of its own: :meth:`Bus.publish_restored`);
``traceparent`` carries the W3C trace context. Each publish of a memory event records a
``messaging.client.operation.duration`` sample (automem/common/metrics.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import nats
from google.protobuf.message import DecodeError
from nats.js.api import DEFAULT_PREFIX as JS_API_PREFIX
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, DiscardPolicy, PubAck, StreamConfig
from nats.js.errors import NotFoundError
from opentelemetry import propagate, trace
from opentelemetry.trace import Span

from automem.common.errors import Unavailable
from automem.common.settings import DUPLICATE_WINDOW_SECONDS, Settings
from automem.common.telemetry import producer_span, record_publish
from automem.common.timeouts import StoreTimeout, effective_bound, store_call
from automem.v1 import event_stream_pb2, events_pb2

log = logging.getLogger(__name__)

#: The durable consumer that acts on the memory events (enrichment, automem/enrich/consumer.py).
#: A restore starts it after the restored events: they are history, already applied to the
#: restored graph (:meth:`Bus.start_consumer_after`).
ENRICH_DURABLE = "enrich"
#: Stream metadata a restore sets (:meth:`Bus.mark_history`): the sequence where the history
#: begins, and "true" when the restored history was partial.
HISTORY_BEGINS_KEY = "automem.history_begins_seq"
HISTORY_TRUNCATED_KEY = "automem.history_truncated"
_HISTORY_KEYS = (HISTORY_BEGINS_KEY, HISTORY_TRUNCATED_KEY)
#: Reads of where the stream begins (:meth:`Bus.retention`) while the retention keeps
#: removing its first message under the reader.
RETENTION_READS = 5

EVENT_SUFFIX: dict[int, str] = {
    events_pb2.EVENT_TYPE_MEMORY_CREATED: "created",
    events_pb2.EVENT_TYPE_MEMORY_UPDATED: "updated",
    events_pb2.EVENT_TYPE_MEMORY_DELETED: "deleted",
    events_pb2.EVENT_TYPE_MEMORY_SUPERSEDED: "superseded",
    events_pb2.EVENT_TYPE_RELATION_CREATED: "related",
    events_pb2.EVENT_TYPE_REVIEW_APPROVED: "approved",
    events_pb2.EVENT_TYPE_REVIEW_REJECTED: "rejected",
    events_pb2.EVENT_TYPE_MEMORY_ENRICHED: "enriched",
    events_pb2.EVENT_TYPE_MEMORY_PURGED: "purged",
    events_pb2.EVENT_TYPE_MEMORY_ARCHIVED: "archived",
}


class Subjects:
    """Subject names, derived from ``settings.subject_prefix``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.memory_all = f"{prefix}.memory.>"
        #: What enrichment consumes (:data:`ENRICH_DURABLE`): every memory event but its own
        #: ``enriched`` audit events, which it skipped after fetching, decoding and acking them
        #: — half of every batch it fetched (docs/benchmarks.md, "The enrich consumer reads
        #: only what it acts on").
        self.enrich_inputs = sorted(self.memory(t) for t in EVENT_SUFFIX
                                    if t != events_pb2.EVENT_TYPE_MEMORY_ENRICHED)
        self.dlq_all = f"{prefix}.dlq.>"
        self.activity_all = f"{prefix}.activity.>"

    def memory(self, event_type: int) -> str:
        """Subject of a memory event, e.g. ``automem.v1.memory.created``."""
        return f"{self.prefix}.memory.{EVENT_SUFFIX[event_type]}"

    def activity(self, kind: str) -> str:
        """Subject of an activity event, e.g. ``automem.v1.activity.memory_recall`` for the
        kind ``memory.recall``."""
        return f"{self.prefix}.activity.{kind.replace('.', '_')}"

    def is_activity(self, subject: str) -> bool:
        """True when ``subject`` is an activity subject."""
        return subject.startswith(self.activity_all[:-1])

    def dlq(self, consumer: str) -> str:
        """Dead-letter subject of a consumer."""
        return f"{self.prefix}.dlq.{consumer}"


Handler = Callable[[events_pb2.MemoryEvent, Any], Awaitable[None]]


@dataclass(frozen=True)
class StreamRetention:
    """The retained part of the event stream.

    ``first_seq``: sequence of the oldest event still held; events before it were removed
    (by retention or a purge) when it is above 1 (``trimmed``). ``first_time``: its stream
    time (epoch seconds; None when the stream is empty). ``max_age_seconds`` / ``max_bytes``:
    the limits in force (0 / -1 = unlimited).
    """

    first_seq: int
    first_time: float | None
    max_age_seconds: float
    max_bytes: int
    #: Sequence of the newest event (0 when nothing was ever published).
    last_seq: int = 0
    #: Sequence where the stream's history begins: 1, or after a restore the first event it
    #: republished (the purge before it leaves the sequence where it was; :meth:`Bus.mark_history`).
    history_begins_seq: int = 1
    #: The restored history was itself partial (the backup said ``events_truncated``).
    history_truncated: bool = False

    @property
    def trimmed(self) -> bool:
        """True when events of the history no longer exist: some before ``first_seq`` were
        removed (by retention or a purge), or the restored history lacked older ones."""
        return self.history_truncated or self.first_seq > self.history_begins_seq


#: What nats-py reports while it cannot reach the server (:meth:`Bus._on_error`).
_CONNECTION_ERRORS = (OSError, TimeoutError, nats.errors.NoServersError, nats.errors.ConnectionClosedError,
                      nats.errors.StaleConnectionError, nats.errors.UnexpectedEOF)


def without_credentials(url: str) -> str:
    """``url`` without the user and password it may carry (``nats://u:p@host`` → ``nats://host``)."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def _stream_time(value: Any) -> float | None:
    """Epoch seconds of a JetStream message time (RFC 3339 with nanoseconds, as the server
    sends it in STREAM.MSG.GET)."""
    if not value:
        return None
    text = str(value).replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # keep microseconds: datetime takes at most six digits
        digits = "".join(ch for ch in rest if ch.isdigit())
        zone = rest[len(digits):]
        text = f"{head}.{digits[:6]}{zone}"
    return datetime.fromisoformat(text).timestamp()


class Bus:
    """A NATS connection with the JetStream context and the automem stream.

    Args:
        settings: uses ``nats_url``, ``stream_name``, ``subject_prefix``, ``max_deliver``,
            ``ack_wait_seconds``, ``store_timeout_seconds`` (the bound of every call to NATS:
            automem/common/timeouts.py; StoreTimeout when it passes).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.subjects = Subjects(settings.subject_prefix)
        self.nc: nats.NATS | None = None
        self.js: Any = None
        #: Seconds one call to NATS may take (0 = unbounded).
        self.timeout = settings.store_timeout_seconds
        #: Serialises the sending half of :meth:`publish_events` (nats-py sets up its async-reply
        #: subscription on the first ``publish_async``; two first calls at once would race).
        self._send_lock = asyncio.Lock()
        #: True from the first failed (re)connection attempt until NATS is reachable again.
        self._outage = False

    async def _on_error(self, exc: Exception) -> None:
        """nats-py's error callback (its default logs ERROR with a traceback, every attempt:
        twice a second per process during an outage). A connection failure is one WARNING
        line per outage (then DEBUG until :meth:`_on_reconnected`); any other error one
        ERROR line each time."""
        if isinstance(exc, _CONNECTION_ERRORS):
            (log.debug if self._outage else log.warning)(
                "NATS unreachable; reconnecting every 0.5 s", extra={"error": repr(exc)})
            self._outage = True
        else:
            log.error("NATS error", extra={"error": repr(exc)})

    async def _on_reconnected(self) -> None:
        """nats-py's reconnected callback: ends the outage :meth:`_on_error` reported."""
        if self._outage:
            log.info("NATS reachable again")
        self._outage = False

    async def connect(self) -> None:
        """Connect and create (or update) the stream. Once connected, a lost connection is
        retried for ever (every 0.5 s); the first one is not.

        Raises:
            Unavailable: NATS at ``nats_url`` accepted no connection within
                ``store_timeout_seconds`` (5 s when unbounded); the message names NATS_URL.
            StoreTimeout: the stream's creation did not answer in time.
        """
        nc = nats.NATS()
        bound = effective_bound(self.timeout) or 5.0
        try:
            async with store_call("NATS", bound):
                await nc.connect(self.settings.nats_url, name="automem", max_reconnect_attempts=-1,
                                 reconnect_time_wait=0.5, token=self.settings.nats_token or None,
                                 error_cb=self._on_error, reconnected_cb=self._on_reconnected)
        except (StoreTimeout, OSError, nats.errors.Error) as exc:
            last = nc.last_error or exc
            with contextlib.suppress(Exception):
                await nc.close()  # ends its connection attempts
            # Chained to nats-py's last error only (its reason for automem up's one line).
            raise Unavailable(f"NATS at {without_credentials(self.settings.nats_url)} cannot be reached within "
                              f"{bound:g}s (NATS_URL): {last!r}") from (last if isinstance(last, BaseException) else None)
        self.nc = nc
        self.js = self.nc.jetstream(timeout=effective_bound(self.timeout) or 5.0)
        config = self.stream_config()
        async with self.bounded():
            try:
                info = await self.js.stream_info(self.settings.stream_name)
                # A restore's mark of where the history begins outlives a restart.
                config.metadata = {k: v for k, v in (info.config.metadata or {}).items() if k in _HISTORY_KEYS} or None
                await self.js.update_stream(config)
            except NotFoundError:
                await self.js.add_stream(config)

    async def ensure_stream(self) -> bool:
        """Create the stream (:meth:`stream_config`) when NATS holds none of that name: a NATS
        that lost its store (a new pod without its volume) answers every publish with "no
        response from stream" until then. Returns True when it was created. Raises StoreTimeout
        when NATS does not answer in time, and what nats-py raises when it is unreachable."""
        async with self.bounded():
            try:
                await self.js.stream_info(self.settings.stream_name)
                return False
            except NotFoundError:
                await self.js.add_stream(self.stream_config())
                log.warning("event stream was missing: created again", extra={"stream": self.settings.stream_name})
                return True

    async def ensure_consumer(self, durable: str) -> bool:
        """:meth:`ensure_stream`, then create the durable consumer ``durable``
        (:meth:`consumer_config`, as :meth:`pull_subscribe` does at start) when the stream has
        none of that name; a subscription bound to it before fetches from the new one. Returns
        True when either was created. Raises as :meth:`ensure_stream`."""
        created = await self.ensure_stream()
        async with self.bounded():
            try:
                await self.js.consumer_info(self.settings.stream_name, durable)
                return created
            except NotFoundError:
                await self.js.add_consumer(self.settings.stream_name, config=self.consumer_config(durable))
                log.warning("durable consumer was missing: created again", extra={"consumer": durable})
                return True

    def bounded(self):
        """Bound the body's NATS calls to ``store_timeout_seconds`` (an async context manager;
        StoreTimeout, an Unavailable, when it passes; automem/common/timeouts.py)."""
        return store_call("NATS", self.timeout)

    def stream_config(self) -> StreamConfig:
        """The stream's configuration: its subjects, the de-duplication window and the
        retention limits from settings (``event_retention_days`` → ``max_age``,
        ``event_retention_bytes`` → ``max_bytes``, 0 = unlimited; the oldest events go first)."""
        return StreamConfig(
            name=self.settings.stream_name,
            subjects=[self.subjects.memory_all, self.subjects.dlq_all, self.subjects.activity_all],
            duplicate_window=DUPLICATE_WINDOW_SECONDS,
            max_age=self.settings.event_retention_days * 86400.0,
            max_bytes=self.settings.event_retention_bytes or -1,
            discard=DiscardPolicy.OLD,
        )

    async def retention(self) -> StreamRetention:
        """Where the stream's retained history begins (see :class:`StreamRetention`)."""
        async with self.bounded():
            for _ in range(RETENTION_READS):
                info = await self.js.stream_info(self.settings.stream_name)
                first_time = None
                if not info.state.messages:
                    break
                try:
                    first_time = _stream_time(
                        (await self.js.get_msg(self.settings.stream_name, info.state.first_seq)).time)
                    break
                except NotFoundError:
                    # The retention removed the first message between the two reads (writes
                    # going on under ``event_retention_bytes``): read where it begins now. A
                    # trimmed notice without its time was the result (CI, 2026-12-07).
                    continue
        marks = info.config.metadata or {}
        begins = marks.get(HISTORY_BEGINS_KEY, "1")
        return StreamRetention(first_seq=int(info.state.first_seq), first_time=first_time,
                               max_age_seconds=float(info.config.max_age or 0.0),
                               max_bytes=int(info.config.max_bytes or -1), last_seq=int(info.state.last_seq),
                               history_begins_seq=int(begins) if begins.isdigit() else 1,
                               history_truncated=marks.get(HISTORY_TRUNCATED_KEY) == "true")

    async def mark_history(self, begins_seq: int, truncated: bool) -> None:
        """Record in the stream's metadata (JetStream stream ``metadata``, nats-server ≥ 2.10)
        that its history begins at sequence ``begins_seq`` and whether it was ``truncated``
        before (a restore: automem/common/backup.py ``restore_records``), so that
        :meth:`retention` does not count the events a forced restore purged as lost.
        Raises what nats-py raises on an unreachable server."""
        async with self.bounded():
            info = await self.js.stream_info(self.settings.stream_name)
            config = info.config
            config.metadata = {**{k: v for k, v in (config.metadata or {}).items() if not k.startswith("_nats")},
                               HISTORY_BEGINS_KEY: str(int(begins_seq)),
                               HISTORY_TRUNCATED_KEY: "true" if truncated else "false"}
            await self.js.update_stream(config)

    @property
    def connected(self) -> bool:
        """True when the NATS connection is up (the client's flag: a server that stopped
        answering on an open TCP connection still reads connected; :meth:`reachable` asks it)."""
        return bool(self.nc and self.nc.is_connected)

    async def reachable(self, timeout: float) -> bool:
        """True when the server answers a round trip within ``timeout`` seconds (a request to
        JetStream's account info, ``$JS.API.INFO``); False when it does not, or the client is
        not connected. Not nats-py's ``flush`` (PING/PONG): after a flush timed out, the late
        PONG broke the client's read loop and the connection stayed down after the server
        came back."""
        if not self.connected or self.js is None:
            return False
        try:
            async with asyncio.timeout(timeout):
                await self.nc.request(f"{JS_API_PREFIX}.INFO", b"", timeout=timeout)
        except Exception:  # noqa: BLE001 - any failure of the round trip is "not reachable"
            return False
        return True

    async def publish_event(self, event: events_pb2.MemoryEvent, timeout: float | None = None) -> None:
        """Publish ``event`` on its subject with ``Nats-Msg-Id`` = event id, inside a PRODUCER
        span whose context goes in the ``traceparent`` header, waiting ``timeout`` seconds
        (default the store bound) for the stream's acknowledgement. Raises on failure (the
        caller puts it in the outbox)."""
        timeout = timeout or effective_bound(self.timeout) or 5.0
        if self.js is None:
            raise ConnectionError("bus not connected")
        subject = self.subjects.memory(event.type)
        start = time.perf_counter()
        try:
            with producer_span(subject, event.event_id):
                headers: dict[str, str] = {"Nats-Msg-Id": event.event_id}
                propagate.inject(headers)
                await self.js.publish(subject, event.SerializeToString(), headers=headers, timeout=timeout)
        except BaseException as exc:
            record_publish(subject, time.perf_counter() - start, exc)
            raise
        record_publish(subject, time.perf_counter() - start)

    async def publish_events(self, events: Sequence[events_pb2.MemoryEvent], timeout: float | None = None,
                             parents: Sequence[Span | None] | None = None) -> list[BaseException | None]:
        """Publish many events pipelined: every event is sent (in order, each in its PRODUCER
        span with ``Nats-Msg-Id`` and ``traceparent``, as :meth:`publish_event`; the span is a
        child of ``parents[i]`` when given, else of the current span) before the stream's
        acknowledgements are awaited together, so a batch costs one round trip instead of one
        per event. Returns, per event, None when the stream acknowledged it or the error
        (``TimeoutError`` when no acknowledgement came within ``timeout`` seconds); the caller
        puts the failed ones in the outbox (``timeout`` default: the store bound). Raises
        ConnectionError when not connected."""
        timeout = timeout or effective_bound(self.timeout) or 5.0
        if self.js is None:
            raise ConnectionError("bus not connected")
        results: list[BaseException | None] = [None] * len(events)
        futures: dict[int, asyncio.Future] = {}
        start = time.perf_counter()
        async with self._send_lock:
            for i, event in enumerate(events):
                subject = self.subjects.memory(event.type)
                parent = parents[i] if parents is not None else None
                with (trace.use_span(parent, end_on_exit=False) if parent is not None else nullcontext()), \
                        producer_span(subject, event.event_id):
                    headers: dict[str, str] = {"Nats-Msg-Id": event.event_id}
                    propagate.inject(headers)
                    try:
                        futures[i] = await self.js.publish_async(subject, event.SerializeToString(), headers=headers)
                    except Exception as exc:  # noqa: BLE001 - reported per event
                        results[i] = exc
        if futures:
            _, pending = await asyncio.wait(futures.values(), timeout=timeout)
            for i, future in futures.items():
                if future in pending:
                    future.cancel()
                    results[i] = TimeoutError(f"no acknowledgement within {timeout}s")
                elif future.exception() is not None:
                    results[i] = future.exception()
        elapsed = time.perf_counter() - start  # pipelined: every event waited for the batch's acks
        for event, error in zip(events, results, strict=True):
            record_publish(self.subjects.memory(event.type), elapsed, error)
        return results

    async def publish_restored(self, event: events_pb2.MemoryEvent, msg_id: str,
                               timeout: float | None = None) -> PubAck:
        """Publish a restored ``event`` (automem/common/backup.py ``restore_records``) on its
        subject with ``Nats-Msg-Id`` = ``msg_id`` instead of the event id, waiting ``timeout``
        seconds (default the store bound) for the stream's acknowledgement, and return it
        (``seq``: the stream sequence; ``duplicate``: true when the server stored nothing).

        Not the event id: the stream's de-duplication window (``DUPLICATE_WINDOW_SECONDS``)
        survives ``purge_stream``, so a restore within the window of an earlier publish of the
        same events (a forced restore right after another) would be de-duplicated whole. The
        caller gives an id unique to the restore and the record. Records a publish duration
        sample as :meth:`publish_event` (no PRODUCER span: a restore is not a write). Raises
        ConnectionError when not connected, and what nats-py raises when the stream does not
        acknowledge (timeout, no responders)."""
        timeout = timeout or effective_bound(self.timeout) or 5.0
        if self.js is None:
            raise ConnectionError("bus not connected")
        subject = self.subjects.memory(event.type)
        start = time.perf_counter()
        try:
            ack = await self.js.publish(subject, event.SerializeToString(), headers={"Nats-Msg-Id": msg_id},
                                        timeout=timeout)
        except BaseException as exc:
            record_publish(subject, time.perf_counter() - start, exc)
            raise
        record_publish(subject, time.perf_counter() - start)
        return ack

    async def publish_activity(self, event: event_stream_pb2.ActivityEvent, timeout: float | None = None) -> None:
        """Publish an activity event on its subject (:meth:`Subjects.activity`) with
        ``Nats-Msg-Id`` = event id, waiting ``timeout`` seconds (default the store bound) for
        the stream's acknowledgement. Raises on failure; there is no outbox for activity (a
        lost recall notice is not a lost write)."""
        timeout = timeout or effective_bound(self.timeout) or 5.0
        if self.js is None:
            raise ConnectionError("bus not connected")
        await self.js.publish(self.subjects.activity(event.kind), event.SerializeToString(),
                              headers={"Nats-Msg-Id": event.event_id}, timeout=timeout)

    async def tail(self, start_seq: int) -> EventTail:
        """An :class:`EventTail` reading memory and activity events from stream sequence
        ``start_seq`` on (≥ 1; a sequence not yet written is waited for)."""
        tail = EventTail(self, start_seq)
        await tail.open()
        return tail

    async def park(self, consumer: str, data: bytes, headers: dict[str, str] | None, reason: str) -> None:
        """Put a poison message on the consumer's dead-letter subject."""
        hdrs = dict(headers or {})
        hdrs.pop("Nats-Msg-Id", None)
        hdrs["Automem-Dlq-Reason"] = reason[:500]
        async with self.bounded():
            await self.js.publish(self.subjects.dlq(consumer), data, headers=hdrs)

    def consumer_filter(self, durable: str) -> list[str]:
        """The subjects the durable consumer ``durable`` reads by default: the enrichment
        consumer's inputs (:attr:`Subjects.enrich_inputs`) for :data:`ENRICH_DURABLE`, every
        memory event for any other."""
        return self.subjects.enrich_inputs if durable == ENRICH_DURABLE else [self.subjects.memory_all]

    def consumer_config(self, durable: str, filter_subject: str | None = None,
                        start_seq: int | None = None) -> ConsumerConfig:
        """The configuration of a durable pull consumer: explicit acks, bounded redelivery,
        every message of ``filter_subject`` (default: :meth:`consumer_filter`) from the start
        of the stream, or from stream sequence ``start_seq`` when given."""
        subjects = [filter_subject] if filter_subject else self.consumer_filter(durable)
        return ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL if start_seq is None else DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start_seq,
            max_deliver=self.settings.max_deliver,
            ack_wait=self.settings.ack_wait_seconds,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
        )

    async def start_consumer_after(self, durable: str, last_seq: int) -> None:
        """(Re)create the durable consumer ``durable`` so that it starts at stream sequence
        ``last_seq + 1``: what the stream holds up to ``last_seq`` is never delivered to it.
        An existing consumer of that name is deleted first. :meth:`pull_subscribe` binds to it
        later as it is (its configuration is :meth:`consumer_config`'s)."""
        await self.stop_consumer(durable)
        async with self.bounded():
            await self.js.add_consumer(self.settings.stream_name,
                                       config=self.consumer_config(durable, start_seq=last_seq + 1))

    async def stop_consumer(self, durable: str) -> None:
        """Delete the durable consumer ``durable`` (nothing when there is none): nothing is
        delivered to it until :meth:`start_consumer_after` makes it again (its subscribers'
        fetches fail meanwhile and back off; automem/enrich/consumer.py ``_fetch``)."""
        async with self.bounded():
            try:
                await self.js.delete_consumer(self.settings.stream_name, durable)
            except NotFoundError:
                pass

    async def pull_subscribe(self, durable: str, filter_subject: str | None = None) -> Any:
        """A durable pull subscription with explicit acks and bounded redelivery
        (:meth:`consumer_config`). An existing consumer of that name is bound with its
        position, pending acks and settings, its subjects set to this version's when they
        differ (a consumer an older version created read every memory event: JetStream
        updates the filter in place)."""
        config = self.consumer_config(durable, filter_subject)
        subjects = [filter_subject] if filter_subject else self.consumer_filter(durable)
        stream = self.settings.stream_name
        async with self.bounded():
            try:
                found = (await self.js.consumer_info(stream, durable)).config
            except NotFoundError:
                found = None
            if found is not None and sorted(found.filter_subjects or [found.filter_subject]) != sorted(subjects):
                found.filter_subject = subjects[0] if len(subjects) == 1 else None
                found.filter_subjects = subjects if len(subjects) > 1 else None
                await self.js.add_consumer(stream, config=found)
                log.info("consumer subjects updated", extra={"consumer": durable, "subjects": subjects})
            return await self.js.pull_subscribe(subjects[0], durable=durable, stream=stream, config=config)

    async def events_for(self, memory_id: str | None = None, limit: int = 10_000,
                         since: float | None = None) -> list[events_pb2.MemoryEvent]:
        """Every memory event on the stream (oldest first), optionally of one memory, and
        optionally only those the stream stored at or after ``since`` (epoch seconds); at most
        ``limit`` (the oldest). Used by history and review; a backup reads the whole stream
        with :meth:`stream_events` instead, which holds one batch at a time.

        Reads with an ephemeral pull consumer of the memory subjects (:meth:`_read_events`).
        With ``memory_id``, a message is decoded only when the id's bytes occur in it (a
        protobuf string field holds its UTF-8 bytes as they are, so no event of the memory is
        skipped), and ``since`` lets the server start at that time (JetStream's
        ``DeliverPolicy.BY_START_TIME``) instead of the stream's first message: a memory's
        history read cost the whole stream, ~1 s at 10,000 memories (docs/benchmarks.md,
        "A memory's history without the whole stream"); an old memory's still costs the
        stream since its creation ("An old memory's history", where subjects per bucket of
        ids were tried and withdrawn). Raises StoreTimeout (Unavailable) when NATS does not
        answer.
        """
        last = await self._last_seq()
        return [event async for _, event in
                self._read_events([self.subjects.memory_all], since, last, memory_id, limit)][:limit]

    async def stream_events(self) -> AsyncIterator[events_pb2.MemoryEvent]:
        """Every memory event the stream holds when the read begins, oldest first, as it is
        read: one fetched batch (:data:`READ_BATCH` messages) in memory at a time, whatever
        the stream's size (a backup's events; a list of them all grew with the stream,
        ~1–2 KB an event). Raises as :meth:`events_for`."""
        last = await self._last_seq()
        async for _, event in self._read_events([self.subjects.memory_all], None, last, None, 10**12):
            yield event

    async def _last_seq(self) -> int:
        """The stream's last sequence now (0 when it is empty)."""
        async with self.bounded():
            return (await self.js.stream_info(self.settings.stream_name)).state.last_seq

    async def _read_events(self, subjects: list[str], since: float | None, last: int, memory_id: str | None,
                           limit: int) -> AsyncIterator[tuple[int, events_pb2.MemoryEvent]]:
        """(stream sequence, event) of ``subjects``' events (:meth:`events_for`), oldest first;
        with ``memory_id`` only that memory's (its own and relations at either end).

        An ephemeral pull consumer without acknowledgements (as :class:`EventTail`'s) is made
        for the read and deleted after it (or by the server after
        :data:`TAIL_INACTIVE_SECONDS` when this process died). Its creation reply counts the
        messages it holds (``num_pending``); the read fetches them in batches of
        :data:`READ_BATCH` and ends when it has them all, at stream sequence ``last`` (the
        stream's last when the read began: a reader does not chase events published while it
        reads) or after ``limit`` events: it never waits for a message that is not there (an
        ordered push consumer ended only on a message's own pending count, or after 2 s
        without a message, and a history test once waited that out read after read; the
        pull consumer has no reset logic of its own to go wrong). Messages removed while it
        reads (a purge, the retention) end it at the consumer's own count. Raises StoreTimeout
        (Unavailable) when NATS does not answer the consumer's creation, or stops delivering
        for :data:`READ_FETCH_SECONDS` while the consumer still holds messages: a history is
        never returned cut short as if it were whole. A read cancelled at any point (a
        caller's deadline) removes its consumer too.
        """
        wanted = memory_id.encode() if memory_id else None
        stream = self.settings.stream_name
        name = f"read-{uuid.uuid4().hex}"
        config = ConsumerConfig(
            name=name, ack_policy=AckPolicy.NONE, inactive_threshold=TAIL_INACTIVE_SECONDS, mem_storage=True,
            deliver_policy=DeliverPolicy.ALL,
            filter_subject=subjects[0] if len(subjects) == 1 else None,
            filter_subjects=subjects if len(subjects) > 1 else None,
        )
        if since is not None:
            config.deliver_policy = DeliverPolicy.BY_START_TIME
            config.opt_start_time = datetime.fromtimestamp(max(since, 0.0), UTC).isoformat().replace("+00:00", "Z")
        sub = None
        made = False
        try:
            try:
                async with self.bounded():
                    info = await self.js.add_consumer(stream, config)
                made = True
            except asyncio.CancelledError:
                made = True  # the server may have made it, its reply lost with the cancelled call
                raise
            pending = int(info.num_pending or 0)
            if pending == 0:
                return
            async with self.bounded():
                sub = await self.js.pull_subscribe_bind(consumer=name, stream=stream)
            added = 0
            while pending > 0 and added < limit:
                try:
                    msgs = await sub.fetch(batch=min(pending, READ_BATCH), timeout=READ_FETCH_SECONDS)
                except (TimeoutError, nats.errors.TimeoutError):
                    # Fewer than counted: removed meanwhile (a purge, the retention) when the
                    # consumer has nothing left, else NATS stopped delivering — an error, not
                    # a history silently cut short.
                    async with self.bounded():
                        left = (await self.js.consumer_info(stream, name)).num_pending
                    if left:
                        raise StoreTimeout("NATS", READ_FETCH_SECONDS) from None
                    break
                for msg in msgs:
                    pending -= 1
                    seq = int(msg.metadata.sequence.stream)
                    event = None
                    if wanted is None or wanted in msg.data:
                        try:
                            event = events_pb2.MemoryEvent.FromString(msg.data)
                        except DecodeError:  # a poison message (parked by enrichment): not an event
                            log.warning("undecodable message on the event stream skipped", extra={"seq": seq})
                    # An empty id is no memory's (an event that is not a relation's has empty ends).
                    if event is not None and (memory_id is None or memory_id and (
                        event.memory_id == memory_id or event.relation.source_id == memory_id
                            or event.relation.target_id == memory_id)):
                        added += 1
                        yield seq, event
                    if seq >= last or added >= limit:
                        pending = 0
                        break
        finally:
            if made:
                # Shielded: a read cut off by its caller's deadline still removes its consumer
                # (they stayed for TAIL_INACTIVE_SECONDS, one per cancelled read; break-it round M).
                await asyncio.shield(self._remove_read(name, sub))

    async def _remove_read(self, name: str, sub: Any) -> None:
        """Unsubscribe ``sub`` (when bound) and delete the read consumer ``name``; best effort:
        the server removes it after :data:`TAIL_INACTIVE_SECONDS` anyway."""
        try:
            if sub is not None:
                await sub.unsubscribe()
            async with self.bounded():
                await self.js.delete_consumer(self.settings.stream_name, name)
        except Exception as exc:  # noqa: BLE001 - gone already, or NATS down: the server removes it
            log.debug("event read consumer not removed", extra={"consumer": name, "error": repr(exc)})

    async def scrub(self, doomed: Callable[[str, bytes], bool], dry_run: bool = False) -> int:
        """Delete from the stream every message (memory, activity and dead-letter subjects)
        for which ``doomed(subject, payload bytes)`` is true; returns how many (with
        ``dry_run``, how many would go; nothing is deleted). The purge's stream step
        (automem/ingest/purge.py).

        Reads the whole stream once with an ephemeral ordered consumer, then deletes by
        sequence (JetStream ``STREAM.MSG.DELETE``, nats-py ``delete_msg``: the server
        overwrites the message in its store, the stream keeps the other messages and their
        sequences). The stream allows it: :meth:`stream_config` sets no ``deny_delete``.
        Raises StoreTimeout/Unavailable when NATS does not answer (the purge stays pending)."""
        async with self.bounded():
            info = await self.js.stream_info(self.settings.stream_name)
        if info.state.messages == 0:
            return 0
        doomed_seqs: list[int] = []
        async with self.bounded():  # right after a NATS restart the consumer's creation can stall
            sub = await self.js.subscribe(f"{self.subjects.prefix}.>", ordered_consumer=True,
                                          stream=self.settings.stream_name)
        try:
            last = info.state.last_seq
            while True:
                try:
                    msg = await sub.next_msg(timeout=2.0)
                except (TimeoutError, nats.errors.TimeoutError):
                    break
                seq = msg.metadata.sequence.stream
                if doomed(msg.subject, msg.data):
                    doomed_seqs.append(seq)
                if seq >= last:
                    break
        finally:
            await sub.unsubscribe()
        if dry_run:
            return len(doomed_seqs)
        for seq in doomed_seqs:
            async with self.bounded():
                try:
                    await self.js.delete_msg(self.settings.stream_name, seq)
                except NotFoundError:  # gone meanwhile (retention, or a purge before)
                    pass
        return len(doomed_seqs)

    async def close(self) -> None:
        """Drain and close the connection."""
        if self.nc and not self.nc.is_closed:
            try:
                await self.nc.drain()
            except Exception:  # noqa: BLE001 - closing anyway
                await self.nc.close()


class EventTail:
    """Reads the stream's memory and activity events in order from a start sequence, as
    fast as its reader asks (an ephemeral pull consumer, no acknowledgements: nothing is
    buffered beyond one fetched batch, so a slow reader holds back nothing but itself).
    The consumer is removed by :meth:`close`, or by the server after
    :data:`TAIL_INACTIVE_SECONDS` without a fetch when its reader died.

    Used by ReviewService.StreamMemoryEvents (automem/ingest/review.py).
    """

    def __init__(self, bus: Bus, start_seq: int) -> None:
        self.bus = bus
        self.start_seq = max(int(start_seq), 1)
        self.sub: Any = None
        self.name = ""

    async def open(self) -> None:
        """Create the consumer. StoreTimeout (Unavailable) when NATS does not answer."""
        subjects = self.bus.subjects
        stream = self.bus.settings.stream_name
        self.name = f"tail-{uuid.uuid4().hex}"
        config = ConsumerConfig(
            name=self.name, deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=self.start_seq,
            ack_policy=AckPolicy.NONE, inactive_threshold=TAIL_INACTIVE_SECONDS,
            filter_subjects=[subjects.memory_all, subjects.activity_all], mem_storage=True,
        )
        async with self.bus.bounded():
            await self.bus.js.add_consumer(stream, config)
            self.sub = await self.bus.js.pull_subscribe_bind(consumer=self.name, stream=stream)

    async def fetch(self, batch: int, wait: float) -> list[tuple[int, str, bytes]]:
        """The next events, at most ``batch``, as (stream sequence, subject, payload bytes),
        oldest first; [] when none came within ``wait`` seconds."""
        try:
            msgs = await self.sub.fetch(batch=batch, timeout=wait)
        except (TimeoutError, nats.errors.TimeoutError):
            return []
        return [(int(m.metadata.sequence.stream), m.subject, m.data) for m in msgs]

    async def close(self) -> None:
        """Remove the consumer (best effort: the server removes it anyway when inactive)."""
        if self.sub is None:
            return
        sub, self.sub = self.sub, None
        try:
            await sub.unsubscribe()
            async with self.bus.bounded():
                await self.bus.js.delete_consumer(self.bus.settings.stream_name, self.name)
        except Exception as exc:  # noqa: BLE001 - gone already, or NATS down: the server removes it
            log.debug("event tail consumer not removed", extra={"consumer": self.name, "error": repr(exc)})


#: Seconds an event-stream consumer survives without a fetch (its reader died).
TAIL_INACTIVE_SECONDS = 60.0

#: Messages a history or backup read (:meth:`Bus.events_for`) fetches per request.
READ_BATCH = 512
#: Seconds a history or backup read waits for a fetch that the server should answer at once.
READ_FETCH_SECONDS = 2.0
