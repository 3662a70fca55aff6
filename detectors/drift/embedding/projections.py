"""Projection drift of a vector feature: the share of projections whose distribution moved."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from detectors.drift.embedding import too_few, with_detail
from detectors.result import TestResult, judged
from detectors.stats.interval import chi2_interval_p
from sketches.vector import VectorProfile

MIN_COUNT = 30
MIN_EXPECTED = 5.0
"""Expected count of the smaller side a merged bin needs (Cochran's rule for the chi-square law)."""


def merged_bins(ref: np.ndarray, cur: np.ndarray, min_expected: float = MIN_EXPECTED
                ) -> tuple[np.ndarray, np.ndarray]:
    """Adjacent bins merged, left to right, until each holds ``min_expected`` records of the
    smaller side under the pooled distribution (the last group joins its neighbour).

    The grouping reads only the pooled counts, which are the same under any relabelling of
    the records between the sides: it keeps the test's null law.

    Examples
    --------
    >>> a, b = merged_bins(np.array([0, 90, 5, 5, 0, 100]), np.array([1, 9, 1, 0, 1, 8]))
    >>> a.tolist(), b.tolist()
    ([90, 110], [10, 10])
    """
    pooled = ref + cur
    small = min(ref.sum(), cur.sum())
    share = pooled / max(pooled.sum(), 1)
    groups, acc, start = [], 0.0, 0
    for i, s in enumerate(share):
        acc += s * small
        if acc >= min_expected:
            groups.append((start, i + 1))
            start, acc = i + 1, 0.0
    if start < len(share):
        if groups:
            groups[-1] = (groups[-1][0], len(share))
        else:
            groups.append((start, len(share)))
    a = np.array([ref[s:e].sum() for s, e in groups])
    b = np.array([cur[s:e].sum() for s, e in groups])
    return a, b


def _projection_p(ref: np.ndarray, cur: np.ndarray, floor: float) -> tuple[float, float]:
    """Pearson chi-square homogeneity p-value of one projection's two histograms against
    "chi-square distance <= floor", with that distance."""
    a, b = merged_bins(ref, cur)
    if a.size < 2:
        return 1.0, 0.0
    n_a, n_b = a.sum(), b.sum()
    pooled = (a + b) / (n_a + n_b)
    pa, pb = a / n_a, b / n_b
    distance = float(((pb - pa) ** 2 / pooled).sum())  # Pearson's chi-square distance of the shares
    n_eff = n_a * n_b / (n_a + n_b)
    return chi2_interval_p(n_eff * distance, a.size - 1, n_eff * floor), distance


def cauchy_combination(p: np.ndarray) -> float:
    """The Cauchy combination of p-values: ``T = mean(tan((1/2 - p_j) π))``, ``p = 1/2 - arctan(T) / π``.

    Its tail is that of a standard Cauchy variable whatever the dependence between the
    p-values, asymptotically for small p (Liu & Xie 2020), which makes it the combined
    p-value of correlated tests such as the projections of one vector.

    Examples
    --------
    >>> round(cauchy_combination(np.array([0.05, 0.05])), 6)
    0.05
    >>> round(cauchy_combination(np.array([1e-8, 0.9])), 8)
    2e-08
    """
    if (p >= 1.0).all():
        return 1.0
    p = np.clip(p, 1e-300, 1.0 - 1e-16)
    t = float(np.mean(np.tan((0.5 - p) * np.pi)))
    return float(min(max(0.5 - np.arctan(t) / np.pi, 0.0), 1.0)) if t < 1e15 else float(1.0 / (np.pi * t))


def projection_drift_test(
    reference: VectorProfile,
    current: VectorProfile,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Did the distribution of the directions move along any of the projections?

    Parameters
    ----------
    reference, current : VectorProfile
        Of the same dimension and projection.
    feature : str
    floor : float
        Pearson chi-square distance between a projection's two histograms tolerated
        under the null (the unit of PSI for small changes).
    alpha, min_count
        Level for ``drift``; vectors needed on each side.

    Returns
    -------
    TestResult
        ``statistic`` and ``effect_size`` = the share of the ``k`` projections whose own
        p-value is below ``alpha``; ``p_value`` = the Cauchy combination of the ``k``
        per-projection p-values; ``error_bound`` 0 (exact bin counts).

    Notes
    -----
    Each projection ``j`` of the directions ``u = P^T x / ||x||`` is counted
    in 64 fixed bins (:mod:`sketches.vector`). Its bins are merged until each
    holds ``MIN_EXPECTED`` records of the smaller side (:func:`merged_bins`),
    and Pearson's chi-square ``X² = N_eff Σ (q_i - p_i)² / s_i`` (``p``, ``q``
    the shares of the reference and window, ``s`` the pooled share,
    ``N_eff = n_r n_c / (n_r + n_c)``) is tested against its noncentral law at
    the floor (:func:`~detectors.stats.interval.chi2_interval_p`; Pearson 1900,
    Mitra 1958). The ``k`` p-values are dependent (the projections of one
    vector); their Cauchy combination (:func:`cauchy_combination`) is valid
    under any dependence. ``drift`` also needs one projection significant on
    its own (a share of at least ``1/k``, which is above any floor below
    ``1/32``).

    References
    ----------
    Liu, Y., Xie, J. (2020). Cauchy combination test: a powerful test with
    analytic p-value calculation under arbitrary dependency structures. JASA 115(529).

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> ref, same, moved = VectorProfile(8), VectorProfile(8), VectorProfile(8)
    >>> ref.update(rng.standard_normal((4000, 8)), [f"r{i}" for i in range(4000)])
    >>> same.update(rng.standard_normal((800, 8)), [f"s{i}" for i in range(800)])
    >>> x = rng.standard_normal((800, 8)); x[:, 0] *= 2
    >>> moved.update(x, [f"m{i}" for i in range(800)])
    >>> projection_drift_test(ref, same).status.value, projection_drift_test(ref, moved).status.value
    ('ok', 'drift')
    """
    if (refused := too_few("projection_drift", feature, reference, current, min_count)) is not None:
        return refused
    n_r, n_c = reference.count, current.count
    ps, distances = zip(*(_projection_p(reference.bins[j], current.bins[j], floor)
                          for j in range(reference.k)), strict=True)
    p = np.asarray(ps)
    share = float((p < alpha).mean())
    result = judged("projection_drift", feature, share, share, cauchy_combination(p), n_c, n_r,
                    floor=min(floor, 1.0 / reference.k), alpha=alpha)
    worst = int(np.argmin(p))
    detail = (f"{int((p < alpha).sum())} of {reference.k} projections moved; largest chi-square distance "
              f"{max(distances):.4g} (projection {worst})")
    return replace(with_detail(result, detail), floor=floor)
