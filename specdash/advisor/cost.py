"""Cost model: the time of one verify round, fitted with non-negative costs.

Cost model
----------
Time of one verify round (one draft phase + one verify forward of the whole batch), in ms per
round, at concurrency B (requests per round) for steps S, topk K, draft tokens N:

    T(S, K, N, B) = b0 + b1·B + (v0 + v1·B)·(N - 1) + F·(d0 + d1·B + (K − 1)·(e0 + e1·B)),    F = max(S, 1)

b0 + b1·B (ms per round, ms per round per request): the target forward and the fixed
per-round work; v0 + v1·B (ms per draft token per round): the extra verify cost of each draft
token (grows with B·N tokens once compute-bound); d0 + d1·B (ms per draft forward): one chain
draft forward of B tokens; e0 + e1·B (ms per draft forward per extra candidate, K − 1 of them):
what a tree's width adds to each draft step — the B·K-token forward, SGLang's top-k selection
over K² scores (``select_top_k_tokens`` in ``srt/speculative/eagle_utils.py``) and the tree's
bookkeeping.  A round runs F = S draft forwards: S − 1 in the draft's CUDA graph plus the
draft-extend forward after the previous verify, which yields the first draft token
(``srt/speculative/eagle_worker_v2.py``; at the adaptive steps-0 tier only that draft-extend
runs, hence F = max(S, 1)).

The tree term is its own (issue 21): it was d1·B·K before, one slope shared by the batch and the
tree's width, so at one stream a tree's draft step could cost at most what the chains' fitted
d0 + d1 allowed per candidate.  The real bed (SmolLM2-135M + its trained EAGLE3 head, SGLang 0.5.14,
one H200, ``benchmarks/results/real-2026-12-02``) says otherwise: every chain round 2.90–3.00 ms
whatever its steps (≈ 0.02 ms a draft step) but the tree 3/4/8 3.71 ms — ≈ 0.08 ms per draft step
per extra candidate, four times a chain's whole draft step, which d0 + d1·K cannot follow (with d0 ≥
0, chains and trees cannot both fit); the simulator's ``draft.topk_growth`` has this form
(``specdash/sim/scenario.py``).  A chain (K = 1) does not see e0, e1, so chains alone leave them to
their priors and one tree launch measures them.  One tree point cannot tell a cost per draft step
from one per round; the per-step form is SGLang's (the selection runs once per step) and the
simulator's.  Its prior is tight — e0 ~ N(0, (0.01T̄)²): on the real bed e0 ≈ 0.027T̄ (one wide tree
launch measures it: a tree of S steps and K candidates weighs it S·(K − 1) times), on an 8B target
≈ 0.005T̄, and without a top-k cost of its own (the simulator's scenarios without ``topk_growth``)
the per-token growth alone, ≈ 0.001T̄; a prior as wide as the chain step's (0.05T̄) made every
wide tree look dear in most posterior draws before a tree was measured, and a live tune spent its
launches walking up from small trees (issue 26).  The base splits further into host time and
verify GPU time,

    b0 = h0 + g0,  b1 = h1 + g1

h (ms per round, per request): scheduling, sampling and launch work the device timer does not
see; g: the GPU time of the verify forward's base.  The fitted parameters are
θ = (h0, h1, g0, g1, v0, v1, d0, d1, e0, e1) (:data:`THETA_NAMES`), all **non-negative**: no phase
of a round can take negative time.  ``w`` = (b0, b1, v0, v1, d0, d1, e0, e1) (:data:`COST_NAMES`)
is what predictions use.

Observations (each a linear function of θ):

* round times from throughput, ``T_obs = 1000 · B · τ / output_tok_s`` ms (each of the B
  requests gets τ tokens per round; equivalently τ · TPOT, or from a decode-log window
  1000 · τ · #running-req / gen_throughput), relative error ``rel_noise`` (3 %);
* with the device timer (:class:`~specdash.advisor.measurement.PhaseTimes`), per-phase GPU
  time, ms per round: verify = 1000 · Δtarget_verify / rounds = g0 + g1·B + (v0 + v1·B)·(N − 1),
  and draft = 1000 · (Δeagle_draft + Δeagle_draft_extend) / rounds = F·(d0 + d1·B + (K − 1)·(e0 + e1·B)) (so
  draft / F is ms per draft step), relative error ``timer_rel_noise`` (5 %: the timer itself
  is exact, the linear model is not — the draft-extend forward covers the B·N verified tokens,
  not B·K).  One adaptive launch's counter pools its tiers (SGLang does not split it by tier):
  such an observation (:attr:`~specdash.advisor.measurement.PhaseTimes.mix`) is the
  share-weighted mean of the chains' rows — exact, the model being linear in S and N.

Fit: a Gaussian prior (ms, relative to the median observed round time T̄: h0, g0 ~ N(T̄/2,
2T̄²); h1, g1 ~ N(0, (0.035T̄)²); v0 ~ N(0.01T̄, (0.03T̄)²); v1 ~ N(0, (0.003T̄)²); d0 ~
N(0.03T̄, (0.05T̄)²); d1 ~ N(0, (0.003T̄)²); e0 ~ N(0, (0.01T̄)²); e1 ~ N(0, (0.001T̄)²)) truncated to
θ ≥ 0, times the Gaussian likelihood
of the observations, is a Gaussian N(m, Σ) truncated to θ ≥ 0 (m, Σ: the unconstrained ridge
posterior).  The point estimate is its mode, the bounded least-squares solution
``scipy.optimize.lsq_linear(R, R·m, bounds=(0, ∞))`` with RᵀR = Σ⁻¹ — the same as bounded least
squares on the noise-weighted observations stacked with the prior rows.  Σ is inflated by the
reduced χ² of the residuals (at the bounded solution) when more than two settings are
measured.  Uncertainty: :func:`truncated_normal_draws` samples the truncated posterior exactly
(rejection from N(m, Σ), then Gibbs sweeps in whitened coordinates started from accepted
draws), so every drawn cost is ≥ 0 as well.  Without timer data and with chain runs only
((N − 1) = S) the verify/draft split is not identifiable and comes from the priors; with a
single measurement the slope itself does (wider intervals).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdash.advisor.measurement import Measurement, Settings, _spec

REL_NOISE = 0.03  # default relative error of a measured round time
TIMER_REL_NOISE = 0.05  # default relative error of a device-timer phase time (model error)

# --- cost ----------------------------------------------------------------------------------------

COST_NAMES = ("b0", "b1", "v0", "v1", "d0", "d1", "e0", "e1")
THETA_NAMES = ("h0", "h1", "g0", "g1", "v0", "v1", "d0", "d1", "e0", "e1")
#: w = THETA_TO_W @ θ: b0 = h0 + g0, b1 = h1 + g1, the rest as they are.
THETA_TO_W = np.zeros((len(COST_NAMES), len(THETA_NAMES)))
THETA_TO_W[0, [0, 2]] = THETA_TO_W[1, [1, 3]] = 1.0
THETA_TO_W[2:, 4:] = np.eye(len(COST_NAMES) - 2)


def chain_settings(steps: int) -> Settings:
    """The chain with ``steps`` steps (topk 1, draft tokens steps + 1)."""
    return Settings(int(steps), 1, int(steps) + 1)


def draft_forwards(s: Settings) -> int:
    """Draft forwards per round: S (S − 1 graph steps + the draft-extend), 1 at steps 0."""
    return max(int(s.steps), 1)


def cost_features(s: Settings, batch: float) -> np.ndarray:
    """[1, B, N-1, B·(N-1), F, F·B, F·(K-1), F·B·(K-1)] for
    T = b0 + b1·B + (v0 + v1·B)(N-1) + F(d0 + d1·B + (K-1)(e0 + e1·B))."""
    n1 = s.draft_tokens - 1
    f = draft_forwards(s)
    k1 = max(int(s.topk), 1) - 1
    return np.array([1.0, batch, n1, batch * n1, f, f * batch, f * k1, f * k1 * batch], float)


def _theta_round(s: Settings, batch: float) -> np.ndarray:
    x = cost_features(s, batch)
    return np.concatenate([[x[0], x[1], x[0], x[1]], x[2:]])


def _theta_verify(s: Settings, batch: float) -> np.ndarray:
    n1 = s.draft_tokens - 1
    return np.array([0.0, 0.0, 1.0, batch, n1, batch * n1, 0.0, 0.0, 0.0, 0.0])


def _theta_draft(s: Settings, batch: float) -> np.ndarray:
    x = cost_features(s, batch)
    return np.concatenate([np.zeros(6), x[4:]])


def _std_normal_between(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of a standard normal truncated to [a, b] (vectorised; the upper tail is
    mirrored to the lower one, where ndtr keeps its precision)."""
    from scipy.special import ndtr, ndtri

    flip = a > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    plo, phi = ndtr(lo), ndtr(hi)
    with np.errstate(invalid="ignore", divide="ignore"):
        x = ndtri(plo + u * (phi - plo))
    x = np.where(flip, -x, x)
    fallback = np.where(np.isfinite(a), a, b)  # mass beyond float range: stay at the bound
    x = np.where(np.isfinite(x) & (phi > plo), x, fallback)
    return np.clip(x, a, b)


def truncated_normal_draws(mean: np.ndarray, cov: np.ndarray, n: int, rng: np.random.Generator, *,
                           start: np.ndarray | None = None, sweeps: int = 25) -> np.ndarray:
    """``n`` draws (rows) from N(mean, cov) truncated to the orthant θ ≥ 0.

    Rejection first (4n proposals from N(mean, cov)): when at least n land in the orthant they
    are exact and returned.  Otherwise Gibbs sampling in whitened coordinates (θ = mean + L·z,
    LLᵀ = cov; each z_j given the rest is a standard normal truncated to the interval the n
    constraints leave), ``sweeps`` sweeps for chains started from the accepted draws (exact
    draws stay exact under the sampler) or 6 × ``sweeps`` from ``start`` (the bounded mode)
    when none was accepted.  All draws are ≥ 0.
    """
    mean = np.asarray(mean, float)
    p = mean.size
    cov = 0.5 * (np.asarray(cov, float) + np.asarray(cov, float).T)
    try:
        chol = np.linalg.cholesky(cov + 1e-12 * np.eye(p) * max(1.0, float(np.max(np.diag(cov)))))
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh(cov)
        chol = vecs * np.sqrt(np.clip(vals, 1e-300, None))
    z = rng.standard_normal((4 * n, p))
    prop = mean + z @ chol.T
    ok = np.all(prop >= 0.0, axis=1)
    if ok.sum() >= n:
        return prop[ok][:n]
    if ok.any():
        zs = z[ok][np.arange(n) % int(ok.sum())]
        n_sweeps = sweeps
    else:
        x0 = np.maximum(np.asarray(start if start is not None else np.maximum(mean, 0.0), float), 0.0)
        z0 = np.linalg.lstsq(chol, x0 - mean, rcond=None)[0]
        zs = np.tile(z0, (n, 1))
        n_sweeps = 6 * sweeps
    theta = mean + zs @ chol.T
    for _ in range(n_sweeps):
        for j in range(p):
            col = chol[:, j]
            rest = theta - zs[:, j:j + 1] * col  # θ without coordinate j's contribution
            lo = np.full(n, -np.inf)
            hi = np.full(n, np.inf)
            pos, neg = col > 1e-300, col < -1e-300
            if pos.any():
                lo = np.max(-rest[:, pos] / col[pos], axis=1)
            if neg.any():
                hi = np.min(-rest[:, neg] / col[neg], axis=1)
            lo = np.minimum(lo, zs[:, j])  # rounding: the current point is feasible
            hi = np.maximum(hi, zs[:, j])
            zj = _std_normal_between(lo, hi, rng.random(n))
            theta = rest + zj[:, None] * col
            zs[:, j] = zj
    return np.maximum(theta, 0.0)


@dataclass
class CostFit:
    """Posterior of the round-time model (see the module docstring).

    ``theta`` (:data:`THETA_NAMES`, ms): the bounded mode (all ≥ 0); ``theta_mean`` /
    ``theta_cov``: the untruncated Gaussian N(m, Σ) whose truncation to θ ≥ 0 is the posterior;
    ``w`` / ``cov``: the same over :data:`COST_NAMES` (b0 = h0 + g0, b1 = h1 + g1), ``cov``
    being the untruncated parent's; ``unconstrained_w``: the plain ridge fit (what the
    advisor used before the bounds; may be negative); ``at_bound``: parameters held at 0
    although the unconstrained fit wants them below (the data pull them negative: too small to
    measure); ``n_timer``: device-timer observations used.
    """

    w: np.ndarray
    cov: np.ndarray
    n_obs: int
    n_settings: int
    identifiable_split: bool
    scale_ms: float
    sources: list[str] = field(default_factory=list)
    theta: np.ndarray | None = None
    theta_mean: np.ndarray | None = None
    theta_cov: np.ndarray | None = None
    n_timer: int = 0
    at_bound: tuple[str, ...] = ()

    @property
    def unconstrained_w(self) -> np.ndarray:
        return THETA_TO_W @ self.theta_mean if self.theta_mean is not None else self.w

    def round_ms(self, s: Settings, batch: float) -> float:
        """Predicted ms per round (never below 5 % of the typical round)."""
        return max(float(cost_features(s, batch) @ self.w), 0.05 * self.scale_ms)

    def per_token_ms(self, batch: float) -> tuple[float, float]:
        """(verify ms per extra draft token, draft ms per step at topk 1) at this batch."""
        return float(self.w[2] + self.w[3] * batch), float(self.w[4] + self.w[5] * batch)

    def tree_ms_per_step(self, batch: float) -> float:
        """ms a draft step costs per extra candidate (topk − 1 of them) at this batch: e0 + e1·B."""
        return float(self.w[6] + self.w[7] * batch)

    def phase_ms(self, s: Settings, batch: float) -> dict[str, float]:
        """One round split into host, verify GPU and draft GPU ms (sums to :meth:`round_ms`
        before its floor)."""
        t = self.theta if self.theta is not None else np.array([self.w[0], self.w[1], 0, 0, *self.w[2:]])
        return {"host": float(t[0] + t[1] * batch), "verify": float(_theta_verify(s, batch) @ t),
                "draft": float(_theta_draft(s, batch) @ t)}

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` posterior draws of ``w`` (rows over :data:`COST_NAMES`), each cost ≥ 0."""
        if self.theta_mean is None:
            return np.maximum(rng.multivariate_normal(self.w, self.cov, size=n, method="eigh"), 0.0)
        return truncated_normal_draws(self.theta_mean, self.theta_cov, n, rng, start=self.theta) @ THETA_TO_W.T

    def to_json(self, batch: float) -> dict[str, Any]:
        v, d = self.per_token_ms(batch)
        sd = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        out = {"params_ms": dict(zip(COST_NAMES, self.w.tolist(), strict=True)),
               "params_sd_ms": dict(zip(COST_NAMES, sd.tolist(), strict=True)),
               "verify_ms_per_draft_token": v, "draft_ms_per_step": d,
               "tree_ms_per_step_per_extra_candidate": self.tree_ms_per_step(batch),
               "base_ms": float(self.w[0] + self.w[1] * batch), "measured_settings": self.n_settings,
               "split_identified": self.identifiable_split, "sources": self.sources,
               "timer_observations": self.n_timer, "at_bound": list(self.at_bound)}
        if self.theta is not None:
            out["theta_ms"] = dict(zip(THETA_NAMES, self.theta.tolist(), strict=True))
            out["unconstrained_params_ms"] = dict(zip(COST_NAMES, self.unconstrained_w.tolist(), strict=True))
        return out


def _prior(scale: float) -> tuple[np.ndarray, np.ndarray]:
    mu0 = np.array([0.5 * scale, 0.0, 0.5 * scale, 0.0, 0.01 * scale, 0.0, 0.03 * scale, 0.0, 0.0, 0.0])
    sd0 = np.array([math.sqrt(2) * scale, 0.05 * scale / math.sqrt(2), math.sqrt(2) * scale, 0.05 * scale / math.sqrt(2),
                    0.03 * scale, 0.003 * scale, 0.05 * scale, 0.003 * scale, 0.01 * scale, 0.001 * scale])
    return mu0, sd0


def fit_cost(measurements: Sequence[Measurement], *, rel_noise: float = REL_NOISE,
             timer_rel_noise: float = TIMER_REL_NOISE, baseline_round_ms: float | None = None) -> CostFit:
    """Bounded (θ ≥ 0) Bayesian fit of the round-time model to round times and, where given,
    the device timer's phase times (module docstring: model, units, priors, uncertainty)."""
    from scipy.optimize import lsq_linear

    rows, ys, sds, sources, settings = [], [], [], [], set()
    n_round = n_timer = 0
    has_v = has_d = False
    timer_obs = []
    for m in _spec(measurements):
        t, src = m.round_time_ms()
        b = max(1, m.concurrency)
        if t is not None and math.isfinite(t) and t > 0:
            rows.append(_theta_round(m.settings, b))
            ys.append(t)
            sds.append(rel_noise * t)
            sources.append(f"{m.settings.label()} @ B={m.concurrency}: {t:.2f} ms ({src})")
            settings.add(m.settings)
            n_round += 1
        ph = m.phases
        if ph is not None and ph.rounds > 0:
            pb = float(ph.batch) if ph.batch else float(b)
            vms, dms = ph.verify_ms_per_round(), ph.draft_ms_per_round()
            if ph.mix:  # several chain tiers pooled in one counter: the share-weighted mean round
                tot = sum(w for _, w in ph.mix) or 1.0
                xv = sum((w / tot) * _theta_verify(chain_settings(k), pb) for k, w in ph.mix)
                xd = sum((w / tot) * _theta_draft(chain_settings(k), pb) for k, w in ph.mix)
                what = "chain tiers " + " + ".join(f"{k} ({w / tot:.0%})" for k, w in ph.mix)
                per_step = ph.draft_ms_per_step()
            else:
                ps = m.settings if ph.steps is None else Settings(int(ph.steps), m.settings.topk,
                                                                  int(ph.steps) + 1 if m.settings.topk == 1
                                                                  else m.settings.draft_tokens)
                xv, xd, what = _theta_verify(ps, pb), _theta_draft(ps, pb), ps.label()
                per_step = ph.draft_ms_per_step(ps.steps)
            if vms > 0:
                timer_obs.append((xv, vms))
                has_v = True
            if dms > 0:
                timer_obs.append((xd, dms))
                has_d = True
            sources.append(f"{what} @ B={pb:g}: device timer {vms:.3f} ms verify + {dms:.3f} ms draft "
                           f"({per_step:.3f} ms per draft step) per round over {ph.rounds:g} rounds")
    scale = float(np.median(ys)) if ys else (baseline_round_ms or 10.0)
    for x, obs in timer_obs:
        rows.append(x)
        ys.append(obs)
        sds.append(max(timer_rel_noise * obs, 0.002 * scale))
        n_timer += 1
    mu0, sd0 = _prior(scale)
    prec0 = np.diag(1.0 / sd0 ** 2)
    if not ys:
        theta = np.maximum(mu0, 0.0)
        return CostFit(THETA_TO_W @ theta, THETA_TO_W @ np.diag(sd0 ** 2) @ THETA_TO_W.T, 0, 0, False, scale,
                       ["no timed measurement: priors only"], theta, mu0, np.diag(sd0 ** 2))
    X = np.vstack(rows)
    y = np.asarray(ys, float)
    wts = 1.0 / np.asarray(sds, float) ** 2
    prec = X.T @ (X * wts[:, None]) + prec0
    cov = np.linalg.inv(prec)
    cov = 0.5 * (cov + cov.T)
    mean = cov @ (X.T @ (wts * y) + prec0 @ mu0)
    r_up = np.linalg.cholesky(prec).T  # prec = RᵀR
    theta = np.maximum(lsq_linear(r_up, r_up @ mean, bounds=(0.0, np.inf), method="bvls").x, 0.0)
    n_groups = len(settings) + n_timer
    if n_groups > 2:
        chi2 = float(np.sum(wts * (y - X @ theta) ** 2)) / max(1, n_groups - 2)
        if chi2 > 1.0:
            cov = cov * chi2
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    at_bound = tuple(nm for nm, t, mu, s_ in zip(THETA_NAMES, theta, mean, sd, strict=True)
                     if t <= 1e-12 and mu < -0.25 * s_)
    nodes_vs_steps = {(s.draft_tokens - 1 - s.steps, s.topk) for s in settings}
    split = len(nodes_vs_steps) > 1 or (has_v and has_d)
    return CostFit(THETA_TO_W @ theta, THETA_TO_W @ cov @ THETA_TO_W.T, n_round, len(settings), split, scale, sources,
                   theta, mean, cov, n_timer, at_bound)
