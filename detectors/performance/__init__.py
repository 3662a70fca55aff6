"""Label-joined performance monitoring: mergeable cohorts, metrics, maturity, tests and label-free estimates.

Performance is computed on *cohorts* keyed by prediction window; labels join
a cohort as they arrive, and it is judged only once mature. Every cohort is
fixed-size, mergeable (replicas and 5-minute -> hour -> day roll-ups merge to
the one-pass answer) and serialises to plain data. Pure code: no I/O, no clock.

Modules
-------
:mod:`~detectors.performance.grid`
    The fixed 5,018-bin score grid over [0, 1] every binary cohort bins on
    (2.5e-4 wide in the middle, geometric toward 0 and 1), with its
    resolution.
:mod:`~detectors.performance.metric`
    ``Metric``: a value, or ``None`` with the reason it is undefined, plus
    the binning error bound.
:mod:`~detectors.performance.binary`
    ``BinaryCohort``: per-label score histograms, confusion counts at the
    decision threshold, exact log-loss / Brier sums; ROC AUC, average
    precision, log loss, Brier score, ECE with its reliability table,
    precision / recall / F1, accuracy, positive rates.
:mod:`~detectors.performance.multiclass`
    ``MulticlassCohort``: confusion matrix over the observed classes;
    accuracy, macro-F1 (sklearn's ``zero_division=0`` convention).
:mod:`~detectors.performance.regression`
    ``RegressionCohort``: error sums (MAE, MSE, RMSE, bias, MAPE without
    y = 0) and a sketch of |error| for p50 / p90 / p99 (a ``NumericSketch``,
    or a ``LogHistogram`` when contributions must also be subtracted).
:mod:`~detectors.performance.loghist`
    ``LogHistogram``: counts in fixed log-spaced buckets (DDSketch's
    scheme); quantiles within a relative error, exact merge *and* subtract.
:mod:`~detectors.performance.slices`
    The minimum sample rule of slice regressions (``sample_shortfall``) and
    slice check names (``for_slice``: ``<check>@<key>:<value>``).
:mod:`~detectors.performance.maturity`
    ``maturity``: is a cohort's labeled fraction at its expectation, or its
    age past the label horizon?
:mod:`~detectors.performance.compare`
    One-sided baseline-vs-current tests with an effect floor returning
    ``TestResult``: AUC drop (Hanley & McNeil or DeLong standard errors),
    log-loss increase, accuracy drop, MAE and RMSE increase.
:mod:`~detectors.performance.estimate`
    Label-free CBPE estimates (NannyML) of accuracy, precision, recall, F1
    and ROC AUC from the all-predictions score histogram, assuming
    calibrated scores; a multiclass model's expected accuracy (mean
    top-class probability).
"""

from detectors.performance.binary import BinaryCohort, Calibration, CalibrationBin
from detectors.performance.compare import (
    accuracy_drop_test,
    auc_drop_test,
    log_loss_increase_test,
    mae_increase_test,
    rmse_increase_test,
)
from detectors.performance.estimate import (
    PerformanceEstimate,
    estimate_cohort,
    estimate_multiclass_accuracy,
    estimate_performance,
)
from detectors.performance.loghist import LogHistogram
from detectors.performance.maturity import Maturity, maturity
from detectors.performance.metric import Metric
from detectors.performance.multiclass import MulticlassCohort
from detectors.performance.regression import RegressionCohort
from detectors.performance.slices import for_slice, sample_shortfall

__all__ = [
    "BinaryCohort",
    "Calibration",
    "CalibrationBin",
    "LogHistogram",
    "Maturity",
    "Metric",
    "MulticlassCohort",
    "PerformanceEstimate",
    "RegressionCohort",
    "accuracy_drop_test",
    "auc_drop_test",
    "estimate_cohort",
    "estimate_multiclass_accuracy",
    "estimate_performance",
    "for_slice",
    "log_loss_increase_test",
    "mae_increase_test",
    "maturity",
    "rmse_increase_test",
    "sample_shortfall",
]
