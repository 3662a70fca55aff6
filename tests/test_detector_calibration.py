"""Calibration under H0, small and fast (benchmarks/calibration.py covers n up to 1e6).

Two independent samples of one distribution: a test at alpha = 0.05 must alarm
in at most 7 % of pairs, and in 3-7 % where the sketch error is nil (exact
counts). With R pairs the false-positive rate has standard error
sqrt(0.05 * 0.95 / R) (0.008 at R = 800), so the band is ~2.5 standard errors
wide on each side; the seeds are fixed.
"""

from __future__ import annotations

import numpy as np
import pytest

from detectors.drift.chi2 import chi2_test
from detectors.drift.grid import joint_cdf
from detectors.drift.js import js_test
from detectors.drift.ks import ks_test
from detectors.drift.mean_shift import mean_shift_test
from detectors.drift.psi import psi
from detectors.drift.variance_shift import variance_shift_test
from detectors.drift.wasserstein import wasserstein_test
from detectors.result import Status
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch

GRID_TESTS = (psi, ks_test, js_test, wasserstein_test, variance_shift_test)
ALPHA = 0.05


def sketch(x: np.ndarray) -> NumericSketch:
    s = NumericSketch()
    s.update(x)
    return s


def numeric_fpr(draw, n: int, reps: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    alarms: dict[str, int] = {}
    for _ in range(reps):
        a, b = sketch(draw(rng, n)), sketch(draw(rng, n))
        g = joint_cdf(a, b)
        results = [f(a, b, grid=g) for f in GRID_TESTS] + [mean_shift_test(a, b)]
        for r in results:
            alarms[r.check] = alarms.get(r.check, 0) + (r.p_value < ALPHA)
    return {k: v / reps for k, v in alarms.items()}


@pytest.mark.xfail(strict=True, reason=(
    "known defect: at n = 300 the digest is lossless (rank error 0) and the chi-square "
    "approximation of PSI and JS p-values is liberal there (FPR 0.077 / 0.073 at alpha 0.05)"))
def test_continuous_tests_on_t_digests_never_inflate_false_alarms():
    fpr = numeric_fpr(lambda rng, n: rng.normal(size=n), 300, 600, seed=11)
    assert max(fpr.values()) <= 0.07, fpr
    assert fpr["mean_shift"] >= 0.03, fpr  # exact moments: no sketch error


def test_discrete_tests_on_exact_counts_are_calibrated():
    fpr = numeric_fpr(lambda rng, n: rng.poisson(4.0, n).astype(np.float64), 1000, 800, seed=12)
    for check in ("psi", "js", "mean_shift", "variance_shift", "wasserstein"):
        assert 0.03 <= fpr[check] <= 0.07, (check, fpr)
    assert fpr["ks"] <= 0.07, fpr  # KS is conservative on ties (discrete data)


def test_categorical_tests_on_exact_counts_are_calibrated():
    rng = np.random.default_rng(13)
    p = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.03, 0.01])
    alarms = {"chi2": 0, "psi": 0, "js": 0}
    reps = 800
    for _ in range(reps):
        a, b = CategoricalSketch(), CategoricalSketch()
        a.update_counts({str(i): int(c) for i, c in enumerate(rng.multinomial(500, p)) if c})
        b.update_counts({str(i): int(c) for i, c in enumerate(rng.multinomial(500, p)) if c})
        for f in (chi2_test, psi, js_test):
            r = f(a, b)
            alarms[r.check] += r.p_value < ALPHA
    fpr = {k: v / reps for k, v in alarms.items()}
    assert all(0.03 <= v <= 0.07 for v in fpr.values()), fpr


@pytest.mark.parametrize("seed", [1, 2])
def test_sketch_error_makes_large_windows_conservative_not_alarming(seed):
    # 50k vs 561k draws of N(0, 1): KS's critical distance (~0.006) is below
    # the t-digests' rank error (2 x 0.005); the tests must not alarm.
    rng = np.random.default_rng(seed)
    ref, cur = sketch(rng.normal(size=50_000)), sketch(rng.normal(size=561_000))
    g = joint_cdf(ref, cur)
    for f in GRID_TESTS:
        r = f(ref, cur, grid=g)
        assert r.status != Status.DRIFT, r
    assert ks_test(ref, cur, grid=g).error_bound == pytest.approx(ref.rank_error + cur.rank_error)
