"""The MCP server: mcp-automem's six tools over the gRPC services.

Served two ways:

* streamable HTTP at ``/mcp`` in the gateway (:func:`http_endpoint`, mounted by
  automem/gateway/mcp_mount.py); the caller's
  ``Authorization: Bearer`` / ``X-API-Key`` / ``X-Automem-Scope`` headers are forwarded to
  gRPC exactly as the REST routes forward them (``gateway.app.credentials``);
* stdio (``automem mcp``, :func:`run_stdio`), talking to a running service over gRPC with
  the key given on the command line or in ``AUTOMEM_API_KEY``.

The tools are thin adapters over the gateway's use cases (automem/gateway/usecases.py), the
same the REST routes call: a tool checks only what concerns its own modes (which arguments
go together), the use case translates and makes the one gRPC call (supersede is the atomic
SupersedeMemory RPC, bulk delete the DeleteMemoriesByTag RPC with ``dry_run`` unless
``confirm: true``), and the services check limits and rules. Bodies are built by
automem/gateway/presenters.py; this module renders them as text. Every result shows each
memory's ``state`` and validity window (``t_valid``, ``t_invalid``), in every ``format``.
Failures come back as MCP tool errors whose message names the field (and the gRPC status
when a service answered). A memory's text longer than ``Settings.content_max_length`` is
refused before it is sent, as the ingest service refuses it (automem/common/model.py
``check_content_length``): a text of megabytes exceeded gRPC's message size and came back as
gRPC's text, naming nothing.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' signatures at runtime.

import asyncio
import contextlib
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    TextContent,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, StrictStr, ValidationError
from starlette.requests import Request

from automem.common.client import AutomemClient
from automem.common.errors import AutomemError
from automem.common.grpc_tls import channel_credentials, channel_options

# The relation types a supersede may write: the lifecycle rule the ingest service applies,
# offered as the tool's choices.
from automem.common.lifecycle import SUPERSEDING_RELATIONS
from automem.common.model import check_content_length
from automem.common.settings import Settings
from automem.common.text import text_key
from automem.gateway import jsonrpc, presenters, usecases
from automem.gateway.deps import Caller, credentials, split_values
from automem.gateway.errors import GatewayError
from automem.gateway.schemas import BatchMemoryItem, Integer, MemoryRequest, Number

INSTRUCTIONS = (
    "automem is the agent's persistent long-term memory (graph + vectors). Use recall_memory to "
    "retrieve context (session start, before decisions, when debugging), store_memory to persist "
    "decisions, patterns, preferences and fixes (with supersedes_memory_id to replace an outdated "
    "one), associate_memories to link memories. update_memory edits a memory in place, "
    "delete_memory removes one by id or previews/deletes by tag, check_database_health checks "
    "the service. Every memory shows its state and validity window (t_valid, t_invalid)."
)

_UPDATABLE = ("content", "tags", "importance", "type", "confidence", "timestamp", "t_valid", "t_invalid",
              "metadata")

Format = Literal["text", "items", "detailed", "json"]


def _caller(client: AutomemClient, settings: Settings, ctx: Context | None) -> Caller:
    """The tool call's :class:`Caller`: the HTTP request's credentials (as the REST routes
    forward them), else the client's own key (stdio)."""
    request = None
    if ctx is not None:
        with contextlib.suppress(ValueError):
            request = ctx.request_context.request
    if isinstance(request, Request):
        try:
            return Caller(client, credentials(request, settings))
        except GatewayError as exc:
            raise ToolError(exc.message) from None
    return Caller(client, client.metadata())


def _tool_message(exc: GatewayError) -> str:
    """A gateway error as tool-error text: the message, plus the gRPC status a service answered."""
    return f"{exc.message} ({exc.code.name})" if exc.code is not None else exc.message


@contextlib.contextmanager
def _tool_errors(fields: dict[str, str] | None = None, ids: dict[str, str | None] | None = None) -> Any:
    """Failures of a use case (input validation, service answers) as ToolErrors naming the
    tool's argument: ``fields`` maps a service's field name to the argument it came from
    (``{"props": "reason"}``: a message ``props: ...`` reads ``reason: ...``); ``ids`` maps an
    argument to the id it gave, so that a message naming no field but one of the ids
    (``memory X not found``) is prefixed with that argument (the first that gave it)."""
    try:
        yield
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
            problems.append(f"{loc}: {err.get('msg')}")
        raise ToolError("; ".join(problems)) from None
    except GatewayError as exc:
        raise ToolError(_named(_tool_message(exc), fields or {}, ids or {})) from None
    except AutomemError as exc:
        raise ToolError(_named(exc.message, fields or {}, ids or {})) from None


_FIELD_PREFIX = re.compile(r"^([\w.\[\]]+): ")


def _named(message: str, fields: dict[str, str], ids: dict[str, str | None]) -> str:
    """``message`` with its leading field renamed by ``fields``, or, naming no field, prefixed
    with the argument of ``ids`` whose id it mentions (:func:`_tool_errors`)."""
    if found := _FIELD_PREFIX.match(message):
        name = found.group(1)
        return f"{fields[name]}: {message[found.end():]}" if name in fields else message
    for argument, given in ids.items():
        if given and re.search(rf"(?<![\w-]){re.escape(given)}(?![\w-])", message):
            return f"{argument}: {message}"
    return message


def _result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


# --- rendering ------------------------------------------------------------------------------


def _window(m: dict[str, Any]) -> str:
    return f"{m.get('t_valid') or '?'} → {m.get('t_invalid') or 'open'}"


def _render_memories(items: list[dict[str, Any]], fmt: str) -> str:
    """Text of a list of memories. Each line/block always shows state and validity window."""
    if not items:
        return "No memories found."
    lines: list[str] = []
    for i, m in enumerate(items, 1):
        score = f" score={m['final_score']:.3f}" if isinstance(m.get("final_score"), float) else ""
        if fmt == "text":
            lines.append(f"{i}. {m['content']}\n   id={m['memory_id']} state={m['state']} "
                         f"valid={_window(m)} tags={','.join(m.get('tags') or [])}{score}")
            continue
        block = [f"[{i}] {m['memory_id']}", f"content: {m['content']}", f"state: {m['state']}",
                 f"t_valid: {m.get('t_valid')}", f"t_invalid: {m.get('t_invalid')}",
                 f"tags: {', '.join(m.get('tags') or [])}", f"importance: {m.get('importance')}"]
        if m.get("match_type"):
            block.append(f"match: {m['match_type']}{score}")
        if m.get("superseded_by"):
            block.append(f"superseded_by: {m['superseded_by']}")
        if m.get("replaces_id"):
            block.append(f"replaces: {m['replaces_id']}")
        if fmt == "detailed":
            block += [f"type: {m.get('type')}", f"confidence: {m.get('confidence')}",
                      f"created_at: {m.get('created_at')}", f"updated_at: {m.get('updated_at')}",
                      f"metadata keys: {', '.join(sorted((m.get('metadata') or {}).keys())) or '-'}",
                      f"version: {m.get('version')}"]
            if m.get("score_components"):
                block.append("score components: " + ", ".join(
                    f"{k}={v:.3f}" for k, v in sorted(m["score_components"].items())))
        lines.append("\n".join(block))
    return ("\n" if fmt == "text" else "\n\n").join(lines)


def _render(header: str, body: dict[str, Any], items: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(body, ensure_ascii=False, indent=2)
    return f"{header}\n\n{_render_memories(items, fmt)}"


# --- argument types -------------------------------------------------------------------------

OptStr = str | None
#: JSON numbers, never booleans (automem/gateway/schemas.py ``Number``: pydantic's lax mode
#: would read ``true`` as 1.0), as the REST routes take them.
OptFloat = Number | None
def _one_or_many(value: Any) -> Any:
    """A string given for a list argument as its comma-separated items (``"a, b"`` ->
    ``["a", "b"]``, ``split_values``), for every tool: docs/mcp.md says list arguments take
    comma-separated items, yet ``tags: "a,b"`` was a tool error ("Input should be a valid
    list"), and once read as one item ``store_memory`` refused it for its comma; a model often
    sends one. A list is taken as it is."""
    return split_values([value]) if isinstance(value, str) else value


OptList = Annotated[list[str] | None, BeforeValidator(_one_or_many)]
#: A protobuf int32: a number beyond it cannot be sent (the service checks the real range). An
#: integer (``2.0`` too, as JSON Schema's ``integer``), never a boolean (pydantic's lax mode
#: read ``true`` as 1).
Int32 = Annotated[Integer, Field(ge=-(2**31), le=2**31 - 1)]


def Bounded(low: int, high: int) -> Any:
    """A JSON integer argument in ``low..high`` (the range the REST route declares,
    automem/gateway/routes_graph.py): beyond it, a tool error naming the argument (a number
    past int32 was an unnamed internal error, and 0 silently read as the default)."""
    return Annotated[Integer, Field(ge=low, le=high)]


#: A number in 0..1 (importance, strength), never a boolean.
Unit = Annotated[Number, Field(ge=0, le=1)]
SupersedeRelation = Literal[SUPERSEDING_RELATIONS]  # type: ignore[valid-type]


class AssociationItem(BaseModel):
    """One association of a batch; a field it does not have is refused (``strenght``, a
    ``scope`` of its own), not dropped."""

    model_config = ConfigDict(extra="forbid")

    memory1_id: str
    memory2_id: str
    type: str = "RELATES_TO"
    strength: Number = 0.5
    reason: str | None = None


class MemoryItem(BatchMemoryItem):
    """One memory of a batch: the item of ``POST /memory/batch`` (its ``embedding`` checked as
    there; its supersede fields and ``scope`` refused naming ``memories[i].<field>``, by
    automem/gateway/usecases.py ``create_memories``), and any other field refused, not dropped
    (an item's ``scope`` stored the memory in the caller's scope)."""

    model_config = ConfigDict(extra="forbid")


def _preview_token(tags: list[str], memory_ids: Any) -> str:
    """The token of a by-tag delete preview: a digest of its tags and the ids it listed, so a
    confirmation deletes what the preview showed (``delete_memory``)."""
    text = "\n".join([*sorted(text_key(t) for t in tags), "", *sorted(memory_ids)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- the server -----------------------------------------------------------------------------


#: What an argument of a pydantic error type must be (:func:`_argument_errors`).
_EXPECTED = {"string_type": "a string", "list_type": "a list", "dict_type": "an object", "model_type": "an object",
             "model_attributes_type": "an object", "float_type": "a number", "float_parsing": "a number",
             "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
             "bool_type": "true or false", "bool_parsing": "true or false"}
#: Parts of a pydantic error's ``loc`` that name a member of a union type, not an argument.
_UNION_MEMBERS = {"int", "str", "float", "bool", "dict", "list", "none", "bytes"}


def _argument_errors(exc: ValidationError) -> str:
    """The arguments ``exc`` refused, one ``<argument>: <problem>`` each (``importance:
    expected a number, got a string``; ``memories[0].content: ...``; an argument of several
    types lists them: ``etag: expected an integer or a string, got a number``), joined by
    ``; ``: the SDK's text was pydantic's, with its model's name and a link to its docs."""
    problems: dict[str, list[str]] = {}
    got: dict[str, Any] = {}
    for err in exc.errors():
        path = ""
        for part in err.get("loc", ()):
            if isinstance(part, int):
                path += f"[{part}]"
            elif part not in _UNION_MEMBERS and not any(c in part for c in "[(-"):
                path = f"{path}.{part}" if path else part
        path = path or "arguments"
        kind = err.get("type", "")
        if kind in _EXPECTED:
            problems.setdefault(path, []).append(_EXPECTED[kind])
            got[path] = err.get("input")
        elif kind == "missing":
            problems.setdefault(path, []).append("required")
        else:
            problems.setdefault(path, []).append(str(err.get("msg", "invalid")))
    lines = []
    for path, found in problems.items():
        expected = [p for p in dict.fromkeys(found) if p in _EXPECTED.values()]
        if expected:
            lines.append(f"{path}: expected {' or '.join(expected)}, got {jsonrpc.json_kind(got[path])}")
        lines += [f"{path}: {p}" for p in dict.fromkeys(found) if p not in _EXPECTED.values()]
    return "; ".join(lines)


class _Server(MCPServer):
    """The SDK's server, with the refusals of a tool's arguments naming the argument: a string
    argument (or item of a list argument) holding a NUL, which no store can take, is refused
    before the tool runs (the services named their own fields: ``ids``, ``props``, ``id``),
    and a value of the wrong type gets :func:`_argument_errors`'s text."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        for argument, value in arguments.items():
            items = enumerate(value) if isinstance(value, list) else [(None, value)]
            for index, item in items:
                if isinstance(item, str) and "\x00" in item:
                    where = argument if index is None else f"{argument}[{index}]"
                    raise ToolError(f"Error executing tool {name}: {where}: contains a NUL character")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {_argument_errors(exc.__cause__)}") from exc.__cause__




def build_server(client: AutomemClient, settings: Settings) -> MCPServer:
    """The MCP server with the six tools of mcp-automem and the graph and entity tools, calling
    the services through ``client``."""
    server = _Server("automem", version="0.1.0", instructions=INSTRUCTIONS)

    def caller(ctx: Context | None) -> Caller:
        return _caller(client, settings, ctx)

    async def store_memory(
        ctx: Context,
        content: Annotated[OptStr, Field(description="Single mode: the memory text (XOR with memories).")] = None,
        tags: Annotated[OptList, Field(description="Tags, e.g. ['project-x', 'auth'].")] = None,
        importance: Annotated[OptFloat, Field(description="0..1 (default 0.5).")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="A JSON object.")] = None,
        type: Annotated[OptStr, Field(description="Decision, Pattern, Preference, Style, Habit, Insight "
                                                  "or Context; classified when absent.")] = None,
        confidence: Annotated[OptFloat, Field(description="0..1 (0.9 when type is given).")] = None,
        timestamp: Annotated[OptStr, Field(description="ISO 8601 time of the event (default now).")] = None,
        t_valid: Annotated[OptStr, Field(description="ISO 8601: valid from (default now).")] = None,
        t_invalid: Annotated[OptStr, Field(description="ISO 8601: valid until (default open).")] = None,
        embedding: Annotated[list[Number] | None, Field(description="Optional embedding vector.")] = None,
        supersedes_memory_id: Annotated[OptStr, Field(
            description="Supersede mode: id of the memory this one replaces (atomic).")] = None,
        supersede_relation: Annotated[SupersedeRelation | None, Field(
            description="Supersede mode: edge from old to new (default INVALIDATED_BY).")] = None,
        supersede_reason: Annotated[OptStr, Field(description="Supersede mode: why.")] = None,
        memories: Annotated[list[MemoryItem] | None, Field(
            description="Batch mode (XOR with content): up to 500 memories, all or nothing.")] = None,
    ) -> CallToolResult:
        """Store one memory (``content``), a batch (``memories``, at most 500, all or nothing),
        or replace an outdated memory atomically (``content`` + ``supersedes_memory_id``: the
        old one's window is closed, it becomes SUPERSEDED and an INVALIDATED_BY/EVOLVED_INTO
        edge links old → new)."""
        if memories is not None:
            if content is not None:
                raise ToolError("content, memories: pass one, not both")
            if supersedes_memory_id:
                raise ToolError("supersedes_memory_id: not supported with memories (batch mode)")
            single = {"tags": tags, "importance": importance, "metadata": metadata, "type": type,
                      "confidence": confidence, "timestamp": timestamp, "t_valid": t_valid,
                      "t_invalid": t_invalid, "embedding": embedding, "supersede_relation": supersede_relation,
                      "supersede_reason": supersede_reason}
            given = [name for name, value in single.items() if value is not None]
            if given:  # they were dropped: a batch's tags or type never reached its memories
                raise ToolError(f"{given[0]}: a field of one memory; with memories set it on each item. "
                                "Nothing was stored")
            with _tool_errors():
                for i, item in enumerate(memories):
                    check_content_length(item.content, settings.content_max_length, f"memories[{i}].content")
                response = await usecases.create_memories(caller(ctx), memories)
            stored = [presenters.memory_json(m) for m in response.memories]
            body = {"stored": len(stored), "created": presenters.created_count(response),
                    "memory_ids": [m["memory_id"] for m in stored], "memories": stored,
                    "deduplicated": list(response.deduplicated), "message": f"Stored {len(stored)} memories"}
            return _result(_render(f"Stored {len(stored)} memories.", body, stored, "text"), body)
        if content is None:
            raise ToolError("content: required (or memories for batch mode)")
        fields = {"content": content, "tags": tags, "importance": importance, "metadata": metadata,
                  "type": type, "confidence": confidence, "timestamp": timestamp, "t_valid": t_valid,
                  "t_invalid": t_invalid, "embedding": embedding}
        if not supersedes_memory_id and (supersede_relation or supersede_reason):
            raise ToolError("supersedes_memory_id: required with supersede_relation/supersede_reason")
        with _tool_errors({"ids": "supersedes_memory_id"}, {"supersedes_memory_id": supersedes_memory_id}):
            check_content_length(content, settings.content_max_length)
            request = MemoryRequest(**{k: v for k, v in fields.items() if v is not None})
            if supersedes_memory_id:
                replaced = await usecases.supersede_memory(caller(ctx), supersedes_memory_id, request,
                                                           relation=supersede_relation, reason=supersede_reason or "",
                                                           id_field="supersedes_memory_id")
            else:
                created = await usecases.create_memory(caller(ctx), request)
        if supersedes_memory_id:
            new, old = presenters.memory_json(replaced.replacement), presenters.memory_json(replaced.superseded)
            body = {"memory_id": new["memory_id"], "superseded_memory_id": old["memory_id"],
                    "association_created": True, "relation": presenters.relation_json(replaced.relation),
                    "memory": new, "superseded": old,
                    "message": f"Stored {new['memory_id']}; it supersedes {old['memory_id']}"}
            text = (f"Memory stored: {new['memory_id']} (state {new['state']}, valid {_window(new)})\n"
                    f"Superseded: {old['memory_id']} (state {old['state']}, valid {_window(old)}) "
                    f"--{body['relation']['type']}--> {new['memory_id']}")
            return _result(text, body)
        new = presenters.memory_json(created.memory)
        body = {"memory_id": new["memory_id"], "deduplicated": created.deduplicated, "memory": new,
                "message": "Memory already stored (deduplicated)" if created.deduplicated else "Memory stored"}
        text = (f"{body['message']}: {new['memory_id']} (type {new['type']}, state {new['state']}, "
                f"valid {_window(new)})")
        return _result(text, body)

    async def recall_memory(
        ctx: Context,
        memory_id: Annotated[OptStr, Field(description="ID fetch mode: one memory by id (other params "
                                                       "but as_of/known_at/state_mode ignored).")] = None,
        exhaustive: Annotated[bool, Field(description="Tag listing mode: with tags, a paged listing of every "
                                                      "memory with any of the tags (not ranked).")] = False,
        query: Annotated[OptStr, Field(description="Ranked mode: what to look for (natural language).")] = None,
        queries: Annotated[OptList, Field(description="Several queries; results de-duplicated.")] = None,
        embedding: Annotated[list[Number] | None, Field(description="Query embedding vector.")] = None,
        limit: Annotated[Int32 | None, Field(description="Max results (ranked default 5, listing 20); more "
                                                         "than 100 (ranked) or 200 (listing) is clamped.")] = None,
        offset: Annotated[Int32, Field(description="Results to skip (paging).")] = 0,
        page_token: Annotated[OptStr, Field(description="Tag listing mode: next_page_token of the previous "
                                                        "page (cheaper than offset on large tags).")] = None,
        sort: Annotated[Literal["score", "time_desc", "time_asc", "updated_desc", "updated_asc"],
                        Field(description="Ranking order.")] = "score",
        order_by: Annotated[Literal["score", "time_desc", "time_asc", "updated_desc", "updated_asc"] | None,
                            Field(description="AutoMem's alias of sort (used when sort is score).")] = None,
        time_query: Annotated[OptStr, Field(description="e.g. 'yesterday', 'last 7 days', 'March 2026', "
                                                        "'between 2026-01-01 and 2026-02-01'.")] = None,
        start: Annotated[OptStr, Field(description="ISO 8601 lower bound (a date = from its start).")] = None,
        end: Annotated[OptStr, Field(description="ISO 8601 upper bound (a date = to its end).")] = None,
        tz: Annotated[OptStr, Field(description="IANA time zone of time_query, date bounds and naive times "
                                                "(start, end, as_of, known_at; default UTC).")] = None,
        timezone: Annotated[OptStr, Field(description="Alias of tz.")] = None,
        tags: Annotated[OptList, Field(description="Tag filter (ranked) or the tags to list (exhaustive).")] = None,
        tag_mode: Annotated[Literal["any", "all"], Field(description="any (default) or all.")] = "any",
        tag_match: Annotated[Literal["prefix", "exact"] | None, Field(
            description="prefix (ranked default) or exact (listing default).")] = None,
        exclude_tags: Annotated[OptList, Field(description="Ranked mode: tags to exclude.")] = None,
        state_mode: Annotated[Literal["current", "history"] | None, Field(
            description="current (default): current memories only; history: superseded too.")] = None,
        current_only: Annotated[bool | None, Field(description="Legacy form of state_mode.")] = None,
        as_of: Annotated[OptStr, Field(description="ISO 8601 valid time to read at (naive: in tz).")] = None,
        known_at: Annotated[OptStr, Field(description="ISO 8601 system time to read at (naive: in tz).")] = None,
        expand_relations: bool = False,
        expand_entities: bool = False,
        expand_respect_tags: Annotated[bool, Field(description="Expansions keep to the tag filter too.")] = False,
        relation_limit: Bounded(1, 100) = 5,
        expansion_limit: Bounded(1, 500) = 25,
        expand_min_importance: Unit = 0.0,
        expand_min_strength: Unit = 0.0,
        min_score: Annotated[Number, Field(ge=0)] = 0.0,
        context: Annotated[OptStr, Field(description="Context label that boosts matching memories.")] = None,
        context_tags: OptList = None,
        context_types: OptList = None,
        priority_ids: OptList = None,
        recency_bias: Literal["auto", "on", "off"] = "auto",
        format: Annotated[Format, Field(description="text (default), items (a block per memory), detailed "
                                                    "(more fields), json (the whole result).")] = "text",
    ) -> CallToolResult:
        """Recall memories: by ``memory_id``; by ``tags`` with ``exhaustive: true`` (paged listing,
        newest first); or ranked hybrid search with the /recall parameters (current memories
        only by default; a superseded hit comes back as its replacement). Every memory shows
        its state and validity window."""
        if order_by and sort == "score":
            sort = order_by  # AutoMem reads order_by when sort is absent (automem/api/recall.py)
        if memory_id is not None and not memory_id.strip():  # it fell through to a ranked search
            raise ToolError("memory_id: must not be empty")
        if exhaustive:  # a listing by tag: the ranking's options would be dropped
            ranked_only = {"query": query, "queries": queries, "embedding": embedding, "exclude_tags": exclude_tags,
                           "time_query": time_query, "start": start, "end": end,
                           "min_score": min_score or None, "sort": None if sort == "score" else sort,
                           "expand_relations": expand_relations or None, "expand_entities": expand_entities or None,
                           "expand_respect_tags": expand_respect_tags or None,
                           "relation_limit": None if relation_limit == 5 else relation_limit,
                           "expansion_limit": None if expansion_limit == 25 else expansion_limit,
                           "expand_min_importance": expand_min_importance or None,
                           "expand_min_strength": expand_min_strength or None,
                           "recency_bias": None if recency_bias == "auto" else recency_bias,
                           "context": context, "context_tags": context_tags, "context_types": context_types,
                           "priority_ids": priority_ids}
            if given := [name for name, value in ranked_only.items() if value]:
                raise ToolError(f"{given[0]}: not with exhaustive (a listing by tag, newest first); "
                                "leave exhaustive out for a ranked search")
        elif page_token and not memory_id:
            raise ToolError("page_token: only with exhaustive (a listing by tag); ranked results page by offset")
        with _tool_errors({"id": "memory_id"} if memory_id else {}, {"memory_id": memory_id}):
            # Every naive time of the call is read in tz, the zone of its bounds (as /recall does).
            read = usecases.read_options(as_of, known_at, state_mode, current_only, tz=tz or timezone or "")
            if memory_id:
                got = await usecases.get_memory(caller(ctx), memory_id, read)
            elif exhaustive:
                tags = split_values(tags or [])
                listed = await usecases.list_by_tag(caller(ctx), tags, read=read,
                                                    limit=20 if limit is None else limit, offset=offset,
                                                    tag_mode=tag_mode, tag_match=tag_match or "",
                                                    page_token=page_token or "")
            else:
                # Lists as /recall reads them: repeated or comma-separated (a "a,b" item matched nothing).
                tags, exclude_tags = split_values(tags or []), split_values(exclude_tags or [])
                found = await usecases.search(
                    caller(ctx), read=read, query=query or "", queries=queries or [], embedding=embedding or [],
                    limit=5 if limit is None else limit, offset=offset, sort=sort, time_query=time_query or "",
                    start=start or "", end=end or "", tags=tags, tag_mode=tag_mode, tag_match=tag_match or "",
                    exclude_tags=exclude_tags, expand_relations=expand_relations,
                    expand_entities=expand_entities, relation_limit=relation_limit, expansion_limit=expansion_limit,
                    expand_min_importance=expand_min_importance, expand_min_strength=expand_min_strength,
                    min_score=min_score, context=context or "", context_tags=split_values(context_tags or []),
                    context_types=split_values(context_types or []), priority_ids=split_values(priority_ids or []),
                    recency_bias=recency_bias, tz=tz or timezone or "", expand_respect_tags=expand_respect_tags)
        if memory_id:
            memory = presenters.got_memory_json(got)
            body = {"mode": "id_fetch", "count": 1, "results": [memory], "memory": memory}
            header = f"Memory {memory_id}" + ("" if got.is_current else
                                              f" (not current; current: {got.current_id or 'none'})")
            return _result(_render(header, body, [memory], format), body)
        if exhaustive:
            items = [presenters.memory_json(m) for m in listed.memories]
            paging = presenters.by_tag_json(listed)
            body = {"mode": "enumeration", "count": len(items), "total": paging["total"],
                    "has_more": paging["has_more"], "limit": listed.page_size, "requested_limit": limit or 20,
                    "offset": offset, "tags": tags,
                    "next_page_token": paging["next_page_token"], "results": items}
            more = f", more available: page_token {listed.next_page_token}" if listed.has_more else ""
            total = paging["total"]
            header = (f"{len(items)}{'' if total is None else f' of {total}'} memories with tags "
                      f"{', '.join(tags or [])} (offset {offset}{more})")
            return _result(_render(header, body, items, format), body)
        items = [presenters.scored_flat_json(r) for r in found.results]
        mode = usecases.state_mode_word(read)
        body = {"mode": "ranked", "count": len(items), "results": items, "query": query or "",
                "state_mode": mode, "sort": sort, "limit": found.limit, "requested_limit": limit or 5,
                "offset": offset,
                **presenters.search_paging_json(found),
                **presenters.recall_details_json(
                    found, state_mode=mode, queries=[q for q in [query or "", *(queries or [])] if q.strip()],
                    exclude_tags=exclude_tags or [], min_score=min_score, expand_relations=expand_relations,
                    expand_entities=expand_entities, relation_limit=relation_limit, expansion_limit=expansion_limit,
                    state_debug=False, tags=tags or []),
                "arms": list(found.arms),
                "degraded": list(found.degraded), "time_window": presenters.time_window_json(found),
                "time_window_warning": found.time_window_warning or None}
        header = f"Found {len(items)} memor{'y' if len(items) == 1 else 'ies'}" + (
            f" for {query!r}" if query else "") + f" (state_mode {mode}" + (
            f", more from offset {offset + found.limit}" if found.has_more else "") + ")" + (
            f"; {found.time_window_warning}" if found.time_window_warning else "")
        return _result(_render(header, body, items, format), body)

    async def associate_memories(
        ctx: Context,
        memory1_id: Annotated[OptStr, Field(description="Source memory id.")] = None,
        memory2_id: Annotated[OptStr, Field(description="Target memory id.")] = None,
        type: Annotated[OptStr, Field(description="RELATES_TO (default), LEADS_TO, OCCURRED_BEFORE, "
                                                  "PREFERS_OVER, EXEMPLIFIES, CONTRADICTS, REINFORCES, "
                                                  "INVALIDATED_BY, EVOLVED_INTO, DERIVED_FROM or PART_OF.")] = None,
        strength: Annotated[OptFloat, Field(description="0..1 (default 0.5).")] = None,
        reason: OptStr = None,
        associations: Annotated[list[AssociationItem] | None, Field(
            description="Batch mode: up to 500 associations.")] = None,
    ) -> CallToolResult:
        """Link memories with a typed edge (one, or ``associations[]``)."""
        if associations is not None:
            if memory1_id or memory2_id:
                raise ToolError("associations: do not combine with memory1_id/memory2_id")
            given = [n for n, v in (("type", type), ("strength", strength), ("reason", reason)) if v is not None]
            if given:  # they were dropped: the batch's edges took their own or the defaults
                raise ToolError(f"{given[0]}: a field of one association; with associations set it on each "
                                "item. Nothing was done")
            if not associations:
                raise ToolError("associations: must not be empty")
            with _tool_errors():
                outcome = await usecases.associate_many(
                    caller(ctx), [usecases.Association(a.memory1_id, a.memory2_id, a.type, a.strength, a.reason)
                                  for a in associations],
                    item_field=lambda i, name: f"associations[{i}].{name}")
            succeeded = [presenters.relation_json(r) for _, r in outcome.created]
            failed = [{"index": i, "error": _tool_message(e)} for i, e in outcome.failed]
            if not succeeded:
                raise ToolError("associations: none created; " + "; ".join(
                    f"[{f['index']}] {f['error']}" for f in failed))
            body = {"success": not failed, "created_count": len(succeeded), "failed_count": len(failed),
                    "succeeded": succeeded, "failed": failed,
                    "message": f"Created {len(succeeded)}, failed {len(failed)}"}
            text = body["message"] + "".join(f"\n  failed [{f['index']}]: {f['error']}" for f in failed)
            return _result(text, body)
        if not memory1_id or not memory2_id:
            raise ToolError("memory1_id, memory2_id: both are required (or associations for batch mode)")
        with _tool_errors(ids={"memory1_id": memory1_id, "memory2_id": memory2_id}):
            created = await usecases.associate(caller(ctx), usecases.Association(
                memory1_id, memory2_id, type or "RELATES_TO", 0.5 if strength is None else strength, reason))
        relation = presenters.relation_json(created.relation)
        if created.pending_review:
            body = {"success": True, "pending_review": True, **relation, "message": (
                f"Association pending review: approving memory {memory2_id} supersedes {memory1_id}")}
            return _result(body["message"], body)
        body = {"success": True, "message": "Association created", **relation}
        return _result(f"Association created: {memory1_id} --{relation['type']} ({relation['strength']})--> "
                       f"{memory2_id}", body)

    async def update_memory(
        ctx: Context,
        memory_id: Annotated[str, Field(description="Id of the memory to update.")],
        content: Annotated[OptStr, Field(description="New content (re-embedded).")] = None,
        tags: Annotated[OptList, Field(description="New tags (replace the existing ones).")] = None,
        add_tags: Annotated[OptList, Field(description="Tags to add to the existing ones.")] = None,
        importance: OptFloat = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Merged key by key.")] = None,
        type: OptStr = None,
        confidence: OptFloat = None,
        timestamp: OptStr = None,
        t_valid: Annotated[OptStr, Field(description="ISO 8601: valid from.")] = None,
        t_invalid: Annotated[OptStr, Field(description="ISO 8601: valid until.")] = None,
        etag: Annotated[StrictInt | StrictStr | None, Field(
            description="The version read (a memory's version, or its etag text); refused when stale.")] = None,
    ) -> CallToolResult:
        """Update fields of a memory in place (to replace an outdated fact, prefer store_memory
        with supersedes_memory_id, which keeps the history)."""
        given = {"content": content, "tags": tags, "importance": importance, "metadata": metadata, "type": type,
                 "confidence": confidence, "timestamp": timestamp, "t_valid": t_valid, "t_invalid": t_invalid}
        given = {k: v for k, v in given.items() if v is not None}
        if not given and not add_tags:
            raise ToolError(f"memory_id: nothing to update; pass at least one of {', '.join(_UPDATABLE)}, add_tags")
        # The service names its fields (add_tags as add_tags): only its id is this tool's memory_id.
        with _tool_errors({"id": "memory_id"}, {"memory_id": memory_id}):
            if content is not None:
                check_content_length(content, settings.content_max_length)
            response = await usecases.update_memory(caller(ctx), memory_id, given, add_tags=add_tags or [],
                                                    etag=usecases.body_etag(etag))
        memory = presenters.memory_json(response.memory)
        body = {"memory_id": memory_id, "message": f"Memory {memory_id} updated", "updated": sorted(given),
                "memory": memory}
        return _result(f"Memory {memory_id} updated ({', '.join(sorted(given) + (['tags+'] if add_tags else []))})"
                       f"; state {memory['state']}, valid {_window(memory)}, version {memory['version']}", body)

    async def delete_memory(
        ctx: Context,
        memory_id: Annotated[OptStr, Field(description="Delete one memory (XOR with tags).")] = None,
        tags: Annotated[OptList, Field(description="Bulk mode: every memory with any of these tags. Without "
                                                   "confirm: true, only previews.")] = None,
        confirm: Annotated[bool, Field(description="Bulk mode: actually delete (default: preview).")] = False,
        preview_token: Annotated[OptStr, Field(description="Bulk mode, with confirm: the preview's "
                                                           "preview_token (deletes what the preview showed).")] = None,
        reason: OptStr = None,
    ) -> CallToolResult:
        """Delete a memory by id, or every memory with any of ``tags``. Bulk deletion answers
        with a preview of what would be deleted and its ``preview_token``; ``confirm: true``
        with that token deletes those memories, and is refused when the memories under the
        tags are no longer those (one stored or removed since): preview again."""
        if memory_id and tags:
            raise ToolError("memory_id, tags: pass one, not both")
        if memory_id:
            with _tool_errors({"id": "memory_id", "props": "reason"}, {"memory_id": memory_id}):
                deleted = await usecases.delete_memory(caller(ctx), memory_id, reason=reason or "")
            memory = presenters.memory_json(deleted.memory)
            body = {"memory_id": memory_id, "state": memory["state"], "memory": memory,
                    "message": f"Memory {memory_id} deleted"}
            return _result(f"Memory {memory_id} deleted (state {memory['state']}, valid {_window(memory)})", body)
        if not tags:
            raise ToolError("memory_id or tags: one is required")
        if confirm and not preview_token:
            raise ToolError("preview_token: required with confirm (call without confirm to preview, then "
                            "confirm with the preview's preview_token). Nothing was deleted")
        if preview_token and not confirm:
            raise ToolError("preview_token: only with confirm: true")
        tags = split_values(tags)
        with _tool_errors():
            preview = await usecases.delete_by_tag(caller(ctx), tags, dry_run=True)
        token = _preview_token(tags, preview.memory_ids)
        if not confirm:
            listed = presenters.deleted_by_tag_json(tags, True, preview)
            lines = [f"- {m['id']} [{m['state']}, valid {_window(m)}] {m['content'][:80]}"
                     for m in listed["memories"]]
            body = {**listed, "preview_token": token,
                    "message": f"Preview: {listed['would_delete_count']} memories would be deleted "
                               f"(states {listed['states']}); call again with confirm: true and "
                               f"preview_token: {token}"}
            return _result("\n".join([body["message"], *lines]), body)
        if preview_token != token:  # stored under the tags, removed, or other tags since the preview
            raise ToolError(f"preview_token: not the token of the memories under these tags now ({len(preview.memory_ids)}: "
                            "they changed since the preview, or the token is another preview's); preview again. "
                            "Nothing was deleted")
        if not preview.memory_ids:  # nothing to delete (memory_ids empty would mean "all")
            response = preview.__class__()
        else:
            with _tool_errors({"props": "reason"}):
                response = await usecases.delete_by_tag(caller(ctx), tags, dry_run=False,
                                                        memory_ids=list(preview.memory_ids), reason=reason or "")
        listed = presenters.deleted_by_tag_json(tags, False, response)
        lines = [f"- {m['id']} [{m['state']}, valid {_window(m)}] {m['content'][:80]}" for m in listed["memories"]]
        body = {**listed, "message": f"Deleted {response.deleted_count} memories with tags {', '.join(tags)}"}
        return _result("\n".join([body["message"], *lines]), body)

    async def check_database_health() -> CallToolResult:
        """Status of the service and its stores (healthy | degraded), counts and enrichment queue;
        degraded too while a restore that did not finish left part of a backup in the graph."""
        body: dict[str, Any] = {"status": "healthy", "backend": "automem",
                                "timestamp": datetime.now(UTC).isoformat()}
        found = await usecases.health(client, with_sync=False)  # no credentials: like GET /health
        if found.stats is not None:
            stores = presenters.stores_json(found.stats)
            body.update({k: stores[k] for k in ("falkordb", "qdrant", "memory_count", "vector_count",
                                                "vector_dimensions", "restore_incomplete", "restore_started_at",
                                                "restore_warning") if k in stores})
            if presenters.stores_degraded(found.stats):
                body["status"] = "degraded"
        else:
            body.update({"status": "error", "falkordb": "unknown", "qdrant": "unknown", "error": found.stats_error})
        status = found.enrichment
        body["enrichment"] = None if status is None else {
            "queue_depth": status.queue_depth, "processed": status.processed, "failed": status.failed,
            "dead_lettered": status.dead_lettered}
        if body.get("falkordb") == "connected" and body.get("qdrant") == "connected":
            body["sync_status"] = presenters.count_sync_status(body["memory_count"], body["vector_count"])
        text = (f"status: {body['status']}\nfalkordb: {body.get('falkordb')}\nqdrant: {body.get('qdrant')}\n"
                f"memories: {body.get('memory_count')}, vectors: {body.get('vector_count')}"
                + (f", sync: {body['sync_status']}" if "sync_status" in body else "")
                + (f"\nrestore incomplete: {body['restore_warning']}" if "restore_warning" in body else "")
                + (f"\nerror: {body['error']}" if "error" in body else ""))
        result = _result(text, body)
        result.is_error = body["status"] == "error"
        return result

    # --- graph and entities (REST: automem/gateway/routes_graph.py) -------------------------

    async def graph_snapshot(
        ctx: Context,
        limit: Annotated[Bounded(1, 5000) | None, Field(description="Nodes, 1..5000 (default 500).")] = None,
        min_importance: Annotated[Unit, Field(description="Only memories at least this important (0..1).")] = 0.0,
        types: Annotated[OptList, Field(description="Only these memory types, e.g. ['Decision'].")] = None,
        since: Annotated[OptStr, Field(description="ISO 8601: only memories from this time on.")] = None,
    ) -> CallToolResult:
        """The memory graph of the scope: the most important memories and the edges among them
        (a superseded memory is a node marked superseded, with the id of what replaced it)."""
        started = time.perf_counter()
        with _tool_errors():
            found = await usecases.graph_snapshot(caller(ctx), limit=limit, min_importance=min_importance,
                                                  types=types or [], since=since, read=usecases.read_options())
        body = presenters.snapshot_json(found, started)
        lines = [f"{len(body['nodes'])} of {body['stats']['total_nodes']} memories, {len(body['edges'])} edges"]
        lines += [f"- {n['id']} [{n['type'] or 'Memory'}, {n['style']}] {n['content'][:80]}" for n in body["nodes"]]
        lines += [f"  {e['source']} -{e['type']}-> {e['target']}" for e in body["edges"]]
        return _result("\n".join(lines), body)

    async def graph_neighbors(
        ctx: Context,
        memory_id: Annotated[str, Field(description="The memory at the centre.")],
        depth: Annotated[Bounded(1, 3), Field(description="Hops along relations, 1..3.")] = 1,
        include_semantic: Annotated[bool, Field(description="Also the most similar memories by meaning.")] = True,
        semantic_limit: Annotated[Bounded(1, 20), Field(description="Similar memories, 1..20.")] = 5,
    ) -> CallToolResult:
        """A memory's neighbours along relations (up to 3 hops) and its most similar memories."""
        started = time.perf_counter()
        with _tool_errors({"id": "memory_id"}, {"memory_id": memory_id}):
            found = await usecases.graph_neighbors(caller(ctx), memory_id, depth=depth,
                                                   include_semantic=include_semantic, semantic_limit=semantic_limit,
                                                   read=usecases.read_options())
        body = presenters.neighbors_json(found, started)
        lines = [f"centre {memory_id}: {body['center']['content'][:80]}"]
        lines += [f"- hop {n['depth']} {n['id']} [{n['style']}] {n['content'][:80]}" for n in body["graph_neighbors"]]
        lines += [f"- similar {n['similarity']} {n['id']} {n['content'][:80]}" for n in body["semantic_neighbors"]]
        return _result("\n".join(lines), body)

    async def graph_stats(ctx: Context) -> CallToolResult:
        """Counts of the scope's memory graph: by type, relation, state, importance and day."""
        started = time.perf_counter()
        with _tool_errors():
            body = presenters.graph_stats_json(await usecases.graph_stats(caller(ctx)), started)
        return _result(f"{body['totals']['nodes']} memories, {body['totals']['edges']} edges; by type "
                       f"{body['by_type']}; by relation {body['by_relationship']}", body)

    async def list_entities(
        ctx: Context,
        category: Annotated[OptStr, Field(description="Only this kind: person, org, place, tool, ...")] = None,
        limit: Annotated[Bounded(1, 500) | None, Field(description="1..500 (default 100).")] = None,
        merge_candidates: Annotated[bool, Field(description="List pairs that may be duplicates instead.")] = False,
    ) -> CallToolResult:
        """The entities (people, places, tools...) the scope's memories mention, most mentioned
        first; or (``merge_candidates``) pairs of entities that may name the same thing."""
        with _tool_errors():
            if merge_candidates:
                found = await usecases.merge_candidates(caller(ctx), limit=limit)
                items = [presenters.merge_candidate_json(c) for c in found.candidates]
                text = "\n".join(f"- {c['alias']} -> {c['canonical']} ({c['confidence']:.2f}"
                                 f"{', auto' if c['auto_merge'] else ''})" for c in items)
                return _result(text or "No merge candidates", {"candidates": items, "count": len(items)})
            found = await usecases.entities(caller(ctx), category=category or "", limit=limit)
        items = [presenters.entity_json(e) for e in found.entities]
        text = "\n".join(f"- {e['id']} ({e['name']}): {e['reference_count']} memories" for e in items)
        return _result(text or "No entities", {"entities": items, "count": len(items)})

    async def get_entity(
        ctx: Context,
        slug: Annotated[str, Field(description="Entity slug, alias or '<category>:<slug>'.")],
        category: Annotated[OptStr, Field(description="Kind, when several share the slug.")] = None,
        memory_limit: Annotated[Bounded(1, 500) | None, Field(description="Memories, 1..500 (default 50).")] = None,
    ) -> CallToolResult:
        """One entity and the memories that mention it, newest first."""
        with _tool_errors():
            found = await usecases.entity(caller(ctx), slug, category=category or "", memory_limit=memory_limit,
                                          read=usecases.read_options())
        body = {"entity": presenters.entity_json(found.entity),
                "memories": [presenters.graph_node_json(n) for n in found.memories]}
        lines = [f"{body['entity']['id']} ({body['entity']['name']}), aliases {body['entity']['aliases']}"]
        lines += [f"- {m['id']} [{m['style']}] {m['content'][:80]}" for m in body["memories"]]
        return _result("\n".join(lines), body)

    async def merge_entities(
        ctx: Context,
        slug: Annotated[OptStr, Field(description="The entity to merge away (with merge_into).")] = None,
        merge_into: Annotated[OptStr, Field(description="The entity to keep.")] = None,
        category: OptStr = None,
        reason: OptStr = None,
        undo_merge_id: Annotated[OptStr, Field(description="Undo this earlier merge instead.")] = None,
    ) -> CallToolResult:
        """Merge one entity into another (admin; recorded, undoable), or undo a merge by the id
        it answered with."""
        with _tool_errors():
            if undo_merge_id:
                merge = (await usecases.undo_entity_merge(caller(ctx), undo_merge_id)).merge
            else:
                merge = (await usecases.merge_entities(caller(ctx), slug or "", merge_into=merge_into or "",
                                                       category=category or "", reason=reason or "")).merge
        body = presenters.entity_merge_json(merge)
        verb = "Undid merge" if undo_merge_id else "Merged"
        return _result(f"{verb} {body['alias']} into {body['canonical']} ({body['edges_moved']} memories); "
                       f"merge id {body['id']}", {"merge": body})

    def add(fn: Any, title: str, **hints: bool) -> None:
        server.add_tool(fn, title=title, structured_output=False,
                        annotations=ToolAnnotations(title=title, openWorldHint=False, **hints))

    add(store_memory, "Store Memory", readOnlyHint=False, destructiveHint=False, idempotentHint=False)
    add(recall_memory, "Recall Memory", readOnlyHint=True, destructiveHint=False, idempotentHint=True)
    add(associate_memories, "Associate Memories", readOnlyHint=False, destructiveHint=False, idempotentHint=True)
    add(update_memory, "Update Memory", readOnlyHint=False, destructiveHint=True, idempotentHint=True)
    add(delete_memory, "Delete Memory", readOnlyHint=False, destructiveHint=True, idempotentHint=False)
    add(check_database_health, "Check Database Health", readOnlyHint=True, destructiveHint=False,
        idempotentHint=True)
    add(graph_snapshot, "Graph Snapshot", readOnlyHint=True, destructiveHint=False, idempotentHint=True)
    add(graph_neighbors, "Graph Neighbors", readOnlyHint=True, destructiveHint=False, idempotentHint=True)
    add(graph_stats, "Graph Stats", readOnlyHint=True, destructiveHint=False, idempotentHint=True)
    add(list_entities, "List Entities", readOnlyHint=True, destructiveHint=False, idempotentHint=True)
    add(get_entity, "Get Entity", readOnlyHint=True, destructiveHint=False, idempotentHint=True)
    add(merge_entities, "Merge Entities", readOnlyHint=False, destructiveHint=True, idempotentHint=False)
    _refuse_unknown_arguments(server)
    return server


def _refuse_unknown_arguments(server: MCPServer) -> None:
    """Make every tool refuse an argument it does not take (a tool error naming it), and say
    so in its input schema (``additionalProperties: false``). The SDK's argument models
    ignore unknown keys, so ``delete_memory {"memory_id": X, "dry_run": true}`` deleted X and
    ``store_memory {"scope": "other"}`` stored in the caller's scope: an option is refused,
    never dropped, as on the REST routes (automem/gateway/schemas.py ``StrictBody``). The
    SDK reads ``fn_metadata.arg_model`` on each call (mcp ``FuncMetadata``); its tool
    registry has no public accessor, hence ``_tool_manager``."""
    for tool in server._tool_manager.list_tools():
        base = tool.fn_metadata.arg_model
        tool.fn_metadata.arg_model = type(base.__name__, (base,), {
            "__module__": base.__module__, "model_config": ConfigDict(**base.model_config, extra="forbid")})
        tool.parameters["additionalProperties"] = False


# --- transports -----------------------------------------------------------------------------


def http_endpoint(client: AutomemClient, settings: Settings, path: str = "/mcp") -> tuple[Any, Any]:
    """The tools over streamable HTTP at ``path``: ``(endpoint, session_manager)`` — the
    ASGI endpoint, and the session manager whose ``run()`` must be running while it serves.

    Stateless (no MCP session state in the gateway, so replicas need no stickiness) with
    JSON responses. The gateway mounts it through automem/gateway/mcp_mount.py, which builds
    it on the first request to ``/mcp``.
    """
    server = build_server(client, settings)
    server.streamable_http_app(streamable_http_path=path, stateless_http=True, json_response=True,
                               host=settings.host, max_request_body_size=settings.max_body_bytes)
    return StreamableHTTPASGIApp(server.session_manager), server.session_manager


async def _strict_lines(source: AsyncIterable[bytes],
                        answer: Callable[[dict[str, Any]], Awaitable[None]]) -> AsyncIterator[str]:
    """The lines of ``source`` (stdin's bytes) that are JSON-RPC messages the tools may read, as
    text for the SDK's stdio transport; every other line is answered by ``answer`` (awaited
    with a JSON-RPC error body before the next line is read), never dropped.

    The SDK's transport reads a line with pydantic and, when that fails, answers nothing: a
    string holding a lone surrogate (``"a\\ud800b"``) or malformed JSON left the client waiting
    for its own timeout, and a key given twice was read as its last value. Here a line is read
    as ``/mcp`` reads a body: a batch, a response (this server sends the client no request),
    JSON that is no JSON-RPC message and a request whose ``id`` is no string or integer (the
    SDK read it as a notification and answered nothing) get an invalid-request error saying
    which (automem/gateway/jsonrpc.py :func:`~automem.gateway.jsonrpc.invalid_request`:
    -32600), and so do a ``jsonrpc`` other than ``"2.0"``, a ``method`` that is no string and
    ``params`` that are no object (naming the member, with the id when one can be read); what
    the REST gateway's reader refuses an error naming the argument
    (:func:`~automem.gateway.jsonrpc.refusal`: -32602); a line that is not JSON (or not UTF-8)
    a parse error (-32700, id null); what the SDK's message model still refuses -32600 with
    its id when one can be read. Blank lines are
    skipped. The tools send the client no request (sampling, elicitation, roots, ping): a
    tool that does must let the responses to its requests through here."""
    async for raw in source:
        line = raw.strip()
        if not line:
            continue
        if (refused := jsonrpc.invalid_request(line) or jsonrpc.refusal(line)) is not None:
            await answer(refused)
            continue
        try:
            text = line.decode("utf-8")
            json.loads(text)
        except (ValueError, RecursionError) as exc:
            await answer({"jsonrpc": "2.0", "id": None, "error": {
                "code": PARSE_ERROR, "message": f"Parse error: the line is not JSON text ({exc})"}})
            continue
        try:
            jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValidationError:
            await answer({"jsonrpc": "2.0", "id": jsonrpc.request_id(line), "error": {
                "code": INVALID_REQUEST, "message": "Invalid request: not a JSON-RPC 2.0 request, "
                                                    "notification or response object"}})
            continue
        yield text


async def _serve_stdio(server: MCPServer, stdin: AsyncIterable[bytes]) -> None:
    """Run ``server`` over the SDK's stdio transport (stdout claimed as the SDK claims it),
    reading ``stdin`` through :func:`_strict_lines`, whose answers to refused lines go out
    with the server's own. As ``MCPServer.run_stdio_async``, through the low-level server
    (the SDK has no public way to give its stdio transport another reader)."""
    opened = anyio.Event()
    streams: list[Any] = []

    async def answer(body: dict[str, Any]) -> None:
        await opened.wait()
        await streams[0].send(SessionMessage(jsonrpc_message_adapter.validate_python(body)))

    async with stdio_server(stdin=_strict_lines(stdin, answer)) as (read_stream, write_stream):  # type: ignore[arg-type]
        streams.append(write_stream)
        opened.set()
        await server._lowlevel_server.run(read_stream, write_stream,
                                          server._lowlevel_server.create_initialization_options())


def run_stdio(settings: Settings, grpc_address: str | None = None, api_key: str | None = None,
              scope: str = "") -> int:
    """``automem mcp``: the tools over stdio, against the service at ``grpc_address``
    (default ``AUTOMEM_GRPC_TARGET``, else 127.0.0.1:<AUTOMEM_GRPC_PORT>). The key is
    ``api_key``, else ``AUTOMEM_API_KEY``, else ``AUTOMEM_API_TOKEN``. Every line read is
    answered (:func:`_strict_lines`)."""
    address = grpc_address or settings.grpc_target or f"127.0.0.1:{settings.grpc_port}"
    key = api_key if api_key is not None else (os.environ.get("AUTOMEM_API_KEY") or settings.api_token)

    async def serve() -> None:
        async with AutomemClient(address, api_key=key, scope=scope, credentials=channel_credentials(settings),
                                 channel_options=channel_options(settings)) as client:
            await _serve_stdio(build_server(client, settings), anyio.wrap_file(sys.stdin.buffer))

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0
