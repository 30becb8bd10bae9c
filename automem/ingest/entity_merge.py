"""Entity merges of ReviewService (AutoMem's ``POST /entity/{slug}/merge``,
verygoodplugins/automem ``automem/api/entity.py`` and ``automem/consolidation/entity_dedup.py``):
admin only, audited, undoable.

A merge moves every MENTIONS edge of the merged entity (the alias) to the entity it goes
into (the canonical one), adds the alias's slug and aliases to the canonical entity's
``aliases`` and marks the alias ``merged_into`` — as AutoMem does — and, beyond AutoMem,
writes in the same graph query an ``(:EntityMerge)`` record: who merged, when, why, which
memories' edges moved and which already mentioned the canonical entity. That record is the
audit trail (``ListEntityMerges``) and what ``UndoEntityMerge`` reads to put the edges back
(of the memories that still name the merged entity) and take off the aliases it added. Memories' own ``entities`` / ``entity_tags`` are enrichment's data and
are not rewritten; reads of the canonical entity include the memories of the entities merged
into it (automem/graph/entities.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from automem.common.auth import require_role, resolve_scope
from automem.common.errors import FailedPrecondition, InvalidArgument, NotFound
from automem.common.model import now, ts
from automem.common.text import is_blank, text_key
from automem.graph import GraphStore
from automem.graph.entities import EntityRow, entity_category, split_entity_key
from automem.ingest.logic import check_reason
from automem.v1 import review_service_pb2

log = logging.getLogger(__name__)

#: Records one ListEntityMerges answer holds at most (default 100).
MAX_MERGE_PAGE = 500


def _entity_id(key: str) -> str:
    _scope, kind, slug = split_entity_key(key)
    return f"{kind}:{slug}"


def merge_message(record: dict[str, Any]) -> review_service_pb2.EntityMerge:
    """The EntityMerge message of a record as stored (automem/graph/entities.py ``merge``)."""
    message = review_service_pb2.EntityMerge(
        id=record["id"], scope=record["scope"], alias=_entity_id(record["alias_key"]),
        canonical=_entity_id(record["canonical_key"]), edges_moved=len(record.get("memory_ids") or []),
        actor=record.get("actor", ""), reason=record.get("reason", ""), undone=bool(record.get("undone")),
        undone_by=record.get("undone_by") or "", memory_ids=list(record.get("memory_ids") or []))
    message.create_time.CopyFrom(ts(record["create_time"]))
    if record.get("undo_time") is not None:
        message.undo_time.CopyFrom(ts(record["undo_time"]))
    return message


class EntityMerges:
    """The entity-merge RPCs of ReviewService (mixed into
    :class:`automem.ingest.review.ReviewServicer`, which provides ``graph``)."""

    graph: GraphStore

    async def _entity(self, scope: str, ref: str, category: str, name: str) -> EntityRow:
        """The entity row ``ref`` (request field ``name``) names. INVALID_ARGUMENT naming
        ``name`` when ``ref`` is empty or shows nothing (automem/common/text.py ``is_blank``:
        whitespace or invisible characters only, e.g. "\u3164", which str.strip kept and the
        lookup answered NOT_FOUND); NOT_FOUND or FAILED_PRECONDITION (merged already) naming it."""
        if is_blank(ref):
            raise InvalidArgument(f"{name}: an entity slug is required", field=name)
        row = await self.graph.entities.lookup(scope, ref, category, time.time())
        if row is None:
            raise NotFound(f"{name}: no entity {ref!r} in this scope", field=name)
        if row.merged_into:
            raise FailedPrecondition(f"{name}: entity {ref!r} was merged into {_entity_id(row.merged_into)}",
                                     field=name)
        return row

    async def MergeEntities(self, request, context):
        """Merge the entity ``slug`` into ``merge_into`` (admin). PERMISSION_DENIED below admin;
        INVALID_ARGUMENT naming slug or merge_into when empty or the same entity, category when
        it is no kind (automem/graph/entities.py ``entity_category``); NOT_FOUND
        naming the one that is missing; FAILED_PRECONDITION when either was merged already
        (also when a concurrent merge took it between the lookup and the write)."""
        principal = require_role("admin")
        scope = resolve_scope(request.scope)
        check_reason(request.reason)
        category = entity_category(request.category)
        alias = await self._entity(scope, request.slug, category, "slug")
        canonical = await self._entity(scope, request.merge_into, category, "merge_into")
        if alias.key == canonical.key:
            raise InvalidArgument("merge_into: an entity cannot be merged into itself", field="merge_into")
        alias_slug = split_entity_key(alias.key)[2]
        record = {
            "id": str(uuid.uuid4()), "scope": scope, "alias_key": alias.key, "canonical_key": canonical.key,
            "actor": principal.name, "create_time": now().timestamp(), "reason": request.reason,
            "prior_aliases": list(canonical.aliases), "prior_merged_keys": list(canonical.merged_keys),
            "merged_keys": list(dict.fromkeys([*canonical.merged_keys, alias.key, *alias.merged_keys])),
            "aliases": list(dict.fromkeys([*canonical.aliases, alias_slug, *alias.aliases])),
        }
        moved = await self.graph.entities.merge(record)
        if moved is None:
            raise FailedPrecondition("slug: the entities changed while merging; read them again", field="slug")
        log.info("entity merge %s: %s into %s by %s (%d edges)", record["id"], alias.key, canonical.key,
                 principal.name, len(moved))
        [stored] = await self.graph.entities.merges(scope, 1, record["id"])
        return review_service_pb2.MergeEntitiesResponse(merge=merge_message(stored))

    async def ListEntityMerges(self, request, context):
        """The scope's entity merges, newest first (admin); ``page_size`` 1..500, 0 = 100.
        INVALID_ARGUMENT naming page_size."""
        require_role("admin")
        scope = resolve_scope(request.scope)
        size = request.page_size or 100
        if size < 1 or size > MAX_MERGE_PAGE:
            raise InvalidArgument(f"page_size: must be between 1 and {MAX_MERGE_PAGE}", field="page_size")
        records = await self.graph.entities.merges(scope, size)
        return review_service_pb2.ListEntityMergesResponse(merges=[merge_message(r) for r in records])

    async def UndoEntityMerge(self, request, context):
        """Undo the merge ``id`` (admin): the moved memories that still name the alias mention
        it again (and no longer the canonical entity unless they did before), the alias is
        unmerged and the aliases this merge added come off the canonical entity
        (automem/graph/entities.py ``undo_merge``). NOT_FOUND naming id; FAILED_PRECONDITION
        when already undone, or when the canonical entity was merged on since (undo that
        merge first)."""
        principal = require_role("admin")
        scope = resolve_scope(request.scope)
        found = await self.graph.entities.merges(scope, 1, request.id) if request.id else []
        if not found:
            raise NotFound(f"id: no entity merge {request.id!r} in this scope", field="id")
        if found[0].get("undone"):
            raise FailedPrecondition(f"id: entity merge {request.id} was undone already", field="id")
        later = [m for m in await self.graph.entities.merges(scope, MAX_MERGE_PAGE)
                 if not m.get("undone") and m.get("alias_key") == found[0]["canonical_key"]]
        if later:
            # Its canonical entity was merged on since: the memories it moved went on with it,
            # and undoing this one first put them back on both entities.
            raise FailedPrecondition(
                f"id: {_entity_id(found[0]['canonical_key'])} was merged into "
                f"{_entity_id(later[0]['canonical_key'])} since (merge {later[0]['id']}); undo that merge first",
                field="id")
        alias_keys = [found[0]["alias_key"], *await self.graph.entities.merged_keys_of(found[0]["alias_key"], scope)]
        alias_tags = [text_key(f"entity:{kind}:{slug}") for _s, kind, slug in map(split_entity_key, alias_keys)]
        if not await self.graph.entities.undo_merge(request.id, scope, principal.name, now().timestamp(), alias_tags):
            raise FailedPrecondition(f"id: entity merge {request.id} was undone already", field="id")
        log.info("entity merge %s undone by %s", request.id, principal.name)
        [stored] = await self.graph.entities.merges(scope, 1, request.id)
        return review_service_pb2.UndoEntityMergeResponse(merge=merge_message(stored))
