"""The exit codes of ``automem import`` (automem/cli/transfer.py, docs/import-export.md "Exit
codes"): 0 done, 1 failed (a refused file, refused records, a service not reached), 2 a
usage error, the same in every format and as every other ``automem`` command uses them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _import(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOMEM_GRPC_TARGET", "AUTOMEM_API_KEY")}
    env["AUTOMEM_DATA_DIR"] = str(tmp_path / "data")  # no endpoints file: the address given is used
    return subprocess.run([sys.executable, "-m", "automem.cli", "import", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("fmt", ["mem0", "automem", "native"])
def test_a_bad_option_value_is_a_usage_error_in_every_format(tmp_path: Path, fmt: str) -> None:
    """``--concurrency 0`` exited 1, as a failure of the import, where ``--concurrency x`` and
    ``--timeout 0`` exit 2 (argparse): a bad option value is now a usage error, exit 2."""
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": "a", "memory": "x"}) + "\n")
    for option, value in (("--concurrency", "0"), ("--concurrency", "-3"), ("--concurrency", "x"),
                          ("--timeout", "0")):
        done = _import(tmp_path, str(path), "--format", fmt, option, value, "--grpc", "127.0.0.1:1")
        assert done.returncode == 2, (option, value, done.returncode, done.stderr)
        assert f"argument {option}:" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_refused_file_exits_1_and_a_valid_dry_run_0(tmp_path: Path) -> None:
    bad, good = tmp_path / "bad.jsonl", tmp_path / "good.jsonl"
    bad.write_text(json.dumps({"id": {"x": 1}, "memory": "x"}) + "\n")
    good.write_text(json.dumps({"id": "a", "memory": "x"}) + "\n")
    refused = _import(tmp_path, str(bad), "--format", "mem0", "--dry-run", "--grpc", "127.0.0.1:1")
    assert refused.returncode == 1 and "line 1: id: must be a string or an integer" in refused.stderr, refused.stderr
    valid = _import(tmp_path, str(good), "--format", "mem0", "--dry-run", "--grpc", "127.0.0.1:1")
    assert valid.returncode == 0, valid.stderr
