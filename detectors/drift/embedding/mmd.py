"""Maximum mean discrepancy of a vector feature, with an RBF kernel on the profiles' samples."""

from __future__ import annotations

import numpy as np

from detectors.drift.embedding import too_few
from detectors.result import TestResult, judged
from sketches.vector import VectorProfile

MIN_COUNT = 30
PERMUTATIONS = 200
"""Permutations of the p-value (its resolution is 1 / 201)."""
SEED = 20_120_301
"""Seed of the permutations: the same profiles give the same p-value."""


def squared_distances(z: np.ndarray) -> np.ndarray:
    """The matrix of pairwise squared Euclidean distances of the rows of ``z``."""
    sq = np.einsum("ij,ij->i", z, z)
    return np.maximum(sq[:, None] + sq[None, :] - 2 * z @ z.T, 0.0)


def median_bandwidth(d2: np.ndarray) -> float:
    """The median heuristic: the median of the pairwise squared distances ``d2`` of the pooled
    sample, ``σ²`` of the kernel ``exp(-||a - b||² / σ²)`` (Gretton et al. 2012, sec. 8); 1
    when they are all 0.

    Examples
    --------
    >>> median_bandwidth(squared_distances(np.array([[0.0], [1.0], [3.0]])))
    4.0
    """
    iu = np.triu_indices(len(d2), 1)
    m = float(np.median(d2[iu])) if iu[0].size else 0.0
    return m if m > 0 else 1.0


def _mmd2(kernel: np.ndarray, signs: np.ndarray, n_x: int, n_y: int) -> np.ndarray:
    """Unbiased MMD² of each labelling (columns of ``signs``: +1 for x, -1 for y)."""
    kx = (signs > 0).astype(np.float64)
    ky = 1.0 - kx
    diag = np.diag(kernel)[:, None]
    kxx = (np.einsum("ib,ib->b", kx, kernel @ kx) - (kx * diag).sum(0)) / (n_x * (n_x - 1))
    kyy = (np.einsum("ib,ib->b", ky, kernel @ ky) - (ky * diag).sum(0)) / (n_y * (n_y - 1))
    kxy = np.einsum("ib,ib->b", kx, kernel @ ky) / (n_x * n_y)
    return kxx + kyy - 2 * kxy


def mmd_test(
    reference: VectorProfile,
    current: VectorProfile,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_count: int = MIN_COUNT,
    permutations: int = PERMUTATIONS,
    seed: int = SEED,
) -> TestResult:
    """Do the two samples of projected vectors come from different distributions (kernel two-sample test)?

    Parameters
    ----------
    reference, current : VectorProfile
        Of the same dimension and projection; their samples (at most 256 projected
        vectors each, uniform over their records) are compared.
    feature : str
    floor : float
        MMD² tolerated under the null (the kernel's unit: 0 to 2).
    alpha, min_count
        Level for ``drift``; sampled vectors needed on each side.
    permutations, seed
        The permutation budget and its seed.

    Returns
    -------
    TestResult
        ``statistic`` = ``effect_size`` = the unbiased MMD² estimate, ``p_value`` from
        the permutations.

    Notes
    -----
    With the Gaussian RBF kernel ``k(a, b) = exp(-||a - b||² / σ²)``, ``σ²`` the
    median heuristic on the pooled sample (:func:`median_bandwidth`), the
    unbiased estimate of Gretton et al. (2012, eq. 3) is

        MMD²_u = 1/(m(m-1)) Σ_{i≠j} k(x_i, x_j) + 1/(n(n-1)) Σ_{i≠j} k(y_i, y_j)
                 - 2/(mn) Σ_{i,j} k(x_i, y_j).

    The p-value is ``(1 + #{b: MMD²_b >= MMD²_u - floor}) / (1 + B)`` over ``B``
    random relabellings of the pooled sample (exact under the point null,
    the samples being uniform samples of their windows; with ``floor > 0``
    the statistic is shifted by the floor, a conservative Wellek-type
    interval null). The kernel matrix is computed once; all ``B``
    relabellings are one matrix product.

    References
    ----------
    Gretton, A., Borgwardt, K. M., Rasch, M. J., Schölkopf, B., Smola, A. (2012).
    A kernel two-sample test. Journal of Machine Learning Research 13, 723-773.

    Examples
    --------
    >>> rng = np.random.default_rng(3)
    >>> ref, same, moved = VectorProfile(8), VectorProfile(8), VectorProfile(8)
    >>> ref.update(rng.standard_normal((2000, 8)), [f"r{i}" for i in range(2000)])
    >>> same.update(rng.standard_normal((500, 8)), [f"s{i}" for i in range(500)])
    >>> moved.update(rng.standard_normal((500, 8)) + 0.5, [f"m{i}" for i in range(500)])
    >>> mmd_test(ref, same).status.value, mmd_test(ref, moved).status.value
    ('ok', 'drift')
    """
    x, y = reference.sample.astype(np.float64), current.sample.astype(np.float64)
    n_x, n_y = len(x), len(y)
    if (refused := too_few("mmd", feature, reference, current, min_count, n_x, n_y, "sampled vectors")):
        return refused
    d2 = squared_distances(np.concatenate([x, y]))
    kernel = np.exp(-d2 / median_bandwidth(d2))
    labels = np.r_[np.ones(n_x), -np.ones(n_y)]
    observed = float(_mmd2(kernel, labels[:, None], n_x, n_y)[0])
    rng = np.random.default_rng(seed)
    perms = np.stack([rng.permutation(labels) for _ in range(permutations)], axis=1)
    null = _mmd2(kernel, perms, n_x, n_y)
    p = (1 + int((null >= observed - floor).sum())) / (1 + permutations)
    return judged("mmd", feature, observed, observed, p, n_y, n_x, floor=floor, alpha=alpha)
