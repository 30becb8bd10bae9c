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

The client core (JSON replies, repair, timeout, retries) is automem/common/llm.py, shared
with recall's query rewriting. When every attempt fails the caller gets ``None`` and falls
back to the local rules
(``automem.common.classify``) or an extractive summary
(:func:`automem.common.text.extractive_summary`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from automem.common.llm import JsonLLM, MalformedReply, llm_configured, parse_reply
from automem.common.model import TYPE_NAMES

__all__ = ["LLM", "Classification", "Contradiction", "MalformedReply", "llm_configured", "parse_reply"]

_TYPES = {name.lower(): name for name in TYPE_NAMES.values() if name != "MetaPattern"}


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


class LLM(JsonLLM):
    """The enrichment LLM client (async)."""

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

