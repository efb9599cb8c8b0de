"""``specdash draft fix``: corrected copies that pass the doctor, byte-exact tensors, untouched sources."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from specdash.checkpoint.reader import read_draft, read_model_dir
from specdash.checkpoint.tiny import tiny_draft, tiny_target
from specdash.commands.draft import add_draft_arguments, draft_fix_main
from specdash.eagle3.convert import ConvertError, fix_draft, read_safetensors_header
from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.sample import write_profile


def _digest(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


def _doctor(tmp_path: Path, draft: Path, version: str):
    t = tmp_path / "target"
    if not t.exists():
        tiny_target(t)
    return run_doctor(write_profile(tmp_path / f"p-{draft.name}.toml", model_path=str(t), draft_path=str(draft),
                                    sglang_version=version))


def test_layers0_fix_passes_doctor_at_0_5_10(tmp_path):
    src = tiny_draft(tmp_path / "src", layer_prefix="layers.0")
    (src / "tokenizer.json").write_text('{"fake": true}')
    before = _digest(src)
    assert _doctor(tmp_path, src, "0.5.10").has_errors
    res = fix_draft(src, tmp_path / "dst", sglang_version="0.5.10")
    assert _digest(src) == before  # source untouched
    renames = [c for c in res.changes if c.kind == "rename"]
    assert len(renames) == 10 and "layers.0.mlp.up_proj.weight → midlayer.mlp.up_proj.weight" in str(renames)
    assert any(c.kind == "copy" and c.detail == "tokenizer.json" for c in res.changes)
    assert (tmp_path / "dst" / "tokenizer.json").read_text() == '{"fake": true}'
    rep = _doctor(tmp_path, tmp_path / "dst", "0.5.10")
    assert not rep.has_errors, rep.render()
    assert "midlayer.self_attn.q_proj.weight" in read_model_dir(tmp_path / "dst").tensors
    assert "specdash doctor" in res.render()


def test_existing_destination_and_bad_source_refused(tmp_path):
    src = tiny_draft(tmp_path / "src")
    (tmp_path / "dst").mkdir()
    with pytest.raises(ConvertError, match="already exists"):
        fix_draft(src, tmp_path / "dst")
    with pytest.raises(ConvertError):
        fix_draft(tmp_path / "nope", tmp_path / "dst2")
    with pytest.raises(ConvertError):
        fix_draft("sim:llama-3.1-8b-eagle3", tmp_path / "dst3")
    assert not (tmp_path / "dst2").exists() and not (tmp_path / "dst3").exists()


def test_absolute_d2t_and_top_level_ids_and_missing_dvs(tmp_path):
    src = tiny_draft(tmp_path / "src", d2t="absolute", top_ids=[0, 2, 5], draft_vocab_in_config="absent")
    bad = _doctor(tmp_path, src, "0.5.23")
    assert {"VOCAB_MAP", "AUX_LAYERS"} <= {f.code for f in bad.findings if f.severity == "error"}
    abs_ids = np.asarray(read_model_dir(src).load_tensor("d2t"))
    res = fix_draft(src, tmp_path / "dst")
    kinds = [c.kind for c in res.changes]
    assert "d2t" in kinds and kinds.count("config") == 2
    out = read_draft(tmp_path / "dst")
    assert out.aux_layer_ids == {"eagle_config": [0, 2, 5]} and out.draft_vocab_size == 128
    d2t = np.asarray(out.model.load_tensor("d2t"))
    assert np.array_equal(d2t + np.arange(len(d2t)), abs_ids)
    good = _doctor(tmp_path, tmp_path / "dst", "0.5.23")
    assert not good.has_errors, good.render()


def test_offsets_are_left_alone_and_forced_rewrite(tmp_path):
    src = tiny_draft(tmp_path / "src")
    res = fix_draft(src, tmp_path / "dst")
    assert not res.changed
    orig = np.asarray(read_model_dir(src).load_tensor("d2t"))
    assert np.array_equal(np.asarray(read_model_dir(tmp_path / "dst").load_tensor("d2t")), orig)
    fix_draft(src, tmp_path / "forced", d2t_absolute=True)
    forced = np.asarray(read_model_dir(tmp_path / "forced").load_tensor("d2t"))
    assert np.array_equal(forced, orig - np.arange(len(orig)))


def test_hot_token_ids_add_d2t_and_t2d(tmp_path):
    src = tiny_draft(tmp_path / "src", d2t=None)
    ids = sorted(np.random.default_rng(3).choice(np.arange(512), 128, replace=False).tolist())
    (tmp_path / "ids.json").write_text(json.dumps({"selected_token_ids": ids}))
    fix_draft(src, tmp_path / "dst", hot_token_ids=str(tmp_path / "ids.json"))
    md = read_model_dir(tmp_path / "dst")
    d2t = np.asarray(md.load_tensor("d2t"))
    assert np.array_equal(d2t + np.arange(128), ids)
    assert np.flatnonzero(np.asarray(md.load_tensor("t2d"))).tolist() == ids
    assert not _doctor(tmp_path, tmp_path / "dst", "0.5.23").has_errors
    (tmp_path / "short.json").write_text(json.dumps(ids[:10]))
    with pytest.raises(ConvertError, match="10 ids"):
        fix_draft(src, tmp_path / "dst2", hot_token_ids=str(tmp_path / "short.json"))


def test_bf16_bytes_exact_and_sharded_index(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file, save_file

    src = tmp_path / "src"
    src.mkdir()
    g = torch.Generator().manual_seed(0)
    h = 16
    parts = {"layers.0.self_attn.q_proj.weight": (h, 2 * h), "layers.0.self_attn.k_proj.weight": (h, 2 * h),
             "layers.0.self_attn.v_proj.weight": (h, 2 * h), "layers.0.self_attn.o_proj.weight": (h, h),
             "layers.0.mlp.gate_proj.weight": (32, h), "layers.0.mlp.up_proj.weight": (32, h),
             "layers.0.mlp.down_proj.weight": (h, 32), "layers.0.input_layernorm.weight": (h,),
             "layers.0.post_attention_layernorm.weight": (h,), "layers.0.hidden_norm.weight": (h,)}
    shard1 = {k: torch.randn(*s, generator=g).to(torch.bfloat16) for k, s in parts.items()}
    shard2 = {"fc.weight": torch.randn(h, 3 * h, generator=g).to(torch.bfloat16),
              "norm.weight": torch.ones(h, dtype=torch.bfloat16),
              "lm_head.weight": torch.randn(64, h, generator=g).to(torch.bfloat16)}
    save_file(shard1, str(src / "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
    save_file(shard2, str(src / "model-00002-of-00002.safetensors"), metadata={"format": "pt"})
    wmap = {k: "model-00001-of-00002.safetensors" for k in shard1} | {k: "model-00002-of-00002.safetensors"
                                                                     for k in shard2}
    (src / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": wmap}))
    (src / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": h, "num_hidden_layers": 1,
        "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 32,
        "vocab_size": 64, "draft_vocab_size": 64, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}))
    fix_draft(src, tmp_path / "dst", sglang_version="0.5.10")
    out1 = load_file(str(tmp_path / "dst" / "model-00001-of-00002.safetensors"))
    for k, v in shard1.items():
        new = "midlayer." + k[len("layers.0."):]
        assert out1[new].dtype == torch.bfloat16 and torch.equal(out1[new].view(torch.int16), v.view(torch.int16))
    hdr, _ = read_safetensors_header(tmp_path / "dst" / "model-00001-of-00002.safetensors")
    assert hdr["__metadata__"] == {"format": "pt"}
    index = json.loads((tmp_path / "dst" / "model.safetensors.index.json").read_text())
    assert index["weight_map"]["midlayer.hidden_norm.weight"] == "model-00001-of-00002.safetensors"
    assert "layers.0.hidden_norm.weight" not in index["weight_map"]
    assert index["metadata"]["total_size"] == sum(v.numel() * 2 for v in {**shard1, **shard2}.values())
    assert len(read_model_dir(tmp_path / "dst").tensors) == 13


def test_foreign_prefix_rename(tmp_path):
    src = tiny_draft(tmp_path / "src", rename={"fc.weight": "eagle.fc.weight"})
    res = fix_draft(src, tmp_path / "dst")
    assert any(c.detail == "eagle.fc.weight → fc.weight" for c in res.changes)
    assert not _doctor(tmp_path, tmp_path / "dst", "0.5.23").has_errors


def test_draft_fix_main(tmp_path, capsys):
    src = tiny_draft(tmp_path / "src", layer_prefix="layers.0")
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="draft_cmd", required=True)
    add_draft_arguments(sub)
    args = p.parse_args(["fix", str(src), "--out", str(tmp_path / "dst"), "--sglang-version", "0.5.10", "--json"])
    assert draft_fix_main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dst"].endswith("dst") and any(c["kind"] == "rename" for c in out["changes"])
    assert draft_fix_main(args) == 2  # DST exists now
    assert "already exists" in capsys.readouterr().err
