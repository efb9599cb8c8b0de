"""What the panels draw: one immutable :class:`ViewState` per redraw (no Textual import).

The app assembles it on its redraw timer from the session (or, in snapshot tests and
screenshots of frozen data, takes a fixed one), and every panel renders from it alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specdash.collect.live import LiveSnapshot, empty_snapshot
from specdash.tui.session import LaunchInfo, LoadStatus, ServerState


@dataclass(frozen=True)
class ViewState:
    """Everything on screen at one redraw.

    ``snapshot``: the collector's :class:`LiveSnapshot`; ``server_state``/``state_detail``:
    the launch state; ``profile``: the chosen profile (None in attach mode or before the
    picker); ``profile_error``: why it could not be read or checked; ``preflight``: the
    doctor's report; ``launch``: argv/env/asked vs effective of the current (or previewed)
    launch; ``verification``: the post-launch report; ``load``: the load driver;
    ``advice``/``advice_note``: the advisor's output or why there is none yet;
    ``baseline_tok_s``: a known no-speculation throughput (a chart line); ``mode``:
    ``launch``, ``attach`` or ``demo``; ``startup_log``: log lines until ready.
    """

    snapshot: LiveSnapshot = field(default_factory=empty_snapshot)
    server_state: ServerState = ServerState.IDLE
    state_detail: str = ""
    profile: Any = None
    profile_error: str | None = None
    preflight: Any = None
    launch: LaunchInfo | None = None
    verification: Any = None
    load: LoadStatus = field(default_factory=LoadStatus)
    advice: Any = None
    advice_note: str = "Suggestions appear once a speculative run has measurements (press g or o to load)."
    baseline_tok_s: float | None = None
    baseline_label: str = ""
    mode: str = "launch"
    url: str | None = None
    startup_log: tuple[str, ...] = ()
    now: float = 0.0

    @property
    def simulated(self) -> bool:
        """True for a simulator-backed session (profile launcher ``sim`` or ``/server_info``)."""
        if self.snapshot.simulated:
            return True
        prof = self.profile
        return bool(prof is not None and prof.server.launcher == "sim")

    @property
    def verification_findings(self) -> list:
        """The post-launch findings (empty when none or not verified yet)."""
        return list(getattr(self.verification, "findings", None) or [])

    @property
    def collapsed(self) -> bool:
        """True when verification reported a collapse (VERIFY_COLLAPSE as an error: a wiring
        fault, not tuning); an UNKNOWN acceptance (the same code as a warning) is not one."""
        from specdash.tui.format import finding_get

        return any(finding_get(f, "code") == "VERIFY_COLLAPSE" and finding_get(f, "severity") == "error"
                   for f in self.verification_findings)
