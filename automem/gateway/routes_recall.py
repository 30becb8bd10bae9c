"""Read routes: AutoMem's ``/recall``, ``/memory/by-tag``, ``/startup-recall``,
``/memories/{id}/related``."""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Query, Request

from automem.common.errors import InvalidArgument
from automem.common.model import memory_to_json, parse_time, ts
from automem.gateway.app import GatewayError, call
from automem.v1 import recall_service_pb2


def read_options(as_of: str | None, known_at: str | None, state_mode: str | None = None,
                 current_only: bool | None = None, include_archived: bool = False,
                 include_pending: bool = False) -> recall_service_pb2.ReadOptions:
    """The state-pass options of a request; 400 naming ``as_of`` / ``known_at`` when unparseable."""
    options = recall_service_pb2.ReadOptions(include_archived=include_archived, include_pending=include_pending)
    mode = state_mode or ("current" if current_only in (None, True) else "history")
    options.state_mode = mode
    try:
        if as_of:
            options.as_of.CopyFrom(ts(parse_time(as_of, field="as_of")))
        if known_at:
            options.known_at.CopyFrom(ts(parse_time(known_at, field="known_at")))
    except InvalidArgument as exc:
        raise GatewayError(400, str(exc)) from None
    return options


def _result(item: recall_service_pb2.ScoredMemory) -> dict[str, Any]:
    body = {
        "id": item.memory.id,
        "memory": memory_to_json(item.memory),
        "score": item.score,
        "final_score": item.final_score,
        "match_type": item.match_type,
        "score_components": dict(item.score_components),
    }
    if item.replaces_id:
        body["replaces_id"] = item.replaces_id
    if item.relation_type:
        body["relation_type"] = item.relation_type
    return body


def install(app: FastAPI) -> None:
    """Add the read routes to ``app``."""

    @app.get("/recall", tags=["recall"])
    async def recall(
        request: Request,
        query: str = "", queries: list[str] = Query(default=[]), embedding: str = "",
        limit: int = 5, offset: int = 0, sort: str = "score",
        time_query: str = "", start: str = "", end: str = "",
        tags: list[str] = Query(default=[]), tag_mode: str = "any", tag_match: str = "prefix",
        exclude_tags: list[str] = Query(default=[]),
        state_mode: str | None = None, current_only: bool | None = None,
        as_of: str | None = None, known_at: str | None = None,
        include_archived: bool = False, include_pending: bool = False,
        expand_relations: bool = False, expand_entities: bool = False,
        relation_limit: int = 5, expansion_limit: int = 25,
        expand_min_importance: float = 0.0, expand_min_strength: float = 0.0,
        min_score: float = 0.0, context: str = "", context_tags: list[str] = Query(default=[]),
        context_types: list[str] = Query(default=[]), priority_ids: list[str] = Query(default=[]),
        recency_bias: str = "auto", format: str | None = None,
    ) -> dict[str, Any]:
        """Hybrid recall (AutoMem's parameters and defaults). Current memories only unless
        ``state_mode=history``; a superseded hit comes back as its chain head with
        ``match_type: state_replacement``. A bare call lists recent memories."""
        started = time.perf_counter()
        if limit < 1:
            raise GatewayError(400, f"limit: must be between 1 and {request.app.state.settings.recall_max_limit}")
        vector: list[float] = []
        if embedding.strip():
            try:
                vector = [float(v) for v in embedding.replace("[", "").replace("]", "").split(",") if v.strip()]
            except ValueError:
                raise GatewayError(400, "embedding: must be a comma-separated list of numbers") from None
        expanded_tags = [t for raw in tags for t in raw.split(",") if t.strip()]
        message = recall_service_pb2.SearchMemoriesRequest(
            query=query, queries=queries, embedding=vector, limit=limit, offset=offset, sort=sort,
            time_query=time_query, start=start, end=end, tags=expanded_tags, tag_mode=tag_mode,
            tag_match=tag_match, exclude_tags=exclude_tags,
            read=read_options(as_of, known_at, state_mode, current_only, include_archived, include_pending),
            expand_relations=expand_relations, expand_entities=expand_entities, relation_limit=relation_limit,
            expansion_limit=expansion_limit, expand_min_importance=expand_min_importance,
            expand_min_strength=expand_min_strength, min_score=min_score, context=context,
            context_tags=context_tags, context_types=context_types, priority_ids=priority_ids,
            recency_bias=recency_bias)
        response = await call(request.app.state.client.recall.SearchMemories, message, request)
        results = [_result(r) for r in response.results]
        return {
            "status": "success", "results": results, "count": len(results),
            "state_mode": message.read.state_mode, "query": query, "tags": expanded_tags, "tag_mode": tag_mode,
            "tag_match": tag_match, "limit": limit, "offset": offset, "sort": sort,
            "time_window": {"start": response.start or None, "end": response.end or None},
            "as_of": as_of, "known_at": known_at, "arms": list(response.arms),
            "degraded": list(response.degraded), "query_time_ms": round((time.perf_counter() - started) * 1000, 2),
        }

    @app.get("/memory/by-tag", tags=["recall"])
    async def by_tag(request: Request, tags: list[str] = Query(default=[]), limit: int = 20, offset: int = 0,
                     tag_mode: str = "any", tag_match: str = "exact", as_of: str | None = None,
                     known_at: str | None = None, state_mode: str | None = None, page_token: str = "",
                     include_total: bool = False) -> dict[str, Any]:
        """Current memories with any of ``tags`` (AutoMem; limit ≤ 200), newest first.

        Paging: ``next_page_token`` (empty at the end) continues with ``page_token``, at a
        cost independent of how many memories carry the tag; ``offset`` still skips from the
        start. ``total`` is null unless known exactly (the listing fit in this page) or
        ``include_total=true`` (counts them all). ``has_more`` can be true on a page shorter
        than ``limit`` (many memories under the tag withheld): follow the token."""
        expanded = [t for raw in tags for t in raw.split(",") if t.strip()]
        if not expanded:
            raise GatewayError(400, "tags: at least one tag is required")
        if limit < 1:
            raise GatewayError(400, f"limit: must be between 1 and {request.app.state.settings.by_tag_max_limit}")
        response = await call(request.app.state.client.recall.ListMemoriesByTag,
                              recall_service_pb2.ListMemoriesByTagRequest(
                                  tags=expanded, limit=limit, offset=offset, tag_mode=tag_mode, tag_match=tag_match,
                                  read=read_options(as_of, known_at, state_mode), page_token=page_token,
                                  include_total=include_total), request)
        memories = [memory_to_json(m) for m in response.memories]
        return {"status": "success", "tags": expanded, "count": len(memories), "limit": limit, "offset": offset,
                "has_more": response.has_more, "total": response.total if response.HasField("total") else None,
                "next_page_token": response.next_page_token or None, "memories": memories}

    @app.get("/startup-recall", tags=["recall"])
    async def startup_recall(request: Request) -> dict[str, Any]:
        """Critical lessons and system rules (AutoMem), current memories only."""
        response = await call(request.app.state.client.recall.StartupRecall,
                              recall_service_pb2.StartupRecallRequest(read=read_options(None, None)), request)
        lessons = [memory_to_json(m) for m in response.critical_lessons]
        rules = [memory_to_json(m) for m in response.system_rules]
        return {"status": "success", "critical_lessons": lessons, "system_rules": rules,
                "has_critical": bool(lessons), "lesson_count": len(lessons), "rule_count": len(rules)}

    @app.get("/memories/{memory_id}/related", tags=["recall"])
    async def related(memory_id: str, request: Request, relationship_types: list[str] = Query(default=[]),
                      max_depth: int = 1, limit: int = 20, as_of: str | None = None,
                      known_at: str | None = None) -> dict[str, Any]:
        """Graph neighbours up to ``max_depth`` (1..3), current memories only."""
        types = [t for raw in relationship_types for t in raw.split(",") if t.strip()]
        response = await call(request.app.state.client.recall.ListRelatedMemories,
                              recall_service_pb2.ListRelatedMemoriesRequest(
                                  id=memory_id, relationship_types=types, max_depth=max_depth, limit=limit,
                                  read=read_options(as_of, known_at)), request)
        items = [{"id": r.memory.id, "memory": memory_to_json(r.memory), "relation_type": r.relation_type,
                  "strength": r.strength, "depth": r.depth} for r in response.related]
        return {"status": "success", "memory_id": memory_id, "count": len(items), "related_memories": items}
