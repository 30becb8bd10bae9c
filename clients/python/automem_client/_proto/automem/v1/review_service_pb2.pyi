import datetime

from automem_client._proto.automem.v1 import memory_pb2 as _memory_pb2
from automem_client._proto.automem.v1 import events_pb2 as _events_pb2
from automem_client._proto.automem.v1 import event_stream_pb2 as _event_stream_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReviewItem(_message.Message):
    __slots__ = ("id", "kind", "memory_id", "target_id", "reason", "create_time", "status", "scope", "decided_by", "decision_time", "decision_reason", "memory", "target", "conflicts_with")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECISION_TIME_FIELD_NUMBER: _ClassVar[int]
    DECISION_REASON_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_WITH_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    memory_id: str
    target_id: str
    reason: str
    create_time: _timestamp_pb2.Timestamp
    status: str
    scope: str
    decided_by: str
    decision_time: _timestamp_pb2.Timestamp
    decision_reason: str
    memory: _memory_pb2.Memory
    target: _memory_pb2.Memory
    conflicts_with: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., memory_id: _Optional[str] = ..., target_id: _Optional[str] = ..., reason: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[str] = ..., scope: _Optional[str] = ..., decided_by: _Optional[str] = ..., decision_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decision_reason: _Optional[str] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., target: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., conflicts_with: _Optional[_Iterable[str]] = ...) -> None: ...

class ReviewConflict(_message.Message):
    __slots__ = ("memory_id", "proposal_id", "rejection_reason", "memory")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    REJECTION_REASON_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    proposal_id: str
    rejection_reason: str
    memory: _memory_pb2.Memory
    def __init__(self, memory_id: _Optional[str] = ..., proposal_id: _Optional[str] = ..., rejection_reason: _Optional[str] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("id", "content_hash", "scope", "memory_id", "reason", "lifted", "create_time", "lift_time", "created_by", "lifted_by")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LIFTED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LIFT_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    LIFTED_BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    content_hash: str
    scope: str
    memory_id: str
    reason: str
    lifted: bool
    create_time: _timestamp_pb2.Timestamp
    lift_time: _timestamp_pb2.Timestamp
    created_by: str
    lifted_by: str
    def __init__(self, id: _Optional[str] = ..., content_hash: _Optional[str] = ..., scope: _Optional[str] = ..., memory_id: _Optional[str] = ..., reason: _Optional[str] = ..., lifted: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lift_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., lifted_by: _Optional[str] = ...) -> None: ...

class ListReviewItemsRequest(_message.Message):
    __slots__ = ("scope", "page_size", "page_token", "kind", "status")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    scope: str
    page_size: int
    page_token: str
    kind: str
    status: str
    def __init__(self, scope: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., kind: _Optional[str] = ..., status: _Optional[str] = ...) -> None: ...

class ListReviewItemsResponse(_message.Message):
    __slots__ = ("items", "next_page_token")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ReviewItem]
    next_page_token: str
    def __init__(self, items: _Optional[_Iterable[_Union[ReviewItem, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ApproveReviewItemRequest(_message.Message):
    __slots__ = ("id", "scope", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ApproveReviewItemResponse(_message.Message):
    __slots__ = ("item", "memory", "superseded", "conflicts", "warning")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    item: ReviewItem
    memory: _memory_pb2.Memory
    superseded: _memory_pb2.Memory
    conflicts: _containers.RepeatedCompositeFieldContainer[ReviewConflict]
    warning: str
    def __init__(self, item: _Optional[_Union[ReviewItem, _Mapping]] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., superseded: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., conflicts: _Optional[_Iterable[_Union[ReviewConflict, _Mapping]]] = ..., warning: _Optional[str] = ...) -> None: ...

class RejectReviewItemRequest(_message.Message):
    __slots__ = ("id", "scope", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RejectReviewItemResponse(_message.Message):
    __slots__ = ("item", "memory", "tombstone")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    item: ReviewItem
    memory: _memory_pb2.Memory
    tombstone: Tombstone
    def __init__(self, item: _Optional[_Union[ReviewItem, _Mapping]] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., tombstone: _Optional[_Union[Tombstone, _Mapping]] = ...) -> None: ...

class ListTombstonesRequest(_message.Message):
    __slots__ = ("scope", "page_size", "page_token", "include_lifted")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_LIFTED_FIELD_NUMBER: _ClassVar[int]
    scope: str
    page_size: int
    page_token: str
    include_lifted: bool
    def __init__(self, scope: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_lifted: _Optional[bool] = ...) -> None: ...

class ListTombstonesResponse(_message.Message):
    __slots__ = ("tombstones", "next_page_token")
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tombstones: _containers.RepeatedCompositeFieldContainer[Tombstone]
    next_page_token: str
    def __init__(self, tombstones: _Optional[_Iterable[_Union[Tombstone, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LiftTombstoneRequest(_message.Message):
    __slots__ = ("id", "scope")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...

class LiftTombstoneResponse(_message.Message):
    __slots__ = ("tombstone",)
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    tombstone: Tombstone
    def __init__(self, tombstone: _Optional[_Union[Tombstone, _Mapping]] = ...) -> None: ...

class ListMemoryEventsRequest(_message.Message):
    __slots__ = ("id", "scope", "page_size", "page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    page_size: int
    page_token: str
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoryEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token", "truncated", "retained_since_time", "after_stored_states")
    class AfterStoredStatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _memory_pb2.MemoryState
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_memory_pb2.MemoryState, str]] = ...) -> None: ...
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    RETAINED_SINCE_TIME_FIELD_NUMBER: _ClassVar[int]
    AFTER_STORED_STATES_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_events_pb2.MemoryEvent]
    next_page_token: str
    truncated: bool
    retained_since_time: _timestamp_pb2.Timestamp
    after_stored_states: _containers.ScalarMap[str, _memory_pb2.MemoryState]
    def __init__(self, events: _Optional[_Iterable[_Union[_events_pb2.MemoryEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., truncated: _Optional[bool] = ..., retained_since_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., after_stored_states: _Optional[_Mapping[str, _memory_pb2.MemoryState]] = ...) -> None: ...

class EntityMerge(_message.Message):
    __slots__ = ("id", "scope", "alias", "canonical", "edges_moved", "actor", "create_time", "reason", "undone", "undone_by", "undo_time", "memory_ids")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_FIELD_NUMBER: _ClassVar[int]
    EDGES_MOVED_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNDONE_FIELD_NUMBER: _ClassVar[int]
    UNDONE_BY_FIELD_NUMBER: _ClassVar[int]
    UNDO_TIME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    alias: str
    canonical: str
    edges_moved: int
    actor: str
    create_time: _timestamp_pb2.Timestamp
    reason: str
    undone: bool
    undone_by: str
    undo_time: _timestamp_pb2.Timestamp
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., alias: _Optional[str] = ..., canonical: _Optional[str] = ..., edges_moved: _Optional[int] = ..., actor: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., undone: _Optional[bool] = ..., undone_by: _Optional[str] = ..., undo_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class MergeEntitiesRequest(_message.Message):
    __slots__ = ("scope", "slug", "merge_into", "category", "reason")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    MERGE_INTO_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    scope: str
    slug: str
    merge_into: str
    category: str
    reason: str
    def __init__(self, scope: _Optional[str] = ..., slug: _Optional[str] = ..., merge_into: _Optional[str] = ..., category: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class MergeEntitiesResponse(_message.Message):
    __slots__ = ("merge",)
    MERGE_FIELD_NUMBER: _ClassVar[int]
    merge: EntityMerge
    def __init__(self, merge: _Optional[_Union[EntityMerge, _Mapping]] = ...) -> None: ...

class ListEntityMergesRequest(_message.Message):
    __slots__ = ("scope", "page_size")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    page_size: int
    def __init__(self, scope: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListEntityMergesResponse(_message.Message):
    __slots__ = ("merges",)
    MERGES_FIELD_NUMBER: _ClassVar[int]
    merges: _containers.RepeatedCompositeFieldContainer[EntityMerge]
    def __init__(self, merges: _Optional[_Iterable[_Union[EntityMerge, _Mapping]]] = ...) -> None: ...

class UndoEntityMergeRequest(_message.Message):
    __slots__ = ("id", "scope")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...

class UndoEntityMergeResponse(_message.Message):
    __slots__ = ("merge",)
    MERGE_FIELD_NUMBER: _ClassVar[int]
    merge: EntityMerge
    def __init__(self, merge: _Optional[_Union[EntityMerge, _Mapping]] = ...) -> None: ...

class PurgeCounts(_message.Message):
    __slots__ = ("memories", "versions", "relations", "review_items", "tombstones", "idempotency_keys", "entities", "entity_merges", "stream_messages", "outbox_events", "vector_points")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    REVIEW_ITEMS_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEYS_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    ENTITY_MERGES_FIELD_NUMBER: _ClassVar[int]
    STREAM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    OUTBOX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_POINTS_FIELD_NUMBER: _ClassVar[int]
    memories: int
    versions: int
    relations: int
    review_items: int
    tombstones: int
    idempotency_keys: int
    entities: int
    entity_merges: int
    stream_messages: int
    outbox_events: int
    vector_points: int
    def __init__(self, memories: _Optional[int] = ..., versions: _Optional[int] = ..., relations: _Optional[int] = ..., review_items: _Optional[int] = ..., tombstones: _Optional[int] = ..., idempotency_keys: _Optional[int] = ..., entities: _Optional[int] = ..., entity_merges: _Optional[int] = ..., stream_messages: _Optional[int] = ..., outbox_events: _Optional[int] = ..., vector_points: _Optional[int] = ...) -> None: ...

class PurgeRecord(_message.Message):
    __slots__ = ("id", "kind", "scope", "memory_ids", "actor", "purge_time", "reason", "counts", "status", "pending_steps", "dry_run")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    PURGE_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PENDING_STEPS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    scope: str
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    actor: str
    purge_time: _timestamp_pb2.Timestamp
    reason: str
    counts: PurgeCounts
    status: str
    pending_steps: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., scope: _Optional[str] = ..., memory_ids: _Optional[_Iterable[str]] = ..., actor: _Optional[str] = ..., purge_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., counts: _Optional[_Union[PurgeCounts, _Mapping]] = ..., status: _Optional[str] = ..., pending_steps: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class PurgeMemoryRequest(_message.Message):
    __slots__ = ("id", "scope", "reason", "dry_run")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    reason: str
    dry_run: bool
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., reason: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class PurgeMemoryResponse(_message.Message):
    __slots__ = ("purge",)
    PURGE_FIELD_NUMBER: _ClassVar[int]
    purge: PurgeRecord
    def __init__(self, purge: _Optional[_Union[PurgeRecord, _Mapping]] = ...) -> None: ...

class PurgeScopeRequest(_message.Message):
    __slots__ = ("scope", "confirm_scope", "reason", "dry_run")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_SCOPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    scope: str
    confirm_scope: str
    reason: str
    dry_run: bool
    def __init__(self, scope: _Optional[str] = ..., confirm_scope: _Optional[str] = ..., reason: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class PurgeScopeResponse(_message.Message):
    __slots__ = ("purge",)
    PURGE_FIELD_NUMBER: _ClassVar[int]
    purge: PurgeRecord
    def __init__(self, purge: _Optional[_Union[PurgeRecord, _Mapping]] = ...) -> None: ...

class ListPurgesRequest(_message.Message):
    __slots__ = ("scope", "page_size", "page_token")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    scope: str
    page_size: int
    page_token: str
    def __init__(self, scope: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPurgesResponse(_message.Message):
    __slots__ = ("purges", "next_page_token")
    PURGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    purges: _containers.RepeatedCompositeFieldContainer[PurgeRecord]
    next_page_token: str
    def __init__(self, purges: _Optional[_Iterable[_Union[PurgeRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
