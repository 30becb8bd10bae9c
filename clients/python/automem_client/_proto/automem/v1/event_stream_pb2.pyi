import datetime

from automem_client._proto.automem.v1 import events_pb2 as _events_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ActivityEvent(_message.Message):
    __slots__ = ("event_id", "kind", "scope", "actor", "event_time", "data")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    kind: str
    scope: str
    actor: str
    event_time: _timestamp_pb2.Timestamp
    data: _struct_pb2.Struct
    def __init__(self, event_id: _Optional[str] = ..., kind: _Optional[str] = ..., scope: _Optional[str] = ..., actor: _Optional[str] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class StreamMemoryEventsRequest(_message.Message):
    __slots__ = ("scope", "after_sequence")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    after_sequence: int
    def __init__(self, scope: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class StreamEventsTrimmed(_message.Message):
    __slots__ = ("requested_after_sequence", "first_retained_sequence", "retained_since_time")
    REQUESTED_AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    FIRST_RETAINED_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RETAINED_SINCE_TIME_FIELD_NUMBER: _ClassVar[int]
    requested_after_sequence: int
    first_retained_sequence: int
    retained_since_time: _timestamp_pb2.Timestamp
    def __init__(self, requested_after_sequence: _Optional[int] = ..., first_retained_sequence: _Optional[int] = ..., retained_since_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StreamMemoryEventsResponse(_message.Message):
    __slots__ = ("sequence", "memory_event", "activity_event", "trimmed")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_EVENT_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_EVENT_FIELD_NUMBER: _ClassVar[int]
    TRIMMED_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    memory_event: _events_pb2.MemoryEvent
    activity_event: ActivityEvent
    trimmed: StreamEventsTrimmed
    def __init__(self, sequence: _Optional[int] = ..., memory_event: _Optional[_Union[_events_pb2.MemoryEvent, _Mapping]] = ..., activity_event: _Optional[_Union[ActivityEvent, _Mapping]] = ..., trimmed: _Optional[_Union[StreamEventsTrimmed, _Mapping]] = ...) -> None: ...
