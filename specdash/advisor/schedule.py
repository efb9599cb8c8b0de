"""Adaptive schedules: the best chain steps per batch size, grouped into SGLang's adaptive slots.

SGLang can switch the chain's draft steps at run time (``--speculative-adaptive``,
``srt/speculative/adaptive_spec_params.py``, read in the 0.5.14 wheel; topk 1 only).  Its config
is keyed by batch size (default ``{"1": [1, 3, 7], "8": [0, 1, 3], "32": [0, 1], "64": [0]}``
candidate steps): a batch is
padded up to the next captured CUDA-graph batch size (``_pad_to_cuda_graph_bs``: bisect_left)
and routed to the slot with the **largest key ≤ that size** (``_find_closest_bs``:
bisect_right − 1; sizes below the smallest key go to the smallest slot) — a slot covers the
padded batch sizes from its key up to the next key.  Each slot holds ``candidate_steps`` (0 =
no drafting: the verify checks only the bonus token; the draft-extend forward still runs) and
an EMA of accepted drafts per request (bonus excluded) that moves between adjacent candidates:

* down from c to the next lower p when EMA ≤ (0.5 if p = 0 else p − 0.5) + ``down_hysteresis``;
* otherwise up from c to the next higher when EMA > c − 0.5 + ``up_hysteresis``;
* from steps 0 it always probes the next candidate (the EMA is not updated at 0), so a slot
  with 0 and another candidate spends about half its update intervals at the other one.

:func:`adaptive_schedule` fits the advisor's acceptance and cost models to the measurements
and, for each given batch size (the captured CUDA-graph decode batch sizes), picks the chain
steps with the best predicted tok/s (1000 · B · τ / T, ``advise``'s formula; τ from the chain
acceptance 1 + Σ_j Π_{i≤j} p_i, Leviathan et al. 2023 with per-position rates); the steps-0
tier competes as an option of its own — its round is the cost model's base plus one draft
forward (S = 0, N = 1), never faster than a plain decode step plus a draft forward where the
no-speculation baseline is known (measured, or interpolated linearly in round time between
measured batch sizes) — so steps 0 marks the loads where drafting does not pay.  Runs of batch
sizes with the same best steps form a slot.  Steps (and the static settings compared with) stop at
the deepest measured draft position unless asked otherwise (``beyond_measured``).  Candidates per slot: the best steps at the
fitted acceptance α̂, the lowest and highest of the best steps at α̂ ± ``drift`` (d held) and at
the 10th and 90th percentiles of the joint posterior draws — room to follow the acceptance as
the workload moves; a slot whose best is 0 gets ``[0]`` alone (anything more would be probed
half the time).  Hysteresis from the break-even acceptance: with d held, α*
where the two adjacent candidates give the same tok/s (at the slot's median batch size) sets
the EMA the controller should switch at, E_c(α*) = τ_c(α*) − 1 measured at the current step c;
SGLang shares one up and one down value per slot, so they come from the two transitions next
to the slot's best steps; they are then held at least a dead band apart (up − down ≥ max(0.25,
SGLang's default, and two standard deviations of the EMA's round-to-round noise), centred on the
break-even: SGLang keeps the EMA across a switch, and without the band an acceptance near the
break-even makes the controller switch at every decision (:func:`_dead_band`).  The predicted tok/s per batch size are given for the schedule, for
the best static setting (one setting, trees included, for every batch size: the best geometric
mean over the batch sizes) and for the no-speculation baseline when known, so a caller can
say plainly when a static setting wins.

:class:`AdaptiveSchedule` is a neutral dataclass; ``to_slots()`` gives ``{batch_size: {SGLang's
slot keys}}`` for a renderer of a release's config format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdash.advisor.acceptance import P_MAX, extrapolate
from specdash.advisor.advise import _Model
from specdash.advisor.cost import cost_features
from specdash.advisor.measurement import STEPS_GRID, Measurement, Settings, _spec, candidate_grid, chain
from specdash.sglang.adaptive import AdaptiveSlot

_ALPHAS = np.linspace(0.005, P_MAX, 400)


#: SGLang's EMA weight for a slot that sets none (``AdaptiveStepSlot``'s ``ema_alpha`` default, 0.5.14).
EMA_ALPHA = AdaptiveSlot.ema_alpha
#: SGLang's own dead band, 0.25: its defaults are up_hysteresis 0.0, down_hysteresis −0.25
#: (``srt/speculative/adaptive_spec_params.py``, 0.5.14).
MIN_DEAD_BAND = AdaptiveSlot.up_hysteresis - AdaptiveSlot.down_hysteresis
#: How many standard deviations of the EMA's noise (:func:`_ema_sd`) the dead band spans at least.
DEAD_BAND_SD = 2.0


@dataclass
class SlotPlan:
    """One adaptive slot: routed padded batch sizes ``batch_size`` ≤ b < next slot's key.

    ``covers``: the given batch sizes routed here; ``best_steps``: the model's best chain steps
    there; ``thresholds``: per adjacent candidate pair (lo, hi), the break-even first-position
    acceptance α* and the EMA of accepted drafts per request at which to move, measured at lo
    (rise) and at hi (drop); None where one of the pair is better at every acceptance.
    """

    batch_size: int
    covers: tuple[int, ...]
    candidate_steps: tuple[int, ...]
    best_steps: int
    up_hysteresis: float = 0.0
    down_hysteresis: float = 0.0
    thresholds: list[dict[str, Any]] = field(default_factory=list)

    def to_slot(self) -> dict[str, Any]:
        """SGLang's slot keys (``adaptive_spec_params.py``); ``ceiling_coeff`` 0 leaves the
        hysteresis in charge (the EMA ceiling would cap steps on its own rule)."""
        return {"candidate_steps": list(self.candidate_steps), "up_hysteresis": round(self.up_hysteresis, 3),
                "down_hysteresis": round(self.down_hysteresis, 3), "ceiling_coeff": 0}

    def to_json(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "covers": list(self.covers), **self.to_slot(),
                "best_steps": self.best_steps, "thresholds": self.thresholds}


@dataclass
class BatchPlan:
    """Predicted output tok/s at one batch size (requests per round): the schedule's tier
    ``steps``, the best static setting, the no-speculation baseline (None: not measured there),
    each chain tier (``by_steps``) and the best static setting at this batch size alone."""

    batch_size: int
    steps: int
    schedule_tok_s: float
    schedule_ci: tuple[float, float]
    static_tok_s: float
    static_ci: tuple[float, float]
    baseline_tok_s: float | None
    best_here: Settings
    best_here_tok_s: float
    by_steps: dict[int, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "steps": self.steps, "schedule_tok_s": self.schedule_tok_s,
                "schedule_ci": list(self.schedule_ci), "static_tok_s": self.static_tok_s,
                "static_ci": list(self.static_ci), "baseline_tok_s": self.baseline_tok_s,
                "best_here": self.best_here.to_json(), "best_here_tok_s": self.best_here_tok_s,
                "by_steps": {str(k): v for k, v in self.by_steps.items()}}


@dataclass
class AdaptiveSchedule:
    """The schedule (:func:`adaptive_schedule`): slots, per-batch predictions and the verdict.

    ``gain``: geometric mean over the batch sizes (weighted) of schedule tok/s ÷ the best static
    setting's; ``static_wins``: the gain is below ``1 + min_gain`` (a static launch is as good:
    the adaptive mode's extra CUDA graphs and switches buy nothing); ``no_spec_wins``: the
    baseline, known at every batch size, is at least as fast as both.
    """

    slots: list[SlotPlan]
    batches: list[BatchPlan]
    static: Settings
    gain: float
    static_wins: bool
    no_spec_wins: bool | None
    verdict: str
    notes: list[str] = field(default_factory=list)

    def to_slots(self) -> dict[int, dict[str, Any]]:
        """``{slot key (batch size): {candidate_steps, up_hysteresis, down_hysteresis, ceiling_coeff}}``."""
        return {s.batch_size: s.to_slot() for s in self.slots}

    def tiers(self) -> list[int]:
        """Every candidate step of every slot (the runtime states SGLang builds at start-up)."""
        return sorted({c for s in self.slots for c in s.candidate_steps})

    def to_json(self) -> dict[str, Any]:
        return {"slots": [s.to_json() for s in self.slots], "batches": [b.to_json() for b in self.batches],
                "static": self.static.to_json(), "gain": self.gain, "static_wins": self.static_wins,
                "no_spec_wins": self.no_spec_wins, "verdict": self.verdict, "notes": self.notes,
                "tiers": self.tiers()}


def _baseline_map(baseline: Any, measurements: Sequence[Measurement]) -> dict[int, float]:
    """No-speculation tok/s by batch size: a mapping, baseline measurements, or one number
    (taken to be at the speculative measurements' concurrency)."""
    out: dict[int, float] = {}
    for m in measurements:
        if m.settings is None and m.tok_s():
            out[int(m.concurrency)] = float(m.tok_s())
    if baseline is None:
        return out
    if isinstance(baseline, Mapping):
        out.update({int(k): float(v) for k, v in baseline.items()})
    elif isinstance(baseline, Measurement):
        if baseline.tok_s():
            out[int(baseline.concurrency)] = float(baseline.tok_s())
    elif isinstance(baseline, (int, float)):
        conc = sorted({m.concurrency for m in _spec(measurements)})
        if len(conc) == 1:
            out[int(conc[0])] = float(baseline)
    else:
        for m in baseline:
            if m.tok_s():
                out[int(m.concurrency)] = float(m.tok_s())
    return out


def _baseline_at(base: Mapping[int, float], b: int) -> float | None:
    """No-speculation tok/s at batch size b: measured, else interpolated between the nearest
    measured batch sizes linearly in round time (1000 · B / tok/s, ms per decode step); None
    outside the measured range."""
    if b in base:
        return float(base[b])
    below = [k for k in base if k < b]
    above = [k for k in base if k > b]
    if not below or not above:
        return None
    lo, hi = max(below), min(above)
    t_lo, t_hi = 1000.0 * lo / base[lo], 1000.0 * hi / base[hi]
    t = t_lo + (t_hi - t_lo) * (b - lo) / (hi - lo)
    return 1000.0 * b / t


def _chain_tau(alpha: np.ndarray, d: float | np.ndarray, steps: int, known: int | None = None) -> np.ndarray:
    """τ of the chain with ``steps`` steps, p_i = min(α d^(i−1), P_MAX); α (and d) broadcast; past
    position ``known`` (the deepest measured) continued as :func:`specdash.advisor.acceptance.extrapolate`
    says (the last measured rate, only a decay continuing)."""
    alpha = np.asarray(alpha, float)
    if steps == 0:
        return np.ones_like(alpha)
    return 1.0 + _chain_reach(alpha, d, steps, known).sum(axis=-1)


def _chain_reach(alpha: np.ndarray, d: float | np.ndarray, steps: int, known: int | None = None) -> np.ndarray:
    """Q_j = P(accepted drafts ≥ j) = Π_{i≤j} p_i for j = 1..steps, shape ``alpha.shape + (steps,)``
    (the rates of :func:`_chain_tau`)."""
    alpha = np.asarray(alpha, float)
    d = np.asarray(d, float)
    p = np.minimum(alpha[..., None] * d[..., None] ** np.arange(steps), P_MAX)
    if known is not None and steps > known:
        p = extrapolate(p, d, known, steps)
    return np.cumprod(p, axis=-1)


def _crossing(model: _Model, lo: int, hi: int, batch: float, off: float | None = None) -> float | None:
    """First-position acceptance α* at which chain ``hi`` starts to beat chain ``lo`` at this batch
    (d held; ``off``: the tok/s that stands for ``lo`` = 0, speculation off); None when ``hi``
    never does; the grid's first α when it always does."""
    t_hi = model.cost.round_ms(chain(hi), batch)
    d = model.acc.d
    if lo == 0 and off is not None:
        f = 1000.0 * batch * _chain_tau(_ALPHAS, d, hi, model.acc.known_depth) / t_hi - off
    else:
        t_lo = model.cost.round_ms(chain(lo), batch)
        known = model.acc.known_depth
        f = _chain_tau(_ALPHAS, d, hi, known) / t_hi - _chain_tau(_ALPHAS, d, lo, known) / t_lo
    over = np.nonzero(f >= 0)[0]
    if over.size == 0:
        return None
    i = int(over[0])
    if i == 0:
        return float(_ALPHAS[0])
    f0, f1 = f[i - 1], f[i]
    return float(_ALPHAS[i - 1] + (0.0 - f0) / (f1 - f0) * (_ALPHAS[i] - _ALPHAS[i - 1]))


def _ema(model: _Model, steps: int, alpha: float) -> float:
    """Expected accepted drafts per request per round at chain ``steps`` (bonus excluded)."""
    return float(_chain_tau(np.array([alpha]), model.acc.d, steps, model.acc.known_depth)[0]) - 1.0


def _ema_sd(model: _Model, steps: int, alpha: float, batch: int, ema_alpha: float = EMA_ALPHA) -> float:
    """Standard deviation of SGLang's EMA of accepted drafts per request at chain ``steps`` in steady
    state, from round-to-round noise alone: a request's accepted count A has P(A ≥ j) = Q_j, so
    Var A = Σ_j (2j − 1) Q_j − (Σ_j Q_j)²; the batch mean over ``batch`` requests has Var A / batch; an
    EMA with weight a keeps a/(2 − a) of that variance.  Requests whose acceptance differs (prompts,
    categories) add to it, so this is a floor."""
    if steps <= 0:
        return 0.0
    q = _chain_reach(np.array([alpha]), model.acc.d, steps, model.acc.known_depth)[0]
    j = np.arange(1, steps + 1)
    var = float(((2 * j - 1) * q).sum() - q.sum() ** 2)
    return math.sqrt(max(var, 0.0) / max(1, int(batch)) * ema_alpha / (2.0 - ema_alpha))


def _transition(model: _Model, lo: int, hi: int, batches: Sequence[int],
                off: Mapping[int, float] | None = None) -> dict[str, Any]:
    """Break-even of adjacent candidates lo < hi over the slot's batch sizes (median)."""
    stars = [_crossing(model, lo, hi, b, (off or {}).get(b)) for b in batches]
    known = [a for a in stars if a is not None]
    if not known:
        return {"lo": lo, "hi": hi, "alpha": None, "rise_ema": None, "drop_ema": None}
    a = float(np.median(known))
    return {"lo": lo, "hi": hi, "alpha": a, "rise_ema": _ema(model, lo, a) if lo > 0 else None,
            "drop_ema": _ema(model, hi, a)}


def _dead_band(up: float, down: float, band: float, up_never: bool, down_never: bool) -> tuple[float, float]:
    """(up, down) with ``up − down ≥ band``.

    Both thresholds of a pair lo < hi sit at lo − 0.5 + hysteresis (climb from lo when EMA > lo − 0.5 + up,
    drop from hi when EMA ≤ lo − 0.5 + down), and SGLang keeps the EMA across a switch.  With down ≥ up
    an EMA between the two makes the controller climb at lo and drop back at the next decision, every
    ``update_interval`` batches, whatever the acceptance (seen on SGLang 0.5.14 with a real draft: 60
    switches in a few seconds).  With up − down ≥ band the EMA after a climb is above the drop threshold
    and only rises (hi accepts more than lo), after a drop below the climb threshold and only falls, so
    the controller moves only when the acceptance does, by more than the noise.  The band is centred on
    the two break-even thresholds; a side that is never met (the sentinels of :func:`_hysteresis`) stays,
    and the other moves."""
    if up - down >= band:
        return up, down
    if up_never and not down_never:
        return up, up - band
    if down_never and not up_never:
        return down + band, down
    mid = 0.5 * (up + down)
    return mid + 0.5 * band, mid - 0.5 * band


def _hysteresis(cands: Sequence[int], best: int, trans: Sequence[dict[str, Any]],
                band: float = MIN_DEAD_BAND) -> tuple[float, float]:
    """(up, down) from the transitions next to ``best`` (see the module docstring), at least ``band``
    apart (:func:`_dead_band`)."""
    by_pair = {(t["lo"], t["hi"]): t for t in trans}
    j = list(cands).index(best)
    up = down = 0.0
    above = by_pair.get((cands[j], cands[j + 1])) if j + 1 < len(cands) else None
    below = by_pair.get((cands[j - 1], cands[j])) if j > 0 else None
    up_t = above or below
    if up_t is not None and up_t["lo"] > 0:
        if up_t["rise_ema"] is None:
            up = 0.51  # the higher candidate never pays: EMA ≤ steps always stays below the threshold
        else:
            up = up_t["rise_ema"] - (up_t["lo"] - 0.5)
    down_t = below or above
    if down_t is not None:
        base = 0.5 if down_t["lo"] == 0 else down_t["lo"] - 0.5
        if down_t["drop_ema"] is None:
            down = -base - 0.01  # the lower candidate never pays: a threshold below 0 is never met
        else:
            down = down_t["drop_ema"] - base
    up_never = up_t is not None and up_t["lo"] > 0 and up_t["rise_ema"] is None
    down_never = down_t is not None and down_t["drop_ema"] is None
    up, down = _dead_band(float(up), float(down), band, up_never, down_never)
    return float(up), float(down)


def adaptive_schedule(
    measurements: Sequence[Measurement],
    batch_sizes: Sequence[int],
    *,
    baseline: float | Measurement | Mapping[int, float] | Sequence[Measurement] | None = None,
    max_steps: int = max(STEPS_GRID),
    candidates: Sequence[Settings] | None = None,
    weights: Mapping[int, float] | None = None,
    min_gain: float = 0.01,
    drift: float = 0.1,
    seed: int = 0,
    static: Settings | None = None,
    beyond_measured: bool = False,
) -> AdaptiveSchedule:
    """The best chain steps per batch size, as SGLang adaptive slots (module docstring).

    ``batch_sizes``: the captured CUDA-graph decode batch sizes (requests per round);
    ``baseline``: no-speculation tok/s — a mapping batch size → tok/s, baseline measurements,
    or one number at the measured concurrency; ``candidates``: the static settings to compare
    against (default :func:`candidate_grid`); ``weights``: how much each batch size counts in
    the static choice and the gain (default equal); ``drift``: how far the first-position
    acceptance α may move between workloads (prompts, categories) — the candidates also cover the
    best steps at α̂ ± drift (an assumption, default 0.1; the posterior alone only says how well
    the mean is known); ``static``: the static setting to compare against (a tune's pick, chosen at
    one concurrency; default: the candidate with the best geometric mean over the batch sizes);
    ``beyond_measured``: also consider steps deeper than the deepest measured draft position
    (default False: steps, candidates and the static comparison stop at that depth — past it the
    acceptance is the last measured rate carried on, a guess: on a real SmolLM2-135M + trained EAGLE3
    draft under SGLang 0.5.14, measured to position 7, it carried a rising rate of 0.83 on and
    predicted 0.25 more accepted tokens a round at steps 10, where the server ran 0.04 more).
    Raises ValueError without a usable speculative measurement or batch size.
    """
    sizes = sorted({int(b) for b in batch_sizes if int(b) >= 1})
    if not sizes:
        raise ValueError("adaptive_schedule needs at least one batch size ≥ 1")
    spec = [m for m in _spec(measurements) if m.tau() is not None and m.round_time_ms()[0] is not None]
    if not spec:
        raise ValueError("the schedule needs at least one speculative measurement with tok/s and accept length")
    model = _Model(spec, max(1, int(spec[0].concurrency)), seed)
    base = _baseline_map(baseline, measurements)
    wts = np.array([float((weights or {}).get(b, 1.0)) for b in sizes])
    wts = wts / wts.sum()
    depth = model.acc.known_depth
    top = max(0, int(max_steps)) if beyond_measured else min(max(0, int(max_steps)), depth)
    steps_list = list(range(0, top + 1))

    # point predictions: τ does not depend on the batch, so cache it per setting
    statics = [s for s in (list(candidates) if candidates is not None else candidate_grid())
               if beyond_measured or s.steps <= depth]
    if static is not None and static not in statics:
        statics.append(static)
    taus = {s: model._point(s, 1)[1] for s in statics}
    chain_tau = {k: model._point(chain(k), 1)[1] for k in steps_list}

    def tok(s: Settings, tau: float, b: int) -> float:
        return 1000.0 * b * tau / model.cost.round_ms(s, b)

    tier_tok = {b: {k: tok(chain(k), chain_tau[k], b) for k in steps_list} for b in sizes}
    off_cap = {}  # the steps-0 tier does all a plain decode step does plus a draft forward
    for b in sizes:
        bl = _baseline_at(base, b)
        if bl is not None:
            dstep = float(model.cost.w[4] + model.cost.w[5] * b)
            off_cap[b] = 1000.0 * b / (1000.0 * b / bl + dstep)
            tier_tok[b][0] = min(tier_tok[b][0], off_cap[b])
    static_tok = {s: np.array([tok(s, taus[s], b) for b in sizes]) for s in statics}
    if static is None:
        static = max(statics, key=lambda s: float(wts @ np.log(static_tok[s])))

    best_steps = {b: max(steps_list, key=lambda k, b=b: (tier_tok[b][k], -k)) for b in sizes}

    # joint posterior draws → the spread of the best steps per batch size
    a, d, _ = model.a_draws
    draw_tau = np.stack([_chain_tau(a, d, k, model.acc.known_depth) for k in steps_list], axis=1)  # (draws, steps)
    floor = 0.05 * model.cost.scale_ms

    def draw_best(b: int) -> np.ndarray:
        feats = np.stack([cost_features(chain(k), b) for k in steps_list], axis=0)  # (steps, 8)
        toks = 1000.0 * b * draw_tau / np.maximum(model.w_draws @ feats.T, floor)
        if b in off_cap:
            toks[:, 0] = np.minimum(toks[:, 0], off_cap[b])
        return np.asarray(steps_list)[np.argmax(toks, axis=1)]

    def best_at_alpha(b: int, alpha: float) -> int:
        tau = {k: float(_chain_tau(np.array([alpha]), model.acc.d, k, model.acc.known_depth)[0]) for k in steps_list}
        toks = {k: 1000.0 * b * tau[k] / model.cost.round_ms(chain(k), b) for k in steps_list}
        toks[0] = min(toks[0], off_cap.get(b, toks[0]))
        return max(steps_list, key=lambda k: (toks[k], -k))

    groups: list[list[int]] = []
    for b in sizes:
        if groups and best_steps[groups[-1][-1]] == best_steps[b]:
            groups[-1].append(b)
        else:
            groups.append([b])
    slots = []
    for g in groups:
        best = best_steps[g[0]]
        if best == 0:
            cands: tuple[int, ...] = (0,)
        else:
            spread = np.concatenate([draw_best(b) for b in g])
            lo = int(np.percentile(spread, 10, method="lower"))
            hi = int(np.percentile(spread, 90, method="higher"))
            a_hat = model.acc.alpha
            b_mid = g[len(g) // 2]
            lo = min(lo, best_at_alpha(b_mid, max(0.005, a_hat - drift)))
            hi = max(hi, best_at_alpha(b_mid, min(P_MAX, a_hat + drift)))
            cands = tuple(sorted({lo, best, hi}))
        trans = [_transition(model, cands[i], cands[i + 1], g, {b: tier_tok[b][0] for b in g})
                 for i in range(len(cands) - 1)]
        if len(cands) > 1:
            # the dead band: SGLang's own, or two standard deviations of the EMA's noise at the slot's
            # smallest batch (the noisiest), at each move's break-even acceptance
            sds = [_ema_sd(model, k, t["alpha"], g[0]) for t in trans if t["alpha"] is not None
                   for k in (t["lo"], t["hi"])]
            band = max(MIN_DEAD_BAND, DEAD_BAND_SD * max(sds, default=0.0))
            up, down = _hysteresis(cands, best, trans, band)
        else:
            up, down = 0.0, 0.0
        slots.append(SlotPlan(g[0], tuple(g), cands, best, up, down, trans))

    batches = []
    for b in sizes:
        k = best_steps[b]
        sp = model.predict(chain(k), b)
        if k == 0 and b in off_cap:  # the steps-0 tier, never above a plain decode step + a draft forward
            sp.tok_s = tier_tok[b][0]
            sp.lo, sp.hi = min(sp.lo, sp.tok_s), max(min(sp.hi, off_cap[b]), sp.tok_s)
        st = model.predict(static, b)
        here = max(statics, key=lambda s, b=b: static_tok[s][sizes.index(b)])
        batches.append(BatchPlan(b, k, sp.tok_s, (sp.lo, sp.hi), st.tok_s, (st.lo, st.hi), _baseline_at(base, b), here,
                                 float(static_tok[here][sizes.index(b)]), dict(tier_tok[b])))
    sched = np.array([p.schedule_tok_s for p in batches])
    stat = np.array([p.static_tok_s for p in batches])
    gain = float(math.exp(float(wts @ np.log(sched / stat))))
    static_wins = gain < 1.0 + min_gain
    no_spec = None
    if all(_baseline_at(base, b) is not None for b in sizes):
        bl = np.array([_baseline_at(base, b) for b in sizes])
        no_spec = bool(np.all(bl >= np.maximum(sched, stat)))

    notes = []
    conc = sorted({int(m.concurrency) for m in spec})
    if len(conc) == 1:
        notes.append(f"measured at concurrency {conc[0]} only: how the costs grow with the batch comes from priors "
                     "— measure a second concurrency before trusting the slots far from it")
    elif sizes[-1] > 2 * conc[-1] or sizes[0] * 2 < conc[0]:
        notes.append(f"batch sizes {sizes[0]}–{sizes[-1]} reach beyond the measured concurrencies {conc}: extrapolated")
    if not model.cost.identifiable_split and model.cost.n_timer == 0:
        notes.append("chain runs only and no device timer: the draft/verify split comes from priors")
    multi = [s for s in slots if len(s.candidate_steps) > 2]
    if multi:
        notes.append("SGLang shares one up and one down hysteresis per slot: they are set for the moves next to the "
                     "slot's best steps; moves between the other candidates use the same values")
    deep = {s.batch_size: [c for c in s.candidate_steps if c > depth] for s in slots}
    deep = {k: v for k, v in deep.items() if v}
    if deep:
        notes.append("candidates deeper than the deepest measured position (" + str(depth) + "): "
                     + "; ".join(f"slot {k}: steps {', '.join(map(str, v))}" for k, v in deep.items())
                     + " — their acceptance past it is extrapolated (the last measured rate), not measured")
    elif not beyond_measured and int(max_steps) > depth:
        notes.append(f"steps stop at {depth}, the deepest measured draft position: deeper steps would rest on an "
                     "acceptance carried on past what was measured — measure a deeper chain to consider them")
    missing = [b for b in sizes if _baseline_at(base, b) is None]
    if base and missing:
        notes.append(f"no baseline at batch sizes {missing} (measured at {sorted(base)}, interpolated between): "
                     "no no-speculation comparison there")
    zero = [b for b in sizes if best_steps[b] == 0]
    if zero:
        notes.append(f"steps 0 at batch sizes {zero}: drafting does not pay there; SGLang's steps-0 tier still runs "
                     "the verify graph and the draft-extend forward (unless SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1, "
                     "srt/environ.py), so a server without speculation is faster still at those loads")
    if not any(m.settings is not None and m.settings.steps == 0 for m in spec):
        notes.append("the steps-0 tier was not measured: its round time is the cost model's base plus one draft "
                     "forward (capped by the no-speculation baseline where known); an adaptive launch measures it")

    worst = min(batches, key=lambda p: p.schedule_tok_s / p.static_tok_s)
    best_b = max(batches, key=lambda p: p.schedule_tok_s / p.static_tok_s)
    if no_spec:
        verdict = ("speculation does not pay at any of these batch sizes: the no-speculation baseline is at least as "
                   f"fast as both the adaptive schedule and the best static setting ({static.label()}) — serve "
                   "without speculation")
    elif static_wins:
        verdict = (f"a static setting wins: {static.label()} is within {min_gain:.0%} of the adaptive schedule or "
                   f"better (schedule ×{gain:.3f} of it, geometric mean over batch sizes {sizes[0]}–{sizes[-1]}; "
                   f"at batch size {worst.batch_size}: {worst.schedule_tok_s:.1f} vs {worst.static_tok_s:.1f} tok/s) "
                   "— launch it without --speculative-adaptive")
    else:
        verdict = (f"the adaptive schedule beats the best static setting ({static.label()}) by {gain - 1:.1%} "
                   f"(geometric mean over batch sizes {sizes[0]}–{sizes[-1]}); most at batch size "
                   f"{best_b.batch_size}: steps {best_b.steps}, {best_b.schedule_tok_s:.1f} vs "
                   f"{best_b.static_tok_s:.1f} tok/s")
        if no_spec is False:
            slow = [p.batch_size for p in batches if p.baseline_tok_s is not None
                    and p.baseline_tok_s > p.schedule_tok_s]
            if slow:
                verdict += f"; the no-speculation baseline is faster still at batch sizes {slow}"
    return AdaptiveSchedule(slots, batches, static, gain, static_wins, no_spec, verdict, notes)
