"""Small modal dialogs: yes/no confirmation, a one-line text prompt, a list picker.

Questions, hints, labels and choices carry outside text (profile and suite names, paths, leftover
servers' argv): each is shown as :class:`~rich.text.Text`, never parsed as markup."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question; dismisses with True (yes) or False."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes", tooltip="Answer yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no", tooltip="Answer no"),
    ]

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "No", danger: bool = False) -> None:
        super().__init__(classes="dialog")
        self.question = question
        self.yes_label, self.no_label = yes, no
        self.danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Static(Text(self.question), classes="dialog-question")
            with Horizontal(classes="dialog-buttons"):
                yield Button(Text(self.yes_label), id="yes", variant="error" if self.danger else "primary")
                yield Button(Text(self.no_label), id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Dismiss with the pressed button's answer."""
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        """Key answer (y / n / escape)."""
        self.dismiss(value)


class PromptScreen(ModalScreen[str | None]):
    """Ask for one line of text; dismisses with the text or None (cancel)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="prompt-cancel", tooltip="Close without an answer"),
    ]

    def __init__(self, question: str, value: str = "", *, placeholder: str = "", hint: str = "") -> None:
        super().__init__(classes="dialog")
        self.question, self.value, self.placeholder, self.hint = question, value, placeholder, hint

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(Text(self.question), classes="dialog-question")
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")
            if self.hint:
                yield Static(Text(self.hint), classes="dialog-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button("OK", id="ok", variant="primary")
                yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the field = OK."""
        self.dismiss(event.value.strip() or None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """OK returns the text; Cancel returns None."""
        if event.button.id == "ok":
            self.dismiss(self.query_one(Input).value.strip() or None)
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        """Escape: no answer."""
        self.dismiss(None)


class ChoiceScreen(ModalScreen[str | None]):
    """Pick one of ``(id, label)`` choices; dismisses with the id or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="choice-cancel", tooltip="Close without choosing"),
    ]

    def __init__(self, title: str, choices: list[tuple[str, str]], *, current: str | None = None) -> None:
        super().__init__(classes="dialog")
        self.title_text, self.choices, self.current = title, choices, current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label(Text(self.title_text), classes="dialog-question")
            yield OptionList(*[Option(Text(label), id=cid) for cid, label in self.choices], id="choice-list")

    def on_mount(self) -> None:
        """Highlight the current choice."""
        ol = self.query_one(OptionList)
        for i, (cid, _) in enumerate(self.choices):
            if cid == self.current:
                ol.highlighted = i

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Dismiss with the chosen id."""
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        """Escape: nothing chosen."""
        self.dismiss(None)
