"""Tumbling event-time windows: of one length from an origin in UTC, or following the
calendar of a time zone (days of 23 or 25 hours where daylight saving time changes)."""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass

import numpy as np

HOUR = 3_600
DAY = 86_400
#: Monday 1970-01-05T00:00:00Z in Unix seconds: the origin of ISO-week windows.
ISO_WEEK_ORIGIN = 4 * DAY
_EPOCH_DATE = dt.date(1970, 1, 1)
#: The latest Unix time (s) :meth:`WindowGrid.assign` places in a time zone's calendar
#: (two days before the end of the year 9999, Python's last date, whatever the zone).
MAX_CALENDAR_TIME = 253_402_300_799 - 2 * DAY


def window_starts(event_times: np.ndarray, window_seconds: int, origin: int = 0) -> np.ndarray:
    """Start (Unix seconds, int64) of the tumbling window holding each event time.

    Windows are ``[origin + k * window_seconds, origin + (k + 1) * window_seconds)``
    for integer ``k``: aligned to the Unix epoch (1970-01-01T00:00Z, a Thursday) by
    default, so 1-day windows are UTC days and 7-day windows start on Thursdays;
    ``origin=ISO_WEEK_ORIGIN`` (Monday 1970-01-05T00:00Z) makes 7-day windows ISO weeks.

    Parameters
    ----------
    event_times : np.ndarray
        Event times, Unix seconds, shape (n,).
    window_seconds : int
        Window length, seconds.
    origin : int
        Unix time (s) of one window start.

    Raises
    ------
    ValueError
        If ``window_seconds`` is not positive.

    Examples
    --------
    >>> window_starts(np.array([1_700_000_123.5, 1_700_000_400.0]), 300).tolist()
    [1700000100, 1700000400]

    Tuesday 2023-11-14T22:13:20Z falls in the ISO week that starts on Monday the 13th:

    >>> [dt.datetime.fromtimestamp(int(s), dt.UTC).strftime("%a %Y-%m-%d %H:%M")
    ...  for s in window_starts(np.array([1_700_000_000.0]), 7 * 86_400, ISO_WEEK_ORIGIN)]
    ['Mon 2023-11-13 00:00']
    """
    if window_seconds <= 0:
        raise ValueError("window_seconds must be positive")
    t = np.asarray(event_times, dtype=np.float64) - origin
    return (t // window_seconds).astype(np.int64) * window_seconds + origin


@dataclass(frozen=True)
class WindowGrid:
    """How a model's event times are cut into tumbling windows.

    Without ``tz``: windows of ``length`` seconds from ``origin``
    (:func:`window_starts`). With ``tz`` and ``length`` a multiple of a day: windows of
    ``length / 86400`` local calendar days, each from local midnight to the local
    midnight that ends it, counted from the local date of ``origin`` (1970-01-01, a
    Thursday, or 1970-01-05, a Monday, for ISO weeks). A window's true length is then
    the time between those two instants: a day is 23 h on the day clocks spring forward
    and 25 h on the day they fall back. Where a zone's clocks jump over midnight, the day
    starts at its first instant (the jump). With ``tz`` and ``length`` dividing an hour:
    windows of ``length`` seconds of elapsed time from each local midnight, the day's
    last one ending at the next local midnight (cut short only where a day is not a
    whole number of windows, e.g. Lord Howe Island's 24.5-hour day in hours); in zones
    whose offsets are whole hours these are the UTC-aligned windows.

    Parameters
    ----------
    length : int
        Nominal window length, seconds; with ``tz``, a multiple of 86400 or a divisor
        of 3600.
    origin : int
        Unix time (s) of one window start; with ``tz``, a whole number of days after
        1970-01-01 (only its date is used).
    tz : datetime.tzinfo or None
        The time zone whose calendar days the windows follow (e.g. a
        ``zoneinfo.ZoneInfo``; the caller loads it, so this module reads no file).

    Raises
    ------
    ValueError
        If ``length`` is not positive, or with ``tz`` neither a multiple of a day nor a
        divisor of an hour, or ``origin`` is not a whole day with ``tz``.

    Notes
    -----
    The local start of window ``k`` is midnight of the date
    ``origin_date + k * days``, converted to UTC with the zone's rules (PEP 495,
    ``fold=0``: in a gap, the offset in force before it, which maps a skipped midnight
    to the instant of the jump; an ambiguous midnight is its first occurrence). An event
    at Unix time ``t`` belongs to window ``k = floor((local_date(t) - origin_date) /
    days)``, i.e. ``start_k <= t < start_{k+1}``.

    Examples
    --------
    >>> from zoneinfo import ZoneInfo
    >>> g = WindowGrid(DAY, 0, ZoneInfo("Europe/Berlin"))
    >>> [g.window_at(t)[1] / 3600 for t in (1711839600.0, 1711922400.0, 1729980000.0)]
    [23.0, 24.0, 25.0]
    >>> g.local(g.window_at(1711839600.0)[0]).isoformat()
    '2024-03-31T00:00:00+01:00'
    """

    length: int
    origin: int = 0
    tz: dt.tzinfo | None = None

    def __post_init__(self) -> None:
        if self.length <= 0:
            raise ValueError("window length must be positive")
        if self.tz is not None and ((self.length % DAY and HOUR % self.length) or self.origin % DAY):
            raise ValueError("windows in a time zone are whole local days from a whole-day origin, "
                             "or divide an hour")

    @property
    def days(self) -> int:
        """Local days per window (with ``tz``; 1 for windows shorter than a day: the day
        they tile)."""
        return max(self.length // DAY, 1)

    def _origin_date(self) -> dt.date:
        return _EPOCH_DATE + dt.timedelta(days=self.origin // DAY)

    def _start(self, k: int) -> int:
        d = self._origin_date() + dt.timedelta(days=k * self.days)
        return int(dt.datetime(d.year, d.month, d.day, tzinfo=self.tz).timestamp())

    def _index(self, t: float) -> int:
        local = dt.datetime.fromtimestamp(t, self.tz).date()
        return (local - self._origin_date()).days // self.days

    def assign(self, event_times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and true length (Unix seconds, int64, shape (n,) each) of the window
        holding each event time.

        Raises
        ------
        ValueError
            With ``tz``, for an event time after :data:`MAX_CALENDAR_TIME` (callers pass
            only times they accept: not in the future).

        Examples
        --------
        >>> from zoneinfo import ZoneInfo
        >>> g = WindowGrid(DAY, 0, ZoneInfo("America/New_York"))
        >>> starts, lengths = g.assign(np.array([1710046799.5, 1710046800.0, 1710129599.0]))
        >>> starts.tolist(), (lengths // 3600).tolist()  # 2024-03-10, New York: a 23-hour day
        ([1709960400, 1710046800, 1710046800], [24, 23, 23])
        """
        t = np.asarray(event_times, dtype=np.float64)
        if self.tz is None:
            starts = window_starts(t, self.length, self.origin)
            return starts, np.full(starts.shape, self.length, dtype=np.int64)
        if t.size == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        try:
            found: set[int] = set()
            for u in np.unique(t // DAY).tolist():
                found.update(_period_starts(self, int(u)))
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"event time out of the calendar's range: {exc}") from None
        bounds = np.array(sorted(found), dtype=np.int64)
        i = np.searchsorted(bounds, t, side="right") - 1
        if self.length >= DAY:
            return bounds[i], bounds[i + 1] - bounds[i]
        day, end = bounds[i], bounds[i + 1]
        starts = day + (t - day) // self.length * self.length
        starts = starts.astype(np.int64)
        return starts, np.minimum(starts + self.length, end) - starts

    def window_at(self, t: float) -> tuple[int, int]:
        """(start, true length), seconds, of the window holding Unix time ``t``."""
        starts, lengths = self.assign(np.array([t]))
        return int(starts[0]), int(lengths[0])

    def shift(self, start: int, days: int) -> int:
        """Start of the window ``days`` calendar days from the one starting at ``start``
        (local days with ``tz``: the same local time of day across a DST change; for
        windows shorter than a day, the same wall-clock time, its first occurrence if
        the clocks repeat it, the time after the jump if they skip it).

        Examples
        --------
        >>> from zoneinfo import ZoneInfo
        >>> g = WindowGrid(DAY, 0, ZoneInfo("Europe/Berlin"))
        >>> (1711922400 - g.shift(1711922400, -7)) / 3600  # a week back over the spring change
        167.0
        """
        if self.tz is None:
            return start + days * DAY
        if self.length >= DAY:
            return self._start(self._index(start) + days // self.days)
        local = dt.datetime.fromtimestamp(start, self.tz)
        d = local.date() + dt.timedelta(days=days)
        return int(dt.datetime.combine(d, local.time(), self.tz).timestamp())

    def hour_start(self, t: float) -> int:
        """Start of the local wall-clock hour holding ``t`` (of the UTC hour without
        ``tz``), Unix seconds: the seasonal slot of windows up to an hour long."""
        if self.tz is None:
            return int(t // HOUR * HOUR)
        local = dt.datetime.fromtimestamp(t, self.tz)
        return int(local.replace(minute=0, second=0, microsecond=0).timestamp())

    def rollup(self, seconds: int) -> WindowGrid:
        """The grid of the model's rollup periods of ``seconds`` (an hour or a day): in
        the model's zone (local days; hours from each local midnight), else UTC."""
        return WindowGrid(seconds, 0, self.tz)

    def local(self, t: float) -> dt.datetime:
        """Unix time ``t`` as an aware datetime in the grid's zone (UTC without one)."""
        return dt.datetime.fromtimestamp(t, self.tz or dt.UTC)


@functools.lru_cache(maxsize=4_096)
def _period_starts(grid: WindowGrid, utc_day: int) -> tuple[int, ...]:
    """Starts of the grid's periods (local days, or windows of ``days`` local days) that
    may hold a time of UTC day ``utc_day``, with one more on each side, so that the
    period after each is listed too: the period ``k(t)`` of a time lies between those of
    its UTC day's first and last second (``k`` never decreases with time). Cached: a
    message's records mostly share one UTC day, and converting dates in a zone costs
    microseconds each."""
    lo, hi = grid._index(utc_day * DAY), grid._index(utc_day * DAY + DAY - 1)
    return tuple(grid._start(k) for k in range(lo - 1, hi + 2))
