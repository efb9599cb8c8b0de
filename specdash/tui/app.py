"""The interactive dashboard: pick a profile, launch (or attach), watch speculation live,
drive load, tweak, relaunch and save presets.

Architecture: a Textual-free :class:`~specdash.tui.session.Session` launches and stops
servers on the bench's launch path (:mod:`specdash.launch`) and drives load with the runner's
``send_suite``; a :class:`~specdash.collect.live.LiveCollector` polls into ring buffers; this
app redraws from ``collector.snapshot()`` on its own timer (default 4 Hz) and never inside a
poll.  Launch / stop / load run in exclusive workers; the session reports back through the
typed messages of :mod:`specdash.tui.messages`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.screen import Screen
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane

from specdash.bench.rundir import find_baseline_run
from specdash.collect.snapshot import empty_snapshot
from specdash.launch import PreflightBlocked
from specdash.results import output_tok_s
from specdash.tui import keys
from specdash.tui.advising import AdviceMixin
from specdash.tui.config import DEMO_SUITE, TABS, AppConfig
from specdash.tui.flows import FlowsMixin
from specdash.tui.livetune import LiveTune
from specdash.tui.messages import (
    LoadChanged,
    ServerStateChanged,
    SessionMessages,
    TuneChanged,
    VerificationChanged,
)
from specdash.tui.session import CONCURRENCY_STEPS, LaunchInfo, ServerState, Session
from specdash.tui.state import ViewState, startup_lines
from specdash.tui.terminal import ExitGuard, SafeLinuxDriver
from specdash.tui.widgets.advice import AdvicePanel, StatusBar
from specdash.tui.widgets.findings import VerifyBanner
from specdash.tui.widgets.gpu import GpuPanel
from specdash.tui.widgets.launch import LaunchPanel
from specdash.tui.widgets.live import LivePanel
from specdash.tui.widgets.log import LogPanel

if TYPE_CHECKING:
    import argparse

    from textual.driver import Driver
    from textual.notifications import Notification

    from specdash.advisor import Advice

COMPACT_WIDTH = 120
"""Below this many columns the panels use their compact layouts."""
COMPACT_HEIGHT = 34
"""Below this many rows too."""


class SpecdashApp(FlowsMixin, AdviceMixin, App[int]):
    """The dashboard (see module docstring).  Build it with :func:`create_app`."""

    CSS_PATH = "app.tcss"
    TITLE = "specdash"
    SUB_TITLE = "speculative decoding (EAGLE-3) on SGLang"
    BINDINGS = keys.bindings()
    #: Informational toasts stay short (they cover the metrics on an 80×24 terminal).
    NOTIFICATION_TIMEOUT = 3

    def __init__(self, config: AppConfig | None = None) -> None:
        super().__init__()
        self.config = config or AppConfig()
        self.session = Session(
            url=self.config.url, api_key=self.config.api_key, out_dir=self.config.out_dir,
            listener=SessionMessages(self), intervals=self.config.intervals, gpu_source=self.config.gpu_source,
            gpu_exporters=self.config.gpu_exporters,
            ready_timeout_s=self.config.ready_timeout_s, sglang_version=self.config.sglang_version,
            baseline_tok_s=self.config.baseline_tok_s, stall_s=self.config.stall_s,
        )
        if self.config.concurrency:
            self.session.load.concurrency = self.config.concurrency
        self.session.load.max_tokens = self.config.max_tokens
        self.live_tune = LiveTune(self.session, lambda st: self.post_message(TuneChanged(st)),
                                  preset_dir=self.config.preset_dir)
        self.profile_error: str | None = None
        self.advice: Advice | None = None
        self.advice_note = ViewState().advice_note
        self._advice_key: tuple | None = None
        self._advice_at = 0.0
        #: The inputs each panel (and ``"_status"``) was last drawn from (see :meth:`redraw`).
        self._drawn: dict[str, tuple] = {}
        self._preview: LaunchInfo | None = None
        self._baseline_label = ""
        self._baseline_key: tuple | None = None
        self.first_frame_s: float | None = None
        self._t0 = time.monotonic()
        #: Set by :func:`run_tui`: SIGHUP / SIGTERM / terminal loss → exit, forced after a grace period.
        self.exit_guard: ExitGuard | None = None
        #: The verification toast on screen and the finding codes it names.
        self._verify_toast: tuple[Notification | None, set[str]] = (None, set())
        self._loop: asyncio.AbstractEventLoop | None = None

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, but on Linux one whose terminal writer cannot hang the app."""
        from textual.drivers.linux_driver import LinuxDriver

        cls = super().get_driver_class()
        return SafeLinuxDriver if cls is LinuxDriver else cls

    def notify(self, message: str, *, title: str = "", severity: str = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """Textual's toast, never parsed as markup whoever asks (``Widget.notify`` passes
        ``markup=True``): a toast carries outside text — server details and log tails, profile and
        suite errors, exception messages — and ``[/x]`` in one raised ``MarkupError`` (see
        :mod:`specdash.tui.format`).  Thread-safe, as Textual's."""
        super().notify(str(message), title=str(title), severity=severity, timeout=timeout, markup=False)

    def request_exit_threadsafe(self) -> None:
        """From any thread or a signal handler: stop everything and exit."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.shutdown_and_exit)

    # -- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◆")
        yield StatusBar(id="status")
        yield VerifyBanner(id="verify-banner")
        initial = self.config.frozen_tab if self.config.frozen is not None else "launch"
        with TabbedContent(initial=initial, id="tabs"):
            with TabPane("Launch [1]", id="launch"):
                yield LaunchPanel(id="launch-panel")
            with TabPane("Live [2]", id="live"):
                yield LivePanel(id="live-panel")
            with TabPane("GPU [3]", id="gpu"):
                yield GpuPanel(id="gpu-panel")
            with TabPane("Log [4]", id="log"):
                yield LogPanel(id="log-panel")
            with TabPane("Suggestions [5]", id="advice"):
                yield AdvicePanel(id="advice-panel")
        yield Footer()
        yield Static(keys.key_line(), id="key-line")

    @property
    def compact(self) -> bool:
        """A narrow or short terminal (below :data:`COMPACT_WIDTH` columns or :data:`COMPACT_HEIGHT` rows): the
        panels switch to their compact layouts (``-compact`` on the screen), nvitop-style."""
        w, h = self.size
        return w < COMPACT_WIDTH or h < COMPACT_HEIGHT

    def _apply_size(self) -> None:
        if self.screen_stack and self.screen_stack[0].has_class("-compact") != self.compact:
            self.screen_stack[0].set_class(self.compact, "-compact")
            self._drawn.clear()

    def on_resize(self, event: events.Resize) -> None:
        """Switch the compact layout on or off and redraw (the redraw timer checks it too)."""
        self._apply_size()
        self.call_after_refresh(self.redraw)

    def on_mount(self) -> None:
        """Start the redraw timer, then (after the first frame) the session."""
        self._apply_size()
        self.set_interval(1.0 / max(2.0, self.config.redraw_hz), self.redraw, name="redraw")
        from specdash.tui.terminal import release_free_memory

        self.set_interval(30.0, release_free_memory, name="release-memory")
        self.redraw()
        self.call_after_refresh(self._first_frame)
        if self.config.frozen is None:
            self.call_after_refresh(self._start)
        self._loop = asyncio.get_running_loop()
        if self.exit_guard is None:  # embedded / tests: run_tui installs Python-level handlers instead
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                for sig in (signal.SIGTERM, signal.SIGHUP):
                    self._loop.add_signal_handler(sig, self._on_signal)

    async def on_unmount(self) -> None:
        """Stop what specdash started whatever the way out (quit, an exception, a test that
        failed half-way): the session's servers never outlive the app."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.session.close(), 60)
        self.session.stop_now()

    def _first_frame(self) -> None:
        if self.first_frame_s is None:
            self.first_frame_s = time.monotonic() - self._t0

    def _on_signal(self) -> None:
        self.shutdown_and_exit()

    async def _start(self) -> None:
        """Resolve the profile / suite / baseline and start what the config asks for."""
        from specdash.profile import ProfileError, list_suites, load_suite

        cfg = self.config
        suite_name = cfg.suite or DEMO_SUITE
        try:
            self.session.suite = load_suite(suite_name)
            self.session.load.suite = self.session.suite.name
        except ProfileError as exc:
            self.notify(str(exc), title="suite", severity="error", timeout=10)
            names = [n for n, _ in list_suites()]
            if names:
                with contextlib.suppress(ProfileError):
                    self.session.suite = load_suite(names[0])
        self._match_baseline()
        self.leftovers_worker()
        if cfg.url:
            self.attach_worker()
            return
        if cfg.profile:
            ok = self.use_profile(cfg.profile)
            autostart = cfg.demo if cfg.autostart is None else cfg.autostart
            if ok and autostart:
                self.launch_worker(force=cfg.force)
        else:
            self.action_choose_profile()

    def _match_baseline(self) -> None:
        """The ``--baseline`` figure: the newest run of that profile whose suite, max_tokens and
        concurrency match the current load (looked up again when the load changes); else
        none, and the label says so."""
        cfg, s = self.config, self.session
        if not cfg.baseline or cfg.baseline_tok_s is not None:
            return
        suite = s.suite.name if s.suite is not None else s.load.suite or None
        max_tokens = s.load.max_tokens or (s.suite.suite.max_tokens if s.suite is not None else None)
        key = (suite, max_tokens, s.load.concurrency)
        if key == self._baseline_key:
            return
        self._baseline_key = key
        run = find_baseline_run(cfg.out_dir, cfg.baseline, suite=suite, max_tokens=max_tokens,
                                concurrency=s.load.concurrency)
        if run is None:
            s.baseline_tok_s = None
            self._baseline_label = f"no matching baseline run (suite {suite}, concurrency {s.load.concurrency})"
        else:
            s.baseline_tok_s = float(output_tok_s(run))  # a baseline run has one (find_baseline_run)
            self._baseline_label = (f"({cfg.baseline}: suite {run.get('suite', suite)}, "
                                    f"concurrency {run.get('concurrency', s.load.concurrency)})")
        self._drawn.clear()

    # -- profile --------------------------------------------------------------------------------
    def use_profile(self, name_or_path: str) -> bool:
        """Load ``name_or_path`` (applying the time-scale override), preflight it and preview
        its launch.  A profile that cannot be read is shown, not raised.  True when usable."""
        from specdash.profile import ProfileError, load_profile

        try:
            prof = load_profile(name_or_path)
            if self.config.time_scale and prof.server.launcher == "sim":
                sim = prof.sim.model_copy(update={"time_scale": self.config.time_scale})
                path = prof.path
                prof = prof.model_copy(update={"sim": sim})
                prof._path = path
        except ProfileError as exc:
            self.profile_error = str(exc)
            self.notify(str(exc), title="profile", severity="error", timeout=10)
            self._drawn.clear()
            return False
        self.profile_error = None
        self.session.set_profile(prof)
        self._refresh_profile()
        return True

    def _refresh_profile(self) -> None:
        self.session.run_preflight()
        self.profile_error = self.session.preflight_error
        self._preview = self.session.preview_launch()
        self.sub_title = self.session.profile.name if self.session.profile else ""
        self._drawn.clear()
        self.refresh_bindings()

    # -- view -----------------------------------------------------------------------------------
    def view(self) -> ViewState:
        """The :class:`ViewState` for this redraw (the frozen one in snapshot tests)."""
        if self.config.frozen is not None:
            return self.config.frozen
        s = self.session
        snap = s.collector.snapshot() if s.collector is not None else empty_snapshot(s.url)
        launch = s.launch_info if s.launch_info is not None else self._preview
        return ViewState(
            snapshot=snap, server_state=s.state, state_detail=s.state_detail, profile=s.profile,
            profile_error=self.profile_error, preflight=s.preflight_report, launch=launch,
            verification=s.verification_report, load=replace(s.load), advice=self.advice,
            advice_note=self.advice_note, baseline_tok_s=s.baseline_tok_s, baseline_label=self._baseline_label,
            mode="attach" if self.config.url else ("demo" if self.config.demo else "launch"), url=s.url or (
                launch.base_url if launch else None),
            startup_log=startup_lines(snap) if self.active_tab == "launch" else (), now=time.monotonic(),
            tune=self.live_tune.status if self.live_tune.status.started is not None else None,
            sweep=self.sweep_info(),
        )

    @property
    def active_tab(self) -> str:
        """Id of the visible panel."""
        with contextlib.suppress(Exception):
            return self.query_one(TabbedContent).active or "launch"
        return "launch"

    def redraw(self) -> None:
        """Draw the status line, the banner and the visible panel from a fresh snapshot.

        Panels that are hidden are not drawn; the visible one is redrawn only when its
        inputs changed (the snapshot's ``version``, the server or load state, …).  A message
        that arrives while the app is shutting down (its widgets already gone) draws nothing."""
        if not self.is_running or not self.screen_stack or not self.screen_stack[0].query(StatusBar):
            return
        self._apply_size()
        if self.config.frozen is None:
            self.session.check_alive()
            self._match_baseline()
        v = self.view()
        tab = self.active_tab
        key = (v.snapshot.version, v.server_state, v.state_detail, id(v.profile), v.profile_error, id(v.preflight),
               id(v.launch), v.launch.time_to_ready_s if v.launch else None, id(v.verification), id(v.advice),
               v.load.running, v.load.done, v.load.concurrency, v.load.suite, v.baseline_tok_s, id(v.sweep),
               int(v.now) if v.server_state == ServerState.STARTING else 0, self.compact)
        if self._drawn.get("_status") != key:
            self.query_one(StatusBar).show(v)
            self.query_one(VerifyBanner).show(v)
            self.screen_stack[0].set_class(v.collapsed, "-collapsed")
            self._drawn["_status"] = key
        if self._drawn.get(tab) == key:
            return
        self._drawn[tab] = key
        if tab == "launch":
            self.query_one(LaunchPanel).show(v)
        elif tab == "live":
            self.query_one(LivePanel).show(v, compact=self.compact)
        elif tab == "gpu":
            self.query_one(GpuPanel).show(v, compact=self.compact)
        elif tab == "log":
            self.query_one(LogPanel).show(v)
        elif tab == "advice":
            self.query_one(AdvicePanel).show(v)
        if self.config.frozen is None:
            self._maybe_advise(v)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Draw a panel as soon as it is shown."""
        self.redraw()

    # -- session messages -----------------------------------------------------------------------
    def on_server_state_changed(self, msg: ServerStateChanged) -> None:
        """React to the server's state (auto-load in demo mode, notifications)."""
        self.refresh_bindings()
        if msg.state == ServerState.READY:
            self.notify(msg.detail, title="server ready", timeout=3)
            autoload = self.config.demo if self.config.autoload is None else self.config.autoload
            if autoload:
                self.load_worker(loop=True)
                self.action_show_tab("live")
        elif msg.state == ServerState.ATTACHED:
            autoload = bool(self.config.autoload)
            if autoload:
                self.load_worker(loop=True)
        elif msg.state == ServerState.FAILED:
            self.notify(msg.detail, title="server", severity="error", timeout=10)
        elif msg.state in (ServerState.EXITED, ServerState.STALLED) and self.session.fault is not None:
            # the watchdog's cause with the server's last log lines (the Launch panel keeps them)
            self.notify(msg.detail, title=f"server {msg.state.value}", severity="error", timeout=20)
        self.redraw()

    def on_verification_changed(self, msg: VerificationChanged) -> None:
        """Show post-launch verification prominently: a toast for problems a report newly
        found (none while acceptance is still waiting for tokens); a toast whose finding a
        later verification withdrew is taken down."""
        from textual.notifications import Notification, Notify

        from specdash.tui.format import finding_get

        rep = msg.report
        bad = {str(finding_get(f, "code")) for f in getattr(rep, "findings", []) or []
               if finding_get(f, "severity") in ("error", "warning")}
        toast, codes = self._verify_toast
        if toast is not None and not codes <= bad:
            with contextlib.suppress(Exception):
                self._unnotify(toast)
            toast, codes = None, set()
        new = sorted(bad - codes)
        if new and str(getattr(rep, "status", "")) != "waiting":
            failed = str(getattr(rep, "status", "")) == "failed"
            toast = Notification("post-launch verification: " + ", ".join(sorted(bad)), "verification",
                                 "error" if failed else "warning", 10 if failed else 6)
            self.post_message(Notify(toast))
            codes = bad
        self._verify_toast = (toast, codes)
        self.redraw()

    def on_load_changed(self, msg: LoadChanged) -> None:
        """Refresh the footer (stop / loop availability) when the load starts or stops."""
        self.refresh_bindings()
        st = msg.status
        if st.error:
            self.notify(st.error, title="load", severity="error")
        elif not st.running and st.done and self.session.fault is None:  # a fault has its own toast
            self.notify(f"load finished: {st.done} requests ({st.failed} failed), suite {st.suite}", timeout=3)

    def on_tune_changed(self, msg: TuneChanged) -> None:
        """The live tune moved on: redraw the Suggestions panel (its section of the tune)."""
        self._drawn.pop("advice", None)
        self._drawn.pop("_status", None)
        self.redraw()

    # -- workers: server ------------------------------------------------------------------------
    @work(exclusive=True, group="server")
    async def launch_worker(self, force: bool = False) -> None:
        """Launch (asking before overriding preflight errors)."""
        from specdash.profile import ProfileError
        from specdash.tui.screens.dialogs import ConfirmScreen

        self.query_one(LogPanel).reset()
        self.advice, self._advice_key = None, None
        try:
            try:
                await self.session.launch(force=force)
            except PreflightBlocked as exc:
                codes = ", ".join(exc.report.codes("error"))
                self._drawn.clear()
                self.action_show_tab("launch")
                yes = await self.push_screen_wait(ConfirmScreen(
                    f"Preflight found errors ({codes}).\nThe server may start and silently accept nothing.\n"
                    "Launch anyway?", yes="Launch anyway", no="Cancel", danger=True))
                if yes:
                    await self.session.launch(force=True)
        except ProfileError as exc:
            self.notify(str(exc), title="launch", severity="error", timeout=10)
        except Exception as exc:
            self.notify(f"{type(exc).__name__}: {exc}", title="launch failed", severity="error", timeout=10)
        finally:
            self._drawn.clear()
            self.refresh_bindings()

    @work(exclusive=True, group="server")
    async def stop_worker(self) -> None:
        """Stop the load and the server."""
        await self.session.stop()
        self._drawn.clear()
        self.refresh_bindings()

    @work(exclusive=True, group="server")
    async def attach_worker(self) -> None:
        """Attach to ``--url``."""
        await self.session.attach()
        self.refresh_bindings()

    # -- workers: load --------------------------------------------------------------------------
    @work(exclusive=True, group="load")
    async def load_worker(self, loop: bool) -> None:
        """Drive the suite once or in a loop (the session's load driver)."""
        try:
            await self.session.run_load(loop=loop, concurrency=self.session.load.concurrency,
                                        max_tokens=self.session.load.max_tokens)
        except Exception as exc:
            self.notify(str(exc), title="load", severity="warning")
        self.refresh_bindings()

    # -- actions --------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out actions that cannot run now (shown dimmed in the footer)."""
        s = self.session
        attached = bool(self.config.url)
        if self.config.frozen is not None:
            return True
        tuning = self.live_tune.status.running
        if tuning and action in ("launch", "restart", "tweak", "load_once", "load_loop", "live_tune"):
            return None  # the tune launches its own servers
        if action in ("launch", "restart", "tweak", "save_preset") and (attached or s.profile is None):
            return None
        if action == "stop_server":
            return True if (s.server_running or s.load_running) else None
        if action in ("load_once", "load_loop"):
            return True if (s.connected or s.load_running) else None
        return True

    def action_launch(self) -> None:
        """Launch the chosen profile."""
        if self.session.server_running:
            self.notify("a server is already running: r restarts it, s stops it", severity="warning")
            return
        self.launch_worker(force=self.config.force)

    def action_stop_server(self) -> None:
        """Stop what specdash started (or just the load when attached)."""
        if self.config.url:
            self.run_worker(self.session.stop_load(), group="load", exclusive=True)
            return
        self.stop_worker()

    def action_restart(self) -> None:
        """Stop and launch again."""
        self.launch_worker(force=self.config.force)

    def action_load_once(self) -> None:
        """Send the suite once."""
        self.load_worker(loop=False)
        self.action_show_tab("live")

    def action_load_loop(self) -> None:
        """Toggle the looping load."""
        if self.session.load_running:
            self.run_worker(self.session.stop_load(), group="load-stop", exclusive=True)
            self.notify("load stopping (in-flight requests finish)", timeout=3)
            return
        self.load_worker(loop=True)
        self.action_show_tab("live")

    def action_concurrency(self, step: int) -> None:
        """Move the concurrency one step up or down the ladder (applies to the next load)."""
        cur = self.session.load.concurrency
        ladder = list(CONCURRENCY_STEPS)
        idx = min(range(len(ladder)), key=lambda i: abs(ladder[i] - cur))
        new = ladder[max(0, min(len(ladder) - 1, idx + step))]
        self.session.set_concurrency(new)
        note = " (restart the load to apply)" if self.session.load_running else ""
        self.notify(f"concurrency {new}{note}", timeout=2)
        self._drawn.clear()

    def action_show_tab(self, tab: str) -> None:
        """Show a panel."""
        if tab in TABS:
            self.query_one(TabbedContent).active = tab

    def _log_panel(self) -> LogPanel:
        self.action_show_tab("log")
        return self.query_one(LogPanel)

    def action_log_search(self) -> None:
        """The Log panel's search box."""
        self._log_panel().open_search()

    def action_log_filter(self) -> None:
        """The Log panel's next filter."""
        self.notify(f"log: {self._log_panel().cycle_filter()}", timeout=2)

    def action_log_wrap(self) -> None:
        """Wrap the Log panel's lines or cut them."""
        self.notify(f"log lines {'wrapped' if self._log_panel().toggle_wrap() else 'cut at the edge'}", timeout=2)

    def action_help(self) -> None:
        """The key help."""
        from specdash.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    # -- quitting -------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Quit; stop what specdash started, asking first while a server is running."""
        self.quit_worker()

    @work(exclusive=True, group="quit")
    async def quit_worker(self) -> None:
        """Confirm (when a server runs), stop everything, exit."""
        from specdash.tui.screens.dialogs import ConfirmScreen

        if self.session.server_running or self.live_tune.status.running:
            what = ("A live tune is running (with a server it launched)" if self.live_tune.status.running
                    else "A server specdash started is running")
            yes = await self.push_screen_wait(ConfirmScreen(
                f"{what}.\nStop it and quit?", yes="Stop and quit", no="Stay"))
            if not yes:
                return
        await self._stop_everything()
        self.exit(0)

    def shutdown_and_exit(self) -> None:
        """Stop everything and exit without asking (signals)."""
        async def go() -> None:
            await self._stop_everything()
            self.exit(0)

        self.run_worker(go(), group="quit", exclusive=True)

    async def _stop_everything(self) -> None:
        self.workers.cancel_group(self, "load")
        tune = [w for w in self.workers if w.group == "tune" and not w.is_finished]
        self.workers.cancel_group(self, "tune")  # the tune's run stops its own server on the way out
        for w in tune:
            with contextlib.suppress(Exception):
                await w.wait()
        self.workers.cancel_group(self, "server")  # a launch waiting for ready holds the session lock
        await self.session.close()

    # -- command palette ------------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette: Textual's commands plus every registry binding (same help text)."""
        yield from super().get_system_commands(screen)
        seen = set()
        for k in keys.KEYS:
            if k.action in seen or k.action == "quit":
                continue
            seen.add(k.action)
            yield SystemCommand(f"{k.description} ({keys.key_display(k)})", k.help, partial(self.run_action, k.action))


def create_app(config: AppConfig | None = None) -> SpecdashApp:
    """The app factory (tests inject a config)."""
    return SpecdashApp(config)


def run_tui(args: argparse.Namespace) -> int:
    """Run the dashboard for the ``specdash`` command line (``cli.py``); returns the exit code.

    Whatever happens (normal quit, an exception, a signal), a server this process started
    is stopped before returning.
    """
    from specdash.sglang.process import install_signal_handlers, stop_all

    app = create_app(AppConfig.from_args(args))

    def stop_servers() -> None:
        app.session.stop_now()
        stop_all()

    guard = ExitGuard(app.request_exit_threadsafe, stop_servers)
    app.exit_guard = guard
    try:
        with contextlib.suppress(Exception):
            install_signal_handlers()
        guard.install()  # after install_signal_handlers: SIGTERM and SIGINT go through the guard
        try:
            rc = app.run()
        except KeyboardInterrupt:  # an interrupt that reached Python's default handler (before the guard)
            rc = 130
            if guard.reason is None:
                guard.reason, guard.exit_code = "SIGINT", 130
    finally:
        stop_servers()
        if guard.reason is not None:
            # The terminal is gone or we were told to go: do not wait on interpreter shutdown
            # (a thread blocked on the dead tty must not keep the process alive).
            os._exit(guard.exit_code)
        guard.uninstall()
    return int(rc or 0) if app.return_code is None else int(app.return_code)
