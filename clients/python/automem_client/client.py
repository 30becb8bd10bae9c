"""The clients: :class:`AsyncClient` (asyncio) and :class:`Client` (blocking), each over
gRPC (:meth:`AsyncClient.grpc`) or REST (:meth:`AsyncClient.rest`) with the same methods.

Every method raises the typed errors of :mod:`automem_client.errors` (InvalidArgument with
``field``, NotFound, Aborted for a stale etag, Unavailable, DeadlineExceeded...). ``timeout``
is the call's deadline in seconds (default: the client's). Writes that create (``store``,
``store_batch``, ``supersede``) carry an idempotency key — the caller's, or a fresh UUID —
so the transports retry them on UNAVAILABLE without storing twice.

Times: a ``datetime`` (naive = UTC) or ISO 8601 text, meaning the same over both
transports, as AutoMem's REST API reads them (one conversion, automem_client/_times.py):
text with ``Z`` or an offset is that instant; naive text (``2026-03-01T10:00:00``) is in
the call's zone, a recall's ``tz`` (UTC for the other methods); a date (``2026-03-01``) is
midnight in that zone, except a recall's ``end``, where it is the whole day (up to the next
midnight in ``tz``, exclusive). Millisecond precision.

Closing: after ``close()`` (or the end of the ``with`` block) every method raises
:class:`~automem_client.errors.ClientClosed`, over both transports, blocking and asyncio; a
call in flight at that moment raises it too, and an ``events()`` iteration open at that
moment just ends (``StopAsyncIteration`` / ``StopIteration``: the ``for`` loop stops). A
second ``close()`` does nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

from automem_client import _checks as check
from automem_client import errors
from automem_client._grpc import GrpcTransport
from automem_client._rest import STREAM_IDLE_TIMEOUT, RestTransport
from automem_client.models import (
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
    Stored,
    StreamEvent,
    Superseded,
    TimeLike,
    VersionDiff,
    VersionsPage,
)

P = ParamSpec("P")
R = TypeVar("R")

_UNSET: Any = object()
#: update()'s field names (AutoMem's PATCH /memory/{id} body).
UPDATE_FIELDS = ("content", "tags", "importance", "type", "confidence", "metadata", "timestamp", "t_valid",
                 "t_invalid")


def _check_read(as_of: Any, known_at: Any, state_mode: Any) -> None:
    """The read options of a call: two times and a mode word (or None)."""
    check.time(as_of, "as_of")
    check.time(known_at, "known_at")
    if state_mode is not None:
        check.text(state_mode, "state_mode")


def _check_connection(api_key: Any, scope: Any, timeout: Any, max_attempts: Any) -> None:
    """The constructors' arguments shared by both transports."""
    check.header(api_key, "api_key")
    check.header(scope, "scope")
    check.timeout(timeout)
    check.attempts(max_attempts)


class AsyncClient:
    """The asyncio client. Build it with :meth:`grpc` or :meth:`rest`; use it as an async
    context manager or call :meth:`close`."""

    def __init__(self, transport: GrpcTransport | RestTransport) -> None:
        self.transport = transport

    @classmethod
    def grpc(cls, target: str, *, api_key: str = "", scope: str = "", tls: bool = False,
             root_certificates: bytes | str | None = None, server_name: str = "", timeout: float | None = 30.0,
             max_attempts: int = 4) -> Self:
        """A client of the gRPC server at ``target`` (``host:port``).

        ``api_key``: the key (``Authorization: Bearer``); ``scope``: the scope every call acts
        on ("" = the key's default). ``tls``: dial with TLS; ``root_certificates``: PEM bytes,
        or the path of a PEM file, to trust instead of the system roots (implies TLS);
        ``server_name``: the name the certificate must carry when not the host dialled.
        ``timeout``: default deadline in seconds; ``max_attempts``: tries of a retried call
        (1 = no retry; gRPC caps it at 5).

        InvalidArgument, before any connection, naming ``target`` (not a string, or empty),
        ``api_key`` / ``scope`` (not printable ASCII: they are sent as metadata),
        ``timeout`` (not a number of seconds above 0) or ``max_attempts`` (not an integer of
        at least 1).
        """
        check.identifier(target, "target")
        _check_connection(api_key, scope, timeout, max_attempts)
        if isinstance(root_certificates, str):
            with open(root_certificates, "rb") as handle:
                root_certificates = handle.read()
        return cls(GrpcTransport(target, api_key=api_key, scope=scope, tls=tls, root_certificates=root_certificates,
                                 server_name=server_name, timeout=timeout, max_attempts=max_attempts))

    @classmethod
    def rest(cls, base_url: str, *, api_key: str = "", scope: str = "", verify: Any = True,
             ca_file: str | None = None, timeout: float | None = 30.0, max_attempts: int = 4,
             stream_idle_timeout: float | None = STREAM_IDLE_TIMEOUT) -> Self:
        """A client of the REST gateway at ``base_url`` (``http://host:8001``).

        ``verify``: TLS verification as httpx takes it; ``ca_file``: a PEM bundle to trust.
        ``stream_idle_timeout``: seconds :meth:`events` waits for the next event or the
        gateway's keepalive comment (sent every 30 s, ``AUTOMEM_STREAM_KEEPALIVE_SECONDS``)
        before it raises Unavailable (a stalled gateway or connection); default 45, None =
        wait for ever; keep it above the gateway's keepalive interval.
        The rest as :meth:`grpc`. InvalidArgument naming ``base_url`` for one that is not an
        http(s) URL with a host, ``timeout`` / ``stream_idle_timeout`` for one that is not a
        number of seconds above 0, ``api_key`` / ``scope`` / ``max_attempts`` as :meth:`grpc`."""
        check.base_url(base_url)
        _check_connection(api_key, scope, timeout, max_attempts)
        check.timeout(stream_idle_timeout, "stream_idle_timeout")
        return cls(RestTransport(base_url, api_key=api_key, scope=scope, verify=verify, ca_file=ca_file,
                                 timeout=timeout, max_attempts=max_attempts, stream_idle_timeout=stream_idle_timeout))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel / HTTP connections. Afterwards every method raises ClientClosed;
        calls in flight raise it too; an open :meth:`events` iteration ends. Closing again
        does nothing."""
        await self.transport.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.transport.closed

    @property
    def _open(self) -> GrpcTransport | RestTransport:
        """The transport; ClientClosed once the client is closed (checked before the
        transport builds or checks the request: a closed client raises ClientClosed over
        both transports, not a client-side InvalidArgument over one)."""
        self.transport.check_open()
        return self.transport

    # --- writes --------------------------------------------------------------------

    async def store(self, content: str, *, tags: Sequence[str] = (), importance: float | None = None,
                    confidence: float | None = None, type: str | None = None,
                    metadata: dict[str, Any] | None = None, timestamp: TimeLike | None = None,
                    t_valid: TimeLike | None = None, t_invalid: TimeLike | None = None,
                    embedding: Sequence[float] | None = None, require_review: bool = False,
                    idempotency_key: str | None = None, timeout: float | None = None) -> Stored:
        """Store one memory. ``importance``/``confidence`` 0..1 (unset: the service's
        defaults); ``type`` one of Decision, Pattern, Preference, Style, Habit, Insight,
        Context (any case; unset = classified); ``metadata`` a JSON object; times as
        datetime or ISO 8601 text, a naive one (or a date: its midnight) in UTC (module
        docstring); ``embedding`` stored as given.
        ``idempotency_key``: the same key answers the first memory (``deduplicated``) instead
        of storing again; default a fresh UUID per call (so the retries of this call are safe).
        Errors: InvalidArgument naming the field (a wrong type too, e.g. one string for
        ``tags``; text with a lone surrogate; an ``idempotency_key`` that is not printable
        ASCII or longer than 255 characters, refused before sending); AlreadyExists for
        tombstoned content; ResourceExhausted (field None) for a request over the service's
        size limit (4 MiB by default, over both transports)."""
        check.texts(tags, "tags")
        item = MemoryInput(content, list(tags), importance, confidence, type, metadata, timestamp, t_valid,
                           t_invalid, list(embedding) if embedding else None, require_review)
        check.memory_input(item)
        check.idempotency_key(idempotency_key)
        return await self._open.store(item, idempotency_key=idempotency_key or str(uuid.uuid4()),
                                      timeout=timeout)

    async def store_batch(self, items: Sequence[MemoryInput | str], *, idempotency_key: str | None = None,
                          timeout: float | None = None) -> BatchStored:
        """Store up to 500 memories, all or nothing (a text is ``MemoryInput(text)``).
        InvalidArgument names the item, e.g. ``memories[3].content``; the key as
        :meth:`store`. ResourceExhausted (field None) when the batch is over the service's
        size limit (4 MiB by default), with the same words over both transports: send
        smaller batches."""
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise errors.InvalidArgument("memories: must be a list of MemoryInput or strings", field="memories")
        inputs = [MemoryInput(i) if isinstance(i, str) else i for i in items]
        for i, item in enumerate(inputs):
            if not isinstance(item, MemoryInput):
                raise errors.InvalidArgument(f"memories[{i}]: must be a MemoryInput or a string, not "
                                             f"{type(item).__name__}", field=f"memories[{i}]")
            check.memory_input(item, f"memories[{i}].")
        check.idempotency_key(idempotency_key)
        return await self._open.store_batch(inputs, idempotency_key=idempotency_key or str(uuid.uuid4()),
                                            timeout=timeout)

    async def update(self, memory_id: str, *, etag: int = 0, add_tags: Sequence[str] = (),
                     content: str = _UNSET, tags: Sequence[str] = _UNSET, importance: float = _UNSET,
                     type: str = _UNSET, confidence: float = _UNSET, metadata: dict[str, Any] = _UNSET,
                     timestamp: TimeLike = _UNSET, t_valid: TimeLike = _UNSET, t_invalid: TimeLike | None = _UNSET,
                     timeout: float | None = None) -> Memory:
        """Change the given fields; a field not given (the default) stays as it is.
        ``metadata`` is merged key by key, ``add_tags`` added to the tags, ``tags=[]`` clears
        them, ``t_invalid=None`` opens the window. None for any other field is
        InvalidArgument naming it, over both transports (REST: the gateway refuses the JSON
        null; gRPC: the client, before sending) — there is no null importance, type, tags,
        metadata... to write; ``content=None`` is InvalidArgument ``content`` (empty) from the
        service. ``etag``: the version the change is based on (``memory.version``; 0 = no
        check): Aborted when the memory changed since. NotFound; InvalidArgument naming the
        field."""
        check.memory_id(memory_id)
        check.integer(etag, "etag", least=0, bits=64)
        check.texts(add_tags, "add_tags")
        for name, value in (("content", content), ("type", type)):
            if value is not _UNSET and value is not None:
                check.text(value, name)
        if tags is not _UNSET and tags is not None:
            check.texts(tags, "tags")
        for name, value in (("importance", importance), ("confidence", confidence)):
            if value is not _UNSET:
                check.number(value, name)
        if metadata is not _UNSET:
            check.mapping(metadata, "metadata")
        for name, value in (("timestamp", timestamp), ("t_valid", t_valid), ("t_invalid", t_invalid)):
            if value is not _UNSET:
                check.time(value, name)
        given = {"content": content, "tags": tags, "importance": importance, "type": type,
                 "confidence": confidence, "metadata": metadata, "timestamp": timestamp, "t_valid": t_valid,
                 "t_invalid": t_invalid}
        fields = {k: (list(v) if k == "tags" and v is not None else v) for k, v in given.items() if v is not _UNSET}
        return await self._open.update(memory_id, fields, etag=etag, add_tags=list(add_tags), timeout=timeout)

    async def delete(self, memory_id: str, *, etag: int = 0, purge: bool = False, reason: str = "",
                     timeout: float | None = None) -> Memory:
        """Tombstone a memory (state DELETED; ``purge`` removes it, admin keys only). Answers
        the memory as deleted. ``etag`` as :meth:`update`; NotFound."""
        check.memory_id(memory_id)
        check.integer(etag, "etag", least=0, bits=64)
        check.flag(purge, "purge")
        check.text(reason, "reason")
        return await self._open.delete(memory_id, etag=etag, purge=purge, reason=reason, timeout=timeout)

    async def supersede(self, memory_id: str, content: str, *, relation: str = "INVALIDATED_BY", reason: str = "",
                        etag: int = 0, tags: Sequence[str] = (), importance: float | None = None,
                        confidence: float | None = None, type: str | None = None,
                        metadata: dict[str, Any] | None = None, timestamp: TimeLike | None = None,
                        t_valid: TimeLike | None = None, t_invalid: TimeLike | None = None,
                        idempotency_key: str | None = None, timeout: float | None = None) -> Superseded:
        """Replace a memory by a new one atomically: the old one becomes SUPERSEDED and
        recall answers the new one. ``relation``: INVALIDATED_BY or EVOLVED_INTO (any case;
        anything else, ``""`` too, is InvalidArgument naming ``relation`` before sending). ``etag``
        as :meth:`update`; the key as :meth:`store`. NotFound; FailedPrecondition when it
        cannot be superseded (e.g. deleted)."""
        check.memory_id(memory_id)
        check.texts(tags, "tags")
        item = MemoryInput(content, list(tags), importance, confidence, type, metadata, timestamp, t_valid,
                           t_invalid)
        check.memory_input(item)
        relation = check.supersede_relation(relation)
        check.text(reason, "reason")
        check.integer(etag, "etag", least=0, bits=64)
        check.idempotency_key(idempotency_key)
        return await self._open.supersede(memory_id, item, relation=relation, reason=reason, etag=etag,
                                          idempotency_key=idempotency_key or str(uuid.uuid4()), timeout=timeout)

    async def associate(self, memory1_id: str, memory2_id: str, *, type: str = "RELATES_TO",
                        strength: float | None = None, reason: str = "", timeout: float | None = None) -> Relation:
        """Create the edge ``memory1_id -[type]-> memory2_id`` (AutoMem's 11 authorable types,
        any case; strength 0..1, default 0.5). InvalidArgument naming ``type`` or
        ``strength``, or ``memory1_id`` / ``memory2_id`` for one that is no memory id (empty,
        over 128 characters, a control character: refused before sending, as :meth:`get`
        refuses its ``memory_id``); NotFound for a memory that is not there."""
        check.memory_id(memory1_id, "memory1_id")
        check.memory_id(memory2_id, "memory2_id")
        check.text(type, "type")
        check.number(strength, "strength")
        check.text(reason, "reason")
        return await self._open.associate(memory1_id, memory2_id, type=type, strength=strength, reason=reason,
                                          timeout=timeout)

    # --- reads ---------------------------------------------------------------------

    async def get(self, memory_id: str, *, as_of: TimeLike | None = None, known_at: TimeLike | None = None,
                  state_mode: str | None = None, version: int | None = None,
                  timeout: float | None = None) -> Memory:
        """One memory with ``is_current`` and ``current_id`` (the head of its chain when
        superseded). ``as_of``: valid time to read at; ``known_at``: what the service knew
        then (both a datetime or ISO 8601 text, naive or a date = UTC; module docstring);
        ``state_mode``: current | history; ``version``: that version (1 and up, as
        :meth:`versions` lists) instead. NotFound (naming ``version`` when it has none).
        InvalidArgument naming ``memory_id``, before sending, for one that is no memory id
        (empty, over 128 characters, a control character), over both transports, as every
        call taking a memory id does (gRPC answered NotFound for such an id)."""
        check.memory_id(memory_id)
        _check_read(as_of, known_at, state_mode)
        check.integer(version, "version", bits=64)
        return await self._open.get(memory_id, as_of=as_of, known_at=known_at, state_mode=state_mode,
                                    version=version, timeout=timeout)

    async def recall(self, query: str = "", *, queries: Sequence[str] = (), embedding: Sequence[float] = (),
                     limit: int | None = None, offset: int = 0, sort: str = "", time_query: str = "", tz: str = "",
                     start: TimeLike | None = None, end: TimeLike | None = None, tags: Sequence[str] = (),
                     tag_mode: str = "", tag_match: str = "", exclude_tags: Sequence[str] = (),
                     as_of: TimeLike | None = None, known_at: TimeLike | None = None, state_mode: str | None = None,
                     include_archived: bool = False, include_pending: bool = False, expand_relations: bool = False,
                     expand_entities: bool = False, relation_limit: int = 0, expansion_limit: int = 0,
                     expand_min_importance: float = 0.0, expand_min_strength: float = 0.0, min_score: float = 0.0,
                     context: str = "", context_tags: Sequence[str] = (), context_types: Sequence[str] = (),
                     priority_ids: Sequence[str] = (), recency_bias: str = "", state_debug: bool = False,
                     rerank: bool | None = None, timeout: float | None = None) -> RecallResult:
        """Ranked hybrid recall (AutoMem's GET /recall; protos/automem/v1/recall_service.proto
        SearchMemoriesRequest documents each filter). ``limit`` default 5, above the
        service maximum clamped (the applied one is ``result.limit``); ``offset`` pages the
        same ranking. ``sort``: score | time_desc | time_asc | updated_desc | updated_asc;
        ``time_query``: "yesterday", "last 7 days", ... in zone ``tz`` (an IANA name, "" =
        UTC; InvalidArgument naming ``tz`` for an unknown one); ``start``/``end``: inclusive
        event-time bounds, a datetime (naive = UTC) or ISO 8601 text: with ``Z`` or an offset
        that instant, naive text in ``tz``, a date the whole day in ``tz`` (``start`` its
        first instant, ``end`` its last, so ``start=end="2026-03-01"`` is that day);
        ``as_of``/``known_at``: naive text in ``tz`` too, a date its midnight there. These
        meanings are AutoMem's ``/recall``'s and the same over gRPC and REST (InvalidArgument
        naming ``start``, ``end``, ``as_of`` or ``known_at`` for text that is not ISO 8601);
        ``tag_mode``: any | all; ``tag_match``: prefix | exact;
        ``recency_bias``: auto | on | off. Enum words are checked by the service over REST
        and by the client over gRPC (InvalidArgument naming the option either way).
        ``rerank``: True asks the service's configured LLM to reorder the best memories, False
        keeps it from doing so, None leaves it to the service's setting (``result.arms`` /
        ``result.degraded`` name ``llm_rerank`` when it did / could not)."""
        check.text(query, "query")
        for name, values in (("queries", queries), ("tags", tags), ("exclude_tags", exclude_tags),
                             ("context_tags", context_tags), ("context_types", context_types)):
            check.texts(values, name)
        check.memory_ids(priority_ids, "priority_ids")
        if isinstance(embedding, (str, bytes)) or not isinstance(embedding, Sequence):
            raise errors.InvalidArgument("embedding: must be a list of numbers", field="embedding")
        for i, value in enumerate(embedding):
            check.number(value, f"embedding[{i}]")
        for name, value in (("limit", limit), ("offset", offset), ("relation_limit", relation_limit),
                            ("expansion_limit", expansion_limit)):
            check.integer(value, name)
        for name, value in (("expand_min_importance", expand_min_importance),
                            ("expand_min_strength", expand_min_strength), ("min_score", min_score)):
            check.number(value, name)
        for name, value in (("sort", sort), ("time_query", time_query), ("tz", tz), ("tag_mode", tag_mode),
                            ("tag_match", tag_match), ("context", context), ("recency_bias", recency_bias)):
            check.text(value, name)
        for name, value in (("include_archived", include_archived), ("include_pending", include_pending),
                            ("expand_relations", expand_relations), ("expand_entities", expand_entities),
                            ("state_debug", state_debug), ("rerank", rerank)):
            check.flag(value, name)
        check.time(start, "start")
        check.time(end, "end")
        _check_read(as_of, known_at, state_mode)
        options: dict[str, Any] = {
            "queries": list(queries), "embedding": list(embedding), "limit": limit, "offset": offset, "sort": sort,
            "time_query": time_query, "tz": tz, "start": start, "end": end, "tags": list(tags),
            "tag_mode": tag_mode, "tag_match": tag_match, "exclude_tags": list(exclude_tags), "as_of": as_of,
            "known_at": known_at, "state_mode": state_mode, "include_archived": include_archived,
            "include_pending": include_pending, "expand_relations": expand_relations,
            "expand_entities": expand_entities, "relation_limit": relation_limit,
            "expansion_limit": expansion_limit, "expand_min_importance": expand_min_importance,
            "expand_min_strength": expand_min_strength, "min_score": min_score, "context": context,
            "context_tags": list(context_tags), "context_types": list(context_types),
            "priority_ids": list(priority_ids), "recency_bias": recency_bias, "state_debug": state_debug,
            "rerank": rerank}
        return await self._open.recall(query, options, timeout=timeout)

    async def list_by_tag(self, tags: Sequence[str], *, page_size: int | None = None, page_token: str = "",
                          tag_mode: str = "any", tag_match: str = "exact", as_of: TimeLike | None = None,
                          known_at: TimeLike | None = None, state_mode: str | None = None,
                          include_total: bool = False, timeout: float | None = None) -> Page:
        """One page of the memories under ``tags``, newest first (page size default 20,
        max 200). Pass ``page.next_page_token`` back for the next page; :meth:`iter_by_tag`
        does it for you."""
        check.texts(tags, "tags")
        check.integer(page_size, "page_size", least=1)
        check.text(page_token, "page_token")
        check.flag(include_total, "include_total")
        check.text(tag_mode, "tag_mode")
        check.text(tag_match, "tag_match")
        _check_read(as_of, known_at, state_mode)
        return await self._open.list_by_tag(tags, page_size=page_size, page_token=page_token, tag_mode=tag_mode,
                                            tag_match=tag_match, as_of=as_of, known_at=known_at,
                                            state_mode=state_mode, include_total=include_total, timeout=timeout)

    async def iter_by_tag(self, tags: Sequence[str], *, page_size: int | None = 200, tag_mode: str = "any",
                          tag_match: str = "exact", state_mode: str | None = None,
                          timeout: float | None = None) -> AsyncIterator[Memory]:
        """Every memory under ``tags``, page after page (as :meth:`list_by_tag`)."""
        token = ""
        while True:
            page = await self.list_by_tag(tags, page_size=page_size, page_token=token, tag_mode=tag_mode,
                                          tag_match=tag_match, state_mode=state_mode, timeout=timeout)
            for memory in page.memories:
                yield memory
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def related(self, memory_id: str, *, relationship_types: Sequence[str] = (), max_depth: int = 1,
                      limit: int = 20, as_of: TimeLike | None = None, known_at: TimeLike | None = None,
                      timeout: float | None = None) -> list[RelatedMemory]:
        """Graph neighbours up to ``max_depth`` hops (1..3), at most ``limit`` (1..200),
        current memories only. InvalidArgument naming the option out of range, refused before
        sending (``limit=0``: gRPC would read it as the default; ``limit=201``: gRPC named it
        ``page_size``); NotFound."""
        check.memory_id(memory_id)
        check.texts(relationship_types, "relationship_types")
        check.integer(max_depth, "max_depth", least=1, most=3)
        check.integer(limit, "limit", least=1, most=200)
        _check_read(as_of, known_at, None)
        return await self._open.related(memory_id, relationship_types=list(relationship_types),
                                        max_depth=max_depth, limit=limit, as_of=as_of, known_at=known_at,
                                        timeout=timeout)

    async def history(self, memory_id: str, *, page_size: int = 100, page_token: str = "",
                      timeout: float | None = None) -> HistoryPage:
        """One page (at most 1000) of the memory's changes, oldest first; :meth:`iter_history`
        walks them all. NotFound; InvalidArgument naming ``memory_id`` (empty) or ``page_size``
        (outside 1..1000)."""
        check.memory_id(memory_id)
        check.integer(page_size, "page_size", least=1, most=1000)
        check.text(page_token, "page_token")
        return await self._open.history(memory_id, page_size=page_size, page_token=page_token, timeout=timeout)

    async def iter_history(self, memory_id: str, *, page_size: int = 100,
                           timeout: float | None = None) -> AsyncIterator[HistoryEvent]:
        """Every change of the memory, oldest first."""
        token = ""
        while True:
            page = await self.history(memory_id, page_size=page_size, page_token=token, timeout=timeout)
            for event in page.events:
                yield event
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def versions(self, memory_id: str, *, page_size: int = 20, page_token: str = "",
                       timeout: float | None = None) -> VersionsPage:
        """One page (1..100) of the memory's versions, oldest first (RecallService
        ListMemoryVersions; GET /v1/memories/{id}/versions); :meth:`iter_versions` walks them
        all. NotFound; InvalidArgument naming ``page_size`` (outside 1..100) / ``page_token``."""
        check.memory_id(memory_id)
        check.integer(page_size, "page_size", least=1, most=100)
        check.text(page_token, "page_token")
        return await self._open.versions(memory_id, page_size=page_size, page_token=page_token,
                                         timeout=timeout)

    async def iter_versions(self, memory_id: str, *, page_size: int = 100,
                            timeout: float | None = None) -> AsyncIterator[MemoryVersion]:
        """Every version of the memory, oldest first."""
        token = ""
        while True:
            page = await self.versions(memory_id, page_size=page_size, page_token=token, timeout=timeout)
            for version in page.versions:
                yield version
            if not page.next_page_token:
                return
            token = page.next_page_token

    async def diff_versions(self, memory_id: str, from_version: int, to_version: int, *,
                            timeout: float | None = None) -> VersionDiff:
        """The fields that differ between two versions (RecallService DiffMemoryVersions;
        GET /v1/memories/{id}/versions:diff). NotFound naming ``from``/``to`` (REST) or
        ``from_version``/``to_version`` (gRPC) when the memory has no such version."""
        check.memory_id(memory_id)
        check.integer(from_version, "from_version", bits=64)
        check.integer(to_version, "to_version", bits=64)
        return await self._open.diff_versions(memory_id, from_version, to_version, timeout=timeout)

    async def health(self, *, timeout: float | None = None) -> Health:
        """The service's state (no key needed): healthy | degraded, stores, counts."""
        return await self._open.health(timeout=timeout)

    async def events(self, *, after_sequence: int = 0) -> AsyncIterator[StreamEvent]:
        """The scope's events as they happen, never ending by itself: break out of the loop
        to stop. ``after_sequence``: resume after that ``event.sequence`` (0 = from now).
        :meth:`close` ends an open iteration (the next ``__anext__`` raises
        StopAsyncIteration, so ``async for`` just stops, over both transports); called on a
        closed client it raises ClientClosed. A connection that fails under it is
        Unavailable; over REST a stream on which nothing (no event, no keepalive) came for
        the client's ``stream_idle_timeout`` (45 s) is Unavailable too; InvalidArgument naming ``after_sequence`` for a negative one or one
        past the newest event."""
        check.integer(after_sequence, "after_sequence", least=0, bits=64)
        async for event in self._open.events(after_sequence=after_sequence):
            yield event


# --- the blocking client ---------------------------------------------------------------------


#: Seconds :meth:`_Loop.close` lets the calls in flight end after the connections closed
#: (they end at once: the closed channel cancels them, an open events() stream ends) before
#: it cancels what is left.
_CLOSE_GRACE = 5.0


class _Loop:
    """An event loop on a daemon thread of its own, running the async client's calls.

    Any thread may call :meth:`run` / :meth:`iterate`; :meth:`close` (once) runs a last
    coroutine, lets the calls in flight end, then stops the loop. A call started after that,
    or cut short by it, raises ClientClosed; it never waits on a stopped loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="automem-client", daemon=True)
        self.thread.start()
        self.closed = False
        self._lock = threading.Lock()  # guards closed and _in_flight against close()
        self._in_flight: set[concurrent.futures.Future[Any]] = set()

    def run(self, coro: Awaitable[R]) -> R:
        """``coro``'s result, run on the loop. ClientClosed when the loop is closed (``coro``
        is then closed unrun) or closing cut the call short."""
        with self._lock:
            if self.closed:
                close = getattr(coro, "close", None)
                if close is not None:
                    close()  # no "never awaited" warning
                raise errors.ClientClosed()
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
            self._in_flight.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError:  # close() cancelled what was left
            raise errors.ClientClosed() from None
        finally:
            with self._lock:
                self._in_flight.discard(future)

    def iterate(self, agen: AsyncIterator[R]) -> Iterator[R]:
        """A blocking iterator of ``agen``'s items; it ends when ``agen`` does."""
        try:
            while True:
                try:
                    yield self.run(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            with contextlib.suppress(errors.ClientClosed):  # closed: close() finalized agen
                self.run(agen.aclose())  # type: ignore[attr-defined]

    def close(self, last: Callable[[], Awaitable[None]]) -> None:
        """Run ``last()`` on the loop (closing the connections), give the calls in flight
        :data:`_CLOSE_GRACE` seconds to end, cancel the rest, finalize the async generators
        and stop the loop. Later calls raise ClientClosed; a second close does nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            first = asyncio.run_coroutine_threadsafe(last(), self.loop)  # type: ignore[arg-type]
        try:
            first.result()
        finally:
            with self._lock:
                in_flight = set(self._in_flight)
            _, left = concurrent.futures.wait(in_flight, timeout=_CLOSE_GRACE)
            for future in left:
                future.cancel()
            concurrent.futures.wait(left, timeout=_CLOSE_GRACE)
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result(_CLOSE_GRACE)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=_CLOSE_GRACE)
            if not self.thread.is_alive():
                self.loop.close()


def _blocking(method: Callable[Concatenate[AsyncClient, P], Awaitable[R]]) -> Callable[Concatenate[Client, P], R]:
    """The blocking twin of an AsyncClient method: same parameters, same result."""

    @functools.wraps(method)
    def call(self: Client, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._loop.run(method(self._async, *args, **kwargs))

    return call


def _blocking_iter(method: Callable[Concatenate[AsyncClient, P], AsyncIterator[R]]
                   ) -> Callable[Concatenate[Client, P], Iterator[R]]:
    """The blocking twin of an AsyncClient async-iterator method."""

    @functools.wraps(method)
    def call(self: Client, *args: P.args, **kwargs: P.kwargs) -> Iterator[R]:
        return self._loop.iterate(method(self._async, *args, **kwargs))

    return call


class Client:
    """The blocking client: :class:`AsyncClient`'s methods, each waiting for its answer
    (calls run on a private event loop thread). Build it with :meth:`grpc` or :meth:`rest`
    (same arguments as AsyncClient's); use it as a context manager or call :meth:`close`."""

    def __init__(self, make: Callable[[], AsyncClient]) -> None:
        self._loop = _Loop()

        async def build() -> AsyncClient:  # channels belong to the loop that made them
            return make()

        try:
            self._async = self._loop.run(build())
        except BaseException:  # refused arguments: no thread is left behind

            async def nothing() -> None:
                return None

            self._loop.close(nothing)
            raise

    @classmethod
    def grpc(cls, target: str, **kwargs: Any) -> Client:
        """As :meth:`AsyncClient.grpc`."""
        return cls(lambda: AsyncClient.grpc(target, **kwargs))

    @classmethod
    def rest(cls, base_url: str, **kwargs: Any) -> Client:
        """As :meth:`AsyncClient.rest`."""
        return cls(lambda: AsyncClient.rest(base_url, **kwargs))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the loop thread; any thread may call it, e.g.
        while another iterates :meth:`events`, whose loop then ends. Afterwards every method
        raises ClientClosed; closing again does nothing."""
        self._loop.close(self._async.close)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._loop.closed

    store = _blocking(AsyncClient.store)
    store_batch = _blocking(AsyncClient.store_batch)
    update = _blocking(AsyncClient.update)
    delete = _blocking(AsyncClient.delete)
    supersede = _blocking(AsyncClient.supersede)
    associate = _blocking(AsyncClient.associate)
    get = _blocking(AsyncClient.get)
    recall = _blocking(AsyncClient.recall)
    list_by_tag = _blocking(AsyncClient.list_by_tag)
    iter_by_tag = _blocking_iter(AsyncClient.iter_by_tag)
    related = _blocking(AsyncClient.related)
    history = _blocking(AsyncClient.history)
    iter_history = _blocking_iter(AsyncClient.iter_history)
    versions = _blocking(AsyncClient.versions)
    iter_versions = _blocking_iter(AsyncClient.iter_versions)
    diff_versions = _blocking(AsyncClient.diff_versions)
    health = _blocking(AsyncClient.health)
    events = _blocking_iter(AsyncClient.events)
