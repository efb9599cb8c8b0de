"""The closed-loop search policy of ``specdash tune`` (:class:`TunePlanner`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    then the advisor's top prediction (pure exploit, the fastest way to learn the cost slope);
    then, refitting after every measurement, the unmeasured candidate with the best optimistic
    score μ + κ·(hi - μ) (κ = 0.5 while more than one launch remains, 0 for the last); never
    re-measure; stop when ``budget`` launches are spent or when even the upper end of the best
    candidate's interval does not beat the best measured tok/s by more than ``min_gain``
    (relative; default 1 %, about the run-to-run noise): nothing left is worth a launch.
    :meth:`best` returns the recommendation (a measured setting).  :meth:`chain_tiers` names the
    chain step counts worth measuring together as adaptive tiers of one launch.

    Launches are counted as distinct :attr:`Measurement.launch` ids (tiers of one launch count
    once; a measurement without an id is a launch of its own).
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

    def _open(self, measurements: Sequence[Measurement]) -> tuple[Advice, dict[Settings, float], list[Prediction]]:
        measured = self._measured(measurements)
        adv = advise(measurements, self.baseline, current=self.start if self.start in measured else None,
                     candidates=self.candidates, top=1, seed=self.seed)
        self.last_advice = adv
        return adv, measured, [p for p in adv.predictions if p.settings not in measured]

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
        cut = cheapest_matching_chain(measurements)
        if cut is not None and cut not in measured:
            h = pooled_histogram(measurements)
            self.reason = (f"the cheapest setting that achieves the measured acceptance: no verify round accepted "
                           f"more than {cut.steps} draft{'s' if cut.steps != 1 else ''} "
                           f"(pooled histogram {h}), so {cut.label()} accepts as much for less")
            return cut
        _, measured, open_preds = self._open(measurements)
        best_meas = max(measured.values())
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

    def chain_tiers(self, measurements: Sequence[Measurement], *, max_tiers: int = 3) -> list[int]:
        """Chain step counts (topk 1, draft tokens = steps + 1) worth measuring together, as
        adaptive tiers of one launch, sorted; empty when no chain is worth measuring.

        With measurements: the cheapest matching chain first (when unmeasured), then the
        unmeasured chains whose upper interval end beats the best measured tok/s by more than
        ``min_gain``, by optimistic score μ + ½(hi − μ).  Before any measurement: the spread of
        SGLang's default adaptive slot for batch 1 ([1, 3, 7]) around the start — steps 1, the
        start's steps and 2·steps + 1.  Trees (topk > 1) are never in the group: each needs a
        launch of its own (:func:`tier_measurable`).
        """
        top = max(STEPS_GRID)
        if not _spec(measurements):
            s = self.start.steps
            return sorted({1, s, min(top, 2 * s + 1)})[:max_tiers]
        measured = self._measured(measurements)
        out: list[int] = []
        cut = cheapest_matching_chain(measurements)
        if cut is not None and cut not in measured:
            out.append(cut.steps)
        try:
            _, measured, open_preds = self._open(measurements)
        except ValueError:
            return sorted(out)
        best_meas = max(measured.values()) if measured else 0.0
        chains = [p for p in open_preds if tier_measurable(p.settings) and p.hi >= best_meas * (1.0 + self.min_gain)]
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
