"""`specdash compare` is strict about request shapes, reads vLLM `bench serve` and AIPerf result files as a
side, and sets N runs side by side."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest

from specdash.bench.compare import NOT_COMPARABLE, mark_not_comparable, shape_differences
from specdash.bench.external import ExternalFormatError, load_external, unpaired_comparison
from specdash.bench.load import request_shape
from specdash.cli import main
from specdash.profile import parse_suite
from specdash.results import ExternalRun


def _suite(name="s", texts=("a b c", "d e f"), **kw):
    return parse_suite({"suite": {"name": name, **kw}, "prompts": [{"text": t} for t in texts]})


def test_request_shape_names_what_was_sent():
    s = _suite(max_tokens=64)
    shape = request_shape(s, 64)
    assert shape["sampling"] == {"max_new_tokens": 64, "temperature": 0.0, "ignore_eos": True}
    assert shape["api"] == "generate" and shape["prompts"] == 2
    assert request_shape(_suite(name="other"), 64)["prompts_sha256"] == shape["prompts_sha256"]  # name aside
    assert request_shape(_suite(texts=("a b c", "d e g")), 64)["prompts_sha256"] != shape["prompts_sha256"]


def test_shape_differences():
    a = {"request_shape": request_shape(_suite(), 1024)}
    assert shape_differences([a], [dict(a)]) == []
    b = {"request_shape": request_shape(_suite(), 128)}
    assert shape_differences([a], [b]) == ["max_tokens 1024 (A) vs 128 (B)"]
    c = {"request_shape": request_shape(_suite(texts=("x",), temperature=0.7), 1024)}
    why = shape_differences([a], [c])
    assert "temperature 0.0 (A) vs 0.7 (B)" in why and "number of prompts 2 (A) vs 1 (B)" in why
    assert any(w.startswith("the prompts differ") for w in why)
    # RUNs written before request_shape: max_tokens and the suite's name
    assert shape_differences([{"max_tokens": 1024, "suite": "x"}], [{"max_tokens": 128, "suite": "x"}]) == \
        ["max_tokens 1024 (A) vs 128 (B)"]
    cmp = mark_not_comparable({"verdict": "faster", "per_category": {"c": {"verdict": "faster"}}}, ["why"])
    assert cmp["verdict"] == cmp["per_category"]["c"]["verdict"] == NOT_COMPARABLE
    assert cmp["comparable"] is False and cmp["not_comparable"] == ["why"]


def _vllm_result(**extra):
    """The keys vllm/benchmarks/serve.py writes with --save-result (and, from releases that read the
    server's speculative counters, spec_decode_*)."""
    d = {"date": "20261202-101010", "endpoint_type": "vllm", "backend": "vllm", "label": "vllm-base",
         "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
         "num_prompts": 4, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2, "duration": 8.0,
         "completed": 4, "failed": 0, "total_input_tokens": 400, "total_output_tokens": 512,
         "request_throughput": 0.5, "request_goodput": None, "output_throughput": 64.0, "total_token_throughput": 114.0,
         "max_output_tokens_per_s": 80.0, "max_concurrent_requests": 2, "mean_ttft_ms": 30.0, "median_ttft_ms": 29.0,
         "std_ttft_ms": 2.0, "p99_ttft_ms": 35.0, "mean_tpot_ms": 15.0, "median_tpot_ms": 14.5, "std_tpot_ms": 1.0,
         "p99_tpot_ms": 17.0, "mean_itl_ms": 15.0, "median_itl_ms": 14.0, "std_itl_ms": 3.0, "p99_itl_ms": 25.0}
    d.update(extra)
    return d


def test_vllm_result_file(tmp_path):
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(_vllm_result(spec_decode_acceptance_rate=50.0, spec_decode_acceptance_length=2.5,
                                         spec_decode_num_drafts=1000,
                                         spec_decode_per_position_acceptance_rates=[0.8, 0.5, 0.2])))
    side = load_external(f)
    r = side.run
    assert side.tool == "vllm bench serve" and side.name == "vllm-base"
    assert set(r) == set(ExternalRun.__required_keys__)  # the declared shape, nothing beside it
    assert (r["output_tok_s"], r["requests"], r["duration_s"], r["concurrency"]) == (64.0, 4, 8.0, 2)
    assert r["ttft_ms"] == {"mean": 30.0, "p50": 29.0, "p99": 35.0}
    assert r["mean_output_tokens"] == 128.0 and r["accept_rate"] == 0.5 and r["accept_length"] == 2.5
    assert r["accept_by_position_source"] == "server"
    assert [p["accepted"] for p in r["accept_by_position"]] == [800, 500, 200]
    assert [p["reached"] for p in r["accept_by_position"]] == [1000, 800, 500]
    assert [p["rate"] for p in r["accept_by_position"]] == pytest.approx([0.8, 0.625, 0.4])
    assert side.request_tok_s == [] and "--save-detailed" in side.notes[0]
    # --save-detailed: per-request output_lens / ttfts / itls (s)
    f.write_text(json.dumps(_vllm_result(output_lens=[128, 128], ttfts=[0.03, 0.05], itls=[[0.01] * 127, [0.02] * 127])))
    tok = load_external(f).request_tok_s
    assert tok == pytest.approx([128 / (0.03 + 1.27), 128 / (0.05 + 2.54)])


def _aiperf(tmp_path, hist=None):
    d = tmp_path / "artifacts" / "my-run"
    d.mkdir(parents=True)
    m = lambda unit, avg, **q: {"unit": unit, "avg": avg, **q}  # noqa: E731
    data = {"request_throughput": m("requests/sec", 0.5), "output_token_throughput": m("tokens/sec", 70.0),
            "time_to_first_token": m("ms", 31.0, p50=30.0, p99=40.0), "inter_token_latency": m("ms", 14.0, p50=13.5),
            "request_latency": m("ms", 1800.0, p50=1790.0), "output_sequence_length": m("tokens", 128.0, p50=128.0),
            "benchmark_duration": m("sec", 8.0), "request_count": m("requests", 4.0), "total_osl": m("tokens", 512.0),
            "was_cancelled": False, "error_summary": [],
            "input_config": {"endpoint": {"model_names": ["llama-8b"], "type": "chat", "streaming": True},
                             "input": {"prompt": {"output_tokens": {"mean": 128}}}, "loadgen": {"concurrency": 2}}}
    if hist is not None:
        data["pooled_spec_decode_acceptance_histogram"] = hist
    (d / "profile_export_aiperf.json").write_text(json.dumps(data))
    recs = [{"metadata": {"session_num": i}, "metrics": {"request_latency": {"value": lat, "unit": "ms"},
                                                          "output_sequence_length": {"value": 128, "unit": "tokens"}},
             "error": None} for i, lat in enumerate((1700.0, 1800.0, 1900.0))]
    recs.append({"metadata": {"session_num": 3}, "metrics": None, "error": {"code": 500, "type": "E", "message": "x"}})
    (d / "profile_export.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return d


def test_aiperf_export(tmp_path):
    d = _aiperf(tmp_path, hist={"0": 10, "1": 20, "3": 30})
    side = load_external(d)
    r = side.run
    assert side.tool == "aiperf" and side.name == "llama-8b"
    assert set(r) == set(ExternalRun.__required_keys__) | {"asked_output_tokens"}
    assert (r["output_tok_s"], r["requests"], r["concurrency"], r["asked_output_tokens"]) == (70.0, 4, 2, 128)
    assert r["tpot_ms"] == {"mean": 14.0, "p50": 13.5}  # AIPerf's ITL is SGLang's / vLLM's TPOT
    assert r["accept_histogram"] == [10, 20, 0, 30]
    assert [p["rate"] for p in r["accept_by_position"]] == pytest.approx([50 / 60, 30 / 50, 1.0])
    assert side.request_tok_s == pytest.approx([128 / 1.7, 128 / 1.8, 128 / 1.9])  # the failed record left out


def test_unreadable_or_foreign_files(tmp_path):
    f = tmp_path / "x.json"
    f.write_text("{not json")
    with pytest.raises(ExternalFormatError, match="not JSON"):
        load_external(f)
    f.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ExternalFormatError, match="neither a vLLM"):
        load_external(f)


def test_unpaired_comparison_figures():
    a = [10.0, 11.0, 12.0, 9.0, 10.5]
    b = [x * 1.2 for x in a]
    c = unpaired_comparison("a", a, None, "b", b, None, n_boot=999, seed=3)
    assert c["speedup"] == pytest.approx(1.2)
    lo, hi = c["ci95"]
    assert lo < 1.2 < hi and c["verdict"] == "faster" and c["pairs"] == 0
    same = unpaired_comparison("a", a, None, "b", list(a), None, n_boot=999)
    assert same["speedup"] == pytest.approx(1.0) and same["verdict"] == "no significant difference"
    only = unpaired_comparison("a", [], 50.0, "b", [], 60.0)
    assert only["speedup"] == pytest.approx(1.2) and only["ci95"] is None and only["verdict"] == "throughput ratio only"


def _cli(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from tests.test_bench import sim_profile

    tmp = tmp_path_factory.mktemp("sides")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(tmp / "config"))
        mp.setenv("SPECDASH_STATE_DIR", str(tmp / "state"))
        prof = sim_profile(tmp, "sides", time_scale=8.0)
        rc, out = _cli(["--bench", "--profile", str(prof), "--max-tokens", "48", "--out", str(tmp / "runs"), "--json"])
    assert rc == 0
    return Path(json.loads(out)["runs"][0]["run_dir"])


def _as_vllm(run_dir: Path, tmp: Path, scale: float = 1.0, out_len: int | None = None) -> Path:
    """A vLLM --save-detailed result made from the run's own requests: each request's e2e as TTFT + ITLs,
    scaled by ``scale`` (so its per-request tok/s are the run's ÷ scale)."""
    recs = [json.loads(ln) for ln in (run_dir / "requests.jsonl").read_text().splitlines()]
    lens = [r["completion_tokens"] if out_len is None else out_len for r in recs]
    ttfts = [r["ttft_s"] * scale for r in recs]
    itls = [[(r["e2e_s"] - r["ttft_s"]) * scale] for r in recs]
    f = tmp / f"vllm-{scale}.json"
    f.write_text(json.dumps(_vllm_result(label=f"vllm-{scale}", completed=len(recs), num_prompts=len(recs),
                                         total_output_tokens=sum(lens), output_lens=lens, ttfts=ttfts, itls=itls,
                                         output_throughput=100.0)))
    return f


def test_compare_a_run_with_a_vllm_result(run_dir, tmp_path):
    same = _as_vllm(run_dir, tmp_path, 1.0)
    rc, out = _cli(["compare", str(run_dir), str(same), "--json"])
    assert rc == 0
    cmp = json.loads(out)
    assert cmp["speedup"] == pytest.approx(1.0, rel=1e-9) and cmp["verdict"] == "no significant difference"
    assert cmp["comparable"] is True and cmp["pairs"] == 0 and cmp["method"].startswith("unpaired")
    slow = _as_vllm(run_dir, tmp_path, 2.0)  # every request took twice as long: half the tok/s
    rc, out = _cli(["compare", str(run_dir), str(slow), "--json"])
    cmp = json.loads(out)
    assert cmp["speedup"] == pytest.approx(0.5, rel=1e-9) and cmp["verdict"] == "slower"
    assert cmp["overall"]["a"]["accept_by_position"] and cmp["overall"]["b"]["tool"] == "vllm bench serve"
    short = _as_vllm(run_dir, tmp_path, 1.0, out_len=8)  # another request shape: 8 output tokens, not 48
    rc, out = _cli(["compare", str(run_dir), str(short), "--json"])
    cmp = json.loads(out)
    assert cmp["verdict"] == NOT_COMPARABLE
    assert cmp["not_comparable"] == ["output length 48 tokens (max_tokens (ignore_eos), A) vs 8 (mean output tokens, B)"]
    rc, text = _cli(["compare", str(run_dir), str(short)])
    assert rc == 0 and "not comparable — the sides sent different requests: output length 48" in text


def test_compare_n_sides(run_dir, tmp_path):
    fast = _as_vllm(run_dir, tmp_path, 0.5)
    aiperf = _aiperf(tmp_path)
    rc, out = _cli(["compare", str(run_dir), str(fast), str(aiperf), "--json"])
    assert rc == 0
    got = json.loads(out)
    assert got["reference"] == "sides"
    assert [s["tool"] for s in got["sides"]] == ["specdash", "vllm bench serve", "aiperf"]
    summary = json.loads((run_dir / "summary.json").read_text())["runs"][0]
    assert got["sides"][0]["output_tok_s"] == summary["output_tok_s"]
    assert got["sides"][0]["accept_by_position"] == summary["accept_by_position"]
    c_fast, c_aiperf = got["comparisons"]
    assert c_fast["speedup"] == pytest.approx(2.0, rel=1e-9) and c_fast["verdict"] == "faster"
    # AIPerf asked 128 output tokens, the run 48: not comparable, though a figure is given
    assert c_aiperf["verdict"] == NOT_COMPARABLE and math.isfinite(c_aiperf["speedup"])
    rc, text = _cli(["compare", str(run_dir), str(fast), str(aiperf)])
    assert rc == 0
    assert "over sides" in text.splitlines()[0] and "×2.000" in text and "not comparable with sides" in text


def test_compare_needs_two_sides(tmp_path, capsys):
    assert main(["compare", str(tmp_path)]) == 2
    assert "give two run directories" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["compare", str(bad), str(tmp_path)]) == 2
    assert "neither a vLLM" in capsys.readouterr().err
