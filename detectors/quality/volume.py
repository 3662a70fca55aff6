"""Volume: the window's record count against a seasonal expectation."""

from __future__ import annotations

import math
from collections.abc import Sequence

from detectors.result import TestResult, insufficient, judged
from detectors.stats.interval import normal_interval_p

MIN_HISTORY = 1


def volume_test(
    count: int,
    history: Sequence[int],
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_history: int = MIN_HISTORY,
) -> TestResult:
    """Is the window's record count out of line with the same slot in past weeks?

    Parameters
    ----------
    count : int
        Records in the current window (0 for an empty window).
    history : sequence of int
        Record counts of comparable past windows (e.g. the same hour of week
        over the previous k weeks), each of the current window's length.
    feature : str
        Usually ``""`` (a window-level test).
    floor : float
        Relative change tolerated under the null (0.5: +/-50 %).
    alpha, min_history
        Level for ``drift``; past windows needed.

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = count / mean(history) - 1,
        ``n_current`` = count, ``n_baseline`` = sum(history).

    Notes
    -----
    Quasi-Poisson count test: with lambda = mean(history) and dispersion
    phi = max(1, s^2 / lambda) (s^2 the history's variance; 1 with a single
    past window), count - lambda has variance phi lambda (1 + 1 / k) under H0
    (McCullagh & Nelder, "Generalized Linear Models", 1989, sec. 6.2). The
    interval null tolerates |count - lambda| <= floor * lambda.

    Examples
    --------
    >>> volume_test(20, [1000, 1100, 950, 1020], floor=0.5).status.value
    'drift'
    >>> volume_test(1010, [1000, 1100, 950, 1020], floor=0.5).status.value
    'ok'
    """
    k = len(history)
    total = int(sum(history))
    if k < min_history or total == 0:
        return insufficient("volume", feature, count, total,
                            f"needs >= {min_history} past windows with traffic")
    lam = total / k
    var = sum((h - lam) ** 2 for h in history) / (k - 1) if k > 1 else lam
    phi = max(1.0, var / lam)
    se = math.sqrt(phi * lam * (1 + 1 / k))
    diff = count - lam
    return judged("volume", feature, diff / se, count / lam - 1, normal_interval_p(diff, se, floor * lam),
                  count, total, floor=floor, alpha=alpha)
