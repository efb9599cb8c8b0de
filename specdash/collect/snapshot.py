"""What the dashboard draws from: frozen, immutable samples of one server — metrics, decode-log windows,
the adaptive tier, requests, log lines, GPUs (:class:`LiveSnapshot`, made by
:meth:`specdash.collect.live.LiveCollector.snapshot`; never Textual here).  Times: ``t`` fields are
:func:`time.monotonic` seconds; ``*_ms`` milliseconds; throughputs output tokens per second."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specdash.collect.stream import RunStats, tpot_s

if TYPE_CHECKING:  # pragma: no cover
    from specdash.collect.exporter import ExporterReading
    from specdash.collect.gpu import GpuSample
    from specdash.collect.proc import ProcSample
    from specdash.collect.tiers import TierStats

#: Tier changes kept for the chart's tier history (the collector keeps at most this many).
TIER_HISTORY = 2000


@dataclass(frozen=True)
class PollIntervals:
    """Seconds between the end of one poll and the start of the next, per source."""

    metrics: float = 1.0
    server_info: float = 5.0
    gpu: float = 1.0
    logs: float = 0.25
    #: dcgm-exporter itself refreshes every 30 s by default (``--collect-interval`` 30000 ms,
    #: NVIDIA/dcgm-exporter ``pkg/cmd/app.go``), nvitop-exporter every 1 s (``--interval``)
    gpu_exporters: float = 2.0


@dataclass(frozen=True)
class MetricsSample:
    """One ``/metrics`` reading and the rates derived from the previous one.

    ``tok_s``: server-wide output tokens/s over the last interval (counter delta, see module
    docstring; None on the first reading and when the counter went down — a restarted
    server); ``tok_s_source``: which counter gave it;
    ``running`` / ``queued``: request gauges; ``accept_length`` / ``accept_rate``: SGLang's
    gauges over its last decode-log window (None without speculation); ``gen_throughput``:
    ``sglang:gen_throughput`` (tok/s, last decode-log window); ``token_usage``: KV pool use
    (0–1).
    """

    t: float
    tok_s: float | None
    tok_s_source: str
    running: float | None
    queued: float | None
    accept_length: float | None
    accept_rate: float | None
    gen_throughput: float | None
    token_usage: float | None


@dataclass(frozen=True)
class DecodeWindow:
    """One ``Decode batch`` log line (SGLang prints one every 40 decode iterations).

    ``accept_length`` / ``accept_rate``: over that window (None without speculation);
    ``gen_tok_s``: the line's ``gen throughput (token/s)``; ``running`` / ``queued``: its
    ``#running-req`` / ``#queue-req``; ``steps``: the step tier the line is attributed to under
    adaptive speculation (the last switch before it; None when unknown or not adaptive);
    ``after_switch``: one of the lines just after a switch that still report the old tier.
    """

    t: float
    running: int | None
    queued: int | None
    accept_length: float | None
    accept_rate: float | None
    gen_tok_s: float | None
    steps: int | None = None
    after_switch: bool = False


@dataclass(frozen=True)
class TierChange:
    """The tier at time ``t`` (monotonic s): ``steps`` / ``draft_tokens``, read from ``source``."""

    t: float
    steps: int
    draft_tokens: int | None
    source: str


@dataclass(frozen=True)
class TierView:
    """The speculative step tier, as the dashboard shows it (``snapshot.tier``).

    ``adaptive``: SGLang runs ``--speculative-adaptive`` (``/server_info`` ``speculative_adaptive``
    after its start-up checks, or switch lines in the log); ``steps`` / ``draft_tokens``: the tier
    running now; ``source``: where that was read — ``"switch line"`` (the launched server's log),
    ``"gauge"`` (``sglang:spec_num_steps``, set at each decode-log tick), ``"server_info"``
    (``internal_states[0]``) or ``"launch"`` (the top-level launch value); ``launch_steps``: the
    launch's ``speculative_num_steps``; ``since``: monotonic s of the last change (None before
    one); ``switches``: switch lines since the run began (launched server only; lifetime before
    the first run); ``history``: every change seen, oldest first (bounded,
    :data:`TIER_HISTORY`); ``per_tier``: the run's :class:`~specdash.collect.tiers.TierStats`
    (empty without the server log); ``log``: a server log is read (launched, not attached).
    """

    adaptive: bool
    steps: int | None
    draft_tokens: int | None
    source: str
    launch_steps: int | None = None
    since: float | None = None
    switches: int = 0
    history: tuple[TierChange, ...] = ()
    per_tier: tuple[TierStats, ...] = ()
    log: bool = False


@dataclass(frozen=True)
class RequestSample:
    """One finished request of the load driver.

    ``tok_s``: completion_tokens / e2e (the request's own output rate); ``ttft_ms``,
    ``tpot_ms`` (SGLang's (e2e − TTFT)/(n − 1)); ``accept_length``: completion_tokens /
    spec_verify_ct for this request (bonus included; None without speculation).
    """

    t: float
    ok: bool
    completion_tokens: int
    tok_s: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    accept_length: float | None


@dataclass(frozen=True)
class LogEntry:
    """One server log line and its class (``decode``, ``prefill``, ``ready``, ``adjustment``,
    ``warning``, ``error``, ``weight_skip`` or ``other``); ``seq`` increases by one per line."""

    seq: int
    kind: str
    text: str


@dataclass(frozen=True)
class GpuView:
    """The GPU panel's data: ``status`` is ``"ok"``, ``"simulated"`` or the reason NVML is
    unavailable (e.g. ``"no NVIDIA driver (NVML Shared Library Not Found)"``);
    ``server_pids``: the PIDs of the server's process tree (to mark its GPU processes);
    ``devices``: the local host's; ``exporters``: one :class:`~specdash.collect.exporter.ExporterReading`
    per configured exporter of another node (empty when none is configured)."""

    status: str
    devices: tuple[GpuSample, ...] = ()
    server_pids: frozenset[int] = frozenset()
    t: float | None = None
    exporters: tuple[ExporterReading, ...] = ()


@dataclass(frozen=True)
class GpuPoint:
    """One device at one moment, for the GPU history charts: ``device`` (``GPU 0``, ``node:GPU 1``),
    ``t`` on the collector's clock, memory used in percent of the device's, utilisation %, power W and
    temperature °C (None when not read)."""

    t: float
    device: str
    memory_pct: float | None
    utilization_pct: float | None
    power_w: float | None
    temperature_c: float | None


GPU_HISTORY_S = 120.0
"""Seconds of GPU readings the history keeps (the charts' window)."""


def gpu_points(view: GpuView, t: float) -> list[GpuPoint]:
    """The history points of one GPU reading (local devices and every exporter's)."""
    devs = list(view.devices) + [d for r in view.exporters for d in r.devices]
    return [GpuPoint(t, f"{d.node + ':' if d.node else ''}GPU {d.index}",
                     d.memory_pct if d.memory_total_mib else None, d.utilization_pct, d.power_w, d.temperature_c)
            for d in devs]


@dataclass(frozen=True)
class LiveSnapshot:
    """An immutable view of everything collected so far (what a UI draws).

    ``version`` increases whenever new data arrived, so a UI can skip redrawing an
    unchanged snapshot.  ``run`` is :meth:`RunStats.summary` of the current run (run-scoped
    truth: only this run's requests) with ``itl_ms`` over the newest :data:`ITL_KEEP` gaps;
    ``run_server_accept_length`` is Δgeneration_tokens / Δspec_verify_calls since the run
    began (SGLang's tokenizer counters).  ``errors`` maps a source name to its last poll error (cleared on
    success); ``stale`` lists sources whose last success is older than three intervals.
    """

    version: int
    taken_at: float
    url: str | None
    metrics: tuple[MetricsSample, ...]
    decode: tuple[DecodeWindow, ...]
    requests: tuple[RequestSample, ...]
    log: tuple[LogEntry, ...]
    log_counts: dict[str, int]
    gpu: GpuView
    procs: tuple[ProcSample, ...]
    server_info: dict | None
    run: dict
    run_label: str
    run_started: float | None
    run_server_accept_length: float | None
    errors: dict[str, str]
    stale: frozenset[str]
    simulated: bool
    metrics_enabled: bool | None
    tier: TierView | None = None
    #: the last :data:`GPU_HISTORY_S` seconds of GPU readings, oldest first
    gpu_history: tuple[GpuPoint, ...] = ()

    @property
    def latest_metrics(self) -> MetricsSample | None:
        """The newest ``/metrics`` sample, if any."""
        return self.metrics[-1] if self.metrics else None

    @property
    def latest_decode(self) -> DecodeWindow | None:
        """The newest decode-log window, if any."""
        return self.decode[-1] if self.decode else None


def _empty_run() -> dict:
    return RunStats().summary()


def empty_snapshot(url: str | None = None) -> LiveSnapshot:
    """A snapshot with nothing collected yet (what a UI shows before the first poll)."""
    return LiveSnapshot(
        version=0, taken_at=time.monotonic(), url=url, metrics=(), decode=(), requests=(), log=(),
        log_counts={}, gpu=GpuView(status="waiting for the first reading"), procs=(), server_info=None,
        run=_empty_run(), run_label="", run_started=None, run_server_accept_length=None, errors={},
        stale=frozenset(), simulated=False, metrics_enabled=None,
    )


def slim_record(rec: dict) -> dict:
    """A record without its bulky parts (``itl_s``, generated ``text``): what the collector
    keeps in memory for run statistics while the full record goes to the run directory."""
    return {k: v for k, v in rec.items() if k not in ("itl_s", "text", "output_text")}


def request_sample(rec: dict, t: float) -> RequestSample:
    """:class:`RequestSample` of one record (see :mod:`specdash.collect.stream` for fields)."""
    n = int(rec.get("completion_tokens") or 0)
    e2e = rec.get("e2e_s")
    ttft = rec.get("ttft_s")
    tp = tpot_s(rec)
    vct = (rec.get("spec") or {}).get("verify_ct")
    return RequestSample(
        t=t,
        ok=bool(rec.get("ok")),
        completion_tokens=n,
        tok_s=(n / e2e) if e2e else None,
        ttft_ms=ttft * 1000.0 if ttft is not None else None,
        tpot_ms=tp * 1000.0 if tp is not None else None,
        accept_length=(n / vct) if vct else None,
    )
