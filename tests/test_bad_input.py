"""Issue 13: unexpected exceptions end in one line and a crash file; unreadable profile and suite
files are listed or refused with the reason, never a traceback; doctor's usage checks."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from specdash.cli import main
from specdash.profile import (
    ProfileError,
    list_profiles,
    list_suites,
    load_profile,
    load_suite,
    user_profile_dir,
)
from tests.test_bench import sim_profile

NOT_UTF8 = b'name = "caf\xe9"\n[server]\nmodel_path = "m"\n'


# -- 3. the top-level guard -------------------------------------------------------------------


def _crash_files() -> list[Path]:
    d = Path(os.environ["SPECDASH_STATE_DIR"]) / "crashes"
    return sorted(d.glob("crash-*.txt")) if d.is_dir() else []


def test_unexpected_exception_is_one_line_and_a_private_crash_file(capsys, monkeypatch):
    import specdash.commands.profile as profile_cmd

    def boom(argv):
        raise RuntimeError("something broke with sekrit-key\nsecond line")

    monkeypatch.setattr(profile_cmd, "profile_main", boom)
    assert main(["profile", "list", "--api-key", "sekrit-key"]) == 1
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert lines[0] == "specdash: internal error: RuntimeError: something broke with ***"
    assert len(lines) == 2 and "Traceback" not in out.err and out.out == ""
    (crash,) = _crash_files()
    assert str(crash) in lines[1]
    assert stat.S_IMODE(crash.stat().st_mode) == 0o600
    text = crash.read_text()
    assert "Traceback (most recent call last)" in text and "in boom" in text and "second line" in text
    assert "sekrit-key" not in text


def test_a_bug_inside_bench_is_caught_too(tmp_path, capsys, monkeypatch):
    import specdash.commands.bench as bench_cmd

    def bug(args, progress):
        return {}["missing"]

    monkeypatch.setattr(bench_cmd, "_bench", bug)
    assert main(["--bench", "--profile", str(sim_profile(tmp_path, "p"))]) == 1
    err = capsys.readouterr().err
    assert err.startswith("specdash: internal error: KeyError: 'missing'") and "Traceback" not in err
    assert len(_crash_files()) == 1


def test_crash_file_unwritable_prints_the_traceback(capsys, monkeypatch, tmp_path):
    import specdash.commands.profile as profile_cmd

    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SPECDASH_STATE_DIR", str(blocker / "state"))   # under a file: cannot be made
    monkeypatch.setattr(profile_cmd, "profile_main", lambda argv: 1 / 0)
    assert main(["profile", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("specdash: internal error: ZeroDivisionError: division by zero")
    assert "cannot write a crash file" in err and "Traceback" in err


def test_expected_errors_still_map_to_their_codes(capsys):
    assert main(["--bench", "--profile", "no-such-profile-xyz"]) == 2
    assert "internal error" not in capsys.readouterr().err


# -- 4. bad files -----------------------------------------------------------------------------


def _user_file(rel: str, data: bytes) -> Path:
    p = user_profile_dir() / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def test_profile_list_shows_an_unreadable_profile_with_its_reason(capsys):
    bad = _user_file("zz-latin1.toml", NOT_UTF8)
    _user_file("zz-broken.toml", b"name = [unclosed\n")
    assert ("zz-latin1", bad) in list_profiles()              # the picker's data source lists it
    assert main(["profile", "list"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    row = next(ln for ln in out.out.splitlines() if ln.startswith("zz-latin1"))
    assert "unreadable" in row and "not UTF-8" in row and "0xe9" in row
    assert "not valid TOML" in next(ln for ln in out.out.splitlines() if ln.startswith("zz-broken"))
    assert any(ln.startswith("demo-eagle3") for ln in out.out.splitlines())   # the rest still listed
    with pytest.raises(ProfileError, match="zz-latin1.toml: unreadable: not UTF-8"):
        load_profile("zz-latin1")


def test_commands_refuse_an_unreadable_profile_cleanly(capsys):
    _user_file("zz-latin1.toml", NOT_UTF8)
    assert main(["doctor", "--profile", "zz-latin1"]) == 2
    assert main(["profile", "show", "zz-latin1"]) == 2
    assert main(["--bench", "--profile", "zz-latin1"]) == 2
    err = capsys.readouterr().err
    assert err.count("zz-latin1.toml: unreadable: not UTF-8") == 3 and "Traceback" not in err


def test_picker_preview_of_an_unreadable_profile():
    from specdash.tui.screens.picker import profile_preview

    text = profile_preview(_user_file("zz-latin1.toml", NOT_UTF8)).plain
    assert "cannot read" in text and "utf-8" in text.lower()


def test_unreadable_suite_is_a_clear_error_naming_the_file(tmp_path, capsys):
    bad = _user_file("suites/zz-bad-suite.toml", b'[suite]\nname = "\xff"\n')
    assert ("zz-bad-suite", bad) in list_suites()
    with pytest.raises(ProfileError, match=r"zz-bad-suite\.toml: unreadable: not UTF-8 text \(byte 0xff"):
        load_suite("zz-bad-suite")
    prof = sim_profile(tmp_path, "p")
    assert main(["--bench", "--profile", str(prof), "--suite", "zz-bad-suite"]) == 2
    err = capsys.readouterr().err
    assert "zz-bad-suite.toml: unreadable" in err and "Traceback" not in err


def test_suite_prompts_file_not_utf8(tmp_path):
    (tmp_path / "p.jsonl").write_bytes(b'{"text": "caf\xe9"}\n')
    s = tmp_path / "s.toml"
    s.write_text('[suite]\nname = "s"\nprompts_file = "p.jsonl"\n')
    with pytest.raises(ProfileError, match=r"p\.jsonl: unreadable: not UTF-8"):
        load_suite(str(s))


# -- 5. doctor --------------------------------------------------------------------------------


def test_doctor_unknown_sim_scenario_is_an_error_naming_the_known_ones(tmp_path, capsys):
    import json

    from specdash.sim.scenario import scenario_names

    prof = sim_profile(tmp_path, "scen", scenario="no-such-scenario")
    assert main(["doctor", "--profile", str(prof), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    (f,) = [f for f in report["findings"] if f["code"] == "SIM_SCENARIO"]
    assert f["severity"] == "error" and "no-such-scenario" in f["message"]
    assert all(n in f["fix"] for n in scenario_names()) and "healthy" in f["fix"]
    assert main(["doctor", "--profile", str(sim_profile(tmp_path, "ok"))]) == 0
    assert "SIM_SCENARIO" not in capsys.readouterr().out


@pytest.mark.parametrize("table, line, said", [
    ("gpu", 'memory_mib = "lots"', "[gpu]: memory_mib must be a whole number, not 'lots'"),
    ("acceptance", 'alpha = "high"', "[acceptance]: alpha must be a number, not 'high'"),
    ("target", "step_ms = [1]", "[target]: step_ms must be a number, not [1]"),
    ("gpu", "count = 1.5", "[gpu]: count must be a whole number, not 1.5"),
    ("gpu", "count = true", "[gpu]: count must be a whole number, not True"),
    ("scenario", "name = 5", "[scenario]: name must be a string, not 5"),
    ("scenario", "time_scale = inf", "[scenario]: time_scale must be a finite number, not inf"),
    ("target", "step_ms = 1e300", "target.step_ms must be from 0 to 100000 ms (got 1e+300)"),
    ("jitter", "sigma = 1e9", "jitter.sigma must be from 0 to 5 (got 1e+09)"),
    ("acceptance.categories", 'coding = "x"', "[acceptance]: categories.coding must be a number, not 'x'"),
])
def test_scenario_values_of_the_wrong_type_or_size_are_refused_by_name(tmp_path, capsys, table, line, said):
    """A value of the wrong type or out of range in a scenario file is a SIM_SCENARIO error naming the file,
    the table and the key (not a TypeError inside the simulator, not a step of 1e300 ms that hangs)."""
    import json

    from specdash.sim.scenario import ScenarioError, load_scenario

    scen = tmp_path / "mine.toml"
    scen.write_text(f"[{table}]\n{line}\n")
    with pytest.raises(ScenarioError) as exc:
        load_scenario(str(scen))
    assert str(exc.value).startswith(str(scen)) and said in str(exc.value), str(exc.value)
    prof = sim_profile(tmp_path, "bad", scenario=str(scen))
    assert main(["doctor", "--profile", str(prof), "--json"]) == 1
    (f,) = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "SIM_SCENARIO"]
    assert said in f["message"]


def test_doctor_bad_key_in_a_scenario_file_points_at_the_file(tmp_path, capsys):
    """A scenario file that exists but has a key the simulator refuses: the fix names the file to correct,
    not [sim] scenario (which is right)."""
    import json

    scen = tmp_path / "mine.toml"
    scen.write_text('[acceptance]\nalpha = 0.8\ntree_modle = "rank"\n')
    prof = sim_profile(tmp_path, "badkey", scenario=str(scen))
    assert main(["doctor", "--profile", str(prof), "--json"]) == 1
    (f,) = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "SIM_SCENARIO"]
    assert "tree_modle" in f["message"] and f["fix"].startswith(f"correct {scen} as the message says")
    assert f["evidence"]["file"] == str(scen)


@pytest.mark.parametrize("flags,what", [(["--gpu-memory-mib", "-5"], "--gpu-memory-mib must be a positive"),
                                        (["--gpu-memory-mib", "0"], "--gpu-memory-mib must be a positive"),
                                        (["--concurrency", "0"], "--concurrency must be at least 1"),
                                        (["--gpus", "-1"], "--gpus must be at least 1")])
def test_doctor_usage_errors(capsys, flags, what):
    assert main(["doctor", "--profile", "demo-eagle3", *flags]) == 2
    out = capsys.readouterr()
    assert f"specdash doctor: {what}" in out.err and out.out == ""


@pytest.mark.parametrize("url,message", [
    ("http://[::1", "is not a valid URL"), ("http://127.0.0.1:99999", "port 99999 is outside 1-65535"),
    ("http://:80", "has no host"), ("127.0.0.1:30000", "is not an http(s) URL")])
def test_a_malformed_url_is_a_usage_error_not_a_traceback(url, message, capsys):
    from specdash.cli import main

    assert main(["--bench", "--url", url]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "internal error" not in err
