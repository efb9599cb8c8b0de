"""The simulator's model, flag handling and wiring analysis (no server process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdash.checkpoint.reader import read_draft, read_model_dir
from specdash.sglang.capture import default_aux_ids
from specdash.sim import args as A
from specdash.sim.app import SamplingError, validate_sampling
from specdash.sim.expected import expected
from specdash.sim.scenario import (
    ScenarioError,
    expected_accepted,
    load_scenario,
    scenario_from_dict,
    scenario_names,
    shape_success_probs,
    success_probs,
    tree_branching,
)
from specdash.sim.testing import SEEDS_FIVE, make_draft, make_target
from specdash.sim.text import count_tokens, detect_category, output_id
from specdash.sim.wiring import analyse

KIMI = "--model-path sim:kimi-k2.5-int4 --tp-size 8 "
KIMI_SPEC = KIMI + "--speculative-algorithm EAGLE3 --speculative-draft-model-path sim:kimi-k2.5-eagle3 "


@pytest.fixture
def tiny(tmp_path):
    return make_target(tmp_path / "target")


def _analyse(algo: str, draft_path: Path | None, target: Path, version: str = "0.5.23"):
    draft = read_draft(draft_path) if draft_path else None
    return analyse(algo, draft, read_model_dir(target), version, draft_path_given=draft_path is not None)


# -- acceptance model --------------------------------------------------------------------------------

def test_tree_branching_spreads_the_node_budget():
    assert tree_branching(3, 1, 4) == [1, 1, 1]
    assert tree_branching(3, 4, 16) == [4, 4, 4]
    assert tree_branching(5, 4, 8) == [3, 1, 1, 1, 1]
    assert tree_branching(6, 10, 4) == [1, 1, 1]  # depth limited by the node budget


def test_chain_acceptance_formula():
    q = success_probs(0.6, 0.5, [1, 1, 1], 0.5)
    assert q == pytest.approx([0.6, 0.3, 0.15])
    assert expected_accepted(q) == pytest.approx(0.6 + 0.18 + 0.027)
    # a wider tree never accepts less
    assert expected_accepted(success_probs(0.6, 0.5, [4, 4, 4], 0.5)) > expected_accepted(q)


def test_rank_tree_model_is_sglangs_kept_tree():
    """tree_model "rank": the conditionals the engine draws from multiply to the kept tree's reach (SGLang's
    tree node by node, specdash.sglang.tree), so τ is the tree's; a chain is the same in both families; a
    tree shallower than its steps reads 0 below its deepest kept node."""
    from specdash.sglang.tree import accept_length, kept_paths

    rank = load_scenario("real-smol").acceptance
    gain = scenario_from_dict({"acceptance": {"alpha": rank.alpha, "decay": rank.decay}}).acceptance
    assert rank.tree_model == "rank" and gain.tree_model == "gain"
    for s, k, n in ((5, 4, 16), (10, 8, 64), (3, 2, 6), (6, 1, 7)):
        q = shape_success_probs(rank, 0.7, s, k, n)
        p = [0.7 * rank.decay**i for i in range(s)]
        assert len(q) == len(tree_branching(s, k, n))
        assert 1 + expected_accepted(q) == pytest.approx(accept_length(s, k, n, p, rank.rank_decay), rel=1e-9)
    assert shape_success_probs(rank, 0.7, 6, 1, 7) == pytest.approx(shape_success_probs(gain, 0.7, 6, 1, 7))
    # 2 steps × topk 8 keep 7 nodes: a poor draft (p 0.2) keeps them all at depth 1 — the kept tree is 1 deep
    assert max(len(x) for x in kept_paths(2, 8, 8, [0.2, 0.2], rank.rank_decay)) == 1
    q = shape_success_probs(rank, 0.2, 2, 8, 8)
    assert len(q) == 2 and q[1] == 0.0 and q[0] > 0.2
    with pytest.raises(ScenarioError, match="tree_model"):
        scenario_from_dict({"acceptance": {"tree_model": "ranked"}})
    with pytest.raises(ScenarioError, match="rank_decay"):
        scenario_from_dict({"acceptance": {"tree_model": "rank", "rank_decay": 1.0}})


def test_bundled_scenarios_load_and_reject_unknown_keys(tmp_path):
    assert {"healthy", "kimi-k25", "high-concurrency", "tiny-h200"} <= set(scenario_names())
    for name in scenario_names():
        sc = load_scenario(name)
        assert sc.target.step_ms > 0 and sc.path and Path(sc.path).read_text().startswith("#")
    with pytest.raises(ScenarioError, match="unknown key"):
        scenario_from_dict({"target": {"stepms": 3}})
    with pytest.raises(ScenarioError, match="unknown scenario"):
        load_scenario("nope")


def test_kimi_scenario_reproduces_the_seeds_analytically():
    """The calibration in kimi-k25.toml's header, recomputed (pooled over the seeds' five prompts)."""
    def run(flags):
        return expected(flags, "kimi-k25", 1, prompts=SEEDS_FIVE, seed=0, prompt_tokens=20)

    base = run(KIMI)
    assert base["output_tok_s_per_request"] == pytest.approx(90.0, rel=0.02)
    s1 = run(KIMI_SPEC + "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2")
    assert s1["accept_length_per_request"] == pytest.approx(1.6, rel=0.02)
    assert s1["output_tok_s_per_request"] == pytest.approx(56.8, rel=0.02)
    s15 = run(KIMI_SPEC + "--speculative-num-steps 15 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16")
    assert s15["accept_length_per_request"] == pytest.approx(1.9, rel=0.02)
    assert s15["output_tok_s_per_request"] == pytest.approx(46.7, rel=0.02)
    tree = run(KIMI_SPEC + "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 16")
    assert tree["accept_length_per_request"] == pytest.approx(2.1, rel=0.02)
    assert tree["output_tok_s_per_request"] == pytest.approx(56.7, rel=0.03)
    # the seeds' "12-16 %" is accept length / draft tokens; SGLang's own rate is (tau - 1) / 15
    assert 0.12 <= tree["accept_length"] / 16 <= 0.16
    assert tree["accept_rate"] == pytest.approx((tree["accept_length"] - 1) / 15, rel=1e-6)


def test_healthy_speedup_shrinks_with_concurrency():
    chain = "--model-path sim:llama-3.1-8b --speculative-algorithm EAGLE3 --speculative-num-steps 3 " \
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    s1 = expected(chain, "healthy", 1)["speedup_vs_baseline"]
    s32 = expected(chain, "healthy", 32)["speedup_vs_baseline"]
    assert 2.0 <= s1 <= 3.0
    assert s32 < s1
    hc = expected(chain, "high-concurrency", 48)["speedup_vs_baseline"]
    assert hc < 1.05


def test_expected_applies_sglang_adjustments():
    e = expected("--model-path sim:llama-3.1-8b --speculative-algorithm EAGLE3 --speculative-num-steps 1 "
                 "--speculative-eagle-topk 1 --speculative-num-draft-tokens 16", "healthy")
    assert e["effective"]["speculative_num_draft_tokens"] == 2
    assert e["effective"]["max_running_requests"] == 48
    # the Llama auto choice (5, 4, 8)
    auto = expected({"speculative_algorithm": "EAGLE3"}, "healthy")
    assert (auto["effective"]["speculative_num_steps"], auto["effective"]["speculative_eagle_topk"],
            auto["effective"]["speculative_num_draft_tokens"]) == (5, 4, 8)


def test_tiny_h200_memory_reproduces_the_golden_kv_pools():
    """139.13 GB available x 0.5 - weights = the recorded pools (8,047,633 / 9,073,044 tokens)."""
    sc = load_scenario("tiny-h200")
    target = read_model_dir("sim:tiny-llama")
    draft = read_model_dir("sim:tiny-llama-eagle3")
    bpt = A.kv_bytes_per_token(target.cfg, 1)
    dbpt = A.kv_bytes_per_token(draft.cfg, 1, layers=1)
    assert (bpt, dbpt) == (8192, 1024)
    common = dict(gpu_total_mib=sc.gpu.memory_mib, context_reserve_mib=sc.gpu.context_reserve_mib,
                  graph_reserve_mib=sc.gpu.graph_reserve_mib, fraction=0.5, tp=1, target_weights_gib_total=0.31)
    spec = A.compute_memory(**common, draft_weights_gib_total=0.15, bytes_per_token_target=bpt,
                            bytes_per_token_draft=dbpt)
    base = A.compute_memory(**common, draft_weights_gib_total=0.0, bytes_per_token_target=bpt,
                            bytes_per_token_draft=0)
    assert spec.avail_start_gib == pytest.approx(139.13, abs=0.01)
    assert spec.max_total_num_tokens == pytest.approx(8_047_633, rel=0.002)
    assert base.max_total_num_tokens == pytest.approx(9_073_044, rel=0.002)


# -- flags ------------------------------------------------------------------------------------------------

def test_argparse_abbreviations_per_version():
    with pytest.raises(A.UsageError, match=r"^ambiguous option: --cuda-graph-max-bs could match "
                                           r"--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill$"):
        A.check_flags(["--model-path", "m", "--cuda-graph-max-bs", "8"], "0.5.23")
    old = A.check_flags(["--model-path", "m", "--cuda-graph-max-bs", "8"], "0.5.14")
    assert old.flags["--cuda-graph-max-bs-decode"] == "8" and old.deprecations
    with pytest.raises(A.UsageError, match="unrecognized arguments: --cuda-graph-max-bs-decode 8"):
        A.check_flags(["--model-path", "m", "--cuda-graph-max-bs-decode", "8"], "0.5.10")
    ok = A.check_flags(["--model", "m", "--mem-frac", "0.7", "--my-own-flag", "x"], "0.5.23")
    assert ok.flags["--model-path"] == "m" and ok.flags["--mem-fraction-static"] == "0.7"
    assert ok.unknown == ["--my-own-flag"]


def test_split_argv_and_server_args_line():
    rest, opts = A.split_argv(["--model-path", "m", "--sim-seed", "3", "--time-scale=4", "--expected",
                               "--sim-sglang-version", "0.5.14"])
    assert rest == ["--model-path", "m"] and opts.seed == 3 and opts.time_scale == 4.0 and opts.expected
    assert opts.version == "0.5.14"
    line = A.server_args_line({"model_path": "m", "port": 1, "x": None, "cuda_graph_config": {
        "decode": {"backend": "full", "max_bs": 8}, "prefill": {"backend": "disabled", "max_bs": 16}}})
    assert line == ("server_args=ServerArgs(model_path='m', port=1, x=None, cuda_graph_config=CudaGraphConfig("
                    "decode=PhaseConfig(backend='full', max_bs=8), prefill=PhaseConfig(backend='disabled', "
                    "max_bs=16)))")


def test_sampling_params_are_strict():
    with pytest.raises(SamplingError) as exc:
        validate_sampling({"max_new_tokens": 4, "max_tokens": 4})
    assert exc.value.body["error"].startswith("unknown field `max_tokens`, expected one of `max_new_tokens`, ")
    with pytest.raises(SamplingError):
        validate_sampling({"temperature": -1})
    assert validate_sampling({"temperature": 0, "ignore_eos": True, "max_new_tokens": 8}) == {
        "temperature": 0, "ignore_eos": True, "max_new_tokens": 8}


def test_text_helpers():
    assert count_tokens("The quick brown fox jumps over the lazy dog. The server") == 17  # golden: 17
    assert detect_category("Write a Python function that implements merge sort") == "coding"
    assert detect_category("Describe the process of photosynthesis step by step.") == "general"
    assert output_id(8999, 1) == 1000  # ids cycle in the hot range [1000, 9000)


# -- wiring -----------------------------------------------------------------------------------------------

def test_healthy_draft_is_served_as_trained(tmp_path, tiny):
    w = _analyse("EAGLE3", make_draft(tmp_path / "d"), tiny)
    assert w.served_as_trained and w.alpha_override is None and w.alpha_factor == 1.0 and w.fatal is None


def test_eagle3_head_with_eagle_algorithm_collapses(tmp_path, tiny):
    w = _analyse("EAGLE", make_draft(tmp_path / "d"), tiny)
    assert not w.served_as_trained and w.alpha_override == 0.0 and "EAGLE3 head" in w.reason


def test_layers0_keys_dropped_before_0_5_12(tmp_path, tiny):
    d = make_draft(tmp_path / "d", prefix="layers.0")
    old = _analyse("EAGLE3", d, tiny, "0.5.10")
    assert not old.served_as_trained and old.alpha_override is not None and old.alpha_override < 0.1
    assert "layers.0" in old.reason
    assert _analyse("EAGLE3", d, tiny, "0.5.14").served_as_trained


@pytest.mark.parametrize("kwargs, words", [
    ({"lm_head": False}, "lm_head"),
    ({"d2t": None}, "without a d2t"),
    ({"d2t": "absolute"}, "absolute target ids"),
])
def test_vocabulary_faults_collapse(tmp_path, tiny, kwargs, words):
    w = _analyse("EAGLE3", make_draft(tmp_path / "d", **kwargs), tiny)
    assert not w.served_as_trained and w.alpha_override is not None and words in w.reason


def test_top_level_aux_ids_degrade_only_when_they_differ(tmp_path, tiny):
    dflt = default_aux_ids(8)
    assert dflt == [1, 3, 4]
    same = _analyse("EAGLE3", make_draft(tmp_path / "a", extra_cfg={"eagle_aux_hidden_state_layer_ids": dflt}), tiny)
    assert same.served_as_trained
    other = _analyse("EAGLE3", make_draft(tmp_path / "b", extra_cfg={"eagle_aux_hidden_state_layer_ids": [2, 4, 6]}),
                     tiny)
    assert not other.served_as_trained and other.alpha_factor == pytest.approx(0.3)
    nested = _analyse("EAGLE3", make_draft(tmp_path / "c", extra_cfg={
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 4, 6]}}), tiny)
    assert nested.served_as_trained


def test_start_up_crashes(tmp_path, tiny):
    eagle2 = make_draft(tmp_path / "e2", fc_mult=2, arch="LlamaForCausalLMEagle", draft_vocab=None, d2t=None)
    w = _analyse("EAGLE3", eagle2, tiny)
    assert w.fatal and w.fatal.exception == "RuntimeError" and "shapes cannot be multiplied" in w.fatal.message
    qwen = make_target(tmp_path / "qwen", arch="Qwen2ForCausalLM")
    w = _analyse("EAGLE3", None, qwen)
    assert w.fatal and w.fatal.exception == "AttributeError" and "set_embed" in w.fatal.message
    kimi = analyse("EAGLE", None, read_model_dir("sim:kimi-k2.5-int4"), "0.5.23", draft_path_given=False)
    assert kimi.fatal is None  # DeepseekV3 bundles MTP weights: the target is its own draft


def test_log_prefix_only_with_tensor_parallelism():
    import io
    import re

    from specdash.sim.logfmt import LogWriter

    one, eight = io.StringIO(), io.StringIO()
    LogWriter("info", one, tp_size=1).scheduler("Decode batch, x")
    LogWriter("info", eight, tp_size=8).scheduler("Decode batch, x")
    LogWriter("warning", eight, tp_size=8).scheduler("dropped below the level")
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] Decode batch, x\n", one.getvalue())
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] Decode batch, x\n", eight.getvalue())
