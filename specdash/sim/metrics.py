"""Prometheus metrics with SGLang's names and labels (``observability/metrics_collector.py``; golden ``metrics_*.prom``).

One :class:`SimMetrics` per server, on its own ``CollectorRegistry`` and exported with
``generate_latest``.  Shapes follow a real SGLang 0.5.14 server's ``/metrics``, as recorded on an H200
before and after a benchmark:

* tokenizer metrics (per finished request) carry ``engine_type``, ``model_name``:
  counters ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``,
  ``sglang:num_requests_total``, ``sglang:cached_tokens_total{cache_source}`` and — only
  with speculation — ``sglang:spec_verify_calls_total``; histograms TTFT, ITL, e2e,
  prompt/generation token lengths, and from 0.5.22 the TPOT histogram (``metrics_collector.py``
  has it in 0.5.23; the 0.5.14 recording has none);
* scheduler metrics carry ``engine_type, model_name, moe_ep_rank, pp_rank, tp_rank``:
  gauges ``num_running_reqs``, ``num_queue_reqs``, ``gen_throughput``, ``token_usage``,
  ``spec_accept_length``, ``spec_accept_rate``, ``spec_num_steps``,
  ``spec_num_draft_tokens`` (0.0 without speculation, as the baseline recording shows),
  KV/cache gauges and start-up constants; counters ``realtime_tokens_total{mode}`` and
  ``cuda_graph_passes_total{mode}``;
* HTTP metrics ``sglang:http_requests_total{endpoint,method}`` and
  ``sglang:http_responses_total{endpoint,method,status_code}``.

Health-check generations are not counted (``log_metrics=False``).  No ``_created`` series
(SGLang's multiprocess registry has none).
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

try:  # no *_created samples, like SGLang's multiprocess collector
    from prometheus_client import disable_created_metrics

    disable_created_metrics()
except ImportError:  # pragma: no cover - very old prometheus_client
    pass

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4,
               0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0,
               600.0, 1200.0, 1800.0, 2400.0)
TPOT_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0,
                2.0, 4.0, 6.0, 8.0)
LEN_BUCKETS = (100.0, 300.0, 500.0, 700.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 7000.0, 8000.0,
               9000.0, 10000.0, 12500.0, 15000.0, 17500.0, 20000.0, 22500.0, 25000.0, 27500.0, 30000.0, 35000.0,
               40000.0, 60000.0, 80000.0, 100000.0, 200000.0, 300000.0, 400000.0, 600000.0, 800000.0, 1e6, 1.1e6)
#: Release from which the TPOT histogram is exported (see the module docstring).
TPOT_SINCE = "0.5.22"

TOK_LABELS = ("engine_type", "model_name")
SCHED_LABELS = ("engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank")


class SimMetrics:
    """SGLang's metric families for one simulated server (see the module docstring)."""

    def __init__(self, model_name: str, *, spec: bool, tpot: bool, device_timer: bool = False,
                 replica_ranks: Sequence[int] = ()) -> None:
        #: ``--enable-metrics-for-all-schedulers``: the other TP ranks whose schedulers export their own
        #: copy of every scheduler series (the same batches; ``tp_rank`` differs) — see :meth:`render`
        self.replica_ranks = tuple(int(r) for r in replica_ranks if int(r) != 0)
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        tok = {"engine_type": "unified", "model_name": model_name}
        sched = {**tok, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
        self.http_requests = Counter("sglang:http_requests", "Total number of HTTP requests by endpoint and method",
                                     ("endpoint", "method"), registry=r)
        self.http_responses = Counter("sglang:http_responses",
                                      "Total number of HTTP responses by endpoint and status code",
                                      ("endpoint", "method", "status_code"), registry=r)
        self.prompt_tokens = Counter("sglang:prompt_tokens", "Number of prefill tokens processed.", TOK_LABELS,
                                     registry=r).labels(**tok)
        self.generation_tokens = Counter("sglang:generation_tokens", "Number of generation tokens processed.",
                                         TOK_LABELS, registry=r).labels(**tok)
        self.spec_verify_calls = (
            Counter("sglang:spec_verify_calls", "Number of speculative decoding verification calls.", TOK_LABELS,
                    registry=r).labels(**tok) if spec else None
        )
        self.num_requests = Counter("sglang:num_requests", "Number of requests processed.", TOK_LABELS,
                                    registry=r).labels(**tok)
        self.cached_tokens = Counter("sglang:cached_tokens",
                                     "Number of cached prompt tokens by source (device/host/storage).",
                                     ("cache_source", *TOK_LABELS), registry=r).labels(cache_source="device", **tok)
        self.cuda_graph_passes = Counter("sglang:cuda_graph_passes",
                                         "Total number of forward passes categorized by CUDA graph.",
                                         ("engine_type", "mode", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"),
                                         registry=r)
        self.realtime_tokens = Counter(
            "sglang:realtime_tokens",
            "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, "
            "decode.", ("engine_type", "mode", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"), registry=r)
        self._sched = sched
        # SGLANG_ENABLE_METRICS_DEVICE_TIMER (observability/metrics_collector.py): GPU seconds per forward
        # category; labels print sorted, as SGLang's multiprocess collector writes them (golden metrics_a*.prom).
        self.forward_execution_seconds = Counter(
            "sglang:forward_execution_seconds",
            "Total time that GPU is busy executing model forward passes. Refer to ForwardMode for category labels.",
            ("category", "engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"), registry=r)
        self.device_timer = device_timer
        self.ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              TOK_LABELS, buckets=TTFT_BUCKETS, registry=r).labels(**tok)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                             TOK_LABELS, buckets=E2E_BUCKETS, registry=r).labels(**tok)
        self.prompt_hist = Histogram("sglang:prompt_tokens_histogram", "Histogram of prompt token length.",
                                     TOK_LABELS, buckets=LEN_BUCKETS, registry=r).labels(**tok)
        self.uncached_hist = Histogram("sglang:uncached_prompt_tokens_histogram",
                                       "Histogram of uncached (compute) prompt token length.", TOK_LABELS,
                                       buckets=LEN_BUCKETS, registry=r).labels(**tok)
        self.gen_hist = Histogram("sglang:generation_tokens_histogram", "Histogram of generation token length.",
                                  TOK_LABELS, buckets=LEN_BUCKETS, registry=r).labels(**tok)
        self.itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             TOK_LABELS, buckets=ITL_BUCKETS, registry=r).labels(**tok)
        self.tpot = (
            Histogram("sglang:request_time_per_output_token_seconds",
                      "Histogram of time per output token in seconds.", TOK_LABELS, buckets=TPOT_BUCKETS,
                      registry=r).labels(**tok) if tpot else None
        )

        def g(name: str, doc: str):
            return Gauge(name, doc, SCHED_LABELS, registry=r, multiprocess_mode="mostrecent").labels(**sched)

        self.max_total_num_tokens = g("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.")
        self.page_size = g("sglang:page_size", "KV cache page size in tokens.")
        self.num_pages = g("sglang:num_pages", "Number of KV cache pages.")
        self.context_len = g("sglang:context_len", "Maximum context length.")
        self.startup_gpu_mem = g("sglang:startup_available_gpu_memory_gb", "Available GPU memory in GB at startup.")
        self.num_running = g("sglang:num_running_reqs", "The number of running requests.")
        self.num_queue = g("sglang:num_queue_reqs", "The number of requests in the waiting queue.")
        self.num_grammar_queue = g("sglang:num_grammar_queue_reqs",
                                   "The number of requests in the grammar waiting queue.")
        self.gen_throughput = g("sglang:gen_throughput", "The generation throughput (token/s).")
        self.cache_hit_rate = g("sglang:cache_hit_rate", "The prefix cache hit rate.")
        self.decode_sum_seq_lens = g("sglang:decode_sum_seq_lens", "The sum of all sequence lengths in decode.")
        self.token_usage = g("sglang:token_usage", "The token usage.")
        self.full_token_usage = g("sglang:full_token_usage", "The token usage for full attention layers.")
        self.num_used_tokens = g("sglang:num_used_tokens", "The number of used tokens.")
        self.kv_available = g("sglang:kv_available_tokens", "Number of free token slots in the KV cache pool.")
        self.kv_used = g("sglang:kv_used_tokens", "Number of actively used token slots in the KV cache pool.")
        self.spec_accept_length = g(
            "sglang:spec_accept_length",
            "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).")
        self.spec_accept_rate = g("sglang:spec_accept_rate",
                                  "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).")
        self.spec_num_steps = g("sglang:spec_num_steps", "Currently active speculative_num_steps.")
        self.spec_num_draft_tokens = g(
            "sglang:spec_num_draft_tokens",
            "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).")
        self.utilization = g("sglang:utilization", "The utilization.")
        self.is_cuda_graph = g("sglang:is_cuda_graph", "Whether the batch is using CUDA graph.")
        self.new_token_ratio = g("sglang:new_token_ratio", "The new token ratio.")
        self.fwd_occupancy = g("sglang:fwd_occupancy", "Forward pass GPU occupancy percentage.") \
            if device_timer else None

    def forward_seconds(self, category: str, seconds: float) -> None:
        """Add GPU-busy ``seconds`` to ``sglang:forward_execution_seconds_total{category}``."""
        if seconds > 0:
            self.forward_execution_seconds.labels(category=category, **self._sched).inc(seconds)

    def sched_counter(self, counter: Counter, mode: str):
        """A scheduler counter child for ``mode`` (``realtime_tokens``, ``cuda_graph_passes``)."""
        return counter.labels(mode=mode, **self._sched)

    def http(self, endpoint: str, method: str, status: int) -> None:
        """Count one HTTP request/response."""
        self.http_requests.labels(endpoint=endpoint, method=method).inc()
        self.http_responses.labels(endpoint=endpoint, method=method, status_code=str(status)).inc()

    def render(self) -> bytes:
        """Prometheus text exposition of this server's registry.  With :attr:`replica_ranks`, every
        scheduler sample (``tp_rank="0"``) is followed by the same sample of each of those TP ranks, as
        SGLang's ``--enable-metrics-for-all-schedulers`` exports one series per TP rank of a group
        (``srt/observability/metrics_collector.py``)."""
        text = generate_latest(self.registry)
        if not self.replica_ranks:
            return text
        out = []
        for line in text.split(b"\n"):
            out.append(line)
            if line and not line.startswith(b"#") and b'tp_rank="0"' in line:
                out += [line.replace(b'tp_rank="0"', f'tp_rank="{r}"'.encode()) for r in self.replica_ranks]
        return b"\n".join(out)
