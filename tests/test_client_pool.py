"""SGLangClient's connection pool against servers that close keep-alive connections (issue 14).

A raw asyncio HTTP/1.1 server on 127.0.0.1 streams SGLang-format ``/generate`` events with
chunked encoding (as uvicorn does) and misbehaves on purpose: it closes connections idle
longer than its keep-alive timeout, or closes/resets a reused connection just as the next
request arrives (the race with uvicorn's ``timeout_keep_alive`` that lost 1-3 of 512 requests
at 256 streams), or cuts a stream after its first event.  The client must lose no request to a
closed idle connection, and must never send again a request whose response had begun.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import httpx
import orjson
import pytest

from specdash.sglang.client import SGLangClient
from specdash.sglang.transport import KeepAlivePool, fast_transport


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(ct: int, final: bool) -> bytes:
    meta = {"id": "r", "completion_tokens": ct, "prompt_tokens": 3,
            "finish_reason": {"type": "length", "length": ct} if final else None}
    return _chunk(b"data: " + orjson.dumps({"text": "w" * ct, "meta_info": meta}) + b"\n\n")


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
BODY = [_event(1, False), _event(2, False), _event(3, True), _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"]


class Server:
    """Counts connections and requests.  ``mode`` on the n-th request of a connection (n ≥ 2:
    a reused connection; ``cut_first`` also n = 1):

    - ``keepalive``: serve; close a connection idle ``keep_alive`` s (uvicorn's behaviour);
    - ``close`` / ``reset``: read the request, then close (FIN) / reset (RST) without a byte;
    - ``close_all``: ``close`` on every request, the first of a connection too;
    - ``cut`` / ``cut_first``: send the head and the first event, then reset.
    """

    def __init__(self, mode: str = "keepalive", keep_alive: float = 5.0) -> None:
        self.mode = mode
        self.keep_alive = keep_alive
        self.connections = 0
        self.requests = 0
        self.dropped = 0

    async def __aenter__(self) -> str:
        self._srv = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        port = self._srv.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        self._srv.close()

    @staticmethod
    def _reset(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        n = 0
        try:
            while True:
                read = reader.readuntil(b"\r\n\r\n")
                try:
                    head = await (asyncio.wait_for(read, self.keep_alive) if n else read)
                except TimeoutError:
                    return  # keep-alive timeout: close the idle connection
                length = next((int(v) for k, _, v in (ln.partition(b":") for ln in head.split(b"\r\n")[1:])
                               if k.strip().lower() == b"content-length"), 0)
                await reader.readexactly(length)
                n += 1
                self.requests += 1
                if (n >= 2 and self.mode in ("close", "reset", "cut")) or self.mode in ("cut_first", "close_all"):
                    self.dropped += 1
                    if self.mode.startswith("close"):
                        return
                    if self.mode.startswith("cut"):
                        writer.write(HEAD + BODY[0])
                        await writer.drain()
                        await asyncio.sleep(0.05)
                    self._reset(writer)
                    return
                writer.write(HEAD)
                for chunk in BODY:
                    writer.write(chunk)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _pool(c: SGLangClient) -> KeepAlivePool:
    return c.transport.pool


async def _wave(c: SGLangClient, n: int) -> list:
    return await asyncio.gather(*(c.generate_stream("x", {"max_new_tokens": 3}) for _ in range(n)))


async def test_more_requests_than_streams_across_the_keepalive_timeout():
    """4 streams, 5 waves of requests, the server closing connections idle 0.2 s, the client
    keeping them 10 s: every connection the server closed is noticed or retried, none lost."""
    async with Server("keepalive", keep_alive=0.2) as url, SGLangClient(url, transport=fast_transport(False, keepalive_expiry=10.0)) as c:
        results = []
        for i in range(5):
            results += await _wave(c, 4)
            await asyncio.sleep(0.3 if i % 2 else 0.0)  # across the server's timeout, or not
    assert [r.ok for r in results] == [True] * 20
    assert all(r.completion_tokens == 3 for r in results)


@pytest.mark.parametrize("mode", ["close", "reset"])
async def test_reused_connection_closed_before_the_response_is_sent_again(mode):
    """The server drops a reused connection as the request arrives (FIN or RST, no byte sent):
    the request goes again, once, on a new connection, and succeeds."""
    server = Server(mode)
    async with server as url, SGLangClient(url) as c:
        results = [await c.generate_stream("x", {"max_new_tokens": 3}) for _ in range(3)]
        retried = _pool(c).retried
    assert [r.ok for r in results] == [True] * 3 and retried == 2
    assert server.dropped == 2 and server.requests == 5 and server.connections == 3


async def test_httpx_stock_pool_loses_that_request():
    """The same race through httpx's own pool fails the request: what the retry is for."""
    server = Server("close")
    async with server as url, SGLangClient(url, transport=httpx.AsyncHTTPTransport()) as c:
        first = await c.generate_stream("x", {"max_new_tokens": 3})
        second = await c.generate_stream("x", {"max_new_tokens": 3})
    assert first.ok and not second.ok and "RemoteProtocolError" in second.error


@pytest.mark.parametrize("mode", ["cut", "cut_first"])
async def test_stream_cut_after_its_first_bytes_is_not_sent_again(mode):
    """Once the response has begun, a failure is the request's: recorded failed, never resent."""
    server = Server(mode)
    async with server as url, SGLangClient(url) as c:
        results = [await c.generate_stream("x", {"max_new_tokens": 3}) for _ in range(2)]
        retried = _pool(c).retried
    expect_first_ok = mode == "cut"
    assert results[0].ok is expect_first_ok
    assert not results[1].ok and results[1].error.startswith("ReadError") and results[1].completion_tokens == 1
    assert retried == 0 and server.requests == 2


async def test_new_connection_closed_before_the_response_is_not_sent_again():
    """Only a reused connection is retried: on a new one the server really refused the request."""
    server = Server("close")
    async with server as url, SGLangClient(url, transport=fast_transport(False, keepalive_expiry=None)) as c:
        await c.generate_stream("x", {"max_new_tokens": 3})
        pool = _pool(c)
        for conn in pool.connections:  # forget the idle connection: the next request opens one
            await conn.aclose()
        pool._idle.clear()
        server.mode = "close_all"
        res = await c.generate_stream("x", {"max_new_tokens": 3})
        retried = pool.retried
    assert not res.ok and "RemoteProtocolError" in res.error and retried == 0 and server.requests == 2


async def test_idle_connections_expire_and_streams_share_them():
    """Sequential requests reuse one connection; after the expiry a new one is opened.  The expiry (1 s) is
    far above the gaps between back-to-back requests, which a loaded machine stretches, and the sleep past it."""
    server = Server("keepalive")
    async with server as url, SGLangClient(url, transport=fast_transport(False, keepalive_expiry=1.0)) as c:
        for _ in range(3):
            assert (await c.generate_stream("x", {"max_new_tokens": 3})).ok
        await asyncio.sleep(1.5)
        assert (await c.generate_stream("x", {"max_new_tokens": 3})).ok
        results = await _wave(c, 6)
        assert all(r.ok for r in results)
        opened = _pool(c).opened
    assert server.connections == opened == 1 + 1 + 5  # the wave took the idle one and opened 5
