"""specdash.sglang.tree: SGLang's EAGLE tree node by node and its acceptance by draft rank."""

import numpy as np
import pytest

from specdash.sglang.tree import accept_length, kept_paths, rank_probs, reach_probs


def test_a_chain_keeps_the_top1_path_and_its_tau_is_the_product_sum():
    p = [0.7, 0.6, 0.5]
    assert kept_paths(3, 1, 4, p, 0.5) == [(1,), (1, 1), (1, 1, 1)]
    assert accept_length(3, 1, 4, p, 0.5) == pytest.approx(1 + 0.7 + 0.7 * 0.6 + 0.7 * 0.6 * 0.5)
    assert accept_length(3, 1, 2, p, 0.5) == pytest.approx(1.7)


def test_kept_nodes_follow_the_path_score():
    p, rho = [0.6, 0.6], 0.5
    # ρ_i = 1 − 0.5 · 0.6 = 0.7, π(2) = 0.4 · 0.3 = 0.12; candidates by score: (1,) 0.6, (1,1) 0.36, (2,) 0.12,
    # (1,2) 0.072, (2,1) 0.072, (2,2) 0.0144
    assert kept_paths(2, 2, 4, p, rho) == [(1,), (1, 1), (2,)]
    assert kept_paths(2, 2, 6, p, rho) == [(1,), (1, 1), (2,), (1, 2), (2, 1)]
    assert accept_length(2, 2, 4, p, rho) == pytest.approx(1 + 0.6 + 0.36 + 0.12)
    # the tree cannot hold more than topk + (steps - 1) topk^2 candidates
    assert len(kept_paths(2, 2, 64, p, rho)) == 2 + 4


def test_the_frontier_is_the_topk_best_children_not_the_top1_subtree():
    # depth 2 scores: (1,1) 0.45, (2,1) 0.1125, (1,2) 0.0225, (2,2) 0.0056 -- all four are candidates, but
    # only the two best are expanded, so no depth-3 node lies under (1,2) or (2,2)
    p, rho = [0.5, 0.9, 0.9], 0.5
    paths = kept_paths(3, 2, 64, p, rho)
    assert {x[:2] for x in paths if len(x) == 3} == {(1, 1), (2, 1)}
    assert (2, 2) in paths and len(paths) == 2 + 4 + 4


def test_rank_probabilities_sum_below_one():
    pi = rank_probs(0.6, 0.5, 8)
    assert pi[0] == 0.6 and pi[1] == pytest.approx(0.4 * 0.3) and pi[2] == pytest.approx(0.4 * 0.3 * 0.7)
    assert sum(pi) < 1.0


def test_a_depth_the_top1_never_reaches_is_not_recovered_by_a_wide_tree():
    """ρ_i → 1 as p_i → 0: where the draft's first guess is never right (a capped or random draft), its
    2nd…8th guesses are worth next to nothing, so 2/8/16 accepts what the chain 2/1/3 does."""
    p = [0.99, 0.0]
    assert accept_length(2, 8, 16, p, 0.6) == pytest.approx(accept_length(2, 1, 3, p, 0.6), abs=0.01)
    assert sum(rank_probs(1e-9, 0.6, 16)) < 1e-4  # ρ_i is kept below 1 − RHO_EPS


def test_reach_probs_vectorised_over_draws_equals_one_at_a_time():
    rng = np.random.default_rng(1)
    p = rng.uniform(0.5, 0.9, size=(5, 6))
    rho = rng.uniform(0.3, 0.7, size=5)
    paths = kept_paths(6, 4, 24, list(p.mean(axis=0)), float(rho.mean()))
    q = reach_probs(paths, p, rho)
    assert q.shape == (5, 6)
    for i in range(5):
        one = reach_probs(paths, p[i], rho[i])
        assert one == pytest.approx(q[i])
        # Q_j from the paths directly
        for j in range(1, 7):
            direct = sum(np.prod(rank_probs_path(x, p[i], rho[i])) for x in paths if len(x) == j)
            assert q[i, j - 1] == pytest.approx(direct)
    assert np.all(np.diff(q, axis=1) <= 1e-12)  # reaching depth j+1 implies depth j


def rank_probs_path(path, p, rho):
    return [rank_probs(p[d], rho, max(path))[r - 1] for d, r in enumerate(path)]
