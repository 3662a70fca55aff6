"""Categorical drift: chi-square test of homogeneity and Jensen-Shannon distance."""

from __future__ import annotations

import numpy as np
from scipy import stats

from detectors.result import Status, TestResult, insufficient
from sketches.categorical import CategoricalSketch

MIN_COUNT = 30
TOP_K = 50
OTHER = "__other__"


def aligned_counts(
    reference: CategoricalSketch, current: CategoricalSketch, top: int = TOP_K
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Counts of both sides over the union of each side's top categories, plus an
    OTHER bucket holding the rest, so new and vanished categories are treated
    symmetrically.

    Returns
    -------
    categories : list[str]
    ref, cur : np.ndarray of float64, shape (len(categories),)
    """
    cats = sorted(set(reference.frequencies(top)) | set(current.frequencies(top)))
    ref = np.array([reference.estimate(c) for c in cats], dtype=np.float64)
    cur = np.array([current.estimate(c) for c in cats], dtype=np.float64)
    ref_other = max(reference.count - ref.sum(), 0.0)
    cur_other = max(current.count - cur.sum(), 0.0)
    if ref_other or cur_other:
        cats.append(OTHER)
        ref = np.append(ref, ref_other)
        cur = np.append(cur, cur_other)
    return cats, ref, cur


def js_distance(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon distance (base 2, in [0, 1]) between two count vectors.

    JSD(P, Q) = sqrt(0.5 KL(P || M) + 0.5 KL(Q || M)), M = (P + Q) / 2
    (Lin, "Divergence measures based on the Shannon entropy", 1991; Endres &
    Schindelin 2003 for the metric). Computed in float64 and clamped to [0, 1],
    so near-identical inputs give 0.0, never NaN.

    Examples
    --------
    >>> js_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    1.0
    >>> js_distance(np.array([3.0, 1.0]), np.array([3.0, 1.0]))
    0.0
    """
    p = p / p.sum()
    q = q / q.sum()
    m = 0.5 * (p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log2(p / m), 0.0).sum()
        kl_q = np.where(q > 0, q * np.log2(q / m), 0.0).sum()
    return float(np.sqrt(min(max(0.5 * (kl_p + kl_q), 0.0), 1.0)))


def _guard(reference: CategoricalSketch, current: CategoricalSketch, check: str, feature: str,
           min_count: int) -> TestResult | None:
    if reference.count < min_count or current.count < min_count:
        return insufficient(
            check, feature, current.count, reference.count,
            f"needs >= {min_count} non-missing values on each side",
        )
    return None


def chi2_test(
    reference: CategoricalSketch,
    current: CategoricalSketch,
    feature: str = "",
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Chi-square test of homogeneity of the category distributions.

    Returns
    -------
    TestResult
        ``statistic`` = chi-square, ``effect_size`` = Cramer's V,
        ``p_value`` from chi-square with (k - 1) degrees of freedom. With a
        single category on both sides the distributions are identical:
        statistic 0, p = 1.

    Notes
    -----
    Pearson's chi-square on the 2 x k contingency table of aligned counts
    (``scipy.stats.chi2_contingency`` without continuity correction);
    Cramer's V = sqrt(chi2 / N) for a 2-row table.
    """
    guard = _guard(reference, current, "chi2", feature, min_count)
    if guard is not None:
        return guard
    _cats, ref, cur = aligned_counts(reference, current)
    keep = (ref + cur) > 0
    table = np.vstack([ref[keep], cur[keep]])
    n = int(reference.count), int(current.count)
    if table.shape[1] < 2:
        return TestResult("chi2", feature, 0.0, 0.0, 1.0, n[1], n[0])
    chi2, p, _dof, _exp = stats.chi2_contingency(table, correction=False)
    v = float(np.sqrt(chi2 / table.sum()))
    return TestResult(
        "chi2", feature, float(chi2), v, float(p), n[1], n[0],
        error_bound=float(reference.frequency_error + current.frequency_error),
        status=Status.OK,
    )


def js_test(
    reference: CategoricalSketch,
    current: CategoricalSketch,
    feature: str = "",
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Jensen-Shannon distance between category distributions (top-K + OTHER).

    Returns
    -------
    TestResult
        ``statistic`` = ``effect_size`` = JS distance in [0, 1]; no p-value.
    """
    guard = _guard(reference, current, "js", feature, min_count)
    if guard is not None:
        return guard
    _cats, ref, cur = aligned_counts(reference, current)
    d = js_distance(ref, cur)
    return TestResult(
        "js", feature, d, d, None, int(current.count), int(reference.count),
        error_bound=float(reference.frequency_error + current.frequency_error),
    )
