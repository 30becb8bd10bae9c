"""RecallService: hybrid search and every read mode, all through the one state pass.

Arms (each respects the same :class:`Filters`):

* vector — cosine over the embedded content (Qdrant), pre-filtered by scope/tags/time;
* keyword — FalkorDB full-text index over content (BM25-like scorer of RediSearch);
* tags/time — a graph listing when no query text is given (or to fill up);
* relation — neighbours of the top hits along typed edges (``expand_relations``) and the
  time-adjacent memories of the same scope (PRECEDED_BY), which lend part of their score.

Candidates are de-duplicated and hydrated from the graph by id; the vector payload is only a
pre-filter. Scores: :mod:`automem.recall.scoring`.

A memory whose content was edited keeps its old vector point until enrichment embeds the new
text (its ``embedding_status`` is PENDING meanwhile): neither arm scores it on that point; the
keyword arm scores its current text directly, as it does for a memory not yet embedded
(``RecallServicer._lexical``, ``_Tiers._rank``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from google.protobuf import timestamp_pb2

from automem.common.auth import current_principal, require_role, resolve_scope
from automem.common.embedding import EmbeddingProvider
from automem.common.enums import enum_word
from automem.common.errors import InvalidArgument, NotFound, Unavailable
from automem.common.lifecycle import SUPERSEDING_RELATIONS, review_required
from automem.common.llm import llm_configured
from automem.common.model import (
    CandidateFields,
    Memory,
    check_list_length,
    epoch,
    first_epoch,
    now,
    parse_type,
    ts,
    type_name,
)
from automem.common.paging import decode_offset_token, encode_offset_token
from automem.common.settings import Settings
from automem.common.state import (
    WITHHELD_STATES,
    ReadAt,
    as_current,
    as_known,
    as_read,
    hydrate_at,
    known,
    resolve,
    resolve_one,
    withheld_reason,
)
from automem.common.text import analyze, bm25_query_weights, fulltext_query, term_index
from automem.common.timeouts import long_running
from automem.common.timewindow import bound_millis
from automem.common.timewindow import resolve as resolve_window
from automem.graph import GraphStore
from automem.graph.memories import filter_where
from automem.recall import scoring, understanding
from automem.recall.bytag import list_by_tag
from automem.recall.filters import Filters, check_text, listed_states, read_at, request_time
from automem.recall.graph_views import GraphViews
from automem.recall.llm_query import QueryRewriter
from automem.recall.llm_rerank import LLMReranker
from automem.recall.ranking import Candidate, Ranked, ScoreWeights, rank
from automem.v1 import memory_pb2, recall_service_pb2, recall_service_pb2_grpc
from automem.vectors import VectorFilter, VectorStore

log = logging.getLogger(__name__)

#: AutoMem's default recall limit.
DEFAULT_LIMIT = 5
#: Longest ``query`` (and each of ``queries``) a search takes, in characters, unless the
#: content limit (``Settings.content_max_length``, AutoMem's 2,000) is larger: a memory's
#: whole content always fits as a query (:func:`query_max_length`). A question, or a
#: paragraph to find its like, is far shorter; the lexical arm's work grows with the
#: query's terms (a 1 MB query took 6.7 s of the server's time, break-it review).
QUERY_MAX_LENGTH = 4000
#: Most ``queries`` a search takes: each runs every arm of every tier (3,000 took 30 s of
#: the server's time, break-it review).
QUERIES_MAX = 32
#: Candidates fetched per arm for the first tier of a ranking: max(limit * CANDIDATE_FACTOR,
#: CANDIDATE_MIN) (independent of ``offset``, so every page ranks the same pool).
CANDIDATE_FACTOR = 5
CANDIDATE_MIN = 100
#: The first ranking tier reads and ranks in full at least RANK_LIMIT_FACTOR * limit of its
#: pool's candidates (``search_rank_candidates`` sets the floor; ``_Tiers._prune``).
RANK_LIMIT_FACTOR = 3
#: Each further tier of a ranking fetches TIER_GROWTH times the previous tier's candidates.
TIER_GROWTH = 4
#: Most candidates fetched per arm: the ranking of a request ends with the tier of this size.
CANDIDATE_MAX = 25_600
#: Best candidates of each arm whose authors the author re-query looks at
#: (automem/recall/understanding.py).
REQUERY_SEEDS = 20
#: Scopes and names per scope the author cache keeps (RecallServicer.learn_authors).
AUTHOR_CACHE_SCOPES = 1024
AUTHOR_CACHE_NAMES = 1000
#: Extra ranked candidates hydrated beyond the page, for hits the state pass withholds.
RESOLVE_SLACK = 10
#: Memories without an embedding yet that the lexical arm scores directly; beyond this many
#: (a large import in progress, an enrichment backlog, or vectors disabled) it asks
#: FalkorDB's full-text index. It was 1,000: reading and tokenising up to 1,000 contents on
#: every recall made an overloaded service slower the longer its backlog grew (the soak of
#: docs/benchmarks.md "The vector shard shared with the children, and mixed load").
UNEMBEDDED_SCAN_MAX = 200
#: Most earlier pages whose expansions a page of an expanding recall works out again, so as
#: not to repeat them (``_expansions``); a page deeper than that may repeat an expansion of a
#: page this many before it.
EXPANSION_PAGES_MAX = 50
#: Most memories deleted since a past ``known_at`` a recall at it scores by their text
#: (``_lexical``): the latest deleted first.
DELETED_SCAN_MAX = 1000
#: Most memories whose content was edited since a past ``known_at`` a recall at it scores by
#: the text believed then (``_lexical``; their dense hits are dropped, ``_Tiers._rank``): the
#: latest edited first. Those edited before them keep today's text in both arms. With 1,000
#: edited since, this cap cost +2 to +15 ms a recall at 10,000 memories, a cap of 1,000 +35 to
#: +49 ms (reading the old texts and tokenising them; docs/architecture.md, "Versions and known_at").
EDITED_SCAN_MAX = 200
#: Time windows (days back from the newest matching memory) a newest-first listing tries
#: before sorting the whole scope.
LIST_WINDOWS_DAYS = (1.0, 16.0, 256.0)


def _time_neighbours(memories: list[CandidateFields], preceded_by: dict[str, list[str]]
                     ) -> dict[str, tuple[str | None, str | None]]:
    """For each candidate, its PRECEDED_BY predecessor and successor among the candidates
    (edges written by enrichment; ``preceded_by`` maps an id to the ids its edges point to)."""
    ids = {m.id for m in memories}
    prev: dict[str, str] = {}
    for m in memories:
        for p in preceded_by.get(m.id, ()):
            if p in ids:
                prev[m.id] = p
    nxt = {p: m for m, p in prev.items()}
    return {mid: (prev.get(mid), nxt.get(mid)) for mid in ids}


#: Seconds GetStats waits for each store's part (:meth:`RecallServicer.GetStats`): the graph's
#: ping and count, the vector store's count and dimension (milliseconds when healthy, up to a
#: second on a saturated 2-core machine). Under the gateway's health bound
#: (automem/gateway/usecases.py ``HEALTH_TIMEOUT``, 3.5 s) after the open call's key check
#: (automem/common/grpc_server.py ``OPEN_PRINCIPAL_SECONDS``), so a stalled store is reported
#: as such instead of making the whole answer late.
STATS_STORE_SECONDS = 2.0
#: Most memories a startup recall at an earlier ``known_at`` reads per tag group.
STARTUP_PAST_MAX = 5000
#: Node states whose vector points a past read searches: a memory's state at an earlier
#: ``known_at`` may differ from its state now (automem/common/state.py ``ReadAt.past``).
PAST_STATES = ["ACTIVE", "SUPERSEDED", "ARCHIVED", "PENDING_REVIEW"]


def arm_filter(filters: Filters, read: ReadAt):
    """The vector-store filter of the search arms: ``filters`` on the current payload; with
    ``read.past`` only the scope (and :data:`PAST_STATES`): tags, time and state are then
    checked on the versions believed at ``known_at`` (``_Tiers._rank``), since a tag removed
    or a window moved later is not in the current payload. Returns a VectorFilter."""
    if read.past:
        return Filters.build(filters.scope, [], "any", "exact", [], None, None).vector_filter(PAST_STATES)
    return filters.vector_filter(listed_states(read))


#: Fields a version diff leaves out: they move with every version, or say where background
#: processing stood (``embedding_status``: enrichment settles it on whichever snapshot is
#: current then; automem/graph/versions.py ``UNTRACKED``).
DIFF_IGNORED = ("version", "update_time", "embedding_status")


def diff_memories(before: Memory, after: Memory) -> list[recall_service_pb2.FieldChange]:
    """The fields of the Memory message (proto names, as ``json_format`` writes them) whose
    values differ between ``before`` and ``after``, in field-number order, each with both
    values (absent = unset); ``version``, ``update_time`` and ``embedding_status`` are left
    out (:data:`DIFF_IGNORED`)."""
    from google.protobuf import json_format, struct_pb2

    a = json_format.MessageToDict(before, preserving_proto_field_name=True)
    b = json_format.MessageToDict(after, preserving_proto_field_name=True)
    out = []
    for fd in Memory.DESCRIPTOR.fields:
        name = fd.name
        if name in DIFF_IGNORED or a.get(name) == b.get(name):
            continue
        change = recall_service_pb2.FieldChange(field=name)
        for side, values in (("before", a), ("after", b)):
            if name in values:
                value = struct_pb2.Value()
                json_format.ParseDict(values[name], value)
                getattr(change, side).CopyFrom(value)
        out.append(change)
    return out


def query_max_length(settings: Settings) -> int:
    """The longest ``query`` (and each of ``queries``) SearchMemories takes, in characters:
    :data:`QUERY_MAX_LENGTH`, or the content limit when that is larger. The REST schema
    states the same bound (automem/gateway/schemas.py ``declared_limits``)."""
    return max(QUERY_MAX_LENGTH, settings.content_max_length)


def check_queries(query: str, queries: list[str], max_length: int) -> None:
    """Refuse a search's text beyond its bounds: ``query`` or an item of ``queries`` longer
    than ``max_length`` characters (:func:`query_max_length`), more than :data:`QUERIES_MAX`
    ``queries``.

    Raises:
        InvalidArgument: naming ``query`` or ``queries``.
    """
    if len(query) > max_length:
        raise InvalidArgument(f"query: at most {max_length} characters (got {len(query)})", field="query")
    if len(queries) > QUERIES_MAX:
        raise InvalidArgument(f"queries: at most {QUERIES_MAX} (got {len(queries)})", field="queries")
    for i, q in enumerate(queries):
        if len(q) > max_length:
            raise InvalidArgument(f"queries: at most {max_length} characters each (item {i} has {len(q)})",
                                  field="queries")


def check_list_sizes(request: recall_service_pb2.SearchMemoriesRequest) -> None:
    """Refuse a search with more than :data:`~automem.common.model.LIST_ITEMS_MAX` items in
    ``tags``, ``exclude_tags``, ``context_tags``, ``context_types`` or ``priority_ids`` (they
    were unbounded: break-it review).

    Raises:
        InvalidArgument: naming the field.
    """
    for name in ("tags", "exclude_tags", "context_tags", "context_types", "priority_ids"):
        check_list_length(getattr(request, name), name)


def context_type_names(raw: Sequence[str]) -> frozenset[str]:
    """The canonical type names (``Decision``...) of a search's ``context_types``: each item
    read as a store's ``type`` is (automem/common/model.py ``parse_type``: any case, the proto
    enum name, AutoMem's legacy aliases); blank items are skipped, as AutoMem skips them.

    Raises:
        InvalidArgument: naming ``context_types`` for an unknown type (it was ignored, and the
            boost silently never applied: break-it review).
    """
    return frozenset(type_name(parse_type(t, field="context_types")) for t in raw if t.strip())


def window_timestamp(seconds: float | None) -> timestamp_pb2.Timestamp | None:
    """The Timestamp a search echoes for an inclusive window bound of epoch ``seconds``, at
    millisecond precision (automem/common/timewindow.py ``bound_millis``: the end of
    ``time_query=2025`` is 2025-12-31T23:59:59.999Z, not the ...59.9995 it filters with);
    None stays None."""
    if seconds is None:
        return None
    out = timestamp_pb2.Timestamp()
    out.FromMilliseconds(bound_millis(seconds))
    return out


def clamp_limit(limit: int, maximum: int, field: str = "limit") -> int:
    """The number of results a read returns for a requested ``limit``: ``limit``, or
    ``maximum`` when more was asked for (AutoMem clamps rather than refuses:
    ``max(1, min(limit, recall_max_limit))`` in automem/api/recall.py, ``min(limit, 200)``
    in automem/api/memory.py of verygoodplugins/automem). Unlike AutoMem, which turns zero
    and negative values into 1, they are refused: a caller asking for nothing or less has
    a bug worth hearing about. InvalidArgument naming ``field`` (the request's field that
    gave ``limit``) when ``limit`` < 1."""
    if limit < 1:
        raise InvalidArgument(f"{field}: must be at least 1 (at most {maximum} are returned)", field=field)
    return min(limit, maximum)


class _Tiers:
    """The ranking of one recall request as a sequence of tiers (issue 12, item 7).

    Tier 0 ranks the candidates of a pool of ``base`` per arm (:data:`CANDIDATE_FACTOR`,
    :data:`CANDIDATE_MIN`: what recall always ranked for its first page); tier k ranks a pool
    :data:`TIER_GROWTH` times larger and contributes, in its own order, only the memories no
    earlier tier ranked. The pools depend on the request but never on ``offset``, so every
    page of the same request reads one order in which each memory occurs once: pages at
    offset 0, 20, 40... neither repeat nor skip a memory. The tiers end when no arm filled its
    pool (every matching memory was ranked) or at :data:`CANDIDATE_MAX`. Within a tier the
    order is total: score, then event and create time, then id (automem/recall/ranking.py).

    With a query and the score order, tier 0 reads and ranks only the ``rank_max`` best of its
    pool by their fused arm scores (:meth:`_prune`: the first page rarely needs more); when
    that left some out, the next tier ranks that same pool (its arm scores kept, no second
    search) in full, adding the rest in its own order, before the pools grow. Later tiers are
    never cut: a request that reads every tier (a ``min_score`` most miss, the last page)
    costs one ranking more, not a tier per ``rank_max`` candidates.
    Pages read while memories are written, or far enough apart in time that a recency score
    reaches its floor, rank a changed store and can differ, as any offset paging does.
    """

    def __init__(self, svc: RecallServicer, request: Any, scope: str, read: ReadAt, filters: Filters,
                 queries: list[str], vectors: list[list[float]] | asyncio.Future, sort: str, recency_bias: str,
                 base: int, rank_queries: list[str] | None = None, rank_max: int = 0) -> None:
        self.svc, self.request, self.scope, self.read, self.filters = svc, request, scope, read, filters
        self.queries, self.sort, self.recency_bias = queries, sort, recency_bias
        #: The request's ``context_types`` as canonical type names (:func:`context_type_names`).
        self.context_types = context_type_names(request.context_types)
        #: The tags whose memories gain the ``tag`` component: ``context_tags`` and the
        #: ``context`` label (AutoMem adds the label to its priority tags, ``_build_context_profile``
        #: in its automem/api/recall.py; it was ignored here: break-it review).
        self.context_tags = [*request.context_tags, *([request.context.strip()] if request.context.strip() else [])]
        #: The query embeddings, or the future computing them (``SearchMemories`` starts it
        #: before the tiers: the lexical arm runs while the model embeds; :meth:`_dense`).
        self.embedding: asyncio.Future | None = vectors if isinstance(vectors, asyncio.Future) else None
        self.vectors: list[list[float]] = [] if self.embedding is not None else vectors
        #: The request's queries (ranking reads them); ``queries`` (the arms') may hold the LLM's
        #: rewrites too, and become the author re-query's.
        self.request_queries = list(queries if rank_queries is None else rank_queries)
        self.size = min(base, CANDIDATE_MAX)
        #: Most candidates of tier 0 read and ranked in full (0: all; :meth:`_prune`).
        self.rank_max = rank_max
        #: Whether tier 0 is being ranked (the only one :meth:`_prune` cuts), and whether it
        #: left part of its pool for the tier after it.
        self._prune_tier = True
        self._pruned = False
        #: A cut tier 0's arm scores, listed ids and "an arm filled its pool", for the tier
        #: that ranks the rest of its pool.
        self._rest: tuple[dict[str, dict[str, float]], list[str], bool] | None = None
        self.done = False
        self.first = True
        #: Arms that ran / were unavailable (of the first tier).
        self.arms_run: list[str] = []
        self.degraded: list[str] = []
        self._ranked: set[str] = set()
        self._fetched: set[str] = set()
        self._light: dict[str, CandidateFields] = {}
        self._preceded_by: dict[str, list[str]] = {}
        #: Candidates read by :meth:`_fetch` whose vector point does not hold their current
        #: content (``embedding_status`` not DONE): their dense scores are dropped (:meth:`_rank`).
        self._unembedded: set[str] = set()
        #: Lexical feedback terms (term index -> added query weight), set by the first tier.
        self.feedback: dict[int, float] = {}
        #: At a past ``known_at``: the terms of the text believed then of the memories deleted
        #: or edited since (:meth:`RecallServicer._believed_then`), read once per request.
        self._then: asyncio.Future | None = None

    async def next(self) -> list[Ranked] | None:
        """The next tier's ranked memories (each not in an earlier tier), or None at the end."""
        while not self.done:
            n = self.size
            first = self.first
            if self._rest is not None:  # the rest of a cut tier 0's pool: no second search
                (arm_scores, listed, more), self._rest = self._rest, None
            else:
                arm_scores, arms_run, degraded, listed, more = await self._search(n, self.queries, None)
            if self.first:
                self.arms_run, self.degraded, self.first = arms_run, degraded, False
                requery = await self._author_requery(arm_scores)
                if requery is not None:
                    arm_scores, _, _, _, more = await self._search(n, *requery)
            pool = list(dict.fromkeys([*arm_scores["vector"], *arm_scores["keyword"], *listed]))
            injected = self._inject_priority(pool) if first and self.sort == "score" else []
            ranked = await self._rank([*pool, *injected], arm_scores)
            if injected:
                named = set(injected)
                for r in ranked:
                    if r.id in named:
                        r.match_type = "priority_id"
            if first:
                ranked, more_fb = await self._feedback(ranked, arm_scores, n)
                more = more or more_fb
                if self.sort == "score" and self.request.priority_ids:
                    ranked = self.priority_first(ranked)
            # A cut tier 0 left part of its pool unranked: the next tier ranks the same pool
            # (its arm scores kept, not searched again) in full, before the pools grow.
            pruned, self._prune_tier, self._pruned = self._pruned, False, False
            if pruned:
                self._rest = (arm_scores, listed, more)
            else:
                self.done = not more or n >= CANDIDATE_MAX
                self.size = min(n * TIER_GROWTH, CANDIDATE_MAX)
            new = [r for r in ranked if r.id not in self._ranked]
            self._ranked.update(r.id for r in new)
            if new:
                return new
        return None

    def priority_first(self, ranked: list[Ranked]) -> list[Ranked]:
        """``ranked`` with the request's ``priority_ids`` first, in the order the request gave
        them, the others after them in their order: AutoMem guarantees them the first places
        of a page (``_guarantee_priority_results`` in its automem/api/recall.py), whatever
        their scores; their ``priority`` component alone (1.0) is outweighed by a memory both
        arms score high. Tier 0 holds every named memory the caller may see
        (:meth:`_prune` keeps them, :meth:`_inject_priority` adds those no arm found), so
        they lead the first page and no later page repeats them."""
        order = {mid: n for n, mid in enumerate(dict.fromkeys(self.request.priority_ids))}
        last = len(order)
        return sorted(ranked, key=lambda r: order.get(r.id, last))

    def _inject_priority(self, pool: list[str]) -> list[str]:
        """The request's ``priority_ids`` that no arm of tier 0 found (not in ``pool``), for
        tier 0 to rank after its pool, as AutoMem injects them (``_inject_priority_memories``
        in its automem/api/recall.py): ranking reads them like any candidate — of the caller's
        scope only, through the request's filters and then the state pass — and their
        ``priority`` component (1.0) and :meth:`priority_first` rank them first; their
        ``match_type`` is ``priority_id``.
        Only in the score order (a time-ordered listing has no boost to give). At most
        :data:`~automem.common.model.LIST_ITEMS_MAX` ids (more were refused by :meth:`RecallServicer.SearchMemories`)."""
        seen = set(pool)
        return [i for i in dict.fromkeys(self.request.priority_ids) if i and i not in seen]

    async def _search(self, n: int, queries: list[str], vectors: list[list[float]] | None
                      ) -> tuple[dict[str, dict[str, float]], list[str], list[str], list[str], bool]:
        """One pool of ``n`` per arm: ``(arm scores, arms run, arms unavailable, listed ids,
        whether an arm filled its pool)``. ``queries`` / ``vectors`` drive the arms (the
        request's — ``vectors`` None: the request's embeddings, waited for by the dense arm
        only — or the author re-query's); with neither, the pool is a listing. The dense and
        lexical arms run concurrently: the query embedding (a worker thread) and the vector
        searches overlap the lexical arm's work (docs/benchmarks.md, "Recall's arms side by side")."""
        svc, request = self.svc, self.request
        arm_scores: dict[str, dict[str, float]] = {"vector": {}, "keyword": {}}
        arms_run: list[str] = []
        degraded: list[str] = []
        listed: list[str] = []
        if queries or len(request.embedding):
            dense_on = svc.vectors is not None and svc.embedder is not None

            async def dense() -> bool:
                more = False
                flt = arm_filter(self.filters, self.read)
                try:
                    for vec in vectors if vectors is not None else await self._dense():
                        hits = await svc.vectors.search(vec, n, flt)
                        more = more or len(hits) >= n
                        for mid, score in hits:
                            arm_scores["vector"][mid] = max(score, arm_scores["vector"].get(mid, 0.0))
                except Unavailable as exc:
                    # The vector store is late or down (e.g. an index swap holding the shard
                    # past the store bound): answer from the other arms, saying so.
                    log.warning("vector arm skipped: %s", exc, extra={"scope": self.scope})
                    arm_scores["vector"].clear()
                    degraded.append("vector")
                return more

            # Without a dense arm the keyword arm reads FalkorDB's full-text index; with one,
            # the sparse search, which falls back by itself when the vector store fails.
            lexical = svc._lexical(queries, self.scope, self.filters, self.read, n, arm_scores["keyword"],
                                   self.feedback, sparse=dense_on, then=self.believed_then() if queries else None)
            if dense_on:
                try:
                    async with asyncio.TaskGroup() as group:
                        dense_more = group.create_task(dense())
                        lexical_more = group.create_task(lexical)
                except BaseExceptionGroup as failed:  # the arm's own error, as a sequential call raises it
                    raise failed.exceptions[0]
                more = dense_more.result() or lexical_more.result()
                if "vector" not in degraded:
                    arms_run.append("vector")
            else:
                degraded.append("vector")
                more = await lexical
            arms_run.append("keyword")
        else:
            listed = await svc._list_ids(self.filters, self.read, n, self.sort)
            more = len(listed) >= n
            arms_run.append("tags" if self.filters.tags else "time")
        return arm_scores, arms_run, degraded, listed, more

    def believed_then(self) -> asyncio.Future | None:
        """At a past ``known_at``, the future of the memories deleted or edited since then,
        each with the terms of its text believed then (:meth:`RecallServicer._believed_then`:
        read once per request, started with the first tier's arms and running alongside
        their searches); None at the default ``known_at`` (now), which reads nothing."""
        if not self.read.past:
            return None
        if self._then is None:
            self._then = asyncio.ensure_future(self.svc._believed_then(self.scope, self.read))
        return self._then

    def content(self, memory_id: str) -> str:
        """The content of a ranked memory (read with its ranking fields; "" if unknown)."""
        light = self._light.get(memory_id)
        return light.content if light is not None else ""

    async def _dense(self) -> list[list[float]]:
        """The request's query embeddings (waits for the future ``SearchMemories`` started)."""
        if self.embedding is not None:
            embedding, self.embedding = self.embedding, None
            self.vectors = (await embedding).tolist()
        return self.vectors

    async def _author_requery(self, arm_scores: dict[str, dict[str, float]]
                              ) -> tuple[list[str], list[list[float]]] | None:
        """The queries and vectors of the second round (automem/recall/understanding.py,
        "author re-query"), or None: when the first pool's memories have authors the queries
        name, the queries without those names — and, with ``search_author_requery`` "both" and
        no caller-supplied embedding, their embeddings. Later tiers use them too."""
        settings = self.svc.settings
        if not self.queries or settings.search_author_requery == "off" or not settings.search_weight_author:
            return None
        # A named author's memories lead the arms that match the name: the best of each arm suffice.
        ids = list(dict.fromkeys(i for arm in arm_scores.values()
                                 for i in sorted(arm, key=arm.__getitem__, reverse=True)[:REQUERY_SEEDS]))
        # The part of the pool ranking reads (:meth:`_prune`) in the one read: ranking needs it
        # next, unless a re-query replaces the pool (rare once the scope's authors are known:
        # SearchMemories strips them first).
        pool = list(dict.fromkeys(i for arm in arm_scores.values() for i in arm))
        await self._fetch(list(dict.fromkeys([*ids, *self._prune(pool, arm_scores)])))
        authors = {a for i in ids if i in self._light and (a := understanding.author_of(self._light[i].content))}
        self.svc.learn_authors(self.scope, authors)
        if not authors:
            return None
        stripped = [understanding.strip_authors(q, authors) for q in self.queries]
        if stripped == self.queries:
            return None
        vectors = self.vectors
        if settings.search_author_requery == "both" and self.vectors and not len(self.request.embedding):
            vectors = (await asyncio.to_thread(self.svc.embedder.embed, stripped)).tolist()
        self.queries, self.vectors = stripped, vectors
        return stripped, vectors

    async def _feedback(self, ranked: list[Ranked], arm_scores: dict[str, dict[str, float]], n: int
                        ) -> tuple[list[Ranked], bool]:
        """Lexical feedback (automem/recall/understanding.py ``feedback_terms``; off while
        ``search_feedback_weight`` is 0): the lexical arm searched again with the best
        ``search_feedback_docs`` memories' other terms added at that weight, its scores in place
        of the first search's (a memory only the first found keeps its first score), and the
        pool ranked again; the first ranking's best ``search_feedback_keep`` stay on top, in
        their order. Later tiers search with the same terms. Returns (ranking, whether the
        feedback search filled its pool of ``n``)."""
        settings = self.svc.settings
        if not settings.search_feedback_weight or not self.queries or self.svc.vectors is None or not ranked:
            return ranked, False
        top = [(self._light[r.id].content, r.score) for r in ranked[:settings.search_feedback_docs]
               if r.id in self._light]
        terms = understanding.feedback_terms(top, " ".join(self.request_queries))
        if not terms:
            return ranked, False
        self.feedback = {term_index(t): settings.search_feedback_weight * w for t, w in terms.items()}
        keyword: dict[str, float] = {}
        more = await self.svc._lexical(self.queries, self.scope, self.filters, self.read, n, keyword, self.feedback,
                                       then=self.believed_then())
        for mid, score in arm_scores["keyword"].items():
            keyword.setdefault(mid, score)
        scores = {**arm_scores, "keyword": keyword}
        again = await self._rank(list(dict.fromkeys([*scores["vector"], *keyword])), scores)
        keep = ranked[:settings.search_feedback_keep]
        kept = {r.id for r in keep}
        return keep + [r for r in again if r.id not in kept], more

    async def _fetch(self, ids: list[str]) -> None:
        """Read the ranking fields of the ``ids`` not read yet (one round trip, no bodies),
        and note those whose vector point does not hold their current content (in
        ``_unembedded``, for :meth:`_rank`)."""
        missing = [i for i in ids if i not in self._fetched]
        self._fetched.update(missing)
        light = await self.svc.graph.memories.recall_candidates(missing, self.scope)
        if self.read.past:  # rank and filter the versions believed at known_at
            believed = await hydrate_at(self.svc.graph, [m.id for m, _, _ in light], self.scope, self.read)
            light = [(CandidateFields.of(believed[m.id]), prev, embedded) for m, prev, embedded in light
                     if m.id in believed]
        for memory, prev, embedded in light:
            self._light[memory.id] = memory
            self._preceded_by[memory.id] = prev
            if not embedded:
                self._unembedded.add(memory.id)

    def _prune(self, ids: list[str], arm_scores: dict[str, dict[str, float]]) -> list[str]:
        """The best :attr:`rank_max` of ``ids`` by their fused arm scores alone (each arm
        max-normalised over ``ids`` and weighted, :func:`automem.recall.scoring.fuse_arms`, as
        ranking fuses them; ties by id), and the request's ``priority_ids`` among ``ids`` (they lead
        the ranking whatever their arm scores, :meth:`priority_first`), in the order of ``ids``. ``ids`` unchanged after tier 0, without a
        query, in a time order, with ``rank_max`` 0, with ``context_tags``, ``context`` or
        ``context_types`` (boosts the arm scores do not show), with lexical feedback on (its second lexical search changes the
        pool of the tiers after the first), or when ``ids`` holds no more than ``rank_max``. A
        dense score that :meth:`_rank` will drop (a memory edited since its embedding) still
        counts here: such a memory may take a place and leave the page.

        Why: reading a candidate's ranking fields and ranking it cost ~25 us a candidate, and
        the other signals (automem/recall/ranking.py) rarely lift a memory from the bottom of
        both arms into a page: ranking the best 60 of a pool of ~200 left LoCoMo recall@10 and
        MRR unchanged at ~15 % less CPU per recall (docs/benchmarks.md, "Reading the pool's
        best by their arm scores")."""
        settings = self.svc.settings
        if (not self._prune_tier or not self.rank_max or not self.queries or self.sort != "score"
                or settings.search_feedback_weight or self.context_tags or self.context_types
                or len(ids) <= self.rank_max):
            return ids
        parts = scoring.fuse_arms(ids, arm_scores, {"vector": settings.search_weight_vector,
                                                    "keyword": settings.search_weight_keyword})
        fused = {i: sum(p.values()) for i, p in parts.items()}
        keep = set(sorted(ids, key=lambda i: (-fused[i], i))[: self.rank_max])
        keep.update(self.request.priority_ids)
        return [i for i in ids if i in keep]

    async def _rank(self, ids: list[str], arm_scores: dict[str, dict[str, float]]) -> list[Ranked]:
        """Rank the pool ``ids`` on the few fields scoring needs (one round trip for the ids
        not read by an earlier tier, no bodies).

        A dense hit of a memory whose embedding is not DONE scored the vector of the content
        before an edit (the PATCH set the status back to PENDING; enrichment has not embedded
        the new text yet): that score is dropped, and a memory left with no arm's score — it
        matched the query on its old content only — leaves the pool. The lexical arm scored
        its current text already (:meth:`RecallServicer._lexical`). The status comes with the
        ranking fields (:meth:`_fetch`): no round trip of its own. In tier 0 only the pool's
        best by their arm scores are read and ranked (:meth:`_prune`).

        At a past ``known_at`` the same holds for a memory whose content was edited since then
        (its point holds today's text, not the text ranked, the one believed then): its dense
        score is dropped, and the lexical arm scored the text believed then. Kept, it ranked
        the version believed then by the meaning of today's text (a query naming only the new
        text's words found it: break-it review); dropped, it costs no read of its own (the
        lexical arm's set, :meth:`believed_then`), where scoring the old texts by meaning would
        embed up to :data:`EDITED_SCAN_MAX` of them on every such recall (the query's one
        embedding took ~6 ms of a recall at 10,000 memories, bench/recall_phases.py). The limit:
        at that ``known_at`` such a memory matches by the words of its text then, not by their
        meaning (docs/architecture.md, "Versions and known_at")."""
        kept = self._prune(ids, arm_scores)
        self._pruned = self._pruned or len(kept) < len(ids)
        ids = kept
        await self._fetch(ids)
        vector = arm_scores.get("vector", {})
        stale_vector = {i for i in self._unembedded if i in vector}  # none, normally
        if self.read.past and vector:  # edited since known_at: the point holds today's text
            stale_vector.update(i for i in await self.believed_then() if i in vector)
        memories = [self._light[i] for i in ids if i in self._light and self.filters.matches(self._light[i])
                    and (i not in stale_vector or any(i in s for a, s in arm_scores.items() if a != "vector"))]
        neighbours = _time_neighbours(memories, self._preceded_by) if self.queries else {}
        candidates = [
            Candidate(id=m.id, arm_scores={a: s[m.id] for a, s in arm_scores.items()
                                           if m.id in s and not (a == "vector" and m.id in stale_vector)},
                      memory=m, prev_id=neighbours.get(m.id, (None, None))[0],
                      next_id=neighbours.get(m.id, (None, None))[1])
            for m in memories
        ]
        weights = ScoreWeights.from_settings(self.svc.settings)
        return rank(candidates, weights=weights, query=" ".join(self.request_queries),
                    context_tags=self.context_tags, priority_ids=set(self.request.priority_ids),
                    now=time.time(), recency_bias=self.recency_bias, context_types=self.context_types)


def text_checked(cls: type) -> type:
    """``cls`` (a RecallService servicer) with every RPC of the service checking the text of
    its request first (automem/recall/filters.py ``check_text``): a NUL character in any field
    (``tags`` of a by-tag listing, ``id``, ``query``...) is INVALID_ARGUMENT naming that field
    before the handler runs; the graph's own refusal named none. The call's key was checked
    before (the auth interceptor, automem/common/grpc_server.py)."""
    def checked(handler: Any) -> Any:
        @functools.wraps(handler)
        async def method(self: Any, request: Any, context: Any) -> Any:
            check_text(request)
            return await handler(self, request, context)
        return method

    for rpc in recall_service_pb2.DESCRIPTOR.services_by_name["RecallService"].methods:
        setattr(cls, rpc.name, checked(getattr(cls, rpc.name)))
    return cls


@text_checked
class RecallServicer(GraphViews, recall_service_pb2_grpc.RecallServiceServicer):
    """gRPC RecallService over the graph (truth), the vector store and the embedder."""

    def __init__(self, settings: Settings, graph: GraphStore, vectors: VectorStore | None,
                 embedder: EmbeddingProvider | None) -> None:
        self.settings = settings
        self.graph = graph
        self.vectors = vectors
        self.embedder = embedder
        #: Restarts of the embedded servers by name (set by the recall target from the
        #: runtime, automem/targets.py), reported by GetStats for /health.
        self.server_restarts: dict[str, int] = {}
        #: Authors ("Name: ..." memories) seen per scope by the author re-query, most recently
        #: used scope last (:meth:`learn_authors`).
        self._authors: OrderedDict[str, set[str]] = OrderedDict()
        #: LLM query rewriting (automem/recall/llm_query.py), when turned on and configured.
        self.rewriter: QueryRewriter | None = (
            QueryRewriter(settings) if settings.recall_llm_rewrite and llm_configured(settings) else None)
        #: LLM reranking (automem/recall/llm_rerank.py): built on the first recall that asks for it.
        self._reranker: LLMReranker | None = None

    def learn_authors(self, scope: str, authors: set[str]) -> None:
        """Remember ``authors`` of ``scope`` (at most :data:`AUTHOR_CACHE_NAMES` per scope, the
        :data:`AUTHOR_CACHE_SCOPES` most recently used scopes), so later recalls in the scope strip
        the names they ask about before their first round. An author whose memories are gone
        stays known until the process restarts: a query naming them searches without the name,
        and the author component finds no memory of theirs to favour."""
        if not authors:
            return
        known = self._authors.setdefault(scope, set())
        self._authors.move_to_end(scope)
        for a in authors:
            if len(known) >= AUTHOR_CACHE_NAMES:
                break
            known.add(a)
        while len(self._authors) > AUTHOR_CACHE_SCOPES:
            self._authors.popitem(last=False)

    # --- search --------------------------------------------------------------------

    async def SearchMemories(self, request, context):
        """Hybrid recall. Empty query + tags/time lists by filters; empty everything lists
        recent memories. Limit default 5, above ``recall_max_limit`` clamped to it and the
        applied limit returned in ``limit`` (:func:`clamp_limit`). Errors: INVALID_ARGUMENT
        naming sort, tag_mode, tag_match, start_time (after end_time), tz, limit (zero or negative), start_time /
        end_time / as_of / known_at outside the years 1–9999, query or queries beyond their
        bounds (:func:`check_queries`), tags, exclude_tags, context_tags, context_types or
        priority_ids with more than :data:`~automem.common.model.LIST_ITEMS_MAX` items, context_types naming an
        unknown type (:func:`context_type_names`); window: common/timewindow.py. The window is echoed in
        ``start_time`` / ``end_time`` at millisecond precision (:func:`window_timestamp`).

        Paging: the page is ``offset``..``offset + limit`` of one ranking that does not depend
        on ``offset`` (:class:`_Tiers`), so consecutive pages of the same request return every
        result once. ``has_more`` says whether the ranking holds a result after the page (it
        resolves one more); ``total`` is set when the ranking was read to its end (the last
        page). A time sort orders each tier's results by time (then id)."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        check_queries(request.query, list(request.queries), query_max_length(self.settings))
        check_list_sizes(request)
        context_type_names(request.context_types)  # refused before any search starts
        limit = clamp_limit(request.limit if request.HasField("limit") else DEFAULT_LIMIT,
                            self.settings.recall_max_limit)
        if request.offset < 0:
            raise InvalidArgument("offset: must not be negative", field="offset")
        recency_bias = enum_word(recall_service_pb2.RecencyBias, request.recency_bias, "recency_bias", "auto")
        for name, value, top in (("relation_limit", request.relation_limit, 100),
                                 ("expansion_limit", request.expansion_limit, 500)):
            if value < 0 or value > top:
                raise InvalidArgument(f"{name}: must be between 0 and {top}", field=name)
        for name in ("min_score", "expand_min_importance", "expand_min_strength"):
            if not math.isfinite(getattr(request, name)):
                raise InvalidArgument(f"{name}: must be a finite number", field=name)
        for name, top in (("min_score", math.inf), ("expand_min_importance", 1.0), ("expand_min_strength", 1.0)):
            # Importance and strength are 0..1: a bound outside kept or dropped everything unsaid.
            if not 0 <= getattr(request, name) <= top:
                raise InvalidArgument(f"{name}: must be " + ("at least 0" if top == math.inf else "between 0 and 1"),
                                      field=name)
        sort = enum_word(recall_service_pb2.SortOrder, request.sort, "sort", "score")
        window = resolve_window(request.time_query, request_time(request, "start_time"),
                                request_time(request, "end_time"), tz=request.tz)
        start, end = window.start, window.end
        filters = Filters.build(scope, list(request.tags),
                                enum_word(recall_service_pb2.TagMode, request.tag_mode, "tag_mode", "any"),
                                enum_word(recall_service_pb2.TagMatch, request.tag_match, "tag_match", "prefix"),
                                list(request.exclude_tags), start, end)
        queries = [q for q in [request.query, *request.queries] if q and q.strip()]

        if any(not math.isfinite(v) for v in request.embedding):
            raise InvalidArgument("embedding: must contain finite numbers within ±3.4e38 (32-bit floats)", field="embedding")
        if len(request.embedding) and not any(request.embedding):  # no direction: every cosine is 0
            raise InvalidArgument("embedding: every value is 0 as a 32-bit float, a vector without a direction; "
                                  "leave it out and the query is embedded", field="embedding")
        if len(request.embedding) and self.embedder is not None and len(request.embedding) != self.embedder.dimension:
            raise InvalidArgument(f"embedding: has {len(request.embedding)} dimensions; the collection's model "
                                  f"({self.embedder.name}) uses {self.embedder.dimension}", field="embedding")
        arm_queries = queries
        if self.rewriter is not None and queries and not len(request.embedding):
            arm_queries = [*queries, *[q for q in await self.rewriter.rewrite(queries[0]) if q not in queries]]
        # Authors of the scope seen by earlier recalls: the author re-query's stripping happens
        # before the first round (no second round, no second embedding).
        embed_queries = arm_queries
        known = self._authors.get(scope) if self.settings.search_weight_author else None
        if known and arm_queries and self.settings.search_author_requery != "off":
            self._authors.move_to_end(scope)
            arm_queries = [understanding.strip_authors(q, known) for q in arm_queries]
            if self.settings.search_author_requery == "both":
                embed_queries = arm_queries
        vectors: list[list[float]] | asyncio.Future = []
        if (queries or len(request.embedding)) and self.vectors is not None and self.embedder is not None:
            # Started here, waited for by the dense arm only (_Tiers._search).
            vectors = [list(request.embedding)] if len(request.embedding) else \
                asyncio.ensure_future(asyncio.to_thread(self.embedder.embed, embed_queries))
        tiers = _Tiers(self, request, scope, read, filters, arm_queries, vectors, sort, recency_bias,
                       max(limit * CANDIDATE_FACTOR, CANDIDATE_MIN), rank_queries=queries,
                       rank_max=max(self.settings.search_rank_candidates, RANK_LIMIT_FACTOR * limit)
                       if self.settings.search_rank_candidates else 0)
        try:
            return await self._search_page(request, tiers, scope, read, filters, limit, sort, window)
        finally:
            if tiers.embedding is not None:  # the search failed before its dense arm ran
                tiers.embedding.cancel()

    async def _search_page(self, request: Any, tiers: _Tiers, scope: str, read: ReadAt, filters: Filters,
                           limit: int, sort: str, window: Any) -> recall_service_pb2.SearchMemoriesResponse:
        """The page of ``request`` from ``tiers``: resolved, filtered, expanded (SearchMemories)."""
        start, end = window.start, window.end
        want = limit + request.offset
        results: list[recall_service_pb2.ScoredMemory] = []
        state_filter = recall_service_pb2.StateFilter()
        score_filtered = 0
        seen: set[str] = set()
        resolved_seen: set[str] = set()
        # One more result than the page shows tells whether another page follows (has_more).
        need = want + 1
        replacements_within = dataclasses.replace(filters, tags=[])
        complete = False
        rerank = (request.rerank if request.HasField("rerank") else self.settings.recall_llm_rerank) \
            and sort == "score" and bool(tiers.request_queries)
        while len(results) < need:
            tier = await tiers.next()
            if tier is None:
                complete = True
                break
            if rerank:  # the first tier's best, once; the request's priority ids keep the lead
                tier, rerank = tiers.priority_first(await self._llm_rerank(tiers, tier)), False
            found: list[recall_service_pb2.ScoredMemory] = []
            pos = 0
            while pos < len(tier) and (sort != "score" or len(results) + len(found) < need):
                # A time sort orders every result of the tier, so it resolves the tier at once.
                size = len(tier) if sort != "score" else (need - len(results) - len(found)) + max(
                    RESOLVE_SLACK, want // 2)
                chunk = tier[pos: pos + size]
                pos += len(chunk)
                full, outgoing = await self.graph.memories.hydrate_with_successors(
                    [r.id for r in chunk], scope, SUPERSEDING_RELATIONS)
                if read.past:
                    full = await hydrate_at(self.graph, [r.id for r in chunk], scope, read)
                chunk = [r for r in chunk if r.id in full]  # purged since the candidates were read
                resolved = await resolve(self.graph, [full[r.id] for r in chunk], scope, read, seen=resolved_seen,
                                         outgoing=outgoing)
                for r, res in zip(chunk, resolved, strict=True):
                    if res is None or res.memory.id in seen:
                        # Withheld, or superseded by a head already shown; a readable memory shown
                        # already (as another hit's replacement) is not a suppression.
                        reason = withheld_reason(full[r.id], read)
                        if reason != "duplicate":
                            state_filter.suppressed_count += 1
                            if request.state_debug:
                                state_filter.suppressed.add(id=r.id, reason=reason,
                                                            replacement_id=res.memory.id if res else "")
                        continue
                    if not res.replaces_id and not filters.matches(res.memory):
                        continue
                    if res.replaces_id and not replacements_within.matches(res.memory):
                        # A replacement keeps to the window and the exclusions, as expansions do
                        # (not to the tag filter: the current fact of a tagged hit may carry
                        # other tags); it came back tagged with an excluded tag, or from outside
                        # the window (break-it review). The superseded hit stays withheld.
                        state_filter.suppressed_count += 1
                        if request.state_debug:
                            state_filter.suppressed.add(id=r.id, reason=withheld_reason(full[r.id], read),
                                                        replacement_id=res.memory.id)
                        continue
                    if request.min_score and r.score < request.min_score:
                        score_filtered += 1
                        continue
                    if res.replaces_id:
                        state_filter.suppressed_count += 1
                        state_filter.replacement_count += 1
                        if request.state_debug:
                            state_filter.suppressed.add(id=res.replaces_id, reason=withheld_reason(full[r.id], read),
                                                        replacement_id=res.memory.id)
                    seen.add(res.memory.id)
                    # A named memory no search found keeps saying so as its replacement (the answer's
                    # context_priority.injected reads it); replaces_id says it is a replacement.
                    match_type = ("state_replacement" if res.replaces_id and r.match_type != "priority_id"
                                  else r.match_type)
                    scored = recall_service_pb2.ScoredMemory(
                        memory=res.memory, score=r.score, final_score=r.score, match_type=match_type,
                        score_components=r.score_components, replaces_id=res.replaces_id)
                    if res.replaces_id:  # the edge it was reached by, as AutoMem's relations[0]
                        edge = max((e for e in outgoing if e[0] == r.id), key=lambda e: e[4] or 0.0, default=None)
                        if edge is not None:
                            scored.relation_type, scored.relation_strength = edge[1], edge[3] or 0.0
                        scored.relation_from = res.replaces_id
                    found.append(scored)
            if sort != "score":
                key, reverse = {"time_desc": ("event_time", True), "time_asc": ("event_time", False),
                                "updated_desc": ("update_time", True), "updated_asc": ("update_time", False)}[sort]
                found.sort(key=lambda s: (epoch(s.memory, key) or 0.0, s.memory.id), reverse=reverse)
            results.extend(found)
            if pos < len(tier):
                break  # enough results; the rest of this tier was not read
        arms_run, degraded = tiers.arms_run, tiers.degraded
        page = results[request.offset: request.offset + limit]
        # Related memories come after the page, up to expansion_limit (AutoMem), within the
        # request's time window and exclusions (AutoMem applies those; its tag filter only
        # with expand_respect_tags, as here), and never one the reader saw already: a result up
        # to this page's end, or an expansion of an earlier page (``_expansions``). An expansion
        # can still come back later as a ranked result of a following page.
        if (request.expand_relations or request.expand_entities) and page:
            around = filters if request.expand_respect_tags else dataclasses.replace(filters, tags=[])
            page.extend(await self._expansions(results, request.offset, limit, scope, read, around, request))
        response = recall_service_pb2.SearchMemoriesResponse(
            results=page, arms=arms_run, degraded=degraded, start_time=window_timestamp(start),
            end_time=window_timestamp(end),
            time_window_warning=window.warning, limit=limit, state_filter=state_filter,
            score_filtered_count=score_filtered, has_more=len(results) > want)
        if complete:
            response.total = len(results)
        return response

    async def _llm_rerank(self, tiers: _Tiers, tier: list[Ranked]) -> list[Ranked]:
        """``tier`` with its best ``recall_llm_rerank_top`` in the order the LLM answers for the
        request's question (automem/recall/llm_rerank.py), the rest after them unchanged; names
        ``llm_rerank`` in the response's arms, or in its degraded when no LLM is configured or
        the call failed (``tier`` is then returned as it was)."""
        if self._reranker is None and llm_configured(self.settings):
            self._reranker = LLMReranker(self.settings)
        top = tier[: self.settings.recall_llm_rerank_top]
        order = None
        if self._reranker is not None:
            order = await self._reranker.rerank(" ".join(tiers.request_queries), [tiers.content(r.id) for r in top])
        if order is None:
            tiers.degraded.append("llm_rerank")
            return tier
        tiers.arms_run.append("llm_rerank")
        return [top[i] for i in order] + tier[len(top):]

    async def _lexical(self, queries: list[str], scope: str, filters: Filters, read: ReadAt, n_cand: int,
                       out: dict[str, float], extra: dict[int, float] | None = None, *, sparse: bool = True,
                       then: asyncio.Future | None = None) -> bool:
        """Lexical arm: BM25 over the memories' sparse vectors (stemmed terms, stop words
        removed; measured far better than FalkorDB's full-text score, docs/benchmarks.md).
        Memories not yet embedded are scored by the share of query terms they contain, times
        the best BM25 score, so a memory is recallable the moment its store is acknowledged.
        They are read through the ``embedding_status`` index (none, normally); only when more
        than :data:`UNEMBEDDED_SCAN_MAX` wait for their embedding does FalkorDB's full-text index
        narrow them down first (it cost ~16 ms on every recall, issue 10), and the sparse hits
        are looked up among them in the same query (``unembedded_among``).

        A memory whose content was edited waits for its embedding too (the PATCH set
        ``embedding_status`` back to PENDING), while its sparse vector still holds the old
        text: its sparse hits are dropped and its current text is scored as a memory not yet
        embedded is, so from the moment the edit is acknowledged the old text's words no longer
        match it and the new text's do (the dense arm's hits: ``_Tiers._rank``). No extra
        round trip: the waiting ids are those the lookup above reads anyway. A memory whose
        tags, event time or state were edited (``embedding_status`` PAYLOAD_PENDING,
        automem/ingest/logic.py ``mark_payload_behind``) is read with them: its vectors are
        current, but the payload the searches filter on is not, so when a search's filter left
        it out its sparse vector is searched alone by id, with no payload filter (the graph's
        fields decide the filters, ``_Tiers._rank``); the dense arm does not see it until
        enrichment has rewritten the payload.

        At a past ``known_at`` the memories deleted since (their vector points went with the
        delete) are scored the same way, on the text believed then (at most
        :data:`DELETED_SCAN_MAX`, the latest deleted first): a ranked recall at that time
        missed them although a tag listing at it showed them. So are the memories whose
        content was edited since (at most :data:`EDITED_SCAN_MAX`, the latest edited first):
        their sparse hits (today's text) are dropped and the text believed then is scored, so
        a word only today's text holds no longer matches the version ranked then, and a word
        only the text then held does (break-it review; the dense arm's hits: ``_Tiers._rank``).
        ``then``: the future of both sets, each memory with the terms of its text believed
        then (:meth:`_believed_then`, started once per request by the caller, awaited after
        the sparse search; None at the default ``known_at``, which reads nothing more).
        Beyond the bounds, the memories deleted or edited longest ago are missed or scored by
        today's text, as before.

        ``extra`` (term index -> weight) joins every query's sparse vector (lexical feedback,
        ``_Tiers._feedback``). With the vector store late or down (``sparse`` False, or its
        sparse search raising :class:`~automem.common.errors.Unavailable`), FalkorDB's
        full-text index (over the current content) scores every memory instead. Scores go
        into ``out`` (memory id -> best score over ``queries``). Returns whether a search
        returned ``n_cand`` hits (a larger pool could hold more)."""
        backlog: list[tuple[str, str]] | None = None
        waiting: set[str] = set()  # ids of the backlog, when it was read whole
        believed: dict[str, set[str]] | None = None  # ``then``'s result
        more = False
        sparse = sparse and self.vectors is not None
        for q in queries:
            terms = analyze(q)
            hits: list[tuple[str, float]] = []
            if sparse and terms:
                weights = bm25_query_weights(terms)
                for k, v in (extra or {}).items():
                    weights[k] = weights.get(k, 0.0) + v
                keys = sorted(weights)
                flt = arm_filter(filters, read)
                try:
                    hits = await self.vectors.search_sparse(keys, [weights[k] for k in keys], n_cand, flt)
                except Unavailable as exc:
                    log.warning("sparse arm skipped: %s", exc, extra={"scope": scope})
                    sparse, hits = False, []
                more = more or len(hits) >= n_cand
            if then is not None and believed is None:
                believed = await then
            if self.vectors is not None and not sparse:
                ft = fulltext_query(q)
                found = await self.graph.memories.fulltext(ft, scope, n_cand) if ft else []
                more = more or len(found) >= n_cand
                for mid, score in found:
                    out[mid] = max(score, out.get(mid, 0.0))
                continue
            if backlog is None:
                backlog = await self.graph.memories.unembedded(scope, UNEMBEDDED_SCAN_MAX + 1)
                if len(backlog) <= UNEMBEDDED_SCAN_MAX:
                    waiting = {mid for mid, _, embedded in backlog if not embedded}
            if len(backlog) <= UNEMBEDDED_SCAN_MAX:
                stale = waiting
                pending = backlog
            else:
                ft = fulltext_query(q)
                found = [mid for mid, _ in await self.graph.memories.fulltext(ft, scope, n_cand)] if ft else []
                more = more or len(found) >= n_cand
                lookup = [*(mid for mid, _ in hits), *(mid for mid in found if mid not in out)]
                pending = await self.graph.memories.unembedded_among(lookup, scope) if lookup else []
                stale = {mid for mid, _, embedded in pending if not embedded}
            for mid, score in hits:
                # Else: its sparse vector holds the content before an edit, or (at a past
                # known_at, ``then``) a text written after that time.
                if mid not in stale and not (believed and mid in believed):
                    out[mid] = max(score, out.get(mid, 0.0))
            # A memory whose payload lags an edit of its tags, event time or state keeps its
            # hit when the search's filter let it through; when it did not, its vector (which
            # holds its current text) is searched alone, by id, with no payload filter (the
            # graph's fields decide the filters, ``_Tiers._rank``).
            lagging = [mid for mid, _, embedded in pending
                       if embedded and mid not in out and not (believed and mid in believed)]
            if lagging and sparse and terms:
                try:
                    for mid, score in await self.vectors.search_sparse(
                            keys, [weights[k] for k in keys], len(lagging), VectorFilter(scope=scope, ids=lagging)):
                        out[mid] = max(score, out.get(mid, 0.0))
                except Unavailable as exc:
                    log.warning("sparse search of lagging payloads skipped: %s", exc, extra={"scope": scope})
            scored = [(mid, set(analyze(content))) for mid, content, embedded in pending
                      if not embedded and mid not in out and not (believed and mid in believed)]
            if believed:  # deleted or edited since known_at: the text believed then
                scored += [(mid, words) for mid, words in believed.items() if mid not in out]
            if not scored:
                continue
            best = max(out.values(), default=1.0)
            wanted = set(terms)
            for mid, words in scored:
                share = len(wanted & words) / max(len(wanted), 1)
                if share:
                    out[mid] = max(out.get(mid, 0.0), share * best)
        return more

    async def _believed_then(self, scope: str, read: ReadAt) -> dict[str, set[str]]:
        """The memories of ``scope`` deleted since ``read.known_at`` (at most
        :data:`DELETED_SCAN_MAX`, the latest deleted first) or whose content was edited since
        then (at most :data:`EDITED_SCAN_MAX`, the latest edited first; automem/graph/versions.py
        ``contents_before_edits``), each with the terms (:func:`analyze`) of its text believed
        then; one without a version by then (created later) is absent. Two reads at once
        (three round trips: the deleted ids, then their versions), tokenised once for every
        query and tier of the request (:meth:`_lexical`)."""
        async def deleted() -> dict[str, str]:
            ids = await self.graph.memories.deleted_since(scope, read.known_at, DELETED_SCAN_MAX)
            return {mid: m.content for mid, m in (await self.graph.versions.at(ids, scope, read.known_at)).items()}

        gone, edited = await asyncio.gather(
            deleted(), self.graph.versions.contents_before_edits(scope, read.known_at, EDITED_SCAN_MAX))
        return {mid: set(analyze(text)) for mid, text in {**edited, **gone}.items()}

    async def _list_ids(self, filters: Filters, read: ReadAt, limit: int, sort: str) -> list[str]:
        """Ids of the memories matching ``filters`` in list order (newest first by default),
        up to ``limit``.

        Newest-first listings look at time windows reaching back from the newest matching
        memory (read in order from the vector store's payload index) through the
        ``event_time`` index: a window holding ``limit`` matches holds the first ``limit`` of
        all, since every memory outside it is older. Only when :data:`LIST_WINDOWS_DAYS` are
        exhausted, or when the vector store is late or down, does FalkorDB sort the whole scope
        (47-70 ms at 100,000 memories, issue 10)."""
        order = "update_time" if sort.startswith("updated") else "event_time"
        descending = not sort.endswith("_asc")
        states = listed_states(read)
        if read.past:  # the versions believed at known_at (automem/graph/versions.py)
            where, params = filter_where(filters, "v")
            return await self.graph.versions.list_ids_at(where, params, states, read.known_at, limit,
                                                         order=order, descending=descending)
        if order == "event_time" and descending and self.vectors is not None:
            try:
                newest = await self.vectors.newest_event_time(filters.vector_filter(states))
            except Unavailable as exc:  # late or down: FalkorDB sorts the whole scope instead
                log.warning("newest event time skipped: %s", exc)
                newest = None
            for days in LIST_WINDOWS_DAYS if newest is not None else ():
                ids = await self.graph.memories.list_ids(filters, states, limit, since=newest - days * 86400.0)
                if len(ids) >= limit:
                    return ids
        return await self.graph.memories.list_ids(filters, states, limit, order=order, descending=descending)

    async def _expansions(self, results: list[recall_service_pb2.ScoredMemory], offset: int, limit: int,
                          scope: str, read: ReadAt, filters: Filters,
                          request: Any) -> list[recall_service_pb2.ScoredMemory]:
        """The expansions of the page ``results[offset:offset+limit]``: memories linked to its
        top ``relation_limit`` hits (``match_type="relation"``, with ``expand_relations``),
        then memories mentioning an entity they mention (``match_type="entity"``, with
        ``expand_entities``), each kind up to ``expansion_limit`` counted after the filters
        (AutoMem's order: a neighbour outside ``filters`` or under the expand_min_* bounds
        takes no place), a memory once.

        No page repeats what the reader saw: a result up to the page's end, or an expansion of
        an earlier page. The earlier pages (stepping back from ``offset`` by ``limit``, at most
        :data:`EXPANSION_PAGES_MAX`) have their expansions worked out again, in order, from
        the same reads (one neighbour query, one co-mention query, one hydration for them
        all), so a memory none of them showed still comes (excluding every neighbour of an
        earlier result hid such memories for good: break-it review). Scores: the seed's
        score x relation weight x the edge strength (at least 0.1), or x 0.5 per shared
        entity (at most 1)."""
        from automem.common.model import AUTHORABLE_RELATIONS

        ends = list(range(offset, 0, -limit))[:EXPANSION_PAGES_MAX][::-1]  # earlier pages' ends
        pages = [(max(end - limit, 0), end) for end in ends] + [(offset, offset + limit)]
        seeds_of = [[r.memory.id for r in results[a:b][: request.relation_limit or 5]] for a, b in pages]
        seeds = [i for ids in seeds_of for i in ids]
        score_of = {r.memory.id: r.score for r in results}
        edges = await self.graph.relations.neighbours(seeds, AUTHORABLE_RELATIONS + ("SIMILAR_TO", "DISCOVERED"),
                                                      scope, read.known_at if read.past else None
                                                      ) if request.expand_relations else []
        mentions = await self.graph.entities.co_mentioned(seeds, scope) if request.expand_entities else []
        linked: dict[str, list[tuple[str, str, float]]] = {}
        for seed, rel, other, strength in edges:
            linked.setdefault(seed, []).append((other, rel, strength))
        for row in linked.values():  # strongest first, then by id: every page reads one order
            row.sort(key=lambda e: (-e[2], e[0], e[1]))
        shared_with: dict[str, list[tuple[str, int]]] = {}
        for seed, other, shared in mentions:
            shared_with.setdefault(seed, []).append((other, shared))
        candidates = list(dict.fromkeys([e[2] for e in edges] + [m[1] for m in mentions]))
        found = await hydrate_at(self.graph, candidates, scope, read)
        mems = [found[i] for i in candidates if i in found]
        current = {m.id: res for m, res in zip(mems, await resolve(self.graph, mems, scope, read), strict=True)}
        weight, cap = self.settings.search_weight_relation, request.expansion_limit or 25

        def admit(other: str, taken: set[str]) -> Any:
            res = current.get(other)
            if (other in taken or res is None or res.memory.id in taken
                    or res.memory.importance < request.expand_min_importance or not filters.matches(res.memory)):
                return None
            taken.update((other, res.memory.id))
            return res

        taken: set[str] = set()
        out: list[recall_service_pb2.ScoredMemory] = []
        for (_start, end), page_seeds in zip(pages, seeds_of, strict=True):
            taken.update(r.memory.id for r in results[:end])
            out, relations = [], 0
            for seed in page_seeds if request.expand_relations else ():
                for other, rel, strength in linked.get(seed, ()):
                    if relations >= cap:
                        break
                    if strength < request.expand_min_strength or (res := admit(other, taken)) is None:
                        continue
                    relations += 1
                    score = score_of.get(seed, 0.0) * weight * max(strength, 0.1)
                    out.append(recall_service_pb2.ScoredMemory(
                        memory=res.memory, score=score, final_score=score, match_type="relation",
                        score_components={"relation": score}, relation_type=rel, replaces_id=res.replaces_id,
                        relation_from=seed, relation_strength=strength))
            best: dict[str, float] = {}
            for seed in page_seeds if request.expand_entities else ():
                for other, shared in shared_with.get(seed, ()):
                    score = score_of.get(seed, 0.0) * weight * min(0.5 * shared, 1.0)
                    best[other] = max(best.get(other, 0.0), score)
            entities = 0
            for other in sorted(best, key=lambda i: (-best[i], i)):
                if entities >= cap:
                    break
                if (res := admit(other, taken)) is None:
                    continue
                entities += 1
                out.append(recall_service_pb2.ScoredMemory(
                    memory=res.memory, score=best[other], final_score=best[other], match_type="entity",
                    score_components={"entity": best[other]}, replaces_id=res.replaces_id))
        return out

    # --- other reads ---------------------------------------------------------------

    async def GetMemory(self, request, context):
        """One memory by id through the state pass: a non-current one comes back with its
        state and window, ``is_current`` false and the current head's id. NOT_FOUND naming
        ``id`` when absent (never stored in the scope, or purged), and when DELETED or
        REJECTED unless ``read.state_mode`` is history: a history read returns a DELETED or
        REJECTED memory with that state (``is_current`` false), as ``version`` returns its
        versions, until a purge removes it (DESIGN.md: a tombstone keeps the content for
        audit until purged). Such a read is no access: ``last_access_time`` is not touched.
        A history read answered a REJECTED memory but NOT_FOUND for a DELETED one."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        if request.HasField("version"):
            return await self._get_version(request, scope, read)
        if read.past:  # the version believed at known_at (automem/graph/versions.py)
            memory = (await self.graph.versions.at([request.id], scope, read.known_at)).get(request.id)
            if memory is None and await self.graph.memories.get(request.id, scope) is not None:
                raise NotFound(f"memory {request.id} not found at known_at", field="id")
        else:
            memory = await self.graph.memories.get(request.id, scope)
        withheld = memory is not None and memory.state in WITHHELD_STATES
        if memory is None or (withheld and not read.history):
            raise NotFound(f"memory {request.id} not found", field="id")
        if request.read.HasField("known_at") and not known(memory, read):
            # Not yet recorded at known_at: the service did not know it then.
            raise NotFound(f"memory {request.id} not found at known_at", field="id")
        memory = as_known(memory, read)  # as the service believed it at known_at
        is_current, head = await resolve_one(self.graph, memory, scope, read)
        if is_current and not read.history:
            memory = as_current(memory)  # superseded from a time still to come: in force now
        if request.touch and not read.past and not withheld:
            stamp = now().timestamp()  # millisecond precision, as every time (common/model.py ``to_millis``)
            await self.graph.memories.touch(memory.id, scope, stamp)
            memory.last_access_time.CopyFrom(ts(stamp))
        return recall_service_pb2.GetMemoryResponse(memory=memory, is_current=is_current, current_id=head)

    async def _get_version(self, request, scope: str, read: ReadAt) -> recall_service_pb2.GetMemoryResponse:
        """GetMemory with ``version``: that version's snapshot (automem/graph/versions.py);
        ``is_current`` when it is the memory's current version and that is current under
        ``read``; ``current_id`` the head of a superseded memory's chain, for every version.
        INVALID_ARGUMENT naming ``version`` below 1; NOT_FOUND naming ``id`` when the memory is
        absent (a DELETED one's versions stay readable) and ``version`` when it
        has no such version. INVALID_ARGUMENT naming ``version`` and ``known_at`` when both
        are given: a version is one record of the history, ``known_at`` picks the record
        believed at a time, so together they contradict each other (it answered the version
        and dropped ``known_at``)."""
        if request.version < 1:
            raise InvalidArgument("version: must be at least 1", field="version")
        if request.read.HasField("known_at"):
            raise InvalidArgument("version, known_at: pass one, not both (version=N reads that version; known_at "
                                  "the version the service believed at that time)", field="version")
        current = await self._versioned(request.id, scope)
        row = await self.graph.versions.get(request.id, scope, request.version)
        if row is None:
            raise NotFound(f"version: memory {request.id} has no version {request.version}", field="version")
        # ``current_id``: the head of the memory's chain whichever version is read (an older
        # version of a superseded memory named none, its last version the head).
        current_now, head = await resolve_one(self.graph, current, scope, read)
        is_current = current_now and row.version == current.version
        return recall_service_pb2.GetMemoryResponse(memory=row.memory, is_current=is_current, current_id=head)

    async def _versioned(self, memory_id: str, scope: str) -> Memory:
        """The memory whose versions are read; NOT_FOUND naming ``id`` when absent from the
        scope. A DELETED memory's versions stay readable (only a purge removes history,
        automem/graph/versions.py)."""
        current = await self.graph.memories.get(memory_id, scope)
        if current is None:
            raise NotFound(f"memory {memory_id} not found", field="id")
        return current

    async def ListMemoryVersions(self, request, context):
        """The versions of one memory, oldest first (automem/graph/versions.py), paged as
        AIP-158: ``page_size`` 1..100 (0 = 20), ``page_token`` from ``next_page_token``.
        Each version's ``memory.state`` is the state a current read gives it now, so the
        listing agrees with GetMemory: a SUPERSEDED version of a memory still in force (a
        supersede whose replacement's window begins later) reads ACTIVE
        (automem/common/state.py ``as_read``); ``stored_state`` is the state the version
        stores. INVALID_ARGUMENT naming ``page_size`` or ``page_token``; NOT_FOUND naming ``id``."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        size = request.page_size or 20
        if size < 1 or size > 100:
            raise InvalidArgument("page_size: must be between 1 and 100", field="page_size")
        after = decode_offset_token(request.page_token, f"versions:{request.id}")
        current = await self._versioned(request.id, scope)
        rows = await self.graph.versions.page(request.id, scope, after, size + 1)
        read = ReadAt()
        in_force, _head = await resolve_one(self.graph, current, scope, read)
        response = recall_service_pb2.ListMemoryVersionsResponse(versions=[
            recall_service_pb2.MemoryVersion(version=r.version, record_time=ts(r.recorded_at), actor=r.actor,
                                             changed_fields=r.changed_fields,
                                             memory=as_read(r.memory, in_force, read), stored_state=r.memory.state)
            for r in rows[:size]])
        if len(rows) > size:
            response.next_page_token = encode_offset_token(rows[size - 1].version, f"versions:{request.id}")
        return response

    async def DiffMemoryVersions(self, request, context):
        """The fields of the Memory message that differ between versions ``from_version`` and
        ``to_version`` of one memory (:func:`diff_memories`). INVALID_ARGUMENT naming
        ``from_version`` / ``to_version`` below 1; NOT_FOUND naming ``id`` or the version."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        for name in ("from_version", "to_version"):
            if getattr(request, name) < 1:
                raise InvalidArgument(f"{name}: must be at least 1", field=name)
        await self._versioned(request.id, scope)
        rows = {}
        for name in ("from_version", "to_version"):
            row = await self.graph.versions.get(request.id, scope, getattr(request, name))
            if row is None:
                raise NotFound(f"{name}: memory {request.id} has no version {getattr(request, name)}", field=name)
            rows[name] = row
        return recall_service_pb2.DiffMemoryVersionsResponse(
            from_version=request.from_version, to_version=request.to_version,
            changes=diff_memories(rows["from_version"].memory, rows["to_version"].memory))

    async def ListMemoriesByTag(self, request, context):
        """Current memories with the tags, newest first (event_time, importance, id), paged
        (default 20; above ``by_tag_max_limit`` clamped to it, the applied size returned in
        ``page_size``; :func:`clamp_limit`). Keyset paging with ``page_token`` /
        ``next_page_token`` (pages read the first page's snapshot); ``offset`` skips current
        memories from the start. Indexed: a page costs about the same at 100 or 100,000
        memories under the tag (automem/recall/bytag.py). ``total`` only when known exactly
        (the listing fit in this page, or ``include_total``). Errors: INVALID_ARGUMENT naming
        tags (none, or more than :data:`~automem.common.model.LIST_ITEMS_MAX`), page_size
        (zero or negative), offset, tag_mode, tag_match or page_token."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        check_list_length(request.tags, "tags")
        if not any(t.strip() for t in request.tags):
            raise InvalidArgument("tags: at least one tag is required", field="tags")
        limit = clamp_limit(request.page_size if request.HasField("page_size") else 20,
                            self.settings.by_tag_max_limit, "page_size")
        if request.offset < 0:
            raise InvalidArgument("offset: must not be negative", field="offset")
        filters = Filters.build(scope, list(request.tags),
                                enum_word(recall_service_pb2.TagMode, request.tag_mode, "tag_mode", "any"),
                                enum_word(recall_service_pb2.TagMatch, request.tag_match, "tag_match", "exact"),
                                [], None, None)
        page, token = await list_by_tag(
            self.graph, filters, read, listed_states(read), limit=limit, offset=request.offset,
            page_token=request.page_token, include_total=request.include_total,
            scan_max=self.settings.by_tag_scan_max,
            explicit_as_of=read.as_of if request.read.HasField("as_of") else None,
            explicit_known_at=read.known_at if request.read.HasField("known_at") else None)
        response = recall_service_pb2.ListMemoriesByTagResponse(
            memories=page.memories, has_more=page.has_more, next_page_token=token, page_size=limit)
        if page.total is not None:
            response.total = page.total
        return response

    async def StartupRecall(self, request, context):
        """AutoMem's startup recall: critical lessons (tags critical, lesson, ai-assistant;
        by importance; up to 10) and system rules (tags system, memory-recall; up to 5),
        current memories only."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        out = []
        for tags, limit in ((["critical", "lesson", "ai-assistant"], 10), (["system", "memory-recall"], 5)):
            filters = Filters.build(scope, tags, "any", "exact", [], None, None)
            if read.past:  # the versions believed at known_at carry the tags
                where, params = filter_where(filters, "v")
                ids = await self.graph.versions.list_ids_at(where, params, listed_states(read), read.known_at,
                                                            STARTUP_PAST_MAX)
                believed = await hydrate_at(self.graph, ids, scope, read)
                memories = sorted(believed.values(),
                                  key=lambda m: (-m.importance, -first_epoch(m, "event_time", default=0.0), m.id))[:200]
            else:
                memories = await self.graph.memories.most_important(filters, listed_states(read), 200)
            current = [r.memory for r in await resolve(self.graph, memories, scope, read) if r is not None]
            out.append(current[:limit])
        return recall_service_pb2.StartupRecallResponse(critical_lessons=out[0], system_rules=out[1])

    async def ListRelatedMemories(self, request, context):
        """Neighbours along typed edges up to ``max_depth`` (1..3) hops, through the state
        pass, one entry per neighbour with the type and strength of the edge that reached it:
        a superseded neighbour is shown as the head of its chain with ``replaces_id`` naming
        the neighbour (the edge's real end; it reported the head under the neighbour's edge
        with nothing saying so), and the head is listed again for an edge of its own; a
        neighbour withheld, or replaced by the memory asked about, is left out. Nearest first
        (then strongest edge, type, id), paged (``page_size`` 1..200,
        default 20; ``page_token`` /
        ``next_page_token``, AIP-158). NOT_FOUND when the memory is absent in the scope;
        INVALID_ARGUMENT naming max_depth, page_size or page_token."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        read = read_at(request.read)
        depth = request.max_depth or 1
        if depth < 1 or depth > 3:
            raise InvalidArgument("max_depth: must be between 1 and 3", field="max_depth")
        limit = request.page_size or 20
        if limit < 1 or limit > 200:
            raise InvalidArgument("page_size: must be between 1 and 200", field="page_size")
        skip = decode_offset_token(request.page_token, request.id)
        from automem.common.model import AUTHORABLE_RELATIONS, SYSTEM_RELATIONS

        types = [t.strip().upper() for t in request.relationship_types if t.strip()] or list(
            AUTHORABLE_RELATIONS + SYSTEM_RELATIONS)
        bad = [t for t in types if t not in AUTHORABLE_RELATIONS + SYSTEM_RELATIONS]
        if bad:
            raise InvalidArgument(f"relationship_types: unknown {', '.join(bad)}", field="relationship_types")
        start = (await hydrate_at(self.graph, [request.id], scope, read)).get(request.id)
        if start is None or start.state == memory_pb2.MEMORY_STATE_DELETED:
            raise NotFound(f"memory {request.id} not found", field="id")
        seen = {start.id}
        frontier = [start.id]
        found: list[tuple[str, str, float, int]] = []
        for level in range(1, depth + 1):
            edges = await self.graph.relations.neighbours(frontier, types, scope, read.known_at if read.past else None)
            frontier = []
            # A stable order, so pages follow one another: strongest edge first, then type, id.
            for _seed, rel, other, strength in sorted(edges, key=lambda e: (-e[3], e[1], e[2])):
                if other in seen:
                    continue
                seen.add(other)
                frontier.append(other)
                found.append((other, rel, strength, level))
        memories = await hydrate_at(self.graph, [f[0] for f in found], scope, read)
        mems = [memories[f[0]] for f in found if f[0] in memories]
        meta = {f[0]: f for f in found}
        # Each neighbour its own entry (dedupe=False): two neighbours replaced by one head, or
        # a neighbour replaced by another neighbour, were one entry under the first edge's type,
        # and the other edges vanished (break-it review: a1's INVALIDATED_BY edge to a2 went
        # missing behind a3's PRECEDED_BY).
        resolved = await resolve(self.graph, mems, scope, read, dedupe=False)
        out = []
        for m, res in zip(mems, resolved, strict=True):
            if res is None or res.memory.id == start.id:
                continue
            _id, rel, strength, level = meta[m.id]
            out.append(recall_service_pb2.RelatedMemory(memory=res.memory, relation_type=rel, strength=strength,
                                                        depth=level, replaces_id=res.replaces_id))
        following = skip + limit
        return recall_service_pb2.ListRelatedMemoriesResponse(
            related=out[skip:following],
            next_page_token=encode_offset_token(following, request.id) if len(out) > following else "")

    @long_running
    async def AnalyzeMemories(self, request, context):
        """Type and state counts, average confidence and importance, and the most frequent
        entity and user tags of the caller's scope (AutoMem's GET /analyze; entity frequency
        from enrichment's ``entity_tags``); AutoMem's analytics: average confidence per type,
        patterns (MetaPatterns), PREFERS_OVER preferences, counts per UTC hour and the
        confidence distribution (automem/graph/memories.py ``Memories.analyze``; AutoMem's
        automem/api/recall.py ``analyze_memories``). INVALID_ARGUMENT when ``top`` is outside 1..200."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        top = request.top if request.HasField("top") else 20
        if top < 1 or top > 200:
            raise InvalidArgument("top: must be between 1 and 200", field="top")
        counts = await self.graph.memories.analyze(scope, top)
        states, types, entities, tags = counts.states, counts.types, counts.entities, counts.tags
        count, confidence, importance = counts.averages[0] if counts.averages else (0, 0.0, 0.0)
        low, medium, high = counts.confidence[0] if counts.confidence else (0, 0, 0)
        return recall_service_pb2.AnalyzeMemoriesResponse(
            memory_count=int(count or 0), type_counts={t or "": int(n) for t, n in types},
            state_counts={st or "": int(n) for st, n in states},
            average_confidence=float(confidence or 0.0), average_importance=float(importance or 0.0),
            top_entities=[recall_service_pb2.NamedCount(name=t, count=int(n)) for t, n in entities],
            top_tags=[recall_service_pb2.NamedCount(name=t, count=int(n)) for t, n in tags],
            type_average_confidence={t or "": float(c or 0.0) for t, c in counts.type_confidence},
            patterns=[recall_service_pb2.PatternSummary(memory_id=i, description=c or "", confidence=float(f or 0.0),
                                                        observations=int(n)) for i, c, f, n in counts.patterns],
            preferences=[recall_service_pb2.PreferenceSummary(prefers=a or "", over=b or "", context=r or "",
                                                              strength=float(s or 0.0))
                         for a, b, r, s in counts.preferences],
            hours=[recall_service_pb2.HourSummary(hour=int(h), count=int(n), average_importance=float(i or 0.0))
                   for h, n, i in counts.hours if h is not None],
            confidence_distribution=recall_service_pb2.ConfidenceDistribution(
                low=int(low or 0), medium=int(medium or 0), high=int(high or 0)))

    async def WhoAmI(self, request, context):
        """The caller's principal and the scope its requests act on. The interceptor has
        checked the key (UNAUTHENTICATED); :func:`resolve_scope` checks the requested scope
        (PERMISSION_DENIED, INVALID_ARGUMENT). Reads no store: the gateway's credentials check."""
        principal = current_principal()
        scope = resolve_scope(request.scope)
        return recall_service_pb2.WhoAmIResponse(principal=principal.name, role=principal.role,
                                                 scopes=list(principal.scopes), scope=scope,
                                                 require_review=review_required(principal))

    async def GetStats(self, request, context):
        """Counts and connectivity for /health (no key needed beyond reader).

        The graph's part (PING, then the memory count) and the vector store's part (count,
        dimension) run concurrently, each within :data:`STATS_STORE_SECONDS`; a part that
        fails or takes longer is reported as not connected with count 0, the other still
        answered. So a stalled FalkorDB (SIGSTOP) answers in about that bound with the graph
        down and the vectors up — it made the whole answer late before, past the gateway's
        health deadline, and /health then reported every store down (break-it review) — and
        an embedded shard holding its reads for the 2-3 s of an index swap at 100k memories
        (automem/vectors/edge.py ``build_index``) leaves the graph's part answered
        (docs/benchmarks.md). ``restore_start_time`` is set while the graph holds the marker
        of a restore that did not finish (automem/common/backup.py ``restore_records``): the
        graph then holds part of a backup, which /health reports as degraded."""
        async def graph_part() -> tuple[int, float | None]:
            if not await self.graph.ping():
                raise Unavailable("graph store did not answer PING")
            count = await self.graph.memories.count(states=["ACTIVE", "SUPERSEDED", "PENDING_REVIEW", "ARCHIVED"])
            return count, await self.graph.dump.restore_started()

        async def vector_part() -> tuple[int, int]:
            return await self.vectors.count(), await self.vectors.dimension() or 0

        async def bounded(part: Any) -> Any:
            try:
                return await asyncio.wait_for(part, STATS_STORE_SECONDS)
            except Exception:  # noqa: BLE001 - late or failed: reported as disconnected
                return None

        vector_answer = None
        if self.vectors is not None:
            graph_answer, vector_answer = await asyncio.gather(bounded(graph_part()), bounded(vector_part()))
        else:
            graph_answer = await bounded(graph_part())
        vector_count, dims = vector_answer or (0, 0)
        memory_count, restore_started = graph_answer or (0, None)
        answer = recall_service_pb2.GetStatsResponse(
            memory_count=memory_count, vector_count=vector_count, graph_connected=graph_answer is not None,
            vectors_connected=vector_answer is not None, vectors_enabled=self.vectors is not None,
            vector_dimensions=dims, server_restarts=self.server_restarts)
        if restore_started is not None:
            answer.restore_start_time.CopyFrom(ts(restore_started))
        return answer
