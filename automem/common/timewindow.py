"""Recall time windows: ``time_query`` phrases, ``start``/``end`` bounds and the ``tz`` zone.

The one place every recall surface gets its event-time window from: the gateway (REST
``/recall``, MCP ``recall_memory``) reads ``start``/``end`` with :func:`parse_bound` and
checks ``tz`` with :func:`zone`; the recall service (gRPC ``SearchMemories``) combines the
phrase and the bounds with :func:`resolve`.

The phrase grammar follows AutoMem's ``_parse_time_expression`` (verygoodplugins/automem,
``automem/utils/time.py``): ``today``, ``yesterday``, ``this week|month|year`` (the calendar
period), ``last|past week|month|year`` (the previous calendar period; weeks start on
Monday), ``last N days``, ``last|past 24|48 hours``. It goes beyond AutoMem with rolling
windows in any unit (``last|past N minutes|hours|days|weeks|months|years``, ``past day``),
``N days|weeks|months|years ago`` (that calendar period; ``N hours|minutes ago``: from then
to now), ``day before yesterday``, weekdays (``monday``, ``last monday``), dates and periods (``2026-03-15``,
``2026-03``, ``2025``, ``March``, ``March 2026``, ``March 15``, ``15 March 2026``, any full
date dateparser reads), ranges (``between A and B``, ``from A to B``, ``A to B``: from the
start of A to the end of B) and open windows (``since A``/``from A``: from the start of A on, ``after A``: from its end on,
``before A``/``until A``: up to its start).
Leading ``in``, ``during``, ``over``, ``within``, ``on``, ``the`` are ignored.

Calendar periods are taken in the request's zone (IANA name, default UTC), so ``today`` in
``Europe/Berlin`` starts at Berlin's midnight. AutoMem ignores a phrase it cannot read; so
does this service, and says so in a warning instead of refusing the request.

Windows are half-open ``[start, end)``. Times are stored at millisecond precision
(``automem/common/model.py``, ``to_millis``) and filtered with inclusive bounds
(``automem/recall/filters.py``), so an exclusive end ``E`` is applied as the inclusive bound
``E - 0.5 ms`` (:func:`last_instant`): it keeps ``E - 1 ms`` and drops ``E`` whatever the
float rounding of epoch seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import dateparser
from dateutil.relativedelta import relativedelta

from automem.common.errors import InvalidArgument

#: Half a millisecond: the margin between an exclusive end and the inclusive bound applied.
HALF_MS = timedelta(microseconds=500)

_UNITS = {"minute": "minutes", "min": "minutes", "mins": "minutes", "hour": "hours", "hr": "hours",
          "hrs": "hours", "day": "days", "week": "weeks", "wk": "weeks", "month": "months",
          "year": "years", "yr": "years"}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_MONTHS = {name: i for i, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
     ("november", "nov"), ("december", "dec")], start=1) for name in names}
_WEEKDAYS = {name: i for i, names in enumerate(
    [("monday", "mon"), ("tuesday", "tue", "tues"), ("wednesday", "wed"), ("thursday", "thu", "thurs"),
     ("friday", "fri"), ("saturday", "sat"), ("sunday", "sun")]) for name in names}
_FILLER = ("in ", "during ", "over ", "within ", "on ", "the ", "for ")
_NUM = r"(\d{1,6}|" + "|".join(_NUMBERS) + r")"
_UNIT = r"(" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r")s?"
_ROLLING = re.compile(rf"(?:last|past|previous|recent|latest) {_NUM} {_UNIT}")
_AGO = re.compile(rf"{_NUM} {_UNIT} ago")
_RANGE = re.compile(r"(?:between|from) (.+?) (?:and|to|until|till|through|thru|-|–) (.+)")
_BARE_RANGE = re.compile(r"(.+?) (?:to|until|till|through|thru|-|–) (.+)")
_OPEN = re.compile(r"(since|after|from|before|until|till) (.+)")
_MONTH_YEAR = re.compile(r"([a-z]+)(?:,? (?:of )?(\d{4}))?")
_MONTH_DAY = re.compile(r"([a-z]+) (\d{1,2})(?:st|nd|rd|th)?(?:,? (\d{4}))?")
_DAY_MONTH = re.compile(r"(\d{1,2})(?:st|nd|rd|th)? (?:of )?([a-z]+)(?:,? (\d{4}))?")


@dataclass(frozen=True)
class Window:
    """A half-open event-time window ``[start, end)`` (aware UTC datetimes; None = open)."""

    start: datetime | None
    end: datetime | None


@dataclass(frozen=True)
class Resolved:
    """The window a search applies: inclusive epoch-second bounds (None = open) and the
    warning about a ``time_query`` that was not understood ("" when none)."""

    start: float | None
    end: float | None
    warning: str = ""


def zone(name: str, *, field: str = "tz") -> tzinfo:
    """The zone of an IANA name (``Europe/Berlin``; ``UTC``/``Z``/"" = UTC), from the system's
    tz database through :mod:`zoneinfo`. Raises InvalidArgument naming ``field`` for an
    unknown name."""
    text = (name or "").strip()
    if text.upper() in ("", "UTC", "Z", "GMT"):
        return UTC
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(f"{field}: unknown time zone {name!r}; use an IANA name such as "
                              "'Europe/Berlin' or 'UTC'", field=field) from None


def last_instant(end: datetime) -> datetime:
    """The inclusive bound applied for the exclusive end ``end`` (``end`` − 0.5 ms)."""
    return end - HALF_MS


def bound_millis(seconds: float) -> int:
    """The epoch millisecond an inclusive bound of epoch ``seconds`` is shown as (the
    window a search echoes): rounded to 0.1 ms first, which undoes the float noise of epoch
    seconds far from 1970, then cut to the millisecond. So the end of a window
    (:func:`last_instant`, half a millisecond before the next period) shows as the period's
    last millisecond, ``2025-12-31T23:59:59.999Z`` for ``2025``, as REST's text of it does
    (automem/common/model.py ``iso``): times have millisecond precision."""
    return round(seconds * 10_000) // 10


def parse_bound(raw: str, *, field: str, tz: tzinfo = UTC, upper: bool = False) -> datetime:
    """An explicit ``start``/``end`` bound as an aware UTC datetime, inclusive.

    ISO 8601 date-time (``Z``, an offset, or naive = in ``tz``) at millisecond precision, or
    an ISO date (``2026-03-15``) that stands for the whole day in ``tz``: as a lower bound
    its first instant, as an upper bound (``upper``) its last (:func:`last_instant` of the
    next midnight), so ``start=end=2026-03-15`` covers the day. Zoned and naive bounds mix:
    each is converted to UTC on its own. Raises InvalidArgument naming ``field``."""
    text = raw.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            day = date.fromisoformat(text)
            value = _midnight(day + timedelta(days=1), tz) if upper else _midnight(day, tz)
            return last_instant(value) if upper else value
        except (OverflowError, ValueError):
            raise InvalidArgument(f"{field}: not a date in the years 1–9999: {raw!r}", field=field) from None
    try:
        value = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise InvalidArgument(f"{field}: not an ISO 8601 time or date: {raw!r}", field=field) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=tz)
    try:
        value = value.astimezone(UTC)
        value.timestamp()
    except (OverflowError, ValueError):
        raise InvalidArgument(f"{field}: {raw!r} is outside the years 1–9999 in UTC", field=field) from None
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def parse_phrase(phrase: str, now: datetime, tz: tzinfo = UTC) -> Window | None:
    """The window a natural-language ``phrase`` names at ``now`` (aware) in zone ``tz``;
    None when the phrase is not understood or falls outside the years 1–9999. The grammar is
    the module docstring's."""
    text = _normal(phrase)
    if not text:
        return None
    try:
        window = _phrase(text, now.astimezone(UTC), tz)
        if window is not None and window.end is not None:
            last_instant(window.end).timestamp()  # ``before 0001-01-01`` ends before year 1
        return window
    except (OverflowError, ValueError):
        return None


def resolve(time_query: str, start: float | None, end: float | None, *, tz: str = "",
            now: datetime | None = None) -> Resolved:
    """The window of a search from ``time_query`` and the explicit inclusive bounds ``start``
    / ``end`` (epoch seconds, None = open); an explicit bound wins over the phrase's on its
    side. ``tz`` is the IANA zone of calendar phrases (default UTC); ``now`` defaults to the
    current time. A phrase that is not understood adds no bound and a warning.

    Raises InvalidArgument naming ``tz`` for an unknown zone, ``start_time`` (and
    ``end_time``: SearchMemoriesRequest's names, which the REST gateway renames ``start`` /
    ``end``) when the window ends before it starts."""
    zone_info = zone(tz)
    lo, hi, warning = start, end, ""
    if time_query.strip():
        window = parse_phrase(time_query, now or datetime.now(UTC), zone_info)
        if window is None:
            warning = (f"time_query: could not read {time_query.strip()!r}; no time window applied "
                       "(e.g. 'yesterday', 'last 7 days', 'March 2026', 'between 2026-01-01 and 2026-02-01')")
        else:
            if lo is None and window.start is not None:
                lo = window.start.timestamp()
            if hi is None and window.end is not None:
                hi = last_instant(window.end).timestamp()
    if lo is not None and hi is not None and lo > hi:
        raise InvalidArgument("start_time: must not be after end_time", field="start_time")
    return Resolved(lo, hi, warning)


# --- the grammar ----------------------------------------------------------------------------


def _normal(phrase: str) -> str:
    text = " ".join(phrase.lower().replace(",", ", ").split()).strip(" .!?").replace(" ,", ",")
    changed = True
    while changed:
        changed = False
        for word in _FILLER:
            if text.startswith(word):
                text, changed = text[len(word):].strip(), True
    return text


def _midnight(day: date, tz: tzinfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)


def _days(first: date, after: date, tz: tzinfo) -> Window:
    """The local days ``first`` up to (excluding) ``after`` in ``tz``."""
    return Window(_midnight(first, tz), _midnight(after, tz))


def _number(word: str) -> int:
    return _NUMBERS[word] if word in _NUMBERS else int(word)


def _month(year: int, month: int, tz: tzinfo) -> Window:
    first = date(year, month, 1)
    return _days(first, first + relativedelta(months=1), tz)


def _calendar(unit: str, day: date, tz: tzinfo) -> Window:
    """The calendar ``unit`` (days|weeks|months|years) containing the local date ``day``."""
    if unit == "days":
        return _days(day, day + timedelta(days=1), tz)
    if unit == "weeks":
        monday = day - timedelta(days=day.weekday())
        return _days(monday, monday + timedelta(days=7), tz)
    if unit == "months":
        return _month(day.year, day.month, tz)
    return _days(date(day.year, 1, 1), date(day.year + 1, 1, 1), tz)


def _phrase(text: str, now: datetime, tz: tzinfo) -> Window | None:
    for pattern in (_RANGE, _BARE_RANGE):
        if m := pattern.fullmatch(text):
            first, last = _period(_normal(m.group(1)), now, tz), _period(_normal(m.group(2)), now, tz)
            if first is not None and last is not None:
                if first.start is None or last.end is None or first.start >= last.end:
                    return None
                return Window(first.start, last.end)
            if pattern is _RANGE:
                return None
    if m := _OPEN.fullmatch(text):
        anchor = _period(_normal(m.group(2)), now, tz)
        if anchor is None:
            return None
        if m.group(1) in ("before", "until", "till"):
            return Window(None, anchor.start)
        return Window(anchor.end if m.group(1) == "after" else anchor.start, None)
    return _period(text, now, tz)


def _period(text: str, now: datetime, tz: tzinfo) -> Window | None:
    """A single period or rolling window (no ranges)."""
    local = now.astimezone(tz)
    today = local.date()
    if text in ("today", "this day"):
        return _calendar("days", today, tz)
    if text == "yesterday":
        return _calendar("days", today - timedelta(days=1), tz)
    if text in ("day before yesterday", "the day before yesterday"):
        return _calendar("days", today - timedelta(days=2), tz)
    words = text.split(" ")
    if len(words) == 2 and words[1] in ("week", "month", "year"):
        unit = words[1] + "s"
        if words[0] in ("this", "current"):
            return _calendar(unit, today, tz)
        if words[0] in ("last", "past", "previous"):
            return _calendar(unit, (local - relativedelta(**{unit: 1})).date(), tz)
    if len(words) == 2 and words[0] in ("last", "past") and words[1] in ("day", "hour", "minute"):
        return _rolling(1, words[1] + "s", now, tz)
    if (m := _ROLLING.fullmatch(text)) and _number(m.group(1)) >= 1:
        return _rolling(_number(m.group(1)), _UNITS[m.group(2)], now, tz)
    if m := _AGO.fullmatch(text):
        n, unit = _number(m.group(1)), _UNITS[m.group(2)]
        if unit in ("minutes", "hours"):
            return Window(now - timedelta(**{unit: n}), now)
        return _calendar(unit, (local - relativedelta(**{unit: n})).date(), tz)
    if text.removeprefix("last ") in _WEEKDAYS:
        back = (today.weekday() - _WEEKDAYS[text.removeprefix("last ")]) % 7
        if text.startswith("last ") and back == 0:
            back = 7
        return _calendar("days", today - timedelta(days=back), tz)
    if re.fullmatch(r"\d{4}", text):
        return _calendar("years", date(int(text), 1, 1), tz) if int(text) >= 1 else None
    if re.fullmatch(r"\d{4}-\d{2}", text):
        return _month(int(text[:4]), int(text[5:]), tz)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return _calendar("days", date.fromisoformat(text), tz)
    if (m := _MONTH_YEAR.fullmatch(text)) and m.group(1) in _MONTHS:
        month = _MONTHS[m.group(1)]
        year = int(m.group(2)) if m.group(2) else (today.year if month <= today.month else today.year - 1)
        return _month(year, month, tz)
    for pattern, month_group, day_group in ((_MONTH_DAY, 1, 2), (_DAY_MONTH, 2, 1)):
        if (m := pattern.fullmatch(text)) and m.group(month_group) in _MONTHS:
            month, day = _MONTHS[m.group(month_group)], int(m.group(day_group))
            year = int(m.group(3)) if m.group(3) else today.year
            if not m.group(3) and (month, day) > (today.month, today.day):
                year -= 1
            return _calendar("days", date(year, month, day), tz)
    return _full_date(text, local, tz)


def _rolling(n: int, unit: str, now: datetime, tz: tzinfo) -> Window:
    """The last ``n`` ``unit`` up to ``now``: minutes and hours as elapsed time, days and
    longer on the local calendar (a day back across a DST change is still the same clock
    time)."""
    if unit in ("minutes", "hours"):
        return Window(now - timedelta(**{unit: n}), now)
    return Window((now.astimezone(tz) - relativedelta(**{unit: n})).astimezone(UTC), now)


def _full_date(text: str, local: datetime, tz: tzinfo) -> Window | None:
    """A full date in another notation ("15/03/2026", "15th of March, 2026"), read by
    dateparser with day, month and year required: that local day."""
    if not re.search(r"\d{4}", text):
        return None
    parsed = dateparser.parse(text, languages=["en"], settings={
        "RELATIVE_BASE": local.replace(tzinfo=None), "REQUIRE_PARTS": ["day", "month", "year"],
        "PREFER_DATES_FROM": "past"})
    return None if parsed is None else _calendar("days", parsed.date(), tz)
