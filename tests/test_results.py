"""The typed shapes of what specdash writes (``specdash.results``, ``specdash.sglang.records``) against real
runs on the simulator: a RUN's keys are exactly the declared ones, the documented interface keys are among
them, and a sweep's, a comparison's, a tune's and a request record's keys match their declarations."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from specdash.bench.compare import build_comparison
from specdash.bench.runner import RunOptions
from specdash.cli import main
from specdash.profile import load_profile, parse_suite
from specdash.results import (
    RUN_KEYS,
    RUN_REQUIRED_KEYS,
    ComparisonReport,
    Effective,
    RunSummary,
    Summary,
    SweepPoint,
    SweepReport,
    Tier,
    TuneMeasured,
    TuneReport,
)
from specdash.sglang.effective import SpecSettings
from specdash.sglang.records import RequestRecord
from tests.test_bench import sim_profile

#: The keys of the interface shapes that scripts and checks outside the project read (the README's RUN,
#: comparison, sweep and tune fields): the declarations must hold every one of them.
INTERFACE_RUN_KEYS = {
    "profile", "profile_path", "simulated", "sglang_version", "effective", "requests", "output_tokens",
    "duration_s", "output_tok_s", "ttft_ms", "tpot_ms", "itl_ms", "accept_length", "accept_rate",
    "accept_histogram", "server_accept_length", "verification", "tiers", "adaptive", "acceptance_simulated",
    "accept_by_position", "accept_by_position_source"}
INTERFACE_EFFECTIVE_KEYS = {"speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                            "speculative_num_draft_tokens"}
INTERFACE_TIER_KEYS = {"speculative_num_steps", "speculative_num_draft_tokens", "verify_rounds", "output_tokens",
                       "accept_length", "accept_rate", "output_tok_s", "share"}
INTERFACE_COMPARISON_KEYS = {"a", "b", "metric", "speedup", "ci95", "verdict", "pairs", "per_prompt",
                             "per_category", "baseline"}
INTERFACE_SWEEP_KEYS = {"sweep", "break_even_concurrency", "break_even_ci95"}
INTERFACE_TUNE_KEYS = {"launches", "measured"}


def _keys(td) -> set[str]:
    return set(td.__required_keys__ | td.__optional_keys__)


def _suite(tmp_path: Path) -> Path:
    p = tmp_path / "s.toml"
    p.write_text('[suite]\nname = "s"\nmax_tokens = 64\nwarmup = 1\n[[prompts]]\ntext = "hello"\n'
                 '[[prompts]]\ntext = "world"\ncategory = "coding"\n')
    return p


def _bench(tmp_path: Path, capsys, *extra: str) -> dict:
    prof = sim_profile(tmp_path, "shape")
    rc = main(["--bench", "--profile", str(prof), "--suite", str(_suite(tmp_path)), "--out", str(tmp_path / "runs"),
               "--json", *extra])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def test_interface_shapes_are_among_the_declared_ones():
    assert INTERFACE_RUN_KEYS <= RUN_KEYS
    assert _keys(Effective) == INTERFACE_EFFECTIVE_KEYS
    assert _keys(Tier) == INTERFACE_TIER_KEYS
    assert _keys(ComparisonReport) >= INTERFACE_COMPARISON_KEYS
    assert _keys(SweepReport) >= INTERFACE_SWEEP_KEYS
    assert _keys(TuneReport) >= INTERFACE_TUNE_KEYS
    assert {"arrival_seed", "sweep_point"} == RUN_KEYS - RUN_REQUIRED_KEYS


def test_a_run_and_its_records_have_exactly_the_declared_keys(tmp_path, capsys):
    data = _bench(tmp_path, capsys)
    assert set(data) == _keys(Summary)
    run = data["runs"][0]
    assert set(run) == set(RunSummary.__required_keys__), set(run) ^ set(RunSummary.__required_keys__)
    assert set(run["effective"]) == _keys(Effective)
    assert SpecSettings.from_effective(run["effective"]) == SpecSettings("EAGLE3", 3, 1, 4)
    on_disk = json.loads((Path(run["run_dir"]) / "summary.json").read_text())
    assert set(on_disk["runs"][0]) == set(run)
    lines = (Path(run["run_dir"]) / "requests.jsonl").read_text().splitlines()
    for line in lines:
        rec = json.loads(line)
        assert RequestRecord.__required_keys__ <= set(rec) <= _keys(RequestRecord), set(rec) ^ _keys(RequestRecord)
        assert {"prompt_index", "repeat", "category", "segment"} <= set(rec)


def test_an_open_loop_run_adds_its_arrival_seed(tmp_path, capsys):
    run = _bench(tmp_path, capsys, "--request-rate", "inf")["runs"][0]
    assert set(run) == set(RunSummary.__required_keys__) | {"arrival_seed"}


def test_a_sweep_its_points_and_a_comparison_have_the_declared_keys(tmp_path, capsys):
    data = _bench(tmp_path, capsys, "--sweep", "concurrency=1,2", "--baseline", "none")
    assert set(data) == _keys(SweepReport)
    for run in data["runs"]:
        assert set(run) == set(RunSummary.__required_keys__) | {"sweep_point"}
    for pt in data["sweep"]:
        assert set(pt) == set(SweepPoint.__required_keys__) | {"concurrency"}
    d = Path(data["run_dirs"][0])
    assert set(json.loads((d / "sweep.json").read_text())) == _keys(SweepReport) - {"runs"}
    recs = [json.loads(x) for x in (d / "requests.jsonl").read_text().splitlines()]
    cmp = build_comparison([r for r in recs if r.get("concurrency") == 1], [r for r in recs if r.get("concurrency") == 2])
    assert set(cmp) == set(ComparisonReport.__required_keys__)


def test_a_tune_report_has_exactly_the_declared_keys(tmp_path):
    from specdash.bench.tune import tune

    prof = load_profile(str(sim_profile(tmp_path, "tshape", spec=(1, 1, 2))))
    suite = parse_suite({"suite": {"name": "t", "max_tokens": 64, "concurrency": 1, "warmup": 1, "repeats": 1},
                         "prompts": [{"text": f"prompt number {i}"} for i in range(3)]})
    out = tmp_path / "runs"
    report = asyncio.run(tune(prof, suite, budget=1, out=out, opts=RunOptions(out_dir=out, preflight=False),
                              preset_dir=tmp_path / "presets"))
    assert set(report) == _keys(TuneReport), set(report) ^ _keys(TuneReport)
    assert {r["source"] for r in report["measured"]} == {"launch"}
    for row in report["measured"]:  # every row within the declared TuneMeasured, its required keys all there
        assert set(TuneMeasured.__required_keys__) <= set(row) <= _keys(TuneMeasured), set(row) ^ _keys(TuneMeasured)
