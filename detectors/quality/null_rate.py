"""Null-rate change: share of missing values (None, absent key, NaN)."""

from __future__ import annotations

from detectors.quality.proportion import MIN_COUNT, rate_test
from detectors.result import TestResult
from sketches.feature import QualityCounts
from sketches.profile import FeatureProfile


def null_rate_test(reference: FeatureProfile, current: FeatureProfile, feature: str = "", *,
                   floor: float = 0.0, alpha: float = 0.05, min_count: int = MIN_COUNT) -> TestResult:
    """Has the share of missing values risen by more than ``floor``?

    One-sided: fewer missing values than the baseline is not a data-quality
    break (a field reported only on some days, e.g. a wind gust on windy
    ones, or the normal days after an outage in a seasonal baseline); what
    the newly present values look like is the distribution checks' question.

    Parameters
    ----------
    reference, current : FeatureProfile
        Missing values over all values (records) of each side.
    feature, floor, alpha, min_count
        See :func:`~detectors.quality.proportion.rate_test`.

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = current null rate - baseline
        null rate (in [-1, 1]).

    Notes
    -----
    z = (p1 - p0) / sqrt(p (1 - p) (1/n1 + 1/n0)) with the pooled rate p,
    p-value from the upper tail (Agresti, "Categorical Data Analysis", 2013,
    sec. 3.1).

    Examples
    --------
    >>> ref, cur = FeatureProfile(), FeatureProfile()
    >>> ref.update([1.0] * 995 + [None] * 5); cur.update([1.0] * 600 + [None] * 400)
    >>> r = null_rate_test(ref, cur)
    >>> round(r.effect_size, 3), r.p_value < 1e-10
    (0.395, True)
    >>> null_rate_test(cur, ref).status.value
    'ok'
    """
    return null_rate_of_counts(reference.quality_counts(), current.quality_counts(), feature,
                               floor=floor, alpha=alpha, min_count=min_count)


def null_rate_of_counts(reference: QualityCounts, current: QualityCounts, feature: str = "", *,
                        floor: float = 0.0, alpha: float = 0.05, min_count: int = MIN_COUNT) -> TestResult:
    """:func:`null_rate_test` on the counts alone (a part of an open window: the early looks
    of :mod:`detectors.quality.looks`)."""
    return rate_test("null_rate", reference.nulls, reference.total, current.nulls, current.total,
                     feature, floor=floor, alpha=alpha, min_count=min_count, rise_only=True)
