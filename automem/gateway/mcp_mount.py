"""``/mcp`` in the gateway, built on its first request.

The MCP SDK and the tools' schemas cost the gateway process ~24 MiB of RSS when imported
(docs/benchmarks.md, "A parent without the model, `/mcp` built on first use, and targets
sharing a child"); a gateway that only serves REST never pays it. The first request to ``/mcp`` (or ``/mcp/``, answered
without a redirect: the SDK client does not follow one) imports automem/gateway/mcp_server.py,
builds the server and starts its session manager in a task of its own, which runs until the
app's lifespan ends; concurrent first requests wait for the one build. A POST body is read
by the REST gateway's JSON reader first: what it refuses (a key given twice, a number no
double holds) is a 400 naming the argument, not a value the SDK silently changed. A ``GET``
event stream ends once its key no longer passes, or when the gateway stops
(``LazyMCPEndpoint._event_stream``); at most ``Settings.mcp_max_streams`` are open at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.requests import Request

from automem.common.client import AutomemClient
from automem.common.settings import Settings
from automem.gateway import jsonrpc
from automem.gateway.deps import auth_error
from automem.gateway.errors import error_response
from automem.gateway.schemas import SCOPE_PARAMETER_ERROR, scope_parameter

#: Seconds between the credential checks of an open ``GET /mcp`` event stream.
STREAM_AUTH_SECONDS = 1.0


class LazyMCPEndpoint:
    """ASGI endpoint that builds the streamable-HTTP MCP app on its first call.

    Args:
        client: the gateway's gRPC client (the tools call the services through it).
        settings: the gateway's settings.
        path: where the endpoint is mounted.
    """

    def __init__(self, client: AutomemClient, settings: Settings, path: str = "/mcp") -> None:
        #: ``http.route`` of its requests (automem/gateway/metrics.py ``_route_template``).
        self.route_template = path
        self._client, self._settings, self._path = client, settings, path
        self._endpoint: Any = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._ending = asyncio.Event()
        self._runner: asyncio.Task | None = None
        #: ``GET`` event streams open now (:meth:`_event_stream`), at most ``settings.mcp_max_streams``.
        self.open_streams = 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if scope_parameter(name for name, _ in query):
            # The MCP tools act in the key's default scope or the X-Automem-Scope header's.
            await error_response(400, SCOPE_PARAMETER_ERROR)(scope, receive, send)
            return
        if scope.get("method") == "POST":
            body, receive = await _buffered(receive)
            if refusal := _refused_body(body):
                await refusal(scope, receive, send)
                return
        if scope.get("method") == "GET":
            if (refused := self._stream_refusal()) is not None:
                await refused(scope, receive, send)
                return
            self.open_streams += 1  # taken before any await: concurrent GETs cannot pass the cap together
            try:
                await self._started()
                await self._event_stream(scope, receive, send)
            finally:
                self.open_streams -= 1
            return
        await self._started()
        await self._endpoint(scope, receive, send)

    async def _started(self) -> None:
        """Build and start the MCP app on the first call; concurrent first calls wait for the one build."""
        if self._endpoint is None:
            async with self._lock:
                if self._endpoint is None:
                    await self._start()

    def _stream_refusal(self) -> JSONResponse | None:
        """The 503 (with ``Retry-After``) answering a ``GET`` event stream while the gateway stops
        or while ``settings.mcp_max_streams`` are open, or None: open ones were counted but not
        capped, each holding a task that checks its key every second."""
        if self._ending.is_set():
            return error_response(503, "the gateway is stopping; open the GET /mcp event stream again on "
                                       "another replica or once it is back")
        limit = self._settings.mcp_max_streams
        if self.open_streams >= limit:
            return error_response(503, f"too many open GET /mcp event streams: this gateway process serves at "
                                       f"most {limit} (AUTOMEM_MCP_MAX_STREAMS); retry later (the tools need no "
                                       "stream: POST /mcp answers them)")
        return None

    def end_streams(self) -> None:
        """End every open ``GET`` event stream (each with an SSE comment saying the gateway is
        stopping) and refuse new ones with a 503: uvicorn waits for open responses before it
        stops, and an event stream never ends by itself, so a stop waited out its timeout and
        left them hanging. Called by the gateway target's stop (automem/targets.py) and by
        :meth:`close`."""
        self._ending.set()

    async def _event_stream(self, scope: dict, receive: Any, send: Any) -> None:
        """``GET``: streamable HTTP's server-to-client event stream, ended once its credentials
        no longer pass (a key revoked or expired), as ``/stream`` ends: they are checked every
        :data:`STREAM_AUTH_SECONDS` (automem/gateway/deps.py :func:`auth_error`, whose cache
        keeps a success for 1 s), so the stream ends within about 2 s of the revocation. It
        ends at once when the gateway stops (:meth:`end_streams`). The SDK is told the client
        went away (``http.disconnect``), then the response ends with an SSE comment saying
        why. It stayed open indefinitely before."""
        revoked = asyncio.Event()
        ended = asyncio.Event()  # revoked, or the gateway stopping
        finished = False

        async def watch() -> None:
            while True:
                await asyncio.sleep(STREAM_AUTH_SECONDS)
                if await auth_error(Request(scope)) is not None:
                    revoked.set()
                    ended.set()
                    return

        async def stopping() -> None:
            await self._ending.wait()
            ended.set()

        async def watched_receive() -> dict:
            if ended.is_set():
                return {"type": "http.disconnect"}
            message = asyncio.ensure_future(receive())
            over = asyncio.ensure_future(ended.wait())
            await asyncio.wait((message, over), return_when=asyncio.FIRST_COMPLETED)
            over.cancel()
            if message.done():
                return message.result()
            message.cancel()
            return {"type": "http.disconnect"}

        async def watched_send(message: dict) -> None:
            nonlocal finished
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        watchers = (asyncio.create_task(watch(), name="mcp-stream-auth"),
                    asyncio.create_task(stopping(), name="mcp-stream-stop"))
        try:
            await self._endpoint(scope, watched_receive, watched_send)
            if ended.is_set() and not finished:
                why = (b"the key was revoked or is no longer valid; the stream ends" if revoked.is_set() else
                       b"the gateway is stopping; the stream ends (open it again once the gateway is back)")
                await send({"type": "http.response.body", "more_body": False, "body": b": " + why + b"\n\n"})
        finally:
            for watcher in watchers:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher

    async def _start(self) -> None:
        from automem.gateway.mcp_server import http_endpoint

        endpoint, manager = http_endpoint(self._client, self._settings, self._path)
        started = asyncio.get_running_loop().create_future()

        async def run() -> None:
            # The session manager's task group must be entered and left in one task.
            try:
                async with manager.run():
                    started.set_result(None)
                    await self._stop.wait()
            except BaseException as exc:
                if not started.done():
                    started.set_exception(exc)
                raise

        self._runner = asyncio.create_task(run(), name="mcp-session-manager")
        await started
        self._endpoint = endpoint

    async def close(self) -> None:
        """End the open event streams (:meth:`end_streams`) and stop the session manager, if a
        request started it."""
        self.end_streams()
        self._stop.set()
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner


async def _buffered(receive: Any) -> tuple[bytes, Any]:
    """The whole request body, and a ``receive`` that gives it again (then the original's)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return b"", receive
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def again() -> dict:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, again


def _refused_body(body: bytes) -> JSONResponse | None:
    """The answer to a JSON-RPC body this server does not take (a batch, a response, no
    JSON-RPC message, a request whose ``id`` is no string or integer, a ``jsonrpc`` other than
    ``"2.0"``, a ``method`` that is no string, ``params`` that are no object) or holding what
    no store keeps as sent, or None: HTTP 400 with the JSON-RPC error of
    automem/gateway/jsonrpc.py :func:`~automem.gateway.jsonrpc.invalid_request` (-32600; the
    SDK answered a batch or a bad ``jsonrpc`` / ``method`` -32602 with pydantic's dump, and a
    response or a request with a null id 202) or :func:`~automem.gateway.jsonrpc.refusal`
    (-32602). Malformed JSON is left to the SDK (its parse error)."""
    refused = jsonrpc.invalid_request(body) or jsonrpc.refusal(body)
    return None if refused is None else JSONResponse(refused, status_code=400)


def mount(app: FastAPI, settings: Settings, client: AutomemClient, path: str = "/mcp") -> LazyMCPEndpoint:
    """Route ``path`` and ``path/`` (outside the OpenAPI schema) to a :class:`LazyMCPEndpoint`,
    closed when the app's lifespan ends (wrapped around whatever lifespan the app has)."""
    endpoint = LazyMCPEndpoint(client, settings, path)
    app.add_route(path, endpoint, include_in_schema=False)
    app.add_route(path + "/", endpoint, include_in_schema=False)
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        try:
            async with inner(a) as state:
                yield state
        finally:
            await endpoint.close()

    app.router.lifespan_context = lifespan
    app.state.mcp_endpoint = endpoint
    return endpoint
