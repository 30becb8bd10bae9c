"""Recall filters and ranks candidates on CandidateFields (automem/common/model.py) rather than
Memory messages: both must give the same answers."""

from __future__ import annotations

import pytest

from automem.common.model import CandidateFields, Memory, ts
from automem.recall.filters import Filters
from automem.recall.ranking import Candidate, ScoreWeights, rank


def _memory(mid: str, tags: list[str], entity_tags: list[str], event: float | None, created: float,
            content: str = "Caroline: we met last week", importance: float = 0.5) -> Memory:
    m = Memory(id=mid, scope="s", content=content, tags=tags, importance=importance, confidence=0.7,
               entities=[{"tag": t} for t in entity_tags])
    if event is not None:
        m.event_time.CopyFrom(ts(event))
    m.create_time.CopyFrom(ts(created))
    return m


MEMORIES = [
    _memory("a", ["Project/Alpha", "set-3"], ["caroline"], 1_600_000_000.0, 1_700_000_000.0),
    _memory("b", ["STRASSE"], [], None, 1_689_000_000.5),
    _memory("c", [], ["melanie", "caroline"], 1_690_000_000.25, 1_690_000_100.0, content="no time here", importance=0.9),
    _memory("d", ["set-30", "x"], ["bob"], 1_500_000_000.0, 1_500_000_000.0),
]

FILTERS = [
    Filters.build("s", [], "any", "prefix", [], None, None),
    Filters.build("s", ["set-3"], "any", "prefix", [], None, None),
    Filters.build("s", ["set-3"], "any", "exact", [], None, None),
    Filters.build("s", ["caroline", "project"], "all", "prefix", [], None, None),
    Filters.build("s", ["straße"], "any", "exact", [], None, None),
    Filters.build("s", [], "any", "prefix", ["melanie"], None, None),
    Filters.build("s", [], "any", "prefix", [], 1_600_000_000.0, 1_660_000_000.0),
    Filters.build("s", ["set"], "any", "prefix", ["x"], 1_400_000_000.0, None),
    Filters.build("other", [], "any", "prefix", [], None, None),
]


@pytest.mark.parametrize("flt", FILTERS)
def test_filters_give_the_same_answer_on_messages_and_candidate_fields(flt: Filters) -> None:
    on_messages = [m.id for m in MEMORIES if flt.matches(m)]
    on_fields = [m.id for m in MEMORIES if flt.matches(CandidateFields.of(m))]
    assert on_fields == on_messages


def test_candidate_fields_of_a_message() -> None:
    fields = CandidateFields.of(MEMORIES[1])
    assert (fields.id, fields.scope, fields.tags, fields.entity_tags) == ("b", "s", ["STRASSE"], [])
    assert fields.event_time is None and fields.create_time == pytest.approx(1_689_000_000.5)
    assert CandidateFields.of(MEMORIES[2]).entity_tags == ["melanie", "caroline"]


@pytest.mark.parametrize("query", ["When did Caroline meet?", "what did Caroline say", ""])
def test_ranking_reads_times_tags_and_content_from_the_fields(query: str) -> None:
    cands = [Candidate(id=m.id, arm_scores={"vector": 0.5 + i / 10}, memory=CandidateFields.of(m))
             for i, m in enumerate(MEMORIES)]
    ranked = rank(cands, weights=ScoreWeights(), query=query, context_tags=["set-3"], now=1_690_000_200.0,
                  recency_bias="on")
    by_id = {r.id: r for r in ranked}
    assert by_id["a"].components["tag"] == pytest.approx(0.2)  # context tag overlap
    if query.startswith("When"):
        assert "temporal" in by_id["a"].components and "temporal" not in by_id["c"].components
    if "Caroline" in query:
        assert by_id["a"].components["author"] == pytest.approx(0.4)
    # recency from the event time, else the create time (b has no event time; a's create
    # time is after "now", its event time 1,042 days before it)
    assert by_id["b"].components["recency"] == pytest.approx(0.1 * (1 - 1_000_199.5 / (180 * 86400)))
    assert by_id["a"].components["recency"] == 0.0 and by_id["d"].components["recency"] == 0.0
