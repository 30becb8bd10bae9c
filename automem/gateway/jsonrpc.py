"""What ``/mcp`` and ``automem mcp`` answer to a JSON-RPC message that the REST gateway's JSON
reader refuses: one reading of a client's JSON for every transport (the MCP SDK reads
messages with pydantic, which alters some silently)."""

from __future__ import annotations

import json
from typing import Any

import jiter
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
    ``params.arguments.`` of ``tools/call`` left out) and the answer carrying the request's
    ``id`` when one can be read (null otherwise). A batch is answered by
    :func:`invalid_request` first. Used by ``/mcp``
    (automem/gateway/mcp_mount.py) and by ``automem mcp`` (automem/gateway/mcp_server.py ``run_stdio``)."""
    try:
        parse_json_body(body)
    except HTTPException as exc:
        message = str(exc.detail).removeprefix("params.arguments.")
        return {"jsonrpc": "2.0", "id": request_id(body), "error": {"code": -32602, "message": message}}
    except (ValueError, RecursionError):
        pass
    return None


def invalid_request(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error (code -32600, Invalid Request) answering a message this server does
    not take, or None (requests and notifications, and text that is not JSON: that is the
    transport's parse error). The message says what is wrong:

    * a batch (a JSON array): MCP 2025-03-26 allowed one and 2025-06-18 removed it; this
      server implements it for no protocol version (it negotiates 2024-11-05 through
      2025-11-25), and the MCP SDK answered a -32602 holding pydantic's validation dump;
    * a response (``result`` or ``error``, no ``method``): this server sends the client no
      request (no sampling, elicitation, roots or ping), so no response answers one of its
      requests; the SDK took it in silence (``POST /mcp`` 202, stdio nothing);
    * JSON that is no object, or an object without ``method``: no JSON-RPC message (the SDK
      answered -32602 with pydantic's dump over HTTP);
    * a request whose ``id`` member is neither a string nor an integer (null, an object, an
      array, a boolean, a fraction): it has a ``method`` and an ``id`` member, so it is no
      notification (those have no ``id``), but the SDK read it as one and answered nothing;
    * a request or notification whose ``jsonrpc`` is missing or not ``"2.0"`` (``jsonrpc: must
      be "2.0", got "1.0"``), whose ``method`` is no string (``method: must be a string, got a
      number``) or whose ``params`` is neither an object nor null (MCP takes named parameters
      only): ``/mcp`` answered these -32602 with pydantic's validation dump and id null.

    The ``id`` is null (JSON-RPC 2.0 section 5: it could not be read as a request's; a
    response's ``id`` names a request of the server's, not the client's) except for an object
    without ``method``, or with a bad ``jsonrpc``, ``method`` or ``params``, whose ``id`` is a
    string or an integer. Used by ``/mcp`` (automem/gateway/mcp_mount.py) and ``automem mcp``
    (automem/gateway/mcp_server.py)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, list):
        return _invalid(None, "batch requests are not supported: send each JSON-RPC message on its own; "
                              "JSON-RPC batching was part of MCP 2025-03-26 only, removed in 2025-06-18")
    if not isinstance(message, dict):
        return _invalid(None, f"a JSON-RPC message is a JSON object, got {json_kind(message)}")
    if "method" not in message:
        if "result" in message or "error" in message:
            return _invalid(None, "unexpected JSON-RPC response (result or error, no method): this server "
                                  "sent no request to answer; send it requests and notifications only")
        return _invalid(request_id(body), "method: missing; not a JSON-RPC 2.0 request, notification or "
                                          "response object")
    if "id" in message and not _is_id(message["id"]):
        return _invalid(None, f"id: must be a string or an integer, got {json_kind(message['id'])}; a "
                              "notification has no id member")
    given_id = message.get("id")
    if message.get("jsonrpc") != "2.0":
        wrong = f'must be "2.0", got {_shown(message["jsonrpc"])}' if "jsonrpc" in message else 'missing, must be "2.0"'
        return _invalid(given_id, f"jsonrpc: {wrong}")
    if not isinstance(message["method"], str):
        return _invalid(given_id, f"method: must be a string, got {json_kind(message['method'])}")
    if not isinstance(message.get("params"), dict | None):
        return _invalid(given_id, f"params: must be an object (MCP takes named parameters only), got "
                                  f"{json_kind(message['params'])}")
    return None


def _is_id(value: Any) -> bool:
    """True when ``value`` is a request id MCP takes: a string or an integer (not a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _shown(value: Any) -> str:
    """``value`` as an error shows it: a string in JSON quotes (its first 40 characters), any
    other value as its JSON type (:func:`json_kind`)."""
    return json.dumps(value[:40], ensure_ascii=False) if isinstance(value, str) else json_kind(value)


def _invalid(given_id: str | int | None, message: str) -> dict[str, Any]:
    """A JSON-RPC Invalid Request error (-32600) whose message is ``message``."""
    return {"jsonrpc": "2.0", "id": given_id, "error": {"code": -32600, "message": f"{message} (JSON-RPC "
                                                                                   "Invalid Request)"}}


#: The tools whose ``content`` argument is a memory's text (``Settings.content_max_length``).
_CONTENT_TOOLS = (None, "store_memory", "update_memory")


def oversized_content(prefix: bytes, max_chars: int, max_bytes: int) -> dict[str, Any] | None:
    """The JSON-RPC error (code -32602) answering a ``tools/call`` body over
    ``max_bytes`` whose memory text is over ``max_chars`` characters, read from the first
    bytes of the body (``prefix``, cut anywhere), or None (another method or tool, a text
    within the limit, or no message to read).

    The text is the ``content`` argument of ``store_memory`` or ``update_memory``, or
    ``memories[i].content`` of a batch store; the message names it and counts its characters
    read (``content: at least 4194191 characters exceeds the limit of 2000 characters ...``).
    ``/mcp`` answers a body over ``Settings.max_body_bytes`` with 413 without reading it all
    (automem/gateway/app.py ``StreamedBodyLimit``); this names the argument the caller has to
    shorten, as ``automem mcp`` (which has no body limit) names it. The cut body is read by
    jiter's partial mode (``trailing-strings``: the string the cut ends inside is kept as far
    as it was read). The answer's ``id`` is the request's when it was read whole and is a
    string or an integer: another member of the message follows it in ``prefix``, or the
    message ends there (a number or string the cut ends in may be longer in the body); null
    otherwise (the ``id`` comes after the text, beyond what was read, or is of another
    type)."""
    try:
        message, ended = jiter.from_json(prefix), True
    except ValueError:
        try:
            message, ended = jiter.from_json(prefix, partial_mode="trailing-strings"), False
        except ValueError:
            return None
    params = message.get("params") if isinstance(message, dict) else None
    if (not isinstance(params, dict) or message.get("method") not in (None, "tools/call")
            or params.get("name") not in _CONTENT_TOOLS or not isinstance(params.get("arguments"), dict)):
        return None
    arguments = params["arguments"]
    texts = [("content", arguments.get("content"))]
    if isinstance(arguments.get("memories"), list):
        texts += [(f"memories[{i}].content", item.get("content"))
                  for i, item in enumerate(arguments["memories"]) if isinstance(item, dict)]
    for field, value in texts:
        if isinstance(value, str) and len(value) > max_chars:
            return {"jsonrpc": "2.0", "id": _whole_id(message, ended), "error": {"code": -32602, "message": (
                f"{field}: at least {len(value)} characters exceeds the limit of {max_chars} characters (and "
                f"the request body the limit of {max_bytes} bytes)")}}
    return None


def _whole_id(message: dict[str, Any], ended: bool) -> str | int | None:
    """The ``id`` of ``message`` (a body read from its start, its members in body order) when
    it is a string or an integer read whole: the message ``ended`` in what was read, or
    another member follows the ``id``; else None."""
    if "id" not in message or not _is_id(message["id"]):
        return None
    return message["id"] if ended or list(message)[-1] != "id" else None


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
    return found if _is_id(found) else None
