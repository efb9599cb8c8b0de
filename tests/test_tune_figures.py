"""The tuner's own figures (issue 26) and the calibrated real bed (issue 21).

* ``tune`` on ``small-fast-decay`` (a small target whose acceptance decays fast by position, best 5/8/41)
  and on ``real-smol`` (fitted to the real SmolLM2-135M + trained EAGLE3 runs): the pick, scored by the
  simulator's *analytic* expectation of the suite actually sent (``specdash.sim.expected`` with the
  prompts and the seed: CONTRACTS.md "Advisor validation"), is within 2 % of the best over SGLang's whole
  space (steps 1..10 × topk {1, 2, 4, 8, 16} × draft tokens 2..64, every point run as asked);
* the pieces behind it: the advisor's tree shapes against the simulator's, the split of an adaptive
  launch's pooled histogram into its two tiers, the expected-improvement stop, the standard errors, and
  the recommendation per load range.
"""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest

from specdash.advisor import Settings, expected_accept_length, position_probs, tree_branching
from specdash.advisor.advise import Prediction as _Prediction
from specdash.advisor.measurement import acceptance_rel_se
from specdash.advisor.planner import expected_gain
from specdash.bench.live import window_se
from specdash.bench.runner import RunOptions
from specdash.bench.schedule import load_ranges
from specdash.bench.tune import tune
from specdash.collect.tiers import TierWindow, split_pair_histogram
from specdash.profile import load_profile, parse_suite
from specdash.sglang.speculative import normalize_speculative
from specdash.sim import scenario as simsc
from specdash.sim.expected import expected
from tests.test_bench import sim_profile

FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def _as_asked(s: int, k: int, n: int) -> bool:
    res = normalize_speculative("EAGLE3", s, k, n)
    if res.rejections or any(a.field in FIELDS for a in res.adjustments):
        return False
    return (res.num_steps, res.eagle_topk, res.num_draft_tokens) == (s, k, n)


FULL = [(s, k, n) for s in range(1, 11) for k in (1, 2, 4, 8, 16) for n in range(2, 65) if _as_asked(s, k, n)]


def _analytic(scenario, conc, max_tokens, prompts, seed, x) -> float:
    s, k, n = x
    return expected({"speculative_algorithm": "EAGLE3", "steps": s, "topk": k, "num_draft_tokens": n}, scenario,
                    conc, max_new_tokens=max_tokens, time_scale=1.0, prompts=prompts, seed=seed)["output_tok_s_total"]


# (scenario, target, draft, start, max tokens, time scale, prompts) at concurrency 1.  real-smol (rank trees,
# launch-bound timing: the refit of 2026-12-04) runs 12 prompts: with 4 its launches' acceptance sampling moves
# each setting's tok/s by ±2-4 % (seeded, so the same settings always err the same way), which decided picks
# between close settings; with 12 the spread is about halved.  Its space's best is the wide deep tree 7/8/64
# (a verify round costs the same whatever its draft tokens on the 135 M target); a run picked 9/8/64, 0.5 % below.
@pytest.mark.parametrize("scenario,model,draft,start,max_tokens,time_scale,n_prompts", [
    ("small-fast-decay", "sim:tiny-llama", "sim:tiny-llama-eagle3", (3, 1, 4), 512, 1.0, 4),
    ("real-smol", "sim:smollm2-135m", "sim:smollm2-135m-eagle3", (3, 1, 4), 256, 1.0, 12),
])
def test_tune_pick_within_2_percent_of_the_spaces_analytic_best(tmp_path, scenario, model, draft, start, max_tokens,
                                                                  time_scale, n_prompts):
    prompts = [f"prompt number {i} about topic {i * 7}" for i in range(n_prompts)]
    prof = load_profile(str(sim_profile(tmp_path, f"f-{scenario}", scenario=scenario, model=model, draft=draft,
                                        spec=start, time_scale=time_scale)))
    suite = parse_suite({"suite": {"name": "f", "max_tokens": max_tokens, "concurrency": 1, "warmup": 1,
                                   "repeats": 1}, "prompts": [{"text": t} for t in prompts]})
    out = tmp_path / "runs"
    report = asyncio.run(tune(prof, suite, budget=8, out=out, opts=RunOptions(out_dir=out, preflight=False),
                              preset_dir=tmp_path / "presets"))
    best_tok, best_x = max((_analytic(scenario, 1, max_tokens, prompts, 1, x), x) for x in FULL)
    pick = tuple(report["best"][f] for f in FIELDS)
    got = _analytic(scenario, 1, max_tokens, prompts, 1, pick)
    gap = 1.0 - got / best_tok
    print(json.dumps({"scenario": scenario, "pick": pick, "grid_best": best_x, "gap": gap,
                      "launches": report["launches"], "by_purpose": report["launches_by_purpose"],
                      "measured": [tuple(r["settings"][f] for f in FIELDS) for r in report["measured"] if r["settings"]]}))
    assert gap <= 0.02, (pick, best_x, gap)
    # the relaunch tune: the baseline and its explorations; the final A/B pairs their records (no launch)
    assert report["launches"] == len(report["launch_log"]) <= 9
    assert set(report["launches_by_purpose"]) <= {"baseline", "explore"}
    if report["comparison"] is not None:
        assert report["comparison"]["from_exploration"] and report["comparison"]["pairs"] == len(prompts)


def test_advisor_tree_shapes_match_the_simulators():
    """The advisor's sibling allocation is the path-score order the simulator draws from: the same
    branching and accept length for every (steps, topk, draft tokens) of the space at the simulator's α, d, g."""
    for alpha, decay, gain in ((0.60, 0.78, 0.75), (0.55, 0.85, 0.7), (0.8, 0.93, 0.3)):
        for s, k, n in FULL[::7]:
            mine = tree_branching(position_probs(alpha, decay, s), Settings(s, k, n), gain)
            sims = simsc.tree_branching(s, k, n)
            assert mine == sims, (s, k, n)
            tau = expected_accept_length(position_probs(alpha, decay, len(mine)), mine, gain)
            want = 1.0 + simsc.expected_accepted(simsc.success_probs(alpha, decay, sims, gain))
            assert tau == pytest.approx(want, rel=1e-9)
    # 4/8/26 under fast decay: the old marginal-gain greedy read τ 4.08, the simulator's truth is 3.94
    br = tree_branching(position_probs(0.55, 0.85, 4), Settings(4, 8, 26), 0.7)
    assert br == [8, 8, 8, 1]
    assert expected_accept_length(position_probs(0.55, 0.85, 4), br, 0.7) == pytest.approx(3.940, abs=5e-4)


def test_split_pair_histogram_recovers_each_tiers_rounds():
    """Two chain tiers (steps 2 and 5) drawn from one per-position acceptance: the split of their pooled
    histogram gives back each tier's own histogram (up to sampling noise) and conserves the counts."""
    rng = np.random.default_rng(3)
    p = np.array([0.7, 0.65, 0.6, 0.55, 0.5])

    def draw(steps, n):
        ok = rng.random((n, steps)) < p[:steps]
        acc = np.where(ok.all(axis=1), steps, ok.argmin(axis=1))
        return np.bincount(acc, minlength=steps + 1)

    h2, h5 = draw(2, 6000), draw(5, 4000)
    pooled = h5.copy()
    pooled[:3] += h2
    got = split_pair_histogram(pooled.tolist(), 2, 5, share_a=6000 / 10000)
    assert got is not None
    a, b = got
    assert len(a) == 3 and len(b) == 6
    assert abs(sum(a) - 6000) <= 2 and abs(sum(b) - 4000) <= 2
    assert a[2] == pytest.approx(h2[2], rel=0.05) and b[2] == pytest.approx(h5[2], rel=0.08)
    assert b[3:] == h5[3:].tolist()  # deeper than the short tier: the long tier's alone, exactly
    # what cannot be split
    assert split_pair_histogram([], 2, 5, 0.5) is None
    assert split_pair_histogram([1, 2, 3], 3, 2, 0.5) is None
    assert split_pair_histogram([1] * 8, 2, 5, 0.5) is None  # buckets past the long tier
    assert split_pair_histogram([1, 2], 1, 3, 1.0) is None


def test_standard_errors():
    # a geometric-ish histogram: Var[k]/n under the rounds' own spread
    hist = [400, 300, 200, 100]
    n = sum(hist)
    mean = (300 + 400 + 300) / n
    var = sum((k - mean) ** 2 * c for k, c in enumerate(hist)) / (n - 1)
    assert acceptance_rel_se(hist) == pytest.approx(math.sqrt(var / n) / (1 + mean))
    assert acceptance_rel_se([1]) is None and acceptance_rel_se(None) is None  # one round: no spread
    assert acceptance_rel_se([5]) == 0.0  # five rounds, all alike

    def w(tok, sec):
        return TierWindow(3, 4, 0.0, sec, 6, 6, tok, 6, tok, sec, False, 0, 5)

    same = [w(100.0, 0.1)] * 5
    assert window_se(same) == pytest.approx(0.0, abs=1e-9)
    spread = [w(90.0, 0.1), w(110.0, 0.1), w(100.0, 0.1), w(95.0, 0.1)]
    r = 395.0 / 0.4
    want = math.sqrt(4 / 3 * sum((t - r * 0.1) ** 2 for t in (90.0, 110.0, 100.0, 95.0))) / 0.4
    assert window_se(spread) == pytest.approx(want)
    assert window_se(spread[:2]) is None


def test_expected_gain_of_a_prediction():
    s = Settings(3, 1, 4)

    def Prediction(st, tok, lo, hi):  # the advisor's Prediction with the fields this needs
        return _Prediction(st, tok, lo, hi, 2.0, 10.0, [1, 1, 1])

    # a point prediction (no interval): the plain difference
    assert expected_gain(Prediction(s, 110.0, 110.0, 110.0), 100.0) == pytest.approx(10.0)
    assert expected_gain(Prediction(s, 90.0, 90.0, 90.0), 100.0) == 0.0
    # at the best with a 2 % log sd: σ·φ(0)·best ≈ 0.8 % of it
    sd = 0.02
    p = Prediction(s, 100.0, 100.0 * math.exp(-1.96 * sd), 100.0 * math.exp(1.96 * sd))
    assert expected_gain(p, 100.0) == pytest.approx(100.0 * sd / math.sqrt(2 * math.pi), rel=0.02)
    far = Prediction(s, 90.0, 90.0 * math.exp(-1.96 * sd), 90.0 * math.exp(1.96 * sd))
    assert 0.0 <= expected_gain(far, 100.0) < 1e-4


def test_recommendation_per_load_range():
    best = Settings(5, 8, 40)
    tie = [{"concurrency": 1, "speedup": 0.99, "ci95": [0.97, 1.01], "verdict": "no significant difference"},
           {"concurrency": 16, "speedup": 1.005, "ci95": [0.99, 1.02], "verdict": "no significant difference"}]
    ranges, text, rec = load_ranges(tie, best)
    assert not rec and [r["launch"] for r in ranges] == ["static"] and "one static setting" in text
    split = [{"concurrency": 1, "speedup": 0.80, "ci95": [0.78, 0.82], "verdict": "slower"},
             {"concurrency": 16, "speedup": 2.5, "ci95": [2.4, 2.6], "verdict": "faster"}]
    ranges, text, rec = load_ranges(split, best)
    assert [(r["from"], r["launch"]) for r in ranges] == [(1, "static"), (16, "adaptive")]
    assert ranges[-1]["to"] is None and "between 1 and 16" in text
    # the static pick loses 60 % at 16 streams, the schedule 20 % at 1: for a load range, the schedule
    assert rec and "worst loss at a verified load is 20%" in text
    ranges, text, rec = load_ranges([{**split[0], "speedup": 0.5}, {**split[1], "speedup": 1.1}], best)
    assert not rec and "without --speculative-adaptive" in text


def test_live_tune_from_a_tree_start_measures_chains_live_and_trees_by_launch(tmp_path):
    """Issue 21 "Live from any start": a tree start keeps the live path; the chain tiers run in an adaptive
    launch, the start tree (and any other tree) in launches of their own, and the pick is made across both."""
    from tests.test_tune_live import suite as live_suite
    from tests.test_tune_live import versioned_profile

    prof = load_profile(str(versioned_profile(tmp_path, "treestart", "0.5.14", spec=(3, 4, 8), time_scale=4.0)))
    report = asyncio.run(tune(prof, live_suite(n=4), budget=3, out=tmp_path / "runs", live=True, chain_budget=1,
                              schedule=False, final_ab=False,
                              opts=RunOptions(out_dir=tmp_path / "runs", preflight=False),
                              preset_dir=tmp_path / "presets"))
    assert report["mode"] == "live" and report["live"]["used"] and report["live"]["note"] is None
    roles = [e["role"] for e in report["launch_log"]]
    assert roles[:2] == ["baseline", "live"] and roles.count("live") == 1
    tiers = [r for r in report["measured"] if r["source"] == "tier"]
    assert len(tiers) == 2 and all(r["settings"]["speculative_eagle_topk"] == 1 for r in tiers)
    trees = [r for r in report["measured"] if r["source"] == "launch" and r["settings"]
             and r["settings"]["speculative_eagle_topk"] > 1]
    assert {"speculative_num_steps": 3, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8} in [
        r["settings"] for r in trees]  # the start, by a launch of its own
    assert report["best"] in [r["settings"] for r in report["measured"] if r["settings"]]
