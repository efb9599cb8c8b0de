"""Async HTTP client for an SGLang server (or the built-in simulator).

Endpoints as SGLang serves them (``python/sglang/srt/entrypoints/http_server.py``):
``/health``, ``/server_info`` (``/get_server_info`` before), ``/model_info``,
``/metrics`` (only with ``--enable-metrics``), ``/flush_cache``, ``/generate`` and the
OpenAI-compatible ``/v1/chat/completions`` (``entrypoints/openai/serving_chat.py``).
The streams are parsed by :mod:`specdash.sglang.sse` into the record of
:mod:`specdash.sglang.records`, over the asyncio sockets of
:mod:`specdash.sglang.transport`.  Acceptance follows SGLang's own definitions
(``sglang.test.send_one``: accept length = ``completion_tokens / spec_verify_ct``, bonus
token included).  Secrets never leave in clear: the API key is masked in reprs, errors
and logs (:mod:`specdash.sglang.secrets`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Self

import httpx
import orjson

from specdash.sglang.records import GenerateResult
from specdash.sglang.secrets import redact_text, redact_url
from specdash.sglang.sse import ChatStream, GenerateStream, Timing, error_message
from specdash.sglang.transport import fast_transport

__all__ = [
    "SGLangClient",
    "SGLangError",
    "SGLangHTTPError",
    "new_rid",
]

log = logging.getLogger(__name__)


#: Seconds a control endpoint (``/server_info``, ``/metrics``, ``/flush_cache``, ``/model_info`` …) may take
#: to answer; generations keep the client's read timeout.
CONTROL_TIMEOUT_S = 30.0


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


class SGLangClient:
    """Async client for one SGLang server (the endpoints of ``entrypoints/http_server.py``),
    on ``httpx.AsyncClient``.

    Args:
        base_url: e.g. ``"http://127.0.0.1:30000"``.
        api_key: sent as ``Authorization: Bearer …`` (SGLang ``--api-key``); it never
            appears in reprs, exceptions or logs.
        timeout: read timeout (s): the longest silence tolerated inside a response.
        connect_timeout: TCP connect timeout (s).
        transport: an httpx transport to use instead of the default (tests pass
            ``httpx.MockTransport``); the default is httpx's HTTP/1.1 transport with the
            O(1) connection pool of :class:`~specdash.sglang.transport.KeepAlivePool` on the
            asyncio sockets of :class:`~specdash.sglang.transport.AsyncioBackend`: idle
            connections retire after 2 s (before uvicorn's 5 s keep-alive), and a request whose
            reused connection the server closed before answering is sent again, once, on a new
            connection (never one whose response had begun).

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
        self._connect_timeout = connect_timeout
        self._api_key = api_key or None
        self._secrets = (self._api_key,) if self._api_key else ()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if transport is None:
            transport = fast_transport(self.base_url.startswith("https:"))
        #: the httpx transport requests go through (a :class:`~specdash.sglang.transport.FastTransport`
        #: unless one was passed; its ``pool`` counts connections opened and requests retried)
        self.transport = transport
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
        return f"SGLangClient({redact_url(self.base_url)!r}{key})"

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
        health generation timed out — ``http_server.py::health_generate``), any other
        status, or a connection error/timeout.  Never raises for server or network faults."""
        from specdash.bounded import InputError, fetch

        try:
            r = await fetch(self._http, "GET", "/health", limit=1 << 20, deadline_s=timeout, what="/health",
                            timeout=timeout)
        except (httpx.HTTPError, InputError):
            return False
        return r.status_code == 200

    async def server_info(self) -> dict:
        """``GET /server_info`` (``http_server.py::server_info``): resolved server args, ``internal_states``
        and ``version``.  On 404 falls back to the deprecated ``/get_server_info`` (which
        logs a deprecation line on the server each call) and remembers which worked.

        Raises:
            SGLangHTTPError: neither path answers 200.  SGLangError: connection failure.
        """
        self._server_info_path, info = await self._get_json_with_fallback(
            self._server_info_path, ("/server_info", "/get_server_info")
        )
        return checked_server_info(info)

    async def model_info(self) -> dict:
        """``GET /model_info`` (fallback ``/get_model_info``): ``model_path``,
        ``architectures``, ``is_generation``, … (``http_server.py::model_info``).  Raises like
        :meth:`server_info`."""
        self._model_info_path, info = await self._get_json_with_fallback(
            self._model_info_path, ("/model_info", "/get_model_info")
        )
        return info

    async def metrics_text(self) -> str | None:
        """``GET /metrics``: Prometheus text (parse with ``specdash.sglang.metrics``), or
        None on 404 — the server runs without ``--enable-metrics`` (SGLang mounts ``/metrics`` only then).

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
        while requests are running or waiting (``http_server.py::flush_cache``): the message is logged and
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
        (``GenerateReqInput``, ``managers/io_struct.py``).  ``extra`` adds top-level request fields (``rid``,
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
        """Streaming ``POST /generate`` (``"stream": true``; ``http_server.py::generate_request``)
        → GenerateResult.

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
        return await self._stream("/generate", body, rid, on_progress, GenerateStream)

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
        """Streaming ``POST /v1/chat/completions`` (``entrypoints/openai/serving_chat.py``).

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
        return await self._stream("/v1/chat/completions", body, rid, on_progress, ChatStream)

    async def _stream(self, path, body, rid, on_progress, parser_cls) -> GenerateResult:
        content = orjson.dumps(body)
        started_at = time.time()
        t_sent = time.perf_counter()
        timing = Timing(t_sent, on_progress)
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
        """One request; control endpoints (everything but a generation) answer in full within
        :data:`CONTROL_TIMEOUT_S` seconds *in all* — a total deadline, so a server that accepts the
        connection and never answers ``/server_info``, or sends it a byte a second, cannot hold a run — and
        their bodies are read up to :data:`specdash.bounded.METRICS_BYTES` (``/metrics``) or
        :data:`specdash.bounded.SERVER_JSON_BYTES` (the others) only (:func:`specdash.bounded.fetch`)."""
        from specdash.bounded import METRICS_BYTES, SERVER_JSON_BYTES, InputError, TooSlow, fetch

        control = not (path.startswith("/generate") or path.startswith("/v1/"))
        if control and "timeout" not in kw:
            kw["timeout"] = httpx.Timeout(CONTROL_TIMEOUT_S, connect=self._connect_timeout)
        try:
            if control:
                limit = METRICS_BYTES if path.startswith("/metrics") else SERVER_JSON_BYTES
                return await fetch(self._http, method, path, limit=limit, deadline_s=CONTROL_TIMEOUT_S,
                                   what=f"{method} {path} from {redact_url(self.base_url)}", **kw)
            return await self._http.request(method, path, **kw)
        except TooSlow:
            raise SGLangError(self._redact(
                f"{method} {path} failed: no answer within {CONTROL_TIMEOUT_S} s (a total deadline) from "
                f"{redact_url(self.base_url)} (is it an SGLang server, and not overloaded or hung?)")) from None
        except InputError as e:
            raise SGLangError(self._redact(f"{e} (is it an SGLang server?)")) from None
        except httpx.TimeoutException as e:
            raise SGLangError(self._redact(
                f"{method} {path} failed: {type(e).__name__}: no answer within "
                f"{CONTROL_TIMEOUT_S if control else 'the read timeout'} s from {redact_url(self.base_url)} "
                "(is it an SGLang server, and not overloaded or hung?)")) from None
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
            kind = r.headers.get("content-type", "no content type")
            raise SGLangError(f"{r.request.url.path} returned non-JSON ({kind}): {self._redact(r.text[:200])} — is "
                              f"{redact_url(self.base_url)} an SGLang server (not a proxy or a login page)?") from e

    def _check(self, r: httpx.Response) -> None:
        if r.status_code != 200:
            raise SGLangHTTPError(r.status_code, r.request.url.path, self._body_message(r))

    def _body_message(self, r: httpx.Response) -> str:
        try:
            msg = error_message(orjson.loads(r.content))
        except orjson.JSONDecodeError:
            msg = r.text.strip() or r.reason_phrase
        return self._redact(msg[:500])

    def _redact(self, text: str) -> str:
        return redact_text(text, self._secrets)


def new_rid() -> str:
    """A fresh request id in SGLang's format (32 hex digits)."""
    return uuid.uuid4().hex


#: ``/server_info`` fields specdash reads, and the JSON types SGLang gives them (``ServerArgs`` in
#: ``srt/server_args.py``; ``version`` from ``sglang.version``).  None is allowed for all but ``simulated``.
SERVER_INFO_TYPES: dict[str, tuple[type, ...]] = {
    "version": (str,), "model_path": (str,), "tokenizer_path": (str,), "served_model_name": (str,),
    "speculative_algorithm": (str,), "speculative_draft_model_path": (str,),
    "speculative_num_steps": (int,), "speculative_eagle_topk": (int,), "speculative_num_draft_tokens": (int,),
    "tp_size": (int,), "dp_size": (int,), "pp_size": (int,), "max_total_num_tokens": (int,),
    "max_running_requests": (int,), "context_length": (int,), "cuda_graph_max_bs": (int,),
    "mem_fraction_static": (int, float), "internal_states": (list,), "simulated": (bool,),
}

#: Where :func:`checked_server_info` lists the fields it dropped ("name: type value").
INVALID_FIELDS_KEY = "specdash_invalid_fields"


def checked_server_info(info) -> dict:
    """``info`` with every field of :data:`SERVER_INFO_TYPES` whose value has another JSON type removed
    (an int where SGLang sends a string, a string for a step count, a bool for an int …), so that a
    non-SGLang or broken server's values never reach results as if they were SGLang's; the dropped
    fields are listed under :data:`INVALID_FIELDS_KEY` for the caller to report.  A body that is not a
    JSON object becomes ``{INVALID_FIELDS_KEY: ["/server_info: <type>"]}``."""
    if not isinstance(info, dict):
        return {INVALID_FIELDS_KEY: [f"/server_info: a JSON {type(info).__name__}, not an object"]}
    bad = []
    out = dict(info)
    for key, types in SERVER_INFO_TYPES.items():
        if key not in out or (out[key] is None and key != "simulated"):
            continue
        v = out[key]
        ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in types)
        if not ok:
            bad.append(f"{key}: {type(v).__name__} {str(v)[:40]!r}")
            del out[key]
    if bad:
        out[INVALID_FIELDS_KEY] = bad
    return out
