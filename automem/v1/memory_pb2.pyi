import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_TYPE_UNSPECIFIED: _ClassVar[MemoryType]
    MEMORY_TYPE_DECISION: _ClassVar[MemoryType]
    MEMORY_TYPE_PATTERN: _ClassVar[MemoryType]
    MEMORY_TYPE_PREFERENCE: _ClassVar[MemoryType]
    MEMORY_TYPE_STYLE: _ClassVar[MemoryType]
    MEMORY_TYPE_HABIT: _ClassVar[MemoryType]
    MEMORY_TYPE_INSIGHT: _ClassVar[MemoryType]
    MEMORY_TYPE_CONTEXT: _ClassVar[MemoryType]
    MEMORY_TYPE_META_PATTERN: _ClassVar[MemoryType]

class MemoryState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_STATE_UNSPECIFIED: _ClassVar[MemoryState]
    MEMORY_STATE_ACTIVE: _ClassVar[MemoryState]
    MEMORY_STATE_PENDING_REVIEW: _ClassVar[MemoryState]
    MEMORY_STATE_SUPERSEDED: _ClassVar[MemoryState]
    MEMORY_STATE_REJECTED: _ClassVar[MemoryState]
    MEMORY_STATE_ARCHIVED: _ClassVar[MemoryState]
    MEMORY_STATE_DELETED: _ClassVar[MemoryState]

class EmbeddingStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EMBEDDING_STATUS_UNSPECIFIED: _ClassVar[EmbeddingStatus]
    EMBEDDING_STATUS_PENDING: _ClassVar[EmbeddingStatus]
    EMBEDDING_STATUS_DONE: _ClassVar[EmbeddingStatus]
    EMBEDDING_STATUS_FAILED: _ClassVar[EmbeddingStatus]
    EMBEDDING_STATUS_PROVIDED: _ClassVar[EmbeddingStatus]
    EMBEDDING_STATUS_PAYLOAD_PENDING: _ClassVar[EmbeddingStatus]

class EnrichmentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENRICHMENT_STATUS_UNSPECIFIED: _ClassVar[EnrichmentStatus]
    ENRICHMENT_STATUS_PENDING: _ClassVar[EnrichmentStatus]
    ENRICHMENT_STATUS_DONE: _ClassVar[EnrichmentStatus]
    ENRICHMENT_STATUS_FAILED: _ClassVar[EnrichmentStatus]

class RelationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RELATION_TYPE_UNSPECIFIED: _ClassVar[RelationType]
    RELATION_TYPE_RELATES_TO: _ClassVar[RelationType]
    RELATION_TYPE_LEADS_TO: _ClassVar[RelationType]
    RELATION_TYPE_OCCURRED_BEFORE: _ClassVar[RelationType]
    RELATION_TYPE_PREFERS_OVER: _ClassVar[RelationType]
    RELATION_TYPE_EXEMPLIFIES: _ClassVar[RelationType]
    RELATION_TYPE_CONTRADICTS: _ClassVar[RelationType]
    RELATION_TYPE_REINFORCES: _ClassVar[RelationType]
    RELATION_TYPE_INVALIDATED_BY: _ClassVar[RelationType]
    RELATION_TYPE_EVOLVED_INTO: _ClassVar[RelationType]
    RELATION_TYPE_DERIVED_FROM: _ClassVar[RelationType]
    RELATION_TYPE_PART_OF: _ClassVar[RelationType]
    RELATION_TYPE_SIMILAR_TO: _ClassVar[RelationType]
    RELATION_TYPE_PRECEDED_BY: _ClassVar[RelationType]
    RELATION_TYPE_DISCOVERED: _ClassVar[RelationType]
MEMORY_TYPE_UNSPECIFIED: MemoryType
MEMORY_TYPE_DECISION: MemoryType
MEMORY_TYPE_PATTERN: MemoryType
MEMORY_TYPE_PREFERENCE: MemoryType
MEMORY_TYPE_STYLE: MemoryType
MEMORY_TYPE_HABIT: MemoryType
MEMORY_TYPE_INSIGHT: MemoryType
MEMORY_TYPE_CONTEXT: MemoryType
MEMORY_TYPE_META_PATTERN: MemoryType
MEMORY_STATE_UNSPECIFIED: MemoryState
MEMORY_STATE_ACTIVE: MemoryState
MEMORY_STATE_PENDING_REVIEW: MemoryState
MEMORY_STATE_SUPERSEDED: MemoryState
MEMORY_STATE_REJECTED: MemoryState
MEMORY_STATE_ARCHIVED: MemoryState
MEMORY_STATE_DELETED: MemoryState
EMBEDDING_STATUS_UNSPECIFIED: EmbeddingStatus
EMBEDDING_STATUS_PENDING: EmbeddingStatus
EMBEDDING_STATUS_DONE: EmbeddingStatus
EMBEDDING_STATUS_FAILED: EmbeddingStatus
EMBEDDING_STATUS_PROVIDED: EmbeddingStatus
EMBEDDING_STATUS_PAYLOAD_PENDING: EmbeddingStatus
ENRICHMENT_STATUS_UNSPECIFIED: EnrichmentStatus
ENRICHMENT_STATUS_PENDING: EnrichmentStatus
ENRICHMENT_STATUS_DONE: EnrichmentStatus
ENRICHMENT_STATUS_FAILED: EnrichmentStatus
RELATION_TYPE_UNSPECIFIED: RelationType
RELATION_TYPE_RELATES_TO: RelationType
RELATION_TYPE_LEADS_TO: RelationType
RELATION_TYPE_OCCURRED_BEFORE: RelationType
RELATION_TYPE_PREFERS_OVER: RelationType
RELATION_TYPE_EXEMPLIFIES: RelationType
RELATION_TYPE_CONTRADICTS: RelationType
RELATION_TYPE_REINFORCES: RelationType
RELATION_TYPE_INVALIDATED_BY: RelationType
RELATION_TYPE_EVOLVED_INTO: RelationType
RELATION_TYPE_DERIVED_FROM: RelationType
RELATION_TYPE_PART_OF: RelationType
RELATION_TYPE_SIMILAR_TO: RelationType
RELATION_TYPE_PRECEDED_BY: RelationType
RELATION_TYPE_DISCOVERED: RelationType

class Entity(_message.Message):
    __slots__ = ("name", "kind", "tag")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    tag: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., tag: _Optional[str] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "scope", "content", "summary", "type", "tags", "importance", "confidence", "metadata", "create_time", "update_time", "last_access_time", "event_time", "valid_from", "valid_to", "record_time", "retract_time", "state", "superseded_by", "version", "content_hash", "entities", "embedding_status", "enrichment_status", "relevance_score", "source", "state_reason", "embedding_model", "superseded_time", "prior_valid_to")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESS_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIME_FIELD_NUMBER: _ClassVar[int]
    RETRACT_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_STATUS_FIELD_NUMBER: _ClassVar[int]
    ENRICHMENT_STATUS_FIELD_NUMBER: _ClassVar[int]
    RELEVANCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_TIME_FIELD_NUMBER: _ClassVar[int]
    PRIOR_VALID_TO_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    content: str
    summary: str
    type: MemoryType
    tags: _containers.RepeatedScalarFieldContainer[str]
    importance: float
    confidence: float
    metadata: _struct_pb2.Struct
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    last_access_time: _timestamp_pb2.Timestamp
    event_time: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    record_time: _timestamp_pb2.Timestamp
    retract_time: _timestamp_pb2.Timestamp
    state: MemoryState
    superseded_by: str
    version: int
    content_hash: str
    entities: _containers.RepeatedCompositeFieldContainer[Entity]
    embedding_status: EmbeddingStatus
    enrichment_status: EnrichmentStatus
    relevance_score: float
    source: str
    state_reason: str
    embedding_model: str
    superseded_time: _timestamp_pb2.Timestamp
    prior_valid_to: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., content: _Optional[str] = ..., summary: _Optional[str] = ..., type: _Optional[_Union[MemoryType, str]] = ..., tags: _Optional[_Iterable[str]] = ..., importance: _Optional[float] = ..., confidence: _Optional[float] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_access_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., record_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retract_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[_Union[MemoryState, str]] = ..., superseded_by: _Optional[str] = ..., version: _Optional[int] = ..., content_hash: _Optional[str] = ..., entities: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ..., embedding_status: _Optional[_Union[EmbeddingStatus, str]] = ..., enrichment_status: _Optional[_Union[EnrichmentStatus, str]] = ..., relevance_score: _Optional[float] = ..., source: _Optional[str] = ..., state_reason: _Optional[str] = ..., embedding_model: _Optional[str] = ..., superseded_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., prior_valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Relation(_message.Message):
    __slots__ = ("source_id", "target_id", "type", "strength", "properties", "create_time", "scope", "reason")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STRENGTH_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    target_id: str
    type: RelationType
    strength: float
    properties: _struct_pb2.Struct
    create_time: _timestamp_pb2.Timestamp
    scope: str
    reason: str
    def __init__(self, source_id: _Optional[str] = ..., target_id: _Optional[str] = ..., type: _Optional[_Union[RelationType, str]] = ..., strength: _Optional[float] = ..., properties: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scope: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
