"""Tests of automem.recall.understanding and its components in automem.recall.ranking (issue 18)."""

from __future__ import annotations

import pytest

from automem.common.model import CandidateFields, Memory, ts
from automem.recall import understanding as U
from automem.recall.ranking import Candidate, ScoreWeights, rank


def test_author_of_transcript_lines_only():
    assert U.author_of("Caroline: I went to a support group") == "Caroline"
    assert U.author_of("Dr. Ada Lovelace: the engine runs") == "Dr. Ada Lovelace"
    assert U.author_of("I went to a support group") is None
    assert U.author_of("note:lower case label") is None
    assert U.author_of("Too Many Words In This Name: x") is None


def test_names_author_is_case_sensitive_and_takes_possessives():
    words = U.query_words("What do Melanie's kids like?")
    assert "Melanie" in words and "kids" in words
    assert U.names_author(words, "Melanie")
    assert not U.names_author(words, "Caroline")
    assert not U.names_author(U.query_words("which decision did we take"), "Decision")
    assert U.names_author(U.query_words("What did Ada Lovelace say"), "Ada Lovelace")
    assert not U.names_author(U.query_words("What did Ada say"), "Ada Lovelace")


@pytest.mark.parametrize("q,expected", [
    ("When did Caroline go to the support group?", True), ("how long ago was the move", True),
    ("What year did we switch to Postgres?", True), ("How many weeks did it take", True),
    ("What did Caroline research?", False), ("the when clause", False)])
def test_is_temporal_question(q, expected):
    assert U.is_temporal_question(q) is expected


@pytest.mark.parametrize("text,expected", [
    ("I ran a charity race last Saturday", True), ("We moved 4 years ago", True),
    ("Released in 2022", True), ("It rained yesterday", True), ("in May we left", True),
    ("I like pottery", False), ("maybe later", False),
    # any letter case (the test runs on the lower-cased text), whole words only
    ("LAST WEEKEND we hiked", True), ("Next Month", True), ("ThursDay", True), ("SINCE 1999", True),
    ("AGO", True), ("agony", False), ("todays", False), ("Mayday", False), ("3000 BC", False),
    ("this holiday", True), ("this way", False), ("20245", False), ("year 2024!", True)])
def test_has_time_expression(text, expected):
    assert U.has_time_expression(text) is expected


def test_session_spread_values():
    assert U.session_spread({"a": 1.0, "b": 0.5, "c": 0.2}, {"a": 1, "b": 2, "c": 1}, seeds=2) == \
        {"a": 1.0, "b": 0.5, "c": 1.0}
    assert U.session_spread({"a": 1.0, "b": 0.5}, {"a": None, "b": 2}, seeds=1) == {"a": 0.0, "b": 0.0}
    assert U.session_spread({}, {}, seeds=3) == {}


def _cand(cid: str, content: str, day: int, vector: float) -> Candidate:
    m = Memory(id=cid, content=content, importance=0.5, confidence=0.8)
    m.event_time.CopyFrom(ts(day * 86400.0 + 3600))
    return Candidate(id=cid, arm_scores={"vector": vector}, memory=CandidateFields.of(m))


def test_rank_author_component_lifts_the_named_speakers_turn():
    cands = [_cand("x", "Bob: I adopted a dog", 1, 0.9), _cand("y", "Alice: I adopted a cat", 2, 0.8)]
    off = rank(cands, weights=ScoreWeights(author=0, session=0, temporal=0), query="What did Alice adopt?")
    on = rank(cands, weights=ScoreWeights(session=0, temporal=0), query="What did Alice adopt?")
    assert [r.id for r in off] == ["x", "y"] and [r.id for r in on] == ["y", "x"]
    assert on[0].score_components["author"] == pytest.approx(0.4)
    assert "author" not in on[1].score_components


def test_rank_session_component_follows_the_top_seeds_day():
    cands = [_cand("a", "the launch plan", 5, 1.0), _cand("b", "budget notes", 5, 0.5),
             _cand("c", "budget notes too", 9, 0.55)]
    r = rank(cands, weights=ScoreWeights(session=0.15, author=0, temporal=0, session_seeds=1), query="launch")
    assert [x.id for x in r] == ["a", "b", "c"]
    comps = {x.id: x.score_components for x in r}
    assert comps["a"]["session"] == pytest.approx(0.15) and comps["b"]["session"] == pytest.approx(0.15)
    assert "session" not in comps["c"]


def test_rank_temporal_component_only_for_time_questions():
    cands = [_cand("p", "We talked about the move", 1, 0.9), _cand("t", "We moved last May", 1, 0.88)]
    w = ScoreWeights(author=0, session=0)
    assert rank(cands, weights=w, query="When did we move?")[0].id == "t"
    assert rank(cands, weights=w, query="Where did we move?")[0].id == "p"


def test_rank_without_query_adds_none_of_the_signals():
    cands = [_cand("a", "Alice: hi", 1, 0.0), _cand("b", "Bob: hello last week", 1, 0.0)]
    for r in rank(cands, weights=ScoreWeights(), query=""):
        assert not {"author", "session", "temporal"} & set(r.score_components)


def test_strip_authors_removes_named_authors_only():
    assert U.strip_authors("What do Melanie's kids like?", ["Melanie", "Bob"]) == "What do kids like?"
    assert U.strip_authors("What did Ada Lovelace say", ["Ada Lovelace", "Ada"]) == "What did say"
    assert U.strip_authors("hello world", ["Bob"]) == "hello world"
    assert U.strip_authors("Melanie?", ["Melanie"]) == "Melanie?"  # nothing would be left
    assert U.strip_authors("what did melanie do", ["Melanie"]) == "what did melanie do"  # case-sensitive


def test_learn_authors_keeps_recent_scopes_and_bounded_names(monkeypatch):
    from automem.common.settings import Settings
    from automem.recall import servicer as R

    monkeypatch.setattr(R, "AUTHOR_CACHE_SCOPES", 2)
    monkeypatch.setattr(R, "AUTHOR_CACHE_NAMES", 3)
    svc = R.RecallServicer(Settings(), None, None, None)
    svc.learn_authors("a", {"Ann", "Bo"})
    svc.learn_authors("b", {"Cy"})
    svc.learn_authors("a", {"Di", "Ed"})  # "a" is now the most recent; capped at 3 names
    assert len(svc._authors["a"]) == 3 and {"Ann", "Bo"} <= svc._authors["a"]
    svc.learn_authors("c", {"Flo"})  # evicts "b", the least recently used
    assert list(svc._authors) == ["a", "c"]
    svc.learn_authors("d", set())  # nothing learnt, nothing kept
    assert "d" not in svc._authors


def test_feedback_terms_weigh_the_best_memories_words_outside_the_query() -> None:
    terms = U.feedback_terms([("Mel: I love painting sunsets", 1.0), ("Bob: sunsets at the lake", 0.5)],
                             "What does Mel like?")
    assert "mel" not in terms and "like" not in terms  # the query's own terms
    assert terms["sunset"] == 1.0  # in both memories: the heaviest, normalised to 1
    assert terms["love"] == pytest.approx(0.6) and terms["lake"] == pytest.approx(0.4)
    assert list(U.feedback_terms([("alpha beta gamma delta", 1.0)], "", limit=2)) == ["alpha", "beta"]


def test_feedback_terms_empty_without_positive_scores_or_new_words() -> None:
    assert U.feedback_terms([("painting sunsets", 0.0)], "x") == {}
    assert U.feedback_terms([("painting sunsets", 1.0)], "painting sunsets") == {}
    assert U.feedback_terms([], "x") == {}
