"""Tumbling event-time windows."""

from __future__ import annotations

import numpy as np

#: Monday 1970-01-05T00:00:00Z in Unix seconds: the origin of ISO-week windows.
ISO_WEEK_ORIGIN = 4 * 86_400


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

    >>> import datetime as dt
    >>> [dt.datetime.fromtimestamp(int(s), dt.UTC).strftime("%a %Y-%m-%d %H:%M")
    ...  for s in window_starts(np.array([1_700_000_000.0]), 7 * 86_400, ISO_WEEK_ORIGIN)]
    ['Mon 2023-11-13 00:00']
    """
    if window_seconds <= 0:
        raise ValueError("window_seconds must be positive")
    t = np.asarray(event_times, dtype=np.float64) - origin
    return (t // window_seconds).astype(np.int64) * window_seconds + origin
