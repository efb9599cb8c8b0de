"""Acceptance per category and per context-length bucket in a RUN (``by_category``, ``by_context``)."""

from __future__ import annotations

import json

import pytest

from specdash.cli import main
from specdash.collect.stream import CONTEXT_BUCKETS, RunStats
from tests.test_bench import sim_profile


def rec(cat, prompt, completion, verify, correct, proposed, e2e):
    return {"ok": True, "category": cat, "prompt_tokens": prompt, "completion_tokens": completion, "e2e_s": e2e,
            "spec": {"verify_ct": verify, "correct_drafts": correct, "proposed_drafts": proposed}}


def test_breakdowns_pool_like_the_run():
    rs = RunStats()
    rs.extend([rec("coding", 50, 100, 40, 60, 120, 1.0), rec("coding", 900, 100, 50, 50, 150, 2.0),
               rec("chat", 5000, 100, 80, 20, 240, 2.0), {"ok": False, "category": "chat", "error": "x"}])
    b = rs.summary()
    assert b["by_category"]["coding"] == {"requests": 2, "output_tokens": 200, "accept_length": 200 / 90,
                                          "accept_rate": 110 / 270, "request_tok_s_p50": 100.0}
    assert b["by_category"]["chat"]["accept_length"] == 1.25 and b["by_category"]["chat"]["requests"] == 1
    assert [g["context_tokens"] for g in b["by_context"]] == ["<1K", "4K-16K"]
    assert b["by_context"][0]["requests"] == 2 and b["by_context"][1]["accept_rate"] == pytest.approx(20 / 240)
    # pooled over the groups, the run's own figure
    assert b["accept_length"] == pytest.approx(300 / 170)
    # an adaptive run's proposed-per-round overrides the records' count, in the groups too
    assert rs.breakdowns(proposed_per_round=1.0)["by_category"]["chat"]["accept_rate"] == pytest.approx(20 / 80)
    assert [lab for _, lab in CONTEXT_BUCKETS] == ["<1K", "1K-4K", "4K-16K", "16K-32K", ">=32K"]
    assert RunStats([rec(None, None, 10, 5, 5, 10, 1.0)]).breakdowns() == {"by_category": None, "by_context": None}


def test_bench_with_a_categorised_dataset_reports_each_category(tmp_path, capsys):
    prof = sim_profile(tmp_path, "cats", time_scale=8.0)
    rc = main(["--bench", "--profile", str(prof), "--dataset", "mixed-50", "--num-prompts", "10", "--max-tokens", "32",
               "--out", str(tmp_path / "runs"), "--json"])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert rc == 0
    cats = run["by_category"]
    assert len(cats) >= 2 and sum(g["requests"] for g in cats.values()) == run["requests"] == 10
    assert sum(g["output_tokens"] for g in cats.values()) == run["output_tokens"]
    assert sum(g["requests"] for g in run["by_context"]) == 10
    summary = json.loads((tmp_path / "runs").glob("*/summary.json").__next__().read_text())["runs"][0]
    assert summary["by_category"] == cats


def test_suggestions_panel_shows_the_runs_breakdowns():
    from specdash.tui.widgets.advice import breakdown_text

    rs = RunStats([rec("coding", 50, 100, 40, 60, 120, 1.0), rec("chat", 5000, 100, 80, 20, 240, 2.0)])
    text = breakdown_text(rs.summary()).plain
    assert "This run by category: chat τ 1.25 (n=1) · coding τ 2.50 (n=1)" in text
    assert "By context (prompt + completion tokens): <1K τ 2.50 (n=1) · 4K-16K τ 1.25 (n=1)" in text
    assert breakdown_text(RunStats([rec("coding", 50, 100, 40, 60, 120, 1.0)]).summary()) is None


def test_report_shows_acceptance_by_context_length():
    from specdash.bench.html import _contexts

    html = "".join(_contexts([RunStats([rec("coding", 50, 100, 40, 60, 120, 1.0),
                                         rec("chat", 5000, 100, 80, 20, 240, 2.0)]).summary()]))
    assert "Acceptance by context length" in html and "4K-16K" in html and "1.250" in html and "2.500" in html
    assert _contexts([RunStats([rec("coding", 50, 100, 40, 60, 120, 1.0)]).summary()]) == []
