"""Presenters: service answers (protos) as AutoMem's JSON (/work/shared/AUTOMEM_API.md names
the fields; ``tests/integration`` pins them).

Plain functions from a proto (plus what the route echoes) to a dict, shared by the REST
routes and the MCP tools: a memory is always :func:`memory_json`, a relation
:func:`relation_json`, whichever door it leaves by.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format

from automem.common.model import (
    integral_numbers,
    iso,
    metadata_dict,
    parse_type,
    relation_type_name,
    state_name,
    type_name,
)
from automem.common.text import analyze
from automem.v1 import (
    admin_service_pb2,
    consolidate_service_pb2,
    enrich_service_pb2,
    ingest_service_pb2,
    memory_pb2,
    recall_service_pb2,
    review_service_pb2,
)


def memory_json(memory: memory_pb2.Memory, **extra: Any) -> dict[str, Any]:
    """A memory with AutoMem's field names.

    Keys: id, memory_id, content, summary, tags, importance, confidence, type, metadata,
    timestamp, created_at, updated_at, last_accessed, t_valid, t_invalid, recorded_at,
    retracted_at, state, superseded_by, version, etag, scope, content_hash, entities,
    embedding_status, enrichment_status, relevance_score, source, state_reason, superseded_at,
    prior_t_invalid, plus ``extra``. Times are RFC 3339 in UTC (``iso``), None when unset.
    """
    body: dict[str, Any] = {
        "id": memory.id,
        "memory_id": memory.id,
        "content": memory.content,
        "summary": memory.summary or None,
        "tags": list(memory.tags),
        "importance": memory.importance,
        "confidence": memory.confidence,
        "type": type_name(memory.type) or None,
        "metadata": metadata_dict(memory),
        "timestamp": iso(memory, "event_time"),
        "created_at": iso(memory, "create_time"),
        "updated_at": iso(memory, "update_time"),
        "last_accessed": iso(memory, "last_access_time"),
        "t_valid": iso(memory, "valid_from"),
        "t_invalid": iso(memory, "valid_to"),
        "recorded_at": iso(memory, "record_time"),
        "retracted_at": iso(memory, "retract_time"),
        "state": state_name(memory.state),
        "superseded_by": memory.superseded_by or None,
        "version": memory.version,
        "etag": str(memory.version),
        "scope": memory.scope,
        "content_hash": memory.content_hash,
        "entities": [{"name": e.name, "kind": e.kind, "tag": e.tag} for e in memory.entities],
        "embedding_status": memory_pb2.EmbeddingStatus.Name(memory.embedding_status)
        .removeprefix("EMBEDDING_STATUS_").lower(),
        "enrichment_status": memory_pb2.EnrichmentStatus.Name(memory.enrichment_status)
        .removeprefix("ENRICHMENT_STATUS_").lower(),
        "relevance_score": memory.relevance_score,
        "source": memory.source or None,
        "state_reason": memory.state_reason or None,
        "superseded_at": iso(memory, "superseded_time"),
        "prior_t_invalid": iso(memory, "prior_valid_to"),
    }
    body.update(extra)
    return body


def optional_memory(message: Any, name: str) -> dict[str, Any] | None:
    """:func:`memory_json` of the Memory field ``name`` of ``message``; None when unset."""
    return memory_json(getattr(message, name)) if message.HasField(name) else None


def relation_json(relation: memory_pb2.Relation) -> dict[str, Any]:
    """A relation with AutoMem's association fields (memory1_id, memory2_id, type, strength,
    created_at, reason, properties)."""
    return {
        "memory1_id": relation.source_id,
        "memory2_id": relation.target_id,
        "type": relation_type_name(relation.type),
        "strength": relation.strength,
        "created_at": iso(relation, "create_time"),
        "reason": relation.reason or None,
        "properties": json_format.MessageToDict(relation.properties) if relation.HasField("properties") else {},
    }


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (``time.perf_counter()``), two decimals: ``query_time_ms``."""
    return round((time.perf_counter() - started) * 1000, 2)


# --- writes ----------------------------------------------------------------------------


def stored_json(memory: memory_pb2.Memory, started: float, **extra: Any) -> dict[str, Any]:
    """``POST /memory`` (and supersede) answer: AutoMem's store fields, the memory, ``extra``."""
    body = memory_json(memory)
    return {
        "status": "success",
        "memory_id": memory.id,
        "stored_at": iso(memory, "create_time"),
        "type": body["type"],
        "confidence": memory.confidence,
        "qdrant": "queued",
        "embedding_status": body["embedding_status"],
        "enrichment": "queued",
        "metadata": body["metadata"],
        "timestamp": body["timestamp"],
        "updated_at": body["updated_at"],
        "last_accessed": body["last_accessed"],
        "state": body["state"],
        "scope": memory.scope,
        "memory": body,
        "query_time_ms": elapsed_ms(started),
        **extra,
    }


def superseded_json(response: ingest_service_pb2.SupersedeMemoryResponse, started: float,
                    with_relation: bool) -> dict[str, Any]:
    """A supersede's answer: the replacement as stored, plus the superseded memory (and the
    edge, for ``/v1/memories/{id}:supersede``)."""
    extra: dict[str, Any] = {"superseded_memory_id": response.superseded.id,
                             "superseded": memory_json(response.superseded)}
    if with_relation:  # none while the replacement waits for review (the old memory stays current)
        extra["relation"] = relation_json(response.relation) if response.HasField("relation") else None
    return stored_json(response.replacement, started, **extra)


def created_count(response: ingest_service_pb2.BatchCreateMemoriesResponse) -> int:
    """The memories a batch store added: its items not ``deduplicated``."""
    if not response.deduplicated:
        return len(response.memories)
    return sum(1 for repeated in response.deduplicated if not repeated)


def batch_stored_json(response: ingest_service_pb2.BatchCreateMemoriesResponse, started: float) -> dict[str, Any]:
    """``POST /memory/batch`` answer; ``deduplicated[i]`` is true where item i repeated an
    existing memory or an earlier item (its id is in ``memory_ids``, nothing new was stored
    for it). ``stored``: the items acknowledged (AutoMem's count, one per item); ``created``:
    the memories this batch added, the items not deduplicated."""
    return {"status": "success", "stored": len(response.memories), "created": created_count(response),
            "memory_ids": [m.id for m in response.memories],
            "deduplicated": list(response.deduplicated), "qdrant": "queued", "enrichment": "queued",
            "query_time_ms": elapsed_ms(started)}


def associated_json(outcome: Any) -> tuple[int, dict[str, Any]]:
    """HTTP status and answer of a batch ``POST /associate`` (``outcome``: a
    :class:`automem.gateway.usecases.Associated`): 201 all created, 207 some; none: 400 when
    an item was invalid, else the first failure's status (404 for a memory that is not
    there, as a single association answers), with an error body. Failed items are
    ``{index, error, code}`` (code = HTTP status)."""
    succeeded = [relation_json(r) for _, r in outcome.created]
    failed = [{"index": i, "error": e.message, "code": e.status} for i, e in outcome.failed]
    status = 201 if not failed else 207 if succeeded else (
        400 if any(f["code"] == 400 for f in failed) else failed[0]["code"])
    body: dict[str, Any] = {"status": "success" if not failed else "partial", "created_count": len(succeeded),
                            "failed_count": len(failed), "succeeded": succeeded, "failed": failed}
    if not succeeded and failed:  # nothing created: also an error body
        message = f"no association was created ({len(failed)} failed); see failed"
        body.update({"status": "error", "error": message, "message": message, "code": status})
    return status, body


def deleted_by_tag_json(tags: list[str], dry_run: bool,
                        response: ingest_service_pb2.DeleteMemoriesByTagResponse) -> dict[str, Any]:
    """``DELETE /memory/by-tag`` answer (``would_delete_count`` in a preview): the ids, the
    memories as they were before the delete (``memories``, each with its ``state`` and
    validity window) and their count by state (``states``, e.g. ``{"ACTIVE": 1,
    "SUPERSEDED": 1}``)."""
    memories = [memory_json(m) for m in response.memories]
    states: dict[str, int] = {}
    for m in memories:
        states[m["state"]] = states.get(m["state"], 0) + 1
    body: dict[str, Any] = {"status": "success", "tags": tags, "dry_run": dry_run,
                            "deleted_count": response.deleted_count, "memory_ids": list(response.memory_ids),
                            "states": states, "memories": memories}
    if dry_run:
        body["would_delete_count"] = len(response.memory_ids)
    return body


# --- reads -----------------------------------------------------------------------------


def got_memory_json(response: recall_service_pb2.GetMemoryResponse) -> dict[str, Any]:
    """The memory of a GetMemory answer with ``is_current`` and ``current_id``."""
    return memory_json(response.memory, is_current=response.is_current, current_id=response.current_id or None)


def scored_json(item: recall_service_pb2.ScoredMemory) -> dict[str, Any]:
    """A ``/recall`` result: ``{id, memory, score, final_score, match_type, score_components}``
    plus ``replaces_id`` / ``relation_type`` when set."""
    body = {
        "id": item.memory.id,
        "memory": memory_json(item.memory),
        "score": item.score,
        "final_score": item.final_score,
        "match_type": item.match_type,
        "score_components": dict(item.score_components),
    }
    return _with_provenance(body, item)


def scored_flat_json(item: recall_service_pb2.ScoredMemory) -> dict[str, Any]:
    """A recall result as one flat memory body with the score fields (MCP's form)."""
    body = memory_json(item.memory, score=item.score, final_score=item.final_score,
                       match_type=item.match_type, score_components=dict(item.score_components))
    return _with_provenance(body, item)


#: Match types whose hit came from the graph rather than the vector store's arms (AutoMem's
#: result ``source``: "graph" or "qdrant").
_GRAPH_MATCHES = frozenset({"tag", "time", "metadata", "relation", "entity", "state_replacement", "priority_id"})


def _with_provenance(body: dict[str, Any], item: recall_service_pb2.ScoredMemory) -> dict[str, Any]:
    """AutoMem's provenance fields of a recall result (automem/api/recall.py of
    verygoodplugins/automem): ``match_score``, ``source``; for a hit reached through an edge
    (relation expansion, or a state replacement of a superseded hit) ``relations`` /
    ``related_to`` ``[{type, strength, from}]`` and ``relation_score``; for a replacement
    ``state_replaces`` (and this service's ``replaces_id``, the same id)."""
    body["match_score"] = item.score
    body["source"] = "graph" if item.match_type in _GRAPH_MATCHES else "qdrant"
    if item.replaces_id:
        body["replaces_id"] = item.replaces_id
        body["state_replaces"] = item.replaces_id
    if item.relation_type:
        body["relation_type"] = item.relation_type
    if item.relation_from:
        edge = {"type": item.relation_type or None, "strength": item.relation_strength, "from": item.relation_from}
        body["relations"] = [edge]
        body["related_to"] = [edge]
        if item.match_type == "relation":
            body["relation_score"] = item.score
    return body


def recall_details_json(found: recall_service_pb2.SearchMemoriesResponse, *, state_mode: str,
                        queries: list[str], exclude_tags: list[str], min_score: float, expand_relations: bool,
                        expand_entities: bool, relation_limit: int, expansion_limit: int,
                        state_debug: bool, tags: list[str] | None = None) -> dict[str, Any]:
    """The parts of a ``/recall`` answer AutoMem's clients read beyond the results
    (automem/api/recall.py of verygoodplugins/automem; ../shared/AUTOMEM_API.md):
    ``state_filter`` (``current_only``, ``suppressed_count``, ``replacement_count``; with
    ``state_debug`` the withheld hits with their reasons, ``suppressed``, and the
    replacements, ``replacements``), ``score_filter`` (``min_score``, ``adaptive_floor``
    false: there is no adaptive floor here, ``filtered_count``), the echoes ``queries`` and
    ``exclude_tags``, ``dedup_removed`` (0: hits are de-duplicated by id before ranking),
    ``vector_search`` (``enabled``, ``matched``), ``keywords`` of a single query (its words
    without stop words), ``tag_scope`` when ``tags`` filter (``pool_size_hint`` null: not
    counted), and with ``expand_relations`` /
    ``expand_entities`` the ``expansion`` / ``entity_expansion`` blocks (seed and expanded
    counts, limits, the entities of the seeds)."""
    results = list(found.results)
    expanded = [r for r in results if r.match_type in ("relation", "entity")]
    seeds = [r for r in results if r.match_type not in ("relation", "entity")][: relation_limit or 5]
    state_filter: dict[str, Any] = {"current_only": state_mode == "current",
                                    "suppressed_count": found.state_filter.suppressed_count,
                                    "replacement_count": found.state_filter.replacement_count}
    if state_debug:
        state_filter["suppressed"] = [{"id": s.id, "reason": s.reason, "replacement_id": s.replacement_id or None}
                                      for s in found.state_filter.suppressed]
        state_filter["replacements"] = [{"id": r.memory.id, "replaces_id": r.replaces_id,
                                         "relation_type": r.relation_type or None}
                                        for r in results if r.replaces_id]
    body: dict[str, Any] = {
        "state_filter": state_filter,
        "score_filter": {"min_score": min_score, "adaptive_floor": False,
                         "filtered_count": found.score_filtered_count},
        "queries": queries, "exclude_tags": exclude_tags, "dedup_removed": 0,
        "vector_search": {"enabled": "vector" in found.arms,
                          "matched": any(r.score_components.get("vector", 0.0) > 0 for r in results)},
    }
    if len(queries) == 1:
        body["keywords"] = analyze(queries[0], stem=False)
    if tags:
        body["tag_scope"] = {"filtered": True, "pool_size_hint": None, "gated_low_evidence": 0}
    if expand_relations:
        body["expansion"] = {"enabled": True, "seed_count": len(seeds),
                             "expanded_count": sum(r.match_type == "relation" for r in expanded),
                             "relation_limit": relation_limit, "expansion_limit": expansion_limit}
    if expand_entities:
        found_entities = list(dict.fromkeys(e.tag or e.name for r in seeds for e in r.memory.entities))
        body["entity_expansion"] = {"enabled": True,
                                    "expanded_count": sum(r.match_type == "entity" for r in expanded),
                                    "entities_found": found_entities[:10]}
    return body


def search_paging_json(response: recall_service_pb2.SearchMemoriesResponse) -> dict[str, Any]:
    """The paging fields of a ranked recall: ``has_more`` and ``total`` (None unless known)."""
    return {"has_more": response.has_more, "total": response.total if response.HasField("total") else None}


def context_priority_json(context: str, context_tags: list[str], context_types: list[str],
                          priority_ids: list[str], results: Sequence[recall_service_pb2.ScoredMemory] = ()
                          ) -> dict[str, Any]:
    """AutoMem's ``context_priority`` block of a ``/recall`` answer when the request gave a
    context hint (its automem/api/recall.py answers it when its context profile is not
    empty), else nothing: ``context`` (the label), ``priority_tags`` (the context tags and
    the label, lower case, sorted, at most 10), ``priority_types`` (canonical names, sorted),
    ``language`` None (no language detection here) and ``injected``: whether one of
    ``results`` (the page) is a ``priority_ids`` memory no search arm found, added by the
    service (``match_type`` ``priority_id``, automem/recall/servicer.py ``_inject_priority``).
    ``context_types`` were checked by the service (an unknown one is a 400 before this runs)."""
    label = context.strip()
    if not (label or context_tags or context_types or priority_ids):
        return {}
    tags = sorted({t.strip().lower() for t in [*context_tags, label] if t.strip()})[:10]
    types = sorted({type_name(parse_type(t, field="context_types")) for t in context_types if t.strip()})
    return {"context_priority": {"language": None, "context": label or None, "priority_tags": tags,
                                 "priority_types": types,
                                 "injected": any(r.match_type == "priority_id" for r in results)}}


def time_window_json(response: recall_service_pb2.SearchMemoriesResponse) -> dict[str, str | None]:
    """The resolved event-time window of a search, RFC 3339 (None = open)."""
    return {"start": iso(response, "start_time"), "end": iso(response, "end_time")}


def by_tag_json(response: recall_service_pb2.ListMemoriesByTagResponse) -> dict[str, Any]:
    """The paging fields of a tag listing: ``has_more``, ``total`` (None unless known) and
    ``next_page_token`` (None at the end)."""
    return {"has_more": response.has_more, "total": response.total if response.HasField("total") else None,
            "next_page_token": response.next_page_token or None}


def related_json(response: recall_service_pb2.ListRelatedMemoriesResponse) -> list[dict[str, Any]]:
    """``/memories/{id}/related`` items: ``{id, memory, relation_type, strength, depth}``, plus
    ``replaces_id`` (the neighbour the edge reaches) when ``memory`` is the current head shown
    in that superseded neighbour's place (recall's name for a replacement)."""
    out = []
    for r in response.related:
        item = {"id": r.memory.id, "memory": memory_json(r.memory), "relation_type": r.relation_type,
                "strength": r.strength, "depth": r.depth}
        if r.replaces_id:
            item["replaces_id"] = r.replaces_id
        out.append(item)
    return out


def analysis_json(response: recall_service_pb2.AnalyzeMemoriesResponse) -> dict[str, Any]:
    """``GET /analyze`` answer (averages to four decimals), with AutoMem's ``analytics`` block
    (automem/api/recall.py ``analyze_memories``: memory_types, patterns, preferences,
    temporal_insights by UTC hour, entity_frequency, confidence_distribution)."""
    return {
        "status": "success", "memory_count": response.memory_count,
        "type_counts": dict(response.type_counts), "state_counts": dict(response.state_counts),
        "average_confidence": round(response.average_confidence, 4),
        "average_importance": round(response.average_importance, 4),
        "entity_frequency": {e.name: e.count for e in response.top_entities},
        "tag_frequency": {t.name: t.count for t in response.top_tags},
        "analytics": {
            "memory_types": {t: {"count": n, "average_confidence": round(response.type_average_confidence.get(t, 0.0), 3)}
                             for t, n in response.type_counts.items()},
            "patterns": [{"id": p.memory_id, "type": "MetaPattern", "description": p.description,
                          "confidence": round(p.confidence, 3), "observations": p.observations}
                         for p in response.patterns],
            "preferences": [{"prefers": p.prefers, "over": p.over, "context": p.context,
                             "strength": round(p.strength, 3)} for p in response.preferences],
            "temporal_insights": {f"hour_{h.hour:02d}": {"count": h.count,
                                                         "avg_importance": round(h.average_importance, 3)}
                                  for h in response.hours},
            "entity_frequency": {e.name: e.count for e in response.top_entities},
            "confidence_distribution": {"low": response.confidence_distribution.low,
                                        "medium": response.confidence_distribution.medium,
                                        "high": response.confidence_distribution.high},
        },
    }


# --- operations ------------------------------------------------------------------------


def stores_json(stats: recall_service_pb2.GetStatsResponse) -> dict[str, Any]:
    """Store connectivity and counts of a GetStats answer (falkordb, qdrant, memory_count,
    vector_count, vector_dimensions, and ``server_restarts``: restarts of the embedded
    nats-server / redis-server by name, empty when the service runs none). A count is None
    (unknown) when its store did not answer: 0 would read as an empty store.
    ``restore_incomplete``: True while the graph holds the marker of a restore that did not
    finish (the graph holds part of a backup), with ``restore_started_at`` (ISO 8601) when
    that restore started and ``restore_warning`` (the sentence the service logs at start,
    automem/common/backup.py ``restore_warning``); None / None / absent when the graph did not answer, False /
    None / absent when there is none."""
    restore_started = _iso(stats.restore_start_time) if stats.HasField("restore_start_time") else None
    body: dict[str, Any] = {
        "server_restarts": dict(stats.server_restarts),
        "falkordb": "connected" if stats.graph_connected else "disconnected",
        "qdrant": ("connected" if stats.vectors_connected else "disconnected") if stats.vectors_enabled
        else "disabled",
        "memory_count": stats.memory_count if stats.graph_connected else None,
        "vector_count": None if stats.vectors_enabled and not stats.vectors_connected else stats.vector_count,
        "vector_dimensions": stats.vector_dimensions,
        "restore_incomplete": restore_started is not None if stats.graph_connected else None,
        "restore_started_at": restore_started,
    }
    if restore_started is not None:
        from automem.common.backup import restore_warning  # only then: the module is heavy for a gateway

        body["restore_warning"] = restore_warning(stats.restore_start_time.ToMicroseconds() / 1e6)
    return body


def stores_degraded(stats: recall_service_pb2.GetStatsResponse) -> bool:
    """True when a store the service uses is unreachable, or when the graph holds part of a
    backup (a restore that did not finish: ``restore_start_time``)."""
    return (not stats.graph_connected or (stats.vectors_enabled and not stats.vectors_connected)
            or stats.HasField("restore_start_time"))


def count_sync_status(memory_count: int, vector_count: int) -> str:
    """synced | orphaned_vectors | drift_detected, from the two counts alone."""
    return ("synced" if memory_count == vector_count else
            "orphaned_vectors" if vector_count > memory_count else "drift_detected")


def _iso(stamp) -> str | None:
    """A Timestamp as ISO 8601 (UTC), None when unset."""
    return stamp.ToDatetime(UTC).isoformat() if stamp.seconds or stamp.nanos else None


def pending_count(status: enrich_service_pb2.GetEnrichmentStatusResponse) -> int:
    """AutoMem's ``pending`` (memories waiting for enrichment): ``memories_pending`` (counted
    in the graph, with those whose events the retention removed), else — FalkorDB did not
    answer in time — the queue depth (events waiting)."""
    return status.memories_pending if status.HasField("memories_pending") else status.queue_depth


def enrichment_json(status: enrich_service_pb2.GetEnrichmentStatusResponse,
                    reembed: enrich_service_pb2.ReembedProgress | None = None) -> dict[str, Any]:
    """``GET /enrichment/status`` answer: AutoMem's fields (automem/api/enrichment.py:
    ``status`` running|stopped from the consumer loop's liveness — AutoMem's ``thread_alive``
    —, ``queue_size``, ``pending``, ``inflight``, ``max_attempts``, ``stats``,
    ``classification``; ``pending``: :func:`pending_count`) plus ours (``queue_depth``, ``processed``, ``failed``,
    ``dead_lettered``, ``outbox_backlog`` (None when FalkorDB, which holds the outbox, did not
    answer in time), ``embedding_model``, ``vector_dimensions``) and
    ``reembed``: the latest ``POST /admin/reembed`` job of the caller's scope (None when none
    ran there)."""
    st, cl = status.stats, status.classification
    job = reembed
    return {"status": "running" if status.consumer_running else "stopped",
            "thread_alive": status.consumer_running,
            "queue_size": status.queue_depth, "queue_depth": status.queue_depth, "pending": pending_count(status),
            "inflight": status.inflight, "max_attempts": status.max_attempts,
            "processed": status.processed, "failed": status.failed, "dead_lettered": status.dead_lettered,
            "outbox_backlog": status.outbox_backlog if status.HasField("outbox_backlog") else None,
            "embedding_model": status.embedding_model, "vector_dimensions": status.vector_dimensions,
            "stats": {"processed_total": st.processed_total, "successes": st.successes, "failures": st.failures,
                      "last_success_id": st.last_success_id or None, "last_success_at": _iso(st.last_success_time),
                      "last_error": st.last_error or None, "last_error_at": _iso(st.last_error_time)},
            "classification": {"llm_attempts": cl.llm_attempts, "llm_successes": cl.llm_successes,
                               "fallbacks": cl.fallbacks},
            "reembed": None if job is None else {
                "job_id": job.job_id, "total": job.total, "queued": job.queued, "done": job.done,
                "complete": job.done >= job.total, "force": job.force, "started_at": _iso(job.start_time)}}


def consolidation_json(run: consolidate_service_pb2.ConsolidationRun) -> dict[str, Any]:
    """``POST /consolidate`` answer."""
    return {"status": "success", "run_id": run.run_id, "mode": run.mode, "dry_run": run.dry_run,
            "results": dict(run.counts)}


def consolidation_status_json(response: consolidate_service_pb2.GetConsolidationStatusResponse) -> dict[str, Any]:
    """``GET /consolidate/status`` answer: next runs, recent runs, and AutoMem's
    ``thread_alive`` (the scheduler loop runs) and ``tick_seconds`` (automem/api/consolidation.py)."""
    return {"status": "success", "next_runs": dict(response.next_run_time),
            "thread_alive": response.scheduler_running, "tick_seconds": response.tick_seconds, "history": [
        {"run_id": r.run_id, "mode": r.mode, "dry_run": r.dry_run, "results": dict(r.counts),
         "trigger": r.trigger, "error": r.error or None,
         "started_at": datetime.fromtimestamp(r.start_time.seconds, UTC).isoformat()} for r in response.runs]}


def sync_json(response: consolidate_service_pb2.CheckSyncResponse) -> dict[str, Any]:
    """``POST /admin/sync`` answer."""
    return {"status": "success", "sync_status": response.sync_status,
            "missing_vectors": response.missing_vectors, "orphaned_vectors": response.orphaned_vectors,
            "stale_payloads": response.stale_payloads, "repaired": response.repaired,
            "unenriched_past_retention": response.unenriched_past_retention}


# --- truth model (/v1) -----------------------------------------------------------------


def review_item_json(item: review_service_pb2.ReviewItem) -> dict[str, Any]:
    """A review item (memories as :func:`memory_json`)."""
    return {
        "id": item.id, "kind": item.kind, "status": item.status, "scope": item.scope,
        "memory_id": item.memory_id or None, "target_id": item.target_id or None, "reason": item.reason or None,
        "created_at": iso(item, "create_time"), "decided_by": item.decided_by or None,
        "decided_at": iso(item, "decision_time"), "decision_reason": item.decision_reason or None,
        "memory": optional_memory(item, "memory"), "target": optional_memory(item, "target"),
        "conflicts_with": list(item.conflicts_with),
    }


def review_conflict_json(conflict: review_service_pb2.ReviewConflict) -> dict[str, Any]:
    """A memory an approval left current next to the approved one (its rejected proposal)."""
    return {"memory_id": conflict.memory_id, "proposal_id": conflict.proposal_id or None,
            "rejection_reason": conflict.rejection_reason or None, "memory": optional_memory(conflict, "memory")}


def tombstone_json(t: review_service_pb2.Tombstone) -> dict[str, Any]:
    """A tombstone."""
    return {"id": t.id, "content_hash": t.content_hash, "scope": t.scope, "memory_id": t.memory_id or None,
            "reason": t.reason or None, "lifted": t.lifted, "created_at": iso(t, "create_time"),
            "lifted_at": iso(t, "lift_time"), "created_by": t.created_by or None, "lifted_by": t.lifted_by or None}


def purge_json(record: review_service_pb2.PurgeRecord) -> dict[str, Any]:
    """A purge record (content-free: ids, actor, time, reason, counts)."""
    return {"id": record.id or None, "kind": record.kind, "scope": record.scope,
            "memory_ids": list(record.memory_ids), "actor": record.actor or None,
            "purged_at": iso(record, "purge_time"), "reason": record.reason or None, "status": record.status,
            "pending_steps": list(record.pending_steps), "dry_run": record.dry_run,
            "counts": {field.name: int(getattr(record.counts, field.name))
                       for field in record.counts.DESCRIPTOR.fields}}


def api_key_json(key: admin_service_pb2.ApiKey) -> dict[str, Any]:
    """An API key without its secret (automem/ingest/admin.py)."""
    return {"id": key.id, "role": key.role, "scopes": list(key.scopes), "default_scope": key.default_scope,
            "display_name": key.display_name or None, "revoked": key.revoked, "require_review": key.require_review,
            "created_at": iso(key, "create_time"), "created_by": key.created_by or None,
            "revoked_at": iso(key, "revoke_time"), "revoked_by": key.revoked_by or None}


def api_key_event_json(event: admin_service_pb2.ApiKeyEvent) -> dict[str, Any]:
    """One audited key change (never the secret)."""
    return {"id": event.id, "action": event.action, "key_id": event.key_id, "actor": event.actor or None,
            "role": event.role, "scopes": list(event.scopes), "at": iso(event, "event_time")}


def event_json(event: Any, stored_state: int | None = None) -> dict[str, Any]:
    """A MemoryEvent (proto JSON names, enums by name). ``stored_state`` (a MemoryState
    value, from ListMemoryEventsResponse ``after_stored_states``): the state the event's
    ``after`` stores, given as ``after.stored_state`` (enum name) beside ``after.state``, the
    state a current read gives the memory now (automem/ingest/review.py ``ListMemoryEvents``)."""
    body = json_format.MessageToDict(event, preserving_proto_field_name=True)
    if stored_state is not None and "after" in body:
        body["after"]["stored_state"] = memory_pb2.MemoryState.Name(stored_state)
    return body


# --- graph and entities (AutoMem's automem/api/graph.py and automem/api/entity.py) -------

#: Colours of memory types and relation types for graph viewers (this service's palette;
#: AutoMem's viewer reads ``color`` per node and edge, and ``meta`` holds the tables).
TYPE_COLORS = {"Decision": "#2563EB", "Pattern": "#059669", "Preference": "#7C3AED", "Style": "#DB2777",
               "Habit": "#D97706", "Insight": "#EA580C", "Context": "#4B5563", "MetaPattern": "#0891B2",
               "Memory": "#9CA3AF"}
RELATION_COLORS = {"RELATES_TO": "#9CA3AF", "LEADS_TO": "#2563EB", "OCCURRED_BEFORE": "#6B7280",
                   "PREFERS_OVER": "#7C3AED", "EXEMPLIFIES": "#059669", "CONTRADICTS": "#DC2626",
                   "REINFORCES": "#16A34A", "INVALIDATED_BY": "#B91C1C", "EVOLVED_INTO": "#0EA5E9",
                   "DERIVED_FROM": "#A16207", "PART_OF": "#4F46E5", "SIMILAR_TO": "#64748B",
                   "PRECEDED_BY": "#94A3B8", "DISCOVERED": "#C026D3"}
#: How a node that is not current is drawn (the state pass keeps superseded memories in graph
#: views, marked): faded, whatever its confidence.
SUPERSEDED_OPACITY = 0.25


def graph_node_json(node: recall_service_pb2.GraphNode) -> dict[str, Any]:
    """A graph node: :func:`memory_json` plus AutoMem's viewer fields (``color`` by type,
    ``radius`` 0.5 + 1.5 x importance, ``opacity`` 0.4 + 0.6 x confidence) and the state
    pass's verdict: ``is_current``, ``current_id`` (the head of a superseded memory's chain),
    ``style``: "current", "superseded" (replaced: SUPERSEDED), or "not_current" (expired, not
    yet valid, archived, pending or deleted: every one was drawn "superseded"); a node that is
    not current is drawn at :data:`SUPERSEDED_OPACITY`. ``similarity`` (semantic neighbours)
    and ``depth`` (graph neighbours) when set."""
    memory = node.memory
    kind = type_name(memory.type) or "Memory"
    body = memory_json(
        memory, color=TYPE_COLORS.get(kind, TYPE_COLORS["Memory"]), radius=round(0.5 + memory.importance * 1.5, 4),
        opacity=round(0.4 + memory.confidence * 0.6, 4) if node.is_current else SUPERSEDED_OPACITY,
        is_current=node.is_current, current_id=node.current_id or None,
        style="current" if node.is_current else
        "superseded" if memory.state == memory_pb2.MEMORY_STATE_SUPERSEDED else "not_current")
    if node.similarity:
        body["similarity"] = node.similarity
    if node.depth:
        body["depth"] = node.depth
    return body


def graph_edge_json(edge: recall_service_pb2.GraphEdge) -> dict[str, Any]:
    """An edge: id ``<source>-<type>-<target>``, source, target, type, strength, color."""
    return {"id": f"{edge.source_id}-{edge.type}-{edge.target_id}", "source": edge.source_id,
            "target": edge.target_id, "type": edge.type, "strength": edge.strength,
            "color": RELATION_COLORS.get(edge.type, "#9CA3AF")}


def graph_meta(started: float, **extra: Any) -> dict[str, Any]:
    """The ``meta`` block of the graph routes: colour tables, ``query_time_ms`` and ``extra``."""
    return {"type_colors": TYPE_COLORS, "relation_colors": RELATION_COLORS,
            "query_time_ms": elapsed_ms(started), **extra}


def snapshot_json(response: recall_service_pb2.GetGraphSnapshotResponse, started: float) -> dict[str, Any]:
    """AutoMem's snapshot: ``nodes``, ``edges``, ``stats`` (total_nodes, total_edges,
    returned_nodes, returned_edges, ``sampled``: whether ``limit`` left memories out,
    sample_ratio), ``meta``."""
    nodes = [graph_node_json(n) for n in response.nodes]
    total = response.total_nodes
    return {"status": "success", "nodes": nodes, "edges": [graph_edge_json(e) for e in response.edges],
            "stats": {"total_nodes": total, "total_edges": response.total_edges, "returned_nodes": len(nodes),
                      "returned_edges": len(response.edges), "sampled": response.sampled,
                      "sample_ratio": len(nodes) / max(total, 1)},
            "meta": graph_meta(started)}


def neighbors_json(response: recall_service_pb2.ListGraphNeighborsResponse, started: float) -> dict[str, Any]:
    """AutoMem's neighbours answer: ``center``, ``graph_neighbors``, ``semantic_neighbors``,
    ``edges``, ``meta`` (depth, query_time_ms)."""
    return {"status": "success", "center": graph_node_json(response.center),
            "graph_neighbors": [graph_node_json(n) for n in response.graph_neighbors],
            "semantic_neighbors": [graph_node_json(n) for n in response.semantic_neighbors],
            "edges": [graph_edge_json(e) for e in response.edges],
            "meta": graph_meta(started, depth=response.depth)}


def graph_stats_json(response: recall_service_pb2.GetGraphStatsResponse, started: float) -> dict[str, Any]:
    """AutoMem's stats: ``totals`` (nodes, edges), ``by_type``, ``by_relationship``,
    ``importance_distribution`` (high, medium, low), ``recent_activity`` [{date, count}],
    plus ``by_state``, ``meta``."""
    return {"status": "success", "totals": {"nodes": response.total_nodes, "edges": response.total_edges},
            "by_type": dict(response.by_type), "by_relationship": dict(response.by_relationship),
            "by_state": dict(response.by_state),
            "importance_distribution": {"high": response.importance_high, "medium": response.importance_medium,
                                        "low": response.importance_low},
            "recent_activity": [{"date": d.date, "count": d.count} for d in response.recent_activity],
            "meta": graph_meta(started)}


def entity_json(entity: recall_service_pb2.GraphEntity) -> dict[str, Any]:
    """An entity with AutoMem's fields: id, slug, category, name, aliases, reference_count,
    plus merged_into (null unless merged) and tag (``entity:<category>:<slug>``)."""
    return {"id": entity.id, "slug": entity.slug, "category": entity.category, "name": entity.name,
            "aliases": list(entity.aliases), "reference_count": entity.reference_count,
            "merged_into": entity.merged_into or None, "tag": f"entity:{entity.category}:{entity.slug}"}


def merge_candidate_json(candidate: recall_service_pb2.EntityMergeCandidate) -> dict[str, Any]:
    """AutoMem's candidate: entity_a, entity_b, canonical, alias (ids), confidence, reason,
    auto_merge."""
    return {"entity_a": candidate.entity_a.id, "entity_b": candidate.entity_b.id, "canonical": candidate.canonical,
            "alias": candidate.alias, "confidence": round(candidate.confidence, 4), "reason": candidate.reason,
            "auto_merge": candidate.auto_merge}


def entity_merge_json(merge: review_service_pb2.EntityMerge) -> dict[str, Any]:
    """An entity merge record: AutoMem's ``merge`` fields (canonical, alias, alias_slug,
    edges_moved) plus id, actor, reason, created_at, undone, undone_by, undone_at, memory_ids."""
    return {"id": merge.id, "canonical": merge.canonical, "alias": merge.alias,
            "alias_slug": merge.alias.split(":", 1)[-1], "edges_moved": merge.edges_moved, "actor": merge.actor,
            "reason": merge.reason or None, "created_at": iso(merge, "create_time"), "undone": merge.undone,
            "undone_by": merge.undone_by or None, "undone_at": iso(merge, "undo_time"),
            "memory_ids": list(merge.memory_ids)}


#: Memory message fields (and node properties) under AutoMem's names where they differ
#: (:func:`memory_json`).
AUTOMEM_FIELD_NAMES = {
    "event_time": "timestamp", "create_time": "created_at", "update_time": "updated_at",
    "last_access_time": "last_accessed", "valid_from": "t_valid", "valid_to": "t_invalid",
    "record_time": "recorded_at", "retract_time": "retracted_at", "superseded_time": "superseded_at",
    "prior_valid_to": "prior_t_invalid",
}


def field_name(name: str) -> str:
    """A Memory field or node property name as :func:`memory_json` spells it."""
    return AUTOMEM_FIELD_NAMES.get(name, name)


def version_json(version: recall_service_pb2.MemoryVersion) -> dict[str, Any]:
    """One version: ``version``, ``recorded_at`` (RFC 3339), ``actor``, ``changed_fields``
    (AutoMem's names, :func:`field_name`), ``memory`` (:func:`memory_json`; its ``state`` is
    the state a current read gives it now) and ``stored_state`` (the state the version
    stores: SUPERSEDED where a memory still in force until a future replacement reads ACTIVE)."""
    return {"version": version.version, "recorded_at": iso(version, "record_time"), "actor": version.actor,
            "changed_fields": [field_name(f) for f in version.changed_fields], "memory": memory_json(version.memory),
            "stored_state": state_name(version.stored_state or version.memory.state)}


#: Diffed enum fields: the proto enum of each, and how memory_json words its values.
_ENUM_WORDS: dict[str, tuple[Any, Any]] = {
    "state": (memory_pb2.MemoryState, state_name),
    "type": (memory_pb2.MemoryType, lambda v: type_name(v) or None),
    "embedding_status": (memory_pb2.EmbeddingStatus,
                         lambda v: memory_pb2.EmbeddingStatus.Name(v).removeprefix("EMBEDDING_STATUS_").lower()),
    "enrichment_status": (memory_pb2.EnrichmentStatus,
                          lambda v: memory_pb2.EnrichmentStatus.Name(v).removeprefix("ENRICHMENT_STATUS_").lower()),
}


#: The Memory fields that hold a time (google.protobuf.Timestamp).
_TIME_FIELDS = frozenset(f.name for f in memory_pb2.Memory.DESCRIPTOR.fields
                         if f.message_type is not None and f.message_type.full_name == "google.protobuf.Timestamp")


def diff_json(response: recall_service_pb2.DiffMemoryVersionsResponse) -> dict[str, Any]:
    """A version diff: ``from``, ``to`` and ``changes`` [{field (AutoMem's name), before,
    after}] (values as the Memory message's JSON mapping; None = unset)."""
    from google.protobuf import json_format

    def value(change: recall_service_pb2.FieldChange, side: str) -> Any:
        if not change.HasField(side):
            return None
        got = json_format.MessageToDict(getattr(change, side))
        # The metadata's integers read back as integers here too, as on the memory itself.
        if change.field == "metadata":
            return integral_numbers(got)
        # Enum words as memory_json writes them ("ACTIVE", "Decision", "done"); they came as
        # the proto's names ("MEMORY_STATE_ACTIVE") here only.
        if change.field in _ENUM_WORDS and isinstance(got, str):
            enum, word = _ENUM_WORDS[change.field]
            return word(enum.Value(got)) if got in enum.DESCRIPTOR.values_by_name else got
        if isinstance(got, str) and change.field in _TIME_FIELDS:
            # Times as memory_json writes them ("...+00:00"), not the proto JSON's "...Z".
            stamped = memory_pb2.Memory()
            getattr(stamped, change.field).FromJsonString(got)
            return iso(stamped, change.field)
        return got

    return {"from": response.from_version, "to": response.to_version,
            "changes": [{"field": field_name(c.field), "before": value(c, "before"), "after": value(c, "after")}
                        for c in response.changes]}
