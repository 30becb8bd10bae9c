"""The vector store: one small async interface (:mod:`.protocol`), two backends —
embedded qdrant-edge (:mod:`.edge`) and a Qdrant server (:mod:`.server`) — one filter
translator (:mod:`.filters`) of the shared filter type and shared point helpers (:mod:`.points`).

Callers import from here; :func:`make_vector_store` picks the backend from the settings.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from automem.vectors.edge import EdgeVectorStore
from automem.vectors.protocol import (
    DENSE,
    OPEN_ENDED,
    PAYLOAD_INDEXES,
    SPARSE,
    CollectionMissingError,
    DimensionMismatchError,
    PointWrite,
    ScoredPayload,
    SearchRequest,
    VectorFilter,
    VectorPoint,
    VectorStore,
)
from automem.vectors.server import ServerVectorStore

if TYPE_CHECKING:  # pragma: no cover
    from automem.common.settings import Settings

__all__ = [
    "DENSE",
    "OPEN_ENDED",
    "PAYLOAD_INDEXES",
    "SPARSE",
    "CollectionMissingError",
    "DimensionMismatchError",
    "EdgeVectorStore",
    "PointWrite",
    "ScoredPayload",
    "SearchRequest",
    "ServerVectorStore",
    "VectorFilter",
    "VectorPoint",
    "VectorStore",
    "make_vector_store",
]


def make_vector_store(settings: Settings) -> VectorStore | None:
    """The vector store the settings ask for.

    ``qdrant_url == ""``: :class:`EdgeVectorStore` at ``settings.qdrant_path``;
    ``"disabled"`` (any case): ``None`` (recall runs on the graph arms only);
    ``":memory:"`` or ``"local:<dir>"`` (tests and development only): a
    :class:`ServerVectorStore` over qdrant-client's pure-Python local mode, in memory or in
    ``<dir>`` (one process per directory) — the server backend's code path without a server;
    ``"unix:<socket>"``: :class:`SharedVectorStore`, the embedded shard of the ``automem up``
    parent reached through its socket (automem/vectors/shared.py; set by the parent for its
    children, not by hand);
    anything else: :class:`ServerVectorStore` at that URL with ``settings.qdrant_api_key``.
    The collection is ``settings.collection_name``. Nothing is opened here; the embedded
    shard's directory (``<data_dir>/qdrant``) is created 0700 (or made so).
    """
    url = settings.qdrant_url.strip()
    if not settings.vectors_enabled:
        return None
    if url == "":
        # The shard's files hold every memory's content (payloads, WAL): its directory is the
        # user's alone, as the embedded servers' are (automem/common/embedded.py).
        shards = settings.qdrant_path.parent
        shards.mkdir(parents=True, exist_ok=True)
        os.chmod(shards, 0o700)
        return EdgeVectorStore(settings.qdrant_path, settings.collection_name,
                               index_threshold=settings.vector_index_threshold,
                               datatype=settings.vector_datatype)
    if url.startswith("unix:"):
        from automem.vectors.shared import SharedVectorStore

        return SharedVectorStore(url.removeprefix("unix:"), settings.collection_name)
    if url == ":memory:" or url.startswith("local:"):
        from qdrant_client import AsyncQdrantClient

        client = AsyncQdrantClient(location=":memory:") if url == ":memory:" else AsyncQdrantClient(
            path=url.removeprefix("local:"))
        return ServerVectorStore(collection=settings.collection_name, client=client)
    return ServerVectorStore(url, settings.qdrant_api_key, settings.collection_name)
