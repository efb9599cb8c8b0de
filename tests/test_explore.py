"""Cheaper exploration launches (issue #14 "cheaper relaunches"): which of SGLang's start-up options a
tune adds, where, and that they never reach the baseline, the final A/B or the saved preset."""

from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path

import pytest

from specdash.bench.explore import default_spec_capture_bs, exploration_flags, graph_bs_for
from specdash.bench.runner import RunOptions
from specdash.bench.tune import tune
from specdash.profile import load_profile, server_flags
from tests.test_bench import sim_profile, small_suite


def _recorded_bs(log: Path) -> list[int]:
    """The ``bs=[…]`` of the first ``Capture … CUDA graph begin`` line of a real SGLang log."""
    for line in log.read_text(encoding="utf-8").splitlines():
        m = re.search(r"Capture .* CUDA graph begin\..*?bs=(\[[^\]]*\])", line)
        if m:
            return ast.literal_eval(m.group(1))
    raise AssertionError(f"no capture line in {log}")


def test_default_list_is_the_one_sglang_0_5_14_captured(golden):
    # the 8B testbed on the H200 with --cuda-graph-max-bs-decode 16 and EAGLE3, and the tiny pair with 8
    assert default_spec_capture_bs(16) == _recorded_bs(
        golden / "runs" / "testbed_llama8b_dummy_simacc3" / "e3s3-server_log_excerpt.txt")
    assert default_spec_capture_bs(16) == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]
    assert default_spec_capture_bs(8) == _recorded_bs(golden / "runs" / "eagle3_aligned_warm" / "server.log")
    assert default_spec_capture_bs(48)[-4:] == [32, 40, 44, 48]
    assert default_spec_capture_bs(50)[-2:] == [48, 50]   # max_bs appended when not on the list
    with pytest.raises(ValueError, match="max_bs must be >= 1"):
        default_spec_capture_bs(0)


@pytest.mark.parametrize("c,want", [(1, 1), (2, 2), (8, 8), (9, 10), (11, 12), (33, 40), (65, 72), (257, 272)])
def test_graph_bs_is_the_default_entry_at_or_above_the_concurrency(c, want):
    assert graph_bs_for(c) == want
    assert want in default_spec_capture_bs(want) and all(b < c for b in default_spec_capture_bs(want)[:-1])


def test_flags_for_an_explicit_capture_list():
    flags = {"--model-path": "m", "--cuda-graph-max-bs-decode": 16}
    c1 = exploration_flags(flags, version="0.5.14", concurrency=1)
    assert c1.flags == ["--skip-server-warmup", "--cuda-graph-max-bs-decode", "1"]
    assert "1 sizes instead of 12 up to 16" in c1.saved[1]
    assert exploration_flags(flags, version="0.5.14", concurrency=8).flags[1:] == ["--cuda-graph-max-bs-decode", "8"]
    assert exploration_flags(flags, version="0.5.14", concurrency=9).flags[1:] == ["--cuda-graph-max-bs-decode", "10"]
    c16 = exploration_flags(flags, version="0.5.14", concurrency=16)
    assert c16.flags == ["--skip-server-warmup"] and "already ends at batch 16" in c16.notes[0]
    # before 0.5.14 the flag is --cuda-graph-max-bs (the per-phase flags came with 0.5.14)
    old = exploration_flags({"--cuda-graph-max-bs": 16}, version="0.5.10", concurrency=4)
    assert old.flags == ["--skip-server-warmup", "--cuda-graph-max-bs", "4"]


def test_flags_kept_where_they_could_change_the_measurement():
    for given in ({"--cuda-graph-bs-decode": [1, 2, 4]}, {"--disable-cuda-graph": True},
                  {"--disable-cuda-graph-padding": True}, {"--disable-decode-cuda-graph": True}):
        plan = exploration_flags({**given, "--cuda-graph-max-bs-decode": 16}, version="0.5.14", concurrency=1)
        assert plan.flags == ["--skip-server-warmup"], given
        assert next(iter(given)) in plan.notes[0]
    # nothing known about the capture list yet: kept; an earlier speculative launch's list: used
    assert exploration_flags({}, version="0.5.14", concurrency=4).flags == ["--skip-server-warmup"]
    assert exploration_flags({}, version="0.5.14", concurrency=4, captured_bs=[1, 2, 3, 4, 5, 6, 7, 8]).flags == [
        "--skip-server-warmup", "--cuda-graph-max-bs-decode", "4"]
    # open loop: the batch is not bounded by a concurrency
    ol = exploration_flags({"--cuda-graph-max-bs-decode": 16}, version="0.5.14", concurrency=4, open_loop=True)
    assert ol.flags == ["--skip-server-warmup"] and "open-loop" in ol.notes[0]
    # the profile skips the warm-up already: not added twice
    assert exploration_flags({"--skip-server-warmup": True}, version="0.5.14", concurrency=1).flags == []


def _manifest(run_dir: str) -> dict:
    return json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))


def test_tune_starts_exploration_launches_cheaper_and_nothing_else(tmp_path):
    from specdash.bench.tune_text import render_live

    prof = load_profile(str(sim_profile(tmp_path, "fx", spec=(1, 1, 2), time_scale=8.0)))
    suite = small_suite(n_prompts=2, max_tokens=128)
    said: list[str] = []
    report = asyncio.run(tune(prof, suite, budget=3, out=tmp_path / "runs",
                              opts=RunOptions(out_dir=tmp_path / "runs", preflight=False),
                              preset_dir=tmp_path / "presets", fast_explore=True, progress=said.append))
    log = report["launch_log"]
    # the progress lines and the text table number launches alike (#N = the launch log's place, from 1)
    text = render_live(report)
    for e in log:
        if e["role"] == "explore":
            assert any(ln.startswith(f"tune: launch #{e['id'] + 1} (exploration ") for ln in said), said
            assert f"launch #{e['id'] + 1}" in text
    assert "exploration start-up, per launch" in text and "saves SGLang's warm-up request" in text, text
    assert "capture list kept" in text, text  # the first launch says why its capture list was not cut
    roles = [e["role"] for e in log]
    assert roles[0] == "baseline" and roles.count("explore") >= 2, roles
    explore = [e for e in log if e["role"] == "explore"]
    # the start: no capture list known yet → only the warm-up skipped; later ones also capture up to batch 1
    assert explore[0]["fast_start"] == ["--skip-server-warmup"]
    for e in explore[1:]:
        assert e["fast_start"] == ["--skip-server-warmup", "--cuda-graph-max-bs-decode", "1"], e
    for e in log:
        argv = _manifest(e["run_dir"])["argv"]
        if e["role"] == "explore":
            assert "--skip-server-warmup" in argv
        else:   # baseline, final A/B: launched exactly as the profile says
            assert e["fast_start"] is None and "--skip-server-warmup" not in argv, e
            assert "--cuda-graph-max-bs-decode" not in argv
    # what the servers captured: SGLang's default list on the start, batch 1 alone after it
    assert _manifest(explore[0]["run_dir"])["cuda_graph_bs"][:3] == [1, 2, 3]
    assert all(_manifest(e["run_dir"])["cuda_graph_bs"] == [1] for e in explore[1:])
    assert report["fast_explore"]["enabled"] and len(report["fast_explore"]["launches"]) == len(explore)
    if report["preset"]:
        saved = server_flags(load_profile(report["preset"]))
        assert "--skip-server-warmup" not in saved and "--cuda-graph-max-bs-decode" not in saved


def test_full_start_turns_it_off(tmp_path):
    prof = load_profile(str(sim_profile(tmp_path, "fy", spec=(1, 1, 2), time_scale=8.0)))
    report = asyncio.run(tune(prof, small_suite(n_prompts=2, max_tokens=64), budget=2, out=tmp_path / "runs",
                              opts=RunOptions(out_dir=tmp_path / "runs", preflight=False),
                              preset_dir=tmp_path / "presets", final_ab=False, fast_explore=False))
    assert all(e["fast_start"] is None for e in report["launch_log"])
    assert all("--skip-server-warmup" not in _manifest(e["run_dir"])["argv"] for e in report["launch_log"])
    assert report["fast_explore"] == {**report["fast_explore"], "enabled": False, "launches": []}


def test_a_live_tune_plans_its_schedule_over_the_uncut_capture_list(tmp_path):
    """A c1 live tune whose first live launch is also measured at c16: that launch keeps the profile's
    own --cuda-graph-max-bs-decode 16 (no cut below the highest concurrency it measures); the adaptive
    schedule plans over the 12 sizes SGLang captures, and its sweep and verification launches are full ones."""
    from tests.test_tune_live import suite, versioned_profile

    p = versioned_profile(tmp_path, "lv", "0.5.14", spec=(1, 1, 2), time_scale=8.0)
    p.write_text(p.read_text().replace('port = 0', 'port = 0\nextra_args = ["--cuda-graph-max-bs-decode", "16"]'))
    report = asyncio.run(tune(load_profile(str(p)), suite(n=4), budget=1, out=tmp_path / "runs", live=True,
                              chain_budget=1, opts=RunOptions(out_dir=tmp_path / "runs", preflight=False),
                              preset_dir=tmp_path / "presets", final_ab=False, fast_explore=True))
    live = [e for e in report["launch_log"] if e["role"] == "live"]
    # the first live launch is also measured at the schedule's high concurrency (16): its capture list is
    # not cut below that (the profile's own 16), else that pass would run without CUDA graphs
    assert report["live"]["pairs"][0]["also"]["concurrency"] == 16
    assert live and live[0]["fast_start"] == ["--skip-server-warmup"]
    assert _manifest(live[0]["run_dir"])["cuda_graph_bs"] == default_spec_capture_bs(16)
    sched = report["adaptive_schedule"]
    assert sched is not None and sched["batch_sizes"] == default_spec_capture_bs(16)
    for e in report["launch_log"]:
        if e["role"] in ("sweep", "verify", "baseline"):
            assert e["fast_start"] is None and "--skip-server-warmup" not in _manifest(e["run_dir"])["argv"]
