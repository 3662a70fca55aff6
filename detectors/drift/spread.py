"""The scale that standardises location and distance effects (never zero)."""

from __future__ import annotations

import math

from sketches.numeric import NumericSketch


def pooled_moments(a: NumericSketch, b: NumericSketch) -> tuple[float, float]:
    """Mean and population variance of both sketches' values together.

    Examples
    --------
    >>> import numpy as np
    >>> x, y = NumericSketch(), NumericSketch()
    >>> x.update(np.zeros(2)); y.update(np.full(2, 2.0))
    >>> pooled_moments(x, y)
    (1.0, 1.0)
    """
    n = a.count + b.count
    mean = (a.count * a.mean + b.count * b.mean) / n
    m2 = a.m2 + b.m2 + (b.mean - a.mean) ** 2 * a.count * b.count / n
    return mean, m2 / n


def baseline_spread(reference: NumericSketch, current: NumericSketch) -> float:
    """Standard deviation of the baseline, or of both sides pooled when the baseline is constant.

    Returns
    -------
    float
        sd_ref if > 0, else the pooled standard deviation; 0.0 only when
        both sides hold the same single value (every standardised effect is
        then 0 by definition).

    Notes
    -----
    Standardising by the baseline's spread is Glass's Delta (Glass, "Primary,
    secondary, and meta-analysis of research", 1976). A constant baseline
    has no spread; the pooled spread is then positive as soon as the
    current window differs from it.

    Examples
    --------
    >>> import numpy as np
    >>> c, z = NumericSketch(), NumericSketch()
    >>> c.update(np.zeros(100)); z.update(np.array([-1.0, 1.0] * 50))
    >>> round(baseline_spread(c, z), 4), baseline_spread(z, c)
    (0.7071, 1.0)
    """
    if reference.variance > 0:
        return math.sqrt(reference.variance)
    return math.sqrt(max(pooled_moments(reference, current)[1], 0.0))
