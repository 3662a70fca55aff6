"""Label-free performance estimates from a score histogram (CBPE, assuming calibrated scores).

Confidence-based performance estimation (CBPE, NannyML): if the model's
scores are calibrated, i.e. P(y = 1 | s) = s, a prediction with score s is
a true positive with probability s when predicted positive (and a false
positive with probability 1 - s), a false negative with probability s when
predicted negative (and a true negative with probability 1 - s). Summing
these probabilities gives the expected confusion matrix, hence expected
accuracy, precision, recall and F1, before a single label has arrived; the
same weights over every threshold give an expected ROC curve.

Everything here reads the all-predictions histogram a
:class:`~detectors.performance.binary.BinaryCohort` keeps on the fixed grid
of :mod:`detectors.performance.grid` (``cohort.predicted``), so the estimate
runs on a cohort as soon as its predictions are counted.

Assumptions (from NannyML's documentation): the scores are calibrated on
the current traffic, which survives covariate shift inside the training
domain but not concept drift (P(y | x) changing) nor shift to unseen input
regions; and the cohort is large enough that realised metrics are close to
their expectation. Under concept drift the estimate stays put while the
realised performance drops; that is what the label-joined tests of
:mod:`detectors.performance.compare` are for.

References
----------
NannyML, "Estimation of Performance of the Monitored Model: Confidence-based
Performance Estimation (CBPE)", https://nannyml.readthedocs.io/en/stable/how_it_works/performance_estimation.html
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.performance.binary import BinaryCohort
from detectors.performance.grid import EDGES, MIDPOINTS, N_BINS, WIDTHS, bin_index
from detectors.performance.metric import Metric, undefined

NO_PREDICTIONS = "no predictions"


@dataclass(frozen=True, slots=True)
class ExpectedConfusion:
    """Expected confusion counts at a threshold under calibrated scores.

    Attributes
    ----------
    tp, fp, tn, fn : float
        E[TP] = sum_{s_i >= t} s_i, E[FP] = sum_{s_i >= t} (1 - s_i),
        E[FN] = sum_{s_i < t} s_i, E[TN] = sum_{s_i < t} (1 - s_i).
    n : int
        Predictions.
    error_bound : float
        Bound on each cell's error (in examples) from the histogram: scores
        taken at their bin's midpoint (half a bin width each) plus the
        threshold's bin, split by linear interpolation when the threshold
        is not a grid edge.
    """

    tp: float
    fp: float
    tn: float
    fn: float
    n: int
    error_bound: float


@dataclass(frozen=True, slots=True)
class PerformanceEstimate:
    """CBPE estimates of one cohort; see :func:`estimate_performance`."""

    accuracy: Metric
    precision: Metric
    recall: Metric
    f1: Metric
    roc_auc: Metric
    confusion: ExpectedConfusion


def _check_counts(counts: Any) -> np.ndarray:
    c = np.asarray(counts)
    if c.shape != (N_BINS,) or (c < 0).any():
        raise ValueError(f"counts must be {N_BINS} non-negative bin counts on the score grid")
    return c.astype(np.float64)


def expected_confusion(counts: Any, threshold: float = 0.5) -> ExpectedConfusion:
    """Expected confusion counts of a score histogram at ``threshold``.

    Parameters
    ----------
    counts : array-like of int, shape (N_BINS,)
        Predictions per bin of :data:`detectors.performance.grid.EDGES`
        (e.g. ``BinaryCohort.predicted``).
    threshold : float
        Decision threshold in [0, 1]: predicted positive when ``s >= threshold``.

    Returns
    -------
    ExpectedConfusion

    Raises
    ------
    ValueError
        If ``counts`` has the wrong shape or a negative count, or the
        threshold is outside [0, 1].

    Notes
    -----
    Each bin contributes at its midpoint m_b: c_b m_b to E[TP] (above the
    threshold) or E[FN] (below), c_b (1 - m_b) to E[FP] or E[TN]. The bin
    holding a threshold that is not a grid edge is split in proportion to
    its width on each side. NannyML, CBPE, binary classification (see the
    module references).

    Examples
    --------
    >>> from detectors.performance.grid import histogram
    >>> e = expected_confusion(histogram([0.9, 0.8, 0.3, 0.1]), 0.5)
    >>> round(e.tp, 3), round(e.fp, 3), round(e.fn, 3), round(e.tn, 3)
    (1.7, 0.3, 0.4, 1.6)
    """
    c = _check_counts(counts)
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold}")
    k = int(bin_index(np.array([threshold]))[0])
    above = np.zeros(N_BINS)
    above[k + 1:] = 1.0
    split = 0.0
    if EDGES[k] == threshold:
        above[k] = 1.0
    else:  # uniform within the threshold's bin
        above[k] = (EDGES[k + 1] - threshold) / WIDTHS[k]
        split = float(c[k])
    w1 = c * MIDPOINTS
    w0 = c - w1
    tp, fp = float(w1 @ above), float(w0 @ above)
    fn, tn = float(w1.sum()) - tp, float(w0.sum()) - fp
    bound = float(c @ WIDTHS) / 2.0 + split
    return ExpectedConfusion(max(tp, 0.0), max(fp, 0.0), max(tn, 0.0), max(fn, 0.0), int(c.sum()), bound)


def _bounded(f: Any, args: tuple[float, ...], lo_args: tuple[float, ...], hi_args: tuple[float, ...],
             reason: str, n: int) -> Metric:
    """f(*args) with the error bound from evaluating it at the two extreme corners."""
    value = f(*args)
    if value is None:
        return undefined(reason, n)
    ends = [v for v in (f(*lo_args), f(*hi_args)) if v is not None]
    bound = max((abs(v - value) for v in ends), default=0.0)
    return Metric(min(max(value, 0.0), 1.0), "", n, bound)


def _div(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def expected_roc_auc(counts: Any) -> Metric:
    """CBPE estimate of ROC AUC: each prediction a positive with weight s and a negative with weight 1 - s.

    Parameters
    ----------
    counts : array-like of int, shape (N_BINS,)
        Predictions per grid bin.

    Returns
    -------
    Metric
        Undefined without predictions. ``error_bound`` None: weights use
        bin midpoints and pairs inside a bin count one half.

    Notes
    -----
    With w1_b = c_b m_b and w0_b = c_b (1 - m_b):

        AUC = sum_b w1_b (W0_{<b} + w0_b / 2) / (W1 W0),  W0_{<b} = sum_{c<b} w0_c,

    the area under the expected ROC curve (E[TPR](t), E[FPR](t)) over all
    thresholds, as NannyML's CBPE computes it (a ratio of expectations,
    which differs from E[AUC] by O(1/n)).

    Examples
    --------
    >>> from detectors.performance.grid import histogram
    >>> round(expected_roc_auc(histogram([0.1, 0.9])).value, 3)
    0.9
    """
    c = _check_counts(counts)
    n = int(c.sum())
    if n == 0:
        return undefined(NO_PREDICTIONS)
    w1 = c * MIDPOINTS
    w0 = c - w1
    total1, total0 = float(w1.sum()), float(w0.sum())
    if total1 <= 0 or total0 <= 0:
        return undefined("single class expected", n)
    below = np.cumsum(w0) - w0
    auc = float(w1 @ (below + 0.5 * w0)) / (total1 * total0)
    return Metric(min(max(auc, 0.0), 1.0), "", n, None)


def estimate_performance(counts: Any, threshold: float = 0.5) -> PerformanceEstimate:
    """CBPE estimates of accuracy, precision, recall, F1 (at ``threshold``) and ROC AUC.

    Parameters
    ----------
    counts : array-like of int, shape (N_BINS,)
        Predictions per grid bin (``BinaryCohort.predicted``).
    threshold : float
        The model's decision threshold.

    Returns
    -------
    PerformanceEstimate
        Each metric's ``error_bound`` (except ROC AUC's) propagates the
        histogram's bound on the expected counts (:class:`ExpectedConfusion`)
        through the metric; it excludes the estimate's statistical error and
        any miscalibration. Precision is undefined when no prediction is
        above the threshold, recall when no positive is expected.

    Raises
    ------
    ValueError
        See :func:`expected_confusion`.

    Notes
    -----
    accuracy = (E[TP] + E[TN]) / n, precision = E[TP] / (E[TP] + E[FP]),
    recall = E[TP] / (E[TP] + E[FN]), F1 = 2 E[TP] / (2 E[TP] + E[FP] + E[FN])
    (ratios of expectations, as NannyML's CBPE).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = rng.beta(2, 5, size=100_000)  # calibrated: labels drawn with P(y=1) = s
    >>> y = rng.random(s.size) < s
    >>> c = BinaryCohort(0.5); c.add_predictions(s); c.add(s, y)
    >>> est = estimate_performance(c.predicted, 0.5)
    >>> round(est.accuracy.value, 3), round(c.accuracy().value, 3)
    (0.734, 0.734)
    """
    e = expected_confusion(counts, threshold)
    if e.n == 0:
        none = undefined(NO_PREDICTIONS)
        return PerformanceEstimate(none, none, none, none, none, e)
    d = e.error_bound
    n = e.n
    acc = Metric((e.tp + e.tn) / n, "", n, min(d / n, 1.0))

    def lo(v: float) -> float:
        return max(v - d, 0.0)

    def precision(tp: float, fp: float) -> float | None:
        return _div(tp, tp + fp)

    def recall(tp: float, fn: float) -> float | None:
        return _div(tp, tp + fn)

    def f1(tp: float, fp: float, fn: float) -> float | None:
        return _div(2 * tp, 2 * tp + fp + fn)

    prec = _bounded(precision, (e.tp, e.fp), (lo(e.tp), e.fp + d), (e.tp + d, lo(e.fp)),
                    "no predicted positives", n)
    rec = _bounded(recall, (e.tp, e.fn), (lo(e.tp), e.fn + d), (e.tp + d, lo(e.fn)),
                   "no expected positives", n)
    f = _bounded(f1, (e.tp, e.fp, e.fn), (lo(e.tp), e.fp + d, e.fn + d), (e.tp + d, lo(e.fp), lo(e.fn)),
                 "no expected positives and no predicted positives", n)
    return PerformanceEstimate(acc, prec, rec, f, expected_roc_auc(counts), e)


def estimate_cohort(cohort: BinaryCohort) -> PerformanceEstimate:
    """:func:`estimate_performance` on a cohort's all-predictions histogram at its threshold.

    Examples
    --------
    >>> c = BinaryCohort(0.5); c.add_predictions([0.9, 0.8, 0.3, 0.1])
    >>> round(estimate_cohort(c).accuracy.value, 3)
    0.825
    """
    return estimate_performance(cohort.predicted, cohort.threshold)


def estimate_multiclass_accuracy(confidence_sum: float, n: int) -> Metric:
    """Label-free expected accuracy of a multiclass classifier: the mean top-class probability.

    Parameters
    ----------
    confidence_sum : float
        Sum over predictions of the probability the model gave its predicted
        (top) class.
    n : int
        Predictions summed, >= 0.

    Returns
    -------
    Metric
        E[accuracy] = (1/n) sum_i max_c p_i(c); undefined without predictions
        that carried class probabilities.

    Notes
    -----
    Under calibration (P(y = c | p) = p(c)) prediction i is correct with
    probability max_c p_i(c), the multiclass form of CBPE's expected
    confusion; the same assumptions apply (no concept drift).

    Examples
    --------
    >>> estimate_multiclass_accuracy(2.7, 3).value
    0.9
    >>> estimate_multiclass_accuracy(0.0, 0).reason
    'no predictions with class probabilities'
    """
    if n <= 0:
        return undefined("no predictions with class probabilities")
    return Metric(min(max(confidence_sum / n, 0.0), 1.0), "", n)
