"""What the modules of one process share: the typed :class:`Runtime` and the :class:`Module`
record the target table (automem/targets.py) is made of.

A module's ``start`` receives the :class:`Runtime`, sets the fields it provides (the graph
module sets :attr:`Runtime.graph`, the ingest target :attr:`Runtime.ingest`...) and returns
the coroutine function that stops it again, or None. Whatever a module keeps only for its
own stop lives in that closure, not in the runtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from automem.common.settings import Settings

if TYPE_CHECKING:
    from automem.common.bus import Bus
    from automem.common.embedding import EmbeddingProvider
    from automem.common.grpc_server import GrpcServer
    from automem.common.keys import KeyStore
    from automem.common.outbox import EventPublisher
    from automem.common.readiness import ReadinessMonitor
    from automem.consolidate.scheduler import Scheduler
    from automem.consolidate.servicer import ConsolidateServicer
    from automem.enrich.consumer import EnrichConsumer
    from automem.graph import GraphStore
    from automem.ingest.admin import AdminServicer
    from automem.ingest.review import ReviewServicer
    from automem.ingest.servicer import IngestServicer
    from automem.recall.servicer import RecallServicer
    from automem.vectors import VectorStore


@dataclass(eq=False)
class Runtime:
    """The objects the started modules of one process share (None / 0 until the module
    providing them started).

    Shared stores and servers: :attr:`graph`, :attr:`bus`, :attr:`publisher` (the outbox),
    :attr:`embedder` (None with vectors disabled), :attr:`vectors` (None when disabled),
    :attr:`keystore`, :attr:`grpc_server`; the bound ports :attr:`grpc_port` and
    :attr:`http_port` (0 = not serving); :attr:`tasks`, the background tasks the runner
    watches and cancels on stop; :attr:`after_start`, hooks run once the gRPC server
    listens. The targets' handles (servicers, the enrichment consumer and its task, the
    consolidation scheduler) are there for tests, benchmarks and the CLI.
    """

    settings: Settings
    graph: GraphStore | None = None
    bus: Bus | None = None
    publisher: EventPublisher | None = None
    embedder: EmbeddingProvider | None = None
    vectors: VectorStore | None = None
    keystore: KeyStore | None = None
    grpc_server: GrpcServer | None = None
    grpc_port: int = 0
    http_port: int = 0
    #: Port of this process's Prometheus endpoint (0 = none; automem/common/metrics.py).
    metrics_port: int = 0
    tasks: list[asyncio.Task] = field(default_factory=list)
    after_start: list[Callable[[Runtime], Awaitable[None]]] = field(default_factory=list)
    ingest: IngestServicer | None = None
    review: ReviewServicer | None = None
    admin: AdminServicer | None = None
    recall: RecallServicer | None = None
    enrich_consumer: EnrichConsumer | None = None
    enrich_task: asyncio.Task | None = None
    consolidate: ConsolidateServicer | None = None
    consolidate_scheduler: Scheduler | None = None
    #: Sets each gRPC service's health status from its stores (automem/common/readiness.py).
    readiness: ReadinessMonitor | None = None
    #: Restarts of the embedded servers by name (automem/common/embedded.py
    #: ``EmbeddedRuntime.restarts``, shared by reference; empty without embedded servers).
    server_restarts: dict[str, int] = field(default_factory=dict)
    #: Targets served by other processes whose unary RPCs this process's gRPC server passes
    #: on (target -> ``host:port``; ``automem up``'s children, automem/cli/main.py).
    forwarded: dict[str, str] = field(default_factory=dict)


#: Stops what a module's start began (returned by that start).
Stop = Callable[[], Awaitable[None]]
#: A module's start: fills its part of the runtime, returns its stop or None.
Start = Callable[[Runtime], Awaitable[Stop | None]]


@dataclass(frozen=True)
class Module:
    """One entry of the target table.

    Attributes:
        name: unique; a target's name is what ``--target`` takes.
        deps: modules started before this one (and stopped after it).
        start: see :data:`Start`; None for a target with no body (``all``).
        target: user-facing (``automem serve --target``); internal modules are not.
        single_process: for settings under which what the module opens can be held by one
            process only (the embedded qdrant-edge shard): a target depending on such a
            module cannot run as a child process of ``automem up`` (automem/runner.py
            :func:`~automem.runner.child_targets`).
    """

    name: str
    deps: tuple[str, ...] = ()
    start: Start | None = None
    target: bool = True
    single_process: Callable[[Settings], bool] | None = None
