"""What a label-joined cohort reports: realized metrics and label-free estimates, per task.

The API's performance view and the joiner's cohort evaluations show the same figures,
computed here from a cohort's metric accumulator (:class:`~detectors.performance.binary.BinaryCohort`,
:class:`~detectors.performance.multiclass.MulticlassCohort` or
:class:`~detectors.performance.regression.RegressionCohort`). A metric that is undefined
on the cohort (one class only, no labels, ...) is ``None`` with a ``<name>_reason``.
"""

from __future__ import annotations

from typing import Any

from detectors.performance.binary import BinaryCohort
from detectors.performance.estimate import estimate_cohort, estimate_multiclass_accuracy
from detectors.performance.metric import Metric

MAX_PER_CLASS_F1 = 50
"""Multiclass cohorts report per-class F1 up to this many classes."""


def _put(out: dict[str, Any], name: str, m: Metric) -> None:
    out[name] = m.value
    if m.value is None:
        out[f"{name}_reason"] = m.reason


def cohort_metrics(c: BinaryCohort) -> dict[str, Any]:
    """Realized metrics of a binary cohort (None with a reason when undefined).

    Examples
    --------
    >>> c = BinaryCohort(threshold=0.5)
    >>> c.add([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    >>> m = cohort_metrics(c)
    >>> m["roc_auc"], m["accuracy"], m["positive_rate"]
    (0.75, 0.75, 0.5)
    """
    out: dict[str, Any] = {}
    for name in ("roc_auc", "log_loss", "brier_score", "ece", "precision", "recall", "f1",
                 "accuracy", "average_precision"):
        _put(out, name, getattr(c, name)())
    out["positive_rate"] = c.n_pos / c.n if c.n else None
    return out


def realized_metrics(task: str, accumulator: Any) -> dict[str, Any]:
    """Realized metrics of a cohort of any task (None with a ``*_reason`` when undefined).

    Parameters
    ----------
    task : {"binary", "multiclass", "regression"}
    accumulator : BinaryCohort, MulticlassCohort or RegressionCohort
        The cohort's metric accumulator.

    Returns
    -------
    dict
        binary: :func:`cohort_metrics`; multiclass: accuracy, macro-F1 and per-class F1
        (up to :data:`MAX_PER_CLASS_F1` classes); regression: MAE, RMSE, MAPE, bias and the
        p50 / p90 / p99 absolute errors (within 1 %).

    Examples
    --------
    >>> from detectors.performance.regression import RegressionCohort
    >>> c = RegressionCohort()
    >>> c.add([1.0, 2.0, 0.0, 4.0], [1.5, 1.0, 0.5, 4.0])
    >>> m = realized_metrics("regression", c)
    >>> m["mae"], m["bias"]
    (0.5, 0.0)
    """
    c = accumulator
    if task == "binary":
        return cohort_metrics(c)
    out: dict[str, Any] = {}
    if task == "multiclass":
        _put(out, "accuracy", c.accuracy())
        _put(out, "macro_f1", c.f1_macro())
        if len(c.classes) <= MAX_PER_CLASS_F1:
            out["per_class_f1"] = {str(k): v for k, v in c.per_class_f1().items()}
        return out
    for name in ("mae", "rmse", "mape", "bias"):
        _put(out, name, getattr(c, name)())
    for q, m in c.error_quantiles().items():
        _put(out, f"abs_error_p{round(q * 100):d}", m)
    return out


def estimated_metrics(task: str, accumulator: Any, confidence_sum: float = 0.0,
                      confidence_n: int = 0) -> dict[str, Any]:
    """Label-free estimates of a cohort's performance.

    Parameters
    ----------
    task : {"binary", "multiclass", "regression"}
    accumulator : BinaryCohort, MulticlassCohort or RegressionCohort
    confidence_sum, confidence_n : float, int
        Multiclass: sum and count of the predictions' top-class probabilities.

    Returns
    -------
    dict
        binary: CBPE accuracy, precision, recall, F1 and ROC AUC
        (:func:`~detectors.performance.estimate.estimate_cohort`); multiclass: expected
        accuracy, the mean top-class probability; regression: none.

    Examples
    --------
    >>> estimated_metrics("multiclass", None, confidence_sum=3.0, confidence_n=4)
    {'accuracy': 0.75}
    >>> estimated_metrics("regression", None)
    {}
    """
    if task == "binary":
        e = estimate_cohort(accumulator)
        return {k: getattr(e, k).value for k in ("accuracy", "precision", "recall", "f1", "roc_auc")}
    if task == "multiclass":
        return {"accuracy": estimate_multiclass_accuracy(confidence_sum, confidence_n).value}
    return {}
