"""The one registry of the dashboard's key bindings (posting's rule: id + help per binding).

Every :class:`KeySpec` becomes a Textual :class:`~textual.binding.Binding` (with ``id`` and the
help text as its footer ``tooltip``) *and* a command-palette entry, so the footer, the palette
and the ``?`` help screen can never disagree.  A user keymap can rebind any of them by id
(Textual's ``App.set_keymap``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding


@dataclass(frozen=True)
class KeySpec:
    """One binding: ``id`` (stable, for keymaps), ``key``, the app ``action``, a short
    ``description`` (footer, palette title) and a ``help`` sentence (tooltip, palette help,
    ``?`` screen); ``show`` puts it in the footer; ``group`` orders the help screen."""

    id: str
    key: str
    action: str
    description: str
    help: str
    show: bool = True
    group: str = "General"
    priority: bool = False

    def binding(self) -> Binding:
        """The Textual binding for this spec."""
        return Binding(self.key, self.action, self.description, show=self.show, tooltip=self.help,
                       id=self.id, priority=self.priority)


KEYS: tuple[KeySpec, ...] = (
    KeySpec("launch", "l", "launch", "Launch",
            "Launch the chosen profile's server (after preflight; asks before launching despite errors)",
            group="Server"),
    KeySpec("stop", "s", "stop_server", "Stop",
            "Stop the load and the server specdash started (SIGTERM, then SIGKILL of the whole tree)",
            group="Server"),
    KeySpec("restart", "r", "restart", "Restart",
            "Stop and launch again with the current settings", group="Server"),
    KeySpec("tweak", "t", "tweak", "Tweak",
            "Edit steps / topk / draft tokens and the other speculative flags, see asked vs effective, "
            "then relaunch", group="Tune"),
    KeySpec("live-tune", "a", "live_tune", "Live tune",
            "Tune steps / topk / draft tokens on this profile: a baseline launch, then SGLang adaptive "
            "launches that measure two chain step tiers each at the chosen load (specdash tune --live); "
            "stops the running server first, saves the winner as a preset", group="Tune"),
    KeySpec("save", "w", "save_preset", "Save preset",
            "Save the current settings as a new preset TOML (source comments kept; never overwrites "
            "without asking)", group="Tune"),
    KeySpec("load-once", "g", "load_once", "Run suite",
            "Send the chosen suite once at the chosen concurrency (records go to the run directory)",
            group="Load"),
    KeySpec("load-loop", "o", "load_loop", "Loop load",
            "Start or stop looping the suite at the chosen concurrency", group="Load"),
    KeySpec("concurrency-up", "plus,equals_sign", "concurrency(1)", "Conc +",
            "Raise the load concurrency (applies to the next load)", show=False, group="Load"),
    KeySpec("concurrency-down", "minus", "concurrency(-1)", "Conc −",
            "Lower the load concurrency (applies to the next load)", show=False, group="Load"),
    KeySpec("suite", "u", "choose_suite", "Suite", "Choose the suite the load driver sends",
            show=False, group="Load"),
    KeySpec("profile", "p", "choose_profile", "Profile",
            "Pick another profile (profiles/ and your profile directory)", group="Server"),
    KeySpec("tab-launch", "1", "show_tab('launch')", "Launch tab",
            "Launch panel: argv, env, asked vs effective, preflight findings, start-up log",
            show=False, group="Panels"),
    KeySpec("tab-live", "2", "show_tab('live')", "Live tab",
            "Live panel: tok/s, TTFT, TPOT, accept length / rate, histogram, charts", show=False,
            group="Panels"),
    KeySpec("tab-gpu", "3", "show_tab('gpu')", "GPU tab",
            "GPU panel: per-device memory, utilisation and the server's processes", show=False,
            group="Panels"),
    KeySpec("tab-log", "4", "show_tab('log')", "Log tab",
            "Log panel: server log tail with decode lines, warnings and errors marked", show=False,
            group="Panels"),
    KeySpec("tab-advice", "5", "show_tab('advice')", "Suggestions tab",
            "Suggestions from the advisor once measurements exist", show=False, group="Panels"),
    KeySpec("log-search", "slash", "log_search", "Search log",
            "Log panel: show only the lines holding a text (case-insensitive; empty = all lines)", show=False,
            group="Log"),
    KeySpec("log-filter", "f", "log_filter", "Filter log",
            "Log panel: cycle the kinds shown — all, warnings and errors, decode batches, adjustments and "
            "skipped weights", show=False, group="Log"),
    KeySpec("log-wrap", "z", "log_wrap", "Wrap log",
            "Log panel: wrap long lines, or cut them at the panel's edge", show=False, group="Log"),
    KeySpec("help", "question_mark", "help", "Help", "Show every key and what it does"),
    KeySpec("quit", "q", "quit", "Quit",
            "Quit; stops what specdash started (asks first while a server is running)"),
    KeySpec("quit-ctrl", "ctrl+q", "quit", "Quit", "Quit (same as q)", show=False, priority=True),
)


def bindings() -> list[Binding]:
    """All bindings, in registry order."""
    return [k.binding() for k in KEYS]


def by_id(key_id: str) -> KeySpec:
    """The spec with ``id`` (KeyError when unknown)."""
    for k in KEYS:
        if k.id == key_id:
            return k
    raise KeyError(key_id)


def key_display(spec: KeySpec) -> str:
    """How a key is written on the help screen (``?``, ``+``, ``ctrl+q``)."""
    names = {"question_mark": "?", "plus": "+", "equals_sign": "=", "minus": "-", "slash": "/"}
    return " / ".join(names.get(k, k) for k in spec.key.split(","))


#: The keys the compact footer names, in order (the full list is behind ``?``).
COMPACT_KEYS = ("launch", "stop", "load-loop", "tweak", "log-search", "help", "quit")


def key_line() -> Text:
    """The one-line key footer of a narrow terminal (the most used keys, then ``?`` for the rest): what
    Textual's footer cannot fit below ~100 columns."""
    by_id = {k.id: k for k in KEYS}
    t = Text(no_wrap=True, overflow="ellipsis")
    for i, kid in enumerate(COMPACT_KEYS):
        k = by_id.get(kid)
        if k is None:
            continue
        if i:
            t.append("  ")
        t.append(key_display(k).split(" / ")[0], style="bold reverse")
        t.append(" " + k.description.lower())
    return t
