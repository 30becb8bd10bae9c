"""The memory file formats of ``automem import`` / ``automem export`` (automem/cli/transfer.py):
pure conversion and validation, no I/O. The mapping of each format is tabled in
docs/import-export.md.

* ``native`` — this service's own JSON Lines (:data:`NATIVE_FORMAT`): a ``{"header": {...}}``
  line, then one ``{"memory": <Memory>}`` line per memory and one ``{"relation": <Relation>}``
  line per edge, each message as protobuf JSON with the proto field names
  (protos/automem/v1/memory.proto; ``json_format``), then ``{"end": {"memories": N,
  "relations": M}}`` counting them. A file whose header says ``"end": true`` (every export
  since the end record came) must end with it and hold what it counts: a file cut short at a
  line boundary is refused, not imported in part.
* ``automem`` — AutoMem's FalkorDB backup (verygoodplugins/automem ``automem/backup.py``
  ``export_falkordb_artifact``, scripts/backup_automem.py): the document ``{"timestamp",
  "graph_name", "nodes": [{"id", "labels", "properties"}], "relationships": [{"source_id",
  "type", "target_id", "properties"}], "stats"}`` (gzipped as ``falkordb_*.json.gz``), or
  the same node and relationship objects one per line; Qdrant backup points (``{"id",
  "vector", "payload"}``, its ``qdrant_*.json.gz``) are read as memories too.
* ``mem0`` — mem0's ``get_all`` output (mem0ai/mem0 ``mem0/memory/main.py``, ``MemoryItem``):
  ``{"results": [{"id", "memory", "hash", "metadata", "created_at", "updated_at",
  "user_id", "agent_id", "run_id", "actor_id", "role", ...}]}``, a bare list of them, or
  one item per line.

Reading: :func:`read_records` splits a file into records (JSON Lines, or one JSON document);
:func:`parse` maps them to :class:`MemoryRecord` / :class:`RelationRecord` and
:func:`validate` checks every memory with the write path's own rules
(automem/ingest/logic.py ``build_memory``), so a file with a bad record is refused whole
before anything is written. Errors read ``line N: <field>: <reason>`` (``record N`` inside a
JSON document).
"""

from __future__ import annotations

import contextlib
import graphlib
import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format, timestamp_pb2

from automem.common.errors import InvalidArgument, rest_field
from automem.common.jsontext import (
    InexactNumber,
    NestedTooDeeply,
    RepeatedKeys,
    exact_float,
    json_lines,
    key_path,
    loads,
    lone_surrogate,
    object_pairs,
    refusals,
)
from automem.common.lifecycle import SUPERSEDING_RELATIONS
from automem.common.model import (
    AUTHORABLE_RELATIONS,
    metadata_dict,
    parse_time,
    parse_type,
    relation_type_name,
    ts,
    type_name,
)
from automem.common.settings import Settings
from automem.v1 import ingest_service_pb2, memory_pb2

FORMATS = ("native", "automem", "mem0")
#: The header's ``format`` of the native format.
NATIVE_FORMAT = "automem-jsonl/1"
#: The metadata key that holds what a foreign record carries and a memory has no field for.
IMPORT_KEY = "import_source"
#: States a native memory line may carry; DELETED and REJECTED memories are not exported.
IMPORTABLE_STATES = ("ACTIVE", "PENDING_REVIEW", "SUPERSEDED", "ARCHIVED")
#: AutoMem node properties derived from others (recomputed here, so not kept).
AUTOMEM_DERIVED = ("tag_prefixes",)


@dataclass
class MemoryRecord:
    """One memory to store: where it came from (``where``: ``line N`` / ``record N``), its
    ``ref`` (the source's id, which relations name), the input, the state it had and the
    idempotency key that makes a second import of it store nothing."""

    where: str
    ref: str
    item: ingest_service_pb2.MemoryInput
    state: str = "ACTIVE"
    key: str = ""
    #: A superseded native memory whose window SupersedeMemory closed: the window end it had
    #: then (``item`` carries the window from before, its ``prior_valid_to``), put back when
    #: it is not superseded the same way again (:func:`parse`).
    closed_to: timestamp_pb2.Timestamp | None = None


@dataclass
class RelationRecord:
    """One edge between two memories of the file, by their refs."""

    where: str
    source: str
    target: str
    type: str
    strength: float = 0.5
    reason: str = ""
    #: Implied by a superseded memory's ``superseded_by`` (kept only when the file has no edge for it).
    implied: bool = False
    #: A supersession to redo with SupersedeMemory, which creates the target as the source's
    #: replacement and closes the source's window at the target's start, as it did the first
    #: time (set by :func:`parse`); otherwise CreateRelation marks the source superseded.
    via_supersede: bool = False


@dataclass
class Parsed:
    """What a file holds: memories, relations, records left out on purpose (reason → count)
    and errors (``<where>: <field>: <reason>``)."""

    memories: list[MemoryRecord] = field(default_factory=list)
    relations: list[RelationRecord] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: Ids of the file's memories left out on purpose (a state not imported, a MetaPattern):
    #: a relation that names one is left out with them, not an error.
    left_out: set[str] = field(default_factory=set)
    #: The file's names of MemoryInput's fields (:data:`FIELD_NAMES`), which
    #: :meth:`file_message` gives for the proto names ``build_memory`` and the service give.
    field_names: dict[str, str] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def file_message(self, message: str) -> str:
        """A write-path error ``message`` about one memory (:func:`validate`; the service's
        CreateMemory / SupersedeMemory refusal, whose ``replacement.`` prefix is dropped)
        naming the file's fields: the leading field by :attr:`field_names` (``importance`` ->
        ``properties.importance``, ``tags[2]`` -> ``properties.tags[2]``, mem0's ``content``
        -> ``memory``), and each time field in it (``valid_to: must be after valid_from`` ->
        ``properties.t_invalid: must be after properties.t_valid``). Other messages as they are."""
        message = message.removeprefix("replacement.")
        name, colon, rest = message.partition(": ")
        if not colon or not _PROTO_PATH.fullmatch(name):
            return message
        names = self.field_names
        return rest_field(name, names) + colon + _TIME_FIELD.sub(lambda m: names.get(m.group(1), m.group(1)), rest)


# --- reading ---------------------------------------------------------------------------


def read_records(data: bytes) -> tuple[list[tuple[str, Any]], list[str]]:
    """Split a file into ``(where, value)`` records and errors.

    ``data`` may be gzipped (AutoMem's ``*.json.gz``). JSON Lines: one value per non-blank
    line, ``where`` = ``line N``. When a line is not JSON but the whole text is one JSON
    document (a pretty-printed backup), the document is the one record (``record 1``; the
    format parsers expand its lists). Errors: ``line N: not JSON (<reason>)``; UTF-8 is
    required; an object that gives a key twice, or a number no 64-bit float holds as written,
    is refused: ``line N: <path>: the key is given more than once in one object ...`` /
    ``line N: <path>: 1e-400 cannot be held exactly by a 64-bit float ...`` (``json.loads``
    would keep the last value, or 0.0, silently; the path is from the line's top, e.g.
    ``properties.content`` or ``results[0].memory``). A file with no record at all is no
    error here (:func:`parse` refuses it).
    """
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            return [], [f"file: not a readable gzip file ({exc})"]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [], [f"file: not UTF-8 text (byte {exc.start})"]
    records: list[tuple[str, Any]] = []
    errors: list[str] = []
    not_json = False
    for number, line in enumerate(json_lines(text), 1):
        if not line.strip():
            continue
        try:
            value, twice = _loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"line {number}: not JSON ({exc.msg}, column {exc.colno})")
            not_json = True
            continue
        except NestedTooDeeply as exc:
            errors.append(f"line {number}: {exc}")
            continue
        except ValueError as exc:  # an integer past sys.get_int_max_str_digits()
            errors.append(f"line {number}: not JSON ({exc})")
            not_json = True
            continue
        if twice:
            errors.extend(f"line {number}: {message}" for message in _first_few(refused_values(value)))
        records.append((f"line {number}", value))
    if not_json and text.lstrip()[:1] in ("{", "["):
        try:
            document, twice = _loads(text)
        except ValueError:
            pass
        else:
            return [("record 1", document)], [f"record 1: {message}" for message in
                                              _first_few(refused_values(document) if twice else [])]
    return records, errors


def _loads(text: str) -> tuple[Any, bool]:
    """``json.loads`` of ``text`` marking every object that gives a key twice and every number
    no double holds as written (automem/common/jsontext.py ``object_pairs``, ``exact_float``;
    :func:`refused_values` names them), and whether there was one (the walk is then worth it).
    ValueError as ``json.loads``; NestedTooDeeply (a ValueError) for arrays and objects nested
    too deeply to read."""
    marked = False

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal marked
        obj = object_pairs(pairs)
        marked = marked or isinstance(obj, RepeatedKeys)
        return obj

    def float_hook(number: str) -> float | InexactNumber:
        nonlocal marked
        value = exact_float(number)
        marked = marked or isinstance(value, InexactNumber)
        return value

    value = loads(text, object_pairs_hook=pairs_hook, parse_float=float_hook)
    return value, marked


#: At most this many refused keys and numbers are reported per record (a line repeating
#: thousands of keys is one bad line, not thousands of error lines).
REFUSED_PER_RECORD = 5


def _first_few(messages: list[str]) -> list[str]:
    """The first :data:`REFUSED_PER_RECORD` of ``messages``, then how many more there were."""
    if len(messages) <= REFUSED_PER_RECORD:
        return messages
    more = len(messages) - REFUSED_PER_RECORD
    return [*messages[:REFUSED_PER_RECORD], f"... and {more} more key(s) or number(s) refused in this record"]


def refused_values(value: Any, path: str = "") -> list[str]:
    """``<path>: <reason>`` for each key given twice in an object of ``value`` and each number
    no 64-bit float holds as written (``1e-400`` would import as 0.0), read with
    :func:`_loads`, in document order (automem/common/jsontext.py ``refusals``); ``path`` is
    the path of ``value`` itself (``""`` at the top): ``properties.content``,
    ``results[0].memory``, ``metadata.x``."""
    return [f"{where}: {reason}" for where, reason in refusals(value, path)]


def _expand(records: list[tuple[str, Any]], keys: tuple[str, ...]) -> list[tuple[str, Any]]:
    """Records with the lists of a container document (``{"results": [...]}``, ``[...]``)
    spliced in, each item named ``<where>: <key>[i]``."""
    out: list[tuple[str, Any]] = []
    for where, value in records:
        if isinstance(value, list):
            out.extend((f"{where}: [{i}]", v) for i, v in enumerate(value))
            continue
        if isinstance(value, dict):
            lists = [k for k in keys if isinstance(value.get(k), list)]
            if lists:
                for k in lists:
                    out.extend((f"{where}: {k}[{i}]", v) for i, v in enumerate(value[k]))
                continue
        out.append((where, value))
    return out


def idempotency_key(fmt: str, source_id: str, item: ingest_service_pb2.MemoryInput) -> str:
    """The key a record is stored with: ``import:<format>:`` + sha256 of its source id and of
    what it stores (the MemoryInput: content, tags, type, importance, confidence, metadata,
    times, review), canonical JSON, leaving out the metadata's ``import_source`` (which holds
    the source's bookkeeping: AutoMem's ``last_accessed``, mem0's ``updated_at``...). So the
    same record imported again — from the same file or a later export of an unchanged source —
    stores nothing, and a record whose stored fields changed is a new memory."""
    body = json_format.MessageToDict(item, preserving_proto_field_name=True)
    metadata = json.loads(body.pop("metadata_json", "{}") or "{}")
    metadata.pop(IMPORT_KEY, None)
    body["metadata"] = metadata
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    return f"import:{fmt}:" + hashlib.sha256(f"{source_id}\x1f{text}".encode()).hexdigest()


def _set_time(item: ingest_service_pb2.MemoryInput, name: str, raw: Any, label: str) -> None:
    """Set Timestamp ``name`` from an ISO 8601 text or epoch seconds (None/"" = unset)."""
    if raw is None or raw == "":
        return
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise InvalidArgument(f"{label}: must be an ISO 8601 time, got {type(raw).__name__}", field=label)
    if isinstance(raw, str):
        value = parse_time(raw, field=label)
    else:
        try:
            value = datetime.fromtimestamp(float(raw), UTC)
        except (OverflowError, ValueError, OSError):
            raise InvalidArgument(f"{label}: {raw} is outside the years 1–9999", field=label) from None
    getattr(item, name).CopyFrom(ts(value))


def _metadata(item: ingest_service_pb2.MemoryInput, value: dict[str, Any]) -> None:
    item.metadata_json = json.dumps(value, ensure_ascii=False, sort_keys=True)
    item.metadata_set = True


def _tags(raw: Any, label: str) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [t for t in (s.strip() for s in raw.split(",")) if t]
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise InvalidArgument(f"{label}: must be a list of strings", field=label)
    return list(raw)


def _unit(raw: Any, label: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise InvalidArgument(f"{label}: must be a number between 0 and 1", field=label)
    return float(raw)


def _object(raw: Any, label: str) -> dict[str, Any]:
    """A metadata object from a dict, a JSON text of one (AutoMem stores it as text), or None.
    InvalidArgument naming ``label`` when it is none of them, or a text that is not JSON or
    gives a key twice (``<label>.<key path>: the key is given more than once ...``)."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw, twice = _loads(raw)
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise InvalidArgument(f"{label}: not valid JSON ({reason})", field=label) from None
        if twice:
            raise InvalidArgument(f"{label}.{refused_values(raw)[0]}", field=label)
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{label}: must be a JSON object, got {type(raw).__name__}", field=label)
    return raw


#: A string that holds a UTF-16 surrogate of its own (``"\\ud800"`` in the file): no UTF-8 form.
NOT_UNICODE = "text must be valid Unicode: a lone surrogate (e.g. \\ud800) is not allowed"


def _shape(raw: Any) -> str:
    """The JSON name of ``raw``'s kind, for errors: object, list, string, number, boolean, null."""
    if raw is None:
        return "null"
    if isinstance(raw, bool):
        return "boolean"
    for kind, name in ((dict, "object"), (list, "list"), (str, "string"), (int | float, "number")):
        if isinstance(raw, kind):
            return name
    return type(raw).__name__


def _unicode_only(value: Any, path: str = "") -> None:
    """InvalidArgument naming the path (``memory``, ``metadata.k``, ``properties.tags[1]``) of
    the first string or key of ``value`` that holds a lone surrogate (a ``\\ud800`` escape read
    by ``json.loads``): no store holds it, and the mapping crashed on it (UnicodeEncodeError, a
    traceback that stopped the import). A key is named escaped (``metadata["\\ud800"]``)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # the usual case: one pass in C
    except UnicodeEncodeError:
        pass
    else:
        return
    if isinstance(value, str) and lone_surrogate(value):
        raise InvalidArgument(f"{path or 'record'}: {NOT_UNICODE}", field=path or "record")
    if isinstance(value, dict):
        for key, item in value.items():
            if lone_surrogate(key):
                where = f"{path}[{json.dumps(key)}]"
                raise InvalidArgument(f"{where}: key: {NOT_UNICODE}", field=where)
            _unicode_only(item, key_path(path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _unicode_only(item, f"{path}[{index}]")


def _with_source(metadata: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` plus ``import_source`` (:data:`IMPORT_KEY`). A record imported before
    (exported from here to AutoMem or mem0, then imported again) already has one: it is kept
    under the new one's ``previous``."""
    if IMPORT_KEY in metadata:
        source = {**source, "previous": metadata[IMPORT_KEY]}
    return {**metadata, IMPORT_KEY: source}


# --- native ----------------------------------------------------------------------------


def _native(records: list[tuple[str, Any]], out: Parsed) -> None:
    expects_end, end, seen = False, None, {"header": 0, "memory": 0, "relation": 0}
    header: str | None = None
    for where, value in records:
        try:
            if end is not None:
                raise InvalidArgument(f"record: comes after the end record ({end[0]})", field="record")
            if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in (
                    "header", "memory", "relation", "end"):
                raise InvalidArgument("record: must be one of {\"header\": ...}, {\"memory\": ...}, "
                                      "{\"relation\": ...}, {\"end\": ...}", field="record")
            kind, body = next(iter(value.items()))
            if kind == "header":
                if header is not None:  # two files joined: their headers (and end records) disagree
                    raise InvalidArgument(f"header: a second header line (the first is {header}); one file, "
                                          "one header", field="header")
                header = where
                if not isinstance(body, dict) or body.get("format") != NATIVE_FORMAT:
                    raise InvalidArgument(f"header.format: must be {NATIVE_FORMAT!r}", field="header.format")
                expects_end = body.get("end") is True
            elif kind == "end":
                end = (where, body)
                continue
            elif kind == "memory":
                _native_memory(where, body, out)
            else:
                _native_relation(where, body, out)
            seen[kind] += 1
        except InvalidArgument as exc:
            out.errors.append(f"{where}: {exc.message}")
    if end is not None:
        where, body = end
        for kind, name in (("memory", "memories"), ("relation", "relations")):
            counted = body.get(name) if isinstance(body, dict) else None
            if not isinstance(counted, int) or isinstance(counted, bool) or counted != seen[kind]:
                out.errors.append(f"{where}: end.{name}: the file holds {seen[kind]} {kind} lines, its end "
                                  f"record counts {counted!r} (lines lost or added?)")
    elif expects_end:
        last = records[-1][0] if records else "line 1"
        out.errors.append(f"{last}: end: the file stops before its end record (its header promises one): "
                          "cut short? nothing was imported")


def _parse_message(body: Any, message: Any, label: str) -> Any:
    if not isinstance(body, dict):
        raise InvalidArgument(f"{label}: must be a JSON object", field=label)
    try:
        return json_format.ParseDict(body, message)
    except json_format.ParseError as exc:
        raise InvalidArgument(f"{label}: {exc}", field=label) from None


def _native_memory(where: str, body: Any, out: Parsed) -> None:
    memory = _parse_message(body, memory_pb2.Memory(), "memory")
    if not memory.id:
        raise InvalidArgument("memory.id: required (relations and re-imports name memories by it)",
                              field="memory.id")
    state = memory_pb2.MemoryState.Name(memory.state).removeprefix("MEMORY_STATE_")
    if state == "UNSPECIFIED":
        state = "ACTIVE"
    if state not in IMPORTABLE_STATES:
        out.skip(f"{state.lower()} memories (not exported, not imported)")
        out.left_out.add(memory.id)
        return
    if memory.type == memory_pb2.MEMORY_TYPE_META_PATTERN:
        # An export of a clustered scope holds the patterns' PART_OF edges too: they were
        # refused as relations to "no memory in this file" and the whole import with them.
        out.skip("consolidation summaries (MetaPattern; consolidation makes them again)")
        out.left_out.add(memory.id)
        return
    item = ingest_service_pb2.MemoryInput(content=memory.content, tags=list(memory.tags),
                                          type=type_name(memory.type), importance=memory.importance,
                                          confidence=memory.confidence,
                                          require_review=state == "PENDING_REVIEW")
    _metadata(item, metadata_dict(memory))
    for name in ("event_time", "valid_from", "valid_to"):
        if memory.HasField(name):
            getattr(item, name).CopyFrom(getattr(memory, name))
    record = MemoryRecord(where, memory.id, item, state, idempotency_key("native", memory.id, item))
    closed = (state == "SUPERSEDED" and memory.HasField("superseded_time") and memory.HasField("valid_to")
              and memory.prior_valid_to != memory.valid_to)
    if closed:  # SupersedeMemory closed the window: store the window from before, it closes it again
        record.closed_to = timestamp_pb2.Timestamp()
        record.closed_to.CopyFrom(memory.valid_to)
        item.ClearField("valid_to")
        if memory.HasField("prior_valid_to"):
            item.valid_to.CopyFrom(memory.prior_valid_to)
    out.memories.append(record)
    if state == "SUPERSEDED" and memory.superseded_by:
        # A chain is rebuilt from its INVALIDATED_BY / EVOLVED_INTO edge; a file without
        # that edge gets INVALIDATED_BY (parse() drops it when the file has the edge).
        out.relations.append(RelationRecord(where, memory.id, memory.superseded_by, "INVALIDATED_BY",
                                            1.0, memory.state_reason, implied=True))


def _native_relation(where: str, body: Any, out: Parsed) -> None:
    relation = _parse_message(body, memory_pb2.Relation(), "relation")
    name = relation_type_name(relation.type)
    if name in ("UNSPECIFIED",):
        raise InvalidArgument("relation.type: required", field="relation.type")
    if name not in AUTHORABLE_RELATIONS:
        out.skip(f"system relations ({name}: enrichment makes them again)")
        return
    out.relations.append(RelationRecord(where, relation.source_id, relation.target_id, name,
                                        relation.strength, relation.reason))


# --- AutoMem ---------------------------------------------------------------------------

#: AutoMem Memory node properties with a field here (docs/import-export.md).
_AUTOMEM_FIELDS = ("id", "content", "tags", "importance", "confidence", "type", "metadata", "timestamp",
                   "t_valid", "t_invalid")


def _automem(records: list[tuple[str, Any]], out: Parsed) -> None:
    memory_refs: set[str] = set()
    other_nodes: set[str] = set()
    edges: list[tuple[str, dict[str, Any]]] = []
    for where, value in _expand(records, ("nodes", "relationships", "points")):
        try:
            if not isinstance(value, dict):
                raise InvalidArgument("record: must be a JSON object", field="record")
            _unicode_only(value)
            if "labels" in value and "properties" in value:
                labels = value.get("labels") or []
                if isinstance(labels, str):  # one label: the exact name, not a substring of it
                    labels = [labels]
                if not isinstance(labels, list):
                    raise InvalidArgument("labels: must be a list of strings", field="labels")
                ref = _automem_id(value.get("id"), "id")
                if "Memory" not in labels:
                    other_nodes.add(ref)
                    out.skip("AutoMem nodes other than Memory (entities: enrichment finds them again)")
                    continue
                _automem_memory(where, ref, value["properties"], out)
                memory_refs.add(ref)
            elif "payload" in value and "id" in value:  # a Qdrant backup point
                ref = _automem_id(value["id"], "id")
                _automem_memory(where, ref, value["payload"], out, point_id=ref)
                memory_refs.add(ref)
            elif "source_id" in value and "target_id" in value and "type" in value:
                edges.append((where, value))
            elif "graph_name" in value or "collection_name" in value:
                continue  # a document's own fields (timestamp, stats): nothing to store
            else:
                raise InvalidArgument("record: neither an AutoMem node ({id, labels, properties}), a "
                                      "relationship ({source_id, type, target_id, properties}) nor a Qdrant "
                                      "point ({id, payload})", field="record")
        except InvalidArgument as exc:
            out.errors.append(f"{where}: {exc.message}")
    for where, edge in edges:
        ends: list[str] = []
        for end in ("source_id", "target_id"):
            try:
                ends.append(_automem_id(edge[end], f"relationship.{end}"))
            except InvalidArgument as exc:
                out.errors.append(f"{where}: {exc.message}")
        if len(ends) < 2:
            continue
        source, target = ends
        kind = str(edge["type"]).upper()
        if source in other_nodes or target in other_nodes:
            out.skip("AutoMem relationships to nodes other than Memory")
            continue
        if kind not in AUTHORABLE_RELATIONS:
            out.skip(f"AutoMem relationships of system types ({kind}: enrichment makes them again)")
            continue
        props = edge.get("properties") or {}
        try:
            if not isinstance(props, dict):
                raise InvalidArgument("properties: must be a JSON object", field="properties")
            strength = _unit(props.get("strength", 0.5), "properties.strength")
            reason = props.get("reason") or ""
            if not isinstance(reason, str):  # an object was stored as its Python repr
                raise InvalidArgument("properties.reason: must be a string", field="properties.reason")
        except InvalidArgument as exc:
            out.errors.append(f"{where}: {exc.message}")
            continue
        out.relations.append(RelationRecord(where, source, target, kind, 0.5 if strength is None else strength,
                                            reason))


def _automem_memory(where: str, ref: str, props: Any, out: Parsed, point_id: str | None = None) -> None:
    if not isinstance(props, dict):
        raise InvalidArgument("properties: must be a JSON object", field="properties")
    content = props.get("content")
    if not isinstance(content, str):
        raise InvalidArgument("properties.content: required text", field="properties.content")
    item = ingest_service_pb2.MemoryInput(content=content, tags=_tags(props.get("tags"), "properties.tags"))
    importance = _unit(props.get("importance"), "properties.importance")
    if importance is not None:
        item.importance = importance
    confidence = _unit(props.get("confidence"), "properties.confidence")
    if confidence is not None:
        item.confidence = confidence
    source: dict[str, Any] = {"format": "automem"}
    # A point's id is the memory's.
    source_id = _automem_id(props["id"], "properties.id") if props.get("id") is not None else point_id
    if source_id is not None:
        source["id"] = source_id
    raw_type = props.get("type")
    if raw_type:
        with contextlib.suppress(InvalidArgument):  # a type unknown here is classified
            item.type = type_name(parse_type(str(raw_type)))
        if item.type != raw_type:  # unknown, or a legacy name mapped ("Memory" is Context): kept
            source["type"] = raw_type
    _set_time(item, "event_time", props.get("timestamp"), "properties.timestamp")
    _set_time(item, "valid_from", props.get("t_valid"), "properties.t_valid")
    _set_time(item, "valid_to", props.get("t_invalid"), "properties.t_invalid")
    extra = {k: v for k, v in props.items()
             if k not in _AUTOMEM_FIELDS and k not in AUTOMEM_DERIVED and v is not None}
    if extra:
        source["fields"] = extra
    metadata = _object(props.get("metadata"), "properties.metadata")
    _metadata(item, _with_source(metadata, source))
    state = "ARCHIVED" if props.get("archived") is True else "ACTIVE"
    out.memories.append(MemoryRecord(where, ref, item, state,
                                     idempotency_key("automem", str(source_id if source_id is not None else ref), item)))


def _automem_id(raw: Any, label: str) -> str:
    """An AutoMem record's id (a node's or a point's ``id``, ``properties.id``, a
    relationship's ``source_id`` / ``target_id``) as text: a string or an integer, as
    :func:`_mem0_id` takes. InvalidArgument naming ``label`` when it is absent or null
    (``missing``) or of another kind (an object or a list was imported under its Python
    repr, ``True`` as ``'True'``; ``1.0`` and ``1`` named different nodes)."""
    if raw is None:
        raise InvalidArgument(f"{label}: missing", field=label)
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise InvalidArgument(f"{label}: must be a string or an integer, got {_shape(raw)}", field=label)
    return str(raw)


# --- mem0 ------------------------------------------------------------------------------

#: mem0 MemoryItem fields with a field here (docs/import-export.md).
_MEM0_FIELDS = ("memory", "metadata", "created_at", "categories", "expiration_date")


def _mem0(records: list[tuple[str, Any]], out: Parsed) -> None:
    """mem0 items: every record that is not one is an error naming its place and field (a
    ``relations`` or ``results`` of the wrong shape, an item without its text or with an id
    that is not a string or an integer, a lone surrogate anywhere), none dropped unseen."""
    items: list[tuple[str, Any]] = []
    for where, value in records:
        if isinstance(value, dict) and "relations" in value and "memory" not in value and "id" not in value:
            # Graph memory's entity triples (source, relationship, target): entities, not memories.
            relations = value["relations"]
            if not isinstance(relations, list):
                out.errors.append(f"{where}: relations: must be a list of mem0 graph relations "
                                  f"({{source, relationship, target}}), got {_shape(relations)}")
            else:
                for index, relation in enumerate(relations):
                    if isinstance(relation, dict):
                        out.skip("mem0 graph relations (entity triples: enrichment finds entities again)")
                    else:
                        out.errors.append(f"{where}: relations[{index}]: must be a JSON object (a mem0 graph "
                                          f"relation {{source, relationship, target}}), got {_shape(relation)}")
            if not any(k in value for k in ("results", "memories")):
                continue  # a get_all document's relations alone
        if isinstance(value, dict) and "memory" not in value and "id" not in value:
            bad = [k for k in ("results", "memories") if k in value and not isinstance(value[k], list)]
            if bad:  # {"results": "..."}: read as one item, it was "memory: required"
                out.errors.extend(f"{where}: {k}: must be a list of mem0 items, got {_shape(value[k])}" for k in bad)
                continue
        items.append((where, value))
    for where, value in _expand(items, ("results", "memories")):
        try:
            if not isinstance(value, dict):
                raise InvalidArgument(f"record: must be a JSON object (a mem0 item), got {_shape(value)}",
                                      field="record")
            _unicode_only(value)
            content = value.get("memory")
            if not isinstance(content, str):
                raise InvalidArgument("memory: required text (mem0's memory field)", field="memory")
            ref = _mem0_id(value.get("id"))
            item = ingest_service_pb2.MemoryInput(content=content, tags=_tags(value.get("categories"),
                                                                               "categories"))
            _set_time(item, "event_time", value.get("created_at"), "created_at")
            if item.HasField("event_time") and item.event_time.ToDatetime(tzinfo=UTC) > datetime.now(UTC):
                # Valid from then: a past one is read so already (a backdated store), a later
                # one is not (a store's timestamp does not move its start forward: README), so
                # a fact exported before it became valid would have been current at once. Set
                # for later times only, so a file imported before keeps its idempotency keys.
                item.valid_from.CopyFrom(item.event_time)
            _set_time(item, "valid_to", value.get("expiration_date"), "expiration_date")
            source = {"format": "mem0", **{k: v for k, v in value.items() if k not in _MEM0_FIELDS}}
            _metadata(item, _with_source(_object(value.get("metadata"), "metadata"), source))
            out.memories.append(MemoryRecord(where, ref, item, "ACTIVE", idempotency_key("mem0", ref, item)))
        except InvalidArgument as exc:
            out.errors.append(f"{where}: {exc.message}")


def _mem0_id(raw: Any) -> str:
    """A mem0 item's ``id`` as text: a string (mem0's are UUIDs) or an integer. InvalidArgument
    naming ``id`` when it is absent, null or empty, or of another kind (an object or a list was
    imported under its Python repr, ``True`` as ``'True'``; ``1.0`` and ``1`` named different
    records)."""
    if raw is None or raw == "":
        raise InvalidArgument("id: required (re-imports name records by it)", field="id")
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise InvalidArgument(f"id: must be a string or an integer, got {_shape(raw)}", field="id")
    return str(raw)


# --- parse and validate ----------------------------------------------------------------


#: Why an empty file is refused, by format: what a file of it begins with.
_EMPTY = {
    "native": f"file: empty: no header line ({{\"header\": {{\"format\": \"{NATIVE_FORMAT}\", ...}}}}) and no "
              "records; an export always begins with one",
    "automem": "file: empty: no AutoMem records (zero bytes or only blank lines); an AutoMem backup is a "
               "{\"nodes\": [...], \"relationships\": [...]} document or one node / relationship per line",
    "mem0": "file: empty: no mem0 records (zero bytes or only blank lines); mem0's get_all output is a "
            "{\"results\": [...]} document, a list, or one item per line",
}


#: Per format, its names of MemoryInput's fields where they are not the proto's (the native
#: format's are): AutoMem's properties (a Qdrant point's payload is read as them), mem0's
#: record fields. A path under one (``tags[2]``, ``metadata.a.b``) is renamed with it.
FIELD_NAMES = {"automem": {**{name: f"properties.{name}" for name in ("content", "tags", "importance", "confidence",
                                                                      "type", "metadata")},
                           "event_time": "properties.timestamp", "valid_from": "properties.t_valid",
                           "valid_to": "properties.t_invalid"},
               "mem0": {"content": "memory", "tags": "categories", "event_time": "created_at",
                        "valid_from": "created_at", "valid_to": "expiration_date"}}
_TIME_FIELD = re.compile(r"\b(event_time|valid_from|valid_to)\b")
#: A field path at the start of a service message (``tags[2]``, ``metadata.a.b[0]``).
_PROTO_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?(?:\.[A-Za-z0-9_]+(?:\[\d+\])?)*")


def parse(fmt: str, data: bytes) -> Parsed:
    """The memories and relations of a file in format ``fmt`` (:data:`FORMATS`), with every
    record that could not be read in ``errors`` (``<where>: <field>: <reason>``; nothing of
    a file with errors may be written).

    Errors besides each record's own (:func:`read_records`, the format's mapping):

    * ``file: empty: ...`` — the file (after gunzip) holds no JSON value at all: zero bytes
      or only blank lines, in every format (an export that never ran, a wrong path). A
      document that holds empty lists (``{"results": []}``) or a native header alone is a
      source with nothing in it, not an error.
    * ``<where>: id: ... was given already (<where>)`` — a second memory with an id seen.
    * a relation naming a memory not in the file (``<label>.source_id`` / ``.target_id``),
      relating a memory to itself, or with a strength outside 0..1;
    * ``<where>: <label>: <TYPE> 'a' → 'b' was given already (<where>) ...`` — a second
      relation of the same source, target and type whose strength or reason differ from
      the first (the service keeps one edge per pair and type: one would be lost). An exact
      repeat (same strength and reason) is no error: it is kept once and counted in
      ``skipped`` as a duplicate.
    * a cycle of supersessions.

    ``<label>`` is ``relation`` in the native format, ``relationship`` otherwise."""
    out = Parsed(field_names=FIELD_NAMES.get(fmt, {}))
    records, out.errors = read_records(data)
    if not records and not out.errors:  # a zero-byte file imported nothing and said "ok"
        out.errors.append(_EMPTY[fmt])
        return out
    {"native": _native, "automem": _automem, "mem0": _mem0}[fmt](records, out)
    seen: dict[str, str] = {}
    for record in out.memories:
        if record.ref in seen:
            out.errors.append(f"{record.where}: id: {record.ref!r} was given already ({seen[record.ref]})")
        seen.setdefault(record.ref, record.where)
    edges = {(r.source, r.target) for r in out.relations if r.type in SUPERSEDING_RELATIONS and not r.implied}
    given: dict[tuple[str, str, str], RelationRecord] = {}
    kept = []
    for relation in out.relations:
        if relation.implied:  # a native chain without its edge line
            if (relation.source, relation.target) in edges:
                continue
            if relation.target not in seen:
                out.skip("supersessions whose replacement is not in the file")
                continue
        label = "relation" if fmt == "native" else "relationship"
        key = (relation.source, relation.target, relation.type)
        if {relation.source, relation.target} & out.left_out:
            out.skip("relations of memories left out")
        elif relation.source not in seen:
            out.errors.append(f"{relation.where}: {label}.source_id: no memory {relation.source!r} in this file")
        elif relation.target not in seen:
            out.errors.append(f"{relation.where}: {label}.target_id: no memory {relation.target!r} in this file")
        elif relation.source == relation.target:
            out.errors.append(f"{relation.where}: {label}.target_id: a memory cannot be related to itself")
        elif not 0.0 <= relation.strength <= 1.0:
            out.errors.append(f"{relation.where}: {label}.strength: must be between 0 and 1")
        elif key in given:
            # The service keeps one edge per pair and type (it MERGEs): a second line was
            # counted as created, and one that differs replaced the first unseen.
            first = given[key]
            if (first.strength, first.reason) == (relation.strength, relation.reason):
                out.skip(f"duplicate {label}s (the same source, target, type, strength and reason as an "
                         "earlier line: imported once)")
            else:
                out.errors.append(
                    f"{relation.where}: {label}: {relation.type} {relation.source!r} → {relation.target!r} was given "
                    f"already ({first.where}) with strength {first.strength}, reason {first.reason!r}; this line "
                    f"has strength {relation.strength}, reason {relation.reason!r}: the service keeps one "
                    "relation per pair and type, give it once")
        else:
            given[key] = relation
            kept.append(relation)
    out.relations = kept
    _refuse_supersession_cycles(out, "relation" if fmt == "native" else "relationship")
    _refuse_broken_chains(out, "relation" if fmt == "native" else "relationship")
    _plan_supersessions(out)
    return out


def _refuse_broken_chains(out: Parsed, label: str) -> None:
    """Errors for supersessions the service refuses once the rest is written (so the import
    stored part of the file before): a memory replaced by two memories (it has one current
    successor), a replacement that is pending review (a pending memory replaces nothing
    until approved: automem/ingest/servicer.py ``_propose_supersede``), and a memory SUPERSEDED
    with no replacement in the file and an open window (it would come back as a current fact)."""
    states = {record.ref: record.state for record in out.memories}
    by_ref = {record.ref: record for record in out.memories}
    first: dict[str, RelationRecord] = {}
    for relation in out.relations:
        if relation.type not in SUPERSEDING_RELATIONS:
            continue
        if relation.source in first and first[relation.source].target != relation.target:
            out.errors.append(f"{relation.where}: {label}.source_id: {relation.source!r} is replaced by "
                              f"{first[relation.source].target!r} already ({first[relation.source].where}); a "
                              "memory has one replacement")
        first.setdefault(relation.source, relation)
        if states.get(relation.source) == "PENDING_REVIEW":
            out.errors.append(f"{relation.where}: {label}.source_id: {relation.source!r} is pending review; only a "
                              "reviewed memory can be superseded")
        source = by_ref.get(relation.source)
        if states.get(relation.target) == "PENDING_REVIEW" and not (
                source is not None and source.state == "ACTIVE" and source.closed_to is None):
            # From a current memory it is a supersede proposal (the import recreates it); from a
            # superseded one it says a memory waiting for review replaced it, which none does.
            out.errors.append(f"{relation.where}: {label}.target_id: {relation.target!r} is pending review; a memory "
                              "waiting for review replaces nothing until it is approved")
    for record in out.memories:
        # (A replacement left out of the file — deleted since — leaves a closed window: the
        # memory comes back expired, not current, and is no error.)
        if (record.state == "SUPERSEDED" and record.ref not in first and record.closed_to is None
                and not record.item.HasField("valid_to")):
            out.errors.append(f"{record.where}: state: SUPERSEDED, but the file names no memory replacing "
                              f"{record.ref!r} and its window is open; it would come back as a current fact")


def _refuse_supersession_cycles(out: Parsed, label: str) -> None:
    """An error for the first INVALIDATED_BY / EVOLVED_INTO cycle of the file (``a`` replaced
    by ``b``, ``b`` by ``a``): no order rebuilds it, and the service refuses the supersede
    that would close it after the rest was written (the import stored half of it before)."""
    chain = [r for r in out.relations if r.type in SUPERSEDING_RELATIONS]
    order = graphlib.TopologicalSorter()
    for relation in chain:
        order.add(relation.target, relation.source)
    try:
        order.prepare()
    except graphlib.CycleError as exc:
        nodes = exc.args[1][:-1]  # [a, b, c, a]: each the source of an edge to the next
        edges = set(zip(nodes, nodes[1:] + nodes[:1], strict=True))
        first = next(r for r in chain if (r.source, r.target) in edges)  # the cycle from its first line
        start = nodes.index(first.source)
        cycle, where = [*nodes[start:], *nodes[:start], first.source], first.where
        out.errors.append(f"{where}: {label}.target_id: the supersessions form a cycle "
                          f"({' → '.join(map(repr, cycle))}); a chain must end in a current memory")


def _plan_supersessions(out: Parsed) -> None:
    """Mark the supersessions to redo with SupersedeMemory: an INVALIDATED_BY / EVOLVED_INTO
    edge out of a memory whose window the first supersede closed (``closed_to``), the first
    such edge into its target (a memory is created once). The sources left over get their
    closed window back (CreateRelation will not close it)."""
    by_ref = {record.ref: record for record in out.memories}
    replaced: set[str] = set()
    for relation in out.relations:
        source = by_ref[relation.source]
        if relation.type in SUPERSEDING_RELATIONS and source.closed_to is not None and relation.target not in replaced:
            relation.via_supersede = True
            replaced.add(relation.target)
            source.closed_to = None
    for record in out.memories:
        if record.closed_to is not None:
            record.item.valid_to.CopyFrom(record.closed_to)
            record.closed_to = None


def validate(parsed: Parsed, settings: Settings) -> None:
    """Check every memory as the write path will (automem/ingest/logic.py ``build_memory``:
    content, tags, type, importance, confidence, metadata, times and window), adding
    ``<where>: <field>: <reason>`` to ``parsed.errors`` for each bad one, the field by the
    file's name of it (:meth:`Parsed.file_message`). The service checks again on write;
    ``settings`` (limits such as ``content_max_length``) should be the service's."""
    # Imported here: the classifier and embedding code behind it load on first use, not with `automem`.
    from automem.ingest.logic import build_memory

    created = datetime.now(UTC)
    for record in parsed.memories:
        try:
            build_memory(record.item, scope="import", settings=settings, created=created, source="import")
        except InvalidArgument as exc:
            parsed.errors.append(f"{record.where}: {parsed.file_message(exc.message)}")


def supersession_order(relations: list[RelationRecord]) -> list[RelationRecord]:
    """The relations with every INVALIDATED_BY / EVOLVED_INTO edge ``a → b`` placed before
    the edges out of ``b`` (a supersession needs an ACTIVE target, so a chain ``a → b → c``
    is written oldest first); the other relations first, in file order."""
    plain = [r for r in relations if r.type not in SUPERSEDING_RELATIONS]
    chain = [r for r in relations if r.type in SUPERSEDING_RELATIONS]
    by_source = {r.source: r for r in chain}
    targets = {r.target for r in chain}
    ordered: list[RelationRecord] = []
    placed: set[int] = set()
    for start in [r for r in chain if r.source not in targets] + chain:
        relation: RelationRecord | None = start
        while relation is not None and id(relation) not in placed:
            placed.add(id(relation))
            ordered.append(relation)
            relation = by_source.get(relation.target)
    return plain + ordered


# --- export ----------------------------------------------------------------------------


def native_memory_line(memory: memory_pb2.Memory) -> str:
    """One ``{"memory": ...}`` line (protobuf JSON, proto field names; metadata's integral
    numbers as JSON integers, as the caller gave them, not Struct's doubles)."""
    body = json_format.MessageToDict(memory, preserving_proto_field_name=True)
    if memory.HasField("metadata"):
        body["metadata"] = metadata_dict(memory)
    return json.dumps({"memory": body}, ensure_ascii=False, sort_keys=True)


def native_relation_line(relation: memory_pb2.Relation) -> str:
    """One ``{"relation": ...}`` line."""
    body = json_format.MessageToDict(relation, preserving_proto_field_name=True)
    return json.dumps({"relation": body}, ensure_ascii=False, sort_keys=True)


def native_header_line(scope: str, exported_at: datetime) -> str:
    """The first line: ``{"header": {"format", "scope", "export_time", "end": true}}`` (``end``:
    the file ends with :func:`native_end_line`)."""
    return json.dumps({"header": {"format": NATIVE_FORMAT, "scope": scope, "end": True,
                                  "export_time": exported_at.isoformat()}}, sort_keys=True)


def native_end_line(memories: int, relations: int) -> str:
    """The last line: ``{"end": {"memories": N, "relations": M}}``, the memory and relation
    lines the file holds (checked by :func:`parse`)."""
    return json.dumps({"end": {"memories": memories, "relations": relations}}, sort_keys=True)


def _iso(memory: Any, name: str) -> str | None:
    return memory.HasField(name) and getattr(memory, name).ToDatetime(tzinfo=UTC).isoformat() or None


def automem_node_line(ref: int, memory: memory_pb2.Memory) -> str:
    """An AutoMem backup node (``{"id", "labels": ["Memory"], "properties"}``) with AutoMem's
    property names; ``ref`` numbers the nodes for the relationship lines."""
    props = {"id": memory.id, "content": memory.content, "tags": list(memory.tags),
             "importance": memory.importance, "confidence": memory.confidence, "type": type_name(memory.type),
             "timestamp": _iso(memory, "event_time"), "t_valid": _iso(memory, "valid_from"),
             "t_invalid": _iso(memory, "valid_to"), "updated_at": _iso(memory, "update_time"),
             "last_accessed": _iso(memory, "last_access_time"),
             "metadata": json.dumps(metadata_dict(memory), ensure_ascii=False)}
    if memory.summary:
        props["summary"] = memory.summary
    if memory.state == memory_pb2.MEMORY_STATE_ARCHIVED:
        props["archived"] = True
    return json.dumps({"id": ref, "labels": ["Memory"], "properties": props}, ensure_ascii=False, sort_keys=True)


def automem_relationship_line(source: int, target: int, relation: memory_pb2.Relation) -> str:
    """An AutoMem backup relationship (``{"source_id", "type", "target_id", "properties"}``)."""
    props: dict[str, Any] = {"strength": relation.strength}
    if relation.reason:
        props["reason"] = relation.reason
    if relation.HasField("create_time"):
        props["created_at"] = relation.create_time.ToDatetime(tzinfo=UTC).isoformat()
    return json.dumps({"source_id": source, "type": relation_type_name(relation.type), "target_id": target,
                       "properties": props}, sort_keys=True)


def mem0_line(memory: memory_pb2.Memory) -> str:
    """A mem0 ``MemoryItem``: ``id``, ``memory``, ``hash`` (mem0's: md5 of the text),
    ``metadata``, ``categories`` (the tags), ``created_at`` (when the fact became valid, else
    the event time: mem0 has no other start of validity, and :func:`parse` reads it back as
    one), ``updated_at``, and ``expiration_date`` for a closed window."""
    start = _iso(memory, "valid_from") or _iso(memory, "event_time")
    item: dict[str, Any] = {"id": memory.id, "memory": memory.content,
                            "hash": hashlib.md5(memory.content.encode("utf-8"), usedforsecurity=False).hexdigest(),
                            "metadata": metadata_dict(memory), "categories": list(memory.tags),
                            "created_at": start, "updated_at": _iso(memory, "update_time")}
    if memory.HasField("valid_to"):
        item["expiration_date"] = _iso(memory, "valid_to")
    return json.dumps(item, ensure_ascii=False, sort_keys=True)
