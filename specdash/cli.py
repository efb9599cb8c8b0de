"""The one ``specdash`` entry point: parses the top level and dispatches to a command.

``specdash``                      interactive dashboard (profile picker)
``specdash --demo``               dashboard on the built-in simulator
``specdash --bench --profile P``  headless: launch (or ``--url`` attach), warm up, run a suite, report
``specdash profile import|show|list``, ``specdash doctor``, ``specdash draft fix|selftest``,
``specdash tune``, ``specdash report``, ``specdash compare``, ``specdash sim`` (the simulator, = ``python -m specdash.sim``),
``specdash completion bash|zsh|tcsh`` (a shell completion script).

Only :mod:`argparse` is imported here; every command (:mod:`specdash.commands`, the
dashboard, the simulator) is imported when it runs, so ``--help`` and ``--version`` stay
fast (no pydantic, Textual, scipy or torch).  Exit codes
(:class:`~specdash.commands.errors.ExitCode`): 0 success; 1 a run failed / an error finding /
verification failed; 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import sys

from specdash import DEFAULT_SUITE, __version__

#: The sub-commands and their one-line summaries (``specdash --help`` lists them; each has its own ``--help``).
SUMMARIES = {
    "profile": "create, show and list launch profiles (import a pasted SGLang command line)",
    "doctor": "preflight EAGLE3 checks of a profile: each finding with why and the exact fix",
    "draft": "fix a draft checkpoint's names and maps, or self-test the draft head on a training sample",
    "tune": "closed-loop tuning of steps / topk / draft tokens within a budget of launches",
    "report": "one self-contained HTML page from run, sweep, A/B and tune directories",
    "compare": "compare runs (paired speedup with a 95 %% CI), vLLM / AIPerf result files, or N runs at once",
    "sim": "the simulated SGLang server (same flags, API, log lines and metrics; no GPU)",
    "completion": "print a shell completion script (bash, zsh or tcsh; needs the [completion] extra)",
}
SUBCOMMANDS = tuple(SUMMARIES)
DEMO_PROFILE = "demo-eagle3"
DEMO_SUITE = DEFAULT_SUITE


def _main_parser() -> argparse.ArgumentParser:
    from specdash.commands.errors import Parser  # argparse and the standard library only

    p = Parser(
        hints={f"--sim-{k}": f"--sim-{k} is an option of the simulator (specdash sim); a profile's [sim] table sets it "
               f"for --bench and the dashboard: [sim] {k.replace('-', '_')} = …" for k in ("scenario", "seed")},
        prog="specdash",
        usage="specdash [--bench | --demo] [options]   or   specdash COMMAND [options]",
        description="Terminal dashboard for live speculative-decoding (EAGLE-3) tuning on SGLang: "
        "launch from profiles, verify EAGLE3 wiring, measure tok/s, TPOT, TTFT, accept length and "
        "rate, A/B profiles, and get draft-token / step / top-k advice.  Without a command: the dashboard "
        "(--bench: a headless run).",
        epilog="Run `specdash COMMAND --help` for a command's options.  --out, --suite, --sglang-version and "
        "--gpu-exporter can also come from SPECDASH_OUT, SPECDASH_SUITE, SPECDASH_SGLANG_VERSION, "
        "SPECDASH_GPU_EXPORTER or [defaults] in ~/.config/specdash/config.toml (the command line wins).",
    )
    sub = p.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    for name, summary in SUMMARIES.items():  # for --help: each command parses its own argv (_subcommand)
        sub.add_parser(name, help=summary, add_help=False)
    add_options(p)
    return p


def add_options(p: argparse.ArgumentParser) -> None:
    """The top-level options (dashboard and ``--bench``) on ``p``."""
    p.add_argument("--version", action="version", version=f"specdash {__version__}")
    p.add_argument("--bench", action="store_true", help="headless run: print a table (or --json) and exit")
    p.add_argument("--ui", choices=("dashboard", "simple", "none"),
                   help="dashboard (default on a terminal); simple: --bench's progress lines and table (the default "
                        "when standard output is not a terminal); none: --bench --json (the summary JSON only)")
    p.add_argument("--demo", action="store_true", help=f"use the simulator ({DEMO_PROFILE}, suite {DEMO_SUITE})")
    p.add_argument("--profile", "-p", metavar="P", help="profile name or path")
    p.add_argument("--vs", metavar="Q", help="A/B: also run profile Q and compare (speedup Q over P)")
    p.add_argument("--baseline", metavar="R", help="no-speculation profile: also report speedup vs R "
                   "(with --sweep, 'none' runs no baseline)")
    p.add_argument("--suite", "-s", metavar="S", help=f"suite name or path (default: {DEFAULT_SUITE})")
    p.add_argument("--dataset", metavar="SOURCE",
                   help="prompts from a dataset instead of --suite: spec_bench[:PATH] (Spec-Bench's questions), "
                        "speed_bench[:qualitative|throughput_1k|…] (NVIDIA SPEED-Bench), a Hugging Face hub dataset "
                        "hf:OWNER/NAME[:CONFIG[:SPLIT]] (from the local cache; HF_HUB_OFFLINE honoured), ShareGPT "
                        "JSON, JSONL ({prompt|text|messages|turns, category}), Parquet, a local Hugging Face dataset "
                        "directory, a name under profiles/datasets/ (mixed-50), or random:in=N,out=M"
                        "[,tokenizer=PATH] (exactly N input tokens under the target's tokenizer)")
    p.add_argument("--dataset-category", metavar="C[,C…]",
                   help="with --dataset: keep rows of these categories only (e.g. coding,math of SPEED-Bench)")
    p.add_argument("--num-prompts", type=int, metavar="N",
                   help="with --dataset: sample N prompts (default: all; 100 for random:)")
    p.add_argument("--seed", type=int, metavar="S",
                   help="seed of --dataset sampling, random: prompts and --request-rate arrivals (default 0)")
    p.add_argument("--min-input-tokens", type=int, metavar="N", help="with --dataset: keep prompts of ≥ N tokens")
    p.add_argument("--max-input-tokens", type=int, metavar="N", help="with --dataset: keep prompts of ≤ N tokens")
    p.add_argument("--temperature", type=float, metavar="T", help="sampling temperature (default: the suite's, 0)")
    p.add_argument("--top-p", type=float, metavar="P", help="nucleus sampling top_p in (0, 1]")
    p.add_argument("--top-k", type=int, metavar="K", help="top-k sampling (-1 = off)")
    p.add_argument("--sampling-seed", type=int, metavar="N", help="per-request sampling seed (SGLang sampling_seed)")
    p.add_argument("--extra-request-body", metavar="JSON",
                   help="a JSON object merged into every request, as SGLang's bench_serving --extra-request-body "
                        "(its \"sampling_params\" go into /generate's sampling_params)")
    p.add_argument("--url", metavar="URL", help="attach to a running SGLang server instead of launching")
    p.add_argument("--api-key", metavar="KEY", help="API key of an attached server; visible to every user in the "
                   "process list (ps), so prefer SGLANG_API_KEY or --api-key-file")
    p.add_argument("--api-key-file", metavar="FILE", help="read the attached server's API key from FILE (its first "
                   "line; keep it mode 0600) instead of the command line")
    p.add_argument("--out", metavar="DIR", help="parent directory of run directories (./runs)")
    p.add_argument("--json", action="store_true", help="print only the summary (or comparison) JSON on stdout")
    p.add_argument("--repeats", type=int, metavar="N", help="override the suite's repeats")
    p.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="A/B launch rounds; the launch order alternates (A,B then B,A) across rounds")
    p.add_argument("--allow-unverified", action="store_true",
                   help="report results even when post-launch verification failed")
    p.add_argument("--force", action="store_true", help="launch despite preflight errors")
    p.add_argument("--resume", metavar="RUNDIR", help="continue a partial run directory")
    p.add_argument("--sglang-version", metavar="V", help="judge against this SGLang version")
    p.add_argument("--max-tokens", type=int, metavar="N", help="override the suite's max_tokens")
    p.add_argument("--concurrency", type=int, metavar="N", help="override the suite's concurrency")
    p.add_argument("--sweep", metavar="concurrency=N,N,…|request_rate=R,R,…",
                   help="run the suite at each concurrency (closed loop) or request rate (open loop, requests/s; "
                        "--concurrency caps the requests in flight, --burstiness shapes the arrivals) in one launch "
                        "per side, against the baseline (--baseline R, else the profile without speculation); prints "
                        "the speedup curve and the break-even concurrency or rate")
    p.add_argument("--request-rate", type=float, metavar="R",
                   help="open loop: send requests at R per second (Poisson, or gamma gaps with --burstiness; "
                        "inf = all at once) instead of --concurrency workers; --concurrency then caps the "
                        "requests in flight")
    p.add_argument("--burstiness", type=float, default=1.0, metavar="B",
                   help="with --request-rate: gamma shape of the inter-arrival times (1 = Poisson, <1 burstier, "
                        ">1 more even; default 1)")
    p.add_argument("--goodput", nargs="+", metavar="METRIC:MS",
                   help="SLOs for goodput, e.g. ttft:200 tpot:30 e2e:5000 (ms): requests/s meeting all of them")
    p.add_argument("--gpu-exporter", action="append", type=_exporter_spec, metavar="NODE=URL",
                   help="GPU telemetry of another node from its Prometheus exporter (dcgm-exporter, e.g. "
                        "node1=http://node1:9400/metrics, or nvitop-exporter); repeatable; for the dashboard's "
                        "GPU panel and --bench's manifest (the local host is read through NVML)")


def _exporter_spec(value: str) -> str:
    """``--gpu-exporter``'s shape check (``NODE=URL``, both non-empty); the value is parsed by
    :func:`specdash.collect.exporter.parse_target` where it is used (keeps this module's imports light)."""
    node, sep, url = value.partition("=")
    if not sep or not node.strip() or not url.strip():
        raise argparse.ArgumentTypeError(f"want NODE=URL (e.g. node1=http://node1:9400/metrics), got {value!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run; returns the process exit code (see module docstring).

    A reader that closes stdout early (``specdash profile show P | head``) ends the
    command quietly with 141, as a shell pipeline would, instead of a traceback.
    """
    try:
        return int(_main(argv))
    except BrokenPipeError:
        import os

        from specdash.commands.errors import ExitCode

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
        return int(ExitCode.BROKEN_PIPE)
    except Exception as exc:  # a bug: one line, the traceback in a crash file
        return _internal_error(exc, argv)


def _internal_error(exc: Exception, argv: list[str] | None) -> int:
    """Report an exception no command expects: ``specdash: internal error: <Type>: <msg>`` and
    where the full traceback went (a crash file, mode 0600, under the state directory's
    ``crashes/``; secrets redacted); exit 1.  When no file can be written the traceback goes to
    stderr instead."""
    import os
    import time
    import traceback

    from specdash.sglang.process import state_dir
    from specdash.sglang.secrets import redact_text, redact_url, secret_values

    args = list(sys.argv[1:] if argv is None else argv)
    secrets = [*secret_values(args), *(v for k, v in os.environ.items() if k == "SGLANG_API_KEY" and v)]
    if _API_KEY_READ:
        secrets.append(_API_KEY_READ[-1])

    def hide(t: str) -> str:  # secret flag values, the environment's key, URL passwords (--gpu-exporter)
        return redact_url(redact_text(t, secrets))

    text = hide("".join(traceback.format_exception(exc)))
    msg = hide(str(exc).splitlines()[0] if str(exc) else "")
    sys.stdout.flush()
    print(f"specdash: internal error: {type(exc).__name__}" + (f": {msg}" if msg else ""), file=sys.stderr)
    body = (f"specdash {__version__}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, pid {os.getpid()}\n"
            f"argv: {hide(repr(args))}\n\n{text}")
    try:
        base = state_dir()
        crash_dir = (base.parent if base.name == "servers" else base) / "crashes"
        crash_dir.mkdir(parents=True, exist_ok=True)
        path = crash_dir / f"crash-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
    except OSError as err:
        print(f"specdash: (cannot write a crash file: {err}); the traceback:\n{body}", file=sys.stderr)
    else:
        print(f"specdash: the full traceback is in {path}; please include it when reporting this bug",
              file=sys.stderr)
    return 1


#: A runnable A/B on the simulator (shipped profiles): the example of :func:`_ab_is_not_a_command`.
AB_EXAMPLE = "specdash --bench --profile demo-baseline --vs demo-eagle3"


def _ab_is_not_a_command(rest: list[str]) -> int:
    """``specdash ab …``: there is no ``ab`` command; an A/B is ``--bench --profile P --vs Q``.  Print what is
    missing from the options given (P, Q or both) and the command line to run — theirs, completed, else
    :data:`AB_EXAMPLE` — and the ``compare`` forms for servers or runs that already exist; exit 2."""
    import shlex

    from specdash.commands.errors import ExitCode

    flags = {a.split("=", 1)[0] for a in rest}
    has_a = bool(flags & {"--profile", "--demo"}) or any(a.startswith("-p") for a in rest)  # -p P, -pP
    has_b = "--vs" in flags
    missing = [part for part, given in (("--profile P (side A, the reference)", has_a),
                                        ("--vs Q (side B; speedup = Q over P)", has_b)) if not given]
    if "--url" in flags:  # --vs launches both sides: two servers already running are compared by `compare`
        what, example = "--url attaches to one server; an A/B of two running servers is", \
            "specdash compare --url URL_A --vs-url URL_B"
    elif not rest:
        what, example = f"missing: {' and '.join(missing)}; e.g. on the simulator", AB_EXAMPLE
    else:
        what = f"missing: {' and '.join(missing)}; run" if missing else "nothing is missing; run it without `ab`"
        example = " ".join(["specdash --bench", *([] if has_a else ["--profile P"]), shlex.join(rest),
                            *([] if has_b else ["--vs Q"])])
    print(f"specdash: `ab` is not a command: an A/B runs with --bench, --profile P and --vs Q; {what}:\n"
          f"  {example}\n"
          + ("(two finished runs: " if "--url" in flags else
             "(two servers already running: specdash compare --url URL_A --vs-url URL_B; two finished runs: ")
          + "specdash compare RUNDIR_A RUNDIR_B)", file=sys.stderr)
    return ExitCode.USAGE


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "ab":  # not a command (an A/B is --bench … --vs Q): say so, not argparse's "invalid choice"
        return _ab_is_not_a_command(argv[1:])
    if argv and argv[0] in SUBCOMMANDS:
        return _subcommand(argv[0], argv[1:])
    parser = _main_parser()
    args = parser.parse_args(argv)
    from specdash.commands.errors import UsageError
    from specdash.commands.settings import fill

    try:
        fill(args, ("out", "suite", "sglang_version", "gpu_exporter"))
        args.gpu_exporter = [_exporter_spec(v) for v in args.gpu_exporter] if args.gpu_exporter else None
    except (UsageError, argparse.ArgumentTypeError) as exc:
        parser.error(str(exc))
    args.out = args.out or "runs"
    if (code := _api_key_source(args)) is not None:
        return code
    if args.demo and not args.profile and not args.url:
        args.profile = DEMO_PROFILE
    ui = args.ui
    if ui is None and not args.bench and not sys.stdout.isatty() and not _force_tui():
        ui = "simple"  # no terminal to draw on: run as --bench does (AIPerf's --ui simple)
        if args.profile or args.url:
            print("specdash: standard output is not a terminal: running headless (--ui simple, as --bench); "
                  "--ui none prints only the summary JSON", file=sys.stderr)
    if args.bench or ui in ("simple", "none"):
        from specdash.commands.bench import bench_main

        if ui == "none":
            args.json = True
        if not args.bench and not args.profile and not args.url:
            from specdash.commands.errors import ExitCode

            print("specdash: standard output is not a terminal, so the dashboard (and its profile picker) cannot "
                  "be drawn; run headless with a profile: specdash --profile P (or --demo, or --url URL)",
                  file=sys.stderr)
            return ExitCode.USAGE
        return bench_main(args)
    from specdash.tui.app import run_tui

    return run_tui(args)


#: The API key read from ``--api-key-file`` (kept for the crash file's redaction).
_API_KEY_READ: list[str] = []


def _api_key_source(args) -> int | None:
    """Where the attached server's API key comes from: ``--api-key-file FILE`` (its first line), else
    ``--api-key KEY`` — which works but is visible in this process's argv to every user of the machine
    (``ps``, ``/proc/PID/cmdline``), so a warning says so —, else ``SGLANG_API_KEY`` (read where it is
    used).  Returns an exit code for an unreadable key file, else None."""
    if getattr(args, "api_key_file", None):
        from specdash.bounded import InputError, read_text

        if args.api_key:
            print("specdash: give --api-key or --api-key-file, not both", file=sys.stderr)
            return 2
        try:
            lines = read_text(args.api_key_file, limit=64 * 1024, what="--api-key-file").splitlines()
        except InputError as exc:
            print(f"specdash: {exc}", file=sys.stderr)
            return 2
        key = lines[0].strip() if lines else ""
        if not key:
            print(f"specdash: --api-key-file {args.api_key_file}: the file is empty (its first line is the key)",
                  file=sys.stderr)
            return 2
        args.api_key = key
        _API_KEY_READ.append(key)
    elif getattr(args, "api_key", None):
        print("specdash: warning: --api-key puts the key in specdash's own command line, which every user of this "
              "machine can read (ps, /proc/PID/cmdline); set SGLANG_API_KEY or use --api-key-file FILE instead",
              file=sys.stderr)
    return None


def _force_tui() -> bool:
    import os

    return os.environ.get("SPECDASH_FORCE_TUI") == "1"


def _subcommand(name: str, rest: list[str]) -> int:
    if name == "completion":
        from specdash.commands.completion import completion_main

        return completion_main(rest, SUMMARIES, add_options)
    if name == "sim":
        from specdash.sim.__main__ import main as sim_main

        return int(sim_main(rest) or 0)
    if name == "profile":
        from specdash.commands.profile import profile_main

        return profile_main(rest)
    if name == "doctor":
        from specdash.commands.doctor import doctor_command

        return doctor_command(rest)
    if name == "draft":
        from specdash.commands.draft import draft_command

        return draft_command(rest)
    if name == "tune":
        from specdash.commands.tune import tune_main

        return tune_main(rest)
    if name == "report":
        from specdash.commands.report import report_main

        return report_main(rest)
    if name == "compare":
        from specdash.commands.report import compare_main

        return compare_main(rest)
    raise AssertionError(name)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
