"""The graph statements whose cost must not grow with the number of nodes of their label
find their nodes through an index (issue 10, item 8): each statement the repository sends is
captured as sent and planned with ``GRAPH.EXPLAIN`` on a graph made by ``ensure_schema``."""

from __future__ import annotations

import uuid

from automem.graph.store import GraphStore


async def _statements(graph: GraphStore, work) -> list[str]:
    """The Cypher texts (with their parameter header) that ``work()`` sends to FalkorDB."""
    sent: list[str] = []
    execute = graph._execute

    async def capture(command: str, cypher: str, params: dict):
        sent.append(graph.graph._build_params_header(params) + cypher)
        return await execute(command, cypher, params)

    graph._execute = capture
    try:
        await work()
    finally:
        graph._execute = execute
    return sent


async def _plan(graph: GraphStore, statement: str) -> list[str]:
    reply = await graph.graph.execute_command("GRAPH.EXPLAIN", graph.name, statement)
    return [line.decode() if isinstance(line, bytes) else str(line) for line in reply]


async def test_review_item_statements_use_an_index_not_a_label_scan(settings) -> None:
    """A supersede proposal's MERGE (one per proposal the enrichment makes), the lookup of an
    item by id and the listing of a scope's items: none scans every ReviewItem. Before the
    ReviewItem indexes each proposal's MERGE was a label scan — 6.2 ms at 40k items under
    ``bench/soak.py``, 0.014 ms with the index (docs/benchmarks.md)."""
    graph = GraphStore(settings)
    try:
        await graph.ensure_schema()
        item_id = str(uuid.uuid4())

        async def work():
            await graph.review.propose_supersede(item_id, "m-new", "m-old", "default", "test", 1.0)
            assert (await graph.review.get(item_id, "default"))["memory_id"] == "m-new"
            assert [i["id"] for i in await graph.review.items("default", "pending", "")] == [item_id]

        statements = await _statements(graph, work)
        assert len(statements) == 3
        for statement in statements:
            plan = await _plan(graph, statement)
            assert any("Index Scan" in step and ":ReviewItem" in step for step in plan), (statement, plan)
            assert not any("Label Scan" in step and ":ReviewItem" in step for step in plan), (statement, plan)
    finally:
        await graph.close()


async def test_the_texts_edited_since_a_past_known_at_are_read_on_the_recorded_at_index(settings) -> None:
    """The memories edited since a past ``known_at`` (a ranked recall at that time scores
    their text believed then: automem/recall/servicer.py ``_lexical``) are read on the
    ``MemoryVersion(recorded_at)`` index: the versions recorded since, not every version of
    the scope."""
    graph = GraphStore(settings)
    try:
        await graph.ensure_schema()

        async def work():
            assert await graph.versions.contents_before_edits("default", 4e9, 10) == {}

        (statement,) = await _statements(graph, work)
        plan = await _plan(graph, statement)
        assert any("Index Scan" in step and ":MemoryVersion" in step for step in plan), plan
        assert not any("Label Scan" in step for step in plan), plan
        index = await graph.graph.execute_command("GRAPH.QUERY", graph.name, "CALL db.indexes()")
        assert "recorded_at" in str(index)
    finally:
        await graph.close()


async def test_versions_changed_since_a_time_use_the_recorded_at_index(settings) -> None:
    """What changed since a by-tag listing's first page (automem/recall/bytag.py, its later
    pages) is read on the ``MemoryVersion(recorded_at)`` index: the versions recorded since,
    not every version of the scope."""
    graph = GraphStore(settings)
    try:
        await graph.ensure_schema()

        async def work():
            assert await graph.versions.changed_since("default", 4e9, 10) == []

        (statement,) = await _statements(graph, work)
        plan = await _plan(graph, statement)
        assert any("Index Scan" in step and ":MemoryVersion" in step for step in plan), plan
        assert not any("Label Scan" in step for step in plan), plan
    finally:
        await graph.close()
