"""What the tuner learned on the real H200 testbed (SGLang 0.5.14, SGLANG_SIMULATE_ACC_LEN=4.2):

* the fitted acceptance family α·d^(i−1) cannot follow a step (p = 1, 1, 1, 0.2, 0): where the pooled chain
  counts reached a position they now decide it (``AcceptanceFit.probs``), so a 15-step start's histogram no
  longer makes deep chains or wide trees look worth a launch;
* a measured chain bounds every chain between its depth and a deeper measured one (``chain_tau_bounds``);
* under simulated acceptance trees accept what the chain does, so only chains are candidates
  (``tune_candidates``);
* ``tune --baseline-from`` reuses a measured baseline, ``--max-time`` stops launching when the next launch
  would end past the budget.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from specdash.advisor import Measurement, Settings, TunePlanner, advise, fit_acceptance
from specdash.advisor.acceptance import PRIOR_ROUNDS, chain_position_counts
from specdash.advisor.advise import chain_tau_bounds
from specdash.bench.baseline import BaselineRunError, load_baseline_run
from specdash.bench.launches import LaunchLog, time_left
from specdash.bench.runner import RunOptions
from specdash.bench.tune import tune, tune_candidates
from specdash.profile import load_profile, parse_suite
from tests.test_bench import sim_profile

#: The real 15 / 1 / 16 start at L 4.2 (c1, 8 x 512 tokens): SGLang's "match-expected" draws 4 or 5 tokens a
#: round, so 794 rounds accepted 3 drafts and 185 accepted 4, none more (the simulator's run of it; the real
#: run's histogram has the same shape).
HIST_15 = [0, 0, 0, 794, 185] + [0] * 11


def start_measurement(tok_s: float = 419.0) -> Measurement:
    return Measurement(Settings(15, 1, 16), tok_s, accept_histogram=HIST_15, launch=1)


def test_pooled_chain_counts_stop_where_no_round_reached():
    counts = chain_position_counts([start_measurement()])
    assert counts == [(979, 979), (979, 979), (979, 979), (185, 979), (0, 185)]
    # a tree's histogram does not count (its accepted path rests on the modelled siblings)
    tree = Measurement(Settings(4, 2, 7), 580.0, accept_histogram=[0, 0, 0, 100, 20, 0, 0], launch=2)
    assert chain_position_counts([start_measurement(), tree]) == counts


def test_measured_positions_follow_the_counts_not_the_family():
    fit = fit_acceptance([start_measurement()])
    p = fit.probs(6)
    family = fit.family_probs(6)
    assert p[3] == pytest.approx((PRIOR_ROUNDS * family[3] + 185) / (PRIOR_ROUNDS + 979))
    assert abs(p[3] - 185 / 979) < 0.02
    assert p[4] < 0.06  # 0 of 185 rounds accepted position 5; the family says far more
    assert family[4] > 2 * p[4]
    assert p[5] == pytest.approx(family[5])  # never reached: the family extrapolates
    draws = fit.prob_draws(*fit.draws(400, np.random.default_rng(0))[:2], 6, np.random.default_rng(1))
    assert draws.shape == (400, 6) and (draws >= 0).all() and (draws <= 1).all()
    assert float(np.percentile(draws[:, 4], 97.5)) < 0.1  # the interval follows the counts too


def test_the_start_no_longer_sends_the_search_to_deep_trees():
    """Before: with the family alone, 10 / 8 / 56 was predicted at 925 tok/s [443, 1212] from this start and
    launched (measured: 391).  Now nothing deep or wide is predicted above the 4-step chain."""
    ms = [start_measurement(), Measurement(Settings(4, 1, 5), 593.9, accept_histogram=[0, 0, 0, 794, 185], launch=2)]
    adv = advise(ms, 215.4, candidates=None, top=5)
    top = {p.settings: p for p in adv.predictions}
    assert top[Settings(10, 8, 56)].hi < 650
    assert adv.best.settings.topk == 1 or adv.best.tok_s < 620


def test_a_chain_between_two_measured_depths_is_bounded_by_them():
    ms = [Measurement(Settings(4, 1, 5), 4116.0, accept_length=4.21, concurrency=8, launch=1, source="tier"),
          Measurement(Settings(15, 1, 16), 2488.0, accept_length=4.20, concurrency=8, launch=1, source="tier")]
    bounds = chain_tau_bounds(ms)
    assert set(bounds) == {4, 15} and bounds[4][0] == pytest.approx(4.21)
    adv = advise(ms, 1650.0, candidates=[Settings(s, 1, s + 1) for s in range(1, 11)], top=10)
    for p in adv.predictions:
        if 4 <= p.settings.steps <= 10:
            assert 4.20 - 0.05 <= p.accept_length <= 4.21 + 0.05, p


def test_simulated_acceptance_tunes_chains_only(tmp_path, monkeypatch):
    monkeypatch.delenv("SGLANG_SIMULATE_ACC_LEN", raising=False)
    plain = load_profile(str(sim_profile(tmp_path, "plain", spec=(15, 1, 16))))
    assert tune_candidates(plain) == (None, None)
    path = tmp_path / "simacc.toml"
    path.write_text(sim_profile(tmp_path, "simacc", spec=(15, 1, 16)).read_text().replace(
        "[env]", '[env]\nSGLANG_SIMULATE_ACC_LEN = "4.2"'))
    cands, note = tune_candidates(load_profile(str(path)))
    assert cands and all(c.topk == 1 and c.draft_tokens == c.steps + 1 for c in cands)
    assert [c.steps for c in cands] == list(range(1, 11))
    assert "SGLANG_SIMULATE_ACC_LEN=4.2" in note and "generate_simulated_accept_index" in note
    # the profile's own value wins over the environment's, and SGLang's "off" (-1) is not simulated
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "-1")
    assert tune_candidates(load_profile(str(path)))[0] == cands
    assert tune_candidates(plain) == (None, None)


def test_planner_stops_once_the_measured_chains_settle_it():
    """On the counts, after the start and the cheapest matching chain, the planner tries the neighbour 3 / 1 / 4
    and then nothing beats the best by more than 1 %: three exploration launches, as on the simulator."""
    chains = [Settings(s, 1, s + 1) for s in range(1, 11)]
    pl = TunePlanner(Settings(15, 1, 16), budget=6, baseline=215.4, candidates=chains)
    ms = [Measurement(None, 215.4), start_measurement()]
    assert pl.next_settings(ms) == Settings(4, 1, 5)
    ms.append(Measurement(Settings(4, 1, 5), 593.9, accept_histogram=[0, 0, 0, 794, 185], launch=2))
    nxt = pl.next_settings(ms)
    assert nxt == Settings(3, 1, 4)
    ms.append(Measurement(Settings(3, 1, 4), 591.3, accept_histogram=[0, 0, 0, 1024], launch=3))
    assert pl.next_settings(ms) is None and "1%" in pl.reason
    assert pl.best(ms) == Settings(4, 1, 5)


def _bench_dir(tmp_path, name: str, *, spec, concurrency=1, model="sim:llama-3.1-8b", suite="s", max_tokens=64):
    d = tmp_path / name
    d.mkdir()
    eff = ({"speculative_algorithm": "EAGLE3", "speculative_num_steps": spec[0], "speculative_eagle_topk": spec[1],
            "speculative_num_draft_tokens": spec[2]} if spec else {"speculative_algorithm": None})
    (d / "summary.json").write_text(json.dumps({"runs": [
        {"profile": name, "suite": suite, "concurrency": concurrency, "output_tok_s": 215.0, "effective": eff}]}))
    (d / "manifest.json").write_text(json.dumps({
        "max_tokens": max_tokens, "profile_data": {"server": {"model_path": model, "launcher": "sim", "tp_size": 1,
                                                              "extra_args": []}}}))
    return d


def test_baseline_from_checks_what_it_reuses(tmp_path):
    prof = load_profile(str(sim_profile(tmp_path, "p", spec=(3, 1, 4))))
    suite = parse_suite({"suite": {"name": "s", "max_tokens": 64, "concurrency": 1}, "prompts": [{"text": "hi"}]})
    run, notes = load_baseline_run(_bench_dir(tmp_path, "ok", spec=None), prof, suite)
    assert run["output_tok_s"] == 215.0 and run["run_dir"].endswith("ok") and notes == []
    run, notes = load_baseline_run(_bench_dir(tmp_path, "other-suite", spec=None, suite="s-c1"), prof, suite)
    assert "'s-c1'" in notes[0]
    cases = {
        "missing": (None, "summary.json"),
        "spec": (_bench_dir(tmp_path, "spec", spec=(3, 1, 4)), "used speculation"),
        "conc": (_bench_dir(tmp_path, "conc", spec=None, concurrency=8), "no measured run at the suite's concurrency 1"),
        "model": (_bench_dir(tmp_path, "model", spec=None, model="sim:qwen"), "model_path 'sim:qwen'"),
        "tokens": (_bench_dir(tmp_path, "tokens", spec=None, max_tokens=512), "max_tokens 512"),
    }
    for d, words in cases.values():
        with pytest.raises(BaselineRunError, match=words):
            load_baseline_run(d or tmp_path / "nowhere", prof, suite)


def test_time_left_judges_by_the_longest_launch():
    log = LaunchLog()
    assert time_left(0.0, None, log) is None
    import time

    t0 = time.monotonic() - 100.0  # 100 s used
    log.add({"profile": "p", "run_dir": None}, "explore", wall_s=90.0)
    log.add({"profile": "p", "run_dir": None}, "explore", wall_s=60.0)
    assert time_left(t0, 200.0, log) is None  # 100 + 90 <= 200
    why = time_left(t0, 180.0, log)
    assert why and "time budget of 180 s" in why and "up to 90 s" in why
    assert "2 launches" in time_left(t0, 250.0, log, 2)


def test_tune_reuses_a_baseline_and_keeps_to_its_time_budget(tmp_path):
    """End to end on the simulator: the reused baseline is not launched, and a budget that fits about two
    launches stops the search after the start and one more (the stop reason says so)."""
    prof_path = sim_profile(tmp_path, "tb", spec=(15, 1, 16), scenario="h200-8b-testbed", time_scale=4.0)
    prof_path.write_text(prof_path.read_text().replace("[env]", '[env]\nSGLANG_SIMULATE_ACC_LEN = "4.2"'))
    prof = load_profile(str(prof_path))
    suite = parse_suite({"suite": {"name": "s", "max_tokens": 128, "concurrency": 1, "warmup": 1, "repeats": 1},
                         "prompts": [{"text": f"prompt {i}"} for i in range(3)]})
    base_dir = _bench_dir(tmp_path, "base", spec=None, max_tokens=128)
    run, notes = load_baseline_run(base_dir, prof, suite)
    opts = RunOptions(out_dir=tmp_path / "runs", preflight=False)
    report = asyncio.run(tune(prof, suite, budget=6, out=tmp_path / "runs", opts=opts, preset_dir=tmp_path / "pre",
                              final_ab=False, baseline_run=run, baseline_notes=notes, max_time_s=1.0))
    assert report["baseline_reused"]["run_dir"] == str(base_dir) and report["baseline_tok_s"] == 215.0
    assert [e["role"] for e in report["launch_log"]] == ["explore"]  # no baseline launch; the start always runs
    assert report["exploration_launches"] == 1
    assert report["stop_reason"].startswith("time budget of 1 s") and report["time_budget_cut"]
    assert "only the 10 chains are candidates" in report["candidates_note"]


def test_live_pair_after_the_spread_is_the_reachable_chain():
    """The real H200 live tune at concurrency 8, L 4.2 (tunes-L4.2-a.json): launch 1 interleaved steps 1 and 15
    (τ 2.00 and 4.22, tiers: no histogram).  With the family fit alone its second launch paired steps 5 and 6 and
    the tune chose 5 / 1 / 6, 4.2 % slower in decode than the grid's 4 / 1 / 5 (round 8.335 vs 8.015 ms for
    4.18 vs 4.20 tokens).  A chain of S drafts accepts at most S + 1 tokens, so steps 4 is the shallowest that
    can reach 4.22: it comes first now.  On the L 3 c1 run (τ 3.00 at steps 15) the same rule gives steps 2,
    the grid's best there."""
    from specdash.advisor.planner import reachable_chain

    base = Measurement(None, 1648.4, concurrency=8)
    tiers = [Measurement(Settings(1, 1, 2), 2300.3, concurrency=8, accept_length=2.0, source="tier", launch=0),
             Measurement(Settings(15, 1, 16), 2977.9, concurrency=8, accept_length=4.2204, source="tier", launch=0)]
    assert reachable_chain(tiers) == Settings(4, 1, 5)
    chains = [Settings(s, 1, s + 1) for s in range(1, 11)]
    pl = TunePlanner(Settings(15, 1, 16), budget=6, baseline=base, candidates=chains)
    assert 4 in pl.chain_tiers([base, *tiers], max_tiers=2)
    l3 = [Measurement(Settings(1, 1, 2), 339.1, accept_length=2.0, source="tier", launch=0),
          Measurement(Settings(15, 1, 16), 309.0, accept_length=3.0, source="tier", launch=0)]
    assert reachable_chain(l3) == Settings(2, 1, 3)
    # nothing shallower can reach what the deepest chain measured: no suggestion
    assert reachable_chain([Measurement(Settings(3, 1, 4), 450.0, accept_length=3.9, launch=1)]) is None


def test_baseline_from_notes_other_server_settings(tmp_path):
    prof = load_profile(str(sim_profile(tmp_path, "p", spec=(3, 1, 4))))
    suite = parse_suite({"suite": {"name": "s", "max_tokens": 64, "concurrency": 1}, "prompts": [{"text": "hi"}]})
    d = _bench_dir(tmp_path, "base", spec=None)
    m = json.loads((d / "manifest.json").read_text())
    m["profile_data"]["server"]["mem_fraction_static"] = 0.5
    m["profile_data"]["env"] = {"NCCL_PROTO": "LL"}
    (d / "manifest.json").write_text(json.dumps(m))
    _, notes = load_baseline_run(d, prof, suite)
    text = " | ".join(notes)
    assert "mem_fraction_static = 0.5" in text and "NCCL_PROTO" in text


def test_an_empty_baseline_from_is_refused_not_ignored(capsys):
    """From a newcomer's try: ``--baseline-from ""`` launched a new baseline without a word."""
    from specdash.cli import main

    assert main(["tune", "--profile", "demo-eagle3", "--baseline-from", "", "--budget", "1"]) == 2
    assert "--baseline-from needs a run directory" in capsys.readouterr().err
