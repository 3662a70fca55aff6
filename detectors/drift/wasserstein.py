"""Wasserstein-1 (earth mover's) distance between two numeric sketches, normalised by the baseline spread."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from detectors.drift.binned import aligned_bins, binned_grid
from detectors.drift.grid import JointCdf, joint_cdf
from detectors.drift.spread import baseline_spread
from detectors.result import TestResult, insufficient, judged
from sketches.numeric import NumericSketch

MIN_COUNT = 30
NULL_POINTS = 96


def wasserstein_distance(grid: JointCdf, linear: bool = False) -> float:
    """W1 = integral |F_ref(x) - F_cur(x)| dx on the grid.

    A left Riemann sum: exact for two exact-mode sketches (step CDFs are
    constant between grid points); otherwise within resolution * range of
    the sketches' W1. ``linear``: both CDFs linear between grid points (the
    binned CDFs of :func:`~detectors.drift.binned.binned_grid`), integrated
    exactly: on an interval of width w where the difference goes from a to b,
    w (|a| + |b|) / 2 without a sign change, else w (a^2 + b^2) / (2 (|a| + |b|)).

    Examples
    --------
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.array([0.0, 1.0])); b.update(np.array([1.0, 2.0]))
    >>> wasserstein_distance(joint_cdf(a, b))
    1.0
    >>> g = JointCdf(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0]), 0.0)
    >>> wasserstein_distance(g, linear=True)
    1.0
    """
    d = grid.ref - grid.cur
    w = np.diff(grid.x)
    if not linear:
        return float(np.sum(np.abs(d)[:-1] * w))
    a, b = d[:-1], d[1:]
    total = np.abs(a) + np.abs(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        crossing = np.where(total > 0, (a * a + b * b) / (2 * total), 0.0)
    return float(np.sum(w * np.where(a * b >= 0, total / 2, crossing)))


def digest_w1_error(sketch: NumericSketch, x: np.ndarray) -> np.ndarray:
    """Per grid interval (x_i, x_i+1), a bound on |cdf - F_n| anywhere inside it (0 while exact).

    With L, U the certain bounds of the sample CDF
    (:meth:`~sketches.numeric.NumericSketch.cdf_bounds`) and the
    estimate F monotone, inside the interval
    |F - F_n| <= max(F(x_i+1) - L(x_i), U(x_i+1) - F(x_i)); capped, as in
    :meth:`~sketches.numeric.NumericSketch.cdf_error`, by the measured
    :attr:`~sketches.numeric.NumericSketch.rank_error`.
    """
    if sketch.is_exact or sketch.rank_error == 0:
        return np.zeros(x.size - 1)
    lower, upper = sketch.cdf_bounds(x)
    f = sketch.cdf_many(x)
    return np.minimum(np.maximum(f[1:] - lower[:-1], upper[1:] - f[:-1]).clip(0.0), sketch.rank_error)


def null_moments(grid: JointCdf, n_ref: int, n_cur: int, exact: bool = False) -> tuple[float, float]:
    """Mean and variance of integral |B(F(x))| dx, B a Brownian bridge, F the pooled CDF.

    Under H0, sqrt(N_eff) W1 converges in law to that integral (del Barrio,
    Gine & Matran, "Central limit theorems for the Wasserstein distance
    between the empirical and the true distributions", 1999). With
    sigma_s = sqrt(s (1 - s)) and rho = s (1 - t) / (sigma_s sigma_t), s <= t:
    E|B(s)| = sqrt(2 / pi) sigma_s and
    Cov(|B(s)|, |B(t)|) = (2 / pi) sigma_s sigma_t (sqrt(1 - rho^2) + rho asin(rho) - 1)
    (the absolute moments of a bivariate normal). Integrated with the CDF's
    value at each interval's left end (``exact``: step CDFs) or its mid value
    (continuous sketch CDFs), the variance on at most ``NULL_POINTS`` blocks.

    Examples
    --------
    >>> a = NumericSketch(); a.update(np.linspace(0, 1, 1001))
    >>> m, v = null_moments(joint_cdf(a, a), 1001, 1001)
    >>> bool(abs(m - np.sqrt(2 / np.pi) * np.pi / 8) < 0.005)  # the uniform on [0, 1]
    True
    """
    f = grid.pooled(n_ref, n_cur)
    u = f[:-1] if exact else 0.5 * (f[:-1] + f[1:])
    w = np.diff(grid.x)
    mean = math.sqrt(2 / math.pi) * float(np.sum(w * np.sqrt(np.clip(u * (1 - u), 0.0, None))))
    if u.size > NULL_POINTS:
        # the blocks of np.array_split: the first size % NULL_POINTS hold one point more
        size, extra = divmod(u.size, NULL_POINTS)
        lengths = np.full(NULL_POINTS, size)
        lengths[:extra] += 1
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        u, w = u[starts + lengths // 2], np.add.reduceat(w, starts)
    keep = (u > 0) & (u < 1)
    u, w = u[keep], w[keep]
    sd = np.sqrt(u * (1 - u))
    # with s = min(u_i, u_j), t = max(u_i, u_j): rho = s (1 - t) / (sigma_s sigma_t)
    # = a(s) / a(t), a(u) = sqrt(u / (1 - u)) increasing, so rho = min(a_i, a_j) / max(a_i, a_j)
    a = np.sqrt(u / (1 - u))
    rho = np.minimum.outer(a, a) / np.maximum.outer(a, a)
    cov = (2 / math.pi) * np.outer(sd, sd) * (np.sqrt(1 - rho * rho) + rho * np.arcsin(rho) - 1)
    return mean, float(max(w @ cov @ w, 0.0))


def wasserstein_test(
    reference: NumericSketch,
    current: NumericSketch,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
    grid: JointCdf | None = None,
) -> TestResult:
    """Wasserstein-1 distance in units of the baseline spread, with a p-value.

    Parameters
    ----------
    reference, current : NumericSketch
    feature : str
    floor : float
        Normalised W1 tolerated under the null.
    alpha, min_count, grid
        As for :func:`~detectors.drift.ks.ks_test`.

    Returns
    -------
    TestResult
        ``statistic`` = W1 (in the feature's unit), ``effect_size`` = W1 / s
        with s from :func:`~detectors.drift.spread.baseline_spread` (0 when
        both sides are the same constant), ``error_bound`` = the sketches'
        worst-case W1 error / s: the integral of both digests' data-dependent
        CDF bounds (:func:`digest_w1_error`), 0 on exact sketches and bins.

    Notes
    -----
    W1 = integral |F_ref - F_cur| dx (Vallender, "Calculation of the
    Wasserstein distance between probability distributions on the line",
    1974). p-value: sqrt(N_eff) (W1 - error - floor * s) against a gamma law
    with the mean and variance of its asymptotic null distribution
    (:func:`null_moments`; two-moment approximation as in Satterthwaite, 1946).
    When both sides count their values in the same reference bins
    (:mod:`sketches.bins`) and are not both exact, W1 is that of the binned
    distributions (mass spread evenly in each bin, the CDFs exact at the
    edges: :func:`~detectors.drift.binned.binned_grid`), with the null
    moments on the same piecewise-linear pooled CDF, and no sketch error.

    Examples
    --------
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.zeros(2000)); b.update(np.random.default_rng(0).normal(size=2000))
    >>> r = wasserstein_test(a, b)
    >>> round(r.statistic, 1), r.status.value
    (0.8, 'drift')
    """
    n_ref, n_cur = reference.count, current.count
    if n_ref < min_count or n_cur < min_count:
        return insufficient("wasserstein", feature, n_cur, n_ref,
                            f"needs >= {min_count} finite values on each side")
    exact = reference.is_exact and current.is_exact
    counts = None if exact else aligned_bins(reference, current)
    if counts is not None:
        g = binned_grid(reference, current, *counts)
        w1, err = wasserstein_distance(g, linear=True), 0.0
    else:
        g = grid if grid is not None else joint_cdf(reference, current)
        w1 = wasserstein_distance(g)
        err = float(np.sum((digest_w1_error(reference, g.x) + digest_w1_error(current, g.x)) * np.diff(g.x)))
    spread = baseline_spread(reference, current)
    if spread == 0:
        return judged("wasserstein", feature, w1, 0.0, 1.0, n_cur, n_ref, floor=floor, alpha=alpha)
    mean, var = null_moments(g, n_ref, n_cur, exact)
    root_n = math.sqrt(n_ref * n_cur / (n_ref + n_cur))

    def p_at(excess: float) -> float:
        if excess <= 0 or var <= 0:
            return 1.0 if excess <= 0 else 0.0
        return float(special.gammaincc(mean**2 / var, root_n * excess * mean / var))

    return judged(
        "wasserstein", feature, w1, w1 / spread, p_at(w1 - err - floor * spread), n_cur, n_ref,
        p_exact=p_at(w1 - floor * spread), error_bound=err / spread, floor=floor, alpha=alpha,
    )
