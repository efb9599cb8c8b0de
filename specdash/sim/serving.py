"""The simulated server's process life: its listening socket, the HTTP server (uvicorn on the app of
:mod:`specdash.sim.app`, or a stand-in that answers ``/health`` during start-up), the signals that stop it
(SIGTERM / SIGINT, as SGLang's ``kill_process_tree`` path) and the exit of a scheduler that was killed.  A mixin of
:class:`specdash.sim.server.SimServer`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
import time
from typing import Any

from specdash.sim.nodes import standin_app


class SimCrash(Exception):
    """The emulated server fails at start-up; ``exit_code`` is what the process returns."""

    def __init__(self, exit_code: int = 1) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


class ServingMixin:
    """``serve`` and its parts for :class:`~specdash.sim.server.SimServer`."""

    args: dict
    log: Any
    engine: Any
    stopping: bool

    def _on_signal(self, signame: str | None) -> None:
        """Shut down (SIGTERM / SIGINT; None: a failure already logged, e.g. a lost node)."""
        if self.stopping:
            return
        self.stopping = True
        if signame:
            self.log.line(f"{signame} received. signum=None frame=None. Draining requests and shutting down...")
        if self.engine is not None:  # end open streams now (they get an abort event and [DONE])
            self._stop_task = asyncio.ensure_future(self.engine.stop())
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._startup_task is not None and not self._startup_task.done():
            self._startup_task.cancel()
        if self.rendezvous is not None:
            self.rendezvous.close()
        timer = threading.Timer(1.6, lambda: os._exit(self.exit_code))
        timer.daemon = True
        timer.start()

    def _scheduler_killed(self) -> None:
        """SIGUSR1: the simulator's stand-in for a SIGKILL of SGLang's scheduler subprocess (the simulator
        is one process).  SGLang's main process only logs it from its ``SIGCHLD`` handler
        (``srt/entrypoints/engine.py`` ``_set_envs_and_config``: ``Child process unexpectedly failed with
        exitcode=%s. pid=%s``, ``exitcode`` being ``os.waitpid``'s raw status, 9 for SIGKILL) and keeps
        its HTTP server up; nothing decodes any more, so streams hang and ``/health`` answers 503 after
        its 20 s wait."""
        if self.engine is None or self.stopping:
            return
        self.log.line(f"Child process unexpectedly failed with exitcode=9. pid={os.getpid() + 1}", level="warning")
        self.engine.freeze()

    def _bind(self) -> socket.socket:
        host = str(self.args.get("host") or "127.0.0.1")
        port = int(self.args.get("port") or 30000)
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets (else Nagle + delayed ACK
        # add ~40 ms to every response written in two segments).
        sock = socket.socket(fam, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            self.log.line(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
                          f"('{host}', {port}): {exc.strerror.lower() if exc.strerror else exc}", level="error")
            raise SimCrash(1) from None
        sock.listen(2048)
        sock.set_inheritable(False)
        self.port = sock.getsockname()[1]
        self.host = host
        return sock

    async def serve(self) -> int:
        """Run the whole server; returns the process exit code."""
        loop = asyncio.get_running_loop()
        for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal, name)
        with contextlib.suppress(NotImplementedError, RuntimeError, AttributeError):
            loop.add_signal_handler(signal.SIGUSR1, self._scheduler_killed)
        self._startup_task = asyncio.ensure_future(self._start())
        try:
            await self._startup_task
        except SimCrash as crash:
            return crash.exit_code
        except asyncio.CancelledError:
            return self.exit_code
        try:
            await self._serve_task
        except asyncio.CancelledError:
            pass
        if self.engine is not None:
            await self.engine.stop()
        return self.exit_code

    async def _start(self) -> None:
        import uvicorn

        from specdash.sim.app import build_app

        t0 = time.time()
        self.resolve()
        await self.startup()
        if self.nodes.node_rank > 0:
            await self._start_standin()
            return
        self.build_engine()
        sock = self._bind()

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):  # signals are the simulator's (see _on_signal)
                yield

            def install_signal_handlers(self) -> None:  # uvicorn < 0.29
                return None

        config = uvicorn.Config(build_app(self), log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1, loop="asyncio", http="h11", ws="none",
                                timeout_keep_alive=30)
        server = _Server(config)
        self._uvicorn = server
        self.engine.start()
        log = self.log
        log.line(f"INFO:     Started server process [{os.getpid()}]")
        log.line("INFO:     Waiting for application startup.")
        log.line("INFO:     Application startup complete.")
        self._serve_task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not self._serve_task.done():
            await asyncio.sleep(0.005)
        log.line(f"INFO:     Uvicorn running on http://{self.host}:{self.port} (Press CTRL+C to quit)")
        if not self.args.get("skip_server_warmup"):  # http_server.py _wait_and_warmup
            await asyncio.sleep(self.sc.startup_s * 0.15 / self.time_scale)
            await self.warmup()
        self.startup_seconds = time.time() - t0
        self.ready = True
        log.line("The server is fired up and ready to roll!")

    async def _start_standin(self) -> None:
        """Node R > 0 once its schedulers are up: SGLang's stand-in server (always-200 ``/health``,
        nothing else useful; :func:`specdash.sim.nodes.standin_app`) on ``--host`` / ``--port``, logging
        at warning level as SGLang's does (no uvicorn lines, no ``fired up`` line)."""
        import uvicorn

        sock = self._bind()

        class _Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self):
                yield

            def install_signal_handlers(self) -> None:
                return None

        config = uvicorn.Config(standin_app(self.nodes, enable_metrics=self.enable_metrics), log_config=None,
                                access_log=False, lifespan="off", timeout_graceful_shutdown=1, loop="asyncio",
                                http="h11", ws="none", log_level="warning")
        server = _Server(config)
        self._uvicorn = server
        self._serve_task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not self._serve_task.done():
            await asyncio.sleep(0.005)
        self.ready = True
