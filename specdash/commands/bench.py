"""``specdash --bench``: headless runs, A/B comparisons, tables and JSON.

Progress goes to stderr (a rich.progress bar per measured pass on a terminal, plain lines otherwise); stdout
holds only the table — or, with ``--json``, only the summary / comparison JSON.
Exit codes (:mod:`specdash.commands.errors`): 0 success; 1 a run failed, preflight blocked
it, or post-launch verification failed without ``--allow-unverified``; 2 usage or
configuration error.  The runs themselves are :mod:`specdash.bench.runner` and
:mod:`specdash.bench.ab`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

from specdash.bench.runner import RunOptions
from specdash.commands.bench_args import (
    bench_profile,
    bench_suite,
    check_args,
    check_resume,
    check_run_size,
    request_fields,
    resume_defaults,
)
from specdash.commands.errors import (
    INTERRUPTED_RUN,
    ExitCode,
    UsageError,
    VerificationFailed,
    run,
)
from specdash.commands.tables import render_comparison, render_table, withhold_speedup

PROG = "specdash --bench"


#: A per-request progress line of the runner (``[profile] 3/20 prompt …``): on a terminal the bar stands for it.
_REQUEST_LINE = re.compile(r"^\[[^\]]*\] \d+/\d+ prompt ")


class Progress:
    """Human progress on stderr.  On a terminal: a :mod:`rich.progress` bar per measured pass — "point 2 of 4
    (c16), side B: …", requests done of total, elapsed and ETA — with the other lines printed above it;
    otherwise (a pipe, a CI log) plain lines, one per event, as before.

    ``__call__(msg)`` takes the runner's lines (:attr:`RunOptions.progress`), :meth:`event` its structured
    events (:attr:`RunOptions.on_progress`)."""

    def __init__(self, stream=None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.quiet = quiet
        self._console = None
        self._bar = None
        self._task = None

    def _con(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
        return self._console

    def __call__(self, msg: str) -> None:
        if self.quiet:
            return
        if not self.tty:
            self.stream.write(msg + "\n")
            self.stream.flush()
            return
        if self._bar is not None and _REQUEST_LINE.match(msg):
            return  # the bar counts the requests
        self._con().print(msg, markup=False)

    def event(self, ev: dict) -> None:
        """A structured event (:attr:`specdash.bench.runner.RunOptions.on_progress`): a new bar task per
        measured pass, advanced per finished request.  Nothing off a terminal (the lines say it)."""
        if self.quiet or not self.tty:
            return
        if self._bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("requests"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                            console=self._con(), transient=False)
            self._bar.start()
        if ev.get("event") == "point":
            where = f"point {ev['point']} of {ev['points']} ({ev['label']})" if ev.get("points", 1) > 1 \
                else str(ev.get("label") or "")
            side = f", {ev['side']}" if ev.get("side") else ""
            if self._task is not None:
                self._bar.stop_task(self._task)
            from rich.markup import escape

            self._task = self._bar.add_task(escape(f"[{ev.get('profile')}] {where}{side}"), total=ev.get("total") or None)
        elif ev.get("event") == "request" and self._task is not None:
            self._bar.update(self._task, completed=ev.get("done", 0))

    def done(self) -> None:
        """Stop the bar (its last state stays on screen)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar, self._task = None, None


def resume_complete(args) -> dict | None:
    """The ``summary.json`` of ``--resume RUNDIR`` when that run is already complete (a summary
    with no partial RUN, and every prompt × repeat of the request shape answered), else None."""
    from specdash.bench.rundir import RunDir, RunFileError, read_summary
    from specdash.bench.runner import work_items

    run_dir = Path(args.resume)
    try:
        summary = read_summary(run_dir / "summary.json")
        done = RunDir(run_dir).done_keys()  # streamed: no record is kept
    except (OSError, RunFileError):
        return None
    runs = summary.get("runs") if isinstance(summary, dict) else None
    if not runs or any(not isinstance(r, dict) or r.get("partial") for r in runs):
        return None
    suite = bench_suite(args)[0]
    want = set(work_items(suite, args.repeats or suite.suite.repeats))
    return summary if want <= done else None


def _resume_or_bench(args, progress: Progress) -> int:
    """``--resume RUNDIR`` of a run that is already complete: say so (``--json``: print its summary)
    and exit 0 without launching anything; otherwise :func:`_bench`."""
    if args.resume:
        resume_defaults(args)
        problem = check_resume(Path(args.resume), args)
        if problem:
            raise UsageError(f"cannot resume {args.resume}: {problem}")
        summary = resume_complete(args)
        if summary is not None:
            n = sum(int(r.get("requests") or 0) for r in summary["runs"])
            print(f"{PROG}: {args.resume} is already complete ({n} requests); nothing to resume "
                  f"(its results: {Path(args.resume) / 'summary.json'})", file=sys.stderr)
            if args.json:
                print(json.dumps(summary, indent=2, default=str))
            return ExitCode.OK
    return _bench(args, progress)


def _options(args, progress) -> RunOptions:
    from specdash.collect.exporter import cli_targets

    return RunOptions(
        out_dir=Path(args.out),
        url=args.url,
        api_key=args.api_key or os.environ.get("SGLANG_API_KEY"),
        allow_unverified=args.allow_unverified,
        force=args.force,
        resume=Path(args.resume) if args.resume else None,
        sglang_version=args.sglang_version,
        repeats=args.repeats,
        max_tokens=args.max_tokens,
        concurrency=args.concurrency,
        progress=progress,
        on_progress=progress.event,
        request_rate=getattr(args, "request_rate", None),
        burstiness=getattr(args, "burstiness", None) or 1.0,
        arrival_seed=getattr(args, "seed", None) or 0,
        goodput=getattr(args, "goodput_slo", None),
        gpu_exporters=cli_targets(getattr(args, "gpu_exporter", None)),
    )


def bench_main(args) -> int:
    """Entry of ``specdash --bench`` (``args`` from :func:`specdash.cli._main_parser`);
    returns the exit code (see :mod:`specdash.commands.errors`)."""
    progress = Progress()
    return run(PROG, lambda: _resume_or_bench(args, progress), json_output=args.json, interrupted=INTERRUPTED_RUN,
               cleanup=progress.done)


def _bench(args, progress: Progress) -> int:
    from specdash.bench.ab import run_ab
    from specdash.bench.runner import run_one
    from specdash.launch import attached_profile
    from specdash.profile import load_profile
    from specdash.sglang.leftovers import stop_leftovers_interactively
    from specdash.sglang.process import install_signal_handlers

    check_args(args)
    suite, dataset = bench_suite(args)
    check_run_size(suite, args.repeats)
    prof_a = bench_profile(args) if args.profile else attached_profile()
    prof_b = load_profile(args.vs) if args.vs else None
    no_baseline = getattr(args, "sweep", None) and args.baseline == "none"
    prof_r = load_profile(args.baseline) if args.baseline and not no_baseline else None
    install_signal_handlers()
    stop_leftovers_interactively(progress)
    opts = _options(args, progress)
    opts.extra_manifest = {**opts.extra_manifest, "request_fields": request_fields(suite)}
    if dataset is not None:  # the manifest records where the prompts came from
        from specdash.profile.datasets import describe

        opts.extra_manifest = {**opts.extra_manifest, "dataset": dataset}
        progress(describe(dataset))
    if getattr(args, "sweep", None):
        return _sweep(args, progress, prof_a, False if no_baseline else prof_r, suite, opts)
    try:
        if prof_b is not None:
            runs, cmp = asyncio.run(run_ab(prof_a, prof_b, prof_r, suite, opts, args.rounds))
            payload = cmp
        elif prof_r is not None and not args.url:
            # only a baseline: compare the profile against it (speedup = profile over baseline)
            runs, cmp = asyncio.run(run_ab(prof_r, prof_a, None, suite, opts, args.rounds))
            payload = cmp
        else:
            run_, _ = asyncio.run(run_one(prof_a, suite, opts))
            runs, cmp, payload = [run_], None, {"specdash_version": _version(), "runs": [run_]}
    finally:
        progress.done()
    failed = [r for r in runs if (r.get("verification") or {}).get("status") == "failed"]
    if cmp is not None and failed and not args.allow_unverified:
        withhold_speedup(cmp, [r["profile"] for r in failed])
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(render_table(runs))
        if cmp is not None:
            print(render_comparison(cmp))
            print(f"comparison: {cmp.get('compare_dir')}/comparison.json")
    if failed and not args.allow_unverified:
        raise VerificationFailed([r["profile"] for r in failed])
    return ExitCode.OK


def _sweep(args, progress: Progress, prof_a, prof_r, suite, opts) -> int:
    """``--sweep concurrency=…`` / ``request_rate=…``: :func:`specdash.bench.sweep.sweep_bench`, printed."""
    from specdash.bench.sweep import render_sweep, sweep_bench

    try:
        payload = asyncio.run(sweep_bench(prof_a, prof_r, suite, opts, args.sweep_spec))
    finally:
        progress.done()
    runs = payload["runs"]
    failed = sorted({r["profile"] for r in runs if (r.get("verification") or {}).get("status") == "failed"})
    if failed and not args.allow_unverified:
        for p in payload["sweep"]:
            p.update(speedup=None, ci95=None, verdict="withheld: verification failed")
        payload.update(break_even_concurrency=None, break_even_request_rate=None, break_even_ci95=None,
                       note=f"speedups withheld: post-launch verification failed for {', '.join(failed)}")
    if args.json:
        print(json.dumps({k: v for k, v in payload.items() if k != "runs"} | {"runs": runs}, indent=2, default=str))
    else:
        print(render_table(runs))
        print(render_sweep(payload))
    if failed and not args.allow_unverified:
        raise VerificationFailed(failed)
    return ExitCode.OK


def _version() -> str:
    from specdash import __version__

    return __version__
