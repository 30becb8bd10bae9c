"""The REST transport: the same calls as :mod:`automem_client._grpc` over the gateway's
AutoMem routes (../shared/AUTOMEM_API.md; automem/gateway/routes_*.py) with httpx, for
callers that cannot reach gRPC.

Retries: reads and the writes sent with an ``Idempotency-Key`` (store, batch store,
supersede) are tried again, up to ``max_attempts`` in all with doubling backoff, when the
connection fails or the answer is 503 (the gateway) or 502 (a proxy in front of it); the
key makes a repeated store answer the first memory. Updates, deletes and associations are
sent once. A deadline passed (DeadlineExceeded, a proxy's 504 too) is not tried again, as
over gRPC.

Answers: a success that is not the gateway's JSON object with the fields the call reads (a
proxy's or captive portal's HTML page, an empty body, a JSON list) is
:class:`~automem_client.errors.Unavailable` naming the status and content type, never a
KeyError or an empty result as if the service had answered.

Closing: :meth:`RestTransport.close` closes the HTTP connections; a request in flight then
raises :class:`~automem_client.errors.ClientClosed` (not httpx's ReadError, nor a retry),
an open :meth:`RestTransport.events` stream ends, and later calls raise ClientClosed (not
httpx's RuntimeError).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
from google.protobuf import json_format

from automem_client import _checks as check
from automem_client import errors
from automem_client._proto.automem.v1 import events_pb2
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
    ScoredMemory,
    Stored,
    StreamEvent,
    Superseded,
    TimeLike,
    VersionDiff,
    VersionsPage,
    _time,
)


def _segment(value: str) -> str:
    """``value`` as one path segment: every reserved character percent-encoded (``/``, ``?``,
    ``#``...), and a ``.`` or ``..`` id too, which URL resolution would otherwise remove
    (an id ``x/../<other id>`` reached the other memory)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def _iso(value: TimeLike | None) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value


def memory_body(item: MemoryInput) -> dict[str, Any]:
    """POST /memory's body of ``item`` (unset fields left out: the service's defaults)."""
    body: dict[str, Any] = {"content": item.content, "tags": list(item.tags)}
    for name in ("importance", "confidence", "type", "metadata", "embedding"):
        value = getattr(item, name)
        if value is not None:
            body[name] = value
    for name in ("timestamp", "t_valid", "t_invalid"):
        if (value := _iso(getattr(item, name))) is not None:
            body[name] = value
    if item.require_review:
        body["require_review"] = True
    return body


def _params(**given: Any) -> list[tuple[str, str]]:
    """Query parameters: lists repeated, booleans as true/false, None and "" left out."""
    out: list[tuple[str, str]] = []
    for name, value in given.items():
        if value is None or value == "" or value == []:
            continue
        if isinstance(value, (list, tuple)):
            out.extend((name, str(v)) for v in value)
        elif isinstance(value, bool):
            out.append((name, "true" if value else "false"))
        elif isinstance(value, datetime):
            out.append((name, _iso(value) or ""))
        else:
            out.append((name, str(value)))
    return out


def _decoded(response: httpx.Response) -> Any:
    """The answer's JSON, or its text when it is none."""
    try:
        return response.json()
    except ValueError:
        return response.text


#: The longest URL httpx sends (``httpx._urlparse.MAX_URL_LENGTH``); a longer one was a bare
#: httpx.InvalidURL.
MAX_URL_LENGTH = 65536


def _check_url_length(path: str, params: Any) -> None:
    """InvalidArgument naming the argument that makes the URL longer than
    :data:`MAX_URL_LENGTH`: the longest query parameter, or ``memory_id`` when the path (whose
    one variable segment is the memory id) is longer than each."""
    pairs = [(name, quote(str(value), safe="")) for name, value in (params or [])]
    total = len(path) + sum(len(name) + len(value) + 2 for name, value in pairs)
    if total <= MAX_URL_LENGTH - 1024:  # room for the base URL
        return
    name, size = max([("memory_id", len(path)), *((n, len(v)) for n, v in pairs)], key=lambda p: p[1])
    raise errors.InvalidArgument(f"{name}: too long to send over REST ({size} characters URL-encoded; the URL "
                                 f"may hold at most {MAX_URL_LENGTH})", field=name)


#: Seconds :meth:`RestTransport.events` waits for the next line of the stream (an event or
#: the gateway's keepalive comment, sent every 30 s: ``AUTOMEM_STREAM_KEEPALIVE_SECONDS``)
#: before it gives the stream up as stalled (Unavailable). A gateway whose keepalive is
#: longer needs a longer one (``Client.rest(stream_idle_timeout=...)``).
STREAM_IDLE_TIMEOUT = 45.0


class RestTransport:
    """Async calls over the REST gateway (see the module docstring).

    Args:
        base_url: the gateway, e.g. ``https://automem.example:8001``.
        api_key: sent as ``Authorization: Bearer <key>``; scope as ``X-Automem-Scope``.
        verify: TLS verification as httpx takes it (True, False, or an ``ssl.SSLContext``);
            ``ca_file``: a PEM bundle to trust instead.
        timeout: default deadline of a call in seconds (None = none).
        max_attempts: tries per retried call (1 = no retry).
        stream_idle_timeout: seconds :meth:`events` waits for the next event or keepalive
            (:data:`STREAM_IDLE_TIMEOUT`; None = for ever).
    """

    def __init__(self, base_url: str, *, api_key: str = "", scope: str = "", verify: Any = True,
                 ca_file: str | None = None, timeout: float | None = 30.0, max_attempts: int = 4,
                 stream_idle_timeout: float | None = STREAM_IDLE_TIMEOUT) -> None:
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if scope:
            headers["X-Automem-Scope"] = scope
        if ca_file:
            import ssl

            verify = ssl.create_default_context(cafile=ca_file)
        self._http_args: dict[str, Any] = {"base_url": base_url.rstrip("/"), "headers": headers, "verify": verify,
                                           "timeout": httpx.Timeout(timeout)}
        self._http: httpx.AsyncClient | None = None
        self._http_loop: asyncio.AbstractEventLoop | None = None
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self.stream_idle_timeout = stream_idle_timeout
        self.closed = False

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client of the running event loop, made on first use and again once the
        loop it was made in has closed: its pooled connections belong to that loop, so a
        transport used in a second ``asyncio.run`` failed with "Event loop is closed".
        RuntimeError outside a running loop."""
        loop = asyncio.get_running_loop()
        if self._http is None or (self._http_loop is not loop and self._http_loop is not None
                                  and self._http_loop.is_closed()):
            self._http = httpx.AsyncClient(**self._http_args)
            self._http_loop = loop
        return self._http

    async def close(self) -> None:
        """Close the HTTP connections (again: nothing; none made yet, or made in a loop since
        closed: nothing to close). Requests in flight raise ClientClosed, an open
        :meth:`events` stream ends, later calls raise ClientClosed."""
        if self.closed:
            return
        self.closed = True
        if self._http is not None and self._http_loop is asyncio.get_running_loop():
            await self._http.aclose()

    def check_open(self) -> None:
        """ClientClosed once :meth:`close` was called."""
        if self.closed:
            raise errors.ClientClosed()

    async def _request(self, method: str, path: str, *, retry: bool, timeout: float | None = None,
                       ok: tuple[int, ...] = (), expect: tuple[str, ...] = (), **kwargs: Any) -> dict[str, Any]:
        """The JSON object the gateway answers (see the module docstring for retries).
        ``ok``: error statuses whose body is answered too (health's 503); ``expect``: keys
        the answer must hold. Unavailable for an answer that is no JSON object or lacks one
        of ``expect``; InvalidArgument naming the argument when the URL would be too long to
        send (a ``memory_id`` in ``path`` or a query parameter)."""
        check.timeout(timeout)
        _check_url_length(path, kwargs.get("params"))
        attempts = self.max_attempts if retry else 1
        delay = 0.2
        kwargs["timeout"] = httpx.Timeout(self.timeout if timeout is None else timeout)
        for attempt in range(1, attempts + 1):
            self.check_open()  # also between retries
            try:
                response = await self.http.request(method, path, **kwargs)
            except (httpx.HTTPError, httpx.StreamError, RuntimeError) as exc:
                if self.closed:  # close() cut the connection, or httpx refuses a closed client
                    raise errors.ClientClosed() from None
                if isinstance(exc, httpx.TimeoutException):
                    raise errors.DeadlineExceeded(f"{method} {path}: {exc.__class__.__name__}") from None
                if not isinstance(exc, httpx.TransportError):
                    raise
                if attempt < attempts:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 3.0)
                    continue
                raise errors.Unavailable(f"{method} {path}: {exc.__class__.__name__}: {exc}") from None
            if response.status_code in (502, 503) and attempt < attempts:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 3.0)
                continue
            body = _decoded(response)
            if response.status_code >= 400 and response.status_code not in ok:
                sent = response.request.headers.get("content-length", "")
                raise errors.from_http(response.status_code, body, reason=response.reason_phrase,
                                       content_type=response.headers.get("content-type", ""),
                                       sent=int(sent) if sent.isdigit() else None)
            missing = [key for key in expect if key not in body] if isinstance(body, dict) else []
            if not isinstance(body, dict) or missing:
                kind = response.headers.get("content-type", "").split(";", 1)[0].strip() or "no content type"
                what = (f"a JSON object without {', '.join(missing)}" if missing else
                        f"a JSON {type(body).__name__}" if "json" in kind else
                        "an empty body" if not response.content else kind)
                raise errors.Unavailable(f"{method} {path}: unexpected answer: HTTP {response.status_code} "
                                         f"{response.reason_phrase} with {what}, not the gateway's JSON "
                                         "(a proxy or another server answered?)", http_status=response.status_code)
            return body
        raise AssertionError("unreachable")  # pragma: no cover

    # --- writes --------------------------------------------------------------------

    async def store(self, item: MemoryInput, *, idempotency_key: str, timeout: float | None = None) -> Stored:
        body = await self._request("POST", "/memory", retry=True, timeout=timeout, json=memory_body(item), expect=("memory",),
                                   headers={"Idempotency-Key": idempotency_key})
        return Stored(Memory.from_json(body["memory"]), bool(body.get("deduplicated")))

    async def store_batch(self, items: Sequence[MemoryInput], *, idempotency_key: str,
                          timeout: float | None = None) -> BatchStored:
        body = await self._request("POST", "/memory/batch", retry=True, timeout=timeout, expect=("memory_ids",),
                                   json={"memories": [memory_body(i) for i in items]},
                                   headers={"Idempotency-Key": idempotency_key})
        return BatchStored(list(body["memory_ids"]), [bool(d) for d in body.get("deduplicated", [])])

    async def update(self, memory_id: str, fields: dict[str, Any], *, etag: int, add_tags: Sequence[str],
                     timeout: float | None = None) -> Memory:
        body: dict[str, Any] = {k: (_iso(v) if k in ("timestamp", "t_valid", "t_invalid") else v)
                                for k, v in fields.items()}
        if etag:
            body["etag"] = etag
        if add_tags:
            body["add_tags"] = list(add_tags)
        answer = await self._request("PATCH", f"/memory/{_segment(memory_id)}", retry=False, timeout=timeout, json=body,
                                     expect=("memory",))
        return Memory.from_json(answer["memory"])

    async def delete(self, memory_id: str, *, etag: int, purge: bool, reason: str,
                     timeout: float | None = None) -> Memory:
        headers = {"If-Match": f'"{etag}"'} if etag else {}
        answer = await self._request("DELETE", f"/memory/{_segment(memory_id)}", retry=False, timeout=timeout,
                                     expect=("memory",),
                                     params=_params(purge=purge or None, reason=reason), headers=headers)
        return Memory.from_json(answer["memory"])

    async def supersede(self, memory_id: str, item: MemoryInput, *, relation: str, reason: str, etag: int,
                        idempotency_key: str, timeout: float | None = None) -> Superseded:
        body = memory_body(item)
        body["supersede_relation"] = relation
        if reason:
            body["supersede_reason"] = reason
        headers = {"Idempotency-Key": idempotency_key}
        if etag:
            headers["If-Match"] = f'"{etag}"'
        answer = await self._request("POST", f"/v1/memories/{_segment(memory_id)}:supersede", retry=True, timeout=timeout,
                                     expect=("memory", "superseded"),
                                     json=body, headers=headers)
        return Superseded(Memory.from_json(answer["memory"]), Memory.from_json(answer["superseded"]),
                          Relation.from_json(answer["relation"]) if answer.get("relation") else None)

    async def associate(self, memory1_id: str, memory2_id: str, *, type: str, strength: float | None,
                        reason: str, timeout: float | None = None) -> Relation:
        body: dict[str, Any] = {"memory1_id": memory1_id, "memory2_id": memory2_id, "type": type}
        if strength is not None:
            body["strength"] = strength
        if reason:
            body["reason"] = reason
        return Relation.from_json(await self._request("POST", "/associate", retry=False, timeout=timeout, json=body))

    # --- reads ---------------------------------------------------------------------

    async def get(self, memory_id: str, *, as_of: TimeLike | None, known_at: TimeLike | None,
                  state_mode: str | None, version: int | None = None, timeout: float | None = None) -> Memory:
        answer = await self._request("GET", f"/memory/{_segment(memory_id)}", retry=True, timeout=timeout,
                                     expect=("memory",),
                                     params=_params(as_of=_iso(as_of), known_at=_iso(known_at),
                                                    state_mode=state_mode, version=version))
        return Memory.from_json(answer["memory"])

    async def recall(self, query: str, options: dict[str, Any], *, timeout: float | None = None) -> RecallResult:
        o = dict(options)
        embedding = o.pop("embedding")
        for name in ("relation_limit", "expansion_limit"):  # 0 = the service's default, as over gRPC
            if not o[name]:
                del o[name]
        params = _params(query=query, embedding=",".join(str(v) for v in embedding) if embedding else None,
                         **{k: (_iso(v) if k in ("start", "end", "as_of", "known_at") else v)
                            for k, v in o.items()})
        answer = await self._request("GET", "/recall", retry=True, timeout=timeout, params=params, expect=("results",))
        window = answer.get("time_window") or {}
        return RecallResult(
            results=[ScoredMemory(Memory.from_json(r["memory"]), float(r.get("score") or 0.0),
                                  float(r.get("final_score") or 0.0), r.get("match_type") or "",
                                  dict(r.get("score_components") or {}), r.get("replaces_id"), r.get("relation_type"))
                     for r in answer.get("results", [])],
            has_more=bool(answer.get("has_more")), total=answer.get("total"), limit=int(answer.get("limit") or 0),
            time_start=_time(window.get("start")), time_end=_time(window.get("end")),
            time_window_warning=answer.get("time_window_warning"), arms=list(answer.get("arms") or []),
            degraded=list(answer.get("degraded") or []))

    async def list_by_tag(self, tags: Sequence[str], *, page_size: int | None, page_token: str, tag_mode: str,
                          tag_match: str, as_of: TimeLike | None, known_at: TimeLike | None, state_mode: str | None,
                          include_total: bool, timeout: float | None = None) -> Page:
        params = _params(tags=list(tags), limit=page_size, page_token=page_token, tag_mode=tag_mode.lower(),
                         tag_match=tag_match.lower(), as_of=_iso(as_of), known_at=_iso(known_at),
                         state_mode=state_mode, include_total=include_total or None)
        answer = await self._request("GET", "/memory/by-tag", retry=True, timeout=timeout, params=params)
        return Page([Memory.from_json(m) for m in answer.get("memories", [])], answer.get("next_page_token"),
                    bool(answer.get("has_more")), answer.get("total"))

    async def related(self, memory_id: str, *, relationship_types: Sequence[str], max_depth: int, limit: int,
                      as_of: TimeLike | None, known_at: TimeLike | None,
                      timeout: float | None = None) -> list[RelatedMemory]:
        params = _params(relationship_types=list(relationship_types), max_depth=max_depth, limit=limit,
                         as_of=_iso(as_of), known_at=_iso(known_at))
        answer = await self._request("GET", f"/memories/{_segment(memory_id)}/related", retry=True, timeout=timeout,
                                     params=params)
        return [RelatedMemory(Memory.from_json(r["memory"]), r.get("relation_type") or "",
                              float(r.get("strength") or 0.0), int(r.get("depth") or 0), r.get("replaces_id") or "")
                for r in answer.get("related_memories", [])]

    async def history(self, memory_id: str, *, page_size: int, page_token: str,
                      timeout: float | None = None) -> HistoryPage:
        answer = await self._request("GET", f"/v1/memories/{_segment(memory_id)}/history", retry=True, timeout=timeout,
                                     params=_params(page_size=page_size or None, page_token=page_token))
        events = [HistoryEvent.from_proto(json_format.ParseDict(e, events_pb2.MemoryEvent(),
                                                                ignore_unknown_fields=True))
                  for e in answer.get("events", [])]
        return HistoryPage(events, answer.get("next_page_token"), bool(answer.get("truncated")))

    async def versions(self, memory_id: str, *, page_size: int, page_token: str,
                       timeout: float | None = None) -> VersionsPage:
        answer = await self._request("GET", f"/v1/memories/{_segment(memory_id)}/versions", retry=True, timeout=timeout,
                                     params=_params(page_size=page_size or None, page_token=page_token))
        return VersionsPage([MemoryVersion.from_json(v) for v in answer.get("versions", [])],
                            answer.get("next_page_token"))

    async def diff_versions(self, memory_id: str, from_version: int, to_version: int, *,
                            timeout: float | None = None) -> VersionDiff:
        answer = await self._request("GET", f"/v1/memories/{_segment(memory_id)}/versions:diff", retry=True, timeout=timeout,
                                     params=_params(**{"from": from_version, "to": to_version}))
        return VersionDiff.from_json(answer)

    async def health(self, *, timeout: float | None = None) -> Health:
        body = await self._request("GET", "/health", retry=True, timeout=timeout, ok=(503,), expect=("status",))
        return Health(body.get("status", "degraded"), body.get("falkordb") == "connected",
                      body.get("qdrant") == "connected", int(body.get("memory_count") or 0),
                      int(body.get("vector_count") or 0))

    async def events(self, *, after_sequence: int) -> AsyncIterator[StreamEvent]:
        """The scope's events (``GET /stream``, SSE); ends (no error) when :meth:`close`
        closes the connection under it; ClientClosed when called after close();
        Unavailable / DeadlineExceeded when the connection fails or cannot be made;
        Unavailable when nothing (no event, no keepalive comment) came for
        ``stream_idle_timeout`` seconds: the gateway or the connection stalled (it hung for
        ever: break-it review)."""
        self.check_open()
        headers = {"Accept": "text/event-stream"}
        if after_sequence:
            headers["Last-Event-ID"] = str(after_sequence)
        try:
            async with self.http.stream("GET", "/stream", headers=headers,
                                        timeout=httpx.Timeout(self.timeout, read=self.stream_idle_timeout)) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise errors.from_http(response.status_code, _decoded(response), reason=response.reason_phrase,
                                           content_type=response.headers.get("content-type", ""))
                event_id, data = "", []
                async for line in response.aiter_lines():
                    if line == "":
                        if data:
                            yield _sse_event(event_id, "\n".join(data))
                        event_id, data = "", []
                    elif line.startswith(":"):
                        continue  # keep-alive comment
                    else:
                        name, _, value = line.partition(":")
                        value = value.removeprefix(" ")
                        if name == "id":
                            event_id = value
                        elif name == "data":
                            data.append(value)
        except (httpx.HTTPError, httpx.StreamError, RuntimeError) as exc:
            if self.closed:  # close() cut the stream: it ends
                return
            if isinstance(exc, httpx.ReadTimeout):
                raise errors.Unavailable(
                    f"GET /stream: nothing came for {self.stream_idle_timeout:g} s, not even the gateway's keepalive "
                    "(sent every 30 s by default): the service or the connection stalled; iterate events() again "
                    "with after_sequence=<the last event's sequence> to resume") from None
            if isinstance(exc, httpx.TimeoutException):
                raise errors.DeadlineExceeded(f"GET /stream: {exc.__class__.__name__}") from None
            if isinstance(exc, httpx.TransportError):
                raise errors.Unavailable(f"GET /stream: {exc.__class__.__name__}: {exc}") from None
            raise


def _sse_event(event_id: str, data: str) -> StreamEvent:
    """A StreamEvent of one SSE message of ``GET /stream`` (``{"type", "timestamp",
    "event_id", "data"}``, automem/gateway/routes_stream.py ``stream_message``)."""
    body = json.loads(data)
    payload = body.get("data") or {}
    return StreamEvent(body.get("type", ""), int(event_id) if event_id.isdigit() else None,
                       body.get("event_id", ""), payload.get("id") or payload.get("memory_id") or "",
                       _time(body.get("timestamp")), payload.get("scope", ""), payload.get("actor", ""))
