"""Centroid shift of a vector feature: Hotelling's two-sample T² in the projection subspace."""

from __future__ import annotations

import numpy as np
from scipy import stats

from detectors.drift.embedding import too_few, with_detail
from detectors.result import TestResult, insufficient, judged
from sketches.vector import VectorProfile

MIN_COUNT = 30
#: Eigenvalues of the pooled covariance below this share of the largest count as zero (rank).
RANK_TOLERANCE = 1e-9


def centroid_distances(reference: VectorProfile, current: VectorProfile) -> tuple[float, float]:
    """Euclidean and cosine distance of the two mean vectors (in full, not projected).

    Returns
    -------
    euclidean : float
        ``||m_cur - m_ref||``, in the vectors' unit.
    cosine : float
        ``1 - m_cur . m_ref / (||m_cur|| ||m_ref||)``, in ``[0, 2]``; 0 when a mean is 0.

    Examples
    --------
    >>> a, b = VectorProfile(2), VectorProfile(2)
    >>> a.update(np.array([[1.0, 0.0]]), ["x"]); b.update(np.array([[0.0, 2.0]]), ["y"])
    >>> tuple(round(v, 6) for v in centroid_distances(a, b))
    (2.236068, 1.0)
    """
    m_ref, m_cur = reference.mean, current.mean
    euclidean = float(np.linalg.norm(m_cur - m_ref))
    norms = float(np.linalg.norm(m_ref) * np.linalg.norm(m_cur))
    cosine = 1.0 - float(m_ref @ m_cur) / norms if norms > 0 else 0.0
    return euclidean, cosine


def centroid_shift_test(
    reference: VectorProfile,
    current: VectorProfile,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
) -> TestResult:
    """Has the mean vector moved by more than ``floor`` pooled standard deviations (Mahalanobis)?

    Parameters
    ----------
    reference, current : VectorProfile
        Of the same dimension and projection.
    feature : str
    floor : float
        Mahalanobis distance of the projected means tolerated under the null.
    alpha : float
        Level for ``drift``.
    min_count : int
        Vectors needed on each side (and more than the projection's rank plus one in all).

    Returns
    -------
    TestResult
        ``statistic`` = T², ``effect_size`` = D (Mahalanobis distance of the
        projected means in the pooled covariance), ``error_bound`` 0 (the
        moments are exact); the reason gives the Euclidean and cosine distance
        of the full mean vectors (:func:`centroid_distances`).

    Raises
    ------
    ValueError
        If the profiles differ in dimension or projection.

    Notes
    -----
    With ``d = z_cur - z_ref`` the difference of the projected means, ``S``
    the pooled covariance ``((n_r - 1) S_r + (n_c - 1) S_c) / (N - 2)``
    (``N = n_r + n_c``) and ``r`` its rank (eigenvalues above
    ``RANK_TOLERANCE`` of the largest; ``S^+`` its pseudo-inverse on them),

        D² = d' S^+ d,    T² = n_r n_c / N · D²,
        F = (N - r - 1) / (r (N - 2)) · T²  ~  F(r, N - r - 1)

    under H0 for Gaussian vectors (Hotelling 1931), asymptotically for any
    finite-variance vectors. The interval null ``D <= floor`` is tested at its
    boundary, where ``F`` is noncentral F with noncentrality
    ``λ = n_r n_c / N · floor²``: ``p = P(F(r, N - r - 1, λ) >= F_obs)``.
    The projection (:mod:`sketches.vector`) keeps the test's size; it loses
    only the part of a shift orthogonal to the 32 projected directions
    (a random subspace keeps ``k / d`` of a shift's squared length in
    expectation: Johnson & Lindenstrauss 1984).

    References
    ----------
    Hotelling, H. (1931). The generalization of Student's ratio. Annals of
    Mathematical Statistics 2(3), 360-378.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ref, same, moved = VectorProfile(64), VectorProfile(64), VectorProfile(64)
    >>> ref.update(rng.standard_normal((5000, 64)), [f"r{i}" for i in range(5000)])
    >>> same.update(rng.standard_normal((500, 64)), [f"s{i}" for i in range(500)])
    >>> moved.update(rng.standard_normal((500, 64)) + 0.1, [f"m{i}" for i in range(500)])
    >>> centroid_shift_test(ref, same).status.value, centroid_shift_test(ref, moved).status.value
    ('ok', 'drift')
    """
    if (refused := too_few("centroid_shift", feature, reference, current, min_count)) is not None:
        return refused
    n_r, n_c = reference.count, current.count
    n = n_r + n_c
    pooled = ((n_r - 1) * reference.projected_covariance()
              + (n_c - 1) * current.projected_covariance()) / (n - 2)
    values, vectors = np.linalg.eigh(pooled)
    keep = values > RANK_TOLERANCE * max(values.max(), 0.0)
    r = int(keep.sum())
    d = current.projected_mean - reference.projected_mean
    euclidean, cosine = centroid_distances(reference, current)
    if r == 0:  # one vector repeated on each side: a certain change if they differ (as mean_shift)
        moved = euclidean > 0
        effect = 1.0 / np.sqrt(n_c / n * (1 - n_c / n)) if moved else 0.0
        return judged("centroid_shift", feature, 0.0, float(effect), 0.0 if moved else 1.0, n_c, n_r,
                      floor=floor, alpha=alpha)
    if n - r - 1 < 1:
        return insufficient("centroid_shift", feature, n_c, n_r,
                            f"needs more vectors than the covariance's rank ({r}) + 1")
    coords = vectors[:, keep].T @ d
    d2 = float(coords @ (coords / values[keep]))
    t2 = n_r * n_c / n * d2
    f = (n - r - 1) / (r * (n - 2)) * t2
    lam = n_r * n_c / n * floor * floor
    p = float(stats.f.sf(f, r, n - r - 1) if lam <= 0 else stats.ncf.sf(f, r, n - r - 1, lam))
    result = judged("centroid_shift", feature, t2, float(np.sqrt(d2)), p, n_c, n_r, floor=floor, alpha=alpha)
    return with_detail(result, f"mean vectors: euclidean distance {euclidean:.4g}, cosine distance "
                               f"{cosine:.4g}; rank {r}")
