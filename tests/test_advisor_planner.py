"""The tune planner's exploration: the cheapest chain that achieves the measured acceptance comes
before wider settings, chain tiers for one adaptive launch, launch counting with tiers."""

from __future__ import annotations

import numpy as np

from specdash.advisor import (
    Measurement,
    Settings,
    TunePlanner,
    candidate_grid,
    cheapest_matching_chain,
    pooled_histogram,
    tier_measurable,
)
from tests.test_advisor import Oracle

# The tiny-model case on SGLang 0.5.14 (H200): the draft accepts exactly one token per verify round.
START = Settings(3, 1, 4)
ONE_PER_ROUND = Measurement(START, 625.4, accept_length=2.0, accept_histogram=[0, 768])
TINY_BASELINE = 833.0

# An oracle for it: acceptance 0.995 at depth 1 and none deeper (d = 0); host-bound rounds of
# ≈ 3 ms (1.7 ms overhead + a 1.2 ms target step) with 0.1 ms draft steps; 833 tok/s without
# speculation.
TINY = Oracle("tiny-h200", 0.995, 0.0, 0.3, 1, 1.2, 0.0005, 0.1, 0.001, 1.7, 0.0, START)


def test_one_draft_per_round_proposes_the_one_step_chain_next():
    planner = TunePlanner(START, 3, baseline=TINY_BASELINE)
    nxt = planner.next_settings([ONE_PER_ROUND])
    assert nxt == Settings(1, 1, 2)  # the advisor before this change proposed steps 1 / topk 8 / draft tokens 2
    assert "cheapest setting that achieves the measured acceptance" in planner.reason
    assert "[0, 768]" in planner.reason


def test_cut_follows_the_deepest_accepted_position():
    deep = Measurement(Settings(5, 1, 6), 300.0, accept_length=1.5, accept_histogram=[50, 30, 20, 0, 0, 0])
    assert pooled_histogram([deep]) == [50, 30, 20, 0, 0, 0]
    assert cheapest_matching_chain([deep]) == Settings(2, 1, 3)
    planner = TunePlanner(Settings(5, 1, 6), 4)
    assert planner.next_settings([deep]) == Settings(2, 1, 3)
    # a tree start: its deepest accepted position sets the chain to try (no chain measured yet)
    tree = Measurement(Settings(5, 4, 8), 300.0, accept_length=1.9, accept_histogram=[30, 40, 20, 10])
    assert cheapest_matching_chain([tree]) == Settings(3, 1, 4)
    assert TunePlanner(Settings(5, 4, 8), 4).next_settings([tree]) == Settings(3, 1, 4)
    # chains pool ahead of trees: a chain's histogram says what a chain achieves
    assert cheapest_matching_chain([tree, ONE_PER_ROUND]) == Settings(1, 1, 2)
    # nothing to cut when the start is already the cheapest matching chain
    full = Measurement(START, 400.0, accept_length=2.5, accept_histogram=[20, 20, 30, 30])
    assert cheapest_matching_chain([full]) == START
    planner = TunePlanner(START, 4)
    planner.next_settings([full])
    assert "cheapest" not in planner.reason


def test_tiny_model_tune_measures_the_one_step_chain_within_budget_3():
    rng = np.random.default_rng(0)
    planner = TunePlanner(TINY.start, 3, baseline=TINY.baseline_tok_s())
    ms: list[Measurement] = []
    while (s := planner.next_settings(ms)) is not None:
        ms.append(TINY.measure(s, rng))
    order = [m.settings for m in ms]
    print("tiny tune:", [s.label() for s in order], planner.reason)
    assert len(ms) <= 3 and order[:2] == [START, Settings(1, 1, 2)]
    grid_best = max(TINY.tok_s(s) for s in candidate_grid())
    assert TINY.tok_s(planner.best(ms)) >= 0.99 * grid_best  # (1, 1, 2) or the marginally better (1, 2, 3)
    adv = planner.advice(ms)
    assert adv.pays is False and "does not pay" in adv.verdict
    assert adv.cost.per_token_ms(1)[1] >= 0.0


def test_chain_tiers_group_chains_for_one_launch():
    planner = TunePlanner(START, 4, baseline=TINY_BASELINE)
    assert planner.chain_tiers([]) == [1, 3, 7]  # no data: SGLang's default batch-1 slot spread
    tiers = planner.chain_tiers([ONE_PER_ROUND])
    assert tiers and tiers[0] == 1 and tiers == sorted(set(tiers)) and len(tiers) <= 3
    assert START.steps not in tiers  # measured already
    assert tier_measurable(Settings(2, 1, 3)) and not tier_measurable(Settings(2, 4, 8))


def test_tiers_of_one_launch_count_once():
    run = {"profile": "p", "tiers": [
        {"speculative_num_steps": 1, "speculative_num_draft_tokens": 2, "verify_rounds": 500, "output_tokens": 1000,
         "accept_length": 2.0, "accept_rate": 1.0, "output_tok_s": 650.0, "share": 0.5},
        {"speculative_num_steps": 3, "speculative_num_draft_tokens": 4, "verify_rounds": 500, "output_tokens": 1000,
         "accept_length": 2.0, "accept_rate": 0.33, "output_tok_s": 620.0, "share": 0.5},
    ]}
    tiers = Measurement.tiers_from_run(run, launch=7)
    assert [m.settings for m in tiers] == [Settings(1, 1, 2), Settings(3, 1, 4)]
    assert all(m.source == "tier" and m.launch == 7 for m in tiers)
    assert TunePlanner.launches(tiers) == 1
    assert TunePlanner.launches([*tiers, ONE_PER_ROUND]) == 2
    assert Measurement.tiers_from_run({"tiers": None}) == []


def test_exploration_gain_is_what_one_more_launch_is_expected_to_buy():
    """A live tune's last two launches go to the adaptive schedule's A/B only while one more exploration is expected to
    gain less than 1 % of the best measured (``planner.exploration_gain``): here the start chain alone leaves the trees
    far above it, and a space with every candidate measured leaves nothing to buy."""
    from tests.test_advisor import SCENARIOS

    healthy = next(o for o in SCENARIOS if o.name == "healthy")
    rng = np.random.default_rng(3)
    live = TunePlanner(healthy.start, 6, baseline=healthy.baseline_tok_s(), live_margin=0.01)
    ms = [healthy.measure(healthy.start, rng)]
    gain = live.exploration_gain(ms)
    best_pred = max(p.tok_s for p in live.last_advice.predictions if p.settings != healthy.start)
    assert gain >= 0.01, gain
    assert best_pred > ms[0].output_tok_s  # the gain is real: a wider setting is predicted faster than the measured chain
    small = [healthy.start, Settings(4, 1, 5), Settings(3, 2, 6)]
    done = TunePlanner(healthy.start, 6, baseline=healthy.baseline_tok_s(), candidates=small, live_margin=0.01)
    every = [healthy.measure(s, rng) for s in small]
    assert done.exploration_gain(every) == 0.0


def test_the_planners_fit_reads_only_the_tunes_concurrency():
    """A live tune's first launch also measures the chain tiers at the schedule's high concurrency; those rounds
    (16 requests' tokens a verify) must not move the concurrency-1 predictions the exploration rests on — they made
    wide trees look dear and sent the small-fast-decay live tune through narrow ones first (`_fit_input`)."""
    from dataclasses import replace

    from tests.test_advisor import SCENARIOS

    healthy = next(o for o in SCENARIOS if o.name == "healthy")
    rng = np.random.default_rng(5)
    at_c1 = [healthy.measure(healthy.start, rng), healthy.measure(Settings(7, 1, 8), rng)]
    at_c16 = [replace(m, concurrency=16, output_tok_s=m.output_tok_s * 3.1) for m in at_c1]

    def preds(ms):
        p = TunePlanner(healthy.start, 6, baseline=healthy.baseline_tok_s(), live_margin=0.01)
        nxt = p.next_settings(ms)
        return nxt, {q.settings: round(q.tok_s, 6) for q in p.last_advice.predictions}

    alone, with_high = preds(at_c1), preds(at_c1 + at_c16)
    assert alone == with_high
    assert len(alone[1]) > 10  # predictions were made (a real fit), not an empty advice
