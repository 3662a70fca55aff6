"""Non-finite rate: share of NaN and +/-inf among a numeric feature's values."""

from __future__ import annotations

from detectors.quality.proportion import MIN_COUNT, rate_test
from detectors.result import TestResult
from sketches.feature import QualityCounts
from sketches.profile import FeatureProfile


def nonfinite_count(profile: FeatureProfile) -> int:
    """NaN, +inf and -inf values of a feature.

    Examples
    --------
    >>> f = FeatureProfile(); f.update([1.0, float("nan"), float("inf"), None])
    >>> nonfinite_count(f)
    2
    """
    return profile.quality_counts().nonfinite


def nonfinite_test(reference: FeatureProfile, current: FeatureProfile, feature: str = "", *,
                   floor: float = 0.0, alpha: float = 0.05, min_count: int = MIN_COUNT) -> TestResult:
    """Has the share of NaN / inf values changed?

    Parameters
    ----------
    reference, current : FeatureProfile
        NaN and +/-inf over all values (records) of each side. NaN also
        counts as missing in the null rate; this check isolates values that a
        broken computation (0/0, overflow) produced.
    feature, floor, alpha, min_count
        See :func:`~detectors.quality.proportion.rate_test`.

    Returns
    -------
    TestResult
        ``effect_size`` = current non-finite rate - baseline rate.

    Examples
    --------
    >>> ref, cur = FeatureProfile(), FeatureProfile()
    >>> ref.update([1.0] * 100); cur.update([1.0] * 80 + [float("inf")] * 20)
    >>> r = nonfinite_test(ref, cur)
    >>> r.effect_size, r.status.value
    (0.2, 'drift')
    """
    return nonfinite_of_counts(reference.quality_counts(), current.quality_counts(), feature,
                               floor=floor, alpha=alpha, min_count=min_count)


def nonfinite_of_counts(reference: QualityCounts, current: QualityCounts, feature: str = "", *,
                        floor: float = 0.0, alpha: float = 0.05, min_count: int = MIN_COUNT) -> TestResult:
    """:func:`nonfinite_test` on the counts alone (a part of an open window: the early looks
    of :mod:`detectors.quality.looks`)."""
    return rate_test("nonfinite", reference.nonfinite, reference.total, current.nonfinite,
                     current.total, feature, floor=floor, alpha=alpha, min_count=min_count)
