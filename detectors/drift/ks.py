"""Two-sample Kolmogorov-Smirnov test computed from two numeric sketches."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from detectors.drift.binned import aligned_bins, binned_ks, discrete_ks_shift
from detectors.drift.grid import JointCdf, joint_cdf
from detectors.result import TestResult, insufficient, judged
from detectors.stats.bridge_max import MAX_ATOMS, bridge_max_sf
from detectors.stats.ks_exact import MAX_TOTAL, ks_exact_p
from sketches.numeric import NumericSketch

MIN_COUNT = 30


def ks_statistic(reference: NumericSketch, current: NumericSketch, grid: JointCdf | None = None) -> float:
    """D = sup_x |F_ref(x) - F_cur(x)| over the pair's shared grid.

    Exact for two exact-mode sketches; otherwise an under-estimate by at most
    the grid's resolution (so never a source of false alarms).

    Examples
    --------
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.array([1.0, 2.0])); b.update(np.array([2.0, 3.0]))
    >>> ks_statistic(a, b)
    0.5
    """
    g = grid if grid is not None else joint_cdf(reference, current)
    return float(np.max(np.abs(g.ref - g.cur)))


def kolmogorov_p(d: float, n_eff: float, shift: float = 0.0) -> float:
    """Asymptotic two-sample KS p-value with Stephens' small-sample correction.

    p = Q_KS((sqrt(n_eff) + 0.12 + 0.11 / sqrt(n_eff)) d + shift), Q_KS the
    Kolmogorov survival function (Stephens, "Use of the Kolmogorov-Smirnov,
    Cramer-von Mises and related statistics without extensive tables", 1970);
    ``shift``: the discrete-grid correction of a binned distance
    (:func:`~detectors.drift.binned.discrete_ks_shift`).

    Examples
    --------
    >>> round(kolmogorov_p(0.0, 100), 3), round(kolmogorov_p(0.19, 50), 2)
    (1.0, 0.05)
    """
    if d <= 0.0:
        return 1.0
    return float(special.kolmogorov(_stephens(d, n_eff) + shift))


def _stephens(d: float, n_eff: float) -> float:
    """(sqrt(n_eff) + 0.12 + 0.11 / sqrt(n_eff)) d: the statistic on the scale of its limit law."""
    s = math.sqrt(n_eff)
    return (s + 0.12 + 0.11 / s) * d


def ks_test(
    reference: NumericSketch,
    current: NumericSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
    grid: JointCdf | None = None,
) -> TestResult:
    """Two-sample KS test on sketches, with the sketches' rank error accounted for.

    Parameters
    ----------
    reference, current : NumericSketch
    feature : str
    floor : float
        KS distance tolerated under the null (interval null "D <= floor").
    alpha : float
        Level at which the status becomes ``drift`` (or ``inconclusive``).
    min_count : int
        Finite values needed on each side.
    grid : JointCdf, optional
        A precomputed grid of the pair.

    Returns
    -------
    TestResult
        ``statistic`` = ``effect_size`` = D; ``p_value`` at
        ``max(D - eps - floor, 0)``; ``error_bound`` = eps, the sketches'
        CDF error at the point of the largest lower bound on D (0 on exact
        sketches and on exact bins). Status ``inconclusive`` when D alone
        would be significant but D minus the sketch error is not. With no
        sketch error and at most ``MAX_TOTAL`` (200) values in all, the exact
        permutation p-value of :func:`~detectors.stats.ks_exact.ks_exact_p`
        (conditional on the ties when both sketches hold exact counts).

    Notes
    -----
    D = sup_x |F_ref(x) - F_cur(x)| (Smirnov, 1939). Under H0 and continuous
    data sqrt(N_eff) D, N_eff = n m / (n + m), follows the Kolmogorov
    distribution. Three paths, by what the sketches hold: both exact (few
    distinct values, or few values kept): D of the samples. Both counted in
    the same reference bins (:mod:`sketches.bins`): D at the bin edges,
    exact, whose null is the Kolmogorov law shifted for the grid
    (:func:`~detectors.drift.binned.discrete_ks_shift`). Otherwise the
    digests: with each CDF within its data-dependent bound eps(x) of the
    sample's (:meth:`~sketches.numeric.NumericSketch.cdf_error`, the weight
    of the centroids straddling x), the sample D >= max_x (|F_ref - F_cur|
    - eps_ref(x) - eps_cur(x)), so the p-value at that lower bound never
    exceeds the sample test's false-alarm rate. With ties known (both exact, at
    most ``MAX_ATOMS`` distinct values) the limit law is that of the largest
    |B(u_j)| of a Brownian bridge at the pooled CDF's atoms (Schmid 1958;
    :func:`~detectors.stats.bridge_max.bridge_max_sf`); with ties unknown the
    test is conservative. The interval null shifts D by
    the floor (the relevance-test construction of Wellek, "Testing Statistical
    Hypotheses of Equivalence and Noninferiority", 2010, ch. 11). Small
    samples: the asymptotic law is liberal for balanced samples (exact 0.071
    where it gives 0.055 at 30 + 30 values), hence the exact law there.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(rng.normal(size=2000)); b.update(rng.normal(size=2000))
    >>> ks_test(a, b).p_value > 0.05
    True
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.array([1.0, 2.0])); b.update(np.array([3.0, 4.0, 5.0, 6.0]))
    >>> round(ks_test(a, b, min_count=1).p_value, 4)  # scipy.stats.ks_2samp(method="exact")
    0.1333
    """
    n_ref, n_cur = reference.count, current.count
    if n_ref < min_count or n_cur < min_count:
        return insufficient("ks", feature, n_cur, n_ref,
                            f"needs >= {min_count} finite values on each side")
    n_eff = n_ref * n_cur / (n_ref + n_cur)
    counts = None if reference.is_exact and current.is_exact else aligned_bins(reference, current)
    if counts is not None:
        d, spacing = binned_ks(*counts)
        p = kolmogorov_p(d - floor, n_eff, discrete_ks_shift(spacing, n_ref + n_cur))
        return judged("ks", feature, d, d, p, n_cur, n_ref, p_exact=p, error_bound=0.0,
                      floor=floor, alpha=alpha)
    grid = grid if grid is not None else joint_cdf(reference, current)
    gap = np.abs(grid.ref - grid.cur)
    d = float(np.max(gap))
    if reference.rank_error + current.rank_error == 0:  # D is the samples' own
        ends = _block_ends(reference, current, grid)
        if n_ref + n_cur <= MAX_TOTAL:  # exact permutation p-value (conditional on ties when known)
            p = ks_exact_p(d - floor, n_ref, n_cur, ends)
        elif ends is not None and ends.size <= MAX_ATOMS:  # ties: the law at the atoms
            p = bridge_max_sf(_stephens(d - floor, n_eff), ends / (n_ref + n_cur))
        else:
            p = kolmogorov_p(d - floor, n_eff)
        return judged("ks", feature, d, d, p, n_cur, n_ref, p_exact=p, floor=floor, alpha=alpha)
    eps = reference.cdf_error(grid.x) + current.cdf_error(grid.x)
    lower = float(np.max(gap - eps))
    return judged(
        "ks", feature, d, d, kolmogorov_p(lower - floor, n_eff), n_cur, n_ref,
        p_exact=kolmogorov_p(d - floor, n_eff), error_bound=d - lower, floor=floor, alpha=alpha,
    )


def _block_ends(reference: NumericSketch, current: NumericSketch,
                grid: JointCdf) -> np.ndarray | None:
    """Pooled cumulative counts at the distinct values (both sketches exact), else None."""
    if not (reference.is_exact and current.is_exact):
        return None  # ties unknown: the continuous law, conservative with ties
    return np.rint(reference.count * grid.ref + current.count * grid.cur).astype(np.int64)
