"""Optional LLM query rewriting for recall (issue 18 item 4): the question is decomposed into
up to ``recall_llm_max_queries`` short search queries, which join the original in the arms
(the vector arm keeps each memory's best cosine over the queries, the lexical arm its best
BM25); ranking still reads the original question (author, temporal, exact match).

Off unless ``AUTOMEM_RECALL_LLM_REWRITE=true`` and an LLM is configured
(automem/common/llm.py). One attempt, bounded by ``recall_llm_timeout_seconds`` (default 2 s:
a recall waits for it); any failure — timeout, connection error, a reply that does not
validate — leaves the original query alone, so the no-LLM path is the fallback. The default
path, and every figure in docs/benchmarks.md, uses no LLM.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from automem.common.llm import JsonLLM
from automem.common.settings import Settings

SYSTEM = ("You turn a question asked of an AI agent's long-term memory into search queries. Reply with a JSON "
          'object {"queries": [...]}: at most %d short standalone search queries that together cover what the '
          "question asks (one per person, thing or period it asks about), keeping names and key terms, "
          "without question words.")

#: Longest query kept from a reply (characters); longer ones are cut.
MAX_QUERY_CHARS = 300


class Rewrite(BaseModel):
    """Reply of the rewriting prompt."""

    queries: list[str] = Field(default_factory=list)


class QueryRewriter(JsonLLM):
    """Recall's query rewriter: :meth:`rewrite`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, timeout=settings.recall_llm_timeout_seconds, retries=0)
        self.max_queries = settings.recall_llm_max_queries

    async def rewrite(self, query: str) -> list[str]:
        """Up to ``max_queries`` search queries for ``query`` (stripped, de-duplicated, none
        equal to ``query``, each at most :data:`MAX_QUERY_CHARS` characters); ``[]`` when the
        LLM fails or returns none."""
        reply = await self._ask(SYSTEM % self.max_queries, query, Rewrite)
        if reply is None:
            return []
        out: list[str] = []
        for q in reply.queries:  # type: ignore[attr-defined]
            q = " ".join(str(q).split())[:MAX_QUERY_CHARS]
            if q and q.lower() != query.strip().lower() and q not in out:
                out.append(q)
        return out[: self.max_queries]
