"""Which past a window's record count is judged against: the volume test's history.

Pure functions: the detector plans the windows to read (:func:`plan_volume`), reads their
record counts, and :func:`volume_history` chooses, in this order:

1. ``seasonal``: the same slot of past weeks (:func:`detectors.baseline.seasonal_ranges`),
   once any past week holds traffic there; it removes the daily and the weekly rhythm;
2. ``daily``: before a week of history exists, the same hour (the same window, for
   windows of a day) on the past :data:`DAILY_DAYS` days *of the same kind* -- weekdays
   for a weekday, Saturdays and Sundays for a weekend day, in the grid's time zone -- so
   the daily rhythm is removed and the weekly one never compared across;
3. ``fleet``: before any past day of the same kind exists (a model's first day, its
   first weekend), for windows shorter than a day, the level of the last
   :data:`FLEET_WINDOWS` windows (of either kind of day) read through the records of the
   fleet's other models in the same windows (:mod:`detectors.volume_fleet`): the fleet
   says how the traffic moves from hour to hour, the model's windows what share of it
   is the model's;
4. ``shaped``: the level of the last windows of the same kind of day read through the
   reference's daily shape, for a model whose reference carries event times
   (:func:`detectors.quality.volume.shaped_expectation`, :mod:`detectors.volume_shape`):
   the shape says how the traffic moves over the day, the windows how much there is;
5. ``trailing``: the least-squares line through those windows
   (:func:`detectors.quality.volume.trend_expectation`): a daily rhythm is smooth over a
   few hours, and a Friday evening is never extrapolated into a Saturday;
6. ``none``: ``insufficient_data``, saying which of these is missing.

Of 3 to 5, the first that exists answers unless one after it is the more precise (its
relative variance the smaller: a model whose share of the fleet wanders, a reference of a
few thousand rows that knows a steep hour's share less well than the line does): each
history carries the next as its ``alternative``.

Windows longer than a day have no daily slot (and mix days of both kinds): after the
seasonal slot, the trailing line through their predecessors.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from detectors.baseline import DAY, seasonal_ranges
from detectors.quality.volume import MIN_SHAPED_WINDOWS, MIN_TREND_WINDOWS, VolumeHistory
from detectors.volume_fleet import FleetRates
from detectors.volume_shape import ShapeFit
from sketches.window import WindowGrid

#: Past days whose same hour answers before a week of history exists (a seventh would be
#: the seasonal slot).
DAILY_DAYS = 6
#: The histories of a model's first days, before a past day of the same kind exists: where
#: the fleet's records can be the control.
FIRST_DAYS = ("shaped", "trailing", "none")
#: Trailing windows the line is fitted through (the most recent first; the out-of-line
#: ones left out): 8 hours of hourly windows, over which a daily rhythm is nearly linear.
TREND_WINDOWS = 8
#: Trailing windows a model's share of the fleet is measured over: a day of hourly windows,
#: so that an incident of a few hours stays a minority of them and is left out (it never
#: becomes the level the window after it is judged against).
FLEET_WINDOWS = 24


@dataclass(frozen=True)
class VolumePlan:
    """The window starts whose counts :func:`volume_history` needs after the seasonal slot.

    Attributes
    ----------
    daily : tuple of (int, int)
        Window-start ranges ``[lo, hi)`` of the same hour on the past days, most recent
        first (empty for windows longer than a day).
    trailing : (int, int)
        Window-start range of the trailing windows.
    fleet : (int, int) or None
        Window-start range of the windows the model's share of the fleet is measured over
        (None for windows of a day or longer).
    """

    daily: tuple[tuple[int, int], ...]
    trailing: tuple[int, int]
    fleet: tuple[int, int] | None = None

    @property
    def ranges(self) -> list[tuple[int, int]]:
        """Every range to read."""
        return [*self.daily, self.fleet or self.trailing]


def plan_volume(window_start: int, window_seconds: int, grid: WindowGrid | None = None) -> VolumePlan:
    """What :func:`volume_history` reads for the window at ``window_start``.

    Examples
    --------
    >>> p = plan_volume(10 * DAY + 3_600, 3_600)
    >>> p.daily[0], len(p.daily), p.trailing, p.fleet
    ((781200, 784800), 6, (838800, 867600), (781200, 867600))
    >>> plan_volume(10 * DAY, 2 * DAY).daily, plan_volume(10 * DAY, 2 * DAY).fleet
    ((), None)
    """
    daily: tuple[tuple[int, int], ...] = ()
    if window_seconds <= DAY:
        daily = tuple(seasonal_ranges(window_start, window_seconds, DAILY_DAYS, period=DAY, grid=grid))
    fleet = (window_start - FLEET_WINDOWS * window_seconds, window_start) if window_seconds < DAY else None
    return VolumePlan(daily, (window_start - TREND_WINDOWS * window_seconds, window_start), fleet)


def is_weekend(t: float, grid: WindowGrid | None = None) -> bool:
    """Is ``t`` on a Saturday or Sunday in the grid's zone (UTC without one)?

    Examples
    --------
    >>> is_weekend(2 * DAY), is_weekend(3 * DAY)  # 1970-01-03 was a Saturday
    (True, True)
    >>> is_weekend(0)
    False
    """
    local = grid.local(t) if grid is not None else dt.datetime.fromtimestamp(t, dt.UTC)
    return local.weekday() >= 5


def seasonal_history(counts: Sequence[int], missing: str | None = None) -> VolumeHistory:
    """The seasonal slot's window counts as the volume test's history (``missing``: why
    there are none, for the note).

    Examples
    --------
    >>> seasonal_history([280, 310]).note, seasonal_history([]).note
    ('the same slot in 2 past week(s)', 'no past week holds the slot')
    """
    return VolumeHistory("seasonal", tuple(int(c) for c in counts),
                         note=f"the same slot in {len(counts)} past week(s)" if counts
                         else missing or "no past week holds the slot")


def volume_history(plan: VolumePlan, window_start: int, window_seconds: int, seasonal: Sequence[int],
                   past: Mapping[int, int], grid: WindowGrid | None = None,
                   shape: ShapeFit | None = None, fleet: FleetRates | None = None) -> VolumeHistory:
    """The history the window's count is judged against (the order: module docstring).

    Parameters
    ----------
    plan : VolumePlan
        :func:`plan_volume` of the window.
    window_start, window_seconds : int
        The window (Unix seconds, seconds).
    seasonal : sequence of int
        Record counts of the seasonal slot's windows (empty: no past week there).
    past : mapping of int to int
        Record count per window start, of the windows in ``plan``'s ranges (model
        versions summed).
    grid : WindowGrid or None
        The model's windows (the day kind is the local one).
    shape : ShapeFit or None
        The reference's daily shape, counted in the grid's zone (None: none).
    fleet : FleetRates or None
        The records of the model's fleet control in the trailing windows and this one
        (:mod:`detectors.volume_fleet`; None: none).

    Examples
    --------
    Hourly windows; a Tuesday (1970-01-06) at 10:00 with Monday's 10:00 in the past:

    >>> t = 5 * DAY + 10 * 3_600
    >>> past = {4 * DAY + 10 * 3_600: 300, **{t - k * 3_600: 290 for k in range(1, 9)}}
    >>> h = volume_history(plan_volume(t, 3_600), t, 3_600, [], past)
    >>> h.source, h.counts, h.note
    ('daily', (300,), 'the same hour on 1 past weekday(s); no past week yet')

    A Saturday (1970-01-03) at 10:00: Friday is another kind of day, so the line through
    Saturday's windows so far answers:

    >>> t = 2 * DAY + 10 * 3_600
    >>> past = {t - k * 3_600: 300 for k in range(1, 12)}
    >>> h = volume_history(plan_volume(t, 3_600), t, 3_600, [], past)
    >>> h.source, h.positions
    ('trailing', (-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0))
    >>> volume_history(plan_volume(t, 3_600), t, 3_600, [280, 310], past).source
    'seasonal'

    Saturday at 02:00, with the fleet's records in Friday's last windows and in this one:
    the fleet answers through them all (the line, with two Saturday windows, cannot):

    >>> t = 2 * DAY + 2 * 3_600
    >>> past = {t - k * 3_600: 300 for k in range(1, 9)}
    >>> fleet = FleetRates(tuple(t - k * 3_600 for k in range(8, -1, -1)), (30_000,) * 9, 150)
    >>> h = volume_history(plan_volume(t, 3_600), t, 3_600, [], past, fleet=fleet)
    >>> h.source, len(h.counts), h.alternative.source
    ('fleet', 8, 'none')
    """
    if sum(seasonal) > 0:
        return seasonal_history(seasonal)
    mixed = window_seconds > DAY
    weekend = is_weekend(window_start, grid)
    kind = "weekend day" if weekend else "weekday"
    days = [[past[s] for s in sorted(past) if lo <= s < hi]
            for lo, hi in plan.daily if is_weekend(lo, grid) == weekend]
    daily = tuple(c for day in days for c in day)
    if sum(daily) > 0:
        n_days = sum(1 for day in days if day)
        return VolumeHistory("daily", daily,
                             note=f"the same hour on {n_days} past {kind}(s); no past week yet")
    lo, hi = plan.trailing
    starts = [s for s in sorted(past) if lo <= s < hi and (mixed or is_weekend(s, grid) == weekend)]
    which = "trailing windows" if mixed else f"trailing windows of the {kind}"
    yet = "no past week" + ("" if mixed else f" or past {kind} yet")
    counts = tuple(past[s] for s in starts)
    positions = tuple((s - window_start) / window_seconds for s in starts)
    own: VolumeHistory
    if len(starts) >= MIN_TREND_WINDOWS:
        own = VolumeHistory("trailing", counts, positions,
                            note=f"the line through {len(starts)} {which}; {yet}")
    else:
        missing = "no past week" if mixed else f"no past week, no past {kind}"
        own = VolumeHistory("none", note=f"{missing} and fewer than {MIN_TREND_WINDOWS} {which}")
    if shape is not None and window_seconds < DAY and len(starts) >= MIN_SHAPED_WINDOWS:
        rates, grads = shape.window_rates(np.array([*starts, window_start]), window_seconds,
                                          grid.tz if grid is not None else None)
        own = VolumeHistory("shaped", counts, positions,
                            note=f"the level of {len(starts)} {which} through the reference's daily "
                            f"shape; {yet}",
                            relative=tuple((rates[:-1] / rates[-1]).tolist()),
                            shape_variance=shape.ratio_variance(rates[:-1], grads[:-1], grads[-1]),
                            alternative=own)
    return own if fleet is None else fleet_history(plan, window_start, window_seconds, past, fleet, own, grid)


def fleet_history(plan: VolumePlan, window_start: int, window_seconds: int, past: Mapping[int, int],
                  fleet: FleetRates, alternative: VolumeHistory,
                  grid: WindowGrid | None = None) -> VolumeHistory:
    """Step 3 of :func:`volume_history`: the level of the model's trailing windows read
    through its fleet control's records, with ``alternative`` (steps 4 to 6) answering
    instead when it is the more precise; ``alternative`` itself when the fleet spans too
    few of the model's windows (or the window is a day or longer)."""
    if plan.fleet is None or window_start not in fleet.starts:
        return alternative
    spanned = [s for s in sorted(past) if plan.fleet[0] <= s < plan.fleet[1] and s in fleet.starts]
    if len(spanned) < MIN_SHAPED_WINDOWS:
        return alternative
    relative, variance = fleet.relative(spanned, window_start)
    kind = "weekend day" if is_weekend(window_start, grid) else "weekday"
    return VolumeHistory("fleet", tuple(past[s] for s in spanned),
                         tuple((s - window_start) / window_seconds for s in spanned),
                         note=f"the level of {len(spanned)} trailing windows through the records of "
                         f"{fleet.models} other models in them; no past week or past {kind} yet",
                         relative=relative, shape_variance=variance, alternative=alternative)
