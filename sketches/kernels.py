"""The sketches' compiled loops (numba: LLVM machine code from typed Python), where numpy would
spend its time in per-call overhead and temporary arrays:

- :func:`compress_parts`: the t-digest's compression, which :mod:`sketches.tdigest` describes
  (its module notes give the rules and their reasons): the k_1 grid proposes groups, then three
  passes cut them (across wide gaps, through hollow middles, at the median of lopsided ones),
  each pass judging the groups the previous one left; :func:`key_scaled_each`, the scale test
  those cuts and the digest's CDF share; :func:`positions`, the centroids' 16-bit positions that
  a digest is written with.
- :func:`moments` and :func:`count_sorted`: a numeric batch's mean and M2, and its counts in
  the reference's bins (:mod:`sketches.numeric`, :mod:`sketches.bins`).

Why compiled: written as vectorised numpy, the compression cost ~300 ns per item (about sixty
passes over temporary arrays and ~1,400 Python calls per window's digests), a fifth of what a
record cost the aggregator; as loops each step touches each item once (docs/profiles.md,
"Ingest: what a record costs the aggregator"). The functions are compiled at first use and
cached (see :func:`_compiled`), so a process pays the compilation once per installation, not
per start, and loads them in ~0.3 s (:func:`load`). Importing numba costs a process ~0.2 s and
~60 MB, so the sketches import this module at first use: a process that never compresses,
writes or counts a numeric sketch (the CLI) does not pay it.

Sums are sequential, in item order (numpy's reductions sum pairwise: results can differ in the
last bits), with each group's sums of a digest's values rescaled by the group's magnitude when
one passes 1.8e308 (floats in [-1.8e308, 1.8e308] sum to inf otherwise).
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

GAP_FRACTION = 0.25
"""A centroid is split where a gap between neighbours exceeds this share of its range."""
HOLLOW_SHARE = 1 / 16
"""A centroid is split at its mean when less than this share of its mass lies within 1/8 of its range."""
SKEW_OFFSET = 0.2
"""A centroid is split at its median when its mean is this far (share of range) off the middle."""
SCALE_EVIDENCE = 1.0
"""Key scale only when the means miss value-scale uniformity by more than this (chi-square per value)..."""
SCALE_RATIO = 2.0
"""...and fit key-scale uniformity this many times better (see :func:`key_scaled_each`)."""
TAIL_ITEMS = 16
"""Items at each end never grouped with a neighbour of another value: the digest keeps its 16
smallest and 16 largest distinct values (with their counts) exactly, whatever its size. The k_1
grid's outermost group holds about 1.1e-4 of the weight (110 values of 10^6), so without them the
count of values beyond a point in the extreme tail (how many current values exceed the baseline's
maximum: :mod:`detectors.quality.out_of_range`) was interpolated inside that group: 15 for a true
4. Merging keeps it: the most extreme values of a union are among the most extreme of each part."""
KEY_LN = np.log(2.0) / 2.0**52
"""Natural-log units per unit of key: key / 2**52 is log2|x| + 1023 to within 0.09 (Mitchell 1962)."""


def _compiled(f: Callable) -> Callable:
    """``f`` compiled at its first call, with IEEE division (0/0 is NaN, as in numpy, instead of
    raising). Cached where numba finds a writable directory (``NUMBA_CACHE_DIR``, else next to
    this module, else the user's cache directory); where none is, as in a container with a
    read-only file system and no cache directory set, compiled in each process (a few seconds
    at its first compression; deploy/Dockerfile sets ``NUMBA_CACHE_DIR``)."""
    try:
        return numba.njit(cache=True, nogil=True, error_model="numpy")(f)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(cache=False, nogil=True, error_model="numpy")(f)


@_compiled
def _key_scaled(mean: float, kmean: float, lo: float, hi: float, klo: float, khi: float) -> bool:
    """:func:`key_scaled_each` of one centroid."""
    span = abs(khi - klo)
    if not span > 0.05 / KEY_LN:  # the scales agree: value scale
        return False
    negative = hi <= 0.0
    # Positions of both means from the end nearer zero, less 1/2.
    a = abs(mean - (hi if negative else lo)) / (hi - lo) - 0.5
    b = abs(kmean - (khi if negative else klo)) / span - 0.5
    t = span * KEY_LN
    q = 1.0 / np.expm1(t)  # r / (1 - r); 0 past a span of ~700 binades (expm1 is inf)
    inv_t = 1.0 / t
    h = 0.5 - inv_t + q  # 1/2 - g
    mean_ln = q * t - 1.0
    var_k = (2.0 + 2.0 * q - q * (t * (t + 2.0) + 2.0) - mean_ln * mean_ln) * inv_t * inv_t
    var_v = (1.0 + 2.0 * q) * inv_t / 2.0 - inv_t * inv_t
    chi2_v = 12.0 * a * a + (b - h) ** 2 / var_k
    chi2_k = 12.0 * b * b + (a + h) ** 2 / var_v
    return chi2_v > SCALE_EVIDENCE and chi2_v > SCALE_RATIO * chi2_k  # False on NaN


def key_scaled_each(mean: np.ndarray, kmean: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    klo: np.ndarray, khi: np.ndarray) -> np.ndarray:
    """Whether each centroid is key-scaled (:func:`sketches.tdigest.key_scaled`, whose notes give
    the test), given the keys ``klo``, ``khi`` of its ``lo`` and ``hi``.

    Parameters
    ----------
    mean, kmean, lo, hi, klo, khi : np.ndarray of float64, shape (n,)

    Returns
    -------
    np.ndarray of bool, shape (n,)
        Only centroids spanning more than 5 % in log scale can be True: below that the two
        hypotheses coincide (g = 1/2 - t/12, both variances 1/12) and the value scale is kept.
    """
    # one compiled signature: writable, contiguous float64 (another would compile anew)
    return _key_scaled_all(*(np.require(x, np.float64, ("C", "W")) for x in (mean, kmean, lo, hi, klo, khi)))


@_compiled
def _key_scaled_all(mean, kmean, lo, hi, klo, khi):
    out = np.zeros(mean.size, dtype=np.bool_)
    for i in range(mean.size):
        out[i] = _key_scaled(mean[i], kmean[i], lo[i], hi[i], klo[i], khi[i])
    return out


@_compiled
def _groups(w, mean, kmean, lo, hi, klo, khi, a, b, start, g):
    """Aggregate the groups of items ``a:b`` that ``start`` (True at each group's first item)
    forms into the rows of ``g`` (w, mean, kmean, lo, hi, klo, khi, first item, end item);
    returns how many. Means are clipped to the group's extent, key means to its keys' extent:
    a group of one repeated value keeps that value's key exactly, so rounding never puts a group's
    key mean above the next group's and the key means stay sorted (``_Items.interleave`` relies on
    it).
    When some group's weighted sum of means is not finite, every group's mean is summed again
    on values divided by the group's magnitude."""
    m = 0
    i = a
    while i < b:  # one group: items first:i
        first = i
        sw = sm = sk = 0.0
        glo, ghi, gklo, gkhi = lo[i], hi[i], klo[i], khi[i]
        while True:
            sw += w[i]
            sm += w[i] * mean[i]
            sk += w[i] * kmean[i]
            glo, ghi = min(glo, lo[i]), max(ghi, hi[i])
            gklo, gkhi = min(gklo, klo[i]), max(gkhi, khi[i])
            i += 1
            if i == b or start[i]:
                break
        row = g[m]
        row[0], row[1], row[2], row[3], row[4] = sw, sm, sk, glo, ghi
        row[5], row[6], row[7], row[8] = gklo, gkhi, first, i
        m += 1
    overflow = False
    for j in range(m):
        g[j, 1] /= g[j, 0]
        if not np.isfinite(g[j, 1]):
            overflow = True
    if overflow:
        for j in range(m):
            scale = max(abs(g[j, 3]), abs(g[j, 4]))
            if scale == 0.0:
                scale = 1.0
            s = 0.0
            for i in range(int(g[j, 7]), int(g[j, 8])):
                s += w[i] * (mean[i] / scale)
            g[j, 1] = s / g[j, 0] * scale
    for j in range(m):
        g[j, 1] = min(max(g[j, 1], g[j, 3]), g[j, 4])
        g[j, 2] = min(max(g[j, 2] / g[j, 0], g[j, 5]), g[j, 6])
    return m


@_compiled
def _grid(w, kmean, lo, hi, cum, grid, a, b, start):
    """Mark the k_1 grid's cuts of items ``a:b`` (one digest) in ``start``: its first item, the
    first and last ``TAIL_ITEMS`` that start past their neighbour's largest value, the first item
    of key mean >= 0, the grid's ranks, and both ends of each run of one value heavy enough
    (``weight * (len(grid) + 1) >= total``: an average grid group's weight or more) when the
    digest has a run of two or more."""
    total = cum[b - 1]
    start[a] = True
    for j in range(1, TAIL_ITEMS + 1):
        for i in (a + j, b - j):
            if lo[i] > hi[i - 1]:
                start[i] = True
    negative = 0
    for i in range(a, b):
        negative += kmean[i] < 0.0
    if a + negative < b:
        start[a + negative] = True
    i = a
    for q in grid:  # the first item whose centre reaches each grid rank (the grid ascends)
        target = q * total
        while i < b and cum[i] - w[i] / 2 < target:
            i += 1
        if i < b:
            start[i] = True
    runs = False
    for i in range(a, b - 1):
        if lo[i + 1] == hi[i] and lo[i + 1] == hi[i + 1] and lo[i] == hi[i]:
            runs = True
            break
    if not runs:
        return
    r = a
    while r < b:
        e, weight = r + 1, w[r]
        while e < b and lo[e] == hi[e - 1] and lo[e] == hi[e] and lo[e - 1] == hi[e - 1]:
            weight += w[e]
            e += 1
        if weight * (grid.size + 1) >= total and lo[r] == hi[r]:
            start[r] = True
            if e < b:
                start[e] = True
        r = e


@_compiled
def _gap_cuts(lo, hi, klo, khi, g, m, start):
    """Cut across gaps wider than ``GAP_FRACTION`` of the group's range and than twice the
    mean spacing of its values, measured in the scale the CDF interpolates the group in."""
    for j in range(m):
        share = max(GAP_FRACTION, 2.0 / max(g[j, 0] - 1.0, 1.0))
        by_key = _key_scaled(g[j, 1], g[j, 2], g[j, 3], g[j, 4], g[j, 5], g[j, 6])
        wide = share * ((g[j, 6] - g[j, 5]) if by_key else (g[j, 4] - g[j, 3]))
        for i in range(int(g[j, 7]), int(g[j, 8]) - 1):
            gap = (klo[i + 1] - khi[i]) if by_key else (lo[i + 1] - hi[i])
            if gap > wide:
                start[i + 1] = True


@_compiled
def _hollow_cuts(w, mean, kmean, g, m, start):
    """Cut at the mean of groups (of 5 or more values, 2 or more items) with less than
    ``HOLLOW_SHARE`` of their mass within 1/8 of their range of the mean, in both scales."""
    for j in range(m):
        first, end = int(g[j, 7]), int(g[j, 8])
        if not (g[j, 0] > 4 and end - first > 1):
            continue
        near_value, near_key = (g[j, 4] - g[j, 3]) / 8, (g[j, 6] - g[j, 5]) / 8
        mass_value = mass_key = 0.0
        below = 0
        for i in range(first, end):
            if abs(mean[i] - g[j, 1]) <= near_value:
                mass_value += w[i]
            if abs(kmean[i] - g[j, 2]) <= near_key:
                mass_key += w[i]
            below += kmean[i] < g[j, 2]
        if max(mass_value, mass_key) < HOLLOW_SHARE * g[j, 0]:
            start[min(max(first + below, first + 1), end - 1)] = True


@_compiled
def _skew_cuts(w, cum, g, m, start):
    """Cut at the weighted median of groups (of 5 or more values, 2 or more items) whose mean
    sits more than ``SKEW_OFFSET`` of their range off its middle, in both scales: a dense
    cluster plus a long sparse tail. A constant group (0/0) is never cut."""
    for j in range(m):
        first, end = int(g[j, 7]), int(g[j, 8])
        if not (g[j, 0] > 4 and end - first > 1):
            continue
        off_value = abs((g[j, 1] - g[j, 3]) / (g[j, 4] - g[j, 3]) - 0.5)
        off_key = abs((g[j, 2] - g[j, 5]) / (g[j, 6] - g[j, 5]) - 0.5)
        if not (off_value > SKEW_OFFSET and off_key > SKEW_OFFSET):
            continue
        half = cum[first] - w[first] + g[j, 0] / 2
        below = 0
        for i in range(first, end):
            below += cum[i] < half
        start[min(max(first + below, first + 1), end - 1)] = True


@_compiled
def compress_parts(w, mean, kmean, lo, hi, klo, khi, bounds, grid):
    """Compress each digest's items into centroids.

    Parameters
    ----------
    w, mean, kmean, lo, hi : np.ndarray of float64, shape (n,)
        The items of several digests one after the other (:class:`sketches.tdigest._Items`),
        each digest's sorted by key mean; its values are finite.
    klo, khi : np.ndarray of float64, shape (n,)
        The keys (:func:`sketches.tdigest.float_keys`) of ``lo`` and ``hi``.
    bounds : np.ndarray of int64, shape (d + 1,)
        Where each of the d digests' items start, then n.
    grid : np.ndarray of float64, shape (k,)
        Ascending ranks in (0, 1) where the k_1 scale function crosses an integer.

    Returns
    -------
    centroids : np.ndarray of float64, shape (5, c)
        Weight, mean, key mean, smallest and largest value of each centroid; digest by digest.
        A view of a buffer sized by the items: copy what is kept.
    ends : np.ndarray of int64, shape (d,)
        Where each digest's centroids end in ``centroids``.
    """
    n = w.size
    start = np.zeros(n, dtype=np.bool_)
    cum = np.empty(n)
    g = np.empty((np.max(bounds[1:] - bounds[:-1]), 9))  # one digest's groups at a time
    out = np.empty((5, n))
    ends = np.empty(bounds.size - 1, dtype=np.int64)
    c = 0
    for p in range(bounds.size - 1):
        a, b = bounds[p], bounds[p + 1]
        s = 0.0
        for i in range(a, b):
            s += w[i]
            cum[i] = s
        _grid(w, kmean, lo, hi, cum, grid, a, b, start)
        m = _groups(w, mean, kmean, lo, hi, klo, khi, a, b, start, g)
        _gap_cuts(lo, hi, klo, khi, g, m, start)
        m = _groups(w, mean, kmean, lo, hi, klo, khi, a, b, start, g)
        _hollow_cuts(w, mean, kmean, g, m, start)
        m = _groups(w, mean, kmean, lo, hi, klo, khi, a, b, start, g)
        _skew_cuts(w, cum, g, m, start)
        m = _groups(w, mean, kmean, lo, hi, klo, khi, a, b, start, g)
        for j in range(m):
            for k in range(5):
                out[k, c + j] = g[j, k]
        c += m
        ends[p] = c
    return out[:, :c], ends


@_compiled
def _key(bits: int) -> float:
    """:func:`sketches.tdigest.float_keys` of one value, given its IEEE-754 bits."""
    return float(bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF))


@_compiled
def _position(x: float, lo: float, hi: float, steps: int) -> int:
    """Position of ``x`` in ``[lo, hi]`` in ``steps`` steps, computed on values divided by the
    larger magnitude (so no difference overflows); 0 where ``lo == hi``."""
    if not hi > lo:
        return 0
    scale = max(abs(lo), abs(hi))
    r = (x / scale - lo / scale) / (hi / scale - lo / scale)
    return int(np.rint(min(max(r, 0.0), 1.0) * steps))


def positions(mean: np.ndarray, kmean: np.ndarray, lo: np.ndarray, hi: np.ndarray, steps: int) -> bytes:
    """Each centroid's mean as its position in ``[lo, hi]``, then its key mean as its position
    in ``[key(lo), key(hi)]`` (keys: :func:`sketches.tdigest.float_keys`), each rounded to
    ``1 / steps``: little-endian unsigned 16-bit integers, 0 where ``lo == hi``.

    Parameters
    ----------
    mean, kmean, lo, hi : np.ndarray of float64, shape (n,)
    steps : int
        At most 65535.

    Returns
    -------
    bytes
        ``4 n`` bytes: the n positions of the means, then the n of the key means.

    Examples
    --------
    >>> from sketches.tdigest import float_keys
    >>> lo, hi, mean = np.array([0.0, 0.0, -4.0]), np.array([4.0, 0.0, 4.0]), np.array([1.0, 0.0, 4.0])
    >>> kmean = float_keys(np.array([0.0, 0.0, 4.0]))
    >>> np.frombuffer(positions(mean, kmean, lo, hi, 65535), "<u2").tolist()
    [16384, 0, 65535, 0, 0, 65535]
    """
    out = np.empty(2 * len(mean), dtype=np.uint16)
    _positions(*(np.require(x, np.float64, ("C", "W")) for x in (mean, kmean, lo, hi)), steps, out)
    return out.astype("<u2", copy=False).tobytes()


@_compiled
def _positions(mean, kmean, lo, hi, steps, out):
    n = mean.size
    lo_bits, hi_bits = lo.view(np.int64), hi.view(np.int64)
    for i in range(n):
        out[i] = _position(mean[i], lo[i], hi[i], steps)
        out[n + i] = _position(kmean[i], _key(lo_bits[i]), _key(hi_bits[i]), steps)


def moments(ordered: np.ndarray) -> tuple[float, float]:
    """Mean and M2 = sum of (x - mean)^2 of sorted finite values, in two passes.

    A sum past 1.8e308 is summed again on values divided by the largest magnitude; values
    all equal (the first is the last) give that value and 0 exactly, where a rounded mean
    would leave an M2 of rounding noise. M2 overflows to inf. Chan, Golub & LeVeque (1979)
    combine these per batch (:meth:`sketches.numeric.NumericSketch.update`).

    Parameters
    ----------
    ordered : np.ndarray of float64, shape (n,), n >= 1
        Ascending, finite.

    Examples
    --------
    >>> moments(np.array([1.0, 2.0, 6.0])), moments(np.full(3, 0.1))
    ((3.0, 14.0), (0.1, 0.0))
    >>> round(moments(np.array([1e308, 1e308, 1.5e308]))[0] / 1e308, 12)
    1.166666666667
    """
    return _moments(np.require(ordered, np.float64, ("C", "W")))


@_compiled
def _moments(ordered):
    n = ordered.size
    if ordered[0] == ordered[n - 1]:
        return ordered[0], 0.0
    s = 0.0
    for x in ordered:
        s += x
    mean = s / n
    if not np.isfinite(mean):
        scale = max(abs(ordered[0]), abs(ordered[n - 1]))
        s = 0.0
        for x in ordered:
            s += x / scale
        mean = s / n * scale
    m2 = 0.0
    for x in ordered:
        m2 += (x - mean) * (x - mean)
    return mean, m2


def count_sorted(ordered: np.ndarray, edges: np.ndarray, counts: np.ndarray) -> None:
    """Add to ``counts`` how many of the sorted values fall in each bin of ``edges``: bin 0
    holds the values at or below ``edges[0]``, bin k those in ``(edges[k - 1], edges[k]]``,
    the last those above ``edges[-1]``. One merge of the two sorted arrays.

    Parameters
    ----------
    ordered : np.ndarray of float64, shape (n,)
        Ascending, finite.
    edges : np.ndarray of float64, shape (e,)
        Ascending.
    counts : np.ndarray of int64, shape (e + 1,)
        Added to in place (writable, contiguous).

    Examples
    --------
    >>> c = np.zeros(3, np.int64); count_sorted(np.array([0.5, 1.0, 1.5, 3.0]), np.array([1.0, 2.0]), c); c
    array([2, 1, 1])
    """
    _count_sorted(*(np.require(x, np.float64, ("C", "W")) for x in (ordered, edges)), counts)


@_compiled
def _count_sorted(ordered, edges, counts):
    n = ordered.size
    below = j = 0
    for e in range(edges.size):
        while j < n and ordered[j] <= edges[e]:
            j += 1
        counts[e] += j - below
        below = j
    counts[edges.size] += n - below


def load() -> None:
    """Load the compiled functions now (from their cache: ~0.3 s; compiling them: a few seconds,
    once per installation), so that the first batch does not pay for it: for a process about to
    time or serve its work, such as the aggregator."""
    values = np.linspace(1.0, 2.0, 4 * TAIL_ITEMS)
    keys = values.view(np.int64).astype(np.float64)  # a positive float's key: its bits
    ones = np.ones(values.size)
    compress_parts(ones, values, keys, values, values, keys, keys,
                   np.array([0, values.size], dtype=np.int64), np.linspace(0.1, 0.9, 9))
    key_scaled_each(values, values, values, values, keys, keys)
    positions(values, keys, values - 1.0, values + 1.0, 65535)
    moments(values)
    count_sorted(values, values[::8].copy(), np.zeros(values[::8].size + 1, np.int64))
