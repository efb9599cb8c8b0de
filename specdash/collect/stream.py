"""Per-request records → run-scoped statistics (the numbers ``summary.json`` reports).

Definitions (``summary.json``, README "Definitions"; matching SGLang 0.5.23's own
``sglang.benchmark.serving`` and ``meta_info``):

- ``output_tok_s`` = Σ completion_tokens / duration_s, duration = first request sent →
  last response finished (wall clock).
- TTFT = first streamed event carrying a token − request sent (ms).
- TPOT = (e2e − TTFT) / (completion_tokens − 1) per request (ms).
- ITL: each event's gap spread evenly over the tokens it carries (ms), pooled.
- e2e = request sent → response finished (ms), per successful request.  Every latency
  distribution is ``{mean, p50, p90, p95, p99, p99.9, max}`` (:data:`specdash.collect.columns.PERCENTILES`).
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
- ``accept_by_position`` = per draft position {position, reached, accepted, rate}, from that
  pooled histogram (:mod:`specdash.sglang.positions`: rate = P(accepted | reached)).

Bookkeeping is streaming (:class:`RunStats`): a record is folded into running sums and a few
compact float64 columns as it arrives and need not be kept, so a 100k-request run (or its
``--resume``) costs memory per request in bytes, not in record dicts; every figure is the one the
list-of-dicts computation gives, bit for bit, except an ITL mean past 2**20 pooled ITLs
(:class:`ValuePool`: exact percentiles from value counts, the mean within 1 ulp).

A record is the JSON dict a request produces (``requests.jsonl`` line): at least
``ok``, ``completion_tokens``, ``ts_sent``/``ts_done`` (wall clock, s), ``ttft_s``,
``e2e_s``, ``itl_s`` (list, s) and ``spec`` ({verify_ct, correct_drafts,
proposed_drafts, histogram} or null).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from specdash.collect.columns import (
    QuantileSketch,
    ValuePool,
    column_distribution,
    new_column,
)
from specdash.results import GoodputFields, RunFigures
from specdash.sglang.positions import accept_fields
from specdash.sglang.records import request_counts

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
        if not 0 < ms <= 1e9:  # NaN and inf too
            raise ValueError(f"--goodput {item!r}: the SLO must be > 0 ms and at most 1e9 ms (~12 days)")
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

    def add(self, completion_tokens: int, spec: dict | None, *, histogram: bool = True) -> None:
        """Fold one request's ``spec`` block (ignored when None or without verify rounds);
        ``histogram=False`` leaves :attr:`histogram` alone (totals that never report it)."""
        if not spec or not spec.get("verify_ct"):
            return
        self.requests += 1
        self.tokens += int(completion_tokens)
        self.verify_ct += int(spec["verify_ct"])
        if spec.get("correct_drafts") is not None:
            self.correct += int(spec["correct_drafts"])
        if spec.get("proposed_drafts") is not None:
            self.proposed += int(spec["proposed_drafts"])
        b = spec.get("histogram") if histogram else None
        if not b:
            return
        h = self.histogram
        if not h:
            self.histogram = list(b)
        elif len(b) <= len(h):  # in place (the running totals of a long run): same sums as add_histograms
            for i, v in enumerate(b):
                h[i] += int(v)
        else:
            self.histogram = add_histograms(h, b)

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


class _Group:
    """One ``breakdowns`` group, folded record by record: counts, pooled spec, per-request tok/s."""

    __slots__ = ("rates", "requests", "spec", "tokens")

    def __init__(self, bounded: bool = False) -> None:
        self.spec = SpecTotals()
        self.tokens = 0
        self.requests = 0
        self.rates = new_column(bounded)

    def add(self, n: int, rec: dict) -> None:
        self.requests += 1
        self.tokens += n
        self.spec.add(n, rec.get("spec"), histogram=False)  # a group reports no histogram
        if rec.get("e2e_s"):
            self.rates.append(n / rec["e2e_s"])

    def fields(self, proposed_per_round: float | None) -> dict:
        spec = self.spec
        if proposed_per_round is not None:
            rate = spec.correct / (spec.verify_ct * proposed_per_round) if spec.verify_ct and proposed_per_round \
                else None
        else:
            rate = spec.accept_rate
        if isinstance(self.rates, QuantileSketch):
            p50 = self.rates.median()
        else:
            rates = sorted(self.rates)
            p50 = rates[len(rates) // 2] if rates else None
        return {"requests": self.requests, "output_tokens": self.tokens, "accept_length": spec.accept_length,
                "accept_rate": rate, "request_tok_s_p50": p50}


def _nan(v) -> float:
    return math.nan if v is None else v


class RunStats:
    """Accumulates finished-request records; :meth:`summary` gives the run-scoped numbers.

    ``segments`` lets a resumed run add a second (first sent → last done) window:
    duration is the sum of the segments' windows.

    Streaming: :meth:`add` folds a record into running sums and a few compact columns and drops
    it — per successful request 7 float64 (ttft, tpot, e2e and the goodput copies of them, the
    group's tok/s: 56 bytes) plus its (prompt_index, repeat) key in a set; per failed request its
    key; per segment a send/done window; ITLs pooled in a :class:`ValuePool` (8 bytes per token
    up to 2**20 tokens, then 16 bytes per distinct value).  The columns keep record order, so
    every figure is what the old list-of-dicts code computed, bit for bit, except the ITL mean
    beyond 2**20 pooled ITLs (within 1 ulp of exact; :class:`ValuePool`).

    ``bounded=True`` (the dashboard: runs of hours) keeps memory independent of the number of
    requests: the per-request columns are :class:`QuantileSketch` es (percentiles within 0.5 %,
    counts, sums, means and maxima exact), no (prompt, repeat) key is kept — :meth:`done_keys` is
    empty and every failure counts in :meth:`failed_count` —, and neither :meth:`goodput` nor
    :meth:`state` is available.

    Args:
        records: records to fold at once (also kept in :attr:`records` when ``keep_records``).
        keep_records: keep each added record in :attr:`records` too (a live UI's table, the
            records a run returns for paired comparisons); :meth:`fold` never keeps them.
        bounded: see above.
    """

    def __init__(self, records: Iterable[dict] = (), *, keep_records: bool = True, bounded: bool = False) -> None:
        self.keep_records = keep_records
        self.bounded = bounded
        #: the records added with :meth:`add` / :meth:`extend` when ``keep_records`` (else empty)
        self.records: list[dict] = []
        self.ok_count = 0
        self.count = 0
        #: highest ``segment`` of any record folded (-1 when none)
        self.max_segment = -1
        self._tokens = 0
        self._spec = SpecTotals()
        self._ttft, self._tpot, self._e2e = new_column(bounded), new_column(bounded), new_column(bounded)
        self._g_ttft, self._g_tpot, self._g_e2e = array("d"), array("d"), array("d")  # NaN = None (not when bounded)
        self._itl = ValuePool()
        self._done: set = set()
        self._failed_keys: list = []
        self._failed_n = 0  # bounded: failures counted, no keys
        self._windows: dict[int, list[float]] = {}
        self._sends: dict[int, list] = {}  # segment → [sends, first, last]
        self._cats: dict[str, _Group] = {}
        self._buckets: dict[str, _Group] = {}
        self._v_ct = self._v_vc = self._v_spec_ct = self._v_n = 0  # verify_server's sums
        self.extend(records)

    def add(self, record: dict) -> None:
        """Add one finished request's record."""
        if self.keep_records:
            self.records.append(record)
        self._fold_one(record)

    def extend(self, records: Iterable[dict]) -> None:
        """Add several records."""
        for r in records:
            self.add(r)

    def fold(self, records: Iterable[dict]) -> None:
        """Add records without keeping them (a resumed run's earlier records: only the figures)."""
        for r in records:
            self._fold_one(r)

    def _fold_one(self, r: dict) -> None:
        self.count += 1
        seg = int(r.get("segment", 0))
        self.max_segment = max(self.max_segment, seg)
        ct, vc = request_counts(r)
        if ct is not None:
            self._v_n += 1
            self._v_ct += ct
            if vc:
                self._v_vc += vc
                self._v_spec_ct += ct
        ts_sent, ts_done = r.get("ts_sent"), r.get("ts_done")
        if ts_sent is not None:
            s = self._sends.get(seg)
            t = float(ts_sent)
            if s is None:
                self._sends[seg] = [1, t, t]
            else:
                s[0] += 1
                s[1] = min(s[1], t)
                s[2] = max(s[2], t)
        key = (r.get("prompt_index"), r.get("repeat"))
        if not r.get("ok"):
            if self.bounded:
                self._failed_n += 1
            else:
                self._failed_keys.append(key)
            return
        self.ok_count += 1
        if not self.bounded:
            self._done.add(key)
        if ts_sent is not None and ts_done is not None:
            w = self._windows.get(seg)
            if w is None:
                self._windows[seg] = [ts_sent, ts_done]
            else:
                w[0] = min(w[0], ts_sent)
                w[1] = max(w[1], ts_done)
        n = int(r.get("completion_tokens") or 0)
        self._tokens += n
        self._spec.add(n, r.get("spec"))
        ttft, e2e = r.get("ttft_s"), r.get("e2e_s")
        t = tpot_s(r)
        if ttft is not None:
            self._ttft.append(ttft)
        if e2e is not None:
            self._e2e.append(e2e)
        if t is not None:
            self._tpot.append(t)
        if not self.bounded:
            self._g_ttft.append(_nan(ttft))
            self._g_tpot.append(_nan(t))
            self._g_e2e.append(_nan(e2e))
        self._itl.extend(r.get("itl_s") or ())
        if r.get("category"):
            g = self._cats.get(str(r["category"]))
            if g is None:
                g = self._cats[str(r["category"])] = _Group(self.bounded)
            g.add(n, r)
        if r.get("prompt_tokens") is not None:
            ctx = int(r.get("prompt_tokens") or 0) + n
            label = next(lab for hi, lab in CONTEXT_BUCKETS if ctx < hi)
            g = self._buckets.get(label)
            if g is None:
                g = self._buckets[label] = _Group(self.bounded)
            g.add(n, r)

    # -- state (the resume checkpoint of :class:`~specdash.bench.rundir.RunDir`) ----------------
    #: bump when the state's shape changes: an older checkpoint is then ignored (the records re-read)
    STATE_FORMAT = 1

    def state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(meta, arrays)``: the folded statistics (never the kept records) as JSON-able ``meta``
        and float64 / int64 ``arrays`` — :meth:`from_state` rebuilds an object whose every read-out
        equals this one's, bit for bit (same column order, same ITL pool)."""
        def spec_json(t: SpecTotals) -> list:
            return [t.tokens, t.verify_ct, t.correct, t.proposed, t.histogram, t.requests]

        if self.bounded:
            raise ValueError("bounded statistics keep sketches, not a state to save")
        itl_meta, itl_arrays = self._itl.state()
        arrays = {f"itl_{k}": v for k, v in itl_arrays.items()}
        for name in ("_ttft", "_tpot", "_e2e", "_g_ttft", "_g_tpot", "_g_e2e"):
            arrays[name] = np.frombuffer(getattr(self, name), dtype=float).copy()
        groups = {}
        for kind in ("_cats", "_buckets"):
            groups[kind] = []
            for i, (name, g) in enumerate(getattr(self, kind).items()):
                groups[kind].append([name, g.tokens, g.requests, spec_json(g.spec)])
                arrays[f"{kind}_{i}"] = np.frombuffer(g.rates, dtype=float).copy()
        meta = {
            "format": self.STATE_FORMAT, "count": self.count, "ok_count": self.ok_count,
            "max_segment": self.max_segment, "tokens": self._tokens, "spec": spec_json(self._spec),
            "itl": itl_meta, "done": [list(k) for k in self._done], "failed": [list(k) for k in self._failed_keys],
            "windows": [[seg, *w] for seg, w in self._windows.items()],
            "sends": [[seg, *v] for seg, v in self._sends.items()],
            "verify": [self._v_ct, self._v_vc, self._v_spec_ct, self._v_n], **groups,
        }
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict, arrays: dict[str, np.ndarray]) -> RunStats:
        """The statistics :meth:`state` described (keeping no records).

        Raises:
            ValueError: another :data:`STATE_FORMAT`, or a field missing or of the wrong shape.
        """
        if not isinstance(meta, dict) or meta.get("format") != cls.STATE_FORMAT:
            raise ValueError(f"statistics state format {meta.get('format') if isinstance(meta, dict) else meta!r}, "
                             f"not {cls.STATE_FORMAT}")

        def spec_of(v: list) -> SpecTotals:
            tokens, vct, correct, proposed, hist, requests = v
            return SpecTotals(int(tokens), int(vct), int(correct), int(proposed),
                              None if hist is None else [int(x) for x in hist], int(requests))

        def col(name: str) -> array:
            return array("d", np.asarray(arrays[name], dtype=float).tobytes())

        st = cls(keep_records=False)
        try:
            st.count, st.ok_count = int(meta["count"]), int(meta["ok_count"])
            st.max_segment, st._tokens = int(meta["max_segment"]), int(meta["tokens"])
            st._spec = spec_of(meta["spec"])
            st._itl = ValuePool.from_state(meta["itl"], {k[4:]: v for k, v in arrays.items() if k.startswith("itl_")})
            for name in ("_ttft", "_tpot", "_e2e", "_g_ttft", "_g_tpot", "_g_e2e"):
                setattr(st, name, col(name))
            st._done = {tuple(k) for k in meta["done"]}
            st._failed_keys = [tuple(k) for k in meta["failed"]]
            st._windows = {int(seg): [lo, hi] for seg, lo, hi in meta["windows"]}
            st._sends = {int(seg): [int(n), lo, hi] for seg, n, lo, hi in meta["sends"]}
            st._v_ct, st._v_vc, st._v_spec_ct, st._v_n = (int(x) for x in meta["verify"])
            for kind in ("_cats", "_buckets"):
                out = getattr(st, kind)
                for i, (name, tokens, requests, spec) in enumerate(meta[kind]):
                    g = _Group()
                    g.tokens, g.requests, g.spec = int(tokens), int(requests), spec_of(spec)
                    g.rates = col(f"{kind}_{i}")
                    out[str(name)] = g
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"statistics state incomplete or malformed: {type(e).__name__}: {e}") from None
        if len(st._g_ttft) != st.ok_count or len(st._done) > st.ok_count:
            raise ValueError(f"statistics state inconsistent: {len(st._g_ttft)} requests in the columns, "
                             f"{st.ok_count} counted")
        return st

    # -- read-outs ----------------------------------------------------------------------------
    def done_keys(self) -> set:
        """``(prompt_index, repeat)`` of every successful record (a resume skips them)."""
        return self._done

    def failed_count(self) -> int:
        """Failed records not made good later by a success of the same (prompt, repeat); a record
        without ``prompt_index`` always counts (a resumed run re-sends failures)."""
        if self.bounded:
            return self._failed_n
        return sum(1 for k in self._failed_keys if k not in self._done or k[0] is None)

    def verify_records(self) -> list[dict]:
        """Pooled stand-ins for the records :func:`~specdash.eagle3.verify.verify_server` reads:
        it only sums completion tokens and verify rounds, so two records carry the same sums (the
        tokens of records without speculation, then those with it) — [] when no record had a
        completion count."""
        if not self._v_n:
            return []
        return [{"completion_tokens": self._v_ct - self._v_spec_ct, "spec": None},
                {"completion_tokens": self._v_spec_ct, "spec": {"verify_ct": self._v_vc}}]

    def duration_s(self) -> float | None:
        """Σ over segments of (last ts_done − first ts_sent) of the *successful* requests, s.

        Failed requests are left out of the window as their tokens are (a resumed run's
        failed attempts must not stretch it); None when nothing succeeded.
        """
        if not self._windows:
            return None
        return float(sum(hi - lo for lo, hi in self._windows.values()))

    def send_rate(self) -> float | None:
        """The realized arrival rate (requests/s): Σ over segments of (sends − 1) ÷ Σ (last ts_sent −
        first ts_sent), every request sent counted (failed ones too); None with fewer than two sends
        in every segment.  Under ``--request-rate`` it is the rate the client really delivered."""
        gaps, span = 0, 0.0
        for n, lo, hi in self._sends.values():
            if n >= 2:
                gaps += n - 1
                span += hi - lo
        if not gaps:
            return None
        return gaps / span if span > 0 else float("inf")

    def goodput(self, slo: dict[str, float] | None) -> GoodputFields:
        """``{goodput, goodput_slo, goodput_fraction}`` under the SLOs ``slo`` (ms, :func:`parse_slo`):
        goodput = requests meeting every SLO ÷ duration_s (requests/s, vLLM's definition);
        fraction = those ÷ all requests (successes plus failures not made good later).  All None
        without SLOs.  Same rule as :func:`meets_slo`, over the columns."""
        if not slo:
            return {"goodput": None, "goodput_slo": None, "goodput_fraction": None}
        if self.bounded:
            raise ValueError("goodput needs the per-request columns, which bounded statistics do not keep")
        good_mask = np.ones(self.ok_count, dtype=bool)
        for key, limit in slo.items():
            if key == "ttft_ms":
                v = np.frombuffer(self._g_ttft, dtype=float)
                good_mask &= v * 1000.0 <= limit
            elif key == "tpot_ms":
                v = np.frombuffer(self._g_tpot, dtype=float)
                good_mask &= np.isnan(v) | (v * 1000.0 <= limit)
            elif key == "e2e_ms":
                v = np.frombuffer(self._g_e2e, dtype=float)
                good_mask &= v * 1000.0 <= limit
            else:
                raise ValueError(f"unknown SLO {key!r}")
        good = int(good_mask.sum())
        dur = self.duration_s()
        total = self.ok_count + self.failed_count()
        return {"goodput": good / dur if dur else None, "goodput_slo": dict(slo),
                "goodput_fraction": good / total if total else None}

    def summary(self, proposed_per_round: float | None = None, *, steps: int | None = None,
                draft_tokens: int | None = None) -> RunFigures:
        """The run-scoped fields of a ``summary.json`` RUN object (null where not applicable).

        ``proposed_per_round``: drafts proposed per request-round, replacing the records'
        ``proposed_drafts`` in ``accept_rate`` (= Σ correct / (Σ verify rounds × it)); for
        adaptive runs, whose records count the launch tier's drafts (see the module docstring).
        ``steps`` / ``draft_tokens``: the effective speculative settings, which set how many draft
        positions ``accept_by_position`` lists (:func:`specdash.sglang.positions.accept_fields`; without
        them the histogram's length decides).
        """
        spec = self._spec
        tokens = self._tokens
        dur = self.duration_s()
        ok = self.ok_count
        return RunFigures(
            requests=ok,
            # failures not made good later (a resumed run re-sends them)
            failed_requests=self.failed_count(),
            output_tokens=tokens,
            duration_s=dur,
            output_tok_s=(tokens / dur) if dur else None,
            ttft_ms=column_distribution(self._ttft),
            tpot_ms=column_distribution(self._tpot),
            itl_ms=self._itl.distribution(),
            e2e_ms=column_distribution(self._e2e),
            request_throughput=(ok / dur) if dur else None,
            achieved_request_rate=self.send_rate(),
            accept_length=spec.accept_length,
            accept_rate=(spec.correct / (spec.verify_ct * proposed_per_round)
                         if spec.verify_ct and proposed_per_round else None)
            if proposed_per_round is not None else spec.accept_rate,
            accept_histogram=list(spec.histogram) if spec.histogram is not None else None,
            **accept_fields(spec.histogram, steps, draft_tokens),
            **self.breakdowns(proposed_per_round),
        )

    def breakdowns(self, proposed_per_round: float | None = None) -> dict:
        """``by_category`` and ``by_context``: the successful requests grouped by their suite category and
        by context length (prompt + completion tokens, buckets of :data:`CONTEXT_BUCKETS`), each group
        with ``requests``, ``output_tokens``, ``accept_length`` / ``accept_rate`` (pooled, as for the
        run) and the median per-request ``request_tok_s``.  A long-context collapse shows as a bucket
        whose accept length falls (sglang#30763) instead of being averaged away.  Groups without records
        are left out; ``by_category`` is None when no record has a category."""
        order = [lab for _, lab in CONTEXT_BUCKETS]
        cats = self._cats
        return {
            "by_category": {c: cats[c].fields(proposed_per_round) for c in sorted(cats)} if cats else None,
            "by_context": [{"context_tokens": lab, **self._buckets[lab].fields(proposed_per_round)}
                           for lab in order if lab in self._buckets] or None,
        }
