"""FalkorDB persistence of the embedded launcher: acknowledged writes survive SIGKILL (also in
the middle of an AOF rewrite), data dirs written by the earlier configuration (a long command
AOF, or a command base) load and are rewritten to an RDB base, and the start-up wait fails a
hung server instead of waiting for ever."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis.exceptions
from falkordb.asyncio import FalkorDB

from automem.common.embedded import (
    REWRITE_MIN_INCR_BYTES,
    EmbeddedFalkorDB,
    EmbeddedServerError,
    _falkordb_paths,
    _ServerProcess,
    _StartWatch,
    free_port,
)


async def _query(server: EmbeddedFalkorDB | SimpleNamespace, cypher: str, params: dict | None = None) -> list:
    db = FalkorDB(host=server.host, port=server.port)
    try:
        return (await db.select_graph("g").query(cypher, params)).result_set
    finally:
        await db.aclose()


async def _ids(server: EmbeddedFalkorDB) -> set[str]:
    return {row[0] for row in await _query(server, "MATCH (m:Memory) RETURN m.id")}


async def _store(server: EmbeddedFalkorDB | SimpleNamespace, count: int, batch: int = 500) -> list[str]:
    """Create ``count`` Memory nodes in batches; returns the acknowledged ids."""
    ids = [uuid.uuid4().hex for _ in range(count)]
    db = FalkorDB(host=server.host, port=server.port)
    try:
        graph = db.select_graph("g")
        with contextlib.suppress(redis.exceptions.ResponseError):  # "already indexed"
            await graph.query("CREATE INDEX FOR (m:Memory) ON (m.id)")
        for i in range(0, count, batch):
            rows = [{"id": x, "content": f"memory {x} about restarts", "n": i} for x in ids[i: i + batch]]
            await graph.query("UNWIND $rows AS row CREATE (m:Memory) SET m = row", {"rows": rows})
    finally:
        await db.aclose()
    return ids


async def _update_one_by_one(server: EmbeddedFalkorDB | SimpleNamespace, ids: list[str]) -> None:
    db = FalkorDB(host=server.host, port=server.port)
    try:
        graph = db.select_graph("g")
        for x in ids:
            await graph.query("MATCH (m:Memory {id: $id}) SET m.touched = true", {"id": x})
    finally:
        await db.aclose()


def _sigkill(server: EmbeddedFalkorDB) -> None:
    os.kill(server.pid, signal.SIGKILL)


async def _restart_holds(data_dir: Path, ids: set[str], touched: int | None = None) -> None:
    """A fresh launcher on ``data_dir`` holds exactly the Memory nodes ``ids`` (and ``touched``
    of them have ``touched`` set, when given)."""
    again = EmbeddedFalkorDB(data_dir)
    await again.start()
    try:
        assert await _ids(again) == ids
        if touched is not None:
            assert await _query(again, "MATCH (m:Memory) WHERE m.touched RETURN count(m)") == [[touched]]
    finally:
        await again.stop()


async def test_acknowledged_writes_survive_sigkill_of_falkordb(tmp_path: Path):
    server = EmbeddedFalkorDB(tmp_path)
    await server.start()
    ids = await _store(server, 3000)
    await _update_one_by_one(server, ids[:300])
    _sigkill(server)
    await server.stop()  # reaps the killed process; no SHUTDOWN, no rewrite reached it
    await _restart_holds(tmp_path, set(ids), touched=300)


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to slow fsync down")
async def test_acknowledged_writes_survive_sigkill_while_fsync_is_slow(tmp_path: Path):
    """A slow disk: every fsync of the server takes 0.3 s (strace delays the syscall). With
    ``appendfsync everysec`` redis answered writes whose AOF write it had postponed behind the
    running fsync, and a SIGKILL lost all of them."""
    server = EmbeddedFalkorDB(tmp_path)
    await server.start()
    slow = subprocess.Popen(  # noqa: ASYNC220 - killed below
        ["strace", "-f", "-qq", "-p", str(server.pid), "-o", os.devnull, "-e", "trace=fsync,fdatasync",
         "-e", "inject=fsync:delay_enter=300000", "-e", "inject=fdatasync:delay_enter=300000"])
    try:
        await asyncio.sleep(1.0)  # strace attached to every thread
        ids = await _store(server, 1500)
        _sigkill(server)
    finally:
        slow.kill()
        slow.wait()
    await server.stop()
    await _restart_holds(tmp_path, set(ids))


async def test_sigkill_during_aof_rewrite_loses_nothing(tmp_path: Path):
    server = EmbeddedFalkorDB(tmp_path)
    await server.start()
    ids = await _store(server, 20000)
    await server.rewrite_aof(wait=0)  # started in a forked child
    later = await _store(server, 500)  # written while the child writes the new base
    _sigkill(server)
    await server.stop()
    await _restart_holds(tmp_path, set(ids) | set(later))


def _old_argv(db_dir: Path, port: int, *extra: str) -> list[str]:
    """The launcher's redis-server command line before restart-at-scale (redis' defaults for
    rewrites and FalkorDB's for effects), plus ``extra``."""
    server, module = _falkordb_paths()
    return [server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(db_dir), "--daemonize", "no",
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--logfile", "", *extra,
            "--loadmodule", module]


async def _write_with_old_config(tmp_path: Path, count: int, *extra: str, rewrite_first: bool = False) -> list[str]:
    """Run redis-server as the earlier launcher did on ``tmp_path/falkordb``, store ``count``
    nodes (as commands in the AOF), SHUTDOWN. ``rewrite_first``: store half, BGREWRITEAOF
    (a base in the configured form), then the rest."""
    db_dir = tmp_path / "falkordb"
    db_dir.mkdir(parents=True)
    port = free_port()
    proc = subprocess.Popen(  # noqa: ASYNC220 - a server left running; only poll/kill below
        _old_argv(db_dir, port, *extra), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    probe = SimpleNamespace(host="127.0.0.1", port=port)
    try:
        for _ in range(200):
            try:
                if await _query(probe, "RETURN 1") == [[1]]:
                    break
            except Exception:  # noqa: BLE001 - not listening yet
                await asyncio.sleep(0.05)
        if rewrite_first:
            ids = await _store(probe, count // 2)
            db = FalkorDB(host=probe.host, port=port)
            try:
                await db.connection.bgrewriteaof()
                while (await db.connection.info("persistence"))["aof_rewrite_in_progress"]:
                    await asyncio.sleep(0.05)
            finally:
                await db.aclose()
            ids += await _store(probe, count - count // 2)
        else:
            ids = await _store(probe, count)
        await _update_one_by_one(probe, ids[:200])
        db = FalkorDB(host=probe.host, port=port)
        with contextlib.suppress(Exception):  # SHUTDOWN closes the connection
            await db.connection.execute_command("SHUTDOWN")
        await db.aclose()
        for _ in range(600):
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return ids


async def test_long_command_aof_of_an_older_data_dir_loads_and_is_rewritten_to_an_rdb_base(tmp_path: Path):
    ids = await _write_with_old_config(tmp_path, 5000)
    server = EmbeddedFalkorDB(tmp_path)
    assert server.aof_base_is_rdb() is True
    base = next((tmp_path / "falkordb" / "appendonlydir").glob("*.base.rdb"))
    assert base.stat().st_size < 1024  # everything is in the command part
    await server.start()
    try:
        assert await server.rewrite_aof(wait=120)  # joins the rewrite the start began
        assert await server.aof_incr_bytes() < REWRITE_MIN_INCR_BYTES
        new_base = next((tmp_path / "falkordb" / "appendonlydir").glob("*.base.rdb"))
        assert new_base.stat().st_size > 100 * 1024
        assert await _ids(server) == set(ids)
    finally:
        await server.stop()
    await _restart_holds(tmp_path, set(ids), touched=200)


async def test_command_base_of_an_older_data_dir_is_rewritten_to_an_rdb_base(tmp_path: Path):
    ids = await _write_with_old_config(tmp_path, 2000, "--aof-use-rdb-preamble", "no", rewrite_first=True)
    server = EmbeddedFalkorDB(tmp_path)
    assert server.aof_base_is_rdb() is False
    await server.start()
    try:
        assert await _ids(server) == set(ids)
        assert await server.rewrite_aof(wait=120)
        assert server.aof_base_is_rdb() is True
    finally:
        await server.stop()
    await _restart_holds(tmp_path, set(ids), touched=200)


async def test_clean_stop_leaves_an_rdb_base_and_no_commands_to_replay(tmp_path: Path):
    server = EmbeddedFalkorDB(tmp_path)
    await server.start()
    ids = await _store(server, 4000)
    assert await server.aof_incr_bytes() >= REWRITE_MIN_INCR_BYTES
    await server.stop()
    incr = sum(p.stat().st_size for p in (tmp_path / "falkordb" / "appendonlydir").glob("*.incr.aof"))
    assert incr < REWRITE_MIN_INCR_BYTES
    await _restart_holds(tmp_path, set(ids))


async def test_start_watch_fails_a_server_that_makes_no_progress(tmp_path: Path):
    idle = _ServerProcess("idle", ["sleep", "30"], cwd=tmp_path)
    try:
        watch = _StartWatch(idle, stall=0.5)
        watch.check()
        with pytest.raises(EmbeddedServerError, match="made no start-up progress"):
            for _ in range(100):
                await asyncio.sleep(0.05)
                watch.check()
    finally:
        await idle.terminate(1.0)


async def test_start_watch_keeps_waiting_while_the_server_reports_progress_or_computes(tmp_path: Path):
    busy = _ServerProcess("busy", ["python3", "-c", "import time\nend = time.time() + 30\nwhile time.time() < end: pass"],
                          cwd=tmp_path)
    idle = _ServerProcess("idle", ["sleep", "30"], cwd=tmp_path)
    try:
        computing, reporting = _StartWatch(busy, stall=0.5), _StartWatch(idle, stall=0.5)
        for step in range(40):  # 2 s, four times the stall time
            await asyncio.sleep(0.05)
            reporting.advance(step)  # e.g. loading_loaded_bytes growing
            computing.check()
            reporting.check()
    finally:
        await busy.terminate(1.0)
        await idle.terminate(1.0)


async def test_start_watch_reports_a_server_that_exited(tmp_path: Path):
    gone = _ServerProcess("gone", ["sh", "-c", "echo bad config; exit 3"], cwd=tmp_path)
    await gone.wait_exit(5)
    with pytest.raises(EmbeddedServerError, match="exited before it was ready") as excinfo:
        _StartWatch(gone, stall=60).check()
    assert "bad config" in str(excinfo.value)
