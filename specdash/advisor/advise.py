"""Prediction, ranking, break-even and the verdict.

Prediction and ranking
----------------------
    predicted tok/s = 1000 · B · τ(setting) / (T(setting) + τ(setting) · c_B)

which without c is SGLang's own score in ``scripts/playground/bench_speculative.py`` (``speed =
acc_length / step_time`` per request, step_time from ``step_time_dict``) times B; τ from the
acceptance model (:mod:`.acceptance`), T (ms per decode round) from the cost model (:mod:`.cost`).
c_B (ms per output token, :func:`prefill_ms_per_token`) is the part of a client's tok/s that is not
decode rounds — the prefills, amortised over each request's tokens: a client measures
1000 · B / tok/s = TTFT/M + TPOT · (M − 1)/M per token (M tokens a request), so the decode round
T = τ · TPOT and c_B = 1000 · B / tok/s − TPOT, the same for every speculative setting of one
suite and load (the median over the launches at B; 0 where none has TPOT, as for adaptive tiers and
decode-log figures, which hold no prefill).  Fitting T to 1000 · B · τ / tok/s instead (before)
charged every round τ · c_B more, a cost proportional to the accept length that the round-time
features cannot follow: on the calibrated real bed (c ≈ 0.1 ms a token, rounds 3–4 ms) it read a
tree of τ 3.7 about 1 % dearer against a chain of τ 3.0 than it is.
The 95 % interval comes from 400 joint draws of the acceptance parameters (Laplace) and of
the cost parameters (the truncated posterior: every drawn cost ≥ 0), widened by the model's
misfit at the measured settings.  Candidates: steps 1..10, topk {1, 2, 4, 8, 16}, draft tokens
2..32 and 40, 48, 56, 64 (:data:`~specdash.advisor.measurement.DRAFT_GRID`), kept only when SGLang
would run them as asked (:func:`_effective`: ``normalize_speculative`` from
``specdash.sglang.speculative`` plus the tree-capacity limit) and not dominated
(:func:`~specdash.advisor.measurement.candidate_grid`) — about 900 settings.  Prediction is
vectorised over candidates and draws (:meth:`_Model.predict_many`), and the sibling
allocation runs once per (steps, topk) for every draft-token count
(:func:`~specdash.advisor.acceptance.tree_branchings`), so one advice takes ~0.2 s on two cores.

Break-even: holding d, β and the costs, the first-position acceptance α* at which the best
candidate equals the baseline tok/s, with the accept length that setting then needs
(τ* = baseline · T / (1000 · B − baseline · c_B)), and how much cheaper the round would have to be
at the current acceptance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdash.advisor.acceptance import (
    P_MAX,
    PRIOR_BETA,
    AcceptanceFit,
    PositionEstimate,
    expected_accept_by_position,
    expected_accept_length,
    extrapolate,
    fit_acceptance,
    pooled_position_acceptance,
    tree_branchings,
)
from specdash.advisor.cost import COST_NAMES, REL_NOISE, CostFit, cost_features, fit_cost
from specdash.advisor.measurement import Measurement, Settings, _spec, candidate_grid

N_DRAWS = 400
_CHUNK = 128  # settings per vectorised prediction block (128 × 400 draws × depth floats)
_FAMILY_TOP = 64  # draft tokens one allocation pass covers per (steps, topk) (more on demand)
#: Floor on the standard error of a measured chain accept length in :func:`chain_tau_bounds` (the
#: run-to-run spread of τ at one setting on real servers: ≤ 0.01-0.02 on an 8B testbed; 3.022-3.059 for
#: 5/1/6 over three loans with SmolLM2-135M and a trained draft).
CHAIN_TAU_SE = 0.02
_DEPTH_TOP = 64  # positions of the acceptance draws made up front (steps are bounded at 64; more on demand)

_COST_WORDS = {"v0": "verify cost per draft token", "v1": "growth of the verify cost with batch",
               "d0": "draft cost per step", "d1": "growth of the draft cost with batch",
               "e0": "tree cost per draft step and extra candidate", "e1": "growth of the tree cost with batch"}

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
            "suggestions": [{**s.to_json(), "expected_accept_by_position":
                             expected_accept_by_position(self.acceptance, s.settings)} for s in self.suggestions],
            "current_expected_accept_by_position": expected_accept_by_position(self.acceptance, self.current)
            if self.current else None,
            "break_even": self.break_even.to_json() if self.break_even else None,
            "acceptance": {"alpha": self.acceptance.alpha, "d": self.acceptance.d, "beta": self.acceptance.beta,
                           "rho": self.acceptance.rho, "tree_model": self.acceptance.tree_model,
                           "sd": acc_sd, "beta_fitted": self.acceptance.beta_fitted,
                           "positions": [p.to_json() for p in self.positions]},
            "cost": self.cost.to_json(self.batch),
            "notes": self.notes,
        }

    def render(self) -> str:
        """Plain text for the terminal."""
        out = [self.verdict, ""]
        a = self.acceptance
        tree = "tree exponent" if a.tree_model == "beta" else "rank decay"
        out.append(f"acceptance: p_i = {a.alpha:.3f} · {a.d:.3f}^(i-1); {tree} {a.tree_label()}")
        if self.positions:
            out.append("  position  p(accept | reached)  95% CI          P(accepted)")
            for p in self.positions:
                out.append(f"  {p.position:>8}  {p.p:>19.3f}  [{p.lo:.3f}, {p.hi:.3f}]  {p.unconditional:>11.3f}")
        v, dstep = self.cost.per_token_ms(self.batch)
        out.append(f"round cost at concurrency {self.batch}: base {self.cost.w[0] + self.cost.w[1] * self.batch:.2f} ms"
                   f" + {v:.3f} ms per draft token (verify) + {dstep:.3f} ms per draft step"
                   f" + {self.cost.tree_ms_per_step(self.batch):.3f} ms per draft step per extra tree candidate")
        if self.cost.n_timer and self.current is not None:
            ph = self.cost.phase_ms(self.current, self.batch)
            out.append(f"  {self.current.label()}: host {ph['host']:.3f} ms + verify GPU {ph['verify']:.3f} ms + "
                       f"draft GPU {ph['draft']:.3f} ms per round (fitted with SGLang's device timer)")
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


def prefill_ms_per_token(measurements: Sequence[Measurement]) -> dict[int, float]:
    """c_B (module docstring) by concurrency B: the median over the speculative measurements at B with
    both a tok/s and a TPOT of max(0, 1000 · B / tok/s − TPOT) ms per output token; batches without
    such a measurement are absent (c = 0 there)."""
    by: dict[int, list[float]] = {}
    for m in _spec(measurements):
        c = m.overhead_ms_per_token()
        if c is not None:
            by.setdefault(max(1, int(m.concurrency)), []).append(c)
    return {b: float(np.median(v)) for b, v in by.items()}


def chain_tau_bounds(measurements: Sequence[Measurement]) -> dict[int, tuple[float, float]]:
    """Measured chain accept lengths by depth: {drafts per round S: (τ, se)} over the chain
    (topk 1) measurements, pooled per depth (mean τ; se the pooled standard error, at least
    :data:`CHAIN_TAU_SE`).

    A chain's τ(S) = 1 + Σ_{j≤S} P_j cannot fall as S grows (each P_j ≥ 0) and a chain of S drafts
    is the first S positions of any deeper one, so a measured τ(S₁) ≤ τ(S) ≤ τ(S₂) for S₁ ≤ S ≤ S₂
    (within noise): the advisor clamps chain predictions into that band (``_Model._chain_band``),
    whatever the parametric family would extrapolate between two measured depths.
    """
    by: dict[int, list[tuple[float, float]]] = {}
    for m in _spec(measurements):
        t = m.tau()
        if m.settings.topk != 1 or t is None:
            continue
        depth = min(m.settings.steps, m.settings.draft_tokens - 1)
        by.setdefault(depth, []).append((t, m.accept_length_se or CHAIN_TAU_SE))
    out = {}
    for depth, v in by.items():
        ts = [t for t, _ in v]
        se = math.sqrt(sum(x * x for _, x in v)) / len(v)
        out[depth] = (float(np.mean(ts)), max(se, CHAIN_TAU_SE))
    return out


class _Model:
    """Fitted acceptance + cost with vectorised prediction over candidates."""

    def __init__(self, measurements: Sequence[Measurement], batch: int, seed: int = 0,
                 tree_model: str | None = None):
        self.acc = fit_acceptance(measurements, tree_model)
        self.cost = fit_cost(measurements)
        self.batch = batch
        self._branch_cache: dict[tuple[int, int], list[list[int]]] = {}
        self._tau_cache: dict[tuple[int, int, int], float] = {}
        rng = np.random.default_rng(seed)
        self.a_draws = self.acc.draws(N_DRAWS, rng)
        self.w_draws = self.cost.draws(N_DRAWS, rng)  # truncated posterior: every cost ≥ 0
        # per-position acceptance draws (N_DRAWS, _DEPTH_TOP): the family at each (α, d) draw,
        # updated with the pooled chain counts at the measured positions
        self.p_draws = self.acc.prob_draws(self.a_draws[0], self.a_draws[1], _DEPTH_TOP, rng)
        self.chain_taus = chain_tau_bounds(measurements)
        self.prefill = prefill_ms_per_token(measurements)
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

    def _point(self, s: Settings, batch: float | None = None) -> tuple[float, float, float, list[int]]:
        b = self.batch if batch is None else batch
        br = self.branching(s)
        tau = self._tau(s, br)
        t = self.cost.round_ms(s, b)
        return 1000.0 * b * tau / (t + tau * self.c(b)), tau, t, br

    def c(self, batch: float) -> float:
        """c_B, ms per output token not in decode rounds (module docstring); 0 where unmeasured."""
        return self.prefill.get(max(1, round(batch)), 0.0)

    def _tau(self, s: Settings, br: list[int]) -> float:
        key = (s.steps, s.topk, s.draft_tokens)
        tau = self._tau_cache.get(key)
        if tau is None:
            if self.acc.tree_model == "rank":
                tau = self.acc.accept_length(s)
            else:
                tau = expected_accept_length(self.acc.probs(len(br)), br, self.acc.beta)
            if s.topk == 1:
                lo, hi = self._chain_band(len(br))
                tau = min(max(tau, lo), hi)
            self._tau_cache[key] = tau
        return tau

    def _chain_band(self, depth: int) -> tuple[float, float]:
        """The accept length a chain of ``depth`` drafts can have given the measured chains
        (:func:`chain_tau_bounds`): (−inf, inf) without them."""
        lo = max((t - 2 * se for d, (t, se) in self.chain_taus.items() if d <= depth), default=-math.inf)
        hi = min((t + 2 * se for d, (t, se) in self.chain_taus.items() if d >= depth), default=math.inf)
        return (lo, hi) if lo <= hi else (hi, hi)

    def branching(self, s: Settings) -> list[int]:
        """Tree nodes per depth of ``s`` (:meth:`AcceptanceFit.branching`): the accepted path's siblings
        under the β family, from one allocation pass per (steps, topk), cached (:func:`tree_branchings`);
        the kept nodes per depth under the rank family."""
        if s.steps < 1 or s.draft_tokens < 2:
            return []
        if self.acc.tree_model == "rank":
            return self.acc.branching(s)
        fam = self._branch_cache.get((s.steps, s.topk))
        if fam is None or len(fam) <= s.draft_tokens:
            top = max(s.draft_tokens, _FAMILY_TOP)
            fam = self._branch_cache[(s.steps, s.topk)] = tree_branchings(
                self.acc.probs(s.steps), s.steps, s.topk, self.acc.beta, top)
        return list(fam[s.draft_tokens])

    def _p_draws(self, depth: int) -> np.ndarray:
        if depth > self.p_draws.shape[1]:  # deeper than any bounded setting: continued as past the measured depth
            self.p_draws = extrapolate(self.p_draws, self.a_draws[1], self.p_draws.shape[1], depth)
        return self.p_draws[:, :depth]

    def predict(self, s: Settings, batch: float | None = None) -> Prediction:
        """Point prediction and 95 % interval at ``batch`` requests per round (default: the
        advice's concurrency): parameter draws, widened by the misfit in log space (half-widths
        added in quadrature with 1.96 · misfit)."""
        return self.predict_many([s], batch)[0]

    def predict_many(self, settings: Sequence[Settings], batch: float | None = None) -> list[Prediction]:
        """:meth:`predict` for many settings at once, vectorised over settings and draws (chunks
        of :data:`_CHUNK` settings: a (settings × draws × depth) array each)."""
        bsz = self.batch if batch is None else batch
        settings = list(settings)
        out: list[Prediction] = []
        b = self.a_draws[2]
        # A verify round is at least one target forward: no draw may be cheaper than 80 % of the
        # fitted plain step (b0 + b1·B), else far-off settings get absurd upper bounds.
        step = float(self.cost.w[0] + self.cost.w[1] * bsz)
        t_floor = max(0.05 * self.cost.scale_ms, 0.8 * step)
        for lo_i in range(0, len(settings), _CHUNK):
            chunk = settings[lo_i:lo_i + _CHUNK]
            points = [self._point(s, bsz) for s in chunk]
            depth = max((len(pt[3]) for pt in points), default=0)
            if depth:
                br = np.zeros((len(chunk), depth))
                for j, pt in enumerate(points):
                    br[j, :len(pt[3])] = pt[3]
                p = self._p_draws(depth)  # (draws, depth)
                if self.acc.tree_model == "rank":
                    taus = np.stack([1.0 + self.acc.reach(sj, p, b).sum(axis=-1) for sj in chunk])
                else:
                    # q = 1 − (1 − p)^(k^β); k = 0 past a setting's depth gives q = 0 (the path ends)
                    q = 1.0 - (1.0 - p)[None, :, :] ** (br[:, None, :] ** b[None, :, None])
                    taus = 1.0 + np.cumprod(q, axis=2).sum(axis=2)  # (settings, draws)
                for j, sj in enumerate(chunk):
                    if sj.topk == 1 and self.chain_taus:
                        lo_t, hi_t = self._chain_band(len(points[j][3]))
                        taus[j] = np.clip(taus[j], lo_t, hi_t)
            else:
                taus = np.ones((len(chunk), N_DRAWS))
            feats = np.stack([cost_features(s, bsz) for s in chunk], axis=0)  # (settings, 8)
            ts = np.maximum(feats @ self.w_draws.T, t_floor)  # (settings, draws)
            toks = 1000.0 * bsz * taus / (ts + taus * self.c(bsz))
            los, his = np.percentile(toks, [2.5, 97.5], axis=1)
            for j, (s, (tok, tau, t, brj)) in enumerate(zip(chunk, points, strict=True)):
                lo, hi = min(float(los[j]), tok), max(float(his[j]), tok)
                if self.misfit > 0:
                    extra = (1.96 * self.misfit) ** 2
                    lo = tok * math.exp(-math.sqrt(math.log(tok / lo) ** 2 + extra))
                    hi = tok * math.exp(math.sqrt(math.log(hi / tok) ** 2 + extra))
                out.append(Prediction(s, tok, lo, hi, tau, t, brj))
        return out


def _reach(model: _Model, pred: Prediction) -> np.ndarray:
    """Unconditional probability that depth i of this setting's tree/chain is accepted."""
    if not pred.branching:
        return np.zeros(0)
    return model.acc.reach(pred.settings)


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
            p1 = float(acc.probs(1)[0])
            q1 = float(_reach(model, cand)[0])
            what = "siblings" if acc.tree_model == "beta" else "tree nodes"
            parts.append(f"topk {s.topk} with {s.draft_tokens - 1} tree nodes raises depth-1 acceptance from "
                         f"{p1:.2f} to {q1:.2f} ({what} per depth {cand.branching}; "
                         f"{acc.tree_label()}) at {v:.2f} ms per verified token")
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
    c = model.c(model.batch)
    alphas = np.linspace(0.005, P_MAX, 400)
    best_curve = np.zeros_like(alphas)
    best_idx = np.zeros(alphas.size, int)
    for j, pr in enumerate(preds):
        br = pr.branching
        if not br:
            continue
        depth = pr.settings.steps if acc.tree_model == "rank" else len(br)
        p = extrapolate(np.minimum(alphas[:, None] * acc.d ** np.arange(depth)[None, :], P_MAX), acc.d,
                        acc.known_depth, depth)
        tau = 1.0 + acc.reach(pr.settings, p).sum(axis=1)
        tok = 1000.0 * model.batch * tau / (pr.round_ms + tau * c)
        better = tok > best_curve
        best_curve = np.where(better, tok, best_curve)
        best_idx = np.where(better, j, best_idx)
    t_needed = 1000.0 * model.batch * best.accept_length / baseline - best.accept_length * c
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
    tau_star = baseline * pr.round_ms / max(1e-9, 1000.0 * model.batch - baseline * c)
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
    tree_model: str | None = None,
) -> Advice:
    """Fit the models to ``measurements`` and rank the candidate settings.

    ``baseline``: no-speculation output tok/s at the same concurrency (a number or a
    :class:`Measurement` with ``settings=None``).  ``current``: the setting to compare against
    (default: the first speculative measurement).  ``candidates``: default
    :func:`candidate_grid`.  ``tree_model``: the acceptance model's tree family
    (:func:`~specdash.advisor.acceptance.fit_acceptance`).  Raises ValueError without any usable
    speculative measurement, or with an unknown ``tree_model``.
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
    model = _Model(spec, batch, seed, tree_model)
    drafting = [m for m in spec if m.settings.steps >= 1]  # an adaptive steps-0 tier is not a setting
    if not drafting:
        raise ValueError("the advisor needs at least one measurement with drafting (steps ≥ 1)")
    if current is not None and current.steps < 1:
        current = None
    at_batch = [m for m in spec if int(m.concurrency) == batch]  # what the predictions are compared with
    cur_meas = (next((m for m in at_batch if m.settings == current), None)
                or next((m for m in spec if m.settings == current), None)) if current else drafting[0]
    current = current or drafting[0].settings
    measured: dict[Settings, list[float]] = {}  # tok/s at the predictions' concurrency only (not a mean over loads)
    for m in at_batch:
        measured.setdefault(m.settings, []).append(float(m.tok_s()))
    cands = list(candidates) if candidates is not None else candidate_grid()
    if current not in cands and current.steps >= 1:
        cands.append(current)
    preds = model.predict_many(cands)
    preds.sort(key=lambda p: -p.tok_s)
    by_settings = {p.settings: p for p in preds}
    cur_pred = by_settings[current]
    cur_tok = float(np.exp(np.mean(np.log(measured[current])))) if current in measured else cur_pred.tok_s
    best = preds[0]

    chain_hists = [m for m in spec if m.settings.topk == 1 and m.accept_histogram]
    positions: list[PositionEstimate] = []
    if chain_hists:  # pooling is valid for chains: p_i does not depend on S
        positions = pooled_position_acceptance([(m.accept_histogram, m.settings.steps) for m in chain_hists])
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
    elif model.acc.tree_model == "rank":
        notes.append(f"trees read node by node as SGLang keeps them (rank decay {model.acc.tree_label()}): "
                     "instead of the sibling exponent β")
    if model.cost.n_settings < 2:
        notes.append("one measured setting: the per-step and per-token costs come from priors "
                     "(measure a second setting for a real fit)")
    elif not model.cost.identifiable_split:
        notes.append("chain runs only: the split between draft-step and verify cost comes from priors")
    pulled = [n for n in model.cost.at_bound if n in _COST_WORDS]
    if pulled:
        unc = dict(zip(COST_NAMES, model.cost.unconstrained_w.tolist(), strict=True))
        what = ", ".join(f"{_COST_WORDS[n]} ({n}: {unc[n]:+.3f} ms unconstrained)" for n in pulled)
        notes.append(f"the measured round times pull the {what} below zero; no phase can take negative time, so "
                     "the fit holds them at 0 ms: smaller than this measurement noise resolves (SGLang's device timer, "
                     "SGLANG_ENABLE_METRICS_DEVICE_TIMER=1, measures the phases directly)")
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
