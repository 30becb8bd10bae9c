"""Load actually spreads (issue 15, item 3): two recall processes (``automem serve --target
recall``, real processes on the session's NATS and FalkorDB) behind one client target. With
the gateway's default policy (``round_robin``, automem/common/client.py) both get calls; with
``pick_first`` — what a plain ClusterIP Service amounts to — one process gets them all. The
calls are counted from each process's own access lines (automem/common/logs.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from automem.common.client import AutomemClient
from automem.common.embedded import free_port
from automem.common.settings import Settings
from tests.conftest import eventually, stop_processes

pytestmark = pytest.mark.asyncio(loop_scope="session")

CALLS = 40
METHOD = "/automem.v1.RecallService/SearchMemories"


def _env(settings: Settings, port: int, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOMEM_", "FALKORDB_", "NATS_", "QDRANT_"))}
    env.update({"NATS_URL": settings.nats_url, "FALKORDB_HOST": settings.falkordb_host,
                "FALKORDB_PORT": str(settings.falkordb_port), "FALKORDB_GRAPH": settings.graph_name,
                "AUTOMEM_STREAM_NAME": settings.stream_name, "AUTOMEM_SUBJECT_PREFIX": settings.subject_prefix,
                "AUTOMEM_EVENT_RETENTION_BYTES": "0", "QDRANT_URL": "disabled", "AUTOMEM_HOST": "127.0.0.1",
                "AUTOMEM_GRPC_PORT": str(port), "AUTOMEM_DATA_DIR": str(data_dir), "AUTOMEM_LOG_FORMAT": "json",
                "AUTOMEM_CONSOLIDATION_ENABLED": "false",
                "AUTOMEM_METRICS_PORT": "0"})  # two processes on one machine: no shared metrics port
    return env


def _calls(log: Path) -> int:
    count = 0
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        count += record.get("name") == "automem.access" and record.get("route") == METHOD
    return count


@pytest.fixture
async def two_recalls(settings: Settings, tmp_path: Path):
    procs, logs, ports = [], [], []
    try:
        for i in range(2):
            port = free_port()
            log = tmp_path / f"recall-{i}.log"
            with log.open("w") as err:
                procs.append(await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "automem.cli", "serve", "--target", "recall",
                    env=_env(settings, port, tmp_path / f"data-{i}"), stdout=subprocess.DEVNULL, stderr=err))
            logs.append(log)
            ports.append(port)
        for port in ports:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)

                async def serving(stub=stub) -> bool:
                    try:
                        answer = await stub.Check(health_pb2.HealthCheckRequest(service="automem.v1.RecallService"),
                                                  timeout=2)
                    except grpc.aio.AioRpcError:
                        return False
                    return answer.status == health_pb2.HealthCheckResponse.SERVING
                await eventually(serving, timeout=90, interval=0.5)
        yield ports, logs
    finally:
        await stop_processes(procs)


async def _spread(ports: list[int], logs: list[Path], policy: str) -> list[int]:
    before = [_calls(log) for log in logs]
    target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
    async with AutomemClient(target, lb_policy=policy) as client:
        for i in range(CALLS):
            await client.search(f"who moved the billing service {i}", limit=3)

    async def counted():
        now = [_calls(log) - b for log, b in zip(logs, before, strict=True)]
        return now if sum(now) >= CALLS else None
    return await eventually(counted, timeout=30)


async def test_round_robin_spreads_calls_over_both_recall_processes(two_recalls) -> None:
    ports, logs = two_recalls
    spread = await _spread(ports, logs, "round_robin")
    assert sum(spread) == CALLS and min(spread) >= CALLS // 4, spread
    # The policy is what spreads: one connection (pick_first) sends every call to one process.
    single = await _spread(ports, logs, "pick_first")
    assert sorted(single) == [0, CALLS], single
