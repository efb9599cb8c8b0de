"""Per-request records → run-scoped statistics (the numbers ``summary.json`` reports).

Definitions (``summary.json``, README "Definitions"; matching SGLang 0.5.23's own
``sglang.benchmark.serving`` and ``meta_info``):

- ``output_tok_s`` = Σ completion_tokens / duration_s, duration = first request sent →
  last response finished (wall clock).
- TTFT = first streamed event carrying a token − request sent (ms).
- TPOT = (e2e − TTFT) / (completion_tokens − 1) per request (ms).
- ITL: each event's gap spread evenly over the tokens it carries (ms), pooled.
- e2e = request sent → response finished (ms), per successful request.  Every latency
  distribution is ``{mean, p50, p90, p95, p99, p99.9, max}`` (:data:`PERCENTILES`).
- ``request_throughput`` = successful requests / duration_s (SGLang's and vLLM's "Request
  throughput"); ``achieved_request_rate`` = the realized send rate (:meth:`RunStats.send_rate`).
- goodput (``--goodput ttft:200 tpot:30``, vLLM's) = requests meeting every SLO / duration_s
  (:meth:`RunStats.goodput`).
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

#: Percentiles of every latency distribution (key ``p<q>``: ``p50`` … ``p99.9``, as vLLM's
#: ``--metric-percentiles`` names them); numpy's linear interpolation, as both benchmarks use.
PERCENTILES = (50, 90, 95, 99, 99.9)


def _pkey(q: float) -> str:
    return f"p{int(q)}" if float(q).is_integer() else f"p{q}"


def distribution_ms(values_s: Sequence[float]) -> dict | None:
    """``{mean, p50, p90, p95, p99, p99.9, max}`` in ms of values given in seconds; None when
    empty.  (``mean``/``p50``/``p90``/``p99`` were the original keys; the others are additive.)"""
    if len(values_s) == 0:
        return None
    arr = np.asarray(values_s, dtype=float) * 1000.0
    qs = np.percentile(arr, PERCENTILES)
    out = {"mean": float(arr.mean())}
    out.update({_pkey(q): float(v) for q, v in zip(PERCENTILES, qs)})
    out["max"] = float(arr.max())
    return out


#: ``--goodput`` metric names (vLLM's ``ttft``, ``tpot``, ``e2el``; ``e2e`` also) → SLO key.
SLO_METRICS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms", "e2el": "e2e_ms"}


def parse_slo(items: Sequence[str]) -> dict[str, float]:
    """``["ttft:200", "tpot:30", "e2e:5000"]`` (ms, vLLM's ``--goodput`` spelling) →
    ``{"ttft_ms": 200.0, "tpot_ms": 30.0, "e2e_ms": 5000.0}``.

    Raises ValueError on an unknown metric, a malformed item, a value ≤ 0 or a repeated metric.
    """
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = str(item).partition(":")
        key = SLO_METRICS.get(name.strip().lower())
        if not sep or key is None:
            raise ValueError(f"--goodput {item!r}: expected METRIC:MS with METRIC one of ttft, tpot, e2e "
                             "(e.g. ttft:200 tpot:30)")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"--goodput {item!r}: {value!r} is not a number of milliseconds") from None
        if not ms > 0 or ms != ms:
            raise ValueError(f"--goodput {item!r}: the SLO must be > 0 ms")
        if key in out:
            raise ValueError(f"--goodput {item!r}: {name} given twice")
        out[key] = ms
    if not out:
        raise ValueError("--goodput needs at least one METRIC:MS (ttft, tpot, e2e)")
    return out


def meets_slo(record: dict, slo: dict[str, float]) -> bool:
    """Whether a successful request meets every SLO of ``slo`` (ms; value ≤ SLO meets it).

    As vLLM's goodput: a request with fewer than two tokens has no TPOT and meets a TPOT SLO;
    a TTFT or e2e the record lacks does not meet one.  A failed request meets none.
    """
    if not record.get("ok"):
        return False
    for key, limit in slo.items():
        if key == "ttft_ms":
            v = record.get("ttft_s")
        elif key == "tpot_ms":
            v = tpot_s(record)
            if v is None:
                continue
        elif key == "e2e_ms":
            v = record.get("e2e_s")
        else:
            raise ValueError(f"unknown SLO {key!r}")
        if v is None or v * 1000.0 > limit:
            return False
    return True


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


#: Context-length buckets of :meth:`RunStats.breakdowns`: (upper bound, exclusive, in tokens; label).
CONTEXT_BUCKETS = ((1024, "<1K"), (4096, "1K-4K"), (16384, "4K-16K"), (32768, "16K-32K"), (float("inf"), ">=32K"))


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

    def send_rate(self) -> float | None:
        """The realized arrival rate (requests/s): Σ over segments of (sends − 1) ÷ Σ (last ts_sent −
        first ts_sent), every request sent counted (failed ones too); None with fewer than two sends
        in every segment.  Under ``--request-rate`` it is the rate the client really delivered."""
        sends: dict[int, list[float]] = {}
        for r in self.records:
            if r.get("ts_sent") is not None:
                sends.setdefault(int(r.get("segment", 0)), []).append(float(r["ts_sent"]))
        gaps, span = 0, 0.0
        for ts in sends.values():
            if len(ts) >= 2:
                gaps += len(ts) - 1
                span += max(ts) - min(ts)
        if not gaps:
            return None
        return gaps / span if span > 0 else float("inf")

    def goodput(self, slo: dict[str, float] | None) -> dict:
        """``{goodput, goodput_slo, goodput_fraction}`` under the SLOs ``slo`` (ms, :func:`parse_slo`):
        goodput = requests meeting every SLO ÷ duration_s (requests/s, vLLM's definition);
        fraction = those ÷ all requests (successes plus failures not made good later).  All None
        without SLOs."""
        if not slo:
            return {"goodput": None, "goodput_slo": None, "goodput_fraction": None}
        ok = [r for r in self.records if r.get("ok")]
        good = sum(1 for r in ok if meets_slo(r, slo))
        done = {(r.get("prompt_index"), r.get("repeat")) for r in ok}
        failed = sum(1 for r in self.records if not r.get("ok")
                     and ((r.get("prompt_index"), r.get("repeat")) not in done or r.get("prompt_index") is None))
        dur = self.duration_s()
        total = len(ok) + failed
        return {"goodput": good / dur if dur else None, "goodput_slo": dict(slo),
                "goodput_fraction": good / total if total else None}

    def summary(self, proposed_per_round: float | None = None) -> dict:
        """The run-scoped fields of a ``summary.json`` RUN object (null where not applicable).

        ``proposed_per_round``: drafts proposed per request-round, replacing the records'
        ``proposed_drafts`` in ``accept_rate`` (= Σ correct / (Σ verify rounds × it)); for
        adaptive runs, whose records count the launch tier's drafts (see the module docstring).
        """
        ok = [r for r in self.records if r.get("ok")]
        spec = SpecTotals()
        ttft, tpot, itl, e2e = [], [], [], []
        tokens = 0
        for r in ok:
            n = int(r.get("completion_tokens") or 0)
            tokens += n
            spec.add(n, r.get("spec"))
            if r.get("ttft_s") is not None:
                ttft.append(r["ttft_s"])
            if r.get("e2e_s") is not None:
                e2e.append(r["e2e_s"])
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
            "e2e_ms": distribution_ms(e2e),
            "request_throughput": (len(ok) / dur) if dur else None,
            "achieved_request_rate": self.send_rate(),
            "accept_length": spec.accept_length,
            "accept_rate": (spec.correct / (spec.verify_ct * proposed_per_round)
                            if spec.verify_ct and proposed_per_round else None)
            if proposed_per_round is not None else spec.accept_rate,
            "accept_histogram": spec.histogram,
            **self.breakdowns(proposed_per_round),
        }

    def breakdowns(self, proposed_per_round: float | None = None) -> dict:
        """``by_category`` and ``by_context``: the successful requests grouped by their suite category and
        by context length (prompt + completion tokens, buckets of :data:`CONTEXT_BUCKETS`), each group
        with ``requests``, ``output_tokens``, ``accept_length`` / ``accept_rate`` (pooled, as for the
        run) and the median per-request ``request_tok_s``.  A long-context collapse shows as a bucket
        whose accept length falls (sglang#30763) instead of being averaged away.  Groups without records
        are left out; ``by_category`` is None when no record has a category."""
        ok = [r for r in self.records if r.get("ok")]

        def group(recs: list[dict]) -> dict:
            spec = SpecTotals()
            toks, rates = 0, []
            for r in recs:
                n = int(r.get("completion_tokens") or 0)
                toks += n
                spec.add(n, r.get("spec"))
                if r.get("e2e_s"):
                    rates.append(n / r["e2e_s"])
            if proposed_per_round is not None:
                rate = spec.correct / (spec.verify_ct * proposed_per_round) if spec.verify_ct and proposed_per_round \
                    else None
            else:
                rate = spec.accept_rate
            rates.sort()
            return {"requests": len(recs), "output_tokens": toks, "accept_length": spec.accept_length,
                    "accept_rate": rate, "request_tok_s_p50": rates[len(rates) // 2] if rates else None}

        cats: dict[str, list[dict]] = {}
        for r in ok:
            if r.get("category"):
                cats.setdefault(str(r["category"]), []).append(r)
        buckets: dict[str, list[dict]] = {}
        for r in ok:
            if r.get("prompt_tokens") is None:
                continue
            ctx = int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0)
            label = next(lab for hi, lab in CONTEXT_BUCKETS if ctx < hi)
            buckets.setdefault(label, []).append(r)
        order = [lab for _, lab in CONTEXT_BUCKETS]
        return {
            "by_category": {c: group(v) for c, v in sorted(cats.items())} if cats else None,
            "by_context": [{"context_tokens": lab, **group(buckets[lab])} for lab in order if lab in buckets] or None,
        }
