"""Variance shift: difference of standard deviations in units of the baseline spread."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from detectors.drift.grid import JointCdf, joint_cdf
from detectors.drift.spread import baseline_spread, pooled_moments, rounding_scale, sd
from detectors.result import TestResult, insufficient, judged
from detectors.stats.interval import normal_interval_p
from sketches.numeric import NumericSketch

MIN_COUNT = 30
LOG_SCALE_REASON = "spread of ln x (log scale: both sides positive, ln x the less heavy-tailed)"
"""Said in the result's ``reason`` when the test ran on the log scale."""


def pooled_kurtosis(grid: JointCdf, n_ref: int, n_cur: int, mean: float, var: float,
                    exact: bool) -> float:
    """kappa = m4 / m2^2 of both samples pooled, from the shared grid (>= 1).

    Exact for two exact-mode sketches (the grid holds every value, each
    carrying its CDF jump); otherwise each grid interval's mass sits at its
    midpoint. Returns 1.0 when ``var`` is 0.

    Examples
    --------
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.array([-1.0, 1.0])); b.update(np.array([-1.0, 1.0]))
    >>> pooled_kurtosis(joint_cdf(a, b), 2, 2, 0.0, 1.0, True)
    1.0
    """
    if var <= 0:
        return 1.0
    f = grid.pooled(n_ref, n_cur)
    mass = np.diff(np.concatenate(([0.0], f)))
    x = grid.x if exact else np.concatenate(([grid.x[0]], 0.5 * (grid.x[1:] + grid.x[:-1])))
    return max(float(np.sum(mass * (x - mean) ** 4)) / var**2, 1.0)


def log_spreads(grid: JointCdf, n_ref: int, n_cur: int, exact: bool) -> tuple[float, float, float] | None:
    """(sd_ref, sd_cur, pooled kurtosis) of ln x from the shared grid (None when a value
    is <= 0).

    The grid of two exact sketches holds every support point with its CDF jump on each
    side (:func:`~detectors.drift.grid.joint_cdf`), so the log moments are then exact;
    otherwise each grid interval's mass sits at its midpoint, as in
    :func:`pooled_kurtosis` (a relative error of ~1 % of the log-spread at the grid's
    resolution, a tenth of the default floor).

    Examples
    --------
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.array([1.0, np.e ** 2])); b.update(np.array([np.e, np.e ** 3]))
    >>> log_spreads(joint_cdf(a, b), 2, 2, True)
    (1.0, 1.0, 1.64)
    """
    if grid.x.size == 0 or grid.x[0] <= 0:
        return None
    x = grid.x if exact else np.concatenate(([grid.x[0]], 0.5 * (grid.x[1:] + grid.x[:-1])))
    y = np.log(x)

    def moments(cdf: np.ndarray) -> tuple[float, float]:
        mass = np.diff(np.concatenate(([0.0], cdf)))
        d = y - float(mass @ y)
        return float(mass @ d**2), float(mass @ d**4)

    (v_ref, _), (v_cur, _) = moments(grid.ref), moments(grid.cur)
    var, m4 = moments(grid.pooled(n_ref, n_cur))
    kappa = max(m4 / var**2, 1.0) if var > 0 else 1.0
    return math.sqrt(max(v_ref, 0.0)), math.sqrt(max(v_cur, 0.0)), kappa


def variance_shift_test(
    reference: NumericSketch,
    current: NumericSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
    grid: JointCdf | None = None,
) -> TestResult:
    """Has the standard deviation changed by more than ``floor`` baseline standard deviations?

    Parameters
    ----------
    reference, current : NumericSketch
    feature : str
    floor : float
        Change of the standard deviation tolerated under the null, in units
        of the baseline spread.
    alpha, min_count, grid
        As for :func:`~detectors.drift.ks.ks_test`.

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = (sd_cur - sd_ref) / s.

    Notes
    -----
    Var(s^2) ~ sigma^4 (kappa - 1) / n for any distribution with a finite
    fourth moment, so Var(s) ~ sigma^2 (kappa - 1) / (4 n) (delta method;
    Casella & Berger, "Statistical Inference", 2002, ex. 5.8). sigma^2 and
    kappa are those of both windows pooled (the common distribution under
    H0), so heavy tails widen the test instead of inflating false alarms, as
    the normal-theory F test would (Box, "Non-normality and tests on
    variances", 1953). When both sides vary, the test is on ln(s_cur / s_ref)
    with Var ~ (kappa - 1) / 4 (1/n_cur + 1/n_ref) (Bartlett & Kendall, "The
    statistical analysis of variance-heterogeneity and the logarithmic
    transformation", 1946), the floor converted at s_ref. Standard deviations
    are exact; kappa comes from the sketches' CDFs. A standard deviation
    within rounding of the values' magnitude is 0 (:mod:`detectors.drift.spread`):
    two constants have no variance shift, whatever their values.

    Positive values are tested on the log scale when ln x has the smaller
    pooled kurtosis (a heavy right tail:
    log-normal, Pareto): the test is then on ln(s_cur / s_ref) of ln x,
    ``effect_size`` = (s_cur - s_ref) / s_ref of ln x (the relative change of
    the log-spread) and the floor its half-width. The raw kurtosis of a
    log-normal with sigma 0.6-1.2 is ~10-100, so on ~100 values the raw test
    is 10-100 times weaker than on ln x (kurtosis 3): a x1.59 log-spread
    change on 100 values reads p ~ 1e-2 raw and ~ 6e-5 on the log scale
    (tests/test_detectors_drift.py). The scale is chosen from both windows
    pooled, symmetric in them, so under H0 (one distribution) the choice does
    not depend on which values are current. A change of units (x c) moves ln x
    by ln c and leaves its spread: the mean-shift and PSI tests see it.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(rng.normal(size=5000)); b.update(rng.normal(0, 1.5, size=5000))
    >>> r = variance_shift_test(a, b)
    >>> round(r.effect_size, 1), r.status.value
    (0.5, 'drift')
    """
    n_ref, n_cur = reference.count, current.count
    if n_ref < min_count or n_cur < min_count:
        return insufficient("variance_shift", feature, n_cur, n_ref,
                            f"needs >= {min_count} finite values on each side")
    mean, var = pooled_moments(reference, current)
    g = grid if grid is not None else joint_cdf(reference, current)
    exact = reference.is_exact and current.is_exact
    kappa = pooled_kurtosis(g, n_ref, n_cur, mean, var, exact)
    logs = log_spreads(g, n_ref, n_cur, exact) if reference.min > 0 and current.min > 0 else None
    if logs is not None and logs[0] > 0 and logs[1] > 0 and logs[2] < kappa:
        # a heavy right tail: ln x is closer to normal, its spread ratio is the scale change
        s_ref, s_cur, kappa = logs
        estimate = math.log(s_cur / s_ref)
        se = 0.5 * math.sqrt((kappa - 1.0) * (1 / n_cur + 1 / n_ref))
        r = judged("variance_shift", feature, estimate / se if se > 0 else 0.0,
                   (s_cur - s_ref) / s_ref, normal_interval_p(estimate, se, floor),
                   n_cur, n_ref, floor=floor, alpha=alpha)
        return replace(r, reason="; ".join(filter(None, (r.reason, LOG_SCALE_REASON))))
    noise = rounding_scale(reference, current)
    s_ref, s_cur = sd(reference, noise), sd(current, noise)
    spread = baseline_spread(reference, current)
    if s_ref > 0 and s_cur > 0:
        # log scale: ln s is closer to normal than s (Bartlett & Kendall 1946)
        estimate, scale = math.log(s_cur / s_ref), 1.0 / s_ref
        se = 0.5 * math.sqrt((kappa - 1.0) * (1 / n_cur + 1 / n_ref))
    else:
        estimate, scale = s_cur - s_ref, 1.0
        se = math.sqrt(var * (kappa - 1.0) / 4.0 * (1 / n_cur + 1 / n_ref))
    diff = s_cur - s_ref
    return judged(
        "variance_shift", feature, estimate / se if se > 0 else 0.0,
        diff / spread if spread > 0 else 0.0, normal_interval_p(estimate, se, floor * spread * scale),
        n_cur, n_ref, floor=floor, alpha=alpha,
    )
