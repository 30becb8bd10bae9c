"""``python -m automem.cli`` runs the ``automem`` command (automem/cli/main.py)."""

import sys

from automem.cli.main import main

sys.exit(main())
