"""The tune loop: measure → fit → suggest → relaunch, within a budget of launches.

Loop (issue #5 §2): run the profile without speculation once (the baseline the advisor
needs for break-even), then let :class:`specdash.advisor.TunePlanner` choose settings to
launch — the starting settings first, then the advisor's predictions, refitted after
every measurement — until ``--budget`` exploration launches are spent or nothing left is
predicted to beat the best measured.  Finally an A/B of the best settings against the
starting profile, with the baseline, and the winner saved as a new preset (tomlkit, the
source profile's comments kept, never overwriting).

``--budget`` counts exploration launches (the starting profile included); the baseline
run and the final A/B are extra.  The command (arguments, progress, output) is
:mod:`specdash.commands.tune`; progress reaches it through the ``progress`` callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from specdash.bench.rundir import RunDir, atomic_write_json, utc_stamp
from specdash.profile import build_launch, profile_variant, write_preset


def variant(profile, steps: int, topk: int, draft_tokens: int, *, suffix: str | None = None):
    """A copy of ``profile`` with other speculative settings (name tagged ``-s<steps>k<topk>n<draft>``)."""
    return profile_variant(profile, {"num_steps": steps, "eagle_topk": topk, "num_draft_tokens": draft_tokens},
                           name=f"{profile.name}-{suffix or f's{steps}k{topk}n{draft_tokens}'}")


def baseline_of(profile):
    """The same server without speculation (the tune baseline)."""
    return profile_variant(profile, None, name=f"{profile.name}-baseline")


def save_preset(source, winner, out_dir: Path, settings) -> Path:
    """Write the winner as ``<out_dir>/<source name>-tuned.toml`` (``-2``, ``-3`` … if taken)."""
    base_text = source.path.read_text(encoding="utf-8") if source.path and source.path.is_file() else None
    return write_preset(winner, f"{source.name}-tuned", directory=out_dir,
                        description=f"{source.name} tuned by specdash tune: EAGLE3 {settings.label()}",
                        note=f"Tuned from {source.name} by specdash tune ({utc_stamp()}): {settings.label()}.",
                        base_text=base_text, on_exists="number")


async def tune(profile, suite, *, budget: int, out: Path, progress: Callable[[str], None] | None = None,
               opts=None, preset_dir: Path | None = None) -> dict:
    """Run the closed loop (see module docstring); returns the tune report dict.

    Args:
        budget: exploration launches (the starting settings included).
        out: parent of the run directories (when ``opts`` is not given).
        progress: receives one human line per step (the runs' own lines go to
            ``opts.progress``).
        opts: :class:`~specdash.bench.runner.RunOptions` of every run (later launches
            skip the preflight: the first one passed it).
        preset_dir: where the winner is saved (default: the user's profile directory).

    Raises:
        ValueError: the profile has no speculation to tune.
        PreflightBlocked, RunFailed, ServerStartError: from the runs.
    """
    from specdash.advisor import Measurement, Settings, TunePlanner
    from specdash.bench.ab import run_ab
    from specdash.bench.runner import RunOptions, run_one

    if not profile.spec_enabled:
        raise ValueError(f"profile {profile.name} has no [speculative] settings to tune")
    say = progress or (lambda m: None)
    opts = opts or RunOptions(out_dir=out, progress=say)
    start_eff = build_launch(profile.expanded()).spec
    start = Settings(start_eff.num_steps, start_eff.eagle_topk, start_eff.num_draft_tokens)
    say(f"tune: baseline run of {profile.name} without speculation")
    base_run, _ = await run_one(baseline_of(profile), suite, opts)
    baseline = Measurement.from_run(base_run, concurrency=base_run.get("concurrency", 1))
    planner = TunePlanner(start, budget=budget, baseline=baseline)
    measurements: list[Measurement] = [baseline]
    runs: list[dict] = [base_run]
    profiles = {}
    while True:
        nxt = planner.next_settings(measurements)
        if nxt is None:
            say(f"tune: stop — {planner.reason}")
            break
        say(f"tune: launch {len(runs)}/{budget}: {nxt.label()} — {planner.reason}")
        prof = variant(profile, nxt.steps, nxt.topk, nxt.draft_tokens)
        run, _ = await run_one(prof, suite, replace(opts, preflight=False))
        runs.append(run)
        m = Measurement.from_run(run, concurrency=run.get("concurrency", 1))
        measurements.append(m)
        profiles[nxt] = prof
    best = planner.best(measurements)
    advice = planner.advice(measurements)
    winner = profiles.get(best, profile)
    say(f"tune: best {best.label()}; final A/B against {profile.name} with the baseline")
    cmp = None
    if best != planner.start:
        _, cmp = await run_ab(profile, variant(profile, best.steps, best.topk, best.draft_tokens, suffix="best"),
                              baseline_of(profile), suite, replace(opts, preflight=False), rounds=1)
    if preset_dir is None:
        from specdash.profile import user_profile_dir

        preset_dir = user_profile_dir()
    preset, not_saved = None, None
    if advice.pays is False:
        not_saved = ("speculation does not pay with this draft (see the advice): no preset saved; "
                     "serve without speculation until the draft improves")
    elif best == planner.start:
        not_saved = "the starting settings were best: nothing new to save"
    else:
        preset = save_preset(profile, winner, preset_dir, best)
    return {
        "profile": profile.name,
        "suite": suite.name,
        "budget": budget,
        "launches": len(runs) - 1,
        "stop_reason": planner.reason,
        "start": start.to_json(),
        "best": best.to_json(),
        "baseline_tok_s": base_run.get("output_tok_s"),
        "measured": [
            {"settings": m.settings.to_json() if m.settings else None, "output_tok_s": m.output_tok_s,
             "accept_length": m.accept_length, "run_dir": r.get("run_dir")}
            for m, r in zip(measurements, runs)
        ],
        "advice": advice.to_json(),
        "advice_text": advice.render(),
        "comparison": cmp,
        "preset": str(preset) if preset else None,
        "preset_not_saved": not_saved,
    }


def write_tune_report(out: Path, report: dict) -> Path:
    """Write ``report`` (from :func:`tune`) as ``tune.json`` and its advice as ``advice.txt``
    into a new ``out/<stamp>-<profile>-tune/`` directory; returns that directory."""
    tdir = RunDir.create(out, f"{report['profile']}-tune")
    atomic_write_json(tdir.path / "tune.json", report)
    (tdir.path / "advice.txt").write_text(report["advice_text"] + "\n", encoding="utf-8")
    return tdir.path
