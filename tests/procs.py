"""Process checks the tests share."""

from __future__ import annotations

import psutil


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (gone, or a zombie waiting to be reaped).  A process that exits between
    the existence check and the status read counts as gone (``psutil.NoSuchProcess``: a busy CI met it)."""
    try:
        return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
