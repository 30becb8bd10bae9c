"""``python -m automem.cli`` runs the ``automem`` command (automem/cli/main.py)."""

import sys

from automem.cli.main import main

if __name__ == "__main__":  # not on a plain import (tests import every module)
    sys.exit(main())
