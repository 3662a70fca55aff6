"""Baselines: which past profiles a window is compared with, merged into one profile.

Pure functions: the caller (the detector worker) fetches the profiles whose
window starts fall in the ranges given here and passes them in.

* reference: a profile uploaded by the user (e.g. the training data);
* trailing: the windows of the ``span`` seconds before the current window's
  hour (e.g. the previous 24 h merged);
* seasonal: the windows in the same slot of the week (the same hour of the
  week for windows up to an hour long, else the same window) over the
  previous ``weeks`` weeks, which removes daily and weekly seasonality (for windows of
  local days in a time zone, the same local weekday: :func:`seasonal_ranges`). It
  cannot exist for a window longer than the week
  (:func:`seasonal_unavailable`); such a window falls back to the trailing
  baseline, which then reaches back at least one window, and the baseline
  says why (:attr:`Baseline.note`).

Resolution is plan, fetch, compute: :func:`plan_baseline` says what a window
needs (pure), the worker reads it, :func:`choose_baseline` (the ``auto`` rule,
in this one place) and :func:`pool_window` (a low-traffic window merged with
the windows before it until it holds a test's minimum sample) compute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sketches.profile import WindowProfile
from sketches.window import WindowGrid

HOUR = 3_600
DAY = 86_400
WEEK = 7 * DAY


@dataclass(frozen=True)
class Baseline:
    """A merged baseline profile and where it came from.

    Attributes
    ----------
    kind : str
        ``"reference"``, ``"trailing"`` or ``"seasonal"``.
    profile : WindowProfile
    windows : int
        Window profiles merged (0 for a reference).
    note : str or None
        Why this baseline and not the one asked for (e.g. the seasonal baseline
        cannot exist for the window); None when it is the one asked for.
    """

    kind: str
    profile: WindowProfile
    windows: int
    note: str | None = None


def seasonal_unavailable(window_seconds: int, period: int = WEEK) -> str | None:
    """Why no seasonal baseline can exist for windows of ``window_seconds``, or None.

    Examples
    --------
    >>> seasonal_unavailable(3_600) is None, seasonal_unavailable(WEEK) is None
    (True, True)
    >>> seasonal_unavailable(31 * DAY)
    'the window (31 d) is longer than the seasonal period (7 d)'
    """
    if window_seconds <= period:
        return None
    return (f"the window ({window_seconds / DAY:g} d) is longer than the seasonal period "
            f"({period / DAY:g} d)")


def trailing_span(window_seconds: int, trailing_seconds: int) -> int:
    """Seconds of history the trailing baseline merges: the configured span, and at
    least one window (so a window longer than the span still has a predecessor).

    Examples
    --------
    >>> trailing_span(300, DAY), trailing_span(31 * DAY, DAY) == 31 * DAY
    (86400, True)
    """
    return max(trailing_seconds, window_seconds)


def trailing_range(window_start: int, span: int = DAY) -> tuple[int, int]:
    """Window starts ``[lo, hi)`` of the trailing baseline.

    The range ends at the hour holding ``window_start`` (so the windows of
    one hour share one baseline, which the caller can cache).

    Raises
    ------
    ValueError
        If ``span`` is not positive.

    Examples
    --------
    >>> trailing_range(10 * 3600 + 600)
    (-50400, 36000)
    """
    if span <= 0:
        raise ValueError("span must be positive")
    hour = window_start // HOUR * HOUR
    return hour - span, hour


def seasonal_ranges(window_start: int, window_seconds: int, weeks: int,
                    period: int = WEEK, grid: WindowGrid | None = None) -> list[tuple[int, int]]:
    """Window starts ``[lo, hi)`` of the same slot of the period, one range per past period.

    The slot is the hour holding the window for windows up to an hour long,
    else the window itself; ranges are listed most recent first. On a ``grid`` in a
    time zone, the slot is the same local wall-clock hour (windows up to an hour long)
    or the window that starts at the same local midnight (windows of local days) on the
    same day of the week ``j`` periods back, whose UTC time differs by an hour when a
    DST change lies between (so ``window_start - j * period`` would miss it, or find
    the neighbouring hour or day).

    Parameters
    ----------
    window_start : int
        The current window's start, Unix seconds.
    window_seconds : int
        The window length, seconds (nominal: a grid's ``length``).
    weeks : int
        Past periods to list.
    period : int
        The seasonal period, seconds (a whole number of days on a grid in a zone).
    grid : WindowGrid or None
        The model's windows (:class:`sketches.window.WindowGrid`); None or without a
        time zone: UTC arithmetic.

    Raises
    ------
    ValueError
        If ``weeks < 1`` or the window is longer than the period.

    Examples
    --------
    >>> seasonal_ranges(2 * 604800 + 3900, 300, weeks=2)
    [(608400, 612000), (3600, 7200)]

    Monday 2024-04-01 in Berlin (CEST) and the Mondays before it, the first in CET:

    >>> from zoneinfo import ZoneInfo
    >>> g = WindowGrid(DAY, 0, ZoneInfo("Europe/Berlin"))
    >>> [(1711922400 - lo) / 3600 for lo, _hi in seasonal_ranges(1711922400, DAY, 2, grid=g)]
    [167.0, 335.0]

    Five-minute windows in Berlin: 10:05 CEST on 2024-04-01 looks at 10:00-11:00 CET a
    week before:

    >>> g5 = WindowGrid(300, 0, ZoneInfo("Europe/Berlin"))
    >>> [(g5.local(lo).isoformat(), (hi - lo) // 60)
    ...  for lo, hi in seasonal_ranges(1711958700, 300, 1, grid=g5)]
    [('2024-03-25T10:00:00+01:00', 60)]
    """
    if weeks < 1:
        raise ValueError("weeks must be >= 1")
    if window_seconds > period:
        raise ValueError("window longer than the seasonal period")
    if grid is not None and grid.tz is not None:
        days = period // DAY
        if window_seconds <= HOUR:  # the same local wall-clock hour
            slots = [grid.shift(grid.hour_start(window_start), -j * days) for j in range(1, weeks + 1)]
            return [(s, s + HOUR) for s in slots]
        starts = [grid.shift(window_start, -j * days) for j in range(1, weeks + 1)]
        return [(s, s + 1) for s in starts]
    if window_seconds <= HOUR:
        start, length = window_start // HOUR * HOUR, HOUR
    else:
        start, length = window_start, window_seconds
    return [(start - j * period, start - j * period + length) for j in range(1, weeks + 1)]


def merge_profiles(model_id: str, profiles: Iterable[WindowProfile]) -> WindowProfile:
    """A new profile holding every given profile (the inputs are not modified).

    Examples
    --------
    >>> from sdk.record import PredictionRecord
    >>> a, b = WindowProfile("m", 0, 300), WindowProfile("m", 300, 300)
    >>> a.add_records([PredictionRecord("m", "1", "a", 1.0, {"x": 1.0})])
    >>> b.add_records([PredictionRecord("m", "1", "b", 301.0, {"x": 2.0})])
    >>> merged = merge_profiles("m", [a, b])
    >>> merged.count, a.count, merged.features["x"].numeric.max
    (2, 1, 2.0)
    """
    out = WindowProfile(model_id, 0, 0)
    for p in profiles:
        out.merge(p)
    return out


def window_counts(profiles: Iterable[WindowProfile]) -> list[int]:
    """Record count per window start (model versions summed), by start.

    Examples
    --------
    >>> a, b = WindowProfile("m", 0, 300), WindowProfile("m", 0, 300)
    >>> a.count, b.count = 3, 4
    >>> window_counts([a, b])
    [7]
    """
    by_start: dict[int, int] = {}
    for p in profiles:
        by_start[p.window_start] = by_start.get(p.window_start, 0) + p.count
    return [by_start[s] for s in sorted(by_start)]


def merged_baseline(kind: str, model_id: str, profiles: Sequence[WindowProfile]) -> Baseline | None:
    """A trailing or seasonal :class:`Baseline` of past windows; None when there are none.

    Examples
    --------
    >>> w = WindowProfile("m", 0, 300); w.count = 5
    >>> b = merged_baseline("trailing", "m", [w, w])
    >>> b.kind, b.profile.count, b.windows
    ('trailing', 10, 2)
    """
    if not profiles:
        return None
    return Baseline(kind, merge_profiles(model_id, profiles), len(profiles))


@dataclass(frozen=True)
class BaselinePlan:
    """What resolving one window's baseline reads (:func:`plan_baseline`); the worker
    fetches it, :func:`choose_baseline` and :func:`pool_window` compute the answer.

    Attributes
    ----------
    kind : str
        The configured kind.
    reference : bool
        Read the reference profile.
    seasonal : tuple of (int, int)
        Window-start ranges ``[lo, hi)`` of the seasonal slot (empty: not read).
    trailing : (int, int) or None
        Window-start range of the trailing baseline (None: not read).
    trailing_if_needed : bool
        Read ``trailing`` only when neither a reference nor a seasonal baseline
        answered (``auto``).
    pool : (int, int) or None
        Window-start range of the windows preceding the current one that it is
        pooled with, most recent first (None: it holds enough records).
    seasonal_missing : str or None
        Why no seasonal baseline can exist for this window.
    """

    kind: str
    reference: bool
    seasonal: tuple[tuple[int, int], ...]
    trailing: tuple[int, int] | None
    trailing_if_needed: bool
    pool: tuple[int, int] | None
    seasonal_missing: str | None


def plan_baseline(kind: str, window_start: int, window_seconds: int, count: int, *,
                  trailing_seconds: int = DAY, seasonal_weeks: int = 4, min_records: int = 30,
                  pool_windows: int = 14, grid: WindowGrid | None = None) -> BaselinePlan:
    """What the baseline of one window needs.

    Parameters
    ----------
    kind : str
        ``"auto"``, ``"reference"``, ``"seasonal"`` or ``"trailing"``.
    window_start, window_seconds : int
        The window (Unix seconds, seconds).
    count : int
        Records the window holds. Below ``min_records`` (the tests' minimum
        sample) it is pooled with up to ``pool_windows`` preceding windows, and
        its trailing baseline ends where the pool's range begins and reaches
        back ``4 * pool_windows`` windows (at least ``trailing_seconds``); a
        seasonal baseline with fewer than ``min_records`` records is passed over
        (:func:`usable`).
    trailing_seconds, seasonal_weeks : int
        :class:`~detectors.config.BaselineConfig`.
    grid : WindowGrid or None
        The model's windows: on one in a time zone, windows of local days have
        the grid's nominal length (DST changes theirs), their seasonal slot is the
        same local weekday (:func:`seasonal_ranges`) and their trailing span
        reaches the previous local day.

    Examples
    --------
    >>> p = plan_baseline("auto", 2 * WEEK + 3900, 300, 500)
    >>> p.reference, p.seasonal[0], p.trailing, p.trailing_if_needed, p.pool
    (True, (608400, 612000), (1126800, 1213200), True, None)
    >>> q = plan_baseline("auto", 200 * DAY, DAY, 5)
    >>> q.pool == (186 * DAY, 200 * DAY), q.trailing == (130 * DAY, 186 * DAY), len(q.seasonal)
    (True, True, 4)
    """
    pooled = count < min_records
    nominal, span_length = window_seconds, window_seconds
    if grid is not None and grid.tz is not None and grid.length >= DAY:
        nominal = grid.length
        span_length = max(window_seconds, window_start - grid.shift(window_start, -grid.days))
    missing = seasonal_unavailable(nominal)
    seasonal: tuple[tuple[int, int], ...] = ()
    if missing is None and kind in ("seasonal", "auto"):
        seasonal = tuple(seasonal_ranges(window_start, nominal, seasonal_weeks, grid=grid))
    pool = (window_start - pool_windows * window_seconds, window_start) if pooled else None
    end = window_start if pool is None else pool[0]
    span = trailing_span(span_length, trailing_seconds)
    if pool is not None:
        span = max(span, 4 * pool_windows * window_seconds)
        trailing = (end - span, end)
    else:
        trailing = trailing_range(window_start, span)
    wants_trailing = kind in ("trailing", "auto") or (kind == "seasonal" and missing is not None)
    return BaselinePlan(kind, kind in ("reference", "auto"), seasonal,
                        trailing if wants_trailing else None, kind == "auto", pool, missing)


def pool_window(current: WindowProfile, preceding: Sequence[WindowProfile],
                min_records: int) -> tuple[WindowProfile, int]:
    """``current`` merged with the most recent of ``preceding`` until it holds
    ``min_records`` records (or every one of them is in); and the windows added.

    Profiles merge exactly, so the pooled window is the profile one longer window
    would have had.

    Examples
    --------
    >>> ws = [WindowProfile("m", s, 86400) for s in (0, 86400, 172800)]
    >>> for w in ws: w.count = 5
    >>> pooled, added = pool_window(ws[2], ws[:2], 8)
    >>> pooled.count, added, ws[2].count
    (10, 1, 5)
    """
    if current.count >= min_records or not preceding:
        return current, 0
    out = merge_profiles(current.model_id, [current])
    out.window_start, out.window_seconds = current.window_start, current.window_seconds
    added = 0
    by_start: dict[int, list[WindowProfile]] = {}
    for p in preceding:
        by_start.setdefault(p.window_start, []).append(p)
    for start in sorted(by_start, reverse=True):
        if out.count >= min_records:
            break
        for p in by_start[start]:
            out.merge(p)
        added += 1
    return out, added


def usable(baseline: Baseline | None, min_records: int) -> Baseline | None:
    """``baseline`` when it holds at least ``min_records`` records (a low-traffic
    model's seasonal slot may not), else None.

    Examples
    --------
    >>> w = WindowProfile("m", 0, 300); w.count = 5
    >>> usable(merged_baseline("seasonal", "m", [w] * 4), 30) is None
    True
    """
    return baseline if baseline is not None and baseline.profile.count >= min_records else None


def choose_baseline(
    kind: str,
    reference: WindowProfile | None,
    seasonal: Baseline | None,
    trailing: Baseline | None,
    seasonal_missing: str | None = None,
) -> Baseline | None:
    """The baseline a model's configuration asks for, or None when it has no data.

    Parameters
    ----------
    kind : str
        ``"auto"``, ``"reference"``, ``"seasonal"`` or ``"trailing"``.
    reference : WindowProfile or None
    seasonal, trailing : Baseline or None
        See :func:`merged_baseline`.
    seasonal_missing : str or None
        Why no seasonal baseline can exist for this window
        (:func:`seasonal_unavailable`); then ``seasonal`` falls back to the
        trailing baseline, and ``auto`` without a reference says so too.

    Returns
    -------
    Baseline or None
        ``auto``: the reference if there is one, else the seasonal baseline if
        any past week has windows in the slot, else the trailing one. (A full
        seasonal history does not displace a reference: it holds the model's
        past incidents, and a window after one reads as a change back; see
        docs/detectors.md.) ``seasonal`` for a window that cannot have one: the trailing one,
        with the reason in its ``note``.

    Examples
    --------
    >>> w = WindowProfile("m", 0, 300); w.count = 5
    >>> choose_baseline("auto", None, None, merged_baseline("trailing", "m", [w])).kind
    'trailing'
    >>> choose_baseline("auto", w, merged_baseline("seasonal", "m", [w] * 4), None).kind
    'reference'
    >>> choose_baseline("seasonal", None, None, merged_baseline("trailing", "m", [w])) is None
    True
    >>> choose_baseline("seasonal", None, None, merged_baseline("trailing", "m", [w]),
    ...                 seasonal_unavailable(31 * DAY)).note
    'no seasonal baseline: the window (31 d) is longer than the seasonal period (7 d); trailing windows used'
    """
    if kind in ("reference", "auto") and reference is not None:
        return Baseline("reference", reference, 0)
    if seasonal_missing is not None and kind in ("seasonal", "auto") and trailing is not None:
        note = f"no seasonal baseline: {seasonal_missing}; trailing windows used"
        return Baseline(trailing.kind, trailing.profile, trailing.windows, note)
    for name, candidate in (("seasonal", seasonal), ("trailing", trailing)):
        if kind in (name, "auto") and candidate is not None:
            return candidate
    return None
