"""specdash: a terminal dashboard for live speculative-decoding tuning on SGLang.

specdash configures, verifies, measures and advises; drafting itself always stays
inside SGLang (or, for tests and demos, inside the built-in simulator).
"""

__version__ = "0.1.0"
