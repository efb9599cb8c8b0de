"""Acceptance by draft position: the computation (specdash.sglang.positions) on real SGLang 0.5.14
recordings and a real trained-draft histogram, the RUN field the bench writes, the advisor's expectation,
the bench table line and the tune report rows."""

from __future__ import annotations

import itertools
import json

import pytest

from specdash.sglang.positions import (
    accept_by_position,
    accept_fields,
    from_unconditional,
    position_counts,
    unconditional,
)
from specdash.sglang.records import SpecMeta

#: A trained EAGLE3 draft on an H200 (SmolLM2-135M target, steps 6 / topk 1 / draft tokens 7, SGLang
#: 0.5.14): the pooled verify-round histogram of its run and the per-position rates it gives.
REAL_HIST = [981, 556, 336, 236, 179, 173, 430]
REAL_RATES = [0.661, 0.709, 0.752, 0.768, 0.771, 0.713]


def test_real_trained_draft_vector():
    rows = accept_by_position(REAL_HIST, 6, 7)
    assert [r["position"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [round(r["rate"], 3) for r in rows] == REAL_RATES
    assert rows[0]["reached"] == sum(REAL_HIST) == 2891
    assert rows[0]["accepted"] == 2891 - 981
    assert (rows[-1]["reached"], rows[-1]["accepted"]) == (173 + 430, 430)
    # every accepted draft is counted once, at its position: Σ accepted = Σ k·h[k] (correct drafts)
    assert sum(r["accepted"] for r in rows) == sum(k * c for k, c in enumerate(REAL_HIST))
    # reached(i+1) = accepted(i): the chain goes on only past an accepted draft
    assert all(a["accepted"] == b["reached"] for a, b in itertools.pairwise(rows))
    assert accept_fields(REAL_HIST, 6, 7)["accept_by_position_source"] == "histogram"


def _pooled(run_dir):
    """Pooled histogram, Σ verify rounds and Σ correct drafts of the successful requests a real server
    answered (concurrent.jsonl), read through the same SpecMeta as the client."""
    hist, verify, correct = [], 0, 0
    for line in (run_dir / "concurrent.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "response" not in rec:
            continue
        meta = SpecMeta.from_meta_info(rec["response"]["meta_info"])
        verify += meta.verify_ct
        correct += meta.correct_drafts
        hist += [0] * (len(meta.histogram) - len(hist))
        for k, c in enumerate(meta.histogram):
            hist[k] += c
    return hist, verify, correct


def test_real_sglang_recording_positions(golden):
    run = golden / "runs" / "eagle3_aligned_warm"
    info = json.loads((run / "server_info.json").read_text())
    hist, verify, correct = _pooled(run)
    rows = accept_by_position(hist, info["speculative_num_steps"], info["speculative_num_draft_tokens"])
    assert len(rows) == info["speculative_num_steps"] == 3
    assert rows[0]["reached"] == verify
    assert sum(r["accepted"] for r in rows) == correct
    # the aligned tiny draft gets the first draft right in most rounds and never the second:
    # position 2 was reached and never accepted (rate 0), position 3 never reached (no rate)
    assert rows[0]["rate"] == pytest.approx(correct / verify)
    assert rows[1]["reached"] == correct and rows[1]["accepted"] == 0 and rows[1]["rate"] == 0.0
    assert rows[2] == {"position": 3, "reached": 0, "accepted": 0, "rate": None}


def test_real_collapse_shows_at_position_one(golden):
    """--speculative-algorithm EAGLE with the EAGLE3 draft (a real silent collapse): SGLang's histogram is
    [47], one entry, yet all three positions are listed and position 1 is the one that fails."""
    meta = json.loads((golden / "runs" / "eagle_wrongalgo" / "generate_nonstream.json").read_text())
    spec = SpecMeta.from_meta_info(meta["response"]["meta_info"])
    rows = accept_by_position(spec.histogram, 3, 4)
    assert [(r["reached"], r["accepted"], r["rate"]) for r in rows] == [(47, 0, 0.0), (0, 0, None), (0, 0, None)]


def test_depth_rules():
    # a tree (topk 4, 8 draft tokens, 5 steps): depths to min(steps, draft tokens − 1) = 5
    assert len(accept_by_position([10, 5, 5], 5, 8)) == 5
    # steps 1 / draft tokens 2 (SGLang's adjusted 1/1/16)
    assert [r["rate"] for r in accept_by_position([0, 24], 1, 2)] == [1.0]
    # without settings the histogram decides; rounds deeper than the settings are never dropped
    assert len(accept_by_position([3, 2, 1])) == 2
    assert len(accept_by_position([3, 2, 1, 4], 2, 3)) == 3
    assert accept_by_position(None, 3, 4) is None
    assert accept_by_position([0, 0], 3, 4) is None
    assert accept_fields(None) == {"accept_by_position": None, "accept_by_position_source": None}
    assert position_counts([0, 24], 3) == [(24, 24), (0, 24), (0, 0)]


@pytest.mark.parametrize("bad", [[1, -2], [1.5], ["3"], [True]])
def test_bad_histogram_is_refused(bad):
    with pytest.raises(ValueError, match="accept histogram entry"):
        accept_by_position(bad, 3, 4)


def test_unconditional_and_back():
    rows = accept_by_position(REAL_HIST, 6, 7)
    unc = unconditional(rows)
    assert unc[0] == pytest.approx(1910 / 2891)
    assert unc[-1] == pytest.approx(430 / 2891)
    back = from_unconditional(unc, rounds=2891)
    assert [r["accepted"] for r in back] == [r["accepted"] for r in rows]
    assert [r["rate"] for r in back] == pytest.approx([r["rate"] for r in rows])
    assert [r["rate"] for r in from_unconditional([80.0, 40.0])] == pytest.approx([0.8, 0.5])  # percents
    with pytest.raises(ValueError, match="rate 2"):
        from_unconditional([0.5, -0.1])


def test_advisor_expectation_for_settings_not_launched():
    from specdash.advisor import Measurement, Settings, expected_accept_length, fit_acceptance
    from specdash.advisor.acceptance import expected_accept_by_position, tree_branching

    fit = fit_acceptance([Measurement(Settings(6, 1, 7), 200.0, 1, None, REAL_HIST)])
    measured = expected_accept_by_position(fit, Settings(6, 1, 7))
    # at the measured chain the expectation is the measured counts (2891 rounds outweigh the prior)
    assert [e["rate"] for e in measured] == pytest.approx(REAL_RATES, abs=0.005)
    deeper = expected_accept_by_position(fit, Settings(8, 1, 9))
    assert len(deeper) == 8 and all(0 < e["rate"] < 1 for e in deeper[6:])
    tree = expected_accept_by_position(fit, Settings(5, 4, 8))
    p = fit.probs(5)
    br = tree_branching(p, Settings(5, 4, 8), fit.beta)
    assert [e["siblings"] for e in tree] == br and max(br) > 1
    for e, pi, k in zip(tree, p, br):  # a depth with more siblings accepts more often than the chain
        assert e["rate"] == pytest.approx(1 - (1 - pi) ** (k ** fit.beta))
        assert (e["rate"] > pi) == (k > 1)
    # the same q_i the accept-length prediction sums
    assert 1 + sum(e["unconditional"] for e in tree) == pytest.approx(expected_accept_length(p, br, fit.beta))
    assert expected_accept_by_position(fit, Settings(0, 1, 0)) == []


def test_bench_table_prints_positions():
    from specdash.commands.tables import render_positions

    run = {"accept_by_position": accept_by_position(REAL_HIST, 6, 7), "accept_by_position_source": "histogram"}
    lines = render_positions(run, expected=[{"rate": 0.66}, {"rate": 0.70}])
    assert "0.661 0.709 0.752 0.768 0.771 0.713" in lines[0] and "2891 rounds" in lines[0]
    assert "0.661 0.468" in lines[1]  # P(accepted), vLLM's per-position rate
    assert lines[2].endswith("0.660 0.700")
    assert render_positions({"accept_by_position": None}) == []


@pytest.mark.slow
def test_bench_run_field_matches_what_the_simulator_sent(tmp_path):
    """--bench on the simulator: the RUN's accept_by_position is the positions of the histogram the
    server sent (pooled from requests.jsonl), to the effective steps read back from it."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "specdash", "--bench", "--demo", "--max-tokens", "96",
                          "--out", str(tmp_path), "--json"], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    run = json.loads(out.stdout)["runs"][0]
    eff = run["effective"]
    hist = []
    recs = [json.loads(ln) for ln in (tmp_path.glob("*/requests.jsonl").__next__()).read_text().splitlines()]
    for r in recs:
        h = r["spec"]["histogram"]
        hist += [0] * (len(h) - len(hist))
        for k, c in enumerate(h):
            hist[k] += c
    assert run["accept_histogram"] == hist
    assert run["accept_by_position_source"] == "histogram"
    assert run["accept_by_position"] == accept_by_position(hist, eff["speculative_num_steps"],
                                                           eff["speculative_num_draft_tokens"])
    assert len(run["accept_by_position"]) == eff["speculative_num_steps"]
    assert sum(p["accepted"] for p in run["accept_by_position"]) == sum(r["spec"]["correct_drafts"] for r in recs)
