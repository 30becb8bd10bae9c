"""What a time argument means: the one conversion of a ``datetime`` or ISO 8601 text to an
instant, shared by both transports.

The meanings are AutoMem's, as the REST gateway reads them (automem/common/timewindow.py
``parse_bound`` and ``zone``, automem/common/model.py ``parse_time``), so a call means the
same over gRPC, which sends Timestamps made here, as over REST, which sends the text:

* a ``datetime``: naive = UTC (REST sends it with ``+00:00``);
* ISO 8601 text with ``Z`` or an offset: that instant;
* naive ISO 8601 text (``2026-03-01T10:00:00``): in the zone ``tz`` (a recall's ``tz``;
  UTC for the other methods, which take no zone);
* a date (``2026-03-01``): midnight in ``tz``; as a recall's ``end`` (``upper``) the whole
  day, i.e. its last instant, half a millisecond before the next midnight in ``tz``, so
  ``start=end=2026-03-01`` covers the day.

Times have millisecond precision (finer digits dropped), as the service keeps them.

The client distribution depends on grpcio, protobuf and httpx only, not on automem, so this
restates the gateway's few lines rather than importing them; tests/unit/test_client_times.py
pins that both give every text in several zones the same instant or the same refusal.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from automem_client import errors
from automem_client.models import TimeLike

#: Half a millisecond: an end date's last instant is this before the next midnight
#: (automem/common/timewindow.py ``HALF_MS``).
HALF_MS = timedelta(microseconds=500)

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def zone(name: str, field: str = "tz") -> tzinfo:
    """The zone of an IANA name (``Europe/Berlin``; ""/``UTC``/``Z``/``GMT`` = UTC), from the
    system's tz database. Raises InvalidArgument naming ``field`` for an unknown name, with
    the gateway's message."""
    text = (name or "").strip()
    if text.upper() in ("", "UTC", "Z", "GMT"):
        return UTC
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise errors.InvalidArgument(f"{field}: unknown time zone {name!r}; use an IANA name such as "
                                     "'Europe/Berlin' or 'UTC'", field=field) from None


def _midnight(day: date, tz: tzinfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=tz).astimezone(UTC)


def instant(value: TimeLike, field: str, *, tz: tzinfo = UTC, bound: bool = False,
            upper: bool = False) -> datetime:
    """The aware UTC datetime ``value`` stands for (module docstring), at millisecond
    precision except an end date's last instant.

    ``tz``: the zone of naive text and dates; ``bound``: ``value`` is a recall's
    ``start``/``end`` (a date is a day, and bad text is "not an ISO 8601 time or date");
    ``upper``: it is the ``end`` (a date stands for its last instant).

    Raises:
        InvalidArgument: naming ``field``, for text that is not ISO 8601 or a time outside
            the years 1-9999 in UTC (the gateway's messages).
    """
    raw = value.isoformat() if isinstance(value, datetime) else value
    if isinstance(value, str):
        text = value.strip()
        if bound and _DATE.fullmatch(text):
            try:
                day = date.fromisoformat(text)
                return _midnight(day + timedelta(days=1), tz) - HALF_MS if upper else _midnight(day, tz)
            except (OverflowError, ValueError):
                raise errors.InvalidArgument(f"{field}: not a date in the years 1–9999: {raw!r}",
                                             field=field) from None
        try:
            value = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            what = "time or date" if bound else "time"
            raise errors.InvalidArgument(f"{field}: not an ISO 8601 {what}: {raw!r}", field=field) from None
        if value.tzinfo is None:
            value = value.replace(tzinfo=tz)
    elif value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        value = value.astimezone(UTC)
        value.timestamp()
    except (OverflowError, ValueError):
        raise errors.InvalidArgument(f"{field}: {raw!r} is outside the years 1–9999 in UTC", field=field) from None
    return value.replace(microsecond=value.microsecond // 1000 * 1000)
