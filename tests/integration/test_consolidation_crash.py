"""A consolidation run killed (SIGKILL of the whole ``automem up`` tree) between its graph
writes and the publish of their events: every change still gets its event.

Break-it review: a MetaPattern listed 1975 members with 1975 PART_OF edges but its history
held 588 RELATION_CREATED events, for good; the killed run was missing from
``/consolidate/status``. The run wrote all edges in one query, then published the events one
by one. Now the events are kept in the same graph query (automem/graph/outbox.py) and
published after; the next process's outbox drain publishes what a killed one could not.

Deterministic: the embedded nats-server is stopped (SIGSTOP) before the run, so no publish can
succeed (each waits for an acknowledgement within the store bound, 20 s here), and the tree is
killed as soon as the PART_OF edges are in the graph — between the write and the publish."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import redis

from automem.common.embedded import free_port, pid_alive
from tests.integration.test_runtime import _children, _start, _wait_children, _wait_healthy, _wait_vectors

MEMBERS = 40


def _comm(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/comm").read_text().strip()
    return ""


def _redis_port(pid: int) -> int:
    """The port of a redis-server (which rewrites its command line to ``redis-server host:port``)."""
    return int(re.search(rb":(\d+)", Path(f"/proc/{pid}/cmdline").read_bytes()).group(1))


def _edges(port: int, data: Path) -> list[tuple[str, str]]:
    """The PART_OF edges in the graph, read from the embedded FalkorDB (password: its auth.conf)."""
    password = re.search(r'requirepass "([0-9a-f]+)"', (data / "falkordb" / "auth.conf").read_text()).group(1)
    client = redis.Redis(port=port, password=password)
    try:
        reply = client.execute_command("GRAPH.RO_QUERY", "memories",
                                       "MATCH (m:Memory)-[:PART_OF]->(p:Memory) RETURN m.id, p.id")
        return sorted((m.decode(), p.decode()) for m, p in reply[1])
    finally:
        client.close()


def _announced(port: int, pattern: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The PART_OF edges the pattern's history announces (RELATION_CREATED), and its event types."""
    events, token = [], ""
    while True:
        body = httpx.get(f"http://127.0.0.1:{port}/v1/memories/{pattern}/history",
                         params={"page_size": 100, "page_token": token}, timeout=10).json()
        events += body["events"]
        token = body.get("next_page_token") or ""
        if not token:
            break
    edges = sorted((e["relation"]["source_id"], e["relation"]["target_id"]) for e in events
                   if e["type"] == "EVENT_TYPE_RELATION_CREATED" and e["relation"]["type"] == "RELATION_TYPE_PART_OF")
    return edges, [e["type"] for e in events]


def _run_cluster(port: int) -> None:
    """``POST /consolidate`` cluster; it never answers here (the tree is killed during it)."""
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"http://127.0.0.1:{port}/consolidate", json={"mode": "cluster", "dry_run": False}, timeout=300)


def _kill_tree(proc: subprocess.Popen, children: list[int]) -> None:
    for pid in [proc.pid, *children]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=30)
    for pid in children:
        deadline = time.monotonic() + 30
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)


def test_a_cluster_run_killed_before_it_published_leaves_every_edge_its_event(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    env = {"AUTOMEM_CLUSTER_THRESHOLD": "0.3", "AUTOMEM_STORE_TIMEOUT_SECONDS": "20",
           "AUTOMEM_CONSOLIDATION_CLUSTER_INTERVAL_SECONDS": "86400"}
    proc = _start(data, port, env)
    children: list[int] = []
    try:
        _wait_healthy(port, proc)
        children = _wait_children(proc.pid, 4)
        nats = next(pid for pid in children if _comm(pid) == "nats-server")
        falkordb = _redis_port(next(pid for pid in children if _comm(pid) == "redis-server"))
        for i in range(MEMBERS):
            r = httpx.post(f"http://127.0.0.1:{port}/memory", timeout=30,
                           json={"content": f"The espresso machine on floor two makes great coffee, note {i}."})
            assert r.status_code == 201, r.text
        _wait_vectors(port, MEMBERS)

        os.kill(nats, signal.SIGSTOP)  # every publish now waits for an acknowledgement that never comes
        threading.Thread(target=_run_cluster, args=(port,), daemon=True).start()
        deadline = time.monotonic() + 120
        while len(_edges(falkordb, data)) < MEMBERS and time.monotonic() < deadline:
            time.sleep(0.05)
        edges = _edges(falkordb, data)
        assert len(edges) == MEMBERS, edges
    finally:
        _kill_tree(proc, children or _children(proc.pid))

    proc = _start(data, port)
    try:
        _wait_healthy(port, proc)
        pattern = edges[0][1]
        deadline = time.monotonic() + 60
        announced, types = _announced(port, pattern)
        while announced != edges and time.monotonic() < deadline:
            time.sleep(0.5)
            announced, types = _announced(port, pattern)
        assert announced == edges, (len(announced), len(edges))
        assert types.count("EVENT_TYPE_MEMORY_CREATED") == 1, types
        runs = httpx.get(f"http://127.0.0.1:{port}/consolidate/status", timeout=10).json()["history"]
        # Recorded: finished (the kill came after its last write) or, killed before its end,
        # as not finished (tests/integration/test_consolidation.py
        # ``test_a_run_is_in_the_history_from_its_start``); it was missing.
        killed = [r for r in runs if r["mode"] == "cluster" and r["trigger"] == "manual"]
        assert len(killed) == 1 and (killed[0]["error"] or "not finished").startswith("not finished"), runs
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
