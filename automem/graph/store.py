"""The graph store's connection: FalkorDB, the record of truth.

Every value goes in as a Cypher parameter (:meth:`GraphStore._check_params` refuses what
FalkorDB cannot take); the Cypher statements live in the repositories of this package, one
per node kind, reached as attributes of the store (``graph.memories.hydrate(ids, scope)``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import redis.exceptions
from falkordb import query_result as sync_result
from falkordb.asyncio import FalkorDB
from falkordb.asyncio.query_result import QueryResult
from falkordb.exceptions import SchemaVersionMismatchException

from automem.common.errors import InvalidArgument, Unavailable
from automem.common.settings import Settings
from automem.common.telemetry import graph_span
from automem.common.timeouts import effective_bound, job_bound, store_call
from automem.graph.dump import Dump
from automem.graph.entities import Entities
from automem.graph.idempotency import IdempotencyKeys
from automem.graph.keys import ApiKeys
from automem.graph.memories import Memories
from automem.graph.outbox import OutboxBatches
from automem.graph.purges import Purges
from automem.graph.relations import Relations
from automem.graph.review import Review
from automem.graph.runs import ConsolidationRuns
from automem.graph.tombstones import Tombstones
from automem.graph.versions import Versions

log = logging.getLogger(__name__)

#: Queries per Redis pipeline in :meth:`GraphStore.ro_query_many`.
_PIPELINE_CHUNK = 256
#: Statements that cannot take the write guard (schema changes).
_SCHEMA_STATEMENT = re.compile(r"\s*(CREATE\s+INDEX|DROP\s+INDEX|CALL\s+db\.)", re.IGNORECASE)
#: Errors of a FalkorDB that cannot be reached (redis-py's own ConnectionError and
#: TimeoutError are not the builtin ones).
_UNREACHABLE = (ConnectionError, OSError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class _NeedsSchema(Exception):
    """A reply holds a node, edge or path: its labels and property names need the graph's schema."""


class _NoSchema:
    """The ``graph`` handed to falkordb's synchronous reply parser: scalars, lists and maps
    never touch it; a node, edge or path asks for ``schema`` and gets :class:`_NeedsSchema`."""

    @property
    def schema(self) -> Any:
        raise _NeedsSchema


_NO_SCHEMA = _NoSchema()


class GraphStore:
    """Async access to the memory graph in FalkorDB: the connection (queries, pipelines,
    schema) and one repository per node kind, which hold the Cypher statements:
    ``memories`` (:class:`automem.graph.memories.Memories`), ``relations``, ``entities``,
    ``review``, ``tombstones``, ``keys`` (API keys), ``idempotency``, ``runs`` (consolidation runs),
    ``dump`` (whole-graph export and restore), ``purges`` (admin purges and their records) and
    ``outbox`` (events written with their change, automem/graph/outbox.py).

    Args:
        settings: uses ``falkordb_host``, ``falkordb_port``, ``falkordb_password``, ``graph_name``.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        #: Seconds one call may take (automem/common/timeouts.py; 0 = unbounded).
        self.timeout = settings.store_timeout_seconds
        self._db = FalkorDB(
            host=settings.falkordb_host or "127.0.0.1",
            port=settings.falkordb_port or 6379,
            password=settings.falkordb_password or None,
        )
        self.graph = self._db.select_graph(settings.graph_name)
        self.name = settings.graph_name
        self.memories = Memories(self)
        self.relations = Relations(self)
        self.entities = Entities(self)
        self.review = Review(self)
        self.tombstones = Tombstones(self)
        self.keys = ApiKeys(self)
        self.idempotency = IdempotencyKeys(self)
        self.runs = ConsolidationRuns(self)
        self.dump = Dump(self)
        self.versions = Versions(self)
        self.purges = Purges(self)
        self.outbox = OutboxBatches(self)

    @classmethod
    async def open(cls, settings: Settings) -> GraphStore:
        """A store, once FalkorDB answered ``INFO server`` within ``store_timeout_seconds``.

        Constructing the falkordb client asks the server whether it is a cluster with a
        *synchronous* call and no timeout: on a server that accepts connections but does not
        answer (stopped, or hung inside a module) that call blocks the event loop for good,
        signals included. The bounded probe first turns that into an error.

        Raises:
            StoreTimeout: no answer in time (an Unavailable).
            Unavailable: FalkorDB cannot be reached.
        """
        import redis.asyncio as aioredis

        client = aioredis.Redis(host=settings.falkordb_host or "127.0.0.1", port=settings.falkordb_port or 6379,
                                password=settings.falkordb_password or None)
        try:
            async with store_call("FalkorDB", settings.store_timeout_seconds):
                await client.info("server")
        except _UNREACHABLE as exc:
            raise Unavailable(f"FalkorDB at {settings.falkordb_host or '127.0.0.1'}:{settings.falkordb_port or 6379} "
                              f"cannot be reached: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()
        return cls(settings)

    @property
    def redis(self) -> Any:
        """The underlying redis.asyncio connection (for the outbox list). Call it inside
        :meth:`bounded`."""
        return self._db.connection

    @contextlib.asynccontextmanager
    async def bounded(self) -> AsyncIterator[None]:
        """Bound the body's FalkorDB calls to ``store_timeout_seconds``
        (automem/common/timeouts.py): StoreTimeout (503) when FalkorDB does not answer in
        time, Unavailable when it cannot be reached."""
        try:
            async with store_call("FalkorDB", self.timeout):
                yield
        except _UNREACHABLE as exc:
            raise Unavailable(f"graph store unreachable: {exc}") from exc

    def _guard(self, cypher: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The write guard: a write FalkorDB only gets to run after its caller gave up (the
        server was stopped with the command in its socket buffer, and resumed after the
        bound) must change nothing, since the caller answered 503. So every write statement
        starts with ``WITH timestamp() ... WHERE <now> <= $deadline``: past the deadline
        (the bound from now, in FalkorDB's clock, milliseconds) it matches no row and writes
        nothing. Schema statements are left alone. Assumes the FalkorDB host's clock agrees
        with this one's to well within the bound."""
        bound = effective_bound(self.timeout)
        if bound is None or _SCHEMA_STATEMENT.match(cypher):
            return cypher, params
        guarded = dict(params)
        guarded["automem_deadline_ms"] = int((time.time() + bound) * 1000)
        return ("WITH timestamp() AS automem_now WHERE automem_now <= $automem_deadline_ms " + cypher), guarded

    @staticmethod
    def _check_params(value: Any, name: str | None = None) -> None:
        """InvalidArgument for a string FalkorDB cannot take as a parameter: a NUL character
        (its parser stops there) or a lone surrogate (not UTF-8). The error names the
        statement's parameter holding it (``name``; for the parameters dict, each key), which
        the repositories name after the request field where there is one (``reason``,
        ``tags``): it named nothing before. The services check the fields they know first
        (automem/recall/filters.py ``check_text``), so this is the last line."""
        if isinstance(value, str):
            label = f"{name}: a text value" if name else "a text value"
            if "\x00" in value:
                raise InvalidArgument(f"{label} contains a NUL character", field=name)
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidArgument(f"{label} is not valid Unicode (lone surrogate)", field=name) from None
        elif isinstance(value, dict):
            for k, v in value.items():
                key = k if name is None and isinstance(k, str) else name
                GraphStore._check_params(k, name)
                GraphStore._check_params(v, key)
        elif isinstance(value, (list, tuple)):
            for v in value:
                GraphStore._check_params(v, name)

    @graph_span("GRAPH.QUERY")
    async def query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Run a (write) Cypher query with parameters; returns the result rows. Bounded and
        guarded: see :meth:`bounded` and :meth:`_guard`.

        Raises Unavailable (StoreTimeout) when FalkorDB cannot be reached or does not answer
        within the bound.
        """
        self._check_params(params)
        cypher, guarded = self._guard(cypher, params or {})
        async with self.bounded():
            reply = await self._execute("GRAPH.QUERY", cypher, guarded)
            return await self._rows(reply)

    @graph_span("GRAPH.RO_QUERY")
    async def ro_query(self, cypher: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Read-only query (GRAPH.RO_QUERY), bounded like :meth:`query`."""
        self._check_params(params)
        async with self.bounded():
            reply = await self._execute("GRAPH.RO_QUERY", cypher, params or {})
            return await self._rows(reply)

    async def _execute(self, command: str, cypher: str, params: dict[str, Any]) -> Any:
        """The raw compact reply of ``command`` (GRAPH.QUERY / GRAPH.RO_QUERY) for ``cypher``
        with ``params``, sent as falkordb's ``AsyncGraph.query`` sends it (its parameter header,
        ``--compact``)."""
        return await self.graph.execute_command(command, self.name, self.graph._build_params_header(params) + cypher,
                                                "--compact")

    async def _rows(self, reply: Any) -> list[list[Any]]:
        """The rows of a compact reply. Replies of scalars, lists and maps (what the
        repositories return: properties, not nodes) go through falkordb's synchronous parser,
        the same values its asyncio parser builds without a coroutine per cell (that parser
        cost ~7 % of a recall's samples, issue 10); a reply holding a node, edge or path is
        parsed by the asyncio parser, which reads the labels from the graph's schema (and
        refreshes the schema on a version mismatch, as ``AsyncGraph.query`` does). Raises
        redis' ``ResponseError`` for a failed query."""
        try:
            try:
                return sync_result.QueryResult(_NO_SCHEMA, reply).result_set
            except _NeedsSchema:
                result = QueryResult(self.graph)
                await result.parse(reply)
                return result.result_set
        except SchemaVersionMismatchException as exc:
            await self.graph.schema.refresh(exc.version)
            raise

    @graph_span("GRAPH.RO_QUERY")
    async def ro_query_many(self, queries: Sequence[tuple[str, dict[str, Any]]]) -> list[list[list[Any]]]:
        """Several read-only queries in one round trip (a Redis pipeline of GRAPH.RO_QUERY);
        returns each query's rows, in order. Each query is planned with its own parameters,
        so FalkorDB can combine every indexed condition in one index scan (it does not when the
        values come from an ``UNWIND`` row). Raises Unavailable when FalkorDB cannot be
        reached or does not answer within the bound (each chunk) and redis' ``ResponseError`` when a query fails."""
        out: list[list[list[Any]]] = []
        for start in range(0, len(queries), _PIPELINE_CHUNK):
            chunk = queries[start:start + _PIPELINE_CHUNK]
            pipe = self.redis.pipeline(transaction=False)
            for cypher, params in chunk:
                self._check_params(params)
                # The client's own parameter header (the form graph.ro_query sends).
                pipe.execute_command("GRAPH.RO_QUERY", self.name,
                                     self.graph._build_params_header(params) + cypher, "--compact")
            async with self.bounded():
                replies = await pipe.execute()
                for reply in replies:
                    out.append(await self._rows(reply))
        return out

    async def ping(self) -> bool:
        """True when FalkorDB answers PING."""
        try:
            async with self.bounded():
                return bool(await self._db.connection.ping())
        except Exception:  # noqa: BLE001 - health probe
            return False

    async def ensure_schema(self) -> None:
        """Create the indexes (idempotent): range on Memory(id, scope, content_hash,
        event_time, embedding_status, tags_lower, entity_tags), full-text on Memory(content),
        range on Tombstone, IdempotencyKey, Entity(key, scope), MemoryVersion(memory_id, scope,
        recorded_at: the memories edited since a past ``known_at``, automem/recall/servicer.py
        ``_lexical``, and since a by-tag listing's first page, automem/recall/bytag.py) and
        ReviewItem(id, memory_id, scope) — without the last, each supersede proposal's MERGE
        scanned every ReviewItem (6.2 ms at 40k items under ``bench/soak.py``, 0.014 ms indexed;
        docs/benchmarks.md). The two tag indexes are on array properties
        (FalkorDB indexes each element; ``$tag IN m.tags_lower`` uses it) and drive the by-tag
        listing (automem/recall/bytag.py)."""
        statements = [
            "CREATE INDEX FOR (m:Memory) ON (m.id)",
            "CREATE INDEX FOR (m:Memory) ON (m.scope)",
            "CREATE INDEX FOR (m:Memory) ON (m.content_hash)",
            "CREATE INDEX FOR (m:Memory) ON (m.event_time)",
            "CREATE INDEX FOR (m:Memory) ON (m.embedding_status)",
            "CREATE INDEX FOR (m:Memory) ON (m.tags_lower)",
            "CREATE INDEX FOR (m:Memory) ON (m.entity_tags)",
            "CREATE INDEX FOR (t:Tombstone) ON (t.content_hash)",
            "CREATE INDEX FOR (k:IdempotencyKey) ON (k.key)",
            "CREATE INDEX FOR (e:Entity) ON (e.key)",
            "CREATE INDEX FOR (e:Entity) ON (e.scope)",
            "CREATE INDEX FOR (v:MemoryVersion) ON (v.memory_id)",
            "CREATE INDEX FOR (v:MemoryVersion) ON (v.scope)",
            "CREATE INDEX FOR (v:MemoryVersion) ON (v.recorded_at)",
            "CREATE INDEX FOR (i:ReviewItem) ON (i.id)",
            "CREATE INDEX FOR (i:ReviewItem) ON (i.memory_id)",
            "CREATE INDEX FOR (i:ReviewItem) ON (i.scope)",
            "CALL db.idx.fulltext.createNodeIndex('Memory', 'content')",
        ]
        for statement in statements:
            try:
                # Building an index over an existing large graph takes longer than a request.
                with job_bound(self._settings.store_job_timeout_seconds):
                    async with self.bounded():
                        await self.graph.query(statement)
            except Unavailable:
                raise
            except Exception as exc:
                if "already" not in str(exc).lower():
                    raise

    async def close(self) -> None:
        """Close the connection pool."""
        await self._db.aclose()
