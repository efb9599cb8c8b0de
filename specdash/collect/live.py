"""Live collection for the dashboard — asyncio poll loops into bounded ring buffers, no UI.

:class:`LiveCollector` polls one server (launched or attached) and keeps the recent past
as typed, immutable samples; :meth:`LiveCollector.snapshot` returns a frozen
:class:`~specdash.collect.snapshot.LiveSnapshot` that a UI draws on its own clock (collection rate and
redraw rate are independent; this module never imports Textual).

Sources and cadence (each loop schedules its next poll when the last one has finished, so
polls of one source never overlap — dolphie's rule; a slow server slows the loop down
instead of stacking requests):

=============  ========  ==================================================================
source         interval  what it gives
=============  ========  ==================================================================
``/metrics``   1 s       server-wide output tok/s = Δ``sglang:realtime_tokens_total{mode=
                         "decode"}`` / Δt (falls back to Δ``sglang:generation_tokens_total``,
                         which counts finished requests only); ``num_running_reqs`` and
                         ``num_queue_reqs`` gauges; ``spec_accept_length`` /
                         ``spec_accept_rate`` gauges (last decode-log window); the window
                         accept length Δ``generation_tokens_total`` / Δ``spec_verify_calls_total``
                         since the current run started (``metrics_collector.py``).
``/server_info`` 5 s     resolved server args (effective speculative flags), version,
                         ``simulated`` flag, ``internal_states[0].avg_spec_accept_length``.
GPU            1 s       NVML (:mod:`specdash.collect.gpu`) or, for a simulated server, its
                         ``/sim/gpus`` JSON; plus the server's process tree (psutil).
GPU exporters  2 s       other nodes' dcgm-exporter / nvitop-exporter ``/metrics``
                         (:mod:`specdash.collect.exporter`), when configured: one loop per
                         exporter, each read with a 3 s total deadline and a size cap, so
                         an exporter that is down or slow never delays the local readings
                         or another exporter's.
server log     0.25 s    new lines of the launched server's ``LogRing``: classified
                         (decode / prefill / warning / error / adjustment / weight skip),
                         ``Decode batch`` lines parsed into accept len / rate / gen throughput.
records        pushed    finished requests from the load driver (:meth:`add_record`) →
                         :class:`~specdash.collect.stream.RunStats` (run-scoped TTFT, TPOT,
                         accept length / rate / histogram with SGLang's definitions).
=============  ========  ==================================================================

Adaptive speculation (``--speculative-adaptive``): the step tier the server runs now is
:class:`~specdash.collect.snapshot.TierView` (``snapshot.tier``).  For a launched server it follows the ``Switch adaptive
runtime state: steps a -> b, draft_tokens c -> d`` lines of its log
(``srt/speculative/eagle_worker_v2.py``), and a :class:`~specdash.collect.tiers.TierTracker` fed
with every log line gives the run's accept length, accept rate and decode tok/s per tier (the
decode lines just after a switch, which still report the old tier, left out).  For an attached
server (no log) it comes from the ``sglang:spec_num_steps`` / ``sglang:spec_num_draft_tokens``
gauges and ``/server_info`` ``internal_states[0]`` (the top-level ``speculative_num_steps``
keeps the launch value).

Definitions (SGLang's; README "Definitions"): *accept length* τ counts the bonus token (Σ completion_tokens /
Σ verify rounds); *accept rate* excludes it (accepted drafts ÷ verify rounds × (draft
tokens − 1)).  Times: ``t`` fields are :func:`time.monotonic` seconds; ``*_ms`` are
milliseconds; throughputs are output tokens per second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from specdash.collect.columns import distribution_ms
from specdash.collect.exporter import ExporterReading, ExporterTarget, read_exporter, read_exporters
from specdash.collect.gpu import gpus_from_sim, nvml_status, read_gpus
from specdash.collect.proc import ProcSample, ProcTreeSampler
from specdash.collect.snapshot import (
    GPU_HISTORY_S,
    TIER_HISTORY,
    DecodeWindow,
    GpuPoint,
    GpuView,
    LiveSnapshot,
    LogEntry,
    MetricsSample,
    PollIntervals,
    RequestSample,
    TierChange,
    TierView,
    empty_snapshot,
    gpu_points,
    request_sample,
    slim_record,
)
from specdash.collect.stream import RunStats
from specdash.collect.tiers import DEFAULT_DECODE_LOG_INTERVAL, TierStats, TierTracker
from specdash.sglang.effective import SpecSettings

if TYPE_CHECKING:  # pragma: no cover
    from specdash.sglang.metrics import MetricsSnapshot

#: Samples kept per series (10 min at 1 Hz for metrics; decode-log windows; requests).
HISTORY = 600
#: Log lines kept for the tail view.
LOG_TAIL = 2000
#: ITL values kept for the run's ITL distribution (a bounded reservoir: the newest ones).
ITL_KEEP = 20000
#: Decode lines one tier tracker holds before the collector folds its figures away and starts a new
#: one (bounded memory for hours at ``--decode-log-interval 1``; the run's per-tier figures are kept).
TIER_TRACKER_LINES = 50_000


async def _get_json(client: Any, path: str) -> dict:
    """GET ``path`` as JSON through the client (``get_json`` when it has one; otherwise its
    request helper — ``/sim/gpus`` is the simulator's own endpoint)."""
    fn = getattr(client, "get_json", None)
    if fn is not None:
        return await fn(path)
    r = await client._request("GET", path)
    r.raise_for_status()
    return r.json()


class LiveCollector:
    """Polls one server into ring buffers; :meth:`snapshot` gives the UI an immutable view.

    Args:
        client: an ``SGLangClient`` (``metrics_text()``, ``server_info()``, ``get_json(path)``
            for the simulator's ``/sim/gpus``).
        server: the ``ServerProcess`` specdash launched (log lines, process tree), or None
            when attached to a running server (``--url``).
        gpu_source: ``"auto"`` (``/sim/gpus`` when ``/server_info`` says ``simulated``,
            NVML otherwise), ``"nvml"``, ``"sim"`` or ``"off"`` — the local host.
        gpu_exporters: other nodes' Prometheus GPU exporters
            (:class:`~specdash.collect.exporter.ExporterTarget`: node name, ``…/metrics`` URL).
        intervals: poll intervals (:class:`PollIntervals`).
        history: samples kept per series.
        clock: monotonic clock (tests may inject one).

    Use ``await start()`` inside a running event loop and ``await stop()`` to end the
    loops; both are idempotent.  Collection does not need any UI.
    """

    def __init__(
        self,
        client: Any,
        *,
        server: Any = None,
        gpu_source: str = "auto",
        gpu_exporters: tuple[ExporterTarget, ...] | list[ExporterTarget] = (),
        intervals: PollIntervals | None = None,
        history: int = HISTORY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.server = server
        self.gpu_source = gpu_source
        self.gpu_exporters = tuple(gpu_exporters)
        self._exporter_readings: tuple[ExporterReading, ...] = tuple(
            ExporterReading(t, "waiting for the first reading") for t in self.gpu_exporters)
        self.intervals = intervals or PollIntervals()
        self.clock = clock
        self._metrics: deque[MetricsSample] = deque(maxlen=history)
        self._decode: deque[DecodeWindow] = deque(maxlen=history)
        self._requests: deque[RequestSample] = deque(maxlen=history)
        self._log: deque[LogEntry] = deque(maxlen=LOG_TAIL)
        self._log_counts: dict[str, int] = {}
        self._log_seen = 0
        self._itl: deque[float] = deque(maxlen=ITL_KEEP)
        self._gpu = GpuView(status="waiting for the first reading")
        self._procs: tuple[ProcSample, ...] = ()
        self._proc_sampler: ProcTreeSampler | None = None
        self._info: dict | None = None
        self._run_metrics0: MetricsSnapshot | None = None
        self._last_metrics: MetricsSnapshot | None = None  # the latest scrape (the previous one during a poll)
        self._metrics_enabled: bool | None = None
        self._stats = RunStats(keep_records=False, bounded=True)  # sketches: flat memory and cost for hours
        self._run_label = ""
        self._run_started: float | None = None
        self._run_cache: dict | None = None
        self._errors: dict[str, str] = {}
        self._last_ok: dict[str, float] = {}
        self._version = 0
        self._tasks: list[asyncio.Task] = []
        self._closing = False
        self.polls: dict[str, int] = {}
        self._tracker = TierTracker()
        self._tier: TierChange | None = None
        self._tier_hist: deque[TierChange] = deque(maxlen=TIER_HISTORY)
        self._gpu_hist: deque[GpuPoint] = deque(maxlen=4096)
        self._adaptive: bool | None = None  # None: not known yet
        self._launch_steps: int | None = None
        self._tier_cache: tuple[tuple[int, int], tuple[TierStats, ...]] | None = None
        self._tier_folded: list[TierStats] = []  # the run's figures of trackers rolled over
        self._tier_switches_folded = 0

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the poll loops run."""
        return any(not t.done() for t in self._tasks)

    async def start(self) -> None:
        """Start the poll loops (one task per source) in the running event loop."""
        if self.running:
            return
        self._closing = False
        iv = self.intervals
        loops = [("metrics", iv.metrics, self.poll_metrics), ("server_info", iv.server_info, self.poll_server_info),
                 ("gpu", iv.gpu, self.poll_gpu)]
        for i, t in enumerate(self.gpu_exporters):  # one loop each: a slow exporter never delays another
            loops.append((f"gpu_exporter:{t.node}", iv.gpu_exporters, partial(self.poll_gpu_exporter, i)))
        if self.server is not None:
            loops.append(("logs", iv.logs, self.poll_logs))
        self._tasks = [asyncio.create_task(self._loop(n, i, fn), name=f"specdash-poll-{n}") for n, i, fn in loops]

    async def stop(self) -> None:
        """Cancel the poll loops and wait for them to end."""
        self._closing = True
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.server is not None:
            with contextlib.suppress(Exception):
                self.poll_logs_sync()

    async def _loop(self, name: str, interval: float, fn: Callable) -> None:
        """Poll ``fn`` forever; the next poll is scheduled only after this one finished."""
        while not self._closing:
            t0 = self.clock()
            try:
                await fn()
                self._errors.pop(name, None)
                self._last_ok[name] = self.clock()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failing source must not stop the others
                msg = f"{type(exc).__name__}: {exc}".strip()
                if self._errors.get(name) != msg:
                    self._errors[name] = msg
                    self._version += 1
            self.polls[name] = self.polls.get(name, 0) + 1
            elapsed = self.clock() - t0
            await asyncio.sleep(max(0.1 * interval, interval - elapsed))

    # -- run scope ------------------------------------------------------------------------------
    def new_run(self, label: str = "") -> None:
        """Start a new run scope: run statistics restart from zero and the run's ``/metrics``
        counters are measured from the latest reading (run-scoped, never lifetime averages)."""
        self._stats = RunStats(keep_records=False, bounded=True)  # sketches: flat memory and cost for hours
        self._itl.clear()
        self._requests.clear()
        self._run_cache = None
        self._run_label = label
        self._run_started = self.clock()
        self._run_metrics0 = self._last_metrics
        cur = self._tier
        self._tracker = TierTracker(cur.steps if cur else None, cur.draft_tokens if cur else None,
                                    decode_log_interval=self._tracker.interval)
        self._tier_cache = None
        self._tier_folded, self._tier_switches_folded = [], 0
        self._version += 1

    def add_record(self, rec: dict) -> None:
        """Fold one finished request record (``GenerateResult.to_json()`` + runner fields)."""
        self._stats.add(slim_record(rec))
        if rec.get("ok"):
            self._itl.extend(rec.get("itl_s") or ())
        self._requests.append(request_sample(rec, self.clock()))
        self._run_cache = None
        self._version += 1

    @property
    def records(self) -> list[dict]:
        """What post-launch verification reads of the current run: pooled stand-ins for its records
        (:meth:`~specdash.collect.stream.RunStats.verify_records`; the records themselves are folded
        into running figures, not kept, so an hours-long run stays flat in memory)."""
        return self._stats.verify_records()

    def run_summary(self) -> dict:
        """Run-scoped summary of the current run (cached until a record arrives)."""
        if self._run_cache is None:
            steps, draft = SpecSettings.from_effective(self._info).depth()
            s = self._stats.summary(steps=steps, draft_tokens=draft)
            s["itl_ms"] = distribution_ms(list(self._itl)) if self._itl else None
            self._run_cache = s
        return self._run_cache

    # -- polls ----------------------------------------------------------------------------------
    async def poll_metrics(self) -> None:
        """One ``/metrics`` reading → :class:`MetricsSample` (see module docstring)."""
        from specdash.sglang.metrics import counter_rate, parse_metrics

        text = await self.client.metrics_text()
        now = self.clock()
        if text is None:
            self._metrics_enabled = False
            raise RuntimeError("/metrics is not served (start the server with --enable-metrics)")
        self._metrics_enabled = True
        snap = parse_metrics(text, t=now)
        tok_s, source = None, "decode tokens"
        prev = self._last_metrics
        if prev is not None:
            if snap.total("realtime_tokens", mode="decode") is not None and \
                    prev.total("realtime_tokens", mode="decode") is not None:
                tok_s = counter_rate(prev, snap, "realtime_tokens", mode="decode")
            else:
                tok_s, source = counter_rate(prev, snap, "generation_tokens"), "finished requests"
        spec_on = bool(snap.get("spec_num_draft_tokens") or snap.get("spec_accept_length"))
        g_steps, g_draft = snap.get("spec_num_steps"), snap.get("spec_num_draft_tokens")
        if g_steps is not None and g_draft:  # both 0 before the first decode-log tick: not set yet
            self._observe_tier(int(g_steps), int(g_draft) if g_draft is not None else None, "gauge", now)
        self._metrics.append(MetricsSample(
            t=now,
            tok_s=tok_s,
            tok_s_source=source,
            running=snap.get("num_running_reqs"),
            queued=snap.get("num_queue_reqs"),
            accept_length=snap.get("spec_accept_length") if spec_on else None,
            accept_rate=snap.get("spec_accept_rate") if spec_on else None,
            gen_throughput=snap.get("gen_throughput"),
            token_usage=snap.get("token_usage"),
        ))
        self._last_metrics = snap
        if self._run_started is not None and self._run_metrics0 is None:
            self._run_metrics0 = snap
        self._version += 1

    def _run_server_accept_length(self) -> float | None:
        from specdash.sglang.metrics import server_accept_length

        last, first = self._last_metrics, self._run_metrics0
        if last is None or first is None or last is first:
            return None
        return server_accept_length(first, last)

    async def poll_server_info(self) -> None:
        """One ``/server_info`` reading (resolved args, version, ``simulated``)."""
        info = await self.client.server_info()
        if info is not None and info != self._info:
            self._info = info
            self._run_cache = None  # accept_by_position's depth follows the effective settings
            self._read_tier_state(info)
            self._version += 1

    # -- tiers ----------------------------------------------------------------------------------
    def _observe_tier(self, steps: int, draft: int | None, source: str, t: float) -> None:
        """Record the tier read from ``source`` at ``t``.  Once a switch line was read (launched
        server), the log decides: gauges and ``/server_info`` only fill in before it."""
        cur = self._tier
        if cur is not None and cur.source == "switch line" and source != "switch line":
            return
        if cur is not None and (cur.steps, cur.draft_tokens) == (steps, draft):
            if cur.source != source and source == "switch line":
                self._tier = TierChange(cur.t, steps, draft, source)
            return
        change = TierChange(t, steps, draft, source)
        self._tier = change
        self._tier_hist.append(change)
        self._version += 1

    def _read_tier_state(self, info: dict) -> None:
        """``/server_info``: adaptive on or off, the launch tier, the current tier
        (``internal_states[0]``), the decode-log interval (for the tier tracker)."""
        from specdash.sglang.adaptive import read_internal_state

        if not info.get("speculative_algorithm") and not (info.get("internal_states") or [{}])[0].get(
                "speculative_algorithm"):
            return
        st = read_internal_state(info)
        self._adaptive = st.adaptive
        self._launch_steps = st.launch_steps
        iv = info.get("decode_log_interval") or (info.get("internal_states") or [{}])[0].get("decode_log_interval")
        if self._tracker.decode_lines == 0 and self._tracker.switches == 0:
            steps = self._tracker.steps if self._tracker.steps is not None else st.current_steps
            draft = self._tracker.draft_tokens if self._tracker.steps is not None else st.current_draft_tokens
            self._tracker = TierTracker(steps, draft, decode_log_interval=int(iv or DEFAULT_DECODE_LOG_INTERVAL))
        if st.current_steps is not None:
            self._observe_tier(st.current_steps, st.current_draft_tokens,
                               "server_info" if st.switched or st.adaptive else "launch", self.clock())

    def _per_tier(self) -> tuple[TierStats, ...]:
        from specdash.collect.tiers import merge_tier_stats

        key = (self._tracker.decode_lines, self._tracker.switches, len(self._tier_folded))
        if self._tier_cache is None or self._tier_cache[0] != key:
            if not (self._tracker.switches or self._tier_switches_folded):
                stats: tuple[TierStats, ...] = ()
            elif self._tier_folded:
                stats = tuple(merge_tier_stats(self._tier_folded, self._tracker.per_tier()))
            else:
                stats = tuple(self._tracker.per_tier())
            self._tier_cache = (key, stats)
        return self._tier_cache[1]

    def _roll_tracker(self) -> None:
        """Fold a full tracker's figures into :attr:`_tier_folded` and continue with a fresh one in the
        same tier (:data:`TIER_TRACKER_LINES`)."""
        from specdash.collect.tiers import merge_tier_stats

        tr = self._tracker
        self._tier_folded = merge_tier_stats(self._tier_folded, tr.per_tier())
        self._tier_switches_folded += tr.switches
        self._tracker = tr.continued()
        self._tier_cache = None

    def _tier_view(self) -> TierView | None:
        cur = self._tier
        if cur is None:
            return None
        log = self.server is not None and getattr(self.server, "ring", None) is not None
        adaptive = bool(self._adaptive) or self._tracker.switches + self._tier_switches_folded > 0 or len(
            self._tier_hist) > 1
        return TierView(
            adaptive=adaptive, steps=cur.steps, draft_tokens=cur.draft_tokens, source=cur.source,
            launch_steps=self._launch_steps, since=cur.t if len(self._tier_hist) > 1 else None,
            switches=self._tracker.switches + self._tier_switches_folded, history=tuple(self._tier_hist),
            per_tier=self._per_tier() if adaptive else (), log=log)

    @property
    def simulated(self) -> bool:
        """True when the server says it is specdash's simulator (``/server_info.simulated``)."""
        return bool((self._info or {}).get("simulated"))

    async def poll_gpu(self) -> None:
        """Device readings (NVML, or ``/sim/gpus`` for a simulated server) and the server's
        process tree (CPU %, RSS)."""
        source = self.gpu_source
        if source == "auto":
            if self._info is None:
                with contextlib.suppress(Exception):
                    await self.poll_server_info()
            source = "sim" if self.simulated else "nvml"
        server_pids: frozenset[int] = frozenset()
        pid = getattr(self.server, "pid", None) if self.server is not None else None
        if pid:
            if self._proc_sampler is None or self._proc_sampler.root_pid != pid:
                self._proc_sampler = ProcTreeSampler(pid)
            self._procs = tuple(await asyncio.to_thread(self._proc_sampler.sample))
            server_pids = frozenset(p.pid for p in self._procs)
        if source == "off":
            self._gpu = GpuView(status="GPU readings off", server_pids=server_pids, t=self.clock())
        elif source == "sim":
            payload = await _get_json(self.client, "/sim/gpus")
            devices = gpus_from_sim(payload or {})
            self._gpu = GpuView(status="simulated", devices=tuple(devices), server_pids=server_pids, t=self.clock())
        else:
            devices = await asyncio.to_thread(read_gpus)
            status = "ok" if devices else nvml_status()
            if status == "ok" and not devices:
                status = "NVML found no devices"
            self._gpu = GpuView(status=status, devices=tuple(devices), server_pids=server_pids, t=self.clock())
        now = self.clock()
        self._gpu_hist.extend(gpu_points(self._gpu, now))
        while self._gpu_hist and self._gpu_hist[0].t < now - GPU_HISTORY_S:
            self._gpu_hist.popleft()
        self._version += 1

    async def poll_gpu_exporters(self) -> None:
        """One reading of every configured exporter (:func:`~specdash.collect.exporter.read_exporters`:
        never raises; an exporter that is down or sends bad text has its reason as its status)."""
        if not self.gpu_exporters:
            return
        self._exporter_readings = tuple(await read_exporters(self.gpu_exporters))
        self._version += 1

    async def poll_gpu_exporter(self, index: int) -> None:
        """One reading of exporter ``index`` into its own slot (the poll loops run one of these per exporter,
        so an exporter that answers a byte a second holds only its own slot, for at most its total
        deadline, :data:`~specdash.collect.exporter.DEFAULT_TIMEOUT_S`)."""
        reading = await read_exporter(self.gpu_exporters[index])
        readings = list(self._exporter_readings)
        readings[index] = reading
        self._exporter_readings = tuple(readings)
        self._version += 1

    async def poll_logs(self) -> None:
        """New lines of the launched server's log (classified; decode lines parsed)."""
        self.poll_logs_sync()

    def poll_logs_sync(self) -> None:
        """The synchronous body of :meth:`poll_logs` (also run once more on :meth:`stop`).

        Reads the server's :class:`~specdash.sglang.logs.LogRing` incrementally
        (``entries(since=…)``): the ring has already classified each line and parsed the
        ``Decode batch`` ones (``sglang/logs.py`` is the one parser)."""
        ring = getattr(self.server, "ring", None) if self.server is not None else None
        if ring is None:
            return
        new = ring.entries(since=self._log_seen)
        if not new:
            return
        for e in new:
            kind = e.kind.value if hasattr(e.kind, "value") else str(e.kind)
            self._log_seen = e.seq
            if kind == "access":  # uvicorn access lines (our own polls): not shown
                continue
            self._log.append(LogEntry(e.seq, kind, e.text))
            self._log_counts[kind] = self._log_counts.get(kind, 0) + 1
            tr = self._tracker
            switches = tr.switches
            tr.feed(e.text)
            if tr.switches != switches and tr.steps is not None:
                self._observe_tier(tr.steps, tr.draft_tokens, "switch line", e.t)
            d = e.sample
            if kind == "decode" and d is not None:
                steps, after = tr.last_decode or (None, False)
                self._decode.append(DecodeWindow(
                    t=e.t, running=d.running_req, queued=d.queue_req, accept_length=d.accept_len,
                    accept_rate=d.accept_rate, gen_tok_s=d.gen_throughput, steps=steps, after_switch=after))
            if tr.decode_lines >= TIER_TRACKER_LINES and tr.settled:
                self._roll_tracker()
        self._version += 1

    # -- view -----------------------------------------------------------------------------------
    def _stale(self) -> frozenset[str]:
        now = self.clock()
        iv = {"metrics": self.intervals.metrics, "server_info": self.intervals.server_info,
              "gpu": self.intervals.gpu}
        out = set()
        for name, interval in iv.items():
            last = self._last_ok.get(name)
            if self.running and (last is None or now - last > 3 * interval + 1.0) and name in self._errors:
                out.add(name)
        return frozenset(out)

    def snapshot(self) -> LiveSnapshot:
        """An immutable view of the current state (cheap: tuples of the ring buffers)."""
        return LiveSnapshot(
            version=self._version,
            taken_at=self.clock(),
            url=getattr(self.client, "base_url", None),
            metrics=tuple(self._metrics),
            decode=tuple(self._decode),
            requests=tuple(self._requests),
            log=tuple(self._log),
            log_counts=dict(self._log_counts),
            gpu=replace(self._gpu, exporters=self._exporter_readings) if self.gpu_exporters else self._gpu,
            gpu_history=tuple(self._gpu_hist),
            procs=self._procs,
            server_info=self._info,
            run=dict(self.run_summary()),
            run_label=self._run_label,
            run_started=self._run_started,
            run_server_accept_length=self._run_server_accept_length(),
            errors=dict(self._errors),
            stale=self._stale(),
            simulated=self.simulated,
            metrics_enabled=self._metrics_enabled,
            tier=self._tier_view(),
        )


__all__ = [
    "HISTORY", "TIER_HISTORY", "DecodeWindow", "GpuView", "LiveCollector", "LiveSnapshot", "LogEntry",
    "MetricsSample", "PollIntervals", "RequestSample", "TierChange", "TierView", "empty_snapshot",
    "request_sample", "slim_record",
]
