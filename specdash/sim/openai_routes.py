"""The simulated server's OpenAI-compatible routes: ``/v1/chat/completions`` and ``/v1/completions``, streamed
(SSE chunks, ``[DONE]``, ``usage`` with ``stream_options.include_usage``, SGLang's ``sglext`` spec details) or
not, as SGLang 0.5.14's ``openai_api/serving_chat.py`` and ``serving_completions.py`` answer.  A mixin of
:class:`specdash.sim.app.Api` (it uses ``self.srv`` and the request helpers there)."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from specdash.sim.http import SSE_DONE, ContextLengthError, error_response, json_response

if TYPE_CHECKING:
    from specdash.sim.engine import SimRequest


class OpenAIRoutes:
    """``chat`` / ``completions`` and their streams."""

    srv: Any

    async def _openai_body(self, request: Request) -> dict | Response:
        ctype = request.headers.get("content-type", "")
        if "application/json" not in ctype:
            return error_response("Unsupported Media Type: Only 'application/json' is allowed", 400)
        return await self._json_object(request)

    @staticmethod
    async def _json_object(request: Request) -> dict | Response:
        """The request body as a JSON object, or SGLang's 400 answer when it is not one."""
        try:
            body = orjson.loads(await request.body() or b"{}")
        except orjson.JSONDecodeError as exc:
            return error_response(f"Invalid JSON: {exc}")
        if not isinstance(body, dict):
            return error_response("The request body must be a JSON object")
        return body

    async def chat(self, request: Request) -> Response:
        from specdash.sim.text import chat_prompt

        body = await self._openai_body(request)
        if isinstance(body, Response):
            return body
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return error_response("messages must be a non-empty list")
        return await self._openai(body, chat_prompt(messages), chat=True)

    async def completions(self, request: Request) -> Response:
        body = await self._openai_body(request)
        if isinstance(body, Response):
            return body
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt and isinstance(prompt[0], str) else " ".join(map(str, prompt))
        if not isinstance(prompt, str):
            return error_response("prompt must be a string")
        return await self._openai(body, prompt, chat=False)

    async def _openai(self, body: dict, prompt: str, *, chat: bool) -> Response:
        mnt = body.get("max_completion_tokens") or body.get("max_tokens") or 128
        temperature = body.get("temperature", 1.0)
        if not isinstance(mnt, int) or mnt < 0:
            return error_response(f"max_tokens must be a non-negative integer, got {mnt!r}")
        n_prompt = self.srv.engine.prompt_tokens(prompt, None)
        try:
            mnt = self._fit_context(n_prompt, int(mnt))
        except ContextLengthError as exc:  # serving_base.create_error_response: OpenAI's error object
            return json_response({"object": "error", "message": str(exc), "type": "BadRequestError", "param": None,
                                  "code": 400}, 400)
        r = self.srv.engine.new_request(prompt, None, int(mnt), rid=None, temperature=temperature, n_prompt=n_prompt)
        cid = uuid.uuid4().hex
        created = int(time.time())
        model = self.srv.served_model_name
        opts = body.get("stream_options") or {}
        include_usage = bool(opts.get("include_usage", self.srv.args.get("stream_response_default_include_usage")))
        details = bool(body.get("return_spec_tokens_details"))
        if body.get("stream"):
            gen = self._stream_chat(r, cid, created, model, include_usage, details) if chat else \
                self._stream_completion(r, cid, created, model, include_usage, details)
            return StreamingResponse(gen, media_type="text/event-stream")
        await self._wait_done(r)
        usage = {"prompt_tokens": r.prompt_tokens, "total_tokens": r.prompt_tokens + r.completion,
                 "completion_tokens": r.completion, "prompt_tokens_details": None, "reasoning_tokens": 0}
        finish = "length" if (r.finish_reason or {}).get("type") == "length" else "stop"
        if chat:
            out: dict[str, Any] = {
                "id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": r.text(),
                                                      "reasoning_content": None, "tool_calls": None},
                             "logprobs": None, "finish_reason": finish, "matched_stop": None}],
                "usage": usage, "metadata": {"weight_version": "default"},
            }
        else:
            out = {"id": cid, "object": "text_completion", "created": created, "model": model,
                   "choices": [{"index": 0, "text": r.text(), "logprobs": None, "finish_reason": finish,
                                "matched_stop": None}],
                   "usage": usage, "metadata": {"weight_version": "default"}}
        if details:
            d = self.spec_details(r)
            if d is not None:
                out["sglext"] = {"spec_tokens_details": d}
        return json_response(out)

    async def _deltas(self, r: SimRequest):
        """Yield ``(text_delta, final)`` as tokens arrive (one per engine emission)."""
        sent = 0
        try:
            while True:
                if r.completion > sent or r.finished:
                    n = r.completion
                    yield r.text(sent, n), r.finished
                    sent = n
                    if r.finished:
                        return
                else:
                    r.event.clear()
                    if r.completion > sent or r.finished:
                        continue
                    await r.event.wait()
        finally:
            if not r.finished:
                self.srv.engine.abort(r)

    async def _stream_chat(self, r: SimRequest, cid: str, created: int, model: str, include_usage: bool,
                           details: bool):
        head = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}

        def chunk(delta: dict, finish: str | None = None) -> bytes:
            return b"data: " + orjson.dumps({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                                  "finish_reason": finish,
                                                                  "matched_stop": None}]}) + b"\n\n"

        yield chunk({"reasoning_content": None, "role": "assistant", "content": ""})
        async for text, final in self._deltas(r):
            if text:
                yield chunk({"reasoning_content": None, "content": text})
            if final:
                break
        if r.aborted:
            yield SSE_DONE
            return
        yield chunk({"reasoning_content": None}, "length" if (r.finish_reason or {}).get("type") == "length"
                    else "stop")
        if details:
            d = self.spec_details(r)
            if d is not None:
                yield b"data: " + orjson.dumps({**head, "choices": [], "sglext": {"spec_tokens_details": d}}) + b"\n\n"
        if include_usage:
            usage = {"prompt_tokens": r.prompt_tokens, "total_tokens": r.prompt_tokens + r.completion,
                     "completion_tokens": r.completion, "prompt_tokens_details": None, "reasoning_tokens": 0}
            yield b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n"
        yield SSE_DONE

    async def _stream_completion(self, r: SimRequest, cid: str, created: int, model: str, include_usage: bool,
                                 details: bool):
        head = {"id": cid, "object": "text_completion", "created": created, "model": model}
        async for text, final in self._deltas(r):
            finish = None
            if final and not r.aborted:
                finish = "length" if (r.finish_reason or {}).get("type") == "length" else "stop"
            yield b"data: " + orjson.dumps({**head, "choices": [{"index": 0, "text": text, "logprobs": None,
                                                                 "finish_reason": finish, "matched_stop": None}],
                                            "usage": None}) + b"\n\n"
            if final:
                break
        if details and not r.aborted:
            d = self.spec_details(r)
            if d is not None:
                yield b"data: " + orjson.dumps({**head, "choices": [], "usage": None,
                                                "sglext": {"spec_tokens_details": d}}) + b"\n\n"
        if include_usage and not r.aborted:
            usage = {"prompt_tokens": r.prompt_tokens, "total_tokens": r.prompt_tokens + r.completion,
                     "completion_tokens": r.completion, "reasoning_tokens": 0}
            yield b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n"
        yield SSE_DONE

    # -- info endpoints ---------------------------------------------------------------------------------
