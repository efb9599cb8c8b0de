"""The dashboard's Textual-free parts: the live collector (against the simulator and
fakes), the process-tree helpers and the session's preset saving."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdash.collect.live import LiveCollector
from specdash.collect.proc import ProcTreeSampler, alive_descendants, tree_pids, wait_gone
from specdash.collect.snapshot import PollIntervals, request_sample, slim_record

FAST = PollIntervals(metrics=0.2, server_info=0.4, gpu=0.3, logs=0.05)
SIM_ARGS = ["--model-path", "sim:llama-3.1-8b", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "sim:llama-3.1-8b-eagle3", "--speculative-num-steps", "3",
            "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--enable-metrics",
            "--time-scale", "10", "--decode-log-interval", "10"]


async def until(cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_collector_against_simulator_without_ui() -> None:
    """Collection works with no UI: metrics rates, simulated GPUs, server info and
    run-scoped acceptance from the load driver's records (the runner's send_suite)."""
    from specdash.bench.runner import send_suite, work_items
    from specdash.profile import load_suite
    from specdash.sglang.client import SGLangClient
    from specdash.sim.testing import SimProcess

    with SimProcess(SIM_ARGS) as sim:
        async with SGLangClient(sim.url) as client:
            col = LiveCollector(client, intervals=FAST)
            await col.start()
            col.new_run("test")
            suite = load_suite("seeds-five")
            await send_suite(client, suite, work_items(suite, 2), concurrency=2, max_tokens=64,
                             on_record=col.add_record)
            await until(lambda: any((m.tok_s or 0) > 0 for m in col.snapshot().metrics))
            await until(lambda: col.snapshot().gpu.devices and col.snapshot().server_info)
            await until(lambda: col.snapshot().run_server_accept_length is not None)
            snap = col.snapshot()
            await col.stop()
        assert not col.running
        assert snap.gpu.status == "simulated" and snap.gpu.devices[0].simulated
        assert snap.simulated and snap.server_info["speculative_algorithm"] == "EAGLE3"
        assert snap.run["requests"] == 10
        assert 1.5 < snap.run["accept_length"] <= 4.0
        assert 0 < snap.run["accept_rate"] <= 1.0
        assert sum(snap.run["accept_histogram"]) > 0
        assert snap.run["ttft_ms"]["p50"] > 0 and snap.run["tpot_ms"]["p50"] > 0
        assert snap.run_server_accept_length == pytest.approx(snap.run["accept_length"], rel=0.15)
        assert len(snap.requests) == 10 and all(r.accept_length for r in snap.requests)
        assert snap.metrics_enabled is True


class SlowClient:
    """A fake client whose calls take longer than the poll interval and count overlaps."""

    base_url = "http://fake"

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.active: dict[str, int] = {}
        self.max_active: dict[str, int] = {}
        self.fail_metrics = False
        #: time.monotonic() when the last /metrics answer was made: the collector's clock in the test below,
        #: so its rate is the fake's 100 tokens/s exactly, however late the event loop runs
        self.t_metrics = time.monotonic()

    async def _call(self, name: str):
        self.active[name] = self.active.get(name, 0) + 1
        self.max_active[name] = max(self.max_active.get(name, 0), self.active[name])
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.active[name] -= 1

    async def metrics_text(self):
        await self._call("metrics")
        if self.fail_metrics:
            raise ConnectionError("refused")
        self.t_metrics = time.monotonic()
        tokens = self.t_metrics * 100
        return (f'sglang:realtime_tokens_total{{mode="decode"}} {tokens!r}\nsglang:num_running_reqs 2\n'
                "sglang:num_queue_reqs 0\n")

    async def server_info(self):
        await self._call("server_info")
        return {"version": "0.5.23", "simulated": False}


async def test_polls_never_overlap_and_failures_stay_local() -> None:
    client = SlowClient(delay=0.05)
    col = LiveCollector(client, intervals=PollIntervals(metrics=0.01, server_info=0.01, gpu=0.01), gpu_source="off",
                        clock=lambda: client.t_metrics)
    await col.start()
    await until(lambda: col.polls.get("metrics", 0) >= 4 and col.polls.get("server_info", 0) >= 4)
    assert client.max_active == {"metrics": 1, "server_info": 1}
    snap = col.snapshot()
    assert snap.latest_metrics.running == 2.0
    assert snap.latest_metrics.tok_s == pytest.approx(100.0, rel=1e-6)  # 100 tokens per second of the fake
    client.fail_metrics = True
    await until(lambda: "metrics" in col.snapshot().errors)
    n_info = col.polls["server_info"]
    await until(lambda: col.polls["server_info"] > n_info)  # the other loops go on
    assert "refused" in col.snapshot().errors["metrics"]
    await col.stop()
    assert not col.running


async def test_log_ring_is_read_incrementally() -> None:
    from specdash.sglang.logs import LogRing

    class FakeServer:
        pid = None

        def __init__(self) -> None:
            self.ring = LogRing()

    srv = FakeServer()
    col = LiveCollector(SlowClient(), server=srv, gpu_source="off")
    srv.ring.extend([
        "[2026-05-10 12:00:00] Max running requests is reset to 48 for speculative decoding.",
        '[2026-05-10 12:00:01] INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK',
        "[2026-05-10 12:00:02] The server is fired up and ready to roll!",
        "[2026-05-10 12:00:05] Decode batch, #running-req: 8, #token: 5120, token usage: 0.03, accept len: 3.42, "
        "accept rate: 0.61, cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 1",
    ])
    col.poll_logs_sync()
    snap = col.snapshot()
    assert [e.kind for e in snap.log] == ["adjustment", "ready", "decode"]  # access lines are not shown
    d = snap.latest_decode
    assert (d.accept_length, d.accept_rate, d.gen_tok_s, d.running, d.queued) == (3.42, 0.61, 1234.56, 8, 1)
    srv.ring.append("[2026-05-10 12:00:06] WARNING: something odd")
    col.poll_logs_sync()
    snap = col.snapshot()
    assert len(snap.log) == 4 and snap.log[-1].kind == "warning"
    assert snap.log_counts == {"adjustment": 1, "ready": 1, "decode": 1, "warning": 1}


def test_client_records_feed_samples_and_run_stats() -> None:
    """The client's canonical record (GenerateResult.to_json) is what the collector reads."""
    from specdash.sglang.records import GenerateResult, SpecMeta

    res = GenerateResult(rid="r", ok=True, error=None, prompt_tokens=5, completion_tokens=100, t_sent=0.0,
                         t_first=0.1, t_done=2.0, ttft_s=0.1, e2e_s=2.0, server_e2e_s=1.99, itl_s=[0.01] * 99,
                         finish_reason="length", spec=SpecMeta(40, 60, 120, [5, 10, 25], 2.5, 0.5), events=40,
                         started_at=1000.0, text="x" * 1000)
    rec = res.to_json(include_text=True)
    assert (rec["ts_sent"], rec["ts_done"]) == (1000.0, 1002.0)
    slim = slim_record(rec)
    assert "itl_s" not in slim and "text" not in slim and slim["spec"]["verify_ct"] == 40
    r = request_sample(rec, 5.0)
    assert r.accept_length == 2.5 and r.tok_s == 50.0 and r.ttft_ms == pytest.approx(100.0)
    assert r.tpot_ms == pytest.approx(1900.0 / 99)


def test_process_tree_helpers() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in tree_pids(os.getpid())
        assert child.pid in alive_descendants(os.getpid())
        sampler = ProcTreeSampler(os.getpid())
        first = sampler.sample()
        assert first[0].pid == os.getpid() and first[0].depth == 0
        assert any(p.pid == child.pid and p.depth == 1 and p.rss_mib > 0 for p in sampler.sample())
    finally:
        child.kill()
        child.wait()
    assert wait_gone([child.pid], 2.0) == []
    assert tree_pids(None) == set()


def test_session_tweak_and_save_preset(tmp_path: Path) -> None:
    from specdash.profile import ProfileError, load_profile
    from specdash.tui.session import Session

    s = Session(load_profile("demo-eagle3"), out_dir=tmp_path / "runs")
    prof = s.tweaked({"eagle_topk": 2, "num_draft_tokens": 6, "extra_args": ""})
    assert prof.speculative.eagle_topk == 2 and prof.path == s.profile.path
    s.set_profile(prof, source_text=s.source_text)
    preview = s.preview_launch()
    assert preview.effective["speculative_eagle_topk"] == 2 and "--speculative-eagle-topk" in preview.argv
    out = s.save_preset("tree-6", directory=tmp_path)
    text = out.read_text()
    assert text.startswith("# Saved by the specdash dashboard")
    assert "# Simulator demo" in text and "eagle_topk = 2" in text and 'name = "tree-6"' in text
    assert load_profile(str(out)).speculative.num_draft_tokens == 6
    with pytest.raises(ProfileError):
        s.save_preset("tree-6", directory=tmp_path)
    assert s.save_preset("tree-6", directory=tmp_path, force=True) == out
    with pytest.raises(ProfileError):
        s.tweaked({"num_steps": -1})


class GoldenClient:
    """``/server_info`` and ``/metrics`` answers from the real 0.5.14 adaptive recordings."""

    base_url = "http://golden"

    def __init__(self, info: dict, metrics: str) -> None:
        self.info, self.metrics = info, metrics

    async def server_info(self):
        return self.info

    async def metrics_text(self):
        return self.metrics


def _adaptive_info(golden, name: str, **over) -> dict:
    import copy
    import json

    info = json.loads((golden / "runs" / "adaptive_default_c1_c16_c32" / name).read_text())
    info = copy.deepcopy(info)
    info.update(over)
    info["internal_states"][0].update(over)
    return info


async def test_collector_follows_adaptive_tiers_from_the_real_log(golden) -> None:
    """The interleave recording (steps 1 <-> 3 every 3 verify batches, --decode-log-interval 1): the
    current tier follows the switch lines, each decode line is attributed to its tier (accept rate 1.00
    at steps 1, 0.33 at steps 3 once the two lines after a switch are left out), and the run's
    per-tier figures are the tracker's."""
    from specdash.collect.tiers import TierTracker
    from specdash.sglang.logs import LogRing

    run = golden / "runs" / "adaptive_interleave_1_3"
    lines = (run / "server_log_excerpt.txt").read_text().splitlines()

    class FakeServer:
        pid = None

        def __init__(self) -> None:
            self.ring = LogRing()

    srv = FakeServer()
    info = _adaptive_info(golden, "server_info_a0.json", decode_log_interval=1)
    metrics = (golden / "runs" / "adaptive_default_c1_c16_c32" / "metrics_a2.prom").read_text()  # gauge: steps 3
    col = LiveCollector(GoldenClient(info, metrics), server=srv, gpu_source="off")
    await col.poll_server_info()
    snap = col.snapshot()
    assert snap.tier.adaptive and snap.tier.steps == 3 and snap.tier.draft_tokens == 4
    assert snap.tier.launch_steps == 3 and snap.tier.switches == 0 and snap.tier.since is None
    col.new_run("interleave")
    srv.ring.extend(lines)
    col.poll_logs_sync()
    switches = [ln for ln in lines if "Switch adaptive runtime state" in ln]
    last = switches[-1].rsplit("steps ", 1)[1]  # "a -> b, draft_tokens c -> d"
    snap = col.snapshot()
    tier = snap.tier
    assert tier.source == "switch line" and tier.switches == len(switches) > 10
    assert (tier.steps, tier.draft_tokens) == (int(last.split("-> ")[1].split(",")[0]), int(last.rsplit("-> ", 1)[1]))
    assert len(tier.history) == len(switches) + 1 and tier.history[0].source == "server_info"
    assert [h.steps for h in tier.history[1:3]] in ([1, 3], [3, 1])
    kept = [d for d in snap.decode if d.steps is not None and not d.after_switch]
    assert len(kept) > 100
    assert all(d.accept_rate == (1.0 if d.steps == 1 else 0.33) for d in kept)
    # the two lines after each switch (the last switch of the excerpt has only one line after it)
    assert 2 * len(switches) - 1 <= sum(d.after_switch for d in snap.decode) <= 2 * len(switches)
    want = TierTracker(3, 4, decode_log_interval=1).feed_lines(lines).per_tier()
    assert [t.to_json() for t in tier.per_tier] == [t.to_json() for t in want]
    by = {t.speculative_num_steps: t for t in tier.per_tier}
    assert by[1].accept_rate == pytest.approx(1.0) and by[3].accept_rate == pytest.approx(1 / 3, abs=0.01)
    assert by[1].accept_length == pytest.approx(2.0) and by[3].accept_length == pytest.approx(2.0)
    assert by[1].output_tok_s == pytest.approx(543.9, abs=0.1) and by[3].output_tok_s == pytest.approx(546.0, abs=0.1)
    # once the log has spoken, the gauge (sampled at decode-log ticks) does not override it
    await col.poll_metrics()
    assert col.snapshot().tier.source == "switch line"


async def test_collector_reads_the_tier_of_an_attached_server(golden) -> None:
    """Attached (no log): the gauges and internal_states give the tier; the top-level launch value
    (steps 3) is not mistaken for the running one (steps 1 at c32)."""
    info = _adaptive_info(golden, "server_info_a3.json")
    assert info["speculative_num_steps"] == 3  # the launch value, as recorded
    prom = golden / "runs" / "adaptive_default_c1_c16_c32"
    client = GoldenClient(info, (prom / "metrics_a0.prom").read_text())  # before any load: every gauge 0
    col = LiveCollector(client, gpu_source="off")
    await col.poll_metrics()
    assert col.snapshot().tier is None  # steps 0 / draft tokens 0 is "not set yet", not a steps-0 tier
    client.metrics = (prom / "metrics_a1.prom").read_text()  # after c1: steps 3 / draft tokens 4
    await col.poll_metrics()
    snap = col.snapshot()
    assert (snap.tier.steps, snap.tier.draft_tokens, snap.tier.source) == (3, 4, "gauge")
    await col.poll_server_info()
    tier = col.snapshot().tier
    assert (tier.steps, tier.draft_tokens, tier.source) == (1, 2, "server_info")
    assert tier.adaptive and tier.launch_steps == 3 and not tier.log and tier.per_tier == ()
    assert [h.steps for h in tier.history] == [3, 1] and tier.since is not None


async def test_tier_tracker_rolls_over_without_losing_the_runs_figures(golden, monkeypatch) -> None:
    """Bounded memory: with a tiny roll-over size the collector folds full trackers away, and the run's
    per-tier figures still equal one tracker fed the whole log."""
    import specdash.collect.live as live
    from specdash.collect.tiers import TierTracker
    from specdash.sglang.logs import LogRing

    lines = (golden / "runs" / "adaptive_interleave_1_3" / "server_log_excerpt.txt").read_text().splitlines()
    monkeypatch.setattr(live, "TIER_TRACKER_LINES", 25)

    class FakeServer:
        pid = None

        def __init__(self) -> None:
            self.ring = LogRing()

    srv = FakeServer()
    col = LiveCollector(GoldenClient(_adaptive_info(golden, "server_info_a0.json", decode_log_interval=1), ""),
                        server=srv, gpu_source="off")
    await col.poll_server_info()
    col.new_run("roll")
    srv.ring.extend(lines)
    col.poll_logs_sync()
    assert col._tracker.decode_lines < 25 + 3 and col._tier_folded  # rolled over, more than once
    want = {t.speculative_num_steps: t for t in TierTracker(3, 4, decode_log_interval=1).feed_lines(lines).per_tier()}
    got = {t.speculative_num_steps: t for t in col.snapshot().tier.per_tier}
    assert set(got) == set(want) == {1, 3}
    for s in (1, 3):
        assert got[s].verify_rounds == want[s].verify_rounds and got[s].output_tokens == want[s].output_tokens
        assert got[s].accept_length == pytest.approx(want[s].accept_length)
        assert got[s].accept_rate == pytest.approx(want[s].accept_rate)
        assert got[s].output_tok_s == pytest.approx(want[s].output_tok_s, rel=1e-9)
    assert col.snapshot().tier.switches == sum("Switch adaptive runtime state" in ln for ln in lines)
