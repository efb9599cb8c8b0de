"""Built from specdash's own runs against a real SGLang 0.5.14 server on an H200
(``benchmarks/results/h200-2026-11-29``): the parsers read those files, and the simulator's
``tiny-h200`` scenario reproduces what the real server measured (issue #6: differences
between the real server and the simulator are fixed in the simulator, with a test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdash.eagle3.verify import verify_server
from specdash.profile import load_profile
from specdash.sglang.metrics import counter_delta, parse_metrics, server_accept_length
from specdash.sim.expected import expected

RES = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200-2026-11-29"


def _run(phase: str, profile: str) -> tuple[dict, Path]:
    for d in sorted((RES / phase / "runs").iterdir()):
        if d.name.endswith(profile) and (d / "summary.json").is_file():
            return json.loads((d / "summary.json").read_text())["runs"][0], d
    raise AssertionError(f"no {profile} run in {phase}")


@pytest.mark.parametrize("profile,flags", [
    ("h200-tiny-baseline", {}),
    ("h200-tiny-eagle3", {"speculative_algorithm": "EAGLE3", "steps": 3, "topk": 1, "num_draft_tokens": 4}),
])
def test_tiny_h200_scenario_matches_the_real_server(profile, flags):
    real, _ = _run("phase1", profile)
    exp = expected(flags, "tiny-h200", 1, max_new_tokens=1024, prompt_tokens=15)
    assert exp["output_tok_s_per_request"] == pytest.approx(real["output_tok_s"], rel=0.05)
    if flags:
        assert real["accept_length"] == exp["accept_length"] == 2.0
        assert real["accept_rate"] == pytest.approx(1 / 3)


def test_real_speedup_is_below_one_and_the_sim_agrees():
    cmp = json.loads((RES / "phase1" / "ab-eagle3-vs-baseline.json").read_text())
    assert cmp["verdict"] == "slower" and cmp["ci95"][1] < 1.0
    base = expected({}, "tiny-h200", 1, max_new_tokens=1024)["output_tok_s_per_request"]
    spec = expected({"speculative_algorithm": "EAGLE3", "steps": 3, "topk": 1, "num_draft_tokens": 4}, "tiny-h200",
                    1, max_new_tokens=1024)["output_tok_s_per_request"]
    assert cmp["ci95"][0] <= spec / base <= cmp["ci95"][1]


def test_real_metrics_files_give_the_summary_cross_check():
    real, d = _run("phase1", "h200-tiny-eagle3")
    before = parse_metrics((d / "metrics-before.txt").read_text())
    after = parse_metrics((d / "metrics-after.txt").read_text())
    assert server_accept_length(before, after) == pytest.approx(real["server_accept_length"]) == 2.0
    assert counter_delta(before, after, "sglang:generation_tokens_total") == real["output_tokens"] == 10240
    base, bd = _run("phase1", "h200-tiny-baseline")
    b0, b1 = parse_metrics((bd / "metrics-before.txt").read_text()), parse_metrics((bd / "metrics-after.txt").read_text())
    assert server_accept_length(b0, b1) is None and base["server_accept_length"] is None
    assert real["effective"] == {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                                 "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


def test_real_wrong_algorithm_and_adjustment_verdicts():
    wrong = json.loads((RES / "phase2" / "bench-wrongalgo.json").read_text())["runs"][0]
    codes = {f["code"] for f in wrong["verification"]["findings"]}
    assert wrong["verification"]["status"] == "failed" and {"VERIFY_ALGO", "VERIFY_COLLAPSE"} <= codes
    assert wrong["accept_length"] < 1.01
    adj = json.loads((RES / "phase2" / "bench-steps1-draft16.json").read_text())["runs"][0]
    assert adj["effective"]["speculative_num_draft_tokens"] == 2
    (f,) = [f for f in adj["verification"]["findings"] if f["code"] == "VERIFY_ADJUSTED"]
    assert "asked 16" in f["message"] and "runs 2" in f["message"]
    # the same verdict recomputed offline from the real server_info + the profile
    prof = load_profile("h200-tiny-steps1-draft16")
    info = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 1, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 2, "version": "0.5.14"}
    rep = verify_server(prof, info, [], None)
    assert any(x.code == "VERIFY_ADJUSTED" for x in rep.findings)
