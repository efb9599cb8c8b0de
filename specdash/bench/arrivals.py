"""Open-loop arrival schedules: when each request of a ``--request-rate`` run is sent.

The load shape of SGLang's ``bench_serving.py`` and vLLM's ``vllm bench serve``
(``--request-rate R --burstiness B``): inter-arrival times are gamma-distributed with shape
``B`` and scale ``1 / (R·B)``, so their mean is ``1/R`` whatever ``B`` and their coefficient
of variation is ``1/√B`` — ``B = 1`` is a Poisson process (exponential gaps), ``B < 1``
burstier, ``B > 1`` more even, ``B = inf`` a constant ``1/R``.  ``R = inf`` sends everything
at once.

Like vLLM's ``get_request``, the cumulative schedule is rescaled so that the last arrival
lands exactly where the asked rate puts it (``normalize``): a raw gamma sum misses it by
``CV/√N`` (a few % on a short run), which would make a seeded run's realized rate depend on
the draw rather than on the client and server.  Unlike vLLM (whose first request waits one
gap) the first request is sent at once, as in SGLang's client; the ``N − 1`` gaps then span
``(N − 1) / R`` seconds, the window the RUN's ``achieved_request_rate`` measures
(:meth:`specdash.collect.stream.RunStats.send_rate`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["arrival_offsets", "inter_arrival_gaps"]


def _check(rate: float, burstiness: float) -> None:
    if not rate > 0 or math.isnan(rate):
        raise ValueError(f"request rate must be > 0 (or inf), got {rate}")
    if not burstiness > 0 or math.isnan(burstiness):
        raise ValueError(f"burstiness must be > 0 (or inf), got {burstiness}")


def inter_arrival_gaps(n: int, rate: float, burstiness: float = 1.0, *, seed: int | None = 0) -> np.ndarray:
    """``n`` raw inter-arrival times (s): gamma(shape ``burstiness``, scale ``1/(rate·burstiness)``),
    zeros for ``rate = inf``, the constant ``1/rate`` for ``burstiness = inf``; seeded
    (``numpy.random.default_rng(seed)``).  Raises ValueError for a rate or burstiness ≤ 0."""
    _check(rate, burstiness)
    n = max(0, int(n))
    if math.isinf(rate):
        return np.zeros(n)
    if math.isinf(burstiness):
        return np.full(n, 1.0 / rate)
    rng = np.random.default_rng(seed)
    return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)


def arrival_offsets(n: int, rate: float, burstiness: float = 1.0, *, seed: int | None = 0,
                    normalize: bool = True) -> list[float]:
    """Send times (s after the first send) of ``n`` requests: 0, then the cumulative sum of
    ``n − 1`` :func:`inter_arrival_gaps`; with ``normalize`` rescaled so the last is exactly
    ``(n − 1) / rate`` (see the module docstring).  All zeros for ``rate = inf``."""
    if n <= 0:
        _check(rate, burstiness)
        return []
    gaps = inter_arrival_gaps(n - 1, rate, burstiness, seed=seed)
    cum = np.concatenate(([0.0], np.cumsum(gaps)))
    if normalize and n > 1 and cum[-1] > 0:
        cum *= ((n - 1) / rate) / cum[-1]
    return [float(x) for x in cum]

