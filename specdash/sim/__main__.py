"""``python -m specdash.sim`` — see :mod:`specdash.sim.cli`."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point (also used by ``specdash sim``)."""
    from specdash.sim.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
