"""Servers — and private key files — left behind by a specdash that was killed (SIGKILL runs no cleanup).

Each :class:`specdash.sglang.process.ServerProcess` writes a small JSON record to
:func:`specdash.sglang.process.state_dir` at start and removes it on a clean stop;
:func:`find_leftovers` lists the records whose process groups still have live processes,
:func:`kill_leftover` stops one, :func:`stop_leftovers_interactively` is the start-up check.

The API key reaches a launched SGLang in a private ``--config`` file (mode 0600 in a 0700
directory of the temp dir, :func:`make_secret_dir`), deleted once the server is ready.  A specdash
killed during start-up leaves it behind; the directory's name carries its owner's pid and process
start time, so the next start (:func:`find_leftovers`, and every :func:`make_secret_dir`) deletes
the directories of owners that are gone (:func:`remove_stale_secret_dirs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import psutil

from specdash.sglang.process import state_dir
from specdash.sglang.proctree import group_members, same_process, terminate_tree

__all__ = ["SECRET_DIR_PREFIX", "find_leftovers", "kill_leftover", "make_secret_dir", "remove_stale_secret_dirs",
           "stop_leftovers_interactively"]

#: Name prefix of the private directories holding a launch's ``--config`` key file:
#: ``specdash-secret-<owner pid>-<owner start time, ms>-<random>``.
SECRET_DIR_PREFIX = "specdash-secret-"
_SECRET_NAME = re.compile(re.escape(SECRET_DIR_PREFIX) + r"(\d+)-(\d+)-")
#: A directory of the older name form (no owner in it) counts as stale after this many seconds.
_UNNAMED_STALE_S = 3600.0


def make_secret_dir() -> str:
    """A fresh private directory (mode 0700, :func:`tempfile.mkdtemp`) for a launch's key file, named after
    this process (pid and start time) so that a later specdash can tell whether its owner is gone; stale
    ones of dead owners are deleted first (:func:`remove_stale_secret_dirs`)."""
    remove_stale_secret_dirs()
    started = int(psutil.Process().create_time() * 1000)
    return tempfile.mkdtemp(prefix=f"{SECRET_DIR_PREFIX}{os.getpid()}-{started}-")


def remove_stale_secret_dirs(base: str | Path | None = None) -> list[str]:
    """Delete this user's :data:`SECRET_DIR_PREFIX` directories under ``base`` (default the temp dir) whose
    owning specdash no longer runs (pid and start time compared, so a reused pid is not mistaken for
    it); a directory of the older name form once it is an hour old.  Returns the paths deleted."""
    root = Path(base or tempfile.gettempdir())
    removed = []
    uid = os.getuid()
    for d in root.glob(SECRET_DIR_PREFIX + "*"):
        try:
            st = d.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            continue
        m = _SECRET_NAME.match(d.name)
        if m:
            if same_process(int(m.group(1)), int(m.group(2)) / 1000.0) is not None:
                continue  # its specdash still runs (and deletes it itself)
        elif time.time() - st.st_mtime < _UNNAMED_STALE_S:
            continue
        shutil.rmtree(d, ignore_errors=True)
        if not d.exists():
            removed.append(str(d))
    return removed


def _record_alive(rec: Mapping[str, Any]) -> list[psutil.Process]:
    pid, pgid, ctime = rec.get("pid"), rec.get("pgid"), rec.get("create_time")
    if not isinstance(pid, int) or not isinstance(pgid, int):
        return []
    procs = []
    leader = same_process(pid, ctime) if ctime is not None else None
    if leader is not None:
        procs.append(leader)
    procs += [p for p in group_members(pgid, ctime) if p.pid != pid]
    return procs


def find_leftovers(cleanup: bool = True) -> list[dict]:
    """Records of servers started by a specdash that is gone, whose process group still
    has live processes (pid reuse is ruled out by comparing psutil create times).

    Records of servers owned by a specdash that still runs are skipped.  With
    ``cleanup``, records whose servers are all gone are deleted.  Each returned record
    has the keys written at start (``pid``, ``pgid``, ``create_time``, ``argv``,
    ``started_at``, ``run_dir``, ``log_path``, ``url``, ``owner_pid``) plus ``path`` (the
    record file) and ``alive_pids``.  With ``cleanup``, the private key directories of dead
    specdash processes are deleted too (:func:`remove_stale_secret_dirs`).
    """
    d = state_dir()
    out = []
    if cleanup:
        remove_stale_secret_dirs()  # a key file left by a specdash killed during start-up
    for path in sorted(d.glob("*.json")) if d.is_dir() else ():
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        owner = rec.get("owner_pid")
        if isinstance(owner, int) and same_process(owner, rec.get("owner_create_time")) is not None:
            continue  # its specdash (maybe this one) still runs and will stop it
        alive = _record_alive(rec)
        if alive:
            out.append({**rec, "path": str(path), "alive_pids": sorted(p.pid for p in alive)})
        elif cleanup:
            with contextlib.suppress(OSError):
                path.unlink()
    return out


def kill_leftover(record: Mapping[str, Any], timeout_s: float = 10.0) -> bool:
    """Stop a leftover server found by :func:`find_leftovers`: SIGTERM its process group
    (and its recorded leader), wait ≤ ``timeout_s``, SIGKILL the rest, delete the record.
    Returns True when processes were running."""
    alive = _record_alive(record)
    pgid = record.get("pgid")
    if alive and isinstance(pgid, int):
        terminate_tree(pgid, alive, timeout_s, not_before=record.get("create_time"))
    path = record.get("path") or str(state_dir() / f"{record.get('pid')}.json")
    with contextlib.suppress(OSError):
        Path(path).unlink()
    return bool(alive)


def stop_leftovers_interactively(
    say: Callable[[str], Any] = print,
    *,
    ask: bool | None = None,
    input_fn: Callable[[str], str] = input,
    timeout_s: float = 10.0,
) -> list[dict]:
    """Start-up check: report servers left running by a specdash
    that was killed, and stop them.

    With ``ask`` (default: when stdin is a terminal) the user is asked first ("Stop them?
    [Y/n]"; Enter means yes, end of input means no); without a terminal they are stopped,
    since they are orphans holding GPU memory that the new launch needs.  ``say`` gets
    one line per leftover and a summary.  Returns the records that were stopped.
    """
    leftovers = find_leftovers()
    if not leftovers:
        return []
    for rec in leftovers:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.get("started_at") or 0))
        say(f"leftover server from an earlier specdash: pid {rec['pid']} "
            f"({' '.join(rec.get('argv') or [])}), started {started}, run dir {rec.get('run_dir')}")
    if ask is None:
        ask = sys.stdin is not None and sys.stdin.isatty()
    if ask:
        try:
            answer = input_fn(f"Stop {len(leftovers)} leftover server(s)? [Y/n] ").strip().lower()
        except EOFError:
            answer = "n"
        if answer not in ("", "y", "yes"):
            say("leftover servers left running")
            return []
    stopped = [rec for rec in leftovers if kill_leftover(rec, timeout_s)]
    say(f"stopped {len(stopped)} leftover server(s)")
    return stopped
