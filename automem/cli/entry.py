"""The ``automem`` script's entry point (pyproject.toml ``[project.scripts]``) and
``python -m automem.cli``'s: it imports the command itself, so a Ctrl-C while Python is still
importing — the first fraction of a second of ``automem up`` — ends the command quietly."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """Run the ``automem`` command (automem/cli/main.py ``main``) on ``argv`` (default: the
    process's arguments) and return its exit code; 130 (the shell's code for SIGINT) when
    interrupted before the command installed its own handling, without a traceback."""
    try:
        from automem.cli.main import main as command

        return command(argv)
    except KeyboardInterrupt:
        return 130
