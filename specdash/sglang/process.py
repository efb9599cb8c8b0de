"""Start, watch and stop an SGLang server (or the simulator) as a child process tree.

Rules (no orphans, no shell):

* the server starts from an argv list, never a shell, in its **own process group and
  session** (``start_new_session=True``), stdout and stderr merged;
* a reader thread copies the output byte for byte into the run directory's log file
  (flushed per line) and feeds a :class:`~specdash.sglang.logs.LogRing`;
* :meth:`ServerProcess.stop` sends SIGTERM to the whole group (and to descendants that
  moved to another group, found with psutil), waits, then SIGKILLs what is left;
* every live :class:`ServerProcess` is in a module registry; :func:`install_signal_handlers`
  (called by the CLI, never at import) stops them on SIGINT/SIGTERM and at exit;
* a SIGKILL of specdash runs no cleanup, so each start writes a small JSON record to
  ``$SPECDASH_STATE_DIR`` or ``${XDG_STATE_HOME:-~/.local/state}/specdash/servers/``
  (removed on a clean stop); :func:`specdash.sglang.leftovers.find_leftovers` lists the records whose
  servers still run and :func:`~specdash.sglang.leftovers.kill_leftover` stops one.  A copy of the record, with the exit
  code, stays in the run directory as ``server_process.json``;
* on Linux the server also gets a **parent-death signal** (``prctl(PR_SET_PDEATHSIG,
  SIGTERM)``, set by a two-line ``python -c`` shim that then ``exec``s the real argv, so
  no ``preexec_fn`` runs in a threaded parent): when specdash dies, even by SIGKILL, the
  kernel sends the server SIGTERM and SGLang (or the simulator) shuts its tree down.
  The kernel ties this signal to the *thread* that forked, so every server is forked by
  one long-lived spawner thread, never by a short-lived worker.  ``SPECDASH_NO_PDEATHSIG=1``
  turns it off (the leftover records still work).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from specdash.sglang.logs import LogRing
from specdash.sglang.proctree import alive, create_time, terminate_tree
from specdash.sglang.secrets import redact_bytes, secret_values

if TYPE_CHECKING:
    from specdash.sglang.client import SGLangClient

__all__ = [
    "ServerProcess",
    "ServerStartError",
    "free_port",
    "install_signal_handlers",
    "live_servers",
    "state_dir",
    "stop_all",
]

log = logging.getLogger(__name__)

#: Runs in the child before the real server: arm the parent-death signal, bail out if the
#: parent is already gone (the race prctl leaves open), then become the server (same pid).
_PDEATHSIG_SHIM = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None,use_errno=True).prctl(1,int(signal.SIGTERM),0,0,0)\n"
    "os.getppid()==int(sys.argv[1]) or sys.exit(143)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])"
)
_SPAWNER: Any = None
_SPAWNER_LOCK = threading.Lock()


def _pdeathsig_argv(argv: list[str]) -> list[str]:
    """``argv`` wrapped in the parent-death shim (Linux, unless SPECDASH_NO_PDEATHSIG=1)."""
    import shutil

    if not sys.platform.startswith("linux") or os.environ.get("SPECDASH_NO_PDEATHSIG") == "1":
        return argv
    if shutil.which(argv[0]) is None:  # say so here, as Popen would, not as a shim exit code
        raise FileNotFoundError(2, f"no such program: {argv[0]}", argv[0])
    return [sys.executable, "-c", _PDEATHSIG_SHIM, str(os.getpid()), *argv]


def _spawn(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` (a Popen) on the one long-lived spawner thread (see the module docstring)."""
    global _SPAWNER
    from concurrent.futures import ThreadPoolExecutor

    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="specdash-spawner")
    return _SPAWNER.submit(fn).result()


_REGISTRY: dict[int, ServerProcess] = {}
_REGISTRY_LOCK = threading.Lock()


class ServerStartError(RuntimeError):
    """The server exited, or never became healthy, during start-up.

    Attributes:
        exit_code: the process's exit code (negative: killed by that signal), or None
            when it was still running (a readiness timeout).
        log_tail: the last log lines (text).
    """

    def __init__(self, message: str, exit_code: int | None, log_tail: str) -> None:
        shown = "\n".join(ln if len(ln) <= 300 else ln[:300] + " …" for ln in log_tail.splitlines()[-15:])
        super().__init__(f"{message}\n--- last log lines ---\n{shown}" if log_tail else message)
        #: the message without the log tail
        self.message = message
        self.exit_code = exit_code
        self.log_tail = log_tail


def state_dir() -> Path:
    """Where leftover records live: ``$SPECDASH_STATE_DIR``, else
    ``${XDG_STATE_HOME:-~/.local/state}/specdash/servers``."""
    override = os.environ.get("SPECDASH_STATE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "specdash" / "servers"


#: Ports :func:`free_port` picks from start here (below the kernel's ephemeral range when that leaves room).
PICKED_PORTS_FROM = 20000


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (``ip_local_port_range``); Linux's
    default when it cannot be read."""
    try:
        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago, for a server that binds it next.

    Picked at random below the kernel's ephemeral range (from :data:`PICKED_PORTS_FROM`) and checked
    by binding it: every outgoing connection takes its local port from the ephemeral range, so a port
    the kernel hands out for port 0 can be taken by any connection of any process between this check and
    the server's bind — on a busy machine a launch then failed with "address already in use".  Where the
    range leaves no room below it, or 50 picks are all taken, the kernel picks (bind to port 0)."""
    import random

    lo, _ = _ephemeral_range()
    if lo - PICKED_PORTS_FROM >= 1000:
        for _ in range(50):
            port = random.randrange(PICKED_PORTS_FROM, lo)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ServerProcess:
    """One server process tree.

    Args:
        argv: the command (``argv[0]`` is looked up on PATH); never run through a shell.
        env: variables set for the child, on top of this process's environment unless
            ``inherit_env`` is False.
        run_dir: where ``log_name`` and ``server_process.json`` are written (created if
            missing); None keeps the log in memory only (unless ``log_path`` is given).
        url: the server's base URL, used by :meth:`wait_ready` when no client is given.
        ring: the :class:`LogRing` to feed (a new one by default; see :attr:`ring`).
        log_path: the log file, overriding ``run_dir / log_name``.
        name: a label (e.g. the profile name) for log messages and the records.
        secrets: values to write as ``***`` besides the ``--api-key`` / ``--admin-api-key`` values of
            ``argv`` (a key handed to SGLang in a ``--config`` file instead, see
            :func:`specdash.launch.secrets_via_config`).
        stdin_data: written to the child's standard input, which then stays open until the child
            exits or :meth:`stop` (an ``ssh`` node launch reads its environment there and treats
            the end of its input as "specdash is gone", :mod:`specdash.sglang.remote`); None:
            ``/dev/null``.

    Use as a context manager (``with ServerProcess(...).start() as srv``) or call
    :meth:`stop`.  Methods are safe to call from any thread; :meth:`stop` blocks.
    """

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        run_dir: str | os.PathLike | None = None,
        url: str | None = None,
        ring: LogRing | None = None,
        inherit_env: bool = True,
        cwd: str | os.PathLike | None = None,
        log_name: str = "server.log",
        log_path: str | os.PathLike | None = None,
        name: str | None = None,
        secrets: Sequence[str] = (),
        stdin_data: bytes | None = None,
    ) -> None:
        if isinstance(argv, str) or not argv:
            raise ValueError("argv must be a non-empty list of strings (no shell command lines)")
        self.argv = [str(a) for a in argv]
        #: values of --api-key / --admin-api-key: written as *** to the log file, ring and records
        #: (SGLang prints them in its ``server_args=ServerArgs(…)`` line).
        #: ``secrets``: more values to hide (an API key handed over in a --config file, not argv).
        self._secrets = [v.encode() for v in [*secret_values(self.argv), *secrets] if v]
        self._stdin_data = stdin_data
        self.env = dict(env or {})
        self.run_dir = Path(run_dir) if run_dir is not None else None
        if log_path is not None:
            self.log_path: Path | None = Path(log_path)
        else:
            self.log_path = self.run_dir / log_name if self.run_dir is not None else None
        self.name = name
        self.url = url
        self.ring = ring if ring is not None else LogRing()
        #: ``time.monotonic()`` of the last output line (None before the first): a node that is
        #: running but silent is told apart from one still printing its start-up
        self.last_output_at: float | None = None
        self._inherit_env = inherit_env
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._drained = False  # the reader was joined once after the exit (see log_tail)
        self._record: dict[str, Any] | None = None
        self._record_path: Path | None = None
        self._known: dict[int, float] = {}  # descendant pid -> create_time
        self._lock = threading.RLock()  # RLock: a signal handler may stop() mid-stop()
        self._stopped = False
        self.started_at: float | None = None  # time.monotonic() at start
        self.ready_s: float | None = None  # start → /health 200, seconds
        self.fired_up_seen = False

    # -- start --------------------------------------------------------------------------

    def start(self) -> ServerProcess:
        """Start the process (own session and process group, stdout+stderr merged) and
        its log reader; write the leftover record.  Returns self.

        Raises:
            RuntimeError: already started.  OSError: the command cannot be executed.
        """
        with self._lock:
            if self._proc is not None:
                raise RuntimeError("ServerProcess already started")
            env = {**os.environ, **self.env} if self._inherit_env else dict(self.env)
            if self.run_dir is not None:
                self.run_dir.mkdir(parents=True, exist_ok=True)
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
            argv = _pdeathsig_argv(self.argv)
            self._proc = _spawn(lambda: subprocess.Popen(
                argv,
                env=env,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL if self._stdin_data is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            ))
            self.started_at = time.monotonic()
            if self._stdin_data is not None and self._proc.stdin is not None:
                try:  # kept open: its end tells the child that specdash is gone
                    self._proc.stdin.write(self._stdin_data)
                    self._proc.stdin.flush()
                except OSError:  # the child exited at once: its log says why
                    pass
            log_file = open(self.log_path, "ab", buffering=0) if self.log_path else None
            self._reader = threading.Thread(
                target=self._read_output, args=(self._proc.stdout, log_file),
                name=f"sglang-log-{self._proc.pid}", daemon=True,
            )
            self._reader.start()
            self._write_record()
        with _REGISTRY_LOCK:
            _REGISTRY[self._proc.pid] = self
        log.info("started server %s pid=%d: %s", self.name or "", self._proc.pid, " ".join(self.argv[:3]))
        return self

    def _read_output(self, stream, log_file) -> None:
        try:
            for raw in iter(stream.readline, b""):
                raw = redact_bytes(raw, self._secrets)
                if log_file is not None:
                    log_file.write(raw)  # unbuffered: on disk line by line
                self.ring.append(raw.decode("utf-8", "replace"))
                self.last_output_at = time.monotonic()
        except (OSError, ValueError):  # pipe or file closed under us
            pass
        finally:
            stream.close()
            if log_file is not None:
                log_file.close()

    def _write_record(self) -> None:
        proc = self._proc
        assert proc is not None
        try:
            ctime = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            ctime = None
        self._record = {
            "pid": proc.pid,
            "pgid": proc.pid,  # start_new_session: the child leads its own group
            "create_time": ctime,
            "argv": self.argv[:3],
            "started_at": time.time(),
            "run_dir": str(self.run_dir) if self.run_dir is not None else None,
            "log_path": str(self.log_path) if self.log_path is not None else None,
            "url": self.url,
            "name": self.name,
            "owner_pid": os.getpid(),
            "owner_create_time": create_time(os.getpid()),
        }
        try:
            d = state_dir()
            d.mkdir(parents=True, exist_ok=True)
            self._record_path = d / f"{proc.pid}.json"
            _write_json(self._record_path, self._record)
        except OSError as e:
            log.warning("cannot write server record to %s: %s", state_dir(), e)
        if self.run_dir is not None:
            _write_json(self.run_dir / "server_process.json", self._record)

    # -- state --------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The server's pid (also its process group id), None before start."""
        return self._proc.pid if self._proc is not None else None

    @property
    def pgid(self) -> int | None:
        return self.pid

    @property
    def returncode(self) -> int | None:
        """Exit code once exited (negative = killed by that signal), else None."""
        return self._proc.poll() if self._proc is not None else None

    def is_alive(self) -> bool:
        """True while the main process has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` log lines.  Once the process has exited, waits (at most 2 s, once) for
        the reader thread to pass the pipe's last lines to the ring, so a dead server's tail is
        what it wrote last rather than what the reader had reached when the exit was noticed."""
        self._drain_after_exit()
        return self.ring.tail(n)

    def _drain_after_exit(self) -> None:
        if self._reader is not None and not self._drained and self.returncode is not None:
            self._drained = True
            self._reader.join(timeout=2.0)

    def log_lines(self) -> list[str]:
        """Every output line so far: from the log file when there is one (complete), else
        the lines the ring still holds.  Lines keep tqdm's ``\r`` redraws as written."""
        self._drain_after_exit()
        if self.log_path is not None and self.log_path.exists():
            text = self.log_path.read_bytes().decode("utf-8", "replace")
            return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
        return self.ring.lines()

    # -- readiness ----------------------------------------------------------------------

    async def wait_ready(
        self, client: SGLangClient | str | None = None, timeout_s: float = 600.0, poll_s: float = 0.5
    ) -> float:
        """Poll ``GET /health`` until it answers 200 (SGLang's ``http_server.py`` answers 503
        until warm-up ends; the "fired up" log line is noted in :attr:`fired_up_seen`).
        Returns the seconds from start to ready (also in :attr:`ready_s`).

        Args:
            client: an :class:`SGLangClient`, a base URL, or None for ``self.url``.

        Raises:
            ServerStartError: the process exited first (with its exit code and log tail),
                or ``timeout_s`` passed (exit_code None; the server keeps running, call
                :meth:`stop`).
            RuntimeError: not started.
        """
        from specdash.sglang.client import SGLangClient

        if self._proc is None or self.started_at is None:
            raise RuntimeError("ServerProcess not started")
        target = client if client is not None else self.url
        if target is None:
            raise ValueError("wait_ready needs a client or a url")
        own = isinstance(target, str)
        c = SGLangClient(target) if own else target
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                self._check_exited("exited during start-up")
                self._remember_descendants()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerStartError(
                        f"server not healthy after {timeout_s:.0f} s", None, self.log_tail()
                    )
                if await c.health(timeout=max(0.1, min(5.0, left))):
                    self._check_exited("exited during start-up")
                    self.ready_s = time.monotonic() - self.started_at
                    self.fired_up_seen = self.ring.ready.is_set()
                    return self.ready_s
                await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
        finally:
            if own:
                await c.aclose()

    def _check_exited(self, what: str) -> None:
        code = self.returncode
        if code is not None:
            raise ServerStartError(f"server {what} with exit code {code}", code, self.log_tail())

    def _remember_descendants(self) -> None:
        if self.pid is None:
            return
        try:
            for child in psutil.Process(self.pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    self._known.setdefault(child.pid, child.create_time())
        except psutil.Error:
            pass

    # -- stop ---------------------------------------------------------------------------

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """Stop the whole tree: SIGTERM to the process group and to known descendants
        outside it, wait up to ``timeout_s``, then SIGKILL whatever remains.  Idempotent;
        removes the leftover record and updates ``server_process.json``.  Returns the
        main process's exit code (None if it was never started).
        """
        with self._lock:
            proc = self._proc
            if proc is None:
                return None
            if self._stopped:
                return proc.returncode
            self._remember_descendants()
            extra = alive(self._known)
            terminate_tree(proc.pid, extra, timeout_s, wait_main=proc,
                            not_before=(self._record or {}).get("create_time"))
            try:
                code = proc.wait(timeout=10.0)
            except subprocess.TimeoutExpired:  # unkillable (e.g. stuck in the GPU driver)
                log.error("server pid=%d survived SIGKILL; its leftover record is kept", proc.pid)
                return None
            if self._reader is not None:
                self._reader.join(timeout=5.0)
            self._stopped = True
            if self._record_path is not None:
                with contextlib.suppress(OSError):
                    self._record_path.unlink()
            if self.run_dir is not None and self._record is not None:
                with contextlib.suppress(OSError):
                    _write_json(self.run_dir / "server_process.json",
                                {**self._record, "exit_code": code, "stopped_at": time.time()})
        with _REGISTRY_LOCK:
            _REGISTRY.pop(proc.pid, None)
        log.info("stopped server pid=%d (exit code %s)", proc.pid, code)
        return code

    async def astop(self, timeout_s: float = 30.0) -> int | None:
        """:meth:`stop` in a worker thread, for async callers."""
        return await asyncio.to_thread(self.stop, timeout_s)

    def __enter__(self) -> ServerProcess:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return f"ServerProcess({label}pid={self.pid}, argv={self.argv[:3]!r}, alive={self.is_alive()})"


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


# -- registry, signals, leftovers -----------------------------------------------------------


def live_servers() -> list[ServerProcess]:
    """The ServerProcess objects started by this process and not yet stopped."""
    with _REGISTRY_LOCK:
        return list(_REGISTRY.values())


def stop_all(timeout_s: float = 10.0) -> None:
    """Stop every live ServerProcess of this process (atexit / signal path)."""
    for srv in live_servers():
        try:
            srv.stop(timeout_s)
        except Exception:  # keep stopping the others
            log.exception("stopping server pid=%s failed", srv.pid)


_installed = False
_previous: dict[int, Any] = {}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that run directories are finished on the way out (their
    ``finally`` blocks run); the command exits 143 (128 + SIGTERM), as a shell reports a TERM kill."""

    exit_code = 128 + signal.SIGTERM


def _on_signal(signum: int, frame: Any) -> None:
    stop_all()
    prev = _previous.get(signum)
    if callable(prev):
        prev(signum, frame)
        return
    if signum == signal.SIGINT:
        # Also when SIGINT was ignored (a background job of a non-interactive shell): someone
        # sent it on purpose; end the run like Ctrl-C instead of carrying on without a server.
        raise KeyboardInterrupt
    if prev == signal.SIG_IGN:
        return
    if signum == signal.SIGTERM:
        # Unwind like Ctrl-C (partial results written, servers stopped), then exit 143. A second
        # SIGTERM while unwinding gets the default action.
        signal.signal(signum, signal.SIG_DFL)
        raise Terminated
    # Default action: restore it and re-deliver, so the exit status says "killed by".
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_signal_handlers() -> None:
    """Stop this process's servers on SIGINT/SIGTERM and at interpreter exit (atexit).

    Chains to the handlers installed before (e.g. Python's KeyboardInterrupt for
    SIGINT).  Idempotent; must be called from the main thread.  Not done at import.
    """
    global _installed
    if _installed:
        return
    atexit.register(stop_all)
    for sig in (signal.SIGINT, signal.SIGTERM):
        _previous[sig] = signal.getsignal(sig)
        signal.signal(sig, _on_signal)
    _installed = True
