"""The fault watchdog of a measured run: a launched server that exits or stalls mid-run.

:class:`WatchedClient` wraps the run's SGLang client so that every streamed token and finished request
counts as progress (:class:`Watch`); :meth:`specdash.bench.runner.ProfileRun._send_watched` polls it and
the server process, and ends the load with a :class:`ServerFault` (the RUN's ``partial_reason``) when the
server exited (its exit code or signal) or no token arrived for ``stall_s`` while requests were in flight —
SGLang can answer ``/health`` while its decoding hangs, so only token progress tells.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from dataclasses import dataclass

from specdash.bench.load import work_items


@dataclass
class ServerFault:
    """Why a run ended early: ``reason`` (the RUN's ``partial_reason``), the exit code of a server
    that exited (negative: the signal), ``stalled`` for no token progress, and the process state
    then (psutil's, e.g. ``stopped``)."""

    reason: str
    exit_code: int | None = None
    stalled: bool = False
    state: str | None = None

    def message(self, pr) -> str:
        """The :class:`RunFailed` text: the cause, what finished, the last log lines, how to resume."""
        rd = pr.rundir.path
        done = pr.stats.ok_count
        total = len(work_items(pr.suite, pr.opt.repeats or pr.suite.suite.repeats))
        head = f"[{pr.profile.name}] {self.reason} during the run"
        if self.stalled and self.state:
            head += f" (the server process is {self.state}" + (
                ": SIGSTOP or SIGTSTP?" if self.state == "stopped" else "") + ")"
        how = (f"`specdash --bench --resume {rd}` continues it." if not pr.opt.sweep else
               "a sweep cannot be resumed: run the sweep again once the server is fixed.")
        of = "" if pr.opt.sweep else f" of {total}"
        lines = [f"{head}; the load was cancelled after {done}{of} request(s) finished.",
                 f"partial results: {rd}/summary.json (marked \"partial\": true); {how}"]
        tail = pr.server.log_tail(10).rstrip("\n") if pr.server is not None else ""
        if tail:
            shown = [ln if len(ln) <= 300 else ln[:300] + " …" for ln in tail.splitlines()[-10:]]
            lines += ["--- last server log lines ---", *shown]
        return "\n".join(lines)


class Watch:
    """Token progress of a load: requests in flight and when anything last moved."""

    def __init__(self) -> None:
        self.inflight = 0
        self.last = time.monotonic()

    def tick(self, *_: object) -> None:
        self.last = time.monotonic()


class WatchedClient:
    """An :class:`~specdash.sglang.client.SGLangClient` seen through a :class:`Watch`: streamed
    tokens and finished requests count as progress; a request that failed because the launched
    server exited is held back (never returned, so never recorded) until the load is cancelled."""

    def __init__(self, client, watch: Watch, run) -> None:
        self._client, self._watch, self._run = client, watch, run

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    async def generate_stream(self, *args, **kw):
        return await self._watched(self._client.generate_stream, args, kw)

    async def chat_stream(self, *args, **kw):
        return await self._watched(self._client.chat_stream, args, kw)

    async def _watched(self, fn, args, kw):
        w = self._watch
        chained = kw.get("on_progress")

        def on_progress(n: int) -> None:
            w.tick()
            if chained is not None:
                chained(n)

        kw["on_progress"] = w.tick if chained is None else on_progress  # the hot path: one cheap call
        if not w.inflight:
            w.tick()  # the stall clock starts with the first request in flight
        w.inflight += 1
        try:
            res = await fn(*args, **kw)
        finally:
            w.inflight -= 1
            w.tick()
        if not res.ok and not (res.error or "").startswith("HTTP ") and await self._run._note_exit():
            # the server died: this failure is not a result (a resume re-sends the request). Wait for the
            # load to be abandoned — bounded, so a cancellation consumed elsewhere can never hang the exit —
            # then leave as cancelled.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._run._abandon.wait(), timeout=30.0)
            raise asyncio.CancelledError
        return res


def describe_exit(code: int) -> str:
    """``exit code 3`` / ``killed by SIGKILL (exit code -9)``."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}, exit code {code}"
    return f"exit code {code}"


def proc_state(server) -> str | None:
    """psutil's status of the launched server's main process (``stopped``, ``running`` …), or None."""
    if server is None or server.pid is None:
        return None
    try:
        import psutil

        return psutil.Process(server.pid).status()
    except Exception:  # a diagnostic only
        return None


def resume_if_stopped(server) -> None:
    """SIGCONT the server's process group when its main process is stopped (SIGSTOP/SIGTSTP), so
    that the SIGTERM of the stop that follows is acted on instead of waiting out its timeout."""
    if server is not None and server.pid is not None and proc_state(server) == "stopped":
        with contextlib.suppress(OSError):
            os.killpg(server.pid, signal.SIGCONT)
