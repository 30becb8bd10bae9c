"""ReviewService: the truth model's bookkeeping — the review queue, tombstones and
per-memory history. Served by the ingest target next to IngestService: its decisions are
writes to the same Memory nodes, with the same graph store, publisher and lifecycle rules
(automem/common/lifecycle.py).

Review queue
  * A memory written for review (``require_review`` or a key that requires review) is a
    Memory node in state PENDING_REVIEW; while pending, its review item *is* the memory
    (item id = memory id, kind ``memory``). The decision writes a
    ``(:ReviewItem {id: <memory id>, kind: "memory", status, decided_by, ...})`` node in the
    same query as the state change.
  * Enrichment writes supersede proposals as
    ``(:ReviewItem {id, kind: "supersede_proposal", memory_id, target_id, reason,
    create_time, status: "pending", scope})``; approving one supersedes ``target_id`` by the
    existing ``memory_id`` in ONE graph query (window closed, state SUPERSEDED, edge
    written, item closed); rejecting just closes it. Approving a pending memory after its
    supersede proposal was rejected leaves two current memories: the approval's answer says
    so (``conflicts``, ``warning``), its item records ``conflicts_with`` and its
    REVIEW_APPROVED event's reason carries the warning.
  * Rejecting a memory sets it REJECTED (retract_time now) and creates a
    ``(:Tombstone {id, content_hash, scope, lifted: false, memory_id, reason, create_time,
    created_by})`` in the same query; storing that content again in that scope fails with
    ALREADY_EXISTS naming the tombstone until an admin lifts it.

Every decision publishes a MemoryEvent (REVIEW_APPROVED / REVIEW_REJECTED, plus
MEMORY_SUPERSEDED for an approved proposal). A decision holds the locks of the memories it
names (the pending memory; a proposal's two memories) from its read until its events are
published — the IngestServicer's locks (automem/ingest/memory_locks.py), so a decision and
an update, delete or supersede of the same memory publish in version order.

Purges (automem/ingest/purge.py): ``PurgeMemory``, ``PurgeScope``, ``ListPurges`` — the
only way history disappears; what stays is a content-free ``:Purge`` record.

History
  * ``ListMemoryEvents`` reads one memory's MemoryEvents from the durable stream
    (automem/common/bus.py), within the stream's retention.
  * ``StreamMemoryEvents`` follows the scope's events (MemoryEvents and ActivityEvents) on
    that stream as they are published, from any stream sequence on (the SSE ``/stream`` of
    automem/gateway/routes_stream.py is built on it).
"""

from __future__ import annotations

import uuid
from typing import Any

from google.protobuf.message import DecodeError

from automem.common.auth import Principal, require_role, resolve_scope, still_authorized
from automem.common.bus import Bus, StreamRetention
from automem.common.errors import Aborted, FailedPrecondition, InvalidArgument, NotFound
from automem.common.lifecycle import (
    SUPERSEDING_RELATIONS,
    check_replacement_valid,
    check_transition,
    close_for_supersede,
    is_republished_creation,
    is_requeue,
    make_event,
)
from automem.common.model import (
    Memory,
    Relation,
    epoch,
    first_epoch,
    memory_to_node,
    now,
    state_name,
    ts,
)
from automem.common.outbox import EventPublisher
from automem.common.paging import decode_offset_token, encode_offset_token
from automem.common.settings import Settings
from automem.common.state import ReadAt, as_read, resolve, resolve_one
from automem.common.text import is_blank
from automem.graph import ENRICHMENT_FIELDS, GraphStore
from automem.ingest.entity_merge import EntityMerges
from automem.ingest.logic import check_reason, mark_payload_behind
from automem.ingest.memory_locks import MemoryLocks
from automem.ingest.purge import Purger, PurgeRpcs
from automem.v1 import event_stream_pb2, events_pb2, memory_pb2, review_service_pb2, review_service_pb2_grpc

REVIEW_KINDS = ("memory", "supersede_proposal")
REVIEW_STATUSES = ("pending", "approved", "rejected")
MAX_REVIEW_PAGE = 200
MAX_EVENT_PAGE = 1000
#: How much earlier than a memory's ``create_time`` its history read starts on the stream
#: (seconds): room for the clocks of the ingest process and the NATS server to differ.
HISTORY_CLOCK_SKEW_SECONDS = 300.0
#: Events fetched from the stream at once by StreamMemoryEvents, and the seconds one fetch
#: waits for new ones: between fetches the stream checks that the caller's key was not
#: revoked (README: a revoked key is refused within 2 s), so 1 s, not the 5 s it was.
STREAM_BATCH = 64
STREAM_WAIT_SECONDS = 1.0


def _check_target_unchanged(proposal: dict[str, Any], target: Memory) -> None:
    """FAILED_PRECONDITION naming ``id`` when the memory a proposal supersedes changed since it
    was proposed (its ``target_version``; enrichment's proposals have none): approving would
    supersede a version the proposer never saw, as a stale ``If-Match`` would have on a
    direct supersede."""
    expected = proposal.get("target_version")
    if expected is not None and int(expected) != int(target.version):
        raise FailedPrecondition(
            f"id: memory {target.id} changed since the supersede was proposed (version {expected}, now "
            f"{target.version}); reject it and supersede the current version", field="id")


def _conflict_warning(memory_id: str, conflicts: list[review_service_pb2.ReviewConflict]) -> str:
    """ApproveReviewItemResponse.warning: ``""`` without conflicts, else one sentence naming
    each memory left current next to ``memory_id`` and the rejected proposal that left it."""
    if not conflicts:
        return ""
    named = ", ".join(f"{c.memory_id} (supersede proposal {c.proposal_id} rejected"
                      + (f": {c.rejection_reason})" if c.rejection_reason else ")") for c in conflicts)
    return (f"memory {memory_id} is current now next to {named}, which it was proposed to supersede; "
            f"if they contradict, supersede one by the other or delete one")


def _item(props: dict[str, Any]) -> review_service_pb2.ReviewItem:
    item = review_service_pb2.ReviewItem(
        id=props.get("id") or "", kind=props.get("kind") or "", memory_id=props.get("memory_id") or "",
        target_id=props.get("target_id") or "", reason=props.get("reason") or "",
        status=props.get("status") or "pending", scope=props.get("scope") or "",
        decided_by=props.get("decided_by") or "", decision_reason=props.get("decision_reason") or "",
        conflicts_with=list(props.get("conflicts_with") or []))
    for name in ("create_time", "decision_time"):
        if props.get(name) is not None:
            getattr(item, name).CopyFrom(ts(float(props[name])))
    return item


def _memory_item(memory: Memory) -> review_service_pb2.ReviewItem:
    item = review_service_pb2.ReviewItem(id=memory.id, kind="memory", memory_id=memory.id, status="pending",
                                         scope=memory.scope, reason=memory.state_reason, memory=memory)
    item.create_time.CopyFrom(memory.create_time)
    return item


def _tombstone(props: dict[str, Any]) -> review_service_pb2.Tombstone:
    out = review_service_pb2.Tombstone(
        id=props.get("id") or "", content_hash=props.get("content_hash") or "", scope=props.get("scope") or "",
        memory_id=props.get("memory_id") or "", reason=props.get("reason") or "",
        lifted=bool(props.get("lifted")), created_by=props.get("created_by") or "",
        lifted_by=props.get("lifted_by") or "")
    for name in ("create_time", "lift_time"):
        if props.get(name) is not None:
            getattr(out, name).CopyFrom(ts(float(props[name])))
    return out


class ReviewServicer(EntityMerges, PurgeRpcs, review_service_pb2_grpc.ReviewServiceServicer):
    """gRPC ReviewService over the graph store and the event publisher (whose bus also
    serves the history). ``locks``: the per-memory write locks of the process's
    IngestServicer (automem/targets.py passes ``IngestServicer.locks``); a new set when
    omitted, which orders this servicer's writes only."""

    def __init__(self, settings: Settings, graph: GraphStore, publisher: EventPublisher,
                 locks: MemoryLocks | None = None) -> None:
        self.settings = settings
        self.graph = graph
        self.publisher = publisher
        self.locks = locks if locks is not None else MemoryLocks()
        self.purger = Purger(graph, publisher, self.locks)

    # --- review queue ---------------------------------------------------------------

    async def ListReviewItems(self, request, context):
        """Review items of the scope, oldest first: pending memories (PENDING_REVIEW; with
        ``target_id`` / ``target`` when a supersede proposal waits with one) and
        ReviewItem nodes (proposals, decided memories) with ``status`` (default pending;
        "all" for every status) and optional ``kind``. Paged: ``page_size`` ≤ 200 (0 = 50),
        opaque ``page_token``; empty ``next_page_token`` = last page."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        status = (request.status or "pending").lower()
        if status not in REVIEW_STATUSES + ("all",):
            raise InvalidArgument("status: one of pending, approved, rejected, all", field="status")
        kind = request.kind.lower()
        if kind and kind not in REVIEW_KINDS:
            raise InvalidArgument(f"kind: one of {', '.join(REVIEW_KINDS)}", field="kind")
        size = request.page_size or 50
        if size < 1 or size > MAX_REVIEW_PAGE:
            raise InvalidArgument(f"page_size: must be between 1 and {MAX_REVIEW_PAGE}", field="page_size")
        bound = f"review:{scope}:{status}:{kind}"
        offset = decode_offset_token(request.page_token, bound)
        items: list[review_service_pb2.ReviewItem] = []
        if status in ("pending", "all") and kind in ("", "memory"):
            # A pending replacement names the memory its proposal would replace (``target``), so a
            # reviewer deciding the memory's item sees what approving it supersedes.
            waiting = {p.get("memory_id"): p.get("target_id") or ""
                       for p in await self.graph.review.items(scope, "pending", "supersede_proposal")}
            for memory in await self.graph.memories.pending_review(scope):
                item = _memory_item(memory)
                item.target_id = waiting.get(memory.id, "")
                items.append(item)
        items.extend(_item(props) for props in await self.graph.review.items(scope, status, kind))
        items.sort(key=lambda it: (epoch(it, "create_time") or 0.0, it.id))
        page = items[offset: offset + size]
        ids = {i for it in page for i in (it.memory_id, it.target_id) if i}
        found = await self.graph.memories.hydrate(ids, scope)
        for it in page:
            if it.memory_id in found and not it.HasField("memory"):
                it.memory.CopyFrom(found[it.memory_id])
            if it.target_id in found:
                it.target.CopyFrom(found[it.target_id])
        return review_service_pb2.ListReviewItemsResponse(
            items=page, next_page_token=encode_offset_token(offset + size, bound) if offset + size < len(items) else "")

    async def _item_memory_ids(self, item_id: str, scope: str) -> list[str]:
        """The memories a decision on ``item_id`` may write or report: a ReviewItem node's
        ``memory_id`` and ``target_id``, else ``item_id`` itself (a pending memory's item).
        These never change, so they can be read before the locks are taken."""
        node = await self.graph.review.get(item_id, scope)
        if node is None:  # a pending memory: with the memories its pending supersedes would replace
            return [item_id, *(p.get("target_id") for p in await self.graph.review.pending_proposals_of(item_id, scope)
                               if p.get("target_id"))]
        return [i for i in (node.get("memory_id"), node.get("target_id")) if i]

    async def _find_item(self, item_id: str, scope: str) -> tuple[dict[str, Any] | None, Memory | None]:
        """(ReviewItem node properties or None, pending memory or None)."""
        node = await self.graph.review.get(item_id, scope)
        if node is not None:
            return node, None
        memory = await self.graph.memories.get(item_id, scope)
        if memory is None:
            raise NotFound(f"review item {item_id} not found", field="id")
        if memory.state != memory_pb2.MEMORY_STATE_PENDING_REVIEW:
            raise FailedPrecondition(f"review item {item_id}: memory is {state_name(memory.state)}, not pending review",
                                     field="id")
        return None, memory

    async def ApproveReviewItem(self, request, context):
        """Approve a pending item (admin). A memory goes PENDING_REVIEW → ACTIVE; a supersede
        proposal supersedes ``target_id`` by ``memory_id`` in one graph query. A memory whose
        supersede proposal was rejected before is approved, and the answer's ``conflicts`` /
        ``warning`` name each memory it was to replace that stays current next to it (also
        recorded on the decided item, ``conflicts_with``, and in the REVIEW_APPROVED event's
        reason). NOT_FOUND when absent; FAILED_PRECONDITION when already decided or a state
        forbids it."""
        principal = require_role("admin")
        scope = resolve_scope(request.scope)
        check_reason(request.reason)
        async with self.locks.hold_all(await self._item_memory_ids(request.id, scope)):
            return await self._approve(request, scope, principal)

    async def _approve(self, request, scope: str,
                       principal: Principal) -> review_service_pb2.ApproveReviewItemResponse:
        """:meth:`ApproveReviewItem` under the locks of the item's memories."""
        node, pending = await self._find_item(request.id, scope)
        if node is not None and node.get("status") != "pending":
            raise FailedPrecondition(f"review item {request.id} is already {node.get('status')}", field="id")
        if pending is None and node is not None and node.get("kind") == "memory":
            pending = await self.graph.memories.get(node.get("memory_id") or "", scope)
            if pending is None:
                raise NotFound(f"memory {node.get('memory_id')} not found", field="id")
        item_id = request.id
        if pending is None and node is not None and node.get("kind") == "supersede_proposal":
            proposed = await self.graph.memories.get(node.get("memory_id") or "", scope)
            if proposed is not None and proposed.state == memory_pb2.MEMORY_STATE_PENDING_REVIEW:
                # A replacement waiting for review (automem/ingest/servicer.py _propose_supersede):
                # approving its proposal approves it, as approving it applies the proposal.
                pending, item_id = proposed, proposed.id
        stamp = now()
        if pending is not None:
            check_transition(pending.state, memory_pb2.MEMORY_STATE_ACTIVE)
            proposals = await self.graph.review.pending_proposals_of(pending.id, scope)
            await self._check_proposals_apply(pending, proposals, scope)
            conflicts = await self._rejected_supersedes(pending, proposals, scope)
            warning = _conflict_warning(pending.id, conflicts)
            approved = Memory()
            approved.CopyFrom(pending)
            approved.state = memory_pb2.MEMORY_STATE_ACTIVE
            approved.state_reason = request.reason
            approved.version = pending.version + 1
            approved.update_time.CopyFrom(ts(stamp))
            behind = mark_payload_behind(pending, approved)
            item = await self._decide_memory(pending, approved, item_id, "approved", principal.name,
                                             request.reason, stamp, payload_behind=behind,
                                             conflicts_with=[c.memory_id for c in conflicts])
            await self.publisher.publish(make_event(
                events_pb2.EVENT_TYPE_REVIEW_APPROVED, before=pending, after=approved,
                reason="; ".join(r for r in (request.reason, warning) if r)))
            answer = review_service_pb2.ApproveReviewItemResponse(item=item, memory=approved, conflicts=conflicts,
                                                                  warning=warning)
            for proposal in proposals:  # the supersede it waited with
                applied = await self._approve_proposal(proposal, scope, principal, request.reason, now())
                answer.superseded.CopyFrom(applied.superseded)
                if proposal["id"] == request.id:  # approved in the proposal's name: answer with it
                    answer.item.CopyFrom(applied.item)
            return answer
        return await self._approve_proposal(node, scope, principal, request.reason, stamp)

    async def _check_proposals_apply(self, pending: Memory, proposals: list[dict[str, Any]], scope: str) -> None:
        """FAILED_PRECONDITION naming ``id``, before anything is written, when a memory that
        ``pending`` is to supersede on approval can no longer be superseded (it was superseded,
        deleted or archived meanwhile), or when ``pending``'s window ends before that memory's
        begins: approving would leave two current facts or none."""
        for proposal in proposals:
            target = await self.graph.memories.get(proposal.get("target_id") or "", scope)
            if target is None or target.state != memory_pb2.MEMORY_STATE_ACTIVE:
                now_state = "gone" if target is None else state_name(target.state)
                raise FailedPrecondition(
                    f"id: memory {pending.id} was stored to supersede {proposal.get('target_id')}, which is now "
                    f"{now_state}; reject it (or reject its proposal {proposal.get('id')} and approve it as a new "
                    "memory)", field="id")
            check_replacement_valid(pending, target, "id")
            _check_target_unchanged(proposal, target)

    async def _rejected_supersedes(self, pending: Memory, proposals: list[dict[str, Any]],
                                   scope: str) -> list[review_service_pb2.ReviewConflict]:
        """The conflicts approving ``pending`` leaves (ApproveReviewItemResponse.conflicts):
        each memory a REJECTED supersede proposal of ``pending`` was to replace that is still
        current (the state pass at now, automem/common/state.py ``resolve``), or the head of
        the chain it was replaced along since, and that no pending proposal of ``pending``
        (``proposals``, applied by the approval) replaces. Rejecting the proposal kept the old fact; approving
        the replacement then makes a second current fact next to it, which the caller must be
        told of rather than find later."""
        replaced = {p.get("target_id") for p in proposals}
        rejected = [p for p in await self.graph.review.proposals_of(pending.id, scope)
                    if p.get("status") == "rejected" and p.get("target_id") and p.get("target_id") not in replaced]
        if not rejected:
            return []
        found = await self.graph.memories.hydrate([p["target_id"] for p in rejected], scope)
        # The fact in force now for each old one: itself, or the head of the chain it was
        # replaced along since the rejection (re-check round G: a later supersede of the old
        # fact left vpn2 and vpn3 both current, and the approval named neither).
        targets = [found[p["target_id"]] for p in rejected if p["target_id"] in found]
        current = {t.id: r.memory for t, r in zip(targets, await resolve(self.graph, targets, scope, ReadAt(),
                                                                         dedupe=False), strict=True)
                   if r is not None}
        conflicts: dict[str, review_service_pb2.ReviewConflict] = {}
        for proposal in sorted(rejected, key=lambda p: (float(p.get("decision_time") or 0.0), p.get("id") or "")):
            target = current.get(proposal["target_id"])
            if target is None or target.id == pending.id or target.id in conflicts:
                continue
            conflicts[target.id] = review_service_pb2.ReviewConflict(
                memory_id=target.id, proposal_id=proposal.get("id") or "",
                rejection_reason=proposal.get("decision_reason") or "", memory=target)
        return list(conflicts.values())

    async def _decide_memory(self, before: Memory, after: Memory, item_id: str, status: str, actor: str,
                             reason: str, stamp: Any, tombstone: dict[str, Any] | None = None,
                             payload_behind: bool = False,
                             conflicts_with: list[str] | None = None) -> review_service_pb2.ReviewItem:
        """One query: the memory's new state (version-checked), the decided ReviewItem (with
        ``conflicts_with``, the ids of memories left current next to it, when given) and, on
        rejection, the tombstone; ``payload_behind``: see automem/graph/memories.py
        ``PAYLOAD_BEHIND``. Aborted on a concurrent change."""
        props = {k: v for k, v in memory_to_node(after).items() if k not in ENRICHMENT_FIELDS}
        item = {"id": item_id, "kind": "memory", "memory_id": before.id, "target_id": "", "reason": "",
                "create_time": epoch(before, "create_time"), "status": status, "scope": before.scope,
                "decided_by": actor, "decision_time": epoch(after, "update_time"), "decision_reason": reason}
        if conflicts_with:
            item["conflicts_with"] = list(conflicts_with)
        if not await self.graph.review.decide_memory(before, props, item_id, item, [tombstone] if tombstone else [],
                                                     payload_behind=payload_behind):
            raise Aborted(f"memory {before.id} changed concurrently, retry")
        return _item(item)

    async def _approve_proposal(self, node: dict[str, Any], scope: str, principal: Principal, reason: str,
                                stamp: Any) -> review_service_pb2.ApproveReviewItemResponse:
        new = await self.graph.memories.get(node.get("memory_id") or "", scope)
        target = await self.graph.memories.get(node.get("target_id") or "", scope)
        if new is None or target is None:
            raise NotFound(f"review item {node['id']}: memory {node.get('memory_id') if new is None else node.get('target_id')}"
                           " not found", field="id")
        if new.id == target.id:
            raise FailedPrecondition("review item: a memory cannot supersede itself", field="id")
        if new.state != memory_pb2.MEMORY_STATE_ACTIVE:
            raise FailedPrecondition(f"review item {node['id']}: proposed memory {new.id} is "
                                     f"{state_name(new.state)}, not ACTIVE", field="id")
        check_replacement_valid(new, target, "id")
        check_transition(target.state, memory_pb2.MEMORY_STATE_SUPERSEDED)
        _check_target_unchanged(node, target)
        why = node.get("reason") or reason
        closed = close_for_supersede(target, new.id, first_epoch(new, "valid_from", "create_time"), stamp, why)
        rel_name = (node.get("relation_type") or "INVALIDATED_BY").upper()
        if rel_name not in SUPERSEDING_RELATIONS:
            rel_name = "INVALIDATED_BY"
        rel = Relation(source_id=target.id, target_id=new.id, type=memory_pb2.RelationType.Value(
            "RELATION_TYPE_" + rel_name),
            strength=0.9 if node.get("strength") is None else float(node["strength"]), scope=scope, reason=why)
        rel.create_time.CopyFrom(ts(stamp))
        item = dict(node)
        item.update({"status": "approved", "decided_by": principal.name, "decision_time": epoch(rel, "create_time"),
                     "decision_reason": reason})
        old_props = {k: v for k, v in memory_to_node(closed).items() if k not in ENRICHMENT_FIELDS}
        if not await self.graph.review.approve_proposal(node["id"], scope, item, target, old_props, new.id, rel):
            raise Aborted(f"review item {node['id']}: a memory or the item changed concurrently, retry")
        await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_MEMORY_SUPERSEDED, before=target, after=closed,
                                                relation=rel, reason=why))
        await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_REVIEW_APPROVED, before=new, after=new,
                                                relation=rel, reason=f"supersede proposal {node['id']} approved"))
        return review_service_pb2.ApproveReviewItemResponse(item=_item(item), memory=new, superseded=closed)

    async def RejectReviewItem(self, request, context):
        """Reject a pending item with a reason (admin; INVALID_ARGUMENT naming reason without
        one: empty, or nothing but whitespace or invisible characters, automem/common/text.py
        ``is_blank``, as a memory's content is judged). A memory goes REJECTED (retract_time
        now) and its content hash is tombstoned in its scope, in one query; a supersede
        proposal is just closed."""
        principal = require_role("admin")
        scope = resolve_scope(request.scope)
        if is_blank(request.reason):  # "\u3164" or "\u200b" passed str.strip's test: a reason showing nothing
            raise InvalidArgument("reason: a rejection needs a reason (not only whitespace or invisible characters)",
                                  field="reason")
        check_reason(request.reason)
        async with self.locks.hold_all(await self._item_memory_ids(request.id, scope)):
            return await self._reject(request, scope, principal)

    async def _reject(self, request, scope: str,
                      principal: Principal) -> review_service_pb2.RejectReviewItemResponse:
        """:meth:`RejectReviewItem` under the locks of the item's memories."""
        node, pending = await self._find_item(request.id, scope)
        if node is not None and node.get("status") != "pending":
            raise FailedPrecondition(f"review item {request.id} is already {node.get('status')}", field="id")
        if pending is None and node is not None and node.get("kind") == "memory":
            pending = await self.graph.memories.get(node.get("memory_id") or "", scope)
        stamp = now()
        if pending is not None:
            check_transition(pending.state, memory_pb2.MEMORY_STATE_REJECTED)
            rejected = Memory()
            rejected.CopyFrom(pending)
            rejected.state = memory_pb2.MEMORY_STATE_REJECTED
            rejected.state_reason = request.reason
            rejected.version = pending.version + 1
            rejected.update_time.CopyFrom(ts(stamp))
            rejected.retract_time.CopyFrom(ts(stamp))
            tomb = {"id": str(uuid.uuid4()), "content_hash": pending.content_hash, "scope": pending.scope,
                    "lifted": False, "memory_id": pending.id, "reason": request.reason,
                    "create_time": epoch(rejected, "update_time"), "created_by": principal.name}
            item = await self._decide_memory(pending, rejected, request.id, "rejected", principal.name,
                                             request.reason, stamp, tombstone=tomb)
            for proposal in await self.graph.review.pending_proposals_of(pending.id, scope):
                # The supersede it waited with goes with it: the memory it named stays current.
                await self.graph.review.close_pending(proposal["id"], scope, {
                    "status": "rejected", "decided_by": principal.name, "decision_time": stamp.timestamp(),
                    "decision_reason": f"memory {pending.id} rejected: {request.reason}"})
            await self.publisher.publish(make_event(events_pb2.EVENT_TYPE_REVIEW_REJECTED, before=pending,
                                                    after=rejected, reason=request.reason))
            return review_service_pb2.RejectReviewItemResponse(item=item, memory=rejected, tombstone=_tombstone(tomb))
        item = dict(node)
        item.update({"status": "rejected", "decided_by": principal.name, "decision_time": stamp.timestamp(),
                     "decision_reason": request.reason})
        if not await self.graph.review.close_pending(node["id"], scope, item):
            raise Aborted(f"review item {node['id']} changed concurrently, retry")
        memory = await self.graph.memories.get(node.get("memory_id") or "", scope)
        event = make_event(events_pb2.EVENT_TYPE_REVIEW_REJECTED, before=memory, after=memory,
                           reason=f"supersede proposal {node['id']} rejected: {request.reason}")
        event.memory_id = node.get("memory_id") or ""
        event.scope = scope
        await self.publisher.publish(event)
        return review_service_pb2.RejectReviewItemResponse(item=_item(item), memory=memory)

    # --- tombstones -----------------------------------------------------------------

    async def ListTombstones(self, request, context):
        """Tombstones of the scope, newest first (admin); lifted ones with ``include_lifted``."""
        require_role("admin")
        scope = resolve_scope(request.scope)
        size = request.page_size or 50
        if size < 1 or size > MAX_REVIEW_PAGE:
            raise InvalidArgument(f"page_size: must be between 1 and {MAX_REVIEW_PAGE}", field="page_size")
        bound = f"tombstones:{scope}:{request.include_lifted}"
        offset = decode_offset_token(request.page_token, bound)
        items = [_tombstone(props) for props in
                 await self.graph.tombstones.page(scope, request.include_lifted, offset, size + 1)]
        return review_service_pb2.ListTombstonesResponse(
            tombstones=items[:size], next_page_token=encode_offset_token(offset + size, bound) if len(items) > size else "")

    async def LiftTombstone(self, request, context):
        """Lift a tombstone (admin) so its content may be stored again. NOT_FOUND when absent."""
        principal = require_role("admin")
        scope = resolve_scope(request.scope)
        lifted = await self.graph.tombstones.lift(request.id, scope, now().timestamp(), principal.name)
        if lifted is None:
            raise NotFound(f"tombstone {request.id} not found", field="id")
        return review_service_pb2.LiftTombstoneResponse(tombstone=_tombstone(lifted))

    # --- history ---------------------------------------------------------

    async def ListMemoryEvents(self, request, context):
        """Every MemoryEvent of one memory (its own and its relations'), oldest first, from
        the durable stream, but the re-queue signals that changed nothing
        (automem/common/lifecycle.py ``is_requeue``). Paged: ``page_size`` ≤ 1000 (0 = 100).
        The stream keeps events for its retention only (``event_retention_days`` / ``_bytes``): ``truncated`` says
        the retained history does not begin with the memory's MEMORY_CREATED event, or begins
        with one the pending sweep published in its stead (automem/enrich/pending.py) for a
        memory created before the stream's oldest held event when the retention removed
        events (its creation event may be one of them); and
        ``retained_since_time`` when the stream's oldest event was written. NOT_FOUND when the
        memory has no event and no node in the caller's scope; INVALID_ARGUMENT naming
        ``page_token`` for a token of another listing (an empty ``id`` is refused before, by the
        interceptor: automem/common/grpc_server.py ``_require_id``).

        ``after.state`` of the memory's own events is the state a current read gives it now,
        so the history agrees with GetMemory: a SUPERSEDED ``after`` of a memory still in
        force (a supersede whose replacement's window begins later) reads ACTIVE
        (automem/common/state.py ``as_read``); ``after_stored_states`` maps each such
        event's id to the state its ``after`` stores."""
        require_role("reader")
        scope = resolve_scope(request.scope)
        size = request.page_size or 100
        if size < 1 or size > MAX_EVENT_PAGE:
            raise InvalidArgument(f"page_size: must be between 1 and {MAX_EVENT_PAGE}", field="page_size")
        bound = f"events:{scope}:{request.id}"
        offset = decode_offset_token(request.page_token, bound)
        bus = self.publisher.bus
        retention = await bus.retention()
        node = await self.graph.memories.get(request.id, scope)
        # Every event of a memory comes after its node was written (ingest stamps create_time,
        # then publishes): the read starts there, less HISTORY_CLOCK_SKEW_SECONDS for the
        # clocks of the writer and the NATS server; a purged memory's read starts at the
        # stream's first message.
        since = None if node is None else first_epoch(node, "create_time", "record_time", default=None)
        # Re-queue signals (reprocess, re-embed, sync repair) changed nothing: not history.
        events = [e for e in await bus.events_for(
                      request.id, limit=10**9, since=None if since is None else since - HISTORY_CLOCK_SKEW_SECONDS)
                  if (e.scope or e.relation.scope) == scope and not is_requeue(e)]
        if not events and node is None:
            raise NotFound(f"memory {request.id} has no history in scope {scope!r}", field="id")
        created = bool(events) and events[0].type == events_pb2.EVENT_TYPE_MEMORY_CREATED \
            and events[0].memory_id == request.id
        if created and is_republished_creation(events[0]) and retention.trimmed and retention.first_time is not None:
            # The pending sweep's stand-in for a creation event it did not find: the original
            # may be one the retention removed when the memory is older than the oldest held.
            created = first_epoch(events[0].after, "create_time", default=0.0) >= retention.first_time
        page = events[offset: offset + size]
        stored = {}
        read = ReadAt()
        in_force = node is not None and (await resolve_one(self.graph, node, scope, read))[0]
        for i, event in enumerate(page):
            if event.memory_id != request.id or not event.HasField("after"):
                continue
            stored[event.event_id] = event.after.state
            shown = as_read(event.after, in_force, read)
            if shown is not event.after:
                page[i] = copied = events_pb2.MemoryEvent()
                copied.CopyFrom(event)
                copied.after.CopyFrom(shown)
        response = review_service_pb2.ListMemoryEventsResponse(
            events=page, after_stored_states=stored,
            next_page_token=encode_offset_token(offset + size, bound) if offset + size < len(events) else "",
            truncated=not created)
        if retention.first_time is not None:
            response.retained_since_time.CopyFrom(ts(retention.first_time))
        return response

    async def StreamMemoryEvents(self, request, context):
        """Follow the caller's scope on the durable event stream (automem/common/bus.py
        :class:`EventTail`), oldest first, until the caller goes away.

        Each item carries its JetStream stream ``sequence`` and a MemoryEvent of the scope
        (its own ``scope``, or its relation's) or an ActivityEvent of the scope (one of scope
        ``""``/``"*"`` — a consolidation of every scope — only for a key allowed on every
        scope, as automem/consolidate/servicer.py lists such runs). ``after_sequence`` N > 0
        resumes: every event of the scope after N follows, none skipped; when events after N
        were removed by the retention the first item is a ``trimmed`` notice and the stream
        goes on from the oldest held. 0 = only events published from now on. When the
        retention removes events the open stream had not read yet (a reader behind the
        byte limit), a ``trimmed`` notice (after = the last sequence read) comes before the
        next event: a gap in the sequences is never silent.

        Errors: INVALID_ARGUMENT (field ``after_sequence``) for a negative sequence or one
        past the newest event; UNAVAILABLE when NATS does not answer (resume with the last
        sequence received); UNAUTHENTICATED, ending the stream, once the caller's key is
        revoked (checked before each item and at least every :data:`STREAM_WAIT_SECONDS`)."""
        principal = require_role("reader")
        scope = resolve_scope(request.scope)
        everything = principal.allows_all()
        after = request.after_sequence
        bus = self.publisher.bus
        retention = await bus.retention()
        if after < 0 or after > retention.last_seq:
            raise InvalidArgument(
                f"after_sequence: {after} is not an event id of this stream (the newest is {retention.last_seq})",
                field="after_sequence")
        start = after + 1 if after else retention.last_seq + 1
        notice = None
        if after and start < retention.first_seq:
            notice = _trimmed_item(after, retention.first_seq, retention)
            start = retention.first_seq
        tail = await bus.tail(start)
        # The stream sequence the tail delivers next unless something is gone: the tail reads
        # every memory and activity message (other scopes' too, filtered out below), so a
        # larger one means messages of other subjects (dead letters), a purge's deletions, or
        # the retention removing messages before the tail reached them (it jumps over them).
        expected = start
        try:
            # Accepted: the headers go out now, so the gateway answers 200 from here.
            if notice is not None:
                yield notice
            else:
                await context.send_initial_metadata(())
            while True:
                await still_authorized()  # the key may have been revoked since the call began
                for seq, subject, data in await tail.fetch(STREAM_BATCH, STREAM_WAIT_SECONDS):
                    if seq > expected and (gap := await _trimmed_gap(bus, expected, seq)) is not None:
                        yield gap
                    expected = max(expected, seq + 1)
                    item = _stream_item(bus.subjects.is_activity(subject), seq, data, scope, everything)
                    if item is not None:
                        yield item
        finally:
            await tail.close()


def _trimmed_item(after: int, first_retained: int,
                  retention: StreamRetention) -> event_stream_pb2.StreamMemoryEventsResponse:
    """The ``trimmed`` stream item: events after stream sequence ``after`` up to
    ``first_retained`` (exclusive) are gone by the retention (``retained_since_time``: when
    the stream's oldest held event was written, unset for an empty stream)."""
    notice = event_stream_pb2.StreamEventsTrimmed(requested_after_sequence=after,
                                                  first_retained_sequence=first_retained)
    if retention.first_time is not None:
        notice.retained_since_time.CopyFrom(ts(retention.first_time))
    return event_stream_pb2.StreamMemoryEventsResponse(sequence=after, trimmed=notice)


async def _trimmed_gap(bus: Bus, expected: int, seq: int) -> event_stream_pb2.StreamMemoryEventsResponse | None:
    """The ``trimmed`` item to send before the message of stream sequence ``seq`` when the
    tail expected ``expected`` (< ``seq``) and the retention removed messages in between (the
    stream's first held sequence is past ``expected``: whether those were the caller's is
    no longer knowable, so it is told). None when the retention explains nothing: the gap
    is messages of other subjects or a purge's deletions. Raises StoreTimeout/Unavailable
    when NATS does not answer."""
    retention = await bus.retention()
    if retention.first_seq <= expected:
        return None
    return _trimmed_item(expected - 1, min(retention.first_seq, seq), retention)


def _stream_item(activity: bool, seq: int, data: bytes, scope: str,
                 everything: bool) -> event_stream_pb2.StreamMemoryEventsResponse | None:
    """The stream item of one stream message when the caller may see it: a MemoryEvent of
    ``scope`` (its own or its relation's), an ActivityEvent of ``scope``, or one of every
    scope (``""``/``"*"``) when ``everything``. None otherwise, and for an undecodable one."""
    try:
        if activity:
            act = event_stream_pb2.ActivityEvent.FromString(data)
            if act.scope == scope or (everything and act.scope in ("", "*")):
                return event_stream_pb2.StreamMemoryEventsResponse(sequence=seq, activity_event=act)
            return None
        event = events_pb2.MemoryEvent.FromString(data)
    except DecodeError:
        return None
    if (event.scope or event.relation.scope) != scope:
        return None
    return event_stream_pb2.StreamMemoryEventsResponse(sequence=seq, memory_event=event)
