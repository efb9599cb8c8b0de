"""Preflight doctor: every finding code on tiny REAL draft/target directories (config.json + safetensors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdash.checkpoint.tiny import tiny_draft, tiny_target, write_safetensors
from specdash.commands.doctor import add_doctor_arguments, doctor_main
from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.findings import DoctorReport, Finding
from specdash.eagle3.sample import write_profile
from specdash.sglang.capture import capture_plan
from specdash.sglang.versions import deprecated_flags, flags_version_for, has_feature, known_flags


def doctor(tmp_path: Path, *, target_kw=None, draft_kw=None, draft=True, version="0.5.14", **profile_kw) -> DoctorReport:
    t = tiny_target(tmp_path / "target", **(target_kw or {})) if not str(profile_kw.get("model_path", "")).startswith(
        "sim:") else None
    d = tiny_draft(tmp_path / "draft", **(draft_kw or {})) if draft is True else draft
    kw = {"model_path": str(t), "draft_path": str(d) if d else None, "sglang_version": version}
    kw.update(profile_kw)
    return run_doctor(write_profile(tmp_path / "p.toml", **kw))


def find(rep: DoctorReport, code: str, severity: str | None = None) -> list[Finding]:
    return [f for f in rep.findings if f.code == code and (severity is None or f.severity == severity)]


# --- report shape ---------------------------------------------------------------------------------


def test_healthy_profile_has_no_error_and_contract_json(tmp_path):
    rep = doctor(tmp_path)
    assert not rep.has_errors, rep.render()
    js = rep.to_json()
    assert set(js) == {"sglang_version", "version_source", "findings"}
    assert js["sglang_version"] == "0.5.14" and js["version_source"] == "profile"
    for f in js["findings"]:
        assert set(f) == {"code", "severity", "message", "why", "fix", "evidence"}
    json.dumps(js)
    # the capture plan is always shown
    info = find(rep, "AUX_LAYERS", "info")[0]
    assert info.evidence["capture_indices"] == [2, 4, 5]


def test_render_groups_by_severity(tmp_path):
    rep = DoctorReport("0.5.14", "cli", [Finding("A", "info", "i"), Finding("B", "error", "e", "why-e", "fix-e"),
                                         Finding("C", "warning", "w")])
    text = rep.render()
    assert text.index("ERRORS") < text.index("WARNINGS") < text.index("INFO")
    assert "why: why-e" in text and "fix: fix-e" in text and "--sglang-version" in text
    assert rep.has_errors
    with pytest.raises(ValueError):
        Finding("X", "fatal", "no")


# --- ALGO_MISMATCH --------------------------------------------------------------------------------


def test_eagle3_head_served_as_eagle(tmp_path):
    rep = doctor(tmp_path, algorithm="EAGLE")
    f = find(rep, "ALGO_MISMATCH", "error")[0]
    assert "EAGLE3 head" in f.message and "192 = 3 × hidden 64" in f.message
    assert "EAGLE3" in f.fix and f.evidence["fc_in_features"] == 192


def test_eagle2_head_served_as_eagle3(tmp_path):
    rep = doctor(tmp_path, draft_kw={"arch": "LlamaForCausalLMEagle", "fc_mult": 2})
    f = find(rep, "ALGO_MISMATCH", "error")[0]
    assert "EAGLE-2 head" in f.message and "shape error" in f.why


def test_plain_lm_and_speculators_arch_with_eagle3(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"arch": "LlamaForCausalLM", "fc_mult": 1})
    assert any("not an EAGLE3 head" in f.message for f in find(rep, "ALGO_MISMATCH", "error"))
    rep = doctor(tmp_path / "b", draft_kw={"arch": "Eagle3Speculator"})
    assert any("no model class" in f.message for f in find(rep, "ALGO_MISMATCH", "error"))


def test_eagle_head_with_standalone(tmp_path):
    rep = doctor(tmp_path, algorithm="STANDALONE")
    assert find(rep, "ALGO_MISMATCH", "error")


# --- WEIGHT_KEYS / MISSING_WEIGHT / WEIGHT_SHAPE --------------------------------------------------


@pytest.mark.parametrize("version,dropped", [("0.5.10", True), ("0.5.11", True), ("0.5.12", False), ("0.5.14", False)])
def test_layers0_keys_depend_on_version(tmp_path, version, dropped):
    rep = doctor(tmp_path, draft_kw={"layer_prefix": "layers.0"}, version=version)
    errs = find(rep, "WEIGHT_KEYS", "error")
    assert bool(errs) == dropped, rep.render()
    if dropped:
        f = errs[0]
        assert "layers.0.self_attn.q_proj.weight → midlayer.self_attn.q_proj.weight" in f.message
        assert f"SGLang {version}" in f.message and "sglang_version" in f.message
        assert f.evidence["judged_version"] == version and f.evidence["version_source"] == "profile"
        assert "specdash draft fix" in f.fix
        assert not find(rep, "MISSING_WEIGHT", "error")  # explained once, under WEIGHT_KEYS
    assert has_feature("draft_layers0_keys", version) != dropped


def test_cli_version_overrides_profile(tmp_path):
    t, d = tiny_target(tmp_path / "t"), tiny_draft(tmp_path / "d", layer_prefix="layers.0")
    p = write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d), sglang_version="0.5.14")
    rep = run_doctor(p, sglang_version="0.5.10")
    assert rep.version_source == "cli" and find(rep, "WEIGHT_KEYS", "error")


def test_a_release_newer_than_any_known_is_said(tmp_path):
    t, d = tiny_target(tmp_path / "t"), tiny_draft(tmp_path / "d")
    p = write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d), sglang_version="0.5.14")
    newer = run_doctor(p, sglang_version="99.0")
    from specdash.sglang.versions import flag_versions

    last = str(flag_versions()[-1])
    [w] = [f for f in find(newer, "FLAG", "warning") if "newer than any release" in f.message]
    assert w.evidence["newest_known"] == last and f"judged as {last}'s" in w.message
    assert not [f for f in run_doctor(p, sglang_version=last).findings if "newer than any release" in f.message]


def test_a_release_older_than_any_known_is_a_warning_not_a_quiet_note(tmp_path):
    """0.4.0 predates every stored release: the doctor says its other verdicts are another release's."""
    t, d = tiny_target(tmp_path / "t"), tiny_draft(tmp_path / "d")
    p = write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d), sglang_version="0.5.14")
    from specdash.sglang.versions import flag_versions

    first = str(flag_versions()[0])
    [w] = [f for f in find(run_doctor(p, sglang_version="0.4.0"), "FLAG", "warning") if "older than any" in f.message]
    assert w.evidence["oldest_known"] == first and "its flags were not checked" in w.message
    assert not [f for f in run_doctor(p, sglang_version=first).findings if "older than any" in f.message]


def test_foreign_prefix_and_unknown_tensor(tmp_path):
    rep = doctor(tmp_path, draft_kw={"rename": {"fc.weight": "eagle.fc.weight"},
                                     "extra_tensors": {"verifier_head.weight": ("BF16", (4, 4))}})
    errs = find(rep, "WEIGHT_KEYS", "error")
    assert any(f.evidence["tensor"] == "eagle.fc.weight" and f.evidence["maps_to"] == "fc.weight" for f in errs)
    warns = find(rep, "WEIGHT_KEYS", "warning")
    assert any(f.evidence["tensor"] == "verifier_head.weight" for f in warns)


def test_input_norm_needs_0_5_17(tmp_path):
    kw = {"extra_cfg": {"norm_before_fc": True}, "extra_tensors": {"input_norm.weight": ("BF16", (192,))}}
    rep = doctor(tmp_path / "old", draft_kw=kw, version="0.5.14")
    assert any("input_norm" in f.message for f in find(rep, "WEIGHT_KEYS", "error"))
    rep = doctor(tmp_path / "new", draft_kw=kw, version="0.5.17")
    assert not find(rep, "WEIGHT_KEYS")


def test_missing_linear_and_norm_weights(tmp_path):
    rep = doctor(tmp_path, draft_kw={"drop": ("fc.weight", "midlayer.self_attn.q_proj.weight", "norm.weight")})
    err = find(rep, "MISSING_WEIGHT", "error")[0]
    assert "fc.weight" in err.evidence["missing"] and "midlayer.self_attn.q_proj.weight" in err.evidence["missing"]
    assert "norm.weight" in find(rep, "MISSING_WEIGHT", "warning")[0].evidence["missing"]


def test_missing_draft_vocab_size_key(tmp_path):
    rep = doctor(tmp_path, draft_kw={"draft_vocab_in_config": "absent"})
    assert any("no draft_vocab_size key" in f.message for f in find(rep, "MISSING_WEIGHT", "warning"))
    assert any("draft_vocab_size is not set" in f.message for f in find(rep, "VOCAB_MAP", "error"))


def test_weight_shape_mismatch(tmp_path):
    rep = doctor(tmp_path, draft_kw={"extra_tensors": {"midlayer.self_attn.q_proj.weight": ("BF16", (64, 64))}})
    f = find(rep, "WEIGHT_SHAPE", "error")[0]
    assert f.evidence["mismatches"][0]["expected"] == [64, 128]


# --- VOCAB_MAP ------------------------------------------------------------------------------------


def test_d2t_missing_with_reduced_vocab(tmp_path):
    rep = doctor(tmp_path, draft_kw={"d2t": None})
    f = find(rep, "VOCAB_MAP", "error")[0]
    assert "no d2t" in f.message and f.evidence["case"] == "NVIDIA-NeMo/Automodel#2447"


def test_d2t_absolute_ids(tmp_path):
    rep = doctor(tmp_path, draft_kw={"d2t": "absolute"})
    f = find(rep, "VOCAB_MAP", "error")[0]
    assert "absolute target ids" in f.message and "d2t[i] − i" in f.fix


def test_d2t_absolute_detected_through_t2d_when_both_readings_fit(tmp_path):
    # hot ids 0..127 contiguous: as offsets they map to 0,2,4… (valid), as ids to 0..127 (valid); t2d decides
    import numpy as np

    hot = np.arange(128, dtype=np.int64)
    mask = np.zeros(512, dtype=bool)
    mask[hot] = True
    d = tiny_draft(tmp_path / "d", d2t=None)
    write_safetensors(d / "extra.safetensors", {"d2t": ("I64", (128,)), "t2d": ("BOOL", (512,))},
                      {"d2t": hot, "t2d": mask})
    rep = doctor(tmp_path, draft=d)
    assert any("absolute" in f.message for f in find(rep, "VOCAB_MAP", "error"))


def test_d2t_length_range_and_t2d(tmp_path):
    import numpy as np

    d = tiny_draft(tmp_path / "d", d2t=None)
    write_safetensors(d / "extra.safetensors", {"d2t": ("I64", (100,)), "t2d": ("BOOL", (512,))},
                      {"d2t": np.full(100, 450, dtype=np.int64), "t2d": np.zeros(512, dtype=bool)})
    rep = doctor(tmp_path, draft=d)
    msgs = " | ".join(f.message for f in find(rep, "VOCAB_MAP", "error"))
    assert "len(d2t) = 100" in msgs and "outside the target vocabulary" in msgs


def test_t2d_inconsistent_is_a_warning(tmp_path):
    import numpy as np

    d = tiny_draft(tmp_path / "d", d2t=None)
    write_safetensors(d / "extra.safetensors", {"d2t": ("I64", (128,)), "t2d": ("BOOL", (512,))},
                      {"d2t": np.full(128, 10, dtype=np.int64), "t2d": np.ones(512, dtype=bool)})
    rep = doctor(tmp_path, draft=d)
    assert any("t2d marks 512" in f.message for f in find(rep, "VOCAB_MAP", "warning"))


def test_lm_head_rows_and_null_draft_vocab(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"extra_cfg": {"draft_vocab_size": 100}})
    assert any("lm_head.weight has 128 rows but draft_vocab_size is 100" in f.message
               for f in find(rep, "VOCAB_MAP", "error"))
    rep = doctor(tmp_path / "b", draft_kw={"draft_vocab": None, "draft_vocab_in_config": "null", "d2t": None})
    assert any("replaces the draft's own lm_head" in f.message for f in find(rep, "VOCAB_MAP", "warning"))


def test_draft_vocab_size_differs_from_target(tmp_path):
    rep = doctor(tmp_path, target_kw={"vocab": 1024})
    assert any("≠ target vocab_size 1024" in f.message for f in find(rep, "VOCAB_MAP", "error"))


# --- AUX_LAYERS -----------------------------------------------------------------------------------


def test_capture_plan_conventions():
    assert capture_plan(["LlamaForCausalLM"], 32, None, "0.5.23")[0] == [2, 16, 29]
    assert capture_plan(["LlamaForCausalLM"], 32, [1, 15, 28], "0.5.23")[0] == [2, 16, 29]
    assert capture_plan(["DeepseekV3ForCausalLM"], 61, [1, 29, 57], "0.5.23")[0] == [2, 30, 58]
    assert capture_plan(["DeepseekV3ForCausalLM"], 61, [2, 30, 58], "0.5.23")[0] == [2, 30, 58]
    assert capture_plan(["DeepseekV3ForCausalLM"], 61, [2, 30, 58], "0.5.12")[0] == [3, 31, 59]
    cap, valid = capture_plan(["GptOssForCausalLM"], 36, [24, 30, 36], "0.5.14")
    assert cap == [25, 31, 37] and valid == [25, 31]
    cap, valid = capture_plan(["GptOssForCausalLM"], 36, [24, 30, 36], "0.5.17")
    assert cap == valid == [24, 30, 36]


def test_top_level_ids_not_read(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"top_ids": [0, 2, 5]})
    f = find(rep, "AUX_LAYERS", "error")[0]
    assert "top level" in f.message and f.evidence["intended_capture"] == [1, 3, 6]
    rep = doctor(tmp_path / "b", draft_kw={"top_ids": [1, 3, 4]})  # = defaults for L = 8
    assert find(rep, "AUX_LAYERS", "warning") and not find(rep, "AUX_LAYERS", "error")


def test_ids_out_of_range_and_boundary(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"eagle_ids": [1, 3, 7]})  # 7 = L-1 → capture 8: never
    f = find(rep, "AUX_LAYERS", "error")[0]
    assert f.evidence["states_sent"] == 2 and f.evidence["states_expected"] == 3
    rep = doctor(tmp_path / "b", draft_kw={"eagle_ids": [2, 5, 8]})  # boundary convention on Llama
    assert any("boundary convention" in f.why for f in find(rep, "AUX_LAYERS", "error"))


def test_off_by_one_doubt_unsorted_and_recorded_ids(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"eagle_ids": [2, 4, 5]})  # SGLang's default capture indices
    assert any("default capture indices" in f.message for f in find(rep, "AUX_LAYERS", "warning"))
    rep = doctor(tmp_path / "b", draft_kw={"eagle_ids": [4, 1, 3]})
    assert any("not in ascending order" in f.message for f in find(rep, "AUX_LAYERS", "warning"))
    rep = doctor(tmp_path / "c", draft_kw={"eagle_ids": [1, 3, 4], "extra_cfg": {
        "speculators_config": {"aux_hidden_state_layer_ids": [0, 3, 5]}}})
    assert any("training recorded" in f.message for f in find(rep, "AUX_LAYERS", "error"))


def test_aux_count_vs_fc_and_use_aux_false(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"extra_cfg": {"num_aux_hidden_states": 4}})
    assert any("builds fc for 4 aux states" in f.message for f in find(rep, "AUX_LAYERS", "error"))
    rep = doctor(tmp_path / "a2", draft_kw={"extra_cfg": {"num_aux_hidden_states": 4}}, version="0.5.11")
    assert not any("builds fc for" in f.message for f in find(rep, "AUX_LAYERS", "error"))  # 0.5.11: always 3
    rep = doctor(tmp_path / "b", draft_kw={"extra_cfg": {"eagle_config": {"use_aux_hidden_state": False}}})
    assert any("use_aux_hidden_state is false" in f.message for f in find(rep, "AUX_LAYERS", "error"))


def test_target_hidden_mismatch(tmp_path):
    rep = doctor(tmp_path, target_kw={"hidden": 128})
    assert any("target hidden size 64, the target has 128" in f.message for f in find(rep, "AUX_LAYERS", "error"))


def test_deepseek_unshifted_ids_warning(tmp_path):
    rep = doctor(tmp_path, target_kw={"arch": "DeepseekV3ForCausalLM"}, draft_kw={"eagle_ids": [2, 4, 5]},
                 version="0.5.14")
    assert any("DeepSeek-family" in f.message for f in find(rep, "AUX_LAYERS", "warning"))


# --- SPEC_ARGS ------------------------------------------------------------------------------------


def test_topk1_adjustment_rejection_and_auto(tmp_path):
    rep = doctor(tmp_path / "a", num_steps=1, eagle_topk=1, num_draft_tokens=16)
    f = find(rep, "SPEC_ARGS", "warning")[0]
    assert f.evidence["asked"] == 16 and f.evidence["effective"] == 2
    assert "speculative_eagle_topk == 1" in f.why
    rep = doctor(tmp_path / "b", num_steps=None, eagle_topk=4, num_draft_tokens=8)
    assert find(rep, "SPEC_ARGS", "error")[0].evidence["exception"] == "AssertionError"
    rep = doctor(tmp_path / "c", num_steps=None, eagle_topk=None, num_draft_tokens=None)
    assert any("(5, 4, 8)" in f.message for f in find(rep, "SPEC_ARGS", "info"))


def test_spec_v2_env_by_version(tmp_path):
    kw = {"num_steps": 5, "eagle_topk": 4, "num_draft_tokens": 8, "env": {"SGLANG_ENABLE_SPEC_V2": "1"}}
    assert find(doctor(tmp_path / "a", version="0.5.10", **kw), "SPEC_ARGS", "error")
    rep = doctor(tmp_path / "b", version="0.5.12", **kw)
    assert not find(rep, "SPEC_ARGS", "error") and any("spec v1" in f.message for f in find(rep, "SPEC_ARGS", "info"))
    rep = doctor(tmp_path / "c", version="0.5.23", **kw)
    assert any("no effect" in f.message for f in find(rep, "SPEC_ARGS", "info"))


def test_wide_tree_cuda_graph_token_map_rejection_sampling(tmp_path):
    rep = doctor(tmp_path / "a", num_steps=6, eagle_topk=10, num_draft_tokens=32, version="0.5.14",
                 extra_args=["--cuda-graph-max-bs-decode", "2"],
                 spec_extra_args=["--speculative-token-map", "x.pt"])
    msgs = [f.message for f in find(rep, "SPEC_ARGS", "warning")]
    assert any("batch-1 tree" in m for m in msgs)
    assert any("--cuda-graph-max-bs-decode 2 but up to 48" in m for m in msgs)
    assert any("token-map is ignored" in m for m in msgs)
    assert any("ceiling" in f.message for f in find(rep, "SPEC_ARGS", "info"))
    rep = doctor(tmp_path / "b", spec_extra_args=["--speculative-use-rejection-sampling"])
    assert any("draft vocab to equal the target vocab" in f.message for f in find(rep, "SPEC_ARGS", "error"))


# --- CONTEXT_LEN / DTYPE / DRAFT_PATH / CHECKPOINT ------------------------------------------------


def test_context_length(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"max_pos": 2048})
    f = find(rep, "CONTEXT_LEN", "error")[0]
    assert f.evidence["draft_max_position_embeddings"] == 2048 and f.evidence["serving_context"] == 4096
    assert "ValueError" in f.why
    rep = doctor(tmp_path / "b", draft_kw={"max_pos": 2048}, env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    assert find(rep, "CONTEXT_LEN", "warning") and not find(rep, "CONTEXT_LEN", "error")
    rep = doctor(tmp_path / "c", draft_kw={"max_pos": 2048}, context_length=2048)
    assert not find(rep, "CONTEXT_LEN")
    rep = doctor(tmp_path / "d", context_length=8192)
    assert any("exceeds the target's derived length" in f.message for f in find(rep, "CONTEXT_LEN", "error"))


def test_dtype(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"dtype": "float32"})
    assert any("runs it in float16" in f.message for f in find(rep, "DTYPE", "warning"))
    rep = doctor(tmp_path / "b", draft_kw={"dtype": "float16"})
    assert find(rep, "DTYPE", "warning")
    rep = doctor(tmp_path / "c", draft_kw={"dtype": "float32"}, extra_args=["--dtype", "bfloat16"])
    assert not find(rep, "DTYPE")


def test_draft_path_rules(tmp_path):
    rep = doctor(tmp_path / "a", draft=None)
    assert find(rep, "DRAFT_PATH", "error")[0].evidence["case"] == "sglang#36528"
    rep = doctor(tmp_path / "b", draft=None, algorithm="EAGLE", target_kw={"arch": "DeepseekV3ForCausalLM", "mtp_layers": 1})
    assert find(rep, "DRAFT_PATH", "info") and not find(rep, "DRAFT_PATH", "error")
    rep = doctor(tmp_path / "c", draft=tmp_path / "nowhere")
    assert any("does not exist" in f.message for f in find(rep, "DRAFT_PATH", "error"))
    rep = doctor(tmp_path / "d", draft="someorg/some-eagle3")  # a hub id, not cached here: said as a warning
    assert any("NOT run" in f.message for f in find(rep, "DRAFT_PATH", "warning"))


def test_unreadable_directories_become_findings(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    rep = doctor(tmp_path / "a", draft=bad)
    assert any("cannot be read" in f.message for f in find(rep, "CHECKPOINT", "error"))
    (bad / "config.json").write_text("{not json")
    rep = doctor(tmp_path / "b", draft=bad)
    assert find(rep, "CHECKPOINT", "error")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    (empty / "model.safetensors").write_bytes(b"garbage")
    rep = doctor(tmp_path / "c", draft=empty)
    assert find(rep, "CHECKPOINT")


# --- FLAG -----------------------------------------------------------------------------------------


def test_known_flags_files():
    assert flags_version_for("0.5.9") is None and known_flags("0.5.9") is None
    # every release from 0.5.10 is stored (0.5.15 and 0.5.22 included); a build between two uses the one below
    assert flags_version_for("0.5.15") == "0.5.15" and flags_version_for("0.5.22") == "0.5.22"
    assert flags_version_for("0.5.15.post2") == "0.5.15.post1" and flags_version_for("0.5.16rc1") == "0.5.15.post1"
    assert "--cuda-graph-max-bs" in known_flags("0.5.10")
    assert "--cuda-graph-max-bs" in known_flags("0.5.19") and "--cuda-graph-max-bs" not in known_flags("0.5.20")
    assert "--cuda-graph-max-bs-decode" in known_flags("0.5.14") and "--cuda-graph-max-bs-decode" not in known_flags(
        "0.5.13")
    assert deprecated_flags("0.5.14")["--cuda-graph-max-bs"] == "--cuda-graph-max-bs-decode"
    assert {"--model-path", "--speculative-algorithm", "--enable-metrics"} <= known_flags("0.5.23")


def test_cuda_graph_max_bs_by_version(tmp_path):
    kw = {"extra_args": ["--cuda-graph-max-bs", "8"]}
    f = find(doctor(tmp_path / "a", version="0.5.23", **kw), "FLAG", "error")[0]
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill" \
        in f.message
    assert f.evidence["replacement"] == "--cuda-graph-max-bs-decode" and f.evidence["exit_code"] == 2
    w = find(doctor(tmp_path / "b", version="0.5.14", **kw), "FLAG", "warning")[0]
    assert "deprecated" in w.message and w.evidence["removed_in"] == "0.5.20"
    assert not find(doctor(tmp_path / "c", version="0.5.10", **kw), "FLAG")


def test_unknown_abbreviated_and_uncertain_flags(tmp_path):
    rep = doctor(tmp_path / "a", version="0.5.23", extra_args=["--no-such-flag", "1", "--mem-fraction", "0.8",
                                                                  "--tp", "1"])
    assert any("unrecognized arguments: --no-such-flag" in f.message for f in find(rep, "FLAG", "error"))
    warns = {f.evidence["flag"]: f for f in find(rep, "FLAG", "warning")}
    assert warns["--mem-fraction"].evidence["expands_to"] == "--mem-fraction-static"
    assert warns["--tp"].evidence["expands_to"] == "--tp-size"
    only_new = min(known_flags("0.5.23") - known_flags("0.5.22"))  # a build between two stored releases
    rep = doctor(tmp_path / "b", version="0.5.22.post1", extra_args=[only_new])
    assert any("unknown" in f.message for f in find(rep, "FLAG", "warning")), rep.render()
    rep = doctor(tmp_path / "c", version="0.5.2rc2", extra_args=["--cuda-graph-max-bs", "2"])
    assert [f for f in find(rep, "FLAG", "warning") if "older than any release" in f.message]  # not checked: said


# --- MEMORY ---------------------------------------------------------------------------------------


def test_memory(tmp_path):
    t = tiny_target(tmp_path / "t", scale_bytes=2000)  # ~ 8 × 256k × 64 × 2 B ≈ 260 MiB of gate_proj
    d = tiny_draft(tmp_path / "d")
    p = write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d), mem_fraction_static=0.5)
    assert find(run_doctor(p), "MEMORY", "info")
    rep = run_doctor(p, gpus=[{"name": "tiny", "memory_total_mib": 300}])
    f = find(rep, "MEMORY", "error")[0]
    assert "exceed" in f.message and f.evidence["mem_fraction_static"] == 0.5
    rep = run_doctor(p, gpus=[{"name": "big", "memory_total_mib": 80_000}])
    assert find(rep, "MEMORY", "info") and not find(rep, "MEMORY", "error")
    p2 = write_profile(tmp_path / "p2.toml", model_path=str(t), draft_path=str(d), tp_size=2)
    assert find(run_doctor(p2, gpus=[{"name": "one", "memory_total_mib": 80_000}]), "MEMORY", "error")


# --- sim models, golden configs, CLI --------------------------------------------------------------


def test_sim_virtual_models(tmp_path):
    p = write_profile(tmp_path / "p.toml", model_path="sim:kimi-k2.5-int4", draft_path="sim:kimi-k2.5-eagle3",
                      launcher="sim", tp_size=8, env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"},
                      sglang_version="0.5.23", sim_scenario="kimi-k25")  # its machine has the 8 GPUs
    rep = run_doctor(p)
    assert not rep.has_errors, rep.render()
    assert find(rep, "AUX_LAYERS", "info")[0].evidence["capture_indices"] == [2, 30, 58]
    p = write_profile(tmp_path / "q.toml", model_path="sim:llama-3.1-8b", draft_path="sim:llama-3.1-8b-eagle3-layers0",
                      launcher="sim", sglang_version="0.5.10")
    assert find(run_doctor(p), "WEIGHT_KEYS", "error")


def _materialize(golden: Path, name: str, dst: Path) -> Path:
    """A header-true copy of a golden tiny model (config.json + zero-filled tensors, real d2t/t2d)."""
    import numpy as np

    src = golden / "env" / "models" / name
    dst.mkdir(parents=True)
    (dst / "config.json").write_text((src / "config.json").read_text())
    specs, values = {}, {}
    for line in (src / "tensors.txt").read_text().splitlines():
        tname, dtype, shape = line.split(" ", 2)
        specs[tname] = (dtype, tuple(json.loads(shape)))
    if "d2t" in specs:  # golden README: d2t offsets 1000, t2d marks 1000–8999
        values["d2t"] = np.full(specs["d2t"][1], 1000, dtype=np.int64)
        mask = np.zeros(specs["t2d"][1], dtype=bool)
        mask[1000:9000] = True
        values["t2d"] = mask
    write_safetensors(dst / "model.safetensors", specs, values)
    return dst


@pytest.mark.parametrize("version,errors", [("0.5.10", True), ("0.5.14", False)])
def test_golden_draft_layers0(golden, tmp_path, version, errors):
    t = _materialize(golden, "target", tmp_path / "target")
    d = _materialize(golden, "draft_layers0", tmp_path / "draft")
    p = write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d), sglang_version=version)
    rep = run_doctor(p)
    assert bool(find(rep, "WEIGHT_KEYS", "error")) == errors
    assert rep.has_errors == errors, rep.render()


def test_golden_aligned_and_wrong_algorithm(golden, tmp_path):
    t = _materialize(golden, "target", tmp_path / "target")
    d = _materialize(golden, "draft_aligned", tmp_path / "draft")
    rep = run_doctor(write_profile(tmp_path / "p.toml", model_path=str(t), draft_path=str(d)))
    assert not rep.has_errors, rep.render()
    rep = run_doctor(write_profile(tmp_path / "q.toml", model_path=str(t), draft_path=str(d), algorithm="EAGLE"))
    assert [f.code for f in rep.findings if f.severity == "error"] == ["ALGO_MISMATCH"]


def _args(**kw):
    import argparse

    p = argparse.ArgumentParser()
    add_doctor_arguments(p)
    argv = ["--profile", kw.pop("profile")]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return p.parse_args(argv)


def test_doctor_main_exit_codes(tmp_path, capsys):
    t, d = tiny_target(tmp_path / "t"), tiny_draft(tmp_path / "d")
    good = write_profile(tmp_path / "good.toml", model_path=str(t), draft_path=str(d))
    bad = write_profile(tmp_path / "bad.toml", model_path=str(t), draft_path=str(d), algorithm="EAGLE")
    assert doctor_main(_args(profile=str(good))) == 0
    capsys.readouterr()
    assert doctor_main(_args(profile=str(bad), json=True)) == 1
    out = capsys.readouterr().out
    assert json.loads(out)["findings"][0]["code"] == "ALGO_MISMATCH"
    assert doctor_main(_args(profile=str(tmp_path / "missing.toml"))) == 2
    err = capsys.readouterr()
    assert err.out == "" and "does not exist" in err.err
    (tmp_path / "broken.toml").write_text("name = 'x'\n[server]\nmodel_pth = 'x'\n")
    assert doctor_main(_args(profile=str(tmp_path / "broken.toml"))) == 2
    assert doctor_main(_args(profile=str(good), gpu_memory_mib=0.001)) == 1  # weights exceed 0.001 MiB


def test_tied_head_and_multi_layer_drafts(tmp_path):
    rep = doctor(tmp_path / "a", draft_kw={"tie": True, "extra_tensors": {"lm_head.weight": ("BF16", (128, 64))}})
    assert any(f.evidence.get("tensor") == "lm_head.weight" for f in find(rep, "WEIGHT_KEYS", "warning"))
    kw = {"extra_cfg": {"num_hidden_layers": 2}}
    assert any("supports 1 draft layer" in f.message for f in find(doctor(tmp_path / "b", draft_kw=kw,
                                                                          version="0.5.11"), "CHECKPOINT", "error"))
    assert not find(doctor(tmp_path / "c", draft_kw=kw, version="0.5.12"), "CHECKPOINT")


@pytest.mark.parametrize(("host", "key", "warned"), [
    ("0.0.0.0", None, True), ("10.1.2.3", None, True), ("node7.cluster", None, True), ("::", None, True),
    ("127.0.0.1", None, False), ("localhost", None, False), ("::1", None, False), ("0.0.0.0", "${SGLANG_API_KEY}", False),
])
def test_exposed_server_without_api_key(tmp_path, monkeypatch, host, key, warned):
    monkeypatch.setenv("SGLANG_API_KEY", "sk-test")
    p = tmp_path / "exp.toml"
    extra = f'extra_args = ["--api-key", "{key}"]\n' if key else ""
    p.write_text(f'name = "exp"\n[server]\nlauncher = "sim"\nmodel_path = "sim:llama-3.1-8b"\nhost = "{host}"\n'
                 f"port = 30000\n{extra}")
    from specdash.profile import load_profile

    rep = run_doctor(load_profile(str(p)))
    got = find(rep, "EXPOSED", "warning")
    assert bool(got) is warned
    if warned:
        assert host in got[0].message and "127.0.0.1" in got[0].fix and "sk-test" not in json.dumps(got[0].to_json())


def test_draft_quantization_rules(tmp_path):
    """sglang#39087 / #36599: a quantized drafter collapses acceptance; a BF16 draft inherits the target's
    --quantization unless --speculative-draft-model-quantization says otherwise (server_args.py 0.5.14)."""
    q = {"quant_method": "compressed-tensors", "format": "pack-quantized",
         "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}}}
    rep = doctor(tmp_path / "a", draft_kw={"extra_cfg": {"quantization_config": q}})
    (f,) = find(rep, "QUANT", "warning")
    assert "compressed-tensors, 4-bit" in f.message and f.evidence["case"] == "sglang#39087"
    rep = doctor(tmp_path / "b", extra_args=["--quantization", "fp8"])
    (f,) = find(rep, "QUANT", "warning")
    assert "inherits the target's --quantization fp8" in f.message and "unquant" in f.fix
    rep = doctor(tmp_path / "c", extra_args=["--quantization", "fp8"],
                 spec_extra_args=["--speculative-draft-model-quantization", "unquant"])
    assert not find(rep, "QUANT")
    assert not find(doctor(tmp_path / "d"), "QUANT")


def test_mla_eagle3_head_needs_0_5_12(tmp_path):
    """sglang#25673: Eagle3DeepseekV2ForCausalLM (srt/models/kimi_k25_eagle3.py) is in the 0.5.12 wheel, not in
    0.5.11's: on 0.5.11 every rank fails while the draft's config is read."""
    kw = {"arch": "Eagle3DeepseekV2ForCausalLM"}
    old = doctor(tmp_path / "a", draft_kw=kw, version="0.5.11")
    (f,) = [x for x in find(old, "ALGO_MISMATCH", "error") if "first appears" in x.message]
    assert "SGLang 0.5.11" in f.message and f.evidence["first_release"] == "0.5.12"
    new = doctor(tmp_path / "b", draft_kw=kw, version="0.5.14")
    assert not [x for x in find(new, "ALGO_MISMATCH") if "model class" in x.message]
    odd = doctor(tmp_path / "c", draft_kw={"arch": "Eagle3Speculator"}, version="0.5.14")
    assert any("no model class for the draft architecture Eagle3Speculator" in x.message
               for x in find(odd, "ALGO_MISMATCH", "error"))


def test_gpus_a_tp_larger_than_the_machine_is_an_error(tmp_path):
    """GPUS: the simulator's scenario has one GPU; tp 2 would fail at start-up with 'invalid device ordinal'.
    With NVML's GPUs (here given) and CUDA_VISIBLE_DEVICES in [env], the visible ones count."""
    from specdash.cli import main
    from specdash.eagle3.doctor import run_doctor
    from specdash.launch import run_preflight
    from specdash.profile import load_profile
    from tests.test_bench import sim_profile

    prof = load_profile(str(sim_profile(tmp_path, "tp2", tp=2)))
    (f,) = [x for x in run_preflight(prof).findings if x.code == "GPUS"]  # the preflight of every launch
    assert f.severity == "error" and "tp 2 = 2 ranks, but the simulator's scenario 'healthy'" in f.message
    assert "has 1 GPU" in f.message and "tp_size = 1" in f.fix
    assert not [x for x in run_preflight(load_profile(str(sim_profile(tmp_path, "tp1", tp=1)))).findings
                if x.code == "GPUS"]
    assert main(["doctor", "--profile", str(prof.path)]) == 1  # the doctor command reads the scenario too
    real = tmp_path / "real.toml"
    real.write_text('name = "real"\n[server]\nmodel_path = "/nonexistent/m"\ntp_size = 4\n'
                    '[env]\nCUDA_VISIBLE_DEVICES = "0,1"\n')
    gpus = [{"name": "H200", "memory_total_mib": 143771}] * 8
    (f,) = [x for x in run_doctor(load_profile(str(real)), gpus=gpus).findings if x.code == "GPUS"]
    assert "tp 4 = 4 ranks, but this machine with CUDA_VISIBLE_DEVICES=0,1 has 2 GPUs" in f.message
