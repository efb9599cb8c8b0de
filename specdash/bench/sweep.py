"""Load sweeps: the speedup of speculation against its baseline at each load, and the break-even load
(``specdash --bench --profile P --sweep concurrency=1,4,16`` or ``--sweep request_rate=2,8,32``).

One launch per side: the profile runs the suite at each point of the sweep in turn inside one server
(:func:`specdash.bench.runner.run_sweep`: cache flushed before each point, one RUN per point), then its
no-speculation baseline does the same (``--baseline R``, or the profile without its ``[speculative]``
section: :func:`specdash.profile.variants.baseline_of`).  At each point the speedup is the paired one of the
A/B (:func:`specdash.bench.compare.build_comparison`: geometric mean of the per-request output tok/s
ratios, matched by prompt and repeat, BCa 95 % interval), so the curve has a confidence band.

The vocabulary — the two load axes, the points, the saturation thresholds, the break-even — is
:mod:`specdash.bench.points`; this module runs the two sides and assembles each point.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specdash.bench.points import (
    HELD_BACK_BELOW,
    SATURATED_BELOW,
    SWEEP_FILE,
    Sweep,
    axis_name,
    break_even,
    break_even_of,
    served_fraction,
    sweep_var,
    throughput_ratio,
)
from specdash.results import SweepPoint, SweepReport, output_tok_s


async def sweep_bench(profile, baseline, suite, opts, sweep: Sweep | Sequence[int]) -> SweepReport:
    """Run the sweep (see the module docstring); returns the ``--json`` payload: ``variable`` (the swept
    axis), ``sweep`` (one point per value: the value under its axis' key — ``concurrency`` or
    ``request_rate``; a rate point also has ``achieved_request_rate`` / ``baseline_achieved_request_rate``
    (requests/s each side sent), ``max_in_flight`` (the cap, None = none), ``served_fraction`` (per side,
    :func:`served_rate` over the arrival rate), ``saturated`` and ``held_back`` (the sides below
    :data:`SATURATED_BELOW` / :data:`HELD_BACK_BELOW`) — ``output_tok_s``,
    ``baseline_tok_s``, ``accept_length``, ``accept_by_position`` (the profile's RUN's at that point),
    ``speedup``, ``ci95``, ``verdict``, ``pairs``, ``throughput_ratio``), ``break_even_concurrency`` (None for a rate sweep), ``break_even_request_rate``
    (None for a concurrency sweep), ``break_even_ci95``, ``note``, ``runs`` (the profile's RUNs, then the
    baseline's) and ``run_dirs``.

    ``sweep``: a :class:`Sweep`, or a list of concurrencies.  ``baseline``: the no-speculation profile, None
    to derive it from ``profile`` (nothing to derive when ``profile`` has no speculation), or False for
    none (``--baseline none``: tok/s per point only).

    Raises: as :func:`specdash.bench.runner.run_sweep`.
    """
    from specdash.bench.compare import build_comparison
    from specdash.bench.runner import run_sweep

    if not isinstance(sweep, Sweep):
        sweep = Sweep("concurrency", tuple(int(c) for c in sweep))
    var = sweep.var
    if baseline is False:
        baseline = None
    elif baseline is None and profile.spec_enabled:
        from specdash.profile.variants import baseline_of

        baseline = baseline_of(profile)
    from dataclasses import replace

    sides = 2 if baseline is not None else 1
    runs, recs = await run_sweep(profile, suite, replace(opts, side=f"side A of {sides}: {profile.name}"),
                                 sweep.points, var=var)
    base_runs: list[dict] = []
    base_recs: dict = {}
    if baseline is not None:
        base_runs, base_recs = await run_sweep(baseline, suite, replace(opts, side=f"side B of 2: {baseline.name}"),
                                               sweep.points, var=var)
    base_by = {r[var]: r for r in base_runs}
    points: list[SweepPoint] = []
    for run in runs:
        x = run[var]
        b = base_by.get(x)
        pt: SweepPoint = {var: x}  # type: ignore[misc]  # the axis names the key
        if var == "request_rate":
            kept = {"speculative": served_fraction(recs.get(x, [])), "baseline": served_fraction(base_recs.get(x, [])) if b else None}
            ach = {"speculative": run.get("achieved_request_rate"),
                   "baseline": b.get("achieved_request_rate") if b else None}
            pt.update(achieved_request_rate=ach["speculative"], baseline_achieved_request_rate=ach["baseline"],
                      max_in_flight=run.get("concurrency"),
                      held_back=sorted(k for k, v in ach.items() if isinstance(v, (int, float))
                                       and v < HELD_BACK_BELOW * float(x)),
                      served_fraction=kept, saturated=sorted(k for k, v in kept.items()
                                                             if v is not None and v < SATURATED_BELOW))
        pt.update(output_tok_s=output_tok_s(run), baseline_tok_s=output_tok_s(b) if b else None,
                  accept_length=run.get("accept_length"), accept_by_position=run.get("accept_by_position"),
                  speedup=None, ci95=None,
                  verdict=None, pairs=0, throughput_ratio=None)
        if b is not None:
            cmp = build_comparison(base_recs.get(x, []), recs.get(x, []), a_name=baseline.name, b_name=profile.name)
            pt.update(speedup=cmp.get("speedup"), ci95=cmp.get("ci95"), verdict=cmp.get("verdict"),
                      pairs=cmp.get("pairs", 0))
            pt["throughput_ratio"] = throughput_ratio(output_tok_s(pt), pt["baseline_tok_s"])
        points.append(pt)
    if baseline is not None:
        be, be_ci, note = break_even(points, var)
    elif getattr(opts, "url", None):
        be, be_ci, note = (None, None, "no baseline: an attached server (--url) is measured as it is; sweep its "
                           "no-speculation counterpart the same way and `specdash compare` the two run directories")
    elif not profile.spec_enabled:
        be, be_ci, note = None, None, "no baseline: the profile runs without speculation (tok/s per point only)"
    else:
        be, be_ci, note = None, None, "no baseline (--baseline none): tok/s per point only"
    held = [p for p in points if p.get("held_back")]
    if held:
        p0 = held[0]
        sides = ", ".join(f"{'the baseline' if k == 'baseline' else profile.name} "
                          f"{p0['baseline_achieved_request_rate' if k == 'baseline' else 'achieved_request_rate']:.2f}/s"
                          for k in p0["held_back"])
        note += (f"; from {p0['request_rate']:g} requests/s on, the in-flight cap (--concurrency "
                 f"{p0.get('max_in_flight')}) held arrivals back ({sides} sent): the sides did not see the asked "
                 "load — raise the cap or drop it")
    sat = [p for p in points if p.get("saturated")]
    if sat:
        p0 = sat[0]
        who = " and ".join("the baseline" if k == "baseline" else profile.name for k in p0["saturated"])
        frac = min(v for k, v in p0["served_fraction"].items() if k in p0["saturated"])
        ratio = p0.get("throughput_ratio")
        note += (f"; from {p0['request_rate']:g} requests/s on, {who} fell behind the arrivals (served "
                 f"{frac:.0%} of them): the queue grows for as long as a point runs, so per-request speedups "
                 "there are not steady-state"
                 + (f" — the throughput ratio (×{ratio:.2f} at {p0['request_rate']:g}/s) is" if ratio else " — tok/s is")
                 + " the answer there")
    payload = {"profile": profile.name, "baseline": baseline.name if baseline is not None else None,
               "variable": var, "sweep": points,
               "break_even_concurrency": be if var == "concurrency" else None,
               "break_even_request_rate": be if var == "request_rate" else None,
               "break_even_ci95": be_ci, "note": note,
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
        from specdash.bench.rundir import RunFileError, read_run_file

        try:
            data = read_run_file(p)
        except RunFileError:
            continue
        if isinstance(data, dict) and data.get("profile") == profile and isinstance(data.get("sweep"), list):
            return {**data, "path": str(p)}
    return None


def render_sweep(payload: dict[str, Any]) -> str:
    """The sweep as a text table, the break-even line and the note."""
    def f(v, nd=1):
        return "—" if v is None else f"{v:.{nd}f}"

    var = sweep_var(payload)
    rate = var == "request_rate"
    head = "  rate/s  sent/s (spec, base)" if rate else "  conc"
    out = [f"sweep of {payload['profile']} against {payload.get('baseline') or 'no baseline'} "
           "(speedup: paired per-request tok/s ratio, geometric mean, 95 % CI"
           + ("; tok/s ratio: the sides' throughput, which in open loop follows the arrivals" if rate else "") + ")",
           f"{head}   tok/s   baseline{'  tok/s ratio' if rate else ''}  accept len  speedup  95 % CI          "
           "verdict"]
    for p in payload["sweep"]:
        ci = p.get("ci95") or [None, None]
        x = (f"  {p['request_rate']:>6g}  {f(p.get('achieved_request_rate'), 2):>7}, "
             f"{f(p.get('baseline_achieved_request_rate'), 2):<7}    " if rate else f"  {p['concurrency']:>4}")
        tr = f"  {f(p.get('throughput_ratio'), 3):>11}" if rate else ""
        sat, held = p.get("saturated") or [], p.get("held_back") or []
        out.append(f"{x}  {f(output_tok_s(p)):>7}  {f(p['baseline_tok_s']):>8}{tr}  "
                   f"{f(p['accept_length'], 2):>10}  {('×' + f(p['speedup'], 3)) if p['speedup'] else '—':>7}  "
                   f"[{f(ci[0], 3)}, {f(ci[1], 3)}]  {p.get('verdict') or '—'}"
                   + (f" (saturated: {', '.join(sat)})" if sat else "")
                   + (f" (held back by the in-flight cap: {', '.join(held)})" if held else "")
                   + (f" ({p.get('pairs', 0)} pair{'s' if p.get('pairs', 0) != 1 else ''}: too few for an interval; "
                      "more repeats or prompts)" if p.get("speedup") and ci[0] is None else ""))
    be, ci = break_even_of(payload), payload.get("break_even_ci95")
    if be is not None:
        lo, hi = (ci or [None, None])
        unit = "" if var == "concurrency" else " requests/s"
        nd = 1 if var == "concurrency" else 2
        out.append(f"break-even {axis_name(var)} ≈ {f(be, nd)}{unit} (95 % CI {f(lo, nd)} – {f(hi, nd)}; an open end "
                   "did not cross 1 in the swept range)")
    out.append(f"note: {payload.get('note')}")
    for d in payload.get("run_dirs") or []:
        out.append(f"  run dir: {d}")
    return "\n".join(out)
