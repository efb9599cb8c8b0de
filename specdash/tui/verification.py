"""Post-launch verification as the dashboard shows it (no Textual import).

The session runs :func:`specdash.eagle3.verify.verify_server` at ready and again when the
collapse watch has seen enough tokens; until then :func:`pending_acceptance` holds the
acceptance judgement back ("waiting"), and :class:`FailedVerification` stands in when
verification itself raised.  Either reaches the UI as a :data:`Verification`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from specdash.eagle3.findings import Finding
    from specdash.eagle3.verify import VerifyReport


@dataclass
class FailedVerification:
    """The verification result when verification itself raised: ``error`` says why,
    ``status`` is ``skipped``, no findings."""

    error: str
    status: str = "skipped"
    findings: list[Finding] = field(default_factory=list)


#: A post-launch verification result as the session hands it to the UI.
Verification: TypeAlias = "VerifyReport | FailedVerification"


def pending_acceptance(report: VerifyReport, seen: int, need: int) -> VerifyReport:
    """``report`` before the collapse watch has seen ``need`` tokens (``seen`` so far):
    acceptance is not judged yet (no VERIFY_COLLAPSE finding, whatever a handful of tokens
    or warm-up log lines said); status ``waiting`` unless another check already failed;
    ``min_tokens`` = ``need`` for the banner.  Speculation off (acceptance ``n/a``): unchanged."""
    if getattr(report, "acceptance", None) == "n/a":
        return report
    findings = [f for f in report.findings if getattr(f, "code", None) != "VERIFY_COLLAPSE"]
    status = "failed" if any(getattr(f, "severity", None) == "error" for f in findings) else "waiting"
    out = replace(report, status=status, findings=findings, acceptance="pending", accept_length=None, tokens=seen)
    out.min_tokens = need  # what the banner says it waits for
    return out
