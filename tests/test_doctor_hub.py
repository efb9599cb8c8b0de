"""Hub ids in profiles (issue 13: "silent all-clears"): the doctor checks the snapshot in the local Hugging Face
cache, offline, and says plainly — as a warning, not an info — when there is none to check.

The cache is built the way ``huggingface_hub`` lays it out (``models--owner--name/refs/main`` holding a commit
hash, ``snapshots/<hash>/`` the files), with specdash's tiny header-true checkpoints inside.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.checkpoint.hub import cached_snapshot, is_hub_id
from specdash.checkpoint.tiny import tiny_draft, tiny_target
from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.sample import write_profile

pytest.importorskip("huggingface_hub")

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _cache(root: Path, repo: str, make) -> Path:
    owner, name = repo.split("/")
    base = root / f"models--{owner}--{name}"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(COMMIT)
    snap = base / "snapshots" / COMMIT
    make(snap)
    return snap


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants as hc

    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(root))
    return root


def test_hub_id_shape():
    assert is_hub_id("meta-llama/Llama-3.1-8B-Instruct") and is_hub_id("a/b.c")
    assert not any(is_hub_id(p) for p in ("/abs/path", "./rel/x", "~/x/y", "a/b/c", "plain"))


def test_cached_snapshots_are_checked_like_local_directories(tmp_path, hub_cache):
    t = _cache(hub_cache, "acme/tiny-target", lambda d: tiny_target(d))
    d = _cache(hub_cache, "acme/tiny-eagle3", lambda p: tiny_draft(p))
    assert cached_snapshot("acme/tiny-target").path == t
    rep = run_doctor(write_profile(tmp_path / "p.toml", model_path="acme/tiny-target", draft_path="acme/tiny-eagle3",
                                   sglang_version="0.5.14"))
    hub_infos = [f for f in rep.findings if "cached snapshot" in f.message]
    assert len(hub_infos) == 2 and all(f.severity == "info" for f in hub_infos)
    assert {f.evidence["snapshot"] for f in hub_infos} == {str(t), str(d)}
    assert not rep.has_errors and not [f for f in rep.findings if f.severity == "warning"], rep.render()
    # the same checks as on local directories: one finding set, the two hub notes aside
    local = run_doctor(write_profile(tmp_path / "l.toml", model_path=str(t), draft_path=str(d), sglang_version="0.5.14"))
    assert sorted(f.code for f in rep.findings if f not in hub_infos) == sorted(f.code for f in local.findings)


def test_a_broken_cached_draft_is_caught(tmp_path, hub_cache):
    _cache(hub_cache, "acme/tiny-target", lambda d: tiny_target(d))
    _cache(hub_cache, "acme/bad-eagle3", lambda p: tiny_draft(p, d2t="absolute"))
    rep = run_doctor(write_profile(tmp_path / "p.toml", model_path="acme/tiny-target", draft_path="acme/bad-eagle3",
                                   sglang_version="0.5.14"))
    assert any(f.code == "VOCAB_MAP" and f.severity == "error" for f in rep.findings), rep.render()


def test_an_uncached_hub_id_is_a_warning_that_says_how_to_fetch_it(tmp_path, hub_cache):
    rep = run_doctor(write_profile(tmp_path / "p.toml", model_path="acme/not-here", draft_path="acme/nor-this",
                                   sglang_version="0.5.14"))
    warns = [f for f in rep.findings if f.severity == "warning" and "NOT run" in f.message]
    assert {f.code for f in warns} == {"CHECKPOINT", "DRAFT_PATH"}
    assert all("not in the local Hugging Face cache" in f.message and str(hub_cache) in f.message for f in warns)
    assert any(f.fix.startswith("hf download acme/not-here") for f in warns)
    assert "0 warning(s)" not in rep.render()


def test_an_interrupted_download_is_a_warning_not_an_error(tmp_path, hub_cache):
    import json

    _cache(hub_cache, "acme/tiny-target", lambda d: tiny_target(d))

    def config_only(d):
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64}))

    _cache(hub_cache, "acme/half-eagle3", config_only)
    rep = run_doctor(write_profile(tmp_path / "p.toml", model_path="acme/tiny-target", draft_path="acme/half-eagle3",
                                   sglang_version="0.5.14"))
    (w,) = [f for f in rep.findings if "has no weight files yet" in f.message]
    assert w.severity == "warning" and "hf download" in w.fix
    assert not any("no safetensors tensors" in f.message for f in rep.findings)
