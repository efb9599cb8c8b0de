"""Decode windows and tokens by step tier (specdash.collect.tiers) on the real 0.5.14 recordings
(``../shared/sglang/golden/runs/adaptive_interleave_1_3``, ``adaptive_default_c1_c16_c32``) and
on synthetic log lines."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import httpx
import pytest

from specdash.advisor import Measurement, PhaseTimes
from specdash.bench.runner import ProfileRun, RunOptions
from specdash.collect.tiers import TierTracker, paired_windows, tier_stats
from specdash.commands.tables import render_table
from specdash.profile import load_profile, parse_suite
from specdash.sglang import adaptive as A

STAMP = "[2026-12-01 08:38:40] "


def decode(running: int, accept_len: float, rate: float, thr: float, prefix: str = STAMP) -> str:
    return (f"{prefix}Decode batch, #running-req: {running}, #token: 100, token usage: 0.00, accept len: "
            f"{accept_len:.2f}, accept rate: {rate:.2f}, cuda graph: True, gen throughput (token/s): {thr:.2f}, "
            "#queue-req: 0")


def prefill(running: int) -> str:
    return (f"{STAMP}Prefill batch, #new-seq: 1, #new-token: 8, #cached-token: 0, token usage: 0.00, "
            f"#running-req: {running}, #queue-req: 0, #pending-token: 0, cuda graph: False, "
            "input throughput (token/s): 100.00")


def switch(a: int, b: int) -> str:
    return f"{STAMP}Switch adaptive runtime state: steps {a} -> {b}, draft_tokens {a + 1} -> {b + 1}"


def excerpt(golden, run: str) -> list[str]:
    return (golden / "runs" / run / "server_log_excerpt.txt").read_text().splitlines()


def test_golden_interleave_two_tiers(golden):
    """Steps 1 <-> 3 every 3 verify batches, one decode line per iteration (the real server)."""
    lines = excerpt(golden, "adaptive_interleave_1_3")
    tr = TierTracker(3, 4, decode_log_interval=1).feed_lines(lines)
    assert tr.switches == sum("Switch adaptive runtime state" in ln for ln in lines) == 120
    assert tr.decode_lines == 360
    one, three = tr.per_tier()
    assert (one.speculative_num_steps, one.speculative_num_draft_tokens) == (1, 2)
    assert (three.speculative_num_steps, three.speculative_num_draft_tokens) == (3, 4)
    assert one.accept_rate == pytest.approx(1.0) and three.accept_rate == pytest.approx(1 / 3)
    assert one.accept_length == three.accept_length == pytest.approx(2.0)
    assert one.share == pytest.approx(0.5, abs=0.01) and three.share == pytest.approx(0.5, abs=0.01)
    # 3 lines per tier between switches: the first two after each switch still report the old
    # tier (SWITCH_LAG_BATCHES at interval 1) and are discarded, one line per window is kept
    assert {one.verify_rounds, three.verify_rounds} == {60, 61} and one.output_tokens == 2 * one.verify_rounds
    assert 450 < one.output_tok_s < 650 and 450 < three.output_tok_s < 650
    wins = tr.windows()
    # two after-switch lines per switch (the excerpt ends one line after its last switch)
    assert sum(w.after_switch for w in wins) == 2 * 120 - 1 and all(w.lines == 1 for w in wins if w.after_switch)
    assert all(w.lines == 1 for w in wins[1:] if not w.after_switch)
    # kept together, the after-switch lines (slower: the state swap) pull tok/s down
    both = {s.speculative_num_steps: s for s in tr.per_tier(discard_after_switch=False)}
    assert both[1].verify_rounds == 180 and both[1].output_tok_s < one.output_tok_s
    pairs = paired_windows(wins, 1, 3)
    assert len(pairs) == 59 and all(a.steps == 1 and b.steps == 3 and a.t_end <= b.t_start for a, b in pairs)
    assert len({id(b) for _, b in pairs}) == len(pairs)  # disjoint
    # the decode clock runs on: windows are contiguous
    assert all(w2.t_start == pytest.approx(w1.t_end) for w1, w2 in itertools.pairwise(wins))


def test_golden_interleave_without_launch_tier(golden):
    """Without the launch tier the lines before the first switch take its old side."""
    lines = excerpt(golden, "adaptive_interleave_1_3")
    known = [s.to_json() for s in TierTracker(3, 4, decode_log_interval=1).feed_lines(lines).per_tier()]
    tr = TierTracker(decode_log_interval=1).feed_lines(lines)
    assert [s.to_json() for s in tr.per_tier()] == known and tr.unattributed == 0
    assert TierTracker(decode_log_interval=1).feed_lines(lines[:2]).windows() == []  # no switch: unattributed


def test_golden_interleave_switch_count(golden):
    """The whole run's adaptive lines: 38 switches (39 decisions: the last one moved nothing)."""
    lines = (golden / "runs" / "adaptive_interleave_1_3" / "adaptive_log_lines.txt").read_text().splitlines()
    tr = TierTracker(3, 4, decode_log_interval=1).feed_lines(lines)
    assert tr.switches == 38 and tr.steps in (1, 3)


def test_golden_default_config_interval_40(golden):
    """0.5.14's default config, --decode-log-interval 40 (default): c1 and c16 at steps 3, c32 at steps 1."""
    lines = excerpt(golden, "adaptive_default_c1_c16_c32")
    tr = TierTracker(3, 4).feed_lines(lines)
    assert tr.switches == 1
    one, three = tr.per_tier()
    assert one.speculative_num_steps == 1 and one.accept_rate == pytest.approx(1.0)
    assert three.speculative_num_steps == 3 and three.accept_rate == pytest.approx(1 / 3)
    # a line stands for 40 iterations of #running-req requests (the KV #token grows by 40 x R x 2)
    assert one.verify_rounds == 5 * 40 * 32 and one.iterations == 200
    # c32 at steps 1 decodes ~16-20k tok/s on the recording (a-c32.json: 7.9k end to end, prefill included)
    assert 12000 < one.output_tok_s < 22000


def test_timing_classes_and_interval():
    tr = TierTracker(3, 4, decode_log_interval=2)
    tr.feed(decode(1, 2.0, 0.33, 100.0))     # first line: idle (its window started before)
    tr.feed(decode(1, 2.0, 0.33, 400.0))     # clean: 1 x 2 iterations x 2 tokens / 400 = 0.01 s
    tr.feed(prefill(1))
    tr.feed(decode(2, 3.0, 0.67, 600.0))     # with prefill
    tr.feed(prefill(0))
    tr.feed(decode(1, 2.0, 0.33, 10.0))      # idle server before: never timed
    (w,) = tr.windows()
    assert w.lines == 4 and w.iterations == 8
    assert w.request_rounds == 2 * (1 + 1 + 2 + 1) and w.tokens == 4 + 4 + 12 + 4
    assert w.timed_tokens == 4 and w.timed_s == pytest.approx(0.01) and w.tok_s == pytest.approx(400.0)
    assert w.prefill_tokens == 12 and w.prefill_s == pytest.approx(0.02)
    assert w.t_end - w.t_start == pytest.approx(4 / 100 + 0.01 + 0.02 + 0.4)
    (s,) = tr.per_tier()
    assert s.timing == "clean" and s.output_tok_s == pytest.approx(400.0)
    assert s.accept_length == pytest.approx(24 / 10) and s.accept_rate == pytest.approx((24 - 10) / (10 * 3))
    # a tier with only with-prefill lines falls back to them
    tr = TierTracker(3, 4, decode_log_interval=1).feed_lines(
        [decode(4, 2.0, 0.33, 100.0), prefill(4), decode(4, 2.0, 0.33, 800.0)])
    (s,) = tr.per_tier()
    assert s.timing == "with_prefill" and s.output_tok_s == pytest.approx(800.0)


def test_steps_zero_after_switch_and_skip():
    lines = [decode(32, 2.0, 1.0, 1000.0), switch(1, 0), decode(32, 1.0, 0.0, 500.0), decode(32, 1.0, 0.0, 500.0),
             decode(32, 1.0, 0.0, 500.0)]
    tr = TierTracker(1, 2, decode_log_interval=1)
    tr.skip(lines[0])                        # before the measured stretch: sets the timing state only
    tr.skip(lines[1])                        # a switch while skipping moves the tier, uncounted
    tr.feed_lines(lines[2:])
    assert tr.switches == 0 and tr.steps == 0
    w0, w0b, w1 = tr.windows()  # two after-switch lines at interval 1 (SWITCH_LAG_BATCHES)
    assert w0.after_switch and w0.lines == 1 and w0.steps == 0 and w0.tok_s == pytest.approx(500.0)
    assert w0b.after_switch and w0b.lines == 1
    assert not w1.after_switch and w1.lines == 1
    (s,) = tr.per_tier()
    assert s.speculative_num_steps == 0 and s.speculative_num_draft_tokens == 1
    assert s.accept_length == 1.0 and s.accept_rate is None and s.verify_rounds == 32
    assert tier_stats(tr.windows(), discard_after_switch=False)[0].verify_rounds == 96


def test_other_ranks_and_lines_are_ignored():
    tr = TierTracker(3, 4, decode_log_interval=1)
    tr.feed(decode(1, 2.0, 0.33, 100.0))
    tr.feed(decode(1, 2.0, 0.33, 100.0, prefix="[2026-12-01 08:38:40 TP1] "))
    tr.feed("[2026-12-01 08:38:40 TP1] Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2")
    tr.feed("[2026-12-01 08:38:40] Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=1.00)")
    tr.feed('INFO:     127.0.0.1:4000 - "POST /generate HTTP/1.1" 200 OK')
    tr.feed(decode(1, 2.0, 0.33, 200.0, prefix="[2026-12-01 08:38:40 TP0] "))
    assert tr.switches == 0 and tr.decode_lines == 2 and tr.steps == 3
    (w,) = tr.windows()
    assert w.lines == 2 and w.tok_s == pytest.approx(200.0)


def test_paired_windows_pairs_adjacent_disjoint():
    lines = [decode(1, 2.0, 0.33, 100.0)] * 3
    seq = lines + [switch(3, 1), decode(1, 2.0, 1.0, 100.0)]   # a steps-1 run of only its after-switch line
    seq += [switch(1, 3)] + lines + [switch(3, 1)] + [decode(1, 2.0, 1.0, 100.0)] * 3
    tr = TierTracker(3, 4, decode_log_interval=1).feed_lines(seq)
    kept = [w for w in tr.windows() if not w.after_switch]
    assert [w.steps for w in kept] == [3, 3, 1]
    ((a, b),) = paired_windows(tr.windows(), 3, 1)
    assert a == kept[1] and b == kept[2]  # the newer steps-3 window, the closest to the steps-1 one
    assert paired_windows(tr.windows(), 1, 3) == []


# --- the bench on the simulator: summary.json tiers against /sim/truth -------------------------------

def sim_profile(tmp_path: Path, name: str, extra: list[str], *, tiny: bool = True, time_scale: float = 1.0,
                env: dict[str, str] | None = None) -> Path:
    """A simulator profile: steps 3 / topk 1 / draft tokens 4 on SGLang 0.5.14, with ``extra`` server flags."""
    model, draft, scenario = (("sim:tiny-llama", "sim:tiny-llama-eagle3", "tiny-h200") if tiny else
                              ("sim:llama-3.1-8b", "sim:llama-3.1-8b-eagle3", "healthy"))
    env = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1", **(env or {})}
    lines = [f'name = "{name}"', "[server]", 'launcher = "sim"', f'model_path = "{model}"', "port = 0",
             f"extra_args = {json.dumps(extra)}", "[speculative]", 'algorithm = "EAGLE3"',
             f'draft_model_path = "{draft}"', "num_steps = 3", "eagle_topk = 1", "num_draft_tokens = 4", "[env]",
             *(f'{k} = "{v}"' for k, v in env.items()),
             "[sim]", f'scenario = "{scenario}"', f"time_scale = {time_scale}", 'sglang_version = "0.5.14"']
    p = tmp_path / f"{name}.toml"
    p.write_text("\n".join(lines) + "\n")
    return p


def suite_of(prompts: list[dict], *, max_tokens: int, concurrency: int):
    return parse_suite({"suite": {"name": "tiers", "max_tokens": max_tokens, "concurrency": concurrency,
                                  "repeats": 1, "warmup": 1}, "prompts": prompts})


def run_with_truth(tmp_path: Path, profile: Path, suite) -> tuple[dict, dict, dict]:
    """Run the bench on a launched simulator; ``/sim/truth`` just before the first request and just
    before the summary (the server's lifetime counts: the run is the difference; the second one with
    the simulator's per-decode-line entries, ``decode_windows``)."""
    pr = ProfileRun(load_profile(str(profile)), suite, RunOptions(out_dir=tmp_path / "runs", preflight=False))
    truth: dict[str, dict] = {}
    items, summarize = pr._remaining_items, pr._summarize

    def get(query: str = "") -> dict:
        return httpx.get(pr.launch.base_url + "/sim/truth?records=0" + query, timeout=10).json()

    def before():
        truth["before"] = get()
        return items()

    def after(*a):
        truth["after"] = get("&decode_windows=1")
        return summarize(*a)

    pr._remaining_items, pr._summarize = before, after
    run = asyncio.run(pr.run())
    return run, truth["before"], truth["after"]


def truth_tiers(before: dict, after: dict) -> dict[int, dict]:
    """Per-tier truth of the run over every round: lifetime counts after minus before (``busy_s`` is the
    rounds' real wall time, ``planned_s`` the scenario's plan for them)."""
    old = {t["speculative_num_steps"]: t for t in before["tiers"] or []}
    out = {}
    for t in after["tiers"]:
        b = old.get(t["speculative_num_steps"], {})
        d = {k: t[k] - b.get(k, 0) for k in ("verify_rounds", "accepted_drafts", "output_tokens", "busy_s",
                                                "planned_s")}
        if d["verify_rounds"] <= 0:
            continue
        d["accept_length"] = (d["verify_rounds"] + d["accepted_drafts"]) / d["verify_rounds"]
        steps = t["speculative_num_steps"]
        d["accept_rate"] = d["accepted_drafts"] / (d["verify_rounds"] * steps) if steps else None
        out[steps] = d
    return out


def kept_lines_truth(run: dict, after: dict, launch: tuple[int, int] = (3, 4)) -> dict[int, dict]:
    """The simulator's truth over exactly the decode lines specdash kept for each tier: the run's log
    window of ``server.log`` (its RUN's ``log_window``) attributed as the bench attributes it, each kept
    line (not after a switch) looked up in the simulator's ``decode_windows`` by its place in the log.

    Asserts on the way that every kept line holds one tier only — the results it reports and the batches
    run in its window are all of the tier specdash gave it.  Per tier: ``lines``, ``verify_rounds``
    (request-rounds), ``accepted_drafts``, ``accept_length`` (tokens per request-round, bonus included),
    ``accept_rate``, and ``output_tok_s``: the lines' true tokens ÷ their true wall seconds over the lines
    with nothing but decoding in their window (no prefill, no idle wait), or, for a tier without one, over
    those with a prefill (specdash's fallback).  Load cannot move this figure away from specdash's: both
    are the same windows' tokens over the same windows' wall time."""
    lines = Path(run["run_dir"], "server.log").read_text().splitlines()
    lo, hi = run["log_window"]
    assert sum("Decode batch" in ln for ln in lines) == after["decode_lines"]  # one log line per truth entry
    offset = sum("Decode batch" in ln for ln in lines[:lo])
    tr = TierTracker(*launch, decode_log_interval=1)
    for ln in lines[:lo]:
        tr.skip(ln)
    tr.feed_lines(lines[lo:hi])
    by_index = {w["index"]: w for w in after["decode_windows"]}
    out: dict[int, dict] = {}
    for w in tr.windows():
        if w.after_switch:
            continue
        d = out.setdefault(w.steps, {"lines": 0, "verify_rounds": 0, "accepted_drafts": 0, "clean_tokens": 0,
                                     "clean_s": 0.0, "prefill_tokens": 0, "prefill_s": 0.0})
        for pos in range(w.first_line, w.last_line + 1):
            rec = by_index[offset + pos]
            assert rec["reported_steps"] == rec["run_steps"] == [w.steps], (w.steps, rec)
            d["lines"] += 1
            d["verify_rounds"] += rec["request_rounds"]
            d["accepted_drafts"] += rec["accepted_drafts"]
            if rec["idle"]:
                continue
            kind = "prefill" if rec["prefills"] else "clean"
            d[f"{kind}_tokens"] += rec["tokens"]
            d[f"{kind}_s"] += rec["elapsed_s"]
    for steps, d in out.items():
        r = d["verify_rounds"]
        d["accept_length"] = (r + d["accepted_drafts"]) / r
        d["accept_rate"] = d["accepted_drafts"] / (r * steps) if steps else None
        kind = "clean" if d["clean_s"] > 0 else "prefill"
        d["output_tok_s"] = d[f"{kind}_tokens"] / d[f"{kind}_s"]
    return out


def assert_tiers_agree(run: dict, truth: dict[int, dict], kept: dict[int, dict]) -> None:
    """specdash's tier figures against the truth over the lines it kept (``kept``: within 1 %, the
    rounding of the log's two decimals and the batch taken at the logging iteration) and its accept figures
    against the truth over every round of the tier (``truth``: within 2 %, a sample of the rounds)."""
    ours = {t["speculative_num_steps"]: t for t in run["tiers"]}
    assert set(ours) == set(truth) == set(kept)
    for steps, t in ours.items():
        assert set(t) == {"speculative_num_steps", "speculative_num_draft_tokens", "verify_rounds", "output_tokens",
                          "accept_length", "accept_rate", "output_tok_s", "share"}
        assert t["speculative_num_draft_tokens"] == steps + 1
        assert t["verify_rounds"] == pytest.approx(kept[steps]["verify_rounds"], rel=0.01), steps
        assert t["accept_length"] == pytest.approx(kept[steps]["accept_length"], rel=0.01), steps
        assert t["output_tok_s"] == pytest.approx(kept[steps]["output_tok_s"], rel=0.01), steps
        assert t["accept_length"] == pytest.approx(truth[steps]["accept_length"], rel=0.02), steps
        if steps:
            assert t["accept_rate"] == pytest.approx(kept[steps]["accept_rate"], rel=0.01), steps
            assert t["accept_rate"] == pytest.approx(truth[steps]["accept_rate"], rel=0.02), steps
        else:
            assert t["accept_rate"] is None
    assert sum(t["share"] for t in ours.values()) == pytest.approx(1.0)


def run_agreeing(tmp_path: Path, prof: Path, suite):
    """:func:`run_with_truth`, then :func:`assert_tiers_agree` (truth over the kept lines and over every round)."""
    run, before, after = run_with_truth(tmp_path, prof, suite)
    truth = truth_tiers(before, after)
    assert_tiers_agree(run, truth, kept_lines_truth(run, after))
    return run, before, after, truth


def interleave_file(tmp_path: Path) -> Path:
    cfg = tmp_path / "interleave.json"
    cfg.write_text(json.dumps(A.interleave_config(1, 3, "0.5.14")))
    return cfg


def test_bench_interleave_tiers_agree_with_truth(tmp_path):
    """Steps 1 <-> 3 every 3 verify batches at concurrency 1, one decode line per iteration."""
    cfg = interleave_file(tmp_path)
    prof = sim_profile(tmp_path, "inter", ["--speculative-adaptive", "--speculative-adaptive-config", str(cfg),
                                           "--cuda-graph-max-bs-decode", "8", "--decode-log-interval", "1"],
                       env={"SGLANG_ENABLE_METRICS_DEVICE_TIMER": "1"})
    prompts = [{"text": f"Prompt {i}: describe the water cycle at length."} for i in range(3)]
    run, before, after, truth = run_agreeing(tmp_path, prof, suite_of(prompts, max_tokens=1024, concurrency=1))
    assert set(truth) == {1, 3}
    ad = run["adaptive"]
    assert set(ad) == {"enabled", "config", "switches"} and ad["enabled"] is True
    assert ad["switches"] == after["adaptive"]["switches"] - before["adaptive"]["switches"] > 300
    assert ad["config"]["slots"]["1"]["candidate_steps"] == [1, 3] and ad["config"]["version"] == "0.5.14"
    assert {t["speculative_num_steps"]: t["share"] for t in run["tiers"]} == pytest.approx({1: 0.5, 3: 0.5}, abs=0.02)
    # the pooled accept rate counts the drafts each tier proposed (1 per round at steps 1, 3 at steps 3);
    # the per-request figures divide by the launch tier's 3 drafts
    acc = sum(t["accepted_drafts"] for t in truth.values())
    proposed = sum(t["verify_rounds"] * s for s, t in truth.items())
    assert run["accept_rate"] == pytest.approx(acc / proposed, rel=0.02) and run["accept_rate"] == pytest.approx(0.5)
    assert run["acceptance_simulated"] is False and list(run).index("acceptance_simulated") == \
        list(run).index("simulated") + 1
    assert run["decode_iterations"] == after["decode_iterations"] - before["decode_iterations"]
    assert set(run["device_time_s"]) >= {"eagle_draft", "target_verify", "eagle_draft_extend"}
    assert json.loads(Path(run["run_dir"], "summary.json").read_text())["runs"][0]["tiers"] == run["tiers"]
    # adaptive runs give the advisor tiers, not one launch's phases
    assert Measurement.from_run(run).phases is None
    assert [m.settings.steps for m in Measurement.tiers_from_run(run)] == [1, 3]
    text = render_table([run])
    assert "(sim, adaptive)" in text and "adaptive speculation (bs 1: [1, 3])" in text
    assert "accept rate" in text and "lines after each switch that still report the old tier left out" in text


def test_bench_default_config_c32_tiers_agree_with_truth(tmp_path):
    """0.5.14's default config at concurrency 32: slot "32" ([0, 1]) runs steps 1 while 32 requests
    run; half of them are long, so the tail runs 16 requests in slot "8" ([0, 1, 3]) at steps 3."""
    prof = sim_profile(tmp_path, "c32", ["--speculative-adaptive", "--cuda-graph-max-bs-decode", "32",
                                         "--decode-log-interval", "1"])
    prompts = [{"text": f"Prompt {i}: say something.", "max_tokens": 1024 if i < 16 else 256} for i in range(32)]
    run, before, after, truth = run_agreeing(tmp_path, prof, suite_of(prompts, max_tokens=256, concurrency=32))
    assert set(truth) == {1, 3}
    by = {t["speculative_num_steps"]: t for t in run["tiers"]}
    assert by[1]["accept_rate"] == pytest.approx(1.0) and by[3]["accept_rate"] == pytest.approx(1 / 3)
    assert 0.3 < by[1]["share"] < 0.5  # 32 x 128 rounds at steps 1, 16 x 384 at steps 3
    assert run["adaptive"]["switches"] == after["adaptive"]["switches"] - before["adaptive"]["switches"] >= 1
    assert run["adaptive"]["config"]["slots"]["32"]["candidate_steps"] == [0, 1]
    assert run["device_time_s"] is None  # no device timer asked
    # the launch draft tokens' rate (1 of 3 drafts per round) would be wrong for the steps-1 rounds
    assert run["accept_rate"] > 0.34


@pytest.mark.slow
def test_bench_interleave_stochastic_acceptance(tmp_path):
    """The healthy 8B scenario (random acceptance) at concurrency 8: the tier figures still agree with the
    truth over the lines kept although the first two lines after each switch (two thirds of the rounds) are
    left out, and the accept figures with the truth over every round."""
    cfg = interleave_file(tmp_path)
    prof = sim_profile(tmp_path, "inter8b", ["--speculative-adaptive", "--speculative-adaptive-config", str(cfg),
                                             "--cuda-graph-max-bs-decode", "8", "--decode-log-interval", "1"],
                       tiny=False, time_scale=2.0)
    prompts = [{"text": f"Prompt {i}: explain a topic of your choice in depth."} for i in range(16)]
    run, _before, _after, _truth = run_agreeing(tmp_path, prof, suite_of(prompts, max_tokens=2048, concurrency=8))
    by = {t["speculative_num_steps"]: t for t in run["tiers"]}
    assert by[3]["accept_length"] > by[1]["accept_length"] + 0.5


def test_bench_without_adaptive_and_simulated_acceptance(tmp_path):
    prof = sim_profile(tmp_path, "plain", [], env={"SGLANG_SIMULATE_ACC_LEN": "2.5"})
    prompts = [{"text": "Say hello."}]
    pr = ProfileRun(load_profile(str(prof)), suite_of(prompts, max_tokens=64, concurrency=1),
                    RunOptions(out_dir=tmp_path / "runs", preflight=False))
    run = asyncio.run(pr.run())
    assert run["tiers"] is None
    assert run["adaptive"] == {"enabled": False, "config": None, "switches": 0}
    assert run["acceptance_simulated"] is True
    assert run["device_time_s"] is None and run["decode_iterations"] > 0
    # SGLANG_SIMULATE_ACC_LEN=2.5 on steps 3: every round accepts 1 or 2 drafts (2 or 3 tokens), 1.5 on average
    hist = run["accept_histogram"]
    assert hist[0] == 0 and len(hist) == 3 and abs(hist[1] - hist[2]) <= 5
    rounds, drafts = sum(hist), sum(i * n for i, n in enumerate(hist))
    assert run["accept_rate"] == pytest.approx(drafts / (3 * rounds))  # the records' own figure (one tier)
    assert 2.3 < run["accept_length"] < 2.6
    text = render_table([run])
    assert "(sim, simulated acceptance)" in text and "simulated acceptance: SGLANG_SIMULATE_ACC_LEN" in text
    assert "adaptive speculation" not in text


def test_render_tiers_attached_adaptive_run():
    run = {"profile": "p", "requests": 1, "output_tokens": 10, "adaptive": {"enabled": True, "config": None,
                                                                          "switches": None}, "tiers": []}
    text = render_table([run])
    assert "config unknown): ? switch(es)" in text and "no per-tier figures" in text


def test_phase_times_from_a_run():
    run = {"effective": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3},
           "device_time_s": {"eagle_draft": 0.2, "eagle_draft_extend": 0.1, "target_verify": 0.6, "extend": 0.05},
           "decode_iterations": 100, "accept_histogram": [100, 100, 200], "adaptive": {"enabled": False},
           "output_tok_s": 100.0, "accept_length": 2.0}
    m = Measurement.from_run(run, concurrency=4)
    assert m.phases.rounds == 100 and m.phases.batch == pytest.approx(4.0) and m.phases.steps == 3
    assert m.phases.verify_ms_per_round() == pytest.approx(6.0)
    assert PhaseTimes.from_run({**run, "decode_iterations": None}, concurrency=8).rounds == pytest.approx(50.0)
    assert PhaseTimes.from_run({**run, "device_time_s": None}) is None
    assert PhaseTimes.from_run({**run, "adaptive": {"enabled": True}}) is None


def test_switch_lag_two_lines_as_on_the_real_testbed():
    """The pattern of real SGLang 0.5.14 on the H200 (8B-shaped testbed, SGLANG_SIMULATE_ACC_LEN=3,
    steps 1 <-> 15 interleaved, benchmarks/results/h200-2026-12-01-testbed/): after a switch to
    steps 15 the next two decode lines still read accept len 2.00 (steps 1's), after a switch back
    to steps 1 they still read 3.00.  With one discarded line both tiers read 2.5."""
    lines = []
    for _ in range(20):
        lines += [switch(1, 15), decode(1, 2.0, 0.07, 300.0), decode(1, 2.0, 0.07, 300.0), decode(1, 3.0, 0.13, 320.0),
                  switch(15, 1), decode(1, 3.0, 2.0, 320.0), decode(1, 3.0, 2.0, 320.0), decode(1, 2.0, 1.0, 300.0)]
    one, fifteen = TierTracker(1, 2, decode_log_interval=1).feed_lines(lines).per_tier()
    assert (one.speculative_num_steps, fifteen.speculative_num_steps) == (1, 15)
    assert one.accept_length == pytest.approx(2.0) and fifteen.accept_length == pytest.approx(3.0)
    assert one.output_tok_s == pytest.approx(300.0) and fifteen.output_tok_s == pytest.approx(320.0)
    lag1 = TierTracker(1, 2, decode_log_interval=1, switch_lag_batches=1).feed_lines(lines).per_tier()
    assert [round(t.accept_length, 2) for t in lag1] == [2.5, 2.5]  # what a one-line discard reads


def test_render_tiers_says_when_the_rows_cover_part_of_the_run():
    from specdash.commands.tables import render_tiers

    tier = {"speculative_num_steps": 3, "speculative_num_draft_tokens": 4, "verify_rounds": 240, "output_tokens": 700,
            "accept_length": 2.9, "accept_rate": 0.6, "output_tok_s": 300.0, "share": 1.0}
    run = {"adaptive": {"enabled": True, "config": None, "switches": 2}, "tiers": [tier], "output_tokens": 1160,
           "accept_length": 2.9}
    text = "\n".join(render_tiers(run))
    assert "the tier rows cover 240 of the run's ≈400 request-rounds" in text
    run["output_tokens"] = 700
    assert "the tier rows cover" not in "\n".join(render_tiers(run))
