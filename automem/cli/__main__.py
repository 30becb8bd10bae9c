"""``python -m automem.cli`` runs the ``automem`` command as the script does (automem/cli/entry.py)."""

import sys

from automem.cli.entry import main

if __name__ == "__main__":  # not on a plain import (tests import every module)
    sys.exit(main())
