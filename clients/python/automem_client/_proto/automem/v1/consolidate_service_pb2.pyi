import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunConsolidationRequest(_message.Message):
    __slots__ = ("mode", "dry_run", "scope")
    MODE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    mode: str
    dry_run: bool
    scope: str
    def __init__(self, mode: _Optional[str] = ..., dry_run: _Optional[bool] = ..., scope: _Optional[str] = ...) -> None: ...

class ConsolidationRun(_message.Message):
    __slots__ = ("run_id", "mode", "dry_run", "start_time", "end_time", "counts", "error", "trigger", "scope")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    mode: str
    dry_run: bool
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    counts: _containers.ScalarMap[str, int]
    error: str
    trigger: str
    scope: str
    def __init__(self, run_id: _Optional[str] = ..., mode: _Optional[str] = ..., dry_run: _Optional[bool] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., counts: _Optional[_Mapping[str, int]] = ..., error: _Optional[str] = ..., trigger: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...

class RunConsolidationResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: ConsolidationRun
    def __init__(self, run: _Optional[_Union[ConsolidationRun, _Mapping]] = ...) -> None: ...

class GetConsolidationStatusRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetConsolidationStatusResponse(_message.Message):
    __slots__ = ("runs", "next_page_token", "next_run_time", "scheduler_running", "tick_seconds")
    class NextRunTimeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_TIME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_RUNNING_FIELD_NUMBER: _ClassVar[int]
    TICK_SECONDS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[ConsolidationRun]
    next_page_token: str
    next_run_time: _containers.ScalarMap[str, str]
    scheduler_running: bool
    tick_seconds: float
    def __init__(self, runs: _Optional[_Iterable[_Union[ConsolidationRun, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., next_run_time: _Optional[_Mapping[str, str]] = ..., scheduler_running: _Optional[bool] = ..., tick_seconds: _Optional[float] = ...) -> None: ...

class CheckSyncRequest(_message.Message):
    __slots__ = ("repair", "scope")
    REPAIR_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    repair: bool
    scope: str
    def __init__(self, repair: _Optional[bool] = ..., scope: _Optional[str] = ...) -> None: ...

class GetSyncStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetSyncStatusResponse(_message.Message):
    __slots__ = ("sync_status", "memory_count", "vector_count", "last_check_time", "last_check_status")
    SYNC_STATUS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    VECTOR_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_CHECK_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_CHECK_STATUS_FIELD_NUMBER: _ClassVar[int]
    sync_status: str
    memory_count: int
    vector_count: int
    last_check_time: _timestamp_pb2.Timestamp
    last_check_status: str
    def __init__(self, sync_status: _Optional[str] = ..., memory_count: _Optional[int] = ..., vector_count: _Optional[int] = ..., last_check_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_check_status: _Optional[str] = ...) -> None: ...

class CheckSyncResponse(_message.Message):
    __slots__ = ("sync_status", "missing_vectors", "orphaned_vectors", "stale_payloads", "repaired", "unenriched_past_retention")
    SYNC_STATUS_FIELD_NUMBER: _ClassVar[int]
    MISSING_VECTORS_FIELD_NUMBER: _ClassVar[int]
    ORPHANED_VECTORS_FIELD_NUMBER: _ClassVar[int]
    STALE_PAYLOADS_FIELD_NUMBER: _ClassVar[int]
    REPAIRED_FIELD_NUMBER: _ClassVar[int]
    UNENRICHED_PAST_RETENTION_FIELD_NUMBER: _ClassVar[int]
    sync_status: str
    missing_vectors: int
    orphaned_vectors: int
    stale_payloads: int
    repaired: int
    unenriched_past_retention: int
    def __init__(self, sync_status: _Optional[str] = ..., missing_vectors: _Optional[int] = ..., orphaned_vectors: _Optional[int] = ..., stale_payloads: _Optional[int] = ..., repaired: _Optional[int] = ..., unenriched_past_retention: _Optional[int] = ...) -> None: ...
