"""The Log panel: the server log tail, decode-batch lines highlighted, warnings, errors,
silent adjustments and skipped weights marked."""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import RichLog, Static

from specdash.collect.live import LogEntry
from specdash.tui.state import ViewState

#: kind → (margin mark, style of the line).
KIND_STYLE = {
    "decode": ("▸ ", "cyan"),
    "prefill": ("  ", "blue"),
    "ready": ("✔ ", "bold green"),
    "adjustment": ("↺ ", "bold yellow"),
    "warning": ("▲ ", "yellow"),
    "error": ("✖ ", "bold red"),
    "weight_skip": ("⚠ ", "bold red"),
    "other": ("  ", ""),
}
COUNTED = (("decode", "decode batches"), ("warning", "warnings"), ("error", "errors"),
           ("adjustment", "silent adjustments"), ("weight_skip", "skipped weights"))


_DATE = re.compile(r"^\[\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d(?:\.\d+)?)")


def log_line(entry: LogEntry) -> Text:
    """One styled log line with its margin mark (the date of SGLang's prefix is dropped,
    the time kept, so more of the line fits)."""
    mark, style = KIND_STYLE.get(entry.kind, ("  ", ""))
    t = Text(mark, style=style or "dim")
    t.append(_DATE.sub(r"[\1", entry.text, count=1), style=style)
    return t


class LogPanel(Vertical):
    """A counts line and the tail (appended incrementally: each line is written once)."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._last_seq = 0

    def reset(self) -> None:
        """Forget the shown lines (a new server was launched)."""
        self._last_seq = 0
        if self.is_mounted:
            self.query_one(RichLog).clear()

    def compose(self) -> ComposeResult:
        yield Static(id="log-counts")
        yield RichLog(id="log-tail", max_lines=2000, wrap=False, highlight=False, markup=False)

    def show(self, view: ViewState) -> None:
        """Append lines newer than the last shown and update the counts."""
        snap = view.snapshot
        counts = snap.log_counts
        t = Text()
        if view.mode == "attach" and not snap.log:
            t.append("attached: specdash did not start this server, so its log is not available here",
                     style="dim")
        else:
            for kind, label in COUNTED:
                mark, style = KIND_STYLE[kind]
                n = counts.get(kind, 0)
                t.append(f"{mark}{n} {label}   ", style=(style if n else "dim"))
        self.query_one("#log-counts", Static).update(t)
        self.set_class(bool(counts.get("error") or counts.get("weight_skip")), "-errors")
        log = self.query_one(RichLog)
        if snap.log and snap.log[-1].seq < self._last_seq:  # a new server: start over
            log.clear()
            self._last_seq = 0
        for e in snap.log:
            if e.seq > self._last_seq:
                log.write(log_line(e))
                self._last_seq = e.seq
