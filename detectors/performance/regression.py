"""Label-joined performance of a regression model: the mergeable ``RegressionCohort``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from detectors.performance.loghist import LogHistogram
from detectors.performance.metric import Metric, undefined
from sketches.numeric import NumericSketch

NO_LABELS = "no labeled examples"
DEFAULT_QUANTILES = (0.5, 0.9, 0.99)


def _finite(value: float, n: int, reason: str = "") -> Metric:
    if not math.isfinite(value):
        return undefined("a sum overflowed float64 (errors beyond ~1e154)", n)
    return Metric(float(value), reason, n)


class RegressionCohort:
    """Mergeable error sums and an error sketch of a regression model.

    Holds, over the labeled examples of one cohort, with e_i = y_pred_i - y_true_i:
    n, sum e, sum |e|, sum e^2, sum e^4 (for the standard error of the MSE),
    sum |e| / |y| and its square over the examples with y != 0, the number
    with y == 0, and a sketch of |e| for quantiles: a
    :class:`~sketches.numeric.NumericSketch` (default; rank error) or a
    :class:`~detectors.performance.loghist.LogHistogram` (relative value
    error; counts that also subtract, as the label joiner's Redis cohorts
    need).

    Parameters
    ----------
    abs_errors : NumericSketch or LogHistogram, optional
        The (empty) sketch |e| goes into; default a new ``NumericSketch``.

    Attributes
    ----------
    n, n_ape, n_zero_target : int
        Labeled examples; those entering MAPE; those excluded from it (y == 0).
    sum_error, sum_abs, sum_sq, sum_fourth, sum_ape, sum_ape_sq : float
    abs_errors : NumericSketch or LogHistogram

    Notes
    -----
    Sums and counts merge by addition, the sketch by
    :meth:`~sketches.numeric.NumericSketch.merge`; counts are exact, sums
    exact up to float64 rounding, quantiles within the sketch's rank error.

    Examples
    --------
    >>> c = RegressionCohort()
    >>> c.add([1.0, 2.0, 0.0, 4.0], [1.5, 1.0, 0.5, 4.0])
    >>> c.mae().value, c.rmse().value, c.bias().value
    (0.5, 0.6123724356957945, 0.0)
    >>> m = c.mape(); round(m.value, 4), m.n, m.reason
    (0.3333, 3, 'excluded 1 example(s) with y_true == 0')
    >>> c.error_quantile(0.5).value
    0.5
    """

    __slots__ = ("n", "sum_error", "sum_abs", "sum_sq", "sum_fourth", "n_ape", "sum_ape",
                 "sum_ape_sq", "n_zero_target", "abs_errors")

    def __init__(self, abs_errors: NumericSketch | LogHistogram | None = None) -> None:
        self.n = 0
        self.n_ape = 0
        self.n_zero_target = 0
        self.sum_error = 0.0
        self.sum_abs = 0.0
        self.sum_sq = 0.0
        self.sum_fourth = 0.0
        self.sum_ape = 0.0
        self.sum_ape_sq = 0.0
        self.abs_errors = NumericSketch() if abs_errors is None else abs_errors

    def add(self, y_true: Any, y_pred: Any) -> None:
        """Add labeled examples (vectorised).

        Parameters
        ----------
        y_true, y_pred : array-like of float, shape (n,)
            Realised targets and predictions, finite.

        Raises
        ------
        ValueError
            If the lengths differ or a value is NaN or infinite.
        """
        y = np.asarray(y_true, dtype=np.float64).ravel()
        p = np.asarray(y_pred, dtype=np.float64).ravel()
        if y.size != p.size:
            raise ValueError(f"got {y.size} targets but {p.size} predictions")
        if not (np.isfinite(y).all() and np.isfinite(p).all()):
            raise ValueError("targets and predictions must be finite")
        if not y.size:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            e = p - y
            a = np.abs(e)
            sq = a * a
            nz = y != 0
            ape = a[nz] / np.abs(y[nz])
            self.n += y.size
            self.sum_error += float(e.sum())
            self.sum_abs += float(a.sum())
            self.sum_sq += float(sq.sum())
            self.sum_fourth += float(sq @ sq)
            self.n_ape += int(ape.size)
            self.n_zero_target += y.size - int(ape.size)
            self.sum_ape += float(ape.sum())
            self.sum_ape_sq += float(ape @ ape)
        self.abs_errors.update(a)

    def merge(self, other: RegressionCohort) -> None:
        """Merge ``other`` into this cohort (in place); ``other`` is not modified.

        Raises
        ------
        ValueError
            If the two cohorts sketch |e| differently (NumericSketch vs LogHistogram).
        """
        if type(self.abs_errors) is not type(other.abs_errors):
            raise ValueError("cannot merge regression cohorts with different error sketches")
        for name in ("n", "n_ape", "n_zero_target", "sum_error", "sum_abs", "sum_sq",
                     "sum_fourth", "sum_ape", "sum_ape_sq"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.abs_errors.merge(other.abs_errors)

    # -- metrics --------------------------------------------------------------
    def mae(self) -> Metric:
        """Mean absolute error, (1/n) sum |e_i|."""
        return undefined(NO_LABELS) if not self.n else _finite(self.sum_abs / self.n, self.n)

    def mse(self) -> Metric:
        """Mean squared error, (1/n) sum e_i^2."""
        return undefined(NO_LABELS) if not self.n else _finite(self.sum_sq / self.n, self.n)

    def rmse(self) -> Metric:
        """Root mean squared error, sqrt((1/n) sum e_i^2)."""
        return undefined(NO_LABELS) if not self.n else _finite(math.sqrt(self.sum_sq / self.n), self.n)

    def bias(self) -> Metric:
        """Mean error (1/n) sum (y_pred_i - y_true_i): positive when the model over-predicts."""
        return undefined(NO_LABELS) if not self.n else _finite(self.sum_error / self.n, self.n)

    def mape(self) -> Metric:
        """Mean absolute percentage error over the examples with y_true != 0, as a fraction.

        Returns
        -------
        Metric
            (1 / n') sum_{y_i != 0} |e_i| / |y_i| (0.1 means 10 %), ``n = n'``;
            ``reason`` names how many examples with y_true == 0 were
            excluded (their percentage error is undefined). Undefined when
            no example has y_true != 0.

        Notes
        -----
        ``sklearn.metrics.mean_absolute_percentage_error`` instead divides by
        max(|y|, 2.2e-16), so one y == 0 dominates its value; on data
        without zeros both agree. Hyndman & Koehler, "Another look at
        measures of forecast accuracy", Int. J. Forecasting 22, 2006.

        Examples
        --------
        >>> c = RegressionCohort(); c.add([0.0, 0.0], [1.0, 2.0]); c.mape().reason
        'every y_true is 0 (2 example(s))'
        """
        if not self.n:
            return undefined(NO_LABELS)
        if not self.n_ape:
            return undefined(f"every y_true is 0 ({self.n_zero_target} example(s))", 0)
        note = f"excluded {self.n_zero_target} example(s) with y_true == 0" if self.n_zero_target else ""
        return _finite(self.sum_ape / self.n_ape, self.n_ape, note)

    def error_quantile(self, q: float) -> Metric:
        """Quantile ``q`` of |e| from the sketch (inverted CDF, as ``NumericSketch.quantile``).

        Returns
        -------
        Metric
            With a ``NumericSketch``: exact (``error_bound`` 0.0) while the
            sketch is exact; otherwise ``error_bound`` None and ``reason``
            giving the rank error: the value's rank among the |e_i| is within
            ``rank_error`` of ``q``. With a ``LogHistogram``: ``error_bound``
            a v / (1 - a) on the value v (relative accuracy a).

        Raises
        ------
        ValueError
            If ``q`` is outside [0, 1].
        """
        if not 0.0 <= q <= 1.0:
            raise ValueError("q must be in [0, 1]")
        if not self.n:
            return undefined(NO_LABELS)
        value = self.abs_errors.quantile(q)
        if isinstance(self.abs_errors, LogHistogram):
            return Metric(value, "", self.n, self.abs_errors.error_bound(value))
        rank_error = self.abs_errors.rank_error
        if rank_error == 0.0:
            return Metric(value, "", self.n)
        return Metric(value, f"sketch quantile: rank within {rank_error:.2g} of q", self.n, None)

    def error_quantiles(self, qs: tuple[float, ...] = DEFAULT_QUANTILES) -> dict[float, Metric]:
        """:meth:`error_quantile` at each of ``qs`` (default p50, p90, p99).

        Examples
        --------
        >>> c = RegressionCohort(); c.add(np.zeros(100), np.arange(100.0))
        >>> {q: m.value for q, m in c.error_quantiles().items()}
        {0.5: 49.0, 0.9: 89.0, 0.99: 98.0}
        """
        return {q: self.error_quantile(q) for q in qs}

    # -- serialisation ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain data for MessagePack (the sketch part holds ``bytes``, as in :mod:`sketches`)."""
        return {
            "n": self.n, "n_ape": self.n_ape, "n_zero_target": self.n_zero_target,
            "sum_error": self.sum_error, "sum_abs": self.sum_abs, "sum_sq": self.sum_sq,
            "sum_fourth": self.sum_fourth, "sum_ape": self.sum_ape, "sum_ape_sq": self.sum_ape_sq,
            "abs_errors": self.abs_errors.to_dict(),
            **({"abs_errors_kind": "loghist"} if isinstance(self.abs_errors, LogHistogram) else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RegressionCohort:
        """Inverse of :meth:`to_dict`.

        Raises
        ------
        ValueError
            If the counts disagree (``n != n_ape + n_zero_target`` or the sketch count).
        """
        c = cls()
        c.n, c.n_ape, c.n_zero_target = int(d["n"]), int(d["n_ape"]), int(d["n_zero_target"])
        for name in ("sum_error", "sum_abs", "sum_sq", "sum_fourth", "sum_ape", "sum_ape_sq"):
            setattr(c, name, float(d[name]))
        if d.get("abs_errors_kind") == "loghist":
            c.abs_errors = LogHistogram.from_dict(d["abs_errors"])
            sketched = c.abs_errors.count
        else:
            c.abs_errors = NumericSketch.from_dict(d["abs_errors"])
            sketched = c.abs_errors.count + c.abs_errors.pos_inf_count
        if c.n != c.n_ape + c.n_zero_target or sketched != c.n:
            raise ValueError("inconsistent regression cohort counts")
        return c
