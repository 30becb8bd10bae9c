"""The operator CLI's output helpers (automem/cli/output.py): a stuck wait gives up with one
line, --json prints numbers, a backup to stdout refuses --json."""

from __future__ import annotations

import argparse

import pytest

from automem.cli.output import Stall, as_dict, backup_out, error_line
from automem.v1 import admin_service_pb2


def test_a_wait_that_stops_moving_gives_up_naming_the_count() -> None:
    now = [0.0]
    stall = Stall("waiting", seconds=10, clock=lambda: now[0])
    for step in range(5):  # moving: never gives up, however long it takes
        now[0] += 9
        stall.check(step, 10)
    now[0] += 9
    stall.check(4, 10)  # still within 10 s of the last change
    now[0] += 2
    with pytest.raises(TimeoutError) as stuck:
        stall.check(4, 10)
    assert "no progress for 10 s (4 of 10)" in error_line(stuck.value)


def test_json_counts_are_numbers() -> None:
    out = as_dict(admin_service_pb2.RestoreBackupResponse(nodes=5, live_memories=3))
    assert out == {"nodes": 5, "edges": 0, "events": 0, "events_dropped": 0, "live_memories": 3}


def test_a_backup_on_stdout_refuses_json() -> None:
    with pytest.raises(ValueError, match="--json needs --out"):
        backup_out(argparse.Namespace(out="-", json=True))
    assert backup_out(argparse.Namespace(out="b.jsonl", json=True)) == "b.jsonl"
    assert backup_out(argparse.Namespace(out="-", json=False)) is None


def test_a_backup_to_a_directory_names_it_and_leaves_nothing_behind(tmp_path) -> None:
    """``automem backup --out <dir>`` failed at the end naming the temporary file beside the
    target (``[Errno 21] Is a directory: '.../.bk.9jncu2h4' -> '.../bk'``); it says so first."""
    import pytest

    from automem.cli.output import whole_file

    with pytest.raises(IsADirectoryError) as refused, whole_file(str(tmp_path)):
        raise AssertionError("the block must not run")
    assert str(tmp_path) in str(refused.value) and "is a directory" in str(refused.value)
    assert list(tmp_path.parent.glob(f".{tmp_path.name}.*")) == []
