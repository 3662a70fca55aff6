"""The multivariate checks against numpy/scipy on raw rows, their edge cases, and their place in
the suite, the policy and grouping."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from detectors.catalog import MULTIVARIATE_CHECKS
from detectors.multivariate import MULTIVARIATE_FEATURE
from detectors.multivariate.correlation import correlation_test
from detectors.multivariate.reconstruction import fit_pca, mean_squared_error, reconstruction_error_test
from detectors.policy.grouping import group_key, inhibited
from detectors.result import Status
from detectors.suite import alerting_checks, evaluate_window
from sdk.columns import RecordColumns
from sketches.comoments import CoMoments
from sketches.profile import WindowProfile

COV3 = np.array([[1.0, 0.7, 0.3], [0.7, 1.0, 0.5], [0.3, 0.5, 2.0]])


def rows(rng, n, cov=COV3, mean=None):
    return rng.multivariate_normal(np.zeros(len(cov)) if mean is None else mean, cov, size=n)


def block(x, names="abc"):
    c = CoMoments()
    c.update({k: x[:, j] for j, k in enumerate(names)}, {}, len(x))
    return c


def test_reconstruction_error_from_moments_equals_the_error_of_raw_rows():
    """sklearn-style PCA on raw rows (standardise by the reference, project on the kept axes,
    reconstruct): the mean squared error of the window's rows equals the moment formula to
    float precision (it is an identity, not an approximation)."""
    rng = np.random.default_rng(1)
    ref_x, cur_x = rows(rng, 4_000), rows(rng, 700, mean=[0.3, -0.2, 1.0]) * [1.0, 1.5, 0.5]
    fit = fit_pca(block(ref_x))
    mu, sd = ref_x.mean(0), ref_x.std(0)
    evals, evecs = np.linalg.eigh(np.corrcoef(ref_x.T))
    order = np.argsort(evals)[::-1]
    share = np.cumsum(evals[order]) / evals.sum()
    k = int(np.argmax(share >= 0.65)) + 1
    p = evecs[:, order[:k]]
    z = (cur_x - mu) / sd
    err = ((z - z @ p @ p.T) ** 2).sum(axis=1)
    assert fit.components.shape[1] == k
    assert mean_squared_error(fit, block(cur_x)) == pytest.approx(err.mean(), rel=1e-10)
    z_ref = (ref_x - mu) / sd
    in_sample = ((z_ref - z_ref @ p @ p.T) ** 2).sum(axis=1).mean()
    assert fit.discarded.sum() == pytest.approx(in_sample, rel=1e-10)


def test_correlation_test_uses_fisher_z_and_names_the_pair():
    rng = np.random.default_rng(2)
    ref_x = rows(rng, 3_000)
    cur_x = ref_x[:800].copy()
    cur_x[:, 2] = rng.permutation(cur_x[:, 2])  # c decorrelated from a and b
    r = correlation_test(block(ref_x), block(cur_x))
    r_ref = stats.pearsonr(ref_x[:, 1], ref_x[:, 2]).statistic
    r_cur = stats.pearsonr(cur_x[:, 1], cur_x[:, 2]).statistic
    assert r.effect_size == pytest.approx(np.arctanh(r_cur) - np.arctanh(r_ref), rel=1e-9)
    se = np.sqrt(1 / 797 + 1 / 2_997)
    assert r.p_value == pytest.approx(min(1.0, 3 * 2 * stats.norm.sf(abs(r.effect_size) / se)), rel=1e-6)
    assert "corr(b, c)" in r.reason and r.status is Status.DRIFT


def test_both_tests_stay_quiet_on_the_same_distribution_and_insist_on_data():
    rng = np.random.default_rng(3)
    ref = block(rows(rng, 5_000))
    same = block(rows(rng, 1_000))
    for fn in MULTIVARIATE_CHECKS.values():
        assert fn(ref, same, floor=0.1).status is Status.OK
        assert fn(ref, block(rows(rng, 10)), floor=0.1).status is Status.INSUFFICIENT_DATA
        one = block(rows(rng, 100)[:, :1], names="a")
        assert fn(ref, one).status is Status.INSUFFICIENT_DATA  # one shared feature
        assert "2 numeric features" in fn(ref, one).reason


def test_constant_features_are_left_out_and_exact_reconstruction_is_insufficient():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(500, 2))
    const = np.column_stack([x, np.full(500, 3.0)])
    r = correlation_test(block(const), block(const))
    assert r.status is Status.OK and r.n_current == 500  # the constant c drops out
    collinear = np.column_stack([x[:, 0], 2 * x[:, 0] + 1, np.full(500, 1.0)])
    r = reconstruction_error_test(block(collinear), block(collinear))
    assert r.status is Status.INSUFFICIENT_DATA and "reconstruct the baseline exactly" in r.reason


def test_a_broken_correlation_is_found_while_marginals_hold():
    """0.8 -> 0 between two N(0, 1) features at 1,000 rows: both tests find it."""
    rng = np.random.default_rng(5)
    cov = np.array([[1.0, 0.8], [0.8, 1.0]])
    ref = block(rows(rng, 10_000, cov), "ab")
    cur = block(rng.normal(size=(1_000, 2)), "ab")
    rec, cor = (fn(ref, cur, floor=0.1) for fn in (reconstruction_error_test, correlation_test))
    assert rec.status is cor.status is Status.DRIFT
    assert rec.effect_size == pytest.approx(np.log(1.0 / 0.2), abs=0.15)  # error 0.2 -> ~1.0


def _profile(x, start=0, names="abc"):
    n = len(x)
    p = WindowProfile("m", start, 300 if start else 0)
    p.add_columns(RecordColumns("m", ["1"] * n, [str(i) for i in range(n)], [0.0] * n,
                                {k: x[:, j] for j, k in enumerate(names)} | {"c_cat": ["u"] * n}))
    return p


def test_the_suite_runs_both_checks_on_the_model_and_they_may_alert():
    rng = np.random.default_rng(6)
    base = _profile(rows(rng, 5_000))
    assert alerting_checks(base)[MULTIVARIATE_FEATURE] == {"correlation"}  # both run, one pages
    results = [r for r in evaluate_window(_profile(rows(rng, 1_000), 300), base)
               if r.feature == MULTIVARIATE_FEATURE]
    assert {r.check for r in results} == {"reconstruction_error", "correlation"}
    assert all(r.status is Status.OK and r.floor == 0.1 for r in results)
    old = _profile(rows(rng, 1_000), 300)
    old.comoments = None  # a window of format 3
    assert {r.status for r in evaluate_window(old, base) if r.feature == MULTIVARIATE_FEATURE} == {
        Status.INSUFFICIENT_DATA}


def test_multivariate_alerts_group_under_the_model_and_yield_to_data_quality():
    keys = {group_key("m1", MULTIVARIATE_FEATURE, c, None) for c in MULTIVARIATE_CHECKS}
    assert keys == {"model:m1:__multivariate__"}
    assert inhibited("correlation", MULTIVARIATE_FEATURE, {"amount"})
    assert not inhibited("correlation", MULTIVARIATE_FEATURE, {"", "__score__"})


def test_correlation_of_heavy_tailed_features_is_judged_on_their_tails():
    """One row extreme in two independent log-normal features carries a small window's
    Pearson r (here ~0.5); Fisher's Gaussian 1/(n - 3) called that drift at p ~ 1e-13, as
    the simulator's control models were paged for. The elliptical law's 1 + kappa widens it
    for such tails and leaves Gaussian pairs as they were."""
    rng = np.random.default_rng(3)
    ref = block(rng.lognormal(0.0, 1.5, size=(5_000, 2)), "ab")
    window = rng.lognormal(0.0, 1.5, size=(200, 2))
    window[0] = [400.0, 400.0]  # one joint outlier
    assert np.corrcoef(window.T)[0, 1] > 0.4
    assert correlation_test(ref, block(window, "ab"), floor=0.1).status == Status.OK
    gaussian_ref = block(rows(rng, 5_000, np.array([[1.0, 0.8], [0.8, 1.0]])), "ab")
    assert correlation_test(gaussian_ref, block(rng.normal(size=(200, 2)), "ab"),
                            floor=0.1).status == Status.DRIFT
