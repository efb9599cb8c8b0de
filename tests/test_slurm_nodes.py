"""``node_launcher = "slurm"``: a two-node simulated deployment started as two ``srun`` job steps of a real
Slurm allocation — slurmctld and slurmd (Debian's ``slurmctld`` / ``slurmd`` / ``slurm-client`` 22.05) run
here on loopback with a configuration written by the test (``auth/none``, one node: this machine) — measured
by ``--bench``, stopped cleanly, and nothing left in Slurm or on the "node" after specdash is SIGKILLed.
Skips with the reason where the Slurm daemons are absent or the test is not root (slurmd starts the steps
as their user); ``.ci/run`` installs them where it can.  The checks of the allocation itself run anywhere."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from specdash.sglang.remote import SRUN_BASE, env_block, node_script, slurm_problem, srun_argv
from specdash.sim.testing import free_port
from tests.test_ssh_nodes import sim_nodes, two_node_profile

SLURM = {b: shutil.which(b) or (f"/usr/sbin/{b}" if os.path.exists(f"/usr/sbin/{b}") else None)
         for b in ("slurmctld", "slurmd", "srun", "salloc", "scancel", "squeue", "sinfo")}


def test_the_node_script_under_slurm_keeps_the_server_in_the_step(tmp_path):
    """``new_session=False`` (Slurm): the server stays in the step's process group (slurmstepd ends it with
    the step), and SIGTERM goes to the server's pid when standard input ends."""
    prog = "import os,sys,time\nprint('pg', os.getpgid(0), flush=True)\ntime.sleep(60)\n"
    script = node_script([sys.executable, "-c", prog], new_session=False)
    assert "setsid" not in script and "kill -TERM $pg" in script and "-$pg" not in script
    p = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(env_block({}))
    p.stdin.flush()
    first = p.stdout.readline().decode()
    assert first.startswith("specdash-node pid ")
    pid = int(first.split()[-1])
    assert p.stdout.readline().decode().split() == ["pg", str(p.pid)]  # the script's (the step's) group
    p.stdin.close()
    assert p.wait(timeout=20) == 128 + signal.SIGTERM
    assert not psutil.pid_exists(pid)


def test_srun_argv_is_one_step_on_the_named_node():
    argv = srun_argv("gpu-07", "echo hi", ["--gpus-per-node=8"], job_name="specdash-k2-node1")
    assert argv == ["srun", *SRUN_BASE, "--nodelist=gpu-07", "--job-name=specdash-k2-node1", "--gpus-per-node=8",
                    "sh", "-c", "echo hi"]


def test_slurm_problem_says_what_is_missing(tmp_path):
    assert "srun on PATH" in slurm_problem(["a", "b"], {"PATH": str(tmp_path)})
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, body in (("srun", "exit 0"), ("scontrol", 'echo gpu-01; echo gpu-02')):
        (fake / name).write_text(f"#!/bin/sh\n{body}\n")
        (fake / name).chmod(0o755)
    msg = slurm_problem(["gpu-01", "gpu-02"], {"PATH": str(fake)})
    assert "SLURM_JOB_ID is unset" in msg and "salloc --nodes 2" in msg
    env = {"PATH": str(fake), "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "gpu-[01-02]"}
    assert slurm_problem(["gpu-01", "gpu-02"], env) is None
    msg = slurm_problem(["gpu-01", "gpu-09"], env)
    assert "host gpu-09: not a node of allocation 42 (gpu-01, gpu-02)" in msg
    assert "SLURM_JOB_NODELIST is unset" in slurm_problem(["gpu-01"], {"PATH": str(fake), "SLURM_JOB_ID": "42"})
    (fake / "scontrol").write_text("#!/bin/sh\necho 'scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error' >&2"
                                   "\nexit 1\n")
    msg = slurm_problem(["gpu-01"], env)
    assert "`scontrol show hostnames gpu-[01-02]` failed: scontrol: error: resolve_ctls_from_dns_srv" in msg


def test_a_slurm_profile_outside_an_allocation_is_refused_before_anything_starts(tmp_path, monkeypatch, capsys):
    from specdash.cli import main

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\necho srun ran >> %s\n" % (tmp_path / "ran"))
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    prof = _profile(tmp_path, "gpu-01", "gpu-02")
    rc = main(["--bench", "--profile", str(prof), "--out", str(tmp_path / "runs"), "--force"])
    err = capsys.readouterr().err
    assert rc == 2 and "SLURM_JOB_ID is unset" in err and "salloc --nodes 2" in err, err
    assert not (tmp_path / "ran").exists()


def test_slurm_options_need_the_slurm_launcher(tmp_path):
    from specdash.profile import ProfileError, load_profile

    p = tmp_path / "p.toml"
    p.write_text('name = "p"\n[server]\nlauncher = "sim"\nmodel_path = "sim:llama-3.1-8b"\n'
                 'slurm_options = ["--overlap"]\n')
    with pytest.raises(ProfileError, match=r"server.slurm_options is set but node_launcher is 'attach'"):
        load_profile(str(p))


def _profile(tmp_path: Path, host0: str, host1: str) -> Path:
    return two_node_profile(tmp_path, "slurm-two", "slurm", host0, host1, slurm_options=["--overlap"])


# --- a real Slurm on loopback ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [b for b, path in SLURM.items() if path is None]
    if missing:
        pytest.skip(f"no {', '.join(missing)} (Debian: apt-get install slurmctld slurmd slurm-client); the slurm "
                    "backend is tested without them only through its srun command and node script")
    if os.geteuid() != 0:
        pytest.skip("slurmd runs job steps as their user and needs root here")
    host = socket.gethostname().split(".")[0]
    try:
        if socket.gethostbyname(host) is None:
            raise OSError
    except OSError:
        pytest.skip(f"this machine's short host name {host!r} does not resolve (node 0's API is reached by it)")
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool"):
        (d / sub).mkdir()
    ctld_port, d_port = free_port(), free_port()
    conf = d / "slurm.conf"
    conf.write_text(f"""ClusterName=specdash-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
""")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for k in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
        del env[k]
    daemons = [subprocess.Popen([SLURM["slurmctld"], "-D", "-c", "-i"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT, start_new_session=True)]
    time.sleep(0.5)
    daemons.append(subprocess.Popen([SLURM["slurmd"], "-D"], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT, start_new_session=True))
    job = None
    try:
        deadline = time.monotonic() + 30
        state = ""
        while time.monotonic() < deadline:
            r = subprocess.run([SLURM["sinfo"], "-h", "-o", "%T"], env=env, capture_output=True, text=True)
            state = r.stdout.strip()
            if state == "idle":
                break
            time.sleep(0.3)
        if state != "idle":
            logs = "".join((d / f).read_text(errors="replace")[-600:] for f in ("slurmctld.log", "slurmd.log")
                           if (d / f).exists())
            pytest.skip(f"the test's Slurm did not come up (node state {state!r}): {logs}")
        r = subprocess.run([SLURM["salloc"], "-N1", "--no-shell", "-J", "specdash-test"], env=env,
                           capture_output=True, text=True, timeout=60)
        m = re.search(r"Granted job allocation (\d+)", r.stdout + r.stderr)
        assert m, r.stdout + r.stderr
        job = m.group(1)
        yield {"env": {"SLURM_CONF": str(conf), "SLURM_JOB_ID": job, "SLURM_JOB_NODELIST": host}, "host": host,
               "dir": d}
    finally:
        if job:
            subprocess.run([SLURM["scancel"], job], env=env, capture_output=True)
        for p in reversed(daemons):
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def _steps(slurm) -> list[str]:
    r = subprocess.run([SLURM["squeue"], "-s", "-h", "-j", slurm["env"]["SLURM_JOB_ID"], "-o", "%i %j"],
                       env={**os.environ, **slurm["env"]}, capture_output=True, text=True)
    return [x for x in r.stdout.splitlines() if "specdash-" in x]


def test_two_nodes_as_srun_steps_bench_and_clean_stop(slurm, tmp_path, monkeypatch):
    from specdash.cli import main

    for k, v in slurm["env"].items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SPECDASH_STATE_DIR", str(tmp_path / "state"))
    prof = _profile(tmp_path, slurm["host"], slurm["host"])
    tag = prof.read_text().split("dist_init_addr = ")[1].split("\n")[0].strip('"')
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nmax_tokens = 32\nwarmup = 1\n[[prompts]]\ntext = "Hello from Slurm"\n'
                     '[[prompts]]\ntext = "A second prompt"\n')
    rc = main(["--bench", "--profile", str(prof), "--suite", str(suite), "--out", str(tmp_path / "runs"), "--json",
               "--force"])
    assert rc == 0
    run_dir = next((tmp_path / "runs").glob("*-slurm-two"))
    run = json.loads((run_dir / "summary.json").read_text())["runs"][0]
    assert run["requests"] == 2 and run["failed_requests"] == 0 and run["accept_length"] > 1.0
    log0 = (run_dir / "server.log").read_text()
    log1 = (run_dir / "node-1.log").read_text()
    assert "specdash-node pid" in log0 and "fired up" in log0 and "Decode batch" in log0
    assert "specdash-node pid" in log1 and "fired up" not in log1
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "srun" not in json.dumps(manifest.get("launch_command", ""))  # the manifest holds SGLang's command
    for f in run_dir.iterdir():  # the [env] value went over srun's stdin: nowhere on disk
        if f.is_file():
            assert "hf_not_in_argv" not in f.read_text(errors="replace"), f
    deadline = time.monotonic() + 60  # a deadline for a hang: the steps end a moment after the run
    while (sim_nodes(tag) or _steps(slurm)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sim_nodes(tag) == [] and _steps(slurm) == []  # both nodes stopped, both job steps ended
    assert list((tmp_path / "state").glob("*.json")) == []  # leftover records removed


def test_sigkill_of_specdash_ends_both_job_steps(slurm, tmp_path):
    prof = _profile(tmp_path, slurm["host"], slurm["host"])
    tag = prof.read_text().split("dist_init_addr = ")[1].split("\n")[0].strip('"')
    env = {**os.environ, **slurm["env"], "SPECDASH_STATE_DIR": str(tmp_path / "state"),
           "PYTHONPATH": str(Path(__file__).parents[1])}
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nmax_tokens = 4000\nrepeats = 50\n[[prompts]]\ntext = "long"\n')
    out = (tmp_path / "specdash.out").open("wb")
    p = subprocess.Popen([sys.executable, "-m", "specdash", "--bench", "--profile", str(prof), "--suite", str(suite),
                          "--out", str(tmp_path / "runs"), "--force"], env=env, stdout=out,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:  # until node 0 serves (decode lines in its log)
        logs = list((tmp_path / "runs").glob("*/server.log"))
        if logs and "Decode batch" in logs[0].read_text(errors="replace"):
            break
        time.sleep(0.2)
    said = (tmp_path / "specdash.out").read_text(errors="replace")[-3000:]
    logs = "".join(f.read_text(errors="replace")[-1500:] for f in (tmp_path / "runs").glob("*/*.log"))
    assert p.poll() is None, f"specdash ended (code {p.returncode}) before node 0 served: {said}\n{logs}"
    nodes, steps = sim_nodes(tag), _steps(slurm)
    assert len(nodes) == 2 and len(steps) == 2, f"both nodes should run as job steps: {nodes} {steps}\n{said}\n{logs}"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    deadline = time.monotonic() + 40
    while (sim_nodes(tag) or _steps(slurm)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left, steps = sim_nodes(tag), _steps(slurm)
    for q in left:
        q.kill()
    assert left == [] and steps == [], f"outlived specdash: {left} {steps}"
