"""Type-mismatch rate: values whose type differs from the baseline's kind."""

from __future__ import annotations

from detectors.quality.proportion import MIN_COUNT, rate_test
from detectors.result import TestResult, insufficient
from sketches.profile import FeatureProfile


def mismatches(profile: FeatureProfile, kind: str) -> tuple[int, int]:
    """(values not of ``kind``, non-missing values) of one profile.

    Examples
    --------
    >>> f = FeatureProfile(); f.update([1.0, "a", None, 2])
    >>> mismatches(f, "numeric")
    (1, 3)
    """
    present = profile.numeric_total + profile.categorical.count
    wrong = profile.categorical.count if kind == "numeric" else profile.numeric_total
    return wrong, present


def type_mismatch_test(reference: FeatureProfile, current: FeatureProfile, feature: str = "", *,
                       floor: float = 0.0, alpha: float = 0.05,
                       min_count: int = MIN_COUNT) -> TestResult:
    """Has the share of values of the wrong type (against the baseline's kind) changed?

    Parameters
    ----------
    reference, current : FeatureProfile
        The baseline's majority kind (numeric or categorical) defines the type.
    feature, floor, alpha, min_count
        See :func:`~detectors.quality.proportion.rate_test`.

    Returns
    -------
    TestResult
        ``effect_size`` = current mismatch rate - baseline mismatch rate over
        non-missing values. A mixed string/number feature is a finding, never
        a crash.

    Examples
    --------
    >>> ref, cur = FeatureProfile(), FeatureProfile()
    >>> ref.update([float(i) for i in range(100)]); cur.update(["n/a", 1.0] * 50)
    >>> r = type_mismatch_test(ref, cur)
    >>> r.effect_size, r.status.value
    (0.5, 'drift')
    """
    kind = reference.kind
    if kind == "empty":
        return insufficient("type_mismatch", feature, current.total, reference.total,
                            "baseline has no values")
    x0, n0 = mismatches(reference, kind)
    x1, n1 = mismatches(current, kind)
    return rate_test("type_mismatch", x0, n0, x1, n1, feature, floor=floor, alpha=alpha,
                     min_count=min_count)
