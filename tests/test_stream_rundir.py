"""Run-scoped statistics (SGLang's definitions) and the run directory."""

from __future__ import annotations

import json

import pytest

from specdash.bench.rundir import RunDir
from specdash.collect.columns import distribution_ms
from specdash.collect.stream import RunStats, add_histograms, tpot_s


def _rec(n, verify, correct, proposed, hist, t0, e2e, ttft=0.05, ok=True, segment=0):
    return {"ok": ok, "completion_tokens": n, "ts_sent": t0, "ts_done": t0 + e2e, "e2e_s": e2e,
            "ttft_s": ttft, "itl_s": [0.01] * 3,
            "spec": None if verify is None else {"verify_ct": verify, "correct_drafts": correct,
                                                 "proposed_drafts": proposed, "histogram": hist},
            "segment": segment}


def test_pooled_acceptance_is_not_a_mean_of_means():
    # request 1: 48 tokens / 24 rounds (τ 2.0); request 2: 10 tokens / 10 rounds (τ 1.0)
    s = RunStats()
    s.add(_rec(48, 24, 24, 72, [0, 24], 100.0, 1.0))
    s.add(_rec(10, 10, 0, 30, [10], 100.5, 1.5))
    out = s.summary()
    assert out["accept_length"] == pytest.approx(58 / 34)      # not (2.0 + 1.0) / 2
    assert out["accept_rate"] == pytest.approx(24 / 102)
    assert out["accept_histogram"] == [10, 24]
    assert out["output_tokens"] == 58
    assert out["duration_s"] == pytest.approx(2.0)             # 100.0 → 102.0
    assert out["output_tok_s"] == pytest.approx(29.0)
    assert out["tpot_ms"]["mean"] == pytest.approx(((0.95 / 47) + (1.45 / 9)) / 2 * 1000)


def test_no_speculation_gives_null_not_zero():
    s = RunStats()
    s.add(_rec(100, None, None, None, None, 0.0, 1.0))
    out = s.summary()
    assert out["accept_length"] is None and out["accept_rate"] is None and out["accept_histogram"] is None
    assert out["output_tok_s"] == pytest.approx(100.0)


def test_failed_requests_and_segments():
    s = RunStats()
    s.add(_rec(100, 50, 50, 150, [0, 50], 0.0, 1.0))
    s.add(_rec(0, None, None, None, None, 0.2, 0.1, ok=False))
    s.add(_rec(100, 50, 50, 150, [0, 50], 50.0, 1.0, segment=1))   # resumed later
    out = s.summary()
    assert out["requests"] == 2 and out["failed_requests"] == 1
    assert out["duration_s"] == pytest.approx(2.0)                 # 1 s + 1 s, not 51 s
    assert out["output_tok_s"] == pytest.approx(100.0)


def test_helpers():
    assert add_histograms([1, 2], [0, 0, 5]) == [1, 2, 5]
    assert add_histograms(None, [3]) == [3]
    assert distribution_ms([]) is None
    d = distribution_ms([0.001, 0.002, 0.003, 0.004])
    assert d["mean"] == pytest.approx(2.5) and d["p50"] == pytest.approx(2.5)
    assert tpot_s({"completion_tokens": 1, "ttft_s": 0.1, "e2e_s": 0.1}) is None


def test_rundir_appends_and_never_overwrites(tmp_path):
    a = RunDir.create(tmp_path, "demo/eagle3", stamp="20261129T000000Z")
    b = RunDir.create(tmp_path, "demo/eagle3", stamp="20261129T000000Z")
    assert a.path != b.path and a.path.name == "20261129T000000Z-demo-eagle3"
    a.append_request({"x": 1})
    # readable while still open: the line was flushed
    assert json.loads(a.requests_path.read_text()) == {"x": 1}
    with open(a.requests_path, "a") as fh:
        fh.write('{"torn": ')                    # a crash mid-line
    assert a.read_requests() == [{"x": 1}]
    a.write_text("metrics-before.txt", "m1")
    a.write_text("metrics-before.txt", "m2")
    assert (a.path / "metrics-before.txt").read_text() == "m1"
    assert (a.path / "metrics-before-2.txt").read_text() == "m2"
    a.write_summary([{"profile": "p"}])
    assert json.loads((a.path / "summary.json").read_text())["runs"] == [{"profile": "p"}]
    a.close()
