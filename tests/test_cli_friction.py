"""The first hour: sub-command summaries, every command's --help, `doctor P`, `profile list --json`, the
import → show round trip, defaults from the environment or a config file, shell completion."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys

import pytest

from specdash.cli import SUMMARIES, main

SIM_CMD = ("python -m sglang.launch_server --model-path sim:llama-3.1-8b --speculative-algorithm EAGLE3 "
           "--speculative-draft-model-path sim:llama-3.1-8b-eagle3 --speculative-num-steps 3 "
           "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse's --help / usage errors
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def test_top_help_lists_every_command_with_its_summary():
    out = subprocess.run([sys.executable, "-m", "specdash", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    text = " ".join(out.stdout.split())  # argparse wraps the summaries
    for name, summary in SUMMARIES.items():
        assert f"{name} {' '.join(summary.split())}".replace("%%", "%") in text, name
    assert "SPECDASH_OUT" in text and "--bench" in text


@pytest.mark.parametrize("argv", [["profile"], ["profile", "import"], ["profile", "show"], ["profile", "list"],
                                  ["doctor"], ["draft"], ["draft", "fix"], ["draft", "selftest"], ["tune"],
                                  ["report"], ["compare"], ["completion"], ["sim"]])
def test_every_command_has_help_with_a_summary(argv):
    rc, out, _ = _run([*argv, "--help"])
    assert rc == 0
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert lines[0].startswith("usage:")
    assert len(lines) > 2 and any(len(ln.split()) >= 4 for ln in lines[1:4])  # a sentence, not just usage
    assert "``" not in out and ":mod:" not in out and ":func:" not in out  # no raw reST


def test_doctor_takes_the_profile_positionally(tmp_path):
    rc1, by_flag, _ = _run(["doctor", "--profile", "demo-eagle3", "--json"])
    rc2, by_pos, _ = _run(["doctor", "demo-eagle3", "--json"])
    assert rc1 == rc2 == 0 and json.loads(by_flag) == json.loads(by_pos)
    rc, _, err = _run(["doctor", "demo-eagle3", "--profile", "demo-ngram"])
    assert rc == 2 and "two profiles given" in err
    rc, _, err = _run(["doctor"])
    assert rc == 2 and "give the profile" in err


def test_import_then_show_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, _ = _run(["profile", "import", SIM_CMD, "--name", "mine"])
    assert rc == 0 and (tmp_path / "mine.toml").is_file()
    assert "`specdash profile show mine` and `--profile mine` find it" in out
    rc, out, _ = _run(["profile", "show", "mine", "--json"])
    assert rc == 0 and json.loads(out)["profile_path"] == str(tmp_path / "mine.toml")
    # a name a preset already has: the file is written, and the output says the name finds the preset
    rc, out, _ = _run(["profile", "import", SIM_CMD, "--name", "demo-eagle3"])
    assert rc == 0 and "the name 'demo-eagle3' finds" in out and "specdash profile show demo-eagle3.toml" in out


def test_profile_list_json(tmp_path, monkeypatch):
    from specdash.profile import user_profile_dir

    user = user_profile_dir()
    user.mkdir(parents=True)
    shutil.copy(next(p for p in _presets() if p.stem == "demo-eagle3"), user / "my-user.toml")
    (user / "broken.toml").write_text("[server\n")
    monkeypatch.chdir(tmp_path)
    assert _run(["profile", "import", SIM_CMD, "--name", "here"])[0] == 0
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # not a profile: not listed
    rc, out, _ = _run(["profile", "list", "--json"])
    assert rc == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert all(set(r) == {"name", "path", "source", "valid", "error"} for r in rows.values())
    assert rows["my-user"]["source"] == "user" and rows["my-user"]["valid"] is True
    assert rows["broken"]["source"] == "user" and rows["broken"]["valid"] is False and "TOML" in rows["broken"]["error"]
    assert rows["here"] == {"name": "here", "path": str(tmp_path / "here.toml"), "source": "file", "valid": True,
                            "error": None}
    assert rows["demo-eagle3"]["source"] == "builtin" and "pyproject" not in rows
    rc, text, _ = _run(["profile", "list"])
    assert rc == 0 and "here" in text and "INVALID" in text


def _presets():
    from specdash.profile import preset_dirs

    return [p for d in preset_dirs()[1:] if d.is_dir() for p in d.glob("*.toml")]


def test_defaults_from_the_environment_and_the_config_file(tmp_path, monkeypatch):
    from specdash.commands.errors import UsageError
    from specdash.commands.settings import config_path, defaults

    cfg = config_path()
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text('[defaults]\nout = "/from/file"\nsuite = "coding"\ngpu_exporter = ["n1=http://n1:9400/metrics"]\n')
    assert defaults() == {"out": "/from/file", "suite": "coding", "gpu_exporter": ["n1=http://n1:9400/metrics"]}
    monkeypatch.setenv("SPECDASH_OUT", "/from/env")
    monkeypatch.setenv("SPECDASH_GPU_EXPORTER", "a=http://a:1/metrics, b=http://b:2/metrics")
    got = defaults()
    assert got["out"] == "/from/env" and got["suite"] == "coding"
    assert got["gpu_exporter"] == ["a=http://a:1/metrics", "b=http://b:2/metrics"]
    # the doctor's --sglang-version from the environment; the command line wins over it
    monkeypatch.setenv("SPECDASH_SGLANG_VERSION", "0.5.10")
    assert json.loads(_run(["doctor", "demo-eagle3", "--json"])[1])["sglang_version"] == "0.5.10"
    assert json.loads(_run(["doctor", "demo-eagle3", "--json", "--sglang-version", "0.5.14"])[1])["sglang_version"] \
        == "0.5.14"
    for text, msg in (('[defaults]\napi_key = "k"\n', "secrets are not read from files"),
                      ("[defaults]\nsuite = 3\n", "want a non-empty string"),
                      ('[defaults]\nconcurrency = "4"\n', "is not an option read from the config"),
                      ('[server]\nx = 1\n', "unknown table or key server"),
                      ("[defaults\n", "cannot be read")):
        cfg.write_text(text)
        with pytest.raises(UsageError, match=msg):
            defaults()
        rc, _, err = _run(["--bench", "--demo"])
        assert rc == 2 and msg in err


def test_the_default_suite_is_named_once():
    """``specdash.DEFAULT_SUITE`` is the one spelling of the default suite: a shipped suite, shown by every --help
    that offers --suite and used by every default; no other module of the package spells it (the frozen
    dashboard data of the SVG snapshots keeps its own fixed text, as its findings do)."""
    import ast
    from pathlib import Path

    import specdash
    from specdash import DEFAULT_SUITE, cli
    from specdash.commands.report import _compare_parser
    from specdash.profile import list_suites, load_suite
    from specdash.tui import config

    assert DEFAULT_SUITE == "seeds-five" and DEFAULT_SUITE in [n for n, _ in list_suites()]
    assert load_suite(DEFAULT_SUITE).name == DEFAULT_SUITE and len(load_suite(DEFAULT_SUITE).prompts) == 5
    assert cli.DEMO_SUITE == config.DEMO_SUITE == DEFAULT_SUITE
    assert _compare_parser().parse_args(["a", "b"]).suite == DEFAULT_SUITE
    for argv, shown in ((["--help"], f"(default: {DEFAULT_SUITE})"), (["--help"], f"suite {DEFAULT_SUITE})"),
                        (["tune", "--help"], f"default {DEFAULT_SUITE})"),
                        (["compare", "--help"], f"default {DEFAULT_SUITE})")):
        rc, out, _ = _run(argv)
        assert rc == 0 and shown in " ".join(out.split()), (argv, shown)
    pkg = Path(specdash.__file__).parent
    spelled = sorted(
        str(path.relative_to(pkg)) for path in pkg.rglob("*.py")
        if any(isinstance(node, ast.Constant) and isinstance(node.value, str) and DEFAULT_SUITE in node.value
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))
    )
    assert spelled == ["__init__.py", "tui/frozen.py"]


def test_ab_is_not_a_command_and_says_what_is_missing(capsys):
    """`specdash ab`: no argparse "invalid choice", but what an A/B needs, what is missing and a command line."""
    from specdash.cli import AB_EXAMPLE

    assert main(["ab"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specdash: `ab` is not a command: an A/B runs with --bench, --profile P and --vs Q; "
                          "missing: --profile P (side A, the reference) and --vs Q (side B; speedup = Q over P)")
    assert f"\n  {AB_EXAMPLE}\n" in err and "invalid choice" not in err
    assert "specdash compare --url URL_A --vs-url URL_B" in err and "specdash compare RUNDIR_A RUNDIR_B" in err
    # the example runs as it is: both its profiles ship, and --bench parses it with two sides
    from specdash.cli import _main_parser
    from specdash.profile import load_profile

    a = _main_parser().parse_args(AB_EXAMPLE.split()[1:])
    assert a.bench and load_profile(a.profile).name == a.profile and load_profile(a.vs).name == a.vs != a.profile
    # the user's own options, completed with what is missing
    assert main(["ab", "--profile", "demo-eagle3", "--rounds", "2"]) == 2
    err = capsys.readouterr().err
    assert "missing: --vs Q (side B; speedup = Q over P); run:\n  specdash --bench --profile demo-eagle3 --rounds 2 " \
           "--vs Q\n" in err and "missing: --profile" not in err
    assert main(["ab", "--vs", "demo-eagle3"]) == 2
    assert "\n  specdash --bench --profile P --vs demo-eagle3\n" in capsys.readouterr().err
    assert main(["ab", "-pdemo-baseline", "--vs=demo-eagle3"]) == 2
    assert "nothing is missing; run it without `ab`:\n  specdash --bench -pdemo-baseline --vs=demo-eagle3\n" \
        in capsys.readouterr().err
    assert main(["ab", "--url", "http://h:1"]) == 2  # --vs cannot attach: two running servers are compare's
    assert "\n  specdash compare --url URL_A --vs-url URL_B\n" in capsys.readouterr().err


def test_rounds_without_a_second_side_is_refused(capsys):
    assert main(["--bench", "--demo", "--rounds", "3"]) == 2
    err = capsys.readouterr().err
    assert "--rounds 3 alternates the launch order of an A/B, and this run has no second side: add --vs Q" in err
    assert "e.g. specdash --bench --profile demo-eagle3 --vs Q --rounds 3" in err


def test_existing_invocations_still_parse():
    from specdash.cli import _main_parser

    p = _main_parser()
    a = p.parse_args(["--bench", "--profile", "P", "--vs", "Q", "--json"])
    assert (a.bench, a.profile, a.vs, a.json, a.command) == (True, "P", "Q", True, None)
    assert p.parse_args([]).command is None and p.parse_args(["--demo"]).demo
    assert _run(["--version"])[0] == 0


def test_bash_completion_completes_commands_and_options(tmp_path):
    pytest.importorskip("shtab")
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    rc, script, _ = _run(["completion", "bash"])
    assert rc == 0
    f = tmp_path / "specdash.bash"
    f.write_text(script)
    probe = ('source "$1"; for w in "co" "profile l" "doctor --sg" "--ben" "compare --all"; do read -ra W <<< '
             '"specdash $w"; COMP_WORDS=("${W[@]}"); COMP_CWORD=$((${#W[@]}-1)); COMPREPLY=(); _shtab_specdash; '
             'echo "${COMPREPLY[*]}"; done')
    out = subprocess.run(["bash", "-c", probe, "bash", str(f)], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["compare completion", "list", "--sglang-version", "--bench",
                                       "--allow-unverified"], out.stderr
    assert _run(["completion", "fish"])[0] == 2


def test_completion_without_shtab_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "shtab", None)
    rc, _, err = _run(["completion", "bash"])
    assert rc == 2 and "pip install 'specdash[completion]'" in err


@pytest.mark.parametrize("argv, said", [
    # an abbreviation is an error (it would silently change meaning when a flag is added), with the full spelling
    (["--profil", "demo-eagle3", "--bench"], "unknown option: --profil (did you mean --profile?)"),
    # the simulator's own flag on --bench: named, with where it goes (argparse read the value as a command)
    (["--bench", "--sim-scenario", "real-smol"], "unknown option: --sim-scenario (--sim-scenario is an option of the "
     "simulator (specdash sim); a profile's [sim] table sets it for --bench and the dashboard: [sim] scenario = …)"),
    # a sub-command: the unknown option comes before argparse's 'required' complaint
    (["tune", "--budgett", "3"], "specdash tune: error: unknown option: --budgett (did you mean --budget?)"),
    # a sub-sub-command's options count as known; a typo there is named with the nearest one
    (["profile", "show", "--jsn", "demo-eagle3"], "unknown option: --jsn (did you mean --json?)"),
    (["--bench", "--no-such-thing"], "unknown option: --no-such-thing; `specdash --help` lists the options"),
    # a sub-command typo: argparse's choices, and the nearest one
    (["profile", "shwo", "demo-eagle3"], "invalid choice: 'shwo'"),
    (["profile", "shwo", "demo-eagle3"], "did you mean 'show'?"),
])
def test_unknown_options_are_named_with_the_nearest_spelling(argv, said):
    rc, out, err = _run(argv)
    assert rc == 2 and out == ""
    assert said in " ".join(err.split()), err
    assert "invalid choice" not in err or "did you mean" in err


def test_known_options_still_parse_exactly():
    from specdash.cli import _main_parser

    a = _main_parser().parse_args(["--bench", "--profile=demo-eagle3", "--sweep", "concurrency=1,4"])
    assert (a.bench, a.profile, a.sweep) == (True, "demo-eagle3", "concurrency=1,4")
