"""The dashboard, headless, against a REAL SGLang server on the H200 (issue #6).

Runs the app with Textual's ``run_test`` at 160 × 48: it launches the profile's server
(the same ``build_launch`` + ``ServerProcess`` path as ``--bench``), loops a suite load,
and after ``--seconds`` of live data saves the Launch, Live, GPU and Log panels as SVG
(``App.save_screenshot``).  While the server holds GPU memory it also compares
specdash's NVML readings with ``nvidia-smi`` (``nvml_compare.py``) and writes
``nvml-compare.json``.  Quitting stops the server.

Usage: ``python3 benchmarks/h200/tui_live.py --profile h200-tiny-eagle3 --out DIR``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from specdash.tui.app import create_app  # noqa: E402
from specdash.tui.config import AppConfig  # noqa: E402
from specdash.tui.session import ServerState  # noqa: E402

SIZE = (160, 48)


async def wait_for(pilot, cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await pilot.pause(0.5)


async def main(profile: str, out: Path, seconds: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    cfg = AppConfig(profile=profile, out_dir=out / "tui-runs", preset_dir=out / "presets", autostart=True,
                    autoload=False, max_tokens=512, concurrency=4, suite="h200-tiny", ready_timeout_s=300)
    app = create_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state in (ServerState.READY, ServerState.FAILED, ServerState.EXITED),
                       300, "server ready")
        print("server state:", s.state, flush=True)
        if s.state != ServerState.READY:
            app.save_screenshot("h200-launch-failed.svg", str(out))
            raise SystemExit("server did not start")
        app.action_load_loop()
        await wait_for(pilot, lambda: (s.collector.run_summary().get("requests") or 0) >= 4, 120, "first requests")
        await pilot.pause(seconds)
        pid = s.server.pid if s.server is not None else None
        cmp = subprocess.run([sys.executable, str(REPO / "benchmarks/h200/nvml_compare.py"), str(pid or "")],
                             capture_output=True, text=True)
        (out / "nvml-compare.json").write_text(cmp.stdout or cmp.stderr)
        for tab in ("launch", "live", "gpu", "log"):
            app.action_show_tab(tab)
            await pilot.pause(1.0)
            print("saved", app.save_screenshot(f"h200-{tab}.svg", str(out)), flush=True)
        summary = s.collector.run_summary()
        (out / "tui-run-summary.json").write_text(json.dumps(summary, indent=2, default=str))
        if s.load_running:
            await s.stop_load()
        await s.stop()
    print("done", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="h200-tiny-eagle3")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=40.0)
    a = ap.parse_args()
    asyncio.run(main(a.profile, a.out, a.seconds))
