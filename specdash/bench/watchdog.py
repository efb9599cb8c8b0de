"""The fault watchdog of a load: a server that exits, stalls or stops answering mid-load.

One :class:`Watchdog` watches one load against one server, for the headless bench
(:meth:`specdash.bench.runner.ProfileRun._send_watched`) and the dashboard's load driver
(:class:`specdash.tui.session.Session`) alike.  :class:`WatchedClient` wraps the load's SGLang client
so that every streamed token and finished request counts as progress (:class:`Watch`);
:meth:`Watchdog.watch_load` polls that and the server process, and cancels the load with a
:class:`ServerFault` (the RUN's ``partial_reason``) when the launched server exited (its exit code or
signal), when no token arrived for ``stall_s`` while requests were in flight — SGLang can answer
``/health`` while its decoding hangs, and a SIGSTOPped process answers nothing but keeps its sockets, so
only token progress tells — or, for an attached server, when a request broke off and ``/health`` no
longer answers.  Requests that failed because the server died are held back (never recorded), so a
resume sends them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from specdash.bench.load import work_items

#: Lines of the server's log a fault message ends with.
TAIL_LINES = 10
#: SGLang's report of a dead child process (scheduler, detokenizer): ``exitcode`` is the raw wait status of
#: ``os.waitpid`` (9 = killed by SIGKILL).  Spellings: ``exitcode=%s. pid=%s`` (0.4.x – 0.5.x,
#: ``srt/entrypoints/engine.py``) and ``an exit code %d. pid=%d`` (older ``srt/server.py``).
CHILD_DIED_RE = re.compile(r"Child process unexpectedly failed with (?:exitcode=|an exit code )(-?\d+)\.? ?pid=(\d+)")


@dataclass
class ServerFault:
    """Why a run ended early: ``reason`` (the RUN's ``partial_reason``), the exit code of a server
    that exited (negative: the signal), ``stalled`` for no token progress, the process state then
    (psutil's, e.g. ``stopped``), and ``child``: the pid of a server process that SGLang reported dead."""

    @property
    def dead(self) -> bool:
        """The server cannot serve again: it exited, or one of its processes died."""
        return self.exit_code is not None or self.child is not None

    reason: str
    exit_code: int | None = None
    stalled: bool = False
    state: str | None = None
    #: the pid of a server process SGLang reported dead (the server's main process may still run)
    child: int | None = None

    def message(self, pr) -> str:
        """The :class:`RunFailed` text: the cause, what finished, the last log lines, how to resume."""
        rd = pr.rundir.path
        done = pr.stats.ok_count
        total = len(work_items(pr.suite, pr.opt.repeats or pr.suite.suite.repeats))
        head = f"[{pr.profile.name}] {self.headline()} during the run"
        how = (f"`specdash --bench --resume {rd}` continues it." if not pr.opt.sweep else
               "a sweep cannot be resumed: run the sweep again once the server is fixed.")
        of = "" if pr.opt.sweep else f" of {total}"
        lines = [f"{head}; the load was cancelled after {done}{of} request(s) finished.",
                 f"partial results: {rd}/summary.json (marked \"partial\": true); {how}"]
        lines += log_tail_lines(pr.server)
        return "\n".join(lines)

    def headline(self) -> str:
        """The cause in one line: the reason, and for a stall the process state (``stopped``: SIGSTOP?)."""
        head = self.reason
        if self.stalled and self.state:
            head += f" (the server process is {self.state}" + (
                ": SIGSTOP or SIGTSTP?" if self.state == "stopped" else "") + ")"
        return head


def log_tail_lines(server, n: int = TAIL_LINES) -> list[str]:
    """``--- last server log lines ---`` and the last ``n`` lines of a launched server's log (each cut at
    300 characters), or nothing for an attached server or an empty log."""
    tail = server.log_tail(n).rstrip("\n") if server is not None else ""
    if not tail:
        return []
    return ["--- last server log lines ---",
            *[ln if len(ln) <= 300 else ln[:300] + " …" for ln in tail.splitlines()[-n:]]]


class Watch:
    """Token progress of a load: requests in flight and when anything last moved."""

    def __init__(self) -> None:
        self.inflight = 0
        self.last = time.monotonic()

    def tick(self, *_: object) -> None:
        self.last = time.monotonic()


class WatchedClient:
    """An :class:`~specdash.sglang.client.SGLangClient` seen through a :class:`Watchdog`'s
    :class:`Watch`: streamed tokens and finished requests count as progress; a request that failed
    because the server went away is held back (never returned, so never recorded) until the load is
    cancelled."""

    def __init__(self, client, dog: Watchdog) -> None:
        self._client, self._dog = client, dog

    def __getattr__(self, name: str):
        return getattr(self._client, name)

    async def generate_stream(self, *args, **kw):
        return await self._watched(self._client.generate_stream, args, kw)

    async def chat_stream(self, *args, **kw):
        return await self._watched(self._client.chat_stream, args, kw)

    async def _watched(self, fn, args, kw):
        w = self._dog.watch
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
        if not res.ok and not (res.error or "").startswith("HTTP ") and await self._dog.note_exit():
            # the server died: this failure is not a result (a resume re-sends the request). Wait for the
            # load to be abandoned — bounded, so a cancellation consumed elsewhere can never hang the exit —
            # then leave as cancelled.
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._dog.abandon.wait(), timeout=30.0)
            raise asyncio.CancelledError
        return res


class Watchdog:
    """Watches loads against one server (see the module docstring).

    Args:
        server: the :class:`~specdash.sglang.process.ServerProcess` specdash launched, or None when
            attached (then a broken-off request probes ``client.health``).
        client: the SGLang client (for an attached server's ``/health``; may be set later).
        stall_s: seconds without a streamed token or a finished request, while requests are in flight,
            after which the server counts as stalled.

    :attr:`fault` holds the first fault seen (it stays: a server that died does not come back).
    """

    def __init__(self, server=None, client=None, *, stall_s: float = 60.0) -> None:
        self.server, self.client, self.stall_s = server, client, float(stall_s)
        self.fault: ServerFault | None = None
        self.watch = Watch()
        #: set while a watched load is being abandoned (held-back requests then leave as cancelled)
        self.abandon = asyncio.Event()
        self._log_seen: int | None = None  # the server log's lines looked at (from the first check on)

    def wrap(self, client) -> WatchedClient:
        """``client`` seen through this watchdog (see :class:`WatchedClient`)."""
        return WatchedClient(client, self)

    def exit_fault(self) -> ServerFault | None:
        """A fault when the launched server has exited (None while it runs, or when attached)."""
        code = self.server.returncode if self.server is not None else None
        if code is None:
            return None
        return ServerFault(f"server exited ({describe_exit(code)})", exit_code=code)

    def child_fault(self) -> ServerFault | None:
        """A fault when SGLang logged a dead child process (:data:`CHILD_DIED_RE`) since the first check
        (lines logged before it, during start-up, are the launch's business); None otherwise."""
        ring = getattr(self.server, "ring", None)
        if ring is None:
            return None
        if self._log_seen is None:
            self._log_seen = ring.seq
            return None
        if ring.seq == self._log_seen:
            return None
        entries = ring.entries(since=self._log_seen)
        self._log_seen = ring.seq
        for e in entries:
            m = CHILD_DIED_RE.search(e.text)
            if m is None:
                continue
            status, pid = int(m.group(1)), int(m.group(2))
            with contextlib.suppress(ValueError):
                status = os.waitstatus_to_exitcode(status) if status >= 0 else status
            return ServerFault(f"a server process died (pid {pid}, {describe_exit(status)}; SGLang logged "
                               f"\"{m.group(0)}\"): the server no longer answers", child=pid)
        return None

    def check(self) -> ServerFault | None:
        """One look (cheap: ``Popen.poll``, the new log lines, a clock): the server exited, SGLang logged a
        dead child process, or the load in flight has made no token progress for :attr:`stall_s`.  Sets
        and returns :attr:`fault`."""
        if self.fault is None:
            self.fault = self.exit_fault()
        if self.fault is None:
            self.fault = self.child_fault()
        w = self.watch
        if self.fault is None and w.inflight and time.monotonic() - w.last > self.stall_s:
            self.fault = ServerFault(f"no token progress for {self.stall_s:g} s", stalled=True,
                                     state=proc_state(self.server))
        return self.fault

    async def note_exit(self, wait_s: float = 1.0, after: str = "a request broke off") -> bool:
        """After a request failed (not with an HTTP status): wait up to ``wait_s`` for the launched
        server to be seen exited — for an attached server, whether it still answers ``/health`` — and
        if it is gone, set :attr:`fault` and return True (the load is then cancelled and the failure
        is not a result).  ``after``: what failed, for the attached server's fault reason."""
        if self.server is None:
            return await self._attached_gone(wait_s, after)
        deadline = time.monotonic() + wait_s
        while self.fault is None:
            self.fault = self.exit_fault()
            if self.fault is not None or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.02)
        return self.fault is not None

    async def _attached_gone(self, wait_s: float, after: str) -> bool:
        """An attached server that no longer answers ``/health`` within ``wait_s`` (connection refused,
        reset, timeout): :attr:`fault` says so.  One probe per failure; the first fault wins."""
        if self.fault is not None:
            return True
        if self.client is None:
            return False
        from specdash.sglang.secrets import redact_url

        try:
            healthy = await self.client.health(timeout=max(0.5, wait_s))
        except Exception:  # any failure to answer is "gone" here
            healthy = False
        if healthy or self.fault is not None:
            return self.fault is not None
        self.fault = ServerFault(f"the attached server at {redact_url(self.client.base_url)} stopped answering "
                                 f"(/health failed after {after})")
        return True

    async def watch_load(self, load: Callable[[WatchedClient, asyncio.Event], Awaitable], client,
                         *, on_fault: Callable[[ServerFault], None] | None = None) -> ServerFault | None:
        """Run ``load(watched_client, stop)`` under the watchdog and return the fault that ended it (None
        when it finished).  On a fault the load's ``stop`` event is set and its task cancelled (records
        already written stay), ``on_fault`` is called at once (before the cancellation is awaited) and
        the fault is returned.  Polls every ``stall_s / 10`` (0.02 – 0.2 s).

        Raises:
            Exception: an exception of the load itself (not a fault) propagates.
            asyncio.CancelledError: the caller was cancelled (the load is cancelled with it).
        """
        self.watch = Watch()
        self.abandon = asyncio.Event()
        stop = asyncio.Event()
        task = asyncio.ensure_future(load(self.wrap(client), stop))
        poll = min(0.2, max(0.02, self.stall_s / 10))
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=poll)
                if task.done() or self.check() is not None:
                    break
            if self.fault is not None and on_fault is not None:
                on_fault(self.fault)
        finally:
            self.abandon.set()
            if not task.done():
                stop.set()
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.fault is None:
            task.result()  # an exception of the load itself propagates
        return self.fault


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
