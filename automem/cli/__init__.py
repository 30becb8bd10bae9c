"""The ``automem`` command: :func:`automem.cli.main.main` (subcommands and options there);
``automem/cli/connect.py`` reaches a running service for the online commands. The script
enters through automem/cli/entry.py; this package imports nothing until asked, so the script
starts without the command's imports (a Ctrl-C during them exits 130 without a traceback)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> Any:
    """``build_parser`` and ``main`` of automem/cli/main.py, imported on first use."""
    if name in __all__:
        command = importlib.import_module("automem.cli.main")
        globals().update(build_parser=command.build_parser, main=command.main)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
