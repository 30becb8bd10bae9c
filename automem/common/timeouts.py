"""Bounded calls to the stores: the one mechanism that keeps a stalled FalkorDB, NATS or
vector store from stalling a request (issue 12, item 10).

Every call the graph store (automem/graph/store.py), the bus and the outbox
(automem/common/bus.py, automem/common/outbox.py) and the vector store
(automem/vectors/bounded.py) make runs inside :func:`store_call`, bounded by
``settings.store_timeout_seconds`` (``AUTOMEM_STORE_TIMEOUT_S``, default 5 s). A call that
does not finish in time raises :class:`StoreTimeout`, an :class:`Unavailable`: gRPC
UNAVAILABLE, HTTP 503 with ``Retry-After`` (automem/gateway/errors.py).

Maintenance jobs that legitimately hold a store longer (a restore, a reindex, a
consolidation pass over the whole graph) run inside :func:`job_bound`, which raises the
bound of every store call made in its context (``settings.store_job_timeout_seconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Iterator
from contextvars import ContextVar
from typing import Any

from automem.common.errors import Unavailable

#: The bound of the store calls of a maintenance job in this context (None = the store's own).
_JOB_BOUND: ContextVar[float | None] = ContextVar("automem_store_job_bound", default=None)


class StoreTimeout(Unavailable):
    """A store did not answer within its bound (HTTP 503 with ``Retry-After``).

    ``store``: which one ("FalkorDB", "NATS", "vector store"); ``seconds``: the bound.
    """

    def __init__(self, store: str, seconds: float) -> None:
        super().__init__(f"{store} did not answer within {seconds:g}s; retry later")
        self.store = store
        self.seconds = seconds


def effective_bound(seconds: float) -> float | None:
    """The bound a store call made now gets: the job's (:func:`job_bound`) when inside one,
    else ``seconds``; None (no bound) when that is 0 or less."""
    job = _JOB_BOUND.get()
    bound = job if job is not None else seconds
    return bound if bound > 0 else None


@contextlib.asynccontextmanager
async def store_call(store: str, seconds: float) -> AsyncIterator[float | None]:
    """Bound the body to ``seconds`` (see :func:`effective_bound`); yields the bound.

    Raises:
        StoreTimeout: the body did not finish in time (it is cancelled; redis-py and nats-py
            drop the connection of a cancelled command, so no late reply is read by another).
    """
    bound = effective_bound(seconds)
    try:
        async with asyncio.timeout(bound):
            yield bound
    except TimeoutError as exc:
        raise StoreTimeout(store, bound or 0.0) from exc


@contextlib.contextmanager
def job_bound(seconds: float) -> Iterator[None]:
    """Store calls made in this context (tasks started in it included) are bounded by
    ``seconds`` instead of the stores' request bound: for maintenance jobs."""
    token = _JOB_BOUND.set(seconds)
    try:
        yield
    finally:
        _JOB_BOUND.reset(token)


def long_running(method: Any) -> Any:
    """Decorator for a servicer method (a coroutine or an async generator method) that does
    a maintenance job: its store calls run inside :func:`job_bound` with the servicer's
    ``self.settings.store_job_timeout_seconds``."""
    if inspect.isasyncgenfunction(method):
        @functools.wraps(method)
        async def generator(self: Any, *args: Any, **kwargs: Any) -> Any:
            with job_bound(self.settings.store_job_timeout_seconds):
                async for item in method(self, *args, **kwargs):
                    yield item

        return generator

    @functools.wraps(method)
    async def coroutine(self: Any, *args: Any, **kwargs: Any) -> Any:
        with job_bound(self.settings.store_job_timeout_seconds):
            return await method(self, *args, **kwargs)

    return coroutine
