"""Log lines in SGLang's format (``scheduler_components/metrics_reporter.py``; golden ``server.log``).

SGLang's format is ``[%(asctime)s{prefix}] message`` with ``%Y-%m-%d %H:%M:%S`` local
time and no level name (``configure_logger`` in ``utils/common.py``); ``SGLANG_LOG_MS=1``
appends ``.mmm``.  The scheduler's prefix is `` TP{rank}`` only when ``tp_size > 1``.
Warnings print exactly like info lines (the real 0.5.14 log shows
``[2026-11-29 13:38:57] speculative_num_draft_tokens is adjusted …`` with no level word).
Lines go to stdout, flushed per line, so a launcher reading the pipe sees them at once.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


class LogWriter:
    """Writes SGLang-format lines; ``level`` is ``--log-level`` (lines below it are dropped)."""

    def __init__(self, level: str = "info", stream: TextIO | None = None, *, tp_size: int = 1) -> None:
        self.threshold = LEVELS.get(str(level).lower(), 20)
        self.stream = stream or sys.stdout
        self.scheduler_prefix = " TP0" if tp_size > 1 else ""
        self.ms = os.environ.get("SGLANG_LOG_MS", "").lower() in ("1", "true")

    def stamp(self, prefix: str = "") -> str:
        """``[2026-11-29 13:47:12 TP0]`` for now."""
        now = time.time()
        s = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
        if self.ms:
            s += f".{int(now * 1000) % 1000:03d}"
        return f"[{s}{prefix}]"

    def line(self, msg: str, *, level: str = "info", prefix: str = "") -> None:
        """Print ``[timestamp prefix] msg`` when ``level`` passes the threshold."""
        if LEVELS.get(level, 20) < self.threshold:
            return
        self.raw(f"{self.stamp(prefix)} {msg}")

    def scheduler(self, msg: str, *, level: str = "info") -> None:
        """A line from the scheduler of TP rank 0 (`` TP0`` prefix when tp > 1)."""
        self.line(msg, level=level, prefix=self.scheduler_prefix)

    def warning(self, msg: str) -> None:
        """A WARNING-level line (same shape as info in SGLang's format)."""
        self.line(msg, level="warning")

    def raw(self, text: str) -> None:
        """Write text verbatim (tracebacks, progress bars) and flush."""
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
