"""``node_launcher = "ssh"``: a two-node simulated deployment started through a real OpenSSH server on
127.0.0.1 (key pair and host key made here), measured by ``--bench``, stopped cleanly — and nothing
left on either "node" after specdash is SIGKILLed.  Skips with the reason where ``sshd`` is absent
(Debian: ``apt-get install openssh-server``; ``.ci/run`` installs it where it can)."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from specdash.sglang.remote import ENV_END, env_block, node_script
from specdash.sim.testing import free_port

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


def test_node_script_reads_env_from_stdin_and_stops_on_eof(tmp_path):
    """The node script itself, run by a local ``sh`` (what the node's login shell runs): environment from
    standard input (never argv), the ``--config`` file 0600 in a private dir, the server's own session,
    and SIGTERM to that session when standard input ends."""
    out = tmp_path / "seen.json"
    prog = ("import json,os,sys,time,stat\n"
            "cfg=sys.argv[sys.argv.index('--config')+1]\n"
            "json.dump({'token':os.environ.get('HF_TOKEN'),'cfg':open(cfg).read(),'cfgpath':cfg,"
            "'mode':oct(stat.S_IMODE(os.stat(cfg).st_mode)),'sid':os.getsid(0),'pid':os.getpid(),'cwd':os.getcwd()},"
            f"open({str(out)!r},'w'))\n"
            "print('ready',flush=True)\n"
            "time.sleep(60)\n")
    script = node_script([sys.executable, "-c", prog, "--config", "@specdash-config@"], workdir=str(tmp_path),
                         with_config=True)
    assert "s3cret" not in script
    p = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=False,
                         start_new_session=True)
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(env_block({"HF_TOKEN": "hf_s3cret"}, '{"api-key": "k3y"}'))
    p.stdin.flush()
    first = p.stdout.readline().decode()
    assert first.startswith("specdash-node pgid ")
    pgid = int(first.split()[-1])
    assert p.stdout.readline().decode().strip() == "ready"
    seen = json.loads(out.read_text())
    assert seen["token"] == "hf_s3cret" and seen["cfg"].strip() == '{"api-key": "k3y"}' and seen["mode"] == "0o600"
    assert seen["sid"] == seen["pid"] == pgid and seen["cwd"] == str(tmp_path)
    cmdlines = " ".join(" ".join(q.cmdline()) for q in psutil.process_iter() if q.pid in (p.pid, pgid))
    assert "s3cret" not in cmdlines and "k3y" not in cmdlines
    p.stdin.close()  # specdash gone: the node stops its server
    assert p.wait(timeout=20) == 128 + signal.SIGTERM   # the server's exit status, passed on
    assert not psutil.pid_exists(pgid)
    assert not Path(seen["cfgpath"]).parent.exists()   # the secret file's directory is gone


def test_env_block_refuses_what_a_line_cannot_carry():
    assert env_block({"A": "1", "B": "x y=z"}) == f"A=1\nB=x y=z\n{ENV_END}\n".encode()
    with pytest.raises(ValueError, match=r"\[env\] BAD: a value sent to an ssh node cannot hold a line break"):
        env_block({"BAD": "a\nb"})


# --- a real sshd on loopback -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if SSHD is None:
        pytest.skip("no sshd (Debian: apt-get install openssh-server); the ssh backend is tested without it only "
                    "through its node script")
    if not shutil.which("ssh-keygen") or not shutil.which("ssh"):
        pytest.skip("no ssh / ssh-keygen")
    d = tmp_path_factory.mktemp("sshd")
    os.chmod(d, 0o700)
    for name in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "user.pub").read_text())
    os.chmod(d / "authorized_keys", 0o600)
    port = free_port()
    (d / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {d / 'host'}", f"AuthorizedKeysFile {d / 'authorized_keys'}",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        f"PidFile {d / 'sshd.pid'}", "PermitRootLogin prohibit-password", "LogLevel ERROR", ""]))
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.PIPE)
    opts = ["-p", str(port), "-i", str(d / "user"), "-o", "StrictHostKeyChecking=no", "-o",
            "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-l", getpass.getuser()]
    deadline = time.monotonic() + 15
    while True:
        r = subprocess.run(["ssh", "-T", "-o", "BatchMode=yes", *opts, "127.0.0.1", "echo ok"], capture_output=True,
                           text=True, timeout=20)
        if r.stdout.strip() == "ok":
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            err = (proc.stderr.read().decode() if proc.stderr else "") + r.stderr
            pytest.skip(f"sshd on 127.0.0.1:{port} did not accept the test key: {err.strip()[-300:]}")
        time.sleep(0.2)
    yield {"options": opts, "port": port}
    proc.terminate()
    proc.wait(10)


def two_node_profile(tmp_path: Path, name: str, launcher: str, host0: str, host1: str, **options: list[str]) -> Path:
    """A two-node simulated profile started by ``launcher`` (``ssh`` / ``slurm``; ``options``: e.g.
    ``ssh_options=[…]``), node 0 on ``host0``, node 1 on ``host1`` (its own HTTP port, a workdir), an
    ``[env]`` secret that must reach no argv and no file."""
    port0, port1, rdzv = free_port(), free_port(), free_port()
    opts = "".join(f"{k} = {json.dumps(v)}\n" for k, v in options.items())
    text = f"""name = "{name}"
description = "two simulated nodes on loopback, started by {launcher}"
[server]
launcher = "sim"
model_path = "sim:llama-3.1-8b"
tp_size = 2
port = {port0}
host = "127.0.0.1"
enable_metrics = true
dist_init_addr = "127.0.0.1:{rdzv}"
node_launcher = "{launcher}"
{opts}extra_args = ["--dist-timeout", "30"]
[speculative]
algorithm = "EAGLE3"
draft_model_path = "sim:llama-3.1-8b-eagle3"
num_steps = 3
eagle_topk = 1
num_draft_tokens = 4
[env]
SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN = "1"
HF_TOKEN = "hf_not_in_argv"
[sim]
scenario = "healthy"
time_scale = 8.0
[[nodes]]
host = "{host0}"
node_rank = 0
[[nodes]]
host = "{host1}"
node_rank = 1
workdir = "{tmp_path}"
extra_args = ["--port", "{port1}"]
"""
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    return p


def _profile(tmp_path: Path, sshd: dict) -> Path:
    return two_node_profile(tmp_path, "ssh-two", "ssh", "127.0.0.1", "localhost", ssh_options=sshd["options"])


def sim_nodes(tag: str) -> list[psutil.Process]:
    out = []
    for q in psutil.process_iter(["cmdline"]):
        cl = q.info.get("cmdline") or []
        if "specdash.sim" in cl and tag in " ".join(cl):
            out.append(q)
    return out


def wait_no_sim_nodes(tag: str, timeout: float = 60.0) -> list[psutil.Process]:
    """The simulated nodes still running after up to ``timeout`` s (a deadline for a hang: the nodes stop over
    ssh, a moment after specdash's own stop returns)."""
    deadline = time.monotonic() + timeout
    while sim_nodes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    return sim_nodes(tag)


def test_two_nodes_over_ssh_bench_and_clean_stop(sshd, tmp_path, monkeypatch):
    from specdash.cli import main

    monkeypatch.setenv("SPECDASH_STATE_DIR", str(tmp_path / "state"))
    prof = _profile(tmp_path, sshd)
    tag = prof.read_text().split("dist_init_addr = ")[1].split("\n")[0].strip('"')
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nmax_tokens = 32\nwarmup = 1\n[[prompts]]\ntext = "Hello over ssh"\n'
                     '[[prompts]]\ntext = "A second prompt"\n')
    rc = main(["--bench", "--profile", str(prof), "--suite", str(suite), "--out", str(tmp_path / "runs"), "--json",
               "--force"])
    assert rc == 0
    run_dir = next((tmp_path / "runs").glob("*-ssh-two"))
    summary = json.loads((run_dir / "summary.json").read_text())
    run = summary["runs"][0] if "runs" in summary else summary
    assert run["requests"] == 2 and run["failed_requests"] == 0 and run["accept_length"] > 1.0
    log0 = (run_dir / "server.log").read_text()
    log1 = (run_dir / "node-1.log").read_text()
    assert "specdash-node pgid" in log0 and "fired up" in log0 and "Decode batch" in log0
    assert "specdash-node pgid" in log1 and "fired up" not in log1
    for f in run_dir.iterdir():  # the [env] value went over stdin: nowhere on disk
        if f.is_file():
            assert "hf_not_in_argv" not in f.read_text(errors="replace"), f
    assert wait_no_sim_nodes(tag) == []   # both nodes stopped
    assert list((tmp_path / "state").glob("*.json")) == []   # leftover records removed


def test_sigkill_of_specdash_leaves_nothing_on_either_node(sshd, tmp_path):
    prof = _profile(tmp_path, sshd)
    tag = prof.read_text().split("dist_init_addr = ")[1].split("\n")[0].strip('"')
    env = {**os.environ, "SPECDASH_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(Path(__file__).parents[1])}
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nmax_tokens = 4000\nrepeats = 50\n[[prompts]]\ntext = "long"\n')
    p = subprocess.Popen([sys.executable, "-m", "specdash", "--bench", "--profile", str(prof), "--suite", str(suite),
                          "--out", str(tmp_path / "runs"), "--force"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 90
    while len(sim_nodes(tag)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(sim_nodes(tag)) == 2, "both simulated nodes should be running"
    while time.monotonic() < deadline:  # until node 0 serves (decode lines in its log)
        logs = list((tmp_path / "runs").glob("*/server.log"))
        if logs and "Decode batch" in logs[0].read_text(errors="replace"):
            break
        time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    deadline = time.monotonic() + 30
    while sim_nodes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = sim_nodes(tag)
    for q in left:
        q.kill()
    assert left == [], "a node outlived specdash"


async def test_the_dashboard_session_launches_and_stops_both_nodes(sshd, tmp_path, monkeypatch):
    from specdash.profile import load_profile
    from specdash.tui.session import Session

    monkeypatch.setenv("SPECDASH_STATE_DIR", str(tmp_path / "state"))
    prof = _profile(tmp_path, sshd)
    tag = prof.read_text().split("dist_init_addr = ")[1].split("\n")[0].strip('"')
    s = Session(load_profile(str(prof)), out_dir=tmp_path / "runs")
    try:
        info = await s.launch(force=True)
        assert info.time_to_ready_s is not None and info.time_to_ready_s > 0
        assert len(sim_nodes(tag)) == 2
        server_info = await s.client.server_info()
        assert (server_info["nnodes"], server_info["node_rank"]) == (2, 0)
    finally:
        await s.stop()
    assert wait_no_sim_nodes(tag) == []
