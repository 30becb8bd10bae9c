"""Domain errors and their one mapping to gRPC status codes and HTTP statuses.

Services raise these; the gRPC error interceptor turns them into status codes and the
gateway turns gRPC codes back into HTTP statuses with a JSON body.
"""

from __future__ import annotations

import re

import grpc


class ListenError(OSError):
    """A server could not listen on its address (in use, or not allowed); the message names
    the setting and the address. ``automem up`` / ``serve`` print it as one line and exit 1
    (automem/cli/main.py)."""


class HeldElsewhereError(ListenError):
    """What a process must hold alone (the embedded vector shard's directory) is held by
    another process; the message names the settings that give each its own. Printed as one
    line, as a port in use is."""


class UnreachableError(Exception):
    """A server the settings name (FalkorDB, Qdrant) could not be reached while the process
    started; the message names the server, its variables with their values and the reason.
    ``automem up`` / ``serve`` print it as one line and exit 1 (automem/cli/main.py)."""


class AutomemError(Exception):
    """Base class. ``code`` is the gRPC status code; ``field`` names the bad field, if any."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidArgument(AutomemError):
    """Bad input; the message names the field (HTTP 400)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(AutomemError):
    """No such memory in the caller's scope (HTTP 404)."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(AutomemError):
    """A tombstone blocks this content (HTTP 409)."""

    code = grpc.StatusCode.ALREADY_EXISTS


class Aborted(AutomemError):
    """The etag/version the write was based on is stale (HTTP 409)."""

    code = grpc.StatusCode.ABORTED


class FailedPrecondition(AutomemError):
    """A state transition that is not allowed (HTTP 409)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(AutomemError):
    """The key may not do this (HTTP 403)."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(AutomemError):
    """No valid key (HTTP 401)."""

    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(AutomemError):
    """A limit was hit; the message names it (HTTP 413/429)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(AutomemError):
    """A backing store is down (HTTP 503)."""

    code = grpc.StatusCode.UNAVAILABLE


#: gRPC status code -> HTTP status, used by the gateway.
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    # A call that ran out of its deadline met a stalled store (issue 12, item 10): retry later.
    grpc.StatusCode.DEADLINE_EXCEEDED: 503,
    # A call the service cancelled: its shutdown refused a call that had reached it but no
    # handler yet, or the grace for in-flight calls ended (AUTOMEM_SHUTDOWN_GRACE_SECONDS):
    # another replica can take it. A call the gateway cancels itself raises
    # asyncio.CancelledError in the gateway, never an RPC error with this code.
    grpc.StatusCode.CANCELLED: 503,
    grpc.StatusCode.UNIMPLEMENTED: 501,
}


#: The REST (AutoMem) names of the gRPC request fields REST spells otherwise: MemoryInput's
#: times (``timestamp``, ``t_valid``, ``t_invalid``; /work/shared/AUTOMEM_API.md ``POST
#: /memory``) and SearchMemoriesRequest's window (``GET /recall``'s ``start`` / ``end``).
#: Services name the proto fields; the gateway answers its callers these.
REST_FIELD_NAMES: dict[str, str] = {"event_time": "timestamp", "valid_from": "t_valid", "valid_to": "t_invalid",
                                    "start_time": "start", "end_time": "end"}
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?)*"
#: ``<field>: `` (a name, dotted path and ``[index]`` parts) at the start of a message.
_LEADING_FIELD = re.compile(rf"^({_NAME}): ")
#: A proto name of :data:`REST_FIELD_NAMES` as a whole path part (not ``restore_start_time``).
_RENAMED = re.compile(r"\b(" + "|".join(REST_FIELD_NAMES) + r")\b")


def rest_field(field: str, names: dict[str, str]) -> str:
    """``field`` (a proto path, ``"relation.target_id"``, ``"requests[3]"``) as one call's
    REST route names it: the longest path ``names`` maps that ``field`` is or begins with
    (followed by ``.`` or ``[``) is replaced by its REST name (``{"relation.target_id":
    "memory2_id"}``). A path mapped to ``""`` is a message whose fields the route takes at
    the top level: it is dropped with the ``.`` after it (``{"replacement": ""}``:
    ``"replacement.tags[0]"`` -> ``"tags[0]"``; ``"replacement"`` itself stays). Any other
    field is returned as it is."""
    for proto in sorted(names, key=len, reverse=True):
        if field == proto or field.startswith((proto + ".", proto + "[")):
            rest = field[len(proto):]
            if names[proto]:
                return names[proto] + rest
            if rest.startswith("."):
                return rest[1:]
    return field


def rest_message(message: str, names: dict[str, str] | None = None) -> str:
    """A service's error ``message`` as a REST caller reads it. ``names`` maps the proto
    fields of one call that its route takes under other names (``{"page_size": "limit"}``
    for ``GET /memory/by-tag``): the field the message begins with (``"<field>: ..."``, the
    convention of these errors) is renamed by :func:`rest_field`. Then, when that field
    has a part :data:`REST_FIELD_NAMES` renames, every such proto name in the message is
    spelled the REST way (``"valid_to: must be after valid_from"`` -> ``"t_invalid: must be
    after t_valid"``, ``memories[2].event_time`` -> ``memories[2].timestamp``;
    ``replacement.valid_to`` with ``{"replacement": ""}`` -> ``t_invalid``). Any other
    message is returned as it is."""
    match = _LEADING_FIELD.match(message)
    if match is None:
        return message
    field = match.group(1)
    if names and (renamed := rest_field(field, names)) != field:
        message, field = renamed + message[match.end(1):], renamed
    if not _RENAMED.search(field):
        return message
    return _RENAMED.sub(lambda m: REST_FIELD_NAMES[m.group(1)], message)
