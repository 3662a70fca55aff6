"""Null-rate change: two-proportion z-test."""

from __future__ import annotations

import math

from scipy import stats

from detectors.result import TestResult, insufficient

MIN_COUNT = 30


def null_rate_test(
    ref_nulls: int, ref_total: int, cur_nulls: int, cur_total: int, feature: str = "",
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the share of missing values changed?

    Parameters
    ----------
    ref_nulls, ref_total : int
        Missing values and all values (records) in the baseline.
    cur_nulls, cur_total : int
        The same in the current window.

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = current null rate - baseline null
        rate (in [-1, 1]), two-sided ``p_value``.

    Notes
    -----
    z = (p1 - p0) / sqrt(p (1 - p) (1/n1 + 1/n0)) with the pooled rate p
    (Agresti, "Categorical Data Analysis", 2013, sec. 3.1). When p is 0 or 1
    both rates are equal: z = 0, p-value 1.

    Examples
    --------
    >>> r = null_rate_test(5, 1000, 400, 1000)
    >>> round(r.effect_size, 3), r.p_value < 1e-10
    (0.395, True)
    """
    if ref_total < min_count or cur_total < min_count:
        return insufficient(
            "null_rate", feature, cur_total, ref_total, f"needs >= {min_count} records each side"
        )
    p0, p1 = ref_nulls / ref_total, cur_nulls / cur_total
    pooled = (ref_nulls + cur_nulls) / (ref_total + cur_total)
    var = pooled * (1 - pooled) * (1 / ref_total + 1 / cur_total)
    if var <= 0:
        return TestResult("null_rate", feature, 0.0, p1 - p0, 1.0, cur_total, ref_total)
    z = (p1 - p0) / math.sqrt(var)
    p = float(2 * stats.norm.sf(abs(z)))
    return TestResult("null_rate", feature, z, p1 - p0, p, cur_total, ref_total)
