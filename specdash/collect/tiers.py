"""Decode time and tokens by step tier, from the log of an SGLang server running ``--speculative-adaptive``.

Under adaptive speculation one launch runs several step counts ("tiers": a tier of ``S``
steps verifies ``S + 1`` draft tokens, steps 0 = no drafting); the server's counters and the
per-request ``meta_info`` pool them.  Its log separates them:

* ``Decode batch, #running-req: R, …, accept len: A, accept rate: r, …, gen throughput
  (token/s): G, …`` — written every ``--decode-log-interval`` decode iterations (default 40; 1
  gives one line per iteration) by SGLang's scheduler
  (``srt/managers/scheduler_components/metrics_reporter.py`` ``log_decode_stats``);
* ``Switch adaptive runtime state: steps a -> b, draft_tokens c -> d`` — written when the
  worker swaps runtime states (``srt/speculative/eagle_worker_v2.py`` ``apply_runtime_state``).

The tier of a decode line is the one of the last switch before it, starting from the launch
tier (or, when the launch tier is not given, from the ``a``/``c`` side of the first switch).

What a decode line stands for (SGLang's definitions, ``log_decode_stats``):

* ``A`` is tokens per request-round over the line's window, bonus token included (accepted
  drafts + 1, summed over the requests of each verify round, divided by the request-rounds);
* ``G`` is the tokens generated since the previous decode line divided by the wall time
  since then (``time.perf_counter()`` deltas);
* the window covers ``decode_log_interval`` iterations, each running about ``R`` requests
  (``R`` is the batch at the logging iteration).

So a line's **request-rounds** are ``R × interval``, its **tokens** ``R × interval × A``
(exact with ``--decode-log-interval 1``; with a longer interval the batch is taken as
constant over the window), and its **time** ``tokens / G`` seconds — the wall time of the
window.  The line does not print its token count or its duration, only their ratio, so the
count is rebuilt from ``R`` and ``A`` and the duration from the count and ``G``.

That time is the decode time only when the window held nothing else: a prefill batch, or an
idle gap, before or inside the window is inside ``G``'s wall time too.  Each line is classed
by the batch lines before it: **clean** (the batch line before it was a decode line),
**with prefill** (one or more ``Prefill batch`` lines since the previous decode line, all with
``#running-req`` > 0: decoding went on around them) or **idle** (the first decode line the
tracker sees, or one after a prefill of an idle server, ``#running-req: 0``: the wait for the
request is inside the window).  Tokens and rounds count for every line; tok/s is taken over
the clean lines, or, for a tier without any, over its clean and with-prefill lines (prefill
time then lowers it — with ``--decode-log-interval 40`` at high concurrency most windows hold a
prefill; ``--decode-log-interval 1`` avoids that); idle lines are never timed.

**After a switch**: under SGLang's overlap scheduler a batch's results are processed while the
next batch runs, so the first decode lines after a switch still carry the old tier's work while
the switch line already names the new tier.  On real SGLang 0.5.14 (H200, 8B-shaped testbed with
``SGLANG_SIMULATE_ACC_LEN=3``, steps 1 ↔ 15, ``--decode-log-interval 1``) it is the first **two**
lines: they read accept len 2.00 after a switch to steps 15 and 3.00 after a switch back to
steps 1 (:data:`SWITCH_LAG_BATCHES`).  Each of those lines makes a window of its own with
``after_switch`` True, which :meth:`TierTracker.per_tier` and :func:`paired_windows` leave out by
default; with a longer log interval a line also mixes the two tiers.

Only lines of TP rank 0 and PP rank 0 are read (other ranks may repeat the worker's lines).
Several DP ranks (each with its own scheduler and controller) are not told apart: feed one
rank's lines.

Units: seconds, tokens, request-rounds (one request in one verify round), tokens/s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from specdash.results import Tier
from specdash.sglang.adaptive import OVERLAP_REPORT_LAG_BATCHES, parse_adaptive_line
from specdash.sglang.logs import DecodeSample, PrefillSample, parse_line, split_prefix

__all__ = [
    "DEFAULT_DECODE_LOG_INTERVAL",
    "SWITCH_LAG_BATCHES",
    "TierStats",
    "TierTracker",
    "TierWindow",
    "merge_tier_stats",
    "paired_windows",
    "split_pair_histogram",
    "tier_stats",
]

#: ``ServerArgs.decode_log_interval``'s default (SGLang ``srt/server_args.py``).
DEFAULT_DECODE_LOG_INTERVAL = 40


@dataclass(frozen=True)
class TierWindow:
    """A run of consecutive decode lines in one tier (see the module docstring).

    ``steps`` / ``draft_tokens``: the tier.  ``t_start`` / ``t_end``: seconds on the tracker's
    decode clock (the sum of the line times, :attr:`time_s`, of every decode line fed before;
    zero at the first one); ``t_end − t_start`` is the window's time, prefill and idle time
    inside untimed lines included.  ``lines``: decode lines; ``iterations``: decode iterations
    (``lines × decode_log_interval``); ``tokens``: output tokens (``Σ R × interval × A``);
    ``request_rounds``: ``Σ R × interval``; ``accept_length``: tokens per request-round, bonus
    included; ``timed_tokens`` / ``timed_s``: tokens and seconds of the clean lines;
    ``prefill_tokens`` / ``prefill_s``: those of the with-prefill lines; ``tok_s``:
    ``timed_tokens / timed_s`` (None without a clean line); ``after_switch``: the
    first decode line after a switch (one line), to be discarded; ``first_line`` /
    ``last_line``: 0-based positions of its first and last decode line among the lines fed.
    """

    steps: int
    draft_tokens: int
    t_start: float
    t_end: float
    lines: int
    iterations: int
    tokens: float
    request_rounds: float
    timed_tokens: float
    timed_s: float
    after_switch: bool
    first_line: int
    last_line: int
    prefill_tokens: float = 0.0
    prefill_s: float = 0.0

    @property
    def accept_length(self) -> float | None:
        """Tokens per request-round (bonus included); None without rounds."""
        return self.tokens / self.request_rounds if self.request_rounds > 0 else None

    @property
    def tok_s(self) -> float | None:
        """Output tok/s over the clean lines; None without one."""
        return self.timed_tokens / self.timed_s if self.timed_s > 0 else None

    @property
    def time_s(self) -> float:
        """``t_end − t_start`` (s)."""
        return self.t_end - self.t_start


@dataclass(frozen=True)
class TierStats:
    """One tier over the kept windows (a ``summary.json`` RUN's ``tiers`` entry: :meth:`to_json`).

    ``verify_rounds``: request-rounds; ``output_tokens``: tokens (both rebuilt from the decode
    lines, rounded); ``accept_length``: tokens per request-round, bonus included;
    ``accept_rate``: accepted drafts ÷ (rounds × (the tier's draft tokens − 1)) — the tier's
    own draft tokens, not the launch's — None at steps 0 (no drafts); ``output_tok_s``:
    tokens ÷ seconds over the clean lines, or over the clean and with-prefill lines when the
    tier has no clean line (``timing`` says which: ``"clean"``, ``"with_prefill"``, None when
    neither); ``share``: the tier's fraction of the request-rounds of all tiers reported
    together.  Also ``windows``, ``lines``, ``iterations`` (decode iterations) and ``timed_s``
    (the seconds behind ``output_tok_s``).
    """

    speculative_num_steps: int
    speculative_num_draft_tokens: int
    verify_rounds: int
    output_tokens: int
    accept_length: float | None
    accept_rate: float | None
    output_tok_s: float | None
    share: float | None
    windows: int = 0
    lines: int = 0
    iterations: int = 0
    timed_s: float = 0.0
    timing: str | None = None

    def to_json(self) -> Tier:
        """The RUN ``tiers`` entry (:class:`specdash.results.Tier`): exactly ``speculative_num_steps``,
        ``speculative_num_draft_tokens``, ``verify_rounds``, ``output_tokens``, ``accept_length``,
        ``accept_rate``, ``output_tok_s``, ``share``."""
        return Tier(speculative_num_steps=self.speculative_num_steps,
                    speculative_num_draft_tokens=self.speculative_num_draft_tokens,
                    verify_rounds=self.verify_rounds, output_tokens=self.output_tokens,
                    accept_length=self.accept_length, accept_rate=self.accept_rate,
                    output_tok_s=self.output_tok_s, share=self.share)


@dataclass
class _Line:
    """One decode line, attributed."""

    steps: int | None
    draft_tokens: int | None
    pos: int
    rounds: float
    tokens: float
    dt: float  # 0 when unknown (no throughput)
    timing: str  # "clean" | "prefill" | "idle"
    after_switch: bool


def _rank0(prefix: dict[str, int]) -> bool:
    return prefix.get("TP", 0) == 0 and prefix.get("PP", 0) == 0


#: Decode batches after a switch whose results still belong to the old tier
#: (:data:`specdash.sglang.adaptive.OVERLAP_REPORT_LAG_BATCHES`); the tracker discards
#: ceil(this / log interval) lines after each switch: two at interval 1, one (which mixes both
#: tiers) at longer intervals.  Discarding more than needed is never wrong.
SWITCH_LAG_BATCHES = OVERLAP_REPORT_LAG_BATCHES


class TierTracker:
    """Attribute decode lines to step tiers (see the module docstring).

    Args:
        launch_steps / launch_draft_tokens: the tier before the first switch (the launch's
            ``speculative_num_steps`` / ``speculative_num_draft_tokens``; draft tokens default
            to steps + 1).  None: taken from the first switch line's old side; decode lines
            before it stay unattributed until then (and are dropped when no switch comes).
        decode_log_interval: the server's ``--decode-log-interval`` (iterations per decode line).
        switch_lag_batches: decode batches after a switch that still report the old tier
            (:data:`SWITCH_LAG_BATCHES`); ceil(batches / interval) lines are discarded, at least 1.

    :meth:`feed` each log line in order (any prefix, trailing newline allowed); lines before
    the stretch to measure go through :meth:`skip`, which follows switches and batch lines
    without counting anything.  ``switches`` counts the switch lines fed (not skipped).
    """

    def __init__(self, launch_steps: int | None = None, launch_draft_tokens: int | None = None, *,
                 decode_log_interval: int = DEFAULT_DECODE_LOG_INTERVAL,
                 switch_lag_batches: int = SWITCH_LAG_BATCHES) -> None:
        self.interval = max(1, int(decode_log_interval or 1))
        self.switch_lag = max(1, -(-int(switch_lag_batches) // self.interval))  # lines to discard
        self.steps: int | None = None if launch_steps is None else int(launch_steps)
        if launch_draft_tokens is not None:
            self.draft_tokens: int | None = int(launch_draft_tokens)
        else:
            self.draft_tokens = None if launch_steps is None else int(launch_steps) + 1
        self.switches = 0
        self.decode_lines = 0
        self.unattributed = 0
        self._lines: list[_Line] = []
        self._lag_left = 0  # decode lines still to be marked after_switch since the last switch
        self._since_decode: str = "idle"  # what the next decode line's window holds: clean / prefill / idle

    # -- input ------------------------------------------------------------------------------------
    def feed(self, line: str) -> None:
        """Read one log line: a decode line is attributed and counted, a switch changes the tier."""
        self._read(line, count=True)

    def feed_lines(self, lines: Iterable[str]) -> TierTracker:
        """:meth:`feed` each of ``lines``; returns self."""
        for ln in lines:
            self._read(ln, count=True)
        return self

    def skip(self, line: str) -> None:
        """Follow one line before the measured stretch: switches move the tier (and mark the next
        decode line as after-switch), batch lines set the timing state; nothing is counted."""
        self._read(line, count=False)

    def _read(self, line: str, *, count: bool) -> None:
        if "batch" in line:
            s = parse_line(line)
            if isinstance(s, DecodeSample):
                if _rank0(s.prefix):
                    self._decode(s, count)
                return
            if isinstance(s, PrefillSample):
                if _rank0(s.prefix) and self._since_decode != "idle":
                    self._since_decode = "prefill" if s.running_req else "idle"
                return
        if "Switch adaptive" in line:
            ev = parse_adaptive_line(line)
            if ev is None or ev.kind != "switch":
                return
            if not _rank0(split_prefix(line)[1]):
                return
            if self.steps is None:  # the tier before the first switch: its old side
                self._resolve(int(ev.old_steps), int(ev.old_draft_tokens))
            self.steps, self.draft_tokens = int(ev.new_steps), int(ev.new_draft_tokens)
            self._lag_left = self.switch_lag
            if count:
                self.switches += 1

    def _resolve(self, steps: int, draft: int) -> None:
        for ln in self._lines:
            if ln.steps is None:
                ln.steps, ln.draft_tokens = steps, draft
        self.unattributed = 0

    def _decode(self, s: DecodeSample, count: bool) -> None:
        timing = self._since_decode
        self._since_decode = "clean"
        after = self._lag_left > 0
        self._lag_left = max(0, self._lag_left - 1)
        if not count:
            return
        pos = self.decode_lines
        self.decode_lines += 1
        running = s.running_req or 0
        al = s.accept_len if s.accept_len is not None and s.accept_len > 0 else 1.0
        rounds = float(running * self.interval)
        tokens = rounds * al
        g = s.gen_throughput
        dt = tokens / g if g and g > 0 else 0.0
        if self.steps is None:
            self.unattributed += 1
        self._lines.append(_Line(self.steps, self.draft_tokens, pos, rounds, tokens, dt,
                                 timing if dt > 0 else "idle", after))

    # -- output -----------------------------------------------------------------------------------
    def continued(self) -> TierTracker:
        """A fresh tracker that goes on where this one stands (same tier, interval and timing state, no
        lines): what follows is measured exactly as this tracker would have measured it."""
        nxt = TierTracker(self.steps, self.draft_tokens, decode_log_interval=self.interval)
        nxt.switch_lag = self.switch_lag
        nxt._lag_left = self._lag_left
        nxt._since_decode = self._since_decode
        return nxt

    @property
    def settled(self) -> bool:
        """True when no decode line after the last switch is still to be discarded (a clean place
        to stop this tracker and start another in the same tier)."""
        return self._lag_left == 0

    @property
    def last_decode(self) -> tuple[int | None, bool] | None:
        """``(steps, after_switch)`` of the last decode line fed (steps None while unattributed);
        None before the first one."""
        if not self._lines:
            return None
        ln = self._lines[-1]
        return ln.steps, ln.after_switch

    def windows(self) -> list[TierWindow]:
        """The decode lines grouped into windows, in log order: a window is the run of consecutive
        decode lines in one tier; each of the first ceil(``switch_lag_batches`` / interval) lines after a switch is a
        window of its own (``after_switch``).  Unattributed lines (no launch tier, no switch yet) are left out."""
        out: list[TierWindow] = []
        clock = 0.0
        cur: list[_Line] = []
        start = 0.0

        def close() -> None:
            if not cur:
                return
            f = cur[0]
            dt = sum(x.dt for x in cur)
            out.append(TierWindow(
                steps=int(f.steps), draft_tokens=int(f.draft_tokens), t_start=start, t_end=start + dt,
                lines=len(cur), iterations=len(cur) * self.interval, tokens=sum(x.tokens for x in cur),
                request_rounds=sum(x.rounds for x in cur),
                timed_tokens=sum(x.tokens for x in cur if x.timing == "clean"),
                timed_s=sum(x.dt for x in cur if x.timing == "clean"), after_switch=f.after_switch,
                first_line=f.pos, last_line=cur[-1].pos,
                prefill_tokens=sum(x.tokens for x in cur if x.timing == "prefill"),
                prefill_s=sum(x.dt for x in cur if x.timing == "prefill")))

        for ln in self._lines:
            if ln.steps is None:
                clock += ln.dt
                continue
            if cur and (ln.after_switch or cur[0].after_switch or (ln.steps, ln.draft_tokens)
                        != (cur[0].steps, cur[0].draft_tokens)):
                close()
                cur = []
            if not cur:
                start = clock
            cur.append(ln)
            clock += ln.dt
        close()
        return out

    def per_tier(self, discard_after_switch: bool = True) -> list[TierStats]:
        """One :class:`TierStats` per tier seen, by steps (see :func:`tier_stats`)."""
        return tier_stats(self.windows(), discard_after_switch=discard_after_switch)


def _tier(steps: int, draft: int, rounds: float, tokens: float, t_tok: float, t_s: float, total: float, *,
          windows: int, lines: int, iterations: int, timing: str | None) -> TierStats:
    """One tier's :class:`TierStats` from its sums (the one place the ratios are formed)."""
    per_round = draft - 1
    return TierStats(
        speculative_num_steps=steps, speculative_num_draft_tokens=draft, verify_rounds=round(rounds),
        output_tokens=round(tokens), accept_length=tokens / rounds if rounds > 0 else None,
        accept_rate=((tokens - rounds) / (rounds * per_round)) if (rounds > 0 and steps > 0 and per_round > 0)
        else None,
        output_tok_s=t_tok / t_s if t_s > 0 else None, share=rounds / total if total > 0 else None,
        windows=windows, lines=lines, iterations=iterations, timed_s=t_s, timing=timing)


def tier_stats(windows: Sequence[TierWindow], *, discard_after_switch: bool = True) -> list[TierStats]:
    """Pool ``windows`` by tier (steps, draft tokens), ascending steps; ``after_switch`` windows
    left out unless ``discard_after_switch`` is False.  ``share`` is over the pooled tiers."""
    pools: dict[tuple[int, int], list[TierWindow]] = {}
    for w in windows:
        if discard_after_switch and w.after_switch:
            continue
        pools.setdefault((w.steps, w.draft_tokens), []).append(w)
    total = sum(w.request_rounds for ws in pools.values() for w in ws)
    out = []
    for (steps, draft), ws in sorted(pools.items()):
        rounds = sum(w.request_rounds for w in ws)
        tokens = sum(w.tokens for w in ws)
        t_tok, t_s = sum(w.timed_tokens for w in ws), sum(w.timed_s for w in ws)
        timing = "clean" if t_s > 0 else None
        if t_s <= 0:
            t_tok, t_s = sum(w.prefill_tokens for w in ws), sum(w.prefill_s for w in ws)
            timing = "with_prefill" if t_s > 0 else None
        out.append(_tier(steps, draft, rounds, tokens, t_tok, t_s, total, windows=len(ws),
                         lines=sum(w.lines for w in ws), iterations=sum(w.iterations for w in ws), timing=timing))
    return out


def merge_tier_stats(*groups: Sequence[TierStats]) -> list[TierStats]:
    """Pool :class:`TierStats` of consecutive stretches (e.g. a tracker rolled over to bound its memory)
    into one list, by tier: rounds, tokens, seconds and line counts add; accept length, accept rate,
    tok/s and share are recomputed from the sums (tok/s from ``output_tok_s × timed_s``, the timed
    tokens; ``timing`` is ``"clean"`` only when every part was)."""
    pools: dict[tuple[int, int], list[TierStats]] = {}
    for group in groups:
        for t in group:
            pools.setdefault((t.speculative_num_steps, t.speculative_num_draft_tokens), []).append(t)
    total = sum(t.verify_rounds for ts in pools.values() for t in ts)
    out = []
    for (steps, draft), ts in sorted(pools.items()):
        rounds = sum(t.verify_rounds for t in ts)
        tokens = sum(t.output_tokens for t in ts)
        timed_s = sum(t.timed_s for t in ts if t.output_tok_s is not None)
        timed_tok = sum(t.output_tok_s * t.timed_s for t in ts if t.output_tok_s is not None)
        timings = {t.timing for t in ts if t.timing}
        out.append(_tier(steps, draft, rounds, tokens, timed_tok, timed_s, total, windows=sum(t.windows for t in ts),
                         lines=sum(t.lines for t in ts), iterations=sum(t.iterations for t in ts),
                         timing=("clean" if timings == {"clean"} else "with_prefill" if timings else None)))
    return out


def paired_windows(windows: Sequence[TierWindow], a: int, b: int, *, discard_after_switch: bool = True,
                   require_timing: bool = True) -> list[tuple[TierWindow, TierWindow]]:
    """Pairs ``(window of tier a, the next window of tier b)`` for paired comparisons at the same load.

    ``a`` / ``b``: step counts.  After-switch windows are left out first (unless
    ``discard_after_switch`` is False) and, with ``require_timing``, windows without a tok/s.
    Pairs are disjoint: scanning in log order, a tier-``b`` window pairs with the latest unpaired
    tier-``a`` window before it (an older unpaired ``a`` window is dropped for the newer one, so
    the two sides of a pair are as close in time as the log allows).
    """
    pending: TierWindow | None = None
    out: list[tuple[TierWindow, TierWindow]] = []
    for w in windows:
        if (discard_after_switch and w.after_switch) or (require_timing and w.tok_s is None):
            continue
        if w.steps == a:
            pending = w
        elif w.steps == b and pending is not None:
            out.append((pending, w))
            pending = None
    return out


def split_pair_histogram(hist: Sequence[int], a: int, b: int, share_a: float) -> tuple[list[int], list[int]] | None:
    """The verify-round histograms of two chain tiers a < b from the one histogram SGLang pools over them.

    One adaptive launch's requests report one correct-drafts histogram (``spec_correct_drafts_histogram``,
    index k = rounds that accepted k drafts) over the rounds of both tiers.  A chain's P(k accepted) for
    k < a does not depend on its steps (positions 1..a are drafted alike), so those buckets split by the
    tiers' shares of the rounds (``share_a``: tier a's, from the decode lines); tier a's rounds that
    accepted all a drafts are the rest of its rounds, n_a · (1 − Σ_{k<a} h[k] / N); bucket a minus those,
    and every bucket above a, are tier b's.  Returns (h_a, h_b) rounded to counts (h_a of length a + 1,
    h_b of b + 1), or None when the histogram cannot be split (no rounds, a < 1, a ≥ b, buckets past b,
    a share outside (0, 1)).
    """
    h = [max(0, int(c)) for c in hist]
    n = sum(h)
    if n <= 0 or a < 1 or a >= b or len(h) > b + 1 or not 0.0 < share_a < 1.0:
        return None
    h += [0] * (b + 1 - len(h))
    n_a = share_a * n
    below = [h[k] / n for k in range(a)]
    ha = [n_a * p for p in below] + [max(0.0, n_a * (1.0 - sum(below)))]
    hb = [(n - n_a) * p for p in below] + [max(0.0, h[a] - ha[a])] + [float(c) for c in h[a + 1:]]
    return [round(x) for x in ha], [round(x) for x in hb]
