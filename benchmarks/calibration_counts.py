"""H0 windows drawn as the statistics the tests read, not as raw values: thousands of pairs at n = 1e6.

A test on a profile reads a few statistics of the window's n values, never the
values themselves. On the binned path (:mod:`sketches.bins`) PSI, JS, the
binned KS and W1 read the counts in the reference's edges, and W1 the joint
minimum and maximum; the exact tables of a discrete feature, the categorical
counts and the predicted labels are counts. Those statistics of n iid draws
have laws that can be drawn directly, exactly, in O(bins) instead of O(n):

* **The reference** (the baseline, whose edges are its own quantiles,
  :func:`sketches.bins.derive_edges`): edge k is the order statistic of rank
  r_k = ceil(n k / 100) (the rank numpy's ``inverted_cdf`` picks), so its bin
  counts are r_k - r_{k-1}, fixed by the cut. The uniform order statistics at
  ranks 1 < r_1 < ... < r_99 < n are the normalised partial sums of
  independent Gamma(r_k - r_{k-1}) spacings and a last Gamma(n + 1 - r_99)
  (Renyi's representation: David & Nagaraja, "Order Statistics", 2003,
  sec. 2.5); the values are the law's quantile function at them, with the
  minimum (rank 1) and maximum (rank n).
* **A current window** counted in those edges: Multinomial(n, masses of the
  law between the edges); its minimum lies in the first non-empty bin, as the
  minimum of that bin's c values drawn from the law restricted to the bin
  (F^-1(L + (U - L) B), B ~ Beta(1, c)), its maximum likewise in the last.
* **The moments** of a normal feature: mean ~ N(mu, sigma^2 / n) and
  M2 ~ sigma^2 chi2(n - 1), independent (Cochran's theorem). They are drawn
  independently of the counts: the pair (counts, moments) then does not have
  the raw sample's joint law, but no test reported here reads both (PSI, JS,
  KS and W1 on bins read counts and extremes, their p-values not the moments;
  the mean shift reads count, mean and M2), so each test's input has its
  exact law. tests/test_benchmarks_calibration_counts.py checks that the
  binned tests ignore the moments and the digest, and that the direct draws
  and raw values give the same statistics' laws.
* **Categories**: the counts of 8 categories and of the Zipf(1.3) values
  1 .. 2,000 (with the number beyond) are multinomial.
* **Discrete** (Poisson(4)) values: the counts of each value are
  Multinomial(n, Poisson pmf) (the tail beyond :data:`POISSON_MAX` drawn by
  rejection); the exact table, extremes and moments are those counts' (the
  same sketch the raw values give: tested against
  :meth:`NumericSketch.update <sketches.numeric.NumericSketch.update>` on them).

The sketches are then the project's own: :class:`~sketches.bins.BinCounts` and
:class:`~sketches.numeric.NumericSketch` read back from the stored profile
format (:meth:`NumericSketch.from_dict <sketches.numeric.NumericSketch.from_dict>`;
binned: an empty digest, which no binned test reads), the categorical counts
through ``update_counts``; the tests are the detectors'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from sketches.bins import EDGE_BINS, BinCounts
from sketches.numeric import NumericSketch
from sketches.tdigest import TDigest

POISSON_MEAN = 4.0
POISSON_MAX = 40
"""Values 0 .. 39 drawn as multinomial cells; P(X >= 40) ~ 1e-22 for Poisson(4), drawn by rejection."""


@dataclass(frozen=True)
class Law:
    """A continuous law by its CDF and quantile function (vectorised), and its moments."""

    cdf: object
    ppf: object
    mean: float
    var: float


NORMAL = Law(special.ndtr, special.ndtri, 0.0, 1.0)
"""N(0, 1): the calibration's continuous feature."""
SCORE = Law(lambda x: special.betainc(2.0, 5.0, np.clip(x, 0.0, 1.0)),
            lambda u: special.betaincinv(2.0, 5.0, u), 2.0 / 7.0, 10.0 / (49.0 * 8.0))
"""Beta(2, 5): the calibration's score."""


def edge_ranks(n: int, bins: int = EDGE_BINS) -> np.ndarray:
    """1-based ranks of the order statistics :func:`~sketches.bins.derive_edges` takes as edges
    from ``n`` distinct values: ceil(n k / bins) as numpy's ``inverted_cdf`` computes it, in
    floating point (virtual index n q - 1, rounded up when its fraction is > 0), in O(bins).

    Examples
    --------
    >>> edge_ranks(1000)[:3].tolist(), int(edge_ranks(1000)[-1])
    ([10, 20, 30], 990)
    """
    virtual = n * (np.arange(1, bins) / bins) - 1
    below = np.floor(virtual)
    index = np.clip(below + ((virtual - below) > 0), 0, n - 1)
    return np.unique(index.astype(np.int64) + 1)


def _sketch(bins: BinCounts, finite: int, lo: float, hi: float, mean: float, m2: float) -> NumericSketch:
    """A digest-mode sketch of ``finite`` values with these bins, extremes and moments, read back
    from the stored profile format (its digest empty: no binned test reads it)."""
    return NumericSketch.from_dict({
        "n": finite, "null": 0, "pinf": 0, "ninf": 0, "min": lo, "max": hi, "mean": mean,
        "m2": m2, "exact": None, "td": TDigest().to_dict(), "bins": bins.to_dict()})


def _moments(law: Law, n: int, rng: np.random.Generator) -> tuple[float, float]:
    """Mean and M2 of n draws: exact for the normal law (Cochran), else the law's own values."""
    if law is NORMAL:
        return float(rng.normal(law.mean, math.sqrt(law.var / n))), float(law.var * rng.chisquare(n - 1))
    return law.mean, law.var * n


def reference(law: Law, finite: int, rng: np.random.Generator) -> NumericSketch:
    """The baseline of ``finite`` draws of ``law`` counted in edges derived from its own values
    (``source=True``), with its extremes, as a reference upload builds it."""
    ranks = edge_ranks(finite)
    at = np.unique(np.concatenate(([1], ranks, [finite])))
    spacings = rng.standard_gamma(np.diff(np.concatenate(([0], at, [finite + 1]))).astype(np.float64))
    u = np.cumsum(spacings)[:-1] / spacings.sum()
    values = law.ppf(u)
    edges = values[np.searchsorted(at, ranks)]
    counts = np.diff(np.concatenate(([0], ranks, [finite])))
    bins = BinCounts(edges, source=True, counts=counts.astype(np.int64))
    return _sketch(bins, finite, float(values[0]), float(values[-1]), *_moments(law, finite, rng))


def _extreme(law: Law, lower: float, upper: float, count: int, rng: np.random.Generator,
             largest: bool) -> float:
    """Minimum (or maximum) of ``count`` draws of ``law`` restricted to the CDF range (lower, upper]."""
    v = rng.uniform() ** (1.0 / count)  # max of count uniforms on (0, 1); 1 - v has the min's law
    return float(law.ppf(lower + (upper - lower) * (v if largest else 1.0 - v)))


def current(law: Law, finite: int, ref: NumericSketch, rng: np.random.Generator) -> NumericSketch:
    """A window of ``finite`` draws of ``law`` counted in ``ref``'s edges, with its extremes."""
    cum = np.concatenate(([0.0], law.cdf(ref.bins.edges), [1.0]))
    counts = rng.multinomial(finite, np.clip(np.diff(cum), 0.0, None))
    nonempty = np.flatnonzero(counts)
    first, last = int(nonempty[0]), int(nonempty[-1])
    lo = _extreme(law, cum[first], cum[first + 1], int(counts[first]), rng, largest=False)
    hi = _extreme(law, cum[last], cum[last + 1], int(counts[last]), rng, largest=True)
    bins = ref.bins.empty_like()
    bins.counts = counts.astype(np.int64)
    return _sketch(bins, finite, lo, hi, *_moments(law, finite, rng))


def poisson_counts(n: int, rng: np.random.Generator, mean: float = POISSON_MEAN) -> np.ndarray:
    """Counts of the values 0, 1, ... among ``n`` Poisson(``mean``) draws (exact law)."""
    pmf = stats.poisson.pmf(np.arange(POISSON_MAX), mean)
    cells = rng.multinomial(n, np.append(pmf, max(1.0 - pmf.sum(), 0.0)))
    counts, tail = cells[:-1], int(cells[-1])
    extra: list[np.ndarray] = []
    while tail > sum(e.size for e in extra):  # beyond POISSON_MAX: rejection from the law itself
        x = rng.poisson(mean, 1_000)
        extra.append(x[x >= POISSON_MAX])
    if tail:
        big = np.concatenate(extra)[:tail]
        counts = np.bincount(np.concatenate((np.repeat(np.arange(POISSON_MAX), counts), big)))
    return counts


def zipf_counts(n: int, rng: np.random.Generator, a: float, top: int) -> tuple[np.ndarray, int]:
    """Counts of the values 1 .. ``top`` among ``n`` Zipf(``a``) draws (index 0: value 1), and the
    number of draws beyond ``top``: Multinomial(n, k^-a / zeta(a) for k <= top, and the rest)."""
    pmf = np.arange(1, top + 1, dtype=np.float64) ** -a / special.zeta(a)
    cells = rng.multinomial(n, np.append(pmf, max(1.0 - pmf.sum(), 0.0)))
    return cells[:-1], int(cells[-1])


def discrete(n: int, rng: np.random.Generator) -> NumericSketch:
    """The exact-table sketch of ``n`` Poisson(4) draws, built from their counts: the table, the
    extremes and the moments (mean = sum c v / n, M2 = sum c (v - mean)^2) the raw values give,
    read back from the stored profile format."""
    counts = poisson_counts(n, rng)
    present = np.flatnonzero(counts)
    values, c = present.astype(np.float64), counts[present]
    mean = float(c @ values) / n
    return NumericSketch.from_dict({
        "n": n, "null": 0, "pinf": 0, "ninf": 0, "min": float(values[0]), "max": float(values[-1]),
        "mean": mean, "m2": float(c @ (values - mean) ** 2), "td": None,
        "exact": [values.astype("<f8").tobytes(), c.astype("<i8").tobytes()]})
