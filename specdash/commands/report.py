"""``specdash report`` and ``specdash compare``: pages and comparisons from directories already written.

``specdash report DIR... [--out FILE.html] [--force] [--svg DIR] [--png DIR]`` writes one self-contained
HTML page (:mod:`specdash.bench.html`) from run, A/B compare and tune directories; default
``DIR/report.html`` of the first directory; ``--svg`` / ``--png`` also write each of its charts as an image
(:func:`specdash.bench.svg.export_charts`).  It replaces a page it wrote before (one whose
generator tag says ``specdash report``) but never another file unless ``--force``.

``specdash compare RUNDIR_A RUNDIR_B [--json] [--concurrency N] [--allow-unverified]`` pairs the two
run directories' ``requests.jsonl`` records by prompt and repeat and prints the comparison
(:func:`specdash.bench.compare.build_comparison`: speedup B over A, 95 % CI, verdict, per prompt and
category) — with ``--json`` the ``comparison.json``-shaped dict and nothing else.  Two sweeps are
paired per point: the top level pools every shared point (each pair stays within its point),
``per_concurrency`` gives each point's speedup and ``break_even_concurrency`` / ``break_even_ci95``
where the curve crosses 1 (two ``request_rate`` sweeps: ``per_request_rate`` and
``break_even_request_rate``); ``--concurrency N`` compares one point of two concurrency sweeps only.  As with ``--bench``, the
speedups of a side whose post-launch verification failed are withheld unless ``--allow-unverified``.

``specdash compare --url URL_A --vs-url URL_B [--suite S] [--max-tokens N] [--concurrency N] [--out DIR]``
compares two servers the user started: the suite runs against A, then against B (one run directory
each, ``attached-a`` / ``attached-b``), and the comparison is written as ``--bench --vs`` writes it
(``DIR/<stamp>-compare/``: ``comparison.json``, CSV, ``report.md``).

Exit codes (:mod:`specdash.commands.errors`): 0 done; 1 verification failed (compare, without
``--allow-unverified``); 2 a directory is missing, is not a run directory, has no records, or the
output file is not one ``specdash report`` wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from specdash import DEFAULT_SUITE
from specdash.commands.errors import ExitCode, Parser, UsageError, VerificationFailed, run, url_problem

REPORT_PROG = "specdash report"
COMPARE_PROG = "specdash compare"


def _report_parser() -> argparse.ArgumentParser:
    p = Parser(prog=REPORT_PROG, description="One self-contained HTML page (inline SVG charts, no "
                                "scripts) from run, A/B compare and tune directories.")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run, compare (comparison.json) or tune (tune.json) directory")
    p.add_argument("--out", metavar="FILE.html", help="where to write the page (default: DIR/report.html of the first DIR)")
    p.add_argument("--title", help="the page's title")
    p.add_argument("--force", action="store_true", help="overwrite --out even when specdash report did not write it")
    p.add_argument("--svg", metavar="DIR", help="also write each chart of the page as DIR/NN-<title>.svg")
    p.add_argument("--png", metavar="DIR", help="also write each chart as DIR/NN-<title>.png, rendered from the page's "
                   "own SVG (CairoSVG when installed, else headless Chromium)")
    return p


def report_main(argv: list[str]) -> int:
    """Entry of ``specdash report`` (``argv`` after the sub-command); returns the exit code."""
    args = _report_parser().parse_args(argv)
    return run(REPORT_PROG, lambda: _report(args))


def _report(args: argparse.Namespace) -> int:
    from specdash.bench.html import is_generated_report, render_report
    from specdash.bench.sources import ReportError, load_source

    try:
        sources = [load_source(d) for d in args.dirs]
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    out = Path(args.out) if args.out else Path(args.dirs[0]) / "report.html"
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory: give a file name (e.g. {out / 'report.html'})")
    if out.exists() and not args.force and not is_generated_report(out):
        raise UsageError(f"{out} exists and is not a page specdash report wrote: choose another --out, or pass "
                         "--force to overwrite it")
    for flag in ("svg", "png"):
        d = getattr(args, flag)
        if d and Path(d).exists() and not Path(d).is_dir():
            raise UsageError(f"--{flag} {d} is a file: give a directory for the chart images")
    with foreign_values(args.dirs):
        page = render_report(sources, title=args.title)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    print(f"report: {out}")
    from specdash.bench.svg import export_charts

    for flag in ("svg", "png"):
        if getattr(args, flag):
            try:
                files = export_charts(page, Path(getattr(args, flag)), flag)
            except RuntimeError as exc:
                raise UsageError(f"--{flag}: {exc}") from None
            print(f"charts: {len(files)} {flag.upper()} file(s) in {getattr(args, flag)}")
    return ExitCode.OK


def _compare_parser() -> argparse.ArgumentParser:
    p = Parser(prog=COMPARE_PROG, description="Paired comparison of two run directories "
                                "(speedup B over A, 95 % CI, verdict, per prompt and category); sides of different "
                                "request shapes are 'not comparable'.  A side may also be a vLLM `bench serve "
                                "--save-result` JSON or an AIPerf profile_export_aiperf.json (or its artifact "
                                "directory): compared unpaired.  Three or more sides: one table over the first.")
    p.add_argument("sides", metavar="RUNDIR", nargs="*",
                   help="run directories or result files: A (the reference), B (speedup = B over A), more sides")
    p.add_argument("--json", action="store_true", help="print only the comparison JSON")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="compare one concurrency of two sweeps (with --url: the concurrency to run at)")
    p.add_argument("--url", metavar="URL_A", help="instead of run directories: run the suite against the server at "
                   "URL_A (A) and then the one at --vs-url (B), both already started, and compare them")
    p.add_argument("--vs-url", metavar="URL_B", help="with --url: server B")
    p.add_argument("--suite", "-s", metavar="S", default=DEFAULT_SUITE,
                   help=f"with --url: suite (name or path; default {DEFAULT_SUITE})")
    p.add_argument("--max-tokens", type=int, metavar="N", help="with --url: override the suite's max_tokens")
    p.add_argument("--repeats", type=int, metavar="N", help="with --url: override the suite's repeats")
    p.add_argument("--api-key", metavar="KEY", help="with --url: API key of both servers (or SGLANG_API_KEY)")
    p.add_argument("--out", metavar="DIR", default="runs",
                   help="with --url: parent of the two run directories and the compare directory (./runs)")
    p.add_argument("--allow-unverified", action="store_true",
                   help="report speedups even when post-launch verification failed for a side")
    return p


def compare_main(argv: list[str]) -> int:
    """Entry of ``specdash compare`` (``argv`` after the sub-command); returns the exit code."""
    args = _compare_parser().parse_args(argv)
    if args.url or args.vs_url:
        from specdash.commands.bench import Progress

        progress = Progress()
        return run(COMPARE_PROG, lambda: _compare_urls(args, progress), json_output=args.json,
                   interrupted="interrupted; partial results are in the run directories", cleanup=progress.done)
    return run(COMPARE_PROG, lambda: _compare(args), json_output=args.json)


def _compare(args: argparse.Namespace) -> int:
    if len(args.sides) < 2:
        raise UsageError("give two run directories (RUNDIR_A RUNDIR_B) — or result files of vLLM bench serve / "
                         "AIPerf, or more sides —, or --url URL_A --vs-url URL_B")
    for flag in ("suite", "max_tokens", "repeats", "api_key", "out"):
        if getattr(args, flag) != _compare_parser().get_default(flag):
            raise UsageError(f"--{flag.replace('_', '-')} applies only with --url URL_A --vs-url URL_B")
    from specdash.bench.external import is_external
    from specdash.commands.compare import Side, compare_dirs, compare_many, compare_pair, render_many

    if len(args.sides) == 2 and not any(is_external(p) for p in args.sides):
        with foreign_values(args.sides):
            cmp = compare_dirs(*args.sides, concurrency=args.concurrency)
        return _print_comparison(args, cmp)
    if len(args.sides) == 2:
        with foreign_values(args.sides):
            cmp = compare_pair(Side(args.sides[0], point=args.concurrency), Side(args.sides[1], point=args.concurrency))
        return _print_comparison(args, cmp)
    from specdash.commands.tables import withhold_speedup

    with foreign_values(args.sides):
        payload = compare_many(args.sides, concurrency=args.concurrency)
    failed = sorted({f for cmp in payload["comparisons"] for f in cmp.get("_failed", [])})
    for cmp in payload["comparisons"]:
        if cmp.pop("_failed", None) and not args.allow_unverified:
            withhold_speedup(cmp, failed)
    if args.json:
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(render_many(payload))
    if failed and not args.allow_unverified:
        raise VerificationFailed(failed)
    return ExitCode.OK


@contextlib.contextmanager
def foreign_values(dirs):
    """Turn a type error met while reading values out of run directories into a usage error naming them.

    The readers check every file's shape and the fields the figures come from
    (:func:`specdash.bench.rundir.read_summary`, :func:`specdash.sglang.records.record_problem`); a value
    deeper inside a hand-edited file (a tier's count as a string, a finding without a code) can still be
    of a type specdash never writes — that is the directory's fault, said as such, not an internal error.
    """
    try:
        yield
    except UsageError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        raise UsageError(f"{', '.join(map(str, dirs))}: a file there holds a value of a type specdash never writes "
                         f"({type(exc).__name__}: {str(exc)[:200]}); was it edited by hand or by another tool? "
                         "Run the benchmark again to get a directory specdash can read") from None


def _compare_urls(args: argparse.Namespace, progress) -> int:
    """``--url A --vs-url B``: the suite against each attached server in turn (A, then B), then the
    comparison of their records, written as an A/B compare directory as ``--bench --vs`` writes it."""
    import asyncio
    import os

    from specdash.bench.compare import build_comparison
    from specdash.bench.report import write_comparison
    from specdash.bench.rundir import RunDir, utc_stamp
    from specdash.bench.runner import RunOptions, run_one
    from specdash.profile import load_suite, parse_profile

    if args.sides:
        raise UsageError("give either run directories or --url URL_A --vs-url URL_B, not both")
    if not (args.url and args.vs_url):
        raise UsageError("--url URL_A needs --vs-url URL_B (and --vs-url needs --url)")
    for u, flag in ((args.url, "--url"), (args.vs_url, "--vs-url")):
        if problem := url_problem(u, flag):
            raise UsageError(problem)
    from specdash import bounded as B

    for flag, hi in (("max_tokens", B.MAX_TOKENS), ("repeats", B.MAX_REPEATS), ("concurrency", B.MAX_CONCURRENCY)):
        v = getattr(args, flag)
        if v is not None:
            try:
                B.bounded_int(v, lo=1, hi=hi, what=f"--{flag.replace('_', '-')}")
            except B.InputError as exc:
                raise UsageError(str(exc)) from None
    suite = load_suite(args.suite)
    stamp = utc_stamp()
    recs, runs = {}, []
    for side, url in (("a", args.url), ("b", args.vs_url)):
        prof = parse_profile({"name": f"attached-{side}", "server": {"model_path": "(attached)"}})
        opts = RunOptions(out_dir=Path(args.out), url=url, api_key=args.api_key or os.environ.get("SGLANG_API_KEY"),
                          allow_unverified=args.allow_unverified, repeats=args.repeats, max_tokens=args.max_tokens,
                          concurrency=args.concurrency, progress=progress, on_progress=progress.event, side=f"side {side.upper()}",
                          extra_manifest={"ab": {"stamp": stamp, "side": side, "round": 0}})
        try:
            run_, records = asyncio.run(run_one(prof, suite, opts))
        finally:
            progress.done()
        runs.append(run_)
        recs[side] = records
    cmp = build_comparison(recs["a"], recs["b"], a_name=f"A ({args.url})", b_name=f"B ({args.vs_url})")
    cmp["notes"] = [*cmp.get("notes", []), "attached servers: one run each, A then B (no launch order to "
                    "alternate); run it again as B, A to see drift"]
    cmp["runs"] = [r["run_dir"] for r in runs]
    cdir = RunDir.create(args.out, "compare", stamp=stamp)
    write_comparison(cdir.path, cmp)
    cmp["compare_dir"] = str(cdir.path)
    cmp["_failed"] = sorted({r.get("profile") for r in runs if (r.get("verification") or {}).get("status") == "failed"})
    return _print_comparison(args, cmp)


def _print_comparison(args: argparse.Namespace, cmp: dict) -> int:
    from specdash.commands.tables import withhold_speedup

    failed = cmp.pop("_failed")
    if failed and not args.allow_unverified:
        withhold_speedup(cmp, failed)
        for var in ("concurrency", "request_rate"):
            for p in cmp.get(f"per_{var}") or []:
                p.update(speedup=None, ci95=None, verdict="withheld: verification failed")
            if f"break_even_{var}" in cmp:
                cmp.update({f"break_even_{var}": None, "break_even_ci95": None})
    if args.json:
        print(json.dumps(cmp, indent=2, default=str))
    else:
        print(render_compare_text(cmp))
        if cmp.get("compare_dir"):
            print(f"comparison: {cmp['compare_dir']}/comparison.json")
    if failed and not args.allow_unverified:
        raise VerificationFailed(failed)
    return ExitCode.OK


def render_compare_text(cmp: dict) -> str:
    """The comparison as text: the A/B block, the two sides, each concurrency, the notes."""
    from specdash.commands.tables import fmt, render_comparison

    out = [render_comparison(cmp)]
    ov = cmp.get("overall") or {}
    for side in ("a", "b"):
        s = ov.get(side) or {}
        out.append(f"  {side.upper()}: {cmp.get(side)}: {s.get('requests')} requests, {fmt(s.get('tok_s'))} tok/s "
                   f"(mean per request), TPOT {fmt(s.get('tpot_ms'), 2)} ms, accept length "
                   f"{fmt(s.get('accept_length'), 3)}, accept rate {fmt(s.get('accept_rate'), 3)}")
        if s.get("accept_by_position"):
            out.append(f"     by draft position (accepted ÷ reached, {s.get('accept_by_position_source')}): "
                       + " ".join(fmt(r.get("rate"), 3) for r in s["accept_by_position"]))
    from specdash.bench.points import point_label

    var = "request_rate" if "per_request_rate" in cmp else "concurrency"
    for p in cmp.get(f"per_{var}") or []:
        lo, hi = p.get("ci95") or (None, None)
        out.append(f"  {point_label(var, p.get(var))}: {fmt(p.get('a_tok_s'))} → {fmt(p.get('b_tok_s'))} tok/s "
                   f"(×{fmt(p.get('throughput_ratio'), 3)} throughput), per-request speedup {fmt(p.get('speedup'), 3)}× "
                   f"(95 % CI {fmt(lo, 3)}–{fmt(hi, 3)}, {p.get('pairs')} pairs): {p.get('verdict')}")
    if cmp.get("break_even_concurrency") is not None:
        out.append(f"  break-even concurrency ≈ {cmp['break_even_concurrency']:.1f}")
    elif cmp.get("break_even_request_rate") is not None:
        out.append(f"  break-even request rate ≈ {cmp['break_even_request_rate']:.2f} requests/s")
    elif cmp.get("break_even_note"):
        out.append(f"  {cmp['break_even_note']}")
    for note in cmp.get("notes") or []:
        out.append(f"  note: {note}")
    return "\n".join(out)
