"""Label maturity: is a cohort ready to be judged on its labels?

Labels arrive late (chargebacks after weeks, clicks after seconds), and the
first labels to arrive are rarely a random sample of the cohort (fast
labels are often the easy or the positive ones). Judging a cohort on them
would page on noise, so a cohort is evaluated only once it is *mature*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Maturity:
    """Whether a cohort may be evaluated now.

    Attributes
    ----------
    mature : bool
    labeled_fraction : float or None
        Labeled predictions over predictions, capped at 1.0; ``None`` when the
        cohort has no predictions.
    reason : str
        Why, in words (always set).
    """

    mature: bool
    labeled_fraction: float | None
    reason: str


def maturity(labeled: int, predictions: int, age_seconds: float, expected_fraction: float,
             horizon_seconds: float) -> Maturity:
    """Decide whether a cohort's labels have matured.

    Parameters
    ----------
    labeled : int
        Predictions of the cohort whose label has arrived, >= 0.
    predictions : int
        Predictions in the cohort, >= 0.
    age_seconds : float
        Time since the end of the cohort's prediction window (event time;
        the caller reads the clock). Negative (a window still open, or clock
        skew) counts as not aged.
    expected_fraction : float
        Share of predictions that eventually get a label, in (0, 1] (e.g.
        0.95 when 5 % of transactions never resolve).
    horizon_seconds : float
        Label horizon, > 0: after it, no more labels are expected.

    Returns
    -------
    Maturity
        ``mature`` when ``labeled / predictions >= expected_fraction`` or
        ``age_seconds >= horizon_seconds``; never for a cohort without
        predictions. A cohort mature by age may hold few labels: the
        performance tests then answer ``insufficient_data`` themselves.

    Raises
    ------
    ValueError
        On negative counts, NaN age, ``expected_fraction`` outside (0, 1] or
        a non-positive horizon.

    Notes
    -----
    ``labeled > predictions`` (labels joined twice, or to predictions
    counted in a neighbouring window) caps the fraction at 1.0 rather than
    failing: the cohort then certainly has its labels.

    Examples
    --------
    >>> maturity(960, 1000, 3600.0, 0.95, 86400.0)
    Maturity(mature=True, labeled_fraction=0.96, reason='labeled fraction 0.96 >= expected 0.95')
    >>> maturity(400, 1000, 3600.0, 0.95, 86400.0).mature
    False
    >>> maturity(400, 1000, 90000.0, 0.95, 86400.0).reason
    'age 90000s >= label horizon 86400s (labeled fraction 0.4)'
    """
    if labeled < 0 or predictions < 0:
        raise ValueError("labeled and predictions must be >= 0")
    if math.isnan(age_seconds):
        raise ValueError("age_seconds must not be NaN")
    if not 0.0 < expected_fraction <= 1.0:
        raise ValueError(f"expected_fraction must be in (0, 1], got {expected_fraction}")
    if not horizon_seconds > 0.0:
        raise ValueError(f"horizon_seconds must be > 0, got {horizon_seconds}")
    if predictions == 0:
        return Maturity(False, None, "no predictions in the cohort")
    fraction = min(labeled / predictions, 1.0)
    if fraction >= expected_fraction:
        return Maturity(True, fraction, f"labeled fraction {fraction:.3g} >= expected {expected_fraction:g}")
    if age_seconds >= horizon_seconds:
        return Maturity(True, fraction, f"age {age_seconds:.0f}s >= label horizon {horizon_seconds:.0f}s "
                                        f"(labeled fraction {fraction:.3g})")
    return Maturity(False, fraction, f"waiting: labeled fraction {fraction:.3g} < {expected_fraction:g} "
                                     f"and age {age_seconds:.0f}s < horizon {horizon_seconds:.0f}s")
