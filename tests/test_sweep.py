"""Concurrency sweeps (``specdash --bench --sweep concurrency=…``): one launch per side, one RUN per point,
the paired speedup per point and the break-even concurrency, against the simulator's analytic crossing."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from specdash.bench.points import Sweep, break_even, parse_sweep
from specdash.cli import main
from specdash.sim.expected import expected
from tests.test_bench import sim_profile

CHAIN = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4}
SWEEP = [1, 4, 16, 32]
MAX_TOKENS = 64


def test_parse_sweep():
    assert parse_sweep("concurrency=16,1,4,4") == Sweep("concurrency", (1, 4, 16))
    assert parse_sweep("request-rate=8, 0.5,2,2") == Sweep("request_rate", (0.5, 2.0, 8.0))
    for bad, msg in (("concurrency=1", "two or more"), ("concurrency=0,4", "two or more"),
                     ("concurrency=1,x", "integers"), ("batch=1,2", "takes concurrency"),
                     ("request_rate=1", "two or more distinct request rates"), ("request_rate=2,2", "distinct"),
                     ("request_rate=1e-9,2", "below 0.01/s"), ("request_rate=1,x", "numbers"),
                     ("request_rate=0,2", "finite and > 0"), ("request_rate=2,inf", "--request-rate inf"),
                     ("request_rate=", "request_rate=R,R")):
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
    assert res["break_even_concurrency"] is None and res["note"] == "no baseline (--baseline none): tok/s per point only"



# -- request-rate sweeps (open loop) ------------------------------------------------------------------

RATES = [4, 32]


@pytest.fixture(scope="module")
def rate_sweep(tmp_path_factory):
    """One ``--sweep request_rate=4,32`` of the early-crossing scenario (2 s of arrivals per point): the
    speculative side keeps up at 4/s and falls behind at 32/s, where its steps cost more than the baseline's."""
    from dataclasses import replace

    import specdash.commands.bench as bench_cmd

    tmp = tmp_path_factory.mktemp("rate-sweep")
    prof = sim_profile(tmp, "rated", scenario=early_crossing(tmp), time_scale=1.0)
    mp = pytest.MonkeyPatch()
    real = bench_cmd._options
    mp.setattr(bench_cmd, "_options", lambda args, progress: replace(real(args, progress), rate_point_s=2.0))
    import io
    from contextlib import redirect_stderr, redirect_stdout

    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(["--bench", "--profile", str(prof), "--sweep", "request_rate=" + ",".join(map(str, RATES)),
                       "--max-tokens", str(MAX_TOKENS), "--out", str(tmp / "runs"), "--json"])
    finally:
        mp.undo()
    assert rc == 0, err.getvalue()[-2000:]
    return {"tmp": tmp, "res": json.loads(out.getvalue()), "err": err.getvalue()}


def test_rate_sweep_runs_each_point_open_loop_at_its_rate(rate_sweep):
    res = rate_sweep["res"]
    assert res["variable"] == "request_rate" and res["break_even_concurrency"] is None
    pts = res["sweep"]
    assert [p["request_rate"] for p in pts] == [4.0, 32.0]
    for p in pts:  # Poisson arrivals at the asked rate (seeded)
        # a bound for a sender far off its schedule (all at once, or held back), not an accuracy
        # target: how close the achieved rate comes to the asked one is benchmarks/request_rate.py's figure
        assert p["request_rate"] / 2 < p["achieved_request_rate"] < p["request_rate"] * 2
        assert p["pairs"] >= 8 and p["baseline_tok_s"] > 0
    assert pts[0]["speedup"] > 1.5 and pts[0]["saturated"] == []  # pays while both sides keep up
    assert pts[0]["served_fraction"]["speculative"] == pytest.approx(1.0, abs=0.1)
    # at 32/s speculation falls behind first: its capacity is below the baseline's at the batch this builds
    assert "speculative" in pts[1]["saturated"] and pts[1]["served_fraction"]["speculative"] < 0.9
    assert pts[1]["throughput_ratio"] < 1.0 and pts[1]["speedup"] < pts[0]["speedup"] - 0.5
    be = res["break_even_request_rate"]  # how far below 1 a saturated point falls depends on its length
    assert be is None or 4 < be < 32
    assert "fell behind the arrivals" in res["note"] and "throughput ratio" in res["note"]
    for d in res["run_dirs"]:  # one launch per side; records and metrics files per rate
        manifest = json.loads((Path(d) / "manifest.json").read_text())
        assert manifest["sweep"] == {"request_rate": [4.0, 32.0]}
        runs = json.loads((Path(d) / "summary.json").read_text())["runs"]
        assert [r["request_rate"] for r in runs] == [4.0, 32.0] and all(r["concurrency"] is None for r in runs)
        recs = [json.loads(x) for x in (Path(d) / "requests.jsonl").read_text().splitlines()]
        per = {x: sum(1 for r in recs if r["request_rate"] == x) for x in (4.0, 32.0)}
        assert per[32.0] >= 64 and per[4.0] >= 8  # at least 2 s of arrivals (and 2 x the warm-up width)
        assert (Path(d) / "metrics-before-r32.txt").is_file() and (Path(d) / "metrics-after-r4.txt").is_file()
    sweep_file = json.loads((Path(res["run_dirs"][0]) / "sweep.json").read_text())
    assert sweep_file["break_even_request_rate"] == be


def test_rate_sweep_renders_in_the_table_the_report_and_the_dashboard(rate_sweep):
    from specdash.bench.html import render_report
    from specdash.bench.sources import load_source
    from specdash.bench.sweep import render_sweep
    from specdash.tui.widgets.advice import sweep_text

    res = rate_sweep["res"]
    table = render_sweep(res)
    assert "rate/s  sent/s (spec, base)" in table and "tok/s ratio" in table and "(saturated: speculative)" in table
    text = sweep_text({**res, "path": "sweep.json"}).plain
    assert text.startswith("Request-rate sweep") and "4/s: ×" in text and "32/s: ×" in text
    assert res["note"] in table and res["note"] in text
    be = res["break_even_request_rate"]
    if be is not None:
        assert f"break-even request rate ≈ {be:.2f} requests/s" in table
        assert f"break-even request rate ≈ {be:.2f} requests/s" in text
    spec_dir = next(d for d in res["run_dirs"] if not d.endswith("-baseline"))
    base_dir = next(d for d in res["run_dirs"] if d.endswith("-baseline"))
    page = render_report([load_source(spec_dir), load_source(base_dir)])
    assert "Throughput against request rate" in page and "request rate (requests/s)" in page
    assert "speedup over rated-baseline against request rate" in page
    if res["break_even_request_rate"] is not None:
        assert f"break-even request rate ≈ {res['break_even_request_rate']:.2f} requests/s" in page


def test_compare_two_rate_sweeps_pairs_within_each_rate(rate_sweep, capsys):
    res = rate_sweep["res"]
    spec_dir = next(d for d in res["run_dirs"] if not d.endswith("-baseline"))
    base_dir = next(d for d in res["run_dirs"] if d.endswith("-baseline"))
    rc = main(["compare", base_dir, spec_dir, "--json"])
    got = json.loads(capsys.readouterr().out)
    assert rc == 0
    pts = {p["request_rate"]: p for p in got["per_request_rate"]}
    for p in res["sweep"]:  # the same pairs as the sweep's own
        assert pts[p["request_rate"]]["speedup"] == pytest.approx(p["speedup"], rel=1e-12)
    assert got["break_even_request_rate"] == pytest.approx(res["break_even_request_rate"], rel=1e-12, nan_ok=True) \
        if res["break_even_request_rate"] is not None else got["break_even_request_rate"] is None
    rc = main(["compare", base_dir, spec_dir, "--concurrency", "4"])
    assert rc == 2 and "request-rate sweeps" in capsys.readouterr().err


def test_rate_sweep_flags(tmp_path, capsys):
    from specdash.cli import _main_parser
    from specdash.commands.bench_args import check_args

    prof = sim_profile(tmp_path, "s")
    for extra, msg in ((["--sweep", "request_rate=1,2", "--request-rate", "3"], "sets the request rates itself"),
                       (["--sweep", "concurrency=1,2", "--request-rate", "3"], "sweep request_rate=R,R"),
                       (["--sweep", "concurrency=1,2", "--burstiness", "0.5"], "--burstiness shapes"),
                       (["--sweep", "request_rate=1,inf"], "--request-rate inf")):
        rc = main(["--bench", "--profile", str(prof), *extra])
        assert rc == 2 and msg in capsys.readouterr().err, extra
    # the in-flight cap and the arrival shape go with a rate sweep
    args = _main_parser().parse_args(["--bench", "--profile", str(prof), "--sweep", "request_rate=1,2",
                                      "--concurrency", "8", "--burstiness", "0.5"])
    check_args(args)
    assert args.sweep_spec.points == (1.0, 2.0)


def test_an_interrupted_sweep_keeps_the_point_it_was_in_marked_partial(tmp_path):
    """SIGINT during the second point: summary.json holds the first point complete and the second one partial
    (its answered requests, the reason), not a clean-looking one-point run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    prof = sim_profile(tmp_path, "cut", time_scale=8.0)
    env = {**os.environ, "SPECDASH_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(Path(__file__).parents[1])}
    p = subprocess.Popen([sys.executable, "-m", "specdash", "--bench", "--profile", str(prof), "--baseline", "none",
                          "--sweep", "concurrency=1,2", "--max-tokens", "200", "--repeats", "6",
                          "--out", str(tmp_path / "runs")], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    seen = 0
    while time.monotonic() < deadline and p.poll() is None and seen < 3:
        recs = list((tmp_path / "runs").glob("*/requests.jsonl"))
        if recs:
            seen = sum(1 for line in recs[0].read_text().splitlines() if '"concurrency": 2' in line
                       or '"concurrency":2' in line)
        time.sleep(0.1)
    assert p.poll() is None and seen >= 3, "the sweep should be in its second point"
    os.kill(p.pid, signal.SIGINT)
    err = p.communicate(timeout=60)[1].decode()
    assert p.returncode != 0 and "interrupted" in err
    (d,) = list((tmp_path / "runs").iterdir())
    runs = json.loads((d / "summary.json").read_text())["runs"]
    assert [r["concurrency"] for r in runs] == [1, 2]
    assert runs[0]["partial"] is False and runs[0]["requests"] == 30  # the seeds-five suite x 6 repeats
    assert runs[1]["partial"] is True and "interrupted during this point" in runs[1]["partial_reason"]
    assert 3 <= runs[1]["requests"] < 30


def test_a_rate_sweep_says_when_the_in_flight_cap_held_the_arrivals_back(tmp_path, capsys, monkeypatch):
    """``--concurrency 1`` under a rate of 64/s: the client cannot send faster than one request at a time, so the
    point names the sides whose requests went out below the asked rate, with what they sent."""
    from dataclasses import replace

    import specdash.commands.bench as bench_cmd

    real = bench_cmd._options
    monkeypatch.setattr(bench_cmd, "_options", lambda args, progress: replace(real(args, progress), rate_point_s=1.0))
    prof = sim_profile(tmp_path, "capped", time_scale=8.0)
    rc = main(["--bench", "--profile", str(prof), "--sweep", "request_rate=1,64", "--concurrency", "1",
               "--max-tokens", "64", "--out", str(tmp_path / "runs"), "--json"])
    res = json.loads(capsys.readouterr().out)
    assert rc == 0
    low, high = res["sweep"]
    assert low["held_back"] == [] and low["max_in_flight"] == 1
    assert high["held_back"] == ["baseline", "speculative"]
    assert high["achieved_request_rate"] < 0.9 * 64 and high["baseline_achieved_request_rate"] < 0.9 * 64
    assert "the in-flight cap (--concurrency 1) held arrivals back" in res["note"]
    from specdash.bench.sweep import render_sweep

    assert "(held back by the in-flight cap: baseline, speculative)" in render_sweep(res)
