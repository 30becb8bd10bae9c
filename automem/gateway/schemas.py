"""Request bodies of the REST API (AutoMem's field names); automem/gateway/usecases.py
turns them into protos.

Field types are loose where AutoMem's were (``metadata`` is any JSON value, so a non-object
is reported by the ingest service naming the field); pydantic reports wrong types as 400s
naming the field.

Every JSON body is parsed by :func:`parse_json_body` (through :class:`JsonBodyRoute`, the
route class of every REST router): the one place where a number JSON cannot carry exactly
is refused with 400 naming the field, before any model sees the body.

The OpenAPI schema says what the services enforce: :func:`declare_limits` adds the ranges,
enums, lengths, required fields, response models (:func:`response_schemas`) and auth
schemes to the generated schema (automem/gateway/app.py serves it at ``/openapi.json``);
tests/integration/test_openapi_fuzz.py checks both directions with schemathesis.
"""

from __future__ import annotations

import functools
import re
import sys
from collections import Counter
from collections.abc import Callable, Coroutine
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, field_validator

from automem.common.auth import MAX_SCOPE_LENGTH, SCOPE_PATTERN_RE, SCOPE_RE
from automem.common.errors import InvalidArgument
from automem.common.jsontext import (
    REPEATED_KEY,
    NestedTooDeeply,
    RepeatedKeys,
    inexact_number,
    key_path,
    loads,
    lone_surrogate,
    object_pairs,
)
from automem.common.model import ID_MAX_LENGTH, check_id
from automem.common.text import INVISIBLE_CLASS, UNPRINTABLE_CLASS
from automem.gateway.deps import refuse_non_utf8_target


def _not_a_boolean(value: Any) -> Any:
    """JSON ``true`` / ``false`` are not numbers: pydantic's lax mode reads them as 1 and 0
    (``importance: true`` stored 1.0, ``etag: true`` meant version 1). Refused instead."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")  # noqa: TRY004 - pydantic reports ValueError only
    return value


#: Largest version number a query or an etag can name (int64, the Memory message's ``version``;
#: automem/gateway/usecases.py ``parse_etag``).
MAX_VERSION = 2**63 - 1

#: A JSON number (an integer or a float; a numeric string as pydantic reads it), never a
#: boolean, never NaN or an infinity (``"NaN"`` as a string passed the body's JSON check and
#: every range check: ``strength`` reached the graph's query, a 500).
Number = Annotated[float, BeforeValidator(_not_a_boolean), Field(allow_inf_nan=False)]
#: A JSON integer (``2.0`` and ``"2"`` as pydantic reads them too), never a boolean.
Integer = Annotated[int, BeforeValidator(_not_a_boolean)]
#: An ETag value in a body: a version number or its text, never a boolean.
EtagValue = Annotated[int | str, BeforeValidator(_not_a_boolean)]


class _Refused:
    """Stands in for a number (or an object, then naming its ``key``) :func:`parse_json_body`
    refuses, until its path is known."""

    __slots__ = ("key", "reason")

    def __init__(self, reason: str, key: str | None = None) -> None:
        self.reason, self.key = reason, key


def _first_refused(value: Any, path: str) -> tuple[str, str] | None:
    if isinstance(value, _Refused):
        if value.key is not None:
            return key_path(path, value.key), value.reason
        return path or "body", value.reason
    if isinstance(value, dict):
        items: Any = ((key_path(path, str(k)), v) for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for sub_path, sub in items:
        found = _first_refused(sub, sub_path)
        if found:
            return found
    return None


def _first_lone_surrogate(value: Any, path: str) -> str | None:
    """The path of the first string (or object key) of ``value`` holding a lone surrogate."""
    if isinstance(value, str):
        return (path or "body") if lone_surrogate(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            sub_path = f"{path}.{k}" if path else str(k)
            if lone_surrogate(k):
                return f"{path or 'body'} (a key)"
            if found := _first_lone_surrogate(v, sub_path):
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if found := _first_lone_surrogate(v, f"{path}[{i}]"):
                return found
    return None


#: A JSON escape of a UTF-16 surrogate (``\ud800``-``\udfff``): only bodies holding one are walked.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


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

    * an integer longer than Python's int conversion limit (``sys.get_int_max_str_digits()``,
      4,300 digits by default);
    * a string (or object key) holding a lone UTF-16 surrogate (``"\\ud800"``): JSON's escapes
      allow it, no UTF-8 text (hence no store) can hold it;
    * an object giving one key twice (``{"x": 1, "x": 2}``), at any depth; the path names the
      key (``metadata.x``). Python's ``json`` keeps the last silently, other readers the first
      or both (RFC 8259 §4 leaves it open), so which value the caller meant is unknown.

    Malformed JSON raises ``json.JSONDecodeError`` (FastAPI's 400 with the position); JSON
    nested past the interpreter's recursion limit is an HTTPException 400 saying so.
    """
    refused = False

    def constant(name: str) -> _Refused:
        nonlocal refused
        refused = True
        return _Refused(f"{name} is not a JSON number; send a finite number (or null)")

    def decimal(text: str) -> float | _Refused:
        nonlocal refused
        if (reason := inexact_number(text)) is None:
            return float(text)
        refused = True
        return _Refused(reason)

    def integer(text: str) -> int | _Refused:
        nonlocal refused
        limit = sys.get_int_max_str_digits()
        if limit and len(text.lstrip("-")) > limit:
            refused = True
            return _Refused(f"an integer of {len(text.lstrip('-'))} digits is longer than the {limit} "
                            "digits a number may have here")
        return int(text)

    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any] | _Refused:
        nonlocal refused
        value = object_pairs(pairs)
        if not isinstance(value, RepeatedKeys):
            return value
        refused = True
        return _Refused(REPEATED_KEY, key=value.repeated[0])

    try:
        value = loads(raw, parse_constant=constant, parse_float=decimal, parse_int=integer,
                      object_pairs_hook=unique_keys)
    except NestedTooDeeply as exc:
        # FastAPI answered it as "There was an error parsing the body" (app.py: "not UTF-8 text,
        # or not JSON"), which sent the caller looking for the wrong fault.
        raise HTTPException(400, f"body: {exc}") from None
    if refused and (found := _first_refused(value, "")):
        raise HTTPException(400, f"{found[0]}: {found[1]}")
    if _SURROGATE_ESCAPE.search(raw.encode() if isinstance(raw, str) else raw) and (
            where := _first_lone_surrogate(value, "")):
        raise HTTPException(400, f"{where}: text must be valid Unicode: a lone surrogate (e.g. \\ud800) "
                                 "is not allowed")
    return value


class _JsonBodyRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse_json_body(await self.body())
        return self._json


def _query_names(dependant: Any) -> set[str]:
    """The query parameter names (aliases) a route and its dependencies read."""
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _list_names(dependant: Any) -> set[str]:
    """The query parameters (aliases) a route and its dependencies read as lists (repeatable)."""
    def is_list(annotation: Any) -> bool:
        if get_origin(annotation) in (list, tuple, set, frozenset):
            return True
        return any(is_list(a) for a in get_args(annotation) if a is not type(None)) \
            if get_origin(annotation) in (Union, UnionType) else False

    names = {p.alias for p in dependant.query_params if is_list(p.field_info.annotation)}
    for sub in dependant.dependencies:
        names |= _list_names(sub)
    return names


def _takes_a_key(dependant: Any) -> bool:
    """Whether a route or one of its dependencies reads the caller's key (automem/gateway/deps.py
    ``principal``): the routes that act in a scope (the public probes do not)."""
    return any((getattr(sub.call, "__module__", ""), getattr(sub.call, "__name__", "")) ==
               ("automem.gateway.deps", "principal") or _takes_a_key(sub) for sub in dependant.dependencies)


def public_route(request: Any) -> bool:
    """Whether ``request`` matched a route that reads no key (the public probes: /health,
    /livez, /readyz): its errors answer without a credentials check. An unmatched path is
    not public."""
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    return dependant is not None and not _takes_a_key(dependant)


def scope_parameter(names: Any) -> str | None:
    """The first of the query parameter ``names`` that is meant as a scope — ``scope`` once
    case, spaces, NULs and a trailing ``[]`` are set aside (``Scope``, ``scope[]``, ``scope%20``)
    — or None. The scope is the X-Automem-Scope header; such a parameter would have the call
    run in the caller's default scope while the caller believes it ran in another (the REST
    routes, :class:`JsonBodyRoute`, and ``/mcp``, automem/gateway/mcp_mount.py, refuse it)."""
    for name in names:
        if name.replace("\x00", "").strip().lower().removesuffix("[]").strip() == "scope":
            return name
    return None


#: The answer to a request with a scope query parameter (see :func:`scope_parameter`).
SCOPE_PARAMETER_ERROR = "scope: not a query parameter; the scope is the X-Automem-Scope header"


#: Query parameters every route reads: the caller's credentials (automem/gateway/deps.py
#: ``principal_metadata``), as AutoMem's automem/api/auth_helpers.py reads them.
CREDENTIAL_PARAMETERS = frozenset({"api_key", "admin_token"})


#: The service's own read options (no AutoMem route reads them, so no AutoMem client sends
#: them): a read route that does not take one refuses it (400 naming it) even where it ignores
#: other names, since ignoring it answers with what is current now to a caller who asked for
#: another time or version (break-it review: ``/entity/{slug}?known_at=T``).
READ_TIME_PARAMETERS = frozenset({"known_at", "as_of", "version", "include_archived", "include_pending"})
#: Where the memories as they were can be read instead, by the path of an AutoMem route that
#: takes no ``known_at`` / ``as_of`` (/work/shared/AUTOMEM_API.md): its 400 for one says so.
READ_TIME_ELSEWHERE = {
    "/startup-recall": "AutoMem's GET /startup-recall takes no read time; RecallService.StartupRecall "
                       "over gRPC reads it with read.known_at / read.as_of",
}


#: Query parameters of AutoMem's read routes that belong to AutoMem features this service
#: does not have (docs/automem-compat.md): accepted, changing nothing, so its clients work
#: unchanged (mcp-automem sends several; verygoodplugins/automem automem/api/recall.py reads
#: them). Any other parameter a strict route does not read is refused.
ACCEPTED_UNREAD = {
    "/recall": frozenset({"scope_fallback", "auto_decompose", "per_query_limit", "adaptive_floor", "language",
                          "lang", "active_path", "file_path", "focus_path"}),
}


def strict_query(methods: set[str], path: str) -> bool:
    """Whether a route refuses query parameters it does not read (400 naming the first): every
    route that changes data (any method but GET and HEAD: ``?dry_run=true`` on a route whose
    dry run is a body field purged for real), the service's own ``/v1/`` routes, and the two
    AutoMem reads with the most options, ``/recall`` and ``/memory/by-tag`` (a typo such as
    ``exclude_tag`` was ignored and the answer looked right), which accept the names of
    AutoMem's own parameters too (:data:`ACCEPTED_UNREAD`). AutoMem's other read routes ignore
    what they do not know, as AutoMem does."""
    return bool(set(methods) - {"GET", "HEAD"}) or path.startswith("/v1/") or path in ("/recall", "/memory/by-tag")


def body_model_fields(route: Any) -> list[str]:
    """The JSON field names of ``route``'s body model (``[]`` for a route without one)."""
    field = getattr(route, "body_field", None)
    annotation = getattr(getattr(field, "field_info", None), "annotation", None)
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return sorted(f.alias or name for name, f in candidate.model_fields.items())
    return []


class JsonBodyRoute(APIRoute):
    """Route class of the REST routers: the body's JSON is read by :func:`parse_json_body`
    (FastAPI's documented custom-``Request`` hook), so no route can see a number that JSON
    could not carry exactly; a writing route that takes no body refuses one (400), and a route
    :func:`strict_query` names refuses a query parameter it does not read (400); the others
    refuse one of :data:`READ_TIME_PARAMETERS` they do not read (400; saying where it is read
    instead when :data:`READ_TIME_ELSEWHERE` knows)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        # A DELETE route reads its options from the query and headers; a body it would never
        # read (``{"purge": true, "etag": 99}``) is refused, not dropped. An empty body, ``{}``
        # or null pass. A query parameter a writing route does not know (``?scope=proj1``: the
        # delete ran in the caller's default scope; ``?dry_run=true`` on ``:purge``) is refused.
        # The same for a POST without a body model (``:revoke``, ``:lift``, ``.../undo``:
        # ``{"dry_run": true}`` revoked for real), but one that reads its body itself (a
        # backup streamed to ``:restore``, declared in ``openapi_extra``).
        strict_delete = self.body_field is None and bool(self.methods & {"DELETE", "POST", "PATCH", "PUT"}) \
            and "requestBody" not in (self.openapi_extra or {})
        refuse_unknown = strict_query(self.methods, self.path)
        known = {*_query_names(self.dependant), *CREDENTIAL_PARAMETERS, *ACCEPTED_UNREAD.get(self.path, ())}
        # Parameters that may repeat: the lists, and those read by no one here.
        repeatable = {*_list_names(self.dependant), *ACCEPTED_UNREAD.get(self.path, ())}
        in_body = set(body_model_fields(self))
        scoped = _takes_a_key(self.dependant) and "scope" not in known
        elsewhere_hint = f" ({READ_TIME_ELSEWHERE[self.path]})" if self.path in READ_TIME_ELSEWHERE else ""

        async def strict(request: Request) -> Response:
            request = _JsonBodyRequest(request.scope, request.receive)
            for name, value in request.path_params.items():
                if isinstance(value, str) and name.endswith("_id"):
                    # An id no stored id can equal (blank, over-long, a control character) is
                    # 400 naming the parameter, as gRPC refuses it naming ``id`` (check_id).
                    try:
                        check_id(value, name)
                    except InvalidArgument as exc:
                        raise HTTPException(400, exc.message) from None
                # The graph cannot take a NUL (the OpenAPI schema says so: NO_NUL); its refusal
                # named no field ("a text value contains a NUL character").
                if isinstance(value, str) and "\x00" in value:
                    raise HTTPException(400, f"{name}: contains a NUL character")
            if scoped and scope_parameter(request.query_params):
                # Other routes accept and ignore what they do not know (AutoMem's clients send
                # e.g. ``format``, ../shared/AUTOMEM_API.md), but not a scope (scope_parameter).
                raise HTTPException(400, SCOPE_PARAMETER_ERROR)
            if not refuse_unknown:
                if unread := sorted((set(request.query_params) & READ_TIME_PARAMETERS) - known):
                    elsewhere = elsewhere_hint if unread[0] in ("known_at", "as_of") else ""
                    raise HTTPException(400, f"{unread[0]}: this route reads the memories as they are now; it "
                                             f"does not take {unread[0]}{elsewhere}")
                # A time given twice was read as its last value (break-it review); the strict
                # routes refuse every repeat below.
                given = Counter(name for name, _ in request.query_params.multi_items())
                if twice := sorted(n for n, count in given.items() if count > 1 and n in READ_TIME_PARAMETERS):
                    raise HTTPException(400, f"{twice[0]}: given more than once; it takes one value")
            if refuse_unknown and (unknown := sorted(set(request.query_params) - known)):
                # A name of bytes that are not UTF-8 is named as sent (the app's dependency
                # deps.utf8_request_target, which runs after this), not as decoded.
                refuse_non_utf8_target(request)
                if unknown[0] in in_body:
                    raise HTTPException(400, f"{unknown[0]}: a field of the JSON body, not a query parameter; "
                                             "nothing was done")
                raise HTTPException(400, f"{unknown[0]}: not a parameter of this route (it takes "
                                         f"{', '.join(sorted(known - CREDENTIAL_PARAMETERS)) or 'none'}); "
                                         "the scope is the X-Automem-Scope header" +
                                         ("" if request.method in ("GET", "HEAD") else "; nothing was done"))
            if refuse_unknown:
                # One value each: ``limit=5&limit=7`` read the last (AutoMem, on Flask, the first).
                given = Counter(name for name, _ in request.query_params.multi_items())
                if twice := sorted(n for n, count in given.items() if count > 1 and n not in repeatable):
                    raise HTTPException(400, f"{twice[0]}: given {given[twice[0]]} times; it takes one value" +
                                        ("" if request.method in ("GET", "HEAD") else "; nothing was done"))
            if strict_delete:
                raw = await request.body()
                if raw.strip():
                    try:
                        empty = await request.json() in ({}, None)
                    except ValueError:  # not JSON (UnicodeDecodeError and JSONDecodeError are ValueErrors)
                        empty = False
                    if not empty:  # answered after the key check (automem/gateway/app.py _http_error)
                        raise HTTPException(400, "body: this route takes no body; pass its options as query "
                                                 "parameters (and If-Match); nothing was done")
            return await handler(request)

        return strict


class StrictBody(BaseModel):
    """A body whose unknown fields are refused (400 naming the field and the fields it takes,
    automem/gateway/app.py), never dropped: ``{"dryRun": true}`` on ``:purge`` purged for real.
    Every body but AutoMem's memory and association payloads, which keep AutoMem's leniency."""

    model_config = ConfigDict(extra="forbid")


class MemoryRequest(BaseModel):
    """``POST /memory``: one memory (AutoMem fields) plus supersede mode and review flag."""

    model_config = ConfigDict(extra="allow")

    content: str = Field(..., description="The memory text (required; at most the content limit).")
    tags: list[str] = Field(default_factory=list)
    importance: Number | None = Field(None, description="0..1, default 0.5")
    metadata: Any = Field(None, description="A JSON object")
    type: str | None = Field(None, description="Decision, Pattern, Preference, Style, Habit, Insight, Context")
    confidence: Number | None = Field(None, description="0..1")
    t_valid: str | None = None
    t_invalid: str | None = None
    timestamp: str | None = None
    embedding: list[Number] | None = None
    supersedes_memory_id: str | None = None
    supersede_relation: str | None = Field(None, description="INVALIDATED_BY (default) or EVOLVED_INTO")
    supersede_reason: str | None = None
    require_review: bool = False
    scope: str | None = None


class BatchMemoryItem(MemoryRequest):
    """One memory of ``POST /memory/batch``: the fields of ``POST /memory``, but a batch item
    supersedes nothing and has no scope of its own (the batch's ``scope``): those fields are
    refused when set (automem/gateway/usecases.py ``create_memories``), and the OpenAPI schema
    says they must be null."""


class SupersedeBody(MemoryRequest):
    """``POST /v1/memories/{id}:supersede``: the replacement (``POST /memory`` fields) with
    ``supersede_relation`` / ``supersede_reason``; the memory replaced is the path's, so a
    ``supersedes_memory_id`` in the body is refused (null in the OpenAPI schema). A field it
    does not have is refused (the service's own route: ``{"dry_run": true}`` superseded)."""

    model_config = ConfigDict(extra="forbid")


class BatchMemoryRequest(StrictBody):
    """``POST /memory/batch``: ``{memories: [...]}``, at most 500. Beside ``memories`` and
    ``scope`` nothing is taken (``{"dry_run": true, "memories": [...]}`` stored them); each
    item keeps AutoMem's leniency."""

    memories: list[BatchMemoryItem]
    scope: str | None = None


class UpdateMemoryBody(StrictBody):
    """``PATCH /memory/{id}``: any subset of the updatable fields; ``etag`` optional."""

    content: str | None = None
    tags: list[str] | None = None
    importance: Number | None = None
    type: str | None = None
    confidence: Number | None = None
    timestamp: str | None = None
    t_valid: str | None = None
    t_invalid: str | None = None
    metadata: Any = None
    add_tags: list[str] | None = None
    etag: EtagValue | None = None


class Association(BaseModel):
    """One association (AutoMem's ``POST /associate`` fields)."""

    model_config = ConfigDict(extra="allow")

    memory1_id: str
    memory2_id: str
    type: str = "RELATES_TO"
    strength: Number = 0.5
    reason: str | None = None


class AssociateRequest(BaseModel):
    """Single association fields, or ``associations: [...]`` (at most 500)."""

    model_config = ConfigDict(extra="allow")

    memory1_id: str | None = None
    memory2_id: str | None = None
    type: str = "RELATES_TO"
    strength: Number = 0.5
    reason: str | None = None
    associations: list[Association] | None = None


class DecisionBody(StrictBody):
    """Body of approve / reject: the reason (required to reject)."""

    reason: str = ""


class ApiKeyBody(StrictBody):
    """``POST /v1/apiKeys`` (admin): ``role`` (reader, writer, admin), ``scopes`` (at least one
    pattern, each within the caller's own), ``default_scope`` ("" = the first pattern with
    ``*`` read as ``default``), ``display_name`` (≤ 200 characters), ``require_review``."""

    role: Literal["reader", "writer", "admin"]
    scopes: list[Annotated[str, Field(max_length=MAX_SCOPE_LENGTH, pattern=f"^{SCOPE_PATTERN_RE.pattern}$")]] = Field(
        min_length=1, max_length=50)
    default_scope: str = Field("", max_length=MAX_SCOPE_LENGTH, pattern=f"^({SCOPE_RE.pattern})?$")
    display_name: str = Field("", max_length=200, pattern=f"^[^{UNPRINTABLE_CLASS}]*$")
    require_review: StrictBool = False


class PurgeBody(StrictBody):
    """``POST /v1/memories/{id}:purge`` (admin): ``reason`` (≤ 1000 characters, kept in the
    content-free purge record), ``dry_run`` (count, remove nothing). Booleans are JSON
    booleans (``"yes"`` is a 400 naming the field)."""

    reason: str = Field("", max_length=1000)
    dry_run: StrictBool = False


class PurgeScopeBody(PurgeBody):
    """``POST /v1/scope:purge`` (admin): as :class:`PurgeBody`, plus ``confirm_scope``, which
    must repeat the scope being purged (the caller's scope)."""

    confirm_scope: str = Field(..., max_length=1000)


class ConsolidateBody(StrictBody):
    """``POST /consolidate``: mode full|decay|creative|cluster|forget, ``dry_run`` (default
    true; a JSON boolean: ``"false"`` is a 400 naming the field, where AutoMem's
    ``bool(data.get("dry_run", True))`` read it as true and a lax reading as false)."""

    mode: str = "full"
    dry_run: StrictBool = True

    @field_validator("mode")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():  # "" read as "full" ran the whole consolidation
            raise ValueError("name a mode: full, decay, creative, cluster or forget")
        return value


class ReprocessBody(StrictBody):
    """``POST /enrichment/reprocess``: memory ``ids``, a list or one comma-separated string
    (AutoMem's automem/api/enrichment.py reads both)."""

    ids: list[str] | str

    def id_list(self) -> list[str]:
        """The ids, a comma-separated string split and blank pieces dropped."""
        values = self.ids.split(",") if isinstance(self.ids, str) else self.ids
        return [v.strip() for v in values if v.strip()]


class SyncBody(StrictBody):
    """``POST /admin/sync``'s optional body, as AutoMem's automem/api/admin.py ``sync_missing``
    reads it: ``dry_run`` (a JSON boolean) and ``batch_size`` (AutoMem's embedding batch,
    1–100 there; accepted so its clients work, not used: the repair re-queues the missing
    memories to enrichment, which batches by ``AUTOMEM_EMBEDDING_BATCH_SIZE``)."""

    dry_run: StrictBool | None = None
    batch_size: int | None = Field(None, ge=1, le=2**31 - 1)


class ReembedBody(StrictBody):
    """``POST /admin/reembed`` (AutoMem's automem/api/admin.py): ``batch_size`` memories per
    step (0 or absent = 32; above 100 capped at 100 by the route, as AutoMem; the answer says
    the size applied), ``limit`` (0 or absent = all),
    ``force`` (re-embed memories that already have a vector of the current model). JSON types
    as JSON Schema reads them: ``true`` or ``"5"`` is no integer and ``"yes"`` no boolean (400
    naming the field); ``5.0`` is the integer 5."""

    batch_size: int = Field(32, ge=0, le=2**31 - 1)
    limit: int | None = Field(None, ge=0, le=2**31 - 1)
    force: StrictBool = False

    @field_validator("batch_size", "limit", mode="before")
    @classmethod
    def _json_integer(cls, value: Any) -> Any:
        if isinstance(value, bool | str):
            raise ValueError("must be a JSON integer")  # noqa: TRY004 - pydantic turns ValueError into a 400
        return value


class EntityMergeBody(StrictBody):
    """``POST /entity/{slug}/merge`` (AutoMem's body, verygoodplugins/automem
    automem/api/entity.py): ``merge_into`` (the slug to keep, required), ``category`` (for
    slugs several kinds share), ``reason``."""

    merge_into: str = ""
    category: str = ""
    reason: str = ""


# --- the OpenAPI schema tells the truth (issue 12 item 14) -------------------------------
#
# The request models above stay loose (AutoMem's types; the services check the values and
# answer 400 naming the field). What the services enforce is declared here, in one place,
# on the generated schema: ranges, enums, lengths, required fields and the auth schemes.


@functools.cache
def _blank_chars() -> str:
    """A regex character class body of every character :func:`automem.common.text.is_blank`
    treats as blank (:data:`automem.common.text.INVISIBLE_CLASS`), as ranges (computed once)."""
    import sys

    import regex

    every = "".join(chr(c) for c in range(sys.maxunicode + 1))
    chars = [ord(ch) for ch in regex.findall(INVISIBLE_CLASS, every)]
    ranges: list[tuple[int, int]] = []
    for c in chars:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1] = (ranges[-1][0], c)
        else:
            ranges.append((c, c))

    def esc(c: int) -> str:
        return f"\\u{c:04x}" if c <= 0xFFFF else chr(c)

    return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges)


#: The largest ``limit`` / ``offset`` the gateway can carry to a service (int32 proto fields);
#: a ``limit`` above the service's maximum is clamped to it, not refused.
INT32_MAX = 2**31 - 1


def _enum(words: list[str] | tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(words)}


def _word(words: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """A query parameter's words; "" (as absent) means the default."""
    return _enum(["", *words])


def declared_limits(settings: Any) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]:
    """``(parameters, bodies)``: the constraints the services enforce, for
    :func:`declare_limits`. ``parameters[path][name]`` is merged into that query parameter's
    schema on every method of ``path``; ``bodies[component][property]`` into that property
    of a request-body model (``""``: into the model itself).

    Sources: limits of recall (automem/recall/servicer.py SearchMemories, ListByTag,
    GetRelated, Analyze; ``limit`` of /recall and /memory/by-tag has a minimum only: above
    ``recall_max_limit`` / ``by_tag_max_limit`` it is clamped; ``query`` and ``queries`` of
    /recall: ``query_max_length``, ``QUERIES_MAX``), of ingest
    (automem/ingest/logic.py validate_content, validate_tags, MAX_TAGS, MAX_TAG_LENGTH,
    the 0..1 ranges; settings ``content_max_length``, ``batch_max``), of review
    (automem/ingest/review.py page sizes, statuses, kinds), the enums' words
    (automem/common/enums.py ``enum_words``) and AutoMem's types and relation types
    (automem/common/model.py)."""
    from zoneinfo import available_timezones

    from automem.common.auth import MAX_SCOPE_LENGTH, SCOPE_RE
    from automem.common.embedding import configured_dimension
    from automem.common.enums import enum_words
    from automem.common.model import AUTHORABLE_RELATIONS, SYSTEM_RELATIONS, TYPE_NAMES
    from automem.graph.entities import ENTITY_KINDS
    from automem.v1 import recall_service_pb2 as rs

    state_mode = _enum(enum_words(rs.StateMode))
    unit = {"type": "number", "minimum": 0, "maximum": 1}
    types = _enum([n for n in TYPE_NAMES.values() if n != "MetaPattern"])
    relations = _enum(list(AUTHORABLE_RELATIONS))
    # automem/graph/entities.py entity_category: "" is any kind (read in any case, trimmed).
    category = _word(sorted(ENTITY_KINDS))
    blank = _blank_chars()
    # A slug or name that is not blank as the service judges it (automem/common/text.py
    # is_blank: whitespace, U+001C-U+001F and U+0085 included, and invisible characters such
    # as U+3164 or U+200B), with no NUL.
    named = {"pattern": f"^[^\\u0000]*[^{blank}\\u0000][^\\u0000]*$"}
    content = {"type": "string", "minLength": 1, "maxLength": settings.content_max_length, **named}
    # Not blank (validate_tags refuses a tag of nothing but whitespace or invisible characters).
    tag = {"type": "string", "minLength": 1, "maxLength": 256,
           "pattern": f"^[^\\u0000-\\u001f\\u007f,]*[^{blank}\\u0000-\\u001f\\u007f,][^\\u0000-\\u001f\\u007f,]*$"}
    tags = {"type": "array", "items": tag, "maxItems": 100}
    when = {"type": "string", "format": "date-time"}  # ISO 8601 (automem/common/model.py parse_time)
    reads = {"state_mode": state_mode, "as_of": when, "known_at": when}
    # automem/common/timewindow.py: parse_bound takes an ISO date-time or a date (a whole day
    # in ``tz``); zone takes "", UTC/Z/GMT or an IANA name of the tz database.
    bound = {"anyOf": [when, {"type": "string", "format": "date"}]}
    zones = _enum(["", "UTC", "Z", "GMT", *sorted(available_timezones())])
    # automem/recall/servicer.py query_max_length (QUERY_MAX_LENGTH 4000, or the content
    # limit when larger: a memory's content fits as a query) and QUERIES_MAX (32).
    query = {"maxLength": max(4000, settings.content_max_length)}
    parameters: dict[str, dict[str, dict[str, Any]]] = {
        "/recall": {
            "limit": {"minimum": 1, "maximum": INT32_MAX}, "offset": {"minimum": 0, "maximum": INT32_MAX},
            "sort": _enum(enum_words(rs.SortOrder)), "order_by": _enum(enum_words(rs.SortOrder)), "tag_mode": _enum(enum_words(rs.TagMode)),
            "tag_match": _enum(enum_words(rs.TagMatch)), "recency_bias": _enum(enum_words(rs.RecencyBias)),
            # 1.. (AutoMem clamps below 1 to 1; 0 here read as the default: refused).
            "relation_limit": {"minimum": 1, "maximum": 100}, "expansion_limit": {"minimum": 1, "maximum": 500},
            "start": bound, "end": bound, "tz": zones, "timezone": zones,
            "query": query, "queries": {"maxItems": 32, "items": query},
            # automem/recall/servicer.py context_type_names (any case, blank items skipped).
            "context_types": {"items": _word(types["enum"])}, **reads},
        "/memory/by-tag": {"limit": {"minimum": 1, "maximum": INT32_MAX}, "offset": {"minimum": 0, "maximum": INT32_MAX},
                           "tag_mode": _word(enum_words(rs.TagMode)), "tag_match": _word(enum_words(rs.TagMatch)),
                           "tags": {"minItems": 1, "items": {
                               "type": "string", "pattern": "^[^\\u0000]*[^\\s,\\u0000][^\\u0000]*$"}}, **reads},
        "/memory/{memory_id}": reads,
        # Graph and entity views (automem/recall/graph_views.py; their numeric bounds are the
        # routes' own Query constraints, automem/gateway/routes_graph.py).
        "/graph/snapshot": {"since": when, "types": {"items": types}, **reads},
        "/graph/neighbors/{memory_id}": reads,
        "/entities": {"category": category},
        "/entity/{slug}": {"state_mode": state_mode, "slug": named, "category": category},
        "/entity/{slug}/merge": {"slug": named},
        "/memories/{memory_id}/related": {"max_depth": {"minimum": 1, "maximum": 3},
                                          "limit": {"minimum": 1, "maximum": 200},
                                          "relationship_types": {"items": _enum(AUTHORABLE_RELATIONS + SYSTEM_RELATIONS)},
                                          **reads},
        "/analyze": {"top": {"minimum": 1, "maximum": 200}},
        # page_size 0 = the service's default (AIP-158; automem/ingest/review.py).
        "/v1/review-items": {"page_size": {"minimum": 0, "maximum": 200},
                             "status": _enum(["pending", "approved", "rejected", "all"]),
                             "kind": _enum(["", "memory", "supersede_proposal"])},
        "/v1/tombstones": {"page_size": {"minimum": 0, "maximum": 200}},
        "/backup": {"known_at": when},  # the export at known_at (automem/common/backup.py)
        "/v1/memories/{memory_id}/history": {"page_size": {"minimum": 0, "maximum": 1000}},
        "/v1/purges": {"page_size": {"minimum": 0, "maximum": 200}},
    }
    metadata = {"anyOf": [{"$ref": "#/components/schemas/MetadataObject"}, {"type": "null"}]}
    # automem/common/auth.py resolve_scope ("" or absent: the key's default scope).
    scope = {"type": "string", "maxLength": MAX_SCOPE_LENGTH, "pattern": f"^({SCOPE_RE.pattern})?$"}
    # A caller embedding is stored as 32-bit floats (automem/v1 MemoryInput.embedding): a
    # larger magnitude would become infinite, which ingest refuses (_validate_embedding).
    float32 = 3.4028234663852886e38
    number = {"type": "number", "minimum": -float32, "maximum": float32}
    # A direction: a value a 32-bit float does not round to 0 (its smallest is ~1.4e-45; ingest
    # refuses a vector of zeros, automem/ingest/logic.py validate_embedding).
    direction = {"contains": {"type": "number", "anyOf": [{"minimum": 1e-45}, {"maximum": -1e-45}]}}
    embedding: dict[str, Any] = {"anyOf": [{"type": "array", "maxItems": 0},
                                           {"type": "array", "items": number, **direction}]}
    dimension = configured_dimension(settings)
    if dimension:  # the configured model's size (automem/common/embedding.py); [] and null: none given
        embedding = {"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0},
                               {"type": "array", "items": number, "minItems": dimension, "maxItems": dimension,
                                **direction}]}
    # A store's "" type is absent: classified (automem/ingest/logic.py build_memory); a PATCH
    # names a type (UpdateMemoryBody below).
    memory = {"content": content, "tags": tags, "importance": unit, "confidence": unit,
              "type": _word(types["enum"]),
              # "" as absent: the default INVALIDATED_BY (usecases.check_supersede_fields).
              "supersede_relation": _word(["INVALIDATED_BY", "EVOLVED_INTO"]), "embedding": embedding,
              "metadata": metadata, "t_valid": when, "t_invalid": when, "timestamp": when, "scope": scope}
    memory_id = ID_SCHEMA
    #: A field a body may only leave unset: null or "".
    unset = {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 0}]}
    # PATCH: these take no null (automem/gateway/usecases.py _NOT_NULL; null content is empty
    # content), and the body must name a field to change (IngestService.UpdateMemory's mask).
    not_null = {"_not_null": True}
    updatable = ("content", "tags", "importance", "type", "confidence", "timestamp", "t_valid", "t_invalid",
                 "metadata")
    bodies: dict[str, dict[str, Any]] = {
        # supersede_relation / supersede_reason only with the memory they replace
        # (usecases.check_supersede_fields).
        "MemoryRequest": {**memory, "": {"anyOf": [
            {"required": ["supersedes_memory_id"],
             "properties": {"supersedes_memory_id": ID_SCHEMA}},
            {"properties": {"supersede_relation": unset, "supersede_reason": unset}}]}},
        "SupersedeBody": {**memory, "supersedes_memory_id": unset},
        # A batch item supersedes nothing and takes the batch's scope (usecases.create_memories).
        "BatchMemoryItem": {**memory, **{k: unset for k in (
            "supersedes_memory_id", "supersede_relation", "supersede_reason", "scope")}},
        "BatchMemoryRequest": {"memories": {"minItems": 1, "maxItems": settings.batch_max}, "scope": scope},
        "UpdateMemoryBody": {**{k: v for k, v in memory.items() if k not in ("supersede_relation",)},
                             **{k: {**memory[k], **not_null} for k in ("content", "tags", "importance",
                                                                      "confidence", "timestamp", "t_valid")},
                             "type": {**types, **not_null},
                             "metadata": {"$ref": "#/components/schemas/MetadataObject"},
                             "add_tags": {**tags, "minItems": 1},
                             # A version number (from 1), "*" or a strong HTTP etag of one (usecases.body_etag).
                             "etag": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_VERSION},
                                                {"type": "string",
                                                 "pattern": '^"*(\\*|0*[1-9][0-9]{0,17})"*$'},
                                                {"type": "null"}]},
                             "": {"anyOf": [{"required": [k]} for k in (*updatable, "add_tags")]}},
        "Association": {"type": relations, "strength": unit, "memory1_id": memory_id, "memory2_id": memory_id},
        "AssociateRequest": {"type": relations, "strength": unit, "memory1_id": memory_id, "memory2_id": memory_id,
                             "associations": {"minItems": 1, "maxItems": settings.batch_max},
                             # One association's fields, or ``associations`` and none of them
                             # (routes_memory.associate refuses both: one would be dropped).
                             "": {"anyOf": [{"required": ["memory1_id", "memory2_id"],
                                             "properties": {"memory1_id": memory_id, "memory2_id": memory_id,
                                                            "associations": {"type": "null"}}},
                                            {"required": ["associations"],
                                             "properties": {"associations": {"type": "array"}},
                                             "not": {"anyOf": [{"required": [name]} for name in (
                                                 "memory1_id", "memory2_id", "type", "strength", "reason")]}}]}},
        "ConsolidateBody": {"mode": _enum(["full", "decay", "creative", "cluster", "forget"])},
        "EntityMergeBody": {"merge_into": named, "category": category, "": {"required": ["merge_into"]}},
    }
    return parameters, bodies


#: The auth schemes: ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``
#: (automem/gateway/deps.py ``principal_metadata``).
SECURITY_SCHEMES = {"bearer": {"type": "http", "scheme": "bearer"},
                    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}


#: Metadata (automem/ingest/logic.py parse_metadata, check_metadata_values): a JSON object
#: whose keys hold no control character and whose integers read back exactly (±(2^53-1));
#: at most METADATA_MAX_DEPTH (20) levels and METADATA_MAX_BYTES (64 KiB) of JSON, which a
#: JSON Schema cannot count and the descriptions state.
METADATA_SCHEMAS = {
    "MetadataObject": {
        "type": "object", "description": "Any JSON object of at most 20 levels and 64 KiB of JSON.",
        "propertyNames": {"pattern": "^[^\\u0000-\\u001f\\u007f]*$"},
        "additionalProperties": {"$ref": "#/components/schemas/MetadataValue"}},
    "MetadataValue": {"anyOf": [
        {"type": "string"}, {"type": "boolean"}, {"type": "null"},
        {"type": "number", "minimum": -(2**53 - 1), "maximum": 2**53 - 1},
        {"type": "array", "items": {"$ref": "#/components/schemas/MetadataValue"}},
        {"$ref": "#/components/schemas/MetadataObject"}]},
}


def _merge(target: dict[str, Any], extra: dict[str, Any]) -> None:
    """Merge ``extra`` into a property schema; a nullable ``anyOf: [X, null]`` gets it on X
    (and loses the null branch when ``extra`` holds ``_not_null``)."""
    extra = dict(extra)
    branches = [b for b in target.get("anyOf", []) if b.get("type") != "null"]
    if extra.pop("_not_null", False) and len(branches) == 1:
        target.pop("anyOf")
        target.update(branches[0])
        branches = []
    if "anyOf" in extra or "$ref" in extra:  # a whole schema of its own
        for key in ("anyOf", "type", "items", "$ref"):
            target.pop(key, None)
        target.update(extra)
        return
    place = branches[0] if len(branches) == 1 else target
    for key, value in extra.items():
        if key == "items" and isinstance(place.get("items"), dict):
            place["items"].update(value)
        elif key == "type" and place is target and "anyOf" in target:
            continue
        else:
            place[key] = value


def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object schema with ``required`` properties (and ``optional`` ones); more may come."""
    return {"type": "object", "required": list(required), "properties": {**required, **(optional or {})},
            "additionalProperties": True}


def response_schemas() -> tuple[dict[str, Any], dict[tuple[str, str, str], dict[str, Any]]]:
    """``(components, answers)``: the answers of AutoMem's routes (/work/shared/AUTOMEM_API.md,
    as automem/gateway/presenters.py builds them) as JSON Schemas. ``answers[(path, method,
    status)]`` is the schema of that answer; ``components`` the shared ``MemoryOut`` and
    ``RelationOut``. Every answer may carry more fields than listed."""
    text, number, integer, boolean = ({"type": t} for t in ("string", "number", "integer", "boolean"))
    maybe = {"type": ["string", "null"]}
    obj = {"type": "object"}
    texts = {"type": "array", "items": text}
    memory_ref = {"$ref": "#/components/schemas/MemoryOut"}
    memories = {"type": "array", "items": memory_ref}
    relation_ref = {"$ref": "#/components/schemas/RelationOut"}
    memory_out = _obj({
        "id": text, "memory_id": text, "content": text, "summary": maybe, "tags": texts, "importance": number,
        "confidence": number, "type": maybe, "metadata": obj, "timestamp": maybe, "created_at": maybe,
        "updated_at": maybe, "last_accessed": maybe, "t_valid": maybe, "t_invalid": maybe, "recorded_at": maybe,
        "retracted_at": maybe, "state": text, "superseded_by": maybe, "version": integer, "etag": text,
        "scope": text, "content_hash": text, "entities": {"type": "array", "items": obj},
        "embedding_status": text, "enrichment_status": text, "relevance_score": number, "source": maybe,
        "state_reason": maybe, "superseded_at": maybe, "prior_t_invalid": maybe})
    relation_out = _obj({"memory1_id": text, "memory2_id": text, "type": text, "strength": number,
                         "created_at": maybe, "reason": maybe, "properties": obj})
    ok = {"status": text}
    stored = _obj({**ok, "memory_id": text, "stored_at": maybe, "type": maybe, "confidence": number, "qdrant": text,
                   "embedding_status": text, "enrichment": text, "metadata": obj, "timestamp": maybe,
                   "updated_at": maybe, "last_accessed": maybe, "state": text, "scope": text, "memory": memory_ref,
                   "query_time_ms": number},
                  {"deduplicated": boolean, "superseded_memory_id": text, "superseded": memory_ref,
                   "relation": relation_ref})
    batch_associated = _obj({"status": text, "created_count": integer, "failed_count": integer,
                             "succeeded": {"type": "array", "items": relation_ref},
                             "failed": {"type": "array", "items": _obj({"index": integer, "error": text,
                                                                         "code": integer})}})
    answers = {
        ("/memory", "post", "201"): stored,
        ("/v1/memories/{memory_id}:supersede", "post", "201"): stored,
        ("/memory/batch", "post", "201"): _obj({**ok, "stored": integer, "created": integer, "memory_ids": texts,
                                                "deduplicated": {"type": "array", "items": boolean},
                                                "qdrant": text, "enrichment": text, "query_time_ms": number}),
        ("/memory/{memory_id}", "get", "200"): _obj({**ok, "memory": memory_ref}),
        ("/memory/{memory_id}", "patch", "200"): _obj({**ok, "memory_id": text, "memory": memory_ref,
                                                       "updated_at": maybe, "etag": text}),
        ("/memory/{memory_id}", "delete", "200"): _obj({**ok, "memory_id": text, "message": text, "state": text,
                                                        "memory": memory_ref}),
        ("/memory/by-tag", "delete", "200"): _obj({**ok, "tags": texts, "dry_run": boolean, "deleted_count": integer,
                                                   "memory_ids": texts}, {"would_delete_count": integer}),
        ("/memory/by-tag", "get", "200"): _obj({**ok, "tags": texts, "count": integer, "limit": integer,
                                                "offset": integer, "has_more": boolean,
                                                "total": {"type": ["integer", "null"]}, "next_page_token": maybe,
                                                "memories": memories}),
        ("/recall", "get", "200"): _obj({
            **ok, "count": integer, "state_mode": text, "query": text, "tags": texts, "limit": integer,
            "offset": integer, "sort": text, "time_window": _obj({"start": maybe, "end": maybe}),
            "query_time_ms": number,
            "results": {"type": "array", "items": _obj({"id": text, "memory": memory_ref, "score": number,
                                                        "final_score": number, "match_type": text,
                                                        "score_components": obj})}}),
        ("/associate", "post", "201"): {"anyOf": [
            _obj({**ok, "message": text, "memory1_id": text, "memory2_id": text, "type": text,
                  "relation_type": text, "strength": number}), batch_associated]},
        ("/associate", "post", "207"): batch_associated,
        ("/memories/{memory_id}/related", "get", "200"): _obj({
            **ok, "memory_id": text, "count": integer,
            "related_memories": {"type": "array", "items": _obj({"id": text, "memory": memory_ref,
                                                                 "relation_type": text, "strength": number,
                                                                 "depth": integer},
                                                                {"replaces_id": text})}}),
        ("/startup-recall", "get", "200"): _obj({**ok, "critical_lessons": memories, "system_rules": memories,
                                                 "has_critical": boolean, "lesson_count": integer,
                                                 "rule_count": integer}),
    }
    return {"MemoryOut": memory_out, "RelationOut": relation_out}, answers


#: No text the graph stores may hold NUL (automem/graph/store.py ``_check_params``: FalkorDB's
#: parser stops there), so every free string of a request says so.
NO_NUL = "^[^\\u0000]*$"


def _no_nul(node: Any) -> None:
    """Give every string schema under ``node`` without a pattern, enum or format :data:`NO_NUL`."""
    if isinstance(node, list):
        for item in node:
            _no_nul(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "string" and not {"pattern", "enum", "format"} & node.keys():
        node["pattern"] = NO_NUL
    for key in ("properties", "items", "anyOf", "allOf", "oneOf", "additionalProperties"):
        sub = node.get(key)
        _no_nul(list(sub.values()) if key == "properties" and isinstance(sub, dict) else sub)


#: An id (a ``{memory_id}``, ``{item_id}``... in a path; ``memory1_id``, ``supersedes_memory_id``
#: in a body) as automem/common/model.py ``check_id`` takes it: 1 to ID_MAX_LENGTH characters,
#: not all blank, none of them a control character (Unicode Cc: U+0000-U+001F, U+007F-U+009F).
_NO_CC = "\\u0000-\\u001f\\u007f-\\u009f"
ID_SCHEMA = {"type": "string", "minLength": 1, "maxLength": ID_MAX_LENGTH,
             "pattern": f"^[^{_NO_CC}]*[^\\s{_NO_CC}][^{_NO_CC}]*$"}


#: Query parameters an operation refuses together (400 naming them): JSON Schema cannot state
#: a rule between two parameters, so the schema says it in the operation's
#: ``x-exclusive-parameters`` (groups of names of which a request gives at most one) and in
#: its 400 answer's description. ``version`` and ``known_at`` of ``GET /memory/{id}``:
#: automem/gateway/usecases.py ``get_memory``.
EXCLUSIVE_PARAMETERS: dict[tuple[str, str], list[list[str]]] = {
    ("/memory/{memory_id}", "get"): [["version", "known_at"]],
}


def declare_limits(schema: dict[str, Any], settings: Any, anonymous: bool) -> dict[str, Any]:
    """Add :func:`declared_limits`, :data:`EXCLUSIVE_PARAMETERS` and :data:`SECURITY_SCHEMES`
    to a generated OpenAPI ``schema`` (in place; returned). ``anonymous``: requests without a
    key are served too (no keys configured), so every operation also lists the empty
    security requirement."""
    parameters, bodies = declared_limits(settings)
    for (path, method), groups in EXCLUSIVE_PARAMETERS.items():
        operation = schema.get("paths", {}).get(path, {}).get(method)
        if operation is None:
            continue
        operation["x-exclusive-parameters"] = groups
        refused = "; ".join(f"{' and '.join(group)} given together (pass one)" for group in groups)
        answer = operation.setdefault("responses", {}).setdefault("400", {})
        answer["description"] = f"{answer.get('description') or 'Invalid request'}; also {refused}"
    for path, methods in schema.get("paths", {}).items():
        for operation in methods.values():
            for parameter in operation.get("parameters", []):
                extra = parameters.get(path, {}).get(parameter["name"])
                if extra:
                    _merge(parameter.setdefault("schema", {}), extra)
                    if "minItems" in extra:
                        parameter["required"] = True
    components = schema.setdefault("components", {})
    for name, props in bodies.items():
        model = components.get("schemas", {}).get(name)
        if model is None:
            continue
        for prop, extra in props.items():
            if prop == "":
                model.update(extra)
            elif prop in model.get("properties", {}):
                _merge(model["properties"][prop], extra)
    for name, model in components.get("schemas", {}).items():
        if name.endswith(("Request", "Body")) or name in ("Association", "BatchMemoryItem"):
            _no_nul(model)
    for methods in schema.get("paths", {}).values():
        for operation in methods.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "path" and parameter["name"].endswith("_id"):
                    _merge(parameter.setdefault("schema", {}), ID_SCHEMA)  # JsonBodyRoute: check_id
                _no_nul(parameter.get("schema"))
    components.setdefault("schemas", {}).update(METADATA_SCHEMAS)  # metadata is stored as JSON text
    shared, answers = response_schemas()
    components["schemas"].update(shared)
    for (path, method, status), body in answers.items():
        operation = schema.get("paths", {}).get(path, {}).get(method)
        if operation is not None:
            answer = operation.setdefault("responses", {}).setdefault(status, {"description": "Partial success"})
            answer["content"] = {"application/json": {"schema": body}}
    reject = schema.get("paths", {}).get("/v1/review-items/{item_id}:reject", {}).get("post")
    if reject is not None:
        # A rejection needs a reason (automem/ingest/review.py RejectItem); approve shares the model.
        # Not blank as the service judges it (automem/common/text.py is_blank): JSON Schema's \S
        # also takes U+001C-U+001F, U+0085 and invisible characters such as U+3164 (refused: 400).
        reject["requestBody"]["content"]["application/json"]["schema"] = {
            "allOf": [{"$ref": "#/components/schemas/DecisionBody"}], "required": ["reason"],
            "properties": {"reason": {"type": "string", "pattern": f"[^{_blank_chars()}]"}}}
    components["securitySchemes"] = SECURITY_SCHEMES
    schema["security"] = [{"bearer": []}, {"apiKey": []}] + ([{}] if anonymous else [])
    return schema
