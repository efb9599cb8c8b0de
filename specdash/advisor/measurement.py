"""Speculative settings, measurements and the SGLang candidate grid."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specdash.sglang.command import normalize_speculative

STEPS_GRID = tuple(range(1, 9))
TOPK_GRID = (1, 2, 4, 8)
DRAFT_GRID = tuple(range(2, 17))

# --- settings and measurements ---------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Settings:
    """Speculative settings as SGLang runs them (steps, topk, draft tokens)."""

    steps: int
    topk: int
    draft_tokens: int

    def label(self) -> str:
        return f"steps {self.steps} / topk {self.topk} / draft tokens {self.draft_tokens}"

    def to_json(self) -> dict[str, int]:
        return {"speculative_num_steps": self.steps, "speculative_eagle_topk": self.topk,
                "speculative_num_draft_tokens": self.draft_tokens}


@dataclass
class Measurement:
    """One benchmarked setting (``settings`` None = no speculation, a baseline run).

    ``output_tok_s``: aggregate output tok/s at ``concurrency`` requests in flight;
    ``accept_length``: τ (bonus included); ``accept_histogram``: SGLang's correct-drafts
    histogram (counts); ``tpot_ms`` or ``round_ms`` may stand in when tok/s is missing.
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

    @classmethod
    def from_run(cls, run: Mapping[str, Any], *, concurrency: int = 1) -> Measurement:
        """Build from a ``summary.json`` RUN (CONTRACTS.md): effective settings, tok/s, τ, histogram."""
        eff = run.get("effective") or {}
        settings = None
        if eff.get("speculative_algorithm") and eff.get("speculative_num_steps"):
            settings = Settings(int(eff["speculative_num_steps"]), int(eff.get("speculative_eagle_topk") or 1),
                                int(eff.get("speculative_num_draft_tokens") or 0))
        tpot = run.get("tpot_ms") or {}
        return cls(settings, run.get("output_tok_s"), concurrency, run.get("accept_length"),
                   run.get("accept_histogram"), tpot.get("mean") if isinstance(tpot, Mapping) else None,
                   label=run.get("profile"))

    def tau(self) -> float | None:
        """Accept length: measured, else from the histogram (1 + mean accepted drafts)."""
        if self.accept_length:
            return float(self.accept_length)
        h = self.accept_histogram
        if h and sum(h) > 0:
            return 1.0 + sum(k * c for k, c in enumerate(h)) / float(sum(h))
        return None

    def round_time_ms(self) -> tuple[float | None, str]:
        """Observed time of one verify round (ms) and its source (see module docstring)."""
        b = max(1, int(self.concurrency))
        tau = self.tau() if self.settings is not None else 1.0
        if tau is None:
            return None, "no accept length"
        if self.output_tok_s and self.output_tok_s > 0:
            return 1000.0 * b * tau / float(self.output_tok_s), "output tok/s"
        if self.round_ms:
            return float(self.round_ms), "decode log"
        if self.tpot_ms:
            return float(self.tpot_ms) * tau, "TPOT"
        return None, "no timing"

    def tok_s(self) -> float | None:
        """Output tok/s, derived from the round time when only that is known."""
        if self.output_tok_s:
            return float(self.output_tok_s)
        t, _ = self.round_time_ms()
        tau = self.tau() if self.settings is not None else 1.0
        return 1000.0 * max(1, self.concurrency) * tau / t if t and tau else None


def round_ms_from_decode_log(gen_throughput: float, accept_len: float, running_req: int) -> float:
    """Round time (ms) from a ``Decode batch`` log window (FACTS.md §5): rounds/s =
    gen_throughput / (accept_len · #running-req)."""
    return 1000.0 * accept_len * running_req / gen_throughput


# --- SGLang normalisation -----------------------------------------------------------------------


def _effective(steps: int, topk: int, draft_tokens: int) -> Settings | None:
    """What SGLang runs for these flags, or None when it refuses them.

    Uses ``specdash.sglang.command.normalize_speculative`` (the launcher's rules: topk 1 forces
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

    Unless ``dominated``, trees with more steps than draft nodes (steps > draft tokens - 1) are
    left out too: the tree cannot be deeper than its N - 1 nodes, so the extra draft steps are
    pure cost and (N - 1, topk, N) is always at least as fast.
    """
    out = []
    for s in steps:
        for k in topks:
            for n in drafts:
                eff = _effective(s, k, n)
                if eff is None or eff != Settings(s, k, n):
                    continue
                if not dominated and s > n - 1:
                    continue
                out.append(eff)
    return sorted(set(out))


def _spec(ms: Iterable[Measurement]) -> list[Measurement]:
    return [m for m in ms if m.settings is not None]

