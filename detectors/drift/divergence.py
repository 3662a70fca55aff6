"""The test shared by binned divergences (PSI, JS): sampling distribution and sketch error."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from detectors.drift.binned import aligned_bins, coarse_masses
from detectors.drift.bins import DEFAULT_BINS, aligned_masses, pool_sparse, quantile_binned
from detectors.drift.grid import JointCdf
from detectors.result import TestResult, insufficient, judged
from detectors.stats.divergence_null import BinTerms, divergence_null
from detectors.stats.exact import exact_conditional_p
from detectors.stats.interval import chi2_interval_p
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch

MIN_COUNT = 30
EXACT_MAX_TOTAL = 500
UNPOOLED_MAX_STATES = 2_000
"""Largest n_ref + n_cur tested bin by bin with the exact permutation law when bins are sparse."""

#: divergence(ref_mass, cur_mass, n_ref, n_cur) -> value
Divergence = Callable[[np.ndarray, np.ndarray, int, int], float]


def shrink(ref: np.ndarray, cur: np.ndarray, eta: float) -> np.ndarray:
    """Current masses moved toward the baseline by up to ``eta`` per bin.

    The divergence of ``(ref, shrink(ref, cur, eta))`` is the one the data
    support once every bin's mass difference may be off by ``eta``: sketch
    error is resolved in favour of "no change".

    Examples
    --------
    >>> shrink(np.array([0.5, 0.5]), np.array([0.7, 0.3]), 0.05).round(3).tolist()
    [0.65, 0.35]
    >>> shrink(np.array([0.5, 0.5]), np.array([0.52, 0.48]), 0.05).tolist()
    [0.5, 0.5]
    """
    d = cur - ref
    return ref + np.sign(d) * np.maximum(np.abs(d) - eta, 0.0)


def _masses(reference: NumericSketch | CategoricalSketch, current: NumericSketch | CategoricalSketch,
            bins: int, grid: JointCdf | None) -> tuple[np.ndarray, np.ndarray, float | np.ndarray, bool]:
    """Both sides' bin masses, their error bound (per bin or one for all) and whether the
    baseline's masses are fixed by the cut (its own quantiles).

    Exact reference bins (:mod:`sketches.bins`) when both numeric sides counted in the same
    edges and are not both exact: fine bins grouped at ``bins`` quantiles, no sketch error.
    """
    if isinstance(reference, NumericSketch) and not (reference.is_exact and current.is_exact):
        counts = aligned_bins(reference, current)
        if counts is not None:
            source = reference.bins.source
            r, c = coarse_masses(*counts, bins, source)
            return r, c, 0.0, source
    r, c, eta = aligned_masses(reference, current, bins, grid)
    return r, c, eta, quantile_binned(reference, bins)


def _pooled_error(eta: float | np.ndarray, keep: np.ndarray, r: np.ndarray, c: np.ndarray,
                  n_min: int) -> float:
    """One bound for every bin after sparse bins are merged: the largest bin's, or the sum over
    the sparse bins (which :func:`~detectors.drift.bins.pool_sparse` merges into one)."""
    eta = np.broadcast_to(np.asarray(eta, dtype=np.float64), r.shape)[keep]
    if not eta.size:
        return 0.0
    sparse = n_min * (r[keep] + c[keep]) / 2 < 5.0
    return float(max(eta.max(), eta[sparse].sum()))


def divergence_test(
    check: str,
    divergence: Divergence,
    to_chi2: Callable[[float], float],
    reference: NumericSketch | CategoricalSketch,
    current: NumericSketch | CategoricalSketch,
    feature: str = "",
    *,
    quartic: float,
    terms: BinTerms | None = None,
    bins: int = DEFAULT_BINS,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
    grid: JointCdf | None = None,
) -> TestResult:
    """A binned divergence with a p-value against "divergence <= floor".

    Parameters
    ----------
    check : str
        Result name (``"psi"``, ``"js"``).
    divergence : callable
        ``(ref_mass, cur_mass, n_ref, n_cur) -> value``.
    to_chi2 : callable
        Maps a divergence value to Pearson's chi-square distance it
        approximates for small changes (PSI: identity; JS distance d: 8 ln2 d^2).
    reference, current : NumericSketch or CategoricalSketch
    quartic : float
        The divergence's fourth-order coefficient in
        :func:`~detectors.stats.divergence_null.divergence_null` (PSI 1/12, 8 JSD 1/24).
    terms : callable, optional
        The divergence's per-bin terms in chi-square-distance units
        (:func:`~detectors.drift.psi.psi_terms`, :func:`~detectors.drift.js.js_terms`),
        for the exact per-bin moments of reference-quantile bins.
    bins, floor, alpha, min_count, grid
        See :func:`detectors.drift.bins.aligned_masses`; ``floor`` in the
        divergence's unit; ``min_count`` values needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` = ``effect_size`` = divergence of the estimated masses;
        ``p_value`` from the sketch-error-shrunk masses; ``error_bound`` =
        the per-bin mass error bound.

    Notes
    -----
    For small changes PSI and 8 ln2 JS^2 equal Pearson's chi-square distance
    sum_i (c_i - r_i)^2 / r_i, and T = N_eff * distance, N_eff = n m / (n + m),
    is asymptotically chi2(B - 1) under H0 (Yurdakul, "Statistical properties
    of the population stability index", 2018). At a few hundred values per
    side T is stochastically larger (mean and variance above B - 1 and
    2 (B - 1) by O(1 / N_eff)), so the p-value refers T to the scaled
    chi-square g chi2(h) with T's first two moments under H0
    (:func:`~detectors.stats.divergence_null.divergence_null`): for numeric
    baseline-quantile bins the current's counts are Dirichlet-multinomial
    given the baseline's (its masses are fixed by the cut), otherwise both
    sides are multinomial at the pooled shares; g -> 1 and h -> B - 1 as
    N_eff grows. Under the interval null the noncentrality is N_eff * floor
    (Mitra 1958), on the same scale. B counts the bins with mass on either
    side, after the bins expected to hold < 5 values are merged
    (:func:`~detectors.drift.bins.pool_sparse`). The statistic is always
    computed on every bin, and when merging would change the bins of a pair
    without sketch error and at most ``EXACT_MAX_TOTAL`` values, the p-value
    is :func:`exact_unpooled_p` instead: merging first hid swaps of rare
    categories.
    """
    n_ref, n_cur = int(reference.count), int(current.count)
    if n_ref < min_count or n_cur < min_count:
        return insufficient(check, feature, n_cur, n_ref,
                            f"needs >= {min_count} non-missing values on each side")
    r, c, eta, quantiles = _masses(reference, current, bins, grid)
    keep = (r > 0) | (c > 0)
    eta = _pooled_error(eta, keep, r, c, min(n_ref, n_cur))
    r_all, c_all = r[keep], c[keep]
    if r_all.size < 2:
        return judged(check, feature, 0.0, 0.0, 1.0, n_cur, n_ref, floor=floor, alpha=alpha)
    value = divergence(r_all, c_all, n_ref, n_cur)  # on every bin: pooling hides swaps
    r, c = pool_sparse(r_all, c_all, min(n_ref, n_cur))
    n_eff = n_ref * n_cur / (n_ref + n_cur)
    nc = n_eff * to_chi2(floor)

    def asymptotic_p(r: np.ndarray, c: np.ndarray, *values: float) -> list[float]:
        """p-values of ``values`` against the null law of the bins ``r``, ``c``."""
        fixed = quantiles and bool(np.all(r > 0))
        shares = r if fixed else (n_ref * r + n_cur * c) / (n_ref + n_cur)
        law = divergence_null(shares, n_ref, n_cur, quartic, reference_quantiles=fixed, terms=terms)
        return [chi2_interval_p(n_eff * to_chi2(v), law.df, nc, law.scale) for v in values]

    small = None
    if eta == 0 and terms is not None and r.size < r_all.size and n_ref + n_cur <= EXACT_MAX_TOTAL:
        small = exact_unpooled_p(r_all, c_all, n_ref, n_cur, terms, floor,
                                 lambda: asymptotic_p(r_all, c_all, value)[0])
    if small is not None:
        return judged(check, feature, value, value, small, n_cur, n_ref, p_exact=small,
                      floor=floor, alpha=alpha)
    if r.size < 2:
        return judged(check, feature, value, value, 1.0, n_cur, n_ref, floor=floor, alpha=alpha)
    pooled = divergence(r, c, n_ref, n_cur)
    if eta == 0:
        p_exact = p = asymptotic_p(r, c, pooled)[0]
    else:
        p_exact, p = asymptotic_p(r, c, pooled, divergence(r, shrink(r, c, eta), n_ref, n_cur))
    return judged(check, feature, value, value, p, n_cur, n_ref, p_exact=p_exact,
                  error_bound=eta, floor=floor, alpha=alpha)


def exact_unpooled_p(ref: np.ndarray, cur: np.ndarray, n_ref: int, n_cur: int, terms: BinTerms,
                     floor: float, interval_p: Callable[[], float]) -> float | None:
    """p-value of a binned divergence on small exact counts, every bin kept (no pooling).

    Parameters
    ----------
    ref, cur : np.ndarray
        Masses of the bins (exact counts / n), every bin non-empty on some side.
    n_ref, n_cur : int
    terms : callable
        Per-bin terms of the divergence (:func:`~detectors.drift.psi.psi_terms`, ...).
    floor : float
        The interval null's floor; > 0 adds ``interval_p``.
    interval_p : callable
        The asymptotic interval-null p-value on the same bins (called only when floor > 0).

    Returns
    -------
    float or None
        floor = 0: the exact permutation p-value of the divergence given the
        table's margins (:func:`~detectors.stats.exact.exact_conditional_p`).
        floor > 0: the larger of it and ``interval_p()`` (an intersection-union
        test: "no change" and "change within the floor" both rejected). None
        when the enumeration is too large (the caller pools and goes asymptotic).

    Notes
    -----
    Merging the sparse bins before testing (Cochran's rule of 5) can cancel
    the evidence it merges: {a: 94, b: 6} against {a: 94, c: 6} pools b and c
    into one bin with the same mass on both sides (divergence 0, p = 1) while
    the exact p is 0.00085. The permutation law needs no pooling at any
    sparsity, so small tables are tested bin by bin.

    Examples
    --------
    >>> from detectors.drift.js import js_terms
    >>> r, c = np.array([0.94, 0.06, 0.0]), np.array([0.94, 0.0, 0.06])
    >>> round(exact_unpooled_p(r, c, 100, 100, js_terms, 0.0, lambda: 1.0), 5)
    0.00085
    """
    rc, cc = np.rint(ref * n_ref).astype(np.int64), np.rint(cur * n_cur).astype(np.int64)

    def column_terms(total: int, x: np.ndarray) -> np.ndarray:
        return terms((total - x) / n_ref, x / n_cur, n_ref, n_cur)

    p = exact_conditional_p(rc, cc, column_terms, UNPOOLED_MAX_STATES)
    if p is None or floor <= 0:
        return p
    return max(p, interval_p())
