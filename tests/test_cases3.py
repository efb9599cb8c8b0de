"""``public-cases-3.json``: each case rebuilt from its own input and answered with its expected codes.

A case gives the launch command, the judged SGLang release and the target / draft ``config.json``; the
draft and target directories are written from those configs (the tensors a checkpoint of that config holds,
at the config's tiny shapes, an index where the case says one is present), the command becomes a profile
(``specdash profile import``) and the doctor judges it at the case's release.  ``expected.codes`` (or an
``alt_codes`` stand-in) must appear at ``severity_min`` or worse; a healthy control must give no error.
Also here: the real SpecForge 0.2.0 draft of the real-draft test bed (its recorded tensor shapes and vocab
map), which must give no error either.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specdash.checkpoint.tiny import tiny_draft, tiny_target, write_safetensors
from specdash.commands.profile import profile_from_command
from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.sample import write_profile

ROOT = Path(__file__).resolve().parents[1]
CASES_FILE = ROOT.parent / "shared" / "cases" / "public-cases-3.json"
RANK = {"info": 0, "warning": 1, "error": 2}


def _cases() -> list[dict]:
    return json.loads(CASES_FILE.read_text()) if CASES_FILE.is_file() else []


def _text(cfg: dict) -> dict:
    return cfg.get("text_config") or cfg


def _write_draft(d: Path, cfg: dict) -> None:
    if "LlamaForCausalLMEagle3" in cfg.get("architectures", []):
        ids = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        tiny_draft(d, hidden=cfg["hidden_size"], heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
                   inter=cfg["intermediate_size"], vocab=cfg["vocab_size"], draft_vocab=cfg.get("draft_vocab_size"),
                   tie=False, eagle_ids=ids, max_pos=cfg["max_position_embeddings"])
    else:  # DFlash / Gemma-4 assistant drafts: a checkpoint the EAGLE3 weight checks do not judge
        d.mkdir(parents=True, exist_ok=True)
        h = _text(cfg)["hidden_size"]
        write_safetensors(d / "model.safetensors", {"model.norm.weight": ("BF16", (h,))})
    (d / "config.json").write_text(json.dumps(cfg, indent=2))


def _write_target(t: Path, cfg: dict, other: dict) -> None:
    tc = _text(cfg)
    if cfg is tc:
        tiny_target(t, hidden=tc["hidden_size"], layers=tc["num_hidden_layers"], heads=tc["num_attention_heads"],
                    kv_heads=tc["num_key_value_heads"], inter=tc["intermediate_size"], vocab=tc["vocab_size"],
                    max_pos=tc["max_position_embeddings"], arch=cfg["architectures"][0])
    else:  # a multimodal wrapper (text_config): the language model's tensors, and its MTP layers when declared
        t.mkdir(parents=True, exist_ok=True)
        h, n = tc["hidden_size"], tc["num_hidden_layers"]
        specs = {"model.language_model.embed_tokens.weight": ("BF16", (tc["vocab_size"], h)),
                 "model.language_model.norm.weight": ("BF16", (h,)), "lm_head.weight": ("BF16", (tc["vocab_size"], h))}
        specs |= {f"model.language_model.layers.{i}.input_layernorm.weight": ("BF16", (h,)) for i in range(n)}
        for i in range(int(tc.get("mtp_num_hidden_layers") or 0)):
            specs |= {f"mtp.layers.{i}.input_layernorm.weight": ("BF16", (h,)), "mtp.fc.weight": ("BF16", (h, 2 * h)),
                      "mtp.pre_fc_norm_embedding.weight": ("BF16", (h,))}
        write_safetensors(t / "model-00001-of-00001.safetensors", specs)
        if "target/model.safetensors.index.json" in other:
            (t / "model.safetensors.index.json").write_text(json.dumps(
                {"metadata": {}, "weight_map": {k: "model-00001-of-00001.safetensors" for k in specs}}))
    (t / "config.json").write_text(json.dumps(cfg, indent=2))


def _judge(case: dict, tmp: Path):
    inp = case["input"]
    if inp.get("target_config"):
        _write_target(tmp / "target", inp["target_config"], inp.get("other_files") or {})
    if inp.get("draft_config"):
        _write_draft(tmp / "draft", inp["draft_config"])
    prof, _ = profile_from_command(inp["server_args"].replace("<path>", str(tmp)), name="case",
                                   version=inp["sglang_version"])
    return run_doctor(prof, sglang_version=inp["sglang_version"])


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["id"])
def test_public_case_3(case, tmp_path):
    rep = _judge(case, tmp_path)
    exp = case["expected"]
    seen = [(f.code, f.severity, f.message[:160]) for f in rep.findings]
    if exp.get("no_error"):
        assert not rep.has_errors, seen
    for code in exp.get("codes") or []:
        ok = {code, *((exp.get("alt_codes") or {}).get(code) or [])}
        floor = RANK[exp.get("severity_min", "info")]
        assert any(f.code in ok and RANK[f.severity] >= floor for f in rep.findings), (code, seen)
    assert (1 if rep.has_errors else 0) == exp["expect_exit"], seen


def test_every_case_3_is_run():
    if not CASES_FILE.is_file():
        pytest.skip("../shared/cases/public-cases-3.json is not present")
    assert {c["id"] for c in _cases()} == {"A1-t3", "L1-t3", "DF1-t3", "T1-t3", "Q2-t3", "G2-t3"}


def test_each_fault_is_judged_by_its_release(tmp_path):
    """The same launches on the release that fixed each: no error (the facts of that release say so)."""
    by_id = {c["id"]: c for c in _cases()}
    if not by_id:
        pytest.skip("../shared/cases/public-cases-3.json is not present")
    for cid, fixed in (("A1-t3", "0.5.19"), ("L1-t3", "0.5.19")):
        case = json.loads(json.dumps(by_id[cid]))
        case["input"]["sglang_version"] = fixed
        rep = _judge(case, tmp_path / cid)
        assert not rep.has_errors, [(f.code, f.message[:120]) for f in rep.findings if f.severity == "error"]


# --- the real SpecForge 0.2.0 draft of the real-draft bed (SmolLM2-135M target) ----------------------
REAL = ROOT / "benchmarks" / "results" / "real-2026-12-02" / "draft"


@pytest.mark.parametrize("version", ["0.5.14", "0.5.23"])
def test_the_real_trained_draft_is_healthy(tmp_path, version):
    if not (REAL / "tensors.json").is_file():
        pytest.skip(f"{REAL} (the real-draft bed's recorded draft) is not in this checkout")
    cfg = json.loads((REAL / "config.json").read_text())
    shapes = json.loads((REAL / "tensors.json").read_text())
    vm = np.load(REAL / "vocab_map.npz")
    d = tmp_path / "draft"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    write_safetensors(d / "model.safetensors", {k: (dt, tuple(s)) for k, (s, dt) in shapes.items()},
                      {"d2t": vm["d2t"].astype(np.int64), "t2d": vm["t2d"].astype(bool)})
    t = tiny_target(tmp_path / "target", hidden=576, layers=30, heads=9, kv_heads=3, inter=1536, vocab=49152,
                    max_pos=8192, extra_cfg={"tie_word_embeddings": True})
    prof = write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d), sglang_version=version)
    rep = run_doctor(prof)
    assert not rep.has_errors, [(f.code, f.message[:160]) for f in rep.findings if f.severity == "error"]
    assert any(f.code == "VOCAB_MAP" and f.severity == "info" for f in rep.findings)
