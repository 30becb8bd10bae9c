"""automem's typed Python client: the same methods over gRPC or REST, blocking
(:class:`Client`) or asyncio (:class:`AsyncClient`).

    from automem_client import Client

    with Client.grpc("localhost:50051", api_key="...") as client:
        stored = client.store("We chose Postgres for billing", tags=["db"], type="Decision")
        hits = client.recall("which database?").results

docs/clients.md of the repository describes every method, its results and errors.
"""

from importlib import metadata as _metadata

from automem_client import errors
from automem_client.client import AsyncClient, Client
from automem_client.errors import (
    Aborted,
    AlreadyExists,
    AutomemError,
    ClientClosed,
    Conflict,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from automem_client.models import (
    BatchStored,
    Entity,
    FieldChange,
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
    VersionDiff,
    VersionsPage,
)

try:  # the one version is clients/python/pyproject.toml's
    __version__ = _metadata.version("automem-client")
except _metadata.PackageNotFoundError:  # imported from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "Aborted",
    "AlreadyExists",
    "AsyncClient",
    "AutomemError",
    "BatchStored",
    "Client",
    "ClientClosed",
    "Conflict",
    "DeadlineExceeded",
    "Entity",
    "FailedPrecondition",
    "FieldChange",
    "Health",
    "HistoryEvent",
    "HistoryPage",
    "InvalidArgument",
    "Memory",
    "MemoryInput",
    "MemoryVersion",
    "NotFound",
    "Page",
    "PermissionDenied",
    "RecallResult",
    "RelatedMemory",
    "Relation",
    "ResourceExhausted",
    "ScoredMemory",
    "Stored",
    "StreamEvent",
    "Superseded",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "VersionDiff",
    "VersionsPage",
    "errors",
]
