"""What a purge takes from the event stream and the outbox (automem/ingest/purge.py
``Selection``): every event naming a purged memory (subject, before/after, either end of a
relation), the scope's events and activity on a scope purge, never the content-free
MEMORY_PURGED notices it leaves; queued events keep their ids but lose their content."""

from __future__ import annotations

from automem.ingest.purge import Purger, Selection, is_purge_notice
from automem.v1 import event_stream_pb2, events_pb2, memory_pb2

E = events_pb2


def _event(kind: int, memory_id: str, scope: str = "acme", **parts) -> events_pb2.MemoryEvent:
    return E.MemoryEvent(event_id=f"e-{memory_id}-{kind}", type=kind, memory_id=memory_id, scope=scope, **parts)


def test_events_naming_the_memory_anywhere_are_selected() -> None:
    pick = Selection(["m1"], "acme", whole_scope=False)
    assert pick.event(_event(E.EVENT_TYPE_MEMORY_CREATED, "m1", after=memory_pb2.Memory(id="m1", content="x")))
    relation = memory_pb2.Relation(source_id="m2", target_id="m1", scope="acme")
    assert pick.event(_event(E.EVENT_TYPE_MEMORY_SUPERSEDED, "m2", relation=relation))
    assert not pick.event(_event(E.EVENT_TYPE_MEMORY_CREATED, "m2"))
    assert not pick.event(_event(E.EVENT_TYPE_MEMORY_CREATED, "m3", scope="acme"))  # by id only


def test_scope_purge_selects_the_scope_and_its_activity_only() -> None:
    pick = Selection([], "acme", whole_scope=True)
    assert pick.event(_event(E.EVENT_TYPE_MEMORY_UPDATED, "m9"))
    assert not pick.event(_event(E.EVENT_TYPE_MEMORY_UPDATED, "m9", scope="globex"))
    ours = event_stream_pb2.ActivityEvent(event_id="a", kind="memory.recall", scope="acme").SerializeToString()
    theirs = event_stream_pb2.ActivityEvent(event_id="b", kind="memory.recall", scope="globex").SerializeToString()
    assert pick.message("p.activity.memory_recall", ours, is_activity=True)
    assert not pick.message("p.activity.memory_recall", theirs, is_activity=True)
    assert not pick.message("p.dlq.enrich", b"\xff\xfe not an event", is_activity=False)
    assert not Selection(["m1"], "acme", whole_scope=False).message("p.activity.x", ours, is_activity=True)


def test_purge_notices_stay_and_carry_no_content() -> None:
    notice = Purger._notice({"id": "p1", "actor": "root", "scope": "acme", "reason": "erasure"}, "m1")
    assert is_purge_notice(notice) and notice.memory_id == "m1" and notice.reason == "purge p1: erasure"
    assert not notice.HasField("before") and not notice.HasField("after")
    again = Purger._notice({"id": "p1", "actor": "root", "scope": "acme", "reason": "erasure"}, "m1")
    assert again.event_id == notice.event_id  # a resumed purge republishes the same event id
    assert not Selection(["m1"], "acme", whole_scope=True).event(notice)
    old_style = _event(E.EVENT_TYPE_MEMORY_PURGED, "m1", before=memory_pb2.Memory(id="m1", content="secret"))
    assert Selection(["m1"], "acme", whole_scope=False).event(old_style)  # a purge event with content goes


def test_queued_events_lose_their_content_and_keep_their_ids() -> None:
    pick = Selection(["m1"], "acme", whole_scope=False)
    queued = _event(E.EVENT_TYPE_MEMORY_UPDATED, "m1", before=memory_pb2.Memory(id="m1", content="secret"),
                    after=memory_pb2.Memory(id="m1", content="secret 2"), reason="typo", version=3,
                    embedding=[0.1, 0.2])
    stripped = pick.strip(queued)
    assert stripped is not None and (stripped.event_id, stripped.type, stripped.memory_id, stripped.version) == (
        queued.event_id, queued.type, "m1", 3)
    assert b"secret" not in stripped.SerializeToString() and not stripped.embedding
    assert pick.strip(_event(E.EVENT_TYPE_MEMORY_UPDATED, "m2")) is None
