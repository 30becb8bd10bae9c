"""The graph and entity reads of RecallService (AutoMem's ``/graph/*`` routes,
verygoodplugins/automem ``automem/api/graph.py``, and its entity routes,
``automem/api/entity.py``), scoped to the caller and through the one state pass.

Every memory these reads return passed :func:`automem.common.state.resolve` with
``dedupe=False``: a withheld memory (deleted, rejected, archived or pending unless asked
for, outside its window) is left out, and a superseded one stays in the view as itself with
``is_current`` false and the head of its chain in ``current_id`` — a graph view shows the
history that links memories, marked, where recall would replace it.

Entities are the ``:Entity`` nodes enrichment writes per scope (automem/enrich/entities.py);
the Cypher is in automem/graph/entities.py. Merge candidates follow AutoMem's rule
(``automem/consolidation/entity_dedup.py``): pairs of one kind whose slugs are similar
(substring: at least 0.6, else normalised Levenshtein similarity) by at least 0.5, with
confidence ``0.4 x slug similarity + 0.6 x memory overlap`` (overlap: shared memories over
the smaller set) capped at 1; a substring pair with overlap above 0.6 is ``auto_merge``,
another pair is listed when its confidence is at least 0.5.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

from rapidfuzz.distance import Levenshtein

from automem.common.auth import require_role, resolve_scope
from automem.common.errors import InvalidArgument, NotFound
from automem.common.model import Memory, first_epoch, parse_type, type_name
from automem.common.state import ReadAt, as_known, hydrate_at, resolve
from automem.graph import GraphStore
from automem.graph.entities import EntityRow, entity_category, split_entity_key
from automem.recall.filters import Filters, listed_states, read_at, request_time
from automem.v1 import memory_pb2, recall_service_pb2

#: Node bound of a snapshot (AutoMem's default 500; it allows up to 50,000 in one answer,
#: this service 5,000 — a larger graph is read with filters).
SNAPSHOT_DEFAULT, SNAPSHOT_MAX = 500, 5000
#: A LIMIT that reads every row (FalkorDB answered nothing to LIMIT 2**62).
EVERY = 10**9
#: Hops of a neighbour walk (AutoMem: 1..3) and the neighbours one answer holds (AutoMem: 100).
MAX_DEPTH, MAX_NEIGHBOURS = 3, 100
#: Semantic neighbours (AutoMem: default 5, at most 20).
SEMANTIC_DEFAULT, SEMANTIC_MAX = 5, 20
#: Entity listings (AutoMem: default 100, at most 500) and an entity's memories.
ENTITY_DEFAULT, ENTITY_MAX, ENTITY_MEMORIES_DEFAULT = 100, 500, 50
#: Days of ``recent_activity`` in the stats (AutoMem: 7).
ACTIVITY_DAYS = 7
#: States whose memories count as references of an entity (not deleted, not rejected).
LIVE_STATES = ("ACTIVE", "SUPERSEDED", "ARCHIVED", "PENDING_REVIEW")
#: Merge-candidate thresholds (AutoMem's automem/consolidation/entity_dedup.py).
MIN_SLUG_SIMILARITY, AUTO_MERGE_OVERLAP, MIN_CONFIDENCE = 0.5, 0.6, 0.5


def _bounded(value: int | None, default: int, top: int, name: str, low: int = 1) -> int:
    """``value`` (None = ``default``) when within ``low..top``; InvalidArgument naming ``name``."""
    if value is None:
        return default
    if value < low or value > top:
        raise InvalidArgument(f"{name}: must be between {low} and {top}", field=name)
    return value


def entity_message(row: EntityRow) -> recall_service_pb2.GraphEntity:
    """The GraphEntity of an Entity row: id ``"<kind>:<slug>"``, aliases, references."""
    _scope, kind, slug = split_entity_key(row.key)
    merged = ""
    if row.merged_into:
        _s, mkind, mslug = split_entity_key(row.merged_into)
        merged = f"{mkind}:{mslug}"
    return recall_service_pb2.GraphEntity(
        id=f"{kind}:{slug}", slug=slug, name=row.name, category=kind, aliases=list(row.aliases),
        reference_count=row.references, merged_into=merged)


def slug_similarity(a: str, b: str) -> float:
    """AutoMem's slug similarity (0..1): 1 when equal; a substring scores
    max(0.6, shorter/longer); else normalised Levenshtein similarity (rapidfuzz)."""
    if a == b:
        return 1.0
    if a in b or b in a:
        return max(0.6, min(len(a), len(b)) / max(len(a), len(b)))
    return float(Levenshtein.normalized_similarity(a, b))


def merge_candidates(entities: list[tuple[EntityRow, set[str]]]) -> list[recall_service_pb2.EntityMergeCandidate]:
    """The candidate pairs among ``entities`` (rows with the ids of the memories mentioning
    them) by the rule in the module docstring, most confident first (then ids). Cost: one
    comparison per pair of entities of one kind."""
    by_kind: dict[str, list[tuple[EntityRow, set[str], str]]] = {}
    for row, ids in entities:
        by_kind.setdefault(row.kind, []).append((row, ids, split_entity_key(row.key)[2]))
    out = []
    for group in by_kind.values():
        group.sort(key=lambda g: g[0].key)
        for i, (ra, ma, sa) in enumerate(group):
            for rb, mb, sb in group[i + 1:]:
                similarity = slug_similarity(sa, sb)
                if similarity < MIN_SLUG_SIMILARITY:
                    continue
                small, large = (ma, mb) if len(ma) <= len(mb) else (mb, ma)
                overlap = len(small & large) / len(small) if small and large else 0.0
                substring = sa in sb or sb in sa
                confidence = min(1.0, similarity * 0.4 + overlap * 0.6)
                auto = substring and overlap > AUTO_MERGE_OVERLAP
                if not auto and confidence < MIN_CONFIDENCE:
                    continue
                ea, eb = entity_message(ra), entity_message(rb)
                canonical, alias = (ea, eb) if len(sa) >= len(sb) else (eb, ea)
                out.append(recall_service_pb2.EntityMergeCandidate(
                    entity_a=ea, entity_b=eb, canonical=canonical.id, alias=alias.id, confidence=confidence,
                    reason=f"slug_similarity={similarity:.2f}, overlap={overlap:.2f}, substring={substring}",
                    auto_merge=auto))
    out.sort(key=lambda c: (-c.confidence, c.entity_a.id, c.entity_b.id))
    return out


class GraphViews:
    """The graph and entity RPCs of RecallService (mixed into
    :class:`automem.recall.servicer.RecallServicer`, which provides ``graph``, ``vectors``,
    ``embedder``)."""

    graph: GraphStore

    async def _nodes(self, memories: list[Memory], scope: str, read: ReadAt) -> list[recall_service_pb2.GraphNode]:
        """``memories`` through the state pass, same order: withheld ones left out, a superseded
        one kept as itself (as known at ``known_at``), not current, with its head's id."""
        out = []
        for memory, res in zip(memories, await resolve(self.graph, memories, scope, read, dedupe=False), strict=True):
            if res is None:
                continue
            if res.replaces_id:
                out.append(recall_service_pb2.GraphNode(memory=as_known(memory, read), is_current=False,
                                                        current_id=res.memory.id))
            else:
                out.append(recall_service_pb2.GraphNode(memory=res.memory, is_current=res.is_current))
        return out

    async def GetGraphSnapshot(self, request, context):
        """The scope's graph: up to ``limit`` (1..5000, default 500) memories with importance
        >= ``min_importance`` (0..1), of ``types``, since ``since``, most important first,
        through the state pass, and the edges among them; totals over the scope's readable
        memories. At a past ``known_at`` the nodes, the edges and the totals are as believed
        then: versions recorded by then, edges created by then (automem/graph/relations.py
        ``KNOWN_THEN``). INVALID_ARGUMENT naming limit, min_importance, types, or since / as_of /
        known_at outside the years 1–9999."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        limit = _bounded(request.limit if request.HasField("limit") else None, SNAPSHOT_DEFAULT, SNAPSHOT_MAX,
                         "limit")
        if not 0.0 <= request.min_importance <= 1.0:
            raise InvalidArgument("min_importance: must be between 0 and 1", field="min_importance")
        types = [type_name(parse_type(t, field="types")) for raw in request.types for t in raw.split(",") if t.strip()]
        states = listed_states(read)
        memories = await self.graph.memories.graph_nodes(
            scope, states, min_importance=request.min_importance, types=types or None,
            since=request_time(request, "since"), limit=limit + 1)
        sampled = len(memories) > limit  # one more than the limit: the limit cut the answer
        memories = memories[:limit]
        if read.past:  # each node as the version believed at known_at (automem/graph/versions.py)
            # With the memories deleted since (they are DELETED now, not then: the snapshot left
            # them out while every other read at known_at showed them; break-it review).
            gone = await self.graph.memories.deleted_since(scope, read.known_at, limit + 1)
            ids = list(dict.fromkeys([*(m.id for m in memories), *gone]))
            believed = await hydrate_at(self.graph, ids, scope, read)
            since = request_time(request, "since")
            pool = [believed[i] for i in ids if i in believed and believed[i].importance >= request.min_importance
                    and (not types or type_name(believed[i].type) in types)
                    and (since is None or first_epoch(believed[i], "event_time", default=0.0) >= since)]
            pool.sort(key=lambda m: (-m.importance, -first_epoch(m, "event_time", default=0.0), m.id))
            sampled, memories = sampled or len(pool) > limit, pool[:limit]
        nodes = await self._nodes(memories, scope, read)
        shown = [n.memory.id for n in nodes]
        known_at = read.known_at if read.past else None
        edges = await self.graph.relations.among(shown, scope, known_at)
        # The totals count what the nodes may show, so no MetaPattern (``types`` cannot name it)
        # nor its edges: they made total_nodes 6 against 5 returned, unsampled, in a clustered
        # scope (break-it review).
        if read.past:  # the totals as believed then: the versions' states, the edges known then
            every = set(await self.graph.versions.list_ids_at("v.type <> 'MetaPattern'", {"f_scope": scope}, states,
                                                              read.known_at, EVERY))
            total_nodes = len(every)
            total_edges = sum(a in every and b in every for a, b in await self.graph.relations.ends(scope, known_at))
        else:
            total_nodes = await self.graph.memories.count(scope, states, patterns=False)
            total_edges = sum(n for _t, n in await self.graph.relations.counts(scope, states, patterns=False))
        return recall_service_pb2.GetGraphSnapshotResponse(
            nodes=nodes, edges=[recall_service_pb2.GraphEdge(source_id=s, type=t, target_id=o, strength=w)
                                for s, t, o, w in edges],
            total_nodes=total_nodes, total_edges=total_edges, sampled=sampled)

    async def ListGraphNeighbors(self, request, context):
        """The memory ``id`` and its neighbours along edges of any type up to ``depth`` hops
        (1..3, default 1; at most 100, nearest first, then strongest edge, type, id), the
        edges walked, and (``include_semantic``, default true) up to ``semantic_limit`` (1..20,
        default 5) most similar memories by embedding that are not graph neighbours; all
        through the state pass. NOT_FOUND when the memory is absent, deleted or rejected in
        the scope; INVALID_ARGUMENT naming depth or semantic_limit. The walk never passes
        through a withheld memory (deleted, rejected...): what lies beyond it is not reached."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        depth = _bounded(request.depth or None, 1, MAX_DEPTH, "depth")
        semantic_limit = _bounded(request.semantic_limit or None, SEMANTIC_DEFAULT, SEMANTIC_MAX, "semantic_limit")
        include_semantic = request.include_semantic if request.HasField("include_semantic") else True
        start = (await hydrate_at(self.graph, [request.id], scope, read)).get(request.id)
        shown_start = await self._nodes([start], scope, read) if start is not None else []
        center = shown_start[0] if shown_start else None
        if center is None and start is not None and start.state not in (
                memory_pb2.MEMORY_STATE_DELETED, memory_pb2.MEMORY_STATE_REJECTED):
            center = recall_service_pb2.GraphNode(memory=as_known(start, read), is_current=False)
        if center is None:
            raise NotFound(f"memory {request.id} not found", field="id")
        seen = {start.id}
        frontier = [start.id]
        neighbours: list[recall_service_pb2.GraphNode] = []
        edges: dict[tuple[str, str, str], float] = {}
        for level in range(1, depth + 1):
            if not frontier or len(neighbours) >= MAX_NEIGHBOURS:
                break
            new: list[str] = []
            for _seed, other, source, rel, target, strength in sorted(
                    await self.graph.relations.touching(frontier, scope, read.known_at if read.past else None),
                    key=lambda e: (-e[5], e[3], e[1])):
                if other not in seen and len(neighbours) + len(new) < MAX_NEIGHBOURS:
                    seen.add(other)
                    new.append(other)
                edges.setdefault((source, rel, target), strength)
            hydrated = await hydrate_at(self.graph, new, scope, read)
            reached = await self._nodes([hydrated[i] for i in new if i in hydrated], scope, read)
            for node in reached:
                node.depth = level
            neighbours.extend(reached)
            # The walk goes on from what is shown only: never through a withheld memory.
            frontier = [n.memory.id for n in reached]
        shown = {start.id, *(n.memory.id for n in neighbours)}
        semantic = await self._semantic(start, shown, scope, read, semantic_limit, listed_states(read)) \
            if include_semantic else []
        return recall_service_pb2.ListGraphNeighborsResponse(
            center=center, graph_neighbors=neighbours, semantic_neighbors=semantic, depth=depth,
            edges=[recall_service_pb2.GraphEdge(source_id=s, type=t, target_id=o, strength=w)
                   for (s, t, o), w in edges.items() if s in shown and o in shown])

    async def _semantic(self, start: Memory, shown: set[str], scope: str, read: ReadAt, limit: int,
                        states: list[str]) -> list[recall_service_pb2.GraphNode]:
        """Up to ``limit`` memories of the scope nearest to ``start``'s content by embedding,
        not in ``shown``, through the state pass (empty without a vector store or embedder)."""
        if self.vectors is None or self.embedder is None or not start.content.strip():
            return []
        [vector] = (await asyncio.to_thread(self.embedder.embed, [start.content])).tolist()
        flt = Filters.build(scope, [], "any", "exact", [], None, None).vector_filter(states)
        hits = [(i, s) for i, s in await self.vectors.search(vector, limit + len(shown), flt) if i not in shown]
        score = dict(hits)
        found = await hydrate_at(self.graph, [i for i, _ in hits], scope, read)
        nodes = await self._nodes([found[i] for i, _ in hits if i in found], scope, read)
        for node in nodes:
            node.similarity = round(score[node.memory.id], 4)
        return nodes[:limit]

    async def GetGraphStats(self, request, context):
        """Counts of the scope's readable memories (ACTIVE, SUPERSEDED, ARCHIVED,
        PENDING_REVIEW) by type, state and importance band, edges among them by type, and
        memories created per UTC day over the last 7 days (AutoMem's GET /graph/stats)."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        since = (int(time.time() // 86400) - (ACTIVITY_DAYS - 1)) * 86400.0
        counts = await self.graph.memories.graph_counts(scope, LIVE_STATES, since)
        by_relationship = dict(await self.graph.relations.counts(scope, LIVE_STATES))
        high, medium, low = counts.importance
        return recall_service_pb2.GetGraphStatsResponse(
            total_nodes=sum(n for _s, n in counts.states), total_edges=sum(by_relationship.values()),
            by_type={t: n for t, n in counts.types if t}, by_state=dict(counts.states),
            by_relationship=by_relationship, importance_high=high, importance_medium=medium, importance_low=low,
            recent_activity=[recall_service_pb2.DayCount(
                date=datetime.fromtimestamp(day * 86400, UTC).date().isoformat(), count=n) for day, n in counts.days])

    async def ListEntities(self, request, context):
        """The scope's entities not merged into another (of ``category`` when given), most
        referenced first; ``limit`` 1..500, default 100 (AutoMem). INVALID_ARGUMENT naming limit,
        or category when it is no kind (automem/graph/entities.py ``entity_category``)."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        limit = _bounded(request.limit if request.HasField("limit") else None, ENTITY_DEFAULT, ENTITY_MAX, "limit")
        rows = await self.graph.entities.listing(scope, entity_category(request.category) or None, limit, time.time())
        return recall_service_pb2.ListEntitiesResponse(entities=[entity_message(r) for r in rows])

    async def GetEntity(self, request, context):
        """The entity ``slug`` names (a slug, ``<category>:<slug>`` or an alias; a merged
        entity answers as the one it was merged into) and up to ``memory_limit`` (1..500,
        default 50) memories that mention it, newest first, through the state pass.
        NOT_FOUND naming slug; INVALID_ARGUMENT naming memory_limit, category when it is no
        kind (automem/graph/entities.py ``entity_category``), or read.known_at earlier than now."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        if read.past:
            # Mentions have no history (MENTIONS edges are rewritten with each enrichment): an
            # answer "at known_at" was the mentions of now (break-it review).
            raise InvalidArgument("read.known_at: an entity and its mentions are read as they are now; "
                                  "read a memory at known_at instead", field="read.known_at")
        limit = _bounded(request.memory_limit if request.HasField("memory_limit") else None,
                         ENTITY_MEMORIES_DEFAULT, ENTITY_MAX, "memory_limit")
        row = await self.graph.entities.lookup(scope, request.slug, entity_category(request.category), read.as_of)
        if row is not None and row.merged_into:
            canonical = await self.graph.entities.find(scope, [row.merged_into], None, read.as_of)
            row = canonical[0] if canonical else None
        if row is None:
            raise NotFound(f"slug: no entity {request.slug!r} in this scope", field="slug")
        memories = await self.graph.entities.mentioning([row.key, *row.merged_keys], scope, listed_states(read), limit)
        return recall_service_pb2.GetEntityResponse(entity=entity_message(row),
                                                    memories=await self._nodes(memories, scope, read))

    async def ListEntityMergeCandidates(self, request, context):
        """Pairs of the scope's entities that may name the same thing, by AutoMem's rule (module
        docstring), most confident first; ``limit`` 1..500, default 100. INVALID_ARGUMENT naming limit."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        limit = _bounded(request.limit if request.HasField("limit") else None, ENTITY_DEFAULT, ENTITY_MAX, "limit")
        rows = await self.graph.entities.mention_sets(scope, LIVE_STATES)
        candidates = await asyncio.to_thread(merge_candidates, rows)
        return recall_service_pb2.ListEntityMergeCandidatesResponse(candidates=candidates[:limit])
