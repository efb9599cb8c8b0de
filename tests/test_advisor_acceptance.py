"""Per-position acceptance pooled over chains of different depths, and what it predicts past the deepest
measured position."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specdash.advisor import Measurement, Settings, advise
from specdash.advisor.acceptance import (
    P_MAX,
    expected_accept_by_position,
    expected_accept_length,
    fit_acceptance,
    pooled_position_acceptance,
    tree_branching,
)


def test_a_shorter_chain_does_not_count_as_failing_deeper_positions():
    # steps 1: 80 of 100 rounds accepted the one draft; steps 2: 80 reached position 2, 40 accepted it
    short, deep = [20, 80], [20, 40, 40]
    est = pooled_position_acceptance([(short, 1), (deep, 2)])
    assert [e.position for e in est] == [1, 2]
    assert est[0].reached == 200 and est[0].accepted == 160
    assert est[1].reached == 80 and est[1].accepted == 40 and est[1].p == pytest.approx(0.5)
    adv = advise([Measurement(Settings(1, 1, 2), 100.0, accept_histogram=short),
                  Measurement(Settings(2, 1, 3), 110.0, accept_histogram=deep)], 90.0)
    assert adv.positions[1].p == pytest.approx(0.5)  # the raw sum of histograms would say 40/160


def test_an_adaptive_steps0_tier_is_never_the_current_or_a_suggestion():
    ms = [Measurement(Settings(0, 1, 1), 120.0, accept_length=1.0, source="tier", launch=1),
          Measurement(Settings(2, 1, 3), 110.0, accept_histogram=[20, 40, 40], source="tier", launch=1)]
    adv = advise(ms, 90.0)
    assert adv.current == Settings(2, 1, 3)
    assert all(p.settings.steps >= 1 for p in adv.predictions)
    with pytest.raises(ValueError):
        advise(ms[:1], 90.0)


# --- past the deepest measured position (issue 21's real-bed finding) ----------------------------------

REAL = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "real-2026-12-02" / "runs"


def _real_run(tag: str) -> dict:
    (path,) = REAL.glob(f"*-real-smol-eagle3-{tag}/summary.json")
    return json.loads(path.read_text(encoding="utf-8"))["runs"][0]


def test_past_the_measured_depth_acceptance_keeps_the_last_measured_rate_on_the_real_bed():
    """Told only the real 3/1/4 launch (rates 0.689, 0.710, 0.764 rising), the family alone read d > 1 and
    predicted 0.797, 0.839, 0.883 at positions 4-6 of 6/1/7 (measured 0.768, 0.771, 0.713) and accept length
    3.321 (measured 3.097).  Past position 3 the prediction now keeps position 3's rate; the measured accept
    length of 6/1/7 lies in the widened interval."""
    fit = fit_acceptance([Measurement.from_run(_real_run("3-1-4"))])
    assert fit.depth == 3 and fit.d > 1.0  # the family still describes the rise within positions 1-3
    p = fit.probs(6)
    assert p[:3] == pytest.approx([0.689, 0.710, 0.764], abs=0.002)
    assert p[3:] == pytest.approx([p[2]] * 3, abs=1e-12)
    assert fit.family_probs(6)[5] == pytest.approx(0.883, abs=0.002)  # what it was
    st = Settings(6, 1, 7)
    tau = expected_accept_length(p, tree_branching(p, st, fit.beta), fit.beta)
    measured = _real_run("6-1-7")["accept_length"]
    assert tau == pytest.approx(3.223, abs=0.002) and measured == pytest.approx(3.097, abs=0.001)
    rng = np.random.default_rng(0)
    a, d, _ = fit.draws(400, rng)
    draws = 1.0 + np.cumprod(fit.prob_draws(a, d, 6, rng), axis=1).sum(axis=1)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    assert lo < measured < tau < hi
    # within the measured depth nothing changed: 2/1/3 from the counts
    assert fit.probs(2) == pytest.approx(p[:2])


def test_where_acceptance_decays_the_extrapolation_is_the_family():
    """d ≤ 1: p_D · d^(i − D) is α·d^(i − 1) itself past the measured depth (no counts to update it)."""
    fit = fit_acceptance([Measurement(Settings(2, 1, 3), 100.0, accept_length=2.2)])
    assert fit.depth == 2 and fit.d < 1.0 and not fit.counts
    assert fit.probs(8) == pytest.approx(fit.family_probs(8), rel=1e-12)
    # the draws past it spread wider with distance (the random walk), never above P_MAX
    rng = np.random.default_rng(1)
    a, d, _ = fit.draws(2000, rng)
    pd = fit.prob_draws(a, d, 8, rng)
    assert pd.max() <= P_MAX
    spread = np.std(np.log(pd / (1 - pd)), axis=0)
    assert spread[7] > spread[4] > spread[1]


def _real_grid_c4() -> list[Measurement]:
    """The real bed's EAGLE3 launches at concurrency 4 (SmolLM2-135M + its trained head, SGLang 0.5.14)."""
    root = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "real-2026-12-03" / "runs"
    out = []
    for path in sorted(root.glob("*/*/summary.json")):
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            if run["concurrency"] == 4 and run.get("accept_length"):
                m = Measurement.from_run(run)
                if m.settings is not None and m.settings.steps > 0 and m.settings.draft_tokens > 1:
                    out.append(m)
    return out


def test_the_rank_family_reads_the_real_deep_trees_closer_than_beta():
    """Told the real launches of steps ≤ 6 (chains and trees), each family predicts the seven trees of
    steps 7–10 it was not told: β reads them high (10/8/64 6.05 for 4.95), the rank family — SGLang's tree
    node by node, trees read by their accept length — four times closer (0.143 rms, ρ 0.52); the default
    (None: both fitted, the one reading the told trees' accept lengths closer kept) picks it here."""
    ms = _real_grid_c4()
    told = [m for m in ms if m.settings.steps <= 6]
    deep = [m for m in ms if m.settings.steps > 6 and m.settings.topk > 1]
    assert len(told) >= 24 and len(deep) == 7

    def rms(fit) -> float:
        return float(np.sqrt(np.mean([(fit.accept_length(m.settings) - m.tau()) ** 2 for m in deep])))

    beta, rank = fit_acceptance(told, "beta"), fit_acceptance(told, "rank")
    assert beta.tree_model == "beta" and beta.rho is None and 0.1 < beta.beta < 0.5
    assert rank.tree_model == "rank" and rank.beta is None and rank.rho == pytest.approx(0.522, abs=0.02)
    assert rms(beta) == pytest.approx(0.620, abs=0.03) and rms(rank) == pytest.approx(0.143, abs=0.03)
    big, measured = Settings(10, 8, 64), 4.947
    assert abs(rank.accept_length(big) - measured) < 0.3 < beta.accept_length(big) - measured
    # the rank family's per-position expectation is its own reach: τ = 1 + Σ unconditional
    pos = expected_accept_by_position(rank, big)
    assert sum(e["unconditional"] for e in pos) + 1 == pytest.approx(rank.accept_length(big))
    assert pos[0]["siblings"] > 1
    assert fit_acceptance(told, None).tree_model == fit_acceptance(told).tree_model == "rank"
    with pytest.raises(ValueError, match="tree_model"):
        fit_acceptance(told, "siblings")
    # the advisor runs on the rank family end to end
    adv = advise(told, 1600.0, tree_model="rank")
    assert adv.acceptance.tree_model == "rank" and adv.to_json()["acceptance"]["rho"] == pytest.approx(rank.rho)
    assert "ρ = " in adv.render()
