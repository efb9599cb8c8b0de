"""The simulator refuses what does not fit the context as SGLang 0.5.14 does
(``TokenizerManager._validate_one_request``: the prompt plus EAGLE's reserved draft slots must stay
below ``--context-length``, and with ``max_new_tokens`` within it), in the same shapes: HTTP 400
``{"error": {"message"}}`` on ``/generate``, an error event then ``[DONE]`` in a ``/generate``
stream, OpenAI's error object (400) on the chat and completion routes; ``--allow-auto-truncate``
cuts ``max_new_tokens`` instead."""

from __future__ import annotations

import json

import httpx

from specdash.sim.testing import SimProcess
from specdash.sim.text import count_tokens

BASE = ["--model-path", "sim:tiny-llama", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
        "sim:tiny-llama-eagle3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "2",
        "--speculative-num-draft-tokens", "5", "--context-length", "200", "--time-scale", "20"]
RESERVED = max(2 * 3, 5)  # max(topk x steps, draft tokens)


def _prompt(tokens: int) -> str:
    words = []
    while count_tokens(" ".join(words)) < tokens:
        words.append("photosynthesis")
    return " ".join(words)


def _gen(url: str, text: str, n: int, stream: bool = False) -> httpx.Response:
    body = {"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0}, "stream": stream}
    return httpx.post(url + "/generate", json=body, timeout=60)


def test_requests_past_the_context_are_refused_with_sglangs_messages():
    with SimProcess(BASE) as sim:
        long_text = _prompt(200)
        n = count_tokens(long_text) + RESERVED
        r = _gen(sim.url, long_text, 8)
        assert r.status_code == 400
        assert r.json() == {"error": {"message": f"The input ({n} tokens) is longer than the model's context "
                                                 "length (200 tokens)."}}
        # streamed: the HTTP status is already 200; the error is an event, then [DONE]
        r = _gen(sim.url, long_text, 8, stream=True)
        events = [ln[6:] for ln in r.text.splitlines() if ln.startswith("data: ")]
        assert r.status_code == 200 and events[-1] == "[DONE]"
        assert json.loads(events[0])["error"]["message"].startswith(f"The input ({n} tokens) is longer")
        # prompt fits, prompt + max_new_tokens does not
        short = _prompt(40)
        m = count_tokens(short) + RESERVED
        r = _gen(sim.url, short, 200)
        assert r.status_code == 400
        assert r.json()["error"]["message"] == (
            "Requested token count exceeds the model's maximum context length of 200 tokens. You requested a total "
            f"of {m + 200} tokens: {m} tokens from the input messages and 200 tokens for the completion. Please "
            "reduce the number of tokens in the input messages or the completion to fit within the limit.")
        ok = _gen(sim.url, short, 200 - m)  # exactly at the limit: served
        assert ok.status_code == 200 and ok.json()["meta_info"]["completion_tokens"] == 200 - m
        # OpenAI routes: the error object with HTTP 400, streamed or not
        for stream in (False, True):
            r = httpx.post(sim.url + "/v1/chat/completions", timeout=60, json={
                "model": "x", "messages": [{"role": "user", "content": long_text}], "max_tokens": 8,
                "stream": stream})
            assert r.status_code == 400, r.text
            assert r.json()["object"] == "error" and r.json()["type"] == "BadRequestError"
            assert "longer than the model's context length (200 tokens)" in r.json()["message"]
        # a batch with one request too long: the whole batch is refused
        r = httpx.post(sim.url + "/generate", timeout=60, json={
            "text": [short, long_text], "sampling_params": {"max_new_tokens": 4}})
        assert r.status_code == 400 and "longer than the model's context length" in r.json()["error"]["message"]


def test_allow_auto_truncate_cuts_max_new_tokens():
    with SimProcess([*BASE, "--allow-auto-truncate"]) as sim:
        short = _prompt(40)
        m = count_tokens(short) + RESERVED
        r = _gen(sim.url, short, 500)
        assert r.status_code == 200 and r.json()["meta_info"]["completion_tokens"] == 200 - m
