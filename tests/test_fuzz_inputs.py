"""Fuzzing the readers a user's files and a server's answers reach (issue 13, "zero tracebacks"): every input
either loads or raises the reader's own error — ProfileError for profiles and suites (naming the file),
MetricsFormatError for ``/metrics`` text — and ``/server_info`` bodies of any JSON shape are made safe
(:func:`specdash.sglang.client.checked_server_info`).  Profiles and suites are generated around the real
schema's keys (with wrong types, unknown keys, odd strings and nesting) so the validators, not only the TOML
parser, are exercised; draft directories get any config.json (any JSON, or bytes) and a cut, re-headed or random
weights file, and the doctor must report, not raise.  Issue 23 adds every other reader: datasets, run
directories (manifest, summary, requests.jsonl of any JSON, deep included, through ``report``, ``compare`` and
the resume readers), resume checkpoints (damaged any way: the figures must equal a full read), GPU exporter
bodies, chat templates (any template text and tokenizer_config.json, rendered bounded), pasted commands
(``profile import``), ``--sweep`` specs and the bounded JSON reader.  Inputs tried per run: the ``max_examples``
below, counted in :data:`TRIED` and printed at the end of the run (``fuzz: N inputs tried (…)``, 3,074 in all
here); 0 tracebacks, 0 internal errors.
"""

from __future__ import annotations

import string
from collections import Counter

import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdash.profile import ProfileError, load_profile, load_suite
from specdash.sglang.client import INVALID_FIELDS_KEY, checked_server_info
from specdash.sglang.metrics import MetricsFormatError, parse_metrics

#: Inputs tried per reader in this session (printed at the end of the run by ``tests/conftest.py``).
TRIED: Counter = Counter()


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
    TRIED["profiles"] += 1
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
    TRIED["suites"] += 1
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
    TRIED["profile/suite bytes"] += 1
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
    TRIED["/metrics bodies"] += 1
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

    TRIED["/server_info bodies"] += 1

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
    TRIED["draft directories"] += 1
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

    TRIED["streams"] += 1
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
    TRIED["prompts files"] += 1
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


# --- issue 23: every other reader ---------------------------------------------------------------------
#: JSON of any shape, nested up to ~12 levels, with the odd deep one
deep_json = st.one_of(json_value, st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
                      st.integers(1, 3000).map(lambda n: '{"a":' * n + "1" + "}" * n))


def _dump(v) -> str:
    import json

    return v if isinstance(v, str) and v[:1] in "[{" else json.dumps(v)


@fuzz(200)
@given(rows=st.lists(st.one_of(deep_json, st.fixed_dictionaries({}, optional={
    k: json_value for k in ("prompt", "text", "messages", "conversations", "category", "id")})), max_size=5),
       raw=st.one_of(st.none(), st.binary(max_size=200)), suffix=st.sampled_from([".json", ".jsonl", ".txt"]),
       shape=st.sampled_from(["lines", "list"]))
def test_any_dataset_file_loads_or_names_the_file(tmp_path, rows, raw, suffix, shape):
    """``--dataset FILE`` of any bytes, any JSON (deep included) as a list or as lines."""
    from specdash.profile.datasets import load_dataset_suite

    TRIED["datasets"] += 1
    f = tmp_path / f"ds{suffix}"
    if raw is not None:
        f.write_bytes(raw)
    elif shape == "list":
        f.write_text("[" + ",".join(_dump(r) for r in rows) + "]")
    else:
        f.write_text("\n".join(_dump(r) for r in rows) + "\n")
    try:
        suite, rec = load_dataset_suite(str(f), num_prompts=3)
    except ProfileError as exc:
        assert str(f) in str(exc) or "--num-prompts" in str(exc), exc
        return
    assert suite.prompts and rec["num_prompts"] == len(suite.prompts) <= 3


_RUN_KEYS = ["profile", "requests", "output_tokens", "output_tok_s", "duration_s", "accept_length", "accept_rate",
             "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "effective", "verification", "tiers", "by_category",
             "by_context", "concurrency", "request_rate", "simulated", "accept_histogram", "partial", "run_dir"]
_REC_KEYS = ["ok", "prompt_index", "repeat", "completion_tokens", "prompt_tokens", "ttft_s", "e2e_s", "itl_s",
             "spec", "ts_sent", "ts_done", "segment", "category", "rid", "error", "concurrency", "request_rate"]
record_doc = st.one_of(deep_json, st.fixed_dictionaries({}, optional={k: json_value for k in _REC_KEYS}),
                       st.fixed_dictionaries({"ok": st.just(True), "prompt_index": st.integers(0, 3),
                                              "repeat": st.integers(0, 2), "completion_tokens": st.integers(0, 64),
                                              "e2e_s": st.floats(0, 10), "ttft_s": st.floats(0, 1),
                                              "ts_sent": st.floats(0, 10), "ts_done": st.floats(10, 20)},
                                             optional={"spec": st.one_of(json_value, st.fixed_dictionaries({}, optional={
                                                 k: json_value for k in ("verify_ct", "correct_drafts",
                                                                         "proposed_drafts", "histogram")})),
                                                 "itl_s": st.lists(st.floats(0, 1), max_size=4)}))
run_doc = st.one_of(deep_json, st.fixed_dictionaries({}, optional={k: json_value for k in _RUN_KEYS}),
                    st.fixed_dictionaries({"profile": st.just("p"), "requests": st.integers(0, 9),
                                           "output_tokens": st.integers(0, 99)},
                                          optional={k: json_value for k in _RUN_KEYS[3:]}))


@fuzz(120)
@given(manifest=st.one_of(st.none(), deep_json, st.fixed_dictionaries({"profile": st.one_of(st.just("p"), json_value)},
                                                                      optional={k: json_value for k in (
                                                                          "suite", "repeats", "max_tokens", "concurrency",
                                                                          "request_rate", "dataset", "sweep")})),
       summary=st.one_of(st.none(), deep_json, st.fixed_dictionaries({"runs": st.one_of(
           st.lists(run_doc, max_size=3), json_value)})),
       records=st.lists(record_doc, max_size=6), raw_tail=st.binary(max_size=40))
def test_any_run_directory_is_read_or_refused(tmp_path, manifest, summary, records, raw_tail):
    """A run directory whose manifest.json, summary.json and requests.jsonl hold anything: ``report`` and
    ``compare`` render or refuse it (their own errors), ``--resume``'s readers and the statistics fold it."""
    import json
    import shutil

    from specdash.bench.html import render_report
    from specdash.bench.rundir import RunDir
    from specdash.bench.sources import ReportError, load_source
    from specdash.commands.bench_args import read_run_manifest
    from specdash.commands.compare import compare_dirs
    from specdash.commands.errors import UsageError
    from specdash.commands.report import foreign_values

    TRIED["run directories"] += 1
    d = tmp_path / "run"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    if manifest is not None:
        (d / "manifest.json").write_text(_dump(manifest))
    if summary is not None:
        (d / "summary.json").write_text(_dump(summary))
    (d / "requests.jsonl").write_bytes("".join(_dump(r) + "\n" for r in records).encode() + raw_tail)
    m, problem = read_run_manifest(d)
    assert (m is None) != (problem is None)
    stats, seg = RunDir(d).load_stats()
    stats.summary()
    assert seg >= 1 or stats.count == 0
    try:
        src = load_source(d)
        with foreign_values([d]):
            render_report([src])
            if src.kind == "run" and src.records:
                compare_dirs(str(d), str(d))
    except (ReportError, UsageError) as exc:
        assert str(d) in str(exc) or "run" in str(exc), exc
    json.dumps(stats.summary(), default=str)


@fuzz(80)
@given(how=st.sampled_from(["bytes", "flip", "truncate", "meta"]), data=st.data())
def test_any_checkpoint_never_changes_a_figure(tmp_path, how, data):
    """``requests.stats.npz`` damaged any way: the resumed figures equal a full read of the records."""
    import json

    import numpy as np

    from specdash.bench.rundir import STATS_CHECKPOINT, RunDir
    from specdash.collect.stream import RunStats
    from tests.test_bookkeeping import synth

    TRIED["checkpoints"] += 1
    d = tmp_path / "ck"
    if not (d / STATS_CHECKPOINT).exists():
        rd = RunDir(d)
        for r in synth(40, seed=3):
            rd.append_request(r)
        rd.close()
        (tmp_path / "good.npz").write_bytes((d / STATS_CHECKPOINT).read_bytes())
    good = (tmp_path / "good.npz").read_bytes()
    ck = d / STATS_CHECKPOINT
    if how == "bytes":
        ck.write_bytes(data.draw(st.binary(max_size=300)))
    elif how == "flip":
        i = data.draw(st.integers(0, len(good) - 1))
        ck.write_bytes(good[:i] + bytes([good[i] ^ data.draw(st.integers(1, 255))]) + good[i + 1:])
    elif how == "truncate":
        ck.write_bytes(good[:data.draw(st.integers(0, len(good) - 1))])
    else:
        ck.write_bytes(good)
        with np.load(ck) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop("meta").tobytes())
        meta["stats"][data.draw(st.sampled_from(sorted(k for k, v in meta["stats"].items()
                                                       if isinstance(v, int) and not isinstance(v, bool))))] += 1
        np.savez(ck, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
    stats, _ = RunDir(d).load_stats()
    full = RunStats(keep_records=False)
    full.fold(RunDir(d).iter_requests())
    assert json.dumps(stats.summary()) == json.dumps(full.summary())
    ck.write_bytes(good)


@fuzz(200)
@given(body=st.one_of(st.text(max_size=400), st.builds(
    lambda lines: "\n".join(lines), st.lists(st.one_of(
        st.sampled_from(["# HELP DCGM_FI_DEV_FB_USED x", "# TYPE DCGM_FI_DEV_FB_USED gauge",
                         "# TYPE gpu_memory_used_MiB gauge"]),
        st.builds(lambda name, lab, v: f"{name}{{{lab}}} {v}",
                  st.sampled_from(["DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL",
                                   "gpu_memory_used_MiB", "gpu_memory_total_MiB", "gpu_temperature_C"]),
                  st.sampled_from(['gpu="0"', 'gpu="x",Hostname="h"', 'index="0:1"', "", 'gpu="99999999999999999999"']),
                  st.sampled_from(["1", "NaN", "+Inf", "9223372036854775794", "-3", "1e400", "x"]))), max_size=8))))
def test_any_exporter_text_is_a_reading(body):
    """Exporter text of any shape → devices, or ExporterFormatError (a status), never another exception."""
    from specdash.collect.exporter import ExporterFormatError, parse_exporter_text

    TRIED["exporter bodies"] += 1
    try:
        kind, devices = parse_exporter_text(body, node="n")
    except ExporterFormatError:
        return
    assert kind in ("dcgm", "nvitop") and all(d.node for d in devices)


jinja_bits = st.sampled_from(["{{ messages[0].content }}", "{% for m in messages %}{{ m.role }}{% endfor %}",
                              "{{ bos_token }}", "{% if add_generation_prompt %}A:{% endif %}", "{{ raise_exception('no') }}",
                              "{{ 'x' * 99999999999 }}", "{% for i in range(99999) %}{% for j in range(9999) %}yy"
                              "{% endfor %}{% endfor %}", "{{ messages | tojson }}", "{% set x = 1 %}", "{{",
                              "{% endfor %}", "{{ ''.__class__.__mro__ }}", "{{ 9 ** 99999999 }}", "text"])


@fuzz(120)
@given(template=st.lists(jinja_bits, max_size=4).map("".join), cfg=st.one_of(st.none(), deep_json, st.fixed_dictionaries(
    {}, optional={"chat_template": st.one_of(json_value, st.lists(st.fixed_dictionaries(
        {"name": st.sampled_from(["default", "tool"]), "template": json_value}), max_size=2)),
        "bos_token": json_value, "add_bos_token": json_value})), where=st.sampled_from(["jinja", "config"]))
def test_any_chat_template_renders_or_is_the_readers_error(tmp_path, template, cfg, where):
    """A tokenizer directory with any template text and any tokenizer_config.json: the prompts render
    (bounded) or ProfileError says why — the sandbox refuses what would escape or balloon."""
    import json

    from specdash.profile import parse_profile, parse_suite
    from specdash.profile.chat import apply_prompt_format

    TRIED["chat templates"] += 1
    model = tmp_path / "m"
    model.mkdir(exist_ok=True)
    for f in model.iterdir():
        f.unlink()
    if where == "jinja":
        (model / "chat_template.jinja").write_text(template)
    if cfg is not None:
        body = _dump(cfg) if not isinstance(cfg, dict) else json.dumps(
            cfg if where == "jinja" else {**cfg, "chat_template": template})
        (model / "tokenizer_config.json").write_text(body)
    prof = parse_profile({"name": "t", "server": {"model_path": str(model)}})
    suite = parse_suite({"suite": {"name": "s"}, "prompts": [{"text": "hello"}]})
    try:
        out, rec = apply_prompt_format(prof, suite, engine="jinja2")
    except ProfileError:
        return
    assert all(len(p.text) <= 16 << 20 for p in out.prompts) and rec["format"] in ("raw", "chat-template (client)")


shell_word = st.one_of(st.sampled_from(["--model-path", "--tp-size", "--port", "--speculative-algorithm", "EAGLE3",
                                        "--speculative-num-steps", "3", "/models/My Model", '"/m y"', "'q'", "$(pwd)",
                                        "`id`", "${HOME}/m", "NCCL_X=1", "&&", ";", "|", "\\\n", "#", "--api-key",
                                        "sk-1", "--cuda-graph-bs-decode", "1", "2", "--context-length", "32k",
                                        "--mem-fraction-static", "1e400", "-9999999999999999999999"]),
                       text.filter(lambda t: "\x00" not in t))


@fuzz(250)
@given(words=st.lists(shell_word, max_size=10), prefix=st.sampled_from(
    ["python -m sglang.launch_server --model-path /m", "sglang serve --model-path /m", "", "python3 -m sglang.launch_server"]))
def test_any_pasted_command_imports_or_is_refused(words, prefix):
    """``profile import`` of any shell-ish text: a profile (never a Python repr in a field) or ProfileError."""
    from specdash.commands.profile import profile_from_command

    TRIED["pasted commands"] += 1
    line = " ".join([prefix, *words])
    try:
        prof, _ = profile_from_command(line)
    except ProfileError:
        return
    for v in (prof.server.model_path, prof.server.host, *(prof.server.extra_args or [])):
        assert not (isinstance(v, str) and v.startswith("['")), v


@fuzz(250)
@given(spec=st.one_of(text, st.builds(lambda var, vals: f"{var}={','.join(vals)}",
                                      st.sampled_from(["concurrency", "request_rate", "request-rate", "x"]),
                                      st.lists(st.sampled_from(["1", "4", "1e9", "1e300", "inf", "nan", "-1", "0",
                                                                "100000", "10**23", "0.001", "2.5", "9" * 5000]),
                                               max_size=6))))
def test_any_sweep_spec_is_parsed_within_the_limits_or_refused(spec):
    from specdash.bench.points import MAX_SWEEP_POINTS, parse_sweep
    from specdash.bounded import MAX_CONCURRENCY, MAX_REQUEST_RATE, MIN_REQUEST_RATE

    TRIED["sweep specs"] += 1
    try:
        sw = parse_sweep(spec)
    except ValueError as exc:
        assert str(exc) and len(str(exc)) < 600
        return
    assert 2 <= len(sw.points) <= MAX_SWEEP_POINTS
    if sw.var == "concurrency":
        assert all(1 <= v <= MAX_CONCURRENCY for v in sw.points)
    else:
        assert all(MIN_REQUEST_RATE <= v <= MAX_REQUEST_RATE for v in sw.points)


@fuzz(200)
@given(data=st.one_of(st.binary(max_size=300), deep_json.map(lambda v: _dump(v).encode())))
def test_any_json_text_is_a_value_or_the_bounded_readers_error(data):
    from specdash.bounded import JSON_MAX_DEPTH, InputError, json_depth_error, loads_json

    TRIED["JSON texts"] += 1
    try:
        v = loads_json(data, what="x")
    except InputError as exc:
        assert str(exc).startswith("x: ")
        return
    assert json_depth_error(v, JSON_MAX_DEPTH) is None
