"""What the client returns and takes: plain dataclasses, the same whichever transport answered.

Each result class reads a protobuf answer (``from_proto``, gRPC) and the gateway's JSON
(``from_json``, REST; the field names of automem/gateway/presenters.py, which are AutoMem's).
Times are timezone-aware ``datetime`` in UTC, None when unset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp

from automem_client._proto.automem.v1 import events_pb2, memory_pb2

#: A time given to the client: an aware or naive (= UTC) datetime, or ISO 8601 text (naive
#: text and dates in the call's zone: automem_client/_times.py).
TimeLike = datetime | str


def _ts(message: Any, name: str) -> datetime | None:
    if not message.HasField(name):
        return None
    return getattr(message, name).ToDatetime(tzinfo=UTC)


def _time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _whole(value: Any) -> Any:
    """Struct numbers are doubles: integral ones back to int, as the REST answers have them."""
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def type_name(value: int) -> str | None:
    """"Decision", "MetaPattern", ... of a MemoryType value (None when unspecified)."""
    if not value:
        return None
    words = memory_pb2.MemoryType.Name(value).removeprefix("MEMORY_TYPE_").split("_")
    return "".join(w.capitalize() for w in words)


def _suffix(enum: Any, value: int, prefix: str) -> str:
    return enum.Name(value).removeprefix(prefix)


@dataclass(frozen=True)
class Entity:
    """A named entity enrichment found in a memory: ``name`` ("postgres"), ``kind``
    ("tool"), ``tag`` ("entity:tool:postgres")."""

    name: str
    kind: str
    tag: str


@dataclass(frozen=True)
class Memory:
    """One memory as the service holds it.

    ``version`` is also its etag (pass it to ``update``/``delete``/``supersede``).
    ``state`` is ACTIVE, PENDING_REVIEW, SUPERSEDED, REJECTED, ARCHIVED or DELETED.
    ``timestamp`` is the event time; ``t_valid``/``t_invalid`` the validity window
    (``t_invalid`` None = open-ended). ``is_current``/``current_id`` are set by ``get`` only:
    whether it is current, and the head of its supersession chain when not.
    """

    id: str
    content: str
    scope: str = ""
    type: str | None = None
    tags: list[str] = field(default_factory=list)
    importance: float = 0.0
    confidence: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    state: str = "ACTIVE"
    version: int = 0
    summary: str | None = None
    timestamp: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_accessed: datetime | None = None
    t_valid: datetime | None = None
    t_invalid: datetime | None = None
    superseded_by: str | None = None
    content_hash: str = ""
    source: str | None = None
    state_reason: str | None = None
    embedding_status: str = "unspecified"
    enrichment_status: str = "unspecified"
    relevance_score: float = 0.0
    entities: list[Entity] = field(default_factory=list)
    is_current: bool | None = None
    current_id: str | None = None

    @property
    def etag(self) -> int:
        """The version the next conditional write names."""
        return self.version

    @classmethod
    def from_proto(cls, m: memory_pb2.Memory, *, is_current: bool | None = None,
                   current_id: str | None = None) -> Memory:
        """A Memory of an ``automem.v1.Memory`` message."""
        metadata = _whole(json_format.MessageToDict(m.metadata)) if m.HasField("metadata") else {}
        return cls(
            id=m.id, content=m.content, scope=m.scope, type=type_name(m.type), tags=list(m.tags),
            importance=m.importance, confidence=m.confidence, metadata=metadata,
            state=_suffix(memory_pb2.MemoryState, m.state, "MEMORY_STATE_") if m.state else "ACTIVE",
            version=m.version, summary=m.summary or None, timestamp=_ts(m, "event_time"),
            created_at=_ts(m, "create_time"), updated_at=_ts(m, "update_time"),
            last_accessed=_ts(m, "last_access_time"), t_valid=_ts(m, "valid_from"), t_invalid=_ts(m, "valid_to"),
            superseded_by=m.superseded_by or None, content_hash=m.content_hash, source=m.source or None,
            state_reason=m.state_reason or None,
            embedding_status=_suffix(memory_pb2.EmbeddingStatus, m.embedding_status, "EMBEDDING_STATUS_").lower(),
            enrichment_status=_suffix(memory_pb2.EnrichmentStatus, m.enrichment_status,
                                      "ENRICHMENT_STATUS_").lower(),
            relevance_score=m.relevance_score, entities=[Entity(e.name, e.kind, e.tag) for e in m.entities],
            is_current=is_current, current_id=current_id or None)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Memory:
        """A Memory of the gateway's memory JSON (presenters.memory_json)."""
        return cls(
            id=d.get("id") or d.get("memory_id") or "", content=d.get("content") or "", scope=d.get("scope") or "",
            type=d.get("type"), tags=list(d.get("tags") or []), importance=float(d.get("importance") or 0.0),
            confidence=float(d.get("confidence") or 0.0), metadata=dict(d.get("metadata") or {}),
            state=d.get("state") or "ACTIVE", version=int(d.get("version") or 0), summary=d.get("summary"),
            timestamp=_time(d.get("timestamp")), created_at=_time(d.get("created_at")),
            updated_at=_time(d.get("updated_at")), last_accessed=_time(d.get("last_accessed")),
            t_valid=_time(d.get("t_valid")), t_invalid=_time(d.get("t_invalid")),
            superseded_by=d.get("superseded_by"), content_hash=d.get("content_hash") or "",
            source=d.get("source"), state_reason=d.get("state_reason"),
            embedding_status=d.get("embedding_status") or "unspecified",
            enrichment_status=d.get("enrichment_status") or "unspecified",
            relevance_score=float(d.get("relevance_score") or 0.0),
            entities=[Entity(e.get("name", ""), e.get("kind", ""), e.get("tag", "")) for e in d.get("entities") or []],
            is_current=d.get("is_current"), current_id=d.get("current_id"))


@dataclass(frozen=True)
class MemoryInput:
    """One memory to store (``store_batch``); the fields as ``store`` takes them."""

    content: str
    tags: list[str] = field(default_factory=list)
    importance: float | None = None
    confidence: float | None = None
    type: str | None = None
    metadata: dict[str, Any] | None = None
    timestamp: TimeLike | None = None
    t_valid: TimeLike | None = None
    t_invalid: TimeLike | None = None
    embedding: list[float] | None = None
    require_review: bool = False


@dataclass(frozen=True)
class Stored:
    """Answer of ``store``: the memory, and whether it was an existing one (same
    idempotency key: a retried store)."""

    memory: Memory
    deduplicated: bool = False

    @property
    def id(self) -> str:
        return self.memory.id


@dataclass(frozen=True)
class BatchStored:
    """Answer of ``store_batch``: ids in request order, and per item whether an existing
    memory was returned instead of a new one."""

    memory_ids: list[str]
    deduplicated: list[bool]


@dataclass(frozen=True)
class Relation:
    """A typed edge: ``memory1_id`` -[type]-> ``memory2_id`` (type as AutoMem names it,
    e.g. RELATES_TO), strength 0..1."""

    memory1_id: str
    memory2_id: str
    type: str
    strength: float = 0.0
    reason: str | None = None
    created_at: datetime | None = None

    @classmethod
    def from_proto(cls, r: memory_pb2.Relation) -> Relation:
        return cls(r.source_id, r.target_id, _suffix(memory_pb2.RelationType, r.type, "RELATION_TYPE_"),
                   r.strength, r.reason or None, _ts(r, "create_time"))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Relation:
        return cls(d.get("memory1_id", ""), d.get("memory2_id", ""), d.get("type") or d.get("relation_type") or "",
                   float(d.get("strength") or 0.0), d.get("reason"), _time(d.get("created_at")))


@dataclass(frozen=True)
class Superseded:
    """Answer of ``supersede``: the new memory, the one it replaced (now SUPERSEDED) and
    the edge between them (None over REST answers without it)."""

    replacement: Memory
    superseded: Memory
    relation: Relation | None = None


@dataclass(frozen=True)
class ScoredMemory:
    """One recall hit: the memory with its score. ``match_type``: vector, keyword, tag,
    relation, entity, state_replacement...; ``replaces_id``: the superseded hit it stands in for."""

    memory: Memory
    score: float
    final_score: float
    match_type: str
    score_components: dict[str, float] = field(default_factory=dict)
    replaces_id: str | None = None
    relation_type: str | None = None


@dataclass(frozen=True)
class RecallResult:
    """Answer of ``recall``: ranked hits and what the ranking did. ``total`` is None unless
    known exactly; ``time_start``/``time_end`` the event-time window applied (None = open);
    ``time_window_warning`` set when ``time_query`` could not be read."""

    results: list[ScoredMemory]
    has_more: bool = False
    total: int | None = None
    limit: int = 0
    time_start: datetime | None = None
    time_end: datetime | None = None
    time_window_warning: str | None = None
    arms: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Page:
    """One page of a tag listing; ``next_page_token`` None at the end."""

    memories: list[Memory]
    next_page_token: str | None = None
    has_more: bool = False
    total: int | None = None


@dataclass(frozen=True)
class RelatedMemory:
    """A graph neighbour: the memory, the edge type that reached it, its strength, hops;
    ``replaces_id``: the neighbour the edge reaches when ``memory`` is the current memory
    shown in its place (that neighbour was superseded), else ""."""

    memory: Memory
    relation_type: str
    strength: float
    depth: int
    replaces_id: str = ""


@dataclass(frozen=True)
class HistoryEvent:
    """One change of a memory (its MemoryEvent): ``type`` MEMORY_CREATED, MEMORY_UPDATED,
    MEMORY_SUPERSEDED, ...; ``before``/``after`` the memory around it (None when none)."""

    event_id: str
    type: str
    memory_id: str
    actor: str
    event_time: datetime | None
    version: int
    before: Memory | None = None
    after: Memory | None = None
    reason: str | None = None
    content_changed: bool = False

    @classmethod
    def from_proto(cls, e: events_pb2.MemoryEvent) -> HistoryEvent:
        return cls(e.event_id, _suffix(events_pb2.EventType, e.type, "EVENT_TYPE_"), e.memory_id, e.actor,
                   _ts(e, "event_time"), e.version, Memory.from_proto(e.before) if e.HasField("before") else None,
                   Memory.from_proto(e.after) if e.HasField("after") else None, e.reason or None, e.content_changed)


@dataclass(frozen=True)
class HistoryPage:
    """One page of a memory's history, oldest first. ``truncated``: events before the
    stream's retention are gone."""

    events: list[HistoryEvent]
    next_page_token: str | None = None
    truncated: bool = False


#: Memory field names the gateway's JSON spells as AutoMem does (automem/gateway/presenters.py
#: AUTOMEM_FIELD_NAMES): the version answers use these names over both transports.
AUTOMEM_FIELD_NAMES = {
    "event_time": "timestamp", "create_time": "created_at", "update_time": "updated_at",
    "last_access_time": "last_accessed", "valid_from": "t_valid", "valid_to": "t_invalid",
    "record_time": "recorded_at", "retract_time": "retracted_at", "superseded_time": "superseded_at",
    "prior_valid_to": "prior_t_invalid",
}


def _field(name: str) -> str:
    return AUTOMEM_FIELD_NAMES.get(name, name)


@dataclass(frozen=True)
class MemoryVersion:
    """One version of a memory (protos/automem/v1/recall_service.proto MemoryVersion):
    ``version`` (1 and up, the etag after the write), ``recorded_at`` (system time of the
    write), ``actor``, ``changed_fields`` (AutoMem's names), the memory as it stood."""

    version: int
    recorded_at: datetime | None
    actor: str
    changed_fields: list[str]
    memory: Memory

    @classmethod
    def from_proto(cls, v: Any) -> MemoryVersion:
        return cls(v.version, _ts(v, "record_time"), v.actor, [_field(f) for f in v.changed_fields],
                   Memory.from_proto(v.memory))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MemoryVersion:
        return cls(int(d["version"]), _time(d.get("recorded_at")), d.get("actor") or "",
                   list(d.get("changed_fields") or []), Memory.from_json(d["memory"]))


@dataclass(frozen=True)
class VersionsPage:
    """One page of a memory's versions, oldest first; ``next_page_token`` None on the last."""

    versions: list[MemoryVersion]
    next_page_token: str | None = None


@dataclass(frozen=True)
class FieldChange:
    """One field that differs between two versions: AutoMem's field name, its value before
    and after (JSON values, as the Memory message's JSON mapping; None = unset)."""

    field: str
    before: Any = None
    after: Any = None


#: Diffed enum fields and how the REST answer words their values (automem/gateway/presenters.py
#: ``memory_json``): "ACTIVE", "Decision", "done".
_DIFF_ENUMS: dict[str, tuple[Any, Any]] = {
    "state": (memory_pb2.MemoryState, lambda v: _suffix(memory_pb2.MemoryState, v, "MEMORY_STATE_")),
    "type": (memory_pb2.MemoryType, type_name),
    "embedding_status": (memory_pb2.EmbeddingStatus,
                         lambda v: _suffix(memory_pb2.EmbeddingStatus, v, "EMBEDDING_STATUS_").lower()),
    "enrichment_status": (memory_pb2.EnrichmentStatus,
                          lambda v: _suffix(memory_pb2.EnrichmentStatus, v, "ENRICHMENT_STATUS_").lower()),
}
#: The Memory fields that hold a time.
_DIFF_TIMES = frozenset(f.name for f in memory_pb2.Memory.DESCRIPTOR.fields
                        if f.message_type is not None and f.message_type.full_name == "google.protobuf.Timestamp")


def _diff_value(name: str, value: Any) -> Any:
    """A gRPC diff value (the proto JSON mapping of field ``name``) as the REST answer has it:
    metadata numbers without a fraction as ints, enum words as the memory's, times as RFC 3339
    with ``+00:00`` to the millisecond (automem/gateway/presenters.py ``diff_json``), so both
    transports return the same :class:`VersionDiff`."""
    if name == "metadata":
        return _whole(value)
    if name in _DIFF_ENUMS and isinstance(value, str):
        enum, word = _DIFF_ENUMS[name]
        return word(enum.Value(value)) if value in enum.DESCRIPTOR.values_by_name else value
    if name in _DIFF_TIMES and isinstance(value, str):
        stamp = Timestamp()
        stamp.FromJsonString(value)
        seconds, millis = stamp.seconds, round(stamp.nanos / 1e5) // 10
        if millis == 1000:
            seconds, millis = seconds + 1, 0
        return (datetime.fromtimestamp(seconds, UTC) + timedelta(milliseconds=millis)).isoformat()
    return value


@dataclass(frozen=True)
class VersionDiff:
    """The fields that differ between versions ``from_version`` and ``to_version``."""

    from_version: int
    to_version: int
    changes: list[FieldChange]

    @classmethod
    def from_proto(cls, r: Any) -> VersionDiff:
        def value(c: Any, side: str) -> Any:
            return _diff_value(c.field, json_format.MessageToDict(getattr(c, side))) if c.HasField(side) else None

        return cls(r.from_version, r.to_version,
                   [FieldChange(_field(c.field), value(c, "before"), value(c, "after")) for c in r.changes])

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> VersionDiff:
        return cls(int(d["from"]), int(d["to"]),
                   [FieldChange(c["field"], c.get("before"), c.get("after")) for c in d.get("changes") or []])


@dataclass(frozen=True)
class Health:
    """The service's state: ``status`` healthy | degraded, the stores' connectivity and counts."""

    status: str
    graph_connected: bool
    vectors_connected: bool
    memory_count: int
    vector_count: int


#: AutoMem's event names of the MemoryEvent types (automem/gateway/routes_stream.py EVENT_NAMES).
EVENT_NAMES = {
    events_pb2.EVENT_TYPE_MEMORY_CREATED: "memory.store", events_pb2.EVENT_TYPE_MEMORY_UPDATED: "memory.update",
    events_pb2.EVENT_TYPE_MEMORY_DELETED: "memory.delete", events_pb2.EVENT_TYPE_MEMORY_PURGED: "memory.delete",
    events_pb2.EVENT_TYPE_MEMORY_SUPERSEDED: "memory.supersede",
    events_pb2.EVENT_TYPE_RELATION_CREATED: "memory.associate",
    events_pb2.EVENT_TYPE_REVIEW_APPROVED: "review.approve", events_pb2.EVENT_TYPE_REVIEW_REJECTED: "review.reject",
    events_pb2.EVENT_TYPE_MEMORY_ENRICHED: "enrichment.complete",
    events_pb2.EVENT_TYPE_MEMORY_ARCHIVED: "memory.archive",
}


@dataclass(frozen=True)
class StreamEvent:
    """One item of the event stream. ``kind`` is AutoMem's event name (memory.store,
    memory.update, memory.recall, enrichment.complete, stream.trimmed...); ``sequence`` the
    stream position to resume after (None on a stream.trimmed notice); ``memory_id`` the
    memory it is about ("" when none)."""

    kind: str
    sequence: int | None
    event_id: str = ""
    memory_id: str = ""
    timestamp: datetime | None = None
    scope: str = ""
    actor: str = ""
