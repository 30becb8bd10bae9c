"""Consolidation tasks: decay, creative associations, clustering, forget.

Each task takes ``scope`` (None = every scope) and ``dry_run`` (compute, count, write
nothing) and returns counts. Store names come from settings through the stores passed in.
Consolidation never writes vector points itself: memories it creates or changes get an event
and the enrichment consumer (the only writer of points) brings the vectors in step.

* **decay** — relevance (see :func:`relevance`) of ACTIVE and ARCHIVED memories.
* **creative** — DISCOVERED edges between memories that are related (cosine at least
  ``creative_threshold``) but not linked by any edge yet; at most ``creative_max_links``
  per run, strongest first (AutoMem's "creative associations").
* **cluster** — greedy clustering per scope over the memories' vectors (members at least
  ``cluster_threshold`` similar to the seed, at least ``cluster_min_size`` members): one
  ``MetaPattern`` memory per new cluster whose content is an extractive summary of the
  members, members linked to it by PART_OF. MetaPatterns are withheld from recall by the state
  pass; a cluster already summarised (same members, same contents) is not summarised again.
  A pattern stays the current summary only while its cluster holds: when a new pattern takes
  at least half of an older one's ACTIVE members (the cluster grew, shrank or a member's
  content changed), or fewer than ``cluster_min_size`` of its members are still ACTIVE, the
  older pattern is ARCHIVED (``state_reason`` "consolidate: re-clustered into <id>" /
  "consolidate: members gone"), so re-clustering leaves no overlapping patterns and no summary
  of text that changed.
* Each edge creative or cluster creates gets a RELATION_CREATED event, as ``POST /associate``'s
  (history, ``GET /stream``); an edge another run created first is neither counted nor
  announced again.
* Every write records its events in the same graph query (automem/graph/outbox.py, one
  ``:OutboxBatch`` per write, not per edge), published right after
  (:meth:`EventPublisher.commit`): a process killed between a write and its publish left
  changes with no event for good (break-it review: 1975 PART_OF edges, 588 events); now any
  process's outbox drain publishes them.
* **forget** — off by default (``AUTOMEM_FORGET_ENABLED``). Archive before delete: ACTIVE
  memories under ``forget_archive_threshold`` relevance become ARCHIVED; memories that a
  *previous* forget run archived at least ``forget_archive_grace_days``
  (``AUTOMEM_FORGET_ARCHIVE_GRACE_DAYS``, 7) ago and whose relevance fell under
  ``forget_delete_threshold`` are tombstoned (state DELETED; enrichment drops their points).
  Relevance is judged as of the run (:func:`current_relevance`, decay's formula with the
  memory's last access), not as decay last stored it: a memory read since is not forgotten.
  Memories of a protected type (``forget_protected_types``) or at least
  ``forget_protected_importance`` are never touched.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field

import numpy as np

from automem.common.lifecycle import make_event
from automem.common.model import Memory, Relation, content_hash, first_epoch, set_metadata, ts
from automem.common.outbox import EventPublisher, entry
from automem.common.settings import Settings
from automem.common.text import extractive_summary
from automem.graph import GraphStore
from automem.graph.outbox import Batch
from automem.graph.versions import acting_as
from automem.v1 import events_pb2, memory_pb2
from automem.vectors import VectorFilter, VectorStore

#: Half-life of relevance in days.
HALF_LIFE_DAYS = 30.0
#: Memories sampled per creative run and clustered per scope per cluster run.
CREATIVE_SAMPLE = 200
CLUSTER_MAX = 2000
FORGOTTEN = "forgotten"
#: Memories forget writes (with their events) per graph query.
FORGET_BATCH = 500
#: Who consolidation's writes are by: its events' ``actor``, its MetaPatterns' ``source`` and
#: the versions its writes record (automem/graph/versions.py :func:`acting_as`).
ACTOR = "system:consolidate"


def relevance(importance: float, age_days: float, half_life_days: float = HALF_LIFE_DAYS) -> float:
    """Decayed relevance in 0..1.

    ``relevance = floor + (1 - floor) · 2^(-age_days / half_life_days)`` with
    ``floor = 0.5 · importance``: an exponential forgetting curve (Ebbinghaus, 1885; the
    half-life form as in AutoMem's consolidation decay) whose floor keeps important memories
    relevant. ``age_days`` counts from the later of the event time and the last access;
    half-life 30 days.
    """
    floor = 0.5 * importance
    return floor + (1.0 - floor) * 2.0 ** (-max(age_days, 0.0) / half_life_days)


def current_relevance(memory: Memory, now: float) -> float:
    """:func:`relevance` of ``memory`` at ``now`` (epoch seconds), its age counted from the
    later of its event time and its last access, as decay computes it (:meth:`Tasks.decay`)."""
    ref = max(first_epoch(memory, "event_time", default=0.0), first_epoch(memory, "last_access_time", default=0.0))
    return relevance(memory.importance, (now - ref) / 86400.0)


@dataclass
class Tasks:
    """The tasks over the stores; ``publisher`` publishes the events each write recorded
    (:meth:`EventPublisher.commit`)."""

    settings: Settings
    graph: GraphStore
    vectors: VectorStore | None
    publisher: EventPublisher
    #: Creative runs of this process take turns from the link check to the write: FalkorDB
    #: runs two MERGEs at once without either seeing the other's edge, so two runs at once
    #: wrote (and counted) the same DISCOVERED edge twice. Replicas' scheduled runs are one
    #: at a time by the scheduler's lease (automem/consolidate/scheduler.py).
    linking: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    @staticmethod
    def _event(kind: int, before: Memory | None, after: Memory, content_changed: bool = False) -> str:
        """The outbox entry of a memory's event by consolidation."""
        return entry(make_event(kind, before=before, after=after, content_changed=content_changed, actor=ACTOR))

    @staticmethod
    def _relation_event(rel: Relation) -> str:
        """The outbox entry of the RELATION_CREATED event of an edge the run created (as
        ``POST /associate``'s, automem/ingest/servicer.py ``_create_relation``): the memory's
        history and ``GET /stream`` (``memory.associate``) show consolidation's edges too."""
        return entry(make_event(events_pb2.EVENT_TYPE_RELATION_CREATED, before=None, after=None,
                                relation=rel, actor=ACTOR))

    # --- decay ---------------------------------------------------------------------------

    async def decay(self, scope: str | None, dry_run: bool, computed: dict[str, float] | None = None) -> dict[str, int]:
        """Relevance of every ACTIVE and ARCHIVED memory (:func:`relevance`), written unless
        ``dry_run``; ``computed`` (when given) receives it by memory id, for a dry run's later
        steps to read instead of the stored values (:meth:`forget`)."""
        rows = await self.graph.memories.decay_inputs(scope)
        now = time.time()
        updates = []
        for mid, importance, event_time, last_access in rows:
            ref = max(float(event_time or 0.0), float(last_access or 0.0))
            updates.append((mid, relevance(float(importance or 0.0), (now - ref) / 86400.0)))
        if computed is not None:
            computed.update(updates)
        if not dry_run and updates:
            await self.graph.memories.set_relevance(updates)
        return {"decayed": len(updates)}

    # --- shared ----------------------------------------------------------------------------

    async def _vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        out = {}
        for i in range(0, len(ids), 256):
            for p in await self.vectors.retrieve(ids[i: i + 256], with_vectors=True):
                if p.vector is not None:
                    out[p.id] = np.asarray(p.vector, dtype=np.float32)
        return out

    # --- creative --------------------------------------------------------------------------

    async def creative(self, scope: str | None, dry_run: bool) -> dict[str, int]:
        if self.vectors is None:
            return {"discovered": 0}
        sample = await self.graph.memories.embedded(scope, CREATIVE_SAMPLE, sample=True)
        vecs = await self._vectors([mid for mid, _ in sample])
        pairs: dict[tuple[str, str], tuple[float, str]] = {}
        for mid, mscope in sample:
            if mid not in vecs:
                continue
            # Current memories only, as the sample (automem/graph/memories.py ``embedded``).
            hits = await self.vectors.search(vecs[mid].tolist(), 6, VectorFilter(
                scope=mscope, states=["ACTIVE"], valid_at=time.time()))
            for other, score in hits:
                if other != mid and self.settings.creative_threshold <= score < 0.999:
                    key = tuple(sorted((mid, other)))
                    pairs[key] = (max(score, pairs.get(key, (0.0, ""))[0]), mscope)
        if not pairs:
            return {"discovered": 0}
        async with self.linking:
            return await self._link_fresh(pairs, dry_run)

    async def _link_fresh(self, pairs: dict[tuple[str, str], tuple[float, str]], dry_run: bool) -> dict[str, int]:
        """The creative run's pairs not linked yet become DISCOVERED edges (strongest first,
        at most ``creative_max_links``); ``discovered`` counts the edges created (all that
        would be, on a dry run), each announced by a RELATION_CREATED event."""
        linked_keys = await self.graph.relations.linked_pairs(list(pairs))
        # MetaPatterns are excluded by the payload type check below.
        fresh = sorted(((s, k, sc) for k, (s, sc) in pairs.items() if k not in linked_keys), reverse=True)
        ids = {i for _, k, _ in fresh for i in k}
        types = {p.id: p.payload.get("type") for p in await self.vectors.retrieve(list(ids))} if ids else {}
        fresh = [f for f in fresh if "MetaPattern" not in (types.get(f[1][0]), types.get(f[1][1]))]
        fresh = fresh[: self.settings.creative_max_links]
        if dry_run or not fresh:
            return {"discovered": len(fresh)}
        # Only the edges this write created count (another replica's run may have written some).
        batch = Batch()
        created = await self.graph.relations.create_discovered(
            [{"a": k[0], "b": k[1], "s": s, "scope": sc, "reason": f"creative association: similarity {s:.2f}"}
             for s, k, sc in fresh], time.time(), self._relation_event, batch)
        await self.publisher.commit(batch)
        return {"discovered": len(created)}

    # --- cluster ---------------------------------------------------------------------------

    async def cluster(self, scope: str | None, dry_run: bool) -> dict[str, int]:
        """Cluster each scope (module docstring). Returns counts: ``clusters`` found,
        ``meta_patterns`` created and ``meta_patterns_archived`` (older patterns a new one
        replaced or whose members are gone); on a dry run, what would be."""
        if self.vectors is None:
            return {"clusters": 0, "meta_patterns": 0, "meta_patterns_archived": 0}
        scopes = [scope] if scope is not None else await self.graph.memories.active_scopes()
        counts = {"clusters": 0, "meta_patterns": 0, "meta_patterns_archived": 0}
        for sc in scopes:
            existing = await self.graph.memories.meta_patterns(sc)
            replaced: dict[str, str] = {}  # older pattern id -> why it gives way
            rows = await self.graph.memories.embedded(sc, CLUSTER_MAX)
            ids = [r[0] for r in rows]
            vecs = await self._vectors(ids)
            ids = [i for i in ids if i in vecs]
            if len(ids) >= self.settings.cluster_min_size:
                matrix = np.stack([vecs[i] for i in ids])
                sims = matrix @ matrix.T
                free = np.ones(len(ids), dtype=bool)
                for seed in range(len(ids)):
                    if not free[seed]:
                        continue
                    members = np.where(free & (sims[seed] >= self.settings.cluster_threshold))[0]
                    if len(members) < self.settings.cluster_min_size:
                        continue
                    free[members] = False
                    counts["clusters"] += 1
                    member_ids = [ids[i] for i in members]
                    pattern_id = await self._summarise(sc, member_ids, dry_run)
                    if pattern_id is None:
                        continue
                    counts["meta_patterns"] += 1
                    taken = set(member_ids)
                    for old_id, (_, old_members) in existing.items():
                        # The new pattern holds at least half of the older one's live members.
                        if old_id not in replaced and 2 * len(old_members & taken) >= max(len(old_members), 1):
                            replaced[old_id] = f"re-clustered into {pattern_id or '(dry run)'}"
            for old_id, (_, old_members) in existing.items():
                if old_id not in replaced and len(old_members) < self.settings.cluster_min_size:
                    replaced[old_id] = "members gone"
            counts["meta_patterns_archived"] += await self._archive_patterns(sc, existing, replaced, dry_run)
        return counts

    async def _archive_patterns(self, scope: str, existing: dict[str, tuple[int, set[str]]],
                                replaced: dict[str, str], dry_run: bool) -> int:
        """ARCHIVE each pattern of ``replaced`` (id -> reason) at the version ``existing``
        read, with a MEMORY_ARCHIVED event; a pattern changed meanwhile (another run) is left
        alone. Returns how many were archived (on a dry run, how many would be)."""
        if dry_run or not replaced:
            return len(replaced)
        current = await self.graph.memories.hydrate(list(replaced), scope)
        items = []
        for pid, reason in replaced.items():
            before = current.get(pid)
            if (before is None or before.version != existing[pid][0]
                    or before.state != memory_pb2.MEMORY_STATE_ACTIVE):
                continue
            updated = Memory()
            updated.CopyFrom(before)
            updated.state = memory_pb2.MEMORY_STATE_ARCHIVED
            updated.state_reason = f"consolidate: {reason}"
            updated.version = before.version + 1
            updated.update_time.CopyFrom(ts(time.time()))
            items.append((updated, before.version, self._event(events_pb2.EVENT_TYPE_MEMORY_ARCHIVED, before, updated)))
        batch = Batch()
        with acting_as(ACTOR):  # the versions name the actor their events name
            written = await self.graph.memories.replace_many(items, batch)
        await self.publisher.commit(batch)
        return len(written)

    async def _summarise(self, scope: str, member_ids: list[str], dry_run: bool) -> str | None:
        """Create the MetaPattern of one cluster. Its id ("" on a dry run), or None when the
        cluster (its member ids with their content hashes) is summarised already or another
        run summarised it meanwhile."""
        members = await self.graph.memories.hydrate(member_ids, scope)
        key = hashlib.sha256("|".join(f"{i}:{members[i].content_hash if i in members else ''}"
                                      for i in sorted(member_ids)).encode()).hexdigest()[:24]
        if await self.graph.memories.meta_pattern_exists(scope, key):
            return None
        if dry_run:
            return ""
        texts = [members[i].content for i in member_ids if i in members]
        summary = extractive_summary(" ".join(t.rstrip(".") + "." for t in texts), self.settings.summary_max_length)
        now = time.time()
        meta = Memory(id=str(uuid.uuid4()), scope=scope, content=f"Pattern across {len(texts)} memories: {summary}",
                      type=memory_pb2.MEMORY_TYPE_META_PATTERN, tags=["meta-pattern"],
                      importance=float(np.mean([m.importance for m in members.values()])) if members else 0.5,
                      confidence=0.6, state=memory_pb2.MEMORY_STATE_ACTIVE, version=1, source=ACTOR,
                      embedding_status=memory_pb2.EMBEDDING_STATUS_PENDING,
                      enrichment_status=memory_pb2.ENRICHMENT_STATUS_PENDING, relevance_score=1.0)
        meta.content_hash = content_hash(meta.content)
        set_metadata(meta, {"cluster_key": key, "member_ids": list(member_ids)})
        for name in ("create_time", "update_time", "record_time", "event_time", "valid_from"):
            getattr(meta, name).CopyFrom(ts(now))
        batch = Batch()
        with acting_as(ACTOR):  # its first version names the actor its MEMORY_CREATED event names
            created = await self.graph.memories.create_meta_pattern(
                meta, key, self._event(events_pb2.EVENT_TYPE_MEMORY_CREATED, None, meta, content_changed=True), batch)
        await self.publisher.commit(batch)
        if not created:
            return None  # another run summarised this cluster meanwhile
        batch = Batch()
        await self.graph.relations.link_members(meta.id, member_ids, scope, now, self._relation_event, batch)
        await self.publisher.commit(batch)
        return meta.id

    # --- forget ----------------------------------------------------------------------------

    async def forget(self, scope: str | None, dry_run: bool, decayed: dict[str, float] | None = None) -> dict[str, int]:
        """Archive, then later delete, memories whose relevance fell under the thresholds
        (module docstring). Candidates are read by the relevance decay stored, then judged by
        their relevance now (:func:`current_relevance`): a memory read since the last decay
        was forgotten by its stale score. A dry run of a full run passes ``decayed`` (its
        decay step's relevance, not written): every memory is a candidate then, where
        reading the stored relevance counted nothing the decay had just lowered."""
        protected = [t.strip() for t in self.settings.forget_protected_types.split(",") if t.strip()]
        delete_below, archive_below = self.settings.forget_delete_threshold, self.settings.forget_archive_threshold
        now = time.time()
        to_delete, to_archive = await self.graph.memories.forget_candidates(
            scope, protected, self.settings.forget_protected_importance, FORGOTTEN,
            None if decayed is not None else delete_below, None if decayed is not None else archive_below,
            now - self.settings.forget_archive_grace_days * 86400.0)
        score = {m.id: current_relevance(m, now) for m in to_delete + to_archive}
        to_delete = [m for m in to_delete if score[m.id] < delete_below]
        to_archive = [m for m in to_archive if score[m.id] < archive_below]
        if dry_run:
            return {"archived": len(to_archive), "deleted": len(to_delete)}
        done = {"archived": 0, "deleted": 0}
        # Delete first: only what an earlier run archived (never in the run that archives it).
        for key, rows, state, kind in (
                ("deleted", to_delete, memory_pb2.MEMORY_STATE_DELETED, events_pb2.EVENT_TYPE_MEMORY_DELETED),
                ("archived", to_archive, memory_pb2.MEMORY_STATE_ARCHIVED, events_pb2.EVENT_TYPE_MEMORY_ARCHIVED)):
            items = []
            for current in rows:
                updated = Memory()
                updated.CopyFrom(current)
                updated.state = state
                updated.state_reason = f"{FORGOTTEN}: relevance {score[current.id]:.3f}"
                updated.version = current.version + 1
                updated.update_time.CopyFrom(ts(time.time()))
                if state == memory_pb2.MEMORY_STATE_DELETED:
                    updated.retract_time.CopyFrom(ts(time.time()))
                items.append((updated, current.version, self._event(kind, current, updated)))
            # The versions name the actor the events name: the API key that asked for the run
            # (or "system" for a scheduled one) was recorded while the events said ACTOR.
            for start in range(0, len(items), FORGET_BATCH):
                batch = Batch()
                with acting_as(ACTOR):
                    written = await self.graph.memories.replace_many(items[start:start + FORGET_BATCH], batch)
                await self.publisher.commit(batch)
                done[key] += len(written)
        return done


def counts_json(counts: dict[str, int]) -> str:
    """Counts as stable JSON (logs)."""
    return json.dumps(counts, sort_keys=True)
