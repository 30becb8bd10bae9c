"""The pure input checks of automem/ingest/logic.py: metadata in both forms gets the same
limits, text that is not Unicode and nesting past the limit are InvalidArgument naming the
field, a window that cannot start is refused, an update mask names only fields it sets, and
an idempotency fingerprint tells requests apart by what they store."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest
from google.protobuf import timestamp_pb2

from automem.common.errors import InvalidArgument
from automem.common.model import metadata_dict, node_fields
from automem.common.settings import Settings
from automem.ingest import logic
from automem.v1 import ingest_service_pb2 as ingest
from automem.v1 import memory_pb2
from tests.conftest import nested_object, struct_of

SETTINGS = Settings(port=0, metrics_port=0)
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)




def _refused(call, *args, field: str, **kwargs) -> str:
    with pytest.raises(InvalidArgument) as err:
        call(*args, **kwargs)
    assert err.value.field == field and err.value.message.startswith(f"{field}:"), err.value.message
    return err.value.message


def test_struct_and_json_metadata_share_the_depth_limit() -> None:
    assert logic.parse_metadata(ingest.MemoryInput(metadata=struct_of(nested_object(20)))) == nested_object(20)
    for levels in (21, 30):
        _refused(logic.parse_metadata, ingest.MemoryInput(metadata=struct_of(nested_object(levels))), field="metadata")
    _refused(logic.parse_metadata, ingest.MemoryInput(metadata_json='{"a": ' + "[" * 5000 + "]" * 5000 + "}"),
             field="metadata")


@pytest.mark.parametrize(("text", "field"), [('{"a": "\\ud800"}', "metadata.a"), ('{"\\udc00x": 1}', "metadata"),
                                              ('{"a": [1, {"b": "x\\udfff"}]}', "metadata.a[1].b")])
def test_a_lone_surrogate_in_metadata_json_is_refused_by_path(text: str, field: str) -> None:
    message = _refused(logic.parse_metadata, ingest.MemoryInput(metadata_json=text), field=field)
    assert "valid Unicode" in message
    # A surrogate pair is one character: fine.
    assert logic.parse_metadata(ingest.MemoryInput(metadata_json='{"a": "\\ud83e\\udde0"}')) == {"a": "🧠"}


@pytest.mark.parametrize(("text", "field", "words"), [
    ('{"x": 1, "x": 2}', "metadata.x", "the key is given more than once in one object"),
    ('{"a": [0, {"y": 1, "y": 2}]}', "metadata.a[1].y", "the key is given more than once in one object"),
    ('{"x": 1e-400}', "metadata.x", "1e-400 cannot be held exactly by a 64-bit float (it would read back as 0.0)"),
    ('{"a": {"b": [-1e-400]}}', "metadata.a.b[0]", "-1e-400 cannot be held exactly by a 64-bit float"),
    ('{"x": 0.1000000000000000000001}', "metadata.x", "0.1000000000000000000001 cannot be held exactly"),
    ('{"x": 1e400}', "metadata.x", "1e400 cannot be held exactly by a 64-bit float (it would read back as inf)"),
])
def test_metadata_json_refuses_repeated_keys_and_inexact_numbers_by_path(text: str, field: str, words: str) -> None:
    message = _refused(logic.parse_metadata, ingest.MemoryInput(metadata_json=text), field=field)
    assert message.startswith(f"{field}: {words}"), message


#: Text that shows nothing although the old check (whitespace or category Cf) let it through:
#: Hangul fillers (U+3164, U+115F, U+1160, U+FFA0), the combining grapheme joiner U+034F and a
#: variation selector (Default_Ignorable_Code_Point), and U+2800 braille pattern blank.
NEWLY_BLANK = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u2800", "\u034f", "\u3164\u2800", " \ufe0f\u3164\t"]
#: Text that shows something and stays accepted: Korean (syllables, compatibility jamo, an old
#: syllable spelled with a choseong filler), emoji with ZWJ sequences and variation selectors,
#: right-to-left text with bidi marks, a braille word.
VISIBLE = ["안녕하세요 세계", "ㅋㅋㅋ", "\u115f\u1161", "\u3164안녕", "👩\u200d💻 and 🏳️\u200d🌈",
           "\u200fשלום עולם\u200f", "\u202bمرحبا\u202c", "⠓⠑⠇⠇⠕\u2800⠺⠕⠗⠇⠙", "a\u3164"]


@pytest.mark.parametrize("blank", NEWLY_BLANK)
def test_content_and_tags_of_only_default_ignorable_or_filler_characters_are_refused(blank: str) -> None:
    """Re-check round: a tag of a Hangul filler or U+2800 was stored, and content ``"\u3164\u2800"``
    was accepted as a memory, while U+200B, U+00A0 and U+3000 are refused."""
    message = _refused(logic.validate_content, blank, SETTINGS, field="content")
    assert "must not be empty" in message
    message = _refused(logic.validate_tags, ["ok", blank], field="tags[1]")
    assert "must not be empty" in message


@pytest.mark.parametrize("text", VISIBLE)
def test_text_that_shows_something_is_still_accepted(text: str) -> None:
    assert logic.validate_content(text, SETTINGS) == text
    assert logic.validate_tags([text]) == [text.strip()]


@pytest.mark.parametrize("blank", NEWLY_BLANK)
def test_the_openapi_content_and_tag_patterns_refuse_what_the_service_refuses(blank: str) -> None:
    import regex

    from automem.gateway.schemas import declared_limits

    _, bodies = declared_limits(SETTINGS)
    content = bodies["MemoryRequest"]["content"]["pattern"]
    tag = bodies["MemoryRequest"]["tags"]["items"]["pattern"]
    assert not regex.search(content, blank) and not regex.search(tag, blank), blank
    for text in VISIBLE:
        assert regex.search(content, text) and regex.search(tag, text), text


def test_negative_zero_in_metadata_is_kept_in_both_forms_and_on_the_node() -> None:
    for item in (ingest.MemoryInput(content="c", metadata_json='{"z": -0.0, "l": [-0.0, 0, 1.5]}'),
                 ingest.MemoryInput(content="c", metadata=struct_of({"z": -0.0, "l": [-0.0, 0, 1.5]}))):
        parsed = logic.parse_metadata(item)
        assert math.copysign(1.0, parsed["z"]) < 0 and math.copysign(1.0, parsed["l"][0]) < 0
        memory = logic.build_memory(item, scope="s", settings=SETTINGS, created=NOW, source="t")
        # A Struct's keys have no order: compare the text with sorted keys.
        assert json.dumps(metadata_dict(memory), sort_keys=True) == '{"l": [-0.0, 0, 1.5], "z": -0.0}'
        assert json.loads(node_fields(memory, ["metadata"])["metadata"]) == {"l": [-0.0, 0, 1.5], "z": -0.0}
        assert node_fields(memory, ["metadata"])["metadata"] == '{"l": [-0.0, 0, 1.5], "z": -0.0}'
    # -0.0 and 0 are different requests.
    assert logic.request_fingerprint("create", [ingest.MemoryInput(content="c", metadata_json='{"z": -0.0}')]) != \
        logic.request_fingerprint("create", [ingest.MemoryInput(content="c", metadata_json='{"z": 0}')])


def test_a_window_ending_at_year_one_is_refused_not_overflowed() -> None:
    year_one = timestamp_pb2.Timestamp(seconds=-62135596800)
    item = ingest.MemoryInput(content="over before it began", valid_to=year_one)
    _refused(logic.build_memory, item, scope="s", settings=SETTINGS, created=NOW, source="t", field="valid_to")
    _refused(logic.build_memory, item, scope="s", settings=SETTINGS, created=NOW, source="t",
             field_prefix="memories[2].", field="memories[2].valid_to")
    # A millisecond later there is a window: [year one, +1 ms).
    item.valid_to.nanos = 1_000_000
    memory = logic.build_memory(item, scope="s", settings=SETTINGS, created=NOW, source="t")
    assert memory.valid_from.seconds == year_one.seconds and memory.valid_from.nanos == 0


@pytest.mark.parametrize("path", ["importance", "confidence", "type", "metadata"])
def test_an_update_mask_path_not_set_is_refused(path: str) -> None:
    current = logic.build_memory(ingest.MemoryInput(content="c", importance=0.7, confidence=0.8, type="Decision"),
                                 scope="s", settings=SETTINGS, created=NOW, source="t")
    message = _refused(logic.apply_update, current, ingest.MemoryInput(), [path], SETTINGS, NOW, field=path)
    assert "in update_mask but not set" in message
    # Set (0.0 included), it applies.
    updated, _ = logic.apply_update(current, ingest.MemoryInput(importance=0.0), ["importance"], SETTINGS, NOW)
    assert updated.importance == 0.0 and updated.type == memory_pb2.MEMORY_TYPE_DECISION


def test_the_request_fingerprint_tells_apart_what_would_be_stored() -> None:
    base = ingest.MemoryInput(content="Deploy on Fridays", tags=["ops"], importance=0.4,
                              metadata_json='{"n": 1, "team": "web"}')
    fingerprint = logic.request_fingerprint("create", [base])
    assert fingerprint.startswith("v1:create:") and logic.fingerprint_operation(fingerprint) == "create"
    # The same request in another spelling.
    same = ingest.MemoryInput(content="Deploy on Fridays", tags=[" ops", "ops"], importance=0.4,
                              metadata=struct_of({"team": "web", "n": 1}))
    assert logic.request_fingerprint("create", [same]) == fingerprint
    # Any stored field, or the operation, different.
    others = [ingest.MemoryInput(content="deploy on fridays", tags=["ops"], importance=0.4,
                                 metadata_json='{"n": 1, "team": "web"}'),
              ingest.MemoryInput(content="Deploy on Fridays", tags=["ops", "x"], importance=0.4,
                                 metadata_json='{"n": 1, "team": "web"}'),
              ingest.MemoryInput(content="Deploy on Fridays", tags=["ops"], metadata_json='{"n": 1, "team": "web"}'),
              ingest.MemoryInput(content="Deploy on Fridays", tags=["ops"], importance=0.4, type="Habit",
                                 metadata_json='{"n": 1, "team": "web"}'),
              ingest.MemoryInput(content="Deploy on Fridays", tags=["ops"], importance=0.4,
                                 metadata_json='{"n": 2, "team": "web"}')]
    prints = {logic.request_fingerprint("create", [other]) for other in others}
    assert len(prints) == len(others) and fingerprint not in prints
    assert logic.request_fingerprint("batch", [base]) != fingerprint
    assert (logic.request_fingerprint("supersede", [base], id="a", reason="", relation_type=1)
            != logic.request_fingerprint("supersede", [base], id="b", reason="", relation_type=1))
    # A bad item is named as the write would name it.
    _refused(logic.request_fingerprint, "batch", [base, ingest.MemoryInput(content="x", tags=["a,b"])],
             ["memories[0].", "memories[1]."], field="memories[1].tags")


@pytest.mark.parametrize(("paths", "item", "add_tags", "expected", "behind"), [
    (["tags"], ingest.MemoryInput(tags=["billing"]), [], memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING, True),
    ([], ingest.MemoryInput(), ["billing"], memory_pb2.EMBEDDING_STATUS_PAYLOAD_PENDING, True),
    (["tags"], ingest.MemoryInput(tags=["Finance"]), [], memory_pb2.EMBEDDING_STATUS_DONE, False),  # same key
    (["importance", "metadata"], ingest.MemoryInput(importance=0.2, metadata_json='{"a": 1}'), [],
     memory_pb2.EMBEDDING_STATUS_DONE, False),
    (["content", "tags"], ingest.MemoryInput(content="new text", tags=["billing"]), [],
     memory_pb2.EMBEDDING_STATUS_PENDING, True),
])
def test_an_edit_of_a_filtered_field_marks_the_payload_behind(paths, item, add_tags, expected, behind) -> None:
    """Tags (by comparison key), event time and state are what the vector search filters on:
    an edit of one leaves the point's payload behind (PAYLOAD_PENDING; the write decides it
    again on the node's status, ``behind``); other fields do not, and a content edit keeps
    PENDING (the vector itself is stale)."""
    current = logic.build_memory(ingest.MemoryInput(content="c", tags=["finance"]), scope="s", settings=SETTINGS,
                                 created=NOW, source="t")
    current.embedding_status = memory_pb2.EMBEDDING_STATUS_DONE
    updated, _ = logic.apply_update(current, item, paths, SETTINGS, NOW, add_tags)
    marked = logic.mark_payload_behind(current, updated)
    assert updated.embedding_status == expected
    assert marked is behind


def test_state_and_event_time_mark_the_payload_behind_unless_the_memory_is_gone() -> None:
    current = logic.build_memory(ingest.MemoryInput(content="c"), scope="s", settings=SETTINGS, created=NOW, source="t")
    current.embedding_status = memory_pb2.EMBEDDING_STATUS_DONE
    current.state = memory_pb2.MEMORY_STATE_PENDING_REVIEW
    for state, expected in ((memory_pb2.MEMORY_STATE_ACTIVE, True), (memory_pb2.MEMORY_STATE_REJECTED, False),
                            (memory_pb2.MEMORY_STATE_DELETED, False)):
        after = memory_pb2.Memory()
        after.CopyFrom(current)
        after.state = state
        assert logic.mark_payload_behind(current, after) is expected, state
    moved = memory_pb2.Memory()
    moved.CopyFrom(current)
    moved.event_time.seconds += 3600
    assert logic.mark_payload_behind(current, moved)
    # Not embedded yet as read: the status stays, the write decides on the node's own status.
    current.embedding_status = moved.embedding_status = memory_pb2.EMBEDDING_STATUS_PENDING
    assert logic.mark_payload_behind(current, moved)
    assert moved.embedding_status == memory_pb2.EMBEDDING_STATUS_PENDING
