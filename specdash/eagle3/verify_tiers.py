"""Post-launch verification under ``--speculative-adaptive``: which step tier each ``Decode batch`` line ran
(:func:`adaptive_view`, from ``/server_info`` ``internal_states``, the ``sglang:spec_num_steps`` gauge and the
adaptive log lines), so that steps-0 windows never read as a collapse.  Part of :mod:`specdash.eagle3.verify`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from specdash.sglang.adaptive import TierState, parse_adaptive_line, read_internal_state
from specdash.sglang.versions import parse_version

#: ``accept len: x`` in SGLang's decode lines (not ``ema_accept_len=``, the EMA of accepted drafts).
ACCEPT_RE = re.compile(r"(?<!ema_)accept[ _]len(?:gth)?\s*[:=]\s*([0-9.]+)")


# --- adaptive tiers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeWindow:
    """One ``Decode batch`` log line: ``accept_length`` over the window since the line before, and
    ``tiers``, the step counts that ran in it (None when the tier is unknown)."""

    line: int
    accept_length: float
    tiers: frozenset[int] | None = None

    @property
    def drafted(self) -> bool:
        """False only for a window served entirely at steps 0 (no drafting)."""
        return self.tiers is None or any(t > 0 for t in self.tiers)


@dataclass
class AdaptiveView:
    """What the server reports about its adaptive tiers (see :func:`adaptive_view`).

    ``adaptive``: speculative_adaptive is on after SGLang's start-up checks; ``disabled_reason``:
    SGLang's ``speculative_adaptive disabled: <reason>`` line when it turned it off; ``tier``: the
    ``/server_info`` read-back (:class:`~specdash.sglang.adaptive.TierState`); ``gauge_steps``: the
    ``sglang:spec_num_steps`` gauge; ``zero_tier``: a steps-0 tier exists; ``zero_served``: it
    ran (a window, a switch to 0, or the current tier); ``windows``: every decode line;
    ``switches``: switch lines seen; ``log_seen``: the log had decode lines.
    """

    adaptive: bool = False
    disabled_reason: str | None = None
    tier: TierState | None = None
    gauge_steps: int | None = None
    zero_tier: bool = False
    zero_served: bool = False
    windows: list[DecodeWindow] = field(default_factory=list)
    switches: int = 0
    log_seen: bool = False
    disabled_line: str | None = None

    @property
    def current_steps(self) -> int | None:
        """The tier the server runs now (``internal_states[0]``, else the gauge)."""
        if self.tier is not None and self.tier.current_steps is not None:
            return self.tier.current_steps
        return self.gauge_steps

    @property
    def tier_aware(self) -> bool:
        """True when steps-0 rounds may be pooled into the measurements (judge per tier)."""
        return self.adaptive and (self.zero_served or (self.zero_tier and not self.log_seen))


def _gauge(metrics: Any, name: str) -> float | None:
    if metrics is None:
        return None
    if isinstance(metrics, str):
        from specdash.sglang.metrics import parse_metrics

        try:
            metrics = parse_metrics(metrics)
        except ValueError:
            return None
    if hasattr(metrics, "get") and not isinstance(metrics, dict):
        return metrics.get(name)
    if isinstance(metrics, dict):
        v = metrics.get(name, metrics.get(name.removeprefix("sglang:")))
        return float(v) if isinstance(v, (int, float)) else None
    return None


def _zero_in_config(info: dict, version: str | None) -> bool:
    """Whether the config SGLang reports (``speculative_adaptive_config``, or the release's default)
    has a steps-0 candidate."""
    from specdash.sglang.adaptive import AdaptiveConfigError, parse_config

    if not version:
        return False
    path = info.get("speculative_adaptive_config")
    try:
        return 0 in parse_config(path if isinstance(path, str) else None, version).candidate_steps()
    except (AdaptiveConfigError, OSError, ValueError, TypeError):
        return False


def adaptive_view(server_info: dict | None, log_lines: list[str] | None, metrics: Any = None,
                  *, version: str | None = None) -> AdaptiveView:
    """Read the adaptive tiers from what the server reports.

    ``server_info``: ``/server_info`` (``speculative_adaptive``, ``internal_states[0]``);
    ``log_lines``: the server log (start-up ``Built adaptive runtime state steps=N`` lines, ``Switch
    adaptive runtime state`` lines, ``Decode batch`` lines with ``accept len``); ``metrics``:
    ``/metrics`` text, a :class:`~specdash.sglang.metrics.MetricsSnapshot` or ``{name: value}``;
    ``version``: the release (for its default config), else ``server_info["version"]``.
    Each decode window gets the tiers active since the decode line before: the tier at its start
    (the launch tier — the ``old`` side of the first switch, else the current one) plus every
    switch target inside it.
    """
    info = server_info or {}
    view = AdaptiveView(tier=read_internal_state(info) if info else None)
    g = _gauge(metrics, "sglang:spec_num_steps")
    view.gauge_steps = int(g) if g is not None else None
    events = []
    for i, raw in enumerate(log_lines or []):
        ev = parse_adaptive_line(raw)
        if ev is not None:
            events.append((i, ev))
    kinds = {ev.kind for _, ev in events}
    disabled = next((ev for _, ev in events if ev.kind == "disabled"), None)
    if disabled is not None:
        view.disabled_reason = disabled.reason
        view.disabled_line = disabled.line
    if "speculative_adaptive" in info or (view.tier is not None and view.tier.adaptive):
        view.adaptive = bool(view.tier.adaptive) if view.tier is not None else False
    else:
        view.adaptive = bool(kinds & {"initialized", "built", "switch", "update"}) and disabled is None
    if not view.adaptive:
        view.windows = [DecodeWindow(i, al) for i, al in _decode_lines(log_lines)]
        view.log_seen = bool(view.windows)
        return view
    ver = version or (str(info.get("version")) if info.get("version") else None)
    try:
        ver = str(parse_version(ver)) if ver else None
    except ValueError:
        ver = None
    built = {ev.new_steps for _, ev in events if ev.kind == "built"}
    cands = {s for _, ev in events if ev.kind == "initialized" for s in ev.candidate_steps}
    switches = [ev for _, ev in events if ev.kind == "switch"]
    view.switches = len(switches)
    view.zero_tier = 0 in built or 0 in cands or any(ev.new_steps == 0 for ev in switches) or \
        (not events and _zero_in_config(info, ver))
    if switches:
        cur = switches[0].old_steps
    elif view.tier is not None and view.tier.current_steps is not None:
        cur = view.tier.current_steps
    else:
        cur = view.tier.launch_steps if view.tier is not None else None
    by_line = dict(events)
    seen: set[int] = {cur} if cur is not None else set()
    for i, line in enumerate(log_lines or []):
        ev = by_line.get(i)
        if ev is not None and ev.kind == "switch":
            cur = ev.new_steps
            seen.add(cur)
            continue
        al = _decode_accept_length(line)
        if al is None:
            continue
        view.windows.append(DecodeWindow(i, al, frozenset(seen) if seen else None))
        seen = {cur} if cur is not None else set()
    view.log_seen = bool(view.windows)
    view.zero_served = any(w.tiers is not None and 0 in w.tiers for w in view.windows) or \
        any(ev.new_steps == 0 for ev in switches) or view.current_steps == 0
    view.zero_tier = view.zero_tier or view.zero_served
    return view


def _decode_accept_length(line: str) -> float | None:
    m = ACCEPT_RE.search(line)
    if not m:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


def _decode_lines(log_lines: list[str] | None) -> list[tuple[int, float]]:
    out = []
    for i, line in enumerate(log_lines or []):
        al = _decode_accept_length(line)
        if al is not None:
            out.append((i, al))
    return out


