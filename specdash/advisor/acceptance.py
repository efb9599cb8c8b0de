"""Acceptance model: per-position estimates from histograms and the fitted (α, d, β) family.

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
position ((p̂_i - p_i) / se_i with a 0.02 over-dispersion floor — 0.05 for a tree's positions once a
chain histogram is measured too, since a tree's q_i rest on the modelled sibling counts and a chain's
p_i do not: chains then set α and d, trees mostly β); a run without a histogram
contributes its accept length τ (se 0.05).  Weak priors keep the fit defined with little data:
logit α ~ N(0, 2²), d centred on 0.9, log β ~ N(ln 0.3, 0.5²).  The Laplace (Gauss-Newton)
covariance gives the parameter uncertainty.

Measured positions (the fitted family as a prior, the pooled chain counts as data)
----------------------------------------------------------------------------------
The two-parameter family is smooth; real acceptance need not be.  SGLang's
``SGLANG_SIMULATE_ACC_LEN`` (``srt/speculative/spec_utils.py``) accepts min(L, S + 1) tokens a
round: p_i = 1 up to floor(L) − 1 drafts, then one partial position, then 0 — a step that
α·d^(i−1) cannot follow, and a fit that splits the difference predicts acceptance past the
step, where a deeper chain or a wide tree would then look worth a launch.  So wherever the
pooled chain histograms reached position i (n_i rounds, s_i of them accepted it; a chain of S
steps counts at positions 1..S), predictions use the conjugate update of the fitted value
p̂_i = α·d^(i−1) taken as a Beta prior worth :data:`PRIOR_ROUNDS` rounds:

    p_i = (m·p̂_i + s_i) / (m + n_i)          m = PRIOR_ROUNDS

(its draws, for the intervals, are Beta(m·p̂_i + s_i, m·(1 − p̂_i) + n_i − s_i) around each
parameter draw).  With a few hundred rounds the measured rate decides; without chain histograms
the family alone describes the positions the measurements reached.  Trees use the same p_i for
their accepted path (below).

Past the deepest measured position (conservative extrapolation)
---------------------------------------------------------------
Let D be the deepest draft position any measurement reached (:func:`measured_depth`: min(S, N − 1)
over the speculative measurements with an accept length; 1 before any).  Within 1..D the data fit
the family; beyond D nothing does, and the family's d may exceed 1 there because conditional
acceptance *rose* over the measured positions.  A rise is a selection effect — the rounds that
reach deep positions are the easy prompts' (a per-prompt mixture of rates, each decaying) — and it
cannot go on: conditional acceptance never exceeds the easiest prompts' own rate.  So beyond D
the prediction keeps the last measured rate and lets only a decay continue:

    p_i = p_D · min(d, 1)^(i − D)            i > D

(p_D as above: the family updated with the counts where they exist).  Where acceptance decays
(d ≤ 1) this is the family itself; where it rose it stops rising at D.  The intervals widen
instead (the planner should launch to find out, not trust the point): each parameter draw's
extrapolated log-odds take a random walk, logit p_i = logit(p_D · min(d, 1)^(i − D)) + Σ_{j=D+1}^{i}
ε_j, ε_j ~ N(0, :data:`EXTRAPOLATION_LOGIT_SD`²) — 0.25 a position, about how far one position's rate
moves between the real bed's launches and positions (below), so three positions out the 95 % band
spans ± 0.85 in log-odds (0.76 → 0.57 … 0.88).  Checked on the real bed (SmolLM2-135M + its trained
EAGLE3 head, SGLang 0.5.14, ``benchmarks/real/advisor_check.py`` on
``benchmarks/results/real-2026-12-02``), told only the 3/1/4 launch (positions 1–3 measured 0.689,
0.710, 0.764; accept lengths with their 95 % intervals from 400 draws):

* before (the family alone, d 1.05): positions 4–6 of 6/1/7 predicted 0.797, 0.839, 0.883 (measured
  0.768, 0.771, 0.713); accept length 6/1/7 3.321 [3.159, 3.487] for 3.097 measured (+0.224, outside
  its interval), 5/1/6 3.101 (+0.079), 4/1/5 2.851 (+0.049);
* after: 0.764 at each of positions 4–6; 6/1/7 3.223 [3.064, 3.382] (+0.126, inside — the rest is the
  two launches' positions 1–3 differing: 6/1/7's own were 0.661, 0.709, 0.752), 5/1/6 3.056 (+0.034),
  4/1/5 2.838 (+0.037); the tree 3/4/8 and 2/1/3 (within the measured depth) unchanged.

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
* the N - 1 nodes are placed in path-score order, as SGLang's re-ranking keeps them
  (``torch.topk(score_list, num_draft_token - 1)`` in ``srt/speculative/eagle_utils.py``): first
  the accepted path's own node at every depth up to min(S, N - 1) (the draft's top-1 path: at a
  confident draft it outscores every sibling), then siblings under the accepted path from the
  shallowest depth down, k_i ≤ K (a node never outscores its parent, so of equal rank the
  shallower sibling ranks first).  The allocation depends on (S, K, N) alone.  It was a greedy
  by marginal E[accepted] before (issue 26): that one is the best any selection could do and
  read 4–5 % high for part-filled trees (4/8/26: τ 4.08 against 3.94 where acceptance decays
  0.85 a position), which drew the tune towards them; nodes off the accepted path are ignored
  (optimistic, absorbed by β);
* β is fitted when runs with topk > 1 were measured, otherwise the prior β = 0.3 is used and
  the output says so.  The prior is deliberately modest: top-1 acceptance 0.6 then gives 0.75
  within 4 siblings and 0.82 within 8 (the usual size of the top-1 → top-5 gap of draft heads),
  and it is consistent with a public EAGLE3 deployment's tree run (16 draft tokens: accept length ≈ 2.1,
  2.0–2.5 in the server metrics, where the chain of 16 gave 1.9): with that run's fitted α ≈ 0.59,
  d ≈ 0.68 the model gives 2.3–2.4 for topk 4–8 at β = 0.3, but 2.6–2.8 at β = 0.5.

The second family, ``rank`` (:mod:`specdash.sglang.tree`), builds SGLang's tree node by node (``steps``
rounds of top-k expansion of the ``topk`` best frontier nodes, the ``draft_tokens − 1`` best candidates
of all kept by path score) and takes the target's token to be the draft's rank-r child with probability
p_i for r = 1 and (1 − p_i)(1 − ρ_i)ρ_i^(r−2) below, ρ_i = 1 − (1 − ρ)·p_i (a depth whose first guess is
never right has 2nd…k-th guesses worth as little); τ = 1 + Σ_j Q_j, Q_j the summed path probability of
the kept nodes at depth j.  One parameter ρ (prior :data:`PRIOR_RHO`) in place of β, no assumption about
which siblings are kept, and nodes off the accepted path count.  On the real bed (SmolLM2-135M + its
trained EAGLE3 head, SGLang 0.5.14), told the 25 launches of steps ≤ 6 at concurrency 4, it reads the
seven trees of steps 7–10 to 0.14 rms where the β family reads them 0.62 high (worst +1.10 at 10/8/64).

Which family: by default (``tree_model=None``) both are fitted when a tree was measured and the one that
reads the measured trees' accept lengths closer is kept (``AcceptanceFit.tree_model``); without a tree,
β.  ``"beta"`` or ``"rank"`` fits that one family only.

"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from specdash.advisor.measurement import Measurement, Settings, _spec
from specdash.sglang.positions import position_counts  # (accepted s_i, reached n_i); re-exported
from specdash.sglang.tree import candidate_order, reach_probs

P_MAX = 0.995  # cap on a per-position acceptance probability
D_MAX = 1.2  # the decay d may exceed 1 slightly (acceptance rising with depth)
PRIOR_BETA = 0.3
#: The rank model's prior ρ ("Tree model", the second family): logit ρ ~ N(logit 0.6, 1²); the real bed's
#: launches fitted 0.52 (concurrency 4, steps ≤ 6) and 0.61 (the simulator's histogram fit, concurrency 1;
#: SmolLM2-135M + its trained EAGLE3 head, SGLang 0.5.14).
PRIOR_RHO = 0.6
#: The advisor's two tree families ("Tree model"): ``beta`` (the accepted path's siblings) and ``rank``
#: (SGLang's tree node by node, :mod:`specdash.sglang.tree`).
TREE_MODELS = ("beta", "rank")
PRIOR_D = 0.9
SIGMA_FLOOR = 0.02  # over-dispersion floor for a per-position estimate
#: The floor for a tree's per-position estimates when a chain was measured too: a tree's q_i rest on
#: the modelled sibling counts (an assumption), a chain's p_i do not, so chains set α and d and the
#: trees mostly β.
TREE_SIGMA_FLOOR = 0.05
TAU_SE = 0.05  # default standard error of an accept length without histogram
#: Weight, in verify rounds, of the fitted family's p̂_i against the pooled chain counts at a measured
#: position (module docstring, "Measured positions"): 20 rounds — a launch measures hundreds, so the
#: counts decide where they exist and the family fills in where they are few.
PRIOR_ROUNDS = 20.0
#: sd (log-odds, per position) of the random walk the extrapolated acceptance takes past the deepest
#: measured position (module docstring, "Past the deepest measured position"): on the real bed one
#: position's rate moves by up to ≈ 0.05 (≈ 0.25 in log-odds at 0.7) between launches (position 1:
#: 0.661–0.689 over six) and from the last measured position to the next ones (6/1/7: −0.05 … +0.01)
EXTRAPOLATION_LOGIT_SD = 0.25

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


def position_acceptance(hist: Sequence[int], *, max_position: int | None = None,
                        confidence: float = 0.95) -> list[PositionEstimate]:
    """Per-position conditional acceptance p_i with a Jeffreys Beta interval (module docstring).

    Positions never reached (n_i = 0) are omitted.
    """
    return _estimates(position_counts(hist, max_position), confidence)


def pooled_position_acceptance(chains: Sequence[tuple[Sequence[int], int]], *,
                               confidence: float = 0.95) -> list[PositionEstimate]:
    """Per-position acceptance pooled over chains of different depths: ``chains`` = (histogram,
    steps S) pairs.  A chain's counts enter positions 1..S only (p_i does not depend on S, but a
    round of an S-step chain that accepted all S drafts never reached position S + 1)."""
    return _estimates(_pooled_counts(chains), confidence)


def _pooled_counts(chains: Sequence[tuple[Sequence[int], int]]) -> list[tuple[int, int]]:
    """(accepted, reached) per position 1.. summed over (histogram, steps S) pairs, a chain counting at
    positions 1..S only."""
    depth = max((s for _, s in chains), default=0)
    tot = [[0, 0] for _ in range(depth)]
    for hist, steps in chains:
        for i, (si, ni) in enumerate(position_counts(hist, steps)):
            tot[i][0] += si
            tot[i][1] += ni
    return [(a, n) for a, n in tot]


def chain_position_counts(measurements: Sequence[Measurement]) -> list[tuple[int, int]]:
    """Pooled (accepted s_i, reached n_i) at positions 1.. over the chain (topk 1) measurements with
    an accept histogram: a chain of S steps counts at positions 1..S (:func:`pooled_position_acceptance`'s
    rule).  Trailing positions no round reached are dropped; [] without chain histograms."""
    chains = [(m.accept_histogram, min(m.settings.steps, m.settings.draft_tokens - 1))
              for m in _spec(measurements)
              if m.settings.topk == 1 and m.accept_histogram and sum(m.accept_histogram) > 0]
    tot = _pooled_counts(chains)
    while tot and tot[-1][1] == 0:
        tot.pop()
    return tot


def _estimates(counts: Sequence[tuple[int, int]], confidence: float) -> list[PositionEstimate]:
    from scipy import stats

    out = []
    prod = 1.0
    for i, (s, n) in enumerate(counts, start=1):
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


def extrapolate(p: np.ndarray, d, measured: int, depth: int) -> np.ndarray:
    """``p`` (positions 1..``measured`` in its last axis, or more) continued to ``depth`` positions past
    the deepest measured one: p_i = p_D · min(d, 1)^(i − D), D = ``measured`` (module docstring, "Past
    the deepest measured position"); ``d`` a scalar or one value per row of ``p``."""
    p = np.asarray(p, float)
    D = max(1, min(int(measured), p.shape[-1]))
    if depth <= D:
        return p[..., :depth].copy()
    d = np.minimum(np.asarray(d, float), 1.0)
    k = np.arange(1, depth - D + 1)
    tail = p[..., D - 1:D] * (d[..., None] if d.ndim else d) ** k
    return np.concatenate([p[..., :D], np.minimum(tail, P_MAX)], axis=-1)


def measured_depth(measurements: Sequence[Measurement]) -> int:
    """The deepest draft position any speculative measurement with an accept length reached:
    max min(S, N − 1); 0 without one."""
    return max((min(m.settings.steps, m.settings.draft_tokens - 1) for m in _spec(measurements)
                if m.tau() is not None), default=0)


def _q(p, k, beta):
    return 1.0 - (1.0 - p) ** (np.asarray(k, dtype=float) ** beta)


def tree_branching(p: Sequence[float], settings: Settings, beta: float) -> list[int]:
    """Drafted siblings k_i under the accepted node per depth (path-score order, see "Tree model").

    A chain (topk 1) is k_i = 1 for i = 1..S.  Depth is min(S, N - 1).  ``p`` and ``beta`` do not
    change the allocation (kept for the callers that pass them); one member of :func:`tree_branchings`.
    """
    n = int(settings.draft_tokens)
    return tree_branchings(p, settings.steps, settings.topk, beta, n)[n] if n >= 0 else []


def tree_branchings(p: Sequence[float], steps: int, topk: int, beta: float, max_draft_tokens: int) -> list[list[int]]:
    """:func:`tree_branching` for every draft-token count at once: element ``N`` is the
    branching of (``steps``, ``topk``, N) for N = 0..``max_draft_tokens`` (empty below 2).

    Path-score order ("Tree model"): depth D = min(steps, N − 1), one node per depth, then the
    N − 1 − D others as siblings from depth 1 down, at most ``topk`` candidates per depth (N past
    the tree's room adds nothing).  ``p`` and ``beta`` are not used (the order is the draft's
    scores', not the acceptance's).
    """
    steps, topk, top = int(steps), max(1, int(topk)), int(max_draft_tokens)
    out: list[list[int]] = [[] for _ in range(max(top, 0) + 1)]
    if steps <= 0 or top < 2:
        return out
    for n in range(2, top + 1):
        depth = min(steps, n - 1)
        k = [1] * depth
        extra = n - 1 - depth
        for i in range(depth):
            if extra <= 0:
                break
            add = min(topk - 1, extra)
            k[i] += add
            extra -= add
        out[n] = k
    return out


def expected_accept_length(p: Sequence[float], branching: Sequence[int], beta: float) -> float:
    """τ = 1 + Σ_j Π_{i≤j} q_i with q_i = 1 - (1 - p_i)^(k_i^β)."""
    if not branching:
        return 1.0
    q = _q(np.asarray(p[: len(branching)], dtype=float), branching, beta)
    return 1.0 + float(np.sum(np.cumprod(q)))


def tree_depth_counts(order: Sequence[tuple[int, ...]]) -> list[int]:
    """Kept nodes per depth of a rank-model tree (``order``: its kept paths), trailing zeros dropped."""
    depth = max((len(x) for x in order), default=0)
    out = [0] * depth
    for x in order:
        out[len(x) - 1] += 1
    return out


def rank_reach(settings: Settings, p_point: Sequence[float], rho_point: float,
               p: np.ndarray | None = None, rho: np.ndarray | float | None = None) -> np.ndarray:
    """``Q_j`` = P(accepted length ≥ j) of ``settings`` under the rank family ("Tree model"): the tree
    SGLang keeps at the point (``p_point``, ``rho_point``), its acceptance at ``p`` (shape ``(…, ≥ depth)``,
    default the point) and ``rho`` (scalar or ``(…)``).  Shape ``(…, depth)``, depth the kept tree's."""
    steps, n = int(settings.steps), int(settings.draft_tokens)
    p = np.asarray(p_point if p is None else p, float)
    if steps < 1 or n < 2:
        return np.zeros(p.shape[:-1] + (0,))
    return reach_probs(kept_rank_tree(settings, p_point, rho_point), p, rho_point if rho is None else rho)


def kept_rank_tree(settings: Settings, p: Sequence[float], rho: float) -> tuple[tuple[int, ...], ...]:
    """The nodes SGLang keeps for ``settings`` under the rank family at top-1 acceptance ``p`` (≥ steps
    values) and rank decay ``rho`` (:func:`specdash.sglang.tree.candidate_order`'s first N − 1)."""
    steps = int(settings.steps)
    order = _candidate_order(steps, int(settings.topk), tuple(round(float(x), 9) for x in p[:steps]),
                             round(float(rho), 9))
    return order[: max(0, int(settings.draft_tokens) - 1)]


@lru_cache(maxsize=4096)
def _candidate_order(steps: int, topk: int, p: tuple[float, ...], rho: float) -> tuple[tuple[int, ...], ...]:
    """:func:`specdash.sglang.tree.candidate_order`, memoised (a fit's point is asked for many times)."""
    return tuple(candidate_order(steps, topk, p, rho))


def expected_accept_by_position(fit: AcceptanceFit, settings: Settings) -> list[dict[str, Any]]:
    """What the fitted acceptance model expects per draft position for ``settings`` (any steps S,
    topk K, draft tokens N, launched or not), in the shape of a RUN's ``accept_by_position``
    (:mod:`specdash.sglang.positions`) without counts.

    One dict per depth i = 1 … the deepest the greedy tree reaches (a chain: min(S, N − 1)):
    ``{"position", "rate", "unconditional", "siblings"}`` where ``rate`` = q_i = P(depth i accepted |
    depth i − 1 accepted) = 1 − (1 − p_i)^(k_i^β) with p_i = :meth:`AcceptanceFit.probs` (the family
    α·d^(i−1), updated with the measured chain counts where they exist) and k_i = ``siblings``, the
    drafted candidates at that depth (:func:`tree_branching`; 1 for a chain, whose rate is p_i) — under
    the rank family q_i = Q_i / Q_{i−1} and ``siblings`` the kept nodes at depth i;
    ``unconditional`` = Π_{l≤i} q_l, comparable with vLLM's per-position rate.  This is the same
    q_i the accept-length prediction sums (:func:`expected_accept_length`), so τ = 1 + Σ
    unconditional.  [] without speculation (S = 0 or N < 2).
    """
    steps, n = int(settings.steps), int(settings.draft_tokens)
    if steps <= 0 or n < 2:
        return []
    br = fit.branching(settings)
    if fit.tree_model == "beta":
        q = _q(np.asarray(fit.probs(len(br))[: len(br)], dtype=float), br, fit.tree_param)
        unc = np.cumprod(q)
    else:
        unc = fit.reach(settings)
        q = unc / np.concatenate([[1.0], unc[:-1]]).clip(1e-300)
    return [{"position": i, "rate": float(q[i - 1]), "unconditional": float(unc[i - 1]), "siblings": int(br[i - 1])}
            for i in range(1, len(br) + 1)]


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
    #: pooled chain (accepted, reached) per position (:func:`chain_position_counts`); predictions
    #: update the family's p̂_i with them ("Measured positions")
    counts: tuple[tuple[int, int], ...] = ()
    #: the deepest position a measurement reached (:func:`measured_depth`); past it the prediction
    #: extrapolates conservatively ("Past the deepest measured position")
    depth: int = 0
    #: the tree family (:data:`TREE_MODELS`): x[2] is log β for ``beta``, logit ρ for ``rank``
    tree_model: str = "beta"

    @property
    def alpha(self) -> float:
        return float(_sigmoid(self.x[0]))

    @property
    def d(self) -> float:
        return float(D_MAX * _sigmoid(self.x[1]))

    @property
    def beta(self) -> float | None:
        """β of the β family; None under the rank family."""
        return float(np.exp(self.x[2])) if self.tree_model == "beta" else None

    @property
    def rho(self) -> float | None:
        """ρ of the rank family; None under the β family."""
        return float(_sigmoid(self.x[2])) if self.tree_model == "rank" else None

    @property
    def tree_param(self) -> float:
        """β or ρ, whichever family the fit uses."""
        return float(np.exp(self.x[2]) if self.tree_model == "beta" else _sigmoid(self.x[2]))

    def tree_label(self) -> str:
        """``β = 0.31`` / ``ρ = 0.59``, with ``(prior)`` when no tree was measured."""
        name = "β" if self.tree_model == "beta" else "ρ"
        return f"{name} = {self.tree_param:.2f}{'' if self.beta_fitted else ' (prior)'}"

    def sd(self) -> dict[str, float]:
        """Approximate standard deviations of α, d and β or ρ (delta method; the key names the family's)."""
        a, d, t = self.alpha, self.d, self.tree_param
        sd = np.sqrt(np.clip(np.diag(self.cov), 0, None))
        tree = {"beta": t * sd[2]} if self.tree_model == "beta" else {"rho": t * (1 - t) * sd[2]}
        return {"alpha": a * (1 - a) * sd[0], "d": d * (1 - d / D_MAX) * sd[1], **tree}

    def branching(self, settings: Settings) -> list[int]:
        """Tree nodes per depth of ``settings`` at the fit's point: the accepted path's siblings
        (:func:`tree_branching`) under β, the kept nodes per depth under rank; its length is the depth
        :meth:`reach` covers (a chain: [1] × min(S, N − 1))."""
        steps, n = int(settings.steps), int(settings.draft_tokens)
        if steps < 1 or n < 2:
            return []
        if self.tree_model == "rank":
            return tree_depth_counts(kept_rank_tree(settings, self.probs(steps), self.tree_param))
        return tree_branching(None, settings, 0.0)

    def reach(self, settings: Settings, p: np.ndarray | None = None, param: np.ndarray | float | None = None,
              branching: Sequence[int] | None = None) -> np.ndarray:
        """``Q_j`` = P(accepted length ≥ j), j = 1 … len(:meth:`branching`), shape ``(…, depth)``: at
        per-position acceptance ``p`` (``(…, ≥ depth)``, default :meth:`probs`) and tree parameter
        ``param`` (β or ρ, scalar or ``(…)``, default the fit's).  τ = 1 + Σ_j Q_j.  ``branching`` (β
        family only) overrides the allocation."""
        steps = int(settings.steps)
        if steps < 1 or settings.draft_tokens < 2:
            return np.zeros((0,) if p is None else np.shape(p)[:-1] + (0,))
        param = self.tree_param if param is None else param
        if self.tree_model == "rank":
            return rank_reach(settings, self.probs(steps), self.tree_param, p, param)
        br = list(branching) if branching is not None else self.branching(settings)
        p = self.probs(len(br)) if p is None else np.asarray(p, float)
        par = np.asarray(param, float)
        q = _q(p[..., : len(br)], br, par[..., None] if par.ndim else par)
        return np.cumprod(q, axis=-1)

    def accept_length(self, settings: Settings) -> float:
        """τ of ``settings`` at the fit's point (bonus included)."""
        return 1.0 + float(self.reach(settings).sum())

    @property
    def known_depth(self) -> int:
        """D of "Past the deepest measured position": the measured depth, at least 1."""
        return max(1, int(self.depth))

    def probs(self, depth: int) -> np.ndarray:
        """p_i for i = 1..``depth``: the fitted family, updated with the pooled chain counts where
        they exist (module docstring, "Measured positions"), and past the deepest measured position
        the last measured rate with only a decay continued ("Past the deepest measured position")."""
        D = self.known_depth
        p = position_probs(self.alpha, self.d, max(1, min(depth, D)))
        k = min(len(p), len(self.counts))
        if k:
            s, n = np.asarray(self.counts[:k], float).T
            p[:k] = np.minimum((PRIOR_ROUNDS * p[:k] + s) / (PRIOR_ROUNDS + n), P_MAX)
        return extrapolate(p, self.d, D, depth)

    def family_probs(self, depth: int) -> np.ndarray:
        """p̂_i = α·d^(i−1) alone (no counts): the fitted family, for what-ifs on α."""
        return position_probs(self.alpha, self.d, depth)

    def draws(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``n`` Laplace draws of (α, d, β or ρ), each of shape (n,)."""
        z = rng.multivariate_normal(self.x, self.cov, size=n, method="eigh")
        tree = np.exp(z[:, 2]) if self.tree_model == "beta" else _sigmoid(z[:, 2])
        return _sigmoid(z[:, 0]), D_MAX * _sigmoid(z[:, 1]), tree

    def prob_draws(self, alpha: np.ndarray, d: np.ndarray, depth: int, rng: np.random.Generator) -> np.ndarray:
        """Per-position acceptance draws, shape (len(alpha), depth): the family at each parameter
        draw (α, d), at the measured positions a Beta draw of its conjugate update with the pooled
        chain counts (module docstring, "Measured positions"), and past the deepest measured
        position the draw's last measured rate, min(d, 1) a position and a random walk in log-odds
        ("Past the deepest measured position")."""
        D = self.known_depth
        d = np.asarray(d, float)
        top = max(1, min(depth, D))
        p = np.minimum(np.asarray(alpha, float)[:, None] * d[:, None] ** np.arange(top)[None, :], P_MAX)
        k = min(top, len(self.counts))
        if k:
            s, n = np.asarray(self.counts[:k], float).T
            prior = np.clip(p[:, :k], 1e-6, 1 - 1e-6) * PRIOR_ROUNDS
            p[:, :k] = np.minimum(rng.beta(prior + s, PRIOR_ROUNDS - prior + (n - s)), P_MAX)
        out = extrapolate(p, d, D, depth)
        if depth > D:
            tail = np.clip(out[:, D:], 1e-6, 1 - 1e-6)
            walk = np.cumsum(rng.normal(0.0, EXTRAPOLATION_LOGIT_SD, tail.shape), axis=1)
            out[:, D:] = np.minimum(_sigmoid(np.log(tail / (1 - tail)) + walk), P_MAX)
        return out


def fit_acceptance(measurements: Sequence[Measurement], tree_model: str | None = None) -> AcceptanceFit:
    """MAP fit of (α, d) and the tree family's parameter (β or ρ, "Tree model") to histograms
    (per-position binomials) or accept lengths.

    ``tree_model``: None (the default): both families fitted when a tree (topk > 1) was measured and the
    one that reads the measured trees' accept lengths closer (in standard errors) kept; without a tree,
    the β family.  ``"beta"`` or ``"rank"``: that family only.  The rank family reads a tree run by its
    accept length only (chains keep their per-position counts): fitted so on the real bed's launches of
    steps ≤ 6 at concurrency 4 (25 settings) it gives ρ ≈ 0.52 and reads the seven deeper trees (steps
    7–10) to 0.14 tokens rms, where the β family reads them 0.62 high (worst +1.10, 10/8/64).  The tree
    shape per run (the β family's allocation, the rank family's kept nodes) is computed at the previous
    estimate and the fit repeated (up to three times) until it settles, so no integer choice sits inside
    the optimiser.

    Raises:
        ValueError: ``tree_model`` not one of :data:`TREE_MODELS`.
    """
    if tree_model is not None and tree_model not in TREE_MODELS:
        raise ValueError(f"fit_acceptance: tree_model {tree_model!r}; use one of {', '.join(TREE_MODELS)}")
    spec = [m for m in _spec(measurements) if m.tau() is not None]
    has_tree = any(m.settings.topk > 1 for m in spec)
    if tree_model is None:
        if not has_tree:
            tree_model = "beta"
        else:
            # the families fit different residuals (rank: a tree's accept length, β: its positions), so they are
            # compared on common ground: the trees' accept lengths in standard errors
            fits = [_fit_family(measurements, spec, t)[0] for t in TREE_MODELS]
            trees = [m for m in spec if m.settings.topk > 1]
            return min(fits, key=lambda f: sum(((f.accept_length(m.settings) - m.tau()) / (m.accept_length_se or TAU_SE)) ** 2
                                                for m in trees))
    return _fit_family(measurements, spec, tree_model)[0]


def _fit_family(measurements: Sequence[Measurement], spec: Sequence[Measurement],
                tree_model: str) -> tuple[AcceptanceFit, float]:
    """:func:`fit_acceptance` for one tree family: the fit and its cost (½ Σ residual², prior included)."""
    from scipy.optimize import least_squares

    has_tree = any(m.settings.topk > 1 for m in spec)
    has_chain = any(m.settings.topk == 1 and m.accept_histogram and sum(m.accept_histogram) > 0 for m in spec)
    rank = tree_model == "rank"
    prior_mu = np.array([0.0, _logit(PRIOR_D / D_MAX), _logit(PRIOR_RHO) if rank else math.log(PRIOR_BETA)])
    prior_sd = np.array([2.0, 1.5, 1.0 if rank else 0.5])
    x = prior_mu.copy()
    if spec:  # start from the mean accept rate of the first run
        m0 = spec[0]
        x[0] = _logit(min(0.95, max(0.02, (m0.tau() - 1) / max(1, m0.settings.steps) * 1.3)))
    counts = tuple(chain_position_counts(measurements))
    depth = measured_depth(measurements)
    n_pos = n_tau = 0
    res = None

    def at(z) -> AcceptanceFit:
        return AcceptanceFit(np.asarray(z, float), np.eye(3), has_tree, 0, 0, (), 0, tree_model)

    for _ in range(3):
        here = at(x)
        blocks = []
        n_pos = n_tau = 0
        for m in spec:
            st = m.settings
            dep = min(st.steps, st.draft_tokens - 1)
            if rank:  # the kept tree at the previous estimate (the family alone: no counts, no extrapolation)
                shape: Any = kept_rank_tree(st, position_probs(here.alpha, here.d, st.steps), here.tree_param)
                length = max((len(v) for v in shape), default=0)
            else:
                shape = tree_branching(position_probs(here.alpha, here.d, dep), st, here.tree_param)
                length = len(shape)
            # the rank family reads a tree by its accept length, not its per-position counts: on the real bed the
            # counts pulled ρ to 0.85 and the unseen deep trees 0.39 rms low; by accept length ρ 0.66 and 0.15
            hist = None if rank and st.topk > 1 else m.accept_histogram
            if hist and sum(hist) > 0:
                cnt = [(si, ni) for si, ni in position_counts(hist, length) if ni > 0]
                if cnt:
                    sa = np.array([c[0] for c in cnt], float)
                    na = np.array([c[1] for c in cnt], float)
                    pbar = (sa + 0.5) / (na + 1.0)
                    floor = SIGMA_FLOOR if st.topk == 1 or not has_chain else TREE_SIGMA_FLOOR
                    se = np.sqrt(pbar * (1 - pbar) / na + floor ** 2)
                    blocks.append(("pos", shape, length, len(cnt), sa / na, se))
                    n_pos += len(cnt)
                    continue
            blocks.append(("tau", shape, length, 0, m.tau(), m.accept_length_se or TAU_SE))
            n_tau += 1

        def resid(z, blocks=blocks):
            a, d = _sigmoid(z[0]), D_MAX * _sigmoid(z[1])
            t = _sigmoid(z[2]) if rank else np.exp(z[2])
            out = []
            for kind, shape, length, k, obs, se in blocks:
                p = position_probs(a, d, max(1, length))
                if rank:
                    reach = reach_probs(shape, p, t)
                else:
                    reach = np.cumprod(_q(p[: len(shape)], shape, t))
                if kind == "pos":
                    q = reach[:k] / np.concatenate([[1.0], reach[: k - 1]]).clip(1e-300)
                    out.append((obs - q) / se)
                else:
                    out.append(np.atleast_1d((obs - (1.0 + np.sum(reach))) / se))
            out.append((z - prior_mu) / prior_sd)
            return np.concatenate(out)

        res = least_squares(resid, x, method="trf", x_scale=1.0)
        if np.allclose(res.x, x, atol=1e-4):
            x = res.x
            break
        x = res.x
    jac = res.jac if res is not None else np.diag(1 / prior_sd)
    cov = np.linalg.pinv(jac.T @ jac)
    cost = float(res.cost) if res is not None else 0.0
    return AcceptanceFit(np.asarray(x, float), cov, has_tree, n_pos, n_tau, counts, depth, tree_model), cost
