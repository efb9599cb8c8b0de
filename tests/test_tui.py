"""Pilot tests: the real dashboard driving the real simulator (no fakes in the product).

Each test waits on conditions (``wait_for``), never on fixed sleeps; the simulator runs
with a time scale so a launch takes about a second.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

import psutil
import pytest

from specdash.collect.snapshot import PollIntervals
from specdash.tui.app import AppConfig, SpecdashApp, create_app
from specdash.tui.session import ServerState
from tests.procs import process_gone

FAST = PollIntervals(metrics=0.3, server_info=0.6, gpu=0.5, logs=0.1)
SIZE = (150, 45)


async def wait_for(pilot, cond, timeout: float = 20.0, what: str = "condition") -> None:
    """Pause the pilot until ``cond()`` is true (fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def config(tmp_path: Path, **kw) -> AppConfig:
    base = dict(out_dir=tmp_path / "runs", preset_dir=tmp_path / "presets", intervals=FAST, time_scale=4.0,
                max_tokens=48, concurrency=2, redraw_hz=4.0)
    base.update(kw)
    return AppConfig(**base)


def children() -> list[psutil.Process]:
    """This process's live descendants (one that exits while being looked at is left out)."""
    return [p for p in psutil.Process().children(recursive=True) if not process_gone(p.pid)]


def screen_text(app: SpecdashApp, selector: str = "Static") -> str:
    """Plain text of what the Static widgets on the active screen show."""
    from rich.console import Console

    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    for w in app.screen.query(selector):
        r = w.content
        if isinstance(r, str):
            console.print(r, markup=False)
        elif hasattr(r, "__rich_console__") or hasattr(r, "__rich__"):
            console.print(r)
    return console.export_text()


def _tile_value(text: str, title: str) -> float:
    """The number under a tile title in the live panel's text (0 when absent or '—')."""
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        col = line.find(title)
        if col >= 0:
            m = re.match(r"\s*([\d.,]+)", lines[i + 1][col:])
            return float(m.group(1).replace(",", "")) if m else 0.0
    return 0.0


async def test_demo_launch_tweak_relaunch_save_quit(tmp_path: Path) -> None:
    """--demo: launch demo-eagle3, see accept length appear, change topk, relaunch, save a
    preset (never overwriting without asking), quit — and no process is left behind."""
    before = {p.pid for p in children()}
    app = create_app(config(tmp_path, profile="demo-eagle3", demo=True))
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="server ready")
        assert s.launch_info.time_to_ready_s is not None
        await wait_for(pilot, lambda: (s.collector.run_summary().get("accept_length") or 0) > 1.2,
                       what="accept length")
        await wait_for(pilot, lambda: app.active_tab == "live", what="live tab")
        await wait_for(pilot, lambda: _tile_value(screen_text(app, "#live-stats"), "Accept length (run)") > 1.2,
                       what="accept length on screen")
        # the GPU sampler polls on its own period: under load its first simulated reading may lag the tiles
        await wait_for(pilot, lambda: s.collector.snapshot().gpu.status == "simulated", what="simulated GPUs")
        snap = s.collector.snapshot()
        assert snap.gpu.status == "simulated" and snap.gpu.devices
        assert snap.latest_metrics is not None
        assert any(e.kind == "ready" for e in snap.log)  # the server log is tailed and classified
        first_pid = s.server.pid
        # the run directory receives every record as it arrives
        rundir = s.launch_info.run_dir
        await wait_for(pilot, lambda: (rundir / "requests.jsonl").is_file(), what="requests.jsonl")

        # o stops the looping load (Pilot's key presses wait for an idle process, so the rest of
        # the test runs without load: the relaunch below does not restart it)
        await pilot.press("o")
        await wait_for(pilot, lambda: not s.load_running, what="load stopped")
        app.config.autoload = False

        # tweak: topk 1 → 2, relaunch
        await pilot.press("t")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "TweakScreen", what="tweak form")
        app.screen.query_one("#eagle_topk").value = "2"
        await pilot.pause()
        await pilot.click("#relaunch")
        await wait_for(pilot, lambda: s.server is not None and s.server.pid != first_pid
                       and s.state == ServerState.READY, what="relaunched server")
        await wait_for(pilot, lambda: (s.collector.snapshot().server_info or {}).get("speculative_eagle_topk") == 2,
                       what="server reports topk 2")
        assert s.profile.speculative.eagle_topk == 2

        # save as a preset
        await pilot.press("w")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "PromptScreen", what="name prompt")
        app.screen.query_one("#prompt-input").value = "my-tree"
        await pilot.press("enter")
        path = tmp_path / "presets" / "my-tree.toml"
        await wait_for(pilot, path.is_file, what="saved preset")
        text = path.read_text()
        assert "eagle_topk = 2" in text and 'name = "my-tree"' in text
        assert "# Simulator demo" in text  # the source profile's comments are kept
        from specdash.profile import load_profile

        assert load_profile(str(path)).speculative.eagle_topk == 2
        # the same name again: asks, and "no" keeps the file
        await pilot.press("w")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "PromptScreen", what="name prompt")
        app.screen.query_one("#prompt-input").value = "my-tree"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="overwrite question")
        await pilot.press("n")
        assert path.read_text() == text

        # quit asks while a server runs, then stops it
        server_pid = s.server.pid
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="quit question")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running, timeout=30, what="app exit")
    assert process_gone(server_pid)
    left = [p for p in children() if p.pid not in before]
    assert left == [], f"processes left behind: {left}"


async def test_wrong_profile_shows_findings_and_asks_before_launch(tmp_path: Path) -> None:
    """demo-wrong-algo: preflight ALGO_MISMATCH is shown with its fix; launching asks first
    and 'cancel' starts nothing."""
    app = create_app(config(tmp_path, profile="demo-wrong-algo"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.session.preflight_report is not None, what="preflight")
        await wait_for(pilot, lambda: "ALGO_MISMATCH" in screen_text(app), what="finding on screen")
        text = screen_text(app)
        assert "fix:" in text and "EAGLE3" in text
        await pilot.press("l")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="launch anyway?")
        await pilot.press("n")
        await pilot.pause(0.2)
        assert app.session.server is None and app.session.state != ServerState.READY
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="app exit")


async def test_unreadable_profile_is_shown_not_raised(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text('name = "broken"\n[server]\nmodel_pth = "x"\n')
    app = create_app(config(tmp_path, profile=str(bad)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.profile_error is not None, what="profile error")
        assert "model_pth" in app.profile_error
        await wait_for(pilot, lambda: "model_pth" in screen_text(app), what="error on screen")
        await pilot.press("q")


async def test_attach_to_running_simulator_and_run_suite_once(tmp_path: Path) -> None:
    """--url: attach, load once from the dashboard; quitting never stops a server specdash
    did not start."""
    from specdash.sim.testing import SimProcess

    args = ["--model-path", "sim:llama-3.1-8b", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "sim:llama-3.1-8b-eagle3", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--enable-metrics",
            "--time-scale", "5"]
    with SimProcess(args) as sim:
        app = create_app(config(tmp_path, url=sim.url, suite="seeds-five"))
        async with app.run_test(size=SIZE) as pilot:
            s = app.session
            await wait_for(pilot, lambda: s.state == ServerState.ATTACHED, what="attached")
            await wait_for(pilot, lambda: app.check_action("load_once", ()) is True, what="load enabled")
            assert app.check_action("launch", ()) is None  # nothing to launch when attached
            await pilot.press("g")
            await wait_for(pilot, lambda: (s.collector.run_summary().get("requests") or 0) >= 5, timeout=30,
                           what="suite once")
            await wait_for(pilot, lambda: not s.load_running, what="load finished")
            assert s.collector.run_summary()["accept_length"] > 1.2
            await pilot.press("3")
            await wait_for(pilot, lambda: "simulated" in screen_text(app), what="GPU panel")
            await pilot.press("q")
            await wait_for(pilot, lambda: not app.is_running, what="app exit")
        assert sim.proc.poll() is None  # still running: not ours to stop


async def test_picker_help_and_palette(tmp_path: Path) -> None:
    """No profile: the picker opens; every binding has an id and help and is in the palette."""
    from specdash.tui import keys

    app = create_app(config(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        # the picker is the current screen before its children are composed: wait for its list
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProfilePicker"
                       and bool(app.screen.query("#picker-list")), what="picker")
        ol = app.screen.query_one("#picker-list")
        names = [str(ol.get_option_at_index(i).id) for i in range(ol.option_count)]
        idx = next(i for i, n in enumerate(names) if n.endswith("demo-baseline.toml"))
        await pilot.pause()  # the picker highlights its first entry on mount: choose after that
        ol.highlighted = idx
        await wait_for(pilot, lambda: ol.highlighted == idx, what="demo-baseline highlighted")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.session.profile is not None, what="profile chosen")
        assert app.session.profile.name == "demo-baseline"
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "HelpScreen", what="help")
        await pilot.press("escape")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for k in keys.KEYS:
            assert k.id and k.help and k.description
            if k.action != "quit":
                assert any(t.startswith(k.description) for t in titles), k.id
        assert all(b.id and b.tooltip for b in app.BINDINGS)
        await pilot.press("q")


@pytest.mark.parametrize("module", ["specdash.collect.live", "specdash.collect.proc", "specdash.tui.session",
                                    "specdash.tui.state"])
def test_collection_imports_no_textual(module: str) -> None:
    import subprocess
    import sys

    code = f"import sys, {module}; assert 'textual' not in sys.modules, sorted(m for m in sys.modules if 'textual' in m)"
    subprocess.run([sys.executable, "-c", code], check=True)


LEFTOVER_SCRIPT = """
import asyncio, sys, time
from specdash.profile import load_profile
from specdash.profile import build_launch
from specdash.sglang.process import ServerProcess, free_port
launch = build_launch(load_profile("demo-baseline"), port=free_port())
srv = ServerProcess(launch.argv, env=launch.env, url=launch.base_url).start()
asyncio.run(srv.wait_ready(launch.base_url, 30))
print(srv.pid, flush=True)
time.sleep(120)
"""


async def test_offers_to_stop_servers_left_by_a_killed_specdash(tmp_path: Path) -> None:
    """A specdash killed with SIGKILL cannot clean up: the next dashboard offers to stop
    what it left (CONTRACTS.md "Stopping")."""
    import signal
    import subprocess
    import sys

    # Without the parent-death signal (non-Linux, or SPECDASH_NO_PDEATHSIG=1) the server
    # outlives a SIGKILLed specdash: the case the leftover records exist for.
    env = dict(os.environ, SPECDASH_NO_PDEATHSIG="1")
    owner = subprocess.Popen([sys.executable, "-c", LEFTOVER_SCRIPT], stdout=subprocess.PIPE, text=True, env=env)
    server_pid = -1
    try:
        server_pid = int(owner.stdout.readline())
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)  # a deadline for a hang (SIGKILL: milliseconds)
        assert psutil.pid_exists(server_pid)
        app = create_app(config(tmp_path, profile="demo-baseline"))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="leftover question")
            # the screen is pushed before its question is composed: wait for the text, then check it
            await wait_for(pilot, lambda: screen_text(app).strip() != "", what="leftover question text")
            assert str(server_pid) in screen_text(app)
            await pilot.press("y")
            await wait_for(pilot, lambda: process_gone(server_pid), what="leftover stopped")
            await pilot.press("q")
    finally:
        if owner.poll() is None:
            owner.kill()
        with contextlib.suppress(psutil.Error, ValueError):
            psutil.Process(server_pid).kill()


async def test_server_that_dies_is_reported(tmp_path: Path) -> None:
    """A launched server that exits on its own shows as EXITED (with its exit code)."""
    import signal

    app = create_app(config(tmp_path, profile="demo-baseline", autostart=True, autoload=False))
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="server ready")
        os.killpg(s.server.pid, signal.SIGKILL)
        await wait_for(pilot, lambda: s.state == ServerState.EXITED, what="exit noticed")
        assert "-9" in s.state_detail
        assert app.check_action("launch", ()) is True  # it can be launched again
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="app exit")


async def test_gpu_panel_says_why_without_nvml(tmp_path: Path) -> None:
    """No driver: the GPU panel names the reason (-no-gpu), it does not go blank."""
    from dataclasses import replace

    from specdash.collect.snapshot import GpuView
    from specdash.tui.frozen import frozen_view

    view = frozen_view("healthy")
    view = replace(view, snapshot=replace(view.snapshot, gpu=GpuView(
        status="no NVIDIA driver (NVML Shared Library Not Found)"), procs=()), mode="attach")
    app = create_app(AppConfig(frozen=view, frozen_tab="gpu"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.query_one("#gpu-panel")
        assert panel.has_class("-no-gpu")
        assert "no NVIDIA driver (NVML Shared Library Not Found)" in screen_text(app, "#gpu-body")


def test_tweak_form_parsing() -> None:
    from specdash.tui.screens.tweak import parse_form

    out = parse_form({"algorithm": "EAGLE3", "draft_model_path": " /d ", "num_steps": "5", "eagle_topk": "",
                      "num_draft_tokens": "auto", "extra_args": "--speculative-attention-mode decode"})
    assert out == {"algorithm": "EAGLE3", "draft_model_path": "/d", "num_steps": 5, "eagle_topk": None,
                   "num_draft_tokens": None, "extra_args": ["--speculative-attention-mode", "decode"]}
    assert parse_form({"algorithm": "none"})["algorithm"] is None
    with pytest.raises(ValueError, match="steps"):
        parse_form({"algorithm": "EAGLE3", "num_steps": "x"})


async def test_servers_stopped_even_when_the_app_ends_abruptly(tmp_path: Path) -> None:
    """An exception inside the app's lifetime (here: in the test body) still stops the server."""
    app = create_app(config(tmp_path, profile="demo-baseline", autostart=True, autoload=False))
    pid = None
    with pytest.raises(RuntimeError, match="boom"):
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.session.state == ServerState.READY, what="server ready")
            pid = app.session.server.pid
            raise RuntimeError("boom")
    assert pid is not None
    assert process_gone(pid)


def test_session_measurements_are_the_advisors_inputs():
    """Each launch's run becomes an advisor Measurement read by Settings.from_effective (one reader of the
    speculative settings); a launch without speculation sets the baseline tok/s."""
    from types import SimpleNamespace

    from specdash.advisor import Settings
    from specdash.tui.session_advice import SessionAdviceMixin

    spec = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4, "other": "ignored"}
    runs = {1: ({"speculative_algorithm": None}, {"requests": 8, "output_tok_s": 100.0}),
            2: (spec, {"requests": 8, "output_tok_s": 180.0, "accept_length": 2.5, "accept_histogram": [2, 3, 5, 10],
                       "tpot_ms": {"mean": 5.0}})}

    class Fake(SessionAdviceMixin):
        profile = None
        load = SimpleNamespace(concurrency=4)

        def __init__(self):
            self.measurements, self.baseline_tok_s, self._launch_no, self.collector = {}, None, 0, None

    s = Fake()
    for n, (info, run) in runs.items():
        s._launch_no = n
        s.collector = SimpleNamespace(run_summary=lambda run=run: run,
                                      snapshot=lambda info=info: SimpleNamespace(server_info=info))
        s._remember_measurement()
    s.collector = None
    ms = s.measurement_list()
    assert [m.settings for m in ms] == [None, Settings(3, 1, 4)]
    assert (ms[1].tok_s(), ms[1].tau(), ms[1].concurrency, ms[1].tpot_ms) == (180.0, 2.5, 4, 5.0)
    assert s.baseline_tok_s == 100.0
    assert s.advice_inputs()[:3] == (ms, 100.0, None)
