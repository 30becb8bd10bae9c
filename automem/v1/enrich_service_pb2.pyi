from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class GetEnrichmentStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetEnrichmentStatusResponse(_message.Message):
    __slots__ = ("queue_depth", "pending", "processed", "failed", "dead_lettered", "embedding_model", "vector_dimensions", "outbox_backlog")
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    VECTOR_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_BACKLOG_FIELD_NUMBER: _ClassVar[int]
    queue_depth: int
    pending: int
    processed: int
    failed: int
    dead_lettered: int
    embedding_model: str
    vector_dimensions: int
    outbox_backlog: int
    def __init__(self, queue_depth: _Optional[int] = ..., pending: _Optional[int] = ..., processed: _Optional[int] = ..., failed: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., embedding_model: _Optional[str] = ..., vector_dimensions: _Optional[int] = ..., outbox_backlog: _Optional[int] = ...) -> None: ...

class ReprocessMemoriesRequest(_message.Message):
    __slots__ = ("ids", "scope")
    IDS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    scope: str
    def __init__(self, ids: _Optional[_Iterable[str]] = ..., scope: _Optional[str] = ...) -> None: ...

class ReprocessMemoriesResponse(_message.Message):
    __slots__ = ("queued",)
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    queued: int
    def __init__(self, queued: _Optional[int] = ...) -> None: ...
