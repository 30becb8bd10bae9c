"""Text normalisation for the lexical recall arms: tokenising, stop words, stemming, BM25
sparse vectors and FalkorDB (RediSearch) full-text query sanitising.

Pure functions, no I/O, no model: the same code runs when a memory is written (to build its
sparse vector) and when a query is read, so both sides always normalise alike.

* :func:`text_key` — the one comparison key of text: Unicode NFKC, then full case folding
  (``STRASSE``, ``straße`` and ``Straße`` all give ``strasse``; NFC and NFD spellings give
  one key). Tags, tag filters, exclusions and the lexical arms compare these keys; stored
  text is never changed.
* :func:`tokenize` — case-folded runs of letters and digits, any script (apostrophes inside
  words are dropped:
  ``caroline's`` -> ``caroline``, ``don't`` -> ``dont``; the ``'s`` clitic is stripped first).
* :data:`STOP_WORDS` — a short English function-word list (articles, pronouns, auxiliaries,
  prepositions, conjunctions, question words). Deliberately smaller than spaCy's 326-word
  list, which also drops content words such as ``name``, ``move``, ``show`` or ``first``
  that LoCoMo questions depend on.
* :func:`porter_stem` — M. F. Porter's 1980 suffix-stripping algorithm ("An algorithm for
  suffix stripping", Program 14(3)), from the snowballstemmer package.
* :func:`analyze` — tokenize, drop stop words, stem: the terms that BM25 sees.
* :func:`bm25_doc_weights` / :func:`bm25_query_weights` / :func:`term_index` — a BM25
  sparse vector for Qdrant: the document side carries the saturated term frequency
  ``tf*(k1+1) / (tf + k1*(1-b+b*len/avg_len))`` computed client-side; the server multiplies
  by IDF (Qdrant ``modifier: idf``), the query side carries 1 per distinct term.
* :func:`fulltext_query` — turns any user text into a RediSearch query that never raises a
  syntax error: terms are reduced to ``[A-Za-z0-9]`` runs and OR-ed.
* :func:`extractive_summary` — a local summary from the same terms (enrichment's fallback
  without an LLM; consolidation's cluster summaries).
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterable

import regex
import snowballstemmer

__all__ = [
    "BM25_AVG_LEN",
    "BM25_B",
    "BM25_K1",
    "STOP_WORDS",
    "analyze",
    "bm25_doc_weights",
    "bm25_query_weights",
    "extractive_summary",
    "fulltext_query",
    "is_blank",
    "porter_stem",
    "term_index",
    "text_key",
    "tokenize",
]

_APOS = re.compile(r"[\u2018\u2019\u02bc`]")
_CLITIC_S = re.compile(r"'s\b")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

#: English function words removed before BM25 (lower case, apostrophes removed as
#: :func:`tokenize` does). Articles, pronouns, auxiliaries/modals, prepositions,
#: conjunctions, question words and a few fillers; single letters are dropped separately.
STOP_WORDS: frozenset[str] = frozenset(
    ["a", "an", "the", "and", "or", "but", "nor", "so", "yet", "if", "then", "than", "that", "this", "these", "those", "there", "here", "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves", "you", "your", "yours", "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "is", "am", "are", "was", "were", "be", "been", "being", "do", "does", "did", "doing", "have", "has", "had", "having", "will", "would", "shall", "should", "can", "could", "may", "might", "must", "im", "ive", "id", "ill", "youre", "youve", "youd", "youll", "hes", "shes", "its", "were", "theyre", "theyve", "theyd", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "havent", "hasnt", "hadnt", "wont", "wouldnt", "cant", "couldnt", "shouldnt", "of", "to", "in", "on", "at", "by", "for", "with", "from", "into", "onto", "about", "as", "over", "under", "up", "down", "out", "off", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "not", "no", "also", "just", "very", "too", "any", "some", "all", "each", "both", "oh", "yeah", "hey", "wow", "ok", "okay", "really"]
)


#: Version of :func:`text_key`'s rule. Keys written under an older rule are rewritten at start
#: by automem/enrich/textkeys.py (version 0: ``str.lower()`` without normalisation).
TEXT_KEY_VERSION = 1


#: Characters a key's display name may not hold: C0 and C1 controls, DEL, the soft hyphen,
#: zero-width and bidi format characters, line and paragraph separators, the BOM and the
#: interlinear annotation marks (Unicode categories Cc, Cf, Zl, Zp as a terminal meets them).
#: The REST schema states the same class (automem/gateway/schemas.py ``ApiKeyBody``); the
#: admin service refuses them (automem/ingest/admin.py ``CreateApiKey``).
UNPRINTABLE_CLASS = ("\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb")
UNPRINTABLE_NAME = re.compile(f"[{UNPRINTABLE_CLASS}]")

#: A ``regex`` character class of the characters that show nothing, from the Unicode
#: Character Database as the ``regex`` package ships it: whitespace as ``str.isspace`` reads
#: it (general category Zs, bidirectional classes WS, B and S), format characters (category
#: Cf: U+200B zero width space, U+202E right-to-left override, U+2060 word joiner, U+FEFF,
#: U+00AD soft hyphen, ...), the Default_Ignorable_Code_Point property (DerivedCoreProperties.txt:
#: besides most of Cf the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, the combining
#: grapheme joiner U+034F, the variation selectors, ...: characters a renderer shows nothing
#: for), and U+2800 braille pattern blank (a braille cell without dots; not default
#: ignorable, but shown as a space).
INVISIBLE_CLASS = (r"[\p{Zs}\p{Bidi_Class=WS}\p{Bidi_Class=B}\p{Bidi_Class=S}\p{Cf}"
                   r"\p{Default_Ignorable_Code_Point}\u2800]")
_VISIBLE = regex.compile(r"[^" + INVISIBLE_CLASS[1:])


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: it is empty, or holds only characters of
    :data:`INVISIBLE_CLASS` (whitespace, format characters, default-ignorable code points,
    U+2800). A visible character anywhere makes it not blank: Korean text keeps its Hangul
    syllables and jamo, an emoji ZWJ sequence its emoji, right-to-left text its letters
    around the bidi marks. Pure, never raises."""
    return _VISIBLE.search(text) is None


def text_key(text: str) -> str:
    """The comparison key of ``text``: ``NFKC(casefold(NFKC(text)))``.

    Unicode's compatibility caseless match (The Unicode Standard, ch. 3.13, D146): two
    strings are the same for a person when their keys are equal. NFC and NFD spellings of
    ``café`` give one key; ``casefold`` (not ``lower``) folds ``ß`` to ``ss`` so ``STRASSE``
    matches ``straße``; NFKC rather than NFC also folds compatibility forms people do not tell
    apart when typing (full-width ``ＴＡＧ``, the ``ﬁ`` ligature, ``ｶ``), as entity names already
    are (automem/enrich/entities.py); the price is that ``x²`` and ``x2`` share a key. The
    outer NFKC re-composes what folding decomposed. Pure; ``str`` in, ``str`` out, never
    raises. Used for tags (node ``tags_lower`` / ``entity_tags``, payload ``tags_lower`` /
    ``tag_prefixes``), tag filters and exclusions, and the BM25 / full-text terms. Stored
    content and tags keep their exact spelling.
    """
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


def tokenize(text: str) -> list[str]:
    """Case-folded (:func:`text_key`) word tokens of ``text``: runs of Unicode letters/digits; ``_`` and
    punctuation separate tokens; an inner apostrophe is removed, a ``'s`` clitic dropped.

    ``"Caroline's 2 dogs don't bark!"`` -> ``["caroline", "2", "dogs", "dont", "bark"]``.
    Never raises; non-string input is converted with ``str``.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    s = _APOS.sub("'", text_key(text))
    s = _CLITIC_S.sub("", s)
    return [w.replace("'", "") for w in _WORD.findall(s)]


# --- Porter stemmer (1980) --------------------------------------------------------------


_PORTER = snowballstemmer.stemmer("porter")


def porter_stem(word: str) -> str:
    """M. F. Porter's 1980 suffix-stripping stemmer ("An algorithm for suffix stripping",
    Program 14(3)), from the snowballstemmer package: ``"painting" -> "paint"``. Words of
    one or two letters are kept as they are, as in Porter's reference implementation."""
    return word if len(word) <= 2 else _PORTER.stemWord(word)


_STEM_CACHE: dict[str, str] = {}


def _stem_cached(word: str) -> str:
    s = _STEM_CACHE.get(word)
    if s is None:
        s = porter_stem(word)
        if len(_STEM_CACHE) < 200_000:
            _STEM_CACHE[word] = s
    return s


def analyze(text: str, *, stem: bool = True, stop_words: frozenset[str] | None = STOP_WORDS) -> list[str]:
    """The BM25 terms of ``text``: :func:`tokenize`, drop ``stop_words`` and one-letter
    tokens, then :func:`porter_stem` (when ``stem``). Order and repeats are kept.

    ``"When did Caroline go to the LGBTQ support groups?"`` ->
    ``["carolin", "go", "lgbtq", "support", "group"]``.
    """
    out = []
    for t in tokenize(text):
        if len(t) < 2 or (stop_words is not None and t in stop_words):
            continue
        out.append(_stem_cached(t) if stem else t)
    return out


# --- BM25 as sparse vectors -------------------------------------------------------------

#: BM25 term-frequency saturation; 1.2 is the common default (Robertson & Zaragoza 2009;
#: Lucene, Qdrant's examples). On LoCoMo k1 in 0.9-1.5 changed recall@10 by < 0.01
#: (bench/retrieval_lab.py).
BM25_K1 = 1.2
#: BM25 length normalisation; 0.75 is the common default.
BM25_B = 0.75
#: Average document length in analysed terms, used client-side because a sparse vector is
#: built one memory at a time. Measured on LoCoMo's 1,451 turns: 13.0 terms of content, 19.6
#: with the previous turn at :data:`CONTEXT_WEIGHT` (what :func:`bm25_doc_weights` counts).
BM25_AVG_LEN = 20.0
#: Weight of the PRECEDED_BY neighbour's terms in a memory's BM25 document. In a conversation
#: the answer often sits in the turn after the one that names the topic. LoCoMo recall@10
#: (BM25 alone, bench/retrieval_lab.py --sweep): 0.635 without context, 0.705 / 0.713 /
#: 0.701 / 0.693 at weights 0.3 / 0.5 / 0.7 / 1.0 (MRR 0.490 / 0.500 / 0.495 / 0.483 / 0.443).
#: Set 0 for memories whose time neighbour is unrelated.
CONTEXT_WEIGHT = 0.5


def term_index(term: str) -> int:
    """Stable non-negative 31-bit index of ``term`` in the sparse vector space (CRC-32).

    Collisions are possible but rare at this vocabulary size and only merge two terms'
    statistics."""
    return zlib.crc32(term.encode("utf-8")) & 0x7FFFFFFF


def bm25_doc_weights(
    terms: Iterable[str],
    context: Iterable[str] = (),
    *,
    context_weight: float = CONTEXT_WEIGHT,
    k1: float = BM25_K1,
    b: float = BM25_B,
    avg_len: float = BM25_AVG_LEN,
) -> dict[int, float]:
    """Document-side BM25 weights ``{term_index: tf*(k1+1) / (tf + k1*(1-b+b*dl/avg_len))}``.

    Args:
        terms: the analysed terms (:func:`analyze`) of the memory's content.
        context: the analysed terms of its context (the previous memory of the same scope);
            each occurrence counts ``context_weight`` towards tf and dl.
    Returns ``{}`` when both are empty. Multiply by the term's IDF (Qdrant's ``idf``
    modifier, ``ln(1 + (N - n + 0.5) / (n + 0.5))``) and sum over the query's terms to get
    the BM25 score.
    """
    tf: dict[str, float] = {}
    for t in terms:
        tf[t] = tf.get(t, 0.0) + 1.0
    if context_weight > 0:
        for t in context:
            tf[t] = tf.get(t, 0.0) + context_weight
    if not tf:
        return {}
    dl = sum(tf.values())
    norm = k1 * (1.0 - b + b * dl / max(avg_len, 1e-9))
    out: dict[int, float] = {}
    for term, f in tf.items():
        i = term_index(term)
        out[i] = out.get(i, 0.0) + f * (k1 + 1.0) / (f + norm)
    return out


def bm25_query_weights(terms: Iterable[str]) -> dict[int, float]:
    """Query-side weights: 1.0 per distinct analysed term (repeats do not count twice)."""
    return {term_index(t): 1.0 for t in dict.fromkeys(terms)}


# --- FalkorDB / RediSearch full-text query ----------------------------------------------

# word characters of RediSearch's default tokenizer: letters, digits and "_" (any script)
_FT_WORD = re.compile(r"\w+")


def fulltext_query(text: str, *, stop_words: frozenset[str] | None = STOP_WORDS, max_terms: int = 32) -> str:
    """A RediSearch query for ``db.idx.fulltext.queryNodes`` that matches memories containing
    *any* of the words of ``text``.

    Every run of word characters (Unicode letters, digits, ``_`` — the characters RediSearch
    keeps inside a token, so ``add_episode`` stays one term as it was indexed) becomes one
    term, with leading/trailing ``_`` stripped. Every RediSearch operator —
    ``| - @ : " ' ( ) [ ] { } ~ * % $ \\ ; , .`` and backticks — is dropped, so nothing can
    form a field, tag, prefix, fuzzy, negation or parameter clause. Stop words and
    one-character terms are removed, then repeats; the rest are OR-ed with ``|``
    (RediSearch's default would AND them). At most ``max_terms`` terms. Returns ``""`` when
    nothing is left — the caller then skips the full-text arm instead of sending an empty
    query (which is an error).

    ``"status: done"`` -> ``"status|done"``; ``"the of and"`` -> ``""``;
    ``"`add_episode`"`` -> ``"add_episode"``; ``"a/b|c\\d"`` -> ``""``.

    The terms are comparison keys (:func:`text_key`); the index itself holds the content as
    stored, so a spelling the index does not fold (``straße`` for ``strasse``, an NFD
    accent) is not found through it. Recall uses this index only to narrow a backlog of more
    than ``UNEMBEDDED_SCAN_MAX`` memories awaiting their embedding (automem/recall/servicer.py);
    once embedded, a memory's BM25 terms are keys.

    Note: FalkorDB's ``queryNodes`` score is not a relevance score (FalkorDB issue #1208; on
    LoCoMo its ranking reached recall@10 0.093 against 0.635 for our BM25), so use the
    full-text index to *find* memories (e.g. before their vectors exist), not to rank them.
    """
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    seen: dict[str, None] = {}
    for raw in _FT_WORD.findall(text_key(text)):
        t = raw.strip("_")
        if len(t) < 2 or (stop_words is not None and t in stop_words):
            continue
        seen.setdefault(t, None)
        if len(seen) >= max_terms:
            break
    return "|".join(seen)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def extractive_summary(content: str, max_chars: int) -> str:
    """Local summary: the sentences with the highest mean term frequency (stemmed, stop words
    removed; the first sentence gets a small bonus; repeated sentences count once), kept in
    their original order, as many as fit in ``max_chars``. Content that fits is returned as is."""
    text = " ".join(content.split())
    if len(text) <= max_chars:
        return text
    sentences = [s.strip() for s in _SENTENCE.split(content) if s.strip()]
    freq: dict[str, int] = {}
    for term in analyze(content):
        freq[term] = freq.get(term, 0) + 1
    scored = []
    for i, sentence in enumerate(sentences):
        terms = analyze(sentence)
        score = sum(freq.get(t, 0) for t in terms) / (len(terms) + 1) + (0.5 if i == 0 else 0.0)
        scored.append((score, i))
    chosen: list[int] = []
    seen: set[str] = set()
    used = 0
    for _score, i in sorted(scored, key=lambda x: (-x[0], x[1])):
        key = " ".join(sentences[i].lower().split())
        length = len(sentences[i]) + (1 if chosen else 0)
        if key not in seen and used + length <= max_chars:
            seen.add(key)
            chosen.append(i)
            used += length
    if not chosen:
        return sentences[0][: max_chars - 1].rstrip() + "…"
    return " ".join(sentences[i] for i in sorted(chosen))
