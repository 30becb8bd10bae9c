"""Request bodies of the REST API (AutoMem's field names); automem/gateway/usecases.py
turns them into protos.

Field types are loose where AutoMem's were (``metadata`` is any JSON value, so a non-object
is reported by the ingest service naming the field); pydantic reports wrong types as 400s
naming the field.

Every JSON body is parsed by :func:`parse_json_body` (through :class:`JsonBodyRoute`, the
route class of every REST router): the one place where a number JSON cannot carry exactly
is refused with 400 naming the field, before any model sees the body.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from decimal import Decimal
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field


class _Refused:
    """Stands in for a number :func:`parse_json_body` refuses, until its path is known."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _first_refused(value: Any, path: str) -> tuple[str, str] | None:
    if isinstance(value, _Refused):
        return path or "body", value.reason
    if isinstance(value, dict):
        items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub_path, sub in items:
        found = _first_refused(sub, sub_path)
        if found:
            return found
    return None


def parse_json_body(raw: bytes | str) -> Any:
    """The JSON value of a request body, with every number read exactly or refused.

    Refused with HTTPException 400 whose detail starts with the field's path (``metadata.x``,
    ``memories[2].importance``; ``body`` for the top level):

    * ``NaN``, ``Infinity`` and ``-Infinity``: Python's ``json`` accepts them, JSON (RFC 8259
      §6) does not, and no store can compare or index them;
    * a decimal number an IEEE-754 double cannot hold as written: it overflows (``1e400``),
      underflows to zero (``1e-400``) or carries more digits than the double keeps
      (``0.1000000000000000000001``). The test is that the shortest text of the parsed
      double (``repr``, which Python guarantees to round-trip) equals the given number as a
      decimal, so ``1.50``, ``1E5`` and ``0.1`` pass. Integers stay Python ints of any size
      (their limits are the fields': metadata's in automem/ingest/logic.py).

    Malformed JSON raises ``json.JSONDecodeError`` (FastAPI's 400 with the position); an
    integer longer than Python's 4,300-digit conversion limit is a 400 naming ``body``.
    """
    refused = False

    def constant(name: str) -> _Refused:
        nonlocal refused
        refused = True
        return _Refused(f"{name} is not a JSON number; send a finite number (or null)")

    def decimal(text: str) -> float | _Refused:
        nonlocal refused
        value = float(text)
        if repr(value) == text or (math.isfinite(value) and Decimal(text) == Decimal(repr(value))):
            return value
        refused = True
        return _Refused(f"{text} cannot be held exactly by a 64-bit float (it would read back as "
                        f"{value!r}); send at most 17 significant digits within ±1.7e308")

    try:
        value = json.loads(raw, parse_constant=constant, parse_float=decimal)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # int() past sys.get_int_max_str_digits()
        raise HTTPException(400, f"body: a number is too long ({exc})") from None
    if refused and (found := _first_refused(value, "")):
        raise HTTPException(400, f"{found[0]}: {found[1]}")
    return value


class _JsonBodyRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json_body(await self.body())
        return self._json


class JsonBodyRoute(APIRoute):
    """Route class of the REST routers: the body's JSON is read by :func:`parse_json_body`
    (FastAPI's documented custom-``Request`` hook), so no route can see a number that JSON
    could not carry exactly."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_JsonBodyRequest(request.scope, request.receive))

        return strict


class MemoryRequest(BaseModel):
    """``POST /memory``: one memory (AutoMem fields) plus supersede mode and review flag."""

    model_config = ConfigDict(extra="allow")

    content: str = Field(..., description="The memory text (required; at most the content limit).")
    tags: list[str] = Field(default_factory=list)
    importance: float | None = Field(None, description="0..1, default 0.5")
    metadata: Any = Field(None, description="A JSON object")
    type: str | None = Field(None, description="Decision, Pattern, Preference, Style, Habit, Insight, Context")
    confidence: float | None = Field(None, description="0..1")
    t_valid: str | None = None
    t_invalid: str | None = None
    timestamp: str | None = None
    embedding: list[float] | None = None
    supersedes_memory_id: str | None = None
    supersede_relation: str | None = Field(None, description="INVALIDATED_BY (default) or EVOLVED_INTO")
    supersede_reason: str | None = None
    require_review: bool = False
    scope: str | None = None


class BatchMemoryRequest(BaseModel):
    """``POST /memory/batch``: ``{memories: [...]}``, at most 500."""

    memories: list[MemoryRequest]
    scope: str | None = None


class UpdateMemoryBody(BaseModel):
    """``PATCH /memory/{id}``: any subset of the updatable fields; ``etag`` optional."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    tags: list[str] | None = None
    importance: float | None = None
    type: str | None = None
    confidence: float | None = None
    timestamp: str | None = None
    t_valid: str | None = None
    t_invalid: str | None = None
    metadata: Any = None
    add_tags: list[str] | None = None
    etag: int | str | None = None


class Association(BaseModel):
    """One association (AutoMem's ``POST /associate`` fields)."""

    model_config = ConfigDict(extra="allow")

    memory1_id: str
    memory2_id: str
    type: str = "RELATES_TO"
    strength: float = 0.5
    reason: str | None = None


class AssociateRequest(BaseModel):
    """Single association fields, or ``associations: [...]`` (at most 500)."""

    model_config = ConfigDict(extra="allow")

    memory1_id: str | None = None
    memory2_id: str | None = None
    type: str = "RELATES_TO"
    strength: float = 0.5
    reason: str | None = None
    associations: list[Association] | None = None


class DecisionBody(BaseModel):
    """Body of approve / reject: the reason (required to reject)."""

    reason: str = ""


class ConsolidateBody(BaseModel):
    """``POST /consolidate``: mode full|decay|creative|cluster|forget, dry_run."""

    mode: str = "full"
    dry_run: bool = True


class ReprocessBody(BaseModel):
    """``POST /enrichment/reprocess``: memory ids."""

    ids: list[str]


class ReembedBody(BaseModel):
    """``POST /admin/reembed`` (AutoMem's automem/api/admin.py): ``batch_size`` memories per
    step (0 or absent = 32; above 100 capped at 100, as AutoMem), ``limit`` (0 or absent = all),
    ``force`` (re-embed memories that already have a vector of the current model)."""

    batch_size: int = Field(32, ge=0)
    limit: int | None = Field(None, ge=0)
    force: bool = False


class EntityMergeBody(BaseModel):
    """``POST /entity/{slug}/merge`` (AutoMem's body, verygoodplugins/automem
    automem/api/entity.py): ``merge_into`` (the slug to keep, required), ``category`` (for
    slugs several kinds share), ``reason``."""

    merge_into: str = ""
    category: str = ""
    reason: str = ""
