"""Volume: the window's record count against an expectation from its history.

The expectation (:class:`VolumeExpectation`) is the mean of comparable past windows
(:func:`mean_expectation`: the same slot of past weeks, or the same hour on past days),
the trailing windows' level read through the model's daily shape
(:func:`shaped_expectation`) or the straight line through them
(:func:`trend_expectation`), with the variance of the count's deviation from it under
a quasi-Poisson model; which history answered is chosen in :mod:`detectors.volume_history`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from detectors.result import TestResult, insufficient, judged
from detectors.stats.interval import normal_interval_p

MIN_HISTORY = 1
#: Trailing windows a line needs after the out-of-line ones are left out (2 degrees of
#: freedom for its dispersion).
MIN_TREND_WINDOWS = 4
#: Trailing windows a level read through the daily shape needs after the out-of-line ones
#: are left out: as many as the line, so that a level is never made of the first windows
#: of an incident (two windows of a drop would make its end read as a rise).
MIN_SHAPED_WINDOWS = MIN_TREND_WINDOWS
#: A trailing window further than this many Poisson standard deviations from the level
#: read through the fleet's records is out of line (the fleet's share is precise enough to
#: tell a window already in a drop well inside the floor).
OUTLYING_SD = 4.0
#: The largest share of the fleet's trailing windows that may be out of line: an incident
#: of a few hours is left out; a model whose share wanders over the day (another time
#: zone, another kind of user) is not judged through the fleet.
MAX_OUT_OF_LINE = 0.25


@dataclass(frozen=True)
class VolumeExpectation:
    """What a window's record count is expected to be, and how far it may stray by chance.

    Attributes
    ----------
    source : str
        The history that answered: ``"seasonal"`` (the same slot of past weeks),
        ``"daily"`` (the same hour on past days) or ``"trailing"`` (the line through
        the trailing windows).
    expected : float
        lambda, records expected in the window (> 0).
    variance : float
        Var(count - lambda) under H0, records squared.
    estimate_variance : float
        The part of ``variance`` that is lambda's own (the estimate's); the rest is the
        count's, proportional to its mean.
    windows : int
        Past windows used.
    records : int
        Records in them.
    note : str
        The history in words (which windows, what was left out), for the result's reason.
    """

    source: str
    expected: float
    variance: float
    windows: int
    records: int
    note: str = ""
    estimate_variance: float = 0.0

    def at_boundary(self, ratio: float) -> float:
        """Var(count - ratio lambda) when the count's mean is ``ratio`` lambda (the interval
        null's boundary, ratio 1 -/+ floor): the count's part scales with its mean, the
        estimate's with ``ratio`` squared.

        Examples
        --------
        >>> VolumeExpectation("seasonal", 100, 125, 4, 400, estimate_variance=25).at_boundary(0.7)
        82.25
        """
        return ratio * (self.variance - self.estimate_variance) + ratio * ratio * self.estimate_variance


def mean_expectation(history: Sequence[int], source: str = "seasonal",
                     note: str = "") -> VolumeExpectation | None:
    """The mean of comparable past windows; None without traffic in any.

    Notes
    -----
    Quasi-Poisson: with lambda = mean(history) and dispersion phi = max(1, s^2 / lambda)
    (s^2 the history's variance; 1 with a single past window), count - lambda has
    variance phi lambda (1 + 1 / k) under H0 (McCullagh & Nelder, "Generalized Linear
    Models", 1989, sec. 6.2).

    Examples
    --------
    >>> e = mean_expectation([100, 100, 100, 100])
    >>> e.expected, e.variance, e.windows, e.records
    (100.0, 125.0, 4, 400)
    >>> mean_expectation([0, 0]) is None
    True
    """
    k, total = len(history), int(sum(history))
    if k == 0 or total == 0:
        return None
    lam = total / k
    var = sum((h - lam) ** 2 for h in history) / (k - 1) if k > 1 else lam
    phi = max(1.0, var / lam)
    return VolumeExpectation(source, lam, phi * lam * (1 + 1 / k), k, total, note, phi * lam / k)


def trend_expectation(positions: Sequence[float], counts: Sequence[int], at: float, floor: float,
                      note: str = "") -> VolumeExpectation | None:
    """The least-squares line through the trailing windows' counts, read at ``at``.

    Parameters
    ----------
    positions : sequence of float
        The trailing windows' positions (their starts in window lengths), oldest first.
    counts : sequence of int
        Their record counts.
    at : float
        The current window's position.
    floor : float
        The volume floor: the line is fitted to the largest set of trailing windows that
        lie within ``floor`` (relative) of it; the others are out of line (a drop already
        under way, an outage) and left out, so an incident does not become its own
        expectation, nor tilt the line that judges the window after it.

    Returns
    -------
    VolumeExpectation or None
        None when fewer than :data:`MIN_TREND_WINDOWS` windows remain, or the line
        expects no traffic.

    Notes
    -----
    Ordinary least squares on the kept windows (n of them): the prediction lambda at
    ``at`` has leverage h = 1/n + (at - x_bar)^2 / S_xx, and under a quasi-Poisson model
    Var(count - lambda) = phi (lambda + mu_bar h), mu_bar the kept windows' mean count
    and phi = max(1, X^2 / (n - 2)) with X^2 = sum (c_i - mu_i)^2 / mu_i the Pearson
    statistic of the fit (McCullagh & Nelder 1989, sec. 4.5 and 6.2; the prediction
    variance: Seber & Lee, "Linear Regression Analysis", 2003, sec. 5.2). A daily rhythm
    is smooth over a few hours, so the line follows it; its curvature, as any misfit,
    raises phi.

    Examples
    --------
    >>> e = trend_expectation([0, 1, 2, 3, 4, 5], [100, 110, 120, 130, 140, 150], 6, 0.3)
    >>> round(e.expected, 6), e.windows
    (160.0, 6)
    >>> trend_expectation([0, 1, 2, 3, 4, 5], [100, 110, 120, 130, 140, 30], 6, 0.3).windows
    5
    """
    kept = _on_one_line(positions, counts, floor)
    if kept is None:
        return None
    xs, ys = [positions[i] for i in kept], [counts[i] for i in kept]
    a, b = _line(xs, ys) or (0.0, 0.0)
    n, x_bar = len(xs), sum(xs) / len(xs)
    sxx = sum((x - x_bar) ** 2 for x in xs)
    lam = a + b * at
    mus = [a + b * x for x in xs]
    if lam <= 0 or min(mus) <= 0:
        return None
    phi = max(1.0, sum((y - mu) ** 2 / mu for y, mu in zip(ys, mus, strict=True)) / (n - 2))
    leverage = 1 / n + (at - x_bar) ** 2 / sxx
    left_out = len(counts) - n
    text = "; ".join(t for t in (note, f"{left_out} out of line left out" if left_out else "") if t)
    estimate = phi * sum(ys) / n * leverage
    return VolumeExpectation("trailing", lam, phi * lam + estimate, n, int(sum(ys)), text, estimate)


def shaped_expectation(relative: Sequence[float], counts: Sequence[int], floor: float,
                       shape_variance: float = 0.0, note: str = "",
                       source: str = "shaped") -> VolumeExpectation | None:
    """The trailing windows' level read through the daily shape (:mod:`detectors.volume_shape`),
    or through the fleet's records (``source`` ``"fleet"``, :mod:`detectors.volume_fleet`).

    Parameters
    ----------
    relative : sequence of float
        Each trailing window's mean rate on the daily shape over the current window's (> 0).
    counts : sequence of int
        Their record counts.
    floor : float
        The volume floor: windows not within ``floor`` (relative) of the level fitted
        through the others are out of line and left out, as in :func:`trend_expectation`
        (``"fleet"``: also those more than :data:`OUTLYING_SD` Poisson standard deviations
        from it, one at a time, the furthest first: :func:`_trimmed`).
    shape_variance : float
        The variance of the log of the shape's ratio between the current window and the
        trailing ones (the fit's own uncertainty,
        :meth:`detectors.volume_shape.ShapeFit.ratio_variance`; of all trailing windows,
        the out-of-line ones included).
    source : str
        The expectation's source: ``"shaped"`` or ``"fleet"``.

    Returns
    -------
    VolumeExpectation or None
        None when fewer than :data:`MIN_SHAPED_WINDOWS` windows remain.

    Notes
    -----
    Poisson with rates ``L r_i``: the level's estimate is ``L = sum c_i / sum r_i`` over
    the kept windows, so lambda = L and Var(L) = phi lambda^2 / sum c_i. Under a
    quasi-Poisson model with phi = max(1, X^2 / (n - 1)), X^2 the Pearson statistic of the
    kept windows (McCullagh & Nelder 1989, sec. 6.2), and the shape's ratio known to a
    relative variance ``v`` (delta method), Var(count - lambda) = phi (lambda +
    lambda^2 / sum c_i) + lambda^2 v.

    Examples
    --------
    Four trailing windows at half to all of the current window's rate:

    >>> e = shaped_expectation([0.5, 0.75, 0.9, 1.0], [100, 150, 180, 200], 0.3)
    >>> e.expected, e.windows
    (200.0, 4)
    >>> shaped_expectation([0.5, 0.75, 0.9, 1.0, 1.0], [100, 150, 180, 200, 20], 0.3).windows  # a drop
    4
    """
    kept = (_trimmed if source == "fleet" else _in_proportion)(relative, counts, floor)
    if kept is None:
        return None
    ys, rs = [counts[i] for i in kept], [relative[i] for i in kept]
    total = sum(ys)
    lam = total / sum(rs)
    n = len(ys)
    phi = max(1.0, sum((y - lam * r) ** 2 / (lam * r) for y, r in zip(ys, rs, strict=True)) / (n - 1))
    left_out = len(counts) - n
    text = "; ".join(t for t in (note, f"{left_out} out of line left out" if left_out else "") if t)
    estimate = phi * lam * lam / total + lam * lam * shape_variance
    return VolumeExpectation(source, lam, phi * lam + estimate, n, int(total), text, estimate)


def _more_precise(a: VolumeExpectation | None, b: VolumeExpectation | None) -> VolumeExpectation | None:
    """Of two expectations from the same trailing windows, the more precise: the one with
    the smaller relative variance Var / lambda^2, the scale the interval null is on
    (``a`` on a tie; either when the other is None). Both come from the past windows
    alone, never from the current count, so the choice does not bias the test: under H0
    the p-value keeps its level whichever answers.

    Examples
    --------
    >>> _more_precise(VolumeExpectation("shaped", 100, 400, 8, 800),
    ...               VolumeExpectation("trailing", 90, 300, 8, 800)).source
    'trailing'
    """
    if a is None or b is None:
        return a or b
    return b if b.variance / b.expected**2 < a.variance / a.expected**2 else a


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Intercept and slope of the least-squares line; None with fewer than 2 distinct xs."""
    if len(xs) < 2:
        return None
    x_bar, y_bar = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - x_bar) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - x_bar) * (y - y_bar) for x, y in zip(xs, ys, strict=True)) / sxx
    return y_bar - b * x_bar, b


def _on_one_line(xs: Sequence[float], ys: Sequence[int], floor: float) -> list[int] | None:
    """The largest set of windows (at least :data:`MIN_TREND_WINDOWS`) that lie within
    ``floor`` (relative) of the least-squares line through them (:func:`_largest_consistent`)."""
    def misfits(subset: tuple[int, ...]) -> list[float] | None:
        fit = _line([xs[i] for i in subset], [ys[i] for i in subset])
        if fit is None:
            return None
        mus = [fit[0] + fit[1] * xs[i] for i in subset]
        return None if min(mus) <= 0 else [ys[i] / mu - 1 for i, mu in zip(subset, mus, strict=True)]

    return _largest_consistent(len(xs), MIN_TREND_WINDOWS, misfits, floor)


def _in_proportion(relative: Sequence[float], ys: Sequence[int], floor: float) -> list[int] | None:
    """The largest set of windows (at least :data:`MIN_SHAPED_WINDOWS`) whose counts lie
    within ``floor`` (relative) of one level times their share of the daily shape."""
    def misfits(subset: tuple[int, ...]) -> list[float] | None:
        level = sum(ys[i] for i in subset) / sum(relative[i] for i in subset)
        return None if level <= 0 else [ys[i] / (level * relative[i]) - 1 for i in subset]

    return _largest_consistent(len(ys), MIN_SHAPED_WINDOWS, misfits, floor)


def _trimmed(relative: Sequence[float], ys: Sequence[int], floor: float) -> list[int] | None:
    """The windows left once those out of line with the level read through ``relative``
    are dropped one at a time, the one with the largest Pearson residual
    (y - L r) / sqrt(L r) first, until every one left is within ``floor`` (relative) and
    :data:`OUTLYING_SD` residuals of the level; None if fewer than
    :data:`MIN_SHAPED_WINDOWS` remain or more than :data:`MAX_OUT_OF_LINE` of them were
    dropped. Greedy, for the fleet's day of windows (too many for
    :func:`_largest_consistent`): a few windows in an incident are left out.

    Examples
    --------
    >>> _trimmed([1.0] * 8, [200, 205, 195, 200, 210, 190, 120, 30], 0.3)  # a drop under way
    [0, 1, 2, 3, 4, 5]
    >>> _trimmed([1.0] * 8, [100, 140, 180, 220, 260, 300, 340, 380], 0.3) is None  # a share that wanders
    True
    """
    kept = list(range(len(ys)))
    while len(kept) >= MIN_SHAPED_WINDOWS and len(ys) - len(kept) <= MAX_OUT_OF_LINE * len(ys):
        level = sum(ys[i] for i in kept) / sum(relative[i] for i in kept)
        if level <= 0:
            return None
        worst, residual = max(((i, abs(ys[i] - level * relative[i]) / math.sqrt(level * relative[i]))
                               for i in kept), key=lambda t: t[1])
        if residual <= OUTLYING_SD and all(abs(ys[i] / (level * relative[i]) - 1) <= floor for i in kept):
            return kept
        kept.remove(worst)
    return None


def _largest_consistent(n: int, smallest: int, misfits: Callable[[tuple[int, ...]], list[float] | None],
                        floor: float) -> list[int] | None:
    """The largest subset of ``range(n)`` (at least ``smallest``) whose relative misfits to
    the expectation fitted through it are all within ``floor``, the best-fitting (least
    squared misfit) among subsets of that size; None if there is none. Exhaustive: a
    trailing history holds a handful of windows."""
    for size in range(n, smallest - 1, -1):
        best: tuple[float, list[int]] | None = None
        for subset in combinations(range(n), size):
            m = misfits(subset)
            if m is not None and max(abs(v) for v in m) <= floor:
                score = sum(v * v for v in m)
                if best is None or score < best[0]:
                    best = (score, list(subset))
        if best is not None:
            return best[1]
    return None


@dataclass(frozen=True)
class VolumeHistory:
    """The past a window's count is judged against (chosen in :mod:`detectors.volume_history`).

    Attributes
    ----------
    source : str
        ``"seasonal"``, ``"daily"`` (judged against the counts' mean), ``"fleet"``
        (against their level read through the fleet's records), ``"shaped"`` (through the
        daily shape; both :func:`shaped_expectation`), ``"trailing"`` (against the line
        through them, :func:`trend_expectation`) or ``"none"``.
    counts : tuple of int
        The past windows' record counts.
    positions : tuple of float
        ``"trailing"``: each window's start relative to the current window's, in window
        lengths (negative).
    relative : tuple of float
        ``"fleet"``, ``"shaped"``: each window's rate (the fleet's records, the daily
        shape) over the current window's.
    shape_variance : float
        ``"fleet"``, ``"shaped"``: the variance of the log of that ratio between the
        current window and these.
    alternative : VolumeHistory or None
        The history that answers instead when its expectation is the more precise
        (:func:`_more_precise`): for ``"fleet"`` and ``"shaped"``, the next in the order
        of :mod:`detectors.volume_history`.
    note : str
        Which windows, in words (for ``"none"``: why there are none).
    """

    source: str
    counts: tuple[int, ...] = ()
    positions: tuple[float, ...] = ()
    note: str = ""
    relative: tuple[float, ...] = ()
    shape_variance: float = 0.0
    alternative: VolumeHistory | None = None

    def expectation(self, floor: float) -> VolumeExpectation | None:
        """The expectation this history gives under volume floor ``floor`` (None: none)."""
        own = self._own(floor)
        return own if self.alternative is None else _more_precise(own, self.alternative.expectation(floor))

    def _own(self, floor: float) -> VolumeExpectation | None:
        if self.source == "trailing":
            return trend_expectation(self.positions, self.counts, 0.0, floor, self.note)
        if self.source in ("shaped", "fleet"):
            return shaped_expectation(self.relative, self.counts, floor, self.shape_variance, self.note,
                                      self.source)
        if not self.counts:
            return None
        return mean_expectation(self.counts, self.source, self.note)


def volume_test(
    count: int,
    history: Sequence[int] | VolumeHistory | None,
    feature: str = "",
    *,
    floor: float = 0.0,
    alpha: float = 0.05,
    min_history: int = MIN_HISTORY,
) -> TestResult:
    """Is the window's record count out of line with its history?

    Parameters
    ----------
    count : int
        Records in the current window (0 for an empty window).
    history : sequence of int, VolumeHistory or None
        Record counts of comparable past windows (e.g. the same hour of week over the
        previous k weeks), each of the current window's length, judged against their
        mean (:func:`mean_expectation`); or the history chosen by
        :func:`detectors.volume_history.volume_history`; None: no history.
    feature : str
        Usually ``""`` (a window-level test).
    floor : float
        Relative change tolerated under the null (0.3: +/-30 %).
    alpha, min_history
        Level for ``drift``; past windows needed (a sequence of counts).

    Returns
    -------
    TestResult
        ``statistic`` = z, ``effect_size`` = count / lambda - 1, ``n_current`` = count,
        ``n_baseline`` = records in the history used; its ``reason`` names the history
        that answered (or why there is none: ``insufficient_data``).

    Notes
    -----
    z = (count - lambda) / sqrt(Var), lambda and Var from :class:`VolumeExpectation`; the
    interval null tolerates |count - lambda| <= floor * lambda (normal approximation;
    Hodges & Lehmann 1954). The p-value takes the variance where the null is least
    favourable, at its boundary b lambda (b = 1 - floor for a count below lambda, 1 + floor
    above): the count's Poisson part is b times its part at lambda, the estimate's b^2
    times (:meth:`VolumeExpectation.at_boundary`). Taken at lambda instead, it would be
    conservative for a drop and anti-conservative for a rise.

    Examples
    --------
    >>> volume_test(20, [1000, 1100, 950, 1020], floor=0.5).status.value
    'drift'
    >>> volume_test(1010, [1000, 1100, 950, 1020], floor=0.5).status.value
    'ok'
    >>> volume_test(100, VolumeHistory("none", note="no past day")).reason
    'no past day'
    """
    if not isinstance(history, VolumeHistory):
        counts = tuple(int(c) for c in history or ())
        history = VolumeHistory("seasonal", counts if len(counts) >= min_history else (),
                                note="" if len(counts) >= min_history
                                else f"needs >= {min_history} past windows with traffic")
    e = history.expectation(floor)
    if e is None:
        return insufficient("volume", feature, count, int(sum(history.counts)),
                            history.note if history.source == "none" or not history.counts
                            else f"{history.source} history gives no expectation ({history.note})")
    se = math.sqrt(e.variance)
    diff = count - e.expected
    boundary = math.sqrt(max(e.at_boundary(max(1 - floor, 0.0) if diff < 0 else 1 + floor), 0.0)) or se
    result = judged("volume", feature, diff / se, count / e.expected - 1,
                    normal_interval_p(diff, boundary, floor * e.expected), count, e.records,
                    floor=floor, alpha=alpha)
    said = f"expected {e.expected:.1f} records from {e.source} history ({e.note or f'{e.windows} windows'})"
    return replace(result, reason=f"{result.reason}; {said}" if result.reason else said)
