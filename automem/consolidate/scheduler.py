"""The consolidation scheduler: an asyncio loop that runs each task at its interval.

Intervals are settings (AutoMem's names): ``CONSOLIDATION_DECAY_INTERVAL_SECONDS`` (1 day),
``CONSOLIDATION_CREATIVE_INTERVAL_SECONDS`` (7 days), ``CONSOLIDATION_CLUSTER_INTERVAL_SECONDS``
(30 days), ``CONSOLIDATION_FORGET_INTERVAL_SECONDS`` (0: off; forget also needs
``AUTOMEM_FORGET_ENABLED``), and ``AUTOMEM_SYNC_CHECK_INTERVAL_SECONDS`` (1 hour) for the
drift check, which repairs when ``AUTOMEM_SYNC_AUTO_REPAIR``. 0 turns a task off.

A task's first run is due one interval after its last persisted run that stands for a
scheduled one (not dry, over every scope, ended without error:
automem/graph/runs.py ``last_end_times``), or one interval after start when there is none, so
restarts keep the rhythm and a manual run of one scope does not postpone every scope's. With several
consolidate replicas, a Redis lease per task (``SET NX PX`` on the graph's connection) lets
one of them run it. Every scheduled run lands in the run history with ``trigger=scheduled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid

from automem.common.settings import Settings

log = logging.getLogger(__name__)


def intervals(settings: Settings) -> dict[str, float]:
    """Seconds between runs of each scheduled task (tasks at 0 are left out)."""
    every = {
        "decay": settings.consolidation_decay_interval_seconds,
        "creative": settings.consolidation_creative_interval_seconds,
        "cluster": settings.consolidation_cluster_interval_seconds,
        "forget": settings.consolidation_forget_interval_seconds if settings.forget_enabled else 0.0,
        "sync": settings.sync_check_interval_seconds,
    }
    return {task: float(sec) for task, sec in every.items() if sec and sec > 0}


class Scheduler:
    """Runs the servicer's tasks on their intervals until :meth:`stop`."""

    def __init__(self, settings: Settings, servicer) -> None:
        self.settings = settings
        self.servicer = servicer
        self.every = intervals(settings)
        self.next: dict[str, float] = {}
        self._stop = asyncio.Event()
        self._owner = uuid.uuid4().hex
        #: The task running :meth:`run` (set by automem/targets.py).
        self.task: asyncio.Task | None = None

    @property
    def running(self) -> bool:
        """True while the loop runs (a loop with no task at an interval above 0 ends at once)."""
        return self.task is not None and not self.task.done()

    def next_run_times(self) -> dict[str, float]:
        """Epoch seconds of each task's next run."""
        return dict(self.next)

    async def _initial(self) -> None:
        now = time.time()
        last = await self.servicer.graph.runs.last_end_times()
        for task, every in self.every.items():
            self.next[task] = max(last.get(task, now) + every, now) if task in last else now + every

    async def _lease(self, task: str, seconds: float) -> bool:
        key = f"automem:{self.settings.graph_name}:consolidate:{task}"
        try:
            async with self.servicer.graph.bounded():
                return bool(await self.servicer.graph.redis.set(key, self._owner, nx=True,
                                                                px=max(int(seconds * 1000), 1000)))
        except Exception:  # noqa: BLE001 - no lease store: run anyway (single replica)
            return True

    async def _read_history(self) -> bool:
        """:meth:`_initial`, retried until it succeeds (True) or :meth:`stop` (False). A
        graph that does not answer at start (a FalkorDB stalled or loading under load) is
        logged and read again after 0.5 s, doubled up to 30 s; nothing is due meanwhile.
        Before, the read's error ended the loop, and ``automem up`` exits 1 when a module's
        background task dies (automem/cli/main.py ``_watch``)."""
        delay = 0.5
        while not self._stop.is_set():
            try:
                await self._initial()
                return True
            except Exception as exc:  # noqa: BLE001 - any store failure: log, back off, read again
                log.warning("consolidation history not read; retrying",
                            extra={"error": repr(exc), "retry_in_s": delay})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=delay)
            delay = min(delay * 2, 30.0)
        return False

    async def run(self) -> None:
        """The loop: sleep until the next due task (at most ``consolidation_tick_seconds``).
        Store failures never end it (:meth:`_read_history`; a failed run is logged)."""
        if not self.every or not await self._read_history():
            return
        while not self._stop.is_set():
            now = time.time()
            for task in sorted(self.every, key=lambda t: self.next[t]):
                if self._stop.is_set() or self.next[task] > now:
                    continue
                self.next[task] = now + self.every[task]
                if not await self._lease(task, min(self.every[task], 3600.0)):
                    continue
                dry = task == "sync" and not self.settings.sync_auto_repair
                try:
                    run = await self.servicer.run_task(task, None, dry, "scheduled")
                    log.info("scheduled consolidation ran", extra={"mode": task, "counts": dict(run.counts),
                                                                   "error": run.error})
                except Exception:
                    log.exception("scheduled consolidation failed", extra={"mode": task})
            wait = min([self.next[t] for t in self.every] + [time.time() + self.settings.consolidation_tick_seconds])
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=max(wait - time.time(), 0.05))
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stop.set()
