"""``automem import`` files (automem/cli/transfer_formats.py ``parse``) that hold nothing, a
relation twice or a JSON key twice: refused naming the file, both lines or the line and key,
or (an exact repeat of a relation) kept once and counted."""

from __future__ import annotations

import gzip
import json

import pytest

from automem.cli import transfer_formats as formats


def _lines(*records: object) -> bytes:
    return ("\n".join(json.dumps(r) for r in records) + "\n").encode()


@pytest.mark.parametrize("fmt", formats.FORMATS)
@pytest.mark.parametrize("data", [b"", b"\n", b"  \n\t\n\r\n", gzip.compress(b""), gzip.compress(b" \n")],
                         ids=["zero-bytes", "newline", "blank-lines", "gzip-zero", "gzip-blank"])
def test_a_file_with_no_record_is_refused_in_every_format(fmt: str, data: bytes) -> None:
    parsed = formats.parse(fmt, data)
    assert len(parsed.errors) == 1 and parsed.errors[0].startswith("file: empty: "), parsed.errors
    assert parsed.memories == [] and parsed.relations == []


def test_a_source_with_nothing_in_it_is_no_error() -> None:
    # A well-formed document of an empty source says so; it is not a file that never got written.
    assert formats.parse("mem0", b'{"results": []}').errors == []
    assert formats.parse("automem", b'{"nodes": [], "relationships": []}').errors == []
    assert formats.parse("native", _lines({"header": {"format": formats.NATIVE_FORMAT}})).errors == []


def _automem(*relationships: tuple[int, int, str, dict]) -> bytes:
    nodes = [{"id": n, "labels": ["Memory"], "properties": {"content": f"memory {n}"}} for n in (1, 2)]
    edges = [{"source_id": s, "type": kind, "target_id": t, "properties": props} for s, t, kind, props in relationships]
    return _lines(*nodes, *edges)


def _native(*relations: dict) -> bytes:
    memories = [{"memory": {"id": i, "content": f"memory {i}"}} for i in ("x", "y")]
    return _lines({"header": {"format": formats.NATIVE_FORMAT}}, *memories, *({"relation": r} for r in relations))


def test_an_exact_repeat_of_a_relation_is_kept_once_and_counted() -> None:
    parsed = formats.parse("automem", _automem((1, 2, "RELATES_TO", {"strength": 0.5}),
                                               (1, 2, "RELATES_TO", {"strength": 0.5}),
                                               (1, 2, "LEADS_TO", {"strength": 0.5}),
                                               (2, 1, "RELATES_TO", {"strength": 0.5}),
                                               (1, 2, "RELATES_TO", {})))  # 0.5 is the default strength
    assert parsed.errors == []
    assert [(r.where, r.source, r.target, r.type) for r in parsed.relations] == [
        ("line 3", "1", "2", "RELATES_TO"), ("line 5", "1", "2", "LEADS_TO"), ("line 6", "2", "1", "RELATES_TO")]
    assert parsed.skipped == {"duplicate relationships (the same source, target, type, strength and reason as an "
                              "earlier line: imported once)": 2}
    relation = {"source_id": "x", "target_id": "y", "type": "RELATION_TYPE_RELATES_TO", "strength": 0.25,
                "reason": "why"}
    native = formats.parse("native", _native(relation, relation))
    assert native.errors == [] and len(native.relations) == 1
    assert native.skipped == {"duplicate relations (the same source, target, type, strength and reason as an "
                              "earlier line: imported once)": 1}


def test_a_repeat_of_a_relation_that_differs_is_refused_naming_both_lines() -> None:
    errors = formats.parse("automem", _automem((1, 2, "RELATES_TO", {"strength": 0.5}),
                                               (1, 2, "RELATES_TO", {"strength": 0.9}))).errors
    assert errors == [("line 4: relationship: RELATES_TO '1' → '2' was given already (line 3) with strength 0.5, "
                      "reason ''; this line has strength 0.9, reason '': the service keeps one relation per pair "
                      "and type, give it once")]
    relation = {"source_id": "x", "target_id": "y", "type": "RELATION_TYPE_LEADS_TO", "strength": 0.5}
    errors = formats.parse("native", _native(relation, {**relation, "reason": "other"})).errors
    assert errors == [("line 5: relation: LEADS_TO 'x' → 'y' was given already (line 4) with strength 0.5, reason ''; "
                      "this line has strength 0.5, reason 'other': the service keeps one relation per pair and "
                      "type, give it once")]


TWICE = ": the key is given more than once in one object (JSON readers differ on which value counts); send " \
        "each key once"
INEXACT = " cannot be held exactly by a 64-bit float"


@pytest.mark.parametrize(("fmt", "text", "expected"), [
    ("mem0", '{"id": "a", "memory": "x"}\n{"id": "b", "memory": "first", "memory": "second"}\n',
     ["line 2: memory" + TWICE]),
    ("mem0", '{"id": "a", "memory": "x", "metadata": {"k": {"deep": 1, "deep": 2}}}\n',
     ["line 1: metadata.k.deep" + TWICE]),
    ("mem0", '{"results": [{"id": "a", "memory": "x"}, {"id": "b", "id": "c", "memory": "y"}]}\n',
     ["line 1: results[1].id" + TWICE]),
    ("mem0", '{"results": [\n  {"id": "a", "memory": "x", "memory": "y"}\n]}\n',  # pretty-printed: one document
     ["record 1: results[0].memory" + TWICE]),
    ("automem", '{"id": 1, "labels": ["Memory"], "properties": {"content": "a", "content": "b"}}\n',
     ["line 1: properties.content" + TWICE]),
    ("automem", ('{"id": 1, "labels": ["Memory"], "properties": {"content": "a", "metadata": "{\\"k\\": 1, '
                '\\"k\\": 2}"}}\n'),  # AutoMem keeps metadata as JSON text
     ["line 1: properties.metadata.k" + TWICE]),
    ("native", '{"header": {"format": "automem-jsonl/1"}}\n{"memory": {"id": "m", "content": "a", "content": "b"}}\n',
     ["line 2: memory.content" + TWICE]),
    ("native", '{"header": {"format": "automem-jsonl/1"}, "header": {"format": "automem-jsonl/1"}}\n',
     ["line 1: header" + TWICE]),
    # A number no double holds as written was imported as its nearest double (1e-400 as 0.0).
    ("mem0", '{"id": "a", "memory": "x", "metadata": {"k": [1, 1e-400]}}\n',
     ["line 1: metadata.k[1]: 1e-400" + INEXACT + " (it would read back as 0.0); send at most 17 significant "
      "digits within ±1.7e308"]),
    ("automem", ('{"id": 1, "labels": ["Memory"], "properties": {"content": "a", "metadata": "{\\"k\\": '
                 '0.1000000000000000000001}"}}\n'),
     ["line 1: properties.metadata.k: 0.1000000000000000000001" + INEXACT + " (it would read back as 0.1); send "
      "at most 17 significant digits within ±1.7e308"]),
])
def test_a_key_given_twice_or_an_inexact_number_is_refused_naming_line_and_path(fmt: str, text: str, expected: list[str]) -> None:
    errors = formats.parse(fmt, text.encode()).errors
    assert errors[:len(expected)] == expected, errors


def test_a_key_given_twice_in_different_objects_is_no_error() -> None:
    text = '{"id": "a", "memory": "x", "metadata": {"id": "a", "memory": "x"}}\n{"id": "b", "memory": "y"}\n'
    assert formats.parse("mem0", text.encode()).errors == []


def test_a_record_repeating_many_keys_is_reported_in_a_few_lines() -> None:
    """20,000 repeated keys on one line were 20,000 error lines; now the first five and a count."""
    keys = ",".join(f'"k{i}": 1' for i in range(20000))
    errors = formats.parse("mem0", f'{{"id": "a", "memory": "x", "metadata": {{{keys}, {keys}}}}}\n'.encode()).errors
    assert len(errors) == formats.REFUSED_PER_RECORD + 1, errors[:3]
    assert errors[0].startswith("line 1: metadata.k0: the key is given more than once")
    assert errors[-1] == "line 1: ... and 19995 more key(s) or number(s) refused in this record"
