"""Typed errors of the client: one class per gRPC status the service answers, whichever
transport carried the call.

The service names the bad field at the start of its message, ``"<field>: <what is wrong>"``
(automem/common/errors.py; e.g. ``"importance: must be between 0 and 1, got 2"``,
``"memories[3].content: must not be empty"``); the REST gateway sends the same message in its
JSON error body (automem/gateway/errors.py ``error_response``) plus ``grpc_code``, the
status the service answered. :func:`field_of` reads the field back.

Two classes are the client's own: :class:`ClientClosed` (a call on a closed client) and an
:class:`InvalidArgument` the client raises before sending (e.g. ``update(id,
importance=None)`` over gRPC), with the message the REST gateway would answer.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor

#: ``<field>: `` at the start of a message: a name, dotted paths and [index] parts.
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?)*"
#: A message's leading field name, or names ("version, known_at: pass one, not both": the first).
_FIELD = re.compile(rf"^({_NAME})(?:, {_NAME})*: ")


#: ClientClosed's message.
CLIENT_CLOSED = "the client is closed (close() was called): make a new client"


def field_of(message: str) -> str | None:
    """The field a service message names (``"tags[2]"``, ``"memories[0].content"``; the first
    of several, ``"version, known_at: ..."``), None when it names none."""
    match = _FIELD.match(message or "")
    return match.group(1) if match else None


#: AutomemError's ``field`` when none is given: read from the message (:func:`field_of`).
FROM_MESSAGE: Any = object()


class AutomemError(Exception):
    """Any error answered by the service or met on the way.

    Attributes:
        code: the gRPC status (``grpc.StatusCode``); for a REST call, the status the service
            answered (from the body's ``grpc_code``), else the one the HTTP status stands for.
        message: the service's message.
        field: the field the message names, or None.
        http_status: the HTTP status of a REST call; None over gRPC.
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None, field: str | None = FROM_MESSAGE,
                 http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.field = field_of(message) if field is FROM_MESSAGE else field
        self.http_status = http_status

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class InvalidArgument(AutomemError):
    """Bad input (HTTP 400); ``field`` names it."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AutomemError):
    """No such memory in the scope (HTTP 404)."""

    code = grpc.StatusCode.NOT_FOUND


class Conflict(AutomemError):
    """The write conflicts with the memory's state (HTTP 409/412): one of the three below."""

    code = grpc.StatusCode.ABORTED


class AlreadyExists(Conflict):
    """The content is tombstoned in the scope."""

    code = grpc.StatusCode.ALREADY_EXISTS


class Aborted(Conflict):
    """The etag the write was based on is stale: read the memory again and retry."""

    code = grpc.StatusCode.ABORTED


class FailedPrecondition(Conflict):
    """A state change that is not allowed (e.g. superseding a deleted memory)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(AutomemError):
    """The key may not do this or use that scope (HTTP 403)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(AutomemError):
    """No valid API key (HTTP 401)."""

    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(AutomemError):
    """A limit was hit (rate limit, size; HTTP 413/429); the message names it."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(AutomemError):
    """The service or a store behind it cannot be reached (HTTP 503, or a proxy's 502); retry
    later. Also a REST answer that is not the gateway's (an HTML page of a proxy or captive
    portal, an empty body: the service was not reached); its message names the HTTP status
    and content type."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(AutomemError):
    """The call's deadline (``timeout``) passed, or a proxy gave up waiting (HTTP 504)."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Unimplemented(AutomemError):
    """The service does not offer this call (HTTP 501)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class ClientClosed(AutomemError):
    """The client was closed (``close()``, or the end of its ``with`` block): a method called
    after that, and a call in flight when it happened, raise this; the service was not asked
    (or its answer was dropped). Not retryable: make a new client. ``code`` is
    FAILED_PRECONDITION (the client, not the memory, is in the wrong state), the same over
    both transports; it is no :class:`Conflict`. An ``events()`` iteration open at close()
    ends instead (its loop just stops)."""

    code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, message: str = CLIENT_CLOSED) -> None:
        super().__init__(message)


_BY_CODE: dict[grpc.StatusCode, type[AutomemError]] = {
    cls.code: cls for cls in (InvalidArgument, NotFound, AlreadyExists, Aborted, FailedPrecondition,
                              PermissionDenied, Unauthenticated, ResourceExhausted, Unavailable,
                              DeadlineExceeded, Unimplemented)}
_BY_CODE[grpc.StatusCode.OUT_OF_RANGE] = InvalidArgument

#: HTTP status -> the gRPC status it stands for when the body names none
#: (automem/common/errors.py HTTP_STATUS read backwards; 412 is a stale If-Match; 502 and 504
#: come from a proxy in front of the gateway: its upstream could not be reached / was too slow).
_HTTP_CODES: dict[int, grpc.StatusCode] = {
    400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED, 404: grpc.StatusCode.NOT_FOUND, 409: grpc.StatusCode.ABORTED,
    412: grpc.StatusCode.ABORTED, 413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    422: grpc.StatusCode.INVALID_ARGUMENT, 429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    501: grpc.StatusCode.UNIMPLEMENTED, 502: grpc.StatusCode.UNAVAILABLE, 503: grpc.StatusCode.UNAVAILABLE, 504: grpc.StatusCode.DEADLINE_EXCEEDED}


def error_for(code: grpc.StatusCode, message: str, *, field: str | None = FROM_MESSAGE,
              http_status: int | None = None) -> AutomemError:
    """The typed error of a status code (AutomemError itself for a code without a class);
    ``field`` None names none, left out it is read from the message (:func:`field_of`)."""
    cls = _BY_CODE.get(code, AutomemError)
    return cls(message, code=code, field=field, http_status=http_status)


#: The service's proto names of fields this client's methods take under AutoMem's names (as
#: the REST gateway spells them): MemoryInput's times and the recall window.
ARGUMENT_NAMES = {"event_time": "timestamp", "valid_from": "t_valid", "valid_to": "t_invalid",
                  "start_time": "start", "end_time": "end"}
_PROTO_NAME = re.compile(r"\b(" + "|".join(ARGUMENT_NAMES) + r")\b")


def _as_arguments(message: str, names: dict[str, str] | None = None) -> str:
    """``message`` naming the client's arguments: its field (:func:`field_of`) renamed by
    ``names`` when it is, or begins with (then ``.`` or ``[``), a proto path of that one call
    (``{"relation.target_id": "memory2_id"}``; a path mapped to ``""`` is dropped with its
    ``.``: ``{"replacement": ""}`` names ``replacement.valid_to`` ``t_invalid``); else, when it holds a proto name of
    :data:`ARGUMENT_NAMES`, each such name in it is replaced (``"valid_to: must be after
    valid_from"`` -> ``"t_invalid: must be after t_valid"``), as the REST gateway answers it."""
    field = field_of(message)
    if field is None:
        return message
    for proto in sorted(names or {}, key=len, reverse=True):
        if field == proto or field.startswith((proto + ".", proto + "[")):
            rest = message[len(proto):]
            if names[proto]:  # type: ignore[index]
                return names[proto] + rest  # type: ignore[index]
            if rest.startswith("."):  # a message whose fields are the method's arguments
                message, field = rest[1:], field[len(proto) + 1:]
            break
    if not _PROTO_NAME.search(field):
        return message
    return _PROTO_NAME.sub(lambda m: ARGUMENT_NAMES[m.group(1)], message)


#: gRPC's refusal of a message over its size limit (``"SERVER: Received message larger than
#: max (6146728 vs. 4194304)"``: the service refused the request; ``CLIENT:``, this side
#: refused the answer). Not a field: "SERVER" was read as one (break-it review).
_TOO_LARGE = re.compile(r"^(?:(SERVER|CLIENT): )?Received message larger than max \((\d+) vs\. (\d+)\)")
#: Fields of no request message that the service names: the scope header, a request that
#: did not parse (automem/common/grpc_server.py).
_ANY_REQUEST_NAMES = frozenset({"scope", "request"})


def _mib(size: int) -> str:
    """``size`` bytes in MiB, ``"4 MiB"`` / ``"4.5 MiB"``."""
    return f"{size / 1048576:g} MiB" if size % 1048576 == 0 else f"{size / 1048576:.1f} MiB"


def too_large(limit: int | None, size: int | None = None, *, answer: bool = False) -> str:
    """The message of a request (or, ``answer``, an answer) over the size limit of ``limit``
    bytes (None: not known), ``size`` bytes when known; the same words over gRPC and REST,
    naming no field: the whole call is too large, no one field of it."""
    what = "the answer" if answer else "the request"
    sent = f" ({size} bytes)" if size is not None else ""
    over = f"the limit of {limit} bytes ({_mib(limit)})" if limit is not None else "the size limit"
    advice = ("ask for fewer memories per call (a smaller page or limit)" if answer else
              "send fewer or smaller memories per call (smaller batches)")
    return f"{what}{sent} is larger than {over} of the service: {advice}"


@cache
def _names_in(descriptor: Descriptor) -> frozenset[str]:
    """Every field name of ``descriptor``'s message and of the messages in it (``metadata``
    for a ``metadata_json`` field: the service names the JSON by its key path)."""
    names: set[str] = set()
    todo, seen = [descriptor], set()
    while todo:
        current = todo.pop()
        if current.full_name in seen:
            continue
        seen.add(current.full_name)
        for field in current.fields:
            names.add(field.name)
            names.add(field.name.removesuffix("_json"))
            if field.message_type is not None:
                todo.append(field.message_type)
    return frozenset(names)


def request_field(message: str, request: Any = None) -> str | None:
    """The field ``message`` names (:func:`field_of`) when the ``request`` message could hold
    it (its first part is a field of the request or of a message in it, or the scope),
    else None: gRPC's own messages begin with words that are no field (``"SERVER: ..."``).
    Without a request, :func:`field_of`."""
    field = field_of(message)
    if field is None or request is None or not hasattr(request, "DESCRIPTOR"):
        return field
    first = re.split(r"[.\[]", field, maxsplit=1)[0]
    return field if first in _ANY_REQUEST_NAMES or first in _names_in(request.DESCRIPTOR) else None


def from_rpc_error(exc: grpc.RpcError, names: dict[str, str] | None = None, request: Any = None) -> AutomemError:
    """The typed error of a failed gRPC call (``grpc.aio.AioRpcError`` or ``grpc.RpcError``),
    its message and ``field`` naming the method's argument (``t_invalid``, ``start``;
    ``memory2_id`` by ``names``, the call's proto paths the method takes under other names)
    where the service named the proto field (``valid_to``, ``start_time``,
    ``relation.target_id``). ``request``: the message sent; a leading word that is no field
    of it is no field (:func:`request_field`). A request over the service's message size
    limit is ResourceExhausted saying so (:func:`too_large`), field None, as over REST."""
    code = exc.code() if callable(getattr(exc, "code", None)) else grpc.StatusCode.UNKNOWN
    details = (exc.details() if callable(getattr(exc, "details", None)) else str(exc)) or code.name
    if (size := _TOO_LARGE.match(details)) is not None:
        answer = size.group(1) == "CLIENT"
        return error_for(code, too_large(int(size.group(3)), int(size.group(2)), answer=answer), field=None)
    field = request_field(details, request)
    if field is None:
        return error_for(code, details, field=None)
    return error_for(code, _as_arguments(details, names))


#: Characters of a plain-text error body kept in the message (an HTML body is left out).
TEXT_KEPT = 200


#: The gateway's 413 (automem/gateway/app.py ``StreamedBodyLimit``): the body over its limit.
_BODY_LIMIT = re.compile(r"exceeds the limit of (\d+) bytes")
#: Request headers the gateway names by their HTTP name in a 400 (``"idempotency-key: String
#: should have at most 255 characters"``), and the argument each one carries.
HEADER_ARGUMENTS = {"idempotency-key": "idempotency_key"}


def _header_as_argument(message: str) -> str:
    """``message`` naming the argument instead of the header it names first (:data:`HEADER_ARGUMENTS`)."""
    head, sep, rest = message.partition(": ")
    return f"{HEADER_ARGUMENTS[head.lower()]}: {rest}" if sep and head.lower() in HEADER_ARGUMENTS else message


def from_http(status: int, body: object, *, reason: str = "", content_type: str = "",
              sent: int | None = None) -> AutomemError:
    """The typed error of a REST answer with status >= 400 and its decoded JSON body (or
    text). The gateway's body is ``{"message", "code", "grpc_code"?, "fields"?}``. Another
    body (a proxy's 502 / 504 page) gives a short message, ``"HTTP 502 Bad Gateway
    (text/html answer, not the gateway's)"``, with at most :data:`TEXT_KEPT` characters of
    a plain-text body and none of an HTML one; ``reason`` is the HTTP reason phrase and
    ``content_type`` the answer's Content-Type. A 413 (the body over the gateway's limit) is
    ResourceExhausted in the words the gRPC transport uses (:func:`too_large`; ``sent``: the
    body's size in bytes), field None. A header the gateway names by its HTTP name is named
    as the argument that carries it (``idempotency-key`` -> ``idempotency_key``)."""
    message, code = "", None
    field: str | None = FROM_MESSAGE
    if isinstance(body, dict):
        message = _header_as_argument(str(body.get("message") or body.get("error") or body.get("detail") or ""))
        name = body.get("grpc_code")
        if isinstance(name, str) and name in grpc.StatusCode.__members__:
            code = grpc.StatusCode[name]
        fields = body.get("fields")
        if isinstance(fields, list) and fields and isinstance(fields[0], str):
            field = field_of(_header_as_argument(fields[0])) or FROM_MESSAGE
        if status == 413 and code is None:
            limit = _BODY_LIMIT.search(message)
            message, field = too_large(int(limit.group(1)) if limit else None, sent), None
    else:
        kind = content_type.split(";", 1)[0].strip() or "no content type"
        message = f"HTTP {status} {reason}".rstrip() + f" ({kind} answer, not the gateway's)"
        text = " ".join(body.split()) if isinstance(body, str) and "html" not in kind else ""
        if text:
            message += ": " + (text if len(text) <= TEXT_KEPT else text[:TEXT_KEPT] + "...")
    code = code or _HTTP_CODES.get(status, grpc.StatusCode.INTERNAL if status >= 500 else grpc.StatusCode.UNKNOWN)
    return error_for(code, message or f"HTTP {status}", field=field, http_status=status)
