"""Shared fixtures: one real nats-server and one real FalkorDB for the whole session.

* ``nats_server`` / ``falkordb_server`` (session): the embedded launchers on free ports in a
  session tmp dir, stopped at the end.
* ``settings`` (function): a :class:`Settings` pointing at them, with a tmp ``data_dir`` and a
  unique ``graph_name`` and ``stream_name`` per test, so tests don't see each other's data.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

REPO_ROOT = Path(__file__).resolve().parent.parent
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


@pytest.fixture
def settings(nats_server: EmbeddedNats, falkordb_server: EmbeddedFalkorDB, tmp_path: Path) -> Settings:
    """Settings for one test: the session servers, a tmp data dir, unique graph and stream."""
    suffix = uuid.uuid4().hex[:12]
    return Settings(
        data_dir=tmp_path / "data",
        nats_url=nats_server.url,
        falkordb_host=falkordb_server.host,
        falkordb_port=falkordb_server.port,
        graph_name=f"test_{suffix}",
        stream_name=f"TEST_{suffix.upper()}",
        subject_prefix=f"test.{suffix}",
        # Every test has its own stream on the session's one nats-server, and JetStream reserves
        # a stream's max_bytes against the server's storage: the 1 GiB default of a single
        # service's stream would run the session server out after a few dozen tests.
        event_retention_bytes=0,
    )


class RunningService:
    """A running automem (every target, one process) for a test: ``url`` is the gateway's
    base URL, ``grpc`` the gRPC address, ``ctx`` the runner context (stores, consumer)."""

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


async def start_service(settings: Settings, targets: list[str] | None = None) -> RunningService:
    """Start the chosen targets (default all) in this process on free ports."""
    from automem.runner import Runner

    settings = settings.model_copy(update={"port": 0, "grpc_port": 0})
    runner = Runner(settings, targets or ["all"])
    ctx = await runner.start()
    return RunningService(settings, runner, ctx)


@pytest_asyncio.fixture(loop_scope="session")
async def service(settings: Settings):
    """The whole service running against the session's NATS and FalkorDB."""
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
