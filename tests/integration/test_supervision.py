"""``automem up`` supervises the servers it starts (issue 12, item 11): a nats-server or
redis-server killed with SIGKILL is started again on the same port and data dir, the restart
is logged and counted in ``/health`` (``server_restarts``), and stores and enrichment go on
without a restart of the service."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from automem.common.embedded import EmbeddedRuntime, free_port, pid_alive
from tests.integration.test_runtime import _start, _stop, _wait_healthy, _wait_vectors


def _server_pid(parent: int, name: str) -> int:
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(parent)], capture_output=True, text=True,
                         check=True).stdout
    pids = [int(line.split()[0]) for line in out.splitlines() if line.split()[1:] == [name]]
    assert len(pids) == 1, out
    return pids[0]


def _listening_port(pid: int) -> set[int]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if f"pid={pid}," in line}


def _wait_restarted(port: int, name: str, count: int, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            body = r.json()
            if r.status_code == 200 and body.get("server_restarts", {}).get(name) == count \
                    and body.get("nats") == "connected":
                return body
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{name} not restarted {count} time(s): {body}")


def _store(port: int, content: str) -> None:
    r = httpx.post(f"http://127.0.0.1:{port}/memory", json={"content": content}, timeout=30)
    assert r.status_code == 201, r.text


def test_killed_servers_are_restarted_on_the_same_port_and_enrichment_goes_on(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    proc = _start(data, port)
    try:
        health = _wait_healthy(port, proc)
        assert health["server_restarts"] == {"nats-server": 0, "redis-server": 0}
        _store(port, "stored before any server died")
        _wait_vectors(port, 1)
        stored = 1
        for name in ("redis-server", "nats-server"):
            old = _server_pid(proc.pid, name)
            ports = _listening_port(old)
            os.kill(old, signal.SIGKILL)
            _wait_restarted(port, name, 1)
            new = _server_pid(proc.pid, name)
            assert new != old and not pid_alive(old)
            assert ports and ports <= _listening_port(new)  # same port(s)
            # The service itself was not restarted, and its connections recovered.
            _store(port, f"stored after {name} was killed and restarted")
            stored += 1
            body = _wait_vectors(port, stored)
            assert body["memory_count"] == stored
        log = (data.parent / f"automem-{port}.log").read_text()
        assert "redis-server restarted" in log and "nats-server restarted" in log
        assert proc.poll() is None
    finally:
        _stop(proc)


async def test_a_restart_that_fails_is_tried_again_until_it_succeeds(tmp_path: Path) -> None:
    """nats-server killed while its port is taken: the first restarts fail (the port is in
    use), and the supervisor keeps trying until the port is free again."""
    import asyncio
    import socket

    from tests.integration.test_embedded import _settings

    rt = EmbeddedRuntime(_settings(tmp_path / "data", falkordb_host="127.0.0.1", falkordb_port=1))
    await rt.start()
    supervisor = asyncio.create_task(rt.supervise(interval=1.0))
    blocker = socket.socket()
    try:
        assert rt.nats is not None
        port, old = rt.nats.port, rt.nats.pid
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 0.8
        while True:  # take the port as soon as the killed server let go of it
            try:
                blocker.bind(("127.0.0.1", port))
                blocker.listen()
                break
            except OSError:
                assert time.monotonic() < deadline, "the killed server kept its port"
                await asyncio.sleep(0.01)
        deadline = time.monotonic() + 30
        while not (rt.nats._proc is None and rt.restarts["nats-server"] == 0):
            assert time.monotonic() < deadline, "no failed restart"
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.5)  # at least one more (failing) try
        assert rt.restarts["nats-server"] == 0 and not rt.nats.running
        blocker.close()
        deadline = time.monotonic() + 60
        while not rt.nats.running:
            assert time.monotonic() < deadline, "not restarted after the port was freed"
            await asyncio.sleep(0.1)
        assert rt.restarts["nats-server"] == 1 and rt.nats.port == port and rt.nats.pid != old
    finally:
        blocker.close()
        supervisor.cancel()
        await rt.stop()


def test_a_killed_child_process_is_restarted_and_counted_in_health(tmp_path: Path) -> None:
    """The gateway and enrich child processes are restarted when they die, as the servers
    are; ``/health`` counted only the servers' restarts (break-it review)."""
    from tests.integration.test_runtime import _target_of, _wait_children

    data = tmp_path / "data"
    port = free_port()
    proc = _start(data, port)
    try:
        _wait_healthy(port, proc)
        (enrich,) = [pid for pid in _wait_children(proc.pid, 4) if _target_of(pid) == "enrich"]
        # Up, not starting (a child that dies before it is up fails the start: a clear error).
        deadline = time.monotonic() + 120
        while "automem is up" not in (data.parent / f"automem-{port}.log").read_text():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.3)
        os.kill(enrich, signal.SIGKILL)
        body = _wait_restarted(port, "enrich", 1)
        assert body["server_restarts"]["nats-server"] == body["server_restarts"]["redis-server"] == 0
        _store(port, "stored after the enrich process was killed and restarted")
        _wait_vectors(port, 1)  # the new enrich process enriches
        assert proc.poll() is None
    finally:
        _stop(proc)
