"""The embedded shard, shared with the child processes of ``automem up`` (issue 10, item 7).

A qdrant-edge shard has one opener per directory (automem/vectors/edge.py), so a target that
needs vectors had to stay in the process that opened it — with the default embedded store
that kept ``enrich`` beside ``recall`` and ``ingest`` under one interpreter lock. Here the
parent keeps the shard and serves it on a Unix socket (:class:`ShardServer`); a child
reaches it through :class:`SharedVectorStore`, a :class:`~automem.vectors.protocol.VectorStore`
whose every call is forwarded to the parent's store (``QDRANT_URL=unix:<socket>``,
:func:`automem.vectors.make_vector_store`).

Wire format: each message is a 4-byte big-endian length and a pickle. A call is ``(call id,
method, args, kwargs, trace carrier)``; its reply ``(call id, ok, result or exception)``.
Calls on one connection run concurrently and are answered as they finish (the call id
matches them up). Pickle is safe here only because both ends are the same user's processes:
the socket is created mode 0600 in a 0700 directory and the server refuses a peer of another
uid (``SO_PEERCRED``). It is never a network endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import pickle
import socket
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate

from automem.common.errors import Unavailable
from automem.vectors.protocol import PointWrite, ScoredPayload, SearchRequest, VectorFilter, VectorPoint

__all__ = ["METHODS", "ShardServer", "SharedVectorStore", "socket_path"]

log = logging.getLogger(__name__)

#: The store methods a child may call (the :class:`~automem.vectors.protocol.VectorStore`
#: protocol without ``close``, which only closes the child's connection).
METHODS = frozenset({"ensure_collection", "upsert", "upsert_many", "set_payload", "delete", "retrieve", "search",
                     "search_many", "search_sparse", "count", "scroll", "newest_event_time", "dimension", "flush"})

_HEADER = struct.Struct(">I")
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid (socket(7))
#: Longest path a Unix socket may have on Linux (sun_path is 108 bytes with its NUL).
_MAX_PATH = 107


def socket_path(data_dir: Path) -> Path:
    """Where the parent serves its shard: ``<data_dir>/run/vectors.sock``, or a fresh
    0700 directory under the system's temp dir when that path is too long for a socket."""
    path = Path(data_dir).resolve() / "run" / "vectors.sock"
    if len(os.fsencode(path)) <= _MAX_PATH:
        return path
    return Path(tempfile.mkdtemp(prefix="automem-")) / "vectors.sock"


async def _read(reader: asyncio.StreamReader) -> Any:
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))


def _frame(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


class ShardServer:
    """Serves ``store`` (the parent's opened vector store, unbounded: each child bounds its
    own calls) to the children on the Unix socket ``path``.

    :meth:`start` creates the socket (an old one at ``path`` is replaced) and :meth:`close`
    removes it, and its directory when that is left empty; neither touches the store, whose
    owner closes it.
    """

    def __init__(self, store: Any, path: Path) -> None:
        self.store = store
        self.path = Path(path)
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task] = set()

    async def start(self) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        old = os.umask(0o177)  # the socket is created 0600: no window where others could connect
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))
        finally:
            os.umask(old)
        log.info("vector store shared", extra={"path": str(self.path)})

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the run/ (or temp) directory, when nothing else is in it
            self.path.parent.rmdir()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        sock = writer.get_extra_info("socket")
        _, uid, _ = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
        if uid != os.getuid():
            log.warning("vector store socket: refused a peer of uid %d", uid)
            writer.close()
            return
        if task is not None:
            self._connections.add(task)
        lock = asyncio.Lock()
        calls: set[asyncio.Task] = set()
        try:
            while True:
                message = await _read(reader)
                call = asyncio.create_task(self._call(message, writer, lock))
                calls.add(call)
                call.add_done_callback(calls.discard)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            for call in list(calls):
                call.cancel()
            writer.close()
            if task is not None:
                self._connections.discard(task)

    async def _call(self, message: Any, writer: asyncio.StreamWriter, lock: asyncio.Lock) -> None:
        call_id, method, args, kwargs, carrier = message
        token = otel_context.attach(propagate.extract(carrier)) if carrier else None
        try:
            if method not in METHODS:
                raise ValueError(f"unknown vector store method {method!r}")
            reply: tuple = (call_id, True, await getattr(self.store, method)(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 — the caller gets it
            reply = (call_id, False, exc)
        finally:
            if token is not None:
                otel_context.detach(token)
        try:
            data = _frame(reply)
        except Exception:  # noqa: BLE001 — an exception that does not pickle
            data = _frame((call_id, False, RuntimeError(f"{type(reply[2]).__name__}: {reply[2]}")))
        async with lock:
            writer.write(data)
            with contextlib.suppress(ConnectionError):
                await writer.drain()


class SharedVectorStore:
    """The vector store of a child process: every call goes to the parent's
    :class:`ShardServer` at ``path`` over one connection (opened on first use, opened again
    after a failure) and returns or raises what the parent's store returned or raised.

    A lost connection fails the calls waiting on it with :class:`~automem.common.errors.Unavailable`
    (HTTP 503, gRPC UNAVAILABLE). Timeouts are the caller's: the runtime wraps this store in
    :class:`~automem.vectors.bounded.BoundedVectorStore` like any other. Spans are the
    parent's (the store there is traced; each call carries this process's trace context).
    """

    backend = "edge"

    def __init__(self, path: Path | str, collection: str = "memories") -> None:
        self.path = Path(path)
        self.collection = collection
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task | None = None
        self._connecting = asyncio.Lock()
        self._closed = False

    async def _connection(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is None or self._writer.is_closing():
                try:
                    reader, self._writer = await asyncio.open_unix_connection(str(self.path))
                except OSError as exc:
                    raise Unavailable(f"vector store (shared at {self.path}) is not reachable: {exc}") from exc
                self._reading = asyncio.create_task(self._read_replies(reader, self._writer))
            return self._writer

    async def _read_replies(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                call_id, ok, value = await _read(reader)
                future = self._pending.pop(call_id, None)
                if future is None or future.done():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            lost, self._pending = self._pending, {}
            for future in lost.values():
                if not future.done():
                    future.set_exception(Unavailable(f"vector store (shared at {self.path}): connection lost"))

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise RuntimeError(f"vector store {self.collection!r} is closed")
        writer = await self._connection()
        call_id = next(self._ids)
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        future = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        try:
            writer.write(_frame((call_id, method, args, kwargs, carrier)))
            await writer.drain()
            return await future
        except ConnectionError as exc:
            raise Unavailable(f"vector store (shared at {self.path}): {exc}") from exc
        finally:
            self._pending.pop(call_id, None)

    async def ensure_collection(self, dimension: int) -> None:
        """See :meth:`automem.vectors.protocol.VectorStore.ensure_collection`."""
        await self._call("ensure_collection", dimension)

    async def upsert(self, point_id: str, vector: Sequence[float], payload: dict,
                     sparse: tuple[list[int], list[float]] | None = None) -> None:
        """See :meth:`automem.vectors.protocol.VectorStore.upsert`."""
        await self._call("upsert", point_id, vector, payload, sparse)

    async def upsert_many(self, points: Sequence[PointWrite]) -> None:
        """See :meth:`automem.vectors.protocol.VectorStore.upsert_many`."""
        await self._call("upsert_many", points)

    async def set_payload(self, point_id: str, payload: dict) -> None:
        """See :meth:`automem.vectors.protocol.VectorStore.set_payload`."""
        await self._call("set_payload", point_id, payload)

    async def delete(self, point_ids: Sequence[str]) -> None:
        """See :meth:`automem.vectors.protocol.VectorStore.delete`."""
        await self._call("delete", point_ids)

    async def retrieve(self, point_ids: Sequence[str], with_vectors: bool = False) -> list[VectorPoint]:
        """See :meth:`automem.vectors.protocol.VectorStore.retrieve`."""
        return await self._call("retrieve", point_ids, with_vectors)

    async def search(self, vector: Sequence[float], limit: int,
                     flt: VectorFilter | None = None) -> list[tuple[str, float]]:
        """See :meth:`automem.vectors.protocol.VectorStore.search`."""
        return await self._call("search", vector, limit, flt)

    async def search_many(self, requests: Sequence[SearchRequest],
                          payload_keys: Sequence[str] | None = None) -> list[list[ScoredPayload]]:
        """See :meth:`automem.vectors.protocol.VectorStore.search_many`."""
        return await self._call("search_many", requests, payload_keys)

    async def search_sparse(self, indices: Sequence[int], values: Sequence[float], limit: int,
                            flt: VectorFilter | None = None) -> list[tuple[str, float]]:
        """See :meth:`automem.vectors.protocol.VectorStore.search_sparse`."""
        return await self._call("search_sparse", indices, values, limit, flt)

    async def count(self, flt: VectorFilter | None = None) -> int:
        """See :meth:`automem.vectors.protocol.VectorStore.count`."""
        return await self._call("count", flt)

    async def scroll(self, flt: VectorFilter | None = None, limit: int = 256,
                     offset: str | None = None) -> tuple[list[VectorPoint], str | None]:
        """See :meth:`automem.vectors.protocol.VectorStore.scroll`."""
        return await self._call("scroll", flt, limit, offset)

    async def newest_event_time(self, flt: VectorFilter | None = None) -> float | None:
        """See :meth:`automem.vectors.protocol.VectorStore.newest_event_time`."""
        return await self._call("newest_event_time", flt)

    async def dimension(self) -> int | None:
        """See :meth:`automem.vectors.protocol.VectorStore.dimension`."""
        return await self._call("dimension")

    async def flush(self) -> None:
        """See :meth:`automem.vectors.protocol.VectorStore.flush`."""
        await self._call("flush")

    async def close(self) -> None:
        """Close this process's connection (the parent's shard stays open)."""
        self._closed = True
        if self._writer is not None:
            self._writer.close()
        if self._reading is not None:
            self._reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reading
