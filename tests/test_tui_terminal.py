"""The dashboard leaves promptly when its terminal goes away (and on SIGTERM), stopping its server."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from specdash.tui.terminal import SafeWriterThread

REPO = Path(__file__).resolve().parents[1]


class _DeadFile:
    """A terminal that is gone: every write fails with EIO."""

    def write(self, text: str) -> int:
        raise OSError(5, "Input/output error")

    def flush(self) -> None:
        raise OSError(5, "Input/output error")

    def fileno(self) -> int:
        return 1


def test_safe_writer_never_blocks_on_a_dead_terminal():
    lost = []
    w = SafeWriterThread(_DeadFile(), on_lost=lost.append)  # type: ignore[arg-type]
    w.start()
    t0 = time.monotonic()
    for _ in range(200):  # Textual's writer blocked forever after 30 queued writes
        w.write("x" * 100)
    w.stop()
    # A deadline for a hang, not a speed bound (milliseconds unloaded; ``benchmarks/bounded_waits.py`` prints
    # it): writes that each waited out their 0.5 s put once the queue filled would take 85 s here.
    assert time.monotonic() - t0 < 30
    assert w.lost and lost and "failed" in lost[0]
    w.join(30)  # stop() waits 2 s at most; on a loaded machine the thread may end a moment later
    assert not w.is_alive()


def _read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    buf = b""
    end = time.monotonic() + timeout
    while time.monotonic() < end and needle not in buf:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf


def _spawn(tmp_path: Path) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:  # child: the dashboard in demo mode on its own terminal
        os.chdir(REPO)
        env = dict(os.environ, TERM="xterm-256color", COLUMNS="100", LINES="30")
        os.execve(sys.executable, [sys.executable, "-m", "specdash", "--demo", "--out", str(tmp_path / "runs")], env)
    return pid, fd


def _sims(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [p for p in psutil.Process(pid).children(recursive=True) if "specdash.sim" in " ".join(p.cmdline())]
    return []


def _wait_exit(pid: int, timeout: float) -> int | None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.1)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("how", ["close-terminal", "sigterm", "sigint"])
def test_demo_exits_when_terminal_goes_away(tmp_path, how):
    pid, fd = _spawn(tmp_path)
    sims: list[psutil.Process] = []
    try:
        _read_until(fd, b"READY", 60)
        end = time.monotonic() + 20
        while time.monotonic() < end and not sims:
            sims = _sims(pid)
            time.sleep(0.2)
        assert sims, "the demo did not start its simulator"
        if how == "close-terminal":
            os.close(fd)
            fd = -1
        else:
            os.kill(pid, signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        # a deadline for a hang, not a speed bound: the exit guard forces the exit after its 8 s grace
        status, out = None, b""
        end = time.monotonic() + 30
        while status is None and time.monotonic() < end:
            if fd >= 0:
                out += _read_until(fd, b"\x00never", 0.5)
            status = _wait_exit(pid, 0.5)
        assert status is not None, f"specdash did not exit within 30 s after {how}"
        if how == "sigint":  # a clean exit: no traceback, the interrupted-command status
            assert b"Traceback" not in out and b"KeyboardInterrupt" not in out, out[-2000:]
            assert os.waitstatus_to_exitcode(status) == 130
        _, alive = psutil.wait_procs(sims, timeout=30)  # a deadline for a hang: it is normally gone already
        assert not alive, f"simulator left running: {[p.pid for p in alive]}"
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        for p in sims:
            with contextlib.suppress(psutil.Error):
                p.kill()
