"""Drafter self-test: the generated tiny head separates wired-right from the served-wrong wirings."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from specdash.checkpoint.tiny import write_safetensors
from specdash.commands.draft import add_draft_arguments, draft_selftest_main
from specdash.eagle3.sample import make_tiny_draft_and_sample
from specdash.eagle3.selftest import SelftestError, _Head, run_selftest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_draft_and_sample(tmp_path_factory.mktemp("tiny"), seed=7)


def test_separates_wiring_by_a_wide_margin(tiny):
    draft, sample = tiny
    rep = run_selftest(draft, sample)  # its speed is a benchmark: benchmarks/selftest_time.py
    acc = {v.name: v.accuracy for v in rep.variants}
    assert acc["wired"] > 0.8
    assert acc["one_layer"] < 0.1 and acc["shifted"] < 0.1 and acc["d2t_absolute"] < 0.1
    assert acc["wired"] - max(acc["one_layer"], acc["shifted"], acc["d2t_absolute"]) > 0.7
    assert rep.works and 0.9 < rep.reachable <= 1.0 and rep.chance == pytest.approx(1 / 128)
    assert "wired right scores" in rep.verdict and "points at wiring" in rep.verdict
    assert "one layer later" in rep.variant("shifted").note
    js = json.loads(json.dumps(rep.to_json()))
    assert js["works"] is True and len(js["variants"]) == 4


def test_speculators_naming_and_paired_layout(tmp_path):
    draft, sample = make_tiny_draft_and_sample(tmp_path / "a", seed=1, layer_prefix="layers.0", positions=120)
    raw = run_selftest(draft, sample).variant("wired").accuracy
    assert raw > 0.8
    # the same rows written in the paired layout score the same
    from safetensors.numpy import load_file

    s = load_file(str(sample))
    ids, hs = s["input_ids"], s["hidden_states"]
    paired = {"input_ids": ids[1:-1].copy(), "hidden_states": hs[:-2].copy(), "target_ids": ids[2:].copy(),
              "embed_tokens": s["embed_tokens"]}
    from safetensors.numpy import save_file

    save_file(paired, str(tmp_path / "paired.safetensors"), metadata={"layout": "paired"})
    rep = run_selftest(draft, tmp_path / "paired.safetensors")
    assert rep.variant("wired").accuracy == pytest.approx(raw)
    assert rep.variant("shifted").skipped and "hidden_states_all" in rep.variant("shifted").skipped


def test_embeddings_from_target_dir(tmp_path, tiny):
    draft, sample = tiny
    from safetensors.numpy import load_file, save_file

    s = load_file(str(sample))
    tgt = tmp_path / "target"
    tgt.mkdir()
    (tgt / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": 512}))
    save_file({"model.embed_tokens.weight": s["embed_tokens"]}, str(tgt / "model.safetensors"))
    save_file({k: v for k, v in s.items() if k != "embed_tokens"}, str(tmp_path / "noembed.safetensors"),
              metadata={"layout": "raw"})
    rep = run_selftest(draft, tmp_path / "noembed.safetensors", target=tgt)
    assert rep.variant("wired").accuracy > 0.8 and any("model.embed_tokens.weight" in n for n in rep.notes)
    with pytest.raises(SelftestError, match="no embeddings"):
        run_selftest(draft, tmp_path / "noembed.safetensors")


def test_untrained_head_scores_low(tmp_path, tiny):
    draft, sample = tiny
    from safetensors.numpy import load_file, save_file

    w = load_file(str(draft / "model.safetensors"))
    w["fc.weight"] = np.random.default_rng(0).standard_normal(w["fc.weight"].shape).astype(np.float32)
    bad = tmp_path / "bad"
    bad.mkdir()
    save_file(w, str(bad / "model.safetensors"))
    (bad / "config.json").write_text((draft / "config.json").read_text())
    rep = run_selftest(bad, sample)
    assert rep.variant("wired").accuracy < 0.1 and not rep.works and "points at training" in rep.verdict


def test_forward_properties(tiny):
    """Causality, fc bypass when widths match, and RoPE relative-position invariance."""
    draft, _ = tiny
    from specdash.checkpoint.reader import read_model_dir

    notes: list[str] = []
    emb = torch.randn(512, 64)
    head = _Head(read_model_dir(draft), emb, notes)
    ids = torch.randint(0, 512, (12,))
    hs = torch.randn(12, 192)
    full = head.logits(ids, hs)
    ids2, hs2 = ids.clone(), hs.clone()
    ids2[8:], hs2[8:] = 0, 0.0
    assert torch.allclose(head.logits(ids2, hs2)[:8], full[:8], atol=1e-5)  # causal: no look-ahead
    h64 = torch.randn(5, 64)
    assert torch.equal(head.fc_in(h64), h64)  # width == hidden: fc skipped, as SGLang does
    assert head.fc_in(torch.randn(5, 192)).shape == (5, 64)
    q = torch.randn(1, 4, 16)
    k = torch.randn(1, 4, 16)
    s1 = (head._rope(q, torch.tensor([3])) * head._rope(k, torch.tensor([1]))).sum()
    s2 = (head._rope(q, torch.tensor([10])) * head._rope(k, torch.tensor([8]))).sum()
    assert torch.allclose(s1, s2, atol=1e-4)  # RoPE scores depend only on the distance


def test_bad_inputs(tmp_path, tiny):
    draft, sample = tiny
    write_safetensors(tmp_path / "nohs.safetensors", {"input_ids": ("I64", (4,))})
    with pytest.raises(SelftestError, match="hidden_states"):
        run_selftest(draft, tmp_path / "nohs.safetensors")
    with pytest.raises(SelftestError):
        run_selftest(draft, tmp_path / "missing.safetensors")
    with pytest.raises(SelftestError, match="virtual"):
        run_selftest("sim:llama-3.1-8b-eagle3", sample)


def test_selftest_main(tiny, capsys):
    draft, sample = tiny
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="draft_cmd", required=True)
    add_draft_arguments(sub)
    assert draft_selftest_main(p.parse_args(["selftest", str(draft), "--sample", str(sample), "--json"])) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["variants"][0]["name"] == "wired"
    assert draft_selftest_main(p.parse_args(["selftest", str(draft), "--sample", "/nonexistent"])) == 2
    assert "selftest" in capsys.readouterr().err
