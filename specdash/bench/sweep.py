"""Concurrency sweeps: the speedup of speculation against its baseline at each load, and the break-even
concurrency (``specdash --bench --profile P --sweep concurrency=1,4,16``).

One launch per side: the profile runs the suite at each concurrency of the sweep in turn inside one
server (:func:`specdash.bench.runner.run_sweep`: cache flushed before each point, one RUN per point),
then its no-speculation baseline does the same (``--baseline R``, or the profile without its
``[speculative]`` section: :func:`specdash.bench.tune.baseline_of`).  At each point the speedup is the
paired one of the A/B (:func:`specdash.bench.compare.build_comparison`: geometric mean of the per-request
output tok/s ratios, matched by prompt and repeat, BCa 95 % interval), so the curve has a confidence band.

Break-even (:func:`break_even`): speedup falls with the batch (drafting and verifying cost more per token as
the target's forward pass stops being memory-bound; sglang#5160).  The break-even concurrency is where the
speedup curve first crosses 1 going down, interpolated linearly in log2(concurrency) between the two
points around the crossing; its interval is where the upper and the lower confidence bounds cross 1
(the load from which speculation surely stops paying, and up to which it surely pays).  No crossing in
the swept range → None, with a note saying which side of 1 the whole curve is on.

Units: concurrency in requests in flight; tok/s output tokens per second.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The sweep's result (the ``--json`` payload without the RUNs), written into the profile's run directory.
SWEEP_FILE = "sweep.json"


def parse_sweep(text: str) -> list[int]:
    """``concurrency=1,4,16`` → ``[1, 4, 16]`` (sorted, unique).

    Raises:
        ValueError: another variable (``request_rate`` needs open-loop load, not built yet), a
            non-integer or a value below 1, or fewer than two points.
    """
    var, _, values = text.partition("=")
    var = var.strip().replace("-", "_")
    if var == "request_rate":
        raise ValueError("--sweep request_rate=… needs open-loop load (a request rate), which specdash does "
                         "not drive yet: sweep concurrency=… instead")
    if var != "concurrency" or not values.strip():
        raise ValueError(f"--sweep takes concurrency=N,N,… (e.g. concurrency=1,4,16), got {text!r}")
    try:
        points = sorted({int(v) for v in values.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"--sweep concurrency values must be integers (got {values!r})") from None
    if len(points) < 2 or points[0] < 1:
        raise ValueError(f"--sweep needs two or more concurrencies ≥ 1 (got {values!r})")
    return points


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


def break_even(points: Sequence[dict[str, Any]]) -> tuple[float | None, list[float | None] | None, str]:
    """``(break-even concurrency, [low, high] interval, note)`` from sweep points with ``concurrency``,
    ``speedup`` and ``ci95`` (see the module docstring).  An interval end is None when its bound does not
    cross 1 in the swept range."""
    pts = [p for p in points if p.get("speedup") is not None]
    if len(pts) < 2:
        return None, None, "fewer than two points with a speedup: no curve"
    xs = [float(p["concurrency"]) for p in pts]
    mid = _crossing(xs, [p["speedup"] for p in pts])
    lo_end = _crossing(xs, [(p.get("ci95") or [None, None])[0] for p in pts])
    hi_end = _crossing(xs, [(p.get("ci95") or [None, None])[1] for p in pts])
    if mid is None:
        if all(p["speedup"] >= 1.0 for p in pts):
            note = f"speculation pays at every swept concurrency (up to {int(xs[-1])}): sweep higher to find the break-even"
        elif all(p["speedup"] < 1.0 for p in pts):
            note = f"speculation does not pay at any swept concurrency (from {int(xs[0])})"
        else:
            note = "the speedup curve does not fall through 1 (it rises with load): no break-even"
        return None, ([lo_end, hi_end] if (lo_end or hi_end) else None), note
    return mid, [lo_end, hi_end], (f"speculation stops paying at about concurrency {mid:.1f}")


async def sweep_bench(profile, baseline, suite, opts, concurrencies: Sequence[int]) -> dict[str, Any]:
    """Run the sweep (see the module docstring); returns the ``--json`` payload: ``sweep`` (one point per
    concurrency: ``concurrency``, ``output_tok_s``, ``baseline_tok_s``, ``accept_length``, ``speedup``,
    ``ci95``, ``verdict``, ``pairs``, ``throughput_ratio``), ``break_even_concurrency``,
    ``break_even_ci95``, ``note``, ``runs`` (the profile's RUNs, then the baseline's) and ``run_dirs``.

    ``baseline``: the no-speculation profile, None to derive it from ``profile`` (nothing to derive
    when ``profile`` has no speculation), or False for none (``--baseline none``: tok/s per point only).

    Raises: as :func:`specdash.bench.runner.run_sweep`.
    """
    from specdash.bench.compare import build_comparison
    from specdash.bench.runner import run_sweep

    if baseline is False:
        baseline = None
    elif baseline is None and profile.spec_enabled:
        from specdash.bench.tune import baseline_of

        baseline = baseline_of(profile)
    runs, recs = await run_sweep(profile, suite, opts, concurrencies)
    base_runs: list[dict] = []
    base_recs: dict[int, list[dict]] = {}
    if baseline is not None:
        base_runs, base_recs = await run_sweep(baseline, suite, opts, concurrencies)
    base_by = {r["concurrency"]: r for r in base_runs}
    points = []
    for run in runs:
        c = run["concurrency"]
        b = base_by.get(c)
        pt: dict[str, Any] = {"concurrency": c, "output_tok_s": run.get("output_tok_s"),
                              "baseline_tok_s": b.get("output_tok_s") if b else None,
                              "accept_length": run.get("accept_length"), "speedup": None, "ci95": None,
                              "verdict": None, "pairs": 0, "throughput_ratio": None}
        if b is not None:
            cmp = build_comparison(base_recs.get(c, []), recs.get(c, []), a_name=baseline.name, b_name=profile.name)
            pt.update(speedup=cmp.get("speedup"), ci95=cmp.get("ci95"), verdict=cmp.get("verdict"),
                      pairs=cmp.get("pairs", 0))
            if run.get("output_tok_s") and b.get("output_tok_s"):
                pt["throughput_ratio"] = run["output_tok_s"] / b["output_tok_s"]
        points.append(pt)
    be, be_ci, note = break_even(points) if baseline is not None else (None, None, "no baseline: no speedup")
    payload = {"profile": profile.name, "baseline": baseline.name if baseline is not None else None,
               "sweep": points, "break_even_concurrency": be, "break_even_ci95": be_ci, "note": note,
               "runs": [*runs, *base_runs],
               "run_dirs": sorted({r["run_dir"] for r in [*runs, *base_runs]})}
    from specdash.bench.rundir import atomic_write_json

    # beside the profile's RUNs: what `specdash report` and the dashboard read back
    atomic_write_json(Path(runs[0]["run_dir"]) / SWEEP_FILE, {k: v for k, v in payload.items() if k != "runs"})
    return payload


def find_sweep(out_dir: Path, profile: str) -> dict | None:
    """The newest ``sweep.json`` of ``profile`` under ``out_dir`` (``*/sweep.json``, by run-directory
    name, which starts with its UTC stamp), with ``path`` added; None when there is none or it is
    unreadable."""
    for p in sorted(Path(out_dir).glob(f"*/{SWEEP_FILE}"), key=lambda q: q.parent.name, reverse=True):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("profile") == profile and isinstance(data.get("sweep"), list):
            return {**data, "path": str(p)}
    return None


def render_sweep(payload: dict[str, Any]) -> str:
    """The sweep as a text table, the break-even line and the note."""
    def f(v, nd=1):
        return "—" if v is None else f"{v:.{nd}f}"

    out = [f"sweep of {payload['profile']} against {payload.get('baseline') or 'no baseline'} "
           "(speedup: paired per-request tok/s ratio, geometric mean, 95 % CI)",
           "  conc   tok/s   baseline  accept len  speedup  95 % CI          verdict"]
    for p in payload["sweep"]:
        ci = p.get("ci95") or [None, None]
        out.append(f"  {p['concurrency']:>4}  {f(p['output_tok_s']):>7}  {f(p['baseline_tok_s']):>8}  "
                   f"{f(p['accept_length'], 2):>10}  {('×' + f(p['speedup'], 3)) if p['speedup'] else '—':>7}  "
                   f"[{f(ci[0], 3)}, {f(ci[1], 3)}]  {p.get('verdict') or '—'}"
                   + (f" ({p.get('pairs', 0)} pair{'s' if p.get('pairs', 0) != 1 else ''}: too few for an interval; "
                      "more repeats or prompts)" if p.get("speedup") and ci[0] is None else ""))
    be, ci = payload.get("break_even_concurrency"), payload.get("break_even_ci95")
    if be is not None:
        lo, hi = (ci or [None, None])
        out.append(f"break-even concurrency ≈ {be:.1f} (95 % CI {f(lo)} – {f(hi)}; an open end did not cross 1 in the "
                   "swept range)")
    out.append(f"note: {payload.get('note')}")
    for d in payload.get("run_dirs") or []:
        out.append(f"  run dir: {d}")
    return "\n".join(out)
