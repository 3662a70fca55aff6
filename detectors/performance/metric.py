"""The value every performance metric returns: a number, or the reason there is none."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Metric:
    """One performance metric of one cohort.

    Attributes
    ----------
    value : float or None
        The metric; ``None`` when it is undefined on this cohort (e.g. ROC AUC
        of a single-class cohort), never a stand-in such as 0.0 or 0.5.
    reason : str
        Why ``value`` is ``None`` (always set then), or a caveat on a defined
        value (e.g. examples excluded from MAPE); ``""`` otherwise.
    n : int
        Examples the metric was computed on.
    error_bound : float or None
        Bound on |value - value on the raw data| due to the cohort's binning
        or sketching (0.0: exact up to floating-point rounding; ``None``:
        approximate, no bound derived, see the metric's documentation).

    Examples
    --------
    >>> Metric(0.83, n=1000).defined
    True
    >>> Metric(None, "single class", n=40)
    Metric(value=None, reason='single class', n=40, error_bound=0.0)
    """

    value: float | None
    reason: str = ""
    n: int = 0
    error_bound: float | None = 0.0

    def __post_init__(self) -> None:
        if self.value is None:
            if not self.reason:
                raise ValueError("an undefined metric needs a reason")
        elif not math.isfinite(self.value):
            raise ValueError(f"value must be finite or None, got {self.value}")

    @property
    def defined(self) -> bool:
        """True when ``value`` is a number."""
        return self.value is not None


def undefined(reason: str, n: int = 0) -> Metric:
    """A metric with no value.

    Examples
    --------
    >>> undefined("no labeled examples").defined
    False
    """
    return Metric(None, reason, n)


def ratio(num: float, den: float, reason: str, n: int, error_bound: float | None = 0.0) -> Metric:
    """``num / den`` as a metric, undefined with ``reason`` when ``den == 0``.

    Examples
    --------
    >>> ratio(3, 4, "x", 4).value, ratio(0, 0, "no predicted positives", 0).reason
    (0.75, 'no predicted positives')
    """
    if den == 0:
        return undefined(reason, n)
    return Metric(float(num) / float(den), "", n, error_bound)
