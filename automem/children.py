"""Targets of ``automem up`` that run as child processes (``settings.child_targets``).

Each child is ``automem serve --target <name>`` against the stores of the parent (its
embedded NATS and FalkorDB, passed as ``NATS_URL`` / ``FALKORDB_HOST`` / ``FALKORDB_PORT``)
so the CPU-heavy work of that target runs on another core (issue 10, item 7). Which targets
may leave the parent is decided by automem/runner.py :func:`~automem.runner.child_targets`.

Addresses: every child gets its gRPC port before it starts (:attr:`ChildProcess.grpc_port`),
so the parent can tell each process where the others' services are before any of them is
up: ``AUTOMEM_<TARGET>_ADDR`` for the targets that run in children, ``AUTOMEM_GRPC_TARGET``
for the parent's own gRPC server. A child reports that it is up, and the ports it bound,
as one JSON line on the pipe named by ``--ready-fd`` (automem/cli/main.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time

from automem.common.embedded import PARENT_PID_ENV, EmbeddedServerError, free_port
from automem.common.settings import Settings

log = logging.getLogger(__name__)

#: Per-service address variables a parent sets itself (inherited values would point elsewhere).
_ADDRESS_VARS = ("AUTOMEM_GRPC_TARGET", "AUTOMEM_INGEST_ADDR", "AUTOMEM_RECALL_ADDR", "AUTOMEM_ENRICH_ADDR",
                 "AUTOMEM_CONSOLIDATE_ADDR")


def local_host(settings: Settings) -> str:
    """The address other processes on this machine reach this one's servers at:
    ``settings.host``, or 127.0.0.1 when that is a wildcard."""
    return "127.0.0.1" if settings.host in ("0.0.0.0", "") else settings.host


def parent_service_name(settings: Settings, in_process: list[str], children: list[str]) -> str:
    """The telemetry service name of ``automem up``'s own process: ``<service name>-<its
    targets>`` (e.g. ``automem-ingest-recall-consolidate``) when it has children, which are
    named ``<service name>-<their targets>`` (:meth:`ChildProcess.environment`); the setting
    as it is when ``OTEL_SERVICE_NAME`` was given or every target runs in this process."""
    if not children or "OTEL_SERVICE_NAME" in os.environ or not in_process:
        return settings.otel_service_name
    return f"{settings.otel_service_name}-{'-'.join(in_process)}"


def address_setting(target: str) -> str | None:
    """The Settings field holding the address of ``target``'s gRPC services
    (``enrich`` -> ``enrich_addr``), or None when the target has none (``gateway``)."""
    name = f"{target}_addr"
    return name if name in Settings.model_fields else None


class ChildProcess:
    """One child process running one target, or several joined by ``+``.

    Args:
        settings: the parent's effective settings (stores, data dir, host, port).
        target: the child's name: a target (``enrich``) or targets joined by ``+``
            (``gateway+recall``; :attr:`targets` lists them), as
            :func:`automem.runner.child_targets` returns it.

    The child shares this process's stdout/stderr, gets SIGKILL when this process dies
    (PR_SET_PDEATHSIG) and is restarted by :meth:`supervise` when it exits on its own
    (:attr:`restarts` counts those). Its gRPC port (:attr:`grpc_port`) and HTTP port
    (:attr:`http_port`: ``settings.port``, or a free one when 0) are fixed for its lifetime,
    restarts included; only a target that serves them binds them. :attr:`metrics_port`
    likewise (every child serves its own metrics, automem/common/metrics.py).
    """

    def __init__(self, settings: Settings, target: str) -> None:
        self.settings = settings
        self.target = target
        #: The targets the child runs (``automem serve --target a,b``).
        self.targets = target.split("+")
        self.host = local_host(settings)
        self.grpc_port = free_port(self.host)
        self.http_port = settings.port or free_port(self.host)
        #: The child's metrics port: a free one of its own (every process serves its own
        #: registry), 0 when the parent serves none (``AUTOMEM_METRICS_PORT=0``).
        self.metrics_port = free_port(self.host) if settings.metrics_port else 0
        self.proc: subprocess.Popen | None = None
        self.report: dict[str, int] = {}
        self.restarts = 0
        self._env: dict[str, str] = {}
        self._stopping = False

    @property
    def grpc_address(self) -> str:
        """``host:port`` of the child's gRPC server."""
        return f"{self.host}:{self.grpc_port}"

    def environment(self, addresses: dict[str, str], grpc_target: str) -> dict[str, str]:
        """The child's environment: this process's, with the parent's stores, the child's
        ports, and ``addresses`` (environment variable -> ``host:port``); ``grpc_target``
        (the parent's gRPC server, may be empty) for every other service. The ``enrich``
        child runs NER in a thread (``AUTOMEM_ENTITIES_PROCESS=false``) unless the setting
        was given. Telemetry: ``OTEL_SERVICE_NAME`` ``<service name>-<targets>`` (e.g.
        ``automem-gateway``) unless it was given, and ``automem.component=<targets>`` added to
        ``OTEL_RESOURCE_ATTRIBUTES``."""
        s = self.settings
        env = {k: v for k, v in os.environ.items() if k not in _ADDRESS_VARS}
        env.update({"AUTOMEM_DATA_DIR": str(s.data_dir), "NATS_URL": s.nats_url, "NATS_TOKEN": s.nats_token,
                    "FALKORDB_HOST": s.falkordb_host,
                    "FALKORDB_PORT": str(s.falkordb_port), "FALKORDB_PASSWORD": s.falkordb_password,
                    "AUTOMEM_HOST": s.host, "PORT": str(self.http_port), "AUTOMEM_GRPC_PORT": str(self.grpc_port),
                    "AUTOMEM_METRICS_PORT": str(self.metrics_port)})
        env.pop("AUTOMEM_NATS_URL", None)
        env.pop("AUTOMEM_NATS_TOKEN", None)
        if grpc_target:
            env["AUTOMEM_GRPC_TARGET"] = grpc_target
        if "enrich" in self.targets and "entities_process" not in s.model_fields_set:
            # The enrich child is already a process of its own beside recall and ingest: NER
            # in a thread of it enriches as fast as in a worker process of its own and spares
            # that worker's interpreter (~77 MiB at 5,000 memories; docs/benchmarks.md
            # "NER in a thread of the enrich child").
            env["AUTOMEM_ENTITIES_PROCESS"] = "false"
        # Traces and metrics of each process say which it is (every process reported
        # service.name "automem", as the Helm chart's components do not: automem-<component>
        # and automem.component, deploy/helm/automem/templates/lib/_workload.tpl).
        component = "-".join(self.targets)
        if "OTEL_SERVICE_NAME" not in os.environ:
            env["OTEL_SERVICE_NAME"] = f"{s.otel_service_name}-{component}"
        attributes = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
        if "automem.component=" not in attributes:
            env["OTEL_RESOURCE_ATTRIBUTES"] = ",".join(filter(None, [attributes, f"automem.component={component}"]))
        env.update(addresses)
        return env

    def _spawn(self, ready_fd: int) -> None:
        argv = [sys.executable, "-m", "automem.cli", "serve", "--target", ",".join(self.targets), "--ready-fd", str(ready_fd)]
        log.info("starting %s process: %s", self.target, " ".join(argv))
        # No preexec_fn: the child sets its parent-death signal itself (die_with_parent), so no
        # Python runs between fork and exec in this process full of threads. A process group of
        # its own (as the embedded servers'): a Ctrl-C at the terminal (SIGINT to the foreground
        # group) reaches only `automem up`, which stops its children in order, instead of
        # ending the child under the supervisor, which restarted it mid-shutdown.
        self.proc = subprocess.Popen(argv, env={**self._env, PARENT_PID_ENV: str(os.getpid())},
                                     stdin=subprocess.DEVNULL, pass_fds=(ready_fd,), process_group=0)

    async def start(self, env: dict[str, str] | None = None, timeout: float = 120.0) -> None:
        """Spawn the child (with ``env`` from :meth:`environment`; a restart reuses the last)
        and wait for its ready report.

        Raises:
            EmbeddedServerError: the child exited before reporting, or did not report
                within ``timeout`` seconds (it is then killed).
        """
        if env is not None:
            self._env = env
        read_fd, write_fd = os.pipe()
        try:
            self._spawn(write_fd)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        reading = asyncio.ensure_future(asyncio.to_thread(_read_line, read_fd))
        try:
            done, _ = await asyncio.wait([reading], timeout=timeout)
            if not done:
                self.proc.kill()  # its end of the pipe closes: the read returns
                await reading
                raise EmbeddedServerError(f"the {self.target} process did not start within {timeout:.0f}s")
            line = reading.result()
        finally:
            os.close(read_fd)
        if not line:
            code = await asyncio.to_thread(self.proc.wait, 10)
            hint = ""
            if code == _UVICORN_STARTUP_FAILURE and "gateway" in self.targets:
                hint = f": the HTTP server could not start — is PORT {self.http_port} on {self.host} in use?"
            raise EmbeddedServerError(f"the {self.target} process exited with code {code} before it was up{hint}")
        self.report = json.loads(line)

    async def supervise(self, counts: dict[str, int] | None = None) -> None:
        """Restart the child whenever it exits on its own (runs until cancelled), counting
        each restart in :attr:`restarts` and under the child's name in ``counts`` (the
        embedded runtime's, which ``/health`` answers as ``server_restarts``). A child that
        exits again within :data:`RESTART_SETTLE_SECONDS` of its start is restarted after a
        delay doubling from 0.5 s up to 30 s (a child that cannot start, its port taken, was
        restarted every half second for good); one that stayed up starts the count again."""
        delay, started = RESTART_MIN_DELAY, time.monotonic()
        while True:
            await asyncio.sleep(RESTART_MIN_DELAY)
            if self._stopping or self.proc is None or self.proc.poll() is None:
                continue
            delay = restart_delay(delay, time.monotonic() - started)
            log.error("%s process exited; restarting it", self.target,
                      extra={"exit_code": self.proc.returncode, "restarts": self.restarts + 1,
                             "restart_in_s": delay})
            await asyncio.sleep(delay - RESTART_MIN_DELAY)
            if self._stopping:
                continue
            self.restarts += 1
            if counts is not None:
                counts[self.target] = counts.get(self.target, 0) + 1
            started = time.monotonic()
            with contextlib.suppress(EmbeddedServerError, OSError):
                await self.start()

    def stopping(self) -> None:
        """The process is stopping: :meth:`supervise` restarts nothing from now on."""
        self._stopping = True

    async def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to ``grace`` s, then SIGKILL."""
        self._stopping = True
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            await asyncio.to_thread(proc.wait, 5)


def _read_line(fd: int) -> str:
    """Read ``fd`` up to the first newline or end of file (blocking); '' when nothing came."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


#: Seconds between looks at a child, and its first restart delay (:meth:`ChildProcess.supervise`).
RESTART_MIN_DELAY = 0.5
#: Longest delay before restarting a child that keeps exiting.
RESTART_MAX_DELAY = 30.0
#: A child up this long (seconds) exited on its own after working: restarted at once.
RESTART_SETTLE_SECONDS = 60.0

def restart_delay(previous: float, uptime: float) -> float:
    """Seconds to wait before restarting a child that exited after ``uptime`` seconds up,
    ``previous`` being the delay before its last restart: :data:`RESTART_MIN_DELAY` once it
    stayed up :data:`RESTART_SETTLE_SECONDS`, else twice ``previous`` up to
    :data:`RESTART_MAX_DELAY`."""
    if uptime >= RESTART_SETTLE_SECONDS:
        return RESTART_MIN_DELAY
    return min(previous * 2, RESTART_MAX_DELAY)


#: The exit code of uvicorn when its server cannot start (``uvicorn.config.STARTUP_FAILURE``),
#: e.g. its port in use.
_UVICORN_STARTUP_FAILURE = 3


def report_ready(fd: int, grpc_port: int, http_port: int) -> None:
    """Called in the child once its targets are up: write ``{"grpc_port", "http_port"}`` as
    one JSON line to ``fd`` (the ``--ready-fd`` pipe) and close it."""
    with os.fdopen(fd, "w") as pipe:
        pipe.write(json.dumps({"grpc_port": grpc_port, "http_port": http_port}) + "\n")
