"""The project's OpenAI-compatible LLM client core (optional): JSON-object replies validated
with pydantic, repaired once locally, bounded by a timeout per attempt and retried by tenacity.
Used by enrichment (automem/enrich/llm.py: types, summaries, contradictions) and recall
(automem/recall/llm_query.py: query rewriting; automem/recall/llm_rerank.py: reranking).

Configured when ``OPENAI_API_KEY`` is set, or ``OPENAI_BASE_URL`` and
``CLASSIFICATION_MODEL`` are. Every call:

* asks for a JSON object (``response_format={"type": "json_object"}``);
* validates the reply with a pydantic model; a reply that does not validate is *repaired*
  once locally (JSON pulled out of code fences or surrounding prose, ``confidence`` clamped to
  0..1, a string ``contradicts`` read as a boolean) and otherwise *rejected*
  (:class:`MalformedReply`);
* is bounded by a timeout per attempt — the whole attempt: the HTTP client's own timeout
  bounds each read, so a reply trickling in byte by byte would outlast it — and retried by
  tenacity (``llm_max_retries`` more
  attempts, exponential back-off) on timeouts, connection errors, rate limits, 5xx and
  rejected replies.

When every attempt fails the caller gets ``None`` and falls back to its local rules.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from automem.common.settings import Settings

log = logging.getLogger(__name__)


class MalformedReply(ValueError):
    """The LLM's reply is not the JSON object asked for, even after repair."""


def _extract_json(text: str) -> Any:
    """The first JSON object in ``text`` (code fences and prose around it ignored)."""
    text = re.sub(r"```(?:json)?", "", text)
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end <= start:
        raise MalformedReply("no JSON object in the reply")
    try:
        return json.loads(text[start: end + 1])
    except json.JSONDecodeError as exc:
        raise MalformedReply(f"invalid JSON: {exc}") from None


def parse_reply(text: str, model: type[BaseModel]) -> BaseModel:
    """Validate ``text`` as ``model``; repair once (see module docstring) or raise MalformedReply."""
    try:
        return model.model_validate_json(text)
    except ValidationError:
        pass
    data = _extract_json(text or "")
    if not isinstance(data, dict):
        raise MalformedReply("reply is not a JSON object")
    if "confidence" in data:
        try:
            data["confidence"] = min(max(float(data["confidence"]), 0.0), 1.0)
        except (TypeError, ValueError):
            data["confidence"] = 0.5
    if isinstance(data.get("contradicts"), str):
        data["contradicts"] = data["contradicts"].strip().lower() in ("true", "yes", "1")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise MalformedReply(f"reply does not validate: {exc.errors()[0].get('msg', exc)}") from None


def llm_configured(settings: Settings) -> bool:
    """True when an LLM is configured (see module docstring)."""
    return bool(settings.openai_api_key or (settings.openai_base_url and settings.classification_model))


class JsonLLM:
    """An async OpenAI-compatible client that asks for JSON objects (see the module docstring).

    Args:
        settings: ``openai_api_key``, ``openai_base_url``, ``classification_model``,
            ``llm_max_retries``.
        timeout: seconds per attempt (default ``llm_timeout_seconds``).
        retries: more attempts after the first (default ``llm_max_retries``).
    """

    def __init__(self, settings: Settings, *, timeout: float | None = None, retries: int | None = None) -> None:
        import openai

        self.settings = settings
        self.model = settings.classification_model
        self.retries = settings.llm_max_retries if retries is None else retries
        #: Seconds one attempt may take in all (connect, wait, read the whole reply).
        self.timeout = settings.llm_timeout_seconds if timeout is None else timeout
        self._openai = openai
        self.client = openai.AsyncOpenAI(api_key=settings.openai_api_key or "not-needed",
                                         base_url=settings.openai_base_url or None,
                                         timeout=self.timeout, max_retries=0)
        #: Attempts sent (retries included), replies that validated, and calls that fell back.
        self.calls = 0
        self.successes = 0
        self.failures = 0

    async def _ask(self, system: str, user: str, model: type[BaseModel]) -> BaseModel | None:
        o = self._openai
        retryable = (o.APITimeoutError, o.APIConnectionError, o.RateLimitError, o.InternalServerError,
                     MalformedReply, TimeoutError)
        try:
            async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(1 + max(self.retries, 0)),
                    wait=wait_exponential(multiplier=0.1, max=2.0),
                    retry=retry_if_exception_type(retryable), reraise=True):
                with attempt:
                    self.calls += 1
                    reply = await asyncio.wait_for(self.client.chat.completions.create(
                        model=self.model, temperature=0,
                        response_format={"type": "json_object"},
                        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}]),
                        self.timeout)
                    parsed = parse_reply(reply.choices[0].message.content or "", model)
                    self.successes += 1
                    return parsed
        except Exception as exc:  # noqa: BLE001 - every failure falls back to local rules
            self.failures += 1
            log.warning("LLM call failed; using the local fallback: %s: %s", type(exc).__name__, exc)
        return None

    async def close(self) -> None:
        await self.client.close()
