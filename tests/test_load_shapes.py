"""Load shapes and the statistics users expect: open-loop ``--request-rate`` arrivals (Poisson /
gamma with ``--burstiness``, as SGLang's bench_serving.py and vLLM's bench serve), percentiles
p95 / p99.9 / max and the e2e distribution, request throughput, goodput under ``--goodput`` SLOs,
and the ``requests.csv`` export."""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from specdash.bench.arrivals import arrival_offsets, inter_arrival_gaps
from specdash.bench.rundir import CSV_COLUMNS, RunDir, csv_row
from specdash.bench.runner import RunOptions, run_one, send_suite_rate
from specdash.cli import main
from specdash.collect.columns import distribution_ms
from specdash.collect.stream import RunStats, meets_slo, parse_slo
from specdash.commands.tables import render_table
from specdash.profile import load_profile
from tests.test_bench import sim_profile, small_suite

# -- the arrival schedule ---------------------------------------------------------------------


@pytest.mark.parametrize("rate", [2.0, 50.0])
@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_b(rate, burstiness):
    gaps = inter_arrival_gaps(10_000, rate, burstiness, seed=7)
    assert gaps.mean() == pytest.approx(1.0 / rate, rel=0.04)
    cv = gaps.std() / gaps.mean()
    assert cv == pytest.approx(1.0 / math.sqrt(burstiness), rel=0.05)


def test_burstiness_orders_the_spread_and_poisson_is_exponential():
    cvs = [np.std(g) / np.mean(g) for g in (inter_arrival_gaps(10_000, 5.0, b, seed=3) for b in (0.5, 1.0, 2.0))]
    assert cvs[0] > cvs[1] > cvs[2]
    g = inter_arrival_gaps(10_000, 5.0, 1.0, seed=3)
    # exponential: P(gap > mean) = e^-1
    assert np.mean(g > 0.2) == pytest.approx(math.exp(-1), abs=0.015)


def test_schedule_is_seeded_normalized_and_handles_inf():
    a = arrival_offsets(100, 10.0, 1.0, seed=1)
    assert a == arrival_offsets(100, 10.0, 1.0, seed=1)
    assert a != arrival_offsets(100, 10.0, 1.0, seed=2)
    assert a[0] == 0.0 and all(x <= y for x, y in itertools.pairwise(a))
    assert a[-1] == pytest.approx(99 / 10.0)            # rescaled: the last send where the rate puts it
    raw = arrival_offsets(100, 10.0, 1.0, seed=1, normalize=False)
    assert raw[-1] != pytest.approx(9.9, abs=1e-6)
    assert np.diff(a) == pytest.approx(np.diff(raw) * (9.9 / raw[-1]))
    assert arrival_offsets(5, math.inf, 1.0) == [0.0] * 5
    assert arrival_offsets(4, 2.0, math.inf) == pytest.approx([0.0, 0.5, 1.0, 1.5])
    assert arrival_offsets(1, 3.0) == [0.0] and arrival_offsets(0, 3.0) == []
    with pytest.raises(ValueError):
        arrival_offsets(3, 0.0)
    with pytest.raises(ValueError):
        arrival_offsets(3, 1.0, -1.0)


# -- percentiles, goodput, rates on constructed records ---------------------------------------


def test_percentiles_on_known_data():
    d = distribution_ms([i / 1000.0 for i in range(1, 101)])   # 1 … 100 ms
    assert set(d) == {"mean", "p50", "p90", "p95", "p99", "p99.9", "max"}
    # numpy's linear interpolation: position q/100 × (n − 1)
    assert d["mean"] == pytest.approx(50.5)
    assert d["p50"] == pytest.approx(50.5)
    assert d["p90"] == pytest.approx(90.1)
    assert d["p95"] == pytest.approx(95.05)
    assert d["p99"] == pytest.approx(99.01)
    assert d["p99.9"] == pytest.approx(99.901)
    assert d["max"] == pytest.approx(100.0)
    one = distribution_ms([0.25])
    assert all(v == pytest.approx(250.0) for v in one.values())


def rec(i, *, ttft, e2e, n=11, ok=True, sent=None, segment=0):
    sent = float(i) if sent is None else sent
    return {"prompt_index": i, "repeat": 0, "ok": ok, "completion_tokens": n if ok else 0, "ttft_s": ttft,
            "e2e_s": e2e, "ts_sent": sent, "ts_done": sent + e2e, "segment": segment, "itl_s": [],
            "spec": None, "error": None if ok else "boom"}


def test_goodput_exact_values():
    # duration: first sent 0 → last done 3 + 1.0 = 4 s; TPOT = (e2e − ttft) / 10
    records = [
        rec(0, ttft=0.100, e2e=0.600),   # ttft 100, tpot 50  → meets ttft:200, misses tpot:30
        rec(1, ttft=0.150, e2e=0.400),   # ttft 150, tpot 25  → meets both
        rec(2, ttft=0.250, e2e=0.450),   # ttft 250           → misses ttft
        rec(3, ttft=0.050, e2e=1.000),   # tpot 95            → misses tpot; e2e 1000
        rec(4, ttft=None, e2e=0.0, ok=False, sent=1.5),
    ]
    s = RunStats(records)
    assert s.duration_s() == pytest.approx(4.0)
    g = s.goodput(parse_slo(["ttft:200", "tpot:30"]))
    assert g["goodput_slo"] == {"ttft_ms": 200.0, "tpot_ms": 30.0}
    assert g["goodput"] == pytest.approx(1 / 4.0)        # one request meets both, over 4 s
    assert g["goodput_fraction"] == pytest.approx(1 / 5)  # of five requests (the failure counts)
    g = s.goodput(parse_slo(["ttft:200"]))
    assert g["goodput"] == pytest.approx(3 / 4.0) and g["goodput_fraction"] == pytest.approx(3 / 5)
    g = s.goodput(parse_slo(["e2e:600"]))                  # ≤ meets: 600, 400, 450
    assert g["goodput"] == pytest.approx(3 / 4.0)
    assert s.goodput(None) == {"goodput": None, "goodput_slo": None, "goodput_fraction": None}
    # a one-token request has no TPOT and meets a TPOT SLO (vLLM's rule); a failure meets nothing
    assert meets_slo(rec(9, ttft=0.1, e2e=0.1, n=1), {"tpot_ms": 1.0})
    assert not meets_slo(rec(9, ttft=0.1, e2e=0.1, ok=False), {"e2e_ms": 1e9})
    summary = s.summary()
    assert summary["request_throughput"] == pytest.approx(4 / 4.0)
    assert summary["e2e_ms"]["max"] == pytest.approx(1000.0) and summary["e2e_ms"]["p50"] == pytest.approx(525.0)
    assert summary["achieved_request_rate"] == pytest.approx(4 / 3.0)  # 5 sends over 0 → 3 s


def test_parse_slo_spellings_and_errors():
    assert parse_slo(["TTFT:200", "e2el:5000"]) == {"ttft_ms": 200.0, "e2e_ms": 5000.0}
    for bad in (["ttft"], ["itl:3"], ["ttft:x"], ["ttft:0"], ["ttft:1", "ttft:2"], []):
        with pytest.raises(ValueError):
            parse_slo(bad)


def test_send_rate_pools_segments():
    records = [rec(0, ttft=0.1, e2e=0.2, sent=0.0), rec(1, ttft=0.1, e2e=0.2, sent=2.0),
               rec(2, ttft=0.1, e2e=0.2, sent=100.0, segment=1), rec(3, ttft=0.1, e2e=0.2, sent=101.0, segment=1),
               rec(4, ttft=0.1, e2e=0.2, sent=500.0, segment=2)]
    assert RunStats(records).send_rate() == pytest.approx(2 / 3.0)   # (1 + 1) gaps over 2 + 1 s
    assert RunStats(records[-1:]).send_rate() is None


# -- the open-loop sender against a fake client ------------------------------------------------


class _FakeResult:
    def __init__(self, sent):
        self.sent = sent

    def to_json(self):
        return {"ok": True, "completion_tokens": 4, "ts_sent": self.sent, "ts_done": self.sent + 0.2,
                "ttft_s": 0.01, "e2e_s": 0.2, "itl_s": [], "spec": None}


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on a virtual clock: with nothing ready it jumps to its next timer instead of waiting, so
    sleeps take no wall time and each send lands exactly where the schedule puts it, however loaded the
    machine (the sender's ``time.perf_counter`` is this clock too: :func:`_virtual_time`)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        select = self._selector.select

        def jump(timeout=None):
            if timeout is None:  # no timer: only I/O (the executor's shutdown) can wake the loop
                return select(None)
            events = select(0)
            if not events:
                self.now += timeout
            return events

        self._selector.select = jump

    def time(self) -> float:
        return self.now


def _virtual_time(monkeypatch, coro):
    """Run ``coro`` on a :class:`_VirtualTimeLoop`, the open-loop sender reading the loop's clock."""
    from types import SimpleNamespace

    import specdash.bench.load as load_mod

    monkeypatch.setattr(load_mod, "time", SimpleNamespace(perf_counter=lambda: asyncio.get_running_loop().time()))
    with asyncio.Runner(loop_factory=_VirtualTimeLoop) as runner:
        return runner.run(coro)


class _FakeClient:
    def __init__(self, latency, stall_first: float = 0.0):
        self.latency, self.inflight, self.peak, self.stall_first = latency, 0, 0, stall_first

    async def generate_stream(self, text, params, rid=None, extra=None):
        loop = asyncio.get_running_loop()
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        sent = loop.time()
        if self.stall_first:  # the first send holds the event loop this long: the sends due meanwhile are late
            loop.now += self.stall_first
            self.stall_first = 0.0
        await asyncio.sleep(self.latency)
        self.inflight -= 1
        return _FakeResult(sent)


def _sent(recs) -> np.ndarray:
    """Send times from the first send on."""
    ts = np.sort([r["ts_sent"] for r in recs])
    return ts - ts[0]


def test_send_suite_rate_keeps_the_schedule_and_caps_in_flight(monkeypatch):
    """On a virtual clock (:class:`_VirtualTimeLoop`): the schedule's behaviour, exactly.  How close a real run
    comes to the asked rate on the wall clock is a figure, printed by ``benchmarks/request_rate.py``
    (``--no-server``: this sender and fake client alone)."""
    suite = small_suite(n_prompts=2)
    items = [(i % 2, i // 2) for i in range(40)]
    offsets = np.asarray(arrival_offsets(40, 100.0, 1.0, seed=3))
    client = _FakeClient(latency=0.3)
    recs = _virtual_time(monkeypatch, send_suite_rate(client, suite, items, request_rate=100.0, max_tokens=8,
                                                      seed=3))
    assert len(recs) == 40
    assert _sent(recs) == pytest.approx(offsets - offsets[0], abs=1e-9)   # every send on its arrival time
    assert RunStats(recs).send_rate() == pytest.approx(100.0, rel=0.1)  # the seeded schedule's rate
    assert client.peak > 10                          # open loop: arrivals do not wait for answers
    # a late send does not delay the ones after it: those due meanwhile go at once, the rest on schedule
    late = _FakeClient(latency=0.3, stall_first=0.1)
    recs = _virtual_time(monkeypatch, send_suite_rate(late, suite, items, request_rate=100.0, max_tokens=8,
                                                      seed=3))
    due = offsets - offsets[0]
    assert _sent(recs) == pytest.approx(np.r_[0.0, np.maximum(due[1:], 0.1)], abs=1e-9)
    capped = _FakeClient(latency=0.3)
    recs = _virtual_time(monkeypatch, send_suite_rate(capped, suite, items[:12], request_rate=math.inf,
                                                      max_concurrency=4, max_tokens=8))
    assert capped.peak == 4 and len(recs) == 12
    assert _sent(recs) == pytest.approx([0.0] * 4 + [0.3] * 4 + [0.6] * 4, abs=1e-9)  # the cap binds: 4 at a time


# -- on the simulator --------------------------------------------------------------------------


def test_sim_run_at_a_request_rate(tmp_path):
    prof = load_profile(sim_profile(tmp_path, "rate", time_scale=8.0))
    suite = small_suite(n_prompts=4, max_tokens=64, repeats=8, warmup=1)   # 32 requests
    opts = RunOptions(out_dir=tmp_path / "runs", request_rate=16.0, burstiness=1.0, arrival_seed=5,
                      goodput={"ttft_ms": 10_000.0})
    run, records = asyncio.run(run_one(prof, suite, opts))
    assert run["requests"] == 32 and run["request_rate"] == 16.0 and run["burstiness"] == 1.0
    sends = sorted(r["ts_sent"] for r in records)
    assert run["achieved_request_rate"] == pytest.approx((len(sends) - 1) / (sends[-1] - sends[0]))
    # open loop at 16/s (32 sends, ≈ 2 s), not all at once (hundreds/s): a bound for a schedule ignored, not an
    # accuracy target — how close a run comes to the asked rate is benchmarks/request_rate.py's figure
    assert run["achieved_request_rate"] < 32.0
    assert run["concurrency"] is None                                      # uncapped
    assert run["request_throughput"] == pytest.approx(32 / run["duration_s"])
    assert run["goodput"] == pytest.approx(run["request_throughput"]) and run["goodput_fraction"] == 1.0
    assert {"p95", "p99.9", "max"} <= set(run["e2e_ms"]) and run["e2e_ms"]["max"] >= run["e2e_ms"]["p50"]
    d = Path(run["run_dir"])
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["request_rate"] == 16.0 and manifest["burstiness"] == 1.0 and manifest["arrival_seed"] == 5
    sends = sorted(r["ts_sent"] for r in records)
    assert len({round(b - a, 3) for a, b in itertools.pairwise(sends)}) > 5    # not evenly spaced: Poisson
    text = render_table([run])
    assert "request rate: asked 16/s" in text and "goodput" in text and "ttft ≤ 10000 ms" in text


def test_cli_flags_and_usage_errors(tmp_path, capsys):
    prof = sim_profile(tmp_path, "rate-cli", time_scale=8.0)
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nmax_tokens = 32\nrepeats = 3\nwarmup = 0\n[[prompts]]\ntext = "hello"\n'
                     '[[prompts]]\ntext = "world"\n')
    base = ["--bench", "--profile", str(prof), "--suite", str(suite), "--out", str(tmp_path / "runs"), "--json"]
    rc = main([*base, "--request-rate", "inf", "--concurrency", "2", "--goodput", "ttft:5000", "e2e:60000"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    run = json.loads(out.out)["runs"][0]
    assert run["request_rate"] == "inf" and run["concurrency"] == 2 and run["requests"] == 6
    assert run["goodput_slo"] == {"ttft_ms": 5000.0, "e2e_ms": 60000.0}
    for bad in (["--request-rate", "0"], ["--request-rate", "2", "--burstiness", "-1"], ["--burstiness", "2"],
                ["--goodput", "itl:3"], ["--request-rate", "2", "--sweep", "concurrency=1,2"]):
        assert main([*base, *bad]) == 2, bad
        capsys.readouterr()


# -- requests.csv ------------------------------------------------------------------------------


def test_requests_csv_matches_requests_jsonl(tmp_path):
    rd = RunDir.create(tmp_path, "p", stamp="20261201T000000Z")
    recs = [
        {"rid": "a", "ok": True, "error": None, "prompt_tokens": 7, "completion_tokens": 11, "ttft_s": 0.02,
         "e2e_s": 0.52, "tpot_s": 0.05, "server_e2e_s": 0.5, "itl_s": [0.04, 0.06], "finish_reason": "length",
         "ts_sent": 10.0, "ts_done": 10.52, "prompt_index": 0, "repeat": 1, "category": "coding", "segment": 0,
         "spec": {"verify_ct": 4, "correct_drafts": 7, "proposed_drafts": 12, "accept_rate": 7 / 12,
                  "histogram": [0, 1, 3], "accept_length": 2.75}},
        {"rid": "b", "ok": False, "error": "HTTP 500: oops, \"quoted\"", "prompt_tokens": 0, "completion_tokens": 0,
         "ttft_s": None, "e2e_s": 0.01, "tpot_s": None, "itl_s": [], "ts_sent": 11.0, "ts_done": 11.01,
         "prompt_index": 1, "repeat": 0, "category": "prose", "segment": 0, "spec": None},
    ]
    for r in recs:
        rd.append_request(r)
    rd.close()                                         # the end of a run writes the CSV
    with open(rd.path / "requests.csv", newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames) == CSV_COLUMNS
        rows = list(reader)
    assert len(rows) == len(rd.read_requests()) == 2
    a, b = rows
    assert (a["prompt_index"], a["repeat"], a["category"], a["ok"]) == ("0", "1", "coding", "True")
    assert float(a["ttft_ms"]) == pytest.approx(20.0) and float(a["e2e_ms"]) == pytest.approx(520.0)
    assert float(a["tpot_ms"]) == pytest.approx(50.0) and float(a["itl_mean_ms"]) == pytest.approx(50.0)
    assert float(a["accept_length"]) == pytest.approx(11 / 4) and a["verify_ct"] == "4"
    assert b["ok"] == "False" and b["error"] == 'HTTP 500: oops, "quoted"' and b["ttft_ms"] == ""
    assert b["accept_length"] == "" and b["tpot_ms"] == ""
    # a resumed run appends and rewrites the CSV with every record
    rd2 = RunDir(rd.path)
    rd2.append_request({**recs[1], "ok": True, "error": None, "completion_tokens": 3, "segment": 1})
    rd2.close()
    with open(rd.path / "requests.csv", newline="", encoding="utf-8") as fh:
        assert [r["segment"] for r in csv.DictReader(fh)] == ["0", "0", "1"]
    assert csv_row({})["ok"] is False                   # a foreign line does not break the export


def test_sim_run_directory_has_requests_csv(tmp_path):
    prof = load_profile(sim_profile(tmp_path, "csvrun", time_scale=8.0))
    run, _ = asyncio.run(run_one(prof, small_suite(n_prompts=2, max_tokens=32), RunOptions(out_dir=tmp_path)))
    d = Path(run["run_dir"])
    with open(d / "requests.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    jl = RunDir(d).read_requests()
    assert [(int(r["prompt_index"]), int(r["repeat"])) for r in rows] == [(j["prompt_index"], j["repeat"]) for j in jl]
    assert [int(r["completion_tokens"]) for r in rows] == [j["completion_tokens"] for j in jl]
    assert [float(r["e2e_ms"]) for r in rows] == pytest.approx([j["e2e_s"] * 1000 for j in jl], abs=1e-3)


def test_resume_keeps_the_load_shape_and_the_goodput(tmp_path, capsys):
    """An open-loop run resumed with --resume RUNDIR alone continues at its rate, burstiness and SLOs; another
    rate, or closed loop, is refused."""
    import json

    from specdash.cli import main
    from tests.test_bench import sim_profile

    prof = sim_profile(tmp_path, "rate", time_scale=8.0)
    assert main(["--bench", "--profile", str(prof), "--request-rate", "20", "--burstiness", "2", "--goodput",
                 "ttft:500", "--max-tokens", "16", "--out", str(tmp_path / "runs"), "--json"]) == 0
    capsys.readouterr()
    rd = next((tmp_path / "runs").glob("*-rate"))
    lines = (rd / "requests.jsonl").read_text().splitlines()
    (rd / "requests.jsonl").write_text("\n".join(lines[:2]) + "\n")  # as if interrupted after two records
    summary = json.loads((rd / "summary.json").read_text())
    summary["runs"][0]["partial"] = True
    (rd / "summary.json").write_text(json.dumps(summary))
    assert main(["--bench", "--resume", str(rd), "--request-rate", "30"]) == 2
    assert "--request-rate 20" in capsys.readouterr().err
    assert main(["--bench", "--resume", str(rd), "--concurrency", "2"]) == 2
    assert main(["--bench", "--resume", str(rd), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["requests"] == len(lines) and run["request_rate"] == 20.0 and run["burstiness"] == 2.0
    assert run["goodput_slo"] == {"ttft_ms": 500.0} and run["goodput"] is not None
