"""Adaptive schedules: best chain steps per batch size, SGLang slots, hysteresis that makes
SGLang's controller settle on the best steps, and the schedule-vs-static verdict."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specdash.advisor import Measurement, Settings, adaptive_schedule, chain

# A load-dependent truth inside the model family: round ms = b0 + b1·B + (v0 + v1·B)·(N − 1) +
# max(S, 1)·(d0 + d1·B·K); plain decode step = p0 + p1·B; acceptance p_i = α·d^(i−1).  The verify
# cost per draft token grows fast with the batch (compute-bound), so drafting pays at batch 1
# and not at batch 64.
TRUE = {"b0": 5.0, "b1": 0.05, "v0": 0.05, "v1": 0.15, "d0": 0.4, "d1": 0.01}
PLAIN = (4.5, 0.05)
ALPHA, DECAY = 0.8, 0.9
SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64]


def true_round_ms(s: Settings, b: int) -> float:
    t = TRUE
    return (t["b0"] + t["b1"] * b + (t["v0"] + t["v1"] * b) * (s.draft_tokens - 1)
            + max(s.steps, 1) * (t["d0"] + t["d1"] * b * s.topk))


def true_p(steps: int) -> np.ndarray:
    return np.minimum(ALPHA * DECAY ** np.arange(steps), 0.995)


def true_tok_s(k: int, b: int) -> float:
    tau = 1.0 + float(np.cumprod(true_p(k)).sum()) if k else 1.0
    return 1000.0 * b * tau / true_round_ms(chain(k), b)


def baseline_tok_s(b: int) -> float:
    return 1000.0 * b / (PLAIN[0] + PLAIN[1] * b)


def measure(k: int, b: int, rounds: int = 4000) -> Measurement:
    """A noise-free launch (or adaptive tier) of chain k at batch b: expected histogram counts."""
    p = true_p(k)
    reach = np.concatenate([[1.0], np.cumprod(p)])
    pk = reach * np.concatenate([1.0 - p, [1.0]])
    hist = [round(float(rounds * x)) for x in pk]
    tau = 1.0 + float(np.dot(np.arange(len(hist)), hist)) / sum(hist)
    return Measurement(chain(k), 1000.0 * b * tau / true_round_ms(chain(k), b), b, tau, hist if k else None,
                       source="tier" if k == 0 else "launch")


MEASURED = [measure(k, b) for b in (1, 16, 64) for k in (1, 3, 5)] + [measure(0, 64)]
BASELINE = {b: baseline_tok_s(b) for b in (1, 16, 64)}


def sglang_move(cands: list[int], cur: int, ema: float, up: float, down: float) -> int:
    """One decision of SGLang's adaptive slot, written from ``AdaptiveStepSlot._recompute_params``
    (``srt/speculative/adaptive_spec_params.py``, 0.5.14), ``ceiling_coeff`` 0."""
    i = cands.index(cur)
    if cur == 0:
        return cands[min(i + 1, len(cands) - 1)]
    old = i
    while i > 0:
        prev = cands[i - 1]
        if ema <= (0.5 if prev == 0 else prev - 0.5) + down:
            i -= 1
        else:
            break
    if i == old:
        while i < len(cands) - 1 and ema > cands[i] - 0.5 + up:
            i += 1
    return cands[i]


@pytest.fixture(scope="module")
def schedule():
    return adaptive_schedule(MEASURED, SIZES, baseline=BASELINE)


def test_best_steps_per_batch_size_match_the_truth(schedule):
    for bp in schedule.batches:
        best_true = max(true_tok_s(k, bp.batch_size) for k in range(0, 9))
        got = true_tok_s(bp.steps, bp.batch_size)
        print(f"B={bp.batch_size:>2}: steps {bp.steps} predicted {bp.schedule_tok_s:8.1f} (true {got:8.1f}, true best "
              f"{best_true:8.1f}); static {schedule.static.label()} {bp.static_tok_s:8.1f}; baseline "
              f"{bp.baseline_tok_s:8.1f}")
        assert got >= 0.99 * best_true
        assert bp.schedule_tok_s == pytest.approx(got, rel=0.03)
        assert bp.schedule_ci[0] <= bp.schedule_tok_s <= bp.schedule_ci[1]
    steps = [bp.steps for bp in schedule.batches]
    assert steps == sorted(steps, reverse=True)  # fewer steps as the load grows
    assert steps[0] >= 3 and steps[-1] == 0      # drafting does not pay at batch 64


def test_slots_follow_sglangs_routing(schedule):
    slots = schedule.to_slots()
    keys = list(slots)
    assert keys == sorted(keys) and keys[0] == SIZES[0]
    assert all(isinstance(k, int) for k in keys)
    covered = [b for s in schedule.slots for b in s.covers]
    assert covered == SIZES
    for s in schedule.slots:
        assert s.batch_size == min(s.covers)
        assert s.best_steps in s.candidate_steps
        assert set(slots[s.batch_size]) == {"candidate_steps", "up_hysteresis", "down_hysteresis", "ceiling_coeff"}
        # a padded batch size b goes to the slot with the largest key ≤ b (bisect_right − 1)
        for b in s.covers:
            assert max(k for k in keys if k <= b) == s.batch_size
    off = schedule.slots[-1]
    assert off.candidate_steps == (0,) and off.best_steps == 0  # no probing where drafting does not pay
    assert schedule.tiers() == sorted({c for s in schedule.slots for c in s.candidate_steps})
    json.dumps(schedule.to_json(), allow_nan=False)


def test_hysteresis_makes_the_controller_settle_on_the_best_steps(schedule):
    for s in schedule.slots:
        cands = list(s.candidate_steps)
        if len(cands) == 1:
            continue
        for cur in cands:
            ema = float(np.cumprod(true_p(cur)).sum()) if cur else 0.0  # accepted drafts per request at cur
            nxt = sglang_move(cands, cur, ema, s.up_hysteresis, s.down_hysteresis)
            assert abs(cands.index(nxt) - cands.index(s.best_steps)) <= abs(cands.index(cur) - cands.index(s.best_steps))
            if cur == s.best_steps:
                assert nxt == cur, (s.to_json(), cur, ema)


def test_verdict_names_the_baseline_where_it_wins(schedule):
    assert not schedule.static_wins and schedule.gain > 1.01
    assert schedule.verdict.startswith("the adaptive schedule beats the best static setting")
    assert "baseline is faster still at batch sizes" in schedule.verdict
    assert schedule.no_spec_wins is False
    assert any("steps 0 at batch sizes" in n for n in schedule.notes)


def test_static_wins_when_one_setting_is_best_everywhere():
    # measured at batch 1 only: the batch growth comes from priors, every batch size gets the same steps
    ms = [measure(k, 1) for k in (1, 3, 5)]
    sch = adaptive_schedule(ms, [1, 2, 4], baseline=baseline_tok_s(1))
    assert len({bp.steps for bp in sch.batches}) == 1
    assert sch.static_wins and sch.verdict.startswith("a static setting wins")
    assert "without --speculative-adaptive" in sch.verdict
    assert any("concurrency 1 only" in n for n in sch.notes)


def test_no_speculation_wins_everywhere():
    ms = [measure(k, 64) for k in (1, 3)]
    sch = adaptive_schedule(ms, [64], baseline={64: 5 * baseline_tok_s(64)})
    assert sch.no_spec_wins is True and sch.verdict.startswith("speculation does not pay at any of these batch sizes")


def test_inputs_are_checked():
    with pytest.raises(ValueError):
        adaptive_schedule(MEASURED, [])
    with pytest.raises(ValueError):
        adaptive_schedule([Measurement(None, 100.0)], [1])


def _switches(slot_plan, up: float, down: float, alpha: float, batch: int, batches: int = 3000, seed: int = 0) -> int:
    """SGLang 0.5.14's controller (:class:`specdash.sglang.adaptive.AdaptivePolicy`) on one slot, fed the
    accepted drafts of ``batch`` requests per verify round, drawn from the chain p_i = α·d^(i−1) at the
    steps it is at; returns how many times it switched."""
    from specdash.sglang.adaptive import AdaptivePolicy, AdaptiveSlot

    rng = np.random.default_rng(seed)
    slot = AdaptiveSlot(tuple(slot_plan.candidate_steps), up_hysteresis=up, down_hysteresis=down)
    pol = AdaptivePolicy(slot, slot_plan.best_steps, "0.5.14")
    moves = 0
    for _ in range(batches):
        k = pol.current_steps
        p = np.minimum(alpha * DECAY ** np.arange(k), 0.995)
        ok = rng.random((batch, k)) < p  # position i accepted given all before it were
        acc = np.cumprod(ok, axis=1).sum(axis=1) if k else np.zeros(batch, int)
        moves += pol.observe([int(a) for a in acc]) is not None
    return moves


def test_the_controller_holds_at_the_break_even_instead_of_switching_every_decision(schedule):
    """At an acceptance where two adjacent candidates are equally fast, SGLang's controller (which keeps
    its EMA across a switch) must not flip between them at every decision: the generated hysteresis keeps
    a dead band (up − down ≥ SGLang's own 0.25 and ≥ 2 sd of the EMA's noise).  The break-even thresholds
    alone (the schedule's values before the band, as generated until a real draft on SGLang 0.5.14 showed
    60 switches in a few seconds) do flip — the check can fail."""
    from specdash.advisor.schedule import _hysteresis

    checked = 0
    for s in schedule.slots:
        if len(s.candidate_steps) < 2:
            continue
        assert s.up_hysteresis - s.down_hysteresis >= 0.25 - 1e-9, s.to_json()
        pair = next((t for t in s.thresholds if t["alpha"] is not None and t["lo"] > 0
                     and s.best_steps in (t["lo"], t["hi"])), None)
        if pair is None:
            continue
        b = s.covers[0]
        decisions = (3000 - 10) // 5
        banded = _switches(s, s.up_hysteresis, s.down_hysteresis, pair["alpha"], b)
        raw_up, raw_down = _hysteresis(list(s.candidate_steps), s.best_steps, s.thresholds, band=-np.inf)
        raw = _switches(s, raw_up, raw_down, pair["alpha"], b)
        print(f"slot {s.batch_size} {s.candidate_steps}: banded up {s.up_hysteresis:.3f} down "
              f"{s.down_hysteresis:.3f} → {banded} switches; break-even only up {raw_up:.3f} down {raw_down:.3f} "
              f"→ {raw} switches ({decisions} decisions)")
        assert banded <= 0.05 * decisions
        if raw_up - raw_down < 0:
            assert raw > 4 * max(banded, 1)
        checked += 1
    assert checked >= 1


def test_steps_stop_at_the_measured_depth_unless_asked():
    """Measured to steps 2 only, where the truth's best chain at batch 1 is 3 steps or more: by default
    nothing deeper than 2 is scheduled or compared with, and a note says why; with beyond_measured the
    schedule reaches past 2 and every deeper candidate is named as extrapolated."""
    ms = [measure(k, b) for b in (1, 16) for k in (1, 2)]
    kw = {"baseline": {b: baseline_tok_s(b) for b in (1, 16)}}
    capped = adaptive_schedule(ms, [1, 2, 4, 8, 16], **kw)
    assert max(c for s in capped.slots for c in s.candidate_steps) == 2
    assert all(max(int(k) for k in p.by_steps) == 2 and p.best_here.steps <= 2 for p in capped.batches)
    assert any("steps stop at 2, the deepest measured draft position" in n for n in capped.notes), capped.notes
    assert not any("deeper than the deepest measured" in n for n in capped.notes)

    sch = adaptive_schedule(ms, [1, 2, 4, 8, 16], beyond_measured=True, **kw)
    deep = sorted({c for s in sch.slots for c in s.candidate_steps if c > 2})
    note = [n for n in sch.notes if "deeper than the deepest measured position (2)" in n]
    assert deep, "the truth's best chain at batch 1 is 3 steps or more: the schedule should reach past 2"
    assert len(note) == 1 and all(f"{c}" in note[0] for c in deep), (sch.to_json()["slots"], sch.notes)
