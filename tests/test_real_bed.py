"""The real-draft test bed's committed results, held to what the code computes from them.

Inputs are the GPU machine's own outputs under ``benchmarks/results/real-2026-12-02/`` (real SGLang 0.5.14,
SmolLM2-135M-Instruct + the EAGLE3 draft trained for it with SpecForge 0.2.0): the draft's ``config.json``,
its tensor listing and vocabulary map, the target's config and tensor listing, every launch's
``summary.json``.  Nothing here needs a GPU.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "benchmarks" / "results" / "real-2026-12-02"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "real" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_grid_rows_are_the_runs_and_positions_follow_the_histogram():
    collect = _load("collect")
    rows = collect.rows(RES)
    assert json.loads((RES / "grid.json").read_text()) == json.loads(json.dumps(rows))
    chain6 = next(r for r in rows if (r["steps"], r["topk"], r["draft_tokens"]) == (6, 1, 7))
    # pooled histogram [981, 556, 336, 236, 179, 173, 430] over 2891 verify rounds
    assert [p["reached"] for p in chain6["accept_by_position"]] == [2891, 1910, 1354, 1018, 782, 603]
    assert [p["rate"] for p in chain6["accept_by_position"]] == [0.6607, 0.7089, 0.7518, 0.7682, 0.7711, 0.7131]
    base = next(r for r in rows if r["algorithm"] is None)
    assert base["speedup_vs_baseline"] == 1.0 and base["accept_by_position"] is None
    assert {r["target"] for r in rows} == {"smol"}


RES2 = ROOT / "benchmarks" / "results" / "real-2026-12-03"


def test_grid_of_three_machines_judges_each_against_its_own_baseline():
    """real-2026-12-03: run directories one folder per loaned machine; every ratio within one machine."""
    collect = _load("collect")
    rows = collect.rows(RES2)
    assert json.loads((RES2 / "grid.json").read_text()) == json.loads(json.dumps(rows))
    assert {r["machine"] for r in rows} == {"machine-x", "machine-a", "machine-c"}
    spec = {(r["steps"], r["topk"], r["draft_tokens"]) for r in rows if r["algorithm"] == "EAGLE3"}
    # steps 1-6 on machines x and a, steps 7-10 (and a repeat of 5/4/16) on machine c
    assert len(spec) == 32 and any(k > 1 for _, k, _ in spec) and max(s for s, _, _ in spec) == 10
    assert {r["concurrency"] for r in rows} == {1, 4, 16}
    base = {(r["machine"], r["concurrency"]): r["output_tok_s"] for r in rows if r["algorithm"] is None}
    for r in rows:
        assert r["speedup_vs_baseline"] == round(r["output_tok_s"] / base[r["machine"], r["concurrency"]], 4)
    # the same greedy chain on two loans: the same verify rounds, hence the same accept length to the digit
    twice = [r for r in rows if (r["steps"], r["topk"], r["draft_tokens"], r["concurrency"]) == (5, 1, 6, 1)]
    assert len(twice) == 2 and twice[0]["accept_length"] == twice[1]["accept_length"] == 3.0218


def test_tunes_rows_follow_the_tune_reports_and_the_grid():
    collect = _load("collect")
    tuned = collect.tunes(RES2, collect.rows(RES2))
    assert json.loads((RES2 / "tunes.json").read_text()) == json.loads(json.dumps(tuned))
    live = next(t for t in tuned if t["mode"] == "live")
    assert live["start"] == {"steps": 3, "topk": 4, "draft_tokens": 5} and live["concurrency"] == 4
    assert live["pick"] == {"steps": 10, "topk": 4, "draft_tokens": 40}
    # the grid's best at c4 is machine c's 7/4/24, and machine c measured the pick too: the gap from its tok/s
    assert live["grid_best"] == {"steps": 7, "topk": 4, "draft_tokens": 24} and live["grid_best_machine"] == "machine-c"
    mc = {(r["steps"], r["topk"], r["draft_tokens"]): r["output_tok_s"] for r in collect.rows(RES2)
          if r["machine"] == "machine-c" and r["concurrency"] == 4}
    assert live["pick_tok_s"] == mc[10, 4, 40] and live["grid_best_tok_s"] == mc[7, 4, 24]
    assert live["gap_basis"] == "grid tok/s, same machine"
    assert live["gap_pct"] == round(100 * (mc[7, 4, 24] - mc[10, 4, 40]) / mc[7, 4, 24], 2) == 7.44
    # the tune's own launch of the pick over the tune's own baseline (machine b) stays beside it
    assert live["pick_speedup"] == round(live["pick_measured_tok_s"] / live["tune_baseline_tok_s"], 4)
    assert live["launches"] == 4 and not live["adaptive_schedule"]


def test_calibrated_scenario_reproduces_every_measured_accept_length():
    """The scenario real-smol's acceptance (alpha, decay, prompt_sigma, tree_gain) against the six launches."""
    from specdash.sim.scenario import load_scenario

    cal = _load("calibrate")
    sc = load_scenario("real-smol").acceptance
    measured = [r for r in json.loads((RES / "grid.json").read_text()) if r["algorithm"] == "EAGLE3"]
    assert len(measured) == 6 and any(r["topk"] > 1 for r in measured)
    for r in measured:
        _, tau = cal.model_hist(sc.alpha, sc.decay, sc.prompt_sigma, sc.tree_gain, r["steps"], r["topk"],
                                r["draft_tokens"])
        assert tau == pytest.approx(r["accept_length"], abs=0.08), r
    # the refit from the run directories gives the scenario's numbers back
    fit = cal.fit(cal.read_runs(RES / "runs"))
    assert fit["alpha"] == pytest.approx(sc.alpha, abs=0.005)
    assert fit["prompt_sigma"] == pytest.approx(sc.prompt_sigma, abs=0.005)
    assert fit["target_step_ms"] == pytest.approx(load_scenario("real-smol").target.step_ms, abs=0.01)


def test_doctor_on_the_real_trainers_output(tmp_path):
    """Healthy draft: no error; each fault made from it: flagged before launch."""
    doc = _load("doctor_faults")
    res = {r["case"]: r for r in doc.run(RES / "draft", RES / "target", tmp_path)}
    assert res["healthy"]["errors"] == [] and res["healthy"]["exit"] == 0
    assert "AUX_LAYERS" in res["aux_out_of_range"]["errors"]
    assert "AUX_LAYERS" in res["aux_top_level"]["warnings"]
    assert "VOCAB_MAP" in res["d2t_dropped"]["errors"]
    assert "VOCAB_MAP" in res["d2t_absolute"]["errors"]
    assert "ALGO_MISMATCH" in res["eagle_not_eagle3"]["errors"]
    assert "SPEC_ARGS" in res["steps1_draft16"]["warnings"]
    assert "VOCAB_MAP" in res["tied_head"]["errors"]  # the reduced-vocabulary head tied to the 49152-row embedding
