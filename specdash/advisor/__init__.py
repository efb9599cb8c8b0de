"""The advisor: acceptance and step-cost models fitted to measurements → ranked suggestions,
the tune search, and adaptive schedules.

Pure computation (numpy; scipy imported lazily inside the fits); no HTTP, no UI.  Inputs are
:class:`Measurement` objects (one per benchmarked setting or adaptive tier, e.g. from a run's
``summary.json``), optionally with the device timer's per-phase GPU time (:class:`PhaseTimes`)
and a no-speculation baseline.  Outputs are an :class:`Advice` (ranked :class:`Suggestion` s
with predicted tok/s and an uncertainty interval, a break-even acceptance and a plain verdict),
for ``specdash tune`` a :class:`TunePlanner` that picks the next setting to launch (or the chain
tiers to measure in one adaptive launch), and :func:`adaptive_schedule`, the best chain steps per
batch size as SGLang adaptive slots (:class:`AdaptiveSchedule`).

Definitions (as SGLang computes them: ``srt/managers/tokenizer_manager.py``,
``_calculate_spec_decoding_metrics``)
---------------------------------------------------------------------------------------------
* steps S = ``--speculative-num-steps``, topk K = ``--speculative-eagle-topk``, draft tokens
  N = ``--speculative-num-draft-tokens`` (the verified tokens per request and round, root
  included, so N - 1 draft nodes); a chain is K = 1 and then N = S + 1.
* accept length τ (tokens per request per verify round, **bonus included**) =
  completion_tokens / spec_verify_ct ∈ [1, S + 1]; accept rate (bonus excluded) = correct
  drafts / (verify rounds · (N - 1)).
* accepted-drafts histogram h[k] (``spec_correct_drafts_histogram``) = verify rounds that
  accepted exactly k drafts (bonus excluded), k = 0..S; SGLang grows the list only to the
  largest k seen + 1 (``Req.update_spec_correct_drafts_histogram``,
  ``srt/managers/schedule_batch.py``), so [0, 768] from a 3-step chain means no round accepted
  more than 1 draft.

Units: tok/s are output tokens per second summed over the requests in flight; round times and
costs are ms per verify round (one draft phase + one verify forward of the batch), per draft
token, or per draft forward (:mod:`.cost`); batch B = requests per round.

Modules: :mod:`.measurement` (settings, measurements, device-timer phases, the SGLang candidate
grid), :mod:`.acceptance` (acceptance model), :mod:`.cost` (non-negative round-time model),
:mod:`.advise` (prediction, ranking, break-even, verdict), :mod:`.planner` (the tune search
policy), :mod:`.schedule` (adaptive schedules).
"""

from __future__ import annotations

from specdash.advisor.acceptance import (
    D_MAX,
    EXTRAPOLATION_LOGIT_SD,
    P_MAX,
    PRIOR_BETA,
    PRIOR_D,
    SIGMA_FLOOR,
    TAU_SE,
    AcceptanceFit,
    PositionEstimate,
    chain_accept_length,
    expected_accept_by_position,
    expected_accept_length,
    extrapolate,
    fit_acceptance,
    leviathan_tokens_per_round,
    measured_depth,
    position_acceptance,
    position_counts,
    position_probs,
    tree_branching,
    tree_branchings,
)
from specdash.advisor.advise import N_DRAWS, Advice, BreakEven, Prediction, Suggestion, advise
from specdash.advisor.cost import (
    COST_NAMES,
    REL_NOISE,
    THETA_NAMES,
    TIMER_REL_NOISE,
    CostFit,
    cost_features,
    fit_cost,
    truncated_normal_draws,
)
from specdash.advisor.measurement import (
    DRAFT_GRID,
    STEPS_GRID,
    TOPK_GRID,
    Measurement,
    PhaseTimes,
    Settings,
    _effective,
    candidate_grid,
    chain,
    round_ms_from_decode_log,
    simulated_acceptance_candidates,
)
from specdash.advisor.planner import (
    TunePlanner,
    cheapest_matching_chain,
    deepening_chain,
    pooled_histogram,
    residual_correction,
    tier_measurable,
)
from specdash.advisor.schedule import AdaptiveSchedule, BatchPlan, SlotPlan, adaptive_schedule

__all__ = [
    "COST_NAMES", "DRAFT_GRID", "D_MAX", "EXTRAPOLATION_LOGIT_SD", "N_DRAWS", "PRIOR_BETA", "PRIOR_D", "P_MAX",
    "REL_NOISE", "SIGMA_FLOOR",
    "STEPS_GRID", "TAU_SE", "THETA_NAMES", "TIMER_REL_NOISE", "TOPK_GRID", "AcceptanceFit", "AdaptiveSchedule",
    "Advice", "BatchPlan", "BreakEven", "CostFit", "Measurement", "PhaseTimes", "PositionEstimate", "Prediction",
    "Settings", "SlotPlan", "Suggestion", "TunePlanner", "_effective", "adaptive_schedule", "advise",
    "candidate_grid", "chain", "chain_accept_length", "cheapest_matching_chain", "cost_features", "deepening_chain",
    "expected_accept_by_position", "expected_accept_length", "extrapolate", "fit_acceptance", "fit_cost",
    "leviathan_tokens_per_round", "measured_depth", "pooled_histogram",
    "position_acceptance", "position_counts", "position_probs", "residual_correction", "round_ms_from_decode_log",
    "simulated_acceptance_candidates", "tier_measurable", "tree_branching", "tree_branchings", "truncated_normal_draws",
]
