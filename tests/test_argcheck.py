"""SGLang's own argument checks before a launch (ARGCHECK, ``specdash.sglang.argcheck``).

Two kinds of SGLang stand behind these tests:

* a tiny ``sglang`` package written here (``prepare_server_args`` / ``check_server_args`` with the same
  names, a refusal, a silent rewrite, a hang) on the child's ``PYTHONPATH`` — the mechanism, always run;
* the real ``sglang==0.5.14`` wheel installed without its dependencies plus the few modules its parser
  imports (``.ci/run`` puts it in ``$SPECDASH_SGLANG_SITE``; torch comes from the test environment) — the
  release's own refusal of LoRA with EAGLE3 reported as a finding.  Skipped, with the reason, without it.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from specdash.checkpoint.tiny import tiny_draft, tiny_target
from specdash.eagle3.sample import write_profile
from specdash.launch import run_preflight
from specdash.profile import load_profile
from specdash.sglang.argcheck import run_argcheck, sglang_python

FAKE = '''
import argparse, logging, sys, time
logger = logging.getLogger(__name__)

class ServerArgs:
    def check_server_args(self):
        if self.enable_lora and self.speculative_algorithm not in ("NGRAM", None):
            raise ValueError("Currently LoRA is only compatible with NGRAM speculative decoding.")

def get_device_memory_capacity(device=None):
    raise RuntimeError("the check must not query the device")

def prepare_server_args(argv):
    p = argparse.ArgumentParser(prog="sglang serve")
    for f in ("--model-path", "--speculative-algorithm", "--speculative-draft-model-path", "--host", "--api-key",
              "--lora-paths", "--device"):
        p.add_argument(f)
    for f in ("--port", "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
              "--max-loras-per-batch", "--tp-size"):
        p.add_argument(f, type=int)
    p.add_argument("--enable-lora", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, force=True)
    if "hang" in (a.model_path or ""):
        time.sleep(600)
    sa = ServerArgs()
    sa.__dict__.update(vars(a))
    sa.gpu_mem = sys.modules[__name__].get_device_memory_capacity(a.device)
    if a.speculative_algorithm:
        sa.max_running_requests = 48
        logger.warning("Max running requests is reset to 48 for speculative decoding.")
        if a.speculative_eagle_topk == 1 and a.speculative_num_draft_tokens != a.speculative_num_steps + 1:
            sa.speculative_num_draft_tokens = a.speculative_num_steps + 1
            logger.warning("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                           "speculative_eagle_topk == 1")
    return sa
'''


@pytest.fixture
def fake_site(tmp_path):
    site = tmp_path / "site"
    pkg = site / "sglang" / "srt"
    pkg.mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text('__version__ = "0.5.14"\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "server_args.py").write_text(textwrap.dedent(FAKE))
    meta = site / "sglang-0.5.14.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.14\n")
    return site


def _profile(tmp: Path, site: Path, *, extra: list[str], steps=3, topk=1, draft_tokens=4, model: str | None = None):
    t, d = tiny_target(tmp / "target"), tiny_draft(tmp / "draft")
    p = write_profile(tmp / "p.toml", model_path=model or str(t), draft_path=str(d), num_steps=steps,
                      eagle_topk=topk, num_draft_tokens=draft_tokens, sglang_version="0.5.14", extra_args=extra,
                      env={"PYTHONPATH": str(site)})
    text = p.read_text().replace("[server]\n", f"[server]\npython = {sys.executable!r}\n", 1)
    p.write_text(text)
    return load_profile(str(p))


def _argcheck(report):
    return [f for f in report.findings if f.code == "ARGCHECK"]


def test_a_refusal_becomes_an_error_quoting_sglang(tmp_path, fake_site):
    prof = _profile(tmp_path, fake_site, extra=["--enable-lora", "--lora-paths", "a=/x", "--api-key", "s3cret"])
    rep = run_preflight(prof, gpus=[{"name": "H200", "memory_total_mib": 143771}])
    [err] = [f for f in _argcheck(rep) if f.severity == "error"]
    assert "ValueError: Currently LoRA is only compatible with NGRAM speculative decoding." in err.message
    assert err.evidence["where"].startswith("sglang/srt/server_args.py:") and "check_server_args" in err.evidence["where"]
    assert set(err.evidence["flags"]) >= {"--enable-lora", "--lora-paths"}
    assert err.evidence["sglang_version"] == "0.5.14" and rep.has_errors
    # the key never reaches a finding (and went to the child on stdin, not on its command line)
    assert "s3cret" not in str(rep.to_json())


def test_what_sglang_will_use_is_reported(tmp_path, fake_site):
    prof = _profile(tmp_path, fake_site, extra=[], steps=3, topk=1, draft_tokens=8)
    rep = run_preflight(prof, gpus=[{"name": "H200", "memory_total_mib": 143771}])
    [w] = [f for f in _argcheck(rep) if f.severity == "warning"]
    assert w.evidence["field"] == "speculative_num_draft_tokens" and w.evidence["asked"] == 8
    assert w.evidence["effective"] == 4 and "steps + 1" in w.evidence["log_line"]
    [ok] = [f for f in _argcheck(rep) if f.severity == "info"]
    assert "accept this launch" in ok.message and "max_running_requests 48" in ok.message
    assert not [f for f in _argcheck(rep) if f.severity == "error"]


def test_argparse_refusal(tmp_path, fake_site):
    prof = _profile(tmp_path, fake_site, extra=["--tp-size", "two"])
    rep = run_preflight(prof, gpus=None)
    [err] = [f for f in _argcheck(rep) if f.severity == "error"]
    assert "argparse, exit 2" in err.message and "invalid int value: 'two'" in err.message
    assert "--tp-size" in err.evidence["flags"]


def test_a_hang_is_bounded(tmp_path, fake_site, monkeypatch):
    monkeypatch.setenv("SPECDASH_ARGCHECK_TIMEOUT", "3")
    target = tiny_target(tmp_path / "hang-target")
    prof = _profile(tmp_path, fake_site, extra=[], model=str(target))
    rep = run_preflight(prof, gpus=None)
    [w] = [f for f in _argcheck(rep) if f.severity == "warning"]
    assert "did not finish within 3 s" in w.message and w.evidence["seconds"] < 60


def test_no_sglang_is_a_note(tmp_path):
    prof = _profile(tmp_path, tmp_path / "nothing-here", extra=[])
    rep = run_preflight(prof, gpus=None)
    [n] = _argcheck(rep)
    assert n.severity == "info" and "not importable" in n.message and "no sglang" in " ".join(n.evidence["tried"])


def test_off_by_environment(tmp_path, fake_site, monkeypatch):
    monkeypatch.setenv("SPECDASH_ARGCHECK", "0")
    rep = run_preflight(_profile(tmp_path, fake_site, extra=["--enable-lora"]), gpus=None)
    assert [f.severity for f in _argcheck(rep)] == ["info"]


def test_sglang_python_reads_the_launch_environment(fake_site):
    py, v, _ = sglang_python(sys.executable, {"PYTHONPATH": str(fake_site)})
    assert py and v == "0.5.14"
    assert sglang_python(sys.executable, {})[1] is None or os.environ.get("SPECDASH_SGLANG_SITE")


# --- the real SGLang 0.5.14 (its parser, hooks and check_server_args) -------------------------------
SITE = os.environ.get("SPECDASH_SGLANG_SITE")


def _real_site() -> str:
    if not SITE or not Path(SITE, "sglang").is_dir():
        pytest.skip("$SPECDASH_SGLANG_SITE (sglang==0.5.14 installed with --no-deps plus its parser's modules, "
                    "see .ci/run and .ci/sglang-argcheck.txt) is not set")
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed (SGLang's parser imports it)")
    return SITE


def test_real_sglang_0_5_14_refuses_lora_with_eagle3(tmp_path):
    site = Path(_real_site())
    prof = _profile(tmp_path, site, extra=["--enable-lora", "--lora-paths", f"sql={tmp_path}/lora",
                                           "--max-loras-per-batch", "1"])
    rep = run_preflight(prof, gpus=[{"name": "H200", "memory_total_mib": 143771}])
    [err] = [f for f in _argcheck(rep) if f.severity == "error"]
    assert "Currently LoRA is only compatible with NGRAM speculative decoding." in err.message
    assert err.evidence["where"] == "sglang/srt/server_args.py:6850 in check_lora_server_args"
    assert err.evidence["sglang_version"] == "0.5.14"
    # specdash's own reading of the 0.5.14 facts says the same (SPEC_ARGS), from the same source line
    assert any(f.code == "SPEC_ARGS" and f.severity == "error" and "server_args.py:6850" in f.message
               for f in rep.findings)


def test_real_sglang_0_5_14_resolution(tmp_path):
    site = _real_site()
    t, d = tiny_target(tmp_path / "t", layers=32), tiny_draft(tmp_path / "d")
    argv = ["--model-path", str(t), "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(d),
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8"]
    r = run_argcheck(sys.executable, argv, {"PYTHONPATH": site}, gpu_memory_mib=143771)
    assert r.status == "ok", r
    assert r.resolved["speculative_num_draft_tokens"] == 4 and r.resolved["max_running_requests"] == 48
    assert any("adjusted to speculative_num_steps + 1" in w for w in r.warnings)


def test_real_sglang_0_5_14_standins_keep_the_verdict(tmp_path, monkeypatch):
    """$SPECDASH_ARGCHECK_STANDIN: modules stood in for although installed (here aiohttp and requests, which the
    0.5.14 site has and SGLang imports while parsing but never calls there): SGLang's refusal and its source
    line are the same, and the finding says what was stood in for."""
    site = _real_site()
    t, d = tiny_target(tmp_path / "t"), tiny_draft(tmp_path / "d")
    argv = ["--model-path", str(t), "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(d),
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
            "--enable-lora", "--lora-paths", f"a={tmp_path}/lora", "--max-loras-per-batch", "1"]
    plain = run_argcheck(sys.executable, argv, {"PYTHONPATH": site}, gpu_memory_mib=143771)
    monkeypatch.setenv("SPECDASH_ARGCHECK_STANDIN", "requests, aiohttp")
    stood = run_argcheck(sys.executable, argv, {"PYTHONPATH": site}, gpu_memory_mib=143771)
    assert plain.status == stood.status == "refused"
    assert stood.message == plain.message and stood.where == plain.where == \
        "sglang/srt/server_args.py:6850 in check_lora_server_args"
    assert stood.standins == ["requests", "aiohttp"] and not plain.standins
    assert {"aiohttp", "requests"} <= set(stood.stubbed) and not {"aiohttp", "requests"} & set(plain.stubbed)
    assert set(plain.stage_seconds) >= {"prepare_server_args"} and plain.modules_imported_while_checking is not None
