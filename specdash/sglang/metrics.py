"""SGLang's Prometheus metrics: the names specdash uses, parsing, and run-scoped deltas.

Names, kinds and meanings come from SGLang 0.5.23's
``python/sglang/srt/observability/metrics_collector.py`` (tokenizer and scheduler
collectors; 0.5.10 declared the scheduler ones in ``scheduler_metrics_mixin.py``) and
were checked against ``/metrics`` scrapes of a real 0.5.14 server.

:data:`METRICS` is the one table of them: specdash's name for a quantity (its key) →
the :class:`MetricDef` with SGLang's exposition name.  Every reader — the bench's
run-scoped deltas, the dashboard's live collector — looks metrics up by key
(:meth:`MetricsSnapshot.get`, :func:`counter_delta`, … accept keys), so a renamed
metric is fixed here once.  None of the names in the table changed between 0.5.10 and
0.5.23.  To read another metric, add one entry (a labelled family such as
``sglang:forward_execution_seconds_total{category=…}`` is one entry with its label in
``labels``; readers pick the series with keyword label filters).

Parsing uses ``prometheus_client.parser`` (no hand parsing).  That parser strips
``_total`` from *family* names of counters; sample names keep it.  A
:class:`MetricsSnapshot` is indexed by sample name, and lookups accept either form.

Run-scoped truth: take a snapshot before and after a run and use
:func:`counter_delta`, :func:`server_accept_length` and :func:`histogram_delta`, never
the lifetime values.

Ranks: by default only the scheduler of attention-TP rank 0 (and CP rank 0) of each DP group exports
scheduler metrics; with ``--enable-metrics-for-all-schedulers`` every TP rank does (SGLang 0.5.23
``srt/observability/metrics_collector.py``: ``is_stats_logging_rank or enable_metrics_for_all_schedulers``),
and the TP ranks of one group count the same batches.  Every lookup here
therefore reads **one TP replica per group**: of the series that differ only in ``tp_rank`` /
``moe_ep_rank``, the lowest ``tp_rank``'s (:data:`REPLICA_LABELS`) — DP ranks (``dp_rank``) and PP
stages (``pp_rank``) stay apart and sum as before.  :meth:`MetricsSnapshot.by_rank` and
:func:`rank_deltas` read every rank's own series (one slow rank visible).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "METRICS",
    "RANK_LABELS",
    "REPLICA_LABELS",
    "Histogram",
    "MetricDef",
    "MetricsFormatError",
    "MetricsSnapshot",
    "counter_delta",
    "counter_deltas_by",
    "counter_rate",
    "histogram_delta",
    "parse_metrics",
    "rank_deltas",
    "server_accept_length",
]


@dataclass(frozen=True)
class MetricDef:
    """One SGLang metric.

    ``name`` is the exposition name of the samples (counters end in ``_total``;
    histograms have ``_bucket``/``_sum``/``_count`` samples under it); ``labels`` are
    the labels that split it beyond the common ``model_name``/``engine_type`` (and, for
    scheduler metrics, ``tp_rank``/``pp_rank``/``moe_ep_rank``/``dp_rank``).
    """

    name: str
    kind: str  # "counter" | "gauge" | "histogram"
    unit: str
    help: str
    labels: tuple[str, ...] = ()


def _m(name: str, kind: str, unit: str, help: str, labels: tuple[str, ...] = ()) -> MetricDef:
    return MetricDef(name, kind, unit, help, labels)


#: The SGLang metrics specdash reads: specdash's key → SGLang's metric (``metrics_collector.py``).
METRICS: dict[str, MetricDef] = {
    # Tokenizer counters, per finished request (health checks excluded).
    "generation_tokens": _m("sglang:generation_tokens_total", "counter", "tokens",
                            "Number of generation tokens processed.", ("is_streaming",)),
    "prompt_tokens": _m("sglang:prompt_tokens_total", "counter", "tokens",
                        "Number of prefill tokens processed.", ("is_streaming",)),
    "spec_verify_calls": _m("sglang:spec_verify_calls_total", "counter", "verify rounds",
                            "Number of speculative decoding verification calls (sum of spec_verify_ct "
                            "over finished requests; absent without speculation)."),
    "num_requests": _m("sglang:num_requests_total", "counter", "requests",
                       "Number of requests processed.", ("is_streaming",)),
    "num_aborted_requests": _m("sglang:num_aborted_requests_total", "counter", "requests",
                               "Number of requests aborted."),
    "cached_tokens": _m("sglang:cached_tokens_total", "counter", "tokens",
                        "Number of cached prompt tokens.", ("cache_source",)),
    # Scheduler counters.
    "realtime_tokens": _m("sglang:realtime_tokens_total", "counter", "tokens",
                          "Tokens processed, updated per iteration; with speculation decode tokens "
                          "are the accepted tokens.", ("mode",)),
    # Scheduler gauges (updated per prefill batch and every decode_log_interval iterations).
    "num_running_reqs": _m("sglang:num_running_reqs", "gauge", "requests", "The number of running requests."),
    "num_queue_reqs": _m("sglang:num_queue_reqs", "gauge", "requests",
                         "The number of requests in the waiting queue."),
    "gen_throughput": _m("sglang:gen_throughput", "gauge", "tokens/s",
                         "The generation throughput over the last decode-log window."),
    "token_usage": _m("sglang:token_usage", "gauge", "fraction", "The token usage of the KV pool."),
    "cache_hit_rate": _m("sglang:cache_hit_rate", "gauge", "fraction", "The prefix cache hit rate."),
    "spec_accept_length": _m("sglang:spec_accept_length", "gauge", "tokens/round",
                             "Accepted drafts + bonus token per forward, last decode-log window "
                             "(0 without speculation)."),
    "spec_accept_rate": _m("sglang:spec_accept_rate", "gauge", "fraction",
                           "Accepted drafts / proposed drafts, last decode-log window (0 without speculation)."),
    "spec_num_steps": _m("sglang:spec_num_steps", "gauge", "steps", "Active speculative_num_steps."),
    "spec_num_draft_tokens": _m("sglang:spec_num_draft_tokens", "gauge", "tokens",
                                "Active speculative_num_draft_tokens."),
    "is_cuda_graph": _m("sglang:is_cuda_graph", "gauge", "bool", "Whether the last batch ran a CUDA graph."),
    "max_total_num_tokens": _m("sglang:max_total_num_tokens", "gauge", "tokens", "KV pool size."),
    # Tokenizer histograms (seconds).
    "ttft": _m("sglang:time_to_first_token_seconds", "histogram", "s", "Time to first token.",
               ("is_streaming",)),
    "itl": _m("sglang:inter_token_latency_seconds", "histogram", "s",
              "Inter-token latency; an output's interval is divided evenly over its tokens."),
    "tpot": _m("sglang:request_time_per_output_token_seconds", "histogram", "s",
               "Time per output token = (finish − first token) / (completion_tokens − 1).",
               ("is_streaming",)),
    "e2e_latency": _m("sglang:e2e_request_latency_seconds", "histogram", "s", "End-to-end request latency.",
                      ("is_streaming",)),
    "queue_time": _m("sglang:queue_time_seconds", "histogram", "s", "Time a request waited in the queue."),
    # Scheduler counter of the device timer (SGLANG_ENABLE_METRICS_DEVICE_TIMER=1 with --enable-metrics):
    # GPU time of each forward pass by category (extend, decode, eagle_draft, target_verify,
    # eagle_draft_extend, …), CUDA events around the pass (``srt/utils/device_timer.py``).
    "forward_execution_seconds": _m("sglang:forward_execution_seconds_total", "counter", "s",
                                    "GPU seconds of forward passes by category (device timer only).",
                                    ("category",)),
}


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram, summed over the label sets asked for.

    ``buckets`` are ``(upper bound, cumulative count)`` pairs in ascending order, the
    last bound ``inf``; ``sum`` is in the metric's unit (seconds for latencies).
    """

    buckets: tuple[tuple[float, float], ...]
    sum: float
    count: float

    @property
    def mean(self) -> float | None:
        """``sum / count``, None when empty."""
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """Prometheus ``histogram_quantile``: linear interpolation inside the bucket that
        holds rank ``q × count``; the lower edge of the first bucket is 0, and a rank in
        the ``+Inf`` bucket returns the largest finite bound.  None when empty.

        Raises:
            ValueError: ``q`` outside [0, 1].
        """
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile must be in [0, 1], got {q}")
        if not self.buckets or self.count <= 0:
            return None
        rank = q * self.buckets[-1][1]
        lower, below = 0.0, 0.0
        for le, cum in self.buckets:
            if cum >= rank:
                if math.isinf(le):
                    return lower
                if cum == below:
                    return le
                return lower + (le - lower) * (rank - below) / (cum - below)
            lower, below = le, cum
        return lower


#: Labels that tell the TP replicas of one scheduler apart (see the module docstring).
REPLICA_LABELS = ("tp_rank", "moe_ep_rank")
#: Labels that name a scheduler rank (``by_rank``'s keys).
RANK_LABELS = ("dp_rank", "pp_rank", "tp_rank")


def _rank_no(v: str | None) -> int:
    try:
        return int(v) if v is not None else 0
    except ValueError:
        return 1 << 30


def _one_replica(samples: list[tuple[dict[str, str], float]]) -> list[tuple[dict[str, str], float]]:
    """``samples`` without the TP replicas: per set of labels other than :data:`REPLICA_LABELS`, only
    the series of the lowest ``tp_rank`` (exposition order kept)."""
    if len(samples) < 2 or not any("tp_rank" in lab for lab, _ in samples):
        return samples
    low: dict[tuple, int] = {}
    keys = []
    for lab, _ in samples:
        key = tuple(sorted((k, x) for k, x in lab.items() if k not in REPLICA_LABELS))
        keys.append(key)
        r = _rank_no(lab.get("tp_rank"))
        if key not in low or r < low[key]:
            low[key] = r
    if len(low) == len(samples):
        return samples
    return [sv for sv, key in zip(samples, keys) if _rank_no(sv[0].get("tp_rank")) == low[key]]


@dataclass
class MetricsSnapshot:
    """One scrape of ``/metrics``, indexed by sample name.

    ``samples[name]`` is a list of ``(labels, value)`` in exposition order; ``types``
    maps sample names to their family's type (``counter``, ``gauge``, ``histogram``, …);
    ``t`` is when it was taken (``time.monotonic()`` unless given), for rates.

    Names may be :data:`METRICS` keys (``"ttft"``), or exposition names with or without
    the ``sglang:`` prefix and, for counters, with or without ``_total``.
    """

    samples: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    t: float = 0.0

    def _resolve(self, name: str) -> str | None:
        if name in METRICS:
            name = METRICS[name].name
        for cand in (name, "sglang:" + name):
            if cand in self.samples:
                return cand
            if cand + "_total" in self.samples:
                return cand + "_total"
            if cand.endswith("_total") and cand[:-6] in self.samples:
                return cand[:-6]
        return None

    def present(self, name: str) -> bool:
        """True when the scrape has at least one sample of ``name``."""
        return self._resolve(name) is not None

    def values(self, name: str, *, all_ranks: bool = False, **labels: str) -> list[tuple[dict[str, str], float]]:
        """The ``(labels, value)`` samples of ``name`` whose labels include ``labels``: one TP replica per
        scheduler group (module docstring), or with ``all_ranks`` every rank's series."""
        key = self._resolve(name)
        if key is None:
            return []
        want = {k: str(v) for k, v in labels.items()}
        found = [(lab, v) for lab, v in self.samples[key] if all(lab.get(k) == x for k, x in want.items())]
        return found if all_ranks or "tp_rank" in want else _one_replica(found)

    def by_rank(self, name: str, **label_filter: str) -> dict[tuple[str, str, str], float]:
        """``{(dp_rank, pp_rank, tp_rank): sum}`` of the samples of ``name`` matching ``label_filter``,
        every rank's own series (``""`` for a label a series does not carry); empty when absent."""
        out: dict[tuple[str, str, str], float] = {}
        for lab, v in self.values(name, all_ranks=True, **label_filter):
            k = tuple(lab.get(x, "") for x in RANK_LABELS)
            out[k] = out.get(k, 0.0) + v
        return out

    def get(self, name: str, **labels: str) -> float | None:
        """The value of the first sample of ``name`` whose labels include ``labels``
        (exposition order), or None.  Use :meth:`total` to sum over label sets, e.g.
        over ``is_streaming`` or DP ranks."""
        found = self.values(name, **labels)
        return found[0][1] if found else None

    def total(self, name: str, **label_filter: str) -> float | None:
        """Sum of the samples of ``name`` matching ``label_filter``; None when none match."""
        found = self.values(name, **label_filter)
        return sum(v for _, v in found) if found else None

    def histogram(self, name: str, **label_filter: str) -> Histogram | None:
        """The histogram family ``name`` (e.g. ``"sglang:time_to_first_token_seconds"``),
        summed over the label sets matching ``label_filter``; None when absent."""
        if name in METRICS:
            name = METRICS[name].name
        base = name if name.startswith("sglang:") or name + "_count" in self.samples else "sglang:" + name
        counts = self.values(base + "_count", **label_filter)
        if not counts:
            return None
        by_le: dict[float, float] = {}
        for lab, v in self.values(base + "_bucket", **label_filter):
            le = float(lab.get("le", "inf"))
            by_le[le] = by_le.get(le, 0.0) + v
        return Histogram(
            buckets=tuple(sorted(by_le.items())),
            sum=sum(v for _, v in self.values(base + "_sum", **label_filter)),
            count=sum(v for _, v in counts),
        )

    def names(self) -> list[str]:
        """All sample names in the scrape."""
        return list(self.samples)


def parse_metrics(text: str, t: float | None = None) -> MetricsSnapshot:
    """Parse Prometheus text exposition (``GET /metrics``) into a snapshot.

    Args:
        text: the response body.
        t: the scrape time (s, any monotonic clock); defaults to ``time.monotonic()``.

    Raises:
        MetricsFormatError: the text is not valid exposition format (prometheus_client's reason and
            the first line, in the message).
    """
    snap = MetricsSnapshot(t=time.monotonic() if t is None else t)
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                snap.samples.setdefault(s.name, []).append((s.labels, float(s.value)))
                snap.types.setdefault(s.name, fam.type)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        first = next((ln for ln in str(text).splitlines() if ln.strip()), "")[:80]
        raise MetricsFormatError(
            f"/metrics is not Prometheus text exposition ({type(exc).__name__}: {exc}; first line {first!r}): "
            "is this an SGLang server started with --enable-metrics?") from None
    return snap


class MetricsFormatError(ValueError):
    """``GET /metrics`` answered with text prometheus_client cannot parse (a proxy's page, another
    server, a truncated body)."""


def counter_delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str, **label_filter: str) -> float | None:
    """Δ of a counter between two scrapes, summed over matching label sets.

    A counter absent from ``before`` but present in ``after`` counts from 0: Prometheus
    clients create a labelled series at its first increment (SGLang's
    ``generation_tokens_total{is_streaming=…}`` appears with the first finished request).
    None when the counter is absent from ``after``, or when it went down (the server
    restarted and its counters reset, so the difference means nothing).
    """
    a, b = before.total(name, **label_filter), after.total(name, **label_filter)
    if b is None or (a is not None and b < a):
        return None
    return b - (a or 0.0)


def counter_deltas_by(before: MetricsSnapshot, after: MetricsSnapshot, name: str, label: str,
                      **label_filter: str) -> dict[str, float] | None:
    """Δ of a labelled counter between two scrapes, one entry per value of ``label`` (summed over
    the other labels), e.g. the device timer's seconds by ``category``.

    A series absent from ``before`` counts from 0 (see :func:`counter_delta`).  None when the
    counter is absent from ``after``, or when any series went down (the server restarted: the
    deltas mean nothing then).
    """
    found = after.values(name, **label_filter)
    if not found:
        return None
    out: dict[str, float] = {}
    for key in dict.fromkeys(lab.get(label) for lab, _ in found if lab.get(label) is not None):
        d = counter_delta(before, after, name, **{**label_filter, label: key})
        if d is None:
            return None
        out[key] = d
    return out


def rank_deltas(before: MetricsSnapshot, after: MetricsSnapshot, name: str,
                **label_filter: str) -> dict[tuple[str, str, str], float] | None:
    """Δ of a counter per scheduler rank (:meth:`MetricsSnapshot.by_rank` keys), summed over its other
    labels; a rank absent before counts from 0.  None when the counter is absent from ``after`` or a
    rank's counter went down (a restart)."""
    a, b = before.by_rank(name, **label_filter), after.by_rank(name, **label_filter)
    if not b:
        return None
    out = {}
    for k, v in b.items():
        d = v - a.get(k, 0.0)
        if d < 0:
            return None
        out[k] = d
    return out


def counter_rate(before: MetricsSnapshot, after: MetricsSnapshot, name: str, **label_filter: str) -> float | None:
    """Δcounter / Δt (per second) between two scrapes; None as for :func:`counter_delta`
    or when no time passed.  E.g. live decode throughput from
    ``sglang:realtime_tokens_total{mode="decode"}`` (``counter_rate(a, b, "realtime_tokens",
    mode="decode")``)."""
    d = counter_delta(before, after, name, **label_filter)
    dt = after.t - before.t
    if d is None or dt <= 0:
        return None
    return d / dt


def server_accept_length(before: MetricsSnapshot, after: MetricsSnapshot) -> float | None:
    """Run-scoped accept length from the server's counters (a run's ``server_accept_length``):
    Δ``generation_tokens_total`` / Δ``spec_verify_calls_total``, bonus token included,
    finished requests only (the tokenizer collector counts a request when it finishes;
    health checks are not counted).

    None without speculation (``spec_verify_calls_total`` is absent then, as in the
    golden ``baseline_nospec`` run), or when no verify call happened in between.
    """
    verify = counter_delta(before, after, METRICS["spec_verify_calls"].name)
    gen = counter_delta(before, after, METRICS["generation_tokens"].name)
    if verify is None or gen is None or verify <= 0:
        return None
    return gen / verify


def histogram_delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str,
                    **label_filter: str) -> Histogram | None:
    """The observations a histogram gained between two scrapes (bucket-wise Δ), e.g. the
    server-side TTFT of one run.  None when absent from either scrape, when the bucket
    bounds differ, or when counts went down (server restart)."""
    a, b = before.histogram(name, **label_filter), after.histogram(name, **label_filter)
    if a is None or b is None or [le for le, _ in a.buckets] != [le for le, _ in b.buckets]:
        return None
    if b.count < a.count:
        return None
    return Histogram(
        buckets=tuple((le, cb - ca) for (le, ca), (_, cb) in zip(a.buckets, b.buckets, strict=True)),
        sum=b.sum - a.sum,
        count=b.count - a.count,
    )
