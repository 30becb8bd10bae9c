"""The code base stays ruff-clean (STYLE.md: type hints, ruff clean)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_reports_nothing() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    result = subprocess.run([str(ruff), "check", "--output-format", "concise", str(ROOT)], capture_output=True,
                            text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
