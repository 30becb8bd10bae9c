import datetime

from automem_client._proto.automem.v1 import memory_pb2 as _memory_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_TYPE_UNSPECIFIED: _ClassVar[EventType]
    EVENT_TYPE_MEMORY_CREATED: _ClassVar[EventType]
    EVENT_TYPE_MEMORY_UPDATED: _ClassVar[EventType]
    EVENT_TYPE_MEMORY_DELETED: _ClassVar[EventType]
    EVENT_TYPE_MEMORY_SUPERSEDED: _ClassVar[EventType]
    EVENT_TYPE_RELATION_CREATED: _ClassVar[EventType]
    EVENT_TYPE_REVIEW_APPROVED: _ClassVar[EventType]
    EVENT_TYPE_REVIEW_REJECTED: _ClassVar[EventType]
    EVENT_TYPE_MEMORY_ENRICHED: _ClassVar[EventType]
    EVENT_TYPE_MEMORY_PURGED: _ClassVar[EventType]
    EVENT_TYPE_MEMORY_ARCHIVED: _ClassVar[EventType]
EVENT_TYPE_UNSPECIFIED: EventType
EVENT_TYPE_MEMORY_CREATED: EventType
EVENT_TYPE_MEMORY_UPDATED: EventType
EVENT_TYPE_MEMORY_DELETED: EventType
EVENT_TYPE_MEMORY_SUPERSEDED: EventType
EVENT_TYPE_RELATION_CREATED: EventType
EVENT_TYPE_REVIEW_APPROVED: EventType
EVENT_TYPE_REVIEW_REJECTED: EventType
EVENT_TYPE_MEMORY_ENRICHED: EventType
EVENT_TYPE_MEMORY_PURGED: EventType
EVENT_TYPE_MEMORY_ARCHIVED: EventType

class MemoryEvent(_message.Message):
    __slots__ = ("event_id", "type", "memory_id", "scope", "actor", "event_time", "before", "after", "version", "relation", "content_changed", "reason", "embedding")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_CHANGED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    type: EventType
    memory_id: str
    scope: str
    actor: str
    event_time: _timestamp_pb2.Timestamp
    before: _memory_pb2.Memory
    after: _memory_pb2.Memory
    version: int
    relation: _memory_pb2.Relation
    content_changed: bool
    reason: str
    embedding: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, event_id: _Optional[str] = ..., type: _Optional[_Union[EventType, str]] = ..., memory_id: _Optional[str] = ..., scope: _Optional[str] = ..., actor: _Optional[str] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., before: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., after: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., version: _Optional[int] = ..., relation: _Optional[_Union[_memory_pb2.Relation, _Mapping]] = ..., content_changed: _Optional[bool] = ..., reason: _Optional[str] = ..., embedding: _Optional[_Iterable[float]] = ...) -> None: ...
