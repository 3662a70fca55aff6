"""Label-joined performance (detectors.performance) against sklearn.metrics on raw data.

Tolerances:
* exact quantities (counts, precision/recall/F1/accuracy, confusion matrices,
  macro-F1): equal; float sums (log loss, Brier, MAE, RMSE, MAPE): relative
  1e-12 (summation order only);
* ROC AUC: within the cohort's own binning bound (error_bound) and within
  0.005 of ``roc_auc_score`` (the contract), on balanced, imbalanced
  (fraud-like, scores near 0), confident (scores near 0 and 1), uniform and
  rounded scores;
* average precision: within 0.005 (the order inside a 2.5e-4-wide bin is lost);
* ECE: within its error_bound (1.25e-4, half a grid bin) of ECE on raw scores;
* CBPE: within 0.02 of the realised metric on calibrated synthetic scores.
"""

from __future__ import annotations

import itertools
import json
import math

import msgpack
import numpy as np
import pytest
from sklearn import metrics as skm

from detectors.performance import grid
from detectors.performance.binary import BinaryCohort
from detectors.performance.compare import (
    accuracy_drop_test,
    auc_drop_test,
    delong_se,
    hanley_mcneil_se,
    log_loss_increase_test,
    mae_increase_test,
    one_sided_p,
    rmse_increase_test,
)
from detectors.performance.estimate import estimate_cohort, estimate_performance, expected_confusion
from detectors.performance.loghist import LogHistogram
from detectors.performance.maturity import maturity
from detectors.performance.metric import Metric
from detectors.performance.multiclass import MulticlassCohort
from detectors.performance.regression import RegressionCohort
from detectors.performance.slices import for_slice, sample_shortfall
from detectors.result import Status


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _binormal(rng: np.random.Generator, n: int, shift: float = 1.0, prevalence: float = 0.3,
              loc: float = 0.0, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    y = rng.random(n) < prevalence
    return _sigmoid(rng.normal(loc + shift * y, scale)), y


SCENARIOS = {
    "binormal": lambda rng, n: _binormal(rng, n),
    "fraud": lambda rng, n: _binormal(rng, n, shift=3.0, prevalence=0.01, loc=-9.0, scale=1.5),
    "confident": lambda rng, n: _binormal(rng, n, shift=16.0, prevalence=0.5, loc=-8.0, scale=4.0),
    "calibrated_uniform": lambda rng, n: (lambda s: (s, rng.random(n) < s))(rng.random(n)),
    "rounded": lambda rng, n: (lambda s, y: (np.round(s, 2), y))(*_binormal(rng, n)),
}


def _raw_ece(s: np.ndarray, y: np.ndarray, n_bins: int) -> float:
    b = np.minimum((s * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for j in range(n_bins):
        m = b == j
        if m.any():
            total += m.sum() * abs(y[m].mean() - s[m].mean())
    return total / s.size


# -- binary: agreement with sklearn ------------------------------------------------


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_binary_metrics_match_sklearn(scenario: str) -> None:
    rng = np.random.default_rng(sorted(SCENARIOS).index(scenario))
    s, y = SCENARIOS[scenario](rng, 20_000)
    t = float(np.quantile(s, 0.8))  # a threshold with predicted positives in every scenario
    c = BinaryCohort(threshold=t)
    c.add(s, y)
    yhat = s >= t

    auc = c.roc_auc()
    ref_auc = skm.roc_auc_score(y, s)
    assert abs(auc.value - ref_auc) <= auc.error_bound + 1e-12
    assert abs(auc.value - ref_auc) < 0.005
    assert auc.error_bound < 0.006  # the rounded scores have genuine ties: 0.0054
    assert abs(c.average_precision().value - skm.average_precision_score(y, s)) < 0.005

    assert c.log_loss().value == pytest.approx(skm.log_loss(y, s), rel=1e-12)
    assert c.brier_score().value == pytest.approx(skm.brier_score_loss(y, s), rel=1e-12)
    assert c.precision().value == skm.precision_score(y, yhat)
    assert c.recall().value == skm.recall_score(y, yhat)
    assert c.f1().value == pytest.approx(skm.f1_score(y, yhat), rel=1e-15)
    assert c.accuracy().value == skm.accuracy_score(y, yhat)
    assert (c.tn, c.fp, c.fn, c.tp) == tuple(skm.confusion_matrix(y, yhat).ravel())
    assert c.positive_rate().value == y.mean()
    assert c.mean_score().value == pytest.approx(s.mean(), rel=1e-12)

    for n_bins in (10, 20, 40):
        ece = c.ece(n_bins)
        assert abs(ece.value - _raw_ece(s, y, n_bins)) <= ece.error_bound + 1e-12


def test_log_loss_clips_like_sklearn() -> None:
    s = np.array([0.0, 1.0, 1.0, 0.0, 1e-300, 0.5])
    y = np.array([1, 0, 1, 0, 1, 1])
    c = BinaryCohort()
    c.add(s, y)
    assert c.log_loss().value == pytest.approx(skm.log_loss(y, s), rel=1e-12)
    assert c.brier_score().value == pytest.approx(skm.brier_score_loss(y, s), rel=1e-12)


def test_auc_error_bound_is_data_dependent_and_small_for_continuous_scores() -> None:
    s, y = _binormal(np.random.default_rng(7), 200_000)
    c = BinaryCohort()
    c.add(s, y)
    auc = c.roc_auc()
    assert auc.error_bound < 2e-4  # about 1.25e-4 * integral f1 f0
    assert abs(auc.value - skm.roc_auc_score(y, s)) < 1e-5


# -- binary: edge cases ----------------------------------------------------------


def test_single_class_auc_is_undefined_not_a_number() -> None:
    c = BinaryCohort()
    c.add([0.2, 0.7, 0.9], [1, 1, 1])
    auc = c.roc_auc()
    assert auc.value is None and auc.reason == "single class" and auc.n == 3
    c2 = BinaryCohort()
    c2.add([0.2, 0.7], [0, 0])
    assert c2.roc_auc().value is None and c2.roc_auc().reason == "single class"
    assert c2.average_precision().value is None and c2.average_precision().reason == "no positives"
    assert c2.recall().value is None and c2.recall().reason == "no positives"
    assert c2.f1().value == 0.0  # fp = 1 (0.7 >= 0.5): 2tp / (2tp + fp + fn) = 0, as sklearn
    assert BinaryCohort().roc_auc().reason == "no labeled examples"


def test_empty_cohort_metrics_are_undefined() -> None:
    c = BinaryCohort()
    for m in (c.roc_auc(), c.log_loss(), c.brier_score(), c.ece(), c.precision(), c.recall(),
              c.f1(), c.accuracy(), c.positive_rate(), c.average_precision()):
        assert m.value is None and m.reason
    assert len(c.calibration(10).bins) == 10


def test_precision_undefined_without_predicted_positives() -> None:
    c = BinaryCohort(threshold=0.9)
    c.add([0.1, 0.2, 0.3], [0, 1, 0])
    assert c.precision().value is None and c.precision().reason == "no predicted positives"
    assert c.recall().value == 0.0 and c.f1().value == 0.0


def test_ece_reports_empty_bins() -> None:
    c = BinaryCohort()
    c.add([0.05, 0.06, 0.93, 0.97], [0, 0, 1, 1])
    cal = c.calibration(10)
    assert len(cal.bins) == 10
    assert [b.count for b in cal.bins] == [2, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert all(b.mean_score is None and b.positive_rate is None for b in cal.bins[1:9])
    assert cal.bins[0].positive_rate == 0.0 and cal.bins[9].positive_rate == 1.0
    assert cal.ece.value == pytest.approx((0.055 + 0.05) / 2, abs=cal.ece.error_bound)
    assert [(b.lo, b.hi) for b in cal.bins][:2] == [(0.0, 0.1), (0.1, 0.2)]


def test_ties_only_inside_a_grid_bin() -> None:
    # 1e-9 apart across the edge 0.5: different bins, ordered.
    c = BinaryCohort()
    c.add([0.5 + 1e-9, 0.5 - 1e-9], [1, 0])
    assert c.roc_auc().value == 1.0 and c.roc_auc().error_bound == 0.0
    # 1e-9 apart inside the bin [0.3, 0.30025): tied, and the bound says so.
    c = BinaryCohort()
    c.add([0.3 + 1e-9, 0.3], [1, 0])
    assert c.roc_auc().value == 0.5 and c.roc_auc().error_bound == 0.5
    # Near 0 the grid is relative: 1e-9 and 2e-9 are in different bins.
    c = BinaryCohort()
    c.add([2e-9, 1e-9], [1, 0])
    assert c.roc_auc().value == 1.0
    # The resolution: no two scores more than 2.5e-4 apart share a bin.
    assert grid.MAX_WIDTH == 2.5e-4 and np.diff(grid.EDGES).max() < 2.5e-4 + 1e-15
    assert grid.N_BINS >= 1000


def test_bad_inputs_are_rejected() -> None:
    c = BinaryCohort()
    with pytest.raises(ValueError, match="probabilities"):
        c.add([0.2, np.nan], [0, 1])
    with pytest.raises(ValueError, match="probabilities"):
        c.add([1.2], [0])
    with pytest.raises(ValueError, match="0/1"):
        c.add([0.2], [2])
    with pytest.raises(ValueError, match="labels"):
        c.add([0.2, 0.3], [1])
    with pytest.raises(ValueError, match="threshold"):
        BinaryCohort(threshold=1.5)
    with pytest.raises(ValueError, match="thresholds"):
        c.merge(BinaryCohort(threshold=0.4))
    assert c.n == 0  # rejected batches leave no trace
    with pytest.raises(ValueError, match="undefined metric needs a reason"):
        Metric(None)


# -- merge invariance and serialisation ------------------------------------------


def _assert_same_binary(a: BinaryCohort, b: BinaryCohort) -> None:
    for name in ("pos", "neg", "predicted"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert (a.tp, a.fp, a.tn, a.fn, a.threshold) == (b.tp, b.fp, b.tn, b.fn, b.threshold)
    for name in ("log_loss_sum", "log_loss_sq", "brier_sum", "brier_sq", "score_sum"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12)


def test_binary_merge_in_any_order_equals_one_pass() -> None:
    rng = np.random.default_rng(11)
    s, y = _binormal(rng, 6_000)
    whole = BinaryCohort(0.4)
    whole.add(s, y)
    whole.add_predictions(s)
    parts = []
    for idx in np.array_split(rng.permutation(s.size), 5):
        p = BinaryCohort(0.4)
        p.add(s[idx], y[idx])
        p.add_predictions(s[idx])
        parts.append(p)
    for order in itertools.islice(itertools.permutations(range(5)), 0, 120, 17):
        acc = BinaryCohort(0.4)
        for i in order:
            acc.merge(parts[i])
        _assert_same_binary(acc, whole)
        assert acc.roc_auc().value == whole.roc_auc().value
    # tree-shaped merge (replicas, then a roll-up)
    left, right = BinaryCohort(0.4), BinaryCohort(0.4)
    for p in parts[:2]:
        left.merge(p)
    for p in parts[2:]:
        right.merge(p)
    right.merge(left)
    _assert_same_binary(right, whole)


def test_binary_round_trip_json_and_msgpack() -> None:
    s, y = _binormal(np.random.default_rng(12), 3_000)
    c = BinaryCohort(0.35)
    c.add(s, y)
    c.add_predictions(np.concatenate([s, s[:100]]))
    d = c.to_dict()
    for back in (json.loads(json.dumps(d)), msgpack.unpackb(msgpack.packb(d))):
        r = BinaryCohort.from_dict(back)
        _assert_same_binary(r, c)
        assert r.to_dict() == d
        assert r.pos.dtype == np.int64
    assert BinaryCohort.from_dict(BinaryCohort().to_dict()).n == 0
    with pytest.raises(ValueError, match="grid"):
        BinaryCohort.from_dict({**d, "grid": "u1000"})
    with pytest.raises(ValueError, match="disagree"):
        BinaryCohort.from_dict({**d, "confusion": [0, 0, 0, 0]})


def test_multiclass_merge_across_class_sets_and_round_trip() -> None:
    rng = np.random.default_rng(13)
    classes = np.array(["a", "b", "c", "d", "e"])
    t = rng.choice(classes, 4_000)
    p = np.where(rng.random(4_000) < 0.7, t, rng.choice(classes, 4_000))
    whole = MulticlassCohort()
    whole.add(t, p)
    # parts that see different class sets ("e" only in the last part)
    mask_e = (t == "e") | (p == "e")
    chunks = [np.flatnonzero(~mask_e)[:1500], np.flatnonzero(~mask_e)[1500:], np.flatnonzero(mask_e)]
    parts = []
    for idx in chunks:
        m = MulticlassCohort()
        m.add(t[idx], p[idx])
        parts.append(m)
    assert "e" not in parts[0].classes
    for order in itertools.permutations(range(3)):
        acc = MulticlassCohort()
        for i in order:
            acc.merge(parts[i])
        np.testing.assert_array_equal(acc.confusion_matrix(), whole.confusion_matrix())
        assert acc.classes == whole.classes
    back = MulticlassCohort.from_dict(json.loads(json.dumps(whole.to_dict())))
    np.testing.assert_array_equal(back.confusion_matrix(), whole.confusion_matrix())
    assert back.confusion_dict() == whole.confusion_dict()


def test_regression_merge_and_round_trip() -> None:
    rng = np.random.default_rng(14)
    y = rng.lognormal(size=8_000)
    y[:7] = 0.0
    pred = y + rng.normal(0, 0.5, y.size)
    whole = RegressionCohort()
    whole.add(y, pred)
    parts = []
    for idx in np.array_split(np.arange(y.size), 4):
        r = RegressionCohort()
        r.add(y[idx], pred[idx])
        parts.append(r)
    for order in ((0, 1, 2, 3), (3, 1, 0, 2)):
        acc = RegressionCohort()
        for i in order:
            acc.merge(parts[i])
        assert (acc.n, acc.n_ape, acc.n_zero_target) == (whole.n, whole.n_ape, whole.n_zero_target)
        for name in ("sum_error", "sum_abs", "sum_sq", "sum_fourth", "sum_ape", "sum_ape_sq"):
            assert getattr(acc, name) == pytest.approx(getattr(whole, name), rel=1e-12)
        for q in (0.5, 0.9, 0.99):  # both are t-digests: agree within their rank errors
            v = acc.error_quantile(q).value
            assert abs(np.mean(np.abs(pred - y) <= v) - q) <= acc.abs_errors.rank_error
    back = RegressionCohort.from_dict(msgpack.unpackb(msgpack.packb(whole.to_dict())))
    assert back.mae().value == whole.mae().value and back.mape().n == whole.mape().n
    assert back.error_quantile(0.9).value == pytest.approx(whole.error_quantile(0.9).value, rel=1e-3)


# -- multiclass and regression: agreement with sklearn ------------------------------


def test_multiclass_metrics_match_sklearn() -> None:
    rng = np.random.default_rng(21)
    t = rng.integers(0, 6, 5_000)
    p = np.where(rng.random(5_000) < 0.6, t, rng.integers(0, 7, 5_000))  # 6: predicted, never true
    c = MulticlassCohort()
    c.add(t, p)
    assert c.classes == list(range(7))
    assert c.accuracy().value == skm.accuracy_score(t, p)
    ref = skm.f1_score(t, p, average="macro", zero_division=0)
    assert c.f1_macro().value == pytest.approx(ref, rel=1e-14)
    np.testing.assert_array_equal(c.confusion_matrix(), skm.confusion_matrix(t, p))
    labels = [0, 1, 2, 3, 4, 5, 6, 9]  # 9: neither support nor predictions (0/0 -> 0, still averaged)
    assert c.f1_macro(labels).value == pytest.approx(
        skm.f1_score(t, p, labels=labels, average="macro", zero_division=0), rel=1e-14)
    np.testing.assert_array_equal(c.confusion_matrix(labels), skm.confusion_matrix(t, p, labels=labels))


def test_multiclass_edge_cases() -> None:
    c = MulticlassCohort()
    assert c.accuracy().value is None and c.f1_macro().value is None
    c.add([True, False], [True, True])
    assert c.classes == [False, True] and c.accuracy().value == 0.5
    with pytest.raises(ValueError, match="lengths|predictions"):
        c.add(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="str, int or bool"):
        c.add(np.array([1.5]), np.array([1.5]))


def test_regression_metrics_match_sklearn() -> None:
    rng = np.random.default_rng(22)
    y = rng.gamma(2.0, 3.0, 30_000)
    pred = y * rng.lognormal(0, 0.2, y.size) + rng.normal(0, 0.3, y.size)
    c = RegressionCohort()
    c.add(y, pred)
    assert c.mae().value == pytest.approx(skm.mean_absolute_error(y, pred), rel=1e-12)
    assert c.mse().value == pytest.approx(skm.mean_squared_error(y, pred), rel=1e-12)
    assert c.rmse().value == pytest.approx(skm.root_mean_squared_error(y, pred), rel=1e-12)
    assert c.mape().value == pytest.approx(skm.mean_absolute_percentage_error(y, pred), rel=1e-12)
    assert c.mape().reason == "" and c.bias().value == pytest.approx(np.mean(pred - y), rel=1e-10)
    abs_e = np.abs(pred - y)
    for q, m in c.error_quantiles().items():  # sketch mode: rank within rank_error of q
        assert m.error_bound is None and "rank" in m.reason
        assert abs(np.mean(abs_e <= m.value) - q) <= c.abs_errors.rank_error


def test_regression_mape_excludes_zero_targets_and_exact_quantiles() -> None:
    y = np.array([0.0, 2.0, 4.0, 0.0, 5.0, 10.0])
    pred = np.array([1.0, 3.0, 3.0, 0.0, 5.0, 12.0])
    c = RegressionCohort()
    c.add(y, pred)
    nz = y != 0
    m = c.mape()
    assert m.value == pytest.approx(skm.mean_absolute_percentage_error(y[nz], pred[nz]), rel=1e-12)
    assert m.n == 4 and c.n_zero_target == 2 and m.reason == "excluded 2 example(s) with y_true == 0"
    abs_e = np.abs(pred - y)
    for q in (0.5, 0.9, 0.99):  # exact mode (few distinct values): numpy's inverted CDF
        assert c.error_quantile(q).value == np.quantile(abs_e, q, method="inverted_cdf")
        assert c.error_quantile(q).error_bound == 0.0
    only_zero = RegressionCohort()
    only_zero.add([0.0], [1.0])
    assert only_zero.mape().value is None and only_zero.mae().value == 1.0
    assert RegressionCohort().mae().reason == "no labeled examples"
    with pytest.raises(ValueError, match="finite"):
        c.add([np.inf], [1.0])


# -- label-free estimate (CBPE) ----------------------------------------------------


def test_cbpe_on_calibrated_scores_matches_realised_performance() -> None:
    rng = np.random.default_rng(31)
    s = rng.beta(0.6, 1.4, 50_000)
    y = rng.random(s.size) < s  # calibrated by construction
    c = BinaryCohort(threshold=0.4)
    c.add_predictions(s)
    est = estimate_cohort(c)  # before any label arrives
    c.add(s, y)
    assert abs(est.accuracy.value - c.accuracy().value) < 0.02
    assert abs(est.precision.value - c.precision().value) < 0.02
    assert abs(est.recall.value - c.recall().value) < 0.02
    assert abs(est.f1.value - c.f1().value) < 0.02
    assert abs(est.roc_auc.value - c.roc_auc().value) < 0.02
    # the histogram's expected counts are within their bound of the exact sums on raw scores
    e = expected_confusion(c.predicted, 0.4)
    hit = s >= 0.4
    assert abs(e.tp - s[hit].sum()) <= e.error_bound
    assert abs(e.fn - s[~hit].sum()) <= e.error_bound
    assert abs(e.fp - (1 - s[hit]).sum()) <= e.error_bound
    assert est.accuracy.error_bound < 1e-3


def test_cbpe_misses_concept_drift_by_design() -> None:
    rng = np.random.default_rng(32)
    s = rng.beta(2, 2, 20_000)
    y = rng.random(s.size) < 0.5  # labels no longer follow the scores
    c = BinaryCohort(0.5)
    c.add_predictions(s)
    c.add(s, y)
    assert estimate_cohort(c).accuracy.value - c.accuracy().value > 0.1


def test_cbpe_edge_cases() -> None:
    assert estimate_performance(np.zeros(grid.N_BINS, dtype=np.int64)).accuracy.reason == "no predictions"
    with pytest.raises(ValueError):
        estimate_performance(np.zeros(10))
    c = BinaryCohort(0.9)
    c.add_predictions([0.1, 0.2])
    est = estimate_cohort(c)
    assert est.precision.value is None and est.recall.value == 0.0


# -- compare ---------------------------------------------------------------------------


def _cohort(rng: np.random.Generator, n: int, shift: float, prevalence: float = 0.3) -> BinaryCohort:
    s, y = _binormal(rng, n, shift=shift, prevalence=prevalence)
    c = BinaryCohort()
    c.add(s, y)
    return c


def test_auc_drop_is_detected() -> None:
    rng = np.random.default_rng(41)
    base, cur = _cohort(rng, 5_000, 1.5), _cohort(rng, 5_000, 1.0)
    for method in ("hanley_mcneil", "delong"):
        r = auc_drop_test(base, cur, se_method=method)
        assert r.p_value < 1e-6 and r.status is Status.DRIFT
        assert r.effect_size == pytest.approx(base.roc_auc().value - cur.roc_auc().value)
        assert r.check == "auc_drop" and r.n_current == 5_000
        # an improvement never pages (one-sided)
        assert auc_drop_test(cur, base, se_method=method).p_value > 0.999
        # a drop below the floor does not page however large the cohorts
        assert auc_drop_test(base, cur, floor=0.2, se_method=method).status is Status.OK


def test_equal_cohorts_do_not_page() -> None:
    rng = np.random.default_rng(42)
    base = _cohort(rng, 5_000, 1.2)
    assert auc_drop_test(base, base).p_value == pytest.approx(0.5, abs=0.01)  # effect 0
    assert auc_drop_test(base, base, floor=0.05).p_value > 0.99
    assert auc_drop_test(base, _cohort(rng, 5_000, 1.2)).p_value > 0.05
    assert log_loss_increase_test(base, base).p_value == 0.5
    assert accuracy_drop_test(base, base).p_value == 0.5


@pytest.mark.parametrize("method", ["hanley_mcneil", "delong"])
def test_auc_test_is_calibrated_under_h0(method: str) -> None:
    rng = np.random.default_rng(43)
    p = []
    for _ in range(200):
        r = auc_drop_test(_cohort(rng, 1_000, 1.0), _cohort(rng, 1_000, 1.0), se_method=method)
        p.append(r.p_value)
    fpr = np.mean(np.array(p) < 0.05)
    assert 0.02 <= fpr <= 0.09, fpr


def test_auc_standard_errors_agree_with_the_sampling_spread() -> None:
    rng = np.random.default_rng(44)
    cohorts = [_cohort(rng, 2_000, 1.0) for _ in range(200)]
    aucs = np.array([c.roc_auc().value for c in cohorts])
    hm = np.mean([hanley_mcneil_se(c.roc_auc().value, c.n_pos, c.n_neg) for c in cohorts])
    dl = np.mean([delong_se(c) for c in cohorts])
    # the empirical SD of 200 AUCs is itself uncertain by ~5 %
    assert hm == pytest.approx(aucs.std(ddof=1), rel=0.15)
    assert dl == pytest.approx(aucs.std(ddof=1), rel=0.15)


def test_auc_insufficient_data() -> None:
    rng = np.random.default_rng(45)
    small = _cohort(rng, 100, 1.0, prevalence=0.1)  # about 10 positives
    r = auc_drop_test(_cohort(rng, 5_000, 1.0), small)
    assert r.status is Status.INSUFFICIENT_DATA and "current" in r.reason and r.p_value is None
    single = BinaryCohort()
    single.add(np.full(100, 0.3), np.zeros(100))
    assert auc_drop_test(single, small).status is Status.INSUFFICIENT_DATA
    assert log_loss_increase_test(BinaryCohort(), small).status is Status.INSUFFICIENT_DATA


def test_log_loss_and_accuracy_tests() -> None:
    rng = np.random.default_rng(46)
    s = rng.uniform(0.02, 0.98, 5_000)
    base, cur, same = BinaryCohort(), BinaryCohort(), BinaryCohort()
    base.add(s, rng.random(s.size) < s)
    same.add(s, rng.random(s.size) < s)
    flipped = rng.random(s.size) < 0.25  # a quarter of the labels no longer follow the score
    cur.add(s, np.where(flipped, rng.random(s.size) < 0.5, rng.random(s.size) < s))
    r = log_loss_increase_test(base, cur, floor=0.01)
    assert r.status is Status.DRIFT and r.effect_size > 0.01
    assert log_loss_increase_test(base, same).p_value > 0.001
    a = accuracy_drop_test(base, cur)
    assert a.status is Status.DRIFT and a.effect_size == pytest.approx(
        base.accuracy().value - cur.accuracy().value)
    assert accuracy_drop_test(base, cur, floor=0.3).status is Status.OK


def test_accuracy_test_on_multiclass_is_calibrated() -> None:
    rng = np.random.default_rng(47)
    rejections = 0
    for _ in range(200):
        a, b = MulticlassCohort(), MulticlassCohort()
        for c in (a, b):
            t = rng.integers(0, 3, 800)
            c.add(t, np.where(rng.random(800) < 0.8, t, (t + 1) % 3))
        rejections += accuracy_drop_test(a, b).p_value < 0.05
    assert 0.02 <= rejections / 200 <= 0.09


def test_regression_increase_tests() -> None:
    rng = np.random.default_rng(48)
    y = rng.normal(size=5_000)
    base, worse, same = RegressionCohort(), RegressionCohort(), RegressionCohort()
    base.add(y, y + rng.normal(0, 1.0, y.size))
    worse.add(y, y + rng.normal(0, 1.2, y.size))
    same.add(y, y + rng.normal(0, 1.0, y.size))
    for test in (mae_increase_test, rmse_increase_test):
        r = test(base, worse)
        assert r.status is Status.DRIFT and r.p_value < 1e-6 and r.effect_size > 0.1
        assert test(worse, base).p_value > 0.999  # improvement
        assert test(base, same).p_value > 0.01
        assert test(base, worse, floor=1.0).status is Status.OK
        assert test(RegressionCohort(), worse).status is Status.INSUFFICIENT_DATA
    mae_gap, rmse_gap = worse.mae().value - base.mae().value, worse.rmse().value - base.rmse().value
    assert mae_increase_test(base, worse).effect_size == pytest.approx(mae_gap)
    assert rmse_increase_test(base, worse).effect_size == pytest.approx(rmse_gap)


def test_one_sided_p() -> None:
    assert one_sided_p(0.0, 1.0) == 0.5
    assert one_sided_p(3.0, 1.0, floor=1.0) == pytest.approx(1 - 0.9772498680518208)
    assert one_sided_p(0.5, 0.0, floor=1.0) == 1.0 and one_sided_p(1.5, 0.0, floor=1.0) == 0.0
    assert one_sided_p(1.0, math.inf) == 1.0


# -- maturity -------------------------------------------------------------------------


def test_maturity() -> None:
    m = maturity(950, 1000, 10.0, 0.95, 86_400.0)
    assert m.mature and m.labeled_fraction == 0.95
    m = maturity(10, 1000, 86_400.0, 0.95, 86_400.0)
    assert m.mature and "horizon" in m.reason
    m = maturity(10, 1000, 3_600.0, 0.95, 86_400.0)
    assert not m.mature and m.labeled_fraction == 0.01 and "waiting" in m.reason
    m = maturity(0, 0, 1e9, 0.5, 60.0)
    assert not m.mature and m.labeled_fraction is None
    assert maturity(1200, 1000, 0.0, 1.0, 60.0).labeled_fraction == 1.0
    assert not maturity(1, 1000, -5.0, 0.5, 60.0).mature
    for bad in ((-1, 10, 0.0, 0.5, 60.0), (1, 10, math.nan, 0.5, 60.0), (1, 10, 0.0, 0.0, 60.0),
                (1, 10, 0.0, 1.5, 60.0), (1, 10, 0.0, 0.5, 0.0)):
        with pytest.raises(ValueError):
            maturity(*bad)


# -- the error histogram of the joiner's regression cohorts ----------------------------


@pytest.mark.parametrize("kind", ["lognormal", "pareto", "discrete_with_zeros", "tiny_and_huge"])
def test_log_histogram_quantiles_are_within_their_relative_accuracy(kind: str) -> None:
    rng = np.random.default_rng(31)
    x = {"lognormal": rng.lognormal(0, 2, 20_000),
         "pareto": rng.pareto(1.2, 20_000),
         "discrete_with_zeros": rng.integers(0, 5, 20_000).astype(float),
         "tiny_and_huge": np.concatenate([rng.uniform(1e-12, 1e-9, 500), rng.uniform(1e9, 1e12, 500)])}[kind]
    h = LogHistogram(0.01)
    h.update(x)
    assert h.count == x.size
    for q in (0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0):
        exact = float(np.quantile(x, q, method="inverted_cdf"))
        got = h.quantile(q)
        assert abs(got - exact) <= 0.01 * exact * (1 + 1e-12), (q, got, exact)  # the guarantee
        assert abs(got - exact) <= h.error_bound(got) * (1 + 1e-12)  # the bound reported with it


def test_log_histogram_merges_and_subtracts_exactly() -> None:
    rng = np.random.default_rng(32)
    x = np.abs(rng.normal(0, 3, 6_000))
    x[:50] = 0.0
    whole = LogHistogram()
    whole.update(x)
    parts = [LogHistogram() for _ in range(3)]
    for h, idx in zip(parts, np.array_split(np.arange(x.size), 3), strict=True):
        h.update(x[idx])
    merged = LogHistogram()
    for h in parts[::-1]:
        merged.merge(h)
    assert merged.to_dict() == whole.to_dict()
    for v in x[3_000:]:  # removing what was added leaves the first half
        whole.subtract_value(float(v))
    first = LogHistogram()
    first.update(x[:3_000])
    assert whole.to_dict() == first.to_dict()
    assert LogHistogram.from_dict(json.loads(json.dumps(first.to_dict()))).to_dict() == first.to_dict()
    with pytest.raises(ValueError):
        LogHistogram().subtract_value(1.0)  # never added
    with pytest.raises(ValueError):
        merged.merge(LogHistogram(0.02))  # other buckets
    for bad in ([-1.0], [math.nan], [math.inf]):
        with pytest.raises(ValueError):
            LogHistogram().update(bad)
    with pytest.raises(ValueError):
        LogHistogram().quantile(0.5)  # empty
    with pytest.raises(ValueError):
        LogHistogram(1.0)


def test_regression_cohort_with_a_log_histogram() -> None:
    rng = np.random.default_rng(33)
    y = rng.lognormal(size=5_000)
    pred = y + rng.normal(0, 0.5, y.size)
    c = RegressionCohort(LogHistogram(0.01))
    c.add(y[:2_500], pred[:2_500])
    other = RegressionCohort(LogHistogram(0.01))
    other.add(y[2_500:], pred[2_500:])
    c.merge(other)
    assert c.mae().value == pytest.approx(skm.mean_absolute_error(y, pred), rel=1e-12)
    for q, m in c.error_quantiles().items():
        exact = float(np.quantile(np.abs(pred - y), q, method="inverted_cdf"))
        assert abs(m.value - exact) <= m.error_bound and m.error_bound <= 0.0102 * m.value
    back = RegressionCohort.from_dict(msgpack.unpackb(msgpack.packb(c.to_dict())))
    assert isinstance(back.abs_errors, LogHistogram)
    assert back.error_quantile(0.9).value == c.error_quantile(0.9).value
    with pytest.raises(ValueError):
        c.merge(RegressionCohort())  # a t-digest cohort: the sketches do not merge


# -- slice regressions: the minimum sample rule -----------------------------------------


def test_sample_shortfall() -> None:
    a, b = BinaryCohort(), BinaryCohort()
    a.add([0.2] * 150 + [0.8] * 50, [0] * 150 + [1] * 50)
    b.add([0.2] * 190 + [0.8] * 10, [0] * 190 + [1] * 10)
    assert sample_shortfall(a, a, 200, 50) is None
    assert sample_shortfall(a, a, 201, 0).startswith("current cohort has 200 labeled")
    assert "10 positives" in sample_shortfall(a, b, 200, 20)
    assert sample_shortfall(b, a, 200, 20).startswith("baseline")
    m = MulticlassCohort()
    m.add(["x"] * 10, ["x"] * 10)
    assert sample_shortfall(m, m, 10, 1_000) is None  # no classes to count: the labeled minimum only
    with pytest.raises(ValueError):
        sample_shortfall(a, a, -1, 0)
    r = accuracy_drop_test(a, b, "__performance__")
    [s] = for_slice([r], "country:DE", "too small")
    assert (s.check, s.status) == ("accuracy_drop@country:DE", Status.INSUFFICIENT_DATA)
    assert (s.feature, s.reason) == ("__performance__", "too small")
    [t] = for_slice([r], "country:DE")
    assert (t.check, t.p_value, t.effect_size) == ("accuracy_drop@country:DE", r.p_value, r.effect_size)
