"""Recall's rankings on the public LoCoMo conversations stay what they were before the hot
path was rebuilt (issue 10): the same top-20 for (nearly) every question, and evidence
recall@10 and MRR, scored by the referee, no lower.

Why "nearly": the int8 MiniLM model quantises activations per batch, so a memory's vector
depends slightly on which memories enrichment embedded with it (batch size and timing). With
the ranking code alone changed, all 495 top-20s were identical (docs/benchmarks.md); the
batched enrichment of issue 10 moved 21 of them below rank 5.

The reference rankings (tests/data/locomo_rankings_19af833.jsonl) were written by
``bench/locomo.py`` at commit 19af833. The test loads the same 1,451 turns through
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

from tests.conftest import eventually

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_public.json"
REFEREE = ROOT.parent / "shared" / "bench" / "eval_locomo.py"
REFERENCE = ROOT / "tests" / "data" / "locomo_rankings_19af833.jsonl"


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict]]:
    assert DATA.exists(), f"the public LoCoMo conversations are expected at {DATA}"
    out = tmp_path_factory.mktemp("locomo")
    subprocess.run([sys.executable, str(REFEREE), str(DATA), "--export", str(out), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    turns = [json.loads(line) for line in (out / "memories.jsonl").open()]
    questions = [json.loads(line) for line in (out / "queries.jsonl").open()]
    return turns, questions


#: Share of questions whose top-20 must be identical to the reference.
SAME_TOP20 = 0.9
#: Largest drop of recall@10 / MRR (categories 1-4) put down to embedding-batch noise.
NOISE = 0.005


def _overall(rankings: Path, out: Path) -> dict:
    subprocess.run([sys.executable, str(REFEREE), str(DATA), "--rankings", str(rankings), "--quiet",
                    "--json-out", str(out)], check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())["results"]["overall (cat 1-4)"]


async def test_locomo_rankings_hold_through_the_fast_recall_path(service, locomo, tmp_path) -> None:
    turns, questions = locomo
    reference = {row["qid"]: row["ranked_ids"] for row in map(json.loads, REFERENCE.open())}
    assert len(reference) == len(questions) == 495
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

        changed = []
        rows = []
        for q in questions:
            r = await http.get("/recall", params={"query": q["question"], "tags": q["conversation_id"],
                                                  "tag_match": "exact", "limit": 20})
            assert r.status_code == 200, r.text
            ranked = [h["memory"]["metadata"].get("eval_id") for h in r.json()["results"]]
            rows.append({"qid": q["qid"], "ranked_ids": ranked})
            if ranked != reference[q["qid"]]:
                changed.append((q["qid"], reference[q["qid"]][:5], ranked[:5]))
    assert len(changed) <= (1 - SAME_TOP20) * len(questions), \
        f"{len(changed)} of {len(questions)} rankings changed, e.g. {changed[:3]}"
    ours = tmp_path / "rankings.jsonl"
    ours.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before, after = _overall(REFERENCE, tmp_path / "before.json"), _overall(ours, tmp_path / "after.json")
    for metric in ("recall@10", "mrr"):
        assert after[metric] >= before[metric] - NOISE, (metric, before[metric], after[metric])
