"""Jensen-Shannon distance between a baseline and a current sketch (numeric or categorical)."""

from __future__ import annotations

import math

import numpy as np

from detectors.drift.bins import DEFAULT_BINS
from detectors.drift.divergence import MIN_COUNT, divergence_test
from detectors.drift.grid import JointCdf
from detectors.result import TestResult
from detectors.stats.divergence_null import JS_QUARTIC
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch

_LN2_8 = 8.0 * math.log(2.0)


def js_distance(p: np.ndarray, q: np.ndarray, _n_p: int = 0, _n_q: int = 0) -> float:
    """Jensen-Shannon distance (base 2, in [0, 1]) between two mass or count vectors.

    Parameters
    ----------
    p, q : np.ndarray, shape (k,)
        Non-negative, each with a positive sum (normalised here); any real
        dtype, converted to float64 first.
    _n_p, _n_q : int
        Unused (the divergence signature of :func:`divergence_test`).

    Returns
    -------
    float
        JSD(P, Q) = sqrt(0.5 KL(P || M) + 0.5 KL(Q || M)), M = (P + Q) / 2,
        computed in float64 and clamped to [0, 1], so near-identical inputs
        give 0.0, never NaN.

    Notes
    -----
    Lin, "Divergence measures based on the Shannon entropy", 1991; Endres &
    Schindelin, "A new metric for probability distributions", 2003 (the square
    root is a metric).

    Examples
    --------
    >>> js_distance(np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    1.0
    >>> js_distance(np.array([3.0, 1.0]), np.array([3.0, 1.0]))
    0.0
    """
    p = np.asarray(p, dtype=np.float64)  # float32 input loses JS below ~3e-4 to rounding
    q = np.asarray(q, dtype=np.float64)
    p = p / p.sum()
    q = q / q.sum()
    m = 0.5 * (p + q)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_p = np.where(p > 0, p * np.log2(p / m), 0.0).sum()
        kl_q = np.where(q > 0, q * np.log2(q / m), 0.0).sum()
    return float(np.sqrt(min(max(0.5 * (kl_p + kl_q), 0.0), 1.0)))


def js_terms(ref: np.ndarray, cur: np.ndarray, _n_ref: int = 0, _n_cur: int = 0) -> np.ndarray:
    """Per-bin terms of 8 JSD in nats: 4 [c ln(2c / (c + r)) + r ln(2r / (c + r))].

    Parameters
    ----------
    ref, cur : np.ndarray
        Bin masses, already normalised (arrays that broadcast together).
    _n_ref, _n_cur : int
        Unused (the per-bin signature of :func:`~detectors.drift.divergence.divergence_test`).

    Returns
    -------
    np.ndarray
        The terms (0 ln 0 = 0), each >= 0; their sum is 8 ln2 times the
        squared JS distance of :func:`js_distance`.

    Examples
    --------
    >>> p, q = np.array([0.5, 0.5]), np.array([0.9, 0.1])
    >>> round(float(js_terms(p, q).sum()), 9) == round(_LN2_8 * js_distance(p, q) ** 2, 9)
    True
    """
    m = 0.5 * (ref + cur)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 4.0 * (np.where(cur > 0, cur * np.log(cur / m), 0.0)
                      + np.where(ref > 0, ref * np.log(ref / m), 0.0))


def _to_chi2(d: float) -> float:
    # JS divergence in nats = ln2 * d^2 and ~ (1/8) chi-square distance for small changes.
    return _LN2_8 * d * d


def js_test(
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
    """Jensen-Shannon distance of ``current`` from ``reference``, with a p-value.

    Parameters
    ----------
    reference, current : NumericSketch or CategoricalSketch
        Numeric: on the baseline-quantile bins of :func:`~detectors.drift.psi.psi`.
        Categorical: the top 50 categories of the pooled counts plus OTHER.
    feature, bins, alpha, min_count, grid
        As for :func:`~detectors.drift.psi.psi`.
    floor : float
        JS distance tolerated under the null.

    Returns
    -------
    TestResult
        ``statistic`` = ``effect_size`` = JS distance in [0, 1]; ``p_value``
        from 8 ln2 N_eff JS^2 against its small-sample null law g chi2(h)
        (g -> 1, h -> B - 1 as N_eff grows; noncentral at the floor).

    Notes
    -----
    For small changes, the JS divergence in nats is 1/8 of Pearson's
    chi-square distance (Lin 1991, sec. IV; the G-test equals
    2 N JSD_pi for the sample-weighted JS), hence the scale.

    Examples
    --------
    >>> a, b = CategoricalSketch(), CategoricalSketch()
    >>> a.update(["a"] * 60); b.update(["b"] * 60)
    >>> r = js_test(a, b)
    >>> r.statistic, r.p_value < 1e-10
    (1.0, True)
    """
    return divergence_test("js", js_distance, _to_chi2, reference, current, feature,
                           quartic=JS_QUARTIC, terms=js_terms, bins=bins, floor=floor, alpha=alpha,
                           min_count=min_count, grid=grid)
