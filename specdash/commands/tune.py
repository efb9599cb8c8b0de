"""``specdash tune``: measure → fit → suggest → relaunch, within a budget of launches.

The command: arguments, progress on stderr, the advice (or ``--json``, the tune report)
on stdout, ``tune.json`` + ``advice.txt`` in ``DIR/<stamp>-<profile>-tune/``.  The loop
itself is :func:`specdash.bench.tune.tune`; ``--live`` measures chain step tiers inside
adaptive launches (:mod:`specdash.bench.live`) and then generates and verifies an adaptive
config (:mod:`specdash.bench.schedule`).  Exit codes: :mod:`specdash.commands.errors`
(0 done; 1 a run failed or preflight refused the first launch; 2 usage or configuration
error, e.g. a profile without ``[speculative]`` settings to tune).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from specdash import DEFAULT_SUITE
from specdash.commands.errors import INTERRUPTED_RUN, ExitCode, Parser, UsageError, run

PROG = "specdash tune"


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0].replace("``", ""))
    p.add_argument("--profile", "-p", required=True, help="profile to tune (name or path)")
    p.add_argument("--suite", "-s", help=f"suite (name or path; default {DEFAULT_SUITE})")
    p.add_argument("--budget", type=int, default=6, help="exploration launches (default 6)")
    p.add_argument("--live", action="store_true",
                   help="measure two chain step tiers per launch through SGLang's adaptive controller (0.5.14+, "
                        "topk 1; trees and older releases fall back to relaunches), then generate an adaptive "
                        "config and verify it against the best static setting")
    p.add_argument("--chain-launches", type=int, default=3, metavar="N",
                   help="--live: adaptive launches for the chain tiers at most (default 3; within --budget)")
    p.add_argument("--sweep", metavar="C1,C2,...",
                   help="--live: concurrencies the adaptive config is verified at (default: the suite's and a high "
                        "one, max(16, 4 × it))")
    p.add_argument("--no-schedule", action="store_true", help="--live: skip the adaptive config")
    p.add_argument("--verify-schedule", action="store_true",
                   help="--live: A/B the adaptive config against the pick even when the fitted model predicts it "
                        "gains less than 3%% at every load (two launches; the measurement decides)")
    p.add_argument("--max-launches", type=int, default=None, metavar="N",
                   help="--live: launches in all, baseline, final A/B and the schedule's A/B included (default 6)")
    p.add_argument("--no-final-ab", action="store_true",
                   help="skip the final A/B of the best against the start and the baseline (by default it pairs the "
                        "requests of their exploration launches: no launch of its own, except one for a best "
                        "measured only as an adaptive tier)")
    p.add_argument("--fresh-ab", action="store_true",
                   help="run the final A/B in fresh launches (start, best, baseline: three launches), free of the "
                        "exploration's selection effect")
    p.add_argument("--full-start", action="store_true",
                   help="start the exploration launches as the final ones (default: without SGLang's warm-up "
                        "request and with decode CUDA graphs only up to the tune's concurrency — "
                        "--skip-server-warmup, --cuda-graph-max-bs-decode — which start faster and measure the "
                        "same; the baseline and the final A/B never get them)")
    p.add_argument("--max-time", type=float, metavar="SECONDS",
                   help="wall-clock budget of the whole tune: no launch starts that would end past it (judged by "
                        "the longest launch so far); the baseline and the starting settings always run")
    p.add_argument("--baseline-from", metavar="RUN_DIR",
                   help="reuse the no-speculation run in RUN_DIR (a finished `specdash --bench` run directory of "
                        "the same server and suite, e.g. the profile's baseline) instead of launching one")
    p.add_argument("--out", help="parent of the run directories and the tune directory (default ./runs)")
    p.add_argument("--json", action="store_true", help="print only the tune report JSON")
    p.add_argument("--save-to", metavar="DIR",
                   help="where the winner preset is written (default: your profile directory)")
    p.add_argument("--force", action="store_true", help="launch despite preflight errors")
    return p


def tune_main(argv: list[str]) -> int:
    """Entry of ``specdash tune`` (``argv`` after the sub-command); returns the exit code."""
    from specdash.commands.bench import Progress
    from specdash.commands.settings import fill

    parser = _parser()
    args = parser.parse_args(argv)
    try:
        fill(args, ("out", "suite"))
    except UsageError as exc:
        parser.error(str(exc))
    args.suite, args.out = args.suite or DEFAULT_SUITE, args.out or "runs"
    progress = Progress()
    return run(PROG, lambda: _tune(args, progress), json_output=args.json, interrupted=INTERRUPTED_RUN,
               cleanup=progress.done)


def _tune(args: argparse.Namespace, progress) -> int:
    from specdash import bounded as B
    from specdash.bench.runner import RunOptions
    from specdash.bench.tune import tune, write_tune_report
    from specdash.bench.tune_text import render_live
    from specdash.profile import load_profile, load_suite
    from specdash.sglang.process import install_signal_handlers

    for flag, value in (("--budget", args.budget), ("--chain-launches", args.chain_launches),
                        ("--max-launches", args.max_launches if args.max_launches is not None else 2)):
        try:
            B.bounded_int(value, lo=1, hi=B.MAX_BUDGET, what=flag, why="each is a server launch")
        except B.InputError as exc:
            raise UsageError(str(exc)) from None
    if not args.live:
        given = [f for f, on in (("--sweep", args.sweep), ("--no-schedule", args.no_schedule),
                                 ("--verify-schedule", args.verify_schedule),
                                 ("--chain-launches", args.chain_launches != 3),
                                 ("--max-launches", args.max_launches is not None)) if on]
        if given:
            raise UsageError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only with --live "
                             "(the relaunch loop has no chain launches "
                             "and no adaptive schedule): add --live or drop them")
    if args.no_schedule and args.verify_schedule:
        raise UsageError("--no-schedule and --verify-schedule contradict each other: keep one")
    sweep = None
    if args.sweep:
        try:
            sweep = sorted({int(x) for x in args.sweep.split(",") if x.strip()})
        except ValueError:
            raise UsageError(f"--sweep takes concurrencies like 1,16 (got {args.sweep!r})") from None
        if len(sweep) < 2 or sweep[0] < 1:
            raise UsageError("--sweep needs two or more concurrencies ≥ 1 (e.g. 1,16)")
        if sweep[-1] > B.MAX_CONCURRENCY or len(sweep) > 64:
            raise UsageError(f"--sweep takes at most 64 concurrencies of at most {B.MAX_CONCURRENCY:,} (SGLang's "
                             f"default max_running_requests tops out there; got {args.sweep[:80]!r})")
    if args.max_time is not None and not 0 < args.max_time <= B.MAX_SECONDS:
        raise UsageError(f"--max-time must be a positive number of seconds, at most {B.MAX_SECONDS:,.0f} (a week; "
                         f"got {args.max_time:g})")
    if args.baseline_from is not None and not args.baseline_from.strip():
        raise UsageError("--baseline-from needs a run directory (an empty value would silently launch a new "
                         "baseline); leave the option out to measure one")
    profile = load_profile(args.profile)
    from specdash.profile.nodes import launch_refusal, launches_nodes

    if profile.multi_node and not launches_nodes(profile):  # every tune step is a launch
        from specdash.profile import ProfileError

        raise ProfileError(launch_refusal(profile))
    suite = load_suite(args.suite)
    base_run, base_notes = None, []
    if args.baseline_from:
        from specdash.bench.baseline import BaselineRunError, load_baseline_run

        try:
            base_run, base_notes = load_baseline_run(Path(args.baseline_from), profile, suite)
        except BaselineRunError as e:
            raise UsageError(str(e)) from None
    install_signal_handlers()
    out = Path(args.out)
    opts = RunOptions(out_dir=out, progress=progress, on_progress=progress.event, force=args.force)
    try:
        report = asyncio.run(tune(profile, suite, budget=args.budget, out=out, progress=progress, opts=opts,
                                  preset_dir=Path(args.save_to) if args.save_to else None, live=args.live,
                                  chain_budget=args.chain_launches, sweep=sweep,
                                  schedule=False if args.no_schedule else None, final_ab=not args.no_final_ab,
                                  max_time_s=args.max_time, baseline_run=base_run, baseline_notes=base_notes,
                                  fast_explore=not args.full_start, fresh_ab=args.fresh_ab,
                                  max_launches=args.max_launches, verify_schedule=args.verify_schedule))
    finally:
        progress.done()
    tdir = write_tune_report(out, report)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return ExitCode.OK
    print(report["advice_text"])
    print()
    print(render_live(report))
    b = report["best"] or {}
    label = (f"steps {b.get('speculative_num_steps')} / topk {b.get('speculative_eagle_topk')} / draft tokens "
             f"{b.get('speculative_num_draft_tokens')}") if b else "—"
    print(f"tune: best {label} ({report['stop_reason']})")
    rec = report.get("recommendation") or {}  # render_live printed it (and the progress lines the schedule's verdict)
    if report["comparison"]:
        from specdash.commands.tables import render_comparison

        print(render_comparison(report["comparison"]))
    if report["preset"]:
        print(f"saved the winner as {report['preset']}")
    elif report["preset_not_saved"]:
        print(f"tune: {report['preset_not_saved']}")
    sched = report.get("adaptive_schedule")
    if sched and sched.get("config_path"):
        print(f"tune: adaptive config ({sched['format']}, SGLang {sched['target_version']}): {sched['config_path']}"
              + ("" if sched.get("verdict") == rec.get("text") else f"; {sched.get('verdict')}"))
    print(f"tune report: {tdir / 'tune.json'}")
    return ExitCode.OK
