"""Presenters: service answers (protos) as AutoMem's JSON (/work/shared/AUTOMEM_API.md names
the fields; ``tests/integration`` pins them).

Plain functions from a proto (plus what the route echoes) to a dict, shared by the REST
routes and the MCP tools: a memory is always :func:`memory_json`, a relation
:func:`relation_json`, whichever door it leaves by.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format

from automem.common.model import iso, metadata_dict, relation_type_name, state_name, type_name
from automem.v1 import (
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
    if with_relation:
        extra["relation"] = relation_json(response.relation)
    return stored_json(response.replacement, started, **extra)


def batch_stored_json(response: ingest_service_pb2.BatchCreateMemoriesResponse, started: float) -> dict[str, Any]:
    """``POST /memory/batch`` answer; ``deduplicated[i]`` is true where item i repeated an
    existing memory (its id is in ``memory_ids``, nothing new was stored for it)."""
    return {"status": "success", "stored": len(response.memories), "memory_ids": [m.id for m in response.memories],
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
    """``DELETE /memory/by-tag`` answer (``would_delete_count`` in a preview)."""
    body: dict[str, Any] = {"status": "success", "tags": tags, "dry_run": dry_run,
                            "deleted_count": response.deleted_count, "memory_ids": list(response.memory_ids)}
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


def _with_provenance(body: dict[str, Any], item: recall_service_pb2.ScoredMemory) -> dict[str, Any]:
    if item.replaces_id:
        body["replaces_id"] = item.replaces_id
    if item.relation_type:
        body["relation_type"] = item.relation_type
    return body


def time_window_json(response: recall_service_pb2.SearchMemoriesResponse) -> dict[str, str | None]:
    """The resolved event-time window of a search, RFC 3339 (None = open)."""
    return {"start": iso(response, "start_time"), "end": iso(response, "end_time")}


def by_tag_json(response: recall_service_pb2.ListMemoriesByTagResponse) -> dict[str, Any]:
    """The paging fields of a tag listing: ``has_more``, ``total`` (None unless known) and
    ``next_page_token`` (None at the end)."""
    return {"has_more": response.has_more, "total": response.total if response.HasField("total") else None,
            "next_page_token": response.next_page_token or None}


def related_json(response: recall_service_pb2.ListRelatedMemoriesResponse) -> list[dict[str, Any]]:
    """``/memories/{id}/related`` items: ``{id, memory, relation_type, strength, depth}``."""
    return [{"id": r.memory.id, "memory": memory_json(r.memory), "relation_type": r.relation_type,
             "strength": r.strength, "depth": r.depth} for r in response.related]


def analysis_json(response: recall_service_pb2.AnalyzeMemoriesResponse) -> dict[str, Any]:
    """``GET /analyze`` answer (averages to four decimals)."""
    return {
        "status": "success", "memory_count": response.memory_count,
        "type_counts": dict(response.type_counts), "state_counts": dict(response.state_counts),
        "average_confidence": round(response.average_confidence, 4),
        "average_importance": round(response.average_importance, 4),
        "entity_frequency": {e.name: e.count for e in response.top_entities},
        "tag_frequency": {t.name: t.count for t in response.top_tags},
    }


# --- operations ------------------------------------------------------------------------


def stores_json(stats: recall_service_pb2.GetStatsResponse) -> dict[str, Any]:
    """Store connectivity and counts of a GetStats answer (falkordb, qdrant, memory_count,
    vector_count, vector_dimensions, and ``server_restarts``: restarts of the embedded
    nats-server / redis-server by name, empty when the service runs none)."""
    return {
        "server_restarts": dict(stats.server_restarts),
        "falkordb": "connected" if stats.graph_connected else "disconnected",
        "qdrant": ("connected" if stats.vectors_connected else "disconnected") if stats.vectors_enabled
        else "disabled",
        "memory_count": stats.memory_count, "vector_count": stats.vector_count,
        "vector_dimensions": stats.vector_dimensions,
    }


def stores_degraded(stats: recall_service_pb2.GetStatsResponse) -> bool:
    """True when a store the service uses is unreachable."""
    return not stats.graph_connected or (stats.vectors_enabled and not stats.vectors_connected)


def count_sync_status(memory_count: int, vector_count: int) -> str:
    """synced | orphaned_vectors | drift_detected, from the two counts alone."""
    return ("synced" if memory_count == vector_count else
            "orphaned_vectors" if vector_count > memory_count else "drift_detected")


def enrichment_json(status: enrich_service_pb2.GetEnrichmentStatusResponse) -> dict[str, Any]:
    """``GET /enrichment/status`` answer."""
    return {"status": "success", "queue_depth": status.queue_depth, "pending": status.queue_depth,
            "processed": status.processed, "failed": status.failed, "dead_lettered": status.dead_lettered,
            "embedding_model": status.embedding_model, "vector_dimensions": status.vector_dimensions}


def consolidation_json(run: consolidate_service_pb2.ConsolidationRun) -> dict[str, Any]:
    """``POST /consolidate`` answer."""
    return {"status": "success", "run_id": run.run_id, "mode": run.mode, "dry_run": run.dry_run,
            "results": dict(run.counts)}


def consolidation_status_json(response: consolidate_service_pb2.GetConsolidationStatusResponse) -> dict[str, Any]:
    """``GET /consolidate/status`` answer: next runs and recent runs."""
    return {"status": "success", "next_runs": dict(response.next_run_time), "history": [
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
    }


def tombstone_json(t: review_service_pb2.Tombstone) -> dict[str, Any]:
    """A tombstone."""
    return {"id": t.id, "content_hash": t.content_hash, "scope": t.scope, "memory_id": t.memory_id or None,
            "reason": t.reason or None, "lifted": t.lifted, "created_at": iso(t, "create_time"),
            "lifted_at": iso(t, "lift_time"), "created_by": t.created_by or None, "lifted_by": t.lifted_by or None}


def event_json(event: Any) -> dict[str, Any]:
    """A MemoryEvent (proto JSON names, enums by name)."""
    return json_format.MessageToDict(event, preserving_proto_field_name=True)
