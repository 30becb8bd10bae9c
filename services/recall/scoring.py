"""Recall scoring (draft, being tuned in bench/retrieval_lab.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Candidate:
    id: str
    arm_scores: dict[str, float]
    content: str = ""
    timestamp: str = ""
    prev_id: str | None = None
    order: int = 0
    tags: list[str] = field(default_factory=list)


@dataclass
class Ranked:
    id: str
    score: float
    score_components: dict[str, float]


DEFAULT_WEIGHTS = {"vector": 0.25, "vector_ctx": 0.25, "lexical": 0.5}


def normalise(scores: dict[str, float], how: str = "max") -> dict[str, float]:
    if not scores:
        return {}
    vals = list(scores.values())
    hi, lo = max(vals), min(vals)
    if how == "minmax":
        span = hi - lo
        return {k: ((v - lo) / span if span > 0 else 1.0) for k, v in scores.items()}
    if how == "raw":
        return dict(scores)
    return {k: (v / hi if hi > 0 else 0.0) for k, v in scores.items()}


def rank(query, cands, *, limit=20, weights=None, norm="max", fusion="sum", neighbour=0.3,
         nb_dir="both", rrf_k=60, norms=None):
    weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
    arms = sorted({a for c in cands for a in c.arm_scores})
    normed = {}
    for a in arms:
        sc = {c.id: c.arm_scores[a] for c in cands if a in c.arm_scores}
        if fusion == "rrf":
            order = sorted(sc, key=lambda i: -sc[i])
            normed[a] = {i: 1.0 / (rrf_k + r + 1) for r, i in enumerate(order)}
        else:
            normed[a] = normalise(sc, (norms or {}).get(a, norm))
    base = {}
    comps = {}
    for c in cands:
        comp = {a: weights.get(a, 0.0) * normed[a].get(c.id, 0.0) for a in arms}
        comps[c.id] = comp
        base[c.id] = sum(comp.values())
    nxt = {c.prev_id: c.id for c in cands if c.prev_id}
    prev = {c.id: c.prev_id for c in cands}
    final = {}
    for c in cands:
        lend = 0.0
        if neighbour:
            nb = []
            if nb_dir in ("both", "fwd"):
                p = prev.get(c.id)
                if p in base:
                    nb.append(base[p])
            if nb_dir in ("both", "back"):
                n = nxt.get(c.id)
                if n in base:
                    nb.append(base[n])
            lend = neighbour * max(nb) if nb else 0.0
        comps[c.id]["neighbour"] = lend
        final[c.id] = base[c.id] + lend
    order = sorted(cands, key=lambda c: (-final[c.id], c.order))
    return [Ranked(c.id, final[c.id], comps[c.id]) for c in order[:limit]]
