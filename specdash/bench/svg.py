"""SVG charts for the HTML report, drawn as plain text (no plotting library), and their export as images.

:func:`line_chart` (lines with optional interval bands, a dashed reference line, labelled vertical markers
and point labels; log₂ x for load axes), :func:`bar_chart` (grouped bars) and :func:`cdf_points` (an
empirical distribution as a line) write standalone ``<svg>`` elements: each carries the SVG namespace, a
``<title>`` and a white background, so the same text is a valid ``.svg`` file.  Every text is escaped
(:func:`esc`).  :func:`page_charts` finds the charts of a page; :func:`export_charts` writes each as
``.svg``, or as ``.png`` rendered from that SVG by CairoSVG when installed (``pip install cairosvg``) else by
headless Chromium (``chromium --headless --screenshot``), the browser the report is checked in.
"""

from __future__ import annotations

import html
import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def esc(v: Any) -> str:
    """``v`` as text, escaped for HTML and XML (quotes included)."""
    return html.escape("" if v is None else str(v), quote=True)


PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
SVG_NS = "http://www.w3.org/2000/svg"


# -- SVG charts ------------------------------------------------------------------------------------
def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi] (steps of 1, 2, 2.5 or 5 × 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def _tick_label(v: float) -> str:
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    return f"{v:.3g}"


def _svg_open(width: int, height: int, title: str) -> list[str]:
    return [f'<svg xmlns="{SVG_NS}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="{esc(title)}" font-family="sans-serif" font-size="11">',
            f"<title>{esc(title)}</title>",
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
            f'<text x="{width / 2:.1f}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
            f"{esc(title)}</text>"]


def _legend(names: Sequence[str], x: float, y: float, room: float = 136.0) -> list[str]:
    """Legend entries from (x, y) down; a name longer than ``room`` px (≈ 6.2 px a character at 11 px) is
    cut with an ellipsis (the full name stays in each point's tooltip)."""
    out = []
    fit = max(4, int((room - 14) / 6.2))
    names = [n if len(n) <= fit else n[:fit - 1] + "…" for n in names]
    for i, name in enumerate(names):
        yy = y + 14 * i
        out.append(f'<rect x="{x:.1f}" y="{yy - 8:.1f}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{yy + 1:.1f}">{esc(name)}</text>')
    return out


def _axes(left: float, top: float, pw: float, ph: float, y_ticks: Sequence[float], y_of, x_label: str,
          y_label: str, height: int) -> list[str]:
    out = []
    for t in y_ticks:
        y = y_of(t)
        out.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{left + pw:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">{esc(_tick_label(t))}</text>')
    out.append(f'<line x1="{left:.1f}" y1="{top + ph:.1f}" x2="{left + pw:.1f}" y2="{top + ph:.1f}" stroke="#333"/>')
    out.append(f'<line x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{top + ph:.1f}" stroke="#333"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{height - 6}" text-anchor="middle">{esc(x_label)}</text>')
    out.append(f'<text x="14" y="{top + ph / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + ph / 2:.1f})">{esc(y_label)}</text>')
    return out


def line_chart(series: Sequence[Mapping[str, Any]], *, title: str, x_label: str, y_label: str,
               log_x: bool = False, ref_y: float | None = None, width: int = 640, height: int = 320,
               y_zero: bool = True, vlines: Sequence[tuple[float, str]] = (), x_ticks: bool | None = None,
               markers: bool = True) -> str:
    """An SVG line chart; each series ``{"name", "points": [(x, y)], "band": [(x, lo, hi)], "labels": [str]}``
    (band optional: a shaded interval with whiskers; labels optional: one text beside each point, e.g. its
    concurrency on a latency–throughput curve).  ``log_x`` puts x on a log2 scale with a tick at each x of
    the data (``x_ticks=False``: round ticks instead); ``ref_y`` draws a dashed horizontal reference line
    (e.g. speedup 1); ``vlines`` dashed vertical markers with a label (e.g. the break-even load; one outside
    the data's x range is drawn at the edge it lies beyond).  Points with a None y are skipped."""
    pts = [(float(x), float(y)) for s in series for x, y in s.get("points") or [] if y is not None]
    band = [(float(x), lo, hi) for s in series for x, lo, hi in s.get("band") or []]
    out = _svg_open(width, height, title)
    if not pts:
        out.append(f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle">no data</text></svg>')
        return "\n".join(out)
    left, right, top, bottom = 64.0, (150.0 if width >= 560 else 118.0), 28.0, 40.0
    pw, ph = width - left - right, height - top - bottom
    ys = [y for _, y in pts] + [v for _, lo, hi in band for v in (lo, hi) if v is not None]
    ys += [ref_y] if ref_y is not None else []
    y_lo = min(0.0, min(ys)) if y_zero else min(ys)
    y_ticks = nice_ticks(y_lo, max(ys))
    y0, y1 = y_ticks[0], y_ticks[-1]
    xs = sorted({x for x, _ in pts})
    log_x = log_x and xs[0] > 0
    fx = (lambda v: math.log2(v)) if log_x else (lambda v: v)
    x0, x1 = fx(xs[0]), fx(xs[-1])
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1

    def x_of(v: float) -> float:
        return left + (fx(v) - x0) / (x1 - x0) * pw

    def y_of(v: float) -> float:
        return top + ph - (v - y0) / ((y1 - y0) or 1.0) * ph

    out += _axes(left, top, pw, ph, y_ticks, y_of, x_label, y_label, height)
    at_data = x_ticks if x_ticks is not None else (log_x or len(xs) <= 8)
    ticks = xs if at_data else nice_ticks(xs[0], xs[-1])
    for t in ticks:
        if xs[0] <= t <= xs[-1] or len(xs) == 1:
            out.append(f'<text x="{x_of(t):.1f}" y="{top + ph + 16:.1f}" text-anchor="middle">{esc(_tick_label(t))}</text>')
    for vx, vlabel in vlines:
        if vx is None or not math.isfinite(vx) or (log_x and vx <= 0):
            continue
        px = min(max(x_of(vx), left), left + pw)
        out.append(f'<line x1="{px:.1f}" y1="{top:.1f}" x2="{px:.1f}" y2="{top + ph:.1f}" stroke="#9467bd" '
                   'stroke-width="1.5" stroke-dasharray="6,3"/>')
        # right of the middle the label reads leftwards, so it never runs into the legend beside the plot
        right_half = px > left + pw / 2
        anchor = ' text-anchor="end"' if right_half else ""
        out.append(f'<text x="{px - 4 if right_half else px + 4:.1f}" y="{top + 12:.1f}" fill="#6a3d9a"{anchor}>'
                   f'{esc(vlabel)}</text>')
    if ref_y is not None and y0 <= ref_y <= y1:
        out.append(f'<line x1="{left:.1f}" y1="{y_of(ref_y):.1f}" x2="{left + pw:.1f}" y2="{y_of(ref_y):.1f}" '
                   'stroke="#555" stroke-dasharray="5,4"/>')
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        sb = sorted((float(x), lo, hi) for x, lo, hi in s.get("band") or [] if lo is not None and hi is not None)
        if len(sb) >= 2:
            poly = [(x_of(x), y_of(hi)) for x, _, hi in sb] + [(x_of(x), y_of(lo)) for x, lo, _ in reversed(sb)]
            out.append(f'<polygon points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in poly)}" fill="{colour}" '
                       'fill-opacity="0.15" stroke="none"/>')
        for x, lo, hi in sb:  # whiskers: the interval at each point
            out.append(f'<line x1="{x_of(x):.1f}" y1="{y_of(lo):.1f}" x2="{x_of(x):.1f}" y2="{y_of(hi):.1f}" '
                       f'stroke="{colour}" stroke-opacity="0.6"/>')
        sp = sorted((float(x), float(y)) for x, y in s.get("points") or [] if y is not None)
        if len(sp) >= 2:
            out.append(f'<polyline points="{" ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in sp)}" '
                       f'fill="none" stroke="{colour}" stroke-width="2"/>')
        labels = list(s.get("labels") or [])
        for k, (x, y) in enumerate(sp if not labels else [(float(x), float(y)) for x, y in s.get("points") or []
                                                           if y is not None]):
            if markers:
                out.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="3.5" fill="{colour}">'
                           f"<title>{esc(s.get('name'))}: {esc(_tick_label(x))} → {esc(f'{y:.4g}')}</title></circle>")
            if k < len(labels) and labels[k]:
                out.append(f'<text x="{x_of(x) + 5:.1f}" y="{y_of(y) - 5:.1f}" font-size="10" fill="{colour}">'
                           f"{esc(labels[k])}</text>")
    out += _legend([str(s.get("name")) for s in series], left + pw + 16, top + 10, right - 18)
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(labels: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], *, title: str,
              x_label: str, y_label: str, height: int = 300, width: int | None = None,
              y_max: float | None = None, value_fmt: str = "{:.3f}") -> str:
    """An SVG grouped bar chart: one group per label, one bar per series (``(name, values)``; a None
    value draws no bar).  Each bar carries its value as a tooltip (``<title>``)."""
    vals = [v for _, vs in series for v in vs if v is not None]
    n_groups, n_series = len(labels), max(1, len(series))
    width = width or int(max(420, min(1100, 64 + 150 + n_groups * (14 * n_series + 18))))
    out = _svg_open(width, height, title)
    if not vals or not n_groups:
        out.append(f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle">no data</text></svg>')
        return "\n".join(out)
    left, right, top, bottom = 64.0, 150.0, 28.0, 40.0
    pw, ph = width - left - right, height - top - bottom
    y_ticks = nice_ticks(0.0, y_max if y_max is not None else max(vals) or 1.0)
    y1 = y_ticks[-1] or 1.0

    def y_of(v: float) -> float:
        return top + ph - v / y1 * ph

    out += _axes(left, top, pw, ph, y_ticks, y_of, x_label, y_label, height)
    gw = pw / n_groups
    bw = max(2.0, (gw - 8) / n_series)
    for g, lab in enumerate(labels):
        gx = left + g * gw + 4
        out.append(f'<text x="{gx + (gw - 8) / 2:.1f}" y="{top + ph + 16:.1f}" text-anchor="middle">{esc(lab)}</text>')
        for i, (name, vs) in enumerate(series):
            v = vs[g] if g < len(vs) else None
            if v is None:
                continue
            y = y_of(min(float(v), y1))
            out.append(f'<rect x="{gx + i * bw:.1f}" y="{y:.1f}" width="{bw - 1:.1f}" height="{top + ph - y:.1f}" '
                       f'fill="{PALETTE[i % len(PALETTE)]}"><title>{esc(name)}, {esc(lab)}: '
                       f"{esc(value_fmt.format(v))}</title></rect>")
    out += _legend([name for name, _ in series], left + pw + 16, top + 10)
    out.append("</svg>")
    return "\n".join(out)


def cdf_points(values: Sequence[float | None], max_points: int = 120) -> list[tuple[float, float]]:
    """The empirical CDF of ``values`` (None skipped) as ``(value, fraction ≤ value)`` points, thinned to at
    most ``max_points`` evenly spaced ranks (the smallest and largest kept)."""
    v = sorted(float(x) for x in values if x is not None and math.isfinite(float(x)))
    n = len(v)
    if not n:
        return []
    idx = sorted({round(i * (n - 1) / (max_points - 1)) for i in range(max_points)}) if n > max_points else range(n)
    return [(v[i], (i + 1) / n) for i in idx]


# -- export ----------------------------------------------------------------------------------------
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)


def page_charts(page: str) -> list[tuple[str, str]]:
    """``(file stem, svg text)`` of every chart in a report page, in page order; the stem is ``NN-`` and
    the chart's title made file-safe."""
    out = []
    for i, m in enumerate(_SVG.finditer(page), 1):
        svg = m.group(0)
        t = _TITLE.search(svg)
        title = html.unescape(t.group(1)) if t else "chart"
        stem = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()[:60] or "chart"
        out.append((f"{i:02d}-{stem}", svg))
    return out


def browser() -> str | None:
    """A headless Chromium on ``PATH`` (None when there is none)."""
    return next((b for b in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
                 if shutil.which(b)), None)


def _svg_size(svg: str) -> tuple[int, int]:
    m = re.search(r'width="(\d+)" height="(\d+)"', svg)
    return (int(m.group(1)), int(m.group(2))) if m else (640, 320)


def render_png(svg: str, dest: Path, *, scale: float = 2.0) -> str:
    """Write ``svg`` as a PNG at ``scale`` × its size; returns the renderer used (``cairosvg`` or the
    browser's name).

    Raises:
        RuntimeError: neither CairoSVG nor a headless Chromium is available, or the renderer failed.
    """
    try:
        import cairosvg
    except (ImportError, OSError):  # OSError: the library is installed but libcairo is not
        cairosvg = None
    if cairosvg is not None:
        cairosvg.svg2png(bytestring=svg.encode("utf-8"), write_to=str(dest), scale=scale)
        return "cairosvg"
    exe = browser()
    if exe is None:
        raise RuntimeError("a PNG needs CairoSVG (pip install cairosvg) or a headless Chromium on PATH "
                           "(apt-get install chromium); --svg DIR writes the charts as SVG without either")
    w, h = _svg_size(svg)
    with tempfile.TemporaryDirectory(prefix="specdash-png-") as tmp:
        page = Path(tmp) / "chart.html"
        page.write_text(f'<!DOCTYPE html><html><body style="margin:0">{svg}</body></html>', encoding="utf-8")
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--force-device-scale-factor={scale:g}", f"--window-size={w},{h}", f"--user-data-dir={tmp}/profile",
               f"--screenshot={dest}", page.as_uri()]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode != 0 or not dest.is_file():
        raise RuntimeError(f"{exe} could not render {dest.name}: {(res.stderr or res.stdout).strip()[-300:]}")
    return exe


def export_charts(page: str, out_dir: Path, fmt: str) -> list[Path]:
    """Write every chart of ``page`` into ``out_dir`` as ``fmt`` (``svg`` or ``png``); returns the files.

    Raises:
        RuntimeError: ``png`` without a renderer (see :func:`render_png`).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for stem, svg in page_charts(page):
        dest = out_dir / f"{stem}.{fmt}"
        if fmt == "svg":
            dest.write_text('<?xml version="1.0" encoding="UTF-8"?>\n' + svg + "\n", encoding="utf-8")
        else:
            render_png(svg, dest)
        files.append(dest)
    return files
