"""PCA reconstruction error of a window, exact from its mean vector and co-moment matrix."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from detectors.multivariate import MIN_ROWS, MULTIVARIATE_FEATURE, prepared
from detectors.result import TestResult, insufficient, judged
from detectors.stats.interval import normal_interval_p
from sketches.comoments import CoMoments

VARIANCE_KEPT = 0.65
"""Share of the baseline's standardised variance the kept components explain (NannyML's
default for its data-reconstruction drift calculator)."""


@dataclass(frozen=True)
class PcaFit:
    """PCA of the baseline's correlation matrix.

    Attributes
    ----------
    mean, scale : numpy.ndarray, shape (d,)
        Baseline mean and (population) standard deviation: z = (x - mean) / scale.
    components : numpy.ndarray, shape (d, k)
        Orthonormal principal axes kept (largest eigenvalues first).
    kept : numpy.ndarray, shape (k,)
        Eigenvalues of the kept axes.
    discarded : numpy.ndarray, shape (d - k,)
        Eigenvalues of the axes left out: the baseline's own mean squared
        reconstruction error is their sum.
    """

    mean: np.ndarray
    scale: np.ndarray
    components: np.ndarray
    kept: np.ndarray
    discarded: np.ndarray

    def optimism(self, n: int) -> float:
        r"""Expected excess of a new sample's error over the baseline's in-sample error, for a
        baseline of ``n`` rows: (2 / n) sum_{i kept, j discarded} l_i l_j / (l_i - l_j).

        Notes
        -----
        Second-order perturbation of the eigenvalues of a sample covariance with
        E[E_ij^2] = lambda_i lambda_j / n between eigen-directions (Lawley, "Tests of
        significance for the latent roots of covariance and correlation matrices",
        Biometrika 1956; Anderson, "An Introduction to Multivariate Statistical
        Analysis", 2003, sec. 13.5): the in-sample error sum_j l_j is low by half of
        it, a new sample's error tr(R Sigma) high by the other half.
        """
        li, lj = self.kept[:, None], self.discarded[None, :]
        gap = np.maximum(li - lj, 1e-12)
        return float(2.0 / n * np.sum(li * lj / gap))

    def residual(self) -> np.ndarray:
        """R = I - P P^T, the projector onto the discarded axes, shape (d, d)."""
        p = self.components
        return np.eye(p.shape[0]) - p @ p.T


def fit_pca(reference: CoMoments, variance: float = VARIANCE_KEPT) -> PcaFit:
    """Fit PCA on the standardised baseline, keeping the fewest components whose eigenvalues
    reach ``variance`` of the total.

    Raises
    ------
    ValueError
        If ``variance`` is not in (0, 1) or the block has fewer than 2 rows.

    Examples
    --------
    >>> c = CoMoments()
    >>> c.update({"x": [1.0, 2.0, 3.0, 4.0], "y": [1.0, 2.0, 3.0, 5.0]}, {}, 4)
    >>> fit = fit_pca(c)
    >>> fit.components.shape, [round(float(v), 4) for v in fit.discarded]
    ((2, 1), [0.0173])
    """
    if not 0.0 < variance < 1.0:
        raise ValueError("variance must be in (0, 1)")
    corr = reference.correlation()
    scale = np.sqrt(np.diag(reference.m2) / reference.n)
    eigval, eigvec = np.linalg.eigh(corr)
    order = np.argsort(eigval)[::-1]
    eigval, eigvec = np.clip(eigval[order], 0.0, None), eigvec[:, order]
    share = np.cumsum(eigval) / eigval.sum()
    k = int(np.searchsorted(share, variance - 1e-12) + 1)
    return PcaFit(reference.mean.copy(), scale, eigvec[:, :k], eigval[:k], eigval[k:])


def mean_squared_error(fit: PcaFit, block: CoMoments) -> float:
    r"""Mean over a block's rows of the squared reconstruction error ||R z_i||^2.

    Notes
    -----
    With z_i = D^-1 (x_i - mu_ref) and the block's mean mu_w and population
    covariance S_w = m2 / n (standardised: S_z = D^-1 S_w D^-1, m = D^-1 (mu_w - mu_ref)),

        (1/n) sum_i z_i^T R z_i = tr(R S_z) + m^T R m,

    exactly (R is symmetric and idempotent), so no raw row is needed.

    Examples
    --------
    >>> c = CoMoments()
    >>> c.update({"x": [1.0, 2.0, 3.0, 4.0], "y": [1.0, 2.0, 3.0, 5.0]}, {}, 4)
    >>> round(mean_squared_error(fit_pca(c), c), 4)  # in-sample: the discarded eigenvalue
    0.0173
    """
    r = fit.residual()
    s_z = block.m2 / block.n / np.outer(fit.scale, fit.scale)
    m = (block.mean - fit.mean) / fit.scale
    return float(np.trace(r @ s_z) + m @ r @ m)


def error_variance(fit: PcaFit, corr: np.ndarray, kurtosis: np.ndarray) -> float:
    r"""Variance of one row's squared reconstruction error z^T R z under H0.

    Parameters
    ----------
    fit : PcaFit
    corr : numpy.ndarray, shape (d, d)
        The baseline's correlation matrix C (the covariance of z).
    kurtosis : numpy.ndarray, shape (d,)
        Each feature's kurtosis kappa_a (3 for a normal).

    Returns
    -------
    float
        2 sum_j lambda_j^2 + sum_k gamma_k a_kk^2, at least a twentieth of the
        Gaussian value 2 sum_j lambda_j^2.

    Notes
    -----
    z is taken as B w with B = C^(1/2) and w of independent standardised
    components with excess kurtoses gamma_k. For a symmetric A, Var(w^T A w) =
    2 tr(A^2) + sum_k gamma_k A_kk^2 (Seber & Lee, "Linear Regression Analysis",
    2003, thm. 1.6); with A = B R B, tr(A^2) = tr((R C)^2) = sum_j lambda_j^2. The
    gamma_k are those that reproduce the features' excess kurtoses,
    kappa_a - 3 = sum_k B_ak^4 gamma_k (least squares, each >= -2). For
    uncorrelated features B = I and gamma is their own excess kurtosis; for
    Gaussian ones gamma = 0 and the variance is the Gaussian 2 sum_j lambda_j^2.
    Heavy tails (a Pareto or log-normal feature) make it many times larger:
    without this term the test alarmed in a third of the simulator's clean
    hourly windows.

    Examples
    --------
    >>> fit = PcaFit(np.zeros(2), np.ones(2), np.array([[1.0], [0.0]]), np.ones(1), np.ones(1))
    >>> error_variance(fit, np.eye(2), np.array([3.0, 3.0]))  # one N(0, 1) left out: chi2(1)
    2.0
    >>> error_variance(fit, np.eye(2), np.array([3.0, 9.0]))  # its kurtosis 9: Var(z^2) = 8
    8.0
    """
    lam = fit.discarded
    gaussian = 2.0 * float(lam @ lam)
    w, v = np.linalg.eigh(corr)
    b = (v * np.sqrt(np.clip(w, 0.0, None))) @ v.T
    gamma = np.clip(np.linalg.lstsq(b**4, kurtosis - 3.0, rcond=None)[0], -2.0, None)
    a = np.einsum("ik,ij,jk->k", b, fit.residual(), b)
    return max(gaussian + float(gamma @ (a * a)), 0.05 * gaussian)


def reconstruction_error_test(
    reference: CoMoments,
    current: CoMoments,
    feature: str = MULTIVARIATE_FEATURE,
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    variance: float = VARIANCE_KEPT,
    min_count: int = MIN_ROWS,
) -> TestResult:
    r"""Has the window's PCA reconstruction error moved from the baseline's by more than ``floor``?

    PCA is fitted on the baseline's numeric features standardised by the
    baseline's mean and standard deviation, keeping the components that explain
    ``variance`` of the variance (65 %, NannyML's default). A window whose
    features move together differently from the baseline's is reconstructed
    worse (or better) by those components.

    Parameters
    ----------
    reference, current : CoMoments
        Baseline and window blocks; the features both hold and that vary in the
        baseline are used (:func:`~detectors.multivariate.aligned`).
    feature : str
    floor : float
        Change of ln(error_w / error_ref) tolerated under the null (0.1: the
        error 10 % higher or lower).
    alpha : float
    variance : float
        Share of variance the kept components explain, in (0, 1).
    min_count : int
        Complete rows each side needs.

    Returns
    -------
    TestResult
        ``statistic`` = z of the log ratio, ``effect_size`` =
        ln(error_w / (error_ref + optimism)) (Notes). ``insufficient_data`` with fewer than 2 shared
        varying features, fewer than ``min_count`` complete rows a side, or
        when the kept components reconstruct the baseline (almost) exactly.

    Notes
    -----
    The error of a window is its mean squared reconstruction error
    e_w = tr(R S_w) + (mu_w - mu_ref)^T R (mu_w - mu_ref) on standardised
    coordinates, R = I - P P^T (:func:`mean_squared_error`); the baseline's
    e_ref = sum of the discarded eigenvalues lambda_j of its correlation matrix.
    NannyML averages the Euclidean error ||R z|| (its square root per row), which
    moments cannot give; the mean squared error is its exact second-moment
    counterpart and moves the same way.

    Null law: for Gaussian rows from the baseline's distribution, z^T R z is
    a weighted sum of chi-square(1) variables with weights lambda_j, so its
    variance is v = 2 sum lambda_j^2 (Mathai & Provost, "Quadratic Forms in
    Random Variables", 1992, thm. 3.2b.2); the features' kurtoses (pooled over
    both blocks, so heavy tails in either widen the test) add the fourth-cumulant
    term of :func:`error_variance`. By the delta method

        ln(e_w / e_ref) ~ N(0, v / (sum lambda_j)^2 (1/n_w + 1/n_ref)).

    The components are fitted to the baseline, so its in-sample error is low and
    a new sample's error high, together by the optimism
    o = (2 / n_ref) sum_{i kept, j discarded} l_i l_j / (l_i - l_j) (Lawley 1956;
    :meth:`PcaFit.optimism`): the window's error is compared with e_ref + o, and
    the effect is ln(e_w / (e_ref + o)). Without it a baseline of 100 rows alarms
    in ~10 % of H0 windows at alpha = 0.05; with it 5 % (benchmarks/calibration.py).
    The baseline's own noise counts through 1/n_ref. The p-value is of the
    interval null |effect| <= floor (:func:`~detectors.stats.interval.normal_interval_p`).
    The kurtosis term is exact for independent features and a model (independent
    components mixed by C^(1/2)) for correlated ones; the floor and the learned
    floors absorb what it misses.

    References
    ----------
    NannyML documentation, "Data Reconstruction with PCA" (how it works;
    docs/how_it_works/data_reconstruction.rst in the NannyML repository: "By default
    it aims to capture 65% of the dataset's variance"; the error is "the euclidean
    distance between the original data points and their re-constructed counterparts",
    averaged over a chunk).
    Pearson, "On lines and planes of closest fit to systems of points in space", 1901.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> def block(rho, n):
    ...     x = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=n)
    ...     c = CoMoments(); c.update({"a": x[:, 0], "b": x[:, 1]}, {}, n); return c
    >>> ref = block(0.8, 5000)
    >>> r = reconstruction_error_test(ref, block(0.0, 1000), floor=0.1)
    >>> round(r.effect_size, 1), r.status.value
    (1.6, 'drift')
    >>> reconstruction_error_test(ref, block(0.8, 1000), floor=0.1).status.value
    'ok'
    """
    check = "reconstruction_error"
    a = prepared(check, feature, reference, current, min_count)
    if isinstance(a, TestResult):
        return a
    ref, cur = a.reference, a.current
    fit = fit_pca(ref, variance)
    lam = fit.discarded
    e_ref = float(lam.sum())
    if fit.discarded.size == 0 or e_ref <= 1e-9 * len(a.names):
        return insufficient(check, feature, cur.n, ref.n,
                            "the kept components reconstruct the baseline exactly "
                            "(no discarded variance to compare)")
    e_cur = mean_squared_error(fit, cur)
    expected = e_ref + fit.optimism(ref.n)
    effect = math.log(max(e_cur, 1e-300) / expected)
    pooled = CoMoments().merge(ref).merge(cur)
    var = error_variance(fit, ref.correlation(), pooled.kurtosis())
    se = math.sqrt(var / e_ref**2 * (1.0 / cur.n + 1.0 / ref.n))
    return judged(check, feature, effect / se, effect, normal_interval_p(effect, se, floor),
                  cur.n, ref.n, floor=floor, alpha=alpha)
