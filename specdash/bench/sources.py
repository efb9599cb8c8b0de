"""The directories ``specdash report`` and ``specdash compare`` read: run, A/B compare and tune directories
as :class:`Source` objects, and the sweep readings both take from them.

:func:`load_source` reads one directory (a run's ``summary.json``, ``manifest.json``, ``requests.jsonl`` and
``sweep.json``; a compare directory's ``comparison.json``; a tune directory's ``tune.json``) through the
run directory's bounded readers (:mod:`specdash.bench.rundir`), or says why it cannot
(:class:`ReportError`).  :func:`sweep_speedups` pairs two sweeps point by point
(:func:`specdash.bench.compare.build_comparison` on each point's records); :func:`sources_sweep_var`
and :func:`is_point` name the axis and its values.  :mod:`specdash.bench.html` draws the page from them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specdash.bench.compare import build_comparison
from specdash.bench.points import SWEEP_FILE
from specdash.results import output_tok_s

__all__ = ["ReportError", "Source", "is_point", "load_source", "read_gpu_samples", "sources_sweep_var",
           "sweep_speedups"]


class ReportError(ValueError):
    """A directory that cannot be reported (missing, or none of the files specdash writes)."""


def _read_json(path: Path) -> Any:
    """A run-directory JSON object (:func:`specdash.bench.rundir.read_run_file`: bounded, depth-limited)."""
    from specdash.bench.rundir import RunFileError, read_run_file

    try:
        return read_run_file(path)
    except RunFileError as exc:
        raise ReportError(f"{path} cannot be read as JSON ({exc})") from None


@dataclass
class Source:
    """One directory given to the report: ``kind`` is ``run``, ``compare`` or ``tune``."""

    path: Path
    kind: str
    summary: dict | None = None
    manifest: dict = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)
    comparison: dict | None = None
    tune: dict | None = None
    #: the sweep's result (``sweep.json``) when this run directory is a sweep's profile side
    sweep: dict | None = None

    @property
    def runs(self) -> list[dict]:
        return list((self.summary or {}).get("runs") or [])

    @property
    def name(self) -> str:
        """The profile of a run directory (else the directory's name)."""
        runs = self.runs
        return str((runs[0].get("profile") if runs else None) or self.manifest.get("profile") or self.path.name)

    @property
    def speculative(self) -> bool:
        """Whether any of its RUNs ran with a speculative algorithm (read back from the server)."""
        return any((r.get("effective") or {}).get("speculative_algorithm") for r in self.runs)

    @property
    def sweep_var(self) -> str:
        """The axis its RUNs differ in: ``request_rate`` for a ``--sweep request_rate=…`` directory, else
        ``concurrency`` (a concurrency sweep, or a single RUN)."""
        return "request_rate" if "request_rate" in (self.manifest.get("sweep") or {}) else "concurrency"

    def records_at(self, point: Any, var: str = "concurrency") -> list[dict]:
        """Its records at one point of the ``var`` axis (records without one belong to a single-RUN
        directory's)."""
        only = self.runs[0].get(var) if len(self.runs) == 1 else None
        return [r for r in self.records if r.get(var, only) == point]


def load_source(path: str | Path) -> Source:
    """Read a run, compare or tune directory.

    Raises:
        ReportError: the directory is missing, or holds none of ``summary.json``,
            ``comparison.json``, ``tune.json``.
    """
    from specdash.bench.rundir import RunDir

    p = Path(path)
    if not p.is_dir():
        raise ReportError(f"{p} is not a directory")
    if (p / "summary.json").is_file():
        from specdash.bench.rundir import RunFileError, read_summary

        try:
            summary = read_summary(p / "summary.json")  # each RUN's fields type-checked
        except RunFileError as exc:
            raise ReportError(f"{p / 'summary.json'}: not a summary specdash wrote ({exc})") from None
        manifest = _read_json(p / "manifest.json") if (p / "manifest.json").is_file() else {}
        sweep = _read_json(p / SWEEP_FILE) if (p / SWEEP_FILE).is_file() else None
        return Source(p, "run", summary=summary, manifest=manifest if isinstance(manifest, dict) else {},
                      records=RunDir(p).read_requests(),
                      sweep=sweep if isinstance(sweep, dict) and isinstance(sweep.get("sweep"), list) else None)
    if (p / "comparison.json").is_file():
        return Source(p, "compare", comparison=_read_json(p / "comparison.json"))
    if (p / "tune.json").is_file():
        return Source(p, "tune", tune=_read_json(p / "tune.json"))
    if (p / "manifest.json").is_file():  # a run directory whose run ended before it wrote a summary
        manifest = _read_json(p / "manifest.json")
        name = manifest.get("profile") if isinstance(manifest, dict) else None
        name = name if isinstance(name, str) else None
        log = p / "server.log"
        why = f"; {log} says how the server ended" if log.is_file() and log.stat().st_size else ""
        recs = " and some request records" if (p / "requests.jsonl").is_file() else ", no request record"
        raise ReportError(f"{p} is a run directory{f' of profile {name}' if name else ''} with a manifest{recs} but "
                          f"no summary.json: the run ended before it wrote one{why}. Run it again, or continue it, "
                          f"with `specdash --bench --resume {p}`")
    hint = " (an unfinished run? continue it with --resume)" if (p / "requests.jsonl").is_file() else ""
    raise ReportError(f"{p} holds no summary.json, comparison.json or tune.json: not a run, compare or tune "
                      f"directory{hint}")


def read_gpu_samples(path: Path) -> list[dict]:
    """The device readings of a run directory's ``gpu.jsonl`` (written while requests were in flight, one a
    second per device: ``t`` epoch s, ``index``, ``node``, ``memory_used_mib``, ``utilization_pct``,
    ``power_w``, ``temperature_c`` …); ``[]`` without the file.  Lines that are not JSON objects are skipped."""
    f = path / "gpu.jsonl"
    if not f.is_file():
        return []
    out = []
    for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and isinstance(d.get("t"), (int, float)):
            out.append(d)
    return out


def sweep_speedups(spec: Source, base: Source, var: str | None = None) -> list[dict[str, Any]]:
    """The paired speedup of ``spec`` over ``base`` at each point of the ``var`` axis (default: ``spec``'s
    sweep axis) both have: the point under ``var``, ``output_tok_s``, ``baseline_tok_s``, ``speedup``,
    ``ci95``, ``verdict``, ``pairs`` (the sweep's point shape)."""
    var = var or spec.sweep_var
    base_by = {r.get(var): r for r in base.runs if is_point(r.get(var))}
    points = []
    for run in spec.runs:
        x = run.get(var)
        b = base_by.get(x) if is_point(x) else None
        if b is None:
            continue
        cmp = build_comparison(base.records_at(x, var), spec.records_at(x, var), a_name=base.name, b_name=spec.name)
        points.append(dict({var: x}, output_tok_s=output_tok_s(run), baseline_tok_s=output_tok_s(b),
                           speedup=cmp.get("speedup"), ci95=cmp.get("ci95"), verdict=cmp.get("verdict"),
                           pairs=cmp.get("pairs", 0)))
    return points


def is_point(x: Any) -> bool:
    """A swept value (a concurrency or a finite rate; not None, not the string ``"inf"``)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def sources_sweep_var(sources: Sequence[Source]) -> str:
    """The axis shared by the sweeps among ``sources``: ``request_rate`` when every sweep there is a rate
    sweep, else ``concurrency``."""
    kinds = {s.sweep_var for s in sources if s.kind == "run" and s.manifest.get("sweep")}
    return "request_rate" if kinds == {"request_rate"} else "concurrency"
