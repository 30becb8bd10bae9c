import datetime

from automem.v1 import memory_pb2 as _memory_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SortOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SORT_ORDER_UNSPECIFIED: _ClassVar[SortOrder]
    SORT_ORDER_SCORE: _ClassVar[SortOrder]
    SORT_ORDER_TIME_DESC: _ClassVar[SortOrder]
    SORT_ORDER_TIME_ASC: _ClassVar[SortOrder]
    SORT_ORDER_UPDATED_DESC: _ClassVar[SortOrder]
    SORT_ORDER_UPDATED_ASC: _ClassVar[SortOrder]

class TagMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TAG_MODE_UNSPECIFIED: _ClassVar[TagMode]
    TAG_MODE_ANY: _ClassVar[TagMode]
    TAG_MODE_ALL: _ClassVar[TagMode]

class TagMatch(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TAG_MATCH_UNSPECIFIED: _ClassVar[TagMatch]
    TAG_MATCH_PREFIX: _ClassVar[TagMatch]
    TAG_MATCH_EXACT: _ClassVar[TagMatch]

class StateMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATE_MODE_UNSPECIFIED: _ClassVar[StateMode]
    STATE_MODE_CURRENT: _ClassVar[StateMode]
    STATE_MODE_HISTORY: _ClassVar[StateMode]

class RecencyBias(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECENCY_BIAS_UNSPECIFIED: _ClassVar[RecencyBias]
    RECENCY_BIAS_AUTO: _ClassVar[RecencyBias]
    RECENCY_BIAS_ON: _ClassVar[RecencyBias]
    RECENCY_BIAS_OFF: _ClassVar[RecencyBias]
SORT_ORDER_UNSPECIFIED: SortOrder
SORT_ORDER_SCORE: SortOrder
SORT_ORDER_TIME_DESC: SortOrder
SORT_ORDER_TIME_ASC: SortOrder
SORT_ORDER_UPDATED_DESC: SortOrder
SORT_ORDER_UPDATED_ASC: SortOrder
TAG_MODE_UNSPECIFIED: TagMode
TAG_MODE_ANY: TagMode
TAG_MODE_ALL: TagMode
TAG_MATCH_UNSPECIFIED: TagMatch
TAG_MATCH_PREFIX: TagMatch
TAG_MATCH_EXACT: TagMatch
STATE_MODE_UNSPECIFIED: StateMode
STATE_MODE_CURRENT: StateMode
STATE_MODE_HISTORY: StateMode
RECENCY_BIAS_UNSPECIFIED: RecencyBias
RECENCY_BIAS_AUTO: RecencyBias
RECENCY_BIAS_ON: RecencyBias
RECENCY_BIAS_OFF: RecencyBias

class ReadOptions(_message.Message):
    __slots__ = ("as_of", "known_at", "state_mode", "include_archived", "include_pending")
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_MODE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PENDING_FIELD_NUMBER: _ClassVar[int]
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    state_mode: StateMode
    include_archived: bool
    include_pending: bool
    def __init__(self, as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state_mode: _Optional[_Union[StateMode, str]] = ..., include_archived: _Optional[bool] = ..., include_pending: _Optional[bool] = ...) -> None: ...

class SearchMemoriesRequest(_message.Message):
    __slots__ = ("scope", "query", "queries", "embedding", "limit", "offset", "sort", "time_query", "tz", "start_time", "end_time", "tags", "tag_mode", "tag_match", "exclude_tags", "read", "expand_relations", "expand_entities", "relation_limit", "expansion_limit", "expand_min_importance", "expand_min_strength", "min_score", "context", "context_tags", "context_types", "priority_ids", "recency_bias", "state_debug", "rerank", "expand_respect_tags")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SORT_FIELD_NUMBER: _ClassVar[int]
    TIME_QUERY_FIELD_NUMBER: _ClassVar[int]
    TZ_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TAG_MODE_FIELD_NUMBER: _ClassVar[int]
    TAG_MATCH_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_TAGS_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    EXPAND_RELATIONS_FIELD_NUMBER: _ClassVar[int]
    EXPAND_ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATION_LIMIT_FIELD_NUMBER: _ClassVar[int]
    EXPANSION_LIMIT_FIELD_NUMBER: _ClassVar[int]
    EXPAND_MIN_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    EXPAND_MIN_STRENGTH_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TAGS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_TYPES_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_IDS_FIELD_NUMBER: _ClassVar[int]
    RECENCY_BIAS_FIELD_NUMBER: _ClassVar[int]
    STATE_DEBUG_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    EXPAND_RESPECT_TAGS_FIELD_NUMBER: _ClassVar[int]
    scope: str
    query: str
    queries: _containers.RepeatedScalarFieldContainer[str]
    embedding: _containers.RepeatedScalarFieldContainer[float]
    limit: int
    offset: int
    sort: SortOrder
    time_query: str
    tz: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    tags: _containers.RepeatedScalarFieldContainer[str]
    tag_mode: TagMode
    tag_match: TagMatch
    exclude_tags: _containers.RepeatedScalarFieldContainer[str]
    read: ReadOptions
    expand_relations: bool
    expand_entities: bool
    relation_limit: int
    expansion_limit: int
    expand_min_importance: float
    expand_min_strength: float
    min_score: float
    context: str
    context_tags: _containers.RepeatedScalarFieldContainer[str]
    context_types: _containers.RepeatedScalarFieldContainer[str]
    priority_ids: _containers.RepeatedScalarFieldContainer[str]
    recency_bias: RecencyBias
    state_debug: bool
    rerank: bool
    expand_respect_tags: bool
    def __init__(self, scope: _Optional[str] = ..., query: _Optional[str] = ..., queries: _Optional[_Iterable[str]] = ..., embedding: _Optional[_Iterable[float]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ..., sort: _Optional[_Union[SortOrder, str]] = ..., time_query: _Optional[str] = ..., tz: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tags: _Optional[_Iterable[str]] = ..., tag_mode: _Optional[_Union[TagMode, str]] = ..., tag_match: _Optional[_Union[TagMatch, str]] = ..., exclude_tags: _Optional[_Iterable[str]] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., expand_relations: _Optional[bool] = ..., expand_entities: _Optional[bool] = ..., relation_limit: _Optional[int] = ..., expansion_limit: _Optional[int] = ..., expand_min_importance: _Optional[float] = ..., expand_min_strength: _Optional[float] = ..., min_score: _Optional[float] = ..., context: _Optional[str] = ..., context_tags: _Optional[_Iterable[str]] = ..., context_types: _Optional[_Iterable[str]] = ..., priority_ids: _Optional[_Iterable[str]] = ..., recency_bias: _Optional[_Union[RecencyBias, str]] = ..., state_debug: _Optional[bool] = ..., rerank: _Optional[bool] = ..., expand_respect_tags: _Optional[bool] = ...) -> None: ...

class ScoredMemory(_message.Message):
    __slots__ = ("memory", "score", "final_score", "match_type", "score_components", "replaces_id", "relation_type", "relation_from", "relation_strength")
    class ScoreComponentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    FINAL_SCORE_FIELD_NUMBER: _ClassVar[int]
    MATCH_TYPE_FIELD_NUMBER: _ClassVar[int]
    SCORE_COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    REPLACES_ID_FIELD_NUMBER: _ClassVar[int]
    RELATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    RELATION_FROM_FIELD_NUMBER: _ClassVar[int]
    RELATION_STRENGTH_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    score: float
    final_score: float
    match_type: str
    score_components: _containers.ScalarMap[str, float]
    replaces_id: str
    relation_type: str
    relation_from: str
    relation_strength: float
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., score: _Optional[float] = ..., final_score: _Optional[float] = ..., match_type: _Optional[str] = ..., score_components: _Optional[_Mapping[str, float]] = ..., replaces_id: _Optional[str] = ..., relation_type: _Optional[str] = ..., relation_from: _Optional[str] = ..., relation_strength: _Optional[float] = ...) -> None: ...

class StateSuppressed(_message.Message):
    __slots__ = ("id", "reason", "replacement_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    replacement_id: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ..., replacement_id: _Optional[str] = ...) -> None: ...

class StateFilter(_message.Message):
    __slots__ = ("suppressed_count", "replacement_count", "suppressed")
    SUPPRESSED_COUNT_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    SUPPRESSED_FIELD_NUMBER: _ClassVar[int]
    suppressed_count: int
    replacement_count: int
    suppressed: _containers.RepeatedCompositeFieldContainer[StateSuppressed]
    def __init__(self, suppressed_count: _Optional[int] = ..., replacement_count: _Optional[int] = ..., suppressed: _Optional[_Iterable[_Union[StateSuppressed, _Mapping]]] = ...) -> None: ...

class SearchMemoriesResponse(_message.Message):
    __slots__ = ("results", "arms", "degraded", "start_time", "end_time", "has_more", "total", "time_window_warning", "limit", "state_filter", "score_filtered_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ARMS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TIME_WINDOW_WARNING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STATE_FILTER_FIELD_NUMBER: _ClassVar[int]
    SCORE_FILTERED_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ScoredMemory]
    arms: _containers.RepeatedScalarFieldContainer[str]
    degraded: _containers.RepeatedScalarFieldContainer[str]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    has_more: bool
    total: int
    time_window_warning: str
    limit: int
    state_filter: StateFilter
    score_filtered_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[ScoredMemory, _Mapping]]] = ..., arms: _Optional[_Iterable[str]] = ..., degraded: _Optional[_Iterable[str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., has_more: _Optional[bool] = ..., total: _Optional[int] = ..., time_window_warning: _Optional[str] = ..., limit: _Optional[int] = ..., state_filter: _Optional[_Union[StateFilter, _Mapping]] = ..., score_filtered_count: _Optional[int] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("id", "scope", "read", "touch", "version")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TOUCH_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    read: ReadOptions
    touch: bool
    version: int
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., touch: _Optional[bool] = ..., version: _Optional[int] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("memory", "is_current", "current_id")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    IS_CURRENT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ID_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    is_current: bool
    current_id: str
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., is_current: _Optional[bool] = ..., current_id: _Optional[str] = ...) -> None: ...

class ListMemoriesByTagRequest(_message.Message):
    __slots__ = ("scope", "tags", "page_size", "offset", "read", "tag_mode", "tag_match", "page_token", "include_total")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    TAG_MODE_FIELD_NUMBER: _ClassVar[int]
    TAG_MATCH_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TOTAL_FIELD_NUMBER: _ClassVar[int]
    scope: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    offset: int
    read: ReadOptions
    tag_mode: TagMode
    tag_match: TagMatch
    page_token: str
    include_total: bool
    def __init__(self, scope: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., offset: _Optional[int] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., tag_mode: _Optional[_Union[TagMode, str]] = ..., tag_match: _Optional[_Union[TagMatch, str]] = ..., page_token: _Optional[str] = ..., include_total: _Optional[bool] = ...) -> None: ...

class ListMemoriesByTagResponse(_message.Message):
    __slots__ = ("memories", "has_more", "total", "next_page_token", "page_size")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    has_more: bool
    total: int
    next_page_token: str
    page_size: int
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., has_more: _Optional[bool] = ..., total: _Optional[int] = ..., next_page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class StartupRecallRequest(_message.Message):
    __slots__ = ("scope", "read")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    scope: str
    read: ReadOptions
    def __init__(self, scope: _Optional[str] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class StartupRecallResponse(_message.Message):
    __slots__ = ("critical_lessons", "system_rules")
    CRITICAL_LESSONS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_RULES_FIELD_NUMBER: _ClassVar[int]
    critical_lessons: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    system_rules: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    def __init__(self, critical_lessons: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., system_rules: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ...) -> None: ...

class ListRelatedMemoriesRequest(_message.Message):
    __slots__ = ("id", "scope", "relationship_types", "max_depth", "page_size", "read", "page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    RELATIONSHIP_TYPES_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    relationship_types: _containers.RepeatedScalarFieldContainer[str]
    max_depth: int
    page_size: int
    read: ReadOptions
    page_token: str
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., relationship_types: _Optional[_Iterable[str]] = ..., max_depth: _Optional[int] = ..., page_size: _Optional[int] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ..., page_token: _Optional[str] = ...) -> None: ...

class RelatedMemory(_message.Message):
    __slots__ = ("memory", "relation_type", "strength", "depth", "replaces_id")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    RELATION_TYPE_FIELD_NUMBER: _ClassVar[int]
    STRENGTH_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    REPLACES_ID_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    relation_type: str
    strength: float
    depth: int
    replaces_id: str
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., relation_type: _Optional[str] = ..., strength: _Optional[float] = ..., depth: _Optional[int] = ..., replaces_id: _Optional[str] = ...) -> None: ...

class ListRelatedMemoriesResponse(_message.Message):
    __slots__ = ("related", "next_page_token")
    RELATED_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    related: _containers.RepeatedCompositeFieldContainer[RelatedMemory]
    next_page_token: str
    def __init__(self, related: _Optional[_Iterable[_Union[RelatedMemory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ("memory_count", "vector_count", "graph_connected", "vectors_connected", "vectors_enabled", "vector_dimensions", "type_counts", "server_restarts", "restore_start_time")
    class TypeCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ServerRestartsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MEMORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    VECTOR_COUNT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    VECTORS_CONNECTED_FIELD_NUMBER: _ClassVar[int]
    VECTORS_ENABLED_FIELD_NUMBER: _ClassVar[int]
    VECTOR_DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    TYPE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    SERVER_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    RESTORE_START_TIME_FIELD_NUMBER: _ClassVar[int]
    memory_count: int
    vector_count: int
    graph_connected: bool
    vectors_connected: bool
    vectors_enabled: bool
    vector_dimensions: int
    type_counts: _containers.ScalarMap[str, int]
    server_restarts: _containers.ScalarMap[str, int]
    restore_start_time: _timestamp_pb2.Timestamp
    def __init__(self, memory_count: _Optional[int] = ..., vector_count: _Optional[int] = ..., graph_connected: _Optional[bool] = ..., vectors_connected: _Optional[bool] = ..., vectors_enabled: _Optional[bool] = ..., vector_dimensions: _Optional[int] = ..., type_counts: _Optional[_Mapping[str, int]] = ..., server_restarts: _Optional[_Mapping[str, int]] = ..., restore_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AnalyzeMemoriesRequest(_message.Message):
    __slots__ = ("scope", "top")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    scope: str
    top: int
    def __init__(self, scope: _Optional[str] = ..., top: _Optional[int] = ...) -> None: ...

class NamedCount(_message.Message):
    __slots__ = ("name", "count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class AnalyzeMemoriesResponse(_message.Message):
    __slots__ = ("memory_count", "type_counts", "state_counts", "average_confidence", "average_importance", "top_entities", "top_tags", "type_average_confidence", "patterns", "preferences", "hours", "confidence_distribution")
    class TypeCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class StateCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class TypeAverageConfidenceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MEMORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    TYPE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    STATE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    AVERAGE_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    AVERAGE_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    TOP_ENTITIES_FIELD_NUMBER: _ClassVar[int]
    TOP_TAGS_FIELD_NUMBER: _ClassVar[int]
    TYPE_AVERAGE_CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    PATTERNS_FIELD_NUMBER: _ClassVar[int]
    PREFERENCES_FIELD_NUMBER: _ClassVar[int]
    HOURS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    memory_count: int
    type_counts: _containers.ScalarMap[str, int]
    state_counts: _containers.ScalarMap[str, int]
    average_confidence: float
    average_importance: float
    top_entities: _containers.RepeatedCompositeFieldContainer[NamedCount]
    top_tags: _containers.RepeatedCompositeFieldContainer[NamedCount]
    type_average_confidence: _containers.ScalarMap[str, float]
    patterns: _containers.RepeatedCompositeFieldContainer[PatternSummary]
    preferences: _containers.RepeatedCompositeFieldContainer[PreferenceSummary]
    hours: _containers.RepeatedCompositeFieldContainer[HourSummary]
    confidence_distribution: ConfidenceDistribution
    def __init__(self, memory_count: _Optional[int] = ..., type_counts: _Optional[_Mapping[str, int]] = ..., state_counts: _Optional[_Mapping[str, int]] = ..., average_confidence: _Optional[float] = ..., average_importance: _Optional[float] = ..., top_entities: _Optional[_Iterable[_Union[NamedCount, _Mapping]]] = ..., top_tags: _Optional[_Iterable[_Union[NamedCount, _Mapping]]] = ..., type_average_confidence: _Optional[_Mapping[str, float]] = ..., patterns: _Optional[_Iterable[_Union[PatternSummary, _Mapping]]] = ..., preferences: _Optional[_Iterable[_Union[PreferenceSummary, _Mapping]]] = ..., hours: _Optional[_Iterable[_Union[HourSummary, _Mapping]]] = ..., confidence_distribution: _Optional[_Union[ConfidenceDistribution, _Mapping]] = ...) -> None: ...

class PatternSummary(_message.Message):
    __slots__ = ("memory_id", "description", "confidence", "observations")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    description: str
    confidence: float
    observations: int
    def __init__(self, memory_id: _Optional[str] = ..., description: _Optional[str] = ..., confidence: _Optional[float] = ..., observations: _Optional[int] = ...) -> None: ...

class PreferenceSummary(_message.Message):
    __slots__ = ("prefers", "over", "context", "strength")
    PREFERS_FIELD_NUMBER: _ClassVar[int]
    OVER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    STRENGTH_FIELD_NUMBER: _ClassVar[int]
    prefers: str
    over: str
    context: str
    strength: float
    def __init__(self, prefers: _Optional[str] = ..., over: _Optional[str] = ..., context: _Optional[str] = ..., strength: _Optional[float] = ...) -> None: ...

class HourSummary(_message.Message):
    __slots__ = ("hour", "count", "average_importance")
    HOUR_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    AVERAGE_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    hour: int
    count: int
    average_importance: float
    def __init__(self, hour: _Optional[int] = ..., count: _Optional[int] = ..., average_importance: _Optional[float] = ...) -> None: ...

class ConfidenceDistribution(_message.Message):
    __slots__ = ("low", "medium", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    MEDIUM_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: int
    medium: int
    high: int
    def __init__(self, low: _Optional[int] = ..., medium: _Optional[int] = ..., high: _Optional[int] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("principal", "role", "scopes", "scope", "require_review")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_REVIEW_FIELD_NUMBER: _ClassVar[int]
    principal: str
    role: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    scope: str
    require_review: bool
    def __init__(self, principal: _Optional[str] = ..., role: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., scope: _Optional[str] = ..., require_review: _Optional[bool] = ...) -> None: ...

class GraphNode(_message.Message):
    __slots__ = ("memory", "is_current", "current_id", "similarity", "depth")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    IS_CURRENT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ID_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    is_current: bool
    current_id: str
    similarity: float
    depth: int
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., is_current: _Optional[bool] = ..., current_id: _Optional[str] = ..., similarity: _Optional[float] = ..., depth: _Optional[int] = ...) -> None: ...

class GraphEdge(_message.Message):
    __slots__ = ("source_id", "target_id", "type", "strength")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STRENGTH_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    target_id: str
    type: str
    strength: float
    def __init__(self, source_id: _Optional[str] = ..., target_id: _Optional[str] = ..., type: _Optional[str] = ..., strength: _Optional[float] = ...) -> None: ...

class GetGraphSnapshotRequest(_message.Message):
    __slots__ = ("scope", "limit", "min_importance", "types", "since", "read")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MIN_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    scope: str
    limit: int
    min_importance: float
    types: _containers.RepeatedScalarFieldContainer[str]
    since: _timestamp_pb2.Timestamp
    read: ReadOptions
    def __init__(self, scope: _Optional[str] = ..., limit: _Optional[int] = ..., min_importance: _Optional[float] = ..., types: _Optional[_Iterable[str]] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetGraphSnapshotResponse(_message.Message):
    __slots__ = ("nodes", "edges", "total_nodes", "total_edges", "sampled")
    NODES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NODES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_EDGES_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[GraphNode]
    edges: _containers.RepeatedCompositeFieldContainer[GraphEdge]
    total_nodes: int
    total_edges: int
    sampled: bool
    def __init__(self, nodes: _Optional[_Iterable[_Union[GraphNode, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[GraphEdge, _Mapping]]] = ..., total_nodes: _Optional[int] = ..., total_edges: _Optional[int] = ..., sampled: _Optional[bool] = ...) -> None: ...

class ListGraphNeighborsRequest(_message.Message):
    __slots__ = ("id", "scope", "depth", "include_semantic", "semantic_limit", "read")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SEMANTIC_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_LIMIT_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    depth: int
    include_semantic: bool
    semantic_limit: int
    read: ReadOptions
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., depth: _Optional[int] = ..., include_semantic: _Optional[bool] = ..., semantic_limit: _Optional[int] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class ListGraphNeighborsResponse(_message.Message):
    __slots__ = ("center", "graph_neighbors", "semantic_neighbors", "edges", "depth")
    CENTER_FIELD_NUMBER: _ClassVar[int]
    GRAPH_NEIGHBORS_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_NEIGHBORS_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    center: GraphNode
    graph_neighbors: _containers.RepeatedCompositeFieldContainer[GraphNode]
    semantic_neighbors: _containers.RepeatedCompositeFieldContainer[GraphNode]
    edges: _containers.RepeatedCompositeFieldContainer[GraphEdge]
    depth: int
    def __init__(self, center: _Optional[_Union[GraphNode, _Mapping]] = ..., graph_neighbors: _Optional[_Iterable[_Union[GraphNode, _Mapping]]] = ..., semantic_neighbors: _Optional[_Iterable[_Union[GraphNode, _Mapping]]] = ..., edges: _Optional[_Iterable[_Union[GraphEdge, _Mapping]]] = ..., depth: _Optional[int] = ...) -> None: ...

class GetGraphStatsRequest(_message.Message):
    __slots__ = ("scope",)
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    scope: str
    def __init__(self, scope: _Optional[str] = ...) -> None: ...

class DayCount(_message.Message):
    __slots__ = ("date", "count")
    DATE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    date: str
    count: int
    def __init__(self, date: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class GetGraphStatsResponse(_message.Message):
    __slots__ = ("total_nodes", "total_edges", "by_type", "by_relationship", "by_state", "importance_high", "importance_medium", "importance_low", "recent_activity")
    class ByTypeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ByRelationshipEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ByStateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TOTAL_NODES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_EDGES_FIELD_NUMBER: _ClassVar[int]
    BY_TYPE_FIELD_NUMBER: _ClassVar[int]
    BY_RELATIONSHIP_FIELD_NUMBER: _ClassVar[int]
    BY_STATE_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_HIGH_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_MEDIUM_FIELD_NUMBER: _ClassVar[int]
    IMPORTANCE_LOW_FIELD_NUMBER: _ClassVar[int]
    RECENT_ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    total_nodes: int
    total_edges: int
    by_type: _containers.ScalarMap[str, int]
    by_relationship: _containers.ScalarMap[str, int]
    by_state: _containers.ScalarMap[str, int]
    importance_high: int
    importance_medium: int
    importance_low: int
    recent_activity: _containers.RepeatedCompositeFieldContainer[DayCount]
    def __init__(self, total_nodes: _Optional[int] = ..., total_edges: _Optional[int] = ..., by_type: _Optional[_Mapping[str, int]] = ..., by_relationship: _Optional[_Mapping[str, int]] = ..., by_state: _Optional[_Mapping[str, int]] = ..., importance_high: _Optional[int] = ..., importance_medium: _Optional[int] = ..., importance_low: _Optional[int] = ..., recent_activity: _Optional[_Iterable[_Union[DayCount, _Mapping]]] = ...) -> None: ...

class GraphEntity(_message.Message):
    __slots__ = ("id", "slug", "name", "category", "aliases", "reference_count", "merged_into")
    ID_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_COUNT_FIELD_NUMBER: _ClassVar[int]
    MERGED_INTO_FIELD_NUMBER: _ClassVar[int]
    id: str
    slug: str
    name: str
    category: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    reference_count: int
    merged_into: str
    def __init__(self, id: _Optional[str] = ..., slug: _Optional[str] = ..., name: _Optional[str] = ..., category: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., reference_count: _Optional[int] = ..., merged_into: _Optional[str] = ...) -> None: ...

class ListEntitiesRequest(_message.Message):
    __slots__ = ("scope", "category", "limit")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    scope: str
    category: str
    limit: int
    def __init__(self, scope: _Optional[str] = ..., category: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListEntitiesResponse(_message.Message):
    __slots__ = ("entities",)
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[GraphEntity]
    def __init__(self, entities: _Optional[_Iterable[_Union[GraphEntity, _Mapping]]] = ...) -> None: ...

class GetEntityRequest(_message.Message):
    __slots__ = ("scope", "slug", "category", "memory_limit", "read")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SLUG_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    scope: str
    slug: str
    category: str
    memory_limit: int
    read: ReadOptions
    def __init__(self, scope: _Optional[str] = ..., slug: _Optional[str] = ..., category: _Optional[str] = ..., memory_limit: _Optional[int] = ..., read: _Optional[_Union[ReadOptions, _Mapping]] = ...) -> None: ...

class GetEntityResponse(_message.Message):
    __slots__ = ("entity", "memories")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    entity: GraphEntity
    memories: _containers.RepeatedCompositeFieldContainer[GraphNode]
    def __init__(self, entity: _Optional[_Union[GraphEntity, _Mapping]] = ..., memories: _Optional[_Iterable[_Union[GraphNode, _Mapping]]] = ...) -> None: ...

class ListEntityMergeCandidatesRequest(_message.Message):
    __slots__ = ("scope", "limit")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    scope: str
    limit: int
    def __init__(self, scope: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class EntityMergeCandidate(_message.Message):
    __slots__ = ("entity_a", "entity_b", "canonical", "alias", "confidence", "reason", "auto_merge")
    ENTITY_A_FIELD_NUMBER: _ClassVar[int]
    ENTITY_B_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AUTO_MERGE_FIELD_NUMBER: _ClassVar[int]
    entity_a: GraphEntity
    entity_b: GraphEntity
    canonical: str
    alias: str
    confidence: float
    reason: str
    auto_merge: bool
    def __init__(self, entity_a: _Optional[_Union[GraphEntity, _Mapping]] = ..., entity_b: _Optional[_Union[GraphEntity, _Mapping]] = ..., canonical: _Optional[str] = ..., alias: _Optional[str] = ..., confidence: _Optional[float] = ..., reason: _Optional[str] = ..., auto_merge: _Optional[bool] = ...) -> None: ...

class ListEntityMergeCandidatesResponse(_message.Message):
    __slots__ = ("candidates",)
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[EntityMergeCandidate]
    def __init__(self, candidates: _Optional[_Iterable[_Union[EntityMergeCandidate, _Mapping]]] = ...) -> None: ...

class ListMemoryVersionsRequest(_message.Message):
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

class MemoryVersion(_message.Message):
    __slots__ = ("version", "record_time", "actor", "changed_fields", "memory", "stored_state")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    STORED_STATE_FIELD_NUMBER: _ClassVar[int]
    version: int
    record_time: _timestamp_pb2.Timestamp
    actor: str
    changed_fields: _containers.RepeatedScalarFieldContainer[str]
    memory: _memory_pb2.Memory
    stored_state: _memory_pb2.MemoryState
    def __init__(self, version: _Optional[int] = ..., record_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., changed_fields: _Optional[_Iterable[str]] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., stored_state: _Optional[_Union[_memory_pb2.MemoryState, str]] = ...) -> None: ...

class ListMemoryVersionsResponse(_message.Message):
    __slots__ = ("versions", "next_page_token")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[MemoryVersion]
    next_page_token: str
    def __init__(self, versions: _Optional[_Iterable[_Union[MemoryVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DiffMemoryVersionsRequest(_message.Message):
    __slots__ = ("id", "scope", "from_version", "to_version")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    FROM_VERSION_FIELD_NUMBER: _ClassVar[int]
    TO_VERSION_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    from_version: int
    to_version: int
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., from_version: _Optional[int] = ..., to_version: _Optional[int] = ...) -> None: ...

class FieldChange(_message.Message):
    __slots__ = ("field", "before", "after")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    field: str
    before: _struct_pb2.Value
    after: _struct_pb2.Value
    def __init__(self, field: _Optional[str] = ..., before: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., after: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class DiffMemoryVersionsResponse(_message.Message):
    __slots__ = ("from_version", "to_version", "changes")
    FROM_VERSION_FIELD_NUMBER: _ClassVar[int]
    TO_VERSION_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    from_version: int
    to_version: int
    changes: _containers.RepeatedCompositeFieldContainer[FieldChange]
    def __init__(self, from_version: _Optional[int] = ..., to_version: _Optional[int] = ..., changes: _Optional[_Iterable[_Union[FieldChange, _Mapping]]] = ...) -> None: ...
