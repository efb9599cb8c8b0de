"""The adaptive-aware fields of a ``summary.json`` RUN: ``tiers``, ``adaptive``, ``acceptance_simulated``,
``device_time_s``, ``decode_iterations``, and the tier mix behind the pooled ``accept_rate``.

:func:`run_fields` builds them from what one run saw: the profile's flags and environment,
``/server_info``, the server log (the run's window: the lines between the run's first request
and its last response; the lines before it only set the tier in force and the timing state,
see :meth:`specdash.collect.tiers.TierTracker.skip`) and the ``/metrics`` scrapes before and
after the run.

* ``adaptive`` = ``{"enabled", "config", "switches"}``: ``enabled`` is SGLang's
  ``speculative_adaptive`` after its start-up checks (``/server_info``; read with
  :func:`specdash.sglang.adaptive.read_internal_state`), or — for a server that does not report
  it — the profile's ``--speculative-adaptive`` confirmed by the controller's start-up or switch
  lines in the log; ``config`` is the config as :func:`specdash.sglang.adaptive.parse_config`
  reads it for the judged release (``--speculative-adaptive-config``, else the release's
  default; :meth:`~specdash.sglang.adaptive.AdaptiveConfig.to_json`), None when off or
  unreadable; ``switches`` counts ``Switch adaptive runtime state`` lines in the run window
  (None without a log, 0 when off).
* ``tiers``: None without adaptive; else one entry per tier that ran in the window
  (:meth:`specdash.collect.tiers.TierStats.to_json`), an empty list when there is no log to
  read (an attached server).
* ``acceptance_simulated``: ``SGLANG_SIMULATE_ACC_LEN`` set to a length SGLang simulates in the
  server's environment (:func:`specdash.sglang.simulate.acceptance_simulated`).
* ``device_time_s``: ``{category: seconds}`` deltas of ``sglang:forward_execution_seconds_total``
  over the run (SGLang's device timer, ``SGLANG_ENABLE_METRICS_DEVICE_TIMER=1``), None when the
  server does not export it or its counters reset.
* ``device_time_s`` reads one TP replica per scheduler group (:mod:`specdash.sglang.metrics`): with
  ``--enable-metrics-for-all-schedulers`` every TP rank exports its own copy, which is not summed.
* ``ranks``: with more than one scheduler rank in ``/metrics`` (``--enable-metrics-for-all-schedulers``,
  DP or PP ranks), one entry per rank (:func:`rank_breakdown`): its device-timer seconds and decode
  tokens over the run, so one slow or idle rank shows; None with a single rank.
* ``decode_iterations``: batch-level decode iterations (verify rounds of the whole batch) in
  the run window, ``Decode batch`` lines × ``--decode-log-interval``; None without a log.

The pooled ``accept_rate`` under adaptive: SGLang's per-request ``spec_accept_rate`` divides by
the *launch* draft tokens whatever tier ran the round, so it is recomputed as Σ correct drafts /
(Σ verify rounds × the drafts a request-round proposed on average), that average being
Σ over tiers of ``share × (draft tokens − 1)`` (:attr:`RunAdaptive.proposed_per_round`; the
tier's own draft tokens).  It is None when the tiers are unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specdash.collect.tiers import DEFAULT_DECODE_LOG_INTERVAL, TierStats, TierTracker
from specdash.results import AdaptiveFields
from specdash.sglang.adaptive import (
    AdaptiveConfigError,
    flag_int,
    parse_adaptive_line,
    parse_config,
    read_internal_state,
)

__all__ = ["RunAdaptive", "device_time", "run_fields"]


@dataclass
class RunAdaptive:
    """What :func:`run_fields` found (the RUN fields are :meth:`fields`)."""

    enabled: bool = False
    asked: bool = False
    config: dict | None = None
    switches: int | None = None
    tiers: list[TierStats] | None = None
    decode_iterations: int | None = None
    acceptance_simulated: bool = False
    device_time_s: dict[str, float] | None = None
    ranks: list[dict[str, Any]] | None = None
    tracker: TierTracker | None = field(default=None, repr=False)
    #: ``[first, end)`` line indices of ``server.log`` (as ``ServerProcess.log_lines`` splits it) the
    #: run's window covers; None without a log
    log_window: tuple[int, int] | None = None

    @property
    def proposed_per_round(self) -> float | None:
        """Drafts proposed per request-round over the run's tiers: Σ share × (draft tokens − 1);
        None without tiers."""
        if not self.tiers:
            return None
        shares = [(t.share or 0.0, max(0, t.speculative_num_draft_tokens - 1)) for t in self.tiers]
        total = sum(s for s, _ in shares)
        return sum(s * d for s, d in shares) / total if total > 0 else None

    def fields(self) -> AdaptiveFields:
        """``tiers``, ``adaptive``, ``device_time_s``, ``ranks``, ``decode_iterations``, ``log_window`` for the RUN
        (``log_window``: the run's ``[first, end)`` lines of ``server.log``; a sweep point's own stretch)."""
        return {
            "tiers": [t.to_json() for t in self.tiers] if self.enabled and self.tiers is not None
            else ([] if self.enabled else None),
            "adaptive": {"enabled": self.enabled, "config": self.config if self.enabled else None,
                         "switches": self.switches if self.enabled else 0},
            "device_time_s": self.device_time_s,
            "ranks": self.ranks,
            "decode_iterations": self.decode_iterations,
            "log_window": list(self.log_window) if self.log_window is not None else None,
        }


def device_time(metrics_before: str | None, metrics_after: str | None) -> dict[str, float] | None:
    """``{category: seconds}`` of the device timer over a run (see the module docstring)."""
    from specdash.sglang.metrics import counter_deltas_by, parse_metrics

    if not metrics_before or not metrics_after:
        return None
    try:
        return counter_deltas_by(parse_metrics(metrics_before), parse_metrics(metrics_after),
                                 "forward_execution_seconds", "category")
    except ValueError:
        return None


#: A rank whose device time exceeds the median of the ranks by this fraction is called out as slow.
SLOW_RANK_ABOVE = 0.10


def rank_breakdown(metrics_before: str | None, metrics_after: str | None) -> list[dict[str, Any]] | None:
    """Per scheduler rank over a run, when ``/metrics`` carries more than one (``dp_rank`` /
    ``pp_rank`` / ``tp_rank`` series): ``[{"dp_rank", "pp_rank", "tp_rank", "device_time_s",
    "decode_tokens", "vs_median"}]`` sorted by rank — ``device_time_s`` the Δ of
    ``sglang:forward_execution_seconds_total`` over all categories (s, None without the device timer),
    ``decode_tokens`` the Δ of ``sglang:realtime_tokens_total{mode="decode"}``, ``vs_median`` the
    rank's device time over the ranks' median (a TP rank that waits less in the collectives than its
    peers, or a DP rank with more work, stands out; :data:`SLOW_RANK_ABOVE`).  None with one rank, no
    scrapes, or counters that reset."""
    from statistics import median

    from specdash.sglang.metrics import parse_metrics, rank_deltas

    if not metrics_before or not metrics_after:
        return None
    try:
        a, b = parse_metrics(metrics_before), parse_metrics(metrics_after)
    except ValueError:
        return None
    dev = rank_deltas(a, b, "forward_execution_seconds")
    tok = rank_deltas(a, b, "realtime_tokens", mode="decode")
    keys = sorted(set(dev or {}) | set(tok or {}), key=lambda k: tuple(int(x) if x.isdigit() else -1 for x in k))
    if len(keys) < 2:
        return None
    med = median(dev.values()) if dev else None
    out = []
    for k in keys:
        d = dev.get(k) if dev else None
        out.append({"dp_rank": k[0] or None, "pp_rank": k[1] or None, "tp_rank": k[2] or None,
                    "device_time_s": d, "decode_tokens": tok.get(k) if tok else None,
                    "vs_median": d / med if d is not None and med else None})
    return out


def slow_ranks(ranks: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    """The entries of :func:`rank_breakdown` whose device time is more than :data:`SLOW_RANK_ABOVE`
    above the median."""
    return [r for r in ranks or () if r.get("vs_median") is not None and r["vs_median"] > 1 + SLOW_RANK_ABOVE]


def rank_label(r: Mapping[str, Any]) -> str:
    """``TP1``, ``DP0 TP4``, ``PP1 TP0`` … (the labels a rank carries)."""
    parts = [f"{n}{r[k]}" for n, k in (("DP", "dp_rank"), ("PP", "pp_rank"), ("TP", "tp_rank"))
             if r.get(k) is not None and not (k == "pp_rank" and r[k] == "0")]
    return " ".join(parts) or "rank"


def _adaptive_reported(info: Mapping[str, Any]) -> bool:
    if "speculative_adaptive" in info:
        return True
    states = info.get("internal_states")
    return bool(isinstance(states, list) and states and isinstance(states[0], dict)
                and "speculative_adaptive" in states[0])


def run_fields(*, flags: Mapping[str, Any], server_info: Mapping[str, Any] | None, version: str | None,
               log_lines: Sequence[str] | None, window_start: int = 0, log_base: int = 0,
               metrics_before: str | None = None, metrics_after: str | None = None,
               envs: Sequence[Mapping[str, str] | None] = ()) -> RunAdaptive:
    """The adaptive-aware RUN fields of one run (see the module docstring).

    Args:
        flags: the profile's canonical server flags (``specdash.profile.server_flags``).
        server_info: ``/server_info`` read after the server came up.
        version: the judged SGLang release (for the config's format and defaults).
        log_lines: the server log lines (None: no log, e.g. an attached server).
        window_start: index in ``log_lines`` of the first line after the run's first request
            was sent; ``log_base``: index of the first line of this server (earlier lines
            belong to an earlier launch into the same run directory).
        envs: the server's environment, highest precedence first (the profile's ``[env]``,
            then the environment a launched server inherits).
    """
    from specdash.sglang.simulate import acceptance_simulated

    info = dict(server_info or {})
    out = RunAdaptive(asked=bool(flags.get("--speculative-adaptive")),
                      acceptance_simulated=acceptance_simulated(*envs),
                      device_time_s=device_time(metrics_before, metrics_after),
                      ranks=rank_breakdown(metrics_before, metrics_after))
    lines = list(log_lines) if log_lines is not None else None
    state = read_internal_state(info) if info else None
    if state is not None and _adaptive_reported(info):
        out.enabled = bool(state.adaptive)
    elif out.asked and lines:
        kinds = {ev.kind for ev in (parse_adaptive_line(ln) for ln in lines[log_base:]
                                    if "daptive" in ln) if ev is not None}
        out.enabled = bool(kinds & {"initialized", "built", "switch"}) and "disabled" not in kinds
    interval = flag_int(info.get("decode_log_interval")) or flag_int(flags.get("--decode-log-interval")) \
        or DEFAULT_DECODE_LOG_INTERVAL
    if lines is not None:
        launch = state.launch_steps if state is not None else None
        draft = state.launch_draft_tokens if state is not None else None
        if launch is None:
            launch, draft = flag_int(flags.get("--speculative-num-steps")), flag_int(flags.get("--speculative-num-draft-tokens"))
        tr = TierTracker(launch, draft, decode_log_interval=interval)
        start = max(log_base, min(window_start, len(lines)))
        for ln in lines[log_base:start]:
            tr.skip(ln)
        for ln in lines[start:]:
            tr.feed(ln)
        out.tracker = tr
        out.log_window = (start, len(lines))
        out.decode_iterations = tr.decode_lines * tr.interval
        out.switches = tr.switches
        if out.enabled:
            out.tiers = tr.per_tier()
    if out.enabled:
        path = info.get("speculative_adaptive_config")
        if not isinstance(path, str) or not path:
            path = flags.get("--speculative-adaptive-config")
        if not isinstance(path, str) or not path:
            path = None
        if version:
            try:
                out.config = parse_config(path, version).to_json()
            except (AdaptiveConfigError, OSError, ValueError, TypeError):
                out.config = None
    return out
