#!/usr/bin/env python3
"""CPU cost of the dashboard while a separate process drives load (the TUI process alone).

Setup, all on this machine, nothing shared between the three processes:

1. the simulator, launched exactly as the dashboard would (``build_launch`` of ``demo-eagle3``
   → ``ServerProcess``); at time scale 1.0 with the bench at concurrency 8 it serves
   ≈ 2,000–2,300 output tok/s (the script prints the measured figure);
2. the dashboard, ``specdash --url URL`` attached to it, on a pseudo-terminal (160 × 48),
   showing the Live panel (the most expensive one: six tiles and four plotext charts);
3. the load, a SEPARATE ``specdash --bench --url URL`` process.

After a warm-up the dashboard process's CPU time (user + system, psutil) is read over
``--seconds`` (default 30) and printed as percent of one core, with the server-wide tok/s
measured from ``/metrics`` counter deltas over the same window.  The script also prints
the time from spawning ``specdash`` to the first frame on the terminal (Python start-up,
imports and the first paint).

Usage: ``python benchmarks/tui_cpu.py [--seconds 30] [--concurrency 8] [--time-scale 1.0]``
Exit code 0 when the figure is under ``--limit`` percent (default 15), 1 otherwise.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]


def metrics_decode_tokens(url: str) -> float:
    """``sglang:realtime_tokens_total{mode="decode"}`` summed (0 when absent)."""
    text = httpx.get(url + "/metrics", timeout=5).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("sglang:realtime_tokens_total") and 'mode="decode"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


class PtyApp:
    """``specdash`` on a pseudo-terminal; output is drained (and searched) in a thread."""

    def __init__(self, argv: list[str], cols: int = 160, rows: int = 48) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
                                     start_new_session=True)
        os.close(slave)
        self.first_frame_s: float | None = None
        self.bytes = 0
        self._tail = b""
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.bytes += len(data)
            if self.first_frame_s is None:
                self._tail = (self._tail + data)[-4096:]
                if re.search(rb"Launch \[1\]", self._tail):
                    self.first_frame_s = time.monotonic() - self.t_spawn

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.send("q")
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                self.proc.wait(5)
        os.close(self.master)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="measurement window (s)")
    ap.add_argument("--warmup", type=float, default=6.0, help="seconds of load before measuring")
    ap.add_argument("--concurrency", type=int, default=8, help="bench concurrency")
    ap.add_argument("--time-scale", type=float, default=1.0, help="simulator speed-up (sets the tok/s)")
    ap.add_argument("--limit", type=float, default=15.0, help="pass/fail threshold, percent of one core")
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    from specdash.profile import build_launch, load_profile
    from specdash.sglang.process import ServerProcess, free_port

    prof = load_profile("demo-eagle3")
    prof = prof.model_copy(update={"sim": prof.sim.model_copy(update={"time_scale": args.time_scale})})
    launch = build_launch(prof, port=free_port())
    tmp = Path(tempfile.mkdtemp(prefix="specdash-tui-cpu-"))
    server = ServerProcess(launch.argv, env=launch.env, run_dir=tmp / "server", url=launch.base_url).start()
    tui = bench = None
    try:
        import asyncio

        asyncio.run(server.wait_ready(launch.base_url, 60))
        url = launch.base_url
        specdash = [sys.executable, "-m", "specdash"]
        tui = PtyApp([*specdash, "--url", url, "--out", str(tmp / "runs-tui")])
        while tui.first_frame_s is None and time.monotonic() - tui.t_spawn < 20:
            time.sleep(0.02)
        time.sleep(1.0)
        tui.send("2")  # the Live panel
        bench = subprocess.Popen(
            [*specdash, "--bench", "--url", url, "--profile", "demo-eagle3", "--suite", "seeds-five",
             "--concurrency", str(args.concurrency), "--repeats", "400", "--max-tokens", "512",
             "--out", str(tmp / "runs-bench")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(args.warmup)
        p = psutil.Process(tui.proc.pid)
        c0 = p.cpu_times()
        tok0, t0 = metrics_decode_tokens(url), time.monotonic()
        time.sleep(args.seconds)
        c1 = p.cpu_times()
        tok1, t1 = metrics_decode_tokens(url), time.monotonic()
        cpu_s = (c1.user - c0.user) + (c1.system - c0.system)
        pct = 100.0 * cpu_s / (t1 - t0)
        tok_s = (tok1 - tok0) / (t1 - t0)
        alive = bench.poll() is None
        print(f"server-wide output tok/s over the window: {tok_s:,.0f} (simulated, --time-scale {args.time_scale}, "
              f"bench concurrency {args.concurrency}{'' if alive else ', BENCH ENDED EARLY'})")
        print(f"dashboard process CPU: {cpu_s:.2f} s over {t1 - t0:.1f} s = {pct:.1f} % of one core "
              f"(limit {args.limit:.0f} %), terminal output {tui.bytes / 1024 / (t1 - tui.t_spawn):.1f} KiB/s")
        print(f"first frame: {tui.first_frame_s:.2f} s from spawning `specdash --url` (Python start-up + imports)"
              if tui.first_frame_s is not None else "first frame: not seen")
        return 0 if pct < args.limit else 1
    finally:
        if bench is not None and bench.poll() is None:
            bench.terminate()
            bench.wait(10)
        if tui is not None:
            tui.stop()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
