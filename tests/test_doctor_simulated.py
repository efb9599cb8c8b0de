"""The doctor's SIMULATED rule ("labelled for what it is") and :func:`specdash.sglang.simulate.acceptance_simulated`."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.checkpoint.tiny import tiny_draft, tiny_target
from specdash.eagle3.doctor import run_doctor
from specdash.eagle3.findings import DoctorReport, Finding
from specdash.eagle3.sample import write_profile
from specdash.profile import load_profile
from specdash.sglang.simulate import (
    acceptance_simulated,
    dummy_weights,
    parse_simulate_acc_len,
    simulate_acc_len,
)

TESTBEDS = ("h200-8b-baseline", "h200-8b-eagle3", "h200-8b-seeds-start", "h200-8b-bad-start")


def doctor(tmp_path: Path, *, env=None, testbed=None, extra=(), spec_extra=(), **kw) -> DoctorReport:
    tmp_path.mkdir(parents=True, exist_ok=True)
    prof = write_profile(tmp_path / "p.toml", model_path="sim:tiny-llama", draft_path="sim:tiny-llama-eagle3",
                         launcher="sim", sglang_version="0.5.14", testbed=testbed, extra_args=list(extra),
                         spec_extra_args=list(spec_extra),
                         env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1", **(env or {})}, **kw)
    return run_doctor(prof)


def sim(rep: DoctorReport) -> list[Finding]:
    return [f for f in rep.findings if f.code == "SIMULATED"]


@pytest.mark.parametrize("testbed,severity", [(True, "info"), (None, "error"), (False, "error")])
def test_simulated_acceptance(tmp_path, testbed, severity):
    rep = doctor(tmp_path, env={"SGLANG_SIMULATE_ACC_LEN": "2.5"}, testbed=testbed)
    (f,) = sim(rep)
    assert f.severity == severity and f.evidence["accept_length"] == 2.5 and f.evidence["where"] == "[env]"
    assert "spec_utils.py" in f.why and "generate_simulated_accept_index" in f.why
    assert "min(2.5, steps + 1 = 4)" in f.why
    if severity == "error":
        assert "measures nothing real" in f.message and "testbed = true" in f.fix
        assert "remove SGLANG_SIMULATE_ACC_LEN" in f.fix and rep.has_errors
    else:
        assert "testbed" in f.message and not rep.has_errors


def test_simulated_acceptance_without_speculation_off_value_and_bad_values(tmp_path):
    (f,) = sim(doctor(tmp_path / "a", env={"SGLANG_SIMULATE_ACC_LEN": "3"}, algorithm=None))
    assert f.severity == "info" and "no effect without speculation" in f.message
    (f,) = sim(doctor(tmp_path / "b", env={"SGLANG_SIMULATE_ACC_LEN": "-1"}))
    assert f.severity == "info" and "'off' value" in f.message
    (f,) = sim(doctor(tmp_path / "c", env={"SGLANG_SIMULATE_ACC_LEN": "abc"}, testbed=True))
    assert f.severity == "error" and '"abc" is not a valid float value' in f.message
    fs = sim(doctor(tmp_path / "d", env={"SGLANG_SIMULATE_ACC_LEN": "3", "SGLANG_SIMULATE_ACC_METHOD": "exact"},
                    testbed=True))
    assert [x.severity for x in fs] == ["error", "info"] and "Invalid simulate_acc_method" in fs[0].message


@pytest.mark.parametrize("testbed", [True, None])
def test_dummy_load_formats(tmp_path, testbed):
    rep = doctor(tmp_path / "draft", testbed=testbed, spec_extra=["--speculative-draft-load-format", "dummy"])
    (f,) = sim(rep)
    assert f.evidence["roles"] == ["draft"] and f.severity == ("info" if testbed else "error")
    assert "DummyModelLoader" in f.why and "scheduler.py" in f.why
    rep = doctor(tmp_path / "both", testbed=testbed, extra=["--load-format", "dummy"])
    (f,) = sim(rep)
    assert f.evidence["roles"] == ["target", "draft"] and "the draft inherits it" in f.message
    rep = doctor(tmp_path / "base", testbed=testbed, extra=["--load-format", "dummy"], algorithm=None)
    assert sim(rep)[0].evidence["roles"] == ["target"]  # no draft without speculation
    assert not sim(doctor(tmp_path / "none", testbed=testbed))


def test_checkpoint_info_for_config_only_dirs_stays_consistent(tmp_path):
    """doctor.py already says 'no weight files, as expected' (CHECKPOINT info) for a config-only directory loaded
    with dummy weights; SIMULATED adds whether the profile may do that."""
    t = tiny_target(tmp_path / "t")
    d = tiny_draft(tmp_path / "d")
    for p in (t, d):
        for w in p.glob("*.safetensors"):
            w.unlink()
    for testbed, sev in ((True, "info"), (None, "error")):
        prof = write_profile(tmp_path / f"p{testbed}.toml", model_path=str(t), draft_path=str(d), testbed=testbed,
                             extra_args=["--load-format", "dummy"])
        rep = run_doctor(prof)
        ck = [f for f in rep.findings if f.code == "CHECKPOINT"]
        assert [f.severity for f in ck] == ["info", "info"] and all("dummy weights" in f.message for f in ck)
        assert [f.severity for f in sim(rep)] == [sev]


def test_the_testbed_profiles_declare_themselves():
    for name in TESTBEDS:
        prof = load_profile(name)
        assert prof.testbed is True, name
        assert acceptance_simulated(prof.env)
        rep = run_doctor(prof)
        fs = sim(rep)
        assert fs and all(f.severity == "info" for f in fs), rep.render()
    assert load_profile("demo-eagle3").testbed is None


def test_acceptance_simulated_helper(monkeypatch):
    assert acceptance_simulated({"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    assert not acceptance_simulated({}, None, {"OTHER": "1"})
    assert not acceptance_simulated({"SGLANG_SIMULATE_ACC_LEN": "-1"})  # SGLang's own "off"
    assert not acceptance_simulated({"SGLANG_SIMULATE_ACC_LEN": "nope"})  # SGLang would not start
    # the profile's [env] wins over the environment the server inherits
    assert not acceptance_simulated({"SGLANG_SIMULATE_ACC_LEN": "-1"}, {"SGLANG_SIMULATE_ACC_LEN": "2"})
    assert acceptance_simulated({}, {"SGLANG_SIMULATE_ACC_LEN": "2"})
    assert simulate_acc_len({"SGLANG_SIMULATE_ACC_LEN": " 2.5 "}) == 2.5
    with pytest.raises(ValueError, match="is not a valid float value"):
        parse_simulate_acc_len("x")
    assert dummy_weights({"--load-format": "dummy"}, "draft")
    assert not dummy_weights({"--load-format": "dummy", "--speculative-draft-load-format": "auto"}, "draft")
    assert dummy_weights({"--speculative-draft-load-format": "DUMMY"}, "draft")
    assert not dummy_weights({"--speculative-draft-load-format": "dummy"}, "target")
