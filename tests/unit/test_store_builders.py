"""The pieces both stores share, without servers: the one vector-filter translator
(automem/vectors/filters.py), the one node builder behind partial graph writes
(automem/common/model.py ``node_fields``) and the graph's tag predicate
(automem/graph/memories.py ``filter_where`` / ``indexed_tags``)."""

from __future__ import annotations

import uuid

import pytest
from qdrant_client import models as m

from automem.common.model import OPEN_END, Memory, memory_to_node, node_fields, ts
from automem.graph.memories import filter_where, indexed_tags
from automem.recall.filters import Filters
from automem.v1 import memory_pb2
from automem.vectors import VectorFilter
from automem.vectors.filters import conditions, translate
from automem.vectors.server import dialect as server_dialect


def test_filter_conditions_lower_case_dedupe_and_normalise_ids() -> None:
    mid = uuid.uuid4()
    must, must_not = conditions(VectorFilter(
        scope="acme", states=["ACTIVE"], tags_any=["Go"], tags_all=["A", "a", "B"], prefixes_any=["Lang:"],
        prefixes_all=["X"], exclude_tags=["Old"], valid_at=10.0, event_time_gte=1.0, event_time_lte=2.0,
        ids=[str(mid).upper()], exclude_ids=[mid]))
    assert must == [("value", "scope", "acme"), ("any", "state", ["ACTIVE"]), ("any", "tags_lower", ["go"]),
                    ("value", "tags_lower", "a"), ("value", "tags_lower", "b"), ("any", "tag_prefixes", ["lang:"]),
                    ("value", "tag_prefixes", "x"), ("range", "valid_from", {"lte": 10.0}),
                    ("range", "valid_to", {"gt": 10.0}), ("range", "event_time", {"gte": 1.0, "lte": 2.0}),
                    ("ids", [str(mid)])]
    assert must_not == [("any", "tags_lower", ["old"]), ("ids", [str(mid)])]
    with pytest.raises(ValueError, match="UUID"):
        conditions(VectorFilter(ids=["not-a-uuid"]))


def test_translate_spells_each_condition_in_the_dialect() -> None:
    assert translate(None, server_dialect()) is None
    assert translate(VectorFilter(), server_dialect()) is None  # sets nothing: no filter
    mid = str(uuid.uuid4())
    got = translate(VectorFilter(scope="acme", states=["ACTIVE", "SUPERSEDED"], valid_at=5.0, exclude_ids=[mid]),
                    server_dialect())
    assert got == m.Filter(
        must=[m.FieldCondition(key="scope", match=m.MatchValue(value="acme")),
              m.FieldCondition(key="state", match=m.MatchAny(any=["ACTIVE", "SUPERSEDED"])),
              m.FieldCondition(key="valid_from", range=m.Range(lte=5.0)),
              m.FieldCondition(key="valid_to", range=m.Range(gt=5.0))],
        must_not=[m.HasIdCondition(has_id=[mid])])


def test_node_fields_are_the_full_nodes_values() -> None:
    memory = Memory(id="m1", scope="acme", content="Use tabs", tags=["Go", "style"], importance=0.7,
                    confidence=0.9, type=memory_pb2.MEMORY_TYPE_STYLE, relevance_score=0.25,
                    entities=[memory_pb2.Entity(name="Go", kind="tool", tag="entity:tool:go")],
                    last_access_time=ts(1700000000.123456), event_time=ts(1690000000.0))
    node = memory_to_node(memory)
    assert node_fields(memory, node) == node  # every property, built the same way
    assert node_fields(memory, ("relevance_score", "last_access_time")) == {
        "relevance_score": 0.25, "last_access_time": node["last_access_time"]}
    assert node_fields(memory, ("valid_to", "retract_time")) == {"valid_to": OPEN_END, "retract_time": OPEN_END}
    assert node_fields(memory, ("entities", "entity_tags")) == {
        "entities": '[{"name": "Go", "kind": "tool", "tag": "entity:tool:go"}]', "entity_tags": ["entity:tool:go"]}
    with pytest.raises(KeyError):
        node_fields(memory, ("not_a_property",))


def test_exact_tags_are_read_through_the_array_indexes() -> None:
    """Exact tags become index-backed membership terms (docs/benchmarks.md "tag-only listing":
    the list predicate alone read the whole scope); the list predicate stays only where the
    index cannot decide (prefix, or ``all`` with an entity tag)."""
    where, params = filter_where(Filters(scope="acme", tags=["go", "rust"], tag_match="exact"))
    assert where == "m.scope = $f_scope AND ($bt0 IN m.tags_lower OR $bt1 IN m.tags_lower)"
    assert params == {"f_scope": "acme", "bt0": "go", "bt1": "rust"}
    where, _ = filter_where(Filters(scope="acme", tags=["go", "entity:tool:go"], tag_mode="all", tag_match="exact"),
                            "n")
    assert where.startswith("n.scope = $f_scope AND $bt0 IN n.tags_lower AND all(f_want IN $f_tags WHERE f_want IN ")
    where, params = filter_where(Filters(scope="acme", tags=["entity:tool:go"], tag_match="exact"))
    assert where == "m.scope = $f_scope AND (($bt0 IN m.tags_lower OR $bt0 IN m.entity_tags))"
    where, params = filter_where(Filters(scope="acme", tags=["go"], tag_match="prefix"))
    assert "$bt0" not in where and "STARTS WITH f_want" in where and params["f_tags"] == ["go"]
    assert indexed_tags(Filters(scope="acme", tags=["go"], tag_match="prefix")) == ("", {}, True)
    assert indexed_tags(Filters(scope="acme")) == ("", {}, False)
    assert indexed_tags(Filters(scope="acme", tags=["a", "b"], tag_mode="all", tag_match="exact")) == (
        "$bt0 IN m.tags_lower AND $bt1 IN m.tags_lower", {"bt0": "a", "bt1": "b"}, False)
