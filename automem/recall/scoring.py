"""Recall scoring: fuse the arms' candidates into one ranking. Pure functions, no I/O.

The recall path (automem/recall) gathers candidates from its arms, hydrates them from the
graph and calls :func:`rank`. The recipe and every default below were chosen on LoCoMo with
bench/retrieval_lab.py and scored by the LoCoMo referee (located by bench/locomo_files.py);
categories 1-4, 383 questions, evidence recall@10 / MRR:

====================================================  ==========  =====
method                                                recall@10   MRR
====================================================  ==========  =====
BM25 (rank_bm25, the referee's reference)             0.580       0.427
MiniLM cosine alone                                   0.509       0.313
RRF(k=60) of BM25 and MiniLM (reference)              0.574       0.375
our BM25: stop words + Porter stem                    0.635       0.490
  + previous turn's terms at weight 0.5               0.713       0.495
**this recipe** (0.3 vector + 0.7 lexical, max-norm,  **0.733**   **0.527**
neighbour 0.15)
  same, without the neighbour expansion               0.738       0.524
  same, without the previous turn in BM25             0.689       0.516
  same, weights 0.5 / 0.5                             0.710       0.523
  same, RRF instead of the weighted sum               0.720       0.488
  same, WordLlama instead of MiniLM                   0.695       0.511
  FalkorDB full-text index instead of our BM25        0.093       0.050 (alone)
====================================================  ==========  =====

The recipe:

1. **Arms** (the caller's job): ``vector`` = cosine of the query's MiniLM embedding with each
   memory's content embedding, top :data:`VECTOR_CANDIDATES` in the scope; ``lexical`` = BM25
   over the memory's analysed terms plus its PRECEDED_BY neighbour's at weight 0.5
   (:func:`automem.common.text.bm25_doc_weights`; Qdrant sparse vectors with the IDF
   modifier), top :data:`LEXICAL_CANDIDATES` in the scope. A candidate missing from an arm
   scores 0 there.
2. **Normalise** each arm by its maximum over the candidates (``score / max``; negative
   scores clamp to 0), so the best hit of each arm is 1.0 whatever the arm's scale.
3. **Fuse** by weighted sum, :data:`DEFAULT_WEIGHTS`.
4. **Neighbour expansion**: each candidate gains :data:`NEIGHBOUR_FRACTION` times the larger
   fused score of its time-adjacent candidates (its PRECEDED_BY predecessor and successor,
   when they are candidates too).
5. **Sort** by the final score, ties by ``order`` (earlier first), then id.

Weights were tuned on conv-26 and checked on conv-30/conv-41 (recall@10 0.748 / 0.720 /
0.725; MRR 0.499 / 0.551 / 0.542); the optimum is flat: vector weight 0.2-0.4 with
neighbour 0-0.3 all give recall@10 0.711-0.738 (``bench/retrieval_lab.py --sweep``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_WEIGHTS",
    "LEXICAL_CANDIDATES",
    "NEIGHBOUR_FRACTION",
    "RRF_K",
    "VECTOR_CANDIDATES",
    "Candidate",
    "ScoredResult",
    "fuse_rrf",
    "fuse_weighted",
    "neighbour_boost",
    "normalise_by_max",
    "rank",
]

#: Fusion weights per arm. LoCoMo recall@10 / MRR with neighbour 0.15 at vector weight
#: 0.2 / 0.3 / 0.4 / 0.5 (lexical = 1 - vector): 0.737/0.522, 0.733/0.527, 0.727/0.523,
#: 0.710/0.523 (``bench/retrieval_lab.py --sweep``; 0.3 was best on conv-26 alone).
#: Equal weights (AutoMem's 0.35/0.35) are the worst of these.
DEFAULT_WEIGHTS: Mapping[str, float] = {"vector": 0.3, "lexical": 0.7}

#: Fraction of a time-adjacent candidate's fused score lent to a candidate. LoCoMo at vector
#: weight 0.3, fraction 0 / 0.15 / 0.3: recall@5 0.645 / 0.667 / 0.666, recall@10
#: 0.738 / 0.733 / 0.736, recall@20 0.780 / 0.798 / 0.809, MRR 0.524 / 0.527 / 0.531
#: (``--sweep``). A small value: it buys recall@5/@20 at no real cost at @10, and a larger
#: one leans harder on LoCoMo's dialogue structure than general memories may have.
NEIGHBOUR_FRACTION = 0.15

#: Candidates to take from the vector arm (the two arms together stay under the 200
#: hydrated memories a recall may afford). LoCoMo conversations have 369-689 turns.
VECTOR_CANDIDATES = 100
#: Candidates to take from the lexical arm.
LEXICAL_CANDIDATES = 100

#: k of reciprocal rank fusion (Cormack et al. 2009). RRF is kept for comparison only: with
#: the same arms it scored recall@10 0.720 / MRR 0.488 on LoCoMo, below the weighted sum.
RRF_K = 60


@dataclass(frozen=True)
class Candidate:
    """One hydrated candidate memory.

    Attributes:
        id: the memory id.
        arm_scores: raw score per arm that returned it, e.g. ``{"vector": 0.62,
            "lexical": 7.1}`` (cosine in [-1, 1]; BM25 >= 0, unbounded).
        prev_id: id of its PRECEDED_BY neighbour (previous memory of the same scope in time
            order), or None.
        order: tie-breaker, smaller first (e.g. creation time as epoch seconds).
    """

    id: str
    arm_scores: Mapping[str, float]
    prev_id: str | None = None
    order: float = 0.0


@dataclass
class ScoredResult:
    """A ranked memory: ``score`` = sum of ``score_components`` (one per weighted arm, plus
    ``neighbour``)."""

    id: str
    score: float
    score_components: dict[str, float] = field(default_factory=dict)


def normalise_by_max(scores: Mapping[str, float]) -> dict[str, float]:
    """``{id: max(score, 0) / max(scores)}``; all zeros when the maximum is <= 0.

    ``{"a": 2.0, "b": 1.0, "c": -0.5}`` -> ``{"a": 1.0, "b": 0.5, "c": 0.0}``.
    """
    if not scores:
        return {}
    hi = max(scores.values())
    if hi <= 0:
        return {k: 0.0 for k in scores}
    return {k: max(v, 0.0) / hi for k, v in scores.items()}


def _arm_scores(cands: Sequence[Candidate], arm: str) -> dict[str, float]:
    return {c.id: float(c.arm_scores[arm]) for c in cands if arm in c.arm_scores}


def fuse_arms(
    ids: Sequence[str], arm_scores: Mapping[str, Mapping[str, float]], weights: Mapping[str, float] = DEFAULT_WEIGHTS
) -> dict[str, dict[str, float]]:
    """Per id of ``ids``, ``{arm: weight * normalise_by_max(arm's scores of ids)[id]}`` for every
    weighted arm (0.0 where the arm did not return the id); ``arm_scores`` maps an arm to its
    ``{id: score}``, and may hold ids outside ``ids`` (left out of the normalisation) and arms
    without a weight (ignored).

    ``fuse_arms(["a", "b"], {"vector": {"a": 0.8, "b": 0.4}, "keyword": {"b": 2.0}},
    {"vector": 0.3, "keyword": 0.7})`` -> ``{"a": {"vector": 0.3, "keyword": 0.0},
    "b": {"vector": 0.15, "keyword": 0.7}}``.
    """
    normed = {arm: normalise_by_max({i: float(scores[i]) for i in ids if i in scores})
              for arm in weights if (scores := arm_scores.get(arm)) is not None}
    return {i: {arm: w * normed[arm].get(i, 0.0) if arm in normed else 0.0 for arm, w in weights.items()}
            for i in ids}


def fuse_weighted(
    cands: Sequence[Candidate], weights: Mapping[str, float] = DEFAULT_WEIGHTS
) -> dict[str, dict[str, float]]:
    """Per candidate, ``{arm: weight * normalise_by_max(arm)[id]}`` for every weighted arm
    (0.0 where the arm did not return the candidate). Arms without a weight are ignored."""
    return fuse_arms(list(dict.fromkeys(c.id for c in cands)), {arm: _arm_scores(cands, arm) for arm in weights},
                     weights)


def fuse_rrf(
    cands: Sequence[Candidate], weights: Mapping[str, float] = DEFAULT_WEIGHTS, k: int = RRF_K
) -> dict[str, dict[str, float]]:
    """Weighted reciprocal rank fusion: ``{arm: weight / (k + rank_in_arm)}`` (rank from 1;
    0.0 where absent). Ties within an arm keep the candidates' input order."""
    out: dict[str, dict[str, float]] = {c.id: {arm: 0.0 for arm in weights} for c in cands}
    for arm, w in weights.items():
        sc = _arm_scores(cands, arm)
        for r, cid in enumerate(sorted(sc, key=lambda i: -sc[i]), start=1):
            out[cid][arm] = w / (k + r)
    return out


def neighbour_boost(
    cands: Sequence[Candidate], base: Mapping[str, float], fraction: float = NEIGHBOUR_FRACTION
) -> dict[str, float]:
    """``{id: fraction * max(base[predecessor], base[successor])}`` over the neighbours that
    are candidates (0.0 when neither is). Predecessor = ``prev_id``; successor = the candidate
    whose ``prev_id`` is this id."""
    ids = {c.id for c in cands}
    succ: dict[str, str] = {}
    for c in cands:
        if c.prev_id is not None and c.prev_id in ids:
            succ.setdefault(c.prev_id, c.id)
    out: dict[str, float] = {}
    for c in cands:
        nb = [base[n] for n in (c.prev_id, succ.get(c.id)) if n is not None and n in base]
        out[c.id] = fraction * max(nb) if nb and fraction else 0.0
    return out


def rank(
    cands: Iterable[Candidate],
    *,
    limit: int = 20,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    neighbour_fraction: float = NEIGHBOUR_FRACTION,
    fusion: str = "weighted",
    rrf_k: int = RRF_K,
) -> list[ScoredResult]:
    """Rank candidates (see the module docstring for the recipe and its measurements).

    Args:
        cands: hydrated candidates; a duplicate id keeps its first occurrence.
        limit: results to return (>= 0).
        weights: per-arm fusion weights.
        neighbour_fraction: see :func:`neighbour_boost`; 0 disables it.
        fusion: ``"weighted"`` (max-normalised weighted sum, the default) or ``"rrf"``.
        rrf_k: k for ``fusion="rrf"``.

    Returns:
        At most ``limit`` results, best first, each with ``score_components``: the weighted
        contribution of each arm and ``neighbour``.

    Raises:
        ValueError: unknown ``fusion``.
    """
    seen: dict[str, Candidate] = {}
    for c in cands:
        seen.setdefault(c.id, c)
    cl = list(seen.values())
    if fusion == "weighted":
        comps = fuse_weighted(cl, weights)
    elif fusion == "rrf":
        comps = fuse_rrf(cl, weights, rrf_k)
    else:
        raise ValueError(f"unknown fusion {fusion!r} (expected 'weighted' or 'rrf')")
    base = {cid: sum(v.values()) for cid, v in comps.items()}
    boost = neighbour_boost(cl, base, neighbour_fraction)
    results = []
    for c in cl:
        sc = dict(comps[c.id])
        sc["neighbour"] = boost[c.id]
        results.append((base[c.id] + boost[c.id], c.order, c.id, sc))
    results.sort(key=lambda r: (-r[0], r[1], r[2]))
    return [ScoredResult(cid, s, sc) for s, _, cid, sc in results[: max(limit, 0)]]
