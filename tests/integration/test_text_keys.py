"""Tags, tag filters, exclusions and lexical queries compare by one comparison key
(automem/common/text.py ``text_key``: NFKC and case folding) while stored text stays exactly as
sent (issue 12, item 5); memories keyed the old way (``lower()``) are found after the start-up
migration (automem/enrich/textkeys.py)."""

from __future__ import annotations

import re
import unicodedata

from automem.common.text import STOP_WORDS, bm25_doc_weights, porter_stem
from automem.enrich.textkeys import MIGRATION
from automem.vectors import VectorFilter
from tests.conftest import eventually, start_service

NFC_CAFE = unicodedata.normalize("NFC", "Café")
NFD_CAFE = unicodedata.normalize("NFD", "Café")


async def _store(http, content: str, tags: list[str]) -> str:
    r = await http.post("/memory", json={"content": content, "tags": tags})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def _embedded(running, scope: str, n: int) -> None:
    async def check():
        return await running.ctx.vectors.count(VectorFilter(scope=scope)) >= n
    await eventually(check, timeout=60)


async def _recall(http, **params) -> dict[str, dict]:
    r = await http.get("/recall", params={"limit": 20, **params})
    assert r.status_code == 200, r.text
    return {h["id"]: h for h in r.json()["results"]}


async def _by_tag(http, **params) -> set[str]:
    r = await http.get("/memory/by-tag", params={"limit": 50, **params})
    assert r.status_code == 200, r.text
    return {m["id"] for m in r.json()["memories"]}


async def test_tags_filters_exclusions_and_queries_match_under_normalisation_and_folding(service) -> None:
    assert NFC_CAFE != NFD_CAFE
    async with service.http() as http:
        street = await _store(http, "Wir wohnen in der Großen Straße am Fluss", ["Straße"])
        cafe = await _store(http, f"Das {NFD_CAFE} an der Ecke hat guten Kuchen", [NFD_CAFE])
        other = await _store(http, "Ein ganz anderer Eintrag ohne Bezug", ["sonstiges"])
        await _embedded(service, service.scope, 3)

        # Stored text is kept exactly as sent.
        for mid, tag in ((street, "Straße"), (cafe, NFD_CAFE)):
            got = (await http.get(f"/memory/{mid}")).json()["memory"]
            assert got["tags"] == [tag]
        got = (await http.get(f"/memory/{cafe}")).json()["memory"]
        assert NFD_CAFE in got["content"]

        # Tag filters (vector pre-filter and graph listing), exact and prefix, any spelling.
        for tags, match, want in (("STRASSE", "exact", {street}), ("strasse", "exact", {street}),
                                  ("STRA", "prefix", {street}), (NFC_CAFE, "exact", {cafe}),
                                  ("CAFÉ", "exact", {cafe}), (NFD_CAFE.upper()[:3], "prefix", {cafe})):
            assert set(await _recall(http, tags=tags, tag_match=match, query="wohnen Kuchen Eintrag")) == want, tags
            assert set(await _recall(http, tags=tags, tag_match=match)) == want, tags
            assert await _by_tag(http, tags=tags, tag_match=match) == want, tags

        # Exclusions.
        assert set(await _recall(http, exclude_tags="STRASSE")) == {cafe, other}
        assert set(await _recall(http, exclude_tags=NFC_CAFE, query="Kuchen Straße")) == {street, other}

        # Lexical queries: the keyword (BM25) arm scores the folded and normalised terms.
        hits = await _recall(http, query="STRASSE")
        assert "keyword" in hits[street]["score_components"], hits
        hits = await _recall(http, query=f"{NFC_CAFE} KUCHEN")
        assert "keyword" in hits[cafe]["score_components"], hits

    async with service.client() as client:
        found = await client.search("", tags=["STRASSE"], tag_match="exact")
        assert [r.memory.id for r in found.results] == [street]
        found = await client.search("strasse", limit=5)
        assert "keyword" in {r.memory.id: r for r in found.results}[street].score_components


_APOS = re.compile(r"[\u2018\u2019\u02bc`]")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def _old_terms(text: str) -> list[str]:
    """The BM25 terms as they were built before the text_key rule: ``lower()`` only."""
    words = [w.replace("'", "") for w in _WORD.findall(re.sub(r"'s\b", "", _APOS.sub("'", text.lower())))]
    return [porter_stem(w) for w in words if len(w) >= 2 and w not in STOP_WORDS]


async def test_memory_keyed_the_old_way_is_found_after_the_start_migration(settings) -> None:
    """A memory whose graph keys, payload keys and BM25 terms were written the old way (as
    before this change) is found by tag and by lexical query once the service restarts."""
    running = await start_service(settings)
    try:
        async with running.http() as http:
            mid = await _store(http, "Die Großen Straße ist gesperrt", ["Straße", "Ärger"])
            await _embedded(running, running.scope, 1)
        graph, vectors = running.ctx.graph, running.ctx.vectors
        # Write node and point the old way.
        await graph.query("MATCH (m:Memory {id: $id}) SET m.tags_lower = ['straße', 'ärger']", {"id": mid})
        (point,) = await vectors.retrieve([mid], with_vectors=True)
        payload = dict(point.payload)
        payload["tags_lower"] = ["straße", "ärger"]
        payload["tag_prefixes"] = sorted({t[:i] for t in payload["tags_lower"] for i in range(1, len(t) + 1)})
        weights = bm25_doc_weights(_old_terms("Die Großen Straße ist gesperrt"))
        keys = sorted(weights)
        await vectors.upsert(mid, point.vector, payload, sparse=(keys, [weights[k] for k in keys]))
        await graph.query("MATCH (s:SchemaMigration {name: $n}) DELETE s", {"n": MIGRATION})
        async with running.http() as http:
            before = await _recall(http, tags="STRASSE", tag_match="exact")
            assert mid not in before  # the old keys do not match the new rule
    finally:
        await running.runner.stop()

    running = await start_service(settings)
    try:
        async with running.http() as http:
            assert set(await _recall(http, tags="STRASSE", tag_match="exact")) == {mid}
            assert set(await _recall(http, tags="STRASSE", tag_match="exact", query="gesperrt")) == {mid}
            assert set(await _recall(http, tags="ärg", tag_match="prefix")) == {mid}
            assert await _by_tag(http, tags="ÄRGER") == {mid}
            hits = await _recall(http, query="STRASSE")
            assert "keyword" in hits[mid]["score_components"], hits
            got = (await http.get(f"/memory/{mid}")).json()["memory"]
            assert got["tags"] == ["Straße", "Ärger"]
        rows = await running.ctx.graph.query("MATCH (s:SchemaMigration {name: $n}) RETURN s.version", {"n": MIGRATION})
        assert rows == [[1]]
    finally:
        await running.runner.stop()
