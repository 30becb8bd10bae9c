"""The ``automem`` command: :func:`automem.cli.main.main` (subcommands and options there);
``automem/cli/connect.py`` reaches a running service for the online commands."""

from automem.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
