"""Post-launch verification against the real SGLang 0.5.14 recordings and synthetic logs."""

from __future__ import annotations

import json
from pathlib import Path

from specdash.checkpoint.reader import read_draft
from specdash.checkpoint.tiny import tiny_draft, tiny_target
from specdash.eagle3.sample import write_profile
from specdash.eagle3.verify import CollapseWatch, log_accept_lengths, verify_server
from specdash.sglang.speculative import normalize_speculative


def _run(golden: Path, name: str):
    run = golden / "runs" / name
    si = json.loads((run / "server_info.json").read_text())
    log = (run / "server.log").read_text().splitlines()
    meta = json.loads((run / "generate_nonstream.json").read_text())["response"]["meta_info"]
    return si, log, meta


def _draft_info(golden: Path, tmp_path: Path):
    from specdash.checkpoint.tiny import write_safetensors

    src = golden / "env/models/draft_aligned"
    dst = tmp_path / "draft_aligned"
    dst.mkdir()
    (dst / "config.json").write_text((src / "config.json").read_text())
    specs = {}
    for line in (src / "tensors.txt").read_text().splitlines():
        name, dtype, shape = line.split(" ", 2)
        specs[name] = (dtype, tuple(json.loads(shape)))
    write_safetensors(dst / "model.safetensors", specs)
    return read_draft(dst)


ASKED = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4}


def test_golden_wrong_algorithm_collapses(golden, tmp_path):
    si, log, meta = _run(golden, "eagle_wrongalgo")
    rep = verify_server(dict(ASKED, speculative_algorithm="EAGLE"), si, log, [meta],
                        draft_info=_draft_info(golden, tmp_path))
    assert rep.status == "failed" and rep.acceptance == "collapsed"
    codes = {f.code for f in rep.findings if f.severity == "error"}
    assert codes == {"VERIFY_ALGO", "VERIFY_COLLAPSE"}
    col = next(f for f in rep.findings if f.code == "VERIFY_COLLAPSE")
    assert col.evidence["tokens"] == 48 and col.evidence["verify_ct"] == 47
    assert abs(rep.accept_length - 48 / 47) < 1e-9
    for word in ("algorithm", "weight keys", "aux layers", "d2t", "lm_head"):
        assert word in col.why
    assert "selftest" in col.fix and "wiring" in col.fix and "training" in col.fix
    assert json.loads(json.dumps(rep.to_json()))["status"] == "failed"


def test_golden_steps1_draft16_adjusted(golden):
    si, log, meta = _run(golden, "eagle3_steps1_draft16")
    rep = verify_server(dict(ASKED, speculative_num_steps=1, speculative_num_draft_tokens=16), si, log, [meta])
    adj = [f for f in rep.findings if f.code == "VERIFY_ADJUSTED"]
    assert len(adj) == 1
    f = adj[0]
    assert f.evidence["asked"] == 16 and f.evidence["effective"] == 2 and f.evidence["predicted"] == 2
    assert "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1" in f.evidence["log_line"]
    assert f.evidence["log_line"].startswith("[2026-11-29 13:38:57]")
    assert rep.status == "ok" and rep.acceptance == "ok"  # a warning, not a failure


def test_golden_aligned_is_ok(golden, tmp_path):
    si, log, meta = _run(golden, "eagle3_aligned_warm")
    rep = verify_server(ASKED, si, log, [meta], draft_info=_draft_info(golden, tmp_path))
    assert rep.status == "ok", rep.render()
    assert rep.findings == [] and rep.accept_length == 2.0


def test_golden_baseline_is_skipped(golden):
    si, log, meta = _run(golden, "baseline_nospec")
    rep = verify_server({"speculative_algorithm": None}, si, log, [meta])
    assert rep.status == "skipped" and rep.acceptance == "n/a" and not rep.findings


def test_golden_concurrent_records_and_log_parsing(golden):
    lines = (golden / "runs/eagle3_aligned_warm/server.log").read_text().splitlines()
    vals = log_accept_lengths(lines)
    assert vals and min(vals) >= 1.5 and max(vals) <= 2.0
    wrong = log_accept_lengths((golden / "runs/eagle_wrongalgo/server.log").read_text().splitlines())
    assert wrong and max(wrong) == 1.0


def test_collapse_from_log_only_and_unknown_acceptance():
    rep = verify_server(dict(ASKED, speculative_algorithm="EAGLE"), {}, ["accept_len: 1.00"], None)  # C01
    assert rep.acceptance == "collapsed" and rep.status == "failed"
    rep = verify_server(ASKED, {"speculative_algorithm": "EAGLE3"}, [], [{"completion_tokens": 300}])  # C24
    assert rep.status == "skipped" and rep.acceptance == "unknown" and rep.accept_length is None
    f = next(f for f in rep.findings if f.code == "VERIFY_COLLAPSE")
    assert f.severity == "warning" and "UNKNOWN" in f.message and f.evidence["tokens"] == 300
    rep = verify_server(ASKED, {"speculative_algorithm": "EAGLE3", "avg_spec_accept_length": 1.0}, [], None)
    assert rep.status == "skipped" and any("lifetime" in f.message for f in rep.findings)


def test_too_few_tokens_is_not_a_verdict():
    rep = verify_server(ASKED, {"speculative_algorithm": "EAGLE3"}, [],
                        [{"completion_tokens": 10, "spec": {"verify_ct": 10}}])
    assert rep.acceptance == "unknown" and rep.status == "skipped"


def test_collapse_watch():
    w = CollapseWatch(min_tokens=256)
    for _ in range(5):
        assert w.feed({"completion_tokens": 50, "spec": {"verify_ct": 50}}) is None
    d = w.feed({"completion_tokens": 50, "spec": {"verify_ct": 49}})
    assert d.state == "collapsed" and d.tokens == 300 and abs(d.accept_length - 300 / 299) < 1e-9
    assert w.feed({"completion_tokens": 1000, "spec": {"verify_ct": 100}}) is d  # decided once
    assert w.finding().code == "VERIFY_COLLAPSE" and w.finding().severity == "error"
    ok = CollapseWatch(min_tokens=100)
    ok.feed({"meta_info": {"completion_tokens": 120, "spec_verify_ct": 40}})
    assert ok.decision.state == "ok" and ok.finding() is None
    unk = CollapseWatch(min_tokens=10)
    unk.feed({"completion_tokens": 20})
    assert unk.decision.state == "unknown" and unk.finding().severity == "warning"
    assert CollapseWatch().feed({"junk": 1}) is None


def test_log_patterns():
    log = [
        "[2026-01-01 00:00:00] Ignore import error when loading sglang.srt.models.mimo_v2: Can not import FA3",
        "[2026-01-01 00:00:01] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "x.py", line 1, in f',
        "RuntimeError: The size of tensor a (8640) must match the size of tensor b (5760) at non-singleton dimension 1",
        "[2026-01-01 00:00:02] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode",
        "[2026-01-01 00:00:03] Skipping weight layers.0.mlp.up_proj.weight: not in params_dict",
        "[2026-01-01 00:00:04] Request is disconnected from the client side (type 1). Abort request",
    ]

    class D:  # a stand-in DraftInfo for the hidden size
        hidden_in = 2880

    rep = verify_server(ASKED, {"speculative_algorithm": "EAGLE3"}, log, None, draft_info=None)
    msgs = [f.message for f in rep.findings if f.code == "VERIFY_LOG"]
    assert any("traceback" in m for m in msgs)
    assert any("memory failure" in m for m in msgs)
    assert any("ambiguous option" in m for m in msgs)
    assert any("skipped/unused weights" in m for m in msgs)
    assert not any("disconnected" in m or "Ignore import" in m for m in msgs)
    mem = next(f for f in rep.findings if "memory failure" in f.message)
    assert "sglang#6875" in mem.why and "--mem-fraction-static" in mem.fix
    from specdash.eagle3.verify_log import scan_log as _scan_log

    out = []
    _scan_log(log[3:4], D(), out)
    assert out[0].evidence["expected_states"] == 3 and out[0].evidence["sent_states"] == 2
    assert "sglang#32226" in out[0].why


def test_algorithm_mismatch_vs_asked_and_disabled(tmp_path):
    rep = verify_server(ASKED, {"speculative_algorithm": "EAGLE"}, [], None)
    assert any(f.code == "VERIFY_ALGO" and "profile asked for EAGLE3" in f.message for f in rep.findings)
    rep = verify_server(ASKED, {"speculative_algorithm": None, "version": "0.5.14"}, [], None)
    assert any(f.code == "VERIFY_ALGO" and "without speculation" in f.message for f in rep.findings)
    rep = verify_server(ASKED, {"speculative_algorithm": "EAGLE3"}, [], None,
                        draft_info=read_draft(tiny_draft(tmp_path / "e2", arch="LlamaForCausalLMEagle", fc_mult=2)))
    assert any(f.code == "VERIFY_ALGO" and "EAGLE head" in f.message for f in rep.findings)


def test_profile_and_resolution_inputs(tmp_path):
    t, d = tiny_target(tmp_path / "t"), tiny_draft(tmp_path / "d")
    from specdash.profile import load_profile

    prof = load_profile(str(write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d),
                                          algorithm="EAGLE", num_steps=1, num_draft_tokens=16)))
    si = {"speculative_algorithm": "EAGLE", "speculative_num_steps": 1, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 2}
    rep = verify_server(prof, si, [], [{"completion_tokens": 64, "spec": {"verify_ct": 64}}])
    codes = [f.code for f in rep.findings]
    assert "VERIFY_ALGO" in codes and "VERIFY_ADJUSTED" in codes and "VERIFY_COLLAPSE" in codes  # draft read from path
    from specdash.profile import build_launch

    spec = build_launch(prof)
    rep = verify_server(spec, si, [], [{"completion_tokens": 64, "spec": {"verify_ct": 64}}])
    assert {"VERIFY_ALGO", "VERIFY_ADJUSTED", "VERIFY_COLLAPSE"} <= {f.code for f in rep.findings}
    res = normalize_speculative("EAGLE3", 3, 1, 4)
    rep = verify_server(res, dict(si, speculative_algorithm="EAGLE3", speculative_num_steps=3,
                                  speculative_num_draft_tokens=4),
                        [], [{"completion_tokens": 64, "spec": {"verify_ct": 20}}])
    assert rep.status == "ok"
