"""Speculative settings, measurements (with the device timer's per-phase GPU time) and the
SGLang candidate grid.

Units: tok/s are output tokens per second summed over the requests in flight; round times are
ms per verify round (one draft phase + one verify forward of the whole batch); device-timer
figures are seconds as SGLang's counters hold them (converted to ms per round by the cost fit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specdash.results import output_tok_s
from specdash.sglang.metrics import METRICS
from specdash.sglang.speculative import normalize_speculative

#: The candidate space: what SGLang accepts for EAGLE / EAGLE3 and runs as asked.  Steps 1..10;
#: topk 1 (a chain) to 16 (``--speculative-eagle-topk`` is a plain int; the tree-capacity bound
#: below is SGLang's only limit on it); draft tokens every count up to 32 (the largest of SGLang's
#: ``scripts/playground/bench_speculative.py`` sweep: 2, 4, 8, 16, 32), then 40..64 in steps of 8
#: (SGLang's documented topk 8 / 64 draft tokens example).  :func:`candidate_grid` keeps only the
#: points SGLang runs exactly as asked: topk 1 forces draft tokens = steps + 1, a tree verifies at
#: most ``tree_capacity(steps, topk)`` tokens.
STEPS_GRID = tuple(range(1, 11))
TOPK_GRID = (1, 2, 4, 8, 16)
DRAFT_GRID = (*range(2, 33), 40, 48, 56, 64)

#: ``sglang:forward_execution_seconds_total{category=…}`` — the device-timer counter
#: (``srt/observability/metrics_collector.py``) and the categories the cost fit reads.
FORWARD_SECONDS = METRICS["forward_execution_seconds"].name
DRAFT_CATEGORY = "eagle_draft"
DRAFT_EXTEND_CATEGORY = "eagle_draft_extend"
VERIFY_CATEGORY = "target_verify"

# --- settings and measurements ---------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Settings:
    """Speculative settings as SGLang runs them (steps, topk, draft tokens).

    ``Settings(0, 1, 1)`` stands for the adaptive controller's steps-0 tier (no drafting; the
    verify forward checks only the bonus token), which only occurs as a tier measurement.
    """

    steps: int
    topk: int
    draft_tokens: int

    def label(self) -> str:
        return f"steps {self.steps} / topk {self.topk} / draft tokens {self.draft_tokens}"

    def to_json(self) -> dict[str, int]:
        return {"speculative_num_steps": self.steps, "speculative_eagle_topk": self.topk,
                "speculative_num_draft_tokens": self.draft_tokens}

    @classmethod
    def from_effective(cls, d: Mapping[str, Any] | None) -> Settings | None:
        """From ``/server_info`` or a RUN's ``effective`` (read by
        :meth:`specdash.sglang.effective.SpecSettings.from_effective`); None without speculation or
        without a step count (topk defaults to 1, draft tokens to 0 when the server gives none)."""
        from specdash.sglang.effective import SpecSettings

        s = SpecSettings.from_effective(d)
        if not s.on or not s.steps:
            return None
        return cls(s.steps, s.topk or 1, s.draft_tokens or 0)


def chain(steps: int) -> Settings:
    """The chain (topk 1) with ``steps`` draft steps: draft tokens = steps + 1 (steps 0: the
    adaptive no-drafting tier)."""
    return Settings(int(steps), 1, int(steps) + 1)


@dataclass(frozen=True)
class PhaseTimes:
    """GPU time by phase over one measured window, from SGLang's device timer.

    With ``SGLANG_ENABLE_METRICS_DEVICE_TIMER=1`` and ``--enable-metrics`` SGLang adds the GPU
    time of each forward pass (CUDA events around it, ``srt/utils/device_timer.py``; installed
    on the target and draft runners by ``srt/managers/scheduler_components/metrics_reporter.py``)
    to the counter ``sglang:forward_execution_seconds_total{category}``
    (``srt/observability/metrics_collector.py``).  Per verify round of EAGLE decoding
    (``srt/speculative/eagle_worker_v2.py``) the categories are:

    * ``eagle_draft``: the draft's multi-step CUDA-graph replay
      (``srt/speculative/eagle_draft_cuda_graph_runner.py``), S − 1 draft forwards of B·K
      tokens — none at S = 1 ("we get 1 token from draft prefill and (#spec steps - 1) tokens
      here", ``EAGLEWorker.draft_forward``);
    * ``eagle_draft_extend``: one draft forward over the verified tokens, which yields the next
      round's first draft token (``srt/speculative/eagle_draft_extend_cuda_graph_runner.py``);
      it also runs in the adaptive steps-0 tier, to keep the draft's KV cache warm;
    * ``target_verify``: the target forward over the B·N tree tokens
      (``srt/model_executor/runner/decode_cuda_graph_runner.py``: category =
      ``forward_mode.name.lower()``);
    * ``decode`` (plain decoding) and ``extend`` (prefill) are not used here.

    So a round holds S draft forwards (S − 1 + 1) and one verify forward.  The timed categories
    are the CUDA-graph replays: above ``--cuda-graph-max-bs-decode`` SGLang runs eagerly and
    books the verify under ``extend`` (``model_runner.py``), mixed with prefill — give no
    phases for such windows.  Fields:

    ``draft_s``, ``draft_extend_s``, ``verify_s``: counter deltas (seconds) over the window;
    ``rounds``: batch-level verify rounds in the window (forward passes, not request-rounds:
    ``sglang:spec_verify_calls_total`` sums each request's rounds, so divide its delta by the
    mean batch); ``batch``: mean requests per round (None: the measurement's concurrency);
    ``steps``: draft steps per round (None: the measurement's settings); ``mix``: for a window
    that pooled several adaptive chain tiers (one launch's counter, which SGLang does not split by
    tier), ``((steps, share of the rounds), …)`` — the observation is then the share-weighted mean
    round of those chains (``steps`` is ignored).
    """

    draft_s: float
    draft_extend_s: float
    verify_s: float
    rounds: float
    batch: float | None = None
    steps: int | None = None
    mix: tuple[tuple[int, float], ...] | None = None

    def draft_ms_per_round(self) -> float:
        """GPU ms of the draft phase per round: 1000 · (eagle_draft + eagle_draft_extend) / rounds."""
        return 1000.0 * (self.draft_s + self.draft_extend_s) / self.rounds

    def verify_ms_per_round(self) -> float:
        """GPU ms of the verify forward per round: 1000 · target_verify / rounds."""
        return 1000.0 * self.verify_s / self.rounds

    def draft_ms_per_step(self, steps: int | None = None) -> float:
        """GPU ms per draft forward: draft ms per round / max(S, 1) (S forwards per round; for a
        ``mix``, its share-weighted mean)."""
        if self.mix:
            f = sum(w * max(1, int(k)) for k, w in self.mix) / (sum(w for _, w in self.mix) or 1.0)
            return self.draft_ms_per_round() / max(1e-9, f)
        s = self.steps if self.steps is not None else steps
        return self.draft_ms_per_round() / max(1, int(s or 1))

    @classmethod
    def from_counters(cls, before: Mapping[str, float], after: Mapping[str, float], *, rounds: float | None = None,
                      request_rounds: float | None = None, batch: float | None = None,
                      steps: int | None = None) -> PhaseTimes:
        """From two readings of the counter by category (``{"eagle_draft": s, …}``, seconds).

        ``rounds`` (batch-level) or ``request_rounds`` (Δ``spec_verify_calls_total``) with
        ``batch``: rounds = request_rounds / batch.  Raises ValueError without a round count.
        """
        if rounds is None:
            if request_rounds is None:
                raise ValueError("PhaseTimes needs rounds, or request_rounds with batch")
            rounds = float(request_rounds) / float(batch or 1.0)
        if rounds <= 0:
            raise ValueError(f"PhaseTimes needs a positive round count, got {rounds}")

        def d(cat: str) -> float:
            return max(0.0, float(after.get(cat, 0.0)) - float(before.get(cat, 0.0)))

        return cls(d(DRAFT_CATEGORY), d(DRAFT_EXTEND_CATEGORY), d(VERIFY_CATEGORY), float(rounds), batch, steps)

    @classmethod
    def from_run(cls, run: Mapping[str, Any], *, concurrency: int | None = None) -> PhaseTimes | None:
        """From a ``summary.json`` RUN's ``device_time_s`` ({category: seconds} over the run), or None.

        Rounds: the RUN's ``decode_iterations`` (batch-level decode iterations from the decode
        log), else Σ ``accept_histogram`` (request-rounds) / ``concurrency``; ``batch`` =
        request-rounds / rounds.  None without the device timer, without speculation, without
        a round count, or for an adaptive run (its phases mix tiers of different step counts).
        """
        secs = run.get("device_time_s")
        eff = run.get("effective") or {}
        if not isinstance(secs, Mapping) or not secs or not eff.get("speculative_algorithm"):
            return None
        if (run.get("adaptive") or {}).get("enabled"):
            return None
        hist = run.get("accept_histogram") or []
        request_rounds = float(sum(hist)) if hist else None
        rounds = run.get("decode_iterations") or None
        if rounds is None:
            conc = concurrency or run.get("concurrency") or 1
            if not request_rounds:
                return None
            rounds = request_rounds / float(conc)
        batch = request_rounds / float(rounds) if request_rounds else None
        steps = eff.get("speculative_num_steps")
        try:
            return cls.from_counters({}, {k: float(v) for k, v in secs.items()}, rounds=float(rounds), batch=batch,
                                     steps=int(steps) if steps is not None else None)
        except ValueError:
            return None

    @classmethod
    def from_snapshots(cls, before: Any, after: Any, *, batch: float, rounds: float | None = None,
                       steps: int | None = None) -> PhaseTimes:
        """From two :class:`specdash.sglang.metrics.MetricsSnapshot` s.

        Without ``rounds``, rounds = Δ``sglang:spec_verify_calls_total`` / ``batch`` (that counter
        counts request-rounds of finished requests, so take the snapshots between load phases).
        """
        from specdash.sglang.metrics import counter_delta

        def d(cat: str) -> float:
            return float(counter_delta(before, after, FORWARD_SECONDS, category=cat) or 0.0)

        cats = (DRAFT_CATEGORY, DRAFT_EXTEND_CATEGORY, VERIFY_CATEGORY)
        vals = {c: d(c) for c in cats}
        request_rounds = None
        if rounds is None:
            request_rounds = counter_delta(before, after, "sglang:spec_verify_calls_total")
        return cls.from_counters(dict.fromkeys(cats, 0.0), vals, rounds=rounds, request_rounds=request_rounds,
                                 batch=batch, steps=steps)


@dataclass
class Measurement:
    """One benchmarked setting (``settings`` None = no speculation, a baseline run).

    ``output_tok_s``: aggregate output tok/s at ``concurrency`` requests in flight;
    ``accept_length``: τ (bonus included); ``accept_histogram``: SGLang's correct-drafts
    histogram (counts, index k = verify rounds that accepted exactly k drafts); ``tpot_ms`` or
    ``round_ms`` may stand in when tok/s is missing; ``phases``: the device timer's GPU time by
    phase over the same window (:class:`PhaseTimes`), direct observations for the cost fit;
    ``source``: ``"launch"`` (a launch of its own) or ``"tier"`` (one adaptive tier of a launch);
    ``launch``: an id shared by the tiers of one launch (None: a launch of its own);
    ``output_tok_s_se``: the standard error of ``output_tok_s`` (tok/s; None: unknown) — a tier's from
    its windows' spread, a launch's from its verify rounds' (:func:`acceptance_rel_se`).
    """

    settings: Settings | None
    output_tok_s: float | None
    concurrency: int = 1
    accept_length: float | None = None
    accept_histogram: Sequence[int] | None = None
    tpot_ms: float | None = None
    round_ms: float | None = None
    accept_length_se: float | None = None
    label: str | None = None
    phases: PhaseTimes | None = None
    source: str = "launch"
    launch: int | None = None
    output_tok_s_se: float | None = None

    @classmethod
    def from_run(cls, run: Mapping[str, Any], *, concurrency: int = 1, phases: PhaseTimes | None = None) -> Measurement:
        """Build from a ``summary.json`` RUN: effective settings, tok/s, τ, histogram; ``phases``
        default to the RUN's device-timer seconds (:meth:`PhaseTimes.from_run`, None without them)."""
        if phases is None:
            phases = PhaseTimes.from_run(run, concurrency=concurrency)
        settings = Settings.from_effective(run.get("effective"))
        tpot = run.get("tpot_ms") or {}
        tok = output_tok_s(run)
        rel = acceptance_rel_se(run.get("accept_histogram")) if settings is not None else None
        return cls(settings, tok, concurrency, run.get("accept_length"),
                   run.get("accept_histogram"), tpot.get("mean") if isinstance(tpot, Mapping) else None,
                   label=run.get("profile"), phases=phases,
                   output_tok_s_se=float(tok) * rel if (rel is not None and tok) else None)

    @classmethod
    def tiers_from_run(cls, run: Mapping[str, Any], *, concurrency: int = 1, launch: int = 0) -> list[Measurement]:
        """One measurement per adaptive tier of a RUN's ``tiers`` list (empty without tiers).

        Each tier is a chain: ``Settings(steps, 1, steps + 1)``; tok/s and τ are the tier's own.
        """
        out = []
        for t in run.get("tiers") or []:
            steps = t.get("speculative_num_steps")
            tok = output_tok_s(t)
            if steps is None or not tok:
                continue
            n = t.get("speculative_num_draft_tokens") or int(steps) + 1
            out.append(cls(Settings(int(steps), 1, int(n)), float(tok), concurrency,
                           t.get("accept_length") or (1.0 if int(steps) == 0 else None),
                           label=run.get("profile"), source="tier", launch=launch))
        return out

    def tau(self) -> float | None:
        """Accept length: measured, else from the histogram (1 + mean accepted drafts)."""
        if self.accept_length:
            return float(self.accept_length)
        h = self.accept_histogram
        if h and sum(h) > 0:
            return 1.0 + sum(k * c for k, c in enumerate(h)) / float(sum(h))
        return None

    def round_time_ms(self) -> tuple[float | None, str]:
        """Observed time of one verify round (ms) and its source: τ · TPOT when both TPOT and tok/s are
        known (the decode round alone: a client's tok/s also holds the prefills, see
        :meth:`overhead_ms_per_token`), else 1000 · B · τ / tok/s (a decode-log or tier figure holds
        no prefill), else the decode log's round time, else τ · TPOT."""
        b = max(1, int(self.concurrency))
        tau = self.tau() if self.settings is not None else 1.0
        if tau is None:
            return None, "no accept length"
        if self.tpot_ms and self.tpot_ms > 0 and self.output_tok_s and self.output_tok_s > 0:
            return float(self.tpot_ms) * tau, "TPOT"
        if self.output_tok_s and self.output_tok_s > 0:
            return 1000.0 * b * tau / float(self.output_tok_s), "output tok/s"
        if self.round_ms:
            return float(self.round_ms), "decode log"
        if self.tpot_ms:
            return float(self.tpot_ms) * tau, "TPOT"
        return None, "no timing"

    def overhead_ms_per_token(self) -> float | None:
        """ms per output token of this measurement's tok/s that is not decode rounds: max(0, 1000 · B /
        tok/s − TPOT) — the prefills amortised over each request's tokens (1000 · B / tok/s = TTFT/M +
        TPOT · (M − 1)/M for M tokens a request); None without both figures."""
        if not (self.tpot_ms and self.tpot_ms > 0 and self.output_tok_s and self.output_tok_s > 0):
            return None
        return max(0.0, 1000.0 * max(1, int(self.concurrency)) / float(self.output_tok_s) - float(self.tpot_ms))

    def tok_s(self) -> float | None:
        """Output tok/s, derived from the round time when only that is known."""
        if self.output_tok_s:
            return float(self.output_tok_s)
        t, _ = self.round_time_ms()
        tau = self.tau() if self.settings is not None else 1.0
        return 1000.0 * max(1, self.concurrency) * tau / t if t and tau else None


def acceptance_rel_se(hist: Sequence[int] | None) -> float | None:
    """Relative standard error of the accept length from a verify-round histogram (index k = rounds
    that accepted k drafts): √(Var[k] / n) ÷ τ with τ = 1 + E[k] — the sampling noise of a measured
    tok/s at a fixed round time (rounds taken as independent: temperature 0 on a real server makes
    neighbouring rounds of one text correlate, so this is a floor there); None below two rounds."""
    if not hist:
        return None
    n = float(sum(hist))
    if n <= 1:
        return None
    mean = sum(k * c for k, c in enumerate(hist)) / n
    var = sum((k - mean) ** 2 * c for k, c in enumerate(hist)) / (n - 1)
    return (var / n) ** 0.5 / (1.0 + mean)


def round_ms_from_decode_log(gen_throughput: float, accept_len: float, running_req: int) -> float:
    """Round time (ms) from a ``Decode batch`` log window: rounds/s = gen_throughput / (accept_len
    · #running-req) — SGLang's decode line (``srt/managers/scheduler_components/metrics_reporter.py``)
    reports tokens/s over the window and accept len as tokens per request-round."""
    return 1000.0 * accept_len * running_req / gen_throughput


# --- SGLang normalisation -----------------------------------------------------------------------


def _effective(steps: int, topk: int, draft_tokens: int) -> Settings | None:
    """What SGLang runs for these flags, or None when it refuses them.

    Uses ``specdash.sglang.speculative.normalize_speculative`` (the launcher's rules: topk 1 forces
    draft tokens = steps + 1, a tree holds at most ``tree_capacity(steps, topk)`` tokens, …).
    """
    if steps < 1 or topk < 1 or draft_tokens < 2:
        return None
    res = normalize_speculative("EAGLE3", steps, topk, draft_tokens)
    if res.rejections:
        return None
    steps, topk, draft_tokens = int(res.num_steps), int(res.eagle_topk), int(res.num_draft_tokens)
    return Settings(steps, topk, draft_tokens)


def candidate_grid(steps: Iterable[int] = STEPS_GRID, topks: Iterable[int] = TOPK_GRID,
                   drafts: Iterable[int] = DRAFT_GRID, *, dominated: bool = False) -> list[Settings]:
    """Grid points SGLang runs exactly as asked (rewritten or rejected points are skipped).

    Unless ``dominated``, two kinds of dominated trees are left out too:

    * more steps than draft nodes (S > N − 1): the tree cannot be deeper than its N − 1 nodes,
      so the extra draft steps are pure cost and (N − 1, topk, N) is at least as fast;
    * a wider topk than draft nodes (K > N − 1) when a narrower grid topk K' ≥ N − 1 (or the
      chain, N = 2) runs at the same steps and draft tokens: SGLang keeps the N − 1 best-scored
      nodes (``torch.topk(score_list, num_draft_token - 1)`` in ``srt/speculative/eagle_utils.py``)
      and a node never outscores its parent, so those nodes are among any K' ≥ N − 1 best
      children and the wider draft only costs more (e.g. steps 1 / topk 8 / draft tokens 2 is
      the chain steps 1 / topk 1 / draft tokens 2 with eight times the draft tokens).
    """
    topks = tuple(topks)
    exact: set[Settings] = set()
    for s in steps:
        for k in topks:
            for n in drafts:
                eff = _effective(s, k, n)
                if eff is not None and eff == Settings(s, k, n):
                    exact.add(eff)
    if dominated:
        return sorted(exact)
    out = []
    for x in exact:
        if x.steps > x.draft_tokens - 1:
            continue
        if x.topk > 1 and any(Settings(x.steps, k2, x.draft_tokens) in exact
                              for k2 in topks if x.draft_tokens - 1 <= k2 < x.topk):
            continue
        out.append(x)
    return sorted(out)


def _spec(ms: Iterable[Measurement]) -> list[Measurement]:
    return [m for m in ms if m.settings is not None]


def simulated_acceptance_candidates(*envs) -> tuple[list[Settings] | None, str | None]:
    """The settings worth searching when SGLang simulates acceptance, and why; (None, None) when it
    does not (the full :func:`candidate_grid` then).

    ``envs``: as :func:`specdash.sglang.simulate.simulate_acc_len` (the profile's ``[env]`` first, then
    the environment the server inherits).  Under ``SGLANG_SIMULATE_ACC_LEN`` > 0 a verify round
    accepts a length drawn from L and ``steps + 1`` alone — ``generate_simulated_accept_index`` in
    ``srt/speculative/spec_utils.py`` (0.5.10–0.5.14) never looks at the tree — so a wider tree cannot
    accept more than the chain of its steps and only costs more: the chains (topk 1, draft tokens
    steps + 1) are the candidates.
    """
    from specdash.sglang.simulate import simulate_acc_len

    length = simulate_acc_len(*envs)
    if length is None:
        return None, None
    chains = [c for c in candidate_grid() if c.topk == 1 and c.draft_tokens == c.steps + 1]
    return chains, (f"acceptance is simulated (SGLANG_SIMULATE_ACC_LEN={length:g}): a round accepts min(L, steps + 1) "
                    f"tokens whatever the tree (SGLang's spec_utils.generate_simulated_accept_index), so only the "
                    f"{len(chains)} chains are candidates: a tree would cost more for the same acceptance")
