"""The Log panel: the server log tail, decode-batch lines highlighted, warnings, errors,
silent adjustments and skipped weights marked; a filter by kind (``f``), a search (``/``: only the lines
holding the text, the text highlighted) and line wrapping (``z``)."""

from __future__ import annotations

import re
from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, RichLog, Static

from specdash.collect.snapshot import LogEntry
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
SHORT = {"decode": "decode", "warning": "warn", "error": "err", "adjustment": "adjusted", "weight_skip": "skipped"}
"""The counts' labels on a narrow terminal."""


#: The log filters ``f`` cycles through: (name, kinds shown; None = every line).
FILTERS: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("all lines", None),
    ("warnings and errors", frozenset({"warning", "error", "weight_skip"})),
    ("decode batches", frozenset({"decode"})),
    ("adjustments and skipped weights", frozenset({"adjustment", "weight_skip"})),
)
KEEP = 2000
"""Log lines the panel keeps (and can filter or search)."""

_DATE = re.compile(r"^\[\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d(?:\.\d+)?)")


def log_line(entry: LogEntry) -> Text:
    """One styled log line with its margin mark (the date of SGLang's prefix is dropped,
    the time kept, so more of the line fits)."""
    mark, style = KIND_STYLE.get(entry.kind, ("  ", ""))
    t = Text(mark, style=style or "dim")
    t.append(_DATE.sub(r"[\1", entry.text, count=1), style=style)
    return t


class LogPanel(Vertical):
    """A counts line, a search box (hidden until ``/``) and the tail: new lines are appended as they come;
    a change of filter, search or wrapping writes the kept lines again."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._last_seq = 0
        self._entries: deque[LogEntry] = deque(maxlen=KEEP)
        self.filter_index = 0
        self.search = ""
        self.wrap = False
        self._counts = Text()

    def reset(self) -> None:
        """Forget the shown lines (a new server was launched)."""
        self._last_seq = 0
        self._entries.clear()
        if self.is_mounted:
            self.query_one(RichLog).clear()

    def compose(self) -> ComposeResult:
        yield Static(id="log-counts")
        yield Input(placeholder="show only lines holding… (Enter: apply, Esc: all lines)", id="log-search")
        yield RichLog(id="log-tail", max_lines=KEEP, wrap=False, highlight=False, markup=False)

    def on_mount(self) -> None:
        self.query_one("#log-search", Input).display = False

    # -- what is shown ------------------------------------------------------------------------------
    def shows(self, entry: LogEntry) -> bool:
        """Whether ``entry`` passes the filter and the search."""
        kinds = FILTERS[self.filter_index][1]
        if kinds is not None and entry.kind not in kinds:
            return False
        return not self.search or self.search.lower() in entry.text.lower()

    def _line(self, entry: LogEntry) -> Text:
        t = log_line(entry)
        if self.search:
            t.highlight_words([self.search], style="reverse", case_sensitive=False)
        return t

    def _rewrite(self) -> None:
        log = self.query_one(RichLog)
        log.clear()
        log.wrap = self.wrap
        for e in self._entries:
            if self.shows(e):
                log.write(self._line(e))
        self._show_counts()

    def _show_counts(self) -> None:
        t = self._counts.copy()
        state = []
        if self.filter_index:
            state.append(f"showing {FILTERS[self.filter_index][0]} (f)")
        if self.search:
            state.append(f"search “{self.search}” (/)")
        if self.wrap:
            state.append("wrapped (z)")
        if state:
            t.append(" · ".join(state), style="bold yellow")
        self.query_one("#log-counts", Static).update(t)

    # -- the keys -----------------------------------------------------------------------------------
    def cycle_filter(self) -> str:
        """Show the next kind of lines (:data:`FILTERS`); returns its name."""
        self.filter_index = (self.filter_index + 1) % len(FILTERS)
        self._rewrite()
        return FILTERS[self.filter_index][0]

    def toggle_wrap(self) -> bool:
        """Wrap long lines or cut them; returns whether they wrap now."""
        self.wrap = not self.wrap
        self._rewrite()
        return self.wrap

    def open_search(self) -> None:
        """Show the search box with the current text, focused."""
        box = self.query_one("#log-search", Input)
        box.display = True
        box.value = self.search
        box.focus()

    def set_search(self, text: str) -> None:
        """Show only the lines holding ``text`` (case-insensitive; empty: every line)."""
        self.search = text.strip()
        self._rewrite()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.display = False
        self.set_search(event.value)

    def on_key(self, event) -> None:
        box = self.query_one("#log-search", Input)
        if event.key == "escape" and box.display:
            event.stop()
            box.display = False
            self.set_search("")

    def show(self, view: ViewState) -> None:
        """Append lines newer than the last shown and update the counts."""
        snap = view.snapshot
        counts = snap.log_counts
        t = Text()
        if view.mode == "attach" and not snap.log:
            t.append("attached: specdash did not start this server, so its log is not available here",
                     style="dim")
        else:
            short = self.screen.has_class("-compact")
            for kind, label in COUNTED:
                mark, style = KIND_STYLE[kind]
                n = counts.get(kind, 0)
                t.append(f"{mark}{n} {SHORT[kind] if short else label}{'  ' if short else '   '}",
                         style=(style if n else "dim"))
        self._counts = t
        self._show_counts()
        self.set_class(bool(counts.get("error") or counts.get("weight_skip")), "-errors")
        log = self.query_one(RichLog)
        if snap.log and snap.log[-1].seq < self._last_seq:  # a new server: start over
            log.clear()
            self._entries.clear()
            self._last_seq = 0
        for e in snap.log:
            if e.seq > self._last_seq:
                self._entries.append(e)
                if self.shows(e):
                    log.write(self._line(e))
                self._last_seq = e.seq
