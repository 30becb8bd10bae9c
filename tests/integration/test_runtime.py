"""``automem up`` as a user runs it: a subprocess with embedded NATS, FalkorDB and Qdrant.

Restart keeps every memory and vector; SIGTERM leaves no orphan servers; two instances with
different data dirs run side by side; ``automem serve --target`` runs a subset."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from automem.common.embedded import free_port, pid_alive

AUTOMEM = str(Path(sys.executable).parent / "automem")


def _start(data_dir: Path, port: int, extra: dict[str, str] | None = None,
           args: tuple[str, ...] = ("up",)) -> subprocess.Popen:
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(data_dir), "PORT": str(port), "AUTOMEM_GRPC_PORT": "0",
           **(extra or {})}
    log = open(data_dir.parent / f"automem-{port}.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([AUTOMEM, *args], env=env, stdout=log, stderr=log)


def _wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"automem exited with {proc.returncode}"
        try:
            r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
            if r.status_code == 200:
                return r.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("automem did not become healthy")


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=True).stdout
    return [int(p) for p in out.split()]


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def _wait_vectors(port: int, count: int) -> dict:
    deadline = time.monotonic() + 30
    body: dict = {}
    while time.monotonic() < deadline:
        body = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json()
        if body.get("vector_count") == count:
            return body
        time.sleep(0.3)
    raise AssertionError(f"vectors never reached {count}: {body}")


def _up_with_children(tmp_path: Path, count: int = 4) -> tuple[Path, int, subprocess.Popen, list[int]]:
    """``automem up`` on a new data dir, healthy, with ``count`` child processes (nats-server,
    redis-server, the gateway and the enrich process by default): (data dir, port, process,
    children). The caller stops the process."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    proc = _start(data, port)
    try:
        _wait_healthy(port, proc)
        return data, port, proc, _wait_children(proc.pid, count)
    except BaseException:
        _stop(proc)
        raise


def test_restart_keeps_every_memory_and_vector_and_sigterm_leaves_no_orphans(tmp_path: Path) -> None:
    data, port, proc, servers = _up_with_children(tmp_path)
    try:
        assert len(servers) == 4  # nats-server, redis-server, the gateway and the enrich process
        # enrich runs in a child and writes its vectors through the shard this process serves
        # (automem/vectors/shared.py): the vectors below are the child's.
        assert sorted(filter(None, map(_target_of, servers))) == ["enrich", "gateway"]
        assert (data / "run" / "vectors.sock").exists()
        ids = []
        for i in range(5):
            r = httpx.post(f"http://127.0.0.1:{port}/memory",
                           json={"content": f"persistent memory {i}", "tags": ["keep"],
                                 "t_invalid": "2099-01-01T00:00:00Z"})
            assert r.status_code == 201
            ids.append(r.json()["memory_id"])
        _wait_vectors(port, 5)
    finally:
        _stop(proc)
    for pid in servers:
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(pid), f"orphan server {pid}"
    assert not (data / "run" / "vectors.sock").exists()

    proc = _start(data, port)
    try:
        body = _wait_healthy(port, proc)
        assert body["memory_count"] == 5 and body["vector_count"] == 5 and body["sync_status"] == "synced"
        for mid in ids:
            got = httpx.get(f"http://127.0.0.1:{port}/memory/{mid}").json()["memory"]
            assert got["t_invalid"] == "2099-01-01T00:00:00+00:00"
        hits = httpx.get(f"http://127.0.0.1:{port}/recall", params={"query": "persistent memory", "limit": 10}).json()
        assert {h["id"] for h in hits["results"]} == set(ids)
        assert "vector" in hits["arms"]
    finally:
        _stop(proc)


def _wait_children(pid: int, count: int, timeout: float = 120.0) -> list[int]:
    """The child processes of ``pid`` once there are ``count`` of them (or when ``timeout`` s pass)."""
    children: list[int] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(children) < count:
        children = _children(pid)
        time.sleep(0.3)
    return children


def _target_of(pid: int) -> str:
    """The ``--target`` of an ``automem serve`` process ('' for any other process)."""
    args = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True,
                          check=False).stdout.split()
    return args[args.index("--target") + 1] if "serve" in args and "--target" in args else ""


def test_enrich_runs_in_a_child_process_when_no_process_holds_the_vector_shard(tmp_path: Path) -> None:
    """``AUTOMEM_CHILD_TARGETS`` (default gateway,enrich): with the embedded vector shard
    enrich runs in a child that reaches the parent's shard (the test above); without vectors
    (``QDRANT_URL=disabled``) it runs as a child too, the gateway child reaches its
    EnrichService, and it enriches what the main process's ingest stored, with NER in a
    thread of its own process (no NER worker process under it)."""
    data = tmp_path / "data"
    data.mkdir()
    port, metrics_port = free_port(), free_port()
    proc = _start(data, port, {"QDRANT_URL": "disabled", "AUTOMEM_METRICS_PORT": str(metrics_port)})
    children: list[int] = []
    try:
        _wait_healthy(port, proc)
        children = _wait_children(proc.pid, 4)
        assert len(children) == 4  # nats-server, redis-server, the gateway and the enrich process
        assert sorted(filter(None, map(_target_of, children))) == ["enrich", "gateway"]
        r = httpx.post(f"http://127.0.0.1:{port}/memory", json={"content": "Alice moved the deploys to Tuesday"})
        assert r.status_code == 201
        status: dict = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = httpx.get(f"http://127.0.0.1:{port}/enrichment/status", timeout=5).json()
            if status.get("processed", 0) >= 1:
                break
            time.sleep(0.3)
        assert status["processed"] >= 1 and status["failed"] == 0, status
        # NER ran in a thread of the enrich child: no worker process of its own under it
        # (automem/children.py ``ChildProcess.environment``).
        enrich = next(pid for pid in children if _target_of(pid) == "enrich")
        workers = subprocess.run(["ps", "-o", "pid=", "--ppid", str(enrich)], capture_output=True, text=True,
                                 check=False).stdout.split()
        assert workers == [], workers
        _each_process_serves_its_own_metrics(data, port, metrics_port)
    finally:
        _stop(proc)
    for pid in children:
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(pid), f"orphan process {pid}"


def test_targets_joined_by_plus_share_one_child_and_the_parent_loads_no_model(tmp_path: Path) -> None:
    """``AUTOMEM_CHILD_TARGETS=gateway+recall,enrich``: the gateway and recall run in one child
    (the gateway's recall calls stay in that process), enrich in another; the parent keeps
    ingest, consolidate and the vector shard, and maps no ONNX Runtime (no target of its
    embeds: automem/targets.py ``_start_vectors``). A stored memory is enriched and recalled
    through the vector arm, the recall served by the shared child."""
    data = tmp_path / "data"
    data.mkdir()
    port, metrics_port = free_port(), free_port()
    proc = _start(data, port, {"AUTOMEM_CHILD_TARGETS": "gateway+recall,enrich",
                               "AUTOMEM_METRICS_PORT": str(metrics_port)})
    try:
        _wait_healthy(port, proc)
        children = _wait_children(proc.pid, 4)
        assert sorted(filter(None, map(_target_of, children))) == ["enrich", "gateway,recall"]
        r = httpx.post(f"http://127.0.0.1:{port}/memory", json={"content": "Alice moved the deploys to Tuesday"})
        assert r.status_code == 201
        _wait_vectors(port, 1)
        hits = httpx.get(f"http://127.0.0.1:{port}/recall", params={"query": "when are deploys", "limit": 5}).json()
        assert [h["id"] for h in hits["results"]] == [r.json()["memory_id"]] and "vector" in hits["arms"]
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert "onnxruntime" not in maps
        shared = next(pid for pid in children if _target_of(pid) == "gateway,recall")
        assert "onnxruntime" in Path(f"/proc/{shared}/maps").read_text()
        import json

        lines = (data.parent / f"automem-{port}.log").read_text(errors="replace").splitlines()
        up = next(json.loads(x) for x in lines if '"automem is up"' in x and x.startswith("{") and '"children": [' in x
                  and json.loads(x)["children"])
        pages = {name: httpx.get(f"http://127.0.0.1:{p}/metrics", timeout=10).text
                 for name, p in up["metrics_ports"].items()}
        recall_rpc = 'rpc_method="automem.v1.RecallService/SearchMemories"'
        assert recall_rpc in pages["gateway+recall"] and recall_rpc not in pages["parent"]
    finally:
        _stop(proc)


def _each_process_serves_its_own_metrics(data: Path, port: int, metrics_port: int) -> None:
    """``automem up`` with children: the parent on ``AUTOMEM_METRICS_PORT``, each child on a port
    of its own (the ``metrics_ports`` of the "automem is up" line), each page its process's."""
    import json

    lines = (data.parent / f"automem-{port}.log").read_text(errors="replace").splitlines()
    ups = [json.loads(line) for line in lines if '"automem is up"' in line and line.startswith("{")]
    # The parent's line alone: each child logged "automem is up" too (the gateway's with grpc_port 0).
    assert len(ups) == 1, ups
    up = ups[0]
    children = [json.loads(line) for line in lines if '"child process is up"' in line and line.startswith("{")]
    assert sorted(c["targets"][0] for c in children) == ["enrich", "gateway"], children
    # Each child names its own port by its target (the gateway's said "parent").
    assert all(list(c["metrics_ports"]) == ["+".join(c["targets"])] for c in children), children
    ports = up["metrics_ports"]
    assert ports["parent"] == metrics_port and set(ports) == {"parent", "gateway", "enrich"}
    assert len(set(ports.values())) == 3
    pages = {name: httpx.get(f"http://127.0.0.1:{p}/metrics", timeout=10).text for name, p in ports.items()}
    assert 'rpc_method="automem.v1.IngestService/CreateMemory"' in pages["parent"]  # ingest stayed
    assert 'http_route="/memory"' in pages["gateway"] and 'http_route="/memory"' not in pages["parent"]
    assert "automem_enrichment_processed_total" in pages["enrich"]
    assert "automem_enrichment_processed_total" not in pages["parent"]


def test_two_instances_run_side_by_side(tmp_path: Path) -> None:
    procs = []
    ports = [free_port(), free_port()]
    try:
        for i, port in enumerate(ports):
            data = tmp_path / f"data{i}"
            data.mkdir()
            procs.append(_start(data, port))
        for port, proc in zip(ports, procs, strict=True):
            _wait_healthy(port, proc)
        httpx.post(f"http://127.0.0.1:{ports[0]}/memory", json={"content": "only in the first"})
        assert httpx.get(f"http://127.0.0.1:{ports[0]}/health").json()["memory_count"] == 1
        assert httpx.get(f"http://127.0.0.1:{ports[1]}/health").json()["memory_count"] == 0
    finally:
        for proc in procs:
            _stop(proc)


def test_second_up_on_same_data_dir_fails_clearly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    first = _start(data, port)
    try:
        _wait_healthy(port, first)
        second = _start(data, free_port())
        assert second.wait(timeout=60) != 0
        log = (tmp_path / "automem-{}.log".format(second.args and "x")).parent
        text = "".join(p.read_text(errors="replace") for p in log.glob("automem-*.log"))
        assert "lock" in text.lower()
    finally:
        _stop(first)


def test_a_grpc_port_in_use_fails_the_start_naming_the_setting(tmp_path: Path) -> None:
    """grpcio binds with SO_REUSEPORT by default: a second service on a gRPC port in use used
    to start and share it, the kernel splitting callers between the two services. The holder
    here is a plain grpcio server (SO_REUSEPORT on, as another automem of an older version)."""
    import grpc

    holder = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    grpc_port = holder.add_insecure_port("127.0.0.1:0")
    holder.start()
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    try:
        proc = _start(data, port, {"AUTOMEM_GRPC_PORT": str(grpc_port), "AUTOMEM_METRICS_PORT": "0"})
        try:
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code != 200, \
                        "automem started on a gRPC port another server holds"
                time.sleep(0.3)
            code = proc.wait(timeout=5)
        finally:
            if proc.poll() is None:
                _stop(proc)
        text = (tmp_path / f"automem-{port}.log").read_text(errors="replace")
        assert code != 0, text[-2000:]
        assert "AUTOMEM_GRPC_PORT" in text and f"127.0.0.1:{grpc_port}" in text, text[-2000:]
        assert "Traceback" not in text, text[-2000:]
    finally:
        holder.stop(0)


@pytest.mark.parametrize("held", ["PORT", "AUTOMEM_METRICS_PORT", "FALKORDB_PORT", "AUTOMEM_NATS_PORT"])
def test_a_port_in_use_fails_the_start_naming_the_setting(tmp_path: Path, held: str) -> None:
    """The gateway child exits when its port is taken; the one line ``automem up`` ended with
    named no port ("the gateway process exited with code 3 before it was up"). A metrics port
    in use ended with a traceback; an embedded FalkorDB's or NATS's with the server's exit
    ("redis-server exited before it was ready"), naming neither the setting nor the address."""
    import socket

    data = tmp_path / "data"
    data.mkdir()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        port = taken if held == "PORT" else free_port()
        env = {"AUTOMEM_METRICS_PORT": "0"}
        if held != "PORT":
            env[held] = str(taken)
        proc = _start(data, port, env)
        try:
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                _stop(proc)
    text = (tmp_path / f"automem-{port}.log").read_text(errors="replace")
    assert code != 0
    last = [line for line in text.splitlines() if line.startswith("automem up:")]
    assert last and held in last[-1] and str(taken) in last[-1], text[-2000:]
    assert "Traceback" not in text, text[-2000:]


def test_the_embedded_servers_refuse_clients_without_the_credentials_and_keep_their_files_private(
        tmp_path: Path) -> None:
    """The embedded FalkorDB and NATS listen on loopback ports every user of the machine can
    reach: without credentials anyone could read or change every scope's memories there,
    past the service's keys. Each requires a random credential made for the start, given to
    the servers in 0600 files (never on a command line, which ``ps`` shows every user), and
    their directories are 0700, as the vector shard's; a backup file is 0600; the service and
    its children still work."""
    import nats
    import redis

    data = tmp_path / "data"
    data.mkdir()
    port, falkordb_port, nats_port = free_port(), free_port(), free_port()
    proc = _start(data, port, {"FALKORDB_PORT": str(falkordb_port), "AUTOMEM_NATS_PORT": str(nats_port),
                               "AUTOMEM_METRICS_PORT": "0", "FALKORDB_PASSWORD": "", "NATS_TOKEN": ""})
    try:
        _wait_healthy(port, proc)
        r = httpx.post(f"http://127.0.0.1:{port}/memory", json={"content": "The launch code is 1234"})
        assert r.status_code == 201, r.text
        _wait_vectors(port, 1)  # the enrich child reached NATS, FalkorDB and the shard

        client = redis.Redis(port=falkordb_port, socket_timeout=5)
        try:
            try:
                client.execute_command("GRAPH.QUERY", "memories", "MATCH (m:Memory) RETURN m.content")
                raise AssertionError("FalkorDB answered a client without the password")
            except redis.AuthenticationError:
                pass
        finally:
            client.close()

        async def nats_without_token() -> None:
            try:
                nc = await nats.connect(f"nats://127.0.0.1:{nats_port}", allow_reconnect=False,
                                        max_reconnect_attempts=0, connect_timeout=5)
            except Exception as exc:  # noqa: BLE001 - nats-py raises its own error types
                assert "authorization" in repr(exc).lower(), repr(exc)
                return
            await nc.close()
            raise AssertionError("NATS accepted a client without the token")

        asyncio.run(nats_without_token())

        secrets_seen = []
        for sub in ("falkordb", "nats"):
            directory = data / sub
            assert directory.stat().st_mode & 0o777 == 0o700, sub
            conf = directory / "auth.conf"
            assert conf.stat().st_mode & 0o777 == 0o600, sub
            secrets_seen.append(conf.read_text().split('"')[1])
        assert all(len(x) >= 32 for x in secrets_seen)
        for pid in _children(proc.pid):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            assert not any(x in cmdline for x in secrets_seen), cmdline
        # The vector shard's files hold every memory's content too; so does a backup.
        assert (data / "qdrant").stat().st_mode & 0o777 == 0o700
        out = tmp_path / "backup.jsonl"
        env = {**os.environ, "AUTOMEM_DATA_DIR": str(data)}
        done = subprocess.run([AUTOMEM, "backup", "--url", f"http://127.0.0.1:{port}", "--out", str(out)],
                              check=False, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "launch code" in out.read_text() and out.stat().st_mode & 0o777 == 0o600
    finally:
        _stop(proc)


@pytest.mark.parametrize("how", ["ctrl-c", "hangup", "sigterm-to-every-process"])
def test_a_stop_from_the_terminal_or_the_service_manager_stops_up_and_its_children_without_restarting_one(
        tmp_path: Path, how: str) -> None:
    """A terminal's Ctrl-C sends SIGINT to the whole foreground process group, a closed
    terminal SIGHUP; systemd stops a service with SIGTERM to every process of its cgroup at
    once. Children and servers have process groups of their own, so only the parent gets the
    terminal's signals and stops them in order (a child that got Ctrl-C exited under the
    supervisor, which started it again mid-shutdown; SIGHUP killed the parent without a
    shutdown); a SIGTERM that reaches them all at once is not taken for a crash either."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    log_path = tmp_path / f"automem-{port}.log"
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(data), "PORT": str(port), "AUTOMEM_GRPC_PORT": "0",
           "AUTOMEM_METRICS_PORT": "0"}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen([AUTOMEM, "up"], env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        _wait_healthy(port, proc)
        children = _wait_children(proc.pid, 4)
        assert all(os.getpgid(c) != proc.pid for c in children), "a child shares the terminal's process group"
        if how == "sigterm-to-every-process":
            everyone = [proc.pid, *children]
            for pid in everyone:
                os.kill(pid, signal.SIGTERM)
        else:  # what the terminal does
            os.killpg(proc.pid, signal.SIGINT if how == "ctrl-c" else signal.SIGHUP)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log_path.read_text(errors="replace")
    assert "restarting it" not in text, text[-3000:]
    assert not [c for c in children if pid_alive(c)]
    assert not (data / "automem.endpoints.json").exists()


@pytest.mark.parametrize(("name", "value", "says"), [
    ("FALKORDB_PASSWORD", "line one\nline two", "control characters"),
    ("NATS_TOKEN", "t" * 600, "at most 512 characters"),
])
def test_a_credential_that_cannot_work_is_refused_at_start_without_echoing_it(
        tmp_path: Path, name: str, value: str, says: str) -> None:
    """A newline in FALKORDB_PASSWORD failed redis-server's start without a reason; a
    20,000-character NATS_TOKEN left automem up looping on NATS's control-line limit. Both are
    refused as settings now, naming the variable and never printing the value."""
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(tmp_path / "data"), name: value}
    done = subprocess.run([AUTOMEM, "up"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert f"automem: setting {name}: " in done.stderr and says in done.stderr, done.stderr
    assert value[:20] not in done.stderr


@pytest.mark.parametrize("name", ["FALKORDB_PORT", "AUTOMEM_NATS_PORT", "PORT", "AUTOMEM_GRPC_PORT"])
def test_a_port_out_of_range_is_refused_as_a_setting(tmp_path: Path, name: str) -> None:
    """``FALKORDB_PORT=70000`` started the embedded NATS, then ended ``automem up`` with a
    logged OverflowError traceback from the port check."""
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(tmp_path / "data"), "AUTOMEM_METRICS_PORT": "0", name: "70000"}
    done = subprocess.run([AUTOMEM, "up"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert f"automem: setting {name}: " in done.stderr and "65535" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize(("name", "value", "variable", "says"), [
    ("AUTOMEM_DATA_DIR", "/proc/automem-no-such-dir", "AUTOMEM_DATA_DIR", "No such file or directory"),
    ("AUTOMEM_DATA_DIR", "/sys/kernel", "AUTOMEM_DATA_DIR", "Permission denied"),
    ("AUTOMEM_GRPC_TLS", "true", "AUTOMEM_GRPC_TLS_CERT_FILE", "required when AUTOMEM_GRPC_TLS is true"),
])
def test_a_data_dir_that_cannot_be_made_or_tls_without_a_cert_is_refused_before_anything_starts(
        tmp_path: Path, name: str, value: str, variable: str, says: str) -> None:
    """A data dir under /proc (FileNotFoundError) or /sys (PermissionError on automem.lock)
    ended ``automem up`` with a traceback naming no variable; AUTOMEM_GRPC_TLS without a
    certificate with a TlsSettingsError traceback once NATS and FalkorDB were up. The settings
    check refuses each with one line naming the variable, exit 2, before any server starts."""
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(tmp_path / "data"), "AUTOMEM_METRICS_PORT": "0",
           "PORT": str(free_port()), "AUTOMEM_GRPC_PORT": "0", "AUTOMEM_GRPC_TLS_CERT_FILE": "", name: value}
    done = subprocess.run([AUTOMEM, "up"], env=env, capture_output=True, text=True, timeout=60, check=False)
    said = done.stderr + done.stdout
    assert done.returncode == 2, said[-3000:]
    assert f"automem: setting {variable}: " in done.stderr and says in done.stderr, said[-3000:]
    assert "Traceback" not in said and "nats-server" not in said and "redis-server" not in said, said[-3000:]


@pytest.mark.parametrize("part", ["nats", "falkordb", "qdrant"])
def test_a_data_dir_whose_store_directory_cannot_be_made_fails_the_start_in_one_line(tmp_path: Path,
                                                                                      part: str) -> None:
    """A data dir that passes the settings check but in which a store's own directory cannot
    be made (here a file stands where it goes; a read-only or full volume does the same) ended
    ``automem up`` with a logged ``start failed`` traceback (FileExistsError from mkdir) and
    exit 1, printing nothing on stderr. Now one line naming AUTOMEM_DATA_DIR and the path, exit
    2 (bad configuration); the traceback only at --log-level DEBUG."""
    data = tmp_path / "data"
    data.mkdir()
    (data / part).write_text("not a directory\n")
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(data), "AUTOMEM_METRICS_PORT": "0", "PORT": str(free_port()),
           "AUTOMEM_GRPC_PORT": "0"}
    done = subprocess.run([AUTOMEM, "up"], env=env, capture_output=True, text=True, timeout=120, check=False)
    said = done.stderr + done.stdout
    assert done.returncode == 2, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("automem")]
    assert len(errors) == 1 and errors[0].startswith("automem: setting AUTOMEM_DATA_DIR: "), said[-3000:]
    assert str(data / part) in errors[0], errors
    debug = subprocess.run([AUTOMEM, "up", "--log-level", "DEBUG"], env=env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert debug.returncode == 2 and "Traceback" in debug.stderr + debug.stdout, debug.stderr[-3000:]


@pytest.mark.parametrize("server", ["qdrant", "falkordb-port", "falkordb-host", "nats"])
def test_a_server_that_cannot_be_reached_fails_the_start_in_one_line_naming_its_variable(
        tmp_path: Path, server: str) -> None:
    """QDRANT_URL on a port where nothing listens ended ``automem up`` with a 117-line
    traceback ending in ConnectError, QDRANT_URL never named; FALKORDB_HOST with nothing
    listening, or a host name that does not resolve, with a traceback naming the address but
    not the variable (NATS_URL: a "start failed" traceback). Each is now one line ``automem up: cannot reach X (VARIABLE=value):
    reason``, exit 1, and nothing it started is left running."""
    port = free_port()
    extra, says = {
        "qdrant": ({"QDRANT_URL": f"http://127.0.0.1:{port}"}, f"cannot reach Qdrant (QDRANT_URL=http://127.0.0.1:{port}): "),
        "falkordb-port": ({"FALKORDB_HOST": "127.0.0.1", "FALKORDB_PORT": str(port)},
                          f"cannot reach FalkorDB (FALKORDB_HOST=127.0.0.1, FALKORDB_PORT={port}): "),
        "falkordb-host": ({"FALKORDB_HOST": "bad host"}, "cannot reach FalkorDB (FALKORDB_HOST=bad host, FALKORDB_PORT="),
        "nats": ({"NATS_URL": f"nats://u:p@127.0.0.1:{port}", "AUTOMEM_STORE_TIMEOUT_S": "2"},
                 f"cannot reach NATS (NATS_URL=nats://127.0.0.1:{port}) within 2s: "),
    }[server]
    data = tmp_path / "data"
    env = {**os.environ, "AUTOMEM_DATA_DIR": str(data), "AUTOMEM_METRICS_PORT": "0", "PORT": str(free_port()),
           "AUTOMEM_GRPC_PORT": "0", "AUTOMEM_CHILD_TARGETS": "", **extra}
    done = subprocess.run([AUTOMEM, "up"], env=env, capture_output=True, text=True, timeout=120, check=False)
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"automem up: {says}") and len(last) > len(f"automem up: {says}"), said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    assert _started_from(data) == []


def _stopped_falkordb(tmp_path: Path):
    from automem.common.embedded import EmbeddedFalkorDB

    falkordb = EmbeddedFalkorDB(tmp_path / "external")
    asyncio.run(falkordb.start())
    os.kill(falkordb.pid, signal.SIGSTOP)
    return falkordb


def _resume(falkordb) -> None:
    os.kill(falkordb.pid, signal.SIGCONT)
    asyncio.run(falkordb.stop())


def _up_on(falkordb, tmp_path: Path, store_timeout: str) -> tuple[subprocess.Popen, Path]:
    """``automem up`` on the external ``falkordb`` (embedded NATS, no children); its log."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    proc = _start(data, port, {"FALKORDB_HOST": "127.0.0.1", "FALKORDB_PORT": str(falkordb.port),
                               "AUTOMEM_CHILD_TARGETS": "", "AUTOMEM_STORE_TIMEOUT_S": store_timeout})
    return proc, data.parent / f"automem-{port}.log"


def test_a_falkordb_that_does_not_answer_fails_the_start_within_the_store_bound(tmp_path: Path) -> None:
    falkordb = _stopped_falkordb(tmp_path)
    try:
        proc, log = _up_on(falkordb, tmp_path, "2")
        assert proc.wait(timeout=60) == 1
        assert "FalkorDB did not answer within 2s" in log.read_text(), log.read_text()[-2000:]
    finally:
        _resume(falkordb)


def test_sigterm_during_start_up_stops_what_started(tmp_path: Path) -> None:
    """A store that does not answer holds start-up (here an external FalkorDB stopped with
    SIGSTOP); SIGTERM then stops ``automem up`` and its embedded NATS promptly, exit code 0."""
    falkordb = _stopped_falkordb(tmp_path)
    try:
        proc, log = _up_on(falkordb, tmp_path, "120")
        deadline = time.monotonic() + 60
        while b'"component": "graph"' not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        nats = _children(proc.pid)
        assert len(nats) == 1  # the embedded nats-server; FalkorDB is the stopped external one
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()[-2000:]
        assert "stop requested during start-up" in log.read_text()
        deadline = time.monotonic() + 10
        while pid_alive(nats[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(nats[0])
    finally:
        _resume(falkordb)


def test_a_sigkilled_up_takes_its_children_and_servers_with_it(tmp_path: Path) -> None:
    """The gateway and enrich children set their parent-death signal themselves
    (automem/common/embedded.py ``die_with_parent``; no ``preexec_fn`` runs in the threaded
    parent), the servers through theirs: SIGKILL of ``automem up`` leaves no process behind."""
    _, _, proc, children = _up_with_children(tmp_path)
    try:
        assert sorted(filter(None, map(_target_of, children))) == ["enrich", "gateway"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 20
    while any(pid_alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in children if pid_alive(p)] == []


def test_a_child_dies_with_its_parent_even_while_it_would_stop_gracefully() -> None:
    """``die_with_parent`` asks for SIGKILL: a child busy with a graceful stop (here: one that
    ignores SIGTERM) outlived a SIGKILLed parent by 9–30 s with SIGTERM as the signal."""
    grandchild = (
        "import os, signal, sys, time\n"
        "from automem.common.embedded import die_with_parent\n"
        "die_with_parent(int(sys.argv[1]))\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n")
    parent = (
        "import os, subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}, str(os.getpid())])\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        child = int(proc.stdout.readline())
        assert pid_alive(child)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 20
    while pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child), "the child outlived its SIGKILLed parent"


def _started_from(data: Path) -> list[int]:
    """Pids of the processes whose command line names ``data`` (what ``automem up`` on that
    data dir started: its children and the embedded servers), the caller excluded."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [int(line.split(None, 1)[0]) for line in out.splitlines()
            if str(data) in line and int(line.split(None, 1)[0]) != os.getpid()]


def _interrupted_before_the_command(log: str) -> bool:
    """Whether ``log`` holds Python's own report of a SIGINT before the command's code ran: a
    KeyboardInterrupt raised while the interpreter imported ``site`` (the virtualenv's ``.pth``
    finders, the standard library) or while the ``automem`` script (pip's wrapper) imported
    automem/cli/entry.py. No code of this package can catch that one: its traceback holds no
    frame inside a function of this package (module bodies only)."""
    frames = [line.strip() for line in log.splitlines() if line.lstrip().startswith("File ")]
    ours = [f for f in frames if "/automem/" in f and not f.endswith("in <module>")]
    return "KeyboardInterrupt" in log and bool(frames) and not ours


def test_ctrl_c_while_automem_up_imports_exits_without_a_traceback(tmp_path: Path) -> None:
    """SIGINT at once after the start — while Python still imports the command (~0.5 s here),
    before its own signal handling — ends ``automem up`` with 130 and no traceback
    (automem/cli/entry.py); one that lands later stops it as usual (0). Either way nothing
    it started is left behind. A signal that lands before the interpreter installed its own
    handler ends it by the signal's default action (-SIGINT); one that lands while the
    interpreter itself starts (importing ``site``, ~10-30 ms, longer on a loaded machine) is
    reported by CPython with a traceback of its own start-up that names no file of this
    package (exit 1) — the script has not run yet, so nothing can have been started."""
    for attempt in range(1, 4):
        data = tmp_path / f"data{attempt}"
        data.mkdir()
        port = free_port()
        proc = _start(data, port)
        time.sleep(0.1 * attempt)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        log = (tmp_path / f"automem-{port}.log").read_text()
        if _interrupted_before_the_command(log):  # exit 1 from site, -SIGINT from the script
            assert code in (1, -signal.SIGINT), (code, log[-2000:])
        else:
            assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-2000:]
            assert code in (0, 130, -signal.SIGINT), (code, log[-2000:])
        deadline = time.monotonic() + 20
        while _started_from(data) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _started_from(data), f"left running after SIGINT: {_started_from(data)}"


def test_a_sigint_before_the_commands_code_is_told_apart_from_one_in_it() -> None:
    """The classification the test above relies on: CPython's start-up traceback (frames in
    ``<frozen ...>`` and the standard library) and one from the script's import of the entry
    module come before any handler of ours; one with a frame inside a function of this
    package does not."""
    start = ("Fatal Python error: init_import_site: Failed to import the site module\n"
             "Traceback (most recent call last):\n"
             '  File "<frozen site>", line 73, in <module>\n'
             '  File "<frozen os>", line 29, in <module>\nKeyboardInterrupt\n')
    script = ("Traceback (most recent call last):\n"
              '  File "/work/x/.venv/bin/automem", line 3, in <module>\n'
              '  File "/work/x/automem/cli/__init__.py", line 8, in <module>\nKeyboardInterrupt\n')
    ours = ("Traceback (most recent call last):\n"
            '  File "/work/x/.venv/bin/automem", line 6, in <module>\n'
            '  File "/work/x/automem/cli/entry.py", line 15, in main\n'
            '  File "/work/x/automem/cli/main.py", line 10, in <module>\nKeyboardInterrupt\n')
    assert _interrupted_before_the_command(start)
    assert _interrupted_before_the_command(script)
    assert not _interrupted_before_the_command(ours)
    assert not _interrupted_before_the_command("stopped\n")


def test_the_parent_port_answers_the_childrens_grpc_services(tmp_path: Path) -> None:
    """A gRPC client given the one address of ``automem up`` (the CLI's ``--grpc``, the SDK)
    got UNIMPLEMENTED for every EnrichService call: enrich runs in a child with a port of its
    own. The parent passes those calls on with the caller's key, deadline and the child's
    status and details (automem/common/grpc_server.py ``GrpcServer.forward``)."""
    import grpc

    from automem.v1 import enrich_service_pb2, enrich_service_pb2_grpc

    data = tmp_path / "data"
    data.mkdir()
    port, grpc_port = free_port(), free_port()
    proc = _start(data, port, {"AUTOMEM_GRPC_PORT": str(grpc_port), "AUTOMEM_API_TOKEN": "parent-port-token"})
    try:
        _wait_healthy(port, proc)
        assert sorted(filter(None, map(_target_of, _wait_children(proc.pid, 4)))) == ["enrich", "gateway"]
        r = httpx.post(f"http://127.0.0.1:{port}/memory", json={"content": "reprocess me"},
                       headers={"Authorization": "Bearer parent-port-token"})
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]

        async def calls() -> None:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                enrich = enrich_service_pb2_grpc.EnrichServiceStub(channel)
                key = (("authorization", "Bearer parent-port-token"),)
                deadline = time.monotonic() + 90
                while True:  # the enrich child serves once its models are loaded
                    try:
                        status = await enrich.GetEnrichmentStatus(enrich_service_pb2.GetEnrichmentStatusRequest(),
                                                                  timeout=10)
                        break
                    except grpc.aio.AioRpcError as exc:
                        assert exc.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline, exc
                        await asyncio.sleep(0.5)
                assert status.embedding_model
                done = await enrich.ReprocessMemories(enrich_service_pb2.ReprocessMemoriesRequest(ids=[mid]),
                                                      metadata=key, timeout=10)
                assert done.queued == 1
                with pytest.raises(grpc.aio.AioRpcError) as refused:  # no key: refused, as on the child
                    await enrich.ReprocessMemories(enrich_service_pb2.ReprocessMemoriesRequest(ids=[mid]), timeout=10)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
                with pytest.raises(grpc.aio.AioRpcError) as refused:  # the child's own refusal comes back
                    await enrich.ReembedMemories(enrich_service_pb2.ReembedMemoriesRequest(batch_size=-1),
                                                 metadata=key, timeout=10)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "batch_size" in refused.value.details()
        asyncio.run(calls())
    finally:
        _stop(proc)


def test_a_forwarded_call_to_a_child_that_does_not_answer_names_the_service_not_its_address(tmp_path: Path) -> None:
    """The parent passed on the channel's UNAVAILABLE of a child that does not answer (killed,
    not yet restarted) as it was: "failed to connect to all addresses; ... ipv4:127.0.0.1:4xxxx".
    Callers now read the service that is unavailable and no internal address
    (automem/common/grpc_server.py ``unavailable_details``)."""
    import grpc

    from automem.v1 import enrich_service_pb2, enrich_service_pb2_grpc

    data = tmp_path / "data"
    data.mkdir()
    port, grpc_port = free_port(), free_port()
    proc = _start(data, port, {"AUTOMEM_GRPC_PORT": str(grpc_port), "AUTOMEM_API_TOKEN": "forward-token"})
    try:
        _wait_healthy(port, proc)
        children = _wait_children(proc.pid, 4)
        [enrich_pid] = [pid for pid in children if _target_of(pid) == "enrich"]

        async def calls() -> list[str]:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                enrich = enrich_service_pb2_grpc.EnrichServiceStub(channel)
                request = enrich_service_pb2.GetEnrichmentStatusRequest()
                deadline = time.monotonic() + 90
                while True:  # the enrich child serves once its models are loaded
                    try:
                        await enrich.GetEnrichmentStatus(request, timeout=10)
                        break
                    except grpc.aio.AioRpcError as exc:
                        assert exc.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline, exc
                        await asyncio.sleep(0.5)
                os.kill(enrich_pid, signal.SIGKILL)
                seen: list[str] = []
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    try:
                        await enrich.GetEnrichmentStatus(request, timeout=10)
                    except grpc.aio.AioRpcError as exc:
                        if exc.code() == grpc.StatusCode.UNAVAILABLE:
                            seen.append(exc.details() or "")
                            if seen[-1].startswith("automem.v1.EnrichService: unavailable"):
                                return seen
                    await asyncio.sleep(0.1)
                return seen

        seen = asyncio.run(calls())
        assert seen, "no UNAVAILABLE while the enrich child was down"
        assert all("127.0.0.1" not in d and "ipv4:" not in d for d in seen), seen
        assert seen[-1].startswith("automem.v1.EnrichService: unavailable"), seen
    finally:
        _stop(proc)
