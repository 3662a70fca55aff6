"""Null-rate change of a vector feature: the share of records without a (valid) vector."""

from __future__ import annotations

from detectors.drift.embedding import too_few
from detectors.quality.proportion import MIN_COUNT, rate_test
from detectors.result import TestResult
from sketches.vector import VectorProfile


def vector_null_rate_test(reference: VectorProfile, current: VectorProfile, feature: str = "", *,
                          floor: float = 0.0, alpha: float = 0.05, min_count: int = MIN_COUNT) -> TestResult:
    """Has the share of records without a vector risen by more than ``floor``?

    A record counts as without a vector when it lacks the feature or its
    vector was dropped (wrong dimension, not finite: :mod:`sdk.vectors`), so a
    feed that starts sending broken or no embeddings is found here while the
    distribution checks see only the vectors that remain. One-sided, as
    :func:`~detectors.quality.null_rate.null_rate_test` (check ``null_rate``).

    Parameters
    ----------
    reference, current : VectorProfile
        ``nulls`` over ``count + nulls`` records of each side.
    feature, floor, alpha, min_count
        See :func:`~detectors.quality.proportion.rate_test`.

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = current null rate - baseline null rate.

    Notes
    -----
    z = (p1 - p0) / sqrt(p (1 - p) (1/n1 + 1/n0)) with the pooled rate p, the
    upper tail (Agresti, "Categorical Data Analysis", 2013, sec. 3.1).

    Raises
    ------
    ValueError
        If the profiles differ in dimension or projection.

    Examples
    --------
    >>> import numpy as np
    >>> ref, cur = VectorProfile(4), VectorProfile(4)
    >>> ref.update(np.ones((1000, 4)), [str(i) for i in range(1000)])
    >>> cur.update(np.ones((600, 4)), [str(i) for i in range(600)]); cur.add_nulls(400)
    >>> r = vector_null_rate_test(ref, cur)
    >>> round(r.effect_size, 3), r.status.value
    (0.4, 'drift')
    """
    too_few("null_rate", feature, reference, current, 0)  # (refuses other dimensions)
    return rate_test("null_rate", reference.nulls, reference.count + reference.nulls, current.nulls,
                     current.count + current.nulls, feature, floor=floor, alpha=alpha,
                     min_count=min_count, rise_only=True)
