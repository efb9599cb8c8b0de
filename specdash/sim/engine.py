"""The simulated scheduler: continuous batching, speculative rounds, acceptance, truth.

One asyncio task runs SGLang's scheduler loop shape: each iteration is either one
prefill batch (new requests; it yields their first token) or one decode round for every
running request (without speculation one token each; with speculation a draft + verify
round that yields ``1 + accepted`` tokens each).  Durations come from the scenario
(:mod:`specdash.sim.scenario`, model milliseconds) times a seeded lognormal jitter, and
are slept as ``ms / time_scale`` of wall clock against a deadline clock, so asyncio's
sleep overshoot does not accumulate.  Every time reported (``meta_info``, logs,
metrics, ``/sim/truth``) is wall clock (``time.time()``).

The scheduler logs ``Prefill batch`` per prefill and ``Decode batch`` every
``--decode-log-interval`` decode iterations (``metrics_reporter.py``), and updates the scheduler
gauges at those moments like SGLang; tokenizer metrics are updated when requests finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specdash.sglang.adaptive import OVERLAP_REPORT_LAG_BATCHES
from specdash.sim.logfmt import LogWriter
from specdash.sim.metrics import SimMetrics
from specdash.sim.scenario import Scenario, SpecShape, shape_success_probs, tree_branching
from specdash.sim.text import detect_category, first_output_id, output_id, token_text, unit_uniform
from specdash.sim.tiers import TierTruth

MAX_TRUTH_RECORDS = 20000


@dataclass
class EngineConfig:
    """What the scheduler needs from the resolved server args."""

    spec: SpecShape | None
    max_running: int
    graph_max_bs: int
    time_scale: float
    decode_log_interval: int
    max_total_tokens: int
    max_prefill_tokens: int
    seed: int
    alpha: float
    alpha_override: float | None
    draft_max_position: int | None
    enable_metrics: bool
    #: ``--speculative-adaptive``: SGLang's controller (tiers, slots, EMA); None without it.
    adaptive: Any = None
    #: ``SGLANG_ENABLE_METRICS_DEVICE_TIMER``: per-phase GPU seconds and ``fwd occupancy``.
    device_timer: bool = False
    #: ``SGLANG_SIMULATE_ACC_LEN`` (> 0): every verify round accepts min(L, steps + 1) tokens, L the
    #: floor or the ceiling of the value with the probabilities that match its mean, as SGLang's
    #: ``srt/speculative/spec_utils.py`` does (the draft's own acceptance is ignored); None: off.
    simulate_acc_len: float | None = None


class SimRequest:
    """One generation request inside the simulator (times are wall clock, ``time.time()``)."""

    __slots__ = (
        "_ids",
        "_text",
        "_text_n",
        "aborted",
        "alpha",
        "cached_tokens",
        "category",
        "completion",
        "correct",
        "eos_at",
        "event",
        "finish_reason",
        "finished",
        "hist",
        "internal",
        "log_metrics",
        "m_finished",
        "m_first",
        "m_received",
        "max_new_tokens",
        "prompt_key",
        "prompt_tokens",
        "q",
        "q_long",
        "rid",
        "seq_len",
        "start_id",
        "t_dispatch",
        "t_finished",
        "t_first",
        "t_last_emit",
        "t_received",
        "t_sched",
        "temperature",
        "verify_ct",
    )

    def __init__(self, rid: str, prompt_key: str, prompt_tokens: int, max_new_tokens: int, *,
                 temperature: float | None = 0.0, log_metrics: bool = True, internal: str = "") -> None:
        self.rid = rid
        self.prompt_key = prompt_key
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = 0
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.log_metrics = log_metrics
        self.internal = internal
        self.category = "general"
        self.alpha = 0.0
        self.q: np.ndarray | None = None
        self.q_long: np.ndarray | None = None
        self.start_id = 0
        self.t_received = time.time()
        self.t_dispatch = self.t_received
        self.t_first: float | None = None
        self.t_finished: float | None = None
        self.t_last_emit = 0.0
        #: the engine's model clock (:attr:`Engine.model_clock`, s) at receipt, first token and finish
        self.m_received = 0.0
        self.m_first: float | None = None
        self.m_finished: float | None = None
        self.completion = 0
        self.verify_ct = 0
        self.correct = 0
        self.hist: list[int] = []
        self.finished = False
        self.finish_reason: dict | None = None
        self.event = asyncio.Event()
        self.aborted = False
        self.seq_len = prompt_tokens
        self.eos_at: int | None = None
        self._text = ""
        self._text_n = 0
        self._ids: list[int] = []
        self.t_sched: float | None = None

    # -- output --------------------------------------------------------------------------------
    def output_ids(self, lo: int = 0, hi: int | None = None) -> list[int]:
        """Output token ids ``[lo, hi)`` (default: all so far)."""
        hi = self.completion if hi is None else hi
        if lo == 0 and hi == self.completion:
            ids = self._ids
            if len(ids) < hi:
                ids.extend(output_id(self.start_id, i) for i in range(len(ids), hi))
            return ids
        return [output_id(self.start_id, i) for i in range(lo, hi)]

    def text(self, lo: int = 0, hi: int | None = None) -> str:
        """Output text of tokens ``[lo, hi)``; the cumulative prefix is cached, so streaming the
        whole text event by event costs one copy per event, not a re-join of every token."""
        hi = self.completion if hi is None else hi
        if lo == 0:
            if hi < self._text_n:
                return "".join(token_text(output_id(self.start_id, i)) for i in range(hi))
            if hi > self._text_n:
                self._text += "".join(token_text(output_id(self.start_id, i)) for i in range(self._text_n, hi))
                self._text_n = hi
            return self._text
        return "".join(token_text(output_id(self.start_id, i)) for i in range(lo, hi))

    def spec_meta(self, num_draft_tokens: int) -> dict[str, Any]:
        """The per-request speculative figures (``meta_info`` ``spec_*``), version-neutral names."""
        proposed = self.verify_ct * max(1, num_draft_tokens - 1)
        return {
            "accept_rate": self.correct / proposed if proposed else 0.0,
            "accept_length": self.completion / self.verify_ct if self.verify_ct else 0.0,
            "correct": self.correct,
            "proposed": proposed,
            "verify_ct": self.verify_ct,
            "histogram": list(self.hist),
        }


@dataclass
class Truth:
    """Ground truth the simulator publishes at ``/sim/truth`` (user requests only: the
    start-up warm-up and health checks are excluded).

    Times: ``t_*`` are wall clock (``time.time()``, s); ``busy_s`` and the ``model_*`` figures are the
    *model clock* (:attr:`Engine.model_clock`, s): the scenario's planned time of the iterations (model ms
    ÷ time scale, jitter included), which a loaded machine cannot stretch.  A record (``requests``) has
    ``t_received`` / ``t_first_token`` / ``t_finished`` and ``model_received`` (the model clock at
    receipt), ``model_ttft_s`` and ``model_e2e_s`` (the model time from receipt to the first token and
    to the finish: the iterations begun after receipt).  ``decode_windows`` (``?decode_windows=1``): one
    entry per ``Decode batch`` line, warm-up included — ``index`` (0-based, in log order), ``t``,
    ``elapsed_s`` (the wall time the line's ``gen throughput`` divides by), ``running``, ``tokens`` /
    ``request_rounds`` / ``accepted_drafts`` (what the line reports), ``reported_steps`` (the tiers of the
    batches whose results it reports: lagged under adaptive), ``run_steps`` (the tiers of the batches run
    in its window), ``prefills`` (prefill batches in its window) and ``idle`` (the scheduler waited for
    work in its window)."""

    tokens_emitted: int = 0
    verify_rounds: int = 0
    accepted_drafts: int = 0
    histogram: list[int] = field(default_factory=list)
    decode_iterations: int = 0
    prefill_batches: int = 0
    busy_s: float = 0.0
    finished_requests: int = 0
    sum_completion_finished: int = 0
    sum_verify_finished: int = 0
    records: deque = field(default_factory=lambda: deque(maxlen=MAX_TRUTH_RECORDS))
    #: ``Decode batch`` lines logged so far (all requests, warm-up included: the lines of the log)
    decode_lines: int = 0
    #: one entry per decode line, what its window really held (:meth:`Engine._decode_log`)
    decode_windows: deque = field(default_factory=lambda: deque(maxlen=MAX_TRUTH_RECORDS))


class Engine:
    """The scheduler loop and request bookkeeping (see the module docstring)."""

    def __init__(self, scenario: Scenario, cfg: EngineConfig, log: LogWriter, metrics: SimMetrics | None) -> None:
        self.sc = scenario
        self.cfg = cfg
        self.log = log
        self.metrics = metrics if cfg.enable_metrics else None
        self.rng = np.random.default_rng(cfg.seed)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.truth = Truth()
        self._wake = asyncio.Event()
        self._tick = asyncio.Event()
        self._stopping = False
        self._deadline = 0.0
        #: time.monotonic() at the end of the last iteration (:meth:`_spend`); None after idling
        self._last_end: float | None = None
        self._busy: deque[tuple[float, float]] = deque(maxlen=4096)
        #: the model clock (s): the planned wall time (model ms / time scale) of every iteration begun so far,
        #: idle time excluded — what the clock would read had every sleep been exact; a request's
        #: ``model_e2e_s`` is its reading at the finish minus at receipt (:meth:`_finish`)
        self.model_clock = 0.0
        self._prefix_cache: dict[str, int] = {}
        spec = cfg.spec
        #: the (steps, topk, draft tokens) whose per-depth acceptance each request draws (:meth:`_set_acceptance`)
        self._shape = (spec.steps, spec.topk, spec.num_draft_tokens) if spec else (0, 1, 1)
        if spec is not None and cfg.adaptive is not None:  # chain q for the deepest tier; a tier uses a prefix
            deepest = max(cfg.adaptive.candidate_steps() + [spec.steps])
            self._shape = (deepest, 1, deepest + 1)
        self._branching = tree_branching(*self._shape) if spec else []
        self.tier_truth = TierTruth()
        self._win_gpu_s = 0.0
        self._win_wall_start = time.time()
        self.fwd_occupancy: float | None = None
        # decode-log window
        self._decode_iters = 0
        self._win_tokens = 0
        self._win_req_rounds = 0
        self._win_accepted = 0
        # (tokens, request-rounds, accepted) of the last batches: under adaptive speculation the
        # OVERLAP_REPORT_LAG_BATCHES decode lines after a switch still show the old tier, as on SGLang
        # 0.5.14 with its overlap scheduler.  The switch line of a batch is logged before that batch's
        # own decode line (one line of lag already), so a line reports the batch LAG - 1 before it.
        self._report_lag: deque[tuple[int, int, int]] = deque()
        self._win_graph = True
        #: what the decode-log window holds besides its counts: the steps of the batches its line reports
        #: (lagged under adaptive), of the batches that ran in it, prefill batches and idle waits in it
        self._win_rep_steps: set[int] = set()
        self._win_run_steps: set[int] = set()
        self._win_prefills = 0
        self._win_idle = False
        self._last_decode_log = time.time()
        self._last_prefill_log = time.time()
        self.last_gen_throughput = 0.0
        self.lifetime_accept_num = 0
        self.lifetime_accept_den = 0
        self.window_accept_length: float | None = None
        self.window_accept_rate: float | None = None
        self._task: asyncio.Task | None = None

    # -- public API ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the scheduler task on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="sim-scheduler")

    def freeze(self) -> None:
        """The scheduler is gone (see ``SimServer._scheduler_killed``): the loop stops where it is and no
        pending request ever gets another token or a finish."""
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        """Stop the loop and finish every pending request as aborted."""
        self._stopping = True
        self._wake.set()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for r in list(self.running) + list(self.waiting):
            self._finish(r, {"type": "abort", "message": "server shutting down"}, metrics=False)

    @staticmethod
    def prompt_tokens(prompt_text: str | None, prompt_ids: list[int] | None) -> int:
        """The prompt's token count as :meth:`new_request` counts it (``input_ids`` as given, text by
        the simulator's tokenizer stand-in)."""
        from specdash.sim.text import count_tokens

        if prompt_ids is not None:
            return max(1, len(prompt_ids))
        return count_tokens(prompt_text or "")

    def new_request(self, prompt_text: str | None, prompt_ids: list[int] | None, max_new_tokens: int, *,
                    rid: str | None = None, temperature: float | None = 0.0, log_metrics: bool = True,
                    internal: str = "", ignore_eos: bool = True, n_prompt: int | None = None) -> SimRequest:
        """Create and queue a request (``prompt_text`` or ``prompt_ids``; ``n_prompt``: its
        :meth:`prompt_tokens` when the caller counted them already)."""
        if n_prompt is None:
            n_prompt = self.prompt_tokens(prompt_text, prompt_ids)
        if prompt_ids is not None:
            key = "ids:" + ",".join(str(i) for i in prompt_ids[:4096])
            category = "general"
        else:
            key = prompt_text or ""
            category = detect_category(key)
        r = SimRequest(rid or uuid.uuid4().hex, key, n_prompt, max(0, int(max_new_tokens)),
                       temperature=temperature, log_metrics=log_metrics, internal=internal)
        r.category = category
        r.start_id = first_output_id(self.cfg.seed, key)
        self._set_acceptance(r)
        self.enqueue(r)
        return r

    def enqueue(self, r: SimRequest) -> None:
        """Put a request in the waiting queue and wake the scheduler."""
        r.t_received = time.time()
        r.m_received = self.model_clock
        r.t_dispatch = r.t_received + 0.0004
        self.waiting.append(r)
        self._wake.set()

    def abort(self, r: SimRequest) -> None:
        """Drop a request (client went away)."""
        if r.finished:
            return
        if r in self.waiting:
            self.waiting.remove(r)
        if r in self.running:
            self.running.remove(r)
        self._finish(r, {"type": "abort", "message": "client disconnected"}, metrics=False)

    async def wait_tick(self, timeout: float) -> bool:
        """Wait for the next scheduler iteration to finish (``/health`` semantics)."""
        ev = self._tick
        try:
            await asyncio.wait_for(ev.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def flush_cache(self) -> tuple[bool, str]:
        """Clear the prefix cache unless requests are running or waiting (SGLang's rule)."""
        if self.running or self.waiting:
            return False, (f"Cache not flushed because there are pending requests. #queue-req: {len(self.waiting)}, "
                           f"#running-req: {len(self.running)}")
        self._prefix_cache.clear()
        return True, "Cache flushed successfully!"

    def utilization(self, window_s: float = 1.0) -> float:
        """Busy fraction of the last ``window_s`` seconds of wall clock (0…1)."""
        now = time.time()
        lo = now - window_s
        busy = 0.0
        for a, b in reversed(self._busy):
            if b <= lo:
                break
            busy += min(b, now) - max(a, lo)
        return max(0.0, min(1.0, busy / window_s))

    @property
    def tokens_in_use(self) -> int:
        """KV tokens held by running requests (``#token`` in the log)."""
        return sum(r.seq_len for r in self.running)

    # -- acceptance ----------------------------------------------------------------------------------
    def _set_acceptance(self, r: SimRequest) -> None:
        spec = self.cfg.spec
        if spec is None:
            return
        acc = self.sc.acceptance
        if self.cfg.alpha_override is not None:
            alpha = self.cfg.alpha_override
        else:
            from specdash.sim.scenario import mean1_lognormal_factor

            f = self.sc.category_factor(r.category)
            f *= mean1_lognormal_factor(unit_uniform(self.cfg.seed, r.prompt_key), acc.prompt_sigma)
            f *= self.sc.temperature_factor(r.temperature)
            alpha = self.cfg.alpha * f
        r.alpha = alpha
        r.q = np.asarray(shape_success_probs(acc, alpha, *self._shape), dtype=np.float64)
        if self.cfg.draft_max_position:
            r.q_long = np.asarray(shape_success_probs(acc, alpha * acc.long_context_factor, *self._shape),
                                  dtype=np.float64)

    # -- time ----------------------------------------------------------------------------------------
    def _jitter(self) -> float:
        s = self.sc.jitter_sigma
        if s <= 0:
            return 1.0
        return float(self.rng.lognormal(-0.5 * s * s, s))

    async def _spend(self, model_ms: float) -> float:
        """Sleep ``model_ms / time_scale`` against the deadline clock; record the busy interval.

        Returns the wall seconds the iteration really took, as its tokens' emission times show: from
        the end of the iteration before (back to back: the scheduler's own work between the two counts,
        as it does in SGLang's decode-log windows) or, after idling (:meth:`_loop`), from this call, to now.  On a loaded
        machine this exceeds the plan (``model_ms / time_scale``: sleeps overshoot, the deadline clock
        restarts after falling 50 ms behind); the truth of what was emitted is this, not the plan."""
        wall = max(0.0, model_ms) / 1000.0 / self.cfg.time_scale
        self.model_clock += wall
        now = time.monotonic()
        if now - self._deadline > 0.05:  # idle (or far behind): restart the clock
            self._deadline = now
        self._deadline += wall
        delay = self._deadline - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)
        t_end = time.time()
        end = time.monotonic()
        begin = self._last_end if self._last_end is not None else now
        self._last_end = end
        self._busy.append((t_end - wall, t_end))
        self.truth.busy_s += wall
        return end - begin

    def _gpu(self, phases: dict[str, float], *, eager: bool) -> None:
        """Account GPU-busy model ms per SGLang forward category (device timer on only).

        Graph-replayed rounds report the graph's category (``eagle_draft``, ``target_verify``,
        ``eagle_draft_extend``, ``decode``); eager rounds (batch past the captured sizes) run through
        ``model_runner.forward``: draft steps count as ``decode``, verify and draft extend as ``extend``
        (``ForwardMode.is_extend`` includes TARGET_VERIFY; SGLang ``model_executor/runner/eager_runner.py``).
        """
        if not self.cfg.device_timer:
            return
        m = self.metrics
        for cat, ms in phases.items():
            if eager and cat != "extend":
                cat = "decode" if cat in ("eagle_draft", "decode") else "extend"
            sec = max(0.0, ms) / 1000.0 / self.cfg.time_scale
            self._win_gpu_s += sec
            if m is not None:
                m.forward_seconds(cat, sec)

    def _occupancy(self, now: float) -> str:
        """`` , fwd occupancy: N%`` over the window since the last batch line (device timer only)."""
        if not self.cfg.device_timer:
            return ""
        wall = max(1e-9, now - self._win_wall_start)
        occ = min(100.0, self._win_gpu_s / wall * 100.0)
        self.fwd_occupancy = occ
        self._win_gpu_s = 0.0
        self._win_wall_start = now
        if self.metrics is not None and self.metrics.fwd_occupancy is not None:
            self.metrics.fwd_occupancy.set(occ)
        return f", fwd occupancy: {occ:.2f}%"

    def _tier_shape(self) -> SpecShape | None:
        """The speculative shape of the active tier (the launch one without adaptive)."""
        ctl = self.cfg.adaptive
        if ctl is None or self.cfg.spec is None:
            return self.cfg.spec
        return SpecShape(int(ctl.steps), 1, int(ctl.draft_tokens))

    # -- loop ----------------------------------------------------------------------------------------
    async def _idle(self) -> None:
        """Wait for work; a busy period after it starts its deadline clock afresh — lateness left by the
        previous period (a sleep that overshot near its end) is not credited to the next request, which
        would otherwise run that much faster than modelled (seen as a 20x faster request right after one
        that followed a long idle, on a loaded machine)."""
        self._wake.clear()
        self._win_idle = True
        await self._wake.wait()
        self._deadline = time.monotonic()

    async def _loop(self) -> None:
        while not self._stopping:
            if not self.running and not self.waiting:
                self._last_end = None
                await self._idle()
                continue
            if self.waiting and len(self.running) < self.cfg.max_running:
                await self._prefill()
            elif self.running:
                await self._decode()
            else:
                self._last_end = None
                await self._idle()
                continue
            tick, self._tick = self._tick, asyncio.Event()
            tick.set()

    async def _prefill(self) -> None:
        batch: list[SimRequest] = []
        budget = self.cfg.max_prefill_tokens
        new_tokens = cached_total = 0
        while self.waiting and len(self.running) + len(batch) < self.cfg.max_running:
            r = self.waiting[0]
            cached = self._prefix_cache.get(r.prompt_key, 0)
            cached = min(cached, max(0, r.prompt_tokens - 2)) if cached else 0
            need = r.prompt_tokens - cached
            if batch and new_tokens + need > budget:
                break
            self.waiting.popleft()
            if r.finished:
                continue
            r.cached_tokens = cached
            new_tokens += need
            cached_total += cached
            batch.append(r)
        if not batch:
            return
        running_before = len(self.running)
        t_sched = time.time()
        for r in batch:
            r.t_sched = t_sched
        ms = self.sc.prefill_ms(new_tokens, spec=self.cfg.spec is not None) * self._jitter()
        await self._spend(ms)
        self._gpu({"extend": ms * self.sc.device.prefill_fraction}, eager=False)
        now = time.time()
        for r in batch:
            if r.finished:
                continue
            self._prefix_cache[r.prompt_key] = r.prompt_tokens
            if len(self._prefix_cache) > 50000:
                self._prefix_cache.pop(next(iter(self._prefix_cache)))
            if r.max_new_tokens <= 0:
                self._finish(r, {"type": "length", "length": 0})
                continue
            self.running.append(r)
            self._emit(r, 1, now)
        self.truth.prefill_batches += 1
        self._win_prefills += 1
        elapsed = max(1e-6, now - self._last_prefill_log)
        self._last_prefill_log = now
        usage = self.tokens_in_use / max(1, self.cfg.max_total_tokens)
        self.log.scheduler(
            f"Prefill batch, #new-seq: {len(batch)}, #new-token: {new_tokens}, #cached-token: {cached_total}, "
            f"token usage: {usage:.2f}, #running-req: {running_before}, #queue-req: {len(self.waiting)}, "
            f"#pending-token: 0, cuda graph: False, input throughput (token/s): {new_tokens / elapsed:.2f}"
            f"{self._occupancy(now)}")
        m = self.metrics
        if m:
            m.sched_counter(m.realtime_tokens, "prefill_compute").inc(new_tokens)
            if cached_total:
                m.sched_counter(m.realtime_tokens, "prefill_cache").inc(cached_total)
            m.sched_counter(m.cuda_graph_passes, "prefill_none").inc()
            m.cache_hit_rate.set(cached_total / max(1, cached_total + new_tokens))
            self._update_gauges(usage)

    async def _decode(self) -> None:
        running = list(self.running)
        b = len(running)
        ctl = self.cfg.adaptive
        if ctl is not None and self.cfg.spec is not None:  # activate_step_by_batch (0.5.13+)
            for ev in ctl.before_batch(b):
                self.log.scheduler(ev.line)
        spec = self._tier_shape()
        eager = b > self.cfg.graph_max_bs
        ms = self.sc.round_ms(b, spec, eager=eager) * self._jitter()
        actual_s = await self._spend(ms)
        self._gpu({k: v * (self.sc.target.eager_factor if eager else 1.0)
                   for k, v in self.sc.device_ms(b, spec).items()}, eager=eager)
        now = time.time()
        running = [r for r in running if not r.finished]
        if not running:
            return
        if spec is None:
            for r in running:
                self._emit(r, 1, now)
            tokens = len(running)
            accepted_total = 0
        else:
            depth = len(self._branching) if ctl is None else spec.steps
            if depth and self.cfg.simulate_acc_len is not None:
                lo = int(np.floor(self.cfg.simulate_acc_len))
                length = lo + (self.rng.random(len(running)) < self.cfg.simulate_acc_len - lo)
                acc = np.clip(np.minimum(length, depth + 1) - 1, 0, depth)
            elif depth:
                q = np.empty((len(running), depth))
                dmax = self.cfg.draft_max_position
                for i, r in enumerate(running):
                    q[i] = (r.q_long if (dmax and r.q_long is not None and r.seq_len > dmax) else r.q)[:depth]
                ok = self.rng.random(q.shape) < q
                acc = np.where(ok.all(axis=1), depth, ok.argmin(axis=1))
            else:
                acc = np.zeros(len(running), dtype=int)
            tokens = accepted_total = 0
            user_rounds = user_acc = user_tokens = 0
            for r, a in zip(running, acc.tolist(), strict=True):
                # SGLang counts every accepted draft, also those past max_new_tokens that the output
                # then drops (golden: 32 tokens = 16 rounds x 2, histogram [0, 16]); only the
                # emitted tokens are truncated.
                a = int(a)
                remaining = r.max_new_tokens - r.completion
                r.verify_ct += 1
                r.correct += a
                if len(r.hist) <= a:
                    r.hist.extend([0] * (a + 1 - len(r.hist)))
                r.hist[a] += 1
                if not r.internal:
                    t = self.truth
                    t.verify_rounds += 1
                    t.accepted_drafts += a
                    if len(t.histogram) <= a:
                        t.histogram.extend([0] * (a + 1 - len(t.histogram)))
                    t.histogram[a] += 1
                tokens += min(1 + a, remaining)
                accepted_total += a
                if not r.internal:
                    user_rounds += 1
                    user_acc += a
                    user_tokens += min(1 + a, remaining)
                self._emit(r, 1 + a, now)
            if user_rounds:
                self.tier_truth.add(spec.steps, spec.num_draft_tokens, rounds=user_rounds, accepted=user_acc,
                                    tokens=user_tokens, busy_s=actual_s,
                                    planned_s=ms / 1000.0 / self.cfg.time_scale)
            if ctl is not None:  # on_verify_complete: the slot's EMA may move the tier
                for ev in ctl.after_verify([int(a) for a in acc.tolist()], len(running)):
                    self.log.scheduler(ev.line)
        self.truth.decode_iterations += 1
        self._decode_iters += 1
        steps_run = spec.steps if spec is not None else 0
        batch_result = (tokens, len(running), accepted_total, steps_run)
        if ctl is not None:
            self._report_lag.append(batch_result)
            batch_result = (self._report_lag.popleft() if len(self._report_lag) >= OVERLAP_REPORT_LAG_BATCHES
                            else (0, 0, 0, None))
        self._win_tokens += batch_result[0]
        self._win_req_rounds += batch_result[1]
        self._win_accepted += batch_result[2]
        if batch_result[3] is not None:
            self._win_rep_steps.add(batch_result[3])
        self._win_run_steps.add(steps_run)
        self._win_graph = not eager
        if self.metrics:
            self.metrics.sched_counter(self.metrics.cuda_graph_passes,
                                       "decode_none" if eager else "decode_cuda_graph").inc()
        if self._decode_iters % max(1, self.cfg.decode_log_interval) == 0 and (ctl is None or self._win_req_rounds):
            # (adaptive: the server's first batch has no lagged result to report yet)
            self._decode_log(now, len(running))

    def _decode_log(self, now: float, batch: int) -> None:
        spec = self.cfg.spec
        elapsed = max(1e-6, now - self._last_decode_log)
        self._last_decode_log = now
        thr = self._win_tokens / elapsed
        self.last_gen_throughput = thr
        usage = self.tokens_in_use / max(1, self.cfg.max_total_tokens)
        parts = [f"Decode batch, #running-req: {batch}, #token: {self.tokens_in_use}, token usage: {usage:.2f}"]
        cur = self._tier_shape()
        if spec is not None and self._win_req_rounds:
            num = self._win_accepted + self._win_req_rounds
            al = num / self._win_req_rounds
            if self.cfg.adaptive is not None:  # the denominator follows the active tier (0 drafts: rate 0)
                per_round = cur.num_draft_tokens - 1
                ar = self._win_accepted / (self._win_req_rounds * per_round) if per_round > 0 else 0.0
            else:
                ar = self._win_accepted / (self._win_req_rounds * spec.proposed_per_round)
            self.window_accept_length, self.window_accept_rate = al, ar
            self.lifetime_accept_num += num
            self.lifetime_accept_den += self._win_req_rounds
            parts.append(f"accept len: {al:.2f}, accept rate: {ar:.2f}")
        parts.append(f"cuda graph: {self._win_graph}, gen throughput (token/s): {thr:.2f}, "
                     f"#queue-req: {len(self.waiting)}{self._occupancy(now)}")
        self.log.scheduler(", ".join(parts))
        t = self.truth
        t.decode_windows.append({
            "index": t.decode_lines, "t": now, "elapsed_s": elapsed, "running": batch,
            "tokens": self._win_tokens, "request_rounds": self._win_req_rounds, "accepted_drafts": self._win_accepted,
            "reported_steps": sorted(self._win_rep_steps), "run_steps": sorted(self._win_run_steps),
            "prefills": self._win_prefills, "idle": self._win_idle})
        t.decode_lines += 1
        self._win_rep_steps, self._win_run_steps = set(), set()
        self._win_prefills, self._win_idle = 0, False
        m = self.metrics
        if m:
            m.sched_counter(m.realtime_tokens, "decode").inc(self._win_tokens)
            m.gen_throughput.set(thr)
            if spec is not None and self.window_accept_length is not None:
                m.spec_accept_length.set(self.window_accept_length)
                m.spec_accept_rate.set(self.window_accept_rate or 0.0)
                if self.cfg.adaptive is not None:  # _active_spec_config_snapshot: the active tier
                    m.spec_num_steps.set(cur.steps)
                    m.spec_num_draft_tokens.set(cur.num_draft_tokens)
            m.is_cuda_graph.set(1.0 if self._win_graph else 0.0)
            self._update_gauges(usage)
        self._win_tokens = self._win_req_rounds = self._win_accepted = 0

    def _update_gauges(self, usage: float) -> None:
        m = self.metrics
        if not m:
            return
        used = self.tokens_in_use
        m.num_running.set(len(self.running))
        m.num_queue.set(len(self.waiting))
        m.token_usage.set(round(usage, 2))
        m.full_token_usage.set(round(usage, 2))
        m.num_used_tokens.set(used)
        m.kv_used.set(used)
        m.kv_available.set(max(0, self.cfg.max_total_tokens - used))
        m.decode_sum_seq_lens.set(used)
        m.utilization.set(self.utilization())

    # -- emission --------------------------------------------------------------------------------
    def _emit(self, r: SimRequest, n: int, now: float) -> None:
        n = min(n, r.max_new_tokens - r.completion)
        if n <= 0:
            return
        first = r.completion == 0
        r.completion += n
        r.seq_len += n
        if not r.internal:
            self.truth.tokens_emitted += n
        m = self.metrics
        if first:
            r.t_first = now
            r.m_first = self.model_clock
        elif m and r.log_metrics:
            m.itl.observe((now - r.t_last_emit) / n)
        r.t_last_emit = now
        if r.completion >= r.max_new_tokens:
            if r in self.running:
                self.running.remove(r)
            self._finish(r, {"type": "length", "length": r.max_new_tokens})
        else:
            r.event.set()

    def _finish(self, r: SimRequest, reason: dict, *, metrics: bool = True) -> None:
        if r.finished:
            return
        r.finished = True
        r.finish_reason = reason
        r.aborted = reason.get("type") == "abort"
        r.t_finished = time.time()
        r.m_finished = self.model_clock
        r.event.set()
        if r.aborted:
            return
        if not r.internal:
            t = self.truth
            t.finished_requests += 1
            t.sum_completion_finished += r.completion
            t.sum_verify_finished += r.verify_ct
            t.records.append({
                "rid": r.rid, "t_received": r.t_received, "t_first_token": r.t_first, "t_finished": r.t_finished,
                "prompt_tokens": r.prompt_tokens, "cached_tokens": r.cached_tokens,
                "completion_tokens": r.completion, "verify_ct": r.verify_ct, "accepted_drafts": r.correct,
                "category": r.category, "alpha": round(r.alpha, 6),
                "model_received": r.m_received,
                "model_ttft_s": (r.m_first - r.m_received) if r.m_first is not None else None,
                "model_e2e_s": r.m_finished - r.m_received,
            })
        m = self.metrics
        if metrics and m and r.log_metrics:
            m.prompt_tokens.inc(r.prompt_tokens)
            m.generation_tokens.inc(r.completion)
            m.num_requests.inc()
            if r.cached_tokens:
                m.cached_tokens.inc(r.cached_tokens)
            if m.spec_verify_calls is not None and r.verify_ct:
                m.spec_verify_calls.inc(r.verify_ct)
            if r.t_first is not None:
                m.ttft.observe(r.t_first - r.t_received)
                if m.tpot is not None and r.completion > 1:
                    m.tpot.observe((r.t_finished - r.t_first) / (r.completion - 1))
            m.e2e.observe(r.t_finished - r.t_received)
            m.prompt_hist.observe(r.prompt_tokens)
            m.uncached_hist.observe(r.prompt_tokens - r.cached_tokens)
            m.gen_hist.observe(r.completion)

    # -- reports ---------------------------------------------------------------------------------
    def avg_spec_accept_length(self) -> float | None:
        """Lifetime accept length folded in at each decode-log tick (None before the first)."""
        if not self.lifetime_accept_den:
            return None
        return self.lifetime_accept_num / self.lifetime_accept_den

    def truth_json(self, *, include_records: bool = True, since: float | None = None,
                   decode_windows: bool = False) -> dict[str, Any]:
        """The ``/sim/truth`` figures (see :class:`Truth`); ``decode_windows``: add the per-line entries
        (``decode_windows``, see :meth:`_decode_log`)."""
        t = self.truth
        spec = self.cfg.spec
        out: dict[str, Any] = {
            "tokens_emitted": t.tokens_emitted,
            "verify_rounds": t.verify_rounds,
            "accepted_drafts": t.accepted_drafts,
            "accept_histogram": list(t.histogram),
            "decode_iterations": t.decode_iterations,
            "prefill_batches": t.prefill_batches,
            "busy_s": t.busy_s,
            "model_clock": self.model_clock,
            "decode_lines": t.decode_lines,
            "finished_requests": t.finished_requests,
            "accept_length": (t.sum_completion_finished / t.sum_verify_finished) if t.sum_verify_finished else None,
            "accept_length_rounds": ((t.verify_rounds + t.accepted_drafts) / t.verify_rounds)
            if t.verify_rounds else None,
            "accept_rate": (t.accepted_drafts / (t.verify_rounds * spec.proposed_per_round))
            if (spec and t.verify_rounds) else None,
            "running": len(self.running),
            "waiting": len(self.waiting),
            "tiers": self.tier_truth.to_json() if self.cfg.adaptive is not None else None,
        }
        if decode_windows:
            out["decode_windows"] = list(t.decode_windows)
        if include_records:
            recs = list(t.records)
            if since is not None:
                recs = [r for r in recs if (r["t_finished"] or 0) >= since]
            out["requests"] = recs
        return out
