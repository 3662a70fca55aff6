"""Change of a rate between baseline and current: two-proportion z-test with an effect floor."""

from __future__ import annotations

import math

from scipy import special

from detectors.result import TestResult, insufficient, judged
from detectors.stats.interval import normal_interval_p

MIN_COUNT = 30


def rate_change(x_ref: int, n_ref: int, x_cur: int, n_cur: int,
                floor: float = 0.0, rise_only: bool = False) -> tuple[float, float, float]:
    """z, rate difference and p-value of a change in a rate (both n > 0).

    Parameters
    ----------
    rise_only : bool
        Test the one-sided null ``diff <= floor`` (only a rise of the rate is a
        change), p = Phi((floor - diff) / se), instead of ``|diff| <= floor``.

    Returns
    -------
    z, diff, p : float
        diff = x_cur / n_cur - x_ref / n_ref; z with the pooled rate;
        p against |diff| <= floor (or diff <= floor): the pooled standard
        error for floor = 0 (the score test), else the unpooled one with each
        rate kept half a count away from 0 and 1. When the pooled rate is 0
        or 1 both rates are equal: z = 0, p = 1.

    Notes
    -----
    Agresti, "Categorical Data Analysis", 2013, sec. 3.1 (two-proportion
    z-test); interval null as in :mod:`detectors.stats.interval`.

    Examples
    --------
    >>> z, d, p = rate_change(50, 1000, 90, 1000)
    >>> round(z, 2), round(d, 2), round(p, 5)
    (3.51, 0.04, 0.00046)
    >>> round(rate_change(50, 1000, 90, 1000, rise_only=True)[2], 5)
    0.00023
    >>> rate_change(90, 1000, 50, 1000, rise_only=True)[2] > 0.99
    True
    """
    p0, p1 = x_ref / n_ref, x_cur / n_cur
    diff = p1 - p0
    pooled = (x_ref + x_cur) / (n_ref + n_cur)
    var = pooled * (1 - pooled) * (1 / n_ref + 1 / n_cur)
    if var <= 0:
        return 0.0, diff, 1.0
    z = diff / math.sqrt(var)
    if floor <= 0:
        se = math.sqrt(var)
    else:
        q0 = min(max(p0, 0.5 / n_ref), 1 - 0.5 / n_ref)
        q1 = min(max(p1, 0.5 / n_cur), 1 - 0.5 / n_cur)
        se = math.sqrt(q0 * (1 - q0) / n_ref + q1 * (1 - q1) / n_cur)
    if rise_only:
        return z, diff, float(special.ndtr((floor - diff) / se))
    return z, diff, normal_interval_p(diff, se, floor)


def rate_test(
    check: str,
    x_ref: int,
    n_ref: int,
    x_cur: int,
    n_cur: int,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
    rise_only: bool = False,
) -> TestResult:
    """A rate-change test as a :class:`~detectors.result.TestResult`.

    Parameters
    ----------
    check : str
        Result name (``"null_rate"``, ``"type_mismatch"``, ``"nonfinite"``).
    x_ref, n_ref, x_cur, n_cur : int
        Events and trials on each side.
    feature : str
    floor : float
        Rate difference tolerated under the null, in [0, 1].
    alpha, min_count
        Level for ``drift``; trials needed on each side.
    rise_only : bool
        Only a rise of the rate is a change (:func:`rate_change`).

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = current rate - baseline rate.

    Examples
    --------
    >>> rate_test("null_rate", 5, 1000, 400, 1000, floor=0.1).status.value
    'drift'
    """
    if n_ref < min_count or n_cur < min_count:
        return insufficient(check, feature, n_cur, n_ref, f"needs >= {min_count} values each side")
    z, diff, p = rate_change(x_ref, n_ref, x_cur, n_cur, floor, rise_only)
    return judged(check, feature, z, diff, p, n_cur, n_ref, floor=floor, alpha=alpha)
