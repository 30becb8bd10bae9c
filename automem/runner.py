"""The module runner (the Loki/dskit "targets" pattern) over the table in automem/targets.py.

:func:`resolve` takes the closure of the chosen targets and orders it with
``graphlib.TopologicalSorter`` (cycles rejected); :class:`Runner` starts the modules in
that order on one :class:`~automem.runtime.Runtime`, starts the shared gRPC server once
every servicer is registered, runs the ``after_start`` hooks, and stops in reverse. The
runner knows no module by name: what a module needs and provides is in its table entry.
"""

from __future__ import annotations

import asyncio
import gc
import graphlib
import logging
from collections.abc import Mapping

from automem.common import malloc
from automem.common.settings import Settings
from automem.runtime import Module, Runtime, Stop
from automem.targets import MODULES

log = logging.getLogger(__name__)


def targets(modules: Mapping[str, Module] = MODULES) -> list[str]:
    """Names of the user-facing targets, sorted."""
    return sorted(name for name, m in modules.items() if m.target)


def closure(chosen: list[str], modules: Mapping[str, Module] = MODULES) -> set[str]:
    """Every module ``chosen`` needs, ``chosen`` included. Raises ValueError for an unknown
    target (or a dependency naming an unknown module)."""
    unknown = [name for name in chosen if name not in modules or not modules[name].target]
    if unknown:
        raise ValueError(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(targets(modules))}")
    found: set[str] = set()
    stack = list(chosen)
    while stack:
        name = stack.pop()
        if name in found:
            continue
        if name not in modules:
            raise ValueError(f"unknown module {name!r}")
        found.add(name)
        stack.extend(modules[name].deps)
    return found


def resolve(chosen: list[str], modules: Mapping[str, Module] = MODULES) -> list[str]:
    """Start order of the closure of ``chosen``. Raises ValueError for an unknown target or
    a dependency cycle."""
    names = closure(chosen, modules)
    sorter = graphlib.TopologicalSorter({name: set(modules[name].deps) for name in names})
    try:
        return list(sorter.static_order())
    except graphlib.CycleError as exc:
        raise ValueError(f"module dependency cycle: {exc.args[1]}") from exc


def child_targets(settings: Settings, chosen: list[str], wanted: list[str],
                  modules: Mapping[str, Module] = MODULES) -> tuple[list[str], list[str], dict[str, str]]:
    """Split the targets of ``chosen`` into those this process runs and the child processes
    ``wanted`` (``settings.child_targets``).

    Each entry of ``wanted`` is one child: a target (``enrich``) or targets joined by ``+``
    that share a process (``gateway+recall``: the gateway reaches that recall without
    leaving the process, and one interpreter serves both). A wanted target stays in this
    process when it is not among ``chosen``'s targets, or when a module it needs is
    ``single_process`` under ``settings`` (then only this process may open it). Returns
    ``(in_process, children, kept)``: ``children`` names each child by its leaving targets
    joined by ``+`` (automem/children.py ``ChildProcess``), ``kept`` maps each wanted target
    that stays to the reason. Targets without a body (``all``) are dropped. Raises
    ValueError for an unknown target in ``chosen`` or ``wanted``, or a target wanted in two
    children.
    """
    groups = [[t.strip() for t in entry.split("+") if t.strip()] for entry in wanted]
    members = [t for group in groups for t in group]
    closure([*chosen, *members], modules)  # validates both
    twice = sorted({t for t in members if members.count(t) > 1})
    if twice:
        raise ValueError(f"target(s) {', '.join(twice)} named in more than one child process")
    present = [n for n in resolve(chosen, modules) if modules[n].target and modules[n].start is not None]
    kept: dict[str, str] = {}
    children: list[str] = []
    leaving: set[str] = set()
    for group in groups:
        out = []
        for name in group:
            if name not in present:
                continue
            pinned = sorted(d for d in closure([name], modules)
                            if modules[d].single_process is not None and modules[d].single_process(settings))
            if pinned:
                kept[name] = f"needs {', '.join(pinned)}, which only one process can open with these settings"
            else:
                out.append(name)
        if out and "+".join(out) not in children:
            children.append("+".join(out))
            leaving.update(out)
    return [n for n in present if n not in leaving], children, kept


def split_shard_warning(settings: Settings, chosen: list[str], modules: Mapping[str, Module] = MODULES) -> str:
    """The warning for a process run apart (``automem serve``) that opens an embedded vector
    shard of its own (``QDRANT_URL`` empty) without both its writer and its reader: only
    ``enrich`` writes points and ``recall`` reads them, and no other process can open or reach
    that shard, so recall elsewhere finds nothing this process's enrich wrote, or this
    process's recall finds nothing at all (README, "Running parts separately"). "" when the
    shard has both, no target here needs vectors, or the store is a server or disabled."""
    if settings.qdrant_url.strip() != "" or not settings.vectors_enabled:
        return ""
    present = {n for n in resolve(chosen, modules) if modules[n].target and modules[n].start is not None}
    needing = sorted(t for t in present if "vectors" in closure([t], modules))
    if not needing or {"enrich", "recall"} <= present:
        return ""
    return (f"QDRANT_URL is empty: {', '.join(needing)} open an embedded vector shard under AUTOMEM_DATA_DIR "
            "that no other process reaches, without " + ("recall" if "enrich" in present else "enrich")
            + " beside it; give every process one Qdrant server (QDRANT_URL), or set it to disabled")


class Runner:
    """Starts the chosen targets' modules in order and stops them in reverse.

    Args:
        settings: the process's settings.
        chosen: target names (``["all"]``, ``["ingest", "recall"]``...).
        modules: the table (default: automem/targets.py).

    Raises ValueError (from :func:`resolve`) for unknown targets or a cycle.
    """

    def __init__(self, settings: Settings, chosen: list[str], modules: Mapping[str, Module] = MODULES) -> None:
        self.modules = modules
        self.order = resolve(chosen, modules)
        self.ctx = Runtime(settings)
        self._stops: list[tuple[Module, Stop]] = []

    async def start(self) -> Runtime:
        """Start every module, then the gRPC server if any servicer was added, then the
        ``after_start`` hooks. On failure, stops what started and re-raises."""
        rt = self.ctx
        # Before the modules start their threads: each thread may get a malloc arena of its own.
        malloc.limit_arenas(rt.settings.malloc_arena_max)
        try:
            for name in self.order:
                module = self.modules[name]
                if module.start is None:
                    continue
                log.info("starting module", extra={"component": name})
                stop = await module.start(rt)
                if stop is not None:
                    self._stops.append((module, stop))
            server = rt.grpc_server
            if server is not None and len(server.service_names) > 1:
                rt.grpc_port = await server.start()
                await self._watch_readiness(rt)
                log.info("gRPC server listening", extra={"port": rt.grpc_port})
            for hook in rt.after_start:
                await hook(rt)
            # Start-up allocated the models, clients and modules that live as long as the
            # process: move them out of the collector's generations so a gen-2 collection
            # no longer walks them (measured pauses of 80-95 ms under load before; issue 10).
            gc.collect()
            gc.freeze()
            if rt.settings.malloc_trim_seconds > 0:
                rt.tasks.append(asyncio.create_task(trim_every(rt.settings.malloc_trim_seconds), name="malloc-trim"))
        except BaseException:
            await self.stop()
            raise
        return rt

    @staticmethod
    async def _watch_readiness(rt: Runtime) -> None:
        """Mark ``liveness`` SERVING, set each service's status from its stores now and keep
        doing so every ``health_check_interval_seconds`` (automem/common/readiness.py).

        Each store is asked live, within the store bound (``store_timeout_seconds``, 5 s when
        unbounded), as FalkorDB's PING: NATS a round trip (automem/common/bus.py
        ``reachable``), the vector store its dimension. A probe (grpc.health.v1 ``Check``, the
        gateway's ``/readyz``) never waits for these: it reads the status the last round set,
        so it answers in milliseconds whatever a store does, and probes at any rate cost no
        round trip; a store that stops answering is reported within one interval plus that
        bound (5 + 5 s by default)."""
        from automem.common.readiness import LIVENESS_SERVICE, ReadinessMonitor

        server = rt.grpc_server
        await server.set_status(LIVENESS_SERVICE, True)
        checks = {}
        if rt.graph is not None:
            checks["graph"] = rt.graph.ping
        if rt.bus is not None:
            bus = rt.bus
            bus_bound = rt.settings.store_timeout_seconds if rt.settings.store_timeout_seconds > 0 else 5.0

            async def bus_up() -> bool:
                # A round trip, not nats-py's connection flag: that stays up for minutes after
                # the server stops answering on an open connection (SIGSTOP, a hung node).
                return await bus.reachable(bus_bound)
            checks["bus"] = bus_up
        if rt.vectors is not None:
            vectors = rt.vectors

            async def vectors_up() -> bool:
                await vectors.dimension()
                return True
            checks["vectors"] = vectors_up
        if rt.enrich_consumer is not None:
            consumer = rt.enrich_consumer

            async def consumer_up() -> bool:
                return consumer.fetching
            checks["consumer"] = consumer_up
        monitor = rt.readiness = ReadinessMonitor(server.set_status, server.service_names[1:], checks,
                                                  rt.settings.health_check_interval_seconds)
        await monitor.check_once()
        if rt.settings.health_check_interval_seconds > 0:
            rt.tasks.append(asyncio.create_task(monitor.run(), name="readiness"))

    async def stop(self) -> None:
        """Stop: the gRPC server (NOT_SERVING, then ``shutdown_grace_seconds``), the targets
        in reverse start order, the background tasks left running (cancelled), then the
        internal modules in reverse; each stop bounded by 15 s. Errors are logged, not
        raised."""
        rt = self.ctx
        if rt.grpc_server is not None and rt.grpc_port:
            await rt.grpc_server.stop(rt.settings.shutdown_grace_seconds)
            rt.grpc_port = 0
        stops = list(reversed(self._stops))
        self._stops.clear()
        for module, stop in stops:
            if module.target:
                await self._stop_one(module, stop)
        for task in rt.tasks:
            task.cancel()
        await asyncio.gather(*rt.tasks, return_exceptions=True)
        rt.tasks.clear()
        for module, stop in stops:
            if not module.target:
                await self._stop_one(module, stop)

    @staticmethod
    async def _stop_one(module: Module, stop: Stop) -> None:
        try:
            await asyncio.wait_for(stop(), timeout=15)
        except Exception:
            log.exception("module stop failed", extra={"component": module.name})


async def trim_every(seconds: float) -> None:
    """Hand the allocator's free pages back to the kernel every ``seconds`` (a worker thread:
    :func:`automem.common.malloc.trim` holds each arena's lock while it walks it). Runs until
    cancelled. A build of 100k memories left ~0.4 GiB of freed pages mapped without it
    (docs/benchmarks.md, "Memory and disk at 100k")."""
    while True:
        await asyncio.sleep(seconds)
        await asyncio.to_thread(malloc.trim)
