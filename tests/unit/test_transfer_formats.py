"""The file formats of ``automem import`` / ``export`` (automem/cli/transfer_formats.py): each
format's mapping onto MemoryInput, relations, what is left out and why, and bad records
reported by line with the field, before anything could be written."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from automem.cli import transfer_formats as formats
from automem.common.settings import Settings
from automem.v1 import memory_pb2

DATA = Path(__file__).resolve().parents[1] / "data"


def _lines(*records: object) -> bytes:
    return ("\n".join(json.dumps(r) for r in records) + "\n").encode()


def _parse(fmt: str, data: bytes) -> formats.Parsed:
    parsed = formats.parse(fmt, data)
    formats.validate(parsed, Settings())
    return parsed


def _meta(record: formats.MemoryRecord) -> dict:
    return json.loads(record.item.metadata_json)


def _iso(record: formats.MemoryRecord, name: str) -> str:
    return getattr(record.item, name).ToJsonString()


# --- native ----------------------------------------------------------------------------


def _native_memory(**fields: object) -> dict:
    body = {"id": "m1", "scope": "a/b", "content": "Use Postgres", "type": "MEMORY_TYPE_DECISION",
            "tags": ["db", "Backend"], "importance": 0.7, "confidence": 0.85, "metadata": {"n": 3, "x": {"y": [1, "z"]}},
            "event_time": "2026-01-02T03:04:05.678Z", "valid_from": "2026-01-02T03:04:05.678Z",
            "valid_to": "2026-06-01T00:00:00Z", "state": "MEMORY_STATE_ACTIVE", "version": "3",
            "create_time": "2026-01-02T03:04:06Z", "entities": [{"name": "postgres", "kind": "tool"}]}
    body.update(fields)
    return {"memory": body}


def test_native_maps_every_field_the_caller_decides() -> None:
    header = {"header": {"format": formats.NATIVE_FORMAT, "scope": "a/b"}}
    parsed = _parse("native", _lines(header, _native_memory()))
    assert parsed.errors == []
    [record] = parsed.memories
    item = record.item
    assert (record.ref, record.state, item.content, list(item.tags), item.type) == (
        "m1", "ACTIVE", "Use Postgres", ["db", "Backend"], "Decision")
    assert (item.importance, item.confidence) == (0.7, 0.85)
    assert _meta(record) == {"n": 3, "x": {"y": [1, "z"]}}
    assert _iso(record, "event_time") == "2026-01-02T03:04:05.678Z"
    assert _iso(record, "valid_to") == "2026-06-01T00:00:00Z"
    assert not item.require_review and record.key.startswith("import:native:")


def test_native_states_chains_and_left_out_records() -> None:
    parsed = _parse("native", _lines(
        _native_memory(id="old", content="v1", state="MEMORY_STATE_SUPERSEDED", superseded_by="mid"),
        _native_memory(id="mid", content="v2", state="MEMORY_STATE_SUPERSEDED", superseded_by="new"),
        _native_memory(id="new", content="v3"),
        _native_memory(id="rev", content="pending", state="MEMORY_STATE_PENDING_REVIEW"),
        _native_memory(id="gone", content="deleted", state="MEMORY_STATE_DELETED"),
        _native_memory(id="meta", content="summary", type="MEMORY_TYPE_META_PATTERN"),
        {"relation": {"source_id": "mid", "target_id": "new", "type": "RELATION_TYPE_EVOLVED_INTO",
                      "strength": 0.9, "reason": "changed"}},
        {"relation": {"source_id": "new", "target_id": "rev", "type": "RELATION_TYPE_SIMILAR_TO", "strength": 0.8}},
    ))
    assert parsed.errors == []
    assert [r.ref for r in parsed.memories] == ["old", "mid", "new", "rev"]
    assert parsed.memories[3].item.require_review
    # The edge given for mid -> new is kept; old -> mid (no edge line) comes from superseded_by.
    chain = {(r.source, r.target, r.type) for r in parsed.relations}
    assert chain == {("old", "mid", "INVALIDATED_BY"), ("mid", "new", "EVOLVED_INTO")}
    assert sum(parsed.skipped.values()) == 3  # deleted, MetaPattern, system relation
    order = [(r.source, r.target) for r in formats.supersession_order(list(reversed(parsed.relations)))]
    assert order == [("old", "mid"), ("mid", "new")]  # oldest first: each target still ACTIVE


def test_relations_of_memories_left_out_are_left_out_with_them() -> None:
    """Break-it review: the export of a scope consolidation had clustered holds the members'
    PART_OF edges to their MetaPattern, which import leaves out: every such edge was an error
    ("no memory ... in this file") and nothing was imported. A relation that names a memory
    left out on purpose (a MetaPattern, a deleted memory) is left out too; one that names an
    id the file does not hold at all is still an error."""
    parsed = _parse("native", _lines(
        _native_memory(id="a", content="espresso on floor two"),
        _native_memory(id="b", content="coffee queue on floor two"),
        _native_memory(id="meta", content="Pattern across 2 memories", type="MEMORY_TYPE_META_PATTERN"),
        _native_memory(id="gone", content="deleted", state="MEMORY_STATE_DELETED"),
        {"relation": {"source_id": "a", "target_id": "meta", "type": "RELATION_TYPE_PART_OF", "strength": 1.0}},
        {"relation": {"source_id": "b", "target_id": "meta", "type": "RELATION_TYPE_PART_OF", "strength": 1.0}},
        {"relation": {"source_id": "gone", "target_id": "a", "type": "RELATION_TYPE_RELATES_TO", "strength": 0.5}},
        {"relation": {"source_id": "a", "target_id": "b", "type": "RELATION_TYPE_RELATES_TO", "strength": 0.5}},
    ))
    assert parsed.errors == []
    assert [(r.source, r.target, r.type) for r in parsed.relations] == [("a", "b", "RELATES_TO")]
    assert parsed.skipped["relations of memories left out"] == 3
    errors = _parse("native", _lines(
        _native_memory(id="a", content="x"),
        {"relation": {"source_id": "a", "target_id": "nowhere", "type": "RELATION_TYPE_RELATES_TO"}})).errors
    assert errors == ["line 2: relation.target_id: no memory 'nowhere' in this file"], errors


def test_native_bad_lines_name_the_line_and_field() -> None:
    data = _lines(
        {"header": {"format": formats.NATIVE_FORMAT}},
        _native_memory(id="ok"),
        _native_memory(id="imp", importance=1.5),
        _native_memory(id="typ", type="MEMORY_TYPE_NOPE"),
        _native_memory(id="ok", content="same id again"),
        {"relation": {"source_id": "ok", "target_id": "nowhere", "type": "RELATION_TYPE_RELATES_TO"}},
        _native_memory(id="win", valid_from="2026-05-01T00:00:00Z", valid_to="2026-04-01T00:00:00Z"),
    ) + b"{not json\n" + _lines(_native_memory(id="blank", content="  "), {"memory": {"content": "no id"}})
    errors = _parse("native", data).errors
    assert any(e.startswith("line 3: importance: must be between 0 and 1") for e in errors), errors
    assert any(e.startswith("line 4: memory: ") and "MEMORY_TYPE_NOPE" in e for e in errors), errors
    assert any(e.startswith("line 5: id: 'ok' was given already (line 2)") for e in errors), errors
    assert any(e.startswith("line 6: relation.target_id: no memory 'nowhere'") for e in errors), errors
    assert any(e.startswith("line 7: valid_to: must be after valid_from") for e in errors), errors
    assert any(e.startswith("line 8: not JSON") for e in errors), errors
    assert any(e.startswith("line 9: content: must not be empty") for e in errors), errors
    assert any(e.startswith("line 10: memory.id: required") for e in errors), errors
    assert len(errors) == 8


def test_a_supersession_cycle_is_refused_before_anything_is_written() -> None:
    # a replaced by b, b by c, c by a: the import stored a, b and c and two supersedes, then
    # the service refused the third (its target was no longer current): half of the file in.
    data = _lines(
        _native_memory(id="a", content="Deploys run on Mondays", state="MEMORY_STATE_SUPERSEDED", superseded_by="b"),
        _native_memory(id="b", content="Deploys run on Tuesdays", state="MEMORY_STATE_SUPERSEDED", superseded_by="c"),
        _native_memory(id="c", content="Deploys run on Fridays", state="MEMORY_STATE_SUPERSEDED", superseded_by="a"),
        _native_memory(id="d", content="Releases are tagged"),
        {"relation": {"source_id": "d", "target_id": "a", "type": "RELATION_TYPE_RELATES_TO"}},
    )
    errors = _parse("native", data).errors
    assert errors == [("line 1: relation.target_id: the supersessions form a cycle ('a' → 'b' → 'c' → 'a'); "
                      "a chain must end in a current memory")], errors
    # Two memories replacing each other through edge lines (EVOLVED_INTO counts as INVALIDATED_BY does).
    data = _lines(_native_memory(id="x", content="one"), _native_memory(id="y", content="two"),
                  {"relation": {"source_id": "x", "target_id": "y", "type": "RELATION_TYPE_EVOLVED_INTO"}},
                  {"relation": {"source_id": "y", "target_id": "x", "type": "RELATION_TYPE_INVALIDATED_BY"}})
    errors = _parse("native", data).errors
    assert len(errors) == 1 and "form a cycle" in errors[0] and errors[0].startswith(("line 3: ", "line 4: ")), errors
    # A chain that ends is fine.
    data = _lines(_native_memory(id="x", content="one"), _native_memory(id="y", content="two"),
                  {"relation": {"source_id": "x", "target_id": "y", "type": "RELATION_TYPE_INVALIDATED_BY"}})
    assert _parse("native", data).errors == []


def test_a_native_file_cut_short_at_a_line_boundary_is_refused() -> None:
    from datetime import UTC, datetime

    lines = [json.loads(formats.native_header_line("a/b", datetime(2026, 12, 4, tzinfo=UTC))),
             _native_memory(id="x", content="one"), _native_memory(id="y", content="two"),
             {"relation": {"source_id": "x", "target_id": "y", "type": "RELATION_TYPE_RELATES_TO"}},
             json.loads(formats.native_end_line(2, 1))]
    whole = _parse("native", _lines(*lines))
    assert whole.errors == [] and len(whole.memories) == 2 and len(whole.relations) == 1
    # The last lines lost (a copy interrupted, a disk full): imported in part with exit 0 before.
    cut = _parse("native", _lines(*lines[:3])).errors
    assert cut == [("line 3: end: the file stops before its end record (its header promises one): cut short? "
                   "nothing was imported")], cut
    # A line lost in the middle: the end record's count disagrees.
    lost = _parse("native", _lines(*lines[:2], *lines[3:])).errors
    assert "line 4: end.memories: the file holds 1 memory lines, its end record counts 2 (lines lost or added?)" in lost
    after = _parse("native", _lines(*lines, _native_memory(id="z", content="three"))).errors
    assert any(e.startswith("line 6: record: comes after the end record (line 5)") for e in after), after
    # A file written before the end record came (its header does not promise one) reads as before.
    old_header = {"header": {"format": formats.NATIVE_FORMAT, "scope": "a/b"}}
    assert _parse("native", _lines(old_header, *lines[1:3])).errors == []


def test_an_empty_native_file_is_refused() -> None:
    # A zero-byte file (an export that never ran, a wrong path) imported 0 memories with ok.
    expected = [('file: empty: no header line ({"header": {"format": "automem-jsonl/1", ...}}) and no records; '
                 "an export always begins with one")]
    assert formats.parse("native", b"").errors == expected
    assert formats.parse("native", b"\n  \n").errors == expected
    # A header alone (an export of an empty scope, before the end record came) is no error.
    assert formats.parse("native", _lines({"header": {"format": formats.NATIVE_FORMAT}})).errors == []


def test_a_second_native_header_line_is_refused() -> None:
    header = {"header": {"format": formats.NATIVE_FORMAT, "scope": "a/b"}}
    errors = _parse("native", _lines(header, _native_memory(id="x", content="one"), header,
                                     _native_memory(id="y", content="two"))).errors
    assert errors == ["line 3: header: a second header line (the first is line 1); one file, one header"], errors


def test_a_native_relation_line_given_twice_is_kept_once() -> None:
    # The service MERGEs the second onto the first; the import counted two created.
    twice = {"relation": {"source_id": "x", "target_id": "y", "type": "RELATION_TYPE_INVALIDATED_BY"}}
    # The same pair under another type, or the other way round, is another edge.
    lines = [_native_memory(id="x", content="one"), _native_memory(id="y", content="two"), twice,
             {"relation": {"source_id": "x", "target_id": "y", "type": "RELATION_TYPE_RELATES_TO"}},
             {"relation": {"source_id": "y", "target_id": "x", "type": "RELATION_TYPE_RELATES_TO"}}]
    assert _parse("native", _lines(*lines)).errors == []
    again = _parse("native", _lines(*lines, twice))  # the same again: once (tests/unit/test_transfer_duplicates.py)
    assert again.errors == [] and len(again.relations) == 3, again.errors


def test_native_lines_written_by_export_read_back() -> None:
    memory = memory_pb2.Memory(id="m9", content="exported", tags=["t"], importance=0.4, confidence=0.6,
                               type=memory_pb2.MEMORY_TYPE_HABIT, state=memory_pb2.MEMORY_STATE_ACTIVE)
    memory.metadata.update({"k": "v"})
    memory.event_time.FromJsonString("2025-12-31T23:59:59.001Z")
    relation = memory_pb2.Relation(source_id="m9", target_id="m10", type=memory_pb2.RELATION_TYPE_LEADS_TO,
                                   strength=0.25, reason="because")
    other = memory_pb2.Memory(id="m10", content="next", type=memory_pb2.MEMORY_TYPE_CONTEXT)
    text = "\n".join([formats.native_memory_line(memory), formats.native_memory_line(other),
                      formats.native_relation_line(relation)]).encode()
    parsed = _parse("native", text)
    assert parsed.errors == []
    record = parsed.memories[0]
    assert (record.item.type, list(record.item.tags), _meta(record)) == ("Habit", ["t"], {"k": "v"})
    assert [(r.type, r.strength, r.reason) for r in parsed.relations] == [("LEADS_TO", 0.25, "because")]


# --- AutoMem ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["document", "gzip", "lines"])
def test_automem_backup_maps_nodes_and_relationships(shape: str) -> None:
    raw = (DATA / "automem_falkordb_backup.json").read_bytes()
    if shape == "gzip":
        raw = gzip.compress(raw)
    elif shape == "lines":
        document = json.loads(raw)
        raw = _lines(*document["nodes"], *document["relationships"])
    parsed = _parse("automem", raw)
    assert parsed.errors == []
    assert [r.ref for r in parsed.memories] == ["0", "1", "2"]
    first, second, third = parsed.memories
    assert (first.item.content, list(first.item.tags), first.item.type) == (
        "Chose PostgreSQL over MySQL for the billing service: we need transactional DDL",
        ["billing", "database", "decision"], "Decision")
    assert (first.item.importance, first.item.confidence) == (0.9, 0.95)
    assert _iso(first, "event_time") == "2026-01-12T09:30:00Z" and _iso(first, "valid_from") == "2026-01-12T09:30:00Z"
    assert not first.item.HasField("valid_to")
    meta = _meta(first)
    assert meta["project"] == "billing" and meta["source"] == "claude-code"
    source = meta[formats.IMPORT_KEY]
    assert source["format"] == "automem" and source["id"] == "6f1c2b9e-3d0a-4c55-9a8e-1f2d3c4b5a60"
    assert source["fields"]["summary"] == "PostgreSQL chosen for billing (transactional DDL)"
    assert source["fields"]["last_accessed"] == "2026-03-14T18:02:11+00:00"
    assert "tag_prefixes" not in source["fields"]  # derived from the tags
    assert _iso(second, "valid_to") == "2026-02-01T00:00:00Z" and _iso(second, "event_time") == "2025-11-03T14:05:22.123Z"
    # AutoMem's legacy type "Memory" is Context here; the original is kept.
    assert third.item.type == "Context" and _meta(third)[formats.IMPORT_KEY]["type"] == "Memory"
    assert _meta(third)["files_modified"] == ["migrations/0042_ledger.sql"]
    assert [(r.source, r.target, r.type, r.strength) for r in parsed.relations] == [("2", "0", "DERIVED_FROM", 0.8)]
    assert sum(parsed.skipped.values()) == 3  # the Entity node, SIMILAR_TO, MENTIONS


def test_automem_keys_are_stable_and_distinct() -> None:
    raw = (DATA / "automem_falkordb_backup.json").read_bytes()
    keys = [r.key for r in formats.parse("automem", raw).memories]
    assert keys == [r.key for r in formats.parse("automem", gzip.compress(raw)).memories]
    assert len(set(keys)) == 3


def test_automem_bad_lines() -> None:
    node = {"id": 5, "labels": ["Memory"], "properties": {"id": "u5", "content": "fine"}}
    data = _lines(
        node,
        {"id": 6, "labels": ["Memory"], "properties": {"id": "u6", "content": "x", "timestamp": "last tuesday"}},
        {"id": 7, "labels": ["Memory"], "properties": {"id": "u7", "content": "x", "metadata": "[1, 2]"}},
        {"id": 8, "labels": ["Memory"], "properties": {"id": "u8", "content": "x", "tags": "a, b", "importance": "high"}},
        {"id": 9, "labels": ["Memory"], "properties": {"id": "u9"}},
        {"source_id": 5, "type": "RELATES_TO", "target_id": 42, "properties": {}},
        {"something": "else"},
    )
    errors = _parse("automem", data).errors
    assert errors[:4] == [
        "line 2: properties.timestamp: not an ISO 8601 time: 'last tuesday'",
        "line 3: properties.metadata: must be a JSON object, got list",
        "line 4: properties.importance: must be a number between 0 and 1",
        "line 5: properties.content: required text",
    ]
    assert errors[4].startswith("line 7: record: neither an AutoMem node")
    assert errors[5] == "line 6: relationship.target_id: no memory '42' in this file"


def test_a_bad_window_is_named_as_each_format_names_it() -> None:
    """The write path's check of a window (``valid_to: must be after valid_from``, the proto's
    names) is reported with the file's own names of the two times."""
    native = _parse("native", _lines({"header": {"format": formats.NATIVE_FORMAT}}, _native_memory(
        valid_from="2026-05-01T00:00:00Z", valid_to="2026-04-01T00:00:00Z"))).errors
    assert native == ["line 2: valid_to: must be after valid_from"], native
    automem = _parse("automem", _lines({"id": 5, "labels": ["Memory"], "properties": {
        "id": "u5", "content": "x", "t_valid": "2026-05-01T00:00:00Z", "t_invalid": "2026-04-01T00:00:00Z"}})).errors
    assert automem == ["line 1: properties.t_invalid: must be after properties.t_valid"], automem
    mem0 = _parse("mem0", _lines({"id": "m1", "memory": "x", "created_at": "2099-05-01T00:00:00Z",
                                  "expiration_date": "2099-04-01T00:00:00Z"})).errors
    assert mem0 == ["line 1: expiration_date: must be after created_at"], mem0


# --- mem0 ------------------------------------------------------------------------------


def test_mem0_get_all_maps_items() -> None:
    parsed = _parse("mem0", (DATA / "mem0_get_all.json").read_bytes())
    assert parsed.errors == []
    trip, allergy = parsed.memories
    assert trip.item.content == "User is planning a trip to Japan next spring" and list(trip.item.tags) == []
    assert _iso(trip, "event_time") == "2025-03-07T20:14:33.512Z"  # -08:00 to UTC, milliseconds
    meta = _meta(trip)
    assert meta["topic"] == "travel"
    assert meta[formats.IMPORT_KEY] == {
        "format": "mem0", "id": "892db2ae-06d9-49e5-8b3e-585ef9b85b8e", "hash": "0a1f2b4e3cc2e0d3a8f0d3bd4b7a1e11",
        "updated_at": "2025-03-07T12:20:10.100000-08:00", "user_id": "alice", "agent_id": "travel-agent",
        "run_id": "session-17", "actor_id": "alice", "role": "user"}
    assert list(allergy.item.tags) == ["health", "food"]
    assert _iso(allergy, "valid_to") == "2027-01-01T00:00:00Z"
    assert list(_meta(allergy)) == [formats.IMPORT_KEY]  # metadata null: only the source record
    assert parsed.relations == [] and sum(parsed.skipped.values()) == 1  # the graph triple


def test_mem0_list_and_lines_read_the_same() -> None:
    items = json.loads((DATA / "mem0_get_all.json").read_text())["results"]
    as_list = formats.parse("mem0", json.dumps(items, indent=2).encode())
    as_lines = formats.parse("mem0", _lines(*items))
    assert [r.key for r in as_list.memories] == [r.key for r in as_lines.memories]
    assert [r.where for r in as_lines.memories] == ["line 1", "line 2"]


def test_mem0_an_id_that_is_not_a_string_or_an_integer_is_refused_naming_id() -> None:
    """An object or a list as a mem0 ``id`` was imported under its Python repr (``"{'a': 1}"``),
    ``true`` as ``'True'``, and ``1.0`` and ``1`` named different records; ``0`` was "required"
    though given. Only a string or an integer is an id."""
    data = _lines({"id": {"a": 1}, "memory": "x"}, {"id": [1, 2], "memory": "x"}, {"id": True, "memory": "x"},
                  {"id": 1.5, "memory": "x"}, {"id": "u-1", "memory": "x"}, {"id": 0, "memory": "x"},
                  {"results": [{"id": {"b": 2}, "memory": "x"}]})
    parsed = _parse("mem0", data)
    assert parsed.errors == [
        "line 1: id: must be a string or an integer, got object",
        "line 2: id: must be a string or an integer, got list",
        "line 3: id: must be a string or an integer, got boolean",
        "line 4: id: must be a string or an integer, got number",
        "line 7: results[0]: id: must be a string or an integer, got object",
    ], parsed.errors
    assert [(m.where, m.ref) for m in parsed.memories] == [("line 5", "u-1"), ("line 6", "0")]


def test_automem_an_id_that_is_not_a_string_or_an_integer_is_refused_naming_it() -> None:
    """An AutoMem node's, point's or relationship end's ``id`` that was an object or a list
    was imported under its Python repr (``str(value["id"])``), as mem0's was; it is refused now,
    naming the field, as the mem0 importer does."""
    node = {"labels": ["Memory"], "properties": {"content": "x"}}
    data = _lines({**node, "id": {"a": 1}}, {**node, "id": [1]}, {**node, "id": True}, {**node, "id": 1.5},
                  {"id": {"p": 1}, "payload": {"content": "a point"}},
                  {"id": 7, "labels": ["Memory"], "properties": {"content": "y", "id": ["u"]}},
                  {**node, "id": 1}, {**node, "id": "m-2"},
                  {"source_id": {"s": 1}, "target_id": [2], "type": "RELATES_TO"},
                  {"source_id": 1, "target_id": "m-2", "type": "RELATES_TO"})
    parsed = _parse("automem", data)
    assert parsed.errors == [
        "line 1: id: must be a string or an integer, got object",
        "line 2: id: must be a string or an integer, got list",
        "line 3: id: must be a string or an integer, got boolean",
        "line 4: id: must be a string or an integer, got number",
        "line 5: id: must be a string or an integer, got object",
        "line 6: properties.id: must be a string or an integer, got list",
        "line 9: relationship.source_id: must be a string or an integer, got object",
        "line 9: relationship.target_id: must be a string or an integer, got list",
    ], parsed.errors
    assert [(m.where, m.ref) for m in parsed.memories] == [("line 7", "1"), ("line 8", "m-2")]
    assert [(r.source, r.target) for r in parsed.relations] == [("1", "m-2")]


def test_write_path_errors_name_the_files_fields() -> None:
    """The write path's checks (``validate``: build_memory) named AutoMem's
    ``properties.importance`` / ``properties.content`` / ``properties.tags[i]`` as the service's
    ``importance`` / ``content`` / ``tags[i]`` (only the times were renamed), and mem0's
    ``memory`` as ``content``: each names the file's field now, as does a refusal of the
    service while storing (its SupersedeMemory's ``replacement.`` prefix dropped)."""
    def node(ref: int, **props: object) -> dict:
        return {"id": ref, "labels": ["Memory"], "properties": {"content": f"memory {ref}", **props}}

    over = "x" * (Settings().content_max_length + 1)
    parsed = _parse("automem", _lines(node(1, importance=1.5), node(2, confidence=-0.1), node(3, content=" "),
                                      node(4, tags=["ok", " "]), node(5, content=over),
                                      node(6, metadata={"a": float("nan")}),
                                      node(7, t_valid="2026-02-01T00:00:00Z", t_invalid="2026-01-01T00:00:00Z")))
    assert [e.split(": ")[:2] for e in parsed.errors] == [
        ["line 1", "properties.importance"], ["line 2", "properties.confidence"], ["line 3", "properties.content"],
        ["line 4", "properties.tags[1]"], ["line 5", "properties.content"], ["line 6", "properties.metadata.a"],
        ["line 7", "properties.t_invalid"]], parsed.errors
    assert parsed.errors[-1] == "line 7: properties.t_invalid: must be after properties.t_valid", parsed.errors
    mem0 = _parse("mem0", _lines({"id": "a", "memory": over}, {"id": "b", "memory": "y", "categories": ["ok", " "]}))
    assert [e.split(": ")[:2] for e in mem0.errors] == [["line 1", "memory"], ["line 2", "categories[1]"]], mem0.errors
    assert parsed.file_message("replacement.tags[0]: must not be empty") == "properties.tags[0]: must not be empty"
    assert parsed.file_message("id: memory m is DELETED") == "id: memory m is DELETED"


def test_mem0_every_malformed_record_is_reported_with_its_place_and_field() -> None:
    """A lone surrogate (``"\\ud800"``) in a mem0 item stopped the whole import with a
    UnicodeEncodeError traceback naming no record; an item with ``relations`` and no text was
    dropped unseen, and so was ``{"relations": "junk"}``; graph relations that are not objects
    were counted as left out; ``{"results": "junk"}`` was "memory: required". Each is now an
    error naming its place and field, and the good records around them are still read."""
    data = (_lines({"id": "ok1", "memory": "fine"}, {"id": "r", "relations": []}, {"relations": "junk"},
                   {"results": "junk"}, {"results": [], "relations": [{"source": "a"}, 7]})
            + b'{"id": "s1", "memory": "bad \\ud800 text"}\n'
            + b'{"id": "s2", "memory": "x", "metadata": {"k": ["ok", "\\udc00"]}}\n'
            + b'{"id": "s3", "memory": "x", "metadata": {"\\ud83d": 1}}\n'
            + b'{"id": "s4", "memory": "x", "user_id": "\\ud800"}\n'
            + b'{"results": [{"id": "s5", "memory": "x", "categories": ["a", "\\ud800"]}]}\n'
            + _lines({"id": "ok2", "memory": "also fine"}))
    parsed = _parse("mem0", data)
    bad = "text must be valid Unicode: a lone surrogate (e.g. \\ud800) is not allowed"
    assert parsed.errors == [
        "line 3: relations: must be a list of mem0 graph relations ({source, relationship, target}), got string",
        "line 4: results: must be a list of mem0 items, got string",
        ("line 5: relations[1]: must be a JSON object (a mem0 graph relation {source, relationship, target}), "
         "got number"),
        "line 2: memory: required text (mem0's memory field)",
        f"line 6: memory: {bad}",
        f"line 7: metadata.k[1]: {bad}",
        f'line 8: metadata["\\ud83d"]: key: {bad}',
        f"line 9: user_id: {bad}",
        f"line 10: results[0]: categories[1]: {bad}",
    ], parsed.errors
    assert [m.ref for m in parsed.memories] == ["ok1", "ok2"]
    assert parsed.skipped == {"mem0 graph relations (entity triples: enrichment finds entities again)": 1}


def test_automem_lone_surrogates_are_named_not_a_traceback() -> None:
    """The same lone surrogate in an AutoMem node crashed the import (UnicodeEncodeError)."""
    data = (b'{"id": 1, "labels": ["Memory"], "properties": {"content": "x\\ud800"}}\n'
            b'{"id": 2, "labels": ["Memory"], "properties": {"content": "fine"}}\n')
    parsed = formats.parse("automem", data)
    assert parsed.errors == [("line 1: properties.content: text must be valid Unicode: a lone surrogate (e.g. "
                              "\\ud800) is not allowed")]
    assert [m.ref for m in parsed.memories] == ["2"]


def test_mem0_bad_lines() -> None:
    data = _lines({"id": "a", "memory": "ok"}, {"id": "b", "text": "wrong field"}, {"memory": "no id"},
                  {"id": "d", "memory": "x", "created_at": "2025-13-40"}, {"id": "e", "memory": "x", "metadata": [1]},
                  {"id": "f", "memory": "x", "categories": "not, a list"}, {"id": "g", "memory": "x", "categories": [1]})
    errors = _parse("mem0", data).errors
    assert errors == [
        "line 2: memory: required text (mem0's memory field)",
        "line 3: id: required (re-imports name records by it)",
        "line 4: created_at: not an ISO 8601 time: '2025-13-40'",
        "line 5: metadata: must be a JSON object, got list",
        "line 7: categories: must be a list of strings",
    ]


def test_a_record_imported_before_keeps_its_earlier_source() -> None:
    """Exported from here to mem0 after an import from AutoMem, then imported again."""
    earlier = {"format": "automem", "id": "u1"}
    [record] = _parse("mem0", _lines({"id": "m", "memory": "x", "metadata": {"import_source": earlier, "k": 1}})).memories
    assert _meta(record) == {"k": 1, "import_source": {"format": "mem0", "id": "m", "previous": earlier}}


def test_not_utf8_and_broken_gzip_are_one_error() -> None:
    assert formats.parse("mem0", b"\xff\xfe\x00bad").errors[0].startswith("file: not UTF-8")
    assert formats.parse("mem0", b"\x1f\x8b broken").errors[0].startswith("file: not a readable gzip file")


def test_keys_follow_what_is_stored_not_the_sources_bookkeeping() -> None:
    """A later export of an unchanged source names the same records (same keys), so its
    import stores nothing; a record whose stored fields changed is a new memory."""
    def key(fmt: str, record: object) -> str:
        [memory] = formats.parse(fmt, _lines(record)).memories
        return memory.key

    base = _native_memory()
    later = _native_memory(version="9", update_time="2026-03-01T00:00:00Z", relevance_score=0.2,
                           last_access_time="2026-03-02T00:00:00Z", embedding_status="EMBEDDING_STATUS_DONE")
    assert key("native", base) == key("native", later)
    assert key("native", base) != key("native", _native_memory(tags=["db"]))
    assert key("native", base) != key("native", _native_memory(id="m2"))
    item = {"id": "a", "memory": "x", "updated_at": "2025-01-01T00:00:00Z", "hash": "h1"}
    assert key("mem0", item) == key("mem0", {**item, "updated_at": "2025-02-01T00:00:00Z"})
    assert key("mem0", item) != key("mem0", {**item, "memory": "y"})
    node = {"id": 1, "labels": ["Memory"], "properties": {"id": "u", "content": "x", "last_accessed": "2025-01-01"}}
    moved = {"id": 7, "labels": ["Memory"], "properties": {"id": "u", "content": "x", "last_accessed": "2025-06-01"}}
    assert key("automem", node) == key("automem", moved)


def test_automem_qdrant_backup_points_are_memories() -> None:
    document = {"timestamp": "20260315_041500", "collection_name": "memories", "stats": {"points_count": 1},
                "points": [{"id": "9d2c7f0e-0000-4000-8000-000000000001", "vector": [0.1, 0.2],
                            "payload": {"content": "Recovered from the vector store", "tags": ["recovered"],
                                        "importance": 0.4, "timestamp": "2025-10-01T10:00:00Z", "type": "Insight",
                                        "metadata": {"k": "v"}, "updated_at": "2025-10-02T10:00:00Z"}}]}
    parsed = _parse("automem", json.dumps(document, indent=2).encode())
    assert parsed.errors == []
    [record] = parsed.memories
    assert (record.item.content, record.item.type, list(record.item.tags)) == (
        "Recovered from the vector store", "Insight", ["recovered"])
    assert record.where == "record 1: points[0]"
    assert _meta(record) == {"k": "v", "import_source": {"format": "automem", "id": "9d2c7f0e-0000-4000-8000-000000000001",
                                                         "fields": {"updated_at": "2025-10-02T10:00:00Z"}}}


def test_json_lines_split_at_newlines_only() -> None:
    """JSON Lines are separated by ``\\n`` (a ``\\r`` before it dropped); U+2028, U+2029,
    U+0085 and ``\\x1c`` are characters a JSON string may hold raw, where ``str.splitlines``
    split the line (break-it review: an export holding one could not be imported)."""
    from automem.common.jsontext import json_lines

    text = '{"a": "x\u2028y\u2029z\u0085w\x1cv"}\r\n{"b": 1}\n\n{"c": 2}'
    assert json_lines(text) == ['{"a": "x\u2028y\u2029z\u0085w\x1cv"}', '{"b": 1}', "", '{"c": 2}']
    assert json_lines("") == [] and json_lines("{}\n") == ["{}"]
    assert len(text.splitlines()) > len(json_lines(text))


@pytest.mark.parametrize("fmt", ["native", "mem0", "automem"])
def test_json_nested_too_deeply_is_one_error_naming_the_line(fmt: str) -> None:
    """A line nested thousands deep crashed the import with a RecursionError traceback; it is
    now one error naming the line, as any other bad line (nothing is imported)."""
    deep = ('{"memory":' * 2000 + "1" + "}" * 2000 + "\n").encode()
    parsed = formats.parse(fmt, deep)
    limit = sys.getrecursionlimit()
    assert parsed.errors == [f"line 1: arrays and objects nested too deeply to read (more than about {limit} levels)"]


def test_automem_relationship_and_node_fields_of_the_wrong_shape_are_named() -> None:
    """An AutoMem relationship whose ``properties`` was a list crashed the import
    (AttributeError); a ``reason`` object was stored as its Python repr; ``labels`` given as
    one string matched by substring ("NotMemoryButContainsMemory" was a Memory); nodes without
    an id were "id: 'None' was given already"; a relationship without its ends "cannot be
    related to itself". Each is now an error naming the field, or an exact label match."""

    def node(ref: int, **props: object) -> dict:
        return {"id": ref, "labels": ["Memory"], "properties": {"id": f"u{ref}", "content": "x", **props}}

    def edge(properties: object, source: object = 1, target: object = 2) -> dict:
        return {"source_id": source, "target_id": target, "type": "RELATES_TO", "properties": properties}

    def errors(**doc: object) -> list[str]:
        return formats.parse("automem", json.dumps(doc).encode()).errors

    assert errors(nodes=[node(1), node(2)], relationships=[edge(["x"])]) == [
        "line 1: relationships[0]: properties: must be a JSON object"]
    assert errors(nodes=[node(1), node(2)], relationships=[edge({"reason": {"why": "x"}})]) == [
        "line 1: relationships[0]: properties.reason: must be a string"]
    assert errors(nodes=[node(1), node(2)], relationships=[edge({}, None, None)]) == [
        "line 1: relationships[0]: relationship.source_id: missing",
        "line 1: relationships[0]: relationship.target_id: missing"]
    assert errors(nodes=[{"labels": ["Memory"], "properties": {"content": "a"}},
                         {"labels": ["Memory"], "properties": {"content": "b"}}]) == [
        "line 1: nodes[0]: id: missing", "line 1: nodes[1]: id: missing"]
    other = {"id": 2, "labels": "NotMemoryButContainsMemory", "properties": {"content": "not a memory"}}
    parsed = formats.parse("automem", json.dumps({"nodes": [node(1), other, {**node(3), "labels": "Memory"}]}).encode())
    assert parsed.errors == [] and [m.ref for m in parsed.memories] == ["1", "3"]


#: One bad input per kind of error the importer gives, and a piece of its message that
#: docs/import-export.md "Errors" must hold (the doc listed none of the field shapes, the
#: depth guard or the reading errors).
_DOCUMENTED_ERRORS = [
    ("mem0", b"\xff\xfe\x00bad", "file: not UTF-8 text"),
    ("mem0", b"\x1f\x8b broken", "file: not a readable gzip file"),
    ("mem0", b"", "file: empty: "),
    ("mem0", b'{"id": "a", "memory": "x"}\n{bad\n', "not JSON ("),
    ("mem0", ('{"a":' * 2000 + "1" + "}" * 2000 + "\n").encode(), "arrays and objects nested too deeply to read"),
    ("mem0", b'{"id": "a", "memory": "x", "memory": "y"}\n', "the key is given more than once in one object"),
    ("mem0", b'{"id": "a", "memory": "x", "metadata": {"k": 1e-400}}\n', "cannot be held exactly by a 64-bit float"),
    ("mem0", b'{"id": "a", "memory": "x", "metadata": {' + b", ".join(b'"k%d": 1, "k%d": 2' % (i, i) for i in range(7))
     + b"}}\n", "more key(s) or number(s) refused in this record"),
    ("mem0", b'{"id": "a", "memory": "\\ud800"}\n', "text must be valid Unicode: a lone surrogate"),
    ("mem0", _lines(5), "record: must be a JSON object (a mem0 item)"),
    ("mem0", _lines({"results": "x"}), "must be a list of mem0 items"),
    ("mem0", _lines({"relations": "x"}), "must be a list of mem0 graph relations"),
    ("mem0", _lines({"relations": [1]}), "must be a JSON object (a mem0 graph relation"),
    ("mem0", _lines({"id": "a"}), "memory: required text (mem0's memory field)"),
    ("mem0", _lines({"memory": "x"}), "id: required"),
    ("mem0", _lines({"id": [1], "memory": "x"}), "id: must be a string or an integer, got"),
    ("mem0", _lines({"id": "a", "memory": "x", "categories": [1]}), "categories: must be a list of strings"),
    ("mem0", _lines({"id": "a", "memory": "x", "created_at": [1]}), "must be an ISO 8601 time, got"),
    ("mem0", _lines({"id": "a", "memory": "x", "created_at": "soon"}), "not an ISO 8601 time:"),
    ("mem0", _lines({"id": "a", "memory": "x", "created_at": 10 ** 20}), "is outside the years 1–9999"),
    ("mem0", _lines({"id": "a", "memory": "x", "metadata": [1]}), "must be a JSON object, got"),
    ("mem0", _lines({"id": "a", "memory": "x"}, {"id": "a", "memory": "y"}), "was given already"),
    ("mem0", _lines({"id": "a", "memory": "x", "created_at": "2099-05-01T00:00:00Z",
                     "expiration_date": "2099-04-01T00:00:00Z"}), "expiration_date: must be after created_at"),
    ("automem", _lines(5), "record: must be a JSON object"),
    ("automem", _lines({"x": 1}), "record: neither an AutoMem node"),
    ("automem", _lines({"id": 1, "labels": 5, "properties": {}}), "labels: must be a list of strings"),
    ("automem", _lines({"labels": ["Memory"], "properties": {"content": "x"}}), "id: missing"),
    ("automem", _lines({"id": {"a": 1}, "labels": ["Memory"], "properties": {"content": "x"}}),
     "must be a string or an integer, got"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": {"content": "x", "importance": 2}}),
     "properties.importance: must be between 0 and 1"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": []}), "properties: must be a JSON object"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": {}}), "properties.content: required text"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": {"content": "x", "tags": [1]}}),
     "properties.tags: must be a list of strings"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": {"content": "x", "importance": "hi"}}),
     "must be a number between 0 and 1"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": {"content": "x", "metadata": "{bad"}}),
     "properties.metadata: not valid JSON"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": {"content": "x"}},
                       {"id": 2, "labels": ["Memory"], "properties": {"content": "y"}},
                       {"source_id": 1, "target_id": 2, "type": "RELATES_TO", "properties": {"reason": [1]}}),
     "properties.reason: must be a string"),
    ("automem", _lines({"source_id": None, "target_id": None, "type": "RELATES_TO"}), "relationship.source_id"),
    ("automem", _lines({"id": 1, "labels": ["Memory"], "properties": {"content": "x"}},
                       {"source_id": 1, "target_id": 1, "type": "RELATES_TO"}), "a memory cannot be related to itself"),
    ("automem", _lines({"source_id": 1, "target_id": 2, "type": "RELATES_TO"}), "in this file"),
    ("native", _lines({"nope": 1}), "record: must be one of"),
    ("native", _lines({"end": {"memories": 0, "relations": 0}}, {"memory": {"id": "a"}}),
     "record: comes after the end record"),
    ("native", _lines({"header": {"format": "x"}}), "header.format: must be 'automem-jsonl/1'"),
    ("native", _lines({"header": {"format": formats.NATIVE_FORMAT}}, {"header": {"format": formats.NATIVE_FORMAT}}),
     "header: a second header line"),
    ("native", _lines({"memory": {"content": "x"}}), "memory.id: required"),
    ("native", _lines({"relation": {"source_id": "a", "target_id": "b"}}), "relation.type: required"),
    ("native", _lines({"header": {"format": formats.NATIVE_FORMAT, "end": True}}),
     "the file stops before its end record"),
    ("native", _lines({"end": {"memories": 3, "relations": 0}}), "end.memories"),
]


@pytest.mark.parametrize(("fmt", "data", "message"), _DOCUMENTED_ERRORS, ids=[m for _, _, m in _DOCUMENTED_ERRORS])
def test_the_errors_the_importer_gives_are_documented(fmt: str, data: bytes, message: str) -> None:
    """Each error is given as the catalogue says (so the catalogue follows the code) and
    docs/import-export.md lists it (so the doc follows the code)."""
    errors = _parse(fmt, data).errors
    assert any(message in error for error in errors), (message, errors)
    doc = " ".join((Path(__file__).resolve().parents[2] / "docs" / "import-export.md").read_text().split())
    assert message in doc, message
