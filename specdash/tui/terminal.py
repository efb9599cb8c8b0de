"""Leaving promptly when the terminal goes away (SIGHUP, EIO on the tty, a writer that blocks).

Textual's ``WriterThread`` dies on the first failed write (``EIO`` once the terminal is gone)
and its bounded queue then blocks the event loop's thread forever in ``queue.put`` — signal
handlers registered with ``loop.add_signal_handler`` never run after that, so the process
ignored SIGTERM.  Here:

* :class:`SafeWriterThread` never blocks its callers for long: a failed write marks the
  terminal lost (further output is dropped), a full queue drops the frame, ``stop`` joins
  with a bound;
* :class:`SafeLinuxDriver` uses it;
* :class:`ExitGuard` installs Python-level SIGHUP / SIGTERM / SIGINT handlers (they run even
  while the loop's thread is blocked), asks the app to stop its servers and exit, and after a
  bounded grace period stops the servers itself and ends the process with ``os._exit``.  SIGINT
  (``kill -INT``; Ctrl-C in the terminal is a key to Textual, not a signal) used to reach
  :func:`specdash.sglang.process.install_signal_handlers`' handler, which raises
  ``KeyboardInterrupt`` in whatever the event loop was doing: a raw traceback.  Now it is a clean
  exit with status 130 (128 + SIGINT), as a shell reports an interrupted command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from queue import Empty, Full, Queue
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver

#: Seconds the normal exit (stop servers, restore the terminal) may take after a signal.
GRACE_S = 8.0
#: Seconds a single terminal write may hang before the terminal counts as gone.
WRITE_STALL_S = 10.0


class SafeWriterThread(threading.Thread):
    """Drop-in for Textual's ``WriterThread`` that cannot hang the app (module docstring)."""

    def __init__(self, file: IO[str], on_lost: Callable[[str], None] | None = None) -> None:
        super().__init__(daemon=True, name="specdash-output")
        self._queue: Queue[str | None] = Queue(30)
        self._file = file
        self._on_lost = on_lost
        self.lost = False
        self._writing_since: float | None = None

    def _lose(self, why: str) -> None:
        if self.lost:
            return
        self.lost = True
        with contextlib.suppress(Exception):
            if self._on_lost is not None:
                self._on_lost(why)

    def write(self, text: str) -> None:
        """Queue ``text``; dropped when the terminal is gone or does not drain."""
        if self.lost:
            return
        try:
            self._queue.put(text, timeout=0.5)
        except Full:
            since = self._writing_since
            if since is not None and time.monotonic() - since > WRITE_STALL_S:
                self._lose(f"terminal write blocked for more than {WRITE_STALL_S:.0f} s")

    def isatty(self) -> bool:
        """Pretend to be a terminal."""
        return True

    def fileno(self) -> int:
        """File number of the proxied file."""
        return self._file.fileno()

    def flush(self) -> None:
        """No-op (the thread flushes)."""

    def run(self) -> None:
        """Write queued text until stopped or the terminal fails."""
        get, qsize = self._queue.get, self._queue.qsize
        try:
            while True:
                text = get()
                if text is None:
                    break
                if self.lost:
                    continue
                self._writing_since = time.monotonic()
                self._file.write(text)
                if qsize() == 0:
                    self._file.flush()
                self._writing_since = None
            if not self.lost:
                self._file.flush()
        except (OSError, ValueError) as exc:  # EIO: the terminal is gone
            self._lose(f"terminal write failed: {exc}")
            self._drain()

    def _drain(self) -> None:
        """Empty the queue so a writer stuck in ``put`` wakes up (new writes are dropped)."""
        while True:
            try:
                if self._queue.get(timeout=1.0) is None:
                    return
            except Empty:
                return

    def stop(self) -> None:
        """Stop the thread, waiting at most 2 s."""
        with contextlib.suppress(Full):
            self._queue.put(None, timeout=1.0)
        self.join(timeout=2.0)


class SafeLinuxDriver(LinuxDriver):
    """Textual's Linux driver with :class:`SafeWriterThread` (terminal loss → ``on_lost``)."""

    #: Called (from any thread) when the terminal is found gone; set by :class:`ExitGuard`.
    on_lost: Callable[[str], None] | None = None

    def start_application_mode(self) -> None:
        """As Textual's, with the safe writer thread."""
        import textual.drivers.linux_driver as ld

        original = ld.WriterThread
        ld.WriterThread = lambda file: SafeWriterThread(file, _lost)  # type: ignore[assignment]
        try:
            super().start_application_mode()
        finally:
            ld.WriterThread = original


def _lost(why: str) -> None:
    hook = SafeLinuxDriver.on_lost
    if hook is not None:
        hook(why)


class ExitGuard:
    """SIGHUP / SIGTERM / SIGINT / terminal loss → graceful exit (status 128 + the signal), forced
    after ``grace_s``.

    Args:
        request_exit: thread-safe "stop everything and exit" (schedules onto the app's loop).
        stop_servers: synchronous last resort that kills the servers this process started.
        grace_s: how long the graceful path may take before ``os._exit``.
    """

    def __init__(self, request_exit: Callable[[], None], stop_servers: Callable[[], None],
                 grace_s: float = GRACE_S) -> None:
        self.request_exit = request_exit
        self.stop_servers = stop_servers
        self.grace_s = grace_s
        self.reason: str | None = None
        self.exit_code = 0
        self._previous: dict[int, Any] = {}
        self._lock = threading.Lock()

    def install(self) -> None:
        """Install the handlers (main thread only) and hook the safe driver."""
        for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, OSError):
                self._previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
        SafeLinuxDriver.on_lost = self.trigger

    def uninstall(self) -> None:
        """Restore the previous handlers."""
        SafeLinuxDriver.on_lost = None
        for sig, prev in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, prev if prev is not None else signal.SIG_DFL)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.trigger(signal.Signals(signum).name, 128 + signum)

    def trigger(self, reason: str, code: int = 128 + signal.SIGHUP) -> None:
        """Start leaving (idempotent; a second trigger forces the exit at once)."""
        with self._lock:
            first = self.reason is None
            if first:
                self.reason, self.exit_code = reason, code
        if not first:
            threading.Thread(target=self._force, daemon=True, name="specdash-force-exit").start()
            return
        threading.Thread(target=self._watchdog, daemon=True, name="specdash-exit-watchdog").start()
        with contextlib.suppress(Exception):
            self.request_exit()

    def _watchdog(self) -> None:
        time.sleep(self.grace_s)  # still alive (daemon thread): the normal exit did not finish
        self._force()

    def _force(self) -> None:
        with contextlib.suppress(Exception):
            self.stop_servers()
        os._exit(self.exit_code)


_LIBC: list = []


def release_free_memory() -> bool:
    """Give the C allocator's free pages back to the system (glibc ``malloc_trim(0)``; a no-op
    returning False elsewhere).

    An hours-long dashboard allocates and frees a request's records, a frame's strips and an
    advisor fit's arrays from several threads; glibc keeps what they freed in its per-thread
    arenas, so the process's RSS creeps up with no Python object left behind (tracemalloc's
    traced total stays flat).  Trimming every 30 s keeps the RSS at what is in use.
    """
    import sys

    if not sys.platform.startswith("linux"):
        return False
    if not _LIBC:
        import ctypes
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _LIBC.append(libc.malloc_trim)
        except (OSError, AttributeError):
            _LIBC.append(None)
    trim = _LIBC[0]
    if trim is None:
        return False
    trim(0)
    return True
