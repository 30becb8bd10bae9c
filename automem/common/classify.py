"""Rule-based memory-type classification (the fallback when no LLM is configured).

Patterns follow AutoMem's regex classifier in spirit: cue words for each type, first match
in priority order wins; no match is ``Context`` at confidence 0.5.
"""

from __future__ import annotations

import re

from automem.v1 import memory_pb2

_RULES: list[tuple[int, re.Pattern[str]]] = [
    (memory_pb2.MEMORY_TYPE_DECISION,
     re.compile(r"\b(decided|decision|chose|chosen|we will use|going with|settled on|opted)\b", re.IGNORECASE)),
    (memory_pb2.MEMORY_TYPE_PREFERENCE,
     re.compile(r"\b(prefer|prefers|preferred|like[sd]? better|favou?rite|rather than|instead of)\b", re.IGNORECASE)),
    (memory_pb2.MEMORY_TYPE_PATTERN,
     re.compile(r"\b(pattern|usually|typically|tends? to|recurring|every time|whenever)\b", re.IGNORECASE)),
    (memory_pb2.MEMORY_TYPE_INSIGHT,
     re.compile(r"\b(learned|lesson|realized|realised|insight|discovered|turns out|root cause)\b", re.IGNORECASE)),
    (memory_pb2.MEMORY_TYPE_STYLE,
     re.compile(r"\b(style|format(ting)?|naming convention|indentation|tone|code style)\b", re.IGNORECASE)),
    (memory_pb2.MEMORY_TYPE_HABIT,
     re.compile(r"\b(always|never|habit|routine|daily|each morning|every day)\b", re.IGNORECASE)),
]

#: Confidence of a rule match and of the no-match fallback.
RULE_CONFIDENCE = 0.6
FALLBACK_CONFIDENCE = 0.5


def classify(content: str) -> tuple[int, float]:
    """(MemoryType value, confidence) of ``content`` by cue words; Context/0.5 when none match."""
    for memory_type, pattern in _RULES:
        if pattern.search(content):
            return memory_type, RULE_CONFIDENCE
    return memory_pb2.MEMORY_TYPE_CONTEXT, FALLBACK_CONFIDENCE
