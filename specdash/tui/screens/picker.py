"""The profile picker: every profile in the user's directory and the presets, with a preview."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option


def profile_preview(path: Path) -> Text:
    """A few lines about a profile file (read with :func:`specdash.profile.files.read_toml`: bounded, any
    nesting; invalid files say why)."""
    from specdash.profile import ProfileError
    from specdash.profile.files import read_toml

    t = Text()
    try:
        data = read_toml(path)
    except ProfileError as exc:  # e.g. a file that is not UTF-8, a FIFO, values nested too deep
        return Text(f"cannot read: {exc}", style="red")
    t.append(str(data.get("name", path.stem)), style="bold")
    if data.get("description"):
        t.append(f"\n{data['description']}")
    srv = data.get("server") if isinstance(data.get("server"), dict) else {}
    t.append(f"\n\nlauncher  {srv.get('launcher', 'sglang')}", style="dim")
    t.append(f"\nmodel     {srv.get('model_path', '?')}", style="dim")
    if srv.get("tp_size"):
        t.append(f"\ntp        {srv['tp_size']}", style="dim")
    sp = data.get("speculative") if isinstance(data.get("speculative"), dict) else {}
    if sp.get("algorithm"):
        t.append(f"\n\n{sp['algorithm']} steps {sp.get('num_steps', 'auto')} · topk {sp.get('eagle_topk', 'auto')}"
                 f" · draft tokens {sp.get('num_draft_tokens', 'auto')}", style="cyan")
        if sp.get("draft_model_path"):
            t.append(f"\ndraft     {sp['draft_model_path']}", style="dim")
    else:
        t.append("\n\nno speculation (baseline)", style="cyan")
    t.append(f"\n\n{path}", style="dim italic")
    return t


class ProfilePicker(ModalScreen[str | None]):
    """Choose a profile; dismisses with its path (str) or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="picker-cancel", tooltip="Close the picker"),
    ]

    def __init__(self, profiles: list[tuple[str, Path]], *, user_dir: Path | None = None,
                 current: str | None = None) -> None:
        super().__init__(classes="dialog")
        self.profiles = profiles
        self.user_dir = user_dir
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box picker-box"):
            yield Label("Pick a profile (enter to choose, escape to close)", classes="dialog-question")
            with Horizontal():
                opts = []
                for name, path in self.profiles:
                    where = "user" if self.user_dir and self.user_dir in path.parents else "preset"
                    label = Text(name)
                    label.append(f"  {where}", style="dim")
                    opts.append(Option(label, id=str(path)))
                yield OptionList(*opts, id="picker-list")
                yield Static(id="picker-preview")

    def on_mount(self) -> None:
        """Highlight the current profile (or the first)."""
        ol = self.query_one(OptionList)
        idx = next((i for i, (n, _) in enumerate(self.profiles) if n == self.current), 0)
        if self.profiles:
            ol.highlighted = idx
            self._preview(self.profiles[idx][1])
        else:
            self.query_one("#picker-preview", Static).update(Text("no profiles found"))

    def _preview(self, path: Path) -> None:
        self.query_one("#picker-preview", Static).update(profile_preview(path))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """Show the highlighted profile."""
        if event.option.id:
            self._preview(Path(event.option.id))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Dismiss with the chosen path."""
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Escape: keep the current profile."""
        self.dismiss(None)
