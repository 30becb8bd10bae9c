"""The gateway's one error type and its translation from gRPC statuses.

Use cases raise :class:`GatewayError` (or the domain's :class:`AutomemError` for input the
gateway cannot translate, e.g. an unparseable time); the REST app answers it as a JSON error
with ``status`` as the HTTP status, the MCP tools as a tool error naming ``code``.
"""

from __future__ import annotations

from typing import Any

import grpc
from fastapi.responses import JSONResponse

from automem.common.errors import HTTP_STATUS, rest_message

#: Seconds a client is asked to wait after a 429 (the rate limiter's smallest window).
RETRY_AFTER_SECONDS = 1
#: Seconds a client is asked to wait after a 503 (a store stalled, unreachable or being
#: restarted by ``automem up``'s supervision, which checks every half second).
RETRY_AFTER_UNAVAILABLE_SECONDS = 2


class GatewayError(Exception):
    """An error with an HTTP ``status`` and a ``message`` naming the field.

    ``code`` is the gRPC status when a service answered it (the service has then checked
    the caller's credentials: ``from_service``); ``extra`` goes into the REST error body.
    """

    def __init__(self, status: int, message: str, *, code: grpc.StatusCode | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.extra = extra

    @property
    def from_service(self) -> bool:
        """True when a service answered the error (so it has checked the credentials)."""
        return self.code is not None

    @classmethod
    def from_rpc(cls, exc: grpc.aio.AioRpcError, names: dict[str, str] | None = None) -> GatewayError:
        """The error of a failed call: HTTP status by automem/common/errors.py's one map
        (500 for unmapped codes; 503 when the service cannot be reached, or cancelled the
        call while shutting down: ``error_response`` adds ``Retry-After``). The message names
        the field as the gateway's callers send it: a proto field REST spells otherwise
        (``valid_to``, ``start_time``...) by its REST name (``t_invalid``, ``start``...;
        automem/common/errors.py :func:`rest_message`), and a proto field of this call its
        route takes under another name by that name (``names``: ``{"page_size": "limit"}``)."""
        code = exc.code()
        status = HTTP_STATUS.get(code, 500)
        if code == grpc.StatusCode.UNAVAILABLE and "failed to connect" in (exc.details() or "").lower():
            status = 503
        return cls(status, rest_message(exc.details() or code.name, names), code=code)


def error_response(status: int, message: str, **extra: Any) -> JSONResponse:
    """The REST error answer: ``{"status": "error", "error": msg, "message": msg, "code":
    status, **extra}``, with ``Retry-After`` on a 429 and a 503."""
    retry_after = {429: RETRY_AFTER_SECONDS, 503: RETRY_AFTER_UNAVAILABLE_SECONDS}.get(status)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse({"status": "error", "error": message, "message": message, "code": status, **extra},
                        status_code=status, headers=headers)
