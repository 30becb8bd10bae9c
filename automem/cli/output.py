"""What the operator commands show: progress bars, ``--json`` output and one-line errors.

* :func:`add_json_option` / :func:`emit` — with ``--json`` a command prints one JSON document
  (or JSON Lines: one object a line) on stdout and nothing else there; without it, text.
* :func:`progress` — a bar on stderr with count, rate and ETA (rich.progress), shown only
  when stderr is a terminal (never in pipes, logs or tests).
* :func:`error_line` — any failure as one line ``automem <command>: <message>`` (gRPC status
  codes in words, no traceback); :func:`fail` prints it and returns exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """Adds ``--json`` (machine-readable output on stdout) to a subcommand's parser."""
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON on stdout (one document, or one object a line for "
                             "listings) for scripts; messages stay on stderr")


def wants_json(args: argparse.Namespace) -> bool:
    """True when the command was given ``--json``."""
    return bool(getattr(args, "json", False))


_INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
          FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64}


def _numbers(message: Message, data: dict[str, Any]) -> dict[str, Any]:
    """Protobuf's JSON writes 64-bit integers as strings; scripts want numbers (counts here
    stay far below 2^53)."""
    for field in message.DESCRIPTOR.fields:
        value = data.get(field.name)
        if value is None:
            continue
        if field.type in _INT64 and not isinstance(value, list) and field.message_type is None:
            data[field.name] = int(value)
        elif field.message_type is not None and isinstance(value, dict) and not field.message_type.GetOptions(
                ).map_entry and field.message_type.full_name.startswith("automem."):
            _numbers(getattr(message, field.name), value)
    return data


def as_dict(message: Message) -> dict[str, Any]:
    """A protobuf message as a JSON-ready dict with the proto field names (every field,
    defaults included; times as RFC 3339 strings; 64-bit integers as numbers)."""
    return _numbers(message, json_format.MessageToDict(message, preserving_proto_field_name=True,
                                                       always_print_fields_with_no_presence=True))


def emit(args: argparse.Namespace, data: Any, text: str | None = None) -> None:
    """Print ``data`` as one JSON document with ``--json``, else ``text`` (nothing when None)."""
    if wants_json(args):
        print(json.dumps(data, ensure_ascii=False, sort_keys=True))
    elif text is not None:
        print(text)


def note(args: argparse.Namespace, text: str) -> None:
    """A message for the person at the terminal: stderr, so stdout stays the result."""
    print(text, file=sys.stderr)


@contextmanager
def whole_file(path: str | None) -> Iterator[TextIO]:
    """stdout when ``path`` is None or "-", else a temporary file beside ``path`` (mode 0600:
    a backup holds every scope's memories and the API key records, an export a scope's)
    renamed onto it when the block succeeds and removed when it fails, so a failed backup or
    export leaves ``path`` as it was (a refused key or an unreachable service emptied
    yesterday's backup before). OSError names ``path`` as given."""
    if path is None or path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(path)
    if target.is_dir():  # os.replace would fail only at the end, naming the temporary file
        raise IsADirectoryError(errno.EISDIR, "is a directory; name a file to write", path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
    except OSError as exc:  # named as the user wrote it, not as the temporary file beside it
        raise OSError(exc.errno, exc.strerror, path) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def backup_out(args: argparse.Namespace) -> str | None:
    """The file ``automem backup --out`` writes, or None for stdout. ValueError for ``--json``
    without a file (stdout would carry the backup itself)."""
    to_file = args.out if args.out and args.out != "-" else None
    if to_file is None and wants_json(args):
        raise ValueError("--json needs --out FILE (stdout would carry the backup itself)")
    return to_file


def event_line(line: str) -> bool:
    """Whether a backup line (automem/common/backup.py) is an event record: its ``kind`` is
    ``event`` (a node whose property ``kind`` is "event", an Entity, is not one)."""
    if '"kind": "event"' not in line:  # most lines: no need to parse them
        return False
    try:
        return json.loads(line).get("kind") == "event"
    except (ValueError, AttributeError):
        return False


def backup_events(last: str, counted: int) -> int:
    """The events a backup holds: its end record's count (``last`` is the file's last line),
    else (a file without one) ``counted``, the event lines seen."""
    try:
        end = json.loads(last)
    except ValueError:
        return counted
    if isinstance(end, dict) and end.get("kind") == "end" and isinstance(end.get("events"), int):
        return end["events"]
    return counted


def reindex_refused(why: str) -> str:
    """The message of ``automem restore --reindex`` whose reindex step the service refused
    (``why``): a restore brings the backup's API keys, so a service open before it (no keys)
    asks for a key after it. The restore itself succeeded (its result is printed before)."""
    return (f"the restore succeeded, but the reindex was refused ({why}): the restored backup brought its API "
            "keys; run `automem sync --repair --wait` with an admin key of the restored keys (--api-key or "
            "AUTOMEM_API_KEY)")


def backup_done(args: argparse.Namespace, count: int, events: int) -> None:
    """The summary of a backup: the ``--json`` document on stdout, the line on stderr."""
    emit(args, {"records": count, "events": events, "out": args.out if args.out else "-"})
    print(f"# {count} records written ({events} events)", file=sys.stderr)


class Progress:
    """One progress bar (see :func:`progress`): :meth:`advance` by a count, :meth:`update`
    to an absolute count and/or a new total."""

    def __init__(self, bar: Any, task: Any) -> None:
        self._bar = bar
        self._task = task

    def advance(self, amount: float = 1) -> None:
        """Move forward by ``amount``."""
        if self._bar is not None:
            self._bar.advance(self._task, amount)

    def update(self, completed: float | None = None, total: float | None = None) -> None:
        """Set the count done and/or the total (None leaves it)."""
        if self._bar is not None:
            changes = {k: v for k, v in (("completed", completed), ("total", total)) if v is not None}
            self._bar.update(self._task, **changes)


@contextmanager
def progress(description: str, total: float | None = None, unit: str = "records",
             bytes_: bool = False) -> Iterator[Progress]:
    """A progress bar on stderr for a long operation: description, bar, count/total, rate and
    ETA (rich.progress; ``bytes_``: counts are bytes, shown as kB/MB). ``total`` None = not
    known yet (the bar pulses). Quiet (every call does nothing) when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield Progress(None, None)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        ProgressColumn,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import Progress as RichProgress
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:,.0f} {unit}/s" if task.speed else f"- {unit}/s", style="progress.data.speed")

    if bytes_:
        counts: tuple[Any, ...] = (DownloadColumn(), TransferSpeedColumn())
    else:
        counts = (MofNCompleteColumn(), Rate())
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), *counts,
               TextColumn("ETA"), TimeRemainingColumn())
    with RichProgress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield Progress(bar, task)


class Stall:
    """Gives up a wait that stopped moving: :meth:`check` raises TimeoutError when the
    watched count has not changed for ``seconds`` (the service goes on with the job; only
    the command stops waiting)."""

    def __init__(self, what: str, seconds: float = 120.0, clock: Any = None) -> None:
        import time

        self._clock = clock or time.monotonic
        self.what = what
        self.seconds = seconds
        self._last: Any = None
        self._since = self._clock()

    def check(self, done: Any, total: Any) -> None:
        """Note the count; TimeoutError naming ``done`` of ``total`` when it is stuck."""
        now = self._clock()
        if done != self._last:
            self._last, self._since = done, now
        elif now - self._since > self.seconds:
            raise TimeoutError(f"{self.what}: no progress for {self.seconds:.0f} s ({done} of {total}); the "
                               "service goes on with it, check again later")


def error_line(exc: BaseException, target: str = "") -> str:
    """One line for a failure: a gRPC status as its code in words and the service's message
    (``target``: the address, named when it cannot be reached), else the exception's text."""
    if isinstance(exc, grpc.aio.AioRpcError | grpc.RpcError) and hasattr(exc, "code"):
        code = exc.code()
        details = (exc.details() or "").splitlines()[0] if exc.details() else ""
        if code == grpc.StatusCode.UNAVAILABLE:
            where = f" at {target}" if target else ""
            return f"cannot reach the service{where} ({details or 'unavailable'}); is `automem up` running?"
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return f"the service refused the API key ({details}); pass an admin key with --api-key or AUTOMEM_API_KEY"
        name = code.name.lower().replace("_", " ") if code is not None else "error"
        return f"{name}: {details}"
    status = getattr(exc, "status", None)  # automem/cli/rest.py RestError: an HTTP answer
    if isinstance(status, int):
        if status == 401:
            return f"the service refused the API key ({exc}); pass an admin key with --api-key or AUTOMEM_API_KEY"
        return f"HTTP {status}: {exc}"
    import httpx

    if isinstance(exc, httpx.TransportError):
        where = f" at {target}" if target else ""
        return f"cannot reach the service{where} ({type(exc).__name__}: {exc}); is `automem up` running?"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text


def fail(command: str, exc: BaseException | str, target: str = "") -> int:
    """Print ``automem <command>: <one line>`` on stderr (a message of several lines, say a
    server's HTML error page, is joined into one); returns 1 (the exit code)."""
    message = exc if isinstance(exc, str) else error_line(exc, target)
    print(f"automem {command}: {' '.join(message.split())}", file=sys.stderr)
    return 1


def stdout_closed() -> int:
    """The reader of stdout went away (``automem keys list | head``): not a failure. Points
    stdout at /dev/null so the interpreter's last flush raises nothing; returns 0."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
