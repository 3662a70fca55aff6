"""Online FDR over batches: BH inside each batch (one batch = one window's tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from detectors.fdr.gamma import saffron_gamma


def bh_rejections(p_values: Sequence[float], level: float) -> np.ndarray:
    """Benjamini-Hochberg at ``level``: boolean mask of rejected p-values.

    Rejects the k smallest p-values, k the largest index with p_(k) <= k level / n
    (Benjamini & Hochberg, JRSS-B 1995). At ``level <= 0`` (a batch granted no
    budget) nothing is rejected, not even a p-value that underflowed to 0.

    Examples
    --------
    >>> bh_rejections([0.01, 0.02, 0.03, 0.5], 0.05).tolist()
    [True, True, True, False]
    >>> bh_rejections([0.0, 0.5], 0.0).tolist()
    [False, False]
    """
    p = np.asarray(p_values, dtype=np.float64)
    n = p.size
    if n == 0 or level <= 0:
        return np.zeros(n, dtype=bool)
    order = np.argsort(p, kind="stable")
    ok = p[order] <= level * np.arange(1, n + 1) / n
    k = int(np.flatnonzero(ok)[-1]) + 1 if ok.any() else 0
    out = np.zeros(n, dtype=bool)
    out[order[:k]] = True
    return out


def weighted_bh_rejections(p_values: Sequence[float], level: float,
                           weights: Sequence[float] | None = None) -> np.ndarray:
    """Weighted Benjamini-Hochberg at ``level``: BH on p_i / w_i, weights rescaled to mean 1.

    Parameters
    ----------
    p_values : sequence of float, shape (n,)
    level : float
        The batch's FDR level.
    weights : sequence of float, shape (n,), optional
        Prior weights, > 0, fixed before the data are seen (None: all 1, plain BH).
        A test of weight w is tested as if its p-value were p / w, so weights move
        the batch's level between tests without changing its total.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)

    Raises
    ------
    ValueError
        On a weight <= 0 or a length mismatch.

    Notes
    -----
    With weights summing to n, weighted BH controls the FDR at
    ``level * sum(w_i over true nulls) / n <= level`` under independence
    (Genovese, Roeder & Wasserman, "False discovery control with p-value
    weighting", Biometrika 2006) and under positive dependence (PRDS; Ramdas,
    Barber, Wainwright & Jordan, "A unified treatment of multiple testing with
    prior knowledge using the p-filter", Annals of Statistics 2019), the
    condition BatchPRDS asks of each batch.

    Examples
    --------
    >>> weighted_bh_rejections([1e-3, 0.5], 0.0015).tolist()
    [False, False]
    >>> weighted_bh_rejections([1e-3, 0.5], 0.0015, [1.9, 0.1]).tolist()
    [True, False]
    """
    if weights is None:
        return bh_rejections(p_values, level)
    p = np.asarray(p_values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != p.shape:
        raise ValueError(f"{w.size} weights for {p.size} p-values")
    if (w <= 0).any() or not np.isfinite(w).all():
        raise ValueError("weights must be finite and > 0")
    if p.size == 0:
        return np.zeros(0, dtype=bool)
    return bh_rejections(p / (w * p.size / w.sum()), level)


@dataclass
class BatchPrds:
    """BatchPRDS (onlineFDR ``BatchPRDS``): online FDR control over batches with
    BH inside each, valid under positive dependence within a batch.

    Notes
    -----
    alpha_1 = alpha gamma_1; alpha_{t+1} = alpha gamma_{t+1} (n_{t+1} + R_{1:t}) / n_{t+1},
    with n_t the batch size and R_{1:t} the rejections so far (Zrnic, Jiang,
    Ramdas & Jordan, "The power of batching in multiple hypothesis testing",
    AISTATS 2020).

    Examples
    --------
    >>> b = BatchPrds()
    >>> b.test([2.9e-8, 0.06743, 0.01514, 0.08174, 0.00171]).tolist(), round(b.levels[0], 7)
    ([True, False, False, False, True], 0.0218745)
    """

    alpha: float = 0.05
    batches: int = 0
    rejections: int = 0
    levels: list[float] = field(default_factory=list)

    def level(self, n: int) -> float:
        """The BH level of the next batch of ``n`` tests."""
        g = saffron_gamma(self.batches + 1)
        return self.alpha * g * (n + self.rejections) / n if n else 0.0

    def test(self, p_values: Sequence[float]) -> np.ndarray:
        """Test the next batch; boolean mask of rejections."""
        level = self.level(len(p_values))
        rejected = bh_rejections(p_values, level)
        self.batches += 1
        self.rejections += int(rejected.sum())
        self.levels.append(level)
        return rejected


@dataclass
class BatchBh:
    """BatchBH (onlineFDR ``BatchBH``): online FDR control over batches with BH
    inside each, under independence; reuses the wealth that past batches did
    not spend.

    Notes
    -----
    alpha_{t+1} = (alpha sum_{s <= t+1} gamma_s - sum_{s <= t} alpha_s R+_s / (R+_s + sum_{r != s} R_r))
    (n_{t+1} + R_{1:t}) / n_{t+1}, with R+_s the most rejections batch s would
    have had with one of its p-values set to 0 (Zrnic et al., AISTATS 2020).

    Examples
    --------
    >>> b = BatchBh()
    >>> b.test([2.9e-8, 0.06743, 0.01514, 0.08174, 0.00171]).tolist()
    [True, False, False, False, True]
    """

    alpha: float = 0.05
    levels: list[float] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)
    augmented: list[int] = field(default_factory=list)

    def level(self, n: int) -> float:
        """The BH level of the next batch of ``n`` tests."""
        t = len(self.levels)
        if t == 0:
            return self.alpha * saffron_gamma(1)
        total = sum(self.rejected)
        spent = sum(
            a * rp / (rp + total - r)
            for a, r, rp in zip(self.levels, self.rejected, self.augmented, strict=True)
            if rp + total - r > 0
        )
        budget = self.alpha * sum(saffron_gamma(s) for s in range(1, t + 2))
        return (budget - spent) * (n + total) / n if n else 0.0

    def test(self, p_values: Sequence[float]) -> np.ndarray:
        """Test the next batch; boolean mask of rejections."""
        p = np.asarray(p_values, dtype=np.float64)
        level = self.level(p.size)
        rejected = bh_rejections(p, level)
        augmented = 0
        for j in range(p.size):
            hallucinated = p.copy()
            hallucinated[j] = 0.0
            augmented = max(augmented, int(bh_rejections(hallucinated, level).sum()))
        self.levels.append(level)
        self.rejected.append(int(rejected.sum()))
        self.augmented.append(augmented)
        return rejected
