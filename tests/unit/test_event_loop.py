"""The event loop the servers run on (automem/cli/main.py ``run_loop``, ``AUTOMEM_EVENT_LOOP``)."""

from __future__ import annotations

import asyncio
import builtins
import subprocess
import sys

import pytest
import uvloop

from automem.cli.main import run_loop
from automem.common.settings import Settings


async def _loop_type() -> int:
    loop = asyncio.get_running_loop()
    # A subprocess and a worker thread: what `automem up` asks of its loop besides sockets.
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "print(7)", stdout=subprocess.PIPE)
    out, _ = await proc.communicate()
    assert out.strip() == b"7" and await asyncio.to_thread(lambda: 6 * 7) == 42
    return 1 if isinstance(loop, uvloop.Loop) else 0


def test_auto_and_uvloop_run_on_uvloop_and_asyncio_on_the_standard_loop() -> None:
    assert run_loop(Settings(event_loop="auto"), _loop_type()) == 1
    assert run_loop(Settings(event_loop="uvloop"), _loop_type()) == 1
    assert run_loop(Settings(event_loop="asyncio"), _loop_type()) == 0


def test_without_uvloop_auto_falls_back_and_uvloop_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_uvloop(name: str, *args, **kwargs):
        if name == "uvloop":
            raise ImportError("No module named 'uvloop'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert run_loop(Settings(event_loop="auto"), _loop_type()) == 0
    coro = _loop_type()
    with pytest.raises(ImportError, match="uvloop"):
        run_loop(Settings(event_loop="uvloop"), coro)
    coro.close()


def test_an_unknown_event_loop_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="AUTOMEM_EVENT_LOOP"):
        Settings.model_validate({"AUTOMEM_EVENT_LOOP": "trio"})
