"""What the panels draw: one immutable :class:`ViewState` per redraw (no Textual import).

The app assembles it on its redraw timer from the session (or, in snapshot tests and
screenshots of frozen data, takes a fixed one), and every panel renders from it alone.
The reports it carries are typed by what the panels read of them (:class:`PreflightReport`,
:class:`VerificationReport`), which the real reports and the frozen test data both have.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from specdash.collect.snapshot import LiveSnapshot, empty_snapshot
from specdash.tui.session import LaunchInfo, LoadStatus, ServerState

if TYPE_CHECKING:
    from specdash.advisor import Advice
    from specdash.eagle3.findings import Finding
    from specdash.profile import Profile
    from specdash.tui.livetune import TuneStatus


class PreflightReport(Protocol):
    """What the launch panel reads of a preflight report (a
    :class:`~specdash.eagle3.rules.DoctorReport`): the judged release, its source, the
    findings, whether any is an error."""

    sglang_version: str
    version_source: str
    findings: list[Finding]

    @property
    def has_errors(self) -> bool: ...

    def codes(self, severity: str | None = None) -> list[str]: ...


class VerificationReport(Protocol):
    """What the banner and panels read of post-launch verification: a
    :class:`~specdash.eagle3.verify.VerifyReport` (``status`` ok | failed | skipped |
    waiting) or a :class:`~specdash.tui.verification.FailedVerification` (``skipped``, with the
    error).  ``acceptance`` / ``accept_length`` / ``tokens`` / ``min_tokens`` / ``error``
    are read when present."""

    status: str
    findings: list[Finding]


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
    ``launch``, ``attach`` or ``demo``; ``startup_log``: log lines until ready; ``tune``: the
    dashboard's live tune (None before one started); ``sweep``: the newest concurrency sweep of the
    profile (``specdash --bench --sweep``'s ``sweep.json``), or None.
    """

    snapshot: LiveSnapshot = field(default_factory=empty_snapshot)
    server_state: ServerState = ServerState.IDLE
    state_detail: str = ""
    profile: Profile | None = None
    profile_error: str | None = None
    preflight: PreflightReport | None = None
    launch: LaunchInfo | None = None
    verification: VerificationReport | None = None
    load: LoadStatus = field(default_factory=LoadStatus)
    advice: Advice | None = None
    advice_note: str = "Suggestions appear once a speculative run has measurements (press g or o to load)."
    baseline_tok_s: float | None = None
    baseline_label: str = ""
    mode: str = "launch"
    url: str | None = None
    startup_log: tuple[str, ...] = ()
    now: float = 0.0
    tune: TuneStatus | None = None
    sweep: dict | None = None

    @property
    def simulated(self) -> bool:
        """True for a simulator-backed session (profile launcher ``sim`` or ``/server_info``)."""
        if self.snapshot.simulated:
            return True
        prof = self.profile
        return bool(prof is not None and prof.server.launcher == "sim")

    @property
    def verification_findings(self) -> list[Finding]:
        """The post-launch findings (empty when none or not verified yet)."""
        return list(getattr(self.verification, "findings", None) or [])

    @property
    def collapsed(self) -> bool:
        """True when verification reported a collapse (VERIFY_COLLAPSE as an error: a wiring
        fault, not tuning); an UNKNOWN acceptance (the same code as a warning) is not one."""
        from specdash.tui.format import finding_get

        return any(finding_get(f, "code") == "VERIFY_COLLAPSE" and finding_get(f, "severity") == "error"
                   for f in self.verification_findings)


def startup_lines(snap: LiveSnapshot) -> tuple[str, ...]:
    """The launch panel's start-up log: lines up to (and including) the ready line, the last
    40 of them, decode / prefill batch lines left out."""
    out = []
    for e in snap.log:
        if e.kind in ("decode", "prefill"):
            continue
        out.append(e.text)
        if e.kind == "ready":
            break
    return tuple(out[-40:])
