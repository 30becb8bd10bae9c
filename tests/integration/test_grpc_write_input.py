"""What a hostile gRPC writer found on the ingest write path: each bad input answers
INVALID_ARGUMENT naming the field (never UNKNOWN), nothing is half-stored and nothing stored
is silently altered; a repeated request answers what the first one did, and an idempotency
key reused for another request is refused."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import field_mask_pb2, json_format, timestamp_pb2

from automem.graph.idempotency import node_key
from automem.v1 import ingest_service_pb2 as ingest
from automem.v1 import memory_pb2, recall_service_pb2
from tests.conftest import nested_object, struct_of

#: 0001-01-01T00:00:00Z, the earliest Timestamp a datetime holds.
YEAR_ONE = timestamp_pb2.Timestamp(seconds=-62135596800)




async def _refused(call, request, field: str) -> str:
    """Call ``call(request)``; assert INVALID_ARGUMENT whose message starts with ``field:``."""
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.value.code(), err.value.details())
    assert err.value.details().startswith(f"{field}:"), err.value.details()
    return err.value.details()


async def _count(service) -> int:
    return await service.ctx.graph.memories.count(service.scope)


async def _stored(client, memory_id: str) -> memory_pb2.Memory:
    return (await client.recall.GetMemory(recall_service_pb2.GetMemoryRequest(id=memory_id))).memory


def _mask(*paths: str) -> field_mask_pb2.FieldMask:
    return field_mask_pb2.FieldMask(paths=list(paths))


async def test_struct_metadata_gets_the_depth_limit_of_metadata_json(service) -> None:
    """A Struct 21+ levels deep was stored (only ``metadata_json`` was measured), and its
    export could not be imported again."""
    async with service.client() as client:
        for levels in (21, 25, 30):  # a level is 3 protobuf levels: upb stops at 100
            await _refused(client.ingest.CreateMemory, ingest.CreateMemoryRequest(memory=ingest.MemoryInput(
                content=f"deep struct {levels}", metadata=struct_of(nested_object(levels)))), "metadata")
        await _refused(client.ingest.BatchCreateMemories, ingest.BatchCreateMemoriesRequest(memories=[
            ingest.MemoryInput(content="fine"),
            ingest.MemoryInput(content="deep", metadata=struct_of(nested_object(25)))]), "memories[1].metadata")
        assert await _count(service) == 0
        kept = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(memory=ingest.MemoryInput(
            content="twenty levels", metadata=struct_of(nested_object(20)))))).memory
        await _refused(client.ingest.UpdateMemory, ingest.UpdateMemoryRequest(
            id=kept.id, memory=ingest.MemoryInput(metadata=struct_of({"more": nested_object(25)})),
            update_mask=_mask("metadata")), "metadata")
        assert (await _stored(client, kept.id)).version == kept.version
    assert await _count(service) == 1


async def test_lone_surrogates_and_deep_nesting_in_metadata_json_are_invalid_argument(service) -> None:
    """``{"a": "\\ud800"}`` (in a value or a key) was UNKNOWN UnicodeEncodeError and JSON
    nested 5,000 deep UNKNOWN RecursionError; on every write that takes metadata."""
    bad = {'{"a": "\\ud800"}': "metadata.a", '{"\\ud800": 1}': "metadata",
           '{"a": {"b": ["ok", "\\udfff"]}}': "metadata.a.b[1]",
           '{"a": ' + "[" * 5000 + "]" * 5000 + "}": "metadata"}
    async with service.client() as client:
        target = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="the memory to supersede and update")))).memory
        for text, field in bad.items():
            item = ingest.MemoryInput(content="metadata that is not text", metadata_json=text, metadata_set=True)
            details = await _refused(client.ingest.CreateMemory, ingest.CreateMemoryRequest(memory=item), field)
            if "ud" in text:
                assert "valid Unicode" in details
            else:
                assert "nested deeper than 20 levels" in details
            await _refused(client.ingest.BatchCreateMemories, ingest.BatchCreateMemoriesRequest(
                memories=[ingest.MemoryInput(content="first item is fine"), item]), f"memories[1].{field}")
            await _refused(client.ingest.SupersedeMemory, ingest.SupersedeMemoryRequest(
                id=target.id, replacement=item), f"replacement.{field}")
            await _refused(client.ingest.UpdateMemory, ingest.UpdateMemoryRequest(
                id=target.id, memory=ingest.MemoryInput(metadata_json=text, metadata_set=True),
                update_mask=_mask("metadata")), field)
        after = await _stored(client, target.id)
        assert after.state == memory_pb2.MEMORY_STATE_ACTIVE and after.version == target.version
    assert await _count(service) == 1


async def test_t_invalid_at_year_one_is_refused_naming_it(service) -> None:
    """A store recorded as already over at 0001-01-01T00:00:00 (no t_valid) overflowed
    computing the window's start 1 ms earlier: UNKNOWN OverflowError over gRPC, 500 over REST.
    Each surface names the field as its caller sent it: ``valid_to`` over gRPC, ``t_invalid``
    over REST."""
    async with service.client() as client:
        target = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="still the current fact")))).memory
        item = ingest.MemoryInput(content="over before it began", valid_to=YEAR_ONE)
        await _refused(client.ingest.CreateMemory, ingest.CreateMemoryRequest(memory=item), "valid_to")
        await _refused(client.ingest.BatchCreateMemories, ingest.BatchCreateMemoriesRequest(
            memories=[ingest.MemoryInput(content="a good item"), item]), "memories[1].valid_to")
        await _refused(client.ingest.SupersedeMemory, ingest.SupersedeMemoryRequest(id=target.id, replacement=item),
                       "replacement.valid_to")
        after = await _stored(client, target.id)
        assert after.state == memory_pb2.MEMORY_STATE_ACTIVE and after.version == target.version
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "over at year one", "t_invalid": "0001-01-01T00:00:00Z"})
        assert r.status_code == 400 and r.json()["error"].startswith("t_invalid:"), r.text
    assert await _count(service) == 1


async def test_a_repeated_supersede_answers_the_first_relation(service) -> None:
    async with service.client() as client:
        old = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="The office opens at eight")))).memory
        request = ingest.SupersedeMemoryRequest(
            id=old.id, replacement=ingest.MemoryInput(content="The office opens at nine"),
            relation_type=memory_pb2.RELATION_TYPE_EVOLVED_INTO, reason="summer hours", idempotency_key="sup-rel")
        first = await client.ingest.SupersedeMemory(request)
        again = await client.ingest.SupersedeMemory(request)
    assert first.HasField("relation") and again.HasField("relation")
    assert again.relation == first.relation
    assert (again.relation.type, again.relation.source_id, again.relation.target_id, again.relation.reason) == (
        memory_pb2.RELATION_TYPE_EVOLVED_INTO, old.id, first.replacement.id, "summer hours")
    assert again.replacement.id == first.replacement.id and again.superseded.id == old.id
    assert await _count(service) == 2


async def test_an_idempotency_key_names_one_request(service) -> None:
    """A key reused with the same content but other tags or importance answered the first
    memory as deduplicated, dropping the caller's values; a supersede's key reused by a store
    answered the replacement as that store. Now: the same request again answers the first
    result; any stored field different, or another operation, is INVALID_ARGUMENT naming
    ``idempotency_key``. A claim stored before fingerprints still compares by content."""
    create = ingest.CreateMemoryRequest
    async with service.client() as client:
        base = ingest.MemoryInput(content="Deploys happen on Tuesdays", tags=["ops"], importance=0.4,
                                  metadata_json='{"team": "web", "n": 1}', metadata_set=True)
        first = (await client.ingest.CreateMemory(create(memory=base, idempotency_key="k1"))).memory
        same = await client.ingest.CreateMemory(create(memory=base, idempotency_key="k1"))
        assert same.deduplicated and same.memory.id == first.id
        # The same request in another spelling: metadata as a Struct, a tag with spaces around it.
        spelled = ingest.MemoryInput(content=base.content, tags=[" ops "], importance=0.4,
                                     metadata=struct_of({"n": 1, "team": "web"}))
        assert (await client.ingest.CreateMemory(create(memory=spelled, idempotency_key="k1"))).memory.id == first.id
        changes = {"tags": {"tags": ["ops", "different"]}, "importance": {"importance": 0.99},
                   "content": {"content": "deploys happen on tuesdays"}, "type": {"type": "Habit"},
                   "confidence": {"confidence": 0.5}, "metadata": {"metadata_json": '{"team": "api", "n": 1}'},
                   "timestamp": {"event_time": timestamp_pb2.Timestamp(seconds=1_700_000_000)},
                   "require_review": {"require_review": True}}
        for name, change in changes.items():
            other = ingest.MemoryInput()
            other.CopyFrom(base)
            if name == "tags":
                del other.tags[:]
                other.tags.extend(change["tags"])
            elif name == "timestamp":
                other.event_time.CopyFrom(change["event_time"])
            else:
                setattr(other, *next(iter(change.items())))
            details = await _refused(client.ingest.CreateMemory, create(memory=other, idempotency_key="k1"),
                                     "idempotency_key")
            assert "different request" in details, (name, details)
        kept = await _stored(client, first.id)
        assert (list(kept.tags), kept.importance, kept.version) == (["ops"], 0.4, first.version)

        items = [ingest.MemoryInput(content=f"batch item {i}") for i in range(2)]
        batch = await client.ingest.BatchCreateMemories(ingest.BatchCreateMemoriesRequest(
            memories=items, idempotency_key="b1"))
        again = await client.ingest.BatchCreateMemories(ingest.BatchCreateMemoriesRequest(
            memories=items, idempotency_key="b1"))
        assert [m.id for m in again.memories] == [m.id for m in batch.memories] and all(again.deduplicated)
        retagged = [ingest.MemoryInput(content=f"batch item {i}", tags=["other"], importance=0.9) for i in range(2)]
        await _refused(client.ingest.BatchCreateMemories, ingest.BatchCreateMemoriesRequest(
            memories=retagged, idempotency_key="b1"), "idempotency_key")
        assert [list((await _stored(client, m.id)).tags) for m in batch.memories] == [[], []]

        # Another operation: a supersede's key in a store, a store's key in a supersede or a batch.
        target = (await client.ingest.CreateMemory(create(memory=ingest.MemoryInput(content="Standup at nine")))).memory
        replaced = await client.ingest.SupersedeMemory(ingest.SupersedeMemoryRequest(
            id=target.id, replacement=ingest.MemoryInput(content="Standup at ten"), idempotency_key="s1"))
        details = await _refused(client.ingest.CreateMemory, create(
            memory=ingest.MemoryInput(content="Standup at ten"), idempotency_key="s1"), "idempotency_key")
        assert "supersede" in details
        other_target = (await client.ingest.CreateMemory(create(
            memory=ingest.MemoryInput(content="Lunch at noon")))).memory
        await _refused(client.ingest.SupersedeMemory, ingest.SupersedeMemoryRequest(
            id=other_target.id, replacement=ingest.MemoryInput(content=base.content), idempotency_key="k1"),
            "idempotency_key")
        await _refused(client.ingest.BatchCreateMemories, ingest.BatchCreateMemoriesRequest(
            memories=[base], idempotency_key="k1"), "idempotency_key")
        # The supersede's own retry with another reason or relation is another request too.
        await _refused(client.ingest.SupersedeMemory, ingest.SupersedeMemoryRequest(
            id=target.id, replacement=ingest.MemoryInput(content="Standup at ten"), reason="moved",
            idempotency_key="s1"), "idempotency_key")
        assert (await _stored(client, other_target.id)).state == memory_pb2.MEMORY_STATE_ACTIVE
        assert (await _stored(client, replaced.replacement.id)).version == replaced.replacement.version

        # A claim stored without a fingerprint (before this rule) still answers by content.
        await service.ctx.graph.query("MATCH (k:IdempotencyKey {key: $key}) SET k.request = NULL",
                                      {"key": node_key(service.scope, "k1")})
        legacy = ingest.MemoryInput(content=base.content, tags=["retried"])
        assert (await client.ingest.CreateMemory(create(memory=legacy, idempotency_key="k1"))).memory.id == first.id
        await _refused(client.ingest.CreateMemory, create(
            memory=ingest.MemoryInput(content="other content"), idempotency_key="k1"), "idempotency_key")
    assert await _count(service) == 6


async def test_update_mask_naming_a_field_not_set_is_refused(service) -> None:
    """``importance`` or ``confidence`` in the mask but not in the memory wrote 0.0 and made
    a new version; the REST gateway refuses their null. Type and metadata likewise."""
    async with service.client() as client:
        memory = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(memory=ingest.MemoryInput(
            content="Masks name what they set", importance=0.7, confidence=0.8, type="Decision",
            metadata_json='{"k": "v"}', metadata_set=True)))).memory
        for path in ("importance", "confidence", "type", "metadata"):
            details = await _refused(client.ingest.UpdateMemory, ingest.UpdateMemoryRequest(
                id=memory.id, memory=ingest.MemoryInput(), update_mask=_mask(path)), path)
            assert "in update_mask but not set" in details
        # One bad path among good ones changes nothing either.
        await _refused(client.ingest.UpdateMemory, ingest.UpdateMemoryRequest(
            id=memory.id, memory=ingest.MemoryInput(importance=0.2), update_mask=_mask("importance", "confidence")),
            "confidence")
        after = await _stored(client, memory.id)
        assert (after.version, round(after.importance, 6), round(after.confidence, 6)) == (memory.version, 0.7, 0.8)
        assert after.type == memory_pb2.MEMORY_TYPE_DECISION and json_format.MessageToDict(after.metadata) == {"k": "v"}
        # Set, they apply; 0.0 is a value when it is sent.
        updated = await client.ingest.UpdateMemory(ingest.UpdateMemoryRequest(
            id=memory.id, memory=ingest.MemoryInput(importance=0.0), update_mask=_mask("importance")))
        assert updated.memory.importance == 0.0 and updated.memory.version == memory.version + 1


async def test_a_relation_type_number_the_enum_lacks_is_refused_naming_the_field(service) -> None:
    """Break-it review: a RelationType number no enum value has (99) answered UNKNOWN
    ("Enum RelationType has no name defined for value 99") from CreateRelation and
    SupersedeMemory, and a BatchCreateRelations failed as a whole with UNKNOWN after writing
    the items before it, against its contract (each item on its own, failures by index).
    It is INVALID_ARGUMENT naming ``relation.type`` / ``relation_type`` now, and a batch's
    bad item fails alone."""
    async with service.client() as client:
        a, b = [(await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content=text)))).memory.id for text in ("Relation probe one", "Relation probe two")]
        await _refused(client.ingest.CreateRelation, ingest.CreateRelationRequest(
            relation=memory_pb2.Relation(source_id=a, target_id=b, strength=0.5, type=99)), "relation.type")
        batch = await client.ingest.BatchCreateRelations(ingest.BatchCreateRelationsRequest(requests=[
            ingest.CreateRelationRequest(relation=memory_pb2.Relation(source_id=a, target_id=b, strength=0.5),
                                         type_name="LEADS_TO"),
            ingest.CreateRelationRequest(relation=memory_pb2.Relation(source_id=a, target_id=b, strength=0.5,
                                                                      type=99))]))
        assert [(f.index, f.field, f.code) for f in batch.failures] == [
            (1, "relation.type", grpc.StatusCode.INVALID_ARGUMENT.value[0])]
        assert [r.type for r in batch.relations] == [memory_pb2.RELATION_TYPE_LEADS_TO]
        await _refused(client.ingest.SupersedeMemory, ingest.SupersedeMemoryRequest(
            id=a, replacement=ingest.MemoryInput(content="Relation probe one, corrected"), relation_type=99),
            "relation_type")
        assert (await _stored(client, a)).state == memory_pb2.MEMORY_STATE_ACTIVE
    assert await _count(service) == 2


async def test_a_negative_etag_is_bad_input_not_a_version_conflict(service) -> None:
    """Break-it review: ``etag=-1`` answered ABORTED ("is at version 2, not -1") from
    UpdateMemory, DeleteMemory and SupersedeMemory, while REST refused it as bad input. 0
    means no check and a version is 1 or more: INVALID_ARGUMENT naming ``etag`` now, nothing
    changed."""
    async with service.client() as client:
        memory = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="Etag probe: the lights go off at ten")))).memory
        await _refused(client.ingest.UpdateMemory, ingest.UpdateMemoryRequest(id=memory.id, etag=-1, add_tags=["x"]),
                       "etag")
        await _refused(client.ingest.DeleteMemory, ingest.DeleteMemoryRequest(id=memory.id, etag=-1), "etag")
        await _refused(client.ingest.SupersedeMemory, ingest.SupersedeMemoryRequest(
            id=memory.id, etag=-1, replacement=ingest.MemoryInput(content="Etag probe: at eleven")), "etag")
        after = await _stored(client, memory.id)
    assert (after.version, after.state, list(after.tags)) == (memory.version, memory.state, list(memory.tags))
    assert await _count(service) == 1


#: Before 0001-01-01T00:00:00Z: a Timestamp no datetime holds.
BEFORE_YEAR_ONE = timestamp_pb2.Timestamp(seconds=YEAR_ONE.seconds - 1)
JAN, FEB = timestamp_pb2.Timestamp(seconds=1_767_225_600), timestamp_pb2.Timestamp(seconds=1_769_904_000)


async def test_grpc_errors_name_the_proto_fields_the_caller_sent(service) -> None:
    """INVALID_ARGUMENT over gRPC named AutoMem's REST fields (``timestamp``, ``t_invalid``,
    ``t_valid``, the window's ``start``), which no gRPC request has: it names the proto
    fields now (``event_time``, ``valid_to``, ``valid_from``, ``start_time``/``end_time``)."""
    async with service.client() as client:
        details = await _refused(client.ingest.CreateMemory, ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="before the year one", event_time=BEFORE_YEAR_ONE)), "event_time")
        assert "timestamp" not in details
        await _refused(client.ingest.BatchCreateMemories, ingest.BatchCreateMemoriesRequest(memories=[
            ingest.MemoryInput(content="fine"),
            ingest.MemoryInput(content="before the year one", event_time=BEFORE_YEAR_ONE)]), "memories[1].event_time")
        details = await _refused(client.ingest.CreateMemory, ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="ends before it begins", valid_from=FEB, valid_to=JAN)), "valid_to")
        assert details == "valid_to: must be after valid_from"
        kept = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="a memory to update", valid_from=FEB)))).memory
        details = await _refused(client.ingest.UpdateMemory, ingest.UpdateMemoryRequest(
            id=kept.id, memory=ingest.MemoryInput(valid_to=JAN), update_mask=_mask("valid_to")), "valid_to")
        assert details == "valid_to: must be after valid_from"
        await _refused(client.ingest.UpdateMemory, ingest.UpdateMemoryRequest(
            id=kept.id, memory=ingest.MemoryInput(), update_mask=_mask("event_time")), "event_time")
        details = await _refused(client.recall.SearchMemories, recall_service_pb2.SearchMemoriesRequest(
            query="anything", start_time=FEB, end_time=JAN), "start_time")
        assert details == "start_time: must not be after end_time"
    assert await _count(service) == 1


async def test_rest_errors_name_the_automem_fields_the_caller_sent(service) -> None:
    """The same refusals over REST name AutoMem's fields (``timestamp``, ``t_invalid``,
    ``t_valid``, ``start``/``end``; the gateway renames the service's proto names), in the
    message and in a batch item's path."""
    async with service.http() as http:
        r = await http.post("/memory", json={"content": "ends before it begins", "t_valid": "2026-02-01T00:00:00Z",
                                             "t_invalid": "2026-01-01T00:00:00Z"})
        assert r.status_code == 400 and r.json()["error"] == "t_invalid: must be after t_valid", r.text
        r = await http.post("/memory/batch", json={"memories": [
            {"content": "fine"}, {"content": "ends before it begins", "t_valid": "2026-02-01T00:00:00Z",
                                  "t_invalid": "2026-01-01T00:00:00Z"}]})
        assert r.status_code == 400 and r.json()["error"] == "memories[1].t_invalid: must be after t_valid", r.text
        r = await http.post("/memory", json={"content": "a memory to update", "t_valid": "2026-02-01T00:00:00Z"})
        assert r.status_code == 201, r.text
        memory_id = r.json()["memory_id"]
        r = await http.patch(f"/memory/{memory_id}", json={"t_invalid": "2026-01-01T00:00:00Z"})
        assert r.status_code == 400 and r.json()["error"] == "t_invalid: must be after t_valid", r.text
        r = await http.post("/memory", json={"content": "before the year one", "timestamp": "0001-01-01T00:00:00+05:00"})
        assert r.status_code == 400 and r.json()["error"].startswith("timestamp:"), r.text
        r = await http.get("/recall", params={"query": "anything", "start": "2026-02-01T00:00:00Z",
                                              "end": "2026-01-01T00:00:00Z"})
        assert r.status_code == 400 and r.json()["error"] == "start: must not be after end", r.text
    assert await _count(service) == 1


def _link(source: str, target: str, **fields) -> ingest.CreateRelationRequest:
    return ingest.CreateRelationRequest(relation=memory_pb2.Relation(source_id=source, target_id=target,
                                                                     strength=fields.pop("strength", 0.5)), **fields)


async def test_relation_and_by_tag_errors_name_the_proto_fields_over_grpc(service) -> None:
    """Break-it review: gRPC answers named the REST fields: ``ListMemoriesByTag{page_size:
    0}`` said ``limit: ...``, CreateRelation ``memory1_id: both memory ids are required``
    (whichever end was missing) and ``memory2_id: cannot associate...``, a 501-item
    BatchCreateRelations ``associations: ...``, and each RelationFailure.field the same.
    They name the request's proto paths now (``page_size``, ``relation.source_id`` /
    ``relation.target_id`` for the end at fault, ``type_name``, ``relation.strength``,
    ``requests``)."""
    async with service.client() as client:
        a, b = [(await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content=text)))).memory.id for text in ("Proto names one", "Proto names two")]
        for size in (0, -3):
            details = await _refused(client.recall.ListMemoriesByTag, recall_service_pb2.ListMemoriesByTagRequest(
                tags=["x"], page_size=size), "page_size")
            assert "limit" not in details.split(":")[0]
        await _refused(client.ingest.CreateRelation, _link(a, ""), "relation.target_id")
        await _refused(client.ingest.CreateRelation, _link("", b), "relation.source_id")
        await _refused(client.ingest.CreateRelation, _link(a, a), "relation.target_id")
        await _refused(client.ingest.CreateRelation, _link(a, b, type_name="LIKES"), "type_name")
        await _refused(client.ingest.CreateRelation, _link(a, b, strength=2.0), "relation.strength")
        await _refused(client.ingest.BatchCreateRelations, ingest.BatchCreateRelationsRequest(
            requests=[_link(a, b)] * 501), "requests")
        missing = "00000000-0000-0000-0000-000000000000"
        batch = await client.ingest.BatchCreateRelations(ingest.BatchCreateRelationsRequest(requests=[
            _link(a, ""), _link(a, a), _link(a, b, type_name="LIKES"), _link(a, missing), _link(a, b)]))
        assert [(f.index, f.field) for f in batch.failures] == [
            (0, "relation.target_id"), (1, "relation.target_id"), (2, "type_name"), (3, "relation.target_id")]
        assert all(f.message.startswith(f.field + ":") for f in batch.failures[:3]), batch.failures
        assert list(batch.indexes) == [4]


async def test_relation_and_by_tag_errors_name_the_automem_fields_over_rest(service) -> None:
    """The same refusals over REST keep naming AutoMem's fields (``limit``, ``memory1_id``,
    ``memory2_id``, ``type``, ``strength``, ``associations``): the gateway renames the
    service's proto paths for these routes, in a batch item's error too."""
    async with service.http() as http:
        ids = []
        for text in ("Rest names one", "Rest names two"):
            r = await http.post("/memory", json={"content": text})
            assert r.status_code == 201, r.text
            ids.append(r.json()["memory_id"])
        a, b = ids
        for limit in (0, -3):
            r = await http.get("/memory/by-tag", params={"tags": "x", "limit": limit})
            assert r.status_code == 400 and r.json()["error"].startswith("limit: must be at least 1"), r.text
        for body, field in (({"memory1_id": a}, "memory2_id"), ({"memory2_id": b}, "memory1_id"),
                            ({"memory1_id": a, "memory2_id": a}, "memory2_id"),
                            ({"memory1_id": a, "memory2_id": b, "type": "LIKES"}, "type"),
                            ({"memory1_id": a, "memory2_id": b, "strength": 2}, "strength")):
            r = await http.post("/associate", json=body)
            assert r.status_code == 400 and r.json()["error"].startswith(f"{field}: "), (body, r.text)
        r = await http.post("/associate", json={"associations": [{"memory1_id": a, "memory2_id": b}] * 501})
        assert r.status_code == 400 and r.json()["error"].startswith("associations: 501 items"), r.text
        r = await http.post("/associate", json={"associations": [
            {"memory1_id": a, "memory2_id": a}, {"memory1_id": a, "memory2_id": b, "type": "LIKES"},
            {"memory1_id": a, "memory2_id": b}]})
        assert r.status_code == 207, r.text
        errors = [f["error"] for f in r.json()["failed"]]
        assert errors[0].startswith("memory2_id: cannot associate") and errors[1].startswith("type: "), errors


async def test_a_relation_end_not_found_names_its_field_on_every_surface(service) -> None:
    """CreateRelation with an unknown end answered NOT_FOUND "memory X not found", naming no
    field (its RelationFailure.field named it, its message did not, so the gateway could not
    rename it: REST's /associate said the same), while its other refusals name the end. It
    begins with the end's proto path now (``relation.target_id: memory X not found``), which
    REST answers as AutoMem's ``memory2_id`` (404; a batch item's error too) and MCP as the
    tool's argument, single or batch (``associations[0].memory1_id``)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    missing = "00000000-0000-4000-8000-000000000000"
    async with service.client() as client:
        a = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="An end that exists")))).memory.id
        for request, field in ((_link(a, missing), "relation.target_id"), (_link(missing, a), "relation.source_id"),
                               (_link(missing, a, type_name="INVALIDATED_BY"), "relation.source_id")):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.ingest.CreateRelation(request)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND, err.value.details()
            assert err.value.details().startswith(f"{field}: memory "), err.value.details()
        batch = await client.ingest.BatchCreateRelations(ingest.BatchCreateRelationsRequest(requests=[
            _link(a, missing), _link(missing, a)]))
        assert [(f.field, f.message.startswith(f.field + ": memory ")) for f in batch.failures] == [
            ("relation.target_id", True), ("relation.source_id", True)], batch.failures
    async with service.http() as http:
        for body, field in (({"memory1_id": a, "memory2_id": missing}, "memory2_id"),
                            ({"memory1_id": missing, "memory2_id": a}, "memory1_id")):
            r = await http.post("/associate", json=body)
            assert r.status_code == 404 and r.json()["error"] == f"{field}: memory {missing} not found", r.text
        r = await http.post("/associate", json={"associations": [{"memory1_id": a, "memory2_id": missing},
                                                                 {"memory1_id": missing, "memory2_id": a}]})
        assert r.status_code in (207, 404), r.text
        errors = [f["error"] for f in r.json()["failed"]]
        assert errors == [f"memory2_id: memory {missing} not found", f"memory1_id: memory {missing} not found"], errors
    headers = {"X-Automem-Scope": service.scope}
    async with Client(streamable_http_client(service.url + "/mcp",
                                             http_client=create_mcp_http_client(headers=headers))) as mcp:
        result = await mcp.call_tool("associate_memories", {"memory1_id": a, "memory2_id": missing})
        assert result.is_error and f": memory2_id: memory {missing} not found" in result.content[0].text, result
        result = await mcp.call_tool("associate_memories", {"associations": [
            {"memory1_id": missing, "memory2_id": a}]})
        text = result.content[0].text
        assert result.is_error and f"[0] associations[0].memory1_id: memory {missing} not found" in text, text


async def test_supersede_errors_name_the_replacement_fields_as_each_caller_sent_them(service) -> None:
    """gRPC SupersedeMemory named its replacement's fields without the ``replacement.``
    prefix (``tags[0]``, ``content``, ``valid_to``), fields SupersedeMemoryRequest does not
    have: it names ``replacement.tags[0]`` etc. now, while REST's ``:supersede`` and a store
    with ``supersedes_memory_id`` and the SDK over gRPC keep naming the fields their callers
    sent at the top level (``tags[0]``, ``t_invalid``)."""
    from automem_client import AsyncClient
    from automem_client import errors as client_errors

    async with service.client() as client:
        target = (await client.ingest.CreateMemory(ingest.CreateMemoryRequest(
            memory=ingest.MemoryInput(content="The stand-up is at nine")))).memory
        for item, field in ((ingest.MemoryInput(content="The stand-up is at ten", tags=["ok", " "]),
                             "replacement.tags[1]"),
                            (ingest.MemoryInput(content="   "), "replacement.content"),
                            (ingest.MemoryInput(content="The stand-up is at ten", importance=2.0),
                             "replacement.importance"),
                            (ingest.MemoryInput(content="The stand-up is at ten", valid_from=FEB, valid_to=JAN),
                             "replacement.valid_to")):
            for key in ("", "sup-names"):  # a keyed request is fingerprinted first: the same name
                await _refused(client.ingest.SupersedeMemory, ingest.SupersedeMemoryRequest(
                    id=target.id, replacement=item, idempotency_key=key), field)
    async with service.http() as http:
        for path, body in ((f"/v1/memories/{target.id}:supersede", {}), ("/memory", {"supersedes_memory_id": target.id})):
            r = await http.post(path, json={**body, "content": "The stand-up is at ten", "tags": ["ok", " "]})
            assert r.status_code == 400 and r.json()["error"].startswith("tags[1]: "), r.text
            r = await http.post(path, json={**body, "content": "The stand-up is at ten",
                                            "t_valid": "2026-02-01T00:00:00Z", "t_invalid": "2026-01-01T00:00:00Z"})
            assert r.status_code == 400 and r.json()["error"] == "t_invalid: must be after t_valid", r.text
    sdk = AsyncClient.grpc(service.grpc, scope=service.scope, timeout=30)
    try:
        with pytest.raises(client_errors.InvalidArgument) as bad:
            await sdk.supersede(target.id, "The stand-up is at ten", t_valid="2026-02-01T00:00:00Z",
                                t_invalid="2026-01-01T00:00:00Z")
        assert (bad.value.field, bad.value.message) == ("t_invalid", "t_invalid: must be after t_valid"), bad.value
        with pytest.raises(client_errors.InvalidArgument) as bad:
            await sdk.supersede(target.id, "The stand-up is at ten", tags=["ok", " "])
        assert bad.value.field == "tags[1]", bad.value
    finally:
        await sdk.close()
    async with service.client() as client:
        assert (await _stored(client, target.id)).state == memory_pb2.MEMORY_STATE_ACTIVE
    assert await _count(service) == 1


async def test_an_empty_relation_batch_is_refused_as_an_empty_memory_batch_is(service) -> None:
    """BatchCreateRelations with no items answered OK (nothing created), while an empty
    BatchCreateMemories, REST's ``/associate`` with ``associations: []`` and MCP's
    ``associate_memories`` refuse it: INVALID_ARGUMENT naming ``requests`` now (REST: 400
    naming ``associations``, as before)."""
    async with service.client() as client:
        details = await _refused(client.ingest.BatchCreateRelations, ingest.BatchCreateRelationsRequest(), "requests")
        assert "at least one" in details
        await _refused(client.ingest.BatchCreateMemories, ingest.BatchCreateMemoriesRequest(), "memories")
    async with service.http() as http:
        r = await http.post("/associate", json={"associations": []})
        assert r.status_code == 400 and r.json()["error"].startswith("associations: "), r.text
