"""The embedded servers: start/stop, JetStream, GRAPH.QUERY, persistence, locking, orphans."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nats
import pytest
from falkordb.asyncio import FalkorDB

from automem.common.embedded import (
    DataDirLockedError,
    EmbeddedFalkorDB,
    EmbeddedNats,
    EmbeddedRuntime,
    EmbeddedServerError,
    free_port,
    pid_alive,
)
from automem.common.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]


def _settings(data_dir: Path, **kw) -> Settings:
    # Explicit empties so AUTOMEM_*/NATS_URL/FALKORDB_HOST in the environment don't leak in.
    for key, value in {
        "nats_url": "",
        "falkordb_host": "",
        "nats_port": 0,
        "falkordb_port": 0,
        "falkordb_password": "",
    }.items():
        kw.setdefault(key, value)
    return Settings(data_dir=data_dir, **kw)


async def _wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]
    return alive


async def _graph_query(host: str, port: int, graph: str, query: str, params: dict | None = None,
                       password: str | None = None):
    db = FalkorDB(host=host, port=port, password=password)
    try:
        result = await db.select_graph(graph).query(query, params)
        return result.result_set
    finally:
        await db.aclose()


async def _js_publish_and_read(url: str, stream: str, subject: str, payload: bytes, token: str | None = None) -> int:
    nc = await nats.connect(url, token=token)
    try:
        js = nc.jetstream()
        await js.add_stream(name=stream, subjects=[subject])
        ack = await js.publish(subject, payload)
        return ack.seq
    finally:
        await nc.close()


# --- fixtures ----------------------------------------------------------------------------


async def test_session_servers_and_settings(settings: Settings, nats_server, falkordb_server):
    assert settings.nats_url == nats_server.url
    assert settings.nats_url.startswith("nats://127.0.0.1:")
    assert (settings.falkordb_host, settings.falkordb_port) == ("127.0.0.1", falkordb_server.port)
    assert settings.graph_name.startswith("test_")
    assert settings.stream_name.startswith("TEST_")
    assert nats_server.running and falkordb_server.running


_seen_graph_names: set[str] = set()


@pytest.mark.parametrize("run", [1, 2])
def test_settings_are_unique_per_test(settings: Settings, run: int):
    assert settings.graph_name not in _seen_graph_names
    _seen_graph_names.add(settings.graph_name)
    assert settings.graph_name != "memories"
    assert settings.stream_name != "AUTOMEM_EVENTS"
    assert settings.subject_prefix != "automem.v1"


# --- NATS --------------------------------------------------------------------------------


async def test_jetstream_publish_consume(settings: Settings):
    nc = await nats.connect(settings.nats_url)
    try:
        js = nc.jetstream()
        subject = f"{settings.subject_prefix}.memory"
        await js.add_stream(name=settings.stream_name, subjects=[f"{settings.subject_prefix}.>"])
        acks = [await js.publish(subject, f"m{i}".encode()) for i in range(3)]
        assert [a.seq for a in acks] == [1, 2, 3]
        assert all(a.stream == settings.stream_name for a in acks)
        sub = await js.pull_subscribe(subject, durable="c1", stream=settings.stream_name)
        msgs = await sub.fetch(3, timeout=5)
        assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
        for m in msgs:
            await m.ack_sync()
        info = await js.consumer_info(settings.stream_name, "c1")
        assert info.num_pending == 0
        assert info.ack_floor.stream_seq == 3
    finally:
        await nc.close()


async def test_nats_start_stop_and_restart_keeps_messages(tmp_path: Path):
    server = EmbeddedNats(tmp_path)
    await server.start()
    pid = server.pid
    assert server.running and pid is not None
    assert server.url == f"nats://127.0.0.1:{server.port}"
    assert server.port != 4222  # port 0 means "free port", not nats-server's 4222
    assert (tmp_path / "nats" / "jetstream").is_dir()
    seq = await _js_publish_and_read(server.url, "DURABLE", "durable.x", b"survives")
    assert seq == 1
    await server.stop()
    assert not server.running
    assert await _wait_gone([pid], timeout=0.5) == []
    with pytest.raises(EmbeddedServerError):
        _ = server.url

    again = EmbeddedNats(tmp_path)
    await again.start()
    try:
        nc = await nats.connect(again.url)
        js = nc.jetstream()
        info = await js.stream_info("DURABLE")
        assert info.state.messages == 1
        msg = await js.get_msg("DURABLE", 1)
        assert (msg.subject, msg.data) == ("durable.x", b"survives")
        await nc.close()
    finally:
        await again.stop()


async def test_nats_fixed_port_in_use_fails_with_output(tmp_path: Path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        server = EmbeddedNats(tmp_path, port=port, stall_timeout=10)
        with pytest.raises(EmbeddedServerError) as excinfo:
            await server.start()
    message = str(excinfo.value)
    assert "nats-server exited before it was ready" in message
    assert "address already in use" in message.lower()
    assert not server.running


# --- FalkorDB ----------------------------------------------------------------------------


async def test_falkordb_graph_query(settings: Settings):
    rows = await _graph_query(
        settings.falkordb_host,
        settings.falkordb_port,
        settings.graph_name,
        "CREATE (m:Memory {id: $id, content: $c}) RETURN m.id, m.content",
        {"id": "m1", "c": "hello"},
    )
    assert rows == [["m1", "hello"]]
    rows = await _graph_query(
        settings.falkordb_host,
        settings.falkordb_port,
        settings.graph_name,
        "MATCH (m:Memory) RETURN count(m)",
    )
    assert rows == [[1]]


async def test_falkordb_start_stop_and_restart_keeps_graph(tmp_path: Path):
    server = EmbeddedFalkorDB(tmp_path)
    await server.start()
    pid = server.pid
    assert server.running and server.host == "127.0.0.1" and server.port
    assert server.unix_socket == tmp_path.resolve() / "falkordb" / "redis.sock"
    assert server.unix_socket.is_socket()
    await _graph_query(server.host, server.port, "g", "CREATE (:Memory {id: 'persist', n: 42})")
    await server.stop()
    assert not server.running and server.port is None
    assert await _wait_gone([pid], timeout=0.5) == []
    assert any(p.name.startswith("appendonly") for p in (tmp_path / "falkordb").rglob("*"))

    again = EmbeddedFalkorDB(tmp_path)
    await again.start()
    try:
        rows = await _graph_query(again.host, again.port, "g", "MATCH (m:Memory) RETURN m.id, m.n")
        assert rows == [["persist", 42]]
    finally:
        await again.stop()


class _HangsOnce(EmbeddedFalkorDB):
    """A real FalkorDB whose first server stops answering right after PING (SIGSTOP: its main
    thread never runs again, as when FalkorDB waited forever on its graph-list lock in CI)."""

    def __init__(self, *args, hangs: int = 1, **kw) -> None:
        super().__init__(*args, **kw)
        self.hangs = hangs
        self.stopped: list[int] = []

    async def _probe_graph(self, proc) -> None:
        if len(self.stopped) < self.hangs:
            os.kill(proc.pid, signal.SIGSTOP)
            self.stopped.append(proc.pid)
        await super()._probe_graph(proc)


async def test_a_falkordb_that_hangs_after_ping_is_killed_and_started_again(tmp_path: Path, caplog):
    server = _HangsOnce(tmp_path, graph="g", graph_probe_timeout=1.0)
    await server.start()
    try:
        assert len(server.stopped) == 1 and server.pid != server.stopped[0]
        assert await _wait_gone(server.stopped, timeout=5) == []  # killed, not left stopped
        assert "did not answer its first graph query within 1s; killed it, starting again" in caplog.text
        await _graph_query(server.host, server.port, "g", "CREATE (:Memory {id: 'after'})")
        rows = await _graph_query(server.host, server.port, "g", "MATCH (m:Memory) RETURN m.id")
        assert rows == [["after"]]
    finally:
        await server.stop()


async def test_a_falkordb_that_keeps_hanging_fails_the_start_with_a_clear_error(tmp_path: Path):
    server = _HangsOnce(tmp_path, graph="g", graph_probe_timeout=0.5, hangs=3)
    with pytest.raises(EmbeddedServerError, match="did not answer its first graph query within 0.5s in 3 starts"):
        await server.start()
    assert len(server.stopped) == 3
    assert await _wait_gone(server.stopped, timeout=5) == []
    assert not server.running and server.port is None


async def test_falkordb_long_dir_skips_unix_socket(tmp_path: Path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedFalkorDB(deep)
    assert server.unix_socket is None
    await server.start()
    try:
        rows = await _graph_query(server.host, server.port, "g", "RETURN 1")
        assert rows == [[1]]
    finally:
        await server.stop()


# --- runtime -----------------------------------------------------------------------------


async def test_runtime_side_by_side_and_clean_stop(tmp_path: Path):
    rt_a = EmbeddedRuntime(_settings(tmp_path / "a"))
    rt_b = EmbeddedRuntime(_settings(tmp_path / "b"))
    sa = await rt_a.start()
    sb = await rt_b.start()
    pids = rt_a.pids + rt_b.pids
    try:
        assert len(set(pids)) == 4
        assert sa.nats_url != sb.nats_url
        assert sa.falkordb_port != sb.falkordb_port
        assert sa.data_dir == (tmp_path / "a").resolve() and rt_a.settings is sa
        await _graph_query(sa.falkordb_host, sa.falkordb_port, "g", "CREATE (:N {v: 'a'})", password=sa.falkordb_password)
        assert await _graph_query(sa.falkordb_host, sa.falkordb_port, "g", "MATCH (n:N) RETURN n.v", password=sa.falkordb_password) == [
            ["a"]
        ]
        rows_b = await _graph_query(sb.falkordb_host, sb.falkordb_port, "g", "MATCH (n:N) RETURN count(n)", password=sb.falkordb_password)
        assert rows_b == [[0]]
        assert await _js_publish_and_read(sa.nats_url, "S", "s.a", b"a", sa.nats_token) == 1
        assert await _js_publish_and_read(sb.nats_url, "S", "s.b", b"b", sb.nats_token) == 1
    finally:
        await rt_b.stop()
        await rt_a.stop()
    # Stopped and reaped: no nats-server / redis-server child is left.
    assert [p for p in pids if pid_alive(p)] == []
    assert rt_a.pids == [] and rt_b.pids == []
    with pytest.raises(EmbeddedServerError):
        _ = rt_a.settings


async def test_runtime_lock_refuses_second_runtime_on_same_dir(tmp_path: Path):
    first = EmbeddedRuntime(_settings(tmp_path))
    s1 = await first.start()
    try:
        second = EmbeddedRuntime(_settings(tmp_path))
        with pytest.raises(DataDirLockedError) as excinfo:
            await second.start()
        assert str(tmp_path.resolve()) in str(excinfo.value)
        assert f"pid {os.getpid()}" in str(excinfo.value)
        assert second.pids == []
        # The first runtime is untouched.
        assert await _graph_query(s1.falkordb_host, s1.falkordb_port, "g", "RETURN 7", password=s1.falkordb_password) == [[7]]
    finally:
        await first.stop()
    third = EmbeddedRuntime(_settings(tmp_path))
    await third.start()
    await third.stop()


async def test_runtime_lock_is_held_by_the_servers_too(tmp_path: Path):
    from automem.common.embedded import DataDirLock

    rt = EmbeddedRuntime(_settings(tmp_path))
    await rt.start()
    # Simulate the parent vanishing without unlocking: only the servers' inherited fds remain.
    os.close(rt.lock.fd)
    rt.lock.fd = None
    with pytest.raises(DataDirLockedError):
        DataDirLock(tmp_path).acquire()
    await rt.stop()
    probe = DataDirLock(tmp_path)
    probe.acquire()
    probe.release()


async def test_runtime_uses_external_servers_when_configured(settings: Settings):
    rt = EmbeddedRuntime(settings)
    effective = await rt.start()
    try:
        assert rt.pids == []
        assert effective.nats_url == settings.nats_url
        assert (effective.falkordb_host, effective.falkordb_port) == (
            settings.falkordb_host,
            settings.falkordb_port,
        )
        assert effective.graph_name == settings.graph_name
    finally:
        await rt.stop()


async def test_runtime_fixed_ports(tmp_path: Path):
    nats_port, falkor_port = free_port(), free_port()
    rt = EmbeddedRuntime(_settings(tmp_path, nats_port=nats_port, falkordb_port=falkor_port))
    s = await rt.start()
    try:
        assert s.nats_url == f"nats://127.0.0.1:{nats_port}"
        assert s.falkordb_port == falkor_port
    finally:
        await rt.stop()


_CHILD = textwrap.dedent("""
    import asyncio, json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from automem.common.embedded import EmbeddedRuntime
    from automem.common.settings import Settings

    async def main():
        rt = EmbeddedRuntime(Settings(data_dir=Path(sys.argv[1]), nats_url="", falkordb_host=""))
        await rt.start()
        print(json.dumps(rt.pids), flush=True)
        await asyncio.sleep(120)

    asyncio.run(main())
""")


async def test_sigkilled_parent_leaves_no_orphans(tmp_path: Path):
    data_dir = tmp_path / "data"
    parent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CHILD, str(data_dir), str(REPO_ROOT), stdout=asyncio.subprocess.PIPE
    )
    try:
        line = await asyncio.wait_for(parent.stdout.readline(), timeout=30)
        pids = json.loads(line)
        assert len(pids) == 2 and all(pid_alive(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        await asyncio.wait_for(parent.wait(), timeout=10)
    finally:
        if parent.returncode is None:
            parent.kill()
            await parent.wait()
    assert await _wait_gone(pids, timeout=15) == []
    # The data dir's lock went with them: a new runtime can take the dir and sees the data.
    rt = EmbeddedRuntime(_settings(data_dir))
    s = await rt.start()
    try:
        assert await _graph_query(s.falkordb_host, s.falkordb_port, "g", "RETURN 1", password=s.falkordb_password) == [[1]]
    finally:
        await rt.stop()


def test_a_lock_left_to_a_dead_owners_descendant_is_waited_for_not_refused(tmp_path: Path):
    """After a crash, the killed tree's last process (a server still exiting, or one a
    server forked) may hold the data dir's lock for a moment: ``automem up`` then failed with
    "in use by another automem" naming a pid that no longer exists (seen once in CI, in
    test_sigkilled_parent_leaves_no_orphans). A lock whose recorded owner is gone is waited
    for; one whose owner lives is still refused at once."""
    from automem.common.embedded import DataDirLock

    # The owner takes the lock, starts a process that inherits it (lives 2 s), and dies.
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os, subprocess, sys
        sys.path.insert(0, {str(REPO_ROOT)!r})
        from automem.common.embedded import DataDirLock
        fd = DataDirLock({str(tmp_path)!r}).acquire()
        heir = subprocess.Popen(["sleep", "2"], pass_fds=(fd,))
        print(heir.pid, flush=True)
    """)], stdout=subprocess.PIPE, text=True)
    heir = int(owner.stdout.readline())
    assert owner.wait(timeout=30) == 0 and pid_alive(heir)
    with pytest.raises(DataDirLockedError) as refused:
        DataDirLock(tmp_path).acquire()  # no wait: refused, saying the owner is gone
    assert "that process is gone" in str(refused.value)
    lock = DataDirLock(tmp_path)
    lock.acquire(wait=30)
    assert not pid_alive(heir)  # taken once the heir exited
    lock.release()
    # A live owner is refused at once, whatever the wait.
    held = DataDirLock(tmp_path)
    held.acquire()
    with pytest.raises(DataDirLockedError) as live:
        DataDirLock(tmp_path).acquire(wait=30)
    assert f"pid {os.getpid()}" in str(live.value) and "that process is gone" not in str(live.value)
    held.release()
