"""Latency columns and their distributions: exact where they fit, bounded where they do not.

* :func:`distribution_ms` — ``{mean, p50, p90, p95, p99, p99.9, max}`` of values in seconds, in ms
  (numpy's linear interpolation, as SGLang's ``bench_serving`` and vLLM's ``bench serve`` compute them).
* :class:`ValuePool` — pooled ITLs: every value up to :attr:`ValuePool.RAW_LIMIT`, then value counts
  (exact percentiles from counts, :func:`percentiles_from_counts`; the mean within 1 ulp).
* :class:`QuantileSketch` — a bounded per-request column (``RunStats(bounded=True)``, 1M-request runs).

:class:`specdash.collect.stream.RunStats` keeps its columns in these.
"""

from __future__ import annotations

import bisect
import math
import struct
from array import array
from collections.abc import Iterable, Sequence

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


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's exact product of float64 arrays: ``a * b == p + e`` exactly (no overflow assumed)."""
    def split(x):
        c = x * 134217729.0  # 2**27 + 1 (Veltkamp)
        hi = c - (c - x)
        return hi, x - hi

    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


class ValuePool:
    """Pooled latencies (seconds in, milliseconds out) for an exact :func:`distribution_ms`.

    Up to :attr:`RAW_LIMIT` values it keeps them all, in arrival order, in an ``array('d')``
    (8 bytes each): :meth:`distribution` is then *bit for bit* ``distribution_ms`` of the same
    values.  Beyond, it keeps counts instead of values — memory independent of the number of
    tokens: a value that is an exact multiple of 0.1 µs (every ITL the client writes: ``itl_s`` is
    rounded to 7 decimals) below :attr:`DENSE_TICKS` × 0.1 µs is counted in a dense ``int64`` table
    indexed by tick (16 MB); any other value (finite) in a sorted table of distinct millisecond
    values with counts (16 bytes per distinct value).  Values are folded into the tables from a raw
    buffer of at most :attr:`RAW_LIMIT` values.  From the counts the percentiles, ``max`` and the
    count are still exact — the millisecond value of tick k is ``(k / 1e7) * 1000.0``, the very
    float ``distribution_ms`` scales the value to; the order statistics are looked up in the
    cumulative counts and interpolated with numpy's ``linear`` formula
    (:func:`percentiles_from_counts`), so they equal ``np.percentile`` of the full array.  ``mean``
    is Σ value·count summed exactly (Dekker products + ``math.fsum``) and divided once: within
    1 ulp of the exact mean, where numpy's pairwise ``mean`` of the full array may differ from it
    (and so from this) in the last one or two bits.
    """

    RAW_LIMIT = 1 << 20
    DENSE_TICKS = 1 << 21  # 0.2097152 s
    FOLD_AT = 1 << 22  # raw values buffered between folds in table mode (32 MB)

    def __init__(self) -> None:
        self._raw = array("d")
        self._dense: np.ndarray | None = None  # counts by 0.1 µs tick (table mode)
        self._vals = np.empty(0)  # sorted distinct ms values of the other values (table mode)
        self._counts = np.empty(0, dtype=np.int64)
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def extend(self, values_s: Iterable[float]) -> None:
        """Add values (s)."""
        before = len(self._raw)
        if isinstance(values_s, list):
            try:  # the fast way in (~15 ns a value, 3× array.extend): a record's itl_s list
                self._raw.frombytes(struct.pack(f"{len(values_s)}d", *values_s))
            except struct.error:
                self._raw.extend(values_s)
        else:
            self._raw.extend(values_s)
        self.n += len(self._raw) - before
        if len(self._raw) >= (self.FOLD_AT if self._dense is not None else self.RAW_LIMIT):
            self._fold()

    @staticmethod
    def _merge(v1: np.ndarray, c1: np.ndarray, v2: np.ndarray, c2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Two (sorted distinct values, counts) tables as one."""
        if not v1.size:
            return v2, c2
        u, inv = np.unique(np.concatenate([v1, v2]), return_inverse=True)
        c = np.bincount(inv, weights=np.concatenate([c1, c2]).astype(float), minlength=u.size)
        return u, c.astype(np.int64)

    def _fold(self) -> None:
        if not self._raw:
            return
        if self._dense is None:
            self._dense = np.zeros(self.DENSE_TICKS, dtype=np.int64)
        x = np.frombuffer(self._raw, dtype=float)
        ticks = np.empty(x.size, dtype=np.int32)
        step = 1 << 15  # chunks that stay in cache
        k = np.empty(step)
        ki = np.empty(step, dtype=np.int32)
        ok = np.empty(step, dtype=bool)
        rest = []
        for lo in range(0, x.size, step):
            xc = x[lo:lo + step]
            m = xc.size
            kc, kic, okc = k[:m], ki[:m], ok[:m]
            np.multiply(xc, 1e7, out=kc)
            np.rint(kc, out=kc)
            np.clip(kc, -1, self.DENSE_TICKS, out=kc)
            kic[...] = kc
            np.divide(kc, 1e7, out=kc)
            np.equal(kc, xc, out=okc)
            if okc.all() and kic.min() >= 0 and kic.max() < self.DENSE_TICKS:  # the usual case: all ITL ticks
                ticks[lo:lo + m] = kic
                continue
            okc &= (kic >= 0) & (kic < self.DENSE_TICKS)
            ticks[lo:lo + m] = np.where(okc, kic, -1)
            rest.append(xc[~okc] * 1000.0)
        if rest:
            ticks = ticks[ticks >= 0]
            u, c = np.unique(np.concatenate(rest), return_counts=True)
            self._vals, self._counts = self._merge(self._vals, self._counts, u, c.astype(np.int64))
        self._dense += np.bincount(ticks, minlength=self.DENSE_TICKS)
        del x, ticks
        self._raw = array("d")

    def state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """``(meta, arrays)``: what :meth:`from_state` needs to rebuild this pool exactly (the raw
        buffer as it is, the dense table as its non-zero ticks and counts, the sorted table)."""
        arrays = {"raw": np.frombuffer(self._raw, dtype=float).copy(), "vals": self._vals, "counts": self._counts}
        if self._dense is not None:
            nz = np.flatnonzero(self._dense)
            arrays.update(dense_ticks=nz.astype(np.int64), dense_counts=self._dense[nz])
        return {"n": self.n, "dense": self._dense is not None}, arrays

    @classmethod
    def from_state(cls, meta: dict, arrays: dict[str, np.ndarray]) -> ValuePool:
        """The pool :meth:`state` described.

        Raises:
            ValueError: arrays missing or of the wrong kind, or counts that do not add up to ``n``.
        """
        pool = cls()
        try:
            raw = np.asarray(arrays["raw"], dtype=float)
            pool._raw = array("d", raw.tobytes())
            pool._vals = np.asarray(arrays["vals"], dtype=float)
            pool._counts = np.asarray(arrays["counts"], dtype=np.int64)
            if meta["dense"]:
                ticks = np.asarray(arrays["dense_ticks"], dtype=np.int64)
                if ticks.size and (ticks.min() < 0 or ticks.max() >= cls.DENSE_TICKS):
                    raise ValueError("a dense tick outside the table")
                pool._dense = np.zeros(cls.DENSE_TICKS, dtype=np.int64)
                pool._dense[ticks] = np.asarray(arrays["dense_counts"], dtype=np.int64)
            pool.n = int(meta["n"])
        except (KeyError, TypeError) as e:
            raise ValueError(f"ITL pool state incomplete: {e}") from None
        held = len(pool._raw) + int(pool._counts.sum()) + (int(pool._dense.sum()) if pool._dense is not None else 0)
        if held != pool.n or pool._vals.shape != pool._counts.shape:
            raise ValueError(f"ITL pool state holds {held} values, says {pool.n}")
        return pool

    def distribution(self) -> dict | None:
        """``distribution_ms`` of every value added (see the class docstring for exactness)."""
        if self._dense is None:
            return distribution_ms(np.frombuffer(self._raw, dtype=float)) if self._raw else None
        self._fold()
        nz = np.flatnonzero(self._dense)
        vals, counts = self._merge(self._vals, self._counts, (nz / 1e7) * 1000.0, self._dense[nz])
        p, e = _two_product(vals, counts.astype(float))
        out = {"mean": math.fsum(np.concatenate([p, e]).tolist()) / self.n}
        qs = percentiles_from_counts(vals, counts, PERCENTILES)
        out.update({_pkey(q): float(v) for q, v in zip(PERCENTILES, qs)})
        out["max"] = float(vals[-1])
        return out


def percentiles_from_counts(values: np.ndarray, counts: np.ndarray, q: Sequence[float]) -> np.ndarray:
    """``np.percentile(np.repeat(values, counts), q)`` (method ``linear``) without the repeat.

    ``values`` sorted ascending (float64, finite), ``counts`` ≥ 1 (int); returns float64, one per
    ``q`` (0–100).  Same virtual index ``(n − 1)·q/100``, same neighbours and numpy's ``_lerp``
    arithmetic, so the results are identical to numpy's.
    """
    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    cum = np.cumsum(counts)
    quant = np.true_divide(np.asanyarray(q, dtype=float), 100)
    virtual = (n - 1) * quant
    prev = np.floor(virtual)
    nxt = prev + 1
    above = virtual >= n - 1
    prev[above] = n - 1
    nxt[above] = n - 1
    below = virtual < 0
    prev[below] = 0
    nxt[below] = 0
    gamma = virtual - np.where(above, -1.0, prev)  # numpy subtracts the -1 it uses for "last"
    gamma = np.where(below, virtual - 0.0, gamma)
    a = values[np.searchsorted(cum, prev.astype(np.int64), side="right")]
    b = values[np.searchsorted(cum, nxt.astype(np.int64), side="right")]
    diff = b - a
    res = a + diff * gamma
    np.subtract(b, diff * (1 - gamma), out=res, where=gamma >= 0.5)
    return res


class QuantileSketch:
    """Log-bucketed counts of non-negative values: every quantile within relative accuracy
    :attr:`ALPHA` in memory that does not grow with the count (DDSketch: Masson, Rim and Lee,
    "DDSketch: A Fast and Fully-Mergeable Quantile Sketch with Relative-Error Guarantees", VLDB 2019).

    A value x > 0 is counted in bucket ``ceil(log_γ x)``, γ = (1 + α)/(1 − α), whose representative
    ``2γ^i/(γ + 1)`` is within α of every value in it; values ≤ :attr:`ZERO` count as 0.  ``count``,
    ``max`` and ``min`` are exact, ``mean`` is the running sum ÷ count.  Quantiles follow numpy's
    ``linear`` method over the order statistics (each estimated within α, so their interpolation is
    too).  At α = 0.5 % latencies from 1 µs to 1 h take at most ≈ 2,200 buckets.  The dashboard's run
    figures use it (:class:`RunStats` ``bounded=True``); ``summary.json`` keeps exact columns.
    """

    ALPHA = 0.005
    ZERO = 1e-12
    __slots__ = ("_buckets", "_gamma", "_lg", "max", "min", "n", "total", "zeros")

    def __init__(self) -> None:
        self._gamma = (1 + self.ALPHA) / (1 - self.ALPHA)
        self._lg = math.log(self._gamma)
        self._buckets: dict[int, int] = {}
        self.zeros = 0
        self.n = 0
        self.total = 0.0
        self.max = -math.inf
        self.min = math.inf

    def __len__(self) -> int:
        return self.n

    def append(self, v: float) -> None:
        """Count one value (NaN is ignored: a missing one)."""
        v = float(v)
        if v != v:
            return
        self.n += 1
        self.total += v
        self.max = max(self.max, v)
        self.min = min(self.min, v)
        if v <= self.ZERO:
            self.zeros += 1
            return
        i = math.ceil(math.log(v) / self._lg)
        self._buckets[i] = self._buckets.get(i, 0) + 1

    def quantiles(self, q: Sequence[float]) -> list[float]:
        """Estimates of ``np.percentile(values, q)`` (``q`` in 0–100), clamped to [min, max]."""
        if not self.n:
            raise ValueError("no values")
        reps: list[float] = []
        cum: list[int] = []
        running = 0
        if self.zeros:
            running = self.zeros
            reps.append(0.0)
            cum.append(running)
        for i in sorted(self._buckets):
            running += self._buckets[i]
            reps.append(2.0 * self._gamma ** i / (self._gamma + 1))
            cum.append(running)

        def order_stat(k: int) -> float:  # the k-th smallest (0-based)
            j = bisect.bisect_right(cum, k)
            return min(self.max, max(self.min, reps[j]))

        out = []
        for qq in q:
            r = (self.n - 1) * float(qq) / 100.0
            lo = math.floor(r)
            a = order_stat(lo)
            b = order_stat(min(lo + 1, self.n - 1))
            out.append(a + (b - a) * (r - lo))
        return out

    def distribution(self) -> dict | None:
        """:func:`distribution_ms`'s shape (values in s, figures in ms); None when empty."""
        if not self.n:
            return None
        out = {"mean": self.total / self.n * 1000.0}
        out.update({_pkey(q): v * 1000.0 for q, v in zip(PERCENTILES, self.quantiles(PERCENTILES))})
        out["max"] = self.max * 1000.0
        return out

    def median(self) -> float | None:
        """The estimated median (None when empty)."""
        return self.quantiles([50])[0] if self.n else None


def new_column(bounded: bool):
    """A per-request column: exact (``array('d')``) or :class:`QuantileSketch` when ``bounded``."""
    return QuantileSketch() if bounded else array("d")


def column_distribution(col) -> dict | None:
    return col.distribution() if isinstance(col, QuantileSketch) else distribution_ms(np.frombuffer(col, dtype=float))
