"""Recall's optional LLM query rewriting and reranking (issue 18 item 4) against a loopback
OpenAI-compatible server the test starts: rewrites join the arms; a reranking reorders the
best memories; a slow or malformed reply falls back to the path without the LLM; without the
setting or the request's ``rerank`` no request is sent."""

from __future__ import annotations

import asyncio
import json
import time

import pytest_asyncio

from automem.common.settings import Settings
from tests.conftest import ScopedService, fresh_scope, start_service
from tests.integration.test_recall import _embedded, _store
from tests.loopback_llm import LoopbackOpenAI


class LoopbackLLM(LoopbackOpenAI):
    """Answers the rewriting prompt ``{"queries": self.queries}`` and the reranking prompt
    ``{"ranking": self.ranking}``; ``mode`` good|slow|malformed."""

    def __init__(self) -> None:
        super().__init__()
        self.mode = "good"
        self.queries = ["Kafka event bus decision"]
        self.ranking = [3, 1]

    async def content(self, body: dict) -> str:
        if self.mode == "slow":
            await asyncio.sleep(3)
        if self.mode == "malformed":
            return "no JSON here"
        if '"ranking"' in body["messages"][0]["content"]:
            return json.dumps({"ranking": self.ranking})
        return json.dumps({"queries": self.queries})


@pytest_asyncio.fixture(loop_scope="session")
async def llm_recall(settings: Settings):
    llm = LoopbackLLM()
    await llm.start()
    running = await start_service(settings.model_copy(update={
        "openai_base_url": f"http://127.0.0.1:{llm.port}/v1", "openai_api_key": "test",
        "classification_model": "fake-model", "recall_llm_rewrite": True, "recall_llm_timeout_seconds": 0.5,
        # enrichment's LLM calls go to the same server; keep them short
        "llm_timeout_seconds": 0.5, "llm_max_retries": 0}))
    try:
        yield ScopedService(running, fresh_scope()), llm
    finally:
        await running.runner.stop()
        await llm.stop()


def _asked_rewrite(llm: LoopbackLLM) -> list[dict]:
    return [b for b in llm.requests if '"queries"' in b["messages"][0]["content"]]


def _asked_rerank(llm: LoopbackLLM) -> list[dict]:
    return [b for b in llm.requests if '"ranking"' in b["messages"][0]["content"]]


async def _recall(http, **params) -> dict:
    r = await http.get("/recall", params=params)
    assert r.status_code == 200, r.text
    return r.json()


async def test_llm_rerank_reorders_the_best_when_asked_and_falls_back(llm_recall) -> None:
    service, llm = llm_recall
    async with service.http() as http:
        for text in ("The release train leaves on Tuesday", "The release train was moved to Tuesday mornings",
                     "Release notes go out after the train leaves"):
            await _store(http, text)
        await _embedded(service, 3)
        query = "when does the release train leave?"
        asked = len(_asked_rerank(llm))
        plain = await _recall(http, query=query, limit=3)
        assert len(_asked_rerank(llm)) == asked  # not asked for: no reranking call
        assert "llm_rerank" not in plain["arms"] + plain["degraded"]
        before = [h["id"] for h in plain["results"]]
        assert len(before) == 3

        llm.ranking = [3, 1, 7, 3]  # 7 is no memory, 3 is named twice; 2 is left out
        body = await _recall(http, query=query, limit=3, rerank="true")
        assert [h["id"] for h in body["results"]] == [before[2], before[0], before[1]]
        assert "llm_rerank" in body["arms"] and "llm_rerank" not in body["degraded"]
        prompt = _asked_rerank(llm)[-1]["messages"][1]["content"]
        assert prompt.startswith(f"Question: {query}")
        assert f"[1] {plain['results'][0]['memory']['content']}" in prompt
        # Scores stay the ranking's; only the order changed.
        assert {h["id"]: h["score"] for h in body["results"]} == {h["id"]: h["score"] for h in plain["results"]}
        # The request's priority ids keep the lead the rerank would take from them (re-check of
        # this session's fixes: the rerank reordered the tier after they were put first).
        body = await _recall(http, query=query, limit=3, rerank="true", priority_ids=before[1])
        assert [h["id"] for h in body["results"]] == [before[1], before[2], before[0]], body["results"]

        for mode, ranking in (("slow", [3, 1]), ("malformed", [3, 1]), ("good", [9])):
            llm.mode, llm.ranking = mode, ranking
            body = await _recall(http, query=query, limit=3, rerank="true")
            assert [h["id"] for h in body["results"]] == before, mode
            assert "llm_rerank" in body["degraded"] and "llm_rerank" not in body["arms"], mode
        # A reply trickling in a byte every 0.1 s (no read waits past the timeout) is still cut
        # at the recall timeout (0.5 s here) as a whole.
        llm.mode, llm.ranking, llm.drip = "good", [3, 1], 0.1
        started = time.monotonic()
        body = await _recall(http, query=query, limit=3, rerank="true")
        assert time.monotonic() - started < 5
        assert [h["id"] for h in body["results"]] == before and "llm_rerank" in body["degraded"]
        llm.drip = 0.0


async def test_rerank_without_an_llm_answers_the_plain_order_and_says_so(service) -> None:
    async with service.http() as http:
        for text in ("Backups run at midnight", "Backups are kept for thirty days"):
            await _store(http, text)
        await _embedded(service, 2)
        plain = await _recall(http, query="backups", limit=2)
        body = await _recall(http, query="backups", limit=2, rerank="true")
        assert [h["id"] for h in body["results"]] == [h["id"] for h in plain["results"]]
        assert body["degraded"] == ["llm_rerank"] and "llm_rerank" not in body["arms"]
        # A listing (no query) has nothing to rerank.
        listed = await _recall(http, limit=2, rerank="true")
        assert "llm_rerank" not in listed["arms"] + listed["degraded"]


async def test_the_rerank_setting_reranks_every_query_recall(settings: Settings) -> None:
    llm = LoopbackLLM()
    await llm.start()
    running = await start_service(settings.model_copy(update={
        "openai_base_url": f"http://127.0.0.1:{llm.port}/v1", "openai_api_key": "test",
        "classification_model": "fake-model", "recall_llm_rerank": True, "recall_llm_rerank_top": 2,
        "recall_llm_timeout_seconds": 2.0, "llm_timeout_seconds": 0.5, "llm_max_retries": 0}))
    try:
        service = ScopedService(running, fresh_scope())
        async with service.http() as http:
            for text in ("Lunch is at noon", "Lunch moved to one o'clock", "Lunch menus are on the wiki"):
                await _store(http, text)
            await _embedded(service, 3)
            llm.ranking = [2]
            body = await _recall(http, query="lunch", limit=3)
            assert "llm_rerank" in body["arms"]
            prompt = _asked_rerank(llm)[-1]["messages"][1]["content"]
            assert "[2]" in prompt and "[3]" not in prompt  # only the best recall_llm_rerank_top are sent
            got = [h["id"] for h in body["results"]]
            asked = len(_asked_rerank(llm))
            off = await _recall(http, query="lunch", limit=3, rerank="false")  # the request opts out
            assert "llm_rerank" not in off["arms"] + off["degraded"] and len(_asked_rerank(llm)) == asked
            llm.mode = "malformed"
            plain = [h["id"] for h in (await _recall(http, query="lunch", limit=3))["results"]]
            assert got == [plain[1], plain[0], plain[2]]
    finally:
        await running.runner.stop()
        await llm.stop()


async def test_llm_rewrites_join_the_arms_and_failures_fall_back(llm_recall) -> None:
    service, llm = llm_recall
    async with service.http() as http:
        target = await _store(http, "We picked Kafka as the event bus after the load test")
        await _store(http, "The office plants need watering on Fridays")
        await _embedded(service, 2)
        query = "what did we settle on for moving messages between services?"
        r = await http.get("/recall", params={"query": query, "limit": 2})
        top = r.json()["results"][0]
        assert top["id"] == target
        assert top["score_components"]["keyword"] > 0  # only the rewrite shares words with it
        assert _asked_rewrite(llm)[-1]["messages"][1]["content"] == query
        for mode in ("slow", "malformed"):
            llm.mode = mode
            r = await http.get("/recall", params={"query": query, "limit": 2})
            assert r.status_code == 200, r.text
            assert all("keyword" not in h["score_components"] for h in r.json()["results"])
        llm.mode = "good"


def test_rewriter_only_with_the_setting_and_an_llm(settings: Settings) -> None:
    from automem.recall.servicer import RecallServicer

    llm = {"openai_base_url": "http://127.0.0.1:9/v1", "classification_model": "m"}
    assert RecallServicer(settings.model_copy(update=llm), None, None, None).rewriter is None  # setting off
    assert RecallServicer(settings.model_copy(update={"recall_llm_rewrite": True, "openai_api_key": "",
                                                      "openai_base_url": ""}), None, None, None).rewriter is None
    on = RecallServicer(settings.model_copy(update={**llm, "recall_llm_rewrite": True}), None, None, None)
    assert on.rewriter is not None and on.rewriter.retries == 0
