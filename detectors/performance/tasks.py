"""The label-joined checks of one model task: which tests compare a cohort with its baseline.

binary: AUC drop (Hanley-McNeil) and log-loss increase (CLT); multiclass: accuracy drop
(two-proportion z); regression: MAE increase (CLT on the absolute errors). Their results
carry the feature :data:`PERFORMANCE`, so the alert policy treats a model's performance as
one alert series per check.
"""

from __future__ import annotations

from typing import Any

from detectors.performance.compare import (
    accuracy_drop_test,
    auc_drop_test,
    log_loss_increase_test,
    mae_increase_test,
)
from detectors.result import TestResult

PERFORMANCE = "__performance__"
"""The feature name of every label-joined performance result."""
PERFORMANCE_CHECKS = frozenset({"auc_drop", "log_loss_increase", "accuracy_drop", "mae_increase"})
"""The checks :func:`task_tests` may return (each may alert)."""


def task_tests(task: str, baseline: Any, current: Any, *, alpha: float, auc_floor: float,
               log_loss_floor: float, accuracy_floor: float, mae_floor: float | None,
               mae_relative_floor: float) -> list[TestResult]:
    """The task's checks of a current cohort against its baseline.

    Parameters
    ----------
    task : {"binary", "multiclass", "regression"}
    baseline, current : BinaryCohort, MulticlassCohort or RegressionCohort
        The two cohorts' metric accumulators (of the task's kind).
    alpha : float
        Level at which each result's status is read (``FLEETWATCH_ALPHA``, as the feature
        tests; whether a result alerts is the FDR gate's decision).
    auc_floor, log_loss_floor, accuracy_floor : float
        Effects tolerated under the null (binary AUC drop, binary log-loss increase,
        multiclass accuracy drop).
    mae_floor : float or None
        Regression: tolerated MAE increase; None: ``mae_relative_floor`` times the
        baseline's MAE (0 when the baseline has none).
    mae_relative_floor : float

    Returns
    -------
    list of TestResult
        binary: ``auc_drop`` and ``log_loss_increase``; multiclass: ``accuracy_drop``;
        regression: ``mae_increase``.

    Examples
    --------
    >>> from detectors.performance.regression import RegressionCohort
    >>> base, cur = RegressionCohort(), RegressionCohort()
    >>> base.add([1.0, 2.0, 3.0, 4.0], [1.1, 2.1, 2.9, 4.0])
    >>> cur.add([1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 2.5, 4.5])
    >>> [r.check for r in task_tests("regression", base, cur, alpha=0.05, auc_floor=0.02,
    ...                              log_loss_floor=0.05, accuracy_floor=0.02, mae_floor=None,
    ...                              mae_relative_floor=0.1)]
    ['mae_increase']
    """
    if task == "multiclass":
        return [accuracy_drop_test(baseline, current, PERFORMANCE, floor=accuracy_floor, alpha=alpha)]
    if task == "regression":
        floor = mae_floor
        if floor is None:
            base_mae = baseline.mae().value
            floor = mae_relative_floor * base_mae if base_mae is not None else 0.0
        return [mae_increase_test(baseline, current, PERFORMANCE, floor=floor, alpha=alpha)]
    return [auc_drop_test(baseline, current, PERFORMANCE, floor=auc_floor, alpha=alpha),
            log_loss_increase_test(baseline, current, PERFORMANCE, floor=log_loss_floor, alpha=alpha)]
