"""The doctor's ADAPTIVE rule: ``--speculative-adaptive`` / ``--speculative-adaptive-config`` per release.

Profiles use the simulator launcher (``sim:`` virtual models: the tiny Llama target and its EAGLE3 head);
config files are written to ``tmp_path``.  Each release difference (SGLang's own code, the ``adaptive_*``
rows of ``versions.FEATURES``) gets its own case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.findings import DoctorReport, Finding
from specdash.eagle3.sample import write_profile
from specdash.sglang.versions import has_feature, parse_version

ADAPTIVE = ["--speculative-adaptive"]
NO_OVERLAP = ["--disable-overlap-schedule"]  # 0.5.11 runs adaptive only without the overlap scheduler


def doctor(tmp_path: Path, version: str, *, spec_extra=(), extra=(), cfg=None, env=None, auto_no_overlap=True,
           **kw) -> DoctorReport:
    """Run the doctor on a sim profile; on 0.5.11 ``--disable-overlap-schedule`` is added unless told not to."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    args = list(spec_extra)
    if cfg is not None:
        p = tmp_path / "adaptive.json"
        p.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
        args += ["--speculative-adaptive-config", str(p)]
    if version == "0.5.11" and "--speculative-adaptive" in args and auto_no_overlap:
        extra = [*extra, *NO_OVERLAP]
    prof = write_profile(tmp_path / "p.toml", model_path="sim:tiny-llama", draft_path="sim:tiny-llama-eagle3",
                         launcher="sim", sglang_version=version, spec_extra_args=args, extra_args=list(extra),
                         env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1", **(env or {})}, **kw)
    return run_doctor(prof)


def ad(rep: DoctorReport, severity: str | None = None) -> list[Finding]:
    return [f for f in rep.findings if f.code == "ADAPTIVE" and (severity is None or f.severity == severity)]


def only_info(rep: DoctorReport) -> Finding:
    fs = ad(rep)
    assert [f.severity for f in fs] == ["info"], rep.render()
    return fs[0]


# --- the flag itself ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.10", "0.5.11"])
def test_flag_before_0_5_11_is_unknown(tmp_path, version):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE)
    if has_feature("adaptive_spec", version):
        assert "candidate_steps [1, 3, 7]" in only_info(rep).message
        return
    (f,) = ad(rep)
    assert f.severity == "error" and "no adaptive speculation" in f.message and "code 2" in f.message
    assert "0.5.11" in f.why and "adaptive_spec_params.py" in f.why
    assert "≥ 0.5.11" in f.fix and f.evidence["flags"] == ["--speculative-adaptive"]


def test_config_without_the_flag_is_never_read(tmp_path):
    rep = doctor(tmp_path, "0.5.14", cfg={"1": {"candidate_steps": [1, 3]}})
    (f,) = ad(rep)
    assert f.severity == "warning" and "never reads the file" in f.message
    assert '"--speculative-adaptive"' in f.fix


# --- fall-backs to static settings -------------------------------------------------------------------------


@pytest.mark.parametrize("version,kw,extra,needle,fix", [
    ("0.5.14", {"eagle_topk": 4, "num_draft_tokens": 8}, [], "speculative_eagle_topk=4", "eagle_topk = 1"),
    ("0.5.12", {"algorithm": "STANDALONE"}, [], "speculative_algorithm=STANDALONE", "EAGLE or EAGLE3"),
    ("0.5.14", {}, ["--enable-dp-attention"], "enable_dp_attention=True", "drop --enable-dp-attention"),
    ("0.5.12", {}, ["--enable-multi-layer-eagle"], "MultiLayerEagleWorker does", "drop --enable-multi-layer-eagle"),
    ("0.5.13", {}, ["--enable-multi-layer-eagle"], "MultiLayerEagleWorkerV2 does", "drop --enable-multi-layer-eagle"),
    ("0.5.14", {}, ["--enable-two-batch-overlap"], "TboAttnBackend", "drop --enable-two-batch-overlap"),
])
def test_unsupported_combinations_fall_back_to_static(tmp_path, version, kw, extra, needle, fix):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, extra=extra, **kw)
    (f,) = ad(rep)
    assert f.severity == "warning" and "turned off at start-up" in f.message and needle in f.message
    assert f.evidence["log_line"] == f"speculative_adaptive disabled: {f.evidence['reason']}. Falling back to " \
                                     "static speculative params."
    assert "adaptive_spec_params.py" in f.why
    old = parse_version(version) < parse_version("0.5.13")
    assert ("server_args.py" if old else "_maybe_disable_adaptive (srt/arg_groups/speculative_hook.py)") in f.why
    assert fix in f.fix


@pytest.mark.parametrize("version,extra,env,falls_back", [
    ("0.5.11", [], {}, True),                                   # overlap scheduler on: spec v1 only
    ("0.5.11", NO_OVERLAP, {}, False),
    ("0.5.11", [], {"SGLANG_ENABLE_SPEC_V2": "false"}, False),  # SGLang disables overlap itself
    ("0.5.12", [], {}, False),                                  # 0.5.12 builds the controller in EAGLEWorkerV2
])
def test_overlap_scheduler_only_matters_on_0_5_11(tmp_path, version, extra, env, falls_back):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, extra=extra, env=env, auto_no_overlap=False)
    warn = ad(rep, "warning")
    assert bool(warn) == falls_back, rep.render()
    if falls_back:
        assert "overlap scheduler" in warn[0].message and "--disable-overlap-schedule" in warn[0].fix


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.13", "0.5.14"])
def test_auto_chosen_topk_falls_back_before_0_5_14(tmp_path, version):
    """No steps/topk/draft tokens: SGLang auto-chooses (5, 4, 8) for a Llama target before the adaptive check
    (0.5.11-0.5.13); 0.5.14 sets the unset top-k to 1 first and starts at the middle candidate."""
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, num_steps=None, eagle_topk=None, num_draft_tokens=None)
    if has_feature("adaptive_launch_resolution", version):
        f = only_info(rep)
        assert "launch tier steps 3 / draft tokens 4" in f.message and "middle candidate" in f.message
        assert not [x for x in rep.findings if x.code == "SPEC_ARGS" and x.severity == "error"], rep.render()
        return
    (f,) = ad(rep)
    assert f.severity == "warning" and "speculative_eagle_topk=4" in f.message and f.evidence["auto_chosen"]
    assert "_auto_choose_speculative_params picked (5, 4, 8) for LlamaForCausalLM" in f.why
    assert "eagle_topk = 1" in f.fix and "num_steps = 3" in f.fix


# --- the config file ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.23"])
def test_flat_config_by_release(tmp_path, version):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, cfg={"candidate_steps": [1, 3], "ema_alpha": 0.3})
    if not has_feature("adaptive_keyed_config", version):
        assert "candidate_steps [1, 3] for every batch" in only_info(rep).message
        return
    (f,) = ad(rep)
    assert f.severity == "error" and "flat config" in f.message
    assert "must contain at least one integer-string BS key" in f.why and "ValueError" in f.why
    assert json.loads(f.evidence["keyed_equivalent"]) == {"1": {"candidate_steps": [1, 3], "ema_alpha": 0.3}}
    assert f.evidence["keyed_equivalent"] in f.fix


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.13", "0.5.14"])
def test_keyed_config_by_release(tmp_path, version):
    cfg = {"ema_alpha": 0.3, "1": {"candidate_steps": [1, 3], "ceiling_coeff": 1.5}, "8": {"candidate_steps": [1]}}
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, cfg=cfg)
    if has_feature("adaptive_keyed_config", version):
        assert "slots by batch size {'1': [1, 3], '8': [1]}" in only_info(rep).message
        return
    warn = ad(rep, "warning")
    ignored = next(f for f in warn if "silently ignored" in f.message)
    assert "defaults run (candidate_steps [1, 3, 7])" in ignored.message and ignored.evidence["slots"] == ["1", "8"]
    assert json.loads(ignored.evidence["flat_equivalent"]) == {"ema_alpha": 0.3, "candidate_steps": [1, 3]}
    assert "0.5.13" in ignored.fix
    # ceiling_coeff is a 0.5.13 key: flat releases never read it (inside an ignored slot it is not reported)
    assert not [f for f in warn if "never reads" in f.message]


@pytest.mark.parametrize("version,site", [("0.5.12", "after the weights load"), ("0.5.14", "before any weights load")])
def test_unreadable_config(tmp_path, version, site):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, cfg='{"1": {"candidate_steps": [1, 3],}}')
    (f,) = ad(rep)
    assert f.severity == "error" and "not valid JSON: Expecting property name" in f.message
    assert site in f.why and "JSONDecodeError" in f.why and f.evidence["line"] == 1
    prof = write_profile(tmp_path / "q.toml", model_path="sim:tiny-llama", draft_path="sim:tiny-llama-eagle3",
                         launcher="sim", sglang_version=version,
                         spec_extra_args=[*ADAPTIVE, "--speculative-adaptive-config", str(tmp_path / "nope.json")])
    (f,) = ad(run_doctor(prof))
    assert f.severity == "error" and "does not exist" in f.message and "FileNotFoundError" in f.why


@pytest.mark.parametrize("version", ["0.5.12", "0.5.13"])
def test_unknown_keys(tmp_path, version):
    keyed = has_feature("adaptive_keyed_config", version)
    cfg = {"ema_alhpa": 0.3, "ceiling_coeff": 2}
    cfg = {**cfg, "1": {"candidate_steps": [1, 3], "warmup": 4}} if keyed else {**cfg, "candidate_steps": [1, 3]}
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, cfg=cfg)
    (f,) = ad(rep, "warning")
    assert f.evidence["suggestions"]["ema_alhpa"] == "ema_alpha" and "rename 'ema_alhpa' to 'ema_alpha'" in f.fix
    assert ("ceiling_coeff" in f.evidence["keys"]) != keyed  # a 0.5.13 key
    if keyed:
        assert f.evidence["suggestions"]["warmup"] == "warmup_batches" and "slot '1'" in f.message
    assert "cfg.get(key, default)" in f.why


@pytest.mark.parametrize("version", ["0.5.12", "0.5.14"])
def test_values_sglang_does_not_check(tmp_path, version):
    slot = {"candidate_steps": [1, 3], "ema_alpha": "0.3", "update_interval": 0}
    cfg = {"1": slot} if has_feature("adaptive_keyed_config", version) else slot
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, cfg=cfg)
    errs = ad(rep, "error")
    assert {f.evidence["key"] for f in errs} == {"ema_alpha", "update_interval"}, rep.render()
    typ = next(f for f in errs if f.evidence["key"] == "ema_alpha")
    assert "TypeError" in typ.message and "give ema_alpha a number" in typ.fix
    assert "ZeroDivisionError" in next(f for f in errs if f.evidence["key"] == "update_interval").message
    slot = {"candidate_steps": [1, 3], "ema_alpha": 1.5}
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, cfg={"1": slot} if "1" in cfg else slot)
    (w,) = ad(rep, "warning")
    assert "ema_alpha=1.5 is outside (0, 1]" in w.message and "(0, 1]" in w.fix


@pytest.mark.parametrize("version", ["0.5.12", "0.5.13", "0.5.14"])
def test_steps_zero_tiers_before_0_5_14(tmp_path, version):
    keyed = has_feature("adaptive_keyed_config", version)
    cfg = {"1": {"candidate_steps": [1, 3]}, "8": {"candidate_steps": [0, 1, 3]}} if keyed else \
        {"candidate_steps": [0, 3]}
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, cfg=cfg)
    if has_feature("adaptive_zero_steps", version):
        f = only_info(rep)
        assert f.evidence["zero_step_slots"] == ["8"] and "accept length 1.00 there by design" in f.message
        return
    (f,) = ad(rep)
    assert f.severity == "error" and "steps 0 arrives in 0.5.14" in f.message
    if keyed:  # SGLang's own ValueError
        assert "BS 8: candidate_steps must be a list of positive ints, got [0, 1, 3]" in f.why
    else:  # unchecked, and the zero-step draft has nothing to concatenate
        assert "torch.cat" in f.why and "remove 0" in f.fix


# --- launch steps and draft tokens -------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.13", "0.5.14"])
def test_launch_steps_not_a_candidate(tmp_path, version):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, num_steps=5, num_draft_tokens=6)
    fs = [f for f in ad(rep) if f.severity != "info"]
    assert len(fs) == 1, rep.render()
    f = fs[0]
    if version == "0.5.11":
        assert f.severity == "warning" and "starts at the nearest one, 7" in f.message
        assert f.evidence["starts_at"] == 7 and "num_steps = 7" in f.fix
    elif version == "0.5.12":
        assert f.severity == "warning" and "adds it" in f.message and f.evidence["effective_candidates"] == [1, 3, 5, 7]
        assert "Adding initial speculative_num_steps=5 to candidate_steps=[1, 3, 7]" in f.why
    else:
        assert f.severity == "error" and "--speculative-num-steps 5 is not a candidate" in f.message
        assert "is not in the adaptive config candidate_steps" in f.why
        cands = [1, 3, 7] if version == "0.5.13" else [0, 1, 3, 7]
        assert f.evidence["candidates"] == cands
        assert ("leave it unset" in f.fix) == (version == "0.5.14")


@pytest.mark.parametrize("version", ["0.5.13", "0.5.14"])
def test_draft_tokens_become_steps_plus_one(tmp_path, version):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE, num_steps=3, num_draft_tokens=16)
    spec = [f for f in rep.findings if f.code == "SPEC_ARGS" and f.evidence.get("field") == "speculative_num_draft_tokens"]
    mine = [f for f in ad(rep, "warning") if f.evidence.get("field") == "speculative_num_draft_tokens"]
    if has_feature("adaptive_launch_resolution", version):
        # _init_adaptive_speculative_params overwrites it before the EAGLE checks: no log line, one ADAPTIVE warning
        (f,) = mine
        assert not spec and (f.evidence["asked"], f.evidence["effective"]) == (16, 4)
        assert "asked 16" in f.message and "runs 4" in f.message and "without a log line" in f.message
        assert "num_draft_tokens = 4" in f.fix
    else:  # the usual top-k 1 adjustment, with SGLang's warning line (SPEC_ARGS)
        assert not mine and spec and spec[0].evidence["effective"] == 4 and spec[0].evidence["log_line"]


def test_hysteresis_without_a_dead_band_is_a_warning(tmp_path):
    """The config a live tune generated on SGLang 0.5.14 with a real draft before the dead band (slot "1":
    [6, 10], up -3.728, down -3.512; slot "12": [5, 9, 10]): down ≥ up, so the controller switched at every
    decision (60 switches in seconds).  The doctor names each slot and the EMA range that flips."""
    cfg = {"1": {"candidate_steps": [6, 10], "up_hysteresis": -3.728, "down_hysteresis": -3.512},
           "12": {"candidate_steps": [5, 9, 10], "up_hysteresis": -5.817, "down_hysteresis": -2.523},
           "32": {"candidate_steps": [1, 3]}}  # SGLang's defaults: a band of 0.25
    rep = doctor(tmp_path, "0.5.14", spec_extra=[*ADAPTIVE, "--speculative-num-steps", "10"], cfg=cfg)
    warns = [f for f in ad(rep, "warning") if "dead band" in f.message]
    assert sorted(f.evidence["where"] for f in warns) == ["slot '1'", "slot '12'"], rep.render()
    one = next(f for f in warns if f.evidence["where"] == "slot '1'")
    assert "6↔10 for an EMA in (1.77, 1.99]" in one.message and "up_hysteresis above down_hysteresis" in one.fix
    # the same slots with SGLang's default hysteresis (up 0.0 above down -0.25): no warning
    for slot in cfg.values():
        slot.pop("down_hysteresis", None)
        slot.pop("up_hysteresis", None)
    rep = doctor(tmp_path / "ok", "0.5.14", spec_extra=[*ADAPTIVE, "--speculative-num-steps", "10"], cfg=cfg)
    assert not [f for f in ad(rep) if "dead band" in f.message], rep.render()


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.13", "0.5.14", "0.5.23"])
def test_healthy_adaptive_profiles_have_only_info(tmp_path, version):
    rep = doctor(tmp_path, version, spec_extra=ADAPTIVE)
    assert not rep.has_errors and only_info(rep).evidence["version"] == version, rep.render()
