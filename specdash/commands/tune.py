"""``specdash tune``: measure → fit → suggest → relaunch, within a budget of launches.

The command: arguments, progress on stderr, the advice (or ``--json``, the tune report)
on stdout, ``tune.json`` + ``advice.txt`` in ``DIR/<stamp>-<profile>-tune/``.  The loop
itself is :func:`specdash.bench.tune.tune`.  Exit codes: :mod:`specdash.commands.errors`
(0 done; 1 a run failed or preflight refused the first launch; 2 usage or configuration
error, e.g. a profile without ``[speculative]`` settings to tune).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from specdash.commands.errors import INTERRUPTED_RUN, ExitCode, UsageError, run

PROG = "specdash tune"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", "-p", required=True, help="profile to tune (name or path)")
    p.add_argument("--suite", "-s", default="seeds-five", help="suite (name or path)")
    p.add_argument("--budget", type=int, default=6, help="exploration launches (default 6)")
    p.add_argument("--out", default="runs", help="parent of the run directories and the tuned preset")
    p.add_argument("--json", action="store_true", help="print only the tune report JSON")
    p.add_argument("--save-to", metavar="DIR",
                   help="where the winner preset is written (default: your profile directory)")
    p.add_argument("--force", action="store_true", help="launch despite preflight errors")
    return p


def tune_main(argv: list[str]) -> int:
    """Entry of ``specdash tune`` (``argv`` after the sub-command); returns the exit code."""
    from specdash.commands.bench import Progress

    args = _parser().parse_args(argv)
    progress = Progress()
    return run(PROG, lambda: _tune(args, progress), json_output=args.json, interrupted=INTERRUPTED_RUN,
               cleanup=progress.done)


def _tune(args: argparse.Namespace, progress) -> int:
    from specdash.bench.runner import RunOptions
    from specdash.bench.tune import tune, write_tune_report
    from specdash.profile import load_profile, load_suite
    from specdash.sglang.process import install_signal_handlers

    if args.budget < 1:
        raise UsageError("--budget must be at least 1")
    profile = load_profile(args.profile)
    suite = load_suite(args.suite)
    install_signal_handlers()
    out = Path(args.out)
    opts = RunOptions(out_dir=out, progress=progress, force=args.force)
    try:
        report = asyncio.run(tune(profile, suite, budget=args.budget, out=out, progress=progress, opts=opts,
                                  preset_dir=Path(args.save_to) if args.save_to else None))
    finally:
        progress.done()
    tdir = write_tune_report(out, report)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return ExitCode.OK
    print(report["advice_text"])
    print(f"\ntune: {report['launches']} launches ({report['stop_reason']}); best {report['best']}")
    if report["comparison"]:
        from specdash.commands.bench import render_comparison

        print(render_comparison(report["comparison"]))
    if report["preset"]:
        print(f"saved the winner as {report['preset']}")
    elif report["preset_not_saved"]:
        print(f"tune: {report['preset_not_saved']}")
    print(f"tune report: {tdir / 'tune.json'}")
    return ExitCode.OK
