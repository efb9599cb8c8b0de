"""Issue 23, items 2–8 and 11, each from its repro: slow and huge peers, the context check on a default
server, secrets, ``profile import`` of odd values, unbounded numbers, deep or odd JSON in run files,
profiles that run commands.  Every case ends in the reader's own error (exit 2, the file or flag named,
the limit said) or in a result — never a traceback, an internal error or a hang.  Nothing here asserts
on wall-clock speed: where ordering matters it is made causal (a peer that answers only after the first
request was recorded)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from specdash.cli import main
from tests.test_bench import sim_profile
from tests.test_exporter import DCGM_A, FakeExporter


def _suite(tmp_path: Path, *, max_tokens: int = 16, prompts: int = 2) -> Path:
    p = tmp_path / "hostile-suite.toml"
    body = "".join(f'[[prompts]]\ntext = "prompt number {i}"\n' for i in range(prompts))
    p.write_text(f'[suite]\nname = "hostile"\nmax_tokens = {max_tokens}\nwarmup = 0\n' + body)
    return p


def _no_traceback(out) -> None:
    assert "Traceback" not in out.err + out.out and "internal error" not in out.err, out.err


# -- 2. slow or huge peers ---------------------------------------------------------------------------


class DribblingExporter:
    """An exporter on 127.0.0.1 that sends its headers at once, then its body one byte every ``gap`` s —
    after ``release`` is set it sends the rest at once (``release=None``: never)."""

    def __init__(self, body: bytes, gap: float = 0.5, release: threading.Event | None = None) -> None:
        self.body, self.gap, self.release = body, gap, release
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/metrics"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                         + str(len(self.body)).encode() + b"\r\n\r\n")
            for i in range(len(self.body)):
                if self.stop.is_set():
                    return
                if self.release is not None and self.release.is_set():
                    conn.sendall(self.body[i:])
                    return
                conn.sendall(self.body[i:i + 1])
                time.sleep(self.gap)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


async def test_a_byte_a_second_exporter_has_a_total_deadline() -> None:
    """httpx's read timeout restarts with every byte: a total deadline does not (the status says so)."""
    from specdash.collect.exporter import ExporterTarget, read_exporter

    slow = DribblingExporter(DCGM_A.encode(), gap=0.05)
    try:
        r = await read_exporter(ExporterTarget("slow", slow.url), timeout_s=0.5)
    finally:
        slow.close()
    assert r.status == "exporter timed out: no complete answer within 0.5 s" and r.devices == ()


def _endless_server(total: int) -> tuple[socket.socket, str]:
    """A peer that answers any request with ``total`` bytes of text, made 64 KiB at a time (it never holds
    the body), no Content-Length, then closes."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
                chunk, sent = b"# junk line\n" * 5461, 0
                while sent < total:
                    conn.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                pass
            finally:
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.getsockname()[1]}/metrics"


async def test_a_huge_exporter_body_is_cut_at_the_cap(monkeypatch) -> None:
    """A 1.5 GB body against a 1 MiB cap: the reading says so, and the memory the read allocated stays near
    the cap (tracemalloc's peak), not the body's size."""
    import specdash.bounded as bounded
    from specdash.collect.exporter import ExporterTarget, read_exporter

    monkeypatch.setattr(bounded, "EXPORTER_BYTES", 1 << 20)
    srv, url = _endless_server(1536 << 20)
    tracemalloc.start()
    try:
        r = await read_exporter(ExporterTarget("huge", url), timeout_s=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        srv.close()
    assert r.status.startswith("exporter answer too large") and "1 MiB" in r.status
    assert peak < 8 << 20, peak  # a few chunks beyond the 1 MiB cap, never the 1.5 GB body


async def test_a_huge_metrics_body_is_an_sglang_error_not_a_balloon(monkeypatch) -> None:
    """``/metrics`` of an attached server past the cap: SGLangError naming the endpoint and the limit."""
    import specdash.bounded as bounded
    from specdash.sglang.client import SGLangClient, SGLangError

    monkeypatch.setattr(bounded, "METRICS_BYTES", 1 << 20)
    srv, url = _endless_server(512 << 20)
    try:
        async with SGLangClient(url.removesuffix("/metrics")) as c:
            with pytest.raises(SGLangError, match=r"GET /metrics .*exceeded the 1 MiB"):
                await c.metrics_text()
    finally:
        srv.close()


async def test_the_dashboard_reads_each_exporter_on_its_own() -> None:
    """One exporter that dribbles does not hold the other's slot: the good one's reading arrives while the
    slow one is still being read (its poll loop is its own)."""
    from specdash.collect.exporter import ExporterTarget
    from specdash.collect.live import LiveCollector

    slow = DribblingExporter(DCGM_A.encode(), gap=0.2)
    try:
        with FakeExporter(DCGM_A) as good:
            col = LiveCollector(object(), gpu_source="off",
                                gpu_exporters=(ExporterTarget("slow", slow.url), ExporterTarget("good", good.url)))
            slow_task = asyncio.create_task(col.poll_gpu_exporter(0))
            await col.poll_gpu_exporter(1)
            slow_pending = not slow_task.done()
            snap = col.snapshot().gpu.exporters
            slow_task.cancel()
    finally:
        slow.close()
    assert slow_pending
    assert snap[1].status == "ok" and len(snap[1].devices) == 2
    assert snap[0].status == "waiting for the first reading"


def test_bench_sends_before_a_slow_exporter_answers(tmp_path, monkeypatch, capsys) -> None:
    """``--bench`` with an exporter that answers only once the first request has been recorded: with the
    exporters on the path before the load this would deadlock until the exporter's deadline; beside the
    load the run completes and the manifest holds the exporter's full reading."""
    from specdash.bench.runner import RunOptions, run_one
    from specdash.collect import exporter
    from specdash.collect.exporter import ExporterTarget
    from specdash.profile import load_profile, load_suite

    monkeypatch.setattr(exporter.read_exporters, "__kwdefaults__", {"timeout_s": 120.0})
    release = threading.Event()
    first_record: list[float] = []

    def on_record(rec):
        if not first_record:
            first_record.append(time.monotonic())
            release.set()

    slow = DribblingExporter(DCGM_A.encode(), gap=0.2, release=release)
    try:
        prof = load_profile(str(sim_profile(tmp_path, "exp-slow")))
        opts = RunOptions(out_dir=tmp_path / "runs", on_record=on_record,
                          gpu_exporters=(ExporterTarget("slow-node", slow.url),))
        run, _ = asyncio.run(run_one(prof, load_suite(str(_suite(tmp_path))), opts))
    finally:
        slow.close()
    assert first_record and run["requests"] == 2
    manifest = json.loads((Path(run["run_dir"]) / "manifest.json").read_text())
    (reading,) = manifest["gpu_exporters"]
    assert reading["status"] == "ok" and len(reading["devices"]) == 2


@pytest.mark.parametrize("flag,url,needle", [
    ("--gpu-exporter", "n=http://node1:99999/metrics", "Port out of range"),
    ("--gpu-exporter", "n=node1:0", "port 0 is not 1–65535"),
    ("--gpu-exporter", "n=ftp://node1/metrics", "http or https"),
])
def test_an_exporter_url_out_of_range_is_a_usage_error(tmp_path, capsys, flag, url, needle) -> None:
    rc = main(["--bench", "--profile", str(sim_profile(tmp_path, "p")), "--suite", str(_suite(tmp_path)),
               "--out", str(tmp_path / "runs"), flag, url])
    out = capsys.readouterr()
    assert rc == 2 and needle in out.err, out.err
    _no_traceback(out)
    assert not (tmp_path / "runs").exists()  # refused before a run directory or a launch


def test_a_device_or_fifo_as_dataset_is_refused_unread(tmp_path, capsys) -> None:
    fifo = tmp_path / "prompts.jsonl"
    os.mkfifo(fifo)
    prof = sim_profile(tmp_path, "p")
    for source, needle in (("/dev/zero", "a character device, not a regular file"),
                           (str(fifo), "a FIFO (named pipe), not a regular file")):
        rc = main(["--bench", "--profile", str(prof), "--dataset", source, "--out", str(tmp_path / "runs")])
        out = capsys.readouterr()
        assert rc == 2 and needle in out.err and source in out.err, out.err
        _no_traceback(out)


@pytest.mark.parametrize("template,needle", [
    ("{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
     "renders more than 16 MiB characters"),
    ("{{ 'x' * 10000000000 }}", "larger than a prompt can be"),
    ("{{ 7 ** 100000000 }}", "too large a number"),
])
def test_a_chat_template_that_renders_gigabytes_is_stopped(tmp_path, template, needle) -> None:
    from specdash.profile import ProfileError, parse_profile, parse_suite
    from specdash.profile.chat import apply_prompt_format

    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").write_text(template)
    prof = parse_profile({"name": "t", "server": {"model_path": str(model)}})
    suite = parse_suite({"suite": {"name": "s"}, "prompts": [{"text": "hi"}]})
    with pytest.raises(ProfileError, match=needle):
        apply_prompt_format(prof, suite, engine="jinja2")


def test_a_resumed_manifest_with_a_billion_repeats_is_refused(tmp_path, capsys) -> None:
    run_dir = tmp_path / "runs" / "x"
    run_dir.mkdir(parents=True)
    prof = sim_profile(tmp_path, "p")
    (run_dir / "manifest.json").write_text(json.dumps({"profile": "p", "profile_path": str(prof), "suite": "seeds-five",
                                                        "repeats": 10**9, "max_tokens": 16, "concurrency": 1}))
    rc = main(["--bench", "--resume", str(run_dir)])
    out = capsys.readouterr()
    assert rc == 2 and "--repeats must be at most 100,000 (got 1,000,000,000)" in out.err, out.err
    assert "manifest.json" in out.err
    _no_traceback(out)


# -- 4. secrets ------------------------------------------------------------------------------------


def test_an_exporter_password_never_reaches_the_manifest(tmp_path, capsys) -> None:
    with FakeExporter(DCGM_A) as a:
        url = a.url.replace("http://", "http://admin:s3cret-pw@")
        prof = sim_profile(tmp_path, "pw")
        prof.write_text(prof.read_text() + f'[[gpu_exporters]]\nnode = "b"\nurl = "{url}"\n')
        rc = main(["--bench", "--profile", str(prof), "--suite", str(_suite(tmp_path)), "--out", str(tmp_path / "runs"),
                   "--json", "--gpu-exporter", f"a={url}"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    run_dir = Path(json.loads(out.out)["runs"][0]["run_dir"])
    for f in run_dir.iterdir():
        assert b"s3cret-pw" not in f.read_bytes(), f
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {g["url"].split("@")[0] for g in manifest["gpu_exporters"]} == {"http://***"}
    assert manifest["gpu_exporters"][0]["status"] == "ok"  # the password was still used to read it


def test_a_crash_file_hides_an_exporter_password(capsys, monkeypatch) -> None:
    import specdash.commands.bench as bench_cmd

    def bug(args, progress):
        raise RuntimeError(f"broke reading {args.gpu_exporter[0]}")

    monkeypatch.setattr(bench_cmd, "_resume_or_bench", bug)
    assert main(["--bench", "--demo", "--gpu-exporter", "n=http://u:hunter2-pw@node1:9400/metrics"]) == 1
    out = capsys.readouterr()
    assert "hunter2-pw" not in out.err
    (crash,) = sorted((Path(os.environ["SPECDASH_STATE_DIR"]) / "crashes").glob("crash-*.txt"))
    text = crash.read_text()
    assert "hunter2-pw" not in text and "//***@node1" in text


def test_the_key_file_of_a_specdash_killed_during_start_up_is_deleted_next_time(tmp_path, monkeypatch) -> None:
    """The repro: ``specdash --bench`` of a profile with an API key, SIGKILLed while its server starts — the
    0600 ``--config`` file holding the key stays in the temp dir; the next start (find_leftovers) deletes it,
    and the leftover server too."""
    import tempfile

    from specdash.sglang.leftovers import SECRET_DIR_PREFIX, find_leftovers, kill_leftover

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    prof = sim_profile(tmp_path, "keyed")
    prof.write_text(prof.read_text().replace('port = 0', 'port = 0\napi_key = "sk-leftover-key"'))
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "specdash", "--bench", "--profile", str(prof), "--suite",
                             str(_suite(tmp_path)), "--out", str(tmp_path / "runs")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def written() -> list[Path]:
            out = []
            for f in tmp.glob(SECRET_DIR_PREFIX + "*/server-secrets.yaml"):
                try:
                    if f.read_bytes().endswith(b"\n"):
                        out.append(f.parent)
                except OSError:
                    pass
            return out

        from specdash.sglang.process import state_dir

        def started() -> bool:  # the server's leftover record: the next start can stop the server too
            return state_dir().is_dir() and any(state_dir().glob("*.json"))

        deadline = time.monotonic() + 120
        while not (written() and started()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        dirs = written()
        assert dirs, "the launch never wrote its key file"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    (key_dir,) = [d for d in dirs if d.exists()] or [None]
    if key_dir is None:
        pytest.skip("the server became ready and specdash deleted the key file before the SIGKILL")
    assert b"sk-leftover-key" in (key_dir / "server-secrets.yaml").read_bytes()
    leftovers = find_leftovers()  # the next start's check
    assert not key_dir.exists()
    for rec in leftovers:
        kill_leftover(rec, timeout_s=10)


def test_a_live_owners_key_dir_is_kept(tmp_path) -> None:
    import psutil

    from specdash.sglang.leftovers import SECRET_DIR_PREFIX, remove_stale_secret_dirs

    me = psutil.Process()
    mine = tmp_path / f"{SECRET_DIR_PREFIX}{os.getpid()}-{int(me.create_time() * 1000)}-abc"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_ct = psutil.Process(dead.pid).create_time() if psutil.pid_exists(dead.pid) else time.time()
    dead.wait()
    gone = tmp_path / f"{SECRET_DIR_PREFIX}{dead.pid}-{int(dead_ct * 1000)}-def"
    for d in (mine, gone):
        d.mkdir()
        (d / "server-secrets.yaml").write_text('{"api-key": "x"}\n')
    assert remove_stale_secret_dirs(tmp_path) == [str(gone)]
    assert mine.exists() and not gone.exists()


def test_api_key_on_the_command_line_warns_and_a_key_file_is_read(tmp_path, capsys, monkeypatch) -> None:
    import specdash.commands.bench as bench_cmd

    seen = {}

    def capture(args, progress):
        seen["key"] = bench_cmd._options(args, progress).api_key
        return 0

    monkeypatch.setattr(bench_cmd, "_resume_or_bench", capture)
    assert main(["--bench", "--url", "http://127.0.0.1:1", "--api-key", "sk-visible"]) == 0
    assert "every user of this machine can read" in capsys.readouterr().err and seen["key"] == "sk-visible"
    kf = tmp_path / "key"
    kf.write_text("sk-from-file\n")
    kf.chmod(0o600)
    assert main(["--bench", "--url", "http://127.0.0.1:1", "--api-key-file", str(kf)]) == 0
    assert "warning" not in capsys.readouterr().err and seen["key"] == "sk-from-file"
    assert main(["--bench", "--url", "http://127.0.0.1:1", "--api-key-file", "/dev/zero"]) == 2
    assert "not a regular file" in capsys.readouterr().err


# -- 5. profile import of odd values ----------------------------------------------------------------


@pytest.mark.parametrize("line,needle", [
    ("python -m sglang.launch_server --model-path /models/My Model --tp-size 1",
     "--model-path takes one value, but the line gives 2 words ('/models/My', 'Model'): a value with spaces must "
     "be quoted, e.g. --model-path \"/models/My Model\""),
    ("python -m sglang.launch_server --model-path $(ls -d /models/*)", "shell command substitution"),
    ("python -m sglang.launch_server --model-path `cat /tmp/which`", "shell command substitution"),
    ("HF_HOME=$(pwd)/hf python -m sglang.launch_server --model-path /m", "HF_HOME '$(pwd)/hf' holds a shell"),
    ("python -m sglang.launch_server --model-path /m --tp-size 2 4", "--tp-size takes one number"),
])
def test_profile_import_refuses_rather_than_writing_a_repr(tmp_path, capsys, line, needle) -> None:
    out_file = tmp_path / "p.toml"
    rc = main(["profile", "import", line, "--out", str(out_file)])
    out = capsys.readouterr()
    assert rc == 2 and needle in out.err, out.err
    assert not out_file.exists()
    _no_traceback(out)


def test_profile_import_keeps_a_quoted_path_with_spaces(tmp_path, capsys) -> None:
    import tomllib

    out_file = tmp_path / "p.toml"
    rc = main(["profile", "import", 'python -m sglang.launch_server --model-path "/models/My Model" '
               "--cuda-graph-bs-decode 1 2 4 --served-model-name My Model", "--out", str(out_file)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    doc = tomllib.loads(out_file.read_text())
    assert doc["server"]["model_path"] == "/models/My Model"
    args = doc["server"]["extra_args"]
    assert args[args.index("--cuda-graph-bs-decode"):][:4] == ["--cuda-graph-bs-decode", "1", "2", "4"]
    assert "['" not in out_file.read_text()  # never a Python list literal
    assert "--served-model-name is followed by 2 words" in out.out + out.err


# -- 6. unbounded numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize("flags,needle", [
    (["--sweep", "request_rate=1,1e9"], "above 1000/s"),
    (["--sweep", "request_rate=1,1e300"], "above 1000/s"),
    (["--sweep", "concurrency=1,10**23"], "must be integers"),
    (["--sweep", "concurrency=1,100000"], "above 4,096"),
    (["--sweep", "concurrency=" + ",".join(map(str, range(1, 80)))], "at most 64 points"),
    (["--concurrency", "100000"], "--concurrency must be at most 4,096 (got 100,000)"),
    (["--concurrency", "100000000000000000000000"], "--concurrency must be at most 4,096 (got 100,000,000"),
    (["--request-rate", "1e-300"], "--request-rate must be at least 0.01 requests/s"),
    (["--request-rate", "1e9"], "--request-rate must be at most 1,000 requests/s"),
    (["--request-rate", "nan"], "--request-rate must be a number"),
    (["--request-rate", "4", "--burstiness", "1e-300"], "--burstiness must be a finite number from 0.01"),
    (["--repeats", "1000000000"], "--repeats must be at most 100,000"),
    (["--max-tokens", "1000000000000"], "--max-tokens must be at most 16,777,216"),
    (["--rounds", "1000000"], "--rounds must be at most 100"),
    (["--seed", "-1"], "--seed must be a whole number from 0"),
    (["--dataset", "random:in=100000000,out=5"], "in=100,000,000 is above 1,048,576 tokens"),
    (["--dataset", "random:in=1000000,out=5", "--num-prompts", "1000"], "above the 67,108,864"),
    (["--dataset", "mixed-50", "--num-prompts", "1000000000000"], "--num-prompts must be at most 1,000,000"),
    (["--repeats", "100000", "--dataset", "mixed-50"], "requests, more than the 1,000,000 one run sends"),
    (["--goodput", "ttft:1e300"], "at most 1e9 ms"),
])
def test_every_number_is_bounded_where_it_is_parsed(tmp_path, capsys, flags, needle) -> None:
    rc = main(["--bench", "--profile", str(sim_profile(tmp_path, "n")), "--out", str(tmp_path / "runs"), *flags])
    out = capsys.readouterr()
    assert rc == 2 and needle in out.err, out.err
    _no_traceback(out)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("argv,needle", [
    (["tune", "--budget", "1000000"], "--budget must be at most 1,000"),
    (["tune", "--max-time", "1e300"], "--max-time must be a positive number of seconds, at most"),
    (["doctor", "--concurrency", "100000"], "--concurrency must be at most 4,096"),
    (["doctor", "--gpu-memory-mib", "inf"], "--gpu-memory-mib must be a positive number"),
])
def test_sub_command_numbers_are_bounded(tmp_path, capsys, argv, needle) -> None:
    prof = str(sim_profile(tmp_path, "n"))
    rc = main([*argv, "--profile", prof])
    out = capsys.readouterr()
    assert rc == 2 and needle in out.err, out.err
    _no_traceback(out)


def test_a_suite_file_with_huge_numbers_names_the_limit(tmp_path) -> None:
    from specdash.profile import ProfileError, load_suite

    for key, value in (("concurrency", 100000), ("repeats", 10**9), ("max_tokens", 10**23), ("temperature", "inf")):
        p = tmp_path / f"{key}.toml"
        p.write_text(f'[suite]\nname = "s"\n{key} = {value}\n[[prompts]]\ntext = "x"\n')
        with pytest.raises(ProfileError) as exc:
            load_suite(str(p))
        assert str(p) in str(exc.value) and key in str(exc.value)


# -- 8. deep or odd JSON in run files -----------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One real, finished simulator run directory (copied by each test that spoils it)."""
    base = tmp_path_factory.mktemp("finished")
    prof = sim_profile(base, "fin")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECDASH_STATE_DIR", str(base / "state"))
        mp.setenv("XDG_CONFIG_HOME", str(base / "config"))
        rc = main(["--bench", "--profile", str(prof), "--suite", str(_suite(base, prompts=3)), "--out",
                   str(base / "runs")])
    assert rc == 0
    (d,) = list((base / "runs").iterdir())
    return d


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("spoil", ["deep-line", "odd-lines", "typed-fields", "deep-summary", "runs-not-objects",
                                   "summary-a-list", "deep-manifest", "run-field-types"])
def test_report_compare_and_resume_read_odd_run_files(tmp_path, capsys, finished_run, spoil) -> None:
    d = _copy(finished_run, tmp_path / "spoilt")
    good = _copy(finished_run, tmp_path / "good")
    recs = d / "requests.jsonl"
    if spoil == "deep-line":
        recs.write_text(recs.read_text() + DEEP + "\n")
    elif spoil == "odd-lines":
        recs.write_text(recs.read_text() + '[1, 2]\n"a string"\n5\nnull\n{"prompt_index": [1]}\n')
    elif spoil == "typed-fields":
        recs.write_text(recs.read_text() + json.dumps({"ok": True, "completion_tokens": "many", "prompt_index": 0,
                                                        "repeat": 9}) + "\n" + json.dumps(
            {"ok": True, "completion_tokens": 10**30, "itl_s": ["x"], "prompt_index": 1, "repeat": 9}) + "\n")
    elif spoil == "deep-summary":
        (d / "summary.json").write_text('{"runs": ' + DEEP + "}")
    elif spoil == "runs-not-objects":
        (d / "summary.json").write_text('{"runs": [1, "x", null]}')
    elif spoil == "summary-a-list":
        (d / "summary.json").write_text("[]")
    elif spoil == "deep-manifest":
        (d / "manifest.json").write_text('{"profile": "fin", "x": ' + DEEP + "}")
    elif spoil == "run-field-types":
        s = json.loads((d / "summary.json").read_text())
        s["runs"][0].update(output_tok_s="fast", ttft_ms=[1, 2], requests=-3, verification="ok", tiers={"a": 1},
                            by_category=[1], effective="EAGLE3")
        (d / "summary.json").write_text(json.dumps(s))
    for argv in (["report", str(d)], ["compare", str(good), str(d)], ["compare", str(d), str(good), "--json"],
                 ["--bench", "--resume", str(d)]):
        rc = main(argv)
        out = capsys.readouterr()
        _no_traceback(out)
        assert rc in (0, 1, 2), (argv, rc, out.err)
        if rc == 2:
            assert str(d) in out.err or "spoilt" in out.err, (argv, out.err)
    if spoil in ("odd-lines", "deep-line", "typed-fields"):
        from specdash.bench.rundir import RunDir

        rd = RunDir(d)
        kept = rd.read_requests()
        assert len(kept) == len(RunDir(good).read_requests()) and rd.bad_lines >= 1
        assert all(isinstance(r, dict) for r in kept)


@pytest.mark.parametrize("text", [DEEP, '{"conversations": ' + DEEP + "}", "[" + ",".join(["1"] * 5) + "]"])
def test_a_deep_or_odd_dataset_is_the_readers_error(tmp_path, text) -> None:
    from specdash.profile import ProfileError
    from specdash.profile.datasets import load_dataset_suite

    for suffix in (".json", ".jsonl"):
        f = tmp_path / f"d{suffix}"
        f.write_text(text + "\n")
        with pytest.raises(ProfileError) as exc:
            load_dataset_suite(str(f))
        assert str(f) in str(exc.value)


def test_a_deep_tokenizer_config_is_the_readers_error(tmp_path) -> None:
    from specdash.profile import ProfileError
    from specdash.profile.chat import find_chat_template

    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": ' + DEEP + "}")
    with pytest.raises(ProfileError, match="nested deeper than 64 levels"):
        find_chat_template(tmp_path)


def test_a_deep_profile_or_suite_is_the_readers_error(tmp_path) -> None:
    from specdash.profile import ProfileError, load_profile, load_suite

    p = tmp_path / "deep.toml"
    p.write_text('name = "d"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    for loader in (load_profile, load_suite):
        with pytest.raises(ProfileError, match="nested too deeply|nested more than 64"):
            loader(str(p))


# -- 11. profiles are code ----------------------------------------------------------------------------


def _nodes_profile(tmp_path: Path, *, ssh=(), env=None, node_env=None) -> Path:
    p = tmp_path / "n2.toml"
    lines = ['name = "n2"', "[server]", 'model_path = "/m"', "nnodes = 2", 'dist_init_addr = "10.0.0.1:5000"',
             'node_launcher = "ssh"', f"ssh_options = {json.dumps(list(ssh))}"]
    if env:
        lines += ["[env]", *(f'{json.dumps(k)} = "{v}"' for k, v in env.items())]
    lines += ["[[nodes]]", 'host = "10.0.0.1"', "node_rank = 0", "[[nodes]]", 'host = "10.0.0.2"', "node_rank = 1"]
    if node_env:
        lines += ["[nodes.env]", *(f'{json.dumps(k)} = "{v}"' for k, v in node_env.items())]
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("opts", [["-oProxyCommand=touch /tmp/x"], ["-o", "ProxyCommand nc %h %p"],
                                  ["-o", "LocalCommand=id", "-o", "PermitLocalCommand=yes"], ["-F", "/tmp/cfg"],
                                  ["-oKnownHostsCommand=/bin/true"]])
def test_ssh_options_that_run_commands_are_warned_about(tmp_path, capsys, opts) -> None:
    rc = main(["profile", "show", str(_nodes_profile(tmp_path, ssh=opts))])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "warning: server.ssh_options run a command on this machine" in out.err
    assert "warning" not in out.out  # stdout stays the exact command lines


def test_plain_ssh_options_are_not_warned_about(tmp_path, capsys) -> None:
    assert main(["profile", "show", str(_nodes_profile(tmp_path, ssh=["-p", "2222", "-i", "~/.ssh/k"]))]) == 0
    assert "warning" not in capsys.readouterr().err


def test_environment_names_are_checked_and_ld_preload_warned(tmp_path, capsys) -> None:
    for bad in ("X;rm -rf ~", "A B", "1ABC", "A-B"):
        rc = main(["profile", "show", str(_nodes_profile(tmp_path, node_env={bad: "1"}))])
        out = capsys.readouterr()
        assert rc == 2 and "[nodes.env] name" in out.err and "cannot be an environment variable" in out.err, out.err
    assert main(["profile", "show", str(_nodes_profile(tmp_path, env={"LD_PRELOAD": "/x.so"}))]) == 0
    assert "[env] LD_PRELOAD make every server process load code" in capsys.readouterr().err


def test_a_template_symlinked_out_of_the_model_directory_is_refused(tmp_path) -> None:
    from specdash.profile import ProfileError, parse_profile, parse_suite
    from specdash.profile.chat import apply_prompt_format

    secret = tmp_path / "elsewhere.txt"
    secret.write_text("my private notes")
    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").symlink_to(secret)
    suite = parse_suite({"suite": {"name": "s"}, "prompts": [{"text": "hi"}]})
    prof = parse_profile({"name": "t", "server": {"model_path": str(model)}})
    with pytest.raises(ProfileError, match="outside the model directory"):
        apply_prompt_format(prof, suite, engine="jinja2")
    # named explicitly with SGLang's own flag: read, wherever it is
    tpl = tmp_path / "mine.jinja"
    tpl.write_text("<user>{{ messages[0].content }}</user>")
    asked = parse_profile({"name": "t", "server": {"model_path": str(model),
                                                   "extra_args": ["--chat-template", str(tpl)]}})
    out, rec = apply_prompt_format(asked, suite, engine="jinja2")
    assert out.prompts[0].text == "<user>hi</user>" and rec["template"]["source"] == str(tpl)


def test_a_hugging_face_snapshot_symlink_into_blobs_is_read(tmp_path) -> None:
    from specdash.profile.chat import find_chat_template

    repo = tmp_path / "hub" / "models--org--chat"
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (repo / "blobs" / "f00d").write_text("{{ messages[0].content }}!")
    (snap / "chat_template.jinja").symlink_to(Path("../../blobs/f00d"))
    ct = find_chat_template(snap)
    assert ct is not None and ct.template == "{{ messages[0].content }}!"
