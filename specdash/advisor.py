"""The advisor: an acceptance + step-cost model fitted to measurements → ranked suggestions.

Pure computation (numpy, scipy); no HTTP, no UI.  Inputs are :class:`Measurement` objects (one
per benchmarked setting, e.g. from a run's ``summary.json``), optionally a no-speculation
baseline.  Outputs are an :class:`Advice` (ranked :class:`Suggestion` s with predicted tok/s and
an uncertainty interval, a break-even acceptance and a plain verdict) and, for ``specdash
tune``, a :class:`TunePlanner` that picks the next setting to launch.

Definitions (``../shared/sglang/FACTS.md`` §11)
-----------------------------------------------
* steps S = ``--speculative-num-steps``, topk K = ``--speculative-eagle-topk``, draft tokens
  N = ``--speculative-num-draft-tokens`` (the verified tokens per request and round, root
  included, so N - 1 draft nodes); a chain is K = 1 and then N = S + 1.
* accept length τ (tokens per request per verify round, **bonus included**) =
  completion_tokens / verify_ct ∈ [1, S + 1]; accept rate (bonus excluded) = accepted drafts /
  (rounds · (N - 1)).
* accepted-drafts histogram h[k] = verify rounds that accepted exactly k drafts (bonus
  excluded), k = 0..S.

Acceptance model
----------------
Per-position conditional acceptance from the histogram:

    p_i = P(position i accepted | positions < i accepted) = Σ_{k≥i} h[k] / Σ_{k≥i-1} h[k]

(the rounds that reached position i are the denominator), with a Jeffreys Beta(s + ½, n - s + ½)
interval.  The unconditional probability that position i is accepted is P_i = Π_{l≤i} p_l and

    τ = 1 + Σ_{j=1}^{S} P_j                                           (chain)

With a constant per-position rate α this is Leviathan et al. 2023 ("Fast Inference from
Transformers via Speculative Decoding", ICML; expected tokens per iteration): E[tokens per round] = (1 - α^(γ+1)) / (1 - α)
with γ = S drafts.  Acceptance in practice decays with depth, so the advisor fits the family
used by specdash's simulator,

    p_i = α · d^(i-1)          (α: first-position acceptance, d: decay per position),

by maximum a-posteriori least squares: each histogram contributes one binomial residual per
position ((p̂_i - p_i) / se_i with a 0.02 over-dispersion floor); a run without a histogram
contributes its accept length τ (se 0.05).  Weak priors keep the fit defined with little data:
logit α ~ N(0, 2²), d centred on 0.9, log β ~ N(ln 0.3, 0.5²).  The Laplace (Gauss-Newton)
covariance gives the parameter uncertainty.

Tree model (topk > 1, an assumption, stated here)
-------------------------------------------------
EAGLE-2/3 (Li et al. 2024; Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of
Large Language Models via Training-Time Test") expands the top-K children of the K best
frontier nodes at each of S steps and keeps the N - 1 best nodes by path score; the tree can
hold at most 1 + K + (S - 1)·K² tokens.  The advisor models the accepted path only:

* with k_i drafted siblings under the accepted node at depth i, the target's token is among
  them with probability q_i = 1 - (1 - p_i)^(k_i^β) (k = 1 gives the chain's p_i; β ∈ (0, 1]
  expresses the diminishing value of lower-ranked candidates — β = 1 would treat every sibling
  as an independent top-1 guess);
* the N - 1 nodes are allocated greedily, one at a time, to the depth whose extra sibling (or
  the next depth) adds most to E[accepted], k_i ≤ K, depth ≤ S — the same "best path score
  first" order as EAGLE-2's re-ranking; nodes off the accepted path are ignored (optimistic,
  absorbed by β);
* β is fitted when runs with topk > 1 were measured, otherwise the prior β = 0.3 is used and
  the output says so.  The prior is deliberately modest: top-1 acceptance 0.6 then gives 0.75
  within 4 siblings and 0.82 within 8 (the usual size of the top-1 → top-5 gap of draft heads),
  and it is consistent with the seeds' tree run (16 draft tokens: accept length ≈ 2.1, 2.0–2.5
  in the server metrics, where the chain of 16 gave 1.9): with the seeds' fitted α ≈ 0.59,
  d ≈ 0.68 the model gives 2.3–2.4 for topk 4–8 at β = 0.3, but 2.6–2.8 at β = 0.5.

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

Prediction and ranking
----------------------
    predicted tok/s = 1000 · B · τ(setting) / T(setting)

which is SGLang's own score in ``scripts/playground/bench_speculative.py`` (``speed =
acc_length / step_time`` per request, step_time from ``step_time_dict``) times B.  The
uncertainty interval comes from 400 joint draws of the acceptance and cost parameters.
Candidates: steps 1..8, topk {1, 2, 4, 8}, draft tokens 2..16, kept only when SGLang would run
them as asked (:func:`_effective`: ``normalize_speculative`` from ``specdash.sglang.speculative``
plus the tree-capacity limit).

Break-even: holding d, β and the costs, the first-position acceptance α* at which the best
candidate equals the baseline tok/s, with the accept length that setting then needs
(τ* = baseline · T / (1000 · B)), and how much cheaper the round would have to be at the
current acceptance.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdash.sglang.speculative import normalize_speculative

# --- constants (documented priors) ---------------------------------------------------------

P_MAX = 0.995  # cap on a per-position acceptance probability
D_MAX = 1.2  # the decay d may exceed 1 slightly (acceptance rising with depth)
PRIOR_BETA = 0.3
PRIOR_D = 0.9
SIGMA_FLOOR = 0.02  # over-dispersion floor for a per-position estimate
TAU_SE = 0.05  # default standard error of an accept length without histogram
REL_NOISE = 0.03  # default relative error of a measured round time
N_DRAWS = 400

STEPS_GRID = tuple(range(1, 9))
TOPK_GRID = (1, 2, 4, 8)
DRAFT_GRID = tuple(range(2, 17))


# --- settings and measurements ---------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Settings:
    """Speculative settings as SGLang runs them (steps, topk, draft tokens)."""

    steps: int
    topk: int
    draft_tokens: int

    def label(self) -> str:
        return f"steps {self.steps} / topk {self.topk} / draft tokens {self.draft_tokens}"

    def to_json(self) -> dict[str, int]:
        return {"speculative_num_steps": self.steps, "speculative_eagle_topk": self.topk,
                "speculative_num_draft_tokens": self.draft_tokens}


@dataclass
class Measurement:
    """One benchmarked setting (``settings`` None = no speculation, a baseline run).

    ``output_tok_s``: aggregate output tok/s at ``concurrency`` requests in flight;
    ``accept_length``: τ (bonus included); ``accept_histogram``: SGLang's correct-drafts
    histogram (counts); ``tpot_ms`` or ``round_ms`` may stand in when tok/s is missing.
    """

    settings: Settings | None
    output_tok_s: float | None
    concurrency: int = 1
    accept_length: float | None = None
    accept_histogram: Sequence[int] | None = None
    tpot_ms: float | None = None
    round_ms: float | None = None
    accept_length_se: float | None = None
    label: str | None = None

    @classmethod
    def from_run(cls, run: Mapping[str, Any], *, concurrency: int = 1) -> Measurement:
        """Build from a ``summary.json`` RUN (CONTRACTS.md): effective settings, tok/s, τ, histogram."""
        eff = run.get("effective") or {}
        settings = None
        if eff.get("speculative_algorithm") and eff.get("speculative_num_steps"):
            settings = Settings(int(eff["speculative_num_steps"]), int(eff.get("speculative_eagle_topk") or 1),
                                int(eff.get("speculative_num_draft_tokens") or 0))
        tpot = run.get("tpot_ms") or {}
        return cls(settings, run.get("output_tok_s"), concurrency, run.get("accept_length"),
                   run.get("accept_histogram"), tpot.get("mean") if isinstance(tpot, Mapping) else None,
                   label=run.get("profile"))

    def tau(self) -> float | None:
        """Accept length: measured, else from the histogram (1 + mean accepted drafts)."""
        if self.accept_length:
            return float(self.accept_length)
        h = self.accept_histogram
        if h and sum(h) > 0:
            return 1.0 + sum(k * c for k, c in enumerate(h)) / float(sum(h))
        return None

    def round_time_ms(self) -> tuple[float | None, str]:
        """Observed time of one verify round (ms) and its source (see module docstring)."""
        b = max(1, int(self.concurrency))
        tau = self.tau() if self.settings is not None else 1.0
        if tau is None:
            return None, "no accept length"
        if self.output_tok_s and self.output_tok_s > 0:
            return 1000.0 * b * tau / float(self.output_tok_s), "output tok/s"
        if self.round_ms:
            return float(self.round_ms), "decode log"
        if self.tpot_ms:
            return float(self.tpot_ms) * tau, "TPOT"
        return None, "no timing"

    def tok_s(self) -> float | None:
        """Output tok/s, derived from the round time when only that is known."""
        if self.output_tok_s:
            return float(self.output_tok_s)
        t, _ = self.round_time_ms()
        tau = self.tau() if self.settings is not None else 1.0
        return 1000.0 * max(1, self.concurrency) * tau / t if t and tau else None


def round_ms_from_decode_log(gen_throughput: float, accept_len: float, running_req: int) -> float:
    """Round time (ms) from a ``Decode batch`` log window (FACTS.md §5): rounds/s =
    gen_throughput / (accept_len · #running-req)."""
    return 1000.0 * accept_len * running_req / gen_throughput


# --- SGLang normalisation -----------------------------------------------------------------------


def _effective(steps: int, topk: int, draft_tokens: int) -> Settings | None:
    """What SGLang runs for these flags, or None when it refuses them.

    Uses ``specdash.sglang.speculative.normalize_speculative`` (the launcher's rules: topk 1 forces
    draft tokens = steps + 1, a tree holds at most ``tree_capacity(steps, topk)`` tokens, …).
    """
    if steps < 1 or topk < 1 or draft_tokens < 2:
        return None
    res = normalize_speculative("EAGLE3", steps, topk, draft_tokens)
    if res.rejections:
        return None
    steps, topk, draft_tokens = int(res.num_steps), int(res.eagle_topk), int(res.num_draft_tokens)
    return Settings(steps, topk, draft_tokens)


def candidate_grid(steps: Iterable[int] = STEPS_GRID, topks: Iterable[int] = TOPK_GRID,
                   drafts: Iterable[int] = DRAFT_GRID, *, dominated: bool = False) -> list[Settings]:
    """Grid points SGLang runs exactly as asked (rewritten or rejected points are skipped).

    Unless ``dominated``, trees with more steps than draft nodes (steps > draft tokens - 1) are
    left out too: the tree cannot be deeper than its N - 1 nodes, so the extra draft steps are
    pure cost and (N - 1, topk, N) is always at least as fast.
    """
    out = []
    for s in steps:
        for k in topks:
            for n in drafts:
                eff = _effective(s, k, n)
                if eff is None or eff != Settings(s, k, n):
                    continue
                if not dominated and s > n - 1:
                    continue
                out.append(eff)
    return sorted(set(out))


# --- acceptance ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PositionEstimate:
    """Conditional acceptance of draft position i from a histogram (Jeffreys interval)."""

    position: int
    p: float
    lo: float
    hi: float
    reached: int
    accepted: int
    unconditional: float  # P_i = Π_{l≤i} p_l

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "p": self.p, "ci": [self.lo, self.hi], "reached": self.reached,
                "accepted": self.accepted, "unconditional": self.unconditional}


def position_counts(hist: Sequence[int], max_position: int | None = None) -> list[tuple[int, int]]:
    """(accepted s_i, reached n_i) for positions i = 1..: s_i = Σ_{k≥i} h[k], n_i = Σ_{k≥i-1} h[k]."""
    h = [int(c) for c in hist]
    top = len(h) - 1 if max_position is None else max_position
    tail = np.cumsum(h[::-1])[::-1].tolist() + [0] * max(0, top + 1 - len(h))
    return [(int(tail[i]) if i < len(tail) else 0, int(tail[i - 1])) for i in range(1, top + 1)]


def position_acceptance(hist: Sequence[int], *, max_position: int | None = None,
                        confidence: float = 0.95) -> list[PositionEstimate]:
    """Per-position conditional acceptance p_i with a Jeffreys Beta interval (module docstring).

    Positions never reached (n_i = 0) are omitted.
    """
    from scipy import stats

    out = []
    prod = 1.0
    for i, (s, n) in enumerate(position_counts(hist, max_position), start=1):
        if n <= 0:
            break
        p = s / n
        lo, hi = stats.beta.ppf([(1 - confidence) / 2, (1 + confidence) / 2], s + 0.5, n - s + 0.5)
        prod *= p
        out.append(PositionEstimate(i, p, float(lo if s > 0 else 0.0), float(hi if s < n else 1.0), n, s, prod))
    return out


def chain_accept_length(p: Sequence[float]) -> float:
    """τ = 1 + Σ_j Π_{i≤j} p_i (bonus included)."""
    return 1.0 + float(np.sum(np.cumprod(np.asarray(p, dtype=float))))


def leviathan_tokens_per_round(alpha: float, gamma: int) -> float:
    """Leviathan et al. 2023 (expected tokens per iteration): E[tokens per round] = (1 - α^(γ+1)) / (1 - α)."""
    if abs(1.0 - alpha) < 1e-12:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def position_probs(alpha: float, d: float, depth: int) -> np.ndarray:
    """p_i = α · d^(i-1), i = 1..depth, capped at ``P_MAX``."""
    return np.minimum(alpha * d ** np.arange(depth), P_MAX)


def _q(p, k, beta):
    return 1.0 - (1.0 - p) ** (np.asarray(k, dtype=float) ** beta)


def tree_branching(p: Sequence[float], settings: Settings, beta: float) -> list[int]:
    """Drafted siblings k_i under the accepted node per depth (greedy, see "Tree model").

    A chain (topk 1) is k_i = 1 for i = 1..S.  Depth is at most min(S, N - 1).
    """
    depth_max = min(settings.steps, settings.draft_tokens - 1)
    if settings.topk == 1 or depth_max <= 0:
        return [1] * max(depth_max, 0)
    p = [float(x) for x in p]
    k = [1]
    for _ in range(settings.draft_tokens - 2):
        q = [float(_q(p[i], k[i], beta)) for i in range(len(k))]
        pref = np.cumprod(q)
        suffix = np.cumsum(pref[::-1])[::-1]
        best_gain, best = -1.0, None
        for i in range(len(k)):
            if k[i] < settings.topk and q[i] > 0:
                gain = (float(_q(p[i], k[i] + 1, beta)) / q[i] - 1.0) * suffix[i]
                if gain > best_gain:
                    best_gain, best = gain, i
        if len(k) < depth_max:
            gain = float(pref[-1]) * p[len(k)]
            if gain > best_gain:
                best_gain, best = gain, len(k)
        if best is None:
            break
        if best == len(k):
            k.append(1)
        else:
            k[best] += 1
    return k


def expected_accept_length(p: Sequence[float], branching: Sequence[int], beta: float) -> float:
    """τ = 1 + Σ_j Π_{i≤j} q_i with q_i = 1 - (1 - p_i)^(k_i^β)."""
    if not branching:
        return 1.0
    q = _q(np.asarray(p[: len(branching)], dtype=float), branching, beta)
    return 1.0 + float(np.sum(np.cumprod(q)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p):
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


@dataclass
class AcceptanceFit:
    """Fitted acceptance: p_i = α·d^(i-1), tree exponent β, and their Laplace covariance.

    ``x``/``cov`` are in the unconstrained space (logit α, logit(d / D_MAX), log β).
    """

    x: np.ndarray
    cov: np.ndarray
    beta_fitted: bool
    n_positions: int
    n_tau: int

    @property
    def alpha(self) -> float:
        return float(_sigmoid(self.x[0]))

    @property
    def d(self) -> float:
        return float(D_MAX * _sigmoid(self.x[1]))

    @property
    def beta(self) -> float:
        return float(np.exp(self.x[2]))

    def sd(self) -> dict[str, float]:
        """Approximate standard deviations of α, d, β (delta method)."""
        a, d, b = self.alpha, self.d, self.beta
        sd = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        return {"alpha": a * (1 - a) * sd[0], "d": d * (1 - d / D_MAX) * sd[1], "beta": b * sd[2]}

    def probs(self, depth: int) -> np.ndarray:
        return position_probs(self.alpha, self.d, depth)

    def draws(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = rng.multivariate_normal(self.x, self.cov, size=n, method="eigh")
        return _sigmoid(z[:, 0]), D_MAX * _sigmoid(z[:, 1]), np.exp(z[:, 2])


def _spec(ms: Iterable[Measurement]) -> list[Measurement]:
    return [m for m in ms if m.settings is not None]


def fit_acceptance(measurements: Sequence[Measurement]) -> AcceptanceFit:
    """MAP fit of (α, d, β) to histograms (per-position binomials) or accept lengths.

    Branching per tree run is computed at the previous estimate and the fit repeated (up to three
    times) until it settles, so
    the greedy (integer) allocation never sits inside the optimiser.
    """
    from scipy.optimize import least_squares

    spec = [m for m in _spec(measurements) if m.tau() is not None]
    has_tree = any(m.settings.topk > 1 for m in spec)
    prior_mu = np.array([0.0, _logit(PRIOR_D / D_MAX), math.log(PRIOR_BETA)])
    prior_sd = np.array([2.0, 1.5, 0.5])
    x = prior_mu.copy()
    if spec:  # start from the mean accept rate of the first run
        m0 = spec[0]
        x[0] = _logit(min(0.95, max(0.02, (m0.tau() - 1) / max(1, m0.settings.steps) * 1.3)))
    n_pos = n_tau = 0
    res = None
    for _ in range(3):
        a0, d0, b0 = float(_sigmoid(x[0])), float(D_MAX * _sigmoid(x[1])), float(np.exp(x[2]))
        blocks = []
        n_pos = n_tau = 0
        for m in spec:
            s = m.settings
            depth = min(s.steps, s.draft_tokens - 1)
            br = tree_branching(position_probs(a0, d0, depth), s, b0)
            hist = m.accept_histogram
            if hist and sum(hist) > 0:
                counts = [(si, ni) for si, ni in position_counts(hist, len(br)) if ni > 0]
                if counts:
                    sa = np.array([c[0] for c in counts], float)
                    na = np.array([c[1] for c in counts], float)
                    pbar = (sa + 0.5) / (na + 1.0)
                    se = np.sqrt(pbar * (1 - pbar) / na + SIGMA_FLOOR ** 2)
                    blocks.append(("pos", br[: len(counts)], sa / na, se))
                    n_pos += len(counts)
                    continue
            blocks.append(("tau", br, m.tau(), m.accept_length_se or TAU_SE))
            n_tau += 1

        def resid(z, blocks=blocks):
            a, d, b = _sigmoid(z[0]), D_MAX * _sigmoid(z[1]), np.exp(z[2])
            out = []
            for kind, br, obs, se in blocks:
                q = _q(position_probs(a, d, len(br)), br, b)
                if kind == "pos":
                    out.append((obs - q) / se)
                else:
                    out.append(np.atleast_1d((obs - (1.0 + np.sum(np.cumprod(q)))) / se))
            out.append((z - prior_mu) / prior_sd)
            return np.concatenate(out)

        res = least_squares(resid, x, method="trf", x_scale=1.0)
        if np.allclose(res.x, x, atol=1e-4):
            x = res.x
            break
        x = res.x
    jac = res.jac if res is not None else np.diag(1 / prior_sd)
    cov = np.linalg.pinv(jac.T @ jac)
    return AcceptanceFit(np.asarray(x, float), cov, has_tree, n_pos, n_tau)


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


# --- advice ----------------------------------------------------------------------------------------


@dataclass
class Prediction:
    settings: Settings
    tok_s: float
    lo: float
    hi: float
    accept_length: float
    round_ms: float
    branching: list[int]


@dataclass
class Suggestion:
    """A ranked change: predicted tok/s (with interval), speedups and the reason, with numbers."""

    settings: Settings
    predicted_tok_s: float
    ci: tuple[float, float]
    speedup_vs_current: float | None
    speedup_vs_baseline: float | None
    why: str
    predicted_accept_length: float = 0.0
    predicted_round_ms: float = 0.0
    measured_tok_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings.to_json(), "predicted_tok_s": self.predicted_tok_s,
                "ci": list(self.ci), "speedup_vs_current": self.speedup_vs_current,
                "speedup_vs_baseline": self.speedup_vs_baseline, "why": self.why,
                "predicted_accept_length": self.predicted_accept_length,
                "predicted_round_ms": self.predicted_round_ms, "measured_tok_s": self.measured_tok_s}


@dataclass
class BreakEven:
    """Acceptance (and round cost) at which speculation would equal the baseline."""

    alpha: float | None  # first-position acceptance α*, d and β held; None = unreachable
    settings: Settings | None
    accept_length: float | None
    accept_rate: float | None
    round_cheaper_pct: float | None  # at the current acceptance, for the best setting
    current_alpha: float

    def to_json(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "settings": self.settings.to_json() if self.settings else None,
                "accept_length": self.accept_length, "accept_rate": self.accept_rate,
                "round_cheaper_pct": self.round_cheaper_pct, "current_alpha": self.current_alpha}


@dataclass
class Advice:
    """The advisor's output (see :func:`advise`)."""

    current: Settings | None
    current_tok_s: float | None
    baseline_tok_s: float | None
    batch: int
    suggestions: list[Suggestion]
    best: Prediction | None
    break_even: BreakEven | None
    verdict: str
    pays: bool | None
    acceptance: AcceptanceFit
    cost: CostFit
    positions: list[PositionEstimate]
    notes: list[str]
    predictions: list[Prediction] = field(default_factory=list, repr=False)

    def to_json(self) -> dict[str, Any]:
        acc_sd = self.acceptance.sd()
        return {
            "verdict": self.verdict,
            "pays": self.pays,
            "current": self.current.to_json() if self.current else None,
            "current_tok_s": self.current_tok_s,
            "baseline_tok_s": self.baseline_tok_s,
            "concurrency": self.batch,
            "suggestions": [s.to_json() for s in self.suggestions],
            "break_even": self.break_even.to_json() if self.break_even else None,
            "acceptance": {"alpha": self.acceptance.alpha, "d": self.acceptance.d, "beta": self.acceptance.beta,
                           "sd": acc_sd, "beta_fitted": self.acceptance.beta_fitted,
                           "positions": [p.to_json() for p in self.positions]},
            "cost": self.cost.to_json(self.batch),
            "notes": self.notes,
        }

    def render(self) -> str:
        """Plain text for the terminal."""
        out = [self.verdict, ""]
        a = self.acceptance
        out.append(f"acceptance: p_i = {a.alpha:.3f} · {a.d:.3f}^(i-1); tree exponent β = {a.beta:.2f}"
                   f"{'' if a.beta_fitted else ' (prior)'}")
        if self.positions:
            out.append("  position  p(accept | reached)  95% CI          P(accepted)")
            for p in self.positions:
                out.append(f"  {p.position:>8}  {p.p:>19.3f}  [{p.lo:.3f}, {p.hi:.3f}]  {p.unconditional:>11.3f}")
        v, dstep = self.cost.per_token_ms(self.batch)
        out.append(f"round cost at concurrency {self.batch}: base {self.cost.w[0] + self.cost.w[1] * self.batch:.2f} ms"
                   f" + {v:.3f} ms per draft token (verify) + {dstep:.3f} ms per draft step")
        out.append("")
        if self.suggestions:
            out.append("suggestions (predicted output tok/s, 95% interval):")
            for i, s in enumerate(self.suggestions, 1):
                vs_b = f", ×{s.speedup_vs_baseline:.2f} vs baseline" if s.speedup_vs_baseline else ""
                vs_c = f"×{s.speedup_vs_current:.2f} vs current" if s.speedup_vs_current else ""
                out.append(f" {i}. {s.settings.label()}: {s.predicted_tok_s:.1f} tok/s "
                           f"[{s.ci[0]:.1f}, {s.ci[1]:.1f}] {vs_c}{vs_b}")
                out.append(f"    why: {s.why}")
        if self.break_even and self.break_even.alpha is not None:
            be = self.break_even
            out.append("")
            out.append(f"break-even: first-position acceptance α ≥ {be.alpha:.3f} (now {be.current_alpha:.3f}), "
                       f"accept length ≥ {be.accept_length:.2f} at {be.settings.label() if be.settings else '?'}")
        for n in self.notes:
            out.append(f"note: {n}")
        return "\n".join(out)


def _baseline_tok_s(baseline: float | Measurement | None) -> tuple[float | None, int | None]:
    if baseline is None:
        return None, None
    if isinstance(baseline, Measurement):
        return baseline.tok_s(), baseline.concurrency
    return float(baseline), None


class _Model:
    """Fitted acceptance + cost with vectorised prediction over candidates."""

    def __init__(self, measurements: Sequence[Measurement], batch: int, seed: int = 0):
        self.acc = fit_acceptance(measurements)
        self.cost = fit_cost(measurements)
        self.batch = batch
        rng = np.random.default_rng(seed)
        self.a_draws = self.acc.draws(N_DRAWS, rng)
        self.w_draws = rng.multivariate_normal(self.cost.w, self.cost.cov, size=N_DRAWS, method="eigh")
        # Model misfit: rms log-error of the point predictions at the measured settings (this
        # batch), beyond the measurement noise.  It widens every interval (see predict()).
        self.misfit = 0.0
        logs: dict[Settings, list[float]] = {}
        for m in _spec(measurements):
            tok = m.tok_s()
            if m.concurrency == batch and tok and m.tau() is not None:
                logs.setdefault(m.settings, []).append(math.log(tok / self._point(m.settings)[0]))
        if len(logs) >= 2:
            ms2 = float(np.mean([np.mean(v) ** 2 for v in logs.values()]))
            self.misfit = math.sqrt(max(0.0, ms2 - REL_NOISE ** 2))

    def _point(self, s: Settings) -> tuple[float, float, float, list[int]]:
        br = self.branching(s)
        tau = expected_accept_length(self.acc.probs(len(br)), br, self.acc.beta)
        t = self.cost.round_ms(s, self.batch)
        return 1000.0 * self.batch * tau / t, tau, t, br

    def branching(self, s: Settings, alpha: float | None = None) -> list[int]:
        a = self.acc.alpha if alpha is None else alpha
        depth = min(s.steps, s.draft_tokens - 1)
        return tree_branching(position_probs(a, self.acc.d, depth), s, self.acc.beta)

    def predict(self, s: Settings) -> Prediction:
        """Point prediction and 95 % interval: parameter draws, widened by the misfit in log space
        (half-widths added in quadrature with 1.96 · misfit)."""
        tok, tau, t, br = self._point(s)
        a, d, b = self.a_draws
        depth = len(br)
        if depth:
            p = np.minimum(a[:, None] * d[:, None] ** np.arange(depth)[None, :], P_MAX)
            q = 1.0 - (1.0 - p) ** (np.asarray(br, float)[None, :] ** b[:, None])
            taus = 1.0 + np.cumprod(q, axis=1).sum(axis=1)
        else:
            taus = np.ones(N_DRAWS)
        # A verify round is at least one target forward: no draw may be cheaper than 80 % of the
        # fitted plain step (b0 + b1·B), else far-off settings get absurd upper bounds.
        step = float(self.cost.w[0] + self.cost.w[1] * self.batch)
        ts = np.maximum(self.w_draws @ cost_features(s, self.batch), max(0.05 * self.cost.scale_ms, 0.8 * step))
        toks = 1000.0 * self.batch * taus / ts
        lo, hi = (float(x) for x in np.percentile(toks, [2.5, 97.5]))
        lo, hi = min(lo, tok), max(hi, tok)
        if self.misfit > 0:
            extra = (1.96 * self.misfit) ** 2
            lo = tok * math.exp(-math.sqrt(math.log(tok / lo) ** 2 + extra))
            hi = tok * math.exp(math.sqrt(math.log(hi / tok) ** 2 + extra))
        return Prediction(s, tok, lo, hi, tau, t, br)


def _reach(model: _Model, pred: Prediction) -> np.ndarray:
    """Unconditional probability that depth i of this setting's tree/chain is accepted."""
    br = pred.branching
    if not br:
        return np.zeros(0)
    return np.cumprod(_q(model.acc.probs(len(br)), br, model.acc.beta))


def _why(model: _Model, cand: Prediction, cur: Prediction | None, cur_meas: Measurement | None,
         measured: float | None) -> str:
    """A reason with numbers: acceptance by position, cost per token/step, τ and round time."""
    acc = model.acc
    v, dstep = model.cost.per_token_ms(model.batch)
    s = cand.settings
    parts = []
    if cur is not None:
        c = cur.settings
        tau_c = cur_meas.tau() if cur_meas is not None else None
        if tau_c is not None and c.draft_tokens > 1:
            head = f"accept rate {(tau_c - 1.0) / (c.draft_tokens - 1):.2f} with {c.draft_tokens} draft tokens"
        else:
            head = f"from {c.label()}"
        reach_c, reach_s = _reach(model, cur), _reach(model, cand)
        if s.steps < c.steps or (s.draft_tokens < c.draft_tokens and s.topk == c.topk):
            cut = next((i for i, u in enumerate(reach_c, 1) if u < 0.05), None)
            if cut is not None:
                parts.append(f"{head}: positions beyond {cut - 1} are accepted < 5 % of the time "
                             f"(P{cut} = {reach_c[cut - 1]:.3f}) but cost {dstep + v:.2f} ms each "
                             f"({dstep:.2f} draft step + {v:.2f} verify)")
            elif reach_c.size:
                parts.append(f"{head}: the last position is accepted {reach_c[-1] * 100:.0f} % of the time, "
                             f"not worth its {dstep + v:.2f} ms ({dstep:.2f} draft step + {v:.2f} verify)")
        elif s.steps > c.steps and reach_s.size:
            parts.append(f"{head}: position {len(reach_s)} would still be accepted "
                         f"{reach_s[-1] * 100:.0f} % of the time for {dstep:.2f} ms per draft step + {v:.2f} ms per verified token, against a "
                         f"{cur.round_ms:.1f} ms round")
        else:
            parts.append(head)
        if s.topk > 1 and cand.branching:
            q1 = float(_q(acc.alpha, cand.branching[0], acc.beta))
            parts.append(f"topk {s.topk} with {s.draft_tokens - 1} tree nodes raises depth-1 acceptance from "
                         f"{acc.alpha:.2f} to {q1:.2f} (siblings per depth {cand.branching}; "
                         f"β = {acc.beta:.2f}{'' if acc.beta_fitted else ', prior'}) at {v:.2f} ms per verified token")
        elif c.topk > 1:
            parts.append(f"a chain drops {c.draft_tokens - 1 - len(cur.branching)} off-path tree nodes "
                         f"({v:.2f} ms each to verify)")
        parts.append(f"accept length {cand.accept_length:.2f} vs {cur.accept_length:.2f}, "
                     f"round {cand.round_ms:.1f} ms vs {cur.round_ms:.1f} ms")
    else:
        parts.append(f"accept length {cand.accept_length:.2f} per {cand.round_ms:.1f} ms round")
    if measured is not None:
        parts.append(f"measured {measured:.1f} tok/s")
    return "; ".join(parts)


def _break_even(model: _Model, preds: Sequence[Prediction], baseline: float, best: Prediction) -> BreakEven:
    """α* where the best candidate's predicted tok/s equals the baseline (d, β, costs held)."""
    acc = model.acc
    alphas = np.linspace(0.005, P_MAX, 400)
    best_curve = np.zeros_like(alphas)
    best_idx = np.zeros(alphas.size, int)
    for j, pr in enumerate(preds):
        br = pr.branching
        if not br:
            continue
        p = np.minimum(alphas[:, None] * acc.d ** np.arange(len(br))[None, :], P_MAX)
        q = 1.0 - (1.0 - p) ** (np.asarray(br, float)[None, :] ** acc.beta)
        tok = 1000.0 * model.batch * (1.0 + np.cumprod(q, axis=1).sum(axis=1)) / pr.round_ms
        better = tok > best_curve
        best_curve = np.where(better, tok, best_curve)
        best_idx = np.where(better, j, best_idx)
    t_needed = 1000.0 * model.batch * best.accept_length / baseline
    cheaper = max(0.0, (1.0 - t_needed / best.round_ms) * 100.0)
    over = np.nonzero(best_curve >= baseline)[0]
    if over.size == 0:
        return BreakEven(None, None, None, None, cheaper, acc.alpha)
    i = int(over[0])
    if i > 0:  # linear interpolation of the crossing
        f0, f1 = best_curve[i - 1], best_curve[i]
        a_star = float(alphas[i - 1] + (baseline - f0) / (f1 - f0) * (alphas[i] - alphas[i - 1]))
    else:
        a_star = float(alphas[0])
    pr = preds[int(best_idx[i])]
    s = pr.settings
    tau_star = baseline * pr.round_ms / (1000.0 * model.batch)
    rate = (tau_star - 1.0) / (s.draft_tokens - 1) if s.draft_tokens > 1 else None
    return BreakEven(a_star, s, tau_star, rate, cheaper, acc.alpha)


def advise(
    measurements: Sequence[Measurement],
    baseline: float | Measurement | None = None,
    *,
    current: Settings | None = None,
    candidates: Sequence[Settings] | None = None,
    top: int = 5,
    seed: int = 0,
) -> Advice:
    """Fit the models to ``measurements`` and rank the candidate settings.

    ``baseline``: no-speculation output tok/s at the same concurrency (a number or a
    :class:`Measurement` with ``settings=None``).  ``current``: the setting to compare against
    (default: the first speculative measurement).  ``candidates``: default
    :func:`candidate_grid`.  Raises ValueError without any usable speculative measurement.
    """
    spec = [m for m in _spec(measurements) if m.tau() is not None and m.round_time_ms()[0] is not None]
    if not spec:
        raise ValueError("the advisor needs at least one speculative measurement with tok/s and accept length")
    base_list = [m for m in measurements if m.settings is None]
    if baseline is None and base_list:
        baseline = base_list[0]
    base_tok, base_b = _baseline_tok_s(baseline)
    batch = max(1, int(spec[0].concurrency))
    notes: list[str] = []
    if any(m.concurrency != batch for m in spec):
        notes.append(f"measurements at several concurrencies; predictions are for concurrency {batch}")
    if base_b is not None and base_b != batch:
        notes.append(f"baseline measured at concurrency {base_b}, speculation at {batch}: compare with care")
    model = _Model(spec, batch, seed)
    cur_meas = next((m for m in spec if m.settings == current), None) if current else spec[0]
    current = current or spec[0].settings
    measured: dict[Settings, list[float]] = {}
    for m in spec:
        measured.setdefault(m.settings, []).append(float(m.tok_s()))
    cands = list(candidates) if candidates is not None else candidate_grid()
    if current not in cands:
        cands.append(current)
    preds = [model.predict(s) for s in cands]
    preds.sort(key=lambda p: -p.tok_s)
    by_settings = {p.settings: p for p in preds}
    cur_pred = by_settings[current]
    cur_tok = float(np.exp(np.mean(np.log(measured[current])))) if current in measured else cur_pred.tok_s
    best = preds[0]

    chain_hists = [m for m in spec if m.settings.topk == 1 and m.accept_histogram]
    positions: list[PositionEstimate] = []
    if chain_hists:
        depth = max(m.settings.steps for m in chain_hists)
        pooled = [0] * (depth + 1)
        for m in chain_hists:  # pooling is valid for chains: p_i does not depend on S
            for k, c in enumerate(m.accept_histogram[: depth + 1]):
                pooled[k] += int(c)
        positions = position_acceptance(pooled)
    suggestions = []
    seen_family: set[tuple[int, int]] = set()
    for p in preds:  # best per (steps, topk) family first, so the list shows different directions
        fam = (p.settings.steps, p.settings.topk)
        if p.settings == current or fam in seen_family:
            continue
        seen_family.add(fam)
        meas = measured.get(p.settings)
        m_tok = float(np.exp(np.mean(np.log(meas)))) if meas else None
        suggestions.append(Suggestion(
            p.settings, p.tok_s, (p.lo, p.hi), p.tok_s / cur_tok if cur_tok else None,
            p.tok_s / base_tok if base_tok else None,
            _why(model, p, cur_pred, cur_meas, m_tok), p.accept_length, p.round_ms, m_tok))
        if len(suggestions) >= top:
            break

    if not model.acc.beta_fitted:
        notes.append(f"no topk > 1 run measured: tree gain uses the prior β = {PRIOR_BETA} (wider intervals)")
    if model.cost.n_settings < 2:
        notes.append("one measured setting: the per-step and per-token costs come from priors "
                     "(measure a second setting for a real fit)")
    elif not model.cost.identifiable_split:
        notes.append("chain runs only: the split between draft-step and verify cost comes from priors")
    if model.misfit > 0.01:
        notes.append(f"the model misses the measured settings by {model.misfit:.1%} rms beyond measurement noise; "
                     "the intervals include it")
    if model.acc.alpha < 0.05:
        notes.append(f"first-position acceptance {model.acc.alpha:.3f}: drafts are almost never accepted — "
                     "a wiring fault (wrong algorithm, dropped weights, missing aux hidden states) or an "
                     "untrained draft; run `specdash draft selftest` to tell them apart")

    be = None
    pays: bool | None = None
    label = best.settings.label()
    if base_tok:
        be = _break_even(model, preds, base_tok, best)
        pays = best.tok_s > base_tok
        if pays:
            verdict = (f"speculation pays: best predicted {best.tok_s:.1f} tok/s [{best.lo:.1f}, {best.hi:.1f}] "
                       f"with {label}, ×{best.tok_s / base_tok:.2f} the baseline {base_tok:.1f} tok/s")
            if be.alpha is not None:
                verdict += f"; it would stop paying below first-position acceptance {be.alpha:.2f}"
        else:
            verdict = (f"speculation does not pay with this draft: best predicted {best.tok_s:.1f} tok/s "
                       f"({label}) vs baseline {base_tok:.1f}; to break even ")
            if be.alpha is not None and be.settings is not None:
                verdict += (f"the draft needs first-position acceptance α ≥ {be.alpha:.2f} (now {model.acc.alpha:.2f}), "
                            f"i.e. accept length ≥ {be.accept_length:.2f} (accept rate ≥ {be.accept_rate:.2f}) at "
                            f"{be.settings.label()}, or a verify round cheaper by {be.round_cheaper_pct:.0f} %")
            else:
                verdict += (f"no draft acceptance is enough with this per-position decay (d = {model.acc.d:.2f}): "
                            f"the verify round must get cheaper by {be.round_cheaper_pct:.0f} %")
            verdict += " — serve without speculation until then"
    else:
        verdict = (f"no baseline measured: best predicted {best.tok_s:.1f} tok/s with {label} "
                   f"(×{best.tok_s / cur_tok:.2f} the current); run the baseline to know whether speculation pays")
    return Advice(current, cur_tok, base_tok, batch, suggestions, best, be, verdict, pays, model.acc, model.cost,
                  positions, notes, preds)


# --- tune planner ------------------------------------------------------------------------------------


class TunePlanner:
    """Closed-loop search policy for ``specdash tune`` (the lead's runner launches the servers).

    Policy: measure ``start``; then the advisor's top prediction (pure exploit, the fastest way
    to learn the cost slope); then, refitting after every measurement, the unmeasured candidate
    with the best optimistic score μ + κ·(hi - μ) (κ = 0.5 while more than one launch remains,
    0 for the last); never re-measure; stop when ``budget`` launches are spent or when even the
    upper end of the best candidate's interval does not beat the best measured tok/s by more
    than ``min_gain`` (relative; default 1 %, about the run-to-run noise): nothing left is
    worth a launch.  :meth:`best` returns the recommendation (a measured setting).
    """

    def __init__(self, start: Settings, budget: int = 8, *, baseline: float | Measurement | None = None,
                 candidates: Sequence[Settings] | None = None, min_gain: float = 0.01, seed: int = 0):
        eff = _effective(start.steps, start.topk, start.draft_tokens)
        self.start = eff or start
        self.budget = int(budget)
        self.baseline = baseline
        self.candidates = list(candidates) if candidates is not None else candidate_grid()
        self.min_gain = min_gain
        self.seed = seed
        self.reason = ""
        self.last_advice: Advice | None = None

    @staticmethod
    def _measured(measurements: Sequence[Measurement]) -> dict[Settings, float]:
        out: dict[Settings, list[float]] = {}
        for m in _spec(measurements):
            tok = m.tok_s()
            if tok:
                out.setdefault(m.settings, []).append(tok)
        return {s: float(np.exp(np.mean(np.log(v)))) for s, v in out.items()}

    def next_settings(self, measurements: Sequence[Measurement]) -> Settings | None:
        """The next setting to launch, or None to stop (``reason`` says why)."""
        launched = len(_spec(measurements))
        measured = self._measured(measurements)
        if launched >= self.budget:
            self.reason = f"budget of {self.budget} launches spent"
            return None
        if self.start not in measured:
            self.reason = "measure the starting settings"
            return self.start
        adv = advise(measurements, self.baseline, current=self.start, candidates=self.candidates,
                     top=1, seed=self.seed)
        self.last_advice = adv
        best_meas = max(measured.values())
        open_preds = [p for p in adv.predictions if p.settings not in measured]
        if not open_preds:
            self.reason = "every candidate measured"
            return None
        if max(p.hi for p in open_preds) < best_meas * (1.0 + self.min_gain):
            self.reason = (f"no unmeasured setting can beat the best measured {best_meas:.1f} tok/s by more than "
                           f"{self.min_gain:.0%} (upper interval ends)")
            return None
        remaining = self.budget - launched
        kappa = 0.0 if (launched == 1 or remaining == 1) else 0.5
        pick = max(open_preds, key=lambda p: p.tok_s + kappa * (p.hi - p.tok_s))
        self.reason = (f"predicted {pick.tok_s:.1f} tok/s [{pick.lo:.1f}, {pick.hi:.1f}] vs best measured "
                       f"{best_meas:.1f} ({'exploit' if kappa == 0 else 'optimistic'} pick)")
        return pick.settings

    def advice(self, measurements: Sequence[Measurement], *, top: int = 5) -> Advice:
        """The advisor's full output on everything measured so far (for the tune report)."""
        return advise(measurements, self.baseline, current=self.start, candidates=self.candidates, top=top,
                      seed=self.seed)

    def best(self, measurements: Sequence[Measurement]) -> Settings:
        """The recommendation among the measured settings.

        Each measured setting is scored by the geometric mean of its measured tok/s and the
        model's prediction after the final refit, a shrinkage estimate: one launch carries a few
        % of noise, the model pools every launch.  (On the test oracle this never did worse than
        the best raw measurement and removed its worst picks.)
        """
        measured = self._measured(measurements)
        if not measured:
            return self.start
        try:
            adv = advise(measurements, self.baseline, current=self.start, candidates=list(measured), top=1,
                         seed=self.seed)
        except ValueError:
            return max(measured, key=measured.get)
        pred = {p.settings: p.tok_s for p in adv.predictions}
        return max(measured, key=lambda s: math.sqrt(measured[s] * pred.get(s, measured[s])))
