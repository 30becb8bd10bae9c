"""The operator CLI and the keys admin API on the real service (issue 17 items 8 and 10).

* The keys admin API (AdminService, ``/v1/apiKeys``): create, list, revoke over gRPC and
  REST, the audit record, the scope rule, non-admins refused, bad input naming the field, a
  created key working and a revoked one refused.
* The ``automem`` command run as a user runs it (``python -m automem.cli`` in a subprocess)
  against a running service: keys, backup, restore into a fresh service, reindex, sync,
  ``--json``, one-line errors; discovery of ``automem up`` from its data dir, and the offline
  path on the stopped data dir.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest

from automem.common import backup
from automem.common.embedded import free_port
from automem.common.jsontext import json_lines
from automem.v1 import admin_service_pb2, ingest_service_pb2
from tests.conftest import eventually, settings_for, start_service

REPO = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "AUTOMEM_LOG_LEVEL": "WARNING", **extra}
    for name in ("AUTOMEM_API_TOKEN", "AUTOMEM_API_KEY", "AUTOMEM_GRPC_TARGET", "ADMIN_API_TOKEN"):
        if name not in extra:
            env.pop(name, None)
    return env


async def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str, str]:
    """Run ``python -m automem.cli args`` without blocking the loop (the service under test may
    run in this process); returns (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "automem.cli", *args, cwd=REPO, env=env or _env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode, out.decode(), err.decode()


def _one_line_error(code: int, err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith(f"automem {command}: "), err
    assert "Traceback" not in err
    return lines[0]


# --- the keys admin API ---------------------------------------------------------------------


async def test_keys_admin_api_over_grpc_and_rest(own_service) -> None:
    async with own_service.client() as anonymous:  # no key yet: the open service's admin
        made = await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="admin", scopes=["*"], display_name="root"))
    root = made.secret
    assert root.startswith(f"am_{made.api_key.id}_") and made.api_key.created_by == "anonymous"
    async with own_service.client(api_key=root) as admin:
        md = admin.metadata()
        acme = await admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="admin", scopes=["acme/*"]), metadata=md)
        assert acme.api_key.created_by == f"key:{made.api_key.id}" and acme.api_key.default_scope == "acme/default"
        # A run of '*' is one name (it gave acme/defaultdefault before).
        deep = await admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="reader", scopes=["zeta/**"]), metadata=md)
        assert deep.api_key.default_scope == "zeta/default"
        # Bad input names the field.
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(role="boss", scopes=["x"]),
                                           metadata=md)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "role" in bad.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(role="reader"), metadata=md)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "scopes" in bad.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(role="reader", scopes=["a b"]),
                                           metadata=md)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and bad.value.details().startswith("scopes: ")
        with pytest.raises(grpc.aio.AioRpcError) as bad:  # it was stored, and listed, twice
            await admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
                role="reader", scopes=["a/b", " a/b"]), metadata=md)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and bad.value.details().startswith(
            "scopes: 'a/b' given more than once"), bad.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
                role="reader", scopes=["acme/*"], default_scope="globex/app"), metadata=md)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "default_scope" in bad.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await admin.admin.RevokeApiKey(admin_service_pb2.RevokeApiKeyRequest(id="nosuchkey"), metadata=md)
        assert bad.value.code() == grpc.StatusCode.NOT_FOUND
    async with own_service.client(api_key=acme.secret) as acme_admin:
        md = acme_admin.metadata()
        # The scope rule: within the caller's own patterns only.
        with pytest.raises(grpc.aio.AioRpcError) as wider:
            await acme_admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
                role="reader", scopes=["globex/*"]), metadata=md)
        assert wider.value.code() == grpc.StatusCode.PERMISSION_DENIED and "scopes" in wider.value.details()
        writer = await acme_admin.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="writer", scopes=["acme/web"], display_name="agent"), metadata=md)
        listed = await acme_admin.admin.ListApiKeys(admin_service_pb2.ListApiKeysRequest(), metadata=md)
        assert {k.id for k in listed.api_keys} == {acme.api_key.id, writer.api_key.id}  # not root's '*'
    # The created key works; a non-admin is refused.
    async with own_service.http(Authorization=f"Bearer {writer.secret}") as http:
        r = await http.post("/memory", json={"content": "written with a minted key"})
        assert r.status_code == 201 and r.json()["scope"] == "acme/web"
        assert (await http.get("/v1/apiKeys")).status_code == 403
    async with own_service.client(api_key=writer.secret) as agent:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await agent.admin.ListApiKeys(admin_service_pb2.ListApiKeysRequest(), metadata=agent.metadata())
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # REST: create, list, revoke, audit.
    async with own_service.http(Authorization=f"Bearer {root}") as http:
        r = await http.post("/v1/apiKeys", json={"role": "reader", "scopes": ["acme/*"], "display_name": "ro"})
        assert r.status_code == 201, r.text
        reader = r.json()
        assert reader["secret"].startswith("am_") and reader["api_key"]["role"] == "reader"
        bad = await http.post("/v1/apiKeys", json={"role": "boss", "scopes": ["x"]})
        assert bad.status_code in (400, 422) and "role" in bad.text
        bad = await http.post("/v1/apiKeys", json={"role": "reader", "scopes": []})
        assert bad.status_code in (400, 422) and "scopes" in bad.text
        # A control character in the name forged or erased rows of `automem keys list`.
        for name in ("t\x1b[2K\r000000000000\tadmin", "ok\nffffffffffff\tadmin\t*", "tab\there",
                     "c1\x9b2K", "nel\x85row", "line\u2028sep", "bidi\u202eevil", "zero\u200bwidth"):
            bad = await http.post("/v1/apiKeys", json={"role": "reader", "scopes": ["acme/*"], "display_name": name})
            assert bad.status_code == 400 and bad.json()["error"].startswith("display_name: "), bad.text
        listed = (await http.get("/v1/apiKeys", params={"page_size": 2})).json()
        assert len(listed["api_keys"]) == 2 and listed["next_page_token"]
        assert reader["secret"] not in json.dumps(listed)
        r = await http.post(f"/v1/apiKeys/{writer.api_key.id}:revoke")
        assert r.status_code == 200 and r.json()["api_key"]["revoked"] is True
        assert r.json()["api_key"]["revoked_by"] == f"key:{made.api_key.id}"
        assert (await http.post("/v1/apiKeys/nosuchkey:revoke")).status_code == 404
        events = (await http.get("/v1/apiKeyEvents", params={"key_id": writer.api_key.id})).json()["events"]
        assert [(e["action"], e["actor"], e["role"], e["scopes"]) for e in events] == [
            ("revoke", f"key:{made.api_key.id}", "writer", ["acme/web"]),
            ("create", f"key:{acme.api_key.id}", "writer", ["acme/web"])]
    # The audit record never holds a secret.
    rows = await own_service.ctx.graph.ro_query("MATCH (e:ApiKeyEvent) RETURN properties(e)")
    assert len(rows) == 6 and writer.secret not in json.dumps(rows) and root not in json.dumps(rows)
    async with own_service.http(Authorization=f"Bearer {writer.secret}") as http:  # revoked: refused at once
        assert (await http.get("/recall")).status_code == 401


# --- the CLI against a running service -------------------------------------------------------


async def _store(url: str, key: str, contents: list[str], scope: str = "") -> list[str]:
    headers = {"Authorization": f"Bearer {key}", **({"X-Automem-Scope": scope} if scope else {})}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        ids = []
        for content in contents:
            r = await http.post("/memory", json={"content": content, "tags": ["ops"]})
            assert r.status_code == 201, r.text
            ids.append(r.json()["memory_id"])
        return ids


async def _vectors(running) -> int:
    return await running.ctx.vectors.count()


async def test_cli_online_keys_backup_sync_reindex_restore(own_service, nats_server, falkordb_server,
                                                           tmp_path: Path) -> None:
    grpc_at = ["--grpc", own_service.grpc]
    code, out, err = await _cli("keys", "create", "--role", "admin", "--scope", "*", "--json", *grpc_at)
    assert code == 0, err
    created = json.loads(out)
    root = created["secret"]
    assert created["api_key"]["role"] == "admin" and created["api_key"]["scopes"] == ["*"]
    env = _env(AUTOMEM_API_KEY=root)
    code, out, err = await _cli("keys", "create", "--role", "writer", "--scope", "ops/*", *grpc_at, env=env)
    assert code == 0 and out.strip().startswith("am_") and "shown once" in err, err
    writer = out.strip()
    code, out, err = await _cli("keys", "list", "--json", *grpc_at, env=env)
    assert code == 0, err
    listed = [json.loads(line) for line in out.splitlines()]
    assert {k["role"] for k in listed} == {"admin", "writer"} and writer not in out
    writer_id = writer.split("_")[1]
    ids = await _store(own_service.url, writer, [f"operator memory {i}" for i in range(4)])
    await eventually(lambda: _count_equals(own_service, 4), timeout=60)

    # sync (every scope) and reindex (one scope) online.
    code, out, err = await _cli("sync", "--json", *grpc_at, env=env)
    assert code == 0, err
    assert json.loads(out)["sync_status"] == "synced"
    code, out, err = await _cli("reindex", "--scope", "ops/default", "--json", *grpc_at, env=env)
    assert code == 0, err
    assert json.loads(out)["reindexed"] == 4

    # backup online, while the service runs.
    backup_file = tmp_path / "backup.jsonl"
    code, out, err = await _cli("backup", "--out", str(backup_file), "--json", *grpc_at, env=env)
    assert code == 0, err
    summary = json.loads(out)
    lines = json_lines(backup_file.read_text())
    assert summary["records"] == len(lines) and summary["events"] > 0
    assert sum(1 for line in lines if json.loads(line)["kind"] == "memory") == 4

    # restore online into a fresh running service (its own admin key stays), then --reindex.
    fresh = await start_service(settings_for(nats_server, falkordb_server, tmp_path / "fresh"))
    try:
        async with fresh.client() as anonymous:
            fresh_root = (await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
                role="admin", scopes=["*"]))).secret
        fresh_env = _env(AUTOMEM_API_KEY=fresh_root)
        code, out, err = await _cli("restore", str(backup_file), "--reindex", "--json", "--grpc", fresh.grpc,
                                    env=fresh_env, timeout=180)
        assert code == 0, err
        restored = json.loads(out)
        assert restored["live_memories"] == 4 and restored["sync"]["vector_count"] == 4
        async with fresh.http(Authorization=f"Bearer {writer}", **{"X-Automem-Scope": "ops/default"}) as http:
            r = await http.get(f"/memory/{ids[0]}")  # the backup's keys came along
            assert r.status_code == 200 and r.json()["memory"]["content"] == "operator memory 0"
            r = await http.get("/recall", params={"query": "operator memory", "limit": 10})
            assert {m["id"] for m in r.json()["results"]} >= set(ids)
        # Not empty any more: refused without --force, one line.
        code, out, err = await _cli("restore", str(backup_file), "--grpc", fresh.grpc, env=fresh_env)
        assert "not empty" in _one_line_error(code, err, "restore")
        code, out, err = await _cli("restore", str(backup_file), "--force", "--grpc", fresh.grpc, env=fresh_env)
        assert code == 0 and "restored" in out, err
        assert "reindex needed" in err
    finally:
        await fresh.runner.stop()

    # revoke online: the key stops working.
    code, out, err = await _cli("keys", "revoke", writer_id, *grpc_at, env=env)
    assert code == 0 and f"revoked {writer_id}" in out, err
    async with own_service.http(Authorization=f"Bearer {writer}") as http:
        assert (await http.get("/recall")).status_code == 401
    code, out, err = await _cli("keys", "events", "--key-id", writer_id, "--json", *grpc_at, env=env)
    assert [json.loads(line)["action"] for line in out.splitlines()] == ["revoke", "create"]


async def _count_equals(running, count: int) -> bool:
    return running.ctx.vectors is not None and await _vectors(running) == count


async def test_cli_acts_as_admin_with_the_service_token_and_the_admin_token(settings) -> None:
    """Break-it review: with ``AUTOMEM_API_TOKEN`` and ``ADMIN_API_TOKEN`` both set (the
    Kubernetes setup, docs/kubernetes.md) the token alone is a writer's, and the CLI had no
    way to send the admin token: ``automem keys list`` against the running service answered
    "needs 'admin'". ``--admin-token`` (default ``ADMIN_API_TOKEN``) sends it, over gRPC and
    REST."""
    running = await start_service(settings.model_copy(update={"api_token": "cli-tok", "admin_token": "cli-adm"}))
    try:
        grpc_at, url = ("--grpc", running.grpc), ("--url", running.url)
        code, _, err = await _cli("keys", "list", *grpc_at, env=_env(AUTOMEM_API_TOKEN="cli-tok"))
        assert code == 1 and "admin" in err, err
        for where in (grpc_at, url):
            code, out, err = await _cli("keys", "create", "--role", "reader", "--scope", "cli/*", "--json", *where,
                                        env=_env(AUTOMEM_API_TOKEN="cli-tok", ADMIN_API_TOKEN="cli-adm"))
            assert code == 0, err
            code, out, err = await _cli("keys", "list", "--admin-token", "cli-adm", *where,
                                        env=_env(AUTOMEM_API_TOKEN="cli-tok"))
            assert code == 0 and "cli/*" in out, err
        code, _, err = await _cli("keys", "list", "--admin-token", "wrong", *url, env=_env(AUTOMEM_API_TOKEN="cli-tok"))
        assert code == 1, err
    finally:
        await running.runner.stop()


async def test_cli_errors_are_one_line(own_service, tmp_path: Path) -> None:
    # An unreachable address.
    code, _, err = await _cli("keys", "list", "--grpc", f"127.0.0.1:{free_port()}")
    assert "cannot reach the service" in _one_line_error(code, err, "keys list")
    async with own_service.client() as anonymous:
        await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(role="admin", scopes=["*"]))
    grpc_at = ["--grpc", own_service.grpc]
    # A wrong key: yesterday's backup in the file stays as it was (it was emptied before).
    kept = tmp_path / "b.jsonl"
    kept.write_text('{"kind": "header"}\n')
    code, _, err = await _cli("backup", "--out", str(kept), *grpc_at, "--api-key", "am_x_wrong")
    assert "refused the API key" in _one_line_error(code, err, "backup")
    assert kept.read_text() == "{\"kind\": \"header\"}\n" and not [p for p in tmp_path.iterdir() if p.name.startswith(".b.jsonl.")]
    # A bad file.
    code, _, err = await _cli("restore", str(tmp_path / "missing.jsonl"), *grpc_at, "--api-key", "am_x_wrong")
    assert "no such file" in _one_line_error(code, err, "restore")
    not_backup = tmp_path / "notes.txt"
    not_backup.write_text("hello\n")
    code, _, err = await _cli("restore", str(not_backup), *grpc_at, "--api-key", "am_x_wrong")
    _one_line_error(code, err, "restore")
    # A bad argument is argparse's (exit 2, usage).
    code, _, err = await _cli("keys", "create", "--role", "boss", "--scope", "x", *grpc_at)
    assert code == 2 and "role" in err


async def test_restore_rpc_refuses_what_is_not_a_backup(own_service) -> None:
    async def chunks(data: bytes):
        yield admin_service_pb2.RestoreBackupRequest(data=data)

    async with own_service.client() as anonymous:
        # A byte-order mark is read past as `automem import` does (it was "not JSON"); a gzip file
        # is named as one (it was "not UTF-8 text").
        for data, word in ((b"not json\n", "line 1"), (b'{"kind": "memory"}\n', "header"), (b"\xff\xfe", "UTF-8"),
                           (b'\xef\xbb\xbf{"kind": "memory"}\n', "no backup header"),
                           (gzip.compress(b'{"kind": "header"}\n'), "gzip")):
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                await anonymous.admin.RestoreBackup(chunks(data))
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and word in bad.value.details()
        # The export it would restore is the one ExportBackup streams.
        lines = [m.json_line async for m in anonymous.ingest.ExportBackup(ingest_service_pb2.ExportBackupRequest())]
        assert json.loads(lines[0])["counts"]["nodes"] == len(lines) - 2 - sum('"edge"' in x for x in lines)
        assert json.loads(lines[-1])["kind"] == "end"
        # A known_at no datetime holds was ignored: the whole export came back (break-it review).
        from google.protobuf import timestamp_pb2

        for seconds in (10**13, -(10**13)):
            with pytest.raises(grpc.aio.AioRpcError) as bad:
                async for _ in anonymous.ingest.ExportBackup(ingest_service_pb2.ExportBackupRequest(
                        known_at=timestamp_pb2.Timestamp(seconds=seconds))):
                    pass
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and bad.value.details().startswith("known_at:")


async def test_restore_with_force_refuses_a_cut_short_or_unrestorable_file_before_changing_anything(
        own_service) -> None:
    """A file cut at a line boundary (a backup interrupted, a copy truncated) or holding a
    record the graph cannot take used to restore "successfully" (or fail half-way) after
    ``force`` had emptied the graph: each is INVALID_ARGUMENT and the service keeps its data."""
    async def chunks(data: bytes, force: bool = True):
        yield admin_service_pb2.RestoreBackupRequest(data=data, force=force)

    async with own_service.http() as http:
        stored = (await http.post("/memory", json={"content": "kept across refused restores"})).json()["memory_id"]
    async with own_service.client() as anonymous:
        lines = [m.json_line async for m in anonymous.ingest.ExportBackup(ingest_service_pb2.ExportBackupRequest())]
        records = [json.loads(line) for line in lines]
        assert records[-1]["kind"] == "end" and records[0]["end"] == "end"
        node = next(i for i, r in enumerate(records) if r["kind"] == "memory")
        header = json.dumps(records[0])

        def without(index: int) -> list[str]:
            return lines[:index] + lines[index + 1:]

        bad = {
            "cut short": lines[:-1],
            "a node missing": without(node),
            "edge to nothing": [header, json.dumps({"kind": "edge", "source": 0, "target": 99, "type": "RELATES_TO",
                                                    "properties": {}})],
            "map property": [header, json.dumps({"kind": "node", "ref": 0, "labels": ["X"],
                                                 "properties": {"a": {"b": 1}}})],
            "huge integer": [header, json.dumps({"kind": "node", "ref": 0, "labels": ["X"],
                                                 "properties": {"a": 2**70}})],
            "unsafe label": [header, json.dumps({"kind": "node", "ref": 0, "labels": ["X`) DELETE n //"],
                                                 "properties": {}})],
            "ref twice": [header] + [json.dumps({"kind": "node", "ref": 0, "labels": ["X"], "properties": {}})] * 2,
            "bad event": [header, json.dumps({"kind": "event", "data": "!!not base64"})],
        }
        for name, body in bad.items():
            if name not in ("cut short", "a node missing"):
                body = [*body, json.dumps({"kind": "end", "nodes": sum('"ref"' in x for x in body[1:]),
                                           "edges": sum('"edge"' in x for x in body), "events":
                                           sum('"event"' in x for x in body)})]
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await anonymous.admin.RestoreBackup(chunks("\n".join(body).encode()))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, refused.value.details())
        async with own_service.http() as http:
            assert (await http.get(f"/memory/{stored}")).status_code == 200
        # The whole file still restores.
        done = await anonymous.admin.RestoreBackup(chunks("\n".join(lines).encode()))
        assert done.live_memories == 1
    async with own_service.http() as http:
        assert (await http.get(f"/memory/{stored}")).status_code == 200


# --- discovery from the data dir, and offline on the stopped data dir --------------------------


def _wait_endpoints(data: Path, proc: subprocess.Popen, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    path = data / "automem.endpoints.json"
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"automem up exited with {proc.returncode}"
        if path.exists():
            return json.loads(path.read_text())
        time.sleep(0.3)
    raise AssertionError("automem up wrote no endpoints file")


def _start_up(env: dict[str, str], log_path: Path) -> tuple[subprocess.Popen, object]:
    """``automem up`` as a user starts it, its output into ``log_path`` (closed by the caller)."""
    log = open(log_path, "ab")  # noqa: SIM115 - closed by the caller
    return subprocess.Popen([sys.executable, "-m", "automem.cli", "up"], env=env, cwd=REPO, stdout=log,
                            stderr=log), log


async def test_cli_finds_automem_up_in_the_data_dir_and_works_offline_once_it_stops(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = _env(AUTOMEM_DATA_DIR=str(data))
    # Vectors off, so consolidate may leave the process too: the CLI must find it in its child.
    proc, log = _start_up({**env, "PORT": str(free_port()), "AUTOMEM_GRPC_PORT": "0", "QDRANT_URL": "disabled",
                           "AUTOMEM_CHILD_TARGETS": "gateway,consolidate"}, tmp_path / "up.log")
    try:
        found = await asyncio.to_thread(_wait_endpoints, data, proc)
        assert found["pid"] == proc.pid and found["grpc"] and found["http"].startswith("http://")
        assert found["targets"]["consolidate"] not in ("", found["grpc"])
        # No address given: the CLI reads it from the data dir (the data dir is locked by `up`).
        code, out, err = await _cli("keys", "create", "--role", "admin", "--scope", "*", "--name", "ops", env=env)
        assert code == 0, err
        root = out.strip()
        code, out, err = await _cli("backup", "--out", str(tmp_path / "b.jsonl"), "--json",
                                    env={**env, "AUTOMEM_API_KEY": root})
        assert code == 0 and json.loads(out)["records"] >= 3, err
        code, out, err = await _cli("keys", "list", env={**env, "AUTOMEM_API_KEY": root})
        assert code == 0 and "\tadmin\t*\t" in out, err
        code, out, err = await _cli("sync", "--json", env={**env, "AUTOMEM_API_KEY": root})
        assert code == 0 and json.loads(out)["sync_status"] == "vectors_disabled", err
        # The data dir is in use: --offline, and a second `automem up`, say so in one line.
        code, _, err = await _cli("keys", "list", "--offline", env=env)
        assert "in use" in _one_line_error(code, err, "keys list")
        code, _, err = await _cli("up", env={**env, "PORT": str(free_port()), "AUTOMEM_GRPC_PORT": "0"})
        assert "in use" in _one_line_error(code, err, "up")
        assert json.loads((data / "automem.endpoints.json").read_text())["pid"] == proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 60)
        log.close()
    assert proc.returncode == 0
    assert not (data / "automem.endpoints.json").exists()
    # Stopped: the same command works offline on the data dir (its own embedded servers).
    code, out, err = await _cli("keys", "list", "--json", env=env, timeout=180)
    assert code == 0, err
    keys = [json.loads(line) for line in out.splitlines()]
    assert [(k["role"], k["display_name"], k["revoked"]) for k in keys] == [("admin", "ops", False)]


# --- progress on a terminal ------------------------------------------------------------------


def _on_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``python -m automem.cli args`` with stderr on a pseudo-terminal; returns (exit code,
    what it wrote there)."""
    import pty

    master, slave = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "automem.cli", *args], cwd=REPO, env=env,
                                   stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other end closed
                break
            if not data:
                break
            chunks.append(data)
        return process.wait(60), b"".join(chunks).decode(errors="replace")
    finally:
        os.close(master)


async def test_progress_bar_on_a_terminal_and_quiet_in_a_pipe(own_service, tmp_path: Path) -> None:
    async with own_service.client() as anonymous:
        root = (await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="admin", scopes=["*"]))).secret
    await _store(own_service.url, root, [f"progress memory {i}" for i in range(3)])
    args = ["backup", "--out", str(tmp_path / "b.jsonl"), "--grpc", own_service.grpc]
    env = _env(AUTOMEM_API_KEY=root, COLUMNS="120")
    code, shown = await asyncio.to_thread(_on_terminal, args, env)
    assert code == 0, shown
    assert "backup" in shown and "records/s" in shown and "ETA" in shown and "100%" in shown, shown
    code, _, err = await _cli(*args, env=env)  # not a terminal: no bar, just the summary line
    assert code == 0 and "ETA" not in err and err.strip().startswith("# "), err


# --- the same commands through the REST gateway (--url) ----------------------------------------


async def test_cli_over_rest_with_url(own_service, nats_server, falkordb_server, tmp_path: Path) -> None:
    url = ["--url", own_service.url]
    code, out, err = await _cli("keys", "create", "--role", "admin", "--scope", "*", "--json", *url)
    assert code == 0, err
    root = json.loads(out)["secret"]
    env = _env(AUTOMEM_API_KEY=root)
    code, out, err = await _cli("keys", "create", "--role", "writer", "--scope", "rest/*", *url, env=env)
    assert code == 0 and out.strip().startswith("am_"), err
    writer = out.strip()
    await _store(own_service.url, writer, [f"rest memory {i}" for i in range(3)])
    await eventually(lambda: _count_equals(own_service, 3), timeout=60)
    code, out, err = await _cli("keys", "list", "--json", *url, env=env)
    assert code == 0 and {json.loads(line)["role"] for line in out.splitlines()} == {"admin", "writer"}, err
    code, out, err = await _cli("sync", "--json", *url, env=env)
    assert code == 0 and json.loads(out)["sync_status"] == "synced", err
    code, out, err = await _cli("reindex", "--scope", "rest/default", "--json", *url, env=env)
    assert code == 0 and json.loads(out)["reindexed"] == 3, err
    backup_file = tmp_path / "rest.jsonl"
    code, out, err = await _cli("backup", "--out", str(backup_file), "--json", *url, env=env)
    assert code == 0 and json.loads(out)["records"] == len(json_lines(backup_file.read_text())), err
    fresh = await start_service(settings_for(nats_server, falkordb_server, tmp_path / "fresh"))
    try:
        async with fresh.client() as anonymous:
            fresh_root = (await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
                role="admin", scopes=["*"]))).secret
        code, out, err = await _cli("restore", str(backup_file), "--reindex", "--json", "--url", fresh.url,
                                    env=_env(AUTOMEM_API_KEY=fresh_root), timeout=180)
        assert code == 0, err
        restored = json.loads(out)
        assert restored["live_memories"] == 3 and restored["sync"]["vector_count"] == 3
    finally:
        await fresh.runner.stop()
    writer_id = writer.split("_")[1]
    code, out, err = await _cli("keys", "revoke", writer_id, *url, env=env)
    assert code == 0 and f"revoked {writer_id}" in out, err
    # One-line errors over REST too: a non-admin, a wrong key, nothing listening.
    code, _, err = await _cli("keys", "list", *url, env=_env(AUTOMEM_API_KEY="am_x_wrong"))
    assert "refused the API key" in _one_line_error(code, err, "keys list")
    code, _, err = await _cli("backup", "--out", str(tmp_path / "x.jsonl"), "--url",
                              f"http://127.0.0.1:{free_port()}", env=env)
    assert "cannot reach the service" in _one_line_error(code, err, "backup")


async def test_cli_over_rest_lists_as_over_grpc_and_names_another_server_in_one_line(own_service,
                                                                                   tmp_path: Path) -> None:
    """``--url`` printed keys as Python reprs (``['*']``, ``False``), and a server that is not
    the gateway gave a JSON parser's message, a bare ``'events'`` or its whole HTML error
    page over many lines; ``automem keys list | true`` ended in a "Broken pipe" error."""
    url = ["--url", own_service.url]
    code, out, err = await _cli("keys", "create", "--role", "admin", "--scope", "*", "--name", "ops", *url)
    assert code == 0, err
    env = _env(AUTOMEM_API_KEY=out.strip())
    over_rest = (await _cli("keys", "list", *url, env=env))[1]
    over_grpc = (await _cli("keys", "list", "--grpc", own_service.grpc, env=env))[1]
    assert over_rest == over_grpc and "\tadmin\t*\t" in over_rest and "\tactive\tops" in over_rest
    events = (await _cli("keys", "events", *url, env=env))[1].split("\t")
    assert events[1:4] == ["create", out.strip().split("_")[1], "anonymous"]

    # Another HTTP server: a static file for GET, HTML error pages (501, 404) for the rest.
    site = tmp_path / "site"
    (site / "v1").mkdir(parents=True)
    (site / "v1" / "apiKeys").write_text("<html>not automem</html>")
    (site / "v1" / "apiKeyEvents").write_text('{"other": 1}')
    port = free_port()
    other = await asyncio.create_subprocess_exec(sys.executable, "-m", "http.server", str(port), "--bind",
                                                 "127.0.0.1", cwd=site, stdout=asyncio.subprocess.DEVNULL,
                                                 stderr=asyncio.subprocess.DEVNULL)
    try:
        await eventually(lambda: asyncio.to_thread(_listening, port))
        there = ["--url", f"http://127.0.0.1:{port}"]
        for args, command in ((("keys", "list"), "keys list"), (("keys", "events"), "keys events"),
                              (("keys", "create", "--role", "reader", "--scope", "x"), "keys create"),
                              (("sync",), "sync"), (("backup", "--out", str(tmp_path / "b.jsonl")), "backup")):
            code, _, err = await _cli(*args, *there, env=env)
            assert "is --url the automem gateway?" in _one_line_error(code, err, command), err
    finally:
        other.terminate()
        await other.wait()
    assert not (tmp_path / "b.jsonl").exists()

    # The reader of stdout leaves early: no error.
    for way in (url, ["--grpc", own_service.grpc]):
        shell = await asyncio.to_thread(  # the service under test runs in this loop
            subprocess.run, f"{sys.executable} -m automem.cli keys list {' '.join(way)} | true", shell=True,
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert "Broken pipe" not in shell.stderr and "Traceback" not in shell.stderr, shell.stderr


async def test_json_output_is_the_same_over_grpc_and_rest(own_service, tmp_path: Path) -> None:
    """``--json`` printed one shape over ``--grpc`` and another over ``--url`` for the same
    command: a key's ``create_time`` (microseconds, ``Z``) against ``created_at``, ``""``
    against null, no ``revoked_at``; an audit record's ``event_time`` against ``at``; sync's
    ``status`` a GetSyncStatus object against ``"success"``; restore without ``status``;
    reindex the job's scope against the one asked for. Both print the REST routes' shape now."""
    grpc_at, url = ["--grpc", own_service.grpc], ["--url", own_service.url]

    async def both(*args: str, env: dict[str, str] | None = None) -> tuple[list[dict], list[dict]]:
        outputs = []
        for where in (grpc_at, url):
            code, out, err = await _cli(*args, "--json", *where, env=env)
            assert code == 0, (where, err)
            outputs.append([json.loads(line) for line in out.splitlines()])
        return outputs[0], outputs[1]

    def made(output: list[dict]) -> dict:
        """A created or revoked key's answer without what differs between two keys."""
        [one] = output
        key = one.get("api_key", one)
        key = {**key, "id": "k", "created_at": "t", "revoked_at": key.get("revoked_at") and "t"}
        return {**one, "secret": "s", "api_key": key} if "api_key" in one else key

    code, out, err = await _cli("keys", "create", "--role", "admin", "--scope", "*", *grpc_at)
    assert code == 0, err
    env = _env(AUTOMEM_API_KEY=out.strip())
    over_grpc, over_rest = await both("keys", "create", "--role", "writer", "--scope", "shape/*", "--name", "shape",
                                      env=env)
    assert made(over_grpc) == made(over_rest) and over_rest[0]["status"] == "success"
    await _store(own_service.url, over_grpc[0]["secret"], [f"shape memory {i}" for i in range(2)])
    await eventually(lambda: _count_equals(own_service, 2), timeout=60)
    ids = [o[0]["api_key"]["id"] for o in (over_grpc, over_rest)]
    revoked = [await _cli("keys", "revoke", key_id, "--json", *where, env=env) for key_id, where in
               zip(ids, (grpc_at, url), strict=True)]
    assert all(code == 0 for code, _, _ in revoked), revoked
    assert made([json.loads(revoked[0][1])]) == made([json.loads(revoked[1][1])])
    assert json.loads(revoked[0][1])["revoked_at"] is not None and json.loads(revoked[0][1])["revoked"] is True
    for command in (("keys", "list"), ("keys", "events"), ("sync",), ("sync", "--repair", "--wait")):
        over_grpc, over_rest = await both(*command, env=env)
        assert over_grpc == over_rest, command
    assert over_rest[0]["sync"] == {"vector_count": 2, "memory_count": 2}
    over_grpc, over_rest = await both("reindex", "--scope", "shape/default", env=env)
    assert [{**o, "job_id": ""} for o in over_grpc] == [{**o, "job_id": ""} for o in over_rest]
    assert over_rest[0]["reindexed"] == 2
    backup_file = tmp_path / "shape.jsonl"
    over_grpc, over_rest = await both("backup", "--out", str(backup_file), env=env)
    assert over_grpc == over_rest
    over_grpc, over_rest = await both("restore", str(backup_file), "--force", env=env)
    assert over_grpc == over_rest and over_rest[0]["live_memories"] == 2 and over_rest[0]["status"] == "success"


async def test_a_restore_killed_half_way_is_named_until_one_with_force_finishes(own_service) -> None:
    """A restore killed half-way (``kill -9`` of ``automem up``) left a partial graph that a
    restarted service served as healthy and a later restore without force did not name; the
    RestoreInProgress node such a restore leaves (made here as the killed one made it, before
    its first write) is now reported and cleared only by a finished restore."""
    async def chunks(data: bytes, force: bool):
        yield admin_service_pb2.RestoreBackupRequest(data=data, force=force)

    graph = own_service.ctx.graph
    async with own_service.client() as anonymous:
        lines = [m.json_line async for m in anonymous.ingest.ExportBackup(ingest_service_pb2.ExportBackupRequest())]
        assert await backup.interrupted_restore(graph) is None
        await graph.dump.mark_restore(time.time())  # what a restore killed after its wipe leaves
        assert "did not finish" in await backup.interrupted_restore(graph)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await anonymous.admin.RestoreBackup(chunks("\n".join(lines).encode(), force=False))
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "did not finish" in refused.value.details() and "force" in refused.value.details()
        await anonymous.admin.RestoreBackup(chunks("\n".join(lines).encode(), force=True))
    assert await backup.interrupted_restore(graph) is None


async def test_export_refused_to_a_key_prints_nothing_and_says_it_as_every_command(own_service,
                                                                                  tmp_path: Path) -> None:
    """``automem export`` with an admin key limited to ``acme/*`` (or a reader) wrote the
    native header to stdout before the refusal, and said ``PERMISSION_DENIED: ...`` where the
    other operator commands say ``permission denied: ...``."""
    grpc_at = ["--grpc", own_service.grpc]
    code, out, err = await _cli("keys", "create", "--role", "admin", "--scope", "*", *grpc_at)
    assert code == 0, err
    root = _env(AUTOMEM_API_KEY=out.strip())
    for role in ("admin", "reader"):
        code, out, err = await _cli("keys", "create", "--role", role, "--scope", "acme/*", *grpc_at, env=root)
        assert code == 0, err
        code, out, err = await _cli("export", "--scope", "acme/web", *grpc_at, env=_env(AUTOMEM_API_KEY=out.strip()))
        assert _one_line_error(code, err, "export").startswith("automem export: permission denied: "), err
        assert out == ""
    # A file that cannot be written is named as given (not as the temporary file beside it).
    missing = tmp_path / "missing" / "x.jsonl"
    code, _, err = await _cli("export", "--out", str(missing), *grpc_at, env=root)
    assert _one_line_error(code, err, "export").endswith(f"No such file or directory: {missing}"), err


async def test_rest_restore_takes_a_backup_larger_than_the_body_limit(settings, tmp_path: Path) -> None:
    """``POST /v1/backup:restore`` (``automem restore --url``) answered 413 for any backup over
    AUTOMEM_MAX_BODY_BYTES (4 MiB by default): the route streams the file on, unlimited."""
    running = await start_service(settings.model_copy(update={"max_body_bytes": 2048}))
    try:
        async with running.http() as http:
            for i in range(8):
                assert (await http.post("/memory", json={"content": f"body limit memory {i} " + "x" * 300})
                        ).status_code in (200, 201)
            body = (await http.get("/backup")).content
            assert len(body) > 2048
            assert (await http.post("/memory", json={"content": "y" * 3000})).status_code == 413  # still limited
        path = tmp_path / "big.jsonl"
        path.write_bytes(body)
        code, out, err = await _cli("restore", str(path), "--force", "--json", "--url", running.url)
        assert code == 0 and json.loads(out)["live_memories"] == 8, err
    finally:
        await running.runner.stop()


def _listening(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/", timeout=2).status_code > 0
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("way", ["--grpc", "--url"])
async def test_restore_reindex_into_an_open_service_prints_the_restore_then_says_the_reindex_needs_a_key(
        own_service, nats_server, falkordb_server, tmp_path: Path, way: str) -> None:
    """``automem restore --reindex --json`` into a service without keys: the restore brings
    the backup's keys (the service is closed from then on), so the reindex step is refused.
    The CLI printed only the key error, never the restore's result: it must print the result
    first, then say the restore succeeded and the reindex needs an admin key of the backup's."""
    async with own_service.client() as anonymous:
        root = (await anonymous.admin.CreateApiKey(admin_service_pb2.CreateApiKeyRequest(
            role="admin", scopes=["*"]))).secret
    await _store(own_service.url, root, ["open restore memory"])
    backup_file = tmp_path / "keys.jsonl"
    backup_file.write_text("\n".join([line async for line in backup.export_lines(
        own_service.ctx.graph, own_service.ctx.bus)]) + "\n", encoding="utf-8")
    fresh = await start_service(settings_for(nats_server, falkordb_server, tmp_path / "open"))
    try:
        target = fresh.grpc if way == "--grpc" else fresh.url
        code, out, err = await _cli("restore", str(backup_file), "--reindex", "--json", way, target, timeout=180)
        line = _one_line_error(code, err, "restore")
        assert "the restore succeeded" in line and "admin key of the restored keys" in line
        restored = json.loads(out)
        assert restored["live_memories"] == 1 and restored["nodes"] > 1
    finally:
        await fresh.runner.stop()


async def test_backup_counts_event_records_not_nodes_whose_kind_is_event(own_service, tmp_path: Path) -> None:
    """``automem backup`` counted lines holding ``"kind": "event"``: an Entity whose kind is
    "event" counted as an event ("events: 1" with --no-events)."""
    async with own_service.http() as http:
        assert (await http.post("/memory", json={"content": "the launch event is on Friday"})).status_code == 201
    await own_service.ctx.graph.query("CREATE (:Entity {key: 'launch', kind: 'event', name: 'launch'})")
    for way, target in (("--grpc", own_service.grpc), ("--url", own_service.url)):
        for extra in (["--no-events"], []):
            out_file = tmp_path / f"b{len(extra)}{way[2:]}.jsonl"
            code, out, err = await _cli("backup", "--out", str(out_file), "--json", *extra, way, target)
            assert code == 0, err
            records = [json.loads(line) for line in json_lines(out_file.read_text())]
            assert any(r.get("properties", {}).get("kind") == "event" for r in records)
            assert json.loads(out)["events"] == sum(1 for r in records if r["kind"] == "event") == records[-1]["events"]
            if extra:
                assert json.loads(out)["events"] == 0
