"""The one state pass: every read (recall, get, list, by-tag, startup recall, related, export)
decides what is current here.

Rules (docs/architecture.md, "Where each rule lives"):

* withheld: REJECTED and DELETED always; ARCHIVED and PENDING_REVIEW unless asked for;
  memories the service did not know at ``known_at`` (record_time > known_at) or had
  retracted by then; memories outside their valid window at ``as_of``.
* superseded (an INVALIDATED_BY / EVOLVED_INTO edge, created by ``known_at``, to another
  memory): replaced by the head of the chain, walked at most :data:`MAX_HOPS` hops,
  cycle-safe; the head must itself be readable, else the hit is dropped.
* ``state_mode="history"`` opts out of replacement and of the window check (DELETED and
  REJECTED stay withheld from every listing and search; a get by id returns them with their
  state until a purge, as its ``version`` reads do).
* bitemporal: a memory superseded *after* ``known_at`` is read as the service believed it
  then (:func:`as_known`: ACTIVE, its pre-supersede window ``prior_valid_to``), and the
  superseding edge, created after ``known_at``, is not followed. A chain is followed only to
  a successor that is readable at ``as_of``: when the replacement's window has not begun at
  ``as_of``, the superseded memory is what was true then.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from automem.common.lifecycle import SUPERSEDING_RELATIONS, before_supersede
from automem.common.model import OPEN_END, Memory, first_epoch
from automem.v1 import memory_pb2

if TYPE_CHECKING:
    from automem.graph import GraphStore

#: Longest supersession chain walked (docs/architecture.md, "Where each rule lives"): a
#: fact corrected every day for two months. Each hop is one batched read for all the hits
#: still walking, so short chains cost what they did; at 5 (before) the first memories of a
#: longer chain named no current memory.
MAX_HOPS = 64

#: Reads memories by id (``{id: Memory}``; absent = not readable), as :func:`hydrate_at` does.
Hydrate = Callable[[list[str]], Awaitable[dict[str, Memory]]]

#: States every listing and search withholds in every mode; a get by id in history mode
#: returns them (automem/recall/servicer.py ``GetMemory``).
WITHHELD_STATES = (memory_pb2.MEMORY_STATE_DELETED, memory_pb2.MEMORY_STATE_REJECTED)


@dataclass(frozen=True)
class ReadAt:
    """When and how to read: valid time ``as_of`` and system time ``known_at`` (epoch
    seconds, default now), the mode, and which non-current states to include. ``past``: the
    request named a ``known_at`` earlier than now, so memories are read as the version the
    service believed then (automem/graph/versions.py) instead of their current node."""

    as_of: float = field(default_factory=time.time)
    known_at: float = field(default_factory=time.time)
    mode: str = "current"
    include_archived: bool = False
    include_pending: bool = False
    past: bool = False

    @property
    def history(self) -> bool:
        return self.mode == "history"


@dataclass
class Resolved:
    """A memory as the state pass returns it: the memory, whether it replaced another
    (``replaces_id``), and whether it is current."""

    memory: Memory
    replaces_id: str = ""
    is_current: bool = True


def as_known(memory: Memory, read: ReadAt) -> Memory:
    """``memory`` as the service believed it at ``read.known_at``.

    A memory superseded at system time ``superseded_time`` > ``known_at`` was then ACTIVE
    with its window ending at ``prior_valid_to`` (open when unset) and no successor; any
    other memory is returned unchanged (the same object).
    """
    if memory.state != memory_pb2.MEMORY_STATE_SUPERSEDED or not memory.HasField("superseded_time"):
        return memory
    if first_epoch(memory, "superseded_time", default=0.0) <= read.known_at:
        return memory
    return before_supersede(memory)


def as_current(memory: Memory) -> Memory:
    """``memory``, which the state pass returns as current, with the state it has at the
    read: a SUPERSEDED memory whose replacement's window has not begun at ``as_of`` (a
    supersede with a future ``t_valid``) is still the fact in force, so it reads ACTIVE,
    keeping ``superseded_by``, ``superseded_time`` and the window end that say when and by
    what it will be replaced. Any other memory is returned unchanged (the same object). The
    stored state stays SUPERSEDED (edits of its content and window are refused there,
    automem/ingest/servicer.py); ``state_mode=history`` shows that stored state."""
    if memory.state != memory_pb2.MEMORY_STATE_SUPERSEDED:
        return memory
    out = Memory()
    out.CopyFrom(memory)
    out.state = memory_pb2.MEMORY_STATE_ACTIVE
    return out


def as_read(snapshot: Memory, in_force: bool, read: ReadAt) -> Memory:
    """``snapshot`` (a stored version of a memory, or an event's ``after``) with the state a
    current read at ``read.as_of`` gives the memory (the versions listing and the history
    must not contradict GetMemory): when the memory is in force at the read (``in_force``:
    :func:`resolve_one` calls its current node current) and the snapshot is SUPERSEDED with
    a window that still holds ``read.as_of`` (its replacement's window begins later), the
    snapshot reads ACTIVE (:func:`as_current`, a copy). Any other snapshot is returned
    unchanged (the same object); the caller reports the stored state beside it."""
    if in_force and snapshot.state == memory_pb2.MEMORY_STATE_SUPERSEDED and in_window(snapshot, read):
        return as_current(snapshot)
    return snapshot


def known(memory: Memory, read: ReadAt) -> bool:
    """True when the service had recorded and not retracted ``memory`` at ``read.known_at``."""
    recorded = first_epoch(memory, "record_time", "create_time", default=0.0)
    retracted = first_epoch(memory, "retract_time", default=OPEN_END)
    return recorded <= read.known_at < retracted


def in_window(memory: Memory, read: ReadAt) -> bool:
    """True when ``read.as_of`` lies in ``[valid_from, valid_to)``."""
    start = first_epoch(memory, "valid_from", "create_time", default=0.0)
    end = first_epoch(memory, "valid_to", default=OPEN_END)
    return start <= read.as_of < end


def state_allowed(memory: Memory, read: ReadAt) -> bool:
    """True unless the trust state withholds the memory under ``read``."""
    if memory.state in WITHHELD_STATES:
        return False
    if memory.state == memory_pb2.MEMORY_STATE_ARCHIVED and not (read.include_archived or read.history):
        return False
    if memory.state == memory_pb2.MEMORY_STATE_PENDING_REVIEW and not (read.include_pending or read.history):
        return False
    return memory.type != memory_pb2.MEMORY_TYPE_META_PATTERN or read.history


def readable_head(memory: Memory, read: ReadAt) -> bool:
    """True when ``memory`` may be returned as current (state, knowledge and window)."""
    return state_allowed(memory, read) and known(memory, read) and in_window(memory, read)


def _plain(read: ReadAt) -> ReadAt:
    """``read`` as a current read at the same times (no history, archived or pending)."""
    return replace(read, mode="current", include_archived=False, include_pending=False)


def current_in_history(memory: Memory, read: ReadAt) -> bool:
    """``is_current`` of a memory a history read (``state_mode=history``) returns, for one
    with no successor (``superseded_by`` empty; :func:`resolve` decides the others by their
    chain): what a current read at the same times would call current. The history read shows
    archived, pending and meta-pattern memories too, but that does not make them current
    (break-it review: the console's graph drew a memory awaiting review as a current fact)."""
    return readable_head(memory, _plain(read)) and not memory.superseded_by


def withheld_reason(memory: Memory, read: ReadAt) -> str:
    """Why the state pass does not show ``memory`` itself under ``read`` (for AutoMem's
    ``state_filter`` with ``state_debug``, automem/api/recall.py of verygoodplugins/automem):
    ``deleted``, ``rejected``, ``unknown_at_known_at``, ``archived``, ``pending_review``,
    ``meta_pattern``, ``superseded``, ``not_yet_valid`` or ``expired``, checked in that
    order; ``duplicate`` when it is readable (another hit already showed it)."""
    memory = as_known(memory, read)
    if memory.state in WITHHELD_STATES:
        return memory_pb2.MemoryState.Name(memory.state).removeprefix("MEMORY_STATE_").lower()
    if not known(memory, read):
        return "unknown_at_known_at"
    if not state_allowed(memory, read):
        if memory.state == memory_pb2.MEMORY_STATE_SUPERSEDED:
            return "superseded"
        return "meta_pattern" if memory.type == memory_pb2.MEMORY_TYPE_META_PATTERN else \
            memory_pb2.MemoryState.Name(memory.state).removeprefix("MEMORY_STATE_").lower()
    if memory.state == memory_pb2.MEMORY_STATE_SUPERSEDED or memory.superseded_by:
        return "superseded"
    start = first_epoch(memory, "valid_from", "create_time", default=0.0)
    if read.as_of < start:
        return "not_yet_valid"
    if not in_window(memory, read):
        return "expired"
    return "duplicate"


async def hydrate_at(graph: GraphStore, ids: list[str], scope: str | None, read: ReadAt) -> dict[str, Memory]:
    """Memories by id as ``read`` sees them: the current nodes
    (:meth:`automem.graph.memories.Memories.hydrate`), or with ``read.past`` the versions
    believed at ``read.known_at`` (:meth:`automem.graph.versions.Versions.at`; a memory not
    yet recorded then is absent). Shape: ``{id: Memory}``."""
    if read.past:
        return await graph.versions.at(ids, scope, read.known_at)
    return await graph.memories.hydrate(ids, scope)


async def successors(graph: GraphStore, ids: list[str], scope: str, read: ReadAt) -> dict[str, str]:
    """For each id, the memory its newest superseding edge (known at ``read.known_at``) points to."""
    return newest_successors(await graph.relations.outgoing(ids, SUPERSEDING_RELATIONS, scope), read)


def newest_successors(edges: list[tuple[str, str, str, float, float]], read: ReadAt) -> dict[str, str]:
    """``{source: target}`` of the newest of ``edges`` (superseding edges as
    :meth:`automem.graph.relations.Relations.outgoing` returns them) created by ``read.known_at``, per source."""
    out: dict[str, tuple[float, str]] = {}
    for source, _type, target, _strength, created in edges:
        if created and created > read.known_at:
            continue
        if source not in out or created >= out[source][0]:
            out[source] = (created, target)
    return {k: v[1] for k, v in out.items()}


async def resolve(graph: GraphStore, memories: list[Memory], scope: str, read: ReadAt,
                  seen: set[str] | None = None,
                  outgoing: list[tuple[str, str, str, float, float]] | None = None,
                  *, dedupe: bool = True, hydrate: Hydrate | None = None) -> list[Resolved | None]:
    """Apply the state pass to ``memories`` (same order; None = withheld).

    Each memory is first seen as known at ``read.known_at`` (:func:`as_known`). A superseded
    memory is replaced by the furthest memory along its chain (≤ :data:`MAX_HOPS` hops, cycle-safe, edges
    created by ``known_at``) that is readable at ``as_of``; when none is, the memory itself
    is returned if readable (what was true at ``as_of``), else withheld. Either way the
    memory returned reads ACTIVE (:func:`as_current`): it is the fact in force at ``as_of``. A replacement that
    appears more than once is kept at its first position only, unless ``dedupe`` is False:
    then every position holds its own memory's resolution (the by-tag listing asks "is this
    memory its own current head?" for each candidate, automem/recall/bytag.py).

    ``seen``: ids already returned by earlier calls for the same read (recall resolves its
    ranking in slices); they are withheld here too, and the ids returned are added to it.
    ``outgoing``: the superseding edges leaving ``memories``, when the caller read them with
    the memories (:meth:`automem.graph.memories.Memories.hydrate_with_successors`); saves a round trip.
    ``hydrate``: reads the memories along the chains (``{id: Memory}`` for a list of ids)
    instead of :func:`hydrate_at` (the later by-tag pages read some as their versions,
    automem/recall/bytag.py).
    """
    results: list[Resolved | None] = [None] * len(memories)
    memories = [as_known(m, read) for m in memories]
    if read.history:
        shown = [(i, m) for i, m in enumerate(memories) if m.state not in WITHHELD_STATES and known(m, read)]
        # A superseded memory still valid at as_of (its replacement's window begins later) may
        # be the fact in force: the current read decides, walking its chain (only these few
        # memories). It was "not current" here while every current read returned it (the
        # console labelled the fact in force superseded and its chain had no head).
        plain = _plain(read)
        maybe = [m for _i, m in shown if m.superseded_by and readable_head(m, plain)]
        walked = await resolve(graph, maybe, scope, plain, dedupe=False, hydrate=hydrate) if maybe else []
        in_force = {m.id for m, res in zip(maybe, walked, strict=True) if res is not None and not res.replaces_id}
        for i, m in shown:
            results[i] = Resolved(m, is_current=m.id in in_force or current_in_history(m, read))
        return results
    chain_start = {}
    for i, m in enumerate(memories):
        if not known(m, read) or m.state in WITHHELD_STATES:
            continue
        chain_start[i] = m
    if outgoing is not None:
        wanted = {m.id for m in chain_start.values()}
        nexts = newest_successors([e for e in outgoing if e[0] in wanted], read)
    else:
        nexts = await successors(graph, [m.id for m in chain_start.values()], scope, read) if chain_start else {}
    # Walk chains hop by hop for all superseded hits at once; paths[i] = successors in order.
    cache: dict[str, Memory] = {}
    frontier = {i: nexts[m.id] for i, m in chain_start.items() if m.id in nexts}
    visited = {i: {chain_start[i].id} for i in frontier}
    paths: dict[int, list[str]] = {i: [] for i in frontier}
    for _hop in range(MAX_HOPS):
        if not frontier:
            break
        need = [mid for mid in set(frontier.values()) if mid not in cache]
        found = await (hydrate(need) if hydrate is not None else hydrate_at(graph, need, scope, read))
        cache.update({k: as_known(v, read) for k, v in found.items()})
        nxt = await successors(graph, list(set(frontier.values())), scope, read)
        new_frontier = {}
        for i, mid in frontier.items():
            visited[i].add(mid)
            paths[i].append(mid)
            target = nxt.get(mid)
            if target and target not in visited[i]:
                new_frontier[i] = target
        frontier = new_frontier
    # Chains still going after MAX_HOPS have no head within reach: withhold those hits rather
    # than return a memory that is itself superseded as current.
    exhausted = set(frontier)
    seen = set() if seen is None else seen
    for i, m in enumerate(memories):
        if i not in chain_start or i in exhausted:
            continue
        head = None
        for mid in reversed(paths.get(i, [])):
            candidate = cache.get(mid)
            if candidate is not None and readable_head(candidate, read):
                head = candidate
                break
        if head is not None:
            if dedupe and head.id in seen:
                continue
            # The head read at an earlier as_of may be superseded since (by a later fact): it
            # was the fact in force then, and reads ACTIVE, as a hit that is its own head does
            # (it came back SUPERSEDED as a replacement only: break-it review).
            results[i] = Resolved(as_current(head), replaces_id=m.id)
            seen.add(head.id)
        elif readable_head(m, read) and (not dedupe or m.id not in seen):
            results[i] = Resolved(as_current(m))
            seen.add(m.id)
    return results


async def resolve_one(graph: GraphStore, memory: Memory, scope: str, read: ReadAt) -> tuple[bool, str]:
    """(is_current, current head id or "") of one memory, for get-by-id."""
    [resolved] = await resolve(graph, [memory], scope, read)
    if read.history:
        return resolved is not None and resolved.is_current, ""
    if resolved is None:
        return False, ""
    if resolved.replaces_id:
        return False, resolved.memory.id
    return True, ""
