"""Recall time windows on the real service (automem/common/timewindow.py): whole-day
date-only bounds, zoned and naive bounds, exclusive ends of relative windows (issue 12 item
6); ``time``/``tz``/``timezone`` and ``time_window_warning`` on REST, gRPC and MCP (issue 13
item 1)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import grpc
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def _store(http, content: str, timestamp: str) -> str:
    r = await http.post("/memory", json={"content": content, "timestamp": timestamp})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _recall(http, **params) -> tuple[set[str], dict]:
    r = await http.get("/recall", params={"limit": 50, **params})
    assert r.status_code == 200, r.text
    body = r.json()
    return {h["id"] for h in body["results"]}, body


async def test_date_only_bounds_cover_the_whole_day(service) -> None:
    async with service.http() as http:
        last_ms = await _store(http, "Last millisecond of the ides", "2026-03-15T23:59:59.999Z")
        first = await _store(http, "First moment of the ides", "2026-03-15T00:00:00Z")
        next_day = await _store(http, "Midnight after the ides", "2026-03-16T00:00:00.000Z")
        day_before = await _store(http, "Last millisecond before the ides", "2026-03-14T23:59:59.999Z")
        found, body = await _recall(http, start="2026-03-15", end="2026-03-15")
        assert found == {first, last_ms}
        assert body["time_window"]["start"].startswith("2026-03-15T00:00:00")
        assert body["time_window"]["end"].startswith("2026-03-15T23:59:59.999")
        found, _ = await _recall(http, end="2026-03-15")
        assert found == {first, last_ms, day_before}
        found, _ = await _recall(http, start="2026-03-16")
        assert next_day in found and last_ms not in found
        # The same window through a query (vector and keyword arms carry the filter too).
        found, _ = await _recall(http, query="ides millisecond midnight", start="2026-03-15", end="2026-03-15")
        assert found == {first, last_ms}


async def test_zoned_and_naive_bounds_mix(service) -> None:
    async with service.http() as http:
        before = await _store(http, "Just before six UTC", "2026-03-15T17:59:59.999Z")
        at_start = await _store(http, "Six UTC sharp", "2026-03-15T18:00:00Z")
        at_end = await _store(http, "Half past nine UTC", "2026-03-15T21:30:00Z")
        after = await _store(http, "Just after half past nine UTC", "2026-03-15T21:30:00.001Z")
        # 20:00 at +02:00 is 18:00 UTC; a naive bound is UTC.
        found, _ = await _recall(http, start="2026-03-15T20:00:00+02:00", end="2026-03-15T21:30:00")
        assert found == {at_start, at_end}
        found, _ = await _recall(http, start="2026-03-15T18:00:00", end="2026-03-15T17:30:00-04:00")
        assert found == {at_start, at_end}
        # With tz, a naive bound is in that zone: 19:00 in Berlin (UTC+1) is 18:00 UTC.
        found, _ = await _recall(http, start="2026-03-15T19:00:00", end="2026-03-15T21:30:00Z",
                                 tz="Europe/Berlin")
        assert found == {at_start, at_end}
        assert before not in found and after not in found


async def test_yesterday_excludes_todays_midnight(service) -> None:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if datetime.now(UTC) > today + timedelta(hours=23, minutes=59):
        pytest.skip("too close to midnight UTC for 'today' to stay the same during the test")

    def iso(value: datetime) -> str:
        return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    async with service.http() as http:
        midnight = await _store(http, "Exactly at today's midnight", iso(today))
        last_ms = await _store(http, "Yesterday's last millisecond", iso(today - timedelta(milliseconds=1)))
        start = await _store(http, "Yesterday's first moment", iso(today - timedelta(days=1)))
        earlier = await _store(http, "The day before yesterday", iso(today - timedelta(days=1, milliseconds=1)))
        found, body = await _recall(http, time_query="yesterday")
        assert found == {start, last_ms}
        assert body["time_window_warning"] is None
        found, _ = await _recall(http, time="yesterday")  # AutoMem's alias
        assert found == {start, last_ms}
        found, _ = await _recall(http, time_query="today")
        assert midnight in found and last_ms not in found and earlier not in found
        found, _ = await _recall(http, time_query="this week")
        assert midnight in found


async def test_unreadable_phrase_warns_and_still_answers(service) -> None:
    async with service.http() as http:
        mid = await _store(http, "Warnings beat failures for agents", "2026-03-15T12:00:00Z")
        found, body = await _recall(http, time_query="qwertyuiop zzz", query="warnings failures agents")
        assert mid in found
        assert "qwertyuiop zzz" in body["time_window_warning"] and "time_query" in body["time_window_warning"]
        assert body["time_window"] == {"start": None, "end": None}
        found, body = await _recall(http, time_query="march 2026")
        assert mid in found and body["time_window_warning"] is None
    async with service.client() as client:
        answer = await client.search("warnings failures agents", time_query="the twelfth of never")
        assert mid in {h.memory.id for h in answer.results}
        assert "the twelfth of never" in answer.time_window_warning
    url = service.url + "/mcp"
    async with Client(streamable_http_client(url, http_client=create_mcp_http_client(
            headers={"X-Automem-Scope": service.scope}))) as mcp:
        result = await mcp.call_tool("recall_memory", {"query": "warnings failures agents",
                                                       "time_query": "qwertyuiop zzz", "format": "json"})
        assert not result.is_error, result.content[0].text
        assert mid in {h["id"] for h in result.structured_content["results"]}
        assert "qwertyuiop zzz" in result.structured_content["time_window_warning"]


async def test_phrase_ending_before_year_one_warns_instead_of_failing(service) -> None:
    # ``before 0001-01-01`` ends before the first representable instant: like any phrase
    # outside the years 1-9999 it is unreadable (warning, no window), never a 500.
    async with service.http() as http:
        mid = await _store(http, "The oldest memory of all", "2026-03-15T12:00:00Z")
        for phrase in ("before 0001-01-01", "until 0001-01-01", "before 0001", "before january 0001"):
            found, body = await _recall(http, time_query=phrase, query="oldest memory")
            assert mid in found
            assert phrase in body["time_window_warning"], body["time_window_warning"]
            assert body["time_window"] == {"start": None, "end": None}
        found, body = await _recall(http, time_query="before 0001-01-02")  # still readable
        assert mid not in found and body["time_window_warning"] is None
    async with service.client() as client:
        answer = await client.search("oldest memory", time_query="before 0001-01-01")
        assert mid in {h.memory.id for h in answer.results}
        assert "before 0001-01-01" in answer.time_window_warning


async def test_tz_changes_the_window(service) -> None:
    async with service.http() as http:
        # 23:30 UTC on 15 March is 08:30 on 16 March in Tokyo (UTC+9).
        late = await _store(http, "Late evening in London, morning in Tokyo", "2026-03-15T23:30:00Z")
        found, _ = await _recall(http, time_query="2026-03-15")
        assert late in found
        found, body = await _recall(http, time_query="2026-03-15", tz="Asia/Tokyo")
        assert late not in found
        assert body["time_window"]["start"].startswith("2026-03-14T15:00:00")
        found, _ = await _recall(http, time_query="2026-03-16", timezone="Asia/Tokyo")
        assert late in found
        found, _ = await _recall(http, start="2026-03-16", end="2026-03-16", tz="Asia/Tokyo")
        assert late in found
        found, _ = await _recall(http, start="2026-03-16", end="2026-03-16")
        assert late not in found
        for name in ("tz", "timezone"):
            r = await http.get("/recall", params={"time_query": "today", name: "Mars/Olympus_Mons"})
            assert r.status_code == 400 and "tz" in r.json()["error"], r.text
    async with service.client() as client:
        answer = await client.search(time_query="2026-03-16", tz="Asia/Tokyo")
        assert late in {h.memory.id for h in answer.results}
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.search(time_query="today", tz="Mars/Olympus_Mons")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "tz" in err.value.details()


async def test_naive_times_of_one_request_are_read_in_its_tz(service) -> None:
    """Break-it: ``start`` naive was read in ``tz`` while ``known_at`` and ``as_of`` naive were
    read as UTC in the same request, and ``known_at`` / ``as_of`` were echoed as the raw text
    without an offset. Every naive time of a recall with ``tz`` is read in that zone now
    (REST and MCP), and the times applied are echoed with an explicit offset."""
    berlin = ZoneInfo("Europe/Berlin")
    async with service.http() as http:
        mid = await _store(http, "The billing cycle runs monthly", "2026-03-15T12:00:00Z")
        before_edit = datetime.now(UTC)
        await asyncio.sleep(0.05)  # the edit lands in a later millisecond than before_edit
        r = await http.patch(f"/memory/{mid}", json={"content": "The billing cycle runs weekly"})
        assert r.status_code == 200, r.text
        known = before_edit.astimezone(berlin).replace(tzinfo=None).isoformat(timespec="milliseconds")
        params = {"query": "billing cycle", "tz": "Europe/Berlin", "known_at": known,
                  "as_of": "2026-03-15T14:00:00", "start": "2026-03-15T12:30:00"}
        r = await http.get("/recall", params={"limit": 5, **params})
        assert r.status_code == 200, r.text
        body = r.json()
        # 12:30 Berlin is 11:30 UTC: the memory at 12:00 UTC is inside the window.
        assert body["time_window"]["start"].startswith("2026-03-15T11:30:00")
        assert [h["memory"]["content"] for h in body["results"]] == ["The billing cycle runs monthly"]
        assert datetime.fromisoformat(body["known_at"]) == before_edit.replace(
            microsecond=before_edit.microsecond // 1000 * 1000)
        assert body["known_at"].endswith("+00:00")
        assert body["as_of"] == "2026-03-15T13:00:00+00:00"
        # Without tz a naive time is UTC, as everywhere else.
        r = await http.get("/recall", params={"query": "billing cycle", "as_of": "2026-03-15T14:00:00"})
        assert r.status_code == 200 and r.json()["as_of"] == "2026-03-15T14:00:00+00:00"
    url = service.url + "/mcp"
    async with Client(streamable_http_client(url, http_client=create_mcp_http_client(
            headers={"X-Automem-Scope": service.scope}))) as mcp:
        result = await mcp.call_tool("recall_memory", {"query": "billing cycle", "tz": "Europe/Berlin",
                                                       "known_at": known, "format": "json"})
        assert not result.is_error, result.content[0].text
        assert [h["content"] for h in result.structured_content["results"]] == ["The billing cycle runs monthly"]
