"""The read side's input checks as plain functions (break-it review C): request Timestamps,
read times at the end of time, the window echo's millisecond, the consolidation status
paging, the search text bounds and the naming of a NUL's field. Functions added with the
checks are imported in the tests that use them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from google.protobuf import timestamp_pb2

from automem.common.errors import InvalidArgument
from automem.common.model import OPEN_END
from automem.common.timewindow import resolve
from automem.graph.store import GraphStore
from automem.recall.filters import read_at
from automem.v1 import ingest_service_pb2, recall_service_pb2


def _options(name: str, seconds: int, nanos: int = 0) -> recall_service_pb2.ReadOptions:
    return recall_service_pb2.ReadOptions(**{name: timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)})


@pytest.mark.parametrize("seconds,nanos,word", [(10**15, 0, "1–9999"), (-62_135_596_801, 0, "1–9999"),
                                                (253_402_300_800, 0, "1–9999"), (0, -1, "nanos"),
                                                (0, 1_000_000_000, "nanos")])
def test_request_time_refuses_what_a_timestamp_cannot_hold_naming_the_field(seconds: int, nanos: int,
                                                                            word: str) -> None:
    for name in ("as_of", "known_at"):
        with pytest.raises(InvalidArgument) as err:
            read_at(_options(name, seconds, nanos))
        assert err.value.field == name and err.value.message.startswith(f"{name}: ") and word in err.value.message
    from automem.recall.filters import request_time

    request = recall_service_pb2.SearchMemoriesRequest(end_time=timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos))
    with pytest.raises(InvalidArgument) as err:
        request_time(request, "end_time")
    assert err.value.field == "end_time"


def test_request_time_takes_the_first_and_last_instants_and_unset_is_none() -> None:
    from automem.recall.filters import request_time

    first = recall_service_pb2.SearchMemoriesRequest(start_time=timestamp_pb2.Timestamp(seconds=-62_135_596_800))
    assert request_time(first, "start_time") == -62_135_596_800.0
    assert request_time(first, "end_time") is None
    last = recall_service_pb2.SearchMemoriesRequest(
        end_time=timestamp_pb2.Timestamp(seconds=253_402_300_799, nanos=999_999_999))
    assert request_time(last, "end_time") == pytest.approx(253_402_300_800.0)


def test_read_times_in_the_last_second_of_9999_are_read_before_the_open_end() -> None:
    """Open windows and unretracted memories end at OPEN_END (9999-12-31T23:59:59Z): a read
    time at or past it found nothing; it is read at the last millisecond before it."""
    last_millisecond = OPEN_END - 0.001  # automem/recall/filters.py LATEST_READ_TIME
    for name in ("as_of", "known_at"):
        read = read_at(_options(name, 253_402_300_799, 999_999_999))
        assert getattr(read, name) == last_millisecond < OPEN_END
        assert not read.past
    assert datetime.fromtimestamp(last_millisecond, UTC).isoformat().startswith("9999-12-31T23:59:58.99")
    earlier = read_at(_options("known_at", 253_402_300_798, 500_000_000))
    assert earlier.known_at == 253_402_300_798.5


def test_window_bounds_are_echoed_at_the_millisecond() -> None:
    from automem.common.timewindow import bound_millis
    from automem.recall.servicer import window_timestamp

    window = resolve("2025", None, None)
    assert window_timestamp(window.end).ToJsonString() == "2025-12-31T23:59:59.999Z"
    assert window_timestamp(window.start).ToJsonString() == "2025-01-01T00:00:00Z"
    assert window_timestamp(None) is None
    assert bound_millis(1767225599.9995) == 1767225599999
    assert bound_millis(253402300799.999) == 253402300799999  # float noise near year 9999
    assert bound_millis(-0.0005) == -1  # cut towards the earlier millisecond, as REST's text


def test_consolidation_status_page_size_and_token() -> None:
    from automem.consolidate.servicer import STATUS_PAGE_MAX, status_offset, status_page_size

    assert [status_page_size(n) for n in (0, 1, 100, 101, 10**9)] == [20, 1, 100, STATUS_PAGE_MAX, STATUS_PAGE_MAX]
    for size in (-1, -100):
        with pytest.raises(InvalidArgument) as err:
            status_page_size(size)
        assert err.value.field == "page_size"
    assert [status_offset(t) for t in ("", "0", "20", "2147483647")] == [0, 0, 20, 2**31 - 1]
    for token in ("-1", "+5", " 5", "1e3", "٣", "2147483648", "9" * 5000):
        with pytest.raises(InvalidArgument) as err:
            status_offset(token)
        assert err.value.field == "page_token", token


def test_search_text_bounds_name_query_and_queries() -> None:
    from automem.recall.servicer import QUERIES_MAX, check_queries

    check_queries("q" * 4000, ["a" * 4000] * QUERIES_MAX, 4000)
    for query, queries, field in (("q" * 4001, [], "query"), ("", ["a"] * (QUERIES_MAX + 1), "queries"),
                                  ("", ["a", "b" * 4001], "queries")):
        with pytest.raises(InvalidArgument) as err:
            check_queries(query, queries, 4000)
        assert err.value.field == field and err.value.message.startswith(f"{field}: at most")


def test_a_nul_is_refused_naming_the_request_field() -> None:
    from automem.recall.filters import check_text

    check_text(recall_service_pb2.SearchMemoriesRequest(query="fine", tags=["a", "b"]))
    for request, field in ((recall_service_pb2.ListMemoriesByTagRequest(tags=["ok", "a\x00"]), "tags"),
                           (recall_service_pb2.GetMemoryRequest(id="\x00"), "id"),
                           (ingest_service_pb2.CreateMemoryRequest(
                               memory=ingest_service_pb2.MemoryInput(content="a\x00b")), "memory.content")):
        with pytest.raises(InvalidArgument) as err:
            check_text(request)
        assert err.value.field == field and err.value.message == f"{field}: contains a NUL character"


def test_the_graph_check_names_the_parameter_holding_a_nul() -> None:
    """It answered "a text value contains a NUL character", naming nothing."""
    for params, name in (({"reason": "why\x00"}, "reason"), ({"id": "x", "key": "k\x00"}, "key"),
                         ({"rows": [{"content": "a\x00"}]}, "rows")):
        with pytest.raises(InvalidArgument) as err:
            GraphStore._check_params(params)
        assert err.value.field == name and err.value.message.startswith(f"{name}: "), err.value.message
    GraphStore._check_params({"ok": ["a", {"b": "c"}], "n": 1, "none": None})
