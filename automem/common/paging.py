"""Opaque offset page tokens (AIP-158) for listings small enough to read whole per page.

A token is URL-safe base64 of compact JSON ``{"o": offset, "b": bound}``: ``bound`` names
what the listing is of (e.g. the memory id of a neighbour listing), so a token cannot be
replayed against another listing. Empty token = first page.
"""

from __future__ import annotations

import base64
import json

from automem.common.errors import InvalidArgument


def encode_offset_token(offset: int, bound: str = "") -> str:
    """The ``next_page_token`` continuing at ``offset`` (>= 0) of the listing ``bound``."""
    body = json.dumps({"o": offset, "b": bound}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def decode_offset_token(token: str, bound: str = "") -> int:
    """The offset of ``token`` (0 for an empty one). InvalidArgument naming ``page_token``
    when it is not a token of the listing ``bound``."""
    if not token:
        return 0
    try:
        body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        offset = body["o"]
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or body["b"] != bound:
            raise ValueError("not ours")
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, RecursionError):  # a crafted deep JSON: recursion
        raise InvalidArgument("page_token: not a token of this listing", field="page_token") from None
    return offset
