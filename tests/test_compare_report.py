"""comparison.json from synthetic per-request records, and the files the report writes."""

from __future__ import annotations

import csv
import json
import math

import pytest

from specdash.bench.compare import CSV_COLUMNS, build_comparison, pooled_histogram
from specdash.bench.report import write_comparison, write_summary_csv
from specdash.bench.stats import FASTER, SLOWER

TOKENS = 200
PROMPTS = [  # (prompt_index, category, A tok/s, B/A ratio)
    (0, "code", 40.0, 1.25),
    (1, "code", 50.0, 1.20),
    (2, "chat", 60.0, 0.90),
    (3, "chat", 45.0, 0.95),
]
REPEATS = 3
JITTER = (1.0, 1.02, 0.98)  # per repeat, the same on both sides (so per-pair ratios are exact)


def _rec(p, rep, cat, tok_s, *, verify=None, correct=None, proposed=None, hist=None, ok=True):
    spec = None
    if verify is not None:
        spec = {"verify_ct": verify, "correct_drafts": correct, "proposed_drafts": proposed, "histogram": hist}
    return {"prompt_index": p, "repeat": rep, "category": cat, "completion_tokens": TOKENS,
            "e2e_s": TOKENS / tok_s, "ttft_s": 0.040 + 0.001 * p, "tpot_s": 1.0 / tok_s, "ok": ok, "spec": spec}


def _records(side: str):
    out = []
    for p, cat, a_tok, ratio in PROMPTS:
        for rep in range(REPEATS):
            tok = a_tok * JITTER[rep] * (ratio if side == "b" else 1.0)
            if side == "a":  # chain steps 3: 100 rounds, 100 correct drafts, 300 proposed
                out.append(_rec(p, rep, cat, tok, verify=100, correct=100, proposed=300, hist=[30, 40, 30]))
            elif side == "b":  # 80 rounds, 120 correct of 560 proposed (draft tokens 8)
                out.append(_rec(p, rep, cat, tok, verify=80, correct=120, proposed=560, hist=[10, 30, 20, 20]))
            else:  # baseline: no speculation, 90 tok/s flat
                out.append(_rec(p, rep, cat, 90.0 * JITTER[rep]))
    return out


def _geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


@pytest.fixture(scope="module")
def comparison():
    a, b = _records("a"), _records("b")
    # noise that must be excluded: a failed request and an unpaired one
    a.append(_rec(9, 0, "chat", 10.0, ok=False))
    b.append(_rec(7, 0, "chat", 30.0))
    return build_comparison(a, b, a_name="chain3", b_name="tree8", baseline_records=_records("base"),
                            baseline_name="nospec", seed=1)


def test_contract_fields_and_exact_speedup(comparison):
    c = comparison
    for key in ("a", "b", "metric", "speedup", "ci95", "verdict", "pairs", "per_prompt", "per_category", "baseline"):
        assert key in c
    assert (c["a"], c["b"], c["metric"]) == ("chain3", "tree8", "output_tok_s")
    assert c["pairs"] == len(PROMPTS) * REPEATS
    expected = _geo([r for _, _, _, r in PROMPTS for _ in range(REPEATS)])
    assert c["speedup"] == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx((1.25 * 1.20 * 0.90 * 0.95) ** 0.25)
    lo, hi = c["ci95"]
    assert lo <= c["speedup"] <= hi
    assert c["excluded"] == {"a_failed": 1, "b_failed": 0, "a_unpaired": 0, "b_unpaired": 1}
    json.dumps(c, allow_nan=False)


def test_per_prompt_rows(comparison):
    rows = {r["prompt_index"]: r for r in comparison["per_prompt"]}
    assert sorted(rows) == [0, 1, 2, 3]
    r0 = rows[0]
    assert set(CSV_COLUMNS) <= set(r0)
    assert r0["pairs"] == REPEATS and r0["category"] == "code"
    assert r0["speedup"] == pytest.approx(1.25)
    assert r0["a_tok_s"] == pytest.approx(40.0 * sum(JITTER) / 3)
    assert r0["b_tok_s"] == pytest.approx(50.0 * sum(JITTER) / 3)
    assert r0["a_tpot_ms"] == pytest.approx(1000.0 * sum(1 / (40.0 * j) for j in JITTER) / 3)
    assert r0["a_ttft_ms"] == pytest.approx(40.0)
    assert rows[3]["b_ttft_ms"] == pytest.approx(43.0)
    # accept length = Σ completion tokens / Σ verify_ct; accept rate = Σ correct / Σ proposed
    assert r0["a_accept_length"] == pytest.approx(3 * TOKENS / 300)
    assert r0["b_accept_length"] == pytest.approx(3 * TOKENS / 240)
    assert r0["a_accept_rate"] == pytest.approx(1 / 3)
    assert r0["b_accept_rate"] == pytest.approx(120 / 560)


def test_per_category_with_own_interval(comparison):
    cats = comparison["per_category"]
    assert set(cats) == {"code", "chat"}
    assert cats["code"]["speedup"] == pytest.approx(math.sqrt(1.25 * 1.20))
    assert cats["chat"]["speedup"] == pytest.approx(math.sqrt(0.90 * 0.95))
    assert cats["code"]["pairs"] == 2 * REPEATS
    assert cats["code"]["verdict"] == FASTER and cats["chat"]["verdict"] == SLOWER
    assert cats["code"]["ci95"][0] <= cats["code"]["speedup"] <= cats["code"]["ci95"][1]
    assert cats["chat"]["a"]["accept_length"] == pytest.approx(2.0)


def test_baseline_section(comparison):
    base = comparison["baseline"]
    assert base["name"] == "nospec"
    a_vs = _geo([a / 90.0 for _, _, a, _ in PROMPTS])
    b_vs = _geo([a * r / 90.0 for _, _, a, r in PROMPTS])
    assert base["a"]["speedup"] == pytest.approx(a_vs)
    assert base["b"]["speedup"] == pytest.approx(b_vs)
    assert base["a"]["a"] == "nospec" and base["a"]["b"] == "chain3" and base["b"]["b"] == "tree8"
    assert base["a"]["verdict"] == SLOWER
    assert base["overall"]["accept_length"] is None  # no speculation: not applicable
    for side in ("a", "b"):
        for key in ("metric", "speedup", "ci95", "verdict", "pairs", "per_prompt", "per_category"):
            assert key in base[side]


def test_overall_sides_and_histograms(comparison):
    ov = comparison["overall"]
    assert ov["a"]["accept_histogram"] == [30 * 12, 40 * 12, 30 * 12]
    assert ov["b"]["accept_histogram"] == [10 * 12, 30 * 12, 20 * 12, 20 * 12]
    assert ov["a"]["requests"] == 12
    assert pooled_histogram([{"spec": {"histogram": [1, 2]}}, {"spec": {"histogram": [1, 0, 5]}}, {}]) == [2, 2, 5]


def test_no_categories_and_no_baseline():
    a = [_rec(p, 0, None, 50.0 + p) for p in range(4)]
    b = [_rec(p, 0, None, 55.0 + p) for p in range(4)]
    c = build_comparison(a, b)
    assert c["per_category"] == {} and c["baseline"] is None
    assert c["overall"]["a"]["accept_length"] is None


def test_write_comparison_files(tmp_path, comparison):
    import plotext as plt

    paths = write_comparison(tmp_path / "cmp", comparison)
    assert json.loads(paths["json"].read_text()) == json.loads(json.dumps(comparison))
    with paths["csv"].open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0].keys()) == list(CSV_COLUMNS)
    assert len(rows) == len(PROMPTS)
    assert float(rows[0]["speedup"]) == pytest.approx(1.25)
    md = paths["md"].read_text()
    assert "**Verdict: " in md and "tree8 vs chain3" in md
    assert "## Per prompt" in md and "## Per category" in md and "## Against the baseline" in md
    assert md.count("```text") == 2  # tok/s bars + side-by-side histograms
    assert "░" in md and "█" in md and "\x1b[" not in md
    assert "chain3: accepted drafts k" in md and "tree8: accepted drafts k" in md
    # plotext's global figure is left clean
    assert "█" not in plt.build()


def test_write_summary_csv(tmp_path):
    run = {
        "profile": "demo-eagle3", "simulated": True, "sglang_version": "0.5.23",
        "effective": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                      "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4},
        "requests": 10, "output_tokens": 2560, "duration_s": 12.8, "output_tok_s": 200.0,
        "ttft_ms": {"mean": 30.0, "p50": 29.0, "p90": 35.0, "p99": 40.0},
        "tpot_ms": {"mean": 5.0, "p50": 5.0, "p90": 5.5, "p99": 6.0}, "itl_ms": None,
        "accept_length": 2.5, "accept_rate": 0.5, "accept_histogram": [10, 20, 30, 40],
        "server_accept_length": 2.49, "verification": {"status": "ok", "findings": []},
    }
    p = write_summary_csv({"specdash_version": "0.1.0", "runs": [run, run]}, tmp_path / "s.csv")
    rows = list(csv.DictReader(p.open()))
    assert len(rows) == 2
    assert rows[0]["speculative_num_steps"] == "3" and rows[0]["ttft_ms_p90"] == "35.0"
    assert rows[0]["itl_ms_p50"] == "" and rows[0]["accept_histogram"] == "10 20 30 40"
    assert rows[0]["verification_status"] == "ok"
    single = write_summary_csv(run, tmp_path / "one.csv")
    assert len(list(csv.DictReader(single.open()))) == 1


def test_nothing_paired_still_writes_an_honest_report(tmp_path):
    a = [_rec(0, 0, None, 50.0)]
    b = [_rec(1, 0, None, 55.0), _rec(0, 0, None, 50.0, ok=False)]
    c = build_comparison(a, b)
    assert c["pairs"] == 0 and c["speedup"] is None and c["verdict"] == "no significant difference"
    assert c["ci95"] == [None, None] and c["per_prompt"] == []
    paths = write_comparison(tmp_path, c)
    md = paths["md"].read_text()
    assert "no valid pair" in md and "```text" not in md
    assert json.loads(paths["json"].read_text())["pairs"] == 0
