"""Scrape-time gauges (automem/common/metrics.py) read all their sources at once: a scrape
with a stalled store waits for one bound, not one per source (break-it review: ``/metrics``
read the outbox backlog, the sync counts and the queue depth one after another, each up to
the bound). Each source here answers only once the other one was asked too, so a scrape
that reads them one after another loses the first one's value; no timed asserts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from opentelemetry.metrics import CallbackOptions

from automem.common import metrics


def _after_each_other(names: tuple[str, str]) -> dict[str, Callable[[], Awaitable[float]]]:
    """Two sources, each answering (its index + 1) only once the other one was started."""
    started = {name: asyncio.Event() for name in names}

    def source(me: str, other: str, value: float) -> Callable[[], Awaitable[float]]:
        async def read() -> float:
            started[me].set()
            await started[other].wait()
            return value
        return read

    return {names[0]: source(names[0], names[1], 1.0), names[1]: source(names[1], names[0], 2.0)}


@pytest.mark.parametrize("layout", ["two gauges", "one gauge"])
async def test_a_scrape_reads_every_gauge_source_at_once(layout: str) -> None:
    suffix = layout.replace(" ", "_")
    first = metrics._AsyncGauge(f"automem.test.first_{suffix}", "{item}", "test gauge")
    second = first if layout == "one gauge" else metrics._AsyncGauge(f"automem.test.second_{suffix}", "{item}",
                                                                     "test gauge")
    sources = _after_each_other(("a", "b"))
    unwatch = [first.watch(sources["a"], {"source": "a"}), second.watch(sources["b"], {"source": "b"})]
    try:
        gauges = [first] if first is second else [first, second]
        # A scrape runs in a thread of its own (automem/gateway/metrics.py), never on the loop.
        observed = await asyncio.to_thread(lambda: [o for g in gauges for o in g._observe(CallbackOptions())])
    finally:
        for stop in unwatch:
            stop()
    assert sorted((o.value, dict(o.attributes)) for o in observed) == [(1.0, {"source": "a"}), (2.0, {"source": "b"})]
