"""How long the waits take that the tests bound only as hangs (speed figures, kept out of the tests: on a loaded
machine they are whatever the scheduler gives the processes; the tests allow 30-60 s, the time of a hang).

Each case is run ``--repeats`` times; prints each time, the median and the max in seconds (``--json``: one JSON
object).  The cases, as their tests run them:

- ``dead_terminal``: 200 writes to :class:`specdash.tui.terminal.SafeWriterThread` over a terminal that fails
  every write (EIO), then ``stop()`` (``tests/test_tui_terminal.py``; milliseconds: the first failure drops the
  rest);
- ``stop_escalation``: :meth:`ServerProcess.stop` with ``timeout_s=0.5`` on a child that ignores SIGTERM
  (``tests/test_process.py``; ≈ the 0.5 s, then SIGKILL);
- ``short_health_timeout``: ``health(timeout=0.3)`` on a connection a 600 s client opened, against a server that
  answers after 1.5 s (``tests/test_client.py``; ≈ the 0.3 s);
- ``attach_hang_after_headers`` / ``attach_silent_server_info`` / ``attach_warmup_without_headers``: ``--bench
  --url`` against a server that hangs after its headers (stall limit 1.5 s), never answers ``/server_info``
  (control timeout 1 s), or never sends the warm-up's headers (stall limit 1 s) (``tests/test_attach_misbehaving.py``);
- ``node0_dist_timeout``: a simulated node 0 with ``--dist-timeout 1.5`` whose node 1 never starts, start → exit
  (``tests/test_nodes.py``; the 1.5 s plus the simulator's start).

Usage: ``python benchmarks/bounded_waits.py [--repeats 3] [--only CASE[,CASE…]] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import signal
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def dead_terminal() -> float:
    from specdash.tui.terminal import SafeWriterThread
    from tests.test_tui_terminal import _DeadFile

    w = SafeWriterThread(_DeadFile())  # type: ignore[arg-type]
    w.start()
    t0 = time.perf_counter()
    for _ in range(200):
        w.write("x" * 100)
    w.stop()
    took = time.perf_counter() - t0
    assert w.lost and not w.is_alive()
    return took


def stop_escalation() -> float:
    from specdash.sglang.process import ServerProcess

    srv = ServerProcess([sys.executable, "-u", "-c", textwrap.dedent("""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ignoring SIGTERM", flush=True)
        time.sleep(60)
    """)]).start()
    deadline = time.monotonic() + 60
    while srv.ring.seq < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.perf_counter()
    code = srv.stop(timeout_s=0.5)
    took = time.perf_counter() - t0
    assert code == -signal.SIGKILL, code
    return took


def short_health_timeout() -> float:
    import uvicorn

    from specdash.sglang.client import SGLangClient
    from specdash.sglang.process import free_port
    from tests.test_client import build_app

    async def go() -> float:
        state: dict = {"ready": True}
        port = free_port()
        srv = uvicorn.Server(uvicorn.Config(build_app(state), host="127.0.0.1", port=port, log_level="warning",
                                            lifespan="off"))
        task = asyncio.create_task(srv.serve())
        while not srv.started:
            await asyncio.sleep(0.01)
        try:
            async with SGLangClient(f"http://127.0.0.1:{port}", timeout=600) as c:
                assert await c.health() is True  # opens the connection the short poll reuses
                state["health_delay"] = 1.5
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                assert await c.health(timeout=0.3) is False
                return loop.time() - t0
        finally:
            srv.should_exit = True
            await task

    return asyncio.run(go())


def _attach(mode: str, *, stall_s: float | None = None, control_s: float | None = None, warmup: int = 0) -> float:
    import specdash.commands.bench as bench_cmd
    import specdash.sglang.client as client_mod
    from specdash.cli import main
    from tests.test_attach_misbehaving import _Server, _suite

    real_options, real_control = bench_cmd._options, client_mod.CONTROL_TIMEOUT_S
    if stall_s is not None:
        bench_cmd._options = lambda args, progress: replace(real_options(args, progress), stall_s=stall_s)
    if control_s is not None:
        client_mod.CONTROL_TIMEOUT_S = control_s
    try:
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            with _Server(mode) as url, contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                rc = main(["--bench", "--url", url, "--suite", str(_suite(Path(d), warmup)), "--out",
                           str(Path(d) / "runs")])
            took = time.perf_counter() - t0
    finally:
        bench_cmd._options, client_mod.CONTROL_TIMEOUT_S = real_options, real_control
    assert rc == 1, rc
    return took


def node0_dist_timeout() -> float:
    from specdash.sim.testing import SimProcess, free_port
    from tests.test_nodes import SIM, _nodes

    t0 = time.perf_counter()
    node0 = SimProcess([*SIM, *_nodes(free_port(), timeout=1.5), "--node-rank", "0"], wait_ready=False).start()
    try:
        code = node0.wait(600)
    finally:
        node0.stop()
    took = time.perf_counter() - t0
    assert code == 1, code
    return took


CASES: dict[str, Callable[[], float]] = {
    "dead_terminal": dead_terminal,
    "stop_escalation": stop_escalation,
    "short_health_timeout": short_health_timeout,
    "attach_hang_after_headers": lambda: _attach("hang", stall_s=1.5),
    "attach_silent_server_info": lambda: _attach("silent-info", control_s=1.0),
    "attach_warmup_without_headers": lambda: _attach("no-headers", stall_s=1.0, warmup=1),
    "node0_dist_timeout": node0_dist_timeout,
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", help="comma-separated cases (default: all): " + ", ".join(CASES))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    names = a.only.split(",") if a.only else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    res = {}
    for name in names:
        took = [CASES[name]() for _ in range(max(1, a.repeats))]
        res[name] = {"seconds": [round(t, 3) for t in took], "median_s": round(statistics.median(took), 3),
                     "max_s": round(max(took), 3)}
        if not a.json:
            r = res[name]
            print(f"{name}: {', '.join(f'{t:.3f}' for t in took)} s (median {r['median_s']:.3f} s, "
                  f"max {r['max_s']:.3f} s)", flush=True)
    if a.json:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
