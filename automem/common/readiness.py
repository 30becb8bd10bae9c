"""Readiness of each gRPC service from the stores it needs (issue 15, item 2).

Kubernetes probes ask two different questions (kubernetes.io "Configure Liveness, Readiness
and Startup Probes"): *liveness* — is this process stuck? — must be answered by the process
alone, or a FalkorDB outage would restart every pod; *readiness* — can it serve now? —
reflects its stores. The gRPC health service (grpc.health.v1) answers both:

* :data:`LIVENESS_SERVICE` ("liveness") is SERVING as long as the server answers;
* each service's own name (``automem.v1.RecallService``...) is SERVING only while every store
  it needs (:data:`NEEDS`) answers, and "" (the whole server) only while all of them are.

:class:`ReadinessMonitor` re-checks every ``health_check_interval_seconds`` (each store check
bounded by the store timeout, automem/common/timeouts.py) and flips the statuses; the chart
probes liveness with service ``liveness`` and readiness with the component's service name
(deploy/helm/automem/templates/lib/_workload.tpl).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

log = logging.getLogger(__name__)

LIVENESS_SERVICE = "liveness"

#: The stores each service needs to answer its calls: ``graph`` (FalkorDB), ``bus`` (NATS),
#: ``vectors`` (Qdrant / the embedded shard; only where vectors are enabled), ``consumer`` (the
#: enrichment consumer's fetches work: automem/enrich/consumer.py ``fetching``). Ingest and review
#: write through the outbox (automem/common/outbox.py): while NATS is down their writes succeed
#: and their events wait there, so they need FalkorDB only. Admin's online restore publishes
#: directly; enrichment cannot fetch without NATS.
NEEDS: dict[str, tuple[str, ...]] = {
    "automem.v1.IngestService": ("graph",),
    "automem.v1.ReviewService": ("graph",),
    "automem.v1.AdminService": ("graph", "bus"),
    "automem.v1.RecallService": ("graph", "vectors"),
    "automem.v1.EnrichService": ("graph", "bus", "vectors", "consumer"),
    "automem.v1.ConsolidateService": ("graph",),
}

Check = Callable[[], Awaitable[bool]]


class ReadinessMonitor:
    """Sets the gRPC health status of ``services`` from ``checks`` (store name → async check
    returning True when the store answers; a store without a check counts as up).

    Args:
        set_status: ``async (service name, serving) -> None`` (GrpcServer.set_status).
        services: full names of the services this process serves.
        checks: the store checks.
        interval: seconds between rounds.
    """

    def __init__(self, set_status: Callable[[str, bool], Awaitable[None]], services: list[str],
                 checks: Mapping[str, Check], interval: float) -> None:
        self.set_status = set_status
        self.services = services
        self.checks = dict(checks)
        self.interval = interval
        self.stores: dict[str, bool] = {}
        self.serving: dict[str, bool] = {}
        self._stop = asyncio.Event()

    async def _check(self, name: str, check: Check) -> bool:
        try:
            return bool(await check())
        except Exception:  # noqa: BLE001 - any failure means the store does not answer
            return False

    async def check_once(self) -> dict[str, bool]:
        """One round: check the stores at the same time, set every service's status and the
        overall one; log each change. Returns service name → serving."""
        names = list(self.checks)
        results = await asyncio.gather(*(self._check(n, self.checks[n]) for n in names))
        for name, ok in zip(names, results, strict=True):
            if self.stores.get(name) not in (None, ok):
                (log.info if ok else log.warning)("store %s", "reachable again" if ok else "unreachable",
                                                 extra={"store": name})
            self.stores[name] = ok
        serving = {s: all(self.stores.get(n, True) for n in NEEDS.get(s, ("graph",))) for s in self.services}
        for service, ok in serving.items():
            if self.serving.get(service) != ok:
                await self.set_status(service, ok)
        overall = all(serving.values())
        if self.serving.get("") != overall:
            await self.set_status("", overall)
        self.serving = {**serving, "": overall}
        return serving

    async def run(self) -> None:
        """Check every ``interval`` seconds until :meth:`stop`."""
        while not self._stop.is_set():
            await self.check_once()
            try:
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval)
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stop.set()
