"""Small-sample null distribution of binned two-sample divergences (PSI, Jensen-Shannon).

``T = N_eff * PSI`` and ``T = 8 N_eff * JSD`` (JSD in nats, N_eff = n m / (n + m))
are asymptotically chi2(k - 1) under H0 for k bins, but at a few hundred
values per side both are stochastically larger: their mean and variance
exceed k - 1 and 2 (k - 1) by O(1 / N_eff), and the plain chi-square p-value
is liberal (measured at alpha = 0.05 on 10 quantile bins of continuous data:
PSI 0.085 and JS 0.067 at n = m = 100, 0.054 / 0.051 at n = m = 300).
:func:`divergence_null` gives T's first two moments under H0 and the scaled
chi-square ``g * chi2(h)`` with those moments (Satterthwaite 1946; Box 1954).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

#: Coefficient ``a`` of u^4 / p^3 in the per-bin expansion of PSI: (c - r) ln(c / r).
PSI_QUARTIC = 1.0 / 12.0
#: The same for 8 x the equal-weight Jensen-Shannon divergence in nats.
JS_QUARTIC = 1.0 / 24.0
#: Expected values per bin, in the smaller sample, below which a share is floored in the expansion.
MIN_EXPECTED = 5.0
#: Reference-quantile bins: per-bin moments are summed exactly while some bin expects fewer
#: current values than this (the expansion's variance is 6.6 % low at 10, 0.8 % at 30).
EXACT_BELOW_EXPECTED = 50.0
#: ... and only in current windows up to this size (it bounds the sums' cost, ~k x 16 sd).
EXACT_MAX_WINDOW = 20_000
#: Half-width, in standard deviations, of the window each exact per-bin sum covers.
WINDOW_SDS = 8.0

#: ``terms(ref, cur, n_ref, n_cur)``: per-bin contributions to T / N_eff, elementwise.
BinTerms = Callable[[np.ndarray, np.ndarray, int, int], np.ndarray]


@dataclass(frozen=True, slots=True)
class ScaledChi2:
    """Null law ``T ~ scale * chi2(df)`` of a divergence statistic T.

    Attributes
    ----------
    mean, variance : float
        E[T] and Var[T] under H0.
    scale : float
        g = variance / (2 mean) (1.0 for the plain chi2(k - 1)).
    df : float
        h = 2 mean^2 / variance, real, > 0.
    """

    mean: float
    variance: float
    scale: float
    df: float


def divergence_null(
    p: np.ndarray,
    n_ref: int,
    n_cur: int,
    quartic: float,
    *,
    reference_quantiles: bool = False,
    terms: BinTerms | None = None,
    min_expected: float = MIN_EXPECTED,
) -> ScaledChi2:
    """Mean and variance of T = N_eff * D under H0, and the scaled chi-square matching them.

    Parameters
    ----------
    p : np.ndarray of float, shape (k,), k >= 2
        Bin shares under H0: the pooled masses (n_ref r + n_cur c) / (n_ref + n_cur)
        of two samples, or the reference's masses r for reference-quantile
        bins. Positive; normalised here.
    n_ref, n_cur : int
        Values on each side, >= 1.
    quartic : float
        The divergence's coefficient ``a`` (Notes): :data:`PSI_QUARTIC` for
        PSI, :data:`JS_QUARTIC` for 8 JSD, 0 for sum (c - r)^2 / ((c + r) / 2).
    reference_quantiles : bool
        False: both sides' counts are multinomial over fixed bins
        (categories, one bin per value). True: the bins are the reference's
        own quantiles, so its masses are fixed by construction and the
        current's counts are Dirichlet-multinomial(n_cur; n_ref p): how many
        current values fall between reference order statistics, every
        interleaving equally likely under H0.
    terms : callable, optional
        The divergence's per-bin terms in T / N_eff units (e.g.
        :func:`~detectors.drift.psi.psi_terms`). With reference-quantile
        bins of which some bin expects fewer than ``EXACT_BELOW_EXPECTED``
        current values (and ``n_cur <= EXACT_MAX_WINDOW``), each bin's mean
        and variance are then summed exactly over its beta-binomial count.
    min_expected : float
        Expected values per bin, in the smaller sample, below which a share
        is floored in the expansion (see Notes).

    Returns
    -------
    ScaledChi2
        ``mean``, ``variance`` (k - 1 and 2 (k - 1) plus O(1 / N_eff)), and
        g, h with g h = mean, 2 g^2 h = variance.

    Raises
    ------
    ValueError
        If k < 2, a share is not positive and finite, a sample size is < 1
        or ``quartic`` < 0.

    Notes
    -----
    For a bin with H0 share p, current share c = p + delta and reference
    share r = p + eps, u = c - r and s = delta + eps, both divergences expand as
    u^2 / p - u^2 s / (2 p^2) + u^2 s^2 / (4 p^3) + a u^4 / p^3 + O(5),
    a = 1/12 for PSI and 1/24 for 8 JSD (reference-quantile bins: eps = 0,
    s = u). T = Q + T3 + T4 by order; E[T] and
    Var[T] = Var Q + 2 Cov(Q, T3) + Var T3 + 2 Cov(Q, T4) to O(1 / N_eff)
    follow from the counts' cumulants (the delta-method expansion Cressie &
    Read, "Multinomial goodness-of-fit tests", JRSS B 46, 1984, and Read,
    "Closer asymptotic approximations for the distributions of the power
    divergence goodness-of-fit statistics", AISM 36, 1984, use for one-sample
    power divergences). With t = sum_i 1 / p_i, A1 = t - 3k + 2,
    A2 = t - k^2, A3 = t - 2k + 1::

        E[T]   = E[Q] + (-e3 A1 / 2 + ((1 + 2 g^2) / 4 + 3a) A3) / N_eff
        Var[T] = Var[Q] + (-(4 e3 + 2 g o3) A1 - (e3 + 2 g o3) A2
                           + ((1 + 8 g^2) A2 + (2 + 4 g^2) A1) / 4
                           + (1 + 5 g^2 + 24 a) A3) / N_eff

    g is the correlation factor of u and s; e3, o3 scale the third
    cumulants of (u, s) with an even and an odd number of u's.

    * Two multinomial samples, rho = N_eff / n_cur, rho' = N_eff / n_ref:
      g = o3 = rho - rho', e3 = rho^2 + rho'^2, E[Q] = k - 1 and
      Var[Q] = 2 (k - 1) + (rho^3 + rho'^3)(t - k^2 - 2k + 2) / N_eff,
      exact (Haldane, "The exact value of the moments of the distribution of
      chi2...", Biometrika 29, 1937, for one sample). For JS with
      n_ref = n_cur, 8 N_eff JSD is the G-statistic of the 2 x k table and
      E[T] reduces to Williams' correction (k - 1) + (t - 1) / (4 n)
      (Williams, "Improved likelihood ratio tests for complete contingency
      tables", Biometrika 63, 1976). A share below ``min_expected`` values
      of the smaller sample is floored there (the expansion would count a
      bin expected to hold one value as if it held 1 / p of them; after
      :func:`~detectors.drift.bins.pool_sparse` at most one bin is that
      small).
    * Reference-quantile bins, Dirichlet-multinomial with m = n_cur,
      A = n_ref: g = 1, e3 = o3 = N_eff^2 (A + m)(A + 2m) / (m^2 (A + 1)(A + 2)),
      E[Q] = N_eff (A + m)(k - 1) / (m (A + 1)) and Var[Q] exactly from the
      Polya factorial moments (Mosimann, "On the compound multinomial
      distribution, the multivariate beta-distribution, and correlations
      among proportions", Biometrika 49, 1962). With ``terms``, while some
      bin expects fewer than ``EXACT_BELOW_EXPECTED`` current values, each
      bin's own mean and variance are summed exactly over its beta-binomial
      count (window +-8 sd), which captures the higher orders of the log
      terms at ~10 values per bin; only the covariances between bins come
      from the expansion (at 10 values per bin its variance is 6.6 % low,
      at 30 0.8 %).

    Where the expansion would put the mean or the variance below half of
    chi2(k - 1)'s (far outside its range: e.g. ~50 quantile bins of a
    30-value reference), the moments of chi2(k - 1) are used. With a
    reference much smaller than the window, quantile bins' moments are
    legitimately a little below chi2(k - 1)'s (simulated 8.99 and 17.87 for
    300 x 50,000 values on 10 bins; the expansion gives 9.00 and 17.85).
    T is then referred to g chi2(h) matched on both moments (Satterthwaite,
    "An approximate distribution of estimates of variance components",
    Biometrics Bulletin 2, 1946; Box, "Some theorems on quadratic forms
    applied in the study of analysis of variance problems, I", Ann. Math.
    Statist. 25, 1954). Measured accuracy: docs/detectors.md and
    ``benchmarks/calibration.py --small-sample``.

    Examples
    --------
    >>> law = divergence_null(np.full(10, 0.1), 300, 300, PSI_QUARTIC)
    >>> round(law.mean, 3), round(law.variance, 2), round(law.scale, 4), round(law.df, 3)
    (9.15, 18.87, 1.0311, 8.874)
    >>> divergence_null(np.full(10, 0.1), 10**7, 10**7, JS_QUARTIC).scale < 1.0001
    True
    """
    k = int(np.size(p))
    if k < 2:
        raise ValueError("needs at least 2 bins")
    if n_ref < 1 or n_cur < 1:
        raise ValueError("sample sizes must be >= 1")
    if not quartic >= 0.0:
        raise ValueError("quartic must be >= 0")
    p = np.asarray(p, dtype=np.float64)
    total, smallest = float(p.sum()), float(p.min())
    if not (smallest > 0.0 and math.isfinite(total)):
        raise ValueError("bin shares must be positive and finite")
    p = p / total
    if reference_quantiles:
        if (terms is not None and n_cur <= EXACT_MAX_WINDOW
                and n_cur * smallest / total < EXACT_BELOW_EXPECTED):
            mean, variance = _quantile_bins_exact_marginals(p, n_ref, n_cur, quartic, terms)
        else:
            mean, variance = _quantile_bins_expansion(p, n_ref, n_cur, quartic, min_expected)
    else:
        mean, variance = _two_sample_expansion(p, n_ref, n_cur, quartic, min_expected)
    if mean < 0.5 * (k - 1) or variance < k - 1:
        # corrections this large (> half the leading term, negative) mean the O(1 / N_eff)
        # expansion is far outside its range (e.g. ~50 quantile bins of a 30-value reference)
        mean, variance = float(k - 1), 2.0 * (k - 1)
    return ScaledChi2(mean, variance, variance / (2 * mean), 2 * mean * mean / variance)


def _t(p: np.ndarray, floor: float = 0.0) -> float:
    # t = sum 1 / p >= k^2 for shares summing to 1 (Cauchy-Schwarz); a floor must not break that
    return max(float(np.sum(1.0 / np.maximum(p, floor))), float(p.size**2))


def _corrections(k: int, t: float, n_eff: float, a: float, g: float, e3: float,
                 o3: float) -> tuple[float, float]:
    """The O(1 / N_eff) terms of E[T] - E[Q] and Var[T] - Var[Q] (see :func:`divergence_null`)."""
    g2 = g * g
    a1, a2, a3 = t - 3 * k + 2, t - k * k, t - 2 * k + 1
    mean = (-0.5 * e3 * a1 + ((1 + 2 * g2) / 4 + 3 * a) * a3) / n_eff
    var = (-(4 * e3 + 2 * g * o3) * a1 - (e3 + 2 * g * o3) * a2
           + ((1 + 8 * g2) * a2 + (2 + 4 * g2) * a1) / 4 + (1 + 5 * g2 + 24 * a) * a3) / n_eff
    return mean, var


def _two_sample_expansion(p: np.ndarray, n_ref: int, n_cur: int, a: float,
                          min_expected: float) -> tuple[float, float]:
    k, t = p.size, _t(p, min_expected / min(n_ref, n_cur))
    n_eff = n_ref * n_cur / (n_ref + n_cur)
    rho, rho_ = n_eff / n_cur, n_eff / n_ref
    d_mean, d_var = _corrections(k, t, n_eff, a, rho - rho_, rho * rho + rho_ * rho_, rho - rho_)
    var_q = 2.0 * (k - 1) + (rho**3 + rho_**3) * (t - k * k - 2 * k + 2) / n_eff
    return (k - 1) + d_mean, var_q + d_var


def _third_cumulant_factor(n_eff: float, m: float, big_a: float) -> float:
    """e3 = o3 for the Dirichlet-multinomial: N_eff^2 kappa3(c) / K3."""
    return n_eff**2 * (big_a + m) * (big_a + 2 * m) / (m * m * (big_a + 1) * (big_a + 2))


def _quantile_bins_expansion(p: np.ndarray, n_ref: int, n_cur: int, a: float,
                             min_expected: float) -> tuple[float, float]:
    k, t = p.size, _t(p, min_expected / min(n_ref, n_cur))
    m, big_a = float(n_cur), float(n_ref)
    n_eff = n_ref * n_cur / (n_ref + n_cur)
    e3 = _third_cumulant_factor(n_eff, m, big_a)
    d_mean, d_var = _corrections(k, t, n_eff, a, 1.0, e3, e3)
    mean_q = n_eff * (big_a + m) * (k - 1) / (m * (big_a + 1))
    var_q = (n_eff / (m * m)) ** 2 * _dirichlet_var_q(m, big_a, k, t)
    return mean_q + d_mean, var_q + d_var


def _quantile_bins_exact_marginals(p: np.ndarray, n_ref: int, n_cur: int, a: float,
                                   terms: BinTerms) -> tuple[float, float]:
    """Exact per-bin means and variances, the covariances between bins to O(1 / N_eff).

    Var[T] = sum_i Var[T_i] + sum_{i != j} Cov(T_i, T_j): the first sum
    exactly over each bin's beta-binomial count; the second is the
    expansion's Var[T] with its i = j terms removed, i.e. the exact
    between-bin part of Var[Q] (Var[Q] less its per-bin variances) plus the
    i != j parts of the contractions A1 .. A3 (sums over i != j of products
    of the multinomial cumulants V and K3, which need only k and
    s2 = sum p_i^2).
    """
    k = p.size
    m, big_a = float(n_cur), float(n_ref)
    n_eff = n_ref * n_cur / (n_ref + n_cur)
    x, w = _beta_binomial_windows(n_cur, big_a * p, big_a * (1.0 - p))
    t_i = n_eff * terms(p[:, None], x / m, n_ref, n_cur)
    wt = w * t_i
    mean_i = wt.sum(axis=1)
    var_diag = float(np.sum(wt * t_i) - mean_i @ mean_i)  # per-bin variances, summed
    z2 = (x - m * p[:, None]) ** 2 / p[:, None]
    wz = w * z2
    e_z2 = wz.sum(axis=1)
    var_q_diag = float(np.sum(wz * z2) - e_z2 @ e_z2)
    unit = (n_eff / (m * m)) ** 2
    var_q_between = unit * (_dirichlet_var_q(m, big_a, k, float(np.sum(1.0 / p))) - var_q_diag)
    s2 = float(p @ p)
    e3 = _third_cumulant_factor(n_eff, m, big_a)
    between = (-6 * e3 * (k - 3 + 2 * s2) - 3 * e3 * (-k * k + 4 * k - 5 + 2 * s2)
               + (9 * (-k * k + 3 * k - 3 + s2) + 6 * (s2 - 1)) / 4
               + (6 + 24 * a) * (k - 2 + s2)) / n_eff
    return float(mean_i.sum()), var_diag + var_q_between + between


def _beta_binomial_windows(n: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts x (shape (k, W)) around each mean and their beta-binomial(n, a_i, b_i) probabilities.

    Each row covers mean +- ``WINDOW_SDS`` standard deviations clipped to
    [0, n] (points beyond n get probability 0) and is renormalised. The
    probabilities follow from the first one by the ratio
    P(x + 1) / P(x) = (n - x)(x + a) / ((x + 1)(n - x - 1 + b)), in logs.
    """
    mean = n * a / (a + b)
    sd = np.sqrt(n * a * b * (a + b + n) / ((a + b) ** 2 * (a + b + 1)))
    half = int(np.ceil(WINDOW_SDS * float(sd.max()))) + 1
    lo = np.clip(np.floor(mean) - half, 0, n)
    x = lo[:, None] + np.arange(2 * half + 1, dtype=np.float64)
    log_first = (special.gammaln(n + 1) - special.gammaln(lo + 1) - special.gammaln(n - lo + 1)
                 + special.betaln(lo + a, n - lo + b) - special.betaln(a, b))
    step = x[:, :-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = ((n - step) * (step + a[:, None])) / ((step + 1) * (n - step - 1 + b[:, None]))
        log_ratio = np.where(step < n, np.log(ratio), -np.inf)
    logw = np.concatenate((log_first[:, None], log_first[:, None] + np.cumsum(log_ratio, axis=1)), axis=1)
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    return np.minimum(x, n), w / w.sum(axis=1, keepdims=True)


def _dirichlet_var_q(m: float, a: float, k: int, t: float) -> float:
    """Var of sum_i (X_i - m p_i)^2 / p_i for X ~ Dirichlet-multinomial(m; a p), exactly.

    From the factorial moments E[prod_i X_i^(r_i)] = m^(r) prod_i (a p_i)^(r_i, rising)
    / a^(r, rising) (Mosimann 1962), summed over bins; p enters only through
    k and t = sum_i 1 / p_i. As a -> inf it tends to Haldane's multinomial
    variance 2 (k - 1) m^2 + m (t - k^2 - 2k + 2).

    Examples
    --------
    >>> haldane = 2 * 9 * 100**2 + 100 * (100 - 100 - 20 + 2)
    >>> round(_dirichlet_var_q(100.0, 1e9, 10, 100.0) / haldane, 6)
    1.0
    """
    poly = ((a + 1) * (a * a + 6 * a * m - a + 6 * m * m) * t
            - (a**3 + 4 * a * a * m + 2 * a * a + 4 * a * m * m + 6 * a * m + a + 6 * m * m) * k * k
            + 2 * a * (a - 1) * (m - 1) * (a + m + 1) * k
            - 2 * a * a * (m - 1) * (a + m + 1))
    return m * (a + m) * poly / ((a + 1) ** 2 * (a + 2) * (a + 3))
