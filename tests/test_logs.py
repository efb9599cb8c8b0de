"""SGLang log parsing (specdash.sglang.logs) on the golden server logs and synthetic lines."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

import pytest

from specdash.sglang.logs import (
    DecodeSample,
    LineKind,
    LogRing,
    PrefillSample,
    classify_line,
    parse_line,
    split_prefix,
)

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "sglang" / "golden" / "runs"

# Counts of batch lines in each recorded server.log (grep -c "Decode batch" / "Prefill batch").
GOLDEN_COUNTS = {
    "baseline_nospec": (394, 11, 43),
    "eagle3_aligned_warm": (207, 12, 33),
    "eagle3_steps1_draft16": (103, 13, 24),
    "eagle_wrongalgo": (186, 10, 24),
}


def golden_lines(run: str) -> list[str]:
    path = GOLDEN / run / "server.log"
    if not path.exists():
        pytest.skip("shared/sglang/golden is not beside the checkout")
    return path.read_bytes().decode("utf-8").split("\n")  # strict UTF-8: byte for byte


@pytest.mark.parametrize("run", sorted(GOLDEN_COUNTS))
def test_golden_log_counts(run):
    decode, prefill, access = GOLDEN_COUNTS[run]
    ring = LogRing()
    ring.extend(golden_lines(run))
    assert ring.counts[LineKind.DECODE] == decode
    assert ring.counts[LineKind.PREFILL] == prefill
    assert ring.counts[LineKind.ACCESS] == access
    assert ring.counts[LineKind.READY] == 1
    assert ring.ready.is_set()
    assert len(ring.decode_samples()) == decode
    assert len(ring.prefill_samples()) == prefill
    for s in ring.decode_samples():
        assert s.running_req is not None and s.gen_throughput is not None and s.cuda_graph is True
        assert s.graph_kind == "cuda" and s.extra == {} and s.prefix == {}
        assert (s.accept_len is None) == (run == "baseline_nospec")
    # Nothing before the ready line is an error in these healthy starts.
    entries = ring.entries()
    ready = next(e.seq for e in entries if e.kind is LineKind.READY)
    assert [e.text for e in entries if e.kind is LineKind.ERROR and e.seq < ready] == []


def test_golden_exact_decode_lines():
    lines = golden_lines("eagle3_aligned_warm")
    s = parse_line(lines[58])  # line 59
    assert s == DecodeSample(
        timestamp=datetime(2026, 11, 29, 13, 47, 9), prefix={}, running_req=1, num_token=17,
        token_usage=0.0, accept_len=2.0, accept_rate=0.33, cuda_graph=True, graph_kind="cuda",
        gen_throughput=0.54, queue_req=0,
    )
    s = parse_line(lines[197])  # line 198, the concurrent phase
    assert (s.running_req, s.num_token, s.accept_len, s.accept_rate, s.gen_throughput) == (8, 197, 1.5, 0.17, 63.25)
    p = parse_line(lines[112])  # line 113
    assert p == PrefillSample(
        timestamp=datetime(2026, 11, 29, 13, 47, 12), prefix={}, new_seq=1, new_token=2, cached_token=15,
        token_usage=0.0, running_req=0, queue_req=0, pending_token=0, cuda_graph=False, graph_kind="cuda",
        input_throughput=16.81,
    )
    base = parse_line(golden_lines("baseline_nospec")[482])  # line 483: no speculation
    assert (base.accept_len, base.accept_rate, base.gen_throughput, base.num_token) == (None, None, 923.2, 0)


def test_golden_classification():
    lines = golden_lines("eagle3_steps1_draft16")
    kinds = [classify_line(line) for line in lines]
    by_kind = {k: [ln for ln, kk in zip(lines, kinds, strict=True) if kk is k] for k in LineKind}
    adjustments = [ln.split("] ", 1)[1] for ln in by_kind[LineKind.ADJUSTMENT]]
    assert adjustments == [
        "Max running requests is reset to 48 for speculative decoding. You can override this by "
        "explicitly setting --max-running-requests.",
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
    ]
    errors = by_kind[LineKind.ERROR]
    assert sum("[http_server] Error: Request is disconnected" in ln for ln in errors) == 8
    assert any("crashed with exit code -15" in ln for ln in errors)  # at shutdown
    assert len(errors) == 9
    warnings = by_kind[LineKind.WARNING]
    assert any("UserWarning: 'python -m sglang.launch_server'" in ln for ln in warnings)
    assert sum("but the state was deleted in TokenizerManager" in ln for ln in warnings) == 8
    assert any("Endpoint '/get_server_info' is deprecated" in ln for ln in warnings)
    assert all("INFO:     127.0.0.1" in ln for ln in by_kind[LineKind.ACCESS])
    assert by_kind[LineKind.WEIGHT_SKIP] == []
    # A capture notice that only reflects the user's own flags is not an adjustment.
    assert classify_line(next(ln for ln in lines if "Disable prefill CUDA graph" in ln)) is LineKind.OTHER
    assert classify_line(next(ln for ln in lines if ln.startswith("[") and "server_args=" in ln)) is LineKind.OTHER


def test_split_prefix_variants():
    ts, prefix, msg = split_prefix("[2026-05-10 12:00:05.123 DP1 PP0 ATTN_CP2 MOE_DP3 TP7 EP4] Hello")
    assert ts == datetime(2026, 5, 10, 12, 0, 5, 123000)
    assert prefix == {"DP": 1, "PP": 0, "ATTN_CP": 2, "MOE_DP": 3, "TP": 7, "EP": 4}
    assert msg == "Hello"
    assert split_prefix("  File \"x.py\", line 3") == (None, {}, "  File \"x.py\", line 3")
    ts, prefix, msg = split_prefix("(SGLangEngine pid=35555) [2025-10-31 03:45:20 TP0] Decode batch [5], x: 1")
    assert ts == datetime(2025, 10, 31, 3, 45, 20) and prefix == {"TP": 0}
    assert msg.startswith("Decode batch [5]")


def test_decode_with_tp_dp_prefix_and_iter():
    s = parse_line(
        "[2026-05-10 12:00:05.250 DP0 TP1] Decode batch [51341], #running-req: 317, #token: 1094261, "
        "token usage: 0.67, accept len: 3.42, accept rate: 0.61, cuda graph: True, "
        "gen throughput (token/s): 14806.57, #queue-req: 2,"
    )
    assert isinstance(s, DecodeSample)
    assert s.timestamp == datetime(2026, 5, 10, 12, 0, 5, 250000)
    assert s.prefix == {"DP": 0, "TP": 1}
    assert s.iteration == 51341
    assert (s.running_req, s.num_token, s.token_usage) == (317, 1094261, 0.67)
    assert (s.accept_len, s.accept_rate, s.gen_throughput, s.queue_req) == (3.42, 0.61, 14806.57, 2)
    assert s.extra == {}


def test_decode_hybrid_and_other_devices():
    s = parse_line(
        "[2026-03-14 04:59:11] Decode batch, #running-req: 20, #full token: 2326796, full token usage: 0.14, "
        "mamba num: 20, mamba usage: 1.00, cuda graph: True, gen throughput (token/s): 1174.06, #queue-req: 6, "
    )
    assert (s.num_token, s.token_usage) == (None, None)
    assert (s.full_num_token, s.full_token_usage, s.mamba_num, s.mamba_usage) == (2326796, 0.14, 20, 1.0)
    assert s.queue_req == 6 and s.extra == {}
    s = parse_line(
        "[2026-03-14 04:59:11 TP3] Decode batch, #running-req: 4, #full token: 900, full token usage: 0.10, "
        "#swa token: 300, swa token usage: 0.05, accept len: 1.80, accept rate: 0.40, npu graph: False, "
        "gen throughput (token/s): 88.00, #queue-req: 0"
    )
    assert (s.swa_num_token, s.swa_token_usage, s.cuda_graph, s.graph_kind) == (300, 0.05, False, "npu")
    assert parse_line("[2026-03-14 04:59:11] Decode batch, #running-req: 1, cpu graph: True, #queue-req: 0").graph_kind == "cpu"


def test_decode_extras_and_odd_forms():
    s = parse_line(
        "[2026-05-19 00:34:42 DP0 TP0 EP0] Decode batch [2], #running-req: 1, #token: 64, token usage: 0.20, "
        "pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, "
        "gen throughput (token/s): 58.87, #queue-req: 0"
    )
    assert s.extra == {"pre_allocated_usage": "0.00", "prealloc_req": "0", "transfer_req": "0", "retracted_req": "0"}
    assert s.prefix == {"DP": 0, "TP": 0, "EP": 0}
    s = parse_line("[2026-05-19 00:34:42] Decode batch [first graph replay], #running-req: 32, cuda graph: True, "
                   "#queue-req: 0")
    assert s.iteration == "first graph replay" and s.running_req == 32
    # Older releases: "Decode batch." and no accept fields.
    s = parse_line("[2025-11-06 12:11:03] Decode batch. #running-req: 1, #token: 206, token usage: 0.00, "
                   "cuda graph: True, gen throughput (token/s): 656.23")
    assert (s.running_req, s.num_token, s.gen_throughput, s.accept_len) == (1, 206, 656.23, None)
    # Public case C01 quotes "accept_len: 1.00".
    assert parse_line("[2026-01-01 00:00:00] Decode batch, accept_len: 1.00, #queue-req: 0").accept_len == 1.0
    # A garbled value does not raise.
    assert parse_line("[2026-01-01 00:00:00] Decode batch, #running-req: n/a, accept len: nan").running_req is None


def test_prefill_hybrid():
    p = parse_line(
        "[2026-09-30 08:30:15] Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 128, full token usage: "
        "0.00, mamba usage: 0.05, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
        "input throughput (token/s): 7.34"
    )
    assert isinstance(p, PrefillSample)
    assert (p.new_seq, p.new_token, p.cached_token, p.full_token_usage, p.mamba_usage) == (1, 64, 128, 0.0, 0.05)
    assert (p.input_throughput, p.cuda_graph, p.token_usage) == (7.34, False, None)


def test_not_batch_lines():
    assert parse_line("[2026-11-29 13:47:09] The server is fired up and ready to roll!") is None
    assert parse_line("Capturing batches (bs=8 avail_mem=69.50 GB):   0%|") is None
    assert parse_line("") is None


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("[2026-01-01 00:00:00] The server is fired up and ready to roll!", LineKind.READY),
        ("Traceback (most recent call last):", LineKind.ERROR),
        ("[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):", LineKind.ERROR),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", LineKind.ERROR),
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", LineKind.ERROR),
        ("[2026-01-01 00:00:00] Not enough memory. Please try to increase --mem-fraction-static.", LineKind.ERROR),
        ("RuntimeError: The size of tensor a (8640) must match the size of tensor b (5760) at non-singleton "
         "dimension 1", LineKind.ERROR),
        ("[2026-01-01 00:00:00] Parameter midlayer.foo.weight not found in params_dict", LineKind.WEIGHT_SKIP),
        ("[2026-01-01 00:00:00] Skipping weight layers.1.mlp.up_proj.weight", LineKind.WEIGHT_SKIP),
        ("Some weights of LlamaForCausalLMEagle3 were not initialized from the model checkpoint",
         LineKind.WEIGHT_SKIP),
        ("[2026-01-01 00:00:00] Unexpected keys in checkpoint: ['layers.1.foo']", LineKind.WEIGHT_SKIP),
        ("[2026-01-01 00:00:00] Overlap scheduler is disabled because of using eagle speculative decoding.",
         LineKind.ADJUSTMENT),
        ("[2026-01-01 00:00:00] speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
         "speculative_eagle_topk == 1", LineKind.ADJUSTMENT),
        ('[2026-01-01 00:00:00] INFO:     127.0.0.1:42302 - "GET /health HTTP/1.1" 503 Service Unavailable',
         LineKind.ACCESS),
        ('[2026-01-01 00:00:00] INFO:     127.0.0.1:42302 - "GET /Error HTTP/1.1" 404 Not Found', LineKind.ACCESS),
        ("/x/y.py:3: FutureWarning: sglang.bench_serving is deprecated", LineKind.WARNING),
        ("[W1129 13:46:12.123456 1234 init.cpp:12] Warning: something", LineKind.WARNING),
        ("[2026-01-01 00:00:00] Ignore import error when loading sglang.srt.models.mimo_v2", LineKind.WARNING),
        ("[2026-01-01 00:00:00] Load weight begin. avail mem=139.13 GB", LineKind.OTHER),
        ("[2026-01-01 00:00:00] No live scheduler processes found; skipping py-spy and CUDA coredump.",
         LineKind.OTHER),
    ],
)
def test_classify_line(line, kind):
    assert classify_line(line) is kind


def test_classify_continuation_lines():
    ring = LogRing()
    for line in [
        "[2026-01-01 00:00:00] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/scheduler.py", line 12, in run',
        "    self.step()",
        "[2026-01-01 00:00:01] Load weight begin. avail mem=1 GB",
        "    indented but after an OTHER line",
    ]:
        ring.append(line)
    assert [e.kind for e in ring.entries()] == [
        LineKind.ERROR, LineKind.ERROR, LineKind.ERROR, LineKind.OTHER, LineKind.OTHER,
    ]


def test_log_ring_bounds_and_increments():
    ring = LogRing(maxlen=5, max_samples=3)
    for i in range(10):
        ring.append(f"[2026-01-01 00:00:0{i}] Decode batch, #running-req: {i}, #queue-req: 0\n")
    assert ring.seq == 10 and ring.counts[LineKind.DECODE] == 10
    assert len(ring.lines()) == 5 and ring.lines(2)[-1].endswith("#running-req: 9, #queue-req: 0")
    assert [s.running_req for s in ring.decode_samples()] == [7, 8, 9]
    assert ring.last_decode.running_req == 9
    assert [e.seq for e in ring.entries(since=8)] == [9, 10]
    assert [e.seq for e in ring.entries()] == [6, 7, 8, 9, 10]  # older ones were dropped
    assert ring.entries(since=10) == [] and ring.entries(since=99) == []
    assert ring.entries(kinds=[LineKind.ERROR]) == []
    assert ring.tail(1) == ring.lines()[-1]
    assert ring.lines(0) == []


def test_log_ring_carriage_returns_keep_last_frame():
    ring = LogRing()
    e = ring.append("Capturing  0%|  | 0/8\rCapturing 50%|# | 4/8\rCapturing 100%|##| 8/8\r\n")
    assert e.text == "Capturing 100%|##| 8/8" and e.kind is LineKind.OTHER


def test_log_ring_threads():
    ring = LogRing(maxlen=100_000)
    line = "[2026-01-01 00:00:00 TP0] Decode batch, #running-req: 1, accept len: 2.00, #queue-req: 0"

    def worker():
        for _ in range(500):
            ring.append(line)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ring.seq == 4000 and ring.counts[LineKind.DECODE] == 4000
    assert sorted(e.seq for e in ring.entries()) == list(range(1, 4001))
    assert len(ring.decode_samples()) == 4000
