import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApiKey(_message.Message):
    __slots__ = ("id", "role", "scopes", "default_scope", "display_name", "revoked", "create_time", "created_by", "revoked_by", "revoke_time", "require_review")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_SCOPE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    REVOKED_BY_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_REVIEW_FIELD_NUMBER: _ClassVar[int]
    id: str
    role: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    default_scope: str
    display_name: str
    revoked: bool
    create_time: _timestamp_pb2.Timestamp
    created_by: str
    revoked_by: str
    revoke_time: _timestamp_pb2.Timestamp
    require_review: bool
    def __init__(self, id: _Optional[str] = ..., role: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., default_scope: _Optional[str] = ..., display_name: _Optional[str] = ..., revoked: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., revoked_by: _Optional[str] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., require_review: _Optional[bool] = ...) -> None: ...

class ApiKeyEvent(_message.Message):
    __slots__ = ("id", "action", "key_id", "actor", "role", "scopes", "event_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    action: str
    key_id: str
    actor: str
    role: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    event_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., action: _Optional[str] = ..., key_id: _Optional[str] = ..., actor: _Optional[str] = ..., role: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateApiKeyRequest(_message.Message):
    __slots__ = ("role", "scopes", "default_scope", "display_name", "require_review")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_SCOPE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_REVIEW_FIELD_NUMBER: _ClassVar[int]
    role: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    default_scope: str
    display_name: str
    require_review: bool
    def __init__(self, role: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., default_scope: _Optional[str] = ..., display_name: _Optional[str] = ..., require_review: _Optional[bool] = ...) -> None: ...

class CreateApiKeyResponse(_message.Message):
    __slots__ = ("api_key", "secret")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    api_key: ApiKey
    secret: str
    def __init__(self, api_key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListApiKeysRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListApiKeysResponse(_message.Message):
    __slots__ = ("api_keys", "next_page_token")
    API_KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    api_keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    next_page_token: str
    def __init__(self, api_keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeApiKeyRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeApiKeyResponse(_message.Message):
    __slots__ = ("api_key",)
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    api_key: ApiKey
    def __init__(self, api_key: _Optional[_Union[ApiKey, _Mapping]] = ...) -> None: ...

class ListApiKeyEventsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "key_id")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    key_id: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., key_id: _Optional[str] = ...) -> None: ...

class ListApiKeyEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ApiKeyEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[ApiKeyEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RestoreBackupRequest(_message.Message):
    __slots__ = ("data", "force")
    DATA_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    force: bool
    def __init__(self, data: _Optional[bytes] = ..., force: _Optional[bool] = ...) -> None: ...

class RestoreBackupResponse(_message.Message):
    __slots__ = ("nodes", "edges", "events", "events_dropped", "live_memories")
    NODES_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_DROPPED_FIELD_NUMBER: _ClassVar[int]
    LIVE_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    nodes: int
    edges: int
    events: int
    events_dropped: int
    live_memories: int
    def __init__(self, nodes: _Optional[int] = ..., edges: _Optional[int] = ..., events: _Optional[int] = ..., events_dropped: _Optional[int] = ..., live_memories: _Optional[int] = ...) -> None: ...
