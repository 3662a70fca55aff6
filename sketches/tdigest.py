"""A merging t-digest whose centroids know their extent and their log-scale mean.

The digest summarises a stream of finite float64 values by at most about
``TDIGEST_DELTA / 2`` centroids (plus a few cut at zero, gaps and heavy ties;
no centroid mixes negative and positive values).
It follows the merging t-digest of Dunning & Ertl (2019): values are buffered,
sorted, and grouped into centroids whose rank ranges are bounded by the
``k_1`` scale function, so centroids are small in the tails and large in the
middle. Each centroid here keeps five numbers instead of two:

``w``     weight (number of values),
``mean``  arithmetic mean of its values,
``kmean`` mean of the values' order-preserving keys (see below),
``lo``    smallest value,
``hi``    largest value.

Why the extra three: a plain t-digest interpolates its CDF linearly in x
between centroid means. That fails in two ways (measured on DataSketches'
t-digest, k = 200, 200k values; docs/profiles.md):

* Across magnitudes (values from 1e-300 to 1e300) the arithmetic mean of a
  centroid sits at its largest values; rank error reached 33 % with
  DataSketches' t-digest. The *key* of a float, its IEEE-754 bit pattern read
  as a sign-magnitude integer, is monotone in x and linear in x within each
  binade [2^e, 2^(e+1)), so it is a log-like scale that needs no parameter.
  Sketching keys alone fixes wide ranges but breaks data centred on zero
  (2.8 % error on a standard normal), because around zero the key spans a
  thousand binades. So each centroid keeps both means, and the CDF places the
  centroid in whichever scale its two means say is the natural one: the scale
  in which its values look uniform (value scale unless the means clearly
  contradict that and fit the key scale better; see :func:`key_scaled`).
* Between two modes the plain digest spreads mass into the empty gap (1 %
  error on a bimodal mixture). With extents the gap is known to be empty and
  the CDF is flat across it. Compression never lets a centroid bridge two
  clusters: it cuts a group across a gap wider than a quarter of its range
  (in the scale the CDF interpolates the group in), through its mean when
  less than 1/16 of its mass lies near the mean (two
  clusters joined by a few stray values), and at its median when its mean
  sits more than 0.2 of its range off the middle (a dense cluster with a long
  sparse tail, where the mean is far from the median). Without the last two
  cuts a three-mode mixture reached 0.65 % error.

Runs of one repeated value heavier than an average centroid stay point
masses, so zero-inflated data keep an exact jump at zero. Up to
``TDIGEST_DELTA`` values (or distinct values) are kept as they are, so a small
digest is exact.

CDF model
---------
The CDF is the sum of two parts. Point masses (centroids with ``lo == hi``:
single values and heavy ties) are exact jumps. The other centroids, ordered by
their location loc_i (the mean, or the key mean when key-scaled), form a
chain: with C_i their weight before centroid i in that order, it passes
through (loc_i, C_i + w_i / 2) for each, through (min, 0) and (max, total),
stays flat across gaps ``max(hi_0..hi_i) < min(lo_(i+1)..lo_(n-1))``, and is
linear between these knots in the value scale, or in the key scale when
either knot is a key-scaled centroid. Quantiles invert the sum exactly, so
they are monotone in p by construction.

Merged digests. Centroids of one digest cover disjoint runs of sorted values,
so their extents do not overlap and ordering by ``kmean`` or by location is
the same. After a merge a group can take in a centroid of another digest
that spans values the group's neighbours also hold, so extents overlap. The
chain is therefore built in location order, the order of its knots on the x
axis. (It used to be built in ``kmean`` order and made monotone with a running
maximum of the knot positions: a wide value-scaled centroid whose mean sat
near its top then carried the knots of the narrower centroids inside it up
to that mean, holding back their mass; merged extreme-magnitude digests of
~1,000 values reached 0.97 % rank error against a 0.83 % bound.) The scale
test of :func:`key_scaled` judges each centroid by both of its means rather
than by the one nearer the middle of its range, because a merged centroid of
a few values spread over many decades often has an arithmetic mean that looks
central enough by chance (two large values close together). And the cuts
count a group's values, not its items: merging two compressed digests makes
groups of two to four centroids, which a count of items took for "a few
stray values" and never cut, so tail centroids of neighbouring modes merged
across the gap between them.

References
----------
Dunning, T. & Ertl, O. (2019). Computing extremely accurate quantiles using
t-digests. arXiv:1902.04023.
Dunning, T. (2021). The t-digest: Efficient estimates of distributions.
Software Impacts 7, 100049.
Mitchell, J. N. (1962). Computer multiplication and division using binary
logarithms. IRE Transactions on Electronic Computers EC-11(4), 512-517.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from sketches.codec import pack_floats, unpack_floats

TDIGEST_DELTA = 300
"""Compression delta: at most ``TDIGEST_DELTA / 2`` grid centroids (k_1 scale)."""
BUFFER_SIZE = 16384
"""Values (or merged centroids) buffered before a compression: at most 128 KiB of values per open
digest. A compression costs about 0.5 ms whatever its size up to a few thousand values (a few hundred
numpy calls; 1.0 ms at 16,384 values), so the buffer sets its cost per value: 0.14 us at 4,096,
0.06 us at 16,384 (docs/profiles.md, "Ingest: what a record costs the aggregator")."""
UNCOMPRESSED_MAX = BUFFER_SIZE
"""At most this many buffered values are written uncompressed by ``TDigest.to_dict(compress=False)``:
the whole buffer, so a checkpoint never compresses a digest (its compressions, and so its
centroids, do not depend on how often it is checkpointed)."""
LIGHT_RATIO = 8
"""A centroid this many times lighter than a neighbour counts as a jump at its mean in the CDF."""
_M = TDIGEST_DELTA // 2
# k_1(q) = delta / (2 pi) * asin(2q - 1) crosses an integer at these ranks.
_GRID = (1.0 - np.cos(np.pi * np.arange(1, _M) / _M)) / 2.0
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)
_SIGN = np.int64(-0x8000000000000000)


def float_keys(x: np.ndarray) -> np.ndarray:
    """Order-preserving keys of float64 values, as float64.

    The IEEE-754 bits of ``x`` read as a sign-magnitude integer: monotone in
    ``x`` (``-0.0`` and ``0.0`` share key 0) and linear in ``x`` inside each
    binade, so differences of keys measure distance on a log-like scale. As
    float64 the 63-bit key keeps 53 bits, which resolves x to a relative
    2**-42: plenty for interpolation, which is all the keys are used for.

    Examples
    --------
    >>> k = float_keys(np.array([-2.0, -1e-300, 0.0, 1e-300, 1.0, 2.0, 4.0]))
    >>> bool(np.all(np.diff(k) > 0)), float(k[2]), bool(k[6] - k[5] == k[5] - k[4])
    (True, 0.0, True)
    """
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.int64)
    return np.where(bits >= 0, bits, -(bits & _MAGNITUDE)).astype(np.float64)


def keys_to_floats(k: np.ndarray) -> np.ndarray:
    """Inverse of :func:`float_keys`, to its float64 resolution.

    Examples
    --------
    >>> x = np.array([-3.5, 0.0, 1e-300, 1e300])
    >>> np.allclose(keys_to_floats(float_keys(x)), x, rtol=1e-12, atol=0)
    True
    """
    i = np.rint(np.asarray(k, dtype=np.float64)).astype(np.int64)
    return np.where(i >= 0, i, (-i) | _SIGN).view(np.float64)


def key_scaled(mean: np.ndarray, kmean: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each centroid's values look uniform in the key scale rather than in the value scale.

    The CDF places a key-scaled centroid at its key mean and interpolates next
    to it linearly in the key (log-like) scale; any other at its arithmetic
    mean, linearly in x. The value scale is the default: a centroid is
    key-scaled only when its two means clearly contradict values spread
    uniformly in x and fit values spread uniformly in log|x| better.

    Parameters
    ----------
    mean, kmean, lo, hi : np.ndarray of float64, shape (n,)
        Per centroid: arithmetic mean of its values, mean of their keys
        (:func:`float_keys`), smallest and largest value. The values of one
        centroid share a sign (zero may join either side).

    Returns
    -------
    np.ndarray of bool, shape (n,)
        True where the centroid is key-scaled; False for point masses
        (``lo == hi``), for centroids within a small part of a binade (where
        the scales agree) and wherever the evidence is not clear.

    Notes
    -----
    Both means are taken as positions from the end of ``[lo, hi]`` nearer
    zero: with a and b the smaller and larger magnitude,
    ``f_v = (|mean| - a) / (b - a)`` and ``f_k`` the same for the key mean
    between the keys of a and b. The span in natural-log units is
    ``t = |key(hi) - key(lo)| ln 2 / 2**52`` (about ln(b / a)); let
    ``r = exp(-t)`` and ``g = 1 / t - r / (1 - r)`` (which tends to 1/2 as
    t -> 0). For one value X:

    * X uniform on [a, b]: E f_v = 1/2, Var f_v = 1/12; E f_k = 1 - g,
      Var f_k = s^2 / t^2 with s^2 = Var ln U, U uniform on [r, 1]:
      ``s^2 = (2 - r t^2 - 2 r t - 2 r) / (1 - r) - (r t / (1 - r) - 1)^2``.
    * ln X uniform on [ln a, ln b]: E f_k = 1/2, Var f_k = 1/12; E f_v = g,
      ``Var f_v = (1 + r) / (2 t (1 - r)) - 1 / t^2``.

    ``chi2_v = 12 (f_v - 1/2)^2 + (f_k - 1 + g)^2 / Var f_k`` (value
    hypothesis) and ``chi2_k = 12 (f_k - 1/2)^2 + (f_v - g)^2 / Var f_v``
    (key hypothesis); the centroid is key-scaled when
    ``chi2_v > max(SCALE_EVIDENCE, SCALE_RATIO * chi2_k)``. The statistics
    are per value, not divided by the variance of a mean of w values: a
    centroid's values are a run of sorted data (after merges, parts of
    several runs), not a random sample, so only a misfit larger than one
    value's own spread counts as evidence. Below t = 0.05 (a span of 5 %)
    the two hypotheses coincide (g = 1/2 - t/12, both variances 1/12) and
    the centroid keeps the value scale.

    Judging by both means fixes what the position of a single mean cannot:
    a few values spread over ten decades have an arithmetic mean near the
    top, unless the two largest happen to be close, when the mean can sit at
    a third of the range and look central enough; their key mean then sits
    mid-range, which uniformity in x rules out (it predicts 1 - g ~ 0.97).

    References
    ----------
    Dunning & Ertl (2019): the t-digest interpolates as if values spread
    uniformly around each centroid. Mitchell (1962): the float key as a
    piecewise-linear log2. (Full entries in the module references.)

    Examples
    --------
    >>> logu = 10.0 ** np.linspace(-100.0, -90.0, 11)  # spread over ten decades
    >>> flat = np.linspace(0.001, 0.02, 11)  # spread evenly in x
    >>> cols = [np.array([f(v) for v in (logu, flat, -flat)])
    ...         for f in (np.mean, lambda v: float_keys(v).mean(), np.min, np.max)]
    >>> key_scaled(*cols)
    array([ True, False, False])
    """
    from sketches import kernels  # imported at first use (numba: see sketches.kernels)

    return kernels.key_scaled_each(mean, kmean, lo, hi, float_keys(lo), float_keys(hi))


class _Items:
    """Weighted items sorted by key mean: centroids, or values as unit centroids."""

    __slots__ = ("w", "mean", "kmean", "lo", "hi")

    def __init__(self, w, mean, kmean, lo, hi) -> None:
        self.w, self.mean, self.kmean, self.lo, self.hi = w, mean, kmean, lo, hi

    @classmethod
    def empty(cls) -> _Items:
        e = np.empty(0)
        return cls(e, e, e, e, e)

    @classmethod
    def points(cls, values: np.ndarray, weights: np.ndarray) -> _Items:
        """Point masses; ``values`` sorted ascending."""
        return cls(weights, values, float_keys(values), values, values)

    @property
    def size(self) -> int:
        return self.w.size

    def interleave(self, other: _Items) -> _Items:
        """Merge two key-sorted item lists into one (linear time)."""
        if not other.size:
            return self
        if not self.size:
            return other
        pos = np.searchsorted(self.kmean, other.kmean) + np.arange(other.size)
        mine = np.ones(self.size + other.size, dtype=bool)
        mine[pos] = False

        def mix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            out = np.empty(mine.size)
            out[mine] = a
            out[pos] = b
            return out

        return _Items(*(mix(getattr(self, f), getattr(other, f)) for f in self.__slots__))


def run_starts(ordered: np.ndarray) -> np.ndarray:
    """Index of the first element of each run of equal values of a sorted array (no NaN):
    what ``np.unique`` computes, without its overhead.

    Examples
    --------
    >>> run_starts(np.array([1.0, 1.0, 2.0, 5.0, 5.0])).tolist()
    [0, 2, 3]
    """
    first = np.empty(ordered.size, dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return np.flatnonzero(first)


def distinct_counts(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a sorted array (no NaN) and how often each occurs: what
    ``np.unique(..., return_counts=True)`` computes, without its overhead.

    Examples
    --------
    >>> [a.tolist() for a in distinct_counts(np.array([1.0, 1.0, 2.0, 5.0, 5.0]))]
    [[1.0, 2.0, 5.0], [2, 1, 2]]
    """
    first = run_starts(ordered)
    return ordered[first], np.append(first[1:], ordered.size) - first


def _sorted_unique(x: np.ndarray) -> np.ndarray:
    """The distinct values of a small array (no NaN), ascending: ``np.unique(x)`` in a sort and a
    comparison, without its overhead. A merge sort (timsort): the arrays sorted here are a few
    ascending runs put together, which it merges in linear time."""
    x = np.sort(x, kind="stable")
    return x[run_starts(x)]


def compress_many(parts: list[_Items]) -> list[_Items]:
    """Group each list of key-sorted items into centroids (none while there are at most
    TDIGEST_DELTA), all in one call of the compiled compression
    (:func:`sketches.kernels.compress_parts`): each list gets the centroids it would get
    alone.

    The k_1 grid proposes groups; a group is then cut across a wide gap, through
    a hollow middle, and at the median of a lopsided one, so no centroid
    bridges two clusters or hides a long sparse tail behind its mean. A call costs
    about 10 us plus 30 ns per item, so the digests of a window are compressed together
    when it is stored (:func:`compress_all`).
    """
    from sketches import kernels  # imported at first use (numba: see sketches.kernels)

    out = list(parts)
    big = [i for i, p in enumerate(parts) if p.size > TDIGEST_DELTA]
    if not big:
        return out
    # float64 whatever the items' type (update_weighted of integers): one compiled signature
    w, mean, kmean, lo, hi = (np.concatenate([getattr(parts[i], f) for i in big], dtype=np.float64)
                              for f in _Items.__slots__)
    bounds = np.cumsum([0] + [parts[i].size for i in big], dtype=np.int64)
    scratch, ends = kernels.compress_parts(w, mean, kmean, lo, hi, float_keys(lo), float_keys(hi),
                                           bounds, _GRID)
    centroids = scratch.copy()  # what the digests keep: their centroids, not a buffer sized by the items
    for i, a, b in zip(big, [0, *ends[:-1].tolist()], ends.tolist(), strict=True):
        out[i] = _Items(*centroids[:, a:b])
    return out


def compress_all(digests: Iterable[TDigest]) -> None:
    """Compress the buffered values of every digest given, in one pass (:func:`compress_many`):
    each gets the centroids its own compression would give."""
    pending = [d for d in digests if d._buffered]
    for d, centroids in zip(pending, compress_many([d._items() for d in pending]), strict=True):
        d._centroids = centroids
        d._values, d._items_in, d._buffered, d._model = [], [], 0, None


class _Cdf:
    """The digest's CDF: a continuous piecewise-linear part plus point masses."""

    __slots__ = ("x", "f", "key_scaled", "point_x", "point_cum", "total", "top", "knots", "right", "left")

    def __init__(self, c: _Items) -> None:
        klo, khi = float_keys(c.lo), float_keys(c.hi)
        from sketches import kernels  # imported at first use (numba: see sketches.kernels)

        by_key = kernels.key_scaled_each(c.mean, c.kmean, c.lo, c.hi, klo, khi)
        loc = np.where(by_key, keys_to_floats(np.clip(c.kmean, klo, khi)), c.mean)
        point = c.lo == c.hi
        spread = np.flatnonzero(~point)
        w = c.w[spread]
        neighbour = np.maximum(np.append(0.0, w[:-1]), np.append(w[1:], 0.0))
        point[spread[w * LIGHT_RATIO < neighbour]] = True  # light: a jump at its location
        order = np.argsort(loc[point], kind="stable")
        self.point_x = loc[point][order]
        self.point_cum = np.cumsum(c.w[point][order])
        self.total = float(c.w.sum())
        self.top = float(c.hi.max())
        # The chain in location order: merged centroids' extents can overlap (module notes).
        chain = np.flatnonzero(~point)
        chain = chain[np.argsort(loc[chain], kind="stable")]
        self.x, self.f, self.key_scaled = self._chain(c.w[chain], c.lo[chain], c.hi[chain], loc[chain],
                                                      by_key[chain])
        # Knots for inversion: chain knots and point masses, with the modelled
        # number of values at or below each knot and strictly below it.
        self.knots = _sorted_unique(np.concatenate((self.x, self.point_x)))
        self.right = self.mass_at_or_below(self.knots)
        at = np.zeros(self.knots.size)
        np.add.at(at, np.searchsorted(self.knots, self.point_x), np.diff(self.point_cum, prepend=0.0))
        self.left = self.right - at

    @staticmethod
    def _chain(w: np.ndarray, lo: np.ndarray, hi: np.ndarray, loc: np.ndarray,
               key_scaled: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Knots (x, mass at or below x) and per-interval scale of the continuous part."""
        n = w.size
        if not n:
            return np.empty(0), np.empty(0), np.empty(0, dtype=bool)
        before = np.cumsum(w) - w
        reach = np.maximum.accumulate(hi)  # largest value of centroids 0..i
        floor = np.minimum.accumulate(lo[::-1])[::-1]  # smallest value of centroids i..n-1
        gap = np.flatnonzero(reach[:-1] < floor[1:])
        # Knots in chain order: start, then each centroid followed by its gap knots, then end.
        order = np.concatenate(([-1], 3 * np.arange(n), 3 * gap + 1, 3 * gap + 2, [3 * n]))
        xs = np.concatenate(([floor[0]], loc, reach[gap], floor[gap + 1], [reach[-1]]))
        fs = np.concatenate(([0.0], before + w / 2, before[gap + 1], before[gap + 1], [w.sum()]))
        ks = np.concatenate(([key_scaled[0]], key_scaled, key_scaled[gap], key_scaled[gap + 1],
                             [key_scaled[-1]]))
        o = np.argsort(order, kind="stable")
        flags = ks[o]
        return np.maximum.accumulate(xs[o]), np.maximum.accumulate(fs[o]), flags[:-1] | flags[1:]

    def _fraction(self, j: np.ndarray, x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            by_value = (x - a) / (b - a)
            by_key = (float_keys(x) - float_keys(a)) / (float_keys(b) - float_keys(a))
        frac = np.where(self.key_scaled[j], by_key, by_value)
        return np.where(b > a, np.clip(frac, 0.0, 1.0), 1.0)

    def mass_at_or_below(self, x: np.ndarray) -> np.ndarray:
        """Modelled number of values <= x."""
        out = np.zeros(x.shape)
        if self.x.size > 1:
            j = np.clip(np.searchsorted(self.x, x, side="right") - 1, 0, self.x.size - 2)
            a, b = self.x[j], self.x[j + 1]
            out = self.f[j] + self._fraction(j, x, a, b) * (self.f[j + 1] - self.f[j])
            out[x < self.x[0]] = 0.0
        if self.point_x.size:
            i = np.searchsorted(self.point_x, x, side="right")
            out = out + np.where(i > 0, self.point_cum[np.maximum(i - 1, 0)], 0.0)
        return out

    def invert(self, p: np.ndarray) -> np.ndarray:
        """Smallest x whose modelled CDF reaches p."""
        target = p * self.total
        j = np.minimum(np.searchsorted(self.right, target, side="left"), self.knots.size - 1)
        i = np.maximum(j - 1, 0)
        a, b = self.knots[i], self.knots[j]
        rises = (j > 0) & (self.left[j] >= target) & (self.left[j] > self.right[i])
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.clip((target - self.right[i]) / (self.left[j] - self.right[i]), 0.0, 1.0)
        chain = np.clip(np.searchsorted(self.x, a, side="right") - 1, 0, max(self.x.size - 2, 0))
        key_scaled = self.key_scaled[chain] if self.key_scaled.size else np.zeros(a.shape, bool)
        ka, kb = float_keys(a), float_keys(b)
        inside = np.where(key_scaled, keys_to_floats(ka + frac * (kb - ka)), a + frac * (b - a))
        return np.where(rises, np.clip(inside, a, b), b)


class TDigest:
    """Mergeable quantile sketch of finite float64 values (see the module notes).

    Examples
    --------
    >>> d = TDigest()
    >>> d.update(np.arange(1.0, 10_001.0))
    >>> round(float(d.quantile(np.array([0.5]))[0]))
    5000
    >>> float(d.cdf(np.array([2500.0]))[0])
    0.25
    """

    __slots__ = ("_centroids", "_values", "_items_in", "_buffered", "_model")

    def __init__(self) -> None:
        self._centroids = _Items.empty()
        self._values: list[np.ndarray] = []  # raw values not yet compressed
        self._items_in: list[_Items] = []  # merged centroids and point masses not yet compressed
        self._buffered = 0
        self._model: _Cdf | None = None

    # -- building -------------------------------------------------------------
    def update(self, values: np.ndarray) -> None:
        """Add finite float64 values (the caller removes NaN and inf)."""
        if values.size:
            self._values.append(np.array(values, dtype=np.float64))
            self._buffer_grew(values.size)

    def update_weighted(self, values: np.ndarray, weights: np.ndarray, *, is_sorted: bool = False) -> None:
        """Add point masses: ``weights[i]`` copies of ``values[i]`` (finite values);
        ``is_sorted`` when ``values`` are known to be ascending."""
        if values.size:
            weights = np.asarray(weights, np.float64)
            if not is_sorted:
                order = np.argsort(values, kind="stable")
                values, weights = values[order], weights[order]
            self._items_in.append(_Items.points(values, weights))
            self._buffer_grew(values.size)

    def merge(self, other: TDigest) -> None:
        """Merge ``other`` into this digest (in place); ``other`` is not modified.

        The other digest's centroids are buffered like values, so merging many
        small digests costs a few compressions, not one each.
        """
        items = other._items()
        if items.size:
            self._items_in.append(items)
            self._buffer_grew(items.size)

    def _buffer_grew(self, n: int) -> None:
        self._model = None
        self._buffered += n
        if self._buffered >= BUFFER_SIZE:
            self._flush()

    def _items(self) -> _Items:
        """Centroids and everything buffered, sorted by key mean, without compressing."""
        parts = [self._centroids, *self._items_in]
        if self._values:  # each distinct value one point mass: a tie is never split between groups
            # the buffer is a few sorted batches: a merge sort (timsort) merges their runs in a
            # quarter of quicksort's time (2,500 values in 5 runs: 14 against 52 us)
            values, counts = distinct_counts(np.sort(np.concatenate(self._values), kind="stable"))
            parts.append(_Items.points(values, counts.astype(np.float64)))
        parts = [p for p in parts if p.size]
        if len(parts) <= 1:
            return parts[0] if parts else _Items.empty()
        if len(parts) == 2:  # the usual case: centroids and one batch of values, merged in linear time
            return parts[0].interleave(parts[1])
        fields = [np.concatenate([getattr(p, f) for p in parts]) for f in _Items.__slots__]
        order = np.argsort(fields[2], kind="stable")  # by key mean
        return _Items(*(a[order] for a in fields))

    def _flush(self) -> None:
        compress_all((self,))

    # -- reading --------------------------------------------------------------
    @property
    def total_weight(self) -> float:
        """Number of values summarised."""
        self._flush()
        return float(self._centroids.w.sum())

    @property
    def is_lossless(self) -> bool:
        """True while every centroid holds a single distinct value: the CDF is then exact."""
        self._flush()
        return bool(np.all(self._centroids.lo == self._centroids.hi))

    def cdf_bounds(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Certain bounds on the fraction of values <= x, for each x.

        Each centroid keeps its smallest and largest value (``lo``, ``hi``), so
        the values <= x include every centroid with ``hi <= x`` and are within
        the centroids with ``lo <= x``: lower = weight(hi <= x) / total,
        upper = weight(lo <= x) / total. They differ by the weight of the
        centroids straddling x (0 between centroids).

        Raises
        ------
        ValueError
            If the digest is empty.

        Examples
        --------
        >>> d = TDigest(); d.update(np.arange(100.0))
        >>> lo, hi = d.cdf_bounds(np.array([-1.0, 49.5, 99.0]))
        >>> lo[[0, 2]].tolist(), hi[[0, 2]].tolist(), bool(lo[1] <= 0.5 <= hi[1])
        ([0.0, 1.0], [0.0, 1.0], True)
        """
        if not self.total_weight:
            raise ValueError("empty digest")
        c = self._centroids
        x = np.asarray(x, dtype=np.float64)
        total = float(c.w.sum())
        by_hi, by_lo = np.argsort(c.hi, kind="stable"), np.argsort(c.lo, kind="stable")
        cum_hi = np.concatenate(([0.0], np.cumsum(c.w[by_hi])))
        cum_lo = np.concatenate(([0.0], np.cumsum(c.w[by_lo])))
        lower = cum_hi[np.searchsorted(c.hi[by_hi], x, side="right")] / total
        upper = cum_lo[np.searchsorted(c.lo[by_lo], x, side="right")] / total
        return lower, upper

    @property
    def centroid_count(self) -> int:
        """Number of centroids after compression."""
        self._flush()
        return self._centroids.size

    def _cdf_model(self) -> _Cdf:
        self._flush()
        if self._model is None:
            self._model = _Cdf(self._centroids)
        return self._model

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """Estimated fraction of values <= x, for each x.

        Raises
        ------
        ValueError
            If the digest is empty.
        """
        if not self.total_weight:
            raise ValueError("empty digest")
        m = self._cdf_model()
        x = np.asarray(x, dtype=np.float64)
        out = m.mass_at_or_below(x) / m.total
        out[x >= m.top] = 1.0
        return out

    def quantile(self, p: np.ndarray) -> np.ndarray:
        """Inverted-CDF quantiles: smallest x with ``cdf(x) >= p``, monotone in p.

        Raises
        ------
        ValueError
            If the digest is empty.
        """
        if not self.total_weight:
            raise ValueError("empty digest")
        return self._cdf_model().invert(np.asarray(p, dtype=np.float64))

    # -- serialisation ----------------------------------------------------------
    def to_dict(self, *, compress: bool = True) -> dict[str, Any]:
        """Plain-data form: weights and extents exactly, means as 16-bit positions.

        ``w``, ``lo`` and ``hi`` are float64 (byte-shuffled, see
        :func:`sketches.codec.pack_floats`); each mean is stored as its
        position in ``[lo, hi]`` (the key mean in ``[key(lo), key(hi)]``)
        rounded to 1/65535, which moves a centroid's location by at most
        1/131070 of its own range.

        With ``compress=False`` and at most :data:`UNCOMPRESSED_MAX` buffered
        values (the whole buffer), the buffer is not compressed: the centroids
        are written as above and the buffered values as they are, packed
        doubles in ``"buf"`` (format 6), and :meth:`from_dict` buffers them
        again, so the digest read back is the one written and compresses them
        with its next values. When the buffer also holds centroids of merged
        digests, the centroids and everything buffered (values as point
        masses) are written uncompressed in the centroid fields, marked
        ``"raw"``, and read back into the buffer. For state written often,
        such as the aggregator's checkpoints of open windows: each write would
        otherwise compress the digest (the costliest step of a checkpoint), and
        the digest's compressions would depend on how often it is written.
        """
        raw = not compress and 0 < self._buffered <= UNCOMPRESSED_MAX
        buf = None
        if raw and not self._items_in:  # values only: kept apart from the centroids
            raw, c = False, self._centroids
            buf = self._values[0] if len(self._values) == 1 else np.concatenate(self._values)
            self._values = [buf]
        elif raw:
            c = self._items()
        else:
            self._flush()
            c = self._centroids
        if np.array_equal(c.lo, c.hi):  # point masses only (a lossless digest): every position is 0
            mean = kmean = bytes(2 * c.size)
        else:
            from sketches import kernels  # imported at first use (numba: see sketches.kernels)

            both = kernels.positions(c.mean, c.kmean, c.lo, c.hi, _STEPS)
            mean, kmean = both[:2 * c.size], both[2 * c.size:]
        d = {"w": pack_floats(c.w), "lo": pack_floats(c.lo), "hi": pack_floats(c.hi),
             "mean": mean, "kmean": kmean}
        if raw:
            d["raw"] = True
        if buf is not None:
            d["buf"] = pack_floats(buf)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TDigest:
        """Inverse of :meth:`to_dict`."""
        w, lo, hi = unpack_floats(d["w"]), unpack_floats(d["lo"]), unpack_floats(d["hi"])
        mean = _at_position(d["mean"], lo, hi)
        kmean = _at_position(d["kmean"], float_keys(lo), float_keys(hi))
        t = cls()
        items = _Items(w, mean, kmean, lo, hi)
        if d.get("raw") and items.size:  # not compressed yet: buffered, as when written
            t._items_in, t._buffered = [items], items.size
        else:
            t._centroids = items
        if d.get("buf") is not None:
            values = unpack_floats(d["buf"])
            if values.size:
                t._values, t._buffered = [values], t._buffered + values.size
        return t


_STEPS = 65535


def _at_position(data: bytes, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    r = np.frombuffer(data, "<u2") / _STEPS
    return np.clip((1.0 - r) * lo + r * hi, lo, hi)
