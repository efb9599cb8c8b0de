"""A simulated SGLang server for specdash (``python -m specdash.sim <SGLang flags>``).

Same launch flags, HTTP API, log lines and metric names as SGLang (0.5.23 and drift back to 0.5.10), with a
speculative-decoding timing and acceptance model driven by scenarios
(``specdash/sim/scenarios/*.toml``) and ground truth at ``/sim/truth``.  Everything it
reports is simulated and labelled so.  :func:`expected` gives the model's analytic
expectation for a set of flags (tests and the advisor's validation only).
"""

from __future__ import annotations

from typing import Any


def expected(*args: Any, **kwargs: Any) -> dict:
    """:func:`specdash.sim.expected.expected` (imported lazily)."""
    from specdash.sim.expected import expected as _expected

    return _expected(*args, **kwargs)
