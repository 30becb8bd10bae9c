"""The event stream's names and envelope (automem/gateway/routes_stream.py) against AutoMem's
(automem/api/stream.py, automem/api/runtime_memory_routes.py in verygoodplugins/automem)."""

from __future__ import annotations

import json

from automem.common.lifecycle import make_activity, make_event
from automem.common.model import Memory
from automem.gateway.routes_stream import EVENT_NAMES, stream_message
from automem.v1 import event_stream_pb2, events_pb2, memory_pb2


def test_every_event_type_has_an_automem_style_name() -> None:
    # A new EventType must get its name here, or it would reach clients as "memory.event".
    types = {v.number for v in events_pb2.EventType.DESCRIPTOR.values} - {events_pb2.EVENT_TYPE_UNSPECIFIED}
    assert types <= set(EVENT_NAMES)
    assert EVENT_NAMES[events_pb2.EVENT_TYPE_MEMORY_CREATED] == "memory.store"
    assert EVENT_NAMES[events_pb2.EVENT_TYPE_MEMORY_UPDATED] == "memory.update"
    assert EVENT_NAMES[events_pb2.EVENT_TYPE_MEMORY_DELETED] == "memory.delete"
    assert EVENT_NAMES[events_pb2.EVENT_TYPE_RELATION_CREATED] == "memory.associate"
    assert EVENT_NAMES[events_pb2.EVENT_TYPE_MEMORY_ENRICHED] == "enrichment.complete"


def test_a_store_is_automems_envelope_with_its_fields() -> None:
    memory = Memory(id="m1", scope="s", content="x" * 150, type=memory_pb2.MEMORY_TYPE_DECISION, importance=0.9,
                    tags=["a", "b", "c", "d", "e", "f"], version=1)
    event = make_event(events_pb2.EVENT_TYPE_MEMORY_CREATED, before=None, after=memory, actor="k")
    sse = stream_message(event_stream_pb2.StreamMemoryEventsResponse(sequence=42, memory_event=event))
    body = json.loads(sse.data)
    assert sse.id == "42" and sse.event is None  # unnamed messages: AutoMem's clients use onmessage
    assert set(body) == {"type", "timestamp", "data", "event_id"} and body["type"] == "memory.store"
    assert body["data"] == {"scope": "s", "actor": "k", "id": "m1", "content_preview": "x" * 100 + "...",
                            "type": "Decision", "importance": 0.9, "tags": ["a", "b", "c", "d", "e"],
                            "size_bytes": 150}


def test_activity_numbers_are_json_integers() -> None:
    act = make_activity("memory.recall", "s", {"query": "q", "limit": 5, "result_count": 0, "elapsed_ms": 12,
                                               "tags": []}, actor="k")
    body = json.loads(stream_message(event_stream_pb2.StreamMemoryEventsResponse(sequence=7, activity_event=act)).data)
    assert body["type"] == "memory.recall"
    assert body["data"] == {"query": "q", "limit": 5, "result_count": 0, "elapsed_ms": 12, "tags": [],
                            "scope": "s", "actor": "k"}
    assert type(body["data"]["limit"]) is int
