"""The gateway's edge translation (automem/gateway/usecases.py, automem/common/enums.py,
automem/common/paging.py): AutoMem's words, times and nulls into protos, with errors naming
the field; no service needed."""

from __future__ import annotations

import pytest

from automem.common.enums import enum_value, enum_word, enum_words
from automem.common.errors import InvalidArgument
from automem.common.paging import decode_offset_token, encode_offset_token
from automem.gateway import usecases
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import MemoryRequest
from automem.v1 import recall_service_pb2


def test_enum_words_round_trip_and_name_the_field_when_unknown() -> None:
    assert enum_words(recall_service_pb2.SortOrder) == ["score", "time_desc", "time_asc", "updated_desc",
                                                        "updated_asc"]
    for word in enum_words(recall_service_pb2.SortOrder):
        value = enum_value(recall_service_pb2.SortOrder, word, "sort")
        assert value and enum_word(recall_service_pb2.SortOrder, value, "sort", "score") == word
    assert enum_value(recall_service_pb2.TagMode, " ALL ", "tag_mode") == recall_service_pb2.TAG_MODE_ALL
    assert enum_value(recall_service_pb2.RecencyBias, "", "recency_bias") == 0
    assert enum_word(recall_service_pb2.TagMatch, 0, "tag_match", "exact") == "exact"
    with pytest.raises(InvalidArgument, match=r"^recency_bias: must be one of auto, on, off, got 'bogus'"):
        enum_value(recall_service_pb2.RecencyBias, "bogus", "recency_bias")
    with pytest.raises(InvalidArgument, match="^sort: unknown value 99"):
        enum_word(recall_service_pb2.SortOrder, 99, "sort", "score")


def test_read_options_take_state_mode_over_current_only_and_parse_times() -> None:
    assert usecases.read_options().state_mode == recall_service_pb2.STATE_MODE_CURRENT
    assert usecases.read_options(current_only=False).state_mode == recall_service_pb2.STATE_MODE_HISTORY
    options = usecases.read_options("2024-05-01T12:00:00", None, "current", current_only=False)
    assert options.state_mode == recall_service_pb2.STATE_MODE_CURRENT
    assert options.as_of.ToJsonString() == "2024-05-01T12:00:00Z" and not options.HasField("known_at")
    assert usecases.state_mode_word(options) == "current"
    with pytest.raises(InvalidArgument, match="^known_at: "):
        usecases.read_options(known_at="last tuesday")
    with pytest.raises(InvalidArgument, match="^state_mode: "):
        usecases.read_options(state_mode="everything")


def test_memory_input_times_become_timestamps_named_by_their_rest_field() -> None:
    body = MemoryRequest(content="x", timestamp="2024-05-01T12:00:00.123456+02:00", t_valid=" ", t_invalid=None,
                         metadata=None)
    item = usecases.memory_input(body)
    assert item.event_time.ToJsonString() == "2024-05-01T10:00:00.123Z"  # UTC, milliseconds
    assert not item.HasField("valid_from") and not item.HasField("valid_to")
    assert item.metadata_set and item.metadata_json == "null"
    with pytest.raises(InvalidArgument, match=r"^memories\[2\]\.t_invalid: not an ISO 8601 time"):
        usecases.memory_input(MemoryRequest(content="x", t_invalid="soon"), "memories[2].")


def test_update_input_maps_names_to_mask_paths_and_refuses_nulls_without_a_proto_form() -> None:
    item, paths = usecases.update_input({"t_invalid": None, "timestamp": "2024-01-01", "content": None,
                                         "metadata": {"a": 1}})
    assert paths == ["content", "event_time", "metadata", "valid_to"]
    assert not item.HasField("valid_to") and item.event_time.ToJsonString() == "2024-01-01T00:00:00Z"
    assert item.content == "" and item.metadata_json == '{"a": 1}'
    for name in ("tags", "importance", "confidence", "type", "timestamp", "t_valid"):
        with pytest.raises(InvalidArgument, match=f"^{name}: "):
            usecases.update_input({name: None})


def test_etags_from_body_or_if_match() -> None:
    assert usecases.parse_etag('W/"7"') == 7
    assert usecases.parse_etag("*") == 0 and usecases.parse_etag(None) == 0 and usecases.parse_etag(3) == 3
    with pytest.raises(InvalidArgument, match="^etag: "):
        usecases.parse_etag("v7")


def test_a_body_etag_naming_no_version_is_a_conflict_not_no_check() -> None:
    assert usecases.body_etag(None) == 0 and usecases.body_etag("*") == 0 and usecases.body_etag('"*"') == 0
    assert usecases.body_etag(4) == 4 and usecases.body_etag('"4"') == 4 and usecases.body_etag("04") == 4
    for raw in (0, "0", '"0"', '""'):
        with pytest.raises(GatewayError, match="^etag: ") as raised:
            usecases.body_etag(raw)
        assert raised.value.status == 409 and raised.value.extra == {"grpc_code": "ABORTED"}
    for raw in ('W/"0"', 'W/"4"', "w/4"):  # a weak tag never passes a version check (RFC 9110)
        with pytest.raises(InvalidArgument, match="^etag: .* is a weak tag"):
            usecases.body_etag(raw)
    for raw in ("", " "):
        with pytest.raises(InvalidArgument, match="^etag: empty"):
            usecases.body_etag(raw)
    with pytest.raises(InvalidArgument, match="^etag: .*not negative"):
        usecases.body_etag(-1)
    # int() reads these as numbers; an ETag is digits (break-it review).
    for raw in ("\u0661", "\uff11", "+1", "1_0", "0x1", "1e3", True, False):
        with pytest.raises(InvalidArgument, match="^etag: "):
            usecases.body_etag(raw)
    for raw in (2**63, str(2**64), 10**30):
        with pytest.raises(InvalidArgument, match="^etag: must be at most"):
            usecases.body_etag(raw)
    assert usecases.body_etag(2**63 - 1) == 2**63 - 1 and usecases.body_etag(" 7 ") == 7


def test_offset_page_tokens_are_bound_to_their_listing() -> None:
    token = encode_offset_token(40, "memory-a")
    assert decode_offset_token(token, "memory-a") == 40 and decode_offset_token("", "memory-a") == 0
    for bad, bound in ((token, "memory-b"), ("not base64 json", "memory-a"),
                       (encode_offset_token(-1, "memory-a"), "memory-a")):
        with pytest.raises(InvalidArgument, match="^page_token: "):
            decode_offset_token(bad, bound)
