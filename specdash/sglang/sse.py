"""SGLang's server-sent event streams, parsed at the cost of a few hundred bytes per event.

One parser per endpoint: :class:`GenerateStream` for ``/generate`` (SGLang's native
stream; ``managers/tokenizer_manager.py``, ``entrypoints/http_server.py::generate_request``)
and :class:`ChatStream` for ``/v1/chat/completions`` (``entrypoints/openai/serving_chat.py``).
Both share the framing of :class:`StreamParser` and the token bookkeeping of
:class:`Timing`.  What shapes them is the CPU cost per streamed token
(``benchmarks/client_cpu.py`` measures it):

* SSE events are split on ``b"\\n\\n"`` in the raw body bytes; no ``str`` decoding and
  no line iterator.
* SGLang's ``text`` and ``output_ids`` are cumulative, so an event grows with the
  output: intermediate ``/generate`` events are not JSON-decoded at all.  Only
  ``"completion_tokens":<int>`` is read, found with ``bytes.rfind`` from the end of the
  event (``meta_info`` follows ``text`` and ``output_ids`` in SGLang's compact orjson
  output, so the search touches a few hundred bytes).  The last data event (and any
  event without a readable count, e.g. ``{"error": …}``) is decoded in full with orjson.

The formats were checked byte for byte against streams recorded from a real SGLang
0.5.14 server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from specdash.sglang.records import SpecMeta

__all__ = ["ChatStream", "GenerateStream", "StreamParser", "Timing", "error_message"]

#: ``meta_info.completion_tokens`` as it appears in SGLang's compact JSON.
_CT_KEY = b'"completion_tokens":'
_CT_RE = re.compile(rb'"completion_tokens":\s*(\d+)')
_DONE = b"[DONE]"


class Timing:
    """Per-request token arrival bookkeeping; ``tokens(ct, now)`` is the hot path."""

    __slots__ = ("ct", "events", "itl", "on_progress", "t_first", "t_last", "t_sent")

    def __init__(self, t_sent: float, on_progress: Callable[[int], Any] | None) -> None:
        self.t_sent = t_sent
        self.t_first: float | None = None
        self.t_last = t_sent
        self.ct = 0
        self.itl: list[float] = []
        self.events = 0
        self.on_progress = on_progress

    def tokens(self, ct: int, now: float) -> None:
        """Cumulative token count ``ct`` seen at ``now``; ITL spread like bench_serving."""
        n = ct - self.ct
        if n <= 0:
            return
        if self.t_first is None:
            self.t_first = now
        elif n == 1:
            self.itl.append(now - self.t_last)
        else:
            self.itl.extend([(now - self.t_last) / n] * n)
        self.t_last = now
        self.ct = ct
        if self.on_progress is not None:
            self.on_progress(ct)


def _sse_data(buf: bytes, start: int, end: int) -> bytes | None:
    """The ``data`` of one SSE event block (fields joined by newlines), or None when the
    block has no data field (comments, ``event:``/``id:``/``retry:`` only)."""
    parts = []
    for line in buf[start:end].split(b"\n"):
        if line.startswith(b"data:"):
            v = line[5:]
            parts.append(v[1:] if v.startswith(b" ") else v)
    return b"\n".join(parts) if parts else None


def error_message(obj: Any) -> str:
    """Message of an SGLang / OpenAI-style error body (``{"error": {...}}``,
    or ``{"error": "unknown field …"}``, or ``{"message": …}``); never empty."""
    return _error_message(obj) or f"an error without a message: {str(obj)[:200]}"


def _error_message(obj: Any) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err)
        if err is not None:
            return str(err)
        if "message" in obj:
            return str(obj["message"])
    return str(obj)


def _finish_type(fr: Any) -> str | None:
    """``finish_reason`` → its type: SGLang sends ``{"type": "length", …}``; OpenAI a string."""
    if isinstance(fr, dict):
        return fr.get("type")
    return fr


#: What a handler raises on JSON of another shape than SGLang's (``.get`` on a list, ``int()`` of a list …).
_MALFORMED = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError)


class StreamParser:
    """SSE framing plus the state of one response; subclasses handle single events.

    ``feed(chunk, now)`` takes raw body bytes at arrival time ``now`` and calls
    ``_event(buf, start, end, simple)`` for each complete event block ``buf[start:end]``
    (its blank-line terminator excluded; no copy is made).  ``simple`` means the block
    is one line.  Events split at any byte boundary and CRLF line endings (SSE spec;
    SGLang sends LF) are handled; one ``memchr`` pass per event finds its end.
    """

    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.now = 0.0
        self.done = False
        self.error: str | None = None
        self.final: dict | None = None
        self.rid: str | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.server_e2e_s: float | None = None
        self.finish_reason: str | None = None
        self.spec: SpecMeta | None = None
        self.text: str | None = None
        self._tail: list[bytes] = []
        self._crlf: bool | None = None
        self._held_cr = False

    def feed(self, chunk: bytes, now: float) -> None:
        if self.done:
            return
        self.now = now
        if self._crlf is not False:
            chunk = self._normalise(chunk)
        tail = self._tail
        if tail:
            prev = tail[-1]
            tail.append(chunk)
            if chunk.find(b"\n\n") < 0 and not (prev.endswith(b"\n") and chunk.startswith(b"\n")):
                return
            chunk = b"".join(tail)
            tail.clear()
        n = len(chunk)
        pos = 0
        find = chunk.find
        event = self._event
        try:  # free while nothing raises; an event of a shape SGLang never sends ends the stream as an error
            while not self.done:
                i = find(b"\n", pos)
                if i < 0 or i + 1 >= n:
                    break
                if chunk[i + 1] == 10:  # "\n\n": a one-line event (SGLang's only kind)
                    if i > pos:
                        event(chunk, pos, i, True)
                    pos = i + 2
                else:
                    j = find(b"\n\n", i)
                    if j < 0:
                        break
                    event(chunk, pos, j, False)
                    pos = j + 2
        except _MALFORMED as exc:
            self._malformed(exc, chunk[pos:pos + 200])
            return
        if pos < n and not self.done:
            tail.append(chunk[pos:] if pos else chunk)

    def _normalise(self, chunk: bytes) -> bytes:
        """CRLF / CR line endings → LF, across chunk boundaries."""
        if self._held_cr:
            chunk = b"\r" + chunk
            self._held_cr = False
        if self._crlf is None:  # decided by the first line ending seen
            if b"\r" in chunk:
                self._crlf = True
            else:
                if b"\n" in chunk:
                    self._crlf = False
                return chunk
        if chunk.endswith(b"\r"):
            chunk = chunk[:-1]
            self._held_cr = True
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    def _event(self, buf: bytes, start: int, end: int, simple: bool) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """After the body's end: the subclass's :meth:`_finish`, a malformed final event made an error."""
        try:
            self._finish()
        except _MALFORMED as exc:
            self._malformed(exc, b"")

    def _finish(self) -> None:
        raise NotImplementedError

    def _malformed(self, exc: Exception, near: bytes) -> None:
        """An event whose JSON has another shape than SGLang's (a list for ``meta_info``, text for a count…):
        the response becomes an error (``ok`` False), never an exception in the client."""
        self.error = (f"malformed event from the server ({type(exc).__name__}: {exc})"
                      + (f" near {bytes(near)!r}" if near else ""))
        self.final = None
        self.done = True

    def _decode(self, data: bytes | memoryview) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            self.error = f"undecodable event: {bytes(data[:200])!r}"
            self.done = True
            return None


class GenerateStream(StreamParser):
    """``/generate`` SSE (``data: <compact json>`` events, then ``data: [DONE]``).  Intermediate
    events: ``completion_tokens`` only."""

    def __init__(self, timing: Timing) -> None:
        super().__init__(timing)
        self._last: tuple[bytes, int, int] | None = None

    def _event(self, b: bytes, s: int, e: int, simple: bool) -> None:
        if simple and b.startswith(b"data: ", s):
            ds = s + 6
        else:  # "data:" without a space, comments, other fields, multi-line data
            b = _sse_data(b, s, e)
            if b is None:
                return
            ds, e = 0, len(b)
        if e - ds == 6 and b.startswith(_DONE, ds):
            self.done = True
            return
        timing = self.timing
        timing.events += 1
        i = b.rfind(_CT_KEY, ds, e)
        m = _CT_RE.match(b, i) if i >= 0 else None
        if m is not None:
            timing.tokens(int(m.group(1)), self.now)
            self._last = (b, ds, e)
            return
        # No readable count: an error event or an unusual shape; decode it now.
        obj = self._decode(memoryview(b)[ds:e])
        if obj is None:
            return
        if isinstance(obj, dict) and "error" in obj:
            self.error = error_message(obj)
            self.done = True
            return
        meta = obj.get("meta_info") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("completion_tokens"), int):
            timing.tokens(meta["completion_tokens"], self.now)
        self._last = (b, ds, e)

    def _finish(self) -> None:
        """Decode the last data event in full (rid, prompt tokens, e2e, spec fields)."""
        if self._last is None or self.error is not None:
            return
        buf, ds, e = self._last
        obj = self._decode(memoryview(buf)[ds:e])
        if not isinstance(obj, dict):
            return
        meta = obj.get("meta_info") or {}
        self.rid = meta.get("id")
        self.prompt_tokens = int(meta.get("prompt_tokens") or 0)
        self.completion_tokens = int(meta.get("completion_tokens") or 0)
        fr = meta.get("finish_reason")
        self.finish_reason = _finish_type(fr)
        self.text = obj.get("text")
        if fr is None:
            return  # the stream was cut before the final event
        self.final = meta
        e2e = meta.get("e2e_latency")
        self.server_e2e_s = float(e2e) if e2e is not None else None
        self.spec = SpecMeta.from_meta_info(meta)
        if self.finish_reason == "abort":
            self.error = f"aborted: {fr.get('message') if isinstance(fr, dict) else fr}"


class ChatStream(StreamParser):
    """``/v1/chat/completions`` SSE: role chunk, content deltas, finish chunk, an
    optional ``sglext.spec_tokens_details`` chunk and the usage chunk (``choices: []``)."""

    def __init__(self, timing: Timing) -> None:
        super().__init__(timing)
        self._parts: list[str] = []
        self._arrivals: list[float] = []  # content chunks, when usage is not per chunk
        self._usage_per_chunk = False

    def _event(self, buf: bytes, s: int, e: int, simple: bool) -> None:
        timing = self.timing
        now = self.now
        data = _sse_data(buf, s, e)
        if data is None:
            return
        if data == _DONE:
            self.done = True
            return
        obj = self._decode(data)
        if obj is None:
            return
        timing.events += 1
        choices = obj.get("choices") or ()
        if "error" in obj and not choices:
            self.error = error_message(obj)
            self.done = True
            return
        self.rid = self.rid or obj.get("id")
        details = (obj.get("sglext") or {}).get("spec_tokens_details")
        if isinstance(details, list):  # n > 1: one entry per choice
            details = details[0] if details else None
        if isinstance(details, dict):
            self.spec = SpecMeta.from_meta_info(details)
        content = False
        for ch in choices:
            c = (ch.get("delta") or {}).get("content")
            if c:
                content = True
                self._parts.append(c)
            if ch.get("finish_reason") is not None:
                self.finish_reason = ch["finish_reason"]
        usage = obj.get("usage")
        if usage:
            self.prompt_tokens = int(usage.get("prompt_tokens") or 0)
            self.completion_tokens = int(usage.get("completion_tokens") or 0)
            if not choices:
                self.final = usage
        if usage and choices:  # continuous usage stats: exact per-chunk counts
            self._usage_per_chunk = True
            timing.tokens(self.completion_tokens, now)
        elif content and not self._usage_per_chunk:  # fallback, see finish()
            self._arrivals.append(now)
            timing.tokens(len(self._arrivals), now)

    def _finish(self) -> None:
        """Without per-chunk usage, spread the final ``usage.completion_tokens`` N evenly
        over the K content chunks (chunk i carries round(iN/K) − round((i−1)N/K) tokens)
        and rebuild the ITL samples from the chunk arrival times, so that, as for
        ``/generate``, there is one sample per token after the first chunk."""
        if self._parts:
            self.text = "".join(self._parts)
        arr, n_tok = self._arrivals, self.completion_tokens
        if self._usage_per_chunk or not arr or n_tok <= len(arr):
            return
        k = len(arr)
        bounds = [round(i * n_tok / k) for i in range(k + 1)]
        itl: list[float] = []
        for i in range(1, k):
            n = bounds[i + 1] - bounds[i]
            itl.extend([(arr[i] - arr[i - 1]) / n] * n)
        self.timing.itl = itl
        self.timing.ct = n_tok
