"""Optional LLM calls (type classification, summaries, contradiction checks) through the
``openai`` client, against OpenAI or any OpenAI-compatible server (Ollama, vLLM...).

Configured when ``OPENAI_API_KEY`` is set, or ``OPENAI_BASE_URL`` and
``CLASSIFICATION_MODEL`` are. Every call:

* asks for a JSON object (``response_format={"type": "json_object"}``);
* validates the reply with a pydantic model; a reply that does not validate is *repaired*
  once locally (JSON pulled out of code fences or surrounding prose, type names matched
  case-insensitively, confidence clamped to 0..1) and otherwise *rejected*
  (:class:`MalformedReply`);
* is bounded by ``llm_timeout_seconds`` per attempt and retried by tenacity
  (``llm_max_retries`` more attempts, exponential back-off) on timeouts, connection errors,
  rate limits, 5xx and rejected replies.

When every attempt fails the caller gets ``None`` and falls back to the local rules
(``automem.common.classify``) or an extractive summary
(:func:`automem.common.text.extractive_summary`).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from automem.common.model import TYPE_NAMES
from automem.common.settings import Settings

log = logging.getLogger(__name__)

_TYPES = {name.lower(): name for name in TYPE_NAMES.values() if name != "MetaPattern"}


class MalformedReply(ValueError):
    """The LLM's reply is not the JSON object asked for, even after repair."""


class Classification(BaseModel):
    """Reply of the classification/summary prompt."""

    type: str
    confidence: float = Field(ge=0.0, le=1.0)
    summary: str | None = None

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        key = value.strip().lower().removeprefix("memory_type_")
        if key not in _TYPES:
            raise ValueError(f"unknown type {value!r}")
        return _TYPES[key]


class Contradiction(BaseModel):
    """Reply of the contradiction prompt."""

    contradicts: bool
    reason: str = ""


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


class LLM:
    """The enrichment LLM client (async)."""

    def __init__(self, settings: Settings) -> None:
        import openai

        self.settings = settings
        self.model = settings.classification_model
        self._openai = openai
        self.client = openai.AsyncOpenAI(api_key=settings.openai_api_key or "not-needed",
                                         base_url=settings.openai_base_url or None,
                                         timeout=settings.llm_timeout_seconds, max_retries=0)
        #: Attempts sent (retries included), replies that validated, and calls that fell back.
        self.calls = 0
        self.successes = 0
        self.failures = 0

    async def _ask(self, system: str, user: str, model: type[BaseModel]) -> BaseModel | None:
        o = self._openai
        retryable = (o.APITimeoutError, o.APIConnectionError, o.RateLimitError, o.InternalServerError,
                     MalformedReply)
        try:
            async for attempt in AsyncRetrying(
                    stop=stop_after_attempt(1 + max(self.settings.llm_max_retries, 0)),
                    wait=wait_exponential(multiplier=0.1, max=2.0),
                    retry=retry_if_exception_type(retryable), reraise=True):
                with attempt:
                    self.calls += 1
                    reply = await self.client.chat.completions.create(
                        model=self.model, temperature=0,
                        response_format={"type": "json_object"},
                        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}])
                    parsed = parse_reply(reply.choices[0].message.content or "", model)
                    self.successes += 1
                    return parsed
        except Exception as exc:  # noqa: BLE001 - every failure falls back to local rules
            self.failures += 1
            log.warning("LLM call failed; using the local fallback: %s: %s", type(exc).__name__, exc)
        return None

    async def classify(self, content: str, summary_chars: int | None) -> Classification | None:
        """Type (one of AutoMem's seven) and confidence of ``content``; a summary of at most
        ``summary_chars`` characters when asked. None on failure."""
        types = ", ".join(_TYPES.values())
        system = ("You classify memories of an AI agent. Reply with a JSON object "
                  f'{{"type": one of {types}, "confidence": number 0..1'
                  + (f', "summary": a summary of at most {summary_chars} characters' if summary_chars else "")
                  + "}.")
        result = await self._ask(system, content, Classification)
        if result is not None and summary_chars and result.summary:
            result.summary = result.summary.strip()[:summary_chars]
        return result  # type: ignore[return-value]

    async def contradicts(self, new: str, old: str) -> Contradiction | None:
        """Whether ``new`` contradicts ``old`` (so it should supersede it). None on failure."""
        system = ('Two memories of an AI agent. Reply with a JSON object {"contradicts": true|false, '
                  '"reason": short text}: true only when the NEW memory states something incompatible with '
                  "the OLD one (a changed value, a reversal), so the OLD one is no longer true.")
        return await self._ask(system, f"OLD: {old}\nNEW: {new}", Contradiction)  # type: ignore[return-value]

    async def close(self) -> None:
        await self.client.close()
