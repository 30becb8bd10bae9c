"""GraphStore reads replies of scalars, lists and maps with falkordb's synchronous parser
(issue 10: its asyncio parser awaits a coroutine per cell) and falls back to the asyncio
parser for nodes, edges and paths; both give the values falkordb's own ``AsyncGraph`` gives."""

from __future__ import annotations

import uuid

import pytest
from falkordb import Edge, Node
from redis.exceptions import ResponseError

from automem.common.settings import Settings
from automem.graph import GraphStore

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_replies_equal_the_asyncio_parsers_for_scalars_maps_lists_nodes_and_edges(settings: Settings) -> None:
    graph = GraphStore(settings.model_copy(update={"graph_name": f"replies_{uuid.uuid4().hex[:8]}"}))
    try:
        await graph.query(
            "CREATE (:R {id: 'a', n: 3, x: 1.5, ok: true, tags: ['t1', 'ü'], s: 'häst'})"
            "-[:L {w: 0.25}]->(:R {id: 'b', n: -1, tags: []})")
        queries = [
            ("MATCH (r:R) RETURN r.id, r.n, r.x, r.ok, r.tags, r.s, r.missing ORDER BY r.id", {}),
            ("MATCH (r:R) RETURN properties(r) ORDER BY r.id", {}),
            ("MATCH (r:R {id: $id}) RETURN {id: r.id, list: [1, 'two', null, [3]]}", {"id": "a"}),
            ("MATCH (a:R)-[l:L]->(b:R) RETURN a, l, b, a.id", {}),
            ("MATCH p = (:R)-[:L]->(:R) RETURN p", {}),
            ("MATCH (r:R) WHERE r.id = 'none' RETURN r.id", {}),
        ]
        for cypher, params in queries:
            expected = (await graph.graph.ro_query(cypher, params)).result_set
            assert await graph.ro_query(cypher, params) == expected, cypher
        assert await graph.ro_query_many(queries) == [(await graph.graph.ro_query(c, p)).result_set
                                                      for c, p in queries]
        node_row = await graph.ro_query("MATCH (a:R)-[l:L]->(b:R) RETURN a, l, b")
        a, edge, b = node_row[0]
        assert isinstance(a, Node) and a.labels == ["R"] and a.properties["id"] == "a"
        assert isinstance(edge, Edge) and edge.relation == "L" and edge.properties == {"w": 0.25}
        assert isinstance(b, Node) and b.properties["tags"] == []
        with pytest.raises(ResponseError):
            await graph.ro_query("MATCH (r:R) RETURN r.id +")  # a syntax error
        with pytest.raises(ResponseError):
            await graph.ro_query("UNWIND [1, 0] AS d RETURN 1 / d")  # a run-time error
    finally:
        await graph.graph.delete()
        await graph.close()
