"""asyncio sockets under httpx: a network backend for httpcore, not an HTTP implementation.

The sockets under httpx are plain asyncio protocols (:class:`AsyncioBackend`, an
``httpcore.AsyncNetworkBackend``), which avoids anyio's per-read cancel scope and its
pause/resume of the socket on every read; HTTP itself stays in httpcore/h11.
:func:`fast_transport` is the httpx transport :class:`~specdash.sglang.client.SGLangClient`
uses by default.  ``benchmarks/client_cpu.py`` measures the result against httpx's stock
anyio transport.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
from typing import Any

import httpcore
import httpx

__all__ = ["AsyncioBackend", "AsyncioStream", "fast_transport"]

log = logging.getLogger(__name__)

#: Pause reading a socket when this many bytes wait unread; resume below the low mark.
_READ_HIGH = 4 * 1024 * 1024
_READ_LOW = 1024 * 1024


class _SocketProtocol(asyncio.Protocol):
    """Buffers received bytes for :class:`AsyncioStream`; one waiter at a time.

    Read timeouts use one lazily re-armed timer per connection instead of a timer per
    read: each blocking read moves ``deadline``; the timer, when it fires, fails the
    waiting read if the deadline has passed, else re-arms itself for the new deadline.
    """

    def __init__(self) -> None:
        self.chunks: collections.deque[bytes] = collections.deque()
        self.size = 0
        self.waiter: asyncio.Future | None = None
        self.eof = False
        self.exc: BaseException | None = None
        self.transport: asyncio.Transport | None = None
        self.read_paused = False
        self.write_paused = False
        self.drain_waiter: asyncio.Future | None = None
        self.deadline = math.inf
        self.timer: asyncio.TimerHandle | None = None

    def arm(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> None:
        """Set the deadline of the read about to wait (``timeout`` s from now)."""
        self.deadline = math.inf if timeout is None else loop.time() + timeout
        if self.timer is not None and self.timer.when() > self.deadline:
            self.timer.cancel()  # a shorter timeout than the armed one
            self.timer = None
        if self.timer is None and timeout is not None:
            self.timer = loop.call_at(self.deadline, self._on_timer, loop)

    def _on_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        self.timer = None
        w = self.waiter
        if w is None or w.done() or math.isinf(self.deadline):
            return  # not waiting: the next blocking read arms a new timer
        if loop.time() >= self.deadline:
            w.set_exception(_TimedOut())
        else:
            self.timer = loop.call_at(self.deadline, self._on_timer, loop)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > _READ_HIGH and not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self.eof = True
        self.exc = exc
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        w = self.drain_waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)


class _TimedOut(Exception):
    pass


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_exception(_TimedOut())


async def _wait(fut: asyncio.Future, timeout: float | None) -> None:
    if timeout is None:
        await fut
        return
    handle = asyncio.get_running_loop().call_later(timeout, _expire, fut)
    try:
        await fut
    finally:
        handle.cancel()


class AsyncioStream(httpcore.AsyncNetworkStream):
    """An ``httpcore.AsyncNetworkStream`` over an asyncio transport/protocol pair."""

    def __init__(self, transport: asyncio.Transport, protocol: _SocketProtocol) -> None:
        self._t = transport
        self._p = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        p = self._p
        if not p.chunks:
            if p.eof:
                return b""
            loop = asyncio.get_running_loop()
            p.waiter = loop.create_future()
            p.arm(loop, timeout)
            try:
                await p.waiter
            except _TimedOut:
                raise httpcore.ReadTimeout("read timed out") from None
            finally:
                p.waiter = None
            if not p.chunks:
                if p.exc is not None:
                    raise httpcore.ReadError(str(p.exc) or type(p.exc).__name__)
                return b""
        # Hand over everything buffered: fewer, larger reads cost less per byte.
        if len(p.chunks) == 1:
            data = p.chunks.popleft()
        else:
            data = b"".join(p.chunks)
            p.chunks.clear()
        p.size -= len(data)
        if p.read_paused and p.size < _READ_LOW:
            p.read_paused = False
            self._t.resume_reading()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        p = self._p
        if self._t.is_closing():
            raise httpcore.WriteError("connection closed")
        self._t.write(buffer)
        if p.write_paused:
            p.drain_waiter = asyncio.get_running_loop().create_future()
            try:
                await _wait(p.drain_waiter, timeout)
            except _TimedOut:
                raise httpcore.WriteTimeout("write timed out") from None
            finally:
                p.drain_waiter = None

    async def aclose(self) -> None:
        self._t.close()

    async def start_tls(
        self, ssl_context, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            t = await asyncio.wait_for(
                loop.start_tls(self._t, self._p, ssl_context, server_hostname=server_hostname), timeout
            )
        except TimeoutError:
            self._t.abort()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except OSError as e:  # ssl.SSLError is an OSError
            self._t.abort()
            raise httpcore.ConnectError(str(e)) from None
        self._p.transport = t
        return AsyncioStream(t, self._p)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # httpcore asks this of idle pooled connections
            return self._p.eof or bool(self._p.chunks)
        key = {"client_addr": "sockname", "server_addr": "peername"}.get(info, info)
        if key in ("ssl_object", "sockname", "peername", "socket"):
            return self._t.get_extra_info(key)
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """``httpcore.AsyncNetworkBackend`` on asyncio protocols (asyncio event loops only).

    httpcore's default backend goes through anyio, whose socket stream enters a cancel
    scope and pauses/resumes the socket (two ``epoll_ctl`` calls) on every read; for a
    stream of small SSE events that halves the cost per event (benchmarks/client_cpu.py).
    """

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
        socket_options=None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            t, p = await asyncio.wait_for(
                loop.create_connection(
                    _SocketProtocol, host, port, local_addr=(local_address, 0) if local_address else None
                ),
                timeout,
            )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connect to {host}:{port} timed out") from None
        except OSError as e:
            raise httpcore.ConnectError(str(e) or type(e).__name__) from None
        sock = t.get_extra_info("socket")
        for opt in socket_options or ():
            sock.setsockopt(*opt)
        return AsyncioStream(t, p)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options=None
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            t, p = await asyncio.wait_for(loop.create_unix_connection(_SocketProtocol, path), timeout)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connect to {path} timed out") from None
        except OSError as e:
            raise httpcore.ConnectError(str(e) or type(e).__name__) from None
        return AsyncioStream(t, p)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def fast_transport(https: bool) -> httpx.AsyncBaseTransport:
    """httpx's HTTP/1.1 transport with its connection pool on :class:`AsyncioBackend`.

    No connection limit (callers bound their own concurrency); idle connections expire
    after 4 s, below uvicorn's 5 s keep-alive, so a reused connection is never one the
    server is closing.
    """
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    try:
        # Replace the pool httpx built with one on the asyncio backend (same httpcore class
        # and arguments httpx passes, plus ``network_backend``).  This touches a private
        # attribute: if another httpx/httpcore release lacks it, keep httpx's own pool.
        pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context() if https else None,
            max_connections=None,
            max_keepalive_connections=None,
            keepalive_expiry=4.0,
            network_backend=AsyncioBackend(),
        )
        if not hasattr(transport, "_pool"):
            raise AttributeError("_pool")
        transport._pool = pool
    except (AttributeError, TypeError) as exc:  # pragma: no cover - depends on the installed httpx
        log.debug("fast transport unavailable (%s); using httpx's default pool", exc)
    return transport
