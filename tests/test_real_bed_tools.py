"""benchmarks/real/advisor_check.py's candidate tree model (SGLang's tree by draft rank), on cases worked by hand."""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "advisor_check", Path(__file__).resolve().parents[1] / "benchmarks" / "real" / "advisor_check.py")
ac = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ac)


def test_chain_is_the_product_sum():
    p = [0.7, 0.6, 0.5]
    # topk 1: one node per depth, tau = 1 + p1 + p1 p2 + p1 p2 p3
    assert ac.rank_tree_accept_length(3, 1, 4, p, 0.5) == pytest.approx(1 + 0.7 + 0.42 + 0.21)
    # two draft tokens keep only the first node of the chain
    assert ac.rank_tree_accept_length(3, 1, 2, p, 0.5) == pytest.approx(1.7)


def test_one_step_tree_adds_the_second_rank():
    p, rho = [0.6], 0.4
    # steps 1, topk 2, 3 draft tokens: both children of the root kept; rank 2 holds (1 - p)(1 - rho)
    assert ac.rank_tree_accept_length(1, 2, 3, p, rho) == pytest.approx(1 + 0.6 + 0.4 * 0.6)


def test_kept_nodes_follow_path_score():
    p, rho = [0.6, 0.6], 0.5
    # steps 2, topk 2, 3 draft tokens: candidates by score are rank1 (0.6), rank1-rank1 (0.36), rank2 (0.2), ...
    # so the two kept are the top-1 chain of depth 2: tau = 1 + 0.6 + 0.36
    assert ac.rank_tree_accept_length(2, 2, 3, p, rho) == pytest.approx(1.96)
    # four draft tokens add the root's rank-2 child (0.2 > rank1-rank2's 0.6 * 0.2 = 0.12)
    assert ac.rank_tree_accept_length(2, 2, 4, p, rho) == pytest.approx(1.96 + 0.2)
