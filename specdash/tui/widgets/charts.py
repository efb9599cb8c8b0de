"""plotext charts (textual-plotext): each widget owns its own ``self.plt`` figure.

No global plotext state is touched (no one figure shared by all charts, as dolphie has).
Charts are rebuilt only when :meth:`TimeChart.show` receives new data and are drawn by
Textual when they are visible, so a hidden tab costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual_plotext import PlotextPlot


@dataclass(frozen=True)
class Series:
    """One line of a time chart: ``xs`` in seconds relative to now (≤ 0), ``ys`` values."""

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    color: str = "cyan"
    scatter: bool = False


class TimeChart(PlotextPlot):
    """A chart of values over the last ``window_s`` seconds, with an optional horizontal line
    (e.g. the no-speculation baseline)."""

    DEFAULT_CSS = """
    TimeChart { height: 1fr; min-height: 8; }
    """

    def __init__(self, title: str, ylabel: str = "", *, window_s: float = 120.0, ymin: float | None = 0.0,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.chart_title = title
        self.ylabel = ylabel
        self.max_window_s = self.window_s = window_s
        self.ymin = ymin
        self._key: object = None
        self._draw([], None, "")

    def show(self, series: Sequence[Series], hline: float | None = None, hline_label: str = "") -> None:
        """Replace the chart's data (a no-op when nothing changed)."""
        key = (tuple(series), hline, hline_label, self.size.width, self.size.height)
        if key == self._key:
            return
        self._key = key
        self._draw(series, hline, hline_label)
        self.refresh()

    def _draw(self, series: Sequence[Series], hline: float | None, hline_label: str) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.chart_title)
        plt.xlabel("seconds ago")
        if self.ylabel:
            plt.ylabel(self.ylabel)
        # The x range grows with the data (at least 30 s, at most window_s): a fresh run is not
        # squeezed against the right edge.
        span = max((-min(s.xs) for s in series if s.xs), default=0.0)
        window = min(self.max_window_s, max(30.0, span))
        self.window_s = window
        plt.xlim(-window, 0)
        step = next((st for st in (5, 10, 15, 30, 60, 120) if window / st <= 6), 300)
        ticks = [-k * step for k in range(int(window // step), -1, -1)]
        plt.xticks(ticks, [str(int(t)) for t in ticks])
        ymax = 0.0
        ymin_data = None
        any_data = False
        for s in series:
            pts = [(x, y) for x, y in zip(s.xs, s.ys, strict=False) if x >= -self.window_s and y is not None]
            if not pts:
                continue
            any_data = True
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            ymax = max(ymax, max(ys))
            ymin_data = min(ys) if ymin_data is None else min(ymin_data, min(ys))
            if s.scatter:
                plt.scatter(xs, ys, label=s.label, color=s.color, marker="dot")
            else:
                plt.plot(xs, ys, label=s.label, color=s.color, marker="braille")
        if hline is not None:
            ymax = max(ymax, hline)
            plt.hline(hline, "red")
            plt.text(hline_label or f"baseline {hline:.0f}", -self.window_s * 0.97, hline, color="red",
                     alignment="left")
        if self.ymin is not None:
            plt.ylim(self.ymin, (ymax * 1.15) if ymax > 0 else 1.0)
        elif ymin_data is not None:  # a free axis, but never narrower than 0.5 (no noise magnified)
            lo = min(ymin_data, hline) if hline is not None else ymin_data
            mid, half = (lo + ymax) / 2, max(0.25, (ymax - lo) / 2 * 1.15)
            plt.ylim(mid - half, mid + half)
        if not any_data:
            plt.text("waiting for data…", -self.window_s * 0.5, 0.5 * ((ymax * 1.15) if ymax > 0 else 1.0))


class HistogramChart(PlotextPlot):
    """SGLang's accepted-drafts histogram as bars: bar k = verify rounds that accepted k
    drafts (bonus excluded), shown as a share of all rounds."""

    DEFAULT_CSS = """
    HistogramChart { height: 1fr; min-height: 8; }
    """

    def __init__(self, title: str = "Accepted drafts per verify round (run)", *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.chart_title = title
        self._key: object = None
        self._draw(None)

    def show(self, histogram: Sequence[int] | None) -> None:
        """Replace the histogram (None or empty: a placeholder)."""
        key = (tuple(histogram or ()), self.size.width, self.size.height)
        if key == self._key:
            return
        self._key = key
        self._draw(histogram)
        self.refresh()

    def _draw(self, histogram: Sequence[int] | None) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.chart_title)
        total = sum(histogram or ())
        if not total:
            plt.bar([0], [0])
            plt.text("no speculative requests yet", 0, 0.5)
            plt.ylim(0, 1)
            return
        xs = list(range(len(histogram)))
        shares = [100.0 * c / total for c in histogram]
        plt.bar(xs, shares, color="cyan", width=0.6)
        plt.xticks(xs, [str(x) for x in xs])
        plt.xlabel("drafts accepted (bonus excluded)")
        plt.ylabel("% of rounds")
        plt.ylim(0, max(shares) * 1.15)
