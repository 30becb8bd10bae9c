"""The LLM reranker's prompt and how its reply becomes an order (automem/recall/llm_rerank.py)."""

from __future__ import annotations

from automem.recall.llm_rerank import MAX_MEMORY_CHARS, prompt, reorder


def test_the_named_memories_lead_in_the_llms_order_and_the_rest_keep_theirs() -> None:
    assert reorder(4, [3, 1]) == [2, 0, 1, 3]
    assert reorder(3, [3, 1, 7, 3, 0, -1]) == [2, 0, 1]  # out of range and repeats ignored
    assert reorder(2, [2, 1]) == [1, 0]


def test_a_reply_naming_no_memory_is_unusable() -> None:
    assert reorder(3, []) is None
    assert reorder(3, [4, 0]) is None


def test_the_prompt_numbers_each_memory_on_one_line_cut_to_its_bound() -> None:
    text = prompt("who moved the standup?", ["Alice moved\nthe standup", "x" * (MAX_MEMORY_CHARS + 50)])
    lines = text.splitlines()
    assert lines[0] == "Question: who moved the standup?"
    assert lines[3] == "[1] Alice moved the standup"
    assert lines[4] == "[2] " + "x" * MAX_MEMORY_CHARS
    assert len(lines) == 5
