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


def request_id(body: bytes) -> str | int | None:
    """The ``id`` of a single JSON-RPC request (a string or an integer), or None (a batch,
    a notification, an id of another type, or text the plain reader refuses too)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    found = request.get("id") if isinstance(request, dict) else None
    return found if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)) else None
