"""Post-launch verification under ``--speculative-adaptive``: steps-0 windows are not a collapse, tier
switching is not a silent adjustment — against the real 0.5.14 recording and the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from specdash.eagle3.sample import write_profile
from specdash.eagle3.verify import COLLAPSE_THRESHOLD, adaptive_view, verify_server
from specdash.sim.testing import SimProcess, make_draft, make_target

ASKED = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4, "speculative_adaptive": True}


def codes(rep, severity=None) -> list[str]:
    return [f.code for f in rep.findings if severity is None or f.severity == severity]


# --- the real 0.5.14 recording ------------------------------------------------------------------------------


def test_golden_switch_is_read_from_internal_states_and_not_an_adjustment(golden):
    run = golden / "runs" / "adaptive_default_c1_c16_c32"
    info = json.loads((run / "server_info_a3.json").read_text())
    log = (run / "server_log_excerpt.txt").read_text().splitlines()
    metrics = (run / "metrics_a3.prom").read_text()
    assert info["speculative_num_steps"] == 3 and info["internal_states"][0]["speculative_num_steps"] == 1
    view = adaptive_view(info, log, metrics)
    assert view.adaptive and view.zero_tier and not view.zero_served and not view.tier_aware
    assert view.current_steps == view.gauge_steps == 1 and view.switches == 1
    tiers = {w.tiers for w in view.windows}
    assert tiers == {frozenset({3}), frozenset({1, 3}), frozenset({1})}  # before, across and after 'steps 3 -> 1'
    rep = verify_server(ASKED, info, log, None, metrics=metrics)
    assert rep.status == "ok" and "VERIFY_ADJUSTED" not in codes(rep), rep.render()
    (f,) = [f for f in rep.findings if f.code == "VERIFY_ADAPTIVE"]
    assert f.severity == "info" and "runs steps 1 / draft tokens 2 now, launched at steps 3 / draft tokens 4" in \
        f.message
    assert f.evidence["gauge_steps"] == 1 and "not a silent adjustment" in f.why


def test_ema_lines_are_not_accept_lengths():
    lines = ["[2026-12-01 08:37:30] Adaptive spec params updated: steps 3 -> 1 (ema_accept_len=0.07)",
             "[2026-12-01 08:37:30] Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2",
             "[2026-12-01 08:37:31] Decode batch, #running-req: 4, accept len: 2.00, accept rate: 1.00"]
    view = adaptive_view({}, lines)
    assert [(w.accept_length, w.tiers) for w in view.windows] == [(2.0, frozenset({1, 3}))]


# --- synthetic read-backs -----------------------------------------------------------------------------------


def test_adaptive_draft_tokens_overwrite_is_an_adjustment_at_launch(tmp_path):
    prof = write_profile(tmp_path / "p.toml", model_path="sim:tiny-llama", draft_path="sim:tiny-llama-eagle3",
                         launcher="sim", num_draft_tokens=16, spec_extra_args=["--speculative-adaptive"])
    info = {"version": "0.5.14", "speculative_algorithm": "EAGLE3", "speculative_adaptive": True,
            "speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
            "internal_states": [{"speculative_num_steps": 1, "speculative_num_draft_tokens": 2}]}
    from specdash.profile import load_profile

    rep = verify_server(load_profile(str(prof)), info, [], None)
    (adj,) = [f for f in rep.findings if f.code == "VERIFY_ADJUSTED"]
    assert (adj.evidence["asked"], adj.evidence["effective"], adj.evidence["predicted"]) == (16, 4, 4)
    assert "_init_adaptive_speculative_params" in adj.message and adj.evidence["adaptive"]
    assert any(f.code == "VERIFY_ADAPTIVE" and "runs steps 1" in f.message for f in rep.findings)
    # the same read-back without adaptive: the scheduler's copy (internal_states) is what runs
    plain = dict(info, speculative_adaptive=False)
    rep = verify_server(dict(ASKED, speculative_adaptive=False), plain, [], None)
    assert {f.evidence["effective"] for f in rep.findings if f.code == "VERIFY_ADJUSTED"} == {1, 2}


def test_adaptive_turned_off_at_start_up():
    line = ("[2026-12-01 08:36:10] speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported)."
            " Falling back to static speculative params.")
    info = {"version": "0.5.14", "speculative_algorithm": "EAGLE3", "speculative_adaptive": False,
            "speculative_num_steps": 3, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}
    rep = verify_server(dict(ASKED, speculative_eagle_topk=4, speculative_num_draft_tokens=8), info, [line], None)
    (f,) = [f for f in rep.findings if f.code == "VERIFY_ADAPTIVE"]
    assert f.severity == "warning" and "speculative_eagle_topk=4" in f.message and f.evidence["reason"]
    assert not [f for f in verify_server(dict(ASKED, speculative_adaptive=False), info, [], None).findings
                if f.code == "VERIFY_ADAPTIVE"]


# --- the simulator ------------------------------------------------------------------------------------------

SIM = ["--model-path", "sim:tiny-llama", "--speculative-draft-model-path", "sim:tiny-llama-eagle3",
       "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
       "--speculative-adaptive", "--mem-fraction-static", "0.5", "--sim-scenario", "tiny-h200", "--time-scale", "8",
       "--max-running-requests", "64", "--cuda-graph-max-bs-decode", "64", "--enable-metrics",
       "--sim-sglang-version", "0.5.14"]


def _generate(url: str, n_prompts: int, tokens: int) -> list[dict]:
    body = {"text": [f"prompt {n_prompts}-{i}" for i in range(n_prompts)],
            "sampling_params": {"temperature": 0, "max_new_tokens": tokens, "ignore_eos": True}}
    r = httpx.post(url + "/generate", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _serve(args: list[str], loads: list[int]):
    """Run the loads (prompts per batch, one after the other) on a simulated 0.5.14 server with the default
    adaptive config; return (server_info, log, records, metrics)."""
    with SimProcess(args) as sim:
        recs: list[dict] = []
        for n in loads:
            recs += _generate(sim.url, n, 128)
        info = httpx.get(sim.url + "/server_info").json()
        metrics = httpx.get(sim.url + "/metrics").text
        return info, sim.lines, recs, metrics


def _pooled(recs: list[dict]) -> float:
    ct = sum(r["meta_info"]["completion_tokens"] for r in recs)
    return ct / sum(r["meta_info"]["spec_verify_ct"] for r in recs)


def test_healthy_adaptive_server_at_high_concurrency_is_no_collapse():
    """4 requests (slot "1", steps 3) then 64 at once (slot "64": steps 0): pooled over the requests the accept
    length falls to ~1.04 although the draft accepts one token per round wherever it drafts."""
    info, log, recs, metrics = _serve(["--speculative-algorithm", "EAGLE3", *SIM], [4, 64])
    assert _pooled(recs) <= COLLAPSE_THRESHOLD  # what the old check called a collapse
    assert info["internal_states"][0]["speculative_num_steps"] == 0
    rep = verify_server(ASKED, info, log, recs, metrics=metrics)
    assert "VERIFY_COLLAPSE" not in codes(rep) and rep.status == "ok", rep.render()
    assert rep.acceptance == "ok" and rep.accept_length > 1.5
    note = next(f for f in rep.findings if f.code == "VERIFY_ADAPTIVE" and "zero_step_windows" in f.evidence)
    assert note.severity == "info" and note.evidence["zero_step_windows"] >= 1 and "DEFAULT_ADAPTIVE_CONFIG" in note.why
    assert "VERIFY_ADJUSTED" not in codes(rep)


def test_healthy_adaptive_server_only_at_steps_zero_is_unknown_not_collapsed():
    info, log, recs, metrics = _serve(["--speculative-algorithm", "EAGLE3", *SIM], [64])
    rep = verify_server(ASKED, info, log, recs, metrics=metrics)
    assert "VERIFY_COLLAPSE" not in codes(rep), rep.render()
    assert rep.status == "skipped" and rep.acceptance == "unknown" and rep.accept_length is None
    note = next(f for f in rep.findings if f.code == "VERIFY_ADAPTIVE" and "UNKNOWN" in f.message)
    assert note.evidence["zero_step_windows"] >= 1  # the first window also spans the launch tier: 'mixed'
    assert note.evidence["drafted_windows"] == note.evidence["mixed_windows"]


@pytest.mark.parametrize("miswiring", ["eagle_algorithm", "untrained"])
def test_miswired_adaptive_server_still_collapses(tmp_path: Path, miswiring):
    if miswiring == "eagle_algorithm":  # an EAGLE3 head served with --speculative-algorithm EAGLE (C01)
        args, asked = ["--speculative-algorithm", "EAGLE", *SIM], dict(ASKED, speculative_algorithm="EAGLE")
    else:  # draft_vocab_size set but no lm_head.weight: SGLang leaves the head random (C05)
        t, d = make_target(tmp_path / "t"), make_draft(tmp_path / "d", lm_head=False)
        args = ["--speculative-algorithm", "EAGLE3", *SIM]
        args[args.index("sim:tiny-llama")] = str(t)
        args[args.index("sim:tiny-llama-eagle3")] = str(d)
        asked = ASKED
    info, log, recs, metrics = _serve(args, [4, 64])
    rep = verify_server(asked, info, log, recs, metrics=metrics)
    col = [f for f in rep.findings if f.code == "VERIFY_COLLAPSE"]
    assert col and col[0].severity == "error" and rep.status == "failed", rep.render()
    assert col[0].evidence["adaptive"] and col[0].evidence["zero_step_windows"] >= 1
    assert rep.accept_length <= COLLAPSE_THRESHOLD
