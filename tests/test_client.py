"""SGLangClient against replays of a real SGLang 0.5.14 server's recorded responses.

Unit level: httpx.MockTransport and the stream parsers fed directly (hypothesis splits
the recorded bytes at arbitrary points).  End to end: a local starlette/uvicorn server on
127.0.0.1 replays the recorded SSE bytes event by event through the client's default
transport (the asyncio socket backend).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import httpx
import orjson
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from specdash.sglang.client import SGLangClient, SGLangError, SGLangHTTPError
from specdash.sglang.process import free_port
from specdash.sglang.records import GenerateResult, SpecMeta
from specdash.sglang.sse import ChatStream, GenerateStream, Timing
from specdash.sglang.versions import SPEC_META_KEYS

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "sglang" / "golden" / "runs"
ALIGNED, BASELINE = "eagle3_aligned_warm", "baseline_nospec"


def golden(run: str, name: str) -> bytes:
    path = GOLDEN / run / name
    if not path.exists():
        pytest.skip("shared/sglang/golden is not beside the checkout")
    return path.read_bytes()


def sse_events(data: bytes) -> list[bytes]:
    """The recorded stream cut into whole events (each with its blank line)."""
    return [e + b"\n\n" for e in data.split(b"\n\n") if e.strip()]


# Values read off the recordings (generate_stream.sse, final event's meta_info).
EXPECTED = {
    ALIGNED: dict(rid="bcdb55a72693429b9e1dca048bbe305b", events=17, first_tokens=1,
                  server_e2e_s=0.08567786200001137,
                  spec=SpecMeta(verify_ct=16, correct_drafts=16, proposed_drafts=48, histogram=[0, 16],
                                accept_length=2.0, accept_rate=1 / 3)),
    BASELINE: dict(rid="fee04d8da052490097d45e7931a41b6c", events=32, first_tokens=1,
                   server_e2e_s=0.28499027999998816, spec=None),
}


def check_generate(res: GenerateResult, run: str) -> None:
    exp = EXPECTED[run]
    assert res.ok and res.error is None
    assert res.rid == exp["rid"]
    assert (res.prompt_tokens, res.completion_tokens, res.events) == (17, 32, exp["events"])
    assert res.finish_reason == "length"
    assert res.server_e2e_s == exp["server_e2e_s"]
    assert res.spec == exp["spec"]
    assert len(res.itl_s) == 32 - exp["first_tokens"]
    final = json.loads(sse_events(golden(run, "generate_stream.sse"))[-2][6:])
    assert res.text == final["text"]


def feed_parser(parser_cls, chunks: list[bytes], t0: float = 100.0):
    timing = Timing(t0, None)
    parser = parser_cls(timing)
    for i, chunk in enumerate(chunks):
        parser.feed(chunk, t0 + 0.001 * (i + 1))
    parser.feed(b"\n\n", t0 + 1.0)
    parser.finish()
    return timing, parser


class ChunkStream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):
        for c in self.chunks:
            yield c


def mock_client(chunks: list[bytes], status: int = 200, **kw) -> SGLangClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, stream=ChunkStream(chunks), headers={"content-type": "text/event-stream"})

    return SGLangClient("http://sglang.test", transport=httpx.MockTransport(handler), **kw)


# ----------------------------------------------------------------------------- unit level


@pytest.mark.parametrize("run", [ALIGNED, BASELINE])
async def test_golden_generate_stream_replay(run):
    async with mock_client(sse_events(golden(run, "generate_stream.sse"))) as c:
        res = await c.generate_stream("The quick brown fox", {"temperature": 0, "max_new_tokens": 32})
    check_generate(res, run)
    assert res.ttft_s is not None and res.ttft_s >= 0 and res.e2e_s >= res.ttft_s
    assert res.tpot_s == pytest.approx((res.e2e_s - res.ttft_s) / 31)


async def test_one_byte_chunks_through_the_client():
    data = golden(ALIGNED, "generate_stream.sse")
    async with mock_client([data[i:i + 1] for i in range(len(data))]) as c:
        res = await c.generate_stream("x", {"max_new_tokens": 32})
    check_generate(res, ALIGNED)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), run=st.sampled_from([ALIGNED, BASELINE]), crlf=st.booleans())
def test_arbitrary_chunk_boundaries(data, run, crlf):
    raw = golden(run, "generate_stream.sse")
    if crlf:  # the SSE spec allows CRLF; SGLang sends LF
        raw = raw.replace(b"\n", b"\r\n")
    cuts = sorted(data.draw(st.sets(st.integers(1, len(raw) - 1), max_size=60)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    timing, parser = feed_parser(GenerateStream, chunks)
    _, ref = feed_parser(GenerateStream, sse_events(golden(run, "generate_stream.sse")))
    assert (timing.ct, timing.events, len(timing.itl)) == (32, EXPECTED[run]["events"], 31)
    assert parser.done and parser.error is None and parser.final is not None
    assert (parser.rid, parser.prompt_tokens, parser.spec, parser.text) == (ref.rid, 17, ref.spec, ref.text)


def test_itl_spreads_each_gap_over_its_tokens():
    events = [
        b'data: {"text":"a","meta_info":{"finish_reason":null,"completion_tokens":2}}\n\n',
        b'data: {"text":"ab","meta_info":{"finish_reason":null,"completion_tokens":2}}\n\n',  # no new token
        b'data: {"text":"abc","meta_info":{"finish_reason":null,"completion_tokens":5}}\n\n',
        b'data: {"text":"abcd","meta_info":{"id":"r1","finish_reason":{"type":"stop","matched":2},'
        b'"prompt_tokens":3,"completion_tokens":6,"e2e_latency":0.5}}\n\ndata: [DONE]\n\n',
    ]
    timing = Timing(10.0, None)
    p = GenerateStream(timing)
    for now, ev in zip([10.1, 10.2, 10.4, 10.5], events, strict=True):
        p.feed(ev, now)
    p.finish()
    assert timing.t_first == 10.1  # TTFT: first event with tokens (it carried 2)
    assert timing.itl == pytest.approx([0.1, 0.1, 0.1, 0.1])  # 0.3 s over 3 tokens, then 0.1 s for 1
    assert (timing.ct, timing.events, p.finish_reason, p.rid, p.spec, p.text) == (6, 4, "stop", "r1", None, "abcd")
    assert p.server_e2e_s == 0.5 and p.final is not None


def test_count_is_not_fooled_by_text():
    text = 'say "completion_tokens":999 and \\"finish_reason\\":null'
    ev1 = b"data: " + orjson.dumps({"text": text, "meta_info": {"finish_reason": None, "completion_tokens": 3}})
    # meta_info before text, extra spaces, "data:" without a space: the slow paths still count right
    ev2 = b'data:{"meta_info": {"finish_reason": {"type": "length"}, "completion_tokens": 7}, "text": "x"}'
    timing, p = feed_parser(GenerateStream, [ev1 + b"\n\n", b": a comment\n\n", ev2 + b"\n\n", b"data: [DONE]\n\n"])
    assert (timing.ct, timing.events, p.finish_reason, p.error) == (7, 2, "length", None)


def test_multiline_data_field():
    body = b'data: {"meta_info": {"finish_reason": {"type": "length"},\ndata:  "completion_tokens": 4}}\n\n'
    timing, p = feed_parser(GenerateStream, [body, b"data: [DONE]\n\n"])
    assert timing.ct == 4 and p.final is not None


async def test_mid_stream_error_event():
    error = (b'data: {"error":{"message":"The scheduler crashed","type":"invalid_request_error","code":400,'
             b'"retryable":false}}\n\n')
    events = [*sse_events(golden(ALIGNED, "generate_stream.sse"))[:3], error, b"data: [DONE]\n\n"]
    async with mock_client(events) as c:
        res = await c.generate_stream("x", {})
    assert not res.ok and res.error == "The scheduler crashed"
    assert res.completion_tokens == 5 and res.events == 4


async def test_stream_cut_before_final_event():
    async with mock_client(sse_events(golden(ALIGNED, "generate_stream.sse"))[:5]) as c:
        res = await c.generate_stream("x", {})
    assert not res.ok and res.error == "stream ended before the final event"
    assert res.completion_tokens == 9 and res.rid == EXPECTED[ALIGNED]["rid"] and res.prompt_tokens == 17


async def test_abort_finish_reason():
    ev = b'data: {"text":"","meta_info":{"id":"r","finish_reason":{"type":"abort","message":"queue full"},' \
         b'"prompt_tokens":1,"completion_tokens":0}}\n\ndata: [DONE]\n\n'
    async with mock_client([ev]) as c:
        res = await c.generate_stream("x", {})
    assert not res.ok and res.error == "aborted: queue full" and res.finish_reason == "abort"
    assert res.ttft_s is None and res.tpot_s is None


async def test_http_error_status():
    body = b'{"error":"unknown field `foo`, expected one of `max_new_tokens`, `temperature`"}'
    async with mock_client([body], status=400) as c:
        res = await c.generate_stream("x", {"foo": 1})
    assert not res.ok and res.error.startswith("HTTP 400: unknown field `foo`")
    assert res.completion_tokens == 0 and res.ttft_s is None


@pytest.mark.parametrize("run", [ALIGNED, BASELINE])
async def test_golden_chat_stream_replay(run):
    async with mock_client(sse_events(golden(run, "chat_stream.sse"))) as c:
        res = await c.chat_stream([{"role": "user", "content": "Name three colours."}], max_tokens=32)
    assert res.ok and res.finish_reason == "length"
    assert (res.prompt_tokens, res.completion_tokens) == (25, 32)
    # No per-chunk usage in the recording: the 32 tokens are spread over the K content
    # chunks (the first carries round(32/K)), one ITL sample per later token.
    deltas = [json.loads(e[6:]) for e in sse_events(golden(run, "chat_stream.sse"))[:-1]]
    contents = [c for d in deltas if d["choices"] and (c := d["choices"][0]["delta"].get("content"))]
    k = len(contents)
    assert k == {ALIGNED: 17, BASELINE: 32}[run]
    assert len(res.itl_s) == 32 - round(32 / k)
    assert res.text == "".join(contents)
    assert res.rid == deltas[0]["id"] and res.spec is None


def test_chat_continuous_usage_and_spec_details():
    details = {"spec_verify_ct": 10, "spec_num_correct_drafts": 12, "spec_num_proposed_drafts": 30,
               "spec_correct_drafts_histogram": [2, 4, 4], "spec_accept_length": 2.2, "spec_accept_rate": 0.4}
    chunks = [
        {"id": "c1", "choices": [{"delta": {"role": "assistant", "content": ""}}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 0}},
        {"id": "c1", "choices": [{"delta": {"content": "ab"}}], "usage": {"prompt_tokens": 5, "completion_tokens": 3}},
        {"id": "c1", "choices": [{"delta": {"content": "cd"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 5, "completion_tokens": 7}},
        {"id": "c1", "choices": [], "sglext": {"spec_tokens_details": details}},
        {"id": "c1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}},
    ]
    body = [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]
    timing, p = feed_parser(ChatStream, body)
    assert (timing.ct, p.completion_tokens, p.prompt_tokens, p.finish_reason, p.text) == (7, 7, 5, "stop", "abcd")
    assert timing.itl == pytest.approx([0.00025] * 4)  # 1 ms gap over 4 tokens
    assert p.spec == SpecMeta(10, 12, 30, [2, 4, 4], 2.2, 0.4) and p.final is not None


def test_chat_without_per_chunk_usage_spreads_tokens_over_chunks():
    chunks = [{"id": "c", "choices": [{"delta": {"content": c}}]} for c in ("ab", "cd", "ef")]
    chunks.append({"id": "c", "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 7}})
    timing = Timing(0.0, None)
    p = ChatStream(timing)
    for now, c in zip([1.0, 2.0, 4.0, 4.5], chunks, strict=True):
        p.feed(b"data: " + orjson.dumps(c) + b"\n\n", now)
    p.finish()
    # 7 tokens over 3 chunks: 2, 3, 2 (round(7i/3)); gaps 1 s over 3 tokens, 2 s over 2.
    assert timing.itl == pytest.approx([1 / 3] * 3 + [1.0] * 2)
    assert (timing.ct, timing.t_first, p.completion_tokens, p.text) == (7, 1.0, 7, "abcdef")


# ------------------------------------------------------------------------- records, spec keys


def test_spec_meta_versions():
    meta = json.loads(golden(ALIGNED, "generate_nonstream.json"))["response"]["meta_info"]
    assert SpecMeta.from_meta_info(meta) == SpecMeta(24, 24, 72, [0, 24], 2.0, 1 / 3)
    v0510 = {"spec_verify_ct": 5, "spec_accept_token_num": 6, "spec_draft_token_num": 15,
             "spec_accept_histogram": [1, 2, 2], "spec_accept_length": 2.2, "spec_accept_rate": 0.4}
    assert SpecMeta.from_meta_info(v0510) == SpecMeta(5, 6, 15, [1, 2, 2], 2.2, 0.4)
    v0523 = {"spec_verify_ct": 5, "spec_num_correct_drafts": 6, "spec_num_proposed_drafts": 15}
    assert SpecMeta.from_meta_info(v0523) == SpecMeta(5, 6, 15, None, None, None)
    assert SpecMeta.from_meta_info({"completion_tokens": 3}) is None
    base = json.loads(golden(BASELINE, "generate_nonstream.json"))["response"]["meta_info"]
    assert SpecMeta.from_meta_info(base) is None
    assert SPEC_META_KEYS["correct_drafts"][0] == "spec_num_correct_drafts"


async def test_to_json_round_trip():
    async with mock_client(sse_events(golden(ALIGNED, "generate_stream.sse"))) as c:
        res = await c.generate_stream("x", {})
    rec = res.to_json()
    assert json.loads(orjson.dumps(rec)) == rec
    assert [k for k, v in rec.items() if isinstance(v, dict)] == ["spec"]  # flat but for the spec block
    sp = rec["spec"]
    assert (sp["verify_ct"], sp["correct_drafts"], sp["proposed_drafts"]) == (16, 16, 48)
    assert sp["histogram"] == [0, 16] and rec["tpot_s"] == res.tpot_s and "text" not in rec
    assert rec["ts_done"] == rec["started_at"] + res.e2e_s and rec["ts_sent"] == rec["started_at"]
    back = GenerateResult.from_json(rec)
    assert back.spec == res.spec and back.itl_s == pytest.approx(res.itl_s, abs=1e-7)
    assert (back.rid, back.completion_tokens, back.ttft_s, back.ok) == (res.rid, 32, res.ttft_s, True)
    assert res.to_json(include_text=True)["text"] == res.text


# ----------------------------------------------------------------------------- end to end

API_KEY = "sk-test-SECRET-4242"


def build_app(state: dict) -> Starlette:
    def authorized(request: Request) -> Response | None:
        if state.get("key") and request.headers.get("authorization") != f"Bearer {state['key']}":
            return JSONResponse({"error": {"message": f"bad key: {request.headers.get('authorization')}"}}, 401)
        return None

    def hit(request: Request) -> None:
        state.setdefault("hits", []).append(request.url.path)
        state.setdefault("ports", []).append(request.client.port)

    async def health(request):
        hit(request)
        await asyncio.sleep(state.get("health_delay", 0.0))
        state["health_answers"] = state.get("health_answers", 0) + 1
        return Response(status_code=200 if state.get("ready") else 503)

    async def server_info(request):
        hit(request)
        return Response(status_code=404) if request.url.path == "/server_info" else \
            Response(golden(ALIGNED, "server_info.json"), media_type="application/json")

    async def model_info(request):
        hit(request)
        return Response(golden(ALIGNED, "model_info.json"), media_type="application/json")

    async def metrics(request):
        hit(request)
        if not state.get("metrics"):
            return Response(status_code=404)
        return PlainTextResponse(golden(ALIGNED, "metrics_after.prom").decode())

    async def flush(request):
        hit(request)
        if state.get("busy"):
            return PlainTextResponse("Cache not flushed: 1 running request", status_code=400)
        return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details.")

    async def replay(events: list[bytes], first_delay: float, gap: float, stall: float = 0.0):
        await asyncio.sleep(first_delay)
        for i, ev in enumerate(events):
            if i:
                await asyncio.sleep(gap)
            if stall and i == 3:
                await asyncio.sleep(stall)
            yield ev

    async def generate(request):
        hit(request)
        if (denied := authorized(request)) is not None:
            return denied
        body = await request.json()
        state.setdefault("bodies", []).append(body)
        if not body.get("stream"):
            return JSONResponse(json.loads(golden(ALIGNED, "generate_nonstream.json"))["response"])
        events = sse_events(golden(state.get("run", ALIGNED), "generate_stream.sse"))
        return StreamingResponse(replay(events, 0.03, 0.002, state.get("stall", 0.0)),
                                 media_type="text/event-stream")

    async def chat(request):
        hit(request)
        state.setdefault("bodies", []).append(await request.json())
        return StreamingResponse(replay(sse_events(golden(ALIGNED, "chat_stream.sse")), 0.0, 0.001),
                                 media_type="text/event-stream")

    return Starlette(routes=[
        Route("/health", health), Route("/server_info", server_info), Route("/get_server_info", server_info),
        Route("/model_info", model_info), Route("/metrics", metrics), Route("/flush_cache", flush, methods=["POST"]),
        Route("/generate", generate, methods=["POST"]), Route("/v1/chat/completions", chat, methods=["POST"]),
    ])


@pytest.fixture
async def server():
    golden(ALIGNED, "generate_stream.sse")  # skip early without the recordings
    state: dict = {}
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(build_app(state), host="127.0.0.1", port=port, log_level="warning",
                                        lifespan="off"))
    task = asyncio.create_task(srv.serve())
    while not srv.started:
        assert not task.done(), "uvicorn failed to start"
        await asyncio.sleep(0.01)
    yield state, f"http://127.0.0.1:{port}"
    srv.should_exit = True
    await task


async def test_stream_end_to_end_and_connection_reuse(server):
    state, url = server
    seen: list[int] = []
    async with SGLangClient(url) as c:
        results = [await c.generate_stream("x", {"max_new_tokens": 32}, rid=f"r{i}",
                                           on_progress=seen.append) for i in range(3)]
    for i, res in enumerate(results):
        assert res.ok and res.completion_tokens == 32 and res.events == 17 and res.rid == f"r{i}"
        assert res.spec == EXPECTED[ALIGNED]["spec"]
        assert res.ttft_s >= 0.03  # the replay waits 30 ms before the first event
        assert res.ttft_s + sum(res.itl_s) <= res.e2e_s + 1e-9
        assert all(x >= 0 for x in res.itl_s) and len(res.itl_s) == 31
    assert seen[:3] == [1, 3, 5] and seen.count(32) == 3 and len(seen) == 51
    assert state["bodies"][0] == {"text": "x", "sampling_params": {"max_new_tokens": 32}, "stream": True, "rid": "r0"}
    assert len(set(state["ports"])) == 1  # one keep-alive connection served all three streams


async def test_concurrent_streams(server):
    state, url = server
    state["run"] = BASELINE
    async with SGLangClient(url) as c:
        results = await asyncio.gather(*(c.generate_stream("x", {}) for _ in range(8)))
    assert [r.completion_tokens for r in results] == [32] * 8 and all(r.ok and r.spec is None for r in results)


async def test_small_endpoints(server, caplog):
    state, url = server
    async with SGLangClient(url) as c:
        assert await c.health() is False  # 503 while starting
        state["ready"] = True
        assert await c.health() is True
        info = await c.server_info()
        assert info["version"] == "0.5.14" and info["speculative_num_draft_tokens"] == 4
        await c.server_info()
        assert state["hits"].count("/server_info") == 1  # the fallback is remembered
        assert state["hits"].count("/get_server_info") == 2
        assert (await c.model_info())["architectures"] == ["LlamaForCausalLM"]
        assert (await c.get_json("/model_info"))["model_type"] == "llama"
        with pytest.raises(SGLangHTTPError) as ei:
            await c.get_json("/nope")
        assert ei.value.status == 404 and ei.value.path == "/nope"
        assert await c.metrics_text() is None  # no --enable-metrics
        state["metrics"] = True
        assert "sglang:spec_verify_calls_total" in await c.metrics_text()
        state["busy"] = True
        with caplog.at_level(logging.WARNING, logger="specdash.sglang.client"):
            assert await c.flush_cache() is False
        assert "Cache not flushed: 1 running request" in caplog.text
        state["busy"] = False
        assert await c.flush_cache() is True
        out = await c.generate("x", {"max_new_tokens": 48})
        assert out["meta_info"]["completion_tokens"] == 48 and out["meta_info"]["spec_verify_ct"] == 24


async def test_chat_end_to_end(server):
    state, url = server
    async with SGLangClient(url) as c:
        res = await c.chat_stream([{"role": "user", "content": "hi"}], max_tokens=32, model="m", ignore_eos=True)
        plain = await c.chat_stream([{"role": "user", "content": "hi"}], max_tokens=8, temperature=0.5)
    assert res.ok and res.completion_tokens == 32 and plain.ok
    body = state["bodies"][0]
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["return_spec_tokens_details"] is True and body["model"] == "m" and body["max_tokens"] == 32
    assert body["ignore_eos"] is True and body["temperature"] == 0.0
    assert "model" not in state["bodies"][1] and "ignore_eos" not in state["bodies"][1]


async def test_read_timeout_is_a_failed_result(server):
    state, url = server
    state["stall"] = 2.0
    async with SGLangClient(url, timeout=0.3) as c:
        res = await c.generate_stream("x", {})
    assert not res.ok and res.error.startswith("ReadTimeout") and res.completion_tokens == 5


async def test_short_timeout_after_a_long_one_on_the_same_connection(server):
    state, url = server
    state["ready"] = True
    async with SGLangClient(url, timeout=600) as c:
        assert (await c.generate_stream("x", {})).ok  # arms the connection's timer for 600 s
        state["health_delay"] = 1.5
        # the client gave up at its 0.3 s, before the server answered (1.5 s later, 200: True had it waited);
        # server and client share this event loop, so the earlier timer fires first however loaded the machine
        # (how long the poll took, ≈ 0.3 s: benchmarks/bounded_waits.py)
        assert await c.health(timeout=0.3) is False
        assert state.get("health_answers", 0) == 0
    assert len(set(state["ports"])) == 1  # the health poll reused the stream's connection


async def test_api_key_sent_and_never_leaked(server, caplog):
    state, url = server
    state["key"] = API_KEY
    caplog.set_level(logging.DEBUG)
    async with SGLangClient(url, api_key=API_KEY) as c:
        assert API_KEY not in repr(c) and "***" in repr(c)
        assert (await c.generate_stream("x", {})).ok
    state["key"] = "another-key"  # the server now rejects ours and echoes it back in its error
    async with SGLangClient(url, api_key=API_KEY) as c:
        res = await c.generate_stream("x", {})
        assert not res.ok and res.error.startswith("HTTP 401") and "***" in res.error
        with pytest.raises(SGLangHTTPError) as ei:
            await c.generate("x", {})
    for text in (res.error, str(ei.value), ei.value.message, repr(res), json.dumps(res.to_json()), caplog.text):
        assert API_KEY not in text
    async with SGLangClient(f"http://127.0.0.1:{free_port()}", api_key=API_KEY, connect_timeout=2) as c:
        assert await c.health() is False
        with pytest.raises(SGLangError) as ei:
            await c.server_info()
        res = await c.generate_stream("x", {})
    assert not res.ok and res.error.startswith("ConnectError")
    assert API_KEY not in str(ei.value) and API_KEY not in res.error and API_KEY not in caplog.text


async def test_stock_transport_gives_the_same_result(server):
    _, url = server
    transport = httpx.AsyncHTTPTransport()
    async with SGLangClient(url, transport=transport) as c:
        res = await c.generate_stream("x", {})
    check_generate(res, ALIGNED)
