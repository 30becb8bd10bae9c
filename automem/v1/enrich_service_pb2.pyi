import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetReembedStatusRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class GetReembedStatusResponse(_message.Message):
    __slots__ = ("reembed",)
    REEMBED_FIELD_NUMBER: _ClassVar[int]
    reembed: ReembedProgress
    def __init__(self, reembed: _Optional[_Union[ReembedProgress, _Mapping]] = ...) -> None: ...

class GetEnrichmentStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetEnrichmentStatusResponse(_message.Message):
    __slots__ = ("queue_depth", "pending", "processed", "failed", "dead_lettered", "embedding_model", "vector_dimensions", "outbox_backlog", "inflight", "consumer_running", "max_attempts", "stats", "classification", "memories_pending")
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    VECTOR_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_BACKLOG_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_RUNNING_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    CLASSIFICATION_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_PENDING_FIELD_NUMBER: _ClassVar[int]
    queue_depth: int
    pending: int
    processed: int
    failed: int
    dead_lettered: int
    embedding_model: str
    vector_dimensions: int
    outbox_backlog: int
    inflight: int
    consumer_running: bool
    max_attempts: int
    stats: EnrichmentStats
    classification: ClassificationStats
    memories_pending: int
    def __init__(self, queue_depth: _Optional[int] = ..., pending: _Optional[int] = ..., processed: _Optional[int] = ..., failed: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., embedding_model: _Optional[str] = ..., vector_dimensions: _Optional[int] = ..., outbox_backlog: _Optional[int] = ..., inflight: _Optional[int] = ..., consumer_running: _Optional[bool] = ..., max_attempts: _Optional[int] = ..., stats: _Optional[_Union[EnrichmentStats, _Mapping]] = ..., classification: _Optional[_Union[ClassificationStats, _Mapping]] = ..., memories_pending: _Optional[int] = ...) -> None: ...

class EnrichmentStats(_message.Message):
    __slots__ = ("processed_total", "successes", "failures", "last_success_id", "last_success_time", "last_error", "last_error_time")
    PROCESSED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SUCCESSES_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_TIME_FIELD_NUMBER: _ClassVar[int]
    processed_total: int
    successes: int
    failures: int
    last_success_id: str
    last_success_time: _timestamp_pb2.Timestamp
    last_error: str
    last_error_time: _timestamp_pb2.Timestamp
    def __init__(self, processed_total: _Optional[int] = ..., successes: _Optional[int] = ..., failures: _Optional[int] = ..., last_success_id: _Optional[str] = ..., last_success_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., last_error_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClassificationStats(_message.Message):
    __slots__ = ("llm_attempts", "llm_successes", "fallbacks")
    LLM_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LLM_SUCCESSES_FIELD_NUMBER: _ClassVar[int]
    FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    llm_attempts: int
    llm_successes: int
    fallbacks: int
    def __init__(self, llm_attempts: _Optional[int] = ..., llm_successes: _Optional[int] = ..., fallbacks: _Optional[int] = ...) -> None: ...

class ReembedMemoriesRequest(_message.Message):
    __slots__ = ("batch_size", "limit", "force", "scope")
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    batch_size: int
    limit: int
    force: bool
    scope: str
    def __init__(self, batch_size: _Optional[int] = ..., limit: _Optional[int] = ..., force: _Optional[bool] = ..., scope: _Optional[str] = ...) -> None: ...

class ReembedMemoriesResponse(_message.Message):
    __slots__ = ("total", "batch_size", "job_id")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    total: int
    batch_size: int
    job_id: str
    def __init__(self, total: _Optional[int] = ..., batch_size: _Optional[int] = ..., job_id: _Optional[str] = ...) -> None: ...

class ReembedProgress(_message.Message):
    __slots__ = ("job_id", "total", "queued", "done", "start_time", "force", "scope")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    total: int
    queued: int
    done: int
    start_time: _timestamp_pb2.Timestamp
    force: bool
    scope: str
    def __init__(self, job_id: _Optional[str] = ..., total: _Optional[int] = ..., queued: _Optional[int] = ..., done: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., force: _Optional[bool] = ..., scope: _Optional[str] = ...) -> None: ...

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
