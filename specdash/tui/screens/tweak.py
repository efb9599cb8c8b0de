"""The tweak form: edit the speculative flags, see what SGLang will really run, then
relaunch, apply or save as a preset."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN", "STANDALONE", "NGRAM")
INT_FIELDS = (("num_steps", "steps"), ("eagle_topk", "topk"), ("num_draft_tokens", "draft tokens"))


@dataclass(frozen=True)
class TweakResult:
    """What the form asked for: ``action`` is ``relaunch``, ``apply`` or ``save``;
    ``changes`` are ``[speculative]`` fields (None = unset / SGLang chooses)."""

    action: str
    changes: dict[str, Any]


def parse_form(values: dict[str, str]) -> dict[str, Any]:
    """Form strings → ``[speculative]`` changes.

    Raises:
        ValueError: a number field holds something that is not a whole number ≥ 0.
    """
    out: dict[str, Any] = {}
    algo = values.get("algorithm") or ""
    out["algorithm"] = None if algo in ("", "none") else algo
    out["draft_model_path"] = values.get("draft_model_path", "").strip() or None
    for key, label in INT_FIELDS:
        raw = values.get(key, "").strip()
        if raw in ("", "auto"):
            out[key] = None
            continue
        if not raw.isdigit():
            raise ValueError(f"{label}: {raw!r} is not a whole number (leave empty for SGLang's choice)")
        out[key] = int(raw)
    out["extra_args"] = shlex.split(values.get("extra_args", ""))
    return out


class TweakScreen(ModalScreen[TweakResult | None]):
    """The form.  ``preview(changes)`` returns a renderable describing the resulting launch
    (asked vs effective, adjustments, rejections, preflight) or raises with a message."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="tweak-cancel", tooltip="Close without changing anything"),
        Binding("ctrl+r", "submit('relaunch')", "Relaunch", id="tweak-relaunch",
                tooltip="Use these settings and relaunch the server"),
        Binding("ctrl+s", "submit('save')", "Save preset", id="tweak-save",
                tooltip="Use these settings and save them as a new preset"),
    ]

    def __init__(self, spec: dict[str, Any], preview: Callable[[dict[str, Any]], Any], *, title: str = "") -> None:
        super().__init__(classes="dialog")
        self.spec = spec
        self.preview_fn = preview
        self.title_text = title

    def compose(self) -> ComposeResult:
        sp = self.spec
        algo = sp.get("algorithm") or "none"
        options = [(Text(a), a) for a in ALGORITHMS] + [(Text("none (no speculation)"), "none")]
        if algo not in ALGORITHMS and algo != "none":
            options.insert(0, (Text(algo), algo))  # the profile's own value, shown verbatim
        with Vertical(classes="dialog-box tweak-box"):
            yield Label(Text(self.title_text or "Tweak the speculative settings"), classes="dialog-question")
            with Grid(id="tweak-grid"):
                yield Label("algorithm")
                yield Select(options, value=algo, allow_blank=False, id="algorithm")
                yield Label("draft model path")
                yield Input(sp.get("draft_model_path") or "", id="draft_model_path")
                for key, label in INT_FIELDS:
                    yield Label(Text(label))
                    v = sp.get(key)
                    yield Input("" if v is None else str(v), placeholder="auto (SGLang chooses)", id=key,
                                restrict=r"[0-9]*")
                yield Label("extra flags")
                yield Input(" ".join(shlex.quote(a) for a in sp.get("extra_args") or []),
                            placeholder="--speculative-attention-mode decode …", id="extra_args")
            yield Static(id="tweak-preview")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Relaunch with these (ctrl+r)", id="relaunch", variant="primary")
                yield Button("Apply", id="apply")
                yield Button("Save as preset… (ctrl+s)", id="save", variant="success")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        """Show the preview of the unchanged settings."""
        self._refresh_preview()

    def values(self) -> dict[str, str]:
        """The raw form values."""
        out = {"algorithm": str(self.query_one("#algorithm", Select).value)}
        for key in ("draft_model_path", "num_steps", "eagle_topk", "num_draft_tokens", "extra_args"):
            out[key] = self.query_one(f"#{key}", Input).value
        return out

    def _refresh_preview(self) -> dict[str, Any] | None:
        target = self.query_one("#tweak-preview", Static)
        try:
            changes = parse_form(self.values())
            target.update(self.preview_fn(changes))
            target.remove_class("-error")
            return changes
        except Exception as exc:  # shown in the form, never raised
            target.update(Group(Text("cannot use these settings:", style="bold red"), Text(str(exc))))
            target.add_class("-error")
            return None

    def on_input_changed(self, event: Input.Changed) -> None:
        """Recompute the preview as the user types."""
        self._refresh_preview()

    def on_select_changed(self, event: Select.Changed) -> None:
        """Recompute the preview when the algorithm changes."""
        self._refresh_preview()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Relaunch / apply / save / cancel."""
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.action_submit(event.button.id)

    def action_submit(self, action: str) -> None:
        """Dismiss with the changes (stays open when they do not parse)."""
        changes = self._refresh_preview()
        if changes is not None:
            self.dismiss(TweakResult(action, changes))

    def action_cancel(self) -> None:
        """Escape: nothing changes."""
        self.dismiss(None)
