"""The base of the graph repositories: each holds the Cypher of one node kind and runs it
on the store's connection (:class:`automem.graph.store.GraphStore`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from automem.graph.store import GraphStore


class Repository:
    """Statements of one node kind over ``store`` (its ``query`` / ``ro_query`` /
    ``ro_query_many``; errors as those raise: Unavailable, InvalidArgument)."""

    def __init__(self, store: GraphStore) -> None:
        self.store = store
