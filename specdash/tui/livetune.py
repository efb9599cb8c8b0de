"""The dashboard's live tune: ``specdash tune --live`` on the session's profile, as an action (no Textual).

:class:`LiveTune` runs :func:`specdash.bench.tune.tune` with ``live=True`` on the session's
profile, suite and load concurrency: a baseline launch without speculation, then adaptive
launches that each measure two chain step tiers at the same load inside one server
(:mod:`specdash.bench.live`), trees (topk > 1) by relaunch, and a final paired A/B of the best
against the starting settings.  The dashboard's own server is stopped first — the tune
launches (and stops) its own, one at a time, so two servers never share the GPU.

Progress lines, the report and the best settings are kept on :class:`TuneStatus`; the
``on_change`` callback hears every change (the app turns it into a message).  The report is
written as the CLI writes it (``<out>/<stamp>-<profile>-tune/tune.json`` and ``advice.txt``),
and the winner saved as a preset in the preset directory (never overwriting one).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specdash.tui.session import Session

#: Progress lines kept on the status (the newest ones).
KEEP_LINES = 200
#: Exploration launches of a dashboard live tune (the CLI's ``--budget`` default) and live launches
#: at most (each measures two chain tiers; the CLI's ``--chain-launches``).
BUDGET = 4
CHAIN_LAUNCHES = 2


@dataclass
class TuneStatus:
    """The live tune's state.

    ``running``; ``profile`` / ``suite`` / ``concurrency``: what is tuned; ``lines``: progress
    lines (newest last, at most :data:`KEEP_LINES`); ``report``: the tune report
    (:func:`specdash.bench.tune.tune`) when it finished; ``tune_dir``: where it was written;
    ``best``: the best ``speculative_num_steps`` / ``_eagle_topk`` / ``_num_draft_tokens``;
    ``error``: why it stopped early; ``started`` / ``finished``: monotonic s.
    """

    running: bool = False
    profile: str = ""
    suite: str = ""
    concurrency: int = 0
    lines: list[str] = field(default_factory=list)
    report: dict | None = None
    tune_dir: str | None = None
    best: dict | None = None
    error: str | None = None
    started: float | None = None
    finished: float | None = None

    @property
    def elapsed_s(self) -> float | None:
        """Seconds since the start (until the end once finished)."""
        if self.started is None:
            return None
        return (self.finished or time.monotonic()) - self.started


class LiveTune:
    """Runs one live tune at a time for a :class:`~specdash.tui.session.Session`.

    Args:
        session: the dashboard session (profile, suite, load concurrency, run directory root).
        on_change: called with the :class:`TuneStatus` after every change.
        budget / chain_launches: as ``specdash tune --budget`` / ``--chain-launches``.
        preset_dir: where the winner is saved (default: the user's profile directory).
    """

    def __init__(self, session: Session, on_change: Callable[[TuneStatus], None] | None = None, *,
                 budget: int = BUDGET, chain_launches: int = CHAIN_LAUNCHES, preset_dir: Path | None = None) -> None:
        self.session = session
        self.on_change = on_change or (lambda st: None)
        self.budget = budget
        self.chain_launches = chain_launches
        self.preset_dir = preset_dir
        self.status = TuneStatus()

    def unavailable(self) -> str | None:
        """Why a live tune cannot start now (None: it can)."""
        s = self.session
        if self.status.running:
            return "a live tune is already running"
        if s.url is not None and s.profile is None:
            return "attached to a server specdash did not launch: a live tune needs a profile it can relaunch"
        if s.profile is None:
            return "pick a profile first (p)"
        if not s.profile.spec_enabled:
            return f"profile {s.profile.name} has no [speculative] settings to tune"
        if s.suite is None:
            return "choose a suite first (u)"
        return None

    def _say(self, line: str) -> None:
        self.status.lines.append(line)
        del self.status.lines[:-KEEP_LINES]
        self.on_change(self.status)

    async def run(self) -> TuneStatus:
        """Stop the dashboard's server, run the live tune, write its report; returns the status.

        Errors of the tune (a preflight that blocks, a server that fails to start) end up in
        ``status.error`` with the lines so far; they are not raised.
        """
        from specdash.bench.runner import RunOptions
        from specdash.bench.tune import tune, write_tune_report

        why = self.unavailable()
        if why:
            raise RuntimeError(why)
        s = self.session
        prof, suite, conc = s.profile, s.suite, s.load.concurrency
        self.status = TuneStatus(running=True, profile=prof.name, suite=suite.name, concurrency=conc,
                                 started=time.monotonic())
        self._say(f"live tune of {prof.name}: suite {suite.name} at concurrency {conc}, budget {self.budget} "
                  f"launches ({self.chain_launches} live, two chain tiers each)")
        try:
            if s.server_running or s.load_running:
                self._say("stopping the dashboard's server: the tune launches its own, one at a time")
                await s.stop()
            opts = RunOptions(out_dir=s.out_dir, concurrency=conc, max_tokens=s.load.max_tokens, progress=self._say,
                              sglang_version=s.sglang_version)
            report = await tune(prof, suite, budget=self.budget, out=s.out_dir, progress=self._say, opts=opts,
                                preset_dir=self.preset_dir, live=True, chain_budget=self.chain_launches,
                                schedule=False)
            tdir = write_tune_report(s.out_dir, report)
            self.status.report = report
            self.status.tune_dir = str(tdir)
            self.status.best = report.get("best")
            self._say(f"live tune done: best {_label(report.get('best'))} ({report.get('stop_reason')}); "
                      f"report {tdir / 'tune.json'}")
        except Exception as exc:  # shown in the panel; the app stays up
            self.status.error = f"{type(exc).__name__}: {exc}"
            self._say(f"live tune stopped: {self.status.error}")
            if not str(exc):
                self._say(traceback.format_exc(limit=3))
        finally:
            self.status.running = False
            self.status.finished = time.monotonic()
            self.on_change(self.status)
        return self.status

    def best_changes(self) -> dict[str, Any] | None:
        """The tweak that applies the best settings to the session's profile (None without a
        finished tune, or when the best is the starting point)."""
        best, report = self.status.best, self.status.report
        if not best or not report or best == report.get("start"):
            return None
        return {"num_steps": best["speculative_num_steps"], "eagle_topk": best["speculative_eagle_topk"],
                "num_draft_tokens": best["speculative_num_draft_tokens"]}


def _label(settings: dict | None) -> str:
    if not settings:
        return "—"
    return (f"steps {settings['speculative_num_steps']} / topk {settings['speculative_eagle_topk']} / "
            f"draft tokens {settings['speculative_num_draft_tokens']}")


def tune_text(status: TuneStatus) -> str:
    """The Suggestions panel's live-tune section as plain text: state, the tune's summary
    (:func:`specdash.bench.tune_text.render_live`) once it finished, and the newest progress lines."""
    from specdash.bench.tune_text import render_live

    if status.started is None:
        return ""
    head = (f"Live tune of {status.profile} (suite {status.suite}, concurrency {status.concurrency}): "
            + ("running" if status.running else "stopped with an error" if status.error else "finished")
            + f", {status.elapsed_s:.0f} s")
    out = [head]
    rep = status.report
    if rep is not None:
        out.append(f"best: {_label(rep.get('best'))} — {rep.get('stop_reason')}")
        out.append(render_live(rep))
        if rep.get("preset"):
            out.append(f"saved the winner as {rep['preset']} (press A to apply it to this profile)")
        elif rep.get("preset_not_saved"):
            out.append(rep["preset_not_saved"])
        out.append(f"report: {status.tune_dir}/tune.json")
    out.append("")
    out.extend(status.lines[-(12 if rep is None else 6):])
    return "\n".join(out)
