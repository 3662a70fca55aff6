"""Population Stability Index between a baseline and a current sketch (numeric or categorical)."""

from __future__ import annotations

import numpy as np

from detectors.drift.bins import DEFAULT_BINS
from detectors.drift.divergence import MIN_COUNT, divergence_test
from detectors.drift.grid import JointCdf
from detectors.result import TestResult
from detectors.stats.divergence_null import PSI_QUARTIC
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch


def psi_terms(ref: np.ndarray, cur: np.ndarray, n_ref: int, n_cur: int) -> np.ndarray:
    """Per-bin PSI terms (c_i - r_i) ln(c_i / r_i), each mass floored at half a record.

    Parameters
    ----------
    ref, cur : np.ndarray
        Bin masses (arrays that broadcast together).
    n_ref, n_cur : int
        Values on each side, >= 1 (the floors are 0.5 / n of their side).

    Returns
    -------
    np.ndarray
        The terms, each >= 0; their sum is PSI.

    Examples
    --------
    >>> psi_terms(np.array([0.5, 0.5]), np.array([0.6, 0.4]), 100, 100).round(4).tolist()
    [0.0182, 0.0223]
    """
    r = np.maximum(ref, 0.5 / n_ref)
    c = np.maximum(cur, 0.5 / n_cur)
    return (c - r) * np.log(c / r)


def psi_from_masses(ref: np.ndarray, cur: np.ndarray, n_ref: int, n_cur: int) -> float:
    """PSI = sum_i (c_i - r_i) * ln(c_i / r_i) with each mass floored at half a record.

    The floor (0.5 / n of its own side) applies bin by bin without
    renormalising, so an empty or rare bin changes only its own term and never
    yields inf or NaN.

    Examples
    --------
    >>> round(psi_from_masses(np.array([0.5, 0.5]), np.array([0.6, 0.4]), 100, 100), 4)
    0.0405
    >>> psi_from_masses(np.array([1.0, 0.0]), np.array([1.0, 0.0]), 10, 10)
    0.0
    """
    return float(max(np.sum(psi_terms(ref, cur, n_ref, n_cur)), 0.0))


def _identity(x: float) -> float:
    return x


def psi(
    reference: NumericSketch | CategoricalSketch,
    current: NumericSketch | CategoricalSketch,
    feature: str = "",
    *,
    bins: int = DEFAULT_BINS,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
    grid: JointCdf | None = None,
) -> TestResult:
    """Population Stability Index of ``current`` against ``reference``.

    Parameters
    ----------
    reference, current : NumericSketch or CategoricalSketch
        Numeric: ``bins`` baseline-quantile bins (one bin per value when the
        baseline has at most ``bins`` values). Categorical: the top 50
        categories of the pooled counts plus OTHER.
    feature : str
        Feature name carried into the result.
    floor : float
        PSI tolerated under the null (interval null "PSI <= floor").
    alpha : float
        Level at which the status becomes ``drift``.
    min_count : int
        Non-missing values needed on each side; below it ``insufficient_data``.
    grid : JointCdf, optional
        Numeric: a precomputed grid of the pair.

    Returns
    -------
    TestResult
        ``statistic`` = ``effect_size`` = PSI; ``p_value`` from
        N_eff * PSI against its small-sample null law g chi2(h), g -> 1 and
        h -> B - 1 as N_eff grows (noncentral at the floor;
        :func:`~detectors.drift.divergence.divergence_test`), with the bin
        masses' sketch error shrunk away first.

    Notes
    -----
    PSI = sum_i (c_i - r_i) ln(c_i / r_i) (Yurdakul, "Statistical properties of
    population stability index", 2018; Siddiqi, "Credit Risk Scorecards",
    2006). Bin masses on both sides come from each sketch's CDF at the same
    edges. Rules of thumb: < 0.1 stable, 0.1-0.25 moderate shift, > 0.25 major.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(rng.normal(size=5000)); b.update(rng.normal(1.0, 1.0, size=5000))
    >>> r = psi(a, b, floor=0.1)
    >>> round(r.statistic, 1), r.status.value
    (1.0, 'drift')
    """
    return divergence_test("psi", psi_from_masses, _identity, reference, current, feature,
                           quartic=PSI_QUARTIC, terms=psi_terms, bins=bins, floor=floor, alpha=alpha,
                           min_count=min_count, grid=grid)
