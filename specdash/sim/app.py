"""The simulated server's HTTP API (Starlette): SGLang's endpoints and shapes, plus ``/sim/*``.

Shapes follow recordings of a real SGLang 0.5.14 server (``/generate`` streamed and not,
``/v1/chat/completions`` and ``/v1/completions`` streamed, ``/server_info``, ``/model_info``,
``/v1/models``) and the 0.5.23 ``http_server.py`` / ``tokenizer_manager.py`` for what changed:

* ``/generate`` SSE events are ``data: <compact JSON>\\n\\n`` ending with ``data: [DONE]``;
  ``text``/``output_ids`` are cumulative unless ``--incremental-streaming-output``; one
  event carries every token produced since the last one (a speculative round's accepted
  tokens arrive together); speculative ``meta_info`` fields are in the final event only,
  named by the emulated release (``versions.py`` ``meta_new_spec_keys`` /
  ``meta_old_spec_keys``);
* unknown ``sampling_params`` keys → HTTP 400 ``{"error":"unknown field `x`, expected one of …"}``;
* ``/metrics`` exists only with ``--enable-metrics`` (404 otherwise);
* ``/sim/truth`` and ``/sim/gpus`` are the simulator's own (ground truth, simulated devices).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from specdash.sglang.versions import has_feature, parse_version
from specdash.sim.http import SSE_DONE, ContextLengthError, error_response, json_response
from specdash.sim.openai_routes import OpenAIRoutes

if TYPE_CHECKING:  # pragma: no cover
    from specdash.sim.engine import SimRequest
    from specdash.sim.server import SimServer

#: ``SamplingParams`` API fields (SGLang ``sampling/sampling_params.py``; ``api_types.py`` in 0.5.23).
SAMPLING_FIELDS = (
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "custom_params", "stream_interval", "logit_bias", "sampling_seed",
)
HTTP_PHRASES = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                500: "Internal Server Error", 503: "Service Unavailable"}


class SamplingError(ValueError):
    """Bad ``sampling_params``; ``body`` is the JSON SGLang answers with (HTTP 400)."""

    def __init__(self, body: dict) -> None:
        super().__init__(str(body))
        self.body = body


def validate_sampling(sp: Any) -> dict[str, Any]:
    """Check ``sampling_params`` like SGLang (unknown keys, then value ranges).

    Raises:
        SamplingError: with the JSON body to send.
    """
    if sp is None:
        return {}
    if not isinstance(sp, dict):
        raise SamplingError({"error": "invalid type: sampling_params must be an object"})
    for key in sp:
        if key not in SAMPLING_FIELDS:
            expected = ", ".join(f"`{f}`" for f in SAMPLING_FIELDS)
            raise SamplingError({"error": f"unknown field `{key}`, expected one of {expected}"})

    def num(name: str, default: float) -> float:
        v = sp.get(name)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SamplingError({"error": {"message": f"{name} must be a number, got {v!r}."}})
        return float(v)

    t = num("temperature", 1.0)
    if t < 0:
        raise SamplingError({"error": {"message": f"temperature must be a non-negative finite number, got {t}."}})
    top_p = num("top_p", 1.0)
    if not 0.0 < top_p <= 1.0:
        raise SamplingError({"error": {"message": f"top_p must be in (0, 1], got {top_p}."}})
    min_p = num("min_p", 0.0)
    if not 0.0 <= min_p <= 1.0:
        raise SamplingError({"error": {"message": f"min_p must be in [0, 1], got {min_p}."}})
    mnt = sp.get("max_new_tokens", 128)
    if mnt is not None and (isinstance(mnt, bool) or not isinstance(mnt, int) or mnt < 0):
        raise SamplingError({"error": {"message": f"max_new_tokens must be at least 0, got {mnt}."}})
    return sp


class Api(OpenAIRoutes):
    """Route handlers bound to one :class:`~specdash.sim.server.SimServer`."""

    def __init__(self, srv: SimServer) -> None:
        self.srv = srv
        self.version = srv.version
        self.new_keys = has_feature("meta_new_spec_keys", srv.version)
        self.old_keys = has_feature("meta_old_spec_keys", srv.version)
        self.v22 = not parse_version(srv.version) < parse_version("0.5.22")

    # -- meta_info ---------------------------------------------------------------------------
    def meta(self, r: SimRequest, *, final: bool, first: bool, stream: bool, logprobs: tuple[bool, int] | None,
             lo: int = 0) -> dict[str, Any]:
        """``meta_info`` of one event (key order as in the golden 0.5.14 recordings)."""
        srv = self.srv
        metrics = srv.enable_metrics
        m: dict[str, Any] = {
            "id": r.rid,
            "finish_reason": r.finish_reason if final else None,
            "prompt_tokens": r.prompt_tokens,
            "weight_version": "default",
            "num_retractions": 0,
        }
        if metrics:
            m["queue_time"] = round(max(0.0, (r.t_sched or r.t_dispatch) - r.t_dispatch), 6)
        if logprobs and logprobs[0]:
            ids = r.output_ids(0 if not stream or not srv.incremental else lo, r.completion)
            m["input_token_logprobs"] = []
            m["output_token_logprobs"] = [[-0.0 if i % 7 else -0.5, tid, None] for i, tid in enumerate(ids)]
            m["output_token_logprobs_length"] = len(ids)
            m["input_top_logprobs"] = []
            if logprobs[1] > 0:
                m["output_top_logprobs"] = [
                    [[-0.0 if i % 7 else -0.5, tid, None]] + [[-27.0 - k, 1000 + (tid * 31 + k) % 8000, None]
                                                              for k in range(logprobs[1] - 1)]
                    for i, tid in enumerate(ids)]
        m["reasoning_tokens"] = 0
        m["completion_tokens"] = r.completion
        m["cached_tokens"] = r.cached_tokens
        m["cached_tokens_details"] = {"device": r.cached_tokens, "host": 0} if r.cached_tokens else None
        m["dp_rank"] = None
        now = time.time()
        if stream and first and metrics and not final:
            m["response_sent_to_client_ts"] = now
        if final:
            m["e2e_latency"] = (r.t_finished or now) - r.t_received
            spec = srv.spec_shape
            if spec is not None and r.verify_ct > 0 and spec.num_draft_tokens > 1:
                s = r.spec_meta(spec.num_draft_tokens)
                m["spec_accept_rate"] = s["accept_rate"]
                m["spec_accept_length"] = s["accept_length"]
                if self.new_keys:
                    m["spec_num_correct_drafts"] = s["correct"]
                    m["spec_num_proposed_drafts"] = s["proposed"]
                elif self.old_keys:
                    m["spec_accept_token_num"] = s["correct"]
                    m["spec_draft_token_num"] = s["proposed"]
                m["spec_verify_ct"] = s["verify_ct"]
                if self.new_keys and self.old_keys:
                    m["spec_accepted_drafts"] = s["correct"]
                    m["spec_proposed_drafts"] = s["proposed"]
                if s["histogram"]:
                    if self.new_keys:
                        m["spec_correct_drafts_histogram"] = s["histogram"]
                    if self.old_keys:
                        m["spec_accept_histogram"] = s["histogram"]
            if metrics:
                m["request_received_ts"] = r.t_received
                if self.v22 and r.t_first is not None:
                    m["first_token_latency"] = r.t_first - r.t_received
                m["api_server_dispatch_finish_ts"] = r.t_dispatch
                if stream:
                    m["response_sent_to_client_ts"] = now
                m["request_finished_ts"] = r.t_finished or now
                if r.t_first is not None and r.completion > 1 and r.t_finished and r.t_finished > r.t_first:
                    m["decode_throughput"] = (r.completion - 1) / (r.t_finished - r.t_first)
                else:
                    m["decode_throughput"] = 0.0
                if not stream:
                    m["response_sent_to_client_ts"] = now
        return m

    def spec_details(self, r: SimRequest) -> dict[str, Any] | None:
        """``sglext.spec_tokens_details`` (``serving_completions.py``) or None without speculation."""
        spec = self.srv.spec_shape
        if spec is None or r.verify_ct == 0:
            return None
        s = r.spec_meta(spec.num_draft_tokens)
        return {"spec_accept_rate": s["accept_rate"], "spec_accept_length": s["accept_length"],
                "spec_num_correct_drafts": s["correct"], "spec_num_proposed_drafts": s["proposed"],
                "spec_verify_ct": s["verify_ct"], "spec_correct_drafts_histogram": s["histogram"]}

    # -- /generate ----------------------------------------------------------------------------------
    async def generate(self, request: Request) -> Response:
        body = await self._json_object(request)
        if isinstance(body, Response):
            return body
        text, ids = body.get("text"), body.get("input_ids")
        sp_raw = body.get("sampling_params")
        batch = isinstance(text, list) or (isinstance(ids, list) and ids and isinstance(ids[0], list))
        stream = bool(body.get("stream"))
        if batch and stream:
            return error_response("Batched streaming is not supported by the specdash simulator")
        try:
            sps = sp_raw if isinstance(sp_raw, list) else None
            if sps is None:
                validate_sampling(sp_raw)
            else:
                for s in sps:
                    validate_sampling(s)
        except SamplingError as exc:
            return json_response(exc.body, 400)
        if text is None and ids is None:
            return error_response("Either text or input_ids should be provided.")
        logprobs = (bool(body.get("return_logprob")), int(body.get("top_logprobs_num") or 0))
        log_metrics = bool(body.get("log_metrics", True))
        if batch:
            items = text if isinstance(text, list) else [None] * len(ids)
            reqs = []
            try:
                for i, item in enumerate(items):
                    sp = (sp_raw[i] if isinstance(sp_raw, list) else sp_raw) or {}
                    rid = body.get("rid")[i] if isinstance(body.get("rid"), list) else None
                    reqs.append(self._submit(item, ids[i] if isinstance(ids, list) else None, sp, rid, log_metrics))
            except ContextLengthError as exc:
                for r in reqs:
                    self.srv.engine.abort(r)
                return error_response(str(exc))
            out = []
            for r in reqs:
                await self._wait_done(r)
                out.append(self._final_json(r, logprobs))
            return json_response(out)
        try:
            r = self._submit(text, ids, sp_raw or {}, body.get("rid"), log_metrics)
        except ContextLengthError as exc:
            if stream:  # SGLang's stream_results: the ValueError as an error event, then [DONE] (HTTP 200)
                err = {"error": {"message": str(exc), "type": "invalid_request_error", "code": 400,
                                 "retryable": False}}
                return StreamingResponse(iter([b"data: " + orjson.dumps(err) + b"\n\n", SSE_DONE]),
                                         media_type="text/event-stream")
            return error_response(str(exc))
        if stream:
            return StreamingResponse(self._stream_generate(r, logprobs), media_type="text/event-stream")
        await self._wait_done(r)
        if r.aborted:
            return error_response(str((r.finish_reason or {}).get("message", "aborted")), 503)
        return json_response(self._final_json(r, logprobs))

    def _submit(self, text: str | None, ids: list[int] | None, sp: dict, rid: Any, log_metrics: bool) -> SimRequest:
        mnt = sp.get("max_new_tokens", 128)
        if mnt is None:
            mnt = 128
        text, ids = (text if isinstance(text, str) else None), (ids if ids else None)
        n_prompt = self.srv.engine.prompt_tokens(text, ids)  # counted once: the check and the request
        mnt = self._fit_context(n_prompt, int(mnt))
        return self.srv.engine.new_request(text, ids, mnt, n_prompt=n_prompt,
                                           rid=str(rid) if rid else None, temperature=sp.get("temperature", 1.0),
                                           log_metrics=log_metrics)

    def _fit_context(self, prompt_tokens: int, max_new_tokens: int) -> int:
        """The max new tokens to run for a prompt of ``prompt_tokens``.

        Raises:
            ContextLengthError: the request does not fit the context (SGLang's message).
        """
        err, mnt = self.srv.context_error(prompt_tokens, max_new_tokens)
        if err is not None:
            raise ContextLengthError(err)
        return int(mnt if mnt is not None else max_new_tokens)

    async def _wait_done(self, r: SimRequest) -> None:
        while not r.finished:
            r.event.clear()
            if r.finished:
                break
            await r.event.wait()

    def _final_json(self, r: SimRequest, logprobs: tuple[bool, int]) -> dict[str, Any]:
        return {"text": r.text(), "output_ids": r.output_ids(),
                "meta_info": self.meta(r, final=True, first=False, stream=False, logprobs=logprobs)}

    async def _stream_generate(self, r: SimRequest, logprobs: tuple[bool, int]):
        incremental = self.srv.incremental
        sent = 0
        first = True
        try:
            while True:
                if r.completion > sent or r.finished:
                    if r.aborted:
                        err = {"error": {"message": str((r.finish_reason or {}).get("message", "aborted")),
                                         "type": "invalid_request_error", "code": 400, "retryable": False}}
                        yield b"data: " + orjson.dumps(err) + b"\n\n"
                        break
                    n = r.completion
                    final = r.finished
                    if incremental:
                        text, ids = r.text(sent, n), r.output_ids(sent, n)
                    else:
                        text, ids = r.text(0, n), r.output_ids(0, n)
                    meta = self.meta(r, final=final, first=first, stream=True, logprobs=logprobs, lo=sent)
                    yield b"data: " + orjson.dumps({"text": text, "output_ids": ids, "meta_info": meta}) + b"\n\n"
                    sent = n
                    first = False
                    if final:
                        break
                else:
                    r.event.clear()
                    if r.completion > sent or r.finished:
                        continue
                    await r.event.wait()
            yield SSE_DONE
        finally:
            if not r.finished:
                self.srv.engine.abort(r)

    # -- OpenAI-compatible ------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        srv = self.srv
        if not srv.ready or srv.stopping:
            return Response(status_code=503)
        r = srv.engine.new_request(None, [0], 1, rid=f"HEALTH_CHECK_{uuid.uuid4().hex[:8]}", temperature=0.0,
                                   log_metrics=False, internal="health")
        tick = asyncio.ensure_future(srv.engine.wait_tick(20.0))
        done = asyncio.ensure_future(self._wait_done(r))
        finished, pending = await asyncio.wait({tick, done}, timeout=20.0, return_when=asyncio.FIRST_COMPLETED)
        for p in pending:
            p.cancel()
        if not finished:
            srv.log.line("Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.")
            return Response(status_code=503)
        return Response(status_code=200)

    async def ready(self, request: Request) -> Response:
        return Response(status_code=200 if self.srv.ready else 503)

    async def server_info(self, request: Request) -> Response:
        if request.url.path == "/get_server_info":
            self.srv.log.line("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                              "Please use '/server_info' instead.", level="warning")
        return json_response(self.srv.server_info())

    async def model_info(self, request: Request) -> Response:
        if request.url.path == "/get_model_info":
            self.srv.log.line("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                              "Please use '/model_info' instead.", level="warning")
        return json_response(self.srv.model_info())

    async def v1_models(self, request: Request) -> Response:
        srv = self.srv
        return json_response({"object": "list", "data": [{
            "id": srv.served_model_name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
            "root": srv.args.get("model_path"), "parent": None, "max_model_len": srv.context_len}]})

    async def get_load(self, request: Request) -> Response:
        srv = self.srv
        eng = srv.engine
        if request.url.path == "/get_load":
            srv.log.line("Endpoint '/get_load' is deprecated and will be removed in a future version. Please use "
                         "'/v1/loads' instead.", level="warning")
            return json_response([{"dp_rank": 0, "num_reqs": len(eng.running), "num_waiting_reqs": len(eng.waiting),
                                   "num_tokens": eng.tokens_in_use, "num_pending_tokens": 0,
                                   "ts_tic": time.monotonic()}])
        used = eng.tokens_in_use
        load = {"dp_rank": 0, "num_running_reqs": len(eng.running), "num_waiting_reqs": len(eng.waiting),
                "num_used_tokens": used, "max_total_num_tokens": srv.max_total_num_tokens,
                "token_usage": used / max(1, srv.max_total_num_tokens), "gen_throughput": eng.last_gen_throughput,
                "cache_hit_rate": 0.0, "max_running_requests": srv.max_running}
        if srv.spec_shape is not None:
            load["speculative"] = {"accept_length": eng.avg_spec_accept_length() or 0.0,
                                   "accept_rate": (eng.window_accept_rate or 0.0) if srv.enable_metrics else 0.0}
        return json_response({"timestamp": time.time(), "dp_rank_count": 1, "loads": [load]})

    async def flush_cache(self, request: Request) -> Response:
        try:
            timeout = float(request.query_params.get("timeout", "0") or 0)
        except ValueError:
            return error_response("timeout must be a number")
        eng = self.srv.engine
        deadline = time.monotonic() + max(0.0, timeout)
        ok, msg = eng.flush_cache()
        while not ok and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            ok, msg = eng.flush_cache()
        self.srv.log.scheduler(msg, level="info" if ok else "warning")
        if ok:
            return Response("Cache flushed.\nPlease check backend logs for more details. (When there are running or "
                            "waiting requests, the operation will not be performed.)\n", 200, media_type="text/plain")
        return Response(msg + "\n", 400, media_type="text/plain")

    async def metrics(self, request: Request) -> Response:
        m = self.srv.metrics
        if m is None:
            return json_response({"detail": "Not Found"}, 404)
        return Response(m.render(), media_type="text/plain; version=1.0.0; charset=utf-8")

    async def set_internal_state(self, request: Request) -> Response:
        """``POST /set_internal_state {"server_args": {…}}`` (SGLang ``Scheduler.set_internal_state``).

        Only ``pp_max_micro_batch_size`` and the two ``speculative_accept_threshold_*`` keys may
        change; any other key logs ``Updating <key> is not supported.`` and changes nothing.  The
        answer is one bool per DP rank: ``[true]`` whatever happened up to 0.5.14, ``[false]`` for a
        rejected update from 0.5.15.  A successful update resets the lifetime accept-length counters.
        """
        try:
            body = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError as exc:
            return error_response(f"Invalid JSON: {exc}")
        sa = body.get("server_args") if isinstance(body, dict) else None
        if not isinstance(sa, dict):
            return json_response({"detail": [{"type": "missing", "loc": ["body", "server_args"],
                                              "msg": "Field required"}]}, 422)
        srv = self.srv
        eng = srv.engine
        allowed = ("pp_max_micro_batch_size", "speculative_accept_threshold_single",
                   "speculative_accept_threshold_acc")
        ok = True
        for k, v in sa.items():
            if k not in allowed:
                srv.log.scheduler(f"Updating {k} is not supported.", level="warning")
                ok = False
                break
            if k == "pp_max_micro_batch_size" and (not isinstance(v, int) or v > srv.max_running or v < 1):
                srv.log.scheduler(f"Updating {k} to {v} is rejected because it is out of the valid range "
                                  f"[1, {srv.max_running}].", level="warning")
                ok = False
                break
        if ok:
            if eng is not None:
                avg = eng.avg_spec_accept_length()
                if avg is not None:
                    srv.log.scheduler(f"avg_spec_accept_length={avg}")
                eng.lifetime_accept_num = eng.lifetime_accept_den = 0
            srv.state_overrides.update(sa)
            from specdash.sim.args import server_args_line

            merged = {**srv.args, **srv.state_overrides}
            srv.log.scheduler("Global server args updated! get_global_server_args()="
                              + server_args_line(merged)[len("server_args="):])
        answer = True if has_feature("set_internal_state_always_true", self.version) else ok
        return json_response([answer])

    async def sim_truth(self, request: Request) -> Response:
        records = request.query_params.get("records", "1") not in ("0", "false")
        windows = request.query_params.get("decode_windows", "0") not in ("0", "false")
        since = request.query_params.get("since")
        try:
            since_f = float(since) if since else None
        except ValueError:
            return error_response("since must be a number (time.time())")
        return json_response(self.srv.truth(include_records=records, since=since_f, decode_windows=windows))

    async def sim_gpus(self, request: Request) -> Response:
        return json_response(self.srv.gpus())


class AccessLog:
    """ASGI middleware: uvicorn-style access lines, SGLang's HTTP counters, ``--api-key``."""

    def __init__(self, app, srv: SimServer) -> None:
        self.app = app
        self.srv = srv

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        srv = self.srv
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        key = srv.api_key
        if key and not (path.startswith(("/health", "/metrics", "/sim/"))):
            auth = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
            if auth != f"Bearer {key}":
                resp = json_response({"error": "Unauthorized"}, 401)
                self._log(scope, 401)
                return await resp(scope, receive, send)
        status_box = [500]

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status_box[0] = message["status"]
                self._log(scope, message["status"])
                if srv.metrics is not None:
                    srv.metrics.http(path, method, message["status"])
            await send(message)

        await self.app(scope, receive, send_wrapper)

    def _log(self, scope, status: int) -> None:
        client = scope.get("client") or ("127.0.0.1", 0)
        qs = scope.get("query_string", b"")
        path = scope.get("path", "") + (("?" + qs.decode("latin-1")) if qs else "")
        self.srv.log.line(f'INFO:     {client[0]}:{client[1]} - "{scope.get("method", "GET")} {path} HTTP/'
                          f'{scope.get("http_version", "1.1")}" {status} {HTTP_PHRASES.get(status, "")}'.rstrip())


def build_app(srv: SimServer) -> Any:
    """The ASGI app for ``srv`` (routes + access-log middleware)."""
    api = Api(srv)
    routes = [
        Route("/health", api.health, methods=["GET"]),
        Route("/health_generate", api.health, methods=["GET"]),
        Route("/ready", api.ready, methods=["GET"]),
        Route("/server_info", api.server_info, methods=["GET"]),
        Route("/get_server_info", api.server_info, methods=["GET"]),
        Route("/model_info", api.model_info, methods=["GET"]),
        Route("/get_model_info", api.model_info, methods=["GET"]),
        Route("/generate", api.generate, methods=["POST", "PUT"]),
        Route("/flush_cache", api.flush_cache, methods=["GET", "POST"]),
        Route("/v1/models", api.v1_models, methods=["GET"]),
        Route("/v1/chat/completions", api.chat, methods=["POST"]),
        Route("/v1/completions", api.completions, methods=["POST"]),
        Route("/v1/loads", api.get_load, methods=["GET"]),
        Route("/get_load", api.get_load, methods=["GET"]),
        Route("/set_internal_state", api.set_internal_state, methods=["POST", "PUT"]),
        Route("/sim/truth", api.sim_truth, methods=["GET"]),
        Route("/sim/gpus", api.sim_gpus, methods=["GET"]),
    ]
    if srv.enable_metrics:
        routes.append(Route("/metrics", api.metrics, methods=["GET"]))

    async def not_found(request: Request, exc: Exception) -> Response:
        return json_response({"detail": "Not Found"}, 404)

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return json_response({"detail": "Method Not Allowed"}, 405)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    return AccessLog(app, srv)
