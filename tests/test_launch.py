"""The one launch path (specdash.launch) and the one exit-code mapping (specdash.commands.errors)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from specdash.bench.rundir import RunDir
from specdash.commands.errors import ExitCode, UsageError, VerificationFailed, diagnose, run
from specdash.launch import PreflightBlocked, ServerLaunch, attached_profile, build_manifest, gate
from specdash.profile import ProfileError, parse_profile

SECRET = "sekrit-key-123"


def _profile():
    return parse_profile({
        "name": "p", "server": {"launcher": "sim", "model_path": "sim:llama-3.1-8b", "api_key": SECRET},
        "speculative": {"algorithm": "EAGLE3", "draft_model_path": "sim:llama-3.1-8b-eagle3",
                        "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4},
        "env": {"HF_TOKEN": "hf-secret", "NCCL_PROTO": "LL"},
    })


class _Report:
    def __init__(self, errors: bool) -> None:
        self.has_errors = errors

    def render(self) -> str:
        return "ERROR ALGO_MISMATCH: x"

    def to_json(self) -> dict:
        return {"findings": [{"code": "ALGO_MISMATCH"}]}


def test_gate_blocks_errors_unless_forced():
    gate(None)
    gate(_Report(False))
    gate(_Report(True), force=True)
    with pytest.raises(PreflightBlocked) as ei:
        gate(_Report(True))
    assert ei.value.report.has_errors


def test_prepared_launch_writes_one_redacted_manifest(tmp_path: Path):
    rd = RunDir(tmp_path / "run")
    launch = ServerLaunch.prepare(_profile(), rd, extra_manifest={"source": "tui"})
    assert launch.server is None and launch.spec.port > 0          # port 0 → a free port, nothing started
    text = (rd.path / "manifest.json").read_text()
    assert SECRET not in text and "hf-secret" not in text
    m = json.loads(text)
    assert m["source"] == "tui" and m["attached"] is False and m["simulated"] is True
    assert m["profile_data"]["server"]["api_key"] == "***" and m["env"]["HF_TOKEN"] == "***"
    assert m["env"]["NCCL_PROTO"] == "LL" and "***" in m["argv"]
    attached = build_manifest(attached_profile(), url="http://127.0.0.1:1")
    assert attached["attached"] is True and "argv" not in attached
    assert set(attached) <= set(m)                               # one builder, one shape
    launch.record_server({"version": "0.5.23", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3})
    again = json.loads((rd.path / "manifest.json").read_text())
    assert again["sglang_version"] == "0.5.23" and again["effective"]["speculative_num_steps"] == 3


def test_one_mapping_from_exceptions_to_exit_codes():
    from specdash.bench.runner import RunFailed
    from specdash.sglang.client import SGLangHTTPError
    from specdash.sglang.process import ServerStartError

    cases = [
        (UsageError("x"), ExitCode.USAGE), (ProfileError("x"), ExitCode.USAGE), (ValueError("x"), ExitCode.USAGE),
        (OSError("x"), ExitCode.USAGE), (PreflightBlocked(_Report(True)), ExitCode.FAILED),
        (RunFailed("x"), ExitCode.FAILED), (ServerStartError("x", 1, ""), ExitCode.FAILED),
        (SGLangHTTPError(401, "/generate", "no"), ExitCode.FAILED), (VerificationFailed(["a"]), ExitCode.FAILED),
        (KeyboardInterrupt(), ExitCode.FAILED),
    ]
    for exc, code in cases:
        assert diagnose(exc).code == code, exc
    assert "--api-key" in diagnose(SGLangHTTPError(403, "/generate", "no")).lines[-1]
    assert diagnose(PreflightBlocked(_Report(True))).stdout_json["launched"] is False
    assert diagnose(BrokenPipeError()) is None and diagnose(KeyError("bug")) is None


def test_run_prints_the_diagnosis_and_lets_bugs_through(capsys):
    assert run("specdash x", lambda: ExitCode.OK) == 0

    def blocked():
        raise PreflightBlocked(_Report(True))

    assert run("specdash x", blocked, json_output=True) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["error"] == "preflight"
    assert "ALGO_MISMATCH" in out.err and "specdash x: preflight found errors" in out.err

    def bug():
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run("specdash x", bug)


def test_configuration_errors_exit_2(capsys):
    from specdash.cli import main

    assert main(["--bench"]) == 2
    assert main(["tune", "--profile", "demo-baseline"]) == 2      # nothing to tune
    assert main(["doctor", "--profile", "no-such-profile"]) == 2
    err = capsys.readouterr().err
    assert "specdash --bench: give --profile" in err and "specdash tune: " in err and "specdash doctor: " in err


def test_engines_never_import_the_command_layer():
    """Only ``specdash/cli.py`` (and ``python -m specdash``) and ``specdash/commands/`` import the
    command layer."""
    root = Path(__file__).resolve().parents[1] / "specdash"
    offenders = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] == "commands" or rel in (Path("cli.py"), Path("__main__.py")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            offenders += [f"{rel}: {n}" for n in names if n == "specdash.commands" or n.startswith("specdash.commands.")
                          or n == "specdash.cli"]
    assert offenders == []


def test_api_key_reaches_the_server_through_a_private_config_file(tmp_path: Path):
    """Not in argv (other local users read /proc/<pid>/cmdline): SGLang's --config YAML, 0600 in a 0700
    directory, gone once the server answers; the server still enforces the key."""
    import asyncio
    import os
    import stat

    import psutil

    from specdash.launch import secrets_via_config
    from specdash.sglang.client import SGLangClient, SGLangHTTPError

    argv, d, note = secrets_via_config(["python", "-m", "sglang.launch_server", "--api-key", SECRET,
                                        "--admin-api-key=adm-2", "--port", "1"])
    assert SECRET not in " ".join(argv) and "adm-2" not in " ".join(argv) and note is None
    path = Path(argv[argv.index("--config") + 1])
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"api-key": SECRET, "admin-api-key": "adm-2"}
    own = ["x", "--config", "mine.yaml", "--api-key", SECRET]
    kept, none, why = secrets_via_config(own)
    assert kept == own and none is None and "its own --config" in why
    import shutil

    shutil.rmtree(d)

    prof = parse_profile({"name": "k", "server": {"launcher": "sim", "model_path": "sim:llama-3.1-8b",
                                                  "api_key": SECRET},
                          "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}, "sim": {"time_scale": 8.0}})
    launch = ServerLaunch.prepare(prof, RunDir(tmp_path / "run"))
    server = launch.start()
    try:
        cmdline = " ".join(psutil.Process(server.pid).cmdline())
        assert SECRET not in cmdline and "--config" in cmdline
        secret_dir = launch._secret_dir
        assert secret_dir and Path(secret_dir).is_dir()
        assert launch.secrets_in_config and launch.secret_note is None  # the bench says where the key went

        async def check():
            async with SGLangClient(launch.base_url, api_key=SECRET) as c:
                await launch.wait_ready(c, 60)
                assert not Path(secret_dir).exists()  # read at start-up, deleted once ready
                body = await c.generate("hi", {"max_new_tokens": 4})
                assert body["meta_info"]["completion_tokens"] == 4
            async with SGLangClient(launch.base_url) as c:  # and the key is enforced
                with pytest.raises(SGLangHTTPError):
                    await c.generate("hi", {"max_new_tokens": 4})

        asyncio.run(check())
    finally:
        launch.stop()
    assert SECRET not in (tmp_path / "run" / "server.log").read_text()
