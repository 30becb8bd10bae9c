"""Which targets ``automem up`` runs in child processes (automem/runner.py ``child_targets``),
targets joined by ``+`` sharing one child."""

from __future__ import annotations

import pytest

from automem.common.settings import Settings
from automem.runner import child_targets, split_shard_warning

SHARED = Settings(qdrant_url="", vector_share=True)


def test_each_entry_is_one_child_and_its_targets_leave_this_process() -> None:
    here, children, kept = child_targets(SHARED, ["all"], ["gateway", "enrich"])
    assert children == ["gateway", "enrich"] and kept == {}
    assert sorted(here) == ["consolidate", "ingest", "recall"]
    here, children, kept = child_targets(SHARED, ["all"], ["gateway+recall", "enrich"])
    assert children == ["gateway+recall", "enrich"] and kept == {}
    assert sorted(here) == ["consolidate", "ingest"]


def test_a_target_that_cannot_leave_stays_and_its_partners_still_go() -> None:
    alone = Settings(qdrant_url="", vector_share=False)  # the shard opens in one process only
    here, children, kept = child_targets(alone, ["all"], ["gateway+recall", "enrich"])
    assert children == ["gateway"]
    assert set(kept) == {"recall", "enrich"} and "vectors" in kept["recall"]
    assert sorted(here) == ["consolidate", "enrich", "ingest", "recall"]


def test_targets_not_chosen_are_left_out_of_their_group() -> None:
    here, children, _ = child_targets(SHARED, ["ingest", "recall", "gateway"], ["gateway+recall+enrich"])
    assert children == ["gateway+recall"] and here == ["ingest"]


@pytest.mark.parametrize(("wanted", "match"), [(["gateway+recal"], "unknown target"),
                                                (["gateway+recall", "recall"], "more than one child")])
def test_a_bad_list_is_refused_naming_the_target(wanted: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        child_targets(SHARED, ["all"], wanted)


def test_a_process_apart_on_an_embedded_shard_without_enrich_or_recall_is_warned() -> None:
    """Separate processes on empty QDRANT_URLs each opened a shard of their own and recall
    found nothing enrichment wrote, without a word (README, "Running parts separately")."""
    embedded = Settings(qdrant_url="")
    recall_alone = split_shard_warning(embedded, ["ingest", "recall"])
    assert "QDRANT_URL" in recall_alone and "recall" in recall_alone and "without enrich" in recall_alone
    assert "without recall" in split_shard_warning(embedded, ["enrich"])
    assert split_shard_warning(embedded, ["all"]) == ""
    assert split_shard_warning(embedded, ["recall", "enrich"]) == ""
    assert split_shard_warning(embedded, ["gateway", "ingest"]) == ""  # no target of these needs vectors
    assert split_shard_warning(Settings(qdrant_url="http://qdrant:6333"), ["recall"]) == ""
    assert split_shard_warning(Settings(qdrant_url="disabled"), ["recall"]) == ""
