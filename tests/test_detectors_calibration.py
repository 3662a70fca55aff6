"""Calibration under H0, small and fast (benchmarks/calibration.py covers n up to 1e6).

Two independent samples of one distribution: a test at alpha = 0.05 must alarm
in at most 7 % of pairs, and in 3-7 % where the sketch error is nil (exact
counts). With R pairs the false-positive rate has standard error
sqrt(0.05 * 0.95 / R) (0.008 at R = 800, 0.0056 at R = 1,500), so the band is
2.5-3.5 standard errors wide on each side; the seeds are fixed.

The small-sample null law of PSI and JS (detectors/stats/divergence_null.py)
is checked on its own against 100,000-200,000 simulated statistics per case,
where the level's standard error is < 0.001 and the plain chi-square's excess
(up to 0.085 at alpha = 0.05) is far outside the band.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from detectors.catalog import GRID_CHECKS, NUMERIC_CHECKS
from detectors.drift.chi2 import chi2_test
from detectors.drift.grid import joint_cdf
from detectors.drift.js import js_terms, js_test
from detectors.drift.ks import ks_test
from detectors.drift.mean_shift import mean_shift_test
from detectors.drift.psi import psi, psi_terms
from detectors.drift.wasserstein import wasserstein_test
from detectors.result import Status
from detectors.stats.abs_bridge import abs_bridge_law
from detectors.stats.divergence_null import JS_QUARTIC, PSI_QUARTIC, _dirichlet_var_q, divergence_null
from detectors.stats.interval import chi2_interval_p
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch

#: The catalog's checks that read the shared CDF grid (every one registered is calibrated).
GRID_TESTS = tuple(NUMERIC_CHECKS[c] for c in sorted(GRID_CHECKS))
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


def test_continuous_tests_on_t_digests_never_inflate_false_alarms():
    # n = 300: the digests are lossless (rank error 0), PSI and JS refer to their
    # small-sample null law (with plain chi2(9) these two were at 0.054 / 0.051 over
    # 10,000 pairs, and this seed's first 600 pairs gave 0.077 / 0.073)
    fpr = numeric_fpr(lambda rng, n: rng.normal(size=n), 300, 1500, seed=11)
    assert max(fpr.values()) <= 0.07, fpr
    assert fpr["mean_shift"] >= 0.03, fpr  # exact moments: no sketch error
    assert fpr["psi"] >= 0.03 and fpr["js"] >= 0.03, fpr  # no sketch error: not conservative either


def test_continuous_tests_at_one_hundred_values_are_calibrated():
    # 10 values per quantile bin: plain chi2(9) gave PSI 0.085 and JS 0.067 here (12,000 pairs)
    fpr = numeric_fpr(lambda rng, n: rng.normal(size=n), 100, 800, seed=14)
    for check in ("psi", "js", "mean_shift"):
        assert 0.03 <= fpr[check] <= 0.07, (check, fpr)
    assert max(fpr.values()) <= 0.07, fpr


def test_small_window_against_a_large_reference_never_inflates_false_alarms():
    # the fleet's common case: 250 current values against a 5,000-value reference
    # (a lossy t-digest: PSI/JS/KS/W1 are conservative by its rank error)
    rng = np.random.default_rng(15)
    alarms: dict[str, int] = {}
    reps = 600
    for _ in range(reps):
        a, b = sketch(rng.normal(size=5000)), sketch(rng.normal(size=250))
        g = joint_cdf(a, b)
        for r in [f(a, b, grid=g) for f in GRID_TESTS] + [mean_shift_test(a, b)]:
            alarms[r.check] = alarms.get(r.check, 0) + (r.p_value < ALPHA)
    fpr = {k: v / reps for k, v in alarms.items()}
    assert max(fpr.values()) <= 0.07, fpr


def test_discrete_tests_on_exact_counts_are_calibrated():
    fpr = numeric_fpr(lambda rng, n: rng.poisson(4.0, n).astype(np.float64), 1000, 800, seed=12)
    for check in ("psi", "js", "mean_shift", "variance_shift", "wasserstein"):
        assert 0.03 <= fpr[check] <= 0.07, (check, fpr)
    assert fpr["ks"] <= 0.07, fpr  # KS is conservative on ties (discrete data)


@pytest.mark.parametrize(("n_ref", "n_cur", "seed", "checks"), [
    (500, 500, 13, (chi2_test, psi, js_test)),
    # at N = 200 chi2 takes its exact conditional test (exact by construction, ~0.1 s a call)
    (100, 100, 16, (psi, js_test)),
    (5000, 250, 17, (chi2_test, psi, js_test)),
])
def test_categorical_tests_on_exact_counts_are_calibrated(n_ref, n_cur, seed, checks):
    rng = np.random.default_rng(seed)
    p = np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.03, 0.01])
    alarms = {f.__name__: 0 for f in checks}
    reps = 1200
    for _ in range(reps):
        a, b = CategoricalSketch(), CategoricalSketch()
        a.update_counts({str(i): int(c) for i, c in enumerate(rng.multinomial(n_ref, p)) if c})
        b.update_counts({str(i): int(c) for i, c in enumerate(rng.multinomial(n_cur, p)) if c})
        for f in checks:
            alarms[f.__name__] += f(a, b).p_value < ALPHA
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
    assert 0 < ks_test(ref, cur, grid=g).error_bound <= ref.rank_error + cur.rank_error


# -- the small-sample null law of PSI and JS, against simulated statistics ----------------

def simulated_statistics(quantile_bins: bool, n_ref: int, n_cur: int, reps: int, seed: int):
    """N_eff * PSI and 8 N_eff * JSD of ``reps`` H0 pairs over 10 equiprobable bins.

    Two multinomial samples, or (``quantile_bins``) the reference's masses fixed
    at 1/10 and the current's counts Dirichlet-multinomial(n_cur; n_ref / 10 each),
    the law of counts between reference quantiles.
    """
    rng = np.random.default_rng(seed)
    p = np.full(10, 0.1)
    if quantile_bins:
        shares = rng.dirichlet(np.full(10, n_ref / 10), size=reps)
        cur = np.array([rng.multinomial(n_cur, q) for q in shares]) / n_cur
        ref = np.broadcast_to(p, cur.shape)
    else:
        cur = rng.multinomial(n_cur, p, size=reps) / n_cur
        ref = rng.multinomial(n_ref, p, size=reps) / n_ref
    n_eff = n_ref * n_cur / (n_ref + n_cur)
    return (n_eff * psi_terms(ref, cur, n_ref, n_cur).sum(axis=1),
            n_eff * js_terms(ref, cur).sum(axis=1))


@pytest.mark.parametrize(("quantile_bins", "n_ref", "n_cur", "plain_psi_at_005"), [
    (True, 100, 100, 0.07), (True, 5000, 250, 0.055), (False, 100, 100, 0.07), (False, 5000, 250, 0.055),
])
def test_small_sample_law_matches_simulated_moments_and_level(quantile_bins, n_ref, n_cur,
                                                               plain_psi_at_005):
    # 100,000 pairs: standard error of a level near 0.05 is 0.0007, near 0.01 0.0003;
    # the moments' relative standard errors ~0.1 % (mean) and ~0.5 % (variance)
    psi_t, js_t = simulated_statistics(quantile_bins, n_ref, n_cur, 100_000, seed=21)
    p = np.full(10, 0.1)
    for t, quartic, terms in ((psi_t, PSI_QUARTIC, psi_terms), (js_t, JS_QUARTIC, js_terms)):
        law = divergence_null(p, n_ref, n_cur, quartic, reference_quantiles=quantile_bins, terms=terms)
        assert law.mean == pytest.approx(t.mean(), rel=0.01)
        assert law.variance == pytest.approx(t.var(), rel=0.06)
        level = {a: np.mean(stats.chi2.sf(t / law.scale, law.df) < a) for a in (0.05, 0.01)}
        assert 0.046 <= level[0.05] <= 0.0565, level
        assert 0.0085 <= level[0.01] <= 0.0125, level
    assert np.mean(stats.chi2.sf(psi_t, 9) < 0.05) > plain_psi_at_005  # what the plain chi2(9) gives


def test_js_mean_reduces_to_williams_correction_for_equal_samples():
    # 8 N_eff JSD is the G-statistic of the 2 x k table when n_ref = n_cur: E = (k - 1) q_W,
    # Williams (1976): q_W = 1 + (t - 1) / (4 n (k - 1)), t = sum 1 / p
    for p in (np.full(4, 0.25), np.array([0.5, 0.3, 0.15, 0.05])):
        n = 400
        law = divergence_null(p, n, n, JS_QUARTIC)
        t = np.sum(1 / p)
        assert law.mean == pytest.approx((p.size - 1) + (t - 1) / (4 * n), rel=1e-12)


def test_dirichlet_multinomial_variance_of_the_quadratic_matches_enumeration():
    m, a, p = 6, 7.0, np.array([0.5, 0.3, 0.2])
    law = stats.dirichlet_multinomial(a * p, m)
    outcomes = [np.array([i, j, m - i - j]) for i in range(m + 1) for j in range(m + 1 - i)]
    weights = np.array([law.pmf(x) for x in outcomes])
    q = np.array([np.sum((x - m * p) ** 2 / p) for x in outcomes])
    exact = weights @ q**2 - (weights @ q) ** 2
    assert _dirichlet_var_q(float(m), a, 3, float(np.sum(1 / p))) == pytest.approx(exact, rel=1e-10)


def test_interval_null_p_value_with_the_scaled_law():
    law = divergence_null(np.full(10, 0.1), 300, 300, PSI_QUARTIC)
    stat = 25.0
    point = chi2_interval_p(stat, law.df, 0.0, law.scale)
    assert point == pytest.approx(stats.chi2.sf(stat / law.scale, law.df), rel=1e-12)
    assert point > stats.chi2.sf(stat, 9)  # the small-sample law is wider than chi2(9)
    # against "PSI <= floor": larger with the floor, and ~1 when the statistic is at the floor
    with_floor = chi2_interval_p(stat, law.df, 150 * 0.05, law.scale)
    assert point < with_floor < 1.0
    assert chi2_interval_p(150 * 0.05, law.df, 150 * 0.2, law.scale) > 0.999
    with pytest.raises(ValueError):
        chi2_interval_p(stat, 0.0)
    with pytest.raises(ValueError):
        chi2_interval_p(stat, 9, scale=0.0)


def bridge_sums(u: np.ndarray, w: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """``reps`` draws of S = sum_i w_i |B(u_i)|, B a Brownian bridge."""
    rng = np.random.default_rng(seed)
    cov = np.minimum.outer(u, u) - np.outer(u, u)
    return np.abs(rng.multivariate_normal(np.zeros(u.size), cov, size=reps, method="cholesky")) @ w


def test_abs_bridge_third_moment_matches_simulation():
    # 12 irregular points and weights: the Markov reduction of E|X_a X_b X_c| against 1,000,000
    # draws (standard error of the skewness ~0.0025)
    rng = np.random.default_rng(30)
    u, w = np.sort(rng.uniform(0.02, 0.98, 12)), rng.uniform(0.1, 1.0, 12)
    s = bridge_sums(u, w, 1_000_000, seed=31)
    law = abs_bridge_law(u, w)
    assert law.mean == pytest.approx(s.mean(), rel=0.002)
    assert law.variance == pytest.approx(s.var(), rel=0.01)
    assert law.skewness == pytest.approx(stats.skew(s), abs=0.015)


@pytest.mark.parametrize("dist", [stats.norm(), stats.expon(), stats.t(4)])
def test_wasserstein_null_law_holds_its_level_in_the_tail(dist):
    # S = integral |B(F(x))| dx on 200 quantile points of F, 400,000 draws: the Pearson type III
    # law with three moments holds alpha = 0.05 and 0.01 within 10 % and is not liberal at 1e-3;
    # the two-moment gamma law it replaces gives 1.15 x, 1.55-1.65 x and 2.3-2.6 x here
    k = 200
    u = (np.arange(k) + 0.5) / k
    w = 1.0 / dist.pdf(dist.ppf(u)) / k
    s = bridge_sums(u, w, 400_000, seed=32)
    law = abs_bridge_law(u, w)
    p = np.array([law.sf(x) for x in np.quantile(s, [0.95, 0.99, 0.999])])
    assert p == pytest.approx([0.05, 0.01, 0.001], rel=0.1, abs=2e-4) or np.all(p >= [0.045, 0.009, 0.001]), p
    gamma = stats.gamma(law.mean**2 / law.variance, scale=law.variance / law.mean)
    assert np.mean(s > gamma.isf(0.01)) > 0.014  # what the two-moment law gives


def test_wasserstein_on_raw_values_is_calibrated_at_small_n():
    # 100 values per side (raw-data test): 0.0545 over 20,000 pairs (0.058 with the two-moment
    # gamma law); standard error over 3,000 pairs 0.004
    rng = np.random.default_rng(33)
    reps = 3000
    hits = sum(wasserstein_test(sketch(rng.normal(size=100)), sketch(rng.normal(size=100))).p_value < ALPHA
               for _ in range(reps))
    assert 0.035 <= hits / reps <= 0.065, hits / reps
