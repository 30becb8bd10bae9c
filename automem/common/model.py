"""The Memory message and its representations.

One function per representation, each built from the ``automem.v1.Memory`` message:

* :func:`memory_to_node` / :func:`node_to_memory` — FalkorDB node properties (the record of
  truth). Times are float epoch seconds (UTC), unset = null; metadata and entities are JSON
  text (FalkorDB properties hold primitives and arrays only).
* the REST/MCP body lives in :mod:`automem.gateway.presenters`.
* the vector payload lives in :mod:`automem.common.payload`.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from automem.common.errors import InvalidArgument
from automem.common.text import text_key
from automem.v1 import memory_pb2

Memory = memory_pb2.Memory
Relation = memory_pb2.Relation

#: AutoMem's seven types, by canonical name.
TYPE_NAMES: dict[int, str] = {
    memory_pb2.MEMORY_TYPE_DECISION: "Decision",
    memory_pb2.MEMORY_TYPE_PATTERN: "Pattern",
    memory_pb2.MEMORY_TYPE_PREFERENCE: "Preference",
    memory_pb2.MEMORY_TYPE_STYLE: "Style",
    memory_pb2.MEMORY_TYPE_HABIT: "Habit",
    memory_pb2.MEMORY_TYPE_INSIGHT: "Insight",
    memory_pb2.MEMORY_TYPE_CONTEXT: "Context",
    memory_pb2.MEMORY_TYPE_META_PATTERN: "MetaPattern",
}
_TYPE_BY_NAME = {name.lower(): value for value, name in TYPE_NAMES.items() if name != "MetaPattern"}

#: AutoMem's legacy type names and the canonical type each is stored as (``TYPE_ALIASES`` in
#: automem/config.py of verygoodplugins/automem; its lower-case canonical names are covered
#: by :func:`parse_type`'s case-insensitive match). Keys are lower case.
LEGACY_TYPE_ALIASES: dict[str, str] = {
    "memory": "Context", "milestone": "Context", "analysis": "Insight", "observation": "Insight",
    "document": "Context", "meeting_notes": "Context", "template": "Pattern", "project": "Context",
    "issue": "Insight", "timeline": "Context", "organization": "Context", "person": "Context",
    "interests": "Preference", "personality": "Preference", "emotional_patterns": "Preference",
    "relationship_dynamics": "Preference", "personal_situation": "Context", "health_habits": "Habit",
    "practical_info": "Context", "communication": "Preference", "legal_analysis": "Insight",
}

STATE_NAMES: dict[int, str] = {
    value: name.removeprefix("MEMORY_STATE_")
    for name, value in memory_pb2.MemoryState.items()
    if value
}
_STATE_BY_NAME = {v: k for k, v in STATE_NAMES.items()}

#: AutoMem's 11 authorable relation types.
AUTHORABLE_RELATIONS = (
    "RELATES_TO", "LEADS_TO", "OCCURRED_BEFORE", "PREFERS_OVER", "EXEMPLIFIES", "CONTRADICTS",
    "REINFORCES", "INVALIDATED_BY", "EVOLVED_INTO", "DERIVED_FROM", "PART_OF",
)
SYSTEM_RELATIONS = ("SIMILAR_TO", "PRECEDED_BY", "DISCOVERED")

#: Longest idempotency key a write accepts (characters; a UUID is 36): the key is stored with
#: the memories it names (automem/graph/idempotency.py).
IDEMPOTENCY_KEY_MAX_LENGTH = 255

#: Longest id a request may name (characters). What a call acts on is named by a UUID (36
#: characters: memories, review items, tombstones, merges) or 32 hex digits (API keys), so a
#: longer id names nothing that exists: it is refused as malformed (:func:`check_id`), not
#: looked up and answered NOT_FOUND.
ID_MAX_LENGTH = 128


def check_id(value: str, field: str) -> None:
    """Refuse an id no stored id can equal: ``value`` (the id a request names: a memory's,
    or a review item's, tombstone's, merge's or key's) blank, longer than
    :data:`ID_MAX_LENGTH` characters, or holding a control character (NUL, newline, tab,
    DEL: Unicode category Cc). The one check of such ids, made by the gRPC server for every
    request's ``id`` (automem/common/grpc_server.py), by CreateRelation for its two ends and
    by the REST gateway for every ``*_id`` path parameter (automem/gateway/schemas.py), so
    each surface answers INVALID_ARGUMENT / 400 naming the field: an over-long or
    control-character id was NOT_FOUND over gRPC (its whole text echoed) and REST, while a
    NUL was 400 over REST and, over gRPC, named ``ids`` or ``mid`` (the graph's parameters).

    Raises:
        InvalidArgument: naming ``field``; the id itself is not echoed (it may be long).
    """
    if not value.strip():
        raise InvalidArgument(f"{field}: required (the id of what the call acts on)", field=field)
    if "\x00" in value:
        raise InvalidArgument(f"{field}: contains a NUL character", field=field)
    if len(value) > ID_MAX_LENGTH:
        raise InvalidArgument(f"{field}: too long ({len(value)} characters; an id has at most {ID_MAX_LENGTH})",
                              field=field)
    for i, char in enumerate(value):
        if unicodedata.category(char) == "Cc":
            raise InvalidArgument(f"{field}: contains a control character (U+{ord(char):04X} at character {i}); "
                                  "an id has none", field=field)


def check_ids(values: Sequence[str], field: str) -> None:
    """Refuse a list of ids (a search's ``priority_ids``, a by-tag delete's ``memory_ids``, a
    reprocess's ``ids``) holding an id :func:`check_id` refuses: longer than
    :data:`ID_MAX_LENGTH` characters or holding a control character. A blank item names
    nothing and is skipped, as before (the REST gateway and the MCP tools drop blank pieces
    of a list; the services match nothing by it). Each item is checked as a single id is, so
    a list answers as the single-id fields do (they were looked up and matched nothing).

    Raises:
        InvalidArgument: naming ``<field>[<index>]`` (``memory_ids[3]``), the first item at
            fault; the id itself is not echoed.
    """
    for index, value in enumerate(values):
        if value.strip():
            check_id(value, f"{field}[{index}]")


#: Far-future epoch seconds used for an open-ended valid window (9999-12-31T23:59:59Z).
OPEN_END = 253402300799.0


def type_name(value: int) -> str:
    """Canonical type name ("Decision", ...) of a MemoryType value; "" when unspecified."""
    return TYPE_NAMES.get(value, "")


def parse_type(raw: str, *, field: str = "type") -> int:
    """MemoryType value of ``raw``: a canonical name in any case ("decision" is Decision), a
    proto enum name (``MEMORY_TYPE_DECISION``), or one of AutoMem's legacy names
    (:data:`LEGACY_TYPE_ALIASES`, e.g. "analysis" is Insight), so a store, an update and a
    type filter all map a type as AutoMem's ``normalize_memory_type`` (automem/config.py)
    does. AutoMem matches its aliases case-sensitively; here any case matches.

    Raises InvalidArgument naming ``field`` for an unknown type.
    """
    key = raw.strip().lower()
    if key.startswith("memory_type_"):
        key = key.removeprefix("memory_type_")
    key = LEGACY_TYPE_ALIASES.get(key, key).lower()
    if key not in _TYPE_BY_NAME:
        allowed = ", ".join(n for n in TYPE_NAMES.values() if n != "MetaPattern")
        raise InvalidArgument(f"{field}: unknown memory type {raw!r}; one of {allowed}", field=field)
    return _TYPE_BY_NAME[key]


def state_name(value: int) -> str:
    """"ACTIVE", "SUPERSEDED", ... of a MemoryState value."""
    return STATE_NAMES.get(value, "ACTIVE")


def parse_state(name: str) -> int:
    """MemoryState value of a name such as "ACTIVE"."""
    return _STATE_BY_NAME[name.upper().removeprefix("MEMORY_STATE_")]


def relation_type_name(value: int, field: str = "type") -> str:
    """"RELATES_TO", ... of a RelationType value. Raises InvalidArgument naming ``field`` for
    a number the enum does not define (a gRPC caller may send any: protobuf keeps it; the
    enum's ``Name`` raised a ValueError that answered UNKNOWN)."""
    try:
        return memory_pb2.RelationType.Name(value).removeprefix("RELATION_TYPE_")
    except ValueError:
        raise InvalidArgument(f"{field}: {value} is not a relation type number", field=field) from None


def parse_relation_type(raw: str, *, authorable_only: bool = True, field: str = "type") -> int:
    """RelationType value of a name (any case). Raises InvalidArgument for unknown types."""
    key = raw.strip().upper().removeprefix("RELATION_TYPE_")
    allowed = AUTHORABLE_RELATIONS if authorable_only else AUTHORABLE_RELATIONS + SYSTEM_RELATIONS
    if key not in allowed:
        raise InvalidArgument(
            f"{field}: unknown relation type {raw!r}; one of {', '.join(allowed)}", field=field
        )
    return memory_pb2.RelationType.Value("RELATION_TYPE_" + key)


# --- time ------------------------------------------------------------------------------


def parse_time(raw: str, *, field: str, tz: tzinfo = UTC) -> datetime:
    """Parse an ISO 8601 time as an aware UTC datetime; naive times are in ``tz`` (UTC unless a
    request names a zone: a recall's ``tz``, automem/gateway/usecases.py ``read_options``);
    millisecond precision (:func:`to_millis`). Raises InvalidArgument naming ``field``."""
    text = raw.strip()
    try:
        value = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise InvalidArgument(f"{field}: not an ISO 8601 time: {raw!r}", field=field) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=tz)
    try:
        value = value.astimezone(UTC)
        value.timestamp()
    except (OverflowError, ValueError):
        raise InvalidArgument(f"{field}: {raw!r} is outside the years 1–9999 in UTC", field=field) from None
    return to_millis(value)


def ts(value: datetime | float | None) -> timestamp_pb2.Timestamp | None:
    """A protobuf Timestamp from a datetime or epoch seconds (None stays None)."""
    if value is None:
        return None
    out = timestamp_pb2.Timestamp()
    if isinstance(value, datetime):
        out.FromDatetime(value.astimezone(UTC))
    else:
        out.FromNanoseconds(epoch_nanos(value))
    return out


def epoch_nanos(seconds: float) -> int:
    """Nanoseconds of float epoch ``seconds`` (a graph time), rounded to whole microseconds."""
    return round(float(seconds) * 1e6) * 1000


def epoch(message: Any, name: str) -> float | None:
    """Epoch seconds of the Timestamp field ``name`` of ``message``; None when unset."""
    if not message.HasField(name):
        return None
    value = getattr(message, name)
    return value.seconds + value.nanos / 1e9


def first_epoch(message: Any, *names: str, default: float | None = None) -> float | None:
    """Epoch seconds of the first of the Timestamp fields ``names`` that is set, else
    ``default``. Set is set: 1970-01-01T00:00:00Z (0.0) is a time like any other, where
    ``epoch(m, a) or epoch(m, b)`` took it for "unset" (a window ending then stayed open)."""
    for name in names:
        if message.HasField(name):
            value = getattr(message, name)
            return value.seconds + value.nanos / 1e9
    return default


def iso(message: Any, name: str) -> str | None:
    """RFC 3339 text of a Timestamp field (UTC, "+00:00") to the millisecond, the precision
    of every stored time (:func:`to_millis`); None when unset. A graph time is a float of
    epoch seconds whose last digits far from 1970 are noise (one step is ~30 µs in year
    9999: 9999-12-31T23:59:59.999 reads back as ...59.998993), so the time is first rounded
    to 0.1 ms, which undoes that noise, then cut to the millisecond, so that an inclusive
    bound half a millisecond before midnight (automem/common/timewindow.py ``last_instant``)
    still reads as 23:59:59.999 of its own day."""
    if not message.HasField(name):
        return None
    value = getattr(message, name)
    seconds, millis = value.seconds, round(value.nanos / 1e5) // 10
    if millis == 1000:
        seconds, millis = seconds + 1, 0
    return (datetime.fromtimestamp(seconds, UTC) + timedelta(milliseconds=millis)).isoformat()


def to_millis(value: datetime) -> datetime:
    """``value`` with sub-millisecond digits dropped.

    Times have millisecond precision: the graph keeps them as float epoch seconds and
    FalkorDB returns 15 significant digits, so a finer time would not read back the same.
    """
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def now() -> datetime:
    """Current UTC time, at millisecond precision (:func:`to_millis`)."""
    return to_millis(datetime.now(UTC))


#: Most items a request takes in a list of filter terms or ids: a search's ``tags``,
#: ``exclude_tags``, ``context_tags``, ``context_types`` and ``priority_ids``, a by-tag
#: listing's and delete's ``tags`` and a by-tag delete's ``memory_ids``. Each item is a term
#: every candidate is matched against (or an id looked up); a stored memory has at most 100
#: tags (automem/ingest/logic.py ``MAX_TAGS``), so 1,000 leaves room for any real filter and
#: bounds one request's work (they were unbounded: break-it review).
LIST_ITEMS_MAX = 1000


def check_list_length(values: Sized, field: str, most: int = LIST_ITEMS_MAX) -> None:
    """Nothing, or InvalidArgument naming ``field`` (``"tags: at most 1000 items (got
    5000)"``) when ``values`` holds more than ``most`` items (:data:`LIST_ITEMS_MAX`)."""
    if len(values) > most:
        raise InvalidArgument(f"{field}: at most {most} items (got {len(values)})", field=field)


# --- content ---------------------------------------------------------------------------


def check_content_length(content: str, limit: int, field: str = "content") -> None:
    """Nothing, or InvalidArgument naming ``field`` when ``content`` is longer than ``limit``
    characters (``Settings.content_max_length``, AutoMem's 2,000 by default): the one length
    rule of a memory's text, applied by the ingest service (automem/ingest/logic.py
    ``validate_content``) and by the MCP tools before they send (a text of megabytes was
    refused by gRPC's message size limit, naming nothing)."""
    if len(content) > limit:
        raise InvalidArgument(f"{field}: {len(content)} characters exceeds the limit of {limit} characters",
                              field=field)


def content_hash(content: str) -> str:
    """sha256 hex of the NFC-normalised, whitespace-collapsed, lower-cased content."""
    normal = " ".join(unicodedata.normalize("NFC", content).split()).lower()
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


def integral_numbers(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, scalars) with every float that has no fraction
    and lies within ±2^53 as an int: a Struct holds every number as a double, and the
    metadata's integers read back as JSON integers (``5.0`` → ``5``). ``-0.0`` stays a float:
    no integer holds its sign."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 and not (
            value == 0 and math.copysign(1.0, value) < 0):
        return int(value)
    if isinstance(value, dict):
        return {k: integral_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_numbers(v) for v in value]
    return value


def metadata_dict(memory: Memory) -> dict[str, Any]:
    """The metadata Struct as a plain dict, integral numbers as ints.

    Exact for every integer the ingest service accepts: it refuses integers outside
    ±(2^53−1) (automem/ingest/logic.py ``check_metadata_values``), the range a Struct's
    double holds exactly. A float with no fraction comes back as an int (``5.0`` → ``5``;
    ``-0.0`` stays ``-0.0``).
    """
    return integral_numbers(json_format.MessageToDict(memory.metadata)) if memory.HasField("metadata") else {}


def set_metadata(memory: Memory, value: dict[str, Any]) -> None:
    """Replace the metadata Struct with ``value``."""
    memory.ClearField("metadata")
    struct = struct_pb2.Struct()
    struct.update(value)
    memory.metadata.CopyFrom(struct)


# --- graph node ------------------------------------------------------------------------

_TIME_FIELDS = (
    "create_time", "update_time", "last_access_time", "event_time",
    "valid_from", "valid_to", "record_time", "retract_time", "superseded_time", "prior_valid_to",
)
#: Time fields whose open end is stored as :data:`OPEN_END` (read back as unset).
_OPEN_ENDED = ("valid_to", "retract_time")


def _node_time(name: str) -> Callable[[Memory], float | None]:
    # Open-ended windows are stored as OPEN_END so range filters need no null checks.
    open_end = name in _OPEN_ENDED

    def build(memory: Memory) -> float | None:
        value = epoch(memory, name)
        return OPEN_END if value is None and open_end else value

    return build


#: How each node property is built from the message (:func:`memory_to_node`, in this order).
_NODE_PROPERTIES: dict[str, Callable[[Memory], Any]] = {
    "id": lambda m: m.id,
    "scope": lambda m: m.scope,
    "content": lambda m: m.content,
    "summary": lambda m: m.summary,
    "type": lambda m: type_name(m.type),
    "tags": lambda m: list(m.tags),
    # Comparison keys (automem/common/text.py text_key); the property names predate the rule.
    "tags_lower": lambda m: sorted({text_key(t) for t in m.tags}),
    "importance": lambda m: float(m.importance),
    "confidence": lambda m: float(m.confidence),
    "metadata": lambda m: json.dumps(metadata_dict(m), ensure_ascii=False, sort_keys=True),
    "state": lambda m: state_name(m.state),
    "superseded_by": lambda m: m.superseded_by,
    "version": lambda m: int(m.version),
    "content_hash": lambda m: m.content_hash,
    "entities": lambda m: json.dumps(
        [{"name": e.name, "kind": e.kind, "tag": e.tag} for e in m.entities], ensure_ascii=False
    ),
    # Entity tags (enrichment-owned, apart from the user's tags; tag filters match both).
    "entity_tags": lambda m: sorted({text_key(e.tag) for e in m.entities if e.tag}),
    "embedding_status": lambda m: memory_pb2.EmbeddingStatus.Name(m.embedding_status),
    "enrichment_status": lambda m: memory_pb2.EnrichmentStatus.Name(m.enrichment_status),
    "relevance_score": lambda m: float(m.relevance_score),
    "source": lambda m: m.source,
    "state_reason": lambda m: m.state_reason,
    "embedding_model": lambda m: m.embedding_model,
    **{name: _node_time(name) for name in _TIME_FIELDS},
}


def memory_to_node(memory: Memory) -> dict[str, Any]:
    """FalkorDB node properties of a memory: every field of the message, nothing else.

    Shape: scalars as themselves, times as float epoch seconds or None, ``tags`` as a list,
    ``tags_lower`` / ``entity_tags`` the tags' comparison keys
    (:func:`automem.common.text.text_key`: NFKC + case folding) for tag matching, ``metadata``/``entities`` as JSON text,
    enums by name; an open ``valid_to`` / ``retract_time`` is :data:`OPEN_END`.
    """
    return {name: build(memory) for name, build in _NODE_PROPERTIES.items()}


def node_fields(memory: Memory, names: Iterable[str]) -> dict[str, Any]:
    """Only the node properties ``names`` of ``memory``, each exactly as :func:`memory_to_node`
    builds it: the one builder behind partial writes (``SET m += $props``) such as a touch's
    ``last_access_time`` or decay's ``relevance_score``. KeyError for a name that is not a node
    property."""
    return {name: _NODE_PROPERTIES[name](memory) for name in names}


@dataclass(slots=True)
class CandidateFields:
    """The fields recall filters and ranks a candidate on, as plain Python values.

    What :meth:`automem.graph.memories.Memories.recall_candidates` reads for the ~200
    candidates of every recall, without the body. Plain values rather than a ``Memory``
    message: building the messages (with their ``Timestamp`` fields) and reading the times
    back cost about a third of the ranking step's CPU (docs/benchmarks.md, "Recall's Python
    work per candidate").

    Attributes:
        id, scope, content: as in the Memory message.
        tags: the tags as stored (their exact spelling).
        entity_tags: the entities' tags as the node stores them (``entity_tags``: comparison
            keys, :func:`automem.common.text.text_key`).
        importance, confidence: floats in [0, 1].
        event_time, create_time: epoch seconds (UTC) as the node stores them, None when unset.
        type: the canonical type name as the node stores it ("Decision"; :func:`type_name`),
            "" when unset.
    """

    id: str
    scope: str
    content: str
    tags: list[str]
    entity_tags: list[str]
    importance: float
    confidence: float
    event_time: float | None
    create_time: float | None
    type: str = ""

    @classmethod
    def of(cls, memory: Memory) -> CandidateFields:
        """The fields of a whole ``memory`` (a past version, or a test's memory)."""
        return cls(id=memory.id, scope=memory.scope, content=memory.content, tags=list(memory.tags),
                   entity_tags=[text_key(e.tag) for e in memory.entities if e.tag],
                   importance=memory.importance, confidence=memory.confidence,
                   event_time=epoch(memory, "event_time"), create_time=epoch(memory, "create_time"),
                   type=type_name(memory.type))


#: The node properties :func:`node_to_memory` reads, in :func:`memory_to_node`'s order (the
#: comparison keys ``tags_lower`` / ``entity_tags`` are for matching only). A read that
#: returns them as columns (:func:`node_columns`) costs ~15 % less than ``properties(m)`` for a
#: recall page: FalkorDB sends no key names and the client parses no map (docs/benchmarks.md,
#: "Recall's Python share, 2026-12-05").
NODE_READ_KEYS = tuple(name for name in _NODE_PROPERTIES if name not in ("tags_lower", "entity_tags"))


def node_columns(var: str) -> str:
    """Cypher ``RETURN`` items of :data:`NODE_READ_KEYS` for node variable ``var``
    (``"m.id, m.scope, ..."``); rebuild the properties with ``dict(zip(NODE_READ_KEYS, row))``
    (an unset property reads as null, which :func:`node_to_memory` treats as absent)."""
    return ", ".join(f"{var}.{name}" for name in NODE_READ_KEYS)


def node_to_memory(props: dict[str, Any]) -> Memory:
    """The Memory message of FalkorDB node properties (inverse of :func:`memory_to_node`)."""
    memory = Memory(
        id=props.get("id") or "",
        scope=props.get("scope") or "",
        content=props.get("content") or "",
        summary=props.get("summary") or "",
        tags=list(props.get("tags") or []),
        importance=float(props.get("importance") or 0.0),
        confidence=float(props.get("confidence") or 0.0),
        superseded_by=props.get("superseded_by") or "",
        version=int(props.get("version") or 0),
        content_hash=props.get("content_hash") or "",
        relevance_score=float(props.get("relevance_score") or 0.0),
        source=props.get("source") or "",
        state_reason=props.get("state_reason") or "",
        embedding_model=props.get("embedding_model") or "",
    )
    if props.get("type"):
        memory.type = parse_type(props["type"]) if props["type"] != "MetaPattern" else (
            memory_pb2.MEMORY_TYPE_META_PATTERN)
    memory.state = _STATE_BY_NAME.get(props.get("state") or "ACTIVE", memory_pb2.MEMORY_STATE_ACTIVE)
    # The Struct is set even when empty (as set_metadata leaves it), filled in place.
    memory.metadata.SetInParent()
    metadata = json.loads(props.get("metadata") or "{}")
    if metadata:
        memory.metadata.update(metadata)
    for entity in json.loads(props.get("entities") or "[]"):
        memory.entities.add(**entity)
    if props.get("embedding_status"):
        memory.embedding_status = memory_pb2.EmbeddingStatus.Value(props["embedding_status"])
    if props.get("enrichment_status"):
        memory.enrichment_status = memory_pb2.EnrichmentStatus.Value(props["enrichment_status"])
    for name in _TIME_FIELDS:
        value = props.get(name)
        if value is None or (name in _OPEN_ENDED and float(value) >= OPEN_END):
            continue
        getattr(memory, name).FromNanoseconds(epoch_nanos(value))  # as ts() builds it, in place
    return memory
