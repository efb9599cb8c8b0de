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

__all__ = ["KEEPALIVE_EXPIRY_S", "AsyncioBackend", "AsyncioStream", "FastTransport", "KeepAlivePool", "fast_transport"]

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


#: Seconds an idle pooled connection is kept.  SGLang's uvicorn closes a connection idle for 5 s
#: (``--timeout-keep-alive``), timed from when *it* finished writing the response; the client's clock
#: starts when it has read the last byte, which lags by however long the event loop is behind
#: (seconds at hundreds of streams on a busy machine), so the margin is wide.
KEEPALIVE_EXPIRY_S = 2.0

#: Errors of a reused connection, raised before the response head arrived, that mean the server
#: closed (or reset) the idle connection as the request went out: the request is sent again, once,
#: on a new connection.  Timeouts are not among them.
_STALE_ERRORS = (httpcore.RemoteProtocolError, httpcore.ReadError, httpcore.WriteError,
                 httpcore.ConnectionNotAvailable)


class _ReleasingStream:
    """A response body that puts its connection back in the pool when closed."""

    __slots__ = ("_conn", "_key", "_pool", "_stream")

    def __init__(self, stream, pool: KeepAlivePool, conn: httpcore.AsyncHTTPConnection, key: tuple) -> None:
        self._stream = stream
        self._pool = pool
        self._conn = conn
        self._key = key

    def __aiter__(self):
        return self._stream.__aiter__()  # no extra layer per chunk

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        try:
            await self._stream.aclose()
        finally:
            if conn is not None:
                await self._pool._release(conn, self._key)


class KeepAlivePool(httpcore.AsyncConnectionPool):
    """An HTTP/1.1 connection pool whose cost per request does not grow with its size.

    httpcore's ``AsyncConnectionPool`` walks every connection for every request and every
    closed response (expiry, readability, assignment): at 256 streams that walk was most of
    the client's CPU (issue 14).  Here idle connections wait per origin in a stack: a request
    takes the most recently used one (the furthest from the server's keep-alive timeout),
    expired ones are dropped from the bottom, so each request costs O(1).  No connection
    limit (callers bound their own concurrency); idle connections expire after
    ``keepalive_expiry`` s.

    A request that fails on a *reused* connection before the response head arrived (the
    server closed or reset the idle connection as the request went out: ``_STALE_ERRORS``)
    is sent once more on a new connection, if its body can be replayed.  Once the head is
    back nothing is retried: a stream cut after its first bytes fails as it is.

    Subclasses ``httpcore.AsyncConnectionPool`` for its interface only (``handle_async_request``,
    ``aclose``, ``connections``); none of its methods or state is used.
    """

    def __init__(self, *, ssl_context=None, keepalive_expiry: float | None = KEEPALIVE_EXPIRY_S,
                 network_backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._ssl_context = ssl_context
        self._keepalive_expiry = keepalive_expiry
        self._network_backend = network_backend
        self._idle: dict[tuple, collections.deque[httpcore.AsyncHTTPConnection]] = {}
        self._busy: set[httpcore.AsyncHTTPConnection] = set()
        self._closed = False
        self.retried = 0  #: requests sent again after a stale reused connection (for tests and benchmarks)
        self.opened = 0  #: connections opened

    @property
    def connections(self) -> list:  # httpcore's introspection property
        return [c for q in self._idle.values() for c in q] + list(self._busy)

    async def _take_idle(self, key: tuple) -> httpcore.AsyncHTTPConnection | None:
        q = self._idle.get(key)
        if not q:
            return None
        while q and q[0].has_expired():  # the oldest first: expire from the bottom of the stack
            await q.popleft().aclose()
        while q:
            conn = q.pop()
            if conn.is_idle() and not conn.has_expired():
                return conn
            await conn.aclose()
        return None

    def _new(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        self.opened += 1
        return httpcore.AsyncHTTPConnection(
            origin=origin, ssl_context=self._ssl_context, keepalive_expiry=self._keepalive_expiry,
            network_backend=self._network_backend,
        )

    async def _release(self, conn: httpcore.AsyncHTTPConnection, key: tuple) -> None:
        self._busy.discard(conn)
        if self._closed or not conn.is_idle() or conn.has_expired():
            await conn.aclose()
            return
        self._idle.setdefault(key, collections.deque()).append(conn)

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        scheme = request.url.scheme.decode("ascii")
        if scheme not in ("http", "https"):
            raise httpcore.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        origin = request.url.origin
        key = _origin_key(origin)
        conn = await self._take_idle(key)
        reused = conn is not None
        if conn is None:
            conn = self._new(origin)
        while True:
            self._busy.add(conn)
            try:
                resp = await conn.handle_async_request(request)
            except _STALE_ERRORS as exc:
                self._busy.discard(conn)
                await conn.aclose()
                if not (reused and _replayable(request)):
                    raise
                log.debug("reused connection closed by the server before the response (%s: %s); sending again "
                          "on a new connection", type(exc).__name__, exc)
                self.retried += 1
                conn, reused = self._new(origin), False
                continue
            except BaseException:
                self._busy.discard(conn)
                await conn.aclose()
                raise
            resp.stream = _ReleasingStream(resp.stream, self, conn, key)
            return resp

    async def aclose(self) -> None:
        self._closed = True
        conns = self.connections
        self._idle.clear()
        self._busy.clear()
        for conn in conns:
            await conn.aclose()

    async def __aenter__(self) -> KeepAlivePool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _origin_key(origin: httpcore.Origin) -> tuple:
    return (origin.scheme, origin.host, origin.port)


def _replayable(request: httpcore.Request) -> bool:
    """Whether the body can be sent again (bytes, as every SGLangClient request has)."""
    return isinstance(request.stream, (httpx.ByteStream, bytes)) or type(request.stream).__name__ == "ByteStream"


#: httpcore's exceptions → httpx's, as httpx's own transport maps them (``httpx/_transports/default.py``,
#: ``_load_httpcore_exceptions``, 0.27–0.29); both sides are public classes.  The most specific match wins.
_EXC_MAP: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
)


def _mapped(exc: Exception) -> Exception | None:
    """The httpx exception for an httpcore one (None: not httpcore's, re-raise as it is)."""
    best = None
    for src, dst in _EXC_MAP:
        if isinstance(exc, src) and (best is None or issubclass(dst, best)):
            best = dst
    return best(str(exc)) if best is not None else None


class _MappedStream(httpx.AsyncByteStream):
    """The response body for httpx: httpcore's chunks as they come, its errors as httpx's."""

    __slots__ = ("_stream",)

    def __init__(self, stream) -> None:
        self._stream = stream

    async def __aiter__(self):
        try:
            async for part in self._stream:
                yield part
        except Exception as exc:
            mapped = _mapped(exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


class FastTransport(httpx.AsyncBaseTransport):
    """An httpx transport over :class:`KeepAlivePool` on :class:`AsyncioBackend`, built from httpx's and
    httpcore's public API only (``httpx.AsyncBaseTransport``, ``httpx.Request`` / ``Response`` /
    ``AsyncByteStream``, ``httpcore.Request``): nothing of httpx's own transport or its private state is
    touched, so a new httpx or httpcore release cannot silently swap the pool back (the earlier version
    replaced ``AsyncHTTPTransport._pool``).  HTTP/1.1, no proxies (the environment's proxy variables are
    not read: SGLang is reached directly), no connection limit."""

    def __init__(self, pool: KeepAlivePool) -> None:
        self.pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        req = httpcore.Request(method=request.method,
                               url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port,
                                                target=url.raw_path),
                               headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        try:
            resp = await self.pool.handle_async_request(req)
        except Exception as exc:
            mapped = _mapped(exc)
            if mapped is None:
                raise
            raise mapped from exc
        return httpx.Response(status_code=resp.status, headers=resp.headers, stream=_MappedStream(resp.stream),
                              extensions=resp.extensions)

    async def aclose(self) -> None:
        await self.pool.aclose()


def fast_transport(https: bool, keepalive_expiry: float | None = KEEPALIVE_EXPIRY_S) -> FastTransport:
    """The transport :class:`~specdash.sglang.client.SGLangClient` uses: :class:`FastTransport` with
    :class:`KeepAlivePool` on :class:`AsyncioBackend`.

    No connection limit (callers bound their own concurrency); idle connections expire
    after ``keepalive_expiry`` s (:data:`KEEPALIVE_EXPIRY_S`, well below uvicorn's 5 s
    keep-alive), and a request that meets a connection the server closed anyway is sent
    again on a new one (before any byte of its response only).
    """
    return FastTransport(KeepAlivePool(
        ssl_context=httpx.create_ssl_context() if https else None,
        keepalive_expiry=keepalive_expiry,
        network_backend=AsyncioBackend(),
    ))
