"""Precision and recall of the local contradiction rule on a hand-labelled pair set, and its cost.

Reads ``bench/data/contradiction_pairs.json`` (``{"pairs": [...], "held_out": [...]}``, each
pair ``{"new", "old", "contradicts", "note"?}``, assumed past the candidate gate — similar,
same subject matter; ``pairs`` were written with the rule, ``held_out`` after it and not used
to tune it), runs :func:`automem.enrich.links.contradiction_signal` on each and prints, per
set, precision, recall and F1 of "proposed" against the labels and the pairs it gets wrong.
Then a micro-benchmark on ``pairs``: microseconds per call, the best of ``--repeat`` timings
of ``--loops`` passes over the set.

``--base FILE`` does the same for the ``contradiction_signal`` of another version of
``automem/enrich/links.py`` (e.g. ``git show HEAD~1:automem/enrich/links.py > /tmp/base.py``),
timed interleaved with this tree's, so a before/after comes from one command on one machine
state.

Usage:
    PYTHONPATH=$PWD .venv/bin/python bench/contradiction_rule.py [--base FILE] [--loops 200] [--repeat 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from automem.enrich.links import contradiction_signal

DATA = Path(__file__).resolve().parent / "data" / "contradiction_pairs.json"
Rule = Callable[[str, str], "str | None"]


def score(name: str, rule: Rule, pairs: list[dict]) -> None:
    """Print the confusion counts, precision, recall, F1 and the wrong pairs of ``rule``."""
    tp = fp = fn = tn = 0
    wrong = []
    for pair in pairs:
        reason = rule(pair["new"], pair["old"])
        proposed, expected = reason is not None, bool(pair["contradicts"])
        tp += proposed and expected
        fp += proposed and not expected
        fn += expected and not proposed
        tn += not proposed and not expected
        if proposed != expected:
            wrong.append(("FP" if proposed else "FN", pair["old"], pair["new"], reason))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    print(f"[{name}] pairs {len(pairs)} (contradicting {tp + fn}, not {fp + tn}): tp {tp} fp {fp} fn {fn} tn {tn}")
    print(f"[{name}] precision {precision:.3f}  recall {recall:.3f}  f1 {f1:.3f}")
    for kind, old, new, reason in wrong:
        print(f"  {kind}: {old!r} -> {new!r}" + (f"  [{reason}]" if reason else ""))


def cost(rule: Rule, pairs: list[dict], loops: int) -> float:
    """Seconds for ``loops`` passes of ``rule`` over ``pairs``."""
    start = time.perf_counter()
    for _ in range(loops):
        for pair in pairs:
            rule(pair["new"], pair["old"])
    return time.perf_counter() - start


def load_base(path: Path) -> Rule:
    """``contradiction_signal`` of the links module at ``path``."""
    spec = importlib.util.spec_from_file_location("links_base", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--base: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["links_base"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.contradiction_signal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--base", type=Path, help="another links.py to score and time beside this tree's")
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    data = json.loads(args.data.read_text())
    pairs = data["pairs"]
    rules: dict[str, Rule] = {}
    if args.base:
        rules["base"] = load_base(args.base)
    rules["this tree"] = contradiction_signal
    for name, rule in rules.items():
        score(name, rule, pairs)
        if data.get("held_out"):
            score(f"{name}, held out", rule, data["held_out"])
    best = dict.fromkeys(rules, float("inf"))
    for _ in range(args.repeat):
        for name, rule in rules.items():
            best[name] = min(best[name], cost(rule, pairs, args.loops))
    for name in rules:
        print(f"[{name}] cost {best[name] / (args.loops * len(pairs)) * 1e6:.1f} us per call "
              f"(best of {args.repeat} x {args.loops} passes over {len(pairs)} pairs, interleaved)")


if __name__ == "__main__":
    main()
