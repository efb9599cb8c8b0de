"""Per-request records → run-scoped statistics (the numbers ``summary.json`` reports).

Definitions (``summary.json``, README "Definitions"; matching SGLang 0.5.23's own
``sglang.benchmark.serving`` and ``meta_info``):

- ``output_tok_s`` = Σ completion_tokens / duration_s, duration = first request sent →
  last response finished (wall clock).
- TTFT = first streamed event carrying a token − request sent (ms).
- TPOT = (e2e − TTFT) / (completion_tokens − 1) per request (ms).
- ITL: each event's gap spread evenly over the tokens it carries (ms), pooled.
- ``accept_length`` (τ, bonus token included) = Σ completion_tokens / Σ spec_verify_ct over
  this run's speculative requests (pooled, not a mean of means).
- ``accept_rate`` (α, bonus excluded) = Σ correct drafts / Σ proposed drafts, where
  proposed = verify rounds × (num_draft_tokens − 1) as SGLang reports it.  Under adaptive
  speculation SGLang's per-request ``proposed`` still uses the *launch* draft tokens
  (``tokenizer_manager.py`` ``_calculate_spec_decoding_metrics`` reads the tokenizer's copy of
  the server args, which the tier switches never update), so rounds at another tier are
  miscounted; the bench then passes ``proposed_per_round`` — the drafts a request-round really
  proposed, averaged over the tiers that ran (:meth:`RunStats.summary`).
- ``accept_histogram[k]`` = verify rounds that accepted exactly k drafts, summed
  element-wise over requests (SGLang's ``spec_correct_drafts_histogram``).

A record is the JSON dict a request produces (``requests.jsonl`` line): at least
``ok``, ``completion_tokens``, ``ts_sent``/``ts_done`` (wall clock, s), ``ttft_s``,
``e2e_s``, ``itl_s`` (list, s) and ``spec`` ({verify_ct, correct_drafts,
proposed_drafts, histogram} or null).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np


def distribution_ms(values_s: Sequence[float]) -> dict | None:
    """``{mean, p50, p90, p99}`` in ms of values given in seconds; None when empty."""
    if len(values_s) == 0:
        return None
    arr = np.asarray(values_s, dtype=float) * 1000.0
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"mean": float(arr.mean()), "p50": float(p50), "p90": float(p90), "p99": float(p99)}


def tpot_s(record: dict) -> float | None:
    """SGLang's per-request TPOT in seconds: (e2e − ttft) / (completion_tokens − 1)."""
    n = record.get("completion_tokens") or 0
    ttft, e2e = record.get("ttft_s"), record.get("e2e_s")
    if n <= 1 or ttft is None or e2e is None:
        return None
    return (e2e - ttft) / (n - 1)


def add_histograms(a: list[int] | None, b: Sequence[int] | None) -> list[int] | None:
    """Element-wise sum of two histograms of different lengths (None = empty)."""
    if not b:
        return a
    if not a:
        return list(b)
    out = list(a) + [0] * max(0, len(b) - len(a))
    for i, v in enumerate(b):
        out[i] += int(v)
    return out


@dataclass
class SpecTotals:
    """Pooled speculative counters over a set of requests."""

    tokens: int = 0
    verify_ct: int = 0
    correct: int = 0
    proposed: int = 0
    histogram: list[int] | None = None
    requests: int = 0

    def add(self, completion_tokens: int, spec: dict | None) -> None:
        """Fold one request's ``spec`` block (ignored when None or without verify rounds)."""
        if not spec or not spec.get("verify_ct"):
            return
        self.requests += 1
        self.tokens += int(completion_tokens)
        self.verify_ct += int(spec["verify_ct"])
        if spec.get("correct_drafts") is not None:
            self.correct += int(spec["correct_drafts"])
        if spec.get("proposed_drafts") is not None:
            self.proposed += int(spec["proposed_drafts"])
        self.histogram = add_histograms(self.histogram, spec.get("histogram"))

    @property
    def accept_length(self) -> float | None:
        """Σ tokens / Σ verify rounds (bonus included); None without speculative requests."""
        return self.tokens / self.verify_ct if self.verify_ct else None

    @property
    def accept_rate(self) -> float | None:
        """Σ correct drafts / Σ proposed drafts (bonus excluded); None when unknown."""
        return self.correct / self.proposed if self.proposed else None


@dataclass
class RunStats:
    """Accumulates finished-request records; :meth:`summary` gives the run-scoped numbers.

    ``segments`` lets a resumed run add a second (first sent → last done) window:
    duration is the sum of the segments' windows.
    """

    records: list[dict] = field(default_factory=list)

    def add(self, record: dict) -> None:
        """Add one finished request's record."""
        self.records.append(record)

    def extend(self, records: Iterable[dict]) -> None:
        """Add several records."""
        self.records.extend(records)

    def duration_s(self) -> float | None:
        """Σ over segments of (last ts_done − first ts_sent) of the *successful* requests, s.

        Failed requests are left out of the window as their tokens are (a resumed run's
        failed attempts must not stretch it); None when nothing succeeded.
        """
        windows: dict[int, list[float]] = {}
        for r in self.records:
            if not r.get("ok") or r.get("ts_sent") is None or r.get("ts_done") is None:
                continue
            seg = int(r.get("segment", 0))
            w = windows.setdefault(seg, [r["ts_sent"], r["ts_done"]])
            w[0] = min(w[0], r["ts_sent"])
            w[1] = max(w[1], r["ts_done"])
        if not windows:
            return None
        return float(sum(hi - lo for lo, hi in windows.values()))

    def summary(self, proposed_per_round: float | None = None) -> dict:
        """The run-scoped fields of a ``summary.json`` RUN object (null where not applicable).

        ``proposed_per_round``: drafts proposed per request-round, replacing the records'
        ``proposed_drafts`` in ``accept_rate`` (= Σ correct / (Σ verify rounds × it)); for
        adaptive runs, whose records count the launch tier's drafts (see the module docstring).
        """
        ok = [r for r in self.records if r.get("ok")]
        spec = SpecTotals()
        ttft, tpot, itl = [], [], []
        tokens = 0
        for r in ok:
            n = int(r.get("completion_tokens") or 0)
            tokens += n
            spec.add(n, r.get("spec"))
            if r.get("ttft_s") is not None:
                ttft.append(r["ttft_s"])
            t = tpot_s(r)
            if t is not None:
                tpot.append(t)
            itl.extend(r.get("itl_s") or ())
        dur = self.duration_s()
        done = {(r.get("prompt_index"), r.get("repeat")) for r in ok}
        failed = [r for r in self.records if not r.get("ok")]
        return {
            "requests": len(ok),
            # failures not made good later (a resumed run re-sends them)
            "failed_requests": sum(1 for r in failed if (r.get("prompt_index"), r.get("repeat")) not in done
                                   or r.get("prompt_index") is None),
            "output_tokens": tokens,
            "duration_s": dur,
            "output_tok_s": (tokens / dur) if dur else None,
            "ttft_ms": distribution_ms(ttft),
            "tpot_ms": distribution_ms(tpot),
            "itl_ms": distribution_ms(itl),
            "accept_length": spec.accept_length,
            "accept_rate": (spec.correct / (spec.verify_ct * proposed_per_round)
                            if spec.verify_ct and proposed_per_round else None)
            if proposed_per_round is not None else spec.accept_rate,
            "accept_histogram": spec.histogram,
        }
