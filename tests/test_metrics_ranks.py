"""Scheduler metrics of several ranks (``--enable-metrics-for-all-schedulers``, DP and PP ranks): every
lookup reads one TP replica per scheduler group — the TP ranks of a group count the same batches, so summing
them would multiply the device timer and the live tok/s by the TP size — and the per-rank view keeps each
rank's own series.  Then the same on the simulator, end to end through ``--bench``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdash.bench.adaptive import rank_breakdown, rank_label, slow_ranks
from specdash.cli import main
from specdash.commands.tables import render_ranks
from specdash.sglang.metrics import counter_delta, counter_deltas_by, counter_rate, parse_metrics, rank_deltas
from tests.test_bench import sim_profile

L = 'engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0"'


def scrape(dev: dict[str, float], tok: dict[str, float], dp: bool = False, t: float = 0.0):
    """A /metrics text with one ``forward_execution_seconds`` / ``realtime_tokens`` series per rank key
    (``tp`` or ``dp:tp``)."""
    lines = ["# TYPE sglang:forward_execution_seconds counter", "# TYPE sglang:realtime_tokens counter",
             "# TYPE sglang:num_running_reqs gauge"]
    for key, v in dev.items():
        dpl, tp = key.split(":") if dp else (None, key)
        extra = f',dp_rank="{dpl}"' if dp else ""
        lines.append(f'sglang:forward_execution_seconds_total{{category="decode",{L},tp_rank="{tp}"{extra}}} {v}')
        lines.append(f'sglang:realtime_tokens_total{{mode="decode",{L},tp_rank="{tp}"{extra}}} {tok[key]}')
        lines.append(f'sglang:num_running_reqs{{{L},tp_rank="{tp}"{extra}}} 8')
    return parse_metrics("\n".join(lines) + "\n", t=t)


def test_tp_replicas_are_read_once():
    a = scrape({"0": 1.0, "1": 1.0, "2": 1.0, "3": 1.0}, {"0": 100, "1": 100, "2": 100, "3": 100}, t=0.0)
    b = scrape({"0": 3.0, "1": 3.1, "2": 3.0, "3": 3.9}, {"0": 500, "1": 500, "2": 500, "3": 500}, t=2.0)
    assert counter_deltas_by(a, b, "forward_execution_seconds", "category") == {"decode": 2.0}  # TP0's, not 4 ranks'
    assert counter_rate(a, b, "realtime_tokens", mode="decode") == 200.0  # tok/s of the server, not x4
    assert b.total("num_running_reqs") == 8
    assert b.total("realtime_tokens", tp_rank="3") == 500  # asking for a rank gets that rank
    per = rank_deltas(a, b, "forward_execution_seconds")
    assert per == {("", "0", "0"): 2.0, ("", "0", "1"): pytest.approx(2.1), ("", "0", "2"): 2.0,
                   ("", "0", "3"): pytest.approx(2.9)}


def test_dp_ranks_still_add_up():
    a = scrape({"0:0": 1.0, "0:1": 1.0, "1:2": 1.0, "1:3": 1.0}, {"0:0": 0, "0:1": 0, "1:2": 0, "1:3": 0}, dp=True)
    b = scrape({"0:0": 2.0, "0:1": 2.0, "1:2": 4.0, "1:3": 4.0}, {"0:0": 100, "0:1": 100, "1:2": 300, "1:3": 300},
               dp=True)
    assert counter_delta(a, b, "realtime_tokens", mode="decode") == 400  # DP0's 100 + DP1's 300, TP copies once
    assert counter_deltas_by(a, b, "forward_execution_seconds", "category") == {"decode": 4.0}


def test_rank_breakdown_names_the_rank_that_stands_out():
    def text(dev):
        return "\n".join(["# TYPE sglang:forward_execution_seconds counter"] + [
            f'sglang:forward_execution_seconds_total{{category="decode",{L},tp_rank="{r}"}} {v}'
            for r, v in dev.items()]) + "\n"

    ranks = rank_breakdown(text({"0": 0, "1": 0, "2": 0, "3": 0}), text({"0": 2.0, "1": 2.05, "2": 1.95, "3": 2.6}))
    assert [r["tp_rank"] for r in ranks] == ["0", "1", "2", "3"]
    assert ranks[3]["vs_median"] == pytest.approx(2.6 / 2.025)
    assert [rank_label(r) for r in slow_ranks(ranks)] == ["TP3"]
    lines = render_ranks({"ranks": ranks})
    assert lines[0].startswith("  per rank (scheduler series in /metrics): TP0 2.00 s GPU · TP1 2.05 s GPU")
    assert "warning: TP3 spent 1.28× the median rank's GPU time" in lines[1]
    assert rank_breakdown(text({"0": 0}), text({"0": 2.0})) is None  # one rank: nothing to compare


def test_bench_on_a_simulated_tp2_server_with_every_scheduler_exporting(tmp_path, capsys):
    from specdash.sim.scenario import SCENARIO_DIR

    scenario = tmp_path / "two-gpus.toml"  # the bundled healthy scenario on a 2-GPU machine
    scenario.write_text((SCENARIO_DIR / "healthy.toml").read_text().replace('name = "healthy"', 'name = "two-gpus"')
                        .replace("count = 1", "count = 2"))
    prof = sim_profile(tmp_path, "ranks", tp=2, scenario=str(scenario))
    text = prof.read_text().replace("[env]\n", '[env]\nSGLANG_ENABLE_METRICS_DEVICE_TIMER = "1"\n')
    text = text.replace('port = 0', 'port = 0\nextra_args = ["--enable-metrics-for-all-schedulers"]')
    prof.write_text(text)
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nmax_tokens = 48\nwarmup = 1\n[[prompts]]\ntext = "Hello ranks"\n'
                     '[[prompts]]\ntext = "And another one"\n')
    rc = main(["--bench", "--profile", str(prof), "--suite", str(suite), "--out", str(tmp_path / "runs"), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err[-2000:]
    run = json.loads(out.out)["runs"][0]
    run_dir = Path(run["run_dir"])
    after = (run_dir / "metrics-after.txt").read_text()
    assert 'tp_rank="1"' in after and 'tp_rank="0"' in after  # both TP ranks exported
    ranks = run["ranks"]
    assert [r["tp_rank"] for r in ranks] == ["0", "1"]
    one = sum(run["device_time_s"].values())
    assert one > 0 and ranks[0]["device_time_s"] == pytest.approx(one) == ranks[1]["device_time_s"]  # not doubled
    assert ranks[0]["decode_tokens"] > 0
    assert run["server_accept_length"] == pytest.approx(run["accept_length"], rel=0.02)
    from specdash.bench.html import render_report
    from specdash.bench.sources import load_source

    page = render_report([load_source(run_dir)])
    assert "<h3>Scheduler ranks</h3>" in page and "TP1" in page
    assert render_ranks(run)[0].startswith("  per rank (scheduler series in /metrics): TP0 ")
    assert slow_ranks(ranks) == []  # the simulator's TP replicas are exact copies
