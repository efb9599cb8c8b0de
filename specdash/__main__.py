"""``python -m specdash`` = the ``specdash`` command (used on hosts without an install)."""

import sys

from specdash.cli import main

sys.exit(main())
