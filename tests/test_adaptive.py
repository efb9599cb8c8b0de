"""specdash.sglang.adaptive: SGLang's adaptive speculation per release, against the wheels' rules
and the real 0.5.14 recordings (``../shared/sglang/golden/runs/adaptive_*``)."""

from __future__ import annotations

import itertools
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from specdash.sglang import adaptive as A
from specdash.sglang.logs import LineKind, classify_line
from specdash.sim.scenario import SpecShape, load_scenario

GRAPH_BS_32 = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32]
INTERLEAVE = {"1": {"candidate_steps": [1, 3], "up_hysteresis": -100, "down_hysteresis": 100, "warmup_batches": 2,
                    "update_interval": 3}}


# -- defaults and parsing, per release ------------------------------------------------------------

def test_default_configs_per_release():
    assert A.default_config("0.5.12").slots[1].candidate_steps == (1, 3, 7)
    assert not A.default_config("0.5.12").keyed
    c13 = A.default_config("0.5.13")
    assert {k: s.candidate_steps for k, s in c13.slots.items()} == {1: (1, 3, 7), 8: (1, 3), 32: (1,)}
    c14 = A.default_config("0.5.14")
    assert {k: s.candidate_steps for k, s in c14.slots.items()} == {1: (1, 3, 7), 8: (0, 1, 3), 32: (0, 1), 64: (0,)}
    assert c14.slots[1].down_hysteresis == -0.25 and c14.slots[8].down_hysteresis == 0.0
    assert c14.candidate_steps() == [0, 1, 3, 7] and c14.max_draft_tokens() == 8
    assert A.default_config("0.5.19").slots[1].candidate_steps == (1, 3, 7)
    assert A.default_config("0.5.20").slots[1].candidate_steps == (1, 3, 5, 7)
    assert A.default_config("0.5.23").slots[1].candidate_steps == (1, 3, 5, 7)
    with pytest.raises(A.AdaptiveConfigError):
        A.default_config("0.5.10")


def test_0_5_12_reads_a_flat_config_and_ignores_a_keyed_one():
    flat = A.parse_config({"candidate_steps": [1, 3], "ema_alpha": 0.5, "warmup_batches": 2}, "0.5.12")
    assert not flat.keyed and not flat.ignored
    assert flat.slots[1].candidate_steps == (1, 3) and flat.slots[1].ema_alpha == 0.5
    assert flat.slots[1].warmup_batches == 2 and flat.slots[1].update_interval == 5
    keyed = A.parse_config(INTERLEAVE, "0.5.12", launch_steps=3)
    assert keyed.ignored and keyed.warnings
    assert keyed.slots[1] == A.default_config("0.5.12").slots[1]  # silently the defaults
    # 0.5.12 adds a launch step count that is not a candidate (and logs it)
    added = A.parse_config({"candidate_steps": [1, 3]}, "0.5.12", launch_steps=5)
    assert added.slots[1].candidate_steps == (1, 3, 5) and added.added_initial == 5
    ctl = A.AdaptiveController(added, 5)
    assert [e.line for e in ctl.startup_events()] == [
        "Adding initial speculative_num_steps=5 to candidate_steps=[1, 3] so the pre-built runtime state is reused.",
        "AdaptiveSpeculativeParams initialized: steps=5, candidate_steps=[1, 3, 5]"]
    with pytest.raises(A.AdaptiveConfigError) as exc:
        A.parse_config({"candidate_steps": [3]}, "0.5.12", launch_steps=3)
    assert exc.value.exception == "AssertionError"
    with pytest.raises(A.AdaptiveConfigError, match="must be a JSON object, got list"):
        A.parse_config([1, 3], "0.5.12")


def test_keyed_releases_reject_a_flat_file_and_foreign_launch_steps(tmp_path):
    p = tmp_path / "flat.json"
    p.write_text(json.dumps({"candidate_steps": [1, 3]}))
    with pytest.raises(A.AdaptiveConfigError) as exc:
        A.parse_config(str(p), "0.5.14")
    assert str(exc.value) == (
        'speculative_adaptive_config must contain at least one integer-string BS key, e.g. {"1": '
        '{"candidate_steps": [1,3,7]}}. Got keys: [\'candidate_steps\']')
    assert exc.value.exception == "ValueError"
    with pytest.raises(A.AdaptiveConfigError) as exc:
        A.parse_config(None, "0.5.14", launch_steps=5)
    assert str(exc.value) == ("--speculative-num-steps=5 is not in the adaptive config candidate_steps [0, 1, 3, 7]. "
                              "Pass one of those values.")
    assert A.parse_config(INTERLEAVE, "0.5.14", launch_steps=3).slots[1].up_hysteresis == -100
    with pytest.raises(A.AdaptiveConfigError, match="not in the adaptive config candidate_steps \\[1, 3\\]"):
        A.parse_config(INTERLEAVE, "0.5.13", launch_steps=7)
    # steps 0: 0.5.13 wants positive ints, 0.5.14 non-negative
    with pytest.raises(A.AdaptiveConfigError, match=r"BS 8: candidate_steps must be a list of positive ints, got \[0, 1\]"):
        A.parse_config({"8": {"candidate_steps": [0, 1]}}, "0.5.13")
    assert A.parse_config({"8": {"candidate_steps": [0, 1]}}, "0.5.14").slots[8].candidate_steps == (0, 1)
    # non-digit keys are shared by every slot
    shared = A.parse_config({"ema_alpha": 0.5, "1": {"candidate_steps": [1, 3]},
                             "8": {"candidate_steps": [1], "ema_alpha": 0.1}}, "0.5.23")
    assert shared.slots[1].ema_alpha == 0.5 and shared.slots[8].ema_alpha == 0.1


def test_render_per_release_round_trips_or_refuses():
    d14 = A.default_config("0.5.14")
    out = A.render_config(d14, "0.5.14")
    assert list(out) == ["1", "8", "32", "64"] and out["8"]["candidate_steps"] == [0, 1, 3]
    assert A.parse_config(out, "0.5.14").slots == d14.slots
    flat = A.render_config({1: A.AdaptiveSlot((1, 3), warmup_batches=2)}, "0.5.12")
    assert flat["candidate_steps"] == [1, 3] and "ceiling_coeff" not in flat and "1" not in flat
    with pytest.raises(A.AdaptiveConfigError, match="one flat adaptive config") as exc:
        A.render_config(A.default_config("0.5.13"), "0.5.12")
    assert exc.value.render
    with pytest.raises(A.AdaptiveConfigError, match="zero-step"):
        A.render_config(d14, "0.5.13")


def test_routing_pads_to_the_captured_sizes_then_takes_the_closest_slot_below():
    cfg = A.default_config("0.5.14")
    assert [cfg.route(b, GRAPH_BS_32) for b in (1, 7, 8, 9, 16, 31, 32, 33, 80)] == [1, 1, 8, 8, 8, 32, 32, 32, 64]
    assert cfg.route(9, None) == 8 and cfg.pad(9, GRAPH_BS_32) == 10 and cfg.pad(40, GRAPH_BS_32) == 40
    # the runtime states the golden 0.5.14 server built, with their pruned CUDA-graph batch sizes
    ctl = A.AdaptiveController(cfg, 3, cuda_graph_bs=GRAPH_BS_32)
    built = dict(ctl.states_to_build())
    assert list(built) == [0, 1, 7]
    assert built[0] == [8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32] and built[7] == [1, 2, 3, 4, 5, 6, 7]
    assert built[1] == GRAPH_BS_32
    assert {k: p.current_steps for k, p in ctl.policies.items()} == {1: 3, 8: 3, 32: 1, 64: 0}
    keyed_small = A.parse_config({"16": {"candidate_steps": [1, 3]}}, "0.5.14")
    assert keyed_small.route(1, GRAPH_BS_32) == 16  # below every key: the smallest slot
    flat = A.default_config("0.5.12")
    assert flat.route(64, GRAPH_BS_32) == 1 and flat.cuda_graph_bs_for_step(7, GRAPH_BS_32) == GRAPH_BS_32


# -- the policy ------------------------------------------------------------------------------------

def _golden_lines(golden, run: str) -> list[str]:
    return (golden / "runs" / run / "adaptive_log_lines.txt").read_text().splitlines()


def test_policy_reproduces_the_golden_interleave_log(golden):
    """Same config, one accepted draft per round (the aligned head): the exact update/switch lines."""
    cfg = A.parse_config(INTERLEAVE, "0.5.14", launch_steps=3)
    ctl = A.AdaptiveController(cfg, 3, cuda_graph_bs=list(range(1, 9)))
    ours = [e.line for e in ctl.startup_events()]
    for _ in range(200):
        ours += [e.line for e in ctl.before_batch(1) + ctl.after_verify([1], 1)]
    real = [ln.split("] ", 1)[1] for ln in _golden_lines(golden, "adaptive_interleave_1_3")
            if "Adaptive" in ln or "Switch adaptive" in ln]
    assert ours[:len(real)] == real


def test_policy_alternates_under_interleave_and_holds_under_normal_hysteresis():
    slot = A.parse_config(INTERLEAVE, "0.5.14").slots[1]
    for accepted in (0, 1, 3):
        pol = A.AdaptivePolicy(slot, 3, "0.5.14")
        moves = [(i, pol.observe([accepted])) for i in range(20)]
        assert [(i, m) for i, m in moves if m is not None] == [(4, 1), (7, 3), (10, 1), (13, 3), (16, 1), (19, 3)]
    # the same config on 0.5.13 never moves: the forced drop is undone by the up loop of the same decision
    pol = A.AdaptivePolicy(slot, 3, "0.5.13")
    assert all(pol.observe([1]) is None for _ in range(40))
    # 0.5.14 default slot "1" [1, 3, 7] at steps 3: one accepted draft holds (ema 1 > 0.25), zero drops,
    # full acceptance rises
    s1 = A.default_config("0.5.14").slots[1]
    hold = A.AdaptivePolicy(s1, 3, "0.5.14")
    assert all(hold.observe([1, 1]) is None for _ in range(200)) and hold.current_steps == 3
    drop = A.AdaptivePolicy(s1, 3, "0.5.14")
    assert [m for m in (drop.observe([0]) for _ in range(15)) if m] == [1]
    rise = A.AdaptivePolicy(s1, 3, "0.5.14")
    assert [m for m in (rise.observe([3]) for _ in range(15)) if m] == [7]
    # steps 0: the EMA is frozen and the next decision probes one step up
    s8 = A.default_config("0.5.14").slots[8]
    zero = A.AdaptivePolicy(s8, 0, "0.5.14")
    moves = [m for m in (zero.observe([5]) for _ in range(15)) if m is not None]
    assert moves == [1] and zero.ema_accept_len == 0.0  # probe from ema = target - 1


def test_interleave_config_matches_the_golden_file_and_refuses_older_releases(golden):
    real = json.loads((golden / "runs" / "adaptive_interleave_1_3" / "adaptive_config.json").read_text())
    assert A.interleave_config(1, 3, "0.5.14") == real
    assert A.interleave_config(3, 1, "0.5.23") == real
    assert A.interleave_config(0, 1, "0.5.14", batch_size=8) == {"8": {**real["1"], "candidate_steps": [0, 1]}}
    for v in ("0.5.12", "0.5.13"):
        with pytest.raises(A.AdaptiveConfigError, match="does not alternate"):
            A.interleave_config(1, 3, v)
    with pytest.raises(A.AdaptiveConfigError):
        A.interleave_config(3, 3, "0.5.14")


def test_resolve_launch_per_release():
    r = A.resolve_launch("0.5.14", algorithm="EAGLE3", num_steps=None, eagle_topk=None, num_draft_tokens=None)
    assert r.enabled and (r.num_steps, r.eagle_topk, r.num_draft_tokens) == (3, 1, 4)
    r = A.resolve_launch("0.5.14", algorithm="EAGLE3", num_steps=7, eagle_topk=1, num_draft_tokens=16)
    assert r.num_draft_tokens == 8
    r = A.resolve_launch("0.5.14", algorithm="EAGLE3", num_steps=3, eagle_topk=4, num_draft_tokens=8)
    assert not r.enabled and r.reason == "speculative_eagle_topk=4 (only topk=1 is supported)"
    r = A.resolve_launch("0.5.14", algorithm="NGRAM", num_steps=3, eagle_topk=1, num_draft_tokens=4)
    assert not r.enabled and "only EAGLE/EAGLE3" in r.reason
    r = A.resolve_launch("0.5.11", algorithm="EAGLE3", num_steps=3, eagle_topk=1, num_draft_tokens=4)
    assert not r.enabled and "overlap scheduler" in r.reason
    assert A.resolve_launch("0.5.11", algorithm="EAGLE3", num_steps=3, eagle_topk=1, num_draft_tokens=4,
                            disable_overlap_schedule=True).enabled
    r = A.resolve_launch("0.5.14", algorithm="EAGLE3", num_steps=5, eagle_topk=1, num_draft_tokens=6)
    assert not r.enabled and r.error is not None and "is not in the adaptive config" in str(r.error)


# -- reading a real server --------------------------------------------------------------------------

def test_log_lines_parse_against_the_golden_recordings(golden):
    events = A.parse_adaptive_lines(_golden_lines(golden, "adaptive_default_c1_c16_c32"))
    assert [e.kind for e in events] == ["initialized", "built", "built", "built", "switch"]
    assert events[0].new_steps == 3 and events[0].candidate_steps == (1, 3, 7)
    assert [(e.new_steps, e.elapsed_s, e.mem_gb) for e in events[1:4]] == [(0, 2.41, 0.11), (1, 2.25, 0.12),
                                                                           (7, 5.40, 0.28)]
    sw = events[4]
    assert (sw.old_steps, sw.new_steps, sw.old_draft_tokens, sw.new_draft_tokens) == (3, 1, 4, 2)
    assert sw.timestamp is not None and sw.timestamp.hour == 8
    lines = _golden_lines(golden, "adaptive_interleave_1_3")
    inter = A.parse_adaptive_lines(lines)
    switches = [e for e in inter if e.kind == "switch"]
    updates = [e for e in inter if e.kind == "update"]
    assert len(switches) >= 30 and len(updates) >= len(switches)
    assert all(a.new_steps == b.old_steps and a.new_steps != b.new_steps for a, b in itertools.pairwise(switches))
    assert updates[0].ema_accept_len == 1.33 and updates[-1].ema_accept_len == 1.00
    for e in inter:  # each event renders back to the real text
        assert any(e.line in ln for ln in lines)
    kinds = [classify_line(ln) for ln in lines]
    assert kinds.count(LineKind.ADAPTIVE_SWITCH) == len(switches)
    assert kinds.count(LineKind.ADAPTIVE_UPDATE) == len(updates)
    assert kinds.count(LineKind.ADAPTIVE_INIT) == 2
    assert A.parse_adaptive_line("[2026-12-01 08:37:31] Decode batch, #running-req: 32") is None


def test_internal_states_of_the_golden_server_info(golden):
    run = golden / "runs" / "adaptive_default_c1_c16_c32"
    before = A.read_internal_state(json.loads((run / "server_info_a0.json").read_text()))
    after = A.read_internal_state(json.loads((run / "server_info_a3.json").read_text()))
    assert before.adaptive and before.launch_steps == 3 and before.current_steps == 3 and not before.switched
    assert (after.launch_steps, after.launch_draft_tokens) == (3, 4)
    assert (after.current_steps, after.current_draft_tokens, after.max_draft_tokens) == (1, 2, 8)
    assert after.switched


def _prom(path) -> dict[tuple[str, str], float]:
    out = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out[(s.name, s.labels.get("category", ""))] = s.value
            if s.name == "sglang:forward_execution_seconds_total":
                assert set(s.labels) == {"category", "engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank"}
    return out


def test_device_timer_counters_of_the_golden_metrics_and_the_model(golden):
    """The golden per-phase GPU seconds (prometheus_client.parser) against the scenario's device model."""
    run = golden / "runs" / "adaptive_default_c1_c16_c32"
    snaps = [_prom(run / f"metrics_a{i}.prom") for i in range(4)]
    name = "sglang:forward_execution_seconds_total"
    cats = {c for (n, c) in snaps[0] if n == name}
    assert cats == {"extend", "eagle_draft", "target_verify", "eagle_draft_extend"}
    assert [s[("sglang:spec_num_steps", "")] for s in snaps] == [0.0, 3.0, 3.0, 1.0]
    sc = load_scenario("tiny-h200")
    # (batch size, steps) of each load phase; batch rounds = request-rounds / batch
    phases = [(1, 3), (16, 3), (32, 1)]
    for i, (b, steps) in enumerate(phases, start=1):
        a, z = snaps[i - 1], snaps[i]
        rounds = (z[("sglang:spec_verify_calls_total", "")] - a[("sglang:spec_verify_calls_total", "")]) / b
        model = sc.device_ms(b, SpecShape(steps, 1, steps + 1))
        for cat in ("eagle_draft", "target_verify", "eagle_draft_extend"):
            real_ms = (z[(name, cat)] - a[(name, cat)]) / rounds * 1000.0
            ours = model.get(cat, 0.0)
            if steps == 1 and cat == "eagle_draft":
                assert real_ms == 0.0 and ours == 0.0  # steps 1 runs no draft forward
            else:
                assert ours == pytest.approx(real_ms, rel=0.15), (b, cat)
