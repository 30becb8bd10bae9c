"""The gRPC transport: automem's IngestService, RecallService and ReviewService over one
``grpc.aio`` channel, answers as the dataclasses of :mod:`automem_client.models`.

Retries are gRPC's own (the channel's service config, :func:`service_config`): reads, and
the writes that carry an idempotency key (store, batch store, supersede; the client always
sends one), are retried on UNAVAILABLE with exponential backoff; the service answers a
repeated key with the first memory (protos/automem/v1/ingest_service.proto
``CreateMemoryRequest.idempotency_key``), so a retried store never stores twice. Updates,
deletes and associations are not retried: a second attempt could act on a newer version.

Closing: :meth:`GrpcTransport.close` closes the channel, which cancels the calls in flight;
those raise :class:`~automem_client.errors.ClientClosed` (grpc.aio would raise a bare
``asyncio.CancelledError`` in the caller's task, as if someone had cancelled it), and an open
:meth:`GrpcTransport.events` stream ends. Only a real cancellation of the caller's task
still raises CancelledError.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, tzinfo
from typing import Any, NamedTuple

import grpc
from google.protobuf import field_mask_pb2, timestamp_pb2

from automem_client import _checks as check
from automem_client import errors
from automem_client._proto.automem.v1 import (
    event_stream_pb2,
    ingest_service_pb2,
    ingest_service_pb2_grpc,
    memory_pb2,
    recall_service_pb2,
    recall_service_pb2_grpc,
    review_service_pb2_grpc,
)
from automem_client._times import instant, zone
from automem_client.models import (
    EVENT_NAMES,
    BatchStored,
    Health,
    HistoryEvent,
    HistoryPage,
    Memory,
    MemoryInput,
    MemoryVersion,
    Page,
    RecallResult,
    RelatedMemory,
    Relation,
    ScoredMemory,
    Stored,
    StreamEvent,
    Superseded,
    TimeLike,
    VersionDiff,
    VersionsPage,
    _ts,
)

#: CreateRelationRequest's proto paths by the arguments of ``associate`` that give them.
ASSOCIATE_ARGUMENTS = {"relation.source_id": "memory1_id", "relation.target_id": "memory2_id",
                       "relation.type": "type", "type_name": "type", "relation.strength": "strength",
                       "relation.reason": "reason"}

#: Methods retried on UNAVAILABLE: every read, and the writes sent with an idempotency key.
RETRIED_READS = ("automem.v1.RecallService",)
RETRIED_WRITES = (("automem.v1.IngestService", "CreateMemory"), ("automem.v1.IngestService", "BatchCreateMemories"),
                  ("automem.v1.IngestService", "SupersedeMemory"),
                  ("automem.v1.ReviewService", "ListMemoryEvents"))


def service_config(max_attempts: int = 4, initial_backoff: float = 0.2, max_backoff: float = 3.0) -> str:
    """The channel's service config (gRPC's retry design, A6): ``max_attempts`` tries in all
    (1 = no retry; gRPC caps it at 5), backoff from ``initial_backoff`` seconds doubling up
    to ``max_backoff``, on UNAVAILABLE only."""
    if max_attempts <= 1:
        return json.dumps({"methodConfig": []})
    policy = {"maxAttempts": max_attempts, "initialBackoff": f"{initial_backoff}s", "maxBackoff": f"{max_backoff}s",
              "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
    names = [{"service": s} for s in RETRIED_READS] + [{"service": s, "method": m} for s, m in RETRIED_WRITES]
    return json.dumps({"methodConfig": [{"name": names, "retryPolicy": policy}]})


def _timestamp(value: TimeLike, name: str, *, tz: tzinfo = UTC, bound: bool = False,
               upper: bool = False) -> timestamp_pb2.Timestamp:
    """The Timestamp of the instant ``value`` means over REST (:func:`._times.instant`: naive
    text and dates in ``tz``, a recall's ``end`` date its last instant); InvalidArgument
    naming ``name`` for text that is not ISO 8601 or a time outside the years 1-9999."""
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(instant(value, name, tz=tz, bound=bound, upper=upper))
    return stamp


_TIMES = {"timestamp": "event_time", "t_valid": "valid_from", "t_invalid": "valid_to"}

#: update() fields whose None has no proto form, and the message each is refused with before
#: sending: the REST gateway's answer to a JSON null in PATCH /memory/{id}
#: (automem/gateway/usecases.py ``_NOT_NULL``), so both transports raise the same
#: InvalidArgument. Sent, None would go in the update mask with the field unset: tags
#: cleared, and importance/confidence written as 0.0 by a service that does not check.
#: ``t_invalid=None`` is allowed (it opens the window); ``content=None`` is sent empty, which
#: the service refuses naming ``content`` (as it does REST's null).
NOT_NULL = {"tags": "tags: must be a list of strings (use [] to clear)",
            "importance": "importance: must be a number between 0 and 1",
            "confidence": "confidence: must be a number between 0 and 1",
            "type": "type: must not be null", "timestamp": "timestamp: must not be null",
            "t_valid": "t_valid: must not be null",
            "metadata": "metadata: must be an object, not null (its keys are merged into the memory's metadata)"}


def _cancelling() -> bool:
    """Whether the current task is being cancelled (``Task.cancelling()``): a CancelledError
    then is the caller's, never a call the closed channel ended."""
    task = asyncio.current_task()
    return bool(task is not None and task.cancelling())


def memory_input(item: MemoryInput, prefix: str = "") -> ingest_service_pb2.MemoryInput:
    """The MemoryInput message of ``item`` (metadata as JSON text: the service checks it
    and names the bad key)."""
    msg = ingest_service_pb2.MemoryInput(content=item.content, tags=list(item.tags), type=item.type or "",
                                         require_review=item.require_review)
    if item.importance is not None:
        msg.importance = item.importance
    if item.confidence is not None:
        msg.confidence = item.confidence
    if item.metadata is not None:
        msg.metadata_json, msg.metadata_set = json.dumps(item.metadata), True
    if item.embedding:
        msg.embedding.extend(item.embedding)
    for name, target in _TIMES.items():
        value = getattr(item, name)
        if value:
            getattr(msg, target).CopyFrom(_timestamp(value, prefix + name))
    return msg


def _read(as_of: TimeLike | None, known_at: TimeLike | None, state_mode: str | None,
          include_archived: bool = False, include_pending: bool = False,
          tz: tzinfo = UTC) -> recall_service_pb2.ReadOptions:
    """The state-pass options of a read; naive ``as_of`` / ``known_at`` text in ``tz`` (a
    recall's zone, UTC elsewhere), as the gateway's ``read_options`` reads them."""
    read = recall_service_pb2.ReadOptions(include_archived=include_archived, include_pending=include_pending)
    if as_of:
        read.as_of.CopyFrom(_timestamp(as_of, "as_of", tz=tz))
    if known_at:
        read.known_at.CopyFrom(_timestamp(known_at, "known_at", tz=tz))
    if state_mode:
        read.state_mode = _enum(recall_service_pb2.StateMode, "STATE_MODE_", state_mode, "state_mode")
    return read


def _enum(enum: Any, prefix: str, word: str, name: str) -> int:
    """The value of the word the REST route takes (``time_desc``; any case): the proto's own
    name (``SORT_ORDER_TIME_DESC``) and ``unspecified`` are refused as REST refuses them (they
    were accepted over gRPC only: break-it review)."""
    key = prefix + word.strip().upper()
    if key in enum.DESCRIPTOR.values_by_name and not key.endswith("UNSPECIFIED"):
        return enum.Value(key)
    allowed = ", ".join(n.removeprefix(prefix).lower() for n in enum.DESCRIPTOR.values_by_name
                        if not n.endswith("UNSPECIFIED"))
    raise errors.InvalidArgument(f"{name}: unknown value {word!r} (one of {allowed})", field=name)


def _relation_type(word: str, name: str = "type") -> int:
    # The service reads a relation type with its proto prefix too (automem/common/model.py
    # ``parse_relation_type``), over REST as over gRPC.
    return _enum(memory_pb2.RelationType, "RELATION_TYPE_", word.strip().upper().removeprefix("RELATION_TYPE_"), name)


class _Stubs(NamedTuple):
    """A channel and the stubs on it."""

    channel: grpc.aio.Channel
    ingest: ingest_service_pb2_grpc.IngestServiceStub
    recall: recall_service_pb2_grpc.RecallServiceStub
    review: review_service_pb2_grpc.ReviewServiceStub


class GrpcTransport:
    """Async calls over one gRPC channel (see the module docstring).

    Args:
        target: ``host:port`` (or any gRPC target, e.g. ``dns:///automem:50051``).
        api_key: sent as ``authorization: Bearer <key>``; scope as ``x-automem-scope``.
        tls: dial with TLS; ``root_certificates`` (PEM bytes) to trust instead of the
            system roots; ``server_name`` the name the certificate must carry when it is not
            the host dialled.
        timeout: default deadline of a call in seconds (None = none; streams have none).
        max_attempts: tries per retried call (1 = no retry).

    The ``grpc.aio`` channel belongs to the event loop it is made in, so it is made on the
    first call, in the loop that runs it (:attr:`channel`): a transport built outside any
    loop (``AsyncClient.grpc(...)`` at module level, then ``asyncio.run(...)``) failed every
    call with "attached to a different loop". A later call in another loop, once the first
    loop is closed (a second ``asyncio.run``), gets a new channel.
    """

    def __init__(self, target: str, *, api_key: str = "", scope: str = "", tls: bool = False,
                 root_certificates: bytes | None = None, server_name: str = "", timeout: float | None = 30.0,
                 max_attempts: int = 4) -> None:
        self._target = target
        self._options: list[tuple[str, Any]] = [("grpc.enable_retries", 1),
                                                ("grpc.service_config", service_config(max_attempts)),
                                                ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
        if server_name:
            self._options.append(("grpc.ssl_target_name_override", server_name))
        self._credentials = (grpc.ssl_channel_credentials(root_certificates=root_certificates)
                             if tls or root_certificates else None)
        self._stubs: _Stubs | None = None
        self._channel_loop: asyncio.AbstractEventLoop | None = None
        self.metadata: list[tuple[str, str]] = []
        if api_key:
            self.metadata.append(("authorization", f"Bearer {api_key}"))
        if scope:
            self.metadata.append(("x-automem-scope", scope))
        self.timeout = timeout
        self.closed = False

    def _here(self) -> _Stubs:
        """The channel of the running event loop and its stubs, made on first use (see the
        class docstring). RuntimeError outside a running loop; ClientClosed after
        :meth:`close` (a closed transport makes no channel: nothing would close it)."""
        self.check_open()
        loop = asyncio.get_running_loop()
        if self._stubs is None or (self._channel_loop is not loop and self._channel_loop is not None
                                   and self._channel_loop.is_closed()):
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(self._target, self._credentials, options=self._options)
            else:
                channel = grpc.aio.insecure_channel(self._target, options=self._options)
            self._stubs = _Stubs(channel, ingest_service_pb2_grpc.IngestServiceStub(channel),
                                 recall_service_pb2_grpc.RecallServiceStub(channel),
                                 review_service_pb2_grpc.ReviewServiceStub(channel))
            self._channel_loop = loop
        return self._stubs

    @property
    def channel(self) -> grpc.aio.Channel:
        """The channel of the running event loop (:meth:`_here`)."""
        return self._here().channel

    @property
    def _ingest(self) -> ingest_service_pb2_grpc.IngestServiceStub:
        return self._here().ingest

    @property
    def _recall(self) -> recall_service_pb2_grpc.RecallServiceStub:
        return self._here().recall

    @property
    def _review(self) -> review_service_pb2_grpc.ReviewServiceStub:
        return self._here().review

    async def close(self) -> None:
        """Close the channel (again: nothing; none made yet, or made in a loop since closed:
        nothing to close). Calls in flight raise ClientClosed, an open :meth:`events` stream
        ends, later calls raise ClientClosed."""
        if self.closed:
            return
        self.closed = True
        if self._stubs is not None and self._channel_loop is asyncio.get_running_loop():
            await self._stubs.channel.close()

    def check_open(self) -> None:
        """ClientClosed once :meth:`close` was called."""
        if self.closed:
            raise errors.ClientClosed()

    async def _call(self, method: Any, request: Any, timeout: float | None, *,
                    names: dict[str, str] | None = None) -> Any:
        """``method(request)``; an error names the method's arguments (``names``: the request's
        proto paths the method takes under other names, errors.py ``from_rpc_error``)."""
        self.check_open()
        check.timeout(timeout)
        try:
            return await method(request, metadata=self.metadata,
                                timeout=self.timeout if timeout is None else timeout)
        except grpc.RpcError as exc:
            raise (errors.ClientClosed() if self.closed else errors.from_rpc_error(exc, names, request)) from None
        except asyncio.CancelledError:
            if self.closed and not _cancelling():  # the channel's close cancelled the call
                raise errors.ClientClosed() from None
            raise
        except grpc.aio.UsageError:  # "Channel is closed"
            if self.closed:
                raise errors.ClientClosed() from None
            raise

    # --- writes --------------------------------------------------------------------

    async def store(self, item: MemoryInput, *, idempotency_key: str, timeout: float | None = None) -> Stored:
        request = ingest_service_pb2.CreateMemoryRequest(memory=memory_input(item), idempotency_key=idempotency_key)
        answer = await self._call(self._ingest.CreateMemory, request, timeout)
        return Stored(Memory.from_proto(answer.memory), answer.deduplicated)

    async def store_batch(self, items: Sequence[MemoryInput], *, idempotency_key: str,
                          timeout: float | None = None) -> BatchStored:
        request = ingest_service_pb2.BatchCreateMemoriesRequest(
            memories=[memory_input(item, f"memories[{i}].") for i, item in enumerate(items)],
            idempotency_key=idempotency_key)
        answer = await self._call(self._ingest.BatchCreateMemories, request, timeout)
        return BatchStored([m.id for m in answer.memories], list(answer.deduplicated))

    async def update(self, memory_id: str, fields: dict[str, Any], *, etag: int, add_tags: Sequence[str],
                     timeout: float | None = None) -> Memory:
        """Change ``fields`` (update() names -> values; each one given goes in the update
        mask). InvalidArgument, before sending, for None in a field of :data:`NOT_NULL`."""
        for name, value in fields.items():
            if value is None and name in NOT_NULL:
                raise errors.InvalidArgument(NOT_NULL[name], field=name)
        item = MemoryInput(content=fields.get("content") or "", tags=list(fields.get("tags") or []),
                           importance=fields.get("importance"), confidence=fields.get("confidence"),
                           type=fields.get("type"), metadata=fields.get("metadata"),
                           timestamp=fields.get("timestamp"), t_valid=fields.get("t_valid"),
                           t_invalid=fields.get("t_invalid"))
        paths = [_TIMES.get(name, name) for name in fields]
        request = ingest_service_pb2.UpdateMemoryRequest(
            id=memory_id, memory=memory_input(item), update_mask=field_mask_pb2.FieldMask(paths=paths), etag=etag,
            add_tags=list(add_tags))
        return Memory.from_proto((await self._call(self._ingest.UpdateMemory, request, timeout)).memory)

    async def delete(self, memory_id: str, *, etag: int, purge: bool, reason: str,
                     timeout: float | None = None) -> Memory:
        request = ingest_service_pb2.DeleteMemoryRequest(id=memory_id, etag=etag, purge=purge, reason=reason)
        return Memory.from_proto((await self._call(self._ingest.DeleteMemory, request, timeout)).memory)

    async def supersede(self, memory_id: str, item: MemoryInput, *, relation: str, reason: str, etag: int,
                        idempotency_key: str, timeout: float | None = None) -> Superseded:
        request = ingest_service_pb2.SupersedeMemoryRequest(
            id=memory_id, replacement=memory_input(item), relation_type=_relation_type(relation, "relation"),
            reason=reason, etag=etag, idempotency_key=idempotency_key)
        answer = await self._call(self._ingest.SupersedeMemory, request, timeout, names={"replacement": ""})
        return Superseded(Memory.from_proto(answer.replacement), Memory.from_proto(answer.superseded),
                          Relation.from_proto(answer.relation))

    async def associate(self, memory1_id: str, memory2_id: str, *, type: str, strength: float | None,
                        reason: str, timeout: float | None = None) -> Relation:
        relation = memory_pb2.Relation(source_id=memory1_id, target_id=memory2_id, reason=reason,
                                       strength=0.5 if strength is None else strength)
        request = ingest_service_pb2.CreateRelationRequest(relation=relation, type_name=type)
        answer = await self._call(self._ingest.CreateRelation, request, timeout, names=ASSOCIATE_ARGUMENTS)
        return Relation.from_proto(answer.relation)

    # --- reads ---------------------------------------------------------------------

    async def get(self, memory_id: str, *, as_of: TimeLike | None, known_at: TimeLike | None,
                  state_mode: str | None, version: int | None = None, timeout: float | None = None) -> Memory:
        # A read of the memory (not of one of its versions) bumps its last access, as REST's
        # GET /memory/{id} does (automem/gateway/usecases.py ``get_memory``): over gRPC it did
        # not, so the two transports left different state behind (break-it review).
        request = recall_service_pb2.GetMemoryRequest(id=memory_id, read=_read(as_of, known_at, state_mode),
                                                      touch=version is None)
        if version is not None:
            request.version = version
        answer = await self._call(self._recall.GetMemory, request, timeout)
        return Memory.from_proto(answer.memory, is_current=answer.is_current, current_id=answer.current_id)

    async def recall(self, query: str, options: dict[str, Any], *, timeout: float | None = None) -> RecallResult:
        o = dict(options)
        # the zone of naive start / end / as_of / known_at text and of dates, as REST's /recall
        # reads them (the gateway refuses an unknown zone with this message before anything)
        tz = zone(o["tz"])
        request = recall_service_pb2.SearchMemoriesRequest(
            query=query, queries=list(o.pop("queries") or []), embedding=list(o.pop("embedding") or []),
            offset=o.pop("offset"), time_query=o.pop("time_query"), tz=o.pop("tz"), tags=list(o.pop("tags") or []),
            exclude_tags=list(o.pop("exclude_tags") or []), expand_relations=o.pop("expand_relations"),
            expand_entities=o.pop("expand_entities"), relation_limit=o.pop("relation_limit"),
            expansion_limit=o.pop("expansion_limit"), expand_min_importance=o.pop("expand_min_importance"),
            expand_min_strength=o.pop("expand_min_strength"), min_score=o.pop("min_score"),
            context=o.pop("context"), context_tags=list(o.pop("context_tags") or []),
            context_types=list(o.pop("context_types") or []), priority_ids=list(o.pop("priority_ids") or []),
            state_debug=o.pop("state_debug"),
            read=_read(o.pop("as_of"), o.pop("known_at"), o.pop("state_mode"), o.pop("include_archived"),
                       o.pop("include_pending"), tz=tz))
        limit, rerank = o.pop("limit"), o.pop("rerank")
        if limit is not None:
            request.limit = limit
        if rerank is not None:
            request.rerank = rerank
        for name, enum, prefix in (("sort", recall_service_pb2.SortOrder, "SORT_ORDER_"),
                                   ("tag_mode", recall_service_pb2.TagMode, "TAG_MODE_"),
                                   ("tag_match", recall_service_pb2.TagMatch, "TAG_MATCH_"),
                                   ("recency_bias", recall_service_pb2.RecencyBias, "RECENCY_BIAS_")):
            word = o.pop(name)
            if word:
                setattr(request, name, _enum(enum, prefix, word, name))
        for name, target in (("start", "start_time"), ("end", "end_time")):
            value = o.pop(name)
            if value and (not isinstance(value, str) or value.strip()):  # blank text: no bound, as REST
                getattr(request, target).CopyFrom(_timestamp(value, name, tz=tz, bound=True, upper=name == "end"))
        assert not o, f"unhandled recall options {sorted(o)}"
        answer = await self._call(self._recall.SearchMemories, request, timeout)
        return RecallResult(
            results=[ScoredMemory(Memory.from_proto(r.memory), r.score, r.final_score, r.match_type,
                                  dict(r.score_components), r.replaces_id or None, r.relation_type or None)
                     for r in answer.results],
            has_more=answer.has_more, total=answer.total if answer.HasField("total") else None, limit=answer.limit,
            time_start=_ts(answer, "start_time"), time_end=_ts(answer, "end_time"),
            time_window_warning=answer.time_window_warning or None, arms=list(answer.arms),
            degraded=list(answer.degraded))

    async def list_by_tag(self, tags: Sequence[str], *, page_size: int | None, page_token: str, tag_mode: str,
                          tag_match: str, as_of: TimeLike | None, known_at: TimeLike | None, state_mode: str | None,
                          include_total: bool, timeout: float | None = None) -> Page:
        request = recall_service_pb2.ListMemoriesByTagRequest(
            tags=list(tags), page_token=page_token, include_total=include_total,
            read=_read(as_of, known_at, state_mode),
            tag_mode=_enum(recall_service_pb2.TagMode, "TAG_MODE_", tag_mode, "tag_mode"),
            tag_match=_enum(recall_service_pb2.TagMatch, "TAG_MATCH_", tag_match, "tag_match"))
        if page_size is not None:
            request.page_size = page_size
        answer = await self._call(self._recall.ListMemoriesByTag, request, timeout)
        return Page([Memory.from_proto(m) for m in answer.memories], answer.next_page_token or None,
                    answer.has_more, answer.total if answer.HasField("total") else None)

    async def related(self, memory_id: str, *, relationship_types: Sequence[str], max_depth: int, limit: int,
                      as_of: TimeLike | None, known_at: TimeLike | None,
                      timeout: float | None = None) -> list[RelatedMemory]:
        request = recall_service_pb2.ListRelatedMemoriesRequest(
            id=memory_id, relationship_types=list(relationship_types), max_depth=max_depth, page_size=limit,
            read=_read(as_of, known_at, None))
        answer = await self._call(self._recall.ListRelatedMemories, request, timeout)
        return [RelatedMemory(Memory.from_proto(r.memory), r.relation_type, r.strength, r.depth, r.replaces_id)
                for r in answer.related]

    async def history(self, memory_id: str, *, page_size: int, page_token: str,
                      timeout: float | None = None) -> HistoryPage:
        from automem_client._proto.automem.v1 import review_service_pb2

        request = review_service_pb2.ListMemoryEventsRequest(id=memory_id, page_size=page_size, page_token=page_token)
        answer = await self._call(self._review.ListMemoryEvents, request, timeout)
        return HistoryPage([HistoryEvent.from_proto(e) for e in answer.events], answer.next_page_token or None,
                           answer.truncated)

    async def versions(self, memory_id: str, *, page_size: int, page_token: str,
                       timeout: float | None = None) -> VersionsPage:
        request = recall_service_pb2.ListMemoryVersionsRequest(id=memory_id, page_size=page_size,
                                                               page_token=page_token)
        answer = await self._call(self._recall.ListMemoryVersions, request, timeout)
        return VersionsPage([MemoryVersion.from_proto(v) for v in answer.versions], answer.next_page_token or None)

    async def diff_versions(self, memory_id: str, from_version: int, to_version: int, *,
                            timeout: float | None = None) -> VersionDiff:
        request = recall_service_pb2.DiffMemoryVersionsRequest(id=memory_id, from_version=from_version,
                                                               to_version=to_version)
        return VersionDiff.from_proto(await self._call(self._recall.DiffMemoryVersions, request, timeout))

    async def health(self, *, timeout: float | None = None) -> Health:
        stats = await self._call(self._recall.GetStats, recall_service_pb2.GetStatsRequest(), timeout)
        degraded = not stats.graph_connected or (stats.vectors_enabled and not stats.vectors_connected)
        return Health("degraded" if degraded else "healthy", stats.graph_connected, stats.vectors_connected,
                      stats.memory_count, stats.vector_count)

    async def events(self, *, after_sequence: int) -> AsyncIterator[StreamEvent]:
        """The scope's events; ends (no error) when :meth:`close` closes the channel under
        it; ClientClosed when called after close()."""
        self.check_open()
        request = event_stream_pb2.StreamMemoryEventsRequest(after_sequence=after_sequence)
        call = self._review.StreamMemoryEvents(request, metadata=self.metadata)
        try:
            async for item in call:
                yield _stream_event(item)
        except grpc.RpcError as exc:
            if self.closed:
                return
            raise errors.from_rpc_error(exc, request=request) from None
        except asyncio.CancelledError:
            if self.closed and not _cancelling():  # the channel's close cancelled the stream
                return
            raise
        finally:
            call.cancel()


def _stream_event(item: event_stream_pb2.StreamMemoryEventsResponse) -> StreamEvent:
    which = item.WhichOneof("item")
    if which == "trimmed":
        return StreamEvent("stream.trimmed", None)
    if which == "activity_event":
        a = item.activity_event
        return StreamEvent(a.kind, item.sequence, a.event_id, "", _ts(a, "event_time"), a.scope, a.actor)
    e = item.memory_event
    return StreamEvent(EVENT_NAMES.get(e.type, "memory.event"), item.sequence, e.event_id,
                       e.memory_id or e.relation.source_id, _ts(e, "event_time"), e.scope or e.relation.scope,
                       e.actor)
