"""SGLang's speculative normalisation, command-line parsing, profile import/show."""

from __future__ import annotations

import json
import tomllib

import pytest

from specdash.cli import main
from specdash.profile import load_profile, parse_profile
from specdash.profile_cli import profile_from_command
from specdash.sglang.command import (
    LOG_TOPK1_ADJUST,
    build_launch,
    normalize_speculative,
    parse_command_line,
)

SEEDS_CMD = (
    "NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_P2P_LEVEL=SYS NCCL_MAX_NCHANNELS=16 NCCL_BUFFSIZE=16777216 "
    "NCCL_NTHREADS=512 SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 /root/ml-env/bin/python3 -m sglang.launch_server "
    "--model-path /shared/kimi-k2.5-int4 --trust-remote-code --tp-size 8 --mem-fraction-static 0.85 "
    "--host 0.0.0.0 --port 8000 --num-continuous-decode-steps 4 --disable-custom-all-reduce --log-level info "
    "--speculative-algorithm EAGLE --speculative-draft-model-path /data/eagle3/output_10k_sglang/4 "
    "--speculative-num-draft-tokens 5 --speculative-eagle-topk 4 --speculative-num-steps 3"
)


def test_topk1_forces_steps_plus_one_like_real_0514():
    # ../shared/sglang/golden/runs/eagle3_steps1_draft16: asked 16, server reports 2, one WARNING line.
    r = normalize_speculative("EAGLE3", 1, 1, 16, version="0.5.14")
    assert r.effective() == {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 1,
                             "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2}
    adj = {a.field: a for a in r.adjustments}
    assert adj["speculative_num_draft_tokens"].asked == 16 and adj["speculative_num_draft_tokens"].effective == 2
    assert adj["speculative_num_draft_tokens"].log_line == LOG_TOPK1_ADJUST
    assert adj["max_running_requests"].effective == 48 and r.max_running_requests == 48


def test_golden_server_log_has_the_adjustment_line(golden):
    log = (golden / "runs" / "eagle3_steps1_draft16" / "server.log").read_text(errors="replace")
    assert LOG_TOPK1_ADJUST in log
    info = json.loads((golden / "runs" / "eagle3_steps1_draft16" / "server_info.json").read_text())
    r = normalize_speculative(info["speculative_algorithm"], 1, 1, 16, version=info["version"])
    assert r.num_draft_tokens == info["speculative_num_draft_tokens"] == 2


def test_auto_params_and_partial_flags():
    r = normalize_speculative("eagle3", None, None, None, target_architectures=["LlamaForCausalLM"])
    assert (r.num_steps, r.eagle_topk, r.num_draft_tokens, r.auto_chosen) == (5, 4, 8, True)
    r = normalize_speculative("EAGLE3", None, None, None, target_architectures=["Qwen2ForCausalLM"])
    assert (r.num_steps, r.eagle_topk, r.num_draft_tokens) == (3, 1, 4)
    r = normalize_speculative("EAGLE3", None, 4, None)
    assert r.rejections and r.rejections[0].exception == "AssertionError"
    r = normalize_speculative("EAGLE3", 3, None, None)
    assert r.rejections and r.rejections[0].exception == "TypeError"
    assert normalize_speculative("NEXTN", 3, 1, 4).algorithm == "EAGLE"
    assert normalize_speculative("MAGIC", 3, 1, 4).rejections[0].message.startswith("Unknown speculative algorithm")


def test_tree_rules():
    assert normalize_speculative("EAGLE3", 5, 4, 8).adjustments[0].field == "max_running_requests"
    r = normalize_speculative("EAGLE3", 5, 4, 8, page_size=16, attention_backend="trtllm_mha")
    assert len(r.rejections) == 2
    assert not normalize_speculative("EAGLE3", 5, 4, 8, page_size=16, attention_backend="fa3").rejections
    r = normalize_speculative("EAGLE3", 3, 1, 4, use_rejection_sampling=True, draft_vocab_size=32000,
                              target_vocab_size=128256)
    assert "draft vocab" in r.rejections[0].message
    # SGLANG_ENABLE_SPEC_V2=1 on an old release supports chains only (public case C12)
    r = normalize_speculative("EAGLE3", 5, 4, 8, version="0.5.10", env={"SGLANG_ENABLE_SPEC_V2": "1"})
    assert any("SGLANG_ENABLE_SPEC_V2" in x.message and x.exception == "ValueError" for x in r.rejections)
    assert not normalize_speculative("EAGLE3", 5, 4, 8, version="0.5.23", env={"SGLANG_ENABLE_SPEC_V2": "1"}).rejections
    assert normalize_speculative(None, 3, 1, 4).enabled is False


def test_parse_command_line_shapes():
    c = parse_command_line(SEEDS_CMD)
    assert c.env["NCCL_BUFFSIZE"] == "16777216" and len(c.env) == 7
    assert c.program == ["/root/ml-env/bin/python3", "-m", "sglang.launch_server"]
    assert c.flags["--tp-size"] == "8" and c.flags["--trust-remote-code"] is True
    assert c.flags["--disable-custom-all-reduce"] is True and c.flags["--num-continuous-decode-steps"] == "4"
    c = parse_command_line("sglang serve --model meta/x --tp=2 --speculative-draft-model d --port 1")
    assert c.flags == {"--model-path": "meta/x", "--tp-size": "2", "--speculative-draft-model-path": "d", "--port": "1"}
    with pytest.raises(ValueError, match="cannot split"):
        parse_command_line("python -m sglang.launch_server --model-path 'unclosed")


def test_profile_import_roundtrip(tmp_path, capsys):
    prof, _ = profile_from_command(SEEDS_CMD)
    assert prof.name == "kimi-k2.5-int4-eagle"
    assert prof.server.tp_size == 8 and prof.speculative.algorithm == "EAGLE"
    assert prof.server.python == "/root/ml-env/bin/python3"
    out = tmp_path / "k.toml"
    assert main(["profile", "import", SEEDS_CMD, "--out", str(out)]) == 0
    data = tomllib.loads(out.read_text())
    assert data["env"]["NCCL_NTHREADS"] == "512" and data["speculative"]["num_steps"] == 3
    assert out.read_text().startswith("# Imported by specdash profile import")
    assert main(["profile", "import", SEEDS_CMD, "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    launch = build_launch(parse_profile(data, out).expanded())
    assert launch.argv[:3] == ["/root/ml-env/bin/python3", "-m", "sglang.launch_server"]
    assert launch.env["NCCL_PROTO"] == "LL"
    i = launch.argv.index("--speculative-num-draft-tokens")
    assert launch.argv[i + 1] == "5"


def test_profile_import_rejects_non_sglang():
    from specdash.profile import ProfileError

    with pytest.raises(ProfileError, match="not an SGLang launch command"):
        profile_from_command("vllm serve x --tp 2")
    with pytest.raises(ProfileError, match="no --model-path"):
        profile_from_command("python -m sglang.launch_server --tp 2")


def test_profile_show_asked_vs_effective(capsys):
    assert main(["profile", "show", "demo-steps1-draft16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["asked"]["speculative_num_draft_tokens"] == 16
    assert data["effective"]["speculative_num_draft_tokens"] == 2
    assert data["argv"][1:3] == ["-m", "specdash.sim"]
    assert main(["profile", "show", "demo-steps1-draft16"]) == 0
    text = capsys.readouterr().out
    assert "16 → 2" in text and LOG_TOPK1_ADJUST in text


def test_api_key_never_shown(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MY_KEY", "sk-secret-123")
    p = tmp_path / "k.toml"
    p.write_text('name="k"\n[server]\nmodel_path="/m"\napi_key="${MY_KEY}"\n[env]\nHF_TOKEN="hf_abc"\n')
    launch = build_launch(load_profile(str(p)).expanded())
    assert "sk-secret-123" in launch.argv  # the server needs it ...
    assert "sk-secret-123" not in launch.shell_line() and "hf_abc" not in launch.shell_line()
    assert main(["profile", "show", str(p)]) == 0
    out = capsys.readouterr().out
    assert "sk-secret-123" not in out and "hf_abc" not in out and "***" in out


def test_cli_version_and_help_are_light():
    import subprocess
    import sys

    code = ("import sys, specdash.cli as c\n"
            "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "bad=[m for m in ('pydantic','textual','torch','scipy','numpy','httpx') if m in sys.modules]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
