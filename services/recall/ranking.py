"""Recall ranking: fuse the arms' scores with AutoMem's metadata components.

final = Σ weight_arm · normalised arm score          (vector, keyword)
      + neighbour lending                            (time-adjacent hits, see below)
      + tag · context-tag overlap + exact · (query text contained in content)
      + importance · importance + confidence · confidence + recency · recency decay

* Arm normalisation: each arm's scores are divided by the arm's best score in this query
  (so both arms live in 0..1 and a query's best lexical hit scores 1).
* Neighbour lending: a memory gains ``neighbour`` × the best base score of its previous and
  next memory in time within the same scope and filters (the PRECEDED_BY neighbourhood);
  conversational evidence is often split over adjacent turns.
* Recency: linear decay to 0 over ``recency_window_days`` (AutoMem: 180 days), applied only
  when ``recency_bias`` is "on", or "auto" with an empty query.
* Weights come from settings (AutoMem's defaults: vector 0.35, keyword 0.35, tag 0.2,
  exact 0.2, importance 0.1, recency 0.1, confidence 0.05); the neighbour share and the
  arm weights' defaults are measured on LoCoMo (docs/benchmarks.md).
* Ties order newest first (AutoMem).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.common.model import Memory, epoch
from services.common.settings import Settings


@dataclass
class Candidate:
    """One hydrated candidate with its raw arm scores and time neighbours."""

    id: str
    arm_scores: dict[str, float]
    memory: Memory
    prev_id: str | None = None
    next_id: str | None = None


@dataclass
class Ranked:
    """A ranked result: score, the arm that contributed most, and every component."""

    id: str
    score: float
    match_type: str
    score_components: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoreWeights:
    """Weights of the score components (see the module docstring for their sources)."""

    vector: float = 0.35
    keyword: float = 0.35
    tag: float = 0.2
    exact: float = 0.2
    importance: float = 0.1
    recency: float = 0.1
    confidence: float = 0.05
    neighbour: float = 0.3
    recency_window_days: float = 180.0

    @classmethod
    def from_settings(cls, s: Settings) -> ScoreWeights:
        """The weights held in settings."""
        return cls(vector=s.search_weight_vector, keyword=s.search_weight_keyword, tag=s.search_weight_tag,
                   exact=s.search_weight_exact, importance=s.search_weight_importance,
                   recency=s.search_weight_recency, confidence=s.search_weight_confidence,
                   neighbour=s.search_weight_neighbour, recency_window_days=s.recency_window_days)


def _normalise(scores: dict[str, float]) -> dict[str, float]:
    best = max(scores.values(), default=0.0)
    return {k: (v / best if best > 0 else 0.0) for k, v in scores.items()}


def rank(candidates: list[Candidate], *, weights: ScoreWeights, query: str = "", context_tags: list[str] | None = None,
         priority_ids: set[str] | None = None, now: float = 0.0, recency_bias: str = "auto") -> list[Ranked]:
    """Rank ``candidates`` best first (see the module docstring for the formula)."""
    arms = sorted({a for c in candidates for a in c.arm_scores})
    normed = {a: _normalise({c.id: c.arm_scores[a] for c in candidates if a in c.arm_scores}) for a in arms}
    arm_weight = {"vector": weights.vector, "keyword": weights.keyword}
    base: dict[str, float] = {}
    comps: dict[str, dict[str, float]] = {}
    for c in candidates:
        comp = {a: arm_weight.get(a, 0.0) * normed[a].get(c.id, 0.0) for a in arms}
        comps[c.id] = comp
        base[c.id] = sum(comp.values())
    ctx = {t.lower() for t in (context_tags or [])}
    q = query.strip().lower()
    use_recency = recency_bias == "on" or (recency_bias == "auto" and not q)
    window = max(weights.recency_window_days, 1e-9) * 86400.0
    out: list[Ranked] = []
    for c in candidates:
        comp = comps[c.id]
        neighbours = [base[n] for n in (c.prev_id, c.next_id) if n and n in base]
        if weights.neighbour and neighbours:
            comp["neighbour"] = weights.neighbour * max(neighbours)
        m = c.memory
        if ctx:
            have = {t.lower() for t in m.tags}
            comp["tag"] = weights.tag * len(ctx & have) / len(ctx)
        if q and len(q) > 3 and q in m.content.lower():
            comp["exact"] = weights.exact
        comp["importance"] = weights.importance * m.importance
        comp["confidence"] = weights.confidence * m.confidence
        if use_recency and now:
            age = max(0.0, now - (epoch(m, "event_time") or epoch(m, "create_time") or now))
            comp["recency"] = weights.recency * max(0.0, 1.0 - age / window)
        if priority_ids and c.id in priority_ids:
            comp["priority"] = 1.0
        arm_parts = {a: comp.get(a, 0.0) for a in ("vector", "keyword", "neighbour") if comp.get(a, 0.0) > 0}
        match_type = max(arm_parts, key=arm_parts.get) if arm_parts else ("tag" if not q else "metadata")
        out.append(Ranked(c.id, round(sum(comp.values()), 6), match_type,
                          {k: round(v, 6) for k, v in comp.items()}))
    times = {c.id: epoch(c.memory, "event_time") or 0.0 for c in candidates}
    out.sort(key=lambda r: (-r.score, -times[r.id]))
    return out
