#!/usr/bin/env python3
"""Regenerate ``screenshots/*.svg``: the dashboard saving pictures of itself (``App.save_screenshot``).

Everything shown is live: the app runs headless (Textual's ``run_test``) at 160 × 48 against
the built-in simulator, exactly as ``specdash --demo`` does:

1. ``demo-baseline`` (no speculation) is launched and loaded for a while, so a baseline
   throughput is known (the red line on the throughput chart);
2. ``demo-eagle3`` is launched with a looping load; after ``--seconds`` of data the Launch,
   Live, GPU, Log and Suggestions panels are saved;
3. ``demo-wrong-algo`` is opened: its preflight findings are saved (``wrong-profile.svg``);
   it is then launched anyway and the post-launch collapse is saved (``verify-collapse.svg``);
4. ``demo-adaptive`` (SGLang 0.5.14's adaptive tiers) is loaded at concurrency 32 until its slot
   has switched tiers: the Live panel with the tier line and history is saved (``adaptive-live.svg``).

Usage: ``python scripts/make_screenshots.py [--out screenshots] [--seconds 40] [--only adaptive]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specdash.collect.live import PollIntervals  # noqa: E402
from specdash.tui.app import AppConfig, create_app  # noqa: E402
from specdash.tui.session import ServerState  # noqa: E402

SIZE = (160, 48)


async def wait_for(pilot, cond, timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await pilot.pause(0.2)


async def shoot(app, pilot, tab: str, out: Path, name: str) -> None:
    app.action_show_tab(tab)
    await pilot.pause(0.8)
    app._drawn.clear()
    app.redraw()
    await pilot.pause(0.5)
    path = app.save_screenshot(f"{name}.svg", str(out))
    print("saved", path)


async def adaptive(out: Path, tmp: Path, seconds: float) -> None:
    """Step 4: demo-adaptive at concurrency 32 (slot "32" runs steps 0 / 1) → ``adaptive-live.svg``."""
    cfg = AppConfig(profile="demo-adaptive", demo=True, out_dir=tmp / "runs-adaptive", preset_dir=tmp / "presets",
                    max_tokens=256, concurrency=32, intervals=PollIntervals())
    app = create_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="adaptive server")
        await wait_for(pilot, lambda: (t := s.collector.snapshot().tier) is not None and len(t.per_tier) >= 2,
                       timeout=120, what="two tiers")
        await pilot.pause(seconds)
        await shoot(app, pilot, "live", out, "adaptive-live")
        await app.session.close()
        app.exit()


async def main(out: Path, seconds: float, baseline_s: float, only: str | None = None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="specdash-shots-"))
    if only == "adaptive":
        await adaptive(out, tmp, seconds)
        return
    cfg = AppConfig(profile="demo-baseline", demo=True, out_dir=tmp / "runs", preset_dir=tmp / "presets",
                    max_tokens=256, concurrency=4, intervals=PollIntervals())
    app = create_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state == ServerState.READY, what="baseline server")
        await wait_for(pilot, lambda: (s.collector.run_summary().get("requests") or 0) >= 8, what="baseline runs")
        await pilot.pause(baseline_s)
        # switch to the speculative profile: the baseline's measurement is kept by the session
        app.use_profile("demo-eagle3")
        app.launch_worker()
        await wait_for(pilot, lambda: s.baseline_tok_s is not None and s.state == ServerState.READY
                       and s.profile.name == "demo-eagle3", what="eagle3 server")
        await wait_for(pilot, lambda: (s.collector.run_summary().get("requests") or 0) >= 4, what="eagle3 runs")
        await pilot.pause(seconds)
        await wait_for(pilot, lambda: app.advice is not None, timeout=30, what="advice")
        for tab, name in (("launch", "launch"), ("live", "live"), ("gpu", "gpu"), ("log", "log"),
                          ("advice", "suggestions")):
            await shoot(app, pilot, tab, out, name)
        app.config.autoload = False
        # the wrong profile: findings first, then launched anyway → verification collapse
        await app.session.stop()
        app.use_profile("demo-wrong-algo")
        app.launch_worker()
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen", what="launch anyway?")
        app.screen.dismiss(False)
        await pilot.pause(0.5)
        await shoot(app, pilot, "launch", out, "wrong-profile")
        app.launch_worker(force=True)
        await wait_for(pilot, lambda: s.state == ServerState.READY and s.profile.name == "demo-wrong-algo",
                       what="wrong-algo server")
        app.load_worker(loop=True)
        await wait_for(pilot, lambda: s.verification_report is not None and any(
            f.code == "VERIFY_COLLAPSE" and f.severity == "error" for f in s.verification_report.findings),
            what="collapse verdict")
        await pilot.pause(4)
        await shoot(app, pilot, "live", out, "verify-collapse")
        await app.session.close()
        app.exit()
    await adaptive(out, tmp, seconds)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "screenshots")
    ap.add_argument("--seconds", type=float, default=40.0, help="seconds of live data before the pictures")
    ap.add_argument("--baseline-seconds", type=float, default=10.0)
    ap.add_argument("--only", choices=["adaptive"], help="only step 4 (adaptive-live.svg)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(a.out, a.seconds, a.baseline_seconds, a.only))
