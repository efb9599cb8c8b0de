"""GPU telemetry of other nodes from existing Prometheus exporters (``specdash/collect/exporter.py``).

Real parts: the exporters are fake only in that they serve recorded text —
``tests/data/exporters/dcgm-node-{a,b}.txt`` (dcgm-exporter's format, two nodes of two H100s; the
files' header says where the format and the first device's labels come from) and
``nvitop-node-c.txt`` (written by prometheus_client from nvitop-exporter's gauge declarations) —
from a real HTTP server on 127.0.0.1 (``http.server`` in a thread), read by the real httpx client,
parsed by prometheus_client's parser, collected by the real :class:`LiveCollector` and drawn by
the real dashboard on the simulator.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specdash.collect.exporter import (
    ExporterFormatError,
    ExporterTarget,
    merge_targets,
    normalise_url,
    parse_exporter_text,
    parse_target,
    profile_targets,
    read_exporter,
    read_exporters,
)
from specdash.collect.gpu import GpuSample
from tests.procs import process_gone

DATA = Path(__file__).parent / "data" / "exporters"
DCGM_A = (DATA / "dcgm-node-a.txt").read_text()
DCGM_B = (DATA / "dcgm-node-b.txt").read_text()
NVITOP_C = (DATA / "nvitop-node-c.txt").read_text()


class FakeExporter:
    """A real HTTP server on 127.0.0.1 serving ``body`` at ``/metrics`` (``status`` settable)."""

    def __init__(self, body: str, status: int = 200, content_type: str = "text/plain; version=0.0.4") -> None:
        self.body, self.status, self.content_type = body, status, content_type
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # http.server's name
                data = outer.body.encode()
                code = outer.status if self.path == "/metrics" else 404
                self.send_response(code)
                self.send_header("Content-Type", outer.content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def __enter__(self) -> FakeExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the exporter is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


def fields(d: GpuSample) -> tuple:
    return (d.node, d.index, d.name, d.uuid, d.memory_used_mib, d.memory_total_mib, d.utilization_pct,
            d.temperature_c, d.power_w)


# -- parsing ------------------------------------------------------------------------------------


def test_dcgm_text_of_two_nodes_parses_exactly() -> None:
    """MiB, %, °C, W, names and UUIDs as the text says; total = FB_USED + FB_FREE + FB_RESERVED;
    the host from ``Hostname`` (node a, dcgm-exporter ≤ 4.x) and ``hostname`` (node b, since d5e5f51)."""
    kind, a = parse_exporter_text(DCGM_A, node="configured-a")
    assert kind == "dcgm"
    assert [fields(d) for d in a] == [
        ("gpu-node-a", 0, "NVIDIA H100 80GB HBM3", "GPU-927d7444-b45a-7c49-8402-5e686e46a026",
         71627.0, 71627.0 + 9413.0 + 519.0, 97.0, 41.0, 412.687),
        ("gpu-node-a", 1, "NVIDIA H100 80GB HBM3", "GPU-3b0e5a2c-7f41-4d1e-9c55-08a1f2d6e4b7",
         519.0, 519.0 + 80521.0 + 519.0, 0.0, 29.0, 68.924),
    ]
    assert a[0].memory_total_mib == 81559.0  # nvidia-smi's total of an H100 80GB HBM3
    assert round(a[0].memory_pct, 3) == round(100 * 71627 / 81559, 3)
    kind, b = parse_exporter_text(DCGM_B)
    assert kind == "dcgm"
    assert [fields(d) for d in b] == [
        ("gpu-node-b", 0, "NVIDIA H100 80GB HBM3", "GPU-c4d1e2f3-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
         71637.0, 81559.0, 100.0, 44.0, 455.12),
        ("gpu-node-b", 1, "NVIDIA H100 80GB HBM3", "GPU-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9",
         71637.0, 81559.0, 99.0, 43.0, 449.006),
    ]
    assert all(not d.simulated and d.processes == [] for d in a + b)


def test_nvitop_text_parses_exactly() -> None:
    """nvitop-exporter's unit-suffixed names (``gpu_memory_used_MiB``, …) and labels; its own total."""
    kind, c = parse_exporter_text(NVITOP_C, node="node-c")
    assert kind == "nvitop"
    assert [fields(d) for d in c] == [
        ("10.0.0.12", 0, "NVIDIA H200", "GPU-1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a10",
         121034.5625, 143771.0, 62.0, 48.0, 512.338),
        ("10.0.0.12", 1, "NVIDIA H200", "GPU-8a9b0c1d-2e3f-4a5b-9c6d-7e8f9a0b1c2d",
         0.5625, 143771.0, 0.0, 30.0, 75.012),
    ]


def _without(text: str, metric: str) -> str:
    return "\n".join(line for line in text.splitlines() if metric not in line) + "\n"


def test_a_missing_metric_reads_not_available() -> None:
    """FB_FREE missing: no total (None, shown as a dash), used still read; GPU_UTIL missing: None."""
    _, a = parse_exporter_text(_without(DCGM_A, "DCGM_FI_DEV_FB_FREE"))
    assert [(d.memory_used_mib, d.memory_total_mib, d.memory_pct) for d in a] == [(71627.0, None, 0.0),
                                                                                  (519.0, None, 0.0)]
    _, a = parse_exporter_text(_without(DCGM_A, "DCGM_FI_DEV_GPU_UTIL"))
    assert [d.utilization_pct for d in a] == [None, None] and a[0].memory_total_mib == 81559.0
    _, a = parse_exporter_text(_without(DCGM_A, "DCGM_FI_DEV_FB_RESERVED"))  # older default counters
    assert [d.memory_total_mib for d in a] == [71627.0 + 9413.0, 519.0 + 80521.0]
    _, a = parse_exporter_text(_without(_without(DCGM_A, "DCGM_FI_DEV_POWER_USAGE"), "DCGM_FI_DEV_GPU_TEMP"))
    assert [(d.power_w, d.temperature_c) for d in a] == [(None, None), (None, None)]
    assert a[0].to_json()["node"] == "gpu-node-a"  # to_json still works with None readings
    json.dumps(a[0].to_json())


def test_dcgm_blank_sentinels_and_nan_read_not_available() -> None:
    labels = 'gpu="0",UUID="GPU-x",device="nvidia0",modelName="NVIDIA H100 80GB HBM3"'
    text = (f"DCGM_FI_DEV_FB_USED{{{labels}}} 1024\nDCGM_FI_DEV_FB_FREE{{{labels}}} 2048\n"
            f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 9223372036854775794\n"  # DCGM NOT_SUPPORTED (int64 blank + 2)
            f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} 140737488355328.0\n"  # DCGM_FP64_BLANK
            f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} NaN\n")
    _, (d,) = parse_exporter_text(text, node="configured")
    assert (d.node, d.memory_used_mib, d.memory_total_mib, d.utilization_pct, d.power_w, d.temperature_c) == \
        ("configured", 1024.0, 3072.0, None, None, None)  # no host label: the configured name


@pytest.mark.parametrize("text", [
    "<html><body><h1>404 Not Found</h1></body></html>",
    "this is not { prometheus text\n",
    "",
    "# HELP up whatever\n# TYPE up gauge\nup 1\nprocess_cpu_seconds_total 3.5\n",  # valid text, no GPU metric
])
def test_garbage_or_foreign_text_is_a_clear_error(text: str) -> None:
    with pytest.raises(ExporterFormatError):
        parse_exporter_text(text)


def test_targets_urls_and_merging() -> None:
    assert parse_target("node1=http://node1:9400/metrics") == ExporterTarget("node1", "http://node1:9400/metrics")
    assert parse_target(" n2 = 10.0.0.2 ").url == "http://10.0.0.2:9400/metrics"  # dcgm-exporter's default
    assert normalise_url("node3:5050") == "http://node3:5050/metrics"
    assert normalise_url("https://node4") == "https://node4/metrics"
    assert normalise_url("http://node5:8000/custom") == "http://node5:8000/custom"
    for bad in ("node1", "=http://x", "node1=", ""):
        with pytest.raises(ValueError):
            parse_target(bad)
    cli = (ExporterTarget("a", "http://cli-a/metrics"),)
    prof = (ExporterTarget("a", "http://prof-a/metrics"), ExporterTarget("b", "http://prof-b/metrics"))
    assert merge_targets(cli, prof) == (cli[0], prof[1])  # the command line wins per node


# -- fetching (real HTTP) -----------------------------------------------------------------------


async def test_two_fake_dcgm_exporters_read_over_http() -> None:
    with FakeExporter(DCGM_A) as a, FakeExporter(DCGM_B) as b:
        ra, rb = await read_exporters([ExporterTarget("node-a", a.url), ExporterTarget("node-b", b.url)])
    assert (ra.status, ra.kind, rb.status, rb.kind) == ("ok", "dcgm", "ok", "dcgm")
    assert [d.node for d in ra.devices + rb.devices] == ["gpu-node-a"] * 2 + ["gpu-node-b"] * 2
    assert [d.uuid for d in rb.devices] == ["GPU-c4d1e2f3-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
                                           "GPU-5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"]
    assert [d.memory_used_mib for d in ra.devices] == [71627.0, 519.0]
    js = ra.to_json()
    assert js["node"] == "node-a" and js["url"] == a.url and js["devices"][0]["node"] == "gpu-node-a"
    json.dumps(js)


async def test_exporter_down_garbage_and_http_errors_are_statuses() -> None:
    down = await read_exporter(ExporterTarget("gone", closed_port_url()), timeout_s=2.0)
    assert down.status.startswith("exporter down: ConnectError") and down.devices == ()
    with FakeExporter("<html>login required</html>", content_type="text/html") as html:
        bad = await read_exporter(ExporterTarget("html", html.url))
    assert bad.status.startswith("not exporter text: not Prometheus exposition text")
    with FakeExporter(DCGM_A, status=503) as busy:
        r503 = await read_exporter(ExporterTarget("busy", busy.url))
    assert r503.status == "exporter answered HTTP 503"
    with FakeExporter("# HELP up x\n# TYPE up gauge\nup 1\n") as other:
        foreign = await read_exporter(ExporterTarget("other", other.url))
    assert foreign.status.startswith("not exporter text: no GPU metric")


async def test_an_exporter_that_hangs_times_out() -> None:
    """A server that accepts and never answers: the timeout's status, not a hang."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        r = await read_exporter(ExporterTarget("slow", f"http://127.0.0.1:{srv.getsockname()[1]}/metrics"),
                                timeout_s=0.3)
    finally:
        srv.close()
    assert r.status == "exporter timed out: no complete answer within 0.3 s"


# -- profile, CLI, collector --------------------------------------------------------------------


def test_profile_gpu_exporters_are_validated(tmp_path: Path) -> None:
    from specdash.profile import ProfileError, load_profile

    base = '[server]\nlauncher = "sim"\nmodel_path = "sim:llama-3.1-8b"\n'
    good = tmp_path / "good.toml"
    good.write_text('name = "good"\n' + base + '[[gpu_exporters]]\nnode = "node1"\nurl = "http://node1:9400/metrics"\n'
                    '[[gpu_exporters]]\nnode = "node2"\nurl = "node2"\n')
    prof = load_profile(str(good))
    assert profile_targets(prof) == (ExporterTarget("node1", "http://node1:9400/metrics"),
                                     ExporterTarget("node2", "http://node2:9400/metrics"))
    for n, entry in enumerate(['node = "n"\nurl = "ftp://n/metrics"\n', 'node = ""\nurl = "http://n"\n',
                               'node = "n"\nurl = "http://n"\nport = 9400\n', 'url = "http://n"\n']):
        bad = tmp_path / f"bad{n}.toml"
        bad.write_text(f'name = "bad{n}"\n' + base + "[[gpu_exporters]]\n" + entry)
        with pytest.raises(ProfileError) as exc:
            load_profile(str(bad))
        assert "gpu_exporters" in str(exc.value)
    assert profile_targets(load_profile("demo-eagle3")) == ()


def test_profile_with_exporters_round_trips_through_toml(tmp_path: Path) -> None:
    from specdash.profile import load_profile
    from specdash.profile.files import profile_to_toml

    p = tmp_path / "p.toml"
    p.write_text('name = "p"\n[server]\nlauncher = "sim"\nmodel_path = "sim:llama-3.1-8b"\n'
                 '[[gpu_exporters]]\nnode = "node1"\nurl = "http://node1:9400/metrics"\n')
    text = profile_to_toml(load_profile(str(p)))
    q = tmp_path / "q.toml"
    q.write_text(text)
    assert profile_targets(load_profile(str(q))) == (ExporterTarget("node1", "http://node1:9400/metrics"),)
    assert "gpu_exporters" not in profile_to_toml(load_profile("demo-eagle3"))  # none: no empty key written


def test_cli_flag_reaches_the_dashboard_config(capsys) -> None:
    from specdash.cli import _main_parser
    from specdash.tui.config import AppConfig

    args = _main_parser().parse_args(["--gpu-exporter", "node1=http://node1:9400/metrics",
                                      "--gpu-exporter", "node2=node2:9400"])
    assert AppConfig.from_args(args).gpu_exporters == (ExporterTarget("node1", "http://node1:9400/metrics"),
                                                      ExporterTarget("node2", "http://node2:9400/metrics"))
    with pytest.raises(SystemExit) as exc:
        _main_parser().parse_args(["--gpu-exporter", "node1"])
    assert exc.value.code == 2 and "want NODE=URL" in capsys.readouterr().err
    assert AppConfig.from_args(_main_parser().parse_args([])).gpu_exporters == ()


async def test_collector_keeps_local_and_remote_apart() -> None:
    """The local GpuView is untouched; each exporter's reading rides in ``gpu.exporters``."""
    from specdash.collect.live import LiveCollector

    with FakeExporter(DCGM_A) as a:
        col = LiveCollector(object(), gpu_source="off",
                            gpu_exporters=(ExporterTarget("node-a", a.url),
                                           ExporterTarget("node-gone", closed_port_url())))
        assert [r.status for r in col.snapshot().gpu.exporters] == ["waiting for the first reading"] * 2
        await col.poll_gpu()
        await col.poll_gpu_exporters()
    g = col.snapshot().gpu
    assert g.status == "GPU readings off" and g.devices == ()
    assert g.exporters[0].status == "ok" and g.exporters[1].status.startswith("exporter down")
    assert [d.node for d in g.exporters[0].devices] == ["gpu-node-a", "gpu-node-a"]
    assert LiveCollector(object(), gpu_source="off").snapshot().gpu.exporters == ()


def test_bench_manifest_records_the_exporters(tmp_path: Path, capsys) -> None:
    """``--bench --gpu-exporter``: the manifest's ``gpu_exporters`` holds each node's reading."""
    from specdash.cli import main

    prof = tmp_path / "fast.toml"
    prof.write_text('name = "fast"\n[server]\nlauncher = "sim"\nmodel_path = "sim:llama-3.1-8b"\nport = 0\n'
                    '[speculative]\nalgorithm = "EAGLE3"\ndraft_model_path = "sim:llama-3.1-8b-eagle3"\n'
                    'num_steps = 3\neagle_topk = 1\nnum_draft_tokens = 4\n'
                    '[env]\nSGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN = "1"\n[sim]\ntime_scale = 8.0\n'
                    '[[gpu_exporters]]\nnode = "node-b"\nurl = "' + closed_port_url() + '"\n')
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nmax_tokens = 32\nwarmup = 0\n[[prompts]]\ntext = "hello"\n')
    with FakeExporter(DCGM_A) as a:
        rc = main(["--bench", "--profile", str(prof), "--suite", str(suite), "--out", str(tmp_path / "runs"),
                   "--json", "--gpu-exporter", f"node-a={a.url}"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    run = json.loads(out.out)["runs"][0]
    manifest = json.loads((Path(run["run_dir"]) / "manifest.json").read_text())
    ga, gb = manifest["gpu_exporters"]
    assert (ga["node"], ga["status"], ga["kind"], len(ga["devices"])) == ("node-a", "ok", "dcgm", 2)
    assert ga["devices"][0]["memory_used_mib"] == 71627.0 and ga["devices"][0]["node"] == "gpu-node-a"
    assert gb["node"] == "node-b" and gb["status"].startswith("exporter down") and gb["devices"] == []
    assert "GPU exporter node-a: 2 device(s)" in out.err


# -- the dashboard ------------------------------------------------------------------------------


async def test_gpu_panel_shows_two_nodes_from_exporters(tmp_path: Path) -> None:
    """The dashboard on the simulator with two DCGM exporters: the GPU panel has the local
    (simulated) devices, then a header line and the devices of each node; a third, down
    exporter is named with its reason."""

    from specdash.collect.snapshot import PollIntervals
    from specdash.tui.app import create_app
    from specdash.tui.session import ServerState
    from tests.test_tui import FAST, SIZE, config, screen_text, wait_for

    iv = PollIntervals(metrics=FAST.metrics, server_info=FAST.server_info, gpu=FAST.gpu, logs=FAST.logs,
                       gpu_exporters=0.3)
    with FakeExporter(DCGM_A) as a, FakeExporter(DCGM_B) as b:
        targets = (ExporterTarget("node-a", a.url), ExporterTarget("node-b", b.url),
                   ExporterTarget("node-c", closed_port_url()))
        app_ = create_app(config(tmp_path, profile="demo-baseline", autostart=True, autoload=False, intervals=iv,
                                 gpu_exporters=targets))
        async with app_.run_test(size=SIZE) as pilot:
            await pilot.press("3")

            def shown() -> str:
                return screen_text(app_, "#gpu-body")

            await wait_for(pilot, lambda: "gpu-node-b" in shown() and "(sim)" in shown(), timeout=30,
                           what="both nodes and the simulated local devices")
            text = shown()
            assert "node gpu-node-a (node-a) · dcgm-exporter " + a.url + " · 2 device(s)" in text
            assert "node gpu-node-b (node-b) · dcgm-exporter " + b.url + " · 2 device(s)" in text
            assert "node node-c" in text and "exporter down: ConnectError" in text
            assert text.index("(sim)") < text.index("gpu-node-a") < text.index("gpu-node-b")
            assert "71,627 / 81,559 MiB" in text and "71,637 / 81,559 MiB" in text
            assert "97 %" in text and "413 W · 41 °C" in text and "449 W · 43 °C" in text
            assert text.count("NVIDIA H100 80GB HBM3 (sim)") == 1  # the simulator's device is one too
            assert text.count("NVIDIA H100 80GB HBM3") == 1 + 4
            assert text.count("power · temperature") == 2 and text.count("server processes on it") == 1
            assert not app_.query_one("#gpu-panel").has_class("-no-gpu")
            # leave only once the launch has finished (the launch worker must not outlive the screens)
            await wait_for(pilot, lambda: app_.session.state == ServerState.READY, timeout=30, what="server ready")
            pid = app_.session.server.pid
    assert process_gone(pid)  # stopped on exit
