"""The ``automem`` command explains itself (issue 17 item 10): every subcommand and every
option has help text, ``--version`` prints the installed version, and every operator
command takes ``--json``."""

from __future__ import annotations

import argparse
import subprocess
import sys

from automem.cli.main import build_parser

OPERATOR_COMMANDS = ("keys create", "keys list", "keys revoke", "keys events", "backup", "restore", "reindex", "sync")


def _walk(parser: argparse.ArgumentParser, path: str = "automem"):
    """(command path, parser) for the parser and every subcommand below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if choice.help}
            for name, sub in action.choices.items():
                assert name in helped, f"{path} {name}: no help text"
                yield from _walk(sub, f"{path} {name}")


def test_every_subcommand_and_option_has_help() -> None:
    missing = []
    for path, parser in _walk(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if action.help is None or (action.help != argparse.SUPPRESS and not action.help.strip()):
                missing.append(f"{path}: {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"options without help: {missing}"


def test_every_operator_command_takes_json() -> None:
    commands = dict(_walk(build_parser()))
    for name in OPERATOR_COMMANDS:
        parser = commands[f"automem {name}"]
        assert any("--json" in a.option_strings for a in parser._actions), name


def test_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "automem.cli", "--version"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"automem {version('automem')}"
