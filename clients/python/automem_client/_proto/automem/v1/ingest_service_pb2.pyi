import datetime

from automem_client._proto.automem.v1 import memory_pb2 as _memory_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryInput(_message.Message):
    __slots__ = ("content", "tags", "importance", "confidence", "metadata", "type", "event_time", "valid_from", "valid_to", "embedding", "require_review", "metadata_json", "metadata_set")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_REVIEW_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    METADATA_SET_FIELD_NUMBER: _ClassVar[int]
    content: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    importance: float
    confidence: float
    metadata: _struct_pb2.Struct
    type: str
    event_time: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    embedding: _containers.RepeatedScalarFieldContainer[float]
    require_review: bool
    metadata_json: str
    metadata_set: bool
    def __init__(self, content: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., importance: _Optional[float] = ..., confidence: _Optional[float] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., type: _Optional[str] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., embedding: _Optional[_Iterable[float]] = ..., require_review: _Optional[bool] = ..., metadata_json: _Optional[str] = ..., metadata_set: _Optional[bool] = ...) -> None: ...

class CreateMemoryRequest(_message.Message):
    __slots__ = ("memory", "scope", "idempotency_key", "require_unused_key")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_UNUSED_KEY_FIELD_NUMBER: _ClassVar[int]
    memory: MemoryInput
    scope: str
    idempotency_key: str
    require_unused_key: bool
    def __init__(self, memory: _Optional[_Union[MemoryInput, _Mapping]] = ..., scope: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., require_unused_key: _Optional[bool] = ...) -> None: ...

class CreateMemoryResponse(_message.Message):
    __slots__ = ("memory", "deduplicated")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    deduplicated: bool
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., deduplicated: _Optional[bool] = ...) -> None: ...

class BatchCreateMemoriesRequest(_message.Message):
    __slots__ = ("memories", "scope", "idempotency_key")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[MemoryInput]
    scope: str
    idempotency_key: str
    def __init__(self, memories: _Optional[_Iterable[_Union[MemoryInput, _Mapping]]] = ..., scope: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class BatchCreateMemoriesResponse(_message.Message):
    __slots__ = ("memories", "deduplicated")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    deduplicated: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., deduplicated: _Optional[_Iterable[bool]] = ...) -> None: ...

class UpdateMemoryRequest(_message.Message):
    __slots__ = ("id", "scope", "memory", "update_mask", "etag", "add_tags")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    ADD_TAGS_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    memory: MemoryInput
    update_mask: _field_mask_pb2.FieldMask
    etag: int
    add_tags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., memory: _Optional[_Union[MemoryInput, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., etag: _Optional[int] = ..., add_tags: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("id", "scope", "purge", "reason", "etag")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    purge: bool
    reason: str
    etag: int
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., purge: _Optional[bool] = ..., reason: _Optional[str] = ..., etag: _Optional[int] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class CreateRelationRequest(_message.Message):
    __slots__ = ("relation", "scope", "type_name")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TYPE_NAME_FIELD_NUMBER: _ClassVar[int]
    relation: _memory_pb2.Relation
    scope: str
    type_name: str
    def __init__(self, relation: _Optional[_Union[_memory_pb2.Relation, _Mapping]] = ..., scope: _Optional[str] = ..., type_name: _Optional[str] = ...) -> None: ...

class CreateRelationResponse(_message.Message):
    __slots__ = ("relation", "pending_review")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    PENDING_REVIEW_FIELD_NUMBER: _ClassVar[int]
    relation: _memory_pb2.Relation
    pending_review: bool
    def __init__(self, relation: _Optional[_Union[_memory_pb2.Relation, _Mapping]] = ..., pending_review: _Optional[bool] = ...) -> None: ...

class BatchCreateRelationsRequest(_message.Message):
    __slots__ = ("requests", "scope")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[CreateRelationRequest]
    scope: str
    def __init__(self, requests: _Optional[_Iterable[_Union[CreateRelationRequest, _Mapping]]] = ..., scope: _Optional[str] = ...) -> None: ...

class RelationFailure(_message.Message):
    __slots__ = ("index", "code", "message", "field")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    index: int
    code: int
    message: str
    field: str
    def __init__(self, index: _Optional[int] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class BatchCreateRelationsResponse(_message.Message):
    __slots__ = ("relations", "indexes", "failures")
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    relations: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Relation]
    indexes: _containers.RepeatedScalarFieldContainer[int]
    failures: _containers.RepeatedCompositeFieldContainer[RelationFailure]
    def __init__(self, relations: _Optional[_Iterable[_Union[_memory_pb2.Relation, _Mapping]]] = ..., indexes: _Optional[_Iterable[int]] = ..., failures: _Optional[_Iterable[_Union[RelationFailure, _Mapping]]] = ...) -> None: ...

class SupersedeMemoryRequest(_message.Message):
    __slots__ = ("id", "scope", "replacement", "relation_type", "reason", "idempotency_key", "etag", "strength")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    RELATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ETAG_FIELD_NUMBER: _ClassVar[int]
    STRENGTH_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    replacement: MemoryInput
    relation_type: _memory_pb2.RelationType
    reason: str
    idempotency_key: str
    etag: int
    strength: float
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., replacement: _Optional[_Union[MemoryInput, _Mapping]] = ..., relation_type: _Optional[_Union[_memory_pb2.RelationType, str]] = ..., reason: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., etag: _Optional[int] = ..., strength: _Optional[float] = ...) -> None: ...

class SupersedeMemoryResponse(_message.Message):
    __slots__ = ("replacement", "superseded", "relation")
    REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    replacement: _memory_pb2.Memory
    superseded: _memory_pb2.Memory
    relation: _memory_pb2.Relation
    def __init__(self, replacement: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., superseded: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., relation: _Optional[_Union[_memory_pb2.Relation, _Mapping]] = ...) -> None: ...

class DeleteMemoriesByTagRequest(_message.Message):
    __slots__ = ("tags", "scope", "dry_run", "memory_ids", "reason")
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.RepeatedScalarFieldContainer[str]
    scope: str
    dry_run: bool
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, tags: _Optional[_Iterable[str]] = ..., scope: _Optional[str] = ..., dry_run: _Optional[bool] = ..., memory_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class DeleteMemoriesByTagResponse(_message.Message):
    __slots__ = ("memory_ids", "deleted_count", "memories")
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    deleted_count: int
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    def __init__(self, memory_ids: _Optional[_Iterable[str]] = ..., deleted_count: _Optional[int] = ..., memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ...) -> None: ...

class ExportBackupRequest(_message.Message):
    __slots__ = ("skip_events", "known_at")
    SKIP_EVENTS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    skip_events: bool
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, skip_events: _Optional[bool] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExportBackupResponse(_message.Message):
    __slots__ = ("json_line",)
    JSON_LINE_FIELD_NUMBER: _ClassVar[int]
    json_line: str
    def __init__(self, json_line: _Optional[str] = ...) -> None: ...
