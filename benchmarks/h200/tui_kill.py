"""The dashboard against a REAL SGLang server whose scheduler is SIGKILLed (issue #23, item 9).

What it shows: the dashboard (headless, Textual's ``run_test``) launches the profile's server on the
GPU, loops a suite at ``--concurrency``, and once ``--warm`` requests have finished SIGKILLs SGLang's
scheduler subprocess (the child whose process title or command line names ``scheduler``; SGLang keeps
its HTTP server up and only logs ``Child process unexpectedly failed with exitcode=9. pid=…`` from its
SIGCHLD handler, ``srt/entrypoints/engine.py``).  It then measures

* ``cause_s``: SIGKILL → the dashboard's state EXITED / STALLED / FAILED with its cause (must be ≤ 10 s),
* ``load_stopped_s``: SIGKILL → the load driver stopped,
* ``sent_after_fault``: requests started after the cause was shown (must be 0),
* ``left_running``: pids of the server's process tree still alive 15 s after the cause (must be none),
  and the GPU memory ``nvidia-smi`` still reports for them,

saves the Launch and Log panels as SVG, and writes ``tui-kill.json`` (the figures, the state line, the
RUN of ``summary.json`` with its ``partial_reason``).  Exit status 0 when every bound holds, 1 otherwise.

Run on the GPU machine (not run in the session that wrote it: no GPU there), from the checkout, with
the device's SGLang environment (see ``benchmarks/h200/run.sh`` for the carried environment)::

    python3 benchmarks/h200/tui_kill.py --profile h200-tiny-eagle3 --suite h200-tiny --out $OUT/tui-kill

Options: ``--kill main`` SIGKILLs the server's main process instead (the bench's exit path);
``--stall-s`` the dashboard's stall timeout (default 15 s: a dead scheduler must be shown sooner than
that, by SGLang's own log line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from specdash.tui.app import create_app  # noqa: E402
from specdash.tui.config import AppConfig  # noqa: E402
from specdash.tui.session import ServerState  # noqa: E402

SIZE = (160, 48)
CAUSE_BOUND_S = 10.0
GONE = (ServerState.EXITED, ServerState.STALLED, ServerState.FAILED)


async def wait_for(pilot, cond, timeout: float, what: str) -> float:
    """Pause until ``cond()``; the seconds it took.  Raises SystemExit after ``timeout``."""
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        await pilot.pause(0.05)
    return time.monotonic() - t0


def scheduler_of(pid: int) -> psutil.Process | None:
    """SGLang's scheduler subprocess under ``pid`` (``sglang::scheduler…`` title, or ``scheduler`` in
    its command line), else None."""
    for p in psutil.Process(pid).children(recursive=True):
        try:
            text = " ".join([p.name(), *p.cmdline()])
        except psutil.Error:
            continue
        if "scheduler" in text:
            return p
    return None


def gpu_memory_of(pids: set[int]) -> dict[int, float]:
    """MiB ``nvidia-smi`` reports for any of ``pids`` (empty when it cannot run)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    got = {}
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in pids:
            got[int(parts[0])] = float(parts[1]) if parts[1].replace(".", "").isdigit() else 0.0
    return got


async def main(a: argparse.Namespace) -> int:
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    cfg = AppConfig(profile=a.profile, suite=a.suite, out_dir=out / "tui-runs", preset_dir=out / "presets",
                    autostart=True, autoload=True, max_tokens=a.max_tokens, concurrency=a.concurrency,
                    ready_timeout_s=300, stall_s=a.stall_s)
    app = create_app(cfg)
    result: dict = {"profile": a.profile, "kill": a.kill, "bound_s": CAUSE_BOUND_S, "stall_s": a.stall_s}
    async with app.run_test(size=SIZE) as pilot:
        s = app.session
        await wait_for(pilot, lambda: s.state in (ServerState.READY, *GONE), 300, "server ready")
        if s.state != ServerState.READY:
            app.save_screenshot("tui-kill-launch-failed.svg", str(out))
            raise SystemExit(f"server did not start: {s.state_detail}")
        await wait_for(pilot, lambda: s.load.done >= a.warm, 180, f"{a.warm} finished requests")
        server_pid = s.server.pid
        tree = {server_pid, *(p.pid for p in psutil.Process(server_pid).children(recursive=True))}
        target = psutil.Process(server_pid) if a.kill == "main" else scheduler_of(server_pid)
        if target is None:
            raise SystemExit("no scheduler subprocess found under the server (SGLang's layout changed?)")
        result["killed"] = {"pid": target.pid, "name": target.name()}
        starts: list[float] = []
        orig = s.client.generate_stream

        async def counted(*args, **kw):
            starts.append(time.monotonic())
            return await orig(*args, **kw)

        s.client.generate_stream = counted
        t_kill = time.monotonic()
        os.kill(target.pid, signal.SIGKILL)
        result["cause_s"] = round(await wait_for(pilot, lambda: s.state in GONE, 120, "the cause"), 3)
        t_cause = t_kill + result["cause_s"]
        result["load_stopped_s"] = round(
            result["cause_s"] + await wait_for(pilot, lambda: not s.load_running, 60, "the load stopped"), 3)
        result["state"], result["detail"] = s.state.value, s.state_detail
        result["sent_after_kill"] = sum(t > t_kill for t in starts)
        result["sent_after_fault"] = sum(t > t_cause for t in starts)
        for tab in ("launch", "log"):
            app.action_show_tab(tab)
            await pilot.pause(1.0)
            app.save_screenshot(f"tui-kill-{tab}.svg", str(out))
        await asyncio.sleep(15)  # the dashboard kills what is left of a dead server's tree
        alive = sorted(p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE)
        result["left_running"] = alive
        result["gpu_memory_left_mib"] = gpu_memory_of(tree)
        run_dir = s.launch_info.run_dir if s.launch_info is not None else None
        if run_dir is not None and (run_dir / "summary.json").is_file():
            result["summary_run"] = json.loads((run_dir / "summary.json").read_text())["runs"][-1]
        await s.stop()
    ok = (result["cause_s"] <= CAUSE_BOUND_S and result["sent_after_fault"] == 0 and not result["left_running"]
          and not result["gpu_memory_left_mib"])
    result["ok"] = ok
    (out / "tui-kill.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps({k: result[k] for k in ("cause_s", "load_stopped_s", "state", "sent_after_fault",
                                             "left_running", "ok")}), flush=True)
    print(result["detail"], flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="h200-tiny-eagle3")
    ap.add_argument("--suite", default="h200-tiny")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kill", choices=("scheduler", "main"), default="scheduler")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--warm", type=int, default=8, help="finished requests before the kill")
    ap.add_argument("--stall-s", type=float, default=15.0)
    sys.exit(asyncio.run(main(ap.parse_args())))
