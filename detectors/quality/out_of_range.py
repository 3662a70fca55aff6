"""Out-of-range rate: current values outside the baseline's [min, max]."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from detectors.result import TestResult, insufficient, judged
from sketches.numeric import NumericSketch

MIN_COUNT = 30


def out_of_range_share(reference: NumericSketch, current: NumericSketch) -> tuple[float, float]:
    """Share of current finite values below the baseline minimum or above its maximum.

    Returns
    -------
    share, error : float
        Exactly 0 on a side where the current extreme lies inside the range;
        otherwise from the current sketch's CDF, with its bound on the CDF's error at
        that point (:meth:`NumericSketch.cdf_error <sketches.numeric.NumericSketch.cdf_error>`:
        0 while exact, and 0 in a digest while fewer than its ``TAIL_ITEMS`` most extreme
        values lie beyond it, :data:`sketches.kernels.TAIL_ITEMS`).

    Examples
    --------
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.arange(10.0)); b.update(np.arange(5.0, 15.0))
    >>> out_of_range_share(a, b)
    (0.5, 0.0)
    """
    share, error = 0.0, 0.0
    if current.min < reference.min:
        below = float(np.nextafter(reference.min, -np.inf))
        share += current.cdf(below)
        error += float(current.cdf_error(np.array([below]))[0])
    if current.max > reference.max:
        share += 1.0 - current.cdf(reference.max)
        error += float(current.cdf_error(np.array([reference.max]))[0])
    return share, error


def out_of_range_test(
    reference: NumericSketch,
    current: NumericSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Are more current values outside the baseline's range than chance explains?

    Parameters
    ----------
    reference, current : NumericSketch
    feature : str
    floor : float
        Out-of-range share tolerated above chance.
    alpha, min_count
        Level for ``drift``; finite values needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` = out-of-range count, ``effect_size`` = out-of-range share.

    Notes
    -----
    For continuous data and n baseline values, a new value falls outside
    the baseline's [min, max] with probability U ~ Beta(2, n - 1) (the
    coverage of the sample range; Wilks, "Mathematical Statistics", 1962,
    sec. 8.7), so the current count is beta-binomial(m, 2, n - 1) under H0;
    ties (discrete data) only lower that probability (conservative). The
    count less the sketch error and floor * m is tested.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(rng.normal(size=1000)); b.update(rng.normal(size=1000) * 1000)
    >>> r = out_of_range_test(a, b)
    >>> r.effect_size > 0.99, r.status.value
    (True, 'drift')
    """
    n_ref, n_cur = reference.count, current.count
    if n_ref < min_count or n_cur < min_count:
        return insufficient("out_of_range", feature, n_cur, n_ref,
                            f"needs >= {min_count} finite values on each side")
    share, error = out_of_range_share(reference, current)
    count = share * n_cur
    law = stats.betabinom(n_cur, 2, n_ref - 1)

    def p_at(excess: float) -> float:
        return 1.0 if excess <= 0 else float(law.sf(math.ceil(excess) - 1))

    return judged(
        "out_of_range", feature, count, share, p_at(count - (error + floor) * n_cur), n_cur, n_ref,
        p_exact=p_at(count - floor * n_cur), error_bound=error, floor=floor, alpha=alpha,
    )
