"""Multi-node profiles: [[nodes]] validation, per-node commands in `profile show`, import of node 0's
command, the refusal to launch, the doctor's NODES rule, and a two-node simulated deployment."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
import tomllib

import httpx
import pytest

from specdash.cli import main
from specdash.commands.profile import profile_from_command
from specdash.eagle3.doctor import run_doctor
from specdash.profile import ProfileError, build_launch, load_profile, parse_profile, profile_to_toml
from specdash.profile.flags import build_node_launches, redacted_profile_data, server_flags
from specdash.sglang.cmdline import parse_command_line
from specdash.sim.testing import SimProcess, free_port

#: A Kimi-K2.5-style EAGLE3 launch, TP 16 over two 8-GPU nodes, as node 0 runs it — written in the
#: order `profile show` prints flags, so the shown line must equal it byte for byte.
KIMI_NODE0 = (
    "NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA=mlx5_0,mlx5_1 SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 "
    "/opt/venv/bin/python3 -m sglang.launch_server --model-path /models/Kimi-K2.5 --tp-size 16 --nnodes 2 "
    "--node-rank 0 --dist-init-addr 10.0.0.1:50000 --mem-fraction-static 0.85 --context-length 32768 "
    "--host 0.0.0.0 --port 30000 --enable-metrics --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path /models/Kimi-K2.5-eagle3 --speculative-num-steps 3 "
    "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --trust-remote-code "
    "--num-continuous-decode-steps 4 --decode-log-interval 1"
)
HOSTS = ["10.0.0.1", "10.0.0.2"]


def two_nodes(**server) -> dict:
    """A valid two-node profile (simulated models, so the doctor reads no checkpoint)."""
    return {
        "name": "two",
        "server": {"launcher": "sim", "model_path": "sim:llama-3.1-8b", "tp_size": 16, "port": 30000,
                   "host": "0.0.0.0", "nnodes": 2, "dist_init_addr": "10.0.0.1:50000",
                   "api_key": "${K}"} | server,
        "speculative": {"algorithm": "EAGLE3", "draft_model_path": "sim:llama-3.1-8b-eagle3", "num_steps": 3,
                        "eagle_topk": 1, "num_draft_tokens": 4},
        "env": {"NCCL_IB_DISABLE": "0"},
        "nodes": [{"host": "10.0.0.1", "node_rank": 0, "gpus": 8, "env": {"NCCL_SOCKET_IFNAME": "eth0"}},
                  {"host": "10.0.0.2", "node_rank": 1, "gpus": 8, "workdir": "/srv/run dir",
                   "env": {"NCCL_SOCKET_IFNAME": "ens5", "NCCL_IB_HCA": "mlx5_2"}}],
    }


# --- schema -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["nodes"].pop(), "a single entry"),
    (lambda d: d["server"].update(nnodes=3), "nnodes = 3 but [[nodes]] lists 2"),
    (lambda d: d["nodes"].reverse(), "list node 0 first"),
    (lambda d: d["nodes"][1].update(node_rank=0), "node_rank 0 appears more than once"),
    (lambda d: d["nodes"][1].update(node_rank=5), "node_rank 5 is out of range for 2 nodes"),
    (lambda d: d["server"].pop("dist_init_addr"), "dist_init_addr is missing"),
    (lambda d: d["server"].update(dist_init_addr="10.0.0.1"), "is not HOST:PORT"),
    (lambda d: d["server"].update(dist_init_addr="10.0.0.1:70000"), "outside 1-65535"),
    (lambda d: d["server"].update(extra_args=["--node-rank", "1"]), "server.extra_args holds --node-rank"),
    (lambda d: d.pop("nodes"), "nnodes = 2 but there are no [[nodes]]"),
    (lambda d: d["nodes"][0].update(port=1), "unknown key 'nodes.0.port'"),
])
def test_multi_node_structure_errors_are_clear(change, message):
    data = two_nodes()
    change(data)
    with pytest.raises(ProfileError) as err:
        parse_profile(data, "p.toml")
    assert message in str(err.value) and "p.toml" in str(err.value)


def test_single_node_profiles_are_untouched():
    prof = load_profile("kimi-k2.5-int4-eagle3-tp8")
    assert not prof.multi_node and prof.num_nodes == 1 and prof.nodes == []
    assert not any(f in server_flags(prof) for f in ("--nnodes", "--node-rank", "--dist-init-addr"))
    data = redacted_profile_data(prof)
    assert "nodes" not in data and not {"nnodes", "dist_init_addr", "node_launcher", "gpus_per_node"} & set(data["server"])
    assert "nodes" not in profile_to_toml(prof) and "nnodes" not in profile_to_toml(prof)
    with pytest.raises(ProfileError, match="no \\[\\[nodes\\]\\]"):
        parse_profile({"name": "x", "server": {"model_path": "/m", "node_launcher": "ssh"}})


def test_node_toml_round_trip(tmp_path):
    prof = parse_profile(two_nodes())
    text = profile_to_toml(prof, header="two nodes")
    assert text.count("[[nodes]]") == 2 and "[nodes.env]" in text
    again = parse_profile(tomllib.loads(text))
    assert again.nodes == prof.nodes and again.server == prof.server


# --- profile show -------------------------------------------------------------------------------------
def test_show_prints_each_nodes_exact_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("K", "sk-very-secret")
    p = tmp_path / "two.toml"
    p.write_text(profile_to_toml(parse_profile(two_nodes())))
    assert main(["profile", "show", str(p), "--json"]) == 0
    first = capsys.readouterr().out
    assert main(["profile", "show", str(p), "--json"]) == 0
    assert capsys.readouterr().out == first  # reproducible byte for byte
    js = json.loads(first)
    assert "sk-very-secret" not in first
    assert js["url"] == "http://10.0.0.1:30000" and js["node_launcher"] == "attach"
    n0, n1 = js["nodes"]
    assert (n0["node_rank"], n0["serves_api"], n1["node_rank"], n1["serves_api"]) == (0, True, 1, False)
    assert js["argv"] == n0["argv"]
    for n in (n0, n1):
        argv = n["argv"]
        i = argv.index("--tp-size")
        assert argv[i:i + 8] == ["--tp-size", "16", "--nnodes", "2", "--node-rank", str(n["node_rank"]),
                                 "--dist-init-addr", "10.0.0.1:50000"]
    r0, r1 = n0["argv"].index("--node-rank") + 1, n1["argv"].index("--node-rank") + 1
    assert n0["argv"][:r0] + n0["argv"][r0 + 1:] == n1["argv"][:r1] + n1["argv"][r1 + 1:]  # only the rank differs
    assert n0["env"] == {"NCCL_IB_DISABLE": "0", "NCCL_SOCKET_IFNAME": "eth0"}
    assert n1["env"] == {"NCCL_IB_DISABLE": "0", "NCCL_SOCKET_IFNAME": "ens5", "NCCL_IB_HCA": "mlx5_2"}
    assert n1["shell_line"].startswith("cd '/srv/run dir' && NCCL_IB_DISABLE=0 NCCL_SOCKET_IFNAME=ens5 ")
    assert main(["profile", "show", str(p)]) == 0
    text = capsys.readouterr().out
    assert "node 0  host 10.0.0.1  (serves the HTTP API; 8 GPUs)" in text
    assert "node 1  host 10.0.0.2  (no HTTP API" in text and "--url http://10.0.0.1:30000" in text
    assert n1["shell_line"] in text and "sk-very-secret" not in text
    # the launch builder itself: node 1's env and argv, secrets present only in what is executed
    launches = build_node_launches(parse_profile(two_nodes()).expanded(), version="0.5.14")
    assert launches[1].spec.env["NCCL_IB_HCA"] == "mlx5_2" and "sk-very-secret" in launches[1].spec.argv


# --- profile import -------------------------------------------------------------------------------------
def test_import_kimi_tp16_over_two_nodes_reproduces_both_commands(tmp_path, capsys):
    out = tmp_path / "kimi.toml"
    assert main(["profile", "import", KIMI_NODE0, "--node", HOSTS[0], "--node", HOSTS[1], "--out", str(out)]) == 0
    data = tomllib.loads(out.read_text())
    assert data["server"]["nnodes"] == 2 and data["server"]["dist_init_addr"] == "10.0.0.1:50000"
    assert data["nodes"] == [{"host": "10.0.0.1", "node_rank": 0}, {"host": "10.0.0.2", "node_rank": 1}]
    assert not any(w in data["server"]["extra_args"] for w in ("--nnodes", "--node-rank", "--dist-init-addr"))
    capsys.readouterr()
    assert main(["profile", "show", str(out), "--json", "--sglang-version", "0.5.14"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert nodes[0]["shell_line"] == KIMI_NODE0
    assert nodes[1]["shell_line"] == KIMI_NODE0.replace("--node-rank 0", "--node-rank 1")
    # the same command typed in another order still gives both nodes' flags and env exactly
    messy = parse_command_line(KIMI_NODE0)
    words = ["--trust-remote-code", "--dist-init-addr", "10.0.0.1:50000", "--node-rank", "0", "--nnodes", "2"]
    rest = [w for w in KIMI_NODE0.split()[6:] if w not in words]
    pasted = " ".join(KIMI_NODE0.split()[:6] + words + rest)
    prof, _ = profile_from_command(pasted, nodes=HOSTS)
    for launch in build_node_launches(prof.expanded(), version="0.5.14"):
        got = parse_command_line(launch.shell_line())
        assert got.env == messy.env and got.program == messy.program
        assert got.flags == messy.flags | {"--node-rank": str(launch.rank)}


@pytest.mark.parametrize(("argv", "message"), [
    ([KIMI_NODE0], "name each node's host, node 0 first"),
    ([KIMI_NODE0, "--node", "a"], "--nnodes 2 but 1 --node host(s) given"),
    ([KIMI_NODE0.replace("--node-rank 0", "--node-rank 1"), "--node", "a", "--node", "b"], "this is node 1's command"),
    ([KIMI_NODE0.replace("--dist-init-addr 10.0.0.1:50000 ", ""), "--node", "a", "--node", "b"],
     "needs --dist-init-addr HOST:PORT"),
    (["python -m sglang.launch_server --model-path /m", "--node", "a"], "not a multi-node one"),
])
def test_import_refuses_unclear_multi_node_commands(argv, message, tmp_path, capsys):
    assert main(["profile", "import", *argv, "--out", str(tmp_path / "x.toml")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.toml").exists()


def test_single_node_import_keeps_dist_init_addr_in_extra_args():
    prof, _ = profile_from_command("python -m sglang.launch_server --model-path /m --dist-init-addr 1.2.3.4:5")
    assert not prof.multi_node and prof.server.extra_args == ["--dist-init-addr", "1.2.3.4:5"]


# --- launching ------------------------------------------------------------------------------------------
def test_a_multi_node_launch_is_refused_with_what_to_do(tmp_path, capsys, monkeypatch):
    from specdash.launch import ServerLaunch

    monkeypatch.setenv("K", "k")
    prof = parse_profile(two_nodes(), tmp_path / "two.toml")
    with pytest.raises(ProfileError) as err:
        ServerLaunch.prepare(prof, object())  # type: ignore[arg-type]
    msg = str(err.value)
    assert "runs on 2 nodes" in msg and "--url http://10.0.0.1:30000" in msg and "profile show" in msg
    assert 'node_launcher = "attach" (the default): you start the nodes' in msg
    assert 'node_launcher = "ssh" (the system ssh client) or "slurm" (srun job steps inside an allocation)' in msg
    assert "tune relaunches servers" in msg
    # a slurm profile outside an allocation: refused before the manifest, with what to run
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    slurm = parse_profile(two_nodes(node_launcher="slurm"), tmp_path / "two.toml")
    with pytest.raises(ProfileError, match='node_launcher = "slurm" (needs Slurm\'s srun|starts one job step)'):
        ServerLaunch.prepare(slurm, object())  # type: ignore[arg-type]
    p = tmp_path / "two.toml"
    p.write_text(profile_to_toml(prof))
    assert main(["--bench", "--profile", str(p), "--out", str(tmp_path / "runs")]) == 2
    err_text = capsys.readouterr().err
    assert "did not launch it" in err_text and "--url http://10.0.0.1:30000" in err_text
    assert not (tmp_path / "runs").exists()
    # the single-node path is the same as before: it builds and shows, and only multi-node is refused
    build_launch(load_profile("demo-eagle3").expanded())


# --- doctor: NODES ----------------------------------------------------------------------------------------
def nodes_findings(data: dict) -> list:
    rep = run_doctor(parse_profile(data, "two.toml"), sglang_version="0.5.14")
    return [f for f in rep.findings if f.code == "NODES"]


def test_doctor_consistent_two_nodes_have_no_nodes_finding(monkeypatch):
    monkeypatch.setenv("K", "k")
    assert nodes_findings(two_nodes()) == []


@pytest.mark.parametrize(("change", "severity", "found", "fix"), [
    (lambda d: d["server"].update(tp_size=8), "warning", "uses only 4 of them", "tp_size = 16"),
    (lambda d: d["server"].update(tp_size=32), "error", "puts 16 ranks on each", "tp_size = 16"),
    (lambda d: d["server"].update(tp_size=15), "error", "do not split evenly over 2 nodes", "multiple of 2"),
    (lambda d: [n.pop("gpus") for n in d["nodes"]] and d["server"].update(gpus_per_node=4), "error",
     "has 4 GPUs", "tp_size = 8"),
    (lambda d: d["nodes"][1].update(extra_args=["--speculative-num-steps", "5"]), "error",
     "overrides --speculative-num-steps", "remove --speculative-num-steps"),
    (lambda d: d["nodes"][1].update(extra_args=["--model-path", "/other"]), "error", "overrides --model-path",
     "set it once"),
    (lambda d: d["nodes"][1]["env"].update(SGLANG_SIMULATE_ACC_LEN="3"), "error", "SGLANG_SIMULATE_ACC_LEN=3",
     "move SGLANG_SIMULATE_ACC_LEN to [env]"),
    (lambda d: d["server"].update(dist_init_addr="127.0.0.1:50000"), "error", "is a loopback address",
     'dist_init_addr = "10.0.0.1:50000"'),
    (lambda d: d["server"].update(dist_init_addr="0.0.0.0:50000"), "error", "not an address other nodes",
     'dist_init_addr = "10.0.0.1:50000"'),
    (lambda d: d["server"].update(dist_init_addr="10.0.0.2:50000"), "error", "is node 1's host",
     'dist_init_addr = "10.0.0.1:50000"'),
    (lambda d: d["server"].update(dist_init_addr="ib0.node0:50000"), "warning", "not node 0's host",
     'set node 0\'s host = "ib0.node0"'),
    (lambda d: d["server"].update(dist_init_addr="10.0.0.1:30000"), "error", "uses the HTTP port 30000",
     "use another port"),
    (lambda d: d["server"].update(dist_init_addr="10.0.0.1:29998", extra_args=["--enable-dp-attention"]), "error",
     "ports SGLang derives", "move one"),
])
def test_doctor_nodes_findings_say_what_why_and_fix(change, severity, found, fix, monkeypatch):
    monkeypatch.setenv("K", "k")
    data = copy.deepcopy(two_nodes())
    change(data)
    got = nodes_findings(data)
    match = [f for f in got if found in f.message]
    assert match, [f.message for f in got]
    f = match[0]
    assert f.severity == severity, f
    assert fix in f.fix, f.fix
    assert "SGLang" in f.why or "torch" in f.why


def test_doctor_lists_nodes_in_the_readme_and_the_rule_table():
    from pathlib import Path

    import specdash.eagle3.rules as rules

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert "`NODES`" in readme and "NODES" in (rules.__doc__ or "")


# --- the simulator: two processes on 127.0.0.1 ----------------------------------------------------------
SIM = ["--model-path", "sim:llama-3.1-8b", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path",
       "sim:llama-3.1-8b-eagle3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
       "--speculative-num-draft-tokens", "4", "--tp-size", "2", "--time-scale", "50", "--decode-log-interval", "1",
       "--enable-metrics"]


def _nodes(rdzv: int, timeout: float = 20) -> list[str]:
    return ["--nnodes", "2", "--dist-init-addr", f"127.0.0.1:{rdzv}", "--dist-timeout", str(timeout)]


def test_two_node_simulated_deployment_only_node0_serves():
    rdzv = free_port()
    node0 = SimProcess([*SIM, *_nodes(rdzv), "--node-rank", "0"], wait_ready=False).start()
    try:
        time.sleep(0.5)
        with httpx.Client(timeout=5) as c, pytest.raises(httpx.HTTPError):  # waiting for node 1: no API yet
            c.get(node0.url + "/health")
        node1 = SimProcess([*SIM, *_nodes(rdzv), "--node-rank", "1"], ready_timeout=30).start()
        try:
            node0._wait_ready()
            with httpx.Client(timeout=10) as c:
                assert c.get(node1.url + "/health").status_code == 200
                assert c.post(node1.url + "/generate", json={"text": "hi"}).status_code == 404
                assert c.get(node1.url + "/server_info").status_code == 404
                m1 = c.get(node1.url + "/metrics")
                assert m1.status_code == 200 and "sglang:" not in m1.text
                r = c.post(node0.url + "/generate", json={"text": "Hello", "sampling_params": {"max_new_tokens": 16}})
                assert r.status_code == 200 and r.json()["meta_info"]["completion_tokens"] == 16
                info = c.get(node0.url + "/server_info").json()
                assert (info["nnodes"], info["node_rank"], info["dist_init_addr"]) == (2, 0, f"127.0.0.1:{rdzv}")
                assert "sglang:spec_accept_length" in c.get(node0.url + "/metrics").text
            assert any("Decode batch" in line for line in node0.lines)
            assert not any("Decode batch" in line or "fired up" in line for line in node1.lines)
            assert any(" TP1] Init torch distributed ends" in line for line in node1.lines)
        finally:
            node1.stop()
        assert node0.wait(60) == 1  # a node gone takes the deployment down, as with NCCL (60 s: a hang deadline)
        assert any("remote process exited" in line for line in node0.lines)
    finally:
        node0.stop()


def test_node0_fails_within_the_timeout_when_node1_never_starts():
    rdzv = free_port()
    node0 = SimProcess([*SIM, *_nodes(rdzv, timeout=1.5), "--node-rank", "0"], wait_ready=False).start()
    try:
        # 60 s is a deadline for a hang (≈ 3 s unloaded: benchmarks/bounded_waits.py), far below the 600 s node 0
        # would wait without its --dist-timeout; that the 1.5 s was the one applied, torch's message below says
        assert node0.wait(60) == 1
        text = "\n".join(node0.lines)
        assert ("torch.distributed.DistStoreError: Timed out after 1.5 seconds waiting for clients. 1/2 clients "
                "joined.") in text
        assert "Received sigquit from a child process" in text
    finally:
        node0.stop()
    node1 = SimProcess([*SIM, *_nodes(rdzv, timeout=1), "--node-rank", "1"], wait_ready=False).start()
    try:
        assert node1.wait(60) == 1  # a deadline for a hang, as node 0's
        assert f"while trying to connect to (127.0.0.1, {rdzv})" in "\n".join(node1.lines)
    finally:
        node1.stop()


@pytest.mark.parametrize(("extra", "message"), [
    (["--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "127.0.0.1:5"], "outside 0-1"),
    (["--nnodes", "2"], "needs --dist-init-addr"),
    (["--nnodes", "2", "--dist-init-addr", "nohost"], "is not HOST:PORT"),
])
def test_sim_refuses_bad_node_flags(extra, message):
    r = subprocess.run([sys.executable, "-m", "specdash.sim", *SIM, *extra], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and message in r.stderr


def test_sim_tp_not_divisible_by_nodes_fails_like_sglang():
    r = subprocess.run([sys.executable, "-m", "specdash.sim", *SIM[:SIM.index("--tp-size")], "--tp-size", "3", "--time-scale", "50",
                        *_nodes(free_port(), 1), "--node-rank", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "AssertionError: tp_size must be divisible by number of nodes" in r.stderr


def test_show_commands_run_on_the_simulator_then_bench_attaches_to_node0(tmp_path, capsys):
    """The workflow the README gives: `profile show` per node → start each → `--bench --url` node 0."""
    rdzv, port = free_port(), free_port()
    data = {"name": "sim2", "server": {"launcher": "sim", "model_path": "sim:llama-3.1-8b", "tp_size": 2,
                                       "port": port, "dist_init_addr": f"127.0.0.1:{rdzv}"},
            "speculative": {"algorithm": "EAGLE3", "draft_model_path": "sim:llama-3.1-8b-eagle3", "num_steps": 3,
                            "eagle_topk": 1, "num_draft_tokens": 4},
            "sim": {"time_scale": 50}, "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"},
            "nodes": [{"host": "127.0.0.1", "node_rank": 0}, {"host": "127.0.0.1", "node_rank": 1}]}
    p = tmp_path / "sim2.toml"
    p.write_text(profile_to_toml(parse_profile(data)))
    assert main(["profile", "show", str(p), "--json"]) == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert [f.code for f in run_doctor(load_profile(str(p))).findings if f.code == "NODES"] == []
    # node 1 gets another HTTP port here only because both "machines" are this one
    argv1 = [str(port + 1) if w == str(port) else w for w in nodes[1]["argv"]]
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=os.environ | node["env"])
             for argv, node in ((nodes[0]["argv"], nodes[0]), (argv1, nodes[1]))]
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        with httpx.Client(timeout=2) as c:
            while time.monotonic() < deadline:
                try:
                    if c.get(url + "/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        suite = tmp_path / "s.toml"
        suite.write_text('[suite]\nname = "s"\nmax_tokens = 32\nwarmup = 0\n[[prompts]]\ntext = "Hello there"\n')
        code = main(["--bench", "--profile", str(p), "--url", url, "--suite", str(suite), "--json",
                     "--out", str(tmp_path / "runs")])
        out = capsys.readouterr().out
        assert code == 0, out
        run = json.loads(out)["runs"][0]
        assert run["output_tokens"] == 32 and run["accept_length"] > 1
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)  # a deadline for a hang: the simulator exits within its own 1.6 s of SIGTERM


async def test_dashboard_session_refuses_a_multi_node_launch_before_preflight(tmp_path, monkeypatch):
    from specdash.tui.session import Session

    monkeypatch.setenv("K", "k")
    s = Session(parse_profile(two_nodes(), tmp_path / "two.toml"), out_dir=tmp_path / "runs")
    with pytest.raises(ProfileError, match="--url http://10.0.0.1:30000"):
        await s.launch()
    assert s.preflight_report is None and not (tmp_path / "runs").exists()
    assert "--node-rank" in s.preview_launch().argv  # the launch panel shows node 0's command


def test_tune_refuses_a_multi_node_profile_before_writing_anything(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("K", "k")
    p = tmp_path / "two.toml"
    p.write_text(profile_to_toml(parse_profile(two_nodes())))
    assert main(["tune", "--profile", str(p), "--budget", "1", "--out", str(tmp_path / "t")]) == 2
    assert "specdash --bench --profile" in capsys.readouterr().err and not (tmp_path / "t").exists()


def test_hosts_are_checked_for_what_urls_and_ssh_will_need(tmp_path):
    """From a newcomer's try: two nodes on one host, a loopback API bind on a remote node 0, hosts with spaces
    or shell characters, a node rank written as a string."""
    from specdash.eagle3.doctor import run_doctor
    from specdash.profile import ProfileError, parse_profile

    base = {"name": "n", "server": {"model_path": "/m", "tp_size": 2, "nnodes": 2, "dist_init_addr": "10.0.0.1:5000"},
            "nodes": [{"host": "10.0.0.1", "node_rank": 0}, {"host": "10.0.0.1", "node_rank": 1}]}
    findings = [f for f in run_doctor(parse_profile(base)).findings if f.code == "NODES"]
    msgs = " | ".join(f.message for f in findings)
    assert "nodes 0 and 1 are both on 10.0.0.1" in msgs
    assert "serves the HTTP API on --host 127.0.0.1" in msgs
    for bad in ("a b", "b;rm -rf x", "$(id)", ""):
        with pytest.raises((ProfileError, ValueError)):
            parse_profile({**base, "nodes": [{"host": "10.0.0.1", "node_rank": 0}, {"host": bad, "node_rank": 1}]})
    with pytest.raises((ProfileError, ValueError)):
        parse_profile({**base, "nodes": [{"host": "10.0.0.1", "node_rank": 0}, {"host": "h1", "node_rank": "1"}]})
    ok = parse_profile({**base, "nodes": [{"host": "10.0.0.1", "node_rank": 0}, {"host": "[fd00::2]", "node_rank": 1}]})
    assert ok.nodes[1].host == "[fd00::2]"


def test_loopback_names_are_one_machine_and_the_fix_never_repeats_the_value(monkeypatch):
    """From a newcomer's try: node 0 on 127.0.0.1 and node 1 on "localhost" is one machine (no NODES
    error about hosts), and with node 0 itself on loopback and node 1 remote the fix cannot be "use node
    0's address" (that is the same loopback value)."""
    monkeypatch.setenv("K", "k")
    data = copy.deepcopy(two_nodes())
    data["nodes"][0]["host"], data["nodes"][1]["host"] = "127.0.0.1", "localhost"
    data["server"]["dist_init_addr"] = "localhost:50000"
    msgs = [f.message for f in nodes_findings(data)]
    assert not any("loopback address but" in m or "not node 0's host" in m or "is node 1's host" in m
                   for m in msgs), msgs
    data["nodes"][1]["host"] = "10.0.0.2"
    data["server"]["dist_init_addr"] = "127.0.0.1:50000"
    (f,) = [f for f in nodes_findings(data) if "is a loopback address" in f.message]
    assert "127.0.0.1:50000" not in f.fix and "an address the other nodes reach" in f.fix, f.fix


def test_a_nodes_python_runs_its_simulator_too(monkeypatch):
    """From a newcomer's try: a node's ``python`` was ignored on the simulator (always this interpreter)."""
    import sys

    from specdash.profile import build_launch, parse_profile

    monkeypatch.setenv("K", "k")
    data = copy.deepcopy(two_nodes())
    data["nodes"][1]["python"] = "/opt/venv-b/bin/python"
    prof = parse_profile(data, "two.toml")
    assert build_launch(prof, node_rank=0).argv[:3] == [sys.executable, "-m", "specdash.sim"]
    assert build_launch(prof, node_rank=1).argv[:3] == ["/opt/venv-b/bin/python", "-m", "specdash.sim"]
    data["server"]["python"] = "/opt/venv-a/bin/python"
    assert build_launch(parse_profile(data, "two.toml"), node_rank=0).argv[0] == "/opt/venv-a/bin/python"


def test_a_node_that_hangs_without_exiting_is_named_when_node_0_times_out(tmp_path):
    """From a newcomer's try: a node that stays up but never joins was reported only through node 0's
    timeout.  Node 0's readiness timeout now lists every other node: exited, or running and how long it
    has been silent, with its last line."""
    import asyncio
    import sys

    from specdash.sglang.process import ServerProcess, ServerStartError, free_port
    from specdash.sglang.remote import NodeGroup

    port = free_port()
    head = ServerProcess([sys.executable, "-u", "-c", "import time; print('node 0 waiting', flush=True); "
                          "time.sleep(60)"], run_dir=tmp_path / "n0", url=f"http://127.0.0.1:{port}", name="h0")
    hung = ServerProcess([sys.executable, "-u", "-c", "import time; print('loading weights', flush=True); "
                          "time.sleep(60)"], run_dir=tmp_path / "n1", name="h1")
    quiet = ServerProcess([sys.executable, "-u", "-c", "import time; time.sleep(60)"], run_dir=tmp_path / "n2",
                          name="h2")
    group = NodeGroup([head, hung, quiet]).start()
    try:
        # the readiness timeout (2 s) is the behaviour under test; the lines it reports must have come first,
        # which on a loaded machine can take longer than the 2 s themselves
        deadline = time.monotonic() + 60
        while (head.ring.seq < 1 or hung.ring.seq < 1) and time.monotonic() < deadline:
            time.sleep(0.02)
        with pytest.raises(ServerStartError) as e:
            asyncio.run(group.wait_ready(f"http://127.0.0.1:{port}", timeout_s=2.0, poll_s=0.2))
    finally:
        group.stop(5.0)
    msg = str(e.value)
    assert "server not healthy after 2 s" in msg and e.value.exit_code is None
    assert "node 1 (h1): running, last output" in msg and "loading weights" in msg, msg
    assert "node 2 (h2): running, no output at all since its start" in msg, msg
    assert "node 0 waiting" in msg  # node 0's own log tail is still shown
