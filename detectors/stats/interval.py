"""p-values against an interval null hypothesis "|effect| <= floor".

Large windows make every tiny change significant under the point null "no
change". Testing the interval null instead (Hodges & Lehmann, "Testing the
approximate validity of statistical hypotheses", 1954; Wellek, "Testing
Statistical Hypotheses of Equivalence and Noninferiority", 2010, ch. 11) makes
the p-value small only when the effect is significantly *larger than the
floor*. With ``floor = 0`` each function reduces to its usual point-null test.
"""

from __future__ import annotations

import math

from scipy import special


def normal_interval_p(estimate: float, se: float, floor: float = 0.0) -> float:
    """Two-sided p-value of an asymptotically normal estimate against |theta| <= floor.

    Parameters
    ----------
    estimate : float
        The estimated effect theta_hat.
    se : float
        Its standard error, >= 0.
    floor : float
        Half-width of the null interval, >= 0.

    Returns
    -------
    float
        p = Phi((floor - |theta_hat|) / se) + Phi((-floor - |theta_hat|) / se),
        the probability of an estimate at least as far from 0 when theta sits
        on the boundary theta = floor. With floor = 0 this is the usual
        two-sided 2 * Phi(-|z|). With se = 0: 1.0 if |theta_hat| <= floor, else 0.0.

    Notes
    -----
    Hodges & Lehmann (1954); Wellek (2010), sec. 11.2.

    Examples
    --------
    >>> round(normal_interval_p(1.96, 1.0), 3)
    0.05
    >>> normal_interval_p(0.01, 0.001, floor=0.1) > 0.99
    True
    """
    a = abs(estimate)
    if se <= 0.0 or not math.isfinite(se):
        return 1.0 if a <= floor else 0.0
    return float(min(special.ndtr((floor - a) / se) + special.ndtr((-floor - a) / se), 1.0))


def chi2_interval_p(statistic: float, df: float, noncentrality: float = 0.0,
                    scale: float = 1.0) -> float:
    """Upper-tail p-value of a chi-square-type statistic against "divergence <= floor".

    Parameters
    ----------
    statistic : float
        N_eff times a divergence that is asymptotically Pearson's chi-square
        distance (chi-square, N_eff * PSI, 8 ln2 N_eff * JS divergence).
    df : float
        Degrees of freedom, > 0: bins - 1, or the matched h of a scaled
        chi-square (:func:`~detectors.stats.divergence_null.divergence_null`).
    noncentrality : float
        N_eff times the floor in the statistic's unit (0: point null).
    scale : float
        g of the null law ``g * chi2(df)`` (1: the plain chi-square), > 0.

    Returns
    -------
    float
        P(g X >= statistic), X ~ chi2(df, noncentrality / g). Under a fixed
        alternative whose divergence equals the floor, the statistic is
        asymptotically noncentral chi-square with that noncentrality
        (Mitra, "On the limiting power function of the frequency chi-square
        test", 1958); with a scaled null law the noncentral part is carried
        on the same scale, so the mean at the boundary is g df + noncentrality.
        1.0 for a statistic <= 0.

    Raises
    ------
    ValueError
        If ``df <= 0`` or ``scale <= 0``.

    Examples
    --------
    >>> round(chi2_interval_p(16.92, 9), 3)
    0.05
    >>> chi2_interval_p(50.0, 9, noncentrality=1e5) > 0.999
    True
    >>> round(chi2_interval_p(2 * 16.92, 9, scale=2.0), 3)
    0.05
    """
    if not df > 0.0:
        raise ValueError("df must be > 0")
    if not scale > 0.0:
        raise ValueError("scale must be > 0")
    if statistic <= 0.0:
        return 1.0
    x = statistic / scale
    if noncentrality <= 0.0:
        return float(special.chdtrc(df, x))
    return float(min(max(1.0 - special.chndtr(x, df, noncentrality / scale), 0.0), 1.0))
