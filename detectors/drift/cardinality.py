"""Cardinality: distinct categories in the current window against the baseline's expectation."""

from __future__ import annotations

import math

import numpy as np

from detectors.drift.unseen import unseen_mass
from detectors.result import TestResult, insufficient, judged
from detectors.stats.interval import normal_interval_p
from sketches.categorical import CategoricalSketch

MIN_COUNT = 30


def expected_distinct(reference: CategoricalSketch, n: int) -> tuple[float, float, float]:
    """Distinct categories expected in ``n`` draws from the baseline's distribution.

    Returns
    -------
    expected, variance, singleton_part : float
        E[D_n] = sum_c 1 - (1 - p_c)^n with p_c the baseline shares
        (rarefaction: Hurlbert, "The nonconcept of species diversity", 1971),
        Var = sum_c pi_c (1 - pi_c) with pi_c = 1 - (1 - p_c)^n (categories
        taken as independent), and the part of E contributed by categories
        seen once in the baseline (their true share is uncertain). The
        baseline must be exact (``reference.is_exact``).

    Examples
    --------
    >>> s = CategoricalSketch(); s.update(["a", "b"] * 50)
    >>> e, v, single = expected_distinct(s, 10)
    >>> round(e, 4), single
    (1.998, 0.0)
    """
    k = np.array(list(reference.exact.values()), dtype=np.float64)
    p = k / reference.count
    pi = -np.expm1(n * np.log1p(-np.minimum(p, 1.0 - 1e-16)))
    pi[p >= 1.0] = 1.0
    return float(pi.sum()), float(np.sum(pi * (1 - pi))), float(pi[k == 1].sum())


def cardinality_test(
    reference: CategoricalSketch,
    current: CategoricalSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the number of distinct categories changed beyond what the window size explains?

    Parameters
    ----------
    reference, current : CategoricalSketch
    feature : str
    floor : float
        Relative change of the distinct count tolerated under the null.
    alpha, min_count
        Level for ``drift``; non-missing values needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` = D_cur / D_ref (the cardinality ratio, the CPC estimate
        in sketch mode), ``effect_size`` = D_cur / E[D_cur] - 1 with E[D_cur]
        the distinct count expected in n_cur draws from the baseline,
        ``error_bound`` = the current CPC sketch's 3-sigma error relative to E
        (0 while exact). A baseline in sketch mode (more categories than exact
        counts keep) gives ``insufficient_data``: its rarefied expectation is
        not identifiable from heavy hitters.

    Notes
    -----
    The distinct count grows with the sample size, so the raw ratio
    D_cur / D_ref is not compared with 1: D_cur is compared with its
    rarefied expectation (:func:`expected_distinct`). Baseline singletons may
    have far smaller true shares than 1 / n_ref, so the null interval is
    [E - singleton part, E + M0 n_cur], M0 the Good-Turing unseen mass (in
    sketch mode the mass outside the heavy hitters, so an increase must be
    large to show: the test is conservative there); the
    distance outside it, less the CPC sketch's 3-sigma error (its own bounds,
    Lang 2017), is z-tested against the floor.

    Examples
    --------
    >>> ref, cur = CategoricalSketch(), CategoricalSketch()
    >>> ref.update([str(i % 5) for i in range(500)]); cur.update([str(i % 40) for i in range(500)])
    >>> r = cardinality_test(ref, cur)
    >>> r.statistic, r.status.value
    (8.0, 'drift')
    """
    n_ref, n_cur = int(reference.count), int(current.count)
    if n_ref < min_count or n_cur < min_count:
        return insufficient("cardinality", feature, n_cur, n_ref,
                            f"needs >= {min_count} non-missing values on each side")
    if not reference.is_exact:
        return insufficient("cardinality", feature, n_cur, n_ref,
                            "baseline has too many categories for a rarefied expectation")
    d_ref, d_cur = reference.distinct, current.distinct
    expected, var, singletons = expected_distinct(reference, n_cur)
    lo, hi = expected - singletons, expected + unseen_mass(reference)[0] * n_cur
    err = current.distinct_error(3)
    gap = d_cur - hi if d_cur > hi else (d_cur - lo if d_cur < lo else 0.0)
    sd = math.sqrt(var + 1.0)
    shrunk = math.copysign(max(abs(gap) - err, 0.0), gap)
    return judged(
        "cardinality", feature, d_cur / d_ref, d_cur / expected - 1,
        normal_interval_p(shrunk, sd, floor * expected), n_cur, n_ref,
        p_exact=normal_interval_p(gap, sd, floor * expected),
        error_bound=err / expected, floor=floor, alpha=alpha,
    )
