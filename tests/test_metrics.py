"""Prometheus parsing (specdash.sglang.metrics) on the golden scrapes and synthetic text."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.sglang.metrics import (
    METRICS,
    Histogram,
    counter_delta,
    counter_deltas_by,
    counter_rate,
    histogram_delta,
    parse_metrics,
    server_accept_length,
)

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "sglang" / "golden" / "runs"
RUNS = ("baseline_nospec", "eagle3_aligned_warm", "eagle3_steps1_draft16", "eagle_wrongalgo")


def scrape(run: str, which: str):
    path = GOLDEN / run / f"metrics_{which}.prom"
    if not path.exists():
        pytest.skip("shared/sglang/golden is not beside the checkout")
    return parse_metrics(path.read_bytes().decode("utf-8"))


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("which", ["before", "during", "after"])
def test_every_golden_scrape_parses(run, which):
    snap = scrape(run, which)
    assert snap.present("sglang:generation_tokens_total")
    assert snap.types["sglang:generation_tokens_total"] == "counter"
    assert snap.types["sglang:num_running_reqs"] == "gauge"
    assert snap.present("sglang:spec_verify_calls_total") == (run != "baseline_nospec")


def test_aligned_counters_and_accept_length():
    before, after = scrape("eagle3_aligned_warm", "before"), scrape("eagle3_aligned_warm", "after")
    assert after.get("sglang:generation_tokens_total") == 1400.0
    assert after.get("sglang:spec_verify_calls_total") == 705.0
    # The same sample under every accepted spelling.
    for name in ("generation_tokens", "sglang:generation_tokens", "generation_tokens_total"):
        assert after.total(name) == 1400.0
    assert before.get("generation_tokens") == 8.0 and before.get("spec_verify_calls") == 4.0
    assert counter_delta(before, after, "generation_tokens") == 1392.0
    assert server_accept_length(before, after) == pytest.approx(1392 / 701)
    assert after.get("spec_accept_length") == 2.0
    assert after.get("spec_accept_rate") == pytest.approx(1 / 3)
    assert after.get("spec_num_steps") == 3.0 and after.get("spec_num_draft_tokens") == 4.0


def test_steps1_draft16_shows_the_adjusted_draft_tokens():
    after = scrape("eagle3_steps1_draft16", "after")
    assert after.get("sglang:spec_num_draft_tokens") == 2.0  # asked 16, SGLang ran 2 (FACTS.md §6)
    assert server_accept_length(scrape("eagle3_steps1_draft16", "before"), after) == 2.0


def test_wrong_algorithm_collapse_is_visible():
    acc = server_accept_length(scrape("eagle_wrongalgo", "before"), scrape("eagle_wrongalgo", "after"))
    assert acc == pytest.approx(176 / 170)


def test_baseline_has_no_speculation_counter():
    before, after = scrape("baseline_nospec", "before"), scrape("baseline_nospec", "after")
    assert not after.present("sglang:spec_verify_calls_total")
    assert after.get("spec_verify_calls") is None and after.total("spec_verify_calls") is None
    assert counter_delta(before, after, "spec_verify_calls") is None
    assert server_accept_length(before, after) is None
    assert after.present("sglang:spec_accept_length") and after.get("sglang:spec_accept_length") == 0.0
    assert counter_delta(before, after, "generation_tokens") == 1392.0


def test_labels_totals_and_values():
    after = scrape("eagle3_aligned_warm", "after")
    assert after.get("realtime_tokens", mode="decode") == 1430.0
    assert after.total("sglang:realtime_tokens_total") == 185.0 + 1430.0 + 45.0
    assert after.total("realtime_tokens", mode="nope") is None
    assert after.get("sglang:http_responses_total", endpoint="/health", status_code="503") == 3.0
    assert after.total("sglang:http_responses_total", endpoint="/health") == 5.0
    assert len(after.values("sglang:http_requests_total")) == 11
    assert after.get("num_running_reqs", tp_rank=0) == 1.0  # label values compared as text


def test_golden_histograms():
    after = scrape("eagle3_aligned_warm", "after")
    ttft = after.histogram("ttft")
    assert ttft.count == 15.0 and ttft.sum == pytest.approx(12.507657231000053)
    assert ttft.buckets[0] == (0.1, 6.0) and ttft.buckets[-1] == (float("inf"), 15.0)
    assert ttft.quantile(0.5) == pytest.approx(1.1875)  # rank 7.5 in (1, 2]: 6 → 14
    assert after.histogram("sglang:inter_token_latency_seconds").count == 525.0
    assert after.histogram("tpot") is None  # 0.5.14 does not export it
    delta = histogram_delta(scrape("eagle3_aligned_warm", "before"), after, "ttft")
    assert delta.count == 14.0 and delta.sum == pytest.approx(12.507657231000053 - 2.6807814430000008)


def test_metric_table_against_a_real_server():
    after = scrape("eagle3_aligned_warm", "after")
    missing = sorted(
        key for key, m in METRICS.items()
        if not after.present(m.name + "_count" if m.kind == "histogram" else m.name)
    )
    # absent from 0.5.14's exposition; the device timer was off on that server
    assert missing == ["forward_execution_seconds", "num_aborted_requests", "tpot"]
    for m in METRICS.values():
        assert m.name.startswith("sglang:") and m.kind in ("counter", "gauge", "histogram")
        assert (m.kind == "counter") == m.name.endswith("_total")


def test_device_timer_deltas_by_category():
    """adaptive_default_c1_c16_c32: metrics_a2 → a3 is the c32 phase, at steps 1 (no multi-step draft)."""
    path = GOLDEN / "adaptive_default_c1_c16_c32"
    if not path.is_dir():
        pytest.skip("shared/sglang/golden is not beside the checkout")
    a2, a3 = (parse_metrics((path / f"metrics_a{i}.prom").read_text()) for i in (2, 3))
    d = counter_deltas_by(a2, a3, "forward_execution_seconds", "category")
    assert set(d) == {"extend", "eagle_draft", "target_verify", "eagle_draft_extend"}
    assert d["eagle_draft"] == 0.0  # steps 1: the draft's first token comes from draft extend
    assert d["target_verify"] == pytest.approx(1.6630812473595096 - 1.465702078968283)
    assert counter_deltas_by(a3, a2, "forward_execution_seconds", "category") is None  # a reset
    assert counter_deltas_by(a2, scrape("eagle3_aligned_warm", "after"), "forward_execution_seconds",
                             "category") is None  # timer off


SYNTH = """\
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{is_streaming="true",model_name="m"} 100.0
sglang:generation_tokens_total{is_streaming="false",model_name="m"} 20.0
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m"} 40.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0"} 3.0
sglang:num_running_reqs{dp_rank="1"} 4.0
sglang:untyped_thing 7
"""


def test_synthetic_streaming_labels_and_rates():
    a = parse_metrics(SYNTH, t=10.0)
    b = parse_metrics(SYNTH.replace("100.0", "160.0").replace("40.0", "70.0"), t=12.0)
    assert a.total("generation_tokens") == 120.0
    assert a.get("generation_tokens", is_streaming="false") == 20.0
    assert a.get("num_running_reqs") == 3.0 and a.total("num_running_reqs") == 7.0
    assert a.get("sglang:untyped_thing") == 7.0
    assert counter_delta(a, b, "generation_tokens") == 60.0
    assert counter_rate(a, b, "generation_tokens", is_streaming="true") == 30.0
    assert server_accept_length(a, b) == 2.0
    # A restarted server resets its counters: no delta.
    assert counter_delta(b, a, "generation_tokens") is None
    assert server_accept_length(b, a) is None
    assert counter_rate(a, parse_metrics(SYNTH, t=10.0), "generation_tokens") is None  # no time passed


def test_a_series_created_between_two_scrapes_counts_from_zero():
    empty = parse_metrics("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0.0\n", t=0.0)
    b = parse_metrics(SYNTH, t=4.0)
    assert counter_delta(empty, b, "generation_tokens") == 120.0
    assert counter_rate(empty, b, "spec_verify_calls") == 10.0
    assert server_accept_length(empty, b) == 3.0
    assert counter_delta(b, empty, "generation_tokens") is None  # gone after: no delta


def test_histogram_quantile_edges():
    h = Histogram(buckets=((0.1, 0.0), (1.0, 10.0), (float("inf"), 10.0)), sum=5.0, count=10.0)
    assert h.quantile(0.0) == 0.1 and h.quantile(0.5) == pytest.approx(0.55) and h.quantile(1.0) == 1.0
    assert h.mean == 0.5
    top = Histogram(buckets=((1.0, 1.0), (float("inf"), 4.0)), sum=9.0, count=4.0)
    assert top.quantile(0.9) == 1.0  # rank in +Inf bucket: the largest finite bound
    assert Histogram(buckets=(), sum=0.0, count=0.0).quantile(0.5) is None
    with pytest.raises(ValueError):
        h.quantile(1.5)


def test_parse_error_raises():
    with pytest.raises(ValueError):
        parse_metrics("sglang:bad{label=unquoted} 1\n")
