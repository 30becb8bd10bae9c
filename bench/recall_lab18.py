"""Issue 18 lab: re-scoring the fused candidate set with structure (entities, time buckets),
query understanding and pseudo-relevance feedback. Offline, on bench/retrieval_lab.py's arms.

    .venv/bin/python bench/recall_lab18.py [--methods a,b]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import re
from datetime import UTC

from automem.recall import scoring as S
from bench import locomo_files
from bench import retrieval_lab as L

AUTHOR = re.compile(r"^([A-Z][\w .'-]{0,40}?):\s")
TEMPORAL_Q = re.compile(r"^\s*(when|what (year|month|day|date|time)|how long|since when)\b", re.IGNORECASE)
TIME_WORDS = re.compile(r"\b(yesterday|today|tonight|tomorrow|ago|last (week|month|year|night|weekend|\w+day)|"
                        r"next (week|month|year|weekend)|this (week|month|year|weekend|morning)|recently|"
                        r"(mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|"
                        r"august|september|october|november|december|(19|20)\d\d)\b", re.IGNORECASE)
ENT_CACHE = L.OUT / "entities_locomo_public.json"  # set per data file in main()


def _ner(convs, f: Path, texts) -> dict[str, list[str]]:
    """Entity tags (the service's NER, automem/enrich/entities.py) of ``texts(cv)`` = [(key,
    text)] for every conversation, cached in ``f``."""
    if f.exists():
        return json.loads(f.read_text())
    from automem.enrich.entities import EntityExtractor

    ex = EntityExtractor()
    out = {}
    for cv in convs:
        rows = texts(cv)
        for (key, _), es in zip(rows, ex.extract_sync([t for _, t in rows]), strict=True):
            out[key] = [e.tag.lower() for e in es]
    f.write_text(json.dumps(out))
    return out


def entities(convs) -> dict[str, list[str]]:
    return _ner(convs, ENT_CACHE, lambda cv: [(m["id"], m["content"]) for m in cv.mems])


def query_entities(convs) -> dict[str, list[str]]:
    return _ner(convs, ENT_CACHE.with_name("q" + ENT_CACHE.name),
                lambda cv: [(q["qid"], q["question"]) for q in cv.qs])


def base_scores(cv, arms, qi, second=None, n2=100):
    V, Lx = S.VECTOR_CANDIDATES, S.LEXICAL_CANDIDATES
    spec = {"arms": {"vector": ("minilm:", V), "lexical": ("qdrant_bm25:", Lx)}}
    cands = L.cand_arrays(cv, arms, qi, spec)
    if second is not None:
        # second round: each arm again, filtered to the memories of ``second`` (index mask)
        have = {c.id: c for c in cands}
        extra = {}
        for arm, (key, _) in spec["arms"].items():
            sc = arms.get(key)[qi]
            idx = [i for i in np.argsort(-sc, kind="stable") if second[i]][:n2]
            for i in idx:
                if sc[i] > 0 or arm == "vector":
                    extra.setdefault(int(i), {})[arm] = float(sc[i])
        for i in extra:
            mid = cv.ids[i]
            if mid in have:
                continue
            # a memory found by the second round keeps the first round's scores of both arms
            full = {arm: float(arms.get(key)[qi][i]) for arm, (key, _) in spec["arms"].items()}
            full = {k: v for k, v in full.items() if v > 0 or k == "vector"}
            cands.append(S.Candidate(id=mid, arm_scores=full,
                                     prev_id=cv.ids[cv.prev[i]] if cv.prev[i] >= 0 else None, order=i))
    ranked = S.rank(cands, limit=10_000)
    return {r.id: r.score for r in ranked}


def method(ENT, QENT, *, spread=0.0, seeds=10, tspread=0.0, person=0.0, mode="sum", temporal=0.0, round2=0, diversity=0.0, idf=True, qent_only=False):
    pos_cache = {}

    def f(cv, arms, qi, q):
        if cv.cid not in pos_cache:
            pos_cache[cv.cid] = {mid: i for i, mid in enumerate(cv.ids)}
        pos = pos_cache[cv.cid]
        second = None
        if round2:
            qtok = set(re.findall(r"[a-z0-9]+", q["question"].lower()))
            # authors of the first round's candidates named in the query
            first = base_scores(cv, arms, qi)
            named = set()
            for i in first:
                m = AUTHOR.match(cv.mems[pos[i]]["content"])
                if m and set(re.findall(r"[a-z0-9]+", m.group(1).lower())) <= qtok:
                    named.add("entity:person:" + m.group(1).strip().lower().replace(" ", "-"))
            if named:
                second = [bool(named & set(ENT.get(mid, ()))) for mid in cv.ids]
        base = base_scores(cv, arms, qi, second, n2=round2)
        ids = list(base)
        order = sorted(ids, key=lambda i: (-base[i], pos[i]))
        top = order[:seeds]
        final = dict(base)
        if spread:
            # entity spreading: seeds lend their score to candidates sharing an entity,
            # weighted by the entity's rarity among the candidates
            df = {}
            for i in ids:
                for e in set(ENT.get(i, ())):
                    df[e] = df.get(e, 0) + 1
            n = len(ids)
            w_e = {}
            for s in top:
                for e in set(ENT.get(s, ())):
                    w = base[s] * (np.log(1 + n / df[e]) if idf else 1.0)
                    w_e[e] = max(w_e.get(e, 0.0), w) if mode == "max" else w_e.get(e, 0.0) + w
            if qent_only:
                qe = set(QENT.get(q["qid"], ()))
                w_e = {e: w for e, w in w_e.items() if e not in qe}
            boost = {i: sum(w_e.get(e, 0.0) for e in set(ENT.get(i, ()))) for i in ids}
            hi = max(boost.values(), default=0) or 1
            for i in ids:
                final[i] += spread * boost[i] / hi
        if tspread:
            # time-bucket (same event time = same session) spreading
            tb = {i: cv.mems[pos[i]]["timestamp"][:10] for i in ids}
            w_t = {}
            for s in top:
                w_t[tb[s]] = w_t.get(tb[s], 0.0) + base[s]
            hi = max(w_t.values(), default=0) or 1
            for i in ids:
                final[i] += tspread * w_t.get(tb[i], 0.0) / hi
        if person and mode in ("author_tok", "author_ner"):
            from automem.enrich.entities import slug
            qtok = set(re.findall(r"[a-z0-9]+", q["question"].lower()))
            for i in ids:
                m = AUTHOR.match(cv.mems[pos[i]]["content"])
                if m and mode == "author_ner" and "entity:person:" + slug(m.group(1)) not in ENT.get(i, ()):
                    continue
                if m and set(re.findall(r"[a-z0-9]+", m.group(1).lower())) <= qtok:
                    final[i] += person
        if temporal and TEMPORAL_Q.match(q["question"]):
            for i in ids:
                if TIME_WORDS.search(cv.mems[pos[i]]["content"]):
                    final[i] += temporal
        if person and mode != "author_tok":
            qp = [e for e in QENT.get(q["qid"], ()) if e.startswith("entity:person:")]
            if qp:
                for i in ids:
                    content = cv.mems[pos[i]]["content"]
                    es = set(ENT.get(i, ()))
                    if mode == "speaker":
                        m = AUTHOR.match(content)
                        hit = bool(m) and ("entity:person:" + m.group(1).strip().lower().replace(" ", "-")) in qp
                    else:
                        hit = bool(es & set(qp))
                    if hit:
                        final[i] += person
        ranked = sorted(ids, key=lambda i: (-final[i], pos[i]))
        if diversity:
            # greedy: each pick costs later candidates of its time bucket ``diversity``
            tb = {i: cv.mems[pos[i]]["timestamp"][:10] for i in ranked[:60]}
            rest, out, used = ranked[:60], [], {}
            while rest:
                best = max(rest, key=lambda i: (final[i] - diversity * used.get(tb[i], 0), -pos[i]))
                out.append(best)
                rest.remove(best)
                used[tb[best]] = used.get(tb[best], 0) + 1
            ranked = out + ranked[60:]
        return ranked
    return f


_STRIPPED: dict[tuple[str, str], object] = {}


def first_round_authors(cv, arms, qi) -> set[str]:
    """The authors of the best 20 memories of each arm for question ``qi`` (as the service's
    author re-query reads them, automem/recall/servicer.py ``REQUERY_SEEDS``)."""
    from automem.recall import understanding as U

    ids = set()
    for k in ("minilm:", "qdrant_bm25:"):
        ids.update(np.argsort(-arms.get(k)[qi], kind="stable")[:20].tolist())
    return {a for i in ids if (a := U.author_of(cv.mems[i]["content"]))}


def requery_arms(cv, arms, requery: str):
    """The arms as the service's author re-query sees them (automem/recall/servicer.py
    ``_author_requery``): per question, the authors of the best 20 of each arm of the first
    round; the question without the names of those it names; both arms ("both") or the
    lexical arm only ("lexical") scored on that. Cached per ``arms`` object (a lab method may
    hand in other questions' or other vectors' arms); ``arms.wrap(other)``, when it has one,
    applies the same change to the re-query's arms."""
    from automem.recall import understanding as U

    key = (cv.cid, requery, id(arms))
    if key in _STRIPPED:
        return _STRIPPED[key]
    stripped = [dict(q, question=U.strip_authors(q["question"], first_round_authors(cv, arms, qi)))
                for qi, q in enumerate(cv.qs)]
    saved = cv.qs
    cv.qs = stripped
    try:
        other = L.Arms(cv, arms.all_convs)
        if hasattr(arms, "wrap"):
            other = arms.wrap(other)
        out = {"qdrant_bm25:": other.get("qdrant_bm25:"),
               "minilm:": other.get("minilm:") if requery == "both" else arms.get("minilm:")}
    finally:
        cv.qs = saved

    class _A:
        def get(self, k):
            return out[k] if k in out else arms.get(k)
    _STRIPPED[key] = _A()
    return _STRIPPED[key]


def service(requery: str = "both", pool: int | None = None, ranked: bool = False, **weights):
    """automem.recall.ranking.rank itself (the service's ranking) over the lab's candidates,
    with ScoreWeights overridden by ``weights`` (e.g. ``author=0``) and the author re-query
    ``requery`` ("both", "lexical", "off"; off whenever the author weight is 0, as in the
    service). ``pool``: candidates per arm (default: the service's 100); ``ranked``: return
    the ``ranking.Ranked`` rows (with scores) instead of ids."""
    from datetime import datetime

    from automem.common.model import CandidateFields, Memory, ts
    from automem.recall import ranking

    W = ranking.ScoreWeights(**weights)
    mem_cache: dict[str, CandidateFields] = {}

    def memory(cv, i):
        m = cv.mems[i]
        if m["id"] not in mem_cache:
            t = datetime.fromisoformat(m["timestamp"]).replace(tzinfo=UTC).timestamp()
            mm = Memory(id=m["id"], content=m["content"], importance=0.5, confidence=0.8)
            mm.event_time.CopyFrom(ts(t))
            mem_cache[m["id"]] = CandidateFields.of(mm)
        return mem_cache[m["id"]]

    def f(cv, arms, qi, q):
        V, Lx = pool or S.VECTOR_CANDIDATES, pool or S.LEXICAL_CANDIDATES
        spec = {"arms": {"vector": ("minilm:", V), "lexical": ("qdrant_bm25:", Lx)}}
        if requery != "off" and W.author:
            arms = requery_arms(cv, arms, requery)
        cands = L.cand_arrays(cv, arms, qi, spec)
        pos = {mid: i for i, mid in enumerate(cv.ids)}
        ids = {c.id for c in cands}
        out = []
        for c in cands:
            i = pos[c.id]
            nxt = cv.ids[i + 1] if i + 1 < len(cv.ids) and cv.ids[i + 1] in ids else None
            prev = c.prev_id if c.prev_id in ids else None
            out.append(ranking.Candidate(id=c.id, arm_scores={("keyword" if a == "lexical" else a): v
                                                              for a, v in c.arm_scores.items()},
                                         memory=memory(cv, i), prev_id=prev, next_id=nxt))
        rows = ranking.rank(out, weights=W, query=q["question"])
        return rows if ranked else [r.id for r in rows]
    return f


SERVICE_ARMS = {
    "service: issue-18 defaults": {},
    "service: before issue 18 (author, session, temporal 0)": {"author": 0, "session": 0, "temporal": 0},
    "service: without author re-query": {"requery": "off"},
    "service: author re-query lexical only": {"requery": "lexical"},
    "service: without author": {"author": 0},
    "service: without session": {"session": 0},
    "service: without temporal": {"temporal": 0},
    "service: author (+ re-query) only": {"session": 0, "temporal": 0},
    "service: session only": {"author": 0, "temporal": 0},
    "service: temporal only": {"author": 0, "session": 0},
}


def main():
    ap = argparse.ArgumentParser()
    locomo_files.add_arguments(ap)
    ap.add_argument("--methods", default="")
    args = ap.parse_args()
    L.EVAL = locomo_files.require_referee(args.referee)
    convs = L.load(locomo_files.require_data(args.data))
    global ENT_CACHE
    ENT_CACHE = L.OUT / f"entities_{Path(args.data).stem}.json"
    ENT = entities(convs)
    QENT = query_entities(convs)
    arms_by = {cv.cid: L.Arms(cv, convs) for cv in convs}
    M = {"base": method(ENT, QENT)}
    for sp in (0.05, 0.1, 0.2):
        for k in (5, 10):
            M[f"ent spread {sp} seeds {k}"] = method(ENT, QENT, spread=sp, seeds=k)
    M["ent spread 0.1 seeds 10 max"] = method(ENT, QENT, spread=0.1, seeds=10, mode="max")
    for t in (0.05, 0.1, 0.2):
        M[f"time spread {t}"] = method(ENT, QENT, tspread=t)
    for p in (0.05, 0.1, 0.2, 0.3):
        M[f"author {p}"] = method(ENT, QENT, person=p, mode="speaker")
        M[f"author {p} + time 0.1"] = method(ENT, QENT, person=p, mode="speaker", tspread=0.1)
    for p in (0.1, 0.2, 0.3):
        M[f"authortok {p} + time 0.1"] = method(ENT, QENT, person=p, mode="author_tok", tspread=0.1)
    for t in (0.03, 0.05, 0.1):
        M[f"authortok 0.2 + time 0.1 + temporal {t}"] = method(ENT, QENT, person=0.2, mode="author_tok", tspread=0.1, temporal=t)
    for n2 in (50, 100, 200):
        M[f"r2 {n2} authortok 0.3 + time 0.1 + temporal 0.05"] = method(ENT, QENT, person=0.3, mode="author_tok", tspread=0.1, temporal=0.05, round2=n2)
    for dv in (0.02, 0.05, 0.1):
        M[f"div {dv} authortok 0.3 + time 0.1 + temporal 0.05"] = method(ENT, QENT, person=0.3, mode="author_tok", tspread=0.1, temporal=0.05, diversity=dv)
    for dv in (0.02, 0.05):
        M[f"div {dv} authortok 0.3 + temporal 0.05"] = method(ENT, QENT, person=0.3, mode="author_tok", temporal=0.05, diversity=dv)
    for p in (0.3, 0.4, 0.5):
        for t in (0.05, 0.1, 0.15):
            M[f"sweep author {p} time {t} temporal 0.05"] = method(ENT, QENT, person=p, mode="author_tok", tspread=t, temporal=0.05)
    M["final author_ner 0.4 time 0.15 temporal 0.05"] = method(ENT, QENT, person=0.4, mode="author_ner", tspread=0.15, temporal=0.05)
    M["final author_tok 0.4 time 0.15 temporal 0.05"] = method(ENT, QENT, person=0.4, mode="author_tok", tspread=0.15, temporal=0.05)
    M["ablate: no author"] = method(ENT, QENT, tspread=0.15, temporal=0.05)
    M["ablate: no session spread"] = method(ENT, QENT, person=0.4, mode="author_ner", temporal=0.05)
    M["ablate: no temporal"] = method(ENT, QENT, person=0.4, mode="author_ner", tspread=0.15)
    M["only author_ner 0.4"] = method(ENT, QENT, person=0.4, mode="author_ner")
    M["only session spread 0.15"] = method(ENT, QENT, tspread=0.15)
    M["only temporal 0.05"] = method(ENT, QENT, temporal=0.05)
    for name, w in SERVICE_ARMS.items():
        M[name] = service(**w)
    run_methods(M, args.methods, convs, arms_by, args.data)


def run_methods(M: dict, methods: str, convs, arms_by, data: Path) -> None:
    """Score each method of ``M`` whose name contains one of the comma-separated ``methods``
    (all when empty) with the referee; one line per method on stderr, the table on stdout."""
    if methods:
        M = {k: v for k, v in M.items() if any(s in k for s in methods.split(","))}
    rows = []
    for name, fn in M.items():
        t = time.perf_counter()
        row = L.referee(name, L.method_rankings(convs, arms_by, fn), data)
        rows.append(row)
        print(f"{name}: R@10 {row['r10']:.3f} MRR {row['mrr']:.3f} multi-hop R@10 {row['c1'][0]:.3f} "
              f"open-domain R@10 {row['c3'][0]:.3f} ({time.perf_counter() - t:.1f}s)", file=sys.stderr)
    L.print_table(rows)


if __name__ == "__main__":
    main()
