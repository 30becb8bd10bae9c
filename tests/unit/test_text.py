"""Tests of automem.common.text: tokenising, stemming, BM25 weights, full-text sanitising."""

from __future__ import annotations

import math
import re

import pytest

from automem.common import text as T


def test_tokenize_lowercases_and_strips_clitics():
    assert T.tokenize("Caroline's 2 dogs don't bark!") == ["caroline", "2", "dogs", "dont", "bark"]
    assert T.tokenize("It\u2019s Mel\u2019s") == ["it", "mel"]
    assert T.tokenize("") == []
    assert T.tokenize("café_au-lait") == ["café", "au", "lait"]
    assert T.tokenize(None) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "word,stem",
    [
        ("caresses", "caress"), ("ponies", "poni"), ("cats", "cat"), ("feed", "feed"),
        ("agreed", "agre"), ("plastered", "plaster"), ("motoring", "motor"), ("sing", "sing"),
        ("conflated", "conflat"), ("hopping", "hop"), ("filing", "file"), ("happy", "happi"),
        ("relational", "relat"), ("conditional", "condit"), ("generalization", "gener"),
        ("adoption", "adopt"), ("painting", "paint"), ("painted", "paint"), ("paints", "paint"),
        ("sky", "sky"), ("is", "is"), ("2023", "2023"),
    ],
)
def test_porter_stem_reference_cases(word, stem):
    # expected values follow Porter (1980) / the reference implementation's vocabulary
    assert T.porter_stem(word) == stem


def test_analyze_drops_stop_words_and_stems():
    assert T.analyze("When did Caroline go to the LGBTQ support groups?") == [
        "carolin", "go", "lgbtq", "support", "group"]
    assert T.analyze("the of and") == []
    assert T.analyze("Painting paintings", stem=False) == ["painting", "paintings"]


def test_bm25_doc_weights_values():
    k1, b = T.BM25_K1, T.BM25_B
    w = T.bm25_doc_weights(["paint", "paint", "sunset"], avg_len=3.0)
    norm = k1 * (1 - b + b * 3 / 3.0)  # dl == avg_len -> norm == k1
    assert w[T.term_index("paint")] == pytest.approx(2 * (k1 + 1) / (2 + norm))
    assert w[T.term_index("sunset")] == pytest.approx(1 * (k1 + 1) / (1 + norm))
    assert T.bm25_doc_weights([]) == {}


def test_bm25_doc_weights_context_counts_at_context_weight():
    w = T.bm25_doc_weights(["sunset"], ["paint"], context_weight=0.5, avg_len=1.5)
    # dl = 1 + 0.5 = 1.5 = avg_len -> norm = k1
    k1 = T.BM25_K1
    assert w[T.term_index("paint")] == pytest.approx(0.5 * (k1 + 1) / (0.5 + k1))
    assert w[T.term_index("sunset")] == pytest.approx((k1 + 1) / (1 + k1))
    assert T.term_index("paint") not in T.bm25_doc_weights(["sunset"], ["paint"], context_weight=0.0)


def test_bm25_query_weights_and_term_index():
    q = T.bm25_query_weights(["a", "b", "a"])
    assert q == {T.term_index("a"): 1.0, T.term_index("b"): 1.0}
    assert T.term_index("paint") == T.term_index("paint")
    assert 0 <= T.term_index("x") < 2**31


def test_bm25_ranks_rare_term_higher():
    # IDF as Qdrant's modifier; the document with the rarer matching term wins
    docs = [["paint", "sunset"], ["paint", "lake"], ["paint", "dog"]]
    N = len(docs)
    df = {"paint": 3, "sunset": 1}
    idf = {t: math.log(1 + (N - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    q = T.bm25_query_weights(["paint", "sunset"])
    def score(d):
        w = T.bm25_doc_weights(d, avg_len=2.0)
        return sum(idf[t] * w.get(T.term_index(t), 0.0) for t in df if T.term_index(t) in q)
    assert score(docs[0]) > score(docs[1]) == pytest.approx(score(docs[2]))


SAFE = re.compile(r"^\w+(\|\w+)*$")


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("`add_episode`", "add_episode"),
        ("the of and", ""),
        ("?!", ""),
        ("a/b|c\\d", ""),
        ("_", ""),
        ("-foo", "foo"),
        ("status: done", "status|done"),
        ('"unbalanced', "unbalanced"),
        ("@field:{tag} (x|y) ~fuzzy* %%lev%% $param", "field|tag|fuzzy|lev|param"),
        ("Caroline's LGBTQ support group", "caroline|lgbtq|support|group"),
        ("Paint paint PAINT", "paint"),
        ("", ""),
        ("__init__ foo_bar_", "init|foo_bar"),
        ("ünïcode café", "ünïcode|café"),
        ("NOT OR AND", ""),
    ],
)
def test_fulltext_query_sanitises(raw, expected):
    q = T.fulltext_query(raw)
    assert q == expected
    assert q == "" or SAFE.match(q)


def test_fulltext_query_caps_terms():
    q = T.fulltext_query(" ".join(f"w{i}" for i in range(100)), max_terms=5)
    assert q == "w0|w1|w2|w3|w4"


def test_text_key_folds_case_and_normalises() -> None:
    import unicodedata

    from automem.common.text import text_key

    assert text_key("STRASSE") == text_key("straße") == text_key("Straße") == "strasse"
    assert text_key(unicodedata.normalize("NFD", "Café")) == text_key(unicodedata.normalize("NFC", "CAFÉ"))
    assert text_key("ＴＡＧ") == "tag"
    assert text_key("Plain-ASCII_1") == "plain-ascii_1"
    assert T.analyze("STRASSE") == T.analyze("straße")


def test_unprintable_names_are_told_from_printable_ones() -> None:
    """A key's display name is printed in `automem keys list`'s rows: C0/C1 controls, line
    separators, zero-width and bidi format characters are refused; letters of any script,
    punctuation and emoji are not (automem/common/text.py ``UNPRINTABLE_NAME``)."""
    from automem.common.text import UNPRINTABLE_NAME

    for bad in ("a\tb", "a\x1bb", "a\x7fb", "a\x85b", "a\x9bb", "a\u00adb", "a\u200bb", "a\u2028b", "a\u2029b",
                "a\u202eb", "a\u2066b", "a\ufeffb"):
        assert UNPRINTABLE_NAME.search(bad), repr(bad)
    for good in ("ops bot", "Zoë’s bot 🤖", "東京チーム", "قسم المبيعات", "release-2026.12"):
        assert not UNPRINTABLE_NAME.search(good), good
