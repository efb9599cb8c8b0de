"""The closed-loop search policy of ``specdash tune`` (:class:`TunePlanner`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from specdash.advisor.advise import Advice, Prediction, advise
from specdash.advisor.measurement import (
    STEPS_GRID,
    Measurement,
    Settings,
    _effective,
    _spec,
    candidate_grid,
    chain,
)


def pooled_histogram(measurements: Sequence[Measurement], *, chains_only: bool = True) -> list[int]:
    """Element-wise sum of the accept histograms (index k = verify rounds that accepted exactly k
    drafts).  Chain histograms only when any chain has one (``chains_only``): p_i does not depend
    on S for a chain, so chains pool; else every speculative histogram."""
    spec = [m for m in _spec(measurements) if m.accept_histogram and sum(m.accept_histogram) > 0]
    chains = [m for m in spec if m.settings.topk == 1]
    use = chains if (chains_only and chains) else spec
    out: list[int] = []
    for m in use:
        for k, c in enumerate(m.accept_histogram):
            if k >= len(out):
                out.extend([0] * (k + 1 - len(out)))
            out[k] += int(c)
    return out


def cheapest_matching_chain(measurements: Sequence[Measurement]) -> Settings | None:
    """The cheapest setting that achieves the measured acceptance: for a pooled histogram whose
    last non-zero position is k (k accepted drafts, the deepest any round went), the chain
    steps k / topk 1 / draft tokens k + 1 (k ≥ 1).

    A chain accepts exactly as a longer chain does up to depth k (p_i does not depend on S), and
    no round went deeper, so the longer chain's extra steps and verify tokens bought nothing;
    every round it costs less than any wider tree.  None without a histogram.
    """
    h = pooled_histogram(measurements)
    nz = [k for k, c in enumerate(h) if c > 0]
    if not nz:
        return None
    k = max(1, nz[-1])
    return _effective(k, 1, k + 1) or chain(k)


def reachable_chain(measurements: Sequence[Measurement], *, se_floor: float = 0.02) -> Settings | None:
    """The cheapest chain that can reach the accept length the deepest measured chain reached, from
    accept lengths alone (adaptive tiers have no histogram): a chain of S drafts accepts at most S + 1
    tokens a round, so with τ measured at depth D the chain of S = ⌈τ − 1 − 2·se⌉ steps (se: the
    measurement's standard error, at least ``se_floor``) is the shallowest that could match it —
    exactly the one that does when acceptance is a step, as under SGLang's ``SGLANG_SIMULATE_ACC_LEN``
    (min(L, S + 1) a round), and the short end worth measuring otherwise.  None without a chain
    deeper than that S.

    Example (the H200 testbed at L 4.2, concurrency 8): tiers steps 1 (τ 2.00) and steps 15
    (τ 4.22) → steps 4, the grid's best; the family fit alone sent the live tune to steps 5 and 6.
    """
    chains = [m for m in _spec(measurements) if m.settings.topk == 1 and m.tau() is not None]
    if not chains:
        return None
    deep = max(chains, key=lambda m: (min(m.settings.steps, m.settings.draft_tokens - 1), m.tau()))
    depth = min(deep.settings.steps, deep.settings.draft_tokens - 1)
    se = max(se_floor, deep.accept_length_se or 0.0)
    k = max(1, math.ceil(deep.tau() - 1.0 - 2.0 * se))
    if k >= depth:
        return None
    return _effective(k, 1, k + 1) or chain(k)


#: The deepest chain :meth:`TunePlanner.chain_tiers` names for adaptive tiers: one past the 7 of SGLang's
#: default batch-1 adaptive slot ([1, 3, 7]), as before the candidate steps grew to 10.  A live launch
#: measures two tiers at once and its per-tier figures carry a few % of launch-to-launch bias, so its
#: two or three pairs stay within the range SGLang's own adaptive tiers use; the relaunch search (and
#: the tree candidates) still reach steps 10.
SPREAD_TOP = 8

#: A chain whose rounds accepted every draft at least this often says little about the positions
#: beyond it (:func:`deepening_chain`).
SATURATED = 0.2


def saturation(hist: Sequence[int]) -> float:
    """Share of a histogram's rounds that accepted every draft (its last bucket); 0 without rounds."""
    n = sum(hist)
    return float(hist[-1]) / n if n and len(hist) > 1 else 0.0


def deepening_chain(measurements: Sequence[Measurement], adv: Advice) -> Settings | None:
    """The chain that measures acceptance as deep as the advisor's best prediction drafts, when the
    measured chains stop short of that depth and saturate; else None.

    The acceptance model extrapolates p_i = α·d^(i−1) past the deepest measured chain, where the
    pooled chain histogram has no rounds that could have failed; a tree's histogram only constrains
    d through the modelled sibling counts.  When the deepest measured chain's rounds accepted all
    its drafts at least :data:`SATURATED` of the time and the best prediction drafts deeper, one
    chain launch at that depth (topk 1, draft tokens = steps + 1: the cheapest setting that drafts
    so deep) pins the decay before the search spends launches on trees.
    """
    best = adv.best
    if best is None:
        return None
    chains = [m for m in _spec(measurements) if m.settings.topk == 1 and m.settings.steps >= 1]
    if not chains:
        return None
    depth = max(m.settings.steps for m in chains)
    want = min(best.settings.steps, min(best.settings.draft_tokens - 1, max(STEPS_GRID)))
    if want <= depth:
        return None
    h = pooled_histogram(measurements)
    if len(h) < depth + 1 or saturation(h[:depth + 1]) < SATURATED:
        return None
    return _effective(want, 1, want + 1) or chain(want)


#: Stop when no unmeasured setting's expected improvement over the best measured (:func:`expected_gain`)
#: reaches this share of it: one more launch is then expected to buy less than the noise of one
#: measurement (issue 26: the relaunch tune found its pick by its fourth launch and spent four more).
MIN_EI = 0.004

#: :data:`MIN_EI` of a live tune (``TunePlanner``'s ``live_margin``): a launch there must be expected to buy
#: about half the noise of one measured setting (1-2 %), not a fraction of it.
LIVE_MIN_EI = 0.01


def expected_gain(p: Prediction, best: float) -> float:
    """E[max(0, X − best)] (tok/s) for a prediction taken as log-normal: median ``p.tok_s``, σ from its 95 %
    interval in log space ((ln hi − ln lo) / 3.92) — the expected improvement of launching it."""
    from scipy.stats import norm

    if best <= 0 or p.tok_s <= 0:
        return 0.0
    mu = math.log(p.tok_s)
    sigma = (math.log(p.hi) - math.log(p.lo)) / 3.92 if p.hi > p.lo > 0 else 0.0
    if sigma <= 1e-9:
        return max(0.0, p.tok_s - best)
    d2 = (mu - math.log(best)) / sigma
    return float(math.exp(mu + 0.5 * sigma * sigma) * norm.cdf(d2 + sigma) - best * norm.cdf(d2))


#: Residual correction: length scales in (steps, log2 topk, log2 draft nodes) and the relative
#: noise of one measured tok/s (:func:`residual_correction`).
RESIDUAL_SCALES = (2.0, 1.0, 0.6)
RESIDUAL_NOISE = 0.02


def _coords(settings: Sequence[Settings]) -> np.ndarray:
    sx, sk, sn = RESIDUAL_SCALES
    return np.array([[s.steps / sx, math.log2(max(1, s.topk)) / sk, math.log2(max(1, s.draft_tokens - 1)) / sn]
                     for s in settings], float).reshape(len(settings), 3)


def residual_correction(predicted: dict[Settings, float], measured: dict[Settings, float],
                        targets: Sequence[Settings], *, with_spread: bool = False,
                        noise: dict[Settings, float] | None = None):
    """Posterior mean of the model's log error, log(measured / predicted), at ``targets``.

    The parametric model (:mod:`.acceptance`, :mod:`.cost`) is smooth but not exact — above all
    for trees, whose accepted path it models with greedily allocated siblings, an assumption.  Its
    log residuals at the measured settings are treated as a Gaussian process over (steps,
    log2 topk, log2 (draft tokens − 1)) with a squared-exponential kernel (length scales
    :data:`RESIDUAL_SCALES`), prior mean 0 (far from any measurement the model stands as it is),
    prior variance the residuals' mean square (at least the noise) and measurement noise
    :data:`RESIDUAL_NOISE` (relative).  Near a measured setting the prediction follows what was
    measured there; a single noisy launch is pulled towards its neighbours and the model.
    Returns one value per target (0 without measurements); with ``with_spread`` also the share of
    the prior standard deviation left at each target (1 far from every measurement, → 0 at a
    measured one), which scales the model's interval there: a setting next to a measured one has
    little left to learn.
    """
    pts = [s for s in measured if s in predicted and s.steps >= 1 and predicted[s] > 0 and measured[s] > 0]
    if not pts or not targets:
        zero = np.zeros(len(targets))
        return (zero, np.ones(len(targets))) if with_spread else zero
    r = np.log(np.array([measured[s] / predicted[s] for s in pts]))
    amp2 = max(float(np.mean(r ** 2)), RESIDUAL_NOISE ** 2)
    x, t = _coords(pts), _coords(list(targets))

    def kern(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return amp2 * np.exp(-0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2))

    # each point's own relative standard error where it was measured with one (a tier's windows, a launch's
    # rounds), never below the run-to-run floor
    nz = np.array([max(RESIDUAL_NOISE, float((noise or {}).get(s) or 0.0)) for s in pts])
    kxx = kern(x, x) + np.diag(nz ** 2)
    ktx = kern(t, x)
    mean = ktx @ np.linalg.solve(kxx, r)
    if not with_spread:
        return mean
    explained = np.einsum("ij,ji->i", ktx, np.linalg.solve(kxx, ktx.T))
    return mean, np.sqrt(np.clip(1.0 - explained / amp2, 0.0, 1.0))


def _shifted(p: Prediction, corr: float, spread: float) -> Prediction:
    """``p`` with its log error ``corr`` corrected and its interval's log half-widths scaled by
    ``spread`` (never narrower than the measurement noise)."""
    tok = p.tok_s * math.exp(corr)
    up = max(math.log(p.hi / p.tok_s) * spread, RESIDUAL_NOISE) if p.hi > p.tok_s > 0 else 0.0
    down = max(math.log(p.tok_s / p.lo) * spread, RESIDUAL_NOISE) if p.tok_s > p.lo > 0 else 0.0
    return replace(p, tok_s=tok, lo=tok * math.exp(-down), hi=tok * math.exp(up))


def _at_batch(measurements: Sequence[Measurement], batch: int) -> list[Measurement]:
    return [m for m in _spec(measurements) if max(1, int(m.concurrency)) == batch]


def tier_measurable(s: Settings) -> bool:
    """Whether ``s`` can be measured as an adaptive tier of another launch: SGLang's adaptive
    controller switches only the steps of chains (topk 1, draft tokens = steps + 1;
    ``adaptive_unsupported_reason`` in ``srt/speculative/adaptive_spec_params.py`` refuses topk
    ≠ 1), so trees need a launch each."""
    return s.topk == 1 and s.draft_tokens == s.steps + 1


class TunePlanner:
    """Closed-loop search policy for ``specdash tune`` (the lead's runner launches the servers).

    Policy: measure ``start``; then, before anything wider, the cheapest setting that achieves
    the measured acceptance (:func:`cheapest_matching_chain`: for a pooled histogram whose last
    non-zero position is k, steps k / topk 1 / draft tokens k + 1) when it is not measured yet;
    then, when the measured chains saturate and stop short of the depth the best prediction
    drafts, the chain of that depth (:func:`deepening_chain`: it pins the acceptance decay before
    launches go to trees); then the advisor's top prediction (pure exploit, the fastest way to
    learn the cost slope); then, refitting after every measurement, the unmeasured candidate with
    the best optimistic score μ + κ·(hi - μ) (κ = 0.5 while more than one launch remains, 0 for
    the last), μ and the interval corrected by the model's smoothed error at the measured
    settings (:func:`residual_correction`: near a measured setting the prediction follows the
    measurement and the interval shrinks, so the search does not spend launches next door); never
    re-measure; stop when ``budget`` launches are spent or when even the upper end of the best
    candidate's interval does not beat the best measured tok/s (as :meth:`best` scores it) by more than ``min_gain``
    (relative; default 1 %, about the run-to-run noise), or when no candidate's expected improvement
    (:func:`expected_gain`) reaches ``min_ei`` of it (default :data:`MIN_EI`): nothing left is worth a launch.
    Measured tok/s are compared at one concurrency (``concurrency``, default the first speculative
    measurement's); measurements at other loads still inform the fits.
    :meth:`best` returns the recommendation (a measured setting).  :meth:`chain_tiers` names the
    chain step counts worth measuring together as adaptive tiers of one launch.

    Launches are counted as distinct :attr:`Measurement.launch` ids (tiers of one launch count
    once; a measurement without an id is a launch of its own).

    ``live_margin`` (``tune --live``, where launches are the dear part: issue 26's target is six in
    all): after the live chain launch only settings the model says *can* win by more than the
    incumbent's interval are candidates — the upper end of their (corrected) interval beats the best
    measured by more than that one's relative standard error, at least ``live_margin`` — picked by the
    same optimistic score, and the search stops once no candidate's expected improvement reaches
    :data:`LIVE_MIN_EI` of the best (a launch buys less than about half a measurement's noise) — once trees
    of two widths are measured (before that the tree gain rests on one launch).  The
    cheapest-matching and deepening chains are not launched on their own account there (the live
    launch measured a short and a deep chain already).  The launch cap itself is the tune's
    (:func:`specdash.bench.tune.tune`, ``max_launches``).
    """

    def __init__(self, start: Settings, budget: int = 8, *, baseline: float | Measurement | None = None,
                 candidates: Sequence[Settings] | None = None, min_gain: float = 0.01, seed: int = 0,
                 concurrency: int | None = None, min_ei: float = MIN_EI, live_margin: float | None = None):
        eff = _effective(start.steps, start.topk, start.draft_tokens)
        self.start = eff or start
        self.budget = int(budget)
        self.baseline = baseline
        self.candidates = list(candidates) if candidates is not None else candidate_grid()
        self.min_gain = min_gain
        self.seed = seed
        self.concurrency = None if concurrency is None else max(1, int(concurrency))
        self.min_ei = float(min_ei)
        self.live_margin = None if live_margin is None else float(live_margin)
        self.reason = ""
        self.last_advice: Advice | None = None

    def _measured(self, measurements: Sequence[Measurement]) -> dict[Settings, float]:
        """Measured tok/s by setting at the tune's concurrency (the first speculative measurement's
        unless ``concurrency`` was given): a tier measured at another load (the adaptive schedule's
        high point) is never compared with the suite's (issue 26: a concurrency-16 tier read as 'best
        by measurement' beside concurrency-1 settings); geometric mean of repeated settings."""
        conc = self._conc(measurements)
        out: dict[Settings, list[float]] = {}
        for m in _spec(measurements):
            if conc is not None and max(1, int(m.concurrency)) != conc:
                continue
            tok = m.tok_s()
            if tok:
                out.setdefault(m.settings, []).append(tok)
        return {s: float(np.exp(np.mean(np.log(v)))) for s, v in out.items()}

    def _noise(self, measurements: Sequence[Measurement]) -> dict[Settings, float]:
        """Relative standard error of each setting's measured tok/s at the tune's concurrency (pooled over
        repeats: 1/√(Σ 1/se²)); settings measured without one are left out."""
        conc = self._conc(measurements)
        acc: dict[Settings, float] = {}
        for m in _spec(measurements):
            if conc is not None and max(1, int(m.concurrency)) != conc:
                continue
            if m.output_tok_s_se and m.output_tok_s:
                rel = float(m.output_tok_s_se) / float(m.output_tok_s)
                acc[m.settings] = acc.get(m.settings, 0.0) + 1.0 / max(rel, 1e-6) ** 2
        return {s: v ** -0.5 for s, v in acc.items()}

    def _fit_input(self, measurements: Sequence[Measurement]) -> list[Measurement]:
        """The measurements the planner's fit reads: those at the tune's concurrency (and every one without
        speculation), when any speculative one is there; else all.  Rounds at another load (a live tune's
        chain tiers at the schedule's high concurrency, the schedule's A/B) carry that load's verify cost: in
        the cost model's one fit they made wide trees look dear at the tune's own concurrency (small-fast-decay:
        the first tree went to 3/2/6, predicted 596 tok/s against 744; 3/8/20, 993, was not a candidate), so
        they inform the adaptive schedule's fit only."""
        conc = self._conc(measurements)
        if conc is None:
            return list(measurements)
        keep = [m for m in measurements if m.settings is None or max(1, int(m.concurrency)) == conc]
        return keep if any(m.settings is not None for m in keep) else list(measurements)

    def _conc(self, measurements: Sequence[Measurement]) -> int | None:
        if self.concurrency is not None:
            return self.concurrency
        spec = _spec(measurements)
        return max(1, int(spec[0].concurrency)) if spec else None

    @staticmethod
    def launches(measurements: Sequence[Measurement]) -> int:
        """Speculative launches behind ``measurements`` (tiers sharing a launch id count once)."""
        ids = set()
        n = 0
        for m in _spec(measurements):
            if m.launch is None:
                n += 1
            else:
                ids.add(m.launch)
        return n + len(ids)

    def _open(self, measurements: Sequence[Measurement], *, spread: bool = True
              ) -> tuple[Advice, dict[Settings, float], list[Prediction]]:
        """The advice on every candidate, the measured tok/s, and the unmeasured candidates'
        predictions with the residual correction (:func:`residual_correction`) applied; with
        ``spread`` their intervals also narrow near measured settings (without it they keep the
        model's widths)."""
        measured = self._measured(measurements)
        adv = advise(self._fit_input(measurements), self.baseline,
                     current=self.start if self.start in measured else None, candidates=self.candidates, top=1,
                     seed=self.seed)
        self.last_advice = adv
        open_preds = [p for p in adv.predictions if p.settings not in measured]
        pred = {p.settings: p.tok_s for p in adv.predictions}
        corr, spread_left = residual_correction(pred, self._measured(_at_batch(measurements, adv.batch)),
                                                [p.settings for p in open_preds], with_spread=True,
                                                noise=self._noise(measurements))
        widths = spread_left.tolist() if spread else [1.0] * len(open_preds)
        open_preds = [_shifted(p, c, f) for p, c, f in zip(open_preds, corr.tolist(), widths, strict=True)]
        open_preds.sort(key=lambda p: -p.tok_s)
        return adv, measured, open_preds

    def _scores(self, measurements: Sequence[Measurement], adv: Advice | None = None) -> dict[Settings, float]:
        """Each measured setting's tok/s as the model with the residual correction sees it (the
        correction's posterior mean at a measured point blends its own measurement with its
        neighbours' and the model), kept within two noise widths (2 · :data:`RESIDUAL_NOISE`) of
        its own measurement — a setting far from the others is otherwise scored by the model alone;
        the raw measurement when the advisor cannot fit."""
        measured = self._measured(measurements)
        if not measured:
            return {}
        if adv is None:
            try:
                adv = advise(self._fit_input(measurements), self.baseline, current=self.start,
                             candidates=list(measured), top=1, seed=self.seed)
            except ValueError:
                return measured
        pred = {p.settings: p.tok_s for p in adv.predictions}
        at_b = self._measured(_at_batch(measurements, adv.batch))
        pts = [s for s in measured if s in pred]
        corr = residual_correction(pred, at_b, pts, noise=self._noise(measurements))
        out = dict(measured)
        band = math.exp(2.0 * RESIDUAL_NOISE)
        for s, c in zip(pts, corr.tolist(), strict=True):
            if s in at_b:  # never credited more than two noise widths away from its own measurement
                out[s] = min(max(pred[s] * math.exp(c), at_b[s] / band), at_b[s] * band)
        return out

    def next_settings(self, measurements: Sequence[Measurement]) -> Settings | None:
        """The next setting to launch, or None to stop (``reason`` says why)."""
        launched = self.launches(measurements)
        measured = self._measured(measurements)
        if launched >= self.budget:
            self.reason = f"budget of {self.budget} launches spent"
            return None
        if self.start not in measured:
            self.reason = "measure the starting settings"
            return self.start
        if self.live_margin is not None:
            return self._next_live(measurements, last=self.budget - launched == 1)
        cut = cheapest_matching_chain(measurements)
        if cut is not None and cut not in measured:
            h = pooled_histogram(measurements)
            self.reason = (f"the cheapest setting that achieves the measured acceptance: no verify round accepted "
                           f"more than {cut.steps} draft{'s' if cut.steps != 1 else ''} "
                           f"(pooled histogram {h}), so {cut.label()} accepts as much for less")
            return cut
        adv, measured, open_preds = self._open(measurements)
        deep = deepening_chain(measurements, adv)
        if deep is not None and deep not in measured and deep in self.candidates:
            h = pooled_histogram(measurements)
            self.reason = (f"the deepest measured chain accepted all its drafts in {saturation(h):.0%} of its rounds "
                           f"(pooled histogram {h}), so the acceptance beyond depth {len(h) - 1} is extrapolated, "
                           f"and the best prediction ({adv.best.settings.label()}) drafts {adv.best.settings.steps} "
                           f"deep: {deep.label()} measures it per position")
            return deep
        best_meas = max(self._scores(measurements, adv).values())
        if not open_preds:
            self.reason = "every candidate measured"
            return None
        if max(p.hi for p in open_preds) < best_meas * (1.0 + self.min_gain):
            self.reason = (f"no unmeasured setting can beat the best measured {best_meas:.1f} tok/s by more than "
                           f"{self.min_gain:.0%} (upper interval ends)")
            return None
        gains = [expected_gain(p, best_meas) for p in open_preds]
        top = max(range(len(open_preds)), key=gains.__getitem__)
        if gains[top] < self.min_ei * best_meas:
            self.reason = (f"no unmeasured setting is expected to gain more than {self.min_ei:.1%} over the best measured "
                           f"{best_meas:.1f} tok/s (largest expected improvement {gains[top] / best_meas:.2%}, "
                           f"{open_preds[top].settings.label()})")
            return None
        remaining = self.budget - launched
        kappa = 0.0 if (launched == 1 or remaining == 1) else 0.5
        pick = max(open_preds, key=lambda p: p.tok_s + kappa * (p.hi - p.tok_s))
        self.reason = (f"predicted {pick.tok_s:.1f} tok/s [{pick.lo:.1f}, {pick.hi:.1f}] vs best measured "
                       f"{best_meas:.1f} ({'exploit' if kappa == 0 else 'optimistic'} pick)")
        return pick.settings

    def _next_live(self, measurements: Sequence[Measurement], last: bool = False) -> Settings | None:
        """:meth:`next_settings` under ``live_margin`` (class docstring); ``last``: the tune can afford one
        more launch only (the pick is then pure exploit)."""
        inc, best_meas, margin, can = self._beatable(measurements)
        if not can:
            self.reason = (f"no unmeasured setting can beat the best measured ({inc.label()}, {best_meas:.1f} tok/s) "
                           f"by more than its interval (+{margin:.1%}; upper interval ends)")
            return None
        gains = [expected_gain(p, best_meas) for p in can]
        top = max(range(len(can)), key=gains.__getitem__)
        # the tree gain β rests on one tree width until two are measured: one noisy launch of a narrow tree
        # (a few % low) makes the model sure that wide trees cannot pay, and the expected improvement stop
        # would end the search there (small-fast-decay: 3/2/6 measured 2 % under its expectation, the
        # search stopped at 35 % under the best, 5/8/41)
        tree_widths = {m.settings.topk for m in _spec(measurements) if m.settings.topk > 1}
        if gains[top] < LIVE_MIN_EI * best_meas and len(tree_widths) >= 2:
            self.reason = (f"no setting that can beat the best measured ({inc.label()}, {best_meas:.1f} tok/s) is "
                           f"expected to gain {LIVE_MIN_EI:.0%} of it (largest expected improvement "
                           f"{gains[top] / best_meas:.2%}, {can[top].settings.label()})")
            return None
        # before any tree is measured the tree gain β and the tree cost e0 rest on priors: the first tree
        # launch goes where the upper interval end is highest (what one launch can teach about both is most
        # where the model is least sure it loses); then the optimistic score, exploit for the last launch
        no_tree = not any(m.settings.topk > 1 for m in _spec(measurements))
        kappa = 0.0 if last else (1.0 if no_tree else 0.5)
        pick = max(can, key=lambda p: p.tok_s + kappa * (p.hi - p.tok_s))
        self.reason = (f"predicted {pick.tok_s:.1f} tok/s [{pick.lo:.1f}, {pick.hi:.1f}]: can beat the best measured "
                       f"({inc.label()}, {best_meas:.1f}) by more than its interval (+{margin:.1%}; "
                       f"{'exploit' if kappa == 0 else 'optimistic' if kappa < 1 else 'upper-end'} pick)")
        return pick.settings

    def _beatable(self, measurements: Sequence[Measurement]) -> tuple[Settings, float, float, list[Prediction]]:
        """``(incumbent, its score, margin, candidates)``: the best measured setting by :meth:`_scores`, the
        share it must be beaten by (``live_margin`` or its own relative standard error, the larger), and the
        unmeasured predictions whose upper interval end beats it by that much."""
        adv, _, open_preds = self._open(measurements)
        scores = self._scores(measurements, adv)
        inc = max(scores, key=scores.get)
        best_meas = scores[inc]
        margin = max(self.live_margin or 0.0, self._noise(measurements).get(inc) or 0.0)
        return inc, best_meas, margin, [p for p in open_preds if p.hi >= best_meas * (1.0 + margin)]

    def exploration_gain(self, measurements: Sequence[Measurement]) -> float:
        """The largest expected improvement (:func:`expected_gain`) of one more launch, as a share of the best
        measured setting's score (0.0 when nothing unmeasured can beat it by more than its interval)."""
        try:
            _, best_meas, _, can = self._beatable(measurements)
        except ValueError:  # no fit, or nothing measured
            return 0.0
        return max((expected_gain(p, best_meas) for p in can), default=0.0) / best_meas

    def chain_tiers(self, measurements: Sequence[Measurement], *, max_tiers: int = 3) -> list[int]:
        """Chain step counts (topk 1, draft tokens = steps + 1) worth measuring together, as
        adaptive tiers of one launch, sorted; empty when no chain is worth measuring.

        With measurements: the cheapest matching chain first (when unmeasured; from accept lengths
        alone, :func:`reachable_chain`, when no chain histogram says it), then the
        unmeasured chains whose upper interval end beats the best measured tok/s by more than
        ``min_gain``, by optimistic score μ + ½(hi − μ).  Before any measurement: the spread of
        SGLang's default adaptive slot for batch 1 ([1, 3, 7]) around the start — steps 1, the
        start's steps and 2·steps + 1.  Trees (topk > 1) are never in the group: each needs a
        launch of its own (:func:`tier_measurable`).
        """
        top = min(max(STEPS_GRID), SPREAD_TOP)
        if not _spec(measurements):
            s = self.start.steps
            return sorted({1, s, min(top, 2 * s + 1)})[:max_tiers]
        measured = self._measured(measurements)
        out: list[int] = []
        cut = cheapest_matching_chain(measurements) or reachable_chain(measurements)
        if cut is not None and cut not in measured:
            out.append(cut.steps)
        try:
            # the model's own interval widths: a live launch pairs two tiers, and narrowing the
            # intervals next to the measured chains would send the few pairs to the grid's deep end
            _, measured, open_preds = self._open(measurements, spread=False)
        except ValueError:
            return sorted(out)
        best_meas = max(measured.values()) if measured else 0.0
        chains = [p for p in open_preds if tier_measurable(p.settings) and p.settings.steps <= top
                  and p.hi >= best_meas * (1.0 + self.min_gain)]
        chains.sort(key=lambda p: -(p.tok_s + 0.5 * (p.hi - p.tok_s)))
        for p in chains:
            if len(out) >= max_tiers:
                break
            if p.settings.steps not in out:
                out.append(p.settings.steps)
        return sorted(out[:max_tiers])

    def advice(self, measurements: Sequence[Measurement], *, top: int = 5) -> Advice:
        """The advisor's full output on everything measured so far (for the tune report)."""
        return advise(measurements, self.baseline, current=self.start, candidates=self.candidates, top=top,
                      seed=self.seed)

    def best(self, measurements: Sequence[Measurement]) -> Settings:
        """The recommendation among the measured settings.

        Each measured setting is scored by the model's prediction after the final refit with the
        residual correction (:func:`residual_correction`) at that setting: a shrinkage estimate
        that blends its own launch (a few % of noise) with its neighbours' and the model, which
        pools every launch.  (On the test oracles this removed picks a single lucky launch made,
        and, unlike shrinking towards the model alone, it does not inherit the tree model's bias.)
        """
        scores = self._scores(measurements)
        if not scores:
            return self.start
        return max(scores, key=scores.get)
