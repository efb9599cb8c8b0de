"""Process-tree helpers of :mod:`specdash.sglang.process`: find, signal and reap every process of
a server's process group, with psutil create times as the guard against pid reuse.

``terminate_tree`` is the one stop sequence (SIGTERM the group and strays, wait, SIGKILL what is
left); :mod:`specdash.sglang.leftovers` uses the same helpers for servers of a killed specdash.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

import psutil

log = logging.getLogger("specdash.sglang.process")

__all__ = ["alive", "create_time", "group_members", "running", "same_process", "signal_all", "terminate_tree"]


def create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def same_process(pid: int, create_time: float | None) -> psutil.Process | None:
    """The live, non-zombie process ``pid`` if its create_time matches (pid reuse guard)."""
    try:
        p = psutil.Process(pid)
        if create_time is not None and abs(p.create_time() - create_time) > 0.01:
            return None
        if p.status() == psutil.STATUS_ZOMBIE:
            return None
        return p
    except psutil.Error:
        return None


def running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def alive(known: Mapping[int, float | None]) -> list[psutil.Process]:
    return [p for pid, ct in known.items() if (p := same_process(pid, ct)) is not None]


def group_members(pgid: int, not_before: float | None = None) -> list[psutil.Process]:
    """Live, non-zombie processes of process group ``pgid`` (created at or after
    ``not_before``, to skip an unrelated group that reuses the number)."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) != pgid:
                continue
            if not_before is not None and p.create_time() < not_before - 0.01:
                continue
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return out


def signal_all(pgid: int, procs: Sequence[psutil.Process], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)


def terminate_tree(
    pgid: int,
    extra: Sequence[psutil.Process],
    timeout_s: float,
    wait_main: subprocess.Popen | None = None,
    not_before: float | None = None,
) -> None:
    """SIGTERM group ``pgid`` + ``extra``; wait ≤ ``timeout_s`` for all to go; SIGKILL."""
    signal_all(pgid, extra, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while True:
        if wait_main is not None:
            wait_main.poll()  # reap our child so it does not linger as a zombie
        left = [p for p in (*group_members(pgid, not_before), *extra) if running(p)]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if left:
        log.warning("SIGKILL to %d process(es) of server group %d", len(left), pgid)
        signal_all(pgid, left, signal.SIGKILL)
        # Our own child is reaped by Popen (psutil reaping it would lose its exit code).
        main_pid = wait_main.pid if wait_main is not None else None
        psutil.wait_procs([p for p in left if p.pid != main_pid], timeout=5.0)
    if wait_main is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            wait_main.wait(timeout=5.0)
