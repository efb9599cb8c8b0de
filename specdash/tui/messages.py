"""Typed Textual messages: what the session tells the app, and what the advisor worker hands back.

The :class:`~specdash.tui.session.Session` is Textual-free and talks to a
:class:`~specdash.tui.session.SessionListener`; :class:`SessionMessages` is the app's
listener, turning each call into one of these messages on the app's queue (so handlers
run on the app's own schedule, never inside the session's call).  Handler names follow
Textual's rule: ``ServerStateChanged`` → ``on_server_state_changed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from textual.app import App

    from specdash.advisor import Advice
    from specdash.tui.livetune import TuneStatus
    from specdash.tui.session import LoadStatus, ServerState
    from specdash.tui.verification import Verification


class ServerStateChanged(Message):
    """The launched / attached server changed state.

    Attributes:
        state: the new :class:`~specdash.tui.session.ServerState`.
        detail: a human sentence (``"demo-eagle3 ready in 2.4 s on http://…"``).
    """

    def __init__(self, state: ServerState, detail: str) -> None:
        super().__init__()
        self.state: ServerState = state
        self.detail: str = detail


class VerificationChanged(Message):
    """Post-launch verification produced (or updated) a report.

    Attributes:
        report: a :class:`~specdash.eagle3.verify.VerifyReport`, or a
            :class:`~specdash.tui.verification.FailedVerification` when verification itself raised.
    """

    def __init__(self, report: Verification) -> None:
        super().__init__()
        self.report: Verification = report


class LoadChanged(Message):
    """The load driver started, progressed or stopped.

    Attributes:
        status: the driver's :class:`~specdash.tui.session.LoadStatus` (the live object).
    """

    def __init__(self, status: LoadStatus) -> None:
        super().__init__()
        self.status: LoadStatus = status


class AdviceReady(Message):
    """The advisor worker finished.

    Attributes:
        advice: the :class:`~specdash.advisor.Advice`, or None when there is none yet.
        note: why there is none (empty when ``advice`` is set).
    """

    def __init__(self, advice: Advice | None, note: str) -> None:
        super().__init__()
        self.advice: Advice | None = advice
        self.note: str = note


class TuneChanged(Message):
    """The dashboard's live tune progressed, finished or stopped.

    Attributes:
        status: the :class:`~specdash.tui.livetune.TuneStatus` (the live object).
    """

    def __init__(self, status: TuneStatus) -> None:
        super().__init__()
        self.status: TuneStatus = status


class SessionMessages:
    """The app's :class:`~specdash.tui.session.SessionListener`: each call posts a message."""

    def __init__(self, app: App) -> None:
        self.app = app

    def server_state(self, state: ServerState, detail: str) -> None:
        self.app.post_message(ServerStateChanged(state, detail))

    def verification(self, report: Verification) -> None:
        self.app.post_message(VerificationChanged(report))

    def load_state(self, status: LoadStatus) -> None:
        self.app.post_message(LoadChanged(status))
