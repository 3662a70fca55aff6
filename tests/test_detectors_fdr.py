"""Online FDR procedures reproduce the onlineFDR package's results (alpha = 0.05)."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.fdr.batch import BatchBh, BatchPrds, bh_rejections, weighted_bh_rejections
from detectors.fdr.lond import Lond
from detectors.fdr.lord import LordPlusPlus
from detectors.fdr.saffron import Saffron

P1 = [2.90e-08, 0.06743, 0.01514, 0.08174, 0.00171, 3.60e-05, 0.79149, 0.27201, 0.28295,
      7.59e-08, 0.69274, 0.30443, 0.00136, 0.72342, 0.54757]
P2 = [2.90e-14, 0.00143, 0.06514, 0.00174, 0.00171, 3.61e-05, 0.79149, 0.27201, 0.28295,
      7.59e-08, 0.69274, 0.30443, 0.000487, 0.72342, 0.54757]


def run(procedure, p_values) -> tuple[set[int], list[float]]:
    rejected, levels = set(), []
    for t, p in enumerate(p_values, start=1):
        levels.append(procedure.next_level())
        if procedure.test(p):
            rejected.add(t)
    return rejected, levels


@pytest.mark.parametrize("p,lord,saffron,lond", [
    (P1, {1, 6, 10}, {1, 5, 6, 10, 13}, {1, 6, 10}),
    (P2, {1, 2, 6, 10, 13}, {1, 2, 4, 5, 6, 10, 13}, {1, 6, 10, 13}),
])
def test_online_procedures_reproduce_onlinefdr(p, lord, saffron, lond):
    assert run(LordPlusPlus(alpha=0.05, w0=0.005), p)[0] == lord
    assert run(Saffron(alpha=0.05, w0=0.025, lam=0.5), p)[0] == saffron
    assert run(Lond(alpha=0.05), p)[0] == lond


def test_lord_levels_to_the_digits_given():
    _rejected, levels = run(LordPlusPlus(alpha=0.05, w0=0.005), P1)
    assert levels[1] == pytest.approx(2.46645e-3, abs=5e-9)
    assert levels[12] == pytest.approx(9.25682e-4, abs=5e-10)


def batches(p, sizes):
    out, i = [], 0
    for n in sizes:
        out.append(p[i:i + n])
        i += n
    return out


@pytest.mark.parametrize("procedure,levels", [
    (BatchPrds, [2.18745e-2, 9.62120e-3, 7.54352e-3]),
    (BatchBh, [2.18745e-2, 9.62120e-3, 2.50129e-2]),
])
def test_batch_procedures_reproduce_onlinefdr(procedure, levels):
    proc = procedure(alpha=0.05)
    rejected = []
    for batch in batches(P1, [5, 6, 4]):
        mask = proc.test(batch)
        rejected += [p for p, r in zip(batch, mask, strict=True) if r]
    assert proc.levels == pytest.approx(levels, rel=5e-6)
    assert sorted(rejected) == sorted([2.9e-8, 1.71e-3, 3.6e-5, 7.59e-8, 1.36e-3])


def test_bh_matches_the_step_up_definition():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(size=90), rng.uniform(0, 1e-3, 10)])
    mask = bh_rejections(p, 0.1)
    ranked = np.sort(p)
    k = max((i + 1 for i in range(p.size) if ranked[i] <= 0.1 * (i + 1) / p.size), default=0)
    assert mask.sum() == k and (p[mask] <= ranked[k - 1]).all()
    assert bh_rejections([], 0.1).size == 0


def _equicorrelated_batches(rng, batches: int, n: int, rho: float, signal: np.ndarray) -> np.ndarray:
    """One-sided p-values of z = mu + sqrt(rho) u + sqrt(1 - rho) e: PRDS within a batch."""
    from scipy.stats import norm
    z = (signal + np.sqrt(rho) * rng.standard_normal((batches, 1))
         + np.sqrt(1 - rho) * rng.standard_normal((batches, n)))
    return norm.sf(z)


def test_weighted_bh_controls_fdr_under_positive_dependence_and_moves_power():
    rng = np.random.default_rng(11)
    n, level = 20, 0.2
    signal = np.zeros(n)
    signal[:4] = 3.0  # four non-nulls, light weight; the heavy weights sit on nulls
    weights = np.where(np.arange(n) < 4, 0.25, 3.0)
    p = _equicorrelated_batches(rng, 6_000, n, 0.5, signal)
    fdp = []
    for row in p:
        mask = weighted_bh_rejections(row, level, weights)
        fdp.append(mask[4:].sum() / max(mask.sum(), 1))
    fdr, se = float(np.mean(fdp)), float(np.std(fdp) / np.sqrt(len(fdp)))
    # bound: level * (sum of null weights) / n, weights rescaled to mean 1
    bound = level * weights[4:].sum() / weights.sum()
    assert fdr <= bound + 3 * se
    assert fdr > 0.5 * bound  # the weights did move the level onto the nulls
    # heavy weights on the signals instead: more of them found than with plain BH
    weak = _equicorrelated_batches(rng, 2_000, n, 0.5, signal * 0.8)
    found = lambda w: np.mean([weighted_bh_rejections(r, 0.05, w)[:4].sum() for r in weak])  # noqa: E731
    assert found(np.where(np.arange(n) < 4, 3.0, 0.25)) > 1.3 * found(None)


def test_weighted_bh_is_bh_under_equal_weights_and_rejects_bad_weights():
    p = np.random.default_rng(1).uniform(0, 0.05, 50)
    assert (weighted_bh_rejections(p, 0.5, np.full(50, 7.0)) == bh_rejections(p, 0.5)).all()
    for bad in ([1.0, 0.0], [1.0, -1.0], [1.0, np.inf], [1.0]):
        with pytest.raises(ValueError):
            weighted_bh_rejections([0.1, 0.2], 0.05, bad)


@pytest.mark.parametrize("make", [lambda: LordPlusPlus(alpha=1.5), lambda: Saffron(lam=1.0),
                                  lambda: LordPlusPlus(alpha=0.05, w0=0.1), lambda: Lond(alpha=0.0)])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()
