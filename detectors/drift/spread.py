"""The scale that standardises location and distance effects, and constants up to rounding.

A profile's mean and M2 are merged from many batches (Chan, Golub & LeVeque
1979), so a feature that is one constant value carries rounding residue: a
mean off by an ulp and an M2 of ~1e-30 instead of 0. Divided by such a
standard deviation, any real change looks 1e15 standard deviations large,
and two windows of the same constant look different. The rule here: a
standard deviation or a difference of means no larger than
``SD_RELATIVE_FLOOR`` times the values' magnitude is rounding, i.e. 0.
"""

from __future__ import annotations

import math

from sketches.numeric import NumericSketch

SD_RELATIVE_FLOOR = 1e-12
"""Spreads and mean differences at most this times max |value| count as 0. float64 carries
2.2e-16 relative precision; merged moments of a constant stay below 1e-13 of its magnitude
up to 10^6 batches, while real variation at 1e-12 of the magnitude has lost all but ~4 of its
significant digits to the representation anyway."""


def rounding_scale(a: NumericSketch, b: NumericSketch) -> float:
    """``SD_RELATIVE_FLOOR`` times the largest |value| on either side (0 for all-zero data).

    Examples
    --------
    >>> import numpy as np
    >>> x, y = NumericSketch(), NumericSketch()
    >>> x.update(np.array([-3.0, 1.0])); y.update(np.array([2.0]))
    >>> rounding_scale(x, y)
    3e-12
    """
    return SD_RELATIVE_FLOOR * max(abs(a.min), abs(a.max), abs(b.min), abs(b.max))


def location(s: NumericSketch) -> float:
    """The mean, exact for a constant (its single value, not the merged moments' residue).

    Examples
    --------
    >>> import numpy as np
    >>> s = NumericSketch()
    >>> for _ in range(3): s.update(np.full(7, 0.1))
    >>> location(s)
    0.1
    """
    return s.min if s.min == s.max else s.mean


def _variance(s: NumericSketch) -> float:
    return 0.0 if s.min == s.max else s.variance


def sd(s: NumericSketch, noise: float = 0.0) -> float:
    """Population standard deviation; 0 for a constant or when it is at most ``noise``.

    Examples
    --------
    >>> import numpy as np
    >>> s = NumericSketch(); s.update(np.array([0.3, 0.1 + 0.2]))  # one ulp apart
    >>> sd(s) > 0, sd(s, 1e-12 * 0.3)
    (True, 0.0)
    """
    v = math.sqrt(max(_variance(s), 0.0))
    return v if v > noise else 0.0


def mean_difference(reference: NumericSketch, current: NumericSketch) -> float:
    """mean_cur - mean_ref, 0 when it is within :func:`rounding_scale`.

    Examples
    --------
    >>> import numpy as np
    >>> a, b = NumericSketch(), NumericSketch()
    >>> a.update(np.full(5, 0.3)); b.update(np.full(5, 0.1 + 0.2))
    >>> mean_difference(a, b)
    0.0
    """
    diff = location(current) - location(reference)
    return diff if abs(diff) > rounding_scale(reference, current) else 0.0


def pooled_moments(a: NumericSketch, b: NumericSketch) -> tuple[float, float]:
    """Mean and population variance of both sketches' values together.

    A constant side contributes its exact value and no variance; a pooled
    standard deviation within :func:`rounding_scale` gives variance 0.

    Examples
    --------
    >>> import numpy as np
    >>> x, y = NumericSketch(), NumericSketch()
    >>> x.update(np.zeros(2)); y.update(np.full(2, 2.0))
    >>> pooled_moments(x, y)
    (1.0, 1.0)
    """
    n = a.count + b.count
    mean_a, mean_b = location(a), location(b)
    mean = (a.count * mean_a + b.count * mean_b) / n
    delta = mean_difference(a, b)
    m2 = _variance(a) * a.count + _variance(b) * b.count + delta**2 * a.count * b.count / n
    var = m2 / n
    return mean, var if math.sqrt(max(var, 0.0)) > rounding_scale(a, b) else 0.0


def baseline_spread(reference: NumericSketch, current: NumericSketch) -> float:
    """Standard deviation of the baseline, or of both sides pooled when the baseline is constant.

    Returns
    -------
    float
        sd_ref if it exceeds :func:`rounding_scale`, else the pooled
        standard deviation; 0.0 only when both sides hold the same single
        value up to rounding (every standardised effect is then 0 by
        definition).

    Notes
    -----
    Standardising by the baseline's spread is Glass's Delta (Glass, "Primary,
    secondary, and meta-analysis of research", 1976). A constant baseline
    has no spread; the pooled spread is then positive as soon as the
    current window differs from it, and an effect in its units is bounded:
    a constant that moves, seen by ``n_ref`` and ``n_cur`` values, is
    1 / sqrt(w (1 - w)) pooled standard deviations away, w = n_cur / (n_ref + n_cur).

    Examples
    --------
    >>> import numpy as np
    >>> c, z = NumericSketch(), NumericSketch()
    >>> c.update(np.zeros(100)); z.update(np.array([-1.0, 1.0] * 50))
    >>> round(baseline_spread(c, z), 4), baseline_spread(z, c)
    (0.7071, 1.0)
    """
    s = sd(reference, rounding_scale(reference, current))
    if s > 0:
        return s
    return math.sqrt(pooled_moments(reference, current)[1])
