"""Correlation structure: the largest change of a pairwise correlation, by Fisher's z."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy import special

from detectors.multivariate import MIN_ROWS, MULTIVARIATE_FEATURE, prepared
from detectors.result import TestResult, judged
from sketches.comoments import CoMoments

R_LIMIT = 1.0 - 1e-12
"""|r| is clipped here before atanh (a correlation of exactly +/-1 has z = +/-inf)."""


def fisher_z(r: np.ndarray) -> np.ndarray:
    """z = atanh(r) = 0.5 ln((1 + r) / (1 - r)), with |r| clipped to :data:`R_LIMIT`.

    Examples
    --------
    >>> [round(float(v), 4) for v in fisher_z(np.array([0.0, 0.8, 1.0]))]
    [0.0, 1.0986, 14.1621]
    """
    return np.arctanh(np.clip(r, -R_LIMIT, R_LIMIT))


def pair_excess_kurtosis(block: CoMoments, pairs: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """kappa of each pair: the mean of its features' kurtosis / 3 - 1, at least 0.

    Parameters
    ----------
    block : CoMoments
    pairs : (numpy.ndarray, numpy.ndarray)
        Row and column indices of the pairs (e.g. ``numpy.triu_indices(d, 1)``).

    Returns
    -------
    numpy.ndarray, shape (len(pairs[0]),)

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> c = CoMoments()
    >>> c.update({"a": rng.normal(size=20_000), "b": rng.normal(size=20_000),
    ...           "c": rng.laplace(size=20_000)}, {}, 20_000)
    >>> [round(float(k), 1) for k in pair_excess_kurtosis(c, np.triu_indices(3, 1))]
    [0.0, 0.5, 0.5]
    """
    kappa = block.kurtosis() / 3.0 - 1.0
    return np.maximum(0.0, (kappa[pairs[0]] + kappa[pairs[1]]) / 2.0)


def correlation_test(
    reference: CoMoments,
    current: CoMoments,
    feature: str = MULTIVARIATE_FEATURE,
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_ROWS,
) -> TestResult:
    r"""Has any pairwise correlation of the numeric features changed by more than ``floor``?

    Parameters
    ----------
    reference, current : CoMoments
        Baseline and window blocks; the features both hold and that vary in the
        baseline are used (:func:`~detectors.multivariate.aligned`).
    feature : str
    floor : float
        Change of Fisher's z tolerated under the null for every pair (Cohen's q;
        0.1 is his "small" effect: a correlation 0.50 -> 0.57 or 0.00 -> 0.10).
    alpha : float
    min_count : int
        Complete rows each side needs (> 3).

    Returns
    -------
    TestResult
        ``statistic`` = the largest |z_w - z_ref| / se over the pairs,
        ``effect_size`` = z_w - z_ref of that pair (Cohen's q, signed); the
        reason names the pair and both correlations. ``insufficient_data``
        with fewer than 2 shared varying features or too few complete rows.

    Notes
    -----
    For a pair with correlation r estimated from n rows of a bivariate normal,
    z = atanh(r) is close to N(atanh(rho), 1/(n - 3)) (Fisher, "Frequency
    distribution of the values of the correlation coefficient in samples from
    an indefinitely large population", Biometrika 1915; "On the 'probable error'
    of a coefficient of correlation deduced from a small sample", Metron 1921).
    For the window and the baseline (independent samples)

        z_w - z_ref ~ N(0, 1/(n_w - 3) + 1/(n_ref - 3))

    under "no change"; each pair's p-value is of the interval null
    |z_w - z_ref| <= floor. The P = d (d - 1) / 2 pairs are combined by the
    smallest p-value with Bonferroni's correction, p = min(1, P p_min), which
    is Holm's step-down procedure at its first step (Holm, "A simple
    sequentially rejective multiple test procedure", 1979): the family-wise
    error stays <= alpha whatever the dependence between pairs, so the test
    is conservative when pairs share features. The 1/(n - 3) variance holds
    for Gaussian pairs; heavier tails widen the law of r: for an elliptical
    pair with kurtosis parameter kappa = E[x^4] / (3 E[x^2]^2) - 1,
    sqrt(n) (r - rho) tends to N(0, (1 + kappa) (1 - rho^2)^2) (Muirhead,
    "Aspects of Multivariate Statistical Theory", 1982, sec. 5.1.4), so each
    side's variance is multiplied by 1 + kappa, kappa of a pair being the
    mean of its two features' (at least 0), the larger of the window's and
    the baseline's (:func:`pair_excess_kurtosis`). Gaussian pairs keep
    1/(n - 3); a lognormal or Pareto feature, whose one extreme row can carry
    a window's correlation, is judged on its own tails.

    References
    ----------
    Fisher (1915, 1921); Cohen, "Statistical Power Analysis for the Behavioral
    Sciences", 1988, sec. 4.2 (q); Holm (1979).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> def block(rho, n):
    ...     x = rng.multivariate_normal([0, 0, 0], [[1, rho, 0], [rho, 1, 0], [0, 0, 1]], size=n)
    ...     c = CoMoments(); c.update({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2]}, {}, n); return c
    >>> ref = block(0.8, 5000)
    >>> r = correlation_test(ref, block(0.0, 1000), floor=0.1)
    >>> r.status.value, round(r.effect_size, 1), r.reason.split("; ")[1]
    ('drift', -1.1, 'largest change: corr(a, b) 0.80 -> -0.02')
    >>> correlation_test(ref, block(0.8, 1000), floor=0.1).status.value
    'ok'
    """
    check = "correlation"
    a = prepared(check, feature, reference, current, max(min_count, 4))
    if isinstance(a, TestResult):
        return a
    ref, cur = a.reference, a.current
    iu = np.triu_indices(len(a.names), k=1)
    r_ref, r_cur = ref.correlation()[iu], cur.correlation()[iu]
    dz = fisher_z(r_cur) - fisher_z(r_ref)
    inflation = 1.0 + np.maximum(pair_excess_kurtosis(ref, iu), pair_excess_kurtosis(cur, iu))
    se = np.sqrt(inflation * (1.0 / (cur.n - 3) + 1.0 / (ref.n - 3)))
    gap = np.abs(dz)
    # normal_interval_p, vectorised over the pairs
    p_pairs = special.ndtr((floor - gap) / se) + special.ndtr((-floor - gap) / se)
    j = int(np.argmax(gap))
    p = min(1.0, float(p_pairs.min()) * dz.size)
    result = judged(check, feature, float(gap[j] / se[j]), float(dz[j]), p, cur.n, ref.n,
                    floor=floor, alpha=alpha)
    pair = f"corr({a.names[iu[0][j]]}, {a.names[iu[1][j]]}) {r_ref[j]:.2f} -> {r_cur[j]:.2f}"
    return replace(result, reason="; ".join(filter(None, (result.reason, f"largest change: {pair}"))))
