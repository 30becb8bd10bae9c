"""Whole-graph statements of the backup (automem/common/backup.py): every node and edge,
paged, for the export, and the bulk creates of a restore.

Labels and relation types read from a backup are interpolated into Cypher, so each is
checked to be a plain identifier first (:func:`identifier`). Restored nodes carry a
temporary reference property (:data:`REF`) until their edges are in place.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from automem.graph.repository import Repository

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The node property a restore keys nodes by while it recreates their edges.
REF = "_automem_restore_ref"


def identifier(name: str) -> str:
    """``name`` when it is a safe label or relation type name; ValueError otherwise."""
    if not _IDENT.match(name):
        raise ValueError(f"backup: unsafe label or type name {name!r}")
    return name


def _labels(labels: Sequence[str]) -> str:
    """``:A:B`` for a node pattern (each label checked by :func:`identifier`)."""
    return "".join(f":{identifier(label)}" for label in labels)


class Dump(Repository):
    """Statements over the whole graph."""

    #: The name check (:func:`identifier`), for a restore that checks a whole backup first.
    identifier = staticmethod(identifier)

    async def label_sets(self) -> list[list[str]]:
        """The distinct label lists of the graph's nodes, in Cypher's order of lists (a graph
        never written: none). The export reads the nodes one label list after the other."""
        try:
            rows = await self.store.ro_query("MATCH (n) WITH DISTINCT labels(n) AS l RETURN l ORDER BY l")
        except Exception as exc:  # a graph never written is an "empty key"
            if "empty key" not in str(exc).lower():
                raise
            return []
        return [list(row[0]) for row in rows]

    async def id_span(self, labels: Sequence[str]) -> tuple[int, int]:
        """``(count, highest internal id)`` of the nodes carrying ``labels`` (each a checked
        identifier; ``(0, -1)`` for none)."""
        rows = await self.store.ro_query(f"MATCH (n{_labels(labels)}) RETURN count(n), max(id(n))")
        if not rows or not rows[0][0]:
            return 0, -1
        return int(rows[0][0]), int(rows[0][1])

    async def nodes_window(self, labels: Sequence[str], low: int, high: int) -> list[list[Any]]:
        """Rows ``[internal id, labels, properties]`` of the nodes whose labels are exactly
        ``labels`` and whose internal id is in ``[low, high)``, by id. A range of ids (a
        label-and-id scan), not SKIP/LIMIT: a node created or deleted meanwhile does not shift
        what later windows read, so a paged export neither repeats nor skips a node."""
        return await self.store.ro_query(
            f"MATCH (n{_labels(labels)}) WHERE id(n) >= $low AND id(n) < $high AND labels(n) = $labels "
            "RETURN id(n), labels(n), properties(n) ORDER BY id(n)",
            {"low": low, "high": high, "labels": list(labels)})

    async def edges_page(self, labels: Sequence[str], low: int, high: int, after: tuple[int, int] | None = None,
                         limit: int = 500) -> list[list[Any]]:
        """Up to ``limit`` rows ``[source id, target id, type, properties, edge id, target
        labels]`` of the edges leaving the nodes :meth:`nodes_window` reads for the same
        ``labels``/``low``/``high``, ordered by (source id, edge id) and, given ``after`` (the
        last row's ``(source id, edge id)``), after it: keyset pages, so a hub's edges or a
        dense window never come in one answer and a page never repeats a row. Every edge has
        one source, so reading the edges by their source's window reads each once. Each page
        scans the window's sources only (a label-and-id scan from the key's source on);
        FalkorDB has no seek by edge id (``id(r)`` filters scan every edge of the graph)."""
        source, edge = after if after is not None else (low, -1)
        return await self.store.ro_query(
            f"MATCH (a{_labels(labels)})-[r]->(b) WHERE id(a) >= $from AND id(a) < $high AND labels(a) = $labels "
            "AND (id(a) > $source OR id(r) > $edge) "
            "RETURN id(a), id(b), type(r), properties(r), id(r), labels(b) ORDER BY id(a), id(r) LIMIT $limit",
            {"from": max(low, source), "high": high, "labels": list(labels), "source": source, "edge": edge,
             "limit": limit})

    async def count_nodes(self) -> int:
        """Number of nodes. FalkorDB raises an "empty key" error for a graph never written."""
        rows = await self.store.ro_query("MATCH (n) RETURN count(n)")
        return int(rows[0][0]) if rows and rows[0][0] else 0

    async def count_nodes_safe(self) -> int:
        """:meth:`count_nodes`, 0 for a graph never written."""
        try:
            return await self.count_nodes()
        except Exception as exc:  # a graph never written is an "empty key"
            if "empty key" not in str(exc).lower():
                raise
            return 0

    async def count_edges(self) -> int:
        """Number of edges (0 for a graph never written)."""
        try:
            rows = await self.store.ro_query("MATCH ()-[r]->() RETURN count(r)")
        except Exception as exc:  # a graph never written is an "empty key"
            if "empty key" not in str(exc).lower():
                raise
            return 0
        return int(rows[0][0]) if rows and rows[0][0] else 0

    async def count_nodes_except(self, labels: Iterable[str]) -> int:
        """Number of nodes carrying none of ``labels`` (each a checked identifier)."""
        where = " AND ".join(f"NOT n:{identifier(label)}" for label in labels) or "true"
        rows = await self.store.ro_query(f"MATCH (n) WHERE {where} RETURN count(n)")
        return int(rows[0][0]) if rows and rows[0][0] else 0

    async def delete_except(self, labels: Iterable[str]) -> None:
        """Delete every node (with its edges) carrying none of ``labels``: a restore into a
        running service replaces the memories but keeps its API keys."""
        where = " AND ".join(f"NOT n:{identifier(label)}" for label in labels) or "true"
        await self.store.query(f"MATCH (n) WHERE {where} DETACH DELETE n")

    async def keys_of(self, label: str, key: str) -> set[Any]:
        """The values of property ``key`` of the nodes labelled ``label``."""
        rows = await self.store.ro_query(f"MATCH (n:{identifier(label)}) RETURN n.{identifier(key)}")
        return {row[0] for row in rows if row[0] is not None}

    async def mark_restore(self, started: float) -> None:
        """Record that a restore is under way (one ``(:RestoreInProgress {started})`` node,
        epoch seconds): a restore that dies half-way (the process killed) leaves it, and
        :meth:`restore_started` tells the next start and the next restore."""
        await self.store.query("MERGE (r:RestoreInProgress) SET r.started = $started", {"started": started})

    async def unmark_restore(self) -> None:
        """The restore finished: remove its :meth:`mark_restore` node."""
        await self.store.query("MATCH (r:RestoreInProgress) DELETE r")

    async def restore_started(self) -> float | None:
        """When an unfinished restore started (epoch seconds), or None."""
        try:
            rows = await self.store.ro_query("MATCH (r:RestoreInProgress) RETURN max(r.started)")
        except Exception as exc:  # a graph never written is an "empty key"
            if "empty key" not in str(exc).lower():
                raise
            return None
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    async def drop(self) -> None:
        """Delete the whole graph (a graph never written counts as deleted)."""
        try:
            await self.store.graph.delete()
        except Exception as exc:  # a graph never written is an "empty key"
            if "empty key" not in str(exc).lower() and "invalid graph operation" not in str(exc).lower():
                raise

    async def index_refs(self, label: str) -> None:
        """Index :data:`REF` on ``label`` (no error when it exists)."""
        with contextlib.suppress(Exception):  # index already there
            await self.store.query(f"CREATE INDEX FOR (n:{identifier(label)}) ON (n.{REF})")

    async def unindex_refs(self, label: str) -> None:
        """Drop the :data:`REF` index of ``label`` (no error when it is gone)."""
        with contextlib.suppress(Exception):  # index already gone
            await self.store.query(f"DROP INDEX ON :{identifier(label)}({REF})")

    async def create_nodes(self, labels: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
        """Create one node with ``labels`` per row ``{"ref": int, "props": {...}}``: the
        properties exactly, plus :data:`REF` = ``ref``."""
        label_text = "".join(f":{identifier(label)}" for label in labels)
        await self.store.query(f"UNWIND $rows AS row CREATE (n{label_text}) SET n = row.props, n.{REF} = row.ref",
                               {"rows": list(rows)})

    async def create_edges(self, rel_type: str, source_label: str, target_label: str,
                           rows: Sequence[dict[str, Any]]) -> None:
        """Create one ``rel_type`` edge per row ``{"s": ref, "t": ref, "props": {...}}``
        between the restored nodes with those :data:`REF` values (labels ``""`` = any)."""
        a = f":{identifier(source_label)}" if source_label else ""
        b = f":{identifier(target_label)}" if target_label else ""
        await self.store.query(
            f"UNWIND $rows AS row MATCH (a{a} {{{REF}: row.s}}), (b{b} {{{REF}: row.t}}) "
            f"CREATE (a)-[r:{identifier(rel_type)}]->(b) SET r = row.props", {"rows": list(rows)})

    async def clear_refs(self) -> None:
        """Remove :data:`REF` from every node."""
        await self.store.query(f"MATCH (n) WHERE n.{REF} IS NOT NULL SET n.{REF} = NULL")
