"""AutoMem's entity merge-candidate rule (verygoodplugins/automem
automem/consolidation/entity_dedup.py) as automem/recall/graph_views.py applies it."""

from automem.graph.entities import EntityRow
from automem.recall.graph_views import merge_candidates, slug_similarity


def _row(kind: str, slug: str) -> EntityRow:
    return EntityRow(key=f"t/x|{kind}|{slug}", name=slug, kind=kind, aliases=(), references=0, merged_into="")


def test_slug_similarity_substring_floor_and_levenshtein() -> None:
    assert slug_similarity("postgres", "postgres") == 1.0
    assert slug_similarity("postgres", "postgresql") == 0.8  # substring: shorter / longer
    assert slug_similarity("al", "alice-smith") == 0.6  # substring floor
    assert slug_similarity("kitten", "sitting") == 1 - 3 / 7  # normalised Levenshtein


def test_merge_candidates_rule() -> None:
    rows = [
        (_row("tool", "postgres"), {"m1", "m2"}),
        (_row("tool", "postgresql"), {"m1", "m2", "m3"}),  # substring, overlap 1.0: auto merge
        (_row("person", "postgres"), {"m1"}),  # another kind: never paired with the tools
        (_row("tool", "redis"), {"m1"}),  # dissimilar slug
        (_row("place", "berlin"), set()),
        (_row("place", "berlim"), set()),  # similar slug, no overlap: 0.4 x 0.83 < 0.5, left out
    ]
    [pair] = merge_candidates(rows)
    assert {pair.entity_a.id, pair.entity_b.id} == {"tool:postgres", "tool:postgresql"}
    assert pair.canonical == "tool:postgresql" and pair.alias == "tool:postgres"
    assert pair.auto_merge is True and abs(pair.confidence - (0.8 * 0.4 + 1.0 * 0.6)) < 1e-9
    # overlap 0.5 on a non-substring pair of similarity 0.83: 0.33 + 0.3 >= 0.5, listed for review
    review = merge_candidates([(_row("place", "berlin"), {"a", "b"}), (_row("place", "berlim"), {"a", "c"})])
    assert len(review) == 1 and review[0].auto_merge is False
