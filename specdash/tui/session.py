"""The dashboard's controller, free of Textual: profile → preflight → launch / attach → load → stop.

One :class:`Session` owns at most one server that specdash started, the HTTP client, the
:class:`~specdash.collect.live.LiveCollector`, the run directory and the load driver.  The
launch path is the bench's, :mod:`specdash.launch` (preflight gate → ``ServerLaunch`` →
manifest → ``wait_ready`` → stop), and the load driver is the runner's ``send_suite`` (one
code path for ``--bench`` and the TUI); every finished request is appended to the run
directory's ``requests.jsonl`` as it arrives.

Faults are the bench's: every load runs under a :class:`~specdash.bench.watchdog.Watchdog`
(:mod:`specdash.bench.watchdog`), and the redraw clock's :meth:`Session.check_alive` asks the same
watchdog between loads.  A launched server that exits (crash, OOM, SIGKILL) or whose scheduler dies
(SGLang logs it and keeps its HTTP server up), a load that makes no
token progress for :data:`STALL_S` (a hung or SIGSTOPped server), a server process found stopped, or
an attached server that stops answering ``/health``: the load is stopped at once (requests that failed
only because the server went away are not recorded), the state becomes EXITED / STALLED / FAILED with
the cause and the server's last log lines, the run directory's ``summary.json`` gets the load's RUN
marked ``"partial": true`` with its ``partial_reason`` (the bench's shape), and a server that exited or
lost a process has what is left of its process tree killed.

The UI talks to it through a :class:`SessionListener` (plain method calls on the event
loop's thread); the Textual app turns those into typed messages.  Nothing here draws.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from specdash.bench.rundir import RunDir
from specdash.bench.watchdog import ServerFault, Watchdog, log_tail_lines, proc_state, resume_if_stopped
from specdash.collect.live import LiveCollector
from specdash.collect.snapshot import PollIntervals
from specdash.launch import READY_TIMEOUT_S, ServerLaunch
from specdash.profile import Profile, ProfileError, Suite, build_launch
from specdash.tui.presets import PresetsMixin
from specdash.tui.session_advice import SessionAdviceMixin
from specdash.tui.verification import FailedVerification, pending_acceptance

if TYPE_CHECKING:
    from specdash.eagle3.findings import DoctorReport
    from specdash.eagle3.verify import CollapseWatch
    from specdash.sglang.client import SGLangClient
    from specdash.sglang.launchspec import LaunchSpec
    from specdash.sglang.process import ServerProcess
    from specdash.tui.verification import Verification

#: Concurrency choices offered by the load control.
CONCURRENCY_STEPS = (1, 2, 4, 8, 16, 32, 64)
#: Rounds queued per ``send_suite`` call while looping (no drain at every suite pass).
LOOP_CHUNK = 20
#: Seconds without a streamed token or a finished request, while the dashboard's load has requests in
#: flight, after which the server counts as stalled (the bench waits 60 s; a dashboard must say it within
#: seconds — a healthy SGLang server streams a token per request every few ms to a few hundred ms, and a
#: prefill that takes this long is itself worth a look).
STALL_S = 15.0
#: How often (s) the redraw clock looks at the server process's state (psutil: ``stopped`` = SIGSTOP).
PROC_STATE_EVERY_S = 1.0
#: The fault of a server process found stopped on the redraw clock (a load's stall says it its own way).
STOPPED_REASON = "the server process is stopped (SIGSTOP or SIGTSTP?)"


class ServerState(StrEnum):
    """Where the server is in its life (the launch panel's state line)."""

    IDLE = "idle"
    STARTING = "starting"
    READY = "ready"
    #: alive but making no progress: no token for :data:`STALL_S` under load, or its process is stopped
    STALLED = "stalled"
    STOPPING = "stopping"
    FAILED = "failed"
    EXITED = "exited"
    ATTACHED = "attached"


@dataclass
class LoadStatus:
    """The load driver's state: ``running``; ``loop`` (repeat the suite until stopped);
    ``concurrency``; requests ``done`` / ``failed`` in this load; ``suite`` name;
    ``max_tokens`` per request; ``error`` when the driver stopped on an exception."""

    running: bool = False
    loop: bool = False
    concurrency: int = 4
    done: int = 0
    failed: int = 0
    suite: str = ""
    max_tokens: int | None = None
    error: str | None = None


class SessionListener(Protocol):
    """What a UI implements to hear from the session (called on the event-loop thread)."""

    def server_state(self, state: ServerState, detail: str) -> None: ...

    def verification(self, report: Verification) -> None: ...

    def load_state(self, status: LoadStatus) -> None: ...


class _NullListener:
    def server_state(self, state, detail):
        pass

    def verification(self, report):
        pass

    def load_state(self, status):
        pass


@dataclass
class LaunchInfo:
    """What the launch panel shows about the current launch: the redacted argv/env, asked vs
    effective speculative values, ``time_to_ready_s`` and the run directory."""

    argv: list[str]
    env: dict[str, str]
    shell_line: str
    asked: dict
    effective: dict
    adjustments: list
    rejections: list
    base_url: str
    run_dir: Path | None = None
    started_at: float | None = None
    time_to_ready_s: float | None = None
    error: str | None = None


class Session(PresetsMixin, SessionAdviceMixin):
    """Controller of one dashboard session (see module docstring).

    Args:
        profile: the profile to launch (None when attached or not chosen yet).
        url: attach to a running server instead of launching (``--url``).
        api_key: API key of an attached server.
        out_dir: parent of run directories (``./runs``).
        suite: the load suite.
        listener: receives state changes (see :class:`SessionListener`).
        intervals: collector poll intervals.
        gpu_source: passed to :class:`LiveCollector`.
        gpu_exporters: other nodes' GPU exporters (``--gpu-exporter``); the profile's
            ``[[gpu_exporters]]`` are added for its nodes not named here.
        ready_timeout_s: how long a launched server may take to become ready.
        stall_s: seconds without token progress under load after which the server counts as stalled.
    """

    def __init__(
        self,
        profile: Profile | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        out_dir: Path = Path("runs"),
        suite: Suite | None = None,
        listener: SessionListener | None = None,
        intervals: PollIntervals | None = None,
        gpu_source: str = "auto",
        gpu_exporters: tuple = (),
        ready_timeout_s: float | None = None,
        sglang_version: str | None = None,
        baseline_tok_s: float | None = None,
        stall_s: float | None = None,
    ) -> None:
        self.profile = profile
        self.source_text: str | None = None
        if profile is not None and profile.path is not None:
            with contextlib.suppress(OSError):
                self.source_text = profile.path.read_text(encoding="utf-8")
        self.url = url
        self.api_key = api_key
        self.out_dir = Path(out_dir)
        self.suite = suite
        self.listener: SessionListener = listener or _NullListener()
        self.intervals = intervals or PollIntervals()
        self.gpu_source = gpu_source
        self.gpu_exporters = tuple(gpu_exporters)
        self.ready_timeout_s = ready_timeout_s or READY_TIMEOUT_S
        self.sglang_version = sglang_version
        self.state = ServerState.IDLE
        self.state_detail = ""
        self._launch: ServerLaunch | None = None
        #: how the last load sent its prompts (:func:`specdash.profile.chat.apply_prompt_format`'s record)
        self.prompt_format: dict = {}
        self.client: SGLangClient | None = None
        self.collector: LiveCollector | None = None
        self.rundir: RunDir | None = None
        self.launch_info: LaunchInfo | None = None
        self.preflight_report: DoctorReport | None = None
        self.preflight_error: str | None = None
        self.verification_report: Verification | None = None
        self.load = LoadStatus(concurrency=(suite.suite.concurrency if suite else 4))
        self._load_task: asyncio.Task | None = None
        self._load_stop: asyncio.Event | None = None
        self._collapse: CollapseWatch | None = None
        self._verify_task: asyncio.Task | None = None
        self.baseline_tok_s = baseline_tok_s
        self.stall_s = float(stall_s or STALL_S)
        #: the watchdog of the current server (launched or attached); its ``fault`` says why it is gone
        self.watchdog: Watchdog | None = None
        #: the RUNs of the loads written to the current run directory's ``summary.json``
        self._runs: list[dict] = []
        self._proc_checked = 0.0
        self._fault_shown: ServerFault | None = None
        #: (settings or None, run summary, concurrency) per measured launch, for the advisor.
        #: launch number → (the server's speculative settings as a RUN's ``effective``, the run's figures, concurrency)
        self.measurements: dict[int, tuple[dict, dict, int]] = {}
        self._launch_no = 0
        self._lock = asyncio.Lock()

    # -- profile --------------------------------------------------------------------------------
    def set_profile(self, profile: Profile, *, source_text: str | None = None) -> None:
        """Make ``profile`` the one to launch (keeps the source file's text for saving)."""
        self.profile = profile
        if source_text is not None:
            self.source_text = source_text
        elif profile.path is not None:
            with contextlib.suppress(OSError):
                self.source_text = profile.path.read_text(encoding="utf-8")
        self.preflight_report = None
        self.preflight_error = None
        if not self.server_running:  # what was shown belongs to the previous profile's launch
            self.launch_info = None
            self.verification_report = None
            self.collector = None

    def run_preflight(self) -> DoctorReport | None:
        """Preflight findings (the doctor's, :func:`specdash.launch.run_preflight`) for the
        current profile; errors reading the profile become :attr:`preflight_error` instead of
        exceptions."""
        from specdash.launch import run_preflight

        self.preflight_report, self.preflight_error = None, None
        if self.profile is None:
            return None
        try:
            self.preflight_report = run_preflight(self.profile, sglang_version=self.sglang_version)
        except Exception as exc:  # a broken profile is shown, never a crash
            self.preflight_error = f"{type(exc).__name__}: {exc}"
        return self.preflight_report

    def preview_launch(self, profile: Profile | None = None) -> LaunchInfo | None:
        """Argv / env / asked vs effective for ``profile`` (default: the current one) without
        starting anything (port 0 is shown as "a free port at launch")."""
        prof = profile or self.profile
        if prof is None:
            return None
        try:
            spec = build_launch(prof.expanded(), version=self.sglang_version)
        except (ProfileError, Exception) as exc:  # a broken profile is shown, never raised
            return LaunchInfo([], {}, "", {}, {}, [], [], "", error=f"{type(exc).__name__}: {exc}")
        info = _launch_info(spec)
        if spec.port == 0:  # shown as what will happen, not as a literal 0
            info.argv = [("(a free port at launch)" if w == "0" and i and info.argv[i - 1] == "--port" else w)
                         for i, w in enumerate(info.argv)]
        return info

    # -- state ----------------------------------------------------------------------------------
    def _set_state(self, state: ServerState, detail: str = "") -> None:
        self.state, self.state_detail = state, detail
        self.listener.server_state(state, detail)

    @property
    def server(self) -> ServerProcess | None:
        """The server process this session started (None when none, or attached)."""
        return self._launch.server if self._launch is not None else None

    @property
    def server_running(self) -> bool:
        """True while a server that specdash started is alive (starting, ready or stalled)."""
        return self.server is not None and self.state in (ServerState.STARTING, ServerState.READY,
                                                          ServerState.STALLED)

    @property
    def fault(self) -> ServerFault | None:
        """Why the current server is gone or stuck (the watchdog's fault), else None."""
        return self.watchdog.fault if self.watchdog is not None else None

    @property
    def connected(self) -> bool:
        """True when a server (launched and ready, or attached) can take requests."""
        return self.client is not None and self.state in (ServerState.READY, ServerState.ATTACHED)

    def check_alive(self) -> bool:
        """Between and during loads, on the UI's redraw clock: a launched server that exited on its own
        (crash, OOM, kill) or whose process is stopped (SIGSTOP / SIGTSTP: it keeps its sockets, so
        polls just time out), and a load that made no token progress for :attr:`stall_s` — the
        watchdog's checks, cheap (``Popen.poll``, a clock; the process state at most every
        :data:`PROC_STATE_EVERY_S`).  A fault is handled as a load's is (:meth:`_on_fault`); a stopped
        process that is continued (SIGCONT) before any load noticed makes the state READY again.
        Returns False when a fault was just found."""
        import time

        dog = self.watchdog
        if self.server is None or dog is None or self.state not in (ServerState.READY, ServerState.STALLED):
            return True
        if dog.fault is None and dog.check() is not None:
            self._on_fault(dog.fault)
            return False
        now = time.monotonic()
        if now - self._proc_checked < PROC_STATE_EVERY_S:
            return True
        self._proc_checked = now
        state = proc_state(self.server)
        if dog.fault is None and state == "stopped":
            dog.fault = ServerFault(STOPPED_REASON, stalled=True)
            self._on_fault(dog.fault)
            return False
        if dog.fault is not None and dog.fault.reason == STOPPED_REASON and state not in (
                None, "stopped") and self.server.returncode is None:
            dog.fault = None  # continued (SIGCONT) before a load saw it stuck: nothing was lost
            self._set_state(ServerState.READY, f"the server process was continued ({state}): ready again")
        return True

    def _on_fault(self, fault: ServerFault) -> None:
        """The server exited, stalled, is stopped or stopped answering: stop the load now, show the
        cause with the last log lines (state EXITED / STALLED / FAILED); then (a task) finish the run
        directory as partial and, for a server that exited, kill what is left of its process tree.
        Idempotent: a fault already shown (the redraw clock and the load's watchdog both saw it) is not
        shown twice."""
        if fault is self._fault_shown:
            return
        self._fault_shown = fault
        if self._load_stop is not None:
            self._load_stop.set()
        if fault.dead:
            state = ServerState.EXITED
        elif fault.stalled:
            state = ServerState.STALLED
        else:
            state = ServerState.FAILED
        done = self.load.done if (self.load.running or self.load.done) else 0
        what = (f"; the load was stopped after {done} finished request(s)" if self.load.running else "")
        where = f"; partial results in {self.rundir.path}/summary.json" if self.rundir is not None and (
            self.load.running or self._runs) else ""
        fix = {ServerState.EXITED: " — r launches it again",
               ServerState.STALLED: " — s stops it (SIGCONT first), r restarts it"}.get(state, "")
        lines = [f"{fault.headline()}{what}{where}{fix}", *log_tail_lines(self.server)]
        self._set_state(state, "\n".join(lines))
        if fault.dead and not self.load.running:
            self._reap_soon()

    def _reap_soon(self) -> None:
        """Kill what is left of an exited server's process tree (its scheduler / detokenizer children)
        without waiting on the event loop (a task)."""
        launch = self._launch
        if launch is None:
            return
        with contextlib.suppress(RuntimeError):  # no running loop: the next stop does it
            asyncio.get_running_loop().create_task(launch.astop())

    def exporter_targets(self) -> tuple:
        """The GPU exporters to read: the command line's, then the profile's other nodes."""
        from specdash.collect.exporter import merge_targets, profile_targets

        return merge_targets(self.gpu_exporters, profile_targets(self.profile))

    # -- attach ---------------------------------------------------------------------------------
    async def attach(self) -> None:
        """Attach to :attr:`url`: start the collector; the state becomes ATTACHED (or FAILED
        when ``/health`` does not answer)."""
        from specdash.sglang.client import SGLangClient

        self.client = SGLangClient(self.url, api_key=self.api_key)
        self.watchdog = Watchdog(None, self.client, stall_s=self.stall_s)
        self.collector = LiveCollector(self.client, intervals=self.intervals, gpu_source=self.gpu_source,
                                       gpu_exporters=self.exporter_targets())
        await self.collector.start()
        ok = False
        with contextlib.suppress(Exception):
            ok = await self.client.health()
        if ok:
            self._set_state(ServerState.ATTACHED, f"attached to {self.url}")
        else:
            self._set_state(ServerState.FAILED, f"{self.url}: /health did not answer 200 (is the server up?)")

    # -- launch / stop --------------------------------------------------------------------------
    async def launch(self, *, force: bool = False) -> LaunchInfo:
        """Launch the current profile (stopping a server this session started before) on
        :mod:`specdash.launch`'s path, the bench's: preflight gate, start, manifest, ready.

        Returns the :class:`LaunchInfo`; on failure its ``error`` is set and the state is
        FAILED (the log tail says why).

        Raises:
            PreflightBlocked: preflight errors without ``force`` (state back to IDLE).
            ProfileError: no profile, or it cannot be checked or turned into a command line.
            OSError: the server's command cannot be executed.
        """
        from specdash.launch import PreflightBlocked, ServerLaunch, gate
        from specdash.sglang.client import SGLangClient

        async with self._lock:
            await self._stop_locked()
            if self.profile is None:
                raise ProfileError("no profile chosen")
            from specdash.profile.nodes import launch_refusal, launches_nodes

            if self.profile.multi_node and not launches_nodes(self.profile):  # before preflight and a run directory

                self._set_state(ServerState.IDLE, "a multi-node profile: start its nodes yourself, then attach")
                raise ProfileError(launch_refusal(self.profile))
            report = self.run_preflight()
            if self.preflight_error:
                self._set_state(ServerState.FAILED, self.preflight_error)
                raise ProfileError(self.preflight_error)
            try:
                gate(report, force=force)
            except PreflightBlocked:
                self._set_state(ServerState.IDLE, "preflight found errors: fix them, or launch anyway")
                raise
            self.rundir = RunDir.create(self.out_dir, self.profile.name, checkpoint=False)
            self._runs = []
            launch = ServerLaunch.prepare(self.profile, self.rundir, sglang_version=self.sglang_version,
                                          preflight=report, extra_manifest={"source": "tui"})
            info = _launch_info(launch.spec)
            info.run_dir = self.rundir.path
            self.launch_info = info
            self._launch_no += 1
            self.verification_report = None
            self._collapse = None
            self._launch = launch
            info.started_at = launch.start().started_at
            self._set_state(ServerState.STARTING, f"starting {launch.profile.name} on {launch.base_url}"
                            + (f" — {launch.secret_note}" if launch.secret_note else ""))
            self.client = SGLangClient(launch.base_url, api_key=launch.api_key)
            self.watchdog = Watchdog(self.server, self.client, stall_s=self.stall_s)
            self.collector = LiveCollector(self.client, server=self.server, intervals=self.intervals,
                                           gpu_source=self.gpu_source, gpu_exporters=self.exporter_targets())
            await self.collector.start()
            try:
                info.time_to_ready_s = await launch.wait_ready(self.client, self.ready_timeout_s)
            except asyncio.CancelledError:
                await self._stop_locked()
                raise
            except Exception as exc:
                info.error = f"{type(exc).__name__}: {exc}"
                self._set_state(ServerState.FAILED, f"did not become ready: {info.error}")
                await self._stop_locked(final_state=ServerState.FAILED, detail=f"did not become ready: {info.error}")
                return info
            with contextlib.suppress(Exception):  # the manifest's server fields; a failed read costs nothing
                launch.record_server(await self.client.server_info())
            self._set_state(ServerState.READY,
                            f"{launch.profile.name} ready in {info.time_to_ready_s:.1f} s on {launch.base_url}")
            await self.verify()
            return info

    async def verify(self) -> Verification | None:
        """Post-launch verification (``verify_server``) from ``/server_info``, the log and
        this run's records; the report goes to the listener."""
        from specdash.eagle3.verify import MIN_TOKENS_LIVE, verify_server

        if self.client is None:
            return None
        info = None
        with contextlib.suppress(Exception):
            info = await self.client.server_info()
        if self.profile is None and not info:
            return None
        lines = self.server.log_lines() if self.server is not None else []
        records = self.collector.records if self.collector is not None else []
        watch = self._collapse
        decided = watch is not None and watch.decision is not None
        need = watch.min_tokens if watch is not None else MIN_TOKENS_LIVE
        try:
            report = verify_server(self.profile or info, info or {}, lines, records if decided else [],
                                   min_tokens=need)
            if not decided:
                report = pending_acceptance(report, watch.tokens if watch is not None else 0, need)
        except Exception as exc:  # verification must never take the dashboard down
            report = FailedVerification(f"{type(exc).__name__}: {exc}")
        self.verification_report = report
        self.listener.verification(report)
        return report

    async def stop(self) -> None:
        """Stop the load and the server this session started (the whole process tree)."""
        async with self._lock:
            await self._stop_locked()

    async def _stop_locked(self, *, final_state: ServerState = ServerState.IDLE, detail: str = "") -> None:
        await self.stop_load()
        if self.collector is not None:
            await self.collector.stop()
        launch, self._launch = self._launch, None
        server = launch.server if launch is not None else None
        if server is not None:
            self._set_state(ServerState.STOPPING, "stopping the server (SIGTERM, then SIGKILL of the tree)")
            resume_if_stopped(server)  # a SIGSTOPped server acts on SIGTERM only once continued
            await launch.astop()
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()
        if self.rundir is not None:
            self.rundir.close()
        if server is not None or final_state != ServerState.IDLE:
            self._set_state(final_state, detail or "stopped")

    async def close(self) -> None:
        """Stop everything (app exit)."""
        await self.stop()
        if self.collector is not None:
            await self.collector.stop()

    def stop_now(self) -> None:
        """Synchronous last-resort stop (signal handlers / atexit): kill the server tree."""
        launch = self._launch
        if launch is not None:
            with contextlib.suppress(Exception):
                resume_if_stopped(launch.server)
                launch.stop()

    # -- load -----------------------------------------------------------------------------------
    async def run_load(self, *, loop: bool, concurrency: int | None = None, max_tokens: int | None = None) -> LoadStatus:
        """Drive the suite (once, or looping until :meth:`stop_load`) and return when done.

        Runs in the caller's task (the TUI runs it in an exclusive worker); a new run scope
        starts in the collector; every record is appended to the run directory.

        Raises:
            ProfileError: no suite.  RuntimeError: no ready server.
        """
        if self.suite is None:
            raise ProfileError("no suite chosen")
        if not self.connected:
            raise RuntimeError("no server is ready: launch one (or attach with --url) first")
        await self.stop_load()
        self.load = LoadStatus(running=True, loop=loop, concurrency=concurrency or self.load.concurrency,
                               suite=self.suite.name, max_tokens=max_tokens or self.load.max_tokens)
        self._load_stop = asyncio.Event()
        self._load_task = asyncio.current_task()
        self.listener.load_state(self.load)
        await self._drive()
        return self.load

    @property
    def load_running(self) -> bool:
        """True while the load driver sends requests."""
        return self._load_task is not None and not self._load_task.done() and self.load.running

    async def stop_load(self) -> None:
        """Stop the load driver: no new requests; in-flight ones are cancelled after 2 s."""
        task = self._load_task
        if task is None or task.done() or task is asyncio.current_task():
            return
        if self._load_stop is not None:
            self._load_stop.set()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(task), 2.0)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def set_concurrency(self, n: int) -> None:
        """The concurrency for the next load (a running load keeps its own)."""
        self.load.concurrency = max(1, int(n))
        self.listener.load_state(self.load)

    async def _drive(self) -> None:
        from specdash.bench.runner import send_suite, work_items
        from specdash.profile.chat import apply_prompt_format

        # raw-text prompts rendered with the target's chat template where the suite asks (as --bench does)
        suite, self.prompt_format = (apply_prompt_format(self.profile, self.suite) if self.profile is not None
                                     else (self.suite, {"format": "raw"}))
        st = self.load
        max_tokens = st.max_tokens or suite.suite.max_tokens
        st.max_tokens = max_tokens
        if self.rundir is None:
            await self._open_attached_rundir()
        label = f"{suite.name} ×{st.concurrency}" + (" (loop)" if st.loop else "")
        if self.collector is not None:
            self.collector.new_run(label)
        repeats = suite.suite.repeats
        offset = [0]
        stop = self._load_stop

        async def load(client, _stop: asyncio.Event) -> None:
            while True:
                rounds = LOOP_CHUNK if st.loop else 1
                items = work_items(suite, repeats * rounds, offset[0])
                offset[0] += repeats * rounds
                await send_suite(client, suite, items, concurrency=st.concurrency, max_tokens=max_tokens,
                                 on_record=self._on_record, stop=stop, keep=False)
                if not st.loop or stop.is_set():
                    break

        dog = self.watchdog or Watchdog(self.server, self.client, stall_s=self.stall_s)
        self.watchdog = dog
        fault = dog.fault
        try:
            if fault is None:
                fault = await dog.watch_load(load, self.client, on_fault=self._on_fault)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            st.error = f"{type(exc).__name__}: {exc}"
        finally:
            st.running = False
            self._remember_measurement()
            self._finish_run(suite.name, max_tokens, fault)
            if fault is not None and fault.dead:
                self._reap_soon()
            self.listener.load_state(st)

    def _finish_run(self, suite: str, max_tokens: int, fault: ServerFault | None) -> None:
        """The load's RUN into the run directory's ``summary.json`` (after the earlier loads of this
        launch): the collector's run-scoped figures, ``profile``, ``suite``, ``concurrency``,
        ``max_tokens``, ``source`` = ``"tui"``, and ``partial`` / ``partial_reason`` as the bench writes
        them (the cause when the watchdog ended the load).  Nothing is written for a load without a
        finished request; a write error is the load's error, never a crash."""
        if self.rundir is None or self.collector is None:
            return
        run = dict(self.collector.run_summary())
        if not run.get("requests") and not run.get("failed_requests"):
            return
        run.update(profile=self.profile.name if self.profile is not None else "attached", suite=suite,
                   concurrency=self.load.concurrency, max_tokens=max_tokens, source="tui",
                   simulated=bool(self.collector.snapshot().simulated),
                   partial=fault is not None, partial_reason=fault.reason if fault is not None else None)
        self._runs.append(run)
        try:
            self.rundir.write_summary(self._runs)
        except OSError as exc:
            self.load.error = f"summary.json could not be written: {exc}"

    async def _open_attached_rundir(self) -> None:
        """The run directory of an attached session's load, with the same manifest as the
        bench writes for an attached run (``attached: true``, what ``/server_info`` says)."""
        from specdash.launch import attached_profile, build_manifest, server_fields

        prof = self.profile or attached_profile()
        self.rundir = RunDir.create(self.out_dir, prof.name, checkpoint=False)
        self._runs = []
        manifest = build_manifest(prof, url=self.url or "", sglang_version=self.sglang_version,
                                  extra={"source": "tui"})
        with contextlib.suppress(Exception):  # a server that does not say costs the fields only
            manifest.update(server_fields(await self.client.server_info(), None))
        self.rundir.write_manifest(manifest)

    def _on_record(self, rec: dict) -> None:
        if self.rundir is not None:
            self.rundir.append_request(rec)
        if self.collector is not None:
            self.collector.add_record(rec)
        if rec.get("ok"):
            self.load.done += 1
        else:
            self.load.failed += 1
        self._watch_collapse(rec)  # (no listener call per record: the UI reads counts on its own clock)

    def _watch_collapse(self, rec: dict) -> None:
        """Feed the live collapse watch; when it decides (after the first few hundred tokens)
        verification runs again with this run's records (VERIFY_COLLAPSE)."""
        from specdash.eagle3.verify import CollapseWatch

        if self.profile is None and self.client is None:
            return
        if self._collapse is None:
            self._collapse = CollapseWatch()
        if self._collapse.decision is not None:
            return
        if self._collapse.feed(rec) is not None:
            self._verify_task = asyncio.get_running_loop().create_task(self.verify())


def _launch_info(spec: LaunchSpec) -> LaunchInfo:
    return LaunchInfo(
        argv=spec.redacted_argv(),
        env=spec.redacted_env(),
        shell_line=spec.shell_line(),
        asked=dict(spec.spec.asked),
        effective=spec.spec.effective(),
        adjustments=list(spec.spec.adjustments),
        rejections=list(spec.spec.rejections),
        base_url=spec.base_url,
    )

