"""Shared fixtures: one real nats-server, one real FalkorDB and one running automem for the
whole session; a fresh scope per test.

* ``nats_server`` / ``falkordb_server`` (session): the embedded launchers on free ports in a
  session tmp dir, stopped at the end.
* ``settings`` (function): a :class:`Settings` pointing at them, with a tmp ``data_dir`` and a
  unique ``graph_name`` and ``stream_name`` per test, for tests that start a runner of their own.
* ``service`` (function): the session's one running service (every target, one process), seen
  through a scope of the test's own (:class:`ScopedService`). Scopes isolate tenants
  (automem/common/auth.py ``resolve_scope``): the open service's anonymous principal may use
  every scope, and every REST request and gRPC call of the test names its scope
  (``X-Automem-Scope`` / ``x-automem-scope``), so tests don't see each other's data.
* ``own_service`` (function): a whole service on a store of its own, for the tests that count
  or rewrite the whole store, mint API keys (which close the open service), or stop or replace
  parts of the running service.
"""

from __future__ import annotations

import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from google.protobuf import struct_pb2

REPO_ROOT = Path(__file__).resolve().parent.parent
# No metrics port unless a test asks for one: the default (9464) would be bound by every
# service a test starts, in this process and in the processes it spawns (which inherit it).
os.environ.setdefault("AUTOMEM_METRICS_PORT", "0")
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from automem.common.embedded import EmbeddedFalkorDB, EmbeddedNats
from automem.common.settings import Settings


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def nats_server(tmp_path_factory: pytest.TempPathFactory):
    """A running :class:`EmbeddedNats` (JetStream on) shared by the session."""
    server = EmbeddedNats(tmp_path_factory.mktemp("nats-session"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def falkordb_server(tmp_path_factory: pytest.TempPathFactory):
    """A running :class:`EmbeddedFalkorDB` shared by the session."""
    server = EmbeddedFalkorDB(tmp_path_factory.mktemp("falkordb-session"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def settings_for(nats: EmbeddedNats, falkordb: EmbeddedFalkorDB, data_dir: Path) -> Settings:
    """Settings on the session servers with a data dir and a unique graph, stream and subjects."""
    suffix = uuid.uuid4().hex[:12]
    return Settings(
        data_dir=data_dir,
        nats_url=nats.url,
        falkordb_host=falkordb.host,
        falkordb_port=falkordb.port,
        graph_name=f"test_{suffix}",
        stream_name=f"TEST_{suffix.upper()}",
        subject_prefix=f"test.{suffix}",
        # Every runner has its own stream on the session's one nats-server, and JetStream
        # reserves a stream's max_bytes against the server's storage: the 1 GiB default of a
        # single service's stream would run the session server out after a few dozen runners.
        event_retention_bytes=0,
    )


@pytest.fixture
def settings(nats_server: EmbeddedNats, falkordb_server: EmbeddedFalkorDB, tmp_path: Path) -> Settings:
    """Settings for one test: the session servers, a tmp data dir, unique graph and stream."""
    return settings_for(nats_server, falkordb_server, tmp_path / "data")


class RunningService:
    """A running automem (every target, one process): ``url`` is the gateway's base URL,
    ``grpc`` the gRPC address, ``ctx`` the runner's :class:`automem.runtime.Runtime` (stores,
    consumer). Requests carry no scope, so they act on the principal's default scope,
    ``scope`` ("default")."""

    scope = "default"

    def __init__(self, settings: Settings, runner: object, ctx: object) -> None:
        self.settings = settings
        self.runner = runner
        self.ctx = ctx
        self.url = f"http://127.0.0.1:{ctx.http_port}"
        self.grpc = f"127.0.0.1:{ctx.grpc_port}"

    def http(self, **headers: str):
        """An httpx.AsyncClient on the gateway."""
        import httpx

        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30)

    def client(self, **kwargs):
        """An :class:`AutomemClient` on the gRPC server (``kwargs`` as its constructor's)."""
        from automem.common.client import AutomemClient

        return AutomemClient.connect(self.grpc, **kwargs)


def _scope_interceptor(scope: str):
    """A grpc.aio client interceptor adding ``x-automem-scope: scope`` to every unary call
    that names no scope of its own."""
    import grpc

    class ScopeMetadata(grpc.aio.UnaryUnaryClientInterceptor):
        async def intercept_unary_unary(self, continuation, details, request):
            metadata = grpc.aio.Metadata(*(details.metadata or ()))
            if "x-automem-scope" not in metadata:
                metadata.add("x-automem-scope", scope)
            details = grpc.aio.ClientCallDetails(details.method, details.timeout, metadata, details.credentials,
                                                 details.wait_for_ready)
            return await continuation(details, request)

    return ScopeMetadata()


class ScopedService:
    """The session's shared :class:`RunningService` seen from one test: every REST request
    (``http``) and gRPC call (``client``) names the test's own ``scope`` unless the test
    names another. ``url``, ``grpc``, ``settings`` and ``ctx`` are the shared service's; a
    test does not stop it."""

    def __init__(self, shared: RunningService, scope: str) -> None:
        self.shared = shared
        self.scope = scope
        self.settings = shared.settings
        self.ctx = shared.ctx
        self.url = shared.url
        self.grpc = shared.grpc

    def http(self, **headers: str):
        """An httpx.AsyncClient on the gateway whose requests carry ``X-Automem-Scope``."""
        if not any(name.lower() == "x-automem-scope" for name in headers):
            headers["X-Automem-Scope"] = self.scope
        return self.shared.http(**headers)

    def client(self, **kwargs):
        """An :class:`AutomemClient` whose calls (typed helpers and the raw
        stubs: ingest, review, recall with WhoAmI, enrich, consolidate) carry the scope."""
        from automem.common.client import AutomemClient

        kwargs.setdefault("scope", self.scope)
        kwargs["interceptors"] = [*kwargs.get("interceptors", ()), _scope_interceptor(kwargs["scope"])]
        return AutomemClient.connect(self.grpc, **kwargs)


async def start_service(settings: Settings, targets: list[str] | None = None) -> RunningService:
    """Start the chosen targets (default all) in this process on free ports."""
    from automem.runner import Runner

    settings = settings.model_copy(update={"port": 0, "grpc_port": 0})
    runner = Runner(settings, targets or ["all"])
    ctx = await runner.start()
    return RunningService(settings, runner, ctx)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_service(nats_server: EmbeddedNats, falkordb_server: EmbeddedFalkorDB,
                         tmp_path_factory: pytest.TempPathFactory):
    """The one whole service of the session (its own graph and stream on the session servers)."""
    running = await start_service(settings_for(nats_server, falkordb_server,
                                                tmp_path_factory.mktemp("shared-service") / "data"))
    try:
        yield running
    finally:
        await running.runner.stop()


def fresh_scope() -> str:
    """A scope name no other test uses: ``t/<12 hex>``."""
    return f"t/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def service(shared_service: RunningService) -> ScopedService:
    """The shared service in a fresh scope of this test's own."""
    return ScopedService(shared_service, fresh_scope())


@pytest_asyncio.fixture(loop_scope="session")
async def own_service(settings: Settings):
    """A whole service of this test's own, on the session's NATS and FalkorDB."""
    running = await start_service(settings)
    try:
        yield running
    finally:
        await running.runner.stop()


async def eventually(check, timeout: float = 15.0, interval: float = 0.1):
    """Await ``check()`` until it returns a truthy value (returned) or ``timeout`` passes
    (AssertionError with the last value)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")


class OwnNats:
    """A running service on a nats-server of its own, which a test stops and starts again
    (same port and store): ``service``, :meth:`stop`, :meth:`start`."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path / "own-nats"
        self.nats = EmbeddedNats(self.dir)
        self.port: int | None = None
        self.service: RunningService | None = None

    async def stop(self) -> None:
        await self.nats.stop()

    async def start(self) -> None:
        self.nats = EmbeddedNats(self.dir, port=self.port)
        await self.nats.start()


@pytest_asyncio.fixture(loop_scope="session")
async def own_nats(settings: Settings, tmp_path: Path):
    """:class:`OwnNats`: the whole service on its own nats-server (the session's FalkorDB)."""
    holder = OwnNats(tmp_path)
    await holder.nats.start()
    holder.port = holder.nats.port
    try:
        holder.service = await start_service(settings.model_copy(update={"nats_url": holder.nats.url}))
        try:
            yield holder
        finally:
            await holder.service.runner.stop()
    finally:
        await holder.nats.stop()


async def stop_processes(processes, timeout: float = 20.0) -> None:
    """SIGTERM every ``asyncio.subprocess.Process`` still running, wait ``timeout`` seconds
    each, then SIGKILL what is left."""
    import asyncio

    for process in processes:
        if process.returncode is None:
            process.terminate()
    for process in processes:
        try:
            await asyncio.wait_for(process.wait(), timeout=timeout)
        except TimeoutError:
            process.kill()
            await process.wait()


class LogCapture(logging.Handler):
    """A logging handler keeping every record it is given (``records``), for tests that read
    what a logger wrote (the access lines)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def nested_object(levels: int) -> dict:
    """``{"k": {"k": ... {}}}``: ``levels`` objects deep (metadata depth checks)."""
    value: dict = {}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


def struct_of(value: dict) -> struct_pb2.Struct:
    """``value`` as a protobuf ``Struct`` (metadata sent as a Struct rather than JSON text)."""
    out = struct_pb2.Struct()
    out.update(value)
    return out


async def rest_store(http: Any, content: str, **fields: Any) -> str:
    """``POST /memory`` with ``content`` and ``fields``; the new memory's id (asserts 201)."""
    r = await http.post("/memory", json={"content": content, **fields})
    assert r.status_code == 201, r.text
    return r.json()["memory_id"]


async def rest_memory(http: Any, memory_id: str) -> dict:
    """``GET /memory/{id}``'s ``memory`` (asserts 200)."""
    r = await http.get(f"/memory/{memory_id}")
    assert r.status_code == 200, r.text
    return r.json()["memory"]


async def console_login(http: Any, key: str, scope: str = "") -> Any:
    """Log an httpx client into the console as a browser does: the login form (its CSRF
    cookie and token), then the form posted with ``key`` and ``scope``; the POST's answer."""
    import re

    form = await http.get("/console/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert form.status_code == 200 and token, form.text
    return await http.post("/console/login", data={"api_key": key, "scope": scope, "csrf_token": token[1]})
