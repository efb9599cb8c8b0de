"""Issue 13: the launched server dies or stalls mid-run → a partial ``summary.json``, exit 1, no
process left, and ``--resume RUNDIR`` (alone) completes the run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from specdash.cli import main
from tests.test_bench import sim_profile

N_PROMPTS = 6


def _suite(tmp_path: Path, max_tokens: int = 192) -> Path:
    p = tmp_path / "faults.toml"
    prompts = "".join(f'[[prompts]]\ntext = "prompt number {i}: tell me a story"\n' for i in range(N_PROMPTS))
    p.write_text(f'[suite]\nname = "faults"\nmax_tokens = {max_tokens}\nwarmup = 0\nconcurrency = 1\n{prompts}')
    return p


def _sim_servers() -> list[psutil.Process]:
    out = []
    for c in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "specdash.sim" in " ".join(c.cmdline()) and c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
    return out


class _Saboteur(threading.Thread):
    """Once ``requests.jsonl`` under ``runs`` holds ``after`` records, send ``sig`` to the sim server."""

    def __init__(self, runs: Path, sig: int, after: int = 2) -> None:
        super().__init__(daemon=True)
        self.runs, self.sig, self.after = runs, sig, after
        self.victim: psutil.Process | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 60
        while not self.stop.is_set() and time.monotonic() < deadline:
            for f in self.runs.glob("*/requests.jsonl"):
                if len(f.read_text().splitlines()) >= self.after:
                    servers = _sim_servers()
                    if servers:
                        self.victim = servers[0]
                        os.kill(self.victim.pid, self.sig)
                        return
            time.sleep(0.02)

    def cleanup(self) -> None:
        self.stop.set()
        self.join(5)
        if self.victim is not None:
            with contextlib.suppress(psutil.Error, OSError):
                self.victim.send_signal(signal.SIGCONT)


def _no_server_left(timeout: float = 30.0) -> None:  # a deadline for a hang: normally gone already
    deadline = time.monotonic() + timeout
    while _sim_servers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _sim_servers(), "a simulated server outlived the run"


def _run_and_break(tmp_path, capsys, sig: int):
    prof = sim_profile(tmp_path, "fault", time_scale=4.0)
    runs = tmp_path / "runs"
    sab = _Saboteur(runs, sig)
    sab.start()
    try:
        rc = main(["--bench", "--profile", str(prof), "--suite", str(_suite(tmp_path)), "--out", str(runs)])
    finally:
        sab.cleanup()
    out = capsys.readouterr()
    assert sab.victim is not None, "the run never reached two records"
    assert rc == 1, out.err
    _no_server_left()
    (run_dir,) = list(runs.iterdir())
    return run_dir, out.err


def _check_partial(run_dir: Path, reason_has: str) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    (run,) = summary["runs"]
    assert run["partial"] is True and reason_has in run["partial_reason"]
    assert 2 <= run["requests"] < N_PROMPTS
    recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert all(r["ok"] for r in recs), "requests that failed because the server died are not results"
    return run


def _resume_completes(run_dir: Path, capsys) -> None:
    assert main(["--bench", "--resume", str(run_dir), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["partial"] is False and run["partial_reason"] is None
    assert run["requests"] == N_PROMPTS and run["run_dir"] == str(run_dir)
    _no_server_left()
    # and once complete, resuming again says so without launching anything
    assert main(["--bench", "--resume", str(run_dir)]) == 0
    assert "already complete" in capsys.readouterr().err


def test_server_killed_mid_run_gives_a_partial_run_that_resumes(tmp_path, capsys):
    run_dir, err = _run_and_break(tmp_path, capsys, signal.SIGKILL)
    run = _check_partial(run_dir, "SIGKILL")
    assert "killed by SIGKILL, exit code -9" in err
    assert f"specdash --bench --resume {run_dir}" in err and "last server log lines" in err
    assert "Traceback" not in err and "ConnectError" not in err
    assert run["verification"] is not None
    _resume_completes(run_dir, capsys)


def test_stalled_server_gives_a_partial_run(tmp_path, capsys, monkeypatch):
    import specdash.commands.bench as bench_cmd

    real = bench_cmd._options
    monkeypatch.setattr(bench_cmd, "_options", lambda args, progress: replace(real(args, progress), stall_s=2.0))
    t0 = time.monotonic()
    run_dir, err = _run_and_break(tmp_path, capsys, signal.SIGSTOP)  # (pytest's timeout is the hang deadline)
    print(f"stalled run ended after {time.monotonic() - t0:.1f} s", file=sys.stderr)  # a figure, not a bound
    _check_partial(run_dir, "no token progress for 2 s")
    # the stopped server was continued before its SIGTERM, which it then acted on (else: SIGKILL after the
    # stop's timeout, and no shutdown line)
    assert "SIGTERM received" in (run_dir / "server.log").read_text()
    assert "server process is stopped" in err and "--resume" in err
    _resume_completes(run_dir, capsys)


@pytest.mark.parametrize("changed", [["--repeats", "2"], ["--max-tokens", "64"], ["--concurrency", "3"]])
def test_resume_refuses_another_request_shape(tmp_path, capsys, changed):
    prof = sim_profile(tmp_path, "shape")
    suite = _suite(tmp_path, max_tokens=16)
    assert main(["--bench", "--profile", str(prof), "--suite", str(suite), "--out", str(tmp_path / "runs"),
                 "--json"]) == 0
    run_dir = json.loads(capsys.readouterr().out)["runs"][0]["run_dir"]
    assert main(["--bench", "--resume", run_dir, *changed]) == 2
    err = capsys.readouterr().err
    assert f"it was run with {changed[0]}" in err and "Traceback" not in err


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe\x00garbage", b"[1, 2]", None])
def test_resume_of_a_bad_manifest_is_a_clear_error(tmp_path, capsys, content):
    run_dir = tmp_path / "rd"
    run_dir.mkdir()
    if content is not None:
        (run_dir / "manifest.json").write_bytes(content)
    assert main(["--bench", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specdash --bench: cannot resume") and "Traceback" not in err


def test_sweep_point_with_a_dead_server_ends_the_sweep_partial(tmp_path):
    """Through the API (``RunOptions.on_record``): the server dies in the second sweep point; the first
    point's RUN stays complete, the second is partial, and the message does not offer a resume."""
    import asyncio

    from specdash.bench.runner import ProfileRun, RunFailed, RunOptions
    from specdash.profile import load_profile, load_suite

    seen = []

    def on_record(rec):
        seen.append(rec)
        if rec.get("concurrency") == 2 and sum(r.get("concurrency") == 2 for r in seen) == 2:
            os.kill(pr.server.pid, signal.SIGKILL)

    prof = load_profile(str(sim_profile(tmp_path, "sweepfault", time_scale=4.0)))
    pr = ProfileRun(prof, load_suite(str(_suite(tmp_path, max_tokens=96))),
                    RunOptions(out_dir=tmp_path / "runs", sweep=(1, 2), on_record=on_record))
    with pytest.raises(RunFailed) as err:
        asyncio.run(pr.run())
    assert "killed by SIGKILL" in str(err.value) and "sweep cannot be resumed" in str(err.value)
    runs = json.loads((pr.rundir.path / "summary.json").read_text())["runs"]
    assert [r["partial"] for r in runs] == [False, True] and runs[0]["requests"] == N_PROMPTS
    assert 2 <= runs[1]["requests"] < N_PROMPTS
    assert not pr.server.is_alive()
    _no_server_left()


def test_tunes_resume_hint_works_for_its_baseline(tmp_path, capsys):
    """Issue #23 item 10: the server dies in tune's baseline launch; the hint specdash prints, run exactly
    as printed, resumes that run — with the tune's derived profile (``<profile>-baseline``, no speculation),
    made again from the file and the manifest's ``variant`` — and completes it."""
    import re
    import shlex

    prof = sim_profile(tmp_path, "fault", time_scale=4.0)
    runs = tmp_path / "runs"
    sab = _Saboteur(runs, signal.SIGKILL)
    sab.start()
    try:
        rc = main(["tune", "--profile", str(prof), "--suite", str(_suite(tmp_path)), "--out", str(runs),
                   "--budget", "1", "--no-final-ab"])
    finally:
        sab.cleanup()
    err = capsys.readouterr().err
    assert sab.victim is not None and rc == 1, err
    _no_server_left()
    hint = re.search(r"`(specdash --bench --resume [^`]+)`", err)
    assert hint is not None, err
    words = shlex.split(hint.group(1))
    (run_dir,) = [d for d in runs.rglob("manifest.json")]
    run_dir = run_dir.parent
    assert words[-1] == str(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["profile"] == "fault-baseline"
    assert manifest["variant"] == {"of": "fault", "of_path": str(prof),
                                   "changes": {"name": "fault-baseline", "speculative": None}}
    _check_partial(run_dir, "SIGKILL")
    assert main([*words[1:], "--json"]) == 0, capsys.readouterr().err   # exactly the hint (+ --json to read it)
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["profile"] == "fault-baseline" and run["effective"]["speculative_algorithm"] is None
    assert run["partial"] is False and run["requests"] == N_PROMPTS and run["run_dir"] == str(run_dir)
    _no_server_left()


def test_variant_record_rebuilds_the_profile_and_never_holds_a_secret(tmp_path, monkeypatch):
    """The manifest's ``variant`` makes tune's derived profiles again exactly; a variant whose change
    involves a secret is not recorded (it cannot be rebuilt from the file without writing the secret)."""
    from specdash.profile import load_profile, redacted_profile_data
    from specdash.profile.variants import apply_variant, profile_variant, variant, variant_record

    monkeypatch.setenv("H23A_KEY", "sk-secret-123")
    path = sim_profile(tmp_path, "keyed")
    path.write_text(path.read_text().replace('port = 0', 'port = 0\napi_key = "${H23A_KEY}"'))
    src = load_profile(str(path))
    assert variant_record(src.expanded()) is None  # the file's own profile
    for derived in (variant(src, 5, 2, 8), profile_variant(src, None, name="keyed-baseline")):
        rec = variant_record(derived.expanded())
        assert rec is not None and "sk-secret" not in json.dumps(rec)
        again = apply_variant(load_profile(rec["of_path"]), rec["changes"])
        assert redacted_profile_data(again.expanded()) == redacted_profile_data(derived.expanded())
        assert again.expanded().server.api_key == "sk-secret-123"  # from the environment, as the file says
    secret_env = src.model_copy(update={"env": {**src.env, "HF_TOKEN": "hf_abc"}})
    secret_env._path = src.path
    assert variant_record(secret_env.expanded()) is None
