"""Microservices mode: gateway, ingest, recall and enrich as separate OS processes
(``automem serve --target X``) sharing the session's NATS and FalkorDB, vectors disabled.

Pins: the gateway process runs without FalkorDB or NATS settings and reaches the services
through ``AUTOMEM_*_ADDR``; recall degrades to the graph arms and says so in ``/health`` and in
the recall response; SIGKILL of the enrich process while stores stream in loses no event
(every memory ends enriched, the durable consumer has acknowledged the whole stream, nothing
was dead-lettered)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from automem.common.bus import Bus
from automem.common.embedded import free_port
from automem.common.settings import Settings
from automem.graph import GraphStore
from tests.conftest import eventually

AUTOMEM = str(Path(sys.executable).parent / "automem")
SERVICE_NAMES = {"ingest": "automem.v1.IngestService", "recall": "automem.v1.RecallService",
                 "enrich": "automem.v1.EnrichService"}
#: Variables of the test runner's environment that would change what a process connects to.
_SCRUB = ("NATS_URL", "AUTOMEM_NATS_URL", "FALKORDB_HOST", "FALKORDB_PORT", "FALKORDB_GRAPH", "QDRANT_URL",
          "AUTOMEM_GRPC_TARGET", "AUTOMEM_INGEST_ADDR", "AUTOMEM_RECALL_ADDR", "AUTOMEM_ENRICH_ADDR",
          "AUTOMEM_CONSOLIDATE_ADDR", "AUTOMEM_API_TOKEN", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER")


class Cluster:
    """The four processes of one test, each with its own gRPC (or HTTP) port and log file."""

    def __init__(self, settings: Settings, tmp: Path) -> None:
        self.settings = settings
        self.tmp = tmp
        self.ports = {"ingest": free_port(), "recall": free_port(), "enrich": free_port(), "gateway": free_port()}
        self.procs: dict[str, subprocess.Popen] = {}
        base = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        self.base = {**base, "AUTOMEM_DATA_DIR": str(tmp / "data"), "QDRANT_URL": "disabled",
                     "AUTOMEM_STREAM_NAME": settings.stream_name, "AUTOMEM_SUBJECT_PREFIX": settings.subject_prefix,
                     "FALKORDB_GRAPH": settings.graph_name, "AUTOMEM_CONSOLIDATION_ENABLED": "false",
                     # Redelivery of what the killed consumer had fetched but not acknowledged.
                     "AUTOMEM_ACK_WAIT_SECONDS": "2", "AUTOMEM_SHUTDOWN_GRACE_SECONDS": "1"}
        self.stores = {"NATS_URL": settings.nats_url, "FALKORDB_HOST": settings.falkordb_host,
                       "FALKORDB_PORT": str(settings.falkordb_port)}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['gateway']}"

    def addr(self, target: str) -> str:
        return f"127.0.0.1:{self.ports[target]}"

    def start(self, target: str) -> subprocess.Popen:
        if target == "gateway":  # no FalkorDB, no NATS: only the services' addresses
            env = {**self.base, "PORT": str(self.ports["gateway"]), "AUTOMEM_INGEST_ADDR": self.addr("ingest"),
                   "AUTOMEM_RECALL_ADDR": self.addr("recall"), "AUTOMEM_ENRICH_ADDR": self.addr("enrich"),
                   "AUTOMEM_CONSOLIDATE_ADDR": self.addr("ingest")}
        else:
            env = {**self.base, **self.stores, "AUTOMEM_GRPC_PORT": str(self.ports[target]),
                   "PORT": str(free_port())}
        log = open(self.tmp / f"{target}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([AUTOMEM, "serve", "--target", target], env=env, stdout=log, stderr=log)
        log.close()
        self.procs[target] = proc
        return proc

    def log(self, target: str) -> str:
        return (self.tmp / f"{target}.log").read_text(errors="replace")[-4000:]

    async def wait_serving(self, target: str, timeout: float = 90) -> None:
        """Until the process's gRPC health says SERVING for its service."""
        proc = self.procs[target]
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.addr(target)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                assert proc.poll() is None, f"{target} exited with {proc.returncode}:\n{self.log(target)}"
                try:
                    r = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAMES[target]), timeout=1)
                    if r.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.aio.AioRpcError:
                    pass
                await asyncio.sleep(0.2)
        raise AssertionError(f"{target} never served:\n{self.log(target)}")

    async def wait_gateway(self, timeout: float = 90) -> None:
        proc = self.procs["gateway"]
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(base_url=self.url, timeout=3) as http:
            while time.monotonic() < deadline:
                assert proc.poll() is None, f"gateway exited with {proc.returncode}:\n{self.log('gateway')}"
                try:
                    if (await http.get("/health")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)
        raise AssertionError(f"gateway never became healthy:\n{self.log('gateway')}")

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every live process; returns the exit codes."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for target, proc in self.procs.items():
            try:
                codes[target] = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[target] = proc.wait()
        return codes


async def _status_counts(graph: GraphStore) -> dict[tuple[str, str], int]:
    rows = await graph.ro_query("MATCH (m:Memory) RETURN m.enrichment_status, m.embedding_status, count(m)", {})
    return {(r[0], r[1]): int(r[2]) for r in rows}


async def _enriched(graph: GraphStore) -> int:
    rows = await graph.ro_query(
        "MATCH (m:Memory) WHERE m.enrichment_status = 'ENRICHMENT_STATUS_DONE' RETURN count(m)", {})
    return int(rows[0][0])


async def test_separate_processes_degrade_without_vectors_and_lose_no_event_when_enrich_is_killed(
        settings: Settings, tmp_path: Path) -> None:
    cluster = Cluster(settings, tmp_path)
    graph = GraphStore(settings)
    bus = Bus(settings)
    stored: list[str] = []
    marker = uuid.uuid4().hex[:8]
    try:
        for target in ("ingest", "recall", "enrich", "gateway"):
            cluster.start(target)
        for target in ("ingest", "recall", "enrich"):
            await cluster.wait_serving(target)
        await cluster.wait_gateway()
        await bus.connect()

        async with httpx.AsyncClient(base_url=cluster.url, timeout=30) as http:
            health = (await http.get("/health")).json()
            assert health["status"] == "healthy" and health["falkordb"] == "connected"
            assert health["qdrant"] == "disabled" and health["degraded_arms"] == ["vector"]
            assert health["nats"] == "connected" and health["enrichment"]["model"] == ""
            assert "sync_status" not in health  # nothing to compare the graph with

            async def store(i: int) -> None:
                r = await http.post("/memory", json={
                    "content": f"Deployment note {i} {marker}: the Berlin team moved service {i} to Kubernetes",
                    "tags": ["ops", f"n{i}"]})
                assert r.status_code == 201, r.text
                stored.append(r.json()["memory_id"])

            async def ack_pending() -> int:
                return (await bus.js.consumer_info(settings.stream_name, "enrich")).num_ack_pending

            # A stream of stores; enrich is killed once it has enriched some memories while a
            # batch is delivered to it and not yet acknowledged.
            total = 60
            for i in range(10):
                await store(i)
            await eventually(lambda: _enriched(graph), timeout=60, interval=0.02)
            i = 10
            while not (await ack_pending() and await _enriched(graph) < len(stored)):
                assert i < total - 10, "enrich never had a batch in flight"
                await store(i)
                i += 1
            cluster.procs["enrich"].send_signal(signal.SIGKILL)
            assert cluster.procs["enrich"].wait(timeout=10) == -signal.SIGKILL
            in_flight_at_kill = await ack_pending()  # delivered to the dead process, unacknowledged
            enriched_at_kill = await _enriched(graph)
            # A batch was delivered and not acknowledged; its graph writes may have landed just
            # before the kill (then it is redelivered and applied again). The stores below, made
            # while enrich is down, are the events it has never seen.
            assert in_flight_at_kill > 0 and 0 < enriched_at_kill <= len(stored)

            # The gateway and the other services keep working without enrich.
            while i < total:
                await store(i)
                i += 1
            health = (await http.get("/health")).json()
            assert health["falkordb"] == "connected" and health["enrichment"] is None
            assert health["status"] == "degraded"
            # Recallable at once through the graph arms, before enrichment ran.
            r = (await http.get("/recall", params={"query": f"Berlin Kubernetes {marker}", "limit": 100})).json()
            assert r["degraded"] == ["vector"] and "vector" not in r["arms"] and "keyword" in r["arms"]
            assert set(stored) <= {h["id"] for h in r["results"]}

            cluster.start("enrich")
            await cluster.wait_serving("enrich")

            async def all_done() -> bool:
                counts = await _status_counts(graph)
                return counts == {("ENRICHMENT_STATUS_DONE", "EMBEDDING_STATUS_PENDING"): total} and counts

            await eventually(all_done, timeout=60, interval=0.2)

            # The durable consumer acknowledged the whole stream; nothing was parked.
            async def acked() -> object:
                info = await bus.js.consumer_info(settings.stream_name, "enrich")
                stream = await bus.js.stream_info(settings.stream_name)
                return (info.num_pending == 0 and info.num_ack_pending == 0
                        and info.ack_floor.stream_seq == stream.state.last_seq and (info, stream))

            info, stream = await eventually(acked, timeout=30)
            assert stream.state.messages == total  # one MEMORY_CREATED each, no dead letters
            # The batch the killed process held was delivered again.
            assert info.delivered.consumer_seq >= info.delivered.stream_seq + in_flight_at_kill
            dlq = await bus.js.stream_info(settings.stream_name, subjects_filter=f"{settings.subject_prefix}.dlq.>")
            assert not dlq.state.subjects
            async def enrich_status() -> dict | None:  # the gateway's channel reconnects to the new process
                r = await http.get("/enrichment/status")
                return r.json() if r.status_code == 200 else None
            status = await eventually(enrich_status, timeout=30)
            assert status["failed"] == 0 and status["dead_lettered"] == 0 and status["queue_depth"] == 0

            # Entities were extracted without vectors; recall still says it is degraded.
            got = (await http.get(f"/memory/{stored[0]}")).json()["memory"]
            assert "entity:place:berlin" in {e["tag"] for e in got["entities"]}, got["entities"]
            assert got["tags"] == ["ops", "n0"]
            health = (await http.get("/health")).json()
            assert health["memory_count"] == total and health["enrichment"]["processed"] >= total - enriched_at_kill
            r = (await http.get("/recall", params={"query": f"Berlin Kubernetes {marker}", "limit": 100})).json()
            assert r["degraded"] == ["vector"] and {h["id"] for h in r["results"]} == set(stored)
            r = (await http.get("/recall", params={"tags": "n7", "limit": 5})).json()
            assert [h["id"] for h in r["results"]] == [stored[7]] and r["arms"] == ["tags"]
    finally:
        codes = cluster.stop_all()
        await bus.close()
        await graph.close()
    assert all(code == 0 for code in codes.values()), codes
