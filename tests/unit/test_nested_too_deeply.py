"""JSON nested thousands deep where a caller's text is read: page tokens (base64 JSON) and
backup lines. ``json.loads`` raises RecursionError there, which the readers did not expect
(every such request answered 500); they now refuse it as any other bad input, naming it."""

from __future__ import annotations

import base64
import json

import pytest

from automem.common import backup
from automem.common.errors import InvalidArgument
from automem.common.paging import decode_offset_token
from automem.recall.bytag import decode_token

DEEP_TOKEN = base64.urlsafe_b64encode(("[" * 3000 + "]" * 3000).encode()).decode()


def test_a_deep_page_token_is_an_invalid_argument_naming_page_token() -> None:
    for decode in (lambda t: decode_offset_token(t, "x"), decode_token):
        with pytest.raises(InvalidArgument, match="^page_token: ") as err:
            decode(DEEP_TOKEN)
        assert err.value.field == "page_token"


def test_a_deep_backup_line_is_refused_naming_the_line() -> None:
    deep = '{"memory":' * 2000 + "1" + "}" * 2000
    with pytest.raises(ValueError, match=r"^backup line 2: arrays and objects nested too deeply to read "):
        backup.read_lines([json.dumps({"kind": "header", "format": backup.FORMAT}), deep])
