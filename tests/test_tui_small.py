"""Small and remote terminals: the compact layout's switch and its headline figures, the GPU history,
the log's filter / search / wrap, acceptance by draft position, and the fallback to --bench-style text
when there is no terminal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from textual.widgets import RichLog

from specdash.profile import load_profile
from specdash.tui.app import COMPACT_WIDTH, AppConfig, create_app
from specdash.tui.frozen import frozen_view
from specdash.tui.widgets.gpu import GpuPanel, gpu_renderable, history_series
from specdash.tui.widgets.live import compact_numbers, live_numbers, positions_text
from specdash.tui.widgets.log import FILTERS, LogPanel


def _app(tab: str = "live"):
    return create_app(AppConfig(frozen=frozen_view("healthy", profile=load_profile("demo-eagle3")), frozen_tab=tab))


def _plain(renderable, width: int = 73) -> str:
    c = Console(width=width, record=True, color_system=None)
    c.print(renderable)
    return c.export_text()


def test_compact_numbers_fit_an_80_column_panel_whole():
    view = frozen_view("healthy", profile=load_profile("demo-eagle3"))
    n = live_numbers(view)
    text = _plain(compact_numbers(view), 73)
    for figure in (n["server_tok_s"], n["run_tok_s"] + " ×2.26", "21 / 23 ms", "6.56 / 7.21 ms", n["accept_length"],
                   n["accept_rate"], f"{n['window_accept_length']} / {n['server_accept_length']}", "4 / 0",
                   "33 ok, 0 fail"):
        assert figure in text, (figure, text)
    assert "…" not in text.split("run")[0]  # nothing cut before the run label


def test_positions_line_shows_each_draft_position():
    view = frozen_view("healthy", profile=load_profile("demo-eagle3"))
    text = positions_text(view).plain
    assert text == "Accept by draft position (histogram): 1 85.9 % │ 2 80.2 % │ 3 69.2 %"
    assert positions_text(frozen_view("wrong_algo", profile=load_profile("demo-wrong-algo"))) is None


def test_gpu_history_series_per_device_and_field():
    view = frozen_view("healthy", profile=load_profile("demo-eagle3"))
    series = history_series(view, (("memory_pct", "memory %"), ("utilization_pct", "util %")))
    assert [s.label for s in series] == ["memory %", "util %"]
    hist = view.snapshot.gpu_history
    assert series[1].ys == tuple(p.utilization_pct for p in hist)
    assert series[0].xs[0] == hist[0].t - view.snapshot.taken_at and max(series[0].xs) <= 0


async def test_the_layout_switches_with_the_terminal_size():
    app = _app("live")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert not app.screen.has_class("-compact")
        assert app.query_one("#key-line").styles.display == "none"
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        assert app.screen.has_class("-compact") and app.size.width < COMPACT_WIDTH
        assert app.query_one("#key-line").styles.display == "block"
        assert app.query_one("#live-definitions").styles.display == "none"
        assert app.query_one("#live-positions").display


async def test_log_filter_search_and_wrap():
    app = _app("log")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        panel = app.query_one(LogPanel)
        log = app.query_one("#log-tail", RichLog)
        everything = len(log.lines)
        entries = list(panel._entries)
        assert everything == len(entries) > 0
        await pilot.press("f")  # warnings and errors
        await pilot.pause()
        kinds = FILTERS[1][1]
        assert panel.filter_index == 1 and len(log.lines) == sum(e.kind in kinds for e in entries)
        await pilot.press("f", "f", "f")  # back to all lines
        await pilot.pause()
        assert panel.filter_index == 0 and len(log.lines) == everything
        await pilot.press("slash")
        await pilot.pause()
        await pilot.press(*"prefill", "enter")
        await pilot.pause()
        want = [e for e in entries if "prefill" in e.text.lower()]
        assert panel.search == "prefill" and len(log.lines) == len(want) > 0
        counts = app.query_one("#log-counts").content
        assert "search “prefill” (/)" in getattr(counts, "plain", str(counts))
        await pilot.press("z")
        await pilot.pause()
        assert panel.wrap and log.wrap
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert panel.search == "" and len(log.lines) >= everything


async def test_gpu_panel_compact_and_its_history_charts():
    app = _app("gpu")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        panel = app.query_one(GpuPanel)
        body = _plain(gpu_renderable(frozen_view("healthy", profile=load_profile("demo-eagle3")), compact=True), 76)
        lines = body.splitlines()
        assert all(len(line.rstrip()) <= 76 for line in lines)
        assert "GPU 0" in body and "69,632 / 81,559 MiB" in body and "85.4 %" in body and "87 %" in body
        assert panel.query_one("#gpu-history").display


def _run(args, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "SPECDASH_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-m", "specdash", *args], capture_output=True, text=True, env=env,
                          timeout=240, cwd=tmp_path, stdin=subprocess.DEVNULL)


def test_without_a_terminal_the_dashboard_runs_as_bench(tmp_path):
    from tests.test_bench import sim_profile

    prof = sim_profile(tmp_path, "noterm")
    p = _run(["--profile", str(prof), "--max-tokens", "8", "--repeats", "1", "--out", str(tmp_path / "runs")], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "standard output is not a terminal: running headless (--ui simple" in p.stderr
    assert "tok/s" in p.stdout and "accept length" in p.stdout
    p = _run(["--profile", str(prof), "--ui", "none", "--max-tokens", "8", "--repeats", "1",
              "--out", str(tmp_path / "runs")], tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["runs"][0]["requests"] > 0
    p = _run([], tmp_path)  # the profile picker cannot be drawn: say how to run headless
    assert p.returncode == 2 and "run headless with a profile" in p.stderr
