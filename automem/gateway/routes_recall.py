"""Read routes: AutoMem's ``/recall``, ``/memory/by-tag``, ``/startup-recall``,
``/memories/{id}/related``.

Each route reads its parameters, calls one use case (automem/gateway/usecases.py) and
presents the answer (automem/gateway/presenters.py)."""

from __future__ import annotations

import re
import time
from typing import Any

from fastapi import APIRouter, Query, Request

from automem.common.model import iso
from automem.gateway import presenters, usecases
from automem.gateway.deps import CallerDep
from automem.gateway.deps import split_values as _split
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import JsonBodyRoute

router = APIRouter(route_class=JsonBodyRoute)

#: A JSON number (RFC 8259 section 6), ASCII digits only: one value of ``embedding``.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


@router.get("/recall", tags=["recall"])
async def recall(
    call: CallerDep, request: Request,
    query: str = "", queries: list[str] = Query(default=[]), embedding: str = "",
    limit: int = 5, offset: int = 0, sort: str = "", order_by: str = "",
    time_query: str = "", start: str = "", end: str = "",
    tags: list[str] = Query(default=[]), tag_mode: str = "any", tag_match: str = "prefix",
    exclude_tags: list[str] = Query(default=[]),
    state_mode: str | None = None, current_only: bool | None = None,
    as_of: str | None = None, known_at: str | None = None,
    include_archived: bool = False, include_pending: bool = False,
    expand_relations: bool = Query(False, description="Default false; AutoMem's other names: "
                                   "expand_associations, expand (the first given is read)."),
    expand_entities: bool = Query(False, description="Default false; AutoMem's other name: entity_expansion."),
    relation_limit: int = Query(5, ge=1, le=100),
    expansion_limit: int = Query(25, ge=1, le=500, description="Default 25; AutoMem's other name: "
                                 "relation_expansion_limit."),
    expand_min_importance: float = Query(0.0, allow_inf_nan=False, ge=0, le=1),
    expand_min_strength: float = Query(0.0, allow_inf_nan=False, ge=0, le=1),
    min_score: float = Query(0.0, allow_inf_nan=False, ge=0), context: str = "", context_tags: list[str] = Query(default=[]),
    context_types: list[str] = Query(default=[]), priority_ids: list[str] = Query(default=[]),
    recency_bias: str = "auto", format: str | None = None, state_debug: bool = False, rerank: bool | None = None,
    time_alias: str = Query(default="", alias="time"), tz: str = "", timezone: str = "",
    expand_respect_tags: bool = False,
    # AutoMem's other names of expand_relations, expand_entities and expansion_limit
    # (its automem/api/recall.py reads them): honoured, not shown in the schema.
    expand: bool | None = Query(None, include_in_schema=False),
    expand_associations: bool | None = Query(None, include_in_schema=False),
    entity_expansion: bool | None = Query(None, include_in_schema=False),
    relation_expansion_limit: int | None = Query(None, ge=1, le=500, include_in_schema=False),
) -> dict[str, Any]:
    """Hybrid recall (AutoMem's parameters and defaults). Current memories only unless
    ``state_mode=history``; a superseded hit comes back as its chain head with
    ``match_type: state_replacement``. A bare call lists recent memories. ``time`` is an
    alias of ``time_query``, ``timezone`` of ``tz`` (automem/common/timewindow.py).
    ``order_by`` is read as ``sort`` when ``sort`` is absent (AutoMem's
    automem/api/recall.py). ``limit`` above the maximum (100) is clamped and the applied
    value answered in ``limit`` (``requested_limit`` keeps what was asked); zero or negative
    is a 400 naming ``limit``. ``state_debug=true`` lists the withheld hits with their
    reasons under ``state_filter``. Pages (``offset``) of the same request slice one ranking:
    ``has_more`` says another page follows, ``total`` is null unless known exactly (the
    ranking was read to its end). ``rerank=true`` asks the configured LLM to reorder the best
    memories, ``rerank=false`` keeps it from doing so under ``AUTOMEM_RECALL_LLM_RERANK``
    (automem/recall/llm_rerank.py; ``arms`` / ``degraded`` say whether it did).
    ``expand_respect_tags`` keeps expansions to the tag filter too. Naive times (``start``,
    ``end``, ``as_of``, ``known_at``) are all read in ``tz`` (UTC without it); ``as_of`` and
    ``known_at`` are echoed as applied, RFC 3339 with the offset (null when not given). AutoMem's aliases
    ``expand`` / ``expand_associations`` (expand_relations), ``entity_expansion``
    (expand_entities) and ``relation_expansion_limit`` (expansion_limit) are read; the
    parameters of AutoMem features this service does not have
    (automem/gateway/schemas.py ``ACCEPTED_UNREAD``) are accepted and change nothing; any
    other parameter is a 400 naming it (a typo such as ``exclude_tag`` was ignored). Context
    hints, as AutoMem's: ``context`` (a label) and ``context_tags`` boost memories with those
    tags, ``context_types`` memories of those types (an unknown type is a 400 naming
    ``context_types``), and ``priority_ids`` memories lead the page in the order given, also
    when no search found them (``match_type: priority_id``, ``context_priority.injected``),
    unless the request's filters or their state leave them out; list parameters take repeated
    and comma-separated values alike (automem/recall/ranking.py, automem/recall/servicer.py)."""
    started = time.perf_counter()
    if format is not None and "\x00" in format:  # read by AutoMem's clients only; the schema says no NUL
        raise GatewayError(400, "format: contains a NUL character")
    sort = sort or order_by or "score"
    # AutoMem's names: the first one given is read (``a or b or c`` over the raw values).
    given = request.query_params
    if "expand_relations" not in given:
        expand_relations = next((v for v in (expand_associations, expand) if v is not None), False)
    if "expand_entities" not in given and entity_expansion is not None:
        expand_entities = entity_expansion
    if "expansion_limit" not in given and relation_expansion_limit is not None:
        expansion_limit = relation_expansion_limit
    vector: list[float] = []
    if embedding.strip():
        values = [v.strip() for v in embedding.replace("[", "").replace("]", "").split(",") if v.strip()]
        # JSON numbers only: float() also reads "1_0", other scripts' digits, "nan" and "inf".
        if not all(_JSON_NUMBER.fullmatch(v) for v in values):
            raise GatewayError(400, "embedding: must be a comma-separated list of numbers")
        vector = [float(v) for v in values]
    expanded_tags = _split(tags)
    context_tags, context_types, priority_ids = _split(context_tags), _split(context_types), _split(priority_ids)
    read = usecases.read_options(as_of, known_at, state_mode, current_only, include_archived, include_pending,
                                 tz=tz or timezone)
    found = await usecases.search(
        call, read=read, query=query, queries=queries, embedding=vector, limit=limit, offset=offset, sort=sort,
        time_query=time_query or time_alias, start=start, end=end, tags=expanded_tags, tag_mode=tag_mode,
        tag_match=tag_match, exclude_tags=_split(exclude_tags), expand_relations=expand_relations,
        expand_entities=expand_entities, relation_limit=relation_limit, expansion_limit=expansion_limit,
        expand_min_importance=expand_min_importance, expand_min_strength=expand_min_strength, min_score=min_score,
        context=context, context_tags=context_tags, context_types=context_types, priority_ids=priority_ids,
        recency_bias=recency_bias, tz=tz or timezone, state_debug=state_debug, rerank=rerank,
        expand_respect_tags=expand_respect_tags)
    results = [presenters.scored_json(r) for r in found.results]
    return {
        "status": "success", "results": results, "count": len(results),
        "state_mode": usecases.state_mode_word(read), "query": query, "tags": expanded_tags, "tag_mode": tag_mode,
        "tag_match": tag_match, "limit": found.limit, "requested_limit": limit, "offset": offset, "sort": sort,
        **presenters.search_paging_json(found),
        "time_window": presenters.time_window_json(found),
        "time_window_warning": found.time_window_warning or None,
        "as_of": iso(read, "as_of"), "known_at": iso(read, "known_at"), "arms": list(found.arms),
        "degraded": list(found.degraded), "recency_bias": recency_bias,
        **presenters.recall_details_json(
            found, state_mode=usecases.state_mode_word(read), queries=[q for q in [query, *queries] if q.strip()],
            exclude_tags=_split(exclude_tags), min_score=min_score, expand_relations=expand_relations,
            expand_entities=expand_entities, relation_limit=relation_limit, expansion_limit=expansion_limit,
            state_debug=state_debug, tags=expanded_tags),
        **presenters.context_priority_json(context, context_tags, context_types, priority_ids, found.results),
        "query_time_ms": presenters.elapsed_ms(started),
    }


@router.get("/memory/by-tag", tags=["recall"])
async def by_tag(call: CallerDep, tags: list[str] = Query(default=[]), limit: int = 20, offset: int = 0,
                 tag_mode: str = "any", tag_match: str = "exact", as_of: str | None = None,
                 known_at: str | None = None, state_mode: str | None = None, page_token: str = "",
                 include_total: bool = False) -> dict[str, Any]:
    """Current memories with any of ``tags`` (AutoMem), newest first. ``limit`` above 200 is
    clamped and the applied page size answered in ``limit`` (``requested_limit`` keeps what
    was asked; AutoMem's automem/api/memory.py clamps the same way); zero or negative is a
    400 naming ``limit``. ``state_mode=history`` lists superseded, expired, archived and
    pending memories too: what ``DELETE /memory/by-tag`` would delete.

    Paging: ``next_page_token`` (empty at the end) continues with ``page_token``, at a
    cost independent of how many memories carry the tag; ``offset`` still skips from the
    start. ``total`` is null unless known exactly (the listing fit in this page) or
    ``include_total=true`` (counts them all). ``has_more`` can be true on a page shorter
    than ``limit`` (many memories under the tag withheld): follow the token."""
    expanded = _split(tags)
    listed = await usecases.list_by_tag(
        call, expanded, read=usecases.read_options(as_of, known_at, state_mode), limit=limit, offset=offset,
        tag_mode=tag_mode, tag_match=tag_match, page_token=page_token, include_total=include_total)
    memories = [presenters.memory_json(m) for m in listed.memories]
    return {"status": "success", "tags": expanded, "count": len(memories), "limit": listed.page_size,
            "requested_limit": limit, "offset": offset,
            **presenters.by_tag_json(listed), "memories": memories}


@router.get("/startup-recall", tags=["recall"])
async def startup_recall(call: CallerDep) -> dict[str, Any]:
    """Critical lessons and system rules (AutoMem), current memories only."""
    found = await usecases.startup_recall(call)
    lessons = [presenters.memory_json(m) for m in found.critical_lessons]
    rules = [presenters.memory_json(m) for m in found.system_rules]
    return {"status": "success", "critical_lessons": lessons, "system_rules": rules,
            "has_critical": bool(lessons), "lesson_count": len(lessons), "rule_count": len(rules)}


@router.get("/memories/{memory_id}/related", tags=["recall"])
async def related(memory_id: str, call: CallerDep, relationship_types: list[str] = Query(default=[]),
                  max_depth: int = Query(1, ge=1, le=3), limit: int = Query(20, ge=1, le=200),
                  as_of: str | None = None,
                  known_at: str | None = None) -> dict[str, Any]:
    """Graph neighbours up to ``max_depth`` (1..3), current memories only: one item per
    neighbour, with the type and strength of its edge; a superseded neighbour is shown as the
    current head of its chain, ``replaces_id`` naming it (presenters.py ``related_json``)."""
    found = await usecases.related(call, memory_id, types=_split(relationship_types), max_depth=max_depth,
                                   limit=limit, read=usecases.read_options(as_of, known_at))
    items = presenters.related_json(found)
    return {"status": "success", "memory_id": memory_id, "count": len(items), "related_memories": items}
