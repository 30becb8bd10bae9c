"""The recall time-window grammar (automem/common/timewindow.py) at fixed times: every phrase
of issue 13 item 1, month and year boundaries, a leap day, zones; the bounds of issue 12
item 6."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from automem.common.errors import InvalidArgument
from automem.common.timewindow import last_instant, parse_bound, parse_phrase, resolve, zone

#: Sunday 1 March 2026, 12:30 UTC: the day after the end of a (non-leap) February.
NOW = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
#: Thursday 1 January 2026, 00:30 UTC: a year boundary.
NEW_YEAR = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
#: Thursday 29 February 2024, 10:00 UTC: a leap day.
LEAP = datetime(2024, 2, 29, 10, 0, tzinfo=UTC)
#: Friday 1 March 2024, 08:00 UTC: the day after a leap day.
AFTER_LEAP = datetime(2024, 3, 1, 8, 0, tzinfo=UTC)


def at(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC)


CASES = [
    # AutoMem's phrases (automem/utils/time.py): calendar windows, weeks from Monday.
    (NOW, "today", "2026-03-01", "2026-03-02"),
    (NOW, "this day", "2026-03-01", "2026-03-02"),
    (NOW, "yesterday", "2026-02-28", "2026-03-01"),
    (NOW, "this week", "2026-02-23", "2026-03-02"),
    (NOW, "this month", "2026-03-01", "2026-04-01"),
    (NOW, "this year", "2026-01-01", "2027-01-01"),
    (NOW, "last week", "2026-02-16", "2026-02-23"),
    (NOW, "past week", "2026-02-16", "2026-02-23"),
    (NOW, "last month", "2026-02-01", "2026-03-01"),
    (NOW, "past month", "2026-02-01", "2026-03-01"),
    (NOW, "last year", "2025-01-01", "2026-01-01"),
    (NOW, "past year", "2025-01-01", "2026-01-01"),
    (NOW, "last 24 hours", "2026-02-28T12:30", "2026-03-01T12:30"),
    (NOW, "past 48 hours", "2026-02-27T12:30", "2026-03-01T12:30"),
    (NOW, "last 7 days", "2026-02-22T12:30", "2026-03-01T12:30"),
    # Beyond AutoMem: rolling windows in any unit.
    (NOW, "past 3 days", "2026-02-26T12:30", "2026-03-01T12:30"),
    (NOW, "last 2 weeks", "2026-02-15T12:30", "2026-03-01T12:30"),
    (NOW, "last 3 months", "2025-12-01T12:30", "2026-03-01T12:30"),
    (NOW, "last 6 hours", "2026-03-01T06:30", "2026-03-01T12:30"),
    (NOW, "past day", "2026-02-28T12:30", "2026-03-01T12:30"),
    (NOW, "last one month", "2026-02-01T12:30", "2026-03-01T12:30"),
    (NOW, "in the past 2 weeks", "2026-02-15T12:30", "2026-03-01T12:30"),
    (NOW, "Last 7 Days.", "2026-02-22T12:30", "2026-03-01T12:30"),
    # ... ago: that calendar period (hours: from then on).
    (NOW, "3 days ago", "2026-02-26", "2026-02-27"),
    (NOW, "a day ago", "2026-02-28", "2026-03-01"),
    (NOW, "2 weeks ago", "2026-02-09", "2026-02-16"),
    (NOW, "1 month ago", "2026-02-01", "2026-03-01"),
    (NOW, "2 hours ago", "2026-03-01T10:30", "2026-03-01T12:30"),
    (NOW, "day before yesterday", "2026-02-27", "2026-02-28"),
    # Named months and years, dates.
    (NOW, "in March 2026", "2026-03-01", "2026-04-01"),
    (NOW, "march", "2026-03-01", "2026-04-01"),
    (NOW, "april", "2025-04-01", "2025-05-01"),
    (NOW, "Dec 2025", "2025-12-01", "2026-01-01"),
    (NOW, "2025", "2025-01-01", "2026-01-01"),
    (NOW, "in 2025", "2025-01-01", "2026-01-01"),
    (NOW, "2026-02", "2026-02-01", "2026-03-01"),
    (NOW, "2026-02-14", "2026-02-14", "2026-02-15"),
    (NOW, "on 2026-02-14", "2026-02-14", "2026-02-15"),
    (NOW, "February 14", "2026-02-14", "2026-02-15"),
    (NOW, "march 15", "2025-03-15", "2025-03-16"),
    (NOW, "15 March 2025", "2025-03-15", "2025-03-16"),
    (NOW, "14/02/2026", "2026-02-14", "2026-02-15"),
    (NOW, "monday", "2026-02-23", "2026-02-24"),
    (NOW, "sunday", "2026-03-01", "2026-03-02"),
    (NOW, "last sunday", "2026-02-22", "2026-02-23"),
    # Ranges and open windows.
    (NOW, "between 2026-01-01 and 2026-02-01", "2026-01-01", "2026-02-02"),
    (NOW, "from 2026-01-01 to 2026-01-31", "2026-01-01", "2026-02-01"),
    (NOW, "from january to february 2026", "2026-01-01", "2026-03-01"),
    (NOW, "2025-12-24 - 2025-12-26", "2025-12-24", "2025-12-27"),
    (NOW, "since 2026-02-27", "2026-02-27", None),
    (NOW, "after february 2026", "2026-03-01", None),
    (NOW, "before 2026", None, "2026-01-01"),
    # A year boundary.
    (NEW_YEAR, "yesterday", "2025-12-31", "2026-01-01"),
    (NEW_YEAR, "this week", "2025-12-29", "2026-01-05"),
    (NEW_YEAR, "last week", "2025-12-22", "2025-12-29"),
    (NEW_YEAR, "last month", "2025-12-01", "2026-01-01"),
    (NEW_YEAR, "last year", "2025-01-01", "2026-01-01"),
    (NEW_YEAR, "december", "2025-12-01", "2026-01-01"),
    (NEW_YEAR, "last 1 months", "2025-12-01T00:30", "2026-01-01T00:30"),
    # A leap day and the day after it.
    (LEAP, "today", "2024-02-29", "2024-03-01"),
    (LEAP, "this month", "2024-02-01", "2024-03-01"),
    (LEAP, "last year", "2023-01-01", "2024-01-01"),
    (LEAP, "1 year ago", "2023-01-01", "2024-01-01"),
    (LEAP, "last 1 years", "2023-02-28T10:00", "2024-02-29T10:00"),
    (LEAP, "feb 29, 2024", "2024-02-29", "2024-03-01"),
    (AFTER_LEAP, "yesterday", "2024-02-29", "2024-03-01"),
    (AFTER_LEAP, "last month", "2024-02-01", "2024-03-01"),
    (AFTER_LEAP, "last 1 months", "2024-02-01T08:00", "2024-03-01T08:00"),
    (AFTER_LEAP, "february", "2024-02-01", "2024-03-01"),
]


@pytest.mark.parametrize(("now", "phrase", "start", "end"), CASES, ids=[f"{c[0]:%Y-%m-%d}:{c[1]}" for c in CASES])
def test_phrase_window(now: datetime, phrase: str, start: str | None, end: str | None) -> None:
    window = parse_phrase(phrase, now)
    assert window is not None, phrase
    assert (window.start, window.end) == (at(start), at(end))


ZONED = [
    # 12:30 UTC on 1 March 2026 is already 2 March 01:30 in Auckland (UTC+13).
    ("Pacific/Auckland", "today", "2026-03-01T11:00", "2026-03-02T11:00"),
    ("Pacific/Auckland", "yesterday", "2026-02-28T11:00", "2026-03-01T11:00"),
    ("America/New_York", "today", "2026-03-01T05:00", "2026-03-02T05:00"),
    # The US changes to summer time on 8 March 2026: that week is an hour shorter.
    ("America/New_York", "2026-03-08", "2026-03-08T05:00", "2026-03-09T04:00"),
    ("Europe/Berlin", "march 2026", "2026-02-28T23:00", "2026-03-31T22:00"),
    ("UTC", "today", "2026-03-01", "2026-03-02"),
]


@pytest.mark.parametrize(("tz", "phrase", "start", "end"), ZONED)
def test_phrase_window_in_a_zone(tz: str, phrase: str, start: str, end: str) -> None:
    window = parse_phrase(phrase, NOW, zone(tz))
    assert window is not None
    assert (window.start, window.end) == (at(start), at(end))


UNREADABLE = ["qwertyuiop zzz", "last 0 days", "between yesterday and 2020", "from x to y", "since never",
              "last 9999999 years", "13 days from now", "this quarter", "2026-13", "february 30"]


@pytest.mark.parametrize("phrase", UNREADABLE)
def test_unreadable_phrase_is_a_warning_not_an_error(phrase: str) -> None:
    assert parse_phrase(phrase, NOW) is None
    resolved = resolve(phrase, None, None, now=NOW)
    assert (resolved.start, resolved.end) == (None, None)
    assert phrase.strip() in resolved.warning and "time_query" in resolved.warning


def test_relative_window_end_is_exclusive() -> None:
    """Issue 12 item 6: yesterday does not include today's 00:00:00.000."""
    resolved = resolve("yesterday", None, None, now=NOW)
    assert resolved.start == at("2026-02-28").timestamp()
    last_ms_of_yesterday = at("2026-02-28T23:59:59.999").timestamp()
    midnight = at("2026-03-01").timestamp()
    assert resolved.start <= last_ms_of_yesterday <= resolved.end < midnight
    assert resolved.warning == ""


def test_explicit_bounds_win_over_the_phrase_and_tz_applies() -> None:
    resolved = resolve("this month", None, at("2026-03-10").timestamp(), now=NOW)
    assert (resolved.start, resolved.end) == (at("2026-03-01").timestamp(), at("2026-03-10").timestamp())
    berlin = resolve("today", None, None, tz="Europe/Berlin", now=NOW)
    assert berlin.start == at("2026-02-28T23:00").timestamp()
    with pytest.raises(InvalidArgument) as err:
        resolve("yesterday", at("2026-03-01").timestamp(), None, now=NOW)
    assert err.value.field == "start_time"


@pytest.mark.parametrize("name", ["Mars/Olympus", "not a zone", "../etc/passwd", "Europe/"])
def test_unknown_zone_names_tz(name: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        resolve("today", None, None, tz=name, now=NOW)
    assert err.value.field == "tz" and "tz" in str(err.value)
    with pytest.raises(InvalidArgument) as err:
        zone(name, field="timezone")
    assert err.value.field == "timezone"


BOUNDS = [
    # Date-only bounds cover the whole day (issue 12 item 6).
    ("2026-03-15", False, "UTC", "2026-03-15T00:00:00"),
    ("2026-03-15", True, "UTC", "2026-03-15T23:59:59.999500"),
    ("2024-02-29", True, "UTC", "2024-02-29T23:59:59.999500"),
    ("2026-03-15", False, "Europe/Berlin", "2026-03-14T23:00:00"),
    ("2026-03-15", True, "Europe/Berlin", "2026-03-15T22:59:59.999500"),
    # Zoned bounds keep their offset; naive ones are in tz (UTC by default).
    ("2026-03-15T10:00:00+02:00", False, "UTC", "2026-03-15T08:00:00"),
    ("2026-03-15T10:00:00Z", True, "Europe/Berlin", "2026-03-15T10:00:00"),
    ("2026-03-15T10:00:00", False, "UTC", "2026-03-15T10:00:00"),
    ("2026-03-15T10:00:00", True, "Europe/Berlin", "2026-03-15T09:00:00"),
    ("2026-03-15T10:00:00.123456Z", False, "UTC", "2026-03-15T10:00:00.123"),
]


@pytest.mark.parametrize(("raw", "upper", "tz", "expected"), BOUNDS)
def test_bound(raw: str, upper: bool, tz: str, expected: str) -> None:
    assert parse_bound(raw, field="end" if upper else "start", tz=zone(tz), upper=upper) == at(expected)


def test_date_only_bounds_hold_the_last_millisecond_of_the_day() -> None:
    last_ms = at("2026-03-15T23:59:59.999").timestamp()
    start = parse_bound("2026-03-15", field="start").timestamp()
    end = parse_bound("2026-03-15", field="end", upper=True).timestamp()
    assert start <= last_ms <= end < at("2026-03-16").timestamp()
    assert last_instant(at("2026-03-16")).timestamp() == end


@pytest.mark.parametrize("raw", ["15/03/2026", "2026-02-30", "yesterday", "0000-01-01", "9999-12-31T23:59:59-05:00"])
def test_bad_bound_names_the_field(raw: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        parse_bound(raw, field="end", upper=True)
    assert err.value.field == "end"
