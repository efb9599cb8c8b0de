"""A tune's launches: each server launch logged with its role, time to ready and wall time
(:class:`LaunchLog`, the report's ``launch_log``), the time they took (:func:`time_summary`), the roles
counted (:func:`by_purpose`) and the ``--max-time`` rule (:func:`time_left`).  Used by
:mod:`specdash.bench.tune` and the adaptive schedule's verification (:mod:`specdash.bench.schedule`)."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class LaunchEntry:
    """One server launch of a tune (the report's ``launch_log``).

    ``role``: ``"baseline"`` (no speculation), ``"explore"`` (one setting, a launch of its
    own), ``"live"`` (two chain tiers of one adaptive launch, at the suite's concurrency and, for the
    adaptive schedule, a high one), ``"ab"`` (the final A/B's side that no exploration launch measured),
    ``"sweep"`` (two chain tiers at another concurrency, for the adaptive schedule), ``"verify"``
    (the adaptive schedule's A/B: one launch a side, every concurrency in it); ``time_to_ready_s``: process start →
    ``/health`` 200 (from the run's manifest); ``wall_s``: the launch's whole run (start,
    warm-up, suite, stop; None for A/B sides, which :func:`run_ab` runs back to back);
    ``fast_start``: the start-up flags :mod:`specdash.bench.explore` added (None: launched as
    the profile says).
    """

    id: int
    role: str
    profile: str
    run_dir: str | None
    concurrency: int | None
    settings: dict | None = None
    tiers: list[int] | None = None
    adaptive_config: str | None = None
    time_to_ready_s: float | None = None
    suite_s: float | None = None
    wall_s: float | None = None
    fast_start: list[str] | None = None
    #: every concurrency the launch ran (a sweep launch: the live pair's high point, the schedule's A/B)
    concurrencies: list[int] | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _ready_s(run: dict) -> float | None:
    """``time_to_ready_s`` from the run directory's manifest (None when attached or unreadable)."""
    try:
        m = json.loads((Path(run["run_dir"]) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, KeyError, TypeError, ValueError):
        return None
    v = m.get("time_to_ready_s")
    return float(v) if isinstance(v, (int, float)) else None


class LaunchLog:
    """Every launch of a tune, in order (ids 0, 1, …); see :class:`LaunchEntry`."""

    def __init__(self) -> None:
        self.entries: list[LaunchEntry] = []

    def add(self, run: dict, role: str, *, tiers: Sequence[int] | None = None, config: str | None = None,
            wall_s: float | None = None) -> LaunchEntry:
        eff = run.get("effective") or {}
        e = LaunchEntry(len(self.entries), role, run.get("profile") or "", run.get("run_dir"), run.get("concurrency"),
                        settings=eff if eff.get("speculative_algorithm") else None,
                        tiers=list(tiers) if tiers else None, adaptive_config=config, time_to_ready_s=_ready_s(run),
                        suite_s=run.get("duration_s"), wall_s=wall_s)
        self.entries.append(e)
        return e

    async def run(self, prof, suite, opts, role: str, *, tiers: Sequence[int] | None = None,
                  config: str | None = None):
        """:func:`~specdash.bench.runner.run_one`, logged; returns (RUN, records, entry)."""
        from specdash.bench.runner import run_one

        t0 = time.monotonic()
        run, records = await run_one(prof, suite, opts)
        return run, records, self.add(run, role, tiers=tiers, config=config, wall_s=time.monotonic() - t0)

    async def sweep(self, prof, suite, opts, points: Sequence[int], role: str, *, tiers: Sequence[int] | None = None,
                    config: str | None = None):
        """:func:`~specdash.bench.runner.run_sweep` over concurrencies ``points`` in one launch, logged;
        returns (the RUN of each point, point → its records, entry)."""
        from specdash.bench.runner import run_sweep

        t0 = time.monotonic()
        runs, recs = await run_sweep(prof, suite, opts, list(points))
        e = self.add(runs[0], role, tiers=tiers, config=config, wall_s=time.monotonic() - t0)
        e.concurrencies = [int(r.get("concurrency") or 0) for r in runs]
        return runs, recs, e

    async def ab(self, prof_a, prof_b, prof_r, suite, opts, *, rounds: int = 1, role: str = "ab"):
        """:func:`~specdash.bench.ab.run_ab`, each of its launches logged; returns (RUNs, comparison)."""
        from specdash.bench.ab import run_ab

        runs, cmp = await run_ab(prof_a, prof_b, prof_r, suite, opts, rounds=rounds)
        for r in runs:
            self.add(r, role)
        return runs, cmp

    def to_json(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.entries]


def time_summary(log: LaunchLog, wall_s: float, settings_measured: int) -> dict[str, Any]:
    """The report's ``time``: wall time used, the launches' start-up time, and what a relaunch per
    measured setting would have cost in start-up alone (the median measured time-to-ready of the
    static speculative launches — of every launch when there is none — × the settings measured).
    Every figure is ≥ 0."""
    static_spec = [e.time_to_ready_s for e in log.entries
                   if e.time_to_ready_s is not None and e.settings and not e.tiers]
    every = [e.time_to_ready_s for e in log.entries if e.time_to_ready_s is not None]
    ready = statistics.median(static_spec or every) if (static_spec or every) else None
    measuring = [e for e in log.entries if e.role in ("explore", "live")]
    startup = sum(e.time_to_ready_s or 0.0 for e in measuring)
    est = ready * settings_measured if ready is not None else None
    return {
        "wall_s": max(0.0, wall_s),
        "startup_s": max(0.0, sum(every)),
        "measuring_launches": len(measuring),
        "measuring_startup_s": max(0.0, startup),
        "time_to_ready_s_median": ready,
        "time_to_ready_basis": "static speculative launches" if static_spec else "all launches",
        "settings_measured": settings_measured,
        "relaunch_estimate_s": max(0.0, est) if est is not None else None,
        "startup_saved_s": max(0.0, est - startup) if est is not None else None,
    }


def time_left(t_start: float, max_time_s: float | None, log: LaunchLog, launches: int = 1) -> str | None:
    """None while ``launches`` more launches fit in ``max_time_s`` (the longest launch so far, each);
    else why not (the tune's stop reason)."""
    if max_time_s is None:
        return None
    used = time.monotonic() - t_start
    walls = [e.wall_s for e in log.entries if e.wall_s]
    per = max(walls) if walls else 0.0
    if used + launches * per <= max_time_s:
        return None
    return (f"time budget of {max_time_s:.0f} s: {used:.0f} s used and {'a launch' if launches == 1 else f'{launches} launches'} "
            f"take{'s' if launches == 1 else ''} up to {launches * per:.0f} s (the longest so far)")


def by_purpose(log: LaunchLog) -> dict[str, int]:
    """Launches per role, in the order roles first appear (the report's ``launches_by_purpose``)."""
    out: dict[str, int] = {}
    for e in log.entries:
        out[e.role] = out.get(e.role, 0) + 1
    return out
