"""Norm shift of a vector feature: the mean of the vectors' norms, in baseline standard deviations."""

from __future__ import annotations

from dataclasses import replace

from detectors.drift.embedding import too_few, with_detail
from detectors.drift.mean_shift import MIN_COUNT, mean_shift_test
from detectors.result import TestResult
from sketches.vector import VectorProfile


def norm_shift_test(
    reference: VectorProfile,
    current: VectorProfile,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the mean norm ``||x||`` moved by more than ``floor`` baseline standard deviations of the norm?

    Parameters
    ----------
    reference, current : VectorProfile
    feature : str
    floor : float
        Shift of the mean norm tolerated under the null, in baseline standard deviations.
    alpha, min_count
        Level for ``drift``; vectors needed on each side.

    Returns
    -------
    TestResult
        Check ``norm_shift``: the mean-shift test (:func:`~detectors.drift.mean_shift.mean_shift_test`)
        of the profiles' norm sketches, whose count, mean and second moment are exact.
        The reason gives the ratio of the mean norms.

    Notes
    -----
    z = (m_cur - m_ref) / sqrt(s_p² (1/n_cur + 1/n_ref)) on the norms, tested
    against the interval null ``|shift| <= floor · s``. A rescaling of the
    embeddings (an upstream normalisation dropped or added, a model swapped
    for one of another scale: ``x -> c x``) moves every norm by the factor
    ``c`` while the directions, which the centroid and projection tests read,
    stay the same. Normalised embeddings (every norm 1) give p = 1 until a
    norm other than 1 appears, which is then a certain change.
    Welch (1947) for the large-sample z-test.

    Raises
    ------
    ValueError
        If the profiles differ in dimension or projection.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> a, b = VectorProfile(16), VectorProfile(16)
    >>> a.update(rng.standard_normal((1000, 16)), [f"a{i}" for i in range(1000)])
    >>> b.update(1.2 * rng.standard_normal((1000, 16)), [f"b{i}" for i in range(1000)])
    >>> norm_shift_test(a, b).status.value
    'drift'
    """
    too_few("norm_shift", feature, reference, current, 0)  # (refuses other dimensions)
    result = mean_shift_test(reference.norms, current.norms, feature, floor=floor, alpha=alpha,
                             min_count=min_count)
    result = replace(result, check="norm_shift")
    if reference.norms.count and current.norms.count and reference.norms.mean > 0:
        result = with_detail(result, f"mean norm x{current.norms.mean / reference.norms.mean:.4g}")
    return result
