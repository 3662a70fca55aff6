"""The detector catalog against scipy / numpy on the raw data, and its edge cases."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import jensenshannon

from detectors.catalog import (
    ALL_CHECKS,
    CATEGORICAL_CHECKS,
    FEATURE_CHECKS,
    MULTIVARIATE_CHECKS,
    NUMERIC_CHECKS,
    VECTOR_CHECKS,
)
from detectors.drift.bins import baseline_edges, bin_masses
from detectors.drift.cardinality import cardinality_test
from detectors.drift.chi2 import chi2_test
from detectors.drift.class_rate import class_rate_test
from detectors.drift.grid import joint_cdf
from detectors.drift.js import js_test
from detectors.drift.ks import ks_test
from detectors.drift.mean_shift import mean_shift_test
from detectors.drift.psi import psi
from detectors.drift.unseen import exact_counts, new_category_test, share_interval, vanished_category_test
from detectors.drift.variance_shift import variance_shift_test
from detectors.drift.wasserstein import wasserstein_test
from detectors.quality.out_of_range import out_of_range_test
from detectors.quality.volume import volume_test
from detectors.result import Status
from detectors.stats.exact import exact_homogeneity_p
from detectors.suite import evaluate_window
from sdk.record import PredictionRecord
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch
from sketches.profile import WindowProfile

#: The contract every check of a kind satisfies runs on the catalog's registry itself, so a
#: newly registered check cannot escape it.
NUMERIC = sorted(NUMERIC_CHECKS)
CATEGORICAL = sorted(CATEGORICAL_CHECKS)


def test_every_check_of_the_catalog_is_under_a_contract():
    """Every check a target runs has a function in a registry the contract tests iterate
    (``volume`` is tested on window counts: tests/test_detectors_baselines.py; the
    multivariate checks on co-moments: tests/test_detectors_multivariate.py; the vector checks:
    tests/test_detectors_drift_embedding.py)."""
    registered = (set(FEATURE_CHECKS) | set(NUMERIC_CHECKS) | set(CATEGORICAL_CHECKS)
                  | set(MULTIVARIATE_CHECKS) | set(VECTOR_CHECKS) | {"volume"})
    assert registered >= ALL_CHECKS, ALL_CHECKS - registered


def sketch(x) -> NumericSketch:
    s = NumericSketch()
    s.update(np.asarray(x, dtype=np.float64))
    return s


def cat(values) -> CategoricalSketch:
    s = CategoricalSketch()
    s.update(values)
    return s


@pytest.mark.parametrize("shift", [0.0, 0.3, 2.0])
def test_wasserstein_matches_scipy_on_raw_data(shift):
    # t-digest CDFs are within eps = 0.005 of the sample CDFs: W1 moves by at
    # most 2 eps times the range (~9 sd), observed far less; tolerance 0.02 sd.
    rng = np.random.default_rng(3)
    ref, cur = rng.normal(size=20_000), rng.normal(shift, 1, 20_000)
    r = wasserstein_test(sketch(ref), sketch(cur))
    assert r.statistic == pytest.approx(stats.wasserstein_distance(ref, cur), abs=0.02)
    assert r.effect_size == pytest.approx(r.statistic / ref.std(), rel=1e-9)


def test_exact_mode_statistics_equal_scipy_exactly():
    rng = np.random.default_rng(4)
    ref, cur = rng.poisson(3, 3000).astype(float), rng.poisson(3.3, 2000).astype(float)
    a, b = sketch(ref), sketch(cur)
    assert wasserstein_test(a, b).statistic == pytest.approx(stats.wasserstein_distance(ref, cur))
    assert ks_test(a, b).statistic == pytest.approx(stats.ks_2samp(ref, cur).statistic)
    edges = baseline_edges(a)

    def masses(x):  # bins (-inf, e_1], ..., (e_k, inf), as numpy counts them
        cdf = np.searchsorted(np.sort(x), edges, side="right") / x.size
        return np.diff(np.concatenate(([0.0], cdf, [1.0])))

    assert bin_masses(a, edges) == pytest.approx(masses(ref))
    assert bin_masses(b, edges) == pytest.approx(masses(cur))


def test_numeric_js_matches_scipy_on_the_same_bins():
    rng = np.random.default_rng(5)
    ref, cur = rng.normal(size=30_000), rng.normal(0.5, 1.2, 30_000)
    a, b = sketch(ref), sketch(cur)
    edges = baseline_edges(a, grid=joint_cdf(a, b))
    bins = np.concatenate(([-np.inf], edges, [np.inf]))
    expected = jensenshannon(np.histogram(ref, bins)[0], np.histogram(cur, bins)[0], base=2)
    # bin masses from t-digests: within 2 eps = 0.01 per bin -> a few 1e-3 of JS
    assert js_test(a, b).statistic == pytest.approx(expected, abs=0.01)


def test_mean_and_variance_shift_match_numpy_moments():
    rng = np.random.default_rng(6)
    ref, cur = rng.normal(size=5000), rng.normal(0.2, 1.5, 4000)
    m = mean_shift_test(sketch(ref), sketch(cur))
    pooled = np.concatenate([ref, cur])
    z = (cur.mean() - ref.mean()) / np.sqrt(pooled.var() * (1 / 4000 + 1 / 5000))
    assert m.statistic == pytest.approx(z, rel=1e-9)
    assert m.effect_size == pytest.approx((cur.mean() - ref.mean()) / ref.std(), rel=1e-9)
    v = variance_shift_test(sketch(ref), sketch(cur))
    assert v.effect_size == pytest.approx((cur.std() - ref.std()) / ref.std(), rel=1e-9)
    assert v.status == Status.DRIFT and m.status == Status.DRIFT


def test_constant_reference_against_normal_current_is_drift_with_the_documented_values():
    ref, cur = sketch(np.zeros(2000)), sketch(np.random.default_rng(0).normal(size=2000))
    results = {name: f(ref, cur) for name, f in NUMERIC_CHECKS.items()}
    assert results["ks"].statistic == pytest.approx(0.5, abs=0.03)
    w = results["wasserstein"]
    assert w.statistic == pytest.approx(np.sqrt(2 / np.pi), abs=0.03)  # E|Z| = 0.80, unnormalised
    assert w.effect_size == pytest.approx(w.statistic / np.sqrt(0.5), rel=0.02)  # pooled spread
    assert all(r.status == Status.DRIFT for name, r in results.items() if name != "mean_shift")


@pytest.mark.parametrize("check", NUMERIC)
def test_both_constant_is_all_zero_and_never_drift(check):
    r = NUMERIC_CHECKS[check](sketch(np.ones(500)), sketch(np.ones(400)))
    assert r.status == Status.OK and r.p_value == 1.0
    assert r.effect_size == 0.0


@pytest.mark.parametrize("check", NUMERIC)
def test_single_record_and_empty_sides_are_insufficient_data_for_every_test(check):
    one, many = sketch([1.0]), sketch(np.arange(100.0))
    f = NUMERIC_CHECKS[check]
    assert f(many, one).status == Status.INSUFFICIENT_DATA
    assert f(NumericSketch(), many).status == Status.INSUFFICIENT_DATA


@pytest.mark.parametrize("check", NUMERIC)
def test_near_identical_inputs_never_give_nan(check):
    x = np.full(1000, 1.0)
    x[0] = 1.0 + 1e-15
    r = NUMERIC_CHECKS[check](sketch(x), sketch(np.full(1000, 1.0)))
    assert r.status in (Status.OK, Status.DRIFT)


def test_exact_chi2_equals_brute_force_enumeration_of_the_conditional_distribution():
    ref, cur = np.array([6, 2, 1, 0]), np.array([2, 3, 1, 3])
    cols, n1, total = ref + cur, int(cur.sum()), int((ref + cur).sum())

    def x2(row):
        row = np.array(row)
        table = np.vstack([cols - row, row])
        e = table.sum(1, keepdims=True) * cols / total
        return np.sum((table - e) ** 2 / e)

    observed, tail = x2(cur), 0.0
    for row in itertools.product(*(range(c + 1) for c in cols)):
        if sum(row) == n1 and x2(row) >= observed - 1e-9:
            tail += stats.multivariate_hypergeom.pmf(row, cols, n1)
    assert exact_homogeneity_p(ref, cur) == pytest.approx(tail, rel=1e-9)


def test_chi2_uses_the_exact_test_at_small_counts_and_scipy_at_large_counts():
    small_ref, small_cur = ["a"] * 28 + ["b"] * 2, ["a"] * 24 + ["b"] * 6
    r = chi2_test(cat(small_ref), cat(small_cur))
    assert r.p_value == pytest.approx(exact_homogeneity_p(np.array([28, 2]), np.array([24, 6])))
    assert r.p_value != pytest.approx(stats.chi2_contingency([[28, 2], [24, 6]], correction=False)[1])
    big = chi2_test(cat(["a"] * 500 + ["b"] * 300 + ["gone"] * 200),
                    cat(["a"] * 450 + ["b"] * 350 + ["new"] * 200))
    chi2, p, _dof, _e = stats.chi2_contingency([[500, 300, 200, 0], [450, 350, 0, 200]], correction=False)
    assert big.statistic == pytest.approx(chi2) and big.p_value == pytest.approx(p)


@pytest.mark.parametrize("check", CATEGORICAL)
def test_one_category_both_sides_is_p_one_for_every_categorical_test(check):
    r = CATEGORICAL_CHECKS[check](cat(["x"] * 100), cat(["x"] * 50))
    assert r.status == Status.OK and r.effect_size == 0.0 and r.p_value >= 0.5


def test_brand_new_and_vanished_categories_are_symmetric():
    old, new = cat(["a"] * 300 + ["b"] * 100), cat(["a"] * 300 + ["z"] * 100)
    n, v = new_category_test(old, new), vanished_category_test(old, new)
    assert n.effect_size == v.effect_size == 0.25
    assert n.status == v.status == Status.DRIFT
    assert chi2_test(old, new).status == Status.DRIFT and js_test(old, new).statistic > 0.4


def test_cardinality_ratio_uses_the_rarefied_expectation():
    ref = cat([str(i % 20) for i in range(2000)])
    same_small = cat([str(i % 20) for i in range(100)])
    assert cardinality_test(ref, same_small).status == Status.OK  # 20 of 20 expected
    ids = cat([f"id{i}" for i in range(2000)])  # an identifier leaked into a categorical feature
    r = cardinality_test(ref, ids)
    assert r.status == Status.DRIFT and r.statistic == pytest.approx(100, rel=0.05)


def test_class_rate_and_out_of_range_and_volume():
    a, b = cat(["true"] * 300 + ["false"] * 700), cat(["true"] * 500 + ["false"] * 500)
    assert abs(class_rate_test(a, b, floor=0.05).effect_size) == pytest.approx(0.2)
    rng = np.random.default_rng(7)
    ref = rng.normal(size=5000)
    unit_change = out_of_range_test(sketch(ref), sketch(rng.normal(size=1000) * 1000))
    assert unit_change.status == Status.DRIFT and unit_change.effect_size > 0.99
    assert out_of_range_test(sketch(ref), sketch(rng.normal(size=1000))).status == Status.OK
    assert volume_test(100, [1000, 1050, 990], floor=0.5).status == Status.DRIFT
    assert volume_test(1000, [1000, 1050, 990], floor=0.5).status == Status.OK


def test_interval_null_ignores_a_negligible_shift_at_a_million_but_not_a_real_one():
    rng = np.random.default_rng(8)
    ref = sketch(rng.normal(size=1_000_000))
    tiny, real = sketch(rng.normal(0.01, 1, 1_000_000)), sketch(rng.normal(0.5, 1, 1_000_000))
    assert mean_shift_test(ref, tiny).status == Status.DRIFT  # point null: "significant"
    assert mean_shift_test(ref, tiny, floor=0.1).status == Status.OK
    assert psi(ref, tiny, floor=0.1).status == Status.OK
    assert psi(ref, tiny, floor=0.1).p_value > 0.5
    assert psi(ref, real, floor=0.1).status == Status.DRIFT
    assert mean_shift_test(ref, real, floor=0.1).status == Status.DRIFT


def test_mixed_string_and_int_categories_are_a_finding_not_a_crash():
    rows = lambda vals: [PredictionRecord("m", "1", str(i), 0.0, {"c": v}) for i, v in enumerate(vals)]  # noqa: E731
    ref, cur = WindowProfile("m", 0, 0), WindowProfile("m", 0, 300)
    ref.add_records(rows(["a", "b"] * 100))
    cur.add_records(rows(["a", 7] * 100))
    by_check = {r.check: r for r in evaluate_window(cur, ref) if r.feature == "c"}
    assert not [r for r in by_check.values() if r.status == Status.ERROR]
    assert by_check["type_mismatch"].status == Status.DRIFT
    assert by_check["type_mismatch"].effect_size == pytest.approx(0.5)


# -- new / vanished categories in sketch mode ------------------------------------------------

def counted(values, sketched: bool = False) -> CategoricalSketch:
    """The sketch of ``values``; ``sketched``: in sketch mode whatever their number of
    categories (as a profile written while the exact table held 256 categories reads back)."""
    s = CategoricalSketch()
    if sketched:
        s._leave_exact()
    s.update_counts(Counter(values))
    return s


def raw_share(side: list[str], other: list[str]) -> float:
    """Share of ``side``'s values in categories ``other`` never had, on the raw values."""
    seen = set(other)
    return sum(v not in seen for v in side) / len(side)


def test_new_category_share_of_an_identifier_leak_into_a_sketched_window():
    # 20 categories in the baseline; the window adds 3,000 one-off identifiers (> 768
    # categories: its frequent-items counts are no longer exact)
    rng = np.random.default_rng(31)
    ref_vals = [f"c{i}" for i in rng.integers(0, 20, 2000)]
    cur_vals = [f"c{i}" for i in rng.integers(0, 20, 7000)] + [f"id{i}" for i in range(3000)]
    ref, cur = counted(ref_vals), counted(cur_vals)
    assert exact_counts(cur) is None and cur.frequency_error > 0
    r = new_category_test(ref, cur)
    truth = raw_share(cur_vals, ref_vals)
    assert r.status == Status.DRIFT and abs(r.effect_size - truth) <= r.error_bound
    share, lower, upper = share_interval(cur, exact_counts(ref))
    assert lower <= truth <= upper and upper - lower == pytest.approx(r.error_bound)
    assert r.error_bound <= 20 * cur.frequency_error / cur.count + 1e-12  # <= len(other) x FI error
    assert r.error_bound < 0.01


def test_unseen_category_shares_equal_the_raw_computation_while_frequent_items_are_exact():
    # 500 categories, both sides sketched: their frequent-items maps still hold every
    # category, so the shares and Good-Turing inputs are exact
    rng = np.random.default_rng(32)
    ref_vals = [f"c{i}" for i in rng.integers(0, 500, 4000)]
    cur_vals = [f"c{i}" for i in rng.integers(40, 540, 4000)]
    ref, cur = counted(ref_vals, sketched=True), counted(cur_vals, sketched=True)
    assert not ref.is_exact and not cur.is_exact
    n, v = new_category_test(ref, cur), vanished_category_test(ref, cur)
    assert n.effect_size == pytest.approx(raw_share(cur_vals, ref_vals), abs=1e-12)
    assert v.effect_size == pytest.approx(raw_share(ref_vals, cur_vals), abs=1e-12)
    assert n.error_bound == v.error_bound == 0.0
    assert n.status == v.status == Status.DRIFT  # 40 of 500 categories swapped: 8 % each way


def test_sketched_window_never_alarms_under_h0_and_its_interval_holds_the_truth():
    # 5,000 Zipf-like categories: a 200-value baseline (exact) against 10,000-value windows
    # (sketched beyond frequent-items exactness). Sketch error is resolved toward "no new
    # categories": no alarm in 30 H0 pairs; the certain interval always holds the raw share.
    rng = np.random.default_rng(33)
    k = 5000
    w = 1.0 / np.arange(1, k + 1) ** 0.8
    w /= w.sum()
    drift = 0
    for _ in range(30):
        ref_vals = [f"c{i}" for i in rng.choice(k, 200, p=w)]
        cur_vals = [f"c{i}" for i in rng.choice(k, 10_000, p=w)]
        ref, cur = counted(ref_vals), counted(cur_vals)
        assert exact_counts(cur) is None
        r = new_category_test(ref, cur)
        drift += r.status == Status.DRIFT
        _share, lower, upper = share_interval(cur, exact_counts(ref))
        assert lower <= raw_share(cur_vals, ref_vals) <= upper
    assert drift == 0


def test_unseen_shares_are_insufficient_data_when_the_other_side_is_beyond_exact_counts():
    # which categories a side with > 768 categories lacks, and its unseen mass, are not
    # identifiable from frequent items and count-min: no number rather than a wrong one
    rng = np.random.default_rng(34)
    small = counted([f"c{i}" for i in rng.integers(0, 30, 500)])
    wide = counted([f"c{i}" for i in rng.integers(0, 20_000, 30_000)])
    assert exact_counts(wide) is None
    n = new_category_test(wide, small)  # baseline sketched: new categories unknown
    v = vanished_category_test(small, wide)  # window sketched: vanished categories unknown
    for r in (n, v):
        assert r.status == Status.INSUFFICIENT_DATA and r.p_value is None
        assert "not identifiable" in r.reason
    assert "baseline" in n.reason and "current window" in v.reason
    # the other direction of each pair still runs: its other side is exact
    assert vanished_category_test(wide, small).status != Status.INSUFFICIENT_DATA
    assert new_category_test(small, wide).status == Status.DRIFT  # ~all the window is new
