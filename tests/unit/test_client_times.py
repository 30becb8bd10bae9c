"""The client's one time conversion (clients/python/automem_client/_times.py, which its gRPC
transport sends as Timestamps) gives every recall time argument the instant the REST gateway
reads from the same text (automem/common/timewindow.py ``parse_bound``, model.py
``parse_time``): AutoMem's meaning. Before, the gRPC transport read naive text as UTC
whatever ``tz`` and a date-only ``end`` as the first midnight of the day."""

from __future__ import annotations

import pytest
from automem_client import InvalidArgument as ClientInvalidArgument
from automem_client._times import instant, zone

from automem.common import timewindow
from automem.common.errors import InvalidArgument
from automem.common.model import parse_time

TEXTS = ["2026-03-01", "2026-03-29", "2026-10-25", "2026-03-01T10:00:00", "2026-03-29T02:30:00",
         " 2026-03-01T10:00:00.123456 ", "2026-03-01T10:00:00Z", "2026-03-01t10:00:00z",
         "2026-03-01T10:00:00+05:30", "0001-01-01", "9999-12-31", "0001-01-01T00:00:00",
         "9999-12-31T23:59:59", "0001-01-01T00:00:00+05:00", "2026-13-01", "yesterday", "2026-03-01T25:00"]
ZONES = ["", "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Pacific/Kiritimati"]


def _outcome(parse, *args, **kwargs) -> str:
    try:
        return parse(*args, **kwargs).isoformat()
    except (InvalidArgument, ClientInvalidArgument) as exc:
        return f"refused {exc.field}: {exc.message if hasattr(exc, 'message') else exc}"


@pytest.mark.parametrize("tz", ZONES)
def test_client_times_are_the_instants_the_gateway_reads(tz: str) -> None:
    server_zone, client_zone = timewindow.zone(tz), zone(tz)
    for text in TEXTS:
        for field, upper in (("start", False), ("end", True)):
            server = _outcome(timewindow.parse_bound, text, field=field, tz=server_zone, upper=upper)
            client = _outcome(instant, text, field, tz=client_zone, bound=True, upper=upper)
            assert client == server, (text, tz, field)
        for field in ("as_of", "known_at"):
            server = _outcome(parse_time, text, field=field, tz=server_zone)
            client = _outcome(instant, text, field, tz=client_zone)
            assert client == server, (text, tz, field)


def test_an_unknown_zone_is_refused_naming_tz_as_the_gateway_does() -> None:
    with pytest.raises(InvalidArgument) as server:
        timewindow.zone("Mars/Olympus")
    with pytest.raises(ClientInvalidArgument) as client:
        zone("Mars/Olympus")
    assert client.value.field == server.value.field == "tz"
    assert str(server.value.message) in str(client.value)
