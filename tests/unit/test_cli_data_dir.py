"""An operator command run where no service runs and no data directory is does not start a
new, empty store there (automem/cli/main.py ``_operate``): from another directory the
relative default ``./.automem`` named a fresh store, and ``automem keys create`` printed a
key the running service never knew, with exit code 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

AUTOMEM = str(Path(sys.executable).parent / "automem")


@pytest.mark.parametrize("args", [["keys", "create", "--role", "writer", "--scope", "acme/*"], ["keys", "list"],
                                  ["backup", "--out", "b.jsonl"]])
def test_no_service_and_no_data_dir_is_an_error_not_a_new_store(tmp_path: Path, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("AUTOMEM_DATA_DIR", "AUTOMEM_GRPC_TARGET", "FALKORDB_HOST", "NATS_URL")}
    result = subprocess.run([AUTOMEM, *args], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                            timeout=60)
    assert result.returncode == 1, result
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"automem {args[0]}") and "no data directory at" in line and "--offline" in line, line
    assert str(tmp_path / ".automem") in line
    assert not (tmp_path / ".automem").exists() and result.stdout == ""
