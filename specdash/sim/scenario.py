"""Simulator scenarios: the timing and acceptance model, read from TOML.

A scenario says how fast the simulated GPU(s) run the target and the draft, and how
often draft tokens are accepted.  It is a small TOML file in ``specdash/sim/scenarios/``
(loaded by name) or anywhere on disk (loaded by path); every file starts with a comment
saying where its numbers come from.  All times are **model milliseconds** (what the GPU
would take); the engine sleeps ``ms / time_scale`` of wall clock.

Timing model (per scheduler iteration, calibrated to published measurements):

* target forward over ``n`` tokens (decode: ``n`` = batch; verify: ``n`` = batch × draft tokens)::

      t_fwd(n) = step_ms · (1 + per_token_growth · (n − 1)) + max(0, n − knee_tokens) · compute_ms_per_token

  i.e. memory-bound with a mild per-token growth, then compute-bound past the knee
  (a roofline-ish shape).  ``eager_factor`` multiplies it when the batch exceeds the
  largest captured CUDA-graph size.
* draft step over ``n`` tokens (batch × topk): ``t_draft(n) = draft.step_ms · (1 + draft.per_token_growth · (n − 1))``;
  with ``draft.topk_growth`` set, batch and tree width grow it apart:
  ``t_draft(b, k) = draft.step_ms · (1 + per_token_growth · (b − 1)) · (1 + topk_growth · (k − 1))`` (a tree
  step's top-k selection and tree bookkeeping cost more than another request's token; the H200 testbed).
* one decode round without speculation: ``t_fwd(b) + nospec_overhead_ms + target.per_request_ms · b``; it
  yields one token per request.
* one speculative round: ``steps · t_draft(b, topk) + t_fwd(b · num_draft_tokens) +
  round_overhead_ms + (target.per_request_ms + per_request_overhead_ms) · b``; it yields ``1 + accepted``
  tokens per request.  ``target.per_request_ms`` is host time per running request in every iteration (the
  scheduler's, on a target small enough to be launch-bound: the real SmolLM2 bed), 0 by default.
* a prefill batch: ``prefill.base_ms + prefill.ms_per_token · uncached tokens (+ spec_extra_ms with speculation)``;
  it yields the first token of every request in it.
* every duration is multiplied by a seeded lognormal jitter with mean 1 (``jitter.sigma``).

Acceptance model (chain, topk = 1): draft position ``i`` (1-based) is accepted with
probability ``p_i = α · d^(i−1)``, conditional on positions ``1..i−1`` being accepted; the
chain stops at the first rejection; at most ``steps`` drafts are accepted.  ``α`` is the
scenario's ``acceptance.alpha`` times the request's factor (prompt category × seeded
per-prompt lognormal × temperature × wiring), capped at 1; ``d`` is ``acceptance.decay``.

Tree (topk > 1): the ``num_draft_tokens − 1`` tree nodes are spread over the depths
``1..min(steps, N−1)`` — one node per depth for the main path, the rest added as sibling
candidates from the shallowest depth down, at most ``topk`` candidates per depth
(:func:`tree_branching`; shallow nodes carry the highest cumulative scores, which is why
SGLang's tree selection keeps them first).  With ``b_i`` candidates at depth ``i`` the
true token is among them with probability::

      q_i = 1 − (1 − p_i)^(b_i^g)

where ``g = acceptance.tree_gain`` ∈ [0, 1] says how much the 2nd…k-th draft candidates are
worth (g = 1: independent tries; g = 0: worthless).  A chain is the special case ``b_i = 1``.
Expected accepted drafts per request-round: ``E[A] = Σ_k Π_{i≤k} q_i``; accept length
``τ = 1 + E[A]`` (bonus token included, as SGLang's ``spec_accept_length``).

``acceptance.tree_model = "rank"`` replaces that tree model by SGLang's tree node by node
(:mod:`specdash.sglang.tree`): the target's token is the draft's rank-``r`` child with probability
``p_i`` for ``r = 1`` and ``(1 − p_i)(1 − ρ_i)ρ_i^(r−2)`` below it, ``ρ_i = 1 − (1 − ρ)·p_i``
(``ρ = acceptance.rank_decay``), the
``num_draft_tokens − 1`` candidates of highest path score are kept as SGLang's ``organize_draft_results``
keeps them, and ``Q_j`` = P(accepted length ≥ j) sums the kept paths of depth ``j``; the engine draws
the round's accepted count from the conditionals ``q_j = Q_j / Q_{j−1}`` (:func:`shape_success_probs`),
so its histogram has exactly the model's ``P(A = k) = Q_k − Q_{k+1}``.  Chains are the same in both.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"


class ScenarioError(ValueError):
    """A scenario cannot be found or read (unknown name, bad TOML, unknown key)."""


@dataclass
class GpuSpec:
    """The simulated device: ``name``, ``memory_mib`` (per device), ``count`` on the host,
    ``context_reserve_mib`` (CUDA context etc., never available to SGLang) and
    ``graph_reserve_mib`` (CUDA graphs + activations, outside ``--mem-fraction-static``)."""

    name: str = "NVIDIA H100 80GB HBM3"
    memory_mib: int = 81559
    count: int = 8
    context_reserve_mib: float = 1300.0
    graph_reserve_mib: float = 600.0


@dataclass
class TargetSpec:
    """Target forward timing (ms) and optional size overrides.

    ``weights_gib``: total target weights (all ranks) when the model directory's headers
    should not be trusted (virtual models are coarse); ``kv_bytes_per_token``: KV bytes per
    token for the whole model (all layers, before tensor parallelism), e.g. for MLA models.
    """

    step_ms: float = 7.0
    per_token_growth: float = 0.004
    knee_tokens: int = 256
    compute_ms_per_token: float = 0.027
    nospec_overhead_ms: float = 0.0
    #: host ms per running request in every decode iteration, speculative or not (module docstring)
    per_request_ms: float = 0.0
    eager_factor: float = 1.25
    weights_gib: float | None = None
    kv_bytes_per_token: float | None = None


@dataclass
class PrefillSpec:
    """Prefill timing (ms): ``base_ms + ms_per_token × uncached tokens``, plus
    ``spec_extra_ms`` (the draft's extend pass) with speculation."""

    base_ms: float = 8.0
    ms_per_token: float = 0.06
    spec_extra_ms: float = 1.0


@dataclass
class DraftSpec:
    """Draft timing (ms): one draft step at 1 token, its growth per extra token, and the
    fixed costs of a speculative round (draft extend, tree build, sampling, sync)."""

    step_ms: float = 0.35
    per_token_growth: float = 0.02
    round_overhead_ms: float = 0.6
    per_request_overhead_ms: float = 0.01
    weights_gib: float | None = None
    #: growth of a draft step per extra top-k candidate, apart from the batch's (None: one growth,
    #: ``per_token_growth``, over batch × topk tokens)
    topk_growth: float | None = None


@dataclass
class DeviceSpec:
    """GPU-busy time per forward phase, for ``SGLANG_ENABLE_METRICS_DEVICE_TIMER`` (SGLang's
    ``sglang:forward_execution_seconds_total{category}`` and the ``fwd occupancy`` log field).

    The round times above are wall clock (CPU launch overhead included); the device timer
    measures only the GPU work, a fraction of it.  Per speculative round: ``eagle_draft`` =
    ``(steps − 1) · t_draft(b) · draft_fraction`` (the first draft token comes from the previous
    draft extend, so steps 1 runs no draft forward), ``target_verify`` =
    ``t_fwd(b · draft_tokens) · verify_fraction``, ``eagle_draft_extend`` =
    ``round_overhead_ms · draft_extend_fraction · (1 + draft_extend_growth · (b − 1))``;
    ``extend`` (prefill) = ``prefill_ms · prefill_fraction``; plain decode =
    ``t_fwd(b) · verify_fraction``.  Defaults: the golden 0.5.14 adaptive recording on the tiny
    H200 models (c1: 0.199 / 0.609 / 0.124 ms per round; c16 and c32 scale as modelled).
    """

    verify_fraction: float = 0.464
    draft_fraction: float = 0.199
    draft_extend_fraction: float = 0.188
    draft_extend_growth: float = 0.01
    prefill_fraction: float = 0.5


@dataclass
class AcceptanceSpec:
    """Acceptance parameters (see the module docstring).

    ``categories``: α multiplier per prompt category (``coding``, ``math``, ``writing``,
    ``general``; detected from the prompt text); ``prompt_sigma``: σ of the seeded
    per-prompt lognormal factor (mean 1); ``temperature_penalty``: α × (1 − penalty ×
    min(T, 1)); ``long_context_factor``: α multiplier for tokens past the draft's
    ``max_position_embeddings`` (sglang#6783); ``misaligned_aux_factor``: α multiplier
    when the draft's aux layer ids are only at the top level of its config and differ from
    the target's defaults; ``eagle2_factor``: α of an EAGLE-2 head relative to the
    scenario's (EAGLE3) α; ``random_draft_alpha``: α of a draft whose trained weights were
    dropped (a random head still guesses right now and then); ``ngram_alpha``: NGRAM's α.
    """

    alpha: float = 0.8
    decay: float = 0.94
    tree_gain: float = 0.5
    #: how a tree's extra candidates are worth: "gain" (independent tries, ``tree_gain``) or "rank"
    #: (SGLang's kept tree node by node with the rank decay ``rank_decay`` ρ; module docstring)
    tree_model: str = "gain"
    rank_decay: float = 0.6
    prompt_sigma: float = 0.05
    temperature_penalty: float = 0.1
    long_context_factor: float = 0.5
    misaligned_aux_factor: float = 0.3
    eagle2_factor: float = 0.85
    random_draft_alpha: float = 0.01
    ngram_alpha: float = 0.45
    categories: dict[str, float] = field(default_factory=lambda: {"general": 1.0})


@dataclass
class Scenario:
    """One simulator scenario (see the module docstring for the model).

    ``time_scale``: the wall-clock speed-up used when ``--time-scale`` is not given;
    ``startup_s``: simulated start-up time (model seconds); ``target_model`` /
    ``draft_model``: ``sim:`` models used when the command line's paths are not readable
    directories (so a pasted real command line runs on the simulator).
    """

    name: str = "unnamed"
    description: str = ""
    path: str | None = None
    time_scale: float = 1.0
    startup_s: float = 4.0
    jitter_sigma: float = 0.03
    target_model: str = "sim:llama-3.1-8b"
    draft_model: str = "sim:llama-3.1-8b-eagle3"
    gpu: GpuSpec = field(default_factory=GpuSpec)
    target: TargetSpec = field(default_factory=TargetSpec)
    prefill: PrefillSpec = field(default_factory=PrefillSpec)
    draft: DraftSpec = field(default_factory=DraftSpec)
    acceptance: AcceptanceSpec = field(default_factory=AcceptanceSpec)
    device: DeviceSpec = field(default_factory=DeviceSpec)

    # -- timing (model milliseconds) --------------------------------------------------------
    def t_forward(self, tokens: int) -> float:
        """Target forward over ``tokens`` tokens (ms), CUDA graphs on."""
        t = self.target
        n = max(1, int(tokens))
        return t.step_ms * (1.0 + t.per_token_growth * (n - 1)) + max(0, n - t.knee_tokens) * t.compute_ms_per_token

    def t_draft(self, batch: int, topk: int = 1) -> float:
        """One draft step for ``batch`` requests of ``topk`` candidates each (ms; module docstring)."""
        d = self.draft
        b, k = max(1, int(batch)), max(1, int(topk))
        if d.topk_growth is None:
            return d.step_ms * (1.0 + d.per_token_growth * (b * k - 1))
        return d.step_ms * (1.0 + d.per_token_growth * (b - 1)) * (1.0 + d.topk_growth * (k - 1))

    def round_ms(self, batch: int, spec: SpecShape | None, *, eager: bool = False) -> float:
        """One decode iteration for ``batch`` running requests (ms, before jitter).

        ``spec`` None: plain decode (one token per request).  ``eager``: the batch exceeds
        the captured CUDA-graph sizes, so the forward passes run ``eager_factor`` slower.
        """
        b = max(1, int(batch))
        factor = self.target.eager_factor if eager else 1.0
        if spec is None:
            return self.t_forward(b) * factor + self.target.nospec_overhead_ms + self.target.per_request_ms * b
        draft = spec.steps * self.t_draft(b, spec.topk)
        verify = self.t_forward(b * spec.num_draft_tokens)
        return ((draft + verify) * factor + self.draft.round_overhead_ms
                + (self.target.per_request_ms + self.draft.per_request_overhead_ms) * b)

    def device_ms(self, batch: int, spec: SpecShape | None) -> dict[str, float]:
        """GPU-busy ms of one decode iteration per phase (see :class:`DeviceSpec`), keyed by
        SGLang's graph categories (``decode``, ``eagle_draft``, ``target_verify``,
        ``eagle_draft_extend``); zero phases are left out."""
        b = max(1, int(batch))
        d = self.device
        if spec is None:
            return {"decode": self.t_forward(b) * d.verify_fraction}
        out: dict[str, float] = {}
        if spec.steps > 1:
            out["eagle_draft"] = (spec.steps - 1) * self.t_draft(b, spec.topk) * d.draft_fraction
        out["target_verify"] = self.t_forward(b * max(1, spec.num_draft_tokens)) * d.verify_fraction
        out["eagle_draft_extend"] = (self.draft.round_overhead_ms * d.draft_extend_fraction
                                     * (1.0 + d.draft_extend_growth * (b - 1)))
        return out

    def prefill_ms(self, uncached_tokens: int, *, spec: bool) -> float:
        """A prefill batch over ``uncached_tokens`` new tokens (ms, before jitter)."""
        p = self.prefill
        return p.base_ms + p.ms_per_token * max(0, int(uncached_tokens)) + (p.spec_extra_ms if spec else 0.0)

    # -- acceptance ------------------------------------------------------------------------
    def category_factor(self, category: str) -> float:
        """α multiplier of a prompt category (1.0 when the scenario does not list it)."""
        cats = self.acceptance.categories
        return float(cats.get(category, cats.get("general", 1.0)))

    def temperature_factor(self, temperature: float | None) -> float:
        """α multiplier for sampling temperature ``T``: ``1 − penalty · min(T, 1)`` (greedy: 1)."""
        if not temperature or temperature <= 0:
            return 1.0
        return max(0.0, 1.0 - self.acceptance.temperature_penalty * min(float(temperature), 1.0))


@dataclass(frozen=True)
class SpecShape:
    """The effective speculative settings the timing/acceptance model needs."""

    steps: int
    topk: int
    num_draft_tokens: int

    @property
    def proposed_per_round(self) -> int:
        """Drafts SGLang counts as proposed per request-round: ``num_draft_tokens − 1`` (``tokenizer_manager.py``)."""
        return max(1, self.num_draft_tokens - 1)


def tree_branching(steps: int, topk: int, num_draft_tokens: int) -> list[int]:
    """Candidates available to the true path at each depth, ``[b_1, …, b_depth]``.

    Chain (topk 1): ``[1] * steps``.  Tree: depth = ``min(steps, N − 1)``; one node per depth,
    then the remaining ``N − 1 − depth`` nodes are added as siblings from depth 1 down, at
    most ``topk`` candidates per depth (see the module docstring).
    """
    steps = max(0, int(steps))
    if topk <= 1:
        return [1] * steps
    budget = max(0, int(num_draft_tokens) - 1)
    depth = min(steps, budget)
    b = [1] * depth
    extra = budget - depth
    for i in range(depth):
        add = min(topk - 1, extra)
        b[i] += add
        extra -= add
    return b


def success_probs(alpha: float, decay: float, branching: list[int], gain: float) -> list[float]:
    """Per-depth conditional acceptance ``q_i = 1 − (1 − α·d^(i−1))^(b_i^g)`` (α capped at 1)."""
    a = min(max(float(alpha), 0.0), 1.0)
    out = []
    for i, b in enumerate(branching):
        p = a * decay**i
        tries = b**gain if b > 1 else 1.0
        out.append(1.0 - (1.0 - p) ** tries if p < 1.0 else 1.0)
    return out


def rank_success_probs(alpha: float, decay: float, steps: int, topk: int, num_draft_tokens: int,
                       rho: float) -> list[float]:
    """Per-depth conditional acceptance ``q_j = Q_j / Q_{j−1}`` of SGLang's kept tree under the rank model
    (module docstring; :func:`specdash.sglang.tree.kept_paths` and :func:`~specdash.sglang.tree.reach_probs`),
    top-1 acceptance ``p_i = min(1, α·d^(i−1))``.  Length: the kept tree's depth (≤ ``steps``); a chain
    (``topk`` 1) gives ``p_i`` itself."""
    import numpy as np

    from specdash.sglang.tree import kept_paths, reach_probs

    steps = max(0, int(steps))
    a = min(max(float(alpha), 0.0), 1.0)
    p = [min(1.0, a * decay**i) for i in range(steps)]
    paths = kept_paths(steps, max(1, int(topk)), int(num_draft_tokens), p, rho)
    if not paths:
        return []
    reach = reach_probs(paths, np.asarray(p, dtype=float), rho)
    out, prev = [], 1.0
    for qj in (float(x) for x in reach):
        out.append(min(1.0, qj / prev) if prev > 0 else 0.0)
        prev = qj
    return out


def shape_success_probs(acc: AcceptanceSpec, alpha: float, steps: int, topk: int,
                        num_draft_tokens: int) -> list[float]:
    """The per-depth conditional acceptance of one (steps, topk, draft tokens) at per-request ``α`` under
    the scenario's tree model (``acceptance.tree_model``): :func:`success_probs` over
    :func:`tree_branching` for "gain", :func:`rank_success_probs` for "rank".  Length: the depth of
    :func:`tree_branching` in both (a kept tree shallower than that reads 0 below its deepest node)."""
    branching = tree_branching(steps, topk, num_draft_tokens)
    if acc.tree_model == "rank":
        q = rank_success_probs(alpha, acc.decay, steps, topk, num_draft_tokens, acc.rank_decay)
        return (q + [0.0] * len(branching))[: len(branching)]
    return success_probs(alpha, acc.decay, branching, acc.tree_gain)


def expected_accepted(q: list[float]) -> float:
    """``E[A] = Σ_k Π_{i≤k} q_i``: expected accepted drafts per request-round."""
    total, run = 0.0, 1.0
    for qi in q:
        run *= qi
        total += run
    return total


def accepted_distribution(q: list[float]) -> list[float]:
    """``P(A = k)`` for k = 0..len(q) (the histogram SGLang reports, normalised)."""
    probs, run = [], 1.0
    for qi in q:
        probs.append(run * (1.0 - qi))
        run *= qi
    probs.append(run)
    return probs


# -- loading ---------------------------------------------------------------------------------

def scenario_names() -> list[str]:
    """Names of the bundled scenarios (``specdash/sim/scenarios/*.toml``)."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


#: Upper bounds of a scenario's magnitudes (a value past them is a typo, and a simulated step of hours would
#: hang every request): milliseconds of one step or phase, seconds of start-up, the time scale, GPUs, MiB.
MAX_MS = 100_000.0
MAX_STARTUP_S = 3600.0
MAX_TIME_SCALE = 10_000.0
MAX_GPUS = 64
MAX_SIGMA = 5.0


def _typed(where: str, key: str, value: Any, hint: Any) -> Any:
    """``value`` as the field's type (``hint``: float, int, str, bool, ``X | None``, ``dict[str, float]``).

    Raises:
        ScenarioError: another type (a string where a number goes, a list, ``true`` for a count), or a
            number that is not finite — naming the file, the table and the key.
    """
    import types
    import typing

    args = [a for a in typing.get_args(hint) if a is not type(None)] if isinstance(hint, types.UnionType) else []
    if args:
        hint = args[0]
    base = typing.get_origin(hint) or hint
    what = {float: "a number", int: "a whole number", str: "a string", bool: "true or false",
            dict: "a table of numbers"}.get(base, str(hint))
    bad = ScenarioError(f"{where}: {key} must be {what}, not {value!r}")
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if not math.isfinite(value):
            raise ScenarioError(f"{where}: {key} must be a finite number, not {value!r}")
        return float(value)
    if base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad
        return value
    if base is bool:
        if not isinstance(value, bool):
            raise bad
        return value
    if base is str:
        if not isinstance(value, str):
            raise bad
        return value
    if base is dict:
        if not isinstance(value, dict):
            raise bad
        return {str(k): _typed(where, f"{key}.{k}", v, float) for k, v in value.items()}
    return value


def _fill(cls, data: dict, where: str):
    """An instance of the dataclass ``cls`` from one TOML table, every value checked against the field's type
    (:func:`_typed`).

    Raises:
        ScenarioError: an unknown key, or a value of the wrong type.
    """
    import typing

    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    hints = typing.get_type_hints(cls)
    obj = cls()
    for k, v in data.items():
        setattr(obj, k, _typed(where, k, v, hints[k]))
    return obj


def scenario_from_dict(data: dict[str, Any], *, name: str = "unnamed", path: str | None = None) -> Scenario:
    """Build a :class:`Scenario` from parsed TOML (sections ``[scenario]``, ``[gpu]``,
    ``[target]``, ``[prefill]``, ``[draft]``, ``[acceptance]`` (+ ``[acceptance.categories]``),
    ``[jitter]``).

    Raises:
        ScenarioError: unknown section or key, a value of the wrong type or out of range.
    """
    data = dict(data)
    head = dict(data.pop("scenario", {}))
    jitter = dict(data.pop("jitter", {}))
    sections = {"gpu": GpuSpec, "target": TargetSpec, "prefill": PrefillSpec, "draft": DraftSpec,
                "acceptance": AcceptanceSpec, "device": DeviceSpec}
    unknown = sorted(set(data) - set(sections))
    if unknown:
        raise ScenarioError(f"{path or name}: unknown section(s) {', '.join(unknown)}")
    sc = _fill(Scenario, {k: v for k, v in head.items()}, f"{path or name} [scenario]")
    if set(jitter) - {"sigma"}:
        raise ScenarioError(f"{path or name} [jitter]: only 'sigma' is known")
    if "sigma" in jitter:
        sc.jitter_sigma = _typed(f"{path or name} [jitter]", "sigma", jitter["sigma"], float)
    for sec, cls in sections.items():
        if sec in data:
            sub = dict(data[sec])
            obj = _fill(cls, sub, f"{path or name} [{sec}]")
            setattr(sc, sec, obj)
    if not head.get("name"):
        sc.name = name
    sc.path = path
    cats = dict(sc.acceptance.categories)
    cats.setdefault("general", 1.0)
    sc.acceptance.categories = cats
    _validate(sc)
    return sc


def _validate(sc: Scenario) -> None:
    problems = []
    if sc.time_scale <= 0:
        problems.append("scenario.time_scale must be > 0")
    if sc.target.step_ms <= 0:
        problems.append("target.step_ms must be > 0")
    if not 0 <= sc.acceptance.alpha <= 1:
        problems.append("acceptance.alpha must be in [0, 1]")
    if not 0 <= sc.acceptance.decay <= 1:
        problems.append("acceptance.decay must be in [0, 1]")
    if not 0 <= sc.acceptance.tree_gain <= 1:
        problems.append("acceptance.tree_gain must be in [0, 1]")
    if sc.acceptance.tree_model not in ("gain", "rank"):
        problems.append(f"acceptance.tree_model must be \"gain\" or \"rank\", not {sc.acceptance.tree_model!r}")
    if not 0 < sc.acceptance.rank_decay < 1:
        problems.append("acceptance.rank_decay must be in (0, 1)")
    if sc.gpu.count < 1 or sc.gpu.memory_mib <= 0:
        problems.append("gpu.count and gpu.memory_mib must be positive")
    if sc.gpu.count > MAX_GPUS:
        problems.append(f"gpu.count must be at most {MAX_GPUS}")
    if not 0 < sc.time_scale <= MAX_TIME_SCALE:
        problems.append(f"scenario.time_scale must be at most {MAX_TIME_SCALE:g}")
    if not 0 <= sc.startup_s <= MAX_STARTUP_S:
        problems.append(f"scenario.startup_s must be from 0 to {MAX_STARTUP_S:g} s")
    for sec in ("target", "prefill", "draft"):
        for f in fields(getattr(sc, sec)):
            v = getattr(getattr(sc, sec), f.name)
            if "ms" in f.name.split("_"):  # step_ms, base_ms, ms_per_token, compute_ms_per_token, …
                if isinstance(v, float) and not 0 <= v <= MAX_MS:
                    problems.append(f"{sec}.{f.name} must be from 0 to {MAX_MS:g} ms (got {v:g})")
    for key, v in (("jitter.sigma", sc.jitter_sigma), ("acceptance.prompt_sigma", sc.acceptance.prompt_sigma)):
        if not 0 <= v <= MAX_SIGMA:
            problems.append(f"{key} must be from 0 to {MAX_SIGMA:g} (got {v:g})")
    for cat, v in sc.acceptance.categories.items():
        if not 0 <= v <= 10:
            problems.append(f"acceptance.categories.{cat} must be from 0 to 10 (an α multiplier; got {v:g})")
    if problems:
        raise ScenarioError(f"{sc.path or sc.name}: " + "; ".join(problems))


def load_scenario(name_or_path: str | None) -> Scenario:
    """Load a bundled scenario by name (``healthy``) or a TOML file by path.

    Raises:
        ScenarioError: unknown name, unreadable file, bad TOML or unknown keys.
    """
    ref = (name_or_path or "healthy").strip()
    p = Path(ref).expanduser()
    if ref.endswith(".toml") or p.is_file() or "/" in ref:
        if not p.is_file():
            raise ScenarioError(f"{ref}: no such scenario file")
        path = p
    else:
        path = SCENARIO_DIR / f"{ref}.toml"
        if not path.is_file():
            raise ScenarioError(f"unknown scenario {ref!r} (known: {', '.join(scenario_names())})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc}") from None
    return scenario_from_dict(data, name=path.stem, path=str(path))


def lognormal_mean1(rng, sigma: float) -> float:
    """A lognormal draw with mean exactly 1 (μ = −σ²/2); 1.0 when σ is 0."""
    if sigma <= 0:
        return 1.0
    return float(rng.lognormal(-0.5 * sigma * sigma, sigma))


def mean1_lognormal_factor(u: float, sigma: float) -> float:
    """The mean-1 lognormal quantile at ``u`` ∈ (0, 1) (deterministic per-prompt factors)."""
    if sigma <= 0:
        return 1.0
    from statistics import NormalDist

    z = NormalDist().inv_cdf(min(max(u, 1e-9), 1 - 1e-9))
    return math.exp(-0.5 * sigma * sigma + sigma * z)
