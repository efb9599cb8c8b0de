#!/usr/bin/env python3
"""The dashboard over a long looping load: its RSS and CPU curves (issue #14's "flat for hours").

Setup, all on this machine:

1. the simulator, launched as the dashboard would (``build_launch`` of ``demo-eagle3`` →
   ``ServerProcess``, ``--time-scale`` speed-up);
2. the dashboard, ``specdash --url URL --concurrency N`` on a pseudo-terminal (160 × 48),
   showing the Live panel (six tiles and four plotext charts, redrawn at 4 Hz), with its OWN
   looping load (the ``o`` key: the suite sent again and again at N streams, every record
   folded into the live statistics and appended to its run directory) — what a user leaves
   running.

Every ``--every`` seconds (default 30) the dashboard process's RSS (psutil, MB) and its CPU
over the interval (user + system, percent of one core) are sampled with the server-wide output
tok/s over the same interval (``/metrics`` decode-token counter deltas) and the run directory's
record count; the curve is printed as it comes (one line per sample, flushed).  At the end:
RSS growth from the first minute's sample to the last, and CPU per 1,000 tokens served in the
first and the last third of the run after ``--settle`` s (150: the Live charts show the last
120 s, so their points grow until that window is full) — the refresh cost, flat when the
dashboard's per-record and per-frame work does not grow with the run's length.

Targets (issue #14): over 30 minutes at 64 streams, RSS growth < 10 % after the first minute,
refresh cost flat.  Exit code 0 when the RSS growth is under ``--rss-limit`` percent (10).

Usage: ``python benchmarks/tui_longrun.py [--minutes 30] [--concurrency 64] [--every 30]
[--time-scale 1.0]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from tui_cpu import PtyApp, metrics_decode_tokens  # noqa: E402


def _records(runs: Path) -> int:
    """Lines in every ``requests.jsonl`` under ``runs`` (the dashboard's finished requests)."""
    n = 0
    for p in runs.rglob("requests.jsonl"):
        with open(p, "rb") as fh:
            n += sum(chunk.count(b"\n") for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""))
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    ap.add_argument("--time-scale", type=float, default=1.0, help="simulator speed-up")
    ap.add_argument("--rss-limit", type=float, default=10.0, help="pass/fail: RSS growth after minute 1, %%")
    ap.add_argument("--settle", type=float, default=150.0,
                    help="s before the refresh cost is compared (the Live charts' 120 s window filling up)")
    args = ap.parse_args()

    from specdash.profile import build_launch, load_profile
    from specdash.sglang.process import ServerProcess, free_port

    prof = load_profile("demo-eagle3")
    prof = prof.model_copy(update={"sim": prof.sim.model_copy(update={"time_scale": args.time_scale})})
    launch = build_launch(prof, port=free_port())
    tmp = Path(tempfile.mkdtemp(prefix="specdash-tui-longrun-"))
    server = ServerProcess(launch.argv, env=launch.env, run_dir=tmp / "server", url=launch.base_url).start()
    tui = None
    try:
        import asyncio

        asyncio.run(server.wait_ready(launch.base_url, 60))
        url = launch.base_url
        runs = tmp / "runs-tui"
        tui = PtyApp([sys.executable, "-m", "specdash", "--url", url, "--concurrency", str(args.concurrency),
                      "--out", str(runs)])
        while tui.first_frame_s is None and time.monotonic() - tui.t_spawn < 30:
            time.sleep(0.05)
        if tui.first_frame_s is None:
            print("the dashboard drew no first frame in 30 s", file=sys.stderr)
            return 2
        time.sleep(1.0)
        tui.send("o")  # loop the suite at --concurrency
        time.sleep(0.5)
        tui.send("2")  # the Live panel
        p = psutil.Process(tui.proc.pid)
        print(f"dashboard pid {p.pid}, looping load at {args.concurrency} streams, simulator time scale "
              f"{args.time_scale:g}, sample every {args.every:g} s for {args.minutes:g} min", flush=True)
        print(f"{'t s':>7s} {'RSS MB':>8s} {'CPU %':>7s} {'tok/s':>8s} {'records':>8s} {'CPU ms/1k tok':>14s}",
              flush=True)
        t_start = time.monotonic()
        c_prev = p.cpu_times()
        tok_prev, t_prev = metrics_decode_tokens(url), t_start
        samples = []
        while time.monotonic() - t_start < args.minutes * 60:
            time.sleep(max(0.0, t_prev + args.every - time.monotonic()))
            if tui.proc.poll() is not None:
                print(f"the dashboard exited ({tui.proc.returncode})", file=sys.stderr)
                return 2
            c, tok, now = p.cpu_times(), metrics_decode_tokens(url), time.monotonic()
            rss = p.memory_info().rss / 2**20
            cpu_s = (c.user - c_prev.user) + (c.system - c_prev.system)
            tok_s = (tok - tok_prev) / (now - t_prev)
            per_k = 1000.0 * cpu_s / max(tok - tok_prev, 1.0) * 1000.0
            rec = _records(runs)
            samples.append((now - t_start, rss, 100.0 * cpu_s / (now - t_prev), tok_s, rec, per_k))
            print(f"{now - t_start:7.0f} {rss:8.1f} {samples[-1][2]:7.1f} {tok_s:8.0f} {rec:8d} {per_k:14.2f}",
                  flush=True)
            c_prev, tok_prev, t_prev = c, tok, now
        after_1min = next((s for s in samples if s[0] >= 60.0), samples[0])
        last = samples[-1]
        growth = 100.0 * (last[1] - after_1min[1]) / after_1min[1]
        settled = [s for s in samples if s[0] >= args.settle] or samples
        third = max(1, len(settled) // 3)
        early = statistics.median(s[5] for s in settled[:third])
        late = statistics.median(s[5] for s in settled[-third:])
        print(f"RSS: {after_1min[1]:.1f} MB at {after_1min[0]:.0f} s -> {last[1]:.1f} MB at {last[0]:.0f} s "
              f"({growth:+.1f} %, limit {args.rss_limit:g} %); peak {max(s[1] for s in samples):.1f} MB")
        print(f"CPU per 1,000 tokens served (after {args.settle:g} s): first third {early:.2f} ms, last third {late:.2f} ms "
              f"({100.0 * (late - early) / early:+.1f} %); CPU {statistics.median(s[2] for s in samples):.1f} % "
              f"of one core (median), {last[4]} records")
        return 0 if growth < args.rss_limit else 1
    finally:
        if tui is not None:
            tui.stop()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
