"""Write an A/B comparison to disk: ``comparison.json``, ``comparison.csv`` and ``report.md``.

The Markdown report holds the verdict, the overall/per-prompt/per-category/baseline tables and
two text charts drawn with plotext (rendered with ``plotext.build()``, ANSI colour codes
stripped, inside fenced code blocks):

* per-prompt output tok/s bars, A (█) beside B (░);
* the pooled accepted-drafts histograms of A and B side by side (fraction of verify rounds that
  accepted k drafts; accept length = k + 1 with the bonus token, as SGLang counts it).

plotext keeps one module-level figure; every chart here starts by clearing it (the main figure,
subplots included: ``plt.clf()`` alone clears only the active subplot) and clears it again in a
``finally`` so no state leaks to other users of plotext (the TUI).

``write_summary_csv`` flattens a single run's ``summary.json`` (README "Run directories") into CSV rows.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specdash.bench.compare import CSV_COLUMNS
from specdash.results import OUTPUT_TOK_S, output_tok_s

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


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


def _reset() -> None:
    """Clear plotext's whole module-level figure, subplots included (``plt.clf()`` alone only
    clears the active subplot)."""
    import plotext as plt

    plt.main().clear_figure()


def _clean(text: str) -> str:
    lines = [_ANSI.sub("", ln).rstrip() for ln in text.splitlines()]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def tok_s_chart(comparison: Mapping[str, Any], *, width: int | None = None, height: int = 18) -> str:
    """Per-prompt mean output tok/s, A beside B, as plain text (empty string without rows)."""
    import plotext as plt

    rows = [r for r in comparison.get("per_prompt", []) if r.get("a_tok_s") and r.get("b_tok_s")]
    if not rows:
        return ""
    labels = [f"p{r['prompt_index']}" for r in rows]
    w = width or max(60, min(180, 10 * len(rows) + 20))
    _reset()
    try:
        plt.plotsize(w, height)
        plt.theme("clear")
        plt.multiple_bar(labels, [[r["a_tok_s"] for r in rows], [r["b_tok_s"] for r in rows]],
                         labels=[str(comparison.get("a")), str(comparison.get("b"))], marker=["█", "░"])
        top = max(max(r["a_tok_s"], r["b_tok_s"]) for r in rows)
        plt.ylim(0, top * 1.3)  # head-room for the legend
        plt.title("output tok/s per prompt (mean over repeats)")
        return _clean(plt.build())
    finally:
        _reset()


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
    height: int = 16,
) -> str:
    """Accepted-drafts histograms of A and B side by side (fraction of verify rounds per k)."""
    import plotext as plt

    fa, fb = _fractions(hist_a), _fractions(hist_b)
    if fa is None and fb is None:
        return ""
    kmax = max(len(fa or []), len(fb or []))
    xs = list(range(kmax))
    top = min(1.0, 1.15 * max(max(fa or [0.0]), max(fb or [0.0])))
    _reset()
    try:
        plt.subplots(1, 2)
        plt.plotsize(width, height)
        for col, (name, frac) in enumerate(((name_a, fa), (name_b, fb)), start=1):
            plt.subplot(1, col)
            plt.theme("clear")
            ys = (frac or []) + [0.0] * (kmax - len(frac or []))
            plt.bar(xs, ys, marker="█" if col == 1 else "░")
            plt.ylim(0, top)  # same scale on both sides
            plt.title(f"{name}: accepted drafts k" + ("" if frac else " (no data)"))
        return _clean(plt.build())
    finally:
        _reset()


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
    OUTPUT_TOK_S,
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
                                                         "output_tokens", "duration_s")}
        row[OUTPUT_TOK_S] = output_tok_s(run)
        row.update({k: run.get(k) for k in ("accept_length", "accept_rate", "server_accept_length")})
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
