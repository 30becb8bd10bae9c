"""Where the benches find the LoCoMo conversations and the referee that scores rankings.

Neither ships with the repository: the conversations are CC BY-NC 4.0 (evaluation only, the
product must not carry them) and the referee is the project's shared scorer, which the
benches feed and never re-implement. A checkout that sits next to the project's ``shared``
directory finds both there (``../shared/data/locomo/locomo_public.json``,
``../shared/bench/eval_locomo.py``); a clone anywhere else names them with ``--data`` /
``--referee`` or the environment variables ``AUTOMEM_LOCOMO_DATA`` /
``AUTOMEM_LOCOMO_REFEREE``. :func:`require_data` and :func:`require_referee` stop a bench
with one message naming the missing file and where to get it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
#: The public part of LoCoMo (conv-26, conv-30, conv-41: 1,451 turns, 497 questions).
DATA = Path(os.environ.get("AUTOMEM_LOCOMO_DATA") or SHARED / "data" / "locomo" / "locomo_public.json")
#: The LoCoMo evidence-retrieval scorer (``eval_locomo.py --export`` / ``--rankings``).
REFEREE = Path(os.environ.get("AUTOMEM_LOCOMO_REFEREE") or SHARED / "bench" / "eval_locomo.py")

DATA_SOURCE = (
    "the LoCoMo conversations in their original JSON format: the project's public part is "
    "shared/data/locomo/locomo_public.json beside the project checkout; the full set is "
    "data/locomo10.json of https://github.com/snap-research/LoCoMo (CC BY-NC 4.0, evaluation "
    "only; scores on it are not comparable with the public part's). Pass --data PATH or set "
    "AUTOMEM_LOCOMO_DATA")
REFEREE_SOURCE = (
    "the project's shared LoCoMo scorer eval_locomo.py, shared/bench/eval_locomo.py beside the "
    "project checkout. Pass --referee PATH or set AUTOMEM_LOCOMO_REFEREE")


def add_arguments(parser: argparse.ArgumentParser, referee: bool = True) -> None:
    """Add ``--data`` (and, when the bench scores or exports, ``--referee``) with the defaults above."""
    parser.add_argument("--data", type=Path, default=DATA,
                        help=f"LoCoMo conversations (JSON; default {DATA}, env AUTOMEM_LOCOMO_DATA)")
    if referee:
        parser.add_argument("--referee", type=Path, default=REFEREE,
                            help=f"the scorer eval_locomo.py (default {REFEREE}, env AUTOMEM_LOCOMO_REFEREE)")


def require_data(path: Path | str) -> Path:
    """``path`` when it is a file; else SystemExit naming it and where to get the data."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"LoCoMo data not found: {path}\n  It is {DATA_SOURCE}.")
    return path


def require_referee(path: Path | str) -> Path:
    """``path`` when it is a file; else SystemExit naming it and where to get the referee."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"LoCoMo referee not found: {path}\n  It is {REFEREE_SOURCE}.")
    return path
