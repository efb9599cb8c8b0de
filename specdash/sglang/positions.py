"""Acceptance by draft position: the one computation behind every ``accept_by_position``.

``accept_by_position`` (a ``summary.json`` RUN field) is a list, index i = draft position i + 1
(1 … steps), of ``{"position", "reached", "accepted", "rate"}``: ``reached`` = verify rounds in
which the target checked a draft at that position, ``accepted`` = rounds in which it was
accepted, ``rate`` = accepted ÷ reached = P(position accepted | the round reached it)
(None where no round reached it).  The trainer's view: where along the chain the draft
loses the target.

Source, per SGLang release
--------------------------
No SGLang release from 0.5.10 to 0.5.23 returns per-position counts per request: its
``meta_info`` carries ``spec_verify_ct``, ``spec_num_correct_drafts`` /
``spec_num_proposed_drafts`` and the histogram (``managers/tokenizer_manager.py``,
``_calculate_spec_decoding_metrics``; 0.5.10: ``spec_accept_token_num`` /
``spec_accept_histogram``), so a run's positions come from the pooled verify-round histogram,
``accept_by_position_source`` = ``"histogram"``.  ``"server"`` marks positions a serving engine
counted itself — vLLM's ``vllm:spec_decode_num_accepted_tokens_per_pos`` counters, which
``vllm bench serve`` writes as ``spec_decode_per_position_acceptance_rates``
(:func:`from_unconditional`).

From the histogram
------------------
SGLang's ``spec_correct_drafts_histogram[k]`` = verify rounds that accepted exactly k drafts
(bonus token excluded; ``Req.update_spec_correct_drafts_histogram``,
``srt/managers/schedule_batch.py``).  Verification stops at the first rejected draft, so for a
chain (topk 1) position i is

    reached  by the rounds with k ≥ i − 1:   n_i = Σ_{k ≥ i−1} h[k]
    accepted by the rounds with k ≥ i:       s_i = Σ_{k ≥ i}   h[k]

Trees (topk > 1): SGLang counts the drafts accepted *along the accepted path*, whose length is
the tree depth reached, so k is a depth and the same sums hold per depth: ``reached`` = rounds
whose accepted path got to depth i − 1 (so some draft at depth i was checked), ``accepted`` =
rounds in which one of the drafted siblings at depth i matched the target.  The rate of a tree
is therefore P(some sibling at depth i accepted | depth i − 1 accepted) — higher than the chain
rate at the same depth, by the extra siblings; the positions run to min(steps,
draft tokens − 1), the deepest a tree of N − 1 nodes can be.

Worked example (a trained EAGLE3 draft on an H200, SmolLM2-135M target, steps 6 / topk 1 /
draft tokens 7, SGLang 0.5.14): the pooled histogram [981, 556, 336, 236, 179, 173, 430] over
2891 rounds gives rates 0.661, 0.709, 0.752, 0.768, 0.771, 0.713 at positions 1 … 6.

vLLM's per-position rate (``vllm/v1/spec_decode/metrics.py``, printed by ``vllm bench serve``
as "Per-position acceptance rate") divides by *all* drafts instead: accepted_i ÷ rounds =
P(position i accepted), the product of the conditional rates up to i; :func:`unconditional`
gives it for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["POSITION_SOURCES", "accept_by_position", "accept_fields", "from_unconditional", "position_counts",
           "unconditional"]

#: ``accept_by_position_source`` values (CONTRACTS: ``"server"`` | ``"histogram"``).
POSITION_SOURCES = ("server", "histogram")


def position_counts(hist: Sequence[int], max_position: int | None = None) -> list[tuple[int, int]]:
    """(accepted s_i, reached n_i) for positions i = 1 … ``max_position`` (default: len(hist) − 1,
    the deepest a round reached) from a correct-drafts histogram (module docstring).

    A position deeper than every round is (0, n) just past the deepest round (the rounds that
    accepted every draft they were given reached it) and (0, 0) beyond.

    Raises:
        ValueError: a negative or non-integer count, or ``max_position`` < 0.
    """
    h = _counts(hist)
    top = max(len(h) - 1, 0) if max_position is None else int(max_position)
    if top < 0:
        raise ValueError(f"max_position must be ≥ 0, got {max_position}")
    tail = [0] * (max(len(h), top + 1) + 1)  # tail[k] = Σ_{j ≥ k} h[j]
    for k in range(len(h) - 1, -1, -1):
        tail[k] = tail[k + 1] + h[k]
    return [(tail[i], tail[i - 1]) for i in range(1, top + 1)]


def accept_by_position(hist: Sequence[int] | None, steps: int | None = None,
                       draft_tokens: int | None = None) -> list[dict[str, Any]] | None:
    """The ``accept_by_position`` list of a pooled correct-drafts histogram (module docstring).

    ``steps`` / ``draft_tokens``: the effective ``speculative_num_steps`` / ``_num_draft_tokens``
    (read back from the server); the positions run to min(steps, draft_tokens − 1) — every
    position a round could reach, so a position that was reached and never accepted shows as
    rate 0 (a histogram [0, 24] of a 3-step chain: position 1 always accepted, position 2 never).
    A histogram that holds deeper rounds than that (settings misreported) extends the list to
    the deepest round instead of dropping them.  Without ``steps`` the histogram's own length
    decides (len − 1).

    Returns None without a histogram, or when it counts no verify round (no speculation).

    Raises:
        ValueError: a negative or non-integer count (a histogram SGLang did not write).
    """
    if hist is None:
        return None
    h = _counts(hist)
    if sum(h) <= 0:
        return None
    depth = _depth(h, steps, draft_tokens)
    return [{"position": i, "reached": n, "accepted": s, "rate": (s / n) if n else None}
            for i, (s, n) in enumerate(position_counts(h, depth), start=1)]


def accept_fields(hist: Sequence[int] | None, steps: int | None = None,
                  draft_tokens: int | None = None) -> dict[str, Any]:
    """``{"accept_by_position", "accept_by_position_source"}`` of a RUN from its pooled histogram
    (:func:`accept_by_position`); both None when there is none (no speculation)."""
    rows = accept_by_position(hist, steps, draft_tokens)
    return {"accept_by_position": rows, "accept_by_position_source": "histogram" if rows is not None else None}


def unconditional(rows: Sequence[dict[str, Any]] | None) -> list[float | None]:
    """P(position i accepted) per row = accepted_i ÷ rounds (the rounds that reached position 1):
    vLLM's "Per-position acceptance rate".  [] for None."""
    if not rows:
        return []
    rounds = rows[0].get("reached") or 0
    return [(r["accepted"] / rounds) if rounds and r.get("accepted") is not None else None for r in rows]


def from_unconditional(rates: Sequence[float], rounds: int | None = None) -> list[dict[str, Any]] | None:
    """``accept_by_position`` rows from unconditional per-position rates P_i (vLLM's
    ``spec_decode_per_position_acceptance_rates``: accepted at position i ÷ drafts; fractions, or
    percents when any exceeds 1) and, when known, the number of drafts (verify rounds).

    The conditional rate is P_i ÷ P_{i−1} (P_0 = 1); with ``rounds`` the counts are rebuilt as
    accepted_i = round(P_i · rounds), reached_i = accepted_{i−1}; without it they are None.
    Returns None for an empty list.

    Raises:
        ValueError: a rate that is negative, not a number, or above 100.
    """
    vals = []
    for i, r in enumerate(rates, start=1):
        if isinstance(r, bool) or not isinstance(r, (int, float)) or r != r or r < 0 or r > 100:
            raise ValueError(f"per-position acceptance rate {i} is {r!r}: want a fraction in [0, 1] "
                             "(or a percent in [0, 100])")
        vals.append(float(r))
    if not vals:
        return None
    if any(v > 1.0 for v in vals):
        vals = [v / 100.0 for v in vals]
    out, prev, prev_n = [], 1.0, rounds
    for i, p in enumerate(vals, start=1):
        acc = round(p * rounds) if rounds else None
        out.append({"position": i, "reached": prev_n, "accepted": acc,
                    "rate": (p / prev) if prev > 0 else None})
        prev, prev_n = p, acc
    return out


def _depth(h: list[int], steps: int | None, draft_tokens: int | None) -> int:
    deepest = max((k for k, c in enumerate(h) if c), default=0)
    if steps is None or int(steps) <= 0:
        return max(len(h) - 1, deepest)
    depth = int(steps)
    if draft_tokens is not None and int(draft_tokens) >= 2:
        depth = min(depth, int(draft_tokens) - 1)
    return max(depth, deepest)


def _counts(hist: Sequence[int]) -> list[int]:
    out = []
    for k, c in enumerate(hist):
        if isinstance(c, bool) or not isinstance(c, (int, float)) or c != c or c < 0 or int(c) != c:
            raise ValueError(f"accept histogram entry {k} is {c!r}: want a count of verify rounds (an integer ≥ 0)")
        out.append(int(c))
    return out
