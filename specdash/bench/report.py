"""Write an A/B comparison to disk: ``comparison.json``, ``comparison.csv`` and ``report.md``.

The Markdown report holds the verdict, the overall/per-prompt/per-category/baseline tables and
two plain-text bar charts inside fenced code blocks (drawn here, no plotting library: the headless
path stays free of the TUI's plotext):

* per-prompt output tok/s bars, A (█) above B (░), on one scale;
* the pooled accepted-drafts histograms of A and B side by side on one scale (fraction of verify
  rounds that accepted k drafts; accept length = k + 1 with the bonus token, as SGLang counts it).

``write_summary_csv`` flattens a single run's ``summary.json`` (README "Run directories") into CSV rows.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specdash.bench.compare import CSV_COLUMNS


def _fmt(v: Any, nd: int = 2) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "–"
        return f"{v:.{nd}f}"
    return str(v)


def _ci(ci: Sequence[Any] | None, nd: int = 3) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "–"
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


_FULL, _PARTIAL = "█", "▏▎▍▌▋▊▉"


def _bar(value: float, top: float, cells: int, marker: str) -> str:
    """A bar of ``value / top × cells`` character cells; the solid marker gets eighth-cell ends."""
    if top <= 0 or value <= 0:
        return ""
    eighths = round(min(1.0, value / top) * cells * 8)
    if marker != _FULL:
        return marker * max(1, round(eighths / 8))
    whole, rest = divmod(eighths, 8)
    return _FULL * whole + (_PARTIAL[rest - 1] if rest else "") or _PARTIAL[0]


def tok_s_chart(comparison: Mapping[str, Any], *, width: int = 72) -> str:
    """Per-prompt mean output tok/s, A above B, as plain text (empty string without rows)."""
    rows = [r for r in comparison.get("per_prompt", []) if r.get("a_tok_s") and r.get("b_tok_s")]
    if not rows:
        return ""
    a, b = str(comparison.get("a")), str(comparison.get("b"))
    labels = [f"p{r['prompt_index']}" for r in rows]
    lw = max(len(x) for x in labels)
    top = max(max(r["a_tok_s"], r["b_tok_s"]) for r in rows)
    vw = len(f"{top:.1f}")
    cells = max(10, width - lw - vw - 3)
    out = ["output tok/s per prompt (mean over repeats)", f"{_FULL} {a}   ░ {b}", ""]
    for label, r in zip(labels, rows):
        for lab, val, mk in ((label, r["a_tok_s"], _FULL), ("", r["b_tok_s"], "░")):
            out.append(f"{lab:<{lw}} {_bar(val, top, cells, mk):<{cells}} {val:>{vw}.1f}".rstrip())
    return "\n".join(out)


def _fractions(hist: Sequence[int] | None) -> list[float] | None:
    if not hist:
        return None
    total = float(sum(hist))
    return [c / total for c in hist] if total > 0 else None


def histogram_chart(
    hist_a: Sequence[int] | None,
    hist_b: Sequence[int] | None,
    *,
    name_a: str = "A",
    name_b: str = "B",
    width: int = 110,
) -> str:
    """Accepted-drafts histograms of A and B side by side (fraction of verify rounds per k)."""
    fa, fb = _fractions(hist_a), _fractions(hist_b)
    if fa is None and fb is None:
        return ""
    kmax = max(len(fa or []), len(fb or []))
    top = max(max(fa or [0.0]), max(fb or [0.0]))  # one scale for both sides
    kw = len(f"k={kmax - 1}")
    panel = (width - 4) // 2
    cells = max(10, panel - kw - 8)
    sides = ((name_a, fa, _FULL), (name_b, fb, "░"))
    titles = [f"{name}: accepted drafts k" + ("" if frac else " (no data)") for name, frac, _ in sides]
    out = [f"{titles[0]:<{panel}}    {titles[1]}".rstrip(), ""]
    for k in range(kmax):
        cols = []
        for _name, frac, mk in sides:
            if frac is None:
                cols.append("")
                continue
            v = frac[k] if k < len(frac) else 0.0
            cols.append(f"{f'k={k}':<{kw}} {_bar(v, top, cells, mk):<{cells}} {v:6.3f}")
        out.append(f"{cols[0]:<{panel}}    {cols[1]}".rstrip())
    return "\n".join(out)


def _side_table(title_rows: Sequence[tuple[str, Mapping[str, Any] | None]]) -> list[str]:
    out = ["| side | requests | tok/s (mean) | TPOT ms | TTFT ms | accept length | accept rate |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in title_rows:
        s = s or {}
        out.append(f"| {name} | {_fmt(s.get('requests'))} | {_fmt(s.get('tok_s'))} | {_fmt(s.get('tpot_ms'))} | "
                   f"{_fmt(s.get('ttft_ms'))} | {_fmt(s.get('accept_length'), 3)} | "
                   f"{_fmt(s.get('accept_rate'), 3)} |")
    return out


def render_markdown(comparison: Mapping[str, Any]) -> str:
    """The Markdown report for a ``comparison.json`` dict (tables + fenced text charts)."""
    a, b = str(comparison.get("a")), str(comparison.get("b"))
    conf = comparison.get("confidence", 0.95)
    lines = [f"# A/B comparison: {b} vs {a}", ""]
    lines.append(f"**Verdict: {comparison.get('verdict')}** — speedup {b}/{a} = "
                 f"{_fmt(comparison.get('speedup'), 3)}, {conf:.0%} CI {_ci(comparison.get('ci95'))}, "
                 f"{comparison.get('pairs')} pairs (metric `{comparison.get('metric')}`; geometric mean of paired "
                 f"per-request ratios, bootstrap interval: {comparison.get('method', 'n/a')}).")
    for note in comparison.get("notes") or []:
        lines.append(f"- note: {note}")
    lines.append("")
    ov = comparison.get("overall") or {}
    base = comparison.get("baseline")
    lines += ["## Overall", ""]
    side_rows = [(f"A: {a}", ov.get("a")), (f"B: {b}", ov.get("b"))]
    if base:
        side_rows.append((f"baseline: {base.get('name')}", base.get("overall")))
    lines += _side_table(side_rows) + [""]

    if base:
        lines += ["## Against the baseline", "",
                  "| side | speedup vs baseline | CI | verdict | pairs |", "|---|---:|---|---|---:|"]
        for side in ("a", "b"):
            c = base.get(side) or {}
            lines.append(f"| {c.get('b')} | {_fmt(c.get('speedup'), 3)} | {_ci(c.get('ci95'))} | "
                         f"{c.get('verdict')} | {c.get('pairs')} |")
        lines.append("")

    rows = comparison.get("per_prompt") or []
    if rows:
        lines += ["## Per prompt", "",
                  ("| prompt | category | pairs | A tok/s | B tok/s | A TPOT ms | B TPOT ms | A TTFT ms | B TTFT ms "
                  "| A acc len | B acc len | A acc rate | B acc rate | speedup |"),
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(
                f"| {r['prompt_index']} | {_fmt(r.get('category'))} | {r['pairs']} | {_fmt(r.get('a_tok_s'))} | "
                f"{_fmt(r.get('b_tok_s'))} | {_fmt(r.get('a_tpot_ms'))} | {_fmt(r.get('b_tpot_ms'))} | "
                f"{_fmt(r.get('a_ttft_ms'))} | {_fmt(r.get('b_ttft_ms'))} | {_fmt(r.get('a_accept_length'), 3)} | "
                f"{_fmt(r.get('b_accept_length'), 3)} | {_fmt(r.get('a_accept_rate'), 3)} | "
                f"{_fmt(r.get('b_accept_rate'), 3)} | {_fmt(r.get('speedup'), 3)} |")
        lines.append("")
        chart = tok_s_chart(comparison)
        if chart:
            lines += ["```text", chart, "```", ""]

    cats = comparison.get("per_category") or {}
    if cats:
        lines += ["## Per category", "",
                  "| category | pairs | speedup | CI | verdict | A tok/s | B tok/s | A acc len | B acc len |",
                  "|---|---:|---:|---|---|---:|---:|---:|---:|"]
        for name, c in cats.items():
            ca, cb = c.get("a") or {}, c.get("b") or {}
            lines.append(f"| {name} | {c.get('pairs')} | {_fmt(c.get('speedup'), 3)} | {_ci(c.get('ci95'))} | "
                         f"{c.get('verdict')} | {_fmt(ca.get('tok_s'))} | {_fmt(cb.get('tok_s'))} | "
                         f"{_fmt(ca.get('accept_length'), 3)} | {_fmt(cb.get('accept_length'), 3)} |")
        lines.append("")

    hist = histogram_chart((ov.get("a") or {}).get("accept_histogram"), (ov.get("b") or {}).get("accept_histogram"),
                           name_a=a, name_b=b)
    if hist:
        lines += ["## Accepted drafts per verify round", "",
                  "Fraction of verify rounds that accepted k draft tokens (bonus excluded; accept length = k + 1).",
                  "", "```text", hist, "```", ""]
    return "\n".join(lines)


def write_comparison(directory: str | Path, comparison: Mapping[str, Any]) -> dict[str, Path]:
    """Write ``comparison.json``, ``comparison.csv`` (per-prompt rows) and ``report.md``.

    Creates ``directory`` if needed; returns ``{"json", "csv", "md"}`` → paths.
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = {"json": d / "comparison.json", "csv": d / "comparison.csv", "md": d / "report.md"}
    paths["json"].write_text(json.dumps(comparison, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
        w.writeheader()
        for row in comparison.get("per_prompt") or []:
            w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS})
    paths["md"].write_text(render_markdown(comparison) + "\n", encoding="utf-8")
    return paths


SUMMARY_COLUMNS = (
    "profile",
    "simulated",
    "sglang_version",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "requests",
    "output_tokens",
    "duration_s",
    "output_tok_s",
    *(f"{m}_{s}" for m in ("ttft_ms", "tpot_ms", "itl_ms") for s in ("mean", "p50", "p90", "p99")),
    "accept_length",
    "accept_rate",
    "server_accept_length",
    "accept_histogram",
    "verification_status",
)


def summary_rows(run_summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Flatten ``summary.json`` (``{"runs": [RUN, ...]}``) or a single RUN into CSV rows."""
    runs = run_summary.get("runs") if "runs" in run_summary else [run_summary]
    out = []
    for run in runs or []:
        eff = run.get("effective") or {}
        row: dict[str, Any] = {k: run.get(k) for k in ("profile", "simulated", "sglang_version", "requests",
                                                         "output_tokens", "duration_s", "output_tok_s",
                                                         "accept_length", "accept_rate", "server_accept_length")}
        row.update({k: eff.get(k) for k in ("speculative_algorithm", "speculative_num_steps",
                                            "speculative_eagle_topk", "speculative_num_draft_tokens")})
        for m in ("ttft_ms", "tpot_ms", "itl_ms"):
            st = run.get(m) or {}
            for s in ("mean", "p50", "p90", "p99"):
                row[f"{m}_{s}"] = st.get(s)
        hist = run.get("accept_histogram")
        row["accept_histogram"] = " ".join(str(int(c)) for c in hist) if hist else None
        row["verification_status"] = (run.get("verification") or {}).get("status")
        out.append(row)
    return out


def write_summary_csv(run_summary: Mapping[str, Any], path: str | Path) -> Path:
    """Write one CSV row per run of a ``summary.json`` dict (or a single RUN) to ``path``.

    Nested statistics are flattened (``ttft_ms_p50`` …); the histogram is space-separated counts.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(SUMMARY_COLUMNS), extrasaction="ignore")
        w.writeheader()
        for row in summary_rows(run_summary):
            w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in SUMMARY_COLUMNS})
    return p
