"""specdash: a terminal dashboard for live speculative-decoding tuning on SGLang.

specdash configures, verifies, measures and advises; drafting itself always stays
inside SGLang (or, for tests and demos, inside the built-in simulator).
"""

__version__ = "0.1.0"

#: The suite sent when none is given (``--bench``, ``--demo``, ``tune``, ``compare --url``; the dashboard's
#: load driver): ``profiles/suites/seeds-five.toml``.  Named here, in the package root (imported by every
#: module already, standard library only), so ``specdash --help`` can show it without importing
#: :mod:`specdash.profile` (pydantic) and every floor of ``pyproject.toml``'s layers may import it.
DEFAULT_SUITE = "seeds-five"
