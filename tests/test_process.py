"""ServerProcess: process groups, log capture, readiness, stopping, leftovers, signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from specdash.sglang import process as proc_mod
from specdash.sglang.leftovers import find_leftovers, kill_leftover, stop_leftovers_interactively
from specdash.sglang.logs import LineKind
from specdash.sglang.process import ServerProcess, ServerStartError, free_port, live_servers, state_dir
from tests.procs import process_gone

PY = sys.executable
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDASH_STATE_DIR", str(tmp_path / "state"))
    yield
    for srv in live_servers():  # never leave a child behind, even when a test fails
        srv.stop(timeout_s=1)


def wait_until(cond, timeout=15.0, what="condition"):
    """Poll ``cond`` until true (awaiting an observable condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def group_members(pgid: int) -> list[int]:
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (psutil.Error, ProcessLookupError):
            pass
    return out


def script(body: str) -> list[str]:
    return [PY, "-u", "-c", textwrap.dedent(body)]


def test_log_capture_and_stop(tmp_path):
    srv = ServerProcess(
        script("""
            import os, sys, time
            print("hello from", os.environ["SPECDASH_TEST_VAR"])
            sys.stderr.write("[2026-01-01 00:00:00] Decode batch, #running-req: 2, accept len: 1.50, #queue-req: 0\\n")
            sys.stderr.flush()
            print("caf\\u00e9 \\xff", flush=True)
            time.sleep(60)
        """),
        env={"SPECDASH_TEST_VAR": "v42"},
        run_dir=tmp_path / "run",
    ).start()
    assert os.getpgid(srv.pid) == srv.pid != os.getpgid(0)  # its own process group
    assert os.getsid(srv.pid) == srv.pid  # and session
    wait_until(lambda: srv.ring.seq >= 3, what="three log lines")
    assert srv.ring.lines() == ["hello from v42",
                                "[2026-01-01 00:00:00] Decode batch, #running-req: 2, accept len: 1.50, #queue-req: 0",
                                "café ÿ"]
    assert srv.ring.last_decode.accept_len == 1.5
    log_bytes = (tmp_path / "run" / "server.log").read_bytes()
    assert log_bytes.startswith(b"hello from v42\n[2026-01-01 00:00:00] Decode batch")
    assert log_bytes.endswith("café ÿ\n".encode())
    code = srv.stop(timeout_s=5)
    assert code == -signal.SIGTERM
    assert group_members(srv.pid) == []
    assert srv.stop() == code  # idempotent
    assert srv not in live_servers()
    record = json.loads((tmp_path / "run" / "server_process.json").read_text())
    assert record["pid"] == srv.pid and record["exit_code"] == code


def test_stop_kills_grandchildren_and_escapees(tmp_path):
    srv = ServerProcess(script(f"""
        import subprocess, sys, time
        same = subprocess.Popen([{PY!r}, "-c", "import time; time.sleep(60)"])
        escaped = subprocess.Popen([{PY!r}, "-c", "import time; time.sleep(60)"], start_new_session=True)
        print(same.pid, escaped.pid, flush=True)
        time.sleep(60)
    """)).start()
    wait_until(lambda: srv.ring.seq >= 1, what="child pids")
    same, escaped = map(int, srv.ring.lines()[0].split())
    assert os.getpgid(same) == srv.pid and os.getpgid(escaped) != srv.pid
    srv.stop(timeout_s=5)
    assert process_gone(same) and process_gone(escaped) and process_gone(srv.pid)
    assert group_members(srv.pid) == []


def test_stop_escalates_to_sigkill(tmp_path):
    srv = ServerProcess(script("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring SIGTERM", flush=True)
        time.sleep(60)
    """)).start()
    wait_until(lambda: srv.ring.seq >= 1, what="handler installed")
    t0 = time.monotonic()
    assert srv.stop(timeout_s=0.5) == -signal.SIGKILL
    # A deadline for a hang, not a speed bound (≈ 0.5 s unloaded; ``benchmarks/bounded_waits.py`` prints it):
    # a stop that waited for the SIGTERM-ignoring child to end by itself would take its 60 s sleep.
    assert time.monotonic() - t0 < 30
    assert group_members(srv.pid) == []


def test_context_manager_and_state_record(tmp_path):
    argv = script("import time; time.sleep(60)")
    with ServerProcess(argv, url="http://127.0.0.1:1") as srv:
        rec_path = state_dir() / f"{srv.pid}.json"
        rec = json.loads(rec_path.read_text())
        assert rec["pid"] == rec["pgid"] == srv.pid
        assert rec["argv"] == argv[:3] and rec["owner_pid"] == os.getpid()
        assert rec["create_time"] == pytest.approx(psutil.Process(srv.pid).create_time())
        assert find_leftovers() == []  # its owner (this process) is alive
    assert not rec_path.exists() and process_gone(srv.pid)


def test_missing_program_raises_and_registers_nothing(tmp_path):
    srv = ServerProcess([str(tmp_path / "no-such-server")])
    with pytest.raises(FileNotFoundError):
        srv.start()
    assert live_servers() == [] and srv.pid is None and not srv.is_alive()
    assert not state_dir().exists() or list(state_dir().glob("*.json")) == []


def test_rejects_shell_strings():
    with pytest.raises(ValueError):
        ServerProcess("python -m sglang.launch_server")
    assert ServerProcess(["true"]).stop() is None  # never started


async def test_start_failure_carries_log_tail(tmp_path):
    srv = ServerProcess(script("""
        import sys
        print("loading weights", flush=True)
        sys.stderr.write("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\\n")
        sys.exit(3)
    """), run_dir=tmp_path).start()
    with pytest.raises(ServerStartError) as ei:
        await srv.wait_ready(f"http://127.0.0.1:{free_port()}", timeout_s=30, poll_s=0.05)
    err = ei.value
    assert err.exit_code == 3
    assert "loading weights" in err.log_tail and "Not enough memory" in err.log_tail
    assert "exit code 3" in str(err) and "Not enough memory" in str(err)
    assert srv.ring.counts[LineKind.ERROR] == 1
    srv.stop()


HEALTH_SERVER = """
import http.server, sys, threading
port = int(sys.argv[1])
state = {"n": 0}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        state["n"] += 1
        ready = state["n"] > 2
        if ready and state["n"] == 3:
            print("[2026-01-01 00:00:00] The server is fired up and ready to roll!", flush=True)
        self.send_response(200 if ready else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
print("[2026-01-01 00:00:00] Load weight begin. avail mem=1.00 GB", flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


async def test_wait_ready_polls_health(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    srv = ServerProcess([PY, "-u", "-c", HEALTH_SERVER, str(port)], url=url, run_dir=tmp_path).start()
    try:
        ready_s = await srv.wait_ready(timeout_s=30, poll_s=0.02)
        assert ready_s > 0 and srv.ready_s == ready_s
        wait_until(srv.ring.ready.is_set, what="fired-up line")
        assert srv.ring.counts[LineKind.READY] == 1
    finally:
        srv.stop()


async def test_wait_ready_times_out(tmp_path):
    srv = ServerProcess(script("import time; print('starting', flush=True); time.sleep(60)")).start()
    with pytest.raises(ServerStartError) as ei:
        await srv.wait_ready(f"http://127.0.0.1:{free_port()}", timeout_s=0.3, poll_s=0.05)
    assert ei.value.exit_code is None and srv.is_alive()
    srv.stop(timeout_s=2)


OWNER = """
import sys, time
from specdash.sglang.process import ServerProcess
srv = ServerProcess([sys.executable, "-c", "import time; time.sleep(120)"], run_dir=sys.argv[1]).start()
print(srv.pid, flush=True)
time.sleep(120)
"""


def start_owner(tmp_path: Path, code: str, *, pdeathsig: bool = False) -> tuple[subprocess.Popen, int]:
    """A specdash-like owner process running ``code``, which starts one server and prints its pid.

    Without the parent-death signal (``SPECDASH_NO_PDEATHSIG=1``) unless ``pdeathsig``: most of these tests
    are about a server that outlives its owner (non-Linux hosts, other nodes), which on Linux the signal
    would otherwise end a moment after the owner's SIGKILL — a race their checks lose on a loaded machine."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if not pdeathsig:
        env["SPECDASH_NO_PDEATHSIG"] = "1"
    owner = subprocess.Popen([PY, "-u", "-c", code, str(tmp_path / "run")], stdout=subprocess.PIPE,
                             cwd=REPO, env=env)
    server_pid = int(owner.stdout.readline())
    return owner, server_pid


def test_leftover_after_sigkill_of_specdash(tmp_path):
    owner, server_pid = start_owner(tmp_path, OWNER)
    try:
        assert find_leftovers() == []  # the owner still runs
        owner.kill()  # SIGKILL: no cleanup can run
        owner.wait()
        assert not process_gone(server_pid)  # the server outlived its owner ...
        leftovers = find_leftovers()
        assert [r["pid"] for r in leftovers] == [server_pid]  # ... and is found on the next start
        rec = leftovers[0]
        assert rec["alive_pids"] == [server_pid] and rec["run_dir"] == str(tmp_path / "run")
        assert kill_leftover(rec, timeout_s=5) is True
        assert process_gone(server_pid) and group_members(server_pid) == []
        assert find_leftovers() == [] and not Path(rec["path"]).exists()
    finally:
        owner.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server_pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_parent_death_signal_ends_the_server_when_its_owner_is_sigkilled(tmp_path):
    owner, server_pid = start_owner(tmp_path, OWNER, pdeathsig=True)
    try:
        owner.kill()  # SIGKILL: no handler of the owner runs; the kernel signals the server
        owner.wait()
        wait_until(lambda: process_gone(server_pid), timeout=15.0, what=f"server {server_pid} to end")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server_pid, signal.SIGKILL)


def test_stop_leftovers_interactively(tmp_path):
    owner, server_pid = start_owner(tmp_path, OWNER)
    try:
        said: list[str] = []
        assert stop_leftovers_interactively(said.append, ask=False) == []  # owner alive: nothing
        owner.kill()
        owner.wait()
        assert stop_leftovers_interactively(said.append, ask=True, input_fn=lambda _: "n") == []
        assert not process_gone(server_pid)
        assert said[0].startswith(f"leftover server from an earlier specdash: pid {server_pid} (")
        assert said[-1] == "leftover servers left running"
        prompts: list[str] = []
        stopped = stop_leftovers_interactively(said.append, ask=True,
                                               input_fn=lambda q: prompts.append(q) or "")
        assert [r["pid"] for r in stopped] == [server_pid] and process_gone(server_pid)
        assert prompts == ["Stop 1 leftover server(s)? [Y/n] "] and said[-1] == "stopped 1 leftover server(s)"
        assert stop_leftovers_interactively(said.append, ask=False) == []
    finally:
        owner.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server_pid, signal.SIGKILL)


def test_log_path_name_and_log_lines(tmp_path):
    log = tmp_path / "logs" / "sglang.log"
    srv = ServerProcess(script("print('a'); print('b\\rc'); print('last', flush=True)"),
                        log_path=log, run_dir=tmp_path / "run", name="kimi-eagle3").start()
    wait_until(lambda: srv.returncode is not None and srv.ring.seq == 3, what="exit")
    srv.stop()
    assert srv.log_lines() == ["a", "b\rc", "last"]
    assert log.read_bytes() == b"a\nb\rc\nlast\n"
    assert srv.ring.lines() == ["a", "c", "last"]
    assert "kimi-eagle3" in repr(srv)
    assert json.loads((tmp_path / "run" / "server_process.json").read_text())["name"] == "kimi-eagle3"
    assert ServerProcess(["true"]).log_lines() == []


def test_leftover_pid_reuse_is_not_a_leftover():
    d = state_dir()
    d.mkdir(parents=True)
    me = psutil.Process()
    # A record naming a live pid (this test process) with another create time, and a dead owner.
    stale = {"pid": me.pid, "pgid": 999_999_999, "create_time": me.create_time() - 1000.0,
             "argv": ["python"], "owner_pid": 999_999_998, "owner_create_time": 1.0}
    (d / "stale.json").write_text(json.dumps(stale))
    (d / "garbage.json").write_text("{not json")
    assert find_leftovers() == []
    assert not (d / "stale.json").exists()  # cleaned up: nothing of it runs


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_handlers_stop_servers(tmp_path, sig):
    code = OWNER.replace(
        "from specdash.sglang.process import ServerProcess",
        "from specdash.sglang.process import ServerProcess, install_signal_handlers\ninstall_signal_handlers()",
    )
    owner, server_pid = start_owner(tmp_path, code)
    try:
        owner.send_signal(sig)
        rc = owner.wait(timeout=20)
        assert rc != 0
        assert process_gone(server_pid) and group_members(server_pid) == []
        assert find_leftovers() == []  # stopped cleanly: record removed
        assert not (state_dir() / f"{server_pid}.json").exists()
    finally:
        owner.kill()


def test_free_port_is_bindable():
    port = free_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_module_does_not_install_handlers_at_import():
    out = subprocess.run(
        [PY, "-c", "import signal, specdash.sglang.process as p; "
                   "print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, p._installed)"],
        capture_output=True, text=True, cwd=REPO, check=True,
    )
    assert out.stdout.split() == ["True", "False"]
    assert proc_mod.state_dir().name == "state"


def test_api_key_never_reaches_the_log(tmp_path):
    """SGLang prints ``api_key='…'`` in its server_args line: the log file and ring get ***."""
    srv = ServerProcess([sys.executable, "-c", "import sys; print('server_args', sys.argv[1:], flush=True)",
                         "--api-key", "sk-SECRET-1", "--admin-api-key=sk-ADMIN-2"], run_dir=tmp_path)
    srv.start()
    deadline = time.monotonic() + 10
    while srv.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.stop()
    text = (tmp_path / "server.log").read_text()
    assert "server_args" in text and "***" in text
    assert "sk-SECRET-1" not in text and "sk-ADMIN-2" not in text
    assert "sk-SECRET-1" not in "\n".join(srv.ring.lines())
