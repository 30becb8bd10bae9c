"""Metrics of every process, scraped from the metrics port (``AUTOMEM_METRICS_PORT``) of real
services after a store, a recall and the enrichment: the families of automem/common/metrics.py
exist with their semantic-convention labels and count what happened.

* one process with every target (embedded qdrant-edge, the MiniLM model): gRPC, HTTP,
  FalkorDB, vector store, NATS publish, enrichment and embedding metrics, the queue depth
  while the consumer is paused;
* separate processes (as the chart runs them; vectors disabled, like test_microservices.py):
  each process serves its own registry, and two enrich processes count their own messages.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from automem.common.embedded import free_port
from automem.common.settings import Settings
from automem.graph import GraphStore
from tests.conftest import eventually, start_service
from tests.integration.test_microservices import AUTOMEM, Cluster, _enriched


def _samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def _total(samples: dict[str, list], name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    return sum(s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items()))


def _values(samples: dict[str, list], name: str, **labels: str) -> list[float]:
    return [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]


async def _scrape(port: int) -> dict[str, list]:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"http://127.0.0.1:{port}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return _samples(response.text)


async def test_one_process_exports_every_family_on_its_metrics_port(settings: Settings) -> None:
    port = free_port()
    running = await start_service(settings.model_copy(update={"metrics_port": port}))
    try:
        assert running.ctx.metrics_port == port
        before = await _scrape(port)  # counters of the other services of this test process
        graph, subject_all = settings.graph_name, f"{settings.subject_prefix}.memory.>"
        consumer = {"messaging_consumer_group_name": "enrich", "messaging_destination_name": subject_all}
        async with running.http() as http:
            stored = await http.post("/memory", json={"content": "The staging DB is Postgres 16", "tags": ["db"]})
            assert stored.status_code == 201
            memory_id = stored.json()["memory_id"]
            assert (await http.get(f"/memory/{memory_id}")).status_code == 200
            assert (await http.get("/no/such/route")).status_code == 404
            assert (await http.get("/memory/00000000-0000-4000-8000-000000000000")).status_code == 404
            # Made-up methods (each was a series of its own, until the SDK's limit folded every
            # new series into an overflow one: the 5xx alert and route latencies went blind).
            for made_up in ("M1", "M2", "PROPFIND"):
                assert (await http.request(made_up, "/health")).status_code in (400, 405)
            assert (await http.get("/console/static/console.css")).status_code == 200
            assert (await http.head("/health")).status_code == 200  # routed as a GET: its route
            assert (await http.get("/openapi.json")).status_code == 200
            mcp = await http.post("/mcp", headers={"Accept": "application/json, text/event-stream"}, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-03-26", "capabilities": {},
                    "clientInfo": {"name": "metrics-test", "version": "1"}}})
            assert mcp.status_code == 200, mcp.text

            async def enriched() -> bool:
                # The enrichment upserts the vector; the sync gauges reuse one GetSyncStatus
                # for up to a second (automem/targets.py), so wait until they show the point
                # too, or the scrape below can still see the count from before the upsert.
                page = await _scrape(port)
                return (_total(page, "automem_enrichment_processed_total", **consumer) >= 1
                        and _values(page, "automem_sync_vectors", db_namespace=graph,
                                    db_collection_name=settings.collection_name) == [1])

            await eventually(enriched)
            assert (await http.get("/recall", params={"query": "which database on staging"})).status_code == 200
            # The gateway's /metrics is the same registry as the port.
            gateway_page = _samples((await http.get("/metrics")).text)
        after = await _scrape(port)

        def delta(name: str, **labels: str) -> float:
            return _total(after, name, **labels) - _total(before, name, **labels)

        # gRPC: per method and status code.
        rpc = "rpc_server_call_duration_seconds"
        assert delta(f"{rpc}_count", rpc_system_name="grpc", rpc_method="automem.v1.IngestService/CreateMemory",
                     rpc_response_status_code="OK") == 1
        assert delta(f"{rpc}_count", rpc_method="automem.v1.RecallService/SearchMemories",
                     rpc_response_status_code="OK") == 1
        assert delta(f"{rpc}_count", rpc_method="automem.v1.RecallService/GetMemory",
                     rpc_response_status_code="OK") == 1
        assert delta(f"{rpc}_count", rpc_method="automem.v1.RecallService/GetMemory",
                     rpc_response_status_code="NOT_FOUND") == 1
        assert delta(f"{rpc}_sum", rpc_method="automem.v1.IngestService/CreateMemory") > 0
        assert delta(f"{rpc}_bucket", rpc_method="automem.v1.IngestService/CreateMemory", le="+Inf") == 1
        assert not [s for s in after[f"{rpc}_count"] if "Health" in s.labels["rpc_method"]]  # probes not measured

        # HTTP: route templates, never raw paths.
        http_hist = "http_server_request_duration_seconds"
        assert delta(f"{http_hist}_count", http_route="/memory", http_request_method="POST",
                     http_response_status_code="201") == 1
        assert delta(f"{http_hist}_count", http_route="/memory/{memory_id}", http_request_method="GET",
                     http_response_status_code="200") == 1
        assert delta(f"{http_hist}_count", http_route="/memory/{memory_id}", http_response_status_code="404") == 1
        assert delta(f"{http_hist}_count", http_route="<unmatched>", http_response_status_code="404") == 1
        methods = {s.labels["http_request_method"] for s in after[f"{http_hist}_count"]}
        assert "_OTHER" in methods and not methods & {"M1", "M2", "PROPFIND"}, methods
        assert delta(f"{http_hist}_count", http_route="/health", http_request_method="_OTHER") == 3
        assert delta(f"{http_hist}_count", http_route="/mcp", http_request_method="POST",
                     http_response_status_code="200") == 1
        assert delta(f"{http_hist}_count", http_route="/console/static/{path}", http_request_method="GET",
                     http_response_status_code="200") == 1
        assert delta(f"{http_hist}_count", http_route="/health", http_request_method="HEAD",
                     http_response_status_code="200") == 1
        assert delta(f"{http_hist}_count", http_route="/openapi.json", http_request_method="GET") == 1
        assert not any(memory_id in str(s.labels) for s in after[f"{http_hist}_count"])

        # Stores: FalkorDB (writes, reads, pipelined reads) and the vector store, by operation.
        db = "db_client_operation_duration_seconds_count"
        assert delta(db, db_system_name="falkordb", db_operation_name="GRAPH.QUERY", db_namespace=graph) > 0
        assert delta(db, db_system_name="falkordb", db_operation_name="GRAPH.RO_QUERY", db_namespace=graph) > 0
        collection = settings.collection_name
        for operation in ("upsert", "search"):
            assert delta(db, db_system_name="qdrant", db_operation_name=operation,
                         db_collection_name=collection) >= 1, operation
        assert not [s.labels for s in after[db] if s.labels.get("db_namespace") == graph
                    and s.labels.get("error_type")]  # no failed call

        # NATS publish: the store's event and the enrichment's audit event.
        pub = "messaging_client_operation_duration_seconds_count"
        assert delta(pub, messaging_system="nats", messaging_operation_name="publish",
                     messaging_destination_name=f"{settings.subject_prefix}.memory.created") == 1
        assert delta(pub, messaging_destination_name=f"{settings.subject_prefix}.memory.enriched") == 1

        # Enrichment: this consumer's counters, batch durations, the lag and the outbox.
        assert _total(after, "automem_enrichment_processed_total", **consumer) >= 1
        assert _total(after, "messaging_client_consumed_messages_total", messaging_system="nats", **consumer) >= 1
        assert _total(after, "messaging_process_duration_seconds_count", **consumer) >= 1
        assert _total(after, "automem_enrichment_failures_total", **consumer) == 0
        assert _values(after, "automem_enrichment_queue_depth", **consumer) == [0]
        assert _values(after, "automem_outbox_backlog", db_namespace=graph) == [0]
        assert _values(after, "automem_sync_memories", db_namespace=graph, db_collection_name=collection) == [1]
        assert _values(after, "automem_sync_vectors", db_namespace=graph, db_collection_name=collection) == [1]
        assert _values(after, "automem_enrichment_up", **consumer) == [1]

        # Embedding: calls, time and batch sizes by model.
        model = running.ctx.embedder.name
        assert delta("gen_ai_client_operation_duration_seconds_count", gen_ai_operation_name="embeddings",
                     gen_ai_request_model=model) >= 2  # the store's enrichment and the recall's query
        assert delta("automem_embedding_batch_size_count", gen_ai_request_model=model) >= 2
        assert delta("automem_embedding_batch_size_sum", gen_ai_request_model=model) >= 2

        assert "process_cpu_seconds_total" in after or "python_info" in after
        assert "target_info" in after
        assert _values(gateway_page, "automem_outbox_backlog", db_namespace=graph) == [0]

        # With the consumer paused a store waits in the queue, and the gauge shows it.
        running.ctx.enrich_consumer.stop()
        await asyncio.wait_for(running.ctx.enrich_task, timeout=10)
        async with running.http() as http:
            assert (await http.post("/memory", json={"content": "Queued while enrichment is paused"})).status_code == 201

        async def queued() -> bool:
            page = await _scrape(port)
            return (_values(page, "automem_enrichment_queue_depth", **consumer) == [1]
                    and _values(page, "automem_enrichment_up", **consumer) == [0]
                    # ...and the memory has no vector point yet: drift.
                    and _values(page, "automem_sync_memories", db_namespace=graph) == [2]
                    and _values(page, "automem_sync_vectors", db_namespace=graph) == [1])

        await eventually(queued)
    finally:
        await running.runner.stop()
    # The port is released with the service.
    async with httpx.AsyncClient(timeout=2) as http:
        try:
            await http.get(f"http://127.0.0.1:{port}/metrics")
            raise AssertionError("the metrics port still answers after the service stopped")
        except httpx.ConnectError:
            pass


class MetricsCluster(Cluster):
    """test_microservices.py's processes, each with a metrics port, and any number of enrich
    processes (``enrich``, ``enrich-2``...)."""

    def __init__(self, settings: Settings, tmp: Path) -> None:
        super().__init__(settings, tmp)
        self.metrics: dict[str, int] = {}

    def start(self, target: str) -> subprocess.Popen:
        name, kind = target, target.split("-")[0]
        self.metrics[name] = free_port()
        if kind == "gateway":
            env = {**self.base, "PORT": str(self.ports["gateway"]), "AUTOMEM_INGEST_ADDR": self.addr("ingest"),
                   "AUTOMEM_RECALL_ADDR": self.addr("recall"), "AUTOMEM_ENRICH_ADDR": self.addr("enrich"),
                   "AUTOMEM_CONSOLIDATE_ADDR": self.addr("ingest")}
        else:
            self.ports.setdefault(name, free_port())
            env = {**self.base, **self.stores, "AUTOMEM_GRPC_PORT": str(self.ports[name]), "PORT": str(free_port())}
        env["AUTOMEM_METRICS_PORT"] = str(self.metrics[name])
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([AUTOMEM, "serve", "--target", kind], env=env, stdout=log, stderr=log)
        log.close()
        self.procs[name] = proc
        return proc


async def test_each_process_serves_its_own_metrics_and_enrich_replicas_count_apart(
        settings: Settings, tmp_path: Path) -> None:
    cluster = MetricsCluster(settings, tmp_path)
    graph = GraphStore(settings)
    consumer = {"messaging_consumer_group_name": "enrich",
                "messaging_destination_name": f"{settings.subject_prefix}.memory.>"}
    try:
        for target in ("ingest", "recall", "enrich"):
            cluster.start(target)
        cluster.start("gateway")
        for target in ("ingest", "recall", "enrich"):
            await cluster.wait_serving(target)
        await cluster.wait_gateway()
        first = 3
        async with httpx.AsyncClient(base_url=cluster.url, timeout=30) as http:
            for i in range(first):
                assert (await http.post("/memory", json={"content": f"first replica memory {i}"})).status_code == 201
            await eventually(lambda: _enriched_at_least(graph, first), timeout=60)

            # A second enrich replica; the first one paused, so the second one gets the next stores.
            cluster.start("enrich-2")
            await _wait_metrics(cluster, "enrich-2")
            # A replica that enriched nothing yet reports its counters at 0: a series that first
            # appears at 1 is no increase to Prometheus, so the dead-letter alert missed the
            # first one after every start (docs/observability.md, suggested alerts).
            names = ("automem_enrichment_processed_total", "automem_enrichment_failures_total",
                     "automem_enrichment_dead_lettered_total", "automem_enrichment_redeliveries_total")

            async def counters_at_zero() -> bool:
                page = await _scrape(cluster.metrics["enrich-2"])
                return all(_values(page, name, **consumer) == [0.0] for name in names)
            await eventually(counters_at_zero, timeout=30)
            os.kill(cluster.procs["enrich"].pid, signal.SIGSTOP)
            try:
                for i in range(2):
                    r = await http.post("/memory", json={"content": f"second replica memory {i}"})
                    assert r.status_code == 201
                await eventually(lambda: _enriched_at_least(graph, first + 2), timeout=60)
            finally:
                os.kill(cluster.procs["enrich"].pid, signal.SIGCONT)
            assert (await http.get("/recall", params={"query": "replica memory"})).status_code == 200

        pages = {name: await _scrape(port) for name, port in cluster.metrics.items()}
        rpc = "rpc_server_call_duration_seconds_count"
        # Each process reports the calls it answered, and only those.
        assert _total(pages["ingest"], rpc, rpc_method="automem.v1.IngestService/CreateMemory",
                      rpc_response_status_code="OK", rpc_system_name="grpc") == first + 2
        assert _total(pages["recall"], rpc, rpc_method="automem.v1.RecallService/SearchMemories") == 1
        assert _total(pages["ingest"], rpc, rpc_method="automem.v1.RecallService/SearchMemories") == 0
        assert _total(pages["recall"], rpc, rpc_method="automem.v1.IngestService/CreateMemory") == 0
        assert _total(pages["gateway"], "http_server_request_duration_seconds_count", http_route="/memory",
                      http_request_method="POST", http_response_status_code="201") == first + 2
        assert _total(pages["ingest"], "messaging_client_operation_duration_seconds_count",
                      messaging_destination_name=f"{settings.subject_prefix}.memory.created") == first + 2
        assert _total(pages["ingest"], "db_client_operation_duration_seconds_count", db_system_name="falkordb",
                      db_operation_name="GRAPH.QUERY") > 0
        assert _total(pages["recall"], "db_client_operation_duration_seconds_count", db_system_name="falkordb",
                      db_operation_name="GRAPH.RO_QUERY") > 0
        assert _values(pages["ingest"], "automem_outbox_backlog", db_namespace=settings.graph_name) == [0]
        # Two enrich replicas, two sets of counters: each counted what it processed.
        one = _total(pages["enrich"], "automem_enrichment_processed_total", **consumer)
        two = _total(pages["enrich-2"], "automem_enrichment_processed_total", **consumer)
        assert one >= first and two >= 1, (one, two)
        assert one + two >= first + 2
        # The lag is the durable consumer's: the same on both.
        assert _values(pages["enrich"], "automem_enrichment_queue_depth", **consumer) == [0]
        assert _values(pages["enrich-2"], "automem_enrichment_queue_depth", **consumer) == [0]
        assert _values(pages["enrich-2"], "automem_enrichment_up", **consumer) == [1]
        # The gateway relays no enrichment metrics.
        assert "automem_enrichment_processed_total" not in pages["gateway"]
        assert "automem_enrichment_up" not in pages["gateway"]
    finally:
        codes = cluster.stop_all()
        await graph.close()
    assert all(code == 0 for code in codes.values()), codes


async def _enriched_at_least(graph: GraphStore, count: int) -> bool:
    return await _enriched(graph) >= count


async def _wait_metrics(cluster: MetricsCluster, name: str, timeout: float = 90) -> None:
    async def up() -> bool:
        assert cluster.procs[name].poll() is None, cluster.log(name)
        try:
            async with httpx.AsyncClient(timeout=2) as http:
                page = _samples((await http.get(f"http://127.0.0.1:{cluster.metrics[name]}/metrics")).text)
        except httpx.HTTPError:
            return False
        return "target_info" in page or "python_info" in page

    await eventually(up, timeout=timeout)
