"""SGLang's EAGLE draft tree, node by node, and the acceptance of its paths by draft rank.

How SGLang builds the tree (0.5.14, ``python/sglang/srt/speculative/``: ``select_top_k_tokens`` in
``spec_utils.py``, ``organize_draft_results`` in ``eagle_utils.py``; EAGLE-2, Li et al. 2024):

* the first draft step proposes the ``topk`` best children of the root; they are the first frontier;
* each of the next ``steps − 1`` steps expands every frontier node into its ``topk`` best children, scores
  every one of the ``topk²`` children by its path score (the product of the draft probabilities along
  its path) and keeps the ``topk`` best of them as the next frontier;
* every child scored on the way is a candidate (``topk + (steps − 1)·topk²`` in all); the
  ``draft_tokens − 1`` candidates of highest path score are kept (``torch.topk(score_list,
  num_draft_token − 1)``) and verified with the root.  A child never outscores its parent, so the kept
  set is a tree.

Which nodes get kept depends only on the draft's scores; which are accepted, on the target.  The model
here (an assumption, stated): at depth ``i`` the target's token is the draft's rank-``r`` child of the
accepted node with probability

    π_i(1) = p_i,        π_i(r) = (1 − p_i) · (1 − ρ_i) · ρ_i^(r − 2)   for r ≥ 2,   ρ_i = 1 − (1 − ρ) · p_i,

``p_i`` the chain's acceptance at position ``i`` (what a top-k 1 launch measures), ``ρ`` ∈ (0, 1) how
fast the value of lower-ranked candidates falls for a draft that is always right (``ρ_i`` = ρ at
``p_i`` = 1); and the draft's scores are taken as ``π`` (a calibrated draft), so the kept set follows
``π`` too.  The rank decay slows as the top-1 acceptance falls: a depth where the draft's first guess
is never right is one where it knows nothing, so its 2nd…k-th guesses are worth as little (ρ_i → 1,
π_i(r ≥ 2) → 0) — with one ρ for every depth, ranks 2…k would share all of the top-1's missing mass and
a wide tree would "recover" positions a capped or a random draft never reaches.  Greedy verification accepts one path: the probability that
the accepted length reaches depth ``j`` is the sum, over the kept nodes at depth ``j``, of the product
of ``π`` along their paths, and the accept length (bonus token included) is ``τ = 1 + Σ_j Q_j``.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

#: ρ is kept inside (RHO_EPS, 1 − RHO_EPS) so that its logarithms stay finite.
RHO_EPS = 1e-6


def depth_rank_decay(p, rho):
    """``ρ_i = 1 − (1 − ρ) · p_i`` (module docstring), kept inside (RHO_EPS, 1 − RHO_EPS); scalars or arrays
    that broadcast."""
    rho = np.clip(np.asarray(rho, dtype=float), RHO_EPS, 1 - RHO_EPS)
    out = np.clip(1.0 - (1.0 - rho) * np.clip(np.asarray(p, dtype=float), 0.0, 1.0), RHO_EPS, 1 - RHO_EPS)
    return float(out) if out.ndim == 0 else out


def rank_probs(p: float, rho: float, topk: int) -> list[float]:
    """``[π(1), …, π(topk)]`` at one depth of top-1 acceptance ``p`` (module docstring)."""
    r_i = depth_rank_decay(p, rho)
    return [p if r == 1 else (1 - p) * (1 - r_i) * r_i ** (r - 2) for r in range(1, max(1, topk) + 1)]


def candidate_order(steps: int, topk: int, p: Sequence[float], rho: float) -> list[tuple[int, ...]]:
    """Every candidate SGLang scores for (``steps``, ``topk``), in the order it keeps them: the kept set of
    ``draft_tokens`` N is the first N − 1 (``torch.topk`` of the path scores; ties by position, earlier
    first).  One pass serves every draft-token count of a (steps, topk) pair.

    Raises:
        ValueError: ``p`` shorter than ``steps``.
    """
    steps, topk = int(steps), max(1, int(topk))
    if steps < 1:
        return []
    if len(p) < steps:
        raise ValueError(f"kept_paths: {len(p)} acceptance values for {steps} steps; give one per depth")
    cands: list[tuple[float, tuple[int, ...]]] = []
    frontier: list[tuple[float, tuple[int, ...]]] = [(1.0, ())]
    for depth in range(steps):
        pi = rank_probs(float(p[depth]), rho, topk)
        children = [(score * pi[r], path + (r + 1,)) for score, path in frontier for r in range(topk)]
        cands.extend(children)
        # the next frontier: the topk best children by path score (ties: the earlier child, as torch.topk)
        frontier = heapq.nlargest(topk, children, key=lambda c: c[0])
    order = sorted(range(len(cands)), key=lambda i: (-cands[i][0], i))
    return [cands[i][1] for i in order]


def kept_paths(steps: int, topk: int, draft_tokens: int, p: Sequence[float], rho: float) -> list[tuple[int, ...]]:
    """The nodes SGLang keeps for (``steps``, ``topk``, ``draft_tokens``), each as the draft ranks along its
    path from the root (``(1, 1, 2)``: the top-1 child's top-1 child's second child), in order of path score.

    Args:
        p: top-1 acceptance by depth, at least ``steps`` entries (their scores decide the selection).
        rho: the rank decay of the module docstring.

    Returns:
        At most ``draft_tokens − 1`` paths (fewer when the tree holds fewer candidates); ``[]`` for
        ``steps < 1`` or ``draft_tokens < 2``.

    Raises:
        ValueError: ``p`` shorter than ``steps``.
    """
    n = int(draft_tokens) - 1
    if int(steps) < 1 or n < 1:
        return []
    return candidate_order(steps, topk, p, rho)[:n]


@lru_cache(maxsize=4096)
def _path_matrices(paths: tuple[tuple[int, ...], ...], depth: int) -> tuple[np.ndarray, ...]:
    """Per path and depth (P × D): indicator of a rank-1 step, of a lower-rank step, and ``r − 2`` at the
    lower-rank steps; and each path's depth (P,)."""
    top = np.zeros((len(paths), depth))
    low = np.zeros((len(paths), depth))
    s = np.zeros((len(paths), depth))
    d = np.zeros(len(paths), dtype=int)
    for i, path in enumerate(paths):
        d[i] = len(path)
        for j, r in enumerate(path):
            if r == 1:
                top[i, j] = 1.0
            else:
                low[i, j] = 1.0
                s[i, j] = r - 2
    return top, low, s, d


def reach_probs(paths: Sequence[tuple[int, ...]], p: np.ndarray, rho: np.ndarray | float) -> np.ndarray:
    """``Q_j`` = P(accepted length ≥ ``j``), ``j`` = 1 … D, for a fixed kept tree, vectorised over draws.

    Args:
        paths: the kept nodes (:func:`kept_paths`), D = the deepest of them.
        p: top-1 acceptance by depth, shape ``(…, ≥ D)`` (e.g. posterior draws × depth).
        rho: rank decay, scalar or shape ``(…)``.

    Returns:
        Shape ``(…, D)``; ``τ = 1 + Q.sum(-1)``, the conditional acceptance of position ``j`` is
        ``Q_j / Q_{j−1}`` (``Q_0 = 1``).
    """
    p = np.asarray(p, dtype=float)
    if not paths:
        return np.zeros(p.shape[:-1] + (0,))
    depth = max(len(x) for x in paths)
    top, low, s, d = _path_matrices(tuple(paths), depth)
    pp = np.clip(p[..., :depth], 1e-12, 1 - 1e-12)
    r_i = depth_rank_decay(pp, np.asarray(rho, dtype=float)[..., None])  # (…, D)
    logp = np.log(pp) @ top.T + (np.log1p(-pp) + np.log1p(-r_i)) @ low.T + np.log(r_i) @ s.T  # (…, P)
    prob = np.exp(logp)
    onehot = (d[:, None] == np.arange(1, depth + 1)[None, :]).astype(float)  # (P, D)
    return prob @ onehot


def accept_length(steps: int, topk: int, draft_tokens: int, p: Sequence[float], rho: float) -> float:
    """τ of (``steps``, ``topk``, ``draft_tokens``) under the rank model (module docstring), bonus included."""
    paths = kept_paths(steps, topk, draft_tokens, p, rho)
    return 1.0 + float(reach_probs(paths, np.asarray(p, dtype=float), rho).sum()) if paths else 1.0
