"""Findings: the result model shared by the preflight doctor and post-launch verification.

A :class:`Finding` is one diagnosis with a ``severity``: ``error`` = SGLang will refuse to
start or the head cannot work; ``warning`` = it runs, probably worse than intended; ``info`` =
context.  :class:`DoctorReport` is what :func:`specdash.eagle3.doctor.run_doctor` returns (the
release judged against, where that choice came from, the findings); :func:`render_findings`
prints any list of findings grouped by severity (the doctor, ``specdash verify``, the TUI).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Severities, most severe first (the order reports are sorted and rendered in).
SEVERITIES = ("error", "warning", "info")


@dataclass
class Finding:
    """One diagnosis.

    ``code``: stable identifier (the doctor's codes are listed in :mod:`specdash.eagle3.rules`,
    verification's ``VERIFY_*`` in :mod:`specdash.eagle3.verify`); ``severity``: ``error`` |
    ``warning`` | ``info``; ``message``: what was found, with numbers; ``why``: the mechanism and
    its source; ``fix``: the exact change; ``evidence``: machine-readable numbers, names, shapes.

    Raises:
        ValueError: ``severity`` is not one of :data:`SEVERITIES`.
    """

    code: str
    severity: str
    message: str
    why: str = ""
    fix: str = ""
    evidence: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")

    def to_json(self) -> dict:
        """``{"code", "severity", "message", "why", "fix", "evidence"}``; evidence made JSON-safe
        (numpy scalars → Python numbers, tuples/sets → lists, other objects → ``str``)."""
        return {"code": self.code, "severity": self.severity, "message": self.message, "why": self.why,
                "fix": self.fix, "evidence": _jsonable(self.evidence)}


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def render_findings(findings: list[Finding], header: str = "") -> str:
    """Plain text: findings grouped by severity, each with its why and fix."""
    lines = [header] if header else []
    titles = {"error": "ERRORS", "warning": "WARNINGS", "info": "INFO"}
    for sev in SEVERITIES:
        group = [f for f in findings if f.severity == sev]
        if not group:
            continue
        lines.append("")
        lines.append(f"{titles[sev]} ({len(group)})")
        for f in group:
            lines.append(f"  [{f.code}] {f.message}")
            if f.why:
                lines.append(f"      why: {f.why}")
            if f.fix:
                lines.append(f"      fix: {f.fix}")
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    lines.append("")
    lines.append(f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info")
    return "\n".join(lines)


@dataclass
class DoctorReport:
    """The doctor's result: the release judged against, where that choice came from, findings."""

    sglang_version: str
    version_source: str
    findings: list[Finding] = field(default_factory=list)
    profile_name: str | None = None

    @property
    def has_errors(self) -> bool:
        """True when any finding is an error (``specdash doctor`` exits 1)."""
        return any(f.severity == "error" for f in self.findings)

    def codes(self, severity: str | None = None) -> list[str]:
        """Codes of the findings (optionally only one severity), in order."""
        return [f.code for f in self.findings if severity is None or f.severity == severity]

    def to_json(self) -> dict:
        """``{"sglang_version", "version_source", "findings": [Finding.to_json(), …]}``."""
        return {"sglang_version": self.sglang_version, "version_source": self.version_source,
                "findings": [f.to_json() for f in self.findings]}

    def render(self) -> str:
        """Plain-text report grouped by severity."""
        src = {"cli": "--sglang-version", "profile": "[server] sglang_version", "server": "/server_info.version",
               "installed": "installed sglang package", "assumed": "assumed: newest known"}
        name = f"profile {self.profile_name} — " if self.profile_name else ""
        head = f"specdash doctor — {name}judged against SGLang {self.sglang_version} " \
               f"({src.get(self.version_source, self.version_source)})"
        if not self.findings:
            return head + "\n\nno findings."
        return render_findings(self.findings, head)


__all__ = ["SEVERITIES", "DoctorReport", "Finding", "render_findings"]
