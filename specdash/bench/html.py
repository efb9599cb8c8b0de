"""One self-contained HTML page from run, A/B compare and tune directories (``specdash report``).

The page has no script, no external style sheet, font or image: inline CSS and inline SVG charts
drawn here (:func:`line_chart`, :func:`bar_chart`, a few hundred lines of plain Python, no
plotting library).  Every text that comes from a file is escaped (:func:`html.escape`), so a
profile name or a server log line cannot inject markup.

The directories are read as :class:`~specdash.bench.sources.Source` objects (:mod:`specdash.bench.sources`).
What a directory contributes (README "Run directories"), in the order the page shows it:

* a run directory (``summary.json``, ``manifest.json``, ``requests.jsonl``): metadata (profile,
  suite, effective speculative settings read back from the server, SGLang version and where it came
  from, simulated / simulated-acceptance flags, time to ready, the launch command, post-launch
  verification), the RUN table (one row per RUN: one, or one per concurrency of a sweep), the
  accept-length histogram (fraction of verify rounds that accepted k drafts, one bar series per RUN),
  the per-tier table of an adaptive run (``tiers``), per-category acceptance when the records carry
  categories (:func:`specdash.bench.compare.side_stats` per group), acceptance by context-length bucket
  (the RUN's ``by_context``);
* several run directories / a sweep: tok/s against concurrency, one line per directory; when one of
  them runs without speculation (a sweep's baseline directory), the paired speedup of each other
  directory over it at each shared concurrency (:func:`specdash.bench.compare.build_comparison` on
  that point's records: geometric mean of per-request tok/s ratios, 95 % bootstrap interval) with its
  band, and the break-even concurrency (:func:`specdash.bench.points.break_even`);
* an A/B compare directory (``comparison.json``): verdict, speedup and interval, the sides, the
  baseline, per category, per prompt, tok/s per prompt and the accepted-drafts histograms as bars;
* a tune directory (``tune.json``): the settings measured, the best, the advice text and the final A/B.

Numbers are formatted as the text reports format them (:func:`specdash.bench.report._fmt`): tok/s
with 1 decimal, milliseconds with 2, accept length and rate with 3.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specdash.bench.compare import side_stats
from specdash.bench.html_ab import comparison_section, headline, stories, story_section, tune_section
from specdash.bench.html_parts import (
    axis_col,
    dl,
    figure,
    position_rows,
    positions_chart,
    settings_text,
    stat,
    table,
    yes_no,
)
from specdash.bench.points import axis_name, break_even, point_label
from specdash.bench.report import _ci, _fmt, _fractions
from specdash.bench.sources import (
    Source,
    is_point,
    read_gpu_samples,
    sources_sweep_var,
    sweep_speedups,
)
from specdash.bench.svg import PALETTE, SVG_NS, bar_chart, cdf_points, esc, line_chart, nice_ticks
from specdash.results import output_tok_s

__all__ = ["GENERATOR", "PALETTE", "SVG_NS", "bar_chart", "esc", "is_generated_report", "line_chart", "nice_ticks",
           "render_report"]

GENERATOR = "specdash report"
"""The ``<meta name="generator">`` of every page: ``specdash report`` overwrites only files that carry it."""

# -- HTML pieces -----------------------------------------------------------------------------------
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:12px auto;max-width:1260px;color:#222;padding:0 16px}
h1{font-size:20px;margin:4px 0}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}h2#story{margin-top:8px}
h3{font-size:15px;margin-top:20px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px;display:block;max-width:100%;overflow-x:auto}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f4f4f4}td.l,th.l{text-align:left}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px;font-size:13px}
dt{color:#555}dd{margin:0}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;white-space:pre-wrap}
.tag{display:inline-block;border-radius:3px;padding:0 6px;margin-left:6px;font-size:12px;background:#eee}
.sim{background:#fff3cd}.bad{background:#f8d7da}.ok{background:#d4edda}
.note{color:#555;font-size:13px}figure{margin:8px 0}
.charts{display:flex;flex-wrap:wrap;gap:4px 12px}.charts figure{margin:0}
.verdict{font-size:15px;padding:6px 10px;border-radius:4px;background:#f4f4f4;margin:6px 0}
.verdict.ok{background:#d4edda}.verdict.bad{background:#f8d7da}
"""


def _run_label(run: Mapping[str, Any], n_runs: int) -> str:
    if n_runs > 1 and isinstance(run.get("sweep_point"), int) and isinstance(run.get("request_rate"), (int, float)) \
            and not isinstance(run.get("concurrency"), int):
        return point_label("request_rate", run["request_rate"])
    c = run.get("concurrency")
    return f"c{c}" if n_runs > 1 and c is not None else str(run.get("profile") or "run")


def _run_section(src: Source) -> list[str]:
    runs, m = src.runs, src.manifest
    r0 = runs[0] if runs else {}
    tags = []
    if r0.get("simulated") or m.get("simulated"):
        tags.append('<span class="tag sim">simulated</span>')
    if r0.get("acceptance_simulated"):
        tags.append('<span class="tag sim">simulated acceptance</span>')
    if (r0.get("adaptive") or {}).get("enabled"):
        tags.append('<span class="tag">adaptive</span>')
    out = [f"<h2>Run: {esc(src.name)}{''.join(tags)}</h2>", f'<p class="note">directory <code>{esc(src.path)}</code></p>']
    sweep = (m.get("sweep") or {}).get("concurrency")
    rates = (m.get("sweep") or {}).get("request_rate")
    asked = m.get("asked") or {}
    eff = r0.get("effective") or m.get("effective")
    asked_s = settings_text(asked) if asked.get("speculative_algorithm") else None
    ttr = m.get("time_to_ready_s")
    ver = r0.get("sglang_version") or m.get("sglang_version")
    src_v = m.get("version_source")
    out.append(dl([
        ("profile", src.name), ("profile file", r0.get("profile_path") or m.get("profile_path")),
        ("suite", r0.get("suite") or m.get("suite")), ("max tokens", r0.get("max_tokens") or m.get("max_tokens")),
        ("concurrency", ", ".join(map(str, sweep)) + " (sweep)" if sweep else r0.get("concurrency") or m.get("concurrency")),
        ("request rate (requests/s)", ", ".join(f"{x:g}" for x in rates) + " (sweep)" if rates else None),
        ("speculative settings (effective, read back from the server)", settings_text(eff)),
        ("asked", asked_s if asked_s and asked_s != settings_text(eff) else None),
        ("SGLang version", f"{ver}" + (f" (preflight judged {m.get('judged_sglang_version')}, version source: {src_v})"
                                        if src_v else "") if ver else None),
        ("simulated", yes_no(r0.get("simulated", m.get("simulated")))),
        ("simulated acceptance (SGLANG_SIMULATE_ACC_LEN)", yes_no(r0.get("acceptance_simulated"))),
        ("attached to", m.get("url") if m.get("attached") else None),
        ("time to ready", f"{ttr:.1f} s" if isinstance(ttr, (int, float)) else None),
        ("GPUs", _gpus(m.get("gpus"))),
        ("specdash", (src.summary or {}).get("specdash_version")),
    ]))
    if m.get("launch_command"):
        sim = bool(r0.get("simulated") or m.get("simulated"))
        head = ("SGLang command (the built-in simulator stood in for it; secrets redacted)" if sim
                else "Launch command (secrets redacted)")
        out.append(f"<h3>{head}</h3><pre>{esc(m['launch_command'])}</pre>")
    if r0.get("acceptance_simulated"):
        out.append('<p class="note">SGLANG_SIMULATE_ACC_LEN is set: accept length and rate are the variable\'s, not '
                   "the draft's (the timings still hold).</p>")
    out += _run_table(runs)
    out += _positions(runs)
    out += _histogram(runs)
    for run in runs:
        out += _tiers(run, len(runs))
    out += _categories(src)
    out += _distributions(src)
    out += _gpu_plots(src)
    out += _contexts(runs, src.sweep_var)
    out += _ranks(runs)
    out += _verification(runs)
    return out


def _gpu_plots(src: Source) -> list[str]:
    """Memory, utilisation, power and temperature over the run, one line per device, from ``gpu.jsonl``."""
    samples = read_gpu_samples(src.path)
    if not samples:
        return []
    t0 = min(d["t"] for d in samples)
    devs = sorted({(str(d.get("node") or ""), int(d.get("index", 0))) for d in samples})
    sim = any(d.get("simulated") for d in samples)
    charts = []
    for key, label, unit in (("memory_used_mib", "GPU memory used", "MiB"), ("utilization_pct", "GPU utilisation", "%"),
                             ("power_w", "GPU power", "W"), ("temperature_c", "GPU temperature", "°C")):
        series = []
        for node, idx in devs:
            pts = [(d["t"] - t0, d.get(key)) for d in samples
                   if (str(d.get("node") or ""), int(d.get("index", 0))) == (node, idx)
                   and isinstance(d.get(key), (int, float))]
            if pts:
                series.append({"name": f"{node + ':' if node else ''}GPU {idx}", "points": pts})
        if series:
            charts.append(line_chart(series, title=f"{label} ({unit})", x_label="seconds into the run",
                                     y_label=unit, width=380, height=240, x_ticks=False, markers=len(samples) < 60))
    if not charts:
        return []
    return [f"<h3>GPUs during the run{' (simulated)' if sim else ''}</h3>",
            '<div class="charts">' + "".join(figure(c) for c in charts) + "</div>",
            f'<p class="note">{len(samples)} readings ({"the simulator" if sim else "NVML"}, one a second while '
            "requests were in flight; gaps are the warm-ups between sweep points).</p>"]


def _contexts(runs: Sequence[Mapping[str, Any]], var: str = "concurrency") -> list[str]:
    """Each RUN's ``by_context`` (accept length per context-length bucket of prompt + completion tokens)
    when a run has more than one bucket: a long-context collapse is a falling row.  Several RUNs (a sweep):
    a column with each one's point on the ``var`` axis."""
    rows = []
    several = len(runs) > 1
    for run in runs:
        groups = run.get("by_context") or []
        if len(groups) < 2:
            continue
        for g in groups:
            rows.append([*([run.get(var)] if several else []), g.get("context_tokens"), g.get("requests"),
                         _fmt(g.get("accept_length"), 3), _fmt(g.get("accept_rate"), 3),
                         _fmt(g.get("request_tok_s_p50"), 1)])
    if not rows:
        return []
    head = [*([axis_col(var)] if several else []), "context tokens (prompt + completion)", "requests",
            "accept length", "accept rate", "request tok/s p50"]
    return ["<h3>Acceptance by context length</h3>", table(head, rows)]


def _ranks(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each RUN's ``ranks`` (several scheduler ranks in ``/metrics``): GPU seconds and decode tokens per
    rank, the rank's GPU time over the median, a mark on the ones that stand out."""
    from specdash.bench.adaptive import SLOW_RANK_ABOVE, rank_label

    rows = []
    several = len(runs) > 1
    for run in runs:
        for r in run.get("ranks") or []:
            vs = r.get("vs_median")
            rows.append([*([_run_label(run, len(runs))] if several else []), rank_label(r),
                         _fmt(r.get("device_time_s"), 3), _fmt(r.get("decode_tokens"), 0), _fmt(vs, 3),
                         "stands out" if vs is not None and vs > 1 + SLOW_RANK_ABOVE else ""])
    if not rows:
        return []
    head = [*(["run"] if several else []), "rank", "GPU s (device timer)", "decode tokens", "× median", ""]
    return ["<h3>Scheduler ranks</h3>", table(head, rows),
            '<p class="note">one row per scheduler series in /metrics (--enable-metrics-for-all-schedulers, DP or '
            "PP ranks); the run's figures above read one TP replica per group.</p>"]


def _gpus(g: Any) -> str | None:
    if not isinstance(g, Mapping):
        return None
    devs = g.get("devices") or []
    if devs:
        return "; ".join(f"{d.get('name')} ({_fmt(d.get('memory_total_mib'), 0)} MiB)" for d in devs)
    return g.get("status")


def _run_table(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The RUN table: acceptance first (accept length, accept rate, server τ), then throughput (tok/s,
    requests/s, goodput), then the request counts, then timing (TTFT, TPOT, ITL, E2E p50 / p90 / p99)."""
    open_loop = any(r.get("request_rate") is not None for r in runs)  # asked (requests/s, or "inf") and achieved
    goodput = any(r.get("goodput") is not None for r in runs)
    head = ["run", "concurrency", *(["request rate /s", "achieved /s"] if open_loop else []),
            "accept length", "accept rate", "server τ", "tok/s", "requests/s", *(["goodput /s", "goodput %"] if goodput
                                                                                  else []),
            "requests", "failed", "output tokens", "duration s",
            *(f"{k} {q} ms" for k in ("TTFT", "TPOT", "ITL", "E2E") for q in ("p50", "p90", "p99"))]
    rows = []
    for r in runs:
        rate = ([_fmt(r.get("request_rate")), _fmt(r.get("achieved_request_rate"), 2)] if open_loop else [])
        gp = ([_fmt(r.get("goodput"), 2), _fmt(100.0 * r["goodput_fraction"], 1)
               if isinstance(r.get("goodput_fraction"), (int, float)) else "–"] if goodput else [])
        rows.append([_run_label(r, len(runs)), _fmt(r.get("concurrency")), *rate,
                     _fmt(r.get("accept_length"), 3), _fmt(r.get("accept_rate"), 3), _fmt(r.get("server_accept_length"), 3),
                     _fmt(output_tok_s(r), 1), _fmt(r.get("request_throughput"), 2), *gp,
                     _fmt(r.get("requests")), _fmt(r.get("failed_requests")), _fmt(r.get("output_tokens")),
                     _fmt(r.get("duration_s"), 2),
                     *(_fmt(stat(r, k, q), 2) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
                       for q in ("p50", "p90", "p99"))])
    slo = next((r.get("goodput_slo") for r in runs if r.get("goodput_slo")), None)
    slo_txt = (" goodput = requests/s meeting every SLO (" + ", ".join(f"{k} ≤ {v:g} ms" for k, v in slo.items())
               + ");") if isinstance(slo, Mapping) else ""
    return ["<h3>Results</h3>", table(head, rows),
            '<p class="note">accept length = tokens per verify round incl. the bonus token (Σ completion ÷ Σ verify '
            "rounds); accept rate = accepted ÷ proposed drafts; server τ = Δgeneration_tokens ÷ Δspec_verify_calls "
            "from /metrics; tok/s = output tokens ÷ (first request sent → last response finished); requests/s = "
            f"finished requests ÷ the same span;{esc(slo_txt)} E2E = request sent → last token.</p>"]


def _positions(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per-position acceptance (``accept_by_position``): P(draft position i accepted | the verify round
    reached it) per RUN as a chart, and reached / accepted / rate as a table; where the RUN says where it
    came from (``accept_by_position_source``: SGLang's per-request fields, or derived from the histogram)."""
    with_pos = [r for r in runs if position_rows(r)]
    if not with_pos:
        return []
    labels = [_run_label(r, len(runs)) for r in with_pos]
    svg = positions_chart(with_pos, labels)
    rows = [[lab, p.get("position"), _fmt(p.get("reached")), _fmt(p.get("accepted")), _fmt(p.get("rate"), 3),
             _fmt(r.get("accept_by_position_source"))] for r, lab in zip(with_pos, labels) for p in position_rows(r)]
    return ["<h3>Acceptance by draft position</h3>", figure(svg),
            table(["run", "draft position", "rounds that reached it", "accepted", "rate", "source"], rows, left=1),
            '<p class="note">rate = accepted ÷ reached: the probability that draft position i is accepted when the '
            "verify round got that far (position 1 is the first draft token after the last accepted one); source "
            "<code>server</code> = SGLang's per-request fields, <code>histogram</code> = derived from the "
            "accepted-drafts histogram.</p>"]


def _distributions(src: Source) -> list[str]:
    """The per-request TTFT, TPOT and E2E distributions (empirical CDFs from ``requests.jsonl``), one line
    per RUN (each point of a sweep)."""
    recs = [r for r in src.records if r.get("ok")]
    if len(recs) < 2:
        return []
    var, runs = src.sweep_var, src.runs
    groups = [(_run_label(r, len(runs)), src.records_at(r.get(var), var) if len(runs) > 1 else recs) for r in runs]
    charts = []
    for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")):
        series = [{"name": name, "points": cdf_points([1000.0 * x[key] for x in g if x.get("ok")
                                                        and isinstance(x.get(key), (int, float))])}
                  for name, g in groups]
        series = [s for s in series if s["points"]]
        if series:
            charts.append(line_chart(series, title=f"{label} distribution (CDF)", x_label=f"{label} ms",
                                     y_label="fraction of requests ≤ x", width=380, height=260, markers=False))
    if not charts:
        return []
    return ["<h3>Distributions</h3>", '<div class="charts">' + "".join(figure(c) for c in charts) + "</div>",
            '<p class="note">per finished request: TTFT = sent → first token, TPOT = (last − first token) ÷ '
            "(tokens − 1), E2E = sent → last token.</p>"]


def _histogram(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    series = [(_run_label(r, len(runs)), _fractions(r.get("accept_histogram"))) for r in runs]
    series = [(n, f) for n, f in series if f]
    if not series:
        return []
    kmax = max(len(f) for _, f in series)
    svg = bar_chart([str(k) for k in range(kmax)], [(n, f + [0.0] * (kmax - len(f))) for n, f in series],
                    title="accepted drafts per verify round", x_label="accepted drafts k (accept length = k + 1)",
                    y_label="fraction of verify rounds")
    counts = [[_run_label(r, len(runs)), *(" ".join(str(int(c)) for c in r.get("accept_histogram") or []),)]
              for r in runs if r.get("accept_histogram")]
    return ["<h3>Accept-length histogram</h3>", figure(svg), table(["run", "verify rounds per k (k = 0, 1, …)"], counts,
                                                                       left=2)]


def _tiers(run: Mapping[str, Any], n_runs: int) -> list[str]:
    tiers = run.get("tiers")
    ad = run.get("adaptive") or {}
    if not ad.get("enabled"):
        return []
    label = _run_label(run, n_runs)
    out = [f"<h3>Adaptive tiers ({esc(label)}): {esc(ad.get('switches'))} switch(es)</h3>"]
    if tiers is None:
        return [*out, '<p class="note">no per-tier figures (no server log to read: an attached server)</p>']
    if not tiers:
        return [*out, '<p class="note">no per-tier figures: no decode log line fell inside the run</p>']
    rows = [[t.get("speculative_num_steps"), t.get("speculative_num_draft_tokens"),
             _fmt(100.0 * t["share"], 1) + " %" if t.get("share") is not None else "–", _fmt(t.get("verify_rounds")),
             _fmt(t.get("output_tokens")), _fmt(t.get("accept_length"), 3), _fmt(t.get("accept_rate"), 3),
             _fmt(output_tok_s(t), 1)] for t in tiers]
    return [*out, table(["steps", "draft tokens", "share", "verify rounds", "output tokens", "accept length",
                          "accept rate", "tok/s"], rows, left=0)]


def _categories(src: Source) -> list[str]:
    recs = [r for r in src.records if r.get("ok", True)]
    if not any(r.get("category") for r in recs):
        return []
    var = src.sweep_var
    several = len({r.get(var) for r in recs}) > 1
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        groups[(r.get(var) if several else None, r.get("category") or "uncategorized")].append(r)
    rows, by_cat = [], defaultdict(dict)
    for (c, cat), rs in sorted(groups.items(), key=lambda kv: (kv[0][0] or 0, kv[0][1])):
        s = side_stats(rs)
        rows.append([cat, *([c] if several else []), s["requests"], _fmt(s["tok_s"], 1), _fmt(s["accept_length"], 3),
                     _fmt(s["accept_rate"], 3)])
        by_cat[cat][c] = s["accept_length"]
    head = ["category", *([axis_col(var)] if several else []), "requests", "tok/s (mean per request)",
            "accept length", "accept rate"]
    out = ["<h3>Acceptance per category</h3>", table(head, rows)]
    cats = sorted(by_cat)
    points = sorted({c for v in by_cat.values() for c in v}, key=lambda x: x or 0)
    series = [(point_label(var, c) if several else "accept length", [by_cat[cat].get(c) for cat in cats])
              for c in points]
    if any(v is not None for _, vs in series for v in vs):
        out.append(figure(bar_chart(cats, series, title="accept length per category", x_label="category",
                                     y_label="accept length (tokens per verify round)")))
    return out


def _verification(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    same = len({json.dumps(x.get("verification"), sort_keys=True, default=str) for x in runs}) == 1
    for r in runs:
        v = r.get("verification") or {}
        if not v:
            continue
        status = v.get("status")
        cls = {"ok": "ok", "failed": "bad"}.get(status, "")
        findings = v.get("findings") or []
        label = "every run" if same and len(runs) > 1 else _run_label(r, len(runs))
        out.append(f"<p>post-launch verification ({esc(label)}): "
                   f'<span class="tag {cls}">{esc(status)}</span></p>')
        if findings:
            out.append("<ul>" + "".join(f"<li><b>{esc(f.get('severity', '').upper())} {esc(f.get('code'))}</b>: "
                                        f"{esc(f.get('message'))}" + (f"<br>fix: {esc(f['fix'])}" if f.get("fix") else "")
                                        + "</li>" for f in findings) + "</ul>")
        if same:
            break  # the same verdict for every RUN of a sweep: once is enough
    return ["<h3>Post-launch verification</h3>", *out] if out else []


def _sweep_section(sources: Sequence[Source], *, speedup_chart: bool = True) -> list[str]:
    runs_src = [s for s in sources if s.kind == "run"]
    var = sources_sweep_var(runs_src)
    name = axis_name(var)
    x_label = f"{name} (log scale)" if var == "concurrency" else "request rate, requests/s (log scale)"
    xs = {r.get(var) for s in runs_src for r in s.runs if is_point(r.get(var))}
    bases = [s for s in runs_src if not s.speculative]
    specs = [s for s in runs_src if s.speculative]
    out: list[str] = []
    if len(xs) >= 2:
        series = [{"name": s.name, "points": [(r[var], output_tok_s(r)) for r in s.runs if is_point(r.get(var))]}
                  for s in runs_src]
        out += [f"<h2>Throughput against {name}</h2>",
                figure(line_chart(series, title=f"output tok/s against {name}", x_label=x_label,
                                   y_label="output tok/s", log_x=True))]
    if bases and specs:
        base = bases[0]
        out.append(f"<h2>Speedup over {esc(base.name)}</h2>")
        out.append('<p class="note">speedup = geometric mean of the per-request tok/s ratios paired by prompt and '
                   f"repeat at each {name}, with its 95 % bootstrap interval.</p>")
        series = []
        col = axis_col(var)
        for s in specs:
            pts = sweep_speedups(s, base, var)
            rows = [[_fmt(p[var]), _fmt(output_tok_s(p), 1), _fmt(p["baseline_tok_s"], 1),
                     _fmt(p["speedup"], 3), _ci(p["ci95"]), _fmt(p["verdict"]), _fmt(p["pairs"])] for p in pts]
            out.append(f"<h3>{esc(s.name)} over {esc(base.name)}</h3>")
            out.append(table([col, "tok/s", "baseline tok/s", "speedup", "95 % CI", "verdict", "pairs"], rows))
            if len(pts) >= 2:
                be, be_ci, note = break_even(pts, var)
                lo, hi = be_ci or (None, None)
                nd = 1 if var == "concurrency" else 2
                unit = "" if var == "concurrency" else " requests/s"
                txt = (f"break-even {name} ≈ {be:.{nd}f}{unit} (95 % CI {_fmt(lo, nd)} – {_fmt(hi, nd)}; an open end "
                       f"did not cross 1 in the swept range). " if be is not None else "") + note
                out.append(f'<p class="note">{esc(txt)}</p>')
            series.append({"name": s.name, "points": [(p[var], p["speedup"]) for p in pts],
                           "band": [(p[var], *(p["ci95"] or (None, None))) for p in pts]})
        if speedup_chart and len({p[0] for s in series for p in s["points"]}) >= 2:
            out.append(figure(line_chart(series, title=f"speedup over {base.name} against {name}",
                                          x_label=x_label, y_label="speedup (×)", log_x=True, ref_y=1.0)))
    return out


# -- the story: the page's first screen -----------------------------------------------------------
def render_report(sources: Sequence[Source], *, title: str | None = None) -> str:
    """The whole page for ``sources`` (see the module docstring); a string of HTML."""
    names = [s.name if s.kind == "run" else s.path.name for s in sources]
    title = title or "specdash report: " + ", ".join(dict.fromkeys(names))
    body: list[str] = [f"<h1>{esc(title)}</h1>"]
    if any(s.kind == "run" and (s.runs[:1] or [{}])[0].get("simulated") for s in sources):
        body.append('<p class="note"><span class="tag sim">simulated</span> numbers marked simulated come from '
                    "specdash's simulated SGLang server, not from a GPU.</p>")
    told, loaded = stories(sources)
    for st in told:
        body += story_section(st)
    runs = [s for s in sources if s.kind == "run"]
    if not told and len(runs) == 1:
        body += headline(runs[0])
    if told or len(runs) > 1:
        body.append("<h2>Detail</h2>")
    for s in [*sources, *loaded]:
        if s.kind == "run":
            body += _run_section(s)
    body += _sweep_section([*sources, *loaded], speedup_chart=not told)
    for s in sources:
        if s.kind == "compare":
            sec = comparison_section(s.comparison or {}, "A/B comparison")
            body += [sec[0], f'<p class="note">compare directory <code>{esc(s.path)}</code></p>', *sec[1:]]
        elif s.kind == "tune":
            body += tune_section(s)
    from specdash import __version__

    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta name="generator" content="{esc(GENERATOR)} {esc(__version__)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>", *body,
        f'<p class="note">written by specdash {esc(__version__)}; self-contained (no scripts, no external '
        "resources).</p>", "</body>", "</html>", ""])


def is_generated_report(path: Path) -> bool:
    """Whether ``path`` is a page this module wrote (its generator meta tag), so it may be replaced."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return f'<meta name="generator" content="{GENERATOR}' in head
