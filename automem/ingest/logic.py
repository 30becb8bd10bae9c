"""Pure ingest logic: validate and normalise caller input into a ``Memory`` message.

No I/O here. Every error is an :class:`InvalidArgument` whose message names the field
(prefixed with ``memories[i].`` for batch items), so nothing is half-stored.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf import struct_pb2

from automem.common.classify import classify
from automem.common.embedding import configured_dimension
from automem.common.errors import InvalidArgument
from automem.common.jsontext import (
    REPEATED_KEY,
    InexactNumber,
    RepeatedKeys,
    exact_float,
    inexact_number,
    key_path,
    object_pairs,
)
from automem.common.lifecycle import GONE_STATES
from automem.common.model import (
    OPEN_END,
    Memory,
    check_content_length,
    content_hash,
    integral_numbers,
    metadata_dict,
    node_fields,
    parse_type,
    set_metadata,
    to_millis,
    ts,
    type_name,
)
from automem.common.payload import filtered_fields_changed
from automem.common.settings import Settings
from automem.common.text import is_blank
from automem.v1 import ingest_service_pb2, memory_pb2

#: AutoMem's default importance.
DEFAULT_IMPORTANCE = 0.5
#: AutoMem's confidence when the caller gives the type.
GIVEN_TYPE_CONFIDENCE = 0.9
MAX_TAG_LENGTH = 256
MAX_TAGS = 100
#: Longest free-text reason (delete, supersede, relation, review decisions, entity merges,
#: purges) in characters: a reason is a sentence for the audit trail, not a document.
MAX_REASON = 1000


def check_reason(reason: str, field: str = "reason") -> str:
    """``reason`` unchanged when it is at most :data:`MAX_REASON` characters.

    Raises:
        InvalidArgument: naming ``field`` when it is longer.
    """
    if len(reason) > MAX_REASON:
        raise InvalidArgument(f"{field}: at most {MAX_REASON} characters (got {len(reason)})", field=field)
    return reason


UPDATABLE_PATHS = (
    "content", "tags", "importance", "type", "confidence", "event_time", "valid_from", "valid_to", "metadata",
)
#: The earliest time a field holds (0001-01-01T00:00:00Z): a window cannot end there.
EARLIEST_TIME = datetime.min.replace(tzinfo=UTC)
#: AutoMem's names of the time fields of MemoryInput (``timestamp``, ``t_valid``,
#: ``t_invalid``): the keys of :func:`input_form`, which stored fingerprints were made with.
#: Errors name the proto fields; the REST gateway renames them for its callers
#: (automem/common/errors.py :data:`~automem.common.errors.REST_FIELD_NAMES`).
FIELD_LABELS = {"event_time": "timestamp", "valid_from": "t_valid", "valid_to": "t_invalid"}


def _unit_interval(value: float, field: str) -> float:
    if math.isnan(value) or value < 0.0 or value > 1.0:
        raise InvalidArgument(f"{field}: must be between 0 and 1, got {value}", field=field)
    return float(value)


def validate_content(content: str, settings: Settings, field: str = "content") -> str:
    """The content as given, or InvalidArgument: blank
    (automem/common/text.py :func:`~automem.common.text.is_blank`: nothing but whitespace and
    characters that show nothing), a NUL byte, or longer than
    ``settings.content_max_length`` characters (AutoMem's 2,000 by default)."""
    if is_blank(content):
        raise InvalidArgument(f"{field}: must not be empty (nothing but whitespace or invisible characters)",
                              field=field)
    if "\x00" in content:
        raise InvalidArgument(f"{field}: must not contain NUL (\\u0000) characters", field=field)
    check_content_length(content, settings.content_max_length, field)
    return content


def validate_tags(tags: list[str], field: str = "tags") -> list[str]:
    """Stripped, de-duplicated (first spelling kept) tags; InvalidArgument naming
    ``<field>[<i>]`` for a tag that is empty or blank (:func:`~automem.common.text.is_blank`:
    nothing but whitespace and characters that show nothing, as content is refused: such a
    tag looked empty when stored, and was dropped when it was), naming ``field`` for too many
    or too long tags, commas, and control characters (U+0000–U+001F, U+007F)."""
    out: list[str] = []
    for index, tag in enumerate(tags):
        if is_blank(tag):
            raise InvalidArgument(f"{field}[{index}]: must not be empty (nothing but whitespace or invisible "
                                  "characters)", field=f"{field}[{index}]")
        tag = tag.strip()
        if len(tag) > MAX_TAG_LENGTH:
            raise InvalidArgument(f"{field}: a tag is longer than {MAX_TAG_LENGTH} characters", field=field)
        if has_control(tag):
            raise InvalidArgument(f"{field}: tags must not contain NUL or other control characters "
                                  "(U+0000–U+001F, U+007F)", field=field)
        if "," in tag:
            # AutoMem's tag queries split on commas, so such a tag could never be found.
            raise InvalidArgument(f"{field}: tags must not contain commas ({tag[:40]!r})", field=field)
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidArgument(f"{field}: at most {MAX_TAGS} tags", field=field)
    return out


def parse_metadata(item: ingest_service_pb2.MemoryInput, field: str = "metadata") -> dict[str, Any] | None:
    """The metadata object of the input; None when not given.

    Shape: a JSON object (``metadata_json`` text, else the ``metadata`` Struct) of at most
    :data:`METADATA_MAX_BYTES` and :data:`METADATA_MAX_DEPTH` levels whose keys and values
    pass :func:`check_metadata_values`. Raises InvalidArgument naming the field
    (``metadata.<key>`` for a bad value or key) otherwise: among others, ``metadata_json``
    giving a key twice in one object (``metadata.a.x``: json would keep the last silently) or
    holding a decimal number no double holds as written (``1e-400``, which would read 0.0).
    ``-0.0`` is kept.
    """
    if item.metadata_json:
        _check_metadata_size(item.metadata_json, field)  # before reading: bounds the work of the read
        try:
            value = json.loads(item.metadata_json, parse_constant=_NonFinite, parse_float=exact_float,
                               object_pairs_hook=object_pairs)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"{field}: not valid JSON ({exc.msg})", field=field) from None
        except RecursionError:  # nested thousands deep: deeper than any limit below
            raise InvalidArgument(f"{field}: nested deeper than {METADATA_MAX_DEPTH} levels", field=field) from None
        except ValueError as exc:  # an integer past sys.get_int_max_str_digits()
            raise InvalidArgument(f"{field}: a number is too long ({exc})", field=field) from None
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise InvalidArgument(f"{field}: must be a JSON object, got {type(value).__name__}", field=field)
    elif item.HasField("metadata"):
        _check_metadata_size(item.metadata.SerializeToString(), field)
        value = _struct_to_python(item.metadata)
    elif item.metadata_set:
        return {}
    else:
        return None
    # The same checks for both forms: a Struct deeper than the limit was stored, and its
    # export could not be imported again.
    if _depth(value) > METADATA_MAX_DEPTH:
        raise InvalidArgument(f"{field}: nested deeper than {METADATA_MAX_DEPTH} levels", field=field)
    check_metadata_values(value, field)
    return value


#: Largest metadata object, in bytes of JSON. Keeps every event (before + after) well under
#: NATS's 1 MiB default max_payload, so no event can stall the outbox.
METADATA_MAX_BYTES = 64 * 1024


#: Deepest nesting of objects/lists in metadata (protobuf Struct decoding stops near 100
#: levels, and each JSON level is two Struct levels).
METADATA_MAX_DEPTH = 20

#: Largest integer metadata holds: 2**53 - 1. Metadata is a ``google.protobuf.Struct`` in
#: the ``Memory`` message (protos/automem/v1/memory.proto), so gRPC clients of any language
#: get a native map; Struct numbers are IEEE-754 doubles, exact for integers up to 2**53.
#: I-JSON (RFC 7493 §2.2) names the same range, [-(2**53)+1, (2**53)-1], as the integers
#: every JSON reader holds exactly. Larger ones are refused rather than rounded: send them
#: as strings.
METADATA_MAX_INT = 2**53 - 1


class _NonFinite(str):
    """``NaN`` / ``Infinity`` / ``-Infinity`` as Python's json reads them (its
    ``parse_constant`` hook), kept apart from strings so they can be refused by path."""


def _struct_to_python(value: Any) -> Any:
    # Not json_format.MessageToDict: it raises a bare ValueError on a NaN number, which
    # check_metadata_values reports by path instead.
    if isinstance(value, struct_pb2.Struct):
        return {key: _struct_to_python(value[key]) for key in value}
    if isinstance(value, struct_pb2.ListValue):
        return [_struct_to_python(sub) for sub in value]
    return value


def has_control(text: str) -> bool:
    """True when ``text`` holds a C0 control character (U+0000–U+001F) or DEL (U+007F)."""
    return any(ch < "\x20" or ch == "\x7f" for ch in text)


def check_metadata_values(value: Any, field: str = "metadata") -> None:
    """Refuse what metadata could not give back exactly as it came.

    Walks every key and value, nested ones included, and raises InvalidArgument naming the
    path (``metadata.a.b``, ``metadata.list[3]``) of the first:

    * integer outside ±:data:`METADATA_MAX_INT` (it would read back rounded, as a float);
    * ``NaN``, ``Infinity`` or ``-Infinity`` (not JSON numbers, RFC 8259 §6);
    * key holding NUL, another C0 control character (U+0000–U+001F) or DEL (U+007F) — keys
      are names, like tags (:func:`validate_tags`);
    * key or string holding a lone surrogate (``"\\ud800"`` in ``metadata_json``): not
      Unicode text, so no UTF-8 store (the Struct, FalkorDB) can hold it. The message is the
      REST gateway's for the same body (automem/gateway/schemas.py ``parse_json_body``);
    * (``metadata_json`` only, as :func:`parse_metadata` reads it) a decimal number no double
      holds as written (``1e-400`` would read back 0.0, ``1e400`` infinite) or a key given
      twice in one object (path ``metadata.a.key``; json would keep the last silently), with
      the gateway's messages.

    Everything else reads back equal: strings, booleans, null, lists, objects, floats (as
    doubles; the gateway refuses decimals a double cannot hold, automem/gateway/schemas.py)
    and integers as integers. A number with no fraction reads back as an integer (``5.0`` →
    ``5``, the same JSON number): the Struct keeps no difference between them; ``-0.0``
    stays ``-0.0``.
    """
    if isinstance(value, RepeatedKeys):
        where = key_path(field, value.repeated[0])
        raise InvalidArgument(f"{where}: {REPEATED_KEY}", field=where)
    if isinstance(value, dict):
        for key, sub in value.items():
            if has_control(key):
                raise InvalidArgument(f"{field}: key {key!r} contains a control character (U+0000–U+001F or "
                                      "U+007F)", field=field)
            if _lone_surrogate(key):
                raise InvalidArgument(f"{field}: key {key!r}: {_NOT_UNICODE}", field=field)
            check_metadata_values(sub, f"{field}.{key}")
    elif isinstance(value, InexactNumber):
        raise InvalidArgument(f"{field}: {inexact_number(value)}", field=field)
    elif isinstance(value, str) and not isinstance(value, _NonFinite):
        if _lone_surrogate(value):
            raise InvalidArgument(f"{field}: {_NOT_UNICODE}", field=field)
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            check_metadata_values(sub, f"{field}[{index}]")
    elif isinstance(value, _NonFinite) or (isinstance(value, float) and not math.isfinite(value)):
        name = value if isinstance(value, str) else "NaN" if math.isnan(value) else f"{'-' if value < 0 else ''}Infinity"
        raise InvalidArgument(f"{field}: {name} is not a JSON number; send a finite number (or null)", field=field)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > METADATA_MAX_INT:
        raise InvalidArgument(
            f"{field}: integer {value} is outside ±{METADATA_MAX_INT} (2^53-1), the integers metadata reads back "
            "exactly; send it as a string", field=field)


_NOT_UNICODE = "text must be valid Unicode: a lone surrogate (e.g. \\ud800) is not allowed"


def _lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a UTF-16 surrogate code point (U+D800–U+DFFF) of its own: what
    ``json.loads`` makes of an unpaired ``\\ud800`` escape, which has no UTF-8 form."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _depth(value: Any, level: int = 0) -> int:
    if level > METADATA_MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def _check_metadata_size(raw: str | bytes, field: str) -> None:
    size = len(raw.encode("utf-8")) if isinstance(raw, str) else len(raw)
    if size > METADATA_MAX_BYTES:
        raise InvalidArgument(f"{field}: {size} bytes exceeds the limit of {METADATA_MAX_BYTES} bytes", field=field)


def input_time(item: ingest_service_pb2.MemoryInput, name: str, field_prefix: str = "") -> datetime | None:
    """The Timestamp field ``name`` of ``item`` as a UTC datetime at millisecond precision
    (:func:`to_millis`); None when unset. InvalidArgument naming the field (``field_prefix``
    + ``name``, the proto's name) when it is outside the years 1-9999, or for ``valid_to`` and
    ``valid_from`` at or after :data:`~automem.common.model.OPEN_END` (the stored open end)."""
    if not item.HasField(name):
        return None
    field = field_prefix + name
    try:
        value = to_millis(getattr(item, name).ToDatetime(tzinfo=UTC))
    except (ValueError, OverflowError):
        raise InvalidArgument(f"{field}: outside the years 1–9999", field=field) from None
    if name == "valid_to" and value.timestamp() >= OPEN_END:
        # The graph stores an open end as OPEN_END: an end at or after it read back as none.
        raise InvalidArgument(f"{field}: must be before 9999-12-31T23:59:59Z, which stands for no end; "
                              "leave it unset for a window without end", field=field)
    if name == "valid_from" and value.timestamp() >= OPEN_END:
        # A window from then is empty (it ends at OPEN_END): never valid, and a supersede from
        # then closed nothing and never took effect.
        raise InvalidArgument(f"{field}: must be before 9999-12-31T23:59:59Z, where every window ends",
                              field=field)
    return value


def validate_embedding(values: list[float], field: str, dimension: int) -> None:
    """Check a caller-supplied embedding: finite numbers, and exactly ``dimension`` of them
    when ``dimension`` is known (non-zero; automem/common/embedding.py
    ``configured_dimension``). Empty = none given. AutoMem refuses a vector without exactly
    ``VECTOR_SIZE`` values too (``coerce_embedding`` in automem/embedding/runtime_helpers.py
    of verygoodplugins/automem); the message here names both sizes. A vector whose every
    value is 0 as a 32-bit float (zeros, or values under ~1.4e-45 that the field rounds to 0)
    has no direction, so no cosine ranks it, and is refused (AutoMem stores it; the memory
    then never surfaces by meaning). InvalidArgument naming ``field``."""
    if any(math.isnan(v) or math.isinf(v) for v in values):
        raise InvalidArgument(f"{field}: must contain finite numbers within ±3.4e38 (32-bit floats)", field=field)
    if values and not any(values):
        raise InvalidArgument(f"{field}: every value is 0 as a 32-bit float, a vector without a direction; "
                              "leave the field out and the service embeds the content", field=field)
    if values and dimension and len(values) != dimension:
        raise InvalidArgument(f"{field}: has {len(values)} dimensions; the collection's embedding model uses "
                              f"{dimension}", field=field)


def build_memory(
    item: ingest_service_pb2.MemoryInput,
    *,
    scope: str,
    settings: Settings,
    created: datetime,
    source: str,
    field_prefix: str = "",
) -> Memory:
    """A new ACTIVE (or PENDING_REVIEW) memory from caller input, with a server-minted UUID.

    Defaults (AutoMem): importance 0.5; confidence 0.9 when the type is given, else the
    classifier's; ``timestamp`` = created time; ``t_valid`` = ``timestamp`` when that is in
    the past (a memory imported with its original date is valid from that date: AutoMem's
    ``t_valid or created_at`` in automem/api/memory.py, where ``created_at`` is the request's
    timestamp), else the created time (a future ``timestamp`` does not hide the memory until
    then); ``t_invalid`` open. A caller ``embedding`` must have as many numbers as the configured
    model's vectors (:func:`validate_embedding`). Raises InvalidArgument naming the field.
    """
    p = field_prefix
    content = validate_content(item.content, settings, f"{p}content")
    memory = Memory(
        id=str(uuid.uuid4()),
        scope=scope,
        content=content,
        tags=validate_tags(list(item.tags), f"{p}tags"),
        importance=_unit_interval(item.importance, f"{p}importance")
        if item.HasField("importance") else DEFAULT_IMPORTANCE,
        state=memory_pb2.MEMORY_STATE_PENDING_REVIEW if item.require_review else memory_pb2.MEMORY_STATE_ACTIVE,
        version=1,
        content_hash=content_hash(content),
        source=source,
        embedding_status=memory_pb2.EMBEDDING_STATUS_PENDING,
        enrichment_status=memory_pb2.ENRICHMENT_STATUS_PENDING,
        relevance_score=1.0,
    )
    if item.type.strip():
        memory.type = parse_type(item.type, field=f"{p}type")
        confidence = GIVEN_TYPE_CONFIDENCE
    else:
        memory.type, confidence = classify(content)
    if item.HasField("confidence"):
        confidence = _unit_interval(item.confidence, f"{p}confidence")
    memory.confidence = confidence
    metadata = parse_metadata(item, f"{p}metadata")
    set_metadata(memory, metadata or {})
    validate_embedding(list(item.embedding), f"{p}embedding", configured_dimension(settings))

    event_time = input_time(item, "event_time", p) or created
    valid_to = input_time(item, "valid_to", p)
    given_from = input_time(item, "valid_from", p)
    if given_from is not None:
        valid_from = given_from
    elif valid_to is not None and valid_to <= created:
        # Stored already expired (AutoMem allows it): valid from the event time, or just
        # before the end when the event time is not earlier.
        if valid_to <= EARLIEST_TIME:  # no instant before it for the window to start at
            raise InvalidArgument(f"{p}valid_to: must be after 0001-01-01T00:00:00Z, the earliest valid_from",
                                  field=f"{p}valid_to")
        valid_from = min(event_time, valid_to - timedelta(milliseconds=1))
    elif event_time < created:
        valid_from = event_time  # backdated: valid from when it happened (AutoMem)
    else:
        valid_from = created
    for name, value in (("create_time", created), ("update_time", created), ("record_time", created),
                        ("event_time", event_time), ("valid_from", valid_from)):
        getattr(memory, name).CopyFrom(ts(value))
    if valid_to is not None:
        if valid_to <= valid_from:
            raise InvalidArgument(f"{p}valid_to: must be after valid_from", field=f"{p}valid_to")
        memory.valid_to.CopyFrom(ts(valid_to))
    return memory


#: The node properties a store's input decides (automem/common/model.py builds them): a
#: store repeats an earlier memory only when every one of them is equal.
INPUT_PROPERTIES = ("content", "type", "tags", "importance", "confidence", "metadata", "state", "source",
                    "event_time", "valid_from", "valid_to")
#: Those of :data:`INPUT_PROPERTIES` that do not depend on the store time (nor on the
#: classifier): the graph pre-selects candidates by them, so a flood of stores with the same
#: content and other fields costs one comparison per store, not one per earlier store.
TIMELESS_INPUT_PROPERTIES = ("content", "tags", "importance", "metadata", "state", "source")


def repeats(existing: Memory, item: ingest_service_pb2.MemoryInput, settings: Settings, source: str) -> bool:
    """True when storing ``item`` (as ``source``) would store exactly ``existing`` again.

    The dedupe rule (README "Rules worth knowing"): ``item`` is built as if it had been
    stored at ``existing``'s create time (:func:`build_memory`, so defaulted times —
    ``timestamp`` and ``t_valid`` = the store time — compare equal on a retry) and every
    property of :data:`INPUT_PROPERTIES` must equal ``existing``'s: content exactly (not
    only its hash), type, tags (same spellings, same order), importance, confidence,
    metadata, review state, writer, event time and validity window. Anything else makes a
    new memory. A type or confidence that enrichment's classifier changed since counts as
    different. Raises InvalidArgument like :func:`build_memory` (the item is validated
    before it is compared).
    """
    again = build_memory(item, scope=existing.scope, settings=settings,
                         created=existing.create_time.ToDatetime(tzinfo=UTC), source=source)
    return node_fields(again, INPUT_PROPERTIES) == node_fields(existing, INPUT_PROPERTIES)


#: Version prefix of :func:`request_fingerprint`: a rule change gets a new prefix, and a
#: fingerprint of another version never matches.
FINGERPRINT_VERSION = "v1"


def input_form(item: ingest_service_pb2.MemoryInput, field_prefix: str = "") -> dict[str, Any]:
    """The canonical form of one MemoryInput for :func:`request_fingerprint`: every field a
    store keeps, as it keeps it — content exactly (not its hash), tags as
    :func:`validate_tags` leaves them, importance and confidence (None when unset), the
    type's canonical name (None when unset: classified), the metadata object (``{}`` when
    none; Struct or ``metadata_json`` alike, integral numbers as ints) without
    ``import_source`` — the provenance an import writes, which a later export of the same
    source changes (an AutoMem ``last_accessed``) while the import's key stays the same
    (automem/cli/transfer_formats.py ``IMPORT_KEY``, docs/import-export.md) —, the three times at
    millisecond precision (ISO 8601, None when unset), review and the caller's embedding.
    Raises InvalidArgument naming ``field_prefix`` + the field, as :func:`build_memory` does."""
    p = field_prefix
    times = {}
    for name, label in FIELD_LABELS.items():
        value = input_time(item, name, p)
        times[label] = value.isoformat() if value is not None else None
    return {
        "content": item.content,
        "tags": validate_tags(list(item.tags), f"{p}tags"),
        "importance": item.importance if item.HasField("importance") else None,
        "confidence": item.confidence if item.HasField("confidence") else None,
        "type": type_name(parse_type(item.type, field=f"{p}type")) if item.type.strip() else None,
        "metadata": {k: v for k, v in integral_numbers(parse_metadata(item, f"{p}metadata") or {}).items()
                     if k != "import_source"},
        **times,
        "require_review": item.require_review,
        "embedding": [float(v) for v in item.embedding],
    }


def request_fingerprint(operation: str, items: list[ingest_service_pb2.MemoryInput],
                        field_prefixes: list[str] | None = None, **extra: Any) -> str:
    """The fingerprint an idempotency key is stored with: ``v1:<operation>:`` + the sha256 of
    the canonical JSON (sorted keys, ASCII, no spaces) of ``operation`` (``create``,
    ``batch``, ``supersede``), each item's :func:`input_form` and ``extra`` (the supersede's
    target id, relation type and reason). Two requests with one fingerprint store the same
    thing; a key reused with another fingerprint is a different request
    (automem/ingest/servicer.py). Raises InvalidArgument naming the bad field
    (``field_prefixes[i]`` + field)."""
    prefixes = field_prefixes or [""] * len(items)
    body = {"operation": operation, "items": [input_form(item, prefix) for item, prefix in zip(items, prefixes,
                                                                                              strict=True)],
            **extra}
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return f"{FINGERPRINT_VERSION}:{operation}:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def fingerprint_operation(fingerprint: str) -> str:
    """The operation of a :func:`request_fingerprint` (``create``...); "" when unknown."""
    parts = fingerprint.split(":")
    return parts[1] if len(parts) == 3 else ""


def check_mask_fields_set(item: ingest_service_pb2.MemoryInput, paths: list[str]) -> None:
    """InvalidArgument naming the first field of ``paths`` (update-mask paths) that ``item``
    does not set: ``importance``, ``confidence``, ``type`` and ``metadata`` (none of the
    Struct, ``metadata_json`` or ``metadata_set``) have no "unset" value to write — 0.0 was
    written for an importance left out — as the REST gateway refuses their JSON null
    (automem/gateway/usecases.py ``update_input``). ``content``, ``timestamp`` and ``t_valid``
    are refused when empty where they are read; empty ``tags`` clear the tags and an unset
    ``t_invalid`` opens the window, on purpose."""
    given = {
        "importance": item.HasField("importance"),
        "confidence": item.HasField("confidence"),
        "type": bool(item.type.strip()),
        "metadata": bool(item.metadata_json) or item.HasField("metadata") or item.metadata_set,
    }
    for path in paths:
        if given.get(path) is False:
            raise InvalidArgument(f"{path}: in update_mask but not set", field=path)


def apply_update(
    current: Memory, item: ingest_service_pb2.MemoryInput, paths: list[str], settings: Settings,
    updated: datetime, add_tags: list[str] | None = None,
) -> tuple[Memory, bool]:
    """The updated copy of ``current`` and whether its content changed.

    ``paths`` are the field-mask paths (AutoMem PATCH names). Metadata merges key by key
    (AutoMem's PATCH); tags replace; ``add_tags`` are merged into the tags. ``update_time``
    always moves and ``version`` goes up by one. Raises InvalidArgument naming the field.
    """
    unknown = [p for p in paths if p not in UPDATABLE_PATHS]
    if unknown:
        raise InvalidArgument(f"update_mask: unknown field(s) {', '.join(unknown)}", field="update_mask")
    check_mask_fields_set(item, paths)
    memory = Memory()
    memory.CopyFrom(current)
    changed = False
    if "content" in paths:
        content = validate_content(item.content, settings)
        changed = content != current.content
        memory.content = content
        memory.content_hash = content_hash(content)
        if changed:
            memory.embedding_status = memory_pb2.EMBEDDING_STATUS_PENDING
            memory.enrichment_status = memory_pb2.ENRICHMENT_STATUS_PENDING
    if "tags" in paths:
        del memory.tags[:]
        memory.tags.extend(validate_tags(list(item.tags)))
    if add_tags:
        merged = list(memory.tags) + [t for t in validate_tags(add_tags, "add_tags") if t not in memory.tags]
        del memory.tags[:]
        memory.tags.extend(merged)
    if "importance" in paths:
        memory.importance = _unit_interval(item.importance, "importance")
    if "confidence" in paths:
        memory.confidence = _unit_interval(item.confidence, "confidence")
    if "type" in paths:
        memory.type = parse_type(item.type)
    if "metadata" in paths:
        patch = parse_metadata(item) or {}
        merged_meta = metadata_dict(current)
        merged_meta.update(patch)
        # The merged object obeys the same limit as a stored one.
        _check_metadata_size(json.dumps(merged_meta, ensure_ascii=False), "metadata")
        set_metadata(memory, merged_meta)
    for name in ("event_time", "valid_from"):
        if name in paths:
            value = input_time(item, name)
            if value is None:
                raise InvalidArgument(f"{name}: must not be empty", field=name)
            getattr(memory, name).CopyFrom(ts(value))
    if "valid_to" in paths:
        end = input_time(item, "valid_to")
        if end is not None:
            memory.valid_to.CopyFrom(ts(end))
        else:
            memory.ClearField("valid_to")
    if memory.HasField("valid_to") and memory.valid_to.ToDatetime() <= memory.valid_from.ToDatetime():
        raise InvalidArgument("valid_to: must be after valid_from", field="valid_to")
    # update_time always moves forward, even within the same millisecond.
    previous = current.update_time.ToDatetime(tzinfo=UTC) if current.HasField("update_time") else None
    if previous is not None and updated <= previous:
        updated = previous + timedelta(milliseconds=1)
    memory.update_time.CopyFrom(ts(updated))
    memory.version = current.version + 1
    return memory, changed


def mark_payload_behind(before: Memory, after: Memory) -> bool:
    """Whether ``after`` (a new version of ``before``, copied from it) changes a field the
    vector search filters on (tags, event time, state; automem/common/payload.py
    ``filtered_fields_changed``) and is not DELETED or REJECTED (those lose their point):
    then the write must set PAYLOAD_PENDING where the node's point holds its content
    (automem/graph/memories.py ``PAYLOAD_BEHIND``, decided in the write), and
    ``after.embedding_status`` says so already when it read DONE or PAYLOAD_PENDING. Recall then finds the memory through the
    graph until enrichment rewrites the payload and sets DONE again (automem/recall/servicer.py
    ``_lexical``, automem/enrich/consumer.py ``_apply``); without it a tag added by an edit,
    an event time moved into a window or an approval stayed unseen by filtered recall until
    then."""
    if after.state in GONE_STATES or not filtered_fields_changed(before, after):
        return False
    if after.embedding_status in (memory_pb2.EMBEDDING_STATUS_DONE, memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING):
        after.embedding_status = memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING
    return True
