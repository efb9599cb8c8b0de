"""The report page's A/B sections: the "story" of a page (a sweep with its baseline, or two runs of one
prompt set, told as one verdict with its interval), a comparison's section (``comparison.json``) and a tune's
(``tune.json``).  :func:`specdash.bench.html.render_report` puts them on the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from specdash.bench.points import axis_name, break_even, point_label, sweep_var
from specdash.bench.report import _ci, _fmt, _fractions
from specdash.bench.sources import (
    ReportError,
    Source,
    is_point,
    load_source,
    sources_sweep_var,
    sweep_speedups,
)
from specdash.bench.svg import bar_chart, esc, line_chart
from specdash.results import output_tok_s


@dataclass
class Story:
    """A sweep against its baseline, as the page's first screen tells it: ``points`` in the sweep's shape
    (``var``, ``speedup``, ``ci95``, ``verdict``, ``output_tok_s``, ``baseline_tok_s``, ``pairs``), the
    break-even load and its interval, and the sweep's note."""

    var: str
    spec: Source
    base: Source | None
    points: list[dict]
    break_even: float | None
    break_even_ci95: Sequence[float | None] | None
    note: str


def _same_dir(a: Any, b: Path) -> bool:
    try:
        return Path(str(a)).resolve() == b.resolve()
    except OSError:
        return False


def stories(sources: Sequence[Source]) -> tuple[list[Story], list[Source]]:
    """The sweeps of ``sources`` told as stories, and the baseline directories loaded for them that were not
    given (a sweep's ``sweep.json`` names its baseline directory: ``specdash report SWEEP_DIR`` alone tells
    the whole story).  From ``sweep.json`` the sweep's own figures; two run directories without one (a
    speculative and a plain one), the paired speedups recomputed from their records."""
    runs = [s for s in sources if s.kind == "run"]
    out, loaded = [], []
    for spec in runs:
        if not spec.sweep or not spec.speculative:
            continue
        var = sweep_var(spec.sweep)
        others = [d for d in spec.sweep.get("run_dirs") or [] if not _same_dir(d, spec.path)]
        base = next((s for s in [*runs, *loaded] if s is not spec and any(_same_dir(d, s.path) for d in others)), None)
        for d in others if base is None else []:
            try:
                base = load_source(d)
            except ReportError:
                continue
            loaded.append(base)
            break
        out.append(Story(var, spec, base, [p for p in spec.sweep["sweep"] if isinstance(p, dict)],
                         spec.sweep.get(f"break_even_{var}"), spec.sweep.get("break_even_ci95"),
                         str(spec.sweep.get("note") or "")))
    if not out:
        bases = [s for s in runs if not s.speculative]
        var = sources_sweep_var(runs)
        for spec in (s for s in runs if s.speculative and bases):
            pts = sweep_speedups(spec, bases[0], var)
            if len(pts) >= 2:
                be, be_ci, note = break_even(pts, var)
                out.append(Story(var, spec, bases[0], pts, be, be_ci, note))
    return out, loaded


def _verdict(st: Story) -> tuple[str, str]:
    """(the first screen's headline sentence, its CSS class)."""
    name = axis_name(st.var)
    pts = sorted((p for p in st.points if p.get("speedup") is not None), key=lambda p: p[st.var])
    if not pts:
        return f"No paired speedup could be computed for this sweep. {st.note}", ""
    lo_ci = [(p.get("ci95") or [None, None]) for p in pts]
    faster = [c[0] is not None and c[0] > 1 for c in lo_ci]
    slower = [c[1] is not None and c[1] < 1 for c in lo_ci]
    first, last = pts[0], pts[-1]
    unit = "" if st.var == "concurrency" else " requests/s"
    curve = (f"speedup {first['speedup']:.2f}× at {name} {first[st.var]:g}{unit}, {last['speedup']:.2f}× at "
             f"{last[st.var]:g}{unit}")
    if st.break_even is not None:
        lo, hi = st.break_even_ci95 or (None, None)
        nd = 1 if st.var == "concurrency" else 2
        ci = f" (95 % CI {_fmt(lo, nd)} – {_fmt(hi, nd)})" if lo is not None or hi is not None else ""
        pays_low = first["speedup"] > 1
        # the note restates the break-even ("… stops paying at about …"): not repeated here
        return (f"Speculation {'pays up to' if pays_low else 'pays only above'} {name} ≈ {st.break_even:.{nd}f}{unit}"
                f"{ci}: {curve}.", "ok" if pays_low else "bad")
    if all(faster):
        return (f"Speculation pays at every {name} swept: {curve}, every 95 % interval above 1; no break-even up to "
                f"{last[st.var]:g}{unit} (sweep higher to find it).", "ok")
    if all(slower):
        return f"Speculation costs throughput at every {name} swept: {curve}. {st.note}", "bad"
    return f"Speculation is neither clearly faster nor slower across the sweep: {curve}. {st.note}", ""


def _by_point(src: Source | None, var: str) -> dict[Any, Mapping[str, Any]]:
    return {r.get(var): r for r in (src.runs if src else []) if is_point(r.get(var))}


def story_section(st: Story) -> list[str]:
    """Top first: the verdict; the speedup curve with its intervals and break-even; TTFT / TPOT / E2E against
    load and the latency–throughput curve for both sides; per-position acceptance; the per-point table with
    acceptance before timing; the settings."""
    var, name = st.var, axis_name(st.var)
    x_label = name if var == "concurrency" else "request rate (requests/s)"
    base_name = st.base.name if st.base else str((st.spec.sweep or {}).get("baseline") or "baseline")
    text, cls = _verdict(st)
    out = [f'<h2 id="story">Does speculation pay? {esc(st.spec.name)} against {esc(base_name)}</h2>',
           f'<p class="verdict {cls}">{esc(text)}</p>']
    pts = sorted((p for p in st.points if is_point(p.get(var))), key=lambda p: p[var])
    be_label = [(st.break_even, f"break-even ≈ {st.break_even:.3g}")] if st.break_even is not None else []
    charts = [line_chart([{"name": st.spec.name, "points": [(p[var], p.get("speedup")) for p in pts],
                           "band": [(p[var], *(p.get("ci95") or (None, None))) for p in pts]}],
                         title=f"speedup over {base_name} against {name}", x_label=x_label + " (log scale)",
                         y_label="speedup (×), 95 % CI", log_x=True, ref_y=1.0, vlines=be_label, width=400, height=260)]
    spec_by, base_by = _by_point(st.spec, var), _by_point(st.base, var)
    sides = [(st.spec.name, spec_by), *([(base_name, base_by)] if base_by else [])]
    for key, label in (("tpot_ms", "TPOT"), ("ttft_ms", "TTFT"), ("e2e_ms", "E2E")):
        series = [{"name": n, "points": [(x, stat(r, key, "p50")) for x, r in sorted(by.items())]} for n, by in sides]
        charts.append(line_chart(series, title=f"{label} p50 against {name}", x_label=x_label + " (log scale)",
                                 y_label=f"{label} p50 ms", log_x=True, width=400, height=260))
    lt = [{"name": n, "points": [(output_tok_s(r), stat(r, "tpot_ms", "p50")) for _, r in sorted(by.items())
                                 if output_tok_s(r) is not None],
           "labels": [point_label(var, x) for x, r in sorted(by.items()) if output_tok_s(r) is not None]}
          for n, by in sides]
    charts.append(line_chart(lt, title="latency–throughput: TPOT p50 against tok/s", x_label="output tok/s",
                             y_label="TPOT p50 ms", width=400, height=260, x_ticks=False))
    with_pos = [r for _, r in sorted(spec_by.items()) if position_rows(r)]
    if with_pos:
        charts.append(positions_chart(with_pos, [point_label(var, r.get(var)) for r in with_pos], width=400, height=260))
    out.append('<div class="charts story">' + "".join(figure(c) for c in charts) + "</div>")
    rows = []
    for p in pts:
        x = p[var]
        r, b = spec_by.get(x, {}), base_by.get(x, {})
        rows.append([point_label(var, x), _fmt(p.get("speedup"), 3), _ci(p.get("ci95")), _fmt(p.get("verdict")),
                     _fmt(r.get("accept_length"), 3), _fmt(r.get("accept_rate"), 3), _fmt(r.get("server_accept_length"), 3),
                     _fmt(output_tok_s(p), 1), _fmt(p.get("baseline_tok_s"), 1),
                     *(f"{_fmt(stat(r, k, 'p50'), 2)} / {_fmt(stat(b, k, 'p50'), 2)}" for k in ("ttft_ms", "tpot_ms",
                                                                                                 "e2e_ms")),
                     f"{_fmt(r.get('request_throughput'), 2)} / {_fmt(b.get('request_throughput'), 2)}"])
    out.append(table([axis_col(var), "speedup", "95 % CI", "verdict", "accept length", "accept rate", "server τ",
                       "tok/s", "baseline tok/s", "TTFT p50 ms (spec / base)", "TPOT p50 ms (spec / base)",
                       "E2E p50 ms (spec / base)", "requests/s (spec / base)"], rows))
    r0 = (st.spec.runs or [{}])[0]
    m = st.spec.manifest
    ds = m.get("dataset") if isinstance(m.get("dataset"), dict) else {}
    rf = m.get("request_fields") if isinstance(m.get("request_fields"), dict) else {}
    sampling = ", ".join(f"{k} {v}" for k, v in rf.items() if v not in (None, {}, [])) or None
    out.append(dl([("speculative settings (effective)", settings_text(r0.get("effective"))), ("against", base_name),
                    ("SGLang", r0.get("sglang_version")), ("workload", ds.get("source") or r0.get("suite")),
                    ("max tokens", r0.get("max_tokens")), ("sampling", sampling),
                    ("simulated", yes_no(r0.get("simulated")))]))
    return out


def headline(src: Source) -> list[str]:
    """A single run's first lines: its figures, acceptance first."""
    r = (src.runs or [{}])[0]
    bits = [f"accept length {_fmt(r.get('accept_length'), 3)}", f"accept rate {_fmt(r.get('accept_rate'), 3)}",
            f"{_fmt(output_tok_s(r), 1)} tok/s", f"TTFT p50 {_fmt(stat(r, 'ttft_ms', 'p50'), 2)} ms",
            f"TPOT p50 {_fmt(stat(r, 'tpot_ms', 'p50'), 2)} ms", f"E2E p50 {_fmt(stat(r, 'e2e_ms', 'p50'), 2)} ms"]
    return [f'<p class="verdict">{esc(src.name)} ({esc(settings_text(r.get("effective")))}): {esc(", ".join(bits))}.</p>']


def comparison_section(cmp: Mapping[str, Any], heading: str) -> list[str]:
    """An A/B comparison (``comparison.json`` shape) as HTML: verdict, sides, baseline, categories,
    prompts and two bar charts."""
    a, b = str(cmp.get("a")), str(cmp.get("b"))
    conf = cmp.get("confidence", 0.95) or 0.95
    out = [f"<h2>{esc(heading)}: {esc(b)} vs {esc(a)}</h2>",
           f"<p><b>Verdict: {esc(cmp.get('verdict'))}</b> — speedup {esc(b)}/{esc(a)} = {esc(_fmt(cmp.get('speedup'), 3))}"
           f", {esc(f'{conf:.0%}')} CI {esc(_ci(cmp.get('ci95')))}, {esc(cmp.get('pairs'))} pairs (metric "
           f"<code>{esc(cmp.get('metric'))}</code>; geometric mean of paired per-request ratios; interval: "
           f"{esc(cmp.get('method', 'n/a'))}).</p>"]
    for note in cmp.get("notes") or []:
        out.append(f'<p class="note">note: {esc(note)}</p>')
    ov = cmp.get("overall") or {}
    base = cmp.get("baseline")
    side_rows = [(f"A: {a}", ov.get("a")), (f"B: {b}", ov.get("b"))]
    if base:
        side_rows.append((f"baseline: {base.get('name')}", base.get("overall")))
    out.append(table(["side", "requests", "tok/s (mean)", "TPOT ms", "TTFT ms", "accept length", "accept rate"],
                      [[n, _fmt((s or {}).get("requests")), _fmt((s or {}).get("tok_s"), 1),
                        _fmt((s or {}).get("tpot_ms"), 2), _fmt((s or {}).get("ttft_ms"), 2),
                        _fmt((s or {}).get("accept_length"), 3), _fmt((s or {}).get("accept_rate"), 3)]
                       for n, s in side_rows]))
    if base:
        out += ["<h3>Against the baseline</h3>", table(
            ["side", "speedup vs baseline", "95 % CI", "verdict", "pairs"],
            [[(base.get(k) or {}).get("b"), _fmt((base.get(k) or {}).get("speedup"), 3), _ci((base.get(k) or {}).get("ci95")),
              _fmt((base.get(k) or {}).get("verdict")), _fmt((base.get(k) or {}).get("pairs"))] for k in ("a", "b")])]
    cats = cmp.get("per_category") or {}
    if cats:
        out += ["<h3>Per category</h3>", table(
            ["category", "pairs", "speedup", "95 % CI", "verdict", "A tok/s", "B tok/s", "A accept length",
             "B accept length"],
            [[name, _fmt(c.get("pairs")), _fmt(c.get("speedup"), 3), _ci(c.get("ci95")), _fmt(c.get("verdict")),
              _fmt((c.get("a") or {}).get("tok_s"), 1), _fmt((c.get("b") or {}).get("tok_s"), 1),
              _fmt((c.get("a") or {}).get("accept_length"), 3), _fmt((c.get("b") or {}).get("accept_length"), 3)]
             for name, c in cats.items()])]
    rows = cmp.get("per_prompt") or []
    if rows:
        out += ["<h3>Per prompt</h3>", table(
            ["prompt", "category", "pairs", "A tok/s", "B tok/s", "A TPOT ms", "B TPOT ms", "A accept length",
             "B accept length", "speedup"],
            [[r.get("prompt_index"), _fmt(r.get("category")), _fmt(r.get("pairs")), _fmt(r.get("a_tok_s"), 1),
              _fmt(r.get("b_tok_s"), 1), _fmt(r.get("a_tpot_ms"), 2), _fmt(r.get("b_tpot_ms"), 2),
              _fmt(r.get("a_accept_length"), 3), _fmt(r.get("b_accept_length"), 3), _fmt(r.get("speedup"), 3)]
             for r in rows])]
        out.append(figure(bar_chart([f"p{r.get('prompt_index')}" for r in rows],
                                     [(a, [r.get("a_tok_s") for r in rows]), (b, [r.get("b_tok_s") for r in rows])],
                                     title="output tok/s per prompt (mean over repeats)", x_label="prompt",
                                     y_label="tok/s", value_fmt="{:.1f}")))
    fa, fb = _fractions((ov.get("a") or {}).get("accept_histogram")), _fractions((ov.get("b") or {}).get("accept_histogram"))
    if fa or fb:
        kmax = max(len(fa or []), len(fb or []))
        series = [(n, (f or []) + [0.0] * (kmax - len(f or []))) for n, f in ((a, fa), (b, fb)) if f]
        out.append(figure(bar_chart([str(k) for k in range(kmax)], series, title="accepted drafts per verify round",
                                     x_label="accepted drafts k (accept length = k + 1)",
                                     y_label="fraction of verify rounds")))
    return out


def tune_section(src: Source) -> list[str]:
    t = src.tune or {}
    best = t.get("best") or {}
    start = t.get("start") or {}
    out = [f"<h2>Tune: {esc(t.get('profile'))}</h2>", f'<p class="note">directory <code>{esc(src.path)}</code></p>',
           dl([("suite", t.get("suite")), ("mode", t.get("mode")),
                ("launches", f"{t.get('launches')} ({t.get('exploration_launches')} of the budget of {t.get('budget')})"),
                ("stopped because", t.get("stop_reason")), ("start", _settings_of(start)), ("best", _settings_of(best)),
                ("baseline tok/s", _fmt(t.get("baseline_tok_s"), 1)), ("preset written", t.get("preset")),
                ("preset not saved", t.get("preset_not_saved"))])]
    measured = t.get("measured") or []
    if measured:
        out += ["<h3>Measured settings</h3>", table(
            ["source", "launch", "concurrency", "settings", "tok/s", "accept length"],
            [[m.get("source"), _fmt(m.get("launch")), _fmt(m.get("concurrency")), _settings_of(m.get("settings")),
              _fmt(output_tok_s(m), 1), _fmt(m.get("accept_length"), 3)] for m in measured], left=4)]
    if t.get("advice_text"):
        out += ["<h3>Advice</h3>", f"<pre>{esc(t['advice_text'])}</pre>"]
    if isinstance(t.get("comparison"), Mapping) and t["comparison"].get("a") is not None:
        out += comparison_section(t["comparison"], "Tune's final A/B")
    return out


def _settings_of(s: Any) -> str:
    if isinstance(s, Mapping) and "settings" in s:
        s = s.get("settings")
    if not isinstance(s, Mapping) or not s:
        return "no speculation"
    return (f"steps {s.get('speculative_num_steps')} / topk {s.get('speculative_eagle_topk')} / draft tokens "
            f"{s.get('speculative_num_draft_tokens')}")
