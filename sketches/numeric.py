"""Numeric feature sketch: exact counts while few distinct values, t-digest beyond.

Holds, for the finite values of one feature in one window: count, mean and M2
(for variance), min, max, a t-digest (Dunning & Ertl, "Computing extremely
accurate quantiles using t-digests", 2019; Apache DataSketches implementation)
and, while the feature has at most ``MAX_EXACT_DISTINCT`` distinct values, an
exact value -> count table. Missing values (None, NaN) and +/-inf are counted
separately and never enter the moments or the sketch.

CDF and quantiles
-----------------
``cdf(x)`` is P(X <= x). In exact mode it is exact; otherwise it is the
t-digest's ``get_rank``. Quantiles are the inverted CDF: ``quantile(p)`` is the
smallest x with ``cdf(x) >= p`` (numpy's ``method="inverted_cdf"``). DataSketches'
``tdigest.get_quantile`` is never used: it interpolates with a bias and is not
monotone in the rank; instead the CDF is inverted by bisection over the ordered
bit patterns of float64, which is monotone by construction and converges in at
most 64 steps for any magnitude.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import datasketches
import numpy as np

MAX_EXACT_DISTINCT = 64
TDIGEST_K = 200
# Documented bound on |rank error| of the t-digest at k=200, used by tests that
# accept sketch error (KS inconclusive zone, PSI masses). Measured over normal,
# lognormal, bimodal and uniform data at 1e3..1e6 values in tests/test_numeric.py.
TDIGEST_RANK_ERROR = 0.005

_SIGN = 1 << 63


def _ordered_key(x: float) -> int:
    """Map a float to an int whose order is the float order (-0.0 == +0.0)."""
    (i,) = struct.unpack("<q", struct.pack("<d", x))
    return i if i >= 0 else -(i & (_SIGN - 1))


def _from_key(k: int) -> float:
    bits = k if k >= 0 else ((-k) | _SIGN) - (1 << 64)
    return struct.unpack("<d", struct.pack("<q", bits))[0]


class NumericSketch:
    """Mergeable summary of one numeric feature.

    Examples
    --------
    >>> s = NumericSketch()
    >>> s.update(np.array([1.0, 2.0, 2.0, np.nan, np.inf]))
    >>> (s.count, s.null_count, s.pos_inf_count, s.min, s.max, s.mean)
    (3, 1, 1, 1.0, 2.0, 1.6666666666666667)
    >>> s.cdf(1.5), s.quantile(0.5)
    (0.3333333333333333, 2.0)
    """

    __slots__ = (
        "count",
        "null_count",
        "pos_inf_count",
        "neg_inf_count",
        "min",
        "max",
        "mean",
        "m2",
        "exact",
        "_td",
    )

    def __init__(self) -> None:
        self.count = 0
        self.null_count = 0
        self.pos_inf_count = 0
        self.neg_inf_count = 0
        self.min = math.inf
        self.max = -math.inf
        self.mean = 0.0
        self.m2 = 0.0
        self.exact: dict[float, int] | None = {}
        self._td = datasketches.tdigest_double(TDIGEST_K)

    # -- building -------------------------------------------------------------
    def update(self, values: np.ndarray) -> None:
        """Add a float64 array of values; NaN counts as missing, +/-inf separately."""
        values = np.asarray(values, dtype=np.float64)
        finite_mask = np.isfinite(values)
        if not finite_mask.all():
            nan = np.isnan(values)
            self.null_count += int(nan.sum())
            self.pos_inf_count += int((values == np.inf).sum())
            self.neg_inf_count += int((values == -np.inf).sum())
            values = values[finite_mask]
        n = values.size
        if n == 0:
            return
        self._td.update(values)
        bmean = float(values.mean())
        bm2 = float(((values - bmean) ** 2).sum())
        self._combine_moments(n, bmean, bm2, float(values.min()), float(values.max()))
        if self.exact is not None:
            uniq, counts = np.unique(values, return_counts=True)
            if uniq.size > MAX_EXACT_DISTINCT:
                self.exact = None
            else:
                ex = self.exact
                for v, c in zip(uniq.tolist(), counts.tolist(), strict=True):
                    ex[v] = ex.get(v, 0) + c
                if len(ex) > MAX_EXACT_DISTINCT:
                    self.exact = None

    def add_nulls(self, n: int) -> None:
        """Count ``n`` missing values."""
        self.null_count += n

    def _combine_moments(self, n: int, mean: float, m2: float, lo: float, hi: float) -> None:
        # Chan, Golub & LeVeque (1979) pairwise update of mean and M2.
        total = self.count + n
        delta = mean - self.mean
        self.mean += delta * n / total
        self.m2 += m2 + delta * delta * self.count * n / total
        self.count = total
        self.min = min(self.min, lo)
        self.max = max(self.max, hi)

    def merge(self, other: NumericSketch) -> None:
        """Merge ``other`` into this sketch (in place)."""
        self.null_count += other.null_count
        self.pos_inf_count += other.pos_inf_count
        self.neg_inf_count += other.neg_inf_count
        if other.count:
            self._td.merge(other._td)
            self._combine_moments(other.count, other.mean, other.m2, other.min, other.max)
        if self.exact is not None and other.exact is not None:
            for v, c in other.exact.items():
                self.exact[v] = self.exact.get(v, 0) + c
            if len(self.exact) > MAX_EXACT_DISTINCT:
                self.exact = None
        else:
            self.exact = None

    # -- reading --------------------------------------------------------------
    @property
    def is_exact(self) -> bool:
        """True while the CDF is exact (few distinct values)."""
        return self.exact is not None

    @property
    def variance(self) -> float:
        """Population variance of the finite values (0.0 when count < 2)."""
        return self.m2 / self.count if self.count > 1 else 0.0

    @property
    def rank_error(self) -> float:
        """Bound on |cdf error|: 0 in exact mode, else ``TDIGEST_RANK_ERROR``."""
        return 0.0 if self.exact is not None else TDIGEST_RANK_ERROR

    def support(self) -> np.ndarray:
        """Sorted distinct values (exact mode only).

        Raises
        ------
        ValueError
            If the sketch is not in exact mode.
        """
        if self.exact is None:
            raise ValueError("support() needs exact mode")
        return np.array(sorted(self.exact), dtype=np.float64)

    def cdf(self, x: float) -> float:
        """P(X <= x) over the finite values; NaN when the sketch is empty."""
        return float(self.cdf_many(np.array([x], dtype=np.float64))[0])

    def cdf_many(self, xs: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`cdf` at sorted or unsorted points; float64 array."""
        xs = np.asarray(xs, dtype=np.float64)
        if self.count == 0:
            return np.full(xs.shape, np.nan)
        if self.exact is not None:
            vals = np.array(sorted(self.exact), dtype=np.float64)
            cum = np.cumsum([self.exact[v] for v in vals.tolist()], dtype=np.float64)
            idx = np.searchsorted(vals, xs, side="right")
            out = np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0)
            return out / self.count
        out = np.array([self._td.get_rank(float(x)) for x in xs.ravel()], dtype=np.float64)
        out = out.reshape(xs.shape)
        out[xs >= self.max] = 1.0
        out[xs < self.min] = 0.0
        return out

    def quantile(self, p: float) -> float:
        """Inverted-CDF quantile: smallest x with ``cdf(x) >= p``; NaN when empty.

        Raises
        ------
        ValueError
            If ``p`` is outside [0, 1].
        """
        if not 0.0 <= p <= 1.0:
            raise ValueError("p must be in [0, 1]")
        if self.count == 0:
            return math.nan
        if p <= 0.0:
            return self.min
        if self.exact is not None:
            vals = sorted(self.exact)
            cum = np.cumsum([self.exact[v] for v in vals]) / self.count
            i = int(np.searchsorted(cum, p - 1e-12, side="left"))
            return float(vals[min(i, len(vals) - 1)])
        lo, hi = _ordered_key(self.min), _ordered_key(self.max)
        while lo < hi:  # smallest key with rank >= p; at most 64 halvings
            mid = (lo + hi) // 2
            if self._td.get_rank(_from_key(mid)) >= p:
                hi = mid
            else:
                lo = mid + 1
        return _from_key(lo)

    # -- serialisation ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (for MessagePack); see :meth:`from_dict`."""
        return {
            "n": self.count,
            "null": self.null_count,
            "pinf": self.pos_inf_count,
            "ninf": self.neg_inf_count,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "m2": self.m2,
            "exact": None if self.exact is None else [[v, c] for v, c in self.exact.items()],
            "td": self._td.serialize() if self.count else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NumericSketch:
        """Inverse of :meth:`to_dict`."""
        s = cls()
        s.count, s.null_count = d["n"], d["null"]
        s.pos_inf_count, s.neg_inf_count = d["pinf"], d["ninf"]
        s.min, s.max, s.mean, s.m2 = d["min"], d["max"], d["mean"], d["m2"]
        s.exact = None if d["exact"] is None else {v: c for v, c in d["exact"]}
        if d["td"] is not None:
            s._td = datasketches.tdigest_double.deserialize(d["td"])
        return s
