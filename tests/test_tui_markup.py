"""Outside text is never markup in the dashboard (issue #23, item 1).

Rich parses a ``str`` table cell and Textual a ``str`` given to ``Static``, ``Label``, ``Option``,
``Select`` or ``notify`` as markup: an exporter's GPU name, a profile name or a server log line holding
``[/x]`` raised ``MarkupError`` (exit 1 with a traceback), ``[link=…]`` made a link and ``[bold`` changed
the style.  These tests put such text everywhere outside text reaches — every string of a frozen view
(findings, log lines, devices, processes, argv, server_info, run labels, sweep, tune), the dialogs, the
toasts — and then the real repros: a real HTTP exporter whose GPU name holds it, and a simulated server
launched from a profile whose name holds it and whose log line (``--served-model-name``) carries it.
Each must render without an error and show the text verbatim.
"""

from __future__ import annotations

import dataclasses
import enum
import html
import re
from pathlib import Path

import pytest

from specdash.tui.app import create_app
from specdash.tui.config import TABS, AppConfig
from tests.procs import process_gone
from tests.test_tui import FAST, config, wait_for

#: a closing tag that matches nothing (MarkupError), an unclosed tag, and a link (must not become one)
PAYLOAD = "[/x] [bold [link=https://evil.example/]ln"
PIECES = ("[/x]", "[bold", "[link=https://evil.example/]ln")
BIG = (220, 70)
#: fields whose value the code branches on by equality (validated enums): kept as they are
KEEP = {"severity"}


def taint(obj):
    """``obj`` with the payload appended to every string inside it (dataclasses, dicts, lists, tuples)."""
    if obj is None or isinstance(obj, bool | enum.Enum):
        return obj
    if isinstance(obj, str):
        return f"{obj} {PAYLOAD}"
    if isinstance(obj, dict):
        return {k: v if k in KEEP else taint(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | frozenset) and not hasattr(obj, "_fields"):
        return type(obj)(taint(v) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: taint(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                                           if f.init and f.name not in KEEP})
    return obj


def shown(app) -> str:
    """The text Textual really drew on the screen (from its SVG screenshot), spaces normalised."""
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r">([^<]*)</text>", svg))).replace("\xa0", " ")


def assert_verbatim(text: str, what: str, times: int = 1) -> None:
    for piece in PIECES:
        assert text.count(piece) >= times, (what, piece, text[:2000])


def hostile_sweep() -> dict:
    return {"profile": "p " + PAYLOAD, "baseline": "b " + PAYLOAD, "path": "/runs/" + PAYLOAD, "note": PAYLOAD,
            "sweep": [{"concurrency": 1, "speedup": 1.4, "ci95": [1.3, 1.5]},
                      {"concurrency": 16, "speedup": 0.9, "ci95": [0.8, 1.0]}],
            "break_even_concurrency": 8.0, "break_even_ci95": [6.0, 11.0]}


@pytest.mark.parametrize("scenario", ["healthy", "adaptive", "wrong_algo", "wrong_algo_preflight"])
async def test_every_panel_shows_hostile_outside_text_verbatim(scenario: str) -> None:
    """Every string of the view holds the payload: every panel renders, and shows it as it is."""
    from specdash.profile import load_profile
    from specdash.tui.frozen import frozen_view

    prof = load_profile("demo-eagle3")
    path = prof.path
    prof = prof.model_copy(update={"name": "demo " + PAYLOAD, "description": "d " + PAYLOAD})
    prof._path = path
    view = dataclasses.replace(taint(frozen_view(scenario)), profile=prof, sweep=hostile_sweep())
    app = create_app(AppConfig(frozen=view, frozen_tab="launch"))
    async with app.run_test(size=BIG) as pilot:
        for tab in TABS:
            app.action_show_tab(tab)
            await pilot.pause()
            assert_verbatim(shown(app), f"{scenario}/{tab}")
        if scenario == "healthy":  # the GPU name, the server's process name, a log line and a finding, each
            app.action_show_tab("gpu")
            await pilot.pause()
            # (a table cell may wrap: the payload's head is checked in place, its pieces anywhere)
            assert "NVIDIA H100 80GB HBM3 [/x] [bold" in shown(app) and "4242 specdash.sim [/x] [bold" in shown(app)
            app.action_show_tab("launch")
            await pilot.pause()
            assert f"demo {PAYLOAD}" in shown(app) and f"CONTEXT_LEN {PAYLOAD}" in shown(app)
            app.action_show_tab("log")
            await pilot.pause()
            assert f"The server is fired up and ready to roll! {PAYLOAD}" in shown(app)


async def test_dialogs_and_toasts_show_hostile_text_verbatim(tmp_path: Path) -> None:
    """Questions, hints, choices, the tweak form's title and algorithm, and toasts — from the app and
    from a widget (Textual's ``Widget.notify`` asks for markup) — render the payload verbatim."""
    from specdash.tui.frozen import frozen_view
    from specdash.tui.screens.dialogs import ChoiceScreen, ConfirmScreen, PromptScreen
    from specdash.tui.screens.tweak import TweakScreen
    from specdash.tui.widgets.advice import StatusBar

    app = create_app(AppConfig(frozen=frozen_view("healthy"), frozen_tab="live"))
    async with app.run_test(size=BIG, notifications=True) as pilot:
        for screen in (ConfirmScreen("stop " + PAYLOAD + "?", yes="y " + PAYLOAD),
                       PromptScreen("name " + PAYLOAD, hint="hint " + PAYLOAD),
                       ChoiceScreen("suite " + PAYLOAD, [("a", "suite-a " + PAYLOAD)]),
                       TweakScreen({"algorithm": "EAGLE3" + PAYLOAD}, lambda ch: "preview " + PAYLOAD,
                                   title="Tweak " + PAYLOAD)):
            app.push_screen(screen)
            await pilot.pause()
            await pilot.pause()
            assert_verbatim(shown(app), type(screen).__name__)
            app.pop_screen()
            await pilot.pause()
        app.notify("server " + PAYLOAD, title="t " + PAYLOAD, timeout=30)
        app.query_one(StatusBar).notify("widget " + PAYLOAD, timeout=30)
        await wait_for(pilot, lambda: "widget [/x]" in shown(app), what="the widget's toast")
        text = shown(app)
        assert f"server {PAYLOAD}" in text and f"widget {PAYLOAD}" in text and f"t {PAYLOAD}" in text


async def test_exporter_gpu_name_with_markup_is_shown_verbatim(tmp_path: Path) -> None:
    """The repro: a (real HTTP) DCGM exporter whose ``modelName`` and ``Hostname`` hold markup, read by
    the dashboard attached to a simulated server: the GPU panel shows both as they are."""
    from specdash.collect.exporter import ExporterTarget
    from specdash.collect.snapshot import PollIntervals
    from specdash.sim.testing import SimProcess
    from specdash.tui.session import ServerState
    from tests.test_exporter import DCGM_A, FakeExporter

    body = DCGM_A.replace('modelName="NVIDIA H100 80GB HBM3"', f'modelName="H100 {PAYLOAD}"') \
                 .replace('Hostname="gpu-node-a"', 'Hostname="node [/x] [bold"')
    assert body.count(PAYLOAD) >= 2
    iv = PollIntervals(metrics=FAST.metrics, server_info=FAST.server_info, gpu=FAST.gpu, logs=FAST.logs,
                       gpu_exporters=0.3)
    with SimProcess(["--model-path", "sim:llama-3.1-8b", "--enable-metrics"]) as sim, FakeExporter(body) as exp:
        app = create_app(config(tmp_path, url=sim.url, intervals=iv,
                                gpu_exporters=(ExporterTarget("node-a", exp.url),)))
        async with app.run_test(size=BIG) as pilot:
            await wait_for(pilot, lambda: app.session.state == ServerState.ATTACHED, what="attached")
            await pilot.press("3")
            await wait_for(pilot, lambda: "H100 [/x] [bold" in shown(app), timeout=30, what="the exporter's GPUs")
            text = shown(app)
            assert "node node [/x] [bold (node-a)" in text
            assert text.count("H100 [/x] [bold") == 2  # both devices of the node (the cell may wrap the rest)
            assert text.count("[link=https://evil.example/]ln") == 2


async def test_profile_name_and_server_log_line_with_markup(tmp_path: Path, monkeypatch) -> None:
    """The repro: a profile named with markup (in the picker too), launched on the simulator with
    ``--served-model-name`` holding markup, which the server logs in its ``server_args=`` line: the
    status bar, the Launch panel, the start-up log, the Log panel and the toasts show it verbatim."""
    from specdash.tui.session import ServerState

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    pdir = tmp_path / "cfg" / "specdash" / "profiles"
    pdir.mkdir(parents=True)
    name = "evil " + PAYLOAD
    path = pdir / "evil.toml"
    path.write_text(
        f'name = "{name}"\ndescription = "d [/x]"\n[server]\nlauncher = "sim"\nmodel_path = "sim:llama-3.1-8b"\n'
        f'port = 0\nextra_args = ["--served-model-name", "served {PAYLOAD}"]\n[sim]\nscenario = "healthy"\n'
        'time_scale = 4.0\n')
    app = create_app(config(tmp_path, profile=str(path), autostart=True, autoload=False))
    async with app.run_test(size=BIG, notifications=True) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, timeout=30, what="server ready")
        assert s.profile.name == name
        await wait_for(pilot, lambda: f"served {PAYLOAD}" in shown(app), what="the start-up log line")
        text = shown(app)
        assert f"{name} ready in" in text            # the READY toast and the state line
        assert f" {name} " in text or text.count(name) >= 2
        await pilot.press("4")
        from textual.widgets import RichLog

        def log_text() -> str:  # the Log panel's lines as drawn (they scroll sideways: wider than the screen)
            return "\n".join(strip.text for strip in app.query_one("#log-tail", RichLog).lines)

        await wait_for(pilot, lambda: f"served_model_name='served {PAYLOAD}'" in log_text(), what="the log panel")
        await pilot.press("p")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ProfilePicker", what="picker")
        await wait_for(pilot, lambda: name in shown(app), what="the profile in the picker")
        await pilot.press("escape")
        pid = s.server.pid
        await pilot.press("s")
        await wait_for(pilot, lambda: s.state == ServerState.IDLE and s.server is None, what="stopped")

    assert process_gone(pid)


def test_the_tui_has_no_markup_path_left() -> None:
    """The kind, kept: no module of the dashboard builds a Rich ``Table`` other than ``PlainTable``, parses
    markup on purpose (``Text.from_markup``, ``markup=True``) or hands ``Static``/``Label``/``Button`` a bare
    f-string (a ``Text`` is required there: Textual parses a ``str``)."""
    import ast

    root = Path(__file__).resolve().parents[1] / "specdash" / "tui"
    bad = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module == "rich.table" and path.name != "format.py":
                bad.append(f"{where} imports rich.table (use format.PlainTable)")
            if isinstance(node, ast.Attribute) and node.attr == "from_markup":
                bad.append(f"{where} parses markup")
            if isinstance(node, ast.keyword) and node.arg == "markup" and isinstance(node.value, ast.Constant) \
                    and node.value.value is True:
                bad.append(f"{where} asks for markup")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("Static", "Label", "Button") and node.args \
                    and isinstance(node.args[0], ast.JoinedStr | ast.Name | ast.Attribute):
                bad.append(f"{where} gives {node.func.id} a str that may hold outside text")
    assert not bad, bad
