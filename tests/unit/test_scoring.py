"""Tests of automem.recall.scoring (pure functions, asserted values)."""

from __future__ import annotations

import pytest

from automem.recall import scoring as S
from automem.recall.scoring import Candidate


def test_normalise_by_max():
    assert S.normalise_by_max({"a": 2.0, "b": 1.0, "c": -0.5}) == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert S.normalise_by_max({"a": 0.0, "b": -1.0}) == {"a": 0.0, "b": 0.0}
    assert S.normalise_by_max({}) == {}


def test_fuse_weighted_values():
    cands = [
        Candidate("a", {"vector": 0.8, "lexical": 10.0}),
        Candidate("b", {"vector": 0.4}),
        Candidate("c", {"lexical": 5.0}),
    ]
    f = S.fuse_weighted(cands, {"vector": 0.3, "lexical": 0.7})
    assert f["a"] == pytest.approx({"vector": 0.3, "lexical": 0.7})
    assert f["b"] == pytest.approx({"vector": 0.15, "lexical": 0.0})
    assert f["c"] == pytest.approx({"vector": 0.0, "lexical": 0.35})


def test_fuse_arms_normalises_over_the_ids_given_and_matches_fuse_weighted():
    arm_scores = {"vector": {"a": 0.8, "b": 0.4, "z": 9.0}, "keyword": {"b": 2.0}, "other": {"a": 5.0}}
    weights = {"vector": 0.3, "keyword": 0.7}
    # "z" is outside the ids: it does not set the vector arm's maximum; "other" has no weight.
    assert S.fuse_arms(["a", "b"], arm_scores, weights) == {
        "a": {"vector": pytest.approx(0.3), "keyword": 0.0},
        "b": {"vector": pytest.approx(0.15), "keyword": pytest.approx(0.7)}}
    assert S.fuse_arms(["a"], {}, weights) == {"a": {"vector": 0.0, "keyword": 0.0}}
    cands = [Candidate("a", {"vector": 0.8}), Candidate("b", {"vector": 0.4, "keyword": 2.0})]
    assert S.fuse_weighted(cands, weights) == S.fuse_arms(["a", "b"], arm_scores, weights)


def test_fuse_rrf_values():
    cands = [Candidate("a", {"vector": 0.9}), Candidate("b", {"vector": 0.5, "lexical": 1.0})]
    f = S.fuse_rrf(cands, {"vector": 1.0, "lexical": 1.0}, k=60)
    assert f["a"] == pytest.approx({"vector": 1 / 61, "lexical": 0.0})
    assert f["b"] == pytest.approx({"vector": 1 / 62, "lexical": 1 / 61})


def test_neighbour_boost_takes_larger_neighbour():
    cands = [Candidate("t1", {}), Candidate("t2", {}, prev_id="t1"), Candidate("t3", {}, prev_id="t2"),
             Candidate("x", {}, prev_id="missing")]
    base = {"t1": 1.0, "t2": 0.2, "t3": 0.6, "x": 0.9}
    b = S.neighbour_boost(cands, base, 0.5)
    assert b == pytest.approx({"t1": 0.1, "t2": 0.5, "t3": 0.1, "x": 0.0})
    assert S.neighbour_boost(cands, base, 0.0) == {"t1": 0.0, "t2": 0.0, "t3": 0.0, "x": 0.0}


def test_rank_default_recipe_values():
    # question turn "q" names the topic, answer turn "ans" follows it and has only context terms
    cands = [
        Candidate("q", {"vector": 0.6, "lexical": 8.0}, order=1),
        Candidate("ans", {"vector": 0.5, "lexical": 4.0}, prev_id="q", order=2),
        Candidate("far", {"vector": 0.55}, order=9),
    ]
    out = S.rank(cands)
    assert [r.id for r in out] == ["q", "ans", "far"]
    q, ans, far = out
    assert q.score_components == pytest.approx({"vector": 0.3, "lexical": 0.7, "neighbour": 0.15 * (0.25 + 0.35)})
    assert q.score == pytest.approx(1.0 + 0.09)
    assert ans.score_components == pytest.approx({"vector": 0.25, "lexical": 0.35, "neighbour": 0.15})
    assert ans.score == pytest.approx(0.75)
    assert far.score == pytest.approx(0.3 * 0.55 / 0.6)
    assert far.score_components["neighbour"] == 0.0
    for r in out:
        assert r.score == pytest.approx(sum(r.score_components.values()))


def test_rank_defaults_are_the_measured_ones():
    assert dict(S.DEFAULT_WEIGHTS) == {"vector": 0.3, "lexical": 0.7}
    assert S.NEIGHBOUR_FRACTION == 0.15
    assert S.VECTOR_CANDIDATES + S.LEXICAL_CANDIDATES <= 200


def test_rank_ties_by_order_then_id_and_limit():
    cands = [Candidate("b", {"vector": 0.5}, order=2), Candidate("a", {"vector": 0.5}, order=2),
             Candidate("c", {"vector": 0.5}, order=1)]
    assert [r.id for r in S.rank(cands, neighbour_fraction=0)] == ["c", "a", "b"]
    assert [r.id for r in S.rank(cands, limit=1)] == ["c"]
    assert S.rank(cands, limit=0) == []
    assert S.rank([]) == []


def test_rank_dedupes_and_rejects_unknown_fusion():
    cands = [Candidate("a", {"vector": 0.5}), Candidate("a", {"vector": 0.9})]
    out = S.rank(cands)
    assert len(out) == 1 and out[0].score == pytest.approx(0.3)
    with pytest.raises(ValueError):
        S.rank(cands, fusion="nope")


def test_rank_rrf_mode():
    cands = [Candidate("a", {"vector": 0.9, "lexical": 1.0}), Candidate("b", {"vector": 0.1, "lexical": 2.0})]
    out = S.rank(cands, fusion="rrf", neighbour_fraction=0.0)
    assert [r.id for r in out] == ["b", "a"]  # lexical weight 0.7 > vector 0.3
    assert out[0].score == pytest.approx(0.3 / 62 + 0.7 / 61)
