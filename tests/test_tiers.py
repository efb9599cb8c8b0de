"""Decode windows and tokens by step tier (specdash.collect.tiers) on the real 0.5.14 recordings
(``../shared/sglang/golden/runs/adaptive_interleave_1_3``, ``adaptive_default_c1_c16_c32``) and
on synthetic log lines."""

from __future__ import annotations

import itertools

import pytest

from specdash.collect.tiers import TierTracker, paired_windows, tier_stats

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
    # the decode line's own accept rate agrees with the tier it is attributed to
    assert one.share == three.share == pytest.approx(0.5)
    # 3 lines per tier between switches: the first after each switch is discarded
    assert one.verify_rounds == three.verify_rounds == 120 and one.output_tokens == 240
    assert 450 < one.output_tok_s < 650 and 450 < three.output_tok_s < 650
    wins = tr.windows()
    assert sum(w.after_switch for w in wins) == 120 and all(w.lines == 1 for w in wins if w.after_switch)
    assert all(w.lines == 2 for w in wins[1:] if not w.after_switch)
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
    w0, w1 = tr.windows()
    assert w0.after_switch and w0.lines == 1 and w0.steps == 0 and w0.tok_s == pytest.approx(500.0)
    assert not w1.after_switch and w1.lines == 2
    (s,) = tr.per_tier()
    assert s.speculative_num_steps == 0 and s.speculative_num_draft_tokens == 1
    assert s.accept_length == 1.0 and s.accept_rate is None and s.verify_rounds == 64
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
