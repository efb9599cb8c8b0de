"""The tuner's space is SGLang's (issue #14): steps 1..10, topk up to 16, draft tokens up to 64 where a
tree can hold them, nothing SGLang would rewrite or reject.

Three held-out simulator scenarios (``long-acceptance``, ``wide-tree``, ``compute-rich-c4``) have their
analytic best (``specdash.sim.expected``, CONTRACTS.md "Advisor validation") outside the old space
(draft tokens <= 16, topk <= 8, steps <= 8); ``tune --budget 8`` on each must end within 2 % of the best
over the *full* valid grid — steps 1..10 x topk {1, 2, 4, 8, 16} x every draft-token count 2..64 — widened by
the load spread of its launches (:meth:`tests.simtruth.LaunchTruths.load_spread`, 1.0 on an idle machine), and
no setting it proposes or launches may be one SGLang rewrites.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specdash.advisor import STEPS_GRID, Settings, TunePlanner, candidate_grid
from specdash.bench.runner import RunOptions
from specdash.bench.tune import tune
from specdash.profile import load_profile, parse_suite
from specdash.sglang.speculative import normalize_speculative, tree_capacity
from specdash.sglang.versions import DEFAULT_VERSION
from specdash.sim.expected import expected
from tests.simtruth import LaunchTruths
from tests.test_bench import sim_profile

SPEC_FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def runs_as_asked(s: int, k: int, n: int, version: str = DEFAULT_VERSION) -> bool:
    """SGLang starts these flags and runs exactly them (no rejection, no rewrite of the three values)."""
    res = normalize_speculative("EAGLE3", s, k, n, version=version)
    if res.rejections or any(a.field in SPEC_FIELDS for a in res.adjustments):
        return False
    return (res.num_steps, res.eagle_topk, res.num_draft_tokens) == (s, k, n)


FULL_GRID = [(s, k, n) for s in range(1, 11) for k in (1, 2, 4, 8, 16) for n in range(2, 65) if runs_as_asked(s, k, n)]


def _expected(scenario: str, concurrency: int, max_tokens: int, s: int, k: int, n: int) -> float:
    return expected({"speculative_algorithm": "EAGLE3", "steps": s, "topk": k, "num_draft_tokens": n}, scenario,
                    concurrency, max_new_tokens=max_tokens, time_scale=1.0)["output_tok_s_total"]


def full_grid_best(scenario: str, concurrency: int, max_tokens: int) -> tuple[float, tuple[int, int, int]]:
    return max((_expected(scenario, concurrency, max_tokens, *x), x) for x in FULL_GRID)


def test_candidate_grid_is_sglangs_space_and_never_rewritten():
    grid = candidate_grid()
    assert max(s.steps for s in grid) == max(STEPS_GRID) == 10
    assert {s.topk for s in grid} == {1, 2, 4, 8, 16}
    assert max(s.draft_tokens for s in grid) == 64 and Settings(5, 8, 32) in grid  # SGLang's bench best
    assert Settings(10, 1, 11) in grid and Settings(2, 16, 32) in grid
    for s in grid:
        for version in (DEFAULT_VERSION, "0.5.14", "0.5.10"):
            assert runs_as_asked(s.steps, s.topk, s.draft_tokens, version), (s, version)
        assert s.draft_tokens <= tree_capacity(s.steps, s.topk)
        assert s.topk > 1 or s.draft_tokens == s.steps + 1
    # what SGLang would rewrite or refuse is not a candidate
    assert Settings(3, 1, 16) not in grid and Settings(1, 8, 64) not in grid and Settings(2, 4, 32) not in grid


def test_a_planner_decision_over_the_full_space_picks_a_candidate():
    """One decision of the planner (a fit + a prediction over every candidate) returns one of SGLang's candidates
    or stops; its speed is a benchmark (``benchmarks/planner_speed.py``), not an assertion here."""
    import numpy as np

    from tests.test_advisor import SCENARIOS

    sc = SCENARIOS[0]
    rng = np.random.default_rng(0)
    planner = TunePlanner(sc.start, 8, baseline=sc.baseline_tok_s())
    ms = [sc.measure(s, rng) for s in (Settings(3, 1, 4), Settings(6, 1, 7), Settings(5, 8, 32), Settings(7, 4, 24))]
    nxt = planner.next_settings(ms)
    assert len(planner.candidates) == 922
    assert nxt is None or (nxt in set(planner.candidates) and nxt not in {m.settings for m in ms})


# (scenario, concurrency, prompts, time scale): 512-token requests; each launch costs ~2 s of wall clock, most
# of it the simulated server's start-up.  At concurrency 4 the rounds are short, so a slower time scale keeps
# the client's own overhead out of the measured tok/s, and 8 prompts make two waves.
@pytest.mark.parametrize("scenario,concurrency,n_prompts,time_scale", [
    ("long-acceptance", 1, 4, 20.0),
    ("wide-tree", 1, 4, 20.0),
    ("compute-rich-c4", 4, 8, 4.0),
])
def test_tune_reaches_the_full_grid_best(tmp_path, monkeypatch, scenario, concurrency, n_prompts, time_scale):
    max_tokens, start = 512, (3, 1, 4)
    best_tok_s, best_settings = full_grid_best(scenario, concurrency, max_tokens)
    _, k, n = best_settings
    assert n > 16 or k >= 8, best_settings  # the premise: outside the old space
    prof = load_profile(str(sim_profile(tmp_path, f"t-{scenario}", scenario=scenario, spec=start,
                                        time_scale=time_scale)))
    suite = parse_suite({"suite": {"name": "t", "max_tokens": max_tokens, "concurrency": concurrency,
                                   "warmup": 1, "repeats": 1},
                         "prompts": [{"text": f"prompt number {i} about topic {i * 7}"} for i in range(n_prompts)]})
    truths = LaunchTruths(monkeypatch)
    out = tmp_path / "runs"
    report = asyncio.run(tune(prof, suite, budget=8, out=out, opts=RunOptions(out_dir=out, preflight=False),
                              preset_dir=tmp_path / "presets", final_ab=False))
    b = report["best"]
    got = _expected(scenario, concurrency, max_tokens, b["speculative_num_steps"], b["speculative_eagle_topk"],
                    b["speculative_num_draft_tokens"])
    spread, factors = truths.load_spread(report["measured"])
    assert report["exploration_launches"] <= 8
    gap = 1.0 - got / best_tok_s
    measured = [r["settings"] for r in report["measured"] if r["settings"]]
    print(json.dumps({"scenario": scenario, "tune_best": b, "tune_expected_tok_s": got, "grid_best": best_settings,
                      "grid_best_tok_s": best_tok_s, "gap": gap, "stop": report["stop_reason"],
                      "load_spread": spread, "launches": factors,
                      "measured": [tuple(m[f] for f in SPEC_FIELDS) for m in measured]}))
    # nothing launched was rewritten: what the server ran is what was asked, and SGLang keeps it as given
    grid = set(candidate_grid())
    for m in measured:
        x = tuple(m[f] for f in SPEC_FIELDS)
        assert runs_as_asked(*x), x
        assert Settings(*x) in grid or Settings(*x) == Settings(*start), x
    for e in report["launch_log"]:
        if e["role"] != "explore":
            continue
        summary = json.loads((Path(e["run_dir"]) / "summary.json").read_text())
        codes = {f["code"] for run in summary["runs"] for f in (run.get("verification") or {}).get("findings", [])}
        assert "VERIFY_ADJUSTED" not in codes, (e["settings"], codes)
    assert got >= 0.98 * best_tok_s / spread, (b, best_settings, gap, spread)


def test_one_greedy_pass_gives_every_draft_token_count():
    """The advisor's per-(steps, topk) pass (tree_branchings) equals the per-setting greedy (tree_branching)."""
    from specdash.advisor import position_probs, tree_branching, tree_branchings

    for alpha, d, beta in ((0.8, 0.94, 0.5), (0.6, 0.645, 0.3), (0.55, 0.85, 0.7), (0.995, 0.0, 0.3)):
        for steps in (1, 2, 5, 10):
            for topk in (1, 2, 8, 16):
                fam = tree_branchings(position_probs(alpha, d, steps), steps, topk, beta, 64)
                for n in range(2, 65):
                    want = tree_branching(position_probs(alpha, d, min(steps, n - 1)), Settings(steps, topk, n), beta)
                    assert fam[n] == want, (alpha, d, beta, steps, topk, n)
