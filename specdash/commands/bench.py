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

from specdash import DEFAULT_SUITE
from specdash.bench.runner import RunOptions
from specdash.commands.errors import (
    INTERRUPTED_RUN,
    ExitCode,
    UsageError,
    VerificationFailed,
    run,
    url_problem,
)

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


def _fmt(v, nd=1, unit="") -> str:
    if v is None:
        return "—"
    return f"{v:.{nd}f}{unit}"


def render_ranks(run: dict) -> list[str]:
    """The RUN's per-rank line (``ranks``: :func:`specdash.bench.adaptive.rank_breakdown`) and a warning
    for a rank whose device time stands out; nothing with one rank."""
    from specdash.bench.adaptive import SLOW_RANK_ABOVE, rank_label, slow_ranks

    ranks = run.get("ranks")
    if not ranks:
        return []
    parts = []
    for r in ranks:
        dev, tok = r.get("device_time_s"), r.get("decode_tokens")
        parts.append(f"{rank_label(r)} " + " ".join(
            x for x in ((f"{dev:.2f} s GPU" if dev is not None else ""),
                        (f"{tok:.0f} decode tokens" if tok is not None else "")) if x))
    out = ["  per rank (scheduler series in /metrics): " + " · ".join(parts)]
    for r in slow_ranks(ranks):
        out.append(f"  warning: {rank_label(r)} spent {r['vs_median']:.2f}× the median rank's GPU time (more than "
                   f"{SLOW_RANK_ABOVE:.0%} above): more work on that rank (DP), a heavier pipeline stage (PP) or a "
                   "slower GPU or link")
    return out


def render_table(runs: list[dict]) -> str:
    """The bench table: one row per run (p50s for latencies)."""
    head = ["profile", "reqs", "out tok", "tok/s", "TTFT p50", "TPOT p50", "ITL p50", "accept len",
            "accept rate", "server τ", "verify"]
    rows = []
    for r in runs:
        tags = [t for t, on in (("sim", r.get("simulated")), ("simulated acceptance", r.get("acceptance_simulated")),
                                ("adaptive", (r.get("adaptive") or {}).get("enabled"))) if on]
        rows.append([
            r["profile"] + (f" ({', '.join(tags)})" if tags else ""),
            str(r["requests"]),
            str(r["output_tokens"]),
            _fmt(r.get("output_tok_s")),
            _fmt((r.get("ttft_ms") or {}).get("p50"), 1, " ms"),
            _fmt((r.get("tpot_ms") or {}).get("p50"), 2, " ms"),
            _fmt((r.get("itl_ms") or {}).get("p50"), 2, " ms"),
            _fmt(r.get("accept_length"), 2),
            _fmt(r.get("accept_rate"), 3),
            _fmt(r.get("server_accept_length"), 2),
            (r.get("verification") or {}).get("status", "—"),
        ])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    for r in runs:
        eff = r.get("effective") or {}
        version = r.get("sglang_version") or "unknown"
        if r.get("server_info_errors"):
            out.append(f"{r['profile']}: speculative settings and release unknown — /server_info fields with types "
                       f"SGLang never sends were ignored: {'; '.join(r['server_info_errors'])}")
        elif eff.get("speculative_algorithm"):
            out.append(
                f"{r['profile']}: {eff['speculative_algorithm']} steps {eff['speculative_num_steps']}, "
                f"topk {eff['speculative_eagle_topk']}, draft tokens {eff['speculative_num_draft_tokens']} "
                f"(read back from the server, SGLang {version})"
            )
        else:
            out.append(f"{r['profile']}: no speculation (SGLang {version})")
        if r.get("metrics_error"):
            out.append(f"  {r['metrics_error']} — server τ and the device timer were skipped")
        if r.get("client_bound"):
            out.append(f"  warning: client-bound: {r['client_bound']}")
        if r.get("acceptance_simulated"):
            out.append("  simulated acceptance: SGLANG_SIMULATE_ACC_LEN is set, so accept length and rate are the "
                       "variable's, not the draft's (the timings still hold)")
        out.extend(render_tiers(r))
        out.extend(render_ranks(r))
        for f in (r.get("verification") or {}).get("findings", []):
            out.append(f"  {f['severity'].upper()} {f['code']}: {f['message']}")
            if f.get("fix"):
                out.append(f"    fix: {f['fix']}")
        out.extend(render_positions(r))
        out.extend(render_load(r))
        out.extend(render_breakdowns(r))
        out.append(f"  run dir: {r.get('run_dir')}")
    out.append("accept len = tokens per verify round incl. the bonus token (Σ completion / Σ verify rounds); "
               "accept rate = accepted ÷ proposed drafts; server τ = Δgeneration_tokens / Δspec_verify_calls.")
    if any((r.get("adaptive") or {}).get("enabled") for r in runs):
        out.append("adaptive: a run's accept rate counts the drafts each tier proposed (steps per round); per tier, "
                   "from the server's decode log lines: rounds and tokens from #running-req × accept len, time from "
                   "gen throughput, the lines after each switch that still report the old tier left out; share = fraction of the rounds.")
    return "\n".join(out)


def render_positions(run: dict, expected: list[dict] | None = None) -> list[str]:
    """The RUN's acceptance by draft position on one line, compactly as vLLM's ``bench serve`` prints
    its "Per-position acceptance rate" — here P(accepted | reached) (``accept_by_position``, SGLang
    has no per-position counter: from the verify-round histogram), then P(accepted) as vLLM divides
    (by all rounds) — and, given ``expected`` (:func:`specdash.advisor.expected_accept_by_position`),
    the advisor's expectation beside it.  Nothing without speculation."""
    from specdash.sglang.positions import unconditional

    rows = run.get("accept_by_position")
    if not rows:
        return []
    src = run.get("accept_by_position_source") or "histogram"
    rates = " ".join(_fmt(r.get("rate"), 3) for r in rows)
    out = [f"  acceptance by draft position 1–{len(rows)} (accepted ÷ reached, from the {src}; "
           f"{rows[0].get('reached')} rounds): {rates}",
           "    P(accepted) per position, vLLM's per-position rate: " + " ".join(
               _fmt(v, 3) for v in unconditional(rows))]
    if expected:
        out.append("    advisor expects: " + " ".join(_fmt(e.get("rate"), 3) for e in expected))
    return out


def render_breakdowns(run: dict) -> list[str]:
    """Accept length per category and per context-length bucket (prompt + completion tokens), when the
    run has more than one group of either: where acceptance differs by task or falls with length."""
    out = []
    cats = run.get("by_category") or {}
    if len(cats) > 1 and run.get("accept_length") is not None:
        out.append("  accept length by category: " + " · ".join(
            f"{c} {_fmt(g.get('accept_length'), 2)} (n={g['requests']})" for c, g in cats.items()))
    ctx = run.get("by_context") or []
    if len(ctx) > 1 and run.get("accept_length") is not None:
        out.append("  accept length by context (prompt + completion tokens): " + " · ".join(
            f"{g['context_tokens']} {_fmt(g.get('accept_length'), 2)} (n={g['requests']})" for g in ctx))
    return out


def render_load(run: dict) -> list[str]:
    """The load-shape and goodput lines of a RUN: asked vs achieved request rate (open loop only),
    request throughput, e2e p50/p99, goodput under the ``--goodput`` SLOs (when given)."""
    out = []
    e2e = run.get("e2e_ms") or {}
    rate = run.get("request_rate")
    if rate is not None:
        cap = run.get("concurrency")
        out.append(f"  request rate: asked {rate if isinstance(rate, str) else f'{rate:g}'}/s "
                   f"(burstiness {run.get('burstiness'):g}, max in flight {cap or 'unlimited'}), "
                   f"achieved {_fmt(run.get('achieved_request_rate'), 2)}/s")
    if run.get("request_throughput") is not None:
        out.append(f"  request throughput {_fmt(run.get('request_throughput'), 2)} req/s; "
                   f"e2e p50 {_fmt(e2e.get('p50'), 0, ' ms')}, p99 {_fmt(e2e.get('p99'), 0, ' ms')}")
    slo = run.get("goodput_slo")
    if slo:
        what = ", ".join(f"{k.removesuffix('_ms')} ≤ {v:g} ms" for k, v in slo.items())
        frac = run.get("goodput_fraction")
        out.append(f"  goodput {_fmt(run.get('goodput'), 2)} req/s meeting {what} "
                   f"({_fmt(100.0 * frac if frac is not None else None, 1, ' %')} of requests)")
    return out


def render_tiers(run: dict) -> list[str]:
    """The per-tier block of an adaptive run (``tiers`` of the RUN; nothing when not adaptive)."""
    ad = run.get("adaptive") or {}
    tiers = run.get("tiers")
    if not ad.get("enabled"):
        return []
    cfg = ad.get("config") or {}
    slots = cfg.get("slots") or {}
    where = ", ".join(f"bs {k}: {v.get('candidate_steps')}" for k, v in slots.items()) or "config unknown"
    sw = ad.get("switches")
    out = [f"  adaptive speculation ({where}): {'?' if sw is None else sw} switch(es) in the run"]
    if not tiers:
        out.append("    no per-tier figures (no server log to read: an attached server)")
        return out
    head = ["steps", "draft tok", "share", "rounds", "accept len", "accept rate", "tok/s"]
    rows = [[str(t["speculative_num_steps"]), str(t["speculative_num_draft_tokens"]),
             _fmt(100.0 * t["share"] if t.get("share") is not None else None, 1, " %"), str(t["verify_rounds"]),
             _fmt(t.get("accept_length"), 2), _fmt(t.get("accept_rate"), 3), _fmt(t.get("output_tok_s"))]
            for t in tiers]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    out.append("    " + "  ".join(h.ljust(w) for h, w in zip(head, widths)))
    out += ["    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    covered = sum(t.get("verify_rounds") or 0 for t in tiers)
    rounds = (run.get("output_tokens") or 0) / run["accept_length"] if run.get("accept_length") else None
    if rounds and covered < 0.9 * rounds:
        out.append(f"    the tier rows cover {covered} of the run's ≈{rounds:.0f} request-rounds: they are rebuilt "
                   "from the decode log lines (the lines after a switch and idle windows left out); with "
                   "--decode-log-interval above 1 a line stands for several iterations, so the rows are estimates "
                   "(--decode-log-interval 1 makes them exact)")
    return out


def render_comparison(cmp: dict) -> str:
    """A short text block for an A/B comparison."""
    lo, hi = cmp["ci95"] if cmp.get("ci95") else (None, None)
    why = cmp.get("not_comparable")
    lines = [
        f"A/B: {cmp['b']} over {cmp['a']}: speedup {_fmt(cmp.get('speedup'), 3)}× "
        + (f"(95 % CI {_fmt(lo, 3)}–{_fmt(hi, 3)}, {cmp.get('pairs')} pairs): " if not str(cmp.get("method") or "")
           .startswith("unpaired") else f"({cmp['method']}" + (f", 95 % CI {_fmt(lo, 3)}–{_fmt(hi, 3)}" if lo else "")
           + "): ")
        + f"{cmp.get('verdict')}"
        + (f" — the sides sent different requests: {'; '.join(why)}" if why else "")
    ]
    base = cmp.get("baseline")
    if base:
        for side in ("a", "b"):
            c = base[side]
            blo, bhi = c["ci95"] if c.get("ci95") else (None, None)
            lines.append(f"  {c['b']} vs baseline {base['name']}: {_fmt(c.get('speedup'), 3)}× "
                         f"(95 % CI {_fmt(blo, 3)}–{_fmt(bhi, 3)}): {c.get('verdict')}")
    for cat, row in (cmp.get("per_category") or {}).items():
        lines.append(f"  [{cat}] speedup {_fmt(row.get('speedup'), 3)}× ({row.get('verdict')})")
    return "\n".join(lines)


def withhold_speedup(cmp: dict, failed: list[str]) -> None:
    """Blank the speedups of a comparison in which a side failed post-launch verification
    (no speedup is reported from such a run unless ``--allow-unverified``)."""
    note = f"not reported: post-launch verification failed for {', '.join(failed)} (--allow-unverified to see it)"
    blocks = [cmp] + [b for b in ((cmp.get("baseline") or {}).get("a"), (cmp.get("baseline") or {}).get("b")) if b]
    for block in blocks:
        block["speedup"], block["ci95"], block["verdict"] = None, None, note
        for row in (block.get("per_category") or {}).values():
            row["speedup"], row["ci95"], row["verdict"] = None, None, note
        for row in block.get("per_prompt") or []:
            row["speedup"] = None
    cmp["verification_failed"] = failed


def check_resume(run_dir: Path, args) -> str | None:
    """Why ``--resume run_dir`` cannot continue with these arguments (None when it can).

    A run directory holds one profile, one suite and one request shape: resuming with
    another would mix them into one summary.
    """
    from specdash.profile import ProfileError

    m, problem = read_run_manifest(run_dir)
    if problem:
        return problem
    if args.vs or args.baseline:
        return "--resume continues one profile's run; it cannot be combined with --vs or --baseline"
    try:
        prof = bench_profile(args) if args.profile else None
        name = prof.name if prof is not None else "attached"
        suite = bench_suite(args)[0].name
    except ProfileError as exc:
        return str(exc)
    if prof is not None and isinstance(m.get("profile_data"), dict):
        from specdash.profile import redacted_profile_data

        try:
            now = redacted_profile_data(prof.expanded())  # the runner records the expanded profile
        except ProfileError as exc:
            return str(exc)
        for section in ("server", "speculative", "env", "sim"):
            was, cur = m["profile_data"].get(section), now.get(section)
            if was != cur:
                keys = sorted({*(was or {}), *(cur or {})}) if isinstance(was, dict) and isinstance(cur, dict) else []
                diff = [k for k in keys if (was or {}).get(k) != (cur or {}).get(k)]
                what = ", ".join(f"{section}.{k}: {was.get(k)!r} → {cur.get(k)!r}" for k in diff[:3]) if diff \
                    else f"[{section}] {was!r} → {cur!r}"
                if m.get("profile") != name:
                    return (f"it was run with profile {m.get('profile')!r}, not {name!r}: resume with that profile "
                            "(or with --resume RUNDIR alone)")
                return (f"profile {name!r} has changed since this run started ({what}); resuming would mix two "
                        "configurations in one run: start a new run, or resume with the profile as it was")
    for what, have, want in (("profile", m.get("profile"), name), ("suite", m.get("suite"), suite),
                             ("--max-tokens", m.get("max_tokens"), args.max_tokens),
                             ("--concurrency", m.get("concurrency"), args.concurrency),
                             ("--repeats", m.get("repeats"), args.repeats),
                             ("--request-rate", m.get("request_rate"), _rate_of(getattr(args, "request_rate", None))),
                             ("--burstiness", m.get("burstiness"), getattr(args, "burstiness", None)
                              if getattr(args, "request_rate", None) is not None else None)):
        if want is not None and have is not None and have != want:
            return f"it was run with {what} {have!r}, not {want!r}"
    if "request_rate" in m and (m.get("request_rate") is None) != (getattr(args, "request_rate", None) is None):
        was = "closed loop (--concurrency)" if m.get("request_rate") is None else f"--request-rate {m['request_rate']}"
        return f"it was run in {was}; resuming in the other load shape would mix two in one run"
    if m.get("request_rate") is not None and args.concurrency is not None and args.concurrency != m.get("concurrency"):
        return (f"it was run at --request-rate {m['request_rate']} with at most {m.get('concurrency') or 'unlimited'} "
                f"requests in flight, not {args.concurrency}")
    ds = m.get("dataset") if isinstance(m.get("dataset"), dict) else {}
    if ds or getattr(args, "dataset", None):  # the same sample of the same dataset, or prompt indices shift
        was = (ds.get("source"), ds.get("asked"), ds.get("seed") or 0, *(ds.get("filters") or {}).values())
        now = (getattr(args, "dataset", None), getattr(args, "num_prompts", None), getattr(args, "seed", None) or 0,
               getattr(args, "min_input_tokens", None), getattr(args, "max_input_tokens", None), dataset_categories(args))
        if was != now[:len(was)]:
            return (f"it was run with --dataset {was[0]!r} (--num-prompts {was[1]}, --seed {was[2]}), not "
                    f"{now[0]!r} (--num-prompts {now[1]}, --seed {now[2]}): another sample would shift the "
                    "prompt indices; resume with the same dataset flags, or start a new run")
    return None


def _rate_of(rate: float | None):
    """A ``--request-rate`` as the manifest writes it (``"inf"`` for all at once)."""
    import math

    return None if rate is None else ("inf" if math.isinf(rate) else float(rate))


def read_run_manifest(run_dir: Path) -> tuple[dict | None, str | None]:
    """(``manifest.json`` of ``run_dir``, None) or (None, why it cannot serve a resume)."""
    from specdash.bench.rundir import RunFileError, read_run_file

    manifest = Path(run_dir) / "manifest.json"
    if not manifest.is_file():
        return None, "no manifest.json there (not a specdash run directory, or it does not exist)"
    try:
        m = read_run_file(manifest)  # bounded, depth-limited, an object
    except RunFileError as exc:
        return None, f"{manifest} cannot be read ({exc}); it is not a run directory specdash can continue"
    if not isinstance(m.get("profile"), str):
        return None, f"{manifest} has no profile entry: not a run directory specdash wrote"
    return m, None


def resume_defaults(args) -> dict:
    """``--resume RUNDIR`` needs no other argument: what the command line leaves out — the profile
    (its recorded path, else its name), the suite, ``--repeats`` / ``--max-tokens`` /
    ``--concurrency``, an attached run's URL — is taken from the run directory's manifest.
    Returns the manifest.

    Raises:
        UsageError: the manifest is missing, unreadable or not specdash's, or it is a sweep's.
    """
    m, problem = read_run_manifest(Path(args.resume))
    if problem:
        raise UsageError(f"cannot resume {args.resume}: {problem}")
    if m.get("sweep"):
        raise UsageError(f"cannot resume {args.resume}: it is a --sweep run (one RUN per point); "
                         "run the sweep again instead")
    if not args.profile and not args.url:
        if m.get("attached"):
            args.url = m.get("url")
        else:
            path = m.get("profile_path")
            args.profile = path if path and Path(path).is_file() else m["profile"]
            variant = m.get("variant")
            if isinstance(variant, dict) and isinstance(variant.get("changes"), dict) and path \
                    and Path(path).is_file():  # a tune's derived profile: the file's, with the run's changes
                args.profile_variant = variant["changes"]
    ds = m.get("dataset")
    if not args.suite and not getattr(args, "dataset", None) and isinstance(ds, dict) and ds.get("source"):
        args.dataset = ds["source"]  # a --dataset run: the same source, sample and filters
        for flag, key in (("num_prompts", "asked"), ("seed", "seed")):
            if getattr(args, flag, None) is None and isinstance(ds.get(key), int):
                setattr(args, flag, ds[key])
        for flag in ("min_input_tokens", "max_input_tokens"):
            if getattr(args, flag, None) is None and isinstance((ds.get("filters") or {}).get(flag), int):
                setattr(args, flag, ds["filters"][flag])
        cats = (ds.get("filters") or {}).get("categories")
        if getattr(args, "dataset_category", None) is None and isinstance(cats, list) and cats:
            args.dataset_category = ",".join(map(str, cats))
    if not args.suite and not getattr(args, "dataset", None) and m.get("suite"):
        path = m.get("suite_path")
        args.suite = path if path and Path(path).is_file() else m["suite"]
    for flag in ("repeats", "max_tokens", "concurrency"):
        if getattr(args, flag) is None and isinstance(m.get(flag), int):
            setattr(args, flag, m[flag])
    # an open-loop run continues open-loop, at its rate and burstiness, with its goodput SLOs
    rate = m.get("request_rate")
    if getattr(args, "request_rate", None) is None and rate is not None:
        args.request_rate = float("inf") if rate == "inf" else float(rate)
        if isinstance(m.get("burstiness"), (int, float)) and getattr(args, "burstiness", None) in (None, 1.0):
            args.burstiness = float(m["burstiness"])
    if not getattr(args, "goodput", None):
        from specdash.bench.rundir import RunFileError, read_summary

        try:
            runs = read_summary(Path(args.resume) / "summary.json")["runs"]
        except RunFileError:
            runs = []
        slo = next((r.get("goodput_slo") for r in runs if isinstance(r, dict) and r.get("goodput_slo")), None)
        if isinstance(slo, dict):
            args.goodput = [f"{k.removesuffix('_ms')}:{v:g}" for k, v in slo.items() if isinstance(v, (int, float))]
    return m


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


def bench_profile(args):
    """``--profile`` loaded; for ``--resume`` of a derived profile's run (a tune's baseline or exploration,
    the manifest's ``variant``) the same profile made again (:func:`~specdash.profile.variants.apply_variant`).

    Raises:
        ProfileError: the profile cannot be read, or the run's changes no longer apply to it.
    """
    from specdash.profile import load_profile

    prof = load_profile(args.profile)
    changes = getattr(args, "profile_variant", None)
    if changes:
        from specdash.profile.variants import apply_variant

        prof = apply_variant(prof, changes)
    return prof


def bench_suite(args):
    """(the suite a bench sends, the dataset's manifest record or None): ``--dataset`` through
    :func:`specdash.profile.datasets.load_dataset_suite` (tokens counted for ``--profile``'s
    target), else ``--suite`` (default :data:`specdash.DEFAULT_SUITE`); then the request fields of the command line
    (:func:`with_request_fields`)."""
    suite, record = _bench_suite(args)
    return with_request_fields(suite, args), record


REQUEST_FLAGS = {"temperature": "--temperature", "top_p": "--top-p", "top_k": "--top-k",
                 "sampling_seed": "--sampling-seed", "extra_request_body": "--extra-request-body"}
"""Suite fields the command line can set, and their flags."""


def with_request_fields(suite, args):
    """``suite`` with ``--temperature`` / ``--top-p`` / ``--top-k`` / ``--sampling-seed`` /
    ``--extra-request-body JSON`` over its ``[suite]`` fields (validated as the suite file's are).

    Raises:
        UsageError: ``--extra-request-body`` is not a JSON object, or a value is out of range.
    """
    from pydantic import ValidationError

    from specdash.profile.schema import SuiteSection

    upd = {k: getattr(args, k) for k in REQUEST_FLAGS if getattr(args, k, None) is not None}
    if not upd:
        return suite
    if isinstance(upd.get("extra_request_body"), str):
        try:
            body = json.loads(upd["extra_request_body"])
        except ValueError as exc:
            raise UsageError(f"--extra-request-body is not valid JSON ({exc}); give an object, e.g. "
                             "'{\"sampling_params\": {\"min_p\": 0.05}}'") from None
        if not isinstance(body, dict):
            raise UsageError(f"--extra-request-body must be a JSON object (got a {type(body).__name__}), e.g. "
                             "'{\"return_logprob\": false}'")
        upd["extra_request_body"] = {**suite.suite.extra_request_body, **body}
    try:
        section = SuiteSection.model_validate({**suite.suite.model_dump(), **upd})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else ""
        raise UsageError(f"{REQUEST_FLAGS.get(key, key)}: {err['msg']}") from None
    new = suite.model_copy(update={"suite": section})
    new._path = suite.path
    return new


def request_fields(suite) -> dict:
    """The suite's sampling and extra request fields as the manifest records them."""
    s = suite.suite
    return {"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "sampling_seed": s.sampling_seed,
            "extra_request_body": s.extra_request_body}


def _bench_suite(args):
    from specdash.profile import load_suite

    source = getattr(args, "dataset", None)
    if not source:
        return load_suite(args.suite or DEFAULT_SUITE), None
    from specdash.profile.datasets import load_dataset_suite

    return load_dataset_suite(
        source, num_prompts=getattr(args, "num_prompts", None), seed=getattr(args, "seed", None) or 0,
        profile=bench_profile(args) if args.profile else None,
        min_input_tokens=getattr(args, "min_input_tokens", None),
        max_input_tokens=getattr(args, "max_input_tokens", None), categories=dataset_categories(args))


def dataset_categories(args) -> list[str] | None:
    """``--dataset-category A,B`` as a list (None when not given)."""
    raw = getattr(args, "dataset_category", None)
    cats = [c.strip() for c in raw.split(",") if c.strip()] if raw else []
    return cats or None


def check_run_size(suite, repeats: int | None) -> None:
    """Refuse a run of more than :data:`specdash.bounded.MAX_RUN_REQUESTS` requests (prompts × repeats):
    its work list alone would take gigabytes before the first request.

    Raises:
        UsageError: too many requests, with the figure and the fix.
    """
    from specdash.bounded import MAX_RUN_REQUESTS

    reps = repeats or suite.suite.repeats
    n = len(suite.prompts) * reps
    if n > MAX_RUN_REQUESTS:
        raise UsageError(f"{len(suite.prompts):,} prompts × {reps:,} repeats = {n:,} requests, more than the "
                         f"{MAX_RUN_REQUESTS:,} one run sends; lower --repeats or sample the dataset with --num-prompts")


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


def _check_args(args) -> None:
    """Raise :class:`UsageError` for flags that cannot run together (before anything loads)."""
    if args.resume:
        resume_defaults(args)  # --resume RUNDIR alone: the rest comes from its manifest
    if not args.profile and not args.url:
        raise UsageError("give --profile P (or --url URL to attach, or --demo)")
    if args.vs and args.url:
        raise UsageError("--vs launches both sides; it cannot be combined with --url")
    from specdash import bounded as B

    limits = {"repeats": B.MAX_REPEATS, "max_tokens": B.MAX_TOKENS, "concurrency": B.MAX_CONCURRENCY,
              "rounds": B.MAX_ROUNDS}
    if getattr(args, "seed", None) is not None and not 0 <= args.seed <= B.MAX_SEED:
        raise UsageError(f"--seed must be a whole number from 0 to 2**64 - 1 (got {args.seed})")
    for flag, hi in limits.items():  # also the values --resume took from a manifest (repeats = 10**9 …)
        value = getattr(args, flag)
        if value is not None:
            try:
                B.bounded_int(value, lo=1, hi=hi, what=f"--{flag.replace('_', '-')}")
            except B.InputError as exc:
                src = f" (from {args.resume}/manifest.json)" if args.resume else ""
                raise UsageError(f"{exc}{src}") from None
    if args.url and (problem := url_problem(args.url)):
        raise UsageError(problem)
    _check_dataset_args(args)
    args.sweep_spec = None
    if getattr(args, "sweep", None):
        from specdash.bench.points import parse_sweep

        try:
            args.sweep_spec = parse_sweep(args.sweep)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        rate_sweep = args.sweep_spec.var == "request_rate"
        for flag, why in (("vs", "a sweep compares one profile with its baseline (--baseline R); sweep each "
                                 "profile on its own and compare the two with `specdash compare A B`"),
                          ("resume", "a sweep cannot be resumed; run it again"),
                          ("concurrency", "the sweep sets the concurrencies itself (--sweep request_rate=… takes "
                                          "--concurrency as its in-flight cap)"),
                          ("request_rate", "the sweep sets the request rates itself" if rate_sweep else
                                           "a concurrency sweep is closed loop; sweep request_rate=R,R,… for "
                                           "open-loop load")):
            if getattr(args, flag, None) not in (None, False) and not (flag == "concurrency" and rate_sweep):
                raise UsageError(f"--sweep cannot be combined with --{flag.replace('_', '-')}: {why}")
        if args.rounds != 1:
            raise UsageError("--sweep runs one launch per side; --rounds does not apply")
    elif args.rounds != 1 and not args.vs and not args.baseline:
        raise UsageError(f"--rounds {args.rounds} alternates the launch order of an A/B, and this run has no second "
                         "side: add --vs Q (the profile to compare; speedup = Q over P) or --baseline R, e.g. "
                         f"specdash --bench --profile {args.profile or 'P'} --vs Q --rounds {args.rounds}")
    _check_load_args(args)
    if args.resume:
        problem = check_resume(Path(args.resume), args)
        if problem:
            raise UsageError(f"cannot resume {args.resume}: {problem}")


def _check_dataset_args(args) -> None:
    """``--dataset`` replaces ``--suite``; ``--num-prompts`` / ``--min-input-tokens`` /
    ``--max-input-tokens`` need it and must be at least 1."""
    given = [f for f in ("num_prompts", "min_input_tokens", "max_input_tokens", "dataset_category")
             if getattr(args, f, None) is not None]
    if getattr(args, "dataset", None):
        if args.suite:
            raise UsageError("--dataset replaces --suite: give one of them (the dataset's prompts are sent with "
                             "temperature 0 and ignore_eos; --max-tokens, --concurrency and --repeats still apply)")
        from specdash import bounded as B

        for flag in given:
            if flag == "dataset_category":
                continue
            hi = B.MAX_PROMPTS if flag == "num_prompts" else B.MAX_TOKENS
            try:
                B.bounded_int(getattr(args, flag), lo=1, hi=hi, what=f"--{flag.replace('_', '-')}")
            except B.InputError as exc:
                raise UsageError(str(exc)) from None
    elif given:
        raise UsageError(f"--{given[0].replace('_', '-')} applies to --dataset FILE; a suite sends all its prompts")


def _check_load_args(args) -> None:
    """``--request-rate`` / ``--burstiness`` / ``--goodput``: values, combinations; sets ``args.goodput_slo``."""
    import math

    from specdash import bounded as B

    rate, burst = getattr(args, "request_rate", None), getattr(args, "burstiness", 1.0)
    if rate is not None:
        try:  # 1e-300 would wait for ever, 1e9 build a billion-request schedule
            B.bounded_float(rate, lo=B.MIN_REQUEST_RATE, hi=B.MAX_REQUEST_RATE, what="--request-rate",
                            unit="requests/s", allow_inf=True)
        except B.InputError as exc:
            raise UsageError(str(exc)) from None
    if burst is not None and (not math.isfinite(burst) or not B.MIN_BURSTINESS <= burst <= B.MAX_BURSTINESS):
        raise UsageError(f"--burstiness must be a finite number from {B.MIN_BURSTINESS:g} to {B.MAX_BURSTINESS:g} "
                         f"(1 = Poisson, < 1 burstier, > 1 more even; got {burst:g})")
    rate_sweep = getattr(getattr(args, "sweep_spec", None), "var", None) == "request_rate"
    if rate is None and not rate_sweep and burst not in (None, 1.0):
        raise UsageError("--burstiness shapes the arrivals of --request-rate; give --request-rate R (or "
                         "--sweep request_rate=R,R,…) too")
    args.goodput_slo = None
    if getattr(args, "goodput", None):
        from specdash.collect.stream import parse_slo

        try:
            args.goodput_slo = parse_slo(args.goodput)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def _bench(args, progress: Progress) -> int:
    from specdash.bench.ab import run_ab
    from specdash.bench.runner import run_one
    from specdash.launch import attached_profile
    from specdash.profile import load_profile
    from specdash.sglang.leftovers import stop_leftovers_interactively
    from specdash.sglang.process import install_signal_handlers

    _check_args(args)
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
