"""Version diffs and the version fragments (automem/recall/servicer.py ``diff_memories``,
automem/graph/versions.py), without a server."""

from __future__ import annotations

from automem.common.model import Memory, memory_to_node, ts
from automem.graph import versions
from automem.recall.servicer import diff_memories


def test_diff_lists_changed_fields_with_both_values_and_skips_version_bookkeeping():
    a = Memory(id="m", content="one", tags=["x"], importance=0.2, version=1, update_time=ts(10.0))
    b = Memory(id="m", content="two", tags=["x", "y"], importance=0.2, version=3, update_time=ts(20.0),
               valid_to=ts(30.0))
    changes = {c.field: c for c in diff_memories(a, b)}
    assert sorted(changes) == ["content", "tags", "valid_to"]
    assert changes["content"].before.string_value == "one" and changes["content"].after.string_value == "two"
    assert [v.string_value for v in changes["tags"].after.list_value.values] == ["x", "y"]
    assert not changes["valid_to"].HasField("before") and changes["valid_to"].HasField("after")
    assert diff_memories(a, a) == []


def test_snapshot_reads_back_as_the_memory():
    memory = Memory(id="m", scope="s", content="c", tags=["T"], importance=0.5, version=4, record_time=ts(5.0))
    props = memory_to_node(memory)
    props = {k: v for k, v in props.items() if k != "id" and v is not None}
    props.update(memory_id="m", recorded_at=5.0, actor="alice", changed_fields=["content"])
    back = versions.snapshot_memory(props)
    assert (back.id, back.content, list(back.tags), back.version, back.importance) == ("m", "c", ["T"], 4, 0.5)


def test_fragments_keep_the_variables_the_query_needs():
    assert versions.before("old", ["new"]).startswith("WITH old, new, properties(old) AS _b_old ")
    tail = versions.record("a", ["r"])
    assert "CREATE (_v_a:MemoryVersion)" in tail and tail.rstrip().endswith("WITH a, r")
    assert "$v_actor" in tail and "$v_untracked" in tail
    assert versions.params()["v_actor"] == versions.SYSTEM_ACTOR  # no request bound
