"""What a load sweep is made of: its axes, its points, their labels, and where its speedup curve crosses 1.

The vocabulary of ``--sweep concurrency=1,4,16`` / ``--sweep request_rate=2,8,32`` (:func:`parse_sweep`,
:class:`Sweep`, :func:`point_label`, :func:`axis_name`), the per-point thresholds (:data:`RATE_POINT_S`,
:data:`SATURATED_BELOW`, :data:`HELD_BACK_BELOW`), the served rate of a point's records
(:func:`served_rate`), the break-even (:func:`break_even`) and the readers of a ``sweep.json`` payload
(:func:`sweep_var`, :func:`break_even_of`).  Plain data and arithmetic, below the runner (which sizes
rate points with :data:`RATE_POINT_S`), the reports and the sweep itself (:mod:`specdash.bench.sweep`).

Two load axes, as SGLang's ``bench_serving`` and vLLM's ``bench serve`` spell them:

* ``concurrency``: closed loop, that many requests in flight (``--max-concurrency`` there); a point sends
  at least 2 × concurrency requests so its batch stays full.
* ``request_rate``: open loop, Poisson arrivals at that many requests/s (gamma with ``--burstiness``;
  ``--concurrency`` then caps the requests in flight, none by default); a point sends at least
  :data:`RATE_POINT_S` seconds of arrivals.  Past a side's capacity its queue grows for as long as the
  point runs: each point says, per side, the fraction of the arrivals it served (:func:`served_rate`) and
  which sides were *saturated* (below :data:`SATURATED_BELOW`); there the paired per-request speedup is not
  a steady state (it depends on the point's length) and the note points to the throughput ratio.
  Speculation usually saturates first (each step costs more), so its break-even rate sits near its own
  capacity.

Break-even (:func:`break_even`): speedup falls with the batch (drafting and verifying cost more per token as
the target's forward pass stops being memory-bound; sglang#5160).  The break-even load is where the speedup
curve first crosses 1 going down, interpolated linearly in log2(load) between the two points around the
crossing; its interval is where the upper and the lower confidence bounds cross 1 (the load from which
speculation surely stops paying, and up to which it surely pays).  No crossing in the swept range → None,
with a note saying which side of 1 the whole curve is on.

Units: concurrency in requests in flight; request rate in requests/s; tok/s output tokens per second.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specdash.bounded import MIN_REQUEST_RATE

#: The sweep's result (the ``--json`` payload without the RUNs), written into the profile's run directory.
SWEEP_FILE = "sweep.json"


#: The load axes a sweep can vary (the RUN's and the point's key for the swept value).
SWEEP_VARS = ("concurrency", "request_rate")
#: Seconds of arrivals a ``request_rate`` point sends at least (its requests: ⌈rate × this⌉, or more
#: when the suite × repeats has more).
RATE_POINT_S = 10.0
#: A side of a rate point is *saturated* when it served fewer than this fraction of the arrival rate
#: (:func:`served_rate` over the achieved rate): its queue grows for as long as the point runs.
SATURATED_BELOW = 0.9
#: A side of a rate point whose requests went out at less than this fraction of the asked rate was *held
#: back* by the client's in-flight cap (``--concurrency``): that side did not see the asked load.
HELD_BACK_BELOW = 0.9
#: The lowest rate a ``request_rate`` sweep takes (requests/s).
MIN_SWEEP_RATE = MIN_REQUEST_RATE
#: The most points one ``--sweep`` takes.
MAX_SWEEP_POINTS = 64


def served_rate(records: Sequence[dict[str, Any]]) -> tuple[float | None, float | None]:
    """``(arrival rate, served rate)`` of one point's records, in requests/s: (n − 1) over the span of the
    send times (``ts_sent``), and over the span of the finish times (``ts_done``) of the ``n`` answered
    requests.  A server keeping up finishes requests as fast as they arrive (the two agree); one past its
    capacity finishes them at its capacity, however fast they come.  None where fewer than 3 requests
    were answered or a span is 0."""
    ok = [r for r in records if r.get("ok") and isinstance(r.get("ts_sent"), (int, float))
          and isinstance(r.get("ts_done"), (int, float))]
    if len(ok) < 3:
        return None, None
    sent, done = [r["ts_sent"] for r in ok], [r["ts_done"] for r in ok]
    span_s, span_d = max(sent) - min(sent), max(done) - min(done)
    return ((len(ok) - 1) / span_s if span_s > 0 else None, (len(ok) - 1) / span_d if span_d > 0 else None)


def served_fraction(records: Sequence[dict[str, Any]]) -> float | None:
    """Served over arrival rate of one side of a rate point (:func:`served_rate`); None when unknown."""
    arrival, served = served_rate(records)
    return served / arrival if arrival and served else None


@dataclass(frozen=True)
class Sweep:
    """A parsed ``--sweep``: ``var`` (one of :data:`SWEEP_VARS`) and its ``points`` (sorted, unique;
    ints for concurrency, floats in requests/s for the rate)."""

    var: str
    points: tuple

    def label(self, x) -> str:
        """A point as the tables write it: ``c16`` or ``8/s``."""
        return point_label(self.var, x)


def point_label(var: str, x) -> str:
    """``c16`` (concurrency 16) or ``8/s`` (request rate 8 requests/s); ``?`` for a missing value."""
    if not isinstance(x, (int, float)):
        return "?"
    return f"{x:g}/s" if var == "request_rate" else f"c{x}"


def _prose(var: str, x) -> str:
    return f"{x:g} requests/s" if var == "request_rate" else f"{int(x)}"


def axis_name(var: str) -> str:
    """``concurrency`` or ``request rate`` (prose)."""
    return "request rate" if var == "request_rate" else "concurrency"


def parse_sweep(text: str) -> Sweep:
    """``concurrency=1,4,16`` → ``Sweep("concurrency", (1, 4, 16))``; ``request_rate=2,0.5,8`` →
    ``Sweep("request_rate", (0.5, 2.0, 8.0))`` (sorted, unique; ``request-rate`` is accepted too).

    Raises:
        ValueError: another variable, a non-integer concurrency, one below 1 or above
            :data:`specdash.bounded.MAX_CONCURRENCY`, a rate that is not a finite number > 0 (``inf`` sends
            everything at once: it is one point, not a curve) or outside :data:`MIN_SWEEP_RATE` …
            :data:`specdash.bounded.MAX_REQUEST_RATE`, fewer than two points or more than
            :data:`MAX_SWEEP_POINTS`.  Each message gives the limit.
    """
    var, _, values = text.partition("=")
    var = var.strip().replace("-", "_")
    if var not in SWEEP_VARS or not values.strip():
        raise ValueError("--sweep takes concurrency=N,N,… (closed loop, e.g. concurrency=1,4,16) or "
                         f"request_rate=R,R,… (open loop, requests/s, e.g. request_rate=2,8,32), got {text[:80]!r}")
    from specdash.bounded import MAX_CONCURRENCY, MAX_REQUEST_RATE

    raw = [v.strip() for v in values.split(",") if v.strip()]
    if len(raw) > MAX_SWEEP_POINTS:
        raise ValueError(f"--sweep takes at most {MAX_SWEEP_POINTS} points (got {len(raw)}): each point runs the "
                         "suite at least twice over")
    if var == "concurrency":
        try:
            pts = sorted({int(v) for v in raw})
        except ValueError:
            raise ValueError(f"--sweep concurrency values must be integers (got {values[:80]!r})") from None
        if len(pts) < 2 or pts[0] < 1:
            raise ValueError(f"--sweep needs two or more distinct concurrencies ≥ 1 (got {values[:80]!r})")
        if pts[-1] > MAX_CONCURRENCY:
            raise ValueError(f"--sweep concurrency {pts[-1]:,} is above {MAX_CONCURRENCY:,}, the most requests "
                             "specdash keeps in flight (SGLang's default max_running_requests tops out there; "
                             "more only waits in its queue)")
        return Sweep(var, tuple(pts))
    try:
        rates = sorted({float(v) for v in raw})
    except (ValueError, OverflowError):
        raise ValueError(f"--sweep request_rate values must be numbers of requests/s (got {values[:80]!r})") from None
    if any(not math.isfinite(r) or r <= 0 for r in rates):
        raise ValueError(f"--sweep request rates must be finite and > 0 requests/s (got {values[:80]!r}); for all "
                         "requests at once run one --request-rate inf")
    if rates[0] < MIN_SWEEP_RATE:
        raise ValueError(f"--sweep request rate {rates[0]:g}/s is below {MIN_SWEEP_RATE:g}/s: a point sends every prompt "
                         "of the suite at least once, which at that rate takes hours (5 prompts at 0.01/s: ~8 min)")
    if rates[-1] > MAX_REQUEST_RATE:
        raise ValueError(f"--sweep request rate {rates[-1]:g}/s is above {MAX_REQUEST_RATE:g}/s: a point sends "
                         f"{RATE_POINT_S:g} s of arrivals, {rates[-1] * RATE_POINT_S:,.0f} requests at that rate; "
                         f"sweep up to {MAX_REQUEST_RATE:g}/s")
    if len(rates) < 2:
        raise ValueError(f"--sweep needs two or more distinct request rates (got {values[:80]!r})")
    return Sweep(var, tuple(rates))


def _crossing(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """The first x where ``ys`` goes from ≥ 1 to < 1, linear in log2(x) between the two points."""
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if y0 is None or y1 is None:
            continue
        if y0 >= 1.0 > y1:
            l0, l1 = math.log2(x0), math.log2(x1)
            f = (y0 - 1.0) / (y0 - y1)
            return 2.0 ** (l0 + f * (l1 - l0))
    return None


def break_even(points: Sequence[dict[str, Any]], var: str = "concurrency", *, subject: str | None = None
               ) -> tuple[float | None, list[float | None] | None, str]:
    """``(break-even load, [low, high] interval, note)`` from sweep points with ``var`` (the swept value:
    ``concurrency`` or ``request_rate``), ``speedup`` and ``ci95`` (see the module docstring).  An
    interval end is None when its bound does not cross 1 in the swept range.  ``subject``: what the
    speedup is of, for the note (None: speculation over its baseline; e.g. ``"B (x) over A (y)"`` for
    ``specdash compare``, where either side may be the speculative one)."""
    pts = [p for p in points if p.get("speedup") is not None and p.get(var) is not None]
    if len(pts) < 2:
        return None, None, "fewer than two points with a speedup: no curve"
    xs = [float(p[var]) for p in pts]
    mid = _crossing(xs, [p["speedup"] for p in pts])
    lo_end = _crossing(xs, [(p.get("ci95") or [None, None])[0] for p in pts])
    hi_end = _crossing(xs, [(p.get("ci95") or [None, None])[1] for p in pts])
    name = axis_name(var)
    pays, loses = (("speculation pays", "speculation does not pay") if subject is None
                   else (f"{subject} is faster", f"{subject} is not faster"))
    if mid is None:
        cis = [p.get("ci95") for p in pts]
        if all(ci and ci[0] is not None and ci[1] is not None and ci[0] <= 1.0 <= ci[1] for ci in cis):
            note = (f"no significant difference at any swept {name} (every 95 % interval holds 1): no break-even "
                    "to find in this range")
        elif all(p["speedup"] >= 1.0 for p in pts):
            last = pts[-1]
            note = f"{pays} at every swept {name} (up to {_prose(var, last[var])})" + (
                "" if last.get("saturated") else ": sweep higher to find the break-even")
        elif all(p["speedup"] < 1.0 for p in pts):
            note = f"{loses} at any swept {name} (from {_prose(var, pts[0][var])})"
        else:
            note = "the speedup curve does not fall through 1 (it rises with load): no break-even"
        return None, ([lo_end, hi_end] if (lo_end or hi_end) else None), note
    at = f"{mid:.1f}" if var == "concurrency" else f"{mid:.3g} requests/s"
    stops = "speculation stops paying" if subject is None else f"{subject} stops being faster"
    return mid, [lo_end, hi_end], f"{stops} at about {name} {at}"


def throughput_ratio(tok_s: float | None, baseline_tok_s: float | None) -> float | None:
    """A point's ``throughput_ratio``: its output tok/s over the baseline's (None unless both are known and
    non-zero) — in open loop the answer where the per-request speedup is not a steady state."""
    return tok_s / baseline_tok_s if tok_s and baseline_tok_s else None


def sweep_var(payload: dict[str, Any]) -> str:
    """The axis of a sweep payload (``sweep.json``; files written before rate sweeps existed have no
    ``variable``: concurrency)."""
    var = payload.get("variable")
    return var if var in SWEEP_VARS else "concurrency"


def break_even_of(payload: dict[str, Any]) -> float | None:
    """The break-even load of a sweep payload, on its axis."""
    return payload.get(f"break_even_{sweep_var(payload)}")
