"""Entity nodes (``:Entity``) and the MENTIONS edges from memories to them.

Entities are per scope (their ``key`` starts with the scope: automem/enrich/entities.py
``entity_key``), so scopes never meet in the graph.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from automem.common.errors import InvalidArgument
from automem.common.model import OPEN_END, Memory, node_fields, node_to_memory
from automem.graph.repository import Repository
from automem.v1 import memory_pb2


class Entities(Repository):
    """Statements over ``:Entity`` nodes and MENTIONS edges."""

    async def write_many(self, rows: Sequence[tuple[str, str, str, list[memory_pb2.Entity], list[str]]]) -> set[str]:
        """Replace the ``entities``, ``entity_tags`` (through the node builder) and MENTIONS
        edges of many memories in ONE query: ``rows`` are ``(memory_id, scope, content_hash,
        entities, entity keys)`` (one key per entity). Each row is written (all of its entity
        data) only while its node still holds ``content_hash`` in ``scope``; an Entity node is
        created on first mention with the entity's name, kind and scope. Returns the ids
        written."""
        if not rows:
            return set()
        found = await self.store.query(
            "UNWIND $rows AS row MATCH (m:Memory {id: row.id}) WHERE m.content_hash = row.hash AND m.scope = row.scope "
            "SET m += row.props "
            "WITH m, row OPTIONAL MATCH (m)-[old:MENTIONS]->(:Entity) DELETE old "
            "WITH DISTINCT m, row "
            "FOREACH (ent IN row.ents | MERGE (e:Entity {key: ent.key}) "
            "  ON CREATE SET e.name = ent.name, e.kind = ent.kind, e.scope = row.scope "
            "  MERGE (m)-[:MENTIONS]->(e)) "
            "RETURN m.id",
            {"rows": [{"id": memory_id, "hash": content_hash, "scope": scope,
                       "props": node_fields(Memory(entities=entities), ("entities", "entity_tags")),
                       "ents": [{"key": key, "name": e.name, "kind": e.kind}
                                for e, key in zip(entities, keys, strict=True)]}
                      for memory_id, scope, content_hash, entities, keys in rows]},
        )
        return {r[0] for r in found}

    async def co_mentioned(self, ids: Sequence[str], scope: str) -> list[tuple[str, str, int]]:
        """``(seed id, other memory id, shared entities)`` for memories of ``scope`` that
        mention an entity one of ``ids`` mentions, most shared entities first."""
        rows = await self.store.ro_query(
            "UNWIND $ids AS mid MATCH (a:Memory {id: mid})-[:MENTIONS]->(e:Entity)<-[:MENTIONS]-(b:Memory) "
            "WHERE a.scope = $scope AND b.scope = $scope AND e.scope = $scope AND b.id <> a.id "
            "RETURN a.id, b.id, count(e) ORDER BY count(e) DESC", {"ids": list(ids), "scope": scope})
        return [(r[0], r[1], int(r[2])) for r in rows]

    # --- entity API (automem/recall/graph_views.py, automem/ingest/entity_merge.py) ---------

    async def listing(self, scope: str, kind: str | None, limit: int, as_of: float) -> list[EntityRow]:
        """Up to ``limit`` entities of ``scope`` not merged into another (of ``kind``; None =
        any), most referenced first, then key; the reference count is the memories current at
        ``as_of`` (epoch seconds; :data:`_COUNTED`) that mention the entity or one merged into it,
        and an entity no such memory mentions (its memories deleted, superseded or edited
        away) is not listed."""
        rows = await self.store.ro_query(
            "MATCH (e:Entity) WHERE e.scope = $scope AND e.merged_into IS NULL AND ($kind IS NULL OR e.kind = $kind) "
            + _COUNTED + "WHERE n > 0 " + _RETURNED + "ORDER BY n DESC, e.key LIMIT $limit",
            {"scope": scope, "kind": kind, "limit": int(limit), **_counted_params(as_of)})
        return [_entity_row(r) for r in rows]

    async def find(self, scope: str, keys: Sequence[str], alias_slug: str | None, as_of: float) -> list[EntityRow]:
        """The entities of ``scope`` with one of ``keys`` (merged or not), and the unmerged ones
        whose ``aliases`` hold ``alias_slug`` (None: none), most referenced (at ``as_of``, epoch
        seconds: :data:`_COUNTED`) first."""
        rows = await self.store.ro_query(
            "MATCH (e:Entity) WHERE e.scope = $scope AND (e.key IN $keys OR "
            "($alias IS NOT NULL AND e.merged_into IS NULL AND $alias IN coalesce(e.aliases, []))) "
            + _REFERENCES + "ORDER BY n DESC, e.key",
            {"scope": scope, "keys": list(keys), "alias": alias_slug, **_counted_params(as_of)})
        return [_entity_row(r) for r in rows]

    async def by_slug(self, scope: str, slug: str, as_of: float) -> list[EntityRow]:
        """The entities of ``scope`` of any kind whose key ends in ``slug``, most referenced (at
        ``as_of``, epoch seconds: :data:`_COUNTED`) first."""
        rows = await self.store.ro_query(
            "MATCH (e:Entity) WHERE e.scope = $scope AND e.key ENDS WITH $suffix "
            + _REFERENCES + "ORDER BY n DESC, e.key",
            {"scope": scope, "suffix": "|" + slug, **_counted_params(as_of)})
        return [_entity_row(r) for r in rows]

    async def lookup(self, scope: str, ref: str, kind: str, as_of: float) -> EntityRow | None:
        """The entity of ``scope`` that ``ref`` names: ``"<kind>:<slug>"`` (or its tag form
        ``"entity:<kind>:<slug>"``), or a slug (of
        ``kind`` when given, else of any kind, the most referenced), else an unmerged entity
        holding the slug among its ``aliases``. ``ref`` and ``kind`` are compared NFKC and
        lower-case, as enrichment writes slugs (automem/enrich/entities.py ``normalise``: a
        decomposed "zu\u0308rich" names "zürich"). None when nothing matches. The entity may
        itself be merged (``merged_into`` set). References are counted at ``as_of`` (epoch
        seconds: :data:`_COUNTED`)."""
        ref = unicodedata.normalize("NFKC", ref).strip().lower()
        kind = unicodedata.normalize("NFKC", kind).strip().lower()
        ref = ref.removeprefix("entity:")  # the tag form ``entity:<kind>:<slug>`` (GET /entities' ``tag``)
        if ":" in ref:
            kind, ref = ref.split(":", 1)
        if not ref:
            return None
        if kind:
            found = await self.find(scope, [entity_key_of(scope, kind, ref)], ref, as_of)
        else:
            found = await self.by_slug(scope, ref, as_of) or await self.find(scope, [], ref, as_of)
        direct = [e for e in found if e.key.endswith("|" + ref)]
        return (direct or found or [None])[0]

    async def mentioning(self, keys: Sequence[str], scope: str, states: Sequence[str], limit: int) -> list[Memory]:
        """Up to ``limit`` memories of ``scope`` in ``states`` that mention one of the entities
        ``keys`` (an entity's key and its ``merged_keys``), newest first (event time, then id)."""
        rows = await self.store.ro_query(
            "UNWIND $keys AS k MATCH (e:Entity {key: k}) WHERE e.scope = $scope "
            "MATCH (m:Memory)-[:MENTIONS]->(e) WHERE m.scope = $scope AND m.state IN $states "
            "WITH DISTINCT m RETURN properties(m) AS p, m.event_time AS t, m.id AS id "
            "ORDER BY t DESC, id LIMIT $limit",
            {"keys": list(keys), "scope": scope, "states": list(states), "limit": int(limit)})
        return [node_to_memory(r[0]) for r in rows]

    async def mention_sets(self, scope: str, live: Sequence[str]) -> list[tuple[EntityRow, set[str]]]:
        """Every unmerged entity of ``scope`` with the ids of the memories in ``live`` states
        that mention it (what merge candidates compare)."""
        rows = await self.store.ro_query(
            "MATCH (e:Entity) WHERE e.scope = $scope AND e.merged_into IS NULL "
            "OPTIONAL MATCH (m:Memory)-[:MENTIONS]->(e) WHERE m.state IN $live "
            "RETURN e.key, e.name, e.kind, e.aliases, count(m), e.merged_into, e.merged_keys, collect(m.id)",
            {"scope": scope, "live": list(live)})
        return [(_entity_row(r), set(r[7] or [])) for r in rows]

    async def merge(self, record: dict[str, Any]) -> list[str] | None:
        """Merge the entity ``record["alias_key"]`` into ``record["canonical_key"]`` (both of
        ``record["scope"]`` and not merged) in ONE query: every MENTIONS edge to the alias
        moves to the canonical entity, the alias gets ``merged_into``, the canonical entity's
        ``aliases`` and ``merged_keys`` become ``record["aliases"]`` / ``record["merged_keys"]``,
        and an ``(:EntityMerge)`` node holding ``record`` (id, scope, keys, actor, create_time,
        reason, prior_aliases, prior_merged_keys) plus the
        moved memory ids (``memory_ids``) and those that already mentioned the canonical
        entity (``shared``) is created. Returns the moved memory ids; None (nothing written)
        when either entity is missing or already merged."""
        rows = await self.store.query(
            "MATCH (a:Entity {key: $rec.alias_key}), (c:Entity {key: $rec.canonical_key}) "
            "WHERE a.scope = $rec.scope AND c.scope = $rec.scope AND a.merged_into IS NULL "
            "AND c.merged_into IS NULL AND a <> c "
            "OPTIONAL MATCH (m:Memory)-[old:MENTIONS]->(a) "
            "OPTIONAL MATCH (m)-[both:MENTIONS]->(c) "
            "WITH a, c, collect(m) AS ms, collect(old) AS olds, "
            "collect(CASE WHEN both IS NULL THEN NULL ELSE m.id END) AS shared "
            "SET a.merged_into = $rec.canonical_key, c.aliases = $rec.aliases, c.merged_keys = $rec.merged_keys "
            "CREATE (x:EntityMerge) SET x = $rec, x.memory_ids = [n IN ms | n.id], x.shared = shared, "
            "x.undone = false "
            "FOREACH (n IN ms | MERGE (n)-[:MENTIONS]->(c)) "
            "FOREACH (r IN olds | DELETE r) "
            "RETURN x.memory_ids",
            {"rec": record})
        return list(rows[0][0] or []) if rows else None

    async def merged_keys_of(self, key: str, scope: str) -> list[str]:
        """The keys of the entities merged into the entity ``key`` of ``scope`` ([] when none)."""
        rows = await self.store.ro_query("MATCH (e:Entity {key: $key}) WHERE e.scope = $scope RETURN e.merged_keys",
                                         {"key": key, "scope": scope})
        return list(rows[0][0] or []) if rows else []

    async def undo_merge(self, merge_id: str, scope: str, actor: str, when: float, alias_tags: Sequence[str]) -> bool:
        """Undo the EntityMerge ``merge_id`` of ``scope`` in ONE query: the moved memories that
        still name the alias or an entity merged into it (``alias_tags``, the comparison keys of
        their ``entity:<kind>:<slug>`` tags, one among their ``entity_tags``: a memory edited
        since to name the canonical entity keeps it) mention the alias again and lose the canonical edge unless they had it before the
        merge (``shared``); the alias is unmerged; the aliases and merged keys this merge added
        to the canonical entity are taken off it (a later merge into it keeps its own: restoring
        the lists saved at this merge dropped them); the record is marked undone (``undone_by``
        = ``actor``, ``undo_time`` = ``when``). False (nothing written) when the record is
        missing or already undone."""
        rows = await self.store.query(
            "MATCH (x:EntityMerge {id: $id}) WHERE x.scope = $scope AND x.undone = false "
            "MATCH (a:Entity {key: x.alias_key}), (c:Entity {key: x.canonical_key}) "
            "WHERE a.scope = $scope AND c.scope = $scope "
            "SET a.merged_into = NULL, "
            "c.aliases = [s IN coalesce(c.aliases, []) WHERE NOT s IN "
            "[t IN coalesce(x.aliases, []) WHERE NOT t IN coalesce(x.prior_aliases, [])]], "
            "c.merged_keys = [k IN coalesce(c.merged_keys, []) WHERE NOT k IN "
            "[t IN coalesce(x.merged_keys, []) WHERE NOT t IN coalesce(x.prior_merged_keys, [])]], "
            "x.undone = true, x.undone_by = $actor, "
            "x.undo_time = $when "
            "WITH x, a, c "
            "OPTIONAL MATCH (m:Memory)-[r:MENTIONS]->(c) WHERE m.id IN x.memory_ids "
            "AND any(t IN coalesce(m.entity_tags, []) WHERE t IN $alias_tags) "
            "WITH x, a, collect(m) AS ms, collect(CASE WHEN m.id IN x.shared THEN NULL ELSE r END) AS drop "
            "FOREACH (n IN ms | MERGE (n)-[:MENTIONS]->(a)) "
            "FOREACH (r IN drop | DELETE r) "
            "RETURN x.id",
            {"id": merge_id, "scope": scope, "actor": actor, "when": when, "alias_tags": list(alias_tags)})
        return bool(rows)

    async def merges(self, scope: str, limit: int, merge_id: str | None = None) -> list[dict[str, Any]]:
        """The EntityMerge records of ``scope`` (only ``merge_id`` when given), newest first,
        as property maps."""
        rows = await self.store.ro_query(
            "MATCH (x:EntityMerge) WHERE x.scope = $scope AND ($id IS NULL OR x.id = $id) "
            "RETURN properties(x) ORDER BY x.create_time DESC, x.id LIMIT $limit",
            {"scope": scope, "id": merge_id, "limit": int(limit)})
        return [r[0] for r in rows]


#: Cypher after a MATCH of entities ``e``: ``n``, the memories that mention ``e`` or an entity
#: merged into it (found by key through ``merged_keys``: index lookups, no scan) and that the
#: state pass (automem/common/state.py) returns as current at ``$as_of`` — what
#: ``GET /entity/{slug}`` marks ``is_current``: recorded and not retracted by ``$known`` (now);
#: ACTIVE, or SUPERSEDED with a closed window (a supersede closes it where the replacement's
#: begins, so a fact replaced from a later date is in force until then: ``as_current``);
#: valid at ``$as_of``; no MetaPattern (they repeat their members' entities: a cluster run
#: raised every count by one; break-it review). Superseded, archived, pending and not yet
#: valid memories were counted too: /entities listed counts /entity/{slug} showed as not
#: current. Each memory's own properties only, no chain walk: a SUPERSEDED memory with an
#: open window (no supersede writes one) is not counted, as ``Memories._state_as_read`` reads it.
_COUNTED = (
    "UNWIND [e.key] + coalesce(e.merged_keys, []) AS k OPTIONAL MATCH (g:Entity {key: k}) "
    "OPTIONAL MATCH (m:Memory)-[:MENTIONS]->(g) WHERE m.type <> 'MetaPattern' "
    "AND (m.state = 'ACTIVE' OR (m.state = 'SUPERSEDED' AND m.valid_to < $open_end)) "
    "AND coalesce(m.valid_from, m.create_time, 0.0) <= $as_of AND coalesce(m.valid_to, $open_end) > $as_of "
    "AND coalesce(m.record_time, m.create_time, 0.0) <= $known AND coalesce(m.retract_time, $open_end) > $known "
    "WITH e, count(DISTINCT m) AS n ")
_RETURNED = "RETURN e.key, e.name, e.kind, e.aliases, n, e.merged_into, e.merged_keys "
_REFERENCES = _COUNTED + _RETURNED


def _counted_params(as_of: float) -> dict[str, float]:
    """The parameters of :data:`_COUNTED`: valid time ``as_of`` (epoch seconds), system time
    now and the open window end."""
    return {"as_of": float(as_of), "known": time.time(), "open_end": OPEN_END}


@dataclass(frozen=True)
class EntityRow:
    """An Entity node as read: ``key`` (``scope|kind|slug``), name, kind, aliases (slugs of
    entities merged into it), ``references`` (memories mentioning it), ``merged_into`` (key,
    "" when not merged) and ``merged_keys`` (keys of the entities merged into it, directly or
    through another)."""

    key: str
    name: str
    kind: str
    aliases: tuple[str, ...]
    references: int
    merged_into: str
    merged_keys: tuple[str, ...] = ()


#: Every kind (``category``) an Entity node has: what enrichment writes (automem/enrich/entities.py
#: ``KINDS`` and "tool"; tests/unit/test_entities.py checks the two agree).
ENTITY_KINDS = frozenset({"person", "org", "place", "product", "event", "work", "group", "language", "law", "tool"})


def entity_category(raw: str, field: str = "category") -> str:
    """``raw`` as an entity kind (NFKC, trimmed, lower case; "" stays "": any kind).

    Raises:
        InvalidArgument: naming ``field`` when ``raw`` is no kind of :data:`ENTITY_KINDS` (a
            filter by one listed nothing, and a merge answered NOT_FOUND on the slug).
    """
    kind = unicodedata.normalize("NFKC", raw).strip().lower()
    if kind and kind not in ENTITY_KINDS:
        raise InvalidArgument(f"{field}: unknown entity category {raw!r}; one of {', '.join(sorted(ENTITY_KINDS))}",
                              field=field)
    return kind


def entity_key_of(scope: str, kind: str, slug: str) -> str:
    """The key of the Entity node of ``kind`` and ``slug`` in ``scope`` (the form
    automem/enrich/entities.py ``entity_key`` writes)."""
    return f"{scope}|{kind}|{slug}"


def split_entity_key(key: str) -> tuple[str, str, str]:
    """``(scope, kind, slug)`` of an Entity key (kind and slug never hold ``|``)."""
    scope, kind, slug = key.rsplit("|", 2)
    return scope, kind, slug


def _entity_row(row: Sequence[Any]) -> EntityRow:
    return EntityRow(key=row[0], name=row[1] or "", kind=row[2] or "", aliases=tuple(row[3] or ()),
                     references=int(row[4] or 0), merged_into=row[5] or "", merged_keys=tuple(row[6] or ()))
