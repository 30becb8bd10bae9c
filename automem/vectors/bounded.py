"""The vector store with every call bounded (issue 12, item 10): :class:`BoundedVectorStore`
wraps either backend so each coroutine method of the :class:`~automem.vectors.protocol.VectorStore`
protocol runs inside :func:`automem.common.timeouts.store_call` — StoreTimeout (HTTP 503,
gRPC UNAVAILABLE) after ``store_timeout_seconds`` instead of a stalled request."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from automem.common.timeouts import store_call

#: Methods left unbounded: opening or creating the collection at start (it may load a large
#: shard) and closing it.
_UNBOUNDED = frozenset({"ensure_collection", "close"})


class BoundedVectorStore:
    """Delegates to ``inner`` (a VectorStore); its coroutine methods are bounded by
    ``seconds`` (0 = unbounded). Other attributes pass through unchanged."""

    def __init__(self, inner: Any, seconds: float) -> None:
        self.inner = inner
        self.seconds = seconds

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name in _UNBOUNDED or not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        async def bounded(*args: Any, **kwargs: Any) -> Any:
            async with store_call("vector store", self.seconds):
                return await attr(*args, **kwargs)

        return bounded
