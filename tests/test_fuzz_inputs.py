"""Fuzzing the readers a user's files and a server's answers reach (issue 13, "zero tracebacks"): every input
either loads or raises the reader's own error — ProfileError for profiles and suites (naming the file),
MetricsFormatError for ``/metrics`` text — and ``/server_info`` bodies of any JSON shape are made safe
(:func:`specdash.sglang.client.checked_server_info`).  Profiles and suites are generated around the real
schema's keys (with wrong types, unknown keys, odd strings and nesting) so the validators, not only the TOML
parser, are exercised; draft directories get any config.json (any JSON, or bytes) and a cut, re-headed or random
weights file, and the doctor must report, not raise.  Inputs tried per run: the ``max_examples`` below (1,650 in
all; the draft directories passed 2,000 once, where a ``null`` config.json had crashed the reader).
"""

from __future__ import annotations

import string

import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdash.profile import ProfileError, load_profile, load_suite
from specdash.sglang.client import INVALID_FIELDS_KEY, checked_server_info
from specdash.sglang.metrics import MetricsFormatError, parse_metrics


def fuzz(n: int):
    """``n`` examples, no deadline (a shared 2-core CI machine), tmp_path reused across examples (each
    example writes its own file over the last one)."""
    return settings(max_examples=n, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

text = st.text(alphabet=string.printable + "é✓\u200b", max_size=40)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                   text, st.lists(text, max_size=3))
#: values TOML can carry (no None), nested a little
toml_value = st.recursive(st.one_of(st.booleans(), st.integers(-10**12, 10**12),
                                    st.floats(allow_nan=False, allow_infinity=False), text),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(text.filter(bool), inner, max_size=3)),
                          max_leaves=6)

SERVER_KEYS = ["launcher", "model_path", "tp_size", "mem_fraction_static", "host", "port", "context_length",
               "enable_metrics", "api_key", "python", "sglang_version", "extra_args", "nnodes", "dist_init_addr"]
SPEC_KEYS = ["algorithm", "draft_model_path", "num_steps", "eagle_topk", "num_draft_tokens", "extra_args"]
SUITE_KEYS = ["name", "max_tokens", "temperature", "repeats", "warmup", "concurrency", "ignore_eos", "api"]


def _section(keys):
    good = st.fixed_dictionaries({}, optional={k: toml_value for k in keys})
    return st.one_of(good, st.dictionaries(text.filter(bool), toml_value, max_size=3), toml_value)


#: a profile that is valid but for the generated values: the simulator launcher, a model path, then any of
#: the schema's keys with any value (so the field validators and the launch builder are reached)
near_valid_profile = st.fixed_dictionaries(
    {"name": st.text(alphabet=string.ascii_letters + "-_", min_size=1, max_size=12),
     "server": st.fixed_dictionaries({"launcher": st.just("sim"), "model_path": st.just("sim:llama-3.1-8b")},
                                     optional={k: toml_value for k in SERVER_KEYS[2:]})},
    optional={"speculative": st.fixed_dictionaries(
        {"algorithm": st.sampled_from(["EAGLE3", "EAGLE", "NEXTN", "STANDALONE", "eagle3", "BOGUS"])},
        optional={k: toml_value for k in SPEC_KEYS[1:]}),
        "env": st.dictionaries(text, toml_value, max_size=3)})
profile_doc = st.fixed_dictionaries(
    {"name": st.one_of(text, toml_value)},
    optional={"server": _section(SERVER_KEYS), "speculative": _section(SPEC_KEYS),
              "env": st.dictionaries(text, toml_value, max_size=3), "sim": _section(["scenario", "time_scale", "seed"]),
              "nodes": st.lists(_section(["host", "node_rank", "env", "gpus"]), max_size=3),
              "testbed": toml_value, "extra": toml_value})
suite_doc = st.fixed_dictionaries(
    {"suite": _section(SUITE_KEYS)},
    optional={"prompts": st.one_of(st.lists(_section(["text", "category"]), max_size=3), toml_value)})


def _write(tmp_path, name: str, doc) -> str:
    p = tmp_path / name
    p.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return str(p)


@fuzz(300)
@given(doc=st.one_of(profile_doc, near_valid_profile))
def test_any_profile_loads_or_says_which_file(tmp_path, doc):
    """Loads, then builds its launch (what ``profile show`` and every launch do), or raises ProfileError."""
    from specdash.profile import build_launch

    try:
        path = _write(tmp_path, "fuzz.toml", doc)
    except (TypeError, ValueError):  # tomlkit cannot write this shape (e.g. a mixed array): not an input
        return
    try:
        prof = load_profile(path)
        build_launch(prof.expanded())
    except ProfileError as exc:
        assert str(tmp_path) in str(exc) or "fuzz" in str(exc) or prof_named(exc), exc
        return
    assert prof.name  # a profile that loads has a name


def prof_named(exc: Exception) -> bool:
    """Launch-time errors name the setting rather than the file (the profile was read already)."""
    return any(w in str(exc) for w in ("steps", "topk", "draft", "server", "env", "speculative", "flag", "--"))


@fuzz(250)
@given(doc=suite_doc)
def test_any_suite_loads_or_says_which_file(tmp_path, doc):
    try:
        path = _write(tmp_path, "suite.toml", doc)
    except (TypeError, ValueError):
        return
    try:
        suite = load_suite(path)
    except ProfileError as exc:
        assert str(tmp_path) in str(exc) or "suite" in str(exc), exc
        return
    assert suite.prompts


@fuzz(150)
@given(raw=st.binary(max_size=200))
def test_any_bytes_as_a_profile_or_suite(tmp_path, raw):
    p = tmp_path / "raw.toml"
    p.write_bytes(raw)
    for loader in (load_profile, load_suite):
        try:
            loader(str(p))
        except ProfileError as exc:
            assert str(p) in str(exc), exc


@fuzz(250)
@given(body=st.text(max_size=300))
def test_any_metrics_text_parses_or_is_named(body):
    try:
        parse_metrics(body)
    except MetricsFormatError as exc:
        assert "/metrics is not Prometheus text exposition" in str(exc)


json_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(text, inner, max_size=4)), max_leaves=8)


@fuzz(200)
@given(body=st.one_of(json_value, st.fixed_dictionaries({}, optional={
    k: json_value for k in ("version", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                            "speculative_num_draft_tokens", "model_path", "internal_states", "simulated")})))
def test_any_server_info_is_made_safe(body):
    from specdash.launch import effective_from_server_info

    info = checked_server_info(body)
    assert isinstance(info, dict)
    eff = effective_from_server_info(info)  # what results copy from it: SGLang's types or None
    assert eff["speculative_algorithm"] is None or isinstance(eff["speculative_algorithm"], str)
    for k in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"):
        assert eff[k] is None or (isinstance(eff[k], int) and not isinstance(eff[k], bool))
    if INVALID_FIELDS_KEY in info:
        assert all(isinstance(x, str) for x in info[INVALID_FIELDS_KEY])


# --- draft directories ------------------------------------------------------------------------------------
#: config.json keys a draft's reader looks at, with any JSON value
DRAFT_CFG_KEYS = ["architectures", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                  "vocab_size", "draft_vocab_size", "max_position_embeddings", "torch_dtype", "eagle_config",
                  "num_hidden_layers", "tie_word_embeddings", "rope_theta", "target_hidden_size"]
json_value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**12),
                                    st.floats(allow_nan=False, allow_infinity=False), text),
                          lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                  st.dictionaries(text, inner, max_size=3)), max_leaves=6)
draft_cfg = st.one_of(st.fixed_dictionaries({}, optional={k: json_value for k in DRAFT_CFG_KEYS}), json_value)


def _safetensors_bytes(data: st.DataObject, good: bytes) -> bytes:
    """The draft's real weights file, cut, with a header of another length or shape, or any bytes."""
    import json
    import struct

    how = data.draw(st.sampled_from(["keep", "truncate", "header-len", "header-json", "bytes"]))
    if how == "keep":
        return good
    if how == "truncate":
        return good[:data.draw(st.integers(0, len(good) - 1))]
    if how == "header-len":
        return struct.pack("<Q", data.draw(st.integers(0, 2**64 - 1))) + good[8:]
    if how == "header-json":
        hdr = json.dumps(data.draw(st.dictionaries(text, json_value, max_size=4))).encode()
        return struct.pack("<Q", len(hdr)) + hdr + data.draw(st.binary(max_size=64))
    return data.draw(st.binary(max_size=256))


@fuzz(200)
@given(cfg=draft_cfg, data=st.data(), raw_cfg=st.one_of(st.none(), st.binary(max_size=64)))
def test_any_draft_directory_gets_findings_not_a_traceback(tmp_path, cfg, data, raw_cfg):
    """``specdash doctor`` on a draft whose config.json and weights file are anything: the report comes
    back (CHECKPOINT / WEIGHT_* findings name the file), no exception leaves ``run_doctor``."""
    import json

    from specdash.checkpoint.tiny import tiny_draft, tiny_target
    from specdash.eagle3.doctor import run_doctor
    from specdash.profile import parse_profile

    target = tmp_path / "target"
    if not (target / "config.json").exists():
        tiny_target(target)
        tiny_draft(tmp_path / "good")
    good = (tmp_path / "good" / "model.safetensors").read_bytes()
    d = tmp_path / "draft"
    d.mkdir(exist_ok=True)
    if raw_cfg is not None:
        (d / "config.json").write_bytes(raw_cfg)
    else:
        (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (d / "model.safetensors").write_bytes(_safetensors_bytes(data, good))
    prof = parse_profile({"name": "fz", "server": {"model_path": str(target)},
                          "speculative": {"algorithm": "EAGLE3", "draft_model_path": str(d), "num_steps": 3,
                                          "eagle_topk": 1, "num_draft_tokens": 4}}, tmp_path / "fz.toml")
    rep = run_doctor(prof, sglang_version="0.5.14")
    assert rep.findings is not None
    text = rep.render()
    assert "Traceback" not in text


# --- what a server on loopback streams back -------------------------------------------------------------
class _Box:
    status = 200
    body = b""
    chunks = 1


def _stream_server():
    """A Starlette app on 127.0.0.1 answering every POST with ``_Box``'s status and body (in ``chunks`` parts)."""
    import socket
    import threading
    import time as _time

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def answer(req):
        await req.body()
        if _Box.status != 200:
            return Response(_Box.body, status_code=_Box.status)
        n = max(1, _Box.chunks)
        step = max(1, len(_Box.body) // n)

        async def gen():
            for i in range(0, len(_Box.body), step):
                yield _Box.body[i:i + step]
        return StreamingResponse(gen(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/generate", answer, methods=["POST"]),
                            Route("/v1/chat/completions", answer, methods=["POST"])])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical", lifespan="off"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = _time.monotonic() + 10
    while not server.started and _time.monotonic() < deadline:
        _time.sleep(0.02)
    return server, f"http://127.0.0.1:{port}"


_event = st.one_of(
    st.builds(lambda d: b"data: " + __import__("json").dumps(d).encode() + b"\n\n",
              st.fixed_dictionaries({}, optional={"text": json_value, "meta_info": st.one_of(
                  json_value, st.fixed_dictionaries({}, optional={
                      k: json_value for k in ("completion_tokens", "prompt_tokens", "e2e_latency", "finish_reason",
                                              "spec_verify_ct", "spec_accept_length", "id")})),
                  "choices": json_value, "usage": json_value, "error": json_value})),
    st.just(b"data: [DONE]\n\n"), st.binary(max_size=40), st.just(b"\n\n"), st.just(b": keep-alive\n\n"))


@fuzz(150)
@given(events=st.lists(_event, max_size=8), status=st.sampled_from([200, 200, 200, 400, 500, 503]),
       chunks=st.integers(1, 7), chat=st.booleans())
def test_any_stream_from_a_server_on_loopback_is_a_result(events, status, chunks, chat):
    """The streaming client never raises for what a server sends (docstring of ``generate_stream``):
    any SSE events, bytes cut anywhere, an error status; the result is ok with counts ≥ 0, or not ok
    with an error text."""
    import asyncio

    from specdash.sglang.client import SGLangClient

    global _SERVER
    if "_SERVER" not in globals():
        _SERVER = _stream_server()
    _Box.status, _Box.body, _Box.chunks = status, b"".join(events), chunks

    async def go():
        async with SGLangClient(_SERVER[1], timeout=10) as c:
            if chat:
                return await c.chat_stream([{"role": "user", "content": "x"}], 8)
            return await c.generate_stream("x", {"max_new_tokens": 8})

    r = asyncio.run(go())
    assert (r.ok and r.error is None and r.completion_tokens >= 0) or (not r.ok and isinstance(r.error, str) and r.error)
    if status != 200:
        assert not r.ok and r.error.startswith(f"HTTP {status}")


_jsonl_line = st.one_of(
    st.builds(lambda d: __import__("json").dumps(d), st.fixed_dictionaries({}, optional={
        k: json_value for k in ("text", "prompt", "messages", "category", "id", "max_tokens")})),
    st.builds(lambda d: __import__("json").dumps(d), json_value), text)


@fuzz(150)
@given(lines=st.lists(_jsonl_line, max_size=5), raw=st.one_of(st.none(), st.binary(max_size=120)))
def test_any_prompts_file_loads_or_says_which_file(tmp_path, lines, raw):
    """A suite's ``prompts_file`` (JSONL) of any lines or bytes: the suite loads, or the error names the file."""
    pf = tmp_path / "prompts.jsonl"
    if raw is not None:
        pf.write_bytes(raw)
    else:
        pf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sp = tmp_path / "suite.toml"
    sp.write_text('[suite]\nname = "pf"\nprompts_file = "prompts.jsonl"\n', encoding="utf-8")
    try:
        suite = load_suite(str(sp))
    except ProfileError as exc:
        assert "prompts.jsonl" in str(exc) or str(sp) in str(exc), exc
        return
    assert suite.prompts and all(p.text for p in suite.prompts)
