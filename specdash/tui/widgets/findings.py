"""Findings (preflight and post-launch verification) as Rich renderables, and the banner
that puts verification results at the top of every panel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from specdash.tui.format import SEVERITY_MARK, SEVERITY_STYLE, finding_get
from specdash.tui.state import ViewState

#: What each post-launch code means for the person tuning (the VERIFY_* codes of post-launch verification).
VERIFY_MEANING = {
    "VERIFY_COLLAPSE": "accept length ≈ 1: a WIRING FAULT (wrong algorithm, dropped draft weights, capture "
                       "layers) or an untrained draft — not a tuning problem; `specdash draft selftest` separates them",
    "VERIFY_ALGO": "the server runs a different algorithm than the draft needs",
    "VERIFY_ADJUSTED": "SGLang changed steps / topk / draft tokens from what was asked",
    "VERIFY_LOG": "the server log has loader / capture errors or warnings",
}


def render_findings(findings: Sequence[Any], *, empty: str = "no findings", verbose_info: bool = False) -> Group | Text:
    """Findings with their fix, most severe first; errors and warnings also say why (info
    findings only with ``verbose_info``)."""
    if not findings:
        return Text("✔ " + empty, style="green")
    order = {"error": 0, "warning": 1, "info": 2}
    items = sorted(findings, key=lambda f: order.get(str(finding_get(f, "severity", "info")), 3))
    parts = []
    for f in items:
        sev = str(finding_get(f, "severity", "info"))
        t = Text()
        t.append(f"{SEVERITY_MARK.get(sev, '•')} {sev.upper()} ", style=SEVERITY_STYLE.get(sev, ""))
        t.append(str(finding_get(f, "code", "")), style="bold")
        t.append(f"  {finding_get(f, 'message', '')}\n")
        why = finding_get(f, "why") if (verbose_info or sev != "info") else None
        if why:
            t.append("    why: ", style="dim")
            t.append(f"{why}\n")
        fix = finding_get(f, "fix")
        if fix:
            t.append("    fix: ", style="bold green")
            t.append(f"{fix}\n")
        parts.append(t)
    return Group(*parts)


class VerifyBanner(Static):
    """Post-launch verification, shown above the panels.  The icon and colour follow the
    report's status: ``ok`` → ✔ green (warnings listed as warnings), ``failed`` → ✖ red,
    ``skipped`` / ``waiting`` → neutral.  Hidden until a verification exists."""

    def show(self, view: ViewState) -> None:
        """Render the banner for ``view`` (sets ``-ok`` / ``-failed`` / ``-neutral`` / ``-collapsed``)."""
        rep = view.verification
        self.display = rep is not None
        if rep is None:
            return
        self.update(banner_text(rep, view.verification_findings))
        status = str(getattr(rep, "status", "ok"))
        self.set_class(status == "ok", "-ok")
        self.set_class(status == "failed", "-failed")
        self.set_class(status not in ("ok", "failed"), "-neutral")
        self.set_class(view.collapsed, "-collapsed")


#: Banner icon and style per status.
_STATUS_LOOK = {"ok": ("✔", "bold green"), "failed": ("✖", "bold red")}


def banner_text(rep: Any, findings: Sequence[Any]) -> Text:
    """The banner's text for a verification report (see :class:`VerifyBanner`)."""
    status = str(getattr(rep, "status", "ok"))
    icon, style = _STATUS_LOOK.get(status, ("●", "bold"))
    bad = [f for f in findings if finding_get(f, "severity") in ("error", "warning")]
    bad.sort(key=lambda f: 0 if finding_get(f, "severity") == "error" else 1)
    t = Text()
    t.append(f"{icon} post-launch verification {status.upper()}", style=style)
    t.append(" — algorithm, effective settings and log checked; ")
    acc = getattr(rep, "acceptance", None)
    al = getattr(rep, "accept_length", None)
    if acc == "pending":
        need = getattr(rep, "min_tokens", None)
        seen = getattr(rep, "tokens", 0) or 0
        t.append(f"acceptance: waiting for {need} tokens ({seen} so far; g or o sends load)" if need else
                 "acceptance pending (judged after the first few hundred tokens: g or o sends load)")
    elif al:
        t.append(f"acceptance {acc} (accept length {al:.2f} over the first {getattr(rep, 'tokens', 0)} tokens)")
    elif acc:
        t.append(f"acceptance {acc}")
    if getattr(rep, "error", None):
        t.append(f" (verification could not run: {rep.error})")
    for f in bad:
        sev = str(finding_get(f, "severity"))
        code = str(finding_get(f, "code"))
        t.append(f"\n  {SEVERITY_MARK.get(sev, '•')} {sev.upper()} ", style=SEVERITY_STYLE.get(sev, ""))
        t.append(code, style="bold")
        t.append(f"  {finding_get(f, 'message', '')}")
        if code in VERIFY_MEANING and (code != "VERIFY_COLLAPSE" or sev == "error"):
            t.append(f"\n    → {VERIFY_MEANING[code]}", style="italic")
        fix = finding_get(f, "fix")
        if fix:
            t.append(f"\n    fix: {fix}")
    return t
