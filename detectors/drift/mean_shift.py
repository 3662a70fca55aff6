"""Mean shift: difference of means in units of the baseline spread, from exact moments."""

from __future__ import annotations

import math

from detectors.drift.spread import baseline_spread, mean_difference, pooled_moments
from detectors.result import TestResult, insufficient, judged
from detectors.stats.interval import normal_interval_p
from sketches.numeric import NumericSketch

MIN_COUNT = 30


def mean_shift_test(
    reference: NumericSketch,
    current: NumericSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the mean moved by more than ``floor`` baseline standard deviations?

    Parameters
    ----------
    reference, current : NumericSketch
    feature : str
    floor : float
        Shift tolerated under the null, in baseline standard deviations.
    alpha, min_count
        Level for ``drift``; finite values needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = (mean_cur - mean_ref) / s with
        ``s`` from :func:`~detectors.drift.spread.baseline_spread`,
        ``error_bound`` 0 (count, mean and M2 are exact in a profile).

    Notes
    -----
    z = (m_cur - m_ref) / sqrt(s_p^2 (1/n_cur + 1/n_ref)) with s_p^2 the
    pooled variance of both windows (the common variance under H0; it is 0
    only when every value is the same, and then p = 1). Large-sample z-test
    (Welch, "The generalization of Student's problem...", 1947, for the
    unequal-variance form; pooled here because H0 is "same distribution").
    The interval null tests |shift| <= floor * s. Means, variances and
    differences within rounding of the values' magnitude count as exact
    (:mod:`detectors.drift.spread`): the same constant on both sides is no
    change (z = 0, p = 1), a constant that moves is a certain change (p = 0)
    of 1 / sqrt(w (1 - w)) pooled standard deviations, w = n_cur / (n_cur + n_ref).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(rng.normal(size=10**6)); b.update(rng.normal(0.01, 1, size=10**6))
    >>> mean_shift_test(a, b).status.value, mean_shift_test(a, b, floor=0.1).status.value
    ('drift', 'ok')
    """
    n_ref, n_cur = reference.count, current.count
    if n_ref < min_count or n_cur < min_count:
        return insufficient("mean_shift", feature, n_cur, n_ref,
                            f"needs >= {min_count} finite values on each side")
    diff = mean_difference(reference, current)
    _mean, var = pooled_moments(reference, current)
    se = math.sqrt(max(var, 0.0) * (1 / n_cur + 1 / n_ref))
    spread = baseline_spread(reference, current)
    effect = diff / spread if spread > 0 else 0.0
    z = diff / se if se > 0 else 0.0
    return judged("mean_shift", feature, z, effect, normal_interval_p(diff, se, floor * spread),
                  n_cur, n_ref, floor=floor, alpha=alpha)
