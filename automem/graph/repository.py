"""The base of the graph repositories: each holds the Cypher of one node kind and runs it
on the store's connection (:class:`automem.graph.store.GraphStore`, which creates them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class Connection(Protocol):
    """What a repository uses of the store: FalkorDB queries (rows as lists), several
    read-only queries in one round trip, and the client's graph handle (``graph.delete()``).
    Errors: Unavailable when FalkorDB cannot be reached, InvalidArgument for a parameter
    FalkorDB cannot take (automem/graph/store.py)."""

    graph: Any

    async def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]: ...

    async def ro_query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]: ...

    async def ro_query_many(self, queries: Sequence[tuple[str, dict[str, Any]]]) -> list[list[list[Any]]]: ...


class Repository:
    """Statements of one node kind over ``store`` (a :class:`Connection`)."""

    def __init__(self, store: Connection) -> None:
        self.store = store
