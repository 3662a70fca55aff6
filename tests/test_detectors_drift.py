"""Drift and data-quality statistics from sketches against numpy/scipy on the raw data."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from detectors.drift.bins import baseline_edges
from detectors.drift.chi2 import chi2_test
from detectors.drift.js import js_distance, js_test
from detectors.drift.ks import ks_test
from detectors.drift.psi import psi
from detectors.policy.floor import EffectFloorPolicy
from detectors.quality.null_rate import null_rate_test
from detectors.result import Status
from detectors.suite import alerting_checks, evaluate_window
from sdk.record import PredictionRecord
from sketches.categorical import CategoricalSketch
from sketches.numeric import NumericSketch
from sketches.profile import FeatureProfile, WindowProfile


def sketch(x: np.ndarray) -> NumericSketch:
    s = NumericSketch()
    s.update(x)
    return s


def numpy_psi(ref: np.ndarray, cur: np.ndarray, edges: np.ndarray) -> float:
    bins = np.concatenate(([-np.inf], edges, [np.inf]))
    r = np.histogram(ref, bins)[0] / ref.size
    c = np.histogram(cur, bins)[0] / cur.size
    r, c = np.maximum(r, 0.5 / ref.size), np.maximum(c, 0.5 / cur.size)
    return float(np.sum((c - r) * np.log(c / r)))


@pytest.mark.parametrize("shift", [0.0, 0.1, 0.5, 2.0])
def test_psi_from_sketches_matches_numpy_on_raw_data(shift):
    # Tolerance: t-digest rank error (<= 0.005 per edge) moves each bin mass by
    # <= 0.01; with 10 bins of mass ~0.1 PSI moves by a few 1e-3 near 0 and by a
    # few percent when large.
    rng = np.random.default_rng(1)
    ref, cur = rng.normal(size=50_000), rng.normal(shift, 1, 50_000)
    edges = baseline_edges(sketch(ref))
    expected = numpy_psi(ref, cur, edges)
    got = psi(sketch(ref), sketch(cur)).statistic
    assert got == pytest.approx(expected, rel=0.05, abs=0.005)


@pytest.mark.parametrize("shift", [0.0, 0.05, 0.3])
def test_ks_from_sketches_matches_scipy_on_raw_data(shift):
    # Tolerance 0.01: the rank error of both t-digests plus the evaluation grid.
    rng = np.random.default_rng(2)
    ref, cur = rng.normal(size=20_000), rng.normal(shift, 1, 20_000)
    expected = stats.ks_2samp(ref, cur)
    a, b = sketch(ref), sketch(cur)
    got = ks_test(a, b)
    assert abs(got.statistic - expected.statistic) <= 0.01
    # the data-dependent bound: never above the global one, and an honest bound on D's error
    assert 0 < got.error_bound <= a.rank_error + b.rank_error
    assert expected.statistic >= got.statistic - got.error_bound
    if shift == 0.3:
        assert got.p_value < 1e-10
    if shift == 0.0:
        assert got.p_value >= expected.pvalue  # sketch error only makes the test conservative


def test_ks_exact_mode_equals_scipy_exactly():
    rng = np.random.default_rng(5)
    ref, cur = rng.integers(0, 10, 3000).astype(float), rng.integers(0, 12, 3000).astype(float)
    assert ks_test(sketch(ref), sketch(cur)).statistic == pytest.approx(stats.ks_2samp(ref, cur).statistic)


def test_psi_with_empty_bins_is_finite():
    ref = sketch(np.arange(1000, dtype=float))
    cur = sketch(np.full(1000, 5000.0))  # everything in the top bin
    r = psi(ref, cur)
    assert np.isfinite(r.statistic) and r.statistic > 1.0


def test_constant_reference_against_normal_current_drifts():
    ref, cur = sketch(np.zeros(2000)), sketch(np.random.default_rng(0).normal(size=2000))
    assert ks_test(ref, cur).statistic == pytest.approx(0.5, abs=0.03)
    assert psi(ref, cur).statistic > 1.0


def test_both_constant_is_no_drift():
    r = ks_test(sketch(np.ones(500)), sketch(np.ones(500)))
    assert r.statistic == 0.0 and r.p_value == 1.0
    assert psi(sketch(np.ones(500)), sketch(np.ones(500))).statistic == 0.0


def test_too_few_values_is_insufficient_data():
    r = ks_test(sketch(np.ones(500)), sketch(np.ones(3)))
    assert r.status == Status.INSUFFICIENT_DATA and r.p_value is None and "30" in r.reason


def cat(values: list[str]) -> CategoricalSketch:
    s = CategoricalSketch()
    s.update(values)
    return s


def test_chi2_matches_scipy_on_raw_counts_with_new_and_vanished_categories():
    ref = ["a"] * 500 + ["b"] * 300 + ["gone"] * 200
    cur = ["a"] * 450 + ["b"] * 350 + ["new"] * 200
    r = chi2_test(cat(ref), cat(cur))
    table = [[500, 300, 200, 0], [450, 350, 0, 200]]
    chi2, p, _dof, _e = stats.chi2_contingency(table, correction=False)
    assert r.statistic == pytest.approx(chi2) and r.p_value == pytest.approx(p)


def test_one_category_both_sides_is_p_one_not_nan():
    r = chi2_test(cat(["x"] * 100), cat(["x"] * 50))
    assert r.statistic == 0.0 and r.p_value == 1.0


def test_js_distance_matches_scipy_and_never_nan():
    from scipy.spatial.distance import jensenshannon

    p, q = np.array([5.0, 3.0, 2.0]), np.array([1.0, 1.0, 8.0])
    assert js_distance(p, q) == pytest.approx(jensenshannon(p, q, base=2))
    near = np.array([1.0, 1e-300])
    assert js_distance(near, near) == 0.0
    assert js_test(cat(["a"] * 60), cat(["b"] * 60)).statistic == 1.0


def nulls(n_null: int, n: int) -> FeatureProfile:
    f = FeatureProfile()
    f.update([None] * n_null + [1.0] * (n - n_null))
    return f


def test_null_rate_matches_two_proportion_z_test():
    r = null_rate_test(nulls(50, 1000), nulls(90, 1000))
    p0, p1, pool = 0.05, 0.09, 0.07
    z = (p1 - p0) / np.sqrt(pool * (1 - pool) * 2 / 1000)
    # one-sided: only a rise of the null rate is a data-quality change
    assert r.statistic == pytest.approx(z) and r.p_value == pytest.approx(stats.norm.sf(z))
    assert null_rate_test(nulls(0, 100), nulls(0, 100)).p_value == 1.0


def test_null_rate_fall_is_not_a_break():
    """Fewer missing values than the baseline (a field reported on windy days only) is
    not a data-quality break, however significant; a rise of the same size is."""
    fall = null_rate_test(nulls(750, 1000), nulls(50, 1000), floor=0.1)
    assert fall.effect_size == pytest.approx(-0.7) and fall.status.value == "ok" and fall.p_value > 0.99
    assert null_rate_test(nulls(50, 1000), nulls(750, 1000), floor=0.1).status.value == "drift"


def window(rows: list[dict], score: float | None = None) -> WindowProfile:
    p = WindowProfile("m", 0, 300)
    p.add_records([PredictionRecord("m", "1", str(i), 1.0, r, score=score) for i, r in enumerate(rows)])
    return p


def test_all_null_current_window_is_a_null_rate_alert_not_a_drift_alert():
    rng = np.random.default_rng(9)
    ref = window([{"x": float(v)} for v in rng.normal(size=1000)])
    cur = window([{"x": None}] * 500)
    results = evaluate_window(cur, ref)
    by_check = {r.check: r for r in results}
    assert by_check["psi"].status == Status.INSUFFICIENT_DATA
    alerts = EffectFloorPolicy(alerting_checks(ref)).decide(results)
    assert [(a.feature, a.check) for a in alerts] == [("x", "null_rate")]


def test_empty_window_is_insufficient_data_and_a_volume_drop_when_traffic_was_expected():
    ref = window([{"x": 1.0}] * 100)
    empty, volume = evaluate_window(WindowProfile("m", 0, 300), ref)
    assert (empty.check, empty.status, empty.reason) == ("empty_window", Status.INSUFFICIENT_DATA,
                                                         "empty window")
    assert volume.check == "volume" and volume.status == Status.INSUFFICIENT_DATA
    _empty, volume = evaluate_window(WindowProfile("m", 0, 300), ref, volume_history=[500, 520, 480])
    assert volume.status == Status.DRIFT and volume.effect_size == -1.0


def test_mixed_string_and_number_values_do_not_crash():
    ref = window([{"x": float(i % 7)} for i in range(500)])
    cur = window([{"x": "seven" if i % 2 else float(i % 7)} for i in range(500)])
    assert cur.features["x"].type_mismatch_count == 250
    results = {r.check: r for r in evaluate_window(cur, ref) if r.feature == "x"}
    assert not [r for r in results.values() if r.status == Status.ERROR]
    assert results["type_mismatch"].status == Status.DRIFT
    assert results["type_mismatch"].effect_size == pytest.approx(0.5)


def test_policy_needs_both_effect_floor_and_significance():
    rng = np.random.default_rng(10)
    ref = window([{"x": float(v)} for v in rng.normal(size=300)])
    small = window([{"x": float(v)} for v in rng.normal(0.05, 1, 300)])
    big = window([{"x": float(v)} for v in rng.normal(2.0, 1, 300)])
    policy = EffectFloorPolicy(alerting_checks(ref))
    assert policy.decide(evaluate_window(small, ref)) == []
    # a location shift: PSI and the mean-shift test (both alert by default); variance unchanged
    assert sorted(a.check for a in policy.decide(evaluate_window(big, ref))) == ["mean_shift", "psi"]
    # the KS test sees the big shift too, but it is not an alerting check by default
    assert {r.check: r.status for r in evaluate_window(big, ref)}["ks"] == Status.DRIFT
    with pytest.raises(ValueError):
        EffectFloorPolicy(alpha=0.0)


@pytest.mark.parametrize("check", [js_test, psi])
def test_small_windows_of_a_high_cardinality_feature_do_not_look_shifted(check):
    """884 categories (Zipf-like), windows of 60 records from the same distribution: the
    rare categories a small window draws stay in OTHER on both sides (binning on the
    union of both sides' top categories flagged half of these windows at p < 1e-6)."""
    rng = np.random.default_rng(4)
    weights = 1.0 / np.arange(1, 885) ** 0.8
    cats = np.array([f"c{i}" for i in range(884)])
    draw = lambda n: cats[rng.choice(884, size=n, p=weights / weights.sum())].tolist()  # noqa: E731
    ref = CategoricalSketch()
    ref.update(draw(20_000))
    flagged = 0
    for _ in range(200):
        cur = CategoricalSketch()
        cur.update(draw(60))
        r = check(ref, cur, "c", floor=0.1)
        flagged += r.p_value is not None and r.p_value < 1e-6
    assert flagged <= 4  # <= 2 %


@pytest.mark.parametrize(("n_ref", "n_cur"), [(100, 100), (2_000, 60), (5_000, 250)])
def test_high_cardinality_no_change_pairs_are_calibrated(n_ref, n_cur):
    """Zipf(1.1) over 2,000 categories, both sides from it: PSI, JS and chi-square
    alarm at alpha 0.05 near 5 % of the time. Categories chosen from the baseline
    alone made PSI and JS alarm in every 100-vs-100 pair (the baseline's rarest
    top-50 categories are ones it over-sampled); the union of both sides' top
    categories made chi-square alarm in every 2,000-vs-60 pair."""
    rng = np.random.default_rng(5)
    p = 1.0 / np.arange(1, 2_001) ** 1.1
    p /= p.sum()

    def sketch(n: int) -> CategoricalSketch:
        s = CategoricalSketch()
        s.update_counts({f"c{i}": int(c) for i, c in enumerate(rng.multinomial(n, p)) if c})
        return s

    reps, alarms = 150, {"psi": 0, "js": 0, "chi2": 0}
    for _ in range(reps):
        ref, cur = sketch(n_ref), sketch(n_cur)
        for check in (psi, js_test, chi2_test):
            r = check(ref, cur, "c")
            alarms[r.check] += r.p_value < 0.05
    assert all(a / reps <= 0.09 for a in alarms.values()), alarms


def test_js_distance_of_float32_input_is_computed_in_float64():
    # In float32, the KL terms of masses this close round to a negative sum, clamped to 0.0.
    # Tolerance 1e-9: float64 rounding only.
    from scipy.spatial.distance import jensenshannon

    p = np.array([50859.0, 61056.0], dtype=np.float32)
    q = np.array([50877.94140625, 61041.92578125], dtype=np.float32)
    expected = jensenshannon(p.astype(np.float64), q.astype(np.float64), base=2)
    assert expected > 1e-4
    assert js_distance(p, q) == pytest.approx(expected, rel=1e-9)


def test_ks_p_value_is_exact_at_small_n():
    # scipy's exact two-sample law: [1, 2] vs [3, 4, 5, 6] has p = 2 / 15 (the asymptotic
    # law gave 0.0469); tolerance 1e-12, the exact lattice count in floating point.
    r = ks_test(sketch(np.array([1.0, 2.0])), sketch(np.array([3.0, 4.0, 5.0, 6.0])), min_count=1)
    assert r.statistic == 1.0 and r.p_value == pytest.approx(2 / 15, rel=1e-12)
    rng = np.random.default_rng(11)
    for m, n in [(30, 30), (25, 40), (60, 90)]:
        ref, cur = rng.normal(size=m), rng.normal(0.6, 1, n)
        expected = stats.ks_2samp(ref, cur, method="exact")
        got = ks_test(sketch(ref), sketch(cur), min_count=1)
        assert got.statistic == pytest.approx(expected.statistic)
        assert got.p_value == pytest.approx(expected.pvalue, rel=1e-9)


def test_ks_exact_p_value_with_ties_is_the_permutation_p_value():
    # Discrete values: all C(12, 5) = 792 splits of the pooled sample enumerated (exact to
    # rounding, 1e-12); the continuous law (what scipy's exact method assumes) is twice as large.
    from itertools import combinations

    pooled = np.array([0, 0, 1, 1, 1, 2, 3, 3, 3, 3, 4, 5], dtype=float)
    support = np.unique(pooled)

    def d(a: np.ndarray, b: np.ndarray) -> float:
        fa = np.searchsorted(np.sort(a), support, "right") / a.size
        fb = np.searchsorted(np.sort(b), support, "right") / b.size
        return float(np.max(np.abs(fa - fb)))

    ref, cur = pooled[:5], pooled[5:]
    observed = d(ref, cur)
    splits = [np.isin(np.arange(12), idx) for idx in combinations(range(12), 5)]
    expected = np.mean([d(pooled[s], pooled[~s]) >= observed - 1e-12 for s in splits])
    r = ks_test(sketch(ref), sketch(cur), min_count=1)
    assert r.statistic == pytest.approx(observed)
    assert r.p_value == pytest.approx(expected, rel=1e-12)
    assert stats.ks_2samp(ref, cur, method="exact").pvalue > 1.5 * expected


def batched(value: float, batches: int, size: int) -> NumericSketch:
    """A constant feature as the aggregator builds it: moments merged batch by batch."""
    s = NumericSketch()
    for _ in range(batches):
        s.update(np.full(size, value))
    return s


@pytest.mark.parametrize("value", [0.1, 1e6 + 0.1, -7.3e-5])
def test_same_constant_on_both_sides_is_no_drift(value):
    # Merged moments of a constant carry rounding residue (variance ~1e-34, mean off by an
    # ulp): it reported mean_shift and variance_shift drift with effects +-1 and p ~ 0.
    from detectors.drift.mean_shift import mean_shift_test
    from detectors.drift.variance_shift import variance_shift_test
    from detectors.drift.wasserstein import wasserstein_test

    ref, cur = batched(value, 100, 137), batched(value, 10, 91)
    for test in (mean_shift_test, variance_shift_test, wasserstein_test, ks_test, psi):
        r = test(ref, cur, floor=0.0)
        assert r.status == Status.OK and r.p_value == 1.0 and r.effect_size == 0.0, r
    # a constant up to rounding: 0.1 + 0.2 and 0.3 are one ulp apart
    near = sketch(np.array([0.3, 0.1 + 0.2] * 500))
    for test in (mean_shift_test, variance_shift_test):
        r = test(near, sketch(np.full(700, 0.3)), floor=0.0)
        assert r.p_value == 1.0 and r.effect_size == 0.0, r


def test_a_moving_constant_has_bounded_effects_in_pooled_sd_units():
    # The documented fallback: a constant baseline is standardised by the pooled sd (numpy
    # on the raw values; tolerance 1e-9, rounding only). It divided by the residue's sd
    # (effects ~7e13).
    from detectors.drift.mean_shift import mean_shift_test
    from detectors.drift.variance_shift import variance_shift_test
    from detectors.drift.wasserstein import wasserstein_test

    ref, cur = batched(0.1, 100, 137), batched(0.101, 10, 100)
    raw_ref, raw_cur = np.full(13_700, 0.1), np.full(1_000, 0.101)
    pooled_sd = np.std(np.concatenate((raw_ref, raw_cur)))
    ms = mean_shift_test(ref, cur)
    assert ms.status == Status.DRIFT
    assert ms.effect_size == pytest.approx((0.101 - 0.1) / pooled_sd, rel=1e-9)
    w = wasserstein_test(ref, cur)
    assert w.effect_size == pytest.approx(stats.wasserstein_distance(raw_ref, raw_cur) / pooled_sd,
                                          rel=1e-9)
    vs = variance_shift_test(ref, cur)
    assert vs.effect_size == 0.0 and vs.p_value == 1.0  # both sides have no spread


def test_a_swap_of_rare_categories_is_not_pooled_away():
    # {a: 94, b: 6} vs {a: 94, c: 6}: b and c are each expected < 5 times; merging them before
    # testing gave statistic 0 and p = 1 for chi2, JS and PSI. The statistics come from every
    # category (scipy / numpy on the raw table, tolerance 1e-9) and the p-value from the exact
    # permutation law (its X^2 ordering checked by enumeration in test_detectors_catalog.py).
    from scipy.spatial.distance import jensenshannon

    from detectors.catalog import DEFAULT_FLOORS
    from detectors.stats.exact import exact_homogeneity_p

    ref, cur = CategoricalSketch(), CategoricalSketch()
    ref.update_counts({"a": 94, "b": 6})
    cur.update_counts({"a": 94, "c": 6})
    r_raw, c_raw = np.array([94.0, 6.0, 0.0]), np.array([94.0, 0.0, 6.0])
    exact = exact_homogeneity_p(r_raw.astype(int), c_raw.astype(int))
    assert exact == pytest.approx(0.00085, abs=1e-5)
    x2 = stats.chi2_contingency(np.vstack([r_raw, c_raw]), correction=False)[0]
    r, c = np.maximum(r_raw / 100, 0.5 / 100), np.maximum(c_raw / 100, 0.5 / 100)
    expected = {"chi2": x2, "js": jensenshannon(r_raw, c_raw, base=2),
                "psi": float(np.sum((c - r) * np.log(c / r)))}
    for test in (chi2_test, js_test, psi):
        got = test(ref, cur, floor=0.0)
        assert got.statistic == pytest.approx(expected[got.check], rel=1e-9)
        assert got.p_value == pytest.approx(exact, rel=1e-9) and got.status == Status.DRIFT
    # under the default floors the p-value is no longer 1: JS (0.245, floor 0.1) at 0.015
    js = js_test(ref, cur, floor=DEFAULT_FLOORS["js"])
    assert js.effect_size > DEFAULT_FLOORS["js"] and js.p_value < 0.05
    same = CategoricalSketch()
    same.update_counts({"a": 94, "b": 6})
    assert all(t(ref, same).p_value == 1.0 for t in (chi2_test, js_test, psi))


def test_a_spread_change_of_a_heavy_tailed_feature_is_tested_on_the_log_scale():
    # The short scenario's missed shift: a log-normal feature whose log-spread grows x1.59
    # overnight, ~100 values a window against a 2,000-row reference. On the raw values the
    # pooled kurtosis (~40) widens the variance test until it says little (p ~ 1e-2); on the
    # log scale the values are normal (kurtosis 3) and the same change is p < 1e-4.
    # Positive values held exactly on both sides whose log has the smaller kurtosis are
    # tested there: the effect is then the relative change of the log-spread (numpy on the
    # raw values: the log's population sds).
    from detectors.drift.variance_shift import variance_shift_test

    rng = np.random.default_rng(3)
    raw_ref = np.exp(2 + 0.6 * rng.standard_normal(2000))
    raw_cur = np.exp(2 + 0.95 * rng.standard_normal(100))
    ref, cur = NumericSketch.of_values(raw_ref), NumericSketch.of_values(raw_cur)
    r = variance_shift_test(ref, cur, floor=0.1)
    s_ref, s_cur = np.log(raw_ref).std(), np.log(raw_cur).std()
    assert r.effect_size == pytest.approx((s_cur - s_ref) / s_ref, rel=1e-9)
    assert r.p_value < 1e-4  # 6e-5; 0.013 on the raw values
    # a feature with values <= 0 keeps the raw scale (sd difference in baseline sds)
    z_ref, z_cur = np.log(raw_ref) - 2, np.log(raw_cur) - 2
    raw = variance_shift_test(NumericSketch.of_values(z_ref), NumericSketch.of_values(z_cur), floor=0.1)
    assert raw.effect_size == pytest.approx((z_cur.std() - z_ref.std()) / z_ref.std(), rel=1e-9)
    # calibrated under the null: log-normal windows of 100 against 2,000, level 0.01
    p = [variance_shift_test(NumericSketch.of_values(np.exp(rng.standard_normal(2000))),
                             NumericSketch.of_values(np.exp(rng.standard_normal(100)))).p_value
         for _ in range(400)]
    assert np.mean(np.array(p) < 0.01) < 0.03


def test_a_sketched_heavy_tailed_window_measures_the_same_log_spread():
    # Beyond 2,048 values a window is a t-digest: the log moments come from the shared
    # grid's midpoints. The effect stays within 0.01 of numpy's on the raw values (the
    # floor is 0.1), so floors learned on exact reference chunks apply to large windows.
    from detectors.drift.variance_shift import variance_shift_test

    rng = np.random.default_rng(5)
    raw_ref = np.exp(2 + 0.8 * rng.standard_normal(20_000))
    raw_cur = np.exp(2 + 0.8 * 1.3 * rng.standard_normal(20_000))
    ref, cur = NumericSketch(), NumericSketch()
    ref.update(raw_ref)
    cur.update(raw_cur)
    assert not ref.is_exact and not cur.is_exact
    r = variance_shift_test(ref, cur, floor=0.1)
    s_ref, s_cur = np.log(raw_ref).std(), np.log(raw_cur).std()
    assert abs(r.effect_size - (s_cur - s_ref) / s_ref) < 0.01
    same = NumericSketch()
    same.update(np.exp(2 + 0.8 * rng.standard_normal(20_000)))
    assert abs(variance_shift_test(ref, same, floor=0.1).effect_size) < 0.02
