"""Process-tree readings through psutil (no UI): the server's processes, their CPU and memory.

A launched SGLang server is a tree (launcher → tokenizer manager, schedulers per TP rank,
detokenizer); NVML reports the PIDs holding GPU memory, which are usually the scheduler
children, not the PID specdash started.  The helpers here walk the tree from the root PID
so the GPU panel can say which device processes belong to *this* server.

Units are in the names: ``cpu_pct`` is percent of one core since the previous reading of
the same process (psutil's ``cpu_percent(None)``), ``rss_mib`` is resident memory in MiB.
Every function degrades to empty results for processes that vanished or cannot be read.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import psutil

MIB = 2**20


@dataclass(frozen=True)
class ProcSample:
    """One process of a tree at one moment.

    ``cpu_pct``: percent of one core since the previous sample (0 on the first one);
    ``rss_mib``: resident set size, MiB; ``depth``: 0 for the root, 1 for its children, …
    """

    pid: int
    name: str
    cpu_pct: float
    rss_mib: float
    depth: int = 0
    cmdline: str = ""


def process_tree(root_pid: int) -> list[psutil.Process]:
    """The root process and all its descendants (empty when the root is gone)."""
    try:
        root = psutil.Process(root_pid)
        return [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def tree_pids(root_pid: int | None) -> set[int]:
    """PIDs of ``root_pid`` and its descendants (empty for None or a vanished root)."""
    if root_pid is None:
        return set()
    return {p.pid for p in process_tree(root_pid)}


def alive_descendants(root_pid: int) -> list[int]:
    """PIDs of the still-running descendants of ``root_pid`` (zombies excluded).

    Tests use it to check that quitting the dashboard leaves no child behind.
    """
    out = []
    try:
        children = psutil.Process(root_pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    for c in children:
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out.append(c.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


@dataclass
class ProcTreeSampler:
    """Samples CPU % and RSS of a process tree; keeps the ``psutil.Process`` objects between
    calls so ``cpu_pct`` is a true rate over the interval between two :meth:`sample` calls.

    Args:
        root_pid: the process specdash started (the server's launcher).
    """

    root_pid: int
    _procs: dict[int, psutil.Process] = field(default_factory=dict)

    def sample(self) -> list[ProcSample]:
        """Read every live process of the tree; the root first, then children by PID."""
        out: list[ProcSample] = []
        try:
            root = psutil.Process(self.root_pid)
            kids = root.children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            self._procs.clear()
            return out
        parents = {self.root_pid: 0}
        current: dict[int, psutil.Process] = {}
        for p in [root, *kids]:
            proc = self._procs.get(p.pid, p)
            current[p.pid] = proc
            try:
                with proc.oneshot():
                    cpu = proc.cpu_percent(None)
                    rss = proc.memory_info().rss / MIB
                    name = proc.name()
                    ppid = proc.ppid()
                    cmd = " ".join(proc.cmdline())[:200]
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            depth = parents.get(ppid, -1) + 1 if p.pid != self.root_pid else 0
            parents[p.pid] = depth
            out.append(ProcSample(p.pid, name, float(cpu), float(rss), depth, cmd))
        self._procs = current
        return out


def wait_gone(pids: Iterable[int], timeout_s: float = 5.0) -> list[int]:
    """Wait up to ``timeout_s`` for ``pids`` to exit; return those still running."""
    deadline = time.monotonic() + timeout_s
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if psutil.pid_exists(p) and not _is_zombie(p)]
        if left:
            time.sleep(0.05)
    return left


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return True
