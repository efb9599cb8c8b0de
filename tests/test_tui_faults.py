"""The dashboard under faults of the server it drives (issue #23, item 9): the bench's watchdog.

A simulated server is SIGKILLed, SIGSTOPped (under the dashboard's own looping load, and idle) or, when
attached, killed: the load stops at once — no request is sent after the watchdog saw the fault, none is
recorded as a failure the server's death caused — the state says the cause with the server's last log
lines, ``summary.json`` gets the load's RUN marked partial with the bench's ``partial_reason``, and nothing
is left running.  Waits are deadlines for a hang (``wait_for``), never speed bounds: how long detection
took is measured and printed, not asserted.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from specdash.tui.app import create_app
from specdash.tui.session import STOPPED_REASON, ServerState
from tests.procs import process_gone
from tests.test_tui import SIZE, config, wait_for


def _count_sends(session) -> list[float]:
    """Wrap the session's client so that every request it starts is timestamped (monotonic s)."""
    starts: list[float] = []
    client = session.client
    orig = client.generate_stream

    async def counted(*a, **kw):
        starts.append(time.monotonic())
        return await orig(*a, **kw)

    client.generate_stream = counted
    return starts


def _records(run_dir: Path) -> list[dict]:
    path = run_dir / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


async def test_sigkill_under_load_stops_the_load_and_shows_the_cause(tmp_path: Path) -> None:
    app = create_app(config(tmp_path, profile="demo-eagle3", autostart=True, autoload=True, concurrency=2))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY and s.load_running, what="server ready, load on")
        starts = _count_sends(s)
        await wait_for(pilot, lambda: s.load.done >= 4, what="some finished requests")
        pid, run_dir = s.server.pid, s.launch_info.run_dir
        faults: list[float] = []  # when the cause was shown (the load's stop is set in the same step)
        set_state = s._set_state
        s._set_state = lambda st, d="": (faults.append(time.monotonic()) if st == ServerState.EXITED else None,
                                         set_state(st, d))
        t_kill = time.monotonic()
        os.killpg(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: s.state == ServerState.EXITED and not s.load_running, what="exit noticed")
        print(f"SIGKILL noticed after {faults[0] - t_kill:.3f} s; load stopped after {time.monotonic() - t_kill:.3f} s")
        head, _, tail = s.state_detail.partition("\n")
        assert head.startswith("server exited (killed by SIGKILL, exit code -9); the load was stopped after ")
        assert f"partial results in {run_dir}/summary.json" in head
        # the dead server's last log lines, as it wrote them
        assert tail.split("\n") == ["--- last server log lines ---",
                                     *[ln if len(ln) <= 300 else ln[:300] + " …"
                                       for ln in s.server.log_tail(10).splitlines()]]
        # at most one request per worker can have been started between the kill and the first failure it
        # caused; none after the watchdog saw it
        assert sum(t > t_kill for t in starts) <= 2
        assert not [t for t in starts if t > faults[0]]
        recs = _records(run_dir)
        assert recs and all(r["ok"] for r in recs)  # a request the death broke is not a result
        summary = json.loads((run_dir / "summary.json").read_text())
        run = summary["runs"][-1]
        assert run["partial"] is True and run["partial_reason"] == "server exited (killed by SIGKILL, exit code -9)"
        assert run["requests"] == len(recs) and run["source"] == "tui" and run["profile"] == "demo-eagle3"
        toasts = [n.message for n in app._notifications]
        assert any(m.startswith("server exited (killed by SIGKILL") and "--- last server log lines ---" in m
                   for m in toasts)
        assert app.check_action("launch", ()) is True  # r / l launch it again
        await wait_for(pilot, lambda: process_gone(pid), what="the server's tree reaped")
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="app exit")


async def test_sigstop_under_load_is_a_stall_not_ready(tmp_path: Path) -> None:
    app = create_app(config(tmp_path, profile="demo-eagle3", autostart=True, autoload=True, concurrency=2,
                            stall_s=2.0))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY and s.load_running, what="server ready, load on")
        await wait_for(pilot, lambda: s.load.done >= 2, what="some finished requests")
        pid, run_dir = s.server.pid, s.launch_info.run_dir
        t_stop = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        await wait_for(pilot, lambda: s.state == ServerState.STALLED and not s.load_running, what="the stall")
        print(f"SIGSTOP shown as STALLED after {time.monotonic() - t_stop:.3f} s")
        head = s.state_detail.split("\n", 1)[0]
        # whichever saw it first: the redraw clock's process state, or the load's token watchdog
        assert head.startswith(STOPPED_REASON) or head.startswith(
            "no token progress for 2 s (the server process is stopped: SIGSTOP or SIGTSTP?)"), head
        assert "the load was stopped after" in head and "s stops it (SIGCONT first)" in head
        run = json.loads((run_dir / "summary.json").read_text())["runs"][-1]
        assert run["partial"] is True and run["partial_reason"] in (
            STOPPED_REASON, "no token progress for 2 s")
        assert all(r["ok"] for r in _records(run_dir))
        assert s.server_running  # still alive (stopped): quit asks, s stops it
        status = app.query_one("#status").content.plain
        assert " STALLED " in status and "READY" not in status
        await pilot.press("s")  # SIGCONT, then SIGTERM of the tree
        await wait_for(pilot, lambda: s.state == ServerState.IDLE and process_gone(pid), what="the stopped server stopped")
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="app exit")


async def test_a_stopped_idle_server_shows_stalled_then_ready_again(tmp_path: Path) -> None:
    """No load in flight: the process state tells (polls would just time out); SIGCONT before any
    load noticed makes it READY again, with nothing lost."""
    app = create_app(config(tmp_path, profile="demo-baseline", autostart=True, autoload=False))
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="server ready")
        pid = s.server.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            await wait_for(pilot, lambda: s.state == ServerState.STALLED, what="the stopped process seen")
            assert s.state_detail.split("\n", 1)[0].startswith(STOPPED_REASON)
            assert app.check_action("load_once", ()) is None  # no load is sent to a stopped server
        finally:
            os.kill(pid, signal.SIGCONT)
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="ready again")
        assert "continued" in s.state_detail and s.fault is None
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="quit question")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, what="app exit")
    assert process_gone(pid)


async def test_an_attached_server_that_dies_under_load(tmp_path: Path) -> None:
    """Attached (specdash did not start it): the first broken-off request probes /health; the load
    stops with the bench's reason, the run directory is finished partial."""
    from specdash.sim.testing import SimProcess

    with SimProcess(["--model-path", "sim:llama-3.1-8b", "--enable-metrics", "--time-scale", "4"]) as sim:
        app = create_app(config(tmp_path, url=sim.url, autoload=True, concurrency=2))
        async with app.run_test(size=SIZE) as pilot:
            s = app.session
            await wait_for(pilot, lambda: s.state == ServerState.ATTACHED and s.load.done >= 2, what="attached, load")
            starts = _count_sends(s)
            sim.proc.kill()
            t_kill = time.monotonic()
            await wait_for(pilot, lambda: s.state == ServerState.FAILED and not s.load_running, what="gone noticed")
            assert s.state_detail.startswith(f"the attached server at {sim.url} stopped answering (/health failed "
                                             "after a request broke off)"), s.state_detail
            assert sum(t > t_kill for t in starts) <= 2
            run_dir = s.rundir.path
            run = json.loads((run_dir / "summary.json").read_text())["runs"][-1]
            assert run["partial"] is True and run["partial_reason"].startswith("the attached server at")
            assert all(r["ok"] for r in _records(run_dir))
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running, what="app exit")


async def test_a_dead_scheduler_is_a_dead_server(tmp_path: Path) -> None:
    """SGLang keeps its HTTP server up when its scheduler subprocess is killed and only logs it (its
    SIGCHLD handler): the simulator does the same on SIGUSR1.  The watchdog reads SGLang's line, so the
    cause is shown at once (not after the stall timeout), the load stops and the server's tree is killed."""
    app = create_app(config(tmp_path, profile="demo-eagle3", autostart=True, autoload=True, concurrency=2))
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY and s.load.done >= 2, what="ready, load on")
        pid, run_dir = s.server.pid, s.launch_info.run_dir
        t0 = time.monotonic()
        os.kill(pid, signal.SIGUSR1)
        await wait_for(pilot, lambda: s.state == ServerState.EXITED and not s.load_running, what="the dead child")
        print(f"dead scheduler shown after {time.monotonic() - t0:.3f} s (stall timeout {s.stall_s:g} s)")
        head = s.state_detail.split("\n", 1)[0]
        assert head.startswith(f"a server process died (pid {pid + 1}, killed by SIGKILL, exit code -9; SGLang "
                               f"logged \"Child process unexpectedly failed with exitcode=9. pid={pid + 1}\")"), head
        assert not s.fault.stalled and s.fault.child == pid + 1
        run = json.loads((run_dir / "summary.json").read_text())["runs"][-1]
        assert run["partial"] is True and run["partial_reason"].startswith("a server process died")
        await wait_for(pilot, lambda: process_gone(pid), what="the server's tree killed")
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="app exit")


def test_watchdog_reads_sglangs_dead_child_line_of_a_real_process(tmp_path: Path) -> None:
    """Both spellings SGLang has used, read from a real process's output through its log ring; lines
    before the first look (start-up) do not count."""
    import sys

    from specdash.bench.watchdog import Watchdog
    from specdash.sglang.process import ServerProcess

    go = tmp_path / "go"
    script = ("import os, sys, time\n"
              "print('[2026-12-01 10:00:00] Child process unexpectedly failed with exitcode=256. pid=11', flush=True)\n"
              f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
              "print('[2026-12-01 10:00:01] Child process unexpectedly failed with an exit code 9. pid=12', flush=True)\n"
              "time.sleep(30)\n")
    srv = ServerProcess([sys.executable, "-c", script], run_dir=tmp_path)
    with srv.start():
        deadline = time.monotonic() + 20
        while srv.ring.seq < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        dog = Watchdog(srv)
        assert dog.check() is None  # the first look starts the count: the start-up line is not a fault
        go.touch()
        while srv.ring.seq < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        f = dog.check()
        assert f is not None and f.child == 12 and f.dead and f.exit_code is None
        assert f.reason.startswith("a server process died (pid 12, killed by SIGKILL, exit code -9; SGLang logged")
