"""Graph and entity routes (AutoMem's ``automem/api/graph.py`` and ``automem/api/entity.py``
in verygoodplugins/automem), scoped to the caller and through the state pass.

* ``GET /graph/snapshot?limit=500&min_importance=0&types=Decision,Insight&since=<ISO>`` —
  nodes (a superseded memory is a node with ``style: "superseded"``, ``is_current: false``
  and its head in ``current_id``), the edges among them, ``stats``, ``meta``.
* ``GET /graph/neighbors/{id}?depth=1&include_semantic=true&semantic_limit=5``.
* ``GET /graph/stats``, ``GET /graph/types``, ``GET /graph/relations``.
* ``GET /entities?category=&limit=100`` (limit ≤ 500), ``GET /entity/{slug}`` (with its
  memories), ``GET /entities/merge-candidates``.
* ``POST /entity/{slug}/merge`` ``{merge_into, category?, reason?}`` (admin, audited),
  ``GET /entities/merges`` (the audit record, admin), ``POST /entities/merges/{id}/undo`` (admin).

Bounds are the services' (automem/recall/graph_views.py): a value outside them answers 400
naming the field.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Query, Request

from automem.common.model import AUTHORABLE_RELATIONS, SYSTEM_RELATIONS, TYPE_NAMES
from automem.gateway import presenters, usecases
from automem.gateway.deps import CallerDep, auth_error, split_values
from automem.gateway.schemas import EntityMergeBody, JsonBodyRoute

router = APIRouter(route_class=JsonBodyRoute)


@router.get("/graph/snapshot", tags=["graph"])
async def snapshot(call: CallerDep, limit: int | None = Query(None, ge=1, le=5000),
                   min_importance: float = Query(0.0, ge=0, le=1, allow_inf_nan=False),
                   types: list[str] = Query(default=[]), since: str | None = None,
                   state_mode: str | None = None, as_of: str | None = None, known_at: str | None = None,
                   include_archived: bool = False, include_pending: bool = False) -> dict[str, Any]:
    """The scope's graph for a viewer: up to ``limit`` (1..5000, default 500) memories, most
    important first, and the edges among them."""
    started = time.perf_counter()
    found = await usecases.graph_snapshot(
        call, limit=limit, min_importance=min_importance, types=[t.strip() for t in split_values(types)], since=since,
        read=usecases.read_options(as_of, known_at, state_mode, None, include_archived, include_pending))
    return presenters.snapshot_json(found, started)


@router.get("/graph/neighbors/{memory_id}", tags=["graph"])
async def neighbors(memory_id: str, call: CallerDep, depth: int = Query(1, ge=1, le=3), include_semantic: bool = True,
                    semantic_limit: int = Query(5, ge=1, le=20), state_mode: str | None = None, as_of: str | None = None,
                    known_at: str | None = None) -> dict[str, Any]:
    """A memory, its neighbours up to ``depth`` (1..3) hops and (``include_semantic``) its
    ``semantic_limit`` (1..20) nearest memories by embedding."""
    started = time.perf_counter()
    found = await usecases.graph_neighbors(call, memory_id, depth=depth, include_semantic=include_semantic,
                                           semantic_limit=semantic_limit,
                                           read=usecases.read_options(as_of, known_at, state_mode))
    return presenters.neighbors_json(found, started)


@router.get("/graph/stats", tags=["graph"])
async def stats(call: CallerDep) -> dict[str, Any]:
    """Counts of the scope's graph by type, relation, state, importance band and day."""
    started = time.perf_counter()
    return presenters.graph_stats_json(await usecases.graph_stats(call), started)


@router.get("/graph/types", tags=["graph"])
async def types(request: Request) -> Any:
    """The memory types and their colours (no store is read; the key is checked as on every
    route, 401/403 otherwise)."""
    if denied := await auth_error(request):
        return denied
    names = [n for n in TYPE_NAMES.values() if n != "MetaPattern"]
    return {"status": "success", "types": names, "colors": {n: presenters.TYPE_COLORS[n] for n in names}}


@router.get("/graph/relations", tags=["graph"])
async def relations(request: Request) -> Any:
    """The relation types (authorable and system) and their colours (no store is read; the
    key is checked as on every route, 401/403 otherwise)."""
    if denied := await auth_error(request):
        return denied
    names = sorted(AUTHORABLE_RELATIONS + SYSTEM_RELATIONS)
    return {"status": "success", "relations": names, "authorable": sorted(AUTHORABLE_RELATIONS),
            "colors": {n: presenters.RELATION_COLORS[n] for n in names}}


@router.get("/entities", tags=["entities"])
async def list_entities(call: CallerDep, category: str = "", limit: int | None = Query(None, ge=1, le=500)) -> dict[str, Any]:
    """The scope's entities, most referenced first (``limit`` 1..500, default 100)."""
    found = await usecases.entities(call, category=category, limit=limit)
    items = [presenters.entity_json(e) for e in found.entities]
    return {"status": "success", "entities": items, "count": len(items)}


@router.get("/entities/merge-candidates", tags=["entities"])
async def merge_candidates(call: CallerDep, limit: int | None = Query(None, ge=1, le=500)) -> dict[str, Any]:
    """Pairs of entities that may name the same thing, most confident first."""
    found = await usecases.merge_candidates(call, limit=limit)
    items = [presenters.merge_candidate_json(c) for c in found.candidates]
    return {"status": "success", "candidates": items, "count": len(items)}


@router.get("/entities/merges", tags=["entities"])
async def list_merges(call: CallerDep, limit: int = Query(100, ge=1, le=500)) -> dict[str, Any]:
    """The scope's entity merges, newest first (admin): the audit record undo reads."""
    found = await usecases.entity_merges(call, page_size=limit)
    items = [presenters.entity_merge_json(m) for m in found.merges]
    return {"status": "success", "merges": items, "count": len(items)}


@router.post("/entities/merges/{merge_id}/undo", tags=["entities"])
async def undo_merge(merge_id: str, call: CallerDep) -> dict[str, Any]:
    """Undo an entity merge (admin): edges and aliases return as they were."""
    found = await usecases.undo_entity_merge(call, merge_id)
    return {"status": "success", "merge": presenters.entity_merge_json(found.merge)}


@router.get("/entity/{slug}", tags=["entities"])
async def get_entity(slug: str, call: CallerDep, category: str = "",
                     memory_limit: int | None = Query(None, ge=1, le=500),
                     state_mode: str | None = None) -> dict[str, Any]:
    """One entity (slug, ``<category>:<slug>`` or alias) and the memories that mention it."""
    found = await usecases.entity(call, slug, category=category, memory_limit=memory_limit,
                                  read=usecases.read_options(None, None, state_mode))
    memories = [presenters.graph_node_json(n) for n in found.memories]
    return {"status": "success", "entity": presenters.entity_json(found.entity), "memories": memories,
            "memory_count": len(memories)}


@router.post("/entity/{slug}/merge", tags=["entities"])
async def merge_entity(slug: str, body: EntityMergeBody, call: CallerDep) -> dict[str, Any]:
    """Merge the entity ``slug`` into ``merge_into`` (admin; audited; undo with
    ``POST /entities/merges/{id}/undo``)."""
    found = await usecases.merge_entities(call, slug, merge_into=body.merge_into, category=body.category,
                                          reason=body.reason)
    return {"status": "success", "merge": presenters.entity_merge_json(found.merge)}
