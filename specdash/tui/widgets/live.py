"""The Live panel: throughput, latency and acceptance as numbers and as charts over time."""

from __future__ import annotations

import statistics

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from specdash.results import output_tok_s
from specdash.tui.format import ACCEPT_DEFINITIONS, DASH, PlainTable, dist, num, pct
from specdash.tui.state import ViewState
from specdash.tui.widgets.charts import HistogramChart, Series, TimeChart


def _tile(title: str, value: str, sub: str = "", style: str = "bold") -> Text:
    t = Text()
    t.append(title + "\n", style="dim")
    t.append(value, style=style)
    if sub:
        t.append("\n" + sub, style="dim")
    return t


def live_numbers(view: ViewState) -> dict[str, str]:
    """The headline numbers as strings (also used by the status bar and tests)."""
    snap = view.snapshot
    run = snap.run
    m = snap.latest_metrics
    d = snap.latest_decode
    reqs = [r.tok_s for r in snap.requests if r.ok and r.tok_s]
    window_al = (m.accept_length if m and m.accept_length else None) or (d.accept_length if d else None)
    window_ar = (m.accept_rate if m and m.accept_rate is not None and m.accept_length else None)
    if window_ar is None and d is not None:
        window_ar = d.accept_rate
    running = m.running if m and m.running is not None else (d.running if d else None)
    queued = m.queued if m and m.queued is not None else (d.queued if d else None)
    return {
        "server_tok_s": num(m.tok_s if m else None, 0),
        "run_tok_s": num(output_tok_s(run), 0),
        "request_tok_s": num(statistics.median(reqs) if reqs else None, 1),
        "ttft": dist(run.get("ttft_ms"), "p50", 0),
        "ttft_p90": dist(run.get("ttft_ms"), "p90", 0),
        "tpot": dist(run.get("tpot_ms"), "p50", 2),
        "tpot_p90": dist(run.get("tpot_ms"), "p90", 2),
        "itl": dist(run.get("itl_ms"), "p50", 2),
        "accept_length": num(run.get("accept_length"), 2),
        "accept_rate": pct(run.get("accept_rate")),
        "window_accept_length": num(window_al, 2),
        "window_accept_rate": pct(window_ar),
        "server_accept_length": num(snap.run_server_accept_length, 2),
        "running": num(running, 0),
        "queued": num(queued, 0),
        "requests": str(run.get("requests") or 0),
        "failed": str(run.get("failed_requests") or 0),
    }


def tier_text(view: ViewState) -> Text | None:
    """The adaptive-tier line of the Live panel: the tier SGLang runs now, where it was read, the
    switches this run and the run's figures per tier; None when the server is not adaptive."""
    tier = view.snapshot.tier
    if tier is None or not tier.adaptive:
        return None
    t = Text()
    t.append("Adaptive tier now: ", style="bold")
    t.append(f"steps {tier.steps} · draft tokens {num(tier.draft_tokens, 0)}", style="bold yellow")
    ago = f", {view.snapshot.taken_at - tier.since:.0f} s ago" if tier.since is not None else ""
    t.append(f"  (from the {tier.source}{ago}; ", style="dim")
    t.append(f"{tier.switches} switch{'es' if tier.switches != 1 else ''} this run", style="dim")
    if tier.launch_steps is not None:
        t.append(f"; launched at steps {tier.launch_steps}", style="dim")
    t.append(")", style="dim")
    if tier.per_tier:
        t.append("\nThis run per tier", style="bold")
        t.append(" (decode lines right after a switch left out): ", style="dim")
        parts = []
        for st in tier.per_tier:
            rate = f" · rate {pct(st.accept_rate)}" if st.accept_rate is not None else ""
            parts.append(f"steps {st.speculative_num_steps}: τ {num(st.accept_length, 2)}{rate} · "
                         f"{num(st.output_tok_s, 0)} tok/s · {pct(st.share)} of rounds")
        t.append("  │  ".join(parts))
    elif not tier.log:
        t.append("\nPer-tier figures need the server's log: launch the profile from specdash "
                 "(attached servers show the tier only).", style="dim")
    return t


def tier_series(view: ViewState) -> Series | None:
    """The tier history as a step line in accept-length units: ``draft tokens`` (steps + 1, the
    most a chain round can accept) at each moment; None when not adaptive or not yet known."""
    tier = view.snapshot.tier
    if tier is None or not tier.adaptive or not tier.history:
        return None
    now = view.snapshot.taken_at
    xs: list[float] = []
    ys: list[float] = []
    for h in tier.history:
        y = float(h.draft_tokens if h.draft_tokens is not None else h.steps + 1)
        if ys:
            xs.append(h.t - now)
            ys.append(ys[-1])
        xs.append(h.t - now)
        ys.append(y)
    xs.append(0.0)
    ys.append(ys[-1])
    return Series("tier: steps + 1", tuple(xs), tuple(ys), "yellow")


def positions_text(view: ViewState) -> Text | None:
    """The run's acceptance by draft position (``accept_by_position`` of the RUN: P(position i accepted |
    the round reached it)) as one line; None when the run has none."""
    rows = [p for p in view.snapshot.run.get("accept_by_position") or [] if isinstance(p, dict)
            and p.get("position") is not None]
    if not rows:
        return None
    t = Text()
    t.append("Accept by draft position", style="bold")
    src = view.snapshot.run.get("accept_by_position_source")
    t.append(f" ({src}): " if src else ": ", style="dim")
    for k, p in enumerate(sorted(rows, key=lambda p: p["position"])):
        if k:
            t.append(" │ ", style="dim")
        t.append(f"{p['position']} ", style="dim")
        t.append(pct(p.get("rate")), style="bold cyan")
    return t


def compact_numbers(view: ViewState) -> Text:
    """The headline numbers for a narrow or short terminal: label / value pairs, three to a line (nvitop's
    compact layout), every value a few characters.  Laid out by hand in fixed columns (72 characters: an
    80-column terminal's panel), so every Rich release draws the same text (a grid of min-width columns is
    laid out differently by Rich 14 and 15)."""
    n = live_numbers(view)
    base = view.baseline_tok_s
    run_tok = output_tok_s(view.snapshot.run)
    speed = f" ×{run_tok / base:.2f}" if base and run_tok else ""
    acc = "bold red" if view.collapsed else "bold cyan"
    widths = (9, 10, 11, 14, 11, 12)
    ms = " ms"
    rows = [
        [("tok/s srv", "dim"), (n["server_tok_s"], "bold green"),
         ("TTFT p50/90", "dim"), (f"{n['ttft'].removesuffix(ms)} / {n['ttft_p90']}", "bold"),
         ("accept len", "dim"), (n["accept_length"], acc)],
        [("tok/s run", "dim"), (n["run_tok_s"] + speed, "bold green"),
         ("TPOT p50/90", "dim"), (f"{n['tpot'].removesuffix(ms)} / {n['tpot_p90']}", "bold"),
         ("accept rate", "dim"), (n["accept_rate"], acc)],
        [("req tok/s", "dim"), (n["request_tok_s"], ""), ("ITL p50", "dim"), (n["itl"], ""),
         ("τ win / srv", "dim"), (f"{n['window_accept_length']} / {n['server_accept_length']}", "")],
        [("run/queue", "dim"), (f"{n['running']} / {n['queued']}", ""), ("requests", "dim"),
         (f"{n['requests']} ok, {n['failed']} fail", ""), ("run", "dim"), (view.snapshot.run_label or DASH, "")],
    ]
    out = Text(no_wrap=True, overflow="ellipsis")
    for r, cells in enumerate(rows):
        if r:
            out.append("\n")
        for c, ((value, style), w) in enumerate(zip(cells, widths)):
            value = str(value)
            cell = value if len(value) <= w else value[: w - 1] + "…"
            out.append(cell, style=style or None)
            if c < len(cells) - 1:
                out.append(" " * (w - len(cell) + 1))
    return out


class StatTiles(Static):
    """The headline numbers (a grid of tiles; label / value pairs when ``compact``)."""

    def show(self, view: ViewState, compact: bool = False) -> None:
        """Render the tiles for ``view``."""
        if compact:
            self.update(compact_numbers(view))
            return
        n = live_numbers(view)
        base = view.baseline_tok_s
        run_tok = output_tok_s(view.snapshot.run)
        label = view.baseline_label
        speed = f"×{run_tok / base:.2f} vs baseline {base:.0f} {label}".strip() if base and run_tok else (
            f"baseline {base:.0f} tok/s {label}".strip() if base else (label or "no baseline run known"))
        grid = PlainTable.grid(expand=True, padding=(0, 2))
        for _ in range(6):
            grid.add_column(ratio=1)
        m = view.snapshot.latest_metrics
        src = f"Δ {m.tok_s_source} / s" if m else "from /metrics"
        grid.add_row(
            _tile("Output tok/s (server)", n["server_tok_s"], src, "bold green"),
            _tile("Output tok/s (run)", n["run_tok_s"], speed, "bold green"),
            _tile("Per-request tok/s p50", n["request_tok_s"], f"{n['requests']} done · {n['failed']} failed"),
            _tile("TTFT p50", n["ttft"], f"p90 {n['ttft_p90']}"),
            _tile("TPOT p50", n["tpot"], f"p90 {n['tpot_p90']}"),
            _tile("Running / queued", f"{n['running']} / {n['queued']}", "requests on the server"),
        )
        grid.add_row(
            _tile("Accept length (run)", n["accept_length"], "incl. bonus token",
                  "bold cyan" if not view.collapsed else "bold red"),
            _tile("Accept rate (run)", n["accept_rate"], "bonus excluded", "bold cyan"),
            _tile("Accept len (window)", n["window_accept_length"], "last decode-log window"),
            _tile("Accept rate (window)", n["window_accept_rate"], "last decode-log window"),
            _tile("Accept len (server)", n["server_accept_length"], "Δgen tokens ÷ Δverify calls"),
            _tile("Run", view.snapshot.run_label or DASH, f"ITL p50 {n['itl']}"),
        )
        self.update(grid)


class LivePanel(Vertical):
    """Numbers on top; throughput, acceptance, histogram and queue charts below."""

    def compose(self) -> ComposeResult:
        yield StatTiles(id="live-stats")
        yield Static("", id="live-positions")
        yield Static("", id="live-tier")
        yield Static(Text(ACCEPT_DEFINITIONS), id="live-definitions")
        with Horizontal(classes="chart-row"):
            yield TimeChart("Output tok/s", "tok/s", id="chart-throughput")
            yield TimeChart("Accept length (incl. bonus)", "tokens/round", id="chart-accept", ymin=None)
        with Horizontal(classes="chart-row"):
            yield HistogramChart(id="chart-histogram")
            yield TimeChart("Requests running / queued", "requests", id="chart-requests")

    def show(self, view: ViewState, *, charts: bool = True, compact: bool = False) -> None:
        """Update the numbers (and, when ``charts``, the charts) from ``view``; ``compact``: the narrow
        terminal's label / value layout."""
        self.query_one(StatTiles).show(view, compact)
        self.set_class(view.collapsed, "-collapsed")
        pos = positions_text(view)
        pbox = self.query_one("#live-positions", Static)
        pbox.display = pos is not None
        if pos is not None:
            pbox.update(pos)
        tier = tier_text(view)
        box = self.query_one("#live-tier", Static)
        box.display = tier is not None
        if tier is not None:
            box.update(tier)
        if not charts:
            return
        snap = view.snapshot
        now = snap.taken_at
        ms = [m for m in snap.metrics if m.tok_s is not None]
        thr = [Series("server tok/s", tuple(m.t - now for m in ms), tuple(m.tok_s for m in ms), "green")]
        rq = [r for r in snap.requests if r.ok and r.tok_s]
        if rq:
            thr.append(Series("per request", tuple(r.t - now for r in rq), tuple(r.tok_s for r in rq), "cyan",
                              scatter=True))
        base = view.baseline_tok_s
        self.query_one("#chart-throughput", TimeChart).show(
            thr, base, f"baseline {base:.0f} tok/s {view.baseline_label}".strip() if base else "")
        acc: list[Series] = []
        dec = [d for d in snap.decode if d.accept_length is not None]
        if dec:
            acc.append(Series("log window", tuple(d.t - now for d in dec), tuple(d.accept_length for d in dec),
                              "magenta"))
        else:
            mw = [m for m in snap.metrics if m.accept_length]
            if mw:
                acc.append(Series("window", tuple(m.t - now for m in mw), tuple(m.accept_length for m in mw),
                                  "magenta"))
        ts = tier_series(view)
        if ts is not None:
            acc.append(ts)
        ra = [r for r in snap.requests if r.accept_length]
        if ra:
            acc.append(Series("per request", tuple(r.t - now for r in ra), tuple(r.accept_length for r in ra),
                              "cyan", scatter=True))
        run_al = snap.run.get("accept_length")
        self.query_one("#chart-accept", TimeChart).show(acc, run_al, f"run τ {run_al:.2f}" if run_al else "")
        hist = list(snap.run.get("accept_histogram") or [])
        steps = (snap.server_info or {}).get("speculative_num_steps")
        if hist and isinstance(steps, int) and len(hist) < steps + 1:
            hist += [0] * (steps + 1 - len(hist))  # k = 0 … steps, so a collapse shows as one bar at 0
        self.query_one(HistogramChart).show(hist)
        mr = [m for m in snap.metrics if m.running is not None]
        qs = [Series("running", tuple(m.t - now for m in mr), tuple(m.running for m in mr), "green"),
              Series("queued", tuple(m.t - now for m in mr), tuple(m.queued or 0.0 for m in mr), "yellow")]
        self.query_one("#chart-requests", TimeChart).show(qs)
