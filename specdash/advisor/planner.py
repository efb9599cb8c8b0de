"""The closed-loop search policy of ``specdash tune``."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specdash.advisor.advise import Advice, advise
from specdash.advisor.measurement import Measurement, Settings, _effective, _spec, candidate_grid


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
