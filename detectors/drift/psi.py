"""Population Stability Index between a baseline and a current numeric sketch."""

from __future__ import annotations

import numpy as np

from detectors.result import Status, TestResult, insufficient
from sketches.numeric import NumericSketch

DEFAULT_BINS = 10
MIN_COUNT = 30


def baseline_edges(reference: NumericSketch, bins: int = DEFAULT_BINS) -> np.ndarray:
    """Inner bin edges from the baseline.

    Bins are ``(-inf, e_1], (e_1, e_2], ..., (e_k, +inf)``. A baseline with at
    most ``bins`` distinct values gets one bin per value plus one bin below its
    minimum and one above its maximum (values the baseline never had); otherwise
    the edges are its quantiles at ``i / bins``.
    """
    if reference.is_exact and len(reference.exact) <= bins:
        support = reference.support()
        return np.concatenate(([np.nextafter(support[0], -np.inf)], support))
    return np.unique([reference.quantile(i / bins) for i in range(1, bins)])


def bin_masses(sketch: NumericSketch, edges: np.ndarray) -> np.ndarray:
    """Mass of each bin, from the sketch's CDF at the edges (never from quantiles)."""
    cdf = np.concatenate(([0.0], sketch.cdf_many(edges), [1.0]))
    return np.clip(np.diff(cdf), 0.0, 1.0)


def psi_from_masses(ref: np.ndarray, cur: np.ndarray, n_ref: int, n_cur: int) -> float:
    """PSI = sum_i (c_i - r_i) * ln(c_i / r_i) with each mass floored at half a record.

    The floor (0.5 / n of its own side) applies bin by bin without
    renormalising, so an empty or rare bin changes only its own term and never
    yields inf or NaN.
    """
    r = np.maximum(ref, 0.5 / n_ref)
    c = np.maximum(cur, 0.5 / n_cur)
    return float(max(np.sum((c - r) * np.log(c / r)), 0.0))


def psi(
    reference: NumericSketch,
    current: NumericSketch,
    feature: str = "",
    bins: int = DEFAULT_BINS,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Population Stability Index of ``current`` against ``reference``.

    Parameters
    ----------
    reference, current : NumericSketch
    feature : str
        Feature name carried into the result.
    bins : int
        Number of baseline-quantile bins (fewer when the baseline is discrete).
    min_count : int
        Finite values needed on each side; below it the result is
        ``insufficient_data``.

    Returns
    -------
    TestResult
        ``statistic`` = ``effect_size`` = PSI; ``p_value`` None (PSI has no
        sampling distribution under H0 that is free of the binning).

    Notes
    -----
    PSI = sum_i (c_i - r_i) ln(c_i / r_i) (Yurdakul, "Statistical properties of
    population stability index", 2018). Bin masses on both sides come from
    each sketch's CDF at the same edges. Rules of thumb: < 0.1 stable,
    0.1-0.25 moderate shift, > 0.25 major shift.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(rng.normal(size=5000)); b.update(rng.normal(1.0, 1.0, size=5000))
    >>> round(psi(a, b).statistic, 1)
    1.0
    """
    n_ref, n_cur = reference.count, current.count
    if n_ref < min_count or n_cur < min_count:
        return insufficient(
            "psi", feature, n_cur, n_ref, f"needs >= {min_count} finite values on each side"
        )
    edges = baseline_edges(reference, bins)
    value = psi_from_masses(bin_masses(reference, edges), bin_masses(current, edges), n_ref, n_cur)
    return TestResult(
        "psi", feature, value, value, None, n_cur, n_ref,
        error_bound=2 * (reference.rank_error + current.rank_error), status=Status.OK,
    )
