"""The tune loop: measure → fit → suggest → relaunch, within a budget of launches.

Relaunch loop (issue #5 §2): run the profile without speculation once (the baseline the
advisor needs for break-even), then let :class:`specdash.advisor.TunePlanner` choose settings
to launch — the starting settings first, then the advisor's predictions, refitted after every
measurement — until ``--budget`` exploration launches are spent or nothing left is predicted
to beat the best measured.  Finally an A/B of the best settings against the starting profile,
with the baseline, and the winner saved as a new preset (tomlkit, the source profile's
comments kept, never overwriting).

Live loop (``live=True``, :mod:`specdash.bench.live`): for a chain start (topk 1) on a
release whose adaptive controller can alternate two tiers (SGLang 0.5.14+), one launch
measures two chain step counts at the same load — SGLang's ``--speculative-adaptive`` with
an interleave config — and the tiers become measurements of their own (``source`` =
``"tier"``, one ``launch`` id).  Up to ``chain_budget`` such launches (default 3) cover the
chains; what is left of ``--budget`` goes to relaunches of the settings a launch of their own
must measure (trees).  A tree start, or an older release, falls back to the relaunch loop
with a note saying why.  After a live tune, :mod:`specdash.bench.schedule` turns the fitted
model into a per-batch-size adaptive config for the target release and verifies it with
paired A/Bs against the best static setting at two or more concurrencies.

Where launches are dear: ``--baseline-from RUN_DIR`` reuses a measured no-speculation run
(:func:`specdash.bench.baseline.load_baseline_run`) instead of the baseline launch, ``--max-time S`` starts no launch that
would end past S seconds (:func:`~specdash.bench.launches.time_left`: judged by the longest launch so far), and under SGLang's
simulated acceptance only chains are searched (:func:`tune_candidates`).

``--budget`` counts exploration launches (the starting profile, or the live launches,
included); the baseline run, the final A/B and the schedule's verification are extra.  The
report's ``launches`` counts every launch (all of them listed in ``launch_log``).  The
command (arguments, progress, output) is :mod:`specdash.commands.tune`; progress reaches it
through the ``progress`` callback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specdash.bench.launches import LaunchEntry, LaunchLog, by_purpose, time_left, time_summary
from specdash.bench.rundir import RunDir, atomic_write_json, utc_stamp
from specdash.bench.schedule import recommendation
from specdash.profile import build_launch, write_preset
from specdash.profile.variants import baseline_of, variant
from specdash.results import TuneMeasured, output_tok_s


def save_preset(source, winner, out_dir: Path, settings, *, label: str | None = None) -> Path:
    """Write the winner as ``<out_dir>/<source name>-tuned.toml`` (``-2``, ``-3`` … if taken)."""
    base_text = source.path.read_text(encoding="utf-8") if source.path and source.path.is_file() else None
    what = label or f"EAGLE3 {settings.label()}"
    return write_preset(winner, f"{source.name}-tuned", directory=out_dir,
                        description=f"{source.name} tuned by specdash tune: {what}",
                        note=f"Tuned from {source.name} by specdash tune ({utc_stamp()}): {what}."
                             + (" The comments below are the source profile's: where they name settings, they "
                                "describe its old ones, not these." if base_text else ""),
                        base_text=base_text, on_exists="number")


def _server_version(reported: Any) -> str | None:
    """The release a server reports in ``/server_info`` (``0.5.14``, ``0.5.14.post1`` …), normalised;
    None when it says nothing usable (the launch resolution's release is used then)."""
    from specdash.sglang.versions import parse_version

    if not reported:
        return None
    try:
        return str(parse_version(str(reported)))
    except (TypeError, ValueError):
        return None


def tune_candidates(profile) -> tuple[list | None, str | None]:
    """The settings a tune of ``profile`` searches, and a note when they are not the advisor's full
    grid (None, None: the full grid): only chains under SGLang's simulated acceptance
    (:func:`specdash.advisor.simulated_acceptance_candidates`; the profile's ``[env]`` over the
    environment the server inherits)."""
    import os

    from specdash.advisor import simulated_acceptance_candidates

    return simulated_acceptance_candidates(profile.env, os.environ)


class _Explorer:
    """The cheaper start-up of :mod:`specdash.bench.explore` for one tune: the profiles it prepared, the
    flags added to each, and the decode CUDA-graph list the first speculative launch without a
    capture-list change reported (the basis for the later ones)."""

    def __init__(self, enabled: bool, version: str | None, opts, suite) -> None:
        self.enabled = enabled
        self.version = version
        self.concurrency = int(getattr(opts, "concurrency", None) or suite.suite.concurrency or 1)
        self.open_loop = getattr(opts, "request_rate", None) is not None
        self.captured: list[int] | None = None
        self._graph_flag_used = False
        self._last: list[str] | None = None
        #: the decode batch sizes SGLang would capture without the cut (for the adaptive schedule)
        self.full_capture: list[int] | None = None
        self.launches: list[dict[str, Any]] = []

    def prepare(self, prof, *, concurrency: int | None = None):
        """``prof`` with the exploration flags (itself when disabled or nothing applies).

        ``concurrency``: the highest concurrency this launch is measured at when above the tune's (a live
        launch's second pass at the schedule's high concurrency): the capture list is cut no lower than that,
        else the high pass would run its batches without CUDA graphs (seen on the real bed, SGLang 0.5.14:
        c16 at 1,084 tok/s under a cut to batch 4 against ~3,870 for a static launch of the same chain)."""
        if not self.enabled:
            return prof
        from specdash.bench.explore import exploration_profile

        conc = max(self.concurrency, int(concurrency or 0))
        out, plan = exploration_profile(prof, version=self.version, concurrency=conc,
                                        captured_bs=self.captured, open_loop=self.open_loop)
        if any(f.startswith("--cuda-graph-max-bs") for f in plan.flags):
            self._graph_flag_used = True
            self.full_capture = self.full_capture or plan.full_capture
        self._last = list(plan.flags) or None
        self.launches.append({"profile": prof.name, "flags": plan.flags, "saved": plan.saved, "notes": plan.notes})
        return out

    def learn(self, entry: LaunchEntry) -> None:
        """Tag the launch just run with the flags it got, and keep the capture list of the first
        speculative launch that ran with SGLang's own list (the basis of later capture-list changes)."""
        entry.fast_start, self._last = self._last, None
        if self.captured is not None or self._graph_flag_used or not entry.run_dir:
            return
        from specdash.bench.live import _captured_bs

        self.captured = _captured_bs({"run_dir": entry.run_dir})

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "concurrency": self.concurrency, "launches": self.launches,
                "applies_to": "exploration and live launches (never the baseline, the final A/B or the schedule)"}


# -- the loop ------------------------------------------------------------------------------------

#: ``tune --live``: after the live chain launch a setting gets a launch of its own only when the model
#: predicts it beats the best measured by more than that one's 95 % interval, at least this share
#: (:class:`~specdash.advisor.TunePlanner`'s ``live_margin``; issue 26: live tunes spent 9-11 launches)
LIVE_MARGIN = 0.01

#: ``tune --live``: launches in all (baseline, live, explorations, the final A/B's own launch and the adaptive
#: schedule's A/B) unless ``max_launches`` says otherwise (issue 26's target: a live tune is worth it when it
#: costs fewer launches than relaunching, which took 8-10)
LIVE_MAX_LAUNCHES = 6

#: ``tune --live`` under a launch cap: the last two launches go to the adaptive schedule's A/B only while one more
#: exploration is expected to gain less than this share of the best measured (``TunePlanner.exploration_gain``).
#: The A/B checks a prediction for other loads; an exploration can still change the pick, which the A/B's static
#: side is (moe-chain, seed 3: the A/B took launches 5 and 6 and the pick stayed 2.8 % short; exploring, 1.3 %).
EXPLORE_FIRST = 0.01


@dataclass
class _Row:
    measurement: Any
    run_dir: str | None
    extra: dict = field(default_factory=dict)


def _row_json(r: _Row, fit=None) -> TuneMeasured:
    """A ``measured`` row of the tune report; with the final acceptance ``fit``, the setting's
    ``accept_by_position`` (measured, from its histogram: :mod:`specdash.sglang.positions`; None for a tier,
    whose rounds the pooled histogram does not separate) beside ``expected_accept_by_position`` (the
    advisor's, :func:`specdash.advisor.expected_accept_by_position`)."""
    from specdash.sglang.positions import accept_by_position

    m = r.measurement
    st = m.settings
    out = TuneMeasured(settings=st.to_json() if st else None, output_tok_s=m.output_tok_s,
                       accept_length=m.accept_length, concurrency=m.concurrency, source=m.source,
                       launch=m.launch, run_dir=r.run_dir)
    out.update(r.extra)  # windows, interval, for
    if fit is not None:
        from specdash.advisor import expected_accept_by_position

        out["accept_by_position"] = (accept_by_position(m.accept_histogram, st.steps, st.draft_tokens)
                                     if st is not None and m.accept_histogram else None)
        out["expected_accept_by_position"] = expected_accept_by_position(fit, st) if st is not None else None
    return out


def _read_records(run_dir: str | None) -> list[dict] | None:
    """The request records of a run directory (``requests.jsonl``, :meth:`RunDir.read_requests`), or None
    when it has none."""
    if not run_dir or not (Path(run_dir) / "requests.jsonl").is_file():
        return None
    return RunDir(Path(run_dir), checkpoint=False).read_requests()


def _interval(m) -> list[float] | None:
    """A measurement's 95 % interval on its tok/s (± 1.96 standard errors; None without one)."""
    if m.output_tok_s_se is None or not m.output_tok_s:
        return None
    h = 1.96 * float(m.output_tok_s_se)
    return [float(m.output_tok_s) - h, float(m.output_tok_s) + h]


def _final_comparison(records_of: dict, start, best, profile, opts, say) -> dict | None:
    """The final A/B from the exploration's own launches (:func:`tune`'s ``final_ab``): the best over the
    start with the baseline, paired by prompt and repeat; the best over the baseline when the start has no
    launch of its own (measured as an adaptive tier).  Written as a ``compare`` directory."""
    from specdash.bench.compare import build_comparison
    from specdash.bench.report import write_comparison

    b_recs, s_recs, r_recs = records_of.get(best), records_of.get(start), records_of.get(None)
    if not b_recs:
        return None
    b_name = variant(profile, best.steps, best.topk, best.draft_tokens, suffix="best").name
    if s_recs:
        say(f"tune: best {best.label()}; final A/B against {profile.name} with the baseline, from their exploration "
            "launches (no launch of its own)")
        cmp = build_comparison(s_recs, b_recs, a_name=profile.name, b_name=b_name, baseline_records=r_recs or None,
                               baseline_name=f"{profile.name}-baseline" if r_recs else None)
    elif r_recs:
        say(f"tune: best {best.label()}; final A/B against the baseline (the start was measured as an adaptive tier "
            "only, no launch of its own)")
        cmp = build_comparison(r_recs, b_recs, a_name=f"{profile.name}-baseline", b_name=b_name)
    else:
        return None
    cdir = RunDir.create(Path(opts.out_dir), "compare")
    write_comparison(cdir.path, cmp)
    cmp["compare_dir"] = str(cdir.path)
    cmp["from_exploration"] = True
    return cmp


async def tune(profile, suite, *, budget: int, out: Path, progress: Callable[[str], None] | None = None,
               opts=None, preset_dir: Path | None = None, live: bool = False, chain_budget: int = 3,
               sweep: Sequence[int] | None = None, schedule: bool | None = None, final_ab: bool = True,
               max_time_s: float | None = None, baseline_run: dict | None = None,
               baseline_notes: Sequence[str] = (), fast_explore: bool = False, fresh_ab: bool = False,
               max_launches: int | None = None, verify_schedule: bool = False) -> dict:
    """Run the closed loop (see module docstring); returns the tune report dict.

    Args:
        budget: exploration launches (the starting settings, or the live launches, included).
        out: parent of the run directories (when ``opts`` is not given) and of the tune
            directory (``<stamp>-<profile>-tune/``: the report, generated configs).
        progress: receives one human line per step (the runs' own lines go to
            ``opts.progress``).
        opts: :class:`~specdash.bench.runner.RunOptions` of every run (later launches
            skip the preflight: the first one passed it).
        preset_dir: where the winner is saved (default: the user's profile directory).
        live: measure chain tiers inside adaptive launches (:mod:`specdash.bench.live`).
        chain_budget: live launches at most (each measures two chain tiers); capped by ``budget``.
        sweep: concurrencies the adaptive schedule is verified at (default: the suite's and
            a high one, :func:`specdash.bench.schedule.default_sweep`).
        schedule: generate and verify an adaptive schedule (default: with ``live``).
        final_ab: the final paired A/B of the best against the start and the baseline (``comparison``):
            from the request records of their exploration launches, paired by prompt and repeat — no
            launch of its own, except one for a best measured only as an adaptive tier; the start, when it
            was measured only as a tier, is left out (best against the baseline).  Without it the best is
            reported from the exploration's own measurements (``comparison`` None, ``final_ab`` False).
        fresh_ab: the final A/B in fresh launches instead (start, best and baseline, three launches: no
            selection effect from the exploration's own figures; ``specdash tune --fresh-ab``).
        max_time_s: wall-clock budget (s) of the whole tune: no launch starts (exploration, live,
            final A/B, schedule) that would end past it, judged by the longest launch so far; the
            stop reason says so.  The first two launches (baseline, start) always run.
        baseline_run: a RUN without speculation measured earlier (:func:`specdash.bench.baseline.load_baseline_run`) in
            place of the baseline launch; ``baseline_notes`` go into the report.
        max_launches: every launch of the tune at most (baseline included); default
            :data:`LIVE_MAX_LAUNCHES` with ``live``, none without.  The last two go to the adaptive
            schedule's A/B when the model predicts it pays (:func:`specdash.bench.schedule.verification_wanted`),
            else to exploration; a final A/B or a verification that does not fit is left out and the report
            says so.
        verify_schedule: A/B the adaptive schedule even when the model predicts it does not pay
            (``force`` of :func:`specdash.bench.schedule.schedule_and_verify`).
        fast_explore: (``specdash tune`` turns it on unless ``--full-start``) start the exploration and
            live launches with SGLang's cheaper start-up options
            (:mod:`specdash.bench.explore`: no server warm-up request, decode CUDA graphs only up to the
            batch the tune's concurrency needs); the baseline, the final A/B and the adaptive schedule's
            launches never get them.  The report's ``fast_explore`` says what was added and why not.

    Raises:
        ValueError: the profile has no speculation to tune.
        PreflightBlocked, RunFailed, ServerStartError: from the runs.
    """
    from specdash.advisor import Measurement, Settings, TunePlanner, expected_accept_by_position
    from specdash.bench.runner import RunOptions

    if not profile.spec_enabled:
        raise ValueError(f"profile {profile.name} has no [speculative] settings to tune")
    t_start = time.monotonic()
    say = progress or (lambda m: None)
    opts = opts or RunOptions(out_dir=out, progress=say)
    out_dir = Path(opts.out_dir)
    tdir = RunDir.create(out_dir, f"{profile.name}-tune")
    log = LaunchLog()
    start_eff = build_launch(profile.expanded(), version=opts.sglang_version).spec
    start = Settings(start_eff.num_steps, start_eff.eagle_topk, start_eff.num_draft_tokens)

    base_prof = baseline_of(profile)
    if live:
        from specdash.bench.live import LivePlan, decode_logged, live_unavailable

        base_prof = decode_logged(base_prof)
    if baseline_run is not None:
        say(f"tune: baseline from {baseline_run.get('run_dir')} ({output_tok_s(baseline_run):.1f} tok/s, "
            "measured earlier; no baseline launch)")
        base_run, base_launch, later = baseline_run, None, opts
        base_recs = _read_records(baseline_run.get("run_dir"))
        for n in baseline_notes:
            say(f"tune: note: {n}")
    else:
        say(f"tune: launch #{len(log.entries) + 1}: baseline run of {profile.name} without speculation")
        base_run, base_recs, base_entry = await log.run(base_prof, suite, opts, "baseline")
        base_launch, later = base_entry.id, replace(opts, preflight=False)
    stop_note = None
    version = _server_version(base_run.get("sglang_version")) or start_eff.version
    live_plan = None
    live_note = None
    if live:
        live_note = live_unavailable(profile, start, version)
        if live_note is None:
            live_plan = LivePlan(profile, version, tdir.path)
        else:
            say(f"tune: --live falls back to relaunches: {live_note}")
    if live_plan is not None:
        baseline = live_plan.measure_static(base_run, launch=base_launch)
    else:
        baseline = Measurement.from_run(base_run, concurrency=base_run.get("concurrency", 1))
        baseline.launch = base_launch
    candidates, cand_note = tune_candidates(profile)
    if cand_note:
        say(f"tune: {cand_note}")
    planner = TunePlanner(start, budget=budget, baseline=baseline, candidates=candidates,
                          concurrency=int(getattr(opts, "concurrency", None) or suite.suite.concurrency or 1),
                          live_margin=LIVE_MARGIN if live_plan is not None else None)
    explorer = _Explorer(fast_explore, version, later, suite)
    rows: list[_Row] = [_Row(baseline, base_run.get("run_dir"))]
    measurements: list[Measurement] = [baseline]
    profiles: dict = {}
    pairs: list[dict] = []
    #: the request records of every static launch at the suite's concurrency, by setting: the final A/B
    #: pairs them (no launch of its own for a side already measured)
    records_of: dict = {None: base_recs}
    scheduling = schedule if schedule is not None else live
    high = None
    if live_plan is not None and scheduling:
        from specdash.bench.schedule import default_sweep

        high = max(sweep) if sweep else default_sweep(explorer.concurrency)[-1]

    if live_plan is not None:
        chain_cap = max(0, min(int(chain_budget), budget))
    else:
        chain_cap = 0
    if max_launches is None and live_plan is not None:
        max_launches = LIVE_MAX_LAUNCHES
    if max_launches is not None:  # the planner's own budget counts speculative launches only
        planner.budget = max(1, min(planner.budget, int(max_launches) - len(log.entries)))
    cap_notes: list[str] = []
    kept_exploring: list[str] = []  # why the schedule's A/B gave its launches to exploration

    def cap_reached(what: str) -> str | None:
        """Why ``what`` (one more launch) does not fit the launch cap, or None."""
        if max_launches is None:
            return None
        left = int(max_launches) - len(log.entries)
        if left <= 0:
            return f"the launch cap of {max_launches} is spent ({what} left out)"
        if scheduling and left == 2 and what == "exploration":
            from specdash.bench.schedule import verification_wanted

            if verification_wanted(measurements, planner.best(measurements), baseline, version=version,
                                   concurrency=explorer.concurrency, sweep=sweep,
                                   batch_sizes=live_plan.batch_sizes if live_plan else None,
                                   force=verify_schedule):
                gain = 0.0 if verify_schedule else planner.exploration_gain(measurements)
                if gain < EXPLORE_FIRST:
                    return (f"the last two of the {max_launches} launches go to the adaptive schedule's A/B (the model "
                            "predicts it beats the pick)")
                kept_exploring.append(f"one more exploration was expected to gain {gain:.1%} of the best measured, "
                                      f"more than the {EXPLORE_FIRST:.0%} that yields the last two launches to it")
        return None

    async def live_launch(a: int, b: int, why: str) -> None:
        say(f"tune: launch #{len(log.entries) + 1} (live {live_plan.launches + 1}/{chain_cap}): chain tiers "
            f"steps {a} and {b} in one adaptive launch — {why}")
        also = high if (high is not None and live_plan.launches == 0) else None
        prep = explorer.prepare if also is None else (lambda p: explorer.prepare(p, concurrency=also))
        res = await live_plan.measure_pair(log, suite, later, a, b, prepare=prep, also_at=also)
        explorer.learn(log.entries[res.launch])
        pairs.append(res.to_json())
        for m in res.measurements:
            measurements.append(m)
            rows.append(_Row(m, res.run_dir, {"windows": res.windows.get(m.settings.steps),
                                              "interval": _interval(m)}))
        say(f"tune: live: {res.summary()}")
        if res.also is not None:  # the same launch at the schedule's high concurrency
            for m in res.also.measurements:
                measurements.append(m)
                rows.append(_Row(m, res.run_dir, {"windows": res.also.windows.get(m.settings.steps),
                                                  "interval": _interval(m), "for": "adaptive schedule"}))
            say(f"tune: live (same launch, concurrency {res.also.concurrency}): {res.also.summary()}")

    if chain_cap:  # the first live launch: the start's steps and the far end of SGLang's default slot
        pair = live_plan.next_pair(planner, measurements, start)
        if pair is not None:
            await live_launch(*pair, live_plan.reason)

    from specdash.advisor import tier_measurable

    # one loop for the rest: the planner names the next setting; a chain goes to a live launch (paired with
    # the next chain worth a look) while live launches are left, anything else to a launch of its own
    while stop_note is None:
        nxt = planner.next_settings(measurements)
        if nxt is None:
            say(f"tune: stop — {planner.reason}")
            break
        if nxt != planner.start and (stop_note := time_left(t_start, max_time_s, log)):
            say(f"tune: stop — {stop_note} (next would have been {nxt.label()})")
            break
        if (cap := cap_reached("exploration")) is not None:
            say(f"tune: stop — {cap} (next would have been {nxt.label()})")
            planner.reason = cap
            break
        if live_plan is not None and tier_measurable(nxt) and live_plan.launches < chain_cap:
            partner = live_plan.partner(nxt.steps, planner, measurements)
            await live_launch(min(nxt.steps, partner), max(nxt.steps, partner),
                              f"{planner.reason}; paired with steps {partner} ({live_plan.reason})")
            continue
        say(f"tune: launch #{len(log.entries) + 1} (exploration {planner.launches(measurements) + 1}/{budget}): "
            f"{nxt.label()} — {planner.reason}")
        prof = variant(profile, nxt.steps, nxt.topk, nxt.draft_tokens)
        if live_plan is not None:
            prof = decode_logged(prof)
        prof_launched = explorer.prepare(prof)
        run, recs, entry = await log.run(prof_launched, suite, later, "explore")
        records_of[nxt] = recs
        explorer.learn(entry)
        if live_plan is not None:
            m = live_plan.measure_static(run, launch=entry.id)
        else:
            m = Measurement.from_run(run, concurrency=run.get("concurrency", 1))
            m.launch = entry.id
        measurements.append(m)
        rows.append(_Row(m, run.get("run_dir"), {"interval": _interval(m)}))
        profiles[nxt] = prof
    best = planner.best(measurements)
    advice = planner.advice(measurements)
    winner = profiles.get(best) or (profile if best == planner.start else
                                    variant(profile, best.steps, best.topk, best.draft_tokens))
    cmp = None
    ab_note = time_left(t_start, max_time_s, log, 3 if fresh_ab else 1) if final_ab and best != planner.start else None
    if not final_ab:
        say(f"tune: best {best.label()} (no final A/B: asked for)")
    elif ab_note:
        say(f"tune: best {best.label()} (no final A/B: {ab_note})")
    elif best != planner.start and fresh_ab:
        say(f"tune: best {best.label()}; final A/B against {profile.name} with the baseline (fresh launches)")
        _, cmp = await log.ab(profile, variant(profile, best.steps, best.topk, best.draft_tokens, suffix="best"),
                              baseline_of(profile), suite, later, rounds=1)
    elif best != planner.start and records_of.get(best) is None and (cap := cap_reached("the final A/B")):
        say(f"tune: best {best.label()} (no final A/B: {cap}; it was measured as an adaptive tier)")
        cap_notes.append(cap)
    elif best != planner.start:
        if records_of.get(best) is None:  # measured as a tier only: the winner gets a launch of its own
            say(f"tune: launch #{len(log.entries) + 1}: the best, {best.label()}, by a launch of its own (it was "
                "measured as an adaptive tier) for the final A/B")
            prof_b = variant(profile, best.steps, best.topk, best.draft_tokens, suffix="best")
            if live_plan is not None:
                prof_b = decode_logged(prof_b)
            run_b, records_of[best], entry_b = await log.run(prof_b, suite, later, "ab")
            m_b = live_plan.measure_static(run_b, launch=entry_b.id) if live_plan is not None else \
                Measurement.from_run(run_b, concurrency=run_b.get("concurrency", 1))
            rows.append(_Row(m_b, run_b.get("run_dir"), {"interval": _interval(m_b), "for": "final A/B"}))
        cmp = _final_comparison(records_of, planner.start, best, profile, later, say)
    if preset_dir is None:
        from specdash.profile import user_profile_dir

        preset_dir = user_profile_dir()

    explore_n = planner.launches(measurements)
    settings_measured = len({m.settings for m in measurements if m.settings is not None})
    sched_report = None
    sched_note = None
    if live_plan is not None and explorer.full_capture and (
            not live_plan.batch_sizes or max(live_plan.batch_sizes) < max(explorer.full_capture)):
        live_plan.batch_sizes = list(explorer.full_capture)  # the live launches captured a cut list
    from specdash.bench.schedule import verification_wanted

    if scheduling and (sched_note := time_left(t_start, max_time_s, log, 2)):
        say(f"tune: adaptive config skipped — {sched_note}")
    elif scheduling and max_launches is not None and int(max_launches) - len(log.entries) < 2 and \
            verification_wanted(measurements, best, baseline, version=version, concurrency=explorer.concurrency,
                                sweep=sweep, batch_sizes=live_plan.batch_sizes if live_plan else None,
                                force=verify_schedule):
        sched_note = f"the adaptive schedule's A/B does not fit the launch cap of {max_launches}" + (
            f" ({kept_exploring[0]})" if kept_exploring else "")
        cap_notes.append(sched_note)
        say(f"tune: adaptive config not verified — {sched_note}")
    elif scheduling:
        from specdash.bench.schedule import schedule_and_verify

        sched_report, added = await schedule_and_verify(
            profile, suite, measurements, best, baseline, version=version, log=log, opts=later, tdir=tdir.path,
            sweep=sweep, say=say, pays=advice.pays, batch_sizes=live_plan.batch_sizes if live_plan else None,
            live=live_plan, force=verify_schedule)
        rows += [_Row(m, rd, {"for": "adaptive schedule"}) for m, rd in added]

    preset, not_saved = None, None
    if advice.pays is False:
        not_saved = ("speculation does not pay with this draft (see the advice): no preset saved; "
                     "serve without speculation until the draft improves")
    elif sched_report is not None and sched_report.get("recommended"):
        from specdash.bench.schedule import adaptive_preset

        prof_ad, cfg_path, label = adaptive_preset(profile, sched_report, preset_dir)
        preset = save_preset(profile, prof_ad, preset_dir, best, label=label)
        sched_report["preset"] = str(preset)
        sched_report["config_beside_preset"] = str(cfg_path)
    elif best == planner.start:
        not_saved = "the starting settings were best: nothing new to save"
    else:
        preset = save_preset(profile, winner, preset_dir, best)
    report = {
        "profile": profile.name,
        "suite": suite.name,
        "budget": budget,
        "mode": "live" if live_plan is not None else "relaunch",
        "live": None if not live else {
            "used": live_plan is not None, "note": live_note, "sglang_version": version,
            "chain_budget": min(int(chain_budget), budget), "chain_launches": live_plan.launches if live_plan else 0,
            "tiers_per_launch": 2, "pairs": pairs,
            "why_two_tiers": live_plan.WHY_TWO if live_plan else None,
        },
        "launches": len(log.entries),
        "launches_by_purpose": by_purpose(log),
        "exploration_launches": explore_n,
        "launch_log": log.to_json(),
        "stop_reason": stop_note or planner.reason,
        "candidates_note": cand_note,
        "max_time_s": max_time_s,
        "time_budget_cut": [n for n in (stop_note, ab_note, sched_note) if n],
        "max_launches": max_launches,
        "launch_cap_cut": cap_notes,
        "fast_explore": explorer.to_json(),
        "baseline_reused": None if baseline_run is None else dict(
            run_dir=baseline_run.get("run_dir"), output_tok_s=output_tok_s(baseline_run),
            notes=list(baseline_notes)),
        "start": start.to_json(),
        "best": best.to_json(),
        "baseline_tok_s": baseline.output_tok_s,
        "measured": [_row_json(r, advice.acceptance) for r in rows],
        "best_expected_accept_by_position": expected_accept_by_position(advice.acceptance, best),
        "advice": advice.to_json(),
        "advice_text": advice.render(),
        "comparison": cmp,
        "final_ab": cmp is not None,
        "adaptive_schedule": sched_report,
        "recommendation": recommendation(best, sched_report, advice.pays, explorer.concurrency),
        "preset": str(preset) if preset else None,
        "preset_not_saved": not_saved,
        "tune_dir": str(tdir.path),
    }
    report["time"] = time_summary(log, time.monotonic() - t_start, settings_measured)
    return report


def write_tune_report(out: Path, report: dict) -> Path:
    """Write ``report`` (from :func:`tune`) as ``tune.json`` and its advice as ``advice.txt``
    into its tune directory (``report["tune_dir"]``; a new ``out/<stamp>-<profile>-tune/`` when
    the report has none); returns that directory."""
    path = Path(report["tune_dir"]) if report.get("tune_dir") else None
    if path is None or not path.is_dir():
        path = RunDir.create(out, f"{report['profile']}-tune").path
        report["tune_dir"] = str(path)
    atomic_write_json(path / "tune.json", report)
    (path / "advice.txt").write_text(report["advice_text"] + "\n", encoding="utf-8")
    return path
