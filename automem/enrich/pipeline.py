"""The enrichment pass of freshly (re-)embedded memories: entities, classification, summary,
links — every write guarded so that it never overwrites an edit that landed meanwhile.

Two steps around the vector upsert (so the point's payload already carries the new type and
entity tags):

* :meth:`Enricher.prepare` (before the upsert, for the batch): NER with ``nlp.pipe`` in a
  worker process (or thread), and — with an LLM configured — type classification and summaries of long
  content (concurrently); the results go onto the in-memory ``Memory`` messages.
* :meth:`Enricher.finish_many` (after the upsert, per batch): writes entities + MENTIONS
  (:func:`entities.write_entities_many`, one query), the LLM's type, SIMILAR_TO edges and
  proposals (:class:`links.LinkBuilder`, one search call and one write), the summary and
  ``enrichment_status`` (``set_enrichment_many``, one query).

Guards: entity, summary, status and link writes need the node's ``content_hash`` to be the
enriched one; the LLM's type also needs the node's ``version`` unchanged and the type still
the rule-based one (so a type the user chose or edited is never replaced). A write refused
by its guard ends the pass for that memory: the edit's own event re-enriches it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from automem.common.classify import FALLBACK_CONFIDENCE, RULE_CONFIDENCE, classify
from automem.common.model import Memory, type_name
from automem.common.settings import Settings
from automem.common.text import extractive_summary
from automem.enrich.entities import EntityExtractor, write_entities_many
from automem.enrich.links import LinkBuilder
from automem.enrich.llm import LLM, llm_configured
from automem.graph import GraphStore
from automem.v1 import memory_pb2
from automem.vectors import VectorStore

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    """What :meth:`Enricher.prepare` worked out for one memory."""

    entities: list[memory_pb2.Entity] = field(default_factory=list)
    summary: str | None = None
    llm_type: int | None = None
    llm_confidence: float | None = None


@dataclass
class EnrichStats:
    """Counters of the pass (bench and status)."""

    enriched: int = 0
    refused: int = 0
    similar_edges: int = 0
    proposals: int = 0


def auto_classified(memory: Memory) -> bool:
    """True when the type is the rule-based classifier's (ingest classified it: same type and
    one of the rule confidences), so an LLM type may replace it."""
    rule_type, rule_conf = classify(memory.content)
    return memory.type == rule_type and round(memory.confidence, 6) in (
        round(rule_conf, 6), RULE_CONFIDENCE, FALLBACK_CONFIDENCE)


class Enricher:
    """Entities, classification, summary and links for the enrichment consumer."""

    def __init__(self, settings: Settings, graph: GraphStore, vectors: VectorStore | None) -> None:
        self.settings = settings
        self.graph = graph
        self.extractor = EntityExtractor(process=settings.entities_process) if settings.entities_enabled else None
        self.llm = LLM(settings) if llm_configured(settings) else None
        self.links = LinkBuilder(settings, graph, vectors, self.llm) if (
            settings.links_enabled and vectors is not None) else None
        self.stats = EnrichStats()

    async def prepare(self, memories: list[Memory],
                      known: Mapping[str, list[memory_pb2.Entity]] | None = None) -> dict[str, Prepared]:
        """Entities (batched) and LLM classification/summary of ``memories``; sets ``entities``
        and (when the LLM re-typed an auto-classified memory) ``type``/``confidence`` on them.
        ``known`` maps texts whose entities were already extracted to them (a look-ahead; the
        entities of a text depend on nothing else); only the other texts go through NER."""
        out = {m.id: Prepared() for m in memories}
        if not memories:
            return out
        jobs = []
        if self.extractor is not None:
            jobs.append(self._entities(memories, out, known or {}))
        jobs.extend(self._classify(m, out[m.id]) for m in memories)
        await asyncio.gather(*jobs)
        return out

    async def _entities(self, memories: list[Memory], out: dict[str, Prepared],
                        known: Mapping[str, list[memory_pb2.Entity]]) -> None:
        missing = list(dict.fromkeys(m.content for m in memories if m.content not in known))
        found = dict(zip(missing, await self.extractor.extract(missing), strict=True))
        for memory in memories:
            entities = known[memory.content] if memory.content in known else found[memory.content]
            out[memory.id].entities = list(entities)
            del memory.entities[:]
            memory.entities.extend(entities)

    async def _classify(self, memory: Memory, prep: Prepared) -> None:
        long = len(memory.content) > self.settings.content_summary_length
        limit = self.settings.summary_max_length
        want_type = self.llm is not None and memory.type != memory_pb2.MEMORY_TYPE_META_PATTERN and (
            auto_classified(memory))
        result = None
        if self.llm is not None and (want_type or long):
            result = await self.llm.classify(memory.content, limit if long else None)
        if result is not None and want_type:
            from automem.common.model import parse_type

            prep.llm_type = parse_type(result.type)
            prep.llm_confidence = float(result.confidence)
            memory.type = prep.llm_type
            memory.confidence = prep.llm_confidence
        if long:
            prep.summary = (result.summary if result is not None and result.summary else None) or (
                extractive_summary(memory.content, limit))
        elif memory.summary:
            prep.summary = ""  # short content has no summary; drop a stale one

    async def finish(self, memory: Memory, prep: Prepared, vector: list[float] | None) -> bool:
        """Write what :meth:`prepare` found, then links. False when an edit landed meanwhile."""
        return memory.id in await self.finish_many([(memory, prep, vector, 0)])

    async def finish_many(self, items: list[tuple[Memory, Prepared, list[float] | None, int]],
                          fresh: Mapping[str, int] | None = None) -> set[str]:
        """:meth:`finish` for a batch of ``(memory, prepared, vector or None, position in the
        batch)``: one guarded graph write for the batch's entities, the LLM's types (one query
        each, only with an LLM), the links of the batch (:meth:`links.LinkBuilder.link_many`;
        ``fresh`` maps the memories whose point the batch wrote to their position), one
        guarded write of the summaries and ``enrichment_status``. A memory whose write is
        refused (an edit landed) drops out of the later steps. Returns the ids fully
        enriched."""
        if not items:
            return set()
        ok = {memory.id for memory, _, _, _ in items}
        if self.extractor is not None:
            ok = await write_entities_many(self.graph, [(m.id, m.scope, m.content_hash, prep.entities)
                                                        for m, prep, _, _ in items])
        for memory, prep, _, _ in items:
            if memory.id in ok and prep.llm_type is not None:
                await self.graph.memories.set_classified_type(
                    memory, type_name(classify(memory.content)[0]),
                    Memory(type=prep.llm_type, confidence=prep.llm_confidence))
        if self.links is not None:
            linking = [(m, vector, position) for m, _, vector, position in items if m.id in ok and vector is not None]
            if linking:
                written, edges, proposals = await self.links.link_many(linking, fresh)
                ok -= {m.id for m, _, _ in linking} - written
                self.stats.similar_edges += edges
                self.stats.proposals += proposals
        rows = []
        for memory, prep, _, _ in items:
            if memory.id in ok:
                fields = {"enrichment_status": "ENRICHMENT_STATUS_DONE"}
                if prep.summary is not None:
                    fields["summary"] = prep.summary
                rows.append((memory.id, memory.content_hash, fields))
        ok = set(await self.graph.memories.set_enrichment_many(rows))
        for memory, _, _, _ in items:
            if memory.id in ok:
                self.stats.enriched += 1
            else:
                self.stats.refused += 1
                log.info("enrichment result dropped: the memory changed meanwhile", extra={"memory_id": memory.id})
        return ok

    async def close(self) -> None:
        if self.extractor is not None:
            await self.extractor.close()
        if self.llm is not None:
            await self.llm.close()
