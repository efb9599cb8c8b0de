"""``specdash doctor``: preflight EAGLE3 checks of a profile (wired by ``specdash/cli.py``).

Exit codes (:mod:`specdash.commands.errors`): 0 no error finding, 1 an error finding, 2 the
profile cannot be read (or ``--sglang-version`` cannot be parsed).  ``--json`` prints only
the report JSON on stdout; messages go to stderr.
"""

from __future__ import annotations

import argparse
import json

from specdash.commands.errors import ExitCode, Parser, UsageError, run
from specdash.launch import sim_scenario_finding  # noqa: F401  (kept importable from here)

PROG = "specdash doctor"


def doctor_parser() -> argparse.ArgumentParser:
    """The ``specdash doctor`` parser (the profile positional or ``--profile``)."""
    p = Parser(prog=PROG, description="Preflight EAGLE3 checks of a profile.")
    add_doctor_arguments(p)
    return p


def doctor_command(argv: list[str]) -> int:
    """Entry of ``specdash doctor`` (``argv`` after ``doctor``); returns the exit code."""
    p = doctor_parser()
    args = p.parse_args(argv)
    if args.profile_pos and args.profile and args.profile_pos != args.profile:
        p.error(f"two profiles given ({args.profile_pos!r} and --profile {args.profile!r}): give one")
    args.profile = args.profile or args.profile_pos
    if not args.profile:
        p.error("give the profile: specdash doctor PROFILE (or --profile PROFILE)")
    from specdash.commands.errors import UsageError as _UsageError
    from specdash.commands.settings import fill

    try:
        fill(args, ("sglang_version",))
    except _UsageError as exc:
        p.error(str(exc))
    return doctor_main(args)


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``specdash doctor``."""
    parser.add_argument("profile_pos", nargs="?", metavar="PROFILE", help="profile name or path")
    parser.add_argument("--profile", help="profile name or path (the same as PROFILE)")
    parser.add_argument("--json", action="store_true", help="print only the JSON report on stdout")
    parser.add_argument("--sglang-version", metavar="V", default=None,
                        help="judge against this SGLang release (default: profile, installed sglang, else newest known)")
    parser.add_argument("--gpu-memory-mib", type=float, metavar="MIB", default=None,
                        help="memory per GPU for the MEMORY check (default: read through NVML when available)")
    parser.add_argument("--gpus", type=int, metavar="N", default=None,
                        help="number of GPUs with --gpu-memory-mib (default: the profile's tp_size)")
    parser.add_argument("--concurrency", type=int, metavar="N", default=None,
                        help="planned concurrent requests (CUDA-graph / tree checks; default max_running_requests)")


def _check_args(args: argparse.Namespace) -> None:
    """Raise :class:`UsageError` (exit 2) for values no check below could judge."""
    mib = getattr(args, "gpu_memory_mib", None)
    from specdash import bounded as B

    if mib is not None and not 0 < mib <= 1e9:  # also NaN and inf
        raise UsageError(f"--gpu-memory-mib must be a positive number of MiB of at most 1e9 (got {mib:g})")
    for flag, hi in (("gpus", 1_000_000), ("concurrency", B.MAX_CONCURRENCY)):
        value = getattr(args, flag, None)
        if value is not None:
            try:
                B.bounded_int(value, lo=1, hi=hi, what=f"--{flag}")
            except B.InputError as exc:
                raise UsageError(str(exc)) from None


def doctor_main(args: argparse.Namespace) -> int:
    """``specdash doctor`` on parsed ``args``: print the report; returns the exit code (0/1/2)."""
    return run(PROG, lambda: _doctor(args), json_output=bool(getattr(args, "json", False)))


def _doctor(args: argparse.Namespace) -> int:
    from specdash.launch import run_preflight
    from specdash.profile import load_profile

    _check_args(args)
    profile = load_profile(args.profile)
    profile.expanded()
    gpus = None  # the preflight's own: the simulator scenario's, else NVML's
    if getattr(args, "gpu_memory_mib", None):
        n = args.gpus or profile.server.tp_size
        gpus = [{"name": "GPU", "memory_total_mib": args.gpu_memory_mib}] * max(1, int(n))
    # the same entry as every launch's preflight (specdash.launch.run_preflight)
    report = run_preflight(profile, sglang_version=args.sglang_version, gpus=gpus,
                           concurrency=getattr(args, "concurrency", None))
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(report.render())
    return ExitCode.FAILED if report.has_errors else ExitCode.OK
