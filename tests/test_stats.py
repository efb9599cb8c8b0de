"""Paired speedup statistics: calibration (self-A/B), power (10 % difference), edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdash.bench.stats import (
    FASTER,
    NO_DIFF,
    SLOWER,
    expanded_confidence,
    geometric_mean,
    paired_speedup,
    stop_rule,
    summarize,
)

N_TRIALS = 200
N_PAIRS = 15
NOISE = 0.05  # lognormal sigma of one request's tok/s (run-to-run jitter on one prompt)


def _suite(rng: np.random.Generator, level: float, n: int = N_PAIRS, noise: float = NOISE) -> np.ndarray:
    """Per-request tok/s for n prompts: a per-prompt level (shared by A and B) times noise."""
    prompt_levels = np.linspace(0.7, 1.4, n)  # long prompts are slow on both sides
    return level * prompt_levels * np.exp(rng.normal(0.0, noise, n))


@pytest.mark.parametrize("n_pairs", [N_PAIRS, 4])
def test_self_ab_reports_no_difference_in_at_least_90_percent_of_trials(n_pairs):
    """CONTRACTS: ≥ 200 seeded trials of ~15 pairs, independent seeds per side, coverage ≥ 90 %
    (also at 4 pairs, where the t-floor keeps the interval honest)."""
    no_diff = 0
    for trial in range(N_TRIALS):
        a = _suite(np.random.default_rng([trial, 0, n_pairs]), 50.0, n=n_pairs)
        b = _suite(np.random.default_rng([trial, 1, n_pairs]), 50.0, n=n_pairs)
        res = paired_speedup(a, b, seed=trial)
        assert res.pairs == n_pairs
        no_diff += res.verdict == NO_DIFF
    coverage = no_diff / N_TRIALS
    print(f"self-A/B coverage: {coverage:.1%} over {N_TRIALS} trials of {n_pairs} pairs")
    assert coverage >= 0.90


@pytest.mark.parametrize("factor, expected", [(1.10, FASTER), (1 / 1.10, SLOWER)])
def test_ten_percent_difference_detected_with_the_right_sign(factor, expected):
    hits = wrong = 0
    for trial in range(N_TRIALS):
        a = _suite(np.random.default_rng([trial, 2]), 50.0)
        b = _suite(np.random.default_rng([trial, 3]), 50.0 * factor)
        res = paired_speedup(a, b, seed=trial)
        hits += res.verdict == expected
        wrong += res.verdict not in (expected, NO_DIFF)
    print(f"10 % difference ({expected}): detected in {hits / N_TRIALS:.1%}")
    assert wrong == 0
    assert hits / N_TRIALS >= 0.9


def test_geometric_mean_of_paired_ratios_is_exact():
    res = paired_speedup([10.0, 20.0, 40.0], [20.0, 20.0, 20.0])  # ratios 2, 1, 0.5
    assert res.speedup == pytest.approx(1.0)
    res = paired_speedup([1.0, 2.0, 3.0, 4.0], [1.2, 2.4, 3.6, 4.8 * 1.0001])
    assert res.speedup == pytest.approx(1.2 * 1.0001 ** 0.25)
    assert geometric_mean([1.0, 4.0]) == pytest.approx(2.0)


def test_a_over_b_is_the_reciprocal_of_b_over_a():
    rng = np.random.default_rng(5)
    a, b = _suite(rng, 40.0), _suite(rng, 44.0)
    ab, ba = paired_speedup(a, b, seed=1), paired_speedup(b, a, seed=1)
    assert ab.speedup * ba.speedup == pytest.approx(1.0)
    assert ab.ci95[0] * ba.ci95[1] == pytest.approx(1.0, rel=1e-6)
    assert ab.ci95[0] < ab.speedup < ab.ci95[1]


def test_too_few_pairs_stay_honest():
    empty = paired_speedup([], [])
    assert empty.speedup is None and empty.verdict == NO_DIFF and empty.ci95 == (None, None)
    one = paired_speedup([10.0], [20.0])
    assert one.speedup == pytest.approx(2.0) and one.verdict == NO_DIFF and one.ci95 == (None, None)
    two = paired_speedup([10.0, 10.0], [20.0, 21.0])
    assert two.verdict == NO_DIFF and two.pairs == 2
    assert any("at least 3" in n for n in two.notes)


def test_zero_spread_is_handled_without_crashing():
    same = paired_speedup([5.0] * 6, [5.0] * 6)
    assert same.verdict == NO_DIFF and same.ci95 == (1.0, 1.0)
    scaled = paired_speedup([1.0, 2.0, 3.0], [1.1, 2.2, 3.3])
    assert scaled.method == "degenerate" and scaled.verdict == FASTER
    assert scaled.ci95[0] == pytest.approx(1.1) and scaled.ci95[1] == pytest.approx(1.1)


def test_bad_values_are_dropped_and_counted():
    res = paired_speedup([10.0, 0.0, 10.0, None, 10.0, 10.0], [11.0, 12.0, float("nan"), 9.0, 11.5, 10.5])
    assert res.pairs == 3 and res.dropped == 3
    with pytest.raises(ValueError):
        paired_speedup([1.0, 2.0], [1.0])


def test_expanded_level_matches_hesterberg():
    # n = 15: t_{0.975,14} = 2.1448, sqrt(15/14) * t = 2.2201, 2*Phi(2.2201) - 1 = 0.9736
    assert expanded_confidence(15) == pytest.approx(0.9736, abs=5e-4)
    assert expanded_confidence(1000) == pytest.approx(0.95, abs=2e-3)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1.0, 1000.0), min_size=3, max_size=20), st.floats(0.5, 2.0))
def test_constant_ratio_gives_that_ratio(a, c):
    res = paired_speedup(a, [x * c for x in a])
    assert res.speedup == pytest.approx(c, rel=1e-9)
    assert res.ci95[0] <= res.speedup <= res.ci95[1]


def test_summarize():
    s = summarize([1.0, 2.0, 3.0, 4.0, None, float("nan")])
    assert s == {"mean": 2.5, "p50": 2.5, "p90": pytest.approx(3.7), "p99": pytest.approx(3.97)}
    assert summarize([]) is None
    assert summarize([None]) is None


def test_stop_rule_adds_repeats_until_narrow_or_budget_spent():
    rng = np.random.default_rng(11)
    a, b = _suite(rng, 50.0, n=5, noise=0.08), _suite(rng, 52.0, n=5, noise=0.08)
    dec = stop_rule(a, b, target_width=0.02, max_pairs=100, pairs_per_repeat=5)
    assert dec.add_repeats and dec.more_repeats >= 1 and dec.pairs_needed > 5
    # projection: width shrinks like 1/sqrt(n)
    assert dec.pairs_needed == math.ceil(5 * (dec.width / 0.02) ** 2)
    spent = stop_rule(a, b, target_width=0.02, max_pairs=5, pairs_per_repeat=5)
    assert not spent.add_repeats and "budget" in spent.reason
    tight = stop_rule(a, a * 1.05, target_width=0.02, max_pairs=100)
    assert not tight.add_repeats
    few = stop_rule([1.0], [1.1], target_width=0.05, max_pairs=10)
    assert few.add_repeats and few.more_repeats == 1


def test_practically_equal_sides_are_not_called_slower():
    """Same profile on both sides with near-deterministic timing: a CI of 0.997–1.000 excludes 1
    but is inside ±1 % (MIN_EFFECT), so the verdict must not be "slower"."""
    import numpy as np

    from specdash.bench.stats import MIN_EFFECT, paired_speedup

    rng = np.random.default_rng(3)
    a = 300 * np.exp(rng.normal(0, 0.0005, 9))
    b = a * 0.998 * np.exp(rng.normal(0, 0.0005, 9))
    res = paired_speedup(a, b)
    assert res.ci95[1] < 1.0 and res.ci95[0] > 1 / (1 + MIN_EFFECT)
    assert res.verdict == "no significant difference"
    assert paired_speedup(a, a * 0.95).verdict == "slower"
