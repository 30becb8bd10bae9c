"""Issue 18, second round: graph and query-structure candidates for multi-hop / open-domain,
on top of the service's own ranking (bench/recall_lab18.py ``service()``). Offline, cached
embeddings and NER (bench/out/lab).

Candidates (each a post-step on the service's ranked candidates, fused into the score):

* ``pool N``      — N candidates per arm instead of 100 before fusion;
* ``ppr``         — personalised PageRank over the memory-entity-session-neighbour graph of
  the candidates (memory nodes, NER entity nodes, UTC-day nodes, PRECEDED_BY and SIMILAR_TO
  edges), seeded by the best ``k`` candidates in proportion to their score; ``w · ppr/max``
  added to each candidate's score (``+nb``: neighbours outside the candidates join too;
  ``propagated``: only the mass a node received through the graph, not its restart share);
* ``decomp``      — the question split into sub-queries without an LLM (on "and"/"or"/commas
  between clauses, and per named author when it names several); each sub-query ranked by the
  service, the rankings fused with the original's by reciprocal rank fusion;
* ``mmr``         — greedy re-rank of the best 30: each pick lowers later candidates by
  ``λ · max cosine`` to the picks of the same session (day);
* ``graphnb``     — SIMILAR_TO (top-5 same-scope neighbours at cosine >= 0.75, the service's
  defaults) and PRECEDED_BY neighbours (both directions) of the best ``k`` seeds gain
  ``w · seed score / best score``; neighbours outside the candidates join (``+nb``) or not;
  ``graphnb2 undirected``: SIMILAR_TO read in both directions, as the service's
  ``relations.neighbours`` reads it (``scaled``: the gain times the neighbour's own score /
  best; ``thr``: a higher cosine threshold); ``graphnb3``: gated by a lexical match of the
  neighbour (``lexgate``) or only seeds within 80 % of the best score (``rel0.8``).

* ``rm3``         — lexical pseudo-relevance feedback: the best ``fb`` memories' terms (not
  the question's) added to the BM25 query at ``beta``, the service's ranking run again on the
  expanded lexical arm (``protectN``: the first ranking's best N stay on top) — the one kept,
  as automem/recall/understanding.py ``feedback_terms`` behind AUTOMEM_SEARCH_FEEDBACK_WEIGHT;
  ``fbcomp``: the same terms' BM25 score as a separate component instead;
* ``vector arm``  — the memory embedded with its PRECEDED_BY neighbour's content.
* ``dprf``        — dense pseudo-relevance feedback: the query vector moved towards the best
  memories' vectors (Rocchio), the vector arm scored again (not kept).

Results and the verdict: docs/benchmarks.md, "Recall quality (issue 18)", "Second round".

    .venv/bin/python bench/recall_lab18b.py [--data ...] [--methods a,b]
    .venv/bin/python bench/recall_lab18b.py --misses        # where multi-hop/open-domain evidence ranks
    .venv/bin/python bench/recall_lab18b.py --show-decomp   # the sub-queries
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from automem.recall import understanding as U
from bench import locomo_files
from bench import recall_lab18 as R
from bench import retrieval_lab as L

SIM_K, SIM_T = 5, 0.75
_CACHE: dict = {}
_SERVICE: dict = {}


def emb(cv):
    k = ("emb", cv.cid)
    if k not in _CACHE:
        v = L.embed_cached("minilm", [m["content"] for m in cv.mems])
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        _CACHE[k] = v
    return _CACHE[k]


def similar(cv, thr=SIM_T, undirected=False):
    """SIMILAR_TO as enrichment writes it: per memory its top-5 same-scope memories at cosine
    >= 0.75 (``thr``); ``undirected``: also the memories that have it among theirs (the
    service's ``relations.neighbours`` reads edges in either direction)."""
    k = ("sim", cv.cid, thr, undirected)
    if k not in _CACHE:
        v = emb(cv)
        c = v @ v.T
        np.fill_diagonal(c, -1)
        out = {i: [] for i in range(len(cv.mems))}
        for i in range(len(cv.mems)):
            top = np.argsort(-c[i])[:SIM_K]
            for j in top:
                if c[i, j] >= thr:
                    out[i].append(int(j))
                    if undirected and i not in out[int(j)]:
                        out[int(j)].append(i)
        _CACHE[k] = out
    return _CACHE[k]


def service_scores(cv, arms, qi, q, pool=100):
    """The service's ranking (bench/recall_lab18.py ``service()``: ``ranking.rank`` with the
    author re-query) of the lab's candidates, ``pool`` per arm: {memory index: score}."""
    if pool not in _SERVICE:
        _SERVICE[pool] = R.service(pool=pool, ranked=True)
    pos = {mid: i for i, mid in enumerate(cv.ids)}
    return {pos[r.id]: r.score for r in _SERVICE[pool](cv, arms, qi, q)}


class _VecArms:
    """``arms`` with the vector arm ("minilm:") replaced by ``mode``: "ctx" = the embedding of
    the PRECEDED_BY neighbour's content + the memory's; "max" = the larger cosine of the two."""

    def __init__(self, arms, mode):
        self.arms, self.mode, self.all_convs = arms, mode, arms.all_convs

    def wrap(self, other):
        return _VecArms(other, self.mode)

    def get(self, k):
        if k != "minilm:":
            return self.arms.get(k)
        if self.mode == "ctx":
            return self.arms.get("minilm:ctx")
        return np.maximum(self.arms.get("minilm:"), self.arms.get("minilm:ctx"))


def m_vec(mode):
    def f(cv, arms, qi, q):
        key = ("vec", cv.cid, mode)
        if key not in _CACHE:
            _CACHE[key] = _VecArms(arms, mode)
        return order(cv, service_scores(cv, _CACHE[key], qi, q))
    return f


def _bm25_docs(cv, all_convs):
    """The service's BM25 document vectors of ``cv`` and the collection IDF (as
    retrieval_lab.qdrant_bm25_matrix builds them)."""
    import math
    from collections import Counter

    from automem.common import text as T

    key = ("bm25docs", cv.cid)
    if key not in _CACHE:
        def vec(c, i):
            p = c.prev[i]
            ctx = T.analyze(c.mems[p]["content"]) if p >= 0 else []
            return T.bm25_doc_weights(T.analyze(c.mems[i]["content"]), ctx)
        if "idf" not in _CACHE:
            df, n = Counter(), 0
            for c in all_convs:
                for i in range(len(c.mems)):
                    df.update(vec(c, i).keys())
                    n += 1
            _CACHE["idf"] = {t: math.log(1.0 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}
        _CACHE[key] = [vec(cv, i) for i in range(len(cv.mems))]
    return _CACHE[key], _CACHE["idf"]


class _PrfArms:
    """``arms`` whose lexical arm ("qdrant_bm25:") adds ``beta`` x the BM25 score of each
    question's expansion terms (``expansion[qi]``: {term index: weight})."""

    def __init__(self, arms, extra):
        self.arms, self.extra, self.all_convs = arms, extra, arms.all_convs

    def wrap(self, other):
        return _PrfArms(other, self.extra)

    def get(self, k):
        base = self.arms.get(k)
        return base + self.extra if k == "qdrant_bm25:" else base


def _fb_weights(cv, sc, fb_docs, question) -> dict[int, float]:
    """Term index -> summed ``score share x tf / length`` over the best ``fb_docs`` of ``sc``,
    the question's terms left out (unnormalised; the service's
    automem/recall/understanding.py ``feedback_terms`` is the same, normalised and capped)."""
    from automem.common import text as T

    top = sorted(sc, key=lambda i: (-sc[i], i))[:fb_docs]
    tot = sum(max(sc[i], 0) for i in top) or 1
    qt = set(T.bm25_query_weights(T.analyze(question)))
    w: dict[int, float] = {}
    for i in top:
        toks = T.analyze(cv.mems[i]["content"])
        for t in toks:
            ti = T.term_index(t)
            if ti not in qt:
                w[ti] = w.get(ti, 0.0) + max(sc[i], 0) / tot / max(len(toks), 1)
    return w


def _protected(cv, arms, qi, q, ranked, protect):
    """``ranked`` with the service's first ranking's best ``protect`` memories kept on top."""
    if not protect:
        return ranked
    first = order(cv, service_scores(cv, arms, qi, q))[:protect]
    return first + [i for i in ranked if i not in first]


def m_rm3(fb_docs=5, terms=10, beta=0.5, protect=0, select="idf"):
    """Lexical pseudo-relevance feedback (RM3-like): the terms of the best ``fb_docs`` memories
    of the service's first ranking, weighted by tf/len x the memory's share of the feedback
    score, the best ``terms`` not in the question, added to the lexical arm at ``beta``
    (normalised so the top expansion term weighs 1). ``protect``: the first ranking's best
    ``protect`` memories keep their places above the re-ranked rest."""
    from automem.common import text as T

    def f(cv, arms, qi, q):
        key = ("rm3", cv.cid, fb_docs, terms, beta, select)
        if key not in _CACHE:
            docs, idf = _bm25_docs(cv, arms.all_convs)
            extra = np.zeros((len(cv.qs), len(cv.mems)))
            for j, qq in enumerate(cv.qs):
                sc = service_scores(cv, arms, j, qq)
                w = _fb_weights(cv, sc, fb_docs, qq["question"])
                if select == "pool":  # IDF over the ranked candidates only (what a recall has at hand)
                    pdf: dict[int, int] = {}
                    for i in sc:
                        for t in set(T.analyze(cv.mems[i]["content"])):
                            ti = T.term_index(t)
                            if ti in w:
                                pdf[ti] = pdf.get(ti, 0) + 1
                    sel = {t: np.log(1 + len(sc) / pdf.get(t, 1)) for t in w}
                else:
                    sel = {t: idf.get(t, 0.0) if select == "idf" else 1.0 for t in w}
                best = sorted(w, key=lambda t: (-w[t] * sel[t], t))[:terms]
                hi = max((w[t] for t in best), default=0) or 1
                for m, d in enumerate(docs):
                    extra[j, m] = beta * sum(w[t] / hi * idf.get(t, 0.0) * d.get(t, 0.0) for t in best)
            _CACHE[key] = _PrfArms(arms, extra)
        return _protected(cv, arms, qi, q, order(cv, service_scores(cv, _CACHE[key], qi, q)), protect)
    return f


class _DenseArms:
    """``arms`` whose vector arm ("minilm:") scores each question's vector plus ``beta`` x its
    feedback centroid (``cen``: questions x dims), normalised; ``mode`` "max" keeps the larger
    of that and the plain cosine. ``wrap`` applies the same centroids to the author re-query's
    (stripped) questions."""

    def __init__(self, arms, cen, beta, mode):
        self.arms, self.cen, self.beta, self.mode = arms, cen, beta, mode
        self.all_convs, self.conv = arms.all_convs, arms.conv
        self.qs = list(arms.conv.qs)
        self._m = None

    def wrap(self, other):
        return _DenseArms(other, self.cen, self.beta, self.mode)

    def get(self, k):
        if k != "minilm:":
            return self.arms.get(k)
        if self._m is None:
            dv = L.embed_cached("minilm", [m["content"] for m in self.conv.mems])
            qv = L.embed_cached("minilm", [x["question"] for x in self.qs])
            v = qv + self.beta * self.cen
            v = v / np.linalg.norm(v, axis=1, keepdims=True)
            m = v @ dv.T
            self._m = m if self.mode == "replace" else np.maximum(m, self.arms.get("minilm:"))
        return self._m


def m_dprf(fb_docs=3, beta=0.3, protect=0, mode="replace"):
    """Dense pseudo-relevance feedback (Rocchio on the query embedding): the question's vector
    plus ``beta`` x the score-share-weighted mean of the best ``fb_docs`` memories' vectors of
    the service's first ranking, normalised; its cosines replace the vector arm ("replace") or
    the larger of the two is taken ("max"); the service's ranking runs again. ``protect`` as in
    ``m_rm3``."""

    def f(cv, arms, qi, q):
        key = ("dprf", cv.cid, fb_docs, beta, mode)
        if key not in _CACHE:
            dv = L.embed_cached("minilm", [m["content"] for m in cv.mems])
            cen = np.zeros((len(cv.qs), dv.shape[1]))
            for j, qq in enumerate(cv.qs):
                sc = service_scores(cv, arms, j, qq)
                top = sorted(sc, key=lambda i: (-sc[i], i))[:fb_docs]
                tot = sum(max(sc[i], 0) for i in top) or 1
                cen[j] = sum(max(sc[i], 0) / tot * dv[i] for i in top)
            _CACHE[key] = _DenseArms(arms, cen, beta, mode)
        return _protected(cv, arms, qi, q, order(cv, service_scores(cv, _CACHE[key], qi, q)), protect)
    return f


def m_fbcomp(fb_docs=2, w=0.1, add=False):
    """Feedback as its own score component: the BM25 score of the best ``fb_docs`` memories'
    terms (not in the question; weights tf/len x the memory's share of the feedback score,
    normalised to 1) for each candidate, ``w`` x score / best; ``add``: the expansion
    search's best 100 join the candidates."""

    def f(cv, arms, qi, q):
        docs, idf = _bm25_docs(cv, arms.all_convs)
        sc = service_scores(cv, arms, qi, q)
        wt = _fb_weights(cv, sc, fb_docs, q["question"])
        hi = max(wt.values(), default=0) or 1
        ex = np.array([sum(v / hi * idf.get(t, 0.0) * d.get(t, 0.0) for t, v in wt.items()) for d in docs])
        final = dict(sc)
        if add:
            for i in np.argsort(-ex, kind="stable")[:100]:
                if ex[i] > 0:
                    final.setdefault(int(i), 0.0)
        m = max((ex[i] for i in final), default=0) or 1
        for i in final:
            final[i] += w * ex[i] / m
        return order(cv, final)
    return f


def order(cv, sc):
    return [cv.ids[i] for i in sorted(sc, key=lambda i: (-sc[i], i))]


def m_pool(pool):
    return lambda cv, arms, qi, q: order(cv, service_scores(cv, arms, qi, q, pool=pool))


# ----------------------------------------------------------------------------- PPR


def m_ppr(ENT, w=0.1, seeds=10, alpha=0.5, iters=20, ent=True, day=True, prev=True, sim=True, add=False,
          max_df=0.2, propagated=False):
    def f(cv, arms, qi, q):
        sc = service_scores(cv, arms, qi, q)
        nodes = set(sc)
        simg = similar(cv)
        if add:
            top = sorted(sc, key=lambda i: -sc[i])[:seeds]
            for i in top:
                nodes.update(x for x in (i - 1, i + 1) if 0 <= x < len(cv.ids))
                nodes.update(simg[i])
        nodes = sorted(nodes)
        idx = {n: k for k, n in enumerate(nodes)}
        # bipartite memory - hub (entity, day) edges; direct memory - memory edges
        adj: dict[object, set] = {n: set() for n in nodes}
        hubs: dict[object, set] = {}
        if ent:
            df = {}
            for n in nodes:
                for e in set(ENT.get(cv.ids[n], ())):
                    df.setdefault(e, set()).add(n)
            for e, ms in df.items():
                if 1 < len(ms) <= max_df * len(nodes):
                    hubs[("e", e)] = ms
        if day:
            dd = {}
            for n in nodes:
                dd.setdefault(cv.mems[n]["timestamp"][:10], set()).add(n)
            for d, ms in dd.items():
                if len(ms) > 1:
                    hubs[("d", d)] = ms
        for n in nodes:
            if prev:
                for x in (n - 1, n + 1):
                    if x in idx:
                        adj[n].add(x)
            if sim:
                for x in simg[n]:
                    if x in idx:
                        adj[n].add(x)
                        adj[x].add(n)
        allnodes = nodes + list(hubs)
        k = {n: j for j, n in enumerate(allnodes)}
        N = len(allnodes)
        rows, cols = [], []
        for n in nodes:
            for x in adj[n]:
                rows.append(k[x])
                cols.append(k[n])
        for h, ms in hubs.items():
            for n in ms:
                rows += [k[h], k[n]]
                cols += [k[n], k[h]]
        M = np.zeros((N, N))
        M[rows, cols] = 1.0
        deg = M.sum(axis=0)
        deg[deg == 0] = 1
        M = M / deg
        top = sorted(sc, key=lambda i: -sc[i])[:seeds]
        p = np.zeros(N)
        for i in top:
            p[k[i]] = max(sc[i], 0)
        if p.sum() <= 0:
            return order(cv, sc)
        p /= p.sum()
        r = p.copy()
        for _ in range(iters):
            r = alpha * p + (1 - alpha) * (M @ r)
        if propagated:  # only the mass that reached a node through the graph, not its own restart share
            r = r - alpha * p
        mr = np.array([r[k[n]] for n in nodes])
        hi = mr.max() or 1
        final = {n: sc.get(n, 0.0) + w * r[k[n]] / hi for n in nodes}
        return order(cv, final)
    return f


# ----------------------------------------------------------------------------- decomposition

_SPLIT = re.compile(r"\s*(?:,\s*(?:and|or)\s+|\s+and\s+|\s+or\s+|;\s*)\s*", re.IGNORECASE)


def decompose(question: str, authors, which: str = "both") -> list[str]:
    """Sub-queries of ``question`` (the question itself not included); [] when it has one part.

    * clauses (``which`` "clauses"/"both"): split on "and"/"or"/";"; parts of fewer than 3
      words dropped (``"Did Jon"``), each remaining part is a sub-query;
    * several named authors (``which`` "authors"/"both"): one sub-query per author, the
      others' names removed (:func:`automem.recall.understanding.strip_authors`).
    """
    out = []
    parts = [p for p in _SPLIT.split(question.strip()) if p]
    parts = [p for p in parts if len(p.split()) >= 3]
    if len(parts) >= 2 and which != "authors":
        out += parts
    words = U.query_words(question)
    named = [a for a in authors if U.names_author(words, a)]
    if len(named) >= 2 and which != "clauses":
        for a in named:
            out.append(U.strip_authors(question, [b for b in named if b != a]))
    seen, res = set(), []
    for s in out:
        s = " ".join(s.split())
        if s and s != question and s not in seen:
            seen.add(s)
            res.append(s)
    return res[:4]


class SubConv:
    def __init__(self, cv, qs):
        self.cid, self.mems, self.ids, self.prev, self.qs = cv.cid, cv.mems, cv.ids, cv.prev, qs


def sub_arms(cv, arms, j, subs):
    key = ("sub", cv.cid, j, id(subs))
    if key not in _CACHE:
        qs = [dict(q, question=(subs[qi][j] if j < len(subs[qi]) else q["question"])) for qi, q in enumerate(cv.qs)]
        sc = SubConv(cv, qs)
        _CACHE[key] = (sc, L.Arms(sc, arms.all_convs))
    return _CACHE[key]


def subqueries(cv, arms, which="both"):
    key = ("subs", cv.cid, which)
    if key not in _CACHE:
        subs = []
        for qi, q in enumerate(cv.qs):
            subs.append(decompose(q["question"], R.first_round_authors(cv, arms, qi), which))
        _CACHE[key] = subs
    return _CACHE[key]


def m_decomp(k=60, w_orig=1.0, mode="rrf", which="both"):
    def f(cv, arms, qi, q):
        subs = subqueries(cv, arms, which)
        sc = service_scores(cv, arms, qi, q)
        if not subs[qi]:
            return order(cv, sc)
        lists = [(w_orig, sc)]
        for j in range(len(subs[qi])):
            scv, sa = sub_arms(cv, arms, j, subs)
            lists.append((1.0, service_scores(scv, sa, qi, scv.qs[qi])))
        tot: dict[int, float] = {}
        for w, s in lists:
            if mode == "rrf":
                for r, i in enumerate(sorted(s, key=lambda i: (-s[i], i))):
                    tot[i] = tot.get(i, 0.0) + w / (k + r + 1)
            else:  # max of max-normalised scores
                hi = max(s.values()) or 1
                for i, v in s.items():
                    tot[i] = max(tot.get(i, 0.0), w * v / hi)
        return order(cv, tot)
    return f


# ----------------------------------------------------------------------------- MMR


def m_mmr(lam=0.1, top=30, session_only=True):
    def f(cv, arms, qi, q):
        sc = service_scores(cv, arms, qi, q)
        ranked = sorted(sc, key=lambda i: (-sc[i], i))
        v = emb(cv)
        head, rest = ranked[:top], ranked[top:]
        picks = []
        while head:
            def val(i):
                pen = 0.0
                for p in picks:
                    if not session_only or cv.mems[p]["timestamp"][:10] == cv.mems[i]["timestamp"][:10]:
                        pen = max(pen, float(v[i] @ v[p]))
                return sc[i] - lam * pen
            b = max(head, key=lambda i: (val(i), -i))
            picks.append(b)
            head.remove(b)
        return [cv.ids[i] for i in picks + rest]
    return f


# ----------------------------------------------------------------------------- graph neighbours


def m_graphnb(w=0.1, seeds=5, use_sim=True, use_prev=True, add=False, thr=SIM_T, undirected=False, scale=False,
              lexgate=False, rel=0.0):
    def f(cv, arms, qi, q):
        sc = service_scores(cv, arms, qi, q)
        lex = R.requery_arms(cv, arms, "both").get("qdrant_bm25:")[qi] if lexgate else None
        top = sorted(sc, key=lambda i: (-sc[i], i))[:seeds]
        hi = sc[top[0]] if top and sc[top[0]] > 0 else 1
        simg = similar(cv, thr, undirected)
        gain: dict[int, float] = {}
        for s in top:
            if sc[s] < rel * hi:
                continue
            nb = set()
            if use_sim:
                nb.update(simg[s])
            if use_prev:
                nb.update(x for x in (s - 1, s + 1) if 0 <= x < len(cv.ids))
            for x in nb:
                if x != s:
                    gain[x] = max(gain.get(x, 0.0), w * sc[s] / hi)
        final = dict(sc)
        for x, g in gain.items():
            if lex is not None and lex[x] <= 0:
                continue
            if x in final:
                final[x] += g * (max(sc[x], 0) / hi if scale else 1.0)
            elif add:
                final[x] = g
        return order(cv, final)
    return f


def misses(convs, arms_by, data: Path) -> None:
    """Where the evidence of the multi-hop (1) and open-domain (3) questions sits in the
    service's full ranking (diagnosis only: the evidence is read from the referee's own
    parser, never used to rank)."""
    import importlib.util
    import json
    from collections import Counter

    spec = importlib.util.spec_from_file_location("eval_locomo", L.EVAL)
    ev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ev)
    valid = {cv.cid: {m["dia_id"] for m in cv.mems} for cv in convs}
    truth = {}
    for s in json.loads(Path(data).read_text()):
        cid = s["sample_id"]
        for i, qa in enumerate(s.get("qa", [])):
            if cid in valid:
                e, _ = ev.normalize_evidence(qa.get("evidence", []), valid[cid])
                truth[f"{cid}/q{i:03d}"] = (qa["category"], [f"{cid}/{d}" for d in e])
    for cat in (1, 3):
        where, sessions, nq = Counter(), Counter(), 0
        for cv in convs:
            for qi, q in enumerate(cv.qs):
                c, evd = truth.get(q["qid"], (0, []))
                if c != cat or not evd:
                    continue
                nq += 1
                pos = {m: r for r, m in enumerate(order(cv, service_scores(cv, arms_by[cv.cid], qi, q)))}
                sessions[len({x.split(":")[0] for x in evd})] += 1
                for x in evd:
                    r = pos.get(x)
                    where["not among the 200 candidates" if r is None else "1-10" if r < 10 else "11-20" if r < 20
                          else "21-50" if r < 50 else "51+"] += 1
        print(f"category {cat}: {nq} questions; evidence turns by rank {dict(where)}; "
              f"sessions per question {dict(sorted(sessions.items()))}")


def main():
    ap = argparse.ArgumentParser()
    locomo_files.add_arguments(ap)
    ap.add_argument("--methods", default="")
    ap.add_argument("--show-decomp", action="store_true", help="print the sub-queries and stop")
    ap.add_argument("--misses", action="store_true", help="where category 1/3 evidence ranks, and stop")
    args = ap.parse_args()
    L.EVAL = locomo_files.require_referee(args.referee)
    convs = L.load(locomo_files.require_data(args.data))
    R.ENT_CACHE = L.OUT / f"entities_{Path(args.data).stem}.json"
    ENT = R.entities(convs)
    arms_by = {cv.cid: L.Arms(cv, convs) for cv in convs}
    if args.misses:
        misses(convs, arms_by, args.data)
        return
    if args.show_decomp:
        for cv in convs:
            subs = subqueries(cv, arms_by[cv.cid])
            for q, s in zip(cv.qs, subs, strict=True):
                if s:
                    print(q["qid"], q.get("category"), "|", q["question"], "->", s)
        return
    M = {"service defaults": m_pool(100)}
    for p in (150, 200, 300):
        M[f"pool {p}"] = m_pool(p)
    for w in (0.05, 0.1, 0.2):
        for a in (0.3, 0.5):
            M[f"ppr w{w} a{a}"] = m_ppr(ENT, w=w, alpha=a)
    M["ppr w0.1 a0.5 +nb"] = m_ppr(ENT, w=0.1, alpha=0.5, add=True)
    M["ppr w0.1 a0.5 no-ent"] = m_ppr(ENT, w=0.1, alpha=0.5, ent=False)
    M["ppr w0.1 a0.5 ent only"] = m_ppr(ENT, w=0.1, alpha=0.5, day=False, prev=False, sim=False)
    M["ppr w0.1 a0.5 seeds5"] = m_ppr(ENT, w=0.1, alpha=0.5, seeds=5)
    for w in (0.1, 0.3, 0.5):
        M[f"ppr propagated w{w} a0.5"] = m_ppr(ENT, w=w, alpha=0.5, propagated=True)
        M[f"ppr propagated w{w} a0.5 seeds5"] = m_ppr(ENT, w=w, alpha=0.5, seeds=5, propagated=True)
    for k in (10, 60):
        M[f"decomp rrf k{k}"] = m_decomp(k=k)
    M["decomp rrf k60 orig x2"] = m_decomp(k=60, w_orig=2.0)
    M["decomp max"] = m_decomp(mode="max")
    M["decomp rrf k60 authors only"] = m_decomp(k=60, which="authors")
    M["decomp rrf k60 clauses only"] = m_decomp(k=60, which="clauses")
    for lam in (0.05, 0.1, 0.2):
        M[f"mmr session {lam}"] = m_mmr(lam)
    M["mmr all 0.1"] = m_mmr(0.1, session_only=False)
    for w in (0.05, 0.1, 0.2):
        for k in (3, 10):
            M[f"graphnb w{w} seeds{k}"] = m_graphnb(w=w, seeds=k)
    for w in (0.08, 0.1, 0.12, 0.15):
        for k in (5, 10, 20):
            M[f"graphnb sweep w{w} seeds{k}"] = m_graphnb(w=w, seeds=k)
            M[f"graphnb sweep w{w} seeds{k} +nb"] = m_graphnb(w=w, seeds=k, add=True)
    for w in (0.1, 0.15, 0.2, 0.3):
        for k in (5, 10):
            M[f"graphnb2 undirected w{w} seeds{k}"] = m_graphnb(w=w, seeds=k, undirected=True)
            M[f"graphnb2 undirected scaled w{w} seeds{k}"] = m_graphnb(w=w, seeds=k, undirected=True, scale=True)
    for b in (0.2, 0.5):
        for t in (5, 10):
            M[f"rm3 fb5 terms{t} beta{b}"] = m_rm3(5, t, b)
    M["rm3 fb3 terms10 beta0.3"] = m_rm3(3, 10, 0.3)
    for w in (0.05, 0.1, 0.2, 0.3):
        for fb in (2, 3):
            M[f"fbcomp fb{fb} w{w}"] = m_fbcomp(fb, w)
            M[f"fbcomp fb{fb} w{w} +new"] = m_fbcomp(fb, w, add=True)
    for sel in ("pool", "none"):
        M[f"rm3 select-{sel} protect1 fb3 terms20 beta0.2"] = m_rm3(3, 20, 0.2, protect=1, select=sel)
        M[f"rm3 select-{sel} protect1 fb2 terms20 beta0.1"] = m_rm3(2, 20, 0.1, protect=1, select=sel)
    for p in (1, 3):
        M[f"rm3 protect{p} fb3 terms20 beta0.2"] = m_rm3(3, 20, 0.2, protect=p)
        M[f"rm3 protect{p} fb2 terms20 beta0.1"] = m_rm3(2, 20, 0.1, protect=p)
    for fb in (2, 3):
        for t in (10, 20):
            for b in (0.1, 0.2, 0.3):
                M[f"rm3 sweep fb{fb} terms{t} beta{b}"] = m_rm3(fb, t, b)
    M["vector arm: context embedding"] = m_vec("ctx")
    M["vector arm: max(plain, context)"] = m_vec("max")
    for w in (0.1, 0.15):
        M[f"graphnb3 lexgate w{w} seeds5"] = m_graphnb(w=w, seeds=5, undirected=True, lexgate=True)
        M[f"graphnb3 rel0.8 w{w} seeds5"] = m_graphnb(w=w, seeds=5, undirected=True, rel=0.8)
        M[f"graphnb3 lexgate rel0.8 w{w} seeds5"] = m_graphnb(w=w, seeds=5, undirected=True, lexgate=True, rel=0.8)
    for t in (0.8, 0.85):
        M[f"graphnb2 undirected thr{t} w0.1 seeds5"] = m_graphnb(w=0.1, seeds=5, undirected=True, thr=t)
    M["graphnb w0.1 seeds5 +nb"] = m_graphnb(w=0.1, seeds=5, add=True)
    M["graphnb w0.1 seeds5 sim only"] = m_graphnb(w=0.1, seeds=5, use_prev=False)
    M["graphnb w0.1 seeds5 prev only"] = m_graphnb(w=0.1, seeds=5, use_sim=False)
    for fb in (2, 3, 5):
        for b in (0.2, 0.5, 1.0):
            for p in (0, 3):
                M[f"dprf fb{fb} beta{b} protect{p}"] = m_dprf(fb, b, protect=p)
    M["dprf fb3 beta0.0 protect0"] = m_dprf(3, 0.0)
    M["dprf max fb3 beta0.5 protect3"] = m_dprf(3, 0.5, protect=3, mode="max")
    R.run_methods(M, args.methods, convs, arms_by, args.data)


if __name__ == "__main__":
    main()
