"""The public failure cases (``../shared/cases/public-cases.json``), each rebuilt at tiny scale.

Each case becomes a tiny real draft/target directory and a profile (or a verification input)
and asserts the diagnosis code and severity a good tool gives.  The cases stand for kinds of
faults: the inputs keep the case's structure (names, ratios, flags), not its sizes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdash.checkpoint.tiny import tiny_draft, tiny_target
from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.sample import write_profile
from specdash.eagle3.verify import verify_server

CASES_FILE = Path(__file__).resolve().parents[1].parent / "shared" / "cases" / "public-cases.json"
EAGLE3 = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
          "speculative_num_draft_tokens": 4}


def _doctor(tmp: Path, *, target_kw=None, draft_kw=None, no_draft=False, **kw):
    t = tiny_target(tmp / "target", **(target_kw or {}))
    d = None if no_draft else tiny_draft(tmp / "draft", **(draft_kw or {}))
    kw.setdefault("sglang_version", "0.5.23")
    return run_doctor(write_profile(tmp / "p.toml", model_path=str(t), draft_path=str(d) if d else None, **kw))


def _has(findings, code, severity):
    return any(f.code == code and f.severity == severity for f in findings)


def c01(tmp):
    rep = _doctor(tmp, target_kw={"arch": "DeepseekV3ForCausalLM"}, algorithm="EAGLE")
    ver = verify_server(dict(EAGLE3, speculative_algorithm="EAGLE"), {"speculative_algorithm": "EAGLE"},
                        ["accept_len: 1.00"], None)
    return [(rep.findings, "ALGO_MISMATCH", "error"), (ver.findings, "VERIFY_COLLAPSE", "error")]


def c03(tmp):
    kw = {"target_kw": {"arch": "GptOssForCausalLM", "layers": 36},
          "draft_kw": {"eagle_ids": [24, 30, 36], "extra_cfg": {"norm_before_fc": True},
                       "extra_tensors": {"input_norm.weight": ("BF16", (192,))}}}
    old = _doctor(tmp / "old", sglang_version="0.5.14", **kw)
    new = _doctor(tmp / "new", sglang_version="0.5.17", **kw)
    assert not new.has_errors, new.render()  # PR #32334 (0.5.17) reads the boundary ids and applies input_norm

    class Head:  # hidden 2880 as in the report, for the log arithmetic
        hidden_in = 2880
        model = None

    log = [("RuntimeError: The size of tensor a (8640) must match the size of tensor b (5760) at non-singleton "
            "dimension 1")]
    from specdash.eagle3.verify_log import scan_log as _scan_log

    out: list = []
    _scan_log(log, Head(), out)
    assert out[0].evidence["sent_states"] == 2 and out[0].evidence["expected_states"] == 3
    return [(old.findings, "AUX_LAYERS", "error"), (old.findings, "WEIGHT_KEYS", "error"),
            (out, "VERIFY_LOG", "error")]


def c05(tmp):
    rep = _doctor(tmp, draft_kw={"draft_vocab": 512, "lm_head": False, "d2t": None})
    ver = verify_server(EAGLE3, {"speculative_algorithm": "EAGLE3"},
                        ["[t] Decode batch, #running-req: 1, accept len: 1.00, accept rate: 0.00"] * 3, None)
    return [(rep.findings, "MISSING_WEIGHT", "error"), (ver.findings, "VERIFY_COLLAPSE", "error")]


def c06(tmp):
    rep = _doctor(tmp)  # draft vocab 128 of 512 with d2t offsets (32000 of 128256 in the report)
    assert not any(f.code == "VOCAB_MAP" and f.severity == "error" for f in rep.findings)
    return [(rep.findings, "VOCAB_MAP", "info")]


def c08(tmp):
    rep = _doctor(tmp, draft_kw={"d2t": None, "t2d": False})
    return [(rep.findings, "VOCAB_MAP", "error")]


def c12(tmp):
    kw = {"num_steps": 5, "eagle_topk": 4, "num_draft_tokens": 8, "env": {"SGLANG_ENABLE_SPEC_V2": "1"},
          "extra_args": ["--trust-remote-code", "--tp=1", "--attention-backend", "triton"]}
    rep = _doctor(tmp / "old", sglang_version="0.5.10", **kw)
    new = _doctor(tmp / "new", sglang_version="0.5.23", **kw)
    assert not any(f.code == "SPEC_ARGS" and f.severity == "error" for f in new.findings)
    return [(rep.findings, "SPEC_ARGS", "error"), (new.findings, "SPEC_ARGS", "info")]


def c13(tmp):
    rep = _doctor(tmp, target_kw={"arch": "Qwen2ForCausalLM"}, no_draft=True, num_steps=None, eagle_topk=None,
                  num_draft_tokens=None)
    return [(rep.findings, "DRAFT_PATH", "error")]


def c16(tmp):
    kw = {"target_kw": {"max_pos": 131072}, "draft_kw": {"max_pos": 2048}}
    warn = _doctor(tmp / "env", env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}, **kw)
    err = _doctor(tmp / "noenv", **kw)
    return [(warn.findings, "CONTEXT_LEN", "warning"), (err.findings, "CONTEXT_LEN", "error")]


def c17(tmp):
    kw = {"target_kw": {"arch": "Qwen3ForCausalLM"}, "num_steps": 6, "eagle_topk": 10, "num_draft_tokens": 32,
          "extra_args": ["--mem-fraction", "0.9", "--cuda-graph-max-bs", "2", "--port", "30000"]}
    rep = _doctor(tmp / "a", sglang_version="0.5.10", **kw)
    msgs = [f.message for f in rep.findings if f.code == "SPEC_ARGS" and f.severity == "warning"]
    assert any("batch-1 tree" in m for m in msgs) and any("--cuda-graph-max-bs 2" in m for m in msgs)
    new = _doctor(tmp / "b", sglang_version="0.5.23", **kw)  # the same command on a current release
    return [(rep.findings, "SPEC_ARGS", "warning"), (new.findings, "FLAG", "error")]


def c20(tmp):
    t = tiny_target(tmp / "target", scale_bytes=2000)
    d = tiny_draft(tmp / "draft")
    p = write_profile(tmp / "p.toml", model_path=str(t), draft_path=str(d), mem_fraction_static=0.85)
    rep = run_doctor(p, gpus=[{"name": "L40S-ish", "memory_total_mib": 256}])
    ver = verify_server(EAGLE3, {"speculative_algorithm": "EAGLE3"},
                        ["--mem-fraction-static 0.85 -> CUDA out of memory",
                         "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."], None)
    return [(rep.findings, "MEMORY", "error"), (ver.findings, "VERIFY_LOG", "error")]


def c22(tmp):
    tree = _doctor(tmp / "tree", num_steps=3, eagle_topk=3, num_draft_tokens=8)
    chain = _doctor(tmp / "chain", num_steps=3, eagle_topk=1, num_draft_tokens=8)
    return [(tree.findings, "SPEC_ARGS", "info"), (chain.findings, "SPEC_ARGS", "warning")]


def c24(tmp):
    ver = verify_server(EAGLE3, {"speculative_algorithm": "EAGLE3", "avg_spec_accept_length": 0.0}, [],
                        [{"completion_tokens": 512}])
    assert ver.status == "skipped" and ver.acceptance == "unknown" and ver.status != "ok"
    return [(ver.findings, "VERIFY_COLLAPSE", "warning")]


BUILDERS = {"C01": c01, "C03": c03, "C05": c05, "C06": c06, "C08": c08, "C12": c12, "C13": c13, "C16": c16,
            "C17": c17, "C20": c20, "C22": c22, "C24": c24}


def _case_ids() -> list[str]:
    if CASES_FILE.is_file():
        return [c["id"] for c in json.loads(CASES_FILE.read_text())]
    return sorted(BUILDERS)


@pytest.mark.parametrize("case_id", _case_ids())
def test_public_case(case_id, tmp_path):
    builder = BUILDERS.get(case_id)
    if builder is None:
        pytest.skip(f"{case_id}: no tiny reconstruction (its input has no checkpoint, profile or log to build)")
    for findings, code, severity in builder(tmp_path):
        assert _has(findings, code, severity), (case_id, code, severity,
                                                [(f.code, f.severity, f.message[:100]) for f in findings])


def test_every_builder_is_a_known_case():
    if not CASES_FILE.is_file():
        pytest.skip("../shared/cases/public-cases.json is not present")
    assert set(BUILDERS) <= set(_case_ids())
