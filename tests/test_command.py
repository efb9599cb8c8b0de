"""SGLang's speculative normalisation, command-line parsing, profile import/show."""

from __future__ import annotations

import json
import tomllib

import pytest

from specdash.cli import main
from specdash.commands.profile import profile_from_command
from specdash.profile import build_launch, load_profile, parse_profile
from specdash.sglang.cmdline import parse_command_line
from specdash.sglang.speculative import LOG_TOPK1_ADJUST, normalize_speculative

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


# --- pasted shell forms, abbreviations, names, header wrapping, show quoting -----------------

_LAUNCH = "python3 -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 --port 30000"


@pytest.mark.parametrize(
    "text",
    [
        f"export NCCL_PROTO=LL NCCL_ALGO=Ring; {_LAUNCH}",
        f"export NCCL_PROTO=LL NCCL_ALGO=Ring && {_LAUNCH}",
        f"export NCCL_PROTO=LL\nexport NCCL_ALGO=Ring\n{_LAUNCH}\n",
        f"NCCL_PROTO=LL\nNCCL_ALGO=Ring\n{_LAUNCH}",
        f"sudo -E NCCL_PROTO=LL NCCL_ALGO=Ring {_LAUNCH}",
        f"$ NCCL_PROTO=LL NCCL_ALGO=Ring {_LAUNCH}",
        f"# NCCL_PROTO=LL NCCL_ALGO=Ring {_LAUNCH}",
        f"export NCCL_PROTO=LL\n$ NCCL_ALGO=Ring nohup {_LAUNCH} > server.log 2>&1 &",
        f"NCCL_PROTO=LL env NCCL_ALGO=Ring time {_LAUNCH}  # start it",
        f"NCCL_PROTO=LL NCCL_ALGO=Ring \\\n  {_LAUNCH.replace(' --', chr(10) + '  --')}",
    ],
)
def test_parse_pasted_shell_forms_keep_env(text):
    c = parse_command_line(text)
    assert c.env == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
    assert c.program == ["python3", "-m", "sglang.launch_server"]
    assert c.flags == {"--model-path": "/m", "--speculative-algorithm": "EAGLE3", "--port": "30000"}
    prof, _ = profile_from_command(text)
    assert prof.env == {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"} and prof.speculative.algorithm == "EAGLE3"


def test_parse_cuda_visible_devices_prefix_and_other_statements():
    c = parse_command_line(f"cd /srv && CUDA_VISIBLE_DEVICES=0,1 {_LAUNCH} --api-key '#x;y'")
    assert c.env == {"CUDA_VISIBLE_DEVICES": "0,1"} and c.flags["--api-key"] == "#x;y"
    assert any("cd /srv" in n for n in c.notes)


def test_parse_refuses_several_sglang_commands():
    from specdash.profile import ProfileError

    with pytest.raises(ValueError, match="2 SGLang launch commands"):
        parse_command_line(f"{_LAUNCH}\nsglang serve --model-path /other")
    with pytest.raises(ProfileError, match="2 SGLang launch commands"):
        profile_from_command(f"{_LAUNCH}; {_LAUNCH} --port 1")


def test_import_launcher_prefix_dropped_with_note(tmp_path, capsys):
    prof, cmd = profile_from_command(f"NCCL_PROTO=LL uv run {_LAUNCH}")
    assert cmd.program == ["uv", "run", "python3", "-m", "sglang.launch_server"]
    assert prof.server.python is None and prof.env == {"NCCL_PROTO": "LL"}
    assert any("`uv run` was dropped" in n and "python3 -m sglang.launch_server" in n and "[server] python" in n
               for n in cmd.notes)
    prof, cmd = profile_from_command("conda run -n sgl /opt/conda/envs/sgl/bin/python -m sglang.launch_server "
                                     "--model-path /m")
    assert prof.server.python == "/opt/conda/envs/sgl/bin/python"
    assert any("`conda run -n sgl` was dropped" in n for n in cmd.notes)
    out = tmp_path / "u.toml"
    assert main(["profile", "import", f"uv run {_LAUNCH}", "--out", str(out)]) == 0
    assert "note: the launcher prefix `uv run` was dropped" in capsys.readouterr().out


def test_import_expands_argparse_abbreviations():
    text = ("python -m sglang.launch_server --model-path /m --speculative-algo EAGLE "
            "--speculative-draft-model-p /d --speculative-num-draft 4 --speculative-num-st 3 "
            "--speculative-eagle 1 --trust-remote --mem-frac=0.8")
    assert "--speculative-algo" in parse_command_line(text).flags  # without a version: kept as typed
    prof, cmd = profile_from_command(text, version="0.5.23")
    sp = prof.speculative
    assert (sp.algorithm, sp.draft_model_path, sp.num_draft_tokens, sp.num_steps, sp.eagle_topk) == (
        "EAGLE", "/d", 4, 3, 1)
    assert prof.server.mem_fraction_static == 0.8 and "--trust-remote-code" in prof.server.extra_args
    assert any("--speculative-algo is an abbreviation of --speculative-algorithm" in n for n in cmd.notes)
    # exact names win, unknown flags are kept as typed
    c = parse_command_line("sglang serve --model x --tp 2 --my-plugin-flag 1", version="0.5.23")
    assert c.flags == {"--model-path": "x", "--tp-size": "2", "--my-plugin-flag": "1"}


def test_import_ambiguous_abbreviation_is_an_error(capsys):
    from specdash.profile import ProfileError
    from specdash.sglang.cmdline import AmbiguousFlagError

    with pytest.raises(AmbiguousFlagError) as exc:
        parse_command_line("sglang serve --model-path /m --speculative-draft /d", version="0.5.23")
    assert "--speculative-draft-model-path" in exc.value.candidates and "--speculative-draft-model" in str(exc.value)
    with pytest.raises(ProfileError, match="ambiguous option: --speculative-draft could match"):
        profile_from_command("sglang serve --model-path /m --speculative-draft /d", version="0.5.14")
    assert main(["profile", "import", "sglang serve --model-path /m --spec EAGLE"]) == 2
    assert "ambiguous option" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["../escaped", "a b/c", "a/b", ".hidden", "", "x\\y", "ok name"])
def test_import_rejects_bad_profile_names(bad, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "import", _LAUNCH, "--name", bad]) == 2
    assert "invalid profile name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / "escaped.toml").exists()
    assert main(["profile", "import", _LAUNCH, "--name", "my_prof-1.2"]) == 0
    assert (tmp_path / "my_prof-1.2.toml").exists()


def test_import_header_does_not_break_flags(tmp_path):
    out = tmp_path / "k.toml"
    assert main(["profile", "import", SEEDS_CMD, "--out", str(out)]) == 0
    header = "".join(line[1:] for line in out.read_text().splitlines() if line.startswith("#"))
    for word in SEEDS_CMD.split():
        assert word in header.split()


def test_show_quotes_argv_words(tmp_path, capsys):
    p = tmp_path / "q.toml"
    p.write_text('name="q"\n[server]\nmodel_path="/models/my llama"\nextra_args=["--chat-template", "a;b"]\n'
                 '[env]\nNCCL_X_OPTS="-a -b"\n')
    assert main(["profile", "show", str(p)]) == 0
    out = capsys.readouterr().out
    assert "--model-path '/models/my llama'" in out and "--chat-template 'a;b'" in out
    assert "NCCL_X_OPTS='-a -b'" in out


def test_build_launch_resolves_adaptive_first_like_0514(tmp_path):
    """0.5.14 resolves --speculative-adaptive before the EAGLE checks (speculative_hook.py):
    with no steps / top-k / draft tokens it runs 3 / 1 / 4, not the auto-chosen tree; profile
    show and the launch panel must say what the server will run, like the doctor does."""
    spec_cfg = {"algorithm": "EAGLE3", "draft_model_path": "sim:llama-3.1-8b-eagle3"}
    data = {"name": "a", "server": {"model_path": "sim:llama-3.1-8b", "sglang_version": "0.5.14", "launcher": "sim"},
            "speculative": dict(spec_cfg, extra_args=["--speculative-adaptive"])}
    eff = build_launch(parse_profile(data, tmp_path / "a.toml").expanded(), version="0.5.14").spec.effective()
    assert (eff["speculative_num_steps"], eff["speculative_eagle_topk"], eff["speculative_num_draft_tokens"]) == (3, 1, 4)
    static = dict(data, speculative=spec_cfg)
    eff0 = build_launch(parse_profile(static, tmp_path / "b.toml").expanded(), version="0.5.14").spec.effective()
    assert eff0["speculative_eagle_topk"] != 1  # without adaptive SGLang auto-chooses a tree for Llama


def test_profile_import_never_writes_a_secret(tmp_path, capsys):
    out = tmp_path / "k.toml"
    cmd = "python -m sglang.launch_server --model-path /m --api-key sk-secret123 --admin-api-key adm1n"
    assert main(["profile", "import", cmd, "--out", str(out)]) == 0
    text = out.read_text()
    assert "sk-secret123" not in text and "adm1n" not in text
    assert 'api_key = "${SGLANG_API_KEY}"' in text
    printed = capsys.readouterr().out
    assert "export SGLANG_API_KEY" in printed and "--admin-api-key dropped" in printed


def test_pasted_command_shapes_from_a_terminal(tmp_path, capsys):
    """What people paste: a flag without its value, SGLang's multi-value flags, colour codes, ANSI-C
    quoting, a flag given twice — each parsed as the shell and SGLang's argparse read it, or refused
    with the flag named."""
    import pytest

    from specdash.cli import main
    from specdash.sglang.cmdline import flags_to_argv, parse_command_line

    base = "python -m sglang.launch_server --model-path /m"
    with pytest.raises(ValueError, match=r"--model-path needs a value \(at the end of the line\)"):
        parse_command_line("python -m sglang.launch_server --model-path")
    with pytest.raises(ValueError, match="--port needs a value .before --tp"):
        parse_command_line(base + " --port --tp 2")
    cmd = parse_command_line(base + " --cuda-graph-bs-decode 1 2 4 8 --tp 2")
    assert cmd.flags["--cuda-graph-bs-decode"] == ["1", "2", "4", "8"] and cmd.flags["--tp-size"] == "2"
    assert flags_to_argv({"--cuda-graph-bs-decode": ["1", "2"]}) == ["--cuda-graph-bs-decode", "1", "2"]
    cmd = parse_command_line("\x1b[1;32m$\x1b[0m " + base + " \x1b[0m--tp 2\x1b[K")
    assert cmd.flags["--tp-size"] == "2" and cmd.flags["--model-path"] == "/m"
    cmd = parse_command_line("python -m sglang.launch_server --model-path $'/models/a\\tb' --tp 2")
    assert cmd.flags["--model-path"] == "/models/a\tb"
    cmd = parse_command_line(base + " --tp 2 --tp 4")
    assert cmd.flags["--tp-size"] == "4" and any("given more than once" in n for n in cmd.notes)
    cmd = parse_command_line(base + " --speculative-num-steps -1")  # a negative number is a value
    assert cmd.flags["--speculative-num-steps"] == "-1"
    # import writes no control character into the TOML, and show keeps a flag's values on its line
    out = tmp_path / "p.toml"
    assert main(["profile", "import", "\x1b[0m" + base + " --cuda-graph-bs-decode 1 2 4 8", "--name", "p",
                 "--out", str(out)]) == 0
    text = out.read_text()
    assert "\x1b" not in text and 'extra_args = ["--cuda-graph-bs-decode", "1", "2", "4", "8"]' in text
    capsys.readouterr()
    assert main(["profile", "show", str(out)]) == 0
    assert "    --cuda-graph-bs-decode 1 2 4 8\n" in capsys.readouterr().out


def test_parse_command_line_never_raises_anything_but_valueerror():
    """Fuzz: any text gives a ParsedCommand or a ValueError with a message — never another exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from specdash.sglang.cmdline import parse_command_line

    words = st.sampled_from(["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2", "'", '"',
                             "\\", "$'", "\x1b[0m", ";", "&&", "|", ">", "2>&1", "#", "X=1", "--", "-", "=", "\n",
                             "--cuda-graph-bs-decode", "1", "sudo", "-E", "export", "$", "\t", "\x00"])

    @settings(max_examples=400, deadline=None)
    @given(st.lists(words, max_size=14).map(" ".join) | st.text(max_size=60))
    def check(text):
        try:
            parse_command_line(text)
        except ValueError as exc:
            assert str(exc)

    check()
