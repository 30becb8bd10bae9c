"""Memory versions (``:MemoryVersion``): every Cypher statement that reads or writes them.

One node per version of a memory, ``(:MemoryVersion {memory_id, scope, version,
recorded_at, actor, changed_fields, ...})``, keyed by (``memory_id``, ``version``) with an
index on ``memory_id`` (and ``scope``, for the past listings; ``recorded_at``, for what changed
since a time). Besides those keys it holds a
full snapshot of the memory node's properties as they stood after the write
(:func:`automem.common.model.memory_to_node`, ``id`` renamed ``memory_id``), so a snapshot
is read back with :func:`automem.common.model.node_to_memory` and filtered with the same
Cypher as a memory node (:func:`automem.graph.memories.filter_where` over ``v``).

``version`` is the memory's own ``version`` (its ETag): every write that moves it records a
version, in the SAME query as the write (:func:`before` / :func:`record` are spliced into
the statements of automem/graph/memories.py, relations.py, review.py and idempotency.py), so
a change and its version land together or not at all. Writes that do not move the version
(enrichment's derived fields, the LLM type) update the snapshot of the memory's current
version (:func:`amend`); access bookkeeping (``last_access_time``, ``relevance_score``) is not
versioned. (Enrichment writes only while the node still holds the content it enriched,
automem/graph/memories.py ``set_enrichment_many``, so the amended version holds that
content.) ``recorded_at`` is the system time of the write (the snapshot's ``update_time``,
else ``record_time``): the version believed from then on, until the next one
(docs/architecture.md, "Versions"). Only a purge removes versions (``Memories.purge``).

Memories written before versions existed get one version from their current node at start
(:meth:`Versions.migrate`, recorded under ``:SchemaMigration {name: 'memory_versions'}``),
recorded at their ``record_time``: what the service believed about them before then is not
known any more precisely.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from automem.common.auth import bound_principal
from automem.common.model import Memory, node_to_memory
from automem.graph.repository import Repository

LABEL = "MemoryVersion"
#: Properties a version holds besides the snapshot.
KEYS = ("memory_id", "version", "recorded_at", "actor", "changed_fields")
#: Snapshot properties not listed in ``changed_fields``: the keys (``id``, ``scope``), what
#: every write moves, what is derived (``tags_lower`` and ``content_hash`` follow ``tags``
#: and ``content``) and where background processing stands (``embedding_status``: an edit
#: resets it, enrichment settles it without a version, so which side of a write it fell on
#: depends on timing, not on what the caller changed).
UNTRACKED = ("id", "scope", "version", "update_time", "tags_lower", "content_hash", "last_access_time",
             "relevance_score", "embedding_status")
#: The migration marker (:meth:`Versions.migrate`).
MIGRATION = "memory_versions"
MIGRATION_VERSION = 1
#: Actor of writes made outside a request (enrichment, consolidation, migrations).
SYSTEM_ACTOR = "system"


#: The actor a background task writes as (:func:`acting_as`); None = the request's principal.
_acting: ContextVar[str | None] = ContextVar("automem_version_actor", default=None)


@contextlib.contextmanager
def acting_as(name: str) -> Iterator[None]:
    """Within this block (this task's context) versions name ``name`` as their actor: a
    background task's own name, the one its events carry (``system:consolidate``), not the
    principal of the request that started the task, nor plain :data:`SYSTEM_ACTOR`."""
    token = _acting.set(name)
    try:
        yield
    finally:
        _acting.reset(token)


def actor() -> str:
    """The actor of a version written now: the name :func:`acting_as` binds, else the name of
    the principal of the current request (automem/common/auth.py binds it per gRPC call),
    else :data:`SYSTEM_ACTOR` outside a request."""
    acting = _acting.get()
    if acting is not None:
        return acting
    principal = bound_principal()
    return principal.name if principal is not None else SYSTEM_ACTOR


def before(var: str, carry: Sequence[str] = ()) -> str:
    """Cypher to put before a write's ``SET`` on node ``var``: keeps its properties as
    ``_b_<var>`` for :func:`record`. ``carry``: other variables the query still needs."""
    keep = ", ".join([var, *carry])
    return f"WITH {keep}, properties({var}) AS _b_{var} "


def record(var: str, carry: Sequence[str] = (), *, created: bool = False) -> str:
    """Cypher to put after a write's ``SET`` on node ``var``: creates the version of the node
    as it now stands (parameter ``$v_actor`` names the actor: :func:`params`). With
    ``created`` the node is new (no :func:`before`): every field counts as changed. Ends with
    a ``WITH`` of ``var`` and ``carry``."""
    keep = ", ".join([var, *carry])
    if created:  # every field changed: not stored, :func:`changed_at_creation` derives it
        changed = ""
        head = f"WITH {keep}, properties({var}) AS _a_{var} "
    else:
        changed = (f", _v_{var}.changed_fields = [k IN keys(_a_{var}) WHERE NOT k IN $v_untracked AND "
                   f"(_b_{var}[k] IS NULL OR _b_{var}[k] <> _a_{var}[k]) AND _a_{var}[k] IS NOT NULL]")
        head = f"WITH {keep}, _b_{var}, properties({var}) AS _a_{var} "
    return (head + f"CREATE (_v_{var}:{LABEL}) SET _v_{var} = _a_{var}, _v_{var}.memory_id = _a_{var}.id, "
            f"_v_{var}.id = null, _v_{var}.actor = $v_actor, "
            f"_v_{var}.recorded_at = coalesce(_a_{var}.update_time, _a_{var}.record_time, _a_{var}.create_time)"
            f"{changed} WITH {keep} ")


def record_row(row: str) -> str:
    """A Cypher update clause (usable inside ``FOREACH``) creating the first version of a
    memory created from the node-property map ``row``: every field changed (not stored:
    :func:`changed_at_creation`)."""
    return (f"CREATE (_v_{row}:{LABEL}) SET _v_{row} = {row}, _v_{row}.memory_id = {row}.id, _v_{row}.id = null, "
            f"_v_{row}.actor = $v_actor, "
            f"_v_{row}.recorded_at = coalesce({row}.update_time, {row}.record_time, {row}.create_time) ")


def amend(var: str, fields: str, carry: Sequence[str] = ()) -> str:
    """Cypher to put after a write that sets ``fields`` (a Cypher map expression) on node
    ``var`` without moving its version: the same fields onto the snapshot of its current
    version. Ends with a ``WITH`` of ``var`` and ``carry``."""
    keep = ", ".join([var, *carry])
    return (f"WITH {keep} OPTIONAL MATCH (_v_{var}:{LABEL} {{memory_id: {var}.id}}) "
            f"WHERE _v_{var}.version = {var}.version "
            f"FOREACH (_x IN CASE WHEN _v_{var} IS NULL THEN [] ELSE [1] END | SET _v_{var} += {fields}) "
            f"WITH {keep} ")


def params(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parameters :func:`record` needs (``v_actor``, ``v_untracked``), plus ``extra``."""
    return {"v_actor": actor(), "v_untracked": list(UNTRACKED), **(extra or {})}


def snapshot_memory(props: dict[str, Any]) -> Memory:
    """The Memory of a version's properties (its snapshot, ``memory_id`` as ``id``)."""
    snapshot = {k: v for k, v in props.items() if k not in KEYS}
    snapshot["id"] = props.get("memory_id")
    snapshot["version"] = props.get("version")
    return node_to_memory(snapshot)


@dataclass
class VersionRow:
    """One version: ``version`` (the memory's version number), ``recorded_at`` (epoch
    seconds), ``actor`` (principal name or ``system``), ``changed_fields`` (node property
    names, automem/common/model.py), ``memory`` (the snapshot)."""

    version: int
    recorded_at: float
    actor: str
    changed_fields: list[str] = field(default_factory=list)
    memory: Memory = field(default_factory=Memory)


def changed_at_creation(props: dict[str, Any]) -> list[str]:
    """``changed_fields`` of a version stored without one: the version that created its
    memory (:func:`record` with ``created``, :func:`record_row`, :meth:`Versions.migrate_page`),
    where every tracked field the snapshot holds changed, in name order (a restored node's
    properties come back in another order). Not stored since 2026-12-03: the list of ~22
    names took 57 of the 136 MB of versions in FalkorDB at 100,000 memories
    (docs/benchmarks.md, "Half-precision vectors and creation versions without their field
    list")."""
    return sorted(k for k, v in props.items() if k not in UNTRACKED and k not in KEYS and v is not None)


def _row(props: dict[str, Any]) -> VersionRow:
    changed = props.get("changed_fields")
    return VersionRow(version=int(props.get("version") or 0), recorded_at=float(props.get("recorded_at") or 0.0),
                      actor=props.get("actor") or "",
                      changed_fields=list(changed) if changed is not None else changed_at_creation(props),
                      memory=snapshot_memory(props))


class Versions(Repository):
    """Statements over ``:MemoryVersion`` nodes."""

    async def at(self, ids: Iterable[str], scope: str | None, known_at: float) -> dict[str, Memory]:
        """For each id, the snapshot of its newest version recorded by ``known_at`` (epoch
        seconds) in ``scope`` (any when None): the memory as the service believed it then.
        Ids without such a version (not yet recorded then, or purged) are absent. One round
        trip on the ``memory_id`` index."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = await self.store.ro_query(
            f"UNWIND $ids AS mid MATCH (v:{LABEL} {{memory_id: mid}}) "
            "WHERE ($scope IS NULL OR v.scope = $scope) AND v.recorded_at <= $t "
            "WITH mid, v ORDER BY v.version DESC WITH mid, collect(v)[0] AS w RETURN properties(w)",
            {"ids": ids, "scope": scope, "t": float(known_at)})
        return {r[0]["memory_id"]: snapshot_memory(r[0]) for r in rows}

    async def nodes_at(self, ids: Iterable[str], known_at: float) -> dict[str, dict[str, Any]]:
        """For each id, the memory node's properties (``{"id", "version", ...}``, as stored on
        ``:Memory``) of its newest version recorded by ``known_at`` (epoch seconds), any scope:
        the node as the service believed it then (the past export, automem/common/backup.py).
        Ids without such a version are absent. One round trip on the ``memory_id`` index."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        rows = await self.store.ro_query(
            f"UNWIND $ids AS mid MATCH (v:{LABEL} {{memory_id: mid}}) WHERE v.recorded_at <= $t "
            "WITH mid, v ORDER BY v.version DESC WITH mid, collect(v)[0] AS w RETURN properties(w)",
            {"ids": ids, "t": float(known_at)})
        out: dict[str, dict[str, Any]] = {}
        for (props,) in rows:
            node = {k: v for k, v in props.items() if k not in KEYS}
            node["id"] = props["memory_id"]
            node["version"] = props.get("version")
            out[props["memory_id"]] = node
        return out

    async def get(self, memory_id: str, scope: str, version: int) -> VersionRow | None:
        """Version ``version`` of the memory in ``scope``, or None."""
        rows = await self.store.ro_query(
            f"MATCH (v:{LABEL} {{memory_id: $id}}) WHERE v.scope = $scope AND v.version = $version "
            "RETURN properties(v) LIMIT 1", {"id": memory_id, "scope": scope, "version": int(version)})
        return _row(rows[0][0]) if rows else None

    async def page(self, memory_id: str, scope: str, after: int, limit: int) -> list[VersionRow]:
        """Up to ``limit`` versions of the memory in ``scope`` with a version number greater
        than ``after``, oldest first."""
        rows = await self.store.ro_query(
            f"MATCH (v:{LABEL} {{memory_id: $id}}) WHERE v.scope = $scope AND v.version > $after "
            "RETURN properties(v) ORDER BY v.version LIMIT $limit",
            {"id": memory_id, "scope": scope, "after": int(after), "limit": int(limit)})
        return [_row(r[0]) for r in rows]

    async def count(self, memory_id: str | None = None) -> int:
        """Number of versions (of one memory, or of all)."""
        if memory_id is None:
            rows = await self.store.ro_query(f"MATCH (v:{LABEL}) RETURN count(v)")
        else:
            rows = await self.store.ro_query(f"MATCH (v:{LABEL} {{memory_id: $id}}) RETURN count(v)",
                                             {"id": memory_id})
        return int(rows[0][0]) if rows else 0

    async def changed_since(self, scope: str, known_at: float, cap: int) -> list[str] | None:
        """Ids of the memories of ``scope`` with a version recorded after ``known_at`` (epoch
        seconds): written, created, deleted or moved to another state since then (enrichment's
        fields move no version and are not counted). None when more than ``cap`` memories
        changed. Reads the versions recorded since ``known_at`` on the ``recorded_at`` index
        (automem/graph/store.py ``ensure_schema``), at most ``cap`` + 1 memories: its cost
        follows the writes since then, not the scope's size. The later by-tag pages use it
        (automem/recall/bytag.py)."""
        rows = await self.store.ro_query(
            f"MATCH (v:{LABEL}) WHERE v.recorded_at > $t WITH v WHERE v.scope = $scope "
            "RETURN DISTINCT v.memory_id LIMIT $cap",
            {"t": float(known_at), "scope": scope, "cap": int(cap) + 1})
        return [r[0] for r in rows] if len(rows) <= cap else None

    async def rows_at(self, ids: Iterable[str], scope: str, known_at: float) -> list[list[Any]]:
        """For each id with a version recorded by ``known_at`` in ``scope``, the listing fields
        of that newest version: ``[memory_id, event_time, importance, state, tags_lower,
        entity_tags]`` (event_time in epoch seconds, else create_time, else 0; the by-tag
        listing's index row, automem/graph/memories.py ``TagIndex``), where ``entity_tags``
        are the live memory node's (empty when it is gone): enrichment writes them without a
        version (automem/graph/entities.py ``write_many``), so a snapshot does not hold them.
        One round trip on the ``memory_id`` and ``id`` indexes, without the snapshots' content."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        return await self.store.ro_query(
            f"UNWIND $ids AS mid MATCH (v:{LABEL} {{memory_id: mid}}) "
            "WHERE v.scope = $scope AND v.recorded_at <= $t "
            "WITH mid, v ORDER BY v.version DESC WITH mid, collect(v)[0] AS w "
            "OPTIONAL MATCH (m:Memory {id: mid}) WHERE m.scope = $scope "
            "RETURN mid, coalesce(w.event_time, w.create_time, 0.0), w.importance, w.state, w.tags_lower, "
            "m.entity_tags", {"ids": ids, "scope": scope, "t": float(known_at)})

    async def contents_before_edits(self, scope: str, known_at: float, cap: int) -> dict[str, str]:
        """For up to ``cap`` memories of ``scope`` whose content was edited after ``known_at``
        (epoch seconds; a version recorded since then lists ``content`` in its
        ``changed_fields``), the latest edited first: memory id -> the content of its newest
        version recorded by ``known_at`` (the text believed then). Memories without a version
        by then (created later) are absent. One round trip: the versions recorded since
        ``known_at`` on the ``recorded_at`` index (as :meth:`changed_since`: its cost follows
        the writes since then, not the scope's size), then the ``memory_id`` index. A past
        ranked recall scores these texts (automem/recall/servicer.py ``_lexical``)."""
        rows = await self.store.ro_query(
            f"MATCH (v:{LABEL}) WHERE v.recorded_at > $t WITH v WHERE v.scope = $scope "
            "AND 'content' IN v.changed_fields "
            "WITH v.memory_id AS mid, max(v.recorded_at) AS last ORDER BY last DESC, mid LIMIT $cap "
            f"MATCH (w:{LABEL} {{memory_id: mid}}) WHERE w.scope = $scope AND w.recorded_at <= $t "
            "WITH mid, last, w ORDER BY w.version DESC WITH mid, last, collect(w.content)[0] AS content "
            "RETURN mid, content ORDER BY last DESC, mid",
            {"t": float(known_at), "scope": scope, "cap": int(cap)})
        return {mid: content or "" for mid, content in rows}

    async def list_ids_at(self, where: str, where_params: dict[str, Any], states: Sequence[str], known_at: float,
                          limit: int, *, order: str = "event_time", descending: bool = True) -> list[str]:
        """Ids of up to ``limit`` memories whose version believed at ``known_at`` matches
        ``where`` (a fragment over ``v`` from :func:`automem.graph.memories.filter_where`,
        which binds ``$f_scope``) and is in ``states``, ordered as
        :meth:`automem.graph.memories.Memories.list_ids`. Reads every version of the scope
        recorded by ``known_at`` (the ``scope`` index): the past listing, used only when a
        read names an earlier ``known_at``."""
        if order not in ("event_time", "update_time"):
            raise ValueError(f"list order must be event_time or update_time, got {order!r}")
        # The filter is evaluated on each version in the first MATCH, and a memory is kept when
        # its version believed at ``known_at`` is among those that pass: after a WITH this
        # FalkorDB evaluates a list predicate over a parameter list (``any(t IN $f_tags
        # WHERE t IN v.tags_lower)``, filter_where's tag filter) as false, so a past listing
        # filtered by tags found nothing (tests/integration/test_versions.py).
        rows = await self.store.ro_query(
            f"MATCH (v:{LABEL}) WHERE v.scope = $f_scope AND v.recorded_at <= $t "
            "WITH v.memory_id AS mid, max(v.version) AS ver, "
            f"collect(CASE WHEN {where} AND v.state IN $states THEN v.version END) AS hits "
            "WHERE ver IN hits "
            f"MATCH (b:{LABEL} {{memory_id: mid}}) WHERE b.version = ver "
            f"RETURN b.memory_id ORDER BY b.{order} {'DESC' if descending else 'ASC'}, b.importance DESC, "
            "b.memory_id LIMIT $limit",
            {**where_params, "t": float(known_at), "states": list(states), "limit": int(limit)})
        return [r[0] for r in rows]

    async def migrate_page(self, after: str, limit: int) -> tuple[int, str | None]:
        """Record a version of each memory with id greater than ``after`` (up to ``limit``, in
        id order) that has none: its current node, recorded at its ``record_time``, actor
        ``system``, every field changed. Returns (versions written, last id read or None at
        the end)."""
        rows = await self.store.query(
            "MATCH (m:Memory) WHERE m.id > $after WITH m ORDER BY m.id LIMIT $limit "
            f"OPTIONAL MATCH (v:{LABEL} {{memory_id: m.id}}) WITH m, count(v) AS n "
            "WITH m, n, properties(m) AS a "
            f"FOREACH (_x IN CASE WHEN n = 0 THEN [1] ELSE [] END | CREATE (w:{LABEL}) SET w = a, "
            "w.memory_id = a.id, w.id = null, w.actor = $actor, "
            "w.recorded_at = coalesce(a.record_time, a.create_time)) "
            "RETURN m.id, n",
            {"after": after, "limit": int(limit), "actor": SYSTEM_ACTOR})
        if not rows:
            return 0, None
        return sum(1 for r in rows if int(r[1]) == 0), max(r[0] for r in rows)

    async def migrate(self, batch: int = 1000) -> int:
        """Give every memory without a version its first one (:meth:`migrate_page`), once per
        store: recorded as :data:`MIGRATION` at :data:`MIGRATION_VERSION` in
        ``:SchemaMigration`` (as automem/enrich/textkeys.py). Returns the versions written."""
        rows = await self.store.ro_query("MATCH (s:SchemaMigration {name: $name}) RETURN s.version",
                                         {"name": MIGRATION})
        if rows and int(rows[0][0] or 0) >= MIGRATION_VERSION:
            return 0
        written, after = 0, ""
        while True:
            n, last = await self.migrate_page(after, batch)
            written += n
            if last is None:
                break
            after = last
        await self.store.query("MERGE (s:SchemaMigration {name: $name}) SET s.version = $version",
                               {"name": MIGRATION, "version": MIGRATION_VERSION})
        return written
