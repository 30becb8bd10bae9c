"""Recall's optional LLM query rewriting (issue 18 item 4) against a loopback
OpenAI-compatible server the test starts: rewrites join the arms; a slow or malformed reply
falls back to the original query; without the setting no request is sent."""

from __future__ import annotations

import asyncio
import json

import pytest_asyncio

from automem.common.settings import Settings
from tests.conftest import ScopedService, fresh_scope, start_service
from tests.integration.test_recall import _embedded, _store
from tests.loopback_llm import LoopbackOpenAI


class LoopbackLLM(LoopbackOpenAI):
    """Answers ``{"queries": self.queries}``; ``mode`` good|slow|malformed."""

    def __init__(self) -> None:
        super().__init__()
        self.mode = "good"
        self.queries = ["Kafka event bus decision"]

    async def content(self, body: dict) -> str:
        if self.mode == "slow":
            await asyncio.sleep(3)
        return "no JSON here" if self.mode == "malformed" else json.dumps({"queries": self.queries})


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
