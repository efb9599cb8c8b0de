"""Concurrency sweeps (``specdash --bench --sweep concurrency=…``): one launch per side, one RUN per point,
the paired speedup per point and the break-even concurrency, against the simulator's analytic crossing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from specdash.bench.sweep import break_even, parse_sweep
from specdash.cli import main
from specdash.sim.expected import expected
from tests.test_bench import sim_profile

CHAIN = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4}
SWEEP = [1, 4, 16, 32]
MAX_TOKENS = 64


def test_parse_sweep():
    assert parse_sweep("concurrency=16,1,4,4") == [1, 4, 16]
    for bad, msg in (("concurrency=1", "two or more"), ("concurrency=0,4", "two or more"),
                     ("concurrency=1,x", "integers"), ("batch=1,2", "takes concurrency"),
                     ("request_rate=1,2", "open-loop")):
        with pytest.raises(ValueError, match=msg):
            parse_sweep(bad)


def test_break_even_interpolates_in_log_concurrency():
    pts = [{"concurrency": 1, "speedup": 2.0, "ci95": [1.8, 2.2]},
           {"concurrency": 4, "speedup": 1.5, "ci95": [1.2, 1.7]},
           {"concurrency": 16, "speedup": 0.5, "ci95": [0.4, 1.1]},
           {"concurrency": 64, "speedup": 0.4, "ci95": [0.3, 0.5]}]
    be, ci, note = break_even(pts)
    assert be == pytest.approx(2 ** (2 + 0.5 / 1.0 * 2))  # halfway from 1.5 to 0.5, in log2 between 4 and 16
    assert ci[0] == pytest.approx(2 ** (2 + 0.2 / 0.8 * 2))  # the lower bound crosses first
    assert ci[1] == pytest.approx(2 ** (4 + 0.1 / 0.6 * 2))  # the upper bound crosses between 16 and 64
    assert "stops paying" in note
    be, ci, note = break_even([{"concurrency": 1, "speedup": 1.3, "ci95": [1.1, 1.5]},
                               {"concurrency": 8, "speedup": 1.1, "ci95": [1.01, 1.2]}])
    assert be is None and ci is None and "pays at every swept concurrency" in note
    be, _, note = break_even([{"concurrency": 1, "speedup": 0.8, "ci95": [0.7, 0.9]},
                              {"concurrency": 8, "speedup": 0.6, "ci95": [0.5, 0.7]}])
    assert be is None and "does not pay at any" in note


def early_crossing(tmp_path: Path) -> str:
    """The bundled ``high-concurrency`` scenario with a target that turns compute-bound past 16 tokens per
    forward (0.25 ms a token beyond): speculation pays 2.1x at batch 1 and stops paying near batch 13.
    (With the bundled scenario the crossing is near 42, where 64-token requests never keep the batch
    full between refills: the analytic steady state and any measurement part ways there.)"""
    from specdash.sim.scenario import SCENARIO_DIR

    text = (SCENARIO_DIR / "high-concurrency.toml").read_text()
    text = (text.replace('name = "high-concurrency"', 'name = "early-crossing"')
            .replace("knee_tokens = 96", "knee_tokens = 16").replace("compute_ms_per_token = 0.06",
                                                                     "compute_ms_per_token = 0.25"))
    assert "knee_tokens = 16" in text and "compute_ms_per_token = 0.25" in text
    path = tmp_path / "early-crossing.toml"
    path.write_text(text)
    return str(path)


def analytic_crossing(scenario: str) -> float | None:
    """The simulator's own break-even: where its expected speedup of the chain crosses 1 (fine grid)."""
    prev = None
    for c in range(1, 129):
        s = (expected(CHAIN, scenario, c, max_new_tokens=MAX_TOKENS)["output_tok_s_total"]
             / expected({}, scenario, c, max_new_tokens=MAX_TOKENS)["output_tok_s_total"])
        if prev is not None and prev >= 1.0 > s:
            return c - 1 + (prev - 1.0) / (prev - s)
        prev = s
    return None


def run_sweep_cli(tmp_path: Path, scenario: str, capsys) -> dict:
    prof = sim_profile(tmp_path, f"sweep-{Path(scenario).stem}", scenario=scenario, time_scale=1.0)  # faster and the client, not the model, sets the pace on 2 cores
    rc = main(["--bench", "--profile", str(prof), "--sweep", "concurrency=" + ",".join(map(str, SWEEP)),
               "--max-tokens", str(MAX_TOKENS), "--out", str(tmp_path / "runs"), "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def test_sweep_finds_the_break_even_of_a_scenario_that_crosses(tmp_path, capsys):
    scenario = early_crossing(tmp_path)
    truth = analytic_crossing(scenario)
    assert 4 < truth < 16
    res = run_sweep_cli(tmp_path, scenario, capsys)
    pts = res["sweep"]
    assert [p["concurrency"] for p in pts] == SWEEP
    assert all(p["pairs"] >= 5 and p["speedup"] and p["baseline_tok_s"] for p in pts)
    assert pts[0]["speedup"] > 1.5 and pts[-1]["speedup"] < 1.0  # pays at c1, loses at c32
    be = res["break_even_concurrency"]
    assert be is not None
    # within one sweep step of the analytic crossing (the step around it: 4 -> 16)
    i = next(k for k in range(len(SWEEP) - 1) if SWEEP[k] <= truth <= SWEEP[k + 1])
    assert SWEEP[max(0, i - 1)] <= be <= SWEEP[min(len(SWEEP) - 1, i + 2)]  # the step around it or a neighbour
    assert abs(math.log2(be) - math.log2(truth)) <= math.log2(16 / 4)
    lo, hi = res["break_even_ci95"]
    assert lo is None or lo <= be
    assert hi is None or hi >= be
    # one launch per side: two run directories, one RUN per point in each summary.json
    assert len(res["run_dirs"]) == 2
    for d in res["run_dirs"]:
        runs = json.loads((Path(d) / "summary.json").read_text())["runs"]
        assert [r["concurrency"] for r in runs] == SWEEP
        recs = [json.loads(x) for x in (Path(d) / "requests.jsonl").read_text().splitlines()]
        per = {c: sum(1 for r in recs if r["concurrency"] == c) for c in SWEEP}
        assert per[32] >= 64  # the batch stays full: at least 2 x concurrency requests per point
        assert (Path(d) / "metrics-before-c32.txt").is_file()


def test_sweep_without_a_crossing_says_so(tmp_path, capsys):
    assert analytic_crossing("healthy") > 32
    res = run_sweep_cli(tmp_path, "healthy", capsys)
    assert res["break_even_concurrency"] is None
    assert all(p["speedup"] > 1.0 and p["verdict"] == "faster" for p in res["sweep"])
    assert "pays at every swept concurrency (up to 32)" in res["note"]


def test_sweep_refuses_flags_it_cannot_honour(tmp_path, capsys):
    prof = sim_profile(tmp_path, "s")
    for extra, msg in ((["--concurrency", "4"], "--concurrency"), (["--vs", str(prof)], "--vs"),
                       (["--rounds", "2"], "--rounds")):
        rc = main(["--bench", "--profile", str(prof), "--sweep", "concurrency=1,4", *extra])
        assert rc == 2 and msg in capsys.readouterr().err


def test_sweep_with_baseline_none_measures_the_profile_only(tmp_path, capsys):
    prof = sim_profile(tmp_path, "only", time_scale=8.0)
    rc = main(["--bench", "--profile", str(prof), "--sweep", "concurrency=1,2", "--baseline", "none",
               "--max-tokens", "32", "--out", str(tmp_path / "runs"), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0 and res["baseline"] is None and len(res["run_dirs"]) == 1
    assert [p["concurrency"] for p in res["sweep"]] == [1, 2]
    assert all(p["output_tok_s"] > 0 and p["speedup"] is None for p in res["sweep"])
    assert res["break_even_concurrency"] is None and res["note"] == "no baseline: no speedup"

