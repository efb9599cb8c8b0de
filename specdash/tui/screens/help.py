"""The ``?`` help screen: every key from the registry, grouped, with its help text."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specdash.tui.format import ACCEPT_DEFINITIONS, PlainTable
from specdash.tui.keys import KEYS, key_display


def help_table() -> PlainTable:
    """Keys grouped as in the registry."""
    tab = PlainTable(box=None, padding=(0, 2), show_edge=False, expand=True)
    tab.add_column("key", style="bold cyan", width=14)
    tab.add_column("id", style="dim", width=18)
    tab.add_column("what it does", ratio=1)
    groups: dict[str, list] = {}  # one section per group, in first-seen order
    for k in KEYS:
        groups.setdefault(k.group, []).append(k)
    for group, ks in groups.items():
        tab.add_row(Text(group, style="bold underline"), "", "")
        for k in ks:
            tab.add_row(key_display(k), k.id, k.help)
    return tab


class HelpScreen(ModalScreen[None]):
    """Keys, definitions and where things are written."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "close", "Close", id="help-close", tooltip="Close the help"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box help-box"):
            yield Static(Text("specdash — keys (ctrl+p opens the command palette with the same actions)",
                              style="bold"))
            yield Static(help_table())
            yield Static(Text("\nDefinitions: " + ACCEPT_DEFINITIONS +
                              "\nServer tok/s = Δ sglang:realtime_tokens_total{mode=decode} per second "
                              "(/metrics, 1 s polls); TTFT / TPOT / ITL from this run's streamed requests."
                              "\nEvery finished request is appended to the run directory's requests.jsonl; "
                              "the server log goes to server.log beside it.", style="dim"))

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
