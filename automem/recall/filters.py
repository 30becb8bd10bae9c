"""Recall filters, expressed once and applied three ways: as a Python predicate on hydrated
memories, as a Cypher WHERE fragment for the graph arms (translated by the memories
repository, :func:`automem.graph.memories.filter_where`), and as a vector pre-filter.

Tag rule (documented for users): tags are stored as given and matched by their comparison keys
(:func:`automem.common.text.text_key`: Unicode NFKC and case folding, so ``STRASSE`` matches
``straße`` and NFC matches NFD);
``tag_match=exact`` compares whole tags, ``prefix`` (AutoMem's default) matches tags that
start with the given text; ``tag_mode=any`` (default) needs one of the tags, ``all`` every one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from google.protobuf.message import Message

from automem.common.enums import enum_word
from automem.common.errors import InvalidArgument
from automem.common.model import OPEN_END, CandidateFields, Memory, first_epoch
from automem.common.state import ReadAt
from automem.common.text import text_key
from automem.v1 import recall_service_pb2
from automem.vectors import VectorFilter


@dataclass
class Filters:
    """What every arm must respect. Times are epoch seconds on ``event_time``."""

    scope: str
    tags: list[str] = field(default_factory=list)
    tag_mode: str = "any"
    tag_match: str = "prefix"
    exclude_tags: list[str] = field(default_factory=list)
    start: float | None = None
    end: float | None = None

    @classmethod
    def build(cls, scope: str, tags: list[str], tag_mode: str, tag_match: str, exclude: list[str],
              start: float | None, end: float | None) -> Filters:
        """Validated filters. InvalidArgument names ``tag_mode`` / ``tag_match``."""
        tag_mode = (tag_mode or "any").lower()
        tag_match = (tag_match or "prefix").lower()
        if tag_mode not in ("any", "all"):
            raise InvalidArgument("tag_mode: must be 'any' or 'all'", field="tag_mode")
        if tag_match not in ("prefix", "exact"):
            raise InvalidArgument("tag_match: must be 'prefix' or 'exact'", field="tag_match")
        clean = sorted({text_key(t.strip()) for t in tags if t and t.strip()})
        excl = sorted({text_key(t.strip()) for t in exclude if t and t.strip()})
        return cls(scope, clean, tag_mode, tag_match, excl, start, end)

    # --- python predicate ----------------------------------------------------------

    def matches(self, memory: Memory | CandidateFields) -> bool:
        """True when ``memory`` (a message, or a recall candidate's fields) passes the tag,
        exclusion and time filters."""
        if memory.scope != self.scope:
            return False
        fields = isinstance(memory, CandidateFields)
        if self.tags or self.exclude_tags:  # (no tag filter: every tag set passes, so none is built)
            entity_keys = memory.entity_tags if fields else [e.tag for e in memory.entities if e.tag]
            if not self.tags_match({text_key(t) for t in memory.tags} | {text_key(e) for e in entity_keys if e}):
                return False
        if self.start is not None or self.end is not None:
            if fields:
                t = next((v for v in (memory.event_time, memory.create_time) if v is not None), 0.0)
            else:
                t = first_epoch(memory, "event_time", "create_time", default=0.0)
            if self.start is not None and t < self.start:
                return False
            if self.end is not None and t > self.end:
                return False
        return True

    def tags_match(self, tags: set[str] | list[str]) -> bool:
        """True when ``tags`` (comparison keys, :func:`automem.common.text.text_key`) (user tags plus entity tags) pass the tag and
        exclusion filters."""
        have = set(tags)
        if self.exclude_tags and have & set(self.exclude_tags):
            return False
        if self.tags:
            def hit(wanted: str) -> bool:
                if self.tag_match == "exact":
                    return wanted in have
                return any(t.startswith(wanted) for t in have)
            results = [hit(t) for t in self.tags]
            if not (all(results) if self.tag_mode == "all" else any(results)):
                return False
        return True

    # --- vectors -------------------------------------------------------------------

    def vector_filter(self, states: list[str]) -> VectorFilter:
        """The vector pre-filter (states as given; windows are checked by the state pass)."""
        flt = VectorFilter(scope=self.scope, states=states, exclude_tags=list(self.exclude_tags),
                           event_time_gte=self.start, event_time_lte=self.end)
        if self.tags:
            if self.tag_match == "exact":
                if self.tag_mode == "all":
                    flt.tags_all = list(self.tags)
                else:
                    flt.tags_any = list(self.tags)
            elif self.tag_mode == "all":
                flt.prefixes_all = list(self.tags)
            else:
                flt.prefixes_any = list(self.tags)
        return flt


#: Seconds of the first and the last instant a protobuf Timestamp may hold:
#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z (google/protobuf/timestamp.proto).
TIMESTAMP_MIN_SECONDS = -62_135_596_800
TIMESTAMP_MAX_SECONDS = 253_402_300_799
#: The latest read time (``as_of`` / ``known_at``, epoch seconds) a read applies:
#: 9999-12-31T23:59:58.999Z, the last millisecond before the open end. Open windows and
#: memories never retracted are stored with the end :data:`~automem.common.model.OPEN_END`
#: (9999-12-31T23:59:59Z) and read as open only before it (automem/common/state.py
#: ``known``, ``in_window``), so a read time in the last second of 9999 would find nothing.
LATEST_READ_TIME = OPEN_END - 0.001


def request_time(message: Message, name: str, *, field: str | None = None) -> float | None:
    """Epoch seconds of the Timestamp field ``name`` of a request ``message``; None when
    unset. Refuses a Timestamp outside the range the type allows (seconds of the years
    1–9999 in UTC, nanos 0..999,999,999; google/protobuf/timestamp.proto), as the write paths
    do (automem/ingest/logic.py ``input_time``): it answered UNKNOWN ("Timestamp is not
    valid") or was read as a time no memory has.

    Raises:
        InvalidArgument: naming ``field`` (default ``name``).
    """
    if not message.HasField(name):
        return None
    field = field or name
    value = getattr(message, name)
    if not TIMESTAMP_MIN_SECONDS <= value.seconds <= TIMESTAMP_MAX_SECONDS:
        raise InvalidArgument(f"{field}: outside the years 1–9999 (seconds={value.seconds}; a Timestamp holds "
                              f"{TIMESTAMP_MIN_SECONDS}..{TIMESTAMP_MAX_SECONDS})", field=field)
    if not 0 <= value.nanos <= 999_999_999:
        raise InvalidArgument(f"{field}: nanos must be between 0 and 999999999 (got {value.nanos})", field=field)
    return value.seconds + value.nanos / 1e9


def read_at(options: recall_service_pb2.ReadOptions) -> ReadAt:
    """The state-pass settings of a request (as_of / known_at default to now; a
    ``known_at`` before now sets ``past``: reads then use the versions believed at it,
    automem/common/state.py ``hydrate_at``). ``as_of`` and ``known_at`` later than
    :data:`LATEST_READ_TIME` are read at it. InvalidArgument naming ``state_mode``, or
    ``as_of`` / ``known_at`` outside the years 1–9999 (:func:`request_time`)."""
    mode = enum_word(recall_service_pb2.StateMode, options.state_mode, "state_mode", "current")
    as_of, known_at = request_time(options, "as_of"), request_time(options, "known_at")
    current = time.time()
    as_of = current if as_of is None else min(as_of, LATEST_READ_TIME)
    known_at = current if known_at is None else min(known_at, LATEST_READ_TIME)
    return ReadAt(
        as_of=as_of, known_at=known_at, past=known_at < current,
        mode=mode, include_archived=options.include_archived, include_pending=options.include_pending,
    )


def check_text(message: Message, prefix: str = "") -> None:
    """Refuse a request whose text holds a NUL character, naming the field (``read.x`` for
    a field of a nested message): FalkorDB's parser stops at one, and the graph's own check
    (automem/graph/store.py ``_check_params``) cannot tell which request field it came from.
    REST refuses one in every parameter already (automem/gateway/schemas.py ``NO_NUL``).
    Walks the set string fields, repeated or not, and the nested messages.

    Raises:
        InvalidArgument: naming the field.
    """
    for fd, value in message.ListFields():
        name = prefix + fd.name
        if fd.type == fd.TYPE_STRING:
            if any("\x00" in v for v in (value if fd.is_repeated else [value])):
                raise InvalidArgument(f"{name}: contains a NUL character", field=name)
        elif fd.type == fd.TYPE_MESSAGE:
            if fd.message_type.GetOptions().map_entry:
                for key, item in value.items():
                    if isinstance(key, str) and "\x00" in key:
                        raise InvalidArgument(f"{name}: a key contains a NUL character", field=name)
                    if isinstance(item, str) and "\x00" in item:
                        raise InvalidArgument(f"{name}: contains a NUL character", field=name)
                    if isinstance(item, Message):
                        check_text(item, name + ".")
            else:
                for item in value if fd.is_repeated else [value]:
                    check_text(item, name + ".")


def listed_states(read: ReadAt) -> list[str]:
    """The node states a listing reads under ``read``: ACTIVE and SUPERSEDED (the state pass
    turns a superseded hit into its head), plus ARCHIVED / PENDING_REVIEW when asked for or in
    history mode."""
    states = ["ACTIVE", "SUPERSEDED"]
    if read.include_archived or read.history:
        states.append("ARCHIVED")
    if read.include_pending or read.history:
        states.append("PENDING_REVIEW")
    return states
