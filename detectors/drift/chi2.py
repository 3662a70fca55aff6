"""Chi-square test of homogeneity of two category distributions (exact at small counts)."""

from __future__ import annotations

import numpy as np

from detectors.drift.bins import aligned_counts, count_error, pool_sparse
from detectors.drift.divergence import MIN_COUNT, UNPOOLED_MAX_STATES, shrink
from detectors.result import TestResult, insufficient, judged
from detectors.stats.exact import exact_homogeneity_p
from detectors.stats.interval import chi2_interval_p
from sketches.categorical import CategoricalSketch

MIN_EXPECTED = 5.0
EXACT_MAX_TOTAL = 500


def pearson_chi2(ref: np.ndarray, cur: np.ndarray) -> float:
    """Pearson's X^2 of the 2 x k table ``[ref; cur]`` (no continuity correction).

    Examples
    --------
    >>> pearson_chi2(np.array([10.0, 10.0]), np.array([10.0, 10.0]))
    0.0
    >>> round(pearson_chi2(np.array([30.0, 10.0]), np.array([10.0, 30.0])), 2)
    20.0
    """
    table = np.vstack([ref, cur])
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0) / table.sum()
    return float(np.sum((table - expected) ** 2 / expected))


def chi2_test(
    reference: CategoricalSketch,
    current: CategoricalSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Chi-square test of homogeneity of the category distributions.

    Parameters
    ----------
    reference, current : CategoricalSketch
    feature : str
    floor : float
        Cramer's V tolerated under the null.
    alpha, min_count
        Level for ``drift``; non-missing values needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` = X^2, ``effect_size`` = Cramer's V = sqrt(X^2 / N).
        One category on both sides: identical distributions, X^2 = 0, p = 1.

    Notes
    -----
    Pearson's X^2 on the 2 x k table of both sides' counts over the top
    categories of their pooled counts plus OTHER, so a new and a vanished
    category count alike (:func:`~detectors.drift.bins.aligned_counts`);
    X^2 and V are reported on every category. When an expected count is
    below 5 (Cochran, "Some methods for strengthening the common chi-square
    tests", 1954), N <= 500 and the counts are exact, the p-value is the
    exact conditional test of :func:`~detectors.stats.exact.exact_homogeneity_p`
    on every category (under a floor, the larger of it and the noncentral
    chi-square p-value: an intersection-union test); merging the sparse
    categories first hid swaps ({a: 94, b: 6} against {a: 94, c: 6}: X^2 0,
    p = 1, for an exact p of 0.00085). Otherwise categories expected to hold
    < 5 values in the smaller window under homogeneity (its size times the
    category's pooled share) are merged, and the p-value is
    chi2(k - 1) (noncentral with N * floor^2 under the interval null;
    Cramer, "Mathematical Methods of Statistics", 1946, for V).
    Sketch error: each category's share difference is shrunk by
    err_ref / n_ref + err_cur / n_cur before the p-value.

    Examples
    --------
    >>> a, b = CategoricalSketch(), CategoricalSketch()
    >>> a.update(["x"] * 30 + ["y"] * 2); b.update(["x"] * 25 + ["y"] * 7)
    >>> r = chi2_test(a, b)
    >>> round(r.statistic, 2), round(r.p_value, 3)
    (3.23, 0.148)
    """
    n_ref, n_cur = int(reference.count), int(current.count)
    if n_ref < min_count or n_cur < min_count:
        return insufficient("chi2", feature, n_cur, n_ref,
                            f"needs >= {min_count} non-missing values on each side")
    _cats, ref_all, cur_all = aligned_counts(reference, current)
    keep = (ref_all + cur_all) > 0
    ref_all, cur_all = ref_all[keep], cur_all[keep]
    if ref_all.size < 2:
        return judged("chi2", feature, 0.0, 0.0, 1.0, n_cur, n_ref, floor=floor, alpha=alpha)
    total = ref_all.sum() + cur_all.sum()
    x2_all = pearson_chi2(ref_all, cur_all)  # reported on every category: pooling hides swaps
    effect = float(np.sqrt(x2_all / total))
    eta = count_error(reference) / n_ref + count_error(current) / n_cur
    expected_min = min(n_ref, n_cur) * (ref_all + cur_all).min() / total
    if eta == 0 and expected_min < MIN_EXPECTED and total <= EXACT_MAX_TOTAL:
        # exact before pooling: the permutation law needs no expected count of 5
        p_small = exact_homogeneity_p(ref_all.astype(np.int64), cur_all.astype(np.int64),
                                      UNPOOLED_MAX_STATES)
        if p_small is not None:
            if floor > 0:  # and beyond the floor (intersection-union)
                p_small = max(p_small, chi2_interval_p(x2_all, ref_all.size - 1, total * floor**2))
            return judged("chi2", feature, x2_all, effect, p_small, n_cur, n_ref,
                          p_exact=p_small, floor=floor, alpha=alpha)
    rm, cm = pool_sparse(ref_all / n_ref, cur_all / n_cur, min(n_ref, n_cur), MIN_EXPECTED,
                         (n_ref, n_cur))
    ref, cur = np.rint(rm * n_ref), np.rint(cm * n_cur)
    if ref.size < 2:
        return judged("chi2", feature, x2_all, effect, 1.0, n_cur, n_ref, floor=floor, alpha=alpha)
    x2 = pearson_chi2(ref, cur)
    df, nc = ref.size - 1, total * floor**2
    p_exact = chi2_interval_p(x2, df, nc)
    p = p_exact
    if eta > 0:
        shrunk = shrink(ref / ref.sum(), cur / cur.sum(), eta) * cur.sum()
        p = chi2_interval_p(pearson_chi2(ref, np.maximum(shrunk, 0.0)), df, nc)
    return judged("chi2", feature, x2_all, effect, p, n_cur, n_ref,
                  p_exact=p_exact, error_bound=eta, floor=floor, alpha=alpha)
