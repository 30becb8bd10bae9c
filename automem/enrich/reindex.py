"""``automem reindex --provider X``: re-embed every memory with another embedding provider into
a new collection, and switch over only when that is complete.

Steps (the service must be stopped: the embedded shard is single-process):

1. build provider ``X`` (its dimension may differ from the current collection's);
2. create the collection ``<collection>__reindex_<X>`` (a leftover from an interrupted run is
   removed first — it was never live) and fill it from the graph with
   :func:`automem.common.backup.reindex` (the one payload builder, BM25 with predecessor
   context, ``embedding_model`` recorded on each node);
3. switch: embedded shard — the live directory is renamed to
   ``<collection>.pre-reindex-<time>`` (kept: nothing is wiped) and the new one takes the
   collection's name; Qdrant server — when ``QDRANT_COLLECTION`` is an alias it is re-pointed
   at the new collection (the old one is kept), otherwise the new collection's name is
   reported to be set as ``QDRANT_COLLECTION``.

Afterwards start the service with ``AUTOMEM_EMBEDDING_PROVIDER=X``: the start-up dimension
check refuses the old provider when the sizes differ, naming both.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from typing import Any

from automem.common.settings import Settings


async def reindex_with_provider(settings: Settings, provider_name: str, graph: Any | None = None,
                                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Re-embed into a new collection with ``provider_name`` and switch over (see module
    docstring). Returns ``{"provider", "dimension", "reindexed", "collection", "switched",
    "previous"}``. Raises ValueError for an unknown provider or disabled vectors.
    ``progress(done, total)``: as :func:`automem.common.backup.reindex`'s."""
    from automem.common import backup
    from automem.common.embedding import make_provider
    from automem.graph import GraphStore
    from automem.vectors import make_vector_store

    if not settings.vectors_enabled:
        raise ValueError("vectors are disabled (QDRANT_URL=disabled); nothing to reindex")
    provider = await asyncio.to_thread(make_provider, settings.model_copy(update={
        "embedding_provider": provider_name, "vector_size": 0 if provider_name != "openai" else settings.vector_size}))
    temp_name = f"{settings.collection_name}__reindex_{provider_name}"
    temp_settings = settings.model_copy(update={"collection_name": temp_name})
    own_graph = graph is None
    graph = graph or GraphStore(settings)
    embedded = not settings.qdrant_url.strip()
    if embedded and temp_settings.qdrant_path.exists():
        shutil.rmtree(temp_settings.qdrant_path)  # an interrupted run's leftover, never live
    target = make_vector_store(temp_settings)
    result: dict[str, Any] = {"provider": provider.name, "dimension": provider.dimension}
    try:
        if not embedded:
            existing = await target.dimension()
            if existing is not None:
                await target.client.delete_collection(temp_name)
        await target.ensure_collection(provider.dimension)
        counts = await backup.reindex(graph, target, provider, progress=progress)
        result["reindexed"] = counts["reindexed"]
    finally:
        await target.close()
        if own_graph:
            await graph.close()
    if embedded:
        live = settings.qdrant_path
        previous = live.with_name(f"{live.name}.pre-reindex-{int(time.time())}")
        if live.exists():
            live.rename(previous)
            result["previous"] = str(previous)
        temp_settings.qdrant_path.rename(live)
        result.update(collection=settings.collection_name, switched=True)
    else:
        result.update(await _switch_server(settings, temp_name))
    return result


async def _switch_server(settings: Settings, new_name: str) -> dict[str, Any]:
    from qdrant_client import AsyncQdrantClient, models

    client = AsyncQdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    try:
        aliases = {a.alias_name: a.collection_name for a in (await client.get_aliases()).aliases}
        name = settings.collection_name
        if name in aliases:
            await client.update_collection_aliases(change_aliases_operations=[
                models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name)),
                models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name=new_name,
                                                                            alias_name=name))])
            return {"collection": name, "switched": True, "previous": aliases[name]}
        return {"collection": new_name, "switched": False, "previous": name}
    finally:
        await client.close()
