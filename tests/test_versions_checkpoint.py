"""The version table and the checkpoint reader (real safetensors files, small shapes)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from specdash.checkpoint.reader import CheckpointError, read_draft, read_model_dir, read_target
from specdash.sglang.versions import (
    SPEC_META_KEYS,
    eagle3_param_for_key,
    has_feature,
    parse_version,
    read_spec_meta,
    resolve_version,
)


def test_version_order():
    assert parse_version("0.5.14") < parse_version("0.5.23")
    assert parse_version("0.5.2rc2") < parse_version("0.5.2")
    assert parse_version("v0.5.10") == "0.5.10"
    with pytest.raises(ValueError):
        parse_version("latest")


def test_layer_key_mapping_depends_on_version():
    assert eagle3_param_for_key("midlayer.mlp.up_proj.weight", "0.5.10") == "midlayer.mlp.up_proj.weight"
    assert eagle3_param_for_key("layers.0.mlp.up_proj.weight", "0.5.10") is None
    assert eagle3_param_for_key("layers.0.mlp.up_proj.weight", "0.5.14") == "midlayer.mlp.up_proj.weight"
    assert eagle3_param_for_key("layers.1.mlp.up_proj.weight", "0.5.23") is None
    assert eagle3_param_for_key("aux_norm_mid.weight", "0.5.23") == "fc_norm.1.weight"
    assert eagle3_param_for_key("model.fc.weight", "0.5.23") == "fc.weight"
    assert eagle3_param_for_key("transformer.h.0.w", "0.5.23") is None
    assert has_feature("cuda_graph_max_bs_flag", "0.5.10") and not has_feature("cuda_graph_max_bs_flag", "0.5.23")


def test_spec_meta_keys_old_and_new(golden):
    meta = json.loads((golden / "runs/eagle3_aligned_warm/generate_nonstream.json").read_text())["response"]["meta_info"]
    assert read_spec_meta(meta, "correct_drafts") == 24 and read_spec_meta(meta, "histogram") == [0, 24]
    old = {"spec_verify_ct": 3, "spec_accept_token_num": 4, "spec_accept_histogram": [1, 1, 1]}
    assert read_spec_meta(old, "correct_drafts") == 4 and read_spec_meta(old, "histogram") == [1, 1, 1]
    assert SPEC_META_KEYS["verify_ct"] == ("spec_verify_ct",)


def test_resolve_version_order():
    assert resolve_version(cli="0.5.10", profile="0.5.14") == ("0.5.10", "cli")
    assert resolve_version(profile="0.5.14", server="0.5.23") == ("0.5.14", "profile")
    assert resolve_version(server="0.5.23") == ("0.5.23", "server")
    assert resolve_version(installed=False) == ("0.5.23", "assumed")


def _draft(tmp_path, *, prefix="midlayer", shards=False):
    h, v, dv = 16, 64, 32
    d = tmp_path / "draft"
    d.mkdir()
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": h, "num_hidden_layers": 1,
           "vocab_size": v, "draft_vocab_size": dv, "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
           "eagle_aux_hidden_state_layer_ids": [1, 3, 5]}
    (d / "config.json").write_text(json.dumps(cfg))
    t = {"fc.weight": np.zeros((h, 3 * h), np.float32), f"{prefix}.hidden_norm.weight": np.ones(h, np.float32),
         "d2t": np.full(dv, 5, np.int64), "t2d": np.zeros(v, bool), "lm_head.weight": np.zeros((dv, h), np.float16)}
    if shards:
        a = {k: t[k] for k in ("fc.weight", "d2t")}
        b = {k: t[k] for k in t if k not in a}
        save_file(a, str(d / "model-00001-of-00002.safetensors"))
        save_file(b, str(d / "model-00002-of-00002.safetensors"))
        wm = {k: "model-00001-of-00002.safetensors" for k in a} | {k: "model-00002-of-00002.safetensors" for k in b}
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    else:
        save_file(t, str(d / "model.safetensors"))
    return d


@pytest.mark.parametrize("shards", [False, True])
def test_read_draft_headers(tmp_path, shards):
    info = read_draft(_draft(tmp_path, shards=shards))
    assert info.model.tensors["fc.weight"].shape == (16, 48)
    assert info.model.tensors["lm_head.weight"].dtype == "F16"
    assert info.fc_in_features == 48 and info.fc_multiple == 3.0 and info.is_eagle3
    assert info.draft_vocab_size == 32 and info.num_aux == 3
    assert info.aux_layer_ids == {"top_level": [1, 3, 5]}
    assert list(info.model.load_tensor("d2t")[:3]) == [5, 5, 5]
    assert info.model.weight_bytes() == 16 * 48 * 4 + 16 * 4 + 32 * 8 + 64 + 32 * 16 * 2


def test_read_errors(tmp_path):
    with pytest.raises(CheckpointError, match="no such model directory"):
        read_target(tmp_path / "nope")
    (tmp_path / "m").mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        read_target(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        read_target(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{}")
    (tmp_path / "m" / "pytorch_model.bin").write_bytes(b"x")
    assert "pickle checkpoint" in read_model_dir(tmp_path / "m").notes[0]


def test_golden_draft_configs_interpret(golden):
    cfg = json.loads((golden / "env/models/draft_aligned/config.json").read_text())
    assert cfg["draft_vocab_size"] == 8000


def test_virtual_models():
    d = read_draft("sim:llama-3.1-8b-eagle3")
    assert d.is_eagle3 and d.fc_in_features == 3 * 4096 and d.draft_vocab_size == 32000
    d2t = d.model.load_tensor("d2t")
    assert d2t.shape == (32000,) and (d2t + np.arange(32000)).max() < 128256
    with pytest.raises(CheckpointError, match="known: sim:"):
        read_model_dir("sim:nope")
