"""The by-tag listing's page token (automem/recall/bytag.py): a token is base64 JSON the
caller can edit, so every value in it is checked before the walk uses it."""

from __future__ import annotations

import base64
import json

import pytest

from automem.common.errors import InvalidArgument
from automem.common.model import OPEN_END
from automem.recall.bytag import Cursor, Key, decode_token, encode_token


def _token(**changes: object) -> str:
    good = encode_token(Cursor(Key(1_765_000_000.0, 0.5, "m-1"), 60.0, 1_765_000_100.0, 1_765_000_100.0,
                               "f" * 16, False))
    body = json.loads(base64.urlsafe_b64decode(good + "=" * (-len(good) % 4)))
    body.update(changes)
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


def test_a_token_the_service_issued_reads_back() -> None:
    cursor = decode_token(_token())
    assert cursor.key == Key(1_765_000_000.0, 0.5, "m-1") and cursor.width == 60.0


@pytest.mark.parametrize("changes", [{"t": 1e17}, {"t": 1e308}, {"t": -1e17}, {"a": 1e20}, {"k": -1e20},
                                     {"t": OPEN_END + 10}])
def test_a_time_outside_what_the_graph_stores_is_refused(changes: dict) -> None:
    """At ``t`` = 1e17 a window's lower end ``t - width`` rounds back to ``t``: the walk never
    moved and read FalkorDB for 16 s, until the call's deadline (break-it round G)."""
    with pytest.raises(InvalidArgument, match="^page_token: ") as err:
        decode_token(_token(**changes))
    assert err.value.field == "page_token"
