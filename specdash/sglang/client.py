"""Async HTTP client for an SGLang server (or the built-in simulator).

Formats follow ``../shared/sglang/FACTS.md``: endpoints §1, ``/generate`` and
``meta_info`` §2, ``/server_info`` §3, the OpenAI-compatible streams §1 ("OpenAI
endpoints"), the acceptance definitions §11 and the version drift §12.  They were
checked byte for byte against the recordings of a real 0.5.14 server in
``../shared/sglang/golden/runs/*/`` (``generate_stream.sse``, ``chat_stream.sse``).

Streaming cost (CONTRACTS.md "Streaming client cost") shapes this module:

* SSE events are split on ``b"\\n\\n"`` in the raw body bytes; no ``str`` decoding and
  no line iterator.
* SGLang's ``text`` and ``output_ids`` are cumulative, so an event grows with the
  output: intermediate events are not JSON-decoded at all.  Only
  ``"completion_tokens":<int>`` is read, found with ``bytes.rfind`` from the end of the
  event (``meta_info`` follows ``text`` and ``output_ids`` in SGLang's compact orjson
  output, so the search touches a few hundred bytes).  The last data event (and any
  event without a readable count, e.g. ``{"error": …}``) is decoded in full with orjson.
* The sockets under httpx are plain asyncio protocols (:class:`_AsyncioBackend`, an
  ``httpcore.AsyncNetworkBackend``), which avoids anyio's per-read cancel scope and
  its pause/resume of the socket on every read; HTTP itself stays in httpcore/h11.
  ``benchmarks/client_cpu.py`` measures the result.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

import httpcore
import httpx
import orjson

from specdash.sglang.versions import SPEC_META_KEYS, read_spec_meta

__all__ = [
    "SPEC_META_KEYS",
    "GenerateResult",
    "SGLangClient",
    "SGLangError",
    "SGLangHTTPError",
    "SpecMeta",
]

log = logging.getLogger(__name__)

#: ``meta_info.completion_tokens`` as it appears in SGLang's compact JSON (FACTS.md §2).
_CT_KEY = b'"completion_tokens":'
_CT_RE = re.compile(rb'"completion_tokens":\s*(\d+)')
_DONE = b"[DONE]"


class SGLangError(Exception):
    """A request to the SGLang server failed (connection, protocol or HTTP status)."""


class SGLangHTTPError(SGLangError):
    """The server answered with an unexpected HTTP status.

    Attributes:
        status: the HTTP status code.
        path: the request path (never the full URL with credentials).
        message: the server's message, shortened to 500 characters, secrets redacted.
    """

    def __init__(self, status: int, path: str, message: str) -> None:
        super().__init__(f"HTTP {status} from {path}: {message}")
        self.status = status
        self.path = path
        self.message = message


# --------------------------------------------------------------------------------------
# Result records
# --------------------------------------------------------------------------------------


@dataclass(slots=True)
class SpecMeta:
    """Per-request speculative-decoding counters from SGLang's final ``meta_info``.

    Definitions (FACTS.md §2, §11): ``verify_ct`` = verify rounds of the request;
    ``correct_drafts`` = accepted draft tokens, bonus token excluded; ``proposed_drafts``
    = ``verify_ct × (num_draft_tokens − 1)``; ``histogram[k]`` = verify rounds that
    accepted exactly k drafts; ``accept_length`` = server's ``completion_tokens /
    verify_ct`` (bonus included); ``accept_rate`` = correct / proposed.
    Fields a server version does not send are None.
    """

    verify_ct: int
    correct_drafts: int | None = None
    proposed_drafts: int | None = None
    histogram: list[int] | None = None
    accept_length: float | None = None
    accept_rate: float | None = None

    @classmethod
    def from_meta_info(cls, meta: dict) -> SpecMeta | None:
        """Read the ``spec_*`` keys of a ``meta_info`` (or ``sglext.spec_tokens_details``)
        dict, version-defensively through ``versions.SPEC_META_KEYS`` (FACTS.md §2/§12,
        CONTRACTS.md "Reference versions": 0.5.14 sends old and new names, 0.5.10 only
        ``spec_accept_token_num``/``spec_draft_token_num``/``spec_accept_histogram``).

        Returns None when ``spec_verify_ct`` is absent (no speculation: SGLang adds the
        fields only when speculating and ``spec_verify_ct > 0``).
        """
        verify_ct = read_spec_meta(meta, "verify_ct")
        if verify_ct is None:
            return None
        hist = read_spec_meta(meta, "histogram")
        return cls(
            verify_ct=int(verify_ct),
            correct_drafts=_opt_int(read_spec_meta(meta, "correct_drafts")),
            proposed_drafts=_opt_int(read_spec_meta(meta, "proposed_drafts")),
            histogram=[int(x) for x in hist] if hist is not None else None,
            accept_length=_opt_float(read_spec_meta(meta, "accept_length")),
            accept_rate=_opt_float(read_spec_meta(meta, "accept_rate")),
        )


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass(slots=True)
class GenerateResult:
    """One streamed request as the client saw it.

    Times ``t_sent``/``t_first``/``t_done`` are ``time.perf_counter()`` values (s) of this
    process; durations are seconds.  ``t_sent`` is taken just before the request is sent,
    ``t_first`` at the arrival of the first event carrying ``completion_tokens > 0``,
    ``t_done`` when the response body has ended.  ``itl_s`` holds one inter-token latency
    per token after the first event: each event's gap is spread evenly over the tokens it
    carries, as SGLang's ``bench_serving`` does (FACTS.md §10).  ``completion_tokens``
    is SGLang's count (``meta_info.completion_tokens``, or ``usage`` for chat); events
    are coalesced, so ``events ≤ completion_tokens``.  ``ok`` is False on HTTP errors,
    connection errors, mid-stream ``{"error": …}`` events, aborts and streams that end
    before the final event; ``error`` then says why.
    """

    rid: str | None
    ok: bool
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    t_sent: float
    t_first: float | None
    t_done: float
    ttft_s: float | None
    e2e_s: float
    server_e2e_s: float | None
    itl_s: list[float]
    finish_reason: str | None
    spec: SpecMeta | None
    events: int
    #: wall-clock time (epoch s) the request was sent, for matching with server logs.
    started_at: float = 0.0
    #: the final cumulative output text (``/generate``) or the joined deltas (chat).
    text: str | None = field(default=None, repr=False)

    @property
    def tpot_s(self) -> float | None:
        """Time per output token (s) = (e2e − ttft) / (completion_tokens − 1), SGLang's
        definition (FACTS.md §10); None with fewer than 2 tokens or no TTFT."""
        if self.ttft_s is None or self.completion_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.completion_tokens - 1)

    def to_json(self, *, include_text: bool = False) -> dict:
        """The canonical JSON record of one request (a line of ``requests.jsonl``).

        Keys: the dataclass fields except ``spec`` and ``text`` (``text`` only with
        ``include_text``), plus ``tpot_s``, wall-clock ``ts_sent`` / ``ts_done`` (epoch s:
        ``started_at`` and ``started_at + e2e_s``, the window :class:`RunStats` measures
        duration over) and ``spec``: ``{verify_ct, correct_drafts, proposed_drafts,
        histogram, accept_length, accept_rate}`` or None without speculation — the shape
        the statistics, the comparison and the verification all read.  ``itl_s`` is
        rounded to 0.1 µs.  :meth:`from_json` reads it back.
        """
        spec = self.spec
        rec = {
            "rid": self.rid,
            "ok": self.ok,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "started_at": self.started_at,
            "ts_sent": self.started_at,
            "ts_done": self.started_at + self.e2e_s,
            "t_sent": self.t_sent,
            "t_first": self.t_first,
            "t_done": self.t_done,
            "ttft_s": self.ttft_s,
            "e2e_s": self.e2e_s,
            "server_e2e_s": self.server_e2e_s,
            "tpot_s": self.tpot_s,
            "finish_reason": self.finish_reason,
            "events": self.events,
            "spec": None if spec is None else {
                "verify_ct": spec.verify_ct,
                "correct_drafts": spec.correct_drafts,
                "proposed_drafts": spec.proposed_drafts,
                "histogram": spec.histogram,
                "accept_length": spec.accept_length,
                "accept_rate": spec.accept_rate,
            },
            "itl_s": [round(x, 7) for x in self.itl_s],
        }
        if include_text:
            rec["text"] = self.text
        return rec

    @classmethod
    def from_json(cls, rec: dict) -> GenerateResult:
        """Inverse of :meth:`to_json` (for ``--resume``); unknown keys are ignored."""
        sp = rec.get("spec")
        spec = None
        if sp and sp.get("verify_ct") is not None:
            spec = SpecMeta(
                verify_ct=sp["verify_ct"],
                correct_drafts=sp.get("correct_drafts"),
                proposed_drafts=sp.get("proposed_drafts"),
                histogram=sp.get("histogram"),
                accept_length=sp.get("accept_length"),
                accept_rate=sp.get("accept_rate"),
            )
        return cls(
            rid=rec.get("rid"),
            ok=bool(rec.get("ok")),
            error=rec.get("error"),
            prompt_tokens=int(rec.get("prompt_tokens") or 0),
            completion_tokens=int(rec.get("completion_tokens") or 0),
            t_sent=float(rec.get("t_sent") or 0.0),
            t_first=rec.get("t_first"),
            t_done=float(rec.get("t_done") or 0.0),
            ttft_s=rec.get("ttft_s"),
            e2e_s=float(rec.get("e2e_s") or 0.0),
            server_e2e_s=rec.get("server_e2e_s"),
            itl_s=list(rec.get("itl_s") or []),
            finish_reason=rec.get("finish_reason"),
            spec=spec,
            events=int(rec.get("events") or 0),
            started_at=float(rec.get("started_at") or 0.0),
            text=rec.get("text"),
        )


# --------------------------------------------------------------------------------------
# Stream state: token counting and timing (shared by /generate and chat)
# --------------------------------------------------------------------------------------


class _Timing:
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


def _error_message(obj: Any) -> str:
    """Message of an SGLang / OpenAI-style error body (FACTS.md §2: ``{"error": {...}}``,
    or ``{"error": "unknown field …"}``, or ``{"message": …}``)."""
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


# --------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------


class SGLangClient:
    """Async client for one SGLang server (FACTS.md §1), on ``httpx.AsyncClient``.

    Args:
        base_url: e.g. ``"http://127.0.0.1:30000"``.
        api_key: sent as ``Authorization: Bearer …`` (SGLang ``--api-key``); it never
            appears in reprs, exceptions or logs.
        timeout: read timeout (s): the longest silence tolerated inside a response.
        connect_timeout: TCP connect timeout (s).
        transport: an httpx transport to use instead of the default (tests pass
            ``httpx.MockTransport``); the default is httpx's HTTP/1.1 transport on the
            asyncio sockets of :class:`_AsyncioBackend`.

    Use as ``async with SGLangClient(url) as c: …`` or call :meth:`aclose`.  Methods
    raise :class:`SGLangError` / :class:`SGLangHTTPError` unless documented otherwise;
    the streaming methods never raise for server or network faults, they return a
    :class:`GenerateResult` with ``ok=False``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        *,
        connect_timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if transport is None:
            transport = _fast_transport(self.base_url.startswith("https:"))
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            transport=transport,
            trust_env=False,
        )
        self._server_info_path: str | None = None
        self._model_info_path: str | None = None

    def __repr__(self) -> str:
        key = ", api_key=***" if self._api_key else ""
        return f"SGLangClient({_strip_userinfo(self.base_url)!r}{key})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close pooled connections (idempotent)."""
        await self._http.aclose()

    # -- small endpoints ----------------------------------------------------------------

    async def health(self, timeout: float = 30.0) -> bool:
        """``GET /health`` → True on 200; False on 503 (starting, shutting down, or the
        health generation timed out — FACTS.md §1), any other status, or a connection
        error/timeout.  Never raises for server or network faults."""
        try:
            r = await self._http.get("/health", timeout=timeout)
        except httpx.HTTPError:
            return False
        return r.status_code == 200

    async def server_info(self) -> dict:
        """``GET /server_info`` (FACTS.md §3): resolved server args, ``internal_states``
        and ``version``.  On 404 falls back to the deprecated ``/get_server_info`` (which
        logs a deprecation line on the server each call) and remembers which worked.

        Raises:
            SGLangHTTPError: neither path answers 200.  SGLangError: connection failure.
        """
        self._server_info_path, info = await self._get_json_with_fallback(
            self._server_info_path, ("/server_info", "/get_server_info")
        )
        return info

    async def model_info(self) -> dict:
        """``GET /model_info`` (fallback ``/get_model_info``): ``model_path``,
        ``architectures``, ``is_generation``, … (FACTS.md §1).  Raises like
        :meth:`server_info`."""
        self._model_info_path, info = await self._get_json_with_fallback(
            self._model_info_path, ("/model_info", "/get_model_info")
        )
        return info

    async def metrics_text(self) -> str | None:
        """``GET /metrics``: Prometheus text (parse with ``specdash.sglang.metrics``), or
        None on 404 — the server runs without ``--enable-metrics`` (FACTS.md §1, §4).

        Raises:
            SGLangHTTPError: other non-200 status.  SGLangError: connection failure.
        """
        r = await self._request("GET", "/metrics")
        if r.status_code == 404:
            return None
        self._check(r)
        return r.text

    async def flush_cache(self) -> bool:
        """``POST /flush_cache`` → True when flushed.  SGLang answers text/plain; 400
        while requests are running or waiting (FACTS.md §1): the message is logged and
        False returned.

        Raises:
            SGLangHTTPError: any other non-200 status.  SGLangError: connection failure.
        """
        r = await self._request("POST", "/flush_cache")
        if r.status_code == 400:
            log.warning("flush_cache refused by the server: %s", self._redact(r.text.strip()[:500]))
            return False
        self._check(r)
        return True

    async def get_json(self, path: str) -> Any:
        """``GET path`` decoded as JSON (e.g. ``/v1/models``, ``/v1/loads``, the simulator's
        ``/sim/gpus``).

        Raises:
            SGLangHTTPError: non-200.  SGLangError: connection failure or non-JSON body.
        """
        return self._json(await self._request("GET", path))

    async def generate(self, text: str, sampling_params: dict, **extra: Any) -> dict:
        """Non-streaming ``POST /generate`` → ``{"text", "output_ids", "meta_info"}``
        (FACTS.md §2).  ``extra`` adds top-level request fields (``rid``,
        ``return_logprob``, …).

        Raises:
            SGLangHTTPError: non-200 (e.g. 400 for an unknown sampling parameter).
            SGLangError: connection failure or a body that is not JSON.
        """
        body = {"text": text, "sampling_params": sampling_params, **extra}
        return self._json(await self._request(
            "POST", "/generate", content=orjson.dumps(body), headers={"Content-Type": "application/json"}
        ))

    # -- streaming ----------------------------------------------------------------------

    async def generate_stream(
        self,
        text: str,
        sampling_params: dict,
        *,
        rid: str | None = None,
        on_progress: Callable[[int], Any] | None = None,
        extra: dict | None = None,
    ) -> GenerateResult:
        """Streaming ``POST /generate`` (``"stream": true``; FACTS.md §2) → GenerateResult.

        Events are ``data: <compact json>\\n\\n`` ending with ``data: [DONE]``; ``text`` and
        ``output_ids`` are cumulative and never decoded per event: tokens are counted
        from ``meta_info.completion_tokens`` only.  The last data event is decoded in
        full for ``prompt_tokens``, ``e2e_latency`` (``server_e2e_s``), ``finish_reason``
        and the ``spec_*`` fields.  ``on_progress(completion_tokens_so_far)`` is called
        whenever the count grows (keep it cheap).  ``extra`` adds top-level request fields.

        Never raises for HTTP, network or server-side errors (``ok=False``, ``error`` set);
        cancellation propagates.
        """
        body: dict[str, Any] = {"text": text, "sampling_params": sampling_params, "stream": True}
        if rid is not None:
            body["rid"] = rid
        if extra:
            body.update(extra)
        return await self._stream("/generate", body, rid, on_progress, _GenerateStream)

    async def chat_stream(
        self,
        messages: list[dict],
        max_tokens: int,
        temperature: float = 0.0,
        *,
        model: str | None = None,
        rid: str | None = None,
        ignore_eos: bool | None = None,
        on_progress: Callable[[int], Any] | None = None,
        extra: dict | None = None,
    ) -> GenerateResult:
        """Streaming ``POST /v1/chat/completions`` (FACTS.md §1, "OpenAI endpoints").

        Sends ``stream_options {"include_usage": true, "continuous_usage_stats": true}``
        and ``"return_spec_tokens_details": true``.  Deltas are incremental (small), so
        each chunk is decoded.  Token timing: per-chunk ``usage.completion_tokens`` when
        the server sends it (continuous usage); otherwise each content delta counts as
        one token and the final ``usage.completion_tokens`` replaces the count.  The
        spec counters come from ``sglext.spec_tokens_details`` (a chunk with empty
        ``choices``).  ``model``, ``rid`` and ``ignore_eos`` (an SGLang extension of the
        OpenAI request) are sent only when given.  Never raises for server or network faults.
        """
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "return_spec_tokens_details": True,
        }
        if model is not None:
            body["model"] = model
        if rid is not None:
            body["rid"] = rid
        if ignore_eos is not None:
            body["ignore_eos"] = ignore_eos
        if extra:
            body.update(extra)
        return await self._stream("/v1/chat/completions", body, rid, on_progress, _ChatStream)

    async def _stream(self, path, body, rid, on_progress, parser_cls) -> GenerateResult:
        content = orjson.dumps(body)
        started_at = time.time()
        t_sent = time.perf_counter()
        timing = _Timing(t_sent, on_progress)
        parser = parser_cls(timing)
        error: str | None = None
        try:
            async with self._http.stream(
                "POST", path, content=content, headers={"Content-Type": "application/json"}
            ) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    error = f"HTTP {resp.status_code}: {self._body_message(resp)}"
                else:
                    # Iterate the raw byte stream: SSE is never content-encoded by SGLang
                    # and this skips httpx's per-chunk decoder layers.  Read to the end
                    # even after [DONE]: a fully read response returns its connection to
                    # the pool (the terminating empty chunk follows [DONE]).
                    feed = parser.feed
                    perf = time.perf_counter
                    async for chunk in resp.stream:
                        feed(chunk, perf())
                    feed(b"\n\n", perf())  # an unterminated last event, if any
        except httpx.HTTPError as e:
            if not parser.done:  # after [DONE] the result is complete; only the socket failed
                error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        t_done = time.perf_counter()
        parser.finish()
        error = error or parser.error
        ok = error is None and parser.final is not None
        if error is None and not ok:
            error = "stream ended before the final event"
        t_first = timing.t_first
        return GenerateResult(
            rid=rid or parser.rid,
            ok=ok,
            error=self._redact(error) if error else None,
            prompt_tokens=parser.prompt_tokens,
            completion_tokens=max(timing.ct, parser.completion_tokens),
            t_sent=t_sent,
            t_first=t_first,
            t_done=t_done,
            ttft_s=(t_first - t_sent) if t_first is not None else None,
            e2e_s=t_done - t_sent,
            server_e2e_s=parser.server_e2e_s,
            itl_s=timing.itl,
            finish_reason=parser.finish_reason,
            spec=parser.spec,
            events=timing.events,
            started_at=started_at,
            text=parser.text,
        )

    # -- helpers ------------------------------------------------------------------------

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise SGLangError(self._redact(f"{method} {path} failed: {type(e).__name__}: {e}")) from None

    async def _get_json_with_fallback(self, known: str | None, paths: tuple[str, ...]) -> tuple[str, dict]:
        """GET the first of ``paths`` that is not 404 (only ``known`` once one worked)."""
        for path in (known,) if known else paths:
            r = await self._request("GET", path)
            if r.status_code == 404 and not known:
                continue
            return path, self._json(r)
        raise SGLangHTTPError(404, " or ".join(paths), "not found")

    def _json(self, r: httpx.Response) -> Any:
        """The JSON body of a 200 response (raises SGLangHTTPError / SGLangError)."""
        self._check(r)
        try:
            return orjson.loads(r.content)
        except orjson.JSONDecodeError as e:
            raise SGLangError(f"{r.request.url.path} returned non-JSON: {self._redact(r.text[:200])}") from e

    def _check(self, r: httpx.Response) -> None:
        if r.status_code != 200:
            raise SGLangHTTPError(r.status_code, r.request.url.path, self._body_message(r))

    def _body_message(self, r: httpx.Response) -> str:
        try:
            msg = _error_message(orjson.loads(r.content))
        except orjson.JSONDecodeError:
            msg = r.text.strip() or r.reason_phrase
        return self._redact(msg[:500])

    def _redact(self, text: str) -> str:
        if self._api_key and self._api_key in text:
            text = text.replace(self._api_key, "***")
        return text


def _strip_userinfo(url: str) -> str:
    return re.sub(r"//[^/@]*@", "//***@", url)


# --------------------------------------------------------------------------------------
# Per-endpoint stream parsers
# --------------------------------------------------------------------------------------


class _StreamParser:
    """SSE framing plus the state of one response; subclasses handle single events.

    ``feed(chunk, now)`` takes raw body bytes at arrival time ``now`` and calls
    ``_event(buf, start, end, simple)`` for each complete event block ``buf[start:end]``
    (its blank-line terminator excluded; no copy is made).  ``simple`` means the block
    is one line.  Events split at any byte boundary and CRLF line endings (SSE spec;
    SGLang sends LF) are handled; one ``memchr`` pass per event finds its end.
    """

    def __init__(self, timing: _Timing) -> None:
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

    def _decode(self, data: bytes | memoryview) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            self.error = f"undecodable event: {bytes(data[:200])!r}"
            self.done = True
            return None


class _GenerateStream(_StreamParser):
    """``/generate`` SSE (FACTS.md §2).  Intermediate events: ``completion_tokens`` only."""

    def __init__(self, timing: _Timing) -> None:
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
            self.error = _error_message(obj)
            self.done = True
            return
        meta = obj.get("meta_info") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("completion_tokens"), int):
            timing.tokens(meta["completion_tokens"], self.now)
        self._last = (b, ds, e)

    def finish(self) -> None:
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


class _ChatStream(_StreamParser):
    """``/v1/chat/completions`` SSE: role chunk, content deltas, finish chunk, an
    optional ``sglext.spec_tokens_details`` chunk and the usage chunk (``choices: []``)."""

    def __init__(self, timing: _Timing) -> None:
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
            self.error = _error_message(obj)
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

    def finish(self) -> None:
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


# --------------------------------------------------------------------------------------
# asyncio sockets for httpcore (a network backend, not an HTTP implementation)
# --------------------------------------------------------------------------------------

#: Pause reading a socket when this many bytes wait unread; resume below the low mark.
_READ_HIGH = 4 * 1024 * 1024
_READ_LOW = 1024 * 1024


class _SocketProtocol(asyncio.Protocol):
    """Buffers received bytes for :class:`_AsyncioStream`; one waiter at a time.

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


class _AsyncioStream(httpcore.AsyncNetworkStream):
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
        return _AsyncioStream(t, self._p)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # httpcore asks this of idle pooled connections
            return self._p.eof or bool(self._p.chunks)
        key = {"client_addr": "sockname", "server_addr": "peername"}.get(info, info)
        if key in ("ssl_object", "sockname", "peername", "socket"):
            return self._t.get_extra_info(key)
        return None


class _AsyncioBackend(httpcore.AsyncNetworkBackend):
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
        return _AsyncioStream(t, p)

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
        return _AsyncioStream(t, p)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _fast_transport(https: bool) -> httpx.AsyncBaseTransport:
    """httpx's HTTP/1.1 transport with its connection pool on :class:`_AsyncioBackend`.

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
            network_backend=_AsyncioBackend(),
        )
        if not hasattr(transport, "_pool"):
            raise AttributeError("_pool")
        transport._pool = pool
    except (AttributeError, TypeError) as exc:  # pragma: no cover - depends on the installed httpx
        log.debug("fast transport unavailable (%s); using httpx's default pool", exc)
    return transport


def new_rid() -> str:
    """A fresh request id in SGLang's format (32 hex digits)."""
    return uuid.uuid4().hex
