"""Query understanding and structure signals for recall ranking, without an LLM (issue 18).
Pure functions, no I/O.

Three signals, each a score component of :func:`automem.recall.ranking.rank` with its own
weight (a setting; 0 turns it off). Measured with ``bench/recall_lab18.py`` on the public
LoCoMo conversations (tuned on conv-26, checked on conv-30 / conv-41) and on the synthetic
agent-memory set of ``bench/synth_memories.py``; docs/benchmarks.md "Recall quality (issue 18)".

* **author** — a memory written as a transcript line, ``"Name: text"``, has ``Name`` as its
  author (the speaker as an entity). When every word of the author's name occurs in the query
  with the same capitalisation (``"What does Melanie do to destress?"``), that author's
  memories are favoured: a question about a person is mostly answered by what that person
  said. Case-sensitive matching keeps a lower-case query word ("decision") from matching a
  ``"Decision: ..."`` label.
* **session** — the time bucket (UTC day of the event time) of the best-scored candidates
  lends weight to the other candidates of that bucket: evidence of one episode sits together
  in time, and a question answered by several turns of one session finds the others through
  the first (the graph's time structure used inside ranking, not appended after the page).
* **author re-query** — when the first round's candidates include memories by an author the
  query names, the arms are asked again with the query *without* that name
  (:func:`strip_authors`): the author component already favours the person's memories, and
  the name — present in every one of them — no longer crowds out the words that say what is
  asked ("What activities does Melanie partake in?" -> "What activities does partake in?").
  A second retrieval round seeded by the first one's authors.
* **lexical feedback** (off by default) — the words of the best-ranked memories, other than
  the query's, join the lexical arm's query at a small weight and the candidates are ranked
  again (pseudo-relevance feedback, RM3-like): a question whose answer shares few words with
  it ("Would X enjoy ...?") reaches the turn through the words of the turns it did find.
  :func:`feedback_terms`.
* **temporal** — a question asking for a time (``when ...``, ``how long ...``, ``what year
  ...``) favours memories that state one (``yesterday``, ``last week``, a month, a year...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from automem.common.text import analyze

__all__ = [
    "FEEDBACK_TERMS",
    "SESSION_SEEDS",
    "author_of",
    "feedback_terms",
    "has_time_expression",
    "is_temporal_question",
    "names_author",
    "query_words",
    "session_spread",
    "strip_authors",
]

#: ``Name: text`` at the start of a memory: one to four words, the first capitalised, then a
#: colon and white space. ``"Dr. Ada Lovelace: ..."`` -> ``"Dr. Ada Lovelace"``.
_AUTHOR = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,3}):\s")
_WORD = re.compile(r"[\w']+")

_TEMPORAL_QUESTION = re.compile(
    r"^\s*(when|since when|how long|how many (days|weeks|months|years)|"
    r"what (year|month|day|date|time|week))\b", re.IGNORECASE)

# Matched against the lower-cased text, so without IGNORECASE; the lookahead skips the word
# starts no alternative can begin with (the first letters of the words below, and the years'
# 1 and 2). Both make the test ~3-5x faster on LoCoMo turns, and recall runs it on every
# candidate of a "when" question (docs/benchmarks.md, "Recall's Python work per candidate").
_TIME_EXPRESSION = re.compile(
    r"\b(?=[adfjlmnorstwy12])(yesterday|today|tonight|tomorrow|ago|recently|"
    r"(last|next|this) (week|weekend|month|year|night|morning|evening|summer|winter|spring|fall|\w+day)|"
    r"(mon|tues|wednes|thurs|fri|satur|sun)day|january|february|march|april|may|june|july|august|"
    r"september|october|november|december|(19|20)\d\d)\b")

#: Best-scored candidates whose time buckets lend weight (:func:`session_spread`); 10 = the
#: page most recalls return. LoCoMo conv-26: 5 and 10 seeds within 0.005 recall@10.
SESSION_SEEDS = 10


#: Most expansion terms :func:`feedback_terms` returns. LoCoMo conv-26: with 2 feedback
#: memories every term of theirs fits (10 terms: recall@10 0.827, 20: 0.833).
FEEDBACK_TERMS = 20


def feedback_terms(memories: Sequence[tuple[str, float]], query: str, limit: int = FEEDBACK_TERMS
                   ) -> dict[str, float]:
    """Expansion terms for the lexical arm from the best-ranked memories (pseudo-relevance
    feedback; Lavrenko & Croft's relevance model, as RM3 uses it, without the IDF term
    selection: the service has no collection statistics at hand).

    Args:
        memories: ``(content, score)`` of the feedback memories (the first ranking's best);
            a score below 0 counts as 0.
        query: the query; its BM25 terms are not returned.
        limit: most terms returned.

    Returns:
        BM25 term (automem/common/text.py ``analyze``: stemmed, stop words dropped) -> weight
        in (0, 1]: per term, the sum over the memories of ``score share x tf / length``,
        divided by the largest; the ``limit`` heaviest (ties: term order). Empty when the
        memories have no term outside the query or no positive score.

    ``feedback_terms([("Mel: I love painting sunsets", 1.0)], "What does Mel like?")`` ->
    ``{"love": 1.0, "paint": 1.0, "sunset": 1.0}``.
    """
    total = sum(max(score, 0.0) for _, score in memories)
    if total <= 0:
        return {}
    asked = set(analyze(query))
    weight: dict[str, float] = {}
    for content, score in memories:
        terms = analyze(content)
        share = max(score, 0.0) / total / max(len(terms), 1)
        for t in terms:
            if t not in asked:
                weight[t] = weight.get(t, 0.0) + share
    best = sorted(weight, key=lambda t: (-weight[t], t))[:max(limit, 0)]
    hi = max((weight[t] for t in best), default=0.0)
    return {t: weight[t] / hi for t in best} if hi > 0 else {}


def author_of(content: str) -> str | None:
    """The author of a transcript-style memory (``"Name: text"``), or None.

    ``author_of("Caroline: I went to a support group")`` -> ``"Caroline"``;
    ``author_of("I went to a support group")`` -> None.
    """
    m = _AUTHOR.match(content)
    return m.group(1) if m else None


def query_words(query: str) -> frozenset[str]:
    """The query's words, case kept, possessive ``'s`` dropped: ``"Melanie's kids"`` ->
    ``{"Melanie", "kids"}``."""
    return frozenset(w.removesuffix("'s") for w in _WORD.findall(query))


def names_author(words: frozenset[str], author: str) -> bool:
    """True when every word of ``author`` is among the query's ``words`` (case-sensitive)."""
    parts = _WORD.findall(author)
    return bool(parts) and all(p in words for p in parts)


def is_temporal_question(query: str) -> bool:
    """True for a question that asks for a time: ``when``, ``since when``, ``how long``,
    ``how many days/weeks/months/years``, ``what year/month/day/date/time/week``."""
    return bool(_TEMPORAL_QUESTION.match(query))


def has_time_expression(content: str) -> bool:
    """True when ``content`` states a time: a relative day or period (``yesterday``, ``last
    week``, ``next month``, ``ago``...), a weekday, a month name or a year 1900-2099, in any
    letter case (the test runs on ``content.lower()``)."""
    return bool(_TIME_EXPRESSION.search(content.lower()))


def session_spread(base: Mapping[str, float], bucket: Mapping[str, object],
                   seeds: int = SESSION_SEEDS) -> dict[str, float]:
    """Per candidate, the summed ``base`` score of the top ``seeds`` candidates in its time
    bucket, divided by the largest such sum (so in [0, 1]; 0 for a bucket with no seed).

    Args:
        base: candidate id -> score before this signal (ties: id order).
        bucket: candidate id -> its time bucket (any hashable; None = no bucket).
        seeds: how many of the best candidates lend weight.

    ``session_spread({"a": 1.0, "b": 0.5, "c": 0.2}, {"a": 1, "b": 2, "c": 1}, seeds=2)``
    -> ``{"a": 1.0, "b": 0.5, "c": 1.0}``.
    """
    top = sorted(base, key=lambda i: (-base[i], i))[:max(seeds, 0)]
    mass: dict[object, float] = {}
    for i in top:
        b = bucket.get(i)
        if b is not None:
            mass[b] = mass.get(b, 0.0) + max(base[i], 0.0)
    hi = max(mass.values(), default=0.0)
    if hi <= 0:
        return {i: 0.0 for i in base}
    return {i: mass.get(bucket.get(i), 0.0) / hi if bucket.get(i) is not None else 0.0 for i in base}


def strip_authors(query: str, authors: Iterable[str]) -> str:
    """``query`` without the names in ``authors`` that it names (:func:`names_author`), each
    with a possessive ``'s``; white space collapsed. The query itself when it names none of
    them or nothing but them.

    ``strip_authors("What do Melanie's kids like?", ["Melanie", "Bob"])`` ->
    ``"What do kids like?"``.
    """
    words = query_words(query)
    out = query
    for author in sorted(set(authors), key=len, reverse=True):
        if names_author(words, author):
            out = re.sub(r"(?<![\w'])" + re.escape(author) + r"(?:'s)?(?![\w'])", " ", out)
    out = " ".join(out.split())
    return out if _WORD.search(out) and out != " ".join(query.split()) else query
