"""Has a matured cohort performed worse than its baseline cohort? One-sided tests with an effect floor.

Each test compares a current cohort, once mature
(:mod:`detectors.performance.maturity`), with a baseline cohort (the
reference period, or the same hour of last week) and returns a
:class:`~detectors.result.TestResult` whose ``effect_size`` is the
*degradation*, positive when the current cohort is worse:

=====================  =====================================  ==============
check                  effect_size                            unit
=====================  =====================================  ==============
``auc_drop``           AUC_baseline - AUC_current             AUC points
``log_loss_increase``  LL_current - LL_baseline               nats
``accuracy_drop``      acc_baseline - acc_current             fraction
``mae_increase``       MAE_current - MAE_baseline             target unit
``rmse_increase``      RMSE_current - RMSE_baseline           target unit
=====================  =====================================  ==============

Only degradation pages: the p-value is one-sided and tests the interval
null "effect <= floor" (Hodges & Lehmann 1954; Wellek 2010, ch. 11, the
one-sided counterpart of :func:`detectors.stats.interval.normal_interval_p`):
p = Phi((floor - effect) / se), so with a large cohort a degradation smaller
than the floor never becomes significant, and an improvement never does.
Both cohorts are independent samples, so se^2 = se_baseline^2 + se_current^2.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from scipy import special

from detectors.performance.binary import BinaryCohort
from detectors.performance.multiclass import MulticlassCohort
from detectors.performance.regression import RegressionCohort
from detectors.result import TestResult, insufficient, judged

MIN_PER_CLASS = 30
"""Labeled positives and negatives each cohort needs for the AUC test."""
MIN_COUNT = 30
"""Labeled examples each cohort needs for the other tests."""


def one_sided_p(effect: float, se: float, floor: float = 0.0) -> float:
    """p-value of an asymptotically normal estimate against the null "effect <= floor".

    Parameters
    ----------
    effect : float
        The estimated degradation.
    se : float
        Its standard error, >= 0.
    floor : float
        Largest degradation tolerated under the null, >= 0.

    Returns
    -------
    float
        p = Phi((floor - effect) / se), the probability of an estimate at
        least this large when the true effect sits on the boundary
        effect = floor. With se = 0: 1.0 if effect <= floor, else 0.0; with
        a non-finite se (an overflowed sum): 1.0.

    Notes
    -----
    Wellek, "Testing Statistical Hypotheses of Equivalence and
    Noninferiority", 2010, sec. 2.2 (non-inferiority form).

    Examples
    --------
    >>> round(one_sided_p(1.645, 1.0), 3)
    0.05
    >>> one_sided_p(0.01, 0.001, floor=0.02) > 0.99
    True
    """
    if not math.isfinite(se) or not math.isfinite(effect):
        return 1.0
    if se <= 0.0:
        return 1.0 if effect <= floor else 0.0
    return float(special.ndtr((floor - effect) / se))


def hanley_mcneil_se(auc: float, n_pos: int, n_neg: int) -> float:
    """Standard error of an AUC estimate (Hanley & McNeil 1982, eq. 2).

    Parameters
    ----------
    auc : float
        The AUC estimate A in [0, 1].
    n_pos, n_neg : int
        Positives and negatives it was computed on, each >= 1.

    Returns
    -------
    float
        sqrt([A(1 - A) + (n_pos - 1)(Q1 - A^2) + (n_neg - 1)(Q2 - A^2)] / (n_pos n_neg))
        with Q1 = A / (2 - A), Q2 = 2 A^2 / (1 + A).

    Notes
    -----
    Q1 and Q2 are the probabilities that two random positives both outrank
    a random negative, and that a random positive outranks two random
    negatives, under exponential score distributions; Hanley & McNeil show
    the approximation holds closely for binormal scores too.

    References
    ----------
    Hanley, J. A. & McNeil, B. J. (1982). The meaning and use of the area
    under a receiver operating characteristic (ROC) curve. Radiology 143(1), 29-36.

    Examples
    --------
    >>> round(hanley_mcneil_se(0.8, 100, 100), 4)
    0.0314
    """
    a = auc
    q1, q2 = a / (2.0 - a), 2.0 * a * a / (1.0 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def delong_se(cohort: BinaryCohort) -> float:
    """Standard error of the cohort's AUC from its structural components (DeLong et al. 1988).

    Returns
    -------
    float
        sqrt(S10 / P + S01 / N), S10 the variance over positives of
        V10 = (negatives below + half the negatives in the same bin) / N and
        S01 the variance over negatives of V01 = (positives above + half
        those in the same bin) / P, both with denominators P - 1 and N - 1.
        Assumption-free, unlike :func:`hanley_mcneil_se`; pairs within one
        grid bin count as ties.

    Raises
    ------
    ValueError
        If the cohort has fewer than 2 positives or 2 negatives.

    References
    ----------
    DeLong, E. R., DeLong, D. M. & Clarke-Pearson, D. L. (1988). Comparing
    the areas under two or more correlated receiver operating characteristic
    curves: a nonparametric approach. Biometrics 44(3), 837-845.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> c = BinaryCohort(); y = rng.random(200) < 0.5
    >>> c.add(1 / (1 + np.exp(-rng.normal(1.2 * y, 1.0))), y)
    >>> round(delong_se(c), 3), round(hanley_mcneil_se(c.roc_auc().value, c.n_pos, c.n_neg), 3)
    (0.03, 0.031)
    """
    p, q = cohort.n_pos, cohort.n_neg
    if p < 2 or q < 2:
        raise ValueError("DeLong's variance needs >= 2 positives and >= 2 negatives")
    pos = cohort.pos.astype(np.float64)
    neg = cohort.neg.astype(np.float64)
    auc = float(pos @ ((np.cumsum(neg) - neg) + 0.5 * neg)) / (p * q)
    v10 = ((np.cumsum(neg) - neg) + 0.5 * neg) / q
    above_pos = pos[::-1].cumsum()[::-1] - pos
    v01 = (above_pos + 0.5 * pos) / p
    s10 = float(pos @ (v10 - auc) ** 2) / (p - 1)
    s01 = float(neg @ (v01 - auc) ** 2) / (q - 1)
    return math.sqrt(max(s10 / p + s01 / q, 0.0))


def auc_drop_test(
    baseline: BinaryCohort,
    current: BinaryCohort,
    feature: str = "__score__",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_per_class: int = MIN_PER_CLASS,
    se_method: Literal["hanley_mcneil", "delong"] = "hanley_mcneil",
) -> TestResult:
    """Has ROC AUC dropped by more than ``floor``?

    Parameters
    ----------
    baseline, current : BinaryCohort
        Independent cohorts (disjoint examples).
    feature : str
        Carried into the result (default ``"__score__"``).
    floor : float
        AUC drop tolerated under the null, >= 0 (e.g. 0.01).
    alpha : float
        Level for ``drift``.
    min_per_class : int
        Labeled positives and negatives each cohort needs; below it
        ``insufficient_data``.
    se_method : {"hanley_mcneil", "delong"}
        Each cohort's standard error: Hanley & McNeil (1982) from the AUC
        and class counts, or DeLong et al. (1988) from the histograms.

    Returns
    -------
    TestResult
        ``check="auc_drop"``, ``statistic`` = z = effect / se,
        ``effect_size`` = AUC_baseline - AUC_current, ``error_bound`` = the
        sum of both AUCs' binning bounds; ``p_value`` is computed on the
        effect shrunk by that bound (binning never creates an alarm),
        the unshrunk p-value decides ``inconclusive``.

    Raises
    ------
    ValueError
        If ``se_method`` is not one of the two names.

    Notes
    -----
    z = (A_b - A_c) / sqrt(SE_b^2 + SE_c^2) for two independent samples
    (Hanley & McNeil, "A method of comparing the areas under receiver
    operating characteristic curves derived from the same cases", Radiology
    148, 1983, eq. 1 with r = 0); p = Phi((floor - (A_b - A_c)) / se).
    Measured size at alpha = 0.05 on equal binormal cohorts: see
    tests/test_detectors_performance.py.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> def cohort(shift):
    ...     c, y = BinaryCohort(), rng.random(5000) < 0.3
    ...     c.add(1 / (1 + np.exp(-rng.normal(shift * y, 1.0))), y)
    ...     return c
    >>> r = auc_drop_test(cohort(1.5), cohort(0.8), floor=0.02)
    >>> round(r.effect_size, 2), r.status.value, r.p_value < 1e-6
    (0.16, 'drift', True)
    """
    if se_method not in ("hanley_mcneil", "delong"):
        raise ValueError(f"unknown se_method {se_method!r}")
    for side, c in (("baseline", baseline), ("current", current)):
        if c.n_pos < min_per_class or c.n_neg < min_per_class:
            return insufficient("auc_drop", feature, current.n, baseline.n,
                                f"needs >= {min_per_class} labeled positives and negatives per cohort; "
                                f"{side} has {c.n_pos} and {c.n_neg}")
    a_b, a_c = baseline.roc_auc(), current.roc_auc()
    if se_method == "delong":
        se_b, se_c = delong_se(baseline), delong_se(current)
    else:
        se_b = hanley_mcneil_se(a_b.value, baseline.n_pos, baseline.n_neg)
        se_c = hanley_mcneil_se(a_c.value, current.n_pos, current.n_neg)
    se = math.hypot(se_b, se_c)
    effect = a_b.value - a_c.value
    bound = a_b.error_bound + a_c.error_bound
    z = effect / se if se > 0 else 0.0
    return judged("auc_drop", feature, z, effect, one_sided_p(effect - bound, se, floor),
                  current.n, baseline.n, p_exact=one_sided_p(effect, se, floor),
                  error_bound=bound, floor=floor, alpha=alpha)


def _mean_se(total: float, total_sq: float, n: int) -> tuple[float, float]:
    """Mean and its standard error from a sum and a sum of squares (sample variance, n - 1)."""
    mean = total / n
    var = max(total_sq - n * mean * mean, 0.0) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n)


def _clt_result(check: str, feature: str, effect: float, se: float, n_cur: int, n_base: int,
                floor: float, alpha: float) -> TestResult:
    if not (math.isfinite(effect) and math.isfinite(se)):
        return insufficient(check, feature, n_cur, n_base, "a sum overflowed float64")
    z = effect / se if se > 0 else 0.0
    return judged(check, feature, z, effect, one_sided_p(effect, se, floor), n_cur, n_base,
                  floor=floor, alpha=alpha)


def log_loss_increase_test(
    baseline: BinaryCohort,
    current: BinaryCohort,
    feature: str = "__score__",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the mean log loss risen by more than ``floor`` nats?

    Returns
    -------
    TestResult
        ``check="log_loss_increase"``, ``effect_size`` = LL_current -
        LL_baseline (exact sums, ``error_bound`` 0).

    Notes
    -----
    Central limit theorem on the per-example losses l_i:
    se^2 = s_b^2 / n_b + s_c^2 / n_c with s^2 = (sum l_i^2 - n mean^2) / (n - 1)
    from the cohort's exact sums. Log loss is heavy-tailed when confident
    predictions are wrong (a loss up to 36 nats), so the normal approximation
    needs the ``min_count`` guard and is conservative rather than exact for
    small cohorts.

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> def cohort(noise):
    ...     c, s = BinaryCohort(), rng.uniform(0.05, 0.95, 5000)
    ...     c.add(s, rng.random(5000) < np.clip(s + noise * rng.normal(size=5000), 0, 1))
    ...     return c
    >>> r = log_loss_increase_test(cohort(0.0), cohort(0.4))
    >>> r.effect_size > 0.05, r.status.value
    (True, 'drift')
    """
    if baseline.n < min_count or current.n < min_count:
        return insufficient("log_loss_increase", feature, current.n, baseline.n,
                            f"needs >= {min_count} labeled examples per cohort")
    m_b, se_b = _mean_se(float(baseline.log_loss_sum.sum()), float(baseline.log_loss_sq.sum()), baseline.n)
    m_c, se_c = _mean_se(float(current.log_loss_sum.sum()), float(current.log_loss_sq.sum()), current.n)
    return _clt_result("log_loss_increase", feature, m_c - m_b, math.hypot(se_b, se_c),
                       current.n, baseline.n, floor, alpha)


def accuracy_drop_test(
    baseline: BinaryCohort | MulticlassCohort,
    current: BinaryCohort | MulticlassCohort,
    feature: str = "__prediction__",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has accuracy dropped by more than ``floor``?

    Parameters
    ----------
    baseline, current : BinaryCohort or MulticlassCohort
        Anything with ``n_correct`` and ``n`` (binary cohorts: accuracy at
        their threshold).
    floor : float
        Accuracy drop tolerated under the null, in [0, 1].

    Returns
    -------
    TestResult
        ``check="accuracy_drop"``, ``statistic`` = z, ``effect_size`` =
        acc_baseline - acc_current.

    Notes
    -----
    Two-proportion z-test (Agresti, "Categorical Data Analysis", 2013,
    sec. 3.1), one-sided. For ``floor = 0`` the pooled standard error
    sqrt(p (1 - p) (1/n_b + 1/n_c)) (the score test); otherwise the
    unpooled one, each rate kept half a count away from 0 and 1, as
    :func:`detectors.quality.proportion.rate_change`. A pooled rate of 0 or
    1 means both accuracies are equal: z = 0, p = 1.

    Examples
    --------
    >>> a, b = MulticlassCohort(), MulticlassCohort()
    >>> a.add(["x"] * 1000, ["x"] * 900 + ["y"] * 100)
    >>> b.add(["x"] * 1000, ["x"] * 800 + ["y"] * 200)
    >>> r = accuracy_drop_test(a, b, floor=0.02)
    >>> round(r.effect_size, 3), r.status.value
    (0.1, 'drift')
    """
    n_b, n_c = baseline.n, current.n
    if n_b < min_count or n_c < min_count:
        return insufficient("accuracy_drop", feature, n_c, n_b,
                            f"needs >= {min_count} labeled examples per cohort")
    x_b, x_c = baseline.n_correct, current.n_correct
    p_b, p_c = x_b / n_b, x_c / n_c
    effect = p_b - p_c
    pooled = (x_b + x_c) / (n_b + n_c)
    var = pooled * (1 - pooled) * (1 / n_b + 1 / n_c)
    if var <= 0:
        return judged("accuracy_drop", feature, 0.0, effect, 1.0, n_c, n_b, floor=floor, alpha=alpha)
    z = effect / math.sqrt(var)
    if floor <= 0:
        se = math.sqrt(var)
    else:
        q_b = min(max(p_b, 0.5 / n_b), 1 - 0.5 / n_b)
        q_c = min(max(p_c, 0.5 / n_c), 1 - 0.5 / n_c)
        se = math.sqrt(q_b * (1 - q_b) / n_b + q_c * (1 - q_c) / n_c)
    return judged("accuracy_drop", feature, z, effect, one_sided_p(effect, se, floor), n_c, n_b,
                  floor=floor, alpha=alpha)


def mae_increase_test(
    baseline: RegressionCohort,
    current: RegressionCohort,
    feature: str = "__prediction__",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the mean absolute error risen by more than ``floor`` (target units)?

    Returns
    -------
    TestResult
        ``check="mae_increase"``, ``effect_size`` = MAE_current - MAE_baseline.

    Notes
    -----
    CLT on |e_i|: se^2 = s_b^2 / n_b + s_c^2 / n_c with
    s^2 = (sum e_i^2 - n MAE^2) / (n - 1) (since |e|^2 = e^2, from the exact sums).

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> a, b = RegressionCohort(), RegressionCohort()
    >>> y = rng.normal(size=4000)
    >>> a.add(y, y + rng.normal(0, 1.0, 4000)); b.add(y, y + rng.normal(0, 1.3, 4000))
    >>> r = mae_increase_test(a, b, floor=0.1)
    >>> round(r.effect_size, 1), r.status.value
    (0.2, 'drift')
    """
    if baseline.n < min_count or current.n < min_count:
        return insufficient("mae_increase", feature, current.n, baseline.n,
                            f"needs >= {min_count} labeled examples per cohort")
    m_b, se_b = _mean_se(baseline.sum_abs, baseline.sum_sq, baseline.n)
    m_c, se_c = _mean_se(current.sum_abs, current.sum_sq, current.n)
    return _clt_result("mae_increase", feature, m_c - m_b, math.hypot(se_b, se_c),
                       current.n, baseline.n, floor, alpha)


def rmse_increase_test(
    baseline: RegressionCohort,
    current: RegressionCohort,
    feature: str = "__prediction__",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the root mean squared error risen by more than ``floor`` (target units)?

    Returns
    -------
    TestResult
        ``check="rmse_increase"``, ``effect_size`` = RMSE_current - RMSE_baseline.

    Notes
    -----
    CLT on e_i^2 gives se(MSE) = s / sqrt(n), s^2 = (sum e_i^4 - n MSE^2) / (n - 1);
    the delta method gives se(RMSE) = se(MSE) / (2 RMSE) (0 when RMSE = 0).
    The fourth moment makes this sensitive to heavy-tailed errors: prefer
    :func:`mae_increase_test` to page on.

    Examples
    --------
    >>> rng = np.random.default_rng(4)
    >>> a, b = RegressionCohort(), RegressionCohort()
    >>> y = rng.normal(size=4000)
    >>> a.add(y, y + rng.normal(0, 1.0, 4000)); b.add(y, y + rng.normal(0, 1.0, 4000))
    >>> rmse_increase_test(a, b).p_value > 0.05
    True
    """
    if baseline.n < min_count or current.n < min_count:
        return insufficient("rmse_increase", feature, current.n, baseline.n,
                            f"needs >= {min_count} labeled examples per cohort")

    def rmse_se(c: RegressionCohort) -> tuple[float, float]:
        mse, se_mse = _mean_se(c.sum_sq, c.sum_fourth, c.n)
        rmse = math.sqrt(mse)
        return rmse, (se_mse / (2 * rmse) if rmse > 0 else 0.0)

    r_b, se_b = rmse_se(baseline)
    r_c, se_c = rmse_se(current)
    return _clt_result("rmse_increase", feature, r_c - r_b, math.hypot(se_b, se_c),
                       current.n, baseline.n, floor, alpha)
