"""What ``/mcp`` and ``automem mcp`` answer to a JSON-RPC message that the REST gateway's JSON
reader refuses: one reading of a client's JSON for every transport (the MCP SDK reads
messages with pydantic, which alters some silently)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException

from automem.gateway.schemas import parse_json_body


def refusal(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error answering a message that holds what no store keeps as sent, or None
    (also for malformed JSON: that is the transport's parse error).

    The MCP SDK reads messages with pydantic, which keeps the last of a key given twice and
    reads ``1e-400`` as 0.0 silently; the REST gateway's reader
    (automem/gateway/schemas.py :func:`parse_json_body`) refuses them, and a string holding a
    lone surrogate. Its refusal is answered as the SDK answers invalid params: a JSON-RPC
    error (code -32602), the message naming the tool argument (``metadata.x: ...``, the
    ``params.arguments.`` of ``tools/call`` left out; in a batch,
    ``[i].params.arguments.metadata.x`` names the request) and the answer carrying the
    request's ``id`` when one can be read (null otherwise, and for a batch). Used by ``/mcp``
    (automem/gateway/mcp_mount.py) and by ``automem mcp`` (automem/gateway/mcp_server.py ``run_stdio``)."""
    try:
        parse_json_body(body)
    except HTTPException as exc:
        message = str(exc.detail).removeprefix("params.arguments.")
        return {"jsonrpc": "2.0", "id": request_id(body), "error": {"code": -32602, "message": message}}
    except (ValueError, RecursionError):
        pass
    return None


def invalid_id(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error answering a request whose ``id`` member is neither a string nor an
    integer (null, an object, an array, a boolean, a fraction), or None (other messages, and
    text that is not JSON: that is the transport's parse error).

    Such a message has a ``method`` and an ``id`` member, so it is no notification (those
    have no ``id``), but the MCP SDK reads it as one and answers nothing: the client waited
    for its own timeout (``POST /mcp`` answered 202). JSON-RPC 2.0 section 5 answers an
    invalid request with -32600 and ``id: null``; MCP requires a string or integer id, never
    null. A batch (a JSON array) is left to the transport. Used by ``/mcp``
    (automem/gateway/mcp_mount.py) and ``automem mcp`` (automem/gateway/mcp_server.py)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    given = message["id"]
    if isinstance(given, str) or (isinstance(given, int) and not isinstance(given, bool)):
        return None
    return {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": f"id: must be a string or an integer, got {json_kind(given)} (JSON-RPC "
                                   "Invalid Request; a notification has no id member)"}}


def json_kind(value: Any) -> str:
    """The JSON type of ``value``, as an error names it: ``a string``, ``a number``, ``a list``,
    ``an object``, ``a boolean`` or ``null``."""
    kinds = ((bool, "a boolean"), (str, "a string"), ((int, float), "a number"), (list, "a list"),
             (dict, "an object"), (type(None), "null"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def request_id(body: bytes) -> str | int | None:
    """The ``id`` of a single JSON-RPC request (a string or an integer), or None (a batch,
    a notification, an id of another type, or text the plain reader refuses too)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    found = request.get("id") if isinstance(request, dict) else None
    return found if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)) else None
