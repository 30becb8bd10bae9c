"""Optional LLM reranking for recall (issue 18 item 4): the best ``recall_llm_rerank_top``
memories of a query recall, as ranked without an LLM, are shown to the LLM with the question,
and it answers their order of usefulness; the memories it names come first in that order,
the others follow in their own order (none is dropped: reranking reorders, it never filters).

Used when a request asks for it (``rerank``, REST ``rerank=true``) or for every query recall
with ``AUTOMEM_RECALL_LLM_RERANK=true``, and only with an LLM configured
(automem/common/llm.py). One attempt bounded by ``recall_llm_timeout_seconds``; a timeout,
connection error or reply that does not validate answers the order without it and names
``llm_rerank`` in the response's ``degraded`` (automem/recall/servicer.py). The default path,
and every figure in docs/benchmarks.md unless stated, uses no LLM.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from automem.common.llm import JsonLLM
from automem.common.settings import Settings

SYSTEM = ("You rank memories an AI agent stored by how useful each is for answering a question about them. "
          "The memories are numbered. Reply with a JSON object {\"ranking\": [...]}: the numbers of the memories "
          "that help answer the question, most useful first. Leave out memories that do not help.")

#: Characters of a memory shown to the LLM (a longer one is cut): bounds the prompt at
#: ``recall_llm_rerank_top`` x this.
MAX_MEMORY_CHARS = 600


class Ranking(BaseModel):
    """Reply of the reranking prompt: memory numbers (1-based), most useful first."""

    ranking: list[int] = Field(default_factory=list)


def prompt(question: str, contents: list[str]) -> str:
    """The user message: the question, then each memory as ``[n] text`` (n from 1, text
    on one line, cut at :data:`MAX_MEMORY_CHARS`)."""
    lines = [f"Question: {question}", "", "Memories:"]
    lines += [f"[{i}] {' '.join(c.split())[:MAX_MEMORY_CHARS]}" for i, c in enumerate(contents, 1)]
    return "\n".join(lines)


def reorder(n: int, ranking: list[int]) -> list[int] | None:
    """Positions 0..n-1 in the LLM's order: the valid numbers of ``ranking`` (1-based, each once,
    in its order), then every position it left out in the original order. None when it named no
    valid number (the reply is unusable)."""
    named = list(dict.fromkeys(r - 1 for r in ranking if isinstance(r, int) and 1 <= r <= n))
    if not named:
        return None
    chosen = set(named)
    return named + [i for i in range(n) if i not in chosen]


class LLMReranker(JsonLLM):
    """Recall's LLM reranker: :meth:`rerank`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, timeout=settings.recall_llm_timeout_seconds, retries=0)
        self.top = settings.recall_llm_rerank_top

    async def rerank(self, question: str, contents: list[str]) -> list[int] | None:
        """The order of ``contents`` (positions, see :func:`reorder`) the LLM answers for
        ``question``, or None when it failed (timeout, connection error, a reply that does not
        validate or names no memory). ``contents`` beyond :attr:`top` are not sent; the caller
        passes at most that many."""
        contents = contents[: self.top]
        if len(contents) < 2:
            return None
        reply = await self._ask(SYSTEM, prompt(question, contents), Ranking)
        if reply is None:
            return None
        return reorder(len(contents), list(reply.ranking))  # type: ignore[attr-defined]
