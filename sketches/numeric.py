"""Numeric feature sketch: exact counts while few distinct values or few values, t-digest beyond.

Holds, for the finite values of one feature in one window: count, mean and M2
(for the variance), min, max and one of three summaries of the distribution:

* an exact ``value -> count`` table while the feature has at most
  ``MAX_EXACT_DISTINCT`` distinct values;
* beyond that, the values themselves while there are at most
  ``MAX_EXACT_VALUES`` of them (small windows: KS and Wasserstein on them are
  raw-data tests);
* beyond that, a t-digest (:mod:`sketches.tdigest`).

The switches are transparent: the exact table and the kept values enter the
digest as point masses, so a zero-inflated feature keeps an exact jump at
zero. Missing values (None, NaN) and +/-inf are counted separately and never
enter the moments or the sketch. Optionally (:attr:`NumericSketch.bins`) the
sketch also counts its values exactly in fixed bins derived from the model's
reference (:mod:`sketches.bins`), whatever the mode.

CDF and quantiles
-----------------
``cdf(x)`` is P(X <= x) over the finite values. ``quantile(p)`` is the inverted
CDF, the smallest x with ``cdf(x) >= p`` (numpy's ``method="inverted_cdf"``); on
ties it returns the tied value. Both are exact in exact mode. In sketch mode
the CDF's absolute error is at most :attr:`NumericSketch.rank_error` (0.5 % for
continuous data plus 3 / count; measured for normal, lognormal, bimodal,
trimodal, uniform, exponential, Pareto, Cauchy and 1e-300..1e300 data, built in
one pass, in small batches or merged from partial sketches: docs/profiles.md,
tests/test_sketches_numeric.py; known exception: three well-separated modes in
merged digests of a few hundred values each, up to 1.15x the bound), and
quantiles are monotone in p.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sketches.bins import BinCounts
from sketches.codec import pack_floats, unpack_floats
from sketches.tdigest import TDigest, distinct_counts

MAX_EXACT_DISTINCT = 64
MAX_EXACT_VALUES = 2048
"""Values kept as they are (beyond ``MAX_EXACT_DISTINCT`` distinct ones) before the t-digest."""
TDIGEST_RANK_ERROR = 0.005
"""Bound on |cdf error| in sketch mode for continuous data (largest measured: 0.30 %, see rank_error)."""


class NumericSketch:
    """Mergeable summary of one numeric feature.

    Notes
    -----
    Moments merge exactly (Chan, Golub & LeVeque, "Updating formulae and a
    pairwise algorithm for computing sample variances", 1979): for parts a, b
    with n = n_a + n_b and delta = mean_b - mean_a,
    mean = mean_a + delta n_b / n and M2 = M2_a + M2_b + delta^2 n_a n_b / n;
    the variance is M2 / n (population). A batch mean whose sum overflows is
    recomputed on values scaled to |x| <= 1; an M2 that overflows is +inf.

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
        "bins",
        "_raw",
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
        self.bins: BinCounts | None = None
        self._raw: list[np.ndarray] | None = None  # the values, in raw mode
        self._td = TDigest()

    @classmethod
    def binned(cls, bins: BinCounts | None) -> NumericSketch:
        """An empty sketch that also counts its values in ``bins`` (None: no bins)."""
        s = cls()
        s.bins = bins
        return s

    @classmethod
    def of_values(cls, values: np.ndarray) -> NumericSketch:
        """A sketch keeping all of the finite ``values`` whatever their number, so that the
        tests read the raw data (for comparisons with sketches; profiles never hold one).

        Examples
        --------
        >>> s = NumericSketch.of_values(np.arange(10_000.0))
        >>> s.is_exact, s.cdf(4_999.0)
        (True, 0.5)
        """
        s = cls()
        values = np.asarray(values, dtype=np.float64).ravel()
        values = values[np.isfinite(values)]
        if values.size:
            from sketches import kernels  # imported at first use (numba: see sketches.kernels)

            ordered = np.sort(values)
            s._combine_moments(values.size, *kernels.moments(ordered), float(values.min()),
                               float(values.max()))
            s.exact, s._raw = None, [ordered]
        return s

    # -- building -------------------------------------------------------------
    def update(self, values: np.ndarray) -> None:
        """Add a float64 array of values; NaN counts as missing, +/-inf separately."""
        values = np.asarray(values, dtype=np.float64).ravel()
        finite_mask = np.isfinite(values)
        if not finite_mask.all():
            self.null_count += int(np.isnan(values).sum())
            self.pos_inf_count += int((values == np.inf).sum())
            self.neg_inf_count += int((values == -np.inf).sum())
            values = values[finite_mask]
        n = values.size
        if n == 0:
            return
        # One sort serves the bins, the extremes, the distinct values and the digest.
        ordered = np.sort(values)
        if self.bins is not None:
            self.bins.add(ordered, is_sorted=True)
        from sketches import kernels  # imported at first use (numba: see sketches.kernels)

        mean, m2 = kernels.moments(ordered)
        lo, hi = float(ordered[0]), float(ordered[-1])
        if lo == 0.0 or hi == 0.0:  # the sign of a zero extreme as min() / max() report it
            lo, hi = float(values.min()), float(values.max())
        self._combine_moments(n, mean, m2, lo, hi)
        if self.exact is None:
            if self._raw is None:
                self._td.update(ordered)
            else:
                self._raw.append(ordered)
                self._check_raw()
            return
        # Distinct values and their counts (what np.unique does, without its overhead).
        uniq, counts = distinct_counts(ordered)
        if uniq.size > MAX_EXACT_DISTINCT:  # leaves exact mode whatever the table holds
            self._leave_exact(uniq, counts)
            return
        self._add_exact(dict(zip(uniq.tolist(), counts.tolist(), strict=True)))

    def _leave_exact(self, uniq: np.ndarray, counts: np.ndarray) -> None:
        """Leave the exact table with a batch of sorted distinct values ``uniq`` seen
        ``counts`` times: to raw mode while the count allows, else the exact table and the
        batch enter the digest as point masses, in one vectorised step (what
        :meth:`_add_exact` does value by value)."""
        if self.count <= MAX_EXACT_VALUES:
            table, self.exact = self.exact or {}, None
            self._raw = [np.repeat(uniq, counts), *self._table_values(table)]
            return
        weights = counts.astype(np.float64)
        if self.exact:
            old = np.fromiter(self.exact, np.float64, len(self.exact))
            old_counts = np.fromiter(self.exact.values(), np.float64, len(self.exact))
            uniq, inverse = np.unique(np.concatenate((uniq, old)), return_inverse=True)
            weights = np.bincount(inverse, weights=np.concatenate((weights, old_counts)),
                                  minlength=uniq.size)
        self.exact = None
        self._td.update_weighted(uniq, weights, is_sorted=True)  # np.unique sorts

    @staticmethod
    def _table_values(table: dict[float, int]) -> list[np.ndarray]:
        """The values of a ``value -> count`` table, as a list of (at most) one array."""
        if not table:
            return []
        return [np.repeat(np.fromiter(table, np.float64, len(table)),
                          np.fromiter(table.values(), np.int64, len(table)))]

    def _check_raw(self) -> None:
        """Raw mode past ``MAX_EXACT_VALUES`` values: the values enter the digest."""
        if self._raw is not None and self.count > MAX_EXACT_VALUES:
            raw, self._raw = self._raw, None
            if raw:
                self._td.update(np.concatenate(raw))

    def _add_exact(self, table: dict[float, int]) -> None:
        """Add an exact ``value -> count`` table (its values already in the count), leaving
        the exact table if it grows too large."""
        if self.exact is not None:
            for v, c in table.items():
                self.exact[v] = self.exact.get(v, 0) + c
            if len(self.exact) <= MAX_EXACT_DISTINCT:
                return
            table, self.exact = self.exact, None
            if self.count <= MAX_EXACT_VALUES:
                self._raw = self._table_values(table)
                return
        if self._raw is not None:
            self._raw += self._table_values(table)
            self._check_raw()
            return
        self._td.update_weighted(np.fromiter(table, np.float64, len(table)),
                                 np.fromiter(table.values(), np.float64, len(table)))

    def add_nulls(self, n: int) -> None:
        """Count ``n`` missing values."""
        self.null_count += n

    def _combine_moments(self, n: int, mean: float, m2: float, lo: float, hi: float) -> None:
        # Chan, Golub & LeVeque (1979) pairwise update of mean and M2.
        total = self.count + n
        if self.count:  # Python floats: an overflow gives inf, never an error
            delta = mean - self.mean
            self.mean += delta * n / total
            self.m2 += m2 + delta * delta * (self.count * n / total)  # inf when it overflows
        else:
            self.mean, self.m2 = mean, m2
        self.count = total
        self.min = min(self.min, lo)
        self.max = max(self.max, hi)

    def _merge_bins(self, other: NumericSketch) -> None:
        """Bin counts of the merge: added when both sides counted in the same edges; a side
        without values and without bins is neutral; any other mix has no bins."""
        if other.bins is None:
            if other.count:
                self.bins = None
        elif self.bins is None:
            if not self.count:
                self.bins = other.bins.empty_like()
                self.bins.merge(other.bins)
        elif not self.bins.merge(other.bins):
            self.bins = None

    def merge(self, other: NumericSketch) -> None:
        """Merge ``other`` into this sketch (in place); ``other`` is not modified."""
        self.null_count += other.null_count
        self.pos_inf_count += other.pos_inf_count
        self.neg_inf_count += other.neg_inf_count
        self._merge_bins(other)
        if not other.count:
            return
        self._combine_moments(other.count, other.mean, other.m2, other.min, other.max)
        if other.exact is not None:
            self._add_exact(other.exact)
            return
        if other._raw is not None:
            if self.exact is not None:  # the count already includes the other's values
                table, self.exact = self.exact, None
                self._raw = self._table_values(table)
            if self._raw is not None:
                self._raw += [np.array(a) for a in other._raw]
                self._check_raw()
            else:
                self._td.update(np.concatenate(other._raw))
            return
        if self.exact is not None:
            table, self.exact = self.exact, None
            if table:
                self._add_exact(table)
        elif self._raw is not None:
            raw, self._raw = self._raw, None
            if raw:
                self._td.update(np.concatenate(raw))
        self._td.merge(other._td)

    # -- reading --------------------------------------------------------------
    @property
    def is_exact(self) -> bool:
        """True while the CDF is exact (few distinct values, or few values)."""
        return self.exact is not None or self._raw is not None

    @property
    def digest(self) -> TDigest | None:
        """The t-digest, in sketch mode (None while exact): for compressing the digests of a
        whole profile in one pass (:func:`sketches.tdigest.compress_all`)."""
        return None if self.is_exact else self._td

    def _sorted_raw(self) -> np.ndarray:
        """The kept values, sorted (raw mode), as one array from then on."""
        raw = self._raw
        v = np.concatenate(raw) if len(raw) != 1 else raw[0]
        if v.size > 1 and (len(raw) != 1 or np.any(v[1:] < v[:-1])):
            v = np.sort(v, kind="stable")  # sorted batches: timsort merges their runs
        self._raw = [v]
        return v

    @property
    def variance(self) -> float:
        """Population variance of the finite values (0.0 when count < 2)."""
        return self.m2 / self.count if self.count > 1 else 0.0

    @property
    def rank_error(self) -> float:
        """Bound on |cdf error|: 0 while exact (table or lossless digest), else
        ``TDIGEST_RANK_ERROR + 3 / count``: the digest's interpolation error on
        continuous data plus three steps of the empirical CDF, which dominate
        below a few thousand values (measured: 0.62 % at 500 values, 0.47 % at
        1,000, 0.30 % from 10,000 on; docs/profiles.md)."""
        if self.is_exact or self._td.is_lossless:
            return 0.0
        return TDIGEST_RANK_ERROR + 3.0 / self.count

    def cdf_error(self, xs: np.ndarray) -> np.ndarray:
        """Bound on |cdf(x) - F_n(x)| at each x (0 while exact): the smaller of two bounds.

        The certain one from the data: the digest's centroids keep their
        smallest and largest value, so the number of values <= x lies between
        the weight of the centroids wholly at or below x and the weight of
        those starting at or below x (:meth:`TDigest.cdf_bounds
        <sketches.tdigest.TDigest.cdf_bounds>`); the bound is the distance of
        :meth:`cdf` to the far end of that interval, at most the weight of the
        centroids straddling x divided by the count, and 0 at a cut between
        centroids (tails: a few 1e-4). And :attr:`rank_error`, the
        interpolation error measured on continuous data, smaller where
        centroids are heaviest (around the median the certain bound reaches
        1-1.7 % of the count for 1e4-1e6 normal values, the measured one 0.5 %).

        Examples
        --------
        >>> s = NumericSketch(); s.update(np.random.default_rng(0).normal(size=100_000))
        >>> e = s.cdf_error(np.array([-4.0, 0.0]))
        >>> bool(e[0] < 1e-3), bool(e[1] <= s.rank_error)
        (True, True)
        """
        xs = np.asarray(xs, dtype=np.float64)
        if self.rank_error == 0 or self.count == 0:
            return np.zeros(xs.shape)
        lower, upper = self.cdf_bounds(xs)
        est = self._td.cdf(xs)
        certain = np.maximum(np.maximum(est - lower, upper - est), 0.0)
        return np.minimum(certain, self.rank_error)

    def cdf_bounds(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Certain lower and upper bounds on F_n(x) at each x (both :meth:`cdf_many` while exact;
        see :meth:`TDigest.cdf_bounds <sketches.tdigest.TDigest.cdf_bounds>`)."""
        if self.is_exact or self.count == 0:
            f = self.cdf_many(xs)
            return f, f
        return self._td.cdf_bounds(np.asarray(xs, dtype=np.float64))

    def support(self) -> np.ndarray:
        """Sorted distinct values (exact mode only).

        Raises
        ------
        ValueError
            If the sketch is not in exact mode.
        """
        if self._raw is not None:
            return np.unique(self._sorted_raw())
        if self.exact is None:
            raise ValueError("support() needs exact mode")
        return np.array(sorted(self.exact), dtype=np.float64)

    def _exact_cdf_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted distinct values and the cumulative count at each (exact mode)."""
        if self._raw is not None:
            v = self._sorted_raw()
            last = np.flatnonzero(np.append(v[1:] != v[:-1], True))
            return v[last], (last + 1).astype(np.float64)
        vals = np.fromiter(self.exact, np.float64, len(self.exact))
        counts = np.fromiter(self.exact.values(), np.float64, len(self.exact))
        order = np.argsort(vals)
        return vals[order], np.cumsum(counts[order])

    def cdf(self, x: float) -> float:
        """P(X <= x) over the finite values; NaN when the sketch is empty."""
        return float(self.cdf_many(np.array([x], dtype=np.float64))[0])

    def cdf_many(self, xs: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`cdf` at sorted or unsorted points; float64 array."""
        xs = np.asarray(xs, dtype=np.float64)
        if self.count == 0:
            return np.full(xs.shape, np.nan)
        if not self.is_exact:
            return self._td.cdf(xs)
        vals, cum = self._exact_cdf_table()
        idx = np.searchsorted(vals, xs, side="right")
        return np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0) / self.count

    def quantile(self, p: float) -> float:
        """Inverted-CDF quantile: smallest x with ``cdf(x) >= p``; NaN when empty.

        In exact mode ``cdf(x) >= p`` is tested with a relative tolerance of
        1e-12, so that p = k / n selects the k-th smallest value despite
        rounding in k / n.

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
        if not self.is_exact:
            return float(np.clip(self._td.quantile(np.array([p]))[0], self.min, self.max))
        vals, cum = self._exact_cdf_table()
        i = int(np.searchsorted(cum / self.count, p - 1e-12, side="left"))
        return float(vals[min(i, vals.size - 1)])

    # -- serialisation ----------------------------------------------------------
    def to_dict(self, *, compress: bool = True) -> dict[str, Any]:
        """Plain-data form (for MessagePack); see :meth:`from_dict`.

        ``compress=False`` may leave the digest's buffered values uncompressed
        (:meth:`TDigest.to_dict <sketches.tdigest.TDigest.to_dict>`). Format 3
        adds ``raw`` (the kept values, sorted) and ``bins`` (:class:`BinCounts`).
        """
        if self.exact is None:
            exact = None
        else:
            vals = np.fromiter(self.exact, np.float64, len(self.exact))
            counts = np.fromiter(self.exact.values(), np.int64, len(self.exact))
            exact = [vals.astype("<f8").tobytes(), counts.astype("<i8").tobytes()]
        d = {
            "n": self.count,
            "null": self.null_count,
            "pinf": self.pos_inf_count,
            "ninf": self.neg_inf_count,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "m2": self.m2,
            "exact": exact,
            "td": self._td.to_dict(compress=compress) if not self.is_exact else None,
        }
        if self._raw is not None:
            d["raw"] = pack_floats(self._sorted_raw())
        if self.bins is not None:
            d["bins"] = self.bins.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NumericSketch:
        """Inverse of :meth:`to_dict`."""
        s = cls()
        s.count, s.null_count = d["n"], d["null"]
        s.pos_inf_count, s.neg_inf_count = d["pinf"], d["ninf"]
        s.min, s.max, s.mean, s.m2 = d["min"], d["max"], d["mean"], d["m2"]
        if "bins" in d:
            s.bins = BinCounts.from_dict(d["bins"])
        if d.get("raw") is not None:
            s.exact, s._raw = None, [unpack_floats(d["raw"])]
        elif d["exact"] is None:
            s.exact = None
            s._td = TDigest.from_dict(d["td"])
        else:
            vals = np.frombuffer(d["exact"][0], "<f8").tolist()
            counts = np.frombuffer(d["exact"][1], "<i8").tolist()
            s.exact = dict(zip(vals, counts, strict=True))
        return s
