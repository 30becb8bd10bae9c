"""Links made by enrichment: SIMILAR_TO edges and contradiction (supersede) proposals.

* SIMILAR_TO: the ``similar_top_k`` nearest current memories of the same scope whose cosine
  similarity is at least ``similar_threshold``; edge new -> neighbour, strength = similarity.
  Recomputed on every content change (the memory's old outgoing SIMILAR_TO edges go first),
  written only while the node still holds the enriched content.
* Contradiction proposals: a neighbour at or above ``contradiction_threshold`` (0.8) that is current
  (ACTIVE), not newer than the new memory, and shares an entity with it (or, sharing none,
  is at least ``similar_threshold`` similar and its and the new memory's entities are only
  the changed value itself or recognised on one side only — :func:`_changed_values_only`:
  ``manager is Dana`` / ``... Eli``; a changed subject, ``The Berlin team ...`` / ``The Paris
  team ...``, stays apart), is a candidate. The LLM decides
  when configured; otherwise (or when it fails) the local rule (:func:`contradiction_signal`):
  not when both name an identifier the other lacks (two builds, two tickets: different
  things), else a negation on one side only, or a different value — differing numbers, a
  few differing words around a shared statement, or one changed slot in the same frame
  (``We use gpt-4 for ...`` / ``... gpt-4o ...``). A positive verdict creates a review-queue
  item, never a change:
  ``(:ReviewItem {id, kind: "supersede_proposal", memory_id: new, target_id: old, reason,
  create_time, status: "pending", scope})`` — MERGEd, so re-enrichment never duplicates it.
"""

from __future__ import annotations

import bisect
import logging
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from automem.common.model import OPEN_END, Memory, first_epoch
from automem.common.settings import Settings
from automem.common.text import STOP_WORDS, analyze
from automem.graph import GraphStore
from automem.v1 import memory_pb2
from automem.vectors import VectorFilter, VectorStore

log = logging.getLogger(__name__)

NEGATIONS = frozenset(("not", "no", "never", "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't",
                       "weren't", "won't", "can't", "cannot", "shouldn't", "stopped", "quit", "longer",
                       "nobody", "nothing", "neither", "nor", "without"))
_WORD = re.compile(r"[A-Za-z][A-Za-z']*|\d+(?:\.\d+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: Tokens of the identifier check: runs of letters and digits joined by ``. - _ : /`` (so
#: ``INC-1234``, a UUID and ``4f3a9c`` are one token each), a leading ``#`` kept.
_TOKEN = re.compile(r"#?[A-Za-z0-9]+(?:[._:/-][A-Za-z0-9]+)*")
#: A hash: hex digits only (parts may be joined, as in a UUID), at least 6 of them, with a
#: digit and a letter (``4f3a9c``, a commit id); ``a100`` or ``db-01`` are too short to be one.
_HASH = re.compile(r"(?=[0-9a-f._:/-]*[0-9])(?=[0-9a-f._:/-]*[a-f])[0-9a-f]+(?:[._:/-][0-9a-f]+)*")
#: A ticket key as trackers write them: an upper-case prefix, a dash, two or more digits
#: (``INC-1234``, ``CVE-2024-1234``; not ``GPT-4``, ``UTF-8``).
_TICKET = re.compile(r"[A-Z]{2,}(?:-[0-9]{2,})+")
#: Words after which a number is a quantity or a date, not a label (``in 2019``, ``is 5000``);
#: a number of four or more digits after any other word may be one (``ticket 1234 closed``;
#: :func:`_identifier_spans` says when).
_VALUE_LEADS = STOP_WORDS | frozenset(("since", "until", "till", "before", "after", "around", "near", "between",
                                       "through", "during", "per", "via", "within", "than", "approximately",
                                       "roughly", "nearly", "almost", "only", "exactly", "least", "most"))
#: Units of measure and counted things: a number followed by one is a quantity (``5000 USD``,
#: ``4096 MB``, ``1500 ms``, ``8192 tokens``), never a label.
_UNITS = frozenset((
    "usd", "eur", "gbp", "jpy", "chf", "cad", "aud", "inr", "cny", "dollars", "dollar", "euros", "euro", "pounds", "yen",
    "b", "kb", "mb", "gb", "tb", "pb", "kib", "mib", "gib", "tib", "bytes", "kilobytes", "megabytes", "gigabytes",
    "terabytes", "bit", "bits", "kbps", "mbps", "gbps", "ns", "us", "ms", "s", "sec", "secs", "seconds", "min", "mins",
    "minutes", "h", "hr", "hrs", "hours", "d", "days", "weeks", "months", "years", "hz", "khz", "mhz", "ghz", "rps",
    "qps", "rpm", "tps", "k", "m", "percent", "pct", "tokens", "requests", "users", "rows", "items", "records",
    "connections", "threads", "workers", "replicas", "cores", "nodes", "calls", "messages", "events", "points",
    "px", "dpi", "kg", "km", "cm", "mm"))
#: Words after a number that qualify a value (``port 9090 since Monday``, ``budget 5000 for Q3``)
#: rather than say something about a labelled thing (``ticket 1234 closed``).
_QUALIFIERS = frozenset(("for", "from", "since", "until", "till", "per", "during", "after", "before", "via", "within",
                         "than", "each", "every"))
#: Words (and ``:``/``=`` between tokens) after which what follows is the one value of what
#: precedes: ``Alice is vegan``, ``Service mesh: Istio``.
_COPULAS = frozenset(("is", "are", "was", "were", "be", "equals", "becomes"))
#: The most tokens a changed value may span on each side (``VS Code`` -> ``Neovim``).
_SLOT_MAX = 2
#: Extra hits a batched neighbour search asks for, to drop points written later in the batch.
_SPARE = 16
#: Payload keys neighbours need (MetaPattern check, contradiction candidates).
_NEIGHBOUR_KEYS = ("type", "content_hash", "event_time")


@dataclass
class Neighbour:
    """A nearby memory (from the vector search) and its cosine similarity."""

    id: str
    score: float
    payload: dict


def _identifier_spans(text: str, matches: list[re.Match[str]] | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` of the identifiers in ``text`` (tokens case-folded; ``matches``:
    its :data:`_TOKEN` matches, when the caller has them): names that tell two things of one
    kind apart rather than values of one thing — a hash (``4f3a9c``, a UUID; :data:`_HASH`), a
    ticket key (``INC-1234``; :data:`_TICKET`), a ``#`` number (``#1234``), or a number of four
    or more digits that labels what the statement is about: right after a word outside
    :data:`_VALUE_LEADS` and followed, in its clause, by what is said of it (``ticket 1234
    closed``, ``build 20240611 failed``). Such a number is a value instead when it ends its
    clause (``staging port 8080``: the value stated), is followed by a unit (:data:`_UNITS`:
    ``budget 5000 USD``) or a qualifier (:data:`_QUALIFIERS`: ``port 9090 since Monday``),
    follows a currency sign (``$5000``) or is a year (1900-2099: ``launch year 2027``).
    Versions and other tokens mixing letters and digits (``v18``, ``3.11.4``, ``ubuntu-22.04``,
    ``A100``, ``9:30am``) are values: a changed one is what a correction looks like."""
    if matches is None:
        matches = list(_TOKEN.finditer(text))
    spans = []
    before = ""
    for i, match in enumerate(matches):
        raw = match.group()
        token = raw.lower()
        bare = token.lstrip("#")
        if ((token.startswith("#") and bare.isdigit()) or (len(re.sub(r"[^0-9a-f]", "", bare)) >= 6
                                                           and _HASH.fullmatch(bare))
                or _TICKET.fullmatch(raw)
                or (bare.isdigit() and len(bare) >= 4 and before.isalpha() and before not in _VALUE_LEADS
                    and _labels(text, matches, i))):
            spans.append((match.start(), match.end(), token))
        before = bare
    return spans


def _labels(text: str, matches: list[re.Match[str]], i: int) -> bool:
    """Whether the number ``matches[i]`` (four or more digits after a word that may label it)
    is followed, in its clause, by something said of it — not a unit or a qualifier — and is
    neither a year nor after a currency sign (see :func:`_identifier_spans`)."""
    match = matches[i]
    number = match.group()
    if (len(number) == 4 and "1900" <= number <= "2099") or text[match.start() - 1:match.start()] in ("$", "€", "£"):
        return False
    if i + 1 == len(matches):
        return False
    following = matches[i + 1]
    if any(c in ".,;!?)" for c in text[match.end():following.start()]):
        return False
    word = following.group().lower()
    return word not in _UNITS and word not in _QUALIFIERS


def contradiction_signal(new: str, old: str) -> str | None:
    """Local rule: why ``new`` likely contradicts ``old`` (a short reason), or None. Expects
    the two texts to be about the same thing already (similar, shared entities).

    Identifiers first: when each text names an identifier the other does not (``deploy build
    4f3a9c finished`` / ``deploy build 7b21e0 finished``, ``ticket 1234 closed`` / ``ticket
    5678 closed``, ``INC-1234`` / ``INC-5678``), they are about different things, not one
    correcting the other: None, whatever else differs (:func:`_identifier_spans` says what
    an identifier is). An identifier both name is a shared word (``build 4f3a9c: tests
    passed`` / ``... failed`` is a correction). Otherwise:

    * a negation on one side only (``We do not deploy on Fridays`` / ``We deploy on Fridays``);
    * different numbers — values, read with the identifiers' digits left out (``the API
      timeout is 30 s`` / ``... 60 s``, ``Postgres 14`` / ``Postgres 16``, ``Node v18`` / ``Node
      v20``);
    * at most two differing terms on each side around at least three shared ones, the
      shared at least twice as many (``favourite colour is blue`` / ``... green``);
    * or one slot with two values in the same frame: the two token sequences (:data:`_TOKEN`)
      differ in one run of at most :data:`_SLOT_MAX` tokens on each side, after a prefix with a
      word that is not a stop word (a changed value, not a changed subject), the frame (prefix
      and suffix) at least three tokens or the slot right after a copula (:data:`_COPULAS`),
      ``:`` or ``=`` (``We use gpt-4 for classification`` / ``... gpt-4o ...``, ``Alice is
      vegan`` / ``... vegetarian``, ``Service mesh: Istio`` / ``... Linkerd``). Not when the two
      slots spell the same (``9:30am`` / ``9:30 am``) or are both units (``30 s`` / ``30
      seconds``).

    Measured on the hand-labelled pairs of ``bench/data/contradiction_pairs.json``
    (``bench/contradiction_rule.py``, docs/benchmarks.md). Limits (no parse, only token
    shapes): a short label (``ticket 12`` / ``ticket 13``, ``Sprint 14``), a label ending its
    statement (``Fixed bug 4521`` / ``Fixed bug 4522``), a year used as a label and a name that
    mixes letters and digits (``db-01`` / ``db-02``: two servers, or a corrected host) read as
    values, so such pairs are proposed and a reviewer tells them apart; a number of four or
    more digits after a word outside :data:`_VALUE_LEADS` followed by a verb or preposition
    not in :data:`_QUALIFIERS` reads as a label (``heap 4096 on the indexer`` / ``heap 8192 on
    the indexer`` is not proposed). A slot of a multi-valued relation reads as one value:
    ``We use gpt-4o for classification`` / ``... for summarization``, ``Alice visited Lisbon
    in 2019`` / ``... Porto ...`` are proposed (``Alice likes tea`` / ``... biscuits``, a two-token frame with
    no copula, is not). Not seen: reordered words (``tabs over spaces`` / ``spaces over
    tabs``) and a change told in another frame (``Standup is on Mondays`` / ``Standup moved to
    Tuesdays``). A wrong proposal costs a reviewer a click; a missed one leaves a stale fact
    current."""
    matches_new, matches_old = list(_TOKEN.finditer(new)), list(_TOKEN.finditer(old))
    ids_new, ids_old = _identifier_spans(new, matches_new), _identifier_spans(old, matches_old)
    tokens_new, tokens_old = {t for _, _, t in ids_new}, {t for _, _, t in ids_old}
    if tokens_new - tokens_old and tokens_old - tokens_new:
        return None
    words_new = [w.lower() for w in _WORD.findall(new)]
    words_old = [w.lower() for w in _WORD.findall(old)]
    neg_new = sum(w in NEGATIONS or w.endswith("n't") for w in words_new)
    neg_old = sum(w in NEGATIONS or w.endswith("n't") for w in words_old)
    if (neg_new == 0) != (neg_old == 0):
        return "negation: one states what the other denies"
    bare_new, bare_old = _blank(new, ids_new), _blank(old, ids_old)
    nums_new, nums_old = set(_NUMBER.findall(bare_new)), set(_NUMBER.findall(bare_old))
    if nums_new and nums_old and nums_new != nums_old:
        if _other_subjects(bare_new, bare_old):
            return None
        return f"different value: {', '.join(sorted(nums_old))} -> {', '.join(sorted(nums_new))}"
    terms_new, terms_old = set(analyze(new)), set(analyze(old))
    shared = terms_new & terms_old
    only_new, only_old = terms_new - terms_old, terms_old - terms_new
    if len(shared) >= 3 and only_new and only_old and len(only_new) <= 2 and len(only_old) <= 2 and (
            len(shared) >= 2 * max(len(only_new), len(only_old))):
        return f"different value: {', '.join(sorted(only_old))} -> {', '.join(sorted(only_new))}"
    return _slot_change(new, matches_new, old, matches_old)


def _slot_change(new: str, matches_new: list[re.Match[str]], old: str, matches_old: list[re.Match[str]]) -> str | None:
    """The "one slot, two values" case of :func:`contradiction_signal` (its ``_TOKEN``
    matches of each text given): a reason, or None."""
    toks_new = [m.group().lower() for m in matches_new]
    toks_old = [m.group().lower() for m in matches_old]
    prefix, suffix = _common_ends(toks_new, toks_old)
    slot_new, slot_old = toks_new[prefix:len(toks_new) - suffix], toks_old[prefix:len(toks_old) - suffix]
    if not (0 < len(slot_new) <= _SLOT_MAX and 0 < len(slot_old) <= _SLOT_MAX) or "".join(slot_new) == "".join(slot_old):
        return None
    if all(t in STOP_WORDS for t in toks_new[:prefix]):
        return None  # a changed subject (or nothing before the slot): another thing, not another value
    if all(t in _UNITS for t in slot_new + slot_old):
        return None  # ``30 s`` / ``30 seconds``: one value spelled twice
    between = new[matches_new[prefix - 1].end():matches_new[prefix].start()]
    if prefix + suffix < 3 and toks_new[prefix - 1] not in _COPULAS and ":" not in between and "=" not in between:
        return None
    return f"different value: {' '.join(slot_old)} -> {' '.join(slot_new)}"


def _common_ends(toks_new: list[str], toks_old: list[str]) -> tuple[int, int]:
    """``(prefix, suffix)``: how many leading and (not overlapping them) trailing tokens the
    two sequences share."""
    shortest = min(len(toks_new), len(toks_old))
    prefix = 0
    while prefix < shortest and toks_new[prefix] == toks_old[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shortest - prefix and toks_new[-1 - suffix] == toks_old[-1 - suffix]:
        suffix += 1
    return prefix, suffix


def _other_subjects(new: str, old: str) -> bool:
    """True when the words before each text's first number name different things: each has a
    word there the other lacks (``The staging Redis runs on port 6379`` / ``The production
    Redis runs on port 6380``, ``Postgres primary`` / ``Postgres replica``): two values of two
    things, both current, not a corrected value. A word added on one side only (``The API
    timeout is now 60 s``) does not count; the words are the tokens before the first one
    holding a digit (``all-MiniLM-L6-v2`` is one value) but the last, which names the value
    (``uses Postgres 14`` / ``uses MySQL 8`` is a correction), stop words left out. Limit: a changed
    verb reads as another thing too (``We run Postgres 14`` / ``We upgraded to Postgres 16`` is
    not proposed by this rule)."""
    def lead(text: str) -> set[str]:
        words: list[str] = []
        for match in _TOKEN.finditer(text):
            word = match.group().lower()
            if any(c.isdigit() for c in word):
                break
            words.append(word)
        # The word right before the number names the value (``Postgres 14`` / ``MySQL 8``).
        return {w for w in words[:-1] if w not in STOP_WORDS}

    lead_new, lead_old = lead(new), lead(old)
    return bool(lead_new - lead_old) and bool(lead_old - lead_new)


def _changed_values_only(new: str, names_new: list[str], old: str, names_old: list[str]) -> bool:
    """Whether two texts sharing no entity may still be about one thing: each of their
    entities (normalised ``names_new`` of ``new``, ``names_old`` of ``old``; none at all
    counts too) is either

    * recognised on one side only: its name's tokens (:data:`_TOKEN`, case-folded) occur in
      the other text as well (``... at 02:00 UTC`` / ``... at 03:30 UTC`` with ``utc`` found
      in one of them only), or
    * the changed value: its name lies in its text's differing run (the tokens between the
      longest common prefix and suffix of the two token sequences), and that run is a value,
      not (part of) a subject — either the prefix holds a word that is not a stop word and the
      run ends the text or is followed by a stop word or a qualifier (:data:`_QUALIFIERS`:
      ``The user's manager is Dana`` / ``... Eli``, ``We use Postgres for billing`` / ``...
      MySQL ...``), or the run starts the text (stop words aside) and is followed by a
      copula (:data:`_COPULAS`: ``Python is the user's favourite language`` / ``Rust ...``).

    Two texts about different things stay apart: a changed subject (``The Berlin team
    standup is on Mondays`` / ``The Paris team ...``, ``Our office in Berlin closes at 18:00``
    / ``... in Munich ...``) or entities changed all over (``Alice owns the billing service`` /
    ``Bob owns the search service``). Limit: a value followed by other words (``moved to
    Postgres last week``) reads as part of a subject, so such a pair is not a candidate."""
    toks_new = [m.group().lower() for m in _TOKEN.finditer(new)]
    toks_old = [m.group().lower() for m in _TOKEN.finditer(old)]
    prefix, suffix = _common_ends(toks_new, toks_old)
    after = toks_new[len(toks_new) - suffix] if suffix else ""
    if any(t not in STOP_WORDS for t in toks_new[:prefix]):
        value_slot = not after or after in STOP_WORDS or after in _QUALIFIERS
    else:
        value_slot = after in _COPULAS
    run_new, run_old = toks_new[prefix:len(toks_new) - suffix], toks_old[prefix:len(toks_old) - suffix]

    def explained(name: str, own_run: list[str], other: list[str]) -> bool:
        words = [m.group().lower() for m in _TOKEN.finditer(name)]
        return bool(words) and (_contains(other, words) or (value_slot and _contains(own_run, words)))

    return (all(explained(name, run_new, toks_old) for name in names_new)
            and all(explained(name, run_old, toks_new) for name in names_old))


def _contains(tokens: list[str], words: list[str]) -> bool:
    """Whether ``words`` occur in ``tokens`` as a contiguous run."""
    return any(tokens[i:i + len(words)] == words for i in range(len(tokens) - len(words) + 1))


def _blank(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with the ``spans`` replaced by spaces."""
    for start, end, _ in reversed(spans):
        text = text[:start] + " " + text[end:]
    return text


class LinkBuilder:
    """Writes SIMILAR_TO edges and supersede proposals for freshly embedded memories."""

    def __init__(self, settings: Settings, graph: GraphStore, vectors: VectorStore, llm: object | None = None) -> None:
        self.settings = settings
        self.graph = graph
        self.vectors = vectors
        self.llm = llm
        self.proposals = 0

    async def neighbours(self, memory: Memory, vector: list[float]) -> list[Neighbour]:
        """Nearest current memories of the memory's scope (itself and MetaPatterns excluded)."""
        return (await self.neighbours_many([(memory, vector, 0)]))[0]

    async def neighbours_many(self, items: list[tuple[Memory, list[float], int]],
                              fresh: Mapping[str, int] | None = None) -> list[list[Neighbour]]:
        """:meth:`neighbours` of many ``(memory, vector, position in the batch)`` in one
        batched vector search. ``fresh`` maps the memories whose point the batch wrote to
        their position: a memory does not see the fresh points of memories after it, so it
        gets the neighbours it would have got had the batch been enriched one memory after
        another. (Each search asks for up to :data:`_SPARE` more hits than needed and drops
        those points; the rare memory left short is searched again with them excluded by
        the filter — the same top hits either way.) Payloads hold ``type``, ``content_hash``
        and ``event_time`` only."""
        fresh = fresh or {}
        k = max(self.settings.similar_top_k, 5)
        later = sorted(fresh, key=fresh.__getitem__)
        positions = [fresh[mid] for mid in later]
        spare = [min(_SPARE, len(positions) - bisect.bisect_right(positions, position)) for _, _, position in items]
        hits = await self.vectors.search_many([
            (vector, k + 1 + extra, VectorFilter(scope=memory.scope, states=["ACTIVE"]))
            for (memory, vector, _), extra in zip(items, spare, strict=True)], payload_keys=_NEIGHBOUR_KEYS)
        again = []
        for i, ((_, _, position), found) in enumerate(zip(items, hits, strict=True)):
            visible = [hit for hit in found if fresh.get(hit[0], -1) <= position]
            hits[i] = visible[: k + 1]
            if len(visible) < k + 1 and len(found) == k + 1 + spare[i]:
                again.append(i)
        if again:
            redo = await self.vectors.search_many([
                (items[i][1], k + 1, VectorFilter(scope=items[i][0].scope, states=["ACTIVE"],
                                                  exclude_ids=[mid for mid in later if fresh[mid] > items[i][2]]))
                for i in again], payload_keys=_NEIGHBOUR_KEYS)
            for i, found in zip(again, redo, strict=True):
                hits[i] = found
        return [[Neighbour(mid, score, payload) for mid, score, payload in found
                 if mid != memory.id and payload.get("type") != "MetaPattern"]
                for (memory, _, _), found in zip(items, hits, strict=True)]

    async def link(self, memory: Memory, vector: list[float]) -> tuple[bool, int, int]:
        """SIMILAR_TO edges and proposals for ``memory``. Returns (written, edges, proposals);
        written is False when the content changed meanwhile (nothing written)."""
        written, edges, proposals = await self.link_many([(memory, vector, 0)])
        return memory.id in written, edges, proposals

    async def link_many(self, items: list[tuple[Memory, list[float], int]],
                        fresh: Mapping[str, int] | None = None) -> tuple[set[str], int, int]:
        """SIMILAR_TO edges and proposals for many ``(memory, vector, position in the batch)``
        (``fresh``: see :meth:`neighbours_many`): one vector search call and ONE graph write
        for the edges of all of them, each memory's part guarded by its content hash;
        proposals per memory. Returns (ids written, edges, proposals); a memory missing from
        the ids changed meanwhile and got nothing written. MetaPatterns get no links (and
        count as written)."""
        meta = {m.id for m, _, _ in items if m.type == memory_pb2.MEMORY_TYPE_META_PATTERN}
        items = [item for item in items if item[0].id not in meta]
        if not items:
            return meta, 0, 0
        near_of = await self.neighbours_many(items, fresh)
        similar_of = [[n for n in near if n.score >= self.settings.similar_threshold][: self.settings.similar_top_k]
                      for near in near_of]
        written = await self.graph.relations.replace_similar([
            {"id": memory.id, "hash": memory.content_hash, "scope": memory.scope,
             "rows": [{"id": n.id, "score": n.score} for n in similar]}
            for (memory, _, _), similar in zip(items, similar_of, strict=True)], time.time())
        edges = 0
        linked: list[tuple[Memory, list[Neighbour]]] = []
        for (memory, _, _), near, similar in zip(items, near_of, similar_of, strict=True):
            if memory.id in written:
                edges += len(similar)
                linked.append((memory, near))
        proposals = await self._propose_many(linked)
        return written | meta, edges, proposals

    async def _propose_many(self, linked: list[tuple[Memory, list[Neighbour]]]) -> int:
        """The supersede proposals of a batch's memories (each with its neighbours), in batch
        order: the contradiction candidates of all of them are read from the graph in one
        round trip per scope, not one per memory (issue 10; a proposal changes no memory, so
        reading them before the first proposal reads what reading them one by one would)."""
        wanted = [(memory, near, self._contradiction_candidates(memory, near)) for memory, near in linked]
        by_scope: dict[str, list[str]] = {}
        for memory, _, candidates in wanted:
            by_scope.setdefault(memory.scope, []).extend(n.id for n in candidates)
        found = {scope: await self.graph.memories.hydrate(ids, scope) for scope, ids in by_scope.items() if ids}
        made = 0
        for memory, _, candidates in wanted:
            if candidates:
                made += await self._propose(memory, candidates, found[memory.scope])
        return made

    def _contradiction_candidates(self, memory: Memory, near: list[Neighbour]) -> list[Neighbour]:
        """The neighbours ``memory`` may contradict: similar enough, other content, not later."""
        return [n for n in near if n.score >= self.settings.contradiction_threshold
                and n.payload.get("content_hash") != memory.content_hash
                and float(n.payload.get("event_time", 0.0)) <= first_epoch(memory, "event_time", default=time.time())]

    async def _propose(self, memory: Memory, candidates: list[Neighbour], found: dict[str, Memory]) -> int:
        """Propose ``memory`` superseding those of ``candidates`` (read from the graph into
        ``found``) that are active and contradicted; returns the proposals made."""
        mine = {e.tag: e.name for e in memory.entities}
        made = 0
        at = time.time()
        if first_epoch(memory, "valid_to", default=OPEN_END) <= at:
            # An expired memory replaces nothing: approved, it left no fact current (break-it
            # review; the write paths refuse it, automem/common/lifecycle.py ``check_replacement_valid``).
            return 0
        for n in candidates:
            old = found.get(n.id)
            if (old is None or old.state != memory_pb2.MEMORY_STATE_ACTIVE
                    or first_epoch(old, "valid_to", default=OPEN_END) <= at):  # no longer current: nothing to replace
                continue
            theirs = {e.tag: e.name for e in old.entities}
            shared = mine.keys() & theirs.keys()
            if not shared and (n.score < self.settings.similar_threshold or not _changed_values_only(
                    memory.content, [name for tag, name in mine.items() if tag not in theirs],
                    old.content, [name for tag, name in theirs.items() if tag not in mine])):
                continue
            reason = None
            if self.llm is not None:
                verdict = await self.llm.contradicts(memory.content, old.content)
                if verdict is not None:
                    reason = f"llm: {verdict.reason}" if verdict.contradicts else None
                    if reason is None:
                        continue
            if reason is None:
                reason = contradiction_signal(memory.content, old.content)
            if reason is None:
                continue
            if shared:
                reason += f" (shared entities: {', '.join(sorted(shared))}; similarity {n.score:.2f})"
            else:
                reason += f" (similarity {n.score:.2f})"
            await self.propose(memory, old.id, reason)
            made += 1
        self.proposals += made
        return made

    async def propose(self, memory: Memory, target_id: str, reason: str) -> None:
        """Create (once) the pending supersede proposal ``memory`` -> ``target_id``."""
        await self.graph.review.propose_supersede(str(uuid.uuid4()), memory.id, target_id, memory.scope, reason,
                                                  time.time())
