"""The 8B-shaped dummy-weight testbed (benchmarks/h200/testbed.py, testbed_grid.py, testbed.sh, profiles h200-8b-*):
config generation, the checks, the profile and suite copies the device driver runs, CPU only."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from specdash.commands.profile import show_json
from specdash.eagle3.doctor import run_doctor
from specdash.profile import build_launch, load_profile, load_suite, server_flags

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "benchmarks" / "h200"
PROFILES = ("h200-8b-baseline", "h200-8b-eagle3", "h200-8b-seeds-start", "h200-8b-bad-start")
SPEC = {"h200-8b-eagle3": (3, 1, 4), "h200-8b-seeds-start": (3, 4, 5), "h200-8b-bad-start": (15, 1, 16)}


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"_{name}", H200 / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


testbed = _module("testbed")
grid = _module("testbed_grid")

TOKENIZER_FILES = {
    "tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}',
    "tokenizer_config.json": b'{"bos_token": "<s>", "eos_token": "</s>", "model_max_length": 4096}',
    "special_tokens_map.json": b'{"bos_token": "<s>", "eos_token": "</s>"}',
    "chat_template.jinja": b"{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}",
    "generation_config.json": b'{"bos_token_id": 1, "eos_token_id": 2}',
}


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    """A fake tiny-target directory: the tokenizer files plus weights that must NOT be copied."""
    src = tmp_path / "models" / "target"
    src.mkdir(parents=True)
    for name, data in TOKENIZER_FILES.items():
        (src / name).write_bytes(data)
    (src / "config.json").write_text('{"hidden_size": 1024}')
    (src / "model.safetensors").write_bytes(b"not copied")
    return src


@pytest.fixture()
def pair(source: Path) -> Path:
    root = source.parent
    testbed.write_testbed(root)
    return root


def _cfg(path: Path) -> dict:
    return json.loads(path.read_text())


# --- testbed.py --------------------------------------------------------------------------------------------


def test_target_config_has_the_8b_shapes(pair: Path) -> None:
    cfg = _cfg(pair / "llama8b-dummy" / "config.json")
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["intermediate_size"], cfg["vocab_size"], cfg["max_position_embeddings"]) == \
        (4096, 32, 32, 8, 14336, 32000, 8192)
    assert cfg["head_dim"] == 128 and cfg["dtype"] == "bfloat16"


def test_draft_config_has_the_eagle3_shapes_and_aux_ids(pair: Path) -> None:
    cfg = _cfg(pair / "llama8b-eagle3-dummy" / "config.json")
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["intermediate_size"], cfg["vocab_size"], cfg["draft_vocab_size"]) == \
        (4096, 1, 32, 8, 14336, 32000, 32000)
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 15, 28]
    assert "eagle_aux_hidden_state_layer_ids" not in cfg  # only where SGLang reads it


def test_every_tokenizer_file_is_copied_and_no_weights(pair: Path) -> None:
    tgt, drf = pair / "llama8b-dummy", pair / "llama8b-eagle3-dummy"
    for name, data in TOKENIZER_FILES.items():
        assert (tgt / name).read_bytes() == data, name
    assert sorted(p.name for p in tgt.iterdir()) == sorted([*TOKENIZER_FILES, "config.json"])
    assert [p.name for p in drf.iterdir()] == ["config.json"]


def test_optional_tokenizer_files_may_be_absent(source: Path) -> None:
    (source / "special_tokens_map.json").unlink()
    testbed.write_testbed(source.parent)
    assert not (source.parent / "llama8b-dummy" / "special_tokens_map.json").exists()
    assert testbed.check_testbed(source.parent) == []


def test_writing_is_idempotent_and_repairs(pair: Path, capsys) -> None:
    again = testbed.write_testbed(pair)
    assert again and all(line.startswith("unchanged ") for line in again)
    cfg = pair / "llama8b-eagle3-dummy" / "config.json"
    cfg.write_text("{}")
    lines = testbed.write_testbed(pair)
    assert f"rewrote {cfg}" in " ".join(lines)
    assert testbed.main(["--root", str(pair)]) == 0
    assert "OK" in capsys.readouterr().out.splitlines()[-1]


def test_check_passes_on_a_good_pair(pair: Path, capsys) -> None:
    assert testbed.main(["--check", "--root", str(pair)]) == 0
    assert capsys.readouterr().out.strip().endswith(": OK")


def test_check_catches_a_missing_tokenizer_config(pair: Path, capsys) -> None:
    (pair / "llama8b-dummy" / "tokenizer_config.json").unlink()
    assert testbed.main(["--check", "--root", str(pair)]) == 1
    out = capsys.readouterr().out
    assert "tokenizer_config.json: missing tokenizer file" in out
    assert "1 problem(s)" in out


def test_check_catches_wrong_shapes_aux_ids_and_stray_weights(pair: Path) -> None:
    cfg_path = pair / "llama8b-eagle3-dummy" / "config.json"
    cfg = _cfg(cfg_path)
    cfg["num_key_value_heads"] = 32
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [2, 16, 29]
    cfg_path.write_text(json.dumps(cfg))
    (pair / "llama8b-dummy" / "model.safetensors").write_bytes(b"x")
    problems = "\n".join(testbed.check_testbed(pair))
    assert "num_key_value_heads = 32, expected 8" in problems
    assert "eagle_aux_hidden_state_layer_ids = [2, 16, 29]" in problems
    assert "model.safetensors: weight file" in problems


def test_check_of_a_missing_pair_says_how_to_make_it(tmp_path: Path, capsys) -> None:
    assert testbed.main(["--check", "--root", str(tmp_path)]) == 1
    assert "run benchmarks/h200/testbed.py" in capsys.readouterr().out


def test_write_refuses_a_source_without_the_tokenizer(source: Path, capsys) -> None:
    (source / "tokenizer.json").unlink()
    assert testbed.main(["--root", str(source.parent)]) == 2
    assert "lacks tokenizer.json" in capsys.readouterr().err
    assert not (source.parent / "llama8b-dummy").exists()


def test_source_option(tmp_path: Path, source: Path) -> None:
    root = tmp_path / "elsewhere"
    assert testbed.main(["--root", str(root), "--source", str(source)]) == 0
    assert (root / "llama8b-dummy" / "tokenizer.json").read_bytes() == TOKENIZER_FILES["tokenizer.json"]


# --- the profiles and the suite --------------------------------------------------------------------------


@pytest.mark.parametrize("name", PROFILES)
def test_profiles_load_with_dummy_flags_and_the_env(name: str) -> None:
    prof = load_profile(name)
    assert prof.path == ROOT / "profiles" / f"{name}.toml"
    assert prof.server.model_path == "/root/models/llama8b-dummy"
    assert prof.server.sglang_version == "0.5.14"
    assert prof.server.mem_fraction_static == 0.6
    assert prof.server.enable_metrics is True
    flags = server_flags(prof)
    assert flags["--load-format"] == "dummy"
    for flag, value in (("--attention-backend", "triton"), ("--sampling-backend", "pytorch"),
                        ("--grammar-backend", "none"), ("--cuda-graph-max-bs-decode", "16")):
        assert flags[flag] == value, flag
    assert flags["--disable-prefill-cuda-graph"] is True
    assert prof.env["SGLANG_SIMULATE_ACC_LEN"] == "3.0"
    assert prof.env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    for var, value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
                       ("NVSHMEM_DISABLE_NVLS", "1")):
        assert prof.env[var] == value
    assert "spec_utils.py" in prof.path.read_text()
    launch = build_launch(prof)
    assert launch.env["SGLANG_SIMULATE_ACC_LEN"] == "3.0"
    if name in SPEC:
        sp = prof.speculative
        assert sp.algorithm == "EAGLE3" and sp.draft_model_path == "/root/models/llama8b-eagle3-dummy"
        assert (sp.num_steps, sp.eagle_topk, sp.num_draft_tokens) == SPEC[name]
        assert flags["--speculative-draft-load-format"] == "dummy"
        eff = launch.spec.effective()
        assert (eff["speculative_num_steps"], eff["speculative_eagle_topk"],
                eff["speculative_num_draft_tokens"]) == SPEC[name]  # asked = effective: no silent rewrite
    else:
        assert not prof.spec_enabled


def test_profiles_have_distinct_ports() -> None:
    ports = [load_profile(n).server.port for n in PROFILES]
    assert len(set(ports)) == len(ports)


def test_suite_is_for_timing() -> None:
    s = load_suite("h200-8b")
    assert (s.suite.max_tokens, s.suite.temperature, s.suite.ignore_eos, s.suite.concurrency) == (512, 0.0, True, 1)
    assert 3 <= len(s.prompts) <= 6


def test_doctor_on_config_only_dirs_is_clean_with_dummy_weights(pair: Path, tmp_path: Path) -> None:
    for name in PROFILES:
        copy = grid.profile_copy(ROOT / "profiles" / f"{name}.toml", tmp_path / f"{name}.toml", root=str(pair))
        report = run_doctor(str(copy), gpus=[{"name": "H200", "memory_total_mib": 143771}], concurrency=8)
        assert not report.has_errors, report.render()
        assert not report.codes("warning"), report.render()
        ck = [f for f in report.findings if f.code == "CHECKPOINT"]
        assert len(ck) == (2 if name in SPEC else 1) and all(f.severity == "info" for f in ck)
        assert all("dummy weights" in f.message for f in ck)


def test_doctor_still_errors_on_config_only_dirs_without_dummy(pair: Path, tmp_path: Path) -> None:
    data = tomllib.loads((ROOT / "profiles" / "h200-8b-eagle3.toml").read_text())
    data["server"]["extra_args"] = [a for a in data["server"]["extra_args"] if a not in ("--load-format", "dummy")]
    data["speculative"]["extra_args"] = []
    data["server"]["model_path"] = str(pair / "llama8b-dummy")
    data["speculative"]["draft_model_path"] = str(pair / "llama8b-eagle3-dummy")
    path = tmp_path / "real-weights.toml"
    path.write_text(grid.to_toml(data))
    report = run_doctor(str(path))
    assert [f.severity for f in report.findings if f.code == "CHECKPOINT"] == ["error", "error"]
    # the draft inherits --load-format dummy when it has no load format of its own
    data["server"]["extra_args"] += ["--load-format", "dummy"]
    path.write_text(grid.to_toml(data))
    report = run_doctor(str(path))
    assert [f.severity for f in report.findings if f.code == "CHECKPOINT"] == ["info", "info"]
    # … and its own format wins over the target's
    data["speculative"]["extra_args"] = ["--speculative-draft-load-format", "auto"]
    path.write_text(grid.to_toml(data))
    report = run_doctor(str(path))
    assert [f.severity for f in report.findings if f.code == "CHECKPOINT"] == ["error", "info"]


# --- testbed_grid.py: the copies the device driver launches ----------------------------------------------


def test_profile_copy_sets_acceptance_point_and_root(tmp_path: Path) -> None:
    out = grid.profile_copy(ROOT / "profiles" / "h200-8b-eagle3.toml", tmp_path / "p.toml",
                            acc_len="2.5", point=(2, 1, 3), root="/data/m")
    prof = load_profile(str(out))
    assert prof.name == "h200-8b-eagle3-L2.5-s2k1n3"
    assert prof.env["SGLANG_SIMULATE_ACC_LEN"] == "2.5"
    assert (prof.speculative.num_steps, prof.speculative.eagle_topk, prof.speculative.num_draft_tokens) == (2, 1, 3)
    assert prof.server.model_path == "/data/m/llama8b-dummy"
    assert prof.speculative.draft_model_path == "/data/m/llama8b-eagle3-dummy"
    src = load_profile("h200-8b-eagle3")
    assert prof.server.extra_args == src.server.extra_args
    assert prof.speculative.extra_args == src.speculative.extra_args
    assert {k: v for k, v in prof.env.items() if k != "SGLANG_SIMULATE_ACC_LEN"} == \
        {k: v for k, v in src.env.items() if k != "SGLANG_SIMULATE_ACC_LEN"}
    assert out.read_text().startswith("# Generated by benchmarks/h200/testbed_grid.py from h200-8b-eagle3.toml")


def test_profile_copy_of_the_baseline_refuses_a_point(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no \\[speculative\\]"):
        grid.profile_copy(ROOT / "profiles" / "h200-8b-baseline.toml", tmp_path / "b.toml", point=(2, 1, 3))
    assert grid.main(["profile", str(ROOT / "profiles" / "h200-8b-baseline.toml"), "--out",
                      str(tmp_path / "b.toml"), "--point", "2,1,3"]) == 2


def test_acc_tags_and_points() -> None:
    assert [grid.acc_tag(x) for x in ("3", "3.0", 2.5, "1.25")] == ["3", "3", "2.5", "1.25"]
    assert grid.parse_point(" 3,4,5") == (3, 4, 5)
    for bad in ("3,4", "0,1,2", "a,b,c"):
        with pytest.raises(ValueError):
            grid.parse_point(bad)


def test_suite_copy(tmp_path: Path) -> None:
    out = grid.suite_copy(ROOT / "profiles" / "suites" / "h200-8b.toml", tmp_path / "s.toml", concurrency=8, repeats=6)
    s, src = load_suite(str(out)), load_suite("h200-8b")
    assert (s.name, s.suite.concurrency, s.suite.repeats) == ("h200-8b-c8", 8, 6)
    assert [p.text for p in s.prompts] == [p.text for p in src.prompts]
    assert (s.suite.max_tokens, s.suite.ignore_eos, s.suite.warmup) == (512, True, src.suite.warmup)


def test_to_toml_round_trips_awkward_strings() -> None:
    data = {"name": "x", "n": 3, "f": 0.6, "b": False, "t": {"s": 'a "q" \\ \n\t\x01\x7f é', "l": ["--a", "b c"]},
            "rows": [{"text": "def f():\n    pass\n"}, {"text": "two"}]}
    assert tomllib.loads(grid.to_toml(data, "header line\n\nsecond")) == data


def _show(tmp_path: Path, point) -> dict:
    out = grid.profile_copy(ROOT / "profiles" / "h200-8b-eagle3.toml", tmp_path / "p.toml", acc_len=3, point=point)
    prof = load_profile(str(out)).expanded()
    return show_json(build_launch(prof), prof)


def test_rewritten_skips_points_sglang_changes(tmp_path: Path) -> None:
    assert grid.rewritten(_show(tmp_path, (2, 1, 3))) is None  # max_running_requests 48 does not count
    assert grid.rewritten(_show(tmp_path, (15, 1, 16))) is None
    why = grid.rewritten(_show(tmp_path, (1, 1, 16)))
    assert why and "num_draft_tokens 16 → 2" in why
    path = tmp_path / "show.json"
    path.write_text(json.dumps(_show(tmp_path, (1, 1, 16))))
    assert grid.main(["rewritten", str(path)]) == 3
    path.write_text(json.dumps(_show(tmp_path, (3, 4, 5))))
    assert grid.main(["rewritten", str(path)]) == 0


def _fake_run(d: Path, *, tok_s: float = 450.0, accept: float | None = 3.0, summary: bool = True) -> Path:
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({
        "profile": d.name, "env": {"SGLANG_SIMULATE_ACC_LEN": "3.0"}, "time_to_ready_s": 75.0,
        "asked": {"speculative_num_steps": 2, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3}}))
    if summary:
        (d / "summary.json").write_text(json.dumps({"runs": [{
            "profile": d.name, "effective": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 2,
                                             "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 3},
            "concurrency": 1, "requests": 8, "output_tokens": 4096, "duration_s": 4096 / tok_s,
            "output_tok_s": tok_s, "accept_length": accept, "accept_rate": 0.67, "ttft_ms": {"p50": 20.0},
            "tpot_ms": {"p50": 2.2}, "verification": {"status": "ok", "findings": []}}]}))
    return d


def test_collect_rows_notes_and_attachments(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    a = _fake_run(runs / "a")
    b = _fake_run(runs / "b", summary=False)
    (runs / "x-compare").mkdir()  # an A/B directory: not a launch, no row
    (tmp_path / "tune.json").write_text('{"best": {"speculative_num_steps": 2}}')
    (tmp_path / "tune.err").write_text("progress\nlast line")
    out = tmp_path / "phase.json"
    doc = grid.collect("grid-c1-L3", [a, b, runs / "x-compare"], out, ["SKIPPED p"],
                       {"tune_report": tmp_path / "tune.json", "tune_stderr": tmp_path / "tune.err",
                        "absent": tmp_path / "nope"})
    assert json.loads(out.read_text()) == json.loads(json.dumps(doc, default=str))
    ra, rb = doc["rows"]
    assert (ra["output_tok_s"], ra["accept_length"], ra["acc_len"], ra["time_to_ready_s"]) == (450.0, 3.0, "3.0", 75.0)
    assert ra["asked"] == {"num_steps": 2, "eagle_topk": 1, "num_draft_tokens": 3}
    assert "error" in ra["agreement"]  # no requests.jsonl in this fake: said, not raised
    assert "no summary.json" in rb["error"]
    assert doc["notes"] == ["SKIPPED p"]
    assert doc["attached"]["tune_report"] == {"best": {"speculative_num_steps": 2}}
    assert doc["attached"]["tune_stderr"] == {"text_tail": "progress\nlast line"}
    assert doc["attached"]["absent"] is None


def test_collect_cli_with_a_notes_file(tmp_path: Path, capsys) -> None:
    run = _fake_run(tmp_path / "runs" / "r")
    notes = tmp_path / "notes.txt"
    notes.write_text("one\n\ntwo\n")
    out = tmp_path / "o.json"
    assert grid.main(["collect", "--phase", "p", "--out", str(out), "--notes-file", str(notes),
                      "--note", "zero", str(run), str(tmp_path / "missing")]) == 0
    assert json.loads(out.read_text())["notes"] == ["zero", "one", "two"]
    assert "450.0 tok/s, accept length 3.000" in capsys.readouterr().out


def test_brief(tmp_path: Path) -> None:
    j, err = tmp_path / "b.json", tmp_path / "b.err"
    err.write_text("progress\nspecdash: server exited during start-up\n")
    assert grid.brief(j, err) == "no JSON on stdout; stderr ends: specdash: server exited during start-up"
    j.write_text(json.dumps({"error": "preflight", "preflight": {"findings": [
        {"code": "CHECKPOINT", "severity": "error"}, {"code": "AUX_LAYERS", "severity": "info"}]}}))
    assert grid.brief(j, err) == "error: preflight (CHECKPOINT)"
    j.write_text(json.dumps({"runs": [{
        "output_tok_s": 452.2, "accept_length": 2.994, "concurrency": 1, "requests": 8,
        "effective": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                      "speculative_num_draft_tokens": 4}, "verification": {"status": "ok"}}]}))
    assert grid.brief(j) == "452.2 tok/s, accept length 2.994, c1, 8 requests, effective 3/1/4, verification ok"


# --- testbed.sh ----------------------------------------------------------------------------------------------


def _sh_env(tmp_path: Path) -> dict:
    env = dict(os.environ)
    env.update(OUT=str(tmp_path / "out"), WORK=str(tmp_path / "work"), MODELS=str(tmp_path / "models"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
               XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("PYTHONPATH", None)
    return env


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_testbed_sh_parses_and_refuses_unknown_phases(tmp_path: Path) -> None:
    assert subprocess.run(["bash", "-n", str(H200 / "testbed.sh")]).returncode == 0
    for bad in ("grid-c1", "grid-c0-L3", "tune-live-x-c1-L3", "grid-c1-Lx", ""):
        r = subprocess.run(["bash", str(H200 / "testbed.sh"), bad], env=_sh_env(tmp_path),
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (bad, r.stdout, r.stderr)
        assert "usage" in r.stderr or "concurrency" in r.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_testbed_sh_check_phase_end_to_end(tmp_path: Path, source: Path) -> None:
    """The launch-free phase on CPU: writes the pair, checks it, runs the doctor on copies, packs ≤ 3 files."""
    env = _sh_env(tmp_path)
    env["MODELS"] = str(source.parent)
    r = subprocess.run(["bash", str(H200 / "testbed.sh"), "check"], env=env, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["check.json", "check.tar.gz", "steps.log"]
    log = (out / "steps.log").read_text()
    assert "testbed.py --check exit 0" in log
    for name in PROFILES:
        assert f"doctor {name} exit 0" in log
    assert "specdash tune --live:" in log
    work = next((tmp_path / "work").iterdir())
    doc = json.loads((work / "doctor-h200-8b-eagle3.json").read_text())
    assert {f["code"] for f in doc["findings"] if f["severity"] == "error"} == set()
