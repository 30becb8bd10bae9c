"""The import structure holds: ``lint-imports`` (import-linter) checks the contracts in
pyproject.toml — startup > gateway > services > stores (graph, vectors) > common > generated
code, the four services independent of each other, no import cycle between the siblings of
any package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the ``automem`` package found first from ``cwd`` (no cache, so a
    stale graph cannot pass)."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", "--config", str(ROOT / "pyproject.toml")],
                          capture_output=True, text=True, check=False, cwd=cwd, env=env, timeout=300)


def test_import_contracts_are_kept() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout, result.stdout


def test_import_contracts_catch_common_importing_a_service_and_a_cycle(tmp_path: Path) -> None:
    """The contracts bite: a copy of the package where common imports the ingest servicer
    (which imports common back) breaks all three: the layers, the services' independence
    (every service now reaches ingest through common) and the acyclic contract."""
    shutil.copytree(ROOT / "automem", tmp_path / "automem", ignore=shutil.ignore_patterns("__pycache__"))
    lifecycle = tmp_path / "automem" / "common" / "lifecycle.py"
    lifecycle.write_text(lifecycle.read_text() + "\nfrom automem.ingest import servicer  # noqa: E402, F401\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "automem.common is not allowed to import automem.ingest" in result.stdout, result.stdout
    assert "No cycles are allowed in automem." in result.stdout, result.stdout
    assert "Contracts: 0 kept, 3 broken." in result.stdout, result.stdout
