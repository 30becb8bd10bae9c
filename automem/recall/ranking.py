"""Recall ranking: the measured fusion of the arms (automem/recall/scoring.py) plus
AutoMem's metadata components.

final = vector_w · vector/max(vector) + keyword_w · lexical/max(lexical)      (scoring.fuse_weighted)
      + neighbour_w · best fused score of the PRECEDED_BY neighbours          (scoring.neighbour_boost)
      + tag · context-tag overlap + exact · (query text contained in content)
      + type · [the memory's type is one of the request's context types]
      + importance · importance + confidence · confidence + recency · recency decay
      + author · [the query names the memory's author]                      (understanding.py)
      + session · share of the top seeds' score in the memory's time bucket (understanding.session_spread)
      + temporal · [a "when ..." question and the memory states a time]     (understanding.py)

* Arm weights 0.3 / 0.7 and neighbour 0.15 are measured on LoCoMo (scoring.py docstrings,
  docs/benchmarks.md); AutoMem's 0.35 / 0.35 ranked worse there.
* tag 0.2, exact 0.2, importance 0.1, recency 0.1 over 180 days, confidence 0.05 and type
  0.25 (its context-type bonus) are AutoMem's. Recency applies only when ``recency_bias`` is "on", or "auto" with no query.
* author 0.4, session 0.15 (10 seeds), temporal 0.05 are issue 18's, measured on LoCoMo
  conv-26 and checked on conv-30/conv-41 and a synthetic agent-memory set (docs/benchmarks.md
  "Recall quality (issue 18)"); they apply only with a query.
* Every weight is a setting (SEARCH_WEIGHT_*). Ties: the earlier memory first (event time, then
  create time), then the id, so the order is total and the same for every page (issue 12 item 7).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from automem.common.model import CandidateFields
from automem.common.settings import Settings
from automem.common.text import text_key
from automem.recall import scoring, understanding


@dataclass
class Candidate:
    """One candidate: its fields (automem/common/model.py ``CandidateFields``; a whole
    ``Memory`` converts with ``CandidateFields.of``), raw arm scores and time neighbours."""

    id: str
    arm_scores: dict[str, float]
    memory: CandidateFields
    prev_id: str | None = None
    next_id: str | None = None


@dataclass
class Ranked:
    """A ranked result: score (rounded to 6 decimals), the arm that contributed most, and
    every component (``components`` as computed; :attr:`score_components` rounded to 6
    decimals, built when read: a recall reads them for its page only, not for the ~200
    candidates it ranks)."""

    id: str
    score: float
    match_type: str
    components: dict[str, float] = field(default_factory=dict)

    @property
    def score_components(self) -> dict[str, float]:
        """The components rounded to 6 decimals."""
        return {k: round(v, 6) for k, v in self.components.items()}


@dataclass(frozen=True)
class ScoreWeights:
    """Weights of the score components (see the module docstring for their sources)."""

    vector: float = 0.3
    keyword: float = 0.7
    tag: float = 0.2
    exact: float = 0.2
    importance: float = 0.1
    recency: float = 0.1
    confidence: float = 0.05
    neighbour: float = 0.15
    author: float = 0.4
    session: float = 0.15
    temporal: float = 0.05
    context_type: float = 0.25
    session_seeds: int = understanding.SESSION_SEEDS
    recency_window_days: float = 180.0

    @classmethod
    def from_settings(cls, s: Settings) -> ScoreWeights:
        """The weights held in settings."""
        return cls(vector=s.search_weight_vector, keyword=s.search_weight_keyword, tag=s.search_weight_tag,
                   exact=s.search_weight_exact, importance=s.search_weight_importance,
                   recency=s.search_weight_recency, confidence=s.search_weight_confidence,
                   neighbour=s.search_weight_neighbour, author=s.search_weight_author,
                   session=s.search_weight_session, temporal=s.search_weight_temporal,
                   context_type=s.search_weight_context_type,
                   session_seeds=s.search_session_seeds, recency_window_days=s.recency_window_days)


def _day(event_time: float | None, create_time: float | None) -> int | None:
    """The UTC day (days since the epoch) of the event time (epoch seconds), else the create time."""
    t = event_time or create_time
    return int(t // 86400) if t else None


def rank(candidates: list[Candidate], *, weights: ScoreWeights, query: str = "", context_tags: list[str] | None = None,
         priority_ids: set[str] | None = None, now: float = 0.0, recency_bias: str = "auto",
         context_types: frozenset[str] = frozenset()) -> list[Ranked]:
    """Rank ``candidates`` best first (see the module docstring for the formula).
    ``context_types``: canonical type names (``CandidateFields.type``) whose memories gain
    the ``type`` component."""
    times = {c.id: (c.memory.event_time, c.memory.create_time) for c in candidates}
    ordered = sorted(candidates, key=lambda c: (times[c.id][0] or 0.0, times[c.id][1] or 0.0, c.id))
    # The candidates go to scoring's fusion as they are (an id, arm scores keyed by the arms'
    # names here, a prev_id): no per-candidate copy (docs/benchmarks.md, "Recall's graph reads").
    fused = scoring.fuse_weighted(ordered, {"vector": weights.vector, "keyword": weights.keyword})
    base = {cid: sum(parts.values()) for cid, parts in fused.items()}
    boost = scoring.neighbour_boost(ordered, base, weights.neighbour)
    ctx = {text_key(t) for t in (context_tags or [])}
    q = text_key(query.strip())
    use_recency = recency_bias == "on" or (recency_bias == "auto" and not q)
    window = max(weights.recency_window_days, 1e-9) * 86400.0
    position = {c.id: i for i, c in enumerate(ordered)}
    spread: dict[str, float] = {}
    words: frozenset[str] = frozenset()
    temporal = False
    if q:
        if weights.session:
            seed_score = {cid: base[cid] + boost.get(cid, 0.0) for cid in base}
            spread = understanding.session_spread(seed_score, {cid: _day(*t) for cid, t in times.items()},
                                                  weights.session_seeds)
        if weights.author:
            words = understanding.query_words(query)
        temporal = bool(weights.temporal) and understanding.is_temporal_question(query)
    exact = bool(q) and len(q) > 3
    recency = use_recency and bool(now)
    w_tag, w_importance, w_confidence = weights.tag, weights.importance, weights.confidence
    out: list[Ranked] = []
    for c in candidates:
        cid, m = c.id, c.memory
        comp = {a: v for a, v in fused[cid].items() if v}
        if boost.get(cid):
            comp["neighbour"] = boost[cid]
        if ctx:
            comp["tag"] = w_tag * len(ctx & {text_key(t) for t in m.tags}) / len(ctx)
        if context_types and m.type in context_types:
            comp["type"] = weights.context_type
        if exact and q in text_key(m.content):
            comp["exact"] = weights.exact
        if spread.get(cid):
            comp["session"] = weights.session * spread[cid]
        if words:
            author = understanding.author_of(m.content)
            if author and understanding.names_author(words, author):
                comp["author"] = weights.author
        if temporal and understanding.has_time_expression(m.content):
            comp["temporal"] = weights.temporal
        comp["importance"] = w_importance * m.importance
        comp["confidence"] = w_confidence * m.confidence
        if recency:
            event_time, create_time = times[cid]
            age = max(0.0, now - (event_time or create_time or now))
            comp["recency"] = weights.recency * max(0.0, 1.0 - age / window)
        if priority_ids and cid in priority_ids:
            comp["priority"] = 1.0
        # The arm that contributed most (the first of equals), else what ranked it.
        match_type, best = ("tag" if not q else "metadata"), 0.0
        for arm in ("vector", "keyword", "neighbour"):
            part = comp.get(arm, 0.0)
            if part > best:
                match_type, best = arm, part
        out.append(Ranked(cid, round(sum(comp.values()), 6), match_type, comp))
    out.sort(key=lambda r: (-r.score, position[r.id], r.id))
    return out
