"""Cost model: the time of one verify round.

Cost model
----------
Time of one verify round (one draft phase + one verify, ms) at concurrency B:

    T(S, K, N, B) = b0 + b1·B + (v0 + v1·B)·(N - 1) + S·(d0 + d1·B·K)

b0 + b1·B: the target forward and fixed per-round overhead; v: the extra verify cost per draft
token (grows with B·N tokens once compute-bound); d: the cost of one draft step (K tokens per
request).  It is fitted by Bayesian linear least squares (ridge towards documented priors,
relative measurement error 3 %) to the round times measured at each setting,

    T_obs = 1000 · B · τ / output_tok_s      ms

(each of the B requests gets τ tokens per round, so per-request rate = τ / T; equivalently
T = τ · TPOT, or from decode log windows T = 1000 · τ · #running-req / gen_throughput).  With
chain runs only, (N - 1) = S and the verify/draft split is not identifiable: the prior split
(draft step ≈ 3 %, verify token ≈ 1 % of a round, both wide) decides it and the output says
so; with a single measurement the slope itself comes from the priors (wider intervals).

"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdash.advisor.measurement import Measurement, Settings, _spec

REL_NOISE = 0.03  # default relative error of a measured round time

# --- cost ----------------------------------------------------------------------------------------

COST_NAMES = ("b0", "b1", "v0", "v1", "d0", "d1")


def cost_features(s: Settings, batch: int) -> np.ndarray:
    """[1, B, N-1, B·(N-1), S, S·B·K] for T = b0 + b1·B + (v0 + v1·B)(N-1) + S(d0 + d1·B·K)."""
    n1 = s.draft_tokens - 1
    return np.array([1.0, batch, n1, batch * n1, s.steps, s.steps * batch * s.topk], float)


@dataclass
class CostFit:
    """Posterior of the round-time model (ms): mean ``w`` and covariance ``cov`` over COST_NAMES."""

    w: np.ndarray
    cov: np.ndarray
    n_obs: int
    n_settings: int
    identifiable_split: bool
    scale_ms: float
    sources: list[str] = field(default_factory=list)

    def round_ms(self, s: Settings, batch: int) -> float:
        return max(float(cost_features(s, batch) @ self.w), 0.05 * self.scale_ms)

    def per_token_ms(self, batch: int) -> tuple[float, float]:
        """(verify ms per extra draft token, draft ms per step at topk 1) at this batch."""
        return float(self.w[2] + self.w[3] * batch), float(self.w[4] + self.w[5] * batch)

    def to_json(self, batch: int) -> dict[str, Any]:
        v, d = self.per_token_ms(batch)
        sd = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        return {"params_ms": dict(zip(COST_NAMES, self.w.tolist(), strict=True)),
                "params_sd_ms": dict(zip(COST_NAMES, sd.tolist(), strict=True)),
                "verify_ms_per_draft_token": v, "draft_ms_per_step": d,
                "base_ms": float(self.w[0] + self.w[1] * batch), "measured_settings": self.n_settings,
                "split_identified": self.identifiable_split, "sources": self.sources}


def fit_cost(measurements: Sequence[Measurement], *, rel_noise: float = REL_NOISE,
             baseline_round_ms: float | None = None) -> CostFit:
    """Bayesian linear regression of observed round times on :func:`cost_features`.

    Priors (ms, relative to the median observed round time T̄): b0 ~ N(T̄, (2T̄)²),
    b1 ~ N(0, (0.05T̄)²), v0 ~ N(0.01T̄, (0.03T̄)²), v1 ~ N(0, (0.003T̄)²), d0 ~ N(0.03T̄, (0.05T̄)²),
    d1 ~ N(0, (0.003T̄)²).  Observation sd = ``rel_noise`` · T_obs, inflated by the residual
    scatter when there are more settings than 2.
    """
    rows, ys, sources, settings = [], [], [], set()
    for m in _spec(measurements):
        t, src = m.round_time_ms()
        if t is None or not math.isfinite(t) or t <= 0:
            continue
        rows.append(cost_features(m.settings, max(1, m.concurrency)))
        ys.append(t)
        sources.append(f"{m.settings.label()} @ B={m.concurrency}: {t:.2f} ms ({src})")
        settings.add(m.settings)
    scale = float(np.median(ys)) if ys else (baseline_round_ms or 10.0)
    mu0 = np.array([scale, 0.0, 0.01 * scale, 0.0, 0.03 * scale, 0.0])
    sd0 = np.array([2 * scale, 0.05 * scale, 0.03 * scale, 0.003 * scale, 0.05 * scale, 0.003 * scale])
    prec0 = np.diag(1.0 / sd0 ** 2)
    if not ys:
        return CostFit(mu0, np.diag(sd0 ** 2), 0, 0, False, scale, ["no timed measurement: priors only"])
    X = np.vstack(rows)
    y = np.asarray(ys)
    wts = 1.0 / (rel_noise * y) ** 2
    prec = X.T @ (X * wts[:, None]) + prec0
    cov = np.linalg.inv(prec)
    w = cov @ (X.T @ (wts * y) + prec0 @ mu0)
    if len(settings) > 2:
        chi2 = float(np.sum(wts * (y - X @ w) ** 2)) / max(1, len(settings) - 2)
        if chi2 > 1.0:
            cov = cov * chi2
    nodes_vs_steps = {(s.draft_tokens - 1 - s.steps, s.topk) for s in settings}
    return CostFit(w, cov, len(ys), len(settings), len(nodes_vs_steps) > 1, scale, sources)
