"""Recall's rankings on the public LoCoMo conversations stay what they were before the hot
path was rebuilt (issue 10): the same top-10 set for (nearly) every question, nearly the same
top-20, and evidence recall@10 and MRR, scored by the referee, no lower.

The int8 MiniLM model quantises activations per ONNX batch, so a memory's vector depends
slightly on which memories enrichment happened to embed with it (batch size and timing): with
batches of 8, 21 to 53 of the 495 top-20s moved below rank 5 from run to run. Both the
reference and this test therefore embed one text per ONNX run (``embedding_batch_size=1``),
which makes every vector independent of batching. Enrichment still runs concurrently, so the
similarity links a memory gets depend on which memories were enriched before it: two runs of
the same code differ in the exact order of ~19 of 495 top-20s, mostly below rank 10 (measured
2026-12-01: identical top-10 sets 97.6-98.2 %, mean top-20 overlap 0.997-0.998 against the
reference; the reference code reproduced itself exactly). The test therefore compares top-10
sets and top-20 overlap, which a ranking change would move far more than that noise.

The thresholds sit between that noise and a real ranking change, measured 2026-12-03:
alone on this machine 10-11 of 495 top-10 sets changed (top-20 overlap 0.997, with or without
a second core kept busy); the project's CI runner, a different machine, changed 28 (CI log of
2026-12-02, commit aa5eb98: over the earlier 5 % bound), while a 10 % change of one fusion weight
(``search_weight_vector`` 0.30 -> 0.27) changes 120 top-10 sets and drops the top-20 overlap to
0.973. Hence at most 10 % changed sets and an overlap of at least 0.985.

`make test` runs this test in a pytest process of its own: after the rest of the integration
suite, in the same process and session servers, it changed 26-27 top-10 sets (the same ones in
two runs, 2026-12-02) against 5-9 alone; the cause was not found that day.

The reference rankings (tests/data/locomo_rankings_19af833_b1.jsonl) were written by
``bench/locomo.py`` at commit 19af833 (before the hot path was rebuilt) with the MiniLM
provider's batch size set to 1. The test loads the same 1,451 turns through
``POST /memory/batch`` as the bench does (one memory per turn, timestamped with its session
date, tagged with conversation id and session), waits for enrichment, asks all 495 questions
through ``GET /recall?tags=<conv>&tag_match=exact&limit=20`` and compares the turn ids.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from automem.common.settings import Settings
from tests.conftest import eventually, start_service

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_public.json"
REFEREE = ROOT.parent / "shared" / "bench" / "eval_locomo.py"
REFERENCE = ROOT / "tests" / "data" / "locomo_rankings_19af833_b1.jsonl"


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict]]:
    assert DATA.exists(), f"the public LoCoMo conversations are expected at {DATA}"
    out = tmp_path_factory.mktemp("locomo")
    subprocess.run([sys.executable, str(REFEREE), str(DATA), "--export", str(out), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    turns = [json.loads(line) for line in (out / "memories.jsonl").open()]
    questions = [json.loads(line) for line in (out / "queries.jsonl").open()]
    return turns, questions


#: Share of questions whose top-10 set must equal the reference's.
SAME_TOP10 = 0.90
#: Smallest mean share of the reference top-20 found in the new top-20.
TOP20_OVERLAP = 0.985
#: Largest drop of recall@10 / MRR (categories 1-4) put down to link-order noise.
NOISE = 0.005


#: The settings of the reference's ranking (see the module docstring and :func:`service`).
REFERENCE_SETTINGS = {
    "embedding_batch_size": 1, "embedding_quantization": "weights", "search_weight_author": 0.0,
    "search_weight_session": 0.0, "search_weight_temporal": 0.0, "search_author_requery": "off",
    "search_rank_candidates": 0}


@pytest.fixture
async def service(settings):
    """The whole service with one text per embedding run (see the module docstring)."""
    # The issue-18 signals (author, session, temporal, author re-query) change the ranking on
    # purpose; with them off this test keeps guarding the fusion and the hot path.
    # The reference was written with the packaged model's float arithmetic (``weights``); the
    # int8-arithmetic default changes the vectors on purpose (docs/benchmarks.md, "Int8
    # arithmetic for MiniLM": LoCoMo recall@10 and MRR measured with both). Every candidate of
    # the pool is read and ranked (``search_rank_candidates`` 0), as when the reference was
    # written; the default's pruning is checked on the metrics by the test after this one.
    running = await start_service(settings.model_copy(update=REFERENCE_SETTINGS))
    try:
        yield running
    finally:
        await running.runner.stop()


def _overall(rankings: Path, out: Path) -> dict:
    subprocess.run([sys.executable, str(REFEREE), str(DATA), "--rankings", str(rankings), "--quiet",
                    "--json-out", str(out)], check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["results"]["overall (cat 1-4)"]


async def _rankings(service, turns: list[dict], questions: list[dict]) -> list[dict]:
    """Store the turns, wait for enrichment, ask every question: ``[{qid, ranked_ids}]``."""
    async with service.http() as http:
        http.timeout = 120
        for i in range(0, len(turns), 500):
            body = {"memories": [{"content": t["content"], "timestamp": t["timestamp"], "tags": t["tags"],
                                  "metadata": {"eval_id": t["id"], "speaker": t["speaker"]}}
                                 for t in turns[i: i + 500]]}
            r = await http.post("/memory/batch", json=body)
            assert r.status_code in (200, 201), r.text

        async def enriched() -> bool:
            health = (await http.get("/health")).json()
            return health.get("vector_count", 0) >= len(turns) and (
                health.get("enrichment") or {}).get("queue_depth", 1) == 0
        await eventually(enriched, timeout=600, interval=1.0)

        rows = []
        for q in questions:
            r = await http.get("/recall", params={"query": q["question"], "tags": q["conversation_id"],
                                                  "tag_match": "exact", "limit": 20})
            assert r.status_code == 200, r.text
            rows.append({"qid": q["qid"], "ranked_ids": [h["memory"]["metadata"].get("eval_id")
                                                         for h in r.json()["results"]]})
    return rows


def _no_lower(rows: list[dict], tmp_path: Path) -> None:
    """recall@10 and MRR (categories 1-4, by the referee) of ``rows`` no lower than the
    reference's, less :data:`NOISE`."""
    ours = tmp_path / "rankings.jsonl"
    ours.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before, after = _overall(REFERENCE, tmp_path / "before.json"), _overall(ours, tmp_path / "after.json")
    for metric in ("recall@10", "mrr"):
        assert after[metric] >= before[metric] - NOISE, (metric, before[metric], after[metric])


async def test_locomo_rankings_hold_through_the_fast_recall_path(service, locomo, tmp_path) -> None:
    turns, questions = locomo
    reference = {row["qid"]: row["ranked_ids"] for row in map(json.loads, REFERENCE.open())}
    assert len(reference) == len(questions) == 495
    rows = await _rankings(service, turns, questions)
    changed = []
    overlap = []
    for row in rows:
        ranked, want = row["ranked_ids"], reference[row["qid"]]
        overlap.append(len(set(ranked) & set(want)) / max(1, len(want)))
        if set(ranked[:10]) != set(want[:10]):
            changed.append((row["qid"], want[:10], ranked[:10]))
    assert len(changed) <= (1 - SAME_TOP10) * len(questions), \
        f"{len(changed)} of {len(questions)} top-10 sets changed, e.g. {changed[:3]}"
    assert sum(overlap) / len(overlap) >= TOP20_OVERLAP, sum(overlap) / len(overlap)
    _no_lower(rows, tmp_path)


async def test_locomo_metrics_hold_when_a_tier_ranks_only_its_pools_best(settings, locomo, tmp_path) -> None:
    """The default reads and ranks only the best ``search_rank_candidates`` of the first pool by
    their arm scores (automem/recall/servicer.py ``_Tiers._prune``). That changes which
    memories fill the bottom of many top-10s on purpose (132 of 495 sets at 60, 2026-12-06),
    so the rankings are not compared one by one; recall@10 and MRR stay no lower than the
    reference's, as above."""
    turns, questions = locomo
    default = Settings.model_fields["search_rank_candidates"].default
    assert default > 0
    running = await start_service(settings.model_copy(update={**REFERENCE_SETTINGS, "search_rank_candidates": default}))
    try:
        _no_lower(await _rankings(running, turns, questions), tmp_path)
    finally:
        await running.runner.stop()
